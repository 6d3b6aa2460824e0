"""One connection: requests by op name, replies of data, and calls in both directions while one is in progress.

A request is ``{"op": name, "args": [...], "kwargs": {...}}``, its reply ``{"op": "return", "value":
...}`` or ``{"op": "raise", "error": ...}``. A side answers only the ops of its own table: a
function per op name, called with the decoded arguments. While a request waits for its reply, the
other side may send requests of its own (the learner's ``reconcile`` calls the checker's
``tools.execute``); they are answered in turn. The session knows nothing of learners or checks.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Mapping
from typing import Any

from ....errors import CourseError
from . import framing
from .codec import Codec
from .errors import NotDataError, ProcessEndedError, ProtocolError

Op = Callable[..., Any]


class StaleSessionError(CourseError, RuntimeError):
    """A session was used in a process other than the one that opened it (after a fork); ``.pid`` is that one."""

    def __init__(self, pid: int) -> None:
        super().__init__(f"a session opened in process {pid} was used in process {os.getpid()}, a fork of it")
        self.pid = pid


class Session:
    """One connection's calls: ``request`` ops of the other side, answer ``ops`` of this one."""

    def __init__(
        self, sock: socket.socket, codec: Codec, ops: Mapping[str, Op] | None = None, *, peer: str = "the other process"
    ) -> None:
        self.sock = sock
        self.peer = peer
        """What the other side is called in errors."""
        self.codec = codec
        self.ops = dict(ops or {})
        self.pid = os.getpid()
        self.broken: str | None = None
        self.on_end: Callable[[], None] | None = None
        """Called when the other side ends the connection in the middle of a call (before the error is raised)."""

    def request(self, op: str, *args: Any, **kwargs: Any) -> Any:
        """Call the other side's ``op``; answer its requests until the reply comes; return or raise it."""
        if os.getpid() != self.pid:
            raise StaleSessionError(self.pid)
        if self.broken:
            raise ProtocolError(self.broken)
        message = {"op": op, "args": self.codec.encode(list(args)), "kwargs": self.codec.encode(kwargs)}
        try:
            framing.send(self.sock, message)
            while True:
                reply = framing.receive(self.sock)
                if reply["op"] == "return":
                    return self.codec.decode(reply.get("value"))
                if reply["op"] == "raise":
                    error = self.codec.decode_exception(reply.get("error"))
                    if type(error) is ProtocolError:  # a raise of no exception: the protocol broke
                        raise error
                    break  # raised below, where it is not taken for this connection's own (a ProtocolError, an OSError)
                self._answer(reply)
        except (EOFError, ConnectionError):
            self._break(f"{self.peer} ended")
            if self.on_end is not None:
                self.on_end()
            raise ProcessEndedError(self.peer) from None
        except ProtocolError as e:
            self._break(e.reason)
            raise
        except OSError as e:
            self._break(f"the connection broke ({type(e).__name__})")
            raise ProtocolError(self.broken or "the connection broke") from None
        except BaseException as e:
            if not isinstance(e, Exception):  # a timeout or interrupt mid-call leaves the stream out of step
                self._break(f"a call was interrupted ({type(e).__name__})")
            raise
        raise error

    def _break(self, why: str) -> None:
        self.broken = self.broken or why
        self.sock.close()  # the other side sees the end and stops

    def _answer(self, message: dict[str, Any]) -> None:
        """Serve one request of the other side and send its reply (a broken protocol breaks the session)."""
        fn = self.ops.get(message["op"])
        if fn is None:
            raise ProtocolError(f"the op {message['op'][:40]!r} is not served here")
        args = self.codec.decode(message.get("args", []))
        kwargs = self.codec.decode(message.get("kwargs", {"$dict": []}))
        if type(args) is not list or type(kwargs) is not dict or not all(type(k) is str for k in kwargs):
            raise ProtocolError("arguments of no known form")
        try:
            reply = {"op": "return", "value": self.codec.encode(fn(*args, **kwargs))}
        except ProtocolError as e:
            if not isinstance(e, NotDataError):
                raise
            reply = {"op": "raise", "error": self.codec.encode_exception(e)}
        except Exception as e:  # noqa: BLE001 - the op's own error goes back to the caller, as data
            reply = {"op": "raise", "error": self.codec.encode_exception(e)}
        try:
            framing.send(self.sock, reply)
        except ValueError as e:  # over the cap: the caller learns why instead
            framing.send(self.sock, {"op": "raise", "error": self.codec.encode_exception(e)})

    def serve_forever(self) -> None:
        """Answer requests until the other side closes the connection or breaks the protocol."""
        while True:
            try:
                message = framing.receive(self.sock)
                self._answer(message)
            except (EOFError, OSError, ProtocolError):
                self.sock.close()  # the other side sees the end at once, not when this process exits
                return
