"""Every CSV file the kit writes (``grades.csv``, an LMS's import file, the item analysis, the similarity list),
written by one function, safe to open in a spreadsheet.

A cell a spreadsheet would read as a formula (OWASP's "CSV injection": a text beginning with ``=``, ``+``,
``-``, ``@``, a tab or a carriage return, spaces before it or not) gets a leading ``'``, which makes it text.
Its words come from learners and LMSs (a refused file's name, a display name, a reason quoting an
exception), so no cell is trusted. A number stays a number: an ``int``, a ``float`` or a text that reads
as one (``-2``, ``1.5e-3``) is written as it is. Why not ``defusedcsv``: it leaves a leading tab or
carriage return alone, and rewrites every ``|`` of a cell it quotes.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from pathlib import Path

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""What a spreadsheet may take as the start of a formula (OWASP's list)."""


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def cell(value: object) -> object:
    """``value`` as a CSV cell no spreadsheet runs: a text that could start a formula gets a leading ``'``."""
    if not isinstance(value, str) or _number(value):
        return value
    if value.startswith(FORMULA_STARTS) or value.lstrip().startswith(FORMULA_STARTS):
        return "'" + value
    return value


def write_csv(path: Path, header: Sequence[str], rows: Iterable[Sequence[object]]) -> Path:
    """Write ``header`` and ``rows`` to ``path`` as UTF-8 CSV, each cell through :func:`cell`; ``path``."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow([cell(v) for v in header])
        w.writerows([cell(v) for v in row] for row in rows)
    return path
