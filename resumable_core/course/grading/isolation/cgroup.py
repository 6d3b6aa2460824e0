"""A cgroup for the whole sandbox: its processes, memory and CPU, and a kill that misses no one.

cgroup v1 mounts each controller in a hierarchy of its own (a folder per controller), v2 one for
all; a controller whose limit cannot be set here is left out, and :meth:`.BwrapBackend.guarantees`
says so.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path

from ._names import owned
from .limits import Limit, Limits

CFS_PERIOD = 100_000
"""Microseconds of the CPU cap's period (the kernel's default): the job gets ``Limits.cpus`` times it per period."""
CGROUP_CONTROLLERS = frozenset({"pids", "memory", "cpu", "freezer"})
"""The cgroup controllers a sandbox's cgroup uses: ``pids``, ``memory`` and ``cpu`` cap its processes, memory and CPU;
``freezer`` (cgroup v1; v2's ``cgroup.freeze`` is in every cgroup) freezes them all."""


def _cgroup_mounts() -> tuple[dict[str, Path], Path | None]:
    """Where each cgroup v1 controller's hierarchy is mounted, and where the v2 hierarchy is (or None)."""
    v1: dict[str, Path] = {}
    v2 = None
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[2] == "cgroup":
            for option in fields[3].split(","):
                v1.setdefault(option, Path(fields[1]))
        elif len(fields) >= 4 and fields[2] == "cgroup2" and v2 is None:
            v2 = Path(fields[1])
    return v1, v2


def _enable_v2(folder: Path) -> set[str]:
    """The controllers of ours a child of v2 ``folder`` gets, enabled in its ``cgroup.subtree_control`` if need be.

    Enabling fails, and the controller is left out, where ``folder`` is not delegated to this user or
    holds processes itself (cgroup v2's "no internal processes" rule; the root cgroup is exempt).
    """
    try:
        available = set((folder / "cgroup.controllers").read_text().split()) & CGROUP_CONTROLLERS
        enabled = set((folder / "cgroup.subtree_control").read_text().split())
    except OSError:
        return set()
    for name in sorted(available - enabled):
        with contextlib.suppress(OSError):
            (folder / "cgroup.subtree_control").write_text(f"+{name}")
            enabled.add(name)
    return available & enabled


def cgroup_parents() -> dict[Path, frozenset[str]]:
    """Folders this process may make a cgroup in, each with the controllers of ours a child there gets.

    cgroup v1 mounts each controller in its own hierarchy (a folder per controller); v2 has one.
    """
    try:
        own = Path("/proc/self/cgroup").read_text().splitlines()
        v1, v2 = _cgroup_mounts()
    except OSError:
        return {}
    parents: dict[Path, set[str]] = {}
    for line in own:
        _, names, path = line.split(":", 2)
        if names:
            for name in set(names.split(",")) & CGROUP_CONTROLLERS & set(v1):
                parents.setdefault(v1[name] / path.lstrip("/"), set()).add(name)
        elif v2 is not None and (enabled := _enable_v2(v2 / path.lstrip("/"))):
            parents.setdefault(v2 / path.lstrip("/"), set()).update(enabled | {"freezer"})
    return {
        folder: frozenset(names)
        for folder, names in parents.items()
        if os.access(folder, os.W_OK) and (folder / "cgroup.procs").exists()
    }


def _counter(path: Path, key: str) -> int:
    """The value of ``key`` in a cgroup file of ``key value`` lines (``pids.events``, ``memory.events``), 0 if absent."""
    for line in path.read_text().splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return int(value)
    return 0


def _out_of_memory(folder: Path) -> bool:
    """Whether the memory cgroup ``folder`` ran out: its OOM (v2) or OOM-kill (v1 and v2) count is not 0."""
    v2 = folder / "memory.events"
    if v2.exists():
        return _counter(v2, "oom") + _counter(v2, "oom_kill") > 0
    return _counter(folder / "memory.oom_control", "oom_kill") > 0


def _set_memory(folder: Path, limits: Limits) -> None:
    if (folder / "memory.max").exists():  # cgroup v2
        (folder / "memory.max").write_text(str(limits.memory))
        if (folder / "memory.swap.max").exists():
            (folder / "memory.swap.max").write_text("0")
    else:  # cgroup v1; memory plus swap no more than memory: no swap
        (folder / "memory.limit_in_bytes").write_text(str(limits.memory))
        if (folder / "memory.memsw.limit_in_bytes").exists():
            (folder / "memory.memsw.limit_in_bytes").write_text(str(limits.memory))


def _set_cpu(folder: Path, limits: Limits) -> None:
    quota = max(1000, round(limits.cpus * CFS_PERIOD))  # the kernel refuses a quota under 1 ms
    if (folder / "cpu.max").exists():  # cgroup v2
        (folder / "cpu.max").write_text(f"{quota} {CFS_PERIOD}")
    else:  # cgroup v1
        (folder / "cpu.cfs_period_us").write_text(str(CFS_PERIOD))
        (folder / "cpu.cfs_quota_us").write_text(str(quota))


def _set_pids(folder: Path, limits: Limits) -> None:
    (folder / "pids.max").write_text(str(limits.processes))


def _has_freezer(folder: Path, limits: Limits) -> None:
    """Nothing to set: raises where the cgroup cannot be frozen."""
    if not (folder / "freezer.state").exists() and not (folder / "cgroup.freeze").exists():
        raise OSError(f"no freezer in {folder}")


_SETTERS = {"pids": _set_pids, "memory": _set_memory, "cpu": _set_cpu, "freezer": _has_freezer}


def _set_limits(folder: Path, controllers: frozenset[str], limits: Limits) -> frozenset[str]:
    """Write the limits of ``controllers`` into the cgroup ``folder``; the controllers whose limit holds.

    One that cannot be set (v1 refuses a CPU quota over the parent's) is left out alone: on v2, where
    one folder holds every controller, it must not take the memory and process caps with it.
    """
    held = set()
    for name in sorted(controllers & set(_SETTERS)):
        try:
            _SETTERS[name](folder, limits)
        except OSError:
            continue
        held.add(name)
    return frozenset(held)


class Cgroup:
    """A fresh cgroup holding the whole sandbox: its process, memory and CPU caps, and a kill that misses no one.

    One folder per hierarchy it is made in (cgroup v1 has one per controller, v2 one for all); a
    controller whose limit cannot be set is left out, and so is a hierarchy left with none.
    """

    def __init__(self, parents: Mapping[Path, frozenset[str]], limits: Limits) -> None:
        name = f"{owned('resumable-sandbox-')}{uuid.uuid4().hex[:12]}"
        self.folders: dict[Path, frozenset[str]] = {}
        for parent, controllers in parents.items():
            folder = parent / name
            try:
                folder.mkdir()
            except OSError:
                continue
            held = _set_limits(folder, controllers, limits)
            if not held:
                folder.rmdir()
                continue
            self.folders[folder] = held
        self.controllers = frozenset().union(*self.folders.values())

    def enter(self) -> None:
        """Called in the child before ``exec``: it and all its descendants are in the cgroup."""
        for folder in self.folders:
            (folder / "cgroup.procs").write_text(str(os.getpid()))

    def hit(self) -> Limit | None:
        """The limit the kernel counted a hit of: memory (out of memory) or processes; else None."""
        for folder, controllers in self.folders.items():
            if "memory" in controllers and _out_of_memory(folder):
                return Limit.MEMORY
        for folder, controllers in self.folders.items():
            if "pids" in controllers and _counter(folder / "pids.events", "max"):
                return Limit.PROCESSES
        return None

    def freeze(self, frozen: bool) -> None:
        """Freeze (or thaw) every process in it, returning once none runs (or all may)."""
        for folder, controllers in self.folders.items():
            if "freezer" in controllers:
                _freeze(folder, frozen)

    def kill_and_remove(self) -> None:
        kill_and_remove(self.folders)
        self.folders = {}


FREEZE_WAIT = 5.0
"""Seconds a freeze may take (a task in an uninterruptible sleep delays it) before it counts as failed."""


def _freeze(folder: Path, frozen: bool) -> None:
    """Write the freezer's state and wait until the kernel reached it (v1 passes through ``FREEZING``)."""
    v2 = (folder / "cgroup.freeze").exists()
    state = ("1" if frozen else "0") if v2 else ("FROZEN" if frozen else "THAWED")
    until = time.monotonic() + FREEZE_WAIT
    while True:  # v1 may stay FREEZING while a task forks: ask again
        (folder / ("cgroup.freeze" if v2 else "freezer.state")).write_text(state)
        if v2:
            reached = _counter(folder / "cgroup.events", "frozen") == frozen
        else:
            reached = (folder / "freezer.state").read_text().strip() == state
        if reached:
            return
        if time.monotonic() > until:
            raise OSError(f"{folder} is not {'frozen' if frozen else 'thawed'} after {FREEZE_WAIT} s")
        time.sleep(0.001)


def kill_and_remove(folders: Iterable[Path]) -> None:
    """Thaw, then SIGKILL every process in the cgroup ``folders`` (one per hierarchy) until none is left; remove them.

    A frozen process dies of SIGKILL only once thawed, and a grader killed while a fresh process ran
    leaves the loaded one's cgroup frozen: unthawed, every sweep after it waited seconds in vain.
    """
    folders = list(folders)
    for folder in folders:
        if (folder / "cgroup.freeze").exists() or (folder / "freezer.state").exists():
            _freeze(folder, False)
    for _ in range(100):
        pids = {pid for folder in folders for pid in (folder / "cgroup.procs").read_text().split()}
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        time.sleep(0.02)
    for folder in folders:
        folder.rmdir()


def cgroup_for(limits: Limits) -> Cgroup | None:
    """The sandbox's cgroup, or None where no controller of ours can be used (not root, no delegation)."""
    parents = cgroup_parents()
    cgroup = Cgroup(parents, limits) if parents else None
    return cgroup if cgroup is not None and cgroup.folders else None
