"""How long grading one notebook may take: counted from the release's cells, never the submission's (added cells
buy no time). Free of nbgrader and nbformat: the sandbox imports :data:`DEFAULT_TIMEOUT`."""

from __future__ import annotations

from pathlib import Path

from ... import notebook_cells

DEFAULT_TIMEOUT = 60
"""Seconds a cell may run before it is interrupted (nbgrader's ``Execute.timeout``, ``grade --timeout``)."""
STARTUP = 60.0
"""Seconds on top of the cells' for what is not a cell: starting the interpreter and the kernel."""


def wall_budget(n_release_code_cells: int, timeout: float) -> float:
    """Seconds one notebook's sandbox may run: ``timeout`` per code cell of the release, plus :data:`STARTUP`."""
    return float(timeout) * max(0, n_release_code_cells) + STARTUP


def code_cells(notebook: Path) -> int | None:
    """How many code cells the (trusted) notebook at ``notebook`` has; None if it cannot be read as one."""
    nb = notebook_cells.read(notebook)
    return None if nb is None else len(notebook_cells.code_cells(nb))


def recheck_budget(n_checked: int, timeout: float) -> float:
    """Seconds the isolated re-check of ``n_checked`` test cells may take: ``timeout`` per cell, one more, and :data:`STARTUP`."""
    return float(timeout) * (max(0, n_checked) + 1) + STARTUP


def graded_cells(notebook: Path) -> int:
    """How many graded test cells the (trusted) notebook at ``notebook`` has (0 if it cannot be read)."""
    nb = notebook_cells.read(notebook)
    return 0 if nb is None else sum(1 for c in notebook_cells.code_cells(nb) if notebook_cells.is_test(c))
