"""The ``grade`` and ``grades`` subcommands of ``python -m resumable_core``: their options and what they print."""

from __future__ import annotations

import argparse
import functools
import signal
import sys
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..assignments import ASSIGNMENTS
from ..errors import CourseConfigError
from ..nbgrader_cli import NbgraderError
from . import reasons
from .errors import GradingError
from .i18n import GRADING
from .steps.budget import DEFAULT_TIMEOUT
from .steps.collect import check_class
from .steps.lms import PARSERS, Names
from .steps.similarity import THRESHOLD as SIMILAR

INTERRUPTED = (
    "grade: interrupted; every sandbox of the run is stopped. "
    "The same command with --resume grades the students it did not finish."
)
"""The one line a Ctrl-C (exit code 130) or a SIGTERM (143) leaves, however far the run got."""


class _Terminated(KeyboardInterrupt):
    """SIGTERM, taken as a Ctrl-C is: the workers and their sandboxes stopped, nothing half-written, one line."""


def _terminate(signum: int, frame: object) -> None:
    raise _Terminated


if TYPE_CHECKING:  # course_grades loads nbgrader: only a run that writes the files imports it
    from .steps.course_grades import ClassFiles


def _class_options(p: argparse.ArgumentParser) -> None:
    """The options ``grade`` and ``grades`` share: which assignment of which course, what goes beside ``grades.csv``."""
    p.add_argument(
        "--assignment",
        default=ASSIGNMENTS[0],
        metavar="NAME",
        help=f"the assignment: this course has {', '.join(ASSIGNMENTS)} (default: {ASSIGNMENTS[0]})",
    )
    p.add_argument(
        "--course",
        help=(
            "the nbgrader course (the folder of its nbgrader_config.py) holding solutions/<assignment>, "
            "whose gradebook holds the grades (default: this repository)"
        ),
    )
    p.add_argument(
        "--similar",
        type=_share,
        default=SIMILAR,
        metavar="SHARE",
        help=f"list pairs of answers at least this alike (0 to 1) in similarity.html (default: {SIMILAR})",
    )
    p.add_argument(
        "--provisional",
        action="store_true",
        help=(
            "give the LMS import file the scores still waiting for manual grading, marked provisional "
            "(default: those students are left blank until they are graded)"
        ),
    )


def _share(text: str) -> float:
    """A share between 0 and 1, for argparse (its error names the option)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number between 0 and 1") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text} is not between 0 and 1")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "path", help="a folder or a zip: submitted/<student>/<assignment>/*.ipynb, or flat <student>.ipynb files"
    )
    _class_options(p)
    p.add_argument("--jobs", type=int, default=1, help="students graded in parallel (default: 1)")
    p.add_argument(
        "--scheduler",
        metavar="tcp://HOST:PORT",
        help="grade each student as a task on this Dask distributed cluster instead of --jobs local workers",
    )
    p.add_argument(
        "--out",
        help=(
            "a dry run in this working course folder: the course's gradebook is left alone "
            "(default: work in ./grading-<assignment>/, wiped if made by an earlier run, then publish into the course)"
        ),
    )
    p.add_argument(
        "--timeout",
        type=int,
        default=DEFAULT_TIMEOUT,
        help=f"seconds a cell may run before it is interrupted and scores 0 (default: {DEFAULT_TIMEOUT})",
    )
    p.add_argument(
        "--source", help="folder with the assignment's source notebooks (default: <course>/solutions/<assignment>)"
    )
    p.add_argument(
        "--lms",
        choices=sorted(PARSERS),
        help="the files are this LMS's download: read its names (and write its grade import file beside grades.csv)",
    )
    p.add_argument(
        "--roster",
        metavar="CSV",
        help="map the LMS's ids to the course's: a CSV with lms_id and student_id columns (unmapped files are refused)",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help=(
            "go on with an interrupted run: keep its working folder and skip the students it finished "
            "(their grades recorded whole, from the same submission); the others are graded"
        ),
    )
    p.add_argument(
        "--class-dir",
        metavar="DIR",
        help=(
            "where the whole class's grades.csv, scores.png, feedback pages, item analysis, similarity report "
            "and LMS import file are rebuilt from the course gradebook after publishing "
            "(default: ./grades-<assignment>/, as the grades command writes)"
        ),
    )
    p.add_argument(
        "--no-sandbox",
        action="store_true",
        help="run submissions without the bubblewrap sandbox (unsafe: they get your files, network and secrets)",
    )


def _(message: str) -> str:
    """The two lines `python -m resumable_core --help` shows a learner too, in now's language."""
    return GRADING.gettext(message)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``grade`` and ``grades`` to ``python -m resumable_core``'s subcommands (``subparsers`` from ``add_subparsers``)."""
    p = subparsers.add_parser(
        "grade",
        help=_("autograde a class's submissions with nbgrader, into the course's gradebook"),
        description=(
            "Autograde a class's submissions of one assignment with real nbgrader, each in a sandbox,\n"
            "re-check every test that scored in a fresh process, then put the grades and autograded\n"
            "notebooks into the course's gradebook (the one its nbgrader_config.py names) for\n"
            "formgrader, generate_feedback and export, and rebuild the whole class's grades.csv,\n"
            "feedback HTML and score plot from it: re-grading a few students keeps everyone else.\n"
            "With --out it is a dry run: the course is left alone, the files cover this run only."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(p)
    p.set_defaults(func=main)
    grades = subparsers.add_parser(
        "grades",
        help=_("write grades.csv and feedback pages from the course's gradebook, manual grades included"),
        description=(
            "Write one assignment's grades.csv (grade's columns) and each student's feedback page\n"
            "(no test code) from the course's gradebook, which it only reads: run it after manual\n"
            "grading in formgrader, and its scores agree with nbgrader export. Every student of the\n"
            "gradebook gets a row; the reason names the cells that lost points or wait for a human."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _class_options(grades)
    grades.add_argument(
        "--out",
        help=(
            "folder written: grades.csv, feedback-html/<student>.html, the item analysis, the similarity report "
            "and the LMS import file (default: ./grades-<assignment>/)"
        ),
    )
    grades.set_defaults(func=grades_main)
    return p


def grades_main(args: argparse.Namespace) -> int:
    """Run ``grades``: 0 once the CSV is written, 2 when the course or the assignment is not there."""
    from ..release import COURSE_ROOT, find_course  # imported here, as grade's pipeline: nbgrader loads only when used
    from .steps.course_grades import write_course_grades

    out = Path(args.out) if args.out else Path.cwd() / f"grades-{args.assignment}"
    try:
        course = find_course(args.course or COURSE_ROOT)
        subs, files = write_course_grades(course, args.assignment, out, args.similar, args.provisional)
    except (GradingError, CourseConfigError) as e:
        print(f"grades: {e}", file=sys.stderr)
        return 2
    print(f"{len(subs)} students' grades of {args.assignment} from the course gradebook")
    print(f"grades:   {out / 'grades.csv'}")
    print(f"feedback: {out / 'feedback-html'}/<student>.html")
    _print_files(files, args.similar)
    return 0


def _print_files(files: ClassFiles, similar: float) -> None:
    """The lines that name what a run wrote beside grades.csv: one a file, and who an import file leaves blank."""
    print(f"analysis: {files.analysis}")
    if files.similarity:
        print(f"similar:  {files.similarity} ({files.pairs} pair(s) at least {similar:.0%} alike)")
    for path in files.imports.paths:
        print(f"import:   {path}")
    if files.imports.waiting or files.imports.not_graded:
        print(f"          {reasons.import_left_blank(files.imports.waiting, files.imports.not_graded)}")


_echo = functools.partial(print, flush=True)  # progress lines show as each student ends


def main(args: argparse.Namespace) -> int:
    """Run ``grade``: 0 once the class is graded (broken submissions are reported, not fatal), 2 on a setup error,
    130 when interrupted (Ctrl-C), 143 when terminated (SIGTERM)."""
    from .progress import RunProgress

    if args.scheduler and args.jobs != 1:
        print(
            "grade: --jobs and --scheduler do not go together; the cluster's workers set the parallelism",
            file=sys.stderr,
        )
        return 2
    terminate = signal.signal(signal.SIGTERM, _terminate)
    try:
        names = Names.of(args.lms, args.roster)  # a bad roster is one line before any work
        check_class(Path(args.path))  # and so is a missing or empty class, before nbgrader's seconds of imports
        with RunProgress(_echo) as progress:  # the bar is up before nbgrader's seconds of imports
            progress.step("loading nbgrader")
            from .pipeline import GradeOptions, grade  # imported here: nbgrader loads only when a class is graded

            flags = {f.name: getattr(args, f.name) for f in fields(GradeOptions) if hasattr(args, f.name)}
            options = {**flags, "sandbox": not args.no_sandbox, "names": names, "echo": _echo, "progress": progress}
            run = grade(args.path, args.assignment, **options)
    except NbgraderError as e:
        print(f"grade: {e}\n{e.stderr}", file=sys.stderr)
        return 2
    except (GradingError, CourseConfigError) as e:
        print(f"grade: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:  # the workers and their sandboxes are stopped (:func:`.workers.run_workers`)
        print(INTERRUPTED, file=sys.stderr)
        return 128 + (signal.SIGTERM if isinstance(e, _Terminated) else signal.SIGINT)
    finally:
        signal.signal(signal.SIGTERM, terminate or signal.SIG_DFL)  # None: not set from Python
    from .steps.report import format_table

    shown = run.class_submissions if run.class_submissions is not None else run.submissions
    print()
    print(format_table(shown))
    print()
    n_bad = sum(1 for s in run.submissions if s.status != "graded")
    resumed = f" ({len(run.resumed)} finished by the interrupted run)" if run.resumed else ""
    print(f"{len(run.submissions)} submissions{resumed}, {n_bad} not graded normally, in {run.seconds:.0f} s")
    if run.class_submissions is not None:
        print(f"class:    {len(run.class_submissions)} students of the course gradebook")
    print(f"grades:   {run.csv_path}")
    print(f"feedback: {run.csv_path.parent / 'feedback-html'}/<student>.html")
    print(f"plot:     {run.plot_path}")
    if run.files:
        _print_files(run.files, args.similar)
    print(f"course:   {run.published.shown_url if run.published else 'left alone (--out: a dry run)'}")
    return 0
