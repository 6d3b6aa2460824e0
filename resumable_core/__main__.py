"""python -m resumable_core: the wings' commands, put together.

The lab's matrix, simulate and fixtures, the learner's check, and the instructor's grade. A wing
whose module this install does not hold (the student kit has no grading) offers no command.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

with contextlib.suppress(ImportError):  # the student kit has no course.hidden: none, delete, rerun only
    import resumable_core.course.hidden.strategies  # noqa: F401 - imported to register by_effect(_ledger)


@dataclass(frozen=True)
class Wing:
    """A wing whose module adds its subcommands with ``hook(sub)``, each setting ``func(args) -> int``."""

    extra: str
    """The pip extra that installs the wing's dependencies."""
    module: str
    hook: str
    commands: tuple[str, ...]
    """Its subcommands, offered even when the extra is missing (they then say what to install)."""


WINGS = (
    Wing("lab", "resumable_core.lab.cli", "add_parsers", ("matrix", "simulate", "fixtures")),
    # check needs nbclient and nbformat, which the [lab] extra installs; it ships in the student kit
    Wing("lab", "resumable_core.course.self_check", "add_parser", ("check",)),
    Wing("course", "resumable_core.course.grading.cli", "add_parser", ("grade", "grades")),
)


def _not_shipped(error: ModuleNotFoundError, wing: Wing) -> bool:
    """The wing's own module is not in this install (the student kit holds no grading)."""
    name = error.name or ""
    return name.startswith("resumable_core") and (wing.module == name or wing.module.startswith(f"{name}."))


def _missing_dependency(error: ModuleNotFoundError) -> bool:
    """The import failed on a third-party module (an extra not installed), not on the kit itself."""
    return not (error.name or "resumable_core").startswith("resumable_core")


def _distribution() -> str:
    """The name this install of ``resumable_core`` goes by (the repository's, or the student kit's)."""
    from importlib.metadata import packages_distributions

    return (packages_distributions().get("resumable_core") or ["resumable-core"])[0]


def _install_hint(extra: str, missing: str | None) -> str:
    package = (missing or "a dependency").split(".")[0]
    return (
        f"this command needs the [{extra}] extra ({package} is not installed): pip install '{_distribution()}[{extra}]'"
    )


def _add_wing(sub: Any, wing: Wing) -> None:
    """The wing's subcommands; if its extra is missing, stand-ins that print what to install."""
    try:
        hook = getattr(importlib.import_module(wing.module), wing.hook)
    except ModuleNotFoundError as e:
        if _not_shipped(e, wing):
            return
        if not _missing_dependency(e):
            raise
        hint = _install_hint(wing.extra, e.name)
        for command in wing.commands:
            p = sub.add_parser(command, help=f"(needs the [{wing.extra}] extra)", add_help=False)
            p.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
            p.set_defaults(func=lambda _args, hint=hint: _fail(hint), extra=wing.extra)
        return
    known = set(sub.choices)
    hook(sub)
    for command in set(sub.choices) - known:
        sub.choices[command].set_defaults(extra=wing.extra)


def _fail(message: str) -> int:
    print(message, file=sys.stderr)
    return 1


def _language() -> tuple[type[argparse.ArgumentParser], Callable[[str], str]]:
    """The lab's parser and its catalog's `_` (the learner's language); without the lab wing, argparse's, in English."""
    try:
        from resumable_core.lab.commandline import Parser
        from resumable_core.lab.i18n import _
    except ModuleNotFoundError as e:
        if not _missing_dependency(e):
            raise
        return argparse.ArgumentParser, str
    return Parser, _


def build_parser() -> argparse.ArgumentParser:
    """The CLI's argument parser, one subcommand per wing command; the subcommands' parsers are of its class."""
    parser_class, _ = _language()  # this file's sentences are in the lab's catalog
    p = parser_class(
        prog="python -m resumable_core",
        description=_("Resumable Agents: crash and resume agent runs, check an exercise, grade a class."),
        epilog=_("Each command's options: python -m resumable_core COMMAND --help"),
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="command")
    for wing in WINGS:
        _add_wing(sub, wing)
    return p


def _language_refused() -> str | None:
    """Why the language asked for cannot be spoken (one line naming the fix), or None: checked once, before any word."""
    try:
        from resumable_core.lab.i18n import LanguageError, language
    except ModuleNotFoundError as e:
        if not _missing_dependency(e):
            raise
        return None  # without the lab wing everything is English
    try:
        language()
    except LanguageError as e:
        return str(e)
    return None


def main(argv: list[str] | None = None) -> int:
    """Entry point: the command's exit code."""
    if refused := _language_refused():  # in English: the language to say it in is what is wrong
        print(f"python -m resumable_core: error: {refused}", file=sys.stderr)
        return 2
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except ModuleNotFoundError as e:  # a wing that imports its dependencies only when a command runs
        if not _missing_dependency(e):
            raise
        return _fail(_install_hint(args.extra, e.name))
    return code


if __name__ == "__main__":
    sys.exit(main())
