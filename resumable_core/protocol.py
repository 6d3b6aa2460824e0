"""The Messages API's shape rules, in one place, each with the 400 text the real API answers.

The scripted Claude checks every request with :func:`request_problem`; the checkpoint loader
checks a conversation's past with :func:`messages_problem` (``open_end=True``). So a checkpoint
the loader accepts is never refused by the API for its shape.

The texts were gathered from public issue threads quoting the API's ``invalid_request_error``
answers; the field errors follow the API's validator (``messages.1.content.0.tool_use.id: …``).
As the API does, consecutive messages of one role are combined into one turn before the
pairing rules apply, and a past ``tool_use`` may name a tool that is not in ``tools``.
"""

from __future__ import annotations

import re
from typing import Any

TOOL_ID_PATTERN = "^[a-zA-Z0-9_-]+$"
_TOOL_ID = re.compile(r"[a-zA-Z0-9_-]+")  # used with fullmatch: "$" would let a trailing newline through

BLOCK_FIELDS: dict[str, dict[str, type]] = {
    "text": {"text": str},
    "image": {"source": dict},
    "document": {"source": dict},
    "tool_use": {"id": str, "name": str, "input": dict},
    "tool_result": {"tool_use_id": str},
    "thinking": {"thinking": str, "signature": str},
    "redacted_thinking": {"data": str},
}
"""The content block types the kit knows, each with its required fields and their JSON types."""
RESULT_BLOCK_TYPES = ("text", "image", "document")
"""The block types a ``tool_result``'s list content may hold."""

PREFILL_MODEL_PREFIXES = (
    "claude-3",
    "claude-sonnet-4-0",
    "claude-sonnet-4-2",
    "claude-sonnet-4-5",
    "claude-opus-4-0",
    "claude-opus-4-1",
    "claude-opus-4-2",
    "claude-opus-4-5",
    "claude-haiku-4-5",
)
"""Model ids (by prefix) that accept a trailing assistant message (prefill); newer models refuse it."""

_JSON_TYPE = {str: "a valid string", dict: "a valid dictionary", bool: "a valid boolean"}

EMPTY_CONTENT = "all messages must have non-empty content except for the optional final assistant message"
EMPTY_TEXT = "messages: text content blocks must be non-empty"
BLANK_TEXT = "messages: text content blocks must contain non-whitespace text"
FIRST_ROLE = 'messages: first message must use the "user" role'
NO_PREFILL = "This model does not support assistant message prefill. The conversation must end with a user message."
DUPLICATE_TOOL_ID = "`tool_use` ids must be unique"
DUPLICATE_TOOL_NAME = "tools: Tool names must be unique."


def supports_prefill(model: str) -> bool:
    """True when ``model`` accepts a conversation ending with an assistant message."""
    return model.startswith(PREFILL_MODEL_PREFIXES)


def _type_error(loc: str, value: Any, expected: type) -> str | None:
    return None if isinstance(value, expected) else f"{loc}: Input should be {_JSON_TYPE[expected]}"


def _text_problem(text: str) -> str | None:
    if not text:
        return EMPTY_TEXT
    if not text.strip():
        return BLANK_TEXT
    return None


def _result_content_problem(loc: str, content: Any) -> str | None:
    if content is None or isinstance(content, str):
        return None
    if not isinstance(content, list):
        return f"{loc}: Input should be a valid string or a valid list"
    for j, inner in enumerate(content):
        problem = block_problem(inner, f"{loc}.{j}", types=RESULT_BLOCK_TYPES)
        if problem:
            return problem
    return None


def block_problem(block: Any, loc: str, *, types: tuple[str, ...] = tuple(BLOCK_FIELDS)) -> str | None:
    """The API's text for one malformed content block at ``loc`` (``messages.i.content.k``), or None."""
    if not isinstance(block, dict):
        return f"{loc}: Input should be a valid dictionary or object to extract fields from"
    kind = block.get("type")
    if kind is None:
        return f"{loc}: Unable to extract tag using discriminator 'type'"
    if kind not in types:
        allowed = ", ".join(f"'{t}'" for t in types)
        return f"{loc}: Input tag '{kind}' found using 'type' does not match any of the expected tags: {allowed}"
    for name, expected in BLOCK_FIELDS[kind].items():
        if name not in block:
            return f"{loc}.{kind}.{name}: Field required"
        problem = _type_error(f"{loc}.{kind}.{name}", block[name], expected)
        if problem:
            return problem
    if kind == "text":
        return _text_problem(block["text"])
    if kind == "tool_use" and not _TOOL_ID.fullmatch(block["id"]):
        return f"{loc}.tool_use.id: String should match pattern '{TOOL_ID_PATTERN}'"
    if kind == "tool_result":
        if not _TOOL_ID.fullmatch(block["tool_use_id"]):
            return f"{loc}.tool_result.tool_use_id: String should match pattern '{TOOL_ID_PATTERN}'"
        if "is_error" in block and (problem := _type_error(f"{loc}.tool_result.is_error", block["is_error"], bool)):
            return problem
        return _result_content_problem(f"{loc}.tool_result.content", block.get("content"))
    return None


def message_problem(message: Any, i: int, *, final: bool) -> str | None:
    """The API's text for message ``i`` on its own (role, content, blocks), or None."""
    if not isinstance(message, dict):
        return f"messages.{i}: Input should be a valid dictionary"
    if message.get("role") not in ("user", "assistant"):
        return f"messages.{i}.role: Input should be 'user' or 'assistant'"
    if "content" not in message:
        return f"messages.{i}.content: Field required"
    content = message["content"]
    if not isinstance(content, (str, list)):
        return f"messages.{i}.content: Input should be a valid string or a valid list"
    if not content:
        # the API lets only the final assistant message be empty (an empty reply is one)
        return None if final and message["role"] == "assistant" else f"messages.{i}: {EMPTY_CONTENT}"
    if isinstance(content, str):
        return _text_problem(content)
    for k, block in enumerate(content):
        problem = block_problem(block, f"messages.{i}.content.{k}")
        if problem:
            return problem
    return None


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _turns(messages: list[dict[str, Any]]) -> list[tuple[str, list[tuple[int, int, dict[str, Any]]]]]:
    """Consecutive messages of one role combined, as the API does: (role, [(i, k, block)])."""
    turns: list[tuple[str, list[tuple[int, int, dict[str, Any]]]]] = []
    for i, m in enumerate(messages):
        if not turns or turns[-1][0] != m["role"]:
            turns.append((m["role"], []))
        turns[-1][1].extend((i, k, b) for k, b in enumerate(_blocks(m)))
    return turns


def _duplicate_id_problem(messages: list[dict[str, Any]]) -> str | None:
    seen: set[str] = set()
    for i, m in enumerate(messages):
        for k, b in enumerate(_blocks(m)):
            if b["type"] == "tool_use":
                if b["id"] in seen:
                    return f"messages.{i}.content.{k}: {DUPLICATE_TOOL_ID}"
                seen.add(b["id"])
    return None


def _pairing_problem(turns: list, *, open_end: bool, last: int) -> str | None:
    """tool_use answered by tool_result blocks at the start of the next turn, and nothing else."""
    for t, (role, blocks) in enumerate(turns):
        nxt = turns[t + 1][1] if t + 1 < len(turns) else []
        if role == "user":
            prev = turns[t - 1][1] if t else []
            asked = {b["id"] for _, _, b in prev if b["type"] == "tool_use"}
            for i, k, b in blocks:
                if b["type"] == "tool_result" and b["tool_use_id"] not in asked:
                    return (
                        f"messages.{i}.content.{k}: unexpected `tool_use_id` found in `tool_result` blocks: "
                        f"{b['tool_use_id']}. Each `tool_result` block must have a corresponding `tool_use` block "
                        "in the previous message."
                    )
            continue
        # a checkpoint's final tool_use is its pending call: its result is not due yet
        uses = [(i, b["id"]) for i, _, b in blocks if b["type"] == "tool_use" and not (open_end and i == last)]
        if not uses:
            continue
        answered = {b["tool_use_id"] for _, _, b in nxt if b["type"] == "tool_result"}
        missing = [(i, x) for i, x in uses if x not in answered]
        if missing:
            return (
                f"messages.{missing[0][0]}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                f"{', '.join(x for _, x in missing)}. Each `tool_use` block must have a corresponding `tool_result` "
                "block in the next message."
            )
        lead = next((n for n, (_, _, b) in enumerate(nxt) if b["type"] != "tool_result"), len(nxt))
        if lead < len(uses):
            return (
                f"messages.{nxt[0][0]}: Did not find {len(uses)} `tool_result` block(s) at the beginning of this "
                "message. Messages following `tool_use` blocks must begin with a matching number of `tool_result` "
                "blocks."
            )
    return None


def messages_problem(messages: Any, *, open_end: bool = False) -> str | None:
    """The API's text for a conversation it would refuse, or None.

    ``open_end`` is for a checkpoint: its final message may be the assistant's, and a
    ``tool_use`` in it (the pending call) needs no ``tool_result`` yet. Prefill, which
    depends on the model, is :func:`request_problem`'s.
    """
    if not isinstance(messages, list):
        return "messages: Input should be a valid list"
    if not messages:
        return "messages: at least one message is required"
    for i, m in enumerate(messages):
        problem = message_problem(m, i, final=i == len(messages) - 1)
        if problem:
            return problem
    if messages[0]["role"] != "user":
        return FIRST_ROLE
    return _duplicate_id_problem(messages) or _pairing_problem(
        _turns(messages), open_end=open_end, last=len(messages) - 1
    )


def _tools_problem(tools: Any) -> str | None:
    if tools is None:
        return None
    if not isinstance(tools, list):
        return "tools: Input should be a valid list"
    names = []
    for j, t in enumerate(tools):
        if not isinstance(t, dict):
            return f"tools.{j}: Input should be a valid dictionary"
        if not isinstance(t.get("name"), str):
            return f"tools.{j}.name: Field required"
        names.append(t["name"])
    return DUPLICATE_TOOL_NAME if len(set(names)) < len(names) else None


def request_problem(body: Any) -> str | None:
    """The API's text for a ``POST /v1/messages`` body it would refuse with a 400, or None."""
    if not isinstance(body, dict):
        return "Input should be a valid dictionary"
    for field in ("model", "max_tokens", "messages"):
        if field not in body:
            return f"{field}: Field required"
    if not isinstance(body["model"], str):
        return "model: Input should be a valid string"
    if not isinstance(body["max_tokens"], int) or isinstance(body["max_tokens"], bool):
        return "max_tokens: Input should be a valid integer"
    problem = _tools_problem(body.get("tools")) or messages_problem(body["messages"])
    if problem:
        return problem
    if body["messages"][-1]["role"] == "assistant" and not supports_prefill(body["model"]):
        return NO_PREFILL
    return None
