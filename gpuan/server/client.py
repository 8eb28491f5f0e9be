"""Hand a command to the server of this environment (:mod:`gpuan.server.serve`), as if it ran here.

The server's child gets this process's stdin, stdout and stderr themselves (passed descriptors: a
terminal stays a terminal, a pipe a pipe), its working directory, umask, environment and arguments;
this process forwards Ctrl-C, SIGTERM and SIGHUP to the child and exits as the child did. Stdlib only:
a command that the server runs imports nothing else here."""

from __future__ import annotations

import os
import signal
import socket
import sys

from gpuan.options import MPI_LAUNCHER_VARS

#: GPUAN_SERVER values that keep every command in its own process
_OFF = ("0", "off", "no", "false")
#: arguments that a command answers at once by itself (a server would only add its round trip)
_AT_ONCE = ("-h", "--help", "--version")
#: the signals forwarded to the child while it runs
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def wanted(argv: list[str], environ=os.environ) -> bool:
    """Whether a command with `argv` may run in a server: not ``gpuan server`` itself nor help or the
    version, not with ``GPUAN_SERVER=off``, not in a process an MPI launcher started (MPI needs the
    launcher's process)."""
    if not argv or argv[:1] == ["server"] or any(a in _AT_ONCE for a in argv):
        return False
    if environ.get("GPUAN_SERVER", "").strip().lower() in _OFF:
        return False
    return environ.get("GPUAN_MPI", "").strip() != "1" and not any(v in environ for v in MPI_LAUNCHER_VARS)


def connect(path: str) -> socket.socket | None:
    """Return a connection to the server listening at `path`, or None where none listens (a socket
    that no process listens on any more, a server killed, is removed)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
        return sock
    except FileNotFoundError:
        sock.close()
        return None
    except ConnectionRefusedError:
        sock.close()
        try:
            os.unlink(path)
        except OSError:
            pass
        return None
    except OSError:
        sock.close()
        return None


def delegate(argv: list[str]) -> int | None:
    """Run the command `argv` in this environment's server when one is running; returns its exit code,
    or None where it did not run there (no server, or not :func:`wanted`): the caller then runs it."""
    if not wanted(argv):
        return None
    from gpuan.server.address import AddressError, socket_path
    from gpuan.server.wire import receive_word, send_message

    try:
        path = socket_path()
    except (AddressError, OSError):
        return None
    if not os.path.exists(path):
        return None
    sock = connect(path)
    if sock is None:
        return None
    with sock, _descriptors() as fds:
        request = {
            "argv": list(argv),
            "cwd": os.getcwd(),
            "umask": _umask(),
            "env": dict(os.environ),
            "unbuffered": bool(getattr(sys.stdout, "write_through", False)),  # python -u, PYTHONUNBUFFERED
            "text": {
                name: [getattr(stream, "encoding", None), getattr(stream, "errors", None)]
                for name, stream in (("stdin", sys.stdin), ("stdout", sys.stdout), ("stderr", sys.stderr))
            },
        }
        try:
            socket.send_fds(sock, [b"R"], fds)
            send_message(sock, request)
            pid = receive_word(sock)
        except OSError:
            return None
        if pid is None:  # the server stopped before it forked: nothing ran, run it here
            return None
        previous = {s: signal.signal(s, lambda signum, frame: _forward(pid, signum)) for s in _FORWARDED}
        try:
            status = receive_word(sock)
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
    if status is None:
        print(f"gpuan: error: the gpuan server ({path}) stopped while it ran the command", file=sys.stderr)
        return 1
    if status < 0:  # a signal ended the child: end the same way, so that the shell sees what it would have
        if -status not in (signal.SIGKILL, signal.SIGSTOP):  # whose handling cannot be set (nor changed)
            signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
        return 128 - status
    return status


def _forward(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


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
                null = os.open(os.devnull, mode)
                self.opened.append(null)
                fds.append(null)
        return fds

    def __exit__(self, *exc) -> None:
        for fd in self.opened:
            os.close(fd)
