"""The ``grade`` subcommand of ``python -m resumable_core``: its options and what it prints."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..assignments import ASSIGNMENTS
from ..nbgrader_cli import NbgraderError
from .workspace import DEFAULT_TIMEOUT, GradingError


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``grade`` subcommand's options."""
    p.add_argument(
        "path", help="a folder or a zip: submitted/<student>/<assignment>/*.ipynb, or flat <student>.ipynb files"
    )
    p.add_argument(
        "--assignment",
        default=ASSIGNMENTS[0],
        metavar="NAME",
        help=f"the assignment graded: this course has {', '.join(ASSIGNMENTS)} (default: {ASSIGNMENTS[0]})",
    )
    p.add_argument("--jobs", type=int, default=1, help="students graded in parallel (default: 1)")
    p.add_argument(
        "--out",
        default=None,
        help="working course folder (default: ./grading-<assignment>/, wiped if made by an earlier run)",
    )
    p.add_argument(
        "--timeout",
        type=int,
        default=DEFAULT_TIMEOUT,
        help=f"seconds a cell may run before it is interrupted and scores 0 (default: {DEFAULT_TIMEOUT})",
    )
    p.add_argument(
        "--source",
        default=None,
        help="folder with the assignment's source notebooks (default: <course>/solutions/<assignment>)",
    )
    p.add_argument(
        "--course", default=None, help="course root holding solutions/<assignment> (default: this repository)"
    )
    p.add_argument(
        "--no-sandbox",
        action="store_true",
        help="run submissions without the bubblewrap sandbox (unsafe: they get your files, network and secrets)",
    )


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``grade`` to ``python -m resumable_core``'s subcommands (``subparsers`` from ``add_subparsers``)."""
    p = subparsers.add_parser(
        "grade",
        help="autograde a class's submissions with nbgrader",
        description=(
            "Autograde a class's submissions of one assignment with real nbgrader, re-check every test\n"
            "that scored in a fresh process, and write grades.csv, feedback HTML and a score plot."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(p)
    p.set_defaults(func=main)
    return p


def _echo(*args: Any, flush: bool = False, **kwargs: Any) -> None:
    """print, always flushed: progress lines show as each student ends."""
    print(*args, flush=True, **kwargs)


def main(args: argparse.Namespace) -> int:
    """Run ``grade``: 0 once the class is graded (broken submissions are reported, not fatal), 2 on a setup error."""
    from .pipeline import grade  # imported here: nbgrader loads only when a class is graded
    from .report import format_table

    try:
        run = grade(
            args.path,
            args.assignment,
            jobs=args.jobs,
            out=args.out,
            source=args.source,
            course=args.course,
            timeout=args.timeout,
            sandbox=not args.no_sandbox,
            echo=_echo,
        )
    except NbgraderError as e:
        print(f"grade: {e}\n{e.stderr}", file=sys.stderr)
        return 2
    except GradingError as e:
        print(f"grade: {e}", file=sys.stderr)
        return 2
    print()
    print(format_table(run.submissions))
    print()
    n_bad = sum(1 for s in run.submissions if s.status != "graded")
    print(f"{len(run.submissions)} submissions, {n_bad} not graded normally, in {run.seconds:.0f} s")
    print(f"grades:   {run.csv_path}")
    print(f"feedback: {run.out / 'feedback-html'}/<student>.html")
    print(f"plot:     {run.plot_path}")
    return 0
