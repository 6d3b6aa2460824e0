"""Text that lines up in a terminal: columns padded, and lines wrapped, by display width.

Python's ``str.ljust`` and f-string widths count characters, but a Hangul syllable takes two
columns of a terminal, so a Korean table padded that way sits off. Every table a learner reads
in text (the crash matrix, ``crash_test``'s, ``check``'s report, the commands' help) pads here,
with `wcwidth`, which measures what a terminal shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType

__all__ = ["pad", "table", "width", "wrap"]


def _wcwidth() -> ModuleType:
    # here, not at the top: the core's tests import the lab on `pip install .` alone, which has no wcwidth
    import wcwidth

    return wcwidth


def width(text: str) -> int:
    """The columns ``text`` takes in a terminal: a wide character (Hangul, say) takes two."""
    return int(_wcwidth().width(text))


def pad(text: str, columns: int, *, right: bool = False) -> str:
    """``text`` padded with spaces to ``columns`` terminal columns, on the right (``right``: on the left)."""
    return str(_wcwidth().rjust(text, columns) if right else _wcwidth().ljust(text, columns))


def table(header: Sequence[str], rows: Sequence[Sequence[str]], *, gap: str = "  ") -> list[str]:
    """A header, a rule of dashes and the rows, each column as wide as its widest cell (in terminal columns)."""
    widths = [max(width(line[i]) for line in (header, *rows)) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return gap.join(pad(cell, w) for cell, w in zip(cells, widths)).rstrip()

    return [line(header), gap.join("-" * w for w in widths), *map(line, rows)]


def wrap(text: str, columns: int) -> list[str]:
    """``text`` wrapped into lines of at most ``columns`` terminal columns, as :func:`textwrap.wrap` by characters."""
    return list(_wcwidth().wrap(text, columns))
