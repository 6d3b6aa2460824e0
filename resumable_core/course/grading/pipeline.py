"""Grade a whole class with real nbgrader: :func:`grade` runs the steps of ``steps/`` in order in a working course,
then, unless ``--out`` (a dry run), publishes into the course and rebuilds the whole class's files from its
gradebook. docs/architecture.md ("Where grades go") says what each writes and why."""

from __future__ import annotations

import itertools
import shutil
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..release import COURSE_ROOT, Course, find_course
from .errors import GradingError, StudentIdError, check_id
from .gradebook import export_csv, gradebook_url, submission_score
from .isolation import library_copy, make_backend
from .model import StudentReport, Submission
from .progress import RunProgress
from .steps.cluster import check_scheduler, run_on_cluster
from .steps.collect import check_class, collect, unpacked
from .steps.course_grades import ClassFiles, record_results, write_class_files, write_course_grades
from .steps.lms import Names
from .steps.merge import finished, merge_student, prepared_students, scored, trusted_reports
from .steps.prepare import prepare
from .steps.publish import check_released, publish
from .steps.report import explain, plot_scores, write_csv
from .steps.similarity import THRESHOLD as SIMILAR
from .steps.workers import WORKER_EXITED, run_workers
from .steps.workspace import DEFAULT_TIMEOUT, Execution, cached_release, find_source, prepare_out

NO_SANDBOX_WARNING = (
    "WARNING: --no-sandbox: every submission runs with your powers: it can read and change your files "
    "(the gradebook, solutions/, the library and site-packages later students are graded with), "
    "reach the network, read your environment's secrets and leave processes running. "
    "Grade untrusted submissions only in the sandbox (apt-get install bubblewrap)."
)


def _execution(work: Path, sandbox: bool, echo: Callable[..., None]) -> Execution:
    """How notebooks run this time: refuses without bubblewrap unless ``sandbox`` is False (then warns)."""
    if not sandbox:
        echo(NO_SANDBOX_WARNING, flush=True)
        return Execution(library=None, isolation="plain")
    why = make_backend("bwrap").available()
    if why:
        raise GradingError(f"the grading sandbox cannot run: {why}; install bubblewrap or pass --no-sandbox (unsafe)")
    return Execution(library=library_copy(work / "sandbox-lib"), isolation="bwrap")


def _student_ids(subs: list[Submission]) -> list[str]:
    """The run's students by a usable id (a refused name's label is none): each one's course grades are replaced."""
    ids = []
    for sub in subs:
        with suppress(StudentIdError):
            ids.append(check_id(sub.student))
    return ids


def _students_done(
    work: Path, assignment: str, total: int, done: int, progress: RunProgress
) -> Callable[[StudentReport], None]:
    """What a worker calls with each student's report: merge it, mark them done, print their line."""
    prepared, count, width = prepared_students(work), itertools.count(done + 1), len(str(total))

    def student_done(report: StudentReport) -> None:
        died = report.error.startswith(WORKER_EXITED)  # no result: --resume grades them again
        merged = not died and merge_student(work, assignment, report, prepared)
        scored = submission_score(gradebook_url(work), assignment, report.student) if merged else None
        if not report.success:
            outcome = "FAILED"
        else:
            outcome = f"{'-' if scored is None else f'{scored[0]:g}/{scored[1]:g}'} in {report.seconds:.1f} s"
        progress.line(f"[{next(count):>{width}}/{total}] {report.student}: {outcome}", advance=True)

    return student_done


def _write_run(
    work: Path,
    subs: list[Submission],
    reports: dict[str, StudentReport],
    assignment: str,
    releases: dict[str, Any],
    graded: bool,
    progress: RunProgress,
    opts: GradeOptions,
) -> GradeRun:
    """Step 6 over this run's students: reasons, scores, export, pages, grades.csv and the plot in ``work``; a dry run
    (``--out``) writes the class files there too, a publishing one beside the class's ``grades.csv``."""
    progress.step("writing grades")
    by_id = {s.student: s for s in subs}
    for student, report in sorted(reports.items()):
        if student in by_id:  # reports are read by the ids given out; anything else is never graded
            by_id[student] = explain(by_id[student], report, work, assignment, opts.timeout, len(releases) > 1)
    subs = scored(list(by_id.values()), work, assignment)
    if graded:
        export_csv(gradebook_url(work), work / "nbgrader-export.csv")
    write_csv(work / "grades.csv", subs)
    plot_scores(work / "scores.png", subs, assignment)
    files = None
    if opts.out:
        files = write_class_files(find_course(work), assignment, work, subs, opts.similar, opts.provisional)
    shutil.rmtree(work / "workers", ignore_errors=True)
    shutil.rmtree(work / "sandbox-lib", ignore_errors=True)
    return GradeRun(work, subs, work / "grades.csv", work / "scores.png", 0.0, files=files)


def _publish(
    run: GradeRun,
    target: Course,
    assignment: str,
    reports: dict[str, StudentReport],
    progress: RunProgress,
    opts: GradeOptions,
) -> None:
    """Step 7: into the course, then the whole class's files rebuilt from its gradebook (``run`` points at them)."""
    progress.step("publishing into the course")
    students = _student_ids(run.submissions)
    publish(target, run.out, assignment, students)
    progress.line(f"Published {len(students)} student(s) into the course gradebook {target.shown_url}")
    folder = Path(opts.class_dir) if opts.class_dir else Path.cwd() / f"grades-{assignment}"
    record_results(folder, [s for s in run.submissions if s.student in students], reports)
    run.class_submissions, run.files = write_course_grades(target, assignment, folder, opts.similar, opts.provisional)
    plot_scores(folder / "scores.png", run.class_submissions, assignment)
    run.published, run.csv_path, run.plot_path = target, folder / "grades.csv", folder / "scores.png"


@dataclass
class GradeRun:
    """What ``grade`` produced."""

    out: Path
    submissions: list[Submission]
    csv_path: Path
    plot_path: Path
    seconds: float
    published: Course | None = None
    """The course the grades went into (None: a dry run with ``out``)."""
    class_submissions: list[Submission] | None = None
    """Every student of the course gradebook after publishing, as ``grades.csv`` lists them (None: a dry run)."""
    resumed: list[str] | None = None
    """The students an interrupted run had finished, skipped by ``--resume``."""
    files: ClassFiles | None = None
    """What was written beside ``grades.csv``: the item analysis, the similarity report, the LMS's import files."""


@dataclass(frozen=True)
class GradeOptions:
    """``grade``'s options, fixed for the whole run: each the flag of the ``grade`` command of its name, which says
    what it does (:func:`.cli.add_arguments`), but ``echo`` (how lines print), ``progress`` (the display; default:
    plain lines through ``echo``) and ``names`` (``--lms`` and ``--roster`` read, :mod:`.lms`)."""

    jobs: int = 1
    out: str | Path | None = None
    source: str | Path | None = None
    course: str | Path | None = None
    timeout: int = DEFAULT_TIMEOUT
    sandbox: bool = True
    echo: Callable[..., None] = print
    resume: bool = False
    class_dir: str | Path | None = None
    progress: RunProgress | None = None
    scheduler: str | None = None
    names: Names | None = None
    similar: float = SIMILAR
    provisional: bool = False


def grade(path: str | Path, assignment: str = "reconcile", **options: Any) -> GradeRun:
    """Grade every submission under ``path`` (folder or zip) with :class:`GradeOptions`; the module docstring says how."""
    opts = GradeOptions(**options)
    started = time.monotonic()
    progress = opts.progress or RunProgress(opts.echo)
    path = Path(path)
    check_class(path)  # a missing or empty class is one line, before any work
    check_scheduler(opts.scheduler)  # before any work: an unreachable cluster is a one-line error
    src = find_source(assignment, opts.source, opts.course)
    course_roots = [COURSE_ROOT, Path(opts.course) if opts.course else COURSE_ROOT, src.parent.parent]
    target = None if opts.out else find_course(opts.course or COURSE_ROOT)
    if target:
        check_released(target, assignment)  # before any work: the fix is a release, not a re-run
    out = Path(opts.out) if opts.out else Path.cwd() / f"grading-{assignment}"
    work = prepare_out(out, course_roots, opts.resume)
    where = f"on the Dask cluster at {opts.scheduler}" if opts.scheduler else f"{opts.jobs} job(s)"
    progress.line(f"Grading {assignment!r} from {path} in {work} (timeout {opts.timeout} s, {where})")
    progress.step("checking the sandbox")
    execution = _execution(work, opts.sandbox, opts.echo)
    progress.step(f"releasing {assignment}")
    releases = cached_release(work, src, assignment, opts.timeout, execution)
    if target:
        check_released(target, assignment, work)
    progress.step("collecting the submissions")
    with unpacked(path) as root:
        subs = collect(root, assignment, sorted(releases), opts.names)
        subs = prepare(subs, work, assignment, releases)

    for sub in subs:
        if not sub.to_grade:
            progress.line(f"[skip] {sub.student}: {sub.reason}")
    to_grade = [s.student for s in subs if s.to_grade]
    reports = finished(work, assignment, to_grade) if opts.resume else {}
    if reports:
        progress.line(f"--resume: {len(reports)} student(s) already graded in {work}, skipped")
    remaining = [s for s in to_grade if s not in reports]
    progress.students(len(to_grade), len(reports))
    done = _students_done(work, assignment, len(to_grade), len(reports), progress)
    if opts.scheduler:
        reports.update(run_on_cluster(work, assignment, remaining, opts.scheduler, opts.timeout, done, execution))
    else:
        reports.update(run_workers(work, assignment, remaining, opts.jobs, opts.timeout, done, execution))
    reports = trusted_reports(work, reports)  # a report of no prepared id, or filed under another, is never graded
    run = _write_run(work, subs, reports, assignment, releases, bool(to_grade), progress, opts)
    run.resumed = sorted(set(reports) - set(remaining))
    if target:
        _publish(run, target, assignment, reports, progress, opts)
    run.seconds = time.monotonic() - started
    return run
