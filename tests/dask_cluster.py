"""A real Dask cluster for the tests: a scheduler and two workers, each process in a folder of its own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

WORKERS = ("w1", "w2")


@dataclass
class Cluster:
    """The scheduler's address and each process (``scheduler``, ``w1``, ``w2``), each its own process group."""

    address: str
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def kill(self, name: str) -> None:
        """SIGKILL ``name``'s whole process group: the worker, its nanny and every grading process it started."""
        proc = self.procs[name]
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _start(cmd: list[str], cwd: Path) -> subprocess.Popen[bytes]:
    cwd.mkdir(parents=True, exist_ok=True)
    with open(cwd / "process.log", "wb") as log:  # the child keeps its own descriptor
        return subprocess.Popen(cmd, cwd=cwd, stdout=log, stderr=log, start_new_session=True)


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
    cluster = Cluster("", {"scheduler": scheduler})
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
            )  # fmt: skip
        with distributed.Client(cluster.address, timeout="60s") as client:
            client.wait_for_workers(len(WORKERS), timeout=180)
        yield cluster
    finally:
        for name in list(cluster.procs):
            cluster.kill(name)


def kill_while_grading(cluster: Cluster, name: str, killed: list[str], settle: float = 2.0) -> None:
    """Wait until worker ``name`` runs a task, give it ``settle`` seconds, then kill it; the task keys go in ``killed``."""
    import distributed

    with distributed.Client(cluster.address, timeout="60s") as watcher:
        for _ in range(6000):
            names = {a: w["name"] for a, w in watcher.scheduler_info()["workers"].items()}
            busy = [a for a, keys in watcher.processing().items() if keys and names.get(a) == name]
            if busy:
                time.sleep(settle)
                killed.extend(str(k) for k in watcher.processing().get(busy[0], ()))
                cluster.kill(name)
                return
            time.sleep(0.1)
