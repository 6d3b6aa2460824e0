"""Hangul in the kit's figures: a font with Hangul after the current one, so Korean labels never draw as boxes.

matplotlib (3.6 and later) falls back per glyph along ``rcParams["font.family"]`` when it is a list:
the current font draws what it has (Latin, digits, the arrows the figures use) and the first later
font that has a glyph draws it. :func:`use_hangul_fallback` appends the first installed font of
:data:`HANGUL_FONTS`; every figure the kit draws is made through
:func:`.render._quiet_pyplot_free_matplotlib`, which calls it, so this is the one place.

A font installed after matplotlib built its font cache (``apt-get install fonts-noto-cjk`` after a
first lesson) is not in that cache: the system's font files are searched once more and added, so
no cache has to be deleted. Without any Hangul font the family is left as it is; a Korean learner
then reads one line saying which package to install, instead of matplotlib's warning for every
missing glyph (:func:`_advise`).
"""

from __future__ import annotations

import functools
import warnings
from pathlib import Path
from typing import Any

from .i18n import DEFAULT, _, language

HANGUL_FONTS = ("Noto Sans CJK KR", "NanumGothic", "Noto Sans KR", "Apple SD Gothic Neo", "Malgun Gothic")
"""Fonts with Hangul, in the order they are preferred: Debian's fonts-noto-cjk, fonts-nanum, then macOS's and Windows'."""
_FONT_FILES = ("NotoSansCJK", "NanumGothic", "NotoSansKR")
"""How the files of the Debian packages' fonts are named (searched when the cache predates them)."""


def _installed(manager: Any) -> str | None:
    names = {font.name for font in manager.ttflist}
    return next((name for name in HANGUL_FONTS if name in names), None)


def hangul_font() -> str | None:
    """The first font of :data:`HANGUL_FONTS` matplotlib can use here, or None when none is installed."""
    from matplotlib import font_manager

    manager = font_manager.fontManager
    found = _installed(manager)
    if found is None:  # installed after the font cache was built: add the files, once
        for path in font_manager.findSystemFonts():
            if Path(path).name.startswith(_FONT_FILES):
                try:
                    manager.addfont(path)
                except (OSError, RuntimeError, ValueError):  # an unreadable font file is no font
                    continue
        found = _installed(manager)
    return found


def use_hangul_fallback() -> str | None:
    """Append a Hangul font to ``rcParams["font.family"]`` (once); the font, or None when none is installed."""
    import matplotlib

    font = hangul_font()
    if font is None:
        _advise()
        return None
    family = matplotlib.rcParams["font.family"]
    family = [family] if isinstance(family, str) else list(family)
    if font not in family:
        matplotlib.rcParams["font.family"] = [*family, font]
    return font


def _advise() -> None:
    """No Hangul font: in Korean, matplotlib's warning per missing glyph is silenced and one line says what to install."""
    if language() == DEFAULT:
        return
    # Every figure would warn once per glyph, filling a cell; one line of advice replaces them.
    warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from font", category=UserWarning)
    _say_once()


@functools.cache
def _say_once() -> None:
    print(
        _(
            "No font with Hangul is installed, so the figures' Korean shows as boxes: install fonts-noto-cjk "
            "(sudo apt-get install fonts-noto-cjk) or fonts-nanum, then run the cell again."
        )
    )
