"""The hidden checks of the ``postmortem`` assignment: every crash point, other tools, an unknown tool,
and the refund's every other outcome.

The notebook's hidden test blocks call these as ``hidden.check_*(reconcile)`` and
``hidden.check_*(refund)``; the side-effecting and unknown tool checks are the reconcile
assignment's own, re-run on the fixed reconcile. :data:`CONTRACT` maps each rule of Part 2's
contract to the checks that test it.
"""

from __future__ import annotations

from ...crash import CRASH_POINTS
from ...lab.i18n import N_
from ...lab.payments import Fault
from ...scenarios import one_call_scenarios
from ...strategies import Reconcile
from ..checks.postmortem import (
    MAX_ATTEMPTS,
    ORDER,
    TAXONOMY_LESSON,
    Refund,
    Shop,
    require_ended,
    require_one_refund,
    require_one_refund_after_restart,
    require_permanent,
)
from ..checks.support import replay, require, restarted
from ..i18n import _ as course_
from .i18n import _, fails_with
from .reconcile import check_other_side_effect_tools, check_unknown_tool

__all__ = [
    "CONTRACT",
    "check_every_crash_point",
    "check_other_side_effect_tools",
    "check_partial_refunds",
    "check_refund_bounded",
    "check_refund_conflict",
    "check_refund_kill_then_timeout",
    "check_refund_unavailable",
    "check_same_amount_orders",
    "check_unknown_tool",
]


@fails_with(
    N_(
        "A crash at any point, then a resume, must end the run with no 400 and one email at most. Reread Part 1's fix (Exercise 3)."
    )
)
def check_every_crash_point(fn: Reconcile, *, ledger: bool = False) -> None:
    """At every crash point, for both one-call scenarios: no 400, the run finishes, at most one email, one in the end."""
    for tool_name in one_call_scenarios():  # the postmortem's runs: one call per turn
        for point in CRASH_POINTS:
            r = replay(fn, point, tool_name, ledger=ledger)
            where = _("crash {point} on the {tool_name} turn").format(point=point, tool_name=tool_name)
            require(r.error is None, _("{where}: the resume failed: {error}").format(where=where, error=r.error))
            require(
                r.checkpoint is not None and r.checkpoint.is_finished(),
                _("{where}: the resumed run must finish").format(where=where),
            )
            want = 1 if tool_name == "send_email" else 0
            require(
                r.emails == want,
                _("{where}: {emails} emails in the outbox, expected {want}").format(
                    where=where, emails=r.emails, want=want
                ),
            )


@fails_with(
    N_("A timeout or an unavailable provider is retried, under the same key. Reread Part 2's contract (Exercise 3).")
)
def check_refund_unavailable(refund: Refund) -> None:
    """An unavailable provider, twice, then a timeout after the refund: retried, one refund, its id returned."""
    s = Shop.open()
    call = s.call(refund, [Fault.UNAVAILABLE, Fault.UNAVAILABLE, Fault.TIMEOUT])
    require_one_refund(s, call, _("two outages, then a timeout after the refund"))


@fails_with(
    N_(
        "Retry at most as many times as the contract allows, then raise the last error. Reread Part 2's contract (Exercise 3)."
    )
)
def check_refund_bounded(refund: Refund) -> None:
    """A provider that never recovers: at most MAX_ATTEMPTS requests, then the last error is raised."""
    for fault, kind, refunded in ((Fault.UNAVAILABLE, "an unavailable provider", 0), (Fault.TIMEOUT, "a timeout", 1)):
        s = Shop.open()
        call = s.call(refund, [fault] * 30)
        where = _("{kind}, on every attempt").format(kind=course_(kind))
        require_ended(call, where)
        sent = len(s.requests())
        require(
            2 <= sent <= MAX_ATTEMPTS,
            _(
                "{where}: refund sent {sent} requests; retry a transient error, at most {max_attempts} attempts in all"
            ).format(where=where, sent=sent, max_attempts=MAX_ATTEMPTS),
        )
        require(
            call.ended == "raised" and call.kind == kind,
            _("{where}: once the attempts are spent, raise the last error ({kind}); refund {did} ({lesson})").format(
                where=where,
                kind=course_(kind),
                did=_("raised {error}").format(error=call.error)
                if call.ended == "raised"
                else _("returned a {type}").format(type=call.returned),
                lesson=course_(TAXONOMY_LESSON),
            ),
        )
        require(
            len(s.refunds()) == refunded,
            _("{where}: {n_refunds} refunds in the book, {refunded} expected").format(
                where=where, n_refunds=len(s.refunds()), refunded=refunded
            ),
        )


@fails_with(
    N_("Any other error is permanent: it is raised at once, never retried. Reread Part 2's contract (Exercise 3).")
)
def check_refund_conflict(refund: Refund) -> None:
    """The provider refuses the key as reused with other parameters: raised at once, never retried."""
    s = Shop.open()
    call = s.call(refund, [Fault.CONFLICT])
    require_permanent(s, call, _("a key the provider refuses as reused"), "a key reused with other parameters")


ANOTHER_REFUND = N_(
    "Another refund (another order, or another amount of the same order) has another key. Reread Part 2's contract (Exercise 3)."
)
"""Why two logical refunds failed to get two keys (two checks test it)."""


@fails_with(ANOTHER_REFUND)
def check_partial_refunds(refund: Refund) -> None:
    """Two partial refunds of one order (other amounts): two logical refunds, two keys, two refunds."""
    s = Shop.open()
    first = require_one_refund(s, s.call(refund, amount_cents=1000), _("1000 cents of {order}").format(order=ORDER))
    second = s.call(refund, amount_cents=2000)
    require_ended(second, "a second, partial refund")
    require(
        second.ended == "returned" and len(s.refunds(ORDER)) == 2 and second.value not in (None, first),
        _(
            "a second refund of {order} for another amount is another logical refund: it "
            "needs its own key (refund {value})"
        ).format(
            order=ORDER,
            value="raised " + second.error if second.ended == "raised" else "returned " + repr(second.value),
        ),
    )


@fails_with(ANOTHER_REFUND)
def check_same_amount_orders(refund: Refund) -> None:
    """Two orders of the same amount, each refunded in full: two logical refunds, so two keys and two refunds."""
    s = Shop.open({ORDER: 1250, "A-1044": 1250})
    require_one_refund(s, s.call(refund, amount_cents=1250), _("1250 cents of {order}").format(order=ORDER))
    second = s.call(refund, order_id="A-1044", amount_cents=1250)
    require_ended(second, _("a refund of another order of the same amount"))
    require(
        second.ended == "returned" and len(s.refunds("A-1044")) == 1,
        _(
            "another order of the same amount is another logical refund: its key must name "
            "the order too (refund {value})"
        ).format(value="raised " + second.error if second.ended == "raised" else "returned " + repr(second.value)),
    )


@fails_with(
    N_(
        "One logical refund has one key, the same on every retry and every re-run after a crash. Reread Part 2's contract (Exercise 3)."
    )
)
def check_refund_kill_then_timeout(refund: Refund) -> None:
    """SIGKILL after the refund, then the re-run meets a timeout: still one refund, its id returned.

    The re-run is :func:`..checks.support.restarted`: a freshly started learner's process in the
    isolated re-check, which decides; a forked copy in the learner's kernel.
    """
    s = Shop.open()
    first = s.call(refund, die_after_refund=True)
    require(
        first.ended == "killed", _("refund never reached the provider: it must call tools.execute('refund_payment')")
    )
    sent = len(s.requests())
    again = s.call(restarted(refund), [Fault.TIMEOUT])
    require_one_refund_after_restart(s, again, _("a re-run after a SIGKILL, meeting a timeout"), sent_before=sent)


CONTRACT: dict[str, tuple[str, ...]] = {
    "`refund` returns the provider's refund id: the tool's output.": (
        "check_refund_after_timeout",
        "check_two_refunds",
    ),
    "One logical refund has one idempotency key, derived from what names it (the order and the amount), "
    "so every retry and every re-run after a crash sends the same key.": (
        "check_refund_after_timeout",
        "check_refund_after_kill",
        "check_refund_kill_then_timeout",
    ),
    "Another refund (another order, or another amount of the same order) has another key.": (
        "check_two_refunds",
        "check_partial_refunds",
        "check_same_amount_orders",
    ),
    "A timeout (`rc.ToolTimeoutError`) is not a failure: the refund may have happened, "
    "so it is retried under the same key.": ("check_refund_after_timeout", "check_refund_unavailable"),
    "An unavailable provider (`rc.ToolUnavailableError`) did nothing: it is retried too.": (
        "check_refund_unavailable",
    ),
    f"At most {MAX_ATTEMPTS} attempts in all; when they are spent, the last error is raised.": (
        "check_refund_bounded",
    ),
    "Any other error is permanent (a refusal: more than is left of the charge, a key reused with other "
    "parameters): it is raised at once, never retried.": ("check_refund_refused", "check_refund_conflict"),
}
"""Part 2's contract, each rule's exact text (as the notebook's bullets hold it) to the checks that test it."""
