"""The visible checks of the ``postmortem`` assignment: the incident replayed with a real SIGKILL.

Its test cells call these as ``checks.check_*(reconcile)``; the hidden ones live with the
instructor (:mod:`resumable_core.course.hidden.postmortem`).
"""

from __future__ import annotations

from ...checkpoint import consistency_problem, text_of
from ...run_folder import finished_turns
from ...strategies import Reconcile
from ...world import NOTES
from .support import CheckFailed, replay, require, require_status_unknown


def check_incident(fn: Reconcile) -> None:
    """The postmortem's crash (SIGKILL after send_email, before save point B): one email, run finishes."""
    r = replay(fn, "after_tool", "send_email")
    require(r.killed and r.emails_at_crash == 1, "the replay should crash after the email went out")
    require(r.error is None, f"the resume failed: {r.error}")
    require(r.emails == 1, f"the team received {r.emails} emails; exactly one is correct")
    require(r.checkpoint is not None and r.checkpoint.is_finished(), "the resumed run must finish")
    problem = consistency_problem(r.checkpoint) if r.checkpoint is not None else None
    require(problem is None, f"the resumed checkpoint contradicts itself: {problem}")
    block = r.pending_result()
    if block is None:
        raise CheckFailed("the dangling send_email was never answered: every tool_use needs its tool_result")
    require_status_unknown(block)  # nobody knows whether it went out: claiming success is a guess


def check_read_file_rerun(fn: Reconcile) -> None:
    """A crash before read_file ran: resume re-runs it and its tool_result holds the file's text."""
    r = replay(fn, "after_save_a", "read_file")
    pending = r.pending_at_crash
    require(r.killed and pending and pending["name"] == "read_file", "the replay should crash with read_file pending")
    require(r.error is None, f"the resume failed: {r.error}")
    block = r.pending_result()
    if block is None or pending is None:
        raise CheckFailed("the dangling read_file call was never answered: read-only calls are re-run, not dropped")
    path = pending["input"]["path"]
    require(
        not block.get("is_error") and text_of(block.get("content")) == NOTES[path.split("/")[-1]],
        "the read_file tool_result must hold the file's text (re-run it: it is read-only)",
    )
    require(r.reads == 1, f"read_file ran {r.reads} times for the crashed call; once is right")
    if r.checkpoint is None or not r.checkpoint.is_finished():
        raise CheckFailed("the resumed run must finish")
    expected = finished_turns("read_file")
    require(
        r.checkpoint.turns == expected,
        f"the run took {r.checkpoint.turns} model calls, an uncrashed run takes {expected}: "
        "answering the dangling call costs no extra turn, dropping it does",
    )


def check_ledger_incident(fn: Reconcile) -> None:
    """With a ledger: the postmortem's crash ends with one email and no extra turn (no is_error detour)."""
    expected = finished_turns("send_email")
    for point in ("after_save_a", "after_tool"):
        r = replay(fn, point, "send_email", ledger=True)
        where = f"crash {point} on the send_email turn"
        require(r.error is None, f"{where}: the resume failed: {r.error}")
        require(r.emails == 1, f"{where}: {r.emails} emails; the idempotency key makes it exactly one")
        block = r.pending_result()
        require(
            block is not None and not block.get("is_error"),
            f"{where}: with a ledger the call can be finished under its idempotency key: no is_error fallback",
        )
        turns = r.checkpoint.turns if r.checkpoint is not None and r.checkpoint.is_finished() else None
        require(turns is not None, f"{where}: the resumed run must finish")
        require(turns == expected, f"{where}: the run took {turns} model calls, an uncrashed run takes {expected}")
    r = replay(fn, "after_save_a", "read_file", ledger=True)
    require(r.error is None and r.reads == 1, "read-only calls are still re-run when a ledger is present")
