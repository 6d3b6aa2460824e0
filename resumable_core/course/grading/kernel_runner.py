"""Runs inside the sandbox: execute a notebook cell by cell with nbclient, saving it after every cell.

``python -m resumable_core.course.grading.kernel_runner IN.ipynb OUT.ipynb --timeout SECONDS``

The kernel is started here, inside the sandbox, so it and its ZeroMQ sockets live on the sandbox's
own loopback with the connection file in its private ``/tmp``. ``OUT`` is written (atomically)
after every cell, with ``metadata.resumable_sandbox = {"done": n, "stopped": why | None}``: the
cells before index ``n`` ran. When the kernel dies or cannot be interrupted, ``stopped`` says so and
the notebook is saved as far as it got. Nothing here is trusted by the grader: it reads ``OUT`` back
as data and takes only outputs and execution counts from it (:mod:`.execute`).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import DeadKernelError

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


def execute(in_path: Path, out_path: Path, timeout: int) -> int:
    """Run every code cell of ``in_path``, saving ``out_path`` after each one; 0, or 1 if it stopped early."""
    nb = nbformat.read(str(in_path), as_version=4)
    nb.metadata[KEY] = {"done": 0, "stopped": None}
    _save(nb, out_path)

    def executed(cell: Any, cell_index: int, execute_reply: dict) -> None:
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
    p.add_argument("--timeout", type=int, default=60, help="seconds per cell before it is interrupted")
    args = p.parse_args(argv)
    return execute(args.notebook, args.out, args.timeout)


if __name__ == "__main__":
    sys.exit(main())
