"""The learner's commands' parsers, in the learner's language: argparse's own words through the lab's catalog.

argparse writes its own words ("usage: ", "options", "show this help message and exit", its
error messages) through the process's global gettext domain, which holds no Korean. Rather than
rebinding that domain for the whole process, a learner's command is a :class:`Parser` with the
:class:`Formatter`: the formatter translates argparse's words as it writes the help and wraps it
by display width (:mod:`.columns`), and the parser translates argparse's error messages. Each
command translates its own texts with its wing's `_` when its parser is built. A parser with
another formatter (the instructor's commands) stays as argparse writes it, errors included.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any, NoReturn

from . import columns
from .i18n import N_, _

__all__ = ["Formatter", "Parser"]

#: argparse's words in a learner's help, as it writes them (its message ids).
HELP_WORDS = frozenset({N_("positional arguments"), N_("options"), N_("show this help message and exit")})

#: argparse's error messages a learner can meet, as it writes them; a `message` field is itself one of them.
ERRORS = (
    N_("argument %(argument_name)s: %(message)s"),
    N_("the following arguments are required: %s"),
    N_("unrecognized arguments: %s"),
    N_("invalid choice: %(value)r (choose from %(choices)s)"),
    N_("invalid %(type)s value: %(value)r"),
    N_("expected one argument"),
    N_("ambiguous option: %(option)s could match %(matches)s"),
)

#: A %-field of argparse's messages: `%(name)s`, `%(name)r` or a bare `%s`.
FIELD = re.compile(r"%(?:\((\w+)\))?[sr]")


class Formatter(argparse.RawDescriptionHelpFormatter):
    """argparse's help with its own words in now's language, help texts wrapped by display width.

    Descriptions and epilogs are kept as written (each command wraps its own), as
    :class:`argparse.RawDescriptionHelpFormatter` keeps them.
    """

    def add_usage(self, usage: Any, actions: Any, groups: Any, prefix: str | None = None) -> None:
        super().add_usage(usage, actions, groups, _("usage: ") if prefix is None else prefix)

    def _format_usage(self, usage: Any, actions: Any, groups: Any, prefix: str | None) -> str:
        # argparse measures the prefix in characters; "사용법: " takes 3 columns more than it has characters.
        extra = columns.width(prefix or "") - len(prefix or "")
        self._width -= extra  # so the usage wraps where it ends on screen
        try:
            text = super()._format_usage(usage, actions, groups, prefix)
        finally:
            self._width += extra
        first, *rest = text.split("\n")
        return "\n".join([first, *(" " * extra + line if line else line for line in rest)])

    def start_section(self, heading: str | None) -> None:
        super().start_section(_(heading) if heading in HELP_WORDS else heading)

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = super()._get_help_string(action)
        return _(text) if text in HELP_WORDS else text

    def _split_lines(self, text: str, width: int) -> list[str]:
        # argparse's own, but measured in terminal columns: a Korean help is wrapped where it ends on screen.
        return columns.wrap(self._whitespace_matcher.sub(" ", text).strip(), width)


class Parser(argparse.ArgumentParser):
    """An `ArgumentParser` whose help is written by :class:`Formatter` unless told otherwise, and whose
    error messages are in now's language when it is."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        """argparse's `error`: the usage and one line naming the problem, exit code 2; in now's language."""
        if not isinstance(self._get_formatter(), Formatter):
            super().error(message)
        self.print_usage(sys.stderr)
        self.exit(2, _("{prog}: error: {message}").format(prog=self.prog, message=translated(message)) + "\n")


def translated(message: str) -> str:
    """An error message argparse wrote, in now's language (as it is when it is none of :data:`ERRORS`)."""
    found = next(((t, m) for t in ERRORS if (m := _pattern(t).fullmatch(message))), None)
    if found is None:
        return message
    template, match = found
    values = match.groupdict()
    if "message" in values:
        values["message"] = translated(values["message"])
    unnamed = iter(name for name in _group_names(template) if name.startswith("_"))
    return FIELD.sub(lambda field: values[field.group(1) or next(unnamed)], _(template))


def _group_names(template: str) -> list[str]:
    """Each field's group in :func:`_pattern`: its name, or ``_<n>`` for the n-th bare ``%s``."""
    names, unnamed = [], 0
    for field in FIELD.finditer(template):
        names.append(field.group(1) or f"_{unnamed}")
        unnamed += field.group(1) is None
    return names


def _pattern(template: str) -> re.Pattern[str]:
    """A pattern that reads back what argparse filled into ``template``."""
    literals = FIELD.split(template)[::2]  # split also yields each field's name; the literals are every other item
    groups = [f"(?P<{name}>.*?)" for name in _group_names(template)]
    return re.compile("".join(re.escape(text) + group for text, group in zip(literals, [*groups, ""])), re.DOTALL)
