"""Step 1 of grading: the working course folder, a throwaway nbgrader course with its own gradebook.

The work happens in ``./grading-<assignment>/`` (or ``--out``), which this step refuses unless it is
empty or was made by an earlier run (its marker); only the last step, :mod:`.publish`, writes into
the course's own gradebook, and not at all with ``--out`` (a dry run).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import nbformat

from ..nbgrader_cli import nbgrader
from ..release import COURSE_ROOT, SOURCE_DIR
from .budget import DEFAULT_TIMEOUT as DEFAULT_TIMEOUT  # the one per-cell timeout, here for the grading commands
from .errors import GradingError
from .gradebook import gradebook_url

MARKER = ".resumable-grading"
"""A file that marks a folder as made by this command (and safe to wipe on the next run)."""

CONFIG = """# Written by `python -m resumable_core grade`; a throwaway course for one grading run.
c = get_config()  # noqa: F821
c.CourseDirectory.root = {root!r}
c.CourseDirectory.source_directory = "source"
c.CourseDirectory.release_directory = "release"
c.CourseDirectory.db_url = {db_url!r}
c.CourseDirectory.course_id = "resumable-agents"
c.Execute.timeout = {timeout}
c.Execute.interrupt_on_timeout = True
c.ExecutePreprocessor.timeout = {timeout}
c.OverwriteCells.add_missing_cells = True
c.Autograde.create_student = True
"""

SANDBOX_CONFIG = """
# Every learner notebook runs in the bubblewrap sandbox (resumable_core/course/grading/execute.py)
from resumable_core.course.grading.execute import autograde_preprocessors
c.Autograde.autograde_preprocessors = autograde_preprocessors()
c.SandboxedExecute.timeout = {timeout}
c.SandboxedExecute.library = {library!r}
c.SandboxedExecute.isolation = {isolation!r}
"""


@dataclass(frozen=True)
class Execution:
    """How the working course runs learner notebooks: on which backend (:mod:`.isolation`), seeing ``library``."""

    library: Path | None
    """The pristine copy of ``resumable_core`` made for this run (:func:`.isolation.library_copy`)."""
    isolation: str = "bwrap"
    """The backend's name (:data:`.isolation.BACKENDS`): ``plain`` for ``--no-sandbox``."""


def write_course(root: Path, timeout: int, execution: Execution | None = None) -> None:
    """Make ``root`` an nbgrader course with its own gradebook (and this command's marker).

    ``execution``: how learner notebooks run (None: nbgrader's own Execute, as plain nbgrader does).
    """
    root.mkdir(parents=True, exist_ok=True)
    (root / MARKER).write_text("made by python -m resumable_core grade\n")
    config = CONFIG.format(root=str(root), db_url=gradebook_url(root), timeout=int(timeout))
    if execution is not None:
        library = str(execution.library) if execution.library else ""
        config += SANDBOX_CONFIG.format(timeout=int(timeout), library=library, isolation=execution.isolation)
    (root / "nbgrader_config.py").write_text(config)


def find_source(assignment: str, source: str | Path | None, course: str | Path | None) -> Path:
    """The folder with the assignment's source (instructor) notebooks."""
    if source:
        path = Path(source)
    else:
        root = Path(course) if course else COURSE_ROOT
        candidates = [root / folder / assignment for folder in (SOURCE_DIR, "source")]
        path = next((c for c in candidates if c.is_dir()), candidates[0])
    if not path.is_dir() or not list(path.glob("*.ipynb")):
        raise GradingError(f"no source notebooks for assignment {assignment!r} in {path}; pass --source or --course")
    return path


def prepare_out(out: Path, course_roots: list[Path]) -> Path:
    """A fresh, empty working folder (resolved); refuses a course folder and a folder this command did not make."""
    out = out.resolve()
    for root in course_roots:
        if out == root.resolve():
            raise GradingError(f"--out {out} is the course folder itself; pick another folder for the working course")
    if out.exists() and any(out.iterdir()):
        if not (out / MARKER).exists():
            raise GradingError(f"{out} exists and was not made by this command; pick another --out")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    return out


def release_assignment(
    out: Path, source: Path, assignment: str, timeout: int, execution: Execution | None = None
) -> dict[str, nbformat.NotebookNode]:
    """Make ``out`` the working course and release the assignment there; {notebook name: released notebook}.

    ``nbgrader generate_assignment`` also fills the working gradebook with the test cells, hidden
    tests included: that is what autograde later restores edited tests from.
    """
    write_course(out, timeout, execution)
    shutil.copytree(
        source, out / "source" / assignment, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__")
    )
    nbgrader(["generate_assignment", assignment, "--force"], out)
    released = sorted((out / "release" / assignment).glob("*.ipynb"))
    return {path.stem: nbformat.read(str(path), as_version=4) for path in released}
