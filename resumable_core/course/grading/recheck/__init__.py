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

import dataclasses
import json
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .. import syscalls
from ..learner_view import learner_library
from ..notebook_cells import setup_cells
from ..sandbox import Limit, Limits, Result, Sandbox, capped_folder, run_plain
from .plan import CheckCall, UnknownCheckError, check_calls, graded_sources, planned_calls
from .report import Report

__all__ = [
    "CheckCall",
    "Report",
    "UnknownCheckError",
    "check_calls",
    "graded_sources",
    "planned_calls",
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
LEARNER_MODULE = "resumable_core.course.grading.inside.learner_server"
CHECKER_MODULE = "resumable_core.course.grading.inside.checker"


def overall_seconds(source: dict, only: list[str] | None, timeout: int) -> int:
    """Seconds the whole re-run may take, from the trusted source's cells (never the submission's).

    The per-cell timeout for every code cell of the source and for every re-checked cell, plus a
    minute: cells a submission adds buy it no time.
    """
    n_code = sum(1 for c in source.get("cells", []) if c.get("cell_type") == "code")
    n = len(only) if only is not None else n_code
    return int(timeout) * (n + n_code + 1) + 60


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


def _processes(
    layout: _Layout,
    assignment: str,
    only: list[str] | None,
    timeout: int,
    overall: int,
    env: dict[str, str],
    box: Sandbox | None,
) -> tuple[Result, Result]:
    """Run the learner's process and the checker until the checker ends; their results."""
    address = f"{layout.path('learner', 'rpc')}/learner.sock"
    learner = [sys.executable, "-m", LEARNER_MODULE, layout.path("learner", "notebook.ipynb")]
    learner += ["--setup", layout.path("learner", "setup.json"), "--socket", address]
    learner += ["--timeout", str(int(timeout)), "--wall", str(overall)]
    checker = [sys.executable, "-m", CHECKER_MODULE, "--source", layout.path("checker", "source.ipynb")]
    checker += ["--assignment", assignment, "--learner", address, "--shared", layout.path("checker", "shared")]
    checker += ["--timeout", str(int(timeout))]
    checker += ["--only", ",".join(only)] if only is not None else []
    tracer = syscalls.tracer_argv(Path(layout.trace("learner"))) if syscalls.available() is None else []
    if tracer:
        checker += ["--trace", layout.trace("checker")]
    learner_box = None
    if box is not None:
        library = learner_library(box.library, assignment) if box.library else None
        learner_box = dataclasses.replace(box, library=library, tracer=tuple(tracer))
    else:
        learner = [*tracer, *learner]
    # The checker's TMPDIR is its own: inside the sandbox its private /tmp, plainly a folder of its own.
    plain_checker_env = {**env, "TMPDIR": str(layout.host("checker-tmp"))}
    ended = layout.host("rpc") / "learner.sock.ended"
    wait_learner = _start(learner, layout, "learner", learner_box, env, overall + 5, ended)
    wait_checker = _start(checker, layout, "checker", box, plain_checker_env, overall)
    checked = wait_checker()
    (layout.host("rpc") / "learner.sock.stop").touch()
    return checked, wait_learner()


def run(
    notebook: str | Path,
    assignment: str,
    *,
    source: str | Path,
    only: list[str] | None = None,
    timeout: int = 60,
    env: dict[str, str] | None = None,
    sandbox: Sandbox | None = None,
) -> Report:
    """Re-check ``notebook`` against the trusted ``source``: the learner's process and the checker, each in ``sandbox``.

    Plainly (``sandbox=None``, ``grade --no-sandbox``) nothing is isolated. ``env`` is used only
    without a sandbox (the sandbox's allowlist holds otherwise). Cells it could not confirm (a
    process died, hit a limit or printed no result) come back failed with the reason, and the
    report is ``inconclusive``. Only the cells asked about (``only``) are read from its result.
    """
    env = dict(os.environ if env is None else env)
    trusted = json.loads(Path(source).read_text(encoding="utf-8"))
    overall = overall_seconds(trusted, only, timeout)
    # Both processes write here (the socket, the copies): a capped tmpfs where one can be mounted.
    with capped_folder((sandbox.limits if sandbox else Limits()).disk) as tmp:
        layout = _Layout(Path(tmp), sandboxed=sandbox is not None)
        layout.give("learner", "notebook.ipynb", Path(notebook).read_text(encoding="utf-8"))
        layout.give("learner", "setup.json", json.dumps([src for _, src in setup_cells(trusted)]))
        layout.give("checker", "source.ipynb", json.dumps(_without_solutions(trusted)))
        checked, learned = _processes(layout, assignment, only, timeout, overall, env, sandbox)
    return _read_report(checked, learned, only)


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
