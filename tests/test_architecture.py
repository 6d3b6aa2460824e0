"""The layout of docs/architecture.md holds: arrows point from a wing to the core, never back."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

import resumable_core

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "resumable_core"
CORE_MODULES = sorted(p for p in PACKAGE.glob("*.py") if p.name != "__main__.py")
"""The core: every module directly in resumable_core/ (``__main__`` is the entry point that composes the wings)."""
FORBIDDEN_IN_CORE = ("nbgrader", "nbformat", "nbclient", "ipywidgets", "matplotlib", "voila", "jupyter", "jupyterlab")
WINGS = ("resumable_core.lab", "resumable_core.course")


def _imported_modules(path: Path) -> set[str]:
    """Every module an ``import`` statement in ``path`` names (relative imports made absolute)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = "resumable_core" + (f".{base}" if base else "")
                found.update(f"{base}.{a.name}" for a in node.names)
            found.add(base)
    return found


@pytest.mark.parametrize("module", CORE_MODULES, ids=lambda p: p.name)
def test_no_core_module_imports_a_wing_or_a_notebook_package(module):
    """A core module imports neither the lab or course wing nor nbgrader, ipywidgets, matplotlib or voila."""
    bad = sorted(
        name
        for name in _imported_modules(module)
        if name.split(".")[0] in FORBIDDEN_IN_CORE or any(name == w or name.startswith(w + ".") for w in WINGS)
    )
    assert not bad, f"{module.name} imports {bad}: the core may use anthropic and pydantic only"


def test_importing_every_core_module_loads_no_wing():
    """Loading all of the core at run time pulls in no wing and no notebook package either."""
    names = [f"resumable_core.{p.stem}" for p in CORE_MODULES if p.stem != "__init__"]
    code = (
        "import importlib, json, sys\n"
        f"for n in {names!r}: importlib.import_module(n)\n"
        "import resumable_core as rc\n"
        "[getattr(rc, n) for n in rc.__all__]\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/")
    loaded = json.loads(out.stdout)
    bad = [m for m in loaded if m.split(".")[0] in FORBIDDEN_IN_CORE or m.startswith(WINGS)]
    assert not bad, f"the core loaded {bad}"


def test_public_names_are_exactly_all():
    """``__all__`` is a plain list, and every name in it resolves from the core module that defines it."""
    assert isinstance(resumable_core.__all__, list)
    assert sorted(resumable_core.__all__) == sorted(resumable_core._HOME_OF), "__all__ and _HOMES disagree"
    for name in resumable_core.__all__:
        assert getattr(resumable_core, name) is not None, name


def _code_cells(path: Path) -> list[str]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


@pytest.mark.parametrize("notebook", sorted((ROOT / "lessons").glob("*.ipynb")), ids=lambda p: p.name)
def test_lessons_import_no_private_module(notebook):
    """Lessons use public names only: nothing from a ``resumable_core._private`` module."""
    private = [
        line.strip()
        for cell in _code_cells(notebook)
        for line in cell.splitlines()
        if "import" in line and ("resumable_core._" in line or "from ._" in line)
    ]
    assert not private, f"{notebook.name} imports private modules: {private}"


def test_no_sys_path_insert_in_tests_or_benches():
    """Tests and benches import the installed package, never a path they pushed onto sys.path."""
    offenders = [
        str(p.relative_to(ROOT))
        for folder in ("tests", "bench")
        for p in (ROOT / folder).rglob("*.py")
        if "sys.path.insert" in p.read_text(encoding="utf-8") and p.name != Path(__file__).name
    ]
    assert not offenders, f"sys.path.insert in {offenders}"


@pytest.mark.slow
def test_plain_install_brings_only_the_core(tmp_path):
    """``pip install .`` in a fresh venv installs no notebook stack, and the core API imports and runs."""
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    subprocess.run(
        [py, "-m", "pip", "install", "-q", "--disable-pip-version-check", str(ROOT)],
        check=True,
        env=env,
        cwd=tmp_path,
        capture_output=True,
    )
    listed = subprocess.run([py, "-m", "pip", "list", "--format=json"], check=True, capture_output=True, text=True)
    installed = {p["name"].lower() for p in json.loads(listed.stdout)}
    heavy = installed & {"nbgrader", "ipywidgets", "voila", "jupyterlab", "matplotlib", "nbformat", "notebook"}
    assert not heavy, f"a plain install pulled in {sorted(heavy)}"
    probe = (
        "import tempfile, resumable_core as rc\n"
        "box = rc.Sandbox.create(tempfile.mkdtemp())\n"
        "r = box.run(rc.SCENARIOS['send_email'].task)\n"
        "print(r.status, len(box.world.sent_emails()))\n"
    )
    out = subprocess.run([py, "-c", probe], check=True, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert out.stdout.split() == ["finished", "1"], out.stdout + out.stderr


# -- the grading wing's trust zones ---------------------------------------------------------------

GRADING = PACKAGE / "course" / "grading"
INSIDE = sorted((GRADING / "inside").glob("*.py"))
"""What runs inside a sandbox, beside the learner's code."""
GRADEBOOK_SIDE = (
    "nbgrader",
    "resumable_core.course.hidden",
    *(
        f"resumable_core.course.grading.{m}"
        for m in ("workers", "publish", "merge", "course_grades", "pipeline", "cli", "report", "feedback", "execute")
    ),
)
"""What no module inside a sandbox may import: the gradebook and the steps that write it, nbgrader, the hidden checks
(the checker gets those through the check registry, bound before any learner code runs)."""


def _absolute_imports(path: Path) -> set[str]:
    """Every module an ``import`` statement anywhere in ``path`` names, relative imports resolved from its package."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    if path.name == "__init__.py":
        package = ".".join(path.relative_to(ROOT).parts[:-1])
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".")
            base = ".".join(parts[: len(parts) - node.level + 1]) if node.level else ""
            module = ".".join(p for p in (base, node.module or "") if p)
            found.add(module)
            found.update(f"{module}.{a.name}" for a in node.names)
    return found


@pytest.mark.parametrize("path", INSIDE, ids=lambda p: p.name)
def test_nothing_inside_a_sandbox_imports_the_gradebook_side(path):
    """inside/* imports no nbgrader, no gradebook step, no hidden check module."""
    bad = {m for m in _absolute_imports(path) if any(m == f or m.startswith(f + ".") for f in GRADEBOOK_SIDE)}
    assert not bad, f"{path.name} imports {sorted(bad)}"


@pytest.mark.parametrize("path", sorted((GRADING / "rpc").glob("*.py")), ids=lambda p: p.name)
def test_the_channel_knows_nothing_of_learners(path):
    """rpc/ imports only the standard library and itself: no check, no model, no learner."""
    ours = {m for m in _absolute_imports(path) if m.startswith("resumable_core")}
    assert all(m.startswith("resumable_core.course.grading.rpc") for m in ours), sorted(ours)


def test_the_trusted_side_starts_the_inside_by_module_name_never_by_import():
    """No module outside inside/ imports it: recheck and execute start it as ``python -m`` in a command line."""
    outside = [p for p in GRADING.rglob("*.py") if "inside" not in p.parts]
    for path in outside:
        bad = {m for m in _absolute_imports(path) if m.startswith("resumable_core.course.grading.inside")}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"
