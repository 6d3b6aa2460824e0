"""What crosses between the re-check's checker and the learner's process: the one table of it.

Only data crosses (:mod:`.rpc`): JSON values, the models and enums of :data:`MODELS` and
:data:`ENUMS` rebuilt by validation, exceptions rebuilt by the classes of :data:`EXCEPTIONS`,
handles (the checker's numbers for its own objects, whose stand-ins' only methods are
:data:`CHECKER_OPS`) and copies of handed paths. docs/architecture.md ("What crosses the
boundary") says why each may.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import inspect
import json
import os
import secrets
import shutil
import socket
import stat
import time
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .... import errors as kit_errors
from ....checkpoint import Checkpoint, PendingToolUse
from ....tools import Effect, Toolbox
from ...checks import support
from ...checks.support import HandedFolder, HandedPath
from ...errors import CourseError
from . import rpc

# -- the table of what crosses ------------------------------------------------------------------


MODELS: dict[str, type] = {"Checkpoint": Checkpoint, "PendingToolUse": PendingToolUse}
"""Models that cross, but anthropic's (:data:`ANTHROPIC`)."""


ENUMS: dict[str, type[Any]] = {"Effect": Effect}
"""Enums that cross by value."""

_BUILTIN_ERRORS = [
    "Exception",
    "ArithmeticError",
    "AssertionError",
    "AttributeError",
    "EOFError",
    "FileExistsError",
    "FileNotFoundError",
    "ImportError",
    "IndexError",
    "IsADirectoryError",
    "KeyError",
    "LookupError",
    "MemoryError",
    "NameError",
    "NotADirectoryError",
    "NotImplementedError",
    "OSError",
    "OverflowError",
    "PermissionError",
    "RecursionError",
    "RuntimeError",
    "StopIteration",
    "TimeoutError",
    "TypeError",
    "UnicodeError",
    "ValueError",
    "ZeroDivisionError",
]


def _exceptions() -> dict[str, type[Exception]]:
    table: dict[str, type[Exception]] = {name: getattr(builtins, name) for name in _BUILTIN_ERRORS}
    table.update(
        {
            name: cls
            for name, cls in vars(kit_errors).items()
            if isinstance(cls, type) and issubclass(cls, Exception) and cls.__module__ == kit_errors.__name__
        }
    )
    table["json.JSONDecodeError"] = json.JSONDecodeError
    return table


_ANTHROPIC_ERRORS = ("APIError", "APIStatusError", "APIConnectionError", "APITimeoutError", "BadRequestError")


def _anthropic_table() -> tuple[dict[str, type], dict[str, type[Exception]]]:
    import anthropic
    from anthropic.types import Message

    return {"Message": Message}, {f"anthropic.{name}": getattr(anthropic, name) for name in _ANTHROPIC_ERRORS}


ANTHROPIC = rpc.Later(
    "anthropic", frozenset({"Message", *(f"anthropic.{name}" for name in _ANTHROPIC_ERRORS)}), _anthropic_table
)
"""anthropic's models and errors: importing anthropic costs a process seconds, and most re-checks never need it."""


CLIENT_ARGUMENTS = frozenset(
    {"model", "max_tokens", "messages", "tools", "tool_choice", "system", "temperature", "top_p", "top_k"}
    | {"stop_sequences", "metadata"}
)
"""The keyword arguments of ``messages.create`` the checker's client takes from the learner's side."""


def codec(handles: rpc.Handles) -> rpc.Codec:
    """The codec both sides use, with one side's handles."""
    return rpc.Codec(models=MODELS, enums=ENUMS, exceptions=_exceptions(), handles=handles, later=ANTHROPIC)


# -- the checker's side: handles it issues, and the operations it serves on them -----------------


def kind_of(value: Any) -> str | None:
    """The kind of handle a check's object crosses as, or None if it may not cross at all."""
    if isinstance(value, Toolbox):
        return "toolbox"
    if isinstance(value, types.FunctionType | types.MethodType):
        return "function"
    messages = getattr(value, "messages", None)
    if callable(getattr(messages, "create", None)):
        return "client"
    return None


class Issued:
    """The checker's handles in one connection: its objects by number, and the kind each was issued as."""

    def __init__(self) -> None:
        self.objects: dict[int, tuple[str, Any]] = {}

    def export(self, value: Any) -> tuple[str, int] | None:
        kind = kind_of(value)
        if kind is None:
            return None
        number = id(value)
        self.objects[number] = (kind, value)
        return kind, number

    def resolve(self, kind: str, number: int) -> Any:
        issued = self.objects.get(number)
        if issued is None or issued[0] != kind:
            raise rpc.ProtocolError(f"a {kind[:20]} handle the checker never issued")
        return issued[1]


def _text(value: Any, what: str) -> str:
    if type(value) is not str:
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    return value


def _box(value: Any) -> Toolbox:
    if not isinstance(value, Toolbox):  # only a handle the checker issued as a toolbox resolves to one
        raise rpc.ProtocolError("a toolbox operation on something that is not a toolbox")
    return value


def _execute(box: Any, name: Any, input: Any, idempotency_key: Any = None) -> str:
    if type(input) is not dict:
        raise TypeError(f"the tool input must be a dict, not {type(input).__name__}")
    key = None if idempotency_key is None else _text(idempotency_key, "idempotency_key")
    return _box(box).execute(_text(name, "the tool name"), input, idempotency_key=key)


def _ledger_lookup(box: Any, key: Any) -> dict[str, Any] | None:
    ledger = _box(box).ledger
    if ledger is None:
        raise ValueError("this toolbox has no ledger")
    receipt = ledger.lookup(_text(key, "the key"))
    return None if receipt is None else dataclasses.asdict(receipt)


def _create(client: Any, **kwargs: Any) -> Any:
    if kind_of(client) != "client":
        raise rpc.ProtocolError("a client operation on something that is not a client")
    unknown = sorted(set(kwargs) - CLIENT_ARGUMENTS)
    if unknown:
        raise TypeError(f"messages.create() got arguments the grader's client does not take: {', '.join(unknown)}")
    return client.messages.create(**kwargs)


def _call(fn: Any, *args: Any, **kwargs: Any) -> Any:
    if kind_of(fn) != "function":
        raise rpc.ProtocolError("a function call on something that is not a function")
    inspect.signature(fn).bind(*args, **kwargs)  # a TypeError that does not name the check's function
    return fn(*args, **kwargs)


CHECKER_OPS: dict[str, Callable[..., Any]] = {
    "toolbox.names": lambda box: list(_box(box).names),
    "toolbox.contains": lambda box, name: type(name) is str and name in _box(box),
    "toolbox.effect": lambda box, name: _box(box).effect(_text(name, "the tool name")),
    "toolbox.is_read_only": lambda box, name: _box(box).is_read_only(_text(name, "the tool name")),
    "toolbox.schemas": lambda box: _box(box).schemas(),
    "toolbox.execute": _execute,
    "toolbox.has_ledger": lambda box: _box(box).ledger is not None,
    "ledger.lookup": _ledger_lookup,
    "client.messages.create": _create,
    "function.call": _call,
}
"""Every operation the learner's side may ask of the checker: the capabilities a check hands out."""


# -- the learner's side: stand-ins for the checker's handles --------------------------------------


class _StandIn:
    """A checker's handle as the learner's function sees it: it can only send the ops of its kind."""

    kind = ""

    def __init__(self, handles: Stand, number: int) -> None:
        self._handles = handles
        self._number = number

    def _ask(self, op: str, *args: Any, **kwargs: Any) -> Any:
        session = self._handles.session
        if session is None:
            raise RuntimeError("this handle is not connected to the checker")
        return session.request(op, self, *args, **kwargs)

    def __repr__(self) -> str:
        return f"<the grader's {self.kind}>"


class LedgerHandle:
    """The toolbox's ledger, read-only: its receipts by key."""

    def __init__(self, box: ToolboxHandle) -> None:
        self._box = box

    def lookup(self, key: str) -> Any:
        """The receipt of ``key`` (a :class:`resumable_core.ledger.Receipt`), or None."""
        from ....ledger import Receipt

        found = self._box._ask("ledger.lookup", key)
        return None if found is None else Receipt(**found)


class ToolboxHandle(_StandIn):
    """The grader's toolbox: ``names``, ``effect``, ``is_read_only``, ``schemas``, ``execute``, ``in``, ``ledger``."""

    kind = "toolbox"

    @property
    def names(self) -> list[str]:
        return list(self._ask("toolbox.names"))

    def __contains__(self, name: object) -> bool:
        return bool(self._ask("toolbox.contains", name))

    def effect(self, name: str) -> Effect | None:
        return self._ask("toolbox.effect", name)

    def is_read_only(self, name: str) -> bool:
        return bool(self._ask("toolbox.is_read_only", name))

    def schemas(self) -> list[dict[str, Any]]:
        return self._ask("toolbox.schemas")

    def execute(self, name: str, input: dict[str, Any], *, idempotency_key: str | None = None) -> str:
        return self._ask("toolbox.execute", name, input, idempotency_key=idempotency_key)

    @property
    def ledger(self) -> LedgerHandle | None:
        return LedgerHandle(self) if self._ask("toolbox.has_ledger") else None


class _Messages:
    def __init__(self, client: ClientHandle) -> None:
        self._client = client

    def create(self, **kwargs: Any) -> Any:
        """One Messages API call through the grader's client; the reply is an ``anthropic.types.Message``."""
        return self._client._ask("client.messages.create", **kwargs)


class ClientHandle(_StandIn):
    """The grader's model client: ``messages.create(**kwargs)``."""

    kind = "client"

    @property
    def messages(self) -> _Messages:
        return _Messages(self)


class FunctionHandle(_StandIn):
    """A function of the check (the reconcile a resume check hands over), run by the checker."""

    kind = "function"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._ask("function.call", *args, **kwargs)


STAND_INS: dict[str, type[_StandIn]] = {c.kind: c for c in (ToolboxHandle, ClientHandle, FunctionHandle)}
"""The learner's side's stand-in for each kind of handle (the same kinds as :func:`kind_of`)."""


class Stand:
    """The learner's side's handles: a stand-in for each handle received, and the handle of a stand-in sent back."""

    def __init__(self) -> None:
        self.session: rpc.Session | None = None

    def export(self, value: Any) -> tuple[str, int] | None:
        if isinstance(value, _StandIn) and value._handles is self:
            return value.kind, value._number
        return None

    def resolve(self, kind: str, number: int) -> Any:
        cls = STAND_INS.get(kind)
        if cls is None:
            raise rpc.ProtocolError(f"no handle of kind {kind[:20]!r}")
        return cls(self, number)


# -- files handed to the learner's function ------------------------------------------------------

FILE_CAP = 64 << 20
"""Bytes of the largest file read back from the shared folder."""
FILES_CAP = 100
"""Entries of the largest folder read back."""


class HandedFileError(CourseError, ValueError):
    """The function left something in a handed folder that is no regular file, or too much; ``.name`` names it."""

    def __init__(self, name: str, why: str) -> None:
        super().__init__(f"{name}: {why}")
        self.name = name


def _read_at(dir_fd: int, name: str) -> tuple[bytes, int] | None:
    """The bytes and mtime of the regular file ``name`` in ``dir_fd`` (no link followed), None if there is none.

    :class:`HandedFileError` for an entry that is not a regular file, or over :data:`FILE_CAP`.
    """
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as e:  # a link (ELOOP), a folder, a socket: never read through
        raise HandedFileError(
            name, f"left as something other than a regular file ({os.strerror(e.errno or 0)})"
        ) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise HandedFileError(name, "left as something other than a regular file")
        if st.st_size > FILE_CAP:
            raise HandedFileError(name, f"over {FILE_CAP >> 20} MiB")
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read(FILE_CAP + 1)[:FILE_CAP], st.st_mtime_ns
    finally:
        os.close(fd)


def _read_own(path: Path) -> tuple[bytes, int] | None:
    """The bytes and mtime of one of the checker's own files, or None."""
    try:
        return path.read_bytes(), path.stat().st_mtime_ns
    except OSError:
        return None


@dataclasses.dataclass
class _Copy:
    """One handed path's copy: the checker's path, and the copy's folder, held open by descriptor."""

    path: HandedPath
    name: str
    """The copy folder's name in the shared folder."""
    fd: int
    """The copy folder, opened before the learner's process was told of it: every later step is relative to it,
    so no path through a folder the learner can change is ever resolved again."""


class HandedFiles:
    """The copies in the shared folder of the paths handed to the learner's functions, and their reading back.

    ``shared`` is the shared folder as the checker sees it, ``seen_as`` as the learner's process does.
    """

    def __init__(self, shared: Path, seen_as: Path | None = None) -> None:
        self.shared = shared
        self.seen_as = seen_as or shared
        self.open: list[_Copy] = []

    def hand_in(self, path: HandedPath) -> str:
        """Copy ``path`` (or its folder) into a fresh folder of the shared one; the copy's path, as the learner sees it."""
        host = Path(path)
        name = f"h{secrets.token_hex(8)}"
        os.mkdir(self.shared / name, 0o777)
        fd = os.open(self.shared / name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        self.open.append(_Copy(path, name, fd))
        os.fchmod(fd, 0o777)  # the learner's process may run as another user
        sources = sorted(host.parent.iterdir()) if isinstance(path, HandedFolder) else [host]
        for src in sources:
            own = _read_own(src) if src.is_file() and not src.is_symlink() else None
            if own is None:
                continue
            data, mtime = own
            out = os.open(src.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666, dir_fd=fd)
            with os.fdopen(out, "wb") as f:
                f.write(data)
                f.flush()
                os.utime(f.fileno(), ns=(mtime, mtime))  # with its mtime: a read-only call leaves it as it was
        return str(self.seen_as / name / host.name)

    def read_back(self, copy: _Copy) -> None:
        """Make the checker's file (or folder) what the copy is now: regular files only, links never followed."""
        host = Path(copy.path)
        names = [host.name]
        if isinstance(copy.path, HandedFolder):
            there = os.listdir(copy.fd)
            if len(there) > FILES_CAP:
                raise HandedFileError(host.parent.name, f"over {FILES_CAP} files left in the folder")
            names = sorted(set(there) | {p.name for p in host.parent.iterdir()})
        problem: HandedFileError | None = None
        for name in names:
            try:
                found = _read_at(copy.fd, name)
            except HandedFileError as e:
                problem, found = problem or e, None
            target = host.parent / name
            if found is None:
                target.unlink(missing_ok=True)
            elif _read_own(target) != found:
                data, mtime = found
                tmp = target.with_name(f".{name}.handed")
                tmp.write_bytes(data)
                os.utime(tmp, ns=(mtime, mtime))
                os.replace(tmp, target)
        if problem is not None:
            raise problem

    def close(self, copy: _Copy) -> None:
        os.close(copy.fd)
        shutil.rmtree(self.shared / copy.name, ignore_errors=True)  # rmtree follows no link

    def read_back_all(self) -> None:
        """Read back every copy still open (the call is being killed), then forget them."""
        while self.open:
            copy = self.open.pop()
            with contextlib.suppress(HandedFileError):
                self.read_back(copy)

    @contextmanager
    def handed(self, values: list[Any]) -> Iterator[list[Any]]:
        """``values`` with every handed path replaced by its copy's path; read back when the block ends.

        A copy left as something other than regular files is a :class:`HandedFileError` after the call.
        """
        start = len(self.open)
        problem: HandedFileError | None = None
        try:
            yield [self.hand_in(v) if isinstance(v, HandedPath) else v for v in values]
        finally:
            while len(self.open) > start:
                copy = self.open.pop()
                try:
                    self.read_back(copy)
                except HandedFileError as e:
                    problem = problem or e
                finally:
                    self.close(copy)
        if problem is not None:
            raise problem


# -- the checker's end of the connection -----------------------------------------------------------


class Learner:
    """The checker's connection to the learner's process: one per process of the checker (a fork opens its own)."""

    def __init__(self, address: str, shared: Path, *, restart: str | None = None) -> None:
        self.address = address
        self.shared = shared
        self.restart = restart
        """The host's socket whose every connection a freshly started learner's process serves (None: none here)."""
        self._session: rpc.Session | None = None
        self._files: dict[int, HandedFiles] = {}
        support.BEFORE_DEATH.append(self._read_back)  # a check that kills its call reads the copies back first

    def connect(self, *, fresh: bool = False) -> rpc.Session:
        """A new connection: a fresh fork of the loaded notebook, with a handle table of its own.

        ``fresh``: served by a freshly started learner's process instead, which the host starts in
        a sandbox of its own (:mod:`.recheck.restarter`): a new interpreter that loaded the
        notebook's cells again, as a harness restarted after a crash would.
        """
        if fresh and self.restart is None:
            raise RuntimeError("the re-check has no restart socket: a restarted call cannot be served here")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(self.restart if fresh and self.restart is not None else self.address)
        except OSError:
            sock.close()
            raise
        return rpc.Session(sock, codec(Issued()), CHECKER_OPS, peer="the learner's process")

    def session(self) -> rpc.Session:
        """This process's session for lookups (a new connection after a fork or a broken call)."""
        s = self._session
        if s is None or s.pid != os.getpid() or s.broken:
            s = self._session = self.connect()
        return s

    def files(self) -> HandedFiles:
        """This process's handed files (a forked child's are its own)."""
        return self._files.setdefault(os.getpid(), HandedFiles(self.shared))

    def _read_back(self) -> None:
        files = self._files.get(os.getpid())
        if files is not None:
            files.read_back_all()

    def loaded(self) -> Any:
        """How loading the notebook went, as the learner's process tells it (untrusted: short strings only)."""
        return self.session().request("loaded")

    def lookup(self, name: str) -> Any:
        """The notebook's ``name``: a :class:`RemoteFunction` if it is callable, else its value (data only)."""
        try:
            found = self.session().request("lookup", name)
        except NameError:  # whatever the learner's side said, in the checker's own words
            raise support.CheckFailed(f"{name} is not defined by the notebook's cells") from None
        if type(found) is dict and found.get("callable") is True:
            return RemoteFunction(self, name)
        if type(found) is dict and "value" in found:
            return found["value"]
        raise rpc.ProtocolError("a lookup answered with neither a value nor a callable")

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """``name(*args, **kwargs)`` in the learner's process, handed paths copied in and read back.

        Every call has a connection of its own, so a fresh fork of the loaded notebook serves it:
        nothing the function kept in memory outlives the call, and the handles issued for it
        resolve only while it runs.
        """
        return self._call_seen((), name, *args, **kwargs)[0]

    def call_fresh(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """:meth:`call`, in a freshly started learner's process: none of the loaded process's memory is there.

        It sees no shared folder, so a handed path cannot go to it: that is a bug of the check.
        """
        if any(isinstance(v, HandedPath) for v in (*args, *kwargs.values())):
            raise ValueError("a restarted call takes data and handles only: its process sees no shared folder")
        return self._call_seen((), name, *args, _fresh=True, **kwargs)[0]

    def call_marked(self, mark: str, name: str, *args: Any) -> tuple[Any, list[str]]:
        """:meth:`call`, and the paths the learner's process was given for the handed ones, in order; the learner's
        side marks in the trace (:func:`.syscalls.mark_returned`) when the function returned."""
        return self._call_seen((mark,), name, *args)

    def _call_seen(
        self, mark: tuple[str, ...], name: str, *args: Any, _fresh: bool = False, **kwargs: Any
    ) -> tuple[Any, list[str]]:
        files = self.files()
        keys = list(kwargs)
        originals = [*args, *kwargs.values()]
        session = self.connect(fresh=_fresh)
        try:
            with files.handed(originals) as values:
                positional, named = values[: len(args)], dict(zip(keys, values[len(args) :], strict=True))
                given = [v for o, v in zip(originals, values, strict=True) if isinstance(o, HandedPath)]
                op = ("call_marked", *mark) if mark else ("call",)
                return session.request(*op, name, *positional, **named), given
        finally:
            session.sock.close()

    def close(self) -> None:
        if self._session is not None and self._session.pid == os.getpid():
            self._session.sock.close()
        self._session = None


_TRACE: list[Any] = []
"""The learner's process's system calls, as a tracer outside both sandboxes writes them (set by the checker)."""


def observe_with(trace: Path, shared: Path) -> None:
    """Judge observed calls (:meth:`RemoteFunction.observe`) by the trace in ``trace``, whose handed paths are under ``shared``."""
    from . import syscalls

    _TRACE[:] = [syscalls.Trace(trace, str(shared))]


@dataclasses.dataclass(frozen=True)
class Observation:
    """What the tracer saw one call do to the file it was handed: the verdicts the checks ask for."""

    events: tuple[Any, ...]
    """The events of the call, up to where it returned."""
    target: str
    """The handed file's path as the learner's process saw it."""
    late: str | None = None
    """Why what the trace shows after the call returned (or the lack of its end) rules the call out; None: nothing."""

    def atomic_problem(self) -> str | None:
        """Why a kill at some moment of the call would leave the file neither old nor new, or None."""
        from . import syscalls

        return self.late or syscalls.atomic_problem(list(self.events), self.target)

    def durable_problem(self) -> str | None:
        """Why the call's steps do not make the new file durable, or None."""
        from . import syscalls

        return self.late or syscalls.durable_problem(list(self.events), self.target)

    def append(self, before: bytes | None, after: bytes | None) -> Any:
        """What a kill at any moment of the call could leave in the file (a :class:`~.syscalls.Append`), given its bytes before and after."""
        from . import syscalls

        seen = syscalls.append_states(list(self.events), self.target, before, after)
        return dataclasses.replace(seen, states=(before, after), problem=self.late) if self.late else seen


class RemoteFunction:
    """A function of the notebook, called in the learner's process through :meth:`Learner.call`.

    It is looked up by name at every call, through the session of the calling process: a child
    forked by a check opens its own connection, served by its own fork of the loaded notebook.
    """

    remote = True
    """Marks a function that runs in another process (:func:`..checks.support.is_remote`)."""

    def __init__(self, learner: Learner, name: str, *, fresh: bool = False) -> None:
        self.learner = learner
        self.name = name
        self.fresh = fresh
        """Each call is served by a freshly started learner's process (:meth:`restarted`)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.fresh:
            return self.learner.call_fresh(self.name, *args, **kwargs)
        return self.learner.call(self.name, *args, **kwargs)

    def restarted(self) -> RemoteFunction:
        """This function as a harness restarted after a crash calls it: each call in a freshly started learner's process.

        That process is a new interpreter that ran the notebook's cells again (but its tests), so
        module-level state (a uuid drawn at import) is new, as after a real restart
        (:func:`..checks.support.restarted`).
        """
        return RemoteFunction(self.learner, self.name, fresh=True)

    def observe(self, *args: Any) -> Observation:
        """Call it with one handed path among ``args``; what the tracer outside the learner's process saw it do there."""
        from . import syscalls

        if not _TRACE:
            raise RuntimeError("the re-check has no trace of the learner's process: this cell needs review")
        mark = secrets.token_hex(16)
        _, given = self.learner.call_marked(mark, self.name, *args)
        # the host's clock, as strace's -ttt: nothing the trace shows after this was the call's
        replied_at = time.time()
        if len(given) != 1:  # a bug of the check: one handed path is observed at a time
            raise ValueError(f"observe() needs exactly one handed path, got {len(given)}")
        target = given[0]
        trace = _TRACE[0]
        events = trace.events(str(Path(target).parent))
        during, late = syscalls.until_returned(events, trace.returned_mark(mark), target, replied_at)
        return Observation(tuple(during), target, syscalls.cut_off(trace.path) or late)

    def __repr__(self) -> str:
        where = "a freshly started learner's process" if self.fresh else "the learner's process"
        return f"<the notebook's {self.name}, in {where}>"
