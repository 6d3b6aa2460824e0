"""Bench: what the bubblewrap sandbox costs one submission of ``reconcile``, and where a sandboxed student's time goes.

Parts (``--parts``, all by default), each timed ``--repeats`` times with and without the sandbox,
interleaved, the median shown:

* ``start``      bwrap + python start: ``python -c pass`` on the ``bwrap`` backend against the ``plain`` one;
* ``learner``    the floor of every notebook: a bare learner's process (``recheck.LearnerProcess``) of a
                 one-cell notebook (``pass``): ``start``, ``executed()`` (its cells ran and it serves),
                 ``stop()``, in the sandbox (as ``SandboxedExecute`` starts it) against the ``plain`` backend;
* ``fresh``      an import-heavy start as a restarted call's fresh process makes it: ``import anthropic,
                 nbformat, IPython`` in a settled job (each open waits until its file is wholly cached,
                 ``isolation/shared.py``), against the plain backend;
* ``grade``      one correct submission through the whole ``grade(..., jobs=1)``, sandboxed against
                 ``sandbox=False``;
* ``breakdown``  one sandboxed ``grade`` of ``--students`` correct submissions with the worker run in
                 this process (the same ``worker_main`` the worker subprocess runs) and its pieces
                 wrapped with timers: the learner's process until its cells ran, nbgrader bookkeeping,
                 the re-check's checker, stopping the learner's process, feedback; the worker's
                 process start is timed apart.

Without bubblewrap the sandboxed figures are skipped (the reason printed) and the script exits 0.

Run: ``.venv/bin/python bench/bench_sandbox.py [--repeats N] [--parts start,learner,grade,breakdown] [--students N] [--quick]``
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.util
import inspect
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import nbformat

from resumable_core.course import nbgrader_cli
from resumable_core.course.grading import pipeline
from resumable_core.course.grading.inside.shell import KEY
from resumable_core.course.grading.isolation import Backend, BwrapBackend, Job, Limits, PlainBackend, library_copy
from resumable_core.course.grading.pipeline import grade
from resumable_core.course.grading.recheck import driver as recheck
from resumable_core.course.grading.recheck.learner import LearnerProcess
from resumable_core.course.grading.steps import execute, feedback, workers
from resumable_core.course.grading.steps.budget import DEFAULT_TIMEOUT, recheck_budget, wall_budget


def _bench_grading() -> ModuleType:
    """bench_grading.py, loaded from its file (bench/ is not a package): its sample loader and table."""
    path = Path(__file__).resolve().parent / "bench_grading.py"
    spec = importlib.util.spec_from_file_location("bench_grading", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_GRADING = _bench_grading()
load_samples, table = _GRADING.load_samples, _GRADING.table

REPO = Path(__file__).resolve().parent.parent
ASSIGNMENT = "reconcile"
SOURCE = REPO / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
PARTS = ("start", "learner", "fresh", "grade", "breakdown")
IMPORTS = "import anthropic, nbformat, IPython"
"""What the ``fresh`` part's process imports: thousands of files opened, as a learner's process does."""
RESULT_CAP: int = execute.SandboxedExecute.result_cap.default_value
"""Bytes of the executed notebook read back, as ``SandboxedExecute`` reads it."""


class BenchError(RuntimeError):
    """A timed run did not do what it should (so its time means nothing); the message says which and why."""


# --- the floors: bwrap + python, and a bare learner's process -----------------------------------


def _time_start(box: Backend, tmp: Path, code: str = "pass", settled: bool = False) -> float:
    """Seconds for ``python -c code`` on ``box``."""
    started = time.perf_counter()
    result = box.run(Job((sys.executable, "-c", code), tmp, settled=settled))
    took = time.perf_counter() - started
    if result.returncode != 0:
        raise BenchError(
            f"python -c {code} exited {result.returncode}: {result.stderr.decode(errors='replace')[-300:]}"
        )
    return took


def _time_learner(box: Backend, assignment: str = ASSIGNMENT) -> float:
    """Seconds for a bare learner's process of one ``pass`` cell: ``start``, ``executed()``, ``stop()``, on ``box``."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("pass")])
    started = time.perf_counter()
    learner = LearnerProcess.start(
        nb,
        None,
        assignment,
        timeout=DEFAULT_TIMEOUT,
        wall=wall_budget(1, DEFAULT_TIMEOUT) + recheck_budget(0, DEFAULT_TIMEOUT),  # as SandboxedExecute sets it
        backend=box,
    )
    try:
        result, why = learner.executed(RESULT_CAP)
    finally:
        stopped = learner.stop()
    took = time.perf_counter() - started
    done = ((result.metadata.get(KEY) if result is not None else None) or {}).get("done")
    if why is not None or done != 1 or stopped.returncode != 0:
        raise BenchError(
            f"the bare learner's process did not run its cell (why {why!r}, done {done}, exit {stopped.returncode}): "
            + stopped.stderr.decode(errors="replace")[-300:]
        )
    return took


# --- one submission through the whole grade -----------------------------------------------------


def _write_class(folder: Path, copies: int) -> dict[str, float]:
    """Only the ``correct`` sample, ``copies`` times, in nbgrader's ``submitted/`` layout; expected scores."""
    samples = load_samples()
    expected: dict[str, float] = samples.write_class(
        SOURCE, folder, layout="submitted", copies=copies, students=["correct"]
    )
    for extra in ("not_a_notebook", "empty"):  # always written: not graded, so out of the timing
        expected.pop(extra)
        for path in sorted((folder / "submitted" / extra).rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
        (folder / "submitted" / extra).rmdir()
    return expected


def _quiet(*args: Any, **kwargs: Any) -> None:
    """grade's echo, silenced (its progress lines would mix with the tables)."""


def _check_scores(run: pipeline.GradeRun, expected: dict[str, float], what: str) -> None:
    got = {s.student: s.score for s in run.submissions}
    if got != expected:
        raise BenchError(f"{what}: grades {got}, expected {expected}")


def _time_grade(classroom: Path, expected: dict[str, float], sandboxed: bool, out: Path) -> float:
    started = time.perf_counter()
    run = grade(classroom, ASSIGNMENT, jobs=1, out=out, sandbox=sandboxed, echo=_quiet)
    took = time.perf_counter() - started
    _check_scores(run, expected, f"grade (sandbox={sandboxed})")
    return took


# --- the breakdown: the worker in this process, its pieces wrapped ------------------------------

EXECUTE = "sandboxed execute"
"""``SandboxedExecute.preprocess``: one notebook's learner's process until its cells ran, and the merge."""
RECHECK = "isolated re-check"
"""``recheck.run``: the checker against the serving learner's process, then its stop."""
CHECKER = "re-check checker"
"""``recheck._checker``: the checker's process, from its start to its report."""
PHASES = ("execute", "re-check", "after")
"""Where a learner's process method is called: in ``SandboxedExecute``, in ``recheck.run``, after them (``stop_learners``)."""


def learner_piece(method: str, phase: str) -> str:
    """The piece a ``LearnerProcess`` method's time goes to, by where it was called."""
    return f"learner {method} ({phase})"


class Clock:
    """Seconds per piece, per student (``"run"``: once per grading run); the student is the one nbgrader is autograding."""

    def __init__(self) -> None:
        self.seconds: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.student = "run"
        self.starts: list[tuple[str, float]] = []
        """(student, perf_counter) when each student's autograde began, in order."""
        self.active: list[str] = []
        """The timed pieces running now, outermost first (the grading calls them from one thread)."""
        self.reports: dict[str, dict[str, float]] = {}
        """Each student's ``StudentReport.timings``, as the worker wrote them."""
        self.notes: list[str] = []
        """What could not be measured as planned (printed under the tables)."""

    def add(self, piece: str, seconds: float, student: str | None = None) -> None:
        self.seconds[student or self.student][piece] += seconds

    def phase(self) -> str:
        """Where a call made now is: inside ``SandboxedExecute``, inside ``recheck.run``, or after both."""
        if EXECUTE in self.active:
            return "execute"
        return "re-check" if RECHECK in self.active else "after"

    def timed(self, piece: str | Callable[[], str], fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` that adds its duration to ``piece`` (or the name ``piece()`` gives at the call) of the current student."""

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            name = piece if isinstance(piece, str) else piece()
            self.active.append(name)
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.add(name, time.perf_counter() - started)
                self.active.pop()

        return wrapper


def _patch_everywhere(stack: contextlib.ExitStack, fn: Callable[..., Any], wrapper: Callable[..., Any]) -> None:
    """Replace ``fn`` by ``wrapper`` in every loaded ``resumable_core`` module that binds it by name."""
    for name, module in list(sys.modules.items()):
        if not name.startswith("resumable_core") or module is None:
            continue
        for attr, value in list(vars(module).items()):
            if value is fn:
                stack.enter_context(_setattr(module, attr, wrapper))


@contextlib.contextmanager
def _setattr(owner: Any, attr: str, value: Any) -> Iterator[None]:
    """``owner.attr = value`` for the block; then what ``owner`` itself held (a class's own descriptor), or nothing."""
    own = vars(owner)
    had = attr in own
    old = own.get(attr)
    setattr(owner, attr, value)
    try:
        yield
    finally:
        if had:
            setattr(owner, attr, old)
        else:
            delattr(owner, attr)


def _learner_methods(stack: contextlib.ExitStack, clock: Clock) -> None:
    """Time ``LearnerProcess.start``, ``executed`` and ``stop``, each under where it is called (:data:`PHASES`)."""
    for method in ("start", "executed", "stop"):
        raw = vars(LearnerProcess)[method]
        is_classmethod = isinstance(raw, classmethod)
        fn = raw.__func__ if is_classmethod else raw
        wrapped = clock.timed(functools.partial(lambda m: learner_piece(m, clock.phase()), method), fn)
        stack.enter_context(_setattr(LearnerProcess, method, classmethod(wrapped) if is_classmethod else wrapped))


def _autograde(clock: Clock, real: Callable[..., Any]) -> Callable[..., Any]:
    """``NbGraderAPI.autograde`` that makes its student the current one."""
    signature = inspect.signature(real)

    @functools.wraps(real)
    def autograde(*args: Any, **kwargs: Any) -> Any:
        clock.student = str(signature.bind(*args, **kwargs).arguments["student_id"])
        clock.starts.append((clock.student, time.perf_counter()))
        return clock.timed("autograde", real)(*args, **kwargs)

    return autograde


def _feedback_page(clock: Clock, real: Callable[..., Any]) -> Callable[..., Any]:
    """``feedback.write_feedback``, timed under the student its autograded notebook belongs to."""
    signature = inspect.signature(real)

    @functools.wraps(real)
    def write(*args: Any, **kwargs: Any) -> Any:
        first = next(iter(signature.bind(*args, **kwargs).arguments.values()))
        parts = Path(str(first)).parts
        student = parts[-3] if len(parts) >= 3 and "autograded" in parts else "run"
        started = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            clock.add("feedback page", time.perf_counter() - started, student)

    return write


def _in_process_workers(clock: Clock) -> Callable[..., Any]:
    """``run_workers`` for one job, with the worker's ``worker_main`` run in this process."""
    signature = inspect.signature(workers.run_workers)

    def run_workers(*args: Any, **kwargs: Any) -> dict[str, Any]:
        a = signature.bind(*args, **kwargs).arguments
        main, assignment, students = Path(a["main"]), a["assignment"], list(a["students"])
        worker = main / "workers" / "w0"
        # the same course copy the worker subprocess would get (a private helper: it follows the pipeline's changes)
        workers._copy_course(main, worker, a["timeout"], students, a.get("execution"))
        cwd, started = os.getcwd(), time.perf_counter()
        log = io.StringIO()
        try:
            with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
                workers.worker_main([str(worker), assignment, *students])
        finally:
            os.chdir(cwd)
        ended = time.perf_counter()
        if not clock.starts:
            raise BenchError(f"the in-process worker autograded no one; its log:\n{log.getvalue()[-2000:]}")
        clock.add("worker setup (config, NbGraderAPI)", clock.starts[0][1] - started, "run")
        bounds = [t for _, t in clock.starts[1:]] + [ended]
        for (student, t0), t1 in zip(clock.starts, bounds):
            clock.add("student total", t1 - t0, student)
        clock.student = "run"
        reports = {}
        for s in students:
            report = workers.read_report(worker / "reports" / f"{s}.json", s, worker)
            if report is None:
                raise BenchError(f"the in-process worker wrote no valid report for {s}")
            reports[s] = report
            clock.reports[s] = {k: float(v) for k, v in (report.timings or {}).items()}
            a["progress"](report)
        return reports

    return run_workers


def _pipeline_steps(stack: contextlib.ExitStack, clock: Clock) -> None:
    """Time every function ``grade`` calls through the pipeline module's names (its own helpers excepted)."""
    for attr, value in list(vars(pipeline).items()):
        if attr in ("grade", "run_workers") or not inspect.isfunction(value):
            continue
        if value.__module__ == pipeline.__name__ or not value.__module__.startswith("resumable_core"):
            continue
        stack.enter_context(_setattr(pipeline, attr, clock.timed(f"step: {attr}", value)))


def run_breakdown(tmp: Path, students: int) -> tuple[Clock, float]:
    """One sandboxed grade of ``students`` correct submissions, the worker in-process and timed; (clock, wall s)."""
    from nbgrader.apps import NbGraderAPI

    classroom = tmp / "breakdown-class"
    expected = _write_class(classroom, students)
    clock = Clock()
    with contextlib.ExitStack() as stack:
        _pipeline_steps(stack, clock)
        stack.enter_context(
            _setattr(pipeline, "run_workers", clock.timed("step: run_workers (in-process)", _in_process_workers(clock)))
        )
        stack.enter_context(_setattr(NbGraderAPI, "autograde", _autograde(clock, NbGraderAPI.autograde)))
        preprocess = clock.timed(EXECUTE, execute.SandboxedExecute.preprocess)
        stack.enter_context(_setattr(execute.SandboxedExecute, "preprocess", preprocess))
        _learner_methods(stack, clock)
        for name, piece in (("run", RECHECK), ("_checker", CHECKER)):
            fn = getattr(recheck, name, None)
            if callable(fn):
                _patch_everywhere(stack, fn, clock.timed(piece, fn))
            else:
                clock.notes.append(f"recheck.{name} is gone: its time is counted in the re-check's rest or other")
        _patch_everywhere(stack, feedback.write_feedback, _feedback_page(clock, feedback.write_feedback))
        started = time.perf_counter()
        run = grade(classroom, ASSIGNMENT, jobs=1, out=tmp / "breakdown-out", echo=_quiet)
        wall = time.perf_counter() - started
    _check_scores(run, expected, "the timed grade")
    return clock, wall


def worker_start_seconds() -> float:
    """A worker process's start: python plus the imports ``worker_main`` makes, as ``run_workers`` starts it."""
    code = "import nbgrader.apps, nbgrader.coursedir, traitlets.config.loader, " + workers.WORKER_MODULE
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=nbgrader_cli.env(), capture_output=True)
    return time.perf_counter() - started


def _stops(p: Mapping[str, float]) -> float:
    return sum(p[learner_piece("stop", phase)] for phase in PHASES)


STUDENT_ROWS: tuple[tuple[str, Callable[[Mapping[str, float]], float]], ...] = (
    (
        "learner's process start (folders, copies, learner library)",
        lambda p: p[learner_piece("start", "execute")],
    ),
    (
        "learner's process until its cells ran (bwrap, python, cells)",
        lambda p: p[learner_piece("executed", "execute")],
    ),
    (
        "learner's view, budget and merge (rest of SandboxedExecute)",
        lambda p: p[EXECUTE] - sum(p[learner_piece(m, "execute")] for m in ("start", "executed", "stop")),
    ),
    ("nbgrader bookkeeping (autograde minus SandboxedExecute)", lambda p: p["autograde"] - p[EXECUTE]),
    ("re-check's checker (recheck._checker, sandboxed)", lambda p: p[CHECKER]),
    (
        "re-check's rest (recheck.run minus checker and stop)",
        lambda p: p[RECHECK] - p[CHECKER] - p[learner_piece("stop", "re-check")],
    ),
    ("stopping the learner's process (LearnerProcess.stop)", _stops),
    ("feedback page (feedback.write_feedback)", lambda p: p["feedback page"]),
)
OTHER = "other (gradebook reads and writes, report file)"


def breakdown_tables(clock: Clock, wall: float, worker_start: float) -> str:
    """The per-student table (seconds and % of the student's total) and the once-per-run table."""
    students = [s for s, _ in clock.starts]
    header = ["piece of one sandboxed student"]
    for i in range(len(students)):
        header += [f"student {i + 1} s", "%"]
    pieces = {s: defaultdict(float, clock.seconds[s]) for s in students}
    totals = {s: pieces[s]["student total"] + pieces[s]["feedback page"] for s in students}

    def row(label: str, values: list[float]) -> list[str]:
        cells = [label]
        for s, value in zip(students, values):
            cells += [f"{value:.3f}", f"{100 * value / totals[s]:.1f}%" if totals[s] else "-"]
        return cells

    rows = [row(label, [pick(pieces[s]) for s in students]) for label, pick in STUDENT_ROWS]
    rows.append(row(OTHER, [totals[s] - sum(pick(pieces[s]) for _, pick in STUDENT_ROWS) for s in students]))
    rows.append(row("student total", [totals[s] for s in students]))
    keys = list(dict.fromkeys(k for s in students for k in clock.reports.get(s, {})))
    for key in keys:  # what the worker's own clock says, beside the pieces (not part of their sum)
        label = f"for comparison: the report's {key!r}"
        cells = [label]
        for s in students:
            value = clock.reports.get(s, {}).get(key)
            cells += ["-", "-"] if value is None else [f"{value:.3f}", f"{100 * value / totals[s]:.1f}%"]
        rows.append(cells)
    run = dict(clock.seconds["run"])
    once = [["worker process start (python + nbgrader imports; timed apart)", f"{worker_start:.3f}"]]
    once += [[k, f"{v:.3f}"] for k, v in sorted(run.items(), key=lambda kv: -kv[1])]
    once.append(["whole grade (worker in-process; add the worker start for --jobs 1)", f"{wall:.3f}"])
    notes = "".join(f"\nNote: {n}" for n in dict.fromkeys(clock.notes))
    return (
        table(header, rows)
        + "\n\nOnce per grading run (the pipeline's steps; workers include the students above)\n"
        + table(["piece", "s"], once)
        + notes
    )


# --- the comparison table -----------------------------------------------------------------------


def _medians(measure: Callable[[bool, int], float], sandboxed: bool, repeats: int) -> tuple[float | None, float]:
    """Median seconds in the sandbox (None when ``sandboxed`` is False) and plain, the two ways interleaved."""
    boxed: list[float] = []
    plain: list[float] = []
    for i in range(repeats):
        if sandboxed:
            boxed.append(measure(True, i))
        plain.append(measure(False, i))
    return (statistics.median(boxed) if boxed else None), statistics.median(plain)


def _learner_sandbox(tmp: Path) -> Backend:
    """The backend ``SandboxedExecute`` starts a learner's process on, warmed by one untimed run.

    That run makes the library's learner view, which a grading run makes once, for its first student.
    """
    box = BwrapBackend(library_copy(tmp / "lib"), Limits())
    _time_learner(box)
    return box


def comparison(parts: list[str], repeats: int, tmp: Path, sandboxed: bool) -> list[list[str]]:
    """One row per part: what, sandbox s, no sandbox s, ratio."""
    box = _learner_sandbox(tmp) if sandboxed and "learner" in parts else PlainBackend()
    measures: dict[str, tuple[str, Callable[[bool, int], float]]] = {
        "start": (
            "bwrap + python start (python -c pass)",
            lambda boxed, i: _time_start(BwrapBackend(None, Limits(wall=60)) if boxed else PlainBackend(), tmp),
        ),
        "learner": (
            "bare learner's process, one `pass` cell",
            lambda boxed, i: _time_learner(box if boxed else PlainBackend()),
        ),
        "fresh": (
            f"a fresh process's imports, settled ({IMPORTS})",
            lambda boxed, i: _time_start(
                BwrapBackend(None, Limits(wall=120)) if boxed else PlainBackend(), tmp, IMPORTS, settled=True
            ),
        ),
    }
    if "grade" in parts:
        classroom = tmp / "one-class"
        expected = _write_class(classroom, 1)
        measures["grade"] = (
            "one correct reconcile, whole grade --jobs 1",
            lambda boxed, i: _time_grade(classroom, expected, boxed, tmp / f"grade-{boxed}-{i}"),
        )
    rows = []
    for part in PARTS:
        if part in parts and part in measures:
            what, measure = measures[part]
            s, p = _medians(measure, sandboxed, repeats)
            ratio = "-" if s is None or p < 1e-4 else f"{s / p:.2f}x"
            rows.append([what, "-" if s is None else f"{s:.3f}", f"{p:.3f}", ratio])
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument(
        "--repeats", type=int, default=None, help="timed runs of each way, the median shown (default 3; quick 1)"
    )
    p.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)} (default all)")
    p.add_argument("--students", type=int, default=2, help="correct submissions in the timed breakdown (default 2)")
    p.add_argument("--quick", action="store_true", help="one repeat (smoke test)")
    args = p.parse_args(argv)
    parts = [x for x in args.parts.split(",") if x]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        p.error(f"unknown part(s) {', '.join(unknown)}; choose from {', '.join(PARTS)}")
    if (args.repeats is not None and args.repeats < 1) or args.students < 1:
        p.error("--repeats and --students must be at least 1")
    repeats = args.repeats or (1 if args.quick else 3)
    why_not = BwrapBackend().available()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-sandbox-") as tmp_name:
        tmp = Path(tmp_name)
        if why_not:
            print(f"bwrap is unavailable ({why_not}): only the no-sandbox figures are measured")
        rows = comparison(parts, repeats, tmp, why_not is None)
        if rows:
            print(f"What the sandbox costs (median of {repeats}, wall seconds; the two ways interleaved)")
            print(table(["what", "sandbox s", "no sandbox s", "sandbox/no sandbox"], rows))
        if "breakdown" in parts and why_not:
            print("\nThe breakdown is of a sandboxed student: skipped without bwrap.")
        elif "breakdown" in parts:
            clock, wall = run_breakdown(tmp, args.students)
            print(f"\nWhere one sandboxed student's time goes ({args.students} correct submissions, grade --jobs 1)")
            print(breakdown_tables(clock, wall, worker_start_seconds()))
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"\nLoad average at the end: {load} on {os.cpu_count()} cores; benchmark took {time.perf_counter() - started:.1f} s."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
