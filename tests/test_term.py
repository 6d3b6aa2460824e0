"""A whole term on a temporary course, each step the README's command, with real nbgrader.

The course holds the smallest assignment with a manually graded cell (``postmortem``: 19 points of
tests, the 3-point "why" ``refund_root_cause`` and the 2-point ``root_cause``, left ungraded). Two students go through nbgrader's own exchange
(release_assignment, fetch_assignment, submit, collect: it works offline in a temporary folder):
alice answers everything as the source does, bob hands in the notebook untouched. Then ``grade``
(into the course's gradebook), a manual score set the way formgrader sets it, ``generate_feedback``,
``export`` and the kit's ``grades``; then bob hands in again, from an LMS zip, and is re-graded;
then a ``--out`` dry run (``--resume`` of a copy of that re-grade: it grades nobody again). The module fixture runs the term once; each test asserts one part of it.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import shutil
import sqlite3
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from graded_classes import TIMEOUT  # tests/ is on sys.path under pytest
from nbgrader.api import Gradebook

from resumable_core.__main__ import main as cli_main
from resumable_core.course import nbgrader_cli, notebooks, release
from resumable_core.course.grading.errors import GradingError
from resumable_core.course.grading.isolation import BwrapBackend
from resumable_core.course.grading.steps.publish import publish
from resumable_core.course.release import find_course

REPO = Path(__file__).resolve().parent.parent
ASSIGNMENT = "postmortem"
WHY = "refund_root_cause"  # the manually graded explanation of Part 2, 3 points
TESTS_MAX = 19  # the autograded tests' points; 24 with WHY and root_cause
EXCHANGE_CONFIG = """
c.CourseDirectory.course_id = "term-test"
c.Exchange.root = {exchange!r}
c.CollectApp.check_owner = False
"""

pytestmark = [
    pytest.mark.slow,
    pytest.mark.nbgrader,
    pytest.mark.skipif(not release.notebook_path(ASSIGNMENT).exists(), reason="the postmortem assignment is not there"),
]


@dataclass
class Term:
    """What the term left behind, and what was read at each step."""

    course: Path
    exported: dict[str, float] = field(default_factory=dict)
    kit: dict[str, float] = field(default_factory=dict)
    after_regrade: dict[str, float] = field(default_factory=dict)
    kit_after_regrade: dict[str, float] = field(default_factory=dict)
    exported_after_regrade: dict[str, float] = field(default_factory=dict)
    regraded: dict[str, object] = field(default_factory=dict)
    work: Path = Path()
    """The working course of bob's re-grade (``grade``'s default folder)."""
    fetched_feedback: list[str] = field(default_factory=list)
    """The feedback pages alice's ``nbgrader fetch_feedback`` brought home after ``release_feedback``."""
    dry_run_code: int = -1
    gradebook_before_dry_run: bytes = b""
    regrade_said: str = ""
    """What bob's re-grade printed."""


def _answers() -> dict[str, str]:
    """The source's answers by grade_id: what alice writes."""
    source = notebooks.read(release.notebook_path(ASSIGNMENT))
    return {str(notebooks.grade_id(c)): notebooks.source(c) for c in source.cells if notebooks.is_solution(c)}


def _grade(path: Path, course: Path, *extra: str) -> int:
    """``python -m resumable_core grade PATH`` into ``course`` (sandboxed where bubblewrap runs)."""
    no_sandbox = [] if BwrapBackend().available() is None else ["--no-sandbox"]
    args = ["grade", str(path), "--assignment", ASSIGNMENT, "--course", str(course), "--jobs", "1"]
    return cli_main([*args, "--timeout", str(TIMEOUT), *no_sandbox, *extra])


def _exchange(tmp: Path) -> list[str]:
    """What a student's nbgrader needs to find the course in the exchange (they have no course config)."""
    return ["--course=term-test", f"--Exchange.root={tmp / 'exchange'}"]


def _cache(home: Path) -> str:
    """A student's own submission cache, as each has on a real machine (``fetch_feedback`` reads every one cached)."""
    return f"--Exchange.cache={home / '.nbgrader-cache'}"


def _student(tmp: Path, name: str, fetched: Path | None) -> Path:
    """A student's folder with the assignment fetched from the exchange (``fetched``: a classmate's fetch, copied)."""
    home = tmp / name
    home.mkdir()
    if fetched is None:
        nbgrader_cli.nbgrader(["fetch_assignment", ASSIGNMENT, *_exchange(tmp)], home)
    else:
        shutil.copytree(fetched, home / ASSIGNMENT)
    return home


def _exported(course: Path) -> dict[str, float]:
    """``nbgrader export``'s score of the assignment by student."""
    out = course / "export.csv"
    nbgrader_cli.nbgrader(["export", "--to", str(out)], course)
    with open(out, newline="") as f:
        return {r["student_id"]: float(r["score"]) for r in csv.DictReader(f) if r["assignment"] == ASSIGNMENT}


def _kit_grades(course: Path, out: Path) -> dict[str, float]:
    """``python -m resumable_core grades``'s score by student (its feedback pages in ``out`` too)."""
    assert cli_main(["grades", "--assignment", ASSIGNMENT, "--course", str(course), "--out", str(out)]) == 0
    with open(out / "grades.csv", newline="") as f:
        return {r["student_id"]: float(r["score"]) for r in csv.DictReader(f)}


def _set_manual_score(course: Path, student: str, score: float) -> None:
    """What formgrader does when the instructor types a score into a manually graded cell."""
    found = find_course(course)
    with Gradebook(found.db_url, found.course_id) as gb:
        grade = gb.find_grade(WHY, ASSIGNMENT, ASSIGNMENT, student)
        grade.manual_score = score
        grade.needs_manual_grade = grade.manual_score is None and grade.auto_score is None
        gb.db.commit()


def _release_and_collect(tmp: Path) -> Path:
    """Steps 1 and 2: a course released with `make release`'s function, handed out and collected through the exchange."""
    course = tmp / "course"
    (course / "solutions").mkdir(parents=True)
    shutil.copytree(REPO / "solutions" / ASSIGNMENT, course / "solutions" / ASSIGNMENT)
    config = (REPO / "nbgrader_config.py").read_text() + EXCHANGE_CONFIG.format(exchange=str(tmp / "exchange"))
    (course / "nbgrader_config.py").write_text(config)
    release.release(course, [ASSIGNMENT])
    nbgrader_cli.nbgrader(["release_assignment", ASSIGNMENT], course)
    alice = _student(tmp, "alice", None)
    bob = _student(tmp, "bob", alice / ASSIGNMENT)  # the same files a fetch gives, before alice edits hers
    answered = alice / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    answered.write_text(json.dumps(release.fill_in(answered, _answers()), indent=1))
    for home in (alice, bob):
        nbgrader_cli.nbgrader(["submit", ASSIGNMENT, *_exchange(tmp), _cache(home), f"--student={home.name}"], home)
    nbgrader_cli.nbgrader(["collect", ASSIGNMENT], course)
    return course


@pytest.fixture(scope="module")
def term(tmp_path_factory) -> Term:
    tmp = tmp_path_factory.mktemp("term")
    desk = tmp / "desk"  # the instructor's current folder: grade's working folder goes here
    desk.mkdir()
    course = _release_and_collect(tmp)
    term = Term(course)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(desk)
        assert _grade(course, course) == 0  # 3: the collected submitted/ folder, into the course
        _set_manual_score(course, "alice", 2)  # 4: formgrader
        nbgrader_cli.nbgrader(["generate_feedback", ASSIGNMENT], course)  # 5
        nbgrader_cli.nbgrader(["release_feedback", ASSIGNMENT], course)
        alice = tmp / "alice"
        nbgrader_cli.nbgrader(["fetch_feedback", ASSIGNMENT, *_exchange(tmp), _cache(alice), "--student=alice"], alice)
        term.fetched_feedback = sorted(p.name for p in (tmp / "alice" / ASSIGNMENT / "feedback").rglob("*.html"))
        term.exported = _exported(course)  # 6
        term.kit = _kit_grades(course, desk / "grades")
        lms = tmp / "lms.zip"  # bob hands in again, answered this time, through an LMS
        with zipfile.ZipFile(lms, "w") as z:
            z.write(tmp / "alice" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", "bob.ipynb")
        said = io.StringIO()
        with contextlib.redirect_stdout(said):
            assert _grade(lms, course) == 0
        term.regrade_said = said.getvalue()
        term.exported_after_regrade = _exported(course)
        term.kit_after_regrade = _kit_grades(course, desk / "grades-again")
        term.regraded = _regraded(course)
        term.work = desk / f"grading-{ASSIGNMENT}"
        term.gradebook_before_dry_run = (course / "gradebook.db").read_bytes()
        shutil.copytree(term.work, tmp / "dry-run")  # bob's re-grade, resumed: the dry run grades nobody again
        term.dry_run_code = _grade(lms, course, "--out", str(tmp / "dry-run"), "--resume")
    return term


def _submissions(course: Path) -> list[tuple[str, str]]:
    """(assignment, student) of every submission row in the course gradebook."""
    with sqlite3.connect(course / "gradebook.db") as db:
        return db.execute(
            "SELECT a.name, s.student_id FROM submitted_assignment s JOIN assignment a ON a.id = s.assignment_id"
        ).fetchall()


def _regraded(course: Path) -> dict[str, object]:
    """What the course holds right after bob's re-grade."""
    found = find_course(course)
    with Gradebook(found.db_url, found.course_id) as gb:
        bob = gb.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, "bob")
        facts: dict[str, object] = {
            "submissions": sorted(_submissions(course)),
            "bob's grade rows": sorted(g.name for g in bob.grades),
            "bob's why needs a human": gb.find_grade(WHY, ASSIGNMENT, ASSIGNMENT, "bob").needs_manual_grade,
            "alice's manual score": gb.find_grade(WHY, ASSIGNMENT, ASSIGNMENT, "alice").manual_score,
        }
    autograded = json.loads((course / "autograded" / "bob" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text())
    facts["bob's autograded why"] = next(
        notebooks.source(c) for c in autograded["cells"] if notebooks.grade_id(c) == WHY
    )
    facts["bob's old feedback"] = (course / "feedback" / "bob" / ASSIGNMENT).exists()
    return facts


def test_grade_fills_the_course_gradebook_for_formgrader(term: Term) -> None:
    """After `grade`, the course's own gradebook and autograded/ hold both students; the "why" waits for a human."""
    course = term.course
    assert sorted(_submissions(course)) == [(ASSIGNMENT, "alice"), (ASSIGNMENT, "bob")]
    for student in ("alice", "bob"):
        assert (course / "autograded" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").is_file()
    assert (course / "feedback" / "alice" / ASSIGNMENT / f"{ASSIGNMENT}.html").is_file()  # generate_feedback worked


def test_manual_grades_reach_export_and_the_kits_grades_alike(term: Term) -> None:
    """After manual grading, nbgrader export and the kit's grades give every student the same score."""
    assert term.exported == term.kit == {"alice": TESTS_MAX + 2, "bob": 0}


def test_the_kits_feedback_carries_the_manual_grade_and_no_test_code(term: Term) -> None:
    """The kit's page (from `grades`) shows alice's manual 2/3 and no hidden test; nbgrader's own page shows the test."""
    kit_page = (term.course.parent / "desk" / "grades" / "feedback-html" / "alice.html").read_text()
    nbgrader_page = (term.course / "feedback" / "alice" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    assert f"<b>{WHY}</b> 2/3" in kit_page
    hidden_call = "check_every_crash_point"  # a line of the hidden test cell's code
    assert hidden_call not in kit_page and hidden_call in nbgrader_page


def test_released_feedback_reaches_the_student(term: Term) -> None:
    """`nbgrader release_feedback` puts alice's page in the exchange, and her `fetch_feedback` brings it home."""
    assert term.fetched_feedback == [f"{ASSIGNMENT}.html"]


def test_regrading_a_student_replaces_their_grades(term: Term) -> None:
    """Bob's second hand-in replaces his grades and files: one submission each, the new score, nothing duplicated."""
    assert term.exported_after_regrade == term.kit_after_regrade == {"alice": TESTS_MAX + 2, "bob": TESTS_MAX}
    graded_cells = [c["grade_id"] for c in release.grade_cells(release.notebook_path(ASSIGNMENT, term.course))]
    assert term.regraded == {
        "submissions": [(ASSIGNMENT, "alice"), (ASSIGNMENT, "bob")],
        "bob's grade rows": sorted(graded_cells),  # one row per graded cell, none twice
        "bob's why needs a human": True,  # a new answer to read
        "alice's manual score": 2,  # untouched by bob's re-grade
        "bob's autograded why": _answers()[WHY],  # the new hand-in's file replaced the old
        "bob's old feedback": False,  # stale feedback goes; generate_feedback writes it afresh
    }


def test_a_regrade_rebuilds_the_class_files_of_the_whole_class_beside_grades_csv_and_names_them(term: Term) -> None:
    """After bob alone is graded again, grades-postmortem/ holds both students' item analysis and similarity; the run
    names each file there, and the working folder, which the next run wipes, holds neither."""
    folder = term.course.parent / "desk" / f"grades-{ASSIGNMENT}"
    for name in ("item-analysis.html", "similarity.html"):
        assert f"{folder / name}" in term.regrade_said, name
        assert (folder / name).is_file() and not (term.work / name).exists(), name
    with open(folder / "item-analysis.csv", newline="") as f:
        assert {row["students"] for row in csv.DictReader(f)} == {"2"}
    with open(folder / "similarity.csv", newline="") as f:  # bob handed in alice's notebook
        assert [(row["student_a"], row["student_b"]) for row in csv.DictReader(f)] == [("alice", "bob")]


def test_a_dry_run_leaves_the_course_gradebook_alone(term: Term) -> None:
    """`grade --out DIR` grades in DIR only: the course gradebook stays byte-identical."""
    assert term.dry_run_code == 0
    assert (term.course / "gradebook.db").read_bytes() == term.gradebook_before_dry_run


def _course_copy(term: Term, tmp_path: Path) -> Path:
    """A copy of the term's course (its config finds its own folder), for a test that writes into it."""
    course = tmp_path / "course"
    shutil.copytree(term.course, course)
    return course


def test_a_failed_publish_writes_nothing(term: Term, tmp_path: Path) -> None:
    """A publish the database refuses halfway leaves the course's gradebook and autograded/ as they were."""
    course = _course_copy(term, tmp_path)
    _set_manual_score(course, "bob", 1)  # what publishing bob's re-grade again would undo
    db = course / "gradebook.db"
    with sqlite3.connect(db) as con:  # the database itself refuses the grade rows, after zed's student row went in
        con.execute("CREATE TRIGGER refuse BEFORE UPDATE ON grade BEGIN SELECT RAISE(ABORT, 'refused'); END")
    before = db.read_bytes()
    files = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in (course / "autograded").rglob("*") if p.is_file()}
    with pytest.raises(GradingError, match="nothing was written"):
        publish(find_course(course), term.work, ASSIGNMENT, ["zed", "bob"])
    assert db.read_bytes() == before
    assert {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in files} == files
    assert not list(course.glob(".resumable-publish-*"))


PUBLISH = """import sys
from pathlib import Path
from resumable_core.course.grading.steps.publish import publish
from resumable_core.course.release import find_course
publish(find_course(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], ["bob"])
"""


def test_two_runs_publishing_at_once_take_turns(term: Term, tmp_path: Path) -> None:
    """Two processes publishing bob's re-grade into one course at once both succeed; nothing is duplicated."""
    course = _course_copy(term, tmp_path)
    args = [sys.executable, "-c", PUBLISH, str(course), str(term.work), ASSIGNMENT]
    runs = [subprocess.Popen(args, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    errors = [run.communicate()[1] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], errors
    assert sorted(_submissions(course)) == [(ASSIGNMENT, "alice"), (ASSIGNMENT, "bob")]
    with sqlite3.connect(course / "gradebook.db") as db:
        rows = db.execute("SELECT COUNT(*) FROM grade").fetchone()[0]
    assert rows == 2 * len(release.grade_cells(release.notebook_path(ASSIGNMENT, course)))
    assert sorted(p.name for p in (course / "autograded").iterdir()) == ["alice", "bob"]


def test_grading_into_a_course_that_never_released_refuses_first(tmp_path: Path, monkeypatch, capsys) -> None:
    """Without the assignment in the course gradebook, `grade` stops before any work with the fix: make release."""
    course = tmp_path / "course"
    shutil.copytree(REPO / "solutions" / ASSIGNMENT, course / "solutions" / ASSIGNMENT)
    shutil.copy2(REPO / "nbgrader_config.py", course / "nbgrader_config.py")
    (tmp_path / "class").mkdir()
    (tmp_path / "class" / "ann.ipynb").write_text("{}")  # an empty class is refused before the course is opened
    monkeypatch.chdir(tmp_path)
    assert _grade(tmp_path / "class", course) == 2
    error = capsys.readouterr().err
    assert "make release" in error and len(error.strip().splitlines()) == 1
    assert not (course / "gradebook.db").exists() and not (tmp_path / f"grading-{ASSIGNMENT}").exists()
