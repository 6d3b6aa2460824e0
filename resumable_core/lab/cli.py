"""The lab wing's commands: ``matrix``, ``simulate`` and ``fixtures``.

:func:`add_parsers` adds them to ``python -m resumable_core``. Every choice and its help is read
from the registries (scenarios, crash points, strategies) when the parser is built, so a strategy
registered at runtime is a valid ``--strategy`` at once.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from ..crash import CRASH_POINT_HELP, CRASH_POINTS
from ..loop import MAX_TURNS
from ..scenarios import SCENARIOS, one_call_scenarios
from ..strategies import STRATEGIES, matrix_strategies
from .columns import pad
from .commandline import Formatter
from .core_words import core
from .exercise_checkpoints import FIXTURE_DIR, NAMES, write_exercise_checkpoints
from .i18n import _
from .matrix import format_table, rows_json, run_cell, run_matrix
from .resumers import crash_loop, race_resumers


def _listed(names: Sequence[str]) -> str:
    """``a, b and c``: names in a sentence, read from a registry so the count cannot go stale."""
    if len(names) < 2:
        return "".join(names)
    return _("{first} and {last}").format(first=", ".join(names[:-1]), last=names[-1])


def _choices(title: str, helps: dict[str, str]) -> str:
    """An epilog section: each choice and its one-line help (the core's, in now's language)."""
    width = max(map(len, helps))
    return "\n".join([f"{title}:", *(f"  {pad(name, width)}  {core(text)}" for name, text in helps.items())])


def _epilog(*, crash_points: bool = False) -> str:
    scenarios = {k: s.help for k, s in SCENARIOS.items()}
    sections = [_choices(_("scenarios (by the tools of the turn that is crashed)"), scenarios)]
    if crash_points:
        sections.append(_choices(_("crash points (where the run dies)"), CRASH_POINT_HELP))
    sections.append(_choices(_("strategies"), {k: s.help for k, s in STRATEGIES.items()}))
    return "\n\n".join(sections)


def _count(least: int) -> Callable[[str], int]:
    """An option's type: a whole number of at least ``least``; argparse names the option with the refusal."""

    def count(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = least - 1
        if value < least:
            raise argparse.ArgumentTypeError(
                _("{value} is not a whole number of at least {least}").format(value=repr(text), least=least)
            )
        return value

    return count


def _command(sub: Any, name: str, help: str, description: str, epilog: str = "") -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        name, help=help, description=description, epilog=epilog, formatter_class=Formatter
    )
    return parser


def _matrix(args: argparse.Namespace) -> int:
    rows = run_matrix(strategies=args.strategy, scenarios=args.scenario)
    print(rows_json(rows) if args.format == "json" else format_table(rows))
    return 0


def _add_matrix(sub: Any) -> None:
    p = _command(
        sub,
        "matrix",
        _("crash every crash point x scenario x strategy for real and tabulate"),
        _(
            "Crash a real run at every crash point of every scenario, resume it with each\n"
            "strategy, and print one row per cell. A parallel turn's scenario\n"
            "(--scenario send_email+read_file) adds the point between its tools."
        ),
        _epilog(),
    )
    p.add_argument(
        "--format",
        choices=("table", "json"),
        default="table",
        help=_("output format (default: {default})").format(default="table"),
    )
    p.add_argument(
        "--strategy",
        action="append",
        choices=list(STRATEGIES),
        metavar="STRATEGY",
        help=_("a strategy below to resume with; repeatable (default: {default})").format(
            default=", ".join(matrix_strategies())
        ),
    )
    p.add_argument(
        "--scenario",
        "--tool",
        dest="scenario",
        action="append",
        choices=list(SCENARIOS),
        metavar="SCENARIO",
        help=_("a scenario below to crash; repeatable (default: {default})").format(
            default=", ".join(one_call_scenarios())
        ),
    )
    p.set_defaults(func=_matrix)


def _simulate(args: argparse.Namespace) -> int:
    out: Any
    if args.crashes:  # the crash loop: the run restarted and killed at the same point again and again
        out = crash_loop(args.crash_at, args.scenario or "read_file", crashes=args.crashes, max_turns=args.max_turns)
    elif args.scenario is None or args.strategy is None:
        args.error(_("--scenario and --strategy are required (except with --crashes)"))
    elif args.resumers == 1 and args.format == "text":
        out = run_cell(args.crash_at, args.scenario, args.strategy)
    else:  # several resumers of the crashed run at once, or one, as JSON
        out = race_resumers(args.crash_at, args.scenario, args.strategy, args.resumers)
    print(out.to_json() if args.format == "json" else out.story())
    return 0


def _add_simulate(sub: Any) -> None:
    p = _command(
        sub,
        "simulate",
        _("crash one run and tell what the resume did"),
        _("Crash one real run at a crash point, resume it with a strategy, and tell what\nhappened."),
        _epilog(crash_points=True),
    )
    p.add_argument(
        "--crash-at", required=True, choices=CRASH_POINTS, metavar="POINT", help=_("the crash point below (required)")
    )
    p.add_argument(
        "--scenario",
        "--tool",
        dest="scenario",
        choices=list(SCENARIOS),
        metavar="SCENARIO",
        help=_("the scenario below to crash (required but with --crashes)"),
    )
    p.add_argument(
        "--strategy",
        choices=list(STRATEGIES),
        metavar="STRATEGY",
        help=_("the strategy below (required but with --crashes)"),
    )
    p.add_argument(
        "--resumers",
        type=_count(1),
        default=1,
        help=_("resumers of the crashed run started at once (default: {default})").format(default=1),
    )
    p.add_argument(
        "--crashes",
        type=_count(0),
        default=0,
        help=_("restart the run this many times, each killed at POINT (default: 0, one crash and one resume)"),
    )
    p.add_argument(
        "--max-turns",
        type=_count(1),
        default=MAX_TURNS,
        help=_("the turn cap (default: {default})").format(default=MAX_TURNS),
    )
    p.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help=_("output format (default: {default})").format(default="text"),
    )
    p.set_defaults(func=_simulate, error=p.error)


def _fixtures(args: argparse.Namespace) -> int:
    try:
        paths = write_exercise_checkpoints(args.out)
    except OSError as e:  # a folder that cannot be made or written: one line, not a traceback
        why = _("cannot write to {folder}: {why}").format(folder=e.filename or args.out, why=e.strerror or e)
        print(_("{prog}: error: {message}").format(prog=args.prog, message=why), file=sys.stderr)
        return 1
    for path in paths:
        print(path)
    return 0


def _add_fixtures(sub: Any) -> None:
    p = _command(
        sub,
        "fixtures",
        _("regenerate the exercise checkpoints {names}").format(names=_listed(NAMES)),
        _(
            "Crash the scenarios for real and write the exercise checkpoints {names}\n"
            "as checkpoint_<name>.json files into --out."
        ).format(names=_listed(NAMES)),
    )
    p.add_argument(
        "--out", default=None, help=_("folder to write them to (default: {default})").format(default=FIXTURE_DIR)
    )
    p.set_defaults(func=_fixtures, prog=p.prog)


def add_parsers(sub: Any) -> None:
    """Add ``matrix``, ``simulate`` and ``fixtures`` to the subcommands ``sub`` (``add_subparsers()``)."""
    _add_matrix(sub)
    _add_simulate(sub)
    _add_fixtures(sub)
