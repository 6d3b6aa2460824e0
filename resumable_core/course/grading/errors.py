"""The grading run's errors, beneath the course wing's :class:`~resumable_core.course.errors.CourseError`, and the student id rule.

``grade`` catches :class:`GradingError` at the top and prints its message, which names the fix; a
learner's own failure is never one of these (it becomes a reason in that student's row instead).
"""

from __future__ import annotations

import re

from ..errors import CourseError


class GradingError(CourseError):
    """The grading run itself cannot go on (not one student's problem); the message says what to fix."""


class StudentIdError(GradingError, ValueError):
    """A file or folder name that gives no usable student id; ``name`` is the name, ``reason`` why."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"no usable student id in {name!r}: {reason}; rename it with letters, digits and _ . @ - only")
        self.name, self.reason = name, reason


class UnknownCheckError(GradingError, ValueError):
    """A trusted test cell calls a ``check_*`` that :mod:`.recheck.plan` did not bind; ``.call`` names it, ``.reason`` why."""

    def __init__(self, call: str, reason: str) -> None:
        super().__init__(f"{call}: {reason}; add the check to its module or fix the test cell")
        self.call = call
        self.reason = reason


_SAFE_ID = re.compile(r"[A-Za-z0-9_.@-]+")
MAX_ID_LENGTH = 64


# here, not in a step: collect, the roster (lms) and the steps that name files check ids alike
def check_id(sid: str) -> str:
    """``sid`` itself if it is safe as a student id and as one file name; else :class:`StudentIdError` says why."""
    bad = sorted(set(_SAFE_ID.sub("", sid)))
    if not sid.strip("._"):
        raise StudentIdError(sid, "it is empty once spaces, dots and underscores at its ends are dropped")
    if "/" in sid or "\\" in sid:
        raise StudentIdError(sid, "it holds a path separator")
    if ".." in sid:
        raise StudentIdError(sid, "it holds '..'")
    if bad:
        raise StudentIdError(sid, "it holds " + " ".join(repr(c) for c in bad))
    if len(sid) > MAX_ID_LENGTH:
        raise StudentIdError(sid, f"it is {len(sid)} characters long, over {MAX_ID_LENGTH}")
    return sid
