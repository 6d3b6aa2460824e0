"""What the checker reports: each re-checked test cell's verdict, and how loading the learner's cells went."""

from __future__ import annotations

import json
from typing import Any

from ..reasons import printable, raised_only_here


class Report(dict):
    """{test cell grade_id: None | why it failed in isolation}, and how loading the learner's code went.

    ``load_errors``: [{"cell", "error", "kernel"}] for each learner cell that raised (or could not
    run) in the learner's process, with the error the kernel showed for it (None if it ran fine
    there); ``inconclusive``: why the failures cannot be trusted (a process died or hung, or the
    learner's code raised there but not in the kernel), else None; ``visible_failures``: the failed
    cells whose failing check is a visible one, which the kernel ran and passed (a real disagreement
    between the two runs: the others failed a hidden check, which only the re-check runs).
    """

    def __init__(
        self,
        cells: dict | None = None,
        *,
        load_errors: list | None = None,
        inconclusive: str | None = None,
        visible_failures: list | None = None,
    ) -> None:
        super().__init__(cells or {})
        self.load_errors = list(load_errors or [])
        self.visible_failures = [str(g) for g in visible_failures or []]
        self.inconclusive = inconclusive
        if inconclusive is None:
            new = [e for e in self.load_errors if e.get("kernel") is None]
            if new:
                self.inconclusive = printable(raised_only_here(str(new[0]["cell"]), str(new[0]["error"])))[:200]

    def to_json(self) -> str:
        return json.dumps({"cells": dict(self), **vars(self)}, sort_keys=True)  # vars: the three fields above


def load_errors_of(raw: Any) -> list[dict[str, Any]]:
    """The learner's process's account of loading, kept only as short strings (it is untrusted)."""
    out = []
    for e in raw if isinstance(raw, list) else []:
        if isinstance(e, dict):
            kernel = e.get("kernel")
            out.append(
                {
                    "cell": str(e.get("cell"))[:80],
                    "error": str(e.get("error"))[:150],
                    "kernel": None if kernel is None else str(kernel)[:150],
                }
            )
    return out[:50]
