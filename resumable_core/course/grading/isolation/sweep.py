"""Remove what grading processes that died mid-run left: their sandboxes' cgroups, tmpfs mounts and temp folders."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path

from ._names import gone
from .cgroup import cgroup_parents, kill_and_remove
from .disk import umount


def sweep_left_behind() -> None:
    """Kill and remove what processes that died mid-run left (a SIGKILL skips ``finally``).

    Run before every sandbox and after every grading process ends (:mod:`..workers`, :mod:`..cluster`):
    the processes still in their cgroups are killed, then their tmpfs mounts unmounted and their
    temp folders removed. Only names :func:`._names.owned` made are touched, and only when that
    process has ended.
    """
    left: dict[str, list[Path]] = {}  # a cgroup's folder in each hierarchy: its freezer's thawed with the others
    for parent in cgroup_parents():
        with contextlib.suppress(OSError):
            for folder in parent.glob("resumable-*"):
                if gone(folder.name):
                    left.setdefault(folder.name, []).append(folder)
    for folders in left.values():
        with contextlib.suppress(OSError):
            kill_and_remove(folders)
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mounts").read_text().splitlines():
            point = Path(line.split()[1])
            if line.startswith("tmpfs ") and gone(point.name):
                with contextlib.suppress(OSError):
                    umount(point)
                    point.rmdir()
    with contextlib.suppress(OSError):
        for folder in Path(tempfile.gettempdir()).glob("resumable-*"):
            if gone(folder.name):
                shutil.rmtree(folder, ignore_errors=True)
