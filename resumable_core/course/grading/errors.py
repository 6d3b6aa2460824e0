"""The grading run's one error root: every error that stops a run, or refuses an input, subclasses it.

``grade`` catches :class:`GradingError` at the top and prints its message, which names the fix; a
learner's own failure is never one of these (it becomes a reason in that student's row instead).
"""

from __future__ import annotations


class GradingError(Exception):
    """The grading run itself cannot go on (not one student's problem); the message says what to fix."""


class StudentIdError(GradingError, ValueError):
    """A file or folder name that gives no usable student id; ``name`` is the name, ``reason`` why.

    :mod:`.collect` refuses that submission with this message in its row (``not graded: ...``); one
    that escapes stops the run like any :class:`GradingError`. Still a ``ValueError``, for the
    callers that catch that.
    """

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"no usable student id in {name!r}: {reason}; rename it with letters, digits and _ . @ - only")
        self.name, self.reason = name, reason


class UnknownCheckError(GradingError, ValueError):
    """A trusted test cell calls a ``check_*`` that :mod:`.recheck.plan` did not bind; ``.call`` names it.

    ``.reason`` says why. Still a ``ValueError``, for the callers that catch that.
    """

    def __init__(self, call: str, reason: str) -> None:
        super().__init__(f"{call}: {reason}; add the check to its module or fix the test cell")
        self.call = call
        self.reason = reason
