"""Run a notebook on a fresh kernel for the kit's tests, with the runner `make check NB=...` uses.

The runner is ``resumable_core.course.self_check`` (``python -m resumable_core check``): one copy,
shared by the check a learner runs, these tests and the instructor repository's lesson tests.
A notebook runs as a copy in a temporary folder: the file is not changed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from resumable_core.course import self_check
from resumable_core.course.self_check import (
    error_of,
    graded_cells,
    has_code,
    is_blank,
    kernel_env,
    warm_matplotlib_cache,
)

__all__ = [
    "CELL_TIMEOUT",
    "KIT",
    "error_of",
    "execute",
    "graded_cells",
    "has_code",
    "is_blank",
    "kernel_env",
    "problems",
    "warm_matplotlib_cache",
]

KIT = Path(__file__).resolve().parents[1]
CELL_TIMEOUT = 300  # seconds; a safety net against a hung kernel, not a speed requirement


def execute(notebook: Path, workdir: Path, *, allow_errors: bool = False) -> Any:
    """Execute a copy of ``notebook`` in ``workdir`` on a fresh python3 kernel; return the executed notebook."""
    return self_check.execute(notebook, workdir, timeout=CELL_TIMEOUT, allow_errors=allow_errors)


def first_line(cell: Any) -> str:
    """A cell's first non-empty line, to name it in a message."""
    lines = [line for line in cell.source.splitlines() if line.strip()]
    return lines[0] if lines else ""


def problems(nb: Any) -> list[str]:
    """Every error output and every stderr stream in an executed notebook, with its cell's first line."""
    found = []
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if out.output_type == "error":
                found.append(f"cell {i} ({first_line(cell)!r}): {out.ename}: {out.evalue}")
            elif out.output_type == "stream" and out.name == "stderr":
                found.append(f"cell {i} ({first_line(cell)!r}) wrote to stderr: {out.text[:500]!r}")
    return found
