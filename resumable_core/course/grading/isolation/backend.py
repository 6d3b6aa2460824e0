"""The one seam between the grader and what isolates learner code: a :class:`Backend` runs a :class:`Job`.

In the manner of jupyter_client's kernel provisioners: the grader holds a backend chosen once from
the course's config (:func:`.make_backend`) and never asks which one it is. A backend says what it
holds (:attr:`Backend.guarantees`); the conformance suite (``tests/isolation_conformance.py``) runs
the same behaviour tests on every backend and checks each guarantee it claims, and only those.
"""

from __future__ import annotations

import contextlib
import enum
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ..errors import GradingError
from .limits import Limit, Limits


class IsolationUnavailable(GradingError):
    """The chosen backend cannot run here; ``.backend`` and ``.reason`` say which and why, the message the fix."""

    def __init__(self, backend: str, reason: str) -> None:
        super().__init__(
            f"the grading sandbox ({backend}) cannot run: {reason}; install bubblewrap or pass --no-sandbox"
        )
        self.backend = backend
        self.reason = reason


class Guarantee(enum.Enum):
    """What a backend may promise about every job it runs; its value is the sentence an instructor reads."""

    OWN_NETWORK = "no network: not even a port on the grader's localhost"
    HOST_HIDDEN = "the host's files are invisible but for the job's mounts"
    READ_ONLY_LIBRARY = "the library, the venv and the system are read-only"
    PRIVATE_TMP = "a private /tmp and HOME, thrown away"
    NO_SECRETS = "only an allowlist of variables reaches it (no API key)"
    NOTHING_OUTLIVES = "no process outlives the job"
    MEMORY = "an allocation past the memory cap fails"
    WHOLE_MEMORY = "the memory cap holds for all its processes together"
    PROCESSES = "the process cap holds"
    FILE_SIZE = "no file grows past the file-size cap"
    DISK = "its scratch folder takes no more than the disk cap"
    CPU = "all its processes together get no more than the CPU cap"
    OUTPUT = "its output stops at the output cap"
    WALL = "it is killed at the wall clock"
    FREEZE = "it can be frozen: none of its processes runs until it is thawed"
    UNMARKED_FILES = (
        "no lock it holds on a file every job sees, nor a page of one it drops from or reads into the page cache, "
        "reaches a job started while it is frozen or gone (a page: a settled job)"
    )
    OWN_HOST_UID = (
        "it runs under a host uid no other job running shares: the kernel's counts per user (keys, inotify, "
        "fanotify, processes) are its own"
    )


class Freezer:
    """A running job's freeze switch: within :meth:`frozen` none of its processes runs.

    The backend attaches the switch while the job runs, where it holds :attr:`Guarantee.FREEZE`;
    elsewhere :meth:`frozen` changes nothing. Nested or concurrent freezes thaw with the last one.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._switch: Callable[[bool], None] | None = None

    def attach(self, switch: Callable[[bool], None] | None) -> None:
        """The backend's switch (``switch(True)`` freezes, returning once frozen), or None once the job is over."""
        with self._lock:
            if self._switch is not None and self._depth:
                self._switch(False)  # what ends the job must reach processes that can run
            self._switch = switch
            if switch is not None and self._depth:
                switch(True)

    @contextlib.contextmanager
    def frozen(self) -> Iterator[None]:
        try:  # one that cannot freeze raises (the caller fails closed), and still thaws what it froze
            with self._lock:
                self._depth += 1
                if self._depth == 1 and self._switch is not None:
                    self._switch(True)
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0 and self._switch is not None:
                    self._switch(False)


@dataclass(frozen=True)
class Mount:
    """A host folder or file a job sees, at ``inside`` when the backend maps paths (:meth:`Backend.inside`)."""

    host: Path
    inside: str
    writable: bool = False


@dataclass(frozen=True)
class Job:
    """One command to run isolated: its argv, its writable working folder, what else it sees."""

    argv: tuple[str, ...]
    scratch: Path
    """The working folder, writable (under the disk cap where the backend holds :attr:`Guarantee.DISK`)."""
    mounts: tuple[Mount, ...] = ()
    """More folders and files, none inside ``scratch``."""
    wall: float | None = None
    """Seconds before it is killed (None: the backend's :attr:`Limits.wall`)."""
    library: Path | None = None
    """The folder holding the ``resumable_core`` it imports (None: the backend's)."""
    tracer: tuple[str, ...] = ()
    """A command put in front of the job, outside whatever isolates it (the re-check's strace, :mod:`..syscalls`)."""
    keep_scratch: bool = True
    """Whether ``scratch`` holds what the job left there afterwards; False: nothing of it comes back to the host."""
    freezer: Freezer = field(default_factory=Freezer, compare=False)
    """Freezes the job while it runs, where the backend holds :attr:`Guarantee.FREEZE` (the re-check's loaded process)."""
    settled: bool = False
    """This job must learn nothing from the pages other jobs touched in the files every job sees
    (:attr:`Guarantee.UNMARKED_FILES`): each such file is wholly cached before it may open it, up to its memory cap
    read (past it an open fails). Each open waits for that: only the re-check's fresh processes are settled."""


@dataclass
class Outcome:
    """How a job ended."""

    returncode: int
    stdout: bytes
    stderr: bytes
    limit: str | None
    """The limit it hit, named with its value (``"wall clock (60 s)"``), or None: the text learners read."""
    seconds: float
    hit: Limit | None = None
    """Which limit it hit (:attr:`limit`'s kind), or None: compare this, never :attr:`limit`'s text."""


class Backend(Protocol):
    """What isolates a job: chosen once per grading run, the same for the kernel's process and the re-check's."""

    @property
    def name(self) -> str:
        """``"bwrap"`` or ``"plain"``: the key in :data:`.BACKENDS` and in the course's config."""

    @property
    def limits(self) -> Limits:
        """What every job may use (a job may set its own wall clock)."""

    @property
    def library(self) -> Path | None:
        """The pristine ``resumable_core`` jobs import unless a job names its own view of it."""

    @property
    def env(self) -> Mapping[str, str]:
        """Trusted variables set in every job besides what the backend passes (never a secret)."""

    def available(self) -> str | None:
        """None when this backend runs here, else why not (one line)."""

    def guarantees(self) -> frozenset[Guarantee]:
        """What it holds here (some depend on the host: a cgroup, a tmpfs the grader may mount)."""

    def inside(self, mount: Mount) -> str:
        """Where a job sees ``mount``'s host path."""

    def run(self, job: Job) -> Outcome:
        """Run ``job`` until it ends or hits a limit; whatever it started is dealt with per :meth:`guarantees`."""
