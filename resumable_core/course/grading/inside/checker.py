"""The re-check's checker: every check, hidden ones included, run on the names of the learner's process.

``python -m resumable_core.course.grading.inside.checker --source SOURCE --assignment A --learner SOCKET
--shared DIR --timeout S [--restart SOCKET] [--only ID,...] [--trace FILE]`` prints one JSON line on stdout
(:meth:`..recheck.report.Report.to_json`).

It never runs a line of the learner's code: each test cell's check calls are read from the
trusted source (:mod:`..recheck.plan`), and the learner's names reach the checks as
:class:`..boundary.RemoteFunction` objects or as data. Its scratch folder (``TMPDIR``, where every
check keeps its world, outbox, ledger and model-call log) is its own; only the copies of handed
paths go to ``--shared``, the folder the learner's process sees too. ``--trace`` is the learner's
process's system calls, written by a tracer outside both sandboxes. ``--restart`` is the host's
socket that serves each restarted call in a freshly started learner's process (:mod:`..recheck.restarter`).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from ...checks.support import FailedAfterRestart
from .. import reasons
from ..recheck import rpc
from ..recheck.boundary import Learner, observe_with
from ..recheck.plan import CheckCall, planned_calls
from ..recheck.report import Report, load_errors_of

NO_CALL = "the re-check has no check call for this test cell"


class _Timeout(BaseException):
    pass


def _on_alarm(signum: int, frame: Any) -> None:
    raise _Timeout()


def recheck_cell(calls: list[CheckCall], learner: Learner, timeout: int) -> tuple[str | None, bool]:
    """Run one test cell's checks on the learner's names: None only if every check returned, else why not; and
    whether the check that failed is a visible one (:attr:`CheckCall.visible`: the kernel ran it too, and passed).

    A hidden check's failure is its own sentence (:attr:`CheckCall.sentence`) and nothing else: what it
    raised is never read, since it may carry the hidden scenario's data or what the learner's code said
    while it ran. A visible check's reason is never empty: an exception is a failure whatever its message
    (the learner's side chooses an exception's class and text, so neither may decide a verdict).
    """
    running: CheckCall | None = None
    signal.alarm(max(1, int(timeout)))
    try:
        for call in calls:
            running = call
            call.run(learner.lookup)
    except BaseException as e:  # noqa: BLE001 - anything the check or the learner's code raised, the timeout too
        if running is not None and not running.visible:
            return running.sentence() if running.sentence else reasons.RECHECK_FAILED, False
        return _visible_failure(e, timeout), running is not None
    finally:
        signal.alarm(0)
    return None, False


def _visible_failure(error: BaseException, timeout: int) -> str:
    """Why a visible check failed: the learner may read its own error here, as its kernel showed it.

    A failure on a call in a freshly started learner's process says so (:func:`..reasons.failed_after_restart`):
    the kernel cannot start one, so passing there and failing here is no sign of patching.
    """
    if isinstance(error, _Timeout):
        return f"did not finish within {timeout} s"
    # FailedAfterRestart is the check's own class: a learner's error is rebuilt as a builtin's subclass
    if isinstance(error, FailedAfterRestart):
        return reasons.failed_after_restart(error.reason)
    if isinstance(error, AssertionError):
        return str(error) or "assertion failed"
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__ or "failed"


def connect(learner: Learner, ended: Path, deadline: float, *, warm: bool = False) -> str | None:
    """Wait until the learner's process answers; None, or why it never did.

    ``warm``: while it does not answer yet, import what the checks will (:func:`warm_up`), once.
    """
    while True:
        try:
            learner.session()
            return None
        except OSError:
            if ended.exists():
                return "the learner's process ended while loading the notebook"
            if time.monotonic() > deadline:
                return "the learner's process did not finish loading the notebook in time"
            if warm:
                warm = False
                warm_up()
                continue
            time.sleep(0.05)


def warm_up() -> None:
    """Import the model's SDK and the scripted Claude: a check that runs an agent would, at a cost of seconds."""
    import anthropic  # noqa: F401
    import httpx2  # noqa: F401

    from ....claude import ScriptedClaude  # noqa: F401


def recheck(source: dict, assignment: str, learner: Learner, only: list[str] | None, timeout: int) -> Report:
    """Run the test cells of ``source`` that call checks (those of ``only``), on the names of the learner's process.

    A cell of ``only`` whose trusted source calls no check is reported failed (:data:`NO_CALL`):
    the kernel's score of it could not be confirmed.
    """
    plan = planned_calls(source, assignment)
    wanted = only if only is not None else sorted(plan)
    if not wanted:
        return Report()
    signal.signal(signal.SIGALRM, _on_alarm)
    try:
        load_errors = load_errors_of(learner.loaded())
    except (rpc.ProtocolError, rpc.ProcessEndedError, OSError) as e:
        why = f"the learner's process did not answer ({type(e).__name__})"
        return Report(dict.fromkeys(wanted, why), inconclusive=why)
    report = Report(load_errors=load_errors)
    loading = "; while loading, {cell} raised {error}".format(**load_errors[0]) if load_errors else ""
    # Every cell's visible calls before any hidden one: a visible failure keeps the learner's text, which must
    # not carry what a hidden check handed the learner's process (it keeps notes in its /tmp across calls).
    for gid in wanted:
        calls = [c for c in plan[gid] if c.visible] if gid in plan else []
        reason, visible = recheck_cell(calls, learner, timeout) if gid in plan else (NO_CALL, False)
        if reason is not None and visible:  # a hidden check's sentence stands alone
            reason = reason[: 300 - len(loading[:150])] + loading[:150]
            report.visible_failures.append(gid)
        report[gid] = reason
    for gid in [g for g in wanted if g in plan and report[g] is None]:
        report[gid], _ = recheck_cell([c for c in plan[gid] if not c.visible], learner, timeout)
    return report


def main(argv: list[str] | None = None) -> int:
    """The checker's command line: print the re-check's JSON on stdout."""
    p = argparse.ArgumentParser(prog="python -m resumable_core.course.grading.inside.checker")
    p.add_argument("--source", required=True, help="the instructor's source notebook (trusted setup and test cells)")
    p.add_argument("--assignment", required=True)
    p.add_argument("--learner", required=True, help="the Unix socket of the learner's process")
    p.add_argument("--shared", required=True, help="the folder both processes see: copies of handed paths")
    p.add_argument("--only", default=None, help="comma-separated test cell ids (default: every one that calls a check)")
    p.add_argument("--timeout", type=int, required=True, help="seconds per test cell")
    p.add_argument("--load-timeout", type=float, default=600.0, help="seconds to wait for the learner's process")
    p.add_argument("--trace", default=None, help="the learner's process's system calls (strace's output)")
    p.add_argument("--restart", default=None, help="the host's socket that starts a fresh learner's process per call")
    p.add_argument("--ended", type=Path, help="appears when the learner's process has ended (default: SOCKET.ended)")
    p.add_argument("--warm", action="store_true", help="while the learner's process loads, import what the checks use")
    args = p.parse_args(argv)
    out = os.fdopen(os.dup(1), "w")  # the result goes here; whatever a check prints goes to /dev/null
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - open until os._exit
    source = json.loads(Path(args.source).read_text(encoding="utf-8"))
    only = [g for g in args.only.split(",") if g] if args.only is not None else None
    learner = Learner(args.learner, Path(args.shared), restart=args.restart)
    if args.trace:
        observe_with(Path(args.trace), Path(args.shared))
    ended = args.ended or Path(f"{args.learner}.ended")
    why = connect(learner, ended, time.monotonic() + args.load_timeout, warm=args.warm)
    if why:
        wanted = only if only is not None else sorted(planned_calls(source, args.assignment))
        report = Report(dict.fromkeys(wanted, why), inconclusive=why)
    else:
        report = recheck(source, args.assignment, learner, only, args.timeout)
    out.write(report.to_json() + "\n")
    out.flush()
    os._exit(0)  # no atexit or finalizer runs after the result


if __name__ == "__main__":
    sys.exit(main())
