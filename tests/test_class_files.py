"""The class folder: beside grades.csv, the LMS's import file, the similarity report and the item analysis of the whole class.

A small course is built here, no grading run: a gradebook of five students (nbgrader's own API),
their autograded notebooks as JSON and the results an earlier ``grade --lms canvas`` left in the
class folder. ann answered and is graded by hand; bo copied ann's answers and waits for a human;
cy's file was refused; dee failed the test; eve was graded from no LMS. ``grades`` rebuilds the
class folder from it, as ``grade`` does after publishing.
"""

from __future__ import annotations

import csv
import json
import random
import sqlite3
import warnings
from pathlib import Path

import nbformat
import pytest
import similarity_samples as planted  # tests/ is on sys.path under pytest (rootdir-relative import)
from nbgrader.api import Gradebook

from resumable_core.__main__ import main as cli_main
from resumable_core.course.grading.steps import course_grades

A = "planted"
COURSE_ID = "class-files"


def _notebook(answers: dict[str, str], passed: bool) -> nbformat.NotebookNode:
    """The planted release's answer cells holding ``answers``, a 3-point test and a 2-point written answer."""
    nb = planted.notebook(answers)
    test = nbformat.v4.new_code_cell("assert reconcile(None, None) is None")
    if not passed:
        test.outputs = [nbformat.v4.new_output("error", ename="AssertionError", evalue="not reconciled", traceback=[])]
    why = nbformat.v4.new_markdown_cell("Because the call may have been sent.")
    for cell, gid, points in ((test, "test_reconcile", 3), (why, "why", 2)):
        meta = {"grade": True, "grade_id": gid, "locked": cell is test, "points": points, "solution": cell is why}
        cell.metadata["nbgrader"] = {**meta, "schema_version": 3}
    nb.cells += [test, why]
    return nb


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """The course folder: config, gradebook, release and autograded notebooks (the class folder is each test's)."""
    root = tmp_path_factory.mktemp("course")
    config = f"c = get_config()\nc.CourseDirectory.root = {str(root)!r}\nc.CourseDirectory.course_id = {COURSE_ID!r}\n"
    (root / "nbgrader_config.py").write_text(config)
    with sqlite3.connect(root / "gradebook.db") as db:  # a table there: nbgrader skips its seconds-long `alembic heads`
        db.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)")
    (root / "release" / A).mkdir(parents=True)
    nbformat.write(_notebook({}, passed=False), str(root / "release" / A / f"{A}.ipynb"))
    ann, dee, eve = (planted.honest(random.Random(seed)) for seed in range(3))
    bo = planted.disguised(ann, random.Random(3), tuple(planted.SIGNATURES))
    answers = {"ann": ann, "bo": bo, "dee": dee, "eve": eve}
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", COURSE_ID) as gb:
        gb.add_assignment(A)
        gb.add_notebook(A, A)
        gb.add_grade_cell("test_reconcile", A, A, max_score=3, cell_type="code")
        gb.add_grade_cell("why", A, A, max_score=2, cell_type="markdown")
        for gid in [*planted.RELEASE, "why"]:
            gb.add_solution_cell(gid, A, A)
        gb.add_student("cy")  # refused: on the roster, no submission
        for student, code in answers.items():
            gb.add_student(student)
            with warnings.catch_warnings():  # nbgrader's add_submission trips SQLAlchemy autoflush warnings
                warnings.simplefilter("ignore")
                gb.add_submission(A, student)
            test, why = (gb.find_grade(gid, A, A, student) for gid in ("test_reconcile", "why"))
            test.auto_score, test.needs_manual_grade = (0.0 if student == "dee" else 3.0), False
            why.manual_score = None if student == "bo" else 2.0
            why.needs_manual_grade = student == "bo"
            folder = root / "autograded" / student / A
            folder.mkdir(parents=True)
            nbformat.write(_notebook(code, passed=student != "dee"), str(folder / f"{A}.ipynb"))
        gb.db.commit()
    return root


def _class_folder(tmp_path: Path) -> Path:
    """A class folder holding what ``grade --lms canvas`` recorded of ann, bo, cy and dee (eve came from no LMS)."""
    results = tmp_path / "grades" / "results"
    results.mkdir(parents=True)
    scores = {"ann": 5.0, "bo": 3.0, "cy": 0.0, "dee": 2.0}
    for n, (student, score) in enumerate(scores.items()):
        status = "invalid" if student == "cy" else "graded"
        lms = {"lms": "canvas", "lms_id": f"100{n}", "lms_name": f"{student}smith"}
        result = {"score": score, "status": status, "problems": [], "notes": [], "messages": {}, **lms}
        (results / f"{student}.json").write_text(json.dumps(result))
    return tmp_path / "grades"


def _grades(course: Path, folder: Path, *extra: str) -> int:
    return cli_main(["grades", "--assignment", A, "--course", str(course), "--out", str(folder), *extra])


def _canvas(folder: Path) -> dict[str, str]:
    """{student: their grade} of ``canvas-import.csv``, and its Points Possible."""
    with open(folder / "canvas-import.csv", newline="") as f:
        return {row["SIS User ID"] or row["Student"]: row[A] for row in csv.DictReader(f)}


@pytest.mark.slow
def test_the_class_folder_holds_the_import_file_similarity_and_item_analysis_of_the_whole_class(
    course, tmp_path, monkeypatch
):
    """Beside grades.csv: canvas-import.csv of every LMS student, the copied pair in similarity.csv, every check's row;
    the course gradebook read once for them all."""
    reads = []
    read = course_grades.assignment_grades

    def counted(*args: str) -> object:
        reads.append(args)
        return read(*args)

    monkeypatch.setattr(course_grades, "assignment_grades", counted)
    folder = _class_folder(tmp_path)
    assert _grades(course, folder) == 0
    assert len(reads) == 1
    assert set(_canvas(folder)) == {"Points Possible", "ann", "bo", "cy", "dee"}  # eve came from no LMS
    with open(folder / "similarity.csv", newline="") as f:
        assert [(r["student_a"], r["student_b"]) for r in csv.DictReader(f)] == [("ann", "bo")]
    with open(folder / "item-analysis.csv", newline="") as f:
        (row,) = csv.DictReader(f)
    assert (row["check"], row["students"], row["failed"]) == ("test_reconcile", "4", "1")
    assert (folder / "similarity.html").is_file() and (folder / "item-analysis.html").is_file()


@pytest.mark.slow
def test_scores_waiting_for_a_human_or_not_graded_are_blank_unless_provisional_and_the_run_says_why(
    course, tmp_path, capsys
):
    """bo waits for manual grading, cy was refused: both blank, not 0, counted; --provisional sends bo's score."""
    folder = _class_folder(tmp_path)
    assert _grades(course, folder) == 0
    assert _canvas(folder) == {"Points Possible": "5", "ann": "5", "bo": "", "cy": "", "dee": "2"}
    said = capsys.readouterr().out
    for name in ("canvas-import.csv", "similarity.html", "item-analysis.html"):
        assert f"{folder / name}\n" in said or f"{folder / name} (" in said, name
    assert "2 student(s) left blank: 1 wait for manual grading" in said and "1 could not be graded" in said
    assert _grades(course, folder, "--provisional") == 0
    assert _canvas(folder) == {"Points Possible": "5", "ann": "5", "bo": "3", "cy": "", "dee": "2"}
    assert "left blank: 1 could not be graded" in capsys.readouterr().out
