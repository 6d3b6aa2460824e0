"""Reconciling a dangling call: what resume does with ``pending_tool_use``.

A strategy is any ``reconcile(cp, tools) -> Checkpoint``; a learner's function plugs in the same way.
"""

from __future__ import annotations

from collections.abc import Callable

from .checkpoint import Checkpoint
from .errors import ToolError
from .ledger import idempotency_key
from .tools import Toolbox

Reconcile = Callable[[Checkpoint, Toolbox], Checkpoint]

STATUS_UNKNOWN = (
    "Execution status unknown: the process crashed after this call was requested and before its "
    "result was recorded, so it may or may not have taken effect. Check before acting again."
)


def tool_result(tool_use_id: str, content: str, *, is_error: bool = False) -> dict:
    """A tool_result block; ``is_error`` only when true, as the API examples write it."""
    block = {"type": "tool_result", "tool_use_id": tool_use_id, "content": content}
    if is_error:
        block["is_error"] = True
    return block


def answer_pending(cp: Checkpoint, content: str, *, is_error: bool = False) -> Checkpoint:
    """Append the pending call's tool_result as one user message and clear the pending call."""
    p = cp.pending_tool_use
    assert p is not None
    cp.messages.append({"role": "user", "content": [tool_result(p.id, content, is_error=is_error)]})
    cp.pending_tool_use = None
    return cp


def _run(cp: Checkpoint, tools: Toolbox, key: str | None = None) -> Checkpoint:
    p = cp.pending_tool_use
    assert p is not None
    try:
        return answer_pending(cp, tools.execute(p.name, p.input, idempotency_key=key))
    except ToolError as e:  # an ordinary tool failure: the model is told, as in the loop
        return answer_pending(cp, str(e), is_error=True)


def reconcile_none(cp: Checkpoint, tools: Toolbox) -> Checkpoint:
    """Naive resume: leave the dangling call as it is (the API refuses it with a 400)."""
    return cp


def reconcile_delete(cp: Checkpoint, tools: Toolbox) -> Checkpoint:
    """Drop the assistant message that asked for the call: hides the fact, not the risk."""
    if cp.pending_tool_use is None:
        return cp
    cp.messages.pop()
    cp.pending_tool_use = None
    return cp


def reconcile_rerun(cp: Checkpoint, tools: Toolbox) -> Checkpoint:
    """Run the call again whatever it does (the postmortem's production code)."""
    if cp.pending_tool_use is None:
        return cp
    return _run(cp, tools)


def reconcile_by_effect(cp: Checkpoint, tools: Toolbox) -> Checkpoint:
    """The lesson's rule: re-run read-only tools; for anything else, say the status is unknown."""
    p = cp.pending_tool_use
    if p is None:
        return cp
    if tools.is_read_only(p.name):
        return _run(cp, tools)
    return answer_pending(cp, STATUS_UNKNOWN, is_error=True)


def reconcile_by_effect_ledger(cp: Checkpoint, tools: Toolbox) -> Checkpoint:
    """By effect, with receipts: a side-effecting call is finished under its idempotency key.

    A receipt means it already happened (its result is reused); otherwise it runs under the
    key, and the outbox dedupes on that key if the crash fell between effect and receipt.
    Without a ledger it falls back to the lesson's rule.
    """
    p = cp.pending_tool_use
    if p is None:
        return cp
    if tools.is_read_only(p.name):
        return _run(cp, tools)
    if tools.ledger is None or p.name not in tools:
        return answer_pending(cp, STATUS_UNKNOWN, is_error=True)
    return _run(cp, tools, idempotency_key(cp.run_id, p.id))


reconcile = reconcile_by_effect
"""The lesson's ``reconcile``: by tool effect, no ledger."""

STRATEGIES: dict[str, Reconcile] = {
    "none": reconcile_none,
    "delete": reconcile_delete,
    "rerun": reconcile_rerun,
    "by_effect": reconcile_by_effect,
    "by_effect_ledger": reconcile_by_effect_ledger,
}
"""Built-in strategies by name. ``none`` is naive resume, for showing the API's 400."""
