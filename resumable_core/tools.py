"""Tools and the Toolbox. Each tool declares its effect where it is defined."""

from __future__ import annotations

import inspect
import re
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar

from .errors import ToolError, UnknownToolError
from .lease import Fence
from .ledger import Ledger
from .world import World


class Effect(str, Enum):  # noqa: UP042 - StrEnum would change what str() of a member prints
    """What running a tool does to the world."""

    READ_ONLY = "read_only"
    """Reads only: running it twice is the same as once, so resume may re-run it."""
    SIDE_EFFECT = "side_effect"
    """Changes the world (sends, writes): never re-run blindly."""


@dataclass(frozen=True)
class Tool:
    """A tool the model may call: its API schema, its effect, and the code that runs it."""

    name: str
    description: str
    input_schema: dict[str, Any]
    effect: Effect
    run: Callable[..., str]

    def schema(self) -> dict[str, Any]:
        """The tool's definition as the Messages API takes it."""
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}


def tool(effect: Effect, description: str, **properties: dict[str, Any]) -> Callable[[Callable[..., str]], Tool]:
    """Define a tool from a function ``fn(world, **input) -> str``; every property is required."""

    def wrap(fn: Callable[..., str]) -> Tool:
        schema = {"type": "object", "properties": properties, "required": list(properties)}
        return Tool(fn.__name__, description, schema, effect, fn)

    return wrap


_STR = {"type": "string"}
_T = TypeVar("_T")


@tool(
    Effect.READ_ONLY,
    "List the files in a folder of the meeting notes.",
    path={**_STR, "description": "Folder, '.' for all notes."},
)
def list_dir(world: World, path: str = ".", **_: Any) -> str:
    folder = world.resolve_note(path)
    if not folder.is_dir():
        raise ToolError(f"no such folder: {path}")
    return "\n".join(sorted(p.name for p in folder.iterdir()))


@tool(
    Effect.READ_ONLY,
    "Read one file of the meeting notes.",
    path={**_STR, "description": "File name, e.g. meeting-08-25.md."},
)
def read_file(world: World, path: str, **_: Any) -> str:
    target = world.resolve_note(path)
    if not target.is_file():
        raise ToolError(f"no such file: {path}")
    return target.read_text(encoding="utf-8")


@tool(Effect.READ_ONLY, "Find lines matching a regular expression in the notes.", pattern=_STR, path=_STR)
def grep(world: World, pattern: str, path: str = ".", **_: Any) -> str:
    base = world.resolve_note(path)
    files = sorted(base.iterdir()) if base.is_dir() else [base]
    rx = re.compile(pattern)
    hits = [
        f"{f.name}: {line}" for f in files for line in f.read_text(encoding="utf-8").splitlines() if rx.search(line)
    ]
    return "\n".join(hits) or "(no match)"


@tool(Effect.SIDE_EFFECT, "Send an email. It cannot be unsent.", to=_STR, subject=_STR, body=_STR)
def send_email(
    world: World,
    to: str,
    subject: str,
    body: str,
    idempotency_key: str | None = None,
    fence: Fence | None = None,
    **_: Any,
) -> str:
    msg_id, sent_now = world.send_email(to, subject, body, idempotency_key, fence=fence)
    return (
        f"Email #{msg_id} sent to {to}."
        if sent_now
        else f"Email #{msg_id} to {to} was already sent (same idempotency key)."
    )


@tool(Effect.READ_ONLY, "List the emails already sent (the outbox).")
def list_sent_emails(world: World, **_: Any) -> str:
    rows = world.sent_emails()
    if not rows:
        return "The outbox is empty."
    return "\n".join(f"#{r['id']} to {r['to']}: {r['subject']}" for r in rows)


DEFAULT_TOOLS: tuple[Tool, ...] = (list_dir, read_file, grep, send_email, list_sent_emails)


class Toolbox:
    """The tools of one run, bound to a world and (optionally) a side-effect ledger.

    A toolbox with a ``fence`` (see :meth:`fenced`) passes it to the ledger and to side-effecting
    tools, so their writes are refused once the run's lease has passed to another resumer.
    """

    def __init__(
        self,
        world: World,
        tools: Iterable[Tool] = DEFAULT_TOOLS,
        ledger: Ledger | None = None,
        *,
        fence: Fence | None = None,
    ) -> None:
        self.world = world
        self.ledger = ledger
        self.fence = fence
        self._tools = {t.name: t for t in tools}

    def fenced(self, fence: Fence) -> Toolbox:
        """The same tools, world and ledger, whose writes carry ``fence``.

        The world and the ledger learn the token at once, so a resumer that held an older lease
        of the run is refused from this moment, not only once the new holder has written.
        """
        self.world.admit(fence)
        if self.ledger is not None:
            self.ledger.admit(fence)
        return Toolbox(self.world, self._tools.values(), self.ledger, fence=fence)

    @property
    def names(self) -> list[str]:
        """The tool names, in definition order."""
        return list(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def effect(self, name: str) -> Effect | None:
        """The declared effect of a tool, or None for a tool this toolbox does not know."""
        t = self._tools.get(name)
        return t.effect if t else None

    def is_read_only(self, name: str) -> bool:
        """True only for a known tool declared read-only; unknown tools are never assumed safe."""
        return self.effect(name) is Effect.READ_ONLY

    def schemas(self) -> list[dict[str, Any]]:
        """The tool definitions for the Messages API ``tools`` parameter."""
        return [t.schema() for t in self._tools.values()]

    def execute(self, name: str, input: dict[str, Any], *, idempotency_key: str | None = None) -> str:
        """Run a tool and return its output. Raises ToolError when the tool fails, and only that.

        A key given for a side-effecting call always goes to the tool, whose target may dedupe on
        it (the outbox, a payment provider). With a ledger too, the call runs at most once: a
        finished receipt's result is returned (or its failure raised again) instead. The one
        other error is ``LeaseLostError``, from a fenced toolbox whose lease was taken over: that
        is not the tool failing but this process having to stop.
        """
        t = self._tools.get(name)
        if t is None:
            raise UnknownToolError(name)
        if t.effect is not Effect.SIDE_EFFECT:
            return self._run(t, input, {})
        extra: dict[str, Any] = {"fence": self.fence} if self.fence is not None else {}
        if idempotency_key is not None:
            extra["idempotency_key"] = idempotency_key
        if self.ledger is None or idempotency_key is None:
            return self._run(t, input, extra)
        return self._run_once(t, input, idempotency_key, extra)

    def _run_once(self, t: Tool, input: dict[str, Any], key: str, extra: dict[str, Any]) -> str:
        """A side-effecting call under a ledger receipt: begin, run, record how it ended."""
        ledger = self.ledger
        if ledger is None:
            raise ToolError(f"{t.name}: no ledger to keep the receipt of {key!r}")
        receipt = self._store(lambda: ledger.begin(key, t.name, input, fence=self.fence))
        if receipt.status == "succeeded" and receipt.result is not None:
            return receipt.result
        if receipt.status == "failed":
            raise ToolError(receipt.result or f"{t.name} failed")
        try:
            result = self._run(t, input, extra)
        except ToolError as e:
            error = str(e)
            self._store(lambda: ledger.record(key, error, status="failed", fence=self.fence))
            raise
        self._store(lambda: ledger.record(key, result, fence=self.fence))
        return result

    @staticmethod
    def _store(write: Callable[[], _T]) -> _T:
        """A ledger write; a database failure becomes a ToolError (the call's outcome is unknown)."""
        try:
            return write()
        except sqlite3.Error as e:
            raise ToolError(f"the ledger failed: {e}") from e

    def _run(self, t: Tool, input: dict[str, Any], extra: dict[str, Any]) -> str:
        try:
            out = t.run(self.world, **input, **_accepted(t.run, extra))
        except ToolError:
            raise
        except (TypeError, ValueError, OSError, re.error, sqlite3.Error) as e:
            raise ToolError(f"{t.name} failed: {e}") from e
        self.world.log_call(t.name, input)
        return out


def _accepted(fn: Callable[..., str], extra: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of ``extra`` that ``fn`` takes (a learner's tool may take neither)."""
    params = inspect.signature(fn).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return extra
    return {k: v for k, v in extra.items() if k in params}
