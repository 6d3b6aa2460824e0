"""The exercises' visible checks: importable, called as they are named, and they fail an exercise left blank.

These tests test the kit, never your answers (`make check NB=...` checks those). You write your
answers in `exercises/` itself, so an exercise you have started is not run here: the blank-answer
test skips it and says so, and nothing here fails because of what you wrote.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

import resumable_core

from .run_notebook import KIT, error_of, execute, graded_cells, has_code, is_blank

EXERCISES = sorted((KIT / "exercises").glob("*/*.ipynb"))
# Errors that mean the kit is broken (a missing module or name), not that an answer is wrong.
BROKEN_KIT = {"NameError", "ImportError", "ModuleNotFoundError"}


def answer_cells(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    """The code cells the learner writes in (nbgrader's solution cells)."""
    return [c for c in nb.cells if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")]


def checks_called(nb: nbformat.NotebookNode) -> set[str]:
    """The names of ``checks.<name>(...)`` the test cells call."""
    return {
        node.func.attr
        for cell in graded_cells(nb)
        for node in ast.walk(ast.parse(cell.source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "checks"
    }


def test_every_module_imports() -> None:
    """Every module of the kit's library imports: nothing it needs was left out of the kit."""
    names = [m.name for m in pkgutil.walk_packages(resumable_core.__path__, "resumable_core.")]
    for name in names:
        if not name.endswith("__main__"):
            importlib.import_module(name)
    assert "resumable_core.course.checks" in names
    assert "resumable_core.course.self_check" in names, "make check needs resumable_core.course.self_check"


def test_the_kits_command_line_offers_check() -> None:
    """`python -m resumable_core` runs in the kit (which has no grading) and offers `check`, what `make check` runs."""
    done = subprocess.run(
        [sys.executable, "-m", "resumable_core", "--help"], cwd=KIT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    commands = re.findall(r"^ {4}(\w+)", done.stdout, re.M)  # argparse's list of subcommands
    assert "check" in commands and "grade" not in commands, commands


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda p: p.stem)
def test_every_check_a_test_cell_calls_exists(exercise: Path) -> None:
    """Each exercise has its module of visible checks, holding every check its test cells call."""
    module = importlib.import_module(f"resumable_core.course.checks.{exercise.stem}")
    called = checks_called(nbformat.read(exercise, as_version=4))
    assert called, f"{exercise.name}: no test cell calls checks.<name>(...)"
    missing = sorted(name for name in called if not callable(getattr(module, name, None)))
    assert missing == [], f"{module.__name__} lacks {missing}"


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda p: p.stem)
def test_visible_checks_fail_a_blank_answer(exercise: Path, tmp_path: Path) -> None:
    """Run as released (answers blank): the setup runs clean and every visible check fails."""
    if not all(is_blank(cell) for cell in answer_cells(nbformat.read(exercise, as_version=4))):
        pytest.skip(f"{exercise.relative_to(KIT)} holds your answers; `make check NB=...` checks them")
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
