"""The student kit: its zip, unpacked into an empty folder, holds no answer, and its own ``make test`` passes.

"No answer" is checked against ``solutions/`` three ways: no file holds a solution region, a
hidden test block's code, or the definition of a function a hidden block calls.

How code is compared. Both sides are cut into *meaningful lines*: a trailing comment removed,
whitespace collapsed, and kept only when at least ``MIN_CHARS`` non-space characters remain. That
drops ``return cp``, ``pass``, ``try:``, ``else:``, ``if p is None:`` and ``os.close(fd)``: the
course's vocabulary, which the lessons rightly teach. A solution region is *held* by a file when
``RUN`` of its meaningful lines appear there in a row (all of them, for a shorter region): the
lessons share single lines with the answers (their ``answer()`` helper appends a tool_result the
same way), but three in a row is the answer's shape, not the vocabulary. A hidden test block is
short, specific test code, so a single one of its meaningful lines anywhere is a leak.
"""

from __future__ import annotations

import ast
import builtins
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from resumable_core.course import notebooks, release, student_kit

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = sorted((ROOT / "solutions").glob("*/*.ipynb"))
SOLUTION_MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")
HIDDEN_MARKERS = ("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")
MIN_CHARS = 16  # non-space characters a line needs to count; see the module docstring
RUN = 3  # meaningful lines of a solution region in a row that make a file hold it
KIT_MAKE_TIMEOUT = 1800  # seconds; a safety net against a hung kernel, not a speed requirement


def meaningful(line: str) -> str | None:
    """The line without its trailing comment and with whitespace collapsed, or None if trivial."""
    code = re.sub(r"(^|\s)#.*$", "", line)
    code = " ".join(code.split())
    return code if len(code.replace(" ", "")) >= MIN_CHARS else None


def meaningful_lines(text: str) -> list[str]:
    """The meaningful lines of a text, in order."""
    return [m for m in map(meaningful, text.splitlines()) if m is not None]


def cell_sources(path: Path) -> list[str]:
    """The source of every code cell of a notebook."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return ["".join(cell["source"]) for cell in cells if cell["cell_type"] == "code"]


def blocks(source: str, markers: tuple[str, str]) -> Iterator[str]:
    """The code between each pair of ``markers`` lines in a cell's source."""
    begin, end = markers
    for match in re.finditer(rf"^[ \t]*{re.escape(begin)}[^\n]*\n(.*?)^[ \t]*{re.escape(end)}", source, re.M | re.S):
        yield match.group(1)


def regions(markers: tuple[str, str]) -> dict[str, list[str]]:
    """Every marked block of ``solutions/``, as meaningful lines, by ``notebook:cell``."""
    found = {}
    for notebook in SOLUTIONS:
        for i, source in enumerate(cell_sources(notebook)):
            for block in blocks(source, markers):
                found[f"{notebook.relative_to(ROOT)}:cell {i}"] = meaningful_lines(block)
    return found


def kit_texts(folder: Path) -> dict[str, str]:
    """Every file of an unpacked kit as text; a notebook as its cells' sources and outputs."""
    texts = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        text = path.read_text(encoding="utf-8", errors="replace")
        if path.suffix == ".ipynb":
            cells = json.loads(text)["cells"]
            outputs = ["".join(o.get("text", "")) for c in cells for o in c.get("outputs", [])]
            text = "\n".join(["".join(c["source"]) for c in cells] + outputs)
        texts[path.relative_to(folder).as_posix()] = text
    return texts


def holds_in_a_row(lines: list[str], run: list[str]) -> bool:
    """Whether ``run`` appears in ``lines`` as consecutive items."""
    return any(lines[i : i + len(run)] == run for i in range(len(lines) - len(run) + 1))


def solution_leaks(texts: dict[str, str]) -> list[str]:
    """Every (region, file) where the file holds ``RUN`` of the region's meaningful lines in a row."""
    file_lines = {name: meaningful_lines(text) for name, text in texts.items()}
    leaks = []
    for where, lines in regions(SOLUTION_MARKERS).items():
        size = min(RUN, len(lines))
        runs = [lines[i : i + size] for i in range(len(lines) - size + 1)] if size else []
        leaks += [f"{where} in {name}" for name, fl in file_lines.items() if any(holds_in_a_row(fl, r) for r in runs)]
    return leaks


def hidden_test_leaks(texts: dict[str, str]) -> list[str]:
    """Every (hidden block line, file) where the file holds that line."""
    flat = {name: " ".join(text.split()) for name, text in texts.items()}
    return [
        f"{where}: {line!r} in {name}"
        for where, lines in regions(HIDDEN_MARKERS).items()
        for line in lines
        for name, text in flat.items()
        if line in text
    ]


def notebook_definitions(notebook: Path) -> set[str]:
    """Names a notebook binds itself (functions, classes, variables): the learner's, not checks."""
    names = set()
    for source in cell_sources(notebook):
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
    return names


def hidden_calls() -> set[str]:
    """Names of the functions hidden test blocks call, other than builtins and the notebook's own."""
    called = set()
    for notebook in SOLUTIONS:
        own = notebook_definitions(notebook) | set(dir(builtins))
        for source in cell_sources(notebook):
            for block in blocks(source, HIDDEN_MARKERS):
                for node in ast.walk(ast.parse(textwrap.dedent(block))):
                    if isinstance(node, ast.Call):
                        func = node.func
                        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                        if name and name not in own:
                            called.add(name)
    return called


def definition_leaks(texts: dict[str, str]) -> list[str]:
    """Every (hidden block's callee, file) where the file defines it."""
    return [
        f"def {name}( in {file}"
        for name in sorted(hidden_calls())
        for file, text in texts.items()
        if re.search(rf"\bdef\s+{re.escape(name)}\s*\(", text)
    ]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The kit built into a temp folder: the zip, and its contents unpacked into an empty folder."""
    started = time.perf_counter()
    _, archive = student_kit.build(tmp_path_factory.mktemp("dist"))
    print(f"kit built in {time.perf_counter() - started:.2f} s")
    empty = tmp_path_factory.mktemp("unzipped")
    assert list(empty.iterdir()) == []
    with zipfile.ZipFile(archive) as z:
        z.extractall(empty)
    return archive, empty / student_kit.KIT_NAME


def test_solutions_have_regions_to_check() -> None:
    """The checks below have something to look for: solution regions, hidden blocks and their callees."""
    assert len(regions(SOLUTION_MARKERS)) >= len(SOLUTIONS) >= 3
    assert all(regions(SOLUTION_MARKERS).values()), "every solution region has a meaningful line"
    assert regions(HIDDEN_MARKERS) and hidden_calls()


def test_kit_holds_the_manifest(built: tuple[Path, Path]) -> None:
    """The kit has the lessons, exercises, simulator, library, visible checks and its own files, and no instructor's file."""
    _, kit = built
    names = set(kit_texts(kit))
    for expected in ("README.md", "Makefile", "pyproject.toml", "environment.yml", "lessons/README.md"):
        assert expected in names
    assert {"simulator/simulator.ipynb", "resumable_core/__init__.py", "resumable_core/course/__init__.py"} <= names
    assert any(n.startswith("resumable_core/lab/fixtures/") for n in names)
    for notebook in SOLUTIONS:
        assert f"exercises/{notebook.parent.name}/{notebook.name}" in names
        assert f"resumable_core/course/checks/{notebook.stem}.py" in names
    course = {n for n in names if n.startswith("resumable_core/course/")}
    learners = {
        "resumable_core/course/__init__.py",
        "resumable_core/course/errors.py",  # the root of the checks' errors
        "resumable_core/course/self_check.py",  # make check
    }
    assert learners <= course
    shipped = ("resumable_core/course/checks/", "resumable_core/course/locale/")  # the visible checks and their words
    assert all(n in learners | {"resumable_core/course/i18n.py"} or n.startswith(shipped) for n in course)
    assert not [n for n in names if "/hidden/" in n or "/grading/" in n]  # nor their catalogs
    assert not [n for n in names if n.startswith("solutions/") or "__pycache__" in n or n.endswith(".pyc")]


@pytest.mark.slow
def test_zip_is_deterministic(built: tuple[Path, Path], tmp_path: Path) -> None:
    """Two builds write the same bytes: sorted entries, one date (the source's, not 1980's) and fixed modes."""
    archive, _ = built
    _, again = student_kit.build(tmp_path)
    assert again.read_bytes() == archive.read_bytes()
    with zipfile.ZipFile(archive) as z:
        infos = z.infolist()
    assert [i.filename for i in infos] == sorted(i.filename for i in infos)
    assert {i.date_time for i in infos} == {student_kit.zip_date(student_kit.source_epoch())}
    assert all(i.date_time >= (2020, 1, 1, 0, 0, 0) for i in infos)
    assert all(i.filename.startswith(f"{student_kit.KIT_NAME}/") for i in infos)


def test_zip_date_is_the_sources(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The kit's date is SOURCE_DATE_EPOCH, else the last commit's, else a recent constant; zip's 1980 at the earliest."""
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225601")
    assert student_kit.source_epoch() == 1767225601
    student_kit.write_zip({"a.txt": b"a"}, tmp_path / "a.zip", student_kit.zip_date(student_kit.source_epoch()))
    with zipfile.ZipFile(tmp_path / "a.zip") as z:
        assert z.getinfo(f"{student_kit.KIT_NAME}/a.txt").date_time == (2026, 1, 1, 0, 0, 0)  # zip keeps even seconds
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")
    with pytest.raises(student_kit.StudentKitError, match="SOURCE_DATE_EPOCH"):
        student_kit.source_epoch()
    monkeypatch.delenv("SOURCE_DATE_EPOCH")
    assert student_kit.source_epoch(tmp_path) == student_kit.FALLBACK_EPOCH  # not a checkout
    assert student_kit.zip_date(student_kit.FALLBACK_EPOCH)[0] >= 2026
    if (ROOT / ".git").exists() and shutil.which("git"):
        last = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%ct"], capture_output=True, text=True)
        assert student_kit.source_epoch(ROOT) == int(last.stdout)
    assert student_kit.zip_date(0) == (1980, 1, 1, 0, 0, 0)


@pytest.mark.slow
def test_no_solution_region(built: tuple[Path, Path]) -> None:
    """No file of the kit holds a solution region of solutions/."""
    assert solution_leaks(kit_texts(built[1])) == []


def test_no_hidden_test_code(built: tuple[Path, Path]) -> None:
    """No file of the kit holds a line of a hidden test block."""
    assert hidden_test_leaks(kit_texts(built[1])) == []


@pytest.mark.slow
def test_no_definition_of_a_hidden_check(built: tuple[Path, Path]) -> None:
    """No file of the kit defines a function that a hidden test block calls."""
    assert definition_leaks(kit_texts(built[1])) == []


def _planted_solution() -> str:
    """``RUN`` lines of the first solution region, as code indented in a function."""
    lines = next(iter(regions(SOLUTION_MARKERS).values()))[:RUN]
    return "def planted():\n" + "".join(f"    {line}  # planted\n" for line in lines)


def _planted_hidden_line() -> str:
    """One line of the first hidden test block."""
    return next(iter(regions(HIDDEN_MARKERS).values()))[0] + "\n"


def _planted_definition() -> str:
    """The definition of a function a hidden block calls."""
    return f"def {sorted(hidden_calls())[0]}(fn):\n    pass\n"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("plant", "finder"),
    [
        (_planted_solution, solution_leaks),
        (_planted_hidden_line, hidden_test_leaks),
        (_planted_definition, definition_leaks),
    ],
    ids=["solution", "hidden-line", "definition"],
)
def test_a_planted_answer_is_found(built: tuple[Path, Path], tmp_path: Path, plant, finder) -> None:
    """Each check fails on a copy of the kit with an answer planted in one of its files."""
    copy = tmp_path / "kit"
    shutil.copytree(built[1], copy)
    target = copy / "resumable_core" / "course" / "checks" / "support.py"
    target.write_text(target.read_text(encoding="utf-8") + "\n\n" + plant(), encoding="utf-8")
    leaks = finder(kit_texts(copy))
    assert leaks and all("resumable_core/course/checks/support.py" in leak for leak in leaks), leaks


def test_caches_and_checkpoints_are_left_out() -> None:
    """A file inside __pycache__ or .ipynb_checkpoints, or a .pyc, never ships."""
    for junk in (
        "lessons/.ipynb_checkpoints/01-checkpoint.ipynb",
        "resumable_core/__pycache__/x.pyc",
        "simulator/x.pyc",
    ):
        assert student_kit.is_junk(Path(junk))
    assert not student_kit.is_junk(Path("lessons/01_skeleton_resume.ipynb"))
    assert student_kit.ships("resumable_core/course/checks/reconcile.py")
    assert not student_kit.ships("resumable_core/course/hidden/reconcile.py")
    assert not student_kit.ships("resumable_core/course/student_kit.py")
    assert student_kit.ships("resumable_core/course/self_check.py")
    assert student_kit.ships("resumable_core/course/errors.py")  # the checks' errors subclass its root
    assert not student_kit.ships("solutions/reconcile/reconcile.ipynb")


def test_a_learners_setup_removes_the_iri_parser_as_the_repositorys_does(built: tuple[Path, Path]) -> None:
    """The kit's own ``make setup`` (a fresh ``.venv``) uninstalls rfc3987-syntax, as ``make setup`` here does:
    every ``check`` the learner runs reads notebooks, and that module costs each such process 1-5 s."""
    plan = subprocess.run(["make", "-n", "setup"], cwd=built[1], capture_output=True, text=True, check=True).stdout
    assert "pip uninstall -q -y rfc3987-syntax" in plan


@pytest.mark.slow
def test_kit_make_test_passes(built: tuple[Path, Path]) -> None:
    """The unpacked kit's own `make test` passes, with the kit's copy of resumable_core imported.

    It runs in this repository's environment (``VENV=``) rather than a fresh one, to skip a
    minutes-long install; the kit's Makefile puts the kit first on PYTHONPATH, and its tests
    assert that both pytest and the lessons' kernels import the kit's copy.
    """
    kit_make_test(built[1], "kit")


def kit_make(kit: Path, *args: str, silent: bool = True) -> subprocess.CompletedProcess[str]:
    """``make ARGS`` in an unpacked kit, with this repository's environment (``VENV=``), offline (``-s`` when ``silent``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RESUMABLE_", "ANTHROPIC_", "PYTEST_"))}
    venv = Path(sys.executable).parent.parent
    return subprocess.run(
        ["make", *(["-s"] if silent else []), *args, f"VENV={venv}"],
        cwd=kit,
        env=env,
        capture_output=True,
        text=True,
        timeout=KIT_MAKE_TIMEOUT,
    )


def kit_make_test(kit: Path, edition: str, *args: str) -> None:
    """Run the unpacked kit's own `make test` (with make's ``args``), say how long it took, and require that its tests
    passed."""
    started = time.perf_counter()
    done = kit_make(kit, "test", *args, silent=False)
    print(f"{edition} make test: {time.perf_counter() - started:.1f} s")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert re.search(r"\d+ passed", done.stdout) and " failed" not in done.stdout


def answered_in_place(built: Path, kit: Path) -> Path:
    """A copy of the built kit at ``kit`` whose reconcile exercise holds the solution's answers, written in place."""
    shutil.copytree(built, kit)
    exercise = kit / "exercises" / "reconcile" / "reconcile.ipynb"
    answers = {
        cell.metadata["nbgrader"]["grade_id"]: notebooks.source(cell)
        for cell in notebooks.read(release.notebook_path("reconcile")).cells
        if cell.metadata["nbgrader"]["solution"]
    }
    exercise.write_text(json.dumps(release.fill_in(exercise, answers), indent=1, ensure_ascii=False) + "\n")
    return kit


@pytest.mark.slow
def test_a_learner_fills_an_exercise_in_place_and_the_kit_passes(built: tuple[Path, Path], tmp_path: Path) -> None:
    """Answers written in exercises/ itself, as the kit's README says: `make check` passes it, `make test` still passes."""
    kit = answered_in_place(built[1], tmp_path / "kit")
    checked = kit_make(kit, "check", "NB=exercises/reconcile/reconcile.ipynb")
    assert checked.returncode == 0, checked.stdout[-4000:] + checked.stderr[-4000:]
    assert re.search(r"\b(\d+) of \1 visible tests pass", checked.stdout) and "FAILED" not in checked.stdout
    tested = kit_make(kit, "test", "PYTEST_ARGS=-rs tests/test_kit_exercises.py")
    assert tested.returncode == 0, tested.stdout[-4000:] + tested.stderr[-4000:]
    assert "exercises/reconcile/reconcile.ipynb holds your answers" in tested.stdout
