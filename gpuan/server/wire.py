"""The messages between a ``gpuan`` command (the client) and the server, over a Unix stream socket.

1. The client sends one byte, the request's kind (``R`` run, ``S`` status, ``Q`` quit); for ``R`` then
   the request (a 4-byte big-endian length, then JSON).
2. For ``R``, the server forks a child, which reads the request, takes on its environment and sends
   ``P`` and its pid. The client answers ``G`` (go) with four passed descriptors: its stdin, stdout,
   stderr and working directory; only then does the child run the command. A client that gave up
   waiting (and runs the command itself) therefore never gets it run twice, and its descriptors are
   never held by a server that does not answer (a pipe it holds would not close).
3. When the child has ended, the server sends ``X`` and its exit status (minus the signal's number when
   a signal ended it). An ``X`` before any ``P`` means the child ended before the command started: the
   client runs it itself.

``S`` and ``Q`` are answered with a length and JSON. Stdlib only."""

from __future__ import annotations

import json
import socket
import struct

WORD = struct.Struct(">i")
#: the tags of the words the client receives, and of the client's go-ahead
PID, EXIT, GO = b"P", b"X", b"G"
#: a child's exit code where it ended before running the command (the client then runs it itself; no
#: gpuan command exits with it)
NOT_RUN = 125


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


def send_tagged(conn: socket.socket, tag: bytes, value: int) -> None:
    """Send the word `value` tagged with `tag` (PID or EXIT)."""
    conn.sendall(tag + WORD.pack(value))


def receive_tagged(conn: socket.socket) -> tuple[bytes, int] | None:
    """Return the next tagged word from `conn` as (tag, value), or None where it closed first."""
    data = receive_exactly(conn, 1 + WORD.size)
    return (data[:1], WORD.unpack(data[1:])[0]) if len(data) == 1 + WORD.size else None
