"""The re-check's process boundary (resumable_core/course/grading/rpc.py): only data crosses, and what
crosses from the learner's side is rebuilt, never trusted."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import pytest

from resumable_core import Checkpoint, Effect, new_checkpoint
from resumable_core.course.grading import rpc
from resumable_core.errors import CheckpointError


class Tools:
    """A checker-side object handed to the learner's side."""

    secret = "not a module"

    def __init__(self) -> None:
        self.calls: list[str] = []

    def effect(self, name: str) -> Effect:
        self.calls.append(name)
        return Effect.READ_ONLY

    def _private(self) -> str:
        return "never"


def reconcile(cp: Checkpoint, tools) -> Checkpoint:
    """A learner's function: calls back into the checker's tools while it runs."""
    tools.effect("read_file")
    return cp.model_copy(update={"turns": cp.turns + 1})


def _refuse(cp: Checkpoint) -> None:
    raise CheckpointError(None, "refused: " + cp.task)


@pytest.fixture
def pair():
    """A checker session and a learner session serving ``reconcile`` on a thread, over a socketpair."""
    a, b = socket.socketpair()
    names = {"reconcile": reconcile, "refuse": _refuse, "value": {"A": (1, 2.5), "p": Path("/x")}, "os": os}
    learner = rpc.Session(b, serves=frozenset({"call", "getattr", "builtin", "get"}), names=names)
    thread = threading.Thread(target=learner.serve_forever, daemon=True)
    thread.start()
    checker = rpc.Session(a)
    yield checker, learner
    a.close()
    thread.join(timeout=5)


def _call(session: rpc.Session, name: str, *args):
    return session.request({"op": "call", "target": name, "args": session.encode(list(args))})


def test_values_cross_as_equal_copies(pair):
    """Dicts, tuples, floats and paths come back equal, as their own types."""
    checker, _ = pair
    assert checker.request({"op": "get", "name": "value"}) == {"A": (1, 2.5), "p": Path("/x")}


def test_a_checkpoint_crosses_by_value_and_callbacks_reach_the_checkers_object(pair):
    """The learner's function gets a proxy of the checker's tools; the Checkpoint it returns is rebuilt and valid."""
    checker, _ = pair
    tools = Tools()
    out = _call(checker, "reconcile", new_checkpoint("t"), tools)
    assert isinstance(out, Checkpoint) and out.turns == 1 and tools.calls == ["read_file"]


def test_a_raised_error_is_rebuilt_as_a_subclass_of_its_known_class(pair):
    """A CheckpointError raised on the learner's side is a CheckpointError here, with its message."""
    checker, _ = pair
    with pytest.raises(CheckpointError, match="refused: t"):
        _call(checker, "refuse", new_checkpoint("t"))


def test_private_attributes_and_modules_are_not_handed_across(pair):
    """A reference answers no underscore name and never a module: no walk to the other side's globals."""
    checker, _ = pair
    with pytest.raises(AttributeError, match="no public attribute"):
        checker.request({"op": "getattr", "target": "reconcile", "name": "__globals__"})
    with pytest.raises(AttributeError, match="module"):
        os_ref = checker.request({"op": "get", "name": "os"})
        os_ref.path  # noqa: B018 - the attribute read is the test
    tools = Tools()
    checker.objects[id(tools)] = tools  # handed over, as a check's call would
    with pytest.raises(rpc.ProtocolError, match="not served"):
        checker._serve({"op": "get", "name": "x"})  # the checker answers no name lookup
    with pytest.raises(AttributeError, match="no public attribute"):
        checker._serve({"op": "getattr", "target": id(tools), "name": "_private"})
    assert checker._serve({"op": "getattr", "target": id(tools), "name": "secret"}) == "not a module"


@pytest.mark.parametrize(
    "value, why",
    [
        ({"$model": ["os:system", {}]}, "no known class"),
        ({"$exc": {"mro": ["os:error"], "name": "x", "message": "m", "ref": {"$ref": 1}}}, None),
        ({"$theirs": 12345}, "no object"),
        ({"$float": "1e999"}, "no known class"),
        ({"$nothing": 1}, "no known class"),
        ({"a": 1, "b": 2}, "no known form"),
    ],
)
def test_malformed_values_are_protocol_errors(value, why):
    """What the protocol has no form for is refused as a ProtocolError naming why (a plain Exception for unknown errors)."""
    a, b = socket.socketpair()
    session = rpc.Session(a)
    if why is None:
        e = session.decode(value)
        assert type(e).__mro__[1] is Exception and str(e) == "m"
    else:
        with pytest.raises(rpc.ProtocolError, match=why):
            session.decode(value)
    a.close()
    b.close()


def test_an_oversized_or_broken_message_is_refused():
    """A length over the cap or a payload that is not a JSON object is a ProtocolError, read no further."""
    a, b = socket.socketpair()
    b.sendall((rpc.MAX_MESSAGE + 1).to_bytes(4, "big"))
    with pytest.raises(rpc.ProtocolError, match="over the cap"):
        rpc.receive(a)
    b.sendall((3).to_bytes(4, "big") + b"[1]")
    with pytest.raises(rpc.ProtocolError, match="not an object"):
        rpc.receive(a)
    a.close()
    b.close()


def test_a_learner_process_that_ends_mid_call_is_named():
    """EOF in the middle of a call raises ProcessEndedError, and the session takes no more calls."""
    a, b = socket.socketpair()
    session = rpc.Session(a)
    b.close()
    with pytest.raises(rpc.ProcessEndedError, match="ended during the call"):
        session.request({"op": "get", "name": "x"})
    with pytest.raises(rpc.ProtocolError):
        session.request({"op": "get", "name": "x"})


def test_an_object_from_before_a_fork_is_refused_in_the_child():
    """A session used in a forked child raises StaleProxyError there instead of sharing the parent's stream."""
    a, b = socket.socketpair()
    session = rpc.Session(a)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            session.request({"op": "get", "name": "x"})
            os.write(w, b"no")
        except rpc.StaleProxyError:
            os.write(w, b"ok")
        os._exit(0)
    os.waitpid(pid, 0)
    assert os.read(r, 2) == b"ok"
    a.close()
    b.close()
