"""`python -m resumable_core check NOTEBOOK`: an exercise's visible tests on a fresh kernel, whole messages, what next."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from resumable_core.__main__ import main as cli
from resumable_core.course import self_check
from resumable_core.course.grading.steps.workspace import DEFAULT_TIMEOUT

ROOT = Path(__file__).resolve().parents[1]
# Longer than the ~80 characters nbgrader's validate keeps, with an end to look for.
LONG_REASON = (
    "double(21) returned 21, not 42: the function must return twice its argument; read the text "
    "above the answer cell once more before you try again (END OF MESSAGE)"
)
RIGHT = "def double(x):\n    return 2 * x"
WRONG = "def double(x):\n    return x"


def _cell(kind: str, source: str, grade_id: str, *, grade: bool = False, solution: bool = False, points: int = 0):
    make = nbformat.v4.new_code_cell if kind == "code" else nbformat.v4.new_markdown_cell
    meta = {"grade": grade, "grade_id": grade_id, "locked": not solution, "schema_version": 3, "solution": solution}
    if grade:
        meta["points"] = points
    return make(source, metadata={"nbgrader": meta}, id=grade_id)


def exercise(tmp_path: Path, answer: str, *extra_tests) -> Path:
    """A small exercise as nbgrader releases one: setup, an answer, a visible test, a hidden one, a written answer."""
    test = f"# double doubles its argument.\nif double(21) != 42:\n    raise AssertionError({LONG_REASON!r})"
    nb = nbformat.v4.new_notebook(
        cells=[
            _cell("code", "FACTOR = 2", "setup"),
            _cell("code", answer, "double", solution=True),
            _cell("code", test, "test_double", grade=True, points=2),
            *extra_tests,
            _cell("code", "# Hidden at release: more numbers.", "test_more", grade=True, points=1),
            _cell("markdown", "YOUR ANSWER HERE", "why", grade=True, solution=True, points=3),
        ],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    )
    path = tmp_path / "double.ipynb"
    nbformat.write(nb, path)
    return path


def test_the_check_times_cells_out_as_grading_does() -> None:
    """The check's per-cell timeout is grading's default one."""
    assert self_check.CELL_TIMEOUT == DEFAULT_TIMEOUT


def test_the_check_caps_memory_as_grading_does() -> None:
    """The check's memory cap is grading's default one."""
    from resumable_core.course.grading.isolation import Limits

    assert Limits().memory == self_check.MEMORY_CAP


def test_the_check_warns_at_gradings_output_cap() -> None:
    """The check's output cap is the one grading keeps of an executed notebook."""
    from resumable_core.course.grading.steps.execute import SandboxedExecute

    assert self_check.OUTPUT_CAP == SandboxedExecute().result_cap == 16 << 20


def test_outputs_near_the_cap_are_warned_of() -> None:
    """Outputs over half the cap warn, in MiB, and say to print less; far under it nothing is said."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(x)")])
    nb.cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text="x" * (9 << 20))]
    lines, over = self_check.output_warning(nb, "make check")
    assert not over and "9.0 MiB, near the 16 MiB" in " ".join(lines) and "print less" in " ".join(lines)
    nb.cells[0].outputs[0].text = "x"
    assert self_check.output_warning(nb, "make check") == ([], False)


@pytest.mark.slow
def test_outputs_over_the_cap_fail_the_check_and_say_print_less(tmp_path: Path) -> None:
    """A right answer that prints 17 MiB: the check fails, names the cap and the cell, and never says submit."""
    flood = _cell("code", "for _ in range(17 * 1024):\n    print('x' * 1023)", "noisy")
    path = exercise(tmp_path, RIGHT, flood)
    text, passed = self_check.run_check(path)
    assert not passed and "passed  test_double (2 pt)" in text
    assert "over the 16 MiB of output grading keeps" in text and "cell 3, the one that passes it" in text
    assert "print less" in text and "submit" not in text


@pytest.mark.slow
def test_a_passing_notebook_exits_0_and_says_submit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every visible test passes: exit 0, each test named with its points, then submit and the hand-graded answer."""
    path = exercise(tmp_path, RIGHT)
    assert cli(["check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "passed  test_double (2 pt): double doubles its argument." in out
    assert "hidden  test_more (1 pt)" in out and "1 of 1 visible tests pass (2 pt of 2 pt)." in out
    assert f"submit {path}" in out
    assert "Written answer why (NOT WRITTEN YET, 3 pt): graded by hand." in out


@pytest.mark.slow
def test_a_failing_notebook_exits_1_with_the_whole_message(tmp_path: Path) -> None:
    """A failed test prints its whole message (longer than nbgrader validate's ~80 characters); stderr fails a test too."""
    noisy = _cell(
        "code", '# Writes to stderr.\nimport sys\nprint("oops", file=sys.stderr)', "test_quiet", grade=True, points=1
    )
    path = exercise(tmp_path, WRONG, noisy)
    done = subprocess.run(
        [sys.executable, "-m", "resumable_core", "check", str(path)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 1, done.stderr
    assert len(LONG_REASON) > 120 and f"AssertionError: {LONG_REASON}" in done.stdout
    assert "FAILED  test_double (2 pt)" in done.stdout and "FAILED  test_quiet (1 pt)" in done.stdout
    assert "wrote to stderr, and grading scores a test cell that does 0:" in done.stdout
    assert "0 of 2 visible tests pass (0 pt of 3 pt)." in done.stdout
    assert f"python -m resumable_core check {path}" in done.stdout.split("Next:")[1]


@pytest.mark.slow
def test_a_cell_past_the_timeout_is_interrupted_and_the_run_goes_on(tmp_path: Path) -> None:
    """An endless test cell fails at the timeout, as at grading, and the tests after it still run."""
    endless = _cell("code", "# Never ends.\nwhile True:\n    pass", "test_endless", grade=True, points=1)
    path = exercise(tmp_path, RIGHT, endless)
    text, passed = self_check.run_check(path, timeout=3)
    assert not passed
    assert "FAILED  test_endless (1 pt)" in text and "interrupted: the cell ran past the timeout" in text
    assert "passed  test_double (2 pt)" in text


@pytest.mark.slow
def test_a_kernel_that_dies_is_a_failure_that_says_so(tmp_path: Path) -> None:
    """An answer that ends the kernel's process: the check fails and says the kernel died, not a traceback."""
    path = exercise(tmp_path, "import os\nos._exit(3)")
    text, passed = self_check.run_check(path)
    assert not passed and "the kernel died while running the notebook" in text
    assert f"python -m resumable_core check {path}" in text


@pytest.mark.slow
def test_a_cell_that_appends_forever_is_named_and_ends_the_run(tmp_path: Path) -> None:
    """An answer that appends without end, under a 300 MB cap: the check names its cell and line, and stops there."""
    path = exercise(tmp_path, "xs = []\nwhile True:\n    xs.append(1)")
    text, passed = self_check.run_check(path, memory=300 << 20)
    assert not passed
    assert "cell 1 (answer double) used more than 300 MB" in text and "MemoryError" in text
    assert "----> 3     xs.append(1)" in text and "test_double" not in text


@pytest.mark.slow
def test_a_learner_error_names_its_line_and_a_failure_after_restart_has_no_traceback(tmp_path: Path) -> None:
    """A check's message names the learner's cell line that raised; FailedAfterRestart reads as CheckFailed does."""
    wrapped = (
        "# double raises nothing.\nfrom resumable_core.course.checks.support import CheckFailed, error_text\n"
        "try:\n    double(21)\nexcept Exception as e:\n    raise CheckFailed('double raised ' + error_text(e)) from None"
    )
    restart = "# after a restart.\nfrom resumable_core.course.checks.support import FailedAfterRestart\nraise FailedAfterRestart('x')"
    path = exercise(
        tmp_path,
        "def double(x):\n    return {}[x]",
        _cell("code", wrapped, "test_wrapped", grade=True, points=1),
        _cell("code", restart, "test_restart", grade=True, points=1),
    )
    text, _ = self_check.run_check(path)
    assert "double raised KeyError: 21 (Cell In[2], line 2: return {}[x])" in text
    after = text.split("test_restart")[1].split("passed")[0].split("FAILED")[0]
    assert "FailedAfterRestart: x" in after and "---->" not in after and "Cell In" not in after


@pytest.mark.slow
def test_the_blank_exercise_shows_each_checks_whole_message() -> None:
    """The released reconcile exercise, unanswered: exit 1, a check's full sentence, and the answer cell that raised."""
    text, passed = self_check.run_check(ROOT / "exercises" / "reconcile" / "reconcile.ipynb")
    assert not passed
    failed = [line.strip() for line in text.splitlines() if line.strip().startswith("CheckFailed: ")]
    assert failed and max(map(len, failed)) > 80, failed
    assert "(answer level1_actions): NotImplementedError" in text


def _bad_argument(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """The check's one-line error for ``path``; it must exit 2 and print nothing on stdout."""
    assert cli(["check", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1, err
    return err


def test_a_missing_file_is_one_line_naming_the_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A path that does not exist: exit 2, one line saying to give an exercise notebook."""
    err = _bad_argument(tmp_path / "nope.ipynb", capsys)
    assert "no such file" in err and "exercises/reconcile/reconcile.ipynb" in err


def test_a_folder_names_the_notebook_inside(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A folder holding an exercise: exit 2, one line naming the notebook in it."""
    exercise(tmp_path, RIGHT)
    err = _bad_argument(tmp_path, capsys)
    assert "is a folder" in err and str(tmp_path / "double.ipynb") in err


@pytest.mark.parametrize(
    ("content", "expected"),
    [("not json at all", "is not a Jupyter notebook"), ('{"cells": 1}', "is not a Jupyter notebook")],
    ids=["text", "json"],
)
def test_a_file_that_is_not_a_notebook_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, expected: str
) -> None:
    """A text file or JSON that is no notebook: exit 2, one line asking for an .ipynb file."""
    path = tmp_path / "x.ipynb"
    path.write_text(content)
    err = _bad_argument(path, capsys)
    assert expected in err and "give an .ipynb file" in err


def test_a_notebook_without_tests_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A notebook with no graded test cell (a lesson): exit 2, one line saying there is nothing to check."""
    path = tmp_path / "lesson.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")]), path)
    assert "has no graded test cells" in _bad_argument(path, capsys)


@pytest.mark.slow
def test_a_bad_argument_from_the_command_line_exits_2() -> None:
    """Through `python -m resumable_core check`, a missing file exits 2 with one line on stderr."""
    done = subprocess.run(
        [sys.executable, "-m", "resumable_core", "check", "exercises/nope.ipynb"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "check: exercises/nope.ipynb: no such file; give the path of an exercise notebook, "
        "e.g. exercises/reconcile/reconcile.ipynb"
    ]


@pytest.mark.slow
def test_a_syntax_error_in_an_answer_is_reported_before_the_tests(tmp_path: Path) -> None:
    """An answer Python cannot read is the report's first line after the title, before the NameErrors it causes."""
    path = exercise(tmp_path, "def double(x)\n    return 2 * x")
    text, passed = self_check.run_check(path)
    lines = text.splitlines()
    assert not passed and lines[2].startswith("Fix this first: Python cannot read this cell")
    assert "answer double" in lines[3] and "SyntaxError" in lines[3]
    assert lines.index(lines[3]) < next(i for i, ln in enumerate(lines) if "test_double" in ln)


def test_the_command_to_run_again_is_the_one_the_learner_has(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """make check's own command when it ran the check; else this interpreter as a path from here, or python."""
    path = Path("exercises/reconcile/reconcile.ipynb")
    monkeypatch.setenv(self_check.COMMAND_VARIABLE, "make check NB={path}")
    assert self_check.check_command(path) == f"make check NB={path}"
    monkeypatch.delenv(self_check.COMMAND_VARIABLE)
    monkeypatch.setattr(sys, "executable", str(tmp_path / ".venv" / "bin" / "python"))
    monkeypatch.chdir(tmp_path)
    assert self_check.check_command(path) == f".venv/bin/python -m resumable_core check {path}"
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # the interpreter is not under the current folder
    assert self_check.check_command(path) == f"python -m resumable_core check {path}"


def _source_of(tmp_path: Path, released: Path, hidden: str) -> Path:
    """The nbgrader source of ``released`` under ``tmp_path/solutions``: its hidden test cell holds ``hidden``."""
    nb = nbformat.read(released, as_version=4)
    for cell in nb.cells:
        if cell.metadata["nbgrader"]["grade_id"] == "test_more":
            cell.source += f"\n### BEGIN HIDDEN TESTS\n{hidden}\n### END HIDDEN TESTS"
    source = tmp_path / "solutions" / released.stem / released.name
    source.parent.mkdir(parents=True)
    nbformat.write(nb, source)
    return source


@pytest.mark.slow
def test_check_all_runs_the_hidden_tests_and_reports_every_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--all puts each test cell's whole source back (from solutions/) and reports the hidden test too."""
    (tmp_path / "ex").mkdir()
    released = exercise(tmp_path / "ex", RIGHT)
    _source_of(
        tmp_path, released, 'if double(0.5) != 1:\n    raise AssertionError("halves double to a whole (HIDDEN)")'
    )
    monkeypatch.setattr(self_check, "SOURCE_NOTEBOOKS", tmp_path / "solutions")
    text, passed = self_check.run_check(released, every=True)
    assert passed, text
    assert "every test, the hidden ones included," in text and "passed  test_more (1 pt)" in text
    assert "2 of 2 tests (hidden ones included) pass (3 pt of 3 pt)." in text and "hidden  " not in text
    visible_only, _ = self_check.run_check(released)
    assert "hidden  test_more (1 pt)" in visible_only

    released.write_text(released.read_text().replace("2 * x", "x + x if isinstance(x, int) else x"))
    text, passed = self_check.run_check(released, every=True, command="make check NB={path} ALL=1")
    assert not passed and "FAILED  test_more (1 pt)" in text and "halves double to a whole (HIDDEN)" in text


def _bonus_notebook(bonus_answer: str):
    """An executed exercise whose optional bonus (grade_id ``bonus_...``) failed, with ``bonus_answer`` in its answer cell."""
    failed = nbformat.v4.new_output("error", ename="CheckFailed", evalue="the bonus failed", traceback=[])
    bonus = _cell("code", "# Triples too.\ncheck(triple)", "bonus_triple", grade=True, points=2)
    bonus.outputs = [failed]
    return nbformat.v4.new_notebook(
        cells=[
            _cell("code", RIGHT, "double", solution=True),
            _cell("code", "# double doubles its argument.\nassert double(2) == 4", "test_double", grade=True, points=1),
            _cell("code", bonus_answer, "triple", solution=True),
            bonus,
        ]
    )


def test_an_untouched_bonus_reads_optional_not_attempted(tmp_path: Path) -> None:
    """A bonus whose answer cell still raises NotImplementedError is no failure: it says what trying it would give."""
    nb = _bonus_notebook("def triple(x):\n    raise NotImplementedError()")
    text, passed = self_check.report(tmp_path / "x.ipynb", nb, "make check")
    assert passed and "FAILED" not in text
    assert "optional bonus_triple (2 pt): optional, not attempted; answering it can add 2 pt: Triples too." in text
    assert "1 of 1 visible tests pass (1 pt of 1 pt)." in text


def test_an_attempted_bonus_that_fails_is_a_failure(tmp_path: Path) -> None:
    """Once its answer cell is written, the bonus is graded like any test: a failure is FAILED."""
    nb = _bonus_notebook("def triple(x):\n    return x")
    text, passed = self_check.report(tmp_path / "x.ipynb", nb, "make check")
    assert not passed and "FAILED  bonus_triple (2 pt)" in text and "CheckFailed: the bonus failed" in text
