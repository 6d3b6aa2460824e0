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
from .crash import CrashPlan
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


def reference_turn(key: str) -> int:
    """The turn on which an uncrashed run of scenario ``key`` first calls its tool (the crashed turn)."""
    return _reference(key)[0]


def turn_calls(key: str) -> list[tuple[str, dict[str, Any]]]:
    """(tool, input) of every call the crashed turn asks for, in block order, as an uncrashed run makes them."""
    return [(name, json.loads(text)) for name, text in _reference(key)[1]]


def target_input(key: str, tool: str | None = None) -> dict[str, Any]:
    """The input of the crashed turn's call of ``tool`` (default: the scenario's), what a crash on it leaves pending."""
    wanted = scenario(key).tool if tool is None else tool
    return next(i for name, i in turn_calls(key) if name == wanted)


def crash_plan(key: str, point: str) -> CrashPlan:
    """The plan that kills scenario ``key``'s run at ``point`` of its crashed turn.

    A one-call turn dies at its tool's call; a parallel turn at the first time it passes
    ``point`` (``after_tool`` at its first call, ``between_tools`` after the first's save B,
    ``after_save_b`` after its last)."""
    chosen = scenario(key)
    return CrashPlan(point, tool=chosen.tool if chosen.calls == 1 else None, turn=reference_turn(key))


def count_effects(key: str, world: World, tool: str | None = None) -> int:
    """How many times the effect of the crashed turn's call of ``tool`` (default: the scenario's) happened in ``world``."""
    wanted = scenario(key).tool if tool is None else tool
    target = target_input(key, wanted)
    if wanted == "send_email":
        # an email's effect is its outbox row, not the call: a call the outbox deduplicated sent nothing
        return sum(1 for e in world.sent_emails() if e["subject"] == target["subject"])
    return sum(1 for _, i in world.calls(wanted) if i == target)


def finished_turns(key: str) -> int:
    """How many turns an uncrashed run of scenario ``key`` takes in all."""
    return _reference(key)[2]


# Cached per process: every crash-matrix cell asks for its reference turn, and one uncrashed run
# answers them all. Kept as JSON text so the cache hands out no dict a caller could change.
@cache
def _reference(key: str) -> tuple[int, tuple[tuple[str, str], ...], int]:
    """(turn, (tool, JSON input) of each call) of the first turn calling ``key``'s tool in an uncrashed run, and
    how many turns that run takes in all."""
    chosen = scenario(key)
    with tempfile.TemporaryDirectory(prefix="resumable-ref-") as tmp:
        checkpoint = RunFolder.create(tmp).run(chosen.task).checkpoint
    turn = 0
    for m in checkpoint.messages:
        if m["role"] != "assistant":
            continue
        turn += 1
        uses = [b for b in m["content"] if b.get("type") == "tool_use"]
        if any(b["name"] == chosen.tool for b in uses):
            return turn, tuple((b["name"], json.dumps(b["input"], sort_keys=True)) for b in uses), checkpoint.turns
    raise ValueError(f"the {chosen.task!r} run never calls {chosen.tool}")
