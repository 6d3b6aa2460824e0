"""The course's assignments, declared once: name, teaching order, notebook and check modules.

The release, the points table, the grading pipeline and the isolated re-check all read this
registry. A new assignment is its source notebook ``solutions/<name>/<name>.ipynb``, its visible
checks ``course/checks/<name>.py``, its hidden checks ``course/hidden/<name>.py``, and one entry
here. Importing this module imports no check (they pull in the lab wing); :meth:`Assignment.checks`
and :meth:`Assignment.hidden` do, on demand.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType


@dataclass(frozen=True)
class Assignment:
    """One graded notebook and the two modules of checks its test cells call."""

    name: str
    """The nbgrader assignment name, its folder under ``solutions/`` and ``exercises/``."""
    order: int
    """Its place in the teaching order (1 first)."""
    after_lesson: int
    """The last lesson it needs: the READMEs put it after that lesson, and its checks point to no later one."""
    answer_is_a_loop: bool = False
    """The learner writes an agent loop: while it is graded, the library's own loop refuses to run."""
    runs_agents: bool = True
    """Its checks run agents on the scripted Claude: the re-check's processes import the model's SDK as they start."""

    @property
    def notebook(self) -> str:
        """The notebook's file name inside the assignment's folder."""
        return f"{self.name}.ipynb"

    @property
    def checks_module(self) -> str:
        """The module of visible checks (ships to learners)."""
        return f"resumable_core.course.checks.{self.name}"

    @property
    def hidden_module(self) -> str:
        """The module of hidden checks (the instructor's only)."""
        return f"resumable_core.course.hidden.{self.name}"

    def checks(self) -> ModuleType:
        """The visible checks, imported."""
        return importlib.import_module(self.checks_module)

    def hidden(self) -> ModuleType:
        """The hidden checks, imported."""
        return importlib.import_module(self.hidden_module)


REGISTRY: dict[str, Assignment] = {
    a.name: a
    for a in (
        # Lesson 1's exercise, lesson 2's, then after lesson 4 (the postmortem's refund retries by lesson 4's
        # error taxonomy; the report agent resumes in its checklist's order) the postmortem and the whole path.
        Assignment("resume_skeleton", 1, after_lesson=1, runs_agents=False),
        Assignment("reconcile", 2, after_lesson=2),
        Assignment("postmortem", 3, after_lesson=4),
        Assignment("resume", 4, after_lesson=4, answer_is_a_loop=True),
    )
}
"""Every assignment, by name."""

ASSIGNMENTS: tuple[str, ...] = tuple(a.name for a in sorted(REGISTRY.values(), key=lambda a: a.order))
"""The assignment names in teaching order."""


def assignment(name: str) -> Assignment:
    """The registered assignment ``name``; a ValueError names the choices."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"no assignment {name!r}; choose one of {', '.join(ASSIGNMENTS)}") from None
