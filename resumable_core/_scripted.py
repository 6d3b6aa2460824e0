"""The scripted Claude: checks each request as the Messages API does, then answers by script.

The same conversation always gets the same reply and usage. Ids (``toolu_01…``, ``msg_01…``,
``req_01…``) are unique per response, as the API's are; ``ScriptedClaude(seed=...)`` makes
their sequence reproducible (for fixtures), the default draws them from the OS.
The policy reads only the request (as a real model would); it never peeks at the world.
"""

from __future__ import annotations

import json
import random
from typing import Any

from .checkpoint import blocks as _blocks
from .checkpoint import text_of as _text_of
from .protocol import request_problem
from .scenarios import BRIEFING_TASK, EMAIL_SUBJECT, EMAIL_TASK, NOTES_TASK, RETRO_NOTE
from .world import TEAM_ADDRESS

STATUS_UNKNOWN_MARK = "status unknown"

_B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


class APIRuleError(Exception):
    """A request the real API would refuse with 400 invalid_request_error; the message is its text."""


def check_request(body: Any) -> None:
    """Raise APIRuleError with the real API's message text for a request it would refuse."""
    problem = request_problem(body)
    if problem:
        raise APIRuleError(problem)


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


def _uses(text: str, calls: list[tuple[str, dict]]) -> tuple[list[dict], str]:
    """One reply asking for several tools at once (parallel tool use), in this order."""
    return [
        {"type": "text", "text": text},
        *({"type": "tool_use", "name": n, "input": i} for n, i in calls),
    ], "tool_use"


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


def _answered(hist: list[dict], name: str, **tool_input: str) -> dict | None:
    """The last call of ``name`` (with that input, if given) that has a result, or None."""
    calls = [c for c in hist if c["name"] == name and c["result"] is not None]
    calls = [c for c in calls if all(c["input"].get(k) == v for k, v in tool_input.items())]
    return calls[-1] if calls else None


def _briefing_policy(hist: list[dict]) -> tuple[list[dict], str]:
    note = _answered(hist, "read_file", path="conclusion.md")
    if note is None or note["is_error"]:
        return _use("read_file", {"path": "conclusion.md"}, "Let me read the conclusion first.")
    email = {"to": TEAM_ADDRESS, "subject": EMAIL_SUBJECT, "body": note["result"].strip()}
    sent, retro = _answered(hist, "send_email"), _answered(hist, "read_file", path=RETRO_NOTE)
    outbox = _answered(hist, "list_sent_emails")
    calls: list[tuple[str, dict]] = []
    unknown = sent is not None and sent["is_error"] and STATUS_UNKNOWN_MARK in sent["result"].lower()
    if sent is None:
        calls.append(("send_email", email))
    elif unknown and (outbox is None or hist.index(outbox) < hist.index(sent)):
        calls.append(("list_sent_emails", {}))  # the send may or may not have happened: look first
    elif unknown and outbox is not None and EMAIL_SUBJECT not in outbox["result"]:
        calls.append(("send_email", email))
    if retro is None or retro["is_error"]:
        calls.append(("read_file", {"path": RETRO_NOTE}))
    if calls or sent is None or retro is None:  # (the last two imply a call: they tell mypy so)
        return _uses("I'll do these at the same time.", calls)
    decisions = "; ".join(ln.strip("- ") for ln in retro["result"].splitlines() if "Decision" in ln)
    if sent["is_error"] and not unknown:
        return _say(f"I could not send the email: {sent['result']} The Aug 25 retro decided: {decisions}")
    return _say(f"The conclusion is emailed to {TEAM_ADDRESS}. The Aug 25 retro decided: {decisions}")


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
    if task == BRIEFING_TASK and {"read_file", "send_email", "list_sent_emails"} <= tools:
        return _one_at_a_time(body, _briefing_policy(hist))
    return _say(
        "I am the scripted Claude of this kit; I know three tasks: "
        f"{NOTES_TASK!r}, {EMAIL_TASK!r} and {BRIEFING_TASK!r}. Set RESUMABLE_LIVE=1 and ANTHROPIC_API_KEY for live Claude."
    )


def _one_at_a_time(body: dict[str, Any], reply: tuple[list[dict], str]) -> tuple[list[dict], str]:
    """The reply with only its first tool call when the request sets ``disable_parallel_tool_use``."""
    content, stop = reply
    choice = body.get("tool_choice")
    if not (isinstance(choice, dict) and choice.get("disable_parallel_tool_use") is True):
        return reply
    uses = [b for b in content if b["type"] == "tool_use"]
    return [b for b in content if b["type"] != "tool_use" or b is uses[0]], stop


class IdStream:
    """Ids in the API's format: a prefix, ``01``, then 22 base62 characters.

    Seeded, the sequence is reproducible; unseeded, each id comes from ``os.urandom``,
    so processes forked from one parent still never share ids.
    """

    def __init__(self, seed: int | str | None = None) -> None:
        self._rng = random.Random(seed) if seed is not None else random.SystemRandom()

    def new(self, prefix: str) -> str:
        """A fresh id such as ``toolu_01`` + 22 characters."""
        return f"{prefix}_01" + "".join(self._rng.choice(_B62) for _ in range(22))


def _tokens(data: Any) -> int:
    return max(1, len(json.dumps(data, sort_keys=True)) // 4)


def respond(body: dict[str, Any], ids: IdStream | None = None) -> dict[str, Any]:
    """A complete Messages API response for a valid request, its ids drawn from ``ids``."""
    ids = ids if ids is not None else IdStream()
    content, stop = decide(body)
    for b in content:
        if b["type"] == "tool_use":
            b["id"] = ids.new("toolu")
    return {
        "id": ids.new("msg"),
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
    """An httpx transport handler serving ``POST /v1/messages`` like the API does.

    ``seed`` makes the ids of its responses reproducible; ``None`` (the default) makes them random.
    """

    def __init__(self, *, seed: int | str | None = None) -> None:
        self.requests: list[Any] = []
        self.ids = IdStream(seed)

    def handle(self, request: Any) -> Any:
        import httpx2

        if request.method != "POST" or not request.url.path.endswith("/v1/messages"):
            return httpx2.Response(404, json=_error("not_found_error", f"Not found: {request.url.path}"))
        request_id = self.ids.new("req")
        headers = {"request-id": request_id, "content-type": "application/json"}
        try:
            body = json.loads(request.content)
        except ValueError:
            error = _error("invalid_request_error", "Request body is not valid JSON", request_id)
            return httpx2.Response(400, json=error, headers=headers)
        self.requests.append(body)
        try:
            check_request(body)
        except APIRuleError as e:
            return httpx2.Response(400, json=_error("invalid_request_error", str(e), request_id), headers=headers)
        return httpx2.Response(200, json=respond(body, self.ids), headers=headers)


def _error(kind: str, message: str, request_id: str = "req_scripted") -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}, "request_id": request_id}
