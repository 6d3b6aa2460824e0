"""Item analysis: each check's share failed and commonest messages, the checks that fail together, and its picture."""

from __future__ import annotations

import csv

import pytest
from PIL import Image

from resumable_core.course.grading.steps.analysis import NO_MESSAGE, Outcome, analyse, write


def _class() -> list[Outcome]:
    """Four students, three checks: a and b fail together for s1 and s2; c fails once with no message."""
    rows = []
    for s, (a, b, c) in {"s1": (0, 0, 3), "s2": (0, 0, 3), "s3": (2, 1, 3), "s4": (2, 1, 0)}.items():
        rows += [
            Outcome(s, "test_a", a, 2, None if a else "AssertionError: the email was sent twice"),
            Outcome(s, "test_b", b, 1, None if b else f"CheckFailed: {s}'s checkpoint was not saved\nmore"),
            Outcome(s, "test_c", c, 3, None),
        ]
    return rows


def test_each_check_has_its_share_failed_and_commonest_messages_first_line_only():
    """test_a: 2 of 4 failed, one message twice; test_b's messages keep their first line; a bare zero says so."""
    result = analyse(_class())
    by = {c.check: c for c in result.checks}
    assert [c.check for c in result.checks] == ["test_a", "test_b", "test_c"]
    assert (by["test_a"].failed, by["test_a"].students, by["test_a"].share_failed) == (2, 4, 0.5)
    assert by["test_a"].messages == [("AssertionError: the email was sent twice", 2)]
    assert {m for m, _ in by["test_b"].messages} == {
        "CheckFailed: s1's checkpoint was not saved",
        "CheckFailed: s2's checkpoint was not saved",
    }
    assert by["test_c"].messages == [(NO_MESSAGE, 1)]


def test_checks_failed_by_the_same_students_are_paired_and_a_lone_failure_is_not():
    """test_a and test_b fail for the same two students (Jaccard 1.0); test_c's one failure pairs with nothing."""
    assert analyse(_class()).together == [("test_a", "test_b", 1.0, 2)]


@pytest.mark.slow
def test_the_files_are_written_and_the_html_escapes_messages(tmp_path):
    """item-analysis.csv has a row per check, the picture is a PNG, and a message's markup is escaped in the page."""
    rows = [*_class(), Outcome("s5", "test_a", 0, 2, "<script>alert(1)</script>")]
    write(tmp_path, rows, "reconcile")
    table = list(csv.DictReader((tmp_path / "item-analysis.csv").open()))
    assert [r["check"] for r in table] == ["test_a", "test_b", "test_c"]
    assert table[0]["failed"] == "3" and table[0]["share_failed"] == "0.60"
    assert "2x AssertionError: the email was sent twice" in table[0]["common_failures"]
    page = (tmp_path / "item-analysis.html").read_text()
    assert "<script>" not in page and "&lt;script&gt;" in page and "test_a</b> and <b>test_b" in page
    with Image.open(tmp_path / "item-analysis.png") as image:
        assert image.format == "PNG" and image.size[0] > 400
