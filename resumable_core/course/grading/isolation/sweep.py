"""Remove what graders that died mid-run left: their scratch tmpfs mounts and empty cgroups."""

from __future__ import annotations

import contextlib
from pathlib import Path

from ._names import gone
from .cgroup import cgroup_parents
from .disk import umount


def sweep_left_behind() -> None:
    """Unmount the tmpfs and remove the (empty) cgroups of graders that died mid-run (a SIGKILL skips ``finally``)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mounts").read_text().splitlines():
            point = Path(line.split()[1])
            if line.startswith("tmpfs ") and gone(point.name):
                with contextlib.suppress(OSError):
                    umount(point)
                    point.rmdir()
    for parent in cgroup_parents():
        with contextlib.suppress(OSError):
            for folder in parent.glob("resumable-sandbox-*"):
                if gone(folder.name):
                    with contextlib.suppress(OSError):  # not empty: a process of it still runs
                        folder.rmdir()
