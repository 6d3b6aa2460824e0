"""lab.crash_test and lab.crash_test_journal: a reader's own resume and journal under real kills, tabled.

The resume tried is the resume exercise's solution, read from its source notebook (this file
holds none); the journals are written here, one that survives a torn append and one that does not.
"""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from resumable_core import lab
from resumable_core.course import notebooks, release
from resumable_core.course.checks import reconcile as reconcile_checks
from resumable_core.course.checks import resume as resume_checks
from resumable_core.course.checks.support import CheckFailed
from resumable_core.lab.crash_test import ONE_CALL_POINTS

# The module, not the function lab exports under the same name.
module = importlib.import_module("resumable_core.lab.crash_test")


@pytest.fixture(scope="module")
def solution_resume() -> Any:
    """The resume exercise's solution: its setup cell and its answer cell, run in one namespace."""
    namespace: dict[str, Any] = {}
    for cell in notebooks.read(release.notebook_path("resume")).cells:
        if notebooks.grade_id(cell) in ("setup", "resume"):
            exec(notebooks.source(cell), namespace)
    return namespace["resume"]


@pytest.mark.slow
def test_a_sound_resume_finishes_once_at_every_crash_point(solution_resume: Any) -> None:
    """The solution, crashed at every point of the email run: one email, finished, accepted, each row."""
    table = lab.crash_test(solution_resume)
    assert [r.crash_point for r in table.rows] == list(ONE_CALL_POINTS)
    assert all(r.killed and r.effects == 1 and r.finished and r.verdict == module.ACCEPTED for r in table.rows)
    assert {r.crash_point for r in table.rows if r.pending_at_crash == "send_email"} >= {"after_save_a", "after_tool"}
    html = table._repr_html_()
    assert html.count("<tr title=") == len(ONE_CALL_POINTS) and "fde2e1" not in html
    assert str(table).splitlines()[0].split()[:2] == ["crash", "point"]


@pytest.mark.slow
def test_the_reconcile_handed_decides_the_duplicates(solution_resume: Any) -> None:
    """With the production rerun handed as reconcile, the rows between the send and save B show two emails."""
    table = lab.crash_test(solution_resume, reconcile="rerun", crash_points=["after_save_a", "after_tool"])
    assert [r.effects for r in table.rows] == [1, 2]
    assert "fde2e1" in table._repr_html_()


@pytest.mark.slow
def test_a_broken_resume_is_shown_not_raised() -> None:
    """A resume that raises, one that returns nothing, and one that sends a dangling call: each verdict says so."""

    def raises(path: str, task: str, tools: Any, client: Any, *, reconcile: Any) -> Any:
        raise RuntimeError("not written yet")

    def returns_none(path: str, task: str, tools: Any, client: Any, *, reconcile: Any) -> Any:
        return None

    def sends_as_is(path: str, task: str, tools: Any, client: Any, *, reconcile: Any) -> Any:
        import resumable_core as rc

        cp = rc.load_checkpoint(path)
        assert cp is not None
        return client.messages.create(model=rc.model_id(), max_tokens=64, messages=cp.messages, tools=tools.schemas())

    (raised,) = lab.crash_test(raises, crash_points=["after_tool"]).rows
    assert raised.verdict == "resume raised RuntimeError: not written yet" and not raised.finished
    (nothing,) = lab.crash_test(returns_none, crash_points=["after_tool"]).rows
    assert nothing.verdict == "resume returned NoneType, not the final Checkpoint"
    (refused,) = lab.crash_test(sends_as_is, crash_points=["after_tool"]).rows
    assert refused.verdict.startswith("400: ") and "tool_result" in refused.verdict


def append_jsonl(path: str, record: dict) -> None:
    """A journal's append: one JSON line, flushed and fsynced."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())


def read_jsonl(path: str) -> list[dict]:
    """Its reader: a torn last line ignored, a bad line before it refused."""
    if not os.path.exists(path):
        return []
    lines = Path(path).read_text(encoding="utf-8").split("\n")
    records = []
    for i, line in enumerate(lines):
        try:
            records.append(json.loads(line)) if line else None
        except ValueError:
            if i == len(lines) - 1:
                break
            raise ValueError(f"record {i} is corrupt") from None
    return records


def rewrite_whole(path: str, record: dict) -> None:
    """A snapshot in disguise: every append rewrites the whole file in place."""
    records = json.loads(Path(path).read_text()) if os.path.exists(path) else []
    with open(path, "w", encoding="utf-8") as f:
        json.dump([*records, record], f)


def read_whole(path: str) -> list[dict]:
    """Its reader."""
    return json.loads(Path(path).read_text()) if os.path.exists(path) else []


def test_a_journal_killed_mid_append_reads_its_good_records() -> None:
    """A torn last record is ignored after the kill; appending after it, and a zeroed middle, are refused."""
    steps = lab.crash_test_journal(append_jsonl, read_jsonl).steps
    assert [s.read for s in steps[:2]] == ["3 records (turns [1, 2, 3])"] * 2
    assert steps[1].step.startswith("killed (SIGKILL) half-way through") and steps[1].size > steps[0].size
    assert steps[2].read.startswith("raised ValueError")  # the torn bytes now sit before a good record
    assert steps[3].read.startswith("raised ValueError") and "zeroed" in steps[3].step
    assert "<table" in lab.crash_test_journal(append_jsonl, read_jsonl)._repr_html_()


def test_a_rewriting_journal_loses_everything_to_the_kill() -> None:
    """The file rewritten in place: after the kill read_journal raises, where it read 3 records before."""
    steps = lab.crash_test_journal(rewrite_whole, read_whole).steps
    assert steps[0].read == "3 records (turns [1, 2, 3])"
    assert steps[1].read.startswith("raised JSONDecodeError") and steps[1].size < steps[0].size


def test_crash_test_and_its_default_reconcile_answer_no_check() -> None:
    """Handed in as the resume, crash_test fails the resume checks; its default reconcile fails reconcile's B."""
    with pytest.raises(CheckFailed):
        resume_checks.check_crash_after_tool(lab.crash_test)
    with pytest.raises(CheckFailed):
        reconcile_checks.check_checkpoint_b(module._status_unknown_for_every_call)
    source = Path(str(module.__file__)).read_text(encoding="utf-8")
    assert "messages.create" not in source and "def resume" not in source
