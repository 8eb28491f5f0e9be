"""The messages between a ``gpuan`` command and the server, over a Unix stream socket.

The client sends one byte, the request kind (``R`` run, ``S`` status, ``Q`` quit), with its stdin,
stdout and stderr as passed descriptors for ``R``; then a request as a 4-byte big-endian length and
JSON. For ``R`` the child answers its pid (4 bytes) and the server, once the child has ended, its exit
status (4 bytes, signed: minus the signal's number when a signal ended it). ``S`` and ``Q`` are
answered with a length and JSON. Stdlib only."""

from __future__ import annotations

import json
import socket
import struct

WORD = struct.Struct(">i")


def send_message(conn: socket.socket, message: dict) -> None:
    """Send `message` as 4-byte length and JSON."""
    data = json.dumps(message).encode()
    conn.sendall(WORD.pack(len(data)) + data)


def receive_exactly(conn: socket.socket, n: int) -> bytes:
    """Return the next `n` bytes from `conn`, or fewer where it closed first."""
    parts, got = [], 0
    while got < n:
        part = conn.recv(n - got)
        if not part:
            break
        parts.append(part)
        got += len(part)
    return b"".join(parts)


def receive_message(conn: socket.socket) -> dict | None:
    """Return the next message (length and JSON) from `conn`, or None where it closed first."""
    head = receive_exactly(conn, WORD.size)
    if len(head) < WORD.size:
        return None
    data = receive_exactly(conn, WORD.unpack(head)[0])
    return json.loads(data) if data else None


def receive_word(conn: socket.socket) -> int | None:
    """Return the next signed 4-byte word from `conn`, or None where it closed first."""
    data = receive_exactly(conn, WORD.size)
    return WORD.unpack(data)[0] if len(data) == WORD.size else None
