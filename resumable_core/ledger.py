"""The side-effect ledger: idempotency keys and receipts in SQLite.

A side-effecting call is recorded under a key made from the run id and the tool_use id, as
Stripe's idempotency keys are: the intent first (status ``unknown``), then how the call ended
(``succeeded`` or ``failed``), when, and the tool's result. On resume, a finished receipt under
that key is the proof of what happened, and its result is reused instead of acting again.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .errors import IdempotencyConflictError
from .lease import FENCES_SCHEMA, Fence, write_transaction

ReceiptStatus = Literal["unknown", "succeeded", "failed"]

_SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS receipts (
    key TEXT PRIMARY KEY,
    tool TEXT NOT NULL,
    input_hash TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'unknown' CHECK (status IN ('unknown', 'succeeded', 'failed')),
    result TEXT,
    updated_at REAL NOT NULL
);
"""
    + FENCES_SCHEMA
)
_COLUMNS = "key, tool, input_hash, status, result, updated_at"


def idempotency_key(run_id: str, tool_use_id: str) -> str:
    """The key of one side-effecting call: stable across crashes, unique per call."""
    return f"{run_id}:{tool_use_id}"


def input_hash(tool: str, tool_input: dict[str, Any]) -> str:
    """A hash of the tool name and its canonical JSON input."""
    canonical = json.dumps({"tool": tool, "input": tool_input}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class Receipt:
    """What the ledger knows of one key: the intent, then how the call ended and what it returned."""

    key: str
    tool: str
    input_hash: str
    status: ReceiptStatus
    """``unknown`` from the intent until the call ends (a crash may leave it so), then
    ``succeeded`` or ``failed``."""
    result: str | None
    """The tool's output (``succeeded``) or its error text (``failed``)."""
    updated_at: float
    """When the status was last written (seconds since the epoch)."""

    @property
    def done(self) -> bool:
        """True once the call's end is recorded: the key is proof of what happened."""
        return self.status != "unknown"


class Ledger:
    """Receipts keyed by idempotency key, in an SQLite file.

    A ``fence`` (the writer's run and lease token) makes a write from a resumer that lost its
    lease fail with ``LeaseLostError`` instead of landing.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        with closing(self._connect()) as db:
            db.executescript(_SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        db.execute("PRAGMA synchronous=FULL")
        return db

    def admit(self, fence: Fence) -> None:
        """Learn a new lease's token now: from here on the ledger refuses every older token of its run."""
        with closing(self._connect()) as db, write_transaction(db):
            fence.admit(db, self.path)

    def lookup(self, key: str) -> Receipt | None:
        """The receipt under ``key``, or None."""
        with closing(self._connect()) as db:
            row = db.execute(f"SELECT {_COLUMNS} FROM receipts WHERE key = ?", (key,)).fetchone()
        return Receipt(*row) if row else None

    def begin(self, key: str, tool: str, tool_input: dict[str, Any], *, fence: Fence | None = None) -> Receipt:
        """Record the intent before acting; return the receipt under the key (new, or known).

        The same key with another input is refused: a key names one call, not a slot.
        """
        h = input_hash(tool, tool_input)
        with closing(self._connect()) as db, write_transaction(db):
            if fence is not None:
                fence.admit(db, self.path)
            db.execute(
                "INSERT OR IGNORE INTO receipts (key, tool, input_hash, updated_at) VALUES (?, ?, ?, ?)",
                (key, tool, h, time.time()),
            )
            row = db.execute(f"SELECT {_COLUMNS} FROM receipts WHERE key = ?", (key,)).fetchone()
        receipt = Receipt(*row)
        if receipt.input_hash != h:
            raise IdempotencyConflictError(key, receipt.input_hash, h)
        return receipt

    def record(self, key: str, result: str, *, status: ReceiptStatus = "succeeded", fence: Fence | None = None) -> None:
        """Store how the call ended: from now on the key is proof of it."""
        with closing(self._connect()) as db, write_transaction(db):
            if fence is not None:
                fence.admit(db, self.path)
            db.execute(
                "UPDATE receipts SET status = ?, result = ?, updated_at = ? WHERE key = ?",
                (status, result, time.time(), key),
            )

    def receipts(self) -> list[Receipt]:
        """All receipts, for display."""
        with closing(self._connect()) as db:
            return [Receipt(*r) for r in db.execute(f"SELECT {_COLUMNS} FROM receipts ORDER BY rowid")]
