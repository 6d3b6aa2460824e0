"""``python -m resumable_core grades``: ``grades.csv``, the feedback pages and the class files, from the course's gradebook.

A student's recorded result (:func:`record_results`) gives their reason while the gradebook holds the score
``grade`` recorded; once a human changed it, the reason is the gradebook's. docs/architecture.md ("Where grades go").
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from ... import notebooks
from ...release import Course
from .. import reasons
from ..errors import GradingError, check_id
from ..gradebook import AssignmentGrades, StudentGrades, assignment_grades
from ..model import StudentReport, Submission
from . import analysis, lms, similarity
from .feedback import FEEDBACK, failure_message, write_page
from .merge import write_json
from .publish import reached
from .report import cell_reasons, graded_cells, recheck_messages, write_csv

RESULTS = "results"
"""The class folder's per-student results, one ``<student>.json`` each (the latest ``grade`` of that student)."""


RECORDED = ("score", "status", "problems", "notes", "lms", "lms_id", "lms_name")
"""The fields of a student's :class:`Submission` their result keeps, beside the feedback pages' ``messages``."""


def record_results(folder: Path, subs: list[Submission], reports: Mapping[str, StudentReport]) -> None:
    """``folder/results/<student>.json`` for each of ``subs`` (one run's students), written whole, replacing the old."""
    results = folder / RESULTS
    results.mkdir(parents=True, exist_ok=True)
    for sub in subs:
        report = reports.get(sub.student)
        messages = {}  # {notebook: {grade_id: what the page says}} of the cells the re-check zeroed or kept
        if report is not None:
            names = set(report.isolated) | set(report.isolated_kept)
            messages = {n: recheck_messages(report.isolated.get(n) or {}, report.isolated_kept.get(n)) for n in names}
        record = {**{f: getattr(sub, f) for f in RECORDED}, "messages": messages}
        write_json(results / f"{check_id(sub.student)}.json", record)


def recorded_result(folder: Path, student: str) -> tuple[Submission, dict[str, dict[str, str]]] | None:
    """The recorded result of ``student`` in ``folder/results/`` and its pages' messages, or None (none, or not
    readable)."""
    try:
        data = json.loads((folder / RESULTS / f"{check_id(student)}.json").read_text())
        messages = data.pop("messages", {})
        if not set(RECORDED[:4]) <= set(data):
            return None
        return Submission(student, **data), messages
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def _student(
    course: Course,
    sub: StudentGrades,
    assignment: str,
    feedback: Path,
    several: bool,
    messages: Mapping[str, Mapping[str, str]] | None = None,
) -> list[str]:
    """One submission's reason phrases, in notebook order; writes its page(s), with a recorded result's ``messages``."""
    phrases = []
    for name, grades in sub.notebooks.items():
        autograded = course.autograded(sub.student, assignment) / f"{name}.ipynb"
        cells = graded_cells(autograded)
        phrases += cell_reasons(cells, grades)
        source = course.source(assignment) / f"{name}.ipynb"
        why = cells and write_page(
            feedback, autograded, source, sub.student, assignment, several, grades, (messages or {}).get(name)
        )
        if why:
            phrases.append(why)
    return phrases


def course_submissions(course: Course, found: AssignmentGrades, assignment: str, feedback: Path) -> list[Submission]:
    """Every student of ``found`` (the course gradebook's) with their score of ``assignment`` and why they lost points;
    each graded student's page goes into ``feedback``."""
    out = []
    max_score, several = found.max_score, found.notebooks > 1
    for sub in found.students:
        recorded = recorded_result(feedback.parent, sub.student)  # the class folder holds feedback-html/ and results/
        result, messages = recorded or (None, {})
        if sub.score is None:
            if result is not None and result.status in ("invalid", "failed", "missing"):  # refused or failed: why
                row = replace(result, score=0.0)
            else:
                row = Submission(sub.student, status="missing", problems=[reasons.NO_SUBMISSION])
        elif result is not None and abs(result.score - sub.score) < 1e-9:  # the score the run gave stands: its reason
            _student(course, sub, assignment, feedback, several, messages)
            row = replace(result, score=sub.score, status="empty" if result.status == "empty" else "graded")
        else:
            problems = _student(course, sub, assignment, feedback, several)
            row = Submission(sub.student, problems=problems, notes=result.notes if result else [], score=sub.score)
        waiting = any(g.score is None for nb in sub.notebooks.values() for g in nb.values())
        row = replace(row, max_score=max_score, provisional=waiting)
        # the LMS's ids of the student's latest run, for its import file
        out.append(replace(row, lms=result.lms, lms_id=result.lms_id, lms_name=result.lms_name) if result else row)
    return out


def course_outcomes(course: Course, assignment: str, found: AssignmentGrades | None) -> list[analysis.Outcome]:
    """Every graded student of ``found``'s result on each autograded check (a code cell with points), in notebook
    order."""
    out: list[analysis.Outcome] = []
    for sub in found.students if found else []:
        for name, grades in sub.notebooks.items():
            cells = graded_cells(course.autograded(sub.student, assignment) / f"{name}.ipynb")
            prefix = f"{name}:" if found and found.notebooks > 1 else ""
            for gid, cell in cells.items():
                grade = grades.get(gid)
                if grade is None or cell.cell_type != "code" or grade.score is None or not grade.max_score:
                    continue
                out.append(
                    analysis.Outcome(sub.student, prefix + gid, grade.score, grade.max_score, failure_message(cell))
                )
    return out


@dataclass(frozen=True)
class ClassFiles:
    """What :func:`write_class_files` wrote beside ``grades.csv``, for the end of a run to name."""

    analysis: Path
    similarity: Path | None
    """``similarity.html`` (None: the course holds no release of the assignment to compare against)."""
    pairs: int
    imports: lms.Imports


def _language(path: Path) -> str:
    """The language of the notebook at ``path`` (its metadata's), English when it cannot be read."""
    try:
        return notebooks.language(notebooks.read(path))
    except (OSError, ValueError):
        return "en"


def write_class_files(
    course: Course,
    assignment: str,
    folder: Path,
    subs: list[Submission],
    similar: float = similarity.THRESHOLD,
    provisional: bool = False,
    found: AssignmentGrades | None = None,
) -> ClassFiles:
    """Beside ``grades.csv`` in ``folder``, for ``subs``, from ``course`` (``found``: its gradebook's grades, when
    already read): the item analysis, the similarity report and the LMS's import files."""
    found = found or assignment_grades(course.db_url, course.course_id, assignment)
    analysis.write(folder, course_outcomes(course, assignment, found), assignment)
    releases = {p.stem: notebooks.read(p) for p in sorted(course.release(assignment).glob("*.ipynb"))}
    first = f"{min(releases, default=assignment)}.ipynb"  # the course's assignments have one notebook each
    answers = {s.student: course.autograded(s.student, assignment) / first for s in subs if s.to_grade}
    answers = {student: path for student, path in answers.items() if path.is_file()}
    pairs = similarity.class_similarity(folder, answers, releases, assignment, similar) if releases else None
    languages = {student: _language(path) for student, path in answers.items()}
    imports = lms.write_imports(folder, assignment, subs, provisional, languages)
    page = folder / "similarity.html" if pairs is not None else None
    return ClassFiles(folder / "item-analysis.html", page, len(pairs or []), imports)


def write_course_grades(
    course: Course,
    assignment: str,
    folder: Path,
    similar: float = similarity.THRESHOLD,
    provisional: bool = False,
) -> tuple[list[Submission], ClassFiles]:
    """``folder/grades.csv``, the pages and :func:`write_class_files`'s, from the course gradebook; the rows and files."""
    if course.sqlite_file is not None and not course.sqlite_file.is_file():
        raise GradingError(f"the course gradebook {course.sqlite_file} does not exist; pass --course COURSE_DIR")
    with reached(course):
        found = assignment_grades(course.db_url, course.course_id, assignment)  # read once, for every file
    if found is None:
        raise GradingError(
            f"assignment {assignment!r} is not in the course gradebook {course.shown_url}; "
            f"grade it first: python -m resumable_core grade PATH --assignment {assignment}"
        )
    feedback = folder / FEEDBACK
    feedback.mkdir(parents=True, exist_ok=True)
    subs = course_submissions(course, found, assignment, feedback)
    write_csv(folder / "grades.csv", subs)
    return subs, write_class_files(course, assignment, folder, subs, similar, provisional, found)
