"""The lab wing: the crash matrix, the exercise checkpoints, rendering, the lessons' teaching helpers, the CLI.

Installed with the ``[lab]`` extra. It builds on the core and never the other way round.
:mod:`~resumable_core.lab.render` draws the lab's data as HTML and PNG;
:mod:`~resumable_core.lab.figures` holds the lessons' pictures (``turn_diagram`` and friends);
:mod:`~resumable_core.lab.predict` (``reveal``) and :mod:`~resumable_core.lab.formative`
(``formative_check``) give a learner feedback in a lesson, :mod:`~resumable_core.lab.source`
prints a function's real source (``show_source``) and any text as it is (``verbatim``),
:mod:`~resumable_core.lab.columns` pads a table's column by display width (``pad``: Hangul takes two columns);
:mod:`~resumable_core.lab.widgets`, the only module that imports ipywidgets, is imported
explicitly; :mod:`~resumable_core.lab.cli` holds ``matrix``, ``simulate`` and ``fixtures``.
"""

from __future__ import annotations

from .columns import pad
from .core_words import core, message, reason, say, speak_in_tracebacks
from .crash_test import crash_test, crash_test_journal
from .exercise_checkpoints import ACTIONS, actions_text, load_exercise_checkpoint
from .figures import crash_loop_chart, resume_vs_restart_chart, save_timeline, turn_diagram
from .formative import formative_check
from .matrix import Cell, MatrixRow, recorded_matrix, run_cell, run_matrix
from .predict import reveal
from .resumers import crash_loop, race_resumers
from .run_client import client_for_run
from .source import show_source, source_listing, verbatim

speak_in_tracebacks()  # a core error a learner's cell lets escape: its traceback in the notebook's language

__all__ = [
    "ACTIONS",
    "Cell",
    "MatrixRow",
    "actions_text",
    "client_for_run",
    "core",
    "crash_loop",
    "crash_loop_chart",
    "crash_test",
    "crash_test_journal",
    "formative_check",
    "load_exercise_checkpoint",
    "message",
    "pad",
    "race_resumers",
    "reason",
    "recorded_matrix",
    "resume_vs_restart_chart",
    "reveal",
    "run_cell",
    "run_matrix",
    "save_timeline",
    "say",
    "show_source",
    "source_listing",
    "turn_diagram",
    "verbatim",
]
