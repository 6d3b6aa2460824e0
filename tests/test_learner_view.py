"""What the learner's processes see while graded (resumable_core/course/grading/recheck/learner_view.py): no hidden
check, no hidden test code."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from resumable_core.course.assignments import ASSIGNMENTS
from resumable_core.course.grading.isolation import library_copy
from resumable_core.course.grading.recheck.learner_view import (
    HIDDEN_PACKAGE,
    kernel_notebook,
    learner_library,
)
from resumable_core.course.notebook_cells import without_hidden_tests

REPO = Path(__file__).resolve().parent.parent


def test_hidden_blocks_are_cut_and_the_visible_lines_kept():
    """Only the lines from BEGIN HIDDEN TESTS to END HIDDEN TESTS go; lines before and after stay."""
    src = "checks.a(x)\n### BEGIN HIDDEN TESTS\nhidden.b(x)\n### END HIDDEN TESTS\nprint('ok')"
    assert without_hidden_tests(src) == "checks.a(x)\nprint('ok')"
    assert without_hidden_tests("### BEGIN HIDDEN TESTS\nh()\n### END HIDDEN TESTS") == ""
    assert without_hidden_tests("no hidden block") == "no hidden block"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_the_kernel_gets_no_hidden_test_code(assignment):
    """Every source notebook, as the kernel gets it: no hidden block or hidden import; the source is untouched."""
    path = REPO / "solutions" / assignment / f"{assignment}.ipynb"
    nb = nbformat.read(str(path), as_version=4)
    before = nbformat.writes(nb)
    sent = kernel_notebook(nb)
    assert nbformat.writes(nb) == before
    text = "".join(c.source for c in sent.cells)
    assert "HIDDEN TESTS" not in text and "course.hidden" not in text
    assert len(sent.cells) == len(nb.cells)


@pytest.mark.slow
def test_the_learner_library_has_no_hidden_package(tmp_path):
    """The learner's view holds the library but course/hidden, and is made once per library copy."""
    full = library_copy(tmp_path / "lib")
    view = learner_library(full)
    assert (full / HIDDEN_PACKAGE / "reconcile.py").is_file()
    assert not (view / HIDDEN_PACKAGE).exists()
    assert (view / "resumable_core" / "course" / "checks" / "reconcile.py").is_file()
    assert learner_library(full) == view


@pytest.mark.slow
def test_the_view_for_a_loop_assignment_has_a_loop_that_refuses(tmp_path):
    """In the loopless view run_agent and everything built on it (RunFolder.run) refuse to run; the other keeps the loop."""
    import subprocess
    import sys

    full = library_copy(tmp_path / "lib")
    loopless = learner_library(full, loopless=True)
    assert loopless != learner_library(full)
    probe = (
        "import resumable_core as rc\n"
        "for run in (lambda: rc.run_agent('t'), lambda: rc.RunFolder.create('/tmp/probe-box').run('t')):\n"
        "    try:\n        run()\n    except RuntimeError as e:\n        print(e)\n"
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(loopless)}
    run = [sys.executable, "-c", probe]
    out = subprocess.run(run, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.stdout.count("write the loop yourself") == 2, out.stderr
    # the loop's code is in no file of the view: not in loop.py, not in a stale compiled copy of it
    for path in (loopless / "resumable_core").rglob("loop*"):
        assert b"after reconcile: " not in path.read_bytes(), path
