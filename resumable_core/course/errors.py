"""The course wing's one error root: every error the course wing raises subclasses :class:`CourseError`.

As the core's :class:`~resumable_core.errors.ResumableError`, each carries its data as attributes. An
error keeps the builtin base its catchers know (``AssertionError`` for a failed check, which nbgrader
counts; ``RuntimeError``, ``ValueError``) as a second base. This module imports nothing of ours: the visible
checks (in the student kit) and what runs in a sandbox import it.
"""

from __future__ import annotations

from pathlib import Path


class CourseError(Exception):
    """Base class of every error the course wing raises (nbgrader glue, the checks, grading, the class)."""


class CourseConfigError(CourseError):
    """A folder that is no usable nbgrader course (:func:`.release.find_course`); ``.folder``, and ``.reason`` the fix."""

    def __init__(self, folder: Path, reason: str) -> None:
        super().__init__(reason)
        self.folder = folder
        self.reason = reason
