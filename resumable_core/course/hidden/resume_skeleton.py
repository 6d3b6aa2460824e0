"""The hidden checks of the ``resume_skeleton`` assignment: other versions, a read-only load, durability.

The notebook's hidden test block calls these as ``hidden.check_*(save_state, load_state)``.
"""

from __future__ import annotations

import os
from typing import Any

from ..checks.resume_skeleton import (
    Load,
    Save,
    check_state_version_refused,
    load_or_fail,
    observed_save,
    record_save,
    sample_state,
)
from ..checks.support import handed, is_remote, require, scratch

OTHER_VERSIONS: tuple[Any, ...] = (0, 99, "1")
"""Versions the visible test does not try: older, newer, and the right number as a string."""


def check_other_versions_refused(load: Load) -> None:
    """Files of versions 0, 99 and "1" are each refused with a ValueError and left as they were."""
    check_state_version_refused(load, versions=OTHER_VERSIONS)


def check_load_never_modifies(save: Save, load: Load) -> None:
    """Loading a good file leaves its bytes and modification time as they were."""
    path = scratch("state") / "state.json"
    save(sample_state(), handed(path, folder=True))
    before, mtime = path.read_bytes(), path.stat().st_mtime_ns
    load_or_fail(load, path, "loading a good file")
    require(path.read_bytes() == before and path.stat().st_mtime_ns == mtime, "load_state must only read the file")


def check_durable_steps(save: Save) -> None:
    """save_state writes a temp file in the same folder, fsyncs it, os.replace()s it, then fsyncs the folder."""
    folder = scratch("durable")
    path = folder / "state.json"
    if is_remote(save):  # traced from outside the learner's process
        problem = observed_save(save, path, sample_state()).durable_problem()
        require(problem is None, problem)
        return
    events = record_save(save, path)
    target = path.resolve()
    moves = [i for i, (kind, info) in enumerate(events) if kind == "replace" and info[1] == target]
    require(moves, "save_state must finish with os.replace(temp, path): the switch to the new file is one atomic step")
    move = moves[-1]
    require(
        events[move][1][0].parent == target.parent,
        "the temp file must be in the same folder as the state file (rename is atomic only within one file system)",
    )
    require(("open", target) not in events, "save_state must never open the state file itself for writing")
    require(
        any(kind == "fsync" and not info[0] for kind, info in events[:move]),
        "flush and os.fsync the temp file before the rename, so its bytes are on disk first",
    )
    folder_id = (True, os.stat(folder).st_dev, os.stat(folder).st_ino)
    require(
        ("fsync", folder_id) in events[move:], "os.fsync the folder after the rename, so the rename itself is durable"
    )
