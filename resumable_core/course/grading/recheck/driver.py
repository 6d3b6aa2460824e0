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

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...assignments import REGISTRY
from ...notebook_cells import NOT_RUN, graded_sources, is_test, source_of
from ..isolation import Backend, Job, Limit, Mount, Outcome, PlainBackend
from ..reasons import printable
from ..steps.budget import DEFAULT_TIMEOUT, STARTUP, recheck_budget
from .learner import CHECKER_MODULE, CONTROL, ENDED, SOCKET, STOP_GRACE, LearnerProcess, start
from .learner_view import kernel_notebook
from .report import Report


def overall_seconds(source: dict, only: list[str] | None, timeout: int) -> float:
    """Seconds the checker may take, from the trusted source's test cells (never the submission's)."""
    n = len(only) if only is not None else len(graded_sources(source))
    return recheck_budget(n, timeout)


def _start_checker(
    learner: LearnerProcess,
    trusted: dict,
    only: list[str] | None,
    timeout: int,
    *,
    loading: float = 0.0,
    warm: bool = False,
) -> Callable[..., Outcome | None]:
    """Start the checker against ``learner``; what waits for its outcome (:func:`.learner.start`).

    ``loading``: seconds the learner's process may still take to serve (0: it serves already); the
    checker waits that long for it. ``warm``: meanwhile it imports the model's SDK (its checks would
    import it later anyway), so that import overlaps the learner's start instead of following it.
    """
    layout = learner.layout
    layout.give("checker", "source.ipynb", json.dumps(_without_solutions(trusted)))
    address = f"{layout.path('checker', 'rpc')}/{SOCKET}"
    argv = [sys.executable, "-m", CHECKER_MODULE, "--source", layout.path("checker", "source.ipynb")]
    argv += ["--assignment", learner.assignment, "--learner", address, "--shared", layout.path("checker", "shared")]
    argv += ["--timeout", str(int(timeout)), "--restart", layout.restart_socket()]
    argv += ["--ended", f"{layout.backend.inside(Mount(layout.host('control'), CONTROL))}/{ENDED}"]
    argv += ["--only", ",".join(only)] if only is not None else []
    argv += ["--load-timeout", str(loading)] if loading else []
    argv += ["--warm"] if warm else []
    if learner.traced:
        argv += ["--trace", layout.trace("checker")]
    # The checker's TMPDIR is its own on every backend: bwrap's private /tmp, plain's folder of the job's own.
    wall = loading + overall_seconds(trusted, only, timeout)
    job = Job(tuple(argv), layout.host("scratch-checker"), layout.mounts("checker"), wall)
    return start(layout, "checker", job)


def answer_is_a_loop(assignment: str) -> bool:
    """The assignment's answer is an agent loop: its re-check runs on the loopless library."""
    registered = REGISTRY.get(assignment)
    return registered is not None and registered.answer_is_a_loop


def runs_agents(assignment: str) -> bool:
    """The assignment's checks run agents (an unknown one's may): its re-check's processes load the model's SDK first."""
    registered = REGISTRY.get(assignment)
    return registered is None or registered.runs_agents


def run(
    notebook: str | Path,
    assignment: str,
    *,
    source: str | Path,
    only: list[str] | None = None,
    timeout: int = DEFAULT_TIMEOUT,
    backend: Backend | None = None,
    learner: LearnerProcess | None = None,
) -> Report:
    """Re-check ``notebook`` against the trusted ``source``: the learner's process and the checker, each in ``sandbox``.

    ``learner``: the process that already ran the notebook's cells for nbgrader (it is stopped
    here); without one, a learner's process is started for ``notebook`` (:func:`as_graded`), on
    the loopless library where the assignment's answer is a loop, on ``backend`` (None: the plain
    one, as ``grade --no-sandbox`` runs, isolating nothing). Cells it could not confirm (a process died, hit a limit or printed no result) come
    back failed with the reason, and the report is ``inconclusive``. Only the cells asked about
    (``only``) are read from its result.
    """
    trusted = json.loads(Path(source).read_text(encoding="utf-8"))
    checker = None
    if learner is None:
        import nbformat

        nb = as_graded(nbformat.read(str(notebook), as_version=4), trusted)
        loading = timeout * sum(1 for c in nb.cells if c.cell_type == "code") + STARTUP
        agents = runs_agents(assignment)
        learner = LearnerProcess.start(
            nb,
            None,
            assignment,
            timeout=timeout,
            wall=loading + overall_seconds(trusted, only, timeout),
            backend=backend or PlainBackend(),
            loopless=answer_is_a_loop(assignment),
            # its test cells are blank: none imported what the checks' values need
            anthropic=agents,
        )
        # started beside it: the two interpreters' starts and imports overlap (the checker waits for its socket)
        checker = _start_checker(learner, trusted, only, timeout, loading=loading, warm=agents)
    try:
        _, why = learner.executed(1 << 30)
        if learner.ended():  # it never served: nothing to re-check against
            if checker is not None:
                checker(STOP_GRACE)  # it sees the ended mark and gives up
            why = f"the learner's process ended before the re-check: {why}"
            return Report(dict.fromkeys(only or [], why), inconclusive=why)
        # waited for without a timeout: never None
        checked = (checker or _start_checker(learner, trusted, only, timeout))() or Outcome(-1, b"", b"", None, 0.0)
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
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if stopped or is_test(cell):
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


def _read_report(checked: Outcome, learned: Outcome, only: list[str] | None) -> Report:
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
    cells = {str(k): (None if v is None else (printable(str(v)[:400]) or "failed")) for k, v in result["cells"].items()}
    inconclusive = result.get("inconclusive")
    return Report(
        {k: v for k, v in cells.items() if only is None or k in only},
        load_errors=[e for e in result.get("load_errors") or [] if isinstance(e, dict)],
        inconclusive=printable(inconclusive) if isinstance(inconclusive, str) else None,
        visible_failures=[g for g in result.get("visible_failures") or [] if isinstance(g, str) and g in cells],
    )
