"""The cells of a notebook, read as plain JSON on both sides of the re-check's boundary (and by the release):
importing nbgrader, as ``course.notebooks`` does, costs seconds in each fresh process."""

from __future__ import annotations

import json
import re
from pathlib import Path

NOT_RUN = "GradingStopped"
"""The ``ename`` of the error output a cell gets when its process stopped before it ran (or while it ran)."""
KEY = "resumable_sandbox"
"""The executed notebook's metadata key of its progress record, ``{"done": n, "stopped": why | None}``."""


HIDDEN_BLOCK = re.compile(r"^[^\n]*BEGIN HIDDEN TESTS[^\n]*\n.*?^[^\n]*END HIDDEN TESTS[^\n]*(\n|$)", re.M | re.S)
"""A test cell's hidden block, its BEGIN and END lines included."""


def without_hidden_tests(source: str) -> str:
    """A test cell's source without its ``### BEGIN HIDDEN TESTS`` ... ``### END HIDDEN TESTS`` blocks."""
    return HIDDEN_BLOCK.sub("", source)


def info(cell: dict) -> dict:
    """The cell's nbgrader metadata ({} if none)."""
    return (cell.get("metadata") or {}).get("nbgrader") or {}


def is_test(cell: dict) -> bool:
    """Whether ``cell`` is an nbgrader test cell: a graded code cell that is not the learner's answer."""
    meta = info(cell)
    return cell.get("cell_type") == "code" and bool(meta.get("grade")) and not meta.get("solution")


def answer_of_tests(nb: dict) -> dict[str, str]:
    """{test cell grade_id: the grade_id of the answer (or task) cell nearest above it}; tests above every answer are left out."""
    out: dict[str, str] = {}
    answer = None
    for cell in nb.get("cells", []):
        meta = info(cell) if isinstance(cell, dict) else {}
        if meta.get("solution") or meta.get("task"):
            answer = meta.get("grade_id")
        elif is_test(cell) and answer and meta.get("grade_id"):
            out[str(meta["grade_id"])] = str(answer)
    return out


def read(path: Path) -> dict | None:
    """The notebook file at ``path`` as plain JSON, or None if it is not one (unreadable, not JSON, no cell list)."""
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return nb if isinstance(nb, dict) and isinstance(nb.get("cells"), list) else None


def code_cells(nb: dict) -> list[dict]:
    """The notebook's code cells, in order (a cell that is not a JSON object is none)."""
    return [c for c in nb.get("cells", []) if isinstance(c, dict) and c.get("cell_type") == "code"]


def source_of(cell: dict) -> str:
    """The cell's source as one string."""
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def setup_cells(nb: dict) -> list[tuple[str | None, str]]:
    """(grade_id, source) of the instructor's locked code cells before the first solution cell."""
    out = []
    for c in nb.get("cells", []):
        meta = info(c)
        if c.get("cell_type") != "code":
            continue
        if meta.get("solution"):
            break
        if meta.get("locked") and not meta.get("grade"):
            out.append((meta.get("grade_id"), source_of(c)))
    return out


def learner_cells(nb: dict) -> list[tuple[str, str, str | None]]:
    """(label, source, error the kernel showed or None) of every code cell the learner could write, but those the
    sandbox stopped: no test cell that scored ran after them."""
    out = []
    for n, c in enumerate((c for c in nb.get("cells", []) if c.get("cell_type") == "code"), start=1):
        meta = info(c)
        if not meta.get("solution") and (meta.get("grade") or meta.get("locked")):
            continue
        label = f"cell {meta['grade_id']!r}" if meta.get("grade_id") else f"added code cell {n}"
        errors = [o for o in c.get("outputs") or [] if o.get("output_type") == "error"]
        if any(o.get("ename") == NOT_RUN for o in errors):
            continue
        kernel = f"{errors[0].get('ename', 'Error')}: {errors[0].get('evalue', '')}" if errors else None
        out.append((label, source_of(c), kernel))
    return out


def graded_sources(nb: dict) -> dict[str, str]:
    """grade_id -> source of every graded code cell."""
    return {info(c)["grade_id"]: source_of(c) for c in nb.get("cells", []) if is_test(c)}
