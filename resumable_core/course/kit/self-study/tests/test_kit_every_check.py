"""The self-study kit's extras: every check, the hidden ones included, and a worked solution after each answer.

`make check NB=... ALL=1` (``check --all``) runs each exercise's test cells whole, as grading
does. These tests prove the kit can: a blank exercise fails every test cell, hidden ones too, for
its answers' sake and not a missing module (your own answers set aside); and each worked solution,
put in its answer cell, passes every test. Your answers in `exercises/` are left alone: both run on a copy.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import nbformat
import pytest

from resumable_core.course import self_check
from resumable_core.course.self_check import error_of, graded_cells

KIT = Path(__file__).resolve().parents[1]
EXERCISES = sorted((KIT / "exercises").glob("*/*.ipynb"))
WORKED = "-worked"  # the id of an answer's worked solution: the answer cell's id and this
# Errors that mean the kit is broken (a missing module or name), not that an answer is wrong.
BROKEN_KIT = {"NameError", "ImportError", "ModuleNotFoundError"}
FENCED = re.compile(r"^(`{3,})python\n(.*?)\n\1$", re.M | re.S)


def answer_cells(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    """The cells the learner writes in (nbgrader's solution cells)."""
    return [cell for cell in nb.cells if cell.metadata.get("nbgrader", {}).get("solution")]


def answers_and_worked(nb: nbformat.NotebookNode) -> list[tuple[nbformat.NotebookNode, nbformat.NotebookNode]]:
    """Each answer cell with the cell after it, which should hold its worked solution."""
    cells = nb.cells
    return [
        (cell, cells[i + 1] if i + 1 < len(cells) else nbformat.v4.new_raw_cell(""))
        for i, cell in enumerate(cells)
        if cell.metadata.get("nbgrader", {}).get("solution")
    ]


def worked_code(cell: nbformat.NotebookNode) -> str:
    """The code of a folded worked solution (its fenced block)."""
    match = FENCED.search(cell.source)
    assert match, f"{cell.id}: no ```python block in the worked solution"
    return match.group(2)


def executed(exercise: Path, workdir: Path, answers: dict[str, str] | None = None) -> nbformat.NotebookNode:
    """The exercise run whole on a fresh kernel with every test cell whole (hidden ones in), on a copy."""
    nb = nbformat.read(exercise, as_version=4)
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if answers and grade_id in answers:
            cell.source = answers[grade_id]
    (workdir / "src").mkdir()
    copy = workdir / "src" / exercise.name
    nbformat.write(nb, copy)
    self_check.warm_matplotlib_cache()
    return self_check.execute(copy, workdir, allow_errors=True, tests=self_check.every_test(exercise))


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda p: p.stem)
def test_every_answer_is_followed_by_its_worked_solution_folded(exercise: Path) -> None:
    """After each answer cell, a markdown cell holds the instructor's solution in a closed <details>."""
    pairs = answers_and_worked(nbformat.read(exercise, as_version=4))
    assert pairs, f"{exercise.name} has no answer cells"
    for answer, worked in pairs:
        assert worked.cell_type == "markdown" and worked.id == answer.id + WORKED, (answer.id, worked.id)
        assert worked.source.startswith("<details>") and "<details open" not in worked.source
        assert "nbgrader" not in worked.metadata, "a worked solution is no graded cell"
        if answer.cell_type == "code":
            assert worked_code(worked).strip(), f"{worked.id} is empty"


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda p: p.stem)
def test_every_hidden_check_a_test_cell_calls_is_here(exercise: Path) -> None:
    """The hidden checks each exercise's whole test cells call are all in this kit."""
    tests = self_check.every_test(exercise)
    assert tests, f"{exercise.name}: no test cells in its source notebook"
    called = {
        (f"resumable_core.course.hidden.{module}", name)
        for source in tests.values()
        for module, alias in re.findall(r"from resumable_core\.course\.hidden import (\w+) as (\w+)", source)
        for name in re.findall(rf"\b{alias}\.(\w+)\(", source)
    }
    assert called, f"{exercise.name}: no test cell calls a hidden check"
    missing = sorted(f"{m}.{n}" for m, n in called if not callable(getattr(importlib.import_module(m), n, None)))
    assert missing == []


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda p: p.stem)
def test_a_blank_exercise_fails_every_test_hidden_ones_too(exercise: Path, tmp_path: Path) -> None:
    """Run as released with every test whole: every test cell fails, none for a module or name the kit lacks.

    Your answers in the exercise are set aside: each answer cell is put back as the release left it.
    """
    source = nbformat.read(self_check.source_notebook(exercise), as_version=4)
    released = {c.metadata["nbgrader"]["grade_id"]: self_check.released_answer(c) for c in answer_cells(source)}
    nb = executed(exercise, tmp_path, answers=released)
    tests = graded_cells(nb)
    assert tests and len(tests) == len(self_check.every_test(exercise))
    for cell in tests:
        error = error_of(cell)
        grade_id = cell.metadata["nbgrader"]["grade_id"]
        assert error is not None, f"{grade_id} passed with a blank answer"
        assert error.ename not in BROKEN_KIT, f"{grade_id}: {error.ename}: {error.evalue}"


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda p: p.stem)
def test_the_worked_solutions_pass_every_test(exercise: Path, tmp_path: Path) -> None:
    """Each worked solution put in its answer cell: every test cell passes, the hidden ones included."""
    pairs = answers_and_worked(nbformat.read(exercise, as_version=4))
    answers = {a.metadata["nbgrader"]["grade_id"]: worked_code(w) for a, w in pairs if a.cell_type == "code"}
    nb = executed(exercise, tmp_path, answers)
    failed = [
        f"{cell.metadata['nbgrader']['grade_id']}: {error.ename}: {error.evalue}"
        for cell in graded_cells(nb)
        if (error := error_of(cell)) is not None
    ]
    assert failed == []
