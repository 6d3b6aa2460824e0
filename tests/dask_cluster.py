"""A real Dask cluster for the tests: a scheduler and two workers, each process in a folder of its own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

WORKERS = ("w1", "w2")


@dataclass
class Cluster:
    """The scheduler's address and each process (``scheduler``, ``w1``, ``w2``), each its own process group."""

    address: str
    tmp: Path
    """The workers' TMPDIR, one folder as on one machine: what a task leaves is there."""
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def stop(self, name: str) -> None:
        """SIGTERM ``name``'s process group, then SIGKILL what is left of it (a worker's grading processes).

        SIGTERM first: a nanny's resource tracker then unlinks the named semaphores it made in
        /dev/shm, which a SIGKILL of the whole group leaves behind (six a worker, every session).
        """
        proc = self.procs[name]
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with suppress(subprocess.TimeoutExpired):
            proc.wait(20)
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _start(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    cwd.mkdir(parents=True, exist_ok=True)
    with open(cwd / "process.log", "wb") as log:  # the child keeps its own descriptor
        return subprocess.Popen(cmd, cwd=cwd, stdout=log, stderr=log, start_new_session=True, env=env)


@contextmanager
def running_cluster(folder: Path) -> Iterator[Cluster]:
    """A ``dask scheduler`` and the :data:`WORKERS` (one thread each) under ``folder``; every process killed after."""
    import distributed

    sched_file = folder / "scheduler" / "scheduler.json"
    py = [sys.executable, "-m"]
    scheduler = _start(
        [*py, "distributed.cli.dask_scheduler", "--scheduler-file", str(sched_file), "--port", "0", "--no-dashboard"],
        folder / "scheduler",
    )
    cluster = Cluster("", folder / "tmp", {"scheduler": scheduler})
    cluster.tmp.mkdir(parents=True, exist_ok=True)
    try:
        for _ in range(600):
            if sched_file.is_file() and sched_file.stat().st_size:
                break
            time.sleep(0.1)
        cluster.address = json.loads(sched_file.read_text())["address"]
        for name in WORKERS:
            cluster.procs[name] = _start(
                [*py, "distributed.cli.dask_worker", "--scheduler-file", str(sched_file), "--name", name,
                 "--nworkers", "1", "--nthreads", "1", "--no-dashboard", "--local-directory", str(folder / name)],
                folder / name,
                {**os.environ, "TMPDIR": str(cluster.tmp)},
            )  # fmt: skip
        with distributed.Client(cluster.address, timeout="60s") as client:
            client.wait_for_workers(len(WORKERS), timeout=180)
        yield cluster
    finally:
        for name in list(cluster.procs):
            cluster.stop(name)


def left_in(tmp: Path) -> list[str]:
    """What tasks left in the workers' TMPDIR: all but the library copy each live worker keeps."""
    from resumable_core.course.grading.isolation import _names

    return [p.name for p in tmp.iterdir() if _names.gone(p.name) or not p.name.startswith("resumable-lib-")]


def _processes() -> dict[int, tuple[int, str, str]]:
    """Every running process: its parent, its start time (with the pid, who it is) and its command line."""
    found = {}
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit():
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if fields[0] != "Z":  # a zombie has ended
                    found[int(entry.name)] = (int(fields[1]), fields[19], (entry / "cmdline").read_text())
        except (OSError, IndexError):
            continue
    return found


def wait_for(predicate: Callable[[], object], seconds: float) -> bool:
    """Whether ``predicate()`` came true within ``seconds`` (asked five times a second)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def naming(text: str) -> list[int]:
    """The running processes whose command line holds ``text`` (a folder a grading process or sandbox works in), or
    that see a folder under it mounted in a mount namespace not ours: a sandbox under a host uid of its own is lent
    its folders, and its command line names the loans (``isolation.bwrap.UIDS``), its mounts the folders."""
    sources = _mounted_from(text)
    ours = os.readlink("/proc/self/ns/mnt")
    found = []
    for pid, (_, _, cmdline) in _processes().items():
        with suppress(OSError):
            if text in cmdline or (
                os.readlink(f"/proc/{pid}/ns/mnt") != ours
                and any(
                    fields[2] == device and fields[3].startswith(root)
                    for fields in map(str.split, Path(f"/proc/{pid}/mountinfo").read_text().splitlines())
                    for device, root in sources
                )
            ):
                found.append(pid)
    return found


def _mounted_from(text: str) -> list[tuple[str, str]]:
    """What a mount of a folder under ``text`` (a path, or a path's start) shows in /proc/PID/mountinfo: a file
    system's device (major:minor) and the start of the path from its root. The folder's own file system, and each
    mounted under ``text`` in our namespace (a sandbox's scratch tmpfs), whole."""
    top = next(p for p in (Path(text), *Path(text).parents) if os.path.ismount(p))
    device = os.stat(top).st_dev
    sources = [(f"{os.major(device)}:{os.minor(device)}", "/" + text.removeprefix(str(top)).lstrip("/"))]
    for fields in map(str.split, Path("/proc/self/mountinfo").read_text().splitlines()):
        if fields[4].startswith(text):
            sources.append((fields[2], "/"))
    return sources


def descendants(pid: int) -> set[tuple[int, str]]:
    """The running processes under ``pid`` (children, theirs, ...), each as (pid, start time)."""
    procs = _processes()
    found, todo = set(), [pid]
    while todo:
        parent = todo.pop()
        for child, (ppid, start, _) in procs.items():
            if ppid == parent:
                found.add((child, start))
                todo.append(child)
    return found


def still_running(procs: set[tuple[int, str]]) -> set[tuple[int, str]]:
    """Those of ``procs`` that still run (the same pid and start time, not a zombie)."""
    now = _processes()
    return {(pid, start) for pid, start in procs if pid in now and now[pid][1] == start}


def kill_while_grading(cluster: Cluster, name: str, killed: list[str], left: list[set[tuple[int, str]]]) -> None:
    """Once worker ``name``'s grading process runs a sandbox, SIGKILL that worker process alone (its nanny restarts it).

    The task keys it ran go in ``killed``; what of the processes under it still ran 10 s after the kill, in ``left``.
    """
    import distributed

    with distributed.Client(cluster.address, timeout="60s") as watcher:
        for _ in range(6000):
            names = {a: w["name"] for a, w in watcher.scheduler_info()["workers"].items()}
            busy = [a for a, keys in watcher.processing().items() if keys and names.get(a) == name]
            if busy:
                pid = watcher.run(os.getpid, workers=busy)[busy[0]]
                under = descendants(pid)
                procs = _processes()
                grading = [p for p, _ in under if p in procs and "course.grading.steps.workers" in procs[p][2]]
                if any(procs.get(p, (0,))[0] in grading for p, _ in under):  # a sandbox of the grading process
                    killed.extend(str(k) for k in watcher.processing().get(busy[0], ()))
                    os.kill(pid, signal.SIGKILL)
                    for _ in range(100):
                        if not still_running(under):
                            break
                        time.sleep(0.1)
                    left.append(still_running(under))
                    return
            time.sleep(0.1)
