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

from .. import notebooks
from . import reasons
from .collect import check_id
from .errors import GradingError
from .feedback import failure_message, write_feedback
from .gradebook import GradeValues, StudentGrades, assignment_grades
from .model import Submission
from .publish import Course
from .report import write_csv


def _graded_cells(path: Path) -> dict[str, Any]:
    """The autograded notebook's graded cells by grade_id ({} when it is not there or unreadable)."""
    try:
        nb = nbformat.read(str(path), as_version=4)
    except (OSError, NotJSONError):
        return {}
    return {str(notebooks.grade_id(c)): c for c in nb.cells if notebooks.is_grade(c)}


def _phrase(grade: GradeValues, cell: Any) -> str | None:
    """Why one cell is short of full marks, as the run's ``grades.csv`` words it; None when it is not."""
    if grade.needs_manual_grade:
        return reasons.needs_manual_grading(grade.name, grade.max_score)
    if grade.score >= grade.max_score:
        return None
    if grade.manual_score is None and cell is not None and notebooks.is_blank_answer(cell):
        return reasons.written_answer_blank(grade.name, grade.max_score)
    if grade.manual_score is not None and grade.auto_score is not None:
        return reasons.cell_lost(grade.name, grade.score, grade.max_score, reasons.manual_override(grade.auto_score))
    if grade.manual_score is not None:
        return reasons.cell_lost(grade.name, grade.score, grade.max_score, reasons.GRADED_BY_HAND)
    error = failure_message(cell) if cell is not None else None
    return reasons.cell_lost(grade.name, grade.score, grade.max_score, error[:120] if error else None)


def _student(course: Course, sub: StudentGrades, assignment: str, feedback: Path, several: bool) -> list[str]:
    """One submission's reason phrases, cell by cell in notebook order; writes its feedback page(s)."""
    phrases = []
    for nb in sub.notebooks:
        autograded = course.autograded(sub.student, assignment) / f"{nb.name}.ipynb"
        cells = _graded_cells(autograded)
        order = {gid: i for i, gid in enumerate(cells)}
        for grade in sorted(nb.grades, key=lambda g: (order.get(g.name, len(order)), g.name)):
            phrase = _phrase(grade, cells.get(grade.name))
            if phrase:
                phrases.append(phrase)
        if cells:
            try:
                page = feedback / f"{check_id(sub.student)}{f'-{nb.name}' if several else ''}.html"
                title = f"{assignment}: {nb.name}.ipynb, {sub.student}"
                write_feedback(autograded, nb.cells, page, title=title)
            except (OSError, ValueError) as e:  # ValueError: an id that is no safe file name, or a broken notebook
                phrases.append(reasons.feedback_not_written(e))
    return phrases


def course_submissions(course: Course, assignment: str, feedback: Path) -> list[Submission]:
    """Every student of the course gradebook with their score of ``assignment`` and why they lost points.

    Each graded student's feedback page goes into ``feedback`` (``<student>.html``).
    """
    if course.sqlite_file is not None and not course.sqlite_file.is_file():
        raise GradingError(f"the course gradebook {course.sqlite_file} does not exist; pass --course COURSE_DIR")
    found = assignment_grades(course.db_url, course.course_id, assignment)
    if found is None:
        raise GradingError(
            f"assignment {assignment!r} is not in the course gradebook {course.db_url}; "
            f"grade it first: python -m resumable_core grade PATH --assignment {assignment}"
        )
    out = []
    max_score, several = found.max_score, found.notebooks > 1
    for sub in found.students:
        if sub.score is None:
            out.append(Submission(sub.student, status="missing", problems=[reasons.NO_SUBMISSION], max_score=max_score))
            continue
        problems = _student(course, sub, assignment, feedback, several)
        out.append(Submission(sub.student, problems=problems, score=sub.score, max_score=max_score))
    return out


def write_course_grades(course: Course, assignment: str, folder: Path) -> list[Submission]:
    """``folder/grades.csv`` and ``folder/feedback-html/<student>.html`` from the course gradebook; the rows."""
    feedback = folder / "feedback-html"
    feedback.mkdir(parents=True, exist_ok=True)
    subs = course_submissions(course, assignment, feedback)
    write_csv(folder / "grades.csv", subs)
    return subs
