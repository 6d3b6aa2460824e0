"""Run a notebook's code cells in this process, in an IPython shell, recording outputs as a kernel would.

The learner's process of grading runs the notebook here instead of in a Jupyter kernel: no kernel
to start, no ZeroMQ, and the same namespace then answers the re-check (:mod:`.learner_server`).
Outputs are nbformat's: ``stream`` (stdout and stderr, in order with the rest), ``display_data``,
``execute_result`` and ``error`` (``ename``, ``evalue``, the traceback's lines), which is what
nbgrader reads to score a cell. A cell still running at the timeout gets nbgrader's own
``CellTimeoutError`` output. The notebook is plain JSON here (no nbformat: its schema validator
costs seconds to import, and the trusted side validates every output it takes anyway). The notebook is saved after every cell with the progress record
``metadata.resumable_sandbox = {"done": n, "stopped": why | None}`` that the trusted side reads
back as data (:mod:`..execute`).
"""

from __future__ import annotations

import io
import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from IPython.core.displayhook import DisplayHook
from IPython.core.displaypub import DisplayPublisher
from IPython.core.interactiveshell import InteractiveShell

from ...notebook_cells import KEY

ERROR_ON_TIMEOUT = {
    "ename": "CellTimeoutError",
    "evalue": "",
    "traceback": ["\x1b[0;31mCellTimeoutError\x1b[0m: No reply from kernel before timeout"],
}
"""The error output of a cell interrupted at the timeout (as nbgrader's Execute writes it)."""


class CellTimeout(BaseException):
    """Raised into a cell that ran past its timeout (a BaseException: ``except Exception`` lets it through)."""


class _Outputs:
    """The outputs of the cell being run, in the order they happened; stream text past ``budget`` bytes is dropped.

    ``budget``: what is left of the output cap (bytes of JSON) when the cell starts; ``flooded``
    once its streams passed it (the cell then loses its outputs and stops the notebook: :func:`run_notebook`).
    """

    def __init__(self, budget: float = float("inf")) -> None:
        self.items: list[Any] = []
        self._parts: dict[int, list[str]] = {}
        self.budget, self.size, self.flooded = budget, 0, False

    def stream(self, name: str, text: str) -> None:
        cost = len(json.dumps(text))  # as the saved notebook holds it (escapes included)
        if self.flooded or self.size + cost > self.budget:
            self.flooded = True  # kept nowhere: a loop that prints without end costs no memory
            return
        self.size += cost
        last = self.items[-1] if self.items else None
        if last is not None and last.get("output_type") == "stream" and last.get("name") == name:
            self._parts[id(last)].append(text)  # one output per run of writes, as a kernel coalesces them
        else:
            self.items.append({"output_type": "stream", "name": name, "text": ""})
            self._parts[id(self.items[-1])] = [text]

    def clear(self) -> None:
        """``clear_output()``: the cell's outputs so far are gone, and what they counted against the cap with them."""
        self.items.clear()
        self._parts.clear()
        self.size = 0

    def finished(self) -> list[Any]:
        """The outputs, each stream's writes joined once (adding to a string write by write takes quadratic time)."""
        for item in self.items:
            if id(item) in self._parts:
                item["text"] = "".join(self._parts[id(item)])
        self._parts.clear()
        return self.items


class _Stream(io.TextIOBase):
    """``sys.stdout``/``sys.stderr`` of a cell: every write becomes part of a stream output."""

    def __init__(self, outputs: _Outputs, name: str) -> None:
        self._outputs, self._name = outputs, name

    def writable(self) -> bool:
        return True

    def write(self, text: Any) -> int:
        text = str(text)
        if text:
            self._outputs.stream(self._name, text)
        return len(text)

    def isatty(self) -> bool:
        return False


class _Publisher(DisplayPublisher):
    """``display(...)`` of a cell: a display_data output."""

    outputs: _Outputs | None = None

    def publish(self, data: Any, metadata: Any = None, source: Any = None, **kwargs: Any) -> None:
        if self.outputs is not None:
            self.outputs.items.append({"output_type": "display_data", "data": data, "metadata": metadata or {}})

    def clear_output(self, wait: bool = False) -> None:
        if self.outputs is not None:
            self.outputs.clear()


class _Hook(DisplayHook):
    """A cell's last expression: an execute_result output."""

    outputs: _Outputs | None = None
    count: int = 0

    def write_output_prompt(self) -> None:
        pass

    def write_format_data(self, format_dict: Any, md_dict: Any = None) -> None:
        if self.outputs is not None:
            self.outputs.items.append(
                {
                    "output_type": "execute_result",
                    "data": format_dict,
                    "metadata": md_dict or {},
                    "execution_count": self.count,
                }
            )

    def finish_displayhook(self) -> None:
        pass


class Shell(InteractiveShell):
    """An IPython shell whose outputs and errors go to the cell being run."""

    outputs: _Outputs | None = None

    def enable_gui(self, gui: Any = None) -> None:
        """No event loop to hook: ``%matplotlib inline`` needs none (figures are displayed as outputs)."""

    def _showtraceback(self, etype: Any, evalue: Any, stb: Any) -> None:
        if self.outputs is None:
            return
        if etype is CellTimeout:
            self.outputs.items.append({"output_type": "error", **ERROR_ON_TIMEOUT})
            return
        lines = stb if isinstance(stb, list) else [str(stb)]
        self.outputs.items.append(
            {
                "output_type": "error",
                "ename": etype.__name__,
                "evalue": str(evalue),
                "traceback": [str(x) for x in lines],
            }
        )


def new_shell(cwd: Path) -> Shell:
    """A fresh shell in ``cwd``, with the kernel's display hooks and no history file."""
    os.chdir(cwd)
    shell = Shell.instance(displayhook_class=_Hook, display_pub_class=_Publisher, colors="nocolor", history_length=0)
    if shell.history_manager is not None:
        shell.history_manager.enabled = False
    return shell


def _on_alarm(signum: int, frame: Any) -> None:
    raise CellTimeout()


def _save(nb: dict, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(nb), encoding="utf-8")
    os.replace(tmp, path)


def run_cell(shell: Shell, source: str, count: int, timeout: int, budget: float = float("inf")) -> _Outputs:
    """Run one cell's source; its outputs (an error output if it raised or timed out), streams cut at ``budget``."""
    outputs = _Outputs(budget)
    shell.outputs = shell.display_pub.outputs = shell.displayhook.outputs = outputs  # type: ignore[attr-defined]  # our hook classes
    shell.displayhook.count = count  # type: ignore[attr-defined]  # likewise
    shell.execution_count = count
    real = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Stream(outputs, "stdout"), _Stream(outputs, "stderr")
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(max(1, int(timeout)))
    try:
        shell.run_cell(source, store_history=False)
    except CellTimeout:  # raised outside the cell's own frames (in IPython's machinery)
        outputs.items.append({"output_type": "error", **ERROR_ON_TIMEOUT})
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        sys.stdout, sys.stderr = real
        shell.outputs = None
    outputs.finished()
    return outputs


OUTPUT_MARGIN = 1 << 20
"""Bytes of the output cap left for the notebook's own JSON (its sources are at most 2 MiB) when it is near."""


def flooded(index: int, cap: int) -> str:
    """Why the notebook stopped at the cell ``index`` whose outputs passed the output cap (short: a reason cuts at 120).

    ``index`` counts the notebook's cells from 0, as ``check`` names cells.
    """
    return f"output flood at cell {index}: the outputs passed the {cap / 2**20:g} MiB output cap (print less)"


def run_notebook(
    nb: dict,
    out_path: Path,
    timeout: int,
    shell: Shell,
    after_cell: Callable[[], None] | None = None,
    output_cap: int | None = None,
) -> None:
    """Run every code cell of the notebook JSON ``nb`` in ``shell``, saving ``out_path`` after each.

    ``after_cell`` runs after every cell that ran. ``output_cap``: the bytes the saved notebook may
    hold (the trusted side reads no larger one). An output flood is found per cell, not cut and
    carried on: the first cell whose outputs take the notebook past the cap (less a margin for its
    JSON) keeps no output, is left undone and ends the run, with ``stopped`` saying why; so it and
    the cells after it are not graded, as after a dead kernel, and the cells before keep their
    outputs. (Cutting the flood and going on would score cells after a run nobody saw whole.)
    """
    record: dict[str, Any] = {"done": 0, "stopped": None}
    nb.setdefault("metadata", {})[KEY] = record
    _save(nb, out_path)
    budget = float("inf") if output_cap is None else output_cap - len(json.dumps(nb)) - OUTPUT_MARGIN
    count = 0
    for index, cell in enumerate(nb.get("cells", [])):
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        if cell.get("cell_type") == "code" and source.strip():
            count += 1
            outputs = run_cell(shell, source, count, timeout, budget)
            size = len(json.dumps(outputs.items))
            if outputs.flooded or size > budget:
                if after_cell is not None:
                    after_cell()
                record["stopped"] = flooded(index, int(output_cap or 0))
                _save(nb, out_path)
                return
            budget -= size
            cell["outputs"] = outputs.items
            cell["execution_count"] = count
            if after_cell is not None:
                after_cell()
        record["done"] = index + 1
        _save(nb, out_path)
