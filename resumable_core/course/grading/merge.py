"""Step 5 of grading: bring every worker's grades, graded notebooks and feedback into the working course."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from . import reasons
from .collect import check_id
from .gradebook import assignment_scores, gradebook_url, merge_gradebook
from .model import StudentReport, Submission

log = logging.getLogger(__name__)


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
        dropped.append(reasons.unknown_report(key, report.worker))
        del reports[key]
    for line in dropped:
        log.warning("%s", line)
    return dropped


def merge(out: Path, assignment: str, reports: dict[str, StudentReport]) -> None:
    """Every graded student's gradebook rows and ``autograded/`` from their worker into ``out``.

    Reports :func:`trusted_reports` cannot vouch for are dropped from ``reports`` first (and
    logged). A failed report's gradebook rows are never merged: whatever nbgrader saved before it
    failed (a forged output can make it fail after saving) was never re-checked, so that student
    scores 0 with the failure as the reason. nbgrader's own feedback is not copied: it shows the
    hidden tests; :mod:`.feedback` renders each student's page instead.
    """
    trusted_reports(out, reports)
    for student, report in sorted(reports.items()):
        worker = Path(report.worker)
        if report.success:
            merge_gradebook(gradebook_url(out), gradebook_url(worker), assignment, [student])
        src_dir = worker / "autograded" / student
        if src_dir.is_dir():
            shutil.copytree(src_dir, out / "autograded" / student, dirs_exist_ok=True)


def set_scores(subs: list[Submission], out: Path, assignment: str) -> None:
    """Scores from the merged gradebook; students not graded score 0 of the assignment's max."""
    max_score, scores = assignment_scores(gradebook_url(out), assignment, [sub.student for sub in subs])
    for sub in subs:
        sub.max_score = max_score
        sub.score = scores.get(sub.student, 0.0)


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
