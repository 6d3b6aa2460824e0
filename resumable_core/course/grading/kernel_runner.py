"""Runs inside the sandbox: execute a notebook cell by cell with nbclient, saving it after every cell.

``python -m resumable_core.course.grading.kernel_runner IN.ipynb OUT.ipynb --timeout SECONDS [--kill-leftovers]``

The kernel is started here, inside the sandbox, so it and its ZeroMQ sockets live on the sandbox's
own loopback with the connection file in its private ``/tmp``. ``OUT`` is written (atomically)
after every cell, with ``metadata.resumable_sandbox = {"done": n, "stopped": why | None}``: the
cells before index ``n`` ran. When the kernel dies or cannot be interrupted, ``stopped`` says so and
the notebook is saved as far as it got. Nothing here is trusted by the grader: it reads ``OUT`` back
as data and takes only outputs and execution counts from it (:mod:`.execute`).

With ``--kill-leftovers`` (given in the sandbox only), every process a cell started that is still
alive when the cell ends is killed (:func:`kill_leftovers`): a spinning or sleeping child, a
daemon. Inside the sandbox's PID namespace ``/proc`` lists only the sandbox's own processes, so
that is everything but this runner, the kernel and their ancestors (bwrap's init). A learner who
kills this runner loses only its own later cells.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import DeadKernelError

from .budget import DEFAULT_TIMEOUT

KEY = "resumable_sandbox"
"""The notebook metadata key of the progress record."""
ERROR_ON_TIMEOUT = {
    "ename": "CellTimeoutError",
    "evalue": "",
    "traceback": ["\x1b[0;31mCellTimeoutError\x1b[0m: No reply from kernel before timeout"],
}
"""The error output of a cell interrupted at the timeout (as nbgrader's Execute writes it)."""


def _save(nb: Any, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    nbformat.write(nb, str(tmp))
    os.replace(tmp, path)


def _record_reply_error(cell: Any, reply: dict) -> None:
    """As nbgrader's Execute does: an error reply with no matching error output (a timeout) is added as one."""
    content = reply.get("content", {})
    if content.get("status") != "error":
        return
    if any(o.get("output_type") == "error" and o.get("ename") == content.get("ename") for o in cell.outputs):
        return
    cell.outputs.append(
        nbformat.v4.new_output(
            "error",
            ename=content.get("ename", "Error"),
            evalue=content.get("evalue", ""),
            traceback=content.get("traceback") or ["ERROR: An error occurred while showtraceback was disabled"],
        )
    )


def _processes() -> dict[int, tuple[str, int]]:
    """{pid: (state, parent pid)} of every process ``/proc`` lists (those that end meanwhile left out)."""
    out = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            state, ppid = stat[stat.rindex(")") + 2 :].split()[:2]  # after "pid (comm) ": comm may hold ")"
        except (OSError, ValueError):  # ended meanwhile
            continue
        out[int(entry.name)] = (state, int(ppid))
    return out


def _with_ancestors(pids: Iterable[int], table: dict[int, tuple[str, int]]) -> set[int]:
    keep: set[int] = set()
    for pid in pids:
        while pid > 0 and pid not in keep:
            keep.add(pid)
            pid = table.get(pid, ("", 0))[1]
    return keep


def kill_leftovers(kernel: int, rounds: int = 200) -> int:
    """SIGKILL every live process but this one, ``kernel`` and their ancestors; how many were killed.

    Only inside the sandbox's PID namespace: outside, ``/proc`` lists the whole machine. Scanned again
    until none is left, since a process may fork while the last round was killing.
    """
    table = _processes()
    keep = _with_ancestors([os.getpid(), kernel], table)
    killed: set[int] = set()
    for _ in range(rounds):
        left = [pid for pid, (state, _) in table.items() if pid not in keep and state not in ("Z", "X", "x")]
        if not left:
            break
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            killed.add(pid)
        time.sleep(0.005)  # a SIGKILLed process is gone (or a zombie) a moment later, not at once
        table = _processes()
    return len(killed)


def _kernel_pid(client: NotebookClient) -> int | None:
    pid = getattr(getattr(client.km, "provisioner", None), "pid", None)
    return pid if isinstance(pid, int) and pid > 0 else None


def execute(in_path: Path, out_path: Path, timeout: int, kill_after_cells: bool = False) -> int:
    """Run every code cell of ``in_path``, saving ``out_path`` after each one; 0, or 1 if it stopped early.

    ``kill_after_cells``: after each cell, :func:`kill_leftovers` (in the sandbox only).
    """
    nb = nbformat.read(str(in_path), as_version=4)
    nb.metadata[KEY] = {"done": 0, "stopped": None}
    _save(nb, out_path)

    def executed(cell: Any, cell_index: int, execute_reply: dict) -> None:
        kernel = _kernel_pid(client) if kill_after_cells else None
        if kernel is not None:  # before the next cell, and before the save: a leftover may write the result too
            kill_leftovers(kernel)
        _record_reply_error(cell, execute_reply)
        nb.metadata[KEY]["done"] = cell_index + 1
        _save(nb, out_path)

    client = NotebookClient(
        nb,
        timeout=timeout,
        interrupt_on_timeout=True,
        allow_errors=True,
        kernel_name="python3",
        error_on_timeout=ERROR_ON_TIMEOUT,
        extra_arguments=["--HistoryManager.hist_file=:memory:"],
        shutdown_kernel="immediate",  # nothing of the kernel is needed after its last cell: no graceful wait
        resources={"metadata": {"path": str(in_path.parent)}},
        on_cell_executed=executed,
    )
    try:
        client.execute()
        nb.metadata[KEY]["done"] = len(nb.cells)  # nbclient calls no hook for an empty cell: the last may be one
    except DeadKernelError:
        nb.metadata[KEY]["stopped"] = "the kernel died (os._exit, a crash or a limit of the sandbox)"
    except Exception as e:  # noqa: BLE001 - whatever stops nbclient, the cells so far are kept and the reason told
        nb.metadata[KEY]["stopped"] = f"the notebook could not go on: {type(e).__name__}: {str(e)[:200]}"
    _save(nb, out_path)
    return 0 if nb.metadata[KEY]["stopped"] is None else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m resumable_core.course.grading.kernel_runner")
    p.add_argument("notebook", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT, help="seconds per cell before it is interrupted")
    p.add_argument(
        "--kill-leftovers",
        action="store_true",
        help="after each cell, kill every process but this runner, the kernel and their ancestors (sandbox only)",
    )
    args = p.parse_args(argv)
    return execute(args.notebook, args.out, args.timeout, args.kill_leftovers)


if __name__ == "__main__":
    sys.exit(main())
