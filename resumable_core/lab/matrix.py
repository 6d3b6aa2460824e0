"""Crash one run for real and resume it: one cell of the crash matrix, or the whole matrix."""

from __future__ import annotations

import contextlib
import json
import random
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..checkpoint import Checkpoint, load_checkpoint, pending_calls
from ..crash import CRASH_POINT_HELP, points_passed, run_in_child
from ..errors import CheckpointError
from ..loop import RunResult
from ..run_folder import RunFolder, count_effects, crash_plan
from ..scenarios import Scenario, one_call_scenarios
from ..scenarios import scenario as scenario_for
from ..strategies import Reconcile, matrix_strategies, strategy_named
from .columns import table
from .core_words import core
from .i18n import _

RECORDED_MATRIX = Path(__file__).resolve().parent / "fixtures" / "recorded_matrix.json"
"""The answer strategies' crash matrix rows, recorded on the instructor's side
(``python -m resumable_core.course.recorded_matrix`` writes it)."""

RANDOM_INSTANT = "random"
"""The ``crash_point`` of a cell killed at a random instant (:func:`kill_at_random_instant`)."""


@dataclass
class MatrixRow:
    """One cell of the crash matrix."""

    crash_point: str
    tool: str
    """The scenario's key in :data:`~resumable_core.scenarios.SCENARIOS`: the tool whose call was
    crashed, or a parallel turn's tools (``send_email+read_file``)."""
    strategy: str
    effects: int
    """How many times the effect of the scenario's tool happened for the crashed call (emails sent,
    files read)."""
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
    turn_effects: dict[str, int] = field(default_factory=dict)
    """For each call of the crashed turn, in block order: how many times its effect happened."""

    def story(self) -> str:
        """The cell told in plain lines."""
        r = self.row
        cp = self.checkpoint_at_crash
        if r.crash_point == RANDOM_INSTANT:
            where = _("Crash at a random instant of the run that calls {tool}").format(tool=r.tool)
        else:
            where = _("Crash {where_in_turn}").format(where_in_turn=where_in_turn(r.crash_point, scenario_for(r.tool)))
        lines = [_("{where}; resume with {strategy}.").format(where=where, strategy=repr(r.strategy))]
        lines.append(
            _("1. The run was killed with SIGKILL.") if self.killed else _("1. The run ended before the crash point.")
        )
        if cp is None:
            lines.append(_("2. No checkpoint was on disk: the resume starts the task afresh."))
        else:
            pending = ", ".join(f"{p['name']} ({p['id']})" for p in pending_calls(cp))
            recorded = ", ".join(f"{_call_name(cp, b)} ({b.get('tool_use_id')})" for b in _recorded(cp))
            lines.append(
                _("2. Checkpoint on disk: turn {turns}, {n_messages} messages, ").format(
                    turns=cp["turns"], n_messages=len(cp["messages"])
                )
                + (_("result recorded for {recorded}, ").format(recorded=recorded) if recorded else "")
                + (_("pending {pending}.").format(pending=pending) if pending else _("nothing pending."))
            )
        lines.append(
            _("3. Emails in the outbox at the crash: {n_outbox_at_crash}.").format(
                n_outbox_at_crash=len(self.outbox_at_crash)
            )
        )
        if self.error:
            lines.append(_("4. The resume was refused by the API (400): {error}").format(error=self.error))
        else:
            finished = (
                _("4. The resumed run finished: {final_text}")
                if r.completed
                else _("4. The resumed run did not finish: {final_text}")
            )
            lines.append(finished.format(final_text=repr(self.final_text)))
        lines.append(
            _("5. Effects of the crashed call: {effects}; emails in the outbox now: {n_outbox}.").format(
                effects=r.effects, n_outbox=len(self.outbox)
            )
        )
        if len(self.turn_effects) > 1:
            each = ", ".join(f"{name} {n}" for name, n in self.turn_effects.items())
            lines.append(_("   Effects of each call of the crashed turn: {each}.").format(each=each))
        lines.append(
            _("   Totals across the crash: {turns} turns, {tokens} tokens.").format(turns=r.turns, tokens=r.tokens)
        )
        return "\n".join(lines)


def where_in_turn(point: str, chosen: Scenario) -> str:
    """Where ``point`` falls in ``chosen``'s crashed turn: the rest of a sentence that starts "Crash "."""
    help_ = core(CRASH_POINT_HELP[point])
    if chosen.calls == 1:
        return _("{help} on the turn that calls {tool}").format(help=help_, tool=chosen.tool)
    first, second, last = chosen.tools[0], chosen.tools[1], chosen.tools[-1]
    turn = _("on the turn that asks for {tools} at once").format(tools=_(" and ").join(chosen.tools))
    if point in ("after_tool", "during_save_b"):
        return _("{help}, at {first}, the first of its {calls} calls ({second} not run yet), {turn}").format(
            help=help_, first=first, calls=chosen.calls, second=second, turn=turn
        )
    if point == "between_tools":
        return _("between {first} (its result saved) and {second} (not run yet), {turn}").format(
            first=first, second=second, turn=turn
        )
    if point == "after_save_b":
        return _("after {last}'s save point B, the turn's last (every call answered), {turn}").format(
            last=last, turn=turn
        )
    return _("{help} (none of its calls has run), {turn}").format(help=help_, turn=turn)


def _recorded(cp: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool_result blocks a raw checkpoint recorded for its last turn (none in a version 1 file)."""
    results = cp.get("recorded_results") or []
    return [b for b in results if isinstance(b, dict)] if isinstance(results, list) else []


def _call_name(cp: dict[str, Any], result: dict[str, Any]) -> str:
    """The name of the tool_use a recorded result answers, read from the raw checkpoint's last message."""
    messages = cp.get("messages") or [{}]
    last = messages[-1] if isinstance(messages, list) else {}
    content = last.get("content") if isinstance(last, dict) else None
    for b in content if isinstance(content, list) else []:
        if isinstance(b, dict) and b.get("type") == "tool_use" and b.get("id") == result.get("tool_use_id"):
            return str(b.get("name"))
    return "?"


def _raw_checkpoint(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None


def resume(box: RunFolder, task: str, strategy: Reconcile) -> tuple[RunResult | None, str | None]:
    """Resume in this process; a 400 from the API is returned as its message, not raised."""
    import anthropic

    try:
        return box.run(task, reconcile=strategy), None
    except anthropic.BadRequestError as e:
        body = e.body if isinstance(e.body, dict) else {}
        return None, (body.get("error") or {}).get("message") or str(e)


def _resume_and_record(
    box: RunFolder, scenario: Scenario, crash_point: str, name: str, fn: Reconcile, *, killed: bool
) -> Cell:
    """After the crash: snapshot the disk and outbox, resume with ``fn``, and tabulate the outcome."""
    at_crash = _raw_checkpoint(box.checkpoint_path)
    outbox_at_crash = box.world.sent_emails()
    load_checkpoint(box.checkpoint_path)  # must never raise: every save is atomic
    result, error = resume(box, scenario.task, fn)
    cp: Checkpoint | None = result.checkpoint if result else _safe_load(box.checkpoint_path)
    row = MatrixRow(
        crash_point=crash_point,
        tool=scenario.key,
        strategy=name,
        effects=count_effects(scenario.key, box.world),
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
        turn_effects={t: count_effects(scenario.key, box.world, t) for t in scenario.tools},
    )


def resolve_strategy(strategy: str | Reconcile) -> tuple[str, Reconcile, bool]:
    """(name, function, needs a ledger) of a registered strategy's name or of any reconcile function.

    An unknown name raises :class:`~resumable_core.errors.UnknownStrategyError`, naming the choices.
    """
    if isinstance(strategy, str):
        named = strategy_named(strategy)
        return named.name, named.reconcile, named.needs_ledger
    return getattr(strategy, "__name__", "my reconcile"), strategy, False


def run_cell(
    crash_point: str,
    scenario: str,
    strategy: str | Reconcile,
    *,
    root: str | Path | None = None,
    ledger: bool | None = None,
) -> Cell:
    """Crash a run for real at ``crash_point`` on ``scenario``'s crashed turn, then resume it.

    ``scenario``: a key of :data:`~resumable_core.scenarios.SCENARIOS` (a tool, or a parallel
    turn's tools such as ``send_email+read_file``: a crash there dies the first time the turn
    passes ``crash_point``, so ``between_tools`` falls after the first call's save point B).
    An unknown scenario or crash point raises ``UnknownScenarioError`` or ``UnknownCrashPointError``
    before any run is crashed, naming the choices.

    ``strategy``: a registered strategy's name (an unknown one raises ``UnknownStrategyError``
    naming the choices), or any ``reconcile(cp, tools)`` function. A function that returns
    anything but a Checkpoint raises ``ReconcileResultError``.
    ``ledger``: give the toolbox a side-effect ledger (default: when the registered strategy
    ``needs_ledger``; pass True for a learner's ledger-using function).
    """
    chosen = scenario_for(scenario)
    name, fn, needs_ledger = resolve_strategy(strategy)
    plan = crash_plan(chosen.key, crash_point)
    folder = (
        contextlib.nullcontext(str(root)) if root is not None else tempfile.TemporaryDirectory(prefix="resumable-cell-")
    )
    with folder as where:
        box = RunFolder.create(where, ledger=needs_ledger if ledger is None else ledger)
        ended = run_in_child(lambda: box.run(chosen.task, crash=plan))
        return _resume_and_record(box, chosen, crash_point, name, fn, killed=ended == "killed")


def _safe_load(path: Path) -> Checkpoint | None:
    try:
        return load_checkpoint(path)
    except CheckpointError:
        return None


def run_matrix(
    strategies: Iterable[str | Reconcile] | None = None,
    scenarios: Iterable[str] | None = None,
    crash_points: Iterable[str] | None = None,
    progress: Callable[[MatrixRow], None] | None = None,
) -> list[MatrixRow]:
    """Every scenario x crash point x strategy, one row each.

    Defaults, read when called: the registry's :func:`~resumable_core.strategies.matrix_strategies`,
    the one-call scenarios (:func:`~resumable_core.scenarios.one_call_scenarios`: the lessons'
    matrix; pass ``scenarios=["send_email+read_file"]`` for the parallel turn's), and the points
    each scenario's crashed turn passes (:func:`~resumable_core.crash.points_passed`: a parallel
    turn's include ``between_tools``).
    """
    rows = []
    for scenario in one_call_scenarios() if scenarios is None else scenarios:
        points = points_passed(scenario_for(scenario).calls) if crash_points is None else list(crash_points)
        for point in points:
            for strategy in matrix_strategies() if strategies is None else strategies:
                row = run_cell(point, scenario, strategy).row
                rows.append(row)
                if progress:
                    progress(row)
    return rows


def format_table(rows: list[MatrixRow]) -> str:
    """The matrix as an aligned text table, its header in now's language (the English is the rows' field names)."""
    header = [_("crash_point"), _("tool"), _("strategy"), _("effects"), _("api_error"), _("completed")]
    header += [_("turns"), _("tokens")]
    return "\n".join(table(header, [[str(v) for v in asdict(r).values()] for r in rows]))


def rows_json(rows: list[MatrixRow]) -> str:
    """The matrix as a JSON list of rows."""
    return json.dumps([asdict(r) for r in rows], indent=2)


def recorded_matrix(scenarios: Iterable[str] | None = None) -> list[MatrixRow]:
    """The crash matrix rows of the answer strategies (``by_effect``, ``by_effect_ledger``), as recorded.

    The student kit does not hold those strategies (writing them is the exercise), so where a
    lesson or the heatmap shows the whole matrix it shows these rows, made by real crashes on the
    instructor's side and stored in :data:`RECORDED_MATRIX`. Same fields as :func:`run_matrix`'s
    rows, and the same default: the one-call scenarios' rows (``scenarios`` picks others, such as
    ``["send_email+read_file"]``).
    """
    wanted = set(one_call_scenarios() if scenarios is None else scenarios)
    rows = [MatrixRow(**row) for row in json.loads(RECORDED_MATRIX.read_text(encoding="utf-8"))]
    return [r for r in rows if r.tool in wanted]


def kill_at_random_instant(
    scenario: str, strategy: str | Reconcile, root: str | Path, rng: random.Random, max_delay: float
) -> Cell:
    """Kill a whole run at a random instant (not a named point), then resume it.

    If the instant falls after the run's end, the cell says ``killed=False`` (resume then finds it finished).
    """
    chosen = scenario_for(scenario)
    name, fn, needs_ledger = resolve_strategy(strategy)
    box = RunFolder.create(root, ledger=needs_ledger)
    ended = run_in_child(lambda: box.run(chosen.task), kill_after=rng.uniform(0, max_delay))
    return _resume_and_record(box, chosen, RANDOM_INSTANT, name, fn, killed=ended == "killed")
