"""strategies.py: the moves on a dangling call, and the lesson's reconcile."""

from __future__ import annotations

import resumable_core as rc
from resumable_core.lab.exercise_checkpoints import exercise_sandbox


def test_nothing_pending_is_returned_as_is(tmp_path):
    """Every strategy leaves a checkpoint with nothing pending unchanged."""
    cp_a, box = exercise_sandbox("A", tmp_path)
    calls = box.world.calls()
    for fn in rc.STRATEGIES.values():
        assert fn(cp_a.model_copy(deep=True), box) == cp_a
    assert box.world.calls() == calls


def test_by_effect_reruns_a_read_only_call(tmp_path):
    """The lesson's reconcile re-runs read_file and records its real output as the result."""
    cp, box = exercise_sandbox("B", tmp_path)
    reads = len(box.world.calls("read_file"))
    cp = rc.reconcile(cp, box)
    assert cp.pending_tool_use is None and rc.consistency_problem(cp) is None
    assert "Retro, Aug 25" in cp.messages[-1]["content"][0]["content"]
    assert len(box.world.calls("read_file")) == reads + 1


def test_by_effect_does_not_rerun_a_side_effect(tmp_path):
    """For send_email it answers is_error 'status unknown' and sends nothing."""
    cp, box = exercise_sandbox("C", tmp_path)
    pending = cp.pending_tool_use.id
    cp = rc.reconcile(cp, box)
    block = cp.messages[-1]["content"][0]
    assert block == {"type": "tool_result", "tool_use_id": pending, "content": rc.STATUS_UNKNOWN, "is_error": True}
    assert len(box.world.sent_emails()) == 1


def test_rerun_sends_the_email_again(tmp_path):
    """The postmortem's production reconcile re-runs send_email: a second email."""
    cp, box = exercise_sandbox("C", tmp_path)
    rc.STRATEGIES["rerun"](cp, box)
    assert len(box.world.sent_emails()) == 2


def test_delete_drops_the_call_and_the_fact(tmp_path):
    """delete removes the assistant's tool_use message: the conversation no longer says it was sent."""
    cp, box = exercise_sandbox("C", tmp_path)
    n = len(cp.messages)
    cp = rc.STRATEGIES["delete"](cp, box)
    assert len(cp.messages) == n - 1 and cp.pending_tool_use is None
    assert not any(b.get("name") == "send_email" for m in cp.messages for b in rc.checkpoint.blocks(m))
    assert len(box.world.sent_emails()) == 1  # the email is still out there


def test_ledger_reuses_the_receipt_or_finishes_under_the_key(tmp_path):
    """With a ledger, the crashed send is finished under its idempotency key: still one email."""
    cp, box = exercise_sandbox("C", tmp_path, ledger=True)
    cp = rc.STRATEGIES["by_effect_ledger"](cp, box)
    assert cp.messages[-1]["content"][0].get("is_error") is None
    assert len(box.world.sent_emails()) == 1
    assert box.ledger.lookup(rc.idempotency_key(cp.run_id, cp.messages[-1]["content"][0]["tool_use_id"])).done


def test_ledger_strategy_without_a_ledger_falls_back(tmp_path):
    """by_effect_ledger with no ledger answers 'status unknown' like by_effect."""
    cp, box = exercise_sandbox("C", tmp_path)
    cp = rc.STRATEGIES["by_effect_ledger"](cp, box)
    assert cp.messages[-1]["content"][0]["is_error"] is True


def test_unknown_tool_is_not_executed(tmp_path):
    """A pending call to a tool the toolbox lacks is answered 'status unknown', never executed."""
    cp, box = exercise_sandbox("C", tmp_path)
    cp.messages[-1]["content"][-1]["name"] = "wire_money"
    cp.pending_tool_use = rc.PendingToolUse(
        id=cp.pending_tool_use.id, name="wire_money", input=cp.pending_tool_use.input
    )
    cp = rc.reconcile(cp, box)
    assert cp.messages[-1]["content"][0]["is_error"] is True


def test_none_leaves_the_call_dangling(tmp_path):
    """The naive strategy changes nothing (the API then refuses the request)."""
    cp, box = exercise_sandbox("B", tmp_path)
    before = cp.model_copy(deep=True)
    assert rc.STRATEGIES["none"](cp, box) == before
