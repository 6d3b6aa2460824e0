"""ledger.py: idempotency keys and receipts."""
# mypy: disable-error-code="union-attr"
# (these tests read back what they just wrote; a None fails the test at once anyway)

from __future__ import annotations

import sqlite3

import pytest

import resumable_core as rc
from resumable_core.course.hidden import strategies as answers
from resumable_core.crash import run_in_child
from resumable_core.ledger import input_hash
from resumable_core.scenarios import EMAIL_TASK


def test_key_is_run_id_and_tool_use_id():
    """The key names one call of one run."""
    assert rc.idempotency_key("run_1", "toolu_A") == "run_1:toolu_A"
    assert rc.idempotency_key("run_1", "toolu_A") != rc.idempotency_key("run_2", "toolu_A")


def test_begin_then_record_makes_a_done_receipt(tmp_path):
    """An intent (status unknown) becomes a succeeded receipt with the result and its time."""
    ledger = rc.Ledger(tmp_path / "l.sqlite")
    intent = ledger.begin("k", "send_email", {"a": 1})
    assert not intent.done and intent.status == "unknown" and intent.result is None
    ledger.record("k", "sent")
    receipt = ledger.lookup("k")
    assert receipt.done and receipt.status == "succeeded" and receipt.result == "sent"
    assert receipt.updated_at >= intent.updated_at > 0


def test_a_failure_is_recorded_as_failed(tmp_path):
    """record(status="failed") keeps the error text: the key is proof the call ended badly."""
    ledger = rc.Ledger(tmp_path / "l.sqlite")
    ledger.begin("k", "send_email", {"a": 1})
    ledger.record("k", "smtp said no", status="failed")
    receipt = ledger.lookup("k")
    assert receipt.done and (receipt.status, receipt.result) == ("failed", "smtp said no")


def test_a_status_outside_the_three_is_refused_by_the_file(tmp_path):
    """The receipts table itself only holds unknown, succeeded or failed."""
    ledger = rc.Ledger(tmp_path / "l.sqlite")
    ledger.begin("k", "t", {})
    with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
        ledger.record("k", "x", status="done")  # type: ignore[arg-type]  # deliberately not a ReceiptStatus


def test_same_key_with_other_input_is_refused(tmp_path):
    """A key reused with another input raises IdempotencyConflictError with both hashes."""
    ledger = rc.Ledger(tmp_path / "l.sqlite")
    ledger.begin("k", "send_email", {"to": "a"})
    with pytest.raises(rc.IdempotencyConflictError) as info:
        ledger.begin("k", "send_email", {"to": "b"})
    assert info.value.key == "k" and info.value.stored_hash == input_hash("send_email", {"to": "a"})


def test_input_hash_ignores_key_order():
    """Canonical JSON: the same input in another key order hashes the same."""
    assert input_hash("t", {"a": 1, "b": 2}) == input_hash("t", {"b": 2, "a": 1})


def test_receipts_survive_reopening(tmp_path):
    """The ledger is on disk: a new Ledger on the same file sees the receipts."""
    rc.Ledger(tmp_path / "l.sqlite").begin("k", "t", {})
    assert [r.key for r in rc.Ledger(tmp_path / "l.sqlite").receipts()] == ["k"]


@pytest.mark.slow
def test_a_new_run_does_not_reuse_an_old_runs_receipt(tmp_path):
    """Deleting the checkpoint and running again is a new run: new run id, new key, a new email."""
    box = rc.RunFolder.create(tmp_path, ledger=True)
    first = box.run(EMAIL_TASK).checkpoint.run_id
    box.checkpoint_path.unlink()
    second = box.run(EMAIL_TASK).checkpoint.run_id
    assert first != second
    assert [r.key.split(":")[0] for r in box.toolbox.ledger.receipts()] == [first, second]
    assert len(box.world.sent_emails()) == 2


@pytest.mark.slow
def test_a_resumed_run_keeps_its_run_id(tmp_path):
    """The run id is in the checkpoint, so the resume's keys match the crashed run's."""
    box = rc.RunFolder.create(tmp_path, ledger=True)
    run_in_child(lambda: box.run(EMAIL_TASK, crash=rc.CrashPlan("after_tool", tool="send_email")))
    crashed = rc.load_checkpoint(box.checkpoint_path).run_id
    assert box.run(EMAIL_TASK, reconcile=answers.reconcile_by_effect_ledger).checkpoint.run_id == crashed
    assert len(box.world.sent_emails()) == 1
