"""The kit's two scenarios: a task, the tool its run exercises, and a sandbox to run it in.

A scenario is declared once, in :data:`SCENARIOS`; the CLI, the simulator, the crash matrix and
the checks all read it from here. A scenario is keyed by the tool it exercises, because that is
what a reader picks ("crash on the turn that calls ``send_email``").
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
from .strategies import Reconcile
from .tools import Toolbox
from .world import World

NOTES_TASK = "Summarize this week's meeting notes into one page."
"""The notes run's task: list the notes and read each (``read_file`` is read-only)."""
EMAIL_TASK = "Email the team this week's conclusion."
"""The email run's task: read the conclusion and send it (``send_email`` has a side effect)."""
EMAIL_SUBJECT = "This week's conclusion"
"""The subject of the one email the email run should send."""


@dataclass(frozen=True)
class Scenario:
    """A task whose run calls ``tool``; a crash on that call is what the kit studies."""

    tool: str
    """The tool whose call is crashed (and the scenario's key in :data:`SCENARIOS`)."""
    task: str
    """The user's task, the first message of the run."""
    help: str
    """One line for menus and ``--help``."""

    def reference_turn(self) -> int:
        """The turn on which an uncrashed run of this task first calls :attr:`tool`."""
        return _reference(self.tool)[0]

    def target_input(self) -> dict[str, Any]:
        """The input of that first call (what a crash on it leaves pending)."""
        return json.loads(_reference(self.tool)[1])

    def count_effects(self, world: World) -> int:
        """How many times the effect of the target call happened in ``world``."""
        target = self.target_input()
        if self.tool == "send_email":
            return sum(1 for e in world.sent_emails() if e["subject"] == target["subject"])
        return sum(1 for _, i in world.calls(self.tool) if i == target)


SCENARIOS: dict[str, Scenario] = {
    s.tool: s
    for s in (
        Scenario("read_file", NOTES_TASK, "notes run: “Summarize this week's meeting notes” (read_file is read-only)"),
        Scenario(
            "send_email",
            EMAIL_TASK,
            "email run: “Email the team this week's conclusion” (send_email has a side effect)",
        ),
    )
}
"""Every scenario, by the tool it exercises."""


def scenario(tool: str) -> Scenario:
    """The scenario that exercises ``tool``; a ValueError names the choices."""
    try:
        return SCENARIOS[tool]
    except KeyError:
        raise ValueError(f"no scenario exercises {tool!r}; choose one of {', '.join(SCENARIOS)}") from None


@dataclass
class Sandbox:
    """One run's folder: the world, the toolbox, the checkpoint path."""

    root: Path
    world: World
    toolbox: Toolbox
    checkpoint_path: Path

    @classmethod
    def create(cls, root: str | Path, *, ledger: bool = False) -> Sandbox:
        """A fresh world in ``root``; with ``ledger``, the toolbox keeps receipts."""
        root = Path(root)
        world = World.create(root / "world")
        box = Toolbox(world, ledger=Ledger(root / "ledger.sqlite") if ledger else None)
        return cls(root, world, box, root / "checkpoint.json")

    def run(self, task: str, *, reconcile: Reconcile | None = None, **kw: Any) -> RunResult:
        """``run_agent`` on this sandbox. A new run gets its own run id (kept in its checkpoint).

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


@cache
def _reference(tool: str) -> tuple[int, str]:
    """(turn, JSON input) of the first call to ``tool`` in an uncrashed run of its scenario."""
    task = scenario(tool).task
    with tempfile.TemporaryDirectory(prefix="resumable-ref-") as tmp:
        result = Sandbox.create(tmp).run(task)
    turn = 0
    for m in result.checkpoint.messages:
        if m["role"] != "assistant":
            continue
        turn += 1
        for b in m["content"]:
            if b.get("type") == "tool_use" and b["name"] == tool:
                return turn, json.dumps(b["input"], sort_keys=True)
    raise ValueError(f"the {task!r} run never calls {tool}")


def finished_turns(tool: str) -> int:
    """How many turns an uncrashed run of ``tool``'s scenario takes in all."""
    with tempfile.TemporaryDirectory(prefix="resumable-ref-") as tmp:
        return Sandbox.create(tmp).run(scenario(tool).task).checkpoint.turns
