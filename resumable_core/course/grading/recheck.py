"""Re-check a graded notebook's test cells outside the learner's kernel, across a process boundary.

``python -m resumable_core.course.grading.recheck NOTEBOOK --assignment A --learner SOCKET
[--source SOURCE_NB] [--only ID,...]`` is the *checker*: it prints one JSON line ``{"cells": {test
cell grade_id: null | "why it failed"}, "load_errors": [...]}`` on stdout (:class:`Report`).

:func:`run` starts two processes, each in its own sandbox: the learner's (:mod:`.learner_server`),
which loads the notebook's cells with the library's learner view (no hidden checks, no answer key),
and the checker, which holds every check, hidden ones included, and never runs a line of the
learner's code: each test cell's check calls are read from the trusted source notebook, and the
learner's names reach the checks as :class:`.rpc.RemoteFunction` objects (or plain values), called
in the learner's process. Only data comes back (:mod:`.rpc`). Why, and what it still cannot catch:
``docs/architecture.md``, "The isolated re-check". An inconclusive re-run scores the cells it was
asked about 0, "needs review" (:mod:`.workers`).
"""

from __future__ import annotations

import argparse
import ast
import copy
import dataclasses
import functools
import json
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..assignments import REGISTRY
from . import rpc
from .learner_view import learner_library
from .notebook_cells import graded_sources, info, learner_cells, setup_cells
from .sandbox import Limits, Result, Sandbox, capped_folder, run_plain

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

# -- 1. the checks, bound before any learner code can run --------------------------------------


def _bind() -> dict[str, dict[str, dict[str, Callable[..., None]]]]:
    """Assignment -> check module name -> its ``check_*`` function objects, taken now."""
    bound: dict[str, dict[str, dict[str, Callable[..., None]]]] = {}
    for name, a in REGISTRY.items():
        modules = (a.checks(), a.hidden())
        bound[name] = {m.__name__: {k: v for k, v in vars(m).items() if k.startswith("check_")} for m in modules}
    return bound


_BOUND = _bind()


@dataclass(frozen=True)
class CheckCall:
    """One call a test cell makes: a bound check, its positional arguments, its keyword literals."""

    check: Callable[..., None]
    args: tuple[tuple[str, Any], ...]
    """Each ``("name", a name the notebook's cells define)`` or ``("value", a literal)``."""
    kwargs: dict[str, Any] = field(default_factory=dict)

    def run(self, names: Mapping[str, Any] | Callable[[str], Any]) -> None:
        """Call the check on the learner's names and a fresh copy of every literal.

        ``names`` is a namespace (a dict) or what looks a name up (:meth:`.rpc.Learner.lookup`).
        """
        lookup = names if callable(names) else functools.partial(_defined, names)
        values = [lookup(arg) if kind == "name" else copy.deepcopy(arg) for kind, arg in self.args]
        self.check(*values, **copy.deepcopy(self.kwargs))


def _defined(ns: Mapping[str, Any], name: str) -> Any:
    if name not in ns:
        raise AssertionError(f"{name} is not defined by the notebook's cells")
    return ns[name]


class UnknownCheckError(ValueError):
    """A trusted test cell calls a ``check_*`` this module did not bind; ``.call`` names it."""

    def __init__(self, call: str, reason: str) -> None:
        super().__init__(f"{call}: {reason}; add the check to its module or fix the test cell")
        self.call = call
        self.reason = reason


def _aliases(trees: list[ast.Module], modules: dict[str, Any]) -> dict[str, str]:
    """Local name -> check module name, for every import of a check module in ``trees``."""
    out = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                pairs = [(f"{node.module}.{a.name}", a.asname or a.name) for a in node.names]
            elif isinstance(node, ast.Import):
                pairs = [(a.name, a.asname) for a in node.names if a.asname]
            else:
                continue
            out.update({alias: module for module, alias in pairs if module in modules and alias})
    return out


def _argument(node: ast.expr) -> tuple[str, Any]:
    return ("name", node.id) if isinstance(node, ast.Name) else ("value", ast.literal_eval(node))


def check_calls(assignment: str, test_source: str, setup_sources: Sequence[str] = ()) -> list[CheckCall]:
    """The ``<alias>.check_*(...)`` calls of a trusted test cell, in order, bound to this module's checks.

    ``<alias>`` is a check module of ``assignment`` imported in the setup cells or the cell itself.
    A ``check_*`` call on any other name raises :class:`UnknownCheckError`.
    """
    modules = _BOUND.get(assignment, {})
    tree = ast.parse(test_source)
    aliases = _aliases([*(ast.parse(s) for s in setup_sources), tree], modules)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)]
    out = []
    for node in sorted(calls, key=lambda n: (n.lineno, n.col_offset)):
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr.startswith("check_")):
            continue
        owner = func.value.id if isinstance(func.value, ast.Name) else ast.unparse(func.value)
        where = f"{owner}.{func.attr}"
        if owner not in aliases:
            raise UnknownCheckError(where, f"{owner} is not a check module of {assignment!r} imported there")
        check = modules[aliases[owner]].get(func.attr)
        if check is None:
            raise UnknownCheckError(where, f"{aliases[owner]} defines no {func.attr}")
        kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
        out.append(CheckCall(check, tuple(_argument(a) for a in node.args), kwargs))
    return out


def planned_calls(source: dict, assignment: str) -> dict[str, list[CheckCall]]:
    """Test cell grade_id -> the check calls the trusted ``source`` notebook's cell makes (cells with none left out)."""
    setup = [src for _, src in setup_cells(source)]
    plan = {gid: check_calls(assignment, src, setup) for gid, src in graded_sources(source).items()}
    return {gid: calls for gid, calls in plan.items() if calls}


# -- 2. the checker ------------------------------------------------------------------------------


class _Timeout(BaseException):
    pass


def _on_alarm(signum: int, frame: Any) -> None:
    raise _Timeout()


class Report(dict):
    """{test cell grade_id: None | why it failed in isolation}, and how loading the learner's code went.

    ``load_errors``: [{"cell", "error", "kernel"}] for each learner cell that raised (or could not
    run) in the learner's process, with the error the kernel showed for it (None if it ran fine
    there); ``inconclusive``: why the failures cannot be trusted (a process died or hung, or the
    learner's code raised there but not in the kernel), else None.
    """

    def __init__(
        self, cells: dict | None = None, *, load_errors: list | None = None, inconclusive: str | None = None
    ) -> None:
        super().__init__(cells or {})
        self.load_errors = list(load_errors or [])
        self.inconclusive = inconclusive
        if inconclusive is None:
            new = [e for e in self.load_errors if e.get("kernel") is None]
            if new:
                self.inconclusive = (f"{new[0]['cell']} raised {new[0]['error']} here but not in the kernel")[:200]

    def to_json(self) -> str:
        return json.dumps({"cells": dict(self), "load_errors": self.load_errors}, sort_keys=True)


def _load_errors(raw: Any) -> list[dict[str, Any]]:
    """The learner's process's account of loading, kept only as short strings (it is untrusted)."""
    out = []
    for e in raw if isinstance(raw, list) else []:
        if isinstance(e, dict):
            kernel = e.get("kernel")
            out.append(
                {
                    "cell": str(e.get("cell"))[:80],
                    "error": str(e.get("error"))[:150],
                    "kernel": None if kernel is None else str(kernel)[:150],
                }
            )
    return out[:50]


def _recheck_cell(calls: list[CheckCall], learner: rpc.Learner, timeout: int) -> str | None:
    """Run one test cell's checks on the learner's names; why it failed, or None."""
    reason = None
    signal.alarm(max(1, int(timeout)))
    try:
        for call in calls:
            call.run(learner.lookup)
    except _Timeout:
        reason = f"did not finish within {timeout} s"
    except NameError as e:
        reason = str(e)
    except AssertionError as e:
        reason = str(e) or "assertion failed"
    except BaseException as e:  # noqa: BLE001 - anything else the learner's code raised
        reason = f"{type(e).__name__}: {e}"
    finally:
        signal.alarm(0)
    return reason


def connect(learner: rpc.Learner, ended: Path, deadline: float) -> str | None:
    """Wait until the learner's process answers; None, or why it never did."""
    while True:
        try:
            learner.session()
            return None
        except OSError:
            if ended.exists():
                return "the learner's process ended while loading the notebook"
            if time.monotonic() > deadline:
                return "the learner's process did not finish loading the notebook in time"
            time.sleep(0.05)


def recheck(source: dict, assignment: str, learner: rpc.Learner, only: list[str] | None, timeout: int) -> Report:
    """Run the test cells of ``source`` that call checks, on the names of the learner's process."""
    plan = planned_calls(source, assignment)
    wanted = [g for g in (only if only is not None else sorted(plan)) if g in plan]
    if not wanted:
        return Report()
    signal.signal(signal.SIGALRM, _on_alarm)
    try:
        load_errors = _load_errors(learner.session().request({"op": "loaded"}))
    except (rpc.ProtocolError, OSError, EOFError) as e:
        why = f"the learner's process did not answer ({type(e).__name__})"
        return Report(dict.fromkeys(wanted, why), inconclusive=why)
    report = Report(load_errors=load_errors)
    loading = "; while loading, {cell} raised {error}".format(**load_errors[0]) if load_errors else ""
    for gid in wanted:
        reason = _recheck_cell(plan[gid], learner, timeout)
        report[gid] = (reason[: 300 - len(loading[:150])] + loading[:150]) if reason else None
    return report


# -- 3. the two processes, each in its sandbox --------------------------------------------------

RPC = "/grading/rpc"
"""Where the socket folder appears in both sandboxes."""
SHARED = "/grading/shared"
"""The folder both sandboxes see at the same path: the checks' scratch files (a checkpoint path
the checker hands the learner's ``resume`` must name the same file on both sides)."""
IN = "/grading/in"


def _trusted_source(source: Path, dest: Path) -> Path:
    """``source`` without its solutions (blanked solution cells): all the re-check needs of it, in ``dest``."""
    nb = json.loads(source.read_text(encoding="utf-8"))
    for c in nb.get("cells", []):
        if info(c).get("solution"):
            c["source"] = ""
    dest.write_text(json.dumps(nb), encoding="utf-8")
    return dest


def _overall(notebook: Path, only: list[str] | None, timeout: int) -> int:
    """Seconds the whole re-run may take: the per-cell timeout for every learner and test cell, plus a minute."""
    try:
        n_cells = len(learner_cells(json.loads(notebook.read_text(encoding="utf-8"))))
    except (OSError, ValueError, AttributeError):
        n_cells = 0
    n = len(only) if only is not None else 20
    return int(timeout) * (n + n_cells + 1) + 60


@dataclass
class _Layout:
    """One re-run's folders on the host and the paths its processes are given."""

    folder: Path
    sandboxed: bool
    files: dict[str, Path] = field(default_factory=dict)

    def host(self, name: str) -> Path:
        path = self.folder / name
        path.mkdir(exist_ok=True)
        return path

    def path(self, name: str) -> str:
        """Where the file (NOTEBOOK, SOURCE) or folder (rpc, shared) appears to the processes."""
        if name in self.files:
            return f"{IN}/{self.files[name].name}" if self.sandboxed else str(self.files[name])
        return {"rpc": RPC, "shared": SHARED}[name] if self.sandboxed else str(self.host(name))

    def binds(self) -> tuple[list[tuple[Path, str]], list[tuple[Path, str]]]:
        ro = [(p, f"{IN}/{p.name}") for p in self.files.values()]
        return ro, [(self.host("rpc"), RPC), (self.host("shared"), SHARED)]


def _start(
    argv: list[str],
    layout: _Layout,
    scratch: str,
    box: Sandbox | None,
    env: dict[str, str],
    wall: float,
    ended: Path | None = None,
) -> Callable[[], Result]:
    """Run ``argv`` (in ``box``, else plainly with ``env``) on a thread; returns what waits for its result.

    ``ended`` is created when it ends (so the checker stops waiting for a learner's process that died).
    """
    out: list[Result] = []
    limits = dataclasses.replace(box.limits if box else Sandbox(None).limits, wall=wall)

    def target() -> None:
        if box is not None:
            ro, rw = layout.binds()
            out.append(dataclasses.replace(box, limits=limits).run(argv, layout.host(scratch), ro=ro, rw=rw))
        else:
            out.append(run_plain(argv, layout.host(scratch), limits, env))
        if ended is not None:
            ended.touch()

    thread = threading.Thread(target=target, daemon=True)
    thread.start()

    def wait() -> Result:
        thread.join()
        return out[0] if out else Result(-1, b"", b"", None, 0.0)

    return wait


def _processes(
    layout: _Layout, assignment: str, only: list[str] | None, timeout: int, env: dict[str, str], box: Sandbox | None
) -> tuple[Result, Result]:
    """Run the learner's process and the checker until the checker ends; their results."""
    overall = _overall(layout.files["NOTEBOOK"], only, timeout)
    address = f"{layout.path('rpc')}/learner.sock"
    source = ["--source", layout.path("SOURCE")] if "SOURCE" in layout.files else []
    learner = [sys.executable, "-m", "resumable_core.course.grading.learner_server", layout.path("NOTEBOOK")]
    learner += ["--socket", address, "--timeout", str(int(timeout)), "--wall", str(overall), *source]
    checker = [sys.executable, "-m", __name__, layout.path("NOTEBOOK"), "--assignment", assignment]
    checker += ["--learner", address, "--timeout", str(int(timeout)), *source]
    checker += ["--only", ",".join(only)] if only is not None else []
    learner_box = dataclasses.replace(box, library=learner_library(box.library)) if box and box.library else box
    checker_box = dataclasses.replace(box, env={**box.env, "TMPDIR": SHARED}) if box else None
    plain_env = {**env, "TMPDIR": str(layout.host("shared"))}
    ended = layout.host("rpc") / "learner.sock.ended"
    wait_learner = _start(learner, layout, "learner", learner_box, env, overall + 5, ended)
    wait_checker = _start(checker, layout, "checker", checker_box, plain_env, overall)
    checked = wait_checker()
    (layout.host("rpc") / "learner.sock.stop").touch()
    return checked, wait_learner()


def run(
    notebook: str | Path,
    assignment: str,
    *,
    source: str | Path | None = None,
    only: list[str] | None = None,
    timeout: int = 60,
    env: dict[str, str] | None = None,
    sandbox: Sandbox | None = None,
) -> Report:
    """Re-check ``notebook``: the learner's process and the checker, each in ``sandbox`` (plainly without).

    Both see a copy of the notebook and the source without its solutions; ``env`` is used only
    without a sandbox (the sandbox's allowlist holds otherwise). Cells it could not confirm (a
    process died, hit a limit or printed no result) come back failed with the reason, and the
    report is ``inconclusive``. Only the cells asked about (``only``) are read from its result.
    """
    env = dict(os.environ if env is None else env)
    # Both processes write here (the socket, the checks' scratch): a capped tmpfs where one can be mounted.
    with capped_folder((sandbox.limits if sandbox else Limits()).disk) as tmp:
        layout = _Layout(Path(tmp), sandboxed=sandbox is not None)
        inputs = layout.host("in")
        layout.files["NOTEBOOK"] = Path(shutil.copy(notebook, inputs / "notebook.ipynb"))
        if source is not None:
            layout.files["SOURCE"] = _trusted_source(Path(source), inputs / "source.ipynb")
        checked, learned = _processes(layout, assignment, only, timeout, env, sandbox)
    return _read_report(checked, learned, only)


def _read_report(checked: Result, learned: Result, only: list[str] | None) -> Report:
    why = None
    if checked.limit:
        why = f"the isolated re-run hit its {checked.limit} limit"
    elif learned.limit and learned.limit.split()[0] != "wall":
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
    cells = {str(k): (None if v is None else str(v)[:400]) for k, v in result["cells"].items()}
    return Report(
        {k: v for k, v in cells.items() if only is None or k in only},
        load_errors=[e for e in result.get("load_errors") or [] if isinstance(e, dict)],
        inconclusive=result.get("inconclusive") if isinstance(result.get("inconclusive"), str) else None,
    )


def main(argv: list[str] | None = None) -> int:
    """The checker's command line: print the re-check's JSON (:meth:`Report.to_json`) on stdout."""
    p = argparse.ArgumentParser(
        prog="python -m resumable_core.course.grading.recheck", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("notebook", help="the graded (autograded) notebook")
    p.add_argument("--assignment", required=True)
    p.add_argument("--learner", required=True, help="the Unix socket of the learner's process")
    p.add_argument(
        "--source",
        default=None,
        help="the instructor's source notebook (trusted setup and test cells; default: the notebook itself)",
    )
    p.add_argument(
        "--only", default=None, help="comma-separated test cell ids to re-check (default: every one that calls a check)"
    )
    p.add_argument("--timeout", type=int, default=60, help="seconds per test cell")
    p.add_argument("--load-timeout", type=float, default=600.0, help="seconds to wait for the learner's process")
    args = p.parse_args(argv)
    out = os.fdopen(os.dup(1), "w")  # the result goes here; whatever a check prints goes to /dev/null
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - open until os._exit
    path = Path(args.source or args.notebook)
    source = json.loads(path.read_text(encoding="utf-8"))
    only = [g for g in args.only.split(",") if g] if args.only is not None else None
    learner = rpc.Learner(args.learner)
    ended = Path(f"{args.learner}.ended")
    why = connect(learner, ended, time.monotonic() + args.load_timeout)
    if why:
        wanted = only if only is not None else sorted(planned_calls(source, args.assignment))
        report = Report(dict.fromkeys(wanted, why), inconclusive=why)
    else:
        report = recheck(source, args.assignment, learner, only, args.timeout)
    payload = json.loads(report.to_json())
    payload["inconclusive"] = report.inconclusive
    out.write(json.dumps(payload, sort_keys=True) + "\n")
    out.flush()
    os._exit(0)  # no atexit or finalizer runs after the result


if __name__ == "__main__":
    sys.exit(main())
