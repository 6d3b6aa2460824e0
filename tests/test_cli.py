"""__main__.py: the matrix and simulate commands."""

from __future__ import annotations

import json
import subprocess
import sys


def _cli(*args):
    out = subprocess.run([sys.executable, "-m", "resumable_core", *args], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    return out.stdout


def test_matrix_json_has_the_documented_columns():
    """`matrix --format json` prints a JSON list of rows with the documented columns."""
    rows = json.loads(_cli("matrix", "--format", "json", "--tool", "send_email", "--strategy", "rerun"))
    assert len(rows) == 7
    assert set(rows[0]) == {"crash_point", "tool", "strategy", "effects", "api_error", "completed", "turns", "tokens"}
    assert {r["crash_point"]: r["effects"] for r in rows}["after_tool"] == 2


def test_matrix_table_prints_a_header_and_rows():
    """The default table has a header, a rule and one line per cell."""
    lines = _cli("matrix", "--tool", "read_file", "--strategy", "by_effect").splitlines()
    assert lines[0].split()[:3] == ["crash_point", "tool", "strategy"] and len(lines) == 2 + 7


def test_simulate_tells_the_postmortem():
    """`simulate` at after_tool with rerun tells of two emails."""
    out = _cli("simulate", "--crash-at", "after_tool", "--tool", "send_email", "--strategy", "rerun")
    assert "killed with SIGKILL" in out and "emails in the outbox now: 2" in out


def test_unknown_crash_point_is_a_usage_error():
    """A wrong crash point exits 2 with argparse's message naming the choices."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "resumable_core",
            "simulate",
            "--crash-at",
            "x",
            "--tool",
            "send_email",
            "--strategy",
            "rerun",
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2 and "after_tool" in out.stderr
