"""The learner-facing tools' language: gettext catalogs, English by default, Korean on request.

Each wing that speaks to a learner declares one `Catalog` (a gettext domain and the folder of its
`.po` files) and translates with its `gettext`. The `.po` files are the only source: a catalog
compiles its `.po` in memory with Babel on first use, so no binary `.mo` is committed or can go
stale. The language is read on every call, so a grader can switch it per student.

The language: `RESUMABLE_LANG` if set, else the edition of the kernel's notebook (a notebook in a
`ko/` folder, from the path Jupyter gives its kernel in `JPY_SESSION_NAME`, or else from an IPython kernel's working
folder, where Voila and nbconvert start it), else the kit's (a Korean kit's build writes `ko` into
:data:`KIT_LANGUAGE`, its notebooks sitting in no `ko/` folder), else gettext's own environment (`LANGUAGE`,
`LC_ALL`, `LC_MESSAGES`, `LANG`), else English. Message ids are the English text; a placeholder is a named
`str.format` field (`_("{count} emails sent").format(count=n)`), never positional.
"""

from __future__ import annotations

import gettext as _gettext
import io
import os
import re
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

#: Every language the kit speaks; the first is the default and the language of the message ids.
LANGUAGES = ("en", "ko")
DEFAULT = LANGUAGES[0]
#: The translations: every language but the default.
TRANSLATIONS = LANGUAGES[1:]
#: The setting that chooses the language, before the locale.
SETTING = "RESUMABLE_LANG"
_LOCALE_VARIABLES = ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG")
#: The kit's language, in a translated kit's own copy of the library (written by `course/student_kit.py`): its
#: notebooks, however started (JupyterLab, VS Code, nbclient), and its commands speak it unasked.
KIT_LANGUAGE = Path(__file__).with_name("kit-language")


def language() -> str:
    """The language to speak now: `RESUMABLE_LANG`, else the notebook's edition, else the kit's, else the locale's,
    else English."""
    chosen = os.environ.get(SETTING, "").strip()
    if chosen:
        return _known(chosen)
    edition = _edition() or _kit_language(KIT_LANGUAGE)
    if edition:
        return edition
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


def _edition() -> str | None:
    """The translation whose notebook this kernel runs, if any: a notebook in a `ko/` folder is the Korean edition's."""
    # Jupyter's server tells a kernel its notebook's path; Voila and nbconvert do not, but start the
    # kernel in the notebook's folder, so an IPython kernel looks at its working folder too.
    session = os.environ.get("JPY_SESSION_NAME", "")
    if session:
        folders = Path(session).parent.parts
        return next((code for code in TRANSLATIONS if code in folders), None)
    ipython = sys.modules.get("IPython")
    if ipython is not None and ipython.get_ipython() is not None:
        folder = Path.cwd().name
        return folder if folder in TRANSLATIONS else None
    return None


class LanguageError(ValueError):
    """A language asked for (``RESUMABLE_LANG``, or a ``lang`` given) that the kit does not speak; ``chosen`` is it."""

    def __init__(self, chosen: str) -> None:
        self.chosen = chosen
        super().__init__(f"{SETTING}={chosen!r} is not a language of this kit: set it to one of {', '.join(LANGUAGES)}")


@cache
def _kit_language(path: Path) -> str | None:
    """The translation the kit at ``path`` was built in, if any (read once: a kit does not change language)."""
    try:
        code = path.read_text(encoding="utf-8").strip()
    except OSError:  # the repository and the English kit have none
        return None
    return code if code in TRANSLATIONS else None


def _known(chosen: str) -> str:
    code = chosen.split(".")[0].split("_")[0].lower()
    if code not in LANGUAGES:
        raise LanguageError(chosen)
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
        """`message` in `lang` (now's language if None), its Korean particles chosen (:func:`particles`)."""
        return _particled(self.translations(lang).gettext(message))

    def ngettext(self, singular: str, plural: str, n: int, lang: str | None = None) -> str:
        """`singular` or `plural` for `n`, in `lang` (now's language if None), its Korean particles chosen."""
        return _particled(self.translations(lang).ngettext(singular, plural, n))


# -- Korean particles --------------------------------------------------------------------------

#: A particle written both ways, as a translation writes it after a placeholder: "{name}을(를)".
_PARTICLE = re.compile(r"을\(를\)|이\(가\)|은\(는\)|와\(과\)|\(으\)로")
#: Each form: (after a final consonant, after a vowel). (으)로 takes 로 after ㄹ too.
_FORMS = {
    "을(를)": ("을", "를"),
    "이(가)": ("이", "가"),
    "은(는)": ("은", "는"),
    "와(과)": ("과", "와"),
    "(으)로": ("으로", "로"),
}
#: How each digit ends read in Korean: 영, 일, 이, 삼, 사, 오, 육, 칠, 팔, 구.
_DIGITS = dict(
    zip("0123456789", ("final", "rieul", "vowel", "final", "vowel", "vowel", "final", "rieul", "rieul", "vowel"))
)
#: A Latin letter alone is read by its name: 엘 ends in ㄹ, 엠 and 엔 in another final, the rest in a vowel.
_LETTER_NAMES = {"l": "rieul", "m": "final", "n": "final"}


def _ending(text: str) -> str | None:
    """How ``text`` ends when read aloud: "vowel", "rieul" (a final ㄹ) or "final" (another final consonant).

    Hangul by its last syllable's final consonant; digits as Korean reads them (일, 이, 삼, ...); a
    Latin word or code name by a small rule of how Korean writes it: a vowel letter, r, or a
    consonant Korean ends with 으 (s, t, d: 리스트, 코드) is a vowel; l is ㄹ (send_email); m, n, k, p, b
    are a final (rerun, None, step); an e after a consonant is silent. None when it cannot be told.
    """
    word = text.rstrip("'\"`)]’”")
    if not word:
        return None
    last = word[-1]
    if "가" <= last <= "힣":
        final = (ord(last) - 0xAC00) % 28
        return "vowel" if final == 0 else "rieul" if final == 8 else "final"
    if last in _DIGITS:
        return _DIGITS[last]
    if not (last.isascii() and last.isalpha()):
        return None
    letters = word.lower()
    if len(word) == 1 or not word[-2].isalpha():
        return _LETTER_NAMES.get(letters[-1], "vowel")
    if letters[-1] == "e" and letters[-2] not in "aeiouy":
        letters = letters[:-1]  # a silent e: "None" is 논, "file" 파일
    last = letters[-1]
    if last == "l":
        return "rieul"
    if last in "mnkpb" or letters.endswith("ng"):
        return "final"
    return "vowel"


def particles(text: str) -> str:
    """``text`` with each two-way particle ("을(를)", "이(가)", "은(는)", "와(과)", "(으)로") chosen by the word
    before it: "send_email을", "'rerun'으로", "None은", "3을", "A를". One it cannot tell is left as written."""

    def choose(match: re.Match[str]) -> str:
        ending = _ending(text[: match.start()])
        after_final, after_vowel = _FORMS[match.group()]
        if ending is None:
            return match.group()
        takes_vowel_form = ending == "vowel" or (ending == "rieul" and match.group() == "(으)로")
        return after_vowel if takes_vowel_form else after_final

    return _PARTICLE.sub(choose, text)


class _Particled(str):
    """A translation whose particles follow placeholders: :meth:`format` fills them, then chooses the particles."""

    __slots__ = ()

    def format(self, *args: object, **kwargs: object) -> str:
        return particles(str.format(self, *args, **kwargs))


def _particled(text: str) -> str:
    """``text`` with the particles after its own words chosen; one with particles after a placeholder chooses
    them when it is formatted."""
    text = particles(text)
    return _Particled(text) if _PARTICLE.search(text) else text


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
