"""``python -m resumable_core grades``: ``grades.csv`` and the feedback pages, rewritten from the course's gradebook.

After manual grading in formgrader the course gradebook holds the final scores; this writes them in
``grades.csv``'s columns, so it agrees with ``nbgrader export`` student for student, and renders
each student's feedback page again (:mod:`.feedback`: no test code, the manual score and comment
in). Every student of the course gradebook gets a row (no submission: ``missing``, 0). The reason
names each cell that lost points or still needs a human, from the gradebook and the course's
``autograded/`` notebooks; the grading run's own notes (re-check details, review flags) stay in
that run's ``grades.csv``. The gradebook is only read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
from nbformat.reader import NotJSONError
from nbgrader.api import Gradebook, MissingEntry

from .. import notebooks
from .collect import Submission, check_id
from .feedback import cell_grades, failure_message, write_feedback
from .publish import Course
from .report import write_csv
from .workspace import GradingError


def _graded_cells(path: Path) -> dict[str, Any]:
    """The autograded notebook's graded cells by grade_id ({} when it is not there or unreadable)."""
    try:
        nb = nbformat.read(str(path), as_version=4)
    except (OSError, NotJSONError):
        return {}
    return {str(notebooks.grade_id(c)): c for c in nb.cells if notebooks.is_grade(c)}


def _phrase(grade: Any, cell: Any) -> str | None:
    """Why one cell is short of full marks, as the run's ``grades.csv`` words it; None when it is not."""
    head = f"{grade.name} {grade.score:g}/{grade.max_score:g}"
    if grade.needs_manual_grade:
        return f"{grade.name} ?/{grade.max_score:g} (needs manual grading)"
    if grade.score >= grade.max_score:
        return None
    if grade.manual_score is not None and grade.auto_score is not None:
        return (
            f"{head} (manual score, from a grader or the isolated re-check; the autograder gave {grade.auto_score:g})"
        )
    if grade.manual_score is not None:
        return f"{head} (graded by hand)"
    error = failure_message(cell) if cell is not None else None
    return f"{head} ({error[:120]})" if error else head


def _student(course: Course, sub: Any, assignment: str, feedback: Path, several: bool) -> list[str]:
    """One submission's reason phrases, cell by cell in notebook order; writes its feedback page(s)."""
    phrases = []
    for nb in sub.notebooks:
        autograded = course.autograded(sub.student.id, assignment) / f"{nb.name}.ipynb"
        cells = _graded_cells(autograded)
        order = {gid: i for i, gid in enumerate(cells)}
        for grade in sorted(nb.grades, key=lambda g: (order.get(g.name, len(order)), g.name)):
            phrase = _phrase(grade, cells.get(grade.name))
            if phrase:
                phrases.append(phrase)
        if cells:
            try:
                page = feedback / f"{check_id(sub.student.id)}{f'-{nb.name}' if several else ''}.html"
                title = f"{assignment}: {nb.name}.ipynb, {sub.student.id}"
                write_feedback(autograded, cell_grades(nb), page, title=title)
            except (OSError, ValueError) as e:  # ValueError: an id that is no safe file name, or a broken notebook
                phrases.append(f"feedback HTML could not be written ({type(e).__name__})")
    return phrases


def course_submissions(course: Course, assignment: str, feedback: Path) -> list[Submission]:
    """Every student of the course gradebook with their score of ``assignment`` and why they lost points.

    Each graded student's feedback page goes into ``feedback`` (``<student>.html``).
    """
    if course.sqlite_file is not None and not course.sqlite_file.is_file():
        raise GradingError(f"the course gradebook {course.sqlite_file} does not exist; pass --course COURSE_DIR")
    out = []
    with Gradebook(course.db_url, course.course_id) as gb:
        try:
            found = gb.find_assignment(assignment)
        except MissingEntry:
            raise GradingError(
                f"assignment {assignment!r} is not in the course gradebook {course.db_url}; "
                f"grade it first: python -m resumable_core grade PATH --assignment {assignment}"
            ) from None
        max_score, several = found.max_score, len(found.notebooks) > 1
        for student in gb.students:
            try:
                sub = gb.find_submission(assignment, student.id)
            except MissingEntry:
                out.append(Submission(student.id, status="missing", problems=["no submission"], max_score=max_score))
                continue
            problems = _student(course, sub, assignment, feedback, several)
            out.append(Submission(student.id, problems=problems, score=sub.score, max_score=max_score))
    return out


def write_course_grades(course: Course, assignment: str, folder: Path) -> list[Submission]:
    """``folder/grades.csv`` and ``folder/feedback-html/<student>.html`` from the course gradebook; the rows."""
    feedback = folder / "feedback-html"
    feedback.mkdir(parents=True, exist_ok=True)
    subs = course_submissions(course, assignment, feedback)
    write_csv(folder / "grades.csv", subs)
    return subs
