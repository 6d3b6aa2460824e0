"""The learner-facing tools speak Korean with RESUMABLE_LANG=ko, and English without it.

One test per area: a visible check's failure message, the lesson it points to, `check`'s own
words (a bad argument at once; a released exercise run whole, slow), each asserted in Korean.
The English texts themselves are asserted by the areas' own tests, which stay as they were.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from resumable_core.course.checks import reconcile as reconcile_checks
from resumable_core.course.checks.support import CheckFailed
from resumable_core.course.self_check import SelfCheckError, read_exercise

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def korean(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESUMABLE_LANG", "ko")


def test_a_visible_checks_message_is_korean(korean: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A check's CheckFailed is built when raised, in the language in force then."""
    with pytest.raises(CheckFailed) as caught:
        reconcile_checks.chosen_action({"D": None}, "D")
    assert "RESUME_ACTION['D']:" in caught.value.reason and "가운데 하나를 고르세요" in caught.value.reason
    monkeypatch.setenv("RESUMABLE_LANG", "en")
    with pytest.raises(CheckFailed, match=r"RESUME_ACTION\['D'\]: choose one of"):
        reconcile_checks.chosen_action({"D": None}, "D")


def test_a_checks_pointer_to_the_lesson_is_korean_too(korean: None) -> None:
    """A message that sends the learner back to a lesson names the lesson in Korean, its numbers kept."""

    def left_as_it_was(cp, tools):  # the dangling call stays unanswered
        return cp

    with pytest.raises(CheckFailed) as caught:
        reconcile_checks.check_unknown_tool_not_run(left_as_it_was)
    reason = caught.value.reason
    assert "허공에 뜬 호출" in reason and "아직 답하지 않았습니다" in reason
    assert "2강 3절" in reason and "lesson" not in reason


def test_checks_refusal_of_a_bad_argument_is_korean(korean: None, tmp_path: Path) -> None:
    """`check` on a folder says what to give instead, in Korean."""
    with pytest.raises(SelfCheckError) as caught:
        read_exercise(tmp_path)
    assert "폴더입니다" in caught.value.reason and "연습 노트북을 주세요" in caught.value.reason


@pytest.mark.slow
def test_check_on_a_released_exercise_reports_in_korean(korean: None, capsys: pytest.CaptureFixture[str]) -> None:
    """`check` on the released reconcile exercise: its report and the checks run in its kernel speak Korean."""
    from resumable_core.__main__ import main as cli

    assert cli(["check", str(ROOT / "exercises" / "reconcile" / "reconcile.ipynb")]) == 1
    out = capsys.readouterr().out
    assert "보이는 테스트를, 채점과 똑같이 새 커널에서" in out
    assert "  실패 " in out and "다음 할 일:" in out
    # a visible check's message, raised in the kernel, which keeps RESUMABLE_LANG
    assert "가운데 하나를 고르세요" in out
    assert "visible tests pass" not in out and "Next:" not in out
