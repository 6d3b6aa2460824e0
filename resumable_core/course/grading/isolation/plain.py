"""The plain backend (``grade --no-sandbox``): jobs run as the grader, with only the caps a process can set.

It isolates nothing: a job reads and writes what the grader can, sees its network and variables,
and a process that leaves its session outlives it. It holds the wall clock, the output caps, and
the per-process memory and file-size limits (:data:`GUARANTEES`); the pipeline says the rest aloud.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ._names import owned
from ._process import limit_from_exit, start_and_wait
from .backend import Guarantee, Job, Mount, Outcome
from .limits import Limits

GUARANTEES = frozenset({Guarantee.MEMORY, Guarantee.FILE_SIZE, Guarantee.OUTPUT, Guarantee.WALL})
"""What a plain job is held to: the caps a process sets on itself before ``exec``, where it cannot raise them."""
CAP_SYS_RESOURCE = 24
"""The capability that lets a process raise its own hard limits (``capabilities(7)``)."""


def _can_raise_limits() -> bool:
    """Whether a job started by this process could raise its hard limits (it holds ``CAP_SYS_RESOURCE``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> CAP_SYS_RESOURCE & 1)
    return os.geteuid() == 0


def _child_setup(limits: Limits) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory, limits.memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_size, limits.file_size))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


@dataclass(frozen=True)
class PlainBackend:
    """Jobs as plain child processes of the grader, in the job's scratch folder."""

    library: Path | None = None
    """The folder holding the ``resumable_core`` jobs import (put first on ``PYTHONPATH``); None: the installed one."""
    limits: Limits = field(default_factory=Limits)
    env: Mapping[str, str] = field(default_factory=dict)
    name: str = "plain"

    def available(self) -> str | None:
        return None

    def guarantees(self) -> frozenset[Guarantee]:
        if _can_raise_limits():  # a root grader's job may lift its own memory and file-size caps
            return frozenset({Guarantee.OUTPUT, Guarantee.WALL})
        return GUARANTEES

    def inside(self, mount: Mount) -> str:
        return str(mount.host)

    def environment(self, library: Path | None, tmp: Path) -> dict[str, str]:
        """The grader's own variables, the venv's ``bin/`` first on ``PATH``, a ``TMPDIR`` of the job's own."""
        env = dict(os.environ)
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        env.pop("RESUMABLE_LIVE", None)  # grading never calls the real API
        env.update(TMPDIR=str(tmp), MALLOC_ARENA_MAX="2", PYTHONUNBUFFERED="1", MPLBACKEND="Agg")  # arenas: see bwrap
        env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # debugpy's warning would land on stderr
        if library is not None:
            env["PYTHONPATH"] = str(library)
        env.update(self.env)
        return env

    def run(self, job: Job) -> Outcome:
        """Run ``job`` in its scratch folder until it ends, hits the wall clock or floods its output."""
        limits = self.limits if job.wall is None else dataclasses.replace(self.limits, wall=job.wall)
        library = job.library if job.library is not None else self.library
        started = time.monotonic()
        tmp = Path(tempfile.mkdtemp(prefix=owned("resumable-plain-tmp-")))
        try:
            returncode, stdout, stderr, limit = start_and_wait(
                [*job.tracer, *job.argv],
                limits,
                cwd=Path(job.scratch),
                env=self.environment(library, tmp),
                preexec=functools.partial(_child_setup, limits),
            )
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        limit = limit or limit_from_exit(returncode, stderr)
        seconds = time.monotonic() - started
        return Outcome(returncode, stdout, stderr, limits.describe(limit) if limit else None, seconds, limit)
