"""The hidden checks of the ``resume`` assignment: every other crash point, a finished run, refusals,
the turn cap, and a second kill inside the learner's own loop.

The notebook's hidden test blocks call these as ``hidden.check_*(resume)``. They hand ``resume`` the
answer reconcile (:mod:`resumable_core.course.hidden.strategies`), so only the learner's loop is graded.
"""

from __future__ import annotations

import json

from ...crash import points_passed
from ...scenarios import EMAIL_TASK, NOTES_TASK
from ..checks.resume import (
    DyingToolbox,
    Resume,
    Trial,
    check_crash_point,
    require_own_loop,
    require_sound_end,
)
from ..checks.support import CheckFailed, require
from .strategies import reconcile_by_effect

VISIBLE_CRASHES = {("after_tool", "send_email"), ("after_response", "send_email")}
"""The crashes the visible checks already grade."""

EMAIL_TOOLS = ("read_file", "send_email")
"""The tools the email run calls, one crash turn each."""


def check_every_crash_point(fn: Resume) -> None:
    """Every other crash point on the email run's read_file and send_email turns: one email, a sound end."""
    for tool in EMAIL_TOOLS:
        for point in points_passed(calls=1):  # the email run asks for one tool per turn
            if (point, tool) not in VISIBLE_CRASHES:
                check_crash_point(fn, point, tool, reconcile_by_effect)


def check_finished_run(fn: Resume) -> None:
    """A finished run's checkpoint is returned as it is: no model call, no tool run, nothing changed."""
    require_own_loop(fn)
    trial = Trial.new()
    trial.folder.run(EMAIL_TASK)  # an uncrashed run, finished on disk
    before = trial.path.read_bytes()
    calls_before = len(trial.folder.world.calls())
    outcome = trial.resume(fn, reconcile_by_effect)
    if outcome.checkpoint is None:
        raise CheckFailed(f"resuming a finished run: {outcome.error}")
    require(not trial.calls(), f"the run was finished, yet resume called the model {len(trial.calls())} times")
    require(len(trial.folder.world.calls()) == calls_before, "the run was finished, yet resume ran a tool")
    require(
        outcome.checkpoint.model_dump() == json.loads(before),
        "a finished run's checkpoint must be returned as it was loaded",
    )


def _require_refused(trial: Trial, fn: Resume, task: str, what: str) -> None:
    before = trial.path.read_bytes()
    outcome = trial.resume(fn, reconcile_by_effect, task=task)
    ended = "returned a Checkpoint" if outcome.ended == "returned" else outcome.ended
    require(outcome.ended == "raised", f"{what}: resume must refuse it with an exception, but it {ended}")
    require(outcome.refused, f"{what}: raise a CheckpointError or a ValueError, not {outcome.error}")
    require(not trial.calls(), f"{what}: refuse it before any model call")
    require(trial.path.read_bytes() == before, f"{what}: refuse it without changing the file")


def check_refusals(fn: Resume) -> None:
    """Another task's checkpoint, and a checkpoint of another version, are refused untouched, with no model call."""
    require_own_loop(fn)
    other_task = Trial.new()
    other_task.folder.run(NOTES_TASK)
    _require_refused(other_task, fn, EMAIL_TASK, "a checkpoint of another task")
    other_version = Trial.new()
    other_version.folder.run(EMAIL_TASK)
    data = json.loads(other_version.path.read_text(encoding="utf-8"))
    other_version.path.write_text(json.dumps({**data, "version": data["version"] + 1}), encoding="utf-8")
    _require_refused(other_version, fn, EMAIL_TASK, "a checkpoint of another version")
    good = Trial.crashed("after_save_b", "read_file")  # refusing every file is no answer: a good one resumes
    where = "a good checkpoint, after the refusals"
    require_sound_end(good, good.resume(fn, reconcile_by_effect), where)


def check_turn_cap(fn: Resume) -> None:
    """At the cap: reconcile and persist, no model call; one turn under it: one turn, saved through point B."""
    require_own_loop(fn)
    trial = Trial.crashed("after_tool", "read_file")  # read_file pending, one turn used
    turns = len(trial.calls())
    at_cap = trial.resume(fn, reconcile_by_effect, max_turns=turns)
    if at_cap.checkpoint is None:
        raise CheckFailed(f"resume with max_turns={turns} (already reached): {at_cap.error}")
    require(len(trial.calls()) == turns, f"max_turns={turns} is already reached: resume must not call the model")
    require(at_cap.checkpoint.pending_tool_use is None, "reconcile the pending call even when no turn is left")
    problem = trial.disk_problem(at_cap.checkpoint)
    require(problem is None, f"max_turns={turns} already reached: {problem}")
    one_more = trial.resume(fn, reconcile_by_effect, max_turns=turns + 1)
    if one_more.checkpoint is None:
        raise CheckFailed(f"resume with max_turns={turns + 1}: {one_more.error}")
    require(
        len(trial.calls()) == turns + 1, f"max_turns={turns + 1} leaves one turn: {len(trial.calls()) - turns} calls"
    )
    problem = trial.disk_problem(one_more.checkpoint) or trial.counter_problem(one_more.checkpoint)
    require(problem is None, f"max_turns={turns + 1}, stopped after the tool ran: {problem}")


def check_second_crash(fn: Resume) -> None:
    """Killed again inside your own loop (after send_email ran; after a reply came back), resumed again: sound ends."""
    require_own_loop(fn)
    after_tool = Trial.crashed("after_save_a", "read_file")
    first = after_tool.resume(fn, reconcile_by_effect, tools=DyingToolbox(after_tool.folder.toolbox, "send_email"))
    require(
        first.ended == "killed", f"resume was to be killed once send_email ran, but it {first.ended}: {first.error}"
    )
    where = "killed in your loop after send_email ran, then resumed again"
    require_sound_end(after_tool, after_tool.resume(fn, reconcile_by_effect), where)
    after_reply = Trial.crashed("after_save_b", "read_file")
    first = after_reply.resume(fn, reconcile_by_effect, die_after_call=1)
    require(first.ended == "killed", f"resume was to be killed after its first reply, but it {first.ended}")
    where = "killed in your loop after a reply came back, before it was saved, then resumed again"
    require_sound_end(after_reply, after_reply.resume(fn, reconcile_by_effect), where)
