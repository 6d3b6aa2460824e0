"""Resumable Agents: resume an agent loop from a checkpoint and reconcile its dangling call.

The public names are re-exported here and loaded on first use, so ``import resumable_core``
is fast and imports neither ``anthropic`` nor ``pydantic`` until they are needed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    # checkpoint
    "Checkpoint": "checkpoint",
    "PendingToolUse": "checkpoint",
    "CHECKPOINT_VERSION": "checkpoint",
    "save_checkpoint": "checkpoint",
    "load_checkpoint": "checkpoint",
    "new_checkpoint": "checkpoint",
    "consistency_problem": "checkpoint",
    # errors
    "ResumableError": "errors",
    "CheckpointError": "errors",
    "CheckpointCorruptError": "errors",
    "CheckpointForeignError": "errors",
    "CheckpointVersionError": "errors",
    "CheckpointInconsistentError": "errors",
    "CheckpointTaskMismatchError": "errors",
    "SecretInCheckpointError": "errors",
    "ToolError": "errors",
    "UnknownToolError": "errors",
    "IdempotencyConflictError": "errors",
    "CrashError": "errors",
    # tools and world
    "Effect": "tools",
    "Tool": "tools",
    "tool": "tools",
    "Toolbox": "tools",
    "DEFAULT_TOOLS": "tools",
    "World": "world",
    "Ledger": "ledger",
    "idempotency_key": "ledger",
    # model
    "make_client": "claude",
    "model_id": "claude",
    "DEFAULT_MODEL": "claude",
    # loop, reconcile, crashes
    "run_agent": "loop",
    "RunResult": "loop",
    "MAX_TURNS": "loop",
    "reconcile": "strategies",
    "STRATEGIES": "strategies",
    "STATUS_UNKNOWN": "strategies",
    "tool_result": "strategies",
    "CrashPlan": "crash",
    "CRASH_POINTS": "crash",
    "run_cell": "lab.matrix",
    "run_matrix": "lab.matrix",
    "Sandbox": "scenarios",
    "SCENARIOS": "scenarios",
    "Scenario": "scenarios",
    "load_exercise_checkpoint": "lab.exercise_checkpoints",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'resumable_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


if TYPE_CHECKING:  # pragma: no cover
    from .checkpoint import CHECKPOINT_VERSION, Checkpoint, PendingToolUse, consistency_problem, load_checkpoint, new_checkpoint, save_checkpoint
    from .claude import DEFAULT_MODEL, make_client, model_id
    from .crash import CRASH_POINTS, CrashPlan
    from .errors import *  # noqa: F403
    from .lab.exercise_checkpoints import load_exercise_checkpoint
    from .ledger import Ledger, idempotency_key
    from .loop import MAX_TURNS, RunResult, run_agent
    from .strategies import STATUS_UNKNOWN, STRATEGIES, reconcile, tool_result
    from .lab.matrix import run_cell, run_matrix
    from .scenarios import SCENARIOS, Sandbox, Scenario
    from .tools import DEFAULT_TOOLS, Effect, Tool, Toolbox, tool
    from .world import World
