"""Isolation: what runs learner code and the checker, behind one seam.

A :class:`Backend` (``bwrap`` or ``plain``) runs a :class:`Job` and says what it holds
(:meth:`Backend.guarantees`). The grading run makes one with :func:`make_backend`, from the course's
config, and every learner process and checker of the run goes through it. What each backend holds
and why: ``docs/architecture.md``, "The sandbox".
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ._names import owned
from ._process import die_with_parent
from .backend import Backend, Freezer, Guarantee, IsolationUnavailable, Job, Mount, Outcome
from .bwrap import BwrapBackend
from .disk import capped_folder
from .limits import Limit, Limits
from .plain import PlainBackend
from .sweep import sweep_left_behind
from .views import library_copy

__all__ = [
    "BACKENDS",
    "Backend",
    "BwrapBackend",
    "Freezer",
    "Guarantee",
    "IsolationUnavailable",
    "Job",
    "Limit",
    "Limits",
    "Mount",
    "Outcome",
    "PlainBackend",
    "capped_folder",
    "die_with_parent",
    "library_copy",
    "make_backend",
    "missing",
    "owned",
    "sweep_left_behind",
]

BACKENDS: dict[str, type[BwrapBackend] | type[PlainBackend]] = {"bwrap": BwrapBackend, "plain": PlainBackend}
"""The backends by the name the course's config gives (``SandboxedExecute.isolation``)."""


def make_backend(
    name: str, *, library: Path | None = None, limits: Limits | None = None, env: Mapping[str, str] | None = None
) -> Backend:
    """The backend called ``name``, seeing ``library``, with ``limits``; ValueError naming the choices if unknown."""
    try:
        kind = BACKENDS[name]
    except KeyError:
        raise ValueError(f"no isolation backend {name!r}: choose one of {', '.join(sorted(BACKENDS))}") from None
    return kind(library=library, limits=limits or Limits(), env=dict(env or {}))


def missing(backend: Backend) -> list[Guarantee]:
    """What the strongest backend holds here and ``backend`` does not, in the order of :class:`Guarantee`."""
    held = backend.guarantees()
    return [g for g in Guarantee if g not in held and g in BwrapBackend().guarantees()]
