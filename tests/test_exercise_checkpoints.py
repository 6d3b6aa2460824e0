"""lab/exercise_checkpoints.py: exercise checkpoints A, B and C come from real crashed runs."""

from __future__ import annotations

import pytest

from resumable_core import lab
from resumable_core.lab.exercise_checkpoints import FIXTURE_DIR, exercise_sandbox, write_exercise_checkpoints


def test_regenerating_the_fixtures_gives_the_committed_files(tmp_path):
    """Crashing the scenarios again reproduces checkpoint_a/b/c.json byte for byte."""
    for path in write_exercise_checkpoints(tmp_path):
        assert path.read_bytes() == (FIXTURE_DIR / path.name).read_bytes(), path.name


def test_checkpoint_a_is_a_finished_run():
    """A: nothing pending and the last message is the assistant's plain reply: finished, not 'after save point B'."""
    cp = lab.load_exercise_checkpoint("A")
    assert cp.pending_tool_use is None and cp.is_finished()
    assert cp.messages[-1]["role"] == "assistant"


def test_checkpoint_b_has_a_read_only_call_pending():
    """B: read_file of meeting-08-25.md is pending."""
    pending = lab.load_exercise_checkpoint("B").pending_tool_use
    assert pending is not None and (pending.name, pending.input) == ("read_file", {"path": "meeting-08-25.md"})


def test_checkpoint_c_has_a_send_pending_that_already_happened(tmp_path):
    """C: send_email is pending, and recreating the crash shows the email already in the outbox."""
    cp, box = exercise_sandbox("C", tmp_path)
    assert cp == lab.load_exercise_checkpoint("C")
    assert cp.pending_tool_use is not None and cp.pending_tool_use.name == "send_email"
    assert len(box.world.sent_emails()) == 1


def test_counters_grow_from_c_to_a():
    """The fixtures carry real turn and token counts."""
    a, b, c = (lab.load_exercise_checkpoint(n) for n in "ABC")
    assert a.turns > b.turns > c.turns > 0
    assert a.tokens_used > b.tokens_used > c.tokens_used > 0


def test_an_unknown_checkpoint_name_is_refused():
    """Only A, B and C exist; another name is a ValueError naming them."""
    with pytest.raises(ValueError, match="A, B, C"):
        lab.load_exercise_checkpoint("D")
