"""Exercise checkpoints A, B and C, made by really running the scenarios and crashing them.

- A: the notes run, killed right after save point A of its final answer: nothing pending,
  the last message is a plain assistant reply. The run is *finished*; resume must report
  that and make no model call. (The seed course reads this case as "crashed after save
  point B"; but after B the last message is a user tool_result, never an assistant reply.)
- B: the notes run, killed after save point A of ``read_file(meeting-08-25.md)``: pending
  read-only call; resume re-runs it.
- C: the email run, killed after ``send_email`` ran and before save point B (the postmortem's
  crash): pending side-effecting call that already happened; resume must not send again.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from .._scripted import ScriptedClaude
from ..checkpoint import Checkpoint, load_checkpoint
from ..claude import make_client
from ..crash import CrashPlan, run_in_child
from ..scenarios import SCENARIOS, Sandbox, finished_turns
from ..tools import Toolbox

FIXTURE_DIR = Path(__file__).parent / "fixtures"
NAMES = ("A", "B", "C")


def _plan(name: str) -> tuple[str, CrashPlan]:
    if name == "A":
        return SCENARIOS["read_file"].task, CrashPlan("after_save_a", turn=finished_turns("read_file"))
    if name == "B":
        return SCENARIOS["read_file"].task, CrashPlan(
            "after_save_a", tool="read_file", turn=finished_turns("read_file") - 1
        )
    if name == "C":
        email = SCENARIOS["send_email"]
        return email.task, CrashPlan("after_tool", tool="send_email", turn=email.reference_turn())
    raise ValueError(f"exercise checkpoints are {', '.join(NAMES)}, not {name!r}")


def exercise_sandbox(name: str, root: str | Path, *, ledger: bool = False) -> tuple[Checkpoint, Toolbox]:
    """Crash the scenario of checkpoint ``name`` for real in ``root``; return the checkpoint and toolbox.

    The world is as the crash left it: for C the email is already in the outbox.
    """
    task, plan = _plan(name.upper())
    box = Sandbox.create(root, ledger=ledger)
    # seeded, so the tool ids, and with them the committed fixtures, are reproducible
    client = make_client(live=False, scripted=ScriptedClaude(seed=f"exercise_{name.lower()}"))
    run_id = f"run_exercise_{name.lower()}"
    if run_in_child(lambda: box.run(task, client=client, crash=plan, run_id=run_id)) != "killed":
        raise RuntimeError(f"checkpoint {name}: the run ended before its crash point")
    return _load(box.checkpoint_path), box.toolbox


def write_exercise_checkpoints(out: str | Path | None = None) -> list[Path]:
    """Regenerate ``checkpoint_a.json`` … ``checkpoint_c.json`` into ``out``."""
    out = Path(out) if out else FIXTURE_DIR
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in NAMES:
        with tempfile.TemporaryDirectory() as tmp:
            exercise_sandbox(name, tmp)
            target = out / f"checkpoint_{name.lower()}.json"
            target.write_bytes((Path(tmp) / "checkpoint.json").read_bytes())
            paths.append(target)
    return paths


def load_exercise_checkpoint(name: str) -> Checkpoint:
    """Exercise checkpoint ``"A"``, ``"B"`` or ``"C"``, validated like any checkpoint."""
    if name.upper() not in NAMES:
        raise ValueError(f"exercise checkpoints are {', '.join(NAMES)}, not {name!r}")
    return _load(FIXTURE_DIR / f"checkpoint_{name.lower()}.json")


def _load(path: Path) -> Checkpoint:
    cp = load_checkpoint(path)
    if cp is None:
        raise FileNotFoundError(f"no checkpoint at {path}; regenerate them with `python -m resumable_core fixtures`")
    return cp
