"""protocol.py: one rulebook for the Messages API's shape, shared by the loader and the scripted API."""

from __future__ import annotations

import json

import anthropic
import httpx2
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import resumable_core as rc
from resumable_core import protocol
from resumable_core._scripted import ScriptedClaude
from resumable_core.checkpoint import Checkpoint, PendingToolUse, consistency_problem

TOOLS = [t.schema() for t in rc.DEFAULT_TOOLS]
PAIRING_TAIL = "Each `tool_use` block must have a corresponding `tool_result` block in the next message."
RESULTS_FIRST_TAIL = "Messages following `tool_use` blocks must begin with a matching number of `tool_result` blocks."
ALL_TAGS = "'text', 'image', 'document', 'tool_use', 'tool_result', 'thinking', 'redacted_thinking'"


def U(content):
    return {"role": "user", "content": content}


def A(content):
    return {"role": "assistant", "content": content}


def use(id_="toolu_01A", name="read_file"):
    return {"type": "tool_use", "id": id_, "name": name, "input": {"path": "x"}}


def result(id_="toolu_01A", content="x"):
    return {"type": "tool_result", "tool_use_id": id_, "content": content}


def body(messages, *, model=rc.DEFAULT_MODEL, tools=TOOLS):
    return {"model": model, "max_tokens": 100, "messages": messages, "tools": tools}


def text(value):
    return {"type": "text", "text": value}


# (name, messages, the API's text, whether a checkpoint can hold these messages at all)
REFUSED = [
    ("empty string content", [U("")], f"messages.0: {protocol.EMPTY_CONTENT}", True),
    ("empty list content", [U("t"), A([]), U("x")], f"messages.1: {protocol.EMPTY_CONTENT}", True),
    ("empty text block", [U([text("")])], "messages: text content blocks must be non-empty", True),
    ("blank text", [U("t"), A([text(" \n")]), U("x")], protocol.BLANK_TEXT, True),
    (
        "tool_use id pattern",
        [U("t"), A([use("toolu.01")]), U([result("toolu.01")])],
        "messages.1.content.0.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'",
        True,
    ),
    (
        "tool_use id with a trailing newline",
        [U("t"), A([use("toolu_01\n")]), U([result("toolu_01\n")])],
        "messages.1.content.0.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'",
        True,
    ),
    (
        "tool_result id pattern",
        [U([result("no spaces")])],
        "messages.0.content.0.tool_result.tool_use_id: String should match pattern '^[a-zA-Z0-9_-]+$'",
        True,
    ),
    (
        "duplicate tool_use ids",
        [U("t"), A([use()]), U([result()]), A([use()]), U([result()])],
        "messages.3.content.0: `tool_use` ids must be unique",
        True,
    ),
    (
        "unknown block type",
        [U([{"type": "video", "url": "x"}])],
        f"messages.0.content.0: Input tag 'video' found using 'type' does not match any of the expected tags: {ALL_TAGS}",
        True,
    ),
    (
        "block without a type",
        [U([{"text": "x"}])],
        "messages.0.content.0: Unable to extract tag using discriminator 'type'",
        True,
    ),
    (
        "bare string in a content list",
        [U(["bare string"])],
        "messages.0.content.0: Input should be a valid dictionary or object to extract fields from",
        True,
    ),
    (
        "tool_use without an id",
        [U("t"), A([{"type": "tool_use", "name": "read_file", "input": {}}]), U("x")],
        "messages.1.content.0.tool_use.id: Field required",
        True,
    ),
    (
        "tool_use input not an object",
        [U("t"), A([{**use(), "input": "path=x"}]), U([result()])],
        "messages.1.content.0.tool_use.input: Input should be a valid dictionary",
        True,
    ),
    (
        "text block whose text is not a string",
        [U([{"type": "text", "text": 3}])],
        "messages.0.content.0.text.text: Input should be a valid string",
        True,
    ),
    (
        "is_error not a boolean",
        [U("t"), A([use()]), U([{**result(), "is_error": "yes"}])],
        "messages.2.content.0.tool_result.is_error: Input should be a valid boolean",
        True,
    ),
    (
        "tool_result holding a tool_use",
        [U("t"), A([use()]), U([result(content=[use("toolu_01B")])])],
        "messages.2.content.0.tool_result.content.0: Input tag 'tool_use' found using 'type' does not match any "
        "of the expected tags: 'text', 'image', 'document'",
        True,
    ),
    (
        "empty text inside a tool_result",
        [U("t"), A([use()]), U([result(content=[text("")])])],
        "messages: text content blocks must be non-empty",
        True,
    ),
    (
        "text before the tool_result",
        [U("t"), A([use()]), U([text("hi"), result()])],
        f"messages.2: Did not find 1 `tool_result` block(s) at the beginning of this message. {RESULTS_FIRST_TAIL}",
        True,
    ),
    (
        "text before the tool_result, in a user message of its own",
        [U("t"), A([use()]), U("hi"), U([result()])],
        f"messages.2: Did not find 1 `tool_result` block(s) at the beginning of this message. {RESULTS_FIRST_TAIL}",
        True,
    ),
    (
        "tool_result answering no tool_use",
        [U([result("toolu_ghost")])],
        "messages.0.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_ghost. "
        "Each `tool_result` block must have a corresponding `tool_use` block in the previous message.",
        True,
    ),
    (
        "tool_use without a result in the next message",
        [U("t"), A([use()]), U("go on")],
        f"messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_01A. "
        f"{PAIRING_TAIL}",
        True,
    ),
    (
        "tool_use followed by another assistant message",
        [U("t"), A([use()]), A("done")],
        f"messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_01A. "
        f"{PAIRING_TAIL}",
        True,
    ),
    ("first message the assistant's", [A("x"), U("y")], protocol.FIRST_ROLE, True),
    (
        "unknown role",
        [U("t"), {"role": "system", "content": "x"}],
        "messages.1.role: Input should be 'user' or 'assistant'",
        True,
    ),
    ("no content", [{"role": "user"}], "messages.0.content: Field required", True),
    (
        "content of another type",
        [U({"text": "x"})],
        "messages.0.content: Input should be a valid string or a valid list",
        True,
    ),
    ("a message that is not an object", ["hello"], "messages.0: Input should be a valid dictionary", False),
    ("no messages", [], "messages: at least one message is required", False),
]


@pytest.mark.parametrize("messages, text_", [pytest.param(m, t, id=n) for n, m, t, _ in REFUSED])
def test_each_rule_answers_with_the_apis_text(messages, text_):
    """Every refused shape gets the real API's 400 text from the one rulebook."""
    assert protocol.request_problem(body(messages)) == text_


@pytest.mark.parametrize("messages, text_", [pytest.param(m, t, id=n) for n, m, t, ok in REFUSED if ok])
def test_the_loader_refuses_the_same_shapes_with_the_same_text(tmp_path, messages, text_):
    """A checkpoint holding a shape the API refuses is refused on load, naming the API's text."""
    path = tmp_path / "cp.json"
    path.write_text(json.dumps({"version": 1, "task": "t", "messages": messages}))
    with pytest.raises(rc.CheckpointInconsistentError) as info:
        rc.load_checkpoint(path)
    assert info.value.reason == f"the Messages API would refuse these messages: {text_}"


@pytest.mark.parametrize("messages, text_", [pytest.param(m, t, id=n) for n, m, t, _ in REFUSED])
def test_the_scripted_api_answers_each_with_a_400(client, messages, text_):
    """Through the real SDK every malformed request is a BadRequestError, never a connection error."""
    with pytest.raises(anthropic.BadRequestError) as info:
        client.messages.create(model=rc.model_id(), max_tokens=100, messages=messages, tools=TOOLS)
    assert isinstance(info.value.body, dict)
    assert info.value.body["error"] == {"type": "invalid_request_error", "message": text_}


ACCEPTED = [
    ("consecutive user messages", [U("a"), U("b")]),
    ("consecutive assistant messages", [U("t"), A("x"), A("y"), U("z")]),
    ("results in a user message, a note in the next", [U("t"), A([use()]), U([result()]), U("note")]),
    ("tool_use and its reason in two assistant messages", [U("t"), A("let me look"), A([use()]), U([result()])]),
    ("a past tool_use naming a tool not in tools", [U("t"), A([use(name="mystery")]), U([result()])]),
    ("tool_result content as blocks", [U("t"), A([use()]), U([result(content=[text("x")])])]),
    ("tool_result without content", [U("t"), A([use()]), U([{"type": "tool_result", "tool_use_id": "toolu_01A"}])]),
    (
        "two calls, two results first",
        [U("t"), A([use("toolu_01A"), use("toolu_01B")]), U([result("toolu_01B"), result("toolu_01A"), text("ok")])],
    ),
]


@pytest.mark.parametrize("messages", [pytest.param(m, id=n) for n, m in ACCEPTED])
def test_shapes_the_real_api_accepts_are_accepted(client, tmp_path, messages):
    """What the API accepts (it combines consecutive same-role messages) is accepted by both sides."""
    assert protocol.request_problem(body(messages)) is None
    client.messages.create(model=rc.model_id(), max_tokens=100, messages=messages, tools=TOOLS)
    path = tmp_path / "cp.json"
    path.write_text(json.dumps({"version": 1, "task": "t", "messages": messages}))
    assert rc.load_checkpoint(path) is not None


@pytest.mark.parametrize(
    "field, value, text_",
    [
        ("model", None, "model: Field required"),
        ("max_tokens", None, "max_tokens: Field required"),
        ("model", 5, "model: Input should be a valid string"),
        ("max_tokens", "100", "max_tokens: Input should be a valid integer"),
        ("tools", [{"name": "a"}, {"name": "a"}], "tools: Tool names must be unique."),
        ("tools", ["read_file"], "tools.0: Input should be a valid dictionary"),
    ],
)
def test_request_fields_are_checked(field, value, text_):
    """The request's own fields are checked before its messages."""
    request = body([U("t")])
    if value is None:
        del request[field]
    else:
        request[field] = value
    assert protocol.request_problem(request) == text_


def test_a_body_that_is_not_an_object_is_a_400():
    """Even a JSON array as the body is answered with a 400, not an exception."""
    response = ScriptedClaude().handle(httpx2.Request("POST", "http://x/v1/messages", json=[1, 2]))
    assert response.status_code == 400 and response.json()["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize(
    "model, refused",
    [
        (rc.DEFAULT_MODEL, True),
        ("claude-opus-4-6", True),
        ("claude-some-future-model", True),
        ("claude-sonnet-4-5-20250929", False),
        ("claude-3-7-sonnet-20250219", False),
        ("claude-sonnet-4-20250514", False),
    ],
)
def test_prefill_depends_on_the_model(model, refused):
    """A trailing assistant message is refused by models without prefill (the default), accepted by the others."""
    problem = protocol.request_problem(body([U("t"), A("The answer is")], model=model))
    assert problem == (protocol.NO_PREFILL if refused else None)
    assert protocol.supports_prefill(model) is not refused


def test_only_the_final_assistant_message_may_be_empty():
    """An empty final assistant message (an empty reply) is allowed; prefill then decides."""
    assert protocol.request_problem(body([U("t"), A([])], model="claude-sonnet-4-5")) is None
    assert protocol.request_problem(body([U("t"), A([])])) == protocol.NO_PREFILL
    assert protocol.request_problem(body([U("t"), A([]), U("x")])) == f"messages.1: {protocol.EMPTY_CONTENT}"


def test_a_finished_checkpoint_with_an_empty_reply_loads(tmp_path):
    """The API may answer with no content blocks; the checkpoint that records it is sound and finished."""
    cp = Checkpoint(task="t", messages=[U("t"), A([])])
    assert consistency_problem(cp) is None and cp.is_finished()


# -- properties ------------------------------------------------------------------------------

_IDS = ("toolu_01A", "toolu_01B", "toolu_01C", "bad id")
_JUNK_BLOCKS = st.sampled_from(
    [
        "bare string",
        {"type": "video"},
        {"text": "no type"},
        {"type": "tool_use", "name": "read_file", "input": {}},
        {"type": "tool_result"},
        text(""),
        text("  "),
        {"type": "text", "text": None},
    ]
)


def _turn_pairs(draw, n: int) -> list[dict]:
    msgs = [U(draw(st.sampled_from(["t", "task"])))]
    for j in range(n):
        if draw(st.booleans()):
            ids = [f"toolu_01{j}x{k}" for k in range(draw(st.integers(1, 2)))]
            lead = [text("calling")] if draw(st.booleans()) else []
            msgs.append(A(lead + [use(i) for i in ids]))
            msgs.append(U([result(i) for i in ids]))
        else:
            msgs += [A(draw(st.sampled_from(["ok", "done"]))), U("more")]
    return msgs


def _mutate(draw, msgs: list[dict]) -> None:
    where = draw(st.integers(0, len(msgs) - 1))
    m = msgs[where]
    kind = draw(st.sampled_from(["drop", "repeat", "swap", "junk", "lead_text", "empty", "role", "reid", "split"]))
    if kind == "drop" and len(msgs) > 1:
        del msgs[where]
    elif kind == "repeat":
        msgs.insert(where, json.loads(json.dumps(m)))
    elif kind == "swap" and where + 1 < len(msgs):
        msgs[where], msgs[where + 1] = msgs[where + 1], msgs[where]
    elif kind == "junk":
        m["content"] = (m["content"] if isinstance(m["content"], list) else [text(m["content"])]) + [draw(_JUNK_BLOCKS)]
    elif kind == "lead_text":
        m["content"] = [text("note")] + (m["content"] if isinstance(m["content"], list) else [text(m["content"])])
    elif kind == "empty":
        m["content"] = draw(st.sampled_from(["", []]))
    elif kind == "role":
        m["role"] = "assistant" if m["role"] == "user" else "user"
    elif kind == "reid" and isinstance(m["content"], list):
        for b in m["content"]:
            if isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result"):
                b["id" if b["type"] == "tool_use" else "tool_use_id"] = draw(st.sampled_from(_IDS))
    elif kind == "split" and isinstance(m["content"], list) and len(m["content"]) > 1:
        msgs[where : where + 1] = [{"role": m["role"], "content": [b]} for b in m["content"]]


def _pending_of(msgs: list[dict]) -> list[PendingToolUse]:
    last = msgs[-1] if msgs else {}
    uses = [b for b in last.get("content", []) if isinstance(b, dict) and b.get("type") == "tool_use"]
    if last.get("role") != "assistant":
        return []
    try:
        return [PendingToolUse.model_validate({k: u.get(k) for k in ("id", "name", "input")}) for u in uses]
    except ValueError:
        return []


@st.composite
def checkpoints(draw) -> Checkpoint:
    """Conversations built right, then maybe broken; ending on a user turn, a reply, or a pending call."""
    msgs = _turn_pairs(draw, draw(st.integers(0, 3)))
    ending = draw(st.sampled_from(["user", "reply", "pending"]))
    if ending == "reply":
        msgs.append(A("Summary."))
    elif ending == "pending":
        msgs.append(A([text("next"), use("toolu_01P")]))
    for _ in range(draw(st.integers(0, 3))):
        _mutate(draw, msgs)
    return Checkpoint(task="t", messages=msgs, pending_tool_uses=_pending_of(msgs))


PROPERTY = settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.mark.slow
@PROPERTY
@given(cp=checkpoints())
def test_an_accepted_checkpoint_is_never_refused_by_the_api_for_its_shape(client, cp):
    """Whatever the loader accepts, resuming it sends a request the scripted API answers with a 200."""
    problem = consistency_problem(cp)
    event("loader refused" if problem else "finished" if cp.is_finished() else "sent")
    if problem is not None or cp.is_finished():
        return
    messages = cp.messages
    if cp.pending_tool_uses:
        # a reconcile appends exactly the pending calls' results; nothing else is needed
        messages = [*messages, U([*cp.recorded_results, *(result(p.id) for p in cp.pending_tool_uses)])]
    reply = client.messages.create(model=rc.model_id(), max_tokens=100, messages=messages, tools=TOOLS)
    assert reply.stop_reason in ("tool_use", "end_turn")


@pytest.mark.slow
@PROPERTY
@given(cp=checkpoints())
def test_the_loader_refuses_exactly_what_the_api_refuses(cp):
    """For a checkpoint due for its next model call, loader and API agree both ways, with the same text."""
    if cp.pending_tool_uses or cp.messages[-1]["role"] != "user":
        return
    api = protocol.request_problem(body(cp.messages))
    loader = consistency_problem(cp)
    event(f"api refused: {api.split(':')[0] if api else None}")
    assert loader == (None if api is None else f"the Messages API would refuse these messages: {api}")


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["type", "text", "id", "role", "content", "name", "input", "tool_use_id"]),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)
_BLOCK_LIKE = st.fixed_dictionaries(
    {"type": st.sampled_from([*protocol.BLOCK_FIELDS, "video"])},
    optional={
        "text": st.sampled_from(["", " ", "x"]) | _JSON,
        "id": st.sampled_from(_IDS) | _JSON,
        "name": st.sampled_from(["read_file", "send_email"]) | _JSON,
        "input": st.just({"path": "x"}) | _JSON,
        "tool_use_id": st.sampled_from(_IDS) | _JSON,
        "content": _JSON,
        "is_error": _JSON,
    },
)
_MESSAGE_LIKE = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "assistant", "system"]),
        "content": st.sampled_from(["", "t"]) | st.lists(_BLOCK_LIKE | _JSON, max_size=3),
    }
)


@pytest.mark.slow
@settings(deadline=None)
@given(messages=_JSON | st.lists(_MESSAGE_LIKE, min_size=1, max_size=4))
def test_any_json_gets_a_200_or_a_400_never_an_exception(messages):
    """The scripted API answers any body with a response: a 400 invalid_request_error or a reply."""
    request = httpx2.Request("POST", "http://x/v1/messages", json=body(messages))
    response = ScriptedClaude().handle(request)
    event(f"status {response.status_code}")
    assert response.status_code in (200, 400)
    if response.status_code == 400:
        assert response.json()["error"]["type"] == "invalid_request_error"
