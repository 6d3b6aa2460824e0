"""The hidden checks of the ``postmortem`` assignment: every crash point, other tools, an unknown tool.

The notebook's hidden test block calls these as ``hidden.check_*(reconcile)``; the side-effecting
and unknown tool checks are the reconcile assignment's own, re-run on the fixed reconcile.
"""

from __future__ import annotations

from ...crash import CRASH_POINTS
from ...scenarios import SCENARIOS
from ...strategies import Reconcile
from ..checks.support import replay, require
from .reconcile import check_other_side_effect_tools, check_unknown_tool

__all__ = ["check_every_crash_point", "check_other_side_effect_tools", "check_unknown_tool"]


def check_every_crash_point(fn: Reconcile, *, ledger: bool = False) -> None:
    """At every crash point, for both scenarios: no 400, the run finishes, at most one email, one in the end."""
    for tool_name in SCENARIOS:
        for point in CRASH_POINTS:
            r = replay(fn, point, tool_name, ledger=ledger)
            where = f"crash {point} on the {tool_name} turn"
            require(r.error is None, f"{where}: the resume failed: {r.error}")
            require(r.checkpoint is not None and r.checkpoint.is_finished(), f"{where}: the resumed run must finish")
            want = 1 if tool_name == "send_email" else 0
            require(r.emails == want, f"{where}: {r.emails} emails in the outbox, expected {want}")
