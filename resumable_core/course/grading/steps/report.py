"""Step 6 of grading: say why each student lost points, write their feedback pages, ``grades.csv``, the table and the plot."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import nbformat
from nbformat.reader import NotJSONError

from resumable_core.lab.columns import table

from ... import notebooks
from .. import csvfile, reasons
from ..gradebook import gradebook_url, notebook_grades
from ..model import CellGrade, StudentReport, Submission
from ..progress import cut
from .feedback import FEEDBACK, write_page

CSV_FIELDS = ("student_id", "score", "max_score", "status", "reason")


def cell_reasons(
    autograded_nb: Path, grades: Mapping[str, CellGrade], timeout: int, isolated: dict[str, str] | None = None
) -> list[str]:
    """One phrase per test cell that lost points: ``test_x 0/3 (AssertionError: ...)``.

    ``isolated``: {grade_id: reason} of the cells zeroed by the isolated re-check (worded by :mod:`.workers`).
    """
    try:
        nb = nbformat.read(str(autograded_nb), as_version=4)
    except (OSError, NotJSONError):  # nbgrader wrote no readable notebook: the failure is reported elsewhere
        return []
    out = []
    for cell in nb.cells:
        gid = notebooks.grade_id(cell)
        if not notebooks.is_grade(cell) or gid is None or gid not in grades:
            continue
        g = grades[gid]
        if g.score is None:  # waits for manual grading
            out.append(reasons.needs_manual_grading(gid, g.max_score))
        elif notebooks.is_blank_answer(cell) and g.score == 0:
            out.append(reasons.written_answer_blank(gid, g.max_score))
        elif isolated and gid in isolated:
            out.append(reasons.cell_lost(gid, g.score, g.max_score, isolated[gid]))
        elif g.score < g.max_score and cell.cell_type == "code":
            out.append(reasons.cell_lost(gid, g.score, g.max_score, reasons.cell_loss(cell, timeout)))
    return out


def write_student_feedback(
    sub: Submission,
    out: Path,
    assignment: str,
    name: str,
    grades: Mapping[str, CellGrade],
    messages: dict[str, str],
    several: bool = False,
) -> None:
    """``sub``'s page for notebook ``name`` in ``out/feedback-html/``; a note says why if it cannot be written."""
    autograded = out / "autograded" / sub.student / assignment / f"{name}.ipynb"
    source = out / "source" / assignment / f"{name}.ipynb"  # its ko/ edition gives a Korean page its text
    why = write_page(out / FEEDBACK, autograded, source, sub.student, assignment, several, grades, messages)
    if why:
        sub.notes.append(why)


def recheck_messages(isolated: dict[str, str], kept: dict[str, str] | None) -> dict[str, str]:
    """What the feedback page says of the cells the isolated re-check zeroed or could not confirm."""
    out = dict(isolated)  # a failed hidden check, a visible check that disagreed, a cell left for review: one wording
    for gid in (kept or {}).get("cells", "").split(", "):
        if gid:
            out[gid] = reasons.page_kept_for_review((kept or {}).get("why", ""))
    return out


def explain(
    sub: Submission, report: StudentReport, out: Path, assignment: str, timeout: int, several: bool = False
) -> None:
    """Add to ``sub`` why it failed, or which cells lost points and what the re-check kept or zeroed; write its feedback.

    ``several``: the assignment has several notebooks, so each page's name says which.
    """
    if not report.success:
        sub.status = "failed"
        sub.problems.append(reasons.classify_failure(report.log + "\n" + report.error, timeout))
        return
    for name in sub.files:
        autograded = out / "autograded" / sub.student / assignment / f"{name}.ipynb"
        isolated = report.isolated.get(name) or {}
        grades = notebook_grades(gradebook_url(out), assignment, sub.student, name)  # read once per notebook
        sub.problems += cell_reasons(autograded, grades, timeout, isolated)
        sub.provisional |= any(g.score is None for g in grades.values())  # a cell waits for a human
        kept = report.isolated_kept.get(name)
        if kept:
            sub.notes.append(reasons.kept_for_review(kept["why"][:200], kept["cells"]))
        write_student_feedback(sub, out, assignment, name, grades, recheck_messages(isolated, kept), several)


def write_csv(path: Path, subs: list[Submission]) -> None:
    """``grades.csv``: one row per student, sorted by id."""
    rows = [[s.student, f"{s.score:g}", f"{s.max_score:g}", s.status, s.reason] for s in subs]
    csvfile.write_csv(path, CSV_FIELDS, sorted(rows))


def format_table(subs: list[Submission]) -> str:
    """The summary table printed at the end, each reason cut to :data:`.progress.REASON_WIDTH` (grades.csv has it whole)."""
    rows = [(s.student, f"{s.score:g}", f"{s.max_score:g}", s.status, cut(s.reason)) for s in subs]
    return "\n".join(table(("student", "score", "max", "status", "reason"), rows))


def plot_scores(path: Path, subs: list[Submission], assignment: str) -> None:
    """A histogram of the scores (matplotlib, Agg)."""
    import matplotlib  # imported here: only the end of a run draws

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    max_score = max((s.max_score for s in subs), default=0) or 1
    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
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
    plt.close(fig)
