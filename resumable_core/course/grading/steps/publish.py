"""Step 7 of grading: publish the run's results into the course's own gradebook and ``autograded/``.

The course is the folder of its ``nbgrader_config.py``; its gradebook is the one that file names
(``CourseDirectory.db_url``; by default SQLite ``gradebook.db`` at ``CourseDirectory.root``), so
``nbgrader formgrader``, ``generate_feedback`` and ``export`` see what ``grade`` wrote. For every
student of the run: the student (added if new; a roster's names are kept), the submission's grades,
comments and flags (they replace what the course held: nothing is duplicated), and
``autograded/<student>/<assignment>/`` (replaced; the course's stale ``feedback/`` of that student
goes, so ``nbgrader generate_feedback`` writes it afresh). A student whose submission this run could
not grade loses the course's old one, as ``grades.csv`` says 0.

The assignment must already be in the course gradebook, with the same cells as the source graded
(``make release`` puts it there); otherwise grading refuses before the first student runs.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from nbgrader.coursedir import CourseDirectory
from traitlets.config.loader import PyFileConfigLoader

from ..errors import GradingError
from ..gradebook import (
    OPEN_ERRORS,
    WRITE_ERRORS,
    gradebook_url,
    publish_submissions,
    read_submissions,
    released_cells,
    shown_url,
)

CONFIG_FILE = "nbgrader_config.py"
LOCK_NAME = ".resumable-grading.lock"
"""The lock file beside a course's SQLite gradebook (at the course root for other databases)."""
REFUSED: tuple[type[Exception], ...] = (*WRITE_ERRORS, OSError)
"""What a publish that writes nothing raises: the gradebook refused a write, or a folder could not be swapped."""


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
        return shown_url(self.db_url)

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
    folder = Path(folder).resolve()
    if not (folder / CONFIG_FILE).is_file():
        raise GradingError(
            f"{folder} has no {CONFIG_FILE}, so it is no nbgrader course; pass --course COURSE_DIR (or --out DIR "
            "for a dry run that leaves every course alone)"
        )
    config = PyFileConfigLoader(CONFIG_FILE, path=str(folder)).load_config()
    directory = CourseDirectory(config=config)
    root = folder / directory.root  # '' or relative: from the course folder; absolute: itself
    directory.root = str(root)  # before db_url is read: nbgrader's default gradebook sits at the root
    course = Course(root, directory.db_url, directory.course_id, directory)
    if not course.course_id and not course.db_url.startswith("sqlite:"):
        # nbgrader files assignments under course_id; without one it writes '' and no course row,
        # which only SQLite lets through (it does not enforce foreign keys): PostgreSQL refuses the release
        raise GradingError(
            f"{folder / CONFIG_FILE} puts the gradebook in {course.shown_url} but sets no course id; nbgrader needs "
            'one on a database server: add c.CourseDirectory.course_id = "<your course>"'
        )
    return course


@contextmanager
def reached(course: Course) -> Iterator[None]:
    """Turn a course gradebook that cannot be opened (no server, wrong password, no driver) into one line naming it."""
    try:
        yield
    except OPEN_ERRORS as e:
        why = (str(e).strip().splitlines() or [type(e).__name__])[0]
        fix = "is its server running, and the URL in nbgrader_config.py right?"
        if isinstance(e, ImportError):  # the URL names a driver this venv lacks (psycopg2 for postgresql+psycopg2)
            fix = "install the course's database driver: pip install -e '.[class]'"
        raise GradingError(f"could not open the course gradebook {course.shown_url} ({why}); {fix}") from e


def check_released(course: Course, assignment: str, work: Path | None = None) -> None:
    """Refuse unless ``assignment`` is in the course gradebook (with the cells of the working course's, if given)."""
    fix = f"release it there first: make release (nbgrader generate_assignment {assignment} in {course.root})"
    db = course.sqlite_file
    if db is not None and not db.is_file():
        raise GradingError(f"the course gradebook {db} does not exist; {fix}")
    with reached(course):
        held = released_cells(course.db_url, assignment, course.course_id)
    if held is None:
        raise GradingError(f"assignment {assignment!r} is not in the course gradebook {course.shown_url}; {fix}")
    if work is None:
        return
    if released_cells(gradebook_url(work), assignment) != held:
        raise GradingError(
            f"assignment {assignment!r} in the course gradebook {course.shown_url} has other notebooks or cells than "
            f"the source graded (released before the source changed?); {fix}"
        )


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (waiting for another ``grade`` publishing into the same course)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def replaced_folders(moves: list[tuple[Path | None, Path]], staging: Path) -> Iterator[None]:
    """Put each new folder (or none) at its target, keeping the old ones aside; put them back if the block fails.

    ``moves``: (new folder or None, target). The new folders are copied into ``staging`` first (on the
    course's file system), so each swap is two renames.
    """
    done: list[tuple[Path, Path | None, Path | None]] = []  # (target, old kept aside or None, its new copy or None)
    try:
        for i, (new, target) in enumerate(moves):
            incoming = staging / f"new-{i}"
            if new is not None:
                shutil.copytree(new, incoming)
            old = staging / f"old-{i}" if target.exists() else None
            if old is not None:
                os.replace(target, old)
            done.append((target, old, incoming if new is not None else None))
            if new is not None:
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(incoming, target)
        yield
    except BaseException:
        for target, old, put in reversed(done):
            if put is not None and target.exists():
                shutil.rmtree(target)
            if old is not None:
                os.replace(old, target)
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def publish(course: Course, work: Path, assignment: str, students: list[str]) -> None:
    """Write the run's results for ``students`` (the run's ids) from the working course ``work`` into ``course``."""
    records = read_submissions(gradebook_url(work), assignment, students)
    graded = {r.student for r in records}
    moves: list[tuple[Path | None, Path]] = []
    for student in students:
        new = work / "autograded" / student / assignment
        moves.append((new if student in graded and new.is_dir() else None, course.autograded(student, assignment)))
        moves.append((None, course.feedback(student, assignment)))
    with locked(course.lock_file):
        check_released(course, assignment, work)  # again under the lock: another run may have released since
        staging = Path(tempfile.mkdtemp(prefix=".resumable-publish-", dir=course.root))
        try:
            with replaced_folders(moves, staging):  # the gradebook's one transaction commits inside: both or neither
                publish_submissions(course.db_url, course.course_id, assignment, students, records)
        except REFUSED as e:
            why = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise GradingError(
                f"could not publish into the course gradebook {course.shown_url} ({why}); nothing was written there, "
                f"the graded run is in {work}: fix that and grade again"
            ) from e
