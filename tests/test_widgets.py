"""lab/widgets.py and lab/render.py: the simulator's widgets, driven as a learner would (set values, click)."""

from __future__ import annotations

import html
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

import resumable_core as rc
from resumable_core import lab
from resumable_core.course.hidden import strategies as answers
from resumable_core.crash import ONE_CALL_POINTS
from resumable_core.lab.matrix import Cell, MatrixRow
from resumable_core.lab.render import CATEGORIES, cell_category, checkpoint_html, describe_checkpoint
from resumable_core.lab.widgets import MY_RECONCILE, CrashSimulator, MatrixHeatmap

NOTEBOOK = Path(__file__).resolve().parents[1] / "simulator" / "simulator.ipynb"


def shown_count(sim: CrashSimulator) -> int:
    """The number in the big "Emails sent: N" badge."""
    m = re.search(r"Emails sent: (\d+)", sim.email_count.value)
    assert m, sim.email_count.value
    return int(m.group(1))


def text(widget) -> str:
    """An HTML widget's visible text, roughly: tags dropped, entities unescaped."""
    return html.unescape(re.sub(r"<[^>]+>", "", widget.value))


def click_run(sim: CrashSimulator) -> Cell:
    """Press Run as a learner would; the cell it shows."""
    sim.run_button.click()
    assert sim.cell is not None, text(sim.status)
    return sim.cell


def choose(sim: CrashSimulator, scenario: str, point: str, strategy: str) -> None:
    """Set the three menus."""
    sim.scenario.value = scenario
    sim.crash_point.value = point
    sim.strategy.value = strategy


@pytest.mark.slow
def test_rerun_after_tool_shows_two_emails_matching_the_outbox(capfd):
    """send_email + after_tool + rerun, clicked: the badge shows 2, equal to len(cell.outbox), duplicate marked."""
    sim = CrashSimulator()
    choose(sim, "send_email", "after_tool", "rerun")
    cell = click_run(sim)
    assert cell.killed
    assert shown_count(sim) == len(cell.outbox) == 2
    assert "rs-dup" in sim.email_count.value
    assert text(sim.outbox).count("(duplicate)") == 1
    assert f"Effects of the crashed call (times the crashed send_email took effect): {cell.row.effects}" in text(
        sim.summary
    )
    assert "No API error" in text(sim.error)
    assert capfd.readouterr().err == ""


@pytest.mark.slow
def test_ledger_strategy_shows_one_email_with_its_idempotency_key():
    """by_effect_ledger at the same crash: the badge shows 1 and the email carries the run's idempotency key."""
    sim = CrashSimulator()
    choose(sim, "send_email", "after_tool", "by_effect_ledger")
    cell = click_run(sim)
    assert shown_count(sim) == len(cell.outbox) == 1
    key = cell.outbox[0]["idempotency_key"]
    assert key and key in text(sim.outbox)
    assert cell.row.effects == 1 and cell.row.completed


@pytest.mark.slow
def test_naive_resume_shows_the_real_400_text():
    """Strategy none: the API panel shows the Messages API's own 400 text and the run did not complete."""
    sim = CrashSimulator()
    choose(sim, "send_email", "after_tool", "none")
    cell = sim.run()
    assert cell.error and "tool_use` ids were found without `tool_result` blocks" in cell.error
    assert cell.error in text(sim.error)
    assert "400" in text(sim.error)
    assert "Run completed: no" in text(sim.summary)
    assert shown_count(sim) == len(cell.outbox) == 1


@pytest.mark.slow
def test_checkpoint_view_marks_the_pending_send_email():
    """After a crash at after_tool, the checkpoint view highlights the pending send_email by its tool_use id."""
    sim = CrashSimulator()
    cell = sim.run()  # defaults: send_email, after_tool, rerun
    assert cell.checkpoint_at_crash is not None
    (pending,) = cell.checkpoint_at_crash["pending_tool_uses"]
    assert pending["name"] == "send_email"
    marks = re.findall(
        r'<span class="rs-pending-mark">(.*?)</span><span class="rs-pending-tag">', sim.checkpoint.value, re.S
    )
    assert marks and all(pending["id"] in html.unescape(m) for m in marks)
    assert "Pending call: send_email" in text(sim.checkpoint)


def test_checkpoint_html_marks_only_the_pending_call():
    """checkpoint_html marks the pending tool_use and its record (two marks), and nothing in a finished checkpoint."""
    pending_cp = lab.load_exercise_checkpoint("C").model_dump(mode="json")
    assert checkpoint_html(pending_cp).count('class="rs-pending-mark"') == 2
    finished = lab.load_exercise_checkpoint("A").model_dump(mode="json")
    assert "rs-pending-mark" not in checkpoint_html(finished)
    assert "Nothing pending" in checkpoint_html(finished)
    assert "No checkpoint file was on disk" in checkpoint_html(None)


@pytest.mark.slow
def test_my_reconcile_is_offered_and_used():
    """CrashSimulator(reconcile=fn) offers and selects "my reconcile", and the run resumes through fn."""
    calls = []

    def answer_with_a_note(cp, tools):
        calls.append((type(cp).__name__, type(tools).__name__, cp.pending_tool_use.name))
        p = cp.pending_tool_use
        cp.messages.append(
            {"role": "user", "content": [rc.tool_result(p.id, "learner says: " + rc.STATUS_UNKNOWN, is_error=True)]}
        )
        cp.pending_tool_use = None
        return cp

    sim = CrashSimulator(reconcile=answer_with_a_note)
    assert MY_RECONCILE in sim.strategy.options and sim.strategy.value == MY_RECONCILE
    assert MY_RECONCILE not in CrashSimulator().strategy.options
    cell = click_run(sim)
    assert calls == [("Checkpoint", "Toolbox", "send_email")]
    assert cell.row.strategy == "answer_with_a_note"
    assert "learner says:" in text(sim.conversation)
    assert shown_count(sim) == len(cell.outbox) == 1  # the model checked the outbox and did not resend


@pytest.mark.slow
def test_a_failing_reconcile_is_shown_in_the_widget_not_on_stderr(capfd):
    """A learner's reconcile that raises: the click shows the exception in the widget and writes nothing to stderr."""

    def broken(cp, tools):
        raise RuntimeError("forgot to return the checkpoint")

    sim = CrashSimulator(reconcile=broken)
    sim.run_button.click()
    assert sim.cell is None
    assert "RuntimeError raised in your reconcile" in text(sim.status)
    assert "forgot to return the checkpoint" in text(sim.status)
    assert not sim.run_button.disabled
    assert "Emails sent: –" in text(sim.email_count)
    with pytest.raises(RuntimeError):
        sim.run()
    assert capfd.readouterr().err == ""


@pytest.mark.slow
def test_read_file_scenario_shows_no_emails_and_the_reread():
    """read_file + after_tool + rerun: no emails, and the summary shows the file was read twice (row.effects)."""
    sim = CrashSimulator()
    choose(sim, "read_file", "after_tool", "rerun")
    cell = click_run(sim)
    assert shown_count(sim) == len(cell.outbox) == 0
    assert cell.row.effects == 2
    assert "times the crashed read_file ran): 2" in text(sim.summary)


@pytest.mark.slow
def test_changing_a_setting_updates_help_and_marks_results_stale():
    """After a run, picking another strategy updates the help line and says the shown result is for the old settings."""
    sim = CrashSimulator()
    sim.run()
    assert "Showing" in text(sim.status)
    sim.strategy.value = "by_effect"
    assert "press Run" in text(sim.status)
    assert "the lesson's rule" in text(sim.help)


@pytest.mark.slow
def test_heatmap_compute_draws_the_matrix_quietly(capfd):
    """Clicking compute runs all 70 cells (7 crash points of a one-call turn, 2 scenarios, 5 strategies), fills the progress bar,
    draws a PNG, reports the library's counts, no stderr."""
    heat = MatrixHeatmap()
    assert heat.image.value == b""
    heat.run_button.click()
    rows = heat.rows
    assert len(rows) == 70 == heat.progress.value == heat.progress.max
    assert bytes(heat.image.value).startswith(b"\x89PNG")
    dup = sum(1 for r in rows if r.tool == "send_email" and r.effects > 1)
    err = sum(1 for r in rows if r.api_error)
    assert f"{len(rows)} cells: {dup} repeated a side effect (a duplicate email), {err} were refused" in text(
        heat.status
    )
    by = {(r.tool, r.crash_point, r.strategy): r for r in rows}
    assert by[("send_email", "after_tool", "rerun")].effects == 2
    assert by[("send_email", "after_tool", "by_effect_ledger")].effects == 1
    assert by[("send_email", "after_tool", "none")].api_error
    assert capfd.readouterr().err == ""


@pytest.mark.slow
def test_heatmap_compute_returns_rows_and_takes_my_reconcile():
    """compute() returns the rows; a learner's function appears as a "my reconcile" column."""
    heat = MatrixHeatmap(
        strategies=("rerun",), scenarios=("send_email",), crash_points=("after_tool",), reconcile=answers.reconcile
    )
    rows = heat.compute()
    assert [(r.strategy, r.effects) for r in rows] == [("rerun", 2), (MY_RECONCILE, 1)]


@pytest.mark.slow
def test_heatmap_draws_recorded_rows_of_strategies_it_does_not_run():
    """recorded= rows of a strategy not run here join the heatmap, labelled "(recorded)"; a strategy run here wins."""
    heat = MatrixHeatmap(
        strategies=("rerun", "by_effect"),
        scenarios=("send_email",),
        crash_points=("after_tool",),
        recorded=lab.recorded_matrix(),
    )
    rows = heat.compute()
    assert [(r.strategy, r.effects) for r in rows] == [
        ("rerun", 2),
        ("by_effect", 1),
        ("by_effect_ledger (recorded)", 1),
    ]
    assert bytes(heat.image.value).startswith(b"\x89PNG")
    assert "3 cells (1 of them recorded, not run here)" in text(heat.status)


def test_cell_category_tells_duplicates_from_rereads_and_errors():
    """The heatmap colours: a duplicate email, a harmless re-read, a 400 and exactly-once are four different colours."""

    def row(tool, effects, err=False, done=True):
        return MatrixRow("after_tool", tool, "s", effects, err, done, 3, 1)

    names = [
        CATEGORIES[cell_category(r)][0]
        for r in (
            row("send_email", 2),
            row("read_file", 2),
            row("send_email", 1, err=True, done=False),
            row("send_email", 1),
            row("send_email", 0, done=False),
        )
    ]
    assert names == [
        "duplicate side effect",
        "harmless re-read",
        "API 400 (run stuck)",
        "exactly once",
        "never happened",
    ]


def test_import_resumable_core_does_not_load_the_simulator():
    """`import resumable_core` stays light: neither the simulator nor ipywidgets is imported by it."""
    code = "import sys, resumable_core; print('resumable_core.lab.widgets' in sys.modules, 'ipywidgets' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
    assert out.stderr == ""


@pytest.mark.slow
def test_only_the_widgets_import_ipywidgets():
    """The lab's rendering, matrix and CLI load without ipywidgets (or matplotlib, until a heatmap is drawn)."""
    code = (
        "import sys, resumable_core.lab, resumable_core.lab.render, resumable_core.lab.cli; "
        "print('ipywidgets' in sys.modules, 'matplotlib' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"] and out.stderr == ""


def test_describe_checkpoint_names_the_last_blocks_and_the_pending_call():
    """describe_checkpoint summarises counters, the last message's blocks and the pending call in four lines."""
    lines = describe_checkpoint(lab.load_exercise_checkpoint("B")).splitlines()
    assert len(lines) == 4 and lines[0].startswith('task: "Summarize')
    assert "tool_use read_file" in lines[2]
    assert lines[3].startswith('pending_tool_use: read_file({"path": "meeting-08-25.md"}) id=toolu_')
    assert describe_checkpoint(lab.load_exercise_checkpoint("A")).endswith("pending_tool_use: None")


PARALLEL = "send_email+read_file"
"""The briefing run's scenario: its crashed turn asks for send_email, then read_file."""


@pytest.mark.slow
def test_describe_checkpoint_lists_every_recorded_result_and_pending_call():
    """Between two tools of a turn, describe_checkpoint lists the recorded result and the pending call, one line each."""
    cell = lab.run_cell("between_tools", PARALLEL, "by_effect")
    lines = describe_checkpoint(rc.Checkpoint.model_validate(cell.checkpoint_at_crash)).splitlines()
    assert "tool_use send_email, tool_use read_file" in lines[2]
    assert lines[3] == "recorded_results: 1" and lines[4].startswith("  send_email id=toolu_")
    assert "Email #1 sent" in lines[4]
    assert lines[5] == "pending_tool_uses: 1" and lines[6].startswith(
        '  read_file({"path": "meeting-08-25.md"}) id=toolu_'
    )
    both = lab.run_cell("after_save_a", PARALLEL, "by_effect")
    lines = describe_checkpoint(rc.Checkpoint.model_validate(both.checkpoint_at_crash)).splitlines()
    assert lines[3] == "pending_tool_uses: 2" and [ln.split("(")[0].strip() for ln in lines[4:]] == [
        "send_email",
        "read_file",
    ]


@pytest.mark.slow
def test_checkpoint_html_marks_every_pending_call_and_names_the_recorded_result():
    """The checkpoint view of a crash between the tools marks read_file pending and says send_email's result is kept."""
    cell = lab.run_cell("between_tools", PARALLEL, "rerun")
    cp = cell.checkpoint_at_crash
    assert cp is not None
    view = checkpoint_html(cp)
    recorded_id = cp["recorded_results"][0]["tool_use_id"]
    assert "Pending call: <code>read_file</code>" in view and "recorded_results" in view
    assert f"the result of <code>{recorded_id}</code> is already recorded" in view
    both = checkpoint_html(lab.run_cell("after_save_a", PARALLEL, "by_effect").checkpoint_at_crash)
    assert "Pending calls: <code>send_email</code>" in both and "<code>read_file</code>" in both
    assert both.count('class="rs-pending-tag"') == 4  # each call's tool_use block and its pending record


@pytest.mark.slow
def test_the_simulator_runs_the_parallel_turn_between_its_tools():
    """send_email+read_file · between_tools · rerun: one email (the recorded send is kept), the outbox shown, the story says where."""
    sim = CrashSimulator()
    choose(sim, PARALLEL, "between_tools", "rerun")
    assert "between send_email (its result saved) and read_file (not run yet)" in text(sim.help)
    assert sim.outbox_panel.layout.display != "none"
    cell = click_run(sim)
    assert cell.killed and shown_count(sim) == 1 and cell.row.tool == PARALLEL
    assert "times the crashed read_file ran: 1" in text(sim.summary)
    assert "result recorded for send_email" in text(sim.story)
    choose(sim, "send_email", "between_tools", "rerun")  # a one-call turn never passes it: the help says so
    assert "never passes it" in text(sim.help)


@pytest.mark.slow
def test_the_parallel_heatmap_crosses_between_tools_and_counts_duplicates_by_the_email():
    """MatrixHeatmap of the parallel turn: 8 points with between_tools; delete's second email is a duplicate side effect."""
    heatmap = MatrixHeatmap(strategies=["delete"], scenarios=[PARALLEL], recorded=lab.recorded_matrix([PARALLEL]))
    assert heatmap.crash_points == list(rc.CRASH_POINTS) and heatmap.progress.max == 8
    assert len(heatmap.recorded) == 16
    rows = heatmap.compute()
    deleted = {r.crash_point: r for r in rows if r.strategy == "delete"}
    assert cell_category(deleted["between_tools"]) == 2 and deleted["between_tools"].effects == 2
    assert "between_tools" in text(heatmap.status) and heatmap.image.layout.display != "none"
    assert MatrixHeatmap(strategies=[]).crash_points == list(ONE_CALL_POINTS)  # the lessons' matrix, as before


def test_the_simulator_menus_and_help_read_the_registries():
    """Every scenario and strategy is offered, it opens on the side-effecting scenario, and help comes from the registry."""
    sim = CrashSimulator()
    assert list(sim.scenario.options) == list(rc.SCENARIOS) and list(sim.strategy.options) == list(rc.STRATEGIES)
    assert sim.scenario.value == "send_email"
    sim.strategy.value = "delete"
    assert rc.STRATEGIES["delete"].help in text(sim.help)
    assert rc.SCENARIOS["send_email"].help in text(sim.help)


@pytest.mark.slow
def test_voila_notebook_runs_clean_and_shows_both_views():
    """The standalone page has no committed outputs and, run fresh, shows its three widget views with no stderr."""
    from nbclient import NotebookClient

    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert nb.cells[0].cell_type == "markdown"
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")
    NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK.parent)}}
    ).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type in ("error", "stream")], outputs
    views = [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert len(views) == 3  # the simulator, the one-call matrix, the parallel turn's matrix
