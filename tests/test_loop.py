"""loop.py: save points A and B, the resume path, counters across crashes."""
# mypy: disable-error-code="union-attr"
# (these tests read back what they just wrote; a None fails the test at once anyway)

from __future__ import annotations

import json

import pytest

import resumable_core as rc
from resumable_core._scripted import EMAIL_TASK, NOTES_TASK
from resumable_core.course.hidden import strategies as answers
from resumable_core.crash import run_in_child
from resumable_core.scenarios import BRIEFING_TASK


def _run(run_folder, task, client, **kw):
    kw.setdefault("reconcile", answers.reconcile_by_effect)
    return rc.run_agent(
        task, checkpoint_path=run_folder.checkpoint_path, toolbox=run_folder.toolbox, client=client, **kw
    )


def _crash(run_folder, task, plan):
    assert run_in_child(lambda: _run(run_folder, task, None, crash=plan)) == "killed"


def test_a_run_finishes_and_checkpoints_its_answer(run_folder, client):
    """An uncrashed run ends with the final answer saved and nothing pending."""
    result = _run(run_folder, NOTES_TASK, client)
    assert result.status == "finished" and not result.resumed
    assert "Summary of this week's meetings" in result.final_text
    assert rc.load_checkpoint(run_folder.checkpoint_path) == result.checkpoint
    assert result.checkpoint.turns == result.model_calls == 5


def test_every_request_allows_parallel_tool_use(run_folder, client, scripted):
    """The loop leaves parallel tool use on (the API's default): no request sets disable_parallel_tool_use."""
    _run(run_folder, BRIEFING_TASK, client)
    assert scripted.requests and all("tool_choice" not in r for r in scripted.requests)


def test_a_parallel_turn_is_answered_in_one_user_message_in_block_order(run_folder, client):
    """The briefing's two calls in one turn get one user message: one tool_result per tool_use, in order."""
    result = _run(run_folder, BRIEFING_TASK, client)
    assert result.status == "finished" and result.checkpoint.turns == 3
    asked, answers_ = result.checkpoint.messages[3], result.checkpoint.messages[4]
    ids = [b["id"] for b in asked["content"] if b["type"] == "tool_use"]
    assert [b["name"] for b in asked["content"] if b["type"] == "tool_use"] == ["send_email", "read_file"]
    assert [b["type"] for b in answers_["content"]] == ["tool_result", "tool_result"]
    assert [b["tool_use_id"] for b in answers_["content"]] == ids
    assert len(run_folder.world.sent_emails()) == 1


@pytest.mark.slow
def test_a_crash_between_a_turns_tools_keeps_the_first_result_and_the_rest_pending(run_folder):
    """Killed between the two tools, the checkpoint holds send_email's result and read_file still pending."""
    _crash(run_folder, BRIEFING_TASK, rc.CrashPlan("between_tools", tool="send_email"))
    cp = rc.load_checkpoint(run_folder.checkpoint_path)
    uses = [b for b in cp.messages[-1]["content"] if b["type"] == "tool_use"]
    assert [r["tool_use_id"] for r in cp.recorded_results] == [uses[0]["id"]]
    assert [(p.id, p.name) for p in cp.pending_tool_uses] == [(uses[1]["id"], "read_file")]
    assert "sent" in cp.recorded_results[0]["content"] and len(run_folder.world.sent_emails()) == 1


def test_save_point_a_of_a_parallel_turn_records_every_call_pending(run_folder):
    """Killed after save point A of the parallel turn, both calls are pending, in block order."""
    _crash(run_folder, BRIEFING_TASK, rc.CrashPlan("after_save_a", tool="read_file", turn=2))
    cp = rc.load_checkpoint(run_folder.checkpoint_path)
    assert [p.name for p in cp.pending_tool_uses] == ["send_email", "read_file"] and cp.recorded_results == []


@pytest.mark.slow
def test_resume_after_a_crash_between_tools_settles_the_turn_and_finishes(run_folder, client):
    """Resumed, the reconcile answers the pending call after the kept result, and the run finishes with one email."""
    _crash(run_folder, BRIEFING_TASK, rc.CrashPlan("between_tools", tool="send_email"))
    kept = rc.load_checkpoint(run_folder.checkpoint_path).recorded_results
    result = _run(run_folder, BRIEFING_TASK, client)
    assert result.status == "finished" and result.resumed
    answered = result.checkpoint.messages[4]["content"]
    assert answered[0] == kept[0] and answered[1]["tool_use_id"] != kept[0]["tool_use_id"]
    assert len(run_folder.world.sent_emails()) == 1


@pytest.mark.slow
def test_the_crash_point_between_tools_never_fires_in_a_turn_of_one_call(run_folder):
    """A turn of one call has no point between tools: the email run is not killed there."""
    plan = rc.CrashPlan("between_tools", tool="send_email")
    assert run_in_child(lambda: _run(run_folder, EMAIL_TASK, None, crash=plan)) == "exited"


@pytest.mark.slow
def test_save_point_a_records_the_pending_call(run_folder):
    """Killed after save point A, the checkpoint ends on the tool_use with pending_tool_use set."""
    _crash(run_folder, EMAIL_TASK, rc.CrashPlan("after_save_a", tool="send_email"))
    cp = rc.load_checkpoint(run_folder.checkpoint_path)
    assert cp.pending_tool_use.name == "send_email"
    assert cp.messages[-1]["content"][-1]["id"] == cp.pending_tool_use.id
    assert run_folder.world.sent_emails() == []


def test_save_point_b_records_the_result(run_folder):
    """Killed after save point B, the checkpoint ends on the tool_result with nothing pending."""
    _crash(run_folder, EMAIL_TASK, rc.CrashPlan("after_save_b", tool="send_email"))
    cp = rc.load_checkpoint(run_folder.checkpoint_path)
    assert cp.pending_tool_use is None
    assert cp.messages[-1]["content"][0]["type"] == "tool_result"


@pytest.mark.slow
def test_resume_continues_without_redoing_finished_turns(run_folder, client, scripted):
    """After a crash at save point B, resume makes only the remaining model calls."""
    _crash(run_folder, NOTES_TASK, rc.CrashPlan("after_save_b", turn=3))
    result = _run(run_folder, NOTES_TASK, client)
    assert result.resumed and result.status == "finished"
    assert result.model_calls == 2 and result.checkpoint.turns == 5
    assert len(scripted.requests) == 2


def test_a_finished_run_is_reported_not_resent(run_folder, client, scripted):
    """Resuming checkpoint A's kind of state makes no model call and reports already_finished."""
    first = _run(run_folder, NOTES_TASK, client)
    scripted.requests.clear()
    again = _run(run_folder, NOTES_TASK, client)
    assert again.status == "already_finished" and again.model_calls == 0 and scripted.requests == []
    assert again.final_text == first.final_text


@pytest.mark.slow
def test_resume_refuses_another_tasks_checkpoint(run_folder, client):
    """A checkpoint of another task is refused, and left on disk untouched."""
    _crash(run_folder, EMAIL_TASK, rc.CrashPlan("after_save_a", tool="send_email"))
    before = run_folder.checkpoint_path.read_bytes()
    with pytest.raises(rc.CheckpointTaskMismatchError) as info:
        _run(run_folder, NOTES_TASK, client)
    assert info.value.found_task == EMAIL_TASK and info.value.expected_task == NOTES_TASK
    assert run_folder.checkpoint_path.read_bytes() == before


@pytest.mark.slow
def test_reconciled_state_is_saved_before_the_next_model_call(run_folder):
    """The reconciled checkpoint is on disk before resume calls the model again."""
    _crash(run_folder, EMAIL_TASK, rc.CrashPlan("after_tool", tool="send_email"))
    plan = rc.CrashPlan("before_model_call")  # die at the first model call of the resume
    assert run_in_child(lambda: _run(run_folder, EMAIL_TASK, None, crash=plan)) == "killed"
    cp = rc.load_checkpoint(run_folder.checkpoint_path)
    assert cp.pending_tool_use is None
    assert cp.messages[-1]["content"][0]["is_error"] is True


@pytest.mark.slow
def test_counters_carry_over_so_the_turn_cap_holds_across_crashes(run_folder):
    """Killing the run at every turn still stops it at max_turns: turns count the task, not the process."""
    plan = rc.CrashPlan("after_save_b")
    for _ in range(6):
        run_in_child(lambda: _run(run_folder, NOTES_TASK, None, crash=plan, max_turns=3))
    cp = rc.load_checkpoint(run_folder.checkpoint_path)
    assert cp.turns == 3
    assert _run(run_folder, NOTES_TASK, None, max_turns=3).status == "max_turns"


@pytest.mark.slow
def test_tokens_accumulate_over_every_recorded_call(run_folder, client, scripted):
    """tokens_used is the sum of every recorded call's input and output tokens, across a resume."""
    _crash(run_folder, NOTES_TASK, rc.CrashPlan("after_save_b", turn=2))
    before = rc.load_checkpoint(run_folder.checkpoint_path).tokens_used
    result = _run(run_folder, NOTES_TASK, client)
    from resumable_core._scripted import respond

    spent_after = sum(u["input_tokens"] + u["output_tokens"] for u in (respond(r)["usage"] for r in scripted.requests))
    assert result.checkpoint.tokens_used == before + spent_after


@pytest.mark.slow
def test_an_ordinary_tool_failure_is_reported_with_is_error(run_folder, client):
    """A tool that fails is answered with an is_error tool_result: it finished, so nothing dangles."""
    (run_folder.world.notes_dir / "conclusion.md").unlink()
    result = _run(run_folder, EMAIL_TASK, client)
    results = [b for m in result.checkpoint.messages if m["role"] == "user" for b in rc.checkpoint.tool_results(m)]
    assert results[0]["is_error"] is True and "no such file" in results[0]["content"]


@pytest.mark.slow
def test_a_reconcile_that_leaves_the_state_inconsistent_is_refused(run_folder, client):
    """A reconcile that appends a result but forgets to clear pending is caught before anything is saved."""
    _crash(run_folder, NOTES_TASK, rc.CrashPlan("after_save_a", tool="read_file"))
    before = run_folder.checkpoint_path.read_bytes()

    def forgetful(cp, tools):
        cp.messages.append({"role": "user", "content": [rc.tool_result(cp.pending_tool_use.id, "x")]})
        return cp

    with pytest.raises(rc.CheckpointInconsistentError, match="after reconcile"):
        _run(run_folder, NOTES_TASK, client, reconcile=forgetful)
    assert run_folder.checkpoint_path.read_bytes() == before


def test_checkpoint_messages_are_json_as_sent(run_folder, client, scripted):
    """The saved messages are exactly what the next request sends."""
    _run(run_folder, EMAIL_TASK, client)
    saved = json.loads(run_folder.checkpoint_path.read_text())["messages"]
    assert scripted.requests[-1]["messages"] == saved[:-1]


def test_a_turn_is_charged_on_disk_before_its_model_call(run_folder):
    """Killed right after the first response, the checkpoint already counts that turn."""
    _crash(run_folder, NOTES_TASK, rc.CrashPlan("after_response", turn=1))
    cp = rc.load_checkpoint(run_folder.checkpoint_path)
    assert cp.turns == 1 and cp.messages == [{"role": "user", "content": NOTES_TASK}]


@pytest.mark.slow
def test_ten_kills_after_the_response_make_at_most_max_turns_model_calls(tmp_path):
    """Ten restarts, each SIGKILLed after its model's response, make 3 model calls with max_turns=3."""
    from resumable_core.lab.resumers import crash_loop

    out = crash_loop("after_response", "read_file", crashes=10, max_turns=3, root=tmp_path)
    assert out.model_calls == 3 and out.killed == 3 and out.turns == 3


class _CachedUsageClient:
    """A client whose every reply is a final answer billed with prompt-cache tokens."""

    def __init__(self):
        self.messages = self

    def create(self, **kw):
        import anthropic

        usage = {"input_tokens": 10, "output_tokens": 5}
        usage |= {"cache_creation_input_tokens": 100, "cache_read_input_tokens": 1000}
        return anthropic.types.Message.model_validate(
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": kw["model"],
                "content": [{"type": "text", "text": "done"}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": usage,
            }
        )


def test_tokens_used_counts_the_prompt_cache(run_folder):
    """tokens_used adds cache_creation_input_tokens and cache_read_input_tokens when usage has them."""
    result = _run(run_folder, NOTES_TASK, _CachedUsageClient())
    assert result.checkpoint.tokens_used == 10 + 5 + 100 + 1000


def test_a_second_resumer_of_a_running_run_is_refused(run_folder, client):
    """While one process holds the run's lease, run_agent in another is refused before loading."""
    from resumable_core.lease import Lease

    with Lease.take(run_folder.checkpoint_path), pytest.raises(rc.CheckpointError, match="being resumed"):
        _run(run_folder, NOTES_TASK, client)
    assert not run_folder.checkpoint_path.exists()


def test_run_agent_needs_a_reconcile():
    """run_agent has no default reconcile: the caller decides what a dangling call means."""
    with pytest.raises(TypeError, match="reconcile"):
        rc.run_agent(NOTES_TASK, checkpoint_path="unused.json", toolbox=None)  # type: ignore[call-arg, arg-type]  # the missing argument is the test


@pytest.mark.parametrize("returned", [None, "done"], ids=["None", "str"])
def test_a_reconcile_that_returns_no_checkpoint_is_named(run_folder, client, returned):
    """A reconcile returning None (a forgotten ``return cp``) or a non-Checkpoint raises one line naming the fix."""
    _crash(run_folder, NOTES_TASK, rc.CrashPlan("after_save_a", tool="read_file"))
    before = run_folder.checkpoint_path.read_bytes()

    def my_reconcile(cp, tools):
        rc.answer_pending(cp, "re-read")
        return returned

    with pytest.raises(rc.ReconcileResultError) as info:
        _run(run_folder, NOTES_TASK, client, reconcile=my_reconcile)
    message = str(info.value)
    assert message.startswith("my_reconcile returned ") and "return cp" in message and "\n" not in message
    assert info.value.returned == returned and info.value.reconcile_name == "my_reconcile"
    assert run_folder.checkpoint_path.read_bytes() == before


@pytest.mark.parametrize(
    ("given", "fix"),
    [
        ("rerun_", "pass a strategy's, e.g. rc.STRATEGIES['rerun'].reconcile, or your own reconcile(cp, tools)"),
        (3, "rc.STRATEGIES[name].reconcile (name one of none, delete, rerun, "),
    ],
    ids=["a strategy's name", "an int"],
)
def test_a_reconcile_that_is_not_a_function_is_refused_at_once(run_folder, client, scripted, given, fix):
    """RunFolder.run(task, reconcile="rerun_") raises one line naming the function to pass, before a model call or
    a save (it used to run on, and fail only at a dangling call with "'str' object is not callable")."""
    with pytest.raises(rc.ReconcileNotCallableError) as info:
        run_folder.run(NOTES_TASK, client=client, reconcile=given)
    assert str(info.value).startswith(f"reconcile={given!r} is not a function: ") and fix in str(info.value)
    assert isinstance(info.value, TypeError) and info.value.given == given
    assert scripted.requests == [] and not run_folder.checkpoint_path.exists()


@pytest.mark.slow
def test_a_run_folder_run_with_a_dangling_call_and_no_reconcile_names_the_fix(run_folder, client):
    """RunFolder.run with no reconcile stops at a dangling call, naming it and the fix; given one, it resumes."""
    _crash(run_folder, NOTES_TASK, rc.CrashPlan("after_save_a", tool="read_file"))
    pending = rc.load_checkpoint(run_folder.checkpoint_path).pending_tool_use
    with pytest.raises(rc.ReconcileMissingError, match="pass reconcile=") as info:
        run_folder.run(NOTES_TASK, client=client)
    assert (info.value.tool_name, info.value.tool_use_id) == ("read_file", pending.id)
    assert run_folder.run(NOTES_TASK, client=client, reconcile=answers.reconcile_by_effect).status == "finished"


def test_a_folder_as_the_checkpoint_path_is_one_line_naming_the_fix(run_folder, client):
    """Pointing run_agent (or load_checkpoint) at a folder raises CheckpointNotAFileError, not IsADirectoryError."""
    with pytest.raises(rc.CheckpointNotAFileError) as info:
        rc.run_agent(
            NOTES_TASK,
            checkpoint_path=run_folder.root,
            toolbox=run_folder.toolbox,
            client=client,
            reconcile=answers.reconcile,
        )
    assert info.value.path == run_folder.root and "\n" not in str(info.value)
    assert info.value.reason == "a directory, not a regular file; point the path at a checkpoint file"
