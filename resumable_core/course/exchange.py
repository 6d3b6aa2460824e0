"""nbgrader's exchange for this course: releasing and collecting carry an assignment's translations.

``nbgrader_config.py`` ignores the translations' folders (``CourseDirectory.ignore`` holds ``ko``)
because ``generate_assignment`` and ``autograde`` copy from ``solutions/``, where
``solutions/<assignment>/ko/`` holds the solutions. The exchange copies from elsewhere:
``release_assignment`` from the release (``exercises/<assignment>/``, whose ``ko/<assignment>.ipynb``
is the Korean release that ``make release`` makes from the English one) and ``collect`` from the
students' submissions (their work, in either notebook). There those folders go along, so a class
may mix languages. ``nbgrader_config.py`` names these classes in ``ExchangeFactory``, so the command
line, formgrader and the class on JupyterHub release and collect alike.
"""

from __future__ import annotations

from typing import Any

from nbgrader.exchange.default import Exchange, ExchangeCollect, ExchangeReleaseAssignment

from ..lab.i18n import TRANSLATIONS


def exchange_ignore(ignore: list[str]) -> list[str]:
    """The course's ignore list as the exchange applies it: the same, but the translations' folders go along."""
    return [pattern for pattern in ignore if pattern not in TRANSLATIONS]


class _CarriesTranslations(Exchange):
    def do_copy(self, src: Any, dest: Any, log: Any = None) -> None:
        # nbgrader's own API sets the shared course directory's attributes for one call (temp_attrs) the same way
        kept = self.coursedir.ignore
        self.coursedir.ignore = exchange_ignore(kept)
        try:
            super().do_copy(src, dest, log)
        finally:
            self.coursedir.ignore = kept


class ReleaseAssignment(_CarriesTranslations, ExchangeReleaseAssignment):
    """``nbgrader release_assignment``: the release into the exchange, its translations' notebooks too."""


class Collect(_CarriesTranslations, ExchangeCollect):
    """``nbgrader collect``: the students' submissions into ``submitted/``, a translation's notebook too."""
