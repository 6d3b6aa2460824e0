"""The visible checks of the ``reconcile`` assignment, and what its notebook shows the learner.

Its test cells call these as ``checks.check_*(reconcile)``; the hidden ones live with the
instructor (:mod:`resumable_core.course.hidden.reconcile`).
"""

from __future__ import annotations

from typing import Any

from ...lab.exercise_checkpoints import ACTIONS
from ...strategies import Reconcile
from ...world import NOTES
from .support import (
    CountingToolbox,
    answered,
    fresh_toolbox,
    require,
    require_rerun,
    require_status_unknown,
    run_reconcile,
    scratch,
)


def chosen_action(answers: Any, checkpoint: str) -> str:
    """``answers[checkpoint]`` when it names one of :data:`ACTIONS`; else :class:`CheckFailed` says what to choose.

    Reads with the plain dict's own lookup and accepts only a plain ``str``, so no method of the
    learner's runs while it is checked.
    """
    require(isinstance(answers, dict), "RESUME_ACTION must be a dict of answers, one per checkpoint")
    value = dict.get(answers, checkpoint)
    require(
        type(value) is str and value in ACTIONS,
        f"RESUME_ACTION[{checkpoint!r}]: choose one of {sorted(ACTIONS)}, not {value!r}",
    )
    return str(value)


def check_action_chosen(answers: Any, checkpoint: str) -> None:
    """Level 1: the answer for ``checkpoint`` is one of the documented actions (whether it is right is graded)."""
    chosen_action(answers, checkpoint)


def check_finished(fn: Reconcile) -> None:
    """Checkpoint A (a finished run): returned as it is, no tool executed."""
    from ...lab.exercise_checkpoints import load_exercise_checkpoint

    box = fresh_toolbox()
    before, out = run_reconcile(fn, load_exercise_checkpoint("A"), box)
    require(box.count() == 0, f"nothing is pending in A, yet reconcile executed {box.executed}")
    require(out.messages == before.messages, "nothing is pending in A: the messages must be returned unchanged")
    require(out.pending_tool_use is None, "nothing is pending in A: pending_tool_use stays None")
    require(out.is_finished(), "A is a finished run and must stay one")


def check_checkpoint_b(fn: Reconcile) -> None:
    """Checkpoint B: read_file is re-run exactly once and its output answers the pending id."""
    from ...lab.exercise_checkpoints import load_exercise_checkpoint

    cp = load_exercise_checkpoint("B")
    p = cp.pending_tool_use
    if p is None:  # the shipped fixture is broken, not the learner's code
        raise ValueError("exercise checkpoint B has no pending call")
    box = fresh_toolbox()
    before, out = run_reconcile(fn, cp, box)
    require(
        box.count() == 1 and box.executed[0] == (p.name, p.input),
        f"read_file is read-only: execute it exactly once with the pending input; execute calls were {box.executed}",
    )
    require_rerun(answered(before, out), NOTES[p.input["path"].split("/")[-1]])


def check_checkpoint_c(fn: Reconcile) -> None:
    """Checkpoint C, crashed for real: send_email is not run again; is_error says status unknown."""
    from ...lab.exercise_checkpoints import exercise_run_folder

    cp, real_box = exercise_run_folder("C", scratch("cp-c"))
    box = CountingToolbox.wrap(real_box)
    if len(box.world.sent_emails()) != 1:  # the crash must come after the email went out
        raise ValueError("exercise checkpoint C was not recreated with one email in the outbox")
    before, out = run_reconcile(fn, cp, box)
    require(
        box.count() == 0,
        f"send_email has a side effect: it must not be executed again; execute calls were {box.executed}",
    )
    require(len(box.world.sent_emails()) == 1, "the outbox must still hold exactly one email")
    require_status_unknown(answered(before, out))
