"""Run a notebook on a fresh kernel, and report an exercise's visible checks.

    python tests/run_notebook.py exercises/reconcile/reconcile.ipynb     # what `make check NB=...` runs

The notebook runs as a copy in a temporary folder: your file is not changed.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import nbformat

KIT = Path(__file__).resolve().parents[1]
CELL_TIMEOUT = 300  # seconds; a safety net against a hung kernel, not a speed requirement


def kernel_env(home: Path) -> dict[str, str]:
    """The kernel's environment: offline (the scripted Claude), quiet, no user profile."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RESUMABLE_", "ANTHROPIC_"))}
    env.update(
        JUPYTER_PLATFORM_DIRS="1",  # jupyter_core's own deprecation warning otherwise
        PYDEVD_DISABLE_FILE_VALIDATION="1",  # the debugger's "frozen modules" note otherwise
        IPYTHONDIR=str(home / "ipython"),  # no user profile, no startup files
    )
    env.pop("MPLBACKEND", None)  # the kernel's inline backend, as in JupyterLab
    return env


def warm_matplotlib_cache() -> None:
    """Build matplotlib's font cache here, so a notebook's first plot does not log about it."""
    import matplotlib.font_manager  # noqa: F401  (importing it builds the cache)


def execute(notebook: Path, workdir: Path, *, allow_errors: bool = False) -> Any:
    """Execute a copy of ``notebook`` in ``workdir`` on a fresh python3 kernel; return the executed notebook."""
    from nbclient import NotebookClient

    copy = workdir / notebook.name
    shutil.copy(notebook, copy)
    nb = nbformat.read(copy, as_version=4)
    client = NotebookClient(
        nb,
        kernel_name="python3",
        timeout=CELL_TIMEOUT,
        allow_errors=allow_errors,
        resources={"metadata": {"path": str(workdir)}},
    )
    client.execute(env=kernel_env(workdir), cwd=str(workdir))
    return nb


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


def graded_cells(nb: Any) -> list[Any]:
    """The exercise's test cells (nbgrader's ``grade`` cells that are not answers)."""
    return [
        cell
        for cell in nb.cells
        if cell.cell_type == "code"
        and cell.metadata.get("nbgrader", {}).get("grade")
        and not cell.metadata.get("nbgrader", {}).get("solution")
    ]


def has_code(cell: Any) -> bool:
    """Whether a cell holds more than comments (a hidden test's cell is only its comment here)."""
    return any(line.strip() and not line.lstrip().startswith("#") for line in cell.source.splitlines())


def error_of(cell: Any) -> Any | None:
    """The cell's error output, or None if it ran clean."""
    return next((out for out in cell.get("outputs", []) if out.output_type == "error"), None)


def report(nb: Any) -> tuple[list[str], bool]:
    """One line per visible check of an executed exercise, and whether all of them passed."""
    lines, all_passed = [], True
    for cell in graded_cells(nb):
        grade = cell.metadata["nbgrader"]
        name, points = grade.get("grade_id", "?"), grade.get("points", 0)
        if not has_code(cell):
            lines.append(f"  hidden   {name} ({points} pt): checked when your instructor grades")
            continue
        error = error_of(cell)
        if error is None:
            lines.append(f"  passed   {name} ({points} pt)")
        else:
            all_passed = False
            message = (str(error.evalue).splitlines() or [""])[0]
            lines.append(f"  FAILED   {name} ({points} pt): {error.ename}: {message}")
    return lines, all_passed


def main(argv: list[str]) -> int:
    """Run one exercise notebook's visible checks and print which pass."""
    if len(argv) != 1 or not Path(argv[0]).is_file():
        print("usage: python tests/run_notebook.py exercises/<name>/<name>.ipynb", file=sys.stderr)
        return 2
    notebook = Path(argv[0]).resolve()
    warm_matplotlib_cache()
    with tempfile.TemporaryDirectory(prefix="check-") as tmp:
        nb = execute(notebook, Path(tmp), allow_errors=True)
    lines, all_passed = report(nb)
    print(f"{notebook.relative_to(KIT) if notebook.is_relative_to(KIT) else notebook}:")
    print("\n".join(lines))
    print("all visible checks pass" if all_passed else "some visible checks fail: fix the answer cells above them")
    return 0 if all_passed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
