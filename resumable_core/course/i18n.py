"""The course wing's learner-facing messages that ship in the student kit: `check` and the visible checks.

The hidden checks (`course/hidden/i18n.py`) and the grading pipeline (`course/grading/i18n.py`:
the reasons and the feedback pages) keep their own catalogs: the student kit never holds their
messages, so it never holds their translations either.
"""

from __future__ import annotations

from pathlib import Path

from resumable_core.lab.i18n import Catalog, register

COURSE = register(
    Catalog(
        "course",
        Path(__file__).parent / "locale",
        ("course/checks/**/*.py", "course/self_check.py", "../solutions/*/*.ipynb"),
    )
)


def _(message: str) -> str:
    """The course wing's `message` in now's language."""
    return COURSE.gettext(message)


def say(message: str, /, **values: object) -> str:
    """A test cell's sentence in now's language, its `{fields}` filled from `values`.

    Test cells print `checks.say("A: passed")`: their code is the same in every edition (nbgrader's
    checksums), and the sentence comes from this catalog.
    """
    return COURSE.gettext(message).format(**values)
