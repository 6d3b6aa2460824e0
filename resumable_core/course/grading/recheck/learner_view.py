"""What of the course the learner's code may see while it is graded: never the hidden checks.

The learner's kernel and the learner's side of the re-check run with :func:`learner_library`, the
pristine library copy without ``course/hidden`` (the hidden checks and the level-1 answer key),
and the kernel gets :func:`kernel_notebook`, the test cells without their hidden blocks. The hidden
blocks are run by the re-check's checker process alone, which calls the learner's functions across
a process boundary (:mod:`.rpc`). Why: ``docs/architecture.md``, "The isolated re-check".
"""

from __future__ import annotations

import ast
import compileall
import copy
import os
import shutil
from pathlib import Path
from typing import Any

from ...notebook_cells import HIDDEN_BLOCK, is_test, without_hidden_tests

HIDDEN_PACKAGE = Path("resumable_core", "course", "hidden")
"""The package the learner's processes never see (relative to a library copy)."""
LEARNER_COPY = ".learner"
"""The folder, inside a full library copy, of its learner's view."""


LOOP_MODULE = Path("resumable_core", "loop.py")
"""The module of the one agent loop the library ships (``run_agent``; ``RunFolder.run`` and the lab call it)."""
REFUSING_LOOP = """def run_agent(*args, **kwargs):  # the graded view: this assignment's answer is the loop itself
    raise RuntimeError(
        "the library's run_agent is not available while this exercise is graded: write the loop yourself"
    )
"""


def without_the_loop(source: str) -> str:
    """``loop.py``'s source with ``run_agent``'s definition replaced by one that refuses: its code is not there."""
    tree = ast.parse(source)
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run_agent")
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
    lines = source.splitlines(keepends=True)
    return "".join([*lines[:first], REFUSING_LOOP, *lines[node.end_lineno or first :]])


def learner_library(full: Path, *, loopless: bool = False) -> Path:
    """The learner's view of the library copy ``full``: the same sources but ``course/hidden``, compiled afresh; made once.

    ``loopless``: ``run_agent`` in that view is one that refuses to run, and its code is in no
    source or compiled file there, so a ``resume`` that hands its work to the library's loop (or
    anything built on it) fails, whatever it does inside its own process. The re-check of an
    assignment whose answer is a loop (``Assignment.answer_is_a_loop``) runs on it. Safe when
    several grading workers ask at once: each builds its own and the first rename wins.
    """
    target = full / (f"{LEARNER_COPY}-loopless" if loopless else LEARNER_COPY)
    if target.is_dir():
        return target
    tmp = full / f"{target.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    hidden = (full / HIDDEN_PACKAGE).resolve()
    shutil.copytree(
        full / "resumable_core",
        tmp / "resumable_core",
        ignore=lambda folder, names: [
            n for n in names if n in ("__pycache__", LEARNER_COPY) or (Path(folder) / n).resolve() == hidden
        ],
    )
    if loopless:
        loop = tmp / LOOP_MODULE
        loop.write_text(without_the_loop(loop.read_text(encoding="utf-8")), encoding="utf-8")
    compileall.compile_dir(str(tmp), quiet=1)
    try:
        os.rename(tmp, target)
    except OSError:  # another worker made it first
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def hidden_lines(source: str) -> set[int]:
    """The 1-based line numbers of a test cell's source that are inside its hidden blocks (the kernel never runs them)."""
    lines: set[int] = set()
    for m in HIDDEN_BLOCK.finditer(source):
        first = source.count("\n", 0, m.start()) + 1
        last = source.count("\n", 0, max(m.start(), m.end() - 1)) + 1  # the END line (its newline is in the match)
        lines.update(range(first, last + 1))
    return lines


def kernel_notebook(nb: Any) -> Any:
    """A copy of the nbformat notebook ``nb`` whose test cells hold no hidden block (what the kernel runs)."""
    out = copy.deepcopy(nb)
    for cell in out.cells:
        if is_test(cell):
            cell.source = without_hidden_tests(cell.source)
    return out
