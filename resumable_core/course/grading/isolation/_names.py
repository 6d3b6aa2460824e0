"""The names a sandbox gives what it leaves on the host (cgroups, mount points): with the grader's process id.

So what a grader that died mid-run left (a SIGKILL skips ``finally``) can be found and removed.
"""

from __future__ import annotations

import os
import re

_LEFT_BEHIND = re.compile(r"resumable-sandbox-(?:disk-|shared-)?(\d+)-")
"""The names of the cgroups and mount points a sandbox makes, with the grader's process id."""


def owned(prefix: str) -> str:
    """``prefix`` with this process's id: what it leaves behind if it dies mid-run can be found and removed."""
    return f"{prefix}{os.getpid()}-"


def gone(name: str) -> bool:
    """Whether ``name`` is a cgroup or mount point of ours whose grader process has ended."""
    found = _LEFT_BEHIND.match(name)
    if found is None:
        return False
    try:
        os.kill(int(found.group(1)), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, someone else's
        return False
    return False
