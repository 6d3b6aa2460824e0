"""The checks are fair and can fail: the visible and hidden checks on known strategies, checks that
still fail under ``python -O``, hidden blocks that call only hidden checks, the assignment registry,
and a sample class graded end to end with real nbgrader (``nbgrader autograde`` in a temporary copy
of the course).

The sample-class part is the heavy one (about a minute on 2 cores): one ``generate_assignment`` and
one ``autograde`` over every assignment and every student of the class. The ``reconcile`` samples whose
answers are all in tests/grading_samples.py's class (a wrong move or a forgotten ``pending_tool_use``
with the right level-1 actions) are graded per cell there, through ``grade``, not again here.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

# -- learners' code, as it would be typed into the release notebooks ----------------------------
# the same reconcile answers the grading command's sample class uses
from grading_samples import REAL_CORRECT as CORRECT
from grading_samples import REAL_IS_ERROR_ALL as IS_ERROR_ALWAYS
from grading_samples import REAL_RERUN as PRODUCTION_BUG
from test_resume_exercise import REPORT_SOLUTION  # the notebook's own resume_report, for the correct student

from resumable_core.course import release as course
from resumable_core.course.assignments import ASSIGNMENTS, REGISTRY
from resumable_core.course.checks import postmortem as checks_postmortem
from resumable_core.course.checks import reconcile as checks_reconcile
from resumable_core.course.checks import resume_skeleton as checks_skeleton
from resumable_core.course.checks.support import CheckFailed
from resumable_core.course.grading.recheck.plan import check_calls
from resumable_core.course.hidden import postmortem as hidden_postmortem
from resumable_core.course.hidden import reconcile as hidden_reconcile
from resumable_core.course.hidden import resume_skeleton as hidden_skeleton
from resumable_core.course.hidden import strategies as answer_strategies
from resumable_core.course.notebook_cells import graded_sources, setup_cells
from resumable_core.strategies import STRATEGIES

REPO = Path(__file__).resolve().parent.parent
COURSE = REPO / "resumable_core" / "course"


def strategy(name: str):
    """The reconcile function of strategy ``name``: the core's naive ones, or the answers (imported, registered)."""
    if name in {a.name for a in answer_strategies.ANSWERS}:
        return next(a.reconcile for a in answer_strategies.ANSWERS if a.name == name)
    return STRATEGIES[name].reconcile


LEDGER = """def reconcile_with_ledger(cp, tools):
    p = cp.pending_tool_use
    if p is None or tools.is_read_only(p.name) or tools.ledger is None or p.name not in tools:
        return reconcile(cp, tools)
    key = rc.idempotency_key(cp.run_id, p.id)
    cp.messages.append({"role": "user", "content": [rc.tool_result(p.id, tools.execute(p.name, p.input, idempotency_key=key))]})
    cp.pending_tool_use = None
    return cp
"""

GOOD_SAVE = """def save_state(state, path):
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        json.dump(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
"""

NAIVE_SAVE = """def save_state(state, path):
    with open(path, "w") as f:  # truncates the only good copy first
        json.dump(state, f)
"""

NO_FSYNC_SAVE = """def save_state(state, path):
    tmp = str(path) + ".tmp"
    with open(tmp, "w") as f:
        json.dump(state, f)
    os.replace(tmp, path)  # atomic, but nothing is forced to disk
"""

GOOD_LOAD = """def load_state(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        state = json.load(f)
    if state.get("version") != STATE_VERSION:
        raise StateVersionError(f"version {state.get('version')!r}")
    return state
"""

LENIENT_LOAD = """def load_state(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)  # any version is taken
"""

GOOD_APPEND = """def append_record(path, record):
    body = json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode()
    line = body + b"\\t" + format(zlib.crc32(body), "08x").encode() + b"\\n"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        data = os.pread(fd, os.fstat(fd).st_size, 0)
        end = data.rfind(b"\\n") + 1  # 0: not even the header is whole
        if end == 0:
            line = json.dumps(JOURNAL_HEADER, separators=(",", ":")).encode() + b"\\n" + line
        os.ftruncate(fd, end)
        os.pwrite(fd, line, end)
        os.fsync(fd)
    finally:
        os.close(fd)
    if end == 0:
        folder = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
        os.fsync(folder)
        os.close(folder)
"""

NO_FSYNC_APPEND = """def append_record(path, record):
    body = json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode()
    with open(path, "a+b") as f:
        f.seek(0)
        end = f.read().rfind(b"\\n") + 1
        f.truncate(end)
        head = b"" if end else json.dumps(JOURNAL_HEADER, separators=(",", ":")).encode() + b"\\n"
        f.write(head + body + b"\\t" + format(zlib.crc32(body), "08x").encode() + b"\\n")  # never fsynced
"""

GOOD_READ = """def read_journal(path):
    if not os.path.exists(path):
        return []
    with open(path, "rb") as f:
        *lines, torn = f.read().split(b"\\n")
    if not lines:
        return []
    if json.loads(lines[0]) != JOURNAL_HEADER:
        raise JournalError("not a version-1 journal")
    records = []
    for number, line in enumerate(lines[1:], 2):
        body, tab, crc = line.rpartition(b"\\t")
        if not tab or format(zlib.crc32(body), "08x").encode() != crc:
            raise JournalError(f"line {number} is damaged")
        records.append(json.loads(body))
    return records
"""

STRICT_READ = """def read_journal(path):
    if not os.path.exists(path):
        return []
    lines = open(path, "rb").read().splitlines()  # a torn last line is taken for damage
    records = []
    for line in lines[1:]:
        body, tab, crc = line.rpartition(b"\\t")
        if not tab or format(zlib.crc32(body), "08x").encode() != crc:
            raise JournalError("damaged")
        records.append(json.loads(body))
    return records
"""

GOOD_REPLAY = """def replay(records):
    for n, record in enumerate(records, 1):
        if record["turn"] != n:
            raise ValueError(f"record {n} is turn {record['turn']}")
    return {
        "turns": len(records),
        "tokens_used": sum(r["tokens"] for r in records),
        "messages": [copy.deepcopy(m) for r in records for m in r["messages"]],
    }
"""

JOURNAL = {"append_record": GOOD_APPEND, "read_journal": GOOD_READ, "replay": GOOD_REPLAY}

RESUME = """def resume(path, task, tools, client, *, reconcile, max_turns=rc.MAX_TURNS):
    cp = rc.load_checkpoint(path) or rc.new_checkpoint(task)
    if cp.task != task:
        raise rc.CheckpointTaskMismatchError(path, task, cp.task)
    if cp.is_finished():
        return cp
    if cp.pending_tool_use is not None:
        cp = reconcile(cp, tools)
        rc.save_checkpoint(cp, path)
    while cp.turns < max_turns:
        cp.turns += 1
        rc.save_checkpoint(cp, path)
        response = ask_model(client, cp, tools)
        cp.tokens_used += tokens_of(response)
        cp.messages.append(assistant_message(response))
        use = next((b for b in cp.messages[-1]["content"] if b["type"] == "tool_use"), None)
        cp.pending_tool_use = rc.PendingToolUse(id=use["id"], name=use["name"], input=use["input"]) if use else None
        rc.save_checkpoint(cp, path)
        if use is None:
            return cp
        try:
            output, is_error = tools.execute(use["name"], use["input"]), False
        except rc.ToolError as e:
            output, is_error = str(e), True
        cp = rc.answer_pending(cp, output, is_error=is_error)
        rc.save_checkpoint(cp, path)
    return cp
"""

REFUND = """def refund(tools, order_id, amount_cents):
    key = f"refund:{order_id}:{amount_cents}"
    for attempt in range(1, 6):
        try:
            return tools.execute("refund_payment", {"order_id": order_id, "amount_cents": amount_cents}, idempotency_key=key)
        except (rc.ToolTimeoutError, rc.ToolUnavailableError):
            if attempt == 5:
                raise
"""

WHY = "A is finished, B is read-only so re-run, C may have sent: is_error."


def actions(a: str, b: str, c: str) -> str:
    return f'RESUME_ACTION = {{"A": "{a}", "B": "{b}", "C": "{c}"}}\n'


RIGHT = actions("finished_no_call", "rerun_tool", "is_error_fallback")
CORRECT_TURN = re.sub(  # Level 3's answer, as the solution notebook has it
    r"\n *### (BEGIN|END) SOLUTION",
    "",
    "".join(
        next(
            c["source"]
            for c in json.loads(course.notebook_path("reconcile").read_text(encoding="utf-8"))["cells"]
            if c["metadata"].get("nbgrader", {}).get("grade_id") == "reconcile_turn"
        )
    ),
)

# Each student: {assignment: {grade_id: source}}; None = the release notebook handed in untouched.
CLASS: dict[str, dict[str, dict[str, str] | None]] = {
    "correct": {
        "reconcile": {"level1_actions": RIGHT, "level1_why": WHY, "reconcile": CORRECT, "reconcile_turn": CORRECT_TURN},
        "postmortem": {
            "root_cause": WHY,
            "fixed_reconcile": CORRECT,
            "refund": REFUND,
            "reconcile_with_ledger": LEDGER,
        },
        "resume_skeleton": {"save_state": GOOD_SAVE, "load_state": GOOD_LOAD, **JOURNAL},
        "resume": {"resume": RESUME, "resume_report": REPORT_SOLUTION},
    },
    "production_bug": {
        "reconcile": {
            "level1_actions": actions("call_model", "rerun_tool", "rerun_tool"),
            "level1_why": WHY,
            "reconcile": PRODUCTION_BUG,
        },
        "postmortem": {"root_cause": WHY, "fixed_reconcile": PRODUCTION_BUG},
        "resume_skeleton": {"save_state": NAIVE_SAVE, "load_state": GOOD_LOAD},
    },
    "is_error_always": {
        "reconcile": {
            "level1_actions": actions("finished_no_call", "is_error_fallback", "is_error_fallback"),
            "level1_why": WHY,
            "reconcile": IS_ERROR_ALWAYS,
        },
        "postmortem": {"root_cause": WHY, "fixed_reconcile": IS_ERROR_ALWAYS},
        "resume_skeleton": {
            "save_state": NO_FSYNC_SAVE,
            "load_state": LENIENT_LOAD,
            **JOURNAL,
            "append_record": NO_FSYNC_APPEND,
        },
    },
    "blank": {"reconcile": None, "resume": None},
}

# Expected autograded points per test cell, reasoned from which checks each student must fail.
RECONCILE_LEVEL_3 = {
    "test_turn_real_kills": 5,
    "test_turn_recorded_and_read_only": 1,
    "test_turn_receipts": 4,
    "test_turn_status_unknown": 4,
    "test_turn_api": 1,
}
FULL_RECONCILE = {
    "test_level1_A": 1,
    "test_level1_B": 1,
    "test_level1_C": 1,
    "test_reconcile_A": 1,
    "test_reconcile_B": 1,
    "test_reconcile_C": 1,
    "test_read_only_tools": 1,
    "test_side_effect_tools": 1,
    "test_unknown_tool": 1,
    "test_api_accepts": 1,
    "test_round_trip": 1,
    **RECONCILE_LEVEL_3,
}


NO_REFUND = {
    "test_refund_timeout": 0,
    "test_refund_refused": 0,
    "test_refund_kill": 0,
    "test_refund_keys": 0,
    "test_refund_hidden": 0,
}
"""Part 2 of the postmortem, its answer cell left as released."""


FULL_RESUME = {
    "test_crash_after_tool": 2,
    "test_crash_after_response": 1,
    "test_reconciled_state_saved": 1,
    "test_another_task_refused": 1,
    "test_every_crash_point": 2,
    "test_finished_run": 1,
    "test_refusals": 1,
    "test_turn_cap": 1,
    "test_second_crash": 1,
    "test_report_fresh_start": 2,
    "test_report_pending_notification": 3,
    "test_report_changed_doc": 3,
    "test_report_cancelled": 2,
    "test_report_every_kill": 3,
    "test_report_every_kill_then_change": 2,
    "test_report_record_vs_reality": 2,
    "test_report_cancelled_at_every_boundary": 1,
    "test_report_refusals": 2,
    "test_report_kills_in_your_run": 3,
}


FULL_SKELETON = {
    "test_round_trip": 1,
    "test_missing": 1,
    "test_version": 1,
    "test_kill_during_save": 2,
    "test_durable_steps": 1,
    "test_journal_round_trip": 2,
    "test_journal_version": 2,
    "test_torn_tail": 2,
    "test_corrupt_record": 2,
    "test_kill_during_append": 4,
    "test_append_durable": 2,
    "test_replay": 2,
}
JOURNAL_CELLS = (
    "test_journal_round_trip",
    "test_journal_version",
    "test_torn_tail",
    "test_corrupt_record",
    "test_kill_during_append",
    "test_append_durable",
    "test_replay",
)


def without(full: dict[str, int], *failing: str) -> dict[str, int]:
    return {k: (0 if k in failing else v) for k, v in full.items()}


EXPECTED: dict[str, dict[str, dict[str, int]]] = {
    "correct": {
        "reconcile": FULL_RECONCILE,  # 26
        "postmortem": {  # 19
            "test_incident": 2,
            "test_read_file_rerun": 1,
            "test_every_path": 1,
            "test_refund_timeout": 3,
            "test_refund_refused": 2,
            "test_refund_kill": 3,
            "test_refund_keys": 2,
            "test_refund_hidden": 3,
            "bonus_ledger": 2,
        },
        "resume_skeleton": FULL_SKELETON,  # 22
        "resume": FULL_RESUME,  # 34
    },
    "production_bug": {
        # A: the source course's "call the model"; C: re-run. Re-running send_email, the custom side-effect tools and the
        # unknown tool (which raises) fails; everything read-only, the API and the round trip pass; Level 3 is
        # left as released: 6.
        "reconcile": without(
            FULL_RECONCILE,
            "test_level1_A",
            "test_level1_C",
            "test_reconcile_C",
            "test_side_effect_tools",
            "test_unknown_tool",
            *RECONCILE_LEVEL_3,
        ),
        # Two emails in the incident and at after_tool; read_file is fine; Part 2 and the bonus were left as released: 1.
        "postmortem": {
            "test_incident": 0,
            "test_read_file_rerun": 1,
            "test_every_path": 0,
            **NO_REFUND,
            "bonus_ledger": 0,
        },
        # open(path, "w") truncates the good file before the kill; no temp file, no replace; the journal
        # left as released: 3.
        "resume_skeleton": without(FULL_SKELETON, "test_kill_during_save", "test_durable_steps", *JOURNAL_CELLS),
    },
    "is_error_always": {
        # Every side-effect and unknown-tool case passes; every read-only case fails (B, read-only tools);
        # Level 3 is left as released: 7.
        "reconcile": without(
            FULL_RECONCILE, "test_level1_B", "test_reconcile_B", "test_read_only_tools", *RECONCILE_LEVEL_3
        ),
        # One email; read_file answered with is_error makes the model ask again (an extra turn); every path
        # still supplies a tool_result and finishes; no Part 2, no bonus: 3.
        "postmortem": {
            "test_incident": 2,
            "test_read_file_rerun": 0,
            "test_every_path": 1,
            **NO_REFUND,
            "bonus_ledger": 0,
        },
        # Atomic replace survives the kill but nothing is fsynced; any version is loaded; the journal is
        # right but never fsynced: 4 + 14.
        "resume_skeleton": without(FULL_SKELETON, "test_version", "test_durable_steps", "test_append_durable"),
    },
    "blank": {
        "reconcile": without(FULL_RECONCILE, *FULL_RECONCILE),  # 0
        "resume": without(FULL_RESUME, *FULL_RESUME),  # 0
    },
}


# -- the checks on the kit's own strategies ------------------------------------------------------


@pytest.mark.slow
def test_conformance_passes_the_lessons_rule():
    """The lesson's by-effect reconcile (with and without ledger support) passes every reconcile check."""
    for name in ("by_effect", "by_effect_ledger"):
        assert hidden_reconcile.conformance(strategy(name)) == dict.fromkeys(hidden_reconcile.RECONCILE_CHECKS)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, failing",
    [
        ("rerun", {"checkpoint_c", "other_side_effect_tools", "unknown_tool"}),
        (
            "delete",
            {
                "checkpoint_b",
                "checkpoint_c",
                "other_read_only_tools",
                "other_side_effect_tools",
                "unknown_tool",
                "api_accepts",
                "round_trip",
            },
        ),
        (
            "none",
            {
                "checkpoint_b",
                "checkpoint_c",
                "other_read_only_tools",
                "other_side_effect_tools",
                "unknown_tool",
                "api_accepts",
                "round_trip",
            },
        ),
    ],
)
def test_conformance_fails_wrong_strategies(name, failing):
    """Blind re-run, delete and naive resume fail exactly the checks their bug breaks."""
    report = hidden_reconcile.conformance(strategy(name))
    assert {k for k, v in report.items() if v} == failing


def test_reconcile_that_returns_nothing_fails_with_a_clear_message():
    """A reconcile that forgets to return the checkpoint fails with a message saying so."""

    def no_return(cp, tools):
        strategy("by_effect")(cp, tools)

    with pytest.raises(CheckFailed, match="must return the reconciled Checkpoint"):
        checks_reconcile.check_checkpoint_b(no_return)


@pytest.mark.slow
def test_api_check_gives_no_point_for_a_call_left_dangling():
    """Leaving the dangling call in place fails the API check before any request, naming the lesson to reread."""
    with pytest.raises(CheckFailed, match=r"still unanswered.*'Resume naively: the API says no'"):
        hidden_reconcile.check_api_accepts(strategy("none"))


def test_level1_checks_take_only_a_documented_and_right_action():
    """A documented action passes the visible check; only the answer key's passes the hidden one."""
    right = {"A": "finished_no_call", "B": "rerun_tool", "C": "is_error_fallback"}
    for key in right:
        checks_reconcile.check_action_chosen(right, key)
        hidden_reconcile.check_action(right, key)
    wrong = {**right, "C": "rerun_tool"}
    checks_reconcile.check_action_chosen(wrong, "C")
    with pytest.raises(CheckFailed, match="is not the right action"):
        hidden_reconcile.check_action(wrong, "C")
    with pytest.raises(CheckFailed, match="choose one of"):
        checks_reconcile.check_action_chosen({"A": None}, "A")
    with pytest.raises(CheckFailed, match="must be a dict"):
        checks_reconcile.check_action_chosen(["finished_no_call"], "A")


@pytest.mark.slow
def test_postmortem_checks_separate_the_strategies():
    """The incident replay passes by_effect, fails the production re-run and delete; the ledger check needs receipts."""
    checks_postmortem.check_incident(strategy("by_effect"))
    checks_postmortem.check_read_file_rerun(strategy("by_effect"))
    checks_postmortem.check_ledger_incident(strategy("by_effect_ledger"))
    for name in ("rerun", "delete"):
        with pytest.raises(CheckFailed, match="2 emails"):
            checks_postmortem.check_incident(strategy(name))
    # delete drops the call: it is never answered (unique ids), or the model asks again (an extra turn)
    with pytest.raises(CheckFailed, match=r"never answered|extra turn|model calls"):
        checks_postmortem.check_read_file_rerun(strategy("delete"))
    with pytest.raises(CheckFailed, match="is_error"):
        checks_postmortem.check_ledger_incident(strategy("by_effect"))


@pytest.mark.slow
def test_every_crash_point_check_fails_the_production_rerun():
    """The postmortem's hidden sweep over every crash point catches the re-run's second email."""
    hidden_postmortem.check_every_crash_point(strategy("by_effect"))
    with pytest.raises(CheckFailed, match="2 emails in the outbox, expected 1"):
        hidden_postmortem.check_every_crash_point(strategy("rerun"))


def _functions(*sources: str) -> dict:
    ns: dict = {}
    exec(
        "import copy, json, os, zlib\nfrom pathlib import Path\nSTATE_VERSION = 1\nclass StateVersionError(ValueError):\n    pass\n"
        'JOURNAL_HEADER = {"format": "resumable-journal", "version": 1}\nclass JournalError(ValueError):\n    pass\n',
        ns,
    )
    for src in sources:
        exec(src, ns)
    return ns


def test_skeleton_checks_pass_a_durable_atomic_save():
    """A temp-file + fsync + os.replace + folder-fsync save with a version-checked load passes every check."""
    ns = _functions(GOOD_SAVE, GOOD_LOAD)
    save, load = ns["save_state"], ns["load_state"]
    checks_skeleton.check_state_round_trip(save, load)
    checks_skeleton.check_state_missing(load)
    checks_skeleton.check_state_version_refused(load, versions=[2])
    hidden_skeleton.check_other_versions_refused(load)
    hidden_skeleton.check_load_never_modifies(save, load)
    checks_skeleton.check_kill_during_save(save, load)
    hidden_skeleton.check_durable_steps(save)


def test_journal_checks_pass_another_correct_journal():
    """A journal written with os.pread/ftruncate/pwrite, not the solution's file object, passes every journal check."""
    ns = _functions(GOOD_APPEND, GOOD_READ, GOOD_REPLAY)
    append, read = ns["append_record"], ns["read_journal"]
    checks_skeleton.check_journal_round_trip(append, read)
    checks_skeleton.check_journal_version(read)
    checks_skeleton.check_torn_tail_ignored(read)
    checks_skeleton.check_corrupt_record_refused(read)
    checks_skeleton.check_kill_during_append(append, read)
    checks_skeleton.check_replay(ns["replay"])
    hidden_skeleton.check_other_journal_versions_refused(read)
    hidden_skeleton.check_read_journal_never_modifies(read)
    hidden_skeleton.check_torn_header(read)
    hidden_skeleton.check_other_corruptions_refused(read)
    hidden_skeleton.check_append_durable(append, read)
    hidden_skeleton.check_append_after_torn_header(append, read)
    hidden_skeleton.check_replay_rules(ns["replay"])


def test_journal_checks_catch_a_strict_reader_and_an_unsynced_append():
    """A reader that takes a torn last line for damage, and an append that never fsyncs, each fail their check."""
    ns = _functions(NO_FSYNC_APPEND, STRICT_READ)
    with pytest.raises(CheckFailed, match="read_journal raised"):
        checks_skeleton.check_torn_tail_ignored(ns["read_journal"])
    with pytest.raises(CheckFailed, match="fsync the journal"):
        hidden_skeleton.check_append_durable(ns["append_record"], _functions(GOOD_READ)["read_journal"])


def test_a_reader_that_misreads_a_torn_tail_is_pointed_to_the_journal_part():
    """A reader that drops a torn journal's records is told to reread the exercise's journal part, where torn lines are."""
    with pytest.raises(CheckFailed, match="reread Part 2 of this exercise, 'The other form: an append-only journal'"):
        checks_skeleton.check_torn_tail_ignored(lambda path: [])


def test_a_learner_error_without_a_message_reads_as_its_name():
    """A reconcile that raises a bare NotImplementedError reads "raised NotImplementedError", no dangling colon."""

    def reconcile(cp, tools):
        raise NotImplementedError()

    from resumable_core import load_checkpoint
    from resumable_core.course.checks.support import fresh_toolbox, run_reconcile
    from resumable_core.lab.exercise_checkpoints import FIXTURE_DIR

    cp = load_checkpoint(FIXTURE_DIR / "checkpoint_a.json")
    assert cp is not None
    with pytest.raises(CheckFailed) as failed:
        run_reconcile(reconcile, cp, fresh_toolbox())
    assert failed.value.reason == "reconcile raised NotImplementedError"


def test_kill_during_a_truncating_save_loses_the_state():
    """A save that opens the state file itself for writing is caught by the real SIGKILL mid-write."""
    ns = _functions(NAIVE_SAVE, GOOD_LOAD)
    with pytest.raises(CheckFailed, match=r"load_state raised|previous good state"):
        checks_skeleton.check_kill_during_save(ns["save_state"], ns["load_state"])


def test_kill_during_save_reports_how_the_child_ended(tmp_path):
    """kill_during_save says "killed mid-write" for a real write, "finished" for a save that writes nothing."""
    ns = _functions(GOOD_SAVE)
    state = checks_skeleton.sample_state()
    assert checks_skeleton.kill_during_save(ns["save_state"], tmp_path / "s.json", state) == "killed mid-write"
    assert checks_skeleton.kill_during_save(lambda state, path: None, tmp_path / "t.json", state) == "finished"
    assert not (tmp_path / "t.json").exists()

    def raising(state, path):
        raise OSError("disk full")

    assert (
        checks_skeleton.kill_during_save(raising, tmp_path / "u.json", state)
        == "failed in the child (OSError: disk full)"
    )


def test_durable_steps_catch_a_missing_fsync():
    """An atomic but unsynced save fails the durability check, naming the missing fsync."""
    with pytest.raises(CheckFailed, match="fsync"):
        hidden_skeleton.check_durable_steps(_functions(NO_FSYNC_SAVE)["save_state"])


def test_lenient_load_fails_the_version_check():
    """A load that takes any version fails; so does one that raises something other than ValueError."""
    with pytest.raises(CheckFailed, match="must be refused"):
        checks_skeleton.check_state_version_refused(_functions(LENIENT_LOAD)["load_state"])

    def wrong_error(path):
        raise RuntimeError("nope")

    with pytest.raises(CheckFailed, match="ValueError"):
        hidden_skeleton.check_other_versions_refused(wrong_error)


OPTIMIZED = """
import copy, json, os, sys, zlib
from pathlib import Path
from resumable_core.course.checks import reconcile, resume_skeleton
from resumable_core.course.checks.support import CheckFailed
from resumable_core.course.hidden import reconcile as hidden_reconcile
from resumable_core.course.hidden import resume_skeleton as hidden_skeleton
from resumable_core.strategies import STRATEGIES

JOURNAL_HEADER = {"format": "resumable-journal", "version": 1}
JournalError = ValueError
assert False, "only reached when assert statements run"  # stripped by -O: the script goes on
exec(sys.argv[1])
wrong = [
    lambda: reconcile.check_checkpoint_b(STRATEGIES["none"].reconcile),
    lambda: reconcile.check_checkpoint_c(STRATEGIES["rerun"].reconcile),
    lambda: hidden_reconcile.check_unknown_tool(STRATEGIES["rerun"].reconcile),
    lambda: hidden_reconcile.check_action({"C": "rerun_tool"}, "C"),
    lambda: resume_skeleton.check_state_version_refused(load_state),
    lambda: hidden_skeleton.check_durable_steps(save_state),
    lambda: resume_skeleton.check_torn_tail_ignored(read_journal),
    lambda: hidden_skeleton.check_append_durable(append_record, read_journal),
]
failed = []
for check in wrong:
    try:
        check()
    except CheckFailed as e:
        failed.append(e.reason)
print(json.dumps({"debug": __debug__, "failed": failed}))
"""


@pytest.mark.slow
def test_checks_still_fail_under_python_O():
    """Run with ``python -O`` (assert statements stripped), every check still fails a wrong answer."""
    answers = "\n".join([NO_FSYNC_SAVE, LENIENT_LOAD, NO_FSYNC_APPEND, STRICT_READ])
    proc = subprocess.run(
        [sys.executable, "-O", "-c", OPTIMIZED, answers], capture_output=True, text=True, timeout=300, cwd=REPO
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["debug"] is False
    assert len(result["failed"]) == 8, result


# -- which checks the notebooks call, and where they are defined -------------------------------

HIDDEN_BLOCK = re.compile(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", re.S)


def _source_notebook(assignment: str) -> dict:
    a = REGISTRY[assignment]
    return json.loads((REPO / course.SOURCE_DIR / a.name / a.notebook).read_text(encoding="utf-8"))


def _defined_in(folder: Path) -> set[str]:
    """The names of the functions defined at the top level of every module in ``folder``."""
    names = set()
    for path in folder.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names |= {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    return names


@pytest.mark.slow
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_hidden_blocks_call_only_checks_defined_under_course_hidden(assignment):
    """Every check a hidden block calls is defined in course/hidden and nowhere in course/checks (the student kit)."""
    nb = _source_notebook(assignment)
    setup = [src for _, src in setup_cells(nb)]
    visible_defs = _defined_in(COURSE / "checks")
    called = []
    for gid, source in graded_sources(nb).items():
        for block in HIDDEN_BLOCK.findall(source):
            calls = check_calls(assignment, block, setup)
            assert calls, f"{gid}: a hidden block that calls no check"
            called += [c.check for c in calls]
    assert called, "no hidden block calls a check"
    for check in called:
        assert check.__module__.startswith("resumable_core.course.hidden."), check
        assert check.__name__ not in visible_defs, f"{check.__name__} is defined in the student kit's checks"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_visible_test_code_calls_only_visible_checks(assignment):
    """Outside the hidden blocks a test cell calls only course/checks, which ship with the release."""
    nb = _source_notebook(assignment)
    setup = [src for _, src in setup_cells(nb)]
    for gid, source in graded_sources(nb).items():
        visible = HIDDEN_BLOCK.sub("", source)
        calls = check_calls(assignment, visible, setup)
        assert all(c.check.__module__.startswith("resumable_core.course.checks.") for c in calls), gid
        assert calls or "### BEGIN HIDDEN TESTS" in source, f"{gid} checks nothing before grading"


def test_the_registry_matches_the_solutions_folders():
    """One registry entry per solutions/<name>/<name>.ipynb, in a strict teaching order, with both check modules."""
    folders = {p.name for p in (REPO / course.SOURCE_DIR).iterdir() if p.is_dir() and not p.name.startswith(".")}
    assert set(REGISTRY) == folders
    assert sorted(a.order for a in REGISTRY.values()) == list(range(1, len(REGISTRY) + 1))
    assert course.ASSIGNMENTS == ASSIGNMENTS == tuple(sorted(REGISTRY, key=lambda n: REGISTRY[n].order))
    for a in REGISTRY.values():
        assert (REPO / course.SOURCE_DIR / a.name / a.notebook).is_file()
        assert a.checks().__name__ == a.checks_module and a.hidden().__name__ == a.hidden_module


# -- the sample class, graded with real nbgrader (heavy) ----------------------------------------


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    """A temporary copy of the course with the class submitted and autograded; seconds per submission."""
    root = tmp_path_factory.mktemp("course")
    shutil.copy2(course.COURSE_ROOT / "nbgrader_config.py", root / "nbgrader_config.py")
    assignments = sorted({a for work in CLASS.values() for a in work})
    for assignment in assignments:
        shutil.copytree(course.COURSE_ROOT / "solutions" / assignment, root / "solutions" / assignment)
    # "*": every assignment in one nbgrader process each time (a start of nbgrader costs seconds of CPU)
    course.nbgrader(["generate_assignment", "*", "--force"], root)
    for student, work in CLASS.items():
        for assignment, answers in work.items():
            nb = course.fill_in(course.notebook_path(assignment, root, "exercises"), answers or {})
            out = root / "submitted" / student / assignment / f"{assignment}.ipynb"
            out.parent.mkdir(parents=True)
            out.write_text(json.dumps(nb, indent=1))
    start = time.perf_counter()
    course.autograde(root, "*")
    per_submission = (time.perf_counter() - start) / sum(len(work) for work in CLASS.values())
    return root, {a: course.scores(root, a) for a in assignments}, per_submission


@pytest.mark.slow
@pytest.mark.nbgrader
@pytest.mark.parametrize("student", sorted(CLASS))
def test_sample_class_scores(graded_class, student):
    """Each sample student's autograded points per test cell are exactly the reasoned expectation."""
    _, scores, per_submission = graded_class
    for assignment, expected in EXPECTED[student].items():
        got = {k: scores[assignment][student][k] for k in expected}
        assert got == expected, f"{student} / {assignment}"
    print(f"autograde: {per_submission:.1f} s per submission")


@pytest.mark.slow
@pytest.mark.nbgrader
def test_sample_class_manual_cells_await_the_grader(graded_class):
    """The explanation cells are left for a human: no autograded score, their points in the gradebook."""
    _, scores, _ = graded_class
    assert scores["reconcile"]["correct"]["level1_why"] is None
    assert scores["postmortem"]["correct"]["root_cause"] is None
    assert scores["reconcile"]["blank"]["level1_why"] == 0  # nbgrader scores an untouched answer cell 0


@pytest.mark.slow
@pytest.mark.nbgrader
def test_sample_class_full_marks_equal_the_release_totals(graded_class):
    """The correct student's autograded total equals every autograded point of the assignments."""
    _, scores, _ = graded_class
    for assignment in ("reconcile", "postmortem", "resume_skeleton", "resume"):
        auto = sum(c["points"] for c in course.grade_cells(course.notebook_path(assignment)) if c["kind"] == "auto")
        assert sum(v for v in scores[assignment]["correct"].values() if v is not None) == auto


@pytest.mark.slow
@pytest.mark.nbgrader
def test_validate_accepts_a_finished_submission_and_flags_a_blank_one(graded_class):
    """`nbgrader validate` passes the correct student's notebook and reports failures in the untouched release."""
    root, _, _ = graded_class
    good = course.nbgrader(["validate", str(root / "submitted/correct/reconcile/reconcile.ipynb")], root, check=False)
    assert "Success! Your notebook passes all the tests." in good.stdout, good.stdout + good.stderr
    blank = course.nbgrader(["validate", str(root / "submitted/blank/reconcile/reconcile.ipynb")], root, check=False)
    assert "failed" in blank.stdout.lower() and "NotImplementedError" in blank.stdout, blank.stdout
