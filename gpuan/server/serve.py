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
import threading
import time
import traceback
from dataclasses import asdict
from pathlib import Path

from gpuan.server.warm import Warmth, fork_safe, load_cached, loaded
from gpuan.server.wire import EXIT, GO, NOT_RUN, PID, receive_message, send_message, send_tagged

#: how long the server waits for a connected client's first byte: the client sends it at once, and the
#: server serves no one else meanwhile
_KIND_S = 1.0
#: how long a child waits for the request, then for the client's go-ahead
_REQUEST_S = 10.0


def serve(path: str, warmth: Warmth, *, idle_s: float, log=sys.stderr, keep: tuple = ()) -> None:
    """Listen on the Unix socket `path` and run the commands sent to it, each in a forked child, until
    no command has run for `idle_s` seconds or a quit request or SIGTERM comes; removes the socket when
    it stops. The caller holds the lock of `path` (no other server binds it): a socket left there by a
    server that was killed is replaced. The socket appears at `path` only once it accepts (it is bound
    aside and renamed). `keep`: open files of the server's own that children must not hold (its lock)."""
    started = time.time()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    aside = f"{path}.{os.getpid()}"
    Path(aside).unlink(missing_ok=True)
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

    def inherited() -> list:
        """What a child closes: the server's sockets, pipe, selector and lock, the other clients' connections."""
        return [listener, selector, wake_r, wake_w, *keep, *children.values()]

    def status() -> dict:
        return _status(warmth, started, served, path, children, idle_s)

    print(f"gpuan server: pid {os.getpid()} listening on {path}", file=log, flush=True)
    try:
        while not stop:
            wait = None if children else max(0.0, last + idle_s - time.monotonic())
            for selected, _ in selector.select(wait):
                if selected.fileobj is listener:
                    kind = _accept(listener, children, inherited, status)
                    if kind == "run":
                        served += 1
                        last = time.monotonic()
                    elif kind == "quit":
                        stop.append("quit")
                else:
                    _drain(wake_r)
            if _reap(children):
                last = time.monotonic()
                if not children:
                    load_cached()  # what the children compiled, for the next ones
                    unsafe = fork_safe()
                    if unsafe:
                        print(f"gpuan server: {', '.join(unsafe)} in the server; stopping", file=log, flush=True)
                        break
            if not children and time.monotonic() >= last + idle_s:
                print(f"gpuan server: idle for {idle_s:g} s, stopping", file=log, flush=True)
                break
    finally:
        if _same_socket(path, inode):
            Path(path).unlink(missing_ok=True)
        listener.close()
        _reap(children, wait=True)  # let running commands end and their clients hear how
        print(f"gpuan server: stopped after {served} commands", file=log, flush=True)


def _accept(listener, children, inherited, status) -> str:
    """Take one request from `listener`; returns its kind ("run", "status", "quit" or "bad")."""
    try:
        conn, _ = listener.accept()
    except (BlockingIOError, InterruptedError):
        return "bad"
    try:
        conn.settimeout(_KIND_S)
        if not _same_user(conn):
            return "bad"
        kind = conn.recv(1)
        if kind == b"R":
            pid = os.fork()
            if pid == 0:
                _child(conn, inherited())  # never returns
            children[pid] = conn
            conn = None
            return "run"
        if kind in (b"S", b"Q"):
            send_message(conn, status())
            return "status" if kind == b"S" else "quit"
        return "bad"
    except (OSError, ValueError):
        return "bad"
    finally:
        if conn is not None:
            conn.close()


def _status(warmth: Warmth, started: float, served: int, path: str, children: dict, idle_s: float) -> dict:
    return {
        "idle_s": idle_s,
        "pid": os.getpid(),
        "socket": path,
        "started": started,
        "served": served,
        "running": sorted(children),
        "loaded": loaded(),
        "warm": asdict(warmth),
    }


def _same_user(conn: socket.socket) -> bool:
    """Whether the peer of `conn` runs as this user (the socket's directory already admits no other)."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1] == os.getuid()


def _reap(children: dict[int, socket.socket], *, wait: bool = False) -> int:
    """Tell the client of every child that has ended how it ended (with `wait`, of every child, as each
    ends); returns how many ended."""
    ended = 0
    while children:
        try:
            pid, status = os.waitpid(-1, 0 if wait else os.WNOHANG)
        except ChildProcessError:
            children.clear()
            break
        if pid == 0:
            break
        _report(children.pop(pid, None), status)
        ended += 1
    return ended


def _report(conn: socket.socket | None, status: int) -> None:
    if conn is None:
        return
    try:
        send_tagged(conn, EXIT, os.waitstatus_to_exitcode(status))
    except OSError:
        pass  # the client is gone: nobody to tell
    conn.close()


def _child(conn: socket.socket, inherited: list) -> None:
    """Take the client's place (its umask, environment, ignored signals and arguments), say so, and once
    the client says go (with its stdin, stdout, stderr and working directory), run its command; exit with
    the command's exit code, or NOT_RUN where it did not start."""
    code = NOT_RUN
    try:
        signal.set_wakeup_fd(-1)
        for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for thing in inherited:
            _close(thing)
        conn.settimeout(_REQUEST_S)
        request = receive_message(conn)
        if request is None:
            os._exit(NOT_RUN)
        argv, umask, env = list(request["argv"]), int(request["umask"]), dict(request["env"])
        os.umask(umask)
        os.environ.clear()
        os.environ.update(env)
        time.tzset()
        for signum in request.get("ignored", ()):
            signal.signal(signum, signal.SIG_IGN)
        sys.argv = ["gpuan", *argv]
        try:
            send_tagged(conn, PID, os.getpid())
        except OSError:
            os._exit(NOT_RUN)  # the client gave up before the child was ready
        conn.settimeout(None)  # a client gone closes the connection: no deadline needed
        go, fds, _, _ = socket.recv_fds(conn, 1, 4)
        if go != GO or len(fds) != 4:
            os._exit(NOT_RUN)  # the client gave up waiting: it runs the command itself
        code = 1
        for target, fd in zip((0, 1, 2), fds):
            os.dup2(fd, target)
        os.fchdir(fds[3])
        for fd in fds:
            _close(fd)
        sys.stdin, sys.stdout, sys.stderr = _streams(request.get("text") or {}, bool(request.get("unbuffered")))
        conn.settimeout(None)
        threading.Thread(target=_end_with_client, args=(conn,), daemon=True).start()
        code = _run(argv)
    except KeyboardInterrupt:  # Ctrl-C as the command was starting
        code = 130
    except BaseException:  # noqa: BLE001 - a child must never return into the server's loop
        with contextlib.suppress(Exception):
            traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def _end_with_client(conn: socket.socket) -> None:
    """Wait for the client's end of `conn` to close before the command ends (the client was killed): end
    the command as SIGTERM does, so that it leaves no half-written file."""
    with contextlib.suppress(OSError):
        conn.recv(1)
    os.kill(os.getpid(), signal.SIGTERM)


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


def _same_socket(path: str, inode: int) -> bool:
    try:
        return os.stat(path).st_ino == inode
    except OSError:
        return False
