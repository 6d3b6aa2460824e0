"""The hidden checks' messages, in a catalog of their own that never ships in the student kit."""

from __future__ import annotations

from pathlib import Path

from resumable_core.lab.i18n import Catalog, register

HIDDEN = register(Catalog("hidden", Path(__file__).parent / "locale", ("course/hidden/**/*.py",)))


def _(message: str) -> str:
    """A hidden check's `message` in now's language."""
    return HIDDEN.gettext(message)
