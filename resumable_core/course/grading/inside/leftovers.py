"""Kill what a cell left running: every process of the sandbox but the ones that must live on.

Inside the sandbox's PID namespace ``/proc`` lists only the sandbox's own processes, so that is
everything but the runner, the process running the cells and their ancestors (bwrap's init). Only
ever called inside a sandbox: outside, ``/proc`` lists the whole machine.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable
from pathlib import Path


def _processes() -> dict[int, tuple[str, int]]:
    """{pid: (state, parent pid)} of every process ``/proc`` lists (those that end meanwhile left out)."""
    out = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            state, ppid = stat[stat.rindex(")") + 2 :].split()[:2]  # after "pid (comm) ": comm may hold ")"
        except (OSError, ValueError):  # ended meanwhile
            continue
        out[int(entry.name)] = (state, int(ppid))
    return out


def _with_ancestors(pids: Iterable[int], table: dict[int, tuple[str, int]]) -> set[int]:
    keep: set[int] = set()
    for pid in pids:
        while pid > 0 and pid not in keep:
            keep.add(pid)
            pid = table.get(pid, ("", 0))[1]
    return keep


def kill_leftovers(kernel: int, rounds: int = 200) -> int:
    """SIGKILL every live process but this one, ``kernel`` and their ancestors; how many were killed.

    Only inside the sandbox's PID namespace: outside, ``/proc`` lists the whole machine. Scanned again
    until none is left, since a process may fork while the last round was killing.
    """
    table = _processes()
    keep = _with_ancestors([os.getpid(), kernel], table)
    killed: set[int] = set()
    for _ in range(rounds):
        left = [pid for pid, (state, _) in table.items() if pid not in keep and state not in ("Z", "X", "x")]
        if not left:
            break
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            killed.add(pid)
        time.sleep(0.005)  # a SIGKILLed process is gone (or a zombie) a moment later, not at once
        table = _processes()
    return len(killed)
