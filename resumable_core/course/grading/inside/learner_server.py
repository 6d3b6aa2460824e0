"""The learner's process of grading: run the notebook's cells, then answer the re-check's calls.

``python -m resumable_core.course.grading.inside.learner_server IN.ipynb --out OUT.ipynb --socket PATH
--timeout S --wall S [--kill-leftovers]``

It runs every code cell of ``IN`` (the submission as the kernel would get it: the release's setup
and test cells, the hidden blocks cut, and the learner's cells) in an IPython shell in this
process (:mod:`.shell`), saving ``OUT`` after every cell with the outputs nbgrader records; then
it listens on the Unix socket ``PATH`` and answers the checker with the namespace those cells
left. One process per student: the cells run once. It never gets the source notebook, a hidden
test or a check beyond the visible ones the student kit holds. Each connection (one per call of
the checker) is served by a fork of the loaded process, so a call keeps nothing in memory for the
next and a check that kills its call ends only that copy. It answers four ops, ``loaded``,
``lookup``, ``call`` and ``call_marked`` (a call whose return it marks in the trace), with data
only (:mod:`..boundary`); the learner's function reaches the checker's world only through the
stand-ins of :mod:`..boundary`. It stops when ``PATH.stop`` appears or after ``--wall`` seconds.

``python -m resumable_core.course.grading.inside.learner_server IN.ipynb --serve-handed PATH --timeout S``
is a *freshly started* learner's process, as a harness restarted after a crash would be: the host
starts it in a sandbox of its own (:mod:`..recheck.restarter`), never the loaded process, so
nothing of that one's memory (a module-level uuid) can be there. It runs the notebook's cells but
its tests (:func:`fresh_cells`), takes the checker's connection from the host's socket ``PATH``
and answers it, then ends. Nothing it says is trusted.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

from ...notebook_cells import code_cells, is_test, learner_cells, source_of
from ..recheck import rpc, syscalls
from ..recheck.boundary import Stand, codec
from .leftovers import kill_leftovers
from .shell import new_shell, run_cell, run_notebook

MODULE = "resumable_core.course.grading.inside.learner_server"
STOP_POLL = 0.02
"""Seconds between looks for the stop mark: the host waits for this process's end before the next student."""


def load_errors(nb: dict) -> list[dict[str, Any]]:
    """The learner cells that raised while the notebook ran: ``{"cell", "error", "kernel"}`` each.

    The cells ran here, where the checks will call the learner's functions: what they showed is
    what the re-check loads (``kernel`` is the same error), so it never makes the re-check inconclusive.
    """
    return [
        {"cell": label, "error": kernel[:150], "kernel": kernel[:150]}
        for label, _, kernel in learner_cells(nb)
        if kernel is not None
    ]


def preload(anthropic_types: bool = False) -> None:
    """Import what every session would otherwise import again after its fork (the kit's lazy names).

    anthropic (seconds of CPU) only when asked: the codec loads its types in a session that needs them
    (:data:`..boundary.ANTHROPIC`), where a test cell that ran imported them already, so only the
    re-check's own learner's process, whose test cells are blank, asks for them (:func:`..recheck.driver.run`).
    """
    if anthropic_types:
        import anthropic.types  # noqa: F401  (the replies of the checker's client are rebuilt as these)
    import resumable_core

    for name in resumable_core.__all__:  # the package's lazy names
        getattr(resumable_core, name)


def ops(ns: dict[str, Any], load_errors: list[dict[str, Any]]) -> dict[str, Any]:
    """The ops this side serves: how loading went, what a name is, a call of a notebook function (marked or not)."""

    def lookup(name: Any) -> dict[str, Any]:
        if type(name) is not str or name not in ns:
            raise NameError(f"{name} is not defined by the notebook's cells")
        value = ns[name]
        return {"callable": True} if callable(value) else {"value": value}

    def call(name: Any, *args: Any, **kwargs: Any) -> Any:
        if type(name) is not str or not callable(ns.get(name)):
            raise NameError(f"{name} is not a function defined by the notebook's cells")
        return ns[name](*args, **kwargs)

    def call_marked(mark: Any, name: Any, *args: Any) -> Any:
        try:
            return call(name, *args)
        finally:  # before the reply is even encoded: what the trace shows after this is not the call's
            syscalls.mark_returned(mark)

    return {"loaded": lambda: load_errors, "lookup": lookup, "call": call, "call_marked": call_marked}


def _session(conn: socket.socket, ns: dict[str, Any], load_errors: list[dict[str, Any]]) -> None:
    """In a forked copy of the loaded process: answer one checker process until it hangs up."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the learner's code may wait for children of its own
    stand = Stand()
    session = rpc.Session(conn, codec(stand), ops(ns, load_errors), peer="the checker")
    session.on_end = lambda: os._exit(0)  # the checker's process ended (a check killed it): so does this copy
    stand.session = session
    session.serve_forever()


def fresh_cells(nb: dict) -> list[str]:
    """The sources a freshly started learner's process runs: every code cell of ``nb`` but its test cells.

    The release's setup and locked cells and the learner's, in order, as a restarted harness would
    load them; the test cells are the grader's business (and the re-check blanks them anyway).
    """
    return [source_of(c) for c in code_cells(nb) if not is_test(c) and source_of(c).strip()]


def serve(
    address: Path,
    ns: dict[str, Any],
    load_errors: list[dict[str, Any]],
    wall: float,
    stop: Path,
) -> None:
    """Accept the checker's connections until ``stop`` appears or ``wall`` seconds pass, each in a forked copy."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # finished sessions are reaped by the kernel
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(address))  # its path appearing says the cells ran
    listener.listen(16)
    deadline = time.monotonic() + wall
    while not stop.exists() and time.monotonic() < deadline:
        if not select.select([listener], [], [], STOP_POLL)[0]:
            continue
        conn, _ = listener.accept()
        if os.fork() == 0:
            listener.close()
            try:
                _session(conn, ns, load_errors)
            finally:
                os._exit(0)
        conn.close()


def serve_handed(notebook: Path, hand: str, timeout: int) -> None:
    """As a freshly started learner's process: run ``notebook``'s :func:`fresh_cells`, then serve the connection the host hands.

    The host hands the checker's connection over ``hand`` (one descriptor, ``SCM_RIGHTS``); the
    sandbox is this process's own, so it ends with it. What the cells print goes nowhere; a cell
    that raises is passed, as in the kernel.

    It runs in a child of this process: every sandbox's first process has the same pid (bwrap's
    init is 1, its child 2), the loaded one too, and a pid drawn once per process must be new here,
    as after a real restart.
    """
    child = os.fork()
    if child:
        _, status = os.waitpid(child, 0)
        os._exit(0 if os.waitstatus_to_exitcode(status) == 0 else 1)
    shell = new_shell(Path.cwd())
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    for count, source in enumerate(fresh_cells(nb), start=1):
        run_cell(shell, source, count, timeout)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as host:
        host.connect(hand)
        _, fds, _, _ = socket.recv_fds(host, 1, 1)
    if len(fds) != 1:
        raise SystemExit("the host handed no connection")
    _session(socket.socket(fileno=fds[0]), shell.user_ns, [])  # the checker asks the loaded process how loading went


def _quiet() -> int:
    """Send fds 1 and 2 (and ``sys.stdout``) to /dev/null; the pipe that was fd 1, held open and never written.

    The sandbox's runner reads this pipe until it closes: held, it closes when the process ends.
    """
    held = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)  # the learner's prints go nowhere but the cells' outputs
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - open until os._exit
    return held


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=f"python -m {MODULE}")
    p.add_argument("notebook", type=Path, help="the notebook to run (setup, learner and visible test cells)")
    p.add_argument("--out", type=Path, help="the executed notebook, saved after every cell")
    p.add_argument("--socket", help="the Unix socket to listen on once the cells ran")
    p.add_argument("--timeout", type=int, required=True, help="seconds per cell")
    p.add_argument("--wall", type=float, help="seconds before it stops serving")
    p.add_argument(
        "--serve-handed", help="as a freshly started process: run the cells but the tests, serve what this socket hands"
    )
    p.add_argument("--output-cap", type=int, default=None, help="bytes the executed notebook may hold")
    p.add_argument("--anthropic", action="store_true", help="import anthropic's types before the cells")
    p.add_argument("--stop", type=Path, help="it stops serving when this file appears (default: SOCKET.stop)")
    p.add_argument(
        "--kill-leftovers", action="store_true", help="after each cell, kill what it left running (sandbox only)"
    )
    args = p.parse_args(argv)
    if args.serve_handed is not None:
        _quiet()
        serve_handed(args.notebook, args.serve_handed, args.timeout)
        os._exit(0)
    if args.out is None or args.socket is None or args.wall is None:
        p.error("--out, --socket and --wall are required (unless --serve-handed is given)")
    _quiet()  # the pipe's end stays open until os._exit: closed earlier, the runner may kill us first
    started = time.monotonic()
    preload(args.anthropic)
    nb = json.loads(args.notebook.read_text(encoding="utf-8"))
    shell = new_shell(Path.cwd())

    def after() -> None:
        kill_leftovers(os.getpid())

    run_notebook(
        nb, args.out, args.timeout, shell, after_cell=after if args.kill_leftovers else None, output_cap=args.output_cap
    )
    errors = load_errors(nb)
    stop = args.stop or Path(f"{args.socket}.stop")
    serve(Path(args.socket), shell.user_ns, errors, args.wall - (time.monotonic() - started), stop)
    os._exit(0)  # no atexit or finalizer of the learner's code runs


if __name__ == "__main__":
    sys.exit(main())
