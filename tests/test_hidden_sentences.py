"""A hidden check hands back only a sentence it chose: the rule broken and what to reread, never its inputs, its
name or what the learner's code said while it ran; a visible check keeps the learner's own error text."""

from __future__ import annotations

import json
from typing import Any

import pytest

from resumable_core.course import release as course
from resumable_core.course.assignments import ASSIGNMENTS
from resumable_core.course.checks.support import HIDDEN_SENTENCE, FailedAfterRestart
from resumable_core.course.grading import reasons
from resumable_core.course.grading.errors import UnknownCheckError
from resumable_core.course.grading.inside import checker
from resumable_core.course.grading.recheck.plan import CheckCall, check_calls, planned_calls
from resumable_core.course.grading.steps import workers
from resumable_core.course.hidden import reconcile as hidden
from resumable_core.lab.i18n import LANGUAGES


def raises_its_arguments(cp: Any, tools: Any) -> Any:
    """A learner's reconcile whose error carries what it was given: the hidden scenario's pending call."""
    raise ValueError(f"got {cp.pending_tool_use!r} and {tools.names}")


def runs_the_call(cp: Any, tools: Any) -> Any:
    """A learner's reconcile that runs the pending call: the check's own message would list the calls executed."""
    pending = cp.pending_tool_use
    tools.execute(pending.name, pending.input)
    return cp


class _Loaded:
    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def loaded(self) -> list[dict[str, Any]]:
        return [
            {"cell": "answer", "error": "NameError: the learner's words", "kernel": "NameError: the learner's words"}
        ]

    def lookup(self, name: str) -> Any:
        return self.fn


def loaded_with(fn: Any) -> Any:
    """The learner's process as the checker sees it: ``fn`` under every name, and a cell that raised while loading."""
    return _Loaded(fn)


@pytest.mark.parametrize("fn", [raises_its_arguments, runs_the_call], ids=lambda f: f.__name__)
def test_a_failed_hidden_check_reaches_grades_csv_as_its_sentence_alone(fn):
    """The re-check's reason for a failed hidden cell, and then the row's, is the check's sentence: no hidden input
    (the pending call's tool and input), no check name, nothing of the learner's error or loading; the same check
    called outside a hidden block keeps the learner's error."""
    source = json.loads(course.notebook_path("reconcile").read_text(encoding="utf-8"))
    report = checker.recheck(source, "reconcile", loaded_with(fn), ["test_side_effect_tools"], timeout=60)
    sentence = getattr(hidden.check_other_side_effect_tools, HIDDEN_SENTENCE)()
    assert report == {"test_side_effect_tools": sentence} and report.visible_failures == []
    failed, _ = workers.recheck_outcome(["test_side_effect_tools"], report, None, report.visible_failures)
    assert failed == {"test_side_effect_tools": reasons.hidden_check_failed(sentence)}
    for secret in ("send_email", "team@example.com", "check_other_side_effect_tools", "learner's words", "got "):
        assert secret not in failed["test_side_effect_tools"]
    visibly = CheckCall(hidden.check_other_side_effect_tools, (("name", "reconcile"),))  # the kernel ran it too
    why, visible = checker.recheck_cell([visibly], loaded_with(fn), timeout=60)
    assert visible and why is not None and "send_email" in why  # the learner's own error, as the kernel showed it


def _fails_after_restart() -> None:
    raise FailedAfterRestart("the customer was refunded 2 times")


def test_a_failure_after_a_restart_names_no_check_and_claims_no_kernel_pass_for_a_hidden_one():
    """Hidden: the sentence alone. Visible: the check's words after a fresh start, no check's name."""
    hidden_call = CheckCall(_fails_after_restart, (), visible=False, sentence=lambda: "the rule; reread it")
    assert checker.recheck_cell([hidden_call], loaded_with(None), timeout=60) == ("the rule; reread it", False)
    why, visible = checker.recheck_cell([CheckCall(_fails_after_restart, ())], loaded_with(None), timeout=60)
    assert visible and why == reasons.failed_after_restart("the customer was refunded 2 times")
    worded = reasons.visible_check_disagreed(why)
    assert worded.endswith(": the customer was refunded 2 times") and "_fails_after_restart" not in worded
    assert "freshly started process" in worded and "patch" not in worded and "passed in" not in worded
    assert reasons.hidden_check_failed("the rule; reread it") == "a hidden check failed: the rule; reread it"


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_every_hidden_call_of_the_sources_has_a_fixed_catalogued_sentence(name, monkeypatch):
    """Each check a hidden block calls gives one sentence with no placeholder and no check name, short enough to be
    kept whole (workers.WHY_WIDTH), and its own in every language of the kit."""
    source = json.loads(course.notebook_path(name).read_text(encoding="utf-8"))
    calls = [c for cs in planned_calls(source, name).values() for c in cs if not c.visible]
    assert calls
    for call in calls:
        assert call.sentence is not None
        said = {}
        for lang in LANGUAGES:
            monkeypatch.setenv("RESUMABLE_LANG", lang)
            said[lang] = call.sentence()
            assert "{" not in said[lang] and call.check.__name__ not in said[lang]
            assert 20 < len(said[lang]) <= workers.WHY_WIDTH, said[lang]
        assert len(set(said.values())) == len(LANGUAGES), said


def test_a_hidden_block_calling_a_check_without_a_sentence_is_refused():
    """A check with no sentence of its own (a visible one) cannot be called from a hidden block: its text would leak."""
    cell = "### BEGIN HIDDEN TESTS\nchecks.check_checkpoint_a(RESUME_ACTION)\n### END HIDDEN TESTS\n"
    setup = "from resumable_core.course.checks import reconcile as checks\n"
    with pytest.raises(UnknownCheckError, match="sentence"):
        check_calls("reconcile", cell, [setup])
    assert check_calls("reconcile", cell.replace("### BEGIN HIDDEN TESTS\n", ""), [setup])[0].visible
