"""Exercise checkpoints A to F, made by really running the scenarios and crashing them.

A, B and C are the graded exercise's: its level 1 asks which resume action each needs, graded
without feedback, so what each holds is for the learner to read from the checkpoint itself
(their answer key is the instructor's, in ``course/hidden/reconcile.py``).

D, E and F are for practice before it (:mod:`resumable_core.lab.formative` says what a wrong
answer misread), crashed at other points:

- D: the email run, killed after save point A of ``send_email``, before it ran: no email went
  out, yet the file is the same as if the kill had come just after it did.
- E: the notes run, killed during save point B of ``list_dir``: the interrupted save left
  save A's file, with the read-only call pending.
- F: the notes run, killed during save point A of its final answer: the answer never reached
  the disk; the file is the one saved before that model call, nothing pending.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from types import MappingProxyType

from .._scripted import ScriptedClaude
from ..checkpoint import Checkpoint, load_checkpoint
from ..claude import make_client
from ..crash import CrashPlan, run_in_child
from ..run_folder import RunFolder, finished_turns, reference_turn
from ..scenarios import SCENARIOS
from ..strategies import reconcile_none
from ..tools import Toolbox
from .columns import pad
from .i18n import N_, _

FIXTURE_DIR = Path(__file__).parent / "fixtures"
GRADED = ("A", "B", "C")
"""The graded exercise's checkpoints."""
FORMATIVE = ("D", "E", "F")
"""The practice checkpoints, with immediate feedback (:func:`resumable_core.lab.formative_check`)."""
NAMES = GRADED + FORMATIVE

ACTIONS: MappingProxyType[str, str] = MappingProxyType(
    {
        "finished_no_call": N_("The run is finished: report it, make no model call and reconcile nothing."),
        "call_model": N_("Nothing is pending: send the messages to the model for the next turn."),
        "rerun_tool": N_("Run the pending tool again and record its output as the tool_result."),
        "is_error_fallback": N_(
            "Do not run the tool; record an is_error tool_result saying its execution status is unknown."
        ),
        "delete_call": N_("Drop the assistant message that asked for the tool, as if it was never sent."),
    }
)
"""The resume actions to choose from for an exercise checkpoint (read-only: a notebook cannot add one), each with its
meaning in English (:func:`actions_text` shows them in the learner's language)."""


def actions_text() -> str:
    """Each action and its meaning, one a line, in now's language."""
    width = max(map(len, ACTIONS))
    return "\n".join(f"{pad(action, width)}  {_(meaning)}" for action, meaning in ACTIONS.items())


def _plan(name: str) -> tuple[str, CrashPlan]:
    notes, email = SCENARIOS["read_file"], SCENARIOS["send_email"]
    plans = {
        "A": lambda: (notes.task, CrashPlan("after_save_a", turn=finished_turns("read_file"))),
        "B": lambda: (notes.task, CrashPlan("after_save_a", tool="read_file", turn=finished_turns("read_file") - 1)),
        "C": lambda: (email.task, CrashPlan("after_tool", tool="send_email", turn=reference_turn("send_email"))),
        "D": lambda: (email.task, CrashPlan("after_save_a", tool="send_email", turn=reference_turn("send_email"))),
        "E": lambda: (notes.task, CrashPlan("during_save_b", tool="list_dir", turn=1)),
        "F": lambda: (notes.task, CrashPlan("during_save_a", turn=finished_turns("read_file"))),
    }
    return plans[_known(name)]()


def _known(name: str) -> str:
    if not isinstance(name, str) or name.upper() not in NAMES:
        raise ValueError(f"exercise checkpoints are {', '.join(NAMES)}, not {name!r}")
    return name.upper()


def exercise_run_folder(name: str, root: str | Path, *, ledger: bool = False) -> tuple[Checkpoint, Toolbox]:
    """Crash the scenario of checkpoint ``name`` for real in ``root``; return the checkpoint and toolbox.

    The world is as the crash left it: for C the email is already in the outbox, for D not.
    """
    task, plan = _plan(name)
    box = RunFolder.create(root, ledger=ledger)
    # seeded, so the tool ids, and with them the committed fixtures, are reproducible
    client = make_client(live=False, scripted=ScriptedClaude(seed=f"exercise_{name.lower()}"))
    run_id = f"run_exercise_{name.lower()}"
    # a fresh run has no dangling call, so its reconcile never runs
    ended = run_in_child(lambda: box.run(task, client=client, crash=plan, run_id=run_id, reconcile=reconcile_none))
    if ended != "killed":
        raise RuntimeError(f"checkpoint {name}: the run ended before its crash point")
    return _load(box.checkpoint_path), box.toolbox


def write_exercise_checkpoints(out: str | Path | None = None) -> list[Path]:
    """Regenerate ``checkpoint_a.json`` … ``checkpoint_f.json`` into ``out``."""
    out = Path(out) if out else FIXTURE_DIR
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in NAMES:
        with tempfile.TemporaryDirectory() as tmp:
            exercise_run_folder(name, tmp)
            target = out / f"checkpoint_{name.lower()}.json"
            target.write_bytes((Path(tmp) / "checkpoint.json").read_bytes())
            paths.append(target)
    return paths


def load_exercise_checkpoint(name: str) -> Checkpoint:
    """Exercise checkpoint ``"A"`` … ``"F"``, validated like any checkpoint."""
    return _load(FIXTURE_DIR / f"checkpoint_{_known(name).lower()}.json")


def _load(path: Path) -> Checkpoint:
    cp = load_checkpoint(path)
    if cp is None:
        raise FileNotFoundError(f"no checkpoint at {path}; regenerate them with `python -m resumable_core fixtures`")
    return cp
