"""Re-check a graded notebook's test cells in a fresh process, outside the learner's kernel.

``python -m resumable_core.course.grading.recheck NOTEBOOK --assignment A [--source SOURCE_NB] [--only ID,...]``
prints one JSON line ``{"cells": {test cell grade_id: null | "why it failed"}, "load_errors": [...],
"changed": [...]}`` on stdout (:class:`Report`).

Why it exists, how it works and what it still cannot catch: ``docs/architecture.md``, section
"The isolated re-check". In short: the checks are bound at import, before any learner code; the
calls of each test cell are read from the trusted source notebook; the learner's cells run again
under an alarm; whatever they patched is restored, and a check during which anything changed fails.
An inconclusive re-run scores the cells it was asked about 0, "needs review" (:mod:`.workers`).
"""

from __future__ import annotations

import argparse
import ast
import builtins
import copy
import dataclasses
import importlib
import io
import json
import os
import pathlib
import pkgutil
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import tempfile
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..assignments import REGISTRY
from .sandbox import NOT_RUN, Sandbox

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

    def run(self, ns: dict[str, Any]) -> None:
        """Call the check on the learner's names in ``ns`` (a fresh copy of every literal)."""
        values = []
        for kind, arg in self.args:
            if kind == "name" and arg not in ns:
                raise AssertionError(f"{arg} is not defined by the notebook's cells")
            values.append(ns[arg] if kind == "name" else copy.deepcopy(arg))
        self.check(*values, **copy.deepcopy(self.kwargs))


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


# -- 2. the notebook's cells ---------------------------------------------------------------------

_HARMLESS_MAGICS = {"matplotlib", "config", "load_ext", "reload_ext", "autoreload", "precision", "pprint"}
"""Line magics that only configure the kernel's display or reloading: skipped without a word."""


# The cells are read from plain JSON here rather than through course.notebooks (nbgrader.utils):
# this module runs once per submission in a fresh process, and importing nbgrader costs seconds.


def _info(cell: dict) -> dict:
    return (cell.get("metadata") or {}).get("nbgrader") or {}


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def setup_cells(nb: dict) -> list[tuple[str | None, str]]:
    """(grade_id, source) of the instructor's locked code cells before the first solution cell."""
    out = []
    for c in nb.get("cells", []):
        info = _info(c)
        if c.get("cell_type") != "code":
            continue
        if info.get("solution"):
            break
        if info.get("locked") and not info.get("grade"):
            out.append((info.get("grade_id"), _source(c)))
    return out


def learner_cells(nb: dict) -> list[tuple[str, str, str | None]]:
    """(label, source, error the kernel showed or None) of every code cell the learner could write.

    That is every code cell except nbgrader test cells and the instructor's locked cells: the
    solution cells and cells without nbgrader metadata (added by the learner), in notebook order;
    but not the cells the sandbox stopped (the one that killed the kernel and those after it): no
    test cell that scored ran after them.
    """
    out = []
    for n, c in enumerate((c for c in nb.get("cells", []) if c.get("cell_type") == "code"), start=1):
        info = _info(c)
        if not info.get("solution") and (info.get("grade") or info.get("locked")):
            continue
        label = f"cell {info['grade_id']!r}" if info.get("grade_id") else f"added code cell {n}"
        errors = [o for o in c.get("outputs") or [] if o.get("output_type") == "error"]
        if any(o.get("ename") == NOT_RUN for o in errors):
            continue
        kernel = f"{errors[0].get('ename', 'Error')}: {errors[0].get('evalue', '')}" if errors else None
        out.append((label, _source(c), kernel))
    return out


def python_source(source: str) -> tuple[str, str | None]:
    """The cell as plain Python (IPython magics and shell escapes blanked) and the first one that
    does more than configure the kernel (None if none), which this process cannot run."""
    lines, unrunnable = [], None
    for ln in source.splitlines():
        s = ln.lstrip()
        if s.startswith(("%", "!")):
            name = s.lstrip("%!").split(maxsplit=1)[0] if s.lstrip("%!") else ""
            if not (s.startswith("%") and not s.startswith("%%") and name in _HARMLESS_MAGICS):
                unrunnable = unrunnable or s.split(maxsplit=1)[0]
            lines.append("")
        else:
            lines.append(ln)
    return "\n".join(lines), unrunnable


def graded_sources(nb: dict) -> dict[str, str]:
    """grade_id -> source of every graded code cell."""
    out = {}
    for c in nb.get("cells", []):
        info = _info(c)
        if c.get("cell_type") == "code" and info.get("grade") and not info.get("solution"):
            out[info["grade_id"]] = _source(c)
    return out


def planned_calls(source: dict, assignment: str) -> dict[str, list[CheckCall]]:
    """Test cell grade_id -> the check calls the trusted ``source`` notebook's cell makes (cells with none left out)."""
    setup = [src for _, src in setup_cells(source)]
    plan = {gid: check_calls(assignment, src, setup) for gid, src in graded_sources(source).items()}
    return {gid: calls for gid, calls in plan.items() if calls}


# -- 3. the snapshot of what the checks rely on -------------------------------------------------

_STDLIB = (builtins, os, os.path, io, json, copy, tempfile, signal, stat, shutil, sqlite3, pathlib, types, importlib)


def _load_everything() -> None:
    """Import every ``resumable_core`` module and load the package's lazy names (so nothing new appears later)."""
    import resumable_core

    for m in pkgutil.iter_modules(resumable_core.__path__):
        if m.name != "__main__":  # the command line: not used by any check
            importlib.import_module(f"resumable_core.{m.name}")
    for name in resumable_core.__all__:
        getattr(resumable_core, name)
    import anthropic  # noqa: F401  (the checks import it lazily)

    tempfile.gettempdir()  # tempfile fills two caches on first use
    next(tempfile._get_candidate_names())  # type: ignore[attr-defined]  # private, but the cache the checks would fill


def _watched() -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    mods = [m for n, m in sorted(sys.modules.items()) if n == "resumable_core" or n.startswith("resumable_core.")]
    for m in [*mods, *_STDLIB]:
        out.append((m.__name__, m))
        for k, v in list(vars(m).items()):
            if isinstance(v, type) and (v.__module__ or "").startswith("resumable_core") and m in mods:
                out.append((f"{m.__name__}.{k}", v))
    out.append(("pathlib.Path", pathlib.Path))
    out.append(("pathlib.PosixPath", pathlib.PosixPath))
    return out


class Snapshot:
    """The attributes of the watched modules and classes, function code objects and ``sys.modules``."""

    def __init__(self) -> None:
        self.owners = _watched()
        self.attrs = {name: dict(vars(obj)) for name, obj in self.owners}
        self.code: dict[str, tuple[Any, Any, Any, Any]] = {}
        for name, obj in self.owners:
            for k, v in vars(obj).items():
                fn = v.__func__ if isinstance(v, (staticmethod, classmethod)) else v
                if isinstance(fn, types.FunctionType) and (fn.__module__ or "").startswith("resumable_core"):
                    self.code[f"{name}.{k}"] = (fn, fn.__code__, fn.__defaults__, fn.__kwdefaults__)
        self.modules = {k: v for k, v in sys.modules.items() if k.startswith("resumable_core")}

    def changes(self) -> list[str]:
        """What differs from the snapshot (names like ``resumable_core.course.checks.support.CountingToolbox.count``)."""
        found = []
        for name, obj in self.owners:
            before, now = self.attrs[name], vars(obj)
            for k in sorted(set(before) | set(now)):
                if k == "__warningregistry__" or (k not in before and isinstance(now.get(k), types.ModuleType)):
                    continue
                if k not in now or k not in before or now[k] is not before[k]:
                    found.append(f"{name}.{k}")
        for name, (fn, code, defaults, kwdefaults) in self.code.items():
            if fn.__code__ is not code or fn.__defaults__ is not defaults or fn.__kwdefaults__ is not kwdefaults:
                found.append(f"{name}.__code__")
        for k in sorted(set(self.modules) | {k for k in sys.modules if k.startswith("resumable_core")}):
            if sys.modules.get(k) is not self.modules.get(k) and k in self.modules:
                found.append(f"sys.modules[{k!r}]")
        return found

    def restore(self) -> None:
        """Put every watched attribute back as it was."""
        for name, obj in self.owners:
            before, now = self.attrs[name], vars(obj)
            for k in [
                k
                for k in now
                if k not in before and k != "__warningregistry__" and not isinstance(now[k], types.ModuleType)
            ]:
                try:  # noqa: SIM105 - no library call on the restore path (contextlib is not watched)
                    delattr(obj, k)
                except (AttributeError, TypeError):  # a read-only attribute stays as it is
                    pass
            for k, v in before.items():
                if now.get(k, _MISSING) is not v:
                    try:  # noqa: SIM105 - likewise
                        setattr(obj, k, v)
                    except (AttributeError, TypeError):
                        pass
        for fn, code, defaults, kwdefaults in self.code.values():
            fn.__code__, fn.__defaults__, fn.__kwdefaults__ = code, defaults, kwdefaults
        sys.modules.update(self.modules)


_MISSING = object()


# -- 4. running it --------------------------------------------------------------------------------


class _Timeout(BaseException):
    pass


def _on_alarm(signum: int, frame: Any) -> None:
    raise _Timeout()


class Report(dict):
    """{test cell grade_id: None | why it failed in isolation}, and how loading the learner's code went.

    ``load_errors``: [{"cell", "error", "kernel"}] for each learner cell that raised (or could not
    run) here, with the error the kernel showed for it (None if it ran fine there); ``changed``:
    what loading the learner's code changed (undone before the checks); ``inconclusive``: why the
    failures cannot be trusted (the process died or hung, or the learner's code raised here but not
    in the kernel), else None.
    """

    def __init__(
        self,
        cells: dict | None = None,
        *,
        load_errors: list | None = None,
        changed: list | None = None,
        inconclusive: str | None = None,
    ) -> None:
        super().__init__(cells or {})
        self.load_errors = list(load_errors or [])
        self.changed = list(changed or [])
        self.inconclusive = inconclusive
        if inconclusive is None:
            new = [e for e in self.load_errors if e.get("kernel") is None]
            if new:
                self.inconclusive = (f"{new[0]['cell']} raised {new[0]['error']} here but not in the kernel")[:200]

    def to_json(self) -> str:
        return json.dumps(
            {"cells": dict(self), "load_errors": self.load_errors, "changed": self.changed}, sort_keys=True
        )


def _load(ns: dict, notebook: dict, timeout: int) -> list[dict]:
    """Run every learner cell of ``notebook`` in ``ns`` as the kernel did (on after an error); its errors."""
    errors = []
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
            errors.append(
                {"cell": label, "error": error.splitlines()[0][:150] if error.strip() else error, "kernel": kernel}
            )
    return errors


def _undo_loading(snap: Snapshot, meta_path: list[Any], path_hooks: list[Any]) -> list[str]:
    """What loading the learner's code changed; all of it is put back before the checks run."""
    changed = snap.changes()
    snap.restore()
    sys.meta_path[:], sys.path_hooks[:] = meta_path, path_hooks
    sys.settrace(None)
    sys.setprofile(None)
    signal.signal(signal.SIGALRM, _on_alarm)
    return changed


def _recheck_cell(calls: list[CheckCall], ns: dict[str, Any], snap: Snapshot, timeout: int) -> str | None:
    """Run one test cell's checks on the loaded names; why it failed, or None."""
    reason = None
    signal.alarm(max(1, int(timeout)))
    try:
        for call in calls:
            call.run(ns)
    except _Timeout:
        reason = f"did not finish within {timeout} s"
    except AssertionError as e:
        reason = str(e) or "assertion failed"
    except BaseException as e:  # noqa: BLE001 - anything else the learner's code raised
        reason = f"{type(e).__name__}: {e}"
    finally:
        signal.alarm(0)
    now_changed = snap.changes()
    if now_changed:
        snap.restore()
        reason = f"the submission changed {', '.join(now_changed[:3])} while the check ran"
    return reason


def recheck(
    notebook: dict, assignment: str, source: dict | None = None, only: list[str] | None = None, timeout: int = 60
) -> Report:
    """Run the test cells of ``notebook`` that call checks, in this process (call it in a fresh one)."""
    source = source if source is not None else notebook
    plan = planned_calls(source, assignment)  # from the trusted source, before any learner code runs
    wanted = [g for g in (only if only is not None else sorted(plan)) if g in plan]
    if not wanted:
        return Report()
    _load_everything()
    ns: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    for _, src in setup_cells(source):  # the instructor's setup, trusted
        exec(compile(src, "<setup>", "exec"), ns)
    snap = Snapshot()
    meta_path, path_hooks = list(sys.meta_path), list(sys.path_hooks)
    old = signal.signal(signal.SIGALRM, _on_alarm)
    try:
        load_errors = _load(ns, notebook, timeout)
        report = Report(load_errors=load_errors, changed=_undo_loading(snap, meta_path, path_hooks))
        loading = "; while loading, {cell} raised {error}".format(**load_errors[0]) if load_errors else ""
        for gid in wanted:
            reason = _recheck_cell(plan[gid], ns, snap, timeout)
            report[gid] = (reason[: 300 - len(loading[:150])] + loading[:150]) if reason else None
    finally:
        signal.signal(signal.SIGALRM, old)
    return report


def _trusted_source(source: Path, dest: Path) -> Path:
    """``source`` without its solutions (blanked solution cells): all the re-check needs of it, in ``dest``."""
    nb = json.loads(source.read_text(encoding="utf-8"))
    for c in nb.get("cells", []):
        if _info(c).get("solution"):
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


def _execute(
    cmd: list[str], folder: Path, files: dict[str, Path], overall: int, env: dict[str, str] | None, box: Sandbox | None
) -> tuple[int, str, str | None]:
    """Run the re-check; (exit code, stdout, why it is inconclusive before reading it or None)."""
    if box is not None:
        scratch = folder / "scratch"
        scratch.mkdir()
        inside = {name: f"/grading/in/{path.name}" for name, path in files.items()}
        args = [inside.get(a, a) for a in cmd]
        limits = dataclasses.replace(box.limits, wall=float(overall))
        ro = [(path, inside[name]) for name, path in files.items()]
        result = dataclasses.replace(box, limits=limits).run(args, scratch, ro=ro)
        why = f"the isolated re-run hit its {result.limit} limit" if result.limit else None
        return result.returncode, result.stdout.decode(errors="replace"), why
    args = [str(files[a]) if a in files else a for a in cmd]
    env = {**(os.environ if env is None else env), "TMPDIR": str(folder)}  # the checks' scratch folders go with it
    try:
        proc = subprocess.run(args, cwd=folder, env=env, capture_output=True, text=True, timeout=overall)
    except subprocess.TimeoutExpired:
        return -1, "", f"the isolated re-run did not finish within {overall} s"
    return proc.returncode, proc.stdout, None


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
    """Re-check ``notebook`` in a fresh ``python -m resumable_core.course.grading.recheck`` process.

    With ``sandbox`` that process runs in it (``env`` is then unused: the sandbox's allowlist holds),
    seeing a copy of the notebook and the source without its solutions. Cells it could not confirm
    (the process died, hit a limit or printed no result) come back failed with the reason, and the
    report is ``inconclusive``. Only the cells asked about (``only``) are read from its result.
    """
    cmd = [sys.executable, "-m", "resumable_core.course.grading.recheck", "NOTEBOOK", "--assignment", assignment]
    cmd += ["--timeout", str(int(timeout))]
    if only is not None:
        cmd += ["--only", ",".join(only)]
    overall = _overall(Path(notebook), only, timeout)
    with tempfile.TemporaryDirectory(prefix="resumable-isolated-") as tmp:
        folder = Path(tmp)
        files = {"NOTEBOOK": Path(shutil.copy(notebook, folder / "notebook.ipynb"))}
        if source is not None:
            files["SOURCE"] = _trusted_source(Path(source), folder / "source.ipynb")
            cmd += ["--source", "SOURCE"]
        returncode, stdout, why = _execute(cmd, folder, files, overall, env, sandbox)
    if why:
        return Report(dict.fromkeys(only or [], why), inconclusive=why)
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    try:
        result = json.loads(lines[-1]) if returncode == 0 and lines else None
    except json.JSONDecodeError:
        result = None
    if not isinstance(result, dict) or not isinstance(result.get("cells"), dict):
        why = f"the isolated re-run ended with exit code {returncode} and no result"
        return Report(dict.fromkeys(only or [], why), inconclusive=why)
    cells = {str(k): (None if v is None else str(v)[:400]) for k, v in result["cells"].items()}
    return Report(
        {k: v for k, v in cells.items() if only is None or k in only},
        load_errors=[e for e in result.get("load_errors") or [] if isinstance(e, dict)],
        changed=[str(c) for c in result.get("changed") or []],
    )


def main(argv: list[str] | None = None) -> int:
    """The command line: print the re-check's JSON (:meth:`Report.to_json`) on the original stdout."""
    p = argparse.ArgumentParser(
        prog="python -m resumable_core.course.grading.recheck", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("notebook", help="the graded (autograded) notebook")
    p.add_argument("--assignment", required=True)
    p.add_argument(
        "--source",
        default=None,
        help="the instructor's source notebook (trusted setup and test cells; default: the notebook itself)",
    )
    p.add_argument(
        "--only", default=None, help="comma-separated test cell ids to re-check (default: every one that calls a check)"
    )
    p.add_argument("--timeout", type=int, default=60, help="seconds per test cell")
    args = p.parse_args(argv)
    out = os.fdopen(os.dup(1), "w")  # the result goes here; the learner's prints go to /dev/null
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - open until os._exit: the learner's prints go here
    nb = json.loads(Path(args.notebook).read_text(encoding="utf-8"))
    src = json.loads(Path(args.source).read_text(encoding="utf-8")) if args.source else None
    only = [g for g in args.only.split(",") if g] if args.only is not None else None
    report = recheck(nb, args.assignment, src, only, args.timeout)
    out.write(report.to_json() + "\n")
    out.flush()
    os._exit(0)  # no atexit or finalizer of the learner's runs after the result


if __name__ == "__main__":
    sys.exit(main())
