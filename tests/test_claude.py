"""claude.py and scripted.py: the real SDK against a scripted Claude that enforces the API's rules."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import anthropic
import pytest

import resumable_core as rc
from resumable_core import claude, lab
from resumable_core._scripted import EMAIL_TASK, NOTES_TASK, IdStream, ScriptedClaude
from resumable_core.course.hidden import strategies as answers


def _create(client, messages, tools=None):
    return client.messages.create(
        model=rc.model_id(), max_tokens=100, messages=messages, tools=tools if tools is not None else _tools()
    )


def _tools():
    return [t.schema() for t in rc.DEFAULT_TOOLS]


def _error(client, messages) -> str:
    with pytest.raises(anthropic.BadRequestError) as info:
        _create(client, messages)
    body = info.value.body
    assert isinstance(body, dict)
    assert info.value.status_code == 400 and body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    return body["error"]["message"]


def _use(id_="toolu_01A", name="read_file", input_=None):
    return {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": id_, "name": name, "input": input_ or {"path": "x"}}],
    }


@pytest.mark.slow
def test_dangling_tool_use_gets_the_real_400_text(client):
    """A tool_use with no tool_result after it is refused with the API's own message."""
    msg = _error(client, [{"role": "user", "content": "t"}, _use(), {"role": "user", "content": "go on"}])
    assert msg == (
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_01A. "
        "Each `tool_use` block must have a corresponding `tool_result` block in the next message."
    )


def test_conversation_ending_on_a_tool_use_is_refused(client):
    """Resuming without reconciling (last message the assistant's tool_use) gets the same 400."""
    assert "`tool_use` ids were found without `tool_result` blocks" in _error(
        client, [{"role": "user", "content": "t"}, _use()]
    )


def test_unknown_tool_use_id_is_refused(client):
    """A tool_result answering no tool_use of the previous message is refused."""
    msgs = [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_ghost", "content": "x"}]}]
    assert _error(client, msgs) == (
        "messages.0.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_ghost. "
        "Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
    )


def test_tool_results_must_come_first(client):
    """Text before the tool_result in the user message is refused."""
    msgs = [
        {"role": "user", "content": "t"},
        _use(),
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "hi"},
                {"type": "tool_result", "tool_use_id": "toolu_01A", "content": "x"},
            ],
        },
    ]
    assert "Did not find 1 `tool_result` block(s) at the beginning of this message" in _error(client, msgs)


def test_first_message_is_the_users_and_same_role_messages_combine(client):
    """The first message must be the user's; consecutive same-role messages are combined, as the API does."""
    assert 'first message must use the "user" role' in _error(client, [{"role": "assistant", "content": "x"}])
    reply = _create(client, [{"role": "user", "content": NOTES_TASK}, {"role": "user", "content": "please"}])
    assert reply.stop_reason == "tool_use"


def test_malformed_blocks_are_a_400_not_a_connection_error(client):
    """A bare string block or a tool_use without an id is answered with a 400, as the API does."""
    assert _error(client, [{"role": "user", "content": ["bare string"]}]) == (
        "messages.0.content.0: Input should be a valid dictionary or object to extract fields from"
    )
    no_id = {"role": "assistant", "content": [{"type": "tool_use", "name": "read_file", "input": {}}]}
    assert _error(client, [{"role": "user", "content": "t"}, no_id, {"role": "user", "content": "x"}]) == (
        "messages.1.content.0.tool_use.id: Field required"
    )


def test_a_finished_conversation_cannot_be_sent_again(client):
    """Ending on the assistant's plain reply is refused by the default model (no prefill)."""
    cp = lab.load_exercise_checkpoint("A")
    assert "must end with a user message" in _error(client, cp.messages)


def test_a_prefill_model_continues_a_trailing_assistant_message(client):
    """A model with prefill accepts the same finished conversation and answers it again."""
    cp = lab.load_exercise_checkpoint("A")
    reply = client.messages.create(model="claude-haiku-4-5", max_tokens=100, messages=cp.messages, tools=_tools())
    assert reply.stop_reason == "end_turn"


def test_replies_are_realistic_message_json(client):
    """A reply has a msg_ id, toolu_ ids, stop_reason tool_use and usage."""
    r = _create(client, [{"role": "user", "content": NOTES_TASK}])
    assert r.id.startswith("msg_") and r.stop_reason == "tool_use"
    use = next(b for b in r.content if b.type == "tool_use")
    assert use.id.startswith("toolu_01") and use.name == "list_dir"
    assert r.usage.input_tokens > 0 and r.usage.output_tokens > 0


def test_same_conversation_same_reply_fresh_ids(client):
    """The same conversation gets the same reply and usage, but every response has ids of its own."""
    a = _create(client, [{"role": "user", "content": EMAIL_TASK}])
    b = _create(client, [{"role": "user", "content": EMAIL_TASK}])
    assert a.id != b.id and a.content[1].id != b.content[1].id
    assert a.content[1].input == b.content[1].input and a.usage == b.usage


def test_ids_have_the_real_format():
    """toolu_, msg_ and req_ ids are the prefix, 01 and 22 base62 characters, like the API's."""
    ids = IdStream()
    for prefix in ("toolu", "msg", "req"):
        assert re.fullmatch(prefix + r"_01[0-9A-Za-z]{22}", ids.new(prefix))


def test_a_seed_makes_the_ids_reproducible():
    """Two scripted Claudes with one seed give the same ids; other seeds and no seed give others."""
    replies = []
    for scripted in (ScriptedClaude(seed=7), ScriptedClaude(seed=7), ScriptedClaude(seed=8), ScriptedClaude()):
        client = rc.make_client(scripted=scripted)
        replies.append([_create(client, [{"role": "user", "content": NOTES_TASK}]).content[1].id for _ in range(2)])
    assert replies[0] == replies[1] and replies[0][0] != replies[0][1]
    assert replies[2] != replies[0] and replies[3] != replies[0]


def test_unseeded_ids_differ_in_forked_children():
    """Processes forked from one parent draw their ids from the OS, so they never repeat each other's."""
    ids = IdStream()
    read, write = os.pipe()
    if (pid := os.fork()) == 0:  # the child writes one id and leaves at once
        os.write(write, ids.new("toolu").encode())
        os._exit(0)
    os.waitpid(pid, 0)
    assert os.read(read, 64).decode() != ids.new("toolu")


def test_status_unknown_send_makes_claude_check_the_outbox(client):
    """Given an is_error 'status unknown' result for send_email, the scripted Claude calls list_sent_emails."""
    cp = lab.load_exercise_checkpoint("C")
    answers.reconcile(cp, rc.Toolbox(rc.World("/nonexistent")))
    r = _create(client, cp.messages)
    assert [b.name for b in r.content if b.type == "tool_use"] == ["list_sent_emails"]


def test_a_past_tool_use_may_name_a_tool_not_in_tools(client):
    """The API accepts a past tool_use for a tool no longer declared; only the new reply is constrained."""
    msgs = [
        {"role": "user", "content": "t"},
        _use(name="mystery"),
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01A", "content": "x"}]},
    ]
    assert _create(client, msgs).stop_reason == "end_turn"


def test_default_model_is_not_deprecated():
    """The model id is one the installed SDK neither lists as deprecated nor warns about."""
    from anthropic._data import DEPRECATED_MODELS

    assert claude.DEFAULT_MODEL not in DEPRECATED_MODELS
    assert claude.DEFAULT_MODEL.startswith("claude-")


def test_model_id_has_an_environment_override(monkeypatch):
    """$RESUMABLE_MODEL overrides the default model id."""
    assert rc.model_id() == claude.DEFAULT_MODEL
    monkeypatch.setenv("RESUMABLE_MODEL", "claude-opus-5-5")
    assert rc.model_id() == "claude-opus-5-5"


def test_live_claude_is_opt_in(monkeypatch):
    """Without RESUMABLE_LIVE=1 the key alone does not switch to live Claude."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    assert not claude.live_enabled()
    monkeypatch.setenv("RESUMABLE_LIVE", "1")
    assert claude.live_enabled()
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    assert not claude.live_enabled()
    with pytest.raises(RuntimeError, match="ANTHROPIC_API_KEY"):
        rc.make_client(live=True)


def test_scripted_client_never_carries_a_real_key(monkeypatch):
    """Offline, the SDK is given a placeholder key, not the environment's."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-real-key-000")
    assert rc.make_client(live=False).api_key == "scripted-offline"


def test_import_is_lazy():
    """`import resumable_core` imports neither anthropic nor pydantic."""
    code = "import sys, resumable_core; print('anthropic' in sys.modules, 'pydantic' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"] and out.stderr == ""
