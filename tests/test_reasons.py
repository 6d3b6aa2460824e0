"""A learner's words reach grades.csv, the gradebook and the summary as one printable line."""

from __future__ import annotations

import json

import nbformat
import pytest

from resumable_core.course.grading import reasons
from resumable_core.course.grading.isolation import Outcome
from resumable_core.course.grading.model import CellGrade
from resumable_core.course.grading.recheck.driver import _read_report
from resumable_core.course.grading.recheck.report import Report
from resumable_core.course.grading.steps.report import cell_reasons

TITLE = "\x1b]0;pwned\x07"
"""A terminal's escape sequence that sets its window title: in a reason, it would act on the instructor's terminal."""


def _outcome(stdout: str) -> Outcome:
    return Outcome(returncode=0, stdout=stdout.encode(), stderr=b"", limit=None, seconds=0.1)


def test_a_control_character_is_shown_as_its_escape_and_a_line_break_as_a_space():
    """ESC and BEL become \\x1b and \\x07, a newline or tab a space; Hangul and accents stay as they are."""
    assert reasons.printable(f"boom{TITLE}\nnext\tline") == "boom\\x1b]0;pwned\\x07 next line"
    assert reasons.printable("정산 réussi") == "정산 réussi"


def test_a_learners_exception_in_a_test_cell_reaches_the_reason_printable():
    """The kernel's error output of a graded cell gives a reason without the learner's control characters."""
    cell = {"outputs": [{"output_type": "error", "ename": "ValueError", "evalue": f"bad{TITLE}"}]}
    assert reasons.cell_loss(cell, 60) == "ValueError: bad\\x1b]0;pwned\\x07"
    assert "\x1b" not in reasons.classify_failure(f"Traceback\nValueError: bad{TITLE}", 60)


def test_the_checkers_report_reaches_the_host_printable():
    """Each cell's reason and the run's inconclusive reason, which carry the learner's words, lose their controls."""
    line = json.dumps({"cells": {"test_a": f"raised {TITLE}", "test_b": None}, "inconclusive": f"why{TITLE}"})
    report = _read_report(_outcome(line), _outcome(""), None)
    assert report == {"test_a": "raised \\x1b]0;pwned\\x07", "test_b": None}
    assert report.inconclusive == "why\\x1b]0;pwned\\x07"
    loaded = Report({}, load_errors=[{"cell": "answer", "error": f"NameError{TITLE}", "kernel": None}])
    assert loaded.inconclusive is not None and "\x1b" not in loaded.inconclusive


def test_the_checkers_report_crosses_to_the_host_whole():
    """Every field the checker writes (to_json) is the one the host reads back."""
    sent = Report({"test_b": "x", "test_a": None}, load_errors=[{"cell": "c", "error": "e", "kernel": "k"}])
    sent.inconclusive, sent.visible_failures = "why", ["test_b"]
    got = _read_report(_outcome(sent.to_json()), _outcome(""), None)
    assert got == sent and vars(got) == vars(sent)


@pytest.mark.slow
def test_a_lone_surrogate_in_a_learners_error_reaches_the_gradebook_comment(tmp_path, monkeypatch):
    """A reason quoting a lone surrogate (no UTF-8 encodes one) is written as formgrader's comment, escaped."""
    from nbgrader import api
    from nbgrader.api import Gradebook

    from resumable_core.course.grading import gradebook
    from resumable_core.course.grading.steps import workers

    # a new gradebook's stamp: `alembic heads` is a subprocess costing seconds, and no part of this test
    monkeypatch.setattr(api, "get_alembic_version", lambda: "0")
    db = f"sqlite:///{tmp_path / 'gradebook.db'}"
    with Gradebook(db) as gb:
        gb.add_assignment("a1")
        gb.add_notebook("nb", "a1")
        gb.add_solution_cell("answer", "nb", "a1")
        gb.add_grade_cell("test_a", "nb", "a1", max_score=1, cell_type="code")
        gb.add_student("s1")
        gb.add_submission("a1", "s1")
    line = json.dumps({"cells": {"test_a": "ValueError: bad \ud800 input"}, "visible_failures": ["test_a"]})
    checked = _read_report(_outcome(line), _outcome(""), ["test_a"])
    failed, _ = workers.recheck_outcome(["test_a"], checked, None, checked.visible_failures)
    source = {
        "cells": [
            {"cell_type": "code", "metadata": {"nbgrader": {"grade_id": "answer", "solution": True}}, "source": ""},
            {"cell_type": "code", "metadata": {"nbgrader": {"grade_id": "test_a", "grade": True}}, "source": ""},
        ]
    }
    gradebook.zero_cells(db, [], workers.recheck_comments(failed, source), "nb", "a1", "s1")
    with Gradebook(db) as gb:
        comment = gb.find_comment("answer", "nb", "a1", "s1").auto_comment
    assert "bad \\ud800 input" in comment


def test_the_run_and_the_grades_command_word_a_cell_with_one_function():
    """cell_reasons words both: the run adds the re-check's why and the outputs' loss; a human's score says so."""
    test = nbformat.v4.new_code_cell("check()", metadata={"nbgrader": {"grade": True, "grade_id": "test_a"}})
    test.outputs = [nbformat.v4.new_output("error", ename="AssertionError", evalue="wrong\nmore", traceback=[])]
    zeroed = {"test_a": CellGrade(0.0, 3.0, auto_score=3.0, manual_score=0.0)}
    cells = {"test_a": test}
    assert cell_reasons(cells, zeroed, 60, {"test_a": "a hidden check failed: x"}) == [
        "test_a 0/3 (a hidden check failed: x)"
    ]
    assert cell_reasons(cells, zeroed) == [
        "test_a 0/3 (manual score, from a grader or the isolated re-check; the autograder gave 3)"
    ]
    failed = {"test_a": CellGrade(0.0, 3.0, auto_score=0.0)}
    assert cell_reasons(cells, failed, 60) == ["test_a 0/3 (AssertionError: wrong)"]
    waits = {"test_a": CellGrade(None, 3.0)}
    assert cell_reasons(cells, waits, 60) == ["test_a ?/3 (needs manual grading)"]
