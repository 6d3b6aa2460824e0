"""A payment provider in a world's SQLite, and its ``refund_payment`` tool: the postmortem's second incident.

The provider keeps the shop's charges and its refunds, and honours an idempotency key as Stripe's
API does (https://docs.stripe.com/api/idempotent_requests): a second request with a key it holds
and the same parameters gets the first refund's id back and refunds nothing; the same key with
other parameters is refused. It also logs every request it receives (the key it carried and how it
ended), so whoever holds the world can count attempts and keys without asking the caller.

What the network does to a request is a :class:`Fault`, scripted per attempt by whoever builds the
tool (:func:`refund_tool`): a timeout after the refund was made (the outcome the caller cannot
see), an outage before anything was done, a permanent refusal.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable
from contextlib import closing
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from ..errors import IdempotencyConflictError, ToolError, ToolTimeoutError, ToolUnavailableError
from ..lease import write_transaction
from ..ledger import input_hash
from ..tools import Effect, Tool, Toolbox, tool
from ..world import World

SCHEMA = """
CREATE TABLE IF NOT EXISTS charges (
    order_id TEXT PRIMARY KEY,
    amount_cents INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS refunds (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    order_id TEXT NOT NULL,
    amount_cents INTEGER NOT NULL,
    idempotency_key TEXT UNIQUE
);
CREATE TABLE IF NOT EXISTS requests (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    order_id TEXT,
    amount_cents INTEGER,
    idempotency_key TEXT,
    outcome TEXT NOT NULL
);
"""

TOOL_NAME = "refund_payment"


class Fault(str, Enum):  # noqa: UP042 - StrEnum would change what str() of a member prints
    """What happens to one request on its way to the provider and back."""

    NONE = "none"
    """The provider answers."""
    TIMEOUT = "timeout"
    """The provider makes the refund, and its answer is lost: the caller sees a timeout."""
    UNAVAILABLE = "unavailable"
    """The provider is down: it refuses before doing anything."""
    CONFLICT = "conflict"
    """The provider refuses the key as used before with other parameters (a permanent refusal)."""


def refund_id(row_id: int) -> str:
    """The provider's name for a refund."""
    return f"re_{row_id:06d}"


@dataclass(frozen=True)
class Provider:
    """The payment provider's books, in the world's SQLite file."""

    world: World

    @classmethod
    def open(cls, world: World) -> Provider:
        """The provider of ``world``, its tables made if they are not there yet."""
        provider = cls(world)
        with closing(provider._connect()) as db:
            db.executescript(SCHEMA)
        return provider

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.world.db_path, timeout=30, isolation_level=None)
        db.execute("PRAGMA synchronous=FULL")  # a refund recorded survives the SIGKILL that follows it
        return db

    def charge(self, order_id: str, amount_cents: int) -> None:
        """Record that the customer paid ``amount_cents`` for ``order_id`` (what a refund may return)."""
        with closing(self._connect()) as db:
            db.execute("INSERT INTO charges (order_id, amount_cents) VALUES (?, ?)", (order_id, amount_cents))

    def log(self, order_id: Any, amount_cents: Any, key: str | None, outcome: str) -> None:
        """Record one request as the provider received it."""
        with closing(self._connect()) as db:
            db.execute(
                "INSERT INTO requests (order_id, amount_cents, idempotency_key, outcome) VALUES (?, ?, ?, ?)",
                (str(order_id), amount_cents if type(amount_cents) is int else None, key, outcome),
            )

    def refund(self, order_id: str, amount_cents: int, idempotency_key: str | None = None) -> tuple[str, bool]:
        """Refund ``amount_cents`` of ``order_id``'s charge; returns (refund id, refunded now).

        A key already used with the same parameters returns the first refund's id and refunds
        nothing; with other parameters it raises :class:`IdempotencyConflictError`. An unknown
        order, or more than is left of the charge, is refused with a :class:`ToolError`. The check
        and the insert are one transaction, so two requests racing with one key refund once.
        """
        with closing(self._connect()) as db, write_transaction(db):
            if idempotency_key is not None:
                first = db.execute(
                    "SELECT id, order_id, amount_cents FROM refunds WHERE idempotency_key = ?", (idempotency_key,)
                ).fetchone()
                if first is not None:
                    if (first[1], first[2]) != (order_id, amount_cents):
                        raise IdempotencyConflictError(
                            idempotency_key, _hash(first[1], first[2]), _hash(order_id, amount_cents)
                        )
                    return refund_id(first[0]), False
            charged = db.execute("SELECT amount_cents FROM charges WHERE order_id = ?", (order_id,)).fetchone()
            if charged is None:
                raise ToolError(f"refused: no charge for order {order_id!r}")
            (refunded,) = db.execute(
                "SELECT COALESCE(SUM(amount_cents), 0) FROM refunds WHERE order_id = ?", (order_id,)
            ).fetchone()
            if not 0 < amount_cents <= charged[0] - refunded:
                raise ToolError(
                    f"refused: a refund of {amount_cents} cents on order {order_id!r}, "
                    f"which has {charged[0] - refunded} of its {charged[0]} cents left to refund"
                )
            cur = db.execute(
                "INSERT INTO refunds (order_id, amount_cents, idempotency_key) VALUES (?, ?, ?)",
                (order_id, amount_cents, idempotency_key),
            )
            return refund_id(int(cur.lastrowid or 0)), True

    def refunds(self, order_id: str | None = None) -> list[dict[str, Any]]:
        """The refunds made, oldest first (of ``order_id`` only, if given)."""
        with closing(self._connect()) as db:
            rows = db.execute("SELECT id, order_id, amount_cents, idempotency_key FROM refunds ORDER BY id").fetchall()
        keys = ("id", "order_id", "amount_cents", "idempotency_key")
        return [{**dict(zip(keys, r)), "id": refund_id(r[0])} for r in rows if order_id is None or r[1] == order_id]

    def requests(self) -> list[dict[str, Any]]:
        """Every request received, oldest first: order, amount, the key it carried, how it ended."""
        with closing(self._connect()) as db:
            rows = db.execute(
                "SELECT order_id, amount_cents, idempotency_key, outcome FROM requests ORDER BY id"
            ).fetchall()
        return [dict(zip(("order_id", "amount_cents", "idempotency_key", "outcome"), r)) for r in rows]


def _hash(order_id: str, amount_cents: int) -> str:
    return input_hash(TOOL_NAME, {"order_id": order_id, "amount_cents": amount_cents})


def refund_tool(faults: Iterable[Fault] = (), *, after_refund: Callable[[], None] | None = None) -> Tool:
    """The ``refund_payment`` tool, whose requests meet ``faults`` in order (then none).

    ``after_refund`` runs once the provider has recorded a refund and before its answer goes back
    (a check passes a SIGKILL there). The tool's output is the refund id.
    """
    script = list(faults)

    @tool(
        Effect.SIDE_EFFECT,
        "Refund part or all of an order's payment. Returns the provider's refund id. It cannot be undone.",
        order_id={"type": "string"},
        amount_cents={"type": "integer"},
    )
    def refund_payment(
        world: World, order_id: str, amount_cents: int, idempotency_key: str | None = None, **_: Any
    ) -> str:
        provider = Provider.open(world)
        fault = script.pop(0) if script else Fault.NONE
        if fault is Fault.UNAVAILABLE:
            provider.log(order_id, amount_cents, idempotency_key, "unavailable")
            raise ToolUnavailableError("the payment provider is unavailable (HTTP 503); nothing was done")
        if fault is Fault.CONFLICT:
            provider.log(order_id, amount_cents, idempotency_key, "conflict")
            raise IdempotencyConflictError(
                str(idempotency_key), _hash("another order", 1), _hash(order_id, amount_cents)
            )
        try:
            rid, _now = provider.refund(order_id, amount_cents, idempotency_key)
        except ToolError:
            provider.log(order_id, amount_cents, idempotency_key, "refused")
            raise
        provider.log(order_id, amount_cents, idempotency_key, "timeout" if fault is Fault.TIMEOUT else "refunded")
        if after_refund is not None:
            after_refund()
        if fault is Fault.TIMEOUT:
            raise ToolTimeoutError("the payment provider did not answer within 10 s; the refund's outcome is unknown")
        return rid

    return refund_payment


def shop(root: str | Path, charges: dict[str, int], refunds: Tool | None = None) -> tuple[Provider, Toolbox]:
    """A world at ``root`` with ``charges`` paid, and a toolbox holding ``refunds`` (a fault-free refund tool by default)."""
    world = World.create(root, notes={})
    provider = Provider.open(world)
    for order_id, amount in charges.items():
        provider.charge(order_id, amount)
    return provider, Toolbox(world, (refunds or refund_tool(),))
