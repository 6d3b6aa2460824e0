"""The ``reconcile`` exercise's Level 3 grades the learner's ``reconcile_turn`` under real kills between a
turn's tools: the solution scores full, each plausible wrong answer scores lower, no kit strategy passes,
and every rule of its contract is tested. Grading goes through the check functions the notebook's test
cells call (read from the source notebook, hidden blocks included), with the notebook's points.
"""

from __future__ import annotations

import functools
import json
import re

import exercise_cells  # tests/ is on sys.path under pytest (rootdir-relative import)
import pytest
from exercise_cells import Exercise, failure, require_fails, text_of

import resumable_core as rc
from resumable_core.course import release as course
from resumable_core.course.checks import reconcile as checks
from resumable_core.course.checks.support import CheckFailed
from resumable_core.course.hidden import reconcile as hidden
from resumable_core.course.hidden import strategies as answers

EXERCISE = Exercise.of("reconcile")
NOTEBOOK = EXERCISE.notebook
LEVEL_3: tuple[str, ...] = ("test_turn_real_kills", "test_turn_recorded_and_read_only", "test_turn_receipts")
LEVEL_3 += ("test_turn_status_unknown", "test_turn_api")


SOLUTION = EXERCISE.solution("reconcile_turn")
edited = functools.partial(exercise_cells.edited, SOLUTION)


KEEP = "    results = list(cp.recorded_results)  # these calls ran: their results are known\n"
READ_ONLY = "        if tools.is_read_only(call.name):\n"
RECEIPT = "            if receipt is not None and receipt.done:\n"
CAUGHT = (
    "            except rc.ToolError as e:  # an ordinary failure of the re-run: tell the model, as the loop does\n"
)

FRESH = "    cp = rc.Checkpoint(task=cp.task, messages=cp.messages)  # a new checkpoint of the conversation only\n"
FRESH_TURN = edited(("    cp.pending_tool_uses, cp.recorded_results = [], []\n", FRESH))
"""The solution, but it returns a new Checkpoint: run_id, turns and tokens_used start over."""
UNKNOWN_ANSWER = "            content, is_error = rc.STATUS_UNKNOWN, True\n"

WRONG: dict[str, tuple[str, str]] = {
    # (the learner's reconcile_turn, the test cell it must fail)
    "drops_the_recorded_results": (edited((KEEP, "    results = []\n")), "test_turn_real_kills"),
    "recorded_results_last": (
        edited(
            (KEEP, "    results = []\n"),
            (
                '    cp.messages.append({"role": "user", "content": results})\n',
                '    cp.messages.append({"role": "user", "content": results + list(cp.recorded_results)})\n',
            ),
        ),
        "test_turn_recorded_and_read_only",
    ),
    "read_only_by_name": (  # found by the red team: every tool's name matched its effect
        edited((READ_ONLY, '        if call.name.startswith(("read", "list", "grep", "count")):\n')),
        "test_turn_status_unknown",
    ),
    "runs_unknown_tools": (
        edited((READ_ONLY, "        if tools.effect(call.name) is not rc.Effect.SIDE_EFFECT:\n")),
        "test_turn_status_unknown",
    ),
    "ignores_the_ledger": (edited((RECEIPT, "            if False:\n")), "test_turn_receipts"),
    "finishes_side_effects_under_the_key": (
        edited(
            (
                "                content, is_error = rc.STATUS_UNKNOWN, True\n",
                "                content = tools.execute(call.name, call.input,"
                " idempotency_key=rc.idempotency_key(cp.run_id, call.id))\n"
                "                is_error = False\n",
            )
        ),
        "test_turn_status_unknown",
    ),
    "failed_receipt_reported_as_success": (
        edited(('receipt.result, receipt.status == "failed"', "receipt.result, False")),
        "test_turn_receipts",
    ),
    "a_failed_rerun_raises": (
        edited(
            (CAUGHT, "            except KeyError as e:  # (not the tool's failure)\n"),
        ),
        "test_turn_recorded_and_read_only",
    ),
    "one_message_per_call": (
        edited(
            (
                "        results.append(rc.tool_result(call.id, content, is_error=is_error))\n",
                "        cp.messages.append({'role': 'user', 'content': [rc.tool_result(call.id, content, is_error=is_error)]})\n",
            ),
            (
                '    cp.messages.append({"role": "user", "content": results})\n',
                "    if results:\n        cp.messages.append({'role': 'user', 'content': results})\n",
            ),
        ),
        "test_turn_api",
    ),
    "level_2_answer_on_each_call": (
        "def reconcile_turn(cp, tools):\n"
        "    while cp.pending_tool_uses:\n"
        "        p = cp.pending_tool_use\n"
        "        ok = tools.is_read_only(p.name)\n"
        "        rc.answer_pending(cp, tools.execute(p.name, p.input) if ok else rc.STATUS_UNKNOWN, is_error=not ok)\n"
        "    return cp\n",
        "test_turn_receipts",
    ),
    "does_nothing": ("def reconcile_turn(cp, tools):\n    return cp\n", "test_turn_real_kills"),
    "a_fresh_checkpoint": (FRESH_TURN, "test_turn_recorded_and_read_only"),  # found by the red team
    "unknown_tool_ignores_its_receipt": (  # found by the red team: no check gave an unknown tool a receipt
        edited(
            (READ_ONLY, f"        if call.name not in tools.names:\n{UNKNOWN_ANSWER}        el{READ_ONLY.lstrip()}"),
        ),
        "test_turn_status_unknown",
    ),
}


learner = EXERCISE.learner
graded_cells = EXERCISE.graded_cells


def score(ns: dict, cells: tuple[str, ...] = LEVEL_3) -> int:
    """The points the learner's names earn on ``cells``."""
    graded = graded_cells()
    return sum(graded[gid][0] for gid in cells if failure(graded[gid][1], ns) is None)


def test_level_3_carries_more_points_than_levels_1_and_2_together():
    """Level 3's cells outweigh every other graded cell of the notebook, manual ones included."""
    points = {c["grade_id"]: c["points"] for c in course.grade_cells(NOTEBOOK)}
    level_3 = sum(points[gid] for gid in LEVEL_3)
    assert level_3 > sum(points.values()) - level_3


def test_every_level_3_cell_calls_checks_on_reconcile_turn():
    """Each Level 3 test cell calls at least one check, each on the notebook's ``reconcile_turn`` alone."""
    cells = graded_cells()
    for gid in LEVEL_3:
        _, calls = cells[gid]
        assert calls and all(call.args == (("name", "reconcile_turn"),) for call in calls), gid


def test_the_contract_is_the_notebooks_and_every_rule_has_a_called_check():
    """Level 3's contract bullets are CONTRACT's rules for it, in order; each rule's checks exist and a test cell calls them."""
    intro = text_of(EXERCISE.cell("level3_intro"))
    bullets = [
        b.removeprefix("- ") for b in intro.split("**The contract.**\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    ]
    assert bullets == [rule for rule in hidden.CONTRACT if rule in bullets]  # Level 2's rules are the others
    called = {call.check.__name__ for _, calls in graded_cells().values() for call in calls}
    for rule, names in hidden.CONTRACT.items():
        assert names and set(names) <= called, rule


@pytest.mark.slow
def test_the_solution_scores_full_under_real_kills():
    """The notebook's own solution passes every test cell, visible and hidden, under real SIGKILLs."""
    ns = learner(SOLUTION)
    failed = {gid: why for gid, (_, calls) in graded_cells().items() if gid in LEVEL_3 and (why := failure(calls, ns))}
    assert failed == {}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(WRONG))
def test_a_wrong_reconcile_turn_scores_lower(name):
    """Each plausible wrong answer fails the test cell its bug breaks, with a message about that bug."""
    source, cell = WRONG[name]
    require_fails(name, cell, graded_cells(), learner(source))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["none", "delete", "rerun", "by_effect", "by_effect_ledger"])
def test_no_strategy_scores_half_of_level_3(name):
    """The kit's strategies, and the instructor's answers to Levels 2 and postmortem, score under half of Level 3."""
    assert answers.ANSWERS  # importing the answers registers them
    ns = learner("")
    ns["reconcile_turn"] = rc.STRATEGIES[name].reconcile
    total = sum(graded_cells()[gid][0] for gid in LEVEL_3)
    assert score(ns) < total / 2


def test_visible_checks_name_the_lesson_for_the_lessons_warnings():
    """A do-nothing, a deleting and an unknown-tool-running reconcile fail a visible check that names what to reread."""
    cases = {
        rc.STRATEGIES["none"].reconcile: (checks.check_checkpoint_b, "section 3, 'Resume naively"),
        rc.STRATEGIES["delete"].reconcile: (checks.check_checkpoint_b, "section 4, 'Move 1: delete'"),
        rc.STRATEGIES["rerun"].reconcile: (checks.check_unknown_tool_not_run, "section 5, 'The rule"),
    }
    for fn, (check, where) in cases.items():
        with pytest.raises(CheckFailed, match=re.escape(where)):
            check(fn)


LEVEL_2_ANSWERING: tuple[str, ...] = (
    "test_reconcile_B",
    "test_reconcile_C",
    "test_read_only_tools",
    "test_side_effect_tools",
)
LEVEL_2_ANSWERING += ("test_unknown_tool", "test_api_accepts", "test_round_trip")
"""Level 2's cells whose checks answer a dangling call (and so compare the run's fields)."""
FRESH_RECONCILE = re.sub(r"\n *### (BEGIN|END) SOLUTION", "", text_of(EXERCISE.cell("reconcile"))).replace(
    "    cp.pending_tool_use = None\n", FRESH
)
"""The Level 2 solution, but it returns a new Checkpoint as well."""


@pytest.mark.slow
def test_a_fresh_checkpoint_loses_every_cell_that_settles_calls_and_says_what_it_lost():
    """A reconcile(_turn) that returns rc.Checkpoint(task=..., messages=...) fails each answering cell of Levels 2 and 3, naming run_id and lesson 1, section 8."""
    assert FRESH_RECONCILE.count("rc.Checkpoint(") == 1
    ns = learner(f"{FRESH_RECONCILE}\n{FRESH_TURN}")
    graded = graded_cells()
    cells = (*LEVEL_2_ANSWERING, *(gid for gid in LEVEL_3 if gid != "test_turn_real_kills"))
    reasons = {gid: failure(graded[gid][1], ns) for gid in cells}
    assert all(reasons.values()), {gid: why for gid, why in reasons.items() if not why}
    for why in reasons.values():
        assert "run_id 'run_" in str(why) and "lesson 1, section 8, '`turns` and `tokens_used` carry over'" in str(why)


def test_the_carry_over_lesson_is_the_lessons_own_title():
    """The section a fresh checkpoint's message names is a real heading of lesson 1."""
    from resumable_core.course.checks.support import CARRY_OVER_LESSON

    lesson = json.loads((course.COURSE_ROOT / "lessons" / "01_skeleton_resume.ipynb").read_text(encoding="utf-8"))
    title = CARRY_OVER_LESSON.split("'", 1)[1].rsplit("'", 1)[0]
    headings = ["".join(c["source"]) for c in lesson["cells"] if c["cell_type"] == "markdown"]
    assert any(f"## 8. {title}" in h for h in headings), title


@pytest.mark.slow
def test_an_unknown_tool_with_a_finished_receipt_gets_the_receipts_result_in_the_solution():
    """The solution passes the hidden unknown-tool-with-a-receipt check that the receipt-blind answer fails."""
    hidden.check_turn_status_unknown(learner(SOLUTION)["reconcile_turn"])
    with pytest.raises(CheckFailed, match="a deploy removed it"):
        hidden.check_turn_status_unknown(learner(WRONG["unknown_tool_ignores_its_receipt"][0])["reconcile_turn"])


@pytest.mark.slow
def test_the_rerun_strategy_scores_under_half_of_the_visible_points():
    """The kit's rerun, with the right Level 1 answers, passes under half of the points its visible checks give; Level 3 names the sections."""
    ns = learner(EXERCISE.solution("level1_actions"))
    ns["reconcile"] = ns["reconcile_turn"] = rc.STRATEGIES["rerun"].reconcile
    visible = {gid: (points, [c for c in calls if c.visible]) for gid, (points, calls) in graded_cells().items()}
    visible = {gid: cell for gid, cell in visible.items() if cell[1]}
    earned = sum(points for points, calls in visible.values() if failure(calls, ns) is None)
    assert 2 * earned < sum(points for points, _ in visible.values())
    why = failure(visible["test_turn_real_kills"][1], ns)
    assert why is not None and "'Sidebar: several calls in one turn'" in why and "section 5, 'The rule" in why
