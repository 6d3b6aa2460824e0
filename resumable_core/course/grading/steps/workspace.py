"""Step 1 of grading: the working course folder, a throwaway nbgrader course with its own gradebook, and its
release, made once per content (:func:`cached_release`)."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import nbformat

from ...nbgrader_cli import nbgrader
from ...release import COURSE_ROOT, SOURCE_DIR
from ..errors import GradingError
from ..gradebook import gradebook_url
from .budget import DEFAULT_TIMEOUT as DEFAULT_TIMEOUT  # the one per-cell timeout, here for the grading commands

RELEASE_KEY = ".release-key"
"""The working course's release's content key (:func:`release_key`): a resumed run must grade the same release."""
CACHE_ENV = "RESUMABLE_GRADING_CACHE"
"""A folder for the release cache (default ``$XDG_CACHE_HOME/resumable-agents/releases``)."""
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
# Every learner notebook runs in the bubblewrap sandbox (resumable_core/course/grading/steps/execute.py)
from resumable_core.course.grading.steps.execute import autograde_preprocessors
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
    """Make ``root`` an nbgrader course with its own gradebook and this command's marker (``execution`` None:
    nbgrader's own Execute)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / MARKER).write_text("made by python -m resumable_core grade\n")
    config = CONFIG.format(root=str(root), db_url=gradebook_url(root), timeout=int(timeout))
    if execution is not None:
        library = str(execution.library) if execution.library else ""
        config += SANDBOX_CONFIG.format(timeout=int(timeout), library=library, isolation=execution.isolation)
    (root / "nbgrader_config.py").write_text(config)


def find_source(assignment: str, source: str | Path | None, course: str | Path | None) -> Path:
    if source:
        path = Path(source)
    else:
        root = Path(course) if course else COURSE_ROOT
        candidates = [root / folder / assignment for folder in (SOURCE_DIR, "source")]
        path = next((c for c in candidates if c.is_dir()), candidates[0])
    if not path.is_dir() or not list(path.glob("*.ipynb")):
        raise GradingError(f"no source notebooks for assignment {assignment!r} in {path}; pass --source or --course")
    return path


def prepare_out(out: Path, course_roots: list[Path], resume: bool = False) -> Path:
    """The working folder (resolved): fresh and empty, or with ``resume`` an earlier run's, kept but for ``workers/``;
    a course folder, or a folder this command did not make, is refused."""
    out = out.resolve()
    for root in course_roots:
        if out == root.resolve():
            raise GradingError(f"--out {out} is the course folder itself; pick another folder for the working course")
    if out.exists() and any(out.iterdir()):
        if not (out / MARKER).exists():
            raise GradingError(f"{out} exists and was not made by this command; pick another --out")
        if resume:
            shutil.rmtree(out / "workers", ignore_errors=True)
            return out
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    return out


def cache_root() -> Path:
    """Where released assignments are cached (:data:`CACHE_ENV`, else the user's cache folder)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "resumable-agents" / "releases"


def tree_digest(folder: Path, seed: str = "") -> str:
    """The SHA-256 of ``seed`` and every file under ``folder``, by name and bytes (caches and checkpoints aside): the
    one hash of a release's source, a submission graded and the library a cluster's workers run."""
    digest = hashlib.sha256(seed.encode())
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix != ".pyc"):
        if not {"__pycache__", ".ipynb_checkpoints"} & set(path.relative_to(folder).parts):
            digest.update(f"\0{path.relative_to(folder).as_posix()}\0".encode() + path.read_bytes())
    return digest.hexdigest()


def release_key(source: Path, assignment: str) -> str:
    """The content hash of what ``generate_assignment`` reads: the source files, nbgrader's version, the config."""
    import nbgrader

    return tree_digest(source, f"{assignment}\0{nbgrader.__version__}\0{CONFIG}")[:32]


def released_notebooks(out: Path, assignment: str) -> dict[str, nbformat.NotebookNode]:
    released = sorted((out / "release" / assignment).glob("*.ipynb"))
    return {path.stem: nbformat.read(str(path), as_version=4) for path in released}


def cached_release(
    out: Path, source: Path, assignment: str, timeout: int, execution: Execution | None = None
) -> dict[str, nbformat.NotebookNode]:
    """Make ``out`` the working course and release the assignment there (its gradebook gets the tests, hidden ones
    too, which autograde restores edited tests from); {notebook name: released notebook}. ``release/`` and the fresh
    gradebook come from the cache when the content is unchanged (an entry is made whole, then renamed into place).
    A resumed folder keeps its gradebook: same key only."""
    key = release_key(source, assignment)
    held = out / RELEASE_KEY
    resumed = (out / "gradebook.db").is_file() and held.is_file()  # its gradebook holds its students
    if resumed and held.read_text().strip() != key:
        raise GradingError(
            f"the source of {assignment!r} changed since the interrupted run in {out}; grade again without --resume"
        )
    write_course(out, timeout, execution)  # this run's sandbox library and timeout
    if resumed:
        return released_notebooks(out, assignment)
    for stale in ("source", "release", "gradebook.db"):  # a run interrupted while it released: start it again
        shutil.rmtree(out / stale) if (out / stale).is_dir() else (out / stale).unlink(missing_ok=True)
    shutil.copytree(
        source, out / "source" / assignment, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__")
    )
    entry = cache_root() / key
    if (entry / "gradebook.db").is_file() and (entry / "release" / assignment).is_dir():
        shutil.copytree(entry / "release", out / "release")
        shutil.copy2(entry / "gradebook.db", out / "gradebook.db")
    else:
        nbgrader(["generate_assignment", assignment, "--force"], out)
        with suppress(OSError):  # an unwritable cache costs the next run a release, never this one
            entry.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=entry.parent))
            shutil.copytree(out / "release", staging / "release")
            shutil.copy2(out / "gradebook.db", staging / "gradebook.db")
            try:
                os.rename(staging, entry)
            except OSError:  # another run stored it first: theirs is the same content
                shutil.rmtree(staging, ignore_errors=True)
    held.write_text(key + "\n")
    return released_notebooks(out, assignment)
