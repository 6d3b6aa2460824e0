"""Step 6 of grading: say why each student lost points, write their feedback pages, ``grades.csv``, the table and the plot."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import nbformat
from nbformat.reader import NotJSONError

from resumable_core.lab.columns import table

from ... import notebooks
from .. import csvfile, reasons
from ..gradebook import gradebook_url, notebook_grades
from ..model import CellGrade, NotebookGrades, StudentReport, Submission
from ..progress import cut
from .feedback import FEEDBACK, failure_message, write_page

CSV_FIELDS = ("student_id", "score", "max_score", "status", "reason")


def graded_cells(path: Path) -> dict[str, Any]:
    """The autograded notebook's graded cells by grade_id ({} when it is not there or unreadable)."""
    try:
        nb = nbformat.read(str(path), as_version=4)
    except (OSError, NotJSONError):
        return {}
    return {str(notebooks.grade_id(c)): c for c in nb.cells if notebooks.is_grade(c)}


def _phrase(gid: str, grade: CellGrade, cell: Any, why: str | None) -> str | None:
    if grade.score is None:
        return reasons.needs_manual_grading(gid, grade.max_score)
    if grade.score >= grade.max_score:
        return None
    if grade.manual_score is None and cell is not None and notebooks.is_blank_answer(cell):
        return reasons.written_answer_blank(gid, grade.max_score)
    if why is None and grade.manual_score is not None:
        why = reasons.GRADED_BY_HAND if grade.auto_score is None else reasons.manual_override(grade.auto_score)
    elif why is None and cell is not None:
        why = (failure_message(cell) or "")[:120] or None
    return reasons.cell_lost(gid, grade.score, grade.max_score, why)


def cell_reasons(
    cells: Mapping[str, Any],
    grades: NotebookGrades,
    timeout: int | None = None,
    isolated: Mapping[str, str] | None = None,
) -> list[str]:
    """One phrase per cell short of full marks, in notebook order: ``test_x 0/3 (AssertionError: ...)``; the one
    wording of ``grade``'s run and ``grades``' rewrite. ``cells``: :func:`graded_cells`.

    A run knows more than the gradebook: ``isolated`` ({grade_id: why the re-check zeroed it}) and, given
    the ``timeout``, what a code cell's outputs show went wrong.
    """
    order = {gid: i for i, gid in enumerate(cells)}
    out = []
    for gid in sorted(grades, key=lambda g: (order.get(g, len(order)), g)):
        cell = cells.get(gid)
        why = (isolated or {}).get(gid)
        if why is None and timeout is not None and cell is not None and cell.cell_type == "code":
            why = reasons.cell_loss(cell, timeout)
        if phrase := _phrase(gid, grades[gid], cell, why):
            out.append(phrase)
    return out


def recheck_messages(isolated: dict[str, str], kept: dict[str, str] | None) -> dict[str, str]:
    """What the feedback page says of the cells the isolated re-check zeroed or could not confirm."""
    out = dict(isolated)  # a failed hidden check, a visible check that disagreed, a cell left for review: one wording
    for gid in (kept or {}).get("cells", "").split(", "):
        if gid:
            out[gid] = reasons.page_kept_for_review((kept or {}).get("why", ""))
    return out


def explain(
    sub: Submission, report: StudentReport, out: Path, assignment: str, timeout: int, several: bool = False
) -> Submission:
    """``sub`` with why it failed, or which cells lost points and what the re-check kept or zeroed; its pages written
    (``several``: one per notebook, each named)."""
    if not report.success:
        why = reasons.classify_failure(report.log + "\n" + report.error, timeout)
        return replace(sub, status="failed", problems=[*sub.problems, why])
    problems, notes, provisional = list(sub.problems), list(sub.notes), sub.provisional
    for name in sub.files:
        autograded = out / "autograded" / sub.student / assignment / f"{name}.ipynb"
        isolated = report.isolated.get(name) or {}
        grades = notebook_grades(gradebook_url(out), assignment, sub.student, name)  # read once per notebook
        problems += cell_reasons(graded_cells(autograded), grades, timeout, isolated)
        provisional |= any(g.score is None for g in grades.values())  # a cell waits for a human
        kept = report.isolated_kept.get(name)
        if kept:
            notes.append(reasons.kept_for_review(kept["why"][:200], kept["cells"]))
        messages = recheck_messages(isolated, kept)
        source = out / "source" / assignment / f"{name}.ipynb"  # its ko/ edition gives a Korean page its text
        page = write_page(out / FEEDBACK, autograded, source, sub.student, assignment, several, grades, messages)
        notes += [page] if page else []
    return replace(sub, problems=problems, notes=notes, provisional=provisional)


def write_csv(path: Path, subs: list[Submission]) -> None:
    rows = [[s.student, f"{s.score:g}", f"{s.max_score:g}", s.status, s.reason] for s in subs]
    csvfile.write_csv(path, CSV_FIELDS, sorted(rows))


def format_table(subs: list[Submission]) -> str:
    """The summary table printed at the end, each reason cut to :data:`.progress.REASON_WIDTH` (grades.csv has it whole)."""
    rows = [(s.student, f"{s.score:g}", f"{s.max_score:g}", s.status, cut(s.reason)) for s in subs]
    return "\n".join(table(("student", "score", "max", "status", "reason"), rows))


def plot_scores(path: Path, subs: list[Submission], assignment: str) -> None:
    """A histogram of the scores."""
    from matplotlib.figure import Figure  # imported here: only the end of a run draws; no pyplot, no backend to set
    from matplotlib.ticker import MaxNLocator

    max_score = max((s.max_score for s in subs), default=0) or 1
    fig = Figure(figsize=(6, 3.5), dpi=100)
    ax = fig.subplots()
    bins = [x - 0.5 for x in range(int(max_score) + 2)]
    ax.hist([s.score for s in subs], bins=bins, color="#4C72B0", edgecolor="white")
    ax.set_xlabel(f"score (out of {max_score:g})")
    ax.set_ylabel("students")
    ax.set_title(f"{assignment}: {len(subs)} submissions")
    locator = ax.yaxis.get_major_locator()
    if isinstance(locator, MaxNLocator):  # the default AutoLocator: whole students only
        locator.set_params(integer=True)
    fig.tight_layout()
    fig.savefig(path)
