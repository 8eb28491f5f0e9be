"""``gpuan server``: a command handed to the warm server prints, writes and exits as the same command run
by itself, with the client's working directory, environment, descriptors and signals; what may not run
there (MPI processes, ``GPUAN_SERVER=off``, other code or settings) runs by itself."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from gpuan.server import address, client

TRIAD = "kineto/a100_triton_example.json.gz"  # 2 KB
ALEXNET = "kineto/a100_alexnet.json.gz"
GLOO = "kineto/cpu_ddp_gloo_4rank_slow_rank1_step2"
MPIEXEC = shutil.which("mpiexec")


def _env(runtime: Path, **extra: str) -> dict[str, str]:
    """The environment of a command: this one's, with the servers' sockets under `runtime`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUAN_", "OMPI_", "PMI_"))}
    env.update(XDG_RUNTIME_DIR=str(runtime), GPUAN_DEVICE="cpu", COLUMNS="120", TERM="dumb", NO_COLOR="1")
    env.update(extra)
    return env


def gpuan(*argv: str, env: dict[str, str], cwd: Path | None = None, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("capture_output", True)
    return subprocess.run([sys.executable, "-m", "gpuan", *argv], env=env, cwd=cwd, timeout=600, **kw)


def served(env: dict[str, str]) -> int:
    """How many commands the server of `env` has run (``gpuan server status``)."""
    r = gpuan("server", "status", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    return int(re.search(rb"(\d+) commands? served", r.stdout).group(1))


@pytest.fixture(scope="module")
def runtime():
    """A socket directory of the tests' own (short: a socket's path is at most 107 bytes), with one
    server running in it for the module."""
    path = Path(tempfile.mkdtemp(prefix="gs", dir="/tmp"))
    env = _env(path)
    r = gpuan("server", "start", "--idle", "10", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert b"server ready" in r.stdout
    yield path
    gpuan("server", "stop", env=env)
    shutil.rmtree(path, ignore_errors=True)


def test_a_command_in_the_server_is_the_command_by_itself(runtime, data_dir):
    env = _env(runtime)
    cases = ((TRIAD, ["info"]), (ALEXNET, ["info", "--format", "json"]), (ALEXNET, ["sol", "--gpu", "A100"]))
    for trace, args in cases:
        before = served(env)
        there = gpuan(*args, str(data_dir / trace), env=env)
        assert served(env) == before + 1  # it did run in the server
        here = gpuan(*args, str(data_dir / trace), env=_env(runtime, GPUAN_SERVER="off"))
        assert there.returncode == here.returncode == 0, there.stderr
        assert there.stdout == here.stdout and there.stdout
        assert there.stderr == here.stderr


def test_relative_paths_and_files_are_the_clients(runtime, data_dir, tmp_path):
    outputs = {}
    for way, extra in (("server", {}), ("alone", {"GPUAN_SERVER": "off"})):
        work = tmp_path / way
        work.mkdir()
        shutil.copy(data_dir / ALEXNET, work / "t.json.gz")
        (work / "out").mkdir()
        before = served(_env(runtime))
        r = gpuan("cycles", "t.json.gz", "-o", "out/cyc", env=_env(runtime, **extra), cwd=work)
        assert r.returncode == 0, r.stderr
        assert served(_env(runtime)) == before + (way == "server")
        outputs[way] = {p.relative_to(work): p.read_bytes() for p in (work / "out").iterdir()}
    assert outputs["server"] == outputs["alone"] and outputs["server"]


@pytest.mark.parametrize("unbuffered", ["1", None])
def test_stdout_and_stderr_into_one_file_keep_their_order(runtime, data_dir, tmp_path, unbuffered):
    """``> log 2>&1``: the report (stdout, buffered as Python buffers it, or not with ``python -u``) and the
    announcements of the files written (stderr) in the same order as by itself."""
    base = _env(runtime)
    base.pop("PYTHONUNBUFFERED", None)
    env = dict(base, PYTHONUNBUFFERED=unbuffered) if unbuffered else base
    started = gpuan("server", "start", "--idle", "5", env=env)  # a server of these settings, if not the module's
    assert started.returncode == 0, started.stderr
    before = served(env)
    try:
        merged = {}
        for way, extra in (("server", {}), ("alone", {"GPUAN_SERVER": "off"})):
            work = tmp_path / way
            work.mkdir()
            with open(work / "log", "wb") as log:
                r = gpuan(
                    "cycles", str(data_dir / ALEXNET), "-o", "cyc", env=dict(env, **extra), cwd=work, stdout=log,
                    stderr=subprocess.STDOUT, capture_output=False,
                )  # fmt: skip
            assert r.returncode == 0
            merged[way] = (work / "log").read_bytes()
        assert merged["server"] == merged["alone"] and b"gpuan: wrote cyc" in merged["server"]
        assert served(env) == before + 1
    finally:
        if b"server ready" in started.stdout:
            gpuan("server", "stop", env=env)


def test_bad_input_gets_the_same_one_line_error(runtime, data_dir, tmp_path):
    truncated = tmp_path / "cut.json.gz"
    truncated.write_bytes((data_dir / ALEXNET).read_bytes()[:5000])
    env = _env(runtime)
    before = served(env)
    there = gpuan("info", str(truncated), env=env)
    here = gpuan("info", str(truncated), env=_env(runtime, GPUAN_SERVER="off"))
    assert served(env) == before + 1
    assert there.returncode == here.returncode == 2
    assert there.stderr == here.stderr and there.stderr.count(b"\n") == 1 and str(truncated).encode() in there.stderr
    assert there.stdout == here.stdout == b""


def test_usage_errors_and_help_stay_the_same(runtime):
    env = _env(runtime)
    for argv in (["info"], ["streams", "t.json", "--streams", "0"], ["--help"], ["info", "--help"]):
        before = served(env)
        there, here = gpuan(*argv, env=env), gpuan(*argv, env=_env(runtime, GPUAN_SERVER="off"))
        assert (there.returncode, there.stdout, there.stderr) == (here.returncode, here.stdout, here.stderr)
        assert served(env) == before + ("--help" not in argv)  # help is answered by the client itself


def test_ctrl_c_reaches_the_command_and_leaves_no_file(runtime, tmp_path):
    proc, _ = _waiting_on_fifo(_env(runtime), tmp_path, "convert", "-o", str(tmp_path / "out.parquet"))
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo.json"]  # no output, no staging file


def test_a_child_killed_by_a_signal_ends_its_client_the_same_way(runtime, tmp_path):
    """What the shell sees of a command that a signal ended (SIGBUS from a file cut under its map, say)."""
    env = _env(runtime)
    proc, _ = _waiting_on_fifo(env, tmp_path, "info")
    os.kill(_child_pid(env), signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL


def _child_pid(env: dict[str, str]) -> int:
    """The pid of the only command the server of `env` runs now: its child."""
    return int(re.search(rb"1 running \(pid (\d+)\)", gpuan("server", "status", env=env).stdout).group(1))


@pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (the test command installs mpich from PyPI)")
def test_processes_of_an_mpi_launcher_run_by_themselves(runtime, data_dir):
    env = _env(runtime)
    before = served(env)
    run = str(data_dir / GLOO)
    dealt = subprocess.run(
        [MPIEXEC, "-n", "2", sys.executable, "-m", "gpuan", "info", run], capture_output=True, env=env, timeout=600
    )
    alone = gpuan("info", run, env=_env(runtime, GPUAN_SERVER="off", GPUAN_MPI="0"))
    assert served(env) == before  # not one of the two processes ran in the server
    assert dealt.returncode == alone.returncode == 0, dealt.stderr
    assert dealt.stdout == alone.stdout


def test_start_status_stop_and_the_idle_stop(data_dir, tmp_path):
    runtime = Path(tempfile.mkdtemp(prefix="gs", dir="/tmp"))
    try:
        env = _env(runtime)
        assert gpuan("server", "status", env=env).returncode == 1
        assert gpuan("server", "stop", env=env).returncode == 1
        assert gpuan("server", "start", "--idle", "10", env=env).returncode == 0
        again = gpuan("server", "start", env=env)
        assert again.returncode == 0 and b"already runs" in again.stdout
        stop = gpuan("server", "stop", env=env)
        assert stop.returncode == 0 and b"server stopped" in stop.stdout
        assert list((runtime / "gpuan").glob("*.sock")) == []
        # without a server the command runs by itself
        assert gpuan("info", str(data_dir / TRIAD), env=env).returncode == 0

        assert gpuan("server", "start", "--idle", "0.02", env=env).returncode == 0  # 1.2 s
        deadline = time.monotonic() + 60
        while list((runtime / "gpuan").glob("*.sock")):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert gpuan("server", "status", env=env).returncode == 1
        assert b"idle for 1.2 s, stopping" in next((runtime / "gpuan").glob("*.log")).read_bytes()
    finally:
        gpuan("server", "stop", env=_env(runtime))
        shutil.rmtree(runtime, ignore_errors=True)


def test_the_server_of_other_settings_is_not_used(runtime, data_dir):
    env = _env(runtime)
    before = served(env)
    r = gpuan("info", str(data_dir / TRIAD), env=_env(runtime, NUMBA_NUM_THREADS="1"))
    assert r.returncode == 0
    assert served(env) == before


def test_the_key_follows_code_and_settings(monkeypatch, tmp_path):
    base = {"PATH": "/bin", "NUMBA_NUM_THREADS": "2", "GPUAN_THREADS": "2"}
    assert address.key(base) == address.key(dict(base, GPUAN_SERVER="off", HOME="/elsewhere"))
    assert address.key(base) != address.key(dict(base, NUMBA_NUM_THREADS="1"))
    assert address.key(base) != address.key(dict(base, GPUAN_THREADS="1"))
    assert address.key(base) != address.key(dict(base, PYTHONPATH="/x"))
    package = tmp_path / "gpuan"
    package.mkdir()
    (package / "a.py").write_text("x = 1\n")
    monkeypatch.setattr(address, "package_dir", lambda: str(package))
    first = address.key(base)
    os.utime(package / "a.py", ns=(1, 1))
    assert address.key(base) != first


def test_what_may_run_in_a_server():
    assert client.wanted(["info", "t.json"], {})
    assert not client.wanted(["server", "start"], {})
    assert not client.wanted([], {})
    assert not client.wanted(["info", "--help"], {})
    assert not client.wanted(["--version"], {})
    for off in ("0", "off", "OFF", "no", "false"):
        assert not client.wanted(["info", "t.json"], {"GPUAN_SERVER": off})
    assert not client.wanted(["info", "t.json"], {"PMI_RANK": "0"})
    assert not client.wanted(["info", "t.json"], {"OMPI_COMM_WORLD_SIZE": "2"})
    assert not client.wanted(["info", "t.json"], {"GPUAN_MPI": "1"})
    assert client.wanted(["info", "t.json"], {"GPUAN_MPI": "0"})
    assert not client.wanted(["--device", "cpu", "server", "status"], {})
    assert not client.wanted(["info", "/dev/fd/3"], {})  # this process's descriptor, not the child's
    assert not client.wanted(["info", "/proc/self/fd/3"], {})


def test_which_commands_start_a_server_with_auto():
    auto = {"GPUAN_SERVER": "auto"}
    assert client.starts_server(["info", "t.json"], auto)
    assert client.starts_server(["info", "t.json"], {"GPUAN_SERVER": " AUTO "})
    assert not client.starts_server(["info", "t.json"], {})  # by default a server is used, never started
    assert not client.starts_server(["info", "t.json"], {"GPUAN_SERVER": "off"})
    assert not client.starts_server(["info", "t.json"], {**auto, "PMI_RANK": "0"})
    assert not client.starts_server(["info", "--help"], auto)
    assert not client.starts_server(["server", "stop"], auto)


@pytest.fixture
def auto_env():
    """The environment of commands with ``GPUAN_SERVER=auto`` and warnings shown, their sockets in a
    directory of their own; the server they start is stopped at the end (one still warming up too:
    ``server stop`` waits for it)."""
    runtime = Path(tempfile.mkdtemp(prefix="gs", dir="/tmp"))
    env = _env(runtime, GPUAN_SERVER="auto", PYTHONWARNINGS="default")
    yield env
    gpuan("server", "stop", env=env)
    shutil.rmtree(runtime, ignore_errors=True)


def _wait_ready(env: dict[str, str], logs: Path) -> None:
    deadline = time.monotonic() + 300  # its warm-up may compile what numba's cache lacks
    while gpuan("server", "status", env=env).returncode != 0:
        assert time.monotonic() < deadline, b"".join(p.read_bytes() for p in logs.glob("*.log"))
        time.sleep(0.2)


def test_auto_starts_a_server_that_runs_the_next_commands(auto_env, data_dir):
    logs = Path(auto_env["XDG_RUNTIME_DIR"]) / "gpuan"
    trace = str(data_dir / TRIAD)
    env, plain = auto_env, {k: v for k, v in auto_env.items() if k != "GPUAN_SERVER"}
    # warnings shown: the server the first command leaves running must not make it print one
    alone = gpuan("info", trace, env={**plain, "GPUAN_SERVER": "off"})
    assert alone.returncode == 0 and alone.stderr == b""
    # without auto, a command run by itself starts nothing (the log is opened as a server is started)
    assert gpuan("info", trace, env=plain).stdout == alone.stdout
    assert list(logs.glob("*.log")) == []

    first = gpuan("info", trace, env=env)
    assert (first.returncode, first.stdout, first.stderr) == (0, alone.stdout, alone.stderr)
    # at once, while that server warms up: run by itself, and no second server started (its lock)
    soon = gpuan("info", trace, env=env)
    assert (soon.returncode, soon.stdout, soon.stderr) == (0, alone.stdout, alone.stderr)
    _wait_ready(env, logs)
    before = served(env)
    second = gpuan("info", trace, env=env)
    assert (second.returncode, second.stdout, second.stderr) == (0, alone.stdout, alone.stderr)
    assert served(env) == before + 1
    bad = gpuan("info", str(logs / "missing.json"), env=env)  # its one-line error, from the server
    assert bad.returncode == 2 and bad.stdout == b"" and bad.stderr.count(b"\n") == 1
    assert served(env) == before + 2
    log = next(logs.glob("*.log")).read_bytes()
    assert log.count(b"listening on") == 1 and b"runs or starts already" not in log


def test_auto_with_stderr_closed_keeps_the_exit_code(auto_env, data_dir):
    r = subprocess.run(
        [sys.executable, "-m", "gpuan", "info", str(data_dir / TRIAD)],
        env=auto_env, stdout=subprocess.DEVNULL, preexec_fn=lambda: os.close(2), timeout=600,
    )  # fmt: skip
    assert r.returncode == 0


def test_a_server_of_an_interpreter_with_flags_serves_its_commands(data_dir):
    """Python's flags are in the key: the server is started with the command's own (-O here)."""
    runtime = Path(tempfile.mkdtemp(prefix="gs", dir="/tmp"))
    env = _env(runtime, GPUAN_SERVER="auto")
    optimised = [sys.executable, "-O", "-m", "gpuan"]
    try:
        run = lambda *a: subprocess.run([*optimised, *a], env=env, capture_output=True, timeout=600)  # noqa: E731
        assert run("info", str(data_dir / TRIAD)).returncode == 0
        deadline = time.monotonic() + 300
        while run("server", "status").returncode != 0:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert gpuan("server", "status", env=env).returncode == 1  # not the server of a plain interpreter
        assert run("info", str(data_dir / TRIAD)).returncode == 0
        assert b"1 command served" in run("server", "status").stdout
        assert run("server", "stop").returncode == 0
    finally:
        subprocess.run([*optimised, "server", "stop"], env=env, capture_output=True, timeout=600)
        shutil.rmtree(runtime, ignore_errors=True)


def test_a_server_that_failed_is_not_started_again_by_auto_for_a_while(monkeypatch, tmp_path):
    from gpuan.cli import server as server_cli
    from gpuan.server import warm

    runtime = Path(tempfile.mkdtemp(prefix="gs", dir="/tmp"))
    try:
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
        path = address.socket_path()

        def failing():
            raise RuntimeError("warm-up failed")

        monkeypatch.setattr(warm, "warm", failing)
        with pytest.raises(RuntimeError):
            server_cli._run(path, 60.0)
        marker = address.beside(path, ".failed")
        assert os.path.exists(marker)
        launched = []
        monkeypatch.setattr(server_cli, "_launch", lambda p, idle: launched.append(p) or (None, "log"))
        server_cli.start_behind()
        assert launched == []
        old = time.time() - server_cli.AUTO_BACK_OFF_S - 1
        os.utime(marker, (old, old))
        server_cli.start_behind()
        assert launched == [path]
    finally:
        shutil.rmtree(runtime, ignore_errors=True)


def test_a_socket_path_too_long_for_unix_sockets_is_refused(monkeypatch):
    long_dir = Path(tempfile.mkdtemp(prefix="g" * 80, dir="/tmp"))
    try:
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(long_dir))
        with pytest.raises(address.AddressError, match="too long"):
            address.socket_path()
        env = _env(long_dir, GPUAN_SERVER="auto")
        r = gpuan("server", "start", env=env)
        assert r.returncode == 2 and b"too long for a Unix socket" in r.stderr and r.stderr.count(b"\n") == 1
    finally:
        shutil.rmtree(long_dir, ignore_errors=True)


def test_a_socket_nobody_listens_on_is_passed_by_and_replaced(monkeypatch):
    runtime = Path(tempfile.mkdtemp(prefix="gs", dir="/tmp"))
    try:
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
        monkeypatch.delenv("GPUAN_SERVER", raising=False)
        path = address.socket_path()
        dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        dead.bind(path)
        dead.close()  # a server killed with SIGKILL leaves this behind
        assert client.delegate(["info", "t.json"]) is None  # the caller runs the command itself
        env = _env(runtime)
        assert gpuan("server", "start", "--idle", "5", env=env).returncode == 0  # the next server takes its place
        assert served(env) == 0
    finally:
        gpuan("server", "stop", env=_env(runtime))
        shutil.rmtree(runtime, ignore_errors=True)


def test_a_socket_directory_others_may_enter_is_refused(monkeypatch, tmp_path):
    shared = tmp_path / "gpuan"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    with pytest.raises(address.AddressError, match="0700"):
        address.socket_path()
    monkeypatch.delenv("GPUAN_SERVER", raising=False)
    assert client.delegate(["info", "t.json"]) is None


def test_the_warm_up_loads_code_and_starts_nothing_a_fork_would_lose(data_dir, tmp_path):
    # a command first, so that numba's cache on disk holds the cycles kernels (a fresh checkout has none)
    env = _env(tmp_path, GPUAN_SERVER="off")
    assert gpuan("cycles", str(data_dir / ALEXNET), "-o", str(tmp_path / "c"), env=env).returncode == 0
    probe = (
        "import os, sys\n"
        "from gpuan.server.warm import warm, fork_safe, load_cached\n"
        "w = warm()\n"
        "d = sys.modules['gpuan.cycles.detect']\n"
        "loaded = sum(len(f.overloads) for f in vars(d).values() if hasattr(f, 'overloads'))\n"
        "again = load_cached()[1]\n"
        "tasks = len(os.listdir('/proc/self/task'))\n"
        "print(w.functions, w.signatures, len(w.failed), tasks, loaded, again, fork_safe())\n"
    )
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    functions, signatures, failed, tasks, loaded, again, unsafe = r.stdout.split(maxsplit=6)
    # the threads of a process that imports numpy (OpenBLAS) and pyarrow (jemalloc), no more
    libraries = "import os, numpy, pyarrow; print(len(os.listdir('/proc/self/task')))"
    baseline = subprocess.run([sys.executable, "-c", libraries], capture_output=True, text=True, env=env)
    assert int(functions) > 30 and int(signatures) > 0
    assert int(loaded) > 0  # loaded, not called: the child finds them in memory
    assert again == "0"  # what the server loads again after each command: only what is new
    assert failed == "0" and tasks == baseline.stdout.strip()
    assert unsafe.strip() == "[]"


def test_closed_stdout_gets_no_socket_in_its_place(runtime, data_dir, tmp_path):
    """``>&-``: the client's connection must not take descriptor 1 and stand in as the command's stdout
    (900 KB of JSON would fill it and hang)."""
    env = _env(runtime)
    before = served(env)
    trace = str(data_dir / "kineto/v100_pt19_resnet50_worker0.json.gz")
    for way, extra in (("server", {}), ("alone", {"GPUAN_SERVER": "off"})):
        r = gpuan(
            "cycles", "--format", "json", "-o", str(tmp_path / way), trace, env=dict(env, **extra),
            capture_output=False, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=lambda: os.close(1),
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
    assert served(env) == before + 1


@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGINT])
def test_a_signal_the_shell_ignores_stays_ignored(runtime, tmp_path, signum):
    """``nohup gpuan ...`` (SIGHUP ignored), a script's background job (SIGINT ignored): the command in the
    server ignores it too, as it would by itself."""
    proc, fifo = _waiting_on_fifo(_env(runtime), tmp_path, "info", ignored=signum)
    proc.send_signal(signum)
    time.sleep(0.5)
    assert proc.poll() is None  # still waiting for the trace
    with open(fifo, "wb"):  # the command's open() returns: a pipe is no trace file
        pass
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and b"not a regular file" in err


def test_a_killed_client_ends_its_command(runtime, tmp_path):
    env = _env(runtime)
    proc, _ = _waiting_on_fifo(env, tmp_path, "info")
    proc.kill()
    proc.communicate(timeout=60)
    deadline = time.monotonic() + 30
    while b" 0 running" not in gpuan("server", "status", env=env).stdout:  # SIGTERM ended it
        assert time.monotonic() < deadline
        time.sleep(0.1)


def test_a_stopped_server_is_waited_for_then_passed_by_and_never_runs_the_command(data_dir, tmp_path):
    runtime = Path(tempfile.mkdtemp(prefix="gs", dir="/tmp"))
    env = _env(runtime)
    try:
        assert gpuan("server", "start", "--idle", "5", env=env).returncode == 0
        pid = int(re.search(rb"server pid (\d+)", gpuan("server", "status", env=env).stdout).group(1))
        os.kill(pid, signal.SIGSTOP)
        out = tmp_path / "t.parquet"
        try:
            start = time.monotonic()
            r = gpuan("convert", str(data_dir / TRIAD), "-o", str(out), env=env)
            assert r.returncode == 0 and out.exists()  # run by the client itself, after its wait
            assert client.CONNECT_S <= time.monotonic() - start < client.CONNECT_S + 60
            out.unlink()
            # SIGTERM (``timeout 5 gpuan ...``) while the client waits: it ends at once, running nothing
            waiting = subprocess.Popen(
                [sys.executable, "-m", "gpuan", "convert", str(data_dir / TRIAD), "-o", str(out)], env=env
            )
            time.sleep(2)
            waiting.terminate()
            assert waiting.wait(timeout=client.CONNECT_S / 2) == 143
            assert not out.exists()
        finally:
            os.kill(pid, signal.SIGCONT)
        deadline = time.monotonic() + 30
        while b" 0 running" not in gpuan("server", "status", env=env).stdout:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        time.sleep(1)
        assert not out.exists()  # its child never got the go-ahead
    finally:
        gpuan("server", "stop", env=env)
        shutil.rmtree(runtime, ignore_errors=True)


def test_a_request_the_child_cannot_take_is_answered_before_it_starts(runtime):
    """The child ends before the command starts (here: a request without arguments): the server's exit
    word comes first, and a client then runs the command itself."""
    from gpuan.server import wire
    from gpuan.server.wire import NOT_RUN

    with client.connect(str(next((runtime / "gpuan").glob("*.sock")))) as sock:
        sock.sendall(b"R")
        wire.send_message(sock, {"env": {}})
        assert wire.receive_tagged(sock) == (wire.EXIT, NOT_RUN)


def _waiting_on_fifo(
    env: dict[str, str], tmp_path: Path, command: str, *options: str, ignored: int | None = None
) -> tuple[subprocess.Popen, Path]:
    """Start ``gpuan COMMAND FIFO OPTIONS`` in the server of `env`, where it waits in open() for a writer
    that does not come; return the client (its stderr piped) and the FIFO once the server runs it.

    The client starts as an interactive shell starts a command, Ctrl-C and SIGHUP not ignored (a test
    process started in the background of a script inherits both ignored, and gpuan keeps them so), but for
    the signal `ignored`."""

    def as_from_a_shell() -> None:
        for signum in (signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN if signum == ignored else signal.SIG_DFL)

    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    argv = [sys.executable, "-m", "gpuan", command, str(fifo), *options]
    proc = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, preexec_fn=as_from_a_shell)
    _wait_running(env, proc)
    return proc, fifo


def _wait_running(env: dict[str, str], proc: subprocess.Popen) -> None:
    """Wait until the server of `env` runs one command for the client `proc`."""
    deadline = time.monotonic() + 60
    while b" 1 running" not in gpuan("server", "status", env=env).stdout:
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    time.sleep(0.3)  # "running" counts from the fork; the client sends its go-ahead a moment later
