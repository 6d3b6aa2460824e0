"""The hidden checks of the ``resume_skeleton`` assignment: other versions, a read-only load, durability.

The notebook's hidden test block calls these as ``hidden.check_*(save_state, load_state)``.
"""

from __future__ import annotations

import builtins
import io
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..checks.resume_skeleton import Load, Save, check_state_version_refused, load_or_fail, sample_state
from ..checks.support import require, scratch

OTHER_VERSIONS: tuple[Any, ...] = (0, 99, "1")
"""Versions the visible test does not try: older, newer, and the right number as a string."""


def check_other_versions_refused(load: Load) -> None:
    """Files of versions 0, 99 and "1" are each refused with a ValueError and left as they were."""
    check_state_version_refused(load, versions=OTHER_VERSIONS)


def check_load_never_modifies(save: Save, load: Load) -> None:
    """Loading a good file leaves its bytes and modification time as they were."""
    path = scratch("state") / "state.json"
    save(sample_state(), str(path))
    before, mtime = path.read_bytes(), path.stat().st_mtime_ns
    load_or_fail(load, path, "loading a good file")
    require(path.read_bytes() == before and path.stat().st_mtime_ns == mtime, "load_state must only read the file")


Event = tuple[str, Any]


def _record_save(save: Save, path: Path) -> list[Event]:
    """Run ``save(sample_state(), path)`` with spies on open-for-writing, fsync/fdatasync and replace/rename."""
    events: list[Event] = []
    real_open, real_fsync, real_fdatasync, real_replace, real_rename = (
        io.open,
        os.fsync,
        os.fdatasync,
        os.replace,
        os.rename,
    )

    def spy_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if any(ch in mode for ch in "wax+") and not isinstance(file, int):
            events.append(("open", Path(file).resolve()))
        return real_open(file, mode, *args, **kwargs)

    def spy_sync(real: Callable[[int], None]) -> Callable[[Any], None]:
        def sync(fd: Any) -> None:
            st = os.fstat(fd if isinstance(fd, int) else fd.fileno())
            events.append(("fsync", (stat.S_ISDIR(st.st_mode), st.st_dev, st.st_ino)))
            real(fd)

        return sync

    def spy_move(real: Callable[..., None]) -> Callable[..., None]:
        def move(src: Any, dst: Any, *a: Any, **k: Any) -> None:
            events.append(("replace", (Path(src).resolve(), Path(dst).resolve())))
            real(src, dst, *a, **k)

        return move

    namespace = getattr(save, "__globals__", {})  # IPython puts its own ``open`` in a notebook's globals
    ns_open = namespace.get("open")
    builtins.open = io.open = spy_open  # restored in the finally below
    if ns_open is not None:
        namespace["open"] = spy_open
    os.fsync, os.fdatasync = spy_sync(real_fsync), spy_sync(real_fdatasync)  # type: ignore[assignment]  # likewise
    os.replace, os.rename = spy_move(real_replace), spy_move(real_rename)
    try:
        save(sample_state(), str(path))
    finally:
        builtins.open = io.open = real_open
        if ns_open is not None:
            namespace["open"] = ns_open
        os.fsync, os.fdatasync, os.replace, os.rename = real_fsync, real_fdatasync, real_replace, real_rename
    return events


def check_durable_steps(save: Save) -> None:
    """save_state writes a temp file in the same folder, fsyncs it, os.replace()s it, then fsyncs the folder."""
    folder = scratch("durable")
    path = folder / "state.json"
    events = _record_save(save, path)
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
