"""The kit's exception hierarchy: every error carries the data that explains it."""

from __future__ import annotations

import difflib
from pathlib import Path


class ResumableError(Exception):
    """Base class of every error raised by resumable_core.

    With ``data``, the message is a template of their names (kept as ``template``, with ``data``):
    the core imports no catalog, so the lab says the error in the learner's language from the two.
    """

    def __init__(self, message: str = "", **data: object) -> None:
        super().__init__(message.format(**data) if data else message)
        self.template = message if data else None
        self.data = data


class Problem(str):
    """A one-line problem: its English text, filled from ``template`` and ``data``, which it keeps.

    The core imports no catalog: the lab says a problem in the learner's language from the two.
    """

    template: str
    data: dict[str, object]

    def __new__(cls, template: str, **data: object) -> Problem:
        self = super().__new__(cls, template.format(**data))
        self.template, self.data = template, data
        return self


class CheckpointError(ResumableError):
    """A checkpoint file was refused. Carries the ``path`` and a one-line ``reason``.

    With ``data``, ``reason`` is a template of their names (kept as ``template``, filled into
    ``reason``): the lab renders it in the learner's language from the template and the data.
    Loading never changes the file: a refused checkpoint stays on disk as it was.
    """

    def __init__(self, path: str | Path | None, reason: str, **data: object) -> None:
        self.path = Path(path) if path is not None else None
        self.reason = reason.format(**data) if data else reason
        Exception.__init__(self, f"{self.path}: {self.reason}" if self.path else self.reason)
        self.template = reason if data else None  # the reason's, not the message's: the path is not words
        self.data = data


class CheckpointCorruptError(CheckpointError):
    """The file is not valid JSON, or its fields do not have the checkpoint's types."""


class CheckpointForeignError(CheckpointCorruptError):
    """The file is JSON but not a checkpoint of this kit (no ``version`` field)."""


class CheckpointUnreadableError(CheckpointError):
    """The operating system would not let the file be read (permission, a parent that is not a
    folder, a name too long, an I/O error). Nothing was read, so nothing is known of the run."""


class CheckpointNotAFileError(CheckpointUnreadableError):
    """The path names a directory, FIFO, device or socket: only a regular file is a checkpoint."""


class CheckpointFolderMissingError(CheckpointUnreadableError):
    """The checkpoint's folder (or a symlink's target) is missing: an unmounted volume or a wrong
    path, not "no checkpoint yet", so the task must not start over and repeat its side effects."""


class CheckpointTooLargeError(CheckpointError):
    """The file is larger than the loader's ``max_bytes`` cap; it was refused before reading it."""

    def __init__(self, path: str | Path | None, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        super().__init__(
            path,
            "at least {size} bytes, over the {limit}-byte cap; pass max_bytes= to load a larger file",
            size=size,
            limit=limit,
        )


class CheckpointWriteError(CheckpointError):
    """A save failed (a full disk, no permission) or the state cannot be written as strict JSON.

    The previous checkpoint is left as it was and no temp file is left behind.
    """


class CheckpointVersionError(CheckpointError):
    """The file was written by another checkpoint format version."""

    def __init__(self, path: str | Path | None, found: object, expected: int) -> None:
        self.found = found
        self.expected = expected
        super().__init__(
            path, "checkpoint version {found}, this code reads version {expected}", found=repr(found), expected=expected
        )


class CheckpointInconsistentError(CheckpointError):
    """The fields parse but contradict each other (e.g. a tool_use with no tool_result)."""


class CheckpointTaskMismatchError(CheckpointError):
    """Resume was asked for one task but the checkpoint belongs to another."""

    def __init__(self, path: str | Path | None, expected_task: str, found_task: str) -> None:
        self.expected_task = expected_task
        self.found_task = found_task
        super().__init__(
            path,
            "checkpoint is for task {found}, not {expected}; refusing to resume it",
            found=repr(found_task),
            expected=repr(expected_task),
        )


class SecretInCheckpointError(CheckpointError):
    """Saving was refused because the state holds the API key. Secrets never go to disk."""


class LeaseError(CheckpointError):
    """A run's lease refused this resumer; ``path`` is the lease file (or the store that refused)."""


class LeaseHeldError(LeaseError):
    """Another live resumer holds the run's lease: this one is refused before it loads anything."""


class LeaseLostError(LeaseError):
    """This resumer's lease was taken over (its fencing token is stale): it must stop acting."""


class ToolError(ResumableError):
    """A tool ran and failed (an ordinary tool failure, reported to the model with is_error)."""


class UnknownToolError(ToolError, KeyError):
    """The toolbox has no tool of that name."""

    def __init__(self, name: str) -> None:
        self.name = name
        ToolError.__init__(self, "unknown tool {name}", name=repr(name))

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class ToolTimeoutError(ToolError):
    """A tool's request got no answer in time: not a failure, an unknown outcome.

    The provider may have acted before the answer was lost, so only a retry under the same
    idempotency key is safe; a fresh attempt may repeat the side effect.
    """


class ToolUnavailableError(ToolError):
    """A tool's provider refused the request before doing anything (an outage, a 503): a later attempt may work."""


class IdempotencyConflictError(ToolError):
    """The same idempotency key was used with a different input (a tool error: a key names one call)."""

    def __init__(self, key: str, stored_hash: str, new_hash: str) -> None:
        self.key = key
        self.stored_hash = stored_hash
        self.new_hash = new_hash
        super().__init__(
            "idempotency key {key} was first used with other input ({stored} != {new})",
            key=repr(key),
            stored=stored_hash[:12],
            new=new_hash[:12],
        )


class CrashError(ResumableError):
    """A crash simulation did not go as planned (the child was not killed, or failed)."""


def _nearest(name: object, choices: list[str]) -> str:
    """The choice nearest a mistyped ``name``, quoted, or "" when none is near."""
    close = difflib.get_close_matches(name, choices, n=1) if isinstance(name, str) else []
    return repr(close[0]) if close else ""


class UnknownScenarioError(ResumableError, ValueError):
    """No scenario has the key ``key``; ``choices`` are the keys that do."""

    def __init__(self, key: object, choices: list[str]) -> None:
        self.key = key
        self.choices = choices
        close = _nearest(key, choices)
        super().__init__(
            "no scenario exercises {key}; did you mean {close}? choose one of {choices}"
            if close
            else "no scenario exercises {key}; choose one of {choices}",
            key=repr(key),
            close=close,
            choices=", ".join(choices),
        )


class UnknownCrashPointError(ResumableError, ValueError):
    """``point`` is not a crash point; ``choices`` are the points that are."""

    def __init__(self, point: object, choices: list[str]) -> None:
        self.point = point
        self.choices = choices
        close = _nearest(point, choices)
        super().__init__(
            "unknown crash point {point}; did you mean {close}? choose one of {choices}"
            if close
            else "unknown crash point {point}; choose one of {choices}",
            point=repr(point),
            close=close,
            choices=", ".join(choices),
        )


class UnknownStrategyError(ResumableError, ValueError):
    """No strategy is registered under ``name``; ``choices`` are the names that are."""

    def __init__(self, name: str, choices: list[str]) -> None:
        self.name = name
        self.choices = choices
        close = _nearest(name, choices)
        super().__init__(
            "no strategy named {name}; did you mean {close}? choose one of {choices}, "
            "or pass your own reconcile(cp, tools) function instead of a name"
            if close
            else "no strategy named {name}; choose one of {choices}, "
            "or pass your own reconcile(cp, tools) function instead of a name",
            name=repr(name),
            close=close,
            choices=", ".join(choices),
        )


class ReconcileNotCallableError(ResumableError, TypeError):
    """A resume was given something other than a function as its reconcile (often a strategy's name).

    Carries what was ``given`` and the registered strategies' names, ``choices``.
    """

    def __init__(self, given: object, choices: list[str]) -> None:
        self.given = given
        self.choices = choices
        close = _nearest(given, choices)
        super().__init__(
            "reconcile={given} is not a function: pass a strategy's, e.g. rc.STRATEGIES[{close}].reconcile, "
            "or your own reconcile(cp, tools) function"
            if close
            else "reconcile={given} is not a function: pass a strategy's, rc.STRATEGIES[name].reconcile "
            "(name one of {choices}), or your own reconcile(cp, tools) function",
            given=repr(given),
            close=close,
            choices=", ".join(choices),
        )


class ReconcileResultError(ResumableError, TypeError):
    """A reconcile function returned something other than a Checkpoint (often None: a missing ``return cp``).

    Carries the function's ``reconcile_name`` and what it ``returned``.
    """

    def __init__(self, reconcile_name: str, returned: object) -> None:
        self.reconcile_name = reconcile_name
        self.returned = returned
        super().__init__(
            "{name} returned None, not a Checkpoint: end it with `return cp`, the checkpoint it was given"
            if returned is None
            else "{name} returned a {type}, not a Checkpoint: end it with `return cp`, the checkpoint it was given",
            name=reconcile_name,
            type=type(returned).__name__,
        )


class ReconcileMissingError(ResumableError):
    """A resume found a dangling call and was given no reconcile to settle it.

    Carries the pending call's ``tool_name`` and ``tool_use_id``.
    """

    def __init__(self, tool_name: str, tool_use_id: str) -> None:
        self.tool_name = tool_name
        self.tool_use_id = tool_use_id
        super().__init__(
            "the checkpoint has a pending {tool} call ({id}) and no reconcile was given: "
            "pass reconcile= (a strategy's .reconcile or your own reconcile(cp, tools) function)",
            tool=tool_name,
            id=tool_use_id,
        )
