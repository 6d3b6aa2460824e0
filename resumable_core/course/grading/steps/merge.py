"""Step 5 of grading: merge each worker's grades and graded notebooks into the working course as a report arrives,
then mark the student done (``done/<student>.json``, written last): what ``--resume`` skips."""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import asdict, replace
from pathlib import Path

from .. import reasons
from ..gradebook import assignment_scores, gradebook_url, merge_gradebook, submission_score
from ..model import StudentReport, Submission
from .workspace import tree_digest

DONE = "done"
"""The working course's folder of finished students' records."""

log = logging.getLogger(__name__)


def write_json(path: Path, data: object) -> None:
    """The one writer of a run's JSON records (a report, a student done, a result): whole or not at all."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def trusted_reports(out: Path, reports: dict[str, StudentReport]) -> dict[str, StudentReport]:
    """``reports`` less (logged, never fatal) every one not of a student this run prepared, filed under its id."""
    prepared = prepared_students(out)
    for key, report in reports.items():
        if key not in prepared or report.student != key:
            log.warning("%s", reasons.unknown_report(key, report.worker))
    return {key: report for key, report in reports.items() if key in prepared and report.student == key}


def prepared_students(out: Path) -> set[str]:
    """The students this run prepared (``out/submitted/<student>/``, named from the instructor's files)."""
    return {d.name for d in (out / "submitted").iterdir()} if (out / "submitted").is_dir() else set()


def merge_student(out: Path, assignment: str, report: StudentReport, prepared: set[str]) -> bool:
    """Merge one student's gradebook rows and ``autograded/`` from their worker into ``out``, then mark them done.

    A report of no prepared student is ignored (False). A failed report's rows are never merged: they were
    never re-checked. nbgrader's own feedback is not copied: it shows the hidden tests.
    """
    if report.student not in prepared:
        log.warning("%s", reasons.unknown_report(report.student, report.worker))
        return False
    student, worker = report.student, Path(report.worker)
    if report.success:
        merge_gradebook(gradebook_url(out), gradebook_url(worker), assignment, [student])
    src_dir = worker / "autograded" / student
    if src_dir.is_dir():
        shutil.rmtree(out / "autograded" / student, ignore_errors=True)
        shutil.copytree(src_dir, out / "autograded" / student)
    (out / DONE).mkdir(exist_ok=True)
    digest = tree_digest(out / "submitted" / student)  # the bytes the grade was made from
    write_json(out / DONE / f"{student}.json", {"digest": digest, "report": asdict(report)})
    return True


def finished(out: Path, assignment: str, students: list[str]) -> dict[str, StudentReport]:
    """The reports of ``students`` an interrupted run in ``out`` finished, from the same submission: what ``--resume``
    skips (a successful one's submission must be in the working gradebook)."""
    found = {}
    for student in students:
        path = out / DONE / f"{student}.json"
        try:
            record = json.loads(path.read_text())
            report = StudentReport(**record["report"])
            same = record["digest"] == tree_digest(out / "submitted" / student)
        except (OSError, ValueError, TypeError, KeyError):
            continue
        if report.student != student or not same:
            continue
        if report.success and submission_score(gradebook_url(out), assignment, student) is None:
            continue
        found[student] = report
    return found


def scored(subs: list[Submission], out: Path, assignment: str) -> list[Submission]:
    """``subs`` with their scores from the merged gradebook; students not graded score 0 of the assignment's max."""
    max_score, scores = assignment_scores(gradebook_url(out), assignment, [sub.student for sub in subs])
    return [replace(sub, max_score=max_score, score=scores.get(sub.student, 0.0)) for sub in subs]
