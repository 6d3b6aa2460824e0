"""No answers in the kit: no lesson function and no public callable of the student kit scores full.

Every assignment's graded checks (visible and hidden, from ``course.assignments.REGISTRY``) are
read generically: a check is a ``check_*`` function of the assignment's two modules whose
required parameters are all functions the learner writes (``Reconcile``, ``Save``, ``Load``,
``Resume``...). Each parameter name is a *role* (``fn``, ``save``, ``load``), and a role's type
says how many arguments the learner's function takes (``Callable[..., X]``: any number).

A candidate is one callable per role; it *scores full* when it passes every check of the
assignment. Each candidate is graded in a forked child (a lesson function may print, hang or
kill its process), from a scratch working directory, stopping at its first failed check.

Lesson functions are the top-level ``def``s and ``class``es of ``lessons/*.ipynb``, built by
running the lesson's imports and its call-free assignments (``RETRYABLE = {...}``) in a fresh
namespace, then each definition; one that cannot be built is reported by a warning, never graded
silently. A definition that reads a global the lesson computes at run time sees it missing and
fails on it, as it would in a learner's fresh notebook without that cell.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import inspect
import itertools
import json
import multiprocessing
import os
import re
import tempfile
import typing
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import resumable_core as rc
from resumable_core.course import student_kit
from resumable_core.course.assignments import REGISTRY, Assignment
from resumable_core.course.hidden import strategies as answers
from resumable_core.strategies import Strategy

ROOT = Path(__file__).resolve().parents[1]
LESSONS = sorted((ROOT / "lessons").glob("*.ipynb"))
GRADE_TIMEOUT = 180.0
"""Seconds one candidate may take on one assignment's checks before it counts as hung (not full)."""
ANY_ARITY = -1
"""A role typed ``Callable[..., X]``: the learner's function may take any arguments."""
Binding = dict[str, Callable[..., Any]]


# -- the checks, read from the registry ------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    """One graded check and the roles its required parameters play, in order."""

    name: str
    fn: Callable[..., Any]
    roles: tuple[str, ...]


def _arity(hint: Any) -> int | None:
    """How many arguments a parameter typed ``hint`` is called with; None: not a function."""
    if typing.get_origin(hint) is not Callable:
        return None
    params = typing.get_args(hint)[0]
    return ANY_ARITY if params is Ellipsis else len(params)


def _required(fn: Callable[..., Any]) -> list[inspect.Parameter]:
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    params = inspect.signature(fn).parameters.values()
    return [p for p in params if p.kind in positional and p.default is inspect.Parameter.empty]


def graded_checks(assignment: Assignment) -> tuple[list[Check], dict[str, int]]:
    """The assignment's checks that take only learner functions, and each role's arity.

    Checks with a data parameter (level 1's answers, a crash point) are not about a function.
    """
    checks: list[Check] = []
    roles: dict[str, int] = {}
    for module in (assignment.checks(), assignment.hidden()):
        for name, fn in vars(module).items():
            if not name.startswith("check_") or not inspect.isfunction(fn) or fn.__module__ != module.__name__:
                continue
            hints = typing.get_type_hints(fn)
            params = _required(fn)
            arities = [_arity(hints.get(p.name)) for p in params]
            if not params or None in arities:
                continue
            checks.append(Check(f"{module.__name__}.{name}", fn, tuple(p.name for p in params)))
            roles.update({p.name: a for p, a in zip(params, arities) if a is not None})
    return checks, roles


# -- grading one candidate in a child --------------------------------------------------------------


def _grade_in_child(checks: list[Check], binding: Binding, out: Any, workdir: str) -> None:
    """In the forked child, in ``workdir``: run the checks in order and send the first failure, or "full"."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.chdir(workdir)
    for check in checks:
        try:
            check.fn(*(binding[role] for role in check.roles))
        except BaseException as e:  # noqa: BLE001 - any failure, exit or interrupt means "not full"
            out.send(f"{check.name}: {type(e).__name__}: {str(e)[:300]}")
            return
    out.send("full")


def first_failure(checks: list[Check], binding: Binding) -> str:
    """``"full"`` if ``binding`` passes every check, else the first failed check (or "hung")."""
    if not checks:
        return "full"
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    with tempfile.TemporaryDirectory(prefix="no-answers-") as workdir:
        child = ctx.Process(target=_grade_in_child, args=(checks, binding, send, workdir))
        with warnings.catch_warnings():  # the same reason as crash._fork: the child runs this code only
            warnings.filterwarnings("ignore", message=r".*fork\(\) may lead to deadlocks", category=DeprecationWarning)
            child.start()
        send.close()
        try:
            got = receive.recv() if receive.poll(GRADE_TIMEOUT) else "hung"
        except EOFError:  # the child died before it could answer (a lesson function killed it)
            got = f"died (exit code {child.exitcode})"
        child.kill()
        child.join()
    return str(got)


def _fits(candidate: Callable[..., Any], arity: int) -> bool:
    """Whether ``candidate`` can be called with ``arity`` positional arguments."""
    if arity == ANY_ARITY:
        return True
    try:
        inspect.signature(candidate).bind(*range(arity))
    except (TypeError, ValueError):
        return False
    return True


def full_scorers(assignment: Assignment, candidates: dict[str, Callable[..., Any]]) -> list[str]:
    """Every binding of candidates to the assignment's roles that passes all its checks, by name.

    A role's candidates are first graded on the checks that need that role alone; only those
    that pass them all are combined for the checks that need several roles.
    """
    checks, roles = graded_checks(assignment)
    survivors: dict[str, dict[str, Callable[..., Any]]] = {}
    for role, arity in roles.items():
        alone = [c for c in checks if set(c.roles) == {role}]
        fitting = {name: fn for name, fn in candidates.items() if _fits(fn, arity)}
        survivors[role] = {name: fn for name, fn in fitting.items() if first_failure(alone, {role: fn}) == "full"}
    together = [c for c in checks if len(set(c.roles)) > 1]
    full = []
    for names in itertools.product(*(survivors[role] for role in roles)):
        binding = {role: survivors[role][name] for role, name in zip(roles, names)}
        if first_failure(together, binding) == "full":
            full.append(", ".join(f"{role}={name}" for role, name in zip(roles, names)))
    return full


# -- the candidates: lesson definitions, the kit's public callables ---------------------------------


def _cell_statements(path: Path) -> Iterator[ast.stmt]:
    """Every top-level statement of the notebook's code cells, in order (IPython magics blanked)."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    for cell in notebook["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = re.sub(r"(?m)^\s*[%!].*$", "", "".join(cell["source"]))
        yield from ast.parse(source, filename=path.name).body


def _call_free(node: ast.stmt) -> bool:
    """An assignment whose value calls nothing (a constant table), so running it has no effect."""
    value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
    return value is not None and not any(isinstance(n, ast.Call) for n in ast.walk(value))


def lesson_definitions(path: Path) -> tuple[dict[str, Callable[..., Any]], list[str]]:
    """(name -> callable, definitions that could not be built) of one lesson notebook."""
    namespace: dict[str, Any] = {"__name__": f"lesson_{path.stem}"}
    built: dict[str, Callable[..., Any]] = {}
    unbuilt: list[str] = []
    for node in _cell_statements(path):
        code = compile(ast.Module(body=[node], type_ignores=[]), path.name, "exec")
        if isinstance(node, (ast.Import, ast.ImportFrom)) or _call_free(node):
            with contextlib.suppress(Exception):  # a failed import leaves a name missing: its users fail on it
                exec(code, namespace)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            try:
                exec(code, namespace)
            except Exception as e:  # noqa: BLE001 - reported by the caller, never dropped silently
                unbuilt.append(f"{path.name}: {node.name} ({type(e).__name__}: {e})")
                continue
            built[f"{path.stem}.{node.name}@{node.lineno}"] = namespace[node.name]
    return built, unbuilt


def every_lesson_definition() -> dict[str, Callable[..., Any]]:
    """Every lesson's definitions; a warning names each one that could not be built."""
    found: dict[str, Callable[..., Any]] = {}
    for path in LESSONS:
        built, unbuilt = lesson_definitions(path)
        found.update(built)
        for line in unbuilt:
            warnings.warn(f"not graded, could not be built: {line}", stacklevel=2)
    return found


def kit_modules() -> list[ModuleType]:
    """The Python modules the student kit ships (its MANIFEST), imported."""
    import importlib

    names = sorted(
        path.removesuffix(".py").replace("/", ".").removesuffix(".__init__")
        for path in student_kit.repository_files()
        if path.startswith("resumable_core/") and path.endswith(".py")
    )
    return [importlib.import_module(name) for name in names]


def kit_callables(arity: int) -> dict[str, Callable[..., Any]]:
    """Every public callable defined in the kit's modules that takes ``arity`` positional arguments."""
    found: dict[int, tuple[str, Callable[..., Any]]] = {}
    for module in kit_modules():
        for name, obj in vars(module).items():
            own = str(getattr(obj, "__module__", "")).startswith("resumable_core")
            if name.startswith("_") or not callable(obj) or isinstance(obj, ModuleType) or not own:
                continue
            with contextlib.suppress(TypeError, ValueError):  # builtins and aliases without a signature
                if _fits(obj, arity):
                    found.setdefault(id(obj), (f"{module.__name__}.{name}", obj))
    return dict(found.values())


def run_agent_as_resume(strategy: Strategy | None) -> Callable[..., Any]:
    """The kit's own loop in the resume signature, resuming with ``strategy`` (None: the reconcile given).

    With a kit strategy the loop is reached through a closure the checks' "own loop" guard does not
    look into, so the strategy itself is graded. With the reconcile given, the loop is called by
    name: the kit's loop plus a right reconcile is the whole answer, and the guard must refuse it.
    """
    if strategy is None:

        def resume_through_run_agent(path, task, tools, client, *, reconcile=None, max_turns=rc.MAX_TURNS):
            result = rc.run_agent(
                task, checkpoint_path=path, toolbox=tools, client=client, reconcile=reconcile, max_turns=max_turns
            )
            return result.checkpoint

        return resume_through_run_agent
    loop = functools.partial(rc.run_agent, reconcile=strategy.reconcile)

    def resume(path, task, tools, client, *, reconcile=None, max_turns=rc.MAX_TURNS):
        return loop(task, checkpoint_path=path, toolbox=tools, client=client, max_turns=max_turns).checkpoint

    return resume


# -- the tests -------------------------------------------------------------------------------------

ASSIGNMENTS = sorted(REGISTRY)


def _roles(name: str) -> dict[str, int]:
    return graded_checks(REGISTRY[name])[1]


def test_every_assignment_has_function_checks_to_grade():
    """The generic reading finds function checks and roles in every registered assignment."""
    for name in ASSIGNMENTS:
        checks, roles = graded_checks(REGISTRY[name])
        assert checks and roles, f"{name}: no check_* takes a learner function; the test would grade nothing"


@pytest.mark.slow
@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_no_lesson_function_scores_full(name):
    """No function or class a lesson defines passes every check of the assignment (visible and hidden)."""
    definitions = every_lesson_definition()
    assert definitions, "no lesson definition was found: the test would grade nothing"
    assert full_scorers(REGISTRY[name], definitions) == []


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in ASSIGNMENTS if sorted(_roles(n).values()) == [2]])
def test_no_two_argument_callable_of_the_kit_scores_full(name):
    """No public callable of the kit's library that takes two arguments passes a reconcile-style assignment."""
    callables = kit_callables(2)
    assert "resumable_core.strategies.reconcile_rerun" in callables  # the kit's strategies are among them
    assert full_scorers(REGISTRY[name], callables) == []


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in ASSIGNMENTS if list(_roles(n).values()) == [ANY_ARITY]])
def test_the_kits_loop_with_a_kit_strategy_does_not_score_full(name):
    """run_agent in the resume signature, with none, delete, rerun or the reconcile given, scores below full."""
    kit = [s for s in rc.STRATEGIES.values() if s.name in ("none", "delete", "rerun")]
    candidates = {f"run_agent+{s.name}": run_agent_as_resume(s) for s in kit}
    candidates["run_agent+given"] = run_agent_as_resume(None)
    assert full_scorers(REGISTRY[name], candidates) == []


@pytest.mark.slow
def test_the_instructors_answer_scores_full(tmp_path):
    """The control: by_effect, written in a lesson-like notebook, is built and scores full; rerun does not."""
    answer = inspect.getsource(answers.reconcile_by_effect)
    cells = [
        "%matplotlib inline\nfrom resumable_core.strategies import STATUS_UNKNOWN, answer_pending, reconcile_rerun",
        "RULE = 'by effect'\nprint(RULE)",
        answer,
    ]
    notebook = {"cells": [{"cell_type": "code", "source": c} for c in cells], "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "99_answer.ipynb"
    path.write_text(json.dumps(notebook), encoding="utf-8")
    built, unbuilt = lesson_definitions(path)
    assert list(built) == ["99_answer.reconcile_by_effect@1"] and unbuilt == []
    assert full_scorers(REGISTRY["reconcile"], built) == ["fn=99_answer.reconcile_by_effect@1"]
    assert full_scorers(REGISTRY["reconcile"], {"rerun": rc.STRATEGIES["rerun"].reconcile}) == []


def test_a_definition_that_cannot_be_built_is_named_not_graded(tmp_path):
    """A lesson def whose decorator is missing is listed with its error; the others are still built."""
    cells = ["@not_imported_here\ndef decorated(cp, tools):\n    return cp", "def plain(cp, tools):\n    return cp"]
    notebook = {"cells": [{"cell_type": "code", "source": c} for c in cells], "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "98_broken.ipynb"
    path.write_text(json.dumps(notebook), encoding="utf-8")
    built, unbuilt = lesson_definitions(path)
    assert list(built) == ["98_broken.plain@1"]
    assert unbuilt == ["98_broken.ipynb: decorated (NameError: name 'not_imported_here' is not defined)"]
