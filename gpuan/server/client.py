"""Hand a command to the server of this environment (:mod:`gpuan.server.serve`), as if it ran here.

The server's child gets this process's stdin, stdout and stderr themselves (passed descriptors: a
terminal stays a terminal, a pipe a pipe), its working directory (as a descriptor too), umask,
environment, ignored signals and arguments; this process forwards Ctrl-C, SIGTERM and SIGHUP to the
child and exits as the child did. Where no server answers in time, or the child ends before the
command starts, the caller runs the command itself (the go-ahead of :mod:`gpuan.server.wire` makes
sure it never runs twice). Stdlib only: a command that the server runs imports nothing else here."""

from __future__ import annotations

import fcntl
import os
import signal
import socket
import sys

from gpuan.options import MPI_LAUNCHER_VARS

#: GPUAN_SERVER values that keep every command in its own process
_OFF = ("0", "off", "no", "false")
#: arguments that a command answers at once by itself (a server would only add its round trip)
_AT_ONCE = ("-h", "--help", "--version")
#: paths that name this process's own descriptors, which the child does not have
_OWN_FDS = ("/dev/fd/", "/proc/")
#: the signals forwarded to the child while it runs; SIGINT and SIGHUP only where this process does not
#: ignore them (``nohup``, a script's background job), SIGTERM always (a command ends on it even so)
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_MAY_BE_IGNORED = (signal.SIGINT, signal.SIGHUP)
#: how long to wait for the server's child before running the command here (a server stopped or stuck)
CONNECT_S = 10.0


def wanted(argv: list[str], environ=os.environ) -> bool:
    """Whether a command with `argv` may run in a server: not ``gpuan server`` itself nor help or the
    version, nor with paths of this process's own descriptors (``/dev/fd/3``); not with
    ``GPUAN_SERVER=off``; not in a process an MPI launcher started (MPI needs the launcher's process)."""
    if not argv or "server" in argv or any(a in _AT_ONCE or a.startswith(_OWN_FDS) for a in argv):
        return False
    if environ.get("GPUAN_SERVER", "").strip().lower() in _OFF:
        return False
    return environ.get("GPUAN_MPI", "").strip() != "1" and not any(v in environ for v in MPI_LAUNCHER_VARS)


def starts_server(argv: list[str], environ=os.environ) -> bool:
    """Whether the command `argv`, run by itself, should start a server for the commands after it: with
    ``GPUAN_SERVER=auto``, for a command that may run in a server (:func:`wanted`)."""
    return environ.get("GPUAN_SERVER", "").strip().lower() == "auto" and wanted(argv, environ)


def connect(path: str, timeout: float = CONNECT_S) -> socket.socket | None:
    """Return a connection to the server listening at `path` (a descriptor above 2, so that it never
    stands in for a closed stdin, stdout or stderr), or None where none listens."""
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    except OSError:
        return None
    if sock.fileno() <= 2:
        high = above_stdio(sock.fileno())
        sock.close()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, fileno=high)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
        return sock
    except OSError:  # none there, or a socket left by a killed server (the next server replaces it)
        sock.close()
        return None


def above_stdio(fd: int) -> int:
    """Return a copy of `fd` numbered above 2 (close-on-exec)."""
    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)


def delegate(argv: list[str]) -> int | None:
    """Run the command `argv` in this environment's server when one is running; returns its exit code,
    or None where it did not run there (no server, not :func:`wanted`, no answer in time): the caller
    then runs it."""
    if not wanted(argv):
        return None
    from gpuan.server.address import AddressError, socket_path

    try:
        path = socket_path()
    except (AddressError, OSError):
        return None
    if not os.path.exists(path):
        return None
    try:
        opened = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:  # a working directory removed under the shell: the command says so by itself
        return None
    cwd = opened if opened > 2 else above_stdio(opened)  # never in place of a closed stdin, stdout or stderr
    if cwd != opened:
        os.close(opened)
    try:
        return _handed(argv, path, cwd)
    finally:
        os.close(cwd)


def _handed(argv: list[str], path: str, cwd: int) -> int | None:
    from gpuan.server.wire import EXIT, GO, NOT_RUN, PID, receive_tagged, send_message

    signals = _Signals()
    with signals:
        try:
            sock = connect(path)
            if sock is None:
                return None
            with sock, _descriptors() as fds:
                try:
                    sock.sendall(b"R")
                    send_message(sock, _request(argv, signals.ignored))
                    first = receive_tagged(sock)
                except OSError:  # no answer in time (a server stopped or stuck): the child never gets go
                    return None
                if first is None or first[0] != PID:  # the child ended before the command started
                    return None
                try:
                    socket.send_fds(sock, [GO], [*fds, cwd])
                except OSError:
                    return None
                signals.pid = first[1]
                sock.settimeout(None)
                try:
                    last = receive_tagged(sock)
                except OSError:
                    last = None
        except _Interrupted as e:  # Ctrl-C or SIGTERM before the command started: it does not start
            return signals.as_here(e.signum)
    if last == (EXIT, NOT_RUN):  # the child ended before the command started: run it here
        return None
    if last is None or last[0] != EXIT:
        print(f"gpuan: error: the gpuan server ({path}) stopped while it ran the command", file=sys.stderr)
        return 1
    status = last[1]
    if status < 0:  # a signal ended the child: end the same way, so that the shell sees what it would have
        if -status not in (signal.SIGKILL, signal.SIGSTOP):  # whose handling cannot be set (nor changed)
            signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    return status if status >= 0 else 128 - status


def _request(argv: list[str], ignored: list[int]) -> dict:
    """Return what the child needs to take this process's place."""
    return {
        "argv": list(argv),
        "umask": _umask(),
        "env": dict(os.environ),
        "ignored": ignored,
        "unbuffered": bool(getattr(sys.stdout, "write_through", False)),  # python -u, PYTHONUNBUFFERED
        "text": {
            name: [getattr(stream, "encoding", None), getattr(stream, "errors", None)]
            for name, stream in (("stdin", sys.stdin), ("stdout", sys.stdout), ("stderr", sys.stderr))
        },
    }


class _Interrupted(BaseException):
    """A forwarded signal that came before the command started: it stops the handing over."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class _Signals:
    """While the command is handed over: the forwarded signals caught; before the child has its go-ahead
    they stop the handing over (:class:`_Interrupted`), after it they are sent to the child; restored
    after."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self.ignored = [int(s) for s in _MAY_BE_IGNORED if signal.getsignal(s) == signal.SIG_IGN]
        self.previous: dict = {}

    def __enter__(self) -> _Signals:
        for s in _FORWARDED:
            if int(s) not in self.ignored:
                self.previous[s] = signal.signal(s, self._caught)
        return self

    def __exit__(self, *exc) -> None:
        for s, handler in self.previous.items():
            signal.signal(s, handler)

    def _caught(self, signum: int, frame) -> None:
        if self.pid is None:
            raise _Interrupted(signum)
        try:
            os.kill(self.pid, signum)
        except ProcessLookupError:
            pass

    def as_here(self, signum: int) -> int:
        """Return the exit code of a command that `signum` stopped before it started, as gpuan's own
        handlers make it (Ctrl-C 130, SIGTERM 143); SIGHUP ends this process as by itself."""
        if signum == signal.SIGHUP:
            self.__exit__()
            signal.signal(signal.SIGHUP, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGHUP)
        return 128 + signum


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


class _descriptors:
    """Descriptors 0, 1 and 2 to pass: each as it is, or /dev/null where it is closed."""

    def __enter__(self) -> list[int]:
        self.opened = []
        fds = []
        for fd, mode in ((0, os.O_RDONLY), (1, os.O_WRONLY), (2, os.O_WRONLY)):
            try:
                os.fstat(fd)
                fds.append(fd)
            except OSError:
                null = os.open(os.devnull, mode | os.O_CLOEXEC)
                self.opened.append(null)
                fds.append(null)
        return fds

    def __exit__(self, *exc) -> None:
        for fd in self.opened:
            os.close(fd)
