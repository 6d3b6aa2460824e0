"""The layout of docs/architecture.md holds: arrows point from a wing to the core, never back."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import venv
from collections.abc import Iterable
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


@pytest.mark.slow
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


def _import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Each module of ``package`` (under ``root``; a package is its ``__init__``) and the modules of it that its
    imports load, at any depth (deferred ones too), relative imports resolved, the packages on the way counted."""
    files = {p: ".".join(p.relative_to(root).with_suffix("").parts) for p in (root / package).rglob("*.py")}
    files = {p: name.removesuffix(".__init__") for p, name in files.items()}
    modules = set(files.values())
    graph: dict[str, set[str]] = {}
    for path, name in files.items():
        edges: set[str] = set()
        for imported in _absolute_imports(path, root):
            parts = imported.split(".")
            # the module it names, or the packages its first parts name (an attribute or the package's own)
            edges |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)} & modules
        # a module's own packages load before it, so an edge to one is no cycle
        graph[name] = edges - {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 2)}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """An import cycle of ``graph`` (its first module again at the end), or None."""
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str] | None:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return None
        for imported in sorted(graph.get(module, ())):
            if found := visit(imported, [*path, module]):
                return found
        done.add(module)
        return None

    return next((c for module in sorted(graph) if (c := visit(module, []))), None)


def test_the_package_has_no_import_cycle():
    """No module of resumable_core (core or wing) imports another that imports it back, deferred imports too."""
    cycle = _cycle(_import_graph(ROOT, "resumable_core"))
    assert cycle is None, f"import cycle: {' -> '.join(cycle)}"


def test_a_planted_import_cycle_is_found(tmp_path):
    """The cycle test fails on a cycle through a deferred relative import and a package's ``__init__``."""
    pkg = tmp_path / "pkg" / "sub"
    pkg.mkdir(parents=True)
    (pkg.parent / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("from .a import A\n")
    (pkg / "a.py").write_text("from ..b import B\nA = 1\n")
    (pkg.parent / "b.py").write_text("def f():\n    from .sub import A\n")
    graph = _import_graph(tmp_path, "pkg")
    assert _cycle(graph) == ["pkg.b", "pkg.sub", "pkg.sub.a", "pkg.b"]
    (pkg.parent / "b.py").write_text("def f():\n    import os\n")
    assert _cycle(_import_graph(tmp_path, "pkg")) is None


def test_the_release_imports_nothing_of_grading():
    """The course's release is what grading builds on: it imports no module of ``course/grading``."""
    grading = "resumable_core.course.grading"
    bad = {m for m in _import_graph(ROOT, "resumable_core")["resumable_core.course.release"] if _within(m, [grading])}
    assert not bad, f"release.py imports {sorted(bad)}"


def test_the_scenarios_are_data_that_runs_no_agent():
    """``scenarios`` imports nothing that runs an agent or acts on its world (loop, tools, world, ledger…)."""
    runners = {f"resumable_core.{m}" for m in ("loop", "claude", "crash", "tools", "world", "ledger", "run_folder")}
    imported = _imported_modules(PACKAGE / "scenarios.py")
    assert not imported & runners, f"scenarios imports {sorted(imported & runners)}: running a scenario is run_folder's"


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
@pytest.mark.extras
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
        "box = rc.RunFolder.create(tempfile.mkdtemp(dir='.'))\n"
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
    "sqlalchemy",
    "resumable_core.course.hidden",
    "resumable_core.course.grading.gradebook",
    "resumable_core.course.grading.pipeline",
    "resumable_core.course.grading.cli",
    *(
        f"resumable_core.course.grading.steps.{m}"
        for m in ("workspace", "workers", "publish", "merge", "course_grades", "report", "feedback", "execute")
    ),
)
"""What no module inside a sandbox may import: the gradebook (``gradebook``, the one module that opens it), the steps
that read or write it, nbgrader, the hidden checks (the checker gets those through the check registry, bound before any
learner code runs)."""
GRADEBOOK_API = ("nbgrader.api", "sqlalchemy")
"""nbgrader's gradebook and the database under it: ``gradebook.py`` alone opens them."""
DATA_ONLY = {"errors.py": set(), "model.py": set(), "reasons.py": {"model"}}
"""The grading wing's data (the errors, the model, the reasons' words) and the only grading modules each may import."""


def _absolute_imports(path: Path, root: Path = ROOT) -> set[str]:
    """Every module an ``import`` statement anywhere in ``path`` names, relative imports resolved from its package."""
    package = ".".join(path.relative_to(root).with_suffix("").parts[:-1])
    if path.name == "__init__.py":
        package = ".".join(path.relative_to(root).parts[:-1])
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


def _within(module: str, packages: Iterable[str]) -> bool:
    """Whether ``module`` is one of ``packages`` or inside one."""
    return any(module == p or module.startswith(p + ".") for p in packages)


def _module_file(name: str) -> Path | None:
    """The file of the ``resumable_core`` module ``name`` (its ``__init__.py`` for a package), or None if no module."""
    base = ROOT.joinpath(*name.split("."))
    return next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.is_file()), None)


def _reached(path: Path) -> dict[Path, set[str]]:
    """Every module of ours that importing ``path`` can load (the packages on the way too), each with its imports."""
    seen: dict[Path, set[str]] = {}
    todo = [path]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen[current] = _absolute_imports(current)
        for name in seen[current]:
            parts = name.split(".") if name.startswith("resumable_core") else []
            todo += [f for i in range(1, len(parts) + 1) if (f := _module_file(".".join(parts[:i]))) is not None]
    return seen


@pytest.mark.slow
@pytest.mark.parametrize("path", INSIDE, ids=lambda p: p.name)
def test_nothing_inside_a_sandbox_reaches_the_gradebook_side_through_another_module(path):
    """inside/* reaches no nbgrader, gradebook or gradebook step through the modules of ours it imports (deferred too)."""
    for module, names in _reached(path).items():
        bad = {m for m in names if _within(m, GRADEBOOK_SIDE)}
        assert not bad, f"{path.name} reaches {module.relative_to(ROOT)}, which imports {sorted(bad)}"


@pytest.mark.slow
def test_only_the_gradebook_module_opens_a_gradebook():
    """Within course/grading only ``gradebook.py`` imports nbgrader's gradebook API (``nbgrader.api``) or SQLAlchemy."""
    for path in sorted(set(GRADING.rglob("*.py")) - {GRADING / "gradebook.py"}):
        bad = {m for m in _absolute_imports(path) if _within(m, GRADEBOOK_API)}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}: a gradebook query goes in gradebook.py"


@pytest.mark.parametrize("name", sorted(DATA_ONLY))
def test_the_grading_data_imports_no_notebook_package_and_no_step(name):
    """errors, model and reasons import no nbgrader or nbformat, and of ours only the data they build on."""
    imported = _absolute_imports(GRADING / name)
    heavy = {m for m in imported if m.split(".")[0] in FORBIDDEN_IN_CORE}
    assert not heavy, f"{name} imports {sorted(heavy)}"
    # and the course wing's error root, which imports nothing of ours
    allowed = {f"resumable_core.course.grading.{m}" for m in DATA_ONLY[name]} | {"resumable_core.course.errors"}
    ours = {m for m in imported if m.startswith("resumable_core") and m != "resumable_core.course.grading"}
    bad = {m for m in ours if not _within(m, allowed)}
    assert not bad, f"{name} imports {sorted(bad)}: it is data, the steps import it, never the other way"


@pytest.mark.parametrize("path", sorted((GRADING / "recheck" / "rpc").glob("*.py")), ids=lambda p: p.name)
def test_the_channel_knows_nothing_of_learners(path):
    """rpc/ imports only the standard library, itself and the course wing's error root: no check, no model, no learner."""
    ours = {m for m in _absolute_imports(path) if m.startswith("resumable_core")}
    allowed = ("resumable_core.course.grading.recheck.rpc", "resumable_core.course.errors")
    assert all(_within(m, allowed) for m in ours), sorted(ours)


@pytest.mark.slow
def test_the_trusted_side_starts_the_inside_by_module_name_never_by_import():
    """No module outside inside/ imports it: recheck and execute start it as ``python -m`` in a command line."""
    outside = [p for p in GRADING.rglob("*.py") if "inside" not in p.parts]
    for path in outside:
        bad = {m for m in _absolute_imports(path) if m.startswith("resumable_core.course.grading.inside")}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


@pytest.mark.slow
@pytest.mark.extras
@pytest.mark.parametrize("path", [p for p in INSIDE if p.stem != "__init__"], ids=lambda p: p.name)
def test_importing_the_inside_loads_nothing_of_the_gradebook_side(path):
    """What a sandbox's process loads, measured: a package's ``__init__`` or a registry's dynamic import counts too.
    The checker alone holds the hidden checks (its sandbox runs no learner code)."""
    name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    loaded = subprocess.run(
        [sys.executable, "-c", f"import json, sys, {name}; print(json.dumps(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    forbidden = tuple(m for m in GRADEBOOK_SIDE if path.stem != "checker" or m != "resumable_core.course.hidden")
    bad = [m for m in json.loads(loaded) if _within(m, forbidden)]
    assert not bad, f"importing {path.name} loads {bad}"


def _rootless_errors(modules: Iterable[object], root: type[BaseException]) -> list[str]:
    """Each ``Exception`` class defined in ``modules`` that does not subclass ``root``."""
    return sorted(
        f"{m.__name__}.{name}"  # type: ignore[attr-defined]
        for m in modules
        for name, c in vars(m).items()
        if isinstance(c, type) and issubclass(c, Exception) and c.__module__ == m.__name__ and not issubclass(c, root)  # type: ignore[attr-defined]
    )


@pytest.mark.extras
@pytest.mark.slow
def test_every_course_error_subclasses_course_error():
    """Every exception the course wing defines is a ``CourseError`` (a timeout signal that must pass a learner's
    ``except Exception`` stays a bare ``BaseException``); a planted root-less one is found."""
    import importlib
    import pkgutil
    import types

    import resumable_core.course
    from resumable_core.course.errors import CourseError

    names = pkgutil.walk_packages(resumable_core.course.__path__, "resumable_core.course.")
    modules = [importlib.import_module(m.name) for m in names]
    assert len(modules) > 50
    assert _rootless_errors(modules, CourseError) == []
    planted = types.ModuleType("planted")
    exec(
        "class OddError(RuntimeError): pass\nclass FineError(CourseError): pass",
        {"__name__": "planted", "CourseError": CourseError},
        vars(planted),
    )
    assert _rootless_errors([planted], CourseError) == ["planted.OddError"]
