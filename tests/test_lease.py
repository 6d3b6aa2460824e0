"""lease.py: one resumer at a time, and fencing tokens that stop a resumer who lost its lease."""
# mypy: disable-error-code="union-attr"
# (these tests read back what they just wrote; a None fails the test at once anyway)

from __future__ import annotations

import json
import multiprocessing

import pytest

import resumable_core as rc
from resumable_core import lease as lease_module
from resumable_core.course.hidden import strategies as answers
from resumable_core.crash import ONE_CALL_POINTS, kill_self, run_in_child
from resumable_core.errors import CheckpointError, CheckpointFolderMissingError, LeaseHeldError, LeaseLostError
from resumable_core.lab.resumers import race_resumers
from resumable_core.lease import Fence, Lease, lease_path
from resumable_core.scenarios import EMAIL_TASK

MAIL = {"to": "team@example.com", "subject": "s", "body": "b"}


def test_a_held_lease_refuses_a_second_taker(tmp_path):
    """A second take while a live holder has the lease raises LeaseHeldError naming the holder."""
    with Lease.take(tmp_path / "checkpoint.json") as first, pytest.raises(LeaseHeldError) as info:
        Lease.take(tmp_path / "checkpoint.json")
    assert isinstance(info.value, CheckpointError)
    assert info.value.path == lease_path(tmp_path / "checkpoint.json")
    assert first.owner in info.value.reason and "\n" not in info.value.reason


def test_every_take_gets_a_higher_token(tmp_path):
    """The fencing token grows by one at every take, across releases."""
    tokens = []
    for _ in range(3):
        with Lease.take(tmp_path / "checkpoint.json") as lease:
            tokens.append(lease.token)
    assert tokens == [tokens[0], tokens[0] + 1, tokens[0] + 2]


def test_a_dead_holders_lease_is_taken_at_once(tmp_path):
    """A holder killed with SIGKILL never released its lease; the next resumer takes it anyway."""

    def take_and_die():
        Lease.take(tmp_path / "checkpoint.json")
        kill_self()

    assert run_in_child(take_and_die) == "killed"
    with Lease.take(tmp_path / "checkpoint.json") as lease:
        assert lease.token == 2


def test_a_waiting_resumer_gets_the_lease_when_it_is_released(tmp_path):
    """With wait=, a second resumer blocks until the holder lets go, then holds the next token."""
    ctx = multiprocessing.get_context("fork")
    got = ctx.Value("i", 0)

    def wait_for_it():
        with Lease.take(tmp_path / "checkpoint.json", wait=120) as lease:
            got.value = lease.token

    holder = Lease.take(tmp_path / "checkpoint.json")
    waiter = ctx.Process(target=wait_for_it)
    waiter.start()
    holder.release()
    waiter.join()
    assert waiter.exitcode == 0 and got.value == holder.token + 1


def test_an_expired_lease_is_taken_and_its_old_holder_cannot_save(tmp_path):
    """Past its expiry the lease goes to the next resumer; the old holder's next save is refused."""
    old = Lease.take(tmp_path / "checkpoint.json", ttl=0)
    new = Lease.take(tmp_path / "checkpoint.json")
    with pytest.raises(LeaseLostError, match="taken over"), old.holding():
        pass
    with new.holding():
        assert new.token == old.token + 1


def test_a_missing_folder_is_refused_not_a_fresh_start(tmp_path):
    """No lease file is made in a folder that does not exist (an unmounted volume)."""
    with pytest.raises(CheckpointFolderMissingError):
        Lease.take(tmp_path / "gone" / "checkpoint.json")
    assert not (tmp_path / "gone").exists()


def test_the_outbox_refuses_a_stale_token(tmp_path):
    """Once token 2 is known for a run, a send under token 1 is refused and sends nothing."""
    world = rc.World.create(tmp_path)
    world.admit(Fence("run_1", 2))
    with pytest.raises(LeaseLostError, match="stale") as info:
        world.send_email(**MAIL, fence=Fence("run_1", 1))
    assert info.value.path == world.db_path and world.sent_emails() == []
    assert world.send_email(**MAIL, fence=Fence("run_2", 1)) == (1, True)  # tokens are per run


def test_the_ledger_refuses_a_stale_token(tmp_path):
    """A receipt write under an older token than the ledger has seen for the run is refused."""
    ledger = rc.Ledger(tmp_path / "l.sqlite")
    ledger.begin("run_1:toolu_1", "send_email", MAIL, fence=Fence("run_1", 3))
    with pytest.raises(LeaseLostError):
        ledger.record("run_1:toolu_1", "sent", fence=Fence("run_1", 2))
    assert ledger.lookup("run_1:toolu_1").status == "unknown"


@pytest.mark.slow
def test_a_resumer_that_lost_its_lease_cannot_send(tmp_path, monkeypatch):
    """A resumer paused mid-reconcile past its lease's expiry wakes to find its writes refused.

    While the first resumer is "paused" inside its reconcile, a second one takes the expired
    lease and finishes the run; the first one's send is then refused with LeaseLostError.
    """
    box = rc.RunFolder.create(tmp_path, ledger=True)
    assert run_in_child(lambda: box.run(EMAIL_TASK, crash=rc.CrashPlan("after_save_a", tool="send_email"))) == "killed"
    monkeypatch.setattr(lease_module, "LEASE_TTL", 0.0)  # every lease of this test expires at once
    ledger_reconcile = answers.reconcile_by_effect_ledger
    second = []

    def paused_then_wakes(cp, tools):
        second.append(box.run(EMAIL_TASK, reconcile=ledger_reconcile))  # the other resumer, while we sleep
        return ledger_reconcile(cp, tools)

    with pytest.raises(LeaseLostError):
        box.run(EMAIL_TASK, reconcile=paused_then_wakes)
    assert second[0].status == "finished" and len(box.world.sent_emails()) == 1
    assert rc.load_checkpoint(box.checkpoint_path).is_finished()


@pytest.mark.slow
@pytest.mark.parametrize("resumers", [2, 8])
@pytest.mark.parametrize("strategy", ["by_effect", "by_effect_ledger"])
@pytest.mark.parametrize("point", ONE_CALL_POINTS)  # the email run's turn has one call
def test_concurrent_resumers_send_one_email(point, strategy, resumers):
    """N resumers of a run crashed at any point send one email; one finishes it, the rest find it done or are refused."""
    out = race_resumers(point, "send_email", strategy, resumers)
    assert out.killed and out.effects == 1 and out.emails == 1
    assert out.completed == 1 and out.completed + out.found_finished + out.refused == resumers
    assert out.api_error == 0 and out.other == []


@pytest.mark.slow
@pytest.mark.parametrize("point", ["after_tool", "after_save_b"])
def test_resumers_after_the_read_file_turn_send_one_email(point):
    """Eight resumers of the email run crashed on its read_file turn send one email, even with rerun."""
    for strategy in ("rerun", "by_effect", "by_effect_ledger"):
        out = race_resumers(point, "send_email", strategy, 8, crash_tool="read_file")
        assert out.emails == 1 and out.completed == 1 and out.found_finished + out.refused == 7, strategy
        assert out.other == [], strategy


@pytest.mark.slow
def test_rerun_still_duplicates_a_sent_email_once_with_many_resumers():
    """The lease stops the extra resumers, not rerun's own duplicate: two emails, not nine."""
    out = race_resumers("after_tool", "send_email", "rerun", 8)
    # Which of the other seven are refused and which start after the run finished depends on timing.
    assert out.effects == 2 and out.completed == 1 and out.found_finished + out.refused == 7


@pytest.mark.slow
def test_waiting_resumers_all_complete():
    """With lease_wait, the other resumers wait their turn and find the run finished."""
    out = race_resumers("after_tool", "send_email", "by_effect_ledger", 8, lease_wait=120)
    assert out.effects == 1 and out.completed == 1 and out.found_finished == 7 and out.refused == 0


@pytest.mark.slow
@pytest.mark.extras
def test_simulate_races_resumers_as_json(capsys):
    """`simulate --resumers 2 --format json` prints the race's effects, refused, found_finished, completed and api_error."""
    from resumable_core.__main__ import main

    argv = [
        "simulate",
        "--crash-at",
        "after_save_b",
        "--tool",
        "read_file",
        "--strategy",
        "by_effect",
        "--resumers",
        "2",
    ]
    assert main([*argv, "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # the second resumer is refused, or finds the run done: timing decides which
    assert out["resumers"] == 2 and out["completed"] + out["found_finished"] + out["refused"] == 2
    assert out["api_error"] == 0 and out["effects"] == 1


@pytest.mark.slow
@pytest.mark.extras
def test_simulate_crash_loop_reports_model_calls(capsys):
    """`simulate --crash-at after_response --crashes 10 --max-turns 3 --format json` reports 3 model calls."""
    from resumable_core.__main__ import main

    argv = ["simulate", "--crash-at", "after_response", "--crashes", "10", "--max-turns", "3", "--format", "json"]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["model_calls"] == 3


@pytest.mark.slow
def test_resumers_can_race_with_a_learners_function():
    """race_resumers takes any reconcile(cp, tools), named by its function, like run_cell."""
    out = race_resumers("after_tool", "send_email", answers.reconcile_by_effect, 2)
    assert out.strategy == "reconcile_by_effect" and out.effects == 1 and out.completed == 1
