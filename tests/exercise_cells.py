"""An exercise's source notebook as the grading proofs read it: its answers, its graded cells, a learner's names.

Each ``tests/test_*_exercise.py`` shows that its notebook's solution passes every test cell and that
plausible wrong answers fail the cells their bugs break. They all take the solution's answer cell,
put a bug in it (:func:`edited`), define the learner's names after the setup cells, as the kernel
does (:meth:`Exercise.learner`), and run each cell's checks on them (:func:`failure`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from resumable_core.course import release as course
from resumable_core.course.checks.support import CheckFailed
from resumable_core.course.grading.recheck.plan import CheckCall, check_calls
from resumable_core.course.notebook_cells import graded_sources, setup_cells

SOLUTION_MARKERS = re.compile(r"\n *### (BEGIN|END) SOLUTION")


def text_of(cell: dict[str, Any]) -> str:
    """A notebook cell's source as one string (a file keeps it as a string or as a list of lines)."""
    source = cell["source"]
    return source if isinstance(source, str) else "".join(source)


def edited(source: str, *changes: tuple[str, str], what: str = "the solution") -> str:
    """``source`` with each (old, new) applied once; a change that no longer applies fails loudly."""
    for old, new in changes:
        assert source.count(old) == 1, f"{what} no longer contains {old!r}"
        source = source.replace(old, new)
    return source


def failure(calls: list[CheckCall], ns: dict[str, Any]) -> str | None:
    """Why the cell's checks fail on the learner's names, or None when they all pass."""
    try:
        for call in calls:
            call.run(ns)
    except CheckFailed as e:
        return e.reason
    return None


def require_fails(name: str, cell: str, graded: dict[str, tuple[int, list[CheckCall]]], ns: dict[str, Any]) -> None:
    """The wrong answer ``name`` (the learner's names ``ns``) fails the test cell ``cell`` of ``graded``; why, printed."""
    points, calls = graded[cell]
    why = failure(calls, ns)
    assert why is not None, f"{name} passed {cell} ({points} points)"
    print(f"{name}: {cell} fails: {why}")


@dataclass(frozen=True)
class Exercise:
    """One assignment's source notebook and the setup cells its learner's names are defined after."""

    name: str
    notebook: dict[str, Any]
    setup: list[str]

    @classmethod
    def of(cls, name: str, *, setup: Callable[[str | None], bool] = lambda grade_id: True) -> Exercise:
        """The assignment ``name``'s source notebook, with the setup cells whose grade_id ``setup`` keeps."""
        notebook = json.loads(course.notebook_path(name).read_text(encoding="utf-8"))
        return cls(name, notebook, [src for grade_id, src in setup_cells(notebook) if setup(grade_id)])

    def cell(self, grade_id: str) -> dict[str, Any]:
        """The notebook's cell ``grade_id``."""
        return next(c for c in self.notebook["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == grade_id)

    def solution(self, grade_id: str) -> str:
        """The answer cell ``grade_id`` with its solution markers taken out."""
        return SOLUTION_MARKERS.sub("", text_of(self.cell(grade_id)))

    def solutions(self) -> dict[str, str]:
        """Every answer cell, by grade_id, with its solution markers taken out."""
        return {
            c["metadata"]["nbgrader"]["grade_id"]: SOLUTION_MARKERS.sub("", text_of(c))
            for c in self.notebook["cells"]
            if c["metadata"].get("nbgrader", {}).get("solution")
        }

    def learner(self, *sources: str) -> dict[str, Any]:
        """The learner's names: the setup cells, then each of ``sources``, run in one namespace, as in the kernel."""
        ns: dict[str, Any] = {}
        for source in [*self.setup, *sources]:
            exec(source, ns)
        return ns

    def graded_cells(self) -> dict[str, tuple[int, list[CheckCall]]]:
        """Each test cell of the source notebook: its points and the checks it calls (hidden ones too)."""
        points = {c["grade_id"]: c["points"] for c in course.grade_cells(self.notebook) if c["kind"] == "auto"}
        return {
            grade_id: (points[grade_id], check_calls(self.name, src, self.setup))
            for grade_id, src in graded_sources(self.notebook).items()
        }
