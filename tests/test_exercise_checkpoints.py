"""lab/exercise_checkpoints.py and lab/formative.py: checkpoints A to F come from real crashed runs; D-F give feedback."""

from __future__ import annotations

import pytest

import resumable_core as rc
from resumable_core import lab
from resumable_core.lab.exercise_checkpoints import (
    ACTIONS,
    FIXTURE_DIR,
    FORMATIVE,
    NAMES,
    exercise_run_folder,
    write_exercise_checkpoints,
)
from resumable_core.lab.formative import RIGHT_ACTIONS


@pytest.mark.slow
def test_regenerating_the_fixtures_gives_the_committed_files_migrated(tmp_path):
    """Crashing the scenarios again reproduces checkpoint_a.json … checkpoint_f.json (committed as version 1,
    kept as the migration's inputs) byte for byte once they are migrated and saved as version 2."""
    paths = write_exercise_checkpoints(tmp_path / "new")
    assert [p.name for p in paths] == [f"checkpoint_{n.lower()}.json" for n in "ABCDEF"]
    for name, path in zip("ABCDEF", paths, strict=True):
        migrated = tmp_path / path.name
        rc.save_checkpoint(lab.load_exercise_checkpoint(name), migrated)
        assert path.read_bytes() == migrated.read_bytes(), path.name


def test_checkpoint_a_is_a_finished_run():
    """A: nothing pending and the last message is the assistant's plain reply: finished, not 'after save point B'."""
    cp = lab.load_exercise_checkpoint("A")
    assert cp.pending_tool_use is None and cp.is_finished()
    assert cp.messages[-1]["role"] == "assistant"


def test_checkpoint_b_has_a_read_only_call_pending():
    """B: read_file of meeting-08-25.md is pending."""
    pending = lab.load_exercise_checkpoint("B").pending_tool_use
    assert pending is not None and (pending.name, pending.input) == ("read_file", {"path": "meeting-08-25.md"})


def test_checkpoint_c_has_a_send_pending_that_already_happened(tmp_path):
    """C: send_email is pending, and recreating the crash shows the email already in the outbox."""
    cp, box = exercise_run_folder("C", tmp_path)
    assert cp == lab.load_exercise_checkpoint("C")
    assert cp.pending_tool_use is not None and cp.pending_tool_use.name == "send_email"
    assert len(box.world.sent_emails()) == 1


def test_counters_grow_from_c_to_a():
    """The fixtures carry real turn and token counts."""
    a, b, c = (lab.load_exercise_checkpoint(n) for n in "ABC")
    assert a.turns > b.turns > c.turns > 0
    assert a.tokens_used > b.tokens_used > c.tokens_used > 0


def test_an_unknown_checkpoint_name_is_refused():
    """Only A to F exist; another name is a ValueError naming them."""
    with pytest.raises(ValueError, match="A, B, C, D, E, F"):
        lab.load_exercise_checkpoint("G")


def test_checkpoint_d_has_a_send_pending_that_never_ran(tmp_path):
    """D: send_email is pending as in C, but recreating the crash shows an empty outbox."""
    cp, box = exercise_run_folder("D", tmp_path)
    assert cp == lab.load_exercise_checkpoint("D")
    assert cp.pending_tool_use is not None and cp.pending_tool_use.name == "send_email"
    assert box.world.sent_emails() == []


def test_checkpoint_e_is_save_a_of_list_dir():
    """E: killed during save B of list_dir, the file on disk is save A's: list_dir pending, no tool_result."""
    cp = lab.load_exercise_checkpoint("E")
    assert cp.pending_tool_use is not None and cp.pending_tool_use.name == "list_dir"
    assert cp.turns == 1 and cp.messages[-1]["role"] == "assistant"


def test_checkpoint_f_lost_its_final_answer():
    """F: killed during save A of the final answer: the turn is charged, the last message is a tool_result."""
    a, f = lab.load_exercise_checkpoint("A"), lab.load_exercise_checkpoint("F")
    assert f.pending_tool_use is None and not f.is_finished()
    assert f.messages[-1]["role"] == "user" and f.messages[-1]["content"][0]["type"] == "tool_result"
    assert f.turns == a.turns and len(f.messages) == len(a.messages) - 1


def test_formative_checkpoints_differ_from_the_graded_ones():
    """D, E and F come from other crash points or tools than A, B and C: no two files are alike."""
    files = [(FIXTURE_DIR / f"checkpoint_{n.lower()}.json").read_bytes() for n in NAMES]
    assert len(set(files)) == len(NAMES)


@pytest.mark.parametrize("name", FORMATIVE)
def test_formative_check_confirms_the_right_action(name, capsys):
    """The right action returns True and says why, on stdout only."""
    right, why = RIGHT_ACTIONS[name]
    assert lab.formative_check(name, right) is True
    out = capsys.readouterr()
    assert out.out.startswith(f"Checkpoint {name}: right, {right}.") and why in out.out and out.err == ""


@pytest.mark.parametrize("name", FORMATIVE)
def test_formative_check_names_what_each_wrong_action_misread(name, capsys):
    """Every wrong action returns False with its own explanation, and does not give the right action away."""
    right, _ = RIGHT_ACTIONS[name]
    messages = set()
    for action in ACTIONS:
        if action == right:
            continue
        assert lab.formative_check(name, action) is False
        out = capsys.readouterr().out
        assert out.startswith(f"Checkpoint {name}: not {action}. It misreads the file: ")
        assert right not in out, f"{action}'s feedback gives the answer away"
        messages.add(out)
    assert len(messages) == len(ACTIONS) - 1


def test_call_model_on_a_pending_call_is_told_the_run_is_not_finished(capsys):
    """Choosing call_model with a call pending is told that an unanswered tool_use means the run is not finished."""
    lab.formative_check("D", "call_model")
    assert "a tool_use with no tool_result after it is pending: the run is not finished" in capsys.readouterr().out


def test_formative_check_explains_blank_and_unknown_answers(capsys):
    """A blank answer or a name that is no action is explained with the choices, never raised."""
    assert lab.formative_check("e", None) is False
    assert "no answer written yet" in capsys.readouterr().out
    assert lab.formative_check("E", "rerun") is False
    assert "'rerun' is not an action. Choose one of finished_no_call" in capsys.readouterr().out


def test_formative_check_refuses_the_graded_checkpoints():
    """A, B and C are graded: a formative check on them is a ValueError naming D, E, F."""
    with pytest.raises(ValueError, match="D, E, F"):
        lab.formative_check("A", "call_model")


def test_the_reconcile_checks_use_the_labs_actions():
    """The graded level 1 reads its action names from the lab: one list, not two."""
    from resumable_core.course.checks import reconcile

    assert reconcile.ACTIONS is ACTIONS
