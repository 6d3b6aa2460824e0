"""The grade command, end to end with real nbgrader, on a sample class of the real ``reconcile`` assignment.

The class is graded twice (module fixtures): as a ``submitted/`` folder with ``--jobs 2`` and as a
zip of flat ``<student>.ipynb`` files with ``--jobs 1``; every score is asserted on both.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import grading_samples as samples

from resumable_core.__main__ import main as cli_main
from resumable_core.course.grading import pipeline as grading

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO / "solutions" / "reconcile" / "reconcile.ipynb"
TIMEOUT = 10
MAX = 19  # 16 autograded + 3 for the manually graded explanation

pytestmark = pytest.mark.skipif(not SOURCE.exists(), reason="the course's reconcile assignment is not there")


def _rows(path: Path) -> dict[str, dict[str, str]]:
    with open(path, newline="") as f:
        return {r["student_id"]: r for r in csv.DictReader(f)}


def _grade(tmp_path_factory, layout: str, jobs: int):
    root = tmp_path_factory.mktemp(f"class-{layout}")
    path = root / ("class.zip" if layout == "zip" else "class")
    expected = samples.write_class(SOURCE, path, layout=layout)
    out = root / "out"
    code = cli_main(
        [
            "grade",
            str(path),
            "--assignment",
            "reconcile",
            "--jobs",
            str(jobs),
            "--out",
            str(out),
            "--timeout",
            str(TIMEOUT),
        ]
    )
    assert code == 0
    return expected, out, _rows(out / "grades.csv")


@pytest.fixture(scope="module")
def folder_run(tmp_path_factory):
    return _grade(tmp_path_factory, "submitted", jobs=2)


@pytest.fixture(scope="module")
def zip_run(tmp_path_factory):
    return _grade(tmp_path_factory, "zip", jobs=1)


@pytest.mark.parametrize("run", ["folder_run", "zip_run"])
def test_every_score_is_as_expected(run, request):
    """Each sample scores what the course's tests give it, in both layouts (the monkeypatch one included)."""
    expected, _, rows = request.getfixturevalue(run)
    assert set(rows) == set(expected)
    got = {s: float(r["score"]) for s, r in rows.items()}
    assert got == expected
    assert {r["max_score"] for r in rows.values()} == {str(MAX)}


def test_jobs_2_gives_the_same_grades_as_jobs_1(folder_run, zip_run):
    """--jobs 2 (folder) and --jobs 1 (zip) give the same grades.csv row for row.

    Only the renamed student's note differs: a flat file is named after the student, so there
    is nothing to rename.
    """
    a = {s: dict(r) for s, r in folder_run[2].items()}
    b = {s: dict(r) for s, r in zip_run[2].items()}
    a["renamed"]["reason"] = b["renamed"]["reason"] = ""
    assert a == b


def test_hostile_submissions_are_reported_with_a_reason(folder_run):
    """A dead kernel fails alone, a non-notebook and an empty notebook are reported, loops are cut."""
    _, _, rows = folder_run
    assert rows["os_exit"]["status"] == "failed" and "kernel died" in rows["os_exit"]["reason"]
    assert rows["not_a_notebook"]["status"] == "invalid" and "not a notebook" in rows["not_a_notebook"]["reason"]
    assert rows["empty"]["status"] == "empty" and "empty notebook" in rows["empty"]["reason"]
    assert f"interrupted at the {TIMEOUT} s timeout" in rows["infinite_loop"]["reason"]
    assert "wrote to stderr" in rows["stderr_writer"]["reason"]
    assert "renamed notebook 'reconcile-final (1).ipynb'" in rows["renamed"]["reason"]
    assert "restored deleted cells: test_level1_A" in rows["deleted_tests"]["reason"]
    assert "flagged for review" in rows["monkeypatch"]["reason"]
    assert all(r["status"] == "graded" for s, r in rows.items() if s not in ("os_exit", "not_a_notebook", "empty"))


def test_only_cells_writing_to_stderr_lose_points(folder_run):
    """The stderr writer loses exactly the test cells that wrote to stderr; correct's other points stay."""
    _, out, rows = folder_run
    reason = rows["stderr_writer"]["reason"]
    assert "test_reconcile_B" not in reason and "test_level1_A" not in reason
    assert float(rows["stderr_writer"]["score"]) < float(rows["correct"]["score"])


def test_edited_tests_are_restored_from_the_gradebook(folder_run):
    """Tests replaced by `pass` are overwritten by nbgrader: edited_tests scores like rerun_everything."""
    _, out, rows = folder_run
    assert rows["edited_tests"]["score"] == rows["rerun_everything"]["score"]
    nb = nbformat.read(str(out / "autograded" / "edited_tests" / "reconcile" / "reconcile.ipynb"), as_version=4)
    sources = [c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_reconcile_C"]
    assert sources and "check_checkpoint_c" in sources[0]


def test_monkeypatching_the_checkers_does_not_pay(folder_run):
    """A rerun that also patches Toolbox.execute and the graders' checks scores like the plain rerun, and says why."""
    _, out, rows = folder_run
    assert rows["monkeypatch"]["score"] == rows["rerun_everything"]["score"]
    reason = rows["monkeypatch"]["reason"]
    for gid in ("test_reconcile_C", "test_side_effect_tools", "test_unknown_tool"):
        assert f"{gid} 0/" in reason
    assert reason.count("failed in an isolated re-run") == 3
    assert "isolated re-run" not in rows["rerun_everything"]["reason"] + rows["correct"]["reason"]
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{out / 'gradebook.db'}") as gb:  # nbgrader's own override, auto_score kept
        g = gb.find_grade("test_reconcile_C", "reconcile", "reconcile", "monkeypatch")
        assert (g.auto_score, g.manual_score, g.score) == (2.0, 0.0, 0.0)


def test_an_honest_top_level_set_keeps_every_point(folder_run):
    """A solution with a top-level READ_ONLY_TOOLS = frozenset(...) scores like correct: the re-check zeroes nothing."""
    _, _, rows = folder_run
    assert float(rows["read_only_set"]["score"]) == float(rows["correct"]["score"]) == 16
    assert rows["read_only_set"]["reason"] == rows["correct"]["reason"]
    assert "isolated" not in rows["read_only_set"]["reason"]


def test_outputs_feedback_plot_and_export(folder_run):
    """Feedback HTML for every graded student, a PNG plot, nbgrader's export and the gradebook in --out."""
    _, out, rows = folder_run
    graded = [s for s, r in rows.items() if r["status"] in ("graded", "empty")]
    for s in graded:
        assert (out / "feedback-html" / f"{s}.html").read_text().lstrip().startswith("<!DOCTYPE html>")
    assert not (out / "feedback-html" / "os_exit.html").exists()
    assert (out / "scores.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    export = _rows(out / "nbgrader-export.csv")
    assert {s: float(export[s]["score"]) for s in graded} == {s: float(rows[s]["score"]) for s in graded}
    assert not (REPO / "submitted" / "correct").exists()


def test_read_notebook_tells_why_a_file_is_not_a_notebook(tmp_path):
    """Binary, JSON-but-not-notebook and valid notebooks are told apart."""
    (tmp_path / "a.ipynb").write_bytes(b"%PDF-1.4\xff")
    (tmp_path / "b.ipynb").write_text('{"hello": 1}')
    nbformat.write(nbformat.v4.new_notebook(), str(tmp_path / "c.ipynb"))
    assert grading.read_notebook(tmp_path / "a.ipynb")[1] == "not a notebook: the file is not JSON"
    assert grading.read_notebook(tmp_path / "b.ipynb")[1] == "not a notebook: JSON without a cells list"
    assert grading.read_notebook(tmp_path / "c.ipynb")[1] is None


def test_out_folder_not_made_by_the_command_is_refused(tmp_path):
    """--out pointing at a foreign non-empty folder or at the course root is refused (exit 2)."""
    (tmp_path / "keep.txt").write_text("mine")
    assert cli_main(["grade", str(tmp_path), "--out", str(tmp_path)]) == 2
    assert (tmp_path / "keep.txt").read_text() == "mine"
    assert cli_main(["grade", str(tmp_path), "--out", str(REPO)]) == 2
