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
    from resumable_core.course.grading.isolation import BwrapBackend

    p = _run("bench_sandbox.py", "--parts", "start", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stderr == ""
    rows = _table_rows(p.stdout, "what ")
    assert len(rows) == 1
    boxed, plain, ratio = rows[0][-3:]
    assert " ".join(rows[0][:-3]) == "bwrap + python start (python -c pass)"
    assert float(plain) > 0
    if BwrapBackend().available() is None:
        assert float(boxed) > 0 and ratio.endswith("x") and float(ratio[:-1]) > 0
    else:
        assert "bwrap is unavailable" in p.stdout and boxed == ratio == "-"
    assert "Where one sandboxed student's time goes" not in p.stdout  # only the part asked for


def test_bench_sandbox_refuses_an_unknown_part(capsys):
    """--parts with a name that is no part exits 2 and names the parts there are."""
    bench = _bench_module("bench_sandbox")
    with pytest.raises(SystemExit) as stop:
        bench.main(["--parts", "start,kernel"])
    assert stop.value.code == 2
    assert "unknown part(s) kernel; choose from start, learner, fresh, grade, breakdown" in capsys.readouterr().err


def test_bench_sandbox_breakdown_subtracts_nested_pieces():
    """Each row is its piece minus the pieces timed inside it; stops add up wherever called; "other" is the rest."""
    bench = _bench_module("bench_sandbox")
    clock = bench.Clock()
    clock.starts = [("ann", 0.0)]
    learner = bench.learner_piece
    pieces = {
        learner("start", "execute"): 0.2,
        learner("executed", "execute"): 3.0,
        learner("stop", "execute"): 0.0,
        bench.EXECUTE: 3.3,
        "autograde": 4.0,
        bench.CHECKER: 2.0,
        learner("stop", "re-check"): 0.3,
        bench.RECHECK: 2.4,
        learner("stop", "after"): 0.2,
        "student total": 9.0,
        "feedback page": 1.0,
    }
    for piece, seconds in pieces.items():
        clock.add(piece, seconds, "ann")
    clock.reports["ann"] = {"autograde": 4.1, "recheck": 2.9}
    clock.add("step: release_assignment", 9.0, "run")
    text = bench.breakdown_tables(clock, wall=20.0, worker_start=1.5)
    rows = {cells[0]: cells[1:] for cells in (re.split(r"\s{2,}", line.strip()) for line in text.splitlines())}
    assert rows["learner's process start (folders, copies, learner library)"] == ["0.200", "2.0%"]
    assert rows["learner's process until its cells ran (bwrap, python, cells)"] == ["3.000", "30.0%"]
    assert rows["learner's view, budget and merge (rest of SandboxedExecute)"] == ["0.100", "1.0%"]
    assert rows["nbgrader bookkeeping (autograde minus SandboxedExecute)"] == ["0.700", "7.0%"]
    assert rows["re-check's checker (recheck._checker, sandboxed)"] == ["2.000", "20.0%"]
    assert rows["re-check's rest (recheck.run minus checker and stop)"] == ["0.100", "1.0%"]
    assert rows["stopping the learner's process (LearnerProcess.stop)"] == ["0.500", "5.0%"]
    assert rows["feedback page (feedback.write_feedback)"] == ["1.000", "10.0%"]
    assert rows[bench.OTHER] == ["2.400", "24.0%"]  # 10 - (4.0 autograde + 2.4 re-check + 0.2 late stop + 1.0 page)
    assert rows["student total"] == ["10.000", "100.0%"]
    assert rows["for comparison: the report's 'recheck'"] == ["2.900", "29.0%"]  # shown, not in the sum
    assert rows["step: release_assignment"] == ["9.000"]
    assert rows["worker process start (python + nbgrader imports; timed apart)"] == ["1.500"]


def test_bench_sandbox_clock_charges_a_learner_call_to_where_it_is_made():
    """A LearnerProcess method's time goes to the execute step, the re-check, or after, by the pieces running."""
    bench = _bench_module("bench_sandbox")
    clock = bench.Clock()
    clock.student = "ann"
    stop = clock.timed(lambda: bench.learner_piece("stop", clock.phase()), lambda: clock.phase())
    assert clock.timed(bench.EXECUTE, stop)() == "execute"
    assert clock.timed(bench.RECHECK, stop)() == "re-check"
    assert stop() == "after"
    assert clock.active == []
    assert {k for k in clock.seconds["ann"] if k.startswith("learner")} == {
        bench.learner_piece("stop", phase) for phase in bench.PHASES
    }


def test_bench_sandbox_patches_put_back_a_classmethod_as_it_was():
    """A method patched on a class is restored as the class's own descriptor, an inherited one by removing the patch."""
    import contextlib

    bench = _bench_module("bench_sandbox")

    class Base:
        @classmethod
        def make(cls):
            return cls.__name__

        def hello(self):
            return "base"

    class Child(Base):
        pass

    before = vars(Base)["make"]
    with contextlib.ExitStack() as stack:
        stack.enter_context(bench._setattr(Base, "make", classmethod(lambda cls: "patched")))
        stack.enter_context(bench._setattr(Child, "hello", lambda self: "patched"))
        assert Child.make() == "patched" and Child().hello() == "patched"
    assert vars(Base)["make"] is before and Child.make() == "Child"
    assert "hello" not in vars(Child) and Child().hello() == "base"


def test_bench_sandbox_times_the_learners_methods_only_while_the_stack_is_open():
    """The breakdown's wrappers of LearnerProcess's methods are in place inside the block and gone after it."""
    import contextlib

    from resumable_core.course.grading.recheck.learner import LearnerProcess

    bench = _bench_module("bench_sandbox")
    before = {m: vars(LearnerProcess)[m] for m in ("start", "executed", "stop")}
    with contextlib.ExitStack() as stack:
        bench._learner_methods(stack, bench.Clock())
        assert isinstance(vars(LearnerProcess)["start"], classmethod)  # still called on the class
        assert all(vars(LearnerProcess)[m] is not before[m] for m in before)
    assert {m: vars(LearnerProcess)[m] for m in before} == before


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


def test_bench_grading_mismatch_table_shows_an_unknown_expected_score_as_a_question_mark():
    """An expected score of None (a solution-based class's wrong answers) is shown as ``?``, not as a number."""
    bench = _bench_module("bench_grading")
    rows = bench.mismatches({"unanswered_00": None}, {"nbgrader": {"unanswered_00": 1.0}, "--jobs 2": {}})
    assert rows == [["unanswered_00", "?", "1", "-"]]


def test_bench_grading_parses_assignments_in_the_order_given():
    """--assignments keeps the order given, drops repeats, and names the unknown ones and the choices."""
    bench = _bench_module("bench_grading")
    known = ("reconcile", "postmortem", "resume")
    assert bench.parse_assignments("resume, reconcile,resume", known) == ["resume", "reconcile"]
    with pytest.raises(ValueError, match="unknown assignment\\(s\\) bogus; choose from reconcile, postmortem, resume"):
        bench.parse_assignments("resume,bogus", known)
    with pytest.raises(ValueError, match="none given"):
        bench.parse_assignments(" , ", known)


def _solution_notebook():
    import nbformat

    def cell(kind, source, **meta):
        make = nbformat.v4.new_code_cell if kind == "code" else nbformat.v4.new_markdown_cell
        return make(source, metadata={"nbgrader": {"schema_version": 3, **meta}})

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        cell("code", "import x", grade_id="setup", locked=True),
        cell(
            "code", "def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION", grade_id="f", solution=True
        ),
        cell("code", "assert f() == 1", grade_id="test_f", grade=True, points=2),
        cell("markdown", "Because.", grade_id="why", solution=True, grade=True, points=3),
        cell("code", "X = 0\n### BEGIN SOLUTION\nX = 2\n### END SOLUTION", grade_id="x", solution=True),
        cell("code", "assert X == 2", grade_id="test_x", grade=True, points=1.5),
    ]
    return nb


def test_bench_grading_sample_kinds_come_from_the_solution_cells():
    """The solution's answers drop only the BEGIN/END SOLUTION lines; unanswered keeps every stub; first-only answers one."""
    bench = _bench_module("bench_grading")
    nb = _solution_notebook()
    kinds = bench.sample_answers(nb)
    assert kinds["solution"] == {"f": "def f():\n    return 1", "why": "Because.", "x": "X = 0\nX = 2"}
    assert kinds["unanswered"] == {}
    assert kinds["first_answer_only"] == {"f": "def f():\n    return 1"}
    assert bench.autograded_points(nb) == 3.5  # the graded code cells; the markdown answer is graded by hand
    nb.cells = nb.cells[:4]  # one solution code cell: no first-only kind (it would be the solution)
    assert set(bench.sample_answers(nb)) == {"solution", "unanswered"}


def test_bench_grading_report_timings_keeps_whatever_keys_there_are():
    """Every numeric key of a report's timings is kept, the report's total added; absent fields are just missing."""
    from types import SimpleNamespace

    bench = _bench_module("bench_grading")
    report = SimpleNamespace(timings={"kernel": 3.0, "check": 1, "note": "x", "flag": True}, seconds=4.5)
    assert bench.report_timings(report) == {"kernel": 3.0, "check": 1.0, bench.REPORT_TOTAL: 4.5}
    assert bench.report_timings(SimpleNamespace(seconds=0.0)) == {}
    assert bench.report_timings(SimpleNamespace(timings=None)) == {}


def test_bench_grading_medians_count_only_the_students_that_have_the_key():
    """Per key: the median over the students whose report has it, and how many do; keys in first-seen order."""
    bench = _bench_module("bench_grading")
    per_student = {"a": {"autograde": 4.0, "recheck": 2.0}, "b": {"autograde": 6.0}, "c": {"autograde": 5.0, "x": 1}}
    assert bench.median_timings(per_student) == {"autograde": (5.0, 3), "recheck": (2.0, 1), "x": (1, 1)}
    assert bench.median_timings({}) == {}


def test_bench_grading_tables_put_the_ways_side_by_side():
    """A row per assignment (nbgrader, then each --jobs with nbgrader/kit); a breakdown row per (assignment, --jobs)."""
    bench = _bench_module("bench_grading")
    timings = {"s_00": {"autograde": 3.0, "recheck": 1.0}, "s_01": {"autograde": 5.0}}
    ok = bench.Result("resume", {"s_00": 9.0, "s_01": None})
    ok.ways = {
        "nbgrader": bench.Way(12.0, {"s_00": 9.0, "s_01": 0.0}),
        "--jobs 1": bench.Way(24.0, {"s_00": 9.0, "s_01": 0.0}, timings),
        "--jobs 2": bench.Way(4.0, {"s_00": 9.0, "s_01": 0.0}, {}),
    }
    broken = bench.Result("postmortem", {"s_00": 10.0})
    broken.ways = {"nbgrader": bench.Way(5.0, {"s_00": 10.0}), "--jobs 1": bench.Way(error="boom")}
    rows = bench.summary_rows([ok, broken], [1, 2])
    assert rows[0] == ["resume", "2", "same", "12.0", "6.00", "24.0", "12.00", "0.50x", "4.0", "2.00", "3.00x"]
    assert rows[1] == ["postmortem", "1", "FAILED", "5.0", "5.00", "-", "-", "-", "-", "-", "-"]
    assert len(bench.summary_header([1, 2])) == len(rows[0])
    header, rows = bench.breakdown_rows([ok, broken], [1, 2])
    assert header == ["assignment", "--jobs", "reports", "autograde", "recheck", "kit wall/student"]
    assert rows == [["resume", "1", "2/2", "4.00", "1.00 (1)", "12.00"], ["resume", "2", "0/2", "-", "-", "2.00"]]
    assert bench.ratio(10.0, None) == "-" and bench.ratio(10.0, 4.0) == "2.50x"
