"""What can go wrong on the channel, each error carrying its reason."""

from __future__ import annotations

from ....errors import CourseError


class ProtocolError(CourseError):
    """The other side broke the protocol (a malformed, oversized or unknown message or value); ``.reason`` says how."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"the re-check protocol was broken: {reason}")
        self.reason = reason


class NotDataError(ProtocolError):
    """A value that is not data was to be sent (an object, a function, a class of no table); ``.what`` names it."""

    def __init__(self, what: str) -> None:
        super().__init__(f"{what} is not data: only JSON values and the kit's models cross")
        self.what = what


class ProcessEndedError(CourseError):
    """The other process ended in the middle of a call (it exited, crashed, was killed or hit a limit); ``.peer`` names it."""

    def __init__(self, peer: str = "the other process") -> None:
        super().__init__(f"{peer} ended during the call (it exited, crashed, was killed or hit a limit)")
        self.peer = peer
