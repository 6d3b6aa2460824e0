"""The course gradebook on PostgreSQL: released, graded into, exported and read back, as on SQLite.

The server is a private cluster (``tests/postgres_cluster.py``): the one ``.ci/run`` started
(``RESUMABLE_TEST_POSTGRES_URL``), else one this module starts, else the tests skip and say what to
install. The class makes its own database and drops it; the cluster this module started, it stops.

The class is ``zip_run``'s (``tests/graded_classes.py``: one sample of each way a notebook ends, graded once per
session). Its course on PostgreSQL is released from an empty database; ``grade --resume`` of a copy of that run
publishes into it (every student is already graded there, so nobody is graded again) and nbgrader exports it; the
same run is published into a released SQLite course too, and ``grades`` reads both back.
"""

from __future__ import annotations

import csv
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import postgres_cluster as cluster
import pytest
import sqlalchemy
from graded_classes import TIMEOUT  # tests/ is on sys.path under pytest
from sqlalchemy.engine import make_url

from resumable_core.__main__ import main as cli_main
from resumable_core.course import nbgrader_cli, release
from resumable_core.course.errors import CourseConfigError
from resumable_core.course.grading import gradebook
from resumable_core.course.grading.errors import GradingError
from resumable_core.course.grading.isolation import BwrapBackend
from resumable_core.course.grading.steps.publish import check_released, publish

REPO = Path(__file__).resolve().parent.parent
ASSIGNMENT = "reconcile"
SOURCE = release.notebook_path(ASSIGNMENT)
COURSE_ID = "pg-test"
WORK_COURSE_ID = "resumable-agents"  # the working course's (grading/steps/workspace.py)


# --- the server and its databases ------------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """The URL of a running cluster's ``postgres`` database, as its superuser."""
    url = os.environ.get(cluster.URL_VARIABLE)
    if url:
        yield url
        return
    why = cluster.unavailable()
    if why:
        pytest.skip(why)
    folder = cluster.new_folder()
    try:
        yield cluster.start(folder).url
    finally:
        cluster.stop(folder)


@contextmanager
def database(server: str) -> Iterator[str]:
    """A new, empty database on the server, dropped afterwards (connections and all): its URL."""
    name = f"gradebook_{uuid.uuid4().hex[:12]}"
    admin = sqlalchemy.create_engine(server, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as con:
            con.execute(sqlalchemy.text(f'CREATE DATABASE "{name}"'))
        try:
            yield make_url(server).set(database=name).render_as_string(hide_password=False)
        finally:
            with admin.connect() as con:
                con.execute(sqlalchemy.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


def _tables(url: str) -> list[str]:
    engine = sqlalchemy.create_engine(url)
    try:
        return sorted(sqlalchemy.inspect(engine).get_table_names())
    finally:
        engine.dispose()


def _alembic_version(url: str) -> str:
    engine = sqlalchemy.create_engine(url)
    try:
        with engine.connect() as con:
            return str(con.execute(sqlalchemy.text("SELECT version_num FROM alembic_version")).scalar_one())
    finally:
        engine.dispose()


def _alembic_head() -> str:
    """nbgrader's newest gradebook schema revision, from its own alembic scripts."""
    from alembic.script import ScriptDirectory
    from nbgrader.dbutil import ALEMBIC_DIR

    return str(ScriptDirectory(ALEMBIC_DIR).get_current_head())


# --- courses ---------------------------------------------------------------------------------------


def _course(folder: Path, db_url: str | None, course_id: str | None = COURSE_ID) -> Path:
    """A course of the reconcile assignment at ``folder``: the repository's config, its gradebook at ``db_url``."""
    shutil.copytree(REPO / "solutions" / ASSIGNMENT, folder / "solutions" / ASSIGNMENT)
    config = (REPO / "nbgrader_config.py").read_text()
    if course_id is not None:
        config += f"\nc.CourseDirectory.course_id = {course_id!r}\n"
    if db_url is not None:
        config += f"c.CourseDirectory.db_url = {db_url!r}\n"
    (folder / "nbgrader_config.py").write_text(config)
    return folder


def _db_upgrade(course: Path) -> tuple[int, str]:
    """``nbgrader db upgrade`` in ``course``: its exit code and stderr."""
    done = nbgrader_cli.nbgrader(["db", "upgrade"], course, check=False)
    return done.returncode, done.stderr


def _grade(path: Path, course: Path, *extra: str) -> int:
    """``python -m resumable_core grade PATH --course COURSE`` (sandboxed where bubblewrap runs)."""
    no_sandbox = [] if BwrapBackend().available() is None else ["--no-sandbox"]
    args = ["grade", str(path), "--assignment", ASSIGNMENT, "--course", str(course), "--jobs", "1"]
    return cli_main([*args, "--timeout", str(TIMEOUT), *no_sandbox, *extra])


def _exported(course: Path) -> dict[str, float]:
    """``nbgrader export``'s score of the assignment by student."""
    out = course / "export.csv"
    nbgrader_cli.nbgrader(["export", "--to", str(out)], course)
    with open(out, newline="") as f:
        return {r["student_id"]: float(r["score"]) for r in csv.DictReader(f) if r["assignment"] == ASSIGNMENT}


def _kit_grades(course: Path, out: Path) -> dict[str, dict[str, str]]:
    """``python -m resumable_core grades``' rows by student (score and reason)."""
    assert cli_main(["grades", "--assignment", ASSIGNMENT, "--course", str(course), "--out", str(out)]) == 0
    with open(out / "grades.csv", newline="") as f:
        return {r["student_id"]: {"score": r["score"], "reason": r["reason"]} for r in csv.DictReader(f)}


def _cell_rows(db_url: str, course_id: str) -> dict[str, list[tuple]]:
    """Every student's grade rows of the assignment: (cell, score (None: needs a human), auto score, manual score)."""
    found = gradebook.assignment_grades(db_url, course_id, ASSIGNMENT)
    assert found is not None
    return {
        s.student: sorted(
            (name, g.score, g.auto_score, g.manual_score) for nb in s.notebooks.values() for name, g in nb.items()
        )
        for s in found.students
    }


@dataclass
class PostgresClass:
    """What the class on PostgreSQL left behind, read at each step."""

    url: str
    expected: dict[str, float]
    """Every student's autograded score (of 29: the 3-point "why" waits for a human), as ``zip_run`` expects it."""
    upgrade_before_release: tuple[int, str] = (-1, "")
    """``nbgrader db upgrade``'s exit code and stderr on the empty database."""
    tables_after_failed_upgrade: list[str] = field(default_factory=list)
    upgrade_after_release: tuple[int, str] = (-1, "")
    alembic_after_release: str = ""
    grade_code: int = -1
    run_rows: dict[str, dict[str, str]] = field(default_factory=dict)
    """The grading run's own grades.csv (from its SQLite working gradebook)."""
    run_cells: dict[str, list[tuple]] = field(default_factory=dict)
    postgres_cells: dict[str, list[tuple]] = field(default_factory=dict)
    sqlite_cells: dict[str, list[tuple]] = field(default_factory=dict)
    exported: dict[str, float] = field(default_factory=dict)
    kit_postgres: dict[str, dict[str, str]] = field(default_factory=dict)
    kit_sqlite: dict[str, dict[str, str]] = field(default_factory=dict)


@pytest.fixture(scope="module")
def pg_class(server: str, tmp_path_factory, zip_run) -> Iterator[PostgresClass]:
    expected, graded, _ = zip_run
    tmp = tmp_path_factory.mktemp("pg-class")
    desk = tmp / "desk"  # the instructor's current folder: grade's working folder goes here
    desk.mkdir()
    with database(server) as url, pytest.MonkeyPatch.context() as mp:
        facts = PostgresClass(url, expected)
        course = _course(tmp / "course", url)
        facts.upgrade_before_release = _db_upgrade(course)
        facts.tables_after_failed_upgrade = _tables(url)
        release.release(course, [ASSIGNMENT])  # make release
        facts.upgrade_after_release = _db_upgrade(course)
        facts.alembic_after_release = _alembic_version(url)
        mp.chdir(desk)
        work = desk / f"grading-{ASSIGNMENT}"
        shutil.copytree(graded, work)  # a copy: the cached run is read-only
        facts.grade_code = _grade(graded.parent / "class.zip", course, "--resume")
        with open(work / "grades.csv", newline="") as f:
            facts.run_rows = {r["student_id"]: dict(r) for r in csv.DictReader(f)}
        facts.run_cells = _cell_rows(gradebook.gradebook_url(work), WORK_COURSE_ID)
        facts.postgres_cells = _cell_rows(url, COURSE_ID)
        facts.exported = _exported(course)
        facts.kit_postgres = _kit_grades(course, desk / "grades-postgres")
        sqlite_course = _course(tmp / "sqlite-course", None)  # the default gradebook.db
        release.release(sqlite_course, [ASSIGNMENT])
        publish(release.find_course(sqlite_course), work, ASSIGNMENT, sorted(expected))
        facts.sqlite_cells = _cell_rows(release.find_course(sqlite_course).db_url, COURSE_ID)
        facts.kit_sqlite = _kit_grades(sqlite_course, desk / "grades-sqlite")
        yield facts


# --- the class -------------------------------------------------------------------------------------

slow_class = pytest.mark.skipif(not SOURCE.exists(), reason="the course's reconcile assignment is not there")


@pytest.mark.slow
@pytest.mark.nbgrader
@slow_class
def test_db_upgrade_fails_on_an_empty_database_and_works_after_the_release(pg_class: PostgresClass) -> None:
    """`nbgrader db upgrade` on an empty database fails and leaves it empty; after `make release` it finds the head."""
    code, stderr = pg_class.upgrade_before_release
    assert code != 0 and 'relation "notebook" does not exist' in stderr
    assert pg_class.tables_after_failed_upgrade == []  # PostgreSQL's DDL is transactional: nothing half made
    code, stderr = pg_class.upgrade_after_release
    assert code == 0, stderr
    assert pg_class.alembic_after_release == _alembic_head()


@pytest.mark.slow
@pytest.mark.nbgrader
@slow_class
def test_grade_publishes_the_class_into_the_postgres_gradebook(pg_class: PostgresClass) -> None:
    """`grade` into the PostgreSQL course: its rows are the run's SQLite working gradebook's, cell for cell (a refused
    file's student is on the roster, with no grade)."""
    assert pg_class.grade_code == 0
    assert {s: float(r["score"]) for s, r in pg_class.run_rows.items()} == pg_class.expected
    refused = [s for s, r in pg_class.run_rows.items() if r["status"] == "invalid"]
    assert refused and pg_class.postgres_cells == {**{s: [] for s in refused}, **pg_class.run_cells}
    assert set(pg_class.postgres_cells) == set(pg_class.expected)


@pytest.mark.slow
@pytest.mark.nbgrader
@slow_class
def test_postgres_and_sqlite_courses_hold_the_same_grades(pg_class: PostgresClass) -> None:
    """The same run published into an SQLite course holds the same rows; `grades` reads both alike, reasons too."""
    assert pg_class.sqlite_cells == pg_class.postgres_cells
    assert pg_class.kit_postgres == pg_class.kit_sqlite
    assert {s: float(r["score"]) for s, r in pg_class.kit_postgres.items()} == pg_class.expected


@pytest.mark.slow
@pytest.mark.nbgrader
@slow_class
def test_nbgrader_export_and_the_kits_grades_agree_on_postgres(pg_class: PostgresClass) -> None:
    """`nbgrader export` and the kit's `grades` give every student the run's score, read from PostgreSQL."""
    assert pg_class.exported == {s: float(r["score"]) for s, r in pg_class.kit_postgres.items()} == pg_class.expected
    for student, row in pg_class.run_rows.items():
        assert float(pg_class.kit_postgres[student]["score"]) == float(row["score"])


# --- refusals, without a server --------------------------------------------------------------------

CLOSED_PORT_URL = "postgresql+psycopg2://resumable:s3cret@127.0.0.1:1/gradebook"
"""A gradebook no server answers (port 1), with a password no message may show."""


def test_a_gradebook_on_a_server_without_a_course_id_is_refused(tmp_path: Path, capsys) -> None:
    """`make release` into PostgreSQL without a course id stops at once, naming the setting (nbgrader would fail late)."""
    course = _course(tmp_path / "course", CLOSED_PORT_URL, course_id=None)
    with pytest.raises(CourseConfigError, match=r"c\.CourseDirectory\.course_id"):
        release.find_course(course)
    assert release.main(["release", "--root", str(course)]) == 2
    error = capsys.readouterr().err
    assert len(error.strip().splitlines()) == 1 and "s3cret" not in error and "resumable:***@" in error
    assert not (course / "exercises").exists()


@pytest.mark.slow
def test_an_unreachable_gradebook_is_one_line_without_its_password(tmp_path: Path) -> None:
    """`grade`'s first look at a course whose database server is down says so in one line, the password hidden."""
    course = release.find_course(_course(tmp_path / "course", CLOSED_PORT_URL))
    with pytest.raises(GradingError) as refused:
        check_released(course, ASSIGNMENT)
    message = str(refused.value)
    assert message.startswith("could not open the course gradebook postgresql+psycopg2://resumable:***@127.0.0.1:1/")
    assert "s3cret" not in message and "\n" not in message
    assert course.shown_url == "postgresql+psycopg2://resumable:***@127.0.0.1:1/gradebook"
