"""The re-check's process boundary: the checker calls the learner's functions in another process.

The checker process holds the checks (hidden ones included) and never runs a line of the
learner's code; the learner's process (:mod:`.learner_server`) holds the notebook's names and
cannot import the hidden checks. They talk over a Unix socket, one :class:`Session` per connection,
in length-prefixed JSON messages. Either side may call the other's objects while a call of its own
is in progress (a learner's ``reconcile`` calls the checker's ``tools.execute``).

Only data crosses: plain JSON values, tuples, paths, bytes, and allowlisted pydantic models and
enums (``resumable_core``'s and ``anthropic``'s), each rebuilt by validation; exceptions are
rebuilt by class name as a subclass of the nearest known class. Any other object stays where it is
and crosses as a reference, which the other side uses through a :class:`Proxy`. A reference
answers no private attribute (a leading underscore) and never hands out a module, so the learner's
side cannot walk from the checker's objects to its globals.
"""

from __future__ import annotations

import base64
import enum
import importlib
import json
import math
import operator
import os
import socket
import types
from collections.abc import Callable
from pathlib import Path, PurePath
from typing import Any

MAX_MESSAGE = 32 << 20
"""Bytes of the largest message either side accepts."""
MAX_DEPTH = 200
"""Nesting of the deepest value either side encodes or accepts."""
MODEL_MODULES = ("resumable_core", "anthropic")
"""Whose pydantic models and enums cross by value."""
EXCEPTION_MODULES = ("builtins", "resumable_core", "anthropic", "pydantic")
"""Whose exception classes a raised exception may be rebuilt as."""
BUILTIN_OPS: dict[str, Callable[..., Any]] = {
    "len": len,
    "iter": iter,
    "next": next,
    "bool": bool,
    "str": str,
    "repr": repr,
    "getitem": operator.getitem,
    "contains": operator.contains,
    "eq": operator.eq,
}
"""The operations a :class:`Proxy` forwards for Python's protocols (``len(p)``, ``p[k]``, ...)."""


class ProtocolError(Exception):
    """The other side broke the protocol (a malformed, oversized or unknown message); ``.reason`` says how."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"the learner's process broke the re-check protocol: {reason}")
        self.reason = reason


class ProcessEndedError(Exception):
    """The other process ended in the middle of a call (it exited, crashed or hit a limit of its sandbox)."""

    def __init__(self) -> None:
        super().__init__("the learner's process ended during the call (it exited, crashed or hit a limit)")


class StaleProxyError(RuntimeError):
    """A remote object was used in a process other than the one that received it (after a fork)."""


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise EOFError("the other side closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def send(sock: socket.socket, message: dict[str, Any]) -> None:
    """Write one message (4-byte big-endian length, then JSON)."""
    data = json.dumps(message, separators=(",", ":")).encode()
    if len(data) > MAX_MESSAGE:
        raise ValueError(f"a message of {len(data) >> 20} MiB is over the {MAX_MESSAGE >> 20} MiB cap")
    sock.sendall(len(data).to_bytes(4, "big") + data)


def receive(sock: socket.socket) -> dict[str, Any]:
    """Read one message; :class:`ProtocolError` if it is oversized or not a JSON object."""
    size = int.from_bytes(_recv_exact(sock, 4), "big")
    if size > MAX_MESSAGE:
        raise ProtocolError(f"a message of {size} bytes is over the cap")
    try:
        message = json.loads(_recv_exact(sock, size))
    except (ValueError, RecursionError) as e:
        raise ProtocolError(f"a message is not JSON ({type(e).__name__})") from None
    if not isinstance(message, dict) or not isinstance(message.get("op"), str):
        raise ProtocolError("a message is not an object with an op")
    return message


def _path_of(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def _known_class(path: Any, packages: tuple[str, ...]) -> type | None:
    """The class ``module:qualname`` names, if its module is in ``packages`` (imported if need be)."""
    if not isinstance(path, str) or ":" not in path:
        return None
    module_name, qualname = path.split(":", 1)
    if not _within(module_name, packages) or module_name.endswith("__main__"):
        return None
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError:
        return None
    for part in qualname.split("."):
        if part.startswith("_") or obj is None:
            return None
        obj = getattr(obj, part, None)
    return obj if isinstance(obj, type) else None


def _crosses_by_value(value: Any) -> bool:
    return _within(type(value).__module__ or "", MODEL_MODULES)


def _rebuilt(base: type[BaseException], name: str, message: str) -> BaseException:
    """An instance of a subclass of ``base`` named ``name`` whose text is ``message``."""

    def init(self: BaseException, text: str) -> None:
        BaseException.__init__(self, text)

    def text(self: BaseException) -> str:
        return str(self.args[0])

    cls = type(name, (base,), {"__init__": init, "__str__": text, "__module__": "learner"})
    return cls(message)


class Proxy:
    """An object of the other side: attribute reads, calls and Python's protocols go across."""

    __slots__ = ("_rpc_ref", "_rpc_session")

    def __init__(self, session: Session, ref: int | str) -> None:
        object.__setattr__(self, "_rpc_session", session)
        object.__setattr__(self, "_rpc_ref", ref)

    def _rpc(self, op: str, **fields: Any) -> Any:
        session: Session = object.__getattribute__(self, "_rpc_session")
        return session.request({"op": op, "target": object.__getattribute__(self, "_rpc_ref"), **fields})

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return self._rpc("getattr", name=name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        session: Session = object.__getattribute__(self, "_rpc_session")
        return self._rpc("call", args=session.encode(list(args)), kwargs=session.encode(kwargs))

    def rpc_beside(self, probe: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``probe(<this object>, *args, **kwargs)``, run on the other side (see :func:`..checks.support.beside`)."""
        session: Session = object.__getattribute__(self, "_rpc_session")
        fields = {"probe": _path_of_function(probe), "args": session.encode(list(args))}
        return self._rpc("probe", **fields, kwargs=session.encode(kwargs))

    def _builtin(self, name: str, *args: Any) -> Any:
        session: Session = object.__getattribute__(self, "_rpc_session")
        return self._rpc("builtin", name=name, args=session.encode(list(args)))

    def __len__(self) -> int:
        return int(self._builtin("len"))

    def __iter__(self) -> Any:
        return self._builtin("iter")

    def __next__(self) -> Any:
        return self._builtin("next")

    def __bool__(self) -> bool:
        return bool(self._builtin("bool"))

    def __str__(self) -> str:
        return str(self._builtin("str"))

    def __repr__(self) -> str:
        return f"<remote {self._builtin('repr')}>"

    def __getitem__(self, key: Any) -> Any:
        return self._builtin("getitem", key)

    def __contains__(self, item: Any) -> bool:
        return bool(self._builtin("contains", item))

    def __eq__(self, other: object) -> bool:
        return bool(self._builtin("eq", other))

    __hash__ = object.__hash__


def _path_of_function(fn: Callable[..., Any]) -> str:
    return f"{fn.__module__}:{fn.__qualname__}"


class Session:
    """One connection's two object tables and its calls; ``serves`` names the ops this side answers.

    The checker's side serves ``call``, ``getattr`` and ``builtin`` on the objects it handed over;
    the learner's side serves those, ``get`` (a name of the notebook), ``probe`` and ``loaded`` (how
    loading the notebook went).
    """

    def __init__(
        self,
        sock: socket.socket,
        *,
        serves: frozenset[str] = frozenset({"call", "getattr", "builtin"}),
        names: dict[str, Any] | None = None,
        probes: Callable[[str], Callable[..., Any]] | None = None,
        loaded: list[dict[str, Any]] | None = None,
    ) -> None:
        self.sock = sock
        self.pid = os.getpid()
        self.serves = serves
        self.names = names if names is not None else {}
        self.probes = probes
        self.loaded = loaded if loaded is not None else []
        self.objects: dict[int, Any] = {}  # what this side handed out, by reference number
        self.broken: str | None = None

    # -- values ------------------------------------------------------------------------------

    def _export(self, value: Any) -> dict[str, Any]:
        ref = id(value)
        self.objects[ref] = value
        return {"$ref": ref}

    def encode(self, value: Any, depth: int = 0) -> Any:
        """``value`` as JSON: by value where it may cross, else as a reference to it."""
        if depth > MAX_DEPTH:
            raise ValueError("a value nested too deeply to send")
        if value is None or isinstance(value, bool | int | str):
            return value
        if isinstance(value, float):
            return value if math.isfinite(value) else {"$float": repr(value)}
        if isinstance(value, list):
            return [self.encode(v, depth + 1) for v in value]
        if isinstance(value, tuple):
            return {"$tuple": [self.encode(v, depth + 1) for v in value]}
        if isinstance(value, dict):
            return {"$dict": [[self.encode(k, depth + 1), self.encode(v, depth + 1)] for k, v in value.items()]}
        if isinstance(value, PurePath):
            return {"$path": str(value)}
        if isinstance(value, bytes):
            return {"$bytes": base64.b64encode(value).decode()}
        if isinstance(value, Proxy) and object.__getattribute__(value, "_rpc_session") is self:
            return {"$theirs": object.__getattribute__(value, "_rpc_ref")}
        if isinstance(value, enum.Enum) and _crosses_by_value(value):
            return {"$enum": [_path_of(type(value)), self.encode(value.value, depth + 1)]}
        if hasattr(type(value), "model_dump") and _crosses_by_value(value):
            return {"$model": [_path_of(type(value)), value.model_dump(mode="json")]}
        if isinstance(value, BaseException):
            return self._encode_exception(value)
        return self._export(value)

    def _encode_exception(self, e: BaseException) -> dict[str, Any]:
        origin = getattr(e, "_rpc_origin", None)
        if origin is not None and origin[0] is self:  # theirs, coming back: the original object
            return {"$theirs": origin[1]}
        mro = [_path_of(c) for c in type(e).__mro__ if issubclass(c, BaseException)]
        return {"$exc": {"mro": mro, "name": type(e).__name__, "message": str(e)[:2000], "ref": self._export(e)}}

    def decode(self, value: Any, depth: int = 0) -> Any:
        """A value the other side sent, rebuilt; :class:`ProtocolError` for anything not in the protocol."""
        if depth > MAX_DEPTH:
            raise ProtocolError("a value nested too deeply")
        if value is None or isinstance(value, bool | int | float | str):
            return value
        if isinstance(value, list):
            return [self.decode(v, depth + 1) for v in value]
        if not (isinstance(value, dict) and len(value) == 1):
            raise ProtocolError("a value of no known form")
        ((tag, body),) = value.items()
        try:
            return self._decode_tagged(tag, body, depth)
        except ProtocolError:
            raise
        except Exception as e:  # noqa: BLE001 - any failure to rebuild the other side's value is its fault
            raise ProtocolError(f"a {tag} value could not be rebuilt ({type(e).__name__}: {str(e)[:200]})") from None

    def _decode_tagged(self, tag: str, body: Any, depth: int) -> Any:
        if tag == "$float":
            return float(body) if body in ("inf", "-inf", "nan") else _bad(tag)
        if tag == "$tuple":
            return tuple(self.decode(body, depth + 1))
        if tag == "$dict":
            return {self.decode(k, depth + 1): self.decode(v, depth + 1) for k, v in body}
        if tag == "$path":
            return Path(body) if isinstance(body, str) else _bad(tag)
        if tag == "$bytes":
            return base64.b64decode(body, validate=True)
        if tag == "$ref":
            return Proxy(self, int(body))
        if tag == "$theirs":
            return self._own(body)
        if tag == "$name":
            if not isinstance(body, str) or body not in self.names:
                raise ProtocolError(f"no name {body!r}")
            return self.names[body]
        if tag == "$enum":
            cls = _known_class(body[0], MODEL_MODULES)
            return cls(self.decode(body[1], depth + 1)) if cls and issubclass(cls, enum.Enum) else _bad(tag)
        if tag == "$model":
            cls = _known_class(body[0], MODEL_MODULES)
            return cls.model_validate(body[1]) if cls and hasattr(cls, "model_validate") else _bad(tag)
        if tag == "$exc":
            return self._decode_exception(body)
        return _bad(tag)

    def _own(self, ref: Any) -> Any:
        if isinstance(ref, str):
            if ref not in self.names:
                raise ProtocolError(f"no name {ref!r}")
            return self.names[ref]
        if ref not in self.objects:
            raise ProtocolError("a reference to no object of this side")
        return self.objects[ref]

    def _decode_exception(self, body: Any) -> BaseException:
        base: type[BaseException] = Exception
        for path in body.get("mro") or []:
            cls = _known_class(path, EXCEPTION_MODULES)
            if cls is not None and issubclass(cls, Exception):
                base = cls
                break
        name = str(body.get("name") or "Error")
        e = _rebuilt(base, name if name.isidentifier() else "Error", str(body.get("message", "")))
        e._rpc_origin = (self, int(body["ref"]["$ref"]))  # type: ignore[attr-defined]  # marks it as theirs
        return e

    # -- calls ---------------------------------------------------------------------------------

    def request(self, message: dict[str, Any]) -> Any:
        """Send ``message``, answer the other side's calls until its reply comes, return or raise it."""
        if os.getpid() != self.pid:
            raise StaleProxyError("a remote object from before a fork was used in the forked child")
        if self.broken:
            raise ProtocolError(self.broken)
        try:
            send(self.sock, message)
            while True:
                reply = receive(self.sock)
                if reply["op"] == "return":
                    return self.decode(reply.get("value"))
                if reply["op"] == "raise":
                    error = self.decode(reply.get("error"))
                    raise error if isinstance(error, BaseException) else ProtocolError("a raise of no exception")
                self.answer(reply)
        except (EOFError, ConnectionError):
            self._break("the learner's process ended")
            raise ProcessEndedError() from None
        except BaseException as e:
            if not isinstance(e, Exception) or isinstance(e, (OSError, ProtocolError)):
                self._break(f"the connection broke ({type(e).__name__})")
            raise

    def _break(self, why: str) -> None:
        """No more calls on this connection (a timeout mid-call leaves the stream out of step)."""
        self.broken = self.broken or why
        self.sock.close()  # the other side sees EOF and ends

    def answer(self, message: dict[str, Any]) -> None:
        """Serve one call of the other side and send its reply."""
        try:
            value = self._serve(message)
            reply = {"op": "return", "value": self.encode(value)}
        except ProtocolError:
            raise
        except Exception as e:  # noqa: BLE001 - the call's own error (or its value's) goes back to the caller
            reply = {"op": "raise", "error": self._encode_exception(e)}
        try:
            send(self.sock, reply)
        except ValueError as e:  # over the cap: the caller learns why instead
            send(self.sock, {"op": "raise", "error": self._encode_exception(e)})

    def _serve(self, message: dict[str, Any]) -> Any:
        op = message["op"]
        if op not in self.serves:
            raise ProtocolError(f"the op {op!r} is not served here")
        if op == "loaded":
            return self.loaded
        if op == "get":
            name = message.get("name")
            if not isinstance(name, str) or name not in self.names:
                raise NameError(f"{name} is not defined by the notebook's cells")
            value = self.names[name]
            return {"$callable": name} if callable(value) else value
        target = self._own(message.get("target"))
        if op == "getattr":
            name = message.get("name")
            if not isinstance(name, str) or name.startswith("_"):
                raise AttributeError(f"no public attribute {name!r}")
            value = getattr(target, name)
            if isinstance(value, types.ModuleType):
                raise AttributeError(f"{name} is a module: not handed across")
            return value
        args = self.decode(message.get("args") or [])
        kwargs = self.decode(message.get("kwargs") or {"$dict": []})
        if not isinstance(args, list) or not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
            raise ProtocolError("arguments of no known form")
        if op == "builtin":
            fn = BUILTIN_OPS.get(str(message.get("name")))
            if fn is None:
                raise ProtocolError(f"no operation {message.get('name')!r}")
            return fn(target, *args)
        if op == "probe":
            if self.probes is None:
                raise ProtocolError("no probes here")
            return self.probes(str(message.get("probe")))(target, *args, **kwargs)
        return target(*args, **kwargs)  # op == "call"

    def serve_forever(self) -> None:
        """Answer calls until the other side closes the connection."""
        while True:
            try:
                message = receive(self.sock)
            except (EOFError, OSError):
                return
            self.answer(message)


def _bad(tag: str) -> Any:
    raise ProtocolError(f"a {tag} value of no known class")


class RemoteFunction:
    """A function (or other callable) of the notebook, called in the learner's process.

    It is looked up by name in every call, through the session of the calling process: a child
    forked by a check opens its own connection, and the learner's side forks a fresh copy of its
    loaded notebook for it, so a SIGKILL of the child ends only that copy.
    """

    def __init__(self, learner: Learner, name: str) -> None:
        self.learner = learner
        self.name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        session = self.learner.session()
        message = {"op": "call", "target": self.name, "args": session.encode(list(args))}
        return session.request({**message, "kwargs": session.encode(kwargs)})

    def rpc_beside(self, probe: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``probe(the function, *args, **kwargs)`` run in the learner's process, beside the function."""
        session = self.learner.session()
        message = {"op": "probe", "target": self.name, "probe": _path_of_function(probe)}
        return session.request({**message, "args": session.encode(list(args)), "kwargs": session.encode(kwargs)})

    def __repr__(self) -> str:
        return f"<the notebook's {self.name}, in the learner's process>"


class Learner:
    """The checker's end: one connection to the learner's process per process of the checker."""

    def __init__(self, address: str) -> None:
        self.address = address
        self._session: Session | None = None

    def session(self) -> Session:
        """This process's session (a new connection after a fork or a broken call)."""
        s = self._session
        if s is None or s.pid != os.getpid() or s.broken:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(self.address)
            except OSError:
                sock.close()
                raise
            s = self._session = Session(sock)
        return s

    def lookup(self, name: str) -> Any:
        """The notebook's ``name``: a :class:`RemoteFunction` if callable, else its value."""
        value = self.session().request({"op": "get", "name": name})
        if isinstance(value, dict) and set(value) == {"$callable"} and value["$callable"] == name:
            return RemoteFunction(self, name)
        return value

    def close(self) -> None:
        if self._session is not None and self._session.pid == os.getpid():
            self._session.sock.close()
        self._session = None
