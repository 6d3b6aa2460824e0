"""The visible checks of the ``resume`` assignment: a real run killed, then resumed by the learner's loop.

The learner writes ``resume(path, task, tools, client, *, reconcile, max_turns=...)``, the whole
resume path from load to loop. A check kills the email run for real at a crash point
(``run_agent(..., crash=CrashPlan(...))`` in a forked child), then runs the learner's ``resume``
in another forked child, so a hang or a crash of the learner's code never takes the kernel down.
Every model call, in every process, is logged to a file, so the counters can be checked across
the kill: ``turns`` equals the model calls made, ``tokens_used`` the tokens of the replies kept.

Its test cells call these as ``checks.check_*(resume)``; the hidden ones live with the instructor
(:mod:`resumable_core.course.hidden.resume`). The reconcile these checks hand to ``resume`` knows
only their own crash (a ``send_email`` that may have run): it is no general answer.
"""

from __future__ import annotations

import json
import os
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from ...checkpoint import Checkpoint, load_checkpoint, text_of
from ...claude import make_client
from ...crash import CrashError, CrashPlan, run_in_child
from ...errors import CheckpointError
from ...loop import run_agent
from ...run_folder import RunFolder, count_effects
from ...scenarios import EMAIL_TASK
from ...strategies import STATUS_UNKNOWN, Reconcile, answer_pending
from ...tools import DEFAULT_TOOLS, Toolbox
from .support import CheckFailed, die, handed, is_remote, require, scratch

Resume = Callable[..., Any]
"""``resume(path, task, tools, client, *, reconcile, max_turns=...)``: the learner's function."""

RESUME_TIMEOUT = 60.0
"""Seconds one run of the learner's ``resume`` may take in its child before it counts as hung."""


@cache
def email_turn(tool: str) -> int:
    """The turn on which an uncrashed email run calls ``tool`` (read_file: 1, send_email: 2)."""
    box = RunFolder.create(scratch("email-ref"))
    messages = box.run(EMAIL_TASK, client=make_client(live=False)).checkpoint.messages
    replies = [m for m in messages if m["role"] == "assistant"]
    for turn, reply in enumerate(replies, start=1):
        if any(b.get("type") == "tool_use" and b["name"] == tool for b in reply["content"]):
            return turn
    raise ValueError(f"the email run never calls {tool}")


# -- writing its own loop ----------------------------------------------------------------------

_LIBRARY_LOOPS = {"run_agent": run_agent, "RunFolder": RunFolder}
"""What a ``resume`` may not hand its work to: the library's own loop, and the run folder that runs it."""


def _code_names(code: types.CodeType) -> Iterator[str]:
    yield from code.co_names
    for const in code.co_consts:  # nested functions, lambdas and comprehensions
        if isinstance(const, types.CodeType):
            yield from _code_names(const)


def delegated_to(fn: Any) -> str | None:
    """The library loop ``fn`` (or a function of the notebook it calls) hands its work to, or None."""
    todo, seen = [fn], set()
    while todo:
        f = todo.pop()
        code = getattr(f, "__code__", None)
        if not isinstance(code, types.CodeType) or id(f) in seen:
            continue
        seen.add(id(f))
        names = set(_code_names(code))
        found = names & set(_LIBRARY_LOOPS)
        if found:
            return sorted(found)[0]
        namespace = getattr(f, "__globals__", {})
        values = [namespace[n] for n in names if n in namespace]
        values += [c.cell_contents for c in getattr(f, "__closure__", None) or () if c.cell_contents is not None]
        for value in values:
            name = next((n for n, loop in _LIBRARY_LOOPS.items() if value is loop), None)
            if name is not None:
                return name
            if isinstance(value, types.FunctionType):
                todo.append(value)
    return None


def require_own_loop(fn: Any) -> None:
    """Refuse a ``resume`` that calls the library's loop instead of writing its own.

    Only where ``fn`` runs here (the learner's kernel, as a hint): its code cannot be read from
    outside its process, and nothing read inside it is believed. In the isolated re-check the
    learner's process has a library whose loop refuses to run (``learner_view``), which decides.
    """
    if is_remote(fn):
        return
    loop = delegated_to(fn)
    require(loop is None, f"resume calls {loop}, the library's loop; write the loop yourself (that is the exercise)")


# -- counting model calls across processes -------------------------------------------------------


def spent_tokens(usage: Any) -> int:
    """Every token a call is billed for: input, output and the prompt cache's writes and reads."""
    fields = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    return sum(getattr(usage, f, None) or 0 for f in fields)


def reply_key(content: Any) -> str:
    """What identifies a reply in the conversation: its tool_use ids (unique per reply), else its text."""
    blocks = content if isinstance(content, list) else []
    ids = [b.get("id") for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
    return json.dumps(ids) if ids else text_of(content)


class _LoggedMessages:
    def __init__(self, client: Any, log: Path, die_after: int | None) -> None:
        self._client, self._log, self._die_after, self._calls = client, log, die_after, 0

    def create(self, **kwargs: Any) -> Any:
        response = self._client.messages.create(**kwargs)
        content = [b.to_dict() for b in response.content]
        with open(self._log, "a", encoding="utf-8") as f:  # closed before any kill: the line is kept
            f.write(json.dumps({"key": reply_key(content), "tokens": spent_tokens(response.usage)}) + "\n")
        self._calls += 1
        if self._calls == self._die_after:  # the reply came back and the process dies before using it
            die()
        return response


class LoggedClient:
    """The scripted Claude behind the real SDK, logging each call to a file (which survives SIGKILL).

    With ``die_after=n`` the process SIGKILLs itself right after its n-th reply came back.
    """

    def __init__(self, log: Path, *, die_after: int | None = None) -> None:
        self.messages = _LoggedMessages(make_client(live=False), log, die_after)


class DyingToolbox(Toolbox):
    """The kit's tools on a world, whose process dies of SIGKILL right after ``tool`` has run."""

    def __init__(self, box: Toolbox, tool: str) -> None:
        super().__init__(box.world, DEFAULT_TOOLS, ledger=box.ledger)
        self._dies_after = tool

    def execute(self, name: str, input: dict[str, Any], *, idempotency_key: str | None = None) -> str:
        output = super().execute(name, input, idempotency_key=idempotency_key)
        if name == self._dies_after:
            die()
        return output


# -- one trial: a run killed, then resumed by the learner ---------------------------------------


@dataclass
class Outcome:
    """How one run of the learner's ``resume`` in a child ended."""

    ended: str
    """``returned``, ``raised``, ``killed`` (by the check, on purpose) or ``hung``."""
    checkpoint: Checkpoint | None = None
    """What it returned, when it returned a Checkpoint."""
    error: str | None = None
    """Why it did not return a Checkpoint (the API's 400, an exception, what it returned instead)."""
    refused: bool = False
    """It raised a CheckpointError or a ValueError (how a resume refuses a file)."""


def _record(fn: Resume, args: tuple[Any, ...], kwargs: dict[str, Any], out: Path) -> None:
    """In the child: run the learner's ``resume`` and write how it ended to ``out`` as JSON."""
    import anthropic

    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - the child never returns to close it
    record: dict[str, Any]
    try:
        result = fn(*args, **kwargs)
    except anthropic.BadRequestError as e:
        body = e.body if isinstance(e.body, dict) else {}
        record = {"error": "the API refused it with a 400: " + ((body.get("error") or {}).get("message") or str(e))}
    except Exception as e:  # noqa: BLE001 - the learner's error becomes the check's message
        record = {"error": f"{type(e).__name__}: {e}", "refused": isinstance(e, CheckpointError | ValueError)}
    else:
        if isinstance(result, Checkpoint):
            record = {"checkpoint": result.model_dump(mode="json")}
        else:
            record = {"error": f"resume must return the final Checkpoint, it returned {type(result).__name__}"}
    out.write_text(json.dumps(record), encoding="utf-8")


@dataclass
class Trial:
    """One email run in its own folder; every model call of every process logged to ``log``."""

    folder: RunFolder
    log: Path

    @classmethod
    def new(cls) -> Trial:
        """A fresh world and no checkpoint yet."""
        box = RunFolder.create(scratch("resume"))
        return cls(box, box.root / "model_calls.jsonl")

    @classmethod
    def crashed(cls, point: str, tool: str) -> Trial:
        """The email run killed for real (SIGKILL) at ``point`` on the turn that calls ``tool``."""
        trial = cls.new()
        plan = CrashPlan(point, tool=tool, turn=email_turn(tool))
        client = LoggedClient(trial.log)
        ended = run_in_child(lambda: trial.folder.run(EMAIL_TASK, client=client, crash=plan))
        if ended != "killed":  # a bug in the check, not in the learner's code
            raise ValueError(f"the email run was not killed at {point} on the {tool} turn")
        return trial

    @property
    def path(self) -> Path:
        """The run's checkpoint file."""
        return self.folder.checkpoint_path

    def calls(self) -> list[dict[str, Any]]:
        """Every model call so far, across processes: ``{"key": ..., "tokens": ...}``."""
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text(encoding="utf-8").splitlines()]

    def emails(self) -> int:
        """How many times the run's email went out."""
        return count_effects("send_email", self.folder.world)

    def resume(
        self,
        fn: Resume,
        reconcile: Reconcile,
        *,
        task: str = EMAIL_TASK,
        tools: Toolbox | None = None,
        die_after_call: int | None = None,
        **kwargs: Any,
    ) -> Outcome:
        """Run ``fn(path, task, tools, client, reconcile=reconcile, **kwargs)`` in a forked child."""
        out = self.folder.root / "resume-outcome.json"
        out.unlink(missing_ok=True)
        client = LoggedClient(self.log, die_after=die_after_call)
        args = (handed(self.path), task, tools or self.folder.toolbox, client)
        try:
            ended = run_in_child(
                lambda: _record(fn, args, {"reconcile": reconcile, **kwargs}, out), timeout=RESUME_TIMEOUT
            )
        except CrashError:
            return Outcome("hung", error=f"resume was still running after {RESUME_TIMEOUT:g} s; does its loop end?")
        if ended == "killed":
            return Outcome("killed")
        record = json.loads(out.read_text(encoding="utf-8"))
        if "checkpoint" in record:
            return Outcome("returned", checkpoint=Checkpoint.model_validate(record["checkpoint"]))
        return Outcome("raised", error=record["error"], refused=bool(record.get("refused")))

    def replies_problem(self, cp: Checkpoint) -> str | None:
        """Why ``cp``'s assistant messages are not replies the model gave, in the order it gave them, or None."""
        order = {c["key"]: i for i, c in reversed(list(enumerate(self.calls())))}
        seen = -1
        for m in cp.messages:
            if m.get("role") != "assistant":
                continue
            at = order.get(reply_key(m.get("content")))
            if at is None:
                return (
                    "the conversation holds an assistant message the model never sent: record each reply "
                    "exactly as messages.create returned it"
                )
            if at < seen:
                return "the model's replies are out of the order it gave them in"
            seen = at
        return None

    def counter_problem(self, cp: Checkpoint) -> str | None:
        """How ``cp``'s counters disagree with the model calls logged across every process, or None."""
        calls = self.calls()
        if cp.turns != len(calls):
            return (
                f"turns is {cp.turns}, but the model was called {len(calls)} times across the crash and the "
                "resume: carry turns on from the checkpoint, and charge each turn (turns += 1, save) before its call"
            )
        tokens = {c["key"]: c["tokens"] for c in calls}
        kept = sum(tokens.get(reply_key(m["content"]), 0) for m in cp.messages if m["role"] == "assistant")
        if cp.tokens_used != kept:
            return (
                f"tokens_used is {cp.tokens_used}, but the replies in the conversation cost {kept} tokens: carry "
                "tokens_used on from the checkpoint and add each reply's tokens as you record it"
            )
        return None

    def disk_problem(self, cp: Checkpoint) -> str | None:
        """How the checkpoint on disk differs from what ``resume`` returned, or None."""
        on_disk = load_checkpoint(self.path)
        if on_disk is None or on_disk.model_dump() != cp.model_dump():
            pending = on_disk.pending_tool_use if on_disk is not None else None
            left = f" (the file still has {pending.name} pending)" if pending is not None else ""
            return (
                f"what resume returned is not what it saved{left}: save after every change "
                "(the reconciled state, save point A after each reply, save point B after each tool result)"
            )
        return None


def require_sound_end(trial: Trial, outcome: Outcome, where: str, *, emails: int = 1) -> Checkpoint:
    """The resumed run finished: no error, ``emails`` emails, on disk as returned, counters that add up."""
    if outcome.checkpoint is None:
        raise CheckFailed(f"{where}: {outcome.error or 'resume did not return'}")
    cp = outcome.checkpoint
    require(trial.emails() == emails, f"{where}: the team got {trial.emails()} emails; {emails} is right")
    require(cp.is_finished(), f"{where}: resume returned an unfinished run; keep calling the model until it is done")
    problem = trial.replies_problem(cp) or trial.disk_problem(cp) or trial.counter_problem(cp)
    require(problem is None, f"{where}: {problem}")
    return cp


def check_crash_point(fn: Resume, point: str, tool: str, reconcile: Reconcile) -> None:
    """The email run killed at ``point`` on the ``tool`` turn, resumed by ``fn`` with ``reconcile``: a sound end."""
    require_own_loop(fn)
    trial = Trial.crashed(point, tool)
    where = f"killed {point} on the {tool} turn"
    if not trial.path.exists():
        where += " (before the first save: no checkpoint yet, so start the task fresh)"
    require_sound_end(trial, trial.resume(fn, reconcile), where)


# -- the visible checks ---------------------------------------------------------------------------


def _answer_send_email(cp: Checkpoint, tools: Toolbox) -> Checkpoint:
    """These checks' reconcile: it knows only their crash, a send_email that may have run."""
    p = cp.pending_tool_use
    if p is None:
        return cp
    if p.name != "send_email":  # a bug in the check: its crash leaves only send_email pending
        raise ValueError(f"this check's reconcile answers only a pending send_email, not {p.name}")
    return answer_pending(cp, STATUS_UNKNOWN, is_error=True)


def check_crash_after_tool(fn: Resume) -> None:
    """Killed after send_email ran, before save point B: reconciled, one email, the run finishes, counters add up."""
    check_crash_point(fn, "after_tool", "send_email", _answer_send_email)


def check_crash_after_response(fn: Resume) -> None:
    """Killed after the model's reply, before save point A: the call still counts, one email, the run finishes."""
    check_crash_point(fn, "after_response", "send_email", _answer_send_email)
