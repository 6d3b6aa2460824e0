"""Start a job's process, pump its output under the cap until the wall clock, kill its whole session."""

from __future__ import annotations

import contextlib
import ctypes
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from .limits import Limit, Limits

_PR_SET_PDEATHSIG = 1
_prctl = getattr(ctypes.CDLL(None, use_errno=True), "prctl", None)
"""Linux's ``prctl``, looked up before any fork (a child of a threaded process must not take the loader's lock)."""


def start_and_wait(
    cmd: Sequence[str],
    limits: Limits,
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    preexec: Callable[[], None] | None = None,
) -> tuple[int, bytes, bytes, Limit | None]:
    """Run ``cmd`` in a session of its own; its exit code, output and the limit it hit (wall clock or output).

    It dies with the thread that started it (:func:`die_with_parent`): a killed grader leaves no sandbox running.
    """
    deadline = time.monotonic() + limits.wall
    parent = os.getpid()

    def setup() -> None:
        die_with_parent(parent)
        if preexec is not None:
            preexec()

    proc = subprocess.Popen(
        list(cmd),
        cwd=cwd,
        env=None if env is None else dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=setup,
    )
    try:
        stdout, stderr, limit = _pump(proc, limits, deadline)
    finally:
        _kill(proc)
    return proc.returncode, stdout, stderr, limit


def die_with_parent(parent: int) -> None:
    """In a child before ``exec``: the kernel SIGKILLs it when the thread that forked it ends (``PR_SET_PDEATHSIG``).

    Whatever kills the grading process, SIGKILL included, then ends its children, and each sandbox
    with its first process (bwrap's ``--die-with-parent`` goes on from there). ``parent``: the
    forking process's id, to catch a parent that died before the call.
    """
    if (_prctl is not None and _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL) != 0) or os.getppid() != parent:
        os._exit(1)


def processes_of_this_user() -> int:
    """How many processes this uid runs now: ``RLIMIT_NPROC`` counts them too when bwrap clones the sandbox."""
    uid = f"Uid:\t{os.getuid()}\t"
    count = 0
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and uid in (entry / "status").read_text():
                count += 1
        except OSError:  # the process ended while we looked
            continue
    return count


def _pump(proc: subprocess.Popen[bytes], limits: Limits, deadline: float) -> tuple[bytes, bytes, Limit | None]:
    """Read stdout and stderr until both close; stop at the wall clock or when either passes the cap."""
    if proc.stdout is None or proc.stderr is None:
        raise OSError("the job's pipes were not opened")
    out = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
    limit: Limit | None = None
    with selectors.DefaultSelector() as sel:
        for f in (proc.stdout, proc.stderr):
            sel.register(f, selectors.EVENT_READ)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                limit = Limit.WALL
                break
            for key, _ in sel.select(timeout=min(left, 1.0)):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                buf = out[key.fd]
                kept = chunk[: max(0, limits.output - len(buf))]
                buf += kept
                if len(kept) < len(chunk):
                    limit = Limit.OUTPUT
            if limit:
                break
    return bytes(out[proc.stdout.fileno()]), bytes(out[proc.stderr.fileno()]), limit


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL bwrap's whole session: its PID namespace's init dies, and the kernel kills the rest."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    for f in (proc.stdout, proc.stderr):
        if f is not None:
            f.close()


def limit_from_exit(returncode: int, stderr: bytes) -> Limit | None:
    """The limit a process that ended on its own hit, from how it ended (None if none shows)."""
    tail = stderr[-4000:]
    if returncode in (-signal.SIGXFSZ, 128 + signal.SIGXFSZ) or b"File too large" in tail:
        return Limit.FILE_SIZE
    if returncode != 0 and b"MemoryError" in tail:
        return Limit.MEMORY
    if returncode != 0 and b"Resource temporarily unavailable" in tail:
        return Limit.PROCESSES
    return None
