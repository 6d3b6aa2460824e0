"""lab/matrix.py: the crash matrix is real, the ledger strategy survives every crash, and the recorded rows are current."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import resumable_core as rc
from resumable_core import lab
from resumable_core.course.hidden import strategies as answers
from resumable_core.crash import CRASH_POINTS, ONE_CALL_POINTS
from resumable_core.lab.matrix import RANDOM_INSTANT, format_table, kill_at_random_instant, rows_json
from resumable_core.run_folder import turn_calls
from resumable_core.scenarios import one_call_scenarios
from resumable_core.strategies import matrix_strategies

PARALLEL = "send_email+read_file"
"""The briefing run's scenario: one turn asks for send_email, then read_file."""


@pytest.fixture(scope="module")
def matrix():
    """The whole matrix with its default strategies, computed once."""
    return {(r.crash_point, r.tool, r.strategy): r for r in lab.run_matrix()}


@pytest.mark.slow
def test_matrix_has_every_point_tool_and_strategy(matrix):
    """7 crash points x 2 tools x 4 strategies, one row each."""
    assert len(matrix) == len(ONE_CALL_POINTS) * 2 * 4


@pytest.mark.slow
def test_rerun_sends_two_emails_after_the_tool(matrix):
    """The postmortem: crashing after send_email and re-running gives two emails."""
    assert matrix[("after_tool", "send_email", "rerun")].effects == 2
    assert matrix[("during_save_b", "send_email", "rerun")].effects == 2


@pytest.mark.slow
def test_ledger_never_duplicates_and_never_hits_the_api_error(matrix):
    """by_effect_ledger: one email at every crash point, no 400, always completed."""
    rows = [r for k, r in matrix.items() if k[2] == "by_effect_ledger"]
    assert all(not r.api_error and r.completed for r in rows)
    assert all(r.effects == 1 for r in rows if r.tool == "send_email")


@pytest.mark.slow
def test_by_effect_pays_an_extra_turn_to_check_the_outbox(matrix):
    """by_effect avoids the duplicate but spends a turn on list_sent_emails; the ledger does not."""
    by_effect = matrix[("after_tool", "send_email", "by_effect")]
    ledger = matrix[("after_tool", "send_email", "by_effect_ledger")]
    assert by_effect.effects == 1 and by_effect.turns == ledger.turns + 1


@pytest.mark.slow
def test_delete_duplicates_a_send_that_happened(matrix):
    """delete hides that the email went out, so the model sends it again."""
    assert matrix[("after_tool", "send_email", "delete")].effects == 2


@pytest.mark.slow
def test_crashes_before_save_a_leave_nothing_to_reconcile(matrix):
    """Before save point A no call is recorded: every strategy behaves alike."""
    for point in ("before_model_call", "after_response", "during_save_a"):
        rows = {matrix[(point, "send_email", s)].effects for s in matrix_strategies()}
        assert rows == {1}


@pytest.mark.slow
def test_naive_resume_hits_the_real_400():
    """Resuming with the call still dangling is refused by the API with its real message."""
    cell = lab.run_cell("after_save_a", "send_email", "none")
    assert cell.killed and cell.row.api_error and not cell.row.completed and cell.error is not None
    assert "`tool_use` ids were found without `tool_result` blocks immediately after" in cell.error


@pytest.mark.slow
def test_a_learners_function_plugs_in(tmp_path):
    """Any reconcile(cp, tools) runs in a cell, named by its function name."""

    def my_reconcile(cp, tools):
        return answers.reconcile_by_effect(cp, tools)

    cell = lab.run_cell("after_tool", "send_email", my_reconcile, root=tmp_path)
    assert cell.row.strategy == "my_reconcile" and cell.row.effects == 1
    assert cell.checkpoint_at_crash is not None
    assert [p["name"] for p in cell.checkpoint_at_crash["pending_tool_uses"]] == ["send_email"]
    assert "Crash after the tool ran" in cell.story()


@pytest.mark.slow
def test_table_and_json_show_the_same_rows():
    """The JSON rows carry the matrix's columns; the table has a header and one line per row."""
    rows = lab.run_matrix(strategies=["rerun"], scenarios=["send_email"], crash_points=["after_tool"])
    data = json.loads(rows_json(rows))
    assert data == [
        {
            "crash_point": "after_tool",
            "tool": "send_email",
            "strategy": "rerun",
            "effects": 2,
            "api_error": False,
            "completed": True,
            "turns": 3,
            "tokens": data[0]["tokens"],
        }
    ]
    assert format_table(rows).splitlines()[0].split() == list(data[0])


@pytest.fixture(scope="module")
def on_disk():
    """A folder on the machine's disk, not the suite's memory file system (make test's TMPDIR): a kill at a random
    instant lands between the send and save point B as often as it does for a learner only where that save costs
    what a real one does, its fsyncs included."""
    with tempfile.TemporaryDirectory(
        prefix="resumable-kills-", dir="/var/tmp" if os.path.isdir("/var/tmp") else None
    ) as d:
        yield Path(d)


@pytest.fixture(scope="module")
def run_span(on_disk):
    """How long one warm, uncrashed email run takes on this machine (kills are drawn over it)."""
    import time

    root = on_disk / "span"
    rc.RunFolder.create(root / "warm").run(rc.SCENARIOS["send_email"].task)
    t0 = time.perf_counter()
    rc.RunFolder.create(root / "timed").run(rc.SCENARIOS["send_email"].task)
    return (time.perf_counter() - t0) * 1.3


@pytest.mark.slow
def test_ledger_survives_200_kills_at_random_instants(tmp_path, run_span):
    """Killed at 200 random instants: the checkpoint always loads, one email, never a 400."""
    rng = random.Random(20261129)
    span, killed, attempts = run_span, 0, 0
    while killed < 200 and attempts < 600:
        cell = kill_at_random_instant("send_email", "by_effect_ledger", tmp_path / str(attempts), rng, span)
        attempts += 1
        assert (cell.row.effects, cell.row.api_error, cell.row.completed) == (1, False, True), cell.story()
        if cell.killed:
            killed += 1
        else:  # the instant fell after the run's end (a loaded machine runs faster than measured): aim earlier
            span *= 0.9
    assert killed == 200


@pytest.mark.slow
def test_rerun_duplicates_under_random_kills(on_disk, run_span):
    """Killed at random instants, blind re-run does send duplicates: the simulation is real."""
    rng = random.Random(7)
    duplicates = 0
    for i in range(800):  # the window between the send and save point B is a few percent of a run
        cell = kill_at_random_instant("send_email", "rerun", on_disk / f"dup-{i}", rng, run_span)
        assert not cell.row.api_error and cell.row.completed
        duplicates += cell.row.effects > 1
        if duplicates >= 2:
            break
    assert duplicates >= 2


@pytest.mark.slow
def test_a_learners_ledger_function_can_ask_for_a_ledger(tmp_path):
    """run_cell(ledger=True) gives any strategy a toolbox with a ledger."""
    seen = []

    def my_ledger_reconcile(cp, tools):
        seen.append(tools.ledger is not None)
        return answers.reconcile_by_effect_ledger(cp, tools)

    cell = lab.run_cell("after_tool", "send_email", my_ledger_reconcile, root=tmp_path, ledger=True)
    assert seen == [True] and cell.row.effects == 1 and cell.row.turns == 3


def test_the_story_of_a_random_instant_kill(tmp_path):
    """A cell killed at a random instant tells its story (it raised KeyError('random') before)."""
    cell = kill_at_random_instant("send_email", "by_effect_ledger", tmp_path, random.Random(3), 0.05)
    assert cell.row.crash_point == RANDOM_INSTANT
    story = cell.story()
    assert story.startswith(
        "Crash at a random instant of the run that calls send_email; resume with 'by_effect_ledger'."
    )
    assert "emails in the outbox now: 1" in story


def test_an_unknown_strategy_name_is_one_line_naming_the_choices():
    """run_cell with a misspelt strategy raises one line listing every registered name and the function route."""
    with pytest.raises(rc.UnknownStrategyError) as raised:
        lab.run_cell("after_tool", "send_email", "by-effect")
    message = str(raised.value)
    assert "\n" not in message and "'by-effect'" in message
    assert all(name in message for name in rc.STRATEGIES) and "your own reconcile(cp, tools) function" in message


def test_a_reconcile_that_returns_none_is_named_in_a_cell(tmp_path):
    """run_cell with a reconcile that forgets ``return cp`` raises ReconcileResultError naming the function."""

    def my_reconcile(cp, tools):
        rc.answer_pending(cp, "sent?")

    with pytest.raises(rc.ReconcileResultError, match=r"^my_reconcile returned None, not a Checkpoint: .*return cp"):
        lab.run_cell("after_tool", "send_email", my_reconcile, root=tmp_path)


def test_recorded_rows_cover_every_cell_of_the_answer_strategies():
    """lab.recorded_matrix() holds one row per one-call scenario x crash point for by_effect and by_effect_ledger."""
    rows = lab.recorded_matrix()
    cells = {(r.crash_point, r.tool, r.strategy) for r in rows}
    expected = {(p, t, s.name) for p in ONE_CALL_POINTS for t in one_call_scenarios() for s in answers.ANSWERS}
    assert cells == expected and len(rows) == len(expected)
    assert all(isinstance(r, lab.MatrixRow) for r in rows)


def test_recorded_rows_of_the_parallel_turn_cross_every_crash_point():
    """recorded_matrix(scenarios=[the two-call one]) holds every crash point, between_tools included, per answer."""
    rows = lab.recorded_matrix(scenarios=[PARALLEL])
    cells = [(r.crash_point, r.strategy) for r in rows]
    assert cells == [(p, s.name) for p in CRASH_POINTS for s in answers.ANSWERS]
    assert all(r.effects == 1 and r.completed and not r.api_error for r in rows)


@pytest.mark.slow
def test_the_parallel_scenario_is_one_registry_entry_whose_turn_asks_for_two_tools():
    """The briefing scenario's key names its turn's tools, and an uncrashed run asks for them at once, in that order."""
    chosen = rc.SCENARIOS[PARALLEL]
    assert chosen.tools == ("send_email", "read_file") and chosen.calls == 2 and chosen.tool == "send_email"
    assert [name for name, _ in turn_calls(PARALLEL)] == list(chosen.tools)
    assert PARALLEL not in one_call_scenarios() and all(rc.SCENARIOS[k].calls == 1 for k in one_call_scenarios())
    for key in one_call_scenarios():
        assert [name for name, _ in turn_calls(key)] == [key]


@pytest.fixture(scope="module")
def parallel_matrix():
    """The two-call scenario's matrix with the default strategies, computed once."""
    return {(r.crash_point, r.strategy): r for r in lab.run_matrix(scenarios=[PARALLEL])}


@pytest.mark.slow
def test_the_parallel_matrix_crosses_every_point_and_strategy(parallel_matrix):
    """8 crash points (between_tools too) x 4 strategies, the email counted from the outbox."""
    assert set(parallel_matrix) == {(p, s) for p in CRASH_POINTS for s in matrix_strategies()}
    assert all(r.tool == PARALLEL and not r.api_error and r.completed for r in parallel_matrix.values())


@pytest.mark.slow
def test_between_tools_keeps_the_recorded_send_unless_the_turn_is_deleted(parallel_matrix):
    """Between the tools the email's result is on disk: rerun and the answers send one; delete drops it and sends two."""
    row = {s: parallel_matrix[("between_tools", s)].effects for s in matrix_strategies()}
    assert row == {"delete": 2, "rerun": 1, "by_effect": 1, "by_effect_ledger": 1}
    assert parallel_matrix[("after_tool", "rerun")].effects == 2  # the send ran, its result did not reach disk


@pytest.mark.slow
def test_recorded_rows_equal_a_fresh_run(matrix, parallel_matrix):
    """The fixture the kit ships equals the answer strategies' rows crashed now (else: python -m resumable_core.course.recorded_matrix)."""
    fresh = [matrix[(r.crash_point, r.tool, r.strategy)] for r in lab.recorded_matrix()]
    assert lab.recorded_matrix() == fresh, "stale fixture: run python -m resumable_core.course.recorded_matrix"
    parallel = lab.recorded_matrix(scenarios=[PARALLEL])
    assert parallel == [parallel_matrix[(r.crash_point, r.strategy)] for r in parallel], "stale fixture (parallel turn)"


@pytest.mark.slow
def test_a_cell_between_the_tools_tells_what_was_recorded_and_what_each_call_did(tmp_path):
    """A real kill between send_email and read_file: one result recorded, one call pending, each call's effects counted."""
    cell = lab.run_cell("between_tools", PARALLEL, "rerun", root=tmp_path)
    assert cell.killed and cell.checkpoint_at_crash is not None
    assert [p["name"] for p in cell.checkpoint_at_crash["pending_tool_uses"]] == ["read_file"]
    assert len(cell.checkpoint_at_crash["recorded_results"]) == 1 and len(cell.outbox_at_crash) == 1
    assert (
        cell.turn_effects == {"send_email": 1, "read_file": 1} and cell.row.effects == 1
    )  # read_file never ran before
    story = cell.story()
    assert story.startswith("Crash between send_email (its result saved) and read_file (not run yet)")
    assert "result recorded for send_email" in story and "pending read_file" in story
    assert "Effects of each call of the crashed turn: send_email 1, read_file 1." in story


@pytest.mark.slow
def test_a_parallel_turn_dies_at_the_first_call_and_after_the_last(tmp_path):
    """after_tool kills the parallel turn at its first call (both pending), after_save_b after its last (none)."""
    first = lab.run_cell("after_tool", PARALLEL, "by_effect", root=tmp_path / "first")
    assert first.killed and first.checkpoint_at_crash is not None
    assert [p["name"] for p in first.checkpoint_at_crash["pending_tool_uses"]] == list(rc.SCENARIOS[PARALLEL].tools)
    assert "at send_email, the first of its 2 calls" in first.story()
    last = lab.run_cell("after_save_b", PARALLEL, "by_effect", root=tmp_path / "last")
    assert last.killed and last.checkpoint_at_crash is not None
    assert last.checkpoint_at_crash["pending_tool_uses"] == []
    assert last.turn_effects == {"send_email": 1, "read_file": 1}


def test_an_unknown_scenario_or_crash_point_is_refused_before_any_run():
    """run_cell with a tool no scenario exercises, or a point that is no crash point, raises the core's error (a
    ValueError too), naming the choices and the nearest one; its template and data let the lab say it."""
    with pytest.raises(rc.UnknownScenarioError, match="read_file, send_email") as scenario:
        lab.run_cell("after_tool", "wire_money", "rerun")
    assert "did you mean" not in str(scenario.value) and scenario.value.key == "wire_money"
    with pytest.raises(ValueError, match=r"no scenario exercises 'send_emial'; did you mean 'send_email'\?"):
        lab.run_cell("after_tool", "send_emial", "rerun")
    with pytest.raises(rc.UnknownCrashPointError) as point:
        lab.run_cell("after_tul", "send_email", "rerun")
    assert str(point.value).startswith("unknown crash point 'after_tul'; did you mean 'after_tool'? choose one of")
    assert point.value.template is not None and point.value.data["point"] == "'after_tul'"


def test_the_lab_imports_nothing_from_the_course():
    """No lab module imports the course wing: the student kit's lab runs without the answers."""
    import ast
    from pathlib import Path

    offenders = []
    for path in sorted(Path(lab.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                module = ("." * node.level) + (node.module or "")
                names = [module] + [f"{module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            offenders += [(path.name, n) for n in names if "course" in n.split(".")]
    assert offenders == []


@pytest.mark.slow  # a fresh interpreter runs three cells with real kills: 5 s of CPU or more
def test_the_lab_defaults_work_with_only_the_kits_strategies():
    """In a fresh process with no answers registered, the matrix, the simulator and the races use what is registered."""
    code = (
        "import json, sys, resumable_core as rc\n"
        "from resumable_core import lab\n"
        "from resumable_core.lab.widgets import CrashSimulator, MatrixHeatmap\n"
        "rows = lab.run_matrix(scenarios=['send_email'], crash_points=['after_tool'])\n"
        "sim, heat = CrashSimulator(), MatrixHeatmap(recorded=lab.recorded_matrix())\n"
        "print(json.dumps({'rows': [[r.strategy, r.effects] for r in rows], 'menu': list(sim.strategy.options),\n"
        "  'heat': heat.strategies, 'recorded': len(heat.recorded),\n"
        "  'course': sorted(m for m in sys.modules if m.startswith('resumable_core.course'))}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    seen = json.loads(out.stdout)
    assert seen["rows"] == [["delete", 2], ["rerun", 2]]
    assert seen["menu"] == seen["heat"] == ["none", "delete", "rerun"]
    assert seen["recorded"] == 2 * len(ONE_CALL_POINTS) * 2 and seen["course"] == []
    assert out.stderr == ""
