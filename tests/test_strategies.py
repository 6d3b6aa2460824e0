"""strategies.py: the moves on a dangling call; course/hidden/strategies.py: the answers, registered on import."""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys

import pytest

import resumable_core as rc
from resumable_core import strategies
from resumable_core.__main__ import build_parser
from resumable_core.course.hidden import strategies as answers
from resumable_core.lab.exercise_checkpoints import exercise_run_folder


@pytest.mark.slow
def test_nothing_pending_is_returned_as_is(tmp_path):
    """Every strategy leaves a checkpoint with nothing pending unchanged."""
    cp_a, box = exercise_run_folder("A", tmp_path)
    calls = box.world.calls()
    for strategy in rc.STRATEGIES.values():
        assert strategy.reconcile(cp_a.model_copy(deep=True), box) == cp_a
    assert box.world.calls() == calls


@pytest.mark.slow
def test_by_effect_reruns_a_read_only_call(tmp_path):
    """The lesson's reconcile re-runs read_file and records its real output as the result."""
    cp, box = exercise_run_folder("B", tmp_path)
    reads = len(box.world.calls("read_file"))
    cp = answers.reconcile(cp, box)
    assert cp.pending_tool_use is None and rc.consistency_problem(cp) is None
    assert "Retro, Aug 25" in cp.messages[-1]["content"][0]["content"]
    assert len(box.world.calls("read_file")) == reads + 1


@pytest.mark.slow
def test_by_effect_does_not_rerun_a_side_effect(tmp_path):
    """For send_email it answers is_error 'status unknown' and sends nothing."""
    cp, box = exercise_run_folder("C", tmp_path)
    assert cp.pending_tool_use is not None
    pending = cp.pending_tool_use.id
    cp = answers.reconcile(cp, box)
    block = cp.messages[-1]["content"][0]
    assert block == {"type": "tool_result", "tool_use_id": pending, "content": rc.STATUS_UNKNOWN, "is_error": True}
    assert len(box.world.sent_emails()) == 1


@pytest.mark.slow
def test_rerun_sends_the_email_again(tmp_path):
    """The postmortem's production reconcile re-runs send_email: a second email."""
    cp, box = exercise_run_folder("C", tmp_path)
    rc.STRATEGIES["rerun"].reconcile(cp, box)
    assert len(box.world.sent_emails()) == 2


@pytest.mark.slow
def test_delete_drops_the_call_and_the_fact(tmp_path):
    """delete removes the assistant's tool_use message: the conversation no longer says it was sent."""
    cp, box = exercise_run_folder("C", tmp_path)
    n = len(cp.messages)
    cp = rc.STRATEGIES["delete"].reconcile(cp, box)
    assert len(cp.messages) == n - 1 and cp.pending_tool_use is None
    assert not any(b.get("name") == "send_email" for m in cp.messages for b in rc.checkpoint.blocks(m))
    assert len(box.world.sent_emails()) == 1  # the email is still out there


@pytest.mark.slow
def test_ledger_reuses_the_receipt_or_finishes_under_the_key(tmp_path):
    """With a ledger, the crashed send is finished under its idempotency key: still one email."""
    cp, box = exercise_run_folder("C", tmp_path, ledger=True)
    cp = rc.STRATEGIES["by_effect_ledger"].reconcile(cp, box)
    assert cp.messages[-1]["content"][0].get("is_error") is None
    assert len(box.world.sent_emails()) == 1
    assert box.ledger is not None
    receipt = box.ledger.lookup(rc.idempotency_key(cp.run_id, cp.messages[-1]["content"][0]["tool_use_id"]))
    assert receipt is not None and receipt.done


@pytest.mark.slow
def test_ledger_strategy_without_a_ledger_falls_back(tmp_path):
    """by_effect_ledger with no ledger answers 'status unknown' like by_effect."""
    cp, box = exercise_run_folder("C", tmp_path)
    cp = rc.STRATEGIES["by_effect_ledger"].reconcile(cp, box)
    assert cp.messages[-1]["content"][0]["is_error"] is True


@pytest.mark.slow
def test_unknown_tool_is_not_executed(tmp_path):
    """A pending call to a tool the toolbox lacks is answered 'status unknown', never executed."""
    cp, box = exercise_run_folder("C", tmp_path)
    pending = cp.pending_tool_use
    assert pending is not None
    cp.messages[-1]["content"][-1]["name"] = "wire_money"
    cp.pending_tool_use = rc.PendingToolUse(id=pending.id, name="wire_money", input=pending.input)
    cp = answers.reconcile(cp, box)
    assert cp.messages[-1]["content"][0]["is_error"] is True


@pytest.mark.slow
def test_none_leaves_the_call_dangling(tmp_path):
    """The naive strategy changes nothing (the API then refuses the request)."""
    cp, box = exercise_run_folder("B", tmp_path)
    before = cp.model_copy(deep=True)
    assert rc.STRATEGIES["none"].reconcile(cp, box) == before


def test_only_the_ledger_strategy_needs_a_ledger():
    """The registry says which strategy needs a ledger, so nothing compares names to decide it."""
    assert [s.name for s in rc.STRATEGIES.values() if s.needs_ledger] == ["by_effect_ledger"]
    assert all(s.help and "\n" not in s.help for s in rc.STRATEGIES.values())


def test_a_name_is_registered_once():
    """Registering a second strategy under a taken name is refused, naming the clash."""
    with pytest.raises(ValueError, match="'rerun' is already registered"):
        strategies.register(strategies.Strategy("rerun", answers.reconcile, "again"))


@pytest.fixture
def ask_first():
    """A strategy registered at runtime, removed again afterwards."""

    def reconcile_ask_first(cp, tools):
        return answers.reconcile_by_effect(cp, tools)

    yield strategies.register(strategies.Strategy("ask_first", reconcile_ask_first, "asks before acting"))
    del strategies.STRATEGIES["ask_first"]


def _subcommand(name: str) -> argparse.ArgumentParser:
    """The CLI's parser for the subcommand ``name``, built now."""
    return next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices[name]


def _choices(subcommand: str, option: str) -> list[str]:
    """The choices the CLI's parser offers for ``option`` of ``subcommand``."""
    return list(next(a for a in _subcommand(subcommand)._actions if option in a.option_strings).choices or ())


@pytest.mark.slow
def test_a_strategy_registered_at_runtime_shows_up_everywhere(ask_first):
    """One register() call: the CLI's choices and help, the simulator's menu and help, and the matrix's default."""
    pytest.importorskip("ipywidgets", reason="the simulator's widgets come with the [lab] extra")
    from resumable_core import lab
    from resumable_core.lab.widgets import CrashSimulator

    assert "ask_first" in _choices("matrix", "--strategy") and "ask_first" in _choices("simulate", "--strategy")
    assert "asks before acting" in _subcommand("simulate").format_help()
    sim = CrashSimulator()
    assert "ask_first" in sim.strategy.options
    sim.strategy.value = "ask_first"
    assert "asks before acting" in sim.help.value
    rows = lab.run_matrix(scenarios=["send_email"], crash_points=["after_tool"])
    assert [r.strategy for r in rows] == strategies.matrix_strategies() and rows[-1].strategy == "ask_first"
    assert rows[-1].effects == 1


@pytest.mark.slow
def test_the_core_registers_only_the_naive_strategies():
    """A fresh ``import resumable_core`` offers none, delete and rerun: the answers are not in the core."""
    code = "import json, resumable_core as rc; print(json.dumps(list(rc.STRATEGIES)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == ["none", "delete", "rerun"]
    assert not hasattr(strategies, "reconcile_by_effect") and "reconcile" not in rc.__all__


def test_importing_the_answers_registers_them_once():
    """Importing course.hidden.strategies adds by_effect and by_effect_ledger; importing it again changes nothing."""
    before = dict(rc.STRATEGIES)
    importlib.reload(answers)
    assert dict(rc.STRATEGIES) == before
    assert list(rc.STRATEGIES)[-2:] == ["by_effect", "by_effect_ledger"]
    assert rc.STRATEGIES["by_effect"].reconcile is before["by_effect"].reconcile


def test_an_unknown_strategy_name_lists_the_choices_and_the_way_to_pass_a_function():
    """A misspelt name raises one line naming the registered strategies, the close match and the function route."""
    with pytest.raises(rc.UnknownStrategyError) as info:
        strategies.strategy_named("by-effect")
    message = str(info.value)
    assert "\n" not in message and "did you mean 'by_effect'?" in message
    assert all(name in message for name in rc.STRATEGIES) and "your own reconcile(cp, tools) function" in message
    assert info.value.name == "by-effect" and info.value.choices == list(rc.STRATEGIES)
    assert isinstance(info.value, ValueError)


def _crashed_between_tools(tmp_path, point: str = "between_tools", tool: str = "send_email"):
    """The briefing run killed for real in its parallel turn; its checkpoint and toolbox."""
    from resumable_core.crash import run_in_child
    from resumable_core.scenarios import BRIEFING_TASK

    folder = rc.RunFolder.create(tmp_path)
    plan = rc.CrashPlan(point, tool=tool, turn=2)
    assert run_in_child(lambda: folder.run(BRIEFING_TASK, crash=plan)) == "killed"
    return rc.load_checkpoint(folder.checkpoint_path), folder.toolbox


@pytest.mark.slow
def test_answer_pending_settles_a_parallel_turn_in_block_order(tmp_path):
    """Each answer takes the first pending call; the last one sends every result in one user message."""
    cp, _ = _crashed_between_tools(tmp_path, "after_save_a", "read_file")
    ids = [p.id for p in cp.pending_tool_uses]
    n = len(cp.messages)
    cp = strategies.answer_pending(cp, "first")
    assert len(cp.messages) == n and [p.id for p in cp.pending_tool_uses] == ids[1:]
    cp = strategies.answer_pending(cp, "second", is_error=True)
    assert [b["tool_use_id"] for b in cp.messages[-1]["content"]] == ids and cp.pending_tool_uses == []
    assert cp.recorded_results == [] and rc.consistency_problem(cp) is None


@pytest.mark.slow
def test_rerun_keeps_the_recorded_result_and_reruns_the_rest(tmp_path):
    """Crashed between the tools, rerun keeps send_email's result and re-reads the note: one message, in order."""
    cp, box = _crashed_between_tools(tmp_path)
    kept = cp.recorded_results[0]
    cp = rc.STRATEGIES["rerun"].reconcile(cp, box)
    results = cp.messages[-1]["content"]
    assert results[0] == kept and "Retro, Aug 25" in results[1]["content"]
    assert rc.consistency_problem(cp) is None and len(box.world.sent_emails()) == 1


@pytest.mark.slow
def test_rerun_resends_a_pending_side_effect_of_a_parallel_turn(tmp_path):
    """Crashed after send_email ran in the parallel turn, rerun sends it again: the kit's rerun is no answer."""
    cp, box = _crashed_between_tools(tmp_path, "after_tool", "send_email")
    rc.STRATEGIES["rerun"].reconcile(cp, box)
    assert len(box.world.sent_emails()) == 2


@pytest.mark.slow
def test_delete_drops_a_parallel_turn_and_its_recorded_result(tmp_path):
    """delete removes the turn's assistant message and the result recorded for it: the email is forgotten."""
    cp, box = _crashed_between_tools(tmp_path)
    n = len(cp.messages)
    cp = rc.STRATEGIES["delete"].reconcile(cp, box)
    assert len(cp.messages) == n - 1 and cp.pending_tool_uses == [] and cp.recorded_results == []
    assert len(box.world.sent_emails()) == 1
