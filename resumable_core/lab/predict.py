"""Predict, then run: compare a learner's written prediction with what really happened.

A lesson asks a question, the learner writes ``MY_PREDICTION = ...`` in a cell, a real crash
runs, and :func:`reveal` prints one short feedback block. It never raises, so a lesson still
runs top to bottom when the prediction is left blank.
"""

from __future__ import annotations

from typing import Any

from .i18n import _

__all__ = ["reveal"]


def _blank(guess: Any) -> bool:
    return guess is None or guess is Ellipsis or (isinstance(guess, str) and not guess.strip())


def _as_lists(value: Any) -> Any:
    """``value`` with every tuple and list in it a list: ``[1, 1]`` predicts ``(1, 1)``."""
    return [_as_lists(v) for v in value] if isinstance(value, list | tuple) else value


def _same(guess: Any, actual: Any) -> bool:
    """Equal (a list and a tuple by their items), or equal as text once case and surrounding blanks are ignored
    ("Killed" is "killed")."""
    try:
        if _as_lists(guess) == _as_lists(actual):
            return True
    except Exception:  # noqa: BLE001 - a learner's odd object must not stop the lesson
        return False
    if isinstance(guess, str) and not isinstance(actual, bool):
        return guess.strip().lower() == str(actual).strip().lower()
    return False


def reveal(guess: Any, actual: Any, *, why: str, hint: str | None = None) -> bool:
    """Print how ``guess`` compares with ``actual`` and ``why`` it is so; True when it was right.

    A blank guess (``None``, ``...`` or an empty string) gets the answer and the reason; a wrong
    one also gets ``hint``, when given, as a pointer for next time.
    """
    if _blank(guess):
        print(_("No prediction written: it is {actual}.").format(actual=repr(actual)), why, sep="\n")
        return False
    if _same(guess, actual):
        print(_("Right: {actual}.").format(actual=repr(actual)), why, sep="\n")
        return True
    print(_("You predicted {guess}; it is {actual}.").format(guess=repr(guess), actual=repr(actual)), why, sep="\n")
    if hint:
        print(_("Hint: {hint}").format(hint=hint))
    return False
