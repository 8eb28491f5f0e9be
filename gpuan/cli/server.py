"""``gpuan server start|stop|status|run``: a warm gpuan process that runs the commands of this
environment (:mod:`gpuan.server`), so that a command on a small trace does not pay Python's imports and
numba's cache loads each time."""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator

from gpuan.errors import UsageError

#: how long a server waits for a command before it stops (seconds)
DEFAULT_IDLE_S = 1800.0
#: how long ``start`` waits for a new server to be ready (a first warm-up may compile numba's code)
_READY_S = 600.0
#: how long status and stop wait for the server's answer (one stopped with SIGSTOP never answers)
_ASK_S = 5.0
#: ``server run``'s exit code where another server holds this environment's socket
EXIT_LOCKED = 3
#: how long ``start`` waits for the server that holds the lock to answer (one that is starting does)
_LOCKED_S = 60.0
#: how long after a server failed to start (see ``server-<key>.failed``) ``GPUAN_SERVER=auto`` starts none
AUTO_BACK_OFF_S = 600.0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add the command's parser to `sub` (the subcommands of ``gpuan``)."""
    p = sub.add_parser(
        "server",
        help="keep a warm gpuan process that runs later commands of this environment (start, stop, status)",
    )
    p.add_argument(
        "action", choices=("start", "stop", "status", "run"),
        help="start one in the background, stop it, say whether one runs, or run one in the foreground",
    )  # fmt: skip
    p.add_argument(
        "--idle", type=_minutes, default=DEFAULT_IDLE_S, metavar="MINUTES",
        help=f"stop after this many minutes without a command (default {DEFAULT_IDLE_S / 60:g})",
    )  # fmt: skip
    p.set_defaults(run=run, picks_engine=False)


def _minutes(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of minutes, not {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, not {text}")
    return value * 60


def run(args: argparse.Namespace) -> int:
    """Run the action in `args`; returns the exit code (1 where ``status`` or ``stop`` finds no server)."""
    from gpuan.server.address import AddressError, socket_path

    try:
        path = socket_path()
    except AddressError as e:
        raise UsageError(str(e)) from None
    return {"start": _start, "stop": _stop, "status": _status, "run": _run}[args.action](path, args.idle)


@contextlib.contextmanager
def _left_running() -> Iterator[None]:
    """Within the block, a process object dropped while its process runs (a server, which outlives the
    command that started it and is never waited for) gives no ResourceWarning ("still running")."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        yield


def _start(path: str, idle_s: float) -> int:
    with _left_running():
        return _started(path, idle_s)  # its process object is dropped as it returns


def _started(path: str, idle_s: float) -> int:
    from gpuan.server.address import beside

    status = _ask(path, b"S")
    if status is not None:
        print(f"gpuan: a server already runs for this environment (pid {status['pid']}; {path})")
        return 0
    with contextlib.suppress(FileNotFoundError):  # asked for by hand: tried again whatever failed before
        os.remove(beside(path, ".failed"))
    child, log = _launch(path, idle_s)
    start = time.monotonic()
    locked_at = None
    while time.monotonic() - start < _READY_S:
        status = _ask(path, b"S")
        if status is not None:
            warm = status["warm"]
            print(
                f"gpuan: server ready in {time.monotonic() - start:.1f} s (pid {status['pid']}; "
                f"{warm['modules']} modules, {warm['signatures']} compiled functions loaded); "
                f"gpuan commands of this environment run in it until it has been idle "
                f"{status.get('idle_s', idle_s) / 60:g} min "
                f"(log: {log})"
            )
            return 0
        if child.poll() is not None and child.returncode != EXIT_LOCKED:
            raise UsageError(f"the gpuan server stopped as it started (exit code {child.returncode}); see {log}")
        if child.returncode == EXIT_LOCKED:  # another server holds the lock: one starting, or one stopping
            locked_at = locked_at or time.monotonic()
            if time.monotonic() - locked_at > _LOCKED_S:
                raise UsageError(
                    f"another gpuan server of this environment holds its lock but does not answer (stopping "
                    f"while its commands end, or stopped with SIGSTOP); start again once it has ended ({path})"
                )
        time.sleep(0.05)
    child.terminate()
    raise UsageError(f"the gpuan server was not ready after {_READY_S:g} s; see {log}")


def start_behind(idle_s: float = DEFAULT_IDLE_S) -> None:
    """Start this environment's server in the background and return at once (``GPUAN_SERVER=auto``, after
    a command that ran by itself), where no server holds its lock (none serves, warms up or stops) and
    none failed to start in the last :data:`AUTO_BACK_OFF_S` seconds: the commands after this one run in it
    once it is warm. Two at the very same moment may both start one; the second stops at once (the lock).
    Nothing is started where the socket's directory is not usable; the note goes to a terminal only."""
    from gpuan.server.address import AddressError, beside, socket_path

    try:
        path = socket_path()
    except AddressError:  # an OSError too
        return
    if _locked(path) or _failed_lately(beside(path, ".failed")):
        return
    try:
        with _left_running():
            log = _launch(path, idle_s)[1]  # the process object dropped here, inside the block
    except OSError:
        return
    if sys.stderr is not None and sys.stderr.isatty():  # None: started with stderr closed
        print(
            f"gpuan: starting a server for the next commands (GPUAN_SERVER=auto; it stops after "
            f"{idle_s / 60:g} idle minutes; log: {log})",
            file=sys.stderr,
        )


def _locked(path: str) -> bool:
    """Return whether a server holds the lock beside the socket `path`: one serving (a stopped one too),
    warming up or stopping. The probe takes the lock for an instant: a server starting in that instant
    gives up, but the prober, having had it, starts one."""
    import fcntl

    from gpuan.server.address import beside

    try:
        with open(beside(path, ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    return False


def _failed_lately(marker: str) -> bool:
    """Return whether the failure `marker` (written by a server that ended on an error) is recent."""
    try:
        return time.time() - os.stat(marker).st_mtime < AUTO_BACK_OFF_S
    except OSError:
        return False


def _launch(path: str, idle_s: float) -> tuple[subprocess.Popen, str]:
    """Start ``gpuan server run`` for the socket `path` in a session of its own, with this interpreter's
    flags (``-O``, ``-X``, ``-W``: they are part of the server's key), its output appended to the log beside
    the socket; returns the process and the log's path."""
    from gpuan.server.address import beside, package_dir

    log = beside(path, ".log")
    # the same gpuan as this command's, whatever the working directory holds: its directory first on the path
    code = "import sys; sys.path.insert(0, sys.argv[1]); from gpuan.cli import main; sys.exit(main(sys.argv[2:]))"
    flags = subprocess._args_from_interpreter_flags()  # what multiprocessing passes its children, too
    where = os.path.dirname(package_dir())
    argv = [sys.executable, *flags, "-c", code, where, "server", "run", "--idle", f"{idle_s / 60:g}"]
    with open(log, "ab") as out:
        child = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True, close_fds=True
        )
    return child, log


def _stop(path: str, idle_s: float) -> int:
    status = _ask(path, b"Q")
    deadline = time.monotonic() + _LOCKED_S
    while status is None and _locked(path) and time.monotonic() < deadline:  # one warming up: stop it once up
        time.sleep(0.05)
        status = _ask(path, b"Q")
    if status is None:
        print("gpuan: no server runs for this environment")
        return 1
    deadline = time.monotonic() + 10
    while os.path.exists(path) and time.monotonic() < deadline:  # it removes its socket as it stops
        time.sleep(0.02)
    running = f"; {_running(status['running'])} to finish" if status["running"] else ""
    print(f"gpuan: server stopped (pid {status['pid']}, {_commands(status['served'])} served{running})")
    return 0


def _status(path: str, idle_s: float) -> int:
    status = _ask(path, b"S")
    if status is None and _locked(path):
        print(f"gpuan: a server of this environment is starting or stopping (it will listen on {path})")
        return 1
    if status is None:
        print(f"gpuan: no server runs for this environment (it would listen on {path})")
        return 1
    warm = status["warm"]
    print(
        f"gpuan: server pid {status['pid']} on {path}: up {time.time() - status['started']:.0f} s, "
        f"{_commands(status['served'])} served, {_running(status['running'])}; warmed in {warm['seconds']:.1f} s "
        f"({warm['modules']} modules, {warm['signatures']} compiled functions; {status['loaded']} now)"
    )
    for failure in warm["failed"]:
        print(f"  not loaded: {failure}")
    return 0


def _commands(n: int) -> str:
    return f"{n} command" + ("" if n == 1 else "s")


def _running(pids: list[int]) -> str:
    return f"{len(pids)} running" + (f" (pid {', '.join(map(str, pids))})" if pids else "")


def _run(path: str, idle_s: float) -> int:
    import fcntl

    from gpuan.server.address import beside
    from gpuan.server.serve import serve
    from gpuan.server.warm import fork_safe, warm

    # one server per socket: the lock is held as long as it serves (a socket left by a killed server is
    # then replaced, never one that answers)
    lock = open(beside(path, ".lock"), "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        print(f"gpuan: a gpuan server for this environment runs or starts already ({path})", file=sys.stderr)
        return EXIT_LOCKED
    with lock:
        try:
            warmth = warm()
            unsafe = fork_safe()
            if unsafe:
                raise UsageError(f"the server's warm-up imported {', '.join(unsafe)}; it cannot fork commands safely")
            print(
                f"gpuan server: warmed in {warmth.seconds:.1f} s: {warmth.modules} modules, {warmth.functions} "
                f"numba functions, {warmth.signatures} compiled signatures",
                file=sys.stderr,
                flush=True,
            )
            os.chdir("/")  # holds no directory of the user's (a command takes its client's)
            serve(path, warmth, idle_s=idle_s, log=sys.stderr, keep=(lock,))
        except Exception:
            # GPUAN_SERVER=auto starts none for a while (AUTO_BACK_OFF_S), rather than one failing after every command
            with open(beside(path, ".failed"), "w"):
                pass
            raise
    return 0


def _ask(path: str, kind: bytes) -> dict | None:
    """Send the request `kind` (status or quit) to the server at `path`; returns its answer, or None
    where none listens."""
    import socket

    from gpuan.server.client import connect
    from gpuan.server.wire import receive_message

    if not os.path.exists(path):
        return None
    sock = connect(path, timeout=_ASK_S)
    if sock is None:
        return None
    with sock:
        try:
            socket.send_fds(sock, [kind], [])
            return receive_message(sock)
        except OSError:
            return None
