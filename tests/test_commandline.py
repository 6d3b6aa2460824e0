"""The learner's commands in the learner's language: argparse's own words and errors, each command's help."""

from __future__ import annotations

import argparse
import re

import pytest
import wcwidth

from resumable_core import __main__ as cli
from resumable_core.course import self_check
from resumable_core.lab import commandline
from resumable_core.lab.i18n import LAB

ENGLISH_WORDS = ("usage:", "positional arguments", "options:", "show this help message and exit")
"""argparse's own words in a help, as it writes them in English."""
LEARNER_COMMANDS = ("matrix", "simulate", "fixtures", "check")
"""The subcommands the student kit holds."""
ASCII_WORD = re.compile(r"[A-Za-z][A-Za-z_.<>/+-]*")
HANGUL = re.compile(r"[가-힣]")


@pytest.fixture
def korean(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESUMABLE_LANG", "ko")


def _subcommand(name: str) -> argparse.ArgumentParser:
    top = cli.build_parser()
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def _code_words(parser: argparse.ArgumentParser) -> set[str]:
    """The words of a help that are code: the command, option names, metavars, choices, defaults' values."""
    words = set(ASCII_WORD.findall(parser.prog)) | set(ASCII_WORD.findall(self_check.EXAMPLE))
    for action in parser._actions:
        for text in (*action.option_strings, str(action.metavar or ""), str(action.dest).upper()):
            words |= set(ASCII_WORD.findall(text))
    return words


def test_korean_check_help_has_no_english_sentence(korean: None) -> None:
    """`check --help` in Korean: every English word left is code (the command, an option, a metavar, the example path)."""
    parser = _subcommand("check")
    text = parser.format_help()
    english = [w for w in ASCII_WORD.findall(text) if w not in _code_words(parser)]
    assert english == [], text
    assert "사용법: python -m resumable_core check" in text and "위치 인자:" in text and "옵션:" in text
    assert "이 도움말을 보여 주고 끝냅니다" in text


def test_a_planted_english_help_is_caught(korean: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The test above fails on a help text left in English (here --all's)."""
    monkeypatch.setattr(self_check, "_", lambda message: message if message.startswith("run the hidden") else "테스트")
    parser = _subcommand("check")
    english = [w for w in ASCII_WORD.findall(parser.format_help()) if w not in _code_words(parser)]
    assert {"run", "hidden", "tests"} <= set(english)


@pytest.mark.parametrize("name", LEARNER_COMMANDS)
def test_every_learner_command_speaks_korean(korean: None, name: str) -> None:
    """matrix, simulate, fixtures and check: argparse's words, the description and every option's help are Korean."""
    parser = _subcommand(name)
    text = parser.format_help()
    assert not [w for w in ENGLISH_WORDS if w in text], text
    assert HANGUL.search(parser.description or "")
    for action in parser._actions:  # -h's help is argparse's: the formatter translates it (checked above)
        if not isinstance(action, argparse._HelpAction):
            assert HANGUL.search(action.help or ""), f"{name}: {action.option_strings or action.dest}"
    top = cli.build_parser().format_help()
    assert not [w for w in ENGLISH_WORDS if w in top] and HANGUL.search(top)


@pytest.mark.parametrize("name", LEARNER_COMMANDS)
def test_english_help_keeps_argparses_words(name: str) -> None:
    """Without RESUMABLE_LANG the help is argparse's English: usage, headings and -h's help as it writes them."""
    text = _subcommand(name).format_help()
    assert text.startswith("usage: python -m resumable_core ") and "options:" in text
    assert "show this help message and exit" in text and not HANGUL.search(text)


def test_the_instructors_commands_stay_english(korean: None) -> None:
    """`grade` (not in the student kit) keeps argparse's English words, even with RESUMABLE_LANG=ko."""
    text = _subcommand("grade").format_help()
    assert text.startswith("usage: ") and "show this help message and exit" in text


def _error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        cli.build_parser().parse_args(argv)
    assert exited.value.code == 2
    return capsys.readouterr().err


def test_argparses_errors_are_korean(korean: None, capsys: pytest.CaptureFixture[str]) -> None:
    """A missing argument, a bad value inside "argument X: ..." and an unknown command read in Korean, code kept."""
    missing = _error(["check"], capsys)
    assert missing.startswith("사용법: ") and "check: 에러: 다음 인자를 주어야 합니다: NOTEBOOK" in missing
    assert "에러: 인자 --timeout: 잘못된 int 값: 'x'" in _error(["check", "--timeout", "x", "nb.ipynb"], capsys)
    unknown = _error(["nope"], capsys)
    assert "인자 command: 잘못된 선택: 'nope' (다음 중에서 고르세요: 'matrix'," in unknown
    assert "알 수 없는 인자: extra" in _error(["check", "nb.ipynb", "extra"], capsys)


def test_argparses_errors_stay_english_without_a_language(capsys: pytest.CaptureFixture[str]) -> None:
    """Without RESUMABLE_LANG the errors are argparse's own, word for word."""
    assert "check: error: the following arguments are required: NOTEBOOK" in _error(["check"], capsys)
    assert "error: argument --timeout: invalid int value: 'x'" in _error(["check", "--timeout", "x", "n"], capsys)


def test_an_error_no_template_reads_passes_unchanged(korean: None) -> None:
    """A message that is none of argparse's (a command's own, already translated) is left as it is."""
    assert commandline.translated("--tool과 --strategy를 주어야 합니다") == "--tool과 --strategy를 주어야 합니다"
    assert commandline.translated("argument --x: something new") == "인자 --x: something new"


@pytest.mark.parametrize("template", commandline.ERRORS)
def test_each_error_keeps_its_fields_in_korean(template: str) -> None:
    """Each of argparse's error templates has the same %-fields in Korean (the catalog test checks only {fields})."""
    korean = LAB.gettext(template, "ko")
    assert korean != template and sorted(commandline.FIELD.findall(korean)) == sorted(
        commandline.FIELD.findall(template)
    )


def test_a_korean_usage_wraps_and_indents_by_display_width(korean: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """simulate's usage: every line fits the width on screen, and each continuation starts under the first option."""
    monkeypatch.setenv("COLUMNS", "80")
    lines = _subcommand("simulate").format_usage().rstrip("\n").splitlines()
    assert len(lines) > 1
    assert all(wcwidth.wcswidth(line) <= 78 for line in lines), lines
    first_option = wcwidth.wcswidth(lines[0][: lines[0].index("[-h]")])
    assert all(wcwidth.wcswidth(line) - wcwidth.wcswidth(line.lstrip()) == first_option for line in lines[1:]), lines


def test_korean_help_wraps_by_display_width(korean: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """An option's Korean help is wrapped to the terminal's width in columns, not in characters."""
    monkeypatch.setenv("COLUMNS", "60")
    lines = _subcommand("check").format_help().splitlines()
    assert all(wcwidth.wcswidth(line) <= 60 for line in lines if line.startswith("  ")), lines


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_simulate_refuses_a_count_below_its_least(
    lang: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--resumers 0 (and --max-turns 0, --crashes -1) is a usage error naming the option, not a run of 0 resumers."""
    monkeypatch.setenv("RESUMABLE_LANG", lang)
    said = {
        "en": "error: argument --resumers: '0' is not a whole number of at least 1",
        "ko": "에러: 인자 --resumers: '0'은 1 이상의 정수가 아닙니다",
    }
    cell = ["simulate", "--crash-at", "after_tool", "--scenario", "send_email", "--strategy", "rerun"]
    assert said[lang] in _error([*cell, "--resumers", "0"], capsys)
    assert "--max-turns: '0'" in _error([*cell, "--max-turns", "0"], capsys)
    assert "--crashes: '-1'" in _error([*cell, "--crashes", "-1"], capsys)
    assert "--resumers: 'x'" in _error([*cell, "--resumers", "x"], capsys)


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_simulate_without_a_scenario_names_its_option(
    lang: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """simulate with no scenario says --scenario is required (the option's name; --tool is only its alias)."""
    monkeypatch.setenv("RESUMABLE_LANG", lang)
    with pytest.raises(SystemExit) as exited:
        cli.main(["simulate", "--crash-at", "after_tool", "--strategy", "rerun"])
    said = {"en": "--scenario and --strategy are required", "ko": "--scenario와 --strategy를 주어야 합니다"}
    assert exited.value.code == 2 and said[lang] in capsys.readouterr().err


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_fixtures_into_a_folder_it_cannot_make_is_one_line(
    lang: str, tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """fixtures --out under a file: one line naming the folder, exit 1, no traceback."""
    monkeypatch.setenv("RESUMABLE_LANG", lang)
    (tmp_path / "file").write_text("")
    out = tmp_path / "file" / "fixtures"
    assert cli.main(["fixtures", "--out", str(out)]) == 1
    said = {"en": f"fixtures: error: cannot write to {out}: ", "ko": f"fixtures: 에러: {out}에 쓸 수 없습니다: "}
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and said[lang] in err


@pytest.mark.parametrize("argv", [["--help"], ["check", "nb.ipynb"]])
def test_a_language_the_kit_does_not_speak_is_one_line_naming_the_fix(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """RESUMABLE_LANG=kr: one line naming the setting and its choices, exit 2, no traceback."""
    monkeypatch.setenv("RESUMABLE_LANG", "kr")
    assert cli.main(argv) == 2
    assert capsys.readouterr().err == (
        "python -m resumable_core: error: RESUMABLE_LANG='kr' is not a language of this kit: set it to one of en, ko\n"
    )
