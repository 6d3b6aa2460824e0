"""Step 5 of grading: bring every worker's grades, graded notebooks and feedback into the working course."""

from __future__ import annotations

import logging
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nbgrader.api import Gradebook, MissingEntry

from .collect import Submission, check_id
from .workers import StudentReport
from .workspace import gradebook_url

log = logging.getLogger(__name__)

GradeRow = tuple[str, Any, Any, Any, bool]
"""(grade_id, auto_score, manual_score, extra_credit, needs_manual_grade)."""


@dataclass
class _NotebookRecord:
    name: str
    flagged: bool
    grades: list[GradeRow]
    comments: list[tuple[str, Any, Any]]
    """(grade_id, auto_comment, manual_comment)."""


@dataclass
class SubmissionRecord:
    """One student's submission read out of a gradebook as plain values (no session attached)."""

    student: str
    names: dict[str, Any]
    timestamp: Any
    notebooks: list[_NotebookRecord]


def read_submissions(source_db: str, assignment: str, students: list[str]) -> list[SubmissionRecord]:
    """The students' submissions of ``assignment`` in a gradebook, as plain values (students without one: none)."""
    found = []
    with Gradebook(source_db) as src:
        for s in students:
            try:
                sub = src.find_submission(assignment, s)
            except MissingEntry:  # nbgrader failed before it recorded the submission
                continue
            st = src.find_student(s)
            notebooks = [
                _NotebookRecord(
                    nb.name,
                    nb.flagged,
                    [(g.name, g.auto_score, g.manual_score, g.extra_credit, g.needs_manual_grade) for g in nb.grades],
                    [(c.name, c.auto_comment, c.manual_comment) for c in nb.comments],
                )
                for nb in sub.notebooks
            ]
            names = {"first_name": st.first_name, "last_name": st.last_name, "email": st.email}
            found.append(SubmissionRecord(s, names, sub.timestamp, notebooks))
    return found


def write_submissions(dst: Gradebook, assignment: str, records: list[SubmissionRecord]) -> None:
    """Write ``records`` into ``dst``: each submission's grades, comments and flags replace what it held.

    A student missing from ``dst`` is added with the record's names; one already there keeps its own
    (a course's roster). The caller commits: nbgrader's own calls here commit as they go.
    """
    with warnings.catch_warnings():
        # nbgrader's add_submission trips SQLAlchemy autoflush warnings; the rows are right
        warnings.simplefilter("ignore")
        for rec in records:
            try:
                dst.find_student(rec.student)
            except MissingEntry:
                dst.add_student(rec.student, **rec.names)
            dst.update_or_create_submission(assignment, rec.student, timestamp=rec.timestamp)
            for nb in rec.notebooks:
                dst.find_submission_notebook(nb.name, assignment, rec.student).flagged = nb.flagged
                for name, auto, manual, extra, needs in nb.grades:
                    g = dst.find_grade(name, nb.name, assignment, rec.student)
                    g.auto_score, g.manual_score, g.extra_credit, g.needs_manual_grade = auto, manual, extra, needs
                for name, auto, manual in nb.comments:
                    c = dst.find_comment(name, nb.name, assignment, rec.student)
                    c.auto_comment, c.manual_comment = auto, manual


def merge_gradebook(target_db: str, source_db: str, assignment: str, students: list[str]) -> None:
    """Copy the students' submissions (grades, comments, flags) from a worker's gradebook."""
    records = read_submissions(source_db, assignment, students)
    with Gradebook(target_db) as dst:
        write_submissions(dst, assignment, records)
        dst.db.commit()


def trusted_reports(out: Path, reports: dict[str, StudentReport]) -> list[str]:
    """Drop from ``reports`` (in place) every report the grading side cannot vouch for; return why, one line each.

    A report counts only for a student this run prepared (``out/submitted/<student>/``, written from
    the instructor's file names) and filed under its own id. Anything else (a forged or stray
    line, an id nobody submitted under) is ignored and logged, never fatal.
    """
    prepared = {d.name for d in (out / "submitted").iterdir()} if (out / "submitted").is_dir() else set()
    dropped = []
    for key, report in list(reports.items()):
        if key in prepared and report.student == key:
            continue
        dropped.append(f"ignored a grading report for unknown student {key!r} (from {report.worker!r})")
        del reports[key]
    for line in dropped:
        log.warning("%s", line)
    return dropped


def merge(out: Path, assignment: str, reports: dict[str, StudentReport]) -> None:
    """Every graded student's gradebook rows and ``autograded/`` from their worker into ``out``.

    Reports :func:`trusted_reports` cannot vouch for are dropped from ``reports`` first (and
    logged). nbgrader's own feedback is not copied: it shows the hidden tests;
    :mod:`.feedback` renders each student's page instead.
    """
    trusted_reports(out, reports)
    for student, report in sorted(reports.items()):
        worker = Path(report.worker)
        merge_gradebook(gradebook_url(out), gradebook_url(worker), assignment, [student])
        src_dir = worker / "autograded" / student
        if src_dir.is_dir():
            shutil.copytree(src_dir, out / "autograded" / student, dirs_exist_ok=True)


def set_scores(subs: list[Submission], out: Path, assignment: str) -> None:
    """Scores from the merged gradebook; students not graded score 0 of the assignment's max."""
    with Gradebook(gradebook_url(out)) as gb:
        max_score = gb.find_assignment(assignment).max_score
        for sub in subs:
            sub.max_score = max_score
            try:
                sub.score = gb.find_submission(assignment, sub.student).score
            except MissingEntry:
                sub.score = 0.0


def copy_feedback_html(out: Path, subs: list[Submission], assignment: str, n_notebooks: int) -> Path:
    """``feedback-html/<student>.html`` (``<student>-<notebook>.html`` for several notebooks); the folder.

    The pages are :mod:`.feedback`'s (written by :func:`.report.explain`); names come from the
    trusted student ids and the assignment's notebook names only.
    """
    folder = out / "feedback-html"
    folder.mkdir(exist_ok=True)
    for sub in subs:
        for name in sub.files:
            html = out / "feedback" / sub.student / assignment / f"{name}.html"
            if html.is_file():
                suffix = "" if n_notebooks == 1 else f"-{name}"
                shutil.copy2(html, folder / f"{check_id(sub.student)}{suffix}.html")
    return folder
