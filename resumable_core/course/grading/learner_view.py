"""What of the course the learner's code may see while it is graded: never the hidden checks.

The learner's kernel and the learner's side of the re-check run with :func:`learner_library`, the
pristine library copy without ``course/hidden`` (the hidden checks and the level-1 answer key),
and the kernel gets :func:`kernel_notebook`, the test cells without their hidden blocks. The hidden
blocks are run by the re-check's checker process alone, which calls the learner's functions across
a process boundary (:mod:`.rpc`). Why: ``docs/architecture.md``, "The isolated re-check".
"""

from __future__ import annotations

import copy
import os
import re
import shutil
from pathlib import Path
from typing import Any

HIDDEN_PACKAGE = Path("resumable_core", "course", "hidden")
"""The package the learner's processes never see (relative to a library copy)."""
LEARNER_COPY = ".learner"
"""The folder, inside a full library copy, of its learner's view."""
_HIDDEN_BLOCK = re.compile(r"^[^\n]*BEGIN HIDDEN TESTS[^\n]*\n.*?^[^\n]*END HIDDEN TESTS[^\n]*(\n|$)", re.M | re.S)


def learner_library(full: Path) -> Path:
    """The learner's view of the library copy ``full``: the same files but ``course/hidden``; made once.

    Safe when several grading workers ask at once: each builds its own and the first rename wins.
    """
    target = full / LEARNER_COPY
    if target.is_dir():
        return target
    tmp = full / f"{LEARNER_COPY}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    hidden = (full / HIDDEN_PACKAGE).resolve()
    shutil.copytree(
        full / "resumable_core",
        tmp / "resumable_core",
        ignore=lambda folder, names: [n for n in names if (Path(folder) / n).resolve() == hidden],
    )
    try:
        os.rename(tmp, target)
    except OSError:  # another worker made it first
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def without_hidden_tests(source: str) -> str:
    """A test cell's source without its ``### BEGIN HIDDEN TESTS`` ... ``### END HIDDEN TESTS`` blocks."""
    return _HIDDEN_BLOCK.sub("", source)


def kernel_notebook(nb: Any) -> Any:
    """A copy of the nbformat notebook ``nb`` whose test cells hold no hidden block (what the kernel runs)."""
    out = copy.deepcopy(nb)
    for cell in out.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
            cell.source = without_hidden_tests(cell.source)
    return out
