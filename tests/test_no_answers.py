"""No answers in the kit: transcribing the lessons or calling the kit's functions scores under half.

Every assignment is read from its source notebook as nbgrader grades it: its test cells with
their points, each cell's checks bound by name as the re-check binds them (hidden blocks
included), and its manual cells. A check's parameter typed ``Callable[[X, Y], Z]`` takes a
function the learner writes, with that many arguments (``Callable[..., X]``: any number); the
notebook name passed there is that function.

A transcriber binds each of the notebook's functions to a candidate: a lesson definition or a
public callable of the student kit (and, for a loop, the kit's loop wrapped as one). Their best
score is bounded from above, generously: manual points and level 1's answers count as earned,
each function takes its best candidate, and the cells that take the same several functions are
tried on every combination of candidates that passed something. Each candidate, or combination,
is graded in a forked child (a lesson function may print, hang or kill its process), from a
scratch working directory, its cells in notebook order as a kernel runs them; the child is forked
after every check ran once here, so what a check makes once per process is made once.

Before the combinations, each survivor is screened once: its cells are run with the other functions
bound to a probe that reports being called. Until a check calls a probe, the child runs exactly as
it would with any partner bound (the candidate, the checks and the fresh start are the same), so the
cells finished by then pass or fail alike with every partner: a pass counts as earned with any
partner, and a combination is forked only when each of its members reached a partner before the
cells still to earn. The bound stays an upper bound: no combination that could pass a cell is
skipped, only those whose run up to that cell is already known. A cell that hangs past the course's
cell timeout fails, as nbgrader interrupts it.

A function typed ``Callable[[X, Y], Z]`` is called with two positional arguments, and a candidate that
cannot take them is not graded. One typed ``Callable[..., X]`` says nothing of its calls: before its
candidates, a stand-in is graded that refuses every call by TypeError, noting each call's shape (how
many arguments, which keywords). A candidate whose own signature binds none of those shapes (a plain
function, or a class built by object's or BaseException's ``__new__`` and a plain ``__init__``) raises
TypeError at the same call before a line of it runs, so its run is the stand-in's, call for call, and is
not forked again: the stand-in's cells count as its cells. The checks tell an error by its class and
read nothing else of a function but to refuse it (the own-loop guard reads its code), so such a
candidate passes no cell the stand-in fails: the bound stays an upper bound. Only for a function that no
cell shares with another, whose every call the stand-in's run shows (a partner could lead a check to
calls the stand-in never got).

The lesson definitions and the kit's imports are made once per test worker, in one lean interpreter
(:func:`serve`), and each assignment is graded in a child forked from it: every assignment starts from
the state a fresh interpreter reaches after that build, whatever was graded before it, so sharing
the build changes no run and the bound is the same upper bound.

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
import io
import itertools
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import traceback
import typing
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import resumable_core as rc
from resumable_core import crash
from resumable_core.course import self_check, student_kit
from resumable_core.course.assignments import REGISTRY, Assignment
from resumable_core.course.checks import support
from resumable_core.course.grading.recheck.plan import CheckCall, check_calls
from resumable_core.course.hidden import strategies as answers
from resumable_core.course.notebook_cells import graded_sources, info, setup_cells
from resumable_core.strategies import Strategy

ROOT = Path(__file__).resolve().parents[1]
LESSONS = sorted((ROOT / "lessons").glob("*.ipynb"))
GRADE_TIMEOUT = self_check.CELL_TIMEOUT
"""Seconds a cell may run before it counts as hung and fails, as nbgrader's cell timeout fails it."""
ANY_ARITY = -1
"""A role typed ``Callable[..., X]``: the learner's function may take any arguments."""
Binding = dict[str, Callable[..., Any]]


# -- the graded cells, read from the source notebooks ---------------------------------------------


@dataclass(frozen=True)
class Cell:
    """One graded test cell: its points, the checks it calls, and the notebook's functions they take."""

    grade_id: str
    points: int
    calls: tuple[CheckCall, ...]
    functions: frozenset[str]
    """The notebook's names the cell's checks take as a function the learner writes."""
    takes_data: bool
    """A check takes a name the learner defines as data (level 1's answers): counted as earned."""


@dataclass(frozen=True)
class Graded:
    """An assignment as a transcriber meets it: its test cells, its manual points, each function's arity."""

    cells: tuple[Cell, ...]
    manual_points: int
    arity: dict[str, int]

    @property
    def total(self) -> int:
        return self.manual_points + sum(c.points for c in self.cells)


def _arity(hint: Any) -> int | None:
    """How many arguments a parameter typed ``hint`` is called with; None: not a function."""
    if typing.get_origin(hint) is not Callable:
        return None
    params = typing.get_args(hint)[0]
    return ANY_ARITY if params is Ellipsis else len(params)


def source_notebook(name: str) -> dict[str, Any]:
    """The assignment's source notebook, as plain JSON."""
    return json.loads((ROOT / "solutions" / name / f"{name}.ipynb").read_text(encoding="utf-8"))


def graded(assignment: Assignment) -> Graded:
    """The source notebook's graded cells, each with its checks bound as the re-check binds them."""
    notebook = source_notebook(assignment.name)
    setup = [src for _, src in setup_cells(notebook)]
    kinds = {info(c)["grade_id"]: info(c) for c in notebook["cells"] if info(c).get("grade")}
    cells, arity = [], {}
    for grade_id, source in graded_sources(notebook).items():
        calls = check_calls(assignment.name, source, setup)
        functions, takes_data = set(), False
        for call in calls:
            params = list(inspect.signature(call.check).parameters.values())
            hints = typing.get_type_hints(call.check)
            for param, (kind, value) in zip(params, call.args):
                if kind != "name":
                    continue
                found = _arity(hints.get(param.name))
                if found is None:
                    takes_data = True
                else:
                    functions.add(value)
                    arity[value] = found
        cells.append(Cell(grade_id, kinds[grade_id]["points"], tuple(calls), frozenset(functions), takes_data))
    manual = sum(c["points"] for c in kinds.values() if c.get("solution"))
    return Graded(tuple(cells), manual, arity)


# -- grading one candidate in a child --------------------------------------------------------------


_PROBE_OUT: list[int] = []
"""In a screening child: the pipe the probe reports on (a grandchild the checks fork inherits it)."""
REACHED = b"?"
"""What the probe writes when a check calls it: the cell being run took the function it stands for."""


def probe(*args: Any, **kwargs: Any) -> None:
    """Stands for the partner functions a screen leaves unbound: says it was called, then fails."""
    os.write(_PROBE_OUT[0], REACHED)
    raise AssertionError("a screened partner was called")


REFUSED = "(any candidate refusing each call)"
"""The name of :func:`refusal`'s stand-in among a function's candidates."""


def refusal(log: str) -> Callable[..., Any]:
    """A stand-in that refuses its arguments as a signature does, by TypeError, having added the call's shape to ``log``.

    The shape goes to a file because a check may call the function in a child it forks. The writes are
    bound here, so a check that spies on the names in a function's globals does not see them.
    """

    def refuse(*args: Any, _write: Any = os.write, _open: Any = os.open, _close: Any = os.close, **kwargs: Any) -> None:
        fd = _open(log, os.O_WRONLY | os.O_APPEND)
        _write(fd, (json.dumps([len(args), sorted(kwargs)]) + "\n").encode())
        _close(fd)
        raise TypeError("the arguments were refused")

    return refuse


def refuses_each(candidate: Callable[..., Any], shapes: list[tuple[int, list[str]]]) -> bool:
    """Whether calling ``candidate`` in each of ``shapes`` (positional count, keyword names) raises TypeError
    before a line of its own runs.

    So for a plain function whose own signature binds none of them, and for a class that type's own call
    builds with object's or BaseException's ``__new__`` (neither runs the class's code) and a plain
    ``__init__`` that binds none: Python binds the arguments before it runs the body. Anything else (a
    wrapper, a callable object, a declared ``__signature__``) is graded.
    """
    function: Any = candidate
    receiver: tuple[None, ...] = ()
    if isinstance(candidate, type):
        if type(candidate) is not type or candidate.__new__ not in (object.__new__, BaseException.__new__):
            return False  # a metaclass or a __new__ of its own may run code before __init__ binds
        function, receiver = candidate.__init__, (None,)  # type: ignore[misc]  # the class's own, read as such
    if not inspect.isfunction(function) or "__signature__" in vars(function):
        return False
    signature = inspect.signature(function, follow_wrapped=False)
    for count, keywords in shapes:
        with contextlib.suppress(TypeError):
            signature.bind(*receiver, *range(count), **dict.fromkeys(keywords))
            return False
    return True


def _grade_in_child(cells: list[Cell], binding: Binding, out: int, workdir: str, until_failure: bool) -> None:
    """In the forked child, in ``workdir``: run each cell's checks, writing whether the cell passed, one byte each
    (``until_failure``: up to the first that fails)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.chdir(workdir)
    _PROBE_OUT[:] = [out]
    for cell in cells:
        try:
            for call in cell.calls:
                call.run(binding)
        except BaseException:  # noqa: BLE001 - any failure, exit or interrupt fails the cell
            os.write(out, b"0")
            if until_failure:
                break
        else:
            os.write(out, b"1")
    os._exit(0)


def passed_cells(cells: list[Cell], binding: Binding) -> list[str]:
    """The grade_ids of ``cells`` whose checks all pass on ``binding``, run in notebook order in one forked child.

    One child for the cells, as one kernel runs a notebook's cells in order: what a cell left in the
    process, the next one sees in grading too. A cell that hangs (nbgrader would interrupt it and go
    on) or kills the child (nbgrader would drop the notebook) fails; the cells after it are run again
    in a new child, so they are never failed for a neighbour's sake (generous: an upper bound).
    """
    passed: list[str] = []
    while cells:
        answered, _ = _run_child(cells, binding)
        passed += [cell.grade_id for cell, ok in zip(cells, answered) if ok]
        cells = cells[len(answered) + 1 :]  # the cell that hung or died fails; the rest go to a new child
    return passed


def passes_each(cells: list[Cell], binding: Binding) -> bool:
    """Whether every one of ``cells`` passes on ``binding``: run in order in one forked child, stopped at the first
    that fails (or hangs, or dies), since no cell after it can make the answer yes."""
    answered, _ = _run_child(cells, binding, until_failure=True)
    return len(answered) == len(cells) and all(answered)


def screen(cells: list[Cell], binding: Binding) -> tuple[list[str], int]:
    """(the cells passed, how many cells were decided) of ``cells`` on ``binding``, its partners bound to :func:`probe`.

    A cell run before any check called a probe never reached a partner: up to there the child ran as it
    would with any partner bound, so those cells pass or fail alike with every partner. The cells
    from the first that called a probe (or hung, or died: then the one after it) are undecided.
    """
    answered, reached = _run_child(cells, binding)
    passed = [cell.grade_id for cell, ok in zip(cells, answered) if ok]
    return passed, len(answered) + (0 if reached or len(answered) == len(cells) else 1)


def _run_child(cells: list[Cell], binding: Binding, *, until_failure: bool = False) -> tuple[list[bool], bool]:
    """(whether each cell passed, in order, until the child stopped answering or, ``until_failure``, a cell
    failed; whether it stopped on a probe)."""
    read_end, write_end = os.pipe()
    answered: list[bool] = []
    reached = False
    with tempfile.TemporaryDirectory(prefix="no-answers-") as workdir:
        pid = crash._fork()  # the kit's own fork: the child runs this code only, and leaves with os._exit
        if pid == 0:
            os.close(read_end)
            _grade_in_child(cells, binding, write_end, workdir, until_failure)
        os.close(write_end)
        try:
            with os.fdopen(read_end, "rb", buffering=0) as answers:
                while len(answered) < len(cells) and select.select([answers], [], [], GRADE_TIMEOUT)[0]:
                    byte = answers.read(1)
                    if byte == REACHED:
                        reached = True
                    if not byte or reached:
                        break  # the child died (a lesson function killed it), or a cell called a probe
                    answered.append(byte == b"1")
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    return answered, reached


def _fits(candidate: Callable[..., Any], arity: int) -> bool:
    """Whether ``candidate`` can be called with ``arity`` positional arguments."""
    if arity == ANY_ARITY:
        return True
    try:
        inspect.signature(candidate).bind(*range(arity))
    except (TypeError, ValueError):
        return False
    return True


@dataclass
class Score:
    """The most a transcriber could score: an upper bound, and where each point of it comes from."""

    total: int
    earned: dict[str, str]
    """grade_id (or "manual") -> who earns it."""
    points: int = 0

    def add(self, what: str, points: int, who: str) -> None:
        self.earned[what] = who
        self.points += points


PAIRS_LIMIT = 2000
"""Most combinations of survivors tried on cells that take several functions; past it those cells count as earned.

resume_skeleton's journal cells take 117 appenders x 17 readers today (1,989): a kit function that
raises ValueError for any name (the core's refusal of a scenario or crash point) is a reader that passes a
corrupt journal."""


def warm_up(cells: tuple[Cell, ...]) -> None:
    """Run every cell's checks once here, on functions that do nothing, before any child is forked.

    What the checks compute once per process (a scenario's reference run, say) is then made once and
    inherited by every child, not made again in each of them. The checks are the course's own code.
    """

    def nothing(*args: Any, **kwargs: Any) -> None:
        return None

    # every name a cell takes, bound: the checks refuse a name the notebook does not define before they run
    names: Binding = {
        arg: nothing for cell in cells for call in cell.calls for kind, arg in call.args if kind == "name"
    }
    with (
        tempfile.TemporaryDirectory(prefix="no-answers-") as workdir,
        contextlib.chdir(workdir),
        contextlib.redirect_stdout(io.StringIO()),
    ):
        for cell in cells:
            with contextlib.suppress(Exception):  # each fails on functions that do nothing: only its caches count
                for call in cell.calls:
                    call.run(names)


def best_alone(
    function: str, arity: int, alone: list[Cell], candidates: dict[str, Callable[..., Any]], *, shared: bool
) -> tuple[tuple[int, str, list[str]], dict[str, Callable[..., Any]]]:
    """(the best (points, candidate, cells passed) of ``function``'s own cells ``alone``, the candidates left for the
    cells it ``shared`` with others) among the ``candidates`` that fit ``arity``: those that pass one of ``alone``, or
    all if it has none."""
    fitting = {name: fn for name, fn in candidates.items() if _fits(fn, arity)}
    best: tuple[int, str, list[str]] = (0, "", [])
    passing: dict[str, Callable[..., Any]] = {}
    refused: list[tuple[int, list[str]]] | None = None  # the calls the stand-in got, once it ran
    with tempfile.NamedTemporaryFile(prefix="no-answers-calls-") as log:
        stand_in = {REFUSED: refusal(log.name)} if arity == ANY_ARITY and not shared else {}
        for name, fn in {**stand_in, **fitting}.items():  # the stand-in first: the calls' shapes, then the rest
            if refused is not None and refuses_each(fn, refused):
                continue  # it runs as the stand-in ran: the stand-in's cells are its cells
            got = passed_cells(alone, {function: fn})
            if name == REFUSED:
                with contextlib.suppress(ValueError):  # a torn line: every candidate is graded
                    refused = [(n, k) for n, k in map(json.loads, Path(log.name).read_text().splitlines())]
            if got:
                passing[name] = fn
            best = max(best, (sum(c.points for c in alone if c.grade_id in got), name, got))
    return best, passing if alone else fitting


def best_score(assignment: Assignment, candidates: dict[str, Callable[..., Any]]) -> Score:
    """An upper bound of what binding the notebook's functions to ``candidates`` scores.

    Counted as earned whatever the candidates are: the manual cells and the cells that take data
    (a transcriber may know level 1's answers). A cell that takes one function is earned when some
    candidate passes it; the best candidate of each function counts. The cells that take the same
    several functions are tried together on every combination of the candidates that passed a
    one-function cell, one child per combination (counted as earned when there are too many to try,
    or when a function has no one-function cell to filter by); each of them is earned when some
    combination passes it.
    """
    g = graded(assignment)
    warm_up(g.cells)
    score = Score(g.total, {})
    if g.manual_points:
        score.add("manual", g.manual_points, "assumed")
    survivors: dict[str, dict[str, Callable[..., Any]]] = {}
    grouped = {f for c in g.cells if len(c.functions) > 1 for f in c.functions}
    for function, arity in g.arity.items():
        alone = [c for c in g.cells if c.functions == {function} and not c.takes_data]
        best, survivors[function] = best_alone(function, arity, alone, candidates, shared=function in grouped)
        for cell in alone:
            if cell.grade_id in best[2]:
                score.add(cell.grade_id, cell.points, f"{function}={best[1]}")
    groups: dict[frozenset[str], list[Cell]] = {}
    for cell in g.cells:
        if cell.takes_data:
            score.add(cell.grade_id, cell.points, "assumed (data)")
        elif len(cell.functions) > 1:
            groups.setdefault(cell.functions, []).append(cell)
    for functions, cells in groups.items():
        names = sorted(functions)
        decided = {
            n: {c: screen(cells, {**dict.fromkeys(names, probe), n: fn}) for c, fn in survivors[n].items()}
            for n in names
        }
        for n in names:
            for c, (passed, _) in decided[n].items():
                for cell in cells:
                    if cell.grade_id in passed and cell.grade_id not in score.earned:
                        score.add(cell.grade_id, cell.points, f"{n}={c}, any other")
        combos = list(itertools.islice(itertools.product(*(survivors[n] for n in names)), PAIRS_LIMIT + 1))
        if len(combos) > PAIRS_LIMIT:
            for cell in cells:
                score.add(cell.grade_id, cell.points, "assumed (too many combinations)")
            continue
        for combo in combos:
            if not (unearned := [c for c in cells if c.grade_id not in score.earned]):
                break
            known = max(decided[n][c][1] for n, c in zip(names, combo))
            if all(cells.index(cell) < known for cell in unearned):
                continue  # one of the combination never reached its partners in the cells it could still earn
            binding = {n: survivors[n][c] for n, c in zip(names, combo)}
            passed = passed_cells(cells, binding)
            for cell in unearned:
                if cell.grade_id in passed:
                    score.add(cell.grade_id, cell.points, ", ".join(f"{n}={c}" for n, c in zip(names, combo)))
    return score


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


def every_lesson_definition() -> tuple[dict[str, Callable[..., Any]], list[str]]:
    """Every lesson's definitions, and each one that could not be built."""
    found: dict[str, Callable[..., Any]] = {}
    unbuilt: list[str] = []
    for path in LESSONS:
        built, failed = lesson_definitions(path)
        found.update(built)
        unbuilt += failed
    return found, unbuilt


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


def candidates_for(name: str, lessons: dict[str, Callable[..., Any]]) -> dict[str, Callable[..., Any]]:
    """What a transcriber has: ``lessons`` (every lesson definition), the kit's public callables, the kit's loop
    as a resume."""
    found = dict(lessons)
    for arity in sorted({a for a in graded(REGISTRY[name]).arity.values() if a != ANY_ARITY}):
        found.update(kit_callables(arity))
    if ANY_ARITY in graded(REGISTRY[name]).arity.values():
        kit = [s for s in rc.STRATEGIES.values() if s.name in ("none", "delete", "rerun")]
        found.update({f"run_agent+{s.name}": run_agent_as_resume(s) for s in kit})
        found["run_agent+given"] = run_agent_as_resume(None)
    return found


def serve(requests: typing.TextIO, replies: typing.TextIO) -> None:
    """Grade each assignment asked for (a JSON line ``[name, out]``) in a child forked from this process, answering
    each with a line: the child's exit status (0: its score is written to ``out`` as JSON).

    The lean interpreter of the transcription tests, one per worker that runs them: it builds every lesson
    definition and imports the kit's modules once (the lessons' ``import anthropic`` is most of it), and each
    assignment is graded in a child forked from that state, as a fresh interpreter would reach it.

    Not in the test's own process: a candidate is graded in a forked child, and a fork costs in proportion to
    the memory of the process forked. A test worker holds whatever the files it ran imported (nbgrader,
    JupyterHub, Dask: 300 MB, 48 ms a fork here); this interpreter holds the kit, its checks and the lessons'
    definitions only. Nothing in it imports nbgrader: the notebooks are read as plain JSON.
    """
    lessons, unbuilt = every_lesson_definition()
    assert lessons, "no lesson definition was found: the test would grade nothing"
    kit_modules()
    for line in requests:
        name, out = json.loads(line)
        pid = crash._fork()
        if pid == 0:
            code = 0
            # Every folder the graded children make goes in here: they leave with os._exit, removing none.
            tempfile.tempdir = tempfile.mkdtemp(prefix="no-answers-")
            try:
                score = best_score(REGISTRY[name], candidates_for(name, lessons))
                report = {"points": score.points, "total": score.total, "earned": score.earned, "unbuilt": unbuilt}
                Path(out).write_text(json.dumps(report))
            except BaseException:  # noqa: BLE001 - told on stderr, and by the exit status
                traceback.print_exc()
                code = 1
            shutil.rmtree(tempfile.tempdir, ignore_errors=True)
            # the checks' scratch root, made when this interpreter imported them: the next child makes it again
            shutil.rmtree(support._SCRATCH_ROOT, ignore_errors=True)
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        replies.write(f"{status}\n")
        replies.flush()


@pytest.fixture(scope="module")
def transcriber(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """The lean interpreter of :func:`serve`, for this module's transcription tests, and its temp folder."""
    temp = tmp_path_factory.mktemp("transcriber-temp")
    with subprocess.Popen(
        [sys.executable, __file__],
        cwd=ROOT,
        env={**os.environ, "TMPDIR": str(temp)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as proc:
        yield proc, temp
        proc.stdin.close()  # type: ignore[union-attr]  # serve() returns at the end of its input


def test_every_assignment_has_function_cells_to_grade():
    """The reading finds, in every registered assignment, test cells that take a function the learner writes."""
    for name in ASSIGNMENTS:
        g = graded(REGISTRY[name])
        assert g.arity and any(c.functions for c in g.cells), f"{name}: no test cell takes a learner function"


@pytest.mark.slow
@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_transcribing_the_lessons_and_the_kit_scores_under_half(name, tmp_path, transcriber):
    """Lesson definitions and the kit's callables, with the manual and level-1 points assumed earned, score under half."""
    proc, temp = transcriber
    out = tmp_path / "score.json"
    proc.stdin.write(json.dumps([name, str(out)]) + "\n")
    proc.stdin.flush()
    assert proc.stdout.readline() == "0\n", f"{name}: grading failed (its traceback is on stderr)"
    left = sorted(p.name for p in temp.iterdir())
    assert not left, f"{name}: grading left {len(left)} folders in the temp folder, such as {left[:3]}"
    score = json.loads(out.read_text())
    print(f"{name}: {score['points']}/{score['total']} by transcription")
    for line in score["unbuilt"]:
        warnings.warn(f"not graded, could not be built: {line}", stacklevel=1)
    assert 2 * score["points"] < score["total"], (
        f"{name}: {score['points']}/{score['total']} by transcription: {score['earned']}"
    )


def solution_sources(name: str) -> list[str]:
    """The source notebook's code a learner writes or is given: its solution cells and its ungraded ones."""
    sources = []
    for cell in source_notebook(name)["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell["cell_type"] == "code" and (meta.get("solution") or not meta.get("grade")):
            sources.append(re.sub(r"(?m)^\s*[%!].*$|^ *### (BEGIN|END) SOLUTION.*$", "", "".join(cell["source"])))
    return sources


@pytest.mark.slow
def test_the_solution_scores_full_by_the_same_reckoning():
    """The control: the reckoning gives every source notebook's own solution functions the whole total."""
    for name in ASSIGNMENTS:
        namespace: dict[str, Any] = {}
        for source in solution_sources(name):
            exec(compile(source, name, "exec"), namespace)  # the instructor's own notebook: trusted
        g = graded(REGISTRY[name])
        mine = {f"solution.{f}": namespace[f] for f in g.arity}
        score = best_score(REGISTRY[name], mine)
        assert score.points == score.total, f"{name}: the solution scores {score.points}/{score.total}: {score.earned}"


@pytest.mark.slow
def test_a_kit_strategy_passes_what_it_should_and_no_more():
    """The reckoning tells strategies apart: by_effect passes a reconcile cell that rerun fails, on one cell."""
    g = graded(REGISTRY["reconcile"])
    cell = next(c for c in g.cells if c.grade_id == "test_reconcile_C")
    assert passed_cells([cell], {"reconcile": answers.reconcile_by_effect}) == ["test_reconcile_C"]
    assert passed_cells([cell], {"reconcile": rc.STRATEGIES["rerun"].reconcile}) == []


def test_a_definition_that_cannot_be_built_is_named_not_graded(tmp_path):
    """A lesson def whose decorator is missing is listed with its error; the others are still built."""
    cells = ["@not_imported_here\ndef decorated(cp, tools):\n    return cp", "def plain(cp, tools):\n    return cp"]
    notebook = {"cells": [{"cell_type": "code", "source": c} for c in cells], "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "98_broken.ipynb"
    path.write_text(json.dumps(notebook), encoding="utf-8")
    built, unbuilt = lesson_definitions(path)
    assert list(built) == ["98_broken.plain@1"]
    assert unbuilt == ["98_broken.ipynb: decorated (NameError: name 'not_imported_here' is not defined)"]


def _planted_lesson(tmp_path: Path) -> dict[str, Callable[..., Any]]:
    """The definitions of a copy of lesson 01 with resume_skeleton's solution cells planted at its end."""
    notebook = json.loads(LESSONS[0].read_text(encoding="utf-8"))
    notebook["cells"] += [{"cell_type": "code", "source": s} for s in solution_sources("resume_skeleton")]
    path = tmp_path / LESSONS[0].name
    path.write_text(json.dumps(notebook), encoding="utf-8")
    built, _ = lesson_definitions(path)
    return built


@pytest.mark.slow
def test_an_answer_planted_in_a_lesson_is_caught(tmp_path):
    """The control: a lesson copy holding the solution's functions scores half or more, pairs included."""
    score = best_score(REGISTRY["resume_skeleton"], _planted_lesson(tmp_path))
    assert 2 * score.points >= score.total, f"{score.points}/{score.total}: {score.earned}"
    assert "append_record=" in score.earned["test_kill_during_append"], score.earned


def _refuses(path: Any) -> list[Any]:
    raise TypeError("not this one")


class _Built:
    def __init__(self, path: str) -> None:
        self.path = path


class _Made:
    def __new__(cls, *args: Any) -> _Made:
        return super().__new__(cls)

    def __init__(self, path: str) -> None:
        self.path = path


def test_a_candidate_refuses_a_call_only_where_python_binds_before_its_code_runs():
    """A plain function or a plainly built class whose signature takes none of the calls refuses them; a wrapper,
    a class with its own ``__new__`` or a signature that takes one of the calls is graded."""
    calls = [(4, ["reconcile"]), (4, ["max_turns", "reconcile"])]

    def one(path: str) -> str:
        return path

    def four(path, task, tools, client, *, reconcile=None, max_turns=1):
        return path

    @functools.wraps(one)
    def wrapped(*args: Any, **kwargs: Any) -> str:
        return one(*args, **kwargs)

    assert refuses_each(one, calls) and refuses_each(_Built, calls) and refuses_each(one, [])
    assert not refuses_each(four, calls) and not refuses_each(four, calls[:1])
    assert not refuses_each(wrapped, calls) and not refuses_each(_Made, calls) and not refuses_each(print, calls)
    assert not refuses_each(ValueError, calls)
    assert not refuses_each(functools.partial(one), calls)


def _a_cell(check: Callable[..., None]) -> Cell:
    return Cell(check.__name__, 1, (CheckCall(check, (("name", "f"),)),), frozenset({"f"}), False)


def test_passes_each_stops_at_the_first_cell_that_fails(tmp_path):
    """The cells after a failed one are not run: whatever they do, not every cell passes."""
    later = tmp_path / "ran"

    def fails(f: Callable[..., Any]) -> None:
        raise AssertionError("no")

    def marks(f: Callable[..., Any]) -> None:
        later.touch()

    assert passes_each([_a_cell(marks)], {"f": print}) and later.exists()
    later.unlink()
    assert not passes_each([_a_cell(fails), _a_cell(marks)], {"f": print}) and not later.exists()


def test_the_warm_up_runs_each_check_on_the_names_it_takes(tmp_path):
    """warm_up binds every name a cell's checks take, so each check runs (and fills its caches) before any fork."""
    ran = tmp_path / "ran"

    def marks(f: Callable[..., Any]) -> None:
        f()
        ran.touch()

    warm_up((_a_cell(marks),))
    assert ran.exists()


def test_a_candidate_refusing_each_call_is_scored_by_the_stand_in(monkeypatch):
    """A function typed ``Callable[..., X]`` that its cell calls with four arguments and a keyword: a one-argument
    candidate is not run, the stand-in refusing every call is (and passes nothing), a four-argument one passes.
    Shared with another function in some cell, every candidate is run."""
    bound: list[Callable[..., Any]] = []
    real = passed_cells

    def spy(cells: list[Cell], binding: Binding) -> list[str]:
        bound.append(binding["f"])
        return real(cells, binding)

    def resumes(f: Callable[..., Any]) -> None:
        f("path", "task", "tools", "client", reconcile=None)

    def one(path: str) -> str:
        return path

    def four(path, task, tools, client, *, reconcile=None):
        return path

    monkeypatch.setattr(sys.modules[__name__], "passed_cells", spy)
    candidates: dict[str, Callable[..., Any]] = {"one": one, "four": four}
    best, left = best_alone("f", ANY_ARITY, [_a_cell(resumes)], candidates, shared=False)
    assert bound[1:] == [four] and bound[0] not in (one, four), bound
    assert best == (1, "four", ["resumes"]) and left == {"four": four}
    bound.clear()
    assert best_alone("f", ANY_ARITY, [_a_cell(resumes)], candidates, shared=True)[0] == best and bound == [one, four]


@pytest.mark.slow
def test_a_screen_decides_the_cells_run_before_a_partner_is_called():
    """A reader that fails before the check appends decides the cell for every append; a right one leaves it open."""
    cell = next(c for c in graded(REGISTRY["resume_skeleton"]).cells if c.grade_id == "test_journal_round_trip")
    namespace: dict[str, Any] = {}
    for source in solution_sources("resume_skeleton"):
        exec(compile(source, "resume_skeleton", "exec"), namespace)  # the instructor's own notebook: trusted
    assert screen([cell], {"append_record": probe, "read_journal": _refuses}) == ([], 1)
    assert screen([cell], {"append_record": probe, "read_journal": namespace["read_journal"]}) == ([], 0)


if __name__ == "__main__":  # the lean interpreter of serve(): requests on stdin, replies on its own copy of stdout
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # what the lessons or the checks print goes to stderr, never among the replies
    serve(sys.stdin, replies)
