"""One message on a stream socket: a 4-byte big-endian length, then a JSON object with an ``op``."""

from __future__ import annotations

import json
import socket
from typing import Any

from .errors import ProtocolError

MAX_MESSAGE = 32 << 20
"""Bytes of the largest message either side sends or accepts."""


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise EOFError("the other side closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def send(sock: socket.socket, message: dict[str, Any]) -> None:
    """Write one message; ``ValueError`` if it is over :data:`MAX_MESSAGE`."""
    data = json.dumps(message, separators=(",", ":"), allow_nan=False).encode()
    if len(data) > MAX_MESSAGE:
        raise ValueError(f"a message of {len(data) >> 20} MiB is over the {MAX_MESSAGE >> 20} MiB cap")
    sock.sendall(len(data).to_bytes(4, "big") + data)


def parse(data: bytes) -> dict[str, Any]:
    """One message's bytes as an object with a string ``op``; :class:`ProtocolError` for anything else."""
    try:
        message = json.loads(data)
    except (ValueError, RecursionError) as e:  # not JSON, bad UTF-8, too deep, an int of too many digits
        raise ProtocolError(f"a message is not JSON ({type(e).__name__})") from None
    if not isinstance(message, dict) or not isinstance(message.get("op"), str):
        raise ProtocolError("a message is not an object with an op")
    return message


def receive(sock: socket.socket) -> dict[str, Any]:
    """Read one message; :class:`ProtocolError` if it is oversized or malformed, ``EOFError`` at the end."""
    size = int.from_bytes(_recv_exact(sock, 4), "big")
    if size > MAX_MESSAGE:
        raise ProtocolError(f"a message of {size} bytes is over the cap")
    return parse(_recv_exact(sock, size))
