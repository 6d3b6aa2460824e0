"""The names of what a grading process leaves on the host (cgroups, mount points, temp folders): with its process id.

So what a process that died mid-run left (a SIGKILL skips ``finally``) can be found and removed.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

_LEFT_BEHIND = re.compile(r"resumable-[a-z-]+?-(\d+)-")
"""``resumable-<kind>-<pid>-...``: a cgroup, mount point or temp folder made by :func:`owned`."""


def owned(prefix: str) -> str:
    """``prefix`` with this process's id: what it leaves behind if it dies mid-run can be found and removed."""
    return f"{prefix}{os.getpid()}-"


def gone(name: str) -> bool:
    """Whether ``name`` is a cgroup, mount point or temp folder of ours whose process has ended.

    A zombie has ended too: a killed Dask worker's child may be reparented to an init that never reaps it.
    """
    found = _LEFT_BEHIND.match(name)
    if found is None:
        return False
    try:
        os.kill(int(found.group(1)), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, someone else's
        return False
    try:
        return Path(f"/proc/{found.group(1)}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False
