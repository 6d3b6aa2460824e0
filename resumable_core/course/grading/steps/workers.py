"""Step 4 of grading: autograde and re-check the students in ``--jobs`` worker processes, each in a copy of the
course; only each student's ``reports/<student>.json`` crosses back, validated. Each student is graded alone,
against a copy of the same gradebook, so the grades do not depend on ``--jobs``."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ... import nbgrader_cli, notebooks
from ...notebook_cells import answer_of_tests, read
from .. import reasons
from ..gradebook import gradebook_url, score_blank_answers
from ..gradebook import passed_cells as _passed_cells
from ..gradebook import zero_cells as _zero
from ..isolation import Backend, die_with_parent, sweep_left_behind
from ..model import Cells, StudentReport
from ..reasons import (
    GRADING_STOPPED,
    RECHECK_CRASHED,
    RECHECK_FAILED,
    UNREPORTED,
    hidden_check_failed,
    needs_review,
    visible_check_disagreed,
)
from ..recheck import driver as recheck
from . import execute
from .execute import SandboxedExecute
from .merge import write_json
from .workspace import Execution, write_course

WORKER_MODULE = "resumable_core.course.grading.steps.workers"
LOG_TAIL, ERROR_TAIL = 20000, 5000
"""How much of nbgrader's log and error a worker passes back, and of a cluster task's log (the cause is at the end)."""
WHY_WIDTH = 160
"""Characters of a re-check's reason kept in a cell's phrase (its first line)."""
REPORT_CAP = 200_000
"""Bytes: a larger report file is not read (a report is a few kB)."""
WORKER_EXITED = "grading worker exited with code"
"""How the report of a student whose worker died before writing it begins (no grade: ``--resume`` grades them again)."""
log = logging.getLogger(__name__)


# --- inside a worker process -------------------------------------------------------------------


def recheck_outcome(
    passed: list[str],
    report: Mapping[str, str | None],
    inconclusive: str | None,
    visible_failures: Collection[str] = (),
) -> tuple[dict[str, str], dict[str, str] | None]:
    """The cells of ``passed`` (they scored in the kernel) to zero, each with its reason, and the review note, or None.

    ``report``: the re-check's {grade_id: None (passed) | why it failed}. An inconclusive report, and a
    cell it leaves out, make "needs review": none keeps the kernel's score unconfirmed.
    """
    failed = {gid: report[gid] or RECHECK_FAILED for gid in passed if gid in report and report[gid] is not None}
    review = sorted(failed) if inconclusive else []
    if inconclusive:
        failed = dict.fromkeys(failed, needs_review(inconclusive))
    else:
        for gid, why in failed.items():
            short = (why.splitlines() or [RECHECK_FAILED])[0][:WHY_WIDTH]
            failed[gid] = visible_check_disagreed(short) if gid in visible_failures else hidden_check_failed(short)
    missing = [gid for gid in passed if gid not in report]
    failed.update(dict.fromkeys(missing, needs_review(UNREPORTED)))
    if not review and not missing:
        return failed, None
    return failed, {"why": inconclusive or UNREPORTED, "cells": ", ".join(sorted([*review, *missing]))}


def recheck_comments(failed: Mapping[str, str], source: dict) -> dict[str, str]:
    """{answer cell: its comment for formgrader}: each zeroed test cell's reason, on the answer cell above it (the source's order)."""
    answers = answer_of_tests(source)
    out: dict[str, list[str]] = {}
    for gid in sorted(failed):
        if gid in answers:
            out.setdefault(answers[gid], []).append(reasons.recheck_comment(gid, failed[gid]))
    return {answer: "\n".join(lines) for answer, lines in out.items()}


def recheck_isolated(
    root: Path, assignment: str, student: str, timeout: int, backend: Backend | None = None
) -> tuple[Cells, Cells]:
    """Re-run, outside the learner's kernel (on ``backend``), every test cell that scored; zero the ones that fail there.

    A learner can make the re-run inconclusive at will, so that zeroes its cells too; no score is raised.
    Returns (every zeroed cell with why, the inconclusive ones), as :class:`StudentReport` describes them.
    """
    db_url = gradebook_url(root)
    zeroed: Cells = {}
    kept: Cells = {}
    for nb_path in sorted((root / "autograded" / student / assignment).glob("*.ipynb")):
        name = nb_path.stem
        passed = _passed_cells(db_url, name, assignment, student)
        if not passed:
            continue
        source = root / "source" / assignment / f"{name}.ipynb"
        learner = execute.RUNNING.pop((student, assignment, name), None)  # None: ended early; a fresh one serves
        if source.is_file():
            report = recheck.run(
                nb_path,
                assignment,
                source=source,
                only=passed,
                timeout=timeout,
                backend=backend,
                learner=learner,
            )
        else:  # nothing trusted to re-check against: no cell keeps its kernel score
            if learner is not None:
                learner.stop()
            report = recheck.Report(inconclusive=f"no source notebook {source.name} in the working course")
        failed, review = recheck_outcome(passed, report, report.inconclusive, report.visible_failures)
        if not failed:
            continue
        if review is not None:
            kept[name] = review
        _zero(db_url, sorted(failed), recheck_comments(failed, read(source) or {}), name, assignment, student)
        zeroed[name] = failed
    return zeroed, kept


def score_blanks(root: Path, assignment: str, student: str) -> None:
    """Score 0 every written answer left empty or as released: nbgrader would leave an emptied one waiting for a human."""
    for nb_path in sorted((root / "autograded" / student / assignment).glob("*.ipynb")):
        try:
            cells = notebooks.read(nb_path).cells
        except (OSError, ValueError):  # nbgrader wrote no readable notebook: the failure is reported elsewhere
            continue
        blank = [str(notebooks.grade_id(c)) for c in cells if notebooks.is_blank_answer(c)]
        if blank:
            score_blank_answers(gradebook_url(root), blank, nb_path.stem, assignment, student)


def autograde_student(
    api: Any, root: Path, assignment: str, student: str, timeout: int, backend: Backend | None = None
) -> StudentReport:
    """Autograde and re-check one student with nbgrader's API."""
    started = time.monotonic()
    result = api.autograde(assignment, student, force=True, create=True)
    autograded = time.monotonic()
    report = StudentReport(
        student,
        str(root),
        success=bool(result.get("success")),
        log=(result.get("log") or "")[-LOG_TAIL:],
        error=(result.get("error") or "")[-ERROR_TAIL:],
    )
    try:
        if report.success:
            score_blanks(root, assignment, student)
            report.isolated, report.isolated_kept = recheck_isolated(root, assignment, student, timeout, backend)
    except Exception as e:  # one student's re-check failing never takes the worker's others
        log.exception("the re-check of %s failed", student)
        report.success = False  # unconfirmed: none of this student's kernel scores is merged
        report.error = f"{RECHECK_CRASHED}: {type(e).__name__}: {e}"[:ERROR_TAIL]
    finally:
        execute.stop_learners(student)  # the notebooks nothing re-checked
    ended = time.monotonic()
    report.timings = {"autograde": round(autograded - started, 2), "recheck": round(ended - autograded, 2)}
    report.seconds = round(ended - started, 2)
    return report


def backend_of(config: Any) -> Backend | None:
    """The backend and limits the course's config gives the kernel, for the re-check (None: nbgrader's own Execute)."""
    if "SandboxedExecute" not in config:
        return None
    return SandboxedExecute(config=config).backend()


def write_report(root: Path, report: StudentReport) -> None:
    """``reports/<student>.json``."""
    (root / "reports").mkdir(exist_ok=True)
    write_json(root / "reports" / f"{report.student}.json", asdict(report))


def worker_main(argv: list[str]) -> int:
    """``python -m resumable_core.course.grading.steps.workers ROOT ASSIGNMENT STUDENT...``: one report file per student."""
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config.loader import PyFileConfigLoader

    root, assignment, students = Path(argv[0]), argv[1], argv[2:]
    os.chdir(root)
    config = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
    api = NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)
    for student in students:
        started = time.monotonic()
        try:
            report = autograde_student(api, root, assignment, student, int(config.Execute.timeout), backend_of(config))
        except Exception as e:  # the next student is graded all the same
            log.exception("grading %s failed", student)
            error = f"{GRADING_STOPPED}: {type(e).__name__}: {e}"[:ERROR_TAIL]
            report = StudentReport(student, str(root), success=False, error=error)
            report.seconds = round(time.monotonic() - started, 2)
        try:
            write_report(root, report)
        except OSError:  # a full disk: that student has no report (failed), the next is graded all the same
            log.exception("the report of %s could not be written", student)
    return 0


# --- in the grading process --------------------------------------------------------------------


def _copy_course(main: Path, worker: Path, timeout: int, students: list[str], execution: Execution | None) -> None:
    write_course(worker, timeout, execution)
    shutil.copytree(main / "source", worker / "source")
    shutil.copytree(main / "release", worker / "release")
    shutil.copy2(main / "gradebook.db", worker / "gradebook.db")
    for s in students:
        shutil.copytree(main / "submitted" / s, worker / "submitted" / s)


def start_worker(root: Path, assignment: str, students: list[str]) -> subprocess.Popen[bytes]:
    """The worker grading ``students`` in the course copy ``root``, logging to ``root/worker.log``; in a session of
    its own (a Ctrl-C reaches only its starter, which stops it), dying with its starter."""
    parent = os.getpid()
    cmd = [sys.executable, "-m", WORKER_MODULE, str(root), assignment, *students]
    with open(root / "worker.log", "wb") as worker_log:
        return subprocess.Popen(
            cmd,
            cwd=root,
            env=nbgrader_cli.env(),
            stdout=worker_log,
            stderr=worker_log,
            start_new_session=True,
            preexec_fn=lambda: die_with_parent(parent),  # only prctl runs there between fork and exec
        )


def read_report(path: Path, student: str, worker: Path) -> StudentReport | None:
    """The report in ``path`` if it is a valid one of ``student`` made in ``worker``; else None (and logged)."""
    try:
        if path.stat().st_size > REPORT_CAP:
            raise ValueError(f"over {REPORT_CAP} bytes")
        report = StudentReport(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError) as e:
        log.warning("ignored the report %s: %s", path, e)
        return None
    if report.student != student or Path(report.worker) != worker:
        log.warning("ignored the report %s: it names student %r of %s", path, report.student, report.worker)
        return None
    return report


def _collect_reports(
    worker: Path, share: list[str], results: dict[str, StudentReport], progress: Callable[[StudentReport], None]
) -> None:
    """Read the reports of ``share`` that appeared since the last call (files of any other id are never read)."""
    for s in share:
        path = worker / "reports" / f"{s}.json"
        if s not in results and path.is_file():
            report = read_report(path, s, worker)
            if report is not None:
                results[s] = report
                progress(report)


def run_workers(
    main: Path,
    assignment: str,
    students: list[str],
    jobs: int,
    timeout: int,
    progress: Callable[[StudentReport], None],
    execution: Execution | None = None,
) -> dict[str, StudentReport]:
    """Grade ``students`` in ``jobs`` worker course copies; each one's report. Interrupted, every worker is killed
    first, so no student it was grading gets a report and ``--resume`` grades them again."""
    jobs = max(1, min(jobs, len(students) or 1))
    results: dict[str, StudentReport] = {}
    running: dict[Path, tuple[list[str], subprocess.Popen[bytes]]] = {}
    try:
        for i in range(jobs):
            worker, share = main / "workers" / f"w{i}", students[i::jobs]
            if not share:
                continue
            _copy_course(main, worker, timeout, share, execution)
            running[worker] = (share, start_worker(worker, assignment, share))
        while running:
            for worker, (share, proc) in list(running.items()):
                ended = proc.poll() is not None
                _collect_reports(worker, share, results, progress)
                if ended:
                    del running[worker]
                    sweep_left_behind()  # what it left if it died mid-student
                    for s in share:
                        if s not in results:
                            error = f"{WORKER_EXITED} {proc.returncode} (its log: {worker / 'worker.log'})"
                            results[s] = StudentReport(s, str(worker), success=False, error=error)
                            progress(results[s])
            time.sleep(0.2)
    finally:  # interrupted: nothing of the run grades on (each worker's sandboxes die with it)
        for _, proc in running.values():
            proc.kill()
            proc.wait()
        if running:
            sweep_left_behind()
    return results


if __name__ == "__main__":
    # SIGINT ends a worker process as SIGTERM does, with no report: nbgrader's bare ``except`` would record
    # a KeyboardInterrupt as that student's failure, a result --resume would keep
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.exit(worker_main(sys.argv[1:]))
