"""The grade command, end to end with real nbgrader, on a sample class of the real ``reconcile`` assignment.

The class is graded twice (``folder_run`` and ``zip_run``, once per session: ``tests/graded_classes.py``): the whole
class as a ``submitted/`` folder with ``--jobs 2``, and one student of each way a submission can end
(``ZIP_STUDENTS``) as a zip of flat ``<student>.ipynb`` files on a Dask cluster that loses a worker mid-run; every
score is asserted on both.
"""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import graded_classes  # tests/ is on sys.path under pytest (rootdir-relative import)
import grading_samples as samples
import nbformat
import pytest
from dask_cluster import left_in, naming, wait_for  # the suite's process helpers (tests/ is on sys.path)

from resumable_core.__main__ import main as cli_main
from resumable_core.course import nbgrader_cli, notebooks
from resumable_core.course import release as course
from resumable_core.course.grading import cli
from resumable_core.course.grading.errors import GradingError
from resumable_core.course.grading.isolation import BwrapBackend
from resumable_core.course.grading.pipeline import grade
from resumable_core.course.grading.steps.collect import collect, unpacked
from resumable_core.course.grading.steps.prepare import read_notebook, restore_cells, suspicious

REPO = graded_classes.REPO
SOURCE = graded_classes.SOURCE
TIMEOUT = graded_classes.TIMEOUT
MAX = 29  # 26 autograded + 3 for the manually graded explanation
ZIP_STUDENTS = graded_classes.ZIP_STUDENTS
_rows = graded_classes.rows

pytestmark = pytest.mark.skipif(not SOURCE.exists(), reason="the course's reconcile assignment is not there")


@pytest.mark.slow
@pytest.mark.nbgrader
@pytest.mark.parametrize("run", ["folder_run", "zip_run"])
def test_every_score_is_as_expected(run, request):
    """Each sample scores what the course's tests give it, in both layouts (the monkeypatch one included)."""
    expected, _, rows = request.getfixturevalue(run)
    assert set(rows) == set(expected)
    got = {s: float(r["score"]) for s, r in rows.items()}
    assert got == expected
    assert {r["max_score"] for r in rows.values()} == {str(MAX)}


@pytest.mark.slow
@pytest.mark.nbgrader
def test_jobs_2_gives_the_same_grades_as_jobs_1(folder_run, zip_run):
    """--jobs 2 (folder) and the cluster that lost a worker (zip) give the same grades.csv row, reason included, to
    every zip student (tests/test_regrade.py: --jobs 1 gives --jobs 2's rows)."""
    a = {s: dict(r) for s, r in folder_run[2].items()}
    b = {s: dict(r) for s, r in zip_run[2].items()}
    assert set(b) == {*ZIP_STUDENTS, "not_a_notebook", "empty"}
    assert {s: a[s] for s in b} == b


WRONG_CELLS = {  # Level 3 is every sample's solution: only Level 2's cells tell them apart
    # no dangling call is answered: only "nothing pending" passes (the API and round-trip checks need the call answered)
    "delete_move": {
        "test_reconcile_B",
        "test_reconcile_C",
        "test_read_only_tools",
        "test_side_effect_tools",
        "test_unknown_tool",
        "test_api_accepts",
        "test_round_trip",
    },
    # pending_tool_use left set: every answered case fails, the API and round-trip checks too
    "forgot_pending": {
        "test_reconcile_B",
        "test_reconcile_C",
        "test_read_only_tools",
        "test_side_effect_tools",
        "test_unknown_tool",
        "test_api_accepts",
        "test_round_trip",
    },
}
"""The test cells each wrong move must fail (tests/test_checks.py's class does not grade these two again)."""


@pytest.mark.slow
@pytest.mark.nbgrader
@pytest.mark.parametrize("student", sorted(WRONG_CELLS))
def test_a_wrong_move_loses_exactly_the_cells_its_bug_breaks(folder_run, student):
    """Per test cell in the gradebook: 0 on each cell the bug breaks, the cell's full points on every other."""
    from nbgrader.api import Gradebook

    _, out, _ = folder_run
    auto = {c["grade_id"]: c["points"] for c in course.grade_cells(SOURCE) if c["kind"] == "auto"}
    with Gradebook(f"sqlite:///{out / 'gradebook.db'}") as gb:
        grades = gb.find_submission_notebook("reconcile", "reconcile", student).grades
        got = {g.name: g.score for g in grades if g.name in auto}
    assert got == {gid: 0 if gid in WRONG_CELLS[student] else points for gid, points in auto.items()}


@pytest.mark.slow
@pytest.mark.nbgrader
def test_hostile_submissions_are_reported_with_a_reason(folder_run):
    """A dead kernel's later cells say why, a non-notebook and an empty notebook are reported, loops are cut."""
    _, _, rows = folder_run
    assert (
        "test_turn_real_kills 0/5 (GradingStopped: not run: the learner's process ended before its last cell"
        in rows["os_exit"]["reason"]
    )
    assert rows["not_a_notebook"]["status"] == "invalid" and "not a notebook" in rows["not_a_notebook"]["reason"]
    assert rows["empty"]["status"] == "empty" and "empty notebook" in rows["empty"]["reason"]
    assert f"interrupted at the {TIMEOUT} s timeout" in rows["infinite_loop"]["reason"]
    assert "renamed notebook 'reconcile-final (1).ipynb'" in rows["renamed"]["reason"]
    assert "restored deleted cells: test_level1_A" in rows["renamed"]["reason"]  # it deleted its tests too
    assert "flagged for review" in rows["monkeypatch"]["reason"]
    assert all(r["status"] == "graded" for s, r in rows.items() if s not in samples.EXPECTED_STATUS)


@pytest.mark.slow
@pytest.mark.nbgrader
def test_stderr_costs_nothing(folder_run):
    """A correct answer that prints to stderr keeps every point: its reason is correct's."""
    _, _, rows = folder_run
    assert rows["stderr_writer"]["score"] == rows["correct"]["score"]
    assert rows["stderr_writer"]["reason"] == rows["correct"]["reason"]


@pytest.mark.slow
@pytest.mark.nbgrader
def test_a_kernel_killed_midway_keeps_the_points_of_the_cells_before(folder_run):
    """os._exit after the last answer cell: levels 1 and 2's tests (run before) keep their 11 points, none is 'needs review'."""
    _, _, rows = folder_run
    reason = rows["os_exit"]["reason"]
    assert float(rows["os_exit"]["score"]) == 11
    assert "test_level1_A" not in reason and "test_reconcile_B" not in reason and "needs review" not in reason


@pytest.mark.slow
@pytest.mark.nbgrader
def test_edited_tests_are_restored_from_the_gradebook(folder_run):
    """Tests replaced by `pass` are overwritten by nbgrader: edited_tests scores like rerun_everything."""
    _, out, rows = folder_run
    assert rows["edited_tests"]["score"] == rows["rerun_everything"]["score"]
    nb = nbformat.read(str(out / "autograded" / "edited_tests" / "reconcile" / "reconcile.ipynb"), as_version=4)
    sources = [c.source for c in nb.cells if notebooks.grade_id(c) == "test_reconcile_C"]
    assert sources and "check_checkpoint_c" in sources[0]


@pytest.mark.slow
@pytest.mark.nbgrader
def test_monkeypatching_the_checkers_does_not_pay(folder_run):
    """A rerun that also patches Toolbox.execute and the graders' checks scores no more than the plain rerun, and says why.

    (Its fake execute also breaks its own Level 3 in the kernel, where a failure stands: it scores less.)
    """
    _, out, rows = folder_run
    assert float(rows["monkeypatch"]["score"]) < float(rows["rerun_everything"]["score"])
    for student in ("monkeypatch", "rerun_everything"):
        for gid in ("test_reconcile_C", "test_side_effect_tools", "test_unknown_tool"):
            assert f"{gid} 0/" in rows[student]["reason"], student
    # the hidden-only cells run in the kernel without their hidden block: the isolated re-run decides them
    # its patch of the checks raises in the kernel (no hidden module there): no visible check disagrees, only hidden ones fail
    assert "a hidden check failed: " in rows["monkeypatch"]["reason"]
    assert "a hidden check failed: " in rows["rerun_everything"]["reason"]
    assert "patch" not in rows["rerun_everything"]["reason"]
    assert "isolat" not in rows["correct"]["reason"]
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{out / 'gradebook.db'}") as gb:  # nbgrader's own override, auto_score kept
        g = gb.find_grade("test_side_effect_tools", "reconcile", "reconcile", "monkeypatch")
        assert (g.auto_score, g.manual_score, g.score) == (1.0, 0.0, 0.0)


@pytest.mark.slow
@pytest.mark.nbgrader
def test_an_honest_top_level_set_keeps_every_point(folder_run):
    """A solution with a top-level READ_ONLY_TOOLS = frozenset(...) scores like correct: the re-check zeroes nothing.

    (``stderr_writer``'s: it writes to stderr too, which costs nothing either.)"""
    _, _, rows = folder_run
    assert float(rows["stderr_writer"]["score"]) == float(rows["correct"]["score"]) == 26
    assert rows["stderr_writer"]["reason"] == rows["correct"]["reason"]
    assert "isolated" not in rows["stderr_writer"]["reason"]


@pytest.mark.slow
@pytest.mark.nbgrader
def test_outputs_feedback_plot_and_export(folder_run):
    """Feedback HTML for every graded student, a PNG plot, nbgrader's export and the gradebook in --out."""
    _, out, rows = folder_run
    graded = [s for s, r in rows.items() if r["status"] in ("graded", "empty")]
    for s in graded:
        assert (out / "feedback-html" / f"{s}.html").read_text().lstrip().startswith("<!DOCTYPE html>")
    assert not (out / "feedback-html" / "not_a_notebook.html").exists()
    assert (out / "scores.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    export = _rows(out / "nbgrader-export.csv")
    assert {s: float(export[s]["score"]) for s in graded} == {s: float(rows[s]["score"]) for s in graded}
    assert not (REPO / "submitted" / "correct").exists()


def test_a_class_is_graded_once_for_all_the_sessions_workers(tmp_path, monkeypatch):
    """Two xdist workers asking for the same class at once: one grades it, the other waits for that run and reads it."""
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    graded: list[Path] = []
    inside, finish = threading.Event(), threading.Event()

    def grade(folder: Path) -> None:
        graded.append(folder)
        inside.set()
        finish.wait()
        (folder / "grades.csv").write_text("the run")

    got: dict[str, Path] = {}

    def worker(name: str) -> None:
        got[name] = graded_classes.once(tmp_path / name, "reconcile", grade)

    first = threading.Thread(target=worker, args=("gw0",))
    first.start()
    inside.wait()
    second = threading.Thread(target=worker, args=("gw1",))
    second.start()
    lock = f":{(tmp_path / 'graded-classes' / 'reconcile.lock').stat().st_ino} "

    def waiting() -> bool:  # /proc/locks marks a request blocked on a lock held "->"
        return any("->" in line and lock in line for line in Path("/proc/locks").read_text().splitlines())

    assert wait_for(lambda: waiting() or len(graded) > 1, 60), "the second worker neither waited nor graded"
    finish.set()
    first.join()
    second.join()
    assert len(graded) == 1 and got["gw0"] == got["gw1"] == graded[0]
    assert (got["gw1"] / "grades.csv").read_text() == "the run"


def test_read_notebook_tells_why_a_file_is_not_a_notebook(tmp_path):
    """Binary, JSON-but-not-notebook and valid notebooks are told apart."""
    (tmp_path / "a.ipynb").write_bytes(b"%PDF-1.4\xff")
    (tmp_path / "b.ipynb").write_text('{"hello": 1}')
    nbformat.write(nbformat.v4.new_notebook(), str(tmp_path / "c.ipynb"))
    assert read_notebook(tmp_path / "a.ipynb")[1] == "a.ipynb is not a notebook: not JSON"
    assert read_notebook(tmp_path / "b.ipynb")[1] == "not a notebook: JSON without a cells list"
    assert read_notebook(tmp_path / "c.ipynb")[1] is None
    (tmp_path / "d.ipynb").write_text('{"cells": [{"cell_type": "code"}], "nbformat": 4, "nbformat_minor": 5}')
    assert read_notebook(tmp_path / "d.ipynb")[1] == "not a notebook: fails nbformat validation (ValidationError)"


def test_out_folder_not_made_by_the_command_is_refused(tmp_path):
    """--out pointing at a foreign non-empty folder or at the course root is refused (exit 2)."""
    (tmp_path / "keep.txt").write_text("mine")
    assert cli_main(["grade", str(tmp_path), "--out", str(tmp_path)]) == 2
    assert (tmp_path / "keep.txt").read_text() == "mine"
    assert cli_main(["grade", str(tmp_path), "--out", str(REPO)]) == 2


def test_grade_options_are_one_frozen_config_refusing_unknown_ones(tmp_path):
    """grade()'s keywords make one GradeOptions that no step can change; a misspelt one is refused before any work."""
    import dataclasses

    from resumable_core.course.grading.pipeline import GradeOptions, grade

    opts = GradeOptions(jobs=2, out=tmp_path)
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.jobs = 1  # type: ignore[misc]
    with pytest.raises(TypeError, match="job"):
        grade(tmp_path / "none", job=2)
    assert not (tmp_path / "none").exists()


def _class_files(root: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


def test_collect_reads_nbgrader_layout_inside_a_zip_with_one_top_folder(tmp_path):
    """A zip of a class folder: students by id, a renamed notebook mapped, a PDF and an empty folder refused."""
    nb = nbformat.writes(nbformat.v4.new_notebook()).encode()
    with zipfile.ZipFile(tmp_path / "class.zip", "w") as z:
        z.writestr("class/submitted/ann/reconcile/final (2).ipynb", nb)
        z.writestr("class/submitted/bob/reconcile/reconcile.pdf", b"%PDF")
        z.writestr("class/submitted/bob lee/reconcile/reconcile.ipynb", nb)
        z.writestr("class/submitted/cy/other/x.ipynb", nb)
        z.writestr("__MACOSX/class/._junk", b"")
    with unpacked(tmp_path / "class.zip") as root:
        subs = {s.student: s for s in collect(root, "reconcile", ["reconcile"])}
    assert sorted(subs) == ["ann", "bob", "bob_lee", "cy"]
    assert subs["ann"].status == "graded" and "renamed notebook 'final (2).ipynb'" in subs["ann"].reason
    assert (subs["bob"].status, subs["bob"].reason) == ("invalid", "not a notebook: .pdf file, no .ipynb")
    assert subs["bob_lee"].status == "graded" and not subs["bob_lee"].reason
    assert (subs["cy"].status, subs["cy"].reason) == ("missing", "no reconcile/ folder in cy/")


def test_collect_reads_flat_files_one_student_each(tmp_path):
    """Flat files: one student per file stem; a second file of the same student is noted and ignored."""
    nb = nbformat.writes(nbformat.v4.new_notebook()).encode()
    root = _class_files(tmp_path, {"ann.ipynb": nb, "ann.txt": b"x", "bob.docx": b"x"})
    subs = {s.student: s for s in collect(root, "reconcile", ["reconcile"])}
    assert subs["ann"].files == {"reconcile": root / "ann.ipynb"}
    assert subs["ann"].reason == "ignored another file 'ann.txt'"
    assert subs["bob"].status == "invalid"


def test_a_path_that_is_neither_folder_nor_zip_is_refused(tmp_path):
    """grade() refuses a plain file with a GradingError naming it, before any work."""
    (tmp_path / "grades.txt").write_text("no")
    with pytest.raises(GradingError, match="neither a folder nor a zip"):
        grade(tmp_path / "grades.txt", out=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_deleted_instructor_cells_come_back_in_place():
    """restore_cells puts a deleted test back after the cell that preceded it in the release."""
    release = samples.tiny_source_notebook()
    learner = nbformat.reads(nbformat.writes(release), as_version=4)
    del learner.cells[3]  # test_read_only
    assert restore_cells(learner, release) == ["test_read_only"]
    assert list(map(notebooks.grade_id, learner.cells)) == list(map(notebooks.grade_id, release.cells))
    assert restore_cells(learner, release) == []


def test_suspicious_flags_patching_and_exits_in_learner_cells_only():
    """Attribute assignments on imported modules, setattr and os._exit are flagged; locked cells are not read."""
    nb = samples.tiny_source_notebook()
    nb.cells.append(nbformat.v4.new_code_cell("import json as j\nj.dumps = str\n%time x = 1\nsetattr(j, 'x', 1)"))
    nb.cells.append(nbformat.v4.new_code_cell("import os\nos._exit(0)"))
    nb.cells.append(nbformat.v4.new_code_cell("local = object()\nlocal.x = 1"))
    nb.cells.append(nbformat.v4.new_code_cell("sys.exit = None\ndef f(:"))  # does not parse: not read
    assert suspicious(nb) == ["assigns j.dumps", "calls os._exit()", "calls setattr()"]


def test_nbgrader_runs_with_the_venv_first_and_offline():
    """The one nbgrader wrapper's environment: this interpreter's bin first on PATH, RESUMABLE_LIVE gone."""
    env = nbgrader_cli.env({"PATH": "/usr/bin", "RESUMABLE_LIVE": "1"})
    assert env["PATH"].split(":")[0] == str(Path(sys.executable).parent)
    assert "RESUMABLE_LIVE" not in env


@pytest.mark.slow
@pytest.mark.nbgrader
def test_a_failing_nbgrader_command_says_which_and_why(tmp_path):
    """NbgraderError carries the command, exit code and stderr, and names the last stderr line."""
    with pytest.raises(nbgrader_cli.NbgraderError) as info:
        nbgrader_cli.nbgrader(["generate_assignment", "nope", "--no-such-option=1"], tmp_path)
    assert info.value.returncode != 0 and info.value.command[:2] == ["generate_assignment", "nope"]
    assert "no-such-option" in info.value.stderr
    assert str(info.value).startswith("`nbgrader generate_assignment nope") and "\n" not in str(info.value)


def test_grade_refuses_to_run_without_the_sandbox(tmp_path, monkeypatch, capsys):
    """With bubblewrap unusable, grade exits 2 naming why and --no-sandbox; it runs nothing."""

    monkeypatch.setattr(BwrapBackend, "available", lambda self: "bwrap is not installed (apt-get install bubblewrap)")
    (tmp_path / "class").mkdir()
    (tmp_path / "class" / "ann.ipynb").write_text("{}")  # an empty class is refused before the sandbox is asked
    assert cli_main(["grade", str(tmp_path / "class"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "bwrap is not installed" in err and "--no-sandbox" in err
    assert not (tmp_path / "out" / "release").exists()


def test_no_sandbox_warns_what_it_exposes(tmp_path):
    """--no-sandbox runs notebooks without bubblewrap, after a warning naming what a submission then reaches."""
    from resumable_core.course.grading import pipeline

    said: list[str] = []
    execution = pipeline._execution(tmp_path, False, lambda *a, **k: said.append(" ".join(map(str, a))))
    assert execution.isolation == "plain" and execution.library is None
    assert len(said) == 1 and all(w in said[0] for w in ("gradebook", "network", "secrets", "site-packages"))


def test_worker_reports_of_other_ids_are_ignored(tmp_path, caplog):
    """A report file naming another student, or not a report at all, is ignored and logged, never fatal."""
    from resumable_core.course.grading.steps import workers

    report = workers.StudentReport("ann", str(tmp_path), success=True)
    workers.write_report(tmp_path, report)
    (tmp_path / "reports" / "bob.json").write_text((tmp_path / "reports" / "ann.json").read_text())
    (tmp_path / "reports" / "cy.json").write_text('{"student": "cy", "nope": 1}')
    got: list = []
    results: dict = {}
    workers._collect_reports(tmp_path, ["ann", "bob", "cy"], results, got.append)
    assert list(results) == ["ann"] and got == [report]
    assert "it names student 'ann'" in caplog.text and "cy.json" in caplog.text


@pytest.mark.slow
@pytest.mark.nbgrader
def test_ctrl_c_of_a_dask_run_ends_its_tasks_grading(dask, tmp_path):
    """Ctrl-C of grade --scheduler mid-student: one line, code 130; the task stops grading and its files go."""

    samples.write_class(SOURCE, tmp_path / "class", layout="submitted", students=("infinite_loop",))
    sandbox = [] if BwrapBackend().available() is None else ["--no-sandbox"]
    args = ["grade", str(tmp_path / "class"), "--assignment", "reconcile", "--scheduler", dask.address]
    args += ["--out", str(tmp_path / "out"), "--timeout", str(TIMEOUT), *sandbox]
    proc = subprocess.Popen(
        [sys.executable, "-m", "resumable_core", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # a process group of its own, as a terminal's foreground job is
    )
    try:
        assert wait_for(lambda: naming(f"{dask.tmp}/resumable-recheck-"), 300), "no sandbox ran on the cluster"
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C does: the foreground process group
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130 and err.decode().splitlines()[-1:] == [cli.INTERRUPTED]
    assert wait_for(lambda: not naming(str(dask.tmp)) and not left_in(dask.tmp), 20), "the task graded on"


@pytest.mark.slow
@pytest.mark.nbgrader
def test_a_dask_cluster_with_a_worker_killed_mid_run_grades_as_jobs_1(zip_run):
    """--scheduler, w1's worker SIGKILLed mid-student (``zip_run``, which exits 0): nothing of it runs on or stays in
    TMPDIR; every student scores as expected (test_jobs_2_gives_the_same_grades_as_jobs_1: as a local run, row by row)."""
    expected, _, rows = zip_run
    killed = graded_classes.killed(zip_run)
    assert killed["killed"], "w1 was never seen grading a student"
    assert killed["left"] == [[]], "the killed worker's grading process or sandbox lived on"
    assert killed["left_in_tmp"] == []
    assert {s: float(r["score"]) for s, r in rows.items()} == expected


@pytest.mark.slow
@pytest.mark.nbgrader
def test_a_run_writes_the_item_analysis_of_its_checks(zip_run):
    """grade writes item-analysis.csv/.png/.html: every autograded check, and the share of the class that failed it."""
    _, out, rows = zip_run
    table = {r["check"]: r for r in csv.DictReader((out / "item-analysis.csv").open())}
    graded = [s for s, r in rows.items() if r["status"] in ("graded", "empty")]  # an empty notebook is graded too
    assert "test_level1_A" in table and all(int(r["students"]) == len(graded) for r in table.values())
    assert 0 < int(table["test_reconcile_C"]["failed"]) < len(graded)  # rerun_everything fails it, correct does not
    assert (out / "item-analysis.png").stat().st_size > 0 and "item analysis" in (
        out / "item-analysis.html"
    ).read_text()


def test_the_dask_tests_go_to_a_worker_apart_from_the_graded_classes_readers():
    """Under `make test`, this file's Dask half and its other half are two units: two workers share its cost."""
    import conftest  # tests/ is on sys.path under pytest (rootdir-relative import)

    def unit(test) -> str:
        return conftest.xdist_scope(f"tests/test_grading.py::{test.__name__}")

    dask_half = {
        unit(test_ctrl_c_of_a_dask_run_ends_its_tasks_grading),
        unit(test_a_dask_cluster_with_a_worker_killed_mid_run_grades_as_jobs_1),
    }
    other_half = {unit(test_every_score_is_as_expected), unit(test_a_run_writes_the_item_analysis_of_its_checks)}
    assert len(dask_half) == len(other_half) == 1 and dask_half != other_half
