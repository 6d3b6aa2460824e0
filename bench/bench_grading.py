"""Bench: a class of submissions of each assignment graded by plain sequential ``nbgrader autograde`` and by
``python -m resumable_core grade`` (sandboxed) at each ``--jobs``; the grades must match; wall-clock times side by side.

For each assignment of ``--assignments`` (default all four), the class is ``--students`` submissions
(default 60) taken round-robin from its sample kinds, so every kind is in it. ``reconcile``'s kinds
are the test suite's honest samples (``tests/grading_samples.py``); every other assignment's are the
release with the instructor's solution filled in, the release left unanswered and, where it has two
solution code cells or more, only its first one answered. Plain nbgrader runs ``nbgrader autograde``
once over every student in its own course (no sandbox, no re-check, no feedback); the kit runs the
whole ``grade`` (release, every notebook in the sandbox, the isolated re-check, feedback, export,
report). Then the kit's workers' per-student timings (each report's ``timings``), medians across
students. Exits 1, with a table of the students whose grades differ, unless every way agrees on
every assignment (or if a way failed).

Run: ``.venv/bin/python bench/bench_grading.py [--students N] [--jobs 1,2] [--assignments reconcile,resume]``
(60 students of reconcile alone: ~10 min).
"""

# No ``from __future__ import annotations``: the sibling benches and the tests load this file without
# registering it in sys.modules, where dataclasses cannot resolve string annotations.
import argparse
import contextlib
import csv
import importlib.util
import math
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import nbformat

from resumable_core.course.assignments import ASSIGNMENTS
from resumable_core.course.grading import pipeline
from resumable_core.course.grading.isolation import BwrapBackend
from resumable_core.course.grading.pipeline import grade
from resumable_core.course.grading.steps.workspace import DEFAULT_TIMEOUT, write_course
from resumable_core.course.nbgrader_cli import nbgrader

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO / "solutions" / "reconcile" / "reconcile.ipynb"
HONEST = ("correct", "rerun_everything", "delete_move", "is_error_all", "forgot_pending")
"""reconcile's kinds. Not stderr_writer: plain nbgrader zeroes a cell that wrote to stderr, the kit does not (by design)."""
NBGRADER = "nbgrader"
GOAL, GOAL_JOBS = 2.0, 2
"""The kit should grade at least GOAL times as fast as plain nbgrader at --jobs GOAL_JOBS."""
REPORT_TOTAL = "report total"
"""The breakdown's column of each report's own ``seconds`` (autograde to the end of the re-check)."""
_MARKER = re.compile(r"^\s*### (BEGIN|END) SOLUTION\s*$")


def source_of(assignment: str) -> Path:
    """The instructor's notebook: solutions/<a>/<a>.ipynb."""
    return REPO / "solutions" / assignment / f"{assignment}.ipynb"


def release_of(assignment: str) -> Path:
    """The learners' notebook: exercises/<a>/<a>.ipynb."""
    return REPO / "exercises" / assignment / f"{assignment}.ipynb"


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


def parse_assignments(text: str, known: tuple[str, ...] = ASSIGNMENTS) -> list[str]:
    """``a,b,...`` as a list in the order given (duplicates dropped); a ValueError names the unknown ones."""
    chosen = list(dict.fromkeys(a.strip() for a in text.split(",") if a.strip()))
    unknown = [a for a in chosen if a not in known]
    if unknown or not chosen:
        raise ValueError(
            f"unknown assignment(s) {', '.join(unknown) or '(none given)'}; choose from {', '.join(known)}"
        )
    return chosen


def round_robin(students: list[str], n: int) -> list[str]:
    """``n`` of ``students`` (named ``<kind>_<NN>``), copy 00 of every kind first, then copy 01, ..."""

    def copy_then_kind(sid: str) -> tuple[str, str]:
        kind, _, copy = sid.rpartition("_")
        return copy, kind

    return sorted(sorted(students, key=copy_then_kind)[:n])


# --- the sample classes ------------------------------------------------------------------------


def solution_answers(source_nb: nbformat.NotebookNode) -> dict[str, str]:
    """Every solution cell of the instructor's notebook by grade_id, its BEGIN/END SOLUTION lines dropped."""
    out = {}
    for cell in source_nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            out[meta["grade_id"]] = "\n".join(ln for ln in cell.source.splitlines() if not _MARKER.match(ln))
    return out


def sample_answers(source_nb: nbformat.NotebookNode) -> dict[str, dict[str, str]]:
    """The kinds of a solution-based class: {kind: answers by grade_id}; a cell left out keeps the release's stub.

    ``solution``: every solution cell answered as the instructor did; ``unanswered``: the release as
    it is; ``first_answer_only``: the first solution code cell answered (only with two or more).
    """
    answers = solution_answers(source_nb)
    code = [
        c.metadata["nbgrader"]["grade_id"]
        for c in source_nb.cells
        if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")
    ]
    kinds = {"solution": answers, "unanswered": {}}
    if len(code) >= 2:
        kinds["first_answer_only"] = {code[0]: answers[code[0]]}
    return kinds


def autograded_points(source_nb: nbformat.NotebookNode) -> float:
    """The points of the notebook's autograded test cells (graded code cells): the instructor's solution's score."""
    return float(
        sum(
            c.metadata["nbgrader"].get("points", 0)
            for c in source_nb.cells
            if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")
        )
    )


def _copies(n: int, kinds: int) -> int:
    return max(2, -(-n // kinds))  # at least 2: numbered names (<kind>_NN) whatever n is


def _keep(folder: Path, expected: Mapping[str, float | None], n: int) -> dict[str, float | None]:
    """``n`` of the students written under ``folder/submitted`` (round-robin); the others' folders removed."""
    chosen = round_robin([s for s in expected if s not in ("not_a_notebook", "empty")], n)
    for student in set(expected) - set(chosen):
        shutil.rmtree(folder / "submitted" / student, ignore_errors=True)
    return {s: expected[s] for s in chosen}


def write_reconcile_class(folder: Path, n: int) -> dict[str, float | None]:
    """``n`` honest reconcile submissions in nbgrader's ``submitted/`` layout under ``folder``; their expected scores."""
    samples = load_samples()
    keep = dict(samples.SAMPLES)
    samples.SAMPLES.clear()
    samples.SAMPLES.update({k: keep[k] for k in HONEST})
    expected = samples.write_class(SOURCE, folder, layout="submitted", copies=_copies(n, len(HONEST)))
    return _keep(folder, expected, n)


def write_solution_class(folder: Path, assignment: str, n: int) -> dict[str, float | None]:
    """``n`` submissions of ``assignment`` made from its release and solution (:func:`sample_answers`).

    Expected scores: the solution's is every autograded point; the others' are unknown (None).
    """
    samples = load_samples()
    source_nb = nbformat.read(str(source_of(assignment)), as_version=4)
    release = release_of(assignment)
    base = nbformat.read(str(release), as_version=4) if release.is_file() else source_nb  # submission() strips it
    kinds = sample_answers(source_nb)
    full = autograded_points(source_nb)
    expected: dict[str, float | None] = {}
    for kind, answers in kinds.items():
        for i in range(_copies(n, len(kinds))):
            sid = f"{kind}_{i:02d}"
            path = folder / "submitted" / sid / assignment / f"{assignment}.ipynb"
            path.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(samples.submission(base, answers), str(path))
            expected[sid] = full if kind == "solution" else None
    return _keep(folder, expected, n)


def write_class(folder: Path, n: int, assignment: str = "reconcile") -> dict[str, float | None]:
    """The sample class of ``assignment`` (``n`` students) under ``folder/submitted``; the expected scores (None: unknown)."""
    if assignment == "reconcile":
        return write_reconcile_class(folder, n)
    return write_solution_class(folder, assignment, n)


# --- the pure helpers of the tables ------------------------------------------------------------


def mismatches(expected: Mapping[str, float | None], ways: dict[str, dict[str, float]]) -> list[list[str]]:
    """Rows (student, expected, each way's score) of the students on whom the ways do not all agree.

    An expected score of None (not known in advance) is shown as ``?``.
    """
    rows = []
    for student in sorted(set(expected).union(*ways.values())):
        scores = [way.get(student) for way in ways.values()]
        if len(set(scores)) != 1 or None in scores:
            shown = ["-" if s is None else f"{s:g}" for s in scores]
            want = expected.get(student, math.nan)
            rows.append([student, "?" if want is None else f"{want:g}", *shown])
    return rows


def report_timings(report: Any) -> dict[str, float]:
    """A worker's report's per-student seconds: whatever numeric keys its ``timings`` has, then its own total.

    Absent fields are left out (a report without ``timings`` gives at most its total).
    """
    timings = getattr(report, "timings", None)
    out = {}
    if isinstance(timings, Mapping):
        out = {str(k): float(v) for k, v in timings.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    total = getattr(report, "seconds", None)
    if isinstance(total, int | float) and not isinstance(total, bool) and total > 0:
        out[REPORT_TOTAL] = float(total)
    return out


def median_timings(per_student: Mapping[str, Mapping[str, float]]) -> dict[str, tuple[float, int]]:
    """{key: (median across the students that have it, how many have it)}, keys in first-seen order."""
    values: dict[str, list[float]] = {}
    for timings in per_student.values():
        for key, seconds in timings.items():
            values.setdefault(key, []).append(seconds)
    return {key: (statistics.median(v), len(v)) for key, v in values.items()}


def ratio(plain: float | None, kit: float | None) -> str:
    """``plain / kit`` as ``1.23x`` (>1: the kit is faster); ``-`` when either is missing."""
    if plain is None or kit is None or kit <= 0:
        return "-"
    return f"{plain / kit:.2f}x"


def _wall(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.1f}"


def _per(seconds: float | None, n: int) -> str:
    return "-" if seconds is None or n < 1 else f"{seconds / n:.2f}"


@dataclass
class Way:
    """One way of grading one class: its wall seconds and scores, or why it failed."""

    seconds: float | None = None
    scores: dict[str, float] = field(default_factory=dict)
    timings: dict[str, dict[str, float]] = field(default_factory=dict)
    """Kit only: {student: report_timings(its report)}."""
    error: str | None = None


@dataclass
class Result:
    """An assignment's class and each way's grading of it (``nbgrader`` first, then ``--jobs J``)."""

    assignment: str
    expected: dict[str, float | None]
    ways: dict[str, Way] = field(default_factory=dict)

    def bad(self) -> list[list[str]]:
        """The mismatch rows over the ways that ran."""
        return mismatches(self.expected, {k: w.scores for k, w in self.ways.items() if w.error is None})

    def verdict(self) -> str:
        if any(w.error for w in self.ways.values()):
            return "FAILED"
        return "DIFFER" if self.bad() else "same"


def summary_rows(results: list[Result], jobs: list[int]) -> list[list[str]]:
    """Per assignment: students, grades verdict, nbgrader's wall and per student, then each --jobs' and plain/kit."""
    rows = []
    for r in results:
        n = len(r.expected)
        plain = r.ways[NBGRADER].seconds if NBGRADER in r.ways else None
        row = [r.assignment, str(n), r.verdict(), _wall(plain), _per(plain, n)]
        for j in jobs:
            kit = r.ways.get(f"--jobs {j}", Way()).seconds
            row += [_wall(kit), _per(kit, n), ratio(plain, kit)]
        rows.append(row)
    return rows


def summary_header(jobs: list[int]) -> list[str]:
    header = ["assignment", "students", "grades", "nbgrader s", "s/student"]
    for j in jobs:
        header += [f"kit -j{j} s", "s/student", f"nbgrader/kit -j{j}"]
    return header


def breakdown_rows(results: list[Result], jobs: list[int]) -> tuple[list[str], list[list[str]]]:
    """The kit's per-student medians: a row per (assignment, --jobs), a column per timing key any report had."""
    keys: list[str] = []
    medians = {}
    for r in results:
        for j in jobs:
            way = r.ways.get(f"--jobs {j}")
            if way is not None and way.error is None:
                medians[r.assignment, j] = median_timings(way.timings)
                keys += [k for k in medians[r.assignment, j] if k not in keys]
    keys.sort(key=lambda k: k == REPORT_TOTAL)  # the total last, the pieces in the reports' order
    rows = []
    for r in results:
        for j in jobs:
            if (r.assignment, j) not in medians:
                continue
            m = medians[r.assignment, j]
            reported = len(r.ways[f"--jobs {j}"].timings)
            row = [r.assignment, str(j), f"{reported}/{len(r.expected)}"]
            for k in keys:
                seconds, count = m.get(k, (None, 0))
                cell = "-" if seconds is None else f"{seconds:.2f}"
                row.append(cell if count in (0, reported) else f"{cell} ({count})")
            kit = r.ways[f"--jobs {j}"].seconds
            row.append(_per(kit, len(r.expected)))
            rows.append(row)
    return ["assignment", "--jobs", "reports", *keys, "kit wall/student"], rows


# --- the runs ----------------------------------------------------------------------------------


def time_nbgrader(tmp: Path, classroom: Path, assignment: str = "reconcile") -> tuple[float, dict[str, float]]:
    """Plain nbgrader: one course, ``nbgrader autograde <a>`` over every student; (seconds, scores by export)."""
    seq = tmp / "sequential"
    write_course(seq, DEFAULT_TIMEOUT)
    shutil.copytree(source_of(assignment).parent, seq / "source" / assignment)
    nbgrader(["generate_assignment", assignment, "--force"], seq)
    shutil.copytree(classroom / "submitted", seq / "submitted")
    started = time.monotonic()
    nbgrader(["autograde", assignment, "--force"], seq, timeout=3 * 3600)
    took = time.monotonic() - started
    nbgrader(["export", "--to", str(seq / "export.csv")], seq)
    with open(seq / "export.csv", newline="") as f:
        return took, {r["student_id"]: float(r["score"]) for r in csv.DictReader(f) if r["assignment"] == assignment}


@contextlib.contextmanager
def captured_reports(sink: dict[str, Any]) -> Iterator[None]:
    """Keep the workers' reports of the ``grade`` run inside (``grade`` removes the workers' folders when done)."""
    original: Callable[..., Mapping[str, Any]] | None = getattr(pipeline, "run_workers", None)
    if original is None:  # the pipeline changed: no breakdown, the timing itself still holds
        yield
        return
    run_workers = original

    def keeping(*args: Any, **kwargs: Any) -> Mapping[str, Any]:
        reports = run_workers(*args, **kwargs)
        sink.update(reports)
        return reports

    pipeline.run_workers = keeping  # type: ignore[assignment]
    try:
        yield
    finally:
        pipeline.run_workers = run_workers  # type: ignore[assignment]


def time_kit(tmp: Path, classroom: Path, jobs: int, sandboxed: bool, assignment: str = "reconcile") -> Way:
    """The kit's whole ``grade`` at ``jobs``: its seconds, scores and each student's worker timings."""
    reports: dict[str, Any] = {}
    started = time.monotonic()
    with captured_reports(reports):
        run = grade(
            classroom, assignment, jobs=jobs, out=tmp / f"kit-{jobs}", sandbox=sandboxed, echo=lambda *a, **k: None
        )
    took = time.monotonic() - started
    timings = {s: t for s, report in reports.items() if (t := report_timings(report))}
    return Way(took, {s.student: s.score for s in run.submissions}, timings)


def _failed(what: str, e: BaseException) -> Way:
    print(f"  {what} FAILED: {e}", file=sys.stderr, flush=True)
    traceback.print_exception(e, file=sys.stderr)
    return Way(error=f"{type(e).__name__}: {e}")


def bench_assignment(tmp: Path, assignment: str, n: int, jobs: list[int], sandboxed: bool) -> Result:
    """Write the class of ``assignment`` and grade it every way; a way that raises is recorded, not fatal."""
    folder = tmp / assignment
    result = Result(assignment, write_class(folder / "class", n, assignment))
    print(f"{assignment}: {len(result.expected)} students, nbgrader autograde ...", file=sys.stderr, flush=True)
    try:
        seconds, scores = time_nbgrader(folder, folder / "class", assignment)
        result.ways[NBGRADER] = Way(seconds, scores)
    except Exception as e:  # noqa: BLE001 - any failure of one way is reported and the bench goes on
        result.ways[NBGRADER] = _failed(f"{assignment} nbgrader", e)
    for j in jobs:
        print(f"{assignment}: kit grade --jobs {j} ...", file=sys.stderr, flush=True)
        try:
            result.ways[f"--jobs {j}"] = time_kit(folder, folder / "class", j, sandboxed, assignment)
        except Exception as e:  # noqa: BLE001 - likewise: the other ways and assignments still run
            result.ways[f"--jobs {j}"] = _failed(f"{assignment} --jobs {j}", e)
    return result


def print_results(results: list[Result], jobs: list[int], sandboxed: bool) -> int:
    """Print the grades' verdicts, the timing tables and any mismatch; 1 unless every way ran and agreed."""
    status = 0
    for r in results:
        kinds = sorted({s.rpartition("_")[0] for s in r.expected})
        scores = sorted({v for w in r.ways.values() for v in w.scores.values()})
        seen = ", ".join(f"{s:g}" for s in scores) or "-"
        print(
            f"{r.assignment}: {len(r.expected)} submissions ({len(kinds)} kinds: {', '.join(kinds)}); scores seen {seen}"
        )
        for way, w in r.ways.items():
            if w.error:
                print(f"  {way} FAILED: {w.error}")
                status = 1
        bad = r.bad()
        if bad:
            print(f"  GRADES DIFFER on {len(bad)} of {len(r.expected)} students:")
            ran = [k for k, w in r.ways.items() if w.error is None]
            print(table(["student", "expected", *ran], bad))
            status = 1
        elif len(r.ways) == len(jobs) + 1 and r.verdict() == "same":
            print(f"  grades identical: {', '.join(r.ways)} agree on every student")
    box = "sandboxed" if sandboxed else "NO sandbox"
    print()
    print(
        f"Wall seconds: nbgrader = one sequential `nbgrader autograde` (no sandbox, re-check or feedback); "
        f"kit -jJ = the whole `grade --jobs J` ({box}; + release, re-check, feedback, export). "
        f"nbgrader/kit > 1: the kit is faster."
    )
    print(table(summary_header(jobs), summary_rows(results, jobs)))
    if GOAL_JOBS in jobs:
        rows = summary_rows(results, [GOAL_JOBS])
        met = [r[0] for r in rows if r[-1] != "-" and float(r[-1][:-1]) >= GOAL]
        missed = [r[0] for r in rows if r[0] not in met]
        print(
            f"Goal nbgrader/kit >= {GOAL:.1f}x at --jobs {GOAL_JOBS}: "
            f"met for {', '.join(met) or 'none'}; not met for {', '.join(missed) or 'none'}."
        )
    header, rows = breakdown_rows(results, jobs)
    if rows:
        print()
        print(
            "The kit's workers, per student: median seconds across the students whose report has the key "
            "(`n` in brackets when only n do); report total = the report's own seconds."
        )
        print(table(header, rows))
    return status


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--students", type=int, default=60, help="submissions in each class (default 60)")
    p.add_argument("--jobs", default="1,2", help="comma-separated --jobs values the kit runs at (default 1,2)")
    p.add_argument(
        "--assignments",
        default=",".join(ASSIGNMENTS),
        help=f"comma-separated assignments to bench, in this order (default {','.join(ASSIGNMENTS)})",
    )
    args = p.parse_args(argv)
    jobs = list(dict.fromkeys(int(j) for j in args.jobs.split(",") if j))
    if args.students < 1 or not jobs or min(jobs) < 1:
        p.error("--students and every --jobs value must be at least 1")
    try:
        assignments = parse_assignments(args.assignments)
    except ValueError as e:
        p.error(str(e))
    missing = [str(source_of(a)) for a in assignments if not source_of(a).is_file()]
    if missing:
        p.error(f"no source notebook {', '.join(missing)}")
    why_not = BwrapBackend().available()
    if why_not:
        print(
            f"bwrap is unavailable ({why_not}): the kit runs with --no-sandbox (its figures are not the sandboxed ones)"
        )
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-grading-") as tmp_name:
        results = [bench_assignment(Path(tmp_name), a, args.students, jobs, why_not is None) for a in assignments]
    status = print_results(results, jobs, why_not is None)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"Load average at the end: {load} on {os.cpu_count()} cores; benchmark took {time.monotonic() - started:.0f} s."
    )
    return status


if __name__ == "__main__":
    sys.exit(main())
