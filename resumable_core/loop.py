"""The agent loop with save points A and B, and the resume path at its top."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .checkpoint import (
    Checkpoint,
    PendingToolUse,
    consistency_problem,
    load_checkpoint,
    new_checkpoint,
    save_checkpoint,
    text_of,
)
from .claude import MAX_TOKENS, make_client, model_id
from .crash import CrashPlan, kill_self
from .errors import (
    CheckpointInconsistentError,
    CheckpointTaskMismatchError,
    ReconcileNotCallableError,
    ReconcileResultError,
    ToolError,
)
from .lease import Lease
from .ledger import idempotency_key
from .strategies import STRATEGIES, Reconcile, tool_result
from .tools import Effect, Toolbox

MAX_TURNS = 40


@dataclass
class RunResult:
    """How a call to :func:`run_agent` ended."""

    status: Literal["finished", "already_finished", "max_turns"]
    """``finished``: the model gave its final answer in this call; ``already_finished``: the
    checkpoint was of a finished run and no model call was made; ``max_turns``: the cap was hit."""
    checkpoint: Checkpoint
    resumed: bool
    """True when the run continued from a checkpoint on disk."""
    model_calls: int
    """Model calls made by this call (not the run's total: that is ``checkpoint.turns``)."""

    @property
    def final_text(self) -> str | None:
        """The text of the model's final reply, when the run is finished."""
        if not self.checkpoint.is_finished():
            return None
        return text_of(self.checkpoint.messages[-1]["content"])


def _block_json(block: Any) -> dict[str, Any]:
    # Keep blocks exactly as the API accepts them back.
    if block.type == "text":
        return {"type": "text", "text": block.text}
    if block.type == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": dict(block.input)}
    return block.to_dict()


def _spent_tokens(usage: Any) -> int:
    """Every token a call is billed for: input, output and the prompt cache's writes and reads."""
    fields = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    return sum(getattr(usage, f, None) or 0 for f in fields)


def _record_response(cp: Checkpoint, response: Any) -> list[dict[str, Any]]:
    """Append the model's reply to the state, count its tokens, and make its calls pending.

    Returns the reply's tool_use blocks in block order (none: the final answer)."""
    cp.tokens_used += _spent_tokens(response.usage)
    content = [_block_json(b) for b in response.content]
    cp.messages.append({"role": "assistant", "content": content})
    uses = [b for b in content if b["type"] == "tool_use"]
    cp.pending_tool_uses = [PendingToolUse(id=u["id"], name=u["name"], input=u["input"]) for u in uses]
    cp.recorded_results = []
    return uses


def _record_result(cp: Checkpoint, result: dict[str, Any]) -> None:
    """Record the first pending call's tool_result; after the turn's last, send them all in one user message."""
    cp.pending_tool_uses = cp.pending_tool_uses[1:]
    cp.recorded_results = [*cp.recorded_results, result]
    if not cp.pending_tool_uses:  # the turn's every call is answered: one tool_result per tool_use, in order
        cp.messages.append({"role": "user", "content": cp.recorded_results})
        cp.recorded_results = []


def _run_tool(toolbox: Toolbox, run_id: str, use: dict[str, Any]) -> dict[str, Any]:
    """Run the call the model asked for; its tool_result block (an ordinary failure has is_error)."""
    # Keys go with receipts: without a ledger the run is the lessons' keyless incident.
    keyed = toolbox.ledger is not None and toolbox.effect(use["name"]) is Effect.SIDE_EFFECT
    key = idempotency_key(run_id, use["id"]) if keyed else None
    try:
        output, is_error = toolbox.execute(use["name"], use["input"], idempotency_key=key), False
    except ToolError as e:  # an ordinary failure: the call finished, and the model is told
        output, is_error = str(e), True
    return tool_result(use["id"], output, is_error=is_error)


def _reconciled(reconcile: Reconcile, cp: Checkpoint, toolbox: Toolbox) -> Checkpoint:
    """What ``reconcile`` made of ``cp``; anything but a Checkpoint is refused here, naming the fix."""
    result: object = reconcile(cp, toolbox)
    if not isinstance(result, Checkpoint):
        raise ReconcileResultError(getattr(reconcile, "__name__", repr(reconcile)), result)
    return result


def run_agent(
    task: str,
    *,
    checkpoint_path: str | Path,
    toolbox: Toolbox,
    client: Any = None,
    reconcile: Reconcile,
    max_turns: int = MAX_TURNS,
    crash: CrashPlan | None = None,
    run_id: str | None = None,
    lease_wait: float = 0.0,
) -> RunResult:
    """Run ``task`` to its end, or resume it from ``checkpoint_path`` if a checkpoint is there.

    First take the run's lease (:mod:`resumable_core.lease`): a second resumer of the same run
    is refused with ``LeaseHeldError``, or waits up to ``lease_wait`` seconds. Every save renews
    the lease and happens only while it is ours, and the tools' writes carry its fencing token.

    Resume: load (version and consistency checked), refuse another task's checkpoint, report a
    finished run without calling the model, reconcile the dangling calls with ``reconcile``
    (required: the caller decides what a dangling call means; it settles every pending call of
    the turn, keeping the results already recorded) and save the reconciled state before the
    next model call. Each turn is charged on disk before its model call, and
    ``turns`` and ``tokens_used`` carry over, so ``max_turns`` bounds the task's model calls
    across any number of crashes.

    A turn may ask for several tools (parallel tool use, the API's default). They run one by
    one in block order, each followed by its own save point B, so a crash between two of them
    leaves the first's result recorded and the rest pending. When the last is answered, every
    result goes in one user message, one ``tool_result`` per ``tool_use``, in the blocks' order.

    ``crash`` makes this process SIGKILL itself at a named point (use it in a child process:
    see :mod:`resumable_core.crash`).
    """
    if not callable(reconcile):  # a strategy's name, say: refused now, not at the first dangling call
        raise ReconcileNotCallableError(reconcile, list(STRATEGIES))
    path = Path(checkpoint_path)
    client = client if client is not None else make_client()

    def boundary(point: str, *tools: str) -> None:
        # a turn-level point (the model's reply, save A) matches the plan's tool if the turn calls it
        if crash is not None and any(crash.matches(point, cp.turns, t) for t in tools or (None,)):
            kill_self()

    def save(point: str | None = None, *tools: str) -> None:
        with lease.holding():  # renewed and still ours: a resumer that lost it writes nothing
            save_checkpoint(cp, path, midway=(lambda: boundary(point, *tools)) if point else None)

    with Lease.take(path, wait=lease_wait) as lease:  # one resumer per run, before anything is read
        resumed = path.exists()  # nobody else can create it now: we hold the lease
        cp = load_checkpoint(path) or new_checkpoint(task, run_id=run_id)
        if cp.task != task:
            raise CheckpointTaskMismatchError(path, task, cp.task)
        if cp.is_finished():
            return RunResult("already_finished", cp, resumed=True, model_calls=0)
        toolbox = toolbox.fenced(lease.fence(cp.run_id))  # its writes carry the lease's fencing token
        if cp.pending_tool_uses:
            cp = _reconciled(reconcile, cp, toolbox)
            if problem := consistency_problem(cp):
                raise CheckpointInconsistentError(path, "after reconcile: {problem}", problem=problem)
            save()  # persist the reconciled state before the next model call

        calls = 0
        while cp.turns < max_turns:
            cp.turns += 1
            boundary("before_model_call")
            save()  # charge the turn before the spend: a crash from here on still counts it
            response = client.messages.create(
                model=model_id(), max_tokens=MAX_TOKENS, tools=toolbox.schemas(), messages=cp.messages
            )
            calls += 1
            uses = _record_response(cp, response)
            names = [u["name"] for u in uses]
            boundary("after_response", *names)
            save("during_save_a", *names)  # save point A
            boundary("after_save_a", *names)
            if not uses:
                return RunResult("finished", cp, resumed=resumed, model_calls=calls)

            for use in uses:  # in block order: the results go back in this order
                result = _run_tool(toolbox, cp.run_id, use)  # with a ledger, a side effect runs under its key
                boundary("after_tool", use["name"])
                _record_result(cp, result)
                save("during_save_b", use["name"])  # save point B, one per call
                boundary("between_tools" if cp.pending_tool_uses else "after_save_b", use["name"])
        return RunResult("max_turns", cp, resumed=resumed, model_calls=calls)
