"""The visible checks of the ``reconcile`` assignment, and what its notebook shows the learner.

Its test cells call these as ``checks.check_*(reconcile)``; the hidden ones live with the
instructor (:mod:`resumable_core.course.hidden.reconcile`).
"""

from __future__ import annotations

from typing import Any

from ...checkpoint import load_checkpoint
from ...lab.exercise_checkpoints import ACTIONS
from ...scenarios import RETRO_NOTE
from ...strategies import Reconcile
from ...world import NOTES
from ..i18n import _
from ..i18n import say as say  # test cells print checks.say("...")
from .support import (
    PARALLEL_LESSON,
    UNKNOWN_TOOLS_LESSON,
    CountingToolbox,
    answered,
    answered_turn,
    crash_parallel_turn,
    dangling,
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
    require(isinstance(answers, dict), _("RESUME_ACTION must be a dict of answers, one per checkpoint"))
    value = dict.get(answers, checkpoint)
    require(
        type(value) is str and value in ACTIONS,
        _("RESUME_ACTION[{checkpoint}]: choose one of {actions}, not {value}").format(
            checkpoint=repr(checkpoint), actions=sorted(ACTIONS), value=repr(value)
        ),
    )
    return str(value)


def check_action_chosen(answers: Any, checkpoint: str) -> None:
    """Level 1: the answer for ``checkpoint`` is one of the documented actions (whether it is right is graded)."""
    chosen_action(answers, checkpoint)


def check_checkpoint_a(fn: Reconcile) -> None:
    """Checkpoint A: what the learner's reconcile leaves of it (Level 1's answer is not read)."""
    from ...lab.exercise_checkpoints import load_exercise_checkpoint

    box = fresh_toolbox()
    before, out = run_reconcile(fn, load_exercise_checkpoint("A"), box)
    require(box.count() == 0, _("nothing is pending, yet reconcile executed {executed}").format(executed=box.executed))
    require(out.messages == before.messages, _("nothing is pending: the messages must be returned unchanged"))
    require(not out.pending_tool_uses, _("nothing is pending: pending_tool_uses stays empty"))
    require(
        out.is_finished() == before.is_finished(), _("a checkpoint with nothing pending must be returned as it was")
    )


def check_checkpoint_b(fn: Reconcile) -> None:
    """Checkpoint B: what the learner's reconcile leaves of it (Level 1's answer is not read)."""
    from ...lab.exercise_checkpoints import load_exercise_checkpoint

    cp = load_exercise_checkpoint("B")
    p = cp.pending_tool_use
    if p is None:  # the shipped fixture is broken, not the learner's code
        raise ValueError("exercise checkpoint B has no pending call")
    box = fresh_toolbox()
    before, out = run_reconcile(fn, cp, box)
    block = answered(before, out)
    require(
        box.count() == 1 and box.executed[0] == (p.name, p.input),
        _(
            "read_file is read-only: execute it exactly once with the pending input; execute calls were {executed}"
        ).format(executed=box.executed),
    )
    require_rerun(block, NOTES[p.input["path"].split("/")[-1]])


def check_checkpoint_c(fn: Reconcile) -> None:
    """Checkpoint C, recreated by a real crash: what the learner's reconcile leaves of it (Level 1's answer is not read)."""
    from ...lab.exercise_checkpoints import exercise_run_folder

    cp, real_box = exercise_run_folder("C", scratch("cp-c"))
    box = CountingToolbox.wrap(real_box)
    if len(box.world.sent_emails()) != 1:  # the kit's recipe for C: the crash comes after the email went out
        raise ValueError(
            "exercise checkpoint C could not be recreated as the kit saved it (the kit is broken, not your code)"
        )
    before, out = run_reconcile(fn, cp, box)
    require(
        box.count() == 0,
        _("send_email has a side effect: it must not be executed again; execute calls were {executed}").format(
            executed=box.executed
        ),
    )
    require(len(box.world.sent_emails()) == 1, _("the outbox must still hold exactly one email"))
    require_status_unknown(answered(before, out))


def check_unknown_tool_not_run(fn: Reconcile) -> None:
    """A dangling call of a tool the toolbox does not know: never run, and answered."""
    box = fresh_toolbox()
    before, out = run_reconcile(fn, dangling("delete_database", {"name": "prod"}), box)
    require(
        box.count() == 0,
        _(
            "delete_database is not in the toolbox: an unknown tool is never assumed safe, "
            "so it is not run (reread {unknown_tools_lesson}); execute calls were {executed}"
        ).format(unknown_tools_lesson=_(UNKNOWN_TOOLS_LESSON), executed=box.executed),
    )
    require_status_unknown(answered(before, out))


def check_turn_between_tools(reconcile_turn: Reconcile) -> None:
    """Level 3 on a real crash between the briefing's two tools: send_email's result kept, read_file re-run once."""
    box = crash_parallel_turn("between_tools", "send_email")
    cp = load_checkpoint(box.checkpoint_path)
    if cp is None or len(cp.pending_tool_uses) != 1:  # a bug in the check itself
        raise ValueError("the crash between the tools left no checkpoint with one pending call")
    read = cp.pending_tool_uses[0]
    counting = CountingToolbox.wrap(box.toolbox)
    before, out = run_reconcile(reconcile_turn, cp, counting)
    blocks = answered_turn(before, out)
    require(
        counting.executed == [(read.name, read.input)],
        _(
            "send_email's result is recorded and read_file is read-only: run read_file once "
            "and nothing else ({parallel_lesson}); execute calls were {executed}"
        ).format(parallel_lesson=_(PARALLEL_LESSON), executed=counting.executed),
    )
    require_rerun(blocks[read.id], NOTES[RETRO_NOTE])
    require(len(box.world.sent_emails()) == 1, _("the outbox must still hold exactly one email"))
    _check_turn_unrecorded_email(reconcile_turn)


def _check_turn_unrecorded_email(reconcile_turn: Reconcile) -> None:
    """Killed after send_email ran but before anything recorded it, with no ledger: it is never sent again."""
    box = crash_parallel_turn("after_tool", "send_email", ledger=False)
    cp = load_checkpoint(box.checkpoint_path)
    if cp is None or len(cp.pending_tool_uses) != 2:  # a bug in the check itself
        raise ValueError("the crash after send_email left no checkpoint with two pending calls")
    send = cp.pending_tool_uses[0]
    counting = CountingToolbox.wrap(box.toolbox)
    before, out = run_reconcile(reconcile_turn, cp, counting)
    require(
        len(box.world.sent_emails()) == 1 and send.name not in {name for name, _input in counting.executed},
        _(
            "send_email ran before the crash and nothing recorded it: a side effect is never run again "
            "({parallel_lesson}, and {unknown_tools_lesson}); execute calls were {executed}"
        ).format(
            unknown_tools_lesson=_(UNKNOWN_TOOLS_LESSON), parallel_lesson=_(PARALLEL_LESSON), executed=counting.executed
        ),
    )
    require_status_unknown(answered_turn(before, out)[send.id])
