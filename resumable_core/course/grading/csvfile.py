"""Every CSV file the kit writes, by one function, safe to open in a spreadsheet: a text a spreadsheet would run
as a formula (OWASP's "CSV injection") gets a leading ``'``; a number stays a number. Not ``defusedcsv``: it
leaves a leading tab or carriage return alone, and rewrites every ``|`` of a cell it quotes."""

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
