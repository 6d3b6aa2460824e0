"""Resumable Agents: resume an agent loop from a checkpoint and reconcile its dangling call.

The public names are listed in ``__all__`` and loaded on first use, so ``import resumable_core``
is fast and imports neither ``anthropic`` nor ``pydantic`` until they are needed. This is the
core; the lab wing (:mod:`resumable_core.lab`) and the course wing
(:mod:`resumable_core.course`) build on it and are never imported from here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "CHECKPOINT_VERSION",
    "CRASH_POINTS",
    "DEFAULT_MODEL",
    "DEFAULT_TOOLS",
    "MAX_TURNS",
    "SCENARIOS",
    "STATUS_UNKNOWN",
    "STRATEGIES",
    "Checkpoint",
    "CheckpointCorruptError",
    "CheckpointError",
    "CheckpointFolderMissingError",
    "CheckpointForeignError",
    "CheckpointInconsistentError",
    "CheckpointNotAFileError",
    "CheckpointTaskMismatchError",
    "CheckpointTooLargeError",
    "CheckpointUnreadableError",
    "CheckpointVersionError",
    "CheckpointWriteError",
    "CrashError",
    "CrashPlan",
    "Effect",
    "IdempotencyConflictError",
    "Lease",
    "LeaseError",
    "LeaseHeldError",
    "LeaseLostError",
    "Ledger",
    "PendingToolUse",
    "ReconcileMissingError",
    "ReconcileNotCallableError",
    "ReconcileResultError",
    "ResumableError",
    "RunFolder",
    "RunResult",
    "Scenario",
    "SecretInCheckpointError",
    "Tool",
    "ToolError",
    "ToolTimeoutError",
    "ToolUnavailableError",
    "Toolbox",
    "UnknownCrashPointError",
    "UnknownScenarioError",
    "UnknownStrategyError",
    "UnknownToolError",
    "World",
    "answer_pending",
    "consistency_problem",
    "idempotency_key",
    "load_checkpoint",
    "make_client",
    "model_id",
    "new_checkpoint",
    "run_agent",
    "save_checkpoint",
    "tool",
    "tool_result",
]

_HOMES = {
    "checkpoint": (
        "CHECKPOINT_VERSION",
        "Checkpoint",
        "PendingToolUse",
        "consistency_problem",
        "load_checkpoint",
        "new_checkpoint",
        "save_checkpoint",
    ),
    "claude": ("DEFAULT_MODEL", "make_client", "model_id"),
    "crash": ("CRASH_POINTS", "CrashPlan"),
    "errors": (
        "CheckpointCorruptError",
        "CheckpointError",
        "CheckpointFolderMissingError",
        "CheckpointForeignError",
        "CheckpointInconsistentError",
        "CheckpointNotAFileError",
        "CheckpointTaskMismatchError",
        "CheckpointTooLargeError",
        "CheckpointUnreadableError",
        "CheckpointVersionError",
        "CheckpointWriteError",
        "CrashError",
        "IdempotencyConflictError",
        "LeaseError",
        "LeaseHeldError",
        "LeaseLostError",
        "ReconcileMissingError",
        "ReconcileNotCallableError",
        "ReconcileResultError",
        "ResumableError",
        "SecretInCheckpointError",
        "ToolError",
        "ToolTimeoutError",
        "ToolUnavailableError",
        "UnknownCrashPointError",
        "UnknownScenarioError",
        "UnknownStrategyError",
        "UnknownToolError",
    ),
    "lease": ("Lease",),
    "ledger": ("Ledger", "idempotency_key"),
    "loop": ("MAX_TURNS", "RunResult", "run_agent"),
    "run_folder": ("RunFolder",),
    "scenarios": ("SCENARIOS", "Scenario"),
    "strategies": ("STATUS_UNKNOWN", "STRATEGIES", "answer_pending", "tool_result"),
    "tools": ("DEFAULT_TOOLS", "Effect", "Tool", "Toolbox", "tool"),
    "world": ("World",),
}
"""The core module each public name lives in (a test checks this covers ``__all__`` exactly)."""
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'resumable_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .checkpoint import (
        CHECKPOINT_VERSION,
        Checkpoint,
        PendingToolUse,
        consistency_problem,
        load_checkpoint,
        new_checkpoint,
        save_checkpoint,
    )
    from .claude import DEFAULT_MODEL, make_client, model_id
    from .crash import CRASH_POINTS, CrashPlan
    from .errors import (
        CheckpointCorruptError,
        CheckpointError,
        CheckpointFolderMissingError,
        CheckpointForeignError,
        CheckpointInconsistentError,
        CheckpointNotAFileError,
        CheckpointTaskMismatchError,
        CheckpointTooLargeError,
        CheckpointUnreadableError,
        CheckpointVersionError,
        CheckpointWriteError,
        CrashError,
        IdempotencyConflictError,
        LeaseError,
        LeaseHeldError,
        LeaseLostError,
        ReconcileMissingError,
        ReconcileNotCallableError,
        ReconcileResultError,
        ResumableError,
        SecretInCheckpointError,
        ToolError,
        ToolTimeoutError,
        ToolUnavailableError,
        UnknownCrashPointError,
        UnknownScenarioError,
        UnknownStrategyError,
        UnknownToolError,
    )
    from .lease import Lease
    from .ledger import Ledger, idempotency_key
    from .loop import MAX_TURNS, RunResult, run_agent
    from .run_folder import RunFolder
    from .scenarios import SCENARIOS, Scenario
    from .strategies import STATUS_UNKNOWN, STRATEGIES, answer_pending, tool_result
    from .tools import DEFAULT_TOOLS, Effect, Tool, Toolbox, tool
    from .world import World
