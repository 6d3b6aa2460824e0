"""The simulated world the tools act on: meeting-notes files and an SQLite outbox.

Every effect is real (a file read, a row inserted), so a duplicate email can be counted.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from contextlib import closing
from pathlib import Path

from .errors import IdempotencyConflictError
from .lease import FENCES_SCHEMA, Fence, write_transaction

NOTES = {
    "meeting-08-18.md": "# Planning, Aug 18\n- Decision: ship the resume feature behind a flag.\n- Owner: Mina.\n",
    "meeting-08-21.md": "# Review, Aug 21\n- Decision: save points A and B stay; add fsync.\n- Open: retry budget.\n",
    "meeting-08-25.md": "# Retro, Aug 25\n- Decision: reconcile by tool effect, never blind re-run.\n- Action: ledger next sprint.\n",
    "conclusion.md": "This week's conclusion: resume from checkpoints, reconcile dangling calls by effect, "
    "and add an idempotency ledger for side effects next sprint.\n",
}
TEAM_ADDRESS = "team@example.com"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    recipient TEXT NOT NULL,
    subject TEXT NOT NULL,
    body TEXT NOT NULL,
    idempotency_key TEXT UNIQUE
);
CREATE TABLE IF NOT EXISTS calls (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    tool TEXT NOT NULL,
    input TEXT NOT NULL
);
"""


class World:
    """A folder holding ``notes/`` and ``world.sqlite`` (the outbox and a log of tool executions)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.notes_dir = self.root / "notes"
        self.db_path = self.root / "world.sqlite"

    @classmethod
    def create(cls, root: str | Path, notes: dict[str, str] | None = None) -> World:
        """Make the folder with the meeting notes and an empty outbox."""
        world = cls(root)
        world.notes_dir.mkdir(parents=True, exist_ok=True)
        for name, text in (NOTES if notes is None else notes).items():
            (world.notes_dir / name).write_text(text, encoding="utf-8")
        with closing(world._connect()) as db:
            db.executescript(_SCHEMA + FENCES_SCHEMA)
        return world

    def _connect(self) -> sqlite3.Connection:
        # One connection per operation: nothing is shared across a fork.
        db = sqlite3.connect(self.db_path, timeout=30, isolation_level=None)
        db.execute("PRAGMA synchronous=FULL")
        return db

    def log_call(self, tool: str, tool_input: dict) -> None:
        """Record that a tool really ran (the effect counter for read-only tools)."""
        with closing(self._connect()) as db:
            db.execute("INSERT INTO calls (tool, input) VALUES (?, ?)", (tool, json.dumps(tool_input, sort_keys=True)))

    def calls(self, tool: str | None = None) -> list[tuple[str, dict]]:
        """Every tool execution so far, in order."""
        with closing(self._connect()) as db:
            rows = db.execute("SELECT tool, input FROM calls ORDER BY id").fetchall()
        return [(t, json.loads(i)) for t, i in rows if tool is None or t == tool]

    def send_email(
        self, to: str, subject: str, body: str, idempotency_key: str | None = None, *, fence: Fence | None = None
    ) -> tuple[int, bool]:
        """Put one email in the outbox; with a key already used, send nothing. Returns (id, sent_now).

        The dedupe is one statement (``ON CONFLICT DO NOTHING``), so two senders racing with one
        key send one email. The same key with another recipient, subject or body raises
        :class:`IdempotencyConflictError`; a ``fence`` whose token is stale raises ``LeaseLostError``.
        """
        email = (to, subject, body)
        with closing(self._connect()) as db, write_transaction(db):
            if fence is not None:
                fence.admit(db, self.db_path)
            cur = db.execute(
                "INSERT INTO outbox (recipient, subject, body, idempotency_key) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (idempotency_key) DO NOTHING",
                (*email, idempotency_key),
            )
            if cur.rowcount == 1:
                return int(cur.lastrowid or 0), True
            row_id, *sent = db.execute(
                "SELECT id, recipient, subject, body FROM outbox WHERE idempotency_key = ?", (idempotency_key,)
            ).fetchone()
        if tuple(sent) != email:
            raise IdempotencyConflictError(str(idempotency_key), _email_hash(*sent), _email_hash(*email))
        return row_id, False

    def admit(self, fence: Fence) -> None:
        """Learn a new lease's token now: from here on the outbox refuses every older token of its run."""
        with closing(self._connect()) as db:
            db.executescript(FENCES_SCHEMA)  # a world made before fencing has no such table yet
            with write_transaction(db):
                fence.admit(db, self.db_path)

    def sent_emails(self) -> list[dict]:
        """The outbox, oldest first."""
        with closing(self._connect()) as db:
            rows = db.execute("SELECT id, recipient, subject, body, idempotency_key FROM outbox ORDER BY id").fetchall()
        return [dict(zip(("id", "to", "subject", "body", "idempotency_key"), r)) for r in rows]

    def resolve_note(self, path: str) -> Path:
        """A path inside ``notes/``; anything that escapes the folder is refused."""
        target = (self.notes_dir / path).resolve()
        if target != self.notes_dir.resolve() and self.notes_dir.resolve() not in target.parents:
            raise PermissionError(f"{path!r} is outside the notes folder")
        return target


def _email_hash(to: str, subject: str, body: str) -> str:
    """A hash of one email's recipient, subject and body, to name a conflict."""
    return hashlib.sha256(json.dumps([to, subject, body]).encode()).hexdigest()
