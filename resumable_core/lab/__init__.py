"""The lab wing: the crash matrix, the exercise checkpoints, rendering, the widgets and the CLI.

Installed with the ``[lab]`` extra. It builds on the core and never the other way round.
:mod:`~resumable_core.lab.render` draws the lab's data as HTML and PNG;
:mod:`~resumable_core.lab.widgets`, the only module that imports ipywidgets, is imported
explicitly; :mod:`~resumable_core.lab.cli` holds ``matrix``, ``simulate`` and ``fixtures``.
"""

from __future__ import annotations

from .exercise_checkpoints import load_exercise_checkpoint
from .matrix import Cell, MatrixRow, run_cell, run_matrix
from .resumers import crash_loop, race_resumers

__all__ = ["Cell", "MatrixRow", "crash_loop", "load_exercise_checkpoint", "race_resumers", "run_cell", "run_matrix"]
