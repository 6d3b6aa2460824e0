"""The library jobs import: a pristine copy of ``resumable_core``, made once per grading run."""

from __future__ import annotations

import compileall
import shutil
from pathlib import Path

import resumable_core


def library_copy(dest: Path) -> Path:
    """A pristine, compiled copy of the ``resumable_core`` package in ``dest`` (bound read-only); returns ``dest``.

    Made from the package's sources (no ``__pycache__`` of the checkout's is copied), once per
    grading run before the first student: what a submission does to the checkout reaches no one.
    """
    package = Path(resumable_core.__file__).resolve().parent
    target = dest / "resumable_core"
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(package, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints"))
    compileall.compile_dir(str(target), quiet=1)
    return dest  # read-only inside: bound with --ro-bind
