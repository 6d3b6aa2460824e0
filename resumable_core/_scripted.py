"""The scripted Claude: checks each request as the Messages API does, then answers by script.

Deterministic: the same conversation always gets the same reply, ids and usage.
The policy reads only the request (as a real model would); it never peeks at the world.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from .checkpoint import text_of as _text_of
from .scenarios import EMAIL_SUBJECT, EMAIL_TASK, NOTES_TASK
from .world import TEAM_ADDRESS

STATUS_UNKNOWN_MARK = "status unknown"

_B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


class APIRuleError(Exception):
    """A request the real API would refuse with 400 invalid_request_error."""


def _blocks(m: dict) -> list[dict]:
    c = m.get("content")
    if isinstance(c, str):
        return [{"type": "text", "text": c}]
    if not isinstance(c, list):
        raise APIRuleError("messages: content must be a string or a list of content blocks")
    return c


def check_request(body: dict[str, Any]) -> None:
    """Raise APIRuleError with the real API's message text for a request it would refuse."""
    for field in ("model", "max_tokens", "messages"):
        if field not in body:
            raise APIRuleError(f"{field}: Field required")
    msgs = body["messages"]
    if not msgs:
        raise APIRuleError("messages: at least one message is required")
    if msgs[0].get("role") != "user":
        raise APIRuleError('messages: first message must use the "user" role')
    for i, m in enumerate(msgs):
        if m.get("role") not in ("user", "assistant"):
            raise APIRuleError(f"messages.{i}.role: Input should be 'user' or 'assistant'")
        if i and m["role"] == msgs[i - 1]["role"]:
            raise APIRuleError(
                f'messages: roles must alternate between "user" and "assistant", but found multiple "{m["role"]}" roles in a row'
            )
    for i, m in enumerate(msgs):
        bl = _blocks(m)
        if m["role"] == "assistant":
            ids = [b.get("id") for b in bl if b.get("type") == "tool_use"]
            if not ids:
                continue
            nxt = _blocks(msgs[i + 1]) if i + 1 < len(msgs) else []
            answered = {b.get("tool_use_id") for b in nxt if b.get("type") == "tool_result"}
            missing = [x for x in ids if x not in answered]
            if missing:
                raise APIRuleError(
                    f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                    f"{', '.join(missing)}. Each `tool_use` block must have a corresponding `tool_result` block in the next message."
                )
            lead = 0
            while lead < len(nxt) and nxt[lead].get("type") == "tool_result":
                lead += 1
            if lead < len(ids):
                raise APIRuleError(
                    f"messages.{i + 1}: Did not find {len(ids)} `tool_result` block(s) at the beginning of this message. "
                    "Messages following `tool_use` blocks must begin with a matching number of `tool_result` blocks."
                )
        else:
            prev = _blocks(msgs[i - 1]) if i else []
            prev_ids = {b.get("id") for b in prev if b.get("type") == "tool_use"}
            for k, b in enumerate(bl):
                if b.get("type") == "tool_result" and b.get("tool_use_id") not in prev_ids:
                    raise APIRuleError(
                        f"messages.{i}.content.{k}: unexpected `tool_use_id` found in `tool_result` blocks: "
                        f"{b.get('tool_use_id')}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                    )
    if msgs[-1]["role"] == "assistant":
        raise APIRuleError(
            "This model does not support assistant message prefill. The conversation must end with a user message."
        )
    tools = {t.get("name") for t in body.get("tools") or []}
    for i, m in enumerate(msgs):
        for b in _blocks(m):
            if b.get("type") == "tool_use" and b.get("name") not in tools:
                raise APIRuleError(f"messages.{i}: tool_use names a tool that is not in `tools`: {b.get('name')}")


# -- the script ------------------------------------------------------------------------------


def _history(msgs: list[dict]) -> list[dict]:
    """Each tool call in order: name, input, result text, is_error."""
    calls: dict[str, dict] = {}
    order: list[dict] = []
    for m in msgs:
        for b in _blocks(m):
            if b.get("type") == "tool_use":
                calls[b["id"]] = {"name": b["name"], "input": b.get("input", {}), "result": None, "is_error": False}
                order.append(calls[b["id"]])
            elif b.get("type") == "tool_result" and b.get("tool_use_id") in calls:
                c = calls[b["tool_use_id"]]
                c["result"] = _text_of(b.get("content"))
                c["is_error"] = bool(b.get("is_error"))
    return order


def _use(name: str, tool_input: dict, text: str) -> tuple[list[dict], str]:
    return [{"type": "text", "text": text}, {"type": "tool_use", "name": name, "input": tool_input}], "tool_use"


def _say(text: str) -> tuple[list[dict], str]:
    return [{"type": "text", "text": text}], "end_turn"


def _notes_policy(hist: list[dict]) -> tuple[list[dict], str]:
    listing = next((c for c in hist if c["name"] == "list_dir" and c["result"] and not c["is_error"]), None)
    if listing is None:
        return _use("list_dir", {"path": "."}, "I'll start by listing the meeting notes.")
    wanted = [n for n in listing["result"].splitlines() if n.startswith("meeting-")]
    done = {
        c["input"].get("path")
        for c in hist
        if c["name"] == "read_file" and c["result"] is not None and not c["is_error"]
    }
    for name in wanted:
        if name not in done:
            return _use("read_file", {"path": name}, f"Reading {name}.")
    decisions = []
    for c in hist:
        if c["name"] == "read_file" and not c["is_error"] and c["result"]:
            decisions += [ln.strip("- ") for ln in c["result"].splitlines() if "Decision" in ln]
    summary = "\n".join(f"- {d}" for d in dict.fromkeys(decisions))
    return _say(f"Summary of this week's meetings ({len(wanted)} notes):\n{summary}")


def _email_policy(hist: list[dict]) -> tuple[list[dict], str]:
    note = next((c for c in hist if c["name"] == "read_file" and c["result"] is not None and not c["is_error"]), None)
    if note is None:
        return _use("read_file", {"path": "conclusion.md"}, "Let me read the conclusion first.")
    email = {"to": TEAM_ADDRESS, "subject": EMAIL_SUBJECT, "body": note["result"].strip()}
    last = hist[-1]
    if last["name"] == "send_email" and last["result"] is not None:
        if not last["is_error"]:
            return _say(f"Done: I emailed the conclusion to {TEAM_ADDRESS}.")
        if STATUS_UNKNOWN_MARK in last["result"].lower():
            return _use(
                "list_sent_emails", {}, "The send may or may not have happened. I'll check the outbox before acting."
            )
        return _say(f"I could not send the email: {last['result']}")
    if last["name"] == "list_sent_emails" and last["result"] is not None:
        if EMAIL_SUBJECT in last["result"]:
            return _say(f"The outbox shows the email to {TEAM_ADDRESS} was already sent, so I won't send it again.")
        return _use("send_email", email, "The outbox has no such email, so it was never sent. Sending it now.")
    return _use("send_email", email, f"Sending the conclusion to {TEAM_ADDRESS}.")


def decide(body: dict[str, Any]) -> tuple[list[dict], str]:
    """The scripted reply (content blocks without ids, stop_reason) for a valid request."""
    msgs = body["messages"]
    task = _text_of(msgs[0]["content"]).strip()
    hist = _history(msgs)
    tools = {t.get("name") for t in body.get("tools") or []}
    if task == NOTES_TASK and {"list_dir", "read_file"} <= tools:
        return _notes_policy(hist)
    if task == EMAIL_TASK and {"read_file", "send_email", "list_sent_emails"} <= tools:
        return _email_policy(hist)
    return _say(
        "I am the scripted Claude of this kit; I know two tasks: "
        f"{NOTES_TASK!r} and {EMAIL_TASK!r}. Set RESUMABLE_LIVE=1 and ANTHROPIC_API_KEY for live Claude."
    )


def _digest(data: Any) -> str:
    raw = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).digest()
    n = int.from_bytes(raw, "big")
    out = ""
    for _ in range(24):
        n, r = divmod(n, 62)
        out += _B62[r]
    return out


def _tokens(data: Any) -> int:
    return max(1, len(json.dumps(data, sort_keys=True)) // 4)


def respond(body: dict[str, Any]) -> dict[str, Any]:
    """A complete Messages API response for a valid request."""
    content, stop = decide(body)
    digest = _digest(body["messages"])
    for k, b in enumerate(content):
        if b["type"] == "tool_use":
            b["id"] = f"toolu_01{_digest([digest, k])[:22]}"
    return {
        "id": f"msg_01{digest[:22]}",
        "type": "message",
        "role": "assistant",
        "model": body["model"],
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            "input_tokens": _tokens({"m": body["messages"], "t": body.get("tools")}),
            "output_tokens": _tokens(content),
        },
    }


class ScriptedClaude:
    """An httpx transport handler serving ``POST /v1/messages`` like the API does."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def handle(self, request: Any) -> Any:
        import httpx2

        if request.method != "POST" or not request.url.path.endswith("/v1/messages"):
            return httpx2.Response(404, json=_error("not_found_error", f"Not found: {request.url.path}"))
        try:
            body = json.loads(request.content)
        except ValueError:
            return httpx2.Response(400, json=_error("invalid_request_error", "Request body is not valid JSON"))
        self.requests.append(body)
        try:
            check_request(body)
        except APIRuleError as e:
            return httpx2.Response(400, json=_error("invalid_request_error", str(e)), headers=_headers(body))
        return httpx2.Response(200, json=respond(body), headers=_headers(body))


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_scripted"}


def _headers(body: dict) -> dict[str, str]:
    return {"request-id": f"req_01{_digest(body.get('messages', []))[:22]}", "content-type": "application/json"}
