"""Bench: a class of ``reconcile`` submissions graded by plain sequential ``nbgrader autograde`` and by
``python -m resumable_core grade`` (sandboxed) at each ``--jobs``; the grades must match; wall-clock times side by side.

The class is the test suite's honest samples (``tests/grading_samples.py``), repeated to ``--students``
(default 60), taken round-robin so every kind is in it. Plain nbgrader runs ``nbgrader autograde
reconcile`` once over every student in its own course (no sandbox, no re-check, no feedback); the kit
runs the whole ``grade`` (release, every notebook in the sandbox, the isolated re-check, feedback,
export, report). Exits 1, with a table of the students whose grades differ, unless every way agrees.

Run: ``.venv/bin/python bench/bench_grading.py [--students N] [--jobs 1,2]`` (60 students: ~10 min).
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

from resumable_core.course.grading import sandbox
from resumable_core.course.grading.pipeline import grade
from resumable_core.course.grading.workspace import DEFAULT_TIMEOUT, write_course
from resumable_core.course.nbgrader_cli import nbgrader

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO / "solutions" / "reconcile" / "reconcile.ipynb"
HONEST = ("correct", "rerun_everything", "delete_move", "is_error_all", "forgot_pending")
"""Not stderr_writer: plain nbgrader zeroes a cell that wrote to stderr, the kit does not (by design)."""
NBGRADER = "nbgrader"


def load_samples() -> ModuleType:
    """The test suite's sample class, loaded from its file (tests/ is not a package)."""
    spec = importlib.util.spec_from_file_location("grading_samples", REPO / "tests" / "grading_samples.py")
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {REPO / 'tests' / 'grading_samples.py'}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])


def round_robin(students: list[str], n: int) -> list[str]:
    """``n`` of ``students`` (named ``<kind>_<NN>``), copy 00 of every kind first, then copy 01, ..."""

    def copy_then_kind(sid: str) -> tuple[str, str]:
        kind, _, copy = sid.rpartition("_")
        return copy, kind

    return sorted(sorted(students, key=copy_then_kind)[:n])


def write_class(folder: Path, n: int) -> dict[str, float]:
    """``n`` honest submissions in nbgrader's ``submitted/`` layout under ``folder``; their expected scores."""
    samples = load_samples()
    keep = dict(samples.SAMPLES)
    samples.SAMPLES.clear()
    samples.SAMPLES.update({k: keep[k] for k in HONEST})
    copies = max(2, -(-n // len(HONEST)))  # at least 2: numbered names (<kind>_NN) whatever n is
    expected: dict[str, float] = samples.write_class(SOURCE, folder, layout="submitted", copies=copies)
    chosen = round_robin([s for s in expected if s not in ("not_a_notebook", "empty")], n)
    for student in set(expected) - set(chosen):
        shutil.rmtree(folder / "submitted" / student)
    return {s: expected[s] for s in chosen}


def mismatches(expected: dict[str, float], ways: dict[str, dict[str, float]]) -> list[list[str]]:
    """Rows (student, expected, each way's score) of the students on whom the ways do not all agree."""
    rows = []
    for student in sorted(set(expected).union(*ways.values())):
        scores = [way.get(student) for way in ways.values()]
        if len(set(scores)) != 1 or None in scores:
            shown = ["-" if s is None else f"{s:g}" for s in scores]
            rows.append([student, f"{expected.get(student, float('nan')):g}", *shown])
    return rows


def time_nbgrader(tmp: Path, classroom: Path) -> tuple[float, dict[str, float]]:
    """Plain nbgrader: one course, ``nbgrader autograde reconcile`` over every student; (seconds, scores by export)."""
    seq = tmp / "sequential"
    write_course(seq, DEFAULT_TIMEOUT)
    shutil.copytree(SOURCE.parent, seq / "source" / "reconcile")
    nbgrader(["generate_assignment", "reconcile", "--force"], seq)
    shutil.copytree(classroom / "submitted", seq / "submitted")
    started = time.monotonic()
    nbgrader(["autograde", "reconcile", "--force"], seq, timeout=3600)
    took = time.monotonic() - started
    nbgrader(["export", "--to", str(seq / "export.csv")], seq)
    with open(seq / "export.csv", newline="") as f:
        return took, {r["student_id"]: float(r["score"]) for r in csv.DictReader(f)}


def time_kit(tmp: Path, classroom: Path, jobs: int, sandboxed: bool) -> tuple[float, dict[str, float]]:
    """The kit's whole ``grade`` at ``jobs``; (seconds, scores)."""
    started = time.monotonic()
    run = grade(
        classroom, "reconcile", jobs=jobs, out=tmp / f"kit-{jobs}", sandbox=sandboxed, echo=lambda *a, **k: None
    )
    return time.monotonic() - started, {s.student: s.score for s in run.submissions}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--students", type=int, default=60, help="submissions in the class (default 60)")
    p.add_argument("--jobs", default="1,2", help="comma-separated --jobs values the kit runs at (default 1,2)")
    args = p.parse_args(argv)
    jobs = [int(j) for j in args.jobs.split(",") if j]
    if args.students < 1 or not jobs or min(jobs) < 1:
        p.error("--students and every --jobs value must be at least 1")
    why_not = sandbox.available()
    if why_not:
        print(
            f"bwrap is unavailable ({why_not}): the kit runs with --no-sandbox (its figures are not the sandboxed ones)"
        )
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-grading-") as tmp_name:
        tmp = Path(tmp_name)
        expected = write_class(tmp / "class", args.students)
        seconds: dict[str, float] = {}
        ways: dict[str, dict[str, float]] = {}
        seconds[NBGRADER], ways[NBGRADER] = time_nbgrader(tmp, tmp / "class")
        for j in jobs:
            seconds[f"--jobs {j}"], ways[f"--jobs {j}"] = time_kit(tmp, tmp / "class", j, why_not is None)
    n = len(expected)
    bad = mismatches(expected, ways)
    if bad:
        print(f"GRADES DIFFER on {len(bad)} of {n} students:")
        print(table(["student", "expected", *ways], bad))
        return 1
    kinds = len({s.rpartition("_")[0] for s in expected})
    agree = ", ".join(ways)
    print(f"{n} submissions of reconcile ({kinds} kinds, {len(set(expected.values()))} distinct scores)")
    print(f"grades identical: {agree} agree on every student")
    box = "sandboxed" if why_not is None else "NO sandbox"
    rows = [["nbgrader autograde (sequential; no sandbox, re-check or feedback)", f"{seconds[NBGRADER]:.1f}"]]
    rows[0] += [f"{seconds[NBGRADER] / n:.2f}", "1.00x"]
    for j in jobs:
        t = seconds[f"--jobs {j}"]
        label = f"kit grade --jobs {j} ({box}; + release, re-check, feedback, export)"
        rows.append([label, f"{t:.1f}", f"{t / n:.2f}", f"{seconds[NBGRADER] / t:.2f}x"])
    print(table(["way", "wall s", "per submission s", "speed-up vs nbgrader"], rows))
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"Load average at the end: {load} on {os.cpu_count()} cores; benchmark took {time.monotonic() - started:.0f} s."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
