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
next and a check that kills its call ends only that copy. A connection on ``PATH.fresh`` is served
by a *freshly started* learner's process instead, as a harness restarted after a crash would be: a
fork that execs a new interpreter (``--connection FD``), which runs the notebook's cells again but
its tests (:func:`fresh_cells`) and answers that one connection, so nothing of the loaded process's
memory (a module-level uuid) is there. It answers four ops, ``loaded``,
``lookup`` and ``call`` (``call_marked``: a call whose return it marks in the trace), with data only (:mod:`..boundary`); the learner's function reaches the
checker's world only through the stand-ins of :mod:`..boundary`. It stops when ``PATH.stop``
appears or after ``--wall`` seconds. Nothing it says is trusted.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import select
import signal
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import rpc, syscalls
from ..boundary import FRESH, Stand, codec
from ..notebook_cells import code_cells, is_test, learner_cells, source_of
from .leftovers import kill_leftovers
from .shell import new_shell, run_cell, run_notebook

MODULE = "resumable_core.course.grading.inside.learner_server"


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


def preload() -> None:
    """Import what every session would otherwise import again after its fork (anthropic's types, the kit's)."""
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


def _restart(conn: socket.socket, notebook: Path, cwd: Path, timeout: int) -> None:
    """In a forked copy: become a new interpreter in ``cwd`` that loads ``notebook`` afresh and serves ``conn``.

    It never returns.
    """
    os.chdir(cwd)  # where the loaded process started, whatever its cells did since
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # an ignored signal stays ignored across exec
    os.set_inheritable(conn.fileno(), True)  # the one descriptor the new interpreter keeps (stdout, stderr: /dev/null)
    # -P: the working folder (the learner's) is not put first on sys.path, so no module the learner's
    # cells wrote there (a ./resumable_core/) can stand in for this one in the new interpreter
    argv = [
        sys.executable,
        "-P",
        "-m",
        MODULE,
        str(notebook),
        "--connection",
        str(conn.fileno()),
        "--timeout",
        str(timeout),
    ]
    os.execv(sys.executable, argv)


def serve(
    address: Path,
    ns: dict[str, Any],
    load_errors: list[dict[str, Any]],
    wall: float,
    stop: Path,
    restart: Callable[[socket.socket], None] | None = None,
) -> None:
    """Accept the checker's connections until ``stop`` appears or ``wall`` seconds pass.

    With ``restart``, connections on ``address`` + :data:`FRESH` are handed to it in a forked copy
    (:func:`_restart`: a freshly started learner's process serves them).
    """
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # finished sessions are reaped by the kernel
    listeners: dict[socket.socket, bool] = {}
    for path, fresh in ((Path(f"{address}{FRESH}"), True), (address, False)):  # the plain one last: its path says ready
        if fresh and restart is None:
            continue
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(path))
        listener.listen(16)
        listeners[listener] = fresh
    deadline = time.monotonic() + wall
    while not stop.exists() and time.monotonic() < deadline:
        ready, _, _ = select.select(list(listeners), [], [], 0.2)
        for listener in ready:
            conn, _ = listener.accept()
            if os.fork() == 0:
                for own in listeners:
                    own.close()
                try:
                    if listeners[listener] and restart is not None:
                        restart(conn)
                    else:
                        _session(conn, ns, load_errors)
                finally:
                    os._exit(0)
            conn.close()


def serve_fresh(notebook: Path, fd: int, timeout: int) -> None:
    """As a freshly started learner's process: run ``notebook``'s :func:`fresh_cells`, then serve the connection ``fd``.

    No cell's leftovers are killed here: in the sandbox's PID namespace that would take the other
    sessions with them. What the cells print goes nowhere; a cell that raises is passed, as in the kernel.
    """
    conn = socket.socket(fileno=fd)
    shell = new_shell(Path.cwd())
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    for count, source in enumerate(fresh_cells(nb), start=1):
        run_cell(shell, source, count, timeout)
    _session(conn, shell.user_ns, [])  # the checker asks the loaded process how loading went, never this one


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=f"python -m {MODULE}")
    p.add_argument("notebook", type=Path, help="the notebook to run (setup, learner and visible test cells)")
    p.add_argument("--out", type=Path, help="the executed notebook, saved after every cell")
    p.add_argument("--socket", help="the Unix socket to listen on once the cells ran")
    p.add_argument("--timeout", type=int, required=True, help="seconds per cell")
    p.add_argument("--wall", type=float, help="seconds before it stops serving")
    p.add_argument(
        "--connection", type=int, help="as a freshly started process: load the cells but the tests, serve this socket"
    )
    p.add_argument("--output-cap", type=int, default=None, help="bytes the executed notebook may hold")
    p.add_argument("--stop", type=Path, help="it stops serving when this file appears (default: SOCKET.stop)")
    p.add_argument(
        "--kill-leftovers", action="store_true", help="after each cell, kill what it left running (sandbox only)"
    )
    args = p.parse_args(argv)
    if args.connection is not None:  # started by _restart: its stdout and stderr are /dev/null already
        sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - open until os._exit
        serve_fresh(args.notebook, args.connection, args.timeout)
        os._exit(0)
    if args.out is None or args.socket is None or args.wall is None:
        p.error("--out, --socket and --wall are required (unless --connection is given)")
    held = os.dup(1)  # held open, never written: the sandbox's runner waits for this pipe to close
    devnull = os.open(os.devnull, os.O_WRONLY)  # the learner's prints go nowhere but the cells' outputs
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - open until os._exit
    started = time.monotonic()
    restart = functools.partial(_restart, notebook=args.notebook.resolve(), cwd=Path.cwd(), timeout=args.timeout)
    preload()
    nb = json.loads(args.notebook.read_text(encoding="utf-8"))
    shell = new_shell(Path.cwd())

    def after() -> None:
        kill_leftovers(os.getpid())

    run_notebook(
        nb, args.out, args.timeout, shell, after_cell=after if args.kill_leftovers else None, output_cap=args.output_cap
    )
    errors = load_errors(nb)
    stop = args.stop or Path(f"{args.socket}.stop")
    serve(Path(args.socket), shell.user_ns, errors, args.wall - (time.monotonic() - started), stop, restart)
    os.close(held)
    os._exit(0)  # no atexit or finalizer of the learner's code runs


if __name__ == "__main__":
    sys.exit(main())
