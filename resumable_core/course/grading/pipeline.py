"""Grade a whole class with real nbgrader: ``python -m resumable_core grade PATH --assignment A``.

:func:`grade` runs the steps, each a module of this package, in a fresh working course folder
(``./grading-<assignment>/`` or ``--out``), then publish into the course:

1. :mod:`.workspace`: make the working course, release the assignment there (which fills its
   gradebook with the test cells, hidden tests included); :mod:`.isolation`: check that bubblewrap
   runs (``grade`` refuses to go on without it unless ``--no-sandbox``) and make the pristine copy
   of the library every sandbox sees, before the first student;
2. :mod:`.collect`: find the submissions (a folder or a zip; nbgrader's ``submitted/`` layout or
   flat ``<student>.ipynb`` files);
3. :mod:`.prepare`: refuse what is not a notebook, put back deleted cells, flag monkeypatching;
4. :mod:`.workers`: autograde in ``--jobs`` worker copies of the course (every notebook in the
   sandbox, :mod:`.execute`), re-check in the sandbox every test cell that scored, make the feedback;
   or, with ``--scheduler``, the same for each student as a task on a Dask cluster (:mod:`.cluster`);
5. :mod:`.merge`: merge the workers' grades into the working gradebook, copy their outputs back;
6. :mod:`.report`: say why each student lost points, write ``grades.csv`` and ``scores.png``
   (and nbgrader's own export and ``feedback-html/<student>.html``);
7. :mod:`.publish`: unless ``--out`` was given (a dry run: the course is left alone), write the
   students, their grades and ``autograded/`` into the course's own gradebook (the one its
   ``nbgrader_config.py`` names), for formgrader, ``generate_feedback`` and ``export``. Whether the
   assignment is released there is checked before the first student runs.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..nbgrader_cli import nbgrader
from ..release import COURSE_ROOT
from . import analysis
from .cluster import check_scheduler, run_on_cluster
from .collect import check_id, collect, unpacked
from .course_grades import course_outcomes
from .errors import GradingError, StudentIdError
from .isolation import library_copy, make_backend
from .lms import Names, write_imports
from .merge import copy_feedback_html, merge, set_scores
from .model import Submission
from .prepare import prepare
from .publish import Course, check_released, find_course, publish
from .report import explain, plot_scores, write_csv
from .similarity import THRESHOLD as SIMILAR
from .similarity import class_similarity
from .workers import Progress, run_workers
from .workspace import DEFAULT_TIMEOUT, Execution, find_source, prepare_out, release_assignment

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
        try:
            ids.append(check_id(sub.student))
        except StudentIdError:
            continue
    return ids


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


def _write_class_files(
    work: Path,
    subs: list[Submission],
    assignment: str,
    releases: dict[str, Any],
    names: Names | None,
    similar: float,
) -> None:
    """nbgrader's export, the feedback pages, ``grades.csv``, the plot, the LMS's import file, item analysis, similarity."""
    n_notebooks = len(releases)
    if any(s.to_grade for s in subs):
        nbgrader(["export", "--to", str(work / "nbgrader-export.csv")], work, check=False)
    copy_feedback_html(work, subs, assignment, n_notebooks)
    write_csv(work / "grades.csv", subs)
    plot_scores(work / "scores.png", subs, assignment)
    write_imports(work, names, assignment, subs)
    analysis.write(work, course_outcomes(find_course(work), assignment), assignment)
    first = min(releases)
    files = {s.student: work / "submitted" / s.student / assignment / f"{first}.ipynb" for s in subs if s.to_grade}
    class_similarity(work, {s: f for s, f in files.items() if f.is_file()}, releases, assignment, similar)


def grade(
    path: str | Path,
    assignment: str = "reconcile",
    *,
    jobs: int = 1,
    out: str | Path | None = None,
    source: str | Path | None = None,
    course: str | Path | None = None,
    timeout: int = DEFAULT_TIMEOUT,
    sandbox: bool = True,
    scheduler: str | None = None,
    names: Names | None = None,
    similar: float = SIMILAR,
    echo: Callable[..., None] = print,
) -> GradeRun:
    """Grade every submission under ``path`` (folder or zip); see the module docstring for the steps.

    ``scheduler``: a Dask scheduler's address; each student is then graded as a task on its cluster.
    ``names``: the files are an LMS's download, its ids mapped by a roster (:mod:`.lms`); its grade
    import file is written beside ``grades.csv``. ``similar``: the share of alike code from which a pair
    of answers is listed in ``similarity.html``.
    """
    started = time.monotonic()
    path = Path(path)
    if not path.exists():
        raise GradingError(f"{path} does not exist; pass the class's folder or zip")
    check_scheduler(scheduler)  # before any work: an unreachable cluster is a one-line error
    src = find_source(assignment, source, course)
    course_roots = [COURSE_ROOT, Path(course) if course else COURSE_ROOT, src.parent.parent]
    target = None if out else find_course(course or COURSE_ROOT)
    if target:
        check_released(target, assignment)  # before any work: the fix is a release, not a re-run
    work = prepare_out(Path(out) if out else Path.cwd() / f"grading-{assignment}", course_roots)
    echo(
        f"Grading {assignment!r} from {path} in {work} (timeout {timeout} s, "
        + (f"on the Dask cluster at {scheduler})" if scheduler else f"{jobs} job(s))")
    )
    execution = _execution(work, sandbox, echo)
    releases = release_assignment(work, src, assignment, timeout, execution)
    if target:
        check_released(target, assignment, work)
    with unpacked(path) as root:
        subs = collect(root, assignment, sorted(releases), names)
        prepare(subs, work, assignment, releases)

    for sub in subs:
        if not sub.to_grade:
            echo(f"[skip] {sub.student}: {sub.reason}", flush=True)
    to_grade = [s.student for s in subs if s.to_grade]
    progress = Progress(len(to_grade), assignment, echo)
    if scheduler:
        reports = run_on_cluster(work, assignment, to_grade, scheduler, timeout, progress, execution)
    else:
        reports = run_workers(work, assignment, to_grade, jobs, timeout, progress, execution)
    merge(work, assignment, reports)
    by_id = {s.student: s for s in subs}
    for student, report in sorted(reports.items()):
        if student in by_id:  # reports are read by the ids given out; anything else is never graded
            explain(by_id[student], report, work, assignment, timeout)
    set_scores(subs, work, assignment)

    _write_class_files(work, subs, assignment, releases, names, similar)
    shutil.rmtree(work / "workers", ignore_errors=True)
    shutil.rmtree(work / "sandbox-lib", ignore_errors=True)
    if target:
        students = _student_ids(subs)
        publish(target, work, assignment, students)
        echo(f"Published {len(students)} student(s) into the course gradebook {target.shown_url}", flush=True)
    seconds = time.monotonic() - started
    return GradeRun(work, subs, work / "grades.csv", work / "scores.png", seconds, target)
