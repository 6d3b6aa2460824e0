"""Which checks each test cell calls, read from the trusted source and bound before any learner code runs.

A test cell's calls (``checks.check_x(reconcile, versions=[2])``) are read from its code, never
run: each becomes a :class:`CheckCall` of a check function taken from the assignment's check
modules when this module was imported, with the notebook's names it passes (looked up in the
learner's process at call time) and literals.
"""

from __future__ import annotations

import ast
import copy
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...assignments import REGISTRY
from ...checks.support import HIDDEN_SENTENCE, OBSERVES
from ...notebook_cells import graded_sources, setup_cells
from ..errors import UnknownCheckError
from .learner_view import hidden_lines


def _bind() -> dict[str, dict[str, dict[str, Callable[..., None]]]]:
    """Assignment -> check module name -> its ``check_*`` function objects, taken now."""
    bound: dict[str, dict[str, dict[str, Callable[..., None]]]] = {}
    for name, a in REGISTRY.items():
        modules = (a.checks(), a.hidden())
        bound[name] = {m.__name__: {k: v for k, v in vars(m).items() if k.startswith("check_")} for m in modules}
    return bound


_BOUND = _bind()


def _marked(assignment: str, mark: str) -> bool:
    return any(getattr(f, mark, False) for checks in _BOUND.get(assignment, {}).values() for f in checks.values())


def traced(assignment: str) -> bool:
    """A check of ``assignment`` judges system calls (:func:`...checks.support.observes`): its learner's process is traced."""
    return _marked(assignment, OBSERVES)


@dataclass(frozen=True)
class CheckCall:
    """One call a test cell makes: a bound check, its positional arguments, its keyword literals."""

    check: Callable[..., None]
    args: tuple[tuple[str, Any], ...]
    """Each ``("name", a name the notebook's cells define)`` or ``("value", a literal)``."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    visible: bool = True
    """The call is outside the cell's hidden blocks: the learner's kernel ran it too (and it passed there)."""
    sentence: Callable[[], str] | None = None
    """A hidden call's one failure sentence, in now's language (``hidden.i18n.fails_with``): all its failure says."""

    def run(self, names: Mapping[str, Any] | Callable[[str], Any]) -> None:
        """Call the check on the learner's names and a fresh copy of every literal.

        ``names`` is a namespace (a dict) or what looks a name up (:meth:`..boundary.Learner.lookup`).
        """
        lookup = names if callable(names) else functools.partial(_defined, names)
        values = [lookup(arg) if kind == "name" else copy.deepcopy(arg) for kind, arg in self.args]
        self.check(*values, **copy.deepcopy(self.kwargs))


def _defined(ns: Mapping[str, Any], name: str) -> Any:
    if name not in ns:
        raise AssertionError(f"{name} is not defined by the notebook's cells")
    return ns[name]


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
    A ``check_*`` call on any other name raises :class:`UnknownCheckError`. A call inside a
    ``### BEGIN HIDDEN TESTS`` block is not :attr:`CheckCall.visible`: the kernel never ran it, and its
    check must declare the sentence its failure hands back (:attr:`CheckCall.sentence`), else
    :class:`UnknownCheckError` too.
    """
    modules = _BOUND.get(assignment, {})
    tree = ast.parse(test_source)
    aliases = _aliases([*(ast.parse(s) for s in setup_sources), tree], modules)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)]
    hidden = hidden_lines(test_source)
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
        args = tuple(_argument(a) for a in node.args)
        visible, sentence = node.lineno not in hidden, getattr(check, HIDDEN_SENTENCE, None)
        if not visible and sentence is None:
            raise UnknownCheckError(where, "a hidden check needs the one sentence its failure hands back (fails_with)")
        out.append(CheckCall(check, args, kwargs, visible=visible, sentence=sentence))
    return out


def planned_calls(source: dict, assignment: str) -> dict[str, list[CheckCall]]:
    """Test cell grade_id -> the check calls the trusted ``source`` notebook's cell makes (cells with none left out)."""
    setup = [src for _, src in setup_cells(source)]
    plan = {gid: check_calls(assignment, src, setup) for gid, src in graded_sources(source).items()}
    return {gid: calls for gid, calls in plan.items() if calls}
