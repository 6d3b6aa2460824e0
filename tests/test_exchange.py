"""A class may mix languages: nbgrader's real exchange hands out the Korean notebook beside the English one.

A temporary course releases ``reconcile`` as ``make release`` does (the English release and its
Korean ``ko/``), then nbgrader's own exchange in a temporary folder, offline: ``release_assignment``,
a student's ``fetch_assignment`` and ``submit``, the instructor's ``collect``. A marker planted in
``solutions/reconcile/ko/`` (a file, and a line in the Korean source's solution) never reaches the
exchange; ``ko/reconcile.ipynb`` does, and the student's work in it comes back and is the notebook
``grade`` takes (its collect and prepare steps; nbgrader's autograde is ``tests/test_korean_grading.py``'s).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import grading_samples as samples  # tests/ is on sys.path under pytest (rootdir-relative import)
import nbformat
import pytest

from resumable_core.course import nbgrader_cli, notebooks, release
from resumable_core.course.exchange import exchange_ignore
from resumable_core.course.grading.steps.collect import collect
from resumable_core.course.grading.steps.prepare import prepare

REPO = Path(__file__).resolve().parent.parent
ASSIGNMENT = "reconcile"
MARKER = "MARKER-of-the-korean-solutions-7f3a"
EXCHANGE_CONFIG = """
c.CourseDirectory.course_id = "mixed-class"
c.Exchange.root = {exchange!r}
c.CollectApp.check_owner = False
"""

pytestmark = pytest.mark.skipif(
    not release.translated_path(ASSIGNMENT, "ko").exists(), reason="no Korean source of reconcile"
)


def test_the_exchange_ignores_what_the_course_ignores_but_the_translations() -> None:
    """Releasing and collecting keep the course's ignore list but for the translations' folders (ko)."""
    course = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", *release.TRANSLATIONS]
    assert exchange_ignore(course) == [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback"]


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _course(tmp: Path) -> Path:
    """A course with reconcile's sources, a marker planted in its Korean source's folder, released as `make release` does."""
    course = tmp / "course"
    shutil.copytree(REPO / "solutions" / ASSIGNMENT, course / "solutions" / ASSIGNMENT)
    korean = course / "solutions" / ASSIGNMENT / "ko"
    (korean / f"{MARKER}.txt").write_text(MARKER)
    source = json.loads((korean / f"{ASSIGNMENT}.ipynb").read_text(encoding="utf-8"))
    answer = next(c for c in source["cells"] if "### BEGIN SOLUTION" in notebooks.source(c))
    answer["source"] = notebooks.source(answer).replace("### BEGIN SOLUTION", f"### BEGIN SOLUTION\n# {MARKER}", 1)
    (korean / f"{ASSIGNMENT}.ipynb").write_text(json.dumps(source, ensure_ascii=False), encoding="utf-8")
    config = (REPO / "nbgrader_config.py").read_text() + EXCHANGE_CONFIG.format(exchange=str(tmp / "exchange"))
    (course / "nbgrader_config.py").write_text(config)
    release.release(course, [ASSIGNMENT])
    return course


@pytest.mark.slow
@pytest.mark.nbgrader
def test_a_korean_student_fetches_works_and_submits_through_the_exchange(tmp_path: Path) -> None:
    """release_assignment hands out ko/reconcile.ipynb and no solution; the student's work in it is collected and graded."""
    course = _course(tmp_path)
    nbgrader_cli.nbgrader(["release_assignment", ASSIGNMENT], course)
    outbound = _files(tmp_path / "exchange" / "mixed-class" / "outbound" / ASSIGNMENT)
    assert outbound == _files(course / "exercises" / ASSIGNMENT)  # the release, both languages, byte for byte
    assert set(outbound) == {f"{ASSIGNMENT}.ipynb", f"ko/{ASSIGNMENT}.ipynb"}
    exchanged = _files(tmp_path / "exchange")
    assert not [name for name, data in exchanged.items() if MARKER.encode() in data or MARKER in name]
    assert not [name for name, data in exchanged.items() if b"BEGIN SOLUTION" in data]

    home = tmp_path / "kim"
    home.mkdir()
    student = ["--course=mixed-class", f"--Exchange.root={tmp_path / 'exchange'}"]
    nbgrader_cli.nbgrader(["fetch_assignment", ASSIGNMENT, *student], home)
    fetched = home / ASSIGNMENT
    assert set(_files(fetched)) == {f"{ASSIGNMENT}.ipynb", f"ko/{ASSIGNMENT}.ipynb"}
    korean = fetched / "ko" / f"{ASSIGNMENT}.ipynb"
    korean.write_text(json.dumps(release.fill_in(korean, samples.answers(samples.REAL_CORRECT)), ensure_ascii=False))
    cache = f"--Exchange.cache={home / '.nbgrader-cache'}"
    nbgrader_cli.nbgrader(["submit", ASSIGNMENT, *student, cache, "--student=kim"], home)
    nbgrader_cli.nbgrader(["collect", ASSIGNMENT], course)
    submitted = course / "submitted" / "kim" / ASSIGNMENT
    assert (submitted / "ko" / f"{ASSIGNMENT}.ipynb").read_bytes() == korean.read_bytes()

    (sub,) = collect(course, ASSIGNMENT, [ASSIGNMENT])
    released = nbformat.read(str(release.notebook_path(ASSIGNMENT, course, release.RELEASE_DIR)), as_version=4)
    (sub,) = prepare([sub], tmp_path / "work", ASSIGNMENT, {ASSIGNMENT: released})
    graded = notebooks.read(tmp_path / "work" / "submitted" / "kim" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    assert (sub.status, sub.reason, notebooks.language(graded)) == ("graded", "", "ko")
