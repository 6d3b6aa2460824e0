"""A run's lease: one resumer at a time, and a fencing token that outlives a lost lease.

A resumer takes the lease before it loads the checkpoint. The lease is one row of an SQLite file
beside the checkpoint (``checkpoint.json.lease``): the owner, its host and process id, when the
lease expires, and a fencing token that grows by one at every take. A second resumer finds the
row held and is refused with :class:`LeaseHeldError` (or waits for it, up to a timeout).

A holder that dies (SIGKILL, a crash) is seen by its process id, so a crashed run can be resumed
at once. One that only stalls (paused, swapped out) keeps the lease until it expires; then
another resumer takes it with a higher token, and when the stalled one wakes, every write it
tries is refused: the ledger and the outbox keep the highest token they have seen per run
(:class:`Fence`), and the checkpoint is saved only while the lease row is locked and still ours
(:meth:`Lease.holding`). A lease keeps concurrent resumers apart; the idempotency key still
makes each effect happen once across the network boundary.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import time
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

from .errors import CheckpointFolderMissingError, LeaseError, LeaseHeldError, LeaseLostError

LEASE_TTL = 30.0
"""Seconds a lease lasts without renewal; every save and model call renews it."""
POLL_SECONDS = 0.05
"""How often a resumer that waits for the lease looks again."""

FENCES_SCHEMA = """
CREATE TABLE IF NOT EXISTS fences (
    scope TEXT PRIMARY KEY,
    token INTEGER NOT NULL
);
"""
"""The table a fenced store keeps: the highest fencing token that wrote, per run id."""

_LEASE_SCHEMA = """
CREATE TABLE IF NOT EXISTS lease (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    owner TEXT,
    host TEXT,
    pid INTEGER,
    expires_at REAL NOT NULL,
    token INTEGER NOT NULL
);
INSERT OR IGNORE INTO lease (id, owner, host, pid, expires_at, token) VALUES (1, NULL, NULL, NULL, 0, 0);
"""


@contextmanager
def write_transaction(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction on an autocommit connection, taking the write lock at its start."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


@dataclass(frozen=True)
class Fence:
    """A write's credentials: the run it acts for and the fencing token of its lease."""

    scope: str
    """The run id: tokens are compared within one run."""
    token: int

    def admit(self, db: sqlite3.Connection, store: str | Path) -> None:
        """Inside an open write transaction: remember this token, or refuse it if a newer one wrote."""
        db.execute(
            "INSERT INTO fences (scope, token) VALUES (?, ?) "
            "ON CONFLICT (scope) DO UPDATE SET token = excluded.token WHERE excluded.token > fences.token",
            (self.scope, self.token),
        )
        (newest,) = db.execute("SELECT token FROM fences WHERE scope = ?", (self.scope,)).fetchone()
        if newest != self.token:
            raise LeaseLostError(
                store,
                "fencing token {token} of run {scope} is stale (token {newest} wrote here since)",
                token=self.token,
                scope=self.scope,
                newest=newest,
            )


def lease_path(checkpoint_path: str | Path) -> Path:
    """The lease file of a checkpoint: beside it, named after it."""
    path = Path(checkpoint_path)
    return path.with_name(f"{path.name}.lease")


def _alive(pid: int) -> bool:
    """True while a process of this id exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # no /proc (not Linux): existence is all we know
        return True
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


@dataclass
class Lease:
    """The lease one resumer holds on one checkpoint; release it with ``with`` or :meth:`release`."""

    path: Path
    owner: str
    token: int
    ttl: float

    @classmethod
    def take(cls, checkpoint_path: str | Path, *, wait: float = 0.0, ttl: float | None = None) -> Lease:
        """Take the checkpoint's lease, waiting up to ``wait`` seconds for a live holder to let go.

        Raises :class:`LeaseHeldError` naming the holder when it is still held after ``wait``.
        """
        path = lease_path(checkpoint_path)
        if not path.parent.is_dir():
            raise CheckpointFolderMissingError(
                path.parent, "the checkpoint's folder does not exist; is the volume mounted? (not a fresh start)"
            )
        owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        lease = cls(path, owner, 0, LEASE_TTL if ttl is None else ttl)
        deadline = time.monotonic() + wait
        while (holder := lease._try_take()) is not None:
            if time.monotonic() >= deadline:
                raise LeaseHeldError(
                    path, "the run is being resumed by {holder}; wait for it or let the lease expire", holder=holder
                )
            time.sleep(POLL_SECONDS)
        return lease

    def _connect(self) -> sqlite3.Connection:
        try:
            db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            db.executescript(_LEASE_SCHEMA)
        except sqlite3.Error as e:
            raise LeaseError(self.path, "cannot use the lease file ({detail})", detail=str(e)) from None
        return db

    def _try_take(self) -> str | None:
        """Take the lease if it is free, expired or held by a dead process; else describe the holder."""
        with closing(self._connect()) as db, write_transaction(db):
            owner, host, pid, expires_at, token = db.execute(
                "SELECT owner, host, pid, expires_at, token FROM lease WHERE id = 1"
            ).fetchone()
            now = time.time()
            dead = host == socket.gethostname() and not _alive(pid)
            if owner is not None and expires_at > now and not dead:
                return f"{owner} (token {token}, {expires_at - now:.0f} s left)"
            self.token = token + 1
            db.execute(
                "UPDATE lease SET owner = ?, host = ?, pid = ?, expires_at = ?, token = ? WHERE id = 1",
                (self.owner, socket.gethostname(), os.getpid(), now + self.ttl, self.token),
            )
        return None

    def fence(self, run_id: str) -> Fence:
        """The credentials this lease gives the writes of run ``run_id``."""
        return Fence(run_id, self.token)

    @contextmanager
    def holding(self) -> Iterator[None]:
        """Renew the lease and keep its row locked while the body runs: a takeover waits for it.

        Raises :class:`LeaseLostError` when another resumer has taken the lease since.
        """
        with closing(self._connect()) as db, write_transaction(db):
            owner, token = db.execute("SELECT owner, token FROM lease WHERE id = 1").fetchone()
            if (owner, token) != (self.owner, self.token):
                raise LeaseLostError(
                    self.path,
                    "lease token {token} was taken over (now token {newest}); stop",
                    token=self.token,
                    newest=token,
                )
            db.execute("UPDATE lease SET expires_at = ? WHERE id = 1", (time.time() + self.ttl,))
            yield

    def release(self) -> None:
        """Let go, if the lease is still ours; the token stays, so the next take gets a higher one."""
        with closing(self._connect()) as db:
            db.execute(
                "UPDATE lease SET owner = NULL, host = NULL, pid = NULL, expires_at = 0 WHERE id = 1 AND owner = ?",
                (self.owner,),
            )

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
