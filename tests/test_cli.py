"""The command line: python -m resumable_core, the lab's matrix/simulate/fixtures and the wings' hook."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from resumable_core import __main__ as cli
from resumable_core.crash import CRASH_POINTS, ONE_CALL_POINTS


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "resumable_core", *args], capture_output=True, text=True, timeout=300)


def _cli(*args: str) -> str:
    """Run the CLI; it must succeed with nothing on stderr. Returns its stdout."""
    out = _run(*args)
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    return out.stdout


@pytest.mark.slow
def test_matrix_json_has_the_documented_columns():
    """`matrix --format json` prints a JSON list of rows with the documented columns."""
    rows = json.loads(_cli("matrix", "--format", "json", "--tool", "send_email", "--strategy", "rerun"))
    assert len(rows) == len(ONE_CALL_POINTS)
    assert set(rows[0]) == {"crash_point", "tool", "strategy", "effects", "api_error", "completed", "turns", "tokens"}
    assert {r["crash_point"]: r["effects"] for r in rows}["after_tool"] == 2


@pytest.mark.slow
def test_matrix_table_prints_a_header_and_rows():
    """The default table has a header, a rule and one line per cell; --scenario is --tool's name."""
    lines = _cli("matrix", "--scenario", "read_file", "--strategy", "by_effect").splitlines()
    assert lines[0].split()[:3] == ["crash_point", "tool", "strategy"] and len(lines) == 2 + len(ONE_CALL_POINTS)


@pytest.mark.slow
def test_simulate_tells_the_postmortem():
    """`simulate` at after_tool with rerun tells of two emails."""
    out = _cli("simulate", "--crash-at", "after_tool", "--tool", "send_email", "--strategy", "rerun")
    assert "killed with SIGKILL" in out and "emails in the outbox now: 2" in out


@pytest.mark.slow
def test_matrix_of_the_parallel_turn_crosses_between_tools():
    """`matrix --scenario send_email+read_file` crosses every crash point, between_tools included; rerun sends one email there."""
    rows = json.loads(_cli("matrix", "--format", "json", "--scenario", "send_email+read_file", "--strategy", "rerun"))
    assert [r["crash_point"] for r in rows] == list(CRASH_POINTS)
    assert {r["crash_point"]: r["effects"] for r in rows}["between_tools"] == 1


@pytest.mark.slow
def test_simulate_tells_a_crash_between_two_tools():
    """`simulate` between the parallel turn's tools tells what was recorded, what was pending, and each call's effects."""
    out = _cli("simulate", "--crash-at", "between_tools", "--scenario", "send_email+read_file", "--strategy", "delete")
    assert out.startswith("Crash between send_email (its result saved) and read_file (not run yet)")
    assert "result recorded for send_email" in out and "pending read_file" in out
    assert "emails in the outbox now: 2" in out and "send_email 2, read_file 1" in out


@pytest.mark.slow
def test_the_help_lists_the_parallel_scenario():
    """`simulate --help` offers the parallel turn's scenario with its one-line help."""
    assert "send_email+read_file" in _cli("simulate", "--help") and "a crash can fall between them" in " ".join(
        _cli("simulate", "--help").split()
    )


@pytest.mark.slow
def test_unknown_crash_point_is_a_usage_error():
    """A wrong crash point exits 2 with argparse's message naming the choices."""
    out = _run("simulate", "--crash-at", "x", "--tool", "send_email", "--strategy", "rerun")
    assert out.returncode == 2 and "after_tool" in out.stderr


def _subcommand(name: str) -> argparse.ArgumentParser:
    """The CLI's parser for the subcommand ``name``, built now."""
    actions = cli.build_parser()._actions
    return next(a for a in actions if isinstance(a, argparse._SubParsersAction)).choices[name]


def _help(*command: str) -> str:
    return (_subcommand(command[0]) if command else cli.build_parser()).format_help()


@pytest.mark.parametrize("command", ["matrix", "simulate", "fixtures"])
def test_help_describes_every_option_without_rest_markup(command):
    """Each lab command's --help has a help line for every option and no reST ``literals``."""
    assert all(a.help for a in _subcommand(command)._actions)
    assert "``" not in _help(command) and "``" not in _help()


def test_matrix_help_states_the_real_defaults():
    """--strategy's default lists the registry's matrix strategies (not a stale count); every choice has its line."""
    from resumable_core.strategies import STRATEGIES, matrix_strategies

    text = " ".join(_help("matrix").split())
    assert f"default: {', '.join(matrix_strategies())}" in text
    assert all(s.help in _help("matrix") for s in STRATEGIES.values())
    assert "default: table" in text


@pytest.mark.slow
def test_a_wing_without_its_extra_says_what_to_install(monkeypatch, capsys):
    """If a wing's module cannot import a third-party dependency, its commands print one line naming the extra."""
    monkeypatch.setattr(cli, "WINGS", (cli.Wing("course", "nbgrader_absent_for_this_test", "add_parser", ("grade",)),))
    assert cli.main(["grade", "class.zip", "--jobs", "2"]) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "this command needs the [course] extra (nbgrader_absent_for_this_test is not installed): "
        "pip install 'resumable-core[course]'"
    ]


@pytest.mark.slow
def test_a_command_that_imports_its_extra_late_also_says_what_to_install(tmp_path):
    """grade with nbgrader missing (imported only when it runs) exits 1 with the one-line install hint."""
    (tmp_path / "class").mkdir()
    (tmp_path / "class" / "ann.ipynb").write_text("{}")  # a class to grade: a missing one is refused first
    code = f"import sys; sys.modules['nbgrader'] = None\nfrom resumable_core.__main__ import main\nsys.exit(main(['grade', {str(tmp_path / 'class')!r}]))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert out.stderr.splitlines() == [
        "this command needs the [course] extra (nbgrader is not installed): pip install 'resumable-core[course]'"
    ]
