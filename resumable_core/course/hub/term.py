"""The instructor's steps of a term on the class, each run as the instructor's own account.

Students fetch, submit and fetch feedback from their servers (nbgrader's assignment list); the
instructor collects with nbgrader, grades with the kit's ``grade`` and hands back the kit's
feedback pages through nbgrader's exchange: :func:`release_feedback` puts each student's page
from ``grades`` where ``nbgrader release_feedback`` looks (``feedback/<student>/<assignment>/``, with
the submission's ``timestamp.txt`` and ``submission_secret.txt``, as ``generate_feedback`` leaves them),
so students never get nbgrader's own pages, which show every test cell's code, hidden tests too.
"""

from __future__ import annotations

import shutil
import subprocess

from resumable_core.course.hub.build import HubError, HubSettings, staff_command

SUBMISSION_FILES = ("timestamp.txt", "submission_secret.txt")
"""What ``nbgrader release_feedback`` reads beside a page: ``nbgrader collect`` copies both into ``submitted/``."""


def _as_instructor(settings: HubSettings, args: list[str]) -> subprocess.CompletedProcess:
    done = staff_command(settings, settings.roster.instructor, args)
    if done.returncode != 0:
        raise HubError(f"`python {' '.join(args)}` as {settings.roster.instructor} failed: {done.stderr[-2000:]}")
    return done


def collect(settings: HubSettings, assignment: str) -> str:
    """``nbgrader collect``: the exchange's submissions into the course's ``submitted/``."""
    return _as_instructor(settings, ["-m", "nbgrader", "collect", assignment]).stdout


def grade(settings: HubSettings, assignment: str, *extra: str) -> str:
    """``python -m resumable_core grade . --assignment A``: the collected class, into the course gradebook."""
    return _as_instructor(
        settings, ["-m", "resumable_core", "grade", ".", "--assignment", assignment, "--course", ".", *extra]
    ).stdout


def release_feedback(settings: HubSettings, assignment: str) -> list[str]:
    """The kit's feedback page of every graded student, released through the exchange; return the students."""
    course, roster = settings.paths.course, settings.roster
    out = course / f"grades-{assignment}"
    _as_instructor(
        settings, ["-m", "resumable_core", "grades", "--assignment", assignment, "--course", ".", "--out", out.name]
    )
    students = []
    for page in sorted((out / "feedback-html").glob("*.html")):
        target = course / "feedback" / page.stem / assignment
        if target.exists():
            shutil.rmtree(target)  # nbgrader's own pages (generate_feedback) never go out
        target.mkdir(parents=True)
        shutil.copyfile(page, target / f"{assignment}.html")
        submitted = course / "submitted" / page.stem / assignment
        for name in SUBMISSION_FILES:  # release_feedback names the page by the submission's secret
            if not (submitted / name).is_file():
                raise HubError(f"{submitted / name} is missing: collect {assignment} again (`nbgrader collect`)")
            shutil.copyfile(submitted / name, target / name)
        students.append(page.stem)
    for path in [course / "feedback", *(course / "feedback").rglob("*")]:
        shutil.chown(path, roster.instructor, roster.staff_group)
        # release_feedback copies a page's mode into the exchange: others must read it there (the
        # course folder above stays closed to them)
        path.chmod(0o2770 if path.is_dir() else 0o664)
    _as_instructor(settings, ["-m", "nbgrader", "release_feedback", assignment])
    return students
