"""Re-check a graded notebook's test cells outside the learner's kernel, across a process boundary.

:func:`run` starts two processes, each in its own sandbox:

- the *learner's process* (:mod:`..inside.learner_server`) gets the submitted notebook and the
  release's setup cells, nothing of the source, on the library's learner view (no hidden checks,
  no answer key, and for an assignment whose answer is a loop, a loop that refuses to run);
- the *checker* (:mod:`..inside.checker`) gets the trusted source and holds every check; its
  scratch folder, where the checks keep their evidence, is its own.

Only data crosses between them (:mod:`..boundary`), and only copies of handed paths go to the one
folder both see. Why, and what each check observes from where: ``docs/architecture.md``, "The
isolated re-check". An inconclusive re-run scores the cells it was asked about 0, "needs review"
(:mod:`..workers`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import stat
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...assignments import REGISTRY
from .. import syscalls
from ..budget import DEFAULT_TIMEOUT, STARTUP, recheck_budget
from ..learner_view import kernel_notebook, learner_library
from ..notebook_cells import setup_cells, source_of
from ..sandbox import NOT_RUN, Limit, Limits, Result, Sandbox, capped_folder, run_plain
from .plan import CheckCall, UnknownCheckError, check_calls, graded_sources, planned_calls
from .report import Report

__all__ = [
    "CheckCall",
    "LearnerProcess",
    "Report",
    "UnknownCheckError",
    "answer_is_a_loop",
    "as_graded",
    "check_calls",
    "graded_sources",
    "planned_calls",
    "read_result",
    "run",
    "setup_cells",
]

RPC = "/grading/rpc"
"""Where the socket folder appears in both sandboxes."""
SHARED = "/grading/shared"
"""The one folder both sandboxes see, at the same path: the copies of handed paths, nothing else."""
IN = "/grading/in"
"""Where each process finds its read-only inputs."""
TRACE = "/grading/trace"
"""Where the checker finds the learner's process's system calls (a tracer outside both sandboxes writes them)."""
SOCKET = "learner.sock"
RESULT = "executed.ipynb"
"""The executed notebook, in the socket folder (the trusted side reads it while the process serves)."""
ENDED = f"{SOCKET}.ended"
"""Made when the learner's process has ended (so nothing waits for one that died)."""
LEARNER_MODULE = "resumable_core.course.grading.inside.learner_server"
CHECKER_MODULE = "resumable_core.course.grading.inside.checker"


def overall_seconds(source: dict, only: list[str] | None, timeout: int) -> float:
    """Seconds the checker may take, from the trusted source's test cells (never the submission's)."""
    n = len(only) if only is not None else len(graded_sources(source))
    return recheck_budget(n, timeout)


@dataclass
class _Layout:
    """One re-run's folders on the host: each process's inputs, the socket folder, the shared folder."""

    folder: Path
    sandboxed: bool
    inputs: dict[str, dict[str, Path]] = field(default_factory=lambda: {"learner": {}, "checker": {}})

    def host(self, name: str) -> Path:
        path = self.folder / name
        path.mkdir(exist_ok=True)
        return path

    def give(self, side: str, name: str, data: str) -> None:
        """Write the input ``name`` that only ``side``'s process sees."""
        path = self.host(f"in-{side}") / name
        path.write_text(data, encoding="utf-8")
        self.inputs[side][name] = path

    def path(self, side: str, name: str) -> str:
        """Where ``side``'s process finds the input or folder (rpc, shared) ``name``."""
        if name in self.inputs[side]:
            return f"{IN}/{name}" if self.sandboxed else str(self.inputs[side][name])
        return {"rpc": RPC, "shared": SHARED}[name] if self.sandboxed else str(self.host(name))

    def binds(self, side: str) -> tuple[list[tuple[Path, str]], list[tuple[Path, str]]]:
        ro = [(p, f"{IN}/{name}") for name, p in self.inputs[side].items()]
        if side == "checker":  # the tracer writes it from outside; only the checker reads it
            ro.append((self.host("trace"), TRACE))
        return ro, [(self.host("rpc"), RPC), (self.host("shared"), SHARED)]

    def trace(self, side: str) -> str:
        """The learner's process's trace file, as ``side`` sees it (the tracer on the host writes it)."""
        return (
            f"{TRACE}/learner.trace"
            if self.sandboxed and side == "checker"
            else str(self.host("trace") / "learner.trace")
        )


def _start(
    argv: list[str],
    layout: _Layout,
    side: str,
    box: Sandbox | None,
    env: dict[str, str],
    wall: float,
    ended: Path | None = None,
) -> Callable[[], Result]:
    """Run ``argv`` (in ``box``, else plainly with ``env``) on a thread; returns what waits for its result.

    ``ended`` is created when it ends (so the checker stops waiting for a learner's process that died).
    """
    out: list[Result] = []
    limits = dataclasses.replace(box.limits if box else Limits(), wall=wall)

    def target() -> None:
        if box is not None:
            ro, rw = layout.binds(side)
            out.append(dataclasses.replace(box, limits=limits).run(argv, layout.host(f"scratch-{side}"), ro=ro, rw=rw))
        else:
            out.append(run_plain(argv, layout.host(f"scratch-{side}"), limits, env))
        if ended is not None:
            ended.touch()

    thread = threading.Thread(target=target, daemon=True)
    thread.start()

    def wait() -> Result:
        thread.join()
        return out[0] if out else Result(-1, b"", b"", None, 0.0)

    return wait


def _argv_of_learner(layout: _Layout, timeout: int, wall: float, kill_leftovers: bool) -> list[str]:
    argv = [sys.executable, "-m", LEARNER_MODULE, layout.path("learner", "notebook.ipynb")]
    argv += [
        "--out",
        f"{layout.path('learner', 'rpc')}/{RESULT}",
        "--socket",
        f"{layout.path('learner', 'rpc')}/{SOCKET}",
    ]
    argv += ["--timeout", str(int(timeout)), "--wall", str(wall)]
    return argv + (["--kill-leftovers"] if kill_leftovers else [])


@dataclass
class LearnerProcess:
    """The learner's process of one notebook, in its sandbox: it runs the cells once, then serves the re-check.

    :meth:`start` it; :meth:`executed` waits until the cells ran and reads the executed notebook
    back (as data: it is the learner's file); :func:`run` re-checks against it; :meth:`stop` ends it
    and removes its folders.
    """

    layout: _Layout
    assignment: str
    sandbox: Sandbox | None
    env: dict[str, str]
    wall: float
    wait: Callable[[], Result]
    stack: contextlib.ExitStack
    result: Result | None = None

    @classmethod
    def start(
        cls,
        nb: Any,
        folder: Path | None,
        assignment: str,
        *,
        timeout: int,
        wall: float,
        sandbox: Sandbox | None,
        env: dict[str, str] | None = None,
        loopless: bool = False,
    ) -> LearnerProcess:
        """Run the nbformat notebook ``nb`` (with a copy of ``folder``'s files beside it) for at most ``wall`` seconds.

        ``loopless``: on the library view whose loop refuses to run (:func:`..learner_view.learner_library`).
        """
        env = dict(os.environ if env is None else env)
        stack = contextlib.ExitStack()
        # Both processes write here (the socket, the result, the copies): a capped tmpfs where one can be mounted.
        tmp = stack.enter_context(capped_folder((sandbox.limits if sandbox else Limits()).disk))
        layout = _Layout(Path(tmp), sandboxed=sandbox is not None)
        scratch = layout.folder / "scratch-learner"
        if folder is not None:
            shutil.copytree(folder, scratch, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "*.ipynb"))
        scratch.mkdir(exist_ok=True)
        import nbformat  # here, not at the top: the checker imports this package and never needs it

        layout.give("learner", "notebook.ipynb", nbformat.writes(nb))
        argv = _argv_of_learner(layout, timeout, wall, kill_leftovers=sandbox is not None)
        tracer = syscalls.tracer_argv(Path(layout.trace("learner"))) if syscalls.available() is None else []
        box = None
        if sandbox is not None:
            library = learner_library(sandbox.library, loopless=loopless) if sandbox.library else None
            box = dataclasses.replace(sandbox, library=library, tracer=tuple(tracer))
        else:
            argv = [*tracer, *argv]
        wait = _start(argv, layout, "learner", box, env, wall, layout.host("rpc") / ENDED)
        return cls(layout, assignment, sandbox, env, wall, wait, stack)

    @property
    def traced(self) -> bool:
        return (self.layout.folder / "trace").is_dir() and syscalls.available() is None

    def ended(self) -> bool:
        return (self.layout.host("rpc") / ENDED).exists()

    def executed(self, cap: int) -> tuple[Any | None, str | None]:
        """Wait until the cells ran (or the process ended); the executed notebook (None if unusable) and why.

        ``why`` is None when the cells ran to the end and the process is serving; otherwise it says
        what stopped it (a limit of the sandbox, an exit), and the notebook is as far as it got.
        """
        socket_path = self.layout.host("rpc") / SOCKET
        while not socket_path.exists() and not self.ended():
            time.sleep(0.02)
        why = None
        if self.ended():
            self.result = self.wait()
            why = (
                f"the sandbox hit its {self.result.limit} limit"
                if self.result.limit
                else "the learner's process ended before its last cell (os._exit, a crash or a signal)"
            )
        nb, unusable = read_result(self.layout.host("rpc") / RESULT, cap)
        return nb, why or unusable

    def stop(self) -> Result:
        """End the process (if it still serves) and remove its folders; its result."""
        (self.layout.host("rpc") / f"{SOCKET}.stop").touch()
        result = self.result or self.wait()
        self.stack.close()
        return result


def read_result(path: Path, cap: int) -> tuple[Any | None, str | None]:
    """The executed notebook in ``path`` (None if unusable) and why it is not usable.

    Opened without following a link and without blocking: a submission may have made the file a
    symlink to ``/dev/zero`` or a fifo; anything but a regular file under ``cap`` is no result.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None, "the sandbox wrote no result"
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        return None, "the sandbox's result is not a regular file"
    with os.fdopen(fd, "rb") as f:
        if st.st_size > cap:
            return None, f"the executed notebook is over the output cap ({st.st_size >> 20} MiB > {cap >> 20} MiB)"
        data = f.read(cap + 1)
    import nbformat

    try:
        return nbformat.reads(data.decode("utf-8"), as_version=4), None
    except Exception as e:  # noqa: BLE001 - anything unreadable is just no result
        return None, f"the sandbox's result is not a notebook ({type(e).__name__})"


def _checker(learner: LearnerProcess, trusted: dict, only: list[str] | None, timeout: int) -> Result:
    """Run the checker against the serving ``learner`` until it prints its report."""
    layout = learner.layout
    layout.give("checker", "source.ipynb", json.dumps(_without_solutions(trusted)))
    address = f"{layout.path('checker', 'rpc')}/{SOCKET}"
    argv = [sys.executable, "-m", CHECKER_MODULE, "--source", layout.path("checker", "source.ipynb")]
    argv += ["--assignment", learner.assignment, "--learner", address, "--shared", layout.path("checker", "shared")]
    argv += ["--timeout", str(int(timeout))]
    argv += ["--only", ",".join(only)] if only is not None else []
    if learner.traced:
        argv += ["--trace", layout.trace("checker")]
    # The checker's TMPDIR is its own: inside the sandbox its private /tmp, plainly a folder of its own.
    env = {**learner.env, "TMPDIR": str(layout.host("checker-tmp"))}
    return _start(argv, layout, "checker", learner.sandbox, env, overall_seconds(trusted, only, timeout))()


def answer_is_a_loop(assignment: str) -> bool:
    """The assignment's answer is an agent loop: its re-check runs on the loopless library."""
    registered = REGISTRY.get(assignment)
    return registered is not None and registered.answer_is_a_loop


def run(
    notebook: str | Path,
    assignment: str,
    *,
    source: str | Path,
    only: list[str] | None = None,
    timeout: int = DEFAULT_TIMEOUT,
    env: dict[str, str] | None = None,
    sandbox: Sandbox | None = None,
    learner: LearnerProcess | None = None,
) -> Report:
    """Re-check ``notebook`` against the trusted ``source``: the learner's process and the checker, each in ``sandbox``.

    ``learner``: the process that already ran the notebook's cells for nbgrader (it is stopped
    here); without one, a learner's process is started for ``notebook`` (:func:`as_graded`), on
    the loopless library where the assignment's answer is a loop. Plainly (``sandbox=None``, ``grade --no-sandbox``)
    nothing is isolated. ``env`` is used only without a sandbox (the sandbox's allowlist holds
    otherwise). Cells it could not confirm (a process died, hit a limit or printed no result) come
    back failed with the reason, and the report is ``inconclusive``. Only the cells asked about
    (``only``) are read from its result.
    """
    trusted = json.loads(Path(source).read_text(encoding="utf-8"))
    if learner is None:
        import nbformat

        nb = as_graded(nbformat.read(str(notebook), as_version=4), trusted)
        n_code = sum(1 for c in nb.cells if c.cell_type == "code")
        learner = LearnerProcess.start(
            nb,
            None,
            assignment,
            timeout=timeout,
            wall=timeout * n_code + STARTUP + overall_seconds(trusted, only, timeout),
            sandbox=sandbox,
            env=env,
            loopless=answer_is_a_loop(assignment),
        )
    try:
        _, why = learner.executed(1 << 30)
        if learner.ended():  # it never served: nothing to re-check against
            why = f"the learner's process ended before the re-check: {why}"
            return Report(dict.fromkeys(only or [], why), inconclusive=why)
        checked = _checker(learner, trusted, only, timeout)
    finally:
        learned = learner.stop()
    return _read_report(checked, learned, only)


def as_graded(nb: Any, trusted: dict) -> Any:
    """The submission ``nb`` as the re-check's learner's process runs it: the source's setup cells, the learner's.

    The trusted source's locked cells are put back (as nbgrader's ``OverwriteCells`` does), the
    test cells are left blank (the checker runs the checks; their outputs were nbgrader's
    business), and so are the cells from the one that stopped an earlier run on (its
    ``GradingStopped`` output).
    """
    by_id = {
        (c.get("metadata") or {}).get("nbgrader", {}).get("grade_id"): c
        for c in trusted.get("cells", [])
        if (c.get("metadata") or {}).get("nbgrader", {}).get("locked")
    }
    stopped = False
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        # the cell that stopped the first run (and those after it) stay out: no test cell that scored ran after it
        stopped = stopped or any(o.get("ename") == NOT_RUN for o in cell.get("outputs", []))
        meta = cell.get("metadata", {}).get("nbgrader", {})
        gid = meta.get("grade_id")
        if stopped or (meta.get("grade") and not meta.get("solution")):
            cell.source = ""
        elif gid in by_id and cell.metadata["nbgrader"].get("locked"):
            cell.source = source_of(by_id[gid])
    return kernel_notebook(nb)


def _without_solutions(nb: dict) -> dict:
    """The source with its solution cells blank: the checker needs only its setup and test cells."""
    cells = []
    for c in nb.get("cells", []):
        meta = (c.get("metadata") or {}).get("nbgrader") or {}
        cells.append({**c, "source": ""} if meta.get("solution") else c)
    return {**nb, "cells": cells}


def _read_report(checked: Result, learned: Result, only: list[str] | None) -> Report:
    why = None
    if checked.limit:
        why = f"the isolated re-run hit its {checked.limit} limit"
    elif learned.limit and learned.hit is not Limit.WALL:
        why = f"the learner's process hit its {learned.limit} limit"
    if why:
        return Report(dict.fromkeys(only or [], why), inconclusive=why)
    lines = [ln for ln in checked.stdout.decode(errors="replace").splitlines() if ln.strip()]
    try:
        result = json.loads(lines[-1]) if checked.returncode == 0 and lines else None
    except json.JSONDecodeError:
        result = None
    if not isinstance(result, dict) or not isinstance(result.get("cells"), dict):
        why = f"the isolated re-run ended with exit code {checked.returncode} and no result"
        return Report(dict.fromkeys(only or [], why), inconclusive=why)
    cells = {str(k): (None if v is None else (str(v)[:400] or "failed")) for k, v in result["cells"].items()}
    return Report(
        {k: v for k, v in cells.items() if only is None or k in only},
        load_errors=[e for e in result.get("load_errors") or [] if isinstance(e, dict)],
        inconclusive=result.get("inconclusive") if isinstance(result.get("inconclusive"), str) else None,
    )
