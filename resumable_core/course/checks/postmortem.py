"""The visible checks of the ``postmortem`` assignment: both incidents replayed with real SIGKILLs.

Part 1's test cells call these as ``checks.check_*(reconcile)``, Part 2's as
``checks.check_*(refund)``: the learner's refund runs in a forked child against the payment
provider of :mod:`resumable_core.lab.payments`, whose requests meet timeouts, outages, refusals and
kills, and each check judges by the provider's own book (its refunds, every request and its key).
The hidden ones live with the instructor (:mod:`resumable_core.course.hidden.postmortem`).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...checkpoint import consistency_problem, text_of
from ...crash import run_in_child
from ...errors import CrashError, IdempotencyConflictError, ToolError, ToolTimeoutError, ToolUnavailableError
from ...lab.core_words import core
from ...lab.i18n import N_
from ...lab.payments import Fault, Provider, refund_tool, shop
from ...run_folder import finished_turns
from ...strategies import Reconcile
from ...tools import Tool, Toolbox
from ...world import NOTES, World
from ..i18n import _
from ..i18n import say as say  # test cells print checks.say("...")
from .support import (
    CheckFailed,
    FailedAfterRestart,
    call_learner,
    die,
    ended_as_said,
    error_text,
    replay,
    require,
    require_status_unknown,
    restarted,
    scratch,
)


def check_incident(fn: Reconcile) -> None:
    """The postmortem's crash (SIGKILL after send_email, before save point B): one email, run finishes."""
    r = replay(fn, "after_tool", "send_email")
    require(r.killed and r.emails_at_crash == 1, _("the replay should crash after the email went out"))
    require(r.error is None, _("the resume failed: {error}").format(error=r.error))
    require(r.emails == 1, _("the team received {emails} emails; exactly one is correct").format(emails=r.emails))
    require(r.checkpoint is not None and r.checkpoint.is_finished(), _("the resumed run must finish"))
    problem = consistency_problem(r.checkpoint) if r.checkpoint is not None else None
    require(
        problem is None, _("the resumed checkpoint contradicts itself: {problem}").format(problem=core(problem or ""))
    )
    block = r.pending_result()
    if block is None:
        raise CheckFailed(_("the dangling send_email was never answered: every tool_use needs its tool_result"))
    require_status_unknown(block)  # nobody knows whether it went out: claiming success is a guess


def check_read_file_rerun(fn: Reconcile) -> None:
    """A crash before read_file ran: resume re-runs it and its tool_result holds the file's text."""
    r = replay(fn, "after_save_a", "read_file")
    pending = r.pending_at_crash
    require(
        r.killed and pending and pending["name"] == "read_file", _("the replay should crash with read_file pending")
    )
    require(r.error is None, _("the resume failed: {error}").format(error=r.error))
    block = r.pending_result()
    if block is None or pending is None:
        raise CheckFailed(_("the dangling read_file call was never answered: read-only calls are re-run, not dropped"))
    path = pending["input"]["path"]
    require(
        not block.get("is_error") and text_of(block.get("content")) == NOTES[path.split("/")[-1]],
        _("the read_file tool_result must hold the file's text (re-run it: it is read-only)"),
    )
    require(r.reads == 1, _("read_file ran {reads} times for the crashed call; once is right").format(reads=r.reads))
    if r.checkpoint is None or not r.checkpoint.is_finished():
        raise CheckFailed(_("the resumed run must finish"))
    expected = finished_turns("read_file")
    require(
        r.checkpoint.turns == expected,
        _(
            "the run took {turns} model calls, an uncrashed run takes {expected}: answering "
            "the dangling call costs no extra turn, dropping it does"
        ).format(turns=r.checkpoint.turns, expected=expected),
    )


def check_ledger_incident(fn: Reconcile) -> None:
    """With a ledger: the postmortem's crash ends with one email and no extra turn (no is_error detour)."""
    expected = finished_turns("send_email")
    for point in ("after_save_a", "after_tool"):
        r = replay(fn, point, "send_email", ledger=True)
        where = _("crash {point} on the send_email turn").format(point=point)
        require(r.error is None, _("{where}: the resume failed: {error}").format(where=where, error=r.error))
        require(
            r.emails == 1,
            _("{where}: {emails} emails; the idempotency key makes it exactly one").format(
                where=where, emails=r.emails
            ),
        )
        block = r.pending_result()
        require(
            block is not None and not block.get("is_error"),
            _("{where}: with a ledger the call can be finished under its idempotency key: no is_error fallback").format(
                where=where
            ),
        )
        turns = r.checkpoint.turns if r.checkpoint is not None and r.checkpoint.is_finished() else None
        require(turns is not None, _("{where}: the resumed run must finish").format(where=where))
        require(
            turns == expected,
            _("{where}: the run took {turns} model calls, an uncrashed run takes {expected}").format(
                where=where, turns=turns, expected=expected
            ),
        )
    r = replay(fn, "after_save_a", "read_file", ledger=True)
    require(r.error is None and r.reads == 1, _("read-only calls are still re-run when a ledger is present"))


# -- Part 2: the refund that a retry repeated ----------------------------------------------------

Refund = Callable[[Toolbox, str, int], str]
"""The learner's ``refund(tools, order_id, amount_cents) -> refund id``."""

ORDER, CHARGED, AMOUNT = "A-1042", 12_999, 4999
"""The order of the incident, what its customer paid, and the refund owed (one item of it)."""
MAX_ATTEMPTS = 5
"""Attempts one refund may make in all, as the exercise's contract says."""
REQUEST_CAP = 25
"""Requests one call may send before the check stops it: a retry loop with no bound."""
CALL_TIMEOUT = 60.0
"""Seconds one call of ``refund`` may take."""

KEY_LESSON = N_("reread lesson 3, section 5, 'Beyond the fix: the ledger'")
TAXONOMY_LESSON = N_("reread lesson 4, section 2, 'A typed error taxonomy'")
REFUND_CONTRACT = N_(
    "reread Part 2's contract: call the refund_payment tool and return its output, the refund id, as it is"
)
RETRY_LESSON = N_("reread lesson 4, section 4, 'Retries inside a real run, with a budget'")
_KINDS: tuple[tuple[type[Exception], str], ...] = (
    (ToolTimeoutError, N_("a timeout")),
    (ToolUnavailableError, N_("an unavailable provider")),
    (IdempotencyConflictError, N_("a key reused with other parameters")),
    (ToolError, N_("a refusal")),
)
"""What each kit error says about a refund's request, most specific first."""


def kind_of_error(e: BaseException) -> str:
    """What an exception ``refund`` raised stands for, in the taxonomy's words."""
    return next((kind for cls, kind in _KINDS if isinstance(e, cls)), N_("another error"))


@dataclass
class Call:
    """How one call of the learner's ``refund`` in a forked child ended."""

    ended: str
    """``returned``, ``raised``, ``killed`` (by the provider, on purpose, or at the request cap) or ``hung``."""
    value: str | None = None
    """What it returned, when that was a str."""
    returned: str = ""
    """The type of what it returned."""
    kind: str = ""
    """What the error it raised stands for (:func:`kind_of_error`)."""
    error: str = ""
    """The error it raised, as ``Type: message``."""


class CappedToolbox(Toolbox):
    """A toolbox whose process dies of SIGKILL at its ``cap``-th request: no call may retry forever."""

    def __init__(self, world: World, tools: Iterable[Tool], cap: int) -> None:
        super().__init__(world, tools)
        self._left = cap

    def execute(self, name: str, input: dict[str, Any], *, idempotency_key: str | None = None) -> str:
        self._left -= 1
        if self._left < 0:
            die()
        return super().execute(name, input, idempotency_key=idempotency_key)


def _record(refund: Refund, args: tuple[Any, ...], out: Path) -> None:
    """In the child: call ``refund`` and write how it ended to ``out`` as JSON."""
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - the child never returns to close it
    record: dict[str, Any]
    try:
        value = call_learner(refund, *args)
    except Exception as e:  # noqa: BLE001 - the learner's error is what the check judges
        record = {"ended": "raised", "kind": kind_of_error(e), "error": error_text(e)[:500]}
    else:
        record = {"ended": "returned", "value": value if type(value) is str else None, "returned": type(value).__name__}
    out.write_text(json.dumps(record), encoding="utf-8")


@dataclass
class Shop:
    """A world with the provider's books, where the learner's ``refund`` is called, each time in a child."""

    provider: Provider
    root: Path

    @classmethod
    def open(cls, charges: dict[str, int] | None = None) -> Shop:
        """A fresh world whose customers paid ``charges`` (the incident's order by default)."""
        root = scratch("shop")
        provider = shop(root / "world", {ORDER: CHARGED} if charges is None else charges)[0]
        return cls(provider, root)

    def call(
        self,
        refund: Refund,
        faults: Iterable[Fault] = (),
        *,
        order_id: str = ORDER,
        amount_cents: int = AMOUNT,
        die_after_refund: bool = False,
    ) -> Call:
        """``refund(tools, order_id, amount_cents)`` in a forked child, its requests meeting ``faults``."""
        out = self.root / "call.json"
        out.unlink(missing_ok=True)
        tool = refund_tool(faults, after_refund=die if die_after_refund else None)
        tools = CappedToolbox(self.provider.world, (tool,), REQUEST_CAP)
        try:
            ended = run_in_child(lambda: _record(refund, (tools, order_id, amount_cents), out), timeout=CALL_TIMEOUT)
        except CrashError:
            return Call("hung")
        if ended == "killed":
            return Call("killed")
        return Call(**json.loads(out.read_text(encoding="utf-8")))

    def refunds(self, order_id: str | None = None) -> list[dict[str, Any]]:
        """The refunds in the provider's book."""
        return self.provider.refunds(order_id)

    def requests(self) -> list[dict[str, Any]]:
        """Every request the provider received, with the key it carried."""
        return self.provider.requests()


def require_ended(call: Call, where: str) -> None:
    """The call neither hung nor retried without a bound."""
    require(
        call.ended != "hung",
        _("{where}: refund was still running after {call_timeout:g} s; does its loop end?").format(
            where=where, call_timeout=CALL_TIMEOUT
        ),
    )
    require(
        call.ended != "killed",
        _(
            "{where}: refund sent {request_cap} requests and was stopped: retries need a "
            "bound (at most {max_attempts} attempts; {retry_lesson})"
        ).format(where=where, request_cap=REQUEST_CAP, max_attempts=MAX_ATTEMPTS, retry_lesson=_(RETRY_LESSON)),
    )


PER_ATTEMPT = N_("every attempt at one refund must carry the same idempotency key, never a fresh one per attempt")
PER_CALL = N_(
    "a restarted harness must send the killed call's key: derive it from what names the refund, "
    "never from a uuid drawn per call or once per process"
)


def require_one_refund_after_restart(shop_: Shop, call: Call, where: str, *, sent_before: int) -> str:
    """:func:`require_one_refund` for a call of the :func:`.support.restarted` ``refund``, which must have asked the
    provider itself (``sent_before``: the requests in its book before the call): its failure says so.

    A restarted process holds nothing that says the refund went through, so an id it returns unasked is a guess.
    """
    try:
        refund_id = require_one_refund(shop_, call, where, same_key=PER_CALL)
        require(
            any(r["order_id"] == ORDER for r in shop_.requests()[sent_before:]),
            _(
                "{where}: refund returned {refund_id} without sending a request: a restarted process holds nothing "
                "that says the refund went through, so it sends it again under the killed call's key ({key_lesson})"
            ).format(where=where, refund_id=repr(refund_id), key_lesson=_(KEY_LESSON)),
        )
        return refund_id
    except FailedAfterRestart:
        raise
    except CheckFailed as e:
        raise FailedAfterRestart(e.reason) from None


def require_one_refund(
    shop_: Shop, call: Call, where: str, *, order_id: str = ORDER, same_key: str = PER_ATTEMPT
) -> str:
    """One refund for the order, ``refund`` returned its id, and every request carried one key; the id.

    ``same_key`` says what a second refund means here: a key per attempt, or per call.
    """
    require_ended(call, where)
    if call.ended == "raised":
        if call.kind in ("a timeout", "an unavailable provider"):
            raise CheckFailed(
                _(
                    "{where}: refund gave up on {kind} ({error}): that is a transient outcome, not a "
                    "failure; retry it under the same idempotency key ({taxonomy_lesson})"
                ).format(where=where, kind=_(call.kind), error=call.error, taxonomy_lesson=_(TAXONOMY_LESSON))
            )
        raise CheckFailed(
            _("{where}: refund raised {error} ({refund_contract})").format(
                where=where, error=call.error, refund_contract=_(REFUND_CONTRACT)
            )
        )
    keys = {r["idempotency_key"] for r in shop_.requests() if r["order_id"] == order_id}
    done = shop_.refunds(order_id)
    require(
        keys != {None},
        _(
            "{where}: the requests carried no idempotency key, so the provider could not "
            "tell a retry from a new refund; pass idempotency_key= to tools.execute "
            "({key_lesson})"
        ).format(where=where, key_lesson=_(KEY_LESSON)),
    )
    require(
        len(done) == 1,
        _("{where}: the customer was refunded {n_done} times; {same_key} ({key_lesson})").format(
            where=where, n_done=len(done), same_key=_(same_key), key_lesson=_(KEY_LESSON)
        ),
    )
    require(
        len(keys) == 1,
        _("{where}: the attempts at one refund carried {n_keys} different keys; one is right").format(
            where=where, n_keys=len(keys)
        ),
    )
    require(
        call.value == done[0]["id"],
        _(
            "{where}: refund must return the provider's refund id (the tool's output, here {refund_id}); "
            "it returned a {returned}{value}"
        ).format(
            where=where,
            refund_id=repr(done[0]["id"]),
            returned=call.returned,
            value=f" {call.value!r}" if call.value is not None else "",
        ),
    )
    return done[0]["id"]


def require_permanent(shop_: Shop, call: Call, where: str, kind: str) -> None:
    """The call sent one request and raised the provider's permanent refusal of it."""
    require_ended(call, where)
    sent = len(shop_.requests())
    require(
        sent <= 1,
        _(
            "{where}: refund sent {sent} requests; {kind} is permanent and does not get "
            "better by waiting: raise it at once, retry only timeouts and unavailability "
            "({taxonomy_lesson})"
        ).format(where=where, sent=sent, kind=_(kind), taxonomy_lesson=_(TAXONOMY_LESSON)),
    )
    require(
        call.ended == "raised",
        _("{where}: {kind} must be raised to the caller, not answered with a return").format(where=where, kind=_(kind)),
    )
    # an error of refund's own (a wrong argument name, a refusal it made up) is no answer of the provider's
    require(
        sent == 1,
        _(
            "{where}: refund raised before any request reached the provider ({error}); only the provider "
            "can refuse a refund, so send it once and raise the provider's refusal ({refund_contract})"
        ).format(where=where, error=call.error, refund_contract=_(REFUND_CONTRACT)),
    )
    require(
        call.kind == kind,
        _("{where}: refund must raise the provider's error ({kind}), it raised {error}").format(
            where=where, kind=_(kind), error=call.error
        ),
    )


def check_refund_after_timeout(refund: Refund) -> None:
    """The incident: the provider refunds, its answer times out; the retry refunds nothing more.
    And a provider down once: the retry refunds once."""
    s = Shop.open()
    call = s.call(refund, [Fault.TIMEOUT])
    require_one_refund(s, call, _("a timeout after the provider refunded"))
    require(
        len(s.requests()) >= 2,
        _("a timeout is not an answer: the refund's outcome is unknown, so retry it ({taxonomy_lesson})").format(
            taxonomy_lesson=_(TAXONOMY_LESSON)
        ),
    )
    down = Shop.open()
    require_one_refund(down, down.call(refund, [Fault.UNAVAILABLE]), _("the provider was down, then back"))


def check_refund_refused(refund: Refund) -> None:
    """A refund of more than the charge is sent once, and the provider's refusal raised at once, never retried."""
    s = Shop.open()
    call = s.call(refund, amount_cents=CHARGED + 1)
    require_permanent(s, call, _("a refund of more than the customer paid"), "a refusal")
    require(not s.refunds(), _("a refused refund must leave the provider's book empty"))


def check_refund_after_kill(refund: Refund) -> None:
    """SIGKILL right after the provider refunded; the restarted harness calls refund again: one refund.

    The second call is :func:`.support.restarted`: in the isolated re-check it runs in a freshly
    started learner's process (a key salted with a per-process value changes there and pays twice),
    in the learner's kernel only in a forked copy of it. The re-check's verdict is the grade.
    """
    s = Shop.open()
    first = s.call(refund, die_after_refund=True)
    require(
        first.ended == "killed" and len(s.refunds()) == 1,
        _(
            "refund never reached the provider (it {ended}{value}); it must call tools.execute('refund_payment', ...)"
        ).format(ended=ended_as_said(first.ended), value=": " + first.error if first.error else ""),
    )
    sent = len(s.requests())
    again = s.call(restarted(refund))
    require_one_refund_after_restart(
        s, again, _("the re-run after a SIGKILL that fell after the refund"), sent_before=sent
    )


def check_two_refunds(refund: Refund) -> None:
    """Two orders refunded by one process, then another amount of the first: three refunds, each under its own key."""
    s = Shop.open({ORDER: CHARGED, "A-1043": 1250})
    require_one_refund(s, s.call(refund), _("order {order}").format(order=ORDER))
    second = s.call(refund, order_id="A-1043", amount_cents=1250)
    if second.kind == "a key reused with other parameters":
        raise CheckFailed(
            _(
                "the second order's refund was refused: it carried the first order's key. One "
                "key per logical refund: derive it from the refund, not once per process "
                "({key_lesson})"
            ).format(key_lesson=_(KEY_LESSON))
        )
    require_one_refund(s, second, _("order A-1043"), order_id="A-1043")
    partial = s.call(refund, amount_cents=AMOUNT // 2)
    require_ended(partial, _("a second, smaller refund of order {order}").format(order=ORDER))
    require(
        partial.ended == "returned" and len(s.refunds(ORDER)) == 2,
        _(
            "a second refund of order {order}, for another amount, is another logical refund, so it needs "
            "another key; refund {outcome} ({key_lesson})"
        ).format(
            order=ORDER,
            outcome=_("raised {error}").format(error=partial.error)
            if partial.ended == "raised"
            else _("made {n_done} refunds of it in all").format(n_done=len(s.refunds(ORDER))),
            key_lesson=_(KEY_LESSON),
        ),
    )
