"""The ``resume`` exercise grades the learner's own loop under real kills: the solution scores full,
each plausible wrong answer scores lower, and a ``resume`` that hands the work to ``run_agent`` is
refused. Grading here goes through the check functions the notebook's test cells call (read from
the source notebook, hidden blocks included), with the notebook's points; the real nbgrader run of
the exercise is part of the sample class in ``tests/test_checks.py``.
"""

from __future__ import annotations

import functools

import exercise_cells  # tests/ is on sys.path under pytest (rootdir-relative import)
import pytest
from exercise_cells import Exercise, failure, require_fails

from resumable_core.course import release as course
from resumable_core.course.checks import resume as checks
from resumable_core.course.checks.support import CheckFailed

EXERCISE = Exercise.of("resume")
NOTEBOOK = EXERCISE.notebook
SOLUTION = EXERCISE.solution("resume")
REPORT_SOLUTION = EXERCISE.solution("resume_report")
ANSWERS = {"resume", "resume_report"}
"""The names the learner's answer cells define, each the one argument of the checks its cells call."""


edited = functools.partial(exercise_cells.edited, SOLUTION)


PERSIST_RECONCILED = "        cp = reconcile(cp, tools)\n        rc.save_checkpoint(cp, path)  # the reconciled state, before the next model call\n"
CHARGE = "        rc.save_checkpoint(cp, path)  # charge the turn before paying for it\n"
SAVE_A = "        rc.save_checkpoint(cp, path)  # save point A\n"
SAVE_B = "        rc.save_checkpoint(cp, path)  # save point B\n"
TASK_CHECK = "    if cp.task != task:\n        raise rc.CheckpointTaskMismatchError(path, task, cp.task)\n"
FINISHED = "    if cp.is_finished():\n        return cp\n"
LOAD = "    cp = rc.load_checkpoint(path) or rc.new_checkpoint(task)  # the version is checked on load\n"

WRONG: dict[str, tuple[str, str]] = {
    # (the learner's resume, the test cell it must fail)
    "no_persist_after_reconcile": (
        edited((PERSIST_RECONCILED, "        cp = reconcile(cp, tools)\n")),
        "test_reconciled_state_saved",
    ),
    "counters_reset": (
        edited((LOAD, LOAD + "    cp.turns, cp.tokens_used = 0, 0  # this process starts counting afresh\n")),
        "test_crash_after_tool",
    ),
    "no_task_check": (edited((TASK_CHECK, "")), "test_another_task_refused"),
    "calls_the_model_on_a_finished_run": (edited((FINISHED, "")), "test_finished_run"),
    "forgets_save_point_b": (edited((SAVE_B, "")), "test_turn_cap"),
    "forgets_save_point_a": (edited((SAVE_A, "")), "test_second_crash"),
    "skips_reconcile": (
        edited((PERSIST_RECONCILED, "        rc.save_checkpoint(cp, path)\n")),
        "test_crash_after_tool",
    ),
    "no_charge_before_the_call": (edited((CHARGE, "")), "test_second_crash"),
    "counts_tokens_of_this_process_only": (
        edited((LOAD, LOAD + "    cp.tokens_used = 0  # tokens of this process\n")),
        "test_crash_after_response",
    ),
    "delegates_to_run_agent": (
        "def resume(path, task, tools, client, *, reconcile, max_turns=rc.MAX_TURNS):\n"
        "    return rc.run_agent(task, checkpoint_path=path, toolbox=tools, client=client,\n"
        "                        reconcile=reconcile, max_turns=max_turns).checkpoint\n",
        "test_crash_after_tool",
    ),
}


learner = EXERCISE.learner
graded_cells = EXERCISE.graded_cells


def test_every_check_call_takes_the_learners_answer():
    """Every test cell calls at least one check, each on one of the notebook's answers alone."""
    cells = graded_cells()
    assert set(cells) == {c["grade_id"] for c in course.grade_cells(NOTEBOOK)}
    for gid, (_, calls) in cells.items():
        assert calls, gid
        assert all(len(call.args) == 1 and call.args[0][1] in ANSWERS and not call.kwargs for call in calls), gid


def test_the_lessons_warnings_fail_a_visible_cell():
    """No save after reconcile, and a task mismatch not refused, each fail a visible (not hidden) test cell."""
    hidden = {c["metadata"]["nbgrader"]["grade_id"] for c in NOTEBOOK["cells"] if "BEGIN HIDDEN TESTS" in c["source"]}
    for name in ("no_persist_after_reconcile", "no_task_check"):
        assert WRONG[name][1] not in hidden, name


def test_delegation_to_the_library_loop_is_found():
    """A resume that calls run_agent (directly, under another name, or through a helper) is refused; the solution is not."""
    assert checks.delegated_to(learner(SOLUTION)["resume"]) is None
    assert checks.delegated_to(learner(WRONG["delegates_to_run_agent"][0])["resume"]) == "run_agent"
    aliased = learner("from resumable_core.loop import run_agent as go\ndef resume(*a, **k):\n    return go(*a, **k)\n")
    assert checks.delegated_to(aliased["resume"]) == "run_agent"
    helper = learner(
        "def loop(task):\n    return rc.RunFolder.create(task)\ndef resume(*a, **k):\n    return loop(a[1])\n"
    )
    assert checks.delegated_to(helper["resume"]) == "RunFolder"
    with pytest.raises(CheckFailed, match="write the loop yourself"):
        checks.require_own_loop(aliased["resume"])


@pytest.mark.slow
def test_the_solution_scores_full_under_real_kills():
    """The notebook's own solution passes every test cell, visible and hidden, under real SIGKILLs."""
    ns = learner(SOLUTION + "\n" + REPORT_SOLUTION)
    failed = {gid: why for gid, (_, calls) in graded_cells().items() if (why := failure(calls, ns))}
    assert failed == {}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(WRONG))
def test_a_wrong_resume_scores_lower(name):
    """Each plausible wrong answer fails the test cell its bug breaks, with a message about that bug."""
    source, cell = WRONG[name]
    require_fails(name, cell, graded_cells(), learner(source))


@pytest.mark.slow  # three real runs killed and resumed: about 10 s
def test_a_resume_that_does_not_charge_the_turn_fails_a_visible_check_naming_the_lesson():
    """Killed in the learner's own loop after a reply came back: a turn not charged first fails, naming lesson 1, section 8."""
    with pytest.raises(CheckFailed, match="lesson 1, section 8"):
        checks.check_crash_after_response(learner(WRONG["no_charge_before_the_call"][0])["resume"])
