"""Real crashes: a forked child killed with SIGKILL at a named point of the loop."""

from __future__ import annotations

import os
import signal
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .errors import CrashError

CRASH_POINTS: tuple[str, ...] = (
    "before_model_call",
    "after_response",
    "during_save_a",
    "after_save_a",
    "after_tool",
    "during_save_b",
    "after_save_b",
)
"""Every boundary of one turn, in order. ``after_tool`` is the postmortem's crash."""

CRASH_POINT_HELP = {
    "before_model_call": "before the model call",
    "after_response": "after the model's response, before save point A",
    "during_save_a": "during save point A (half a temp file on disk)",
    "after_save_a": "after save point A, before the tool runs",
    "after_tool": "after the tool ran, before save point B",
    "during_save_b": "during save point B (half a temp file on disk)",
    "after_save_b": "after save point B",
}


@dataclass(frozen=True)
class CrashPlan:
    """Where to die: a crash point, on the turn that calls ``tool`` (or on turn ``turn``)."""

    point: str
    tool: str | None = None
    turn: int | None = None

    def __post_init__(self) -> None:
        if self.point not in CRASH_POINTS:
            raise ValueError(f"unknown crash point {self.point!r}; one of {', '.join(CRASH_POINTS)}")

    def matches(self, point: str, turn: int, tool: str | None) -> bool:
        """True at the planned point of the planned turn."""
        if point != self.point:
            return False
        if self.turn is not None and turn != self.turn:
            return False
        if self.tool is not None and point != "before_model_call" and tool != self.tool:
            return False
        return True


def kill_self() -> None:
    """Die now, as the OOM killer would: SIGKILL, no cleanup, no finally blocks."""
    os.kill(os.getpid(), signal.SIGKILL)
    signal.pause()  # pragma: no cover - never reached


def run_and_kill_after(fn: Callable[[], object], delay: float) -> str:
    """Run ``fn`` in a forked child and SIGKILL it from here after ``delay`` seconds.

    Returns "killed", or "exited" when ``fn`` finished first. A child that fails raises CrashError.
    """
    pid = os.fork()
    if pid == 0:  # child: never returns into the caller's code
        code = 0
        try:
            fn()
        except BaseException:  # noqa: BLE001
            code = 1
        os._exit(code)
    time.sleep(delay)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return "killed"
    if os.WEXITSTATUS(status) != 0:
        raise CrashError("the run failed on its own before the kill")
    return "exited"


def run_in_child(fn: Callable[[], object], error_file: str | Path) -> str:
    """Run ``fn`` in a forked child and report how it ended: "killed", "exited" or "failed".

    The child never returns into the caller's code (it always leaves with ``os._exit``), so a
    notebook kernel that calls this is never the process that dies.
    """
    error_file = Path(error_file)
    pid = os.fork()
    if pid == 0:  # child
        code = 0
        try:
            fn()
        except BaseException:  # noqa: BLE001 - report anything to the parent, then leave
            try:
                error_file.write_text(traceback.format_exc())
            finally:
                code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        if os.WTERMSIG(status) != signal.SIGKILL:
            raise CrashError(f"child died of signal {os.WTERMSIG(status)}, not SIGKILL")
        return "killed"
    if os.WEXITSTATUS(status) != 0:
        detail = error_file.read_text() if error_file.exists() else "(no traceback)"
        raise CrashError(f"the crashing run failed before its crash point:\n{detail}")
    return "exited"
