"""Re-grading never wipes the class: per-student results, the class files rebuilt, ``--resume``, the release cache, progress.

The slow tests grade the course's real ``reconcile`` with real nbgrader, sandboxed where
bubblewrap runs (``grading_samples``' answers): a course that re-grades one of its students, and a
class whose ``grade`` process is SIGKILLed after its first student, then resumed.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import graded_classes  # tests/ is on sys.path under pytest (rootdir-relative import)
import grading_samples as samples
import nbformat
import pytest
from dask_cluster import naming, wait_for  # the suite's process helpers (tests/ is on sys.path)

from resumable_core.__main__ import main as cli_main
from resumable_core.course import release
from resumable_core.course.grading import cli
from resumable_core.course.grading.isolation import BwrapBackend
from resumable_core.course.grading.model import StudentReport, Submission
from resumable_core.course.grading.progress import REASON_WIDTH, RunProgress, cut
from resumable_core.course.grading.steps import merge, workspace
from resumable_core.course.grading.steps.report import format_table, write_csv

REPO = Path(__file__).resolve().parent.parent
ASSIGNMENT = "reconcile"
SOURCE = REPO / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
TIMEOUT = str(graded_classes.TIMEOUT)
NO_SANDBOX = [] if BwrapBackend().available() is None else ["--no-sandbox"]


def _class(folder: Path, students: tuple[str, ...]) -> dict[str, float]:
    """``folder/submitted/...`` of the chosen samples (``empty`` and ``not_a_notebook`` come too); expected scores."""
    return samples.write_class(SOURCE, folder, layout="submitted", students=students)


_rows = graded_classes.rows


def _scores(path: Path) -> dict[str, float]:
    return {s: float(r["score"]) for s, r in _rows(path).items()}


def _course(tmp: Path) -> Path:
    """A course holding ``reconcile``, released into its gradebook as `make release` does."""
    course = tmp / "course"
    shutil.copytree(REPO / "solutions" / ASSIGNMENT, course / "solutions" / ASSIGNMENT)
    shutil.copy2(REPO / "nbgrader_config.py", course / "nbgrader_config.py")
    release.release(course, [ASSIGNMENT])
    return course


def _grade(path: Path, *args: str) -> list[str]:
    """The ``python -m resumable_core grade`` argument list for ``reconcile`` (``--jobs 1`` unless ``args`` say)."""
    return ["grade", str(path), "--assignment", ASSIGNMENT, "--jobs", "1", "--timeout", TIMEOUT, *NO_SANDBOX, *args]


@pytest.mark.slow
@pytest.mark.nbgrader
def test_regrading_one_student_keeps_the_whole_class(tmp_path: Path, monkeypatch, zip_run) -> None:
    """Grading a class, then only one student again: grades.csv, the plot and the pages still cover all, that row new.

    The class is ``zip_run``'s: its run copied and resumed (nobody graded again) publishes it into the course."""
    expected, graded, _ = zip_run
    course = _course(tmp_path)
    monkeypatch.chdir(tmp_path)
    files = tmp_path / "class-files"
    shutil.copytree(graded, tmp_path / f"grading-{ASSIGNMENT}")  # a copy: the cached run is read-only
    first = _grade(graded.parent / "class.zip", "--course", str(course), "--class-dir", str(files), "--resume")
    assert cli_main(first) == 0
    before = _rows(files / "grades.csv")
    assert _scores(files / "grades.csv") == expected
    again = tmp_path / "again" / "submitted" / "rerun_everything" / ASSIGNMENT
    again.mkdir(parents=True)
    answered = samples.submission(nbformat.read(str(SOURCE), as_version=4), samples.answers(samples.REAL_CORRECT))
    nbformat.write(answered, str(again / f"{ASSIGNMENT}.ipynb"))
    assert cli_main(_grade(again.parents[1], "--course", str(course), "--class-dir", str(files))) == 0
    after = _rows(files / "grades.csv")
    assert _scores(files / "grades.csv") == {**expected, "rerun_everything": expected["correct"]}
    assert {s: r for s, r in after.items() if s != "rerun_everything"} == {
        s: r for s, r in before.items() if s != "rerun_everything"
    }
    pages = ["correct.html", "empty.html", "monkeypatch.html", "os_exit.html", "rerun_everything.html"]
    assert sorted(p.name for p in (files / "feedback-html").iterdir()) == pages
    assert len(list((files / "results").glob("*.json"))) == len(expected)
    assert (files / "scores.png").stat().st_size > 0
    assert cli_main(["grades", "--assignment", ASSIGNMENT, "--course", str(course), "--out", str(files)]) == 0
    assert _rows(files / "grades.csv") == after  # `grades` rebuilds the same class from the same gradebook


def _temp_folder(tmp_path: Path, monkeypatch) -> Path:
    """A TMPDIR of this test's own, for `grade` and all it starts (workers, tracers, sandboxes), in and out of process.

    So every process of a run names it in its command line (its temp folders are there), and what a run leaves is there.
    """
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    return tmp


def _start(args: list[str]) -> subprocess.Popen[bytes]:
    """``python -m resumable_core ARGS`` in a process group of its own, as a terminal's foreground job is."""
    cmd = [sys.executable, "-m", "resumable_core", *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


@pytest.mark.slow
@pytest.mark.nbgrader
def test_a_run_killed_mid_class_resumes_to_the_same_grades(tmp_path: Path, monkeypatch, folder_run) -> None:
    """SIGKILL of `grade` mid-student: no worker or sandbox lives on; `--resume` skips who finished, same grades.

    The same grades: the whole class's rows of these students, graded with --jobs 2 (so --jobs 1 gives --jobs 2's rows;
    tests/test_grading.py: a cluster gives them too)."""
    klass = tmp_path / "class"
    whole = {s: folder_run[2][s] for s in _class(klass, ("correct", "rerun_everything"))}
    tmp = _temp_folder(tmp_path, monkeypatch)
    cut_short = tmp_path / "killed"
    proc = _start(_grade(klass, "--out", str(cut_short)))
    try:
        finished = lambda: any((cut_short / merge.DONE).glob("*.json"))  # noqa: E731
        assert wait_for(lambda: finished() and naming(str(tmp)), 300), "no student finished while the next one ran"
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert wait_for(lambda: not naming(str(tmp_path)), 30), "a worker or a sandbox outlived the killed grade"
    finished_before = sorted(p.stem for p in (cut_short / merge.DONE).glob("*.json"))
    assert 1 <= len(finished_before) < 3  # of correct, empty and rerun_everything
    assert cli_main(_grade(klass, "--out", str(cut_short), "--resume")) == 0
    assert _rows(cut_short / "grades.csv") == whole
    log = (cut_short / "done" / f"{finished_before[0]}.json").read_text()
    assert json.loads(log)["report"]["student"] == finished_before[0]
    assert list(tmp.iterdir()) == []  # the killed run's temp folders went with the next run


@pytest.mark.slow
@pytest.mark.nbgrader
@pytest.mark.parametrize("stop", ["ctrl-c", "sigterm"])
def test_ctrl_c_stops_a_run_at_once_and_resume_grades_whom_it_cut(tmp_path: Path, monkeypatch, stop) -> None:
    """Ctrl-C (or a SIGTERM to grade alone) mid-student of `grade --jobs 2`: one line, code 130 (143), nothing left;
    `--resume` scores as a whole run."""
    klass = tmp_path / "class"
    expected = _class(klass, ("correct",))  # and empty, graded by the other worker
    tmp = _temp_folder(tmp_path, monkeypatch)
    out = tmp_path / "out"
    proc = _start(_grade(klass, "--out", str(out), "--jobs", "2"))
    cut = out / merge.DONE / "correct.json"
    try:
        assert wait_for(lambda: naming(str(tmp)) and not cut.exists(), 300), "correct's sandbox never ran"
        if stop == "sigterm":  # what kill, systemd or a batch scheduler sends: grade alone
            proc.terminate()
        else:  # what Ctrl-C does: the foreground process group
            os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == {"ctrl-c": 130, "sigterm": 143}[stop]
    assert err.decode().splitlines()[-1:] == [cli.INTERRUPTED] and b"Traceback" not in err
    assert wait_for(lambda: not naming(str(tmp_path)), 30), "a worker or a sandbox outlived the interrupted run"
    assert list(tmp.iterdir()) == []
    assert not cut.exists()  # cut mid-student: not done
    assert cli_main(_grade(klass, "--out", str(out), "--resume")) == 0
    assert _scores(out / "grades.csv") == expected


def _workspace(tmp_path: Path, student: str, report: StudentReport) -> Path:
    """A working course with one prepared submission, marked done with ``report``."""
    out = tmp_path / "work"
    (out / "submitted" / student / ASSIGNMENT).mkdir(parents=True)
    (out / "submitted" / student / ASSIGNMENT / "reconcile.ipynb").write_text("{}")
    (out / "workers" / "w0" / "autograded").mkdir(parents=True)
    assert merge.merge_student(out, ASSIGNMENT, report, {student})
    return out


def test_already_graded_means_a_whole_record_of_the_same_submission(tmp_path: Path) -> None:
    """`--resume` skips a student only with a whole done record of the bytes prepared now; else grades them again."""
    report = StudentReport("ann", str(tmp_path / "work" / "workers" / "w0"), success=False, error="it died")
    out = _workspace(tmp_path, "ann", report)
    assert merge.finished(out, ASSIGNMENT, ["ann", "ben"]) == {"ann": report}
    (out / "submitted" / "ann" / ASSIGNMENT / "reconcile.ipynb").write_text('{"cells": []}')  # handed in again
    assert merge.finished(out, ASSIGNMENT, ["ann"]) == {}
    (out / "submitted" / "ann" / ASSIGNMENT / "reconcile.ipynb").write_text("{}")
    record = out / merge.DONE / "ann.json"
    record.write_text(record.read_text()[:-5])  # cut short: not whole
    assert merge.finished(out, ASSIGNMENT, ["ann"]) == {}


def test_resume_keeps_the_folder_and_only_drops_the_workers(tmp_path: Path) -> None:
    """A resumed working folder keeps its gradebook and done records; a plain run starts it afresh."""
    out = tmp_path / "work"
    for name in ("done/a.json", "workers/w0/x", "gradebook.db", workspace.MARKER):
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text("x")
    assert workspace.prepare_out(out, [], resume=True) == out.resolve()
    assert (out / "done" / "a.json").exists() and (out / "gradebook.db").exists() and not (out / "workers").exists()
    workspace.prepare_out(out, [], resume=False)
    assert list(out.iterdir()) == []


def test_the_release_key_follows_the_content(tmp_path: Path) -> None:
    """The release cache's key changes with a source file's bytes and name, and nothing else."""
    source = tmp_path / "source"
    samples.write_tiny_source(source)
    key = workspace.release_key(source, ASSIGNMENT)
    (source / ".ipynb_checkpoints").mkdir()
    (source / ".ipynb_checkpoints" / "x.ipynb").write_text("{}")
    assert workspace.release_key(source, ASSIGNMENT) == key
    assert workspace.release_key(source, "other") != key
    (source / "data.txt").write_text("1")
    assert workspace.release_key(source, ASSIGNMENT) != key


@pytest.mark.slow
@pytest.mark.nbgrader
def test_a_cached_release_is_the_release_without_nbgrader(tmp_path: Path, monkeypatch) -> None:
    """The second run of an unchanged source copies the release and gradebook from the cache: nbgrader never starts."""
    monkeypatch.setenv(workspace.CACHE_ENV, str(tmp_path / "cache"))
    source = tmp_path / "source" / ASSIGNMENT
    samples.write_tiny_source(source)
    first = workspace.cached_release(tmp_path / "one", source, ASSIGNMENT, 30)

    def no_nbgrader(*args, **kwargs):
        raise AssertionError("nbgrader ran on a cache hit")

    monkeypatch.setattr(workspace, "nbgrader", no_nbgrader)
    second = workspace.cached_release(tmp_path / "two", source, ASSIGNMENT, 30)
    assert second == first
    released = f"release/{ASSIGNMENT}/reconcile.ipynb"
    assert (tmp_path / "two" / released).read_bytes() == (tmp_path / "one" / released).read_bytes()
    assert (tmp_path / "two" / "gradebook.db").read_bytes() == (tmp_path / "one" / "gradebook.db").read_bytes()


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_plain_lines_off_a_terminal() -> None:
    """Not on a terminal (CI, a log): each event is one plain line through echo, no bar, no escape codes."""
    lines: list[str] = []
    with RunProgress(lambda *a, **k: lines.append(" ".join(map(str, a))), stream=io.StringIO()) as progress:
        assert not progress.drawn
        progress.step("releasing reconcile")
        progress.students(2)
        progress.line("[1/2] ann: 5/5 in 3.0 s", advance=True)
    assert lines == ["releasing reconcile...", "[1/2] ann: 5/5 in 3.0 s"]


def test_progress_on_a_terminal_draws_a_bar_with_elapsed_time_and_eta() -> None:
    """On a terminal the bar is there from the start; it counts students and shows elapsed time and the ETA."""
    screen = _Terminal()
    with RunProgress(stream=screen) as progress:
        assert progress.drawn
        progress.students(4, done=1)
        progress.line("[2/4] ben: 2/5 in 3.0 s", advance=True)
    text = screen.getvalue()
    assert "[2/4] ben: 2/5 in 3.0 s" in text and "2/4" in text and "elapsed" in text and "ETA" in text


def test_the_summary_cuts_reasons_and_grades_csv_keeps_them_whole(tmp_path: Path) -> None:
    """A long reason shows cut to REASON_WIDTH with "…" in the table; grades.csv holds the whole text."""
    reason = "test_x 0/3 (" + "why " * 60 + ")"
    sub = Submission("ann", problems=[reason], score=2, max_score=5)
    table = format_table([sub]).splitlines()[-1]
    assert cut(reason) in table and len(cut(reason)) == REASON_WIDTH and cut(reason).endswith("…")
    write_csv(tmp_path / "grades.csv", [sub])
    assert _rows(tmp_path / "grades.csv")["ann"]["reason"] == reason
    assert cut("short") == "short"
    assert os.linesep not in cut(reason)


def test_what_grade_leaves_in_the_course_folder_is_git_ignored() -> None:
    """The working course (grading-<assignment>/) and the class's files (grades-<assignment>/) are ignored by git."""
    paths = ["grading-reconcile/gradebook.db", "grades-reconcile/grades.csv", "grades-postmortem/results/a.json"]
    done = subprocess.run(["git", "check-ignore", *paths], cwd=REPO, capture_output=True, text=True)
    assert done.stdout.split() == paths
