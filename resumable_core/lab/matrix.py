"""Crash one run for real and resume it: one cell of the crash matrix, or the whole matrix."""

from __future__ import annotations

import json
import random
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..checkpoint import Checkpoint, load_checkpoint
from ..crash import CRASH_POINT_HELP, CRASH_POINTS, CrashPlan, run_in_child
from ..errors import CheckpointError
from ..loop import RunResult
from ..scenarios import SCENARIOS, Sandbox, scenario
from ..strategies import STRATEGIES, Reconcile

MATRIX_STRATEGIES = ("delete", "rerun", "by_effect", "by_effect_ledger")


@dataclass
class MatrixRow:
    """One cell of the crash matrix."""

    crash_point: str
    tool: str
    strategy: str
    effects: int
    """How many times the tool's effect happened for the crashed call (emails sent, files read)."""
    api_error: bool
    """The resumed run hit a 400 from the Messages API."""
    completed: bool
    turns: int
    tokens: int


@dataclass
class Cell:
    """Everything one crash-and-resume showed, for the simulator and the lessons."""

    row: MatrixRow
    killed: bool
    checkpoint_at_crash: dict[str, Any] | None
    """The checkpoint file as the crash left it (None: no checkpoint was written yet)."""
    outbox_at_crash: list[dict[str, Any]]
    outbox: list[dict[str, Any]]
    error: str | None
    """The API's error text, when the resume was refused."""
    messages: list[dict[str, Any]] = field(default_factory=list)
    """The conversation after the resume."""
    final_text: str | None = None

    def story(self) -> str:
        """The cell told in plain lines."""
        r = self.row
        cp = self.checkpoint_at_crash
        lines = [
            f"Crash {CRASH_POINT_HELP[r.crash_point]} on the turn that calls {r.tool}; resume with {r.strategy!r}."
        ]
        lines.append(
            "1. The run was killed with SIGKILL." if self.killed else "1. The run ended before the crash point."
        )
        if cp is None:
            lines.append("2. No checkpoint was on disk: the resume starts the task afresh.")
        else:
            p = cp.get("pending_tool_use")
            lines.append(
                f"2. Checkpoint on disk: turn {cp['turns']}, {len(cp['messages'])} messages, "
                + (f"pending {p['name']} ({p['id']})." if p else "nothing pending.")
            )
        lines.append(f"3. Emails in the outbox at the crash: {len(self.outbox_at_crash)}.")
        if self.error:
            lines.append(f"4. The resume was refused by the API (400): {self.error}")
        else:
            lines.append(f"4. The resumed run {'finished' if r.completed else 'did not finish'}: {self.final_text!r}")
        lines.append(f"5. Effects of the crashed call: {r.effects}; emails in the outbox now: {len(self.outbox)}.")
        lines.append(f"   Totals across the crash: {r.turns} turns, {r.tokens} tokens.")
        return "\n".join(lines)


def _raw_checkpoint(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None


def resume(box: Sandbox, task: str, strategy: Reconcile) -> tuple[RunResult | None, str | None]:
    """Resume in this process; a 400 from the API is returned as its message, not raised."""
    import anthropic

    try:
        return box.run(task, reconcile=strategy), None
    except anthropic.BadRequestError as e:
        body = e.body if isinstance(e.body, dict) else {}
        return None, (body.get("error") or {}).get("message") or str(e)


def _resume_and_record(box: Sandbox, tool: str, crash_point: str, name: str, fn: Reconcile, *, killed: bool) -> Cell:
    """After the crash: snapshot the disk and outbox, resume with ``fn``, and tabulate the outcome."""
    at_crash = _raw_checkpoint(box.checkpoint_path)
    outbox_at_crash = box.world.sent_emails()
    load_checkpoint(box.checkpoint_path)  # must never raise: every save is atomic
    result, error = resume(box, SCENARIOS[tool].task, fn)
    cp: Checkpoint | None = result.checkpoint if result else _safe_load(box.checkpoint_path)
    row = MatrixRow(
        crash_point=crash_point,
        tool=tool,
        strategy=name,
        effects=SCENARIOS[tool].count_effects(box.world),
        api_error=error is not None,
        completed=bool(result and result.checkpoint.is_finished()),
        turns=cp.turns if cp else 0,
        tokens=cp.tokens_used if cp else 0,
    )
    return Cell(
        row=row,
        killed=killed,
        checkpoint_at_crash=at_crash,
        outbox_at_crash=outbox_at_crash,
        outbox=box.world.sent_emails(),
        error=error,
        messages=cp.messages if cp else [],
        final_text=result.final_text if result else None,
    )


def run_cell(
    crash_point: str,
    tool: str,
    strategy: str | Reconcile,
    *,
    root: str | Path | None = None,
    ledger: bool | None = None,
) -> Cell:
    """Crash a run for real at ``crash_point`` on the turn that calls ``tool``, then resume it.

    ``ledger``: give the toolbox a side-effect ledger (default: only for ``by_effect_ledger``;
    pass True for a learner's ledger-using function).
    """
    sc = scenario(tool)
    name = strategy if isinstance(strategy, str) else getattr(strategy, "__name__", "my reconcile")
    fn = STRATEGIES[strategy] if isinstance(strategy, str) else strategy
    own_tmp = None
    if root is None:
        own_tmp = tempfile.TemporaryDirectory(prefix="resumable-cell-")
        root = own_tmp.name
    try:
        box = Sandbox.create(root, ledger=(name == "by_effect_ledger") if ledger is None else ledger)
        task = sc.task
        plan = CrashPlan(crash_point, tool=tool, turn=sc.reference_turn())
        ended = run_in_child(lambda: box.run(task, crash=plan))
        return _resume_and_record(box, tool, crash_point, name, fn, killed=ended == "killed")
    finally:
        if own_tmp is not None:
            own_tmp.cleanup()


def _safe_load(path: Path) -> Checkpoint | None:
    try:
        return load_checkpoint(path)
    except CheckpointError:
        return None


def run_matrix(
    strategies: Iterable[str] = MATRIX_STRATEGIES,
    tools: Iterable[str] = tuple(SCENARIOS),
    crash_points: Iterable[str] = CRASH_POINTS,
    progress: Callable[[MatrixRow], None] | None = None,
) -> list[MatrixRow]:
    """Every crash point x tool x strategy, one row each."""
    rows = []
    for tool in tools:
        for point in crash_points:
            for strategy in strategies:
                row = run_cell(point, tool, strategy).row
                rows.append(row)
                if progress:
                    progress(row)
    return rows


def format_table(rows: list[MatrixRow]) -> str:
    """The matrix as an aligned text table."""
    header = ["crash_point", "tool", "strategy", "effects", "api_error", "completed", "turns", "tokens"]
    data = [[str(v) for v in asdict(r).values()] for r in rows]
    widths = [max(len(h), *(len(d[i]) for d in data)) if data else len(h) for i, h in enumerate(header)]
    fmt = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths))  # noqa: E731
    return "\n".join([fmt(header), fmt(["-" * w for w in widths]), *map(fmt, data)])


def rows_json(rows: list[MatrixRow]) -> str:
    """The matrix as a JSON list of rows."""
    return json.dumps([asdict(r) for r in rows], indent=2)


def kill_at_random_instant(tool: str, strategy: str, root: str | Path, rng: random.Random, max_delay: float) -> Cell:
    """Kill a whole run at a random instant (not a named point), then resume it.

    If the instant falls after the run's end, the cell says ``killed=False`` (resume then finds it finished).
    """
    box = Sandbox.create(root, ledger=(strategy == "by_effect_ledger"))
    task = SCENARIOS[tool].task
    ended = run_in_child(lambda: box.run(task), kill_after=rng.uniform(0, max_delay))
    return _resume_and_record(box, tool, "random", strategy, STRATEGIES[strategy], killed=ended == "killed")
