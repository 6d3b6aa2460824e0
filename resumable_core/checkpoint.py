"""The checkpoint: what a run writes at save points A and B, and how it is read back."""

from __future__ import annotations

import errno
import json
import math
import operator
import os
import re
import stat
import uuid
from collections.abc import Callable
from itertools import accumulate, repeat
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import PydanticSerializationError

from .errors import (
    CheckpointCorruptError,
    CheckpointFolderMissingError,
    CheckpointForeignError,
    CheckpointInconsistentError,
    CheckpointNotAFileError,
    CheckpointTooLargeError,
    CheckpointUnreadableError,
    CheckpointVersionError,
    CheckpointWriteError,
    Problem,
    SecretInCheckpointError,
)
from .protocol import block_problem, messages_problem

CHECKPOINT_VERSION = 2
"""Version 2 records a turn's several calls (``pending_tool_uses``, ``recorded_results``);
version 1 had one slot (``pending_tool_use``) and migrates on load (:data:`MIGRATIONS`)."""
SECRET_ENV_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
MAX_CHECKPOINT_BYTES = 16 * 1024 * 1024
"""The loader's default size cap (16 MiB); a larger file is refused before a byte of it is read."""
MAX_JSON_DEPTH = 128
"""Deepest nesting of arrays and objects a checkpoint may hold (pydantic cannot write past ~250)."""
MAX_NUMBER_CHARS = 100
"""Longest number literal a checkpoint may hold (Python refuses ints of over 4,300 digits)."""


class PendingToolUse(BaseModel):
    """A tool call the model asked for whose result is not recorded yet."""

    # NaN and Infinity are written as such, so the save's strict-JSON check refuses them
    # instead of pydantic's default silently turning them into null.
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")

    id: str
    """The ``tool_use`` block's id (``toolu_…``); its ``tool_result`` must answer this id."""
    name: str
    """The tool's name, as in the toolbox."""
    input: dict[str, Any]
    """The arguments the model gave, exactly as sent."""


class Checkpoint(BaseModel):
    """Everything a run needs to continue where it stopped.

    Written at save point A (after the model's response) and at save point B (after each
    tool's result is recorded: one save B per call of the turn). ``messages`` is kept exactly as
    sent to the API, so a resumed run is invisible to the model.

    A turn may ask for several tools at once (the API's default). Between save point A and the
    turn's last save B, the calls of the last assistant message are split in two lists, in block
    order: ``recorded_results`` (answered) then ``pending_tool_uses`` (not yet). The last save B
    moves every result into one user message and empties both.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True, ser_json_inf_nan="constants")

    version: int = CHECKPOINT_VERSION
    """Format version; an older one migrates on load, any other is refused, never guessed at."""
    task: str
    """The task this run was started for. Resume refuses a checkpoint of another task."""
    run_id: str = Field(default_factory=lambda: f"run_{uuid.uuid4().hex[:12]}")
    """Stable id of this run across crashes; with a tool_use id it makes the idempotency key."""
    turns: int = Field(default=0, ge=0)
    """Model calls started since the task began (not since this process began), so the cap holds.

    Charged on disk before each call: a process killed after the call still paid for it."""
    tokens_used: int = Field(default=0, ge=0)
    """Tokens billed for every recorded model call since the task began: input, output, and the
    prompt cache's writes and reads (``cache_creation_input_tokens``, ``cache_read_input_tokens``)."""
    messages: list[dict[str, Any]]
    """The Messages API conversation, as JSON dicts, exactly as sent and received."""
    pending_tool_uses: list[PendingToolUse] = Field(default_factory=list)
    """The dangling calls: the last turn's calls with no result yet, in block order.

    Set at save point A to every call of the reply; each save point B takes the first one off."""
    recorded_results: list[dict[str, Any]] = Field(default_factory=list)
    """The ``tool_result`` blocks recorded so far for the last turn, in block order, not yet sent.

    Filled by each save point B but the turn's last, which sends them all in one user message."""

    @property
    def pending_tool_use(self) -> PendingToolUse | None:
        """Version 1's one slot, for code that settles one call: the first pending call, or None.

        Setting it to None clears every pending call; setting a call makes it the only one."""
        return self.pending_tool_uses[0] if self.pending_tool_uses else None

    @pending_tool_use.setter
    def pending_tool_use(self, call: PendingToolUse | None) -> None:
        self.pending_tool_uses = [] if call is None else [call]

    def is_finished(self) -> bool:
        """True when the last message is an assistant reply that asks for no tool."""
        if not self.messages or self.pending_tool_uses or self.recorded_results:
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
    """One line saying how the checkpoint contradicts itself, or None when it is sound.

    Sound: the API would accept the messages (the last may be the assistant's, its calls still
    open), and when the last message asks for tools, ``recorded_results`` then
    ``pending_tool_uses`` are exactly its ``tool_use`` ids in block order, with at least one
    call pending (a turn whose every call is answered belongs in a user message)."""
    msgs = cp.messages
    if not msgs:
        return Problem("messages is empty; a checkpoint holds at least the task's first user message")
    # the API's own rules, as for any request, except that the final message may be open
    problem = messages_problem(msgs, open_end=True)
    if problem:
        return Problem("the Messages API would refuse these messages: {problem}", problem=problem)
    i, last, pending, results = len(msgs) - 1, msgs[-1], cp.pending_tool_uses, cp.recorded_results
    uses = tool_uses(last) if last["role"] == "assistant" else []
    if not uses:
        if pending or results:
            return Problem(
                "pending_tool_uses or recorded_results is set but the last message is not the assistant's tool_use turn"
            )
        return None
    ids = [u["id"] for u in uses]
    for k, block in enumerate(results):
        if problem := block_problem(block, f"recorded_results.{k}", types=("tool_result",)):
            return problem
    recorded_ids = [b["tool_use_id"] for b in results]
    pending_ids = [p.id for p in pending]
    if not pending and not results:
        return Problem(
            "messages.{i}: last message asks for tool_use {ids} but pending_tool_uses is empty", i=i, ids=", ".join(ids)
        )
    if not pending and recorded_ids == ids:
        return Problem(
            "messages.{i}: every tool_use has a recorded result but none is pending: "
            "the results belong in one user message after the turn",
            i=i,
        )
    if recorded_ids + pending_ids != ids:
        return Problem(
            "messages.{i}: recorded results {recorded} then pending calls {pending} are not "
            "the last message's tool_use ids {ids}, in block order",
            i=i,
            recorded=recorded_ids,
            pending=pending_ids,
            ids=ids,
        )
    by_id = {u["id"]: u for u in uses}
    for p in pending:
        if by_id[p.id]["name"] != p.name or by_id[p.id]["input"] != p.input:
            return Problem("messages.{i}: pending_tool_uses differs from the tool_use block {id}", i=i, id=p.id)
    return None


# -- strict JSON -----------------------------------------------------------------------------

_NUMBER_CHARS = b"-+.0123456789eE"
_NUMBERS_AS_ZEROS = bytes.maketrans(_NUMBER_CHARS, b"0" * len(_NUMBER_CHARS))
_TOO_LONG_NUMBER = b"0" * (MAX_NUMBER_CHARS + 1)
_LONG_NUMBER = re.compile(rb"[-+.0-9eE]{%d,}" % (MAX_NUMBER_CHARS + 1))
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")  # \ud800 to \udfff
_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}")))
_BRACKET_STEP = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")


def _outside_strings(raw: bytes) -> bytes:
    """``raw`` without the contents of its JSON strings, by C-speed byte operations only."""
    # Once every escaped backslash and then every escaped quote is gone, each quote left opens
    # or closes a string, so the even pieces between quotes are what lies outside the strings.
    # (Bytes that are not valid JSON may be misread here; the parser refuses them anyway.)
    return b"".join(raw.replace(b"\\\\", b"").replace(b'\\"', b"").split(b'"')[::2])


def _max_depth(structure: bytes) -> int:
    # opening brackets count +1 and closing ones -1; C-level iterators keep a 16 MiB file fast
    steps = structure.translate(None, _NOT_BRACKETS).translate(_BRACKET_STEP)
    return max(accumulate(map(operator.sub, steps, repeat(1))), default=0)


def _shape_problem(raw: bytes) -> str | None:
    """What makes these JSON bytes unfit for a checkpoint, found without parsing them (so no
    nesting can exhaust the parser's stack), or None. The loader and the save both ask."""
    structure = _outside_strings(raw)
    if b"NaN" in structure or b"Infinity" in structure:
        return Problem("NaN or Infinity is not JSON, and the API refuses it")
    if _TOO_LONG_NUMBER in structure.translate(_NUMBERS_AS_ZEROS):
        longest = max(len(m) for m in _LONG_NUMBER.findall(structure))
        return Problem(
            "a number of {longest} characters, over the limit of {limit}", longest=longest, limit=MAX_NUMBER_CHARS
        )
    depth = _max_depth(structure)
    if depth > MAX_JSON_DEPTH:
        return Problem("nesting {depth} levels deep, over the limit of {limit}", depth=depth, limit=MAX_JSON_DEPTH)
    return None


class _NotStrictJSON(ValueError):
    """JSON that Python's json module accepts but a checkpoint may not hold."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _NotStrictJSON(Problem("duplicate key {key} in one object", key=repr(key)))
            seen.add(key)
    return obj


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotStrictJSON(Problem("the number {text} is too large for a float", text=text))
    return value


# NaN and Infinity never reach this decoder: _shape_problem refuses them first.
_STRICT_DECODER = json.JSONDecoder(object_pairs_hook=_unique_keys, parse_float=_finite_float)


def _has_lone_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _parse_strict(raw: bytes, path: Path) -> Any:
    """The JSON value of ``raw``, refusing what ``save_checkpoint`` could never write back."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CheckpointCorruptError(path, "not valid JSON ({detail})", detail=str(e)) from None
    problem = _shape_problem(raw)
    if problem:
        raise CheckpointCorruptError(path, "not strict JSON: {detail}", detail=problem)
    try:
        data = _STRICT_DECODER.decode(text)
    except _NotStrictJSON as e:
        raise CheckpointCorruptError(path, "not strict JSON: {detail}", detail=e.args[0]) from None
    except json.JSONDecodeError as e:
        raise CheckpointCorruptError(path, "not valid JSON ({detail})", detail=str(e)) from None
    # only an escape like \udc80 can make one (UTF-8 cannot encode a surrogate), so the walk is rare
    if _SURROGATE_ESCAPE.search(raw) and _has_lone_surrogate(data):
        raise CheckpointCorruptError(
            path, "not strict JSON: a lone surrogate escape (\\ud800-\\udfff), not a character"
        )
    return data


# -- reading the file ------------------------------------------------------------------------

_OS_REASONS = {
    errno.EACCES: "permission denied; give this user read access to it",
    errno.EPERM: "permission denied; give this user read access to it",
    errno.ENOTDIR: "a parent in the path is a file, not a folder; fix the path",
    errno.ENAMETOOLONG: "the name is too long for the file system; use a shorter path",
    errno.ELOOP: "too many levels of symlinks; fix the link",
    errno.EIO: "an I/O error; check the disk",
}
_KINDS = {stat.S_IFDIR: "a directory", stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device"}
_KINDS |= {stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket"}


def _unreadable(path: Path, e: OSError) -> CheckpointUnreadableError:
    name = errno.errorcode.get(e.errno or 0, "?")
    if e.errno in _OS_REASONS:
        return CheckpointUnreadableError(path, "cannot read: {why} ({name})", why=_OS_REASONS[e.errno], name=name)
    return CheckpointUnreadableError(path, "cannot read ({name}): {detail}", name=name, detail=e.strerror)


def _refuse_non_regular(path: Path, mode: int) -> None:
    if not stat.S_ISREG(mode):
        kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
        raise CheckpointNotAFileError(
            path, "{kind}, not a regular file; point the path at a checkpoint file", kind=kind
        )


def _absent(path: Path) -> None:
    """Return when the file is missing from a folder that exists; refuse any other absence."""
    if os.path.lexists(path):
        raise CheckpointFolderMissingError(
            path, "a symlink to the missing {target}; mount or fix it", target=os.readlink(path)
        )
    if not os.path.isdir(path.parent):
        raise CheckpointFolderMissingError(
            path, "the folder {folder} does not exist (unmounted?); create it to start a new run", folder=path.parent
        )


def _read_capped(path: Path, max_bytes: int) -> bytes | None:
    """The bytes of the regular file at ``path`` (at most ``max_bytes``), or None if absent."""
    try:
        _refuse_non_regular(path, os.stat(path).st_mode)  # never open a device or FIFO at all
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        _absent(path)
        return None
    except OSError as e:
        raise _unreadable(path, e) from None
    try:
        info = os.fstat(fd)
        _refuse_non_regular(path, info.st_mode)  # swapped for something else since the stat
        if info.st_size > max_bytes:
            raise CheckpointTooLargeError(path, info.st_size, max_bytes)
        chunks, size = [], 0
        # read past st_size: a file that grew, or one the kernel sizes as 0, still meets the cap
        while chunk := os.read(fd, min(max_bytes + 1 - size, max(info.st_size + 1 - size, 65536))):
            chunks.append(chunk)
            size += len(chunk)
            if size > max_bytes:
                raise CheckpointTooLargeError(path, size, max_bytes)
    except OSError as e:
        raise _unreadable(path, e) from None
    finally:
        os.close(fd)
    return b"".join(chunks)


# -- save and load ---------------------------------------------------------------------------


def _serialize(state: Checkpoint | dict[str, Any], path: Path | None = None) -> bytes:
    cp = state if isinstance(state, Checkpoint) else Checkpoint.model_validate(state)
    # pydantic's encoder: same bytes as json.dumps(indent=2, ensure_ascii=False), ~10x faster
    try:
        data = (cp.model_dump_json(indent=2) + "\n").encode("utf-8")
    except PydanticSerializationError as e:  # a lone surrogate, or nesting beyond its limit
        raise CheckpointWriteError(
            path, "the state is not writable as JSON: {detail}", detail=str(e).splitlines()[0]
        ) from None
    problem = _shape_problem(data) if _may_be_unloadable(data) else None
    if problem:  # the loader would refuse the file: never write one that cannot be resumed
        raise CheckpointWriteError(path, "the state is not writable as strict JSON: {detail}", detail=problem)
    return data


_DEEPER_THAN_ALLOWED = b"\n" + b"  " * MAX_JSON_DEPTH


def _may_be_unloadable(indented: bytes) -> bool:
    """False when JSON written with ``indent=2`` surely passes :func:`_shape_problem`: a fast
    look at the bytes, strings included, that spares the exact check on every save."""
    # A line indented 2*k spaces sits inside k containers, so nesting beyond MAX_JSON_DEPTH
    # needs a line indented 2*MAX_JSON_DEPTH; strings hold no raw newline to imitate one.
    return (
        _DEEPER_THAN_ALLOWED in indented
        or b"NaN" in indented
        or b"Infinity" in indented
        or _TOO_LONG_NUMBER in indented.translate(_NUMBERS_AS_ZEROS)
    )


def _refuse_secrets(data: bytes, path: Path) -> None:
    for var in SECRET_ENV_VARS:
        secret = os.environ.get(var, "")
        if len(secret) >= 8 and secret.encode() in data:
            raise SecretInCheckpointError(
                path, "the state contains the value of ${var}; secrets are never written", var=var
            )


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _write_temp(tmp: Path, data: bytes, midway: Callable[[], None] | None) -> None:
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
    try:
        half = len(data) // 2
        _write_all(fd, data[:half])
        if midway is not None:
            os.fsync(fd)
            midway()
        _write_all(fd, data[half:])
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: str | Path, data: bytes, *, midway: Callable[[], None] | None = None) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old file or the new, never half.

    Temp file in the same folder (``os.replace`` is atomic only within one file system),
    write + fsync of the data, rename, then fsync of the folder so the rename itself is durable.
    ``midway`` runs after half the bytes are on disk: the crash simulator kills the process there.
    Any failure removes the temp file (a full disk stays no fuller) and keeps the old checkpoint;
    an OS error is raised as :class:`CheckpointWriteError`.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        _write_temp(tmp, data, midway)
        os.replace(tmp, path)
    except BaseException as e:
        tmp.unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise CheckpointWriteError(
                path, "not saved, the old checkpoint is kept: {detail}", detail=e.strerror
            ) from e
        raise
    try:
        _fsync_dir(path.parent)
    except OSError as e:
        raise CheckpointWriteError(
            path, "saved, but its folder could not be synced: {detail}", detail=e.strerror
        ) from e


def _from_version_1(data: dict[str, Any]) -> dict[str, Any]:
    """Version 1 to 2: the one ``pending_tool_use`` slot (a call or null) becomes a list of calls.

    A version-1 run asked for one tool per turn, so no result of its last turn was recorded."""
    upgraded = {k: v for k, v in data.items() if k != "pending_tool_use"}
    call = data.get("pending_tool_use")
    upgraded |= {"version": 2, "pending_tool_uses": [] if call is None else [call], "recorded_results": []}
    return upgraded


MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _from_version_1}
"""Each readable older version, mapped to the step that lifts its JSON one version up."""


def pending_calls(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The pending calls in a checkpoint file's raw JSON, of version 2 (a list) or 1 (one slot), unvalidated.

    For showing a file as a crash left it; a run reads a file with :func:`load_checkpoint`."""
    if isinstance(data.get("pending_tool_uses"), list):
        return [p for p in data["pending_tool_uses"] if isinstance(p, dict)]
    call = data.get("pending_tool_use")
    return [call] if isinstance(call, dict) else []


def save_checkpoint(
    state: Checkpoint | dict[str, Any], path: str | Path, *, midway: Callable[[], None] | None = None
) -> None:
    """Write the checkpoint atomically and durably; refuse to write any secret, or any state
    the loader would refuse (NaN, a lone surrogate, nesting or numbers beyond its limits)."""
    path = Path(path)
    data = _serialize(state, path)
    _refuse_secrets(data, path)
    write_atomic(path, data, midway=midway)


def load_checkpoint(path: str | Path, *, max_bytes: int = MAX_CHECKPOINT_BYTES) -> Checkpoint | None:
    """Read a checkpoint back: ``None`` when there is no file, else a validated, consistent one.

    ``None`` only for a missing file in a folder that exists: a missing folder (an unmounted
    volume) is refused, never taken for a fresh start. Only a regular file of at most
    ``max_bytes`` (default 16 MiB) is read; its JSON must be strict (no NaN, no duplicate keys,
    no lone surrogates, bounded nesting and numbers) and its fields of the exact types.
    A file of an older version this kit can read (:data:`MIGRATIONS`) is migrated in memory;
    any other version is refused with :class:`CheckpointVersionError`.
    Every refusal is a :class:`CheckpointError` naming the path and the problem.
    The file is only read, never changed.
    """
    path = Path(path)
    raw = _read_capped(path, max_bytes)
    if raw is None:
        return None
    data = _parse_strict(raw, path)
    if not isinstance(data, dict):
        raise CheckpointForeignError(path, "expected a JSON object, found {kind}", kind=type(data).__name__)
    if "version" not in data:
        raise CheckpointForeignError(path, "no 'version' field: not a checkpoint written by this kit")
    version = data["version"]
    if type(version) is not int or (version != CHECKPOINT_VERSION and version not in MIGRATIONS):
        raise CheckpointVersionError(path, version, CHECKPOINT_VERSION)
    while data["version"] != CHECKPOINT_VERSION:
        data = MIGRATIONS[data["version"]](data)
    try:
        cp = Checkpoint.model_validate(data, strict=True)  # "3" or true is no count of turns
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "(top level)"
        raise CheckpointCorruptError(path, "field {where}: {detail}", where=where, detail=first["msg"]) from None
    problem = consistency_problem(cp)
    if problem:
        raise CheckpointInconsistentError(path, problem)
    return cp
