"""The answer strategies: reconcile by tool effect, and by effect with a side-effect ledger.

The instructor's side only (the student kit never holds ``course/hidden/``): they are what the
reconcile and postmortem exercises ask the learner to write. Importing this module registers
``by_effect`` and ``by_effect_ledger`` in :data:`~resumable_core.strategies.STRATEGIES`, so the
CLI, the simulator and the crash matrix offer them; importing it again changes nothing. It
imports only the core, so a plain ``pip install .`` can use it::

    from resumable_core.course.hidden import strategies as answers
    answers.reconcile_by_effect(cp, tools)
"""

from __future__ import annotations

from ...checkpoint import Checkpoint
from ...errors import ToolError
from ...ledger import idempotency_key
from ...strategies import (
    STATUS_UNKNOWN,
    STRATEGIES,
    Strategy,
    answer_pending,
    register,
)
from ...tools import Toolbox


def _settle_by_effect(cp: Checkpoint, tools: Toolbox) -> Checkpoint:
    """Answer the first pending call by the lesson's rule."""
    p = cp.pending_tool_uses[0]
    if not tools.is_read_only(p.name):
        return answer_pending(cp, STATUS_UNKNOWN, is_error=True)
    try:
        return answer_pending(cp, tools.execute(p.name, p.input))
    except ToolError as e:  # an ordinary tool failure: the model is told, as in the loop
        return answer_pending(cp, str(e), is_error=True)


def _settle_by_effect_ledger(cp: Checkpoint, tools: Toolbox) -> Checkpoint:
    """Answer the first pending call by effect, finishing a side effect under its idempotency key."""
    p = cp.pending_tool_uses[0]
    if tools.is_read_only(p.name) or tools.ledger is None or p.name not in tools:
        return _settle_by_effect(cp, tools)
    try:
        output = tools.execute(p.name, p.input, idempotency_key=idempotency_key(cp.run_id, p.id))
    except ToolError as e:  # an ordinary tool failure: the model is told, as in the loop
        return answer_pending(cp, str(e), is_error=True)
    return answer_pending(cp, output)


def reconcile_by_effect(cp: Checkpoint, tools: Toolbox) -> Checkpoint:
    """The lesson's rule: re-run read-only tools; for anything else, say the status is unknown."""
    while cp.pending_tool_uses:
        cp = _settle_by_effect(cp, tools)
    return cp


def reconcile_by_effect_ledger(cp: Checkpoint, tools: Toolbox) -> Checkpoint:
    """By effect, with receipts: a side-effecting call is finished under its idempotency key.

    A receipt means it already happened (its result is reused); otherwise it runs under the
    key, and the outbox dedupes on that key if the crash fell between effect and receipt.
    Without a ledger it falls back to the lesson's rule.
    """
    while cp.pending_tool_uses:
        cp = _settle_by_effect_ledger(cp, tools)
    return cp


reconcile = reconcile_by_effect
"""The reconcile exercise's answer: by tool effect, no ledger."""

ANSWERS = (
    Strategy(
        "by_effect", reconcile_by_effect, "the lesson's rule: re-run read-only tools; otherwise answer “status unknown”"
    ),
    Strategy(
        "by_effect_ledger",
        reconcile_by_effect_ledger,
        "by effect, plus receipts and an idempotency key the outbox dedupes on",
        needs_ledger=True,
    ),
)
"""The answer strategies, in menu order (after the core's none, delete and rerun)."""

for _answer in ANSWERS:
    if _answer.name not in STRATEGIES:  # a reload, or a second import path, registers nothing twice
        register(_answer)
