"""What one isolated job may use, and the limits it can hit (named as learners read them)."""

from __future__ import annotations

import enum
from dataclasses import dataclass


def _mib(n: int) -> str:
    return f"{n / (1 << 30):g} GiB" if n >= 1 << 30 else f"{n / (1 << 20):g} MiB"


class Limit(enum.Enum):
    """A limit a job can hit (:attr:`.Outcome.hit`); its value is the name learners read (``"memory (1 GiB)"``)."""

    MEMORY = "memory"
    PROCESSES = "processes"
    FILE_SIZE = "file size"
    DISK = "disk"
    OUTPUT = "output"
    WALL = "wall clock"


@dataclass(frozen=True)
class Limits:
    """What one job may use; every limit it hits is named in :attr:`.Outcome.limit` (a CPU cap slows, never stops).

    Which of them a backend enforces is in its :attr:`.Backend.guarantees`.
    """

    memory: int = 1 << 30
    """Memory of the whole job (a memory cgroup, no swap), and address space of each process (``RLIMIT_AS``), bytes."""
    processes: int = 128
    """Processes and threads at once (a pids cgroup, else ``RLIMIT_NPROC``)."""
    cpus: float = 1.0
    """CPUs' worth of time the whole job may use at once (a cpu cgroup's quota)."""
    file_size: int = 64 << 20
    """Largest file it may write (``RLIMIT_FSIZE``), bytes."""
    disk: int = 256 << 20
    """What it may add to its scratch folder (a tmpfs of its own, where the grader may mount one), bytes."""
    output: int = 1 << 20
    """Bytes kept of each of stdout and stderr; more kills the job."""
    wall: float = 600.0
    """Seconds before the whole job is killed."""
    tmp_size: int = 256 << 20
    """Size of the private ``/tmp`` and ``HOME`` tmpfs, bytes each."""

    def describe(self, which: Limit) -> str:
        """The limit ``which`` named with its value: ``"memory (1 GiB)"``."""
        values = {
            Limit.MEMORY: _mib(self.memory),
            Limit.PROCESSES: str(self.processes),
            Limit.FILE_SIZE: _mib(self.file_size),
            Limit.DISK: _mib(self.disk),
            Limit.OUTPUT: _mib(self.output),
            Limit.WALL: f"{self.wall:g} s",
        }
        return f"{which.value} ({values[which]})"
