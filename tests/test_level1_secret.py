"""Level 1's answers appear nowhere a learner reads.

Level 1 of ``reconcile`` asks which resume action each of the exercise checkpoints A, B and C
needs, and is graded without feedback. So no lesson, no visible cell of an exercise, no message
of a visible check and no formative feedback may say what A, B or C holds or needs. A line that
names one of them (``checkpoint C``, ``load_exercise_checkpoint("B")``, ``# A:``) and, on the same
line, a fact that decides its action (finished, re-run, read_file, is_error, send_email...) is a
leak. The practice checkpoints D, E and F are for that: their feedback may explain them, and only them.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from resumable_core.course.assignments import ASSIGNMENTS
from resumable_core.lab import formative
from resumable_core.lab.exercise_checkpoints import ACTIONS, FORMATIVE

ROOT = Path(__file__).resolve().parents[1]
GRADED = "ABC"

_NAMED = {
    letter: re.compile(
        rf"(?<!save point )(?<!save points )(?<!points A and )\b(?i:checkpoints?) {letter}\b"
        rf"|exercise_(?:checkpoint|run_folder)\(\s*['\"]{letter}['\"]"
        rf"|\bcp_{letter.lower()}\b"
        rf"|(?:^|[#\"'(]\s*|^\s*[-*]\s+){letter}(?::| \()"
    )
    for letter in GRADED
}
"""A line that names graded checkpoint ``letter`` (not save point A or B)."""

_FACTS = {
    "A": re.compile(r"finished|nothing (?:is )?pending|no (?:model |tool )?call|unchanged|returned as it is", re.I),
    "B": re.compile(r"re-?run|run (?:it )?again|read_file|read-only|executed (?:exactly )?once", re.I),
    "C": re.compile(
        r"is_error|status unknown|send_email|outbox|side.effect|not (?:be )?(?:run|sent|executed) again", re.I
    ),
}
"""What decides each graded checkpoint's action."""


def leaks(text: str, where: str) -> Iterator[str]:
    """Every line of ``text`` that names a graded checkpoint and a fact that decides its action."""
    for number, line in enumerate(text.splitlines(), start=1):
        for letter in GRADED:
            if _NAMED[letter].search(line) and _FACTS[letter].search(line):
                yield f"{where}:{number}: [{letter}] {line.strip()[:160]}"


def notebook_text(path: Path, *, visible_only: bool = False) -> str:
    """Every cell's source, one after another (the visible part only: hidden test blocks dropped)."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    text = "\n".join("".join(c["source"]) for c in cells)
    if visible_only:
        text = re.sub(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS", "", text, flags=re.S)
    return text


def strings_of(path: Path) -> str:
    """Every string literal of a module (its docstrings and messages: what ``check`` shows), one per line."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    found += [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr)]
    return "\n".join(found)


def feedback_text() -> str:
    """Everything the formative checks print, for every practice checkpoint and every answer."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for name in FORMATIVE:
            for action in (*ACTIONS, None, "not an action"):
                formative.formative_check(name, action)
    return out.getvalue()


@pytest.mark.parametrize("lesson", sorted(p.name for p in (ROOT / "lessons").glob("*.ipynb")))
def test_no_lesson_gives_level1_away(lesson):
    """No line of a lesson names checkpoint A, B or C beside what decides its action."""
    assert list(leaks(notebook_text(ROOT / "lessons" / lesson), lesson)) == []


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_no_visible_cell_of_an_exercise_gives_level1_away(assignment):
    """The released exercises' cells (hidden blocks aside) say nothing of A, B or C's action."""
    path = ROOT / "exercises" / assignment / f"{assignment}.ipynb"
    assert list(leaks(notebook_text(path, visible_only=True), path.name)) == []


SHIPPED_MODULES = sorted(
    p.relative_to(ROOT).as_posix()
    for p in [
        *(ROOT / "resumable_core" / "course" / "checks").glob("*.py"),
        *(ROOT / "resumable_core" / "lab").glob("*.py"),
    ]
)


@pytest.mark.parametrize("module", SHIPPED_MODULES)
def test_no_shipped_docstring_or_message_gives_level1_away(module):
    """The visible checks' and the lab's docstrings and messages (``check`` and ``help`` show them) say nothing of A, B or C's action."""
    assert list(leaks(strings_of(ROOT / module), module)) == []


def test_formative_feedback_speaks_only_of_the_practice_checkpoints():
    """What the practice checks print never names a graded checkpoint at all."""
    text = feedback_text()
    assert "Checkpoint D" in text  # the feedback was produced
    named = [line for line in text.splitlines() if any(_NAMED[letter].search(line) for letter in GRADED)]
    assert named == []


def test_the_scan_finds_the_leaks_it_is_for():
    """The scan is not blind: the three leaks the trial found, and a mention of save point B, are told apart."""
    planted = [
        "# Checkpoint A (finished): returned unchanged, no tool executed.",
        'print("B: read_file re-run once and answered")',
        "# Checkpoint C, recreated by a real crash: send_email is not run again; is_error says so.",
        'cp_a = load_exercise_checkpoint("A"); print("the run is FINISHED")',
        "send_email has the same pending call as checkpoint C after it ran",
        "- C: the email run, killed after ``send_email`` ran and before save point B",
    ]
    assert len(list(leaks("\n".join(planted), "planted"))) == len(planted)
    fine = [
        "crashed after the email was sent and before save point B (`after_tool`).",
        "Save points A and B: the checkpoint is written after the reply (A) and after the result (B).",
        "Which action does checkpoint B need? Write it in RESUME_ACTION.",
    ]
    assert list(leaks("\n".join(fine), "fine")) == []
