"""Values as JSON: plain data, and a fixed table of classes rebuilt by validation; nothing else.

A value is data when it is ``None``, a bool, an int, a str, a float, bytes, a list, a tuple or a
dict of data, a model or an enum member of the codec's table (sent as its ``model_dump``, rebuilt
by the receiver's own class with ``model_validate``), or a *handle*: a name the sending side's
:class:`Handles` gives one of its objects, which the receiving side's ``Handles`` resolves (the
checker's side to the object it issued; the learner's side to a stand-in that sends requests).
Types are checked exactly (``type(v) is str``), so a subclass that overrides ``__eq__`` is not data.
Everything else is a :class:`NotDataError` on the way out and a :class:`ProtocolError` on the way in.
"""

from __future__ import annotations

import base64
import enum
import math
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from .errors import NotDataError, ProtocolError

MAX_DEPTH = 100
"""Nesting of the deepest value encoded or accepted."""
MAX_TEXT = 2000
"""Characters of an exception's message that cross."""


class Handles(Protocol):
    """One side's table of handles: what it sends for an object of its own, and what it makes of one it receives."""

    def export(self, value: Any) -> tuple[str, int] | None:
        """``(kind, number)`` for an object this side hands out by handle, else None."""

    def resolve(self, kind: str, number: int) -> Any:
        """What a received handle stands for here; :class:`ProtocolError` if it names nothing."""


class NoHandles:
    """A side that neither hands out nor accepts handles."""

    def export(self, value: Any) -> tuple[str, int] | None:
        return None

    def resolve(self, kind: str, number: int) -> Any:
        raise ProtocolError(f"a handle ({kind}) where none is accepted")


def _name_of(value: Any) -> str:
    return type(value).__qualname__


@dataclass(frozen=True)
class Later:
    """Entries of the table whose module costs seconds to import (anthropic's): loaded only when one is needed.

    An instance of ``module``'s classes exists only once ``module`` is imported, so the way out loads
    them only then; the way in loads them when a value or an exception names one of ``names``.
    """

    module: str
    names: frozenset[str]
    load: Callable[[], tuple[Mapping[str, type], Mapping[str, type[Exception]]]]
    """The models and exceptions to add to the table."""


class Codec:
    """Encode and decode values with one table of models, enums and exceptions, and one side's handles."""

    def __init__(
        self,
        *,
        models: Mapping[str, type] | None = None,
        enums: Mapping[str, type[enum.Enum]] | None = None,
        exceptions: Mapping[str, type[Exception]] | None = None,
        handles: Handles | None = None,
        later: Later | None = None,
    ) -> None:
        self.models = dict(models or {})
        self.enums = dict(enums or {})
        self.exceptions = dict(exceptions or {})
        self.handles: Handles = handles or NoHandles()
        self._later = later
        self._model_names = {cls: name for name, cls in self.models.items()}
        self._enum_names = {cls: name for name, cls in self.enums.items()}

    def _grow(self, *, named: object = None) -> None:
        """Load the :class:`Later` entries if their module is imported, or if ``named`` is one of theirs."""
        later = self._later
        if later is None or (later.module not in sys.modules and named not in later.names):
            return
        self._later = None
        models, exceptions = later.load()
        self.models.update(models)
        self.exceptions.update(exceptions)
        self._model_names = {cls: name for name, cls in self.models.items()}

    # -- out -----------------------------------------------------------------------------------

    def encode(self, value: Any, depth: int = 0) -> Any:
        """``value`` as JSON; :class:`NotDataError` if any part of it is not data."""
        if depth > MAX_DEPTH:
            raise NotDataError("a value nested too deeply")
        t = type(value)
        if value is None or t is bool or t is int or t is str:
            return value
        if t is float:
            return value if math.isfinite(value) else {"$float": repr(value)}
        if t is list:
            return [self.encode(v, depth + 1) for v in value]
        if t is tuple:
            return {"$tuple": [self.encode(v, depth + 1) for v in value]}
        if t is dict:
            return {"$dict": [[self.encode(k, depth + 1), self.encode(v, depth + 1)] for k, v in value.items()]}
        if t is bytes:
            return {"$bytes": base64.b64encode(value).decode()}
        if t in self._enum_names:
            return {"$enum": [self._enum_names[t], self.encode(value.value, depth + 1)]}
        if t not in self._model_names:
            self._grow()
        if t in self._model_names:
            return {"$model": [self._model_names[t], value.model_dump(mode="json")]}
        handle = self.handles.export(value)
        if handle is not None:
            return {"$handle": list(handle)}
        raise NotDataError(f"a {_name_of(value)}")

    def encode_exception(self, e: BaseException) -> dict[str, Any]:
        """An exception as data: its class's name, the names of the table's classes it is an instance of, its text."""
        self._grow()
        known = [name for name, cls in self.exceptions.items() if isinstance(e, cls)]
        known.sort(key=lambda name: -len(self.exceptions[name].__mro__))  # the most specific first
        try:
            text = str(e)
        except Exception:  # noqa: BLE001 - a message that cannot be printed is no message
            text = ""
        return {"name": type(e).__name__[:80], "known": known, "message": text[:MAX_TEXT]}

    # -- in ------------------------------------------------------------------------------------

    def decode(self, value: Any, depth: int = 0) -> Any:
        """A value the other side sent, rebuilt; :class:`ProtocolError` for anything not in the protocol."""
        if depth > MAX_DEPTH:
            raise ProtocolError("a value nested too deeply")
        t = type(value)
        if value is None or t is bool or t is int or t is str:
            return value
        if t is float:
            return value
        if t is list:
            return [self.decode(v, depth + 1) for v in value]
        if not (t is dict and len(value) == 1):
            raise ProtocolError("a value of no known form")
        ((tag, body),) = value.items()
        try:
            return self._tagged(tag, body, depth)
        except ProtocolError:
            raise
        except Exception as e:  # noqa: BLE001 - any failure to rebuild the other side's value is its fault
            raise ProtocolError(f"a {tag} value could not be rebuilt ({type(e).__name__}: {str(e)[:200]})") from None

    def _tagged(self, tag: Any, body: Any, depth: int) -> Any:
        if tag == "$float":
            if body not in ("inf", "-inf", "nan"):
                raise ProtocolError("a $float that is not inf, -inf or nan")
            return float(body)
        if tag == "$tuple":
            return tuple(self._list(body, depth))
        if tag == "$dict":
            pairs = self._list(body, depth, decode=False)
            out = {}
            for pair in pairs:
                if type(pair) is not list or len(pair) != 2:
                    raise ProtocolError("a $dict entry that is not a [key, value] pair")
                key = self.decode(pair[0], depth + 1)
                hash(key)  # an unhashable key is no key
                out[key] = self.decode(pair[1], depth + 1)
            return out
        if tag == "$bytes":
            if type(body) is not str:
                raise ProtocolError("$bytes that are not base64 text")
            return base64.b64decode(body, validate=True)
        if tag in ("$enum", "$model", "$handle"):
            if type(body) is not list or len(body) != 2 or type(body[0]) is not str:
                raise ProtocolError(f"a {tag} that is not [name, value]")
            name, data = body
            if tag == "$enum":
                if name not in self.enums:
                    raise ProtocolError(f"no enum {name[:80]!r} crosses")
                return self.enums[name](self.decode(data, depth + 1))
            if tag == "$model":
                if name not in self.models:
                    self._grow(named=name)
                if name not in self.models:
                    raise ProtocolError(f"no model {name[:80]!r} crosses")
                return self.models[name].model_validate(data)  # type: ignore[attr-defined]  # every model of the table is pydantic
            if type(data) is not int:
                raise ProtocolError("a handle whose number is not an int")
            return self.handles.resolve(name, data)
        raise ProtocolError(f"no value tagged {str(tag)[:40]!r}")

    def _list(self, body: Any, depth: int, *, decode: bool = True) -> list[Any]:
        if type(body) is not list:
            raise ProtocolError("a tagged value whose body is not a list")
        return [self.decode(v, depth + 1) for v in body] if decode else body

    def decode_exception(self, body: Any) -> Exception:
        """An exception the other side raised, rebuilt as a subclass of the most specific class of the table it names."""
        if type(body) is not dict:
            return ProtocolError("a raise of no exception")
        base: type[Exception] = Exception
        known = body.get("known")
        for name in known if type(known) is list else []:
            if type(name) is str and name not in self.exceptions:
                self._grow(named=name)
            if type(name) is str and name in self.exceptions:
                base = self.exceptions[name]
                break
        name = body.get("name")
        name = name if type(name) is str and name.isidentifier() else "Error"
        message = body.get("message")
        return rebuilt(base, name, message[:MAX_TEXT] if type(message) is str else "")


def rebuilt(base: type[Exception], name: str, message: str) -> Exception:
    """An instance of a fresh subclass of ``base`` named ``name`` whose text is ``message``.

    Its ``__init__`` and ``__str__`` are this module's, so no constructor of ``base`` runs; it has
    ``body = None`` (what the anthropic SDK's errors carry) so code reading that finds nothing.
    """

    def init(self: Exception, text: str) -> None:
        Exception.__init__(self, text)

    def text(self: Exception) -> str:
        return str(self.args[0])

    attrs = {"__init__": init, "__str__": text, "__module__": "elsewhere", "body": None}
    cls = type(name, (base,), attrs)
    return cls(message)
