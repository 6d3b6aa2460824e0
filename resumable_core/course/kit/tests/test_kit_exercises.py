"""The exercises' visible checks: importable, and they fail an exercise left blank."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest

import resumable_core

from .run_notebook import KIT, error_of, execute, graded_cells, has_code

EXERCISES = sorted((KIT / "exercises").glob("*/*.ipynb"))
# Errors that mean the kit is broken (a missing module or name), not that an answer is wrong.
BROKEN_KIT = {"NameError", "ImportError", "ModuleNotFoundError"}


def test_every_module_imports() -> None:
    """Every module of the kit's library imports: nothing it needs was left out of the kit."""
    names = [m.name for m in pkgutil.walk_packages(resumable_core.__path__, "resumable_core.")]
    for name in names:
        if not name.endswith("__main__"):
            importlib.import_module(name)
    assert "resumable_core.course.checks" in names


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda p: p.stem)
def test_visible_checks_importable(exercise: Path) -> None:
    """Each exercise has its module of visible checks in the kit."""
    importlib.import_module(f"resumable_core.course.checks.{exercise.stem}")


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda p: p.stem)
def test_visible_checks_fail_a_blank_answer(exercise: Path, tmp_path: Path) -> None:
    """Run as released (answers blank): the setup runs clean and every visible check fails."""
    nb = execute(exercise, tmp_path, allow_errors=True)
    setup = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "setup"]
    assert setup and all(error_of(c) is None for c in setup), [error_of(c) for c in setup]
    visible = [c for c in graded_cells(nb) if has_code(c)]
    assert visible, "an exercise has visible checks"
    for cell in visible:
        error = error_of(cell)
        grade_id = cell.metadata["nbgrader"]["grade_id"]
        assert error is not None, f"{grade_id} passed with a blank answer"
        assert error.ename not in BROKEN_KIT, f"{grade_id}: {error.ename}: {error.evalue}"
        missing_check = error.ename == "AttributeError" and error.evalue.startswith("module ")
        assert not missing_check, f"{grade_id}: {error.evalue}"
