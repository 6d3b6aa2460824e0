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

Part 2 resumes a different agent: ``resume_report(path, task, tools)`` continues the report agent
(:mod:`resumable_core.lab.report_agent`: two documents, a saved report, a reviewer's notification)
from its JSON checkpoint. Its checks build each state by hand from the world's own operations, run
the learner's function in a forked child, and judge by the world alone: the reads, the saved
reports, the notifications, and the checkpoint file read back.
"""

from __future__ import annotations

import copy
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
from ...lab import report_agent as ra
from ...lab.i18n import N_
from ...loop import run_agent
from ...run_folder import RunFolder, count_effects
from ...scenarios import EMAIL_TASK, NOTES_TASK
from ...strategies import STATUS_UNKNOWN, Reconcile, answer_pending
from ...tools import DEFAULT_TOOLS, Toolbox
from ..i18n import _
from ..i18n import say as say  # test cells print checks.say("...")
from .support import (
    CARRY_OVER_LESSON,
    CheckFailed,
    call_learner,
    die,
    ended_as_said,
    error_text,
    handed,
    is_remote,
    require,
    scratch,
)

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
    require(
        loop is None,
        _("resume calls {loop}, the library's loop; write the loop yourself (that is the exercise)").format(loop=loop),
    )


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
        result = call_learner(fn, *args, **kwargs)
    except anthropic.BadRequestError as e:
        body = e.body if isinstance(e.body, dict) else {}
        record = {"error": _("the API refused it with a 400: ") + ((body.get("error") or {}).get("message") or str(e))}
    except Exception as e:  # noqa: BLE001 - the learner's error becomes the check's message
        record = {"error": error_text(e), "refused": isinstance(e, CheckpointError | ValueError)}
    else:
        if isinstance(result, Checkpoint):
            record = {"checkpoint": result.model_dump(mode="json")}
        else:
            record = {
                "error": _("resume must return the final Checkpoint, it returned {name}").format(
                    name=type(result).__name__
                )
            }
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
            return Outcome(
                "hung",
                error=_("resume was still running after {resume_timeout:g} s; does its loop end?").format(
                    resume_timeout=RESUME_TIMEOUT
                ),
            )
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
                return _(
                    "the conversation holds an assistant message the model never sent: record each "
                    "reply exactly as messages.create returned it"
                )
            if at < seen:
                return _("the model's replies are out of the order it gave them in")
            seen = at
        return None

    def counter_problem(self, cp: Checkpoint) -> str | None:
        """How ``cp``'s counters disagree with the model calls logged across every process, or None."""
        calls = self.calls()
        if cp.turns != len(calls):
            return _(
                "turns is {turns}, but the model was called {n_calls} times across the crash and "
                "the resume: carry turns on from the checkpoint, and charge each turn (turns += "
                "1, save) before its call"
            ).format(turns=cp.turns, n_calls=len(calls))
        tokens = {c["key"]: c["tokens"] for c in calls}
        kept = sum(tokens.get(reply_key(m["content"]), 0) for m in cp.messages if m["role"] == "assistant")
        if cp.tokens_used != kept:
            return _(
                "tokens_used is {tokens_used}, but the replies in the conversation cost {kept} "
                "tokens: carry tokens_used on from the checkpoint and add each reply's tokens as "
                "you record it"
            ).format(tokens_used=cp.tokens_used, kept=kept)
        return None

    def disk_problem(self, cp: Checkpoint) -> str | None:
        """How the checkpoint on disk differs from what ``resume`` returned, or None."""
        on_disk = load_checkpoint(self.path)
        if on_disk is None or on_disk.model_dump() != cp.model_dump():
            pending = on_disk.pending_tool_use if on_disk is not None else None
            left = _(" (the file still has {name} pending)").format(name=pending.name) if pending is not None else ""
            return _(
                "what resume returned is not what it saved{left}: save after every change (the "
                "reconciled state, save point A after each reply, save point B after each tool "
                "result)"
            ).format(left=left)
        return None


def require_sound_end(trial: Trial, outcome: Outcome, where: str, *, emails: int = 1) -> Checkpoint:
    """The resumed run finished: no error, ``emails`` emails, on disk as returned, counters that add up."""
    if outcome.checkpoint is None:
        raise CheckFailed(_("{where}: {error}").format(where=where, error=outcome.error or _("resume did not return")))
    cp = outcome.checkpoint
    require(
        trial.emails() == emails,
        _("{where}: the team got {emails} emails; {emails2} is right").format(
            where=where, emails=trial.emails(), emails2=emails
        ),
    )
    require(
        cp.is_finished(),
        _("{where}: resume returned an unfinished run; keep calling the model until it is done").format(where=where),
    )
    problem = trial.replies_problem(cp) or trial.disk_problem(cp) or trial.counter_problem(cp)
    require(problem is None, _("{where}: {problem}").format(where=where, problem=problem))
    return cp


def check_crash_point(fn: Resume, point: str, tool: str, reconcile: Reconcile) -> None:
    """The email run killed at ``point`` on the ``tool`` turn, resumed by ``fn`` with ``reconcile``: a sound end."""
    require_own_loop(fn)
    trial = Trial.crashed(point, tool)
    where = _("killed {point} on the {tool} turn").format(point=point, tool=tool)
    if not trial.path.exists():
        where += _(" (before the first save: no checkpoint yet, so start the task fresh)")
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
    """Killed after the model's reply, before save point A, in the library's loop and then in yours:
    the call still counts, one email, the run finishes."""
    check_crash_point(fn, "after_response", "send_email", _answer_send_email)
    trial = Trial.crashed("after_save_b", "read_file")
    first = trial.resume(fn, _answer_send_email, die_after_call=1)
    require(
        first.ended == "killed",
        _("resume was to be killed after its first reply, but it {ended}").format(ended=ended_as_said(first.ended)),
    )
    where = _(
        "killed in your loop after a reply came back, before it was saved, then resumed again "
        "(reread {carry_over_lesson})"
    ).format(carry_over_lesson=_(CARRY_OVER_LESSON))
    require_sound_end(trial, trial.resume(fn, _answer_send_email), where)


# -- the visible checks of the old loop's lessons' warnings ----------------------------------------

FROM_THE_TOP = N_("reread lesson 1, section 6, 'The resume branch at the top of `run_agent`'")
ANOTHER_TASK = N_("reread lesson 1, section 7, 'Another task's checkpoint is refused'")


def check_reconciled_state_saved(fn: Resume) -> None:
    """Killed after send_email ran; resumed with no turn left: the reconciled state is on disk, no model call."""
    require_own_loop(fn)
    trial = Trial.crashed("after_tool", "send_email")
    turns = len(trial.calls())
    outcome = trial.resume(fn, _answer_send_email, max_turns=turns)
    if outcome.checkpoint is None:
        raise CheckFailed(_("resume with no turn left: {error}").format(error=outcome.error))
    require(
        len(trial.calls()) == turns,
        _("max_turns={turns} is already reached: resume must not call the model").format(turns=turns),
    )
    on_disk = load_checkpoint(trial.path)
    require(
        on_disk is not None and on_disk.pending_tool_use is None,
        _(
            "after reconcile the file still has send_email pending: save the reconciled "
            "state before anything else, so a second crash does not settle the same call "
            "again ({from_the_top})"
        ).format(from_the_top=_(FROM_THE_TOP)),
    )


def check_another_task_refused(fn: Resume) -> None:
    """A checkpoint of another task is refused with an exception, untouched, before any model call."""
    require_own_loop(fn)
    trial = Trial.new()
    trial.folder.run(NOTES_TASK)
    before = trial.path.read_bytes()
    outcome = trial.resume(fn, _answer_send_email, task=EMAIL_TASK)
    what = _("the checkpoint on disk is the notes task's, and resume was asked for the email task")
    ended = _("returned a Checkpoint") if outcome.ended == "returned" else outcome.ended
    require(
        outcome.ended == "raised",
        _("{what}: resume must refuse it, but it {ended} ({another_task})").format(
            what=what, ended=ended, another_task=_(ANOTHER_TASK)
        ),
    )
    require(
        outcome.refused,
        _("{what}: raise rc.CheckpointTaskMismatchError, not {error} ({another_task})").format(
            what=what, error=outcome.error, another_task=_(ANOTHER_TASK)
        ),
    )
    require(
        not trial.calls(),
        _("{what}: refuse it before any model call ({another_task})").format(what=what, another_task=_(ANOTHER_TASK)),
    )
    require(
        trial.path.read_bytes() == before,
        _("{what}: refuse it without changing the file ({another_task})").format(
            what=what, another_task=_(ANOTHER_TASK)
        ),
    )
    own = trial.resume(fn, _answer_send_email, task=NOTES_TASK)  # refusing everything is no task check
    require(
        own.ended == "returned" and own.checkpoint is not None and own.checkpoint.is_finished(),
        _(
            "the same checkpoint resumed for its own task (a finished notes run) must be "
            "returned, finished; resume {value} ({another_task})"
        ).format(
            value=_("raised {error}").format(error=own.error) if own.ended == "raised" else own.ended,
            another_task=_(ANOTHER_TASK),
        ),
    )


# == the report agent: a different loop to resume ===================================================
#
# The learner writes ``resume_report(path, task, tools) -> dict``. Its world (two documents, saved
# reports, the reviewer's notifications, the task's status) and tools are the lab's
# (:mod:`resumable_core.lab.report_agent`); its checkpoint is a JSON file whose fields the exercise
# fixes. These visible checks build each state by hand from the world's own operations; the hidden
# ones make every state by killing the instructor's reference agent for real.

ResumeReport = Callable[[str, dict[str, Any], Toolbox], Any]
"""``resume_report(path, task, tools) -> dict``: the learner's resume of the report agent."""

CHECKLIST = N_("reread lesson 4, section 1, 'The resume-order checklist'")
LOADING = N_("reread lesson 1, section 5, 'Loading: the version check, and the other refusals'")
CONTRACT_TEXT = N_("reread the exercise's contract for the report agent")


def report_checkpoint(task: dict[str, Any]) -> dict[str, Any]:
    """The report checkpoint of a task nothing was done for yet (the exercise's fields, version 2)."""
    return {
        "version": ra.CHECKPOINT_VERSION,
        "task_id": task["task_id"],
        "docs": list(task["docs"]),
        "read": {},
        "report": None,
        "notification": None,
    }


@dataclass
class ReportOutcome:
    """How one run of the learner's ``resume_report`` in a child ended."""

    ended: str
    """``returned``, ``raised``, ``killed`` (by the check, on purpose) or ``hung``."""
    error: str | None = None
    refused: bool = False
    """It raised a CheckpointError or a ValueError (how it refuses a file)."""


def _record_report(fn: ResumeReport, args: tuple[Any, ...], out: Path) -> None:
    """In the child: run the learner's ``resume_report`` and write how it ended to ``out`` as JSON."""
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - the child never returns to close it
    record: dict[str, Any]
    try:
        call_learner(fn, *args)
    except Exception as e:  # noqa: BLE001 - the learner's error becomes the check's message
        record = {"error": error_text(e), "refused": isinstance(e, CheckpointError | ValueError)}
    else:
        record = {}
    out.write_text(json.dumps(record), encoding="utf-8")


class DyingReportToolbox(Toolbox):
    """The report agent's tools, whose process dies of SIGKILL right after its ``n``-th call has run."""

    def __init__(self, box: Toolbox, n: int) -> None:
        super().__init__(box.world, box._tools.values(), ledger=box.ledger)
        self._dies_after, self._calls = n, 0

    def execute(self, name: str, input: dict[str, Any], *, idempotency_key: str | None = None) -> str:
        self._calls += 1
        try:
            return super().execute(name, input, idempotency_key=idempotency_key)
        finally:
            if self._calls == self._dies_after:  # the call ran (or failed) and its outcome is lost
                die()


@dataclass
class Allowance:
    """What one resume may do again, given the state it starts from: reads per document, report saves."""

    reads: dict[str, int]
    saves: int

    def widened(self, call: tuple[str, dict[str, Any]] | None) -> Allowance:
        """One more of the call a kill cut off before its outcome was recorded."""
        reads, saves = dict(self.reads), self.saves
        if call is not None and call[0] == "read_doc":
            reads[call[1].get("name", "")] = reads.get(call[1].get("name", ""), 0) + 1
        if call is not None and call[0] == "save_report":
            saves += 1
        return Allowance(reads, saves)


@dataclass
class ReportTrial:
    """The report agent's world in a fresh folder, its checkpoint's path, and the task resumed."""

    world: ra.ReportWorld
    path: Path
    task: dict[str, Any]

    @classmethod
    def new(cls) -> ReportTrial:
        """A fresh world (both documents, no report, no notification, the task active), no checkpoint."""
        root = scratch("report")
        return cls(ra.ReportWorld.create(root / "world"), root / "report.json", copy.deepcopy(ra.REPORT_TASK))

    @property
    def toolbox(self) -> Toolbox:
        """The report agent's tools on this world."""
        return ra.report_toolbox(self.world)

    # -- the checkpoint file ------------------------------------------------------------------

    def checkpoint(self) -> dict[str, Any] | None:
        """The checkpoint on disk, or None (none, or not JSON)."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def write(self, cp: dict[str, Any]) -> None:
        """Put ``cp`` on disk as the checkpoint."""
        self.path.write_text(json.dumps(cp, indent=1), encoding="utf-8")

    # -- states built by hand from the world's operations ---------------------------------------

    def read_into(self, cp: dict[str, Any], name: str) -> None:
        """Record in ``cp`` that ``name`` was read as it is now."""
        text = (self.world.docs_dir / name).read_text(encoding="utf-8")
        cp["read"][name] = {"sha256": ra.sha256_text(text), "summary": ra.summary_of(text)}

    def saved_into(self, cp: dict[str, Any]) -> None:
        """Save the report of ``cp``'s summaries in the world and record it in ``cp``."""
        path, digest = self.world.save_report(ra.report_text({n: r["summary"] for n, r in cp["read"].items()}))
        cp["report"] = {"path": path, "sha256": digest}

    def state(self, *, notified: str = "confirmed") -> dict[str, Any]:
        """Both documents read, the report saved, and the notification ``pending`` (not sent),
        ``sent`` (sent, its outcome lost) or ``confirmed``; written to disk and returned."""
        cp = report_checkpoint(self.task)
        for name in self.task["docs"]:
            self.read_into(cp, name)
        self.saved_into(cp)
        digest = cp["report"]["sha256"]
        note = {"key": f"{self.task['task_id']}-{digest[:12]}", "report_sha256": digest, "confirmed": False}
        if notified in ("sent", "confirmed"):
            self.world.notify(digest, note["key"])
        note["confirmed"] = notified == "confirmed"
        cp["notification"] = note
        self.write(cp)
        return cp

    # -- what the world says is right ----------------------------------------------------------

    def expected_sha256(self) -> str:
        """The hash of the report of the documents as they are now."""
        texts = {n: (self.world.docs_dir / n).read_text(encoding="utf-8") for n in self.task["docs"]}
        return ra.sha256_text(ra.report_text({n: ra.summary_of(t) for n, t in texts.items()}))

    def allowance(self) -> Allowance:
        """What a resume from the state on disk may redo: each document not recorded as it is now, the
        report unless a file with the right hash is recorded."""
        cp = self.checkpoint() or {}
        read = cp.get("read") or {}
        reads = {}
        for name in self.task["docs"]:
            now = ra.sha256_text((self.world.docs_dir / name).read_text(encoding="utf-8"))
            reads[name] = 0 if (read.get(name) or {}).get("sha256") == now else 1
        report = cp.get("report") or {}
        file = self.world.reports_dir / str(report.get("path", "")).removeprefix("reports/")
        on_disk = file.is_file() and ra.sha256_text(file.read_text(encoding="utf-8")) == report.get("sha256")
        saves = 0 if on_disk and report.get("sha256") == self.expected_sha256() else 1
        return Allowance(reads, saves)

    def counts(self) -> tuple[dict[str, int], int, int]:
        """Reads per document, reports saved, notifications sent so far."""
        reads = {n: self.world.reads(n) for n in self.task["docs"]}
        return reads, len(self.world.saved_reports()), len(self.world.notifications())

    # -- one run of the learner's function -------------------------------------------------------

    def resume(self, fn: ResumeReport, *, tools: Toolbox | None = None) -> ReportOutcome:
        """Run ``fn(path, task, tools)`` in a forked child, on this world's tools (or ``tools``)."""
        out = self.path.parent / "resume-outcome.json"
        out.unlink(missing_ok=True)
        args = (handed(self.path), copy.deepcopy(self.task), tools or self.toolbox)
        try:
            ended = run_in_child(lambda: _record_report(fn, args, out), timeout=RESUME_TIMEOUT)
        except CrashError:
            return ReportOutcome(
                "hung",
                error=_("resume_report was still running after {resume_timeout:g} s").format(
                    resume_timeout=RESUME_TIMEOUT
                ),
            )
        if ended == "killed":
            return ReportOutcome("killed")
        record = json.loads(out.read_text(encoding="utf-8"))
        if "error" in record:
            return ReportOutcome("raised", error=record["error"], refused=bool(record.get("refused")))
        return ReportOutcome("returned")


def require_report_end(
    trial: ReportTrial,
    outcome: ReportOutcome,
    where: str,
    *,
    before: tuple[dict[str, int], int, int],
    allowed: Allowance,
) -> None:
    """The resumed report run finished right: the report of the documents as they are now saved and recorded,
    the reviewer notified about it exactly once, no report notified twice, no more reads or saves than needed."""
    if outcome.ended != "returned":
        raise CheckFailed(
            _("{where}: resume_report {ended}: {error}").format(
                where=where, ended=ended_as_said(outcome.ended), error=outcome.error
            )
        )
    reads_before, saves_before = before[0], before[1]
    reads, saves = trial.counts()[:2]
    for name, n in reads.items():
        again = n - reads_before[name]
        if again > allowed.reads[name]:
            why = (
                _(
                    "it was read and recorded, and has not changed since: keep its record; redo only "
                    "what a change invalidates (doc_sha256 tells whether it changed)"
                )
                if allowed.reads[name] == 0
                else _("read it once")
            )
            times = _("once") if again == 1 else _("{again} times").format(again=again)
            raise CheckFailed(
                _("{where}: resume_report read {name} {times}; {why} ({checklist})").format(
                    where=where, name=name, times=times, why=why, checklist=_(CHECKLIST)
                )
            )
    if saves - saves_before > allowed.saves:
        why = (
            _("the recorded report is there with its hash and still right: keep it")
            if allowed.saves == 0
            else _("save it once")
        )
        raise CheckFailed(
            _("{where}: resume_report saved the report {value} times; {why}").format(
                where=where, value=saves - saves_before, why=why
            )
        )
    stale = [name for name, n in reads.items() if allowed.reads[name] and n == reads_before[name]]
    require(
        not stale,
        _(
            "{where}: {value} is not recorded as it is now (never read, or changed since: "
            "its doc_sha256 differs from the record), yet resume_report did not read it "
            "({checklist}: record vs reality)"
        ).format(where=where, value=stale[0] if stale else "", checklist=_(CHECKLIST)),
    )
    want = trial.expected_sha256()
    pings = trial.world.notifications()
    twice = sorted(
        {p["report_sha256"][:12] for p in pings if sum(q["report_sha256"] == p["report_sha256"] for q in pings) > 1}
    )
    require(
        not twice,
        _(
            "{where}: the reviewer was notified twice about report {value}...: a "
            "notification the checkpoint records as not confirmed is settled with "
            "notification_status(key), never simply sent again; and record the key before "
            "you send ({checklist}: uncertain effects first)"
        ).format(where=where, value=twice[0] if twice else "", checklist=_(CHECKLIST)),
    )
    require(
        any(p["report_sha256"] == want for p in pings),
        _(
            "{where}: the reviewer was never notified about the report of the documents as "
            "they are now ({want}...); a report rewritten after a change is notified again, "
            "with a new key"
        ).format(where=where, want=want[:12]),
    )
    files = [trial.world.reports_dir / p.removeprefix("reports/") for p in trial.world.saved_reports()]
    require(
        any(ra.sha256_text(f.read_text(encoding="utf-8")) == want for f in files if f.is_file()),
        _(
            "{where}: no saved report holds the report of the documents as they are now: "
            "check the recorded report with report_sha256(path) and save it again when it is "
            "missing or differs ({checklist}: record vs reality)"
        ).format(where=where, checklist=_(CHECKLIST)),
    )
    cp = trial.checkpoint()
    require(
        cp is not None,
        _("{where}: the checkpoint file is missing or not JSON after resume_report returned").format(where=where),
    )
    report, note = (_field(cp, name) for name in ("report", "notification"))
    require(
        report.get("sha256") == want and note.get("report_sha256") == want and note.get("confirmed") is True,
        _(
            "{where}: the checkpoint on disk does not record the finished run (report.sha256 "
            "{want}..., notification confirmed for it): save the checkpoint after every step"
        ).format(where=where, want=want[:12]),
    )


def _field(cp: dict[str, Any] | None, name: str) -> dict[str, Any]:
    """The checkpoint's object field ``name``, or an empty one when it is missing or not an object."""
    value = (cp or {}).get(name)
    return value if isinstance(value, dict) else {}


def require_did_nothing(
    trial: ReportTrial,
    outcome: ReportOutcome,
    where: str,
    *,
    before: tuple[dict[str, int], int, int],
    file_before: bytes | None,
) -> None:
    """A cancelled task: nothing read, saved or sent, the checkpoint untouched."""
    if outcome.ended != "returned":
        raise CheckFailed(
            _("{where}: resume_report {ended}: {error}; return the checkpoint as it is").format(
                where=where, ended=ended_as_said(outcome.ended), error=outcome.error
            )
        )
    reads, saves, pings = trial.counts()
    rule = _(
        "check task_status(task_id) before any side effect: a permission an old "
        "checkpoint holds is no permission now ({contract_text})"
    ).format(contract_text=_(CONTRACT_TEXT))
    require(
        pings == before[2],
        _("{where}: the task is cancelled, yet the reviewer was notified; {rule}").format(where=where, rule=rule),
    )
    require(
        saves == before[1],
        _("{where}: the task is cancelled, yet a report was saved; {rule}").format(where=where, rule=rule),
    )
    require(
        reads == before[0],
        _("{where}: the task is cancelled, yet a document was read; {rule}").format(where=where, rule=rule),
    )
    now = trial.path.read_bytes() if trial.path.exists() else None
    require(
        now == file_before,
        _("{where}: the task is cancelled, yet the checkpoint changed; leave it as it was").format(where=where),
    )


def resume_and_judge(fn: ResumeReport, trial: ReportTrial, where: str) -> None:
    """Resume ``trial``'s state with ``fn`` and require a sound end, with what that state allows."""
    before, allowed = trial.counts(), trial.allowance()
    require_report_end(trial, trial.resume(fn), where, before=before, allowed=allowed)


# -- the visible checks of the report agent --------------------------------------------------------


def require_report_refused(resume_report: ResumeReport, change: dict[str, Any], what: str, reread: str) -> None:
    """A pending run's checkpoint with ``change`` is refused with an exception, before any tool call, untouched."""
    trial = ReportTrial.new()
    trial.write({**trial.state(notified="pending"), **change})
    before, calls = trial.path.read_bytes(), len(trial.world.calls())
    outcome = trial.resume(resume_report)
    require(
        outcome.ended == "raised",
        _("{what}: resume_report must refuse it with an exception, but it {ended} ({reread})").format(
            what=what, ended=ended_as_said(outcome.ended), reread=_(reread)
        ),
    )
    require(
        outcome.refused,
        _("{what}: raise a CheckpointError (or a ValueError), not {error} ({reread})").format(
            what=what, error=outcome.error, reread=_(reread)
        ),
    )
    require(
        len(trial.world.calls()) == calls and trial.path.read_bytes() == before,
        _("{what}: refuse it before any tool call and without changing the file ({reread})").format(
            what=what, reread=_(reread)
        ),
    )


def check_report_fresh_start(resume_report: ResumeReport) -> None:
    """No checkpoint yet: each document read once, one report saved, the reviewer notified once, recorded;
    a checkpoint of another version or another task is refused."""
    trial = ReportTrial.new()
    resume_and_judge(resume_report, trial, _("no checkpoint yet (a fresh start)"))
    cp = trial.checkpoint() or {}
    require(
        cp.get("version") == ra.CHECKPOINT_VERSION,
        _("the checkpoint must say version {checkpoint_version}").format(checkpoint_version=ra.CHECKPOINT_VERSION),
    )
    require(
        cp.get("task_id") == trial.task["task_id"] and cp.get("docs") == trial.task["docs"],
        _("the checkpoint must record the task's task_id and docs (its identity and scope)"),
    )
    read = cp.get("read") or {}
    require(
        set(read) == set(trial.task["docs"]) and all(set(r) == {"sha256", "summary"} for r in read.values()),
        _("the checkpoint's read must hold, for each document, exactly its sha256 and summary"),
    )
    require_report_refused(
        resume_report, {"version": ra.CHECKPOINT_VERSION + 1}, _("a checkpoint of a later version"), LOADING
    )
    require_report_refused(resume_report, {"task_id": "report-16"}, _("a checkpoint of another task"), ANOTHER_TASK)


def check_report_pending_notification(resume_report: ResumeReport) -> None:
    """A notification recorded as not confirmed: sent already (settled, not re-sent), or not (sent once)."""
    sent = ReportTrial.new()
    sent.state(notified="sent")
    resume_and_judge(
        resume_report, sent, _("the notification went out, and the crash lost its outcome (confirmed: false)")
    )
    unsent = ReportTrial.new()
    unsent.state(notified="pending")
    resume_and_judge(
        resume_report, unsent, _("the notification was recorded as about to go out, and never went (confirmed: false)")
    )


def check_report_changed_doc(resume_report: ResumeReport) -> None:
    """A finished run whose terms.md changed since, or whose saved report was edited: what the change
    invalidates is redone (a document re-read only if it changed), a new report, notified once."""
    trial = ReportTrial.new()
    trial.state(notified="confirmed")
    trial.world.edit_doc(
        "terms.md", "# Terms of service\nRefunds within 30 days.\nAccounts idle for a year are closed.\n"
    )
    resume_and_judge(resume_report, trial, _("terms.md changed after the run finished"))
    altered = ReportTrial.new()
    cp = altered.state(notified="confirmed")
    file = altered.world.reports_dir / cp["report"]["path"].removeprefix("reports/")
    file.write_text("# Changes report\n\n(edited by hand)\n", encoding="utf-8")
    resume_and_judge(resume_report, altered, _("the saved report's file was edited after the run finished"))


def check_report_cancelled(resume_report: ResumeReport) -> None:
    """The user cancelled the task while a notification was pending: nothing is read, saved or sent."""
    trial = ReportTrial.new()
    trial.state(notified="pending")
    trial.world.cancel(trial.task["task_id"])
    before, file_before = trial.counts(), trial.path.read_bytes()
    where = _("the task was cancelled while its notification was pending")
    require_did_nothing(trial, trial.resume(resume_report), where, before=before, file_before=file_before)
    active = ReportTrial.new()  # doing nothing is no answer: the same state of an active task resumes
    active.state(notified="pending")
    resume_and_judge(resume_report, active, _("the same state, the task active"))
