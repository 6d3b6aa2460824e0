"""What ``grades.csv`` says of each submission, end to end with real nbgrader: honest reasons, partial results.

The class is ``folder_run`` (``tests/graded_classes.py``, graded once per session, read-only): of its samples
(``tests/grading_samples.py``) a plain wrong answer (``rerun_everything``), one that patches the visible checks,
written answers left blank, a correct answer that floods its output, edited test cells and a file that is not JSON.
"""

from __future__ import annotations

from pathlib import Path

import grading_samples as samples  # tests/ is on sys.path under pytest (rootdir-relative import)
import pytest
from graded_classes import SOURCE  # tests/ is on sys.path under pytest

pytestmark = [
    pytest.mark.skipif(not SOURCE.exists(), reason="the course's reconcile assignment is not there"),
    pytest.mark.slow,
    pytest.mark.nbgrader,
]


@pytest.fixture
def graded(folder_run):
    """grade's ``--out`` folder and grades.csv's rows by student."""
    _, out, rows = folder_run
    return out, rows


def _grade(out: Path, student: str, cell: str):
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{out / 'gradebook.db'}") as gb:
        g = gb.find_grade(cell, "reconcile", "reconcile", student)
        return g.auto_score, g.manual_score, g.needs_manual_grade


def _comments(out: Path, student: str) -> dict[str, str | None]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{out / 'gradebook.db'}") as gb:
        nb = gb.find_submission_notebook("reconcile", "reconcile", student)
        return {c.name: c.comment for c in nb.comments}


def test_an_honest_wrong_answer_gets_the_hidden_checks_message(graded):
    """A plain wrong answer that fails a hidden check is told what failed, with no suspicion and no review."""
    _, rows = graded
    reason = rows["rerun_everything"]["reason"]
    assert "test_side_effect_tools 0/1 (a hidden check failed: " in reason
    assert "patch" not in reason and "needs review" not in reason
    assert float(rows["rerun_everything"]["score"]) == samples.SAMPLES["rerun_everything"][2]


def test_a_patched_visible_check_is_still_flagged(graded):
    """A submission that patches the visible checks: the same check passed in the kernel and failed in isolation."""
    _, rows = graded
    reason = rows["patched"]["reason"]
    flagged = "needs review: a visible check passed in the notebook's kernel but failed when re-checked in isolation"
    assert f"test_reconcile_C 0/1 ({flagged}" in reason and f"test_unknown_tool 0/1 ({flagged}" in reason
    assert "(the submission may patch the checks)" in reason
    assert "test_side_effect_tools 0/1 (a hidden check failed: " in reason  # hidden-only: no disagreement there
    assert float(rows["patched"]["score"]) == samples.SAMPLES["rerun_everything"][2]


def test_a_blank_written_answer_says_so_and_scores_0_without_waiting(graded):
    """A written answer left as released, or emptied, is "left blank" in grades.csv and waits for nobody."""
    out, rows = graded
    for student in samples.BLANK_WRITTEN:
        reason = rows[student]["reason"]
        assert "level1_why 0/3 (written answer level1_why left blank)" in reason, student
        assert "needs manual grading" not in reason, student
        assert _grade(out, student, "level1_why") == (0.0, None, False), student
        assert float(rows[student]["score"]) == samples.SAMPLES[student][2]  # its autograded cells' alone


def test_an_output_flood_costs_only_the_cells_from_the_one_that_flooded(graded):
    """A correct answer that prints 21 MiB after Level 2 keeps Levels 1 and 2; the cells from the flood say why."""
    _, rows = graded
    assert float(rows["flood"]["score"]) == samples.SAMPLES["os_exit"][2]  # the same cells as a dead kernel there
    assert "test_turn_real_kills 0/5 (GradingStopped: not run: output flood at cell " in rows["flood"]["reason"]
    assert ": the outputs passed the 16 MiB output cap (print less))" in rows["flood"]["reason"]
    assert "test_level1_A" not in rows["flood"]["reason"]


def test_edited_test_cells_are_noted_and_graded_as_released(graded):
    """Test cells the learner edited are graded as released (nbgrader overwrites them), and the reason says so."""
    _, rows = graded
    assert "edited test cells graded as released: test_level1_A" in rows["edited_tests"]["reason"]
    assert float(rows["edited_tests"]["score"]) == samples.SAMPLES["rerun_everything"][2]  # its answer's


def test_a_file_that_is_not_json_says_so(graded):
    """A submitted file that is not JSON is refused as not a notebook, named, never "missing"."""
    _, rows = graded
    assert rows["not_json"]["status"] == "invalid"
    assert rows["not_json"]["reason"] == "reconcile.ipynb is not a notebook: not JSON"


def test_formgrader_shows_the_rechecks_reason_as_the_answers_comment(graded):
    """Each cell the re-check zeroed has its reason in nbgrader's comment of the answer cell above it."""
    out, _ = graded
    comments = _comments(out, "rerun_everything")
    assert "test_side_effect_tools scored 0 in the isolated re-check: a hidden check failed: " in (
        comments["reconcile"] or ""
    )
    assert not comments.get("reconcile_turn")
