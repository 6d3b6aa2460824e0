"""Text columns a learner reads line up on screen: padded by display width, Hangul taking two columns."""

from __future__ import annotations

import pytest
import wcwidth

from resumable_core.course import self_check
from resumable_core.course.grading.model import Submission
from resumable_core.course.grading.steps import report
from resumable_core.lab import columns
from resumable_core.lab.crash_test import CrashTestRow, CrashTestTable, JournalStep, JournalTable
from resumable_core.lab.matrix import MatrixRow, format_table


@pytest.fixture
def korean(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESUMABLE_LANG", "ko")


def starts(line: str, cells: list[str]) -> list[int]:
    """The display column where each of ``cells`` begins in ``line``, searched left to right."""
    found, at = [], 0
    for cell in cells:
        at = line.index(cell, at)
        found.append(wcwidth.wcswidth(line[:at]))
        at += len(cell)
    return found


def test_pad_counts_display_columns() -> None:
    """A Hangul word is padded to the columns asked for on screen; ASCII as str.ljust/rjust would."""
    assert wcwidth.wcswidth(columns.pad("통과", 7)) == 7 and columns.pad("통과", 7) == "통과   "
    assert columns.pad("passed", 7) == "passed".ljust(7) and columns.pad("42", 5, right=True) == "42".rjust(5)
    assert columns.width("크래시 지점") == 11


def test_a_korean_table_lines_up_by_display_width() -> None:
    """Each column of a table with Hangul cells starts at the same screen column on every line."""
    header = ["크래시 지점", "죽음", "verdict"]
    rows = [["after_tool", "예", "받아들임"], ["during_save_a", "아니요", "400"]]
    lines = columns.table(header, rows)
    assert starts(lines[0], header) == starts(lines[2], rows[0]) == starts(lines[3], rows[1])
    assert lines[1] == "  ".join("-" * w for w in (13, 6, 8))


def test_a_planted_character_count_padding_is_caught() -> None:
    """Padding by len() (what str.ljust does) puts a Korean table's columns off: the check above sees it."""
    header, row = ["크래시 지점", "죽음"], ["after_tool", "예"]
    widths = [max(len(header[0]), len(row[0])), 2]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cells, widths)) for cells in (header, row)]
    assert starts(lines[0], header) != starts(lines[1], row)


def test_crash_tests_korean_table_lines_up(korean: None) -> None:
    """crash_test's table in Korean: the header's columns start where each row's do."""
    rows = (
        CrashTestRow("after_tool", True, "send_email", 1, 3, True, "accepted"),
        CrashTestRow("during_save_a", False, None, 0, None, False, "400 invalid_request_error"),
    )
    lines = str(CrashTestTable("send_email", rows)).splitlines()
    first = starts(lines[0], [h.strip() for h in lines[0].split("  ") if h.strip()])
    assert starts(lines[2], ["after_tool", "예"]) == first[:2]
    assert starts(lines[3], ["during_save_a", "아니요"]) == first[:2]
    journal = str(JournalTable((JournalStep("첫 기록 뒤", "1 records", 10), JournalStep("x", "y", 3)))).splitlines()
    assert len({wcwidth.wcswidth(line[: line.index("read_journal")]) for line in journal}) == 1, journal


def test_the_matrix_table_lines_up() -> None:
    """`matrix`'s table: each column starts at one screen column in the header and every row."""
    row = MatrixRow("after_tool", "send_email", "내_전략", 2, False, True, 3, 120)
    lines = format_table([row]).splitlines()
    assert starts(lines[0], ["crash_point", "tool", "strategy", "effects"]) == starts(
        lines[2], ["after_tool", "send_email", "내_전략", "2"]
    )


def test_grades_summary_table_lines_up() -> None:
    """`grade`'s summary table: a refused file's Hangul label does not push the score column off."""
    subs = [
        Submission("김민준 (1).ipynb", status="invalid", problems=["없음"]),
        Submission("eve", score=3, max_score=3),
    ]
    lines = report.format_table(subs).splitlines()
    assert starts(lines[0], ["student", "score"]) == starts(lines[2], ["김민준 (1).ipynb", "0"])
    assert starts(lines[0], ["student", "score"]) == starts(lines[3], ["eve", "3"])


def test_checks_korean_report_lines_up(korean: None) -> None:
    """`check`'s report in Korean: every test's name starts at one screen column, and so does each message line."""
    results = [
        self_check.TestResult("test_a", 1, self_check.PASSED, "a thing"),
        self_check.TestResult("test_b", 2, self_check.FAILED, "b thing", ("AssertionError: 아니요",)),
        self_check.TestResult("test_c", 3, self_check.HIDDEN, ""),
    ]
    lines = [line for r in results for line in self_check._result_lines(r)]
    names = [starts(line, [name])[0] for line, name in zip(lines, ["test_a", "test_b"])]
    names.append(starts(lines[3], ["test_c"])[0])
    assert len(set(names)) == 1 and "통과" in lines[0] and "실패" in lines[1]
    assert starts(lines[2], ["AssertionError"])[0] == names[0]
