"""Reconciling dangling calls: what resume does with ``pending_tool_uses``.

A strategy is any ``reconcile(cp, tools) -> Checkpoint``; a learner's function plugs in the same way.
The named ones live in one registry, :data:`STRATEGIES`: the CLI's choices, the simulator's menu
and help, and the crash matrix all read it, so :func:`register` is the one place to add one.

The core registers only the naive moves (``none``, ``delete``, ``rerun``): the right answers are
the exercise, so they live on the instructor's side (``resumable_core.course.hidden.strategies``
registers ``by_effect`` and ``by_effect_ledger`` when it is imported).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .checkpoint import Checkpoint, PendingToolUse
from .errors import ToolError, UnknownStrategyError
from .tools import Toolbox

Reconcile = Callable[[Checkpoint, Toolbox], Checkpoint]

STATUS_UNKNOWN = (
    "Execution status unknown: the process crashed after this call was requested and before its "
    "result was recorded, so it may or may not have taken effect. Check before acting again."
)


def tool_result(tool_use_id: str, content: str, *, is_error: bool = False) -> dict:
    """A tool_result block; ``is_error`` only when true, as the API examples write it."""
    block: dict[str, object] = {"type": "tool_result", "tool_use_id": tool_use_id, "content": content}
    if is_error:
        block["is_error"] = True
    return block


def answer_pending(cp: Checkpoint, content: str, *, is_error: bool = False) -> Checkpoint:
    """Record the first pending call's tool_result; once none is pending, send the turn's results.

    For a turn of one call: append its tool_result as one user message and clear the pending
    call. For several: the result joins ``recorded_results``, and the turn's last one appends one
    user message holding them all, in the blocks' order."""
    p = _pending(cp)
    cp.pending_tool_uses = cp.pending_tool_uses[1:]
    cp.recorded_results = [*cp.recorded_results, tool_result(p.id, content, is_error=is_error)]
    if not cp.pending_tool_uses:
        cp.messages.append({"role": "user", "content": cp.recorded_results})
        cp.recorded_results = []
    return cp


def _pending(cp: Checkpoint) -> PendingToolUse:
    if cp.pending_tool_use is None:
        raise ValueError("this checkpoint has no pending tool call to answer; check pending_tool_uses first")
    return cp.pending_tool_use


def _run(cp: Checkpoint, tools: Toolbox) -> Checkpoint:
    p = _pending(cp)
    try:
        return answer_pending(cp, tools.execute(p.name, p.input))
    except ToolError as e:  # an ordinary tool failure: the model is told, as in the loop
        return answer_pending(cp, str(e), is_error=True)


def reconcile_none(cp: Checkpoint, tools: Toolbox) -> Checkpoint:
    """Naive resume: leave the dangling calls as they are (the API refuses them with a 400)."""
    return cp


def reconcile_delete(cp: Checkpoint, tools: Toolbox) -> Checkpoint:
    """Drop the assistant message that asked for the calls, and any result recorded for them:
    hides the fact, not the risk."""
    if not cp.pending_tool_uses:
        return cp
    cp.messages.pop()
    cp.pending_tool_uses = []
    cp.recorded_results = []
    return cp


def reconcile_rerun(cp: Checkpoint, tools: Toolbox) -> Checkpoint:
    """Run every pending call again whatever it does (the postmortem's production code)."""
    while cp.pending_tool_uses:
        cp = _run(cp, tools)
    return cp


@dataclass(frozen=True)
class Strategy:
    """A named reconcile strategy, as menus and the matrix show it."""

    name: str
    reconcile: Reconcile
    help: str
    """One line for ``--help`` and the simulator's help text."""
    needs_ledger: bool = False
    """Give its toolbox a side-effect ledger (receipts and idempotency keys)."""
    in_matrix: bool = True
    """Part of the crash matrix's default columns (``none`` is left out: every cell is the API's 400)."""


STRATEGIES: dict[str, Strategy] = {}
"""Every named strategy, by name, in menu order."""


def register(strategy: Strategy) -> Strategy:
    """Add ``strategy`` to :data:`STRATEGIES` (at import time or at runtime); a name is taken once."""
    if strategy.name in STRATEGIES:
        raise ValueError(f"a strategy named {strategy.name!r} is already registered; pick another name")
    STRATEGIES[strategy.name] = strategy
    return strategy


def strategy_named(name: str) -> Strategy:
    """The registered strategy ``name``; an :class:`UnknownStrategyError` names the choices."""
    try:
        return STRATEGIES[name]
    except KeyError:
        raise UnknownStrategyError(name, list(STRATEGIES)) from None


def matrix_strategies() -> list[str]:
    """The crash matrix's default strategies: every registered one with ``in_matrix``."""
    return [s.name for s in STRATEGIES.values() if s.in_matrix]


register(
    Strategy(
        "none",
        reconcile_none,
        "naive resume: leave the dangling tool_use as it is (the API refuses it)",
        in_matrix=False,
    )
)
register(
    Strategy(
        "delete", reconcile_delete, "drop the assistant message that asked for the call (hides the fact, not the risk)"
    )
)
register(Strategy("rerun", reconcile_rerun, "run the call again whatever it does (the postmortem's production code)"))
