"""The lessons: each runs top to bottom on a fresh kernel, with this kit's library, cleanly."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

import resumable_core

from .run_notebook import KIT, execute, problems, warm_matplotlib_cache

LESSONS = sorted((KIT / "lessons").glob("[0-9][0-9]_*.ipynb"))


def test_tests_import_the_kits_library() -> None:
    """The tests import the resumable_core of this folder, not another installed copy."""
    assert Path(resumable_core.__file__).resolve().is_relative_to(KIT), resumable_core.__file__


def test_kernel_imports_the_kits_library(tmp_path: Path) -> None:
    """A fresh kernel, as the lessons get, imports the resumable_core of this folder too."""
    probe = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("import resumable_core\nresumable_core.__file__")]
    )
    (tmp_path / "src").mkdir()
    nbformat.write(probe, tmp_path / "src" / "probe.ipynb")
    nb = execute(tmp_path / "src" / "probe.ipynb", tmp_path)
    where = nb.cells[0].outputs[0]["data"]["text/plain"].strip("'\"")
    assert Path(where).resolve().is_relative_to(KIT), where


def test_every_lesson_is_here() -> None:
    """The kit holds the four lessons."""
    assert [p.name[:2] for p in LESSONS] == ["01", "02", "03", "04"]


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_lesson_runs_clean(lesson: Path, tmp_path: Path) -> None:
    """A lesson executes top to bottom on a fresh kernel with no error and nothing on stderr."""
    warm_matplotlib_cache()
    nb = execute(lesson, tmp_path)
    assert problems(nb) == []
    code = [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]
    assert all(c.execution_count is not None for c in code), "some code cells did not run"
