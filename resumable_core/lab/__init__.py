"""The lab wing: the crash matrix, the exercise checkpoints, rendering and the widgets.

Installed with the ``[lab]`` extra. It builds on the core and never the other way round. The
widgets (:mod:`resumable_core.lab.widgets`) import ipywidgets and are imported explicitly.
"""

from __future__ import annotations

from .exercise_checkpoints import load_exercise_checkpoint
from .matrix import Cell, MatrixRow, run_cell, run_matrix

__all__ = ["Cell", "MatrixRow", "load_exercise_checkpoint", "run_cell", "run_matrix"]
