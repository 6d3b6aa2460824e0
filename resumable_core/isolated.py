"""Re-check a graded notebook's test cells outside the learner's kernel.

``python -m resumable_core.isolated NOTEBOOK --assignment A [--source SOURCE_NB] [--only ID,...]``
prints one JSON dict ``{test cell grade_id: null | "why it failed"}`` on stdout.

Why: the course's test cells call ``graders.check_*`` in the learner's own kernel, after the
learner's cells ran, so a learner cell can patch the checks (``setattr(graders, "check_x", ...)``)
and pass everything. ``python -m resumable_core grade`` therefore re-runs, for every test cell that
scored in nbgrader, the same checks in a fresh process that the learner's notebook never ran in:

1. the checks are bound (``CHECKS`` below: test cell -> the calls its source makes, kept equal to
   the notebooks by ``tests/test_isolated.py``) when this module is imported, before any learner
   code, so patching attributes of :mod:`resumable_core.graders` later cannot redirect them;
2. the instructor's setup cells (from the trusted source notebook) run first; then, from the
   learner's **solution cells only**, just the top-level ``import`` / ``from`` statements,
   ``def`` / ``async def`` / ``class`` definitions and plain assignments of literals run
   (AST-filtered: loops, calls, attribute assignments, expression statements are skipped). Code
   that would still run at definition time is cut too: annotations are dropped, a definition with
   a default value or class base that is not a plain name/attribute/literal is skipped, decorators
   are kept only when they are one of a few known harmless ones (``staticmethod``, ``property``,
   ``dataclass``, ...), a class body keeps only what a module keeps, a class with a ``metaclass=``
   or defining ``__init_subclass__`` is skipped;
3. the attributes of every ``resumable_core`` module and class (and function code objects), of
   ``builtins``, ``os``, ``io``, ``json``, ``copy``, ``tempfile``, ``pathlib`` and friends, and the
   ``resumable_core`` entries of ``sys.modules`` are snapshot before the learner's code runs; after
   the import and after every test cell the snapshot is compared and restored, and a test cell
   during which anything changed fails ("the submission changed ... while the check ran");
4. each test cell runs under an alarm (``--timeout``), and the learner's prints go to /dev/null
   (the result is written on a private copy of the original stdout).

Level-1 answers (``RESUME_ACTION``, a dict of literals) are checked directly: the value must be
one of ``course.ACTIONS`` and equal the answer the trusted test cell's hidden assertion compares
it with (read from the source notebook, so the answers are not written in this module).

What this still cannot catch (honestly): a learner's function *runs* inside the checks, in this
same process, so code in it can tamper while a check runs and undo its tampering before the check
ends (for example a patched method that restores itself after one call, or reaching the check's
frame with ``sys._getframe`` and editing its locals, or ``ctypes`` writes, or ``gc`` tricks); the
snapshot only sees what is left changed. Such code is much harder to write than the sample
monkeypatch, and :func:`resumable_core.grading.suspicious` still flags most of it for a reviewer
(``setattr``, attribute assignments on imported modules). Full protection needs the learner's
function in another process than the checker (an RPC boundary), which this module does not build.
A kernel that writes into ``site-packages`` (a ``.pth`` or ``sitecustomize``) reaches every later
Python process on the grading machine, this one included: grade untrusted classes in a throwaway
container. A learner who relies on top-level code other than imports, definitions and literal
assignments (for example ``READ_ONLY = frozenset(...)``) fails here where the kernel passed: the
grading reason says so, and an instructor can raise the score by hand in the gradebook.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import copy
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
from pathlib import Path
from typing import Any, Callable

from . import course as _course
from . import graders as _graders

# -- 1. the checks, bound before any learner code can run --------------------------------------

_BOUND: dict[str, Callable[..., None]] = {n: getattr(_graders, n) for n in dir(_graders) if n.startswith("check_")}
"""Every ``graders.check_*`` function object, taken when this module is imported."""
_ACTIONS: frozenset[str] = frozenset(_course.ACTIONS)

Call = tuple  # (check name, names of the learner's functions passed positionally, keyword arguments)

CHECKS: dict[str, dict[str, list[Call]]] = {
    "reconcile": {
        "test_reconcile_A": [("check_finished", ("reconcile",), {}), ("check_nothing_pending", ("reconcile",), {})],
        "test_reconcile_B": [("check_checkpoint_b", ("reconcile",), {})],
        "test_reconcile_C": [("check_checkpoint_c", ("reconcile",), {})],
        "test_read_only_tools": [("check_other_read_only_tools", ("reconcile",), {})],
        "test_side_effect_tools": [("check_other_side_effect_tools", ("reconcile",), {})],
        "test_unknown_tool": [("check_unknown_tool", ("reconcile",), {})],
        "test_api_accepts": [("check_api_accepts", ("reconcile",), {})],
        "test_round_trip": [("check_round_trip", ("reconcile",), {})],
    },
    "postmortem": {
        "test_incident": [("check_incident", ("reconcile",), {})],
        "test_read_file_rerun": [("check_read_file_rerun", ("reconcile",), {})],
        "test_every_path": [("check_every_crash_point", ("reconcile",), {}),
                            ("check_other_side_effect_tools", ("reconcile",), {}),
                            ("check_unknown_tool", ("reconcile",), {})],
        "bonus_ledger": [("check_ledger_incident", ("reconcile_with_ledger",), {})],
    },
    "resume_skeleton": {
        "test_round_trip": [("check_state_round_trip", ("save_state", "load_state"), {})],
        "test_missing": [("check_state_missing", ("load_state",), {})],
        "test_version": [("check_state_version_refused", ("load_state",), {"versions": [2]}),
                         ("check_state_version_refused", ("load_state",), {"versions": [0, 99, "1"]}),
                         ("check_load_never_modifies", ("save_state", "load_state"), {})],
        "test_kill_during_save": [("check_kill_during_save", ("save_state", "load_state"), {})],
        "test_durable_steps": [("check_durable_steps", ("save_state",), {})],
    },
}
"""Assignment -> test cell grade_id -> the ``graders`` calls its source makes (hidden ones included)."""

ANSWERS: dict[str, dict[str, tuple[str, str]]] = {
    "reconcile": {"test_level1_A": ("RESUME_ACTION", "A"), "test_level1_B": ("RESUME_ACTION", "B"),
                  "test_level1_C": ("RESUME_ACTION", "C")},
}
"""Assignment -> level-1 test cell -> (the learner's dict of answers, the key it checks)."""

_RESOLVED: dict[str, dict[str, list[tuple[Callable[..., None], tuple[str, ...], dict]]]] = {
    a: {gid: [(_BOUND[name], args, kw) for name, args, kw in calls] for gid, calls in cells.items()}
    for a, cells in CHECKS.items()
}


# -- 2. the learner's code, filtered ------------------------------------------------------------

_SAFE_DECORATORS = {"staticmethod", "classmethod", "property", "setter", "getter", "deleter", "dataclass",
                    "cache", "lru_cache", "cached_property", "total_ordering", "abstractmethod", "wraps"}


def _literal(node: ast.AST) -> bool:
    try:
        ast.literal_eval(node)
        return True
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False


def _inert(node: ast.AST | None) -> bool:
    """An expression evaluated at definition time that runs no code: literals, names, attributes."""
    if node is None:
        return True
    if isinstance(node, (ast.Name, ast.Constant)):
        return True
    if isinstance(node, ast.Attribute):
        return _inert(node.value)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return all(_inert(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(_inert(k) for k in node.keys if k is not None) and all(_inert(v) for v in node.values)
    return _literal(node)


def _decorator_ok(node: ast.AST) -> bool:
    if isinstance(node, ast.Call):
        return _decorator_ok(node.func) and all(_literal(a) for a in node.args) and all(_literal(k.value) for k in node.keywords)
    if isinstance(node, ast.Name):
        return node.id in _SAFE_DECORATORS
    if isinstance(node, ast.Attribute):
        return node.attr in _SAFE_DECORATORS and _inert(node.value)
    return False


def _strip_annotations(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
    fn.returns = None
    a = fn.args
    for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]:
        if arg is not None:
            arg.annotation = None


def _keep(stmt: ast.stmt, skipped: list[str], in_class: bool = False) -> ast.stmt | None:
    """The statement to run (possibly trimmed), or None to skip it (the reason goes to ``skipped``)."""
    line = f"line {getattr(stmt, 'lineno', '?')}"
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return stmt
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        if not all(_decorator_ok(d) for d in stmt.decorator_list):
            skipped.append(f"{line}: def {stmt.name} (decorator)")
            return None
        if not all(_inert(d) for d in [*stmt.args.defaults, *stmt.args.kw_defaults]):
            skipped.append(f"{line}: def {stmt.name} (default value computed by code)")
            return None
        if in_class and stmt.name in ("__init_subclass__", "__set_name__", "__class_getitem__", "__mro_entries__"):
            skipped.append(f"{line}: def {stmt.name} (runs at class creation)")
            return None
        _strip_annotations(stmt)
        return stmt
    if isinstance(stmt, ast.ClassDef):
        if stmt.keywords or not all(_inert(b) for b in stmt.bases) or not all(_decorator_ok(d) for d in stmt.decorator_list):
            skipped.append(f"{line}: class {stmt.name} (metaclass, keywords, decorator or computed base)")
            return None
        body = [s for s in (_keep(s, skipped, in_class=True) for s in stmt.body) if s is not None]
        stmt.body = body or [ast.Pass()]
        return stmt
    if isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) for t in stmt.targets) and _literal(stmt.value):
        return stmt
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None and _literal(stmt.value):
        return ast.Assign(targets=[stmt.target], value=stmt.value, lineno=stmt.lineno)
    if in_class and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
        return stmt  # a docstring
    if in_class and isinstance(stmt, ast.Pass):
        return stmt
    skipped.append(f"{line}: {type(stmt).__name__}")
    return None


def filter_source(source: str) -> tuple[ast.Module | None, list[str]]:
    """The part of a learner's cell that runs in isolation, and what was skipped (or why none runs)."""
    text = "\n".join("" if ln.lstrip().startswith(("%", "!")) else ln for ln in source.splitlines())
    try:
        tree = ast.parse(text)
    except SyntaxError as e:
        return None, [f"syntax error: {e.msg}"]
    skipped: list[str] = []
    body = [s for s in (_keep(s, skipped) for s in tree.body) if s is not None]
    module = ast.Module(body=body, type_ignores=[])
    return ast.fix_missing_locations(module), skipped


def cells(nb: dict, *, solution: bool) -> list[tuple[str | None, str]]:
    """(grade_id, source) of a notebook's code cells: the solution cells, or the locked setup cells."""
    out = []
    seen_solution = False
    for c in nb.get("cells", []):
        info = (c.get("metadata") or {}).get("nbgrader") or {}
        src = c.get("source", "")
        src = "".join(src) if isinstance(src, list) else src
        if c.get("cell_type") != "code":
            continue
        if info.get("solution"):
            seen_solution = True
            if solution:
                out.append((info.get("grade_id"), src))
        elif not solution and not seen_solution and info.get("locked") and not info.get("grade"):
            out.append((info.get("grade_id"), src))
    return out


def test_sources(nb: dict) -> dict[str, str]:
    """grade_id -> source of every graded code cell."""
    out = {}
    for c in nb.get("cells", []):
        info = (c.get("metadata") or {}).get("nbgrader") or {}
        if c.get("cell_type") == "code" and info.get("grade") and not info.get("solution"):
            src = c.get("source", "")
            out[info["grade_id"]] = "".join(src) if isinstance(src, list) else src
    return out


# -- 3. the snapshot of what the checks rely on -------------------------------------------------

_STDLIB = (builtins, os, os.path, io, json, copy, tempfile, signal, stat, shutil, sqlite3, pathlib, types, importlib)


def _load_everything() -> None:
    """Import every ``resumable_core`` module and load the package's lazy names (so nothing new appears later)."""
    import resumable_core

    for m in pkgutil.iter_modules(resumable_core.__path__):
        if m.name not in ("__main__", "grading", "simulator"):  # the grading command, the web app: not used by any check
            importlib.import_module(f"resumable_core.{m.name}")
    for name in resumable_core.__all__:
        getattr(resumable_core, name)
    import anthropic  # noqa: F401  (the checks import it lazily)

    tempfile.gettempdir()  # tempfile fills two caches on first use
    next(tempfile._get_candidate_names())  # noqa: SLF001


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
        """What differs from the snapshot (names like ``resumable_core.graders.CountingToolbox.count``)."""
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
            for k in [k for k in now if k not in before and k != "__warningregistry__" and not isinstance(now[k], types.ModuleType)]:
                try:
                    delattr(obj, k)
                except (AttributeError, TypeError):
                    pass
            for k, v in before.items():
                if now.get(k, _MISSING) is not v:
                    try:
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


def _expected_answer(source: str, name: str, key: str) -> Any:
    """The value the test cell's assertion compares ``name[key]`` with (``==``), or _MISSING."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return _MISSING
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq):
            left = node.left
            if (isinstance(left, ast.Subscript) and isinstance(left.value, ast.Name) and left.value.id == name
                    and isinstance(left.slice, ast.Constant) and left.slice.value == key):
                right = node.comparators[0]
                try:
                    if isinstance(right, ast.Subscript):
                        return ast.literal_eval(right.value)[ast.literal_eval(right.slice)]
                    return ast.literal_eval(right)
                except (ValueError, TypeError, KeyError, IndexError, SyntaxError):
                    return _MISSING
    return _MISSING


def _check_answer(ns: dict, name: str, key: str, expected: Any) -> None:
    answers = ns.get(name)
    assert isinstance(answers, dict), f"{name} must be a dict of literal answers"
    value = answers.get(key)
    assert value in _ACTIONS, f"{name}[{key!r}] must be one of {sorted(_ACTIONS)}, not {value!r}"
    if expected is not _MISSING:
        assert value == expected, f"{name}[{key!r}] = {value!r} is not the right action"


def recheck(notebook: dict, assignment: str, source: dict | None = None, only: list[str] | None = None,
            timeout: int = 60) -> dict[str, str | None]:
    """Run the mapped test cells of ``notebook`` in this process (call it in a fresh one): {grade_id: None | reason}."""
    source = source if source is not None else notebook
    mapped = {**_RESOLVED.get(assignment, {}), **{g: None for g in ANSWERS.get(assignment, {})}}
    present = set(test_sources(notebook)) | set(test_sources(source))
    wanted = [g for g in (only if only is not None else sorted(present)) if g in mapped and g in present]
    if not wanted:
        return {}
    _load_everything()
    ns: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    for _, src in cells(source, solution=False):  # the instructor's setup, trusted
        exec(compile(src, "<setup>", "exec"), ns)
    snap = Snapshot()
    for gid, src in cells(notebook, solution=True):
        module, _ = filter_source(src)
        for stmt in module.body if module else []:
            try:
                exec(compile(ast.Module(body=[stmt], type_ignores=[]), f"<{gid}>", "exec"), ns)
            except Exception:  # noqa: BLE001 - the kernel met the same error; its checks then fail on their own
                pass
    snap.restore()  # whatever the learner's definitions changed at import is undone before the checks
    tests = test_sources(source)
    report: dict[str, str | None] = {}
    old = signal.signal(signal.SIGALRM, _on_alarm)
    try:
        for gid in wanted:
            reason = None
            signal.alarm(max(1, int(timeout)))
            try:
                if gid in ANSWERS.get(assignment, {}):
                    name, key = ANSWERS[assignment][gid]
                    _check_answer(ns, name, key, _expected_answer(tests.get(gid, ""), name, key))
                else:
                    for fn, args, kw in _RESOLVED[assignment][gid]:
                        missing = [a for a in args if not callable(ns.get(a))]
                        if missing:
                            raise AssertionError(f"{missing[0]} is not defined by a def in the solution cells")
                        fn(*[ns[a] for a in args], **copy.deepcopy(kw))
            except _Timeout:
                reason = f"did not finish within {timeout} s"
            except AssertionError as e:
                reason = str(e) or "assertion failed"
            except BaseException as e:  # noqa: BLE001 - anything else the learner's code raised
                reason = f"{type(e).__name__}: {e}"
            finally:
                signal.alarm(0)
            changed = snap.changes()
            if changed:
                snap.restore()
                reason = f"the submission changed {', '.join(changed[:3])} while the check ran"
            report[gid] = reason[:300] if reason else None
    finally:
        signal.signal(signal.SIGALRM, old)
    return report


def run(notebook: str | Path, assignment: str, *, source: str | Path | None = None, only: list[str] | None = None,
        timeout: int = 60, env: dict[str, str] | None = None) -> dict[str, str | None]:
    """Re-check ``notebook`` in a fresh ``python -m resumable_core.isolated`` process.

    Cells it could not confirm (the process died, hung past the overall timeout or printed no
    result) come back failed with the reason.
    """
    cmd = [sys.executable, "-m", "resumable_core.isolated", str(Path(notebook).resolve()), "--assignment", assignment,
           "--timeout", str(int(timeout))]
    if source is not None:
        cmd += ["--source", str(Path(source).resolve())]
    if only is not None:
        cmd += ["--only", ",".join(only)]
    n = len(only) if only is not None else 20
    overall = int(timeout) * (n + 1) + 60
    with tempfile.TemporaryDirectory(prefix="resumable-isolated-") as cwd:
        env = {**(os.environ if env is None else env), "TMPDIR": cwd}  # the checks' scratch folders go with it
        try:
            proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=overall)
        except subprocess.TimeoutExpired:
            return {g: f"the isolated re-run did not finish within {overall} s" for g in (only or [])}
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    try:
        result = json.loads(lines[-1]) if proc.returncode == 0 and lines else None
    except json.JSONDecodeError:
        result = None
    if not isinstance(result, dict):
        why = f"the isolated re-run ended with exit code {proc.returncode} and no result"
        return {g: why for g in (only or [])}
    return {str(k): (None if v is None else str(v)) for k, v in result.items()}


def main(argv: list[str] | None = None) -> int:
    """The command line: print the re-check's JSON dict on the original stdout."""
    p = argparse.ArgumentParser(prog="python -m resumable_core.isolated", description=__doc__.split("\n\n")[0])
    p.add_argument("notebook", help="the graded (autograded) notebook")
    p.add_argument("--assignment", required=True)
    p.add_argument("--source", default=None, help="the instructor's source notebook (trusted setup and test cells; default: the notebook itself)")
    p.add_argument("--only", default=None, help="comma-separated test cell ids to re-check (default: every mapped one)")
    p.add_argument("--timeout", type=int, default=60, help="seconds per test cell")
    args = p.parse_args(argv)
    out = os.fdopen(os.dup(1), "w")  # the result goes here; the learner's prints go to /dev/null
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    sys.stdout = open(os.devnull, "w")
    nb = json.loads(Path(args.notebook).read_text(encoding="utf-8"))
    src = json.loads(Path(args.source).read_text(encoding="utf-8")) if args.source else None
    only = [g for g in args.only.split(",") if g] if args.only is not None else None
    report = recheck(nb, args.assignment, src, only, args.timeout)
    out.write(json.dumps(report, sort_keys=True) + "\n")
    out.flush()
    os._exit(0)  # no atexit or finalizer of the learner's runs after the result


if __name__ == "__main__":
    sys.exit(main())
