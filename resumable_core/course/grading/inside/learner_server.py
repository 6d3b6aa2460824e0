"""The learner's process of the re-check: load the notebook's cells, then answer the checker's calls.

``python -m resumable_core.course.grading.inside.learner_server NOTEBOOK --setup SETUP.json --socket PATH``

It runs the release's setup cells (``SETUP.json``: their sources, a JSON list, written by the
grader from the trusted source), then every learner cell of ``NOTEBOOK`` as the kernel did (on
after an error), each under an alarm, and listens on the Unix socket ``PATH``. It never gets the
source notebook, a hidden test or a check beyond the visible ones the student kit holds. Each
connection (one per process of the checker) is served by a fork of the loaded process, so a check
that kills its child ends only that copy. It answers three ops, ``loaded``, ``lookup`` and
``call``, with data only (:mod:`..boundary`); the learner's function reaches the checker's world
only through the stand-ins of :mod:`..boundary`. It stops when ``PATH.stop`` appears or after
``--wall`` seconds. Nothing it says is trusted.
"""

from __future__ import annotations

import argparse
import builtins
import json
import os
import select
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

from .. import rpc
from ..boundary import Stand, codec
from ..notebook_cells import learner_cells, python_source


class _Timeout(BaseException):
    pass


def _on_alarm(signum: int, frame: Any) -> None:
    raise _Timeout()


def load(ns: dict[str, Any], notebook: dict, timeout: int) -> list[dict[str, Any]]:
    """Run every learner cell of ``notebook`` in ``ns`` as the kernel did (on after an error); its errors.

    Each error is ``{"cell", "error", "kernel"}``: the kernel's error for that cell, or None if it
    ran fine there.
    """
    errors = []
    old = signal.signal(signal.SIGALRM, _on_alarm)
    try:
        for label, src, kernel in learner_cells(notebook):
            code, unrunnable = python_source(src)
            error = f"{unrunnable} (IPython only)" if unrunnable else None
            signal.alarm(max(1, int(timeout)))
            try:
                exec(compile(code, f"<{label}>", "exec"), ns)
            except _Timeout:
                error = f"a timeout ({timeout} s)"
            except BaseException as e:  # noqa: BLE001 - the kernel goes on after an erroring cell; so do we
                error = f"{type(e).__name__}: {e}"
            finally:
                signal.alarm(0)
            if error:
                first = error.splitlines()[0][:150] if error.strip() else error
                errors.append({"cell": label, "error": first, "kernel": kernel})
    finally:
        signal.signal(signal.SIGALRM, old)
    return errors


def preload() -> None:
    """Import what every session would otherwise import again after its fork (anthropic's types, the kit's)."""
    import anthropic.types  # noqa: F401  (the replies of the checker's client are rebuilt as these)

    import resumable_core

    for name in resumable_core.__all__:  # the package's lazy names
        getattr(resumable_core, name)


def ops(ns: dict[str, Any], load_errors: list[dict[str, Any]]) -> dict[str, Any]:
    """The three ops this side serves: how loading went, what a name is, a call of a notebook function."""

    def lookup(name: Any) -> dict[str, Any]:
        if type(name) is not str or name not in ns:
            raise NameError(f"{name} is not defined by the notebook's cells")
        value = ns[name]
        return {"callable": True} if callable(value) else {"value": value}

    def call(name: Any, *args: Any, **kwargs: Any) -> Any:
        if type(name) is not str or not callable(ns.get(name)):
            raise NameError(f"{name} is not a function defined by the notebook's cells")
        return ns[name](*args, **kwargs)

    return {"loaded": lambda: load_errors, "lookup": lookup, "call": call}


def _session(conn: socket.socket, ns: dict[str, Any], load_errors: list[dict[str, Any]]) -> None:
    """In a forked copy of the loaded process: answer one checker process until it hangs up."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the learner's code may wait for children of its own
    stand = Stand()
    session = rpc.Session(conn, codec(stand), ops(ns, load_errors), peer="the checker")
    session.on_end = lambda: os._exit(0)  # the checker's process ended (a check killed it): so does this copy
    stand.session = session
    session.serve_forever()


def serve(address: Path, ns: dict[str, Any], load_errors: list[dict[str, Any]], wall: float) -> None:
    """Accept the checker's connections until ``address.stop`` appears or ``wall`` seconds pass."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # finished sessions are reaped by the kernel
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(address))
    listener.listen(16)
    stop, deadline = Path(f"{address}.stop"), time.monotonic() + wall
    while not stop.exists() and time.monotonic() < deadline:
        ready, _, _ = select.select([listener], [], [], 0.2)
        if not ready:
            continue
        conn, _ = listener.accept()
        if os.fork() == 0:
            listener.close()
            try:
                _session(conn, ns, load_errors)
            finally:
                os._exit(0)
        conn.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m resumable_core.course.grading.inside.learner_server")
    p.add_argument("notebook", help="the graded notebook (its learner cells run)")
    p.add_argument("--setup", required=True, help="a JSON list of the release's setup cell sources (run first)")
    p.add_argument("--socket", required=True, help="the Unix socket to listen on")
    p.add_argument("--timeout", type=int, required=True, help="seconds per learner cell while loading")
    p.add_argument("--wall", type=float, required=True, help="seconds before it stops serving")
    args = p.parse_args(argv)
    held = os.dup(1)  # held open, never written: the sandbox's runner waits for this pipe to close
    devnull = os.open(os.devnull, os.O_WRONLY)  # the learner's prints go nowhere: no channel to anyone
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - open until os._exit
    nb = json.loads(Path(args.notebook).read_text(encoding="utf-8"))
    setup = json.loads(Path(args.setup).read_text(encoding="utf-8"))
    preload()
    ns: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    for src in setup:  # the release's setup, as the kernel ran it
        exec(compile(python_source(str(src))[0], "<setup>", "exec"), ns)
    load_errors = load(ns, nb, args.timeout)
    serve(Path(args.socket), ns, load_errors, args.wall)
    os.close(held)
    os._exit(0)  # no atexit or finalizer of the learner's code runs


if __name__ == "__main__":
    sys.exit(main())
