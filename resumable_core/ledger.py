"""The side-effect ledger: idempotency keys and receipts in SQLite (lesson 4's preview).

A side-effecting call is recorded under a key made from the run id and the tool_use id.
On resume, a receipt under that key is the proof that the effect happened, and its result
is reused instead of acting again.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import IdempotencyConflictError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS receipts (
    key TEXT PRIMARY KEY,
    tool TEXT NOT NULL,
    input_hash TEXT NOT NULL,
    result TEXT
);
"""


def idempotency_key(run_id: str, tool_use_id: str) -> str:
    """The key of one side-effecting call: stable across crashes, unique per call."""
    return f"{run_id}:{tool_use_id}"


def input_hash(tool: str, tool_input: dict[str, Any]) -> str:
    """A hash of the tool name and its canonical JSON input."""
    canonical = json.dumps({"tool": tool, "input": tool_input}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class Receipt:
    """What the ledger knows of one key: the intent, and the result once the effect finished."""

    key: str
    tool: str
    input_hash: str
    result: str | None

    @property
    def done(self) -> bool:
        """True once the result is recorded."""
        return self.result is not None


class Ledger:
    """Receipts keyed by idempotency key, in an SQLite file."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        with closing(self._connect()) as db:
            db.executescript(_SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        db.execute("PRAGMA synchronous=FULL")
        return db

    def lookup(self, key: str) -> Receipt | None:
        """The receipt under ``key``, or None."""
        with closing(self._connect()) as db:
            row = db.execute("SELECT key, tool, input_hash, result FROM receipts WHERE key = ?", (key,)).fetchone()
        return Receipt(*row) if row else None

    def begin(self, key: str, tool: str, tool_input: dict[str, Any]) -> Receipt | None:
        """Record the intent before acting; return the existing receipt if the key is known.

        The same key with another input is refused: a key names one call, not a slot.
        """
        h = input_hash(tool, tool_input)
        with closing(self._connect()) as db:
            db.execute("INSERT OR IGNORE INTO receipts (key, tool, input_hash) VALUES (?, ?, ?)", (key, tool, h))
            row = db.execute("SELECT key, tool, input_hash, result FROM receipts WHERE key = ?", (key,)).fetchone()
        receipt = Receipt(*row)
        if receipt.input_hash != h:
            raise IdempotencyConflictError(key, receipt.input_hash, h)
        return receipt

    def record(self, key: str, result: str) -> None:
        """Store the result: from now on the key is proof the effect happened."""
        with closing(self._connect()) as db:
            db.execute("UPDATE receipts SET result = ? WHERE key = ?", (result, key))

    def receipts(self) -> list[Receipt]:
        """All receipts, for display."""
        with closing(self._connect()) as db:
            return [
                Receipt(*r) for r in db.execute("SELECT key, tool, input_hash, result FROM receipts ORDER BY rowid")
            ]
