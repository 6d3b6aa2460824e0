"""The isolated re-check (resumable_core/isolated.py): the course's checks re-run in a fresh process,
on the learner's definitions only, bound before any learner code runs."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import grading_samples as samples  # noqa: E402

from resumable_core import isolated  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SOURCES = {a: REPO / "solutions" / a / f"{a}.ipynb" for a in ("reconcile", "postmortem", "resume_skeleton")}
RECONCILE = SOURCES["reconcile"]

pytestmark = pytest.mark.skipif(not RECONCILE.exists(), reason="the course's notebooks are not there")


def _points(source: Path) -> dict[str, float]:
    nb = nbformat.read(str(source), as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: c.metadata["nbgrader"]["points"] for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("grade") and c.cell_type == "code"}


def _submit(tmp_path: Path, reconcile: str, level1: str = samples.LEVEL1, name: str = "learner") -> Path:
    nb = samples.submission(nbformat.read(str(RECONCILE), as_version=4), samples.answers(reconcile, level1))
    path = tmp_path / f"{name}.ipynb"
    nbformat.write(nb, str(path))
    return path


def _failed(report: dict) -> set[str]:
    return {g for g, why in report.items() if why}


def _calls(source: str) -> list[tuple]:
    """The ``graders.check_*(...)`` calls a test cell makes, as (name, positional names, keyword literals)."""
    calls = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr.startswith("check_"):
            calls.append((node.func.attr, tuple(a.id for a in node.args),
                          {k.arg: ast.literal_eval(k.value) for k in node.keywords}))
    return calls


@pytest.mark.parametrize("assignment", sorted(SOURCES))
def test_the_map_matches_every_test_cell_of_the_notebooks(assignment):
    """CHECKS lists exactly the graders calls each test cell makes (hidden ones too); every test cell is mapped."""
    tests = isolated.test_sources(json.loads(SOURCES[assignment].read_text()))
    answers = isolated.ANSWERS.get(assignment, {})
    assert set(tests) == set(isolated.CHECKS[assignment]) | set(answers)
    for gid, source in tests.items():
        if gid in answers:
            assert not _calls(source) and answers[gid][0] in source
        else:
            assert _calls(source) == [tuple(c) for c in isolated.CHECKS[assignment][gid]], gid


@pytest.mark.parametrize("assignment", sorted(SOURCES))
def test_the_correct_solution_passes_every_check_in_isolation(assignment, tmp_path):
    """The instructor's solution notebook passes every mapped test cell in a fresh process."""
    report = isolated.run(SOURCES[assignment], assignment, source=SOURCES[assignment], timeout=60)
    assert set(report) == set(isolated.CHECKS[assignment]) | set(isolated.ANSWERS.get(assignment, {}))
    assert _failed(report) == set()


def test_rerun_everything_fails_exactly_the_cells_nbgrader_fails(tmp_path):
    """The rerun-everything solution loses in isolation exactly the points nbgrader takes from it (16 -> 11)."""
    report = isolated.run(_submit(tmp_path, samples.REAL_RERUN), "reconcile", source=RECONCILE, timeout=30)
    assert _failed(report) == {"test_reconcile_C", "test_side_effect_tools", "test_unknown_tool"}
    points = _points(RECONCILE)
    kept = sum(p for g, p in points.items() if g in report and not report[g])
    assert kept == samples.SAMPLES["rerun_everything"][2]
    assert "must not be executed" in report["test_reconcile_C"]


def test_the_sample_monkeypatch_is_neutralised(tmp_path):
    """The monkeypatch sample's loop and attribute assignments never run: it fails like the plain rerun."""
    module, skipped = isolated.filter_source(samples.REAL_MONKEYPATCH)
    kept = ast.unparse(module)
    assert "setattr" not in kept and "graders" not in kept and "rc.Toolbox.execute =" not in kept
    assert any("For" in s for s in skipped) and "def reconcile" in kept and "def _fake_execute" in kept
    report = isolated.run(_submit(tmp_path, samples.REAL_MONKEYPATCH), "reconcile", source=RECONCILE, timeout=30)
    assert _failed(report) == {"test_reconcile_C", "test_side_effect_tools", "test_unknown_tool"}


PATCH_AT_IMPORT = samples.REAL_RERUN + '''

def staticmethod(f):  # shadows the builtin: "@staticmethod" below calls this at definition time
    for _name in dir(graders):
        if _name.startswith("check_"):
            setattr(graders, _name, lambda *a, **kw: None)
    graders.CountingToolbox.count = lambda self, name=None: 0
    real = rc.Toolbox.execute
    rc.Toolbox.execute = lambda self, name, input, idempotency_key=None: (
        "sent" if name == "send_email" else real(self, name, input, idempotency_key=idempotency_key))
    return f

@staticmethod
def helper():
    pass
'''


def test_a_patch_run_at_definition_time_is_undone(tmp_path):
    """A learner def run at import (as a decorator) that patches the checks, the spy and Toolbox.execute changes no result."""
    report = isolated.run(_submit(tmp_path, PATCH_AT_IMPORT), "reconcile", source=RECONCILE, timeout=30)
    assert _failed(report) == {"test_reconcile_C", "test_side_effect_tools", "test_unknown_tool"}


PATCH_DURING_CHECK = samples.REAL_RERUN.replace(
    "    p = cp.pending_tool_use\n",
    "    from resumable_core import graders as _g\n"
    "    _g.CountingToolbox.count = lambda self, name=None: 0\n"
    "    p = cp.pending_tool_use\n",
    1,
)


def test_a_patch_made_while_a_check_runs_fails_that_check(tmp_path):
    """A reconcile that patches the call spy while it runs fails every check it ran in, with the name of what changed."""
    report = isolated.run(_submit(tmp_path, PATCH_DURING_CHECK), "reconcile", source=RECONCILE,
                          only=["test_reconcile_A", "test_reconcile_B", "test_reconcile_C"], timeout=30)
    assert set(report) == {"test_reconcile_A", "test_reconcile_B", "test_reconcile_C"}
    for gid in report:
        assert "resumable_core.graders.CountingToolbox.count" in report[gid]


def test_level1_answers_are_checked_against_the_hidden_assertions(tmp_path):
    """A valid but wrong level-1 answer fails only its cell; with the release (no hidden tests) only validity counts."""
    wrong = samples.LEVEL1.replace('"C": "is_error_fallback"', '"C": "rerun_tool"')
    path = _submit(tmp_path, samples.REAL_CORRECT, wrong)
    only = ["test_level1_A", "test_level1_B", "test_level1_C"]
    report = isolated.run(path, "reconcile", source=RECONCILE, only=only, timeout=30)
    assert report["test_level1_A"] is None and report["test_level1_B"] is None
    assert "not the right action" in report["test_level1_C"]
    release = REPO / "exercises" / "reconcile" / "reconcile.ipynb"
    if release.exists():
        assert _failed(isolated.run(path, "reconcile", source=release, only=only, timeout=30)) == set()


def test_stdout_writes_and_exits_cannot_forge_the_result(tmp_path):
    """Prints and raw writes to fd 1 go nowhere; a process that exits early fails every cell it was asked about."""
    forging = samples.REAL_RERUN.replace(
        "    p = cp.pending_tool_use\n",
        "    import os\n    print('{}')\n    os.write(1, b'{}\\n')\n    p = cp.pending_tool_use\n", 1)
    report = isolated.run(_submit(tmp_path, forging), "reconcile", source=RECONCILE,
                          only=["test_reconcile_B", "test_reconcile_C"], timeout=30)
    assert report["test_reconcile_B"] is None and "must not be executed" in report["test_reconcile_C"]
    exiting = samples.REAL_CORRECT.replace("    p = cp.pending_tool_use\n", "    import os\n    os._exit(0)\n", 1)
    report = isolated.run(_submit(tmp_path, exiting, name="exits"), "reconcile", source=RECONCILE,
                          only=["test_reconcile_B"], timeout=30)
    assert "exit code 0 and no result" in report["test_reconcile_B"]


def test_filter_keeps_definitions_and_literals_and_drops_code_that_runs():
    """Imports, defs, classes and literal assignments stay; calls, loops, computed defaults and odd decorators go."""
    source = '''import os
from pathlib import Path
%time x = 1
LIMIT = 3
NAMES: dict = {"a": (1, 2)}
TOOLS = frozenset({"read_file"})
rc.Toolbox.execute = None
print("hi")
for i in range(3):
    pass
def ok(cp, tools: "Toolbox" = None, n=LIMIT) -> int:
    return n
def computed(x=print("at import")):
    pass
@functools.lru_cache(maxsize=None)
def cached():
    pass
@register
def registered():
    pass
class Meta(type, metaclass=type):
    pass
class Plain(Path):
    """doc"""
    SIZE = 2
    VALUE = compute()
    def __init_subclass__(cls):
        pass
    @property
    def p(self):
        return 1
'''
    module, skipped = isolated.filter_source(source)
    names = [getattr(s, "name", None) or ast.unparse(s).split(" =")[0].split()[-1] for s in module.body]
    assert names == ["os", "Path", "LIMIT", "NAMES", "ok", "cached", "Plain"]
    ok = module.body[4]
    assert ok.returns is None and all(a.annotation is None for a in ok.args.args)
    plain = module.body[-1]
    assert [getattr(s, "name", None) or ast.unparse(s) for s in plain.body] == ["'doc'", "SIZE = 2", "p"]
    assert len(skipped) == 9
    assert isolated.filter_source("def broken(:\n")[0] is None
