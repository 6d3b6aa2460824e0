"""The hidden checks' messages, in a catalog of their own that never ships in the student kit."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from resumable_core.lab.i18n import Catalog, register

from ..checks.support import HIDDEN_SENTENCE

HIDDEN = register(Catalog("hidden", Path(__file__).parent / "locale", ("course/hidden/**/*.py",)))
Check = TypeVar("Check", bound=Callable[..., None])


def _(message: str) -> str:
    """A hidden check's `message` in now's language."""
    return HIDDEN.gettext(message)


def fails_with(sentence: str) -> Callable[[Check], Check]:
    """Give a hidden check the one sentence its failure hands back: the rule broken and what to reread.

    The isolated re-check words a failed hidden check by this sentence alone (in the learner's
    language), never by what the check raised: that would carry the hidden scenario's data, the
    check's name or what the learner's code said while it ran. ``sentence``: an ``N_("...")`` with no
    placeholder. A check called from a hidden block without one is refused (:mod:`...grading.recheck.plan`).
    """

    def give(check: Check) -> Check:
        setattr(check, HIDDEN_SENTENCE, functools.partial(HIDDEN.gettext, sentence))
        return check

    return give
