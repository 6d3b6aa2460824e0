"""Smoke tests for the benchmarks: each runs in --quick mode and prints its table (nothing is timed)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _run(script: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "RESUMABLE_LIVE"}
    return subprocess.run(
        [sys.executable, str(BENCH / script), "--quick", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=300,
    )


def _table_rows(out: str, header_start: str) -> list[list[str]]:
    """The data rows of the table whose header line starts with ``header_start``."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2 :]:
        if not line.strip():
            break
        rows.append(line.split())
    return rows


@pytest.mark.slow
def test_bench_checkpoint_quick_prints_its_table(tmp_path):
    """bench_checkpoint --quick exits 0, writes only under --dir, and prints a row per size with ratios."""
    p = _run("bench_checkpoint.py", "--dir", str(tmp_path), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    assert "kit/floor" in p.stdout and "kit/langgraph" in p.stdout and "synchronous=FULL" in p.stdout
    rows = _table_rows(p.stdout, "turns  saves  kit med")
    assert [r[0] for r in rows] == ["2", "5"]
    for r in rows:
        assert len(r) == 13
        assert r[1] == "5"  # --quick times 5 saves of each way
        assert all(float(v) > 0 for v in r[2:10])
        assert all(v.endswith("x") and float(v[:-1]) > 0 for v in r[10:])
    bytes_rows = _table_rows(p.stdout, "turns  messages")
    assert [r[1] for r in bytes_rows] == ["5", "11"]  # task + 2 messages per turn
    assert list(tmp_path.iterdir()) == []  # the temp folder was removed


@pytest.mark.slow
def test_bench_matrix_quick_prints_its_table(tmp_path):
    """bench_matrix --quick exits 0, finds equal rows both ways and prints the three ways with ratios."""
    p = _run("bench_matrix.py", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stderr == ""
    assert "rows equal both ways: yes (2/2)" in p.stdout
    assert "in-process, first run" in p.stdout
    assert "in-process, warm" in p.stdout
    assert "fresh interpreter per cell" in p.stdout
    assert "Where a fresh cell's time goes" in p.stdout
    fresh = next(line for line in p.stdout.splitlines() if line.startswith("fresh interpreter per cell"))
    ratios = fresh.split()[-3:]
    assert all(v.endswith("x") and float(v[:-1]) > 0 for v in ratios)
