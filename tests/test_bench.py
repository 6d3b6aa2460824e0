"""Smoke tests for the benchmarks: each runs in --quick mode and prints its table (nothing is timed); their pure helpers."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

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


def _bench_module(name: str) -> ModuleType:
    """A bench script loaded as a module (bench/ is not a package); its main() is not run."""
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_bench_sandbox_start_part_prints_its_row(tmp_path):
    """bench_sandbox --quick --parts start exits 0 with one row: sandbox and plain seconds and their ratio (or says bwrap is missing)."""
    from resumable_core.course.grading.sandbox import available

    p = _run("bench_sandbox.py", "--parts", "start", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stderr == ""
    rows = _table_rows(p.stdout, "what ")
    assert len(rows) == 1
    boxed, plain, ratio = rows[0][-3:]
    assert " ".join(rows[0][:-3]) == "bwrap + python start (python -c pass)"
    assert float(plain) > 0
    if available() is None:
        assert float(boxed) > 0 and ratio.endswith("x") and float(ratio[:-1]) > 0
    else:
        assert "bwrap is unavailable" in p.stdout and boxed == ratio == "-"
    assert "Where one sandboxed student's time goes" not in p.stdout  # only the part asked for


def test_bench_sandbox_refuses_an_unknown_part(capsys):
    """--parts with a name that is no part exits 2 and names the parts there are."""
    bench = _bench_module("bench_sandbox")
    with pytest.raises(SystemExit) as stop:
        bench.main(["--parts", "start,bogus"])
    assert stop.value.code == 2
    assert "unknown part(s) bogus; choose from start, kernel, grade, breakdown" in capsys.readouterr().err


def test_bench_sandbox_breakdown_subtracts_nested_pieces():
    """Bookkeeping is autograde minus the sandboxed execute, "other" is what no piece explains, % of the student's total."""
    bench = _bench_module("bench_sandbox")
    clock = bench.Clock()
    clock.starts = [("ann", 0.0)]
    pieces = {
        "kernel start": 2.0,
        "execution": 1.0,
        "kernel stop": 0.5,
        "kernel sandbox": 3.5,
        "sandboxed execute": 3.6,
        "autograde": 4.0,
        "isolated re-check": 2.0,
        "nbgrader generate_feedback": 0.5,
        "student total": 9.0,
        "feedback page": 1.0,
    }
    for piece, seconds in pieces.items():
        clock.add(piece, seconds, "ann")
    clock.add("step: release_assignment", 9.0, "run")
    text = bench.breakdown_tables(clock, wall=20.0, worker_start=1.5)
    rows = {cells[0]: cells[1:] for cells in (re.split(r"\s{2,}", line.strip()) for line in text.splitlines())}
    assert rows["scratch copy, result read-back and merge"] == ["0.100", "1.0%"]
    assert rows["nbgrader bookkeeping (autograde minus execute)"] == ["0.400", "4.0%"]
    assert rows["feedback page (feedback.write_feedback)"] == ["1.000", "10.0%"]
    assert rows["other (gradebook reads, re-check bookkeeping, report file)"] == ["2.500", "25.0%"]
    assert rows["student total"] == ["10.000", "100.0%"]
    assert rows["step: release_assignment"] == ["9.000"]
    assert rows["worker process start (python + nbgrader imports; timed apart)"] == ["1.500"]


def test_bench_grading_takes_every_kind_before_a_second_copy():
    """--students N keeps copy 00 of each kind first, so a small class still has every kind in it."""
    bench = _bench_module("bench_grading")
    students = [f"{kind}_{i:02d}" for kind in ("b_kind", "a_kind", "c") for i in range(3)]
    assert bench.round_robin(students, 4) == ["a_kind_00", "a_kind_01", "b_kind_00", "c_00"]
    assert bench.round_robin(students, 9) == sorted(students)


def test_bench_grading_mismatch_table_lists_only_disagreements():
    """A student is listed when any way's score differs or is missing, with the expected score and each way's."""
    bench = _bench_module("bench_grading")
    expected = {"a": 16.0, "b": 7.0, "c": 6.0}
    ways = {
        "nbgrader": {"a": 16.0, "b": 7.0, "c": 6.0},
        "--jobs 1": {"a": 16.0, "b": 0.0, "c": 6.0},
        "--jobs 2": {"a": 16.0, "b": 7.0},
    }
    assert bench.mismatches(expected, ways) == [["b", "7", "7", "0", "7"], ["c", "6", "6", "6", "-"]]
    assert bench.mismatches(expected, {"nbgrader": expected, "--jobs 2": dict(expected)}) == []
