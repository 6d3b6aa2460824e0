"""Freshly started learner's processes: what a restarted call runs in, each started by the host in a sandbox of its own.

A check that calls the learner's function as a harness restarted after a crash would
(:func:`...checks.support.restarted`) needs a process that shares nothing with the loaded one.
So the host starts it, never the loaded process: the checker dials the :class:`Restarter`'s socket
(in a folder of the host's, which only the checker sees, read-only); for each connection the host
starts a new learner's job on the same backend, with a fresh copy of the submission's files, the
notebook and nothing else (no socket folder, no shared folder, no tracer), and hands it the
checker's connection over a socket of its own. The job runs the notebook's cells but its tests,
then serves that one connection (``learner_server --serve-handed``). What it answers is as
untrusted as any learner's process; what matters is that none of the loaded process's memory can
be there. Why: ``docs/architecture.md``, "The isolated re-check".
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import select
import shutil
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ..isolation import Backend, Job, Mount

RESTART = "/grading/restart"
"""Where the checker finds the host's restart socket (a folder of the host's, read-only)."""
RESTART_SOCKET = "restart.sock"
HAND = "/grading/hand"
"""Where a freshly started process finds the host's socket that hands it the checker's connection (read-only)."""
HAND_SOCKET = "hand.sock"
AT_ONCE = 4
"""Freshly started processes at a time (a check's forked children may each restart a call); more wait their turn."""

JobOf = Callable[[Path, Mount], Job]
"""Builds a fresh process's job from its scratch folder (a fresh copy of the submission's files) and its hand mount."""


def _listen(path: Path, backlog: int) -> socket.socket:
    """A Unix socket listening at ``path``, however long the path (a socket's address holds 107 bytes).

    It binds through ``/proc/self/fd`` of its folder: the host's folders sit under ``TMPDIR``,
    which may be deep (pytest's are), while the sandboxes reach the socket by a short mount path.
    """
    folder = os.open(path.parent, os.O_PATH | os.O_DIRECTORY)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(f"/proc/self/fd/{folder}/{path.name}")
        listener.listen(backlog)
    except OSError:
        listener.close()
        raise
    finally:
        os.close(folder)
    return listener


class Restarter:
    """The host's end of restarted calls: a socket the checker dials, a freshly started learner's job per connection.

    ``folder``: a folder of the host's (the checker sees it read-only at :data:`RESTART`); ``backend``
    runs each job; ``job_of`` builds each one; ``loaded``: the loaded process's job, frozen while any
    fresh job runs (where the backend holds ``Guarantee.FREEZE``).
    """

    def __init__(self, folder: Path, backend: Backend, job_of: JobOf, loaded: Job) -> None:
        self.folder = folder
        self._backend = backend
        self._job_of = job_of
        self._loaded = loaded
        self._numbers = itertools.count(1)
        self._turns = threading.Semaphore(AT_ONCE)
        self._closed = threading.Event()
        self._jobs: list[threading.Thread] = []
        self._listener = _listen(folder / RESTART_SOCKET, 16)
        self._thread = threading.Thread(target=self._accept, daemon=True, name="restarter")
        self._thread.start()

    @property
    def address(self) -> Path:
        """The socket's host path."""
        return self.folder / RESTART_SOCKET

    def _accept(self) -> None:
        while not self._closed.is_set():
            select.select([self._listener], [], [])  # close() wakes it: a shut-down listener reads as ready
            if self._closed.is_set():
                return
            try:
                conn, _ = self._listener.accept()
            except OSError:  # closed under us
                return
            thread = threading.Thread(target=self._restart, args=(conn,), daemon=True, name="fresh-process")
            self._jobs.append(thread)
            thread.start()

    def _restart(self, conn: socket.socket) -> None:
        """Start a fresh learner's job, hand it ``conn`` once it asks, and let go of both when it ends.

        If the job never asks (it died, stopped or hung in its cells), ``conn`` is closed when it
        ends: the checker's call then fails as one whose process ended, never passes. The loaded
        process is frozen from before the job starts until it ended: nothing it does meanwhile (an
        open, a write) can reach the job; and what it or an earlier fresh job did before to what every
        sandbox shares (the page cache) it cannot see: the job is settled (``Job.settled``). A freeze
        that fails closes ``conn`` unserved.
        """
        with self._turns, conn, self._loaded.freezer.frozen():
            own = self.folder.parent / f"fresh-{next(self._numbers)}"
            hand = own / "hand"
            hand.mkdir(parents=True)
            try:
                with _listen(hand / HAND_SOCKET, 1) as listener:
                    job = dataclasses.replace(self._job_of(own / "scratch", Mount(hand, HAND)), settled=True)
                    ended = threading.Event()

                    def run() -> None:
                        try:
                            self._backend.run(job)
                        finally:
                            ended.set()

                    runner = threading.Thread(target=run, daemon=True)
                    runner.start()
                    deadline = time.monotonic() + (job.wall or 0.0)
                    while not ended.is_set() and not self._closed.is_set() and time.monotonic() < deadline:
                        if select.select([listener], [], [], 0.2)[0]:
                            asked, _ = listener.accept()
                            with asked:  # one connection is handed, to the first that asks: the job itself
                                socket.send_fds(asked, [b"c"], [conn.fileno()])
                            break
                conn.close()  # the job holds the checker's end now, or nobody does: either way not the host
                runner.join()
            finally:
                shutil.rmtree(own, ignore_errors=True)

    def close(self, grace: float) -> None:
        """Take no more connections; wait up to ``grace`` seconds for the fresh jobs.

        Each ends with its connection (the checker's end closed) or at its wall clock; one still
        running is left to it, on its daemon thread, which removes its folder when it ends.
        """
        self._closed.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread at once
        self._thread.join(1.0)
        self._listener.close()
        until = time.monotonic() + grace
        for thread in self._jobs:
            thread.join(max(0.0, until - time.monotonic()))
