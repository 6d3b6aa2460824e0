"""Reading nbgrader's cell metadata, one way everywhere: nbgrader's own helpers.

Every module of the course wing that asks "is this a graded cell?", "which grade_id?" or "did the
instructor lock it?" asks here, so the answer cannot drift from what nbgrader itself decides.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat
from nbgrader.utils import compute_checksum, is_grade, is_locked, is_solution, is_task

__all__ = ["grade_id", "is_blank_answer", "is_grade", "is_locked", "is_solution", "is_task", "read", "source"]


def grade_id(cell: Any) -> str | None:
    """The cell's nbgrader ``grade_id``, or None for a cell nbgrader does not track."""
    value = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
    return value if isinstance(value, str) else None


def source(cell: Any) -> str:
    """The cell's source as one string (nbformat allows a list of lines on disk)."""
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def is_blank_answer(cell: Any) -> bool:
    """A written answer (a manually graded markdown answer cell) left empty or as released.

    As released means nbgrader's checksum of the cell still matches: the test nbgrader 0.9.6's
    autograde uses to score such a cell 0 with no human (it holds the release's stub). An emptied
    cell's checksum differs, so nbgrader would leave it waiting for a grader.
    """
    if cell.get("cell_type") != "markdown" or not (is_solution(cell) and is_grade(cell)):
        return False
    if not source(cell).strip():
        return True
    checksum = cell["metadata"]["nbgrader"].get("checksum")
    try:
        return bool(checksum) and checksum == compute_checksum(nbformat.from_dict(cell))
    except (KeyError, TypeError, ValueError, AttributeError):  # metadata of another shape: not the release's stub
        return False


def read(path: str | Path) -> nbformat.NotebookNode:
    """A notebook file as an nbformat v4 node (no validation: callers decide what to refuse)."""
    return nbformat.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))


def language(nb: Any) -> str:
    """The language a notebook's metadata names (``resumable.lang``: the Korean release's ``ko``), else English.

    The learner's file says it: only a language of the kit counts, anything else is English.
    """
    from resumable_core.lab import i18n

    meta = (nb.get("metadata") or {}).get("resumable") or {}
    lang = meta.get("lang") if isinstance(meta, dict) else None
    return lang if lang in i18n.LANGUAGES else i18n.DEFAULT
