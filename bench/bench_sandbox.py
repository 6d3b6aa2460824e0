"""Bench: what the bubblewrap sandbox costs one submission of ``reconcile``, and where a sandboxed student's time goes.

Parts (``--parts``, all by default), each timed ``--repeats`` times with and without the sandbox,
interleaved, the median shown:

* ``start``      bwrap + python start: ``python -c pass`` in ``Sandbox.run`` against ``run_plain``;
* ``kernel``     the floor: a bare kernel started by the grading's ``kernel_runner`` running one empty
                 cell (``pass``: nbclient skips an empty one), in the sandbox (as ``SandboxedExecute`` runs it) against the same runner outside;
* ``grade``      one correct submission through the whole ``grade(..., jobs=1)``, sandboxed against
                 ``sandbox=False``;
* ``breakdown``  one sandboxed ``grade`` of two correct submissions with the worker run in this
                 process (the same ``worker_main`` the worker subprocess runs) and its pieces wrapped
                 with timers: kernel start, execution of the cells, nbgrader bookkeeping, the isolated
                 re-check, feedback; the worker's process start is timed apart.

Without bubblewrap the sandboxed figures are skipped (the reason printed) and the script exits 0.

Run: ``.venv/bin/python bench/bench_sandbox.py [--repeats N] [--parts start,kernel,grade,breakdown] [--quick]``
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
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import nbformat

from resumable_core.course import nbgrader_cli
from resumable_core.course.grading import execute, feedback, pipeline, recheck, sandbox, workers
from resumable_core.course.grading.budget import DEFAULT_TIMEOUT
from resumable_core.course.grading.kernel_runner import KEY
from resumable_core.course.grading.pipeline import grade
from resumable_core.course.grading.sandbox import SCRATCH, Limits, Sandbox, library_copy, run_plain


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
SOURCE = REPO / "solutions" / "reconcile" / "reconcile.ipynb"
PARTS = ("start", "kernel", "grade", "breakdown")
RUNNER = [sys.executable, "-m", "resumable_core.course.grading.kernel_runner"]


class BenchError(RuntimeError):
    """A timed run did not do what it should (so its time means nothing); the message says which and why."""


# --- the floors: bwrap + python, and a bare kernel ----------------------------------------------


def _time_start(box: Sandbox | None, tmp: Path) -> float:
    """Seconds for ``python -c pass`` in ``box`` (None: plain)."""
    argv = [sys.executable, "-c", "pass"]
    started = time.perf_counter()
    if box is None:
        result = run_plain(argv, tmp, Limits(wall=60), nbgrader_cli.env())
    else:
        result = box.run(argv, tmp)
    took = time.perf_counter() - started
    if result.returncode != 0:
        raise BenchError(f"python -c pass exited {result.returncode}: {result.stderr.decode(errors='replace')[-300:]}")
    return took


def _empty_notebook(folder: Path) -> Path:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("pass")])  # nbclient skips an empty cell
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = folder / "empty.ipynb"
    nbformat.write(nb, str(path))
    return path


def _time_kernel(box: Sandbox | None, tmp: Path) -> float:
    """Seconds for the grading's kernel runner to start a kernel and run one empty cell, in ``box`` or plain."""
    with tempfile.TemporaryDirectory(dir=tmp) as scratch_name:
        scratch = Path(scratch_name)
        _empty_notebook(scratch)
        inside = SCRATCH if box is not None else str(scratch)
        argv = [*RUNNER, f"{inside}/empty.ipynb", f"{inside}/.result.ipynb", "--timeout", str(DEFAULT_TIMEOUT)]
        argv += ["--kill-leftovers"] if box is not None else []  # as grading runs it
        started = time.perf_counter()
        if box is None:
            result = run_plain(argv, scratch, Limits(wall=120), nbgrader_cli.env())
        else:
            result = box.run(argv, scratch)
        took = time.perf_counter() - started
        done = nbformat.read(str(scratch / ".result.ipynb"), as_version=4).metadata.get(KEY, {}).get("done")
    if result.returncode != 0 or done != 1:
        raise BenchError(f"the bare kernel did not run its cell (exit {result.returncode}, done {done})")
    return took


# --- one submission through the whole grade -----------------------------------------------------


def _write_class(folder: Path, copies: int) -> dict[str, float]:
    """Only the ``correct`` sample, ``copies`` times, in nbgrader's ``submitted/`` layout; expected scores."""
    samples = load_samples()
    keep = samples.SAMPLES["correct"]
    samples.SAMPLES.clear()
    samples.SAMPLES["correct"] = keep
    expected: dict[str, float] = samples.write_class(SOURCE, folder, layout="submitted", copies=copies)
    for extra in ("not_a_notebook", "empty"):
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
    run = grade(classroom, "reconcile", jobs=1, out=out, sandbox=sandboxed, echo=_quiet)
    took = time.perf_counter() - started
    _check_scores(run, expected, f"grade (sandbox={sandboxed})")
    return took


# --- the breakdown: the worker in this process, its pieces wrapped ------------------------------


def _iso(value: Any) -> float | None:
    try:
        return datetime.fromisoformat(str(value)).timestamp()
    except ValueError:
        return None


class Clock:
    """Seconds per piece, per student (``"run"``: once per grading run); the student is the one nbgrader is autograding."""

    def __init__(self) -> None:
        self.seconds: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.student = "run"
        self.starts: list[tuple[str, float]] = []
        """(student, perf_counter) when each student's autograde began, in order."""
        self.notes: list[str] = []
        """What could not be measured as planned (printed under the tables)."""

    def add(self, piece: str, seconds: float, student: str | None = None) -> None:
        self.seconds[student or self.student][piece] += seconds

    def timed(self, piece: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` that adds its duration to ``piece`` of the current student."""

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.add(piece, time.perf_counter() - started)

        return wrapper

    def kernel_phases(self, argv: list[str], scratch: Path, wall_start: float, wall_end: float) -> None:
        """Split a kernel runner's sandbox run by nbclient's cell timestamps in its result notebook."""
        for arg in argv:
            if not (arg.startswith(SCRATCH + "/") and arg.endswith(".ipynb")):
                continue
            path = scratch / Path(arg).relative_to(SCRATCH)
            with contextlib.suppress(OSError, ValueError):
                nb = nbformat.read(str(path), as_version=4)
                if KEY not in nb.metadata:
                    continue
                stamps = [c.metadata.get("execution", {}) for c in nb.cells if c.cell_type == "code"]
                busy = [t for s in stamps if (t := _iso(s.get("iopub.status.busy"))) is not None]
                reply = [t for s in stamps if (t := _iso(s.get("shell.execute_reply"))) is not None]
                if busy and reply:
                    self.add("kernel start", min(busy) - wall_start)
                    self.add("execution", max(reply) - min(busy))
                    self.add("kernel stop", wall_end - max(reply))
                    return
        self.add("execution", wall_end - wall_start)  # not split: the whole kernel run counts as execution
        self.notes.append("a kernel run had no cell timestamps: its start and stop are counted in its execution")


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
    old = getattr(owner, attr)
    setattr(owner, attr, value)
    try:
        yield
    finally:
        setattr(owner, attr, old)


def _sandbox_run(clock: Clock, real: Callable[..., Any]) -> Callable[..., Any]:
    """``Sandbox.run`` that splits the kernel runner's runs into start, execution and stop."""
    signature = inspect.signature(real)

    @functools.wraps(real)
    def run(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs).arguments
        wall_start, started = time.time(), time.perf_counter()
        result = real(*args, **kwargs)
        if _is_runner(bound["argv"]):
            clock.kernel_phases(list(bound["argv"]), Path(bound["scratch"]), wall_start, time.time())
            clock.add("kernel sandbox", time.perf_counter() - started)
        return result

    return run


def _is_runner(argv: Any) -> bool:
    return any("kernel_runner" in str(a) for a in argv)


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
        stack.enter_context(_setattr(Sandbox, "run", _sandbox_run(clock, Sandbox.run)))
        stack.enter_context(_setattr(NbGraderAPI, "autograde", _autograde(clock, NbGraderAPI.autograde)))
        feedback_run = clock.timed("nbgrader generate_feedback", NbGraderAPI.generate_feedback)
        stack.enter_context(_setattr(NbGraderAPI, "generate_feedback", feedback_run))
        preprocess = clock.timed("sandboxed execute", execute.SandboxedExecute.preprocess)
        stack.enter_context(_setattr(execute.SandboxedExecute, "preprocess", preprocess))
        if callable(getattr(recheck, "run", None)):
            _patch_everywhere(stack, recheck.run, clock.timed("isolated re-check", recheck.run))
        else:
            clock.notes.append("recheck.run is gone: the isolated re-check is counted in other")
        _patch_everywhere(stack, feedback.write_feedback, _feedback_page(clock, feedback.write_feedback))
        started = time.perf_counter()
        run = grade(classroom, "reconcile", jobs=1, out=tmp / "breakdown-out", echo=_quiet)
        wall = time.perf_counter() - started
    _check_scores(run, expected, "the timed grade")
    return clock, wall


def worker_start_seconds() -> float:
    """A worker process's start: python plus the imports ``worker_main`` makes, as ``run_workers`` starts it."""
    code = "import nbgrader.apps, nbgrader.coursedir, traitlets.config.loader, " + workers.WORKER_MODULE
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=nbgrader_cli.env(), capture_output=True)
    return time.perf_counter() - started


STUDENT_ROWS = (
    ("kernel start (bwrap, runner, kernel up to its first cell)", lambda p: p["kernel start"]),
    ("execution of the cells", lambda p: p["execution"]),
    ("kernel shutdown and sandbox exit", lambda p: p["kernel stop"]),
    ("scratch copy, result read-back and merge", lambda p: p["sandboxed execute"] - p["kernel sandbox"]),
    ("nbgrader bookkeeping (autograde minus execute)", lambda p: p["autograde"] - p["sandboxed execute"]),
    ("isolated re-check (recheck.run, sandboxed)", lambda p: p["isolated re-check"]),
    ("nbgrader generate_feedback (worker)", lambda p: p["nbgrader generate_feedback"]),
    ("feedback page (feedback.write_feedback)", lambda p: p["feedback page"]),
)


def breakdown_tables(clock: Clock, wall: float, worker_start: float) -> str:
    """The per-student table (seconds and % of the student's total) and the once-per-run table."""
    students = [s for s, _ in clock.starts]
    header = ["piece of one sandboxed student"]
    for i in range(len(students)):
        header += [f"student {i + 1} s", "%"]
    rows = []
    for label, pick in (*STUDENT_ROWS, ("other (gradebook reads, re-check bookkeeping, report file)", None)):
        row = [label]
        for s in students:
            p = dict(clock.seconds[s])
            total = p["student total"] + p["feedback page"]
            value = (
                pick(defaultdict(float, p)) if pick else total - sum(f(defaultdict(float, p)) for _, f in STUDENT_ROWS)
            )
            row += [f"{value:.3f}", f"{100 * value / total:.1f}%"]
        rows.append(row)
    totals = ["student total"]
    for s in students:
        totals += [f"{clock.seconds[s]['student total'] + clock.seconds[s]['feedback page']:.3f}", "100.0%"]
    rows.append(totals)
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


def comparison(parts: list[str], repeats: int, tmp: Path, sandboxed: bool) -> list[list[str]]:
    """One row per part: what, sandbox s, no sandbox s, ratio."""
    library = library_copy(tmp / "lib") if sandboxed and "kernel" in parts else None  # the kernel runner needs it
    measures: dict[str, tuple[str, Callable[[bool, int], float]]] = {
        "start": (
            "bwrap + python start (python -c pass)",
            lambda boxed, i: _time_start(Sandbox(None, Limits(wall=60)) if boxed else None, tmp),
        ),
        "kernel": (
            "bare kernel, one `pass` cell (kernel_runner)",
            lambda boxed, i: _time_kernel(Sandbox(library, Limits(wall=120)) if boxed else None, tmp),
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
            rows.append([what, "-" if s is None else f"{s:.3f}", f"{p:.3f}", "-" if s is None else f"{s / p:.2f}x"])
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
    why_not = sandbox.available()
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
