"""Re-check a graded notebook's test cells outside the learner's kernel.

``python -m resumable_core.isolated NOTEBOOK --assignment A [--source SOURCE_NB] [--only ID,...]``
prints one JSON line ``{"cells": {test cell grade_id: null | "why it failed"}, "load_errors": [...],
"changed": [...]}`` on stdout (:class:`Report`).

Why: the course's test cells call ``graders.check_*`` in the learner's own kernel, after the
learner's cells ran, so a learner cell can patch the checks (``setattr(graders, "check_x", ...)``)
and pass everything. ``python -m resumable_core grade`` therefore re-runs, for every test cell that
scored in nbgrader, the same checks in a fresh process that the learner's notebook never ran in:

1. the checks are bound (``CHECKS`` below: test cell -> the calls its source makes, kept equal to
   the notebooks by ``tests/test_isolated.py``) when this module is imported, before any learner
   code, so patching attributes of :mod:`resumable_core.graders` later cannot redirect them;
2. the instructor's setup cells (locked cells before the first solution cell, from the trusted
   source notebook) run first; then the learner's code runs as the kernel ran it: every code cell
   of the submitted notebook in order except the test cells and the instructor's locked cells,
   that is the solution cells and the cells the learner added, in full, each under the alarm and
   each on after an error (as nbgrader goes on). IPython magics and shell escapes are blanked
   (``%matplotlib``, ``%config`` and other display settings silently; any other one counts as a
   cell that could not run). The instructor's later display cells are not run;
3. the attributes of every ``resumable_core`` module and class (and function code objects), of
   ``builtins``, ``os``, ``io``, ``json``, ``copy``, ``tempfile``, ``pathlib`` and friends, and the
   ``resumable_core`` entries of ``sys.modules`` are snapshot before the learner's code runs; after
   loading it they are compared and restored (with ``sys.meta_path``, ``sys.path_hooks``, and no
   trace or profile function), so patching done at load time (a top-level loop over the graders,
   a decorator run at definition) is undone before any check; after every test cell they are
   compared and restored again, and a test cell during which anything changed fails ("the
   submission changed ... while the check ran");
4. each cell runs under an alarm (``--timeout``), and the learner's prints go to /dev/null (the
   result is written on a private copy of the original stdout).

Level-1 answers (``RESUME_ACTION``, a dict) are checked directly: the value must be one of
``course.ACTIONS`` and equal the answer the trusted test cell's hidden assertion compares it with
(read from the source notebook, so the answers are not written in this module).

A failure here only counts when the re-run is conclusive (:attr:`Report.inconclusive` is None):
if the process died or hung, or a learner cell raised here but ran fine in the kernel (its
outputs in the graded notebook show no error), the grade command keeps the kernel's score and
flags the submission for review instead of zeroing it. An honest notebook loads the same way in
both places, so it never loses points here.

What this still cannot catch (honestly): the learner's code runs in this same process, at load
and inside the checks. At load it can change what the snapshot does not watch (third-party
modules such as ``anthropic``, ``httpx`` or ``pydantic``, stdlib modules not listed, C-level state
through ``ctypes``, ``gc`` tricks, threads left running) and that stays changed during the checks.
Inside a check it can tamper and undo its tampering before the check ends (a patched method that
restores itself after one call, editing the check's locals through ``sys._getframe``); the snapshot
only sees what is left changed. Code that behaves differently outside a kernel (for example it
raises or exits when ``ipykernel`` is not imported) makes the re-run inconclusive: the kernel's
score is kept, flagged for a human. Such code is much harder to write than the sample monkeypatch,
and :func:`resumable_core.grading.suspicious` still flags most of it for a reviewer (``setattr``,
attribute assignments on imported modules, ``_exit``). Full protection needs the learner's function
in another process than the checker (an RPC boundary), which this module does not build. A kernel
that writes into ``site-packages`` (a ``.pth`` or ``sitecustomize``) reaches every later Python
process on the grading machine, this one included: grade untrusted classes in a throwaway container.
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import conformance as _graders
from .. import release as _course

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
        "test_every_path": [
            ("check_every_crash_point", ("reconcile",), {}),
            ("check_other_side_effect_tools", ("reconcile",), {}),
            ("check_unknown_tool", ("reconcile",), {}),
        ],
        "bonus_ledger": [("check_ledger_incident", ("reconcile_with_ledger",), {})],
    },
    "resume_skeleton": {
        "test_round_trip": [("check_state_round_trip", ("save_state", "load_state"), {})],
        "test_missing": [("check_state_missing", ("load_state",), {})],
        "test_version": [
            ("check_state_version_refused", ("load_state",), {"versions": [2]}),
            ("check_state_version_refused", ("load_state",), {"versions": [0, 99, "1"]}),
            ("check_load_never_modifies", ("save_state", "load_state"), {}),
        ],
        "test_kill_during_save": [("check_kill_during_save", ("save_state", "load_state"), {})],
        "test_durable_steps": [("check_durable_steps", ("save_state",), {})],
    },
}
"""Assignment -> test cell grade_id -> the ``graders`` calls its source makes (hidden ones included)."""

ANSWERS: dict[str, dict[str, tuple[str, str]]] = {
    "reconcile": {
        "test_level1_A": ("RESUME_ACTION", "A"),
        "test_level1_B": ("RESUME_ACTION", "B"),
        "test_level1_C": ("RESUME_ACTION", "C"),
    },
}
"""Assignment -> level-1 test cell -> (the learner's dict of answers, the key it checks)."""

_RESOLVED: dict[str, dict[str, list[tuple[Callable[..., None], tuple[str, ...], dict]]]] = {
    a: {gid: [(_BOUND[name], args, kw) for name, args, kw in calls] for gid, calls in cells.items()}
    for a, cells in CHECKS.items()
}


# -- 2. the notebook's cells ---------------------------------------------------------------------

_HARMLESS_MAGICS = {"matplotlib", "config", "load_ext", "reload_ext", "autoreload", "precision", "pprint"}
"""Line magics that only configure the kernel's display or reloading: skipped without a word."""


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
    solution cells and cells without nbgrader metadata (added by the learner), in notebook order.
    """
    out = []
    for n, c in enumerate((c for c in nb.get("cells", []) if c.get("cell_type") == "code"), start=1):
        info = _info(c)
        if not info.get("solution") and (info.get("grade") or info.get("locked")):
            continue
        label = f"cell {info['grade_id']!r}" if info.get("grade_id") else f"added code cell {n}"
        errors = [o for o in c.get("outputs") or [] if o.get("output_type") == "error"]
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
        if m.name not in (
            "__main__",
            "grading",
            "simulator",
        ):  # the grading command, the web app: not used by any check
            importlib.import_module(f"resumable_core.{m.name}")
    for name in resumable_core.__all__:
        getattr(resumable_core, name)
    import anthropic  # noqa: F401  (the checks import it lazily)

    tempfile.gettempdir()  # tempfile fills two caches on first use
    next(tempfile._get_candidate_names())


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
            for k in [
                k
                for k in now
                if k not in before and k != "__warningregistry__" and not isinstance(now[k], types.ModuleType)
            ]:
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
            if (
                isinstance(left, ast.Subscript)
                and isinstance(left.value, ast.Name)
                and left.value.id == name
                and isinstance(left.slice, ast.Constant)
                and left.slice.value == key
            ):
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
    assert isinstance(answers, dict), f"{name} must be a dict of answers"
    value = dict.get(answers, key)  # the plain dict's own lookup and a plain str: no learner __eq__ runs
    assert type(value) is str and value in _ACTIONS, f"{name}[{key!r}] must be one of {sorted(_ACTIONS)}, not {value!r}"
    if expected is not _MISSING:
        assert value == expected, f"{name}[{key!r}] = {value!r} is not the right action"


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


def recheck(
    notebook: dict, assignment: str, source: dict | None = None, only: list[str] | None = None, timeout: int = 60
) -> Report:
    """Run the mapped test cells of ``notebook`` in this process (call it in a fresh one)."""
    source = source if source is not None else notebook
    mapped = {**_RESOLVED.get(assignment, {}), **dict.fromkeys(ANSWERS.get(assignment, {}))}
    present = set(test_sources(notebook)) | set(test_sources(source))
    wanted = [g for g in (only if only is not None else sorted(present)) if g in mapped and g in present]
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
        # whatever loading the learner's code changed is undone before the checks
        changed = snap.changes()
        snap.restore()
        sys.meta_path[:], sys.path_hooks[:] = meta_path, path_hooks
        sys.settrace(None)
        sys.setprofile(None)
        signal.signal(signal.SIGALRM, _on_alarm)
        loading = "; while loading, {cell} raised {error}".format(**load_errors[0]) if load_errors else ""
        tests = test_sources(source)
        report = Report(load_errors=load_errors, changed=changed)
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
                            raise AssertionError(f"{missing[0]} is not defined by the notebook's cells")
                        fn(*[ns[a] for a in args], **copy.deepcopy(kw))
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
            report[gid] = (reason[: 300 - len(loading[:150])] + loading[:150]) if reason else None
    finally:
        signal.signal(signal.SIGALRM, old)
    return report


def run(
    notebook: str | Path,
    assignment: str,
    *,
    source: str | Path | None = None,
    only: list[str] | None = None,
    timeout: int = 60,
    env: dict[str, str] | None = None,
) -> Report:
    """Re-check ``notebook`` in a fresh ``python -m resumable_core.isolated`` process.

    Cells it could not confirm (the process died, hung past the overall timeout or printed no
    result) come back failed with the reason, and the report is ``inconclusive``.
    """
    cmd = [
        sys.executable,
        "-m",
        "resumable_core.course.grading.recheck",
        str(Path(notebook).resolve()),
        "--assignment",
        assignment,
        "--timeout",
        str(int(timeout)),
    ]
    if source is not None:
        cmd += ["--source", str(Path(source).resolve())]
    if only is not None:
        cmd += ["--only", ",".join(only)]
    try:
        n_cells = len(learner_cells(json.loads(Path(notebook).read_text(encoding="utf-8"))))
    except (OSError, ValueError, AttributeError):
        n_cells = 0
    n = len(only) if only is not None else 20
    overall = int(timeout) * (n + n_cells + 1) + 60
    with tempfile.TemporaryDirectory(prefix="resumable-isolated-") as cwd:
        env = {**(os.environ if env is None else env), "TMPDIR": cwd}  # the checks' scratch folders go with it
        try:
            proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=overall)
        except subprocess.TimeoutExpired:
            why = f"the isolated re-run did not finish within {overall} s"
            return Report(dict.fromkeys(only or [], why), inconclusive=why)
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    try:
        result = json.loads(lines[-1]) if proc.returncode == 0 and lines else None
    except json.JSONDecodeError:
        result = None
    if not isinstance(result, dict) or not isinstance(result.get("cells"), dict):
        why = f"the isolated re-run ended with exit code {proc.returncode} and no result"
        return Report(dict.fromkeys(only or [], why), inconclusive=why)
    return Report(
        {str(k): (None if v is None else str(v)) for k, v in result["cells"].items()},
        load_errors=result.get("load_errors") or [],
        changed=result.get("changed") or [],
    )


def main(argv: list[str] | None = None) -> int:
    """The command line: print the re-check's JSON (:meth:`Report.to_json`) on the original stdout."""
    p = argparse.ArgumentParser(prog="python -m resumable_core.isolated", description=__doc__.split("\n\n")[0])
    p.add_argument("notebook", help="the graded (autograded) notebook")
    p.add_argument("--assignment", required=True)
    p.add_argument(
        "--source",
        default=None,
        help="the instructor's source notebook (trusted setup and test cells; default: the notebook itself)",
    )
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
    out.write(report.to_json() + "\n")
    out.flush()
    os._exit(0)  # no atexit or finalizer of the learner's runs after the result


if __name__ == "__main__":
    sys.exit(main())
