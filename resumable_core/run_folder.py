"""The run folder: one run's world, toolbox and checkpoint, side by side in one folder.

A run folder holds a fresh world (``world/``: the meeting notes and the SQLite outbox), the
checkpoint's path (``checkpoint.json``) and, if asked for, the side-effect ledger
(``ledger.sqlite``). Everything a crash leaves behind is in that folder, so a resume, a test or a
lesson points at one path. :func:`reference_turn` and friends run a scenario once, uncrashed, in a
throwaway run folder: the scenarios themselves (:mod:`.scenarios`) are only data.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from .checkpoint import Checkpoint
from .errors import ReconcileMissingError
from .ledger import Ledger
from .loop import RunResult, run_agent
from .scenarios import scenario
from .strategies import Reconcile
from .tools import Toolbox
from .world import World


@dataclass
class RunFolder:
    """One run's folder: the world, the toolbox, the checkpoint path."""

    root: Path
    world: World
    toolbox: Toolbox
    checkpoint_path: Path

    @classmethod
    def create(cls, root: str | Path, *, ledger: bool = False) -> RunFolder:
        """A fresh world in ``root``; with ``ledger``, the toolbox keeps receipts."""
        root = Path(root)
        world = World.create(root / "world")
        box = Toolbox(world, ledger=Ledger(root / "ledger.sqlite") if ledger else None)
        return cls(root, world, box, root / "checkpoint.json")

    def run(self, task: str, *, reconcile: Reconcile | None = None, **kw: Any) -> RunResult:
        """``run_agent`` on this run folder. A new run gets its own run id (kept in its checkpoint).

        ``reconcile``: what a resume does with a dangling call. A fresh run, or a resume with
        nothing pending, needs none; without one a dangling call stops with ``ReconcileMissingError``.
        """
        chosen = _no_reconcile_given if reconcile is None else reconcile
        return run_agent(task, checkpoint_path=self.checkpoint_path, toolbox=self.toolbox, reconcile=chosen, **kw)


def _no_reconcile_given(cp: Checkpoint, tools: Toolbox) -> Checkpoint:
    """No reconcile was chosen: a checkpoint with nothing pending needs none; a dangling call stops here."""
    if cp.pending_tool_use is not None:
        raise ReconcileMissingError(cp.pending_tool_use.name, cp.pending_tool_use.id)
    return cp


def reference_turn(tool: str) -> int:
    """The turn on which an uncrashed run of ``tool``'s scenario first calls ``tool``."""
    return _reference(tool)[0]


def target_input(tool: str) -> dict[str, Any]:
    """The input of that first call (what a crash on it leaves pending)."""
    return json.loads(_reference(tool)[1])


def count_effects(tool: str, world: World) -> int:
    """How many times the effect of ``tool``'s target call happened in ``world``."""
    target = target_input(tool)
    if tool == "send_email":
        # an email's effect is its outbox row, not the call: a call the outbox deduplicated sent nothing
        return sum(1 for e in world.sent_emails() if e["subject"] == target["subject"])
    return sum(1 for _, i in world.calls(tool) if i == target)


def finished_turns(tool: str) -> int:
    """How many turns an uncrashed run of ``tool``'s scenario takes in all."""
    with tempfile.TemporaryDirectory(prefix="resumable-ref-") as tmp:
        return RunFolder.create(tmp).run(scenario(tool).task).checkpoint.turns


# Cached per process: every crash-matrix cell asks for its reference turn, and one uncrashed run
# answers them all. Kept as JSON text so the cache hands out no dict a caller could change.
@cache
def _reference(tool: str) -> tuple[int, str]:
    """(turn, JSON input) of the first call to ``tool`` in an uncrashed run of its scenario."""
    task = scenario(tool).task
    with tempfile.TemporaryDirectory(prefix="resumable-ref-") as tmp:
        result = RunFolder.create(tmp).run(task)
    turn = 0
    for m in result.checkpoint.messages:
        if m["role"] != "assistant":
            continue
        turn += 1
        for b in m["content"]:
            if b.get("type") == "tool_use" and b["name"] == tool:
                return turn, json.dumps(b["input"], sort_keys=True)
    raise ValueError(f"the {task!r} run never calls {tool}")
