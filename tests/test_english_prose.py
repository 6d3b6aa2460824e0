"""What a Korean learner reads holds no English prose: `check`, `check --all`, the commands' help, `simulate`,
what the Korean releases' locked cells print, a lesson's failing check; and the kit's lessons README is a learner's.

Each text is counted by :func:`english_prose.english_runs`; the Korean lessons' outputs are counted
where tests/test_lessons.py executes them.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import posixpath
import re
from pathlib import Path

import nbformat
import pytest
from english_prose import english_lines, english_runs

from resumable_core.__main__ import main as cli
from resumable_core.course import notebooks, student_kit
from resumable_core.course import release as course
from resumable_core.course.i18n import COURSE

ROOT = Path(__file__).resolve().parents[1]
LEARNER_COMMANDS: tuple[list[str], ...] = ([], ["check"], ["simulate"], ["matrix"], ["fixtures"])


@pytest.fixture
def korean(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESUMABLE_LANG", "ko")


def _said(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with contextlib.suppress(SystemExit):  # --help exits
        cli(argv)
    out = capsys.readouterr()
    return out.out + out.err


def test_korean_with_names_and_quotes_is_not_prose() -> None:
    """Identifiers, paths, flags, acronyms, numbers and quoted English beside Korean words count nothing."""
    text = (
        "체크포인트 A: send_email을 SIGKILL 뒤 다시 실행 (lab.formative_check, --all, exercises/a/ko/a.ipynb, 3점)\n"
        '모델은 "I will send the email now"라고 답합니다. `python -m resumable_core check`를 실행하세요. Messages API'
    )
    assert english_runs(text) == []


def test_an_english_sentence_is_counted() -> None:
    """A sentence left in English, even inside a Korean line, is one run."""
    assert english_runs("실패  test_a (1점): graded against the action you chose. 다음") == [
        "graded against the action you chose"
    ]


def test_a_fenced_block_is_code_and_the_prose_after_it_counts() -> None:
    """Lines between two fence lines (what ``lab.verbatim`` prints: source, a model's reply) are not prose."""
    from resumable_core import lab

    with contextlib.redirect_stdout(io.StringIO()) as out:
        lab.verbatim("# the results go back in this order\nDone: I emailed the conclusion to the team.")
    assert english_runs(out.getvalue() + "the fence is closed here\n") == ["the fence is closed here"]


def test_a_line_of_english_words_and_no_korean_is_counted() -> None:
    """A label or a short sentence in English (fewer words than a run) is an English line; beside Korean it is not."""
    text = '--- checkpoint A\n--- 체크포인트 A\nlast message: role=assistant\n  send_email({"to": "x"}) id=toolu_1'
    assert english_runs(text) == []
    assert english_lines(text) == ["--- checkpoint A", "last message: role=assistant"]


def test_a_planted_english_translation_is_counted(korean: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A catalog entry whose Korean is English prose shows up in `check`'s words and is counted."""
    from resumable_core.course.self_check import next_steps

    english = "Next: every visible test passes; submit {path} as your instructor asks."
    assert english_runs(COURSE.gettext(english, "ko").format(path="x.ipynb")) == []
    monkeypatch.setitem(COURSE.translations("ko")._catalog, english, english)  # type: ignore[attr-defined] # gettext's own table
    said = "\n".join(next_steps(Path("x.ipynb"), nbformat.v4.new_notebook(), [], "check x.ipynb"))
    assert english_runs(said) == ["Next every visible test passes submit", "as your instructor asks"]


def _unsaid(message: ast.AST) -> list[str]:
    """The string literals (f-strings too) in an assert's or a raise's `message` that no `lab.say(...)` says."""
    if isinstance(message, ast.Call) and ast.unparse(message.func) == "lab.say":
        return []
    if isinstance(message, ast.JoinedStr) or (isinstance(message, ast.Constant) and isinstance(message.value, str)):
        return [ast.unparse(message)]
    return [found for child in ast.iter_child_nodes(message) for found in _unsaid(child)]


@pytest.mark.parametrize("lesson", sorted(ROOT.glob("lessons/*.ipynb")), ids=lambda p: p.name)
def test_a_lessons_failing_check_speaks_through_the_catalog(lesson: Path) -> None:
    """A lesson's assert or raise says its message with `lab.say("...")` (the catalog's, in the learner's language),
    never as an English literal: a learner who edits a cell, or whose live Claude answers otherwise, reads it."""
    messages, unsaid = 0, {}
    for cell in json.loads(lesson.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] != "code":
            continue
        code = [line for line in "".join(cell["source"]).splitlines() if not line.lstrip().startswith(("%", "!"))]
        for node in ast.walk(ast.parse("\n".join(code))):
            said = [node.msg] if isinstance(node, ast.Assert) and node.msg else []
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                said = [*node.exc.args, *(k.value for k in node.exc.keywords)]
            messages += len(said)
            if found := [literal for message in said for literal in _unsaid(message)]:
                unsaid[cell["id"]] = found
    assert messages and unsaid == {}


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_kits_lessons_readme_names_only_what_the_kit_holds(lang: str) -> None:
    """The kit's lessons/README.md (the Korean kit's is lessons/ko/README.md) speaks to a learner: every file it
    names, as a link or as code, is in that kit, never the repository's tests a learner lacks."""
    kit = student_kit.kit_contents(edition=student_kit.edition("student-kit", lang))
    named = set(re.findall(r"[\w./-]+\.(?:py|ipynb|md)\b", kit["lessons/README.md"].decode("utf-8")))
    missing = [p for p in named if not {posixpath.normpath(f"lessons/{p}"), posixpath.normpath(p)} & kit.keys()]
    assert named and missing == []


@pytest.mark.parametrize("command", LEARNER_COMMANDS, ids=lambda c: " ".join(c) or "resumable_core")
def test_a_learner_commands_help_is_korean(command: list[str], korean: None, capsys) -> None:
    """`python -m resumable_core [command] --help` in Korean: no English prose."""
    assert english_runs(_said([*command, "--help"], capsys)) == []


@pytest.mark.slow
@pytest.mark.parametrize("argv", [["reconcile"], ["resume"], ["--all", "postmortem"]], ids=" ".join)
def test_check_on_a_blank_korean_release_is_korean(argv: list[str], korean: None, capsys) -> None:
    """`check` (and `check --all`) on a blank Korean release: its report and the tests' descriptions are Korean."""
    *flags, assignment = argv
    said = _said(["check", *flags, str(ROOT / "exercises" / assignment / "ko" / f"{assignment}.ipynb")], capsys)
    assert "BEGIN HIDDEN TESTS" not in said
    assert english_runs(said) == []


@pytest.mark.slow
def test_simulate_tells_its_story_in_korean(korean: None, capsys) -> None:
    """`simulate`'s text output, one real crash and resume, is Korean."""
    said = _said(["simulate", "--crash-at", "after_tool", "--tool", "send_email", "--strategy", "rerun"], capsys)
    assert english_runs(said) == []


@pytest.mark.slow
@pytest.mark.parametrize("assignment", ["postmortem", "reconcile", "resume", "resume_skeleton"])
def test_a_korean_releases_locked_cells_print_korean(
    assignment: str, korean: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Korean release's locked cells, run in order with the source's answers as a learner's kernel runs them,
    print no English prose and no line of English alone (a label, a short sentence)."""
    released = json.loads(course.translated_path(assignment, "ko", ROOT, course.RELEASE_DIR).read_text("utf-8"))
    answers = {c["id"]: c for c in json.loads(course.translated_path(assignment, "ko").read_text("utf-8"))["cells"]}
    monkeypatch.chdir(tmp_path)
    names: dict[str, object] = {}
    printed = {}
    for cell in released["cells"]:
        nbgrader = cell["metadata"].get("nbgrader", {})
        if cell["cell_type"] != "code" or (nbgrader.get("grade") and not nbgrader.get("solution")):
            continue  # a test cell's words are test_korean_release's
        with contextlib.redirect_stdout(io.StringIO()) as out:
            exec(notebooks.source(answers[cell["id"]] if nbgrader.get("solution") else cell), names)
        if nbgrader.get("locked"):
            printed[cell["id"]] = out.getvalue()
    left = {cid: english_runs(text) + english_lines(text) for cid, text in printed.items()}
    assert {cid: found for cid, found in left.items() if found} == {}
