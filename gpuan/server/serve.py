"""The server's loop: accept a command, fork a child that runs it in the client's place, report the
child's exit status to the client when it ends; stop after an idle spell or when asked. The messages
are :mod:`gpuan.server.wire`'s."""

from __future__ import annotations

import contextlib
import io
import os
import selectors
import signal
import socket
import struct
import sys
import time
import traceback
from dataclasses import asdict

from gpuan.server.warm import Warmth, load_cached, loaded
from gpuan.server.wire import WORD, receive_message, send_message

#: how long a client may take to send its request, once connected
_REQUEST_S = 10.0


def serve(path: str, warmth: Warmth, *, idle_s: float, log=sys.stderr) -> None:
    """Listen on the Unix socket `path` and run the commands sent to it, each in a forked child, until
    no command has run for `idle_s` seconds or a quit request or SIGTERM comes; removes the socket when
    it stops. The socket appears at `path` only once it accepts (it is bound aside and renamed)."""
    started = time.time()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    aside = f"{path}.{os.getpid()}"
    _remove(aside)
    listener.bind(aside)
    listener.listen(64)
    os.rename(aside, path)
    inode = os.stat(path).st_ino
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    stop = []
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda signum, frame: stop.append(signum))
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    children: dict[int, socket.socket] = {}
    served, last = 0, time.monotonic()
    print(f"gpuan server: pid {os.getpid()} listening on {path}", file=log, flush=True)
    try:
        while not stop:
            wait = None if children else max(0.0, last + idle_s - time.monotonic())
            ready = selector.select(wait)
            for selected, _ in ready:
                if selected.fileobj is listener:
                    kind = _accept(listener, children, warmth, started, served, path, log, (listener, wake_r, wake_w))
                    served += kind == "run"
                    if kind == "quit":
                        stop.append("quit")
                else:
                    _drain(wake_r)
            if _reap(children) and not children:
                load_cached()  # what the children compiled, for the next ones
            if children or ready:
                last = time.monotonic()
            elif time.monotonic() >= last + idle_s:
                print(f"gpuan server: idle for {idle_s:g} s, stopping", file=log, flush=True)
                break
    finally:
        if _same_socket(path, inode):
            _remove(path)
        listener.close()
        while children:  # let running commands end and their clients hear how
            _wait_one(children)
        print(f"gpuan server: stopped after {served} commands", file=log, flush=True)


def _accept(listener, children, warmth, started, served, path, log, inherited) -> str:
    """Take one request from `listener`; returns its kind ("run", "status", "quit" or "bad")."""
    try:
        conn, _ = listener.accept()
    except (BlockingIOError, InterruptedError):
        return "bad"
    fds: list[int] = []
    try:
        conn.settimeout(_REQUEST_S)
        if not _same_user(conn):
            return "bad"
        kind, fds, _, _ = socket.recv_fds(conn, 1, 3)
        if kind == b"R" and len(fds) == 3:
            request = receive_message(conn)
            if request is None:
                return "bad"
            pid = os.fork()
            if pid == 0:
                _child(conn, fds, request, inherited)  # never returns
            children[pid] = conn
            conn = None
            return "run"
        if kind == b"S":
            send_message(conn, _status(warmth, started, served, path, sorted(children)))
            return "status"
        if kind == b"Q":
            send_message(conn, _status(warmth, started, served, path, sorted(children)))
            return "quit"
        return "bad"
    except (OSError, ValueError) as e:
        print(f"gpuan server: a request failed: {e}", file=log, flush=True)
        return "bad"
    finally:
        for fd in fds:  # the child has its own copies
            _close(fd)
        if conn is not None:
            conn.close()


def _status(warmth: Warmth, started: float, served: int, path: str, running: list[int]) -> dict:
    return {
        "pid": os.getpid(),
        "socket": path,
        "started": started,
        "served": served,
        "running": running,
        "loaded": loaded(),
        "warm": asdict(warmth),
    }


def _same_user(conn: socket.socket) -> bool:
    """Whether the peer of `conn` runs as this user (the socket's directory already admits no other)."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1] == os.getuid()


def _reap(children: dict[int, socket.socket]) -> int:
    """Tell the client of every child that has ended how it ended; returns how many ended."""
    ended = 0
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        _report(children.pop(pid, None), status)
        ended += 1
    return ended


def _wait_one(children: dict[int, socket.socket]) -> None:
    try:
        pid, status = os.waitpid(-1, 0)
    except ChildProcessError:
        children.clear()
        return
    _report(children.pop(pid, None), status)


def _report(conn: socket.socket | None, status: int) -> None:
    if conn is None:
        return
    try:
        conn.sendall(WORD.pack(os.waitstatus_to_exitcode(status)))
    except OSError:
        pass  # the client is gone (killed): nobody to tell
    conn.close()


def _child(conn: socket.socket, fds: list[int], request: dict, inherited: tuple) -> None:
    """Run one command as the client would have: its descriptors as stdin, stdout and stderr, its
    working directory, umask, environment and arguments; exit with the command's exit code."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for thing in inherited:
            _close(thing)
        for target, fd in zip((0, 1, 2), fds):
            os.dup2(fd, target)
            _close(fd)
        sys.stdin, sys.stdout, sys.stderr = _streams(request.get("text") or {}, bool(request.get("unbuffered")))
        os.chdir(request["cwd"])
        os.umask(request["umask"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = ["gpuan", *request["argv"]]
        conn.settimeout(None)
        conn.sendall(WORD.pack(os.getpid()))
        conn.close()
        code = _run(request["argv"])
    except BaseException:  # noqa: BLE001 - a child must never return into the server's loop
        with contextlib.suppress(Exception):
            traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def _run(argv: list[str]) -> int:
    """Run the gpuan command line on `argv` as ``gpuan`` would; returns the exit code as Python's exit
    would make it."""
    from gpuan.cli import main

    try:
        return main(argv)
    except SystemExit as e:
        if e.code is None:
            return 0
        if isinstance(e.code, int):
            return e.code
        print(e.code, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BaseException:  # noqa: BLE001 - as Python would: the traceback, exit code 1
        traceback.print_exc()
        return 1


def _streams(text: dict[str, list[str | None]], unbuffered: bool):
    """Return text streams on descriptors 0, 1 and 2 as Python makes them at its start, with the client's
    encodings and error handlers (`text`: name -> [encoding, errors]): buffered as Python buffers a file
    (its block size), line by line where a terminal reads, stderr always line by line; stdout and stderr
    written through where the client's Python was unbuffered (``-u``, ``PYTHONUNBUFFERED``)."""
    streams = []
    for fd, name in enumerate(("stdin", "stdout", "stderr")):
        encoding, errors = (text.get(name) or [None, None])[:2]
        through = unbuffered and fd > 0
        binary = open(fd, "rb" if fd == 0 else "wb", buffering=0 if through else -1, closefd=False)
        streams.append(
            io.TextIOWrapper(
                binary,
                encoding=encoding or "utf-8",
                errors=errors or ("backslashreplace" if fd == 2 else "strict"),
                newline=None if fd == 0 else "\n",
                line_buffering=fd == 2 or (fd == 1 and os.isatty(1)),
                write_through=through,
            )
        )
    return streams


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except (BlockingIOError, InterruptedError):
        pass


def _close(thing) -> None:
    try:
        thing.close() if hasattr(thing, "close") else os.close(thing)
    except OSError:
        pass


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _same_socket(path: str, inode: int) -> bool:
    try:
        return os.stat(path).st_ino == inode
    except OSError:
        return False
