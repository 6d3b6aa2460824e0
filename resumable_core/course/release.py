"""The course: the graded exercises as a standard nbgrader course at the repository root.

Layout (all paths relative to the course root, the folder of ``nbgrader_config.py``)::

    solutions/<assignment>/<assignment>.ipynb   nbgrader source (instructor's version)
    exercises/<assignment>/<assignment>.ipynb   release, made only by ``nbgrader generate_assignment``
    submitted/<student>/<assignment>/…          students' work (git-ignored)
    autograded/, feedback/, gradebook.db        nbgrader's outputs (git-ignored)

CLI (``make release`` calls the first)::

    python -m resumable_core.course.release release   # regenerate exercises/ with nbgrader
    python -m resumable_core.course.release check     # fail if exercises/ differs from a fresh generation
    python -m resumable_core.course.release points    # grade_id and points of every graded cell

The notebooks' test cells call :mod:`resumable_core.course.checks` (visible) and
:mod:`resumable_core.course.hidden` (hidden); the assignments are :mod:`resumable_core.course.assignments`.
"""

from __future__ import annotations

import argparse
import copy
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import nbformat

from . import notebooks
from .assignments import ASSIGNMENTS
from .nbgrader_cli import nbgrader

COURSE_ROOT = Path(__file__).resolve().parents[2]
"""The repository root, when the kit runs from its checkout."""

SOURCE_DIR = "solutions"
RELEASE_DIR = "exercises"


# -- notebooks -----------------------------------------------------------------------------


def notebook_path(assignment: str, root: str | Path = COURSE_ROOT, folder: str = SOURCE_DIR) -> Path:
    """``<root>/<folder>/<assignment>/<assignment>.ipynb``."""
    return Path(root) / folder / assignment / f"{assignment}.ipynb"


def grade_cells(notebook: str | Path | dict) -> list[dict[str, Any]]:
    """The graded cells of a notebook: grade_id, points, kind ("auto" or "manual"), hidden tests or not."""
    nb = notebooks.read(notebook) if not isinstance(notebook, dict) else nbformat.from_dict(notebook)
    return [
        {
            "grade_id": notebooks.grade_id(cell),
            "points": cell.metadata.nbgrader.get("points", 0),
            "kind": "manual" if notebooks.is_solution(cell) else "auto",
            "hidden": "### BEGIN HIDDEN TESTS" in notebooks.source(cell),
        }
        for cell in nb.cells
        if notebooks.is_grade(cell)
    ]


def points_table(root: str | Path = COURSE_ROOT) -> dict[str, list[dict[str, Any]]]:
    """Every assignment's graded cells, from the source notebooks."""
    return {a: grade_cells(notebook_path(a, root)) for a in ASSIGNMENTS}


def fill_in(notebook: str | Path | dict, answers: dict[str, str]) -> dict:
    """A copy of a (release) notebook with the source of the cells named by grade_id replaced.

    How a test makes a student's submission: ``answers`` maps grade_id to the cell's new source.
    """
    nb = (
        json.loads(Path(notebook).read_text(encoding="utf-8"))
        if not isinstance(notebook, dict)
        else copy.deepcopy(notebook)
    )
    seen = set()
    for cell in nb["cells"]:
        gid = notebooks.grade_id(cell)
        if gid in answers:
            cell["source"] = answers[gid]
            seen.add(gid)
    missing = set(answers) - seen
    if missing:
        raise KeyError(f"no cell with grade_id {', '.join(sorted(missing))}")
    return nb


# -- nbgrader (through :mod:`.nbgrader_cli`, the one wrapper) ------------------------------


def release(course_root: str | Path = COURSE_ROOT, assignments: Iterable[str] = ASSIGNMENTS) -> list[Path]:
    """Regenerate ``exercises/<assignment>/`` from ``solutions/`` with ``nbgrader generate_assignment --force``."""
    root = Path(course_root).resolve()
    out = []
    for assignment in assignments:
        nbgrader(["generate_assignment", assignment, "--force"], root)
        released = notebook_path(assignment, root, RELEASE_DIR)
        if not released.exists():
            raise RuntimeError(f"nbgrader did not write {released}")
        out.append(released)
    return out


def _tree(folder: Path) -> dict[str, Path]:
    skip = {".ipynb_checkpoints", "__pycache__"}
    return {
        str(p.relative_to(folder)): p
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not skip & set(p.relative_to(folder).parts)
    }


def _notebook_differences(name: str, committed: Path, fresh: Path) -> list[str]:
    a = json.loads(committed.read_text(encoding="utf-8"))
    b = json.loads(fresh.read_text(encoding="utf-8"))
    problems = []
    if a.get("metadata") != b.get("metadata") or (a.get("nbformat"), a.get("nbformat_minor")) != (
        b.get("nbformat"),
        b.get("nbformat_minor"),
    ):
        problems.append(f"{name}: notebook metadata or format differs")
    if len(a["cells"]) != len(b["cells"]):
        return [*problems, f"{name}: {len(a['cells'])} cells, a fresh generation has {len(b['cells'])}"]
    for i, (x, y) in enumerate(zip(a["cells"], b["cells"])):
        for key in sorted(set(x) | set(y)):
            if x.get(key) != y.get(key):
                gid = notebooks.grade_id(y) or ""
                problems.append(f"{name}: cell {i} {gid} differs in {key}".replace("  ", " "))
    return problems


def check(course_root: str | Path = COURSE_ROOT) -> list[str]:
    """How ``exercises/`` differs from a fresh ``nbgrader generate_assignment`` of ``solutions/`` ([] when equal).

    The generation runs in a temporary copy of the course (config and solutions only), so the
    checkout and its gradebook are not touched. Notebooks are compared cell by cell (every key:
    source, metadata including nbgrader checksums, outputs, ids); other files byte for byte.
    """
    root = Path(course_root).resolve()
    with tempfile.TemporaryDirectory(prefix="resumable-course-check-") as tmp:
        fresh_course = Path(tmp)
        shutil.copy2(root / "nbgrader_config.py", fresh_course / "nbgrader_config.py")
        shutil.copytree(
            root / SOURCE_DIR,
            fresh_course / SOURCE_DIR,
            ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"),
        )
        release(fresh_course)
        committed, fresh = _tree(root / RELEASE_DIR), _tree(fresh_course / RELEASE_DIR)
        problems = [f"{RELEASE_DIR}/{n}: missing (run `make release`)" for n in sorted(set(fresh) - set(committed))]
        problems += [
            f"{RELEASE_DIR}/{n}: not produced by generate_assignment" for n in sorted(set(committed) - set(fresh))
        ]
        for name in sorted(set(fresh) & set(committed)):
            if name.endswith(".ipynb"):
                problems += _notebook_differences(f"{RELEASE_DIR}/{name}", committed[name], fresh[name])
            elif committed[name].read_bytes() != fresh[name].read_bytes():
                problems.append(f"{RELEASE_DIR}/{name}: differs")
        return problems


def autograde(course_root: str | Path, assignment: str, *, students: Iterable[str] = ()) -> subprocess.CompletedProcess:
    """``nbgrader autograde <assignment>`` on ``submitted/`` (all students, or those named)."""
    args = ["autograde", assignment, "--force"]
    for s in students:
        args.append(f"--student={s}")
    return nbgrader(args, course_root)


def scores(course_root: str | Path, assignment: str, notebook: str | None = None) -> dict[str, dict[str, float]]:
    """Autograded scores from the course's gradebook: {student: {grade_id: auto_score}} (manual cells: None)."""
    from nbgrader.api import Gradebook, MissingEntry

    root = Path(course_root).resolve()
    notebook = notebook or assignment
    out: dict[str, dict[str, float]] = {}
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        for student in gb.students:
            try:
                nb = gb.find_submission_notebook(notebook, assignment, student.id)
            except MissingEntry:
                continue
            out[student.id] = {g.name: g.auto_score for g in nb.grades}
    return out


# -- CLI -----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """``release``, ``check`` or ``points``: 0 when done (``check``: 1 if exercises/ differs)."""
    parser = argparse.ArgumentParser(
        prog="python -m resumable_core.course.release", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("command", choices=["release", "check", "points"])
    parser.add_argument("--root", default=str(COURSE_ROOT), help="course root (default: this checkout)")
    args = parser.parse_args(argv)
    if args.command == "release":
        for path in release(args.root):
            print(f"released {path.relative_to(Path(args.root).resolve())}")
        return 0
    if args.command == "check":
        problems = check(args.root)
        for p in problems:
            print(p)
        print(
            "exercises/ matches a fresh generation"
            if not problems
            else f"{len(problems)} difference(s): run `make release`"
        )
        return 1 if problems else 0
    for assignment, cells in points_table(args.root).items():
        total = sum(c["points"] for c in cells)
        print(f"{assignment} ({total} points)")
        for c in cells:
            print(f"  {c['grade_id']:<28} {c['points']:>3}  {c['kind']}{'  hidden tests' if c['hidden'] else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
