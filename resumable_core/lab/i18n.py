"""The learner-facing tools' language: gettext catalogs, English by default, Korean on request.

Each wing that speaks to a learner declares one `Catalog` (a gettext domain and the folder of its
`.po` files) and translates with its `gettext`. The `.po` files are the only source: a catalog
compiles its `.po` in memory with Babel on first use, so no binary `.mo` is committed or can go
stale. The language is read on every call, so a grader can switch it per student.

The language: `RESUMABLE_LANG` if set, else the edition of the kernel's notebook (a notebook in a
`ko/` folder, from the path Jupyter gives its kernel in `JPY_SESSION_NAME`), else gettext's own environment (`LANGUAGE`, `LC_ALL`,
`LC_MESSAGES`, `LANG`), else English. Message ids are the English text; a placeholder is a named
`str.format` field (`_("{count} emails sent").format(count=n)`), never positional.
"""

from __future__ import annotations

import gettext as _gettext
import io
import os
from dataclasses import dataclass, field
from pathlib import Path

#: Every language the kit speaks; the first is the default and the language of the message ids.
LANGUAGES = ("en", "ko")
DEFAULT = LANGUAGES[0]
#: The translations: every language but the default.
TRANSLATIONS = LANGUAGES[1:]
#: The setting that chooses the language, before the locale.
SETTING = "RESUMABLE_LANG"
_LOCALE_VARIABLES = ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG")


def language() -> str:
    """The language to speak now: `RESUMABLE_LANG`, else the locale's, else English."""
    chosen = os.environ.get(SETTING, "").strip()
    if chosen:
        return _known(chosen)
    # Jupyter tells a kernel its notebook's path: a notebook in a `ko/` folder is the Korean edition's.
    folders = Path(os.environ.get("JPY_SESSION_NAME", "")).parent.parts
    for code in TRANSLATIONS:
        if code in folders:
            return code
    for variable in _LOCALE_VARIABLES:
        value = os.environ.get(variable, "")
        # LANGUAGE may list several ("ko:en"); a locale is "ko_KR.UTF-8"; "C" means none.
        for part in value.split(":"):
            code = part.split(".")[0].split("_")[0].split("@")[0].lower()
            if code in LANGUAGES:
                return code
        if value:
            break
    return DEFAULT


def _known(chosen: str) -> str:
    code = chosen.split(".")[0].split("_")[0].lower()
    if code not in LANGUAGES:
        raise ValueError(f"{SETTING}={chosen!r} is not a language of this kit: set it to one of {', '.join(LANGUAGES)}")
    return code


def N_(message: str) -> str:
    """Mark `message` for the catalogs without translating it yet (it is translated where shown)."""
    return message


@dataclass(frozen=True)
class Catalog:
    """One gettext domain: its messages in `folder/<lang>/LC_MESSAGES/<domain>.po`, and the source it is extracted from."""

    domain: str
    folder: Path
    #: The source files whose `_`, `N_` and `ngettext` calls make this catalog (globs relative to the package root).
    sources: tuple[str, ...]
    _compiled: dict[str, _gettext.NullTranslations] = field(default_factory=dict, compare=False, repr=False)

    def po_path(self, lang: str) -> Path:
        """The `.po` file of `lang`."""
        return self.folder / lang / "LC_MESSAGES" / f"{self.domain}.po"

    def translations(self, lang: str | None = None) -> _gettext.NullTranslations:
        """The compiled catalog of `lang` (now's language if None); English is the message ids themselves."""
        lang = language() if lang is None else _known(lang)
        if lang == DEFAULT:
            return _gettext.NullTranslations()
        if lang not in self._compiled:
            self._compiled[lang] = _compile(self.po_path(lang))
        return self._compiled[lang]

    def gettext(self, message: str, lang: str | None = None) -> str:
        """`message` in `lang` (now's language if None)."""
        return self.translations(lang).gettext(message)

    def ngettext(self, singular: str, plural: str, n: int, lang: str | None = None) -> str:
        """`singular` or `plural` for `n`, in `lang` (now's language if None)."""
        return self.translations(lang).ngettext(singular, plural, n)


def _compile(po: Path) -> _gettext.NullTranslations:
    # Babel reads the .po and writes a .mo in memory; the standard library's GNUTranslations reads it.
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    with po.open("rb") as f:
        catalog = read_po(f)
    buffer = io.BytesIO()
    write_mo(buffer, catalog, use_fuzzy=False)
    buffer.seek(0)
    return _gettext.GNUTranslations(buffer)


#: The lab wing's messages: predictions' reveals, formative feedback, the simulator page, the figures, the
#: commands' help; and `python -m resumable_core`'s own (`__main__.py`, which builds its parser with the lab's).
LAB = Catalog("lab", Path(__file__).parent / "locale", ("lab/**/*.py", "__main__.py"))
#: The lessons' and the simulator page's own sentences: `lab.say("...")` in their code cells.
LESSONS = Catalog("lessons", Path(__file__).parent / "locale", ("../lessons/*.ipynb", "../simulator/*.ipynb"))
#: Every catalog, for the tests and the catalog tool; a wing adds its own here.
CATALOGS: dict[str, Catalog] = {LAB.domain: LAB, LESSONS.domain: LESSONS}


def register(catalog: Catalog) -> Catalog:
    """Add `catalog` to `CATALOGS` (a wing's catalog module calls this once) and return it."""
    CATALOGS[catalog.domain] = catalog
    return catalog


def _(message: str) -> str:
    """The lab wing's `message` in now's language."""
    return LAB.gettext(message)


def say(message: str, /, **values: object) -> str:
    """A lesson's sentence in now's language, its `{fields}` filled from `values`.

    Lessons write `print(lab.say("{n} emails sent", n=len(sent)))`: the code cell is the same in
    every edition, and the sentence comes from the lessons' catalog. A value that is one of the
    core's texts (a scenario's task) is shown in now's language too (:func:`.core_words.core`).
    """
    from .core_words import core  # here: core_words imports this module

    shown = {k: core(v) if isinstance(v, str) else v for k, v in values.items()}
    return LESSONS.gettext(message).format(**shown)
