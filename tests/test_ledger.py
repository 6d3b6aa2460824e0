"""ledger.py: idempotency keys and receipts."""

from __future__ import annotations

import pytest

import resumable_core as rc
from resumable_core.ledger import input_hash


def test_key_is_run_id_and_tool_use_id():
    """The key names one call of one run."""
    assert rc.idempotency_key("run_1", "toolu_A") == "run_1:toolu_A"
    assert rc.idempotency_key("run_1", "toolu_A") != rc.idempotency_key("run_2", "toolu_A")


def test_begin_then_record_makes_a_done_receipt(tmp_path):
    """An intent becomes a receipt once its result is recorded."""
    ledger = rc.Ledger(tmp_path / "l.sqlite")
    assert not ledger.begin("k", "send_email", {"a": 1}).done
    ledger.record("k", "sent")
    receipt = ledger.lookup("k")
    assert receipt.done and receipt.result == "sent"


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
