"""The checkpoint: what a run writes at save points A and B, and how it is read back."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import (
    CheckpointCorruptError,
    CheckpointForeignError,
    CheckpointInconsistentError,
    CheckpointVersionError,
    SecretInCheckpointError,
)

CHECKPOINT_VERSION = 1
SECRET_ENV_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")


class PendingToolUse(BaseModel):
    """The tool call the model asked for whose result is not recorded yet."""

    model_config = ConfigDict(extra="forbid")

    id: str
    """The ``tool_use`` block's id (``toolu_…``); its ``tool_result`` must answer this id."""
    name: str
    """The tool's name, as in the toolbox."""
    input: dict[str, Any]
    """The arguments the model gave, exactly as sent."""


class Checkpoint(BaseModel):
    """Everything a run needs to continue where it stopped.

    Written at save point A (after the model's response) and at save point B
    (after the tool result is recorded). ``messages`` is kept exactly as sent to
    the API, so a resumed run is invisible to the model.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    version: int = CHECKPOINT_VERSION
    """Format version; a file of another version is refused, never guessed at."""
    task: str
    """The task this run was started for. Resume refuses a checkpoint of another task."""
    run_id: str = Field(default_factory=lambda: f"run_{uuid.uuid4().hex[:12]}")
    """Stable id of this run across crashes; with a tool_use id it makes the idempotency key."""
    turns: int = Field(default=0, ge=0)
    """Model calls made since the task began (not since this process began), so the cap holds."""
    tokens_used: int = Field(default=0, ge=0)
    """Input plus output tokens of every recorded model call since the task began."""
    messages: list[dict[str, Any]]
    """The Messages API conversation, as JSON dicts, exactly as sent and received."""
    pending_tool_use: PendingToolUse | None = None
    """The dangling call: set at save point A when the reply asks for a tool, cleared at B."""

    def is_finished(self) -> bool:
        """True when the last message is an assistant reply that asks for no tool."""
        if not self.messages or self.pending_tool_use is not None:
            return False
        last = self.messages[-1]
        return last.get("role") == "assistant" and not tool_uses(last)


def new_checkpoint(task: str, *, run_id: str | None = None) -> Checkpoint:
    """A fresh state: the task as the first user message, counters at zero."""
    cp = Checkpoint(task=task, messages=[{"role": "user", "content": task}])
    if run_id is not None:
        cp.run_id = run_id
    return cp


# -- message helpers -------------------------------------------------------------------------


def blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The content blocks of a message (a plain string counts as one text block)."""
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def tool_uses(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``tool_use`` blocks of a message."""
    return [b for b in blocks(message) if b.get("type") == "tool_use"]


def tool_results(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``tool_result`` blocks of a message."""
    return [b for b in blocks(message) if b.get("type") == "tool_result"]


def text_of(content: Any) -> str:
    """The text of a message's or tool_result's content: a string, or its blocks' text joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return ""


def consistency_problem(cp: Checkpoint) -> str | None:
    """One line saying how the checkpoint contradicts itself, or None when it is sound."""
    msgs = cp.messages
    if not msgs:
        return "messages is empty; a checkpoint holds at least the task's first user message"
    for i, m in enumerate(msgs):
        if m.get("role") not in ("user", "assistant"):
            return f"messages.{i}: role must be 'user' or 'assistant', not {m.get('role')!r}"
        if not isinstance(m.get("content"), (str, list)):
            return f"messages.{i}: content must be a string or a list of blocks"
        if i == 0 and m["role"] != "user":
            return "messages.0: the first message must be the user's"
        if i > 0 and m["role"] == msgs[i - 1]["role"]:
            return f"messages.{i}: two {m['role']!r} messages in a row"
    for i, m in enumerate(msgs):
        uses = tool_uses(m)
        if m["role"] == "assistant" and uses:
            ids = [u.get("id") for u in uses]
            if i == len(msgs) - 1:
                p = cp.pending_tool_use
                if p is None:
                    return f"messages.{i}: last message asks for tool_use {ids[0]} but pending_tool_use is null"
                if ids != [p.id]:
                    return f"messages.{i}: pending_tool_use {p.id} is not the last message's tool_use {ids}"
                use = uses[0]
                if use.get("name") != p.name or use.get("input") != p.input:
                    return f"messages.{i}: pending_tool_use differs from the tool_use block {p.id}"
                continue
            answered = [r.get("tool_use_id") for r in tool_results(msgs[i + 1])]
            missing = [x for x in ids if x not in answered]
            if missing:
                return f"messages.{i}: tool_use {', '.join(missing)} has no tool_result in the next message"
        if m["role"] == "user":
            prev_ids = {u.get("id") for u in tool_uses(msgs[i - 1])} if i > 0 else set()
            for r in tool_results(m):
                if r.get("tool_use_id") not in prev_ids:
                    return (
                        f"messages.{i}: tool_result {r.get('tool_use_id')} answers no tool_use of the previous message"
                    )
    if cp.pending_tool_use is not None:
        last = msgs[-1]
        if last["role"] != "assistant" or not tool_uses(last):
            return "pending_tool_use is set but the last message is not the assistant's tool_use"
    return None


# -- save and load ---------------------------------------------------------------------------


def _serialize(state: Checkpoint | dict[str, Any]) -> bytes:
    cp = state if isinstance(state, Checkpoint) else Checkpoint.model_validate(state)
    # pydantic's encoder: same bytes as json.dumps(indent=2, ensure_ascii=False), ~10x faster
    return (cp.model_dump_json(indent=2) + "\n").encode("utf-8")


def _refuse_secrets(data: bytes, path: Path) -> None:
    for var in SECRET_ENV_VARS:
        secret = os.environ.get(var, "")
        if len(secret) >= 8 and secret.encode() in data:
            raise SecretInCheckpointError(path, f"the state contains the value of ${var}; secrets are never written")


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: str | Path, data: bytes, *, midway: Callable[[], None] | None = None) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old file or the new, never half.

    Temp file in the same folder (``os.replace`` is atomic only within one file system),
    flush + fsync of the data, rename, then fsync of the folder so the rename itself is durable.
    ``midway`` runs after half the bytes are on disk: the crash simulator kills the process there.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        half = len(data) // 2
        f.write(data[:half])
        if midway is not None:
            f.flush()
            os.fsync(f.fileno())
            midway()
        f.write(data[half:])
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def save_checkpoint(
    state: Checkpoint | dict[str, Any], path: str | Path, *, midway: Callable[[], None] | None = None
) -> None:
    """Write the checkpoint atomically and durably; refuse to write any secret."""
    path = Path(path)
    data = _serialize(state)
    _refuse_secrets(data, path)
    write_atomic(path, data, midway=midway)


def load_checkpoint(path: str | Path) -> Checkpoint | None:
    """Read a checkpoint back: ``None`` when there is no file, else a validated, consistent one.

    Every refusal is a :class:`CheckpointError` naming the path and the problem.
    The file is only read, never changed.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointCorruptError(path, f"not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise CheckpointForeignError(path, f"expected a JSON object, found {type(data).__name__}")
    if "version" not in data:
        raise CheckpointForeignError(path, "no 'version' field: not a checkpoint written by this kit")
    if data["version"] != CHECKPOINT_VERSION or isinstance(data["version"], bool):
        raise CheckpointVersionError(path, data["version"], CHECKPOINT_VERSION)
    try:
        cp = Checkpoint.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "(top level)"
        raise CheckpointCorruptError(path, f"field {where}: {first['msg']}") from None
    problem = consistency_problem(cp)
    if problem:
        raise CheckpointInconsistentError(path, problem)
    return cp
