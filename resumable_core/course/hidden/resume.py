"""The hidden checks of the ``resume`` assignment: every other crash point, a finished run, refusals,
the turn cap, and a second kill inside the learner's own loop.

The notebook's hidden test blocks call these as ``hidden.check_*(resume)``. They hand ``resume`` the
answer reconcile (:mod:`resumable_core.course.hidden.strategies`), so only the learner's loop is graded.

For Part 2 this module holds the instructor's reference report agent (:func:`reference_report`,
never shipped), killed for real after each of its tool calls and after each of its saves to make
every state ``resume_report`` must continue from, and :data:`CONTRACT`, which maps each rule of
both parts' contracts to the checks that test it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

from ...checkpoint import write_atomic
from ...crash import kill_self, points_passed, run_in_child
from ...errors import CheckpointTaskMismatchError, CheckpointVersionError, ToolError
from ...lab import report_agent as ra
from ...lab.i18n import N_
from ...scenarios import EMAIL_TASK, NOTES_TASK
from ..checks.resume import (
    ANOTHER_TASK,
    LOADING,
    Allowance,
    DyingReportToolbox,
    DyingToolbox,
    ReportTrial,
    Resume,
    ResumeReport,
    Trial,
    check_crash_point,
    report_checkpoint,
    require_did_nothing,
    require_own_loop,
    require_report_end,
    require_sound_end,
    resume_and_judge,
)
from ..checks.support import CheckFailed, ended_as_said, require
from .i18n import _, fails_with
from .strategies import reconcile_by_effect

VISIBLE_CRASHES = {("after_tool", "send_email"), ("after_response", "send_email")}
"""The crashes the visible checks already grade."""

EMAIL_TOOLS = ("read_file", "send_email")
"""The tools the email run calls, one crash turn each."""


@fails_with(
    N_(
        "A kill at any point of the run, then resume, must end with the run finished, one email sent, no 400. Reread resume's contract (Exercise 4)."
    )
)
def check_every_crash_point(fn: Resume) -> None:
    """Every other crash point on the email run's read_file and send_email turns: one email, a sound end."""
    for tool in EMAIL_TOOLS:
        for point in points_passed(calls=1):  # the email run asks for one tool per turn
            if (point, tool) not in VISIBLE_CRASHES:
                check_crash_point(fn, point, tool, reconcile_by_effect)


@fails_with(
    N_(
        "A finished run is returned as it was loaded: no model call, no tool run. Reread resume's contract (Exercise 4)."
    )
)
def check_finished_run(fn: Resume) -> None:
    """A finished run's checkpoint is returned as it is: no model call, no tool run, nothing changed."""
    require_own_loop(fn)
    trial = Trial.new()
    trial.folder.run(EMAIL_TASK)  # an uncrashed run, finished on disk
    before = trial.path.read_bytes()
    calls_before = len(trial.folder.world.calls())
    outcome = trial.resume(fn, reconcile_by_effect)
    if outcome.checkpoint is None:
        raise CheckFailed(_("resuming a finished run: {error}").format(error=outcome.error))
    require(
        not trial.calls(),
        _("the run was finished, yet resume called the model {n_calls} times").format(n_calls=len(trial.calls())),
    )
    require(len(trial.folder.world.calls()) == calls_before, _("the run was finished, yet resume ran a tool"))
    require(
        outcome.checkpoint.model_dump() == json.loads(before),
        _("a finished run's checkpoint must be returned as it was loaded"),
    )


def _require_refused(trial: Trial, fn: Resume, task: str, what: str) -> None:
    before = trial.path.read_bytes()
    outcome = trial.resume(fn, reconcile_by_effect, task=task)
    ended = _("returned a Checkpoint") if outcome.ended == "returned" else outcome.ended
    require(
        outcome.ended == "raised",
        _("{what}: resume must refuse it with an exception, but it {ended}").format(what=what, ended=ended),
    )
    require(
        outcome.refused,
        _("{what}: raise a CheckpointError or a ValueError, not {error}").format(what=what, error=outcome.error),
    )
    require(not trial.calls(), _("{what}: refuse it before any model call").format(what=what))
    require(trial.path.read_bytes() == before, _("{what}: refuse it without changing the file").format(what=what))


@fails_with(
    N_(
        "A checkpoint of another version or another task is refused before any model call, the file unchanged. Reread resume's contract (Exercise 4)."
    )
)
def check_refusals(fn: Resume) -> None:
    """Another task's checkpoint, and a checkpoint of another version, are refused untouched, with no model call."""
    require_own_loop(fn)
    other_task = Trial.new()
    other_task.folder.run(NOTES_TASK)
    _require_refused(other_task, fn, EMAIL_TASK, _("a checkpoint of another task"))
    other_version = Trial.new()
    other_version.folder.run(EMAIL_TASK)
    data = json.loads(other_version.path.read_text(encoding="utf-8"))
    other_version.path.write_text(json.dumps({**data, "version": data["version"] + 1}), encoding="utf-8")
    _require_refused(other_version, fn, EMAIL_TASK, _("a checkpoint of another version"))
    good = Trial.crashed("after_save_b", "read_file")  # refusing every file is no answer: a good one resumes
    where = _("a good checkpoint, after the refusals")
    require_sound_end(good, good.resume(fn, reconcile_by_effect), where)


@fails_with(
    N_(
        "A dangling call is reconciled and saved even with no turn left, and no model call is made at max_turns. Reread resume's contract (Exercise 4)."
    )
)
def check_turn_cap(fn: Resume) -> None:
    """At the cap: reconcile and persist, no model call; one turn under it: one turn, saved through point B."""
    require_own_loop(fn)
    trial = Trial.crashed("after_tool", "read_file")  # read_file pending, one turn used
    turns = len(trial.calls())
    at_cap = trial.resume(fn, reconcile_by_effect, max_turns=turns)
    if at_cap.checkpoint is None:
        raise CheckFailed(
            _("resume with max_turns={turns} (already reached): {error}").format(turns=turns, error=at_cap.error)
        )
    require(
        len(trial.calls()) == turns,
        _("max_turns={turns} is already reached: resume must not call the model").format(turns=turns),
    )
    require(at_cap.checkpoint.pending_tool_use is None, _("reconcile the pending call even when no turn is left"))
    problem = trial.disk_problem(at_cap.checkpoint)
    require(problem is None, _("max_turns={turns} already reached: {problem}").format(turns=turns, problem=problem))
    one_more = trial.resume(fn, reconcile_by_effect, max_turns=turns + 1)
    if one_more.checkpoint is None:
        raise CheckFailed(_("resume with max_turns={value}: {error}").format(value=turns + 1, error=one_more.error))
    require(
        len(trial.calls()) == turns + 1,
        _("max_turns={value} leaves one turn: {value2} calls").format(
            value=turns + 1, value2=len(trial.calls()) - turns
        ),
    )
    problem = trial.disk_problem(one_more.checkpoint) or trial.counter_problem(one_more.checkpoint)
    require(
        problem is None,
        _("max_turns={value}, stopped after the tool ran: {problem}").format(value=turns + 1, problem=problem),
    )


@fails_with(
    N_(
        "A kill inside your own loop, then another resume, must still end with the run finished and one email sent. Reread resume's contract (Exercise 4)."
    )
)
def check_second_crash(fn: Resume) -> None:
    """Killed again inside your own loop (after send_email ran; after a reply came back), resumed again: sound ends."""
    require_own_loop(fn)
    after_tool = Trial.crashed("after_save_a", "read_file")
    first = after_tool.resume(fn, reconcile_by_effect, tools=DyingToolbox(after_tool.folder.toolbox, "send_email"))
    require(
        first.ended == "killed",
        _("resume was to be killed once send_email ran, but it {ended}: {error}").format(
            ended=ended_as_said(first.ended), error=first.error
        ),
    )
    where = _("killed in your loop after send_email ran, then resumed again")
    require_sound_end(after_tool, after_tool.resume(fn, reconcile_by_effect), where)
    after_reply = Trial.crashed("after_save_b", "read_file")
    first = after_reply.resume(fn, reconcile_by_effect, die_after_call=1)
    require(
        first.ended == "killed",
        _("resume was to be killed after its first reply, but it {ended}").format(ended=ended_as_said(first.ended)),
    )
    where = _("killed in your loop after a reply came back, before it was saved, then resumed again")
    require_sound_end(after_reply, after_reply.resume(fn, reconcile_by_effect), where)


# == the report agent ================================================================================

CONTRACT: dict[str, tuple[str, ...]] = {
    # Part 1: resume, the lessons' loop
    "With no checkpoint on disk (a crash before the first save), `resume` starts the task fresh.": (
        "check_every_crash_point",
    ),
    "A checkpoint of another version is refused with `rc.CheckpointVersionError`, before any model call and "
    "without changing the file.": ("check_refusals",),
    "A checkpoint of another task is refused with `rc.CheckpointTaskMismatchError`, before any model call and "
    "without changing the file; a checkpoint of this task is resumed.": (
        "check_another_task_refused",
        "check_refusals",
    ),
    "A finished run is returned as it was loaded: no model call, no tool run.": ("check_finished_run",),
    "A dangling call is settled with the `reconcile` you are given, and the reconciled state is on disk before "
    "anything else happens, even when no turn is left.": ("check_reconciled_state_saved", "check_turn_cap"),
    "`resume` calls the model until a reply asks for no tool, and makes no call once `turns` has reached "
    "`max_turns`.": ("check_crash_after_tool", "check_reconciled_state_saved", "check_turn_cap"),
    "What `resume` returns is what is on disk, and a kill at any point of the run, inside your own loop too, "
    "followed by another `resume`, still ends with the run finished, one email sent and nothing refused by the "
    "API.": (
        "check_crash_after_tool",
        "check_crash_after_response",
        "check_every_crash_point",
        "check_second_crash",
    ),
    "`turns` and `tokens_used` carry on from the checkpoint: `turns` counts every model call of the task across "
    "every crash (one whose reply was lost included), and `tokens_used` the tokens of the replies the "
    "conversation holds.": ("check_crash_after_response", "check_every_crash_point", "check_turn_cap"),
    "`resume` runs its own loop with the `client`, `tools` and `reconcile` it is given: one that calls "
    "`rc.run_agent` (or a `RunFolder`'s `run`) is refused by every test.": (
        "check_crash_after_tool",
        "check_another_task_refused",
        "check_finished_run",
    ),
    # Part 2: resume_report, the report agent
    "The checkpoint loads and its version is checked: a file of any version but 2 (version 1 included) is "
    "refused with `rc.CheckpointVersionError`, before any tool call.": ("check_report_refusals",),
    "The task matches: a checkpoint whose `task_id` or `docs` differ from the task's is refused with "
    "`rc.CheckpointTaskMismatchError`, before any tool call.": ("check_report_refusals",),
    "A cancelled task does nothing, even when an old checkpoint holds permission: `task_status` is checked "
    "before anything else is done, and then nothing is read, saved or sent, the file stays as it was, and the "
    "checkpoint is returned as it is.": (
        "check_report_cancelled",
        "check_report_cancelled_at_every_boundary",
    ),
    "The record matches reality: a recorded report whose file is missing, or whose `report_sha256` differs "
    "from the recorded hash, is saved again.": ("check_report_record_vs_reality",),
    "A pending notification (`confirmed: false`) is settled by `notification_status(key)`, not re-sent: it is "
    "sent, with its recorded key, only when the status is `not_sent`.": (
        "check_report_pending_notification",
        "check_report_every_kill",
    ),
    "Only the steps a change invalidates are redone: a document whose `doc_sha256` differs from its record is "
    "read again, the report rewritten and the reviewer notified about the new report with a new key; an "
    "unchanged document is not read again.": ("check_report_changed_doc", "check_report_every_kill_then_change"),
    "Each step is saved to the checkpoint as it finishes, and a notification's key is saved (with "
    "`confirmed: false`) before `notify_reviewer` is called, so a kill at any step boundary costs at most that "
    "one step.": ("check_report_fresh_start", "check_report_every_kill", "check_report_kills_in_your_run"),
}
"""Each rule of Part 1's and the report task's contracts (its bullet's exact text) -> the checks that test it."""


def _loaded(path: str, task: dict[str, Any]) -> dict[str, Any]:
    """The reference agent's checkpoint: a new one, or the file's, refused unless its version and task match."""
    try:
        cp = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        cp = report_checkpoint(task)
    if cp.get("version") != ra.CHECKPOINT_VERSION:
        raise CheckpointVersionError(path, cp.get("version"), ra.CHECKPOINT_VERSION)
    if cp["task_id"] != task["task_id"] or cp["docs"] != task["docs"]:
        raise CheckpointTaskMismatchError(path, str(task["task_id"]), str(cp["task_id"]))
    return cp


def reference_report(
    path: str, task: dict[str, Any], tools: Any, *, on_save: Callable[[int], None] | None = None
) -> dict[str, Any]:
    """The instructor's report agent, start or resume: the safe resume order, one checkpoint save per step.

    ``on_save(n)`` runs right after its ``n``-th save (a step boundary), to count them or to die there.
    """
    saves = [0]

    def save(cp: dict[str, Any]) -> None:
        write_atomic(path, json.dumps(cp, indent=1).encode("utf-8"))
        saves[0] += 1
        if on_save is not None:
            on_save(saves[0])

    cp = _loaded(path, task)
    if tools.execute("task_status", {"task_id": task["task_id"]}) != ra.ACTIVE:
        return cp
    for name in cp["docs"]:
        record = cp["read"].get(name)
        if record is not None and tools.execute("doc_sha256", {"name": name}) != record["sha256"]:
            record = None
        if record is None:
            text = tools.execute("read_doc", {"name": name})
            cp["read"][name] = {"sha256": ra.sha256_text(text), "summary": ra.summary_of(text)}
            save(cp)
    text = ra.report_text({n: r["summary"] for n, r in cp["read"].items()})
    report = cp["report"]
    if report is not None:
        try:
            on_disk = tools.execute("report_sha256", {"path": report["path"]})
        except ToolError:
            on_disk = None
        if on_disk != report["sha256"] or report["sha256"] != ra.sha256_text(text):
            report = None
    if report is None:
        cp["report"] = json.loads(tools.execute("save_report", {"text": text}))
        save(cp)
    digest = cp["report"]["sha256"]
    note = cp["notification"]
    if note is None or note["report_sha256"] != digest:
        note = {"key": f"{task['task_id']}-{digest[:12]}", "report_sha256": digest, "confirmed": False}
        cp["notification"] = note
        save(cp)  # the intent, with its key, before the effect
    if not note["confirmed"]:
        if tools.execute("notification_status", {"key": note["key"]}) != ra.SENT:
            tools.execute("notify_reviewer", {"report_sha256": digest, "key": note["key"]})
        note["confirmed"] = True
        save(cp)
    return cp


@cache
def reference_boundaries() -> tuple[int, int]:
    """How many tool calls and saves an uncrashed reference run makes from a fresh start."""
    trial = ReportTrial.new()
    saves: list[int] = []
    reference_report(str(trial.path), trial.task, trial.toolbox, on_save=saves.append)
    return len(trial.world.calls()), len(saves)


def _die_at(n: int | None) -> Callable[[int], None] | None:
    return None if n is None else (lambda saved: kill_self() if saved == n else None)


def killed_reference(*, after_call: int | None = None, after_save: int | None = None) -> ReportTrial:
    """A fresh world and the reference agent killed for real (SIGKILL) after its n-th tool call or save."""
    trial = ReportTrial.new()
    tools = trial.toolbox if after_call is None else DyingReportToolbox(trial.toolbox, after_call)
    ended = run_in_child(lambda: reference_report(str(trial.path), trial.task, tools, on_save=_die_at(after_save)))
    if ended != "killed":  # a bug in the check, not in the learner's code
        raise ValueError(
            f"the reference report agent was not killed (after_call={after_call}, after_save={after_save})"
        )
    return trial


def every_killed_reference() -> Iterator[tuple[str, ReportTrial]]:
    """The reference agent killed at each step boundary: after each tool call ran, after each save."""
    calls, saves = reference_boundaries()
    for n in range(1, calls + 1):
        yield _("the agent killed after its tool call {n} ran").format(n=n), killed_reference(after_call=n)
    for n in range(1, saves + 1):
        yield _("the agent killed after its save {n}").format(n=n), killed_reference(after_save=n)


CHANGED_TERMS = "# Terms of service\nRefunds within 30 days.\nAccounts idle for a year are closed.\n"


@fails_with(
    N_(
        "Each step is saved as it finishes, and a pending notification is settled by its status, not re-sent. Reread Part 2's contract (Exercise 4)."
    )
)
def check_report_every_kill(resume_report: ResumeReport) -> None:
    """The reference agent killed at every step boundary; the learner resumes: a sound end from each state."""
    for where, trial in every_killed_reference():
        resume_and_judge(resume_report, trial, where)


@fails_with(
    N_(
        "Only the steps a change invalidates are redone; an unchanged document is not read again. Reread Part 2's contract (Exercise 4)."
    )
)
def check_report_every_kill_then_change(resume_report: ResumeReport) -> None:
    """Killed at every step boundary, then terms.md changes: only what the change invalidates is redone."""
    for where, trial in every_killed_reference():
        trial.world.edit_doc("terms.md", CHANGED_TERMS)
        resume_and_judge(resume_report, trial, _("{where}, then terms.md changed").format(where=where))


@fails_with(
    N_(
        "A recorded report whose file is missing, or whose hash differs, is saved again. Reread Part 2's contract (Exercise 4)."
    )
)
def check_report_record_vs_reality(resume_report: ResumeReport) -> None:
    """A finished run whose saved report was deleted, or altered: saved again (no document re-read), not re-notified."""
    for damage in ("deleted", "altered"):
        trial = ReportTrial.new()
        cp = trial.state(notified="confirmed")
        file = trial.world.reports_dir / cp["report"]["path"].removeprefix("reports/")
        if damage == "deleted":
            file.unlink()
        else:
            file.write_text("# Changes report\n\n(edited by hand)\n", encoding="utf-8")
        resume_and_judge(
            resume_report,
            trial,
            _("the checkpoint records a saved report, but its file was {damage}").format(damage=damage),
        )


@fails_with(
    N_(
        "A cancelled task does nothing: task_status is checked first, then nothing is read, saved or sent. Reread Part 2's contract (Exercise 4)."
    )
)
def check_report_cancelled_at_every_boundary(resume_report: ResumeReport) -> None:
    """The reference agent killed at every step boundary, then the task cancelled: nothing is done."""
    for where, trial in every_killed_reference():
        trial.world.cancel(trial.task["task_id"])
        before = trial.counts()
        file_before = trial.path.read_bytes() if trial.path.exists() else None
        require_did_nothing(
            trial,
            trial.resume(resume_report),
            _("{where}, then the task was cancelled").format(where=where),
            before=before,
            file_before=file_before,
        )
    active = killed_reference(after_save=3)  # doing nothing is no answer: an active task resumes
    resume_and_judge(resume_report, active, _("an active task, after the cancelled ones"))


@fails_with(
    N_(
        "A checkpoint of another version, another task or other documents is refused before any tool call. Reread Part 2's contract (Exercise 4)."
    )
)
def check_report_refusals(resume_report: ResumeReport) -> None:
    """Another version's checkpoint, another task's and another scope's are refused untouched, before any tool call."""
    cases: dict[str, tuple[dict[str, Any], str]] = {
        _("a checkpoint of version 1 (which this exercise refuses)"): ({"version": 1}, LOADING),
        _("a checkpoint of version 3"): ({"version": 3}, LOADING),
        _("a checkpoint of another task (task_id report-16)"): ({"task_id": "report-16"}, ANOTHER_TASK),
        _("a checkpoint of this task with another scope (one document)"): ({"docs": ["pricing.md"]}, ANOTHER_TASK),
    }
    for what, (change, reread) in cases.items():
        trial = ReportTrial.new()
        cp = trial.state(notified="pending")
        data = {**cp, **change}
        if change.get("version") == 1:  # as an earlier kit wrote it: no summaries
            data["read"] = {n: {"sha256": r["sha256"]} for n, r in cp["read"].items()}
        trial.write(data)
        before, calls = trial.path.read_bytes(), len(trial.world.calls())
        outcome = trial.resume(resume_report)
        require(
            outcome.ended == "raised",
            _("{what}: resume_report must refuse it with an exception, but it {ended} ({reread})").format(
                what=what, ended=ended_as_said(outcome.ended), reread=reread
            ),
        )
        require(
            outcome.refused,
            _("{what}: raise a CheckpointError (or a ValueError), not {error} ({reread})").format(
                what=what, error=outcome.error, reread=reread
            ),
        )
        require(
            len(trial.world.calls()) == calls,
            _("{what}: refuse it before any tool call ({reread})").format(what=what, reread=reread),
        )
        require(
            trial.path.read_bytes() == before,
            _("{what}: refuse it without changing the file ({reread})").format(what=what, reread=reread),
        )
    good = killed_reference(after_save=2)  # refusing every file is no answer: a good one resumes
    resume_and_judge(resume_report, good, _("a good checkpoint, after the refusals"))


@fails_with(
    N_(
        "A kill right after any step of your own run costs at most that step, and the resumed run ends soundly. Reread Part 2's contract (Exercise 4)."
    )
)
def check_report_kills_in_your_run(resume_report: ResumeReport) -> None:
    """Your own run killed right after each of its tool calls ran, then resumed again: a sound end each time."""
    probe = ReportTrial.new()
    outcome = probe.resume(resume_report)  # in a child: count its calls from the world's log
    if outcome.ended != "returned":
        raise CheckFailed(
            _("a fresh start: resume_report {ended}: {error}").format(
                ended=ended_as_said(outcome.ended), error=outcome.error
            )
        )
    calls = len(probe.world.calls())
    for n in range(1, calls + 1):
        trial = ReportTrial.new()
        logged_before = len(trial.world.calls())
        first = trial.resume(resume_report, tools=DyingReportToolbox(trial.toolbox, n))
        require(
            first.ended == "killed",
            _("resume_report was to be killed after its tool call {n}, but it {ended}: {error}").format(
                n=n, ended=ended_as_said(first.ended), error=first.error
            ),
        )
        log = trial.world.calls()
        cut = log[-1] if len(log) > logged_before else None
        allowed = Allowance(reads=dict.fromkeys(trial.task["docs"], 1), saves=1).widened(cut)
        before = (dict.fromkeys(trial.task["docs"], 0), 0, 0)
        where = _("your run killed after its tool call {n} ({value}), then resumed again").format(
            n=n, value=cut[0] if cut else _("a call that failed")
        )
        require_report_end(trial, trial.resume(resume_report), where, before=before, allowed=allowed)
