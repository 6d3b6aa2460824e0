"""A generic channel between two processes that carries data only: framing, a codec, a session given its ops.

It knows nothing of learners or checks: what may cross and which ops exist are given to it
(:mod:`..boundary` holds the re-check's table).
"""

from __future__ import annotations

from .codec import MAX_DEPTH, Codec, Handles, Later, NoHandles
from .errors import NotDataError, ProcessEndedError, ProtocolError
from .framing import MAX_MESSAGE, parse, receive, send
from .session import Session, StaleSessionError

__all__ = [
    "MAX_DEPTH",
    "MAX_MESSAGE",
    "Codec",
    "Handles",
    "Later",
    "NoHandles",
    "NotDataError",
    "ProcessEndedError",
    "ProtocolError",
    "Session",
    "StaleSessionError",
    "parse",
    "receive",
    "send",
]
