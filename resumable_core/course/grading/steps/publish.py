"""Step 7 of grading: publish the run's results into the course's own gradebook and ``autograded/``, all or nothing
(docs/architecture.md, "Where grades go"); the assignment must be released there with the cells graded."""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ...release import Course
from ..errors import GradingError
from ..gradebook import (
    OPEN_ERRORS,
    WRITE_ERRORS,
    gradebook_url,
    publish_submissions,
    read_submissions,
    released_cells,
)

REFUSED: tuple[type[Exception], ...] = (*WRITE_ERRORS, OSError)
"""What a publish that writes nothing raises: the gradebook refused a write, or a folder could not be swapped."""


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
    """Put each new folder (or none) at its target, the old ones kept aside in ``staging`` and put back if the block
    fails; ``moves``: (new folder or None, target)."""
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
