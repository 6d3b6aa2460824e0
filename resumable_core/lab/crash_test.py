"""Crash-test a reader's own functions: a ``resume`` at every crash point, a journal in the middle of an append.

``lab.run_cell`` crashes a run and hands the checkpoint to a reader's ``reconcile``; these do the
same for the other two functions a reader writes::

    lab.crash_test(resume)                                # the email run, killed at every crash point
    lab.crash_test(resume, reconcile=my_reconcile)        # with the reader's reconcile
    lab.crash_test_journal(append_record, read_journal)   # a kill half-way through an append

Each crash is real: a forked child runs the kit's loop (or the reader's ``append_record``) and is
killed with SIGKILL. The reader's ``resume`` then runs in another forked child, so a hang or a
crash of it never takes the kernel down. What the table shows is read from outside the reader's
functions: the world's outbox, the checkpoint on disk, the API's answer. These helpers judge
nothing and hold no resume and no journal: they run the reader's.
"""

from __future__ import annotations

import builtins
import io
import json
import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..checkpoint import Checkpoint, load_checkpoint, pending_calls
from ..claude import make_client
from ..crash import CRASH_POINT_HELP, CrashError, CrashPlan, kill_self, points_passed, run_in_child
from ..errors import CheckpointError
from ..run_folder import RunFolder, count_effects, reference_turn
from ..scenarios import scenario as scenario_for
from ..strategies import STATUS_UNKNOWN, Reconcile, answer_pending, strategy_named
from .columns import pad, table, width
from .i18n import N_, _
from .render import esc, has_side_effect

__all__ = ["CrashTestRow", "CrashTestTable", "JournalStep", "JournalTable", "crash_test", "crash_test_journal"]

RESUME_TIMEOUT = 60.0
"""Seconds the reader's ``resume`` may run in its child before it counts as hung."""
ACCEPTED = N_("accepted")
"""The API's verdict when no request of the resume was refused."""


def _status_unknown_for_every_call(cp: Checkpoint, tools: Any) -> Checkpoint:
    """The default reconcile: a pending call, whatever it is, answered "status unknown" (``is_error``).

    It never repeats an effect, so what the table shows is the resume's doing; it is no answer to
    the reconcile exercise (a read-only call is re-run there). Pass ``reconcile=`` for your own.
    """
    return cp if cp.pending_tool_use is None else answer_pending(cp, STATUS_UNKNOWN, is_error=True)


# -- a resume, crashed at every point ---------------------------------------------------------


@dataclass(frozen=True)
class CrashTestRow:
    """What one crash and the reader's resume of it did, read from outside the resume."""

    crash_point: str
    killed: bool
    """The run died at the crash point (False: it finished before reaching it)."""
    pending_at_crash: str | None
    """The tool the checkpoint on disk had pending at the crash (None: nothing, or no checkpoint)."""
    effects: int
    """How many times the crashed call's effect happened in the world (emails sent, for send_email)."""
    turns: int | None
    """The turns of the checkpoint the resume returned (else of the file on disk)."""
    finished: bool
    verdict: str
    """``accepted``, the API's 400 text, what the resume raised, or that it hung."""


@dataclass(frozen=True)
class CrashTestTable:
    """The rows of :func:`crash_test`; a notebook draws it as a table."""

    tool: str
    rows: tuple[CrashTestRow, ...]

    def _columns(self) -> list[str]:
        effect = _("emails sent") if self.tool == "send_email" else _("{tool} effects").format(tool=self.tool)
        return [
            _("crash point"),
            _("killed"),
            _("pending at crash"),
            effect,
            _("turns"),
            _("finished"),
            _("API's verdict"),
        ]

    def _cells(self, row: CrashTestRow) -> list[str]:
        turns = "" if row.turns is None else str(row.turns)
        pending = row.pending_at_crash or _("nothing")
        return [
            row.crash_point,
            _("yes") if row.killed else _("no"),
            pending,
            str(row.effects),
            turns,
            str(row.finished),
            _(row.verdict) if row.verdict == ACCEPTED else row.verdict,
        ]

    def __str__(self) -> str:
        return "\n".join(table(self._columns(), [self._cells(r) for r in self.rows]))

    def _repr_html_(self) -> str:
        head = "".join(f"<th style='text-align:left;padding:2px 8px'>{esc(c)}</th>" for c in self._columns())
        body = []
        once = has_side_effect(self.tool)  # a read-only call read twice is harmless
        for row in self.rows:
            bad = (once and row.effects != 1) or not row.finished or row.verdict != ACCEPTED
            style = " style='background:#fde2e1'" if bad else ""
            cells = "".join(f"<td style='padding:2px 8px'>{esc(c)}</td>" for c in self._cells(row))
            body.append(f"<tr title='{esc(CRASH_POINT_HELP.get(row.crash_point, ''))}'{style}>{cells}</tr>")
        note = (
            "<p>"
            + _(
                "Your resume of the {tool} run, killed (SIGKILL) at each crash point. A pink "
                "row: the run did not finish, the API refused it or the resume raised, or a side "
                "effect did not happen exactly once."
            ).format(tool=esc(self.tool))
            + "</p>"
        )
        return f"{note}<table class='rs-crash-test'><tr>{head}</tr>{''.join(body)}</table>"


def _raw(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None


def _pending_name(raw: dict[str, Any] | None) -> str | None:
    pending = next(iter(pending_calls(raw or {})), None)  # the first call the crash left pending
    return pending.get("name") if isinstance(pending, dict) else None


def _resume_in_child(resume_fn: Callable[..., Any], args: tuple[Any, ...], reconcile: Reconcile, out: Path) -> None:
    """In the child: run the reader's resume and write how it ended to ``out``."""
    import anthropic

    record: dict[str, Any]
    try:
        result = resume_fn(*args, reconcile=reconcile)
    except anthropic.BadRequestError as e:
        body = e.body if isinstance(e.body, dict) else {}
        record = {"verdict": "400: " + ((body.get("error") or {}).get("message") or str(e))}
    except Exception as e:  # noqa: BLE001 - the reader's error is a row of the table
        record = {"verdict": _("resume raised {error_type}: {error}").format(error_type=type(e).__name__, error=e)}
    else:
        if isinstance(result, Checkpoint):
            record = {"verdict": ACCEPTED, "checkpoint": result.model_dump(mode="json")}
        else:
            record = {
                "verdict": _("resume returned {name}, not the final Checkpoint").format(name=type(result).__name__)
            }
    out.write_text(json.dumps(record), encoding="utf-8")


def _on_disk(path: Path) -> Checkpoint | None:
    try:
        return load_checkpoint(path)
    except CheckpointError:
        return None


def _one_crash(
    resume_fn: Callable[..., Any], root: Path, scenario: str, point: str, reconcile: Reconcile
) -> CrashTestRow:
    chosen = scenario_for(scenario)
    box = RunFolder.create(root)
    plan = CrashPlan(point, tool=chosen.tool, turn=reference_turn(chosen.tool))
    killed = run_in_child(lambda: box.run(chosen.task, crash=plan)) == "killed"
    pending = _pending_name(_raw(box.checkpoint_path))
    out = root / "resume-outcome.json"
    args = (str(box.checkpoint_path), chosen.task, box.toolbox, make_client(live=False))
    try:
        run_in_child(lambda: _resume_in_child(resume_fn, args, reconcile, out), timeout=RESUME_TIMEOUT)
        record = json.loads(out.read_text(encoding="utf-8")) if out.exists() else {"verdict": _("resume was killed")}
    except CrashError:
        record = {
            "verdict": _("resume hung (still running after {resume_timeout:g} s)").format(resume_timeout=RESUME_TIMEOUT)
        }
    returned = Checkpoint.model_validate(record["checkpoint"]) if "checkpoint" in record else None
    final = returned or _on_disk(box.checkpoint_path)
    return CrashTestRow(
        crash_point=point,
        killed=killed,
        pending_at_crash=pending,
        effects=count_effects(chosen.tool, box.world),
        turns=final.turns if final else None,
        finished=bool(returned and returned.is_finished()),
        verdict=record["verdict"],
    )


ONE_CALL_POINTS = points_passed(calls=1)
"""The crash points of a turn that asks for one tool: every turn of the one-call scenarios (the email and notes runs)."""


def crash_test(
    resume_fn: Callable[..., Any],
    *,
    reconcile: str | Reconcile | None = None,
    scenario: str = "send_email",
    crash_points: Iterable[str] = ONE_CALL_POINTS,
) -> CrashTestTable:
    """Kill a real run at every crash point and hand each checkpoint to ``resume_fn``; the table of what happened.

    ``resume_fn(path, task, tools, client, *, reconcile)`` is the reader's (the resume exercise's
    signature): it gets the crashed run's checkpoint path, its task, the run's toolbox and the
    scripted Claude. ``reconcile``: what it is handed for a dangling call; a registered
    strategy's name or a function (default: every pending call answered "status unknown").
    ``scenario``: ``send_email`` (the email run) or ``read_file`` (the notes run).
    """
    fn = (
        _status_unknown_for_every_call
        if reconcile is None
        else strategy_named(reconcile).reconcile
        if isinstance(reconcile, str)
        else reconcile
    )
    with tempfile.TemporaryDirectory(prefix="resumable-crash-test-") as tmp:
        rows = tuple(_one_crash(resume_fn, Path(tmp) / point, scenario, point, fn) for point in crash_points)
    return CrashTestTable(scenario_for(scenario).tool, rows)


# -- a journal, killed half-way through an append ------------------------------------------------

JOURNAL_RECORDS = (
    {"turn": 1, "role": "assistant", "text": "I will read the notes."},
    {"turn": 2, "role": "user", "text": "tool_result: the notes"},
    {"turn": 3, "role": "assistant", "text": "Summary written."},
)
"""The records :func:`crash_test_journal` appends; the kill comes during the append of the next one."""
KILLED_RECORD = {"turn": 4, "role": "user", "text": "tool_result: the kill comes half-way through this record"}


@dataclass(frozen=True)
class JournalStep:
    """One step of :func:`crash_test_journal`: what was done, and what ``read_journal`` said after it."""

    step: str
    read: str
    """What ``read_journal`` returned (how many records, which turns) or raised."""
    size: int
    """The journal file's size in bytes after the step."""


@dataclass(frozen=True)
class JournalTable:
    """The steps of :func:`crash_test_journal`; a notebook draws it as a table."""

    steps: tuple[JournalStep, ...]

    def __str__(self) -> str:
        columns = max(width(s.step) for s in self.steps)
        return "\n".join(
            _("{step}  {size:>6} bytes  read_journal: {read}").format(
                step=pad(s.step, columns), size=s.size, read=s.read
            )
            for s in self.steps
        )

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td style='padding:2px 8px'>{esc(s.step)}</td><td style='padding:2px 8px'>{s.size}</td>"
            f"<td style='padding:2px 8px'>{esc(s.read)}</td></tr>"
            for s in self.steps
        )
        head = (
            "<tr><th style='text-align:left'>" + esc(_("step")) + "</th><th>" + esc(_("bytes")) + "</th>"
            "<th style='text-align:left'>read_journal</th></tr>"
        )
        return f"<table class='rs-crash-test-journal'>{head}{rows}</table>"


class _DyingFile:
    """A file opened for writing whose first write puts half its data on disk, then dies of SIGKILL."""

    def __init__(self, f: Any) -> None:
        self._f = f

    def write(self, data: Any) -> int:
        self._f.write(data[: max(1, len(data) // 2)])
        self._f.flush()
        kill_self()
        return len(data)  # pragma: no cover - never reached

    def __getattr__(self, name: str) -> Any:
        return getattr(self._f, name)

    def __enter__(self) -> _DyingFile:
        return self

    def __exit__(self, *exc: Any) -> Any:
        return self._f.__exit__(*exc)

    def __iter__(self) -> Any:
        return iter(self._f)


def _die_in_first_write(namespace: dict[str, Any]) -> Callable[[], None]:
    """In a forked child: the first write of the call that follows (any file opened for writing, os.write or os.pwrite) stops half done, and the child dies of SIGKILL.

    ``namespace`` is the called function's globals: IPython puts its own ``open`` there. Returns
    what puts the real functions back (for a call that ends without writing, or raises).
    """
    real_open, real_write, real_pwrite = io.open, os.write, os.pwrite

    def dying_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        f = real_open(file, mode, *args, **kwargs)
        return _DyingFile(f) if any(ch in mode for ch in "wax+") else f

    def dying_write(fd: int, data: bytes) -> int:
        real_write(fd, data[: max(1, len(data) // 2)])
        kill_self()
        return len(data)  # pragma: no cover - never reached

    def dying_pwrite(fd: int, data: bytes, offset: int) -> int:
        real_pwrite(fd, data[: max(1, len(data) // 2)], offset)
        kill_self()
        return len(data)  # pragma: no cover - never reached

    builtins.open = io.open = dying_open  # only in the forked child, which never returns
    ns_open = namespace.get("open")
    if ns_open is not None:
        namespace["open"] = dying_open
    os.write, os.pwrite = dying_write, dying_pwrite  # type: ignore[assignment]  # likewise

    def undo() -> None:
        builtins.open = io.open = real_open
        if ns_open is not None:
            namespace["open"] = ns_open
        os.write, os.pwrite = real_write, real_pwrite

    return undo


def _read(read_journal: Callable[[str], Any], path: Path) -> str:
    try:
        records = read_journal(str(path))
    except Exception as e:  # noqa: BLE001 - what the reader's function raised is the finding
        return _("raised {error_type}: {error}").format(error_type=type(e).__name__, error=e)
    if not isinstance(records, list):
        return _("returned {name}, not a list of records").format(name=type(records).__name__)
    turns = [r.get("turn") if isinstance(r, dict) else "?" for r in records]
    return _("{count} records (turns {turns})").format(count=len(records), turns=turns)


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def crash_test_journal(
    append_record: Callable[[str, dict[str, Any]], None], read_journal: Callable[[str], list[dict[str, Any]]]
) -> JournalTable:
    """Append three records, kill a child half-way through a fourth, and show what ``read_journal`` returns.

    ``append_record(path, record)`` and ``read_journal(path)`` are the reader's (the journal
    exercise's signatures). After the kill: append the fourth again (a resume that retries), and
    read a copy of the journal with one byte in its middle record changed. The table says what
    ``read_journal`` returned or raised after each step; it does not judge.
    """
    steps = []
    with tempfile.TemporaryDirectory(prefix="resumable-journal-test-") as tmp:
        path = Path(tmp) / "journal"
        try:
            for record in JOURNAL_RECORDS:
                append_record(str(path), dict(record))
            appended = _("appended {count} records").format(count=len(JOURNAL_RECORDS))
        except Exception as e:  # noqa: BLE001 - shown, and the steps after it still run
            appended = _("append_record raised {error_type}: {error}").format(error_type=type(e).__name__, error=e)
        steps.append(JournalStep(appended, _read(read_journal, path), _size(path)))
        good = path.read_bytes() if path.exists() else b""

        def doomed() -> None:
            undo = _die_in_first_write(getattr(append_record, "__globals__", {}))
            try:
                append_record(str(path), dict(KILLED_RECORD))
            finally:  # the child reports a raise through os.write: it must be the real one again
                undo()

        try:
            killed = (
                _("killed (SIGKILL) half-way through appending turn 4")
                if run_in_child(doomed) == "killed"
                else _("no write in appending turn 4")
            )
        except CrashError as e:
            lines = [ln for ln in str(e).splitlines() if ln.strip()]
            killed = _("append_record failed in the child: {reason}").format(reason=lines[-1] if lines else e)
        steps.append(JournalStep(killed, _read(read_journal, path), _size(path)))
        try:
            append_record(str(path), dict(KILLED_RECORD))
            again = _("appended turn 4 again, after the kill")
        except Exception as e:  # noqa: BLE001 - shown
            again = _("appending turn 4 again raised {error_type}: {error}").format(
                error_type=type(e).__name__, error=e
            )
        steps.append(JournalStep(again, _read(read_journal, path), _size(path)))
        if len(good) > 8:
            corrupt = Path(tmp) / "corrupt"
            middle = len(good) // 2  # NUL bytes are valid nowhere in a text record, in a string neither
            corrupt.write_bytes(good[: middle - 2] + b"\0" * 4 + good[middle + 2 :])
            label = _("a copy of the {count}-record journal, 4 bytes in its middle zeroed").format(
                count=len(JOURNAL_RECORDS)
            )
            steps.append(JournalStep(label, _read(read_journal, corrupt), len(good)))
    return JournalTable(tuple(steps))
