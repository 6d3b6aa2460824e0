"""Building blocks shared by the visible and the hidden checks.

A check runs the learner's function on real checkpoints, a real world (files + SQLite outbox) and
the scripted Claude behind the real SDK, and raises :class:`CheckFailed` with one sentence the
learner can act on. Nothing here prints, warns or writes to stderr (nbgrader scores a test cell
that writes to stderr 0). Crashes happen in a forked child (:func:`resumable_core.crash.run_in_child`),
never in the caller's process. Every check makes its own fresh folder with :func:`scratch`, inside
one folder per process that goes when the process exits; none depends on the working directory.
"""

from __future__ import annotations

import atexit
import contextlib
import copy
import json
import os
import secrets
import shutil
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...checkpoint import Checkpoint, PendingToolUse, consistency_problem, pending_calls, text_of
from ...crash import CrashPlan, kill_self, run_in_child
from ...lab.core_words import core, message
from ...lab.i18n import N_
from ...ledger import Ledger
from ...run_folder import RunFolder, reference_turn, target_input
from ...scenarios import BRIEFING_TASK, NOTES_TASK, SCENARIOS
from ...strategies import Reconcile
from ...tools import DEFAULT_TOOLS, Tool, Toolbox
from ...world import World
from ..errors import CourseError
from ..i18n import _


class CheckFailed(CourseError, AssertionError):
    """A check found the learner's code wrong; ``reason`` is the one sentence to act on.

    An ``AssertionError`` so nbgrader and the re-check report it as a failed test, but raised
    explicitly: ``python -O`` strips ``assert`` statements, never this.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def require(condition: object, message: str) -> None:
    """Raise :class:`CheckFailed` with ``message`` unless ``condition`` holds."""
    if not condition:
        raise CheckFailed(message)


_DATA_TYPES = (type(None), bool, int, float, str)


def same_data(got: Any, expected: Any) -> bool:
    """True when ``got`` is plain data (dicts, lists, str, numbers, None, exactly those types) equal to ``expected``.

    No method of a learner's object runs: a value whose ``__eq__`` says yes to everything is not data.
    """
    if type(got) is not type(expected):
        return False
    if isinstance(expected, dict):
        return len(got) == len(expected) and all(
            type(k) in _DATA_TYPES and k in expected and same_data(dict.__getitem__(got, k), expected[k])
            for k in dict.keys(got)
        )
    if isinstance(expected, list | tuple):
        return len(got) == len(expected) and all(same_data(g, e) for g, e in zip(got, expected, strict=True))
    return type(expected) in _DATA_TYPES and bool(got == expected)


def is_remote(fn: Any) -> bool:
    """True when ``fn`` runs in another process (the isolated re-check's learner's process), not here.

    Read from the type: nothing the learner made defines it there. A check that would have to
    watch the function from inside (its code, its file writes) cannot believe what it sees there,
    so it judges the function by what the checker observes from outside instead.
    """
    return getattr(type(fn), "remote", False) is True


def restarted(fn: Any) -> Any:
    """``fn`` as a harness restarted after a crash calls it: in a freshly started process, where one can be had.

    In the isolated re-check (``fn`` is remote) every call of the result is served by a new
    interpreter that ran the notebook's setup and the learner's cells again, so state the learner's
    module drew at import (a per-process uuid) is new, as after a real restart: that is the verdict
    a grade rests on. In the learner's own kernel no new interpreter can load the learner's code
    (it lives in the kernel's ``__main__``), so ``fn`` itself comes back, and a check's forked
    child is the most of a restart there is: a cell that passes so but fails the re-check scores 0.
    Raise :class:`FailedAfterRestart` for what the restarted call got wrong.
    """
    return fn.restarted() if is_remote(fn) else fn


HIDDEN_SENTENCE = "hidden_sentence"
"""The attribute of a hidden check that gives its one failure sentence, in now's language (``hidden.i18n.fails_with``)."""

OBSERVES = "observes_system_calls"
"""The attribute of a check that judges a learner's function by its system calls (:func:`observes`)."""


def observes(check: Any) -> Any:
    """Mark a check that judges a learner's function by the system calls a tracer outside its process saw.

    Only the learner's processes of an assignment with such a check run under the tracer
    (:func:`..grading.recheck.plan.traced`): it slows every file call. An unmarked check that
    observes finds no trace, and fails.
    """
    setattr(check, OBSERVES, True)
    return check


class FailedAfterRestart(CheckFailed):
    """A check failed on what a :func:`restarted` call did: the re-check names it as such.

    In the learner's kernel that call ran in a forked copy of the kernel, in the re-check in a
    freshly started process, so a cell may pass the one and fail the other without any patching.
    """


class HandedPath(str):
    """A path a check hands the learner's function to read and write: a plain ``str`` wherever it is used.

    In the isolated re-check the checker copies the file into a folder the learner's process sees
    before the call and reads it back after it (:mod:`resumable_core.course.grading.recheck.boundary`), so
    the check's own folder stays out of the learner's reach.
    """

    __slots__ = ()


class HandedFolder(HandedPath):
    """A handed path whose whole folder is the function's: every file in it is copied in and read back."""

    __slots__ = ()


def handed(path: str | Path, *, folder: bool = False) -> HandedPath:
    """``path`` to hand the learner's function (``folder=True``: the folder holds nothing but what it writes)."""
    return (HandedFolder if folder else HandedPath)(str(path))


BEFORE_DEATH: list[Callable[[], None]] = []
"""What must run in a check's child before it kills itself (the re-check reads the handed files back)."""


def die() -> None:
    """SIGKILL this process, as a crash would, after :data:`BEFORE_DEATH` ran."""
    for hook in BEFORE_DEATH:
        hook()
    kill_self()


def _remove_scratch_root(owner: int, root: Path) -> None:
    if os.getpid() == owner:  # a forked child inherits this handler; only the process that named the root removes it
        shutil.rmtree(root, ignore_errors=True)


_SCRATCH_ROOT = Path(tempfile.gettempdir()) / f"resumable-checks-{os.getpid()}-{secrets.token_hex(8)}"
"""The one folder this process's scratch folders go in: named at import, made at the first use, so a child forked
before any check made it (it leaves with ``os._exit``, no atexit) puts its folders in the same one, which the
process that imported this module removes; a process killed before any check made it leaves nothing."""
atexit.register(_remove_scratch_root, os.getpid(), _SCRATCH_ROOT)


def scratch(prefix: str = "check") -> Path:
    """A fresh empty folder, inside this process's scratch root, which is removed when the process exits."""
    _SCRATCH_ROOT.mkdir(mode=0o700, exist_ok=True)  # back if a temp-folder cleaner took it meanwhile
    return Path(tempfile.mkdtemp(prefix=f"{prefix}-", dir=_SCRATCH_ROOT))


class CountingToolbox(Toolbox):
    """A real Toolbox that also records every ``execute`` call (name, input), a call spy."""

    def __init__(self, world: World, tools: Iterable[Tool] = DEFAULT_TOOLS, ledger: Ledger | None = None) -> None:
        super().__init__(world, tools, ledger=ledger)
        self.executed: list[tuple[str, dict[str, Any]]] = []

    @classmethod
    def wrap(cls, box: Toolbox) -> CountingToolbox:
        """The same world, tools and ledger as ``box``, with the spy."""
        return cls(box.world, box._tools.values(), ledger=box.ledger)

    def execute(self, name: str, input: dict[str, Any], *, idempotency_key: str | None = None) -> str:
        self.executed.append((name, copy.deepcopy(input)))
        return super().execute(name, input, idempotency_key=idempotency_key)

    def count(self, name: str | None = None) -> int:
        """How many times ``execute`` was called (for ``name``, or for any tool)."""
        return sum(1 for n, _ in self.executed if name is None or n == name)


def fresh_toolbox(extra: Iterable[Tool] = (), *, ledger: bool = False) -> CountingToolbox:
    """A counting toolbox on a fresh world (the meeting notes, an empty outbox)."""
    root = scratch("world")
    world = World.create(root / "world")
    return CountingToolbox(world, (*DEFAULT_TOOLS, *extra), ledger=Ledger(root / "ledger.sqlite") if ledger else None)


def dangling(
    name: str, tool_input: dict[str, Any], *, task: str = NOTES_TASK, tool_use_id: str | None = None
) -> Checkpoint:
    """A checkpoint whose last message asks for ``name(tool_input)`` and has no result yet."""
    tid = tool_use_id or f"toolu_01grader{name.replace('_', '')[:14]:0<14}"
    use = {"type": "tool_use", "id": tid, "name": name, "input": tool_input}
    cp = Checkpoint(
        task=task,
        run_id="run_grader",
        turns=1,
        tokens_used=100,
        messages=[
            {"role": "user", "content": task},
            {"role": "assistant", "content": [{"type": "text", "text": "One moment."}, use]},
        ],
        pending_tool_uses=[PendingToolUse(id=tid, name=name, input=tool_input)],
    )
    problem = consistency_problem(cp)
    if problem is not None:  # a bug in the check itself, not in the learner's code
        raise ValueError(f"dangling({name!r}) built an inconsistent checkpoint: {problem}")
    return cp


NAIVE_RESUME_LESSON = N_("lesson 2, section 3, 'Resume naively: the API says no'")
"""Where the lessons show that a dangling call left as it is gets the API's 400."""
DELETE_LESSON = N_("lesson 2, section 4, 'Move 1: delete'")
"""Where the lessons show what deleting the dangling call costs."""
UNKNOWN_TOOLS_LESSON = N_("lesson 2, section 5, 'The rule: by what the tool does'")
"""Where the lessons say an unknown tool is never assumed safe."""
PARALLEL_LESSON = N_("reread lesson 2, 'Sidebar: several calls in one turn'")
"""Where the lessons work a turn of several calls by hand: the checks of such turns point there."""
CARRY_OVER_LESSON = N_("lesson 1, section 8, '`turns` and `tokens_used` carry over'")
"""Where the lessons show that a run's counters (and its id) outlive every crash."""
RECONCILED_FIELDS = frozenset({"messages", "pending_tool_uses", "recorded_results"})
"""The checkpoint's fields that reconciling changes; every other one is the run's and carries over."""


def require_run_kept(before: Checkpoint, out: Checkpoint) -> None:
    """Require that ``out`` keeps every field of ``before`` but :data:`RECONCILED_FIELDS`.

    A fresh ``Checkpoint(task=..., messages=...)`` settles the calls but starts the run over: a
    new ``run_id`` (new idempotency keys, so a ledger no longer recognises the run's calls), and
    ``turns`` and ``tokens_used`` at zero (the turn cap and the budget start over after each crash)."""
    lost = [
        f"{name} {getattr(before, name)!r} became {getattr(out, name)!r}"
        for name in Checkpoint.model_fields
        if name not in RECONCILED_FIELDS and getattr(out, name) != getattr(before, name)
    ]
    require(
        not lost,
        _(
            "reconciling settles the dangling calls and nothing else, yet the run's own "
            "fields changed: {changes}. Keep the checkpoint you were given (its run_id makes "
            "the idempotency keys; turns and tokens_used hold the cap and the budget) and "
            "change only its messages, pending_tool_uses and recorded_results (reread "
            "{carry_over_lesson})"
        ).format(changes="; ".join(lost), carry_over_lesson=_(CARRY_OVER_LESSON)),
    )


def dangling_turn(
    calls: list[tuple[str, dict[str, Any]]], *, recorded: int = 0, task: str = NOTES_TASK, run_id: str = "run_grader"
) -> Checkpoint:
    """A checkpoint whose last message asks for every call of ``calls`` in one turn, the first
    ``recorded`` of them already answered (in ``recorded_results``) and the rest pending."""
    uses: list[dict[str, Any]] = [
        {"type": "tool_use", "id": f"toolu_01turn{k:02d}{name.replace('_', '')[:12]}", "name": name, "input": i}
        for k, (name, i) in enumerate(calls)
    ]
    cp = Checkpoint(
        task=task,
        run_id=run_id,
        turns=1,
        tokens_used=100,
        messages=[
            {"role": "user", "content": task},
            {"role": "assistant", "content": [{"type": "text", "text": "I'll do these at the same time."}, *uses]},
        ],
        pending_tool_uses=[PendingToolUse(id=u["id"], name=u["name"], input=u["input"]) for u in uses[recorded:]],
        recorded_results=[
            {"type": "tool_result", "tool_use_id": u["id"], "content": f"{u['name']} finished before the crash."}
            for u in uses[:recorded]
        ],
    )
    problem = consistency_problem(cp)
    if problem is not None:  # a bug in the check itself, not in the learner's code
        raise ValueError(f"dangling_turn({calls!r}) built an inconsistent checkpoint: {problem}")
    return cp


def answered_turn(before: Checkpoint, out: Checkpoint) -> dict[str, dict[str, Any]]:
    """Require that the turn's calls got one new user message: the recorded results kept, first and
    unchanged, then one tool_result per pending call, all in the blocks' order. Returns them by id."""
    n = len(before.messages)
    ids = [b["tool_use_id"] for b in before.recorded_results] + [p.id for p in before.pending_tool_uses]
    if not ids:  # a bug in the check itself: only a dangling turn can be answered
        raise ValueError("answered_turn() needs the checkpoint before reconcile to have pending calls")
    require(
        len(out.messages) != n or out.messages[-1] != before.messages[-1],
        _("the turn's calls are still unanswered: the checkpoint came back as it was ({parallel_lesson})").format(
            parallel_lesson=_(PARALLEL_LESSON)
        ),
    )
    require(
        len(out.messages) >= n and out.messages[:n] == before.messages,
        _(
            "the messages up to the turn that asked for the tools must stay exactly as they "
            "were: deleting the assistant's tool_use hides from the model what may have "
            "happened ({parallel_lesson})"
        ).format(parallel_lesson=_(PARALLEL_LESSON)),
    )
    require(
        len(out.messages) == n + 1,
        _("all the turn's results go in one user message; {count} messages were appended ({parallel_lesson})").format(
            count=len(out.messages) - n, parallel_lesson=_(PARALLEL_LESSON)
        ),
    )
    last = out.messages[-1]
    content = last.get("content")
    require(last.get("role") == "user" and isinstance(content, list), _("the appended message must be the user's"))
    blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    got = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
    require(
        len(blocks) == len(ids) and got == ids,
        _(
            "one tool_result per tool_use, in the blocks' order {ids}; the message holds {got} ({parallel_lesson})"
        ).format(ids=ids, got=got, parallel_lesson=_(PARALLEL_LESSON)),
    )
    for kept in before.recorded_results:
        require(
            blocks[ids.index(kept["tool_use_id"])] == kept,
            _(
                "the result recorded before the crash for {tool_use_id} must be kept as it is: "
                "that call already ran and its result is known ({parallel_lesson})"
            ).format(tool_use_id=kept["tool_use_id"], parallel_lesson=_(PARALLEL_LESSON)),
        )
    require(
        not out.pending_tool_uses and not out.recorded_results,
        _(
            "once the turn is answered nothing stays pending or recorded: pending_tool_uses "
            "and recorded_results are empty"
        ),
    )
    require_run_kept(before, out)
    problem = consistency_problem(out)
    require(
        problem is None,
        _("the reconciled checkpoint contradicts itself: {problem}").format(problem=core(problem or "")),
    )
    return {str(b["tool_use_id"]): b for b in blocks}


def call_learner(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` with what it writes to ``sys.stderr`` shown on stdout instead.

    nbgrader scores a test cell that writes to stderr 0, so a learner's debugging print to stderr
    would cost points that plain ``nbgrader autograde`` and the kit's grader must agree on. Every
    check calls the learner's functions through this.
    """
    with contextlib.redirect_stderr(sys.stdout):
        return fn(*args, **kwargs)


def error_text(e: BaseException) -> str:
    """The learner's exception as a message says it: ``Type: message`` (``Type`` alone when it has no message),
    then where in the learner's cells it was raised, as the notebook's traceback names it."""
    said = message(e)  # a core error in now's language
    text = f"{type(e).__name__}: {said}" if said else type(e).__name__
    where = _raised_in_cell(e)
    return f"{text} ({where})" if where else text


def _raised_in_cell(e: BaseException) -> str:
    """``Cell In[5], line 3: <that line>``: the last frame of ``e``'s traceback in a notebook cell, or ""."""
    try:
        from IPython import get_ipython
    except ImportError:  # the core wing, without IPython: no cells
        return ""
    shell = get_ipython()
    cells = getattr(getattr(shell, "compile", None), "_filename_map", {})
    frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename in cells]
    if not frames:
        return ""
    frame = frames[-1]
    return _("Cell In[{number}], line {line}: {code}").format(
        number=cells[frame.filename], line=frame.lineno, code=(frame.line or "").strip()
    )


def run_reconcile(fn: Reconcile, cp: Checkpoint, tools: Toolbox) -> tuple[Checkpoint, Checkpoint]:
    """Call the learner's ``fn(cp, tools)``; return (a copy of cp before, the checkpoint it returned)."""
    before = cp.model_copy(deep=True)
    try:
        out = call_learner(fn, cp, tools)
    except Exception as e:  # noqa: BLE001 - the learner's error becomes the test's message
        raise CheckFailed(_("reconcile raised {error}").format(error=error_text(e))) from None
    if type(out) is not Checkpoint:
        raise CheckFailed(
            _("reconcile must return the reconciled Checkpoint, it returned {name}").format(name=type(out).__name__)
        )
    return before, as_data(out)


def as_data(cp: Checkpoint) -> Checkpoint:
    """``cp`` rebuilt from its JSON: what the checks compare holds no object of the learner's, only data."""
    try:
        return Checkpoint.model_validate(cp.model_dump(mode="json"))
    except Exception as e:  # noqa: BLE001 - a value that is not JSON, or fields that no longer validate
        raise CheckFailed(
            _("the returned Checkpoint does not hold plain JSON data: {error}").format(error=str(e).splitlines()[0])
        ) from None


def answered(before: Checkpoint, out: Checkpoint) -> dict[str, Any]:
    """Require that the dangling call got exactly one tool_result in one new user message; return it."""
    p = before.pending_tool_use
    if p is None:  # a bug in the check itself: only a dangling checkpoint can be answered
        raise ValueError("answered() needs the checkpoint before reconcile to have a pending call")
    n = len(before.messages)
    require(
        out.messages != before.messages or out.pending_tool_uses != before.pending_tool_uses,
        _(
            "the dangling call {id} is still unanswered: the checkpoint came back as it was, "
            "and the API refuses a tool_use with no tool_result (reread "
            "{naive_resume_lesson})"
        ).format(id=p.id, naive_resume_lesson=_(NAIVE_RESUME_LESSON)),
    )
    require(
        out.messages[: n - 1] != before.messages[: n - 1] or before.messages[-1] in out.messages[n - 1 : n],
        _(
            "the assistant's tool_use {id} was deleted: that hides from the model what may "
            "have happened, and it decides again (reread {delete_lesson})"
        ).format(id=p.id, delete_lesson=_(DELETE_LESSON)),
    )
    require(
        len(out.messages) == n + 1,
        _(
            "expected exactly one message appended (the user's tool_result for {id}); had "
            "{n} messages, now {n_messages}"
        ).format(id=p.id, n=n, n_messages=len(out.messages)),
    )
    require(
        out.messages[:n] == before.messages, _("the messages before the dangling call must stay exactly as they were")
    )
    last = out.messages[-1]
    require(last.get("role") == "user", _("the appended message must have role 'user'"))
    content = last.get("content")
    require(
        isinstance(content, list) and len(content) == 1,
        _("the appended message must hold exactly one block: the tool_result"),
    )
    block = content[0] if isinstance(content, list) else None
    if not (isinstance(block, dict) and block.get("type") == "tool_result"):
        raise CheckFailed(_("the appended block must be a tool_result"))
    require(
        block.get("tool_use_id") == p.id,
        _("the tool_result must answer the pending id {id}, not {other}").format(
            id=p.id, other=block.get("tool_use_id")
        ),
    )
    require(out.pending_tool_use is None, _("pending_tool_use must be cleared (None) once its tool_result is recorded"))
    require_run_kept(before, out)
    problem = consistency_problem(out)
    require(
        problem is None,
        _("the reconciled checkpoint contradicts itself: {problem}").format(problem=core(problem or "")),
    )
    return block


def require_rerun(block: dict[str, Any], expected_output: str) -> None:
    """The tool_result carries the re-run tool's real output, not an error."""
    require(not block.get("is_error"), _("a read-only tool re-ran fine: its tool_result must not be is_error"))
    require(text_of(block.get("content")) == expected_output, _("the tool_result must hold the tool's output exactly"))


def require_status_unknown(block: dict[str, Any]) -> None:
    """The tool_result is an is_error saying the execution status is unknown."""
    require(
        block.get("is_error") is True, _("a call that may already have happened gets a tool_result with is_error: true")
    )
    require(
        "unknown" in text_of(block.get("content")).lower(),
        _("the is_error text must say the execution status is unknown"),
    )


# -- replaying a scenario's crash for real -----------------------------------------------------


@dataclass
class Replay:
    """One crash-and-resume of a scenario with the learner's reconcile."""

    killed: bool
    pending_at_crash: dict[str, Any] | None
    """The first call the crash left pending, as the checkpoint file holds it (None: nothing pending)."""
    emails_at_crash: int
    emails: int
    error: str | None
    """The API's 400 text, or the exception the resume raised; None when the resume went through."""
    checkpoint: Checkpoint | None
    reads: int
    """How many times read_file really ran with the crashed call's input."""

    def result_for(self, tool_use_id: str) -> dict[str, Any] | None:
        """The tool_result block answering ``tool_use_id`` in the resumed conversation."""
        for m in self.checkpoint.messages if self.checkpoint else []:
            for b in m["content"] if isinstance(m["content"], list) else []:
                if b.get("type") == "tool_result" and b.get("tool_use_id") == tool_use_id:
                    return b
        return None

    def pending_result(self) -> dict[str, Any] | None:
        """The tool_result answering the call the crash left pending (None if none was pending)."""
        return self.result_for(self.pending_at_crash["id"]) if self.pending_at_crash else None


def replay(
    fn: Reconcile, crash_point: str = "after_tool", tool_name: str = "send_email", *, ledger: bool = False
) -> Replay:
    """SIGKILL a run in a forked child at ``crash_point`` on the turn calling ``tool_name``, resume with ``fn``."""
    import anthropic

    box = RunFolder.create(scratch("replay"), ledger=ledger)
    task = SCENARIOS[tool_name].task
    plan = CrashPlan(crash_point, tool=tool_name, turn=reference_turn(tool_name))
    ended = run_in_child(lambda: box.run(task, crash=plan))
    raw = json.loads(box.checkpoint_path.read_text()) if box.checkpoint_path.exists() else None
    emails_at_crash = len(box.world.sent_emails())
    error, cp = None, None
    try:
        cp = box.run(task, reconcile=fn).checkpoint
    except anthropic.BadRequestError as e:
        body = e.body if isinstance(e.body, dict) else {}
        error = "API 400: " + ((body.get("error") or {}).get("message") or str(e))
    except Exception as e:  # noqa: BLE001 - the learner's error becomes the test's message
        error = error_text(e)
    reads = sum(1 for _, i in box.world.calls("read_file") if i == target_input("read_file"))
    return Replay(
        ended == "killed",
        next(iter(pending_calls(raw or {})), None),
        emails_at_crash,
        len(box.world.sent_emails()),
        error,
        cp,
        reads,
    )


PARALLEL_TURN = 2
"""The briefing run's turn that asks for two tools at once (send_email, then read_file)."""


def crash_parallel_turn(point: str, tool: str, *, ledger: bool = True) -> RunFolder:
    """The briefing run SIGKILLed in a forked child at ``point`` of its parallel turn (at ``tool``'s call)."""
    box = RunFolder.create(scratch("parallel"), ledger=ledger)
    plan = CrashPlan(point, tool=tool, turn=PARALLEL_TURN)
    if run_in_child(lambda: box.run(BRIEFING_TASK, crash=plan)) != "killed":  # a bug in the check itself
        raise ValueError(f"the briefing run was not killed at {point} on its {tool} call")
    return box


def resumed_with(box: RunFolder, fn: Reconcile) -> tuple[Checkpoint | None, str | None]:
    """Resume the briefing run in ``box`` with ``fn`` as its reconcile: (its checkpoint, None), or
    (None, the API's 400 text or the error the resume raised)."""
    import anthropic

    try:
        return box.run(BRIEFING_TASK, reconcile=fn).checkpoint, None
    except anthropic.BadRequestError as e:
        body = e.body if isinstance(e.body, dict) else {}
        return None, "API 400: " + ((body.get("error") or {}).get("message") or str(e))
    except Exception as e:  # noqa: BLE001 - the learner's error becomes the test's message
        return None, error_text(e)


ENDINGS = {"hung": N_("hung"), "killed": N_("killed"), "raised": N_("raised"), "finished": N_("finished")}
"""How a learner's call ended, as a message says it (the data values stay these English words)."""


def ended_as_said(ended: str) -> str:
    """``ended`` (hung, killed, raised, finished) as a message says it, in the learner's language."""
    return _(ENDINGS[ended]) if ended in ENDINGS else ended
