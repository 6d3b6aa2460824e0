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
from .errors import CheckpointInconsistentError, CheckpointTaskMismatchError, ReconcileResultError, ToolError
from .lease import Lease
from .ledger import idempotency_key
from .strategies import Reconcile, tool_result
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


def _record_response(cp: Checkpoint, response: Any) -> dict[str, Any] | None:
    """Append the model's reply to the state and count its tokens; return its tool_use block, if any."""
    cp.tokens_used += _spent_tokens(response.usage)
    content = [_block_json(b) for b in response.content]
    cp.messages.append({"role": "assistant", "content": content})
    return next((b for b in content if b["type"] == "tool_use"), None)


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
    finished run without calling the model, reconcile a dangling call with ``reconcile`` (required:
    the caller decides what a dangling call means) and save the reconciled state before the next
    model call. Each turn is charged on disk before its model call, and
    ``turns`` and ``tokens_used`` carry over, so ``max_turns`` bounds the task's model calls
    across any number of crashes.

    The model is asked for one tool call per turn (``disable_parallel_tool_use``): the checkpoint
    has one ``pending_tool_use`` slot and save point B records one result. With parallel calls a
    crash could leave several dangling calls, some already run, and one slot could not say which.

    ``crash`` makes this process SIGKILL itself at a named point (use it in a child process:
    see :mod:`resumable_core.crash`).
    """
    path = Path(checkpoint_path)
    client = client if client is not None else make_client()

    def boundary(point: str, tool: str | None = None) -> None:
        if crash is not None and crash.matches(point, cp.turns, tool):
            kill_self()

    def save(point: str | None = None, tool: str | None = None) -> None:
        with lease.holding():  # renewed and still ours: a resumer that lost it writes nothing
            save_checkpoint(cp, path, midway=(lambda: boundary(point, tool)) if point else None)

    with Lease.take(path, wait=lease_wait) as lease:  # one resumer per run, before anything is read
        resumed = path.exists()  # nobody else can create it now: we hold the lease
        cp = load_checkpoint(path) or new_checkpoint(task, run_id=run_id)
        if cp.task != task:
            raise CheckpointTaskMismatchError(path, task, cp.task)
        if cp.is_finished():
            return RunResult("already_finished", cp, resumed=True, model_calls=0)
        toolbox = toolbox.fenced(lease.fence(cp.run_id))  # its writes carry the lease's fencing token
        if cp.pending_tool_use is not None:
            cp = _reconciled(reconcile, cp, toolbox)
            if problem := consistency_problem(cp):
                raise CheckpointInconsistentError(path, f"after reconcile: {problem}")
            save()  # persist the reconciled state before the next model call

        calls = 0
        while cp.turns < max_turns:
            cp.turns += 1
            boundary("before_model_call")
            save()  # charge the turn before the spend: a crash from here on still counts it
            response = client.messages.create(
                model=model_id(),
                max_tokens=MAX_TOKENS,
                tools=toolbox.schemas(),
                tool_choice={"type": "auto", "disable_parallel_tool_use": True},
                messages=cp.messages,
            )
            calls += 1
            use = _record_response(cp, response)
            cp.pending_tool_use = PendingToolUse(id=use["id"], name=use["name"], input=use["input"]) if use else None
            tool = use["name"] if use else None
            boundary("after_response", tool)
            save("during_save_a", tool)  # save point A
            boundary("after_save_a", tool)
            if use is None:
                return RunResult("finished", cp, resumed=resumed, model_calls=calls)

            result = _run_tool(toolbox, cp.run_id, use)  # with a ledger, a side effect runs under its key
            boundary("after_tool", tool)
            cp.messages.append({"role": "user", "content": [result]})
            cp.pending_tool_use = None
            save("during_save_b", tool)  # save point B
            boundary("after_save_b", tool)
        return RunResult("max_turns", cp, resumed=resumed, model_calls=calls)
