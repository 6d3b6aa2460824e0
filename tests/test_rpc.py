"""The grader's data-only channel (resumable_core/course/grading/recheck/rpc/): only data crosses, and what
arrives is rebuilt by the receiver, never trusted."""

from __future__ import annotations

import base64
import contextlib
import json
import math
import os
import socket
import sys
import threading
import types
from collections.abc import Callable, Iterator
from typing import Any

import anthropic.types
import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from resumable_core import Checkpoint, Effect, PendingToolUse, new_checkpoint
from resumable_core.course.grading.recheck import rpc
from resumable_core.errors import CheckpointCorruptError, CheckpointError, ResumableError

MODELS: dict[str, type] = {
    "Checkpoint": Checkpoint,
    "PendingToolUse": PendingToolUse,
    "Message": anthropic.types.Message,
}
ENUMS = {"Effect": Effect}
EXCEPTIONS: dict[str, type[Exception]] = {
    "ResumableError": ResumableError,
    "CheckpointError": CheckpointError,
    "NotDataError": rpc.NotDataError,
    "OSError": OSError,
    "EOFError": EOFError,
}
CODEC = rpc.Codec(models=MODELS, enums=ENUMS, exceptions=EXCEPTIONS)

FUZZ = settings(deadline=None)  # as many examples as the profile says: 100, fixed under CI (Hypothesis's "ci")


def _wire(value: Any, sender: rpc.Codec = CODEC, receiver: rpc.Codec = CODEC) -> Any:
    """``value`` sent as a reply's bytes by ``sender`` and decoded by ``receiver``."""
    data = json.dumps({"op": "return", "value": sender.encode(value)}, allow_nan=False).encode()
    return receiver.decode(rpc.parse(data)["value"])


def _same(a: Any, b: Any) -> bool:
    """Equal, of exactly the same types all the way down (a nan equals a nan)."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return (math.isnan(a) and math.isnan(b)) or a == b
    if type(a) in (list, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if type(a) is dict:
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a.items(), b.items()))
    return bool(a == b)


def _nested(depth: int, wrap: Callable[[Any], Any] = lambda v: [v]) -> Any:
    """A 0 wrapped ``depth`` times (in a list by default)."""
    value: Any = 0
    for _ in range(depth):
        value = wrap(value)
    return value


def _checkpoint() -> Checkpoint:
    cp = new_checkpoint("read the file", run_id="run_rpc")
    cp.messages.append({"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "read"}]})
    cp.pending_tool_use = PendingToolUse(id="toolu_1", name="read", input={"path": "ü.txt", "n": [1, 2.5]})
    return cp


def _message() -> anthropic.types.Message:
    return anthropic.types.Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-x",
            "content": [
                {"type": "text", "text": "hé"},
                {"type": "tool_use", "id": "toolu_1", "name": "r", "input": {}},
            ],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 3, "output_tokens": 4},
        }
    )


# -- the codec: what is data --------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        False,
        0,
        -7,
        2**1000,
        -(10**4000),
        1.5,
        -0.0,
        math.inf,
        -math.inf,
        math.nan,
        "",
        "ünï\u00a0cødé \U0001f600 \u0000",
        b"",
        b"\x00\xff raw",
        [],
        (),
        {},
        [1, [2, [3, (4, 5)]]],
        ([], (), {}),
        {1: "int", 2.5: "float", None: "none", (1, "a"): "tuple", b"k": "bytes", "s": "str"},
        {"a": [{"b": ({(1, 2): [b"x", math.inf]},)}]},
        {True: "bool", 0: "int", math.inf: "inf", -0.5: "float"},
        [(1,), [1], {1: 1}, "1", b"1", 1.0, True],
    ],
    ids=lambda v: type(v).__name__,
)
def test_data_round_trips_with_exact_types(value):
    """Every form of data arrives equal and of exactly its types, nested ones included."""
    assert _same(_wire(value), value)


def test_dict_keys_keep_their_order_and_types():
    """A dict's keys arrive in order and of their own types (a True key stays a bool, even in a tuple)."""
    out = _wire({True: "a", "1": "b", (True,): "c", b"1": "d"})

    assert [type(k) for k in out] == [bool, str, tuple, bytes]
    assert [type(k) for k in list(out)[2]] == [bool]


@pytest.mark.parametrize("make", [_checkpoint, lambda: _checkpoint().pending_tool_use, _message])
def test_model_of_the_table_is_rebuilt(make):
    """A model of the table arrives as a new instance of its class, equal by model_dump."""
    value = make()

    out = _wire(value)

    assert type(out) is type(value)
    assert out is not value
    assert out.model_dump() == value.model_dump()


def test_model_is_rebuilt_as_the_receivers_class():
    """The receiver rebuilds a model with its own class of that name, by validation."""

    class Mine(Checkpoint):
        pass

    receiver = rpc.Codec(models={"Checkpoint": Mine})
    value = _checkpoint()

    out = _wire(value, receiver=receiver)

    assert type(out) is Mine
    assert out.model_dump() == value.model_dump()


def test_models_inside_data():
    """Models and enums nested in lists, tuples and dicts are rebuilt in place."""
    value = {"cps": [_checkpoint(), (_message(), Effect.SIDE_EFFECT)], Effect.READ_ONLY: None}

    out = _wire(value)

    assert type(out["cps"][0]) is Checkpoint
    assert out["cps"][0].model_dump() == value["cps"][0].model_dump()  # type: ignore[index, union-attr]
    assert type(out["cps"][1][0]) is anthropic.types.Message
    assert out["cps"][1][1] is Effect.SIDE_EFFECT
    assert list(out)[1] is Effect.READ_ONLY


@pytest.mark.parametrize("member", list(Effect))
def test_enum_member_is_rebuilt(member):
    """An enum member arrives as the receiver's member of that value, not a plain str."""
    out = _wire(member)

    assert out is member
    assert type(out) is Effect


class Thing:
    """A class the learner made."""


class Sneaky(str):
    """A str that is equal to everything."""

    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = str.__hash__


class Evil(Checkpoint):
    """A model of the table's class's family that is not in the table, equal to everything."""

    def __eq__(self, other: object) -> bool:
        return True


class MyDict(dict):
    """A dict subclass."""


class MyList(list):
    """A list subclass."""


def _generator() -> Iterator[int]:
    yield 1


@pytest.mark.parametrize(
    ("make", "name"),
    [
        pytest.param(Thing, "Thing", id="instance"),
        pytest.param(lambda: _wire, "function", id="function"),
        pytest.param(lambda: Thing, "type", id="class"),
        pytest.param(lambda: os, "module", id="module"),
        pytest.param(lambda: Sneaky("x"), "Sneaky", id="str-subclass"),
        pytest.param(lambda: MyDict(a=1), "MyDict", id="dict-subclass"),
        pytest.param(lambda: MyList([1]), "MyList", id="list-subclass"),
        pytest.param(lambda: Evil(task="t", messages=[]), "Evil", id="model-subclass"),
        pytest.param(_generator, "generator", id="generator"),
        pytest.param(sys._getframe, "frame", id="frame"),
        pytest.param(lambda: {1, 2}, "set", id="set"),
        pytest.param(lambda: print, "builtin_function_or_method", id="builtin"),
    ],
)
def test_not_data_is_refused_on_encode(make, name):
    """Anything but data is a NotDataError naming its type, alone or deep inside data."""
    value = make()

    wrappers = [value, [value], {"k": (value,)}] + ([{value: 1}] if _hashable(value) else [])
    for wrapped in wrappers:
        with pytest.raises(rpc.NotDataError) as e:
            CODEC.encode(wrapped)

        assert name in e.value.what
        assert name in str(e.value)


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def test_a_class_of_the_table_is_not_data():
    """A model or enum class itself (not an instance) is not data."""
    for value in (Checkpoint, Effect):
        with pytest.raises(rpc.NotDataError) as e:
            CODEC.encode(value)

        assert e.value.what == f"a {type(value).__qualname__}"  # its metaclass


def test_encode_stops_at_max_depth():
    """Data nested to MAX_DEPTH is encoded; one level deeper is NotDataError."""
    assert _same(_wire(_nested(rpc.MAX_DEPTH)), _nested(rpc.MAX_DEPTH))
    with pytest.raises(rpc.NotDataError, match="nested too deeply"):
        CODEC.encode(_nested(rpc.MAX_DEPTH + 1))


def test_handles_cross_as_names_the_receiver_resolves():
    """An object crosses as the sender's handle, and arrives as what the receiver's Handles makes of it."""

    class Tools:
        pass

    tools, stand_in = Tools(), object()
    seen = []

    class Issued:
        def export(self, value: Any) -> tuple[str, int] | None:
            return ("tools", 7) if value is tools else None

        def resolve(self, kind: str, number: int) -> Any:
            raise rpc.ProtocolError("nothing is resolved here")

    class Resolving(rpc.NoHandles):
        def resolve(self, kind: str, number: int) -> Any:
            seen.append((kind, number))
            return stand_in

    sender, receiver = rpc.Codec(handles=Issued()), rpc.Codec(handles=Resolving())

    assert sender.encode([tools]) == [{"$handle": ["tools", 7]}]
    assert _wire({"t": tools}, sender, receiver) == {"t": stand_in}
    assert seen == [("tools", 7)]
    with pytest.raises(rpc.NotDataError, match="Tools"):
        rpc.Codec().encode(tools)  # a side that hands out nothing


# -- the codec: what is refused on arrival ----------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "match"),
    [
        pytest.param({"$nope": 1}, "no value tagged", id="unknown-tag"),
        pytest.param({"op": "x"}, "no value tagged", id="untagged-dict"),
        pytest.param({}, "no known form", id="empty-dict"),
        pytest.param({"$tuple": [], "$dict": []}, "no known form", id="two-keys"),
        pytest.param({"$tuple": 3}, "not a list", id="tuple-not-list"),
        pytest.param({"$model": ["Evil", {"task": "t", "messages": []}]}, "no model 'Evil'", id="model-not-in-table"),
        pytest.param(
            {"$model": ["Checkpoint", {"task": 3}]}, r"\$model value could not be rebuilt", id="model-invalid"
        ),
        pytest.param({"$model": ["Checkpoint", {"task": "t", "messages": [], "os": 1}]}, "rebuilt", id="model-extra"),
        pytest.param({"$model": "Checkpoint"}, "not \\[name, value\\]", id="model-not-pair"),
        pytest.param({"$enum": ["Effect", "delete_everything"]}, r"\$enum value could not be rebuilt", id="enum-value"),
        pytest.param({"$enum": ["Color", "red"]}, "no enum", id="enum-not-in-table"),
        pytest.param({"$handle": ["tools", 1]}, "none is accepted", id="handle-refused"),
        pytest.param({"$handle": ["tools", "1"]}, "not an int", id="handle-not-int"),
        pytest.param({"$dict": [[1, 2, 3]]}, "not a \\[key, value\\] pair", id="dict-triple"),
        pytest.param({"$dict": [1]}, "not a \\[key, value\\] pair", id="dict-not-pair"),
        pytest.param({"$dict": [[[1], 2]]}, "could not be rebuilt .TypeError", id="unhashable-key"),
        pytest.param({"$dict": [[{"$dict": []}, 2]]}, "could not be rebuilt .TypeError", id="dict-key"),
        pytest.param({"$bytes": "not base64!"}, r"\$bytes value could not be rebuilt", id="bytes-not-base64"),
        pytest.param({"$bytes": "ünï"}, r"\$bytes value could not be rebuilt", id="bytes-not-ascii"),
        pytest.param({"$bytes": [1]}, "not base64", id="bytes-not-text"),
        pytest.param({"$float": "1.5"}, "not inf", id="float-finite"),
        pytest.param({"$float": ["inf"]}, "not inf", id="float-list"),
        pytest.param(_nested(rpc.MAX_DEPTH + 1), "nested too deeply", id="deep-list"),
        pytest.param(_nested(rpc.MAX_DEPTH + 1, lambda v: {"$tuple": [v]}), "nested too deeply", id="deep-tuple"),
        pytest.param(_nested(rpc.MAX_DEPTH + 1, lambda v: {"$dict": [[1, v]]}), "nested too deeply", id="deep-dict"),
    ],
)
def test_decode_refuses(value, match):
    """A value outside the protocol is a ProtocolError saying why, never another error."""
    with pytest.raises(rpc.ProtocolError, match=match) as e:
        CODEC.decode(value)

    assert type(e.value) is rpc.ProtocolError
    assert e.value.__cause__ is None


def test_decode_accepts_max_depth():
    """A value nested exactly MAX_DEPTH deep is accepted."""
    assert CODEC.decode(_nested(rpc.MAX_DEPTH)) == _nested(rpc.MAX_DEPTH)


def test_invalid_model_is_not_pydantics_error():
    """Data that fails the model's validation is a ProtocolError, not pydantic's ValidationError."""
    with pytest.raises(rpc.ProtocolError) as e:
        CODEC.decode({"$model": ["PendingToolUse", {"id": 1}]})

    assert not isinstance(e.value, pydantic.ValidationError)
    assert "ValidationError" in e.value.reason


def test_bytes_on_the_wire_are_base64():
    """Bytes cross as base64 text."""
    assert CODEC.encode(b"\x00\xff") == {"$bytes": base64.b64encode(b"\x00\xff").decode()}


# -- framing --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"not json", id="not-json"),
        pytest.param(b"", id="empty"),
        pytest.param(b"[1, 2]", id="array"),
        pytest.param(b'"op"', id="string"),
        pytest.param(b'{"args": []}', id="no-op"),
        pytest.param(b'{"op": 1}', id="op-not-str"),
        pytest.param(b'{"op": "x\xff\xfe"}', id="bad-utf8"),
        pytest.param(b'{"op": "x", "args": [' + b"1" * 10_000 + b"]}", id="huge-int"),
        pytest.param(b"[" * 100_000 + b"]" * 100_000, id="deep"),
        pytest.param(b'{"op": "x", "a": ' + b"{" * 100_000, id="deep-unclosed"),
    ],
)
def test_parse_refuses(data):
    """A message that is not a JSON object with a str op is a ProtocolError (never RecursionError, ValueError)."""
    with pytest.raises(rpc.ProtocolError) as e:
        rpc.parse(data)

    assert type(e.value) is rpc.ProtocolError


def test_parse_accepts_an_object_with_an_op():
    """A JSON object with a string op is a message."""
    assert rpc.parse(b'{"op": "go", "args": [1]}') == {"op": "go", "args": [1]}


@pytest.fixture
def socks() -> Iterator[tuple[socket.socket, socket.socket]]:
    """Two connected stream sockets, closed after the test."""
    a, b = socket.socketpair()
    a.settimeout(5)
    b.settimeout(5)
    yield a, b
    a.close()
    b.close()


def test_send_and_receive(socks):
    """A message sent is the message received, length-prefixed."""
    a, b = socks

    rpc.send(a, {"op": "go", "args": ["ü", 1]})
    rpc.send(a, {"op": "again"})

    assert rpc.receive(b) == {"op": "go", "args": ["ü", 1]}
    assert rpc.receive(b) == {"op": "again"}


def test_receive_refuses_an_oversized_length_without_reading_it(socks):
    """A length over MAX_MESSAGE is a ProtocolError before any of the body is read."""
    a, b = socks
    a.sendall((rpc.MAX_MESSAGE + 1).to_bytes(4, "big") + b"body")

    with pytest.raises(rpc.ProtocolError, match="over the cap"):
        rpc.receive(b)

    assert b.recv(100) == b"body"


def test_receive_at_the_end(socks):
    """The end of the stream, before or inside a message, is EOFError."""
    a, b = socks
    a.sendall((10).to_bytes(4, "big") + b"{}")
    a.close()

    with pytest.raises(EOFError):
        rpc.receive(b)
    with pytest.raises(EOFError):
        rpc.receive(b)


@pytest.mark.slow
def test_send_refuses_an_oversized_message(socks):
    """A message over MAX_MESSAGE is a ValueError and nothing is written."""
    a, b = socks

    with pytest.raises(ValueError, match="cap"):
        rpc.send(a, {"op": "x", "args": ["x" * rpc.MAX_MESSAGE]})

    b.setblocking(False)
    with pytest.raises(BlockingIOError):
        b.recv(1)


# -- the session ----------------------------------------------------------------------------------


class Oops(Exception):
    """An error of a class no table holds."""


class Served:
    """A session serving ``ops`` on a thread over a socketpair; ``client`` requests them."""

    def __init__(self, ops: dict[str, Callable[..., Any]], client_ops: dict[str, Callable[..., Any]] | None = None):
        a, b = socket.socketpair()
        a.settimeout(10)
        b.settimeout(10)
        self.client = rpc.Session(a, CODEC, client_ops)
        self.server = rpc.Session(b, CODEC, ops)
        self.escaped: list[BaseException] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            self.server.serve_forever()
        except BaseException as e:  # noqa: BLE001 - recorded: nothing may escape serve_forever
            self.escaped.append(e)
        finally:
            self.server.sock.close()  # as the serving process ends

    def close(self) -> None:
        self.client.sock.close()
        self.thread.join(timeout=10)
        assert not self.thread.is_alive()
        assert self.escaped == []


@pytest.fixture
def served() -> Iterator[Callable[..., Served]]:
    """Start a served session; each is closed and checked after the test."""
    made: list[Served] = []

    def make(ops: dict[str, Callable[..., Any]], client_ops: dict[str, Callable[..., Any]] | None = None) -> Served:
        made.append(Served(ops, client_ops))
        return made[-1]

    yield make
    for s in made:
        s.close()


def _fail_checkpoint() -> None:
    raise CheckpointCorruptError(None, "the file is not JSON")


def _fail_oops() -> None:
    raise Oops("the learner's own error")


def test_request_returns_data(served):
    """A request's args and kwargs arrive as data and its value comes back as data."""
    s = served({"echo": lambda *a, **k: (list(a), k), "cp": _checkpoint})

    assert s.client.request("echo", 1, (2, b"3"), x={4: math.inf}) == ([1, (2, b"3")], {"x": {4: math.inf}})
    out = s.client.request("cp")
    assert type(out) is Checkpoint
    assert out.model_dump() == _checkpoint().model_dump()


def test_op_error_is_rebuilt_as_the_most_specific_class_of_the_table(served):
    """An op's error comes back as a fresh subclass of the table's most specific class it is, with its text."""
    s = served({"fail": _fail_checkpoint})

    with pytest.raises(CheckpointError) as e:
        s.client.request("fail")

    assert type(e.value).__name__ == "CheckpointCorruptError"
    assert type(e.value).__bases__ == (CheckpointError,)
    assert not isinstance(e.value, CheckpointCorruptError)
    assert str(e.value) == "the file is not JSON"
    assert type(e.value).__module__ == "elsewhere"


def test_op_error_of_no_table_class_is_a_plain_exception(served):
    """An op's error of a class the table does not hold comes back as a subclass of Exception only."""
    s = served({"fail": _fail_oops})

    with pytest.raises(Exception) as e:
        s.client.request("fail")

    assert type(e.value).__name__ == "Oops"
    assert type(e.value).__bases__ == (Exception,)
    assert not isinstance(e.value, Oops)
    assert str(e.value) == "the learner's own error"


def test_op_errors_leave_the_session_usable(served):
    """After an op's error, the next request is answered."""
    s = served({"fail": _fail_oops, "one": lambda: 1})

    for _ in range(3):
        with pytest.raises(Exception, match="own error"):
            s.client.request("fail")
        assert s.client.request("one") == 1
    assert s.client.broken is None


@pytest.mark.parametrize(
    "error",
    [FileNotFoundError(2, "gone"), ConnectionResetError("reset"), TimeoutError("slow"), EOFError("short")],
    ids=type,
)
def test_op_error_like_the_channels_own_is_only_the_ops(served, error):
    """An op's OSError or EOFError comes back as such; the session neither breaks nor takes it for its end."""

    def fail() -> None:
        raise error

    s = served({"fail": fail, "one": lambda: 1})
    ended: list[bool] = []
    s.client.on_end = lambda: ended.append(True)

    with pytest.raises((OSError, EOFError)) as e:
        s.client.request("fail")

    assert type(e.value).__name__ == type(error).__name__
    assert str(e.value) == str(error)
    assert s.client.broken is None
    assert ended == []
    assert s.client.request("one") == 1


def test_op_returning_not_data_raises_not_data_error(served):
    """An op whose value is not data raises a NotDataError-derived error, and the session stays usable."""
    s = served({"leak": lambda: {"os": os}, "one": lambda: 1})

    with pytest.raises(rpc.NotDataError) as e:
        s.client.request("leak")

    assert type(e.value).__name__ == "NotDataError"
    assert type(e.value) is not rpc.NotDataError
    assert "module" in str(e.value)
    assert s.client.broken is None
    assert s.client.request("one") == 1


def test_request_of_not_data_is_refused_before_sending(served):
    """Arguments that are not data are a NotDataError on the caller's side, and nothing is sent."""
    s = served({"one": lambda: 1})

    with pytest.raises(rpc.NotDataError, match="Thing"):
        s.client.request("one", Thing())
    with pytest.raises(rpc.NotDataError, match="function"):
        s.client.request("one", key=_wire)

    assert s.client.request("one") == 1


def test_op_not_served_ends_the_serving_side(served):
    """A request for an op the other side does not serve ends its serving; the caller sees the end."""
    s = served({"one": lambda: 1})

    with pytest.raises(rpc.ProcessEndedError):
        s.client.request("nope")

    s.thread.join(timeout=5)
    assert not s.thread.is_alive()
    with pytest.raises(rpc.ProtocolError, match="ended"):
        s.client.request("one")


def test_op_not_served_breaks_the_session_with_protocol_error(served):
    """A request arriving for an op this side does not serve breaks this side's session with ProtocolError."""
    holder: list[rpc.Session] = []
    s = served({"ask_back": lambda: holder[0].request("nope")})
    holder.append(s.server)

    with pytest.raises(rpc.ProtocolError, match="'nope' is not served") as e:
        s.client.request("ask_back")

    assert type(e.value) is rpc.ProtocolError
    assert s.client.broken
    with pytest.raises(rpc.ProtocolError, match="not served"):
        s.client.request("ask_back")


def test_nested_calls_in_both_directions(served):
    """While A's request waits, B's op calls A's op, which calls B's op again; each reply reaches its caller."""
    log: list[str] = []
    sessions: dict[str, rpc.Session] = {}

    def relay(n: int) -> int:  # on B
        log.append(f"B.relay({n})")
        return sessions["B"].request("inc", n) * 10

    def inc(n: int) -> int:  # on A
        log.append(f"A.inc({n})")
        return sessions["A"].request("double", n) + 1

    def double(n: int) -> int:  # on B
        log.append(f"B.double({n})")
        return n * 2

    s = served({"relay": relay, "double": double}, client_ops={"inc": inc})
    sessions.update(A=s.client, B=s.server)

    assert s.client.request("relay", 3) == 70
    assert log == ["B.relay(3)", "A.inc(3)", "B.double(3)"]
    assert s.client.request("relay", 0) == 10


def test_nested_error_travels_back_through_the_calls(served):
    """An error raised in the innermost nested op reaches the outer caller when no op in between catches it."""
    sessions: dict[str, rpc.Session] = {}
    s = served({"relay": lambda: sessions["B"].request("fail")}, client_ops={"fail": _fail_checkpoint})
    sessions["B"] = s.server

    with pytest.raises(CheckpointError, match="not JSON"):
        s.client.request("relay")

    assert s.client.broken is None


def test_other_side_closing_mid_call(socks):
    """The other side closing during a call raises ProcessEndedError after calling on_end, and breaks the session."""
    a, b = socks
    session = rpc.Session(a, CODEC)
    ended: list[str] = []
    session.on_end = lambda: ended.append("ended")

    def other() -> None:
        rpc.receive(b)  # the request arrives, then the process dies
        b.close()

    thread = threading.Thread(target=other, daemon=True)
    thread.start()

    with pytest.raises(rpc.ProcessEndedError):
        session.request("work", 1)

    thread.join(timeout=5)
    assert ended == ["ended"]
    assert session.broken
    with pytest.raises(rpc.ProtocolError):
        session.request("work", 1)
    assert ended == ["ended"]


def test_a_reply_that_breaks_the_protocol_breaks_the_session(socks):
    """A reply with a malformed value or error body breaks the session with ProtocolError."""
    for reply in ({"op": "return", "value": {"$nope": 1}}, {"op": "raise", "error": "no body"}):
        a, b = socket.socketpair()
        a.settimeout(5)
        session = rpc.Session(a, CODEC)
        rpc.send(b, reply)  # the reply is already waiting when the request is sent

        with pytest.raises(rpc.ProtocolError) as e:
            session.request("work")

        assert type(e.value) is rpc.ProtocolError
        assert session.broken
        b.close()


def test_session_used_after_fork_is_stale(socks):
    """A session used in a forked child raises StaleSessionError there, and nothing is sent."""
    a, b = socks
    session = rpc.Session(a, CODEC)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        try:
            session.request("work")
        except rpc.StaleSessionError:
            os.write(w, b"stale")
        except BaseException as e:  # noqa: BLE001 - any other outcome is reported
            os.write(w, type(e).__name__.encode())
        else:
            os.write(w, b"returned")
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as pipe:
        report = pipe.read()
    os.waitpid(pid, 0)

    assert report == b"stale"
    b.setblocking(False)
    with pytest.raises(BlockingIOError):
        b.recv(1)


# -- fuzz -----------------------------------------------------------------------------------------

TAGS = ["$tuple", "$dict", "$model", "$handle", "$enum", "$bytes", "$float", "$nope"]
WORDS = ["inf", "-inf", "nan", "Checkpoint", "PendingToolUse", "Message", "Effect", "read_only", "tools", "AAAA", "op"]

json_leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=8)
    | st.sampled_from(WORDS)
    | st.sampled_from(TAGS)
)


def _json_children(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(max_size=4) | st.sampled_from(TAGS), children, max_size=3)
        | st.builds(lambda tag, body: {tag: body}, st.sampled_from(TAGS), children)
        | st.builds(lambda tag, name, body: {tag: [name, body]}, st.sampled_from(TAGS), children, children)
        | st.builds(lambda pairs: {"$dict": pairs}, st.lists(st.lists(children, max_size=3), max_size=3))
        | st.builds(
            lambda name, body: {"$model": [name, body]},
            st.sampled_from(list(MODELS)),
            st.fixed_dictionaries({"task": children, "messages": children, "id": children, "name": children}),
        )
    )


json_values = st.recursive(json_leaves, _json_children, max_leaves=15)
"""JSON-like values, with many shaped like the codec's tagged values and arbitrary bodies."""
small_json_values = st.recursive(json_leaves, _json_children, max_leaves=5)

message_bytes = st.binary(max_size=200) | json_values.map(lambda v: json.dumps({"op": "x", "args": v}).encode())
"""Any bytes, and the bytes of messages whose args are JSON-like values."""


@pytest.mark.slow
@FUZZ
@given(message_bytes)
def test_fuzz_parse_then_decode(data):
    """Any bytes parse then decode to a value, or raise ProtocolError; never anything else."""
    with contextlib.suppress(rpc.ProtocolError):
        CODEC.decode(rpc.parse(data).get("args"))


@pytest.mark.slow
@FUZZ
@given(json_values)
def test_fuzz_decode(value):
    """Any JSON-like value, tagged shapes with any body included, decodes or raises ProtocolError."""
    with contextlib.suppress(rpc.ProtocolError):
        CODEC.decode(value)


hashables = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=5)
    | st.binary(max_size=5),
    lambda children: st.lists(children, max_size=3).map(tuple),
    max_leaves=6,
)

data_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.binary(max_size=20),
    lambda children: (
        st.lists(children, max_size=4)
        | st.lists(children, max_size=4).map(tuple)
        | st.dictionaries(hashables, children, max_size=4)
    ),
    max_leaves=15,
)


@pytest.mark.slow
@FUZZ
@given(data_values)
def test_fuzz_round_trip(value):
    """Any data value crosses the wire equal and of exactly the same types."""
    assert _same(_wire(value), value)


frames = st.lists(
    st.binary(max_size=64).map(lambda b: len(b).to_bytes(4, "big") + b)
    | small_json_values.map(lambda v: json.dumps({"op": "echo", "args": [v], "kwargs": {"$dict": []}}).encode()).map(
        lambda b: len(b).to_bytes(4, "big") + b
    )
    | st.builds(
        lambda op, args, kwargs: json.dumps({"op": op, "args": args, "kwargs": kwargs}).encode(),
        st.sampled_from(["echo", "fail", "leak", "return", "raise", "nope"]),
        small_json_values,
        small_json_values,
    ).map(lambda b: len(b).to_bytes(4, "big") + b)
    | st.binary(max_size=16),  # raw bytes: a torn or lying length prefix
    max_size=4,
)
"""Streams of frames: random payloads, echo requests of JSON-like args, requests of any op, raw bytes."""


@pytest.mark.slow
@FUZZ
@given(frames)
def test_fuzz_serve_forever_never_raises(stream):
    """Whatever bytes arrive, serve_forever returns; no exception escapes it."""
    s = Served({"echo": lambda *a, **k: a, "fail": _fail_oops, "leak": lambda: types})
    try:
        s.client.sock.sendall(b"".join(stream))
        s.client.sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass  # the server stopped reading and closed: fine
    s.thread.join(timeout=10)

    assert not s.thread.is_alive()
    assert s.escaped == []
    s.client.sock.close()
