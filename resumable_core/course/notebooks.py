"""Reading nbgrader's cell metadata, one way everywhere: nbgrader's own helpers.

Every module of the course wing that asks "is this a graded cell?", "which grade_id?" or "did the
instructor lock it?" asks here, so the answer cannot drift from what nbgrader itself decides.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat
from nbgrader.utils import is_grade, is_locked, is_solution, is_task

__all__ = ["grade_id", "is_grade", "is_locked", "is_solution", "is_task", "read", "source"]


def grade_id(cell: Any) -> str | None:
    """The cell's nbgrader ``grade_id``, or None for a cell nbgrader does not track."""
    value = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
    return value if isinstance(value, str) else None


def source(cell: Any) -> str:
    """The cell's source as one string (nbformat allows a list of lines on disk)."""
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def read(path: str | Path) -> nbformat.NotebookNode:
    """A notebook file as an nbformat v4 node (no validation: callers decide what to refuse)."""
    return nbformat.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))
