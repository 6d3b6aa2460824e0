"""The course: the graded exercises as a standard nbgrader course at the repository root.

Layout (all paths relative to the course root, the folder of ``nbgrader_config.py``)::

    solutions/<assignment>/<assignment>.ipynb      nbgrader source (instructor's version)
    solutions/<assignment>/ko/<assignment>.ipynb   its Korean source: every markdown cell in Korean
    exercises/<assignment>/<assignment>.ipynb      release, made only by ``nbgrader generate_assignment``
    exercises/<assignment>/ko/<assignment>.ipynb   the Korean release, made from the English one
    submitted/<student>/<assignment>/…          students' work (git-ignored)
    autograded/, feedback/, gradebook.db        nbgrader's outputs (git-ignored)

CLI (``make release`` calls the first)::

    python -m resumable_core.course.release release   # regenerate exercises/ with nbgrader (--assignment A: one)
    python -m resumable_core.course.release check     # fail if exercises/ differs from a fresh generation
    python -m resumable_core.course.release points    # grade_id and points of every graded cell

A translation is not an nbgrader assignment of its own: ``nbgrader_config.py`` ignores the ``ko``
folders (nbgrader would copy them, solutions and all, into the release), and :func:`translate_release`
makes the Korean release from the English release, taking the markdown and the code cells' comments
from the Korean source. Its code, nbgrader metadata and blanked answers are the English release's,
so one gradebook and one ``grade`` serve both languages and no answer can leak through a translation.

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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import nbformat

from ..lab.i18n import TRANSLATIONS  # the languages an assignment may have a source for, in <assignment>/<lang>/
from . import notebooks
from .assignments import ASSIGNMENTS
from .errors import CourseConfigError, CourseError
from .nbgrader_cli import nbgrader
from .notebook_cells import without_hidden_tests

if TYPE_CHECKING:
    from nbgrader.coursedir import CourseDirectory

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


def translated_path(assignment: str, lang: str, root: str | Path = COURSE_ROOT, folder: str = SOURCE_DIR) -> Path:
    """``<root>/<folder>/<assignment>/<lang>/<assignment>.ipynb``: a translation's source or release."""
    return Path(root) / folder / assignment / lang / f"{assignment}.ipynb"


class TranslationError(CourseError):
    """A translated source that cannot make a release: it lacks a markdown cell of the English release.

    ``.reason`` says which.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def translate_release(english_release: dict[str, Any], translated_source: dict[str, Any], lang: str) -> dict[str, Any]:
    """The release in ``lang``: the English release with each markdown cell's source from the translation.

    Cells are paired by id. A written answer's cell (nbgrader ``solution``) keeps the release's
    blanked text (``YOUR ANSWER HERE``: the translated source holds the instructor's answer, and
    grading and ``check`` know a blank answer by that text). A code cell is the English release's
    code with the translation's comments where they sit on the same code (:func:`.editions.carry_comments`,
    once the translation's hidden tests are cut as the release's were: their comments are dropped, the
    comment that stood above them is the one the release keeps), so the two cannot differ but in comments; all metadata is the English release's. The notebook's metadata says ``resumable.lang``.
    """
    from ..lab.editions import carry_comments

    translated = {cell.get("id"): cell for cell in translated_source["cells"]}
    nb = copy.deepcopy(english_release)
    missing = []
    for cell in nb["cells"]:
        other = translated.get(cell.get("id"))
        if cell.get("cell_type") == "code" and other is not None:
            # cut as nbgrader cut the release, so a comment above a hidden test pairs with what is left
            cell["source"] = carry_comments(notebooks.source(cell), without_hidden_tests(notebooks.source(other)))
        if cell.get("cell_type") != "markdown" or notebooks.is_solution(nbformat.from_dict(cell)):
            continue
        if other is None:
            missing.append(str(cell.get("id")))
            continue
        cell["source"] = copy.deepcopy(other["source"])
    if missing:
        raise TranslationError(f"no {lang} markdown cell with id {', '.join(missing)}")
    nb.setdefault("metadata", {})["resumable"] = {"lang": lang}
    return nb


def release_translations(root: Path, assignment: str) -> list[Path]:
    """Write ``exercises/<assignment>/<lang>/<assignment>.ipynb`` for each translated source the assignment has."""
    english = notebook_path(assignment, root, RELEASE_DIR)
    out = []
    for lang in TRANSLATIONS:
        source = translated_path(assignment, lang, root)
        if not source.exists():
            continue
        try:
            nb = translate_release(
                json.loads(english.read_text(encoding="utf-8")), json.loads(source.read_text(encoding="utf-8")), lang
            )
        except TranslationError as e:
            raise TranslationError(f"{source.relative_to(root)}: {e}") from None
        target = translated_path(assignment, lang, root, RELEASE_DIR)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(nbformat.writes(nbformat.from_dict(nb)) + "\n", encoding="utf-8")  # as nbgrader writes
        out.append(target)
    return out


CONFIG_FILE = "nbgrader_config.py"
LOCK_NAME = ".resumable-grading.lock"
"""The lock file beside a course's SQLite gradebook (at the course root for other databases)."""


@dataclass(frozen=True)
class Course:
    """An nbgrader course as its ``nbgrader_config.py`` describes it."""

    root: Path
    db_url: str
    course_id: str
    directory: CourseDirectory

    def autograded(self, student: str, assignment: str) -> Path:
        """``autograded/<student>/<assignment>/`` as the course's config lays it out."""
        return Path(self.directory.format_path(self.directory.autograded_directory, student, assignment))

    def source(self, assignment: str) -> Path:
        """``source/<assignment>/`` (the instructor's notebooks) as the course's config lays it out."""
        return Path(self.directory.format_path(self.directory.source_directory, ".", assignment))

    def release(self, assignment: str) -> Path:
        """``release/<assignment>/`` (what the learners were handed) as the course's config lays it out."""
        return Path(self.directory.format_path(self.directory.release_directory, ".", assignment))

    def feedback(self, student: str, assignment: str) -> Path:
        """``feedback/<student>/<assignment>/`` as the course's config lays it out."""
        return Path(self.directory.format_path(self.directory.feedback_directory, student, assignment))

    @property
    def shown_url(self) -> str:
        """The gradebook's URL as messages show it (a password in it hidden)."""
        from sqlalchemy.engine import make_url  # nbgrader's; loaded only for a message
        from sqlalchemy.exc import ArgumentError

        try:
            return make_url(self.db_url).render_as_string(hide_password=True)
        except ArgumentError:  # not a URL SQLAlchemy can read: nbgrader will say so when it opens it
            return self.db_url

    @property
    def sqlite_file(self) -> Path | None:
        """The gradebook's file when it is SQLite (a relative path counts from the course root)."""
        prefix = "sqlite:///"
        if not self.db_url.startswith(prefix):
            return None
        return self.root / self.db_url[len(prefix) :]  # an absolute path stays itself under /

    @property
    def lock_file(self) -> Path:
        """The file ``grade`` locks while it publishes, so two runs into one course take turns."""
        db = self.sqlite_file
        return db.with_name(db.name + ".lock") if db else self.root / LOCK_NAME


def find_course(folder: str | Path) -> Course:
    """The course at ``folder``: its root, gradebook URL, course id and layout, read from its ``nbgrader_config.py``."""
    from nbgrader.coursedir import CourseDirectory  # nbgrader loads only when a course is read
    from traitlets.config.loader import PyFileConfigLoader

    folder = Path(folder).resolve()
    if not (folder / CONFIG_FILE).is_file():
        raise CourseConfigError(
            folder,
            f"{folder} has no {CONFIG_FILE}, so it is no nbgrader course; pass --course COURSE_DIR (or --out DIR "
            "for a dry run that leaves every course alone)",
        )
    config = PyFileConfigLoader(CONFIG_FILE, path=str(folder)).load_config()
    directory = CourseDirectory(config=config)
    root = folder / directory.root  # '' or relative: from the course folder; absolute: itself
    directory.root = str(root)  # before db_url is read: nbgrader's default gradebook sits at the root
    course = Course(root, directory.db_url, directory.course_id, directory)
    if not course.course_id and not course.db_url.startswith("sqlite:"):
        # nbgrader files assignments under course_id; without one it writes '' and no course row,
        # which only SQLite lets through (it does not enforce foreign keys): PostgreSQL refuses the release
        raise CourseConfigError(
            folder,
            f"{folder / CONFIG_FILE} puts the gradebook in {course.shown_url} but sets no course id; nbgrader needs "
            'one on a database server: add c.CourseDirectory.course_id = "<your course>"',
        )
    return course


# -- nbgrader (through :mod:`.nbgrader_cli`, the one wrapper) ------------------------------


def release(course_root: str | Path = COURSE_ROOT, assignments: Iterable[str] = ASSIGNMENTS) -> list[Path]:
    """Regenerate ``exercises/<assignment>/`` from ``solutions/`` with ``nbgrader generate_assignment --force``.

    Then each translation of it (:func:`release_translations`).

    It also fills the course gradebook (the one ``nbgrader_config.py`` names) with each assignment,
    its cells and points. On an empty database, SQLite or PostgreSQL, nbgrader's first open creates
    the schema and stamps alembic's head revision, so a later ``nbgrader db upgrade`` works (on an
    empty PostgreSQL database it fails: its first migration alters tables that are not there yet).
    Refuses (:class:`CourseConfigError`) a gradebook on a database server without a course id,
    and (:class:`TranslationError`) a translated source that lacks one of the release's markdown cells.
    """
    root = Path(course_root).resolve()
    find_course(root)
    out = []
    for assignment in assignments:
        nbgrader(["generate_assignment", assignment, "--force"], root)
        released = notebook_path(assignment, root, RELEASE_DIR)
        if not released.exists():
            raise RuntimeError(f"nbgrader did not write {released}")
        out.append(released)
        out += release_translations(root, assignment)
    return out


def _tree(folder: Path) -> dict[str, Path]:
    skip = {".ipynb_checkpoints", "__pycache__"}
    return {
        str(p.relative_to(folder)): p
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not skip & set(p.relative_to(folder).parts)
    }


# What a learner changes by working in a released notebook, which the drift check leaves alone:
# keys Jupyter rewrites when it saves (the kernel's language_info and kernelspec, widget state), and
# in every cell its outputs, execution count and the metadata Jupyter adds (collapsed, scrolled,
# execution times, tags). An answer cell's source and attachments are the learner's too, and so
# are cells the learner added (no nbgrader metadata, an id the release does not have).
SAVED_BY_JUPYTER = frozenset({"language_info", "kernelspec", "widgets"})
RELEASE_CELL_KEYS = ("cell_type", "source", "metadata")
RELEASE_METADATA = ("nbgrader", "deletable", "editable")  # what generate_assignment writes in a cell


def _cell_key(cell: dict[str, Any], index: int) -> str:
    """How a cell is matched between two notebooks: its id (nbformat 4.5), else its grade_id, else its place."""
    return str(cell.get("id") or notebooks.grade_id(cell) or f"#{index}")


def _release_part(cell: dict[str, Any]) -> dict[str, Any]:
    """What of a cell the release owns: its type, its source unless it is an answer, the nbgrader metadata."""
    part = {key: cell.get(key) for key in RELEASE_CELL_KEYS}
    part["source"] = notebooks.source(cell)  # a list of lines or one string on disk: the same text
    metadata = {k: v for k, v in cell.get("metadata", {}).items() if k in RELEASE_METADATA}
    part["metadata"] = metadata
    if metadata.get("nbgrader", {}).get("solution"):
        del part["source"]  # the learner's answer
    return part


def _notebook_differences(name: str, committed: Path, fresh: Path) -> list[str]:
    """How a committed release notebook differs from a fresh one, leaving a learner's work in it alone."""
    a = json.loads(committed.read_text(encoding="utf-8"))
    b = json.loads(fresh.read_text(encoding="utf-8"))
    problems = []
    meta_a, meta_b = ({k: v for k, v in nb.get("metadata", {}).items() if k not in SAVED_BY_JUPYTER} for nb in (a, b))
    if meta_a != meta_b or a.get("nbformat") != b.get("nbformat"):
        problems.append(f"{name}: notebook metadata or format differs")
    committed_cells = {_cell_key(c, i): (i, c) for i, c in enumerate(a["cells"])}
    order = []
    for j, y in enumerate(b["cells"]):
        key, gid = _cell_key(y, j), notebooks.grade_id(y) or ""
        if key not in committed_cells:
            problems.append(f"{name}: cell {j} {gid} is missing (a fresh generation has it)".replace("  ", " "))
            continue
        i, x = committed_cells[key]
        order.append(i)
        x_part, y_part = _release_part(x), _release_part(y)
        problems += [
            f"{name}: cell {i} {gid} differs in {field}".replace("  ", " ")
            for field in sorted(set(x_part) | set(y_part))
            if x_part.get(field) != y_part.get(field)
        ]
    if order != sorted(order):
        problems.append(f"{name}: its cells are in another order than a fresh generation's")
    fresh_keys = {_cell_key(c, j) for j, c in enumerate(b["cells"])}
    problems += [
        f"{name}: cell {i} {notebooks.grade_id(x)} is not in a fresh generation"
        for key, (i, x) in committed_cells.items()
        if key not in fresh_keys and x.get("metadata", {}).get("nbgrader")  # a cell the learner added has none
    ]
    return problems


def check(course_root: str | Path = COURSE_ROOT) -> list[str]:
    """How ``exercises/`` differs from a fresh ``nbgrader generate_assignment`` of ``solutions/`` ([] when equal).

    The generation runs in a temporary copy of the course (config and solutions only), so the
    checkout and its gradebook are not touched. Notebooks are compared on what the release owns
    (cell ids and order, each cell's type and nbgrader metadata, the source of every cell that is
    not an answer, the notebook's metadata), so a learner who fills in ``exercises/`` in place,
    runs it and saves it, or adds cells or files to an assignment's folder, does not fail it.
    A released file the generation does not make, or a missing one, is a difference; other files
    are compared byte for byte.
    """
    root = Path(course_root).resolve()
    with tempfile.TemporaryDirectory(prefix="resumable-course-check-") as tmp:
        fresh_course = Path(tmp)
        shutil.copy2(root / "nbgrader_config.py", fresh_course / "nbgrader_config.py")
        own_gradebook = f"sqlite:///{fresh_course / 'gradebook.db'}"  # not the course's, which may be on a server
        with open(fresh_course / "nbgrader_config.py", "a") as config:
            config.write(f"\nc.CourseDirectory.db_url = {own_gradebook!r}\n")
        shutil.copytree(
            root / SOURCE_DIR,
            fresh_course / SOURCE_DIR,
            ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"),
        )
        release(fresh_course)
        return tree_differences(_tree(root / RELEASE_DIR), _tree(fresh_course / RELEASE_DIR))


def tree_differences(committed: dict[str, Path], fresh: dict[str, Path]) -> list[str]:
    """How the committed release files differ from fresh ones (both: path under exercises/ -> file)."""
    assignments = {Path(name).parts[0] for name in fresh}
    problems = [f"{RELEASE_DIR}/{n}: missing" for n in sorted(set(fresh) - set(committed))]
    problems += [
        f"{RELEASE_DIR}/{n}: not produced by generate_assignment"
        for n in sorted(set(committed) - set(fresh))
        # in an assignment's folder: the learner's copy or scratch file, but not a translation's release
        # whose source is gone (<assignment>/<lang>/<assignment>.ipynb)
        if Path(n).parts[0] not in assignments or _is_translated_release(n)
    ]
    for name in sorted(set(fresh) & set(committed)):
        if name.endswith(".ipynb"):
            problems += _notebook_differences(f"{RELEASE_DIR}/{name}", committed[name], fresh[name])
        elif committed[name].read_bytes() != fresh[name].read_bytes():
            problems.append(f"{RELEASE_DIR}/{name}: differs")
    return problems


def _is_translated_release(name: str) -> bool:
    """``<assignment>/<lang>/<assignment>.ipynb`` (a path under ``exercises/``): what :func:`release_translations` writes."""
    parts = Path(name).parts
    return len(parts) == 3 and parts[1] in TRANSLATIONS and parts[2] == f"{parts[0]}.ipynb"


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


COMMANDS = {
    "release": "regenerate exercises/ from solutions/ with nbgrader generate_assignment (make release)",
    "check": "exit 1 if exercises/ differs from a fresh generation (a learner's answers in it do not count)",
    "points": "print the grade_id and points of every graded cell of every assignment",
}


def build_parser() -> argparse.ArgumentParser:
    """The command line's parser: one of COMMANDS, and the course root."""
    parser = argparse.ArgumentParser(
        prog="python -m resumable_core.course.release",
        description="The course's nbgrader release: regenerate exercises/, check it, list the points.",
        epilog="commands:\n" + "\n".join(f"  {name:<8} {text}" for name, text in COMMANDS.items()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("command", choices=list(COMMANDS), help="what to do: " + ", ".join(COMMANDS) + " (below)")
    parser.add_argument("--root", default=str(COURSE_ROOT), help="course root (default: this checkout)")
    parser.add_argument(
        "--assignment",
        action="append",
        choices=list(ASSIGNMENTS),
        help="release: only this one (repeatable; default all)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """``release``, ``check`` or ``points``: 0 when done (``check``: 1 if exercises/ differs)."""
    args = build_parser().parse_args(argv)
    if args.command == "release":
        try:
            released = release(args.root, args.assignment or ASSIGNMENTS)
        except (CourseConfigError, TranslationError) as e:
            print(f"release: {e}", file=sys.stderr)
            return 2
        for path in released:
            print(f"released {path.relative_to(Path(args.root).resolve())}")
        return 0
    if args.command == "check":
        problems = check(args.root)
        for p in problems:
            print(p)
        print(
            "exercises/ matches a fresh generation"
            if not problems
            else f"{len(problems)} difference(s): run `make release` (it rewrites exercises/: copy your answers first)"
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
