"""Real crashes: a forked child killed with SIGKILL at a named point of the loop."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass

from .errors import CrashError, UnknownCrashPointError

CRASH_POINTS: tuple[str, ...] = (
    "before_model_call",
    "after_response",
    "during_save_a",
    "after_save_a",
    "after_tool",
    "during_save_b",
    "between_tools",
    "after_save_b",
)
"""Every boundary of one turn, in order. ``after_tool`` is the postmortem's crash.

A turn that asks for several tools passes ``after_tool`` and ``during_save_b`` once per call,
``between_tools`` after each save point B but the last, and ``after_save_b`` once, at its end.
With ``tool``, a plan dies at the first call of that tool in the turn."""

CRASH_POINT_HELP = {
    "before_model_call": "before the model call",
    "after_response": "after the model's response, before save point A",
    "during_save_a": "during save point A (half a temp file on disk)",
    "after_save_a": "after save point A, before the tool runs",
    "after_tool": "after the tool ran, before save point B",
    "during_save_b": "during save point B (half a temp file on disk)",
    "between_tools": "between two tools of one turn (the first's result saved, the next not run)",
    "after_save_b": "after the turn's last save point B",
}


def points_passed(calls: int) -> tuple[str, ...]:
    """The crash points, in order, that a turn asking for ``calls`` tools passes at least once.

    A turn of one call never passes ``between_tools``; the final answer (no call) passes only
    the points up to save point A."""
    if calls == 0:
        return CRASH_POINTS[: CRASH_POINTS.index("after_save_a") + 1]
    return tuple(p for p in CRASH_POINTS if calls > 1 or p != "between_tools")


ONE_CALL_POINTS: tuple[str, ...] = points_passed(1)
"""The points the kit's scenarios' tool turns pass (one call each): the crash matrix's default."""


@dataclass(frozen=True)
class CrashPlan:
    """Where to die: a crash point, on the turn that calls ``tool`` (or on turn ``turn``)."""

    point: str
    tool: str | None = None
    turn: int | None = None

    def __post_init__(self) -> None:
        if self.point not in CRASH_POINTS:
            raise UnknownCrashPointError(self.point, list(CRASH_POINTS))

    def matches(self, point: str, turn: int, tool: str | None) -> bool:
        """True at the planned point of the planned turn."""
        if point != self.point:
            return False
        if self.turn is not None and turn != self.turn:
            return False
        # The model call comes before the turn's tool is known, so the tool cannot select it.
        return self.tool is None or point == "before_model_call" or tool == self.tool


def kill_self() -> None:
    """Die now, as the OOM killer would: SIGKILL, no cleanup, no finally blocks."""
    os.kill(os.getpid(), signal.SIGKILL)
    signal.pause()  # pragma: no cover - never reached


_TRACEBACK_LIMIT = 16_384
"""Bytes of a failing child's traceback sent back (a pipe holds 64 KiB; the child must never block)."""


def _fork() -> int:
    # Python 3.12+ warns when a process with threads forks (every Jupyter kernel has some).
    # The child runs only this kit's single-threaded code and leaves with os._exit, and
    # CPython re-initialises its own locks after fork; the warning would write to stderr,
    # which costs a graded cell its points, so it is silenced for this one call.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*fork\(\) may lead to deadlocks", category=DeprecationWarning)
        return os.fork()


def _child(fn: Callable[[], object], write_end: int) -> None:
    """The forked child: run ``fn`` and leave with ``os._exit``, never returning to the caller."""
    code = 0
    try:
        fn()
    except BaseException:  # noqa: BLE001 - report anything to the parent, then leave
        code = 1
        # A traceback that cannot be sent is lost; the exit code still says the child failed.
        with contextlib.suppress(BaseException):
            os.write(write_end, traceback.format_exc().encode("utf-8", "replace")[-_TRACEBACK_LIMIT:])
    os._exit(code)


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks)


def run_in_child(fn: Callable[[], object], *, kill_after: float | None = None, timeout: float = 300.0) -> str:
    """Run ``fn`` in a forked child and report how it ended: ``"killed"`` or ``"exited"``.

    The child dies of SIGKILL at its crash point (``kill_self``), or, with ``kill_after``, this
    process SIGKILLs it after that many seconds (a crash at a random instant). A child that
    raises becomes a :class:`CrashError` carrying its traceback; one still running after
    ``timeout`` seconds is killed and reported the same way, so nothing hangs. The child never
    returns into the caller's code, so a notebook kernel that calls this is never what dies.
    """
    read_end, write_end = os.pipe()
    pid = _fork()
    if pid == 0:  # child
        os.close(read_end)
        _child(fn, write_end)
    os.close(write_end)
    try:
        if kill_after is not None:
            time.sleep(kill_after)
            _kill(pid)
        status = _wait(pid, timeout)
        detail = _read_all(read_end).decode("utf-8", "replace")
    finally:
        os.close(read_end)
    if status is None:
        raise CrashError("the crashing run was still going after {timeout} s and was killed", timeout=f"{timeout:g}")
    if os.WIFSIGNALED(status):
        if os.WTERMSIG(status) != signal.SIGKILL:
            raise CrashError("child died of signal {signal}, not SIGKILL", signal=os.WTERMSIG(status))
        return "killed"
    if os.WEXITSTATUS(status) != 0:
        raise CrashError("the crashing run failed before its crash point:\n{detail}", detail=detail or "(no traceback)")
    return "exited"


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # it already ended: nothing to kill
        os.kill(pid, signal.SIGKILL)


def _wait(pid: int, timeout: float) -> int | None:
    """The child's wait status, or None after killing a child that outlived ``timeout``."""
    pidfd = os.pidfd_open(pid)  # readable once the child has ended: no polling loop
    try:
        ended, _, _ = select.select([pidfd], [], [], timeout)
    finally:
        os.close(pidfd)
    if not ended:
        _kill(pid)
        os.waitpid(pid, 0)
        return None
    return os.waitpid(pid, 0)[1]
