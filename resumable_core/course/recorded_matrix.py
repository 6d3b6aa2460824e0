"""Record the answer strategies' crash matrix for the student kit (``lab.recorded_matrix()`` reads it).

The kit has no ``by_effect`` or ``by_effect_ledger`` (they are the exercises' answers), yet its
lessons and heatmap show their rows: this runs them for real here, on the instructor's side, and
writes :data:`~resumable_core.lab.matrix.RECORDED_MATRIX`. Run it after a change to the loop, the
tools, the scripted Claude or the answers; ``tests/test_matrix.py`` checks the file is current::

    python -m resumable_core.course.recorded_matrix
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..lab.matrix import RECORDED_MATRIX, MatrixRow, rows_json, run_matrix
from ..scenarios import SCENARIOS, one_call_scenarios
from .hidden import strategies as answers


def record_rows() -> list[MatrixRow]:
    """Every scenario x crash point for each answer strategy, crashed and resumed for real now.

    The one-call scenarios' rows first (what ``lab.recorded_matrix()`` gives by default, as the
    lessons show them), then the parallel turns' (``recorded_matrix(scenarios=[...])``)."""
    names = [s.name for s in answers.ANSWERS]
    one_call = one_call_scenarios()
    parallel = [k for k in SCENARIOS if k not in one_call]
    return run_matrix(strategies=names) + run_matrix(strategies=names, scenarios=parallel)


def write_recorded_matrix(path: Path = RECORDED_MATRIX) -> Path:
    """Record the rows and write them to ``path`` as the JSON list :func:`rows_json` makes."""
    path.write_text(rows_json(record_rows()) + "\n", encoding="utf-8")
    return path


if __name__ == "__main__":
    print(write_recorded_matrix())
    sys.exit(0)
