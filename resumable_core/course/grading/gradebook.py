"""Every read and write of an nbgrader gradebook that grading makes; nothing else in ``grading/`` opens one.

Each function opens the gradebook it is given, does one thing and closes it; what it reads comes back as
plain values, never as nbgrader's rows, which need an open session.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nbgrader.api import Gradebook, InvalidEntry, MissingEntry
from sqlalchemy.exc import SQLAlchemyError

from .model import CellGrade, NotebookGrades

WRITE_ERRORS: tuple[type[Exception], ...] = (SQLAlchemyError, InvalidEntry)
"""What a gradebook refusing a write raises (the database's errors and nbgrader's own)."""
OPEN_ERRORS: tuple[type[Exception], ...] = (SQLAlchemyError, ImportError)
"""What opening a gradebook that cannot be reached raises: no server, a wrong password or database, no driver."""


def gradebook_url(root: Path) -> str:
    return f"sqlite:///{root / 'gradebook.db'}"


def _open(db_url: str, course_id: str | None = None) -> Gradebook:
    # None: nbgrader's default course id, as the working courses have
    return Gradebook(db_url) if course_id is None else Gradebook(db_url, course_id)


# --- one student's grades --------------------------------------------------------------------------


def passed_cells(db_url: str, notebook: str, assignment: str, student: str) -> list[str]:
    """The autograded test cells of one notebook that scored in the learner's kernel ([] without a submission)."""
    grades = notebook_grades(db_url, assignment, student, notebook)
    return sorted(gid for gid, g in grades.items() if (g.score or 0) > 0)


def zero_cells(
    db_url: str, cells: list[str], comments: dict[str, str], notebook: str, assignment: str, student: str
) -> None:
    """Score ``cells`` of one notebook 0 (``Grade.manual_score = 0``, nbgrader's override; ``auto_score`` is kept) and
    write ``comments`` ({answer cell grade_id: text}) as those cells' ``auto_comment``: formgrader has no comment for
    a test cell, so its reason goes on the answer it judges; a grader's ``manual_comment`` is left alone."""
    with _open(db_url) as gb:
        for gid in cells:
            gb.find_grade(gid, notebook, assignment, student).manual_score = 0.0
        for gid, text in comments.items():
            with suppress(MissingEntry):  # not an answer cell of the release: nothing to show it on
                gb.find_comment(gid, notebook, assignment, student).auto_comment = text
        gb.db.commit()


def score_blank_answers(db_url: str, cells: list[str], notebook: str, assignment: str, student: str) -> None:
    """Score the blank written answers ``cells`` 0 with no human waiting; a grader may still override it."""
    with _open(db_url) as gb:
        for gid in cells:
            grade = gb.find_grade(gid, notebook, assignment, student)
            if grade.manual_score is None:  # a human's score stands
                grade.auto_score, grade.needs_manual_grade = 0.0, False
        gb.db.commit()


def submission_score(db_url: str, assignment: str, student: str) -> tuple[float, float] | None:
    """(score, max score) of one student's submission, or None if the gradebook has none."""
    with _open(db_url) as gb:
        try:
            sub = gb.find_submission(assignment, student)
        except MissingEntry:
            return None
        return float(sub.score), float(sub.max_score)


def notebook_grades(db_url: str, assignment: str, student: str, notebook: str) -> NotebookGrades:
    """One student's notebook's grades (none if the gradebook has no such submission)."""
    with _open(db_url) as gb:
        try:
            nb = gb.find_submission_notebook(notebook, assignment, student)
        except MissingEntry:
            return {}
        return _notebook_grades(nb)


def assignment_scores(db_url: str, assignment: str, students: list[str]) -> tuple[float, dict[str, float]]:
    """The assignment's max score, and {student: score} of those of ``students`` with a submission."""
    with _open(db_url) as gb:
        max_score = float(gb.find_assignment(assignment).max_score)
        scores = {}
        for student in students:
            with suppress(MissingEntry):
                scores[student] = float(gb.find_submission(assignment, student).score)
        return max_score, scores


def export_csv(db_url: str, path: Path) -> None:
    """``nbgrader export``'s CSV of the gradebook at ``db_url``, written in this process (no nbgrader start-up)."""
    from nbgrader.plugins.export import CsvExportPlugin

    with _open(db_url) as gb:
        CsvExportPlugin(to=str(path)).export(gb)


# --- copying submissions between gradebooks (merge, publish) ---------------------------------------

GRADE_FIELDS = ("auto_score", "manual_score", "extra_credit", "needs_manual_grade")
COMMENT_FIELDS = ("auto_comment", "manual_comment")
STUDENT_FIELDS = ("first_name", "last_name", "email")


def _fields(row: Any, names: tuple[str, ...]) -> dict[str, Any]:
    return {name: getattr(row, name) for name in names}


@dataclass
class SubmissionRecord:
    """One student's submission read out of a gradebook as plain values (no session attached): per notebook its
    flag, and {cell: {field: value}} of its grades and comments."""

    student: str
    names: dict[str, Any]
    timestamp: Any
    notebooks: dict[str, tuple[bool, dict[str, dict[str, Any]], dict[str, dict[str, Any]]]]


def read_submissions(source_db: str, assignment: str, students: list[str]) -> list[SubmissionRecord]:
    """The students' submissions of ``assignment`` in a gradebook, as plain values (students without one: none)."""
    found = []
    with _open(source_db) as src:
        for s in students:
            try:
                sub = src.find_submission(assignment, s)
            except MissingEntry:  # nbgrader failed before it recorded the submission
                continue
            notebooks = {
                nb.name: (
                    nb.flagged,
                    {g.name: _fields(g, GRADE_FIELDS) for g in nb.grades},
                    {c.name: _fields(c, COMMENT_FIELDS) for c in nb.comments},
                )
                for nb in sub.notebooks
            }
            found.append(SubmissionRecord(s, _fields(src.find_student(s), STUDENT_FIELDS), sub.timestamp, notebooks))
    return found


def write_submissions(dst: Gradebook, assignment: str, records: list[SubmissionRecord]) -> None:
    """Write ``records`` into the open ``dst``, replacing each submission's grades, comments and flags; a student
    already there keeps their names (a roster's). The caller commits."""
    with warnings.catch_warnings():
        # nbgrader's add_submission trips SQLAlchemy autoflush warnings; the rows are right
        warnings.simplefilter("ignore")
        for rec in records:
            try:
                dst.find_student(rec.student)
            except MissingEntry:
                dst.add_student(rec.student, **rec.names)
            dst.update_or_create_submission(assignment, rec.student, timestamp=rec.timestamp)
            for nb, (flagged, grades, comments) in rec.notebooks.items():
                dst.find_submission_notebook(nb, assignment, rec.student).flagged = flagged
                for rows, find in ((grades, dst.find_grade), (comments, dst.find_comment)):
                    for cell, values in rows.items():
                        row = find(cell, nb, assignment, rec.student)
                        for name, value in values.items():
                            setattr(row, name, value)


def merge_gradebook(target_db: str, source_db: str, assignment: str, students: list[str]) -> None:
    records = read_submissions(source_db, assignment, students)
    with _open(target_db) as dst:
        write_submissions(dst, assignment, records)
        dst.db.commit()


@contextmanager
def one_transaction(gb: Gradebook) -> Iterator[None]:
    """Everything done with ``gb`` inside commits once at the end, or not at all: nbgrader's commits only flush.

    Not a copy of an SQLite file ``os.replace``-d: that fits one database only, and a running formgrader
    would go on saving the instructor's grades into the old unlinked file.
    """
    session = gb.db()
    session.commit = session.flush  # nbgrader's commits become flushes, on this session only
    try:
        yield
    except BaseException:
        del session.commit
        session.rollback()
        raise
    del session.commit
    session.commit()


def publish_submissions(
    db_url: str, course_id: str, assignment: str, students: list[str], records: list[SubmissionRecord]
) -> None:
    """Into the course's gradebook, in one transaction: every one of ``students`` on the roster, and ``records``;
    a student without a record loses the course's old submission. Raises one of :data:`WRITE_ERRORS`."""
    graded = {r.student for r in records}
    with _open(db_url, course_id) as gb, one_transaction(gb):
        for student in students:
            try:
                gb.find_student(student)
            except MissingEntry:
                gb.add_student(student)
            if student not in graded:
                with suppress(MissingEntry):
                    gb.remove_submission(assignment, student)
        write_submissions(gb, assignment, records)


# --- what a course has released (publish) ----------------------------------------------------------

ReleasedCells = dict[str, list[tuple[str, str, float]]]
"""{notebook: [(kind, cell name, points), ...]} of an assignment: its graded, answer and task cells."""


def released_cells(db_url: str, assignment: str, course_id: str | None = None) -> ReleasedCells | None:
    """{notebook: its graded, answer and task cells with points}: what a submission's rows mirror; None if not there."""
    with _open(db_url, course_id) as gb:
        try:
            notebooks = gb.find_assignment(assignment).notebooks
        except MissingEntry:
            return None
        return {
            nb.name: sorted(
                [("grade", c.name, float(c.max_score)) for c in nb.grade_cells]
                + [("solution", c.name, 0.0) for c in nb.solution_cells]
                + [("task", c.name, float(c.max_score)) for c in nb.task_cells]
            )
            for nb in notebooks
        }


# --- a course's grades of one assignment (course_grades) -------------------------------------------


@dataclass(frozen=True)
class StudentGrades:
    """One student of the course and their submission of the assignment (``score`` None: no submission)."""

    student: str
    score: float | None
    notebooks: dict[str, NotebookGrades]


@dataclass(frozen=True)
class AssignmentGrades:
    """An assignment in a course's gradebook: its max score, how many notebooks, every student's grades."""

    max_score: float
    notebooks: int
    students: list[StudentGrades]


def _notebook_grades(nb: Any) -> NotebookGrades:
    comments = {c.name: c.manual_comment or "" for c in nb.comments}
    return {
        g.name: CellGrade(
            None if g.needs_manual_grade or g.score is None else float(g.score),
            float(g.max_score),
            comments.get(g.name, ""),
            g.auto_score,
            g.manual_score,
        )
        for g in nb.grades
    }


def assignment_grades(db_url: str, course_id: str, assignment: str) -> AssignmentGrades | None:
    """Every student of the course's gradebook with their grades of ``assignment``; None if it is not there."""
    with _open(db_url, course_id) as gb:
        try:
            found = gb.find_assignment(assignment)
        except MissingEntry:
            return None
        students = []
        for student in gb.students:
            try:
                sub = gb.find_submission(assignment, student.id)
            except MissingEntry:
                students.append(StudentGrades(student.id, None, {}))
                continue
            notebooks = {nb.name: _notebook_grades(nb) for nb in sub.notebooks}
            students.append(StudentGrades(student.id, float(sub.score or 0.0), notebooks))
        return AssignmentGrades(float(found.max_score), len(found.notebooks), students)
