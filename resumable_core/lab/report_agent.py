"""The report agent's world and tools: two documents, saved reports, a reviewer's notifications, a task's status.

The ``resume`` exercise's second agent reads two documents, saves a report built from them and
notifies a reviewer (the source course's case of a checkpoint that records finished steps and
their artifacts). Everything here is real: the documents and reports are files, the
notifications and the tasks' status are rows in SQLite, and every tool that runs is logged, so a
check counts what really happened. The tools are :class:`~resumable_core.tools.Tool` objects in
an ordinary :class:`~resumable_core.tools.Toolbox`, called as ``tools.execute(name, input)``.

This module holds the world and the tools only. No function here runs, or resumes, the agent:
that loop is the exercise.

The provider of ``notify_reviewer`` does **not** honour the key: every call pings the reviewer
once more. The key is stored with the notification so that ``notification_status(key)`` can say
whether a notification whose outcome was lost did go out.
"""

from __future__ import annotations

import hashlib
import json
from contextlib import closing
from pathlib import Path
from typing import Any

from ..errors import ToolError
from ..tools import Effect, Tool, Toolbox, tool
from ..world import World

DOCS = {
    "pricing.md": "# Pricing page\nThe team plan costs 12 EUR a seat.\nAnnual billing saves two months.\n",
    "terms.md": "# Terms of service\nRefunds within 14 days.\nAccounts idle for a year are closed.\n",
}
"""The two public documents the report compares, as the world starts."""

REPORT_TASK: dict[str, Any] = {"task_id": "report-17", "docs": sorted(DOCS)}
"""The report agent's task: its identity and its scope (the documents to read)."""

ACTIVE, CANCELLED = "active", "cancelled"
"""What ``task_status`` answers."""
SENT, NOT_SENT = "sent", "not_sent"
"""What ``notification_status`` answers."""
CHECKPOINT_VERSION = 2
"""The report checkpoint's format version (version 1 kept no summaries: it cannot be resumed without re-reading)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS notifications (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL,
    report_sha256 TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS tasks (
    task_id TEXT PRIMARY KEY,
    status TEXT NOT NULL
);
"""


def sha256_text(text: str) -> str:
    """The hex SHA-256 of ``text`` encoded as UTF-8 (how documents and reports are hashed here)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def summary_of(text: str) -> str:
    """What the report keeps of a document: its lines after the heading, joined with '; '."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return "; ".join(line for line in lines if not line.startswith("#"))


def report_text(summaries: dict[str, str]) -> str:
    """The report built from each document's summary, documents in name order."""
    return "# Changes report\n\n" + "".join(f"- {name}: {summaries[name]}\n" for name in sorted(summaries))


class ReportWorld(World):
    """A folder holding ``docs/``, ``reports/`` and ``world.sqlite`` (notifications, tasks, the tool log)."""

    def __init__(self, root: str | Path) -> None:
        super().__init__(root)
        self.docs_dir = self.root / "docs"
        self.reports_dir = self.root / "reports"

    @classmethod
    def create(cls, root: str | Path, notes: dict[str, str] | None = None) -> ReportWorld:
        """Make the folder with the two documents (or ``notes``), no report, no notification, the task active."""
        World.create(root, notes={})  # the tool log, in the one database
        world = cls(root)
        world.docs_dir.mkdir(parents=True, exist_ok=True)
        world.reports_dir.mkdir(exist_ok=True)
        for name, text in (DOCS if notes is None else notes).items():
            (world.docs_dir / name).write_text(text, encoding="utf-8")
        with closing(world._connect()) as db:
            db.executescript(_SCHEMA)
            db.execute("INSERT INTO tasks (task_id, status) VALUES (?, ?)", (REPORT_TASK["task_id"], ACTIVE))
        return world

    # -- what the tools act on -----------------------------------------------------------------

    def doc_path(self, name: str) -> Path:
        """A document's file; a name that is not a plain file name of ``docs/`` is refused."""
        if Path(name).name != name or name in ("", ".", ".."):
            raise ToolError(f"no such document: {name}")
        path = self.docs_dir / name
        if not path.is_file():
            raise ToolError(f"no such document: {name}")
        return path

    def report_file(self, path: str) -> Path:
        """A saved report's file from the path ``save_report`` gave (``reports/<name>``)."""
        folder, _, name = path.partition("/")
        if folder != "reports" or Path(name).name != name or name in ("", ".", ".."):
            raise ToolError(f"no such report: {path}")
        return self.reports_dir / name

    def save_report(self, text: str) -> tuple[str, str]:
        """Write ``text`` as the next report revision; its path (``reports/report-<n>.md``) and SHA-256."""
        n = len(list(self.reports_dir.glob("report-*.md"))) + 1
        path = self.reports_dir / f"report-{n}.md"
        path.write_text(text, encoding="utf-8")
        return f"reports/{path.name}", sha256_text(text)

    def notify(self, report_sha256: str, key: str) -> int:
        """Ping the reviewer about a report: one row, every time (the key is stored, not honoured)."""
        with closing(self._connect()) as db:
            cur = db.execute("INSERT INTO notifications (key, report_sha256) VALUES (?, ?)", (key, report_sha256))
            return int(cur.lastrowid or 0)

    def task_status(self, task_id: str) -> str | None:
        """``active`` or ``cancelled``, or None for a task this world never had."""
        with closing(self._connect()) as db:
            row = db.execute("SELECT status FROM tasks WHERE task_id = ?", (task_id,)).fetchone()
        return None if row is None else str(row[0])

    # -- what a check changes, and what it counts ----------------------------------------------

    def edit_doc(self, name: str, text: str) -> None:
        """Change a document, as its publisher would while the agent is down."""
        (self.docs_dir / name).write_text(text, encoding="utf-8")

    def cancel(self, task_id: str) -> None:
        """The user cancels the task."""
        with closing(self._connect()) as db:
            db.execute("UPDATE tasks SET status = ? WHERE task_id = ?", (CANCELLED, task_id))

    def notifications(self) -> list[dict[str, Any]]:
        """Every ping the reviewer got, oldest first: ``{"id", "key", "report_sha256"}``."""
        with closing(self._connect()) as db:
            rows = db.execute("SELECT id, key, report_sha256 FROM notifications ORDER BY id").fetchall()
        return [dict(zip(("id", "key", "report_sha256"), r)) for r in rows]

    def reads(self, name: str | None = None) -> int:
        """How many times ``read_doc`` really ran (for document ``name``, or for any)."""
        return sum(1 for _, i in self.calls("read_doc") if name is None or i.get("name") == name)

    def saved_reports(self) -> list[str]:
        """The paths of the reports saved so far (``reports/report-<n>.md``), in order."""
        names = sorted(self.reports_dir.glob("report-*.md"), key=lambda p: int(p.stem.split("-")[1]))
        return [f"reports/{p.name}" for p in names]


def _world(world: World) -> ReportWorld:
    if not isinstance(world, ReportWorld):
        raise ToolError("this tool needs the report agent's world")
    return world


_STR = {"type": "string"}


@tool(Effect.READ_ONLY, "Read one document; returns its text.", name=_STR)
def read_doc(world: World, name: str, **_: Any) -> str:
    return _world(world).doc_path(name).read_text(encoding="utf-8")


@tool(Effect.READ_ONLY, "The SHA-256 of a document's current text, without reading it.", name=_STR)
def doc_sha256(world: World, name: str, **_: Any) -> str:
    return sha256_text(_world(world).doc_path(name).read_text(encoding="utf-8"))


@tool(Effect.READ_ONLY, "The SHA-256 of a saved report's file; fails when there is no such file.", path=_STR)
def report_sha256(world: World, path: str, **_: Any) -> str:
    target = _world(world).report_file(path)
    if not target.is_file():
        raise ToolError(f"no such report: {path}")
    return sha256_text(target.read_text(encoding="utf-8"))


@tool(Effect.READ_ONLY, "Whether a notification with this key went out: 'sent' or 'not_sent'.", key=_STR)
def notification_status(world: World, key: str, **_: Any) -> str:
    sent = any(n["key"] == key for n in _world(world).notifications())
    return SENT if sent else NOT_SENT


@tool(Effect.READ_ONLY, "A task's current status: 'active' or 'cancelled'.", task_id=_STR)
def task_status(world: World, task_id: str, **_: Any) -> str:
    status = _world(world).task_status(task_id)
    if status is None:
        raise ToolError(f"no such task: {task_id}")
    return status


@tool(Effect.SIDE_EFFECT, 'Save a report; returns JSON {"path": ..., "sha256": ...}.', text=_STR)
def save_report(world: World, text: str, **_: Any) -> str:
    path, digest = _world(world).save_report(text)
    return json.dumps({"path": path, "sha256": digest})


@tool(
    Effect.SIDE_EFFECT,
    "Notify the reviewer that a report is ready. Every call notifies once more.",
    report_sha256=_STR,
    key=_STR,
)
def notify_reviewer(world: World, report_sha256: str, key: str, **_: Any) -> str:
    number = _world(world).notify(report_sha256, key)
    return f"Reviewer notified (#{number})."


REPORT_TOOLS: tuple[Tool, ...] = (
    read_doc,
    doc_sha256,
    report_sha256,
    notification_status,
    task_status,
    save_report,
    notify_reviewer,
)
"""The report agent's toolbox, read-only tools first."""


def report_toolbox(world: ReportWorld) -> Toolbox:
    """The report agent's tools on ``world``."""
    return Toolbox(world, REPORT_TOOLS)
