"""Command line: ``python -m resumable_core matrix|simulate|fixtures|grade``."""

from __future__ import annotations

import argparse
import sys

from .crash import CRASH_POINTS


def _matrix(args: argparse.Namespace) -> int:
    from .lab.matrix import MATRIX_STRATEGIES, format_table, rows_json, run_matrix

    strategies = args.strategy or list(MATRIX_STRATEGIES)
    rows = run_matrix(strategies=strategies, tools=args.tool or ("read_file", "send_email"))
    print(rows_json(rows) if args.format == "json" else format_table(rows))
    return 0


def _simulate(args: argparse.Namespace) -> int:
    from .lab.matrix import run_cell

    print(run_cell(args.crash_at, args.tool, args.strategy).story())
    return 0


def _fixtures(args: argparse.Namespace) -> int:
    from .lab.exercise_checkpoints import write_exercise_checkpoints

    for path in write_exercise_checkpoints(args.out):
        print(path)
    return 0


def _grade(args: argparse.Namespace) -> int:
    from .course.grading.pipeline import main as grade_main

    return grade_main(args)


def build_parser() -> argparse.ArgumentParser:
    """The CLI's argument parser."""
    from .strategies import STRATEGIES

    p = argparse.ArgumentParser(prog="python -m resumable_core", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    m = sub.add_parser("matrix", help="crash every point x tool x strategy for real and tabulate")
    m.add_argument("--format", choices=("table", "json"), default="table")
    m.add_argument("--strategy", action="append", choices=sorted(STRATEGIES), help="repeatable; default: all four")
    m.add_argument("--tool", action="append", choices=("read_file", "send_email"), help="repeatable; default: both")
    m.set_defaults(func=_matrix)

    s = sub.add_parser("simulate", help="crash one run and tell what the resume did")
    s.add_argument("--crash-at", required=True, choices=CRASH_POINTS)
    s.add_argument("--tool", required=True, choices=("read_file", "send_email"))
    s.add_argument("--strategy", required=True, choices=sorted(STRATEGIES))
    s.set_defaults(func=_simulate)

    f = sub.add_parser("fixtures", help="regenerate the exercise checkpoints A, B and C")
    f.add_argument("--out", default=None, help="folder (default: the package's fixtures)")
    f.set_defaults(func=_fixtures)

    from .course.grading.pipeline import add_arguments

    g = sub.add_parser("grade", help="autograde a class's submissions with nbgrader")
    add_arguments(g)
    g.set_defaults(func=_grade)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
