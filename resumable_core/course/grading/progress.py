"""What ``grade`` shows while it runs: a ``rich`` progress bar on a terminal, the same lines plain anywhere else."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import TracebackType
from typing import Any, TextIO

REASON_WIDTH = 100
"""Characters of a reason shown in the summary table; grades.csv keeps the whole text."""


def cut(text: str, width: int = REASON_WIDTH) -> str:
    """``text`` on at most ``width`` characters, a cut one ending in "…"."""
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


class RunProgress:
    """The run's progress display; use it as a context manager (the bar stops on exit)."""

    def __init__(self, echo: Callable[..., None] = print, stream: TextIO | None = None) -> None:
        """``echo`` prints the plain lines; ``stream`` (default stdout) decides whether a bar is drawn: a terminal only."""
        self.echo = echo
        stream = stream if stream is not None else sys.stdout
        self._bar: Any = None
        self._task: Any = None
        if stream.isatty():
            from rich import progress as rp
            from rich.console import Console

            columns = (rp.TextColumn("{task.description}"), rp.BarColumn(), rp.MofNCompleteColumn())
            clocks = (rp.TextColumn("elapsed"), rp.TimeElapsedColumn(), rp.TextColumn("ETA"), rp.TimeRemainingColumn())
            self._bar = rp.Progress(
                rp.SpinnerColumn(), *columns, *clocks, console=Console(file=stream), transient=False
            )
            self._task = self._bar.add_task("starting", total=None)
            self._bar.start()

    @property
    def drawn(self) -> bool:
        return self._bar is not None

    def step(self, what: str) -> None:
        """The step under way (releasing, collecting...): the bar's label, or a plain line."""
        if self._bar is not None:
            self._bar.update(self._task, description=what)
        else:
            self.echo(f"{what}...", flush=True)

    def students(self, total: int, done: int = 0) -> None:
        """From now on the bar counts ``total`` students, ``done`` of them already graded (a resumed run)."""
        if self._bar is not None:
            self._bar.reset(self._task, total=total, completed=done, description="grading")

    def line(self, text: str, advance: bool = False) -> None:
        """One short line (a student done, a skip); ``advance``: one more student done."""
        if self._bar is not None:
            self._bar.console.print(text, markup=False, highlight=False)
            if advance:
                self._bar.advance(self._task)
        else:
            self.echo(text, flush=True)

    def close(self) -> None:
        """Stop the bar (idempotent)."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def __enter__(self) -> RunProgress:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
