"""The learner-facing tools speak Korean with RESUMABLE_LANG=ko, and English without it.

One test per area: a visible check's failure message, the lesson it points to, `check`'s own
words (a bad argument at once; a released exercise run whole, slow), each asserted in Korean.
The English texts themselves are asserted by the areas' own tests, which stay as they were.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest

from resumable_core._scripted import ScriptedClaude
from resumable_core.course.checks import reconcile as reconcile_checks
from resumable_core.course.checks.support import CheckFailed
from resumable_core.course.i18n import COURSE
from resumable_core.course.self_check import SelfCheckError, read_exercise
from resumable_core.lab.i18n import particles

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def korean(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESUMABLE_LANG", "ko")


@pytest.mark.parametrize(
    ("written", "read"),
    [
        ("send_email을(를) 호출", "send_email을 호출"),
        ("'rerun'(으)로 다루고", "'rerun'으로 다루고"),
        ("None은(는) 아닙니다", "None은 아닙니다"),
        (
            "user을(를), true이(가), dict을(를), reconcile을(를), resume을(를)",
            "user를, true가, dict를, reconcile을, resume을",
        ),
        ("파일을(를) 서버(으)로, 길(으)로, 책(으)로", "파일을 서버로, 길로, 책으로"),
        ("3을(를) 2와(과) 1(으)로", "3을 2와 1로"),
        ("체크포인트 A을(를) L(으)로", "체크포인트 A를 L로"),
        ("{name}을(를)", "{name}을(를)"),
    ],
)
def test_a_particle_is_chosen_by_how_the_word_before_it_ends(written: str, read: str) -> None:
    """Hangul by its final consonant, digits as read, Latin words by the last letter's sound; a placeholder waits."""
    assert particles(written) == read


def test_a_translations_particles_are_chosen_once_it_is_formatted(korean: None) -> None:
    """A Korean message fills its placeholders first, then picks each particle for the word now there."""
    message = "a file of version {version} must be refused, load_state returned {name}"
    said = COURSE.gettext(message)
    assert said.format(version=3, name="None") == "version 3인 파일은 거부해야 하는데, load_state가 None을 반환했습니다"
    assert said.format(version=3, name="dict") == "version 3인 파일은 거부해야 하는데, load_state가 dict를 반환했습니다"


def test_a_visible_checks_message_is_korean(korean: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A check's CheckFailed is built when raised, in the language in force then."""
    with pytest.raises(CheckFailed) as caught:
        reconcile_checks.chosen_action({"D": None}, "D")
    assert "RESUME_ACTION['D']:" in caught.value.reason and "가운데 하나를 고르세요" in caught.value.reason
    monkeypatch.setenv("RESUMABLE_LANG", "en")
    with pytest.raises(CheckFailed, match=r"RESUME_ACTION\['D'\]: choose one of"):
        reconcile_checks.chosen_action({"D": None}, "D")


def test_a_checks_message_quotes_the_learners_error_and_says_the_cores_problem_in_korean(korean: None) -> None:
    """What a check passes on (a learner's exception, the core's verdict on a returned checkpoint) reads Korean:
    the verdict from the catalog, nested problem included; Python's and the API's words in quotes."""
    from english_prose import english_runs

    import resumable_core as rc

    def raises(cp: rc.Checkpoint, tools: rc.Toolbox) -> rc.Checkpoint:
        raise ValueError("the notes file is somewhere else")

    def answers_with_a_number(cp: rc.Checkpoint, tools: rc.Toolbox) -> rc.Checkpoint:
        call = cp.pending_tool_use
        assert call is not None  # checkpoint B has a dangling call
        cp.messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": 5}]})
        cp.pending_tool_uses = []
        return cp

    said = []
    for reconcile in (raises, answers_with_a_number):
        with pytest.raises(CheckFailed) as caught:
            reconcile_checks.check_checkpoint_b(reconcile)
        said.append(caught.value.reason)
    assert "“ValueError: the notes file is somewhere else" in said[0], said
    assert said[1].startswith("정산한 체크포인트가 스스로 모순됩니다: Messages API가"), said
    assert [s for s in said if english_runs(s)] == []


def test_a_checks_pointer_to_the_lesson_is_korean_too(korean: None) -> None:
    """A message that sends the learner back to a lesson names the lesson in Korean, its numbers kept."""

    def left_as_it_was(cp, tools):  # the dangling call stays unanswered
        return cp

    with pytest.raises(CheckFailed) as caught:
        reconcile_checks.check_unknown_tool_not_run(left_as_it_was)
    reason = caught.value.reason
    assert "허공에 뜬 호출" in reason and "아직 답하지 않았습니다" in reason
    assert "레슨 2의 3절" in reason and "lesson" not in reason


def test_checks_refusal_of_a_bad_argument_is_korean(korean: None, tmp_path: Path) -> None:
    """`check` on a folder says what to give instead, in Korean."""
    with pytest.raises(SelfCheckError) as caught:
        read_exercise(tmp_path)
    assert "폴더입니다" in caught.value.reason and "연습 노트북을 주세요" in caught.value.reason
    assert "예: exercises/reconcile/reconcile.ipynb" in caught.value.reason and "e.g." not in caught.value.reason


@pytest.mark.slow
def test_checks_output_warning_is_korean(korean: None) -> None:
    """The warning of outputs near grading's cap, and over it, is Korean, its sizes and command kept."""
    import nbformat

    from resumable_core.course.self_check import output_warning

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(x)")])
    nb.cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text="x" * (9 << 20))]
    near, over = output_warning(nb, "make check NB=x.ipynb")
    assert not over and "9.0 MiB" in near[0] and "16 MiB에 가깝습니다" in near[0]
    assert "print less" not in "\n".join(near)
    nb.cells[0].outputs[0].text = "x" * (17 << 20)
    lines, over = output_warning(nb, "make check NB=x.ipynb")
    assert over and "셀 0에서 멈추고" in "\n".join(lines) and "  make check NB=x.ipynb" in lines


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


# -- the lab: formative feedback, the simulator page, the crash tests, the figures -------------------


def test_the_formative_feedback_is_korean(korean: None, capsys: pytest.CaptureFixture[str]) -> None:
    """A practice checkpoint's feedback, blank, right and wrong, comes whole from the lab's catalog."""
    from resumable_core.lab.formative import RIGHT_ACTIONS, formative_check

    formative_check("D", None)
    formative_check("E", RIGHT_ACTIONS["E"][0])
    formative_check("F", "rerun_tool")
    out = capsys.readouterr().out
    assert "체크포인트 D: 아직 답을 쓰지 않았습니다" in out
    assert "체크포인트 E: 맞았습니다" in out and "읽기 전용" in out
    assert "체크포인트 F: rerun_tool이 아닙니다" in out and "대기 중인 것이 없습니다" in out


def test_the_cores_words_the_lab_shows_are_in_its_catalog() -> None:
    """core_words copies every crash point's, scenario's and strategy's help (the answers' too), each task, the
    checkpoint's field docs, the run statuses and effects, and the constant refusal, as the core writes them."""
    import ast
    import inspect
    import itertools
    import textwrap
    import typing

    import resumable_core as rc
    import resumable_core.course.hidden.strategies as answers
    from resumable_core import checkpoint as checkpoint_module
    from resumable_core import crash, errors, lease, loop
    from resumable_core.crash import CRASH_POINT_HELP, run_in_child
    from resumable_core.lab.core_words import CORE_WORDS
    from resumable_core.loop import RunResult
    from resumable_core.scenarios import SCENARIOS
    from resumable_core.strategies import STRATEGIES
    from resumable_core.tools import Effect

    shown = {*CRASH_POINT_HELP.values(), *(s.help for s in SCENARIOS.values()), *(s.task for s in SCENARIOS.values())}
    shown |= {STRATEGIES[name].help for name in ("none", "delete", "rerun")} | {s.help for s in answers.ANSWERS}
    checkpoint = ast.parse(textwrap.dedent(inspect.getsource(rc.Checkpoint))).body[0]
    assert isinstance(checkpoint, ast.ClassDef)
    shown |= {
        " ".join(doc.value.value.split())
        for field, doc in itertools.pairwise(checkpoint.body)
        if isinstance(field, ast.AnnAssign)
        and isinstance(doc, ast.Expr)
        and isinstance(doc.value, ast.Constant)
        and isinstance(doc.value.value, str)
    }
    shown |= {*typing.get_args(typing.get_type_hints(RunResult)["status"]), *(e.value for e in Effect)}
    shown |= {"killed", "exited"}  # run_in_child's answers
    assert '``"killed"`` or ``"exited"``' in (inspect.getdoc(run_in_child) or "")
    modules = (checkpoint_module, errors, lease, loop, crash)
    calls = [c for m in modules for c in ast.walk(ast.parse(inspect.getsource(m))) if isinstance(c, ast.Call)]

    def constants(node: ast.expr) -> set[str]:  # a string, or either string of `a if test else b`
        nodes = (node.body, node.orelse) if isinstance(node, ast.IfExp) else (node,)
        return {n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)}

    def an_errors(call: ast.Call) -> bool:  # `SomeError(...)`, or `super().__init__(...)` in an error's class
        return getattr(call.func, "id", "").endswith("Error") or getattr(call.func, "attr", "") == "__init__"

    # each refusal's reason as the core writes it (an error's constant second argument), and each error's
    # template (a constant argument of an error's call that passes data)
    refusals = {
        call.args[1].value
        for call in calls
        if getattr(call.func, "id", "").endswith("Error") and len(call.args) > 1
        if isinstance(call.args[1], ast.Constant) and isinstance(call.args[1].value, str)
    }
    refusals |= {t for call in calls if an_errors(call) and call.keywords for arg in call.args for t in constants(arg)}
    refusals.add("(no traceback)")  # crash's {detail} when the child printed none
    assert '"(no traceback)"' in inspect.getsource(crash)
    problems = {  # each Problem the core words: its template
        call.args[0].value
        for call in calls
        if getattr(call.func, "id", None) == "Problem" and isinstance(call.args[0], ast.Constant)
    }
    assert len(problems) == 12 and len(refusals) == 42
    # what a refusal's {why} or {kind} may be
    problems |= {*checkpoint_module._OS_REASONS.values(), *checkpoint_module._KINDS.values(), "not a regular file"}
    assert shown | refusals | problems == set(CORE_WORDS)


def test_a_reconcile_given_by_name_is_refused_in_korean(korean: None, tmp_path: Path) -> None:
    """RunFolder.run(task, reconcile="rerun_") is refused in the learner's language, naming the function to pass."""
    import resumable_core as rc
    from resumable_core.lab.core_words import message

    with pytest.raises(rc.ReconcileNotCallableError) as info:
        rc.RunFolder.create(tmp_path).run("Summarize this week's meeting notes into one page.", reconcile="rerun_")  # type: ignore[arg-type]  # the name is the mistake
    assert message(info.value) == (
        "reconcile='rerun_' 값은 함수가 아닙니다. 전략의 함수(예: rc.STRATEGIES['rerun'].reconcile) 또는 직접 만든 "
        "reconcile(cp, tools) 함수를 넘기세요"
    )


def test_the_labs_refusals_of_a_name_are_korean(korean: None) -> None:
    """run_cell (and the resumers) with an unknown scenario or crash point, and formative_check with an unknown
    checkpoint, refuse in Korean before anything runs, naming the choices and the nearest one; the first two are the
    core's own refusals (a ValueError too), said by lab.message as a traceback says them."""
    import resumable_core as rc
    from resumable_core import lab
    from resumable_core.lab import resumers

    refusals = {
        "'send_emial'을 다루는 시나리오는 없습니다. 'send_email'을 뜻했나요? "
        "read_file, send_email, send_email+read_file 가운데 하나를 고르세요": (
            lambda: lab.run_cell("after_tool", "send_emial", "rerun"),
            lambda: resumers.race_resumers("after_tool", "send_emial", "rerun"),
            lambda: resumers.crash_loop("after_tool", "send_emial"),
        ),
        "'wire_money'를 다루는 시나리오는 없습니다. read_file, send_email, ": (
            lambda: lab.run_cell("after_tool", "wire_money", "rerun"),
        ),
        "'after_tul'은 크래시 지점이 아닙니다. 'after_tool'을 뜻했나요? before_model_call, after_response, ": (
            lambda: lab.run_cell("after_tul", "send_email", "rerun"),
            lambda: resumers.race_resumers("after_tul", "send_email", "rerun"),
            lambda: resumers.race_resumers("after_tul", "send_email", "rerun", crash_tool="read_file"),
            lambda: resumers.crash_loop("after_tul", "read_file"),
            lambda: rc.CrashPlan("after_tul"),
        ),
        "형성 평가 점검은 체크포인트 D, E, F에만 있고, 'Q'에는 없습니다": (
            lambda: lab.formative_check("Q", "rerun_tool"),
        ),
    }
    for said, calls in refusals.items():
        for call in calls:
            with pytest.raises(ValueError) as info:
                call()
            assert lab.message(info.value).startswith(said), lab.message(info.value)


def test_the_simulator_page_speaks_korean(korean: None) -> None:
    """The simulator's labels, its settings' help (the core's words too) and its panels' notes are Korean."""
    from resumable_core.lab import render
    from resumable_core.lab.widgets import CrashSimulator, MatrixHeatmap

    sim = CrashSimulator()
    assert (sim.scenario.description, sim.crash_point.description, sim.strategy.description) == (
        "시나리오",
        "크래시 지점",
        "전략",
    )
    assert sim.run_button.description == "실행"
    assert "도구가 실행된 뒤, 저장 지점 B 전" in sim.help.value and "부수 효과" in sim.help.value
    assert "체크포인트 파일이 없었습니다" in render.checkpoint_html(None)
    assert "행렬 계산" in MatrixHeatmap().run_button.description
    from resumable_core import lab

    recorded = MatrixHeatmap(strategies=[], recorded=lab.recorded_matrix()).recorded
    assert recorded and all(r.strategy.endswith(" (기록됨)") for r in recorded)  # the heatmap's column labels
    mine = CrashSimulator(reconcile=lambda cp, tools: cp).strategy  # the learner's own function, in the menu
    assert mine.value == "내 reconcile" and "내 reconcile" in mine.options


@pytest.mark.slow
def test_a_simulated_crash_is_told_in_korean(korean: None) -> None:
    """The story of one real crash and resume (what the simulator's "What happened" shows) is Korean."""
    from resumable_core import lab

    story = lab.run_cell("after_tool", "send_email", "rerun").story()
    assert "크래시: send_email을 호출하는 턴의 도구가 실행된 뒤, 저장 지점 B 전" in story
    assert "1. 실행이 SIGKILL로 강제 종료되었습니다." in story and "크래시한 호출의 효과" in story


def test_the_crash_tests_tables_speak_korean(korean: None) -> None:
    """crash_test's and crash_test_journal's tables name their columns in Korean."""
    from resumable_core.lab.crash_test import CrashTestRow, CrashTestTable, JournalStep, JournalTable

    row = CrashTestRow("after_tool", True, "send_email", 1, 3, True, "accepted")
    text = str(CrashTestTable("send_email", (row,)))
    assert "크래시 지점" in text and "보낸 메일" in text and "받아들임" in text
    assert "단계" in JournalTable((JournalStep("x", "y", 3),))._repr_html_()


def test_a_checkpoints_consistency_problem_and_the_matrix_table_are_korean(korean: None) -> None:
    """The core's Problem (what lesson 1 and 2 show of a refused checkpoint) and the matrix's header read Korean."""
    import resumable_core as rc
    from resumable_core import lab
    from resumable_core.lab.matrix import MatrixRow, format_table

    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "t"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_01Read", "name": "read_file", "input": {}}],
        },
    ]
    problem = rc.consistency_problem(rc.Checkpoint(task="t", messages=messages))
    assert problem == "messages.1: last message asks for tool_use toolu_01Read but pending_tool_uses is empty"
    assert (
        lab.core(problem)
        == "messages.1: 마지막 메시지가 tool_use(toolu_01Read)를 요청하지만 pending_tool_uses가 비어 있음"
    )
    row = MatrixRow("after_tool", "send_email", "rerun", 2, False, True, 4, 900)
    assert format_table([row]).splitlines()[0].split() == [
        "크래시",
        "지점",
        "도구",
        "전략",
        "효과",
        "API",
        "오류",
        "완료",
        "턴",
        "토큰",
    ]


def test_a_refusal_after_reconcile_is_korean_down_to_the_apis_words(korean: None, tmp_path: Path) -> None:
    """A reconcile that answers a call the turn never made is refused; the reason's nested problem is
    Korean too, and the API's own words in it are quoted, not left as prose."""
    from english_prose import english_runs

    import resumable_core as rc
    from resumable_core import lab

    folder = rc.RunFolder.create(tmp_path)
    use = {"type": "tool_use", "id": "toolu_01Read", "name": "read_file", "input": {"path": "a.md"}}
    messages: list[dict[str, Any]] = [{"role": "user", "content": "t"}, {"role": "assistant", "content": [use]}]
    pending = [{"id": use["id"], "name": use["name"], "input": use["input"]}]
    cp = rc.Checkpoint.model_validate({"task": "t", "messages": messages, "pending_tool_uses": pending})
    rc.save_checkpoint(cp, folder.checkpoint_path)

    def answers_another_call(cp: rc.Checkpoint, tools: Any) -> rc.Checkpoint:
        cp.messages.append({"role": "user", "content": [rc.tool_result("toolu_01Other", "x")]})
        cp.pending_tool_uses = []
        return cp

    with pytest.raises(rc.CheckpointInconsistentError) as refused:
        rc.run_agent(
            "t",
            checkpoint_path=folder.checkpoint_path,
            toolbox=folder.toolbox,
            client=rc.make_client(scripted=ScriptedClaude()),
            reconcile=answers_another_call,
        )
    said = lab.reason(refused.value)
    assert said.startswith(
        "reconcile을 마친 뒤에도: Messages API가 이 메시지들을 거부할 것임(API의 문구: “messages.1: `tool_use` ids were found"
    ), said
    assert english_runs(said) == [], said


def _korean_reason_of_loading(path: Path) -> str:
    import resumable_core as rc
    from resumable_core import lab

    with pytest.raises(rc.CheckpointError) as refused:
        rc.load_checkpoint(path)
    return lab.reason(refused.value)


_GOOD = '{"version": 2, "task": "t", "turns": 5, "messages": [{"role": "user", "content": "t"}]}'


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        "[1, 2]",
        '{"checkpoint": {}}',
        _GOOD.replace('"version": 2', '"version": 3'),
        _GOOD.replace('"turns": 5', '"turns": -1'),
        _GOOD.replace('"turns": 5', '"turns": "3"'),
        _GOOD.replace('"turns": 5', '"turns": 5, "extra": 1'),
        _GOOD.replace('"turns": 5', '"turns": 5, "turns": 1'),
        _GOOD.replace('"turns": 5', '"turns": NaN'),
        _GOOD.replace('"turns": 5', '"turns": 1e999'),
        _GOOD.replace('"turns": 5', '"turns": ' + "7" * 5000),
        _GOOD.replace('"turns": 5', '"x": ' + "[" * 300 + "]" * 300),
        _GOOD.replace('"content": "t"', '"content": "\\udc80"'),
        _GOOD.replace('"role": "user"', '"role": "assistant"'),
        _GOOD.replace('"role": "user"', '"role": "system"'),
        _GOOD.replace('[{"role": "user", "content": "t"}]', "[]"),
    ],
)
def test_every_refused_checkpoint_is_told_in_korean(korean: None, tmp_path: Path, content: str) -> None:
    """Whatever is wrong with a checkpoint file, its refusal reads Korean: the kit's words from the catalog, and
    the words of the json module, pydantic or the API (which the learner would meet as they are) in quotes."""
    from english_prose import english_runs

    path = tmp_path / "cp.json"
    path.write_bytes(content.encode())
    said = _korean_reason_of_loading(path)
    assert english_runs(said) == [], said


def test_a_checkpoint_the_system_will_not_read_is_told_in_korean(korean: None, tmp_path: Path) -> None:
    """The operating system's refusals (a folder, a FIFO, a parent that is a file, a missing folder, a dangling
    symlink) and the save's are Korean too."""
    import os

    from english_prose import english_runs

    import resumable_core as rc
    from resumable_core import lab

    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "file").write_text("x")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    cases = [tmp_path, tmp_path / "fifo", tmp_path / "file" / "cp.json", tmp_path / "no" / "cp.json"]
    said = [_korean_reason_of_loading(path) for path in [*cases, tmp_path / "dangling"]]
    cp = rc.Checkpoint(task="t", messages=[{"role": "user", "content": "t"}], turns=10**150)
    with pytest.raises(rc.CheckpointWriteError) as refused:
        rc.save_checkpoint(cp, tmp_path / "cp.json")
    said.append(lab.reason(refused.value))
    assert [s for s in said if english_runs(s)] == []
    assert len(set(said)) == len(said), said


@pytest.mark.slow
def test_the_figures_are_labelled_in_korean(korean: None) -> None:
    """The turn diagram's and the heatmap's words are Korean (the Hangul font is installed elsewhere)."""
    import warnings

    from resumable_core import lab
    from resumable_core.lab.render import heatmap_figure

    svg = lab.turn_diagram().svg
    assert "크래시 지점 8곳" in svg and "에이전트 루프" in svg and "모델 호출:" in svg
    with warnings.catch_warnings():  # no Hangul font on a machine without fonts-noto-cjk: missing glyphs
        warnings.simplefilter("ignore")
        fig = heatmap_figure(lab.recorded_matrix())
    words = [fig.get_suptitle(), *(ax.get_title() for ax in fig.axes), fig.axes[0].get_ylabel()]
    words += [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    assert any("크래시 행렬" in w for w in words) and "크래시 지점" in words and "정확히 한 번" in words


# -- the hidden checks (their own catalog, never in the student kit) ----------------------------------


def test_a_hidden_checks_message_is_korean(korean: None) -> None:
    """A hidden check's CheckFailed comes from the hidden catalog, in the language in force when it is raised."""
    from resumable_core.course.hidden import reconcile as hidden_reconcile
    from resumable_core.course.hidden import resume_skeleton as hidden_skeleton

    def ran_a_tool(cp, tools):  # executes something although nothing is pending
        tools.execute("list_dir", {"path": "."})
        return cp

    with pytest.raises(CheckFailed) as caught:
        hidden_reconcile.check_nothing_pending(ran_a_tool)
    assert "대기 중인 것이 없는데 reconcile이 실행했습니다" in caught.value.reason
    with pytest.raises(CheckFailed) as caught:
        hidden_skeleton.check_replay_rules(lambda records: {})
    assert caught.value.reason.startswith("기록이 없으면 replay는")


# -- Level 1 stays secret in Korean too ---------------------------------------------------------------

_KO_NAMED = {letter: re.compile(rf"체크포인트 ?{letter}(?![A-Za-z])") for letter in "ABC"}
_KO_FACTS = re.compile(
    r"끝난|끝남|대기 중인 것이 없|다시 실행|읽기 전용|read_file|is_error|알 수 없|불명|send_email|보낸 편지함|발신함|부수 효과"
)


def _ko_leaks(text: str) -> list[str]:
    return [line for line in text.splitlines() for n in _KO_NAMED.values() if n.search(line) and _KO_FACTS.search(line)]


def test_no_shipped_korean_message_gives_level1_away() -> None:
    """What test_level1_secret asks of the English holds for the shipped catalogs' Korean: no line names
    graded checkpoint A, B or C beside a fact that decides its action."""
    from resumable_core.lab import catalogs

    every = catalogs._all_catalogs()
    for domain in ("course", "lab", "lessons"):
        text = "\n".join(str(m.string) for m in catalogs.read(every[domain], "ko") if m.id)
        assert _ko_leaks(text) == [], domain
    assert _ko_leaks("체크포인트 C: send_email은 다시 실행하지 않습니다") != []  # the scan is not blind


def test_a_lesson_announces_a_task_in_korean_with_the_models_english_beside_it(korean: None) -> None:
    """lab.say shows a scenario's task (data the model gets in English) in Korean, the English quoted beside it."""
    from resumable_core import lab
    from resumable_core.scenarios import EMAIL_TASK

    said = lab.say("Task: {task}", task=EMAIL_TASK)
    assert said.startswith("작업: 이번 주 결론을 팀에 메일로") and f"“{EMAIL_TASK}”" in said, said
    assert lab.say("Task: {task}", task="not a core text") == "작업: not a core text"


def test_an_ipython_kernel_in_a_ko_folder_speaks_korean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """With no setting and no notebook path (Voila, nbconvert), an IPython kernel started in a `ko/` folder is Korean."""
    import types

    from resumable_core.lab import i18n

    for variable in ("RESUMABLE_LANG", "JPY_SESSION_NAME", "LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG"):
        monkeypatch.delenv(variable, raising=False)
    (tmp_path / "ko").mkdir()
    monkeypatch.chdir(tmp_path / "ko")
    assert i18n.language() == "en"  # a command run from that folder is no Korean notebook
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: object()))
    assert i18n.language() == "ko"
    monkeypatch.chdir(tmp_path)
    assert i18n.language() == "en"


@pytest.mark.slow
def test_the_korean_simulator_page_speaks_korean_with_no_setting(tmp_path: Path) -> None:
    """Executed as nbconvert and Voila run it (in its folder, no RESUMABLE_LANG, no notebook path), the Korean
    simulator page's widgets are Korean."""
    import json
    import shutil
    import subprocess

    import nbformat
    from nbclient import NotebookClient

    from resumable_core.course.self_check import kernel_env

    folder = tmp_path / "ko"
    folder.mkdir()
    shutil.copy(ROOT / "simulator" / "ko" / "simulator.ipynb", folder)
    nb = nbformat.read(folder / "simulator.ipynb", as_version=4)
    unset = ("RESUMABLE_LANG", "JPY_SESSION_NAME", "LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG")
    env = {k: v for k, v in kernel_env(tmp_path).items() if k not in unset}
    NotebookClient(nb, kernel_name="python3", timeout=300).execute(env=env, cwd=str(folder), stderr=subprocess.DEVNULL)
    state = json.dumps(nb.metadata.get("widgets", {}), ensure_ascii=False)
    assert "시나리오" in state and "크래시 지점" in state
    assert '"Scenario' not in state


_ENGLISH_PROSE = re.compile(r"(?<![\w.-])[A-Za-z]{2,}(?: [A-Za-z]{2,}){2,}(?![\w-])")
"""Three plain English words in a row: prose, not a code name (send_email), a flag or a quoted value."""


def _english_prose(text: str) -> list[str]:
    """The English prose left in ``text``, outside backticks, quotes and angle brackets (code, values, markup)."""
    text = re.sub(r"`[^`]*`|'[^'\n]*'|\"[^\"\n]*\"|“[^”]*”|<[^>]*>", " ", text)
    return _ENGLISH_PROSE.findall(text)


@pytest.mark.slow
def test_the_korean_lessons_rendered_words_and_simulates_help_are_korean(
    korean: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What lessons 1 and 2 render from the kit (the actions' meanings, a refused checkpoint's reason, the core's
    words: the checkpoint's fields, the statuses and effects, every strategy's help; the turn diagram) and
    `simulate --help` hold no English prose, and their particles are chosen."""
    import json

    import resumable_core as rc
    from resumable_core import lab
    from resumable_core.__main__ import main as cli_main
    from resumable_core.errors import CheckpointTaskMismatchError, CheckpointTooLargeError, CheckpointVersionError
    from resumable_core.lab.core_words import CORE_WORDS

    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps({"name": "some other tool's state"}))
    with pytest.raises(rc.CheckpointError) as refused:
        rc.load_checkpoint(foreign)
    broken = tmp_path / "broken.json"
    broken.write_text('{"version": 1, "task": ')
    with pytest.raises(rc.CheckpointError) as not_json:
        rc.load_checkpoint(broken)
    rendered = {
        "actions": lab.actions_text(),
        "version": lab.reason(CheckpointVersionError(None, 3, 2)),
        "task": lab.reason(CheckpointTaskMismatchError(None, "Email the team.", "Summarize the notes.")),
        "size": lab.reason(CheckpointTooLargeError(None, 2048, 1024)),
        "foreign": lab.reason(refused.value),
        "not json": lab.reason(not_json.value).split("(")[0],  # the parser's own words stay as Python says them
        "status": lab.say("pending {tool}: effect {effect}", tool="send_email", effect="side_effect"),
        "diagram": lab.turn_diagram().svg,
        **{word: lab.core(word) for word in CORE_WORDS if "{" not in word},  # templates: filled above
    }
    with pytest.raises(SystemExit):
        cli_main(["simulate", "--help"])
    rendered["simulate --help"] = capsys.readouterr().out
    assert rendered["version"] == "체크포인트 버전 3, 이 코드는 버전 2를 읽습니다"
    assert rendered["status"] == "대기 중 send_email: 효과 부수 효과"
    assert "레슨의 규칙" in rendered["simulate --help"]  # by_effect's help
    left = {name: _english_prose(text) for name, text in rendered.items()}
    assert {name: prose for name, prose in left.items() if prose} == {}
    assert not [name for name, text in rendered.items() if re.search(r"을\(를\)|이\(가\)|은\(는\)|\(으\)로", text)]
    assert _english_prose("체크포인트: The run is finished, report it") == ["The run is finished"]  # not blind


@pytest.mark.slow
def test_a_core_error_escaping_a_cell_is_said_in_the_notebooks_language() -> None:
    """A learner's cell that lets a core error escape (a misspelt strategy, a reconcile with no `return cp`, a resume
    with no reconcile) shows IPython's traceback, its last line in Korean in a Korean notebook, English in English."""
    import subprocess

    program = """
import os
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
shell.run_cell("from resumable_core import lab, errors")  # the lab's import installs the hook, as a lesson's does
for lang in ("ko", "en"):
    os.environ["RESUMABLE_LANG"] = lang
    for cell in (
        "raise errors.UnknownStrategyError('rerun_', ['none', 'rerun'])",
        "raise errors.ReconcileResultError('my_reconcile', None)",
        "raise errors.ReconcileMissingError('send_email', 'toolu_1')",
        "raise errors.CrashError('child died of signal {signal}, not SIGKILL', signal=15)",
    ):
        print("=== " + lang)
        assert shell.run_cell(cell).error_in_exec is not None
# an error whose words cannot be said (its data taken away) still shows its traceback
shell.run_cell("e = errors.ReconcileMissingError('refund', 'toolu_9')")
shell.run_cell("e.data = {}")
print("=== broken")
assert shell.run_cell("raise e").error_in_exec is not None
"""
    out = subprocess.run(
        [sys.executable, "-c", program], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=True
    ).stdout
    ansi = re.compile(r"\x1b\[[0-9;]*m")
    out, broken = ansi.sub("", out).split("=== broken", 1)
    assert "ReconcileMissingError: the checkpoint has a pending refund call (toolu_9)" in broken
    assert "Custom TB Handler failed" not in out + broken
    ko, en = out.split("=== ko", 1)[1].split("=== en", 1)
    for english, korean in (
        ("no strategy named 'rerun_'; did you mean 'rerun'?", "이름이 'rerun_'인 전략은 없습니다. 'rerun'을 뜻했나요?"),
        ("my_reconcile returned None, not a Checkpoint", "my_reconcile이 Checkpoint가 아니라 None을 돌려주었습니다"),
        ("has a pending send_email call (toolu_1)", "대기 중인 send_email 호출(toolu_1)이 있는데"),
        ("child died of signal 15, not SIGKILL", "시그널 15번으로 죽었습니다"),
    ):
        assert korean in ko and english not in ko
        assert english in en and korean not in en
    for error in ("UnknownStrategyError", "ReconcileResultError", "ReconcileMissingError", "CrashError"):
        assert f"{error}: " in ko and f"{error}: " in en  # IPython's traceback still names the error


def test_a_checks_message_says_a_core_error_the_learners_code_raised_in_korean(korean: None) -> None:
    """A check that quotes the learner's exception quotes a core error (resume with no reconcile) in Korean."""
    from resumable_core.course.checks.support import error_text
    from resumable_core.errors import ReconcileMissingError

    said = error_text(ReconcileMissingError("send_email", "toolu_1"))
    assert said.startswith("ReconcileMissingError: 체크포인트에 대기 중인 send_email 호출(toolu_1)이 있는데")
    assert "no reconcile was given" not in said
    broken = ReconcileMissingError("refund", "toolu_9")
    broken.data = {}  # the learner's code may change what it raises: said as it says itself, never a KeyError
    assert error_text(broken) == f"ReconcileMissingError: {broken}"
