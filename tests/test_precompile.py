"""``gpuan precompile``: after it, numba's cache holds every cached function of gpuan's CPU code for this machine,
and the commands, on real traces and generated ones, compile nothing (the cache's files stay as they were);
``--check`` names what a cache lacks; a failed or overlong task is reported; and a cache compiled for another CPU
target (another CPU name, or the same name with other features) does not count as compiled.

Each run is a fresh process with an empty NUMBA_CACHE_DIR of its own: the test process and the checkout's own
cache (beside the sources) hold whatever other tests compiled."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import DATA

REPO = Path(__file__).resolve().parents[1]


def _gpuan(args: list[str], cache: Path, timeout: int = 600, **env: str) -> subprocess.CompletedProcess:
    """Run ``gpuan ARGS`` in a fresh process with numba's cache in `cache`, never in a server."""
    full = dict(os.environ, PYTHONPATH=str(REPO), NUMBA_CACHE_DIR=str(cache), GPUAN_SERVER="0", **env)
    return subprocess.run(
        [sys.executable, "-m", "gpuan", *args], env=full, capture_output=True, text=True, timeout=timeout
    )


def _files(cache: Path) -> dict[str, int]:
    """Every file under `cache` with its modification time (ns): numba writes there whenever it compiles."""
    return {str(p.relative_to(cache)): p.stat().st_mtime_ns for p in cache.rglob("*") if p.is_file()}


def test_after_precompile_the_cache_holds_everything_and_commands_compile_nothing(tmp_path):
    cache = tmp_path / "numba"
    cache.mkdir()
    done = _gpuan(["precompile", "--jobs", "2"], cache)
    assert done.returncode == 0, done.stderr[-3000:]
    total = int(done.stderr.split("all ")[1].split()[0])
    assert total >= 60  # gpuan's cached numba functions (72 when this was written)
    assert f"{total} compiled now" in done.stderr  # the cache was empty: every one of them compiled here
    assert f"NUMBA_CACHE_DIR, {cache}" in done.stderr
    check = _gpuan(["precompile", "--check"], cache)
    assert check.returncode == 0, check.stderr
    assert f"all {total} of gpuan's numba functions" in check.stderr

    # traces unlike the ones precompile wrote: a plain one of 6 MB (cut into chunks at 2 threads), and the real ones
    from gpuan.synth.kineto import write_kineto_trace

    plain = tmp_path / "other.json"
    write_kineto_trace(plain, target_bytes=6 << 20, layers=2, seed=7)
    commands = [["info", str(plain)], ["cycles", str(plain), "-o", str(tmp_path / "c")]]
    kineto = DATA / "kineto"
    if kineto.is_dir():
        real = str(kineto / "mi300x_qwen05b_inference.json.gz")
        commands += [
            ["info", real],
            ["sol", real],
            ["streams", str(kineto / "a100_alexnet.json.gz"), "--streams", "2", "--stream", "7"],
            ["replay", str(kineto / "cpu_ddp_gloo_4rank_slow_rank1_step2")],
            ["fleet", str(kineto / "dlrm_8rank_nccl"), "-o", str(tmp_path / "fleet")],
        ]
    before = _files(cache)
    for argv in commands:
        r = _gpuan(argv, cache, timeout=120, GPUAN_THREADS="2")
        assert r.returncode == 0, (argv, r.stderr[-2000:])
    assert _files(cache) == before, "a command compiled what precompile left out"
    if not kineto.is_dir():
        pytest.skip(f"generated traces checked; the real ones are not at {kineto} (../shared/data beside the project)")


def test_check_names_what_an_empty_cache_lacks(tmp_path):
    r = _gpuan(["precompile", "--check"], tmp_path)
    assert r.returncode == 1
    assert r.stderr.startswith("gpuan: error: numba's cache (NUMBA_CACHE_DIR")
    assert "gpuan.trace.kineto.scanner.scan" in r.stderr and "gpuan.streams.simulate._run" in r.stderr
    assert list(tmp_path.rglob("*.nbc")) == []  # --check compiles nothing


_PROBE = """
    import sys
    sys.path.insert(0, {tmp!r})
    from gpuan.jit_cache import compiled_on_disk
    from probe_module import twice
    print(compiled_on_disk(twice))
    if sys.argv[1:] == ["call"]:
        twice(3)
        print(compiled_on_disk(twice))
"""


def test_code_cached_for_another_cpu_target_is_not_compiled_on_disk(tmp_path):
    source = "from numba import njit\n\n\n@njit(cache=True)\ndef twice(x):\n    return 2 * x\n"
    (tmp_path / "probe_module.py").write_text(source)
    code = textwrap.dedent(_PROBE.format(tmp=str(tmp_path)))
    env = dict(os.environ, PYTHONPATH=str(REPO), NUMBA_CACHE_DIR=str(tmp_path / "numba"))

    def probe(*args: str, **extra: str) -> list[str]:
        r = subprocess.run(
            [sys.executable, "-c", code, *args], env=dict(env, **extra), capture_output=True, text=True, timeout=300
        )
        assert r.returncode == 0, r.stderr[-2000:]
        return r.stdout.split()

    assert probe("call", NUMBA_CPU_NAME="generic") == ["False", "True"]  # compiled for any x86-64 (or arm64) CPU
    assert probe() == ["False"]  # this machine's own CPU target: the index holds nothing it would load
    assert probe(NUMBA_CPU_NAME="generic") == ["True"]
    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("the images' CPU family, x86-64-v3, is an x86-64 one")
    # the images' target: a CPU family with its own features (empty NUMBA_CPU_FEATURES), not this machine's
    family = {"NUMBA_CPU_NAME": "x86-64-v3", "NUMBA_CPU_FEATURES": ""}
    assert probe("call", **family) == ["False", "True"]
    assert probe(NUMBA_CPU_NAME="x86-64-v3") == ["False"]  # the family's name with this machine's features


def test_a_failed_task_is_reported_with_its_last_words_while_the_other_chain_completes(tmp_path, monkeypatch):
    from gpuan.cli.precompile import run_chains

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    failed = run_chains([("no_such_task",), ("cycle_kernels",)], jobs=2)
    assert [name for name, _ in failed] == ["no_such_task"]
    assert "ValueError: no precompile task 'no_such_task'" in failed[0][1]
    assert list(tmp_path.rglob("periods.consensus-*.nbi")), "the other chain ran to its end and cached its code"


def test_a_chain_past_its_deadline_is_stopped(tmp_path, monkeypatch):
    from gpuan.cli.precompile import run_chains

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))  # empty: the event loop compiles for 20 s or more
    assert run_chains([("stream_loop",)], jobs=1, deadline_s=1.0) == [
        ("stream_loop", "still compiling after 1 s: stopped")
    ]


def test_stopping_a_chain_stops_what_it_started(tmp_path):
    from gpuan.cli.precompile import _stop

    pid_file = tmp_path / "pid"
    child = subprocess.Popen(["sh", "-c", f"sleep 60 & echo $! > {pid_file}; wait"], start_new_session=True)
    while not pid_file.exists() or not pid_file.read_text().strip():
        time.sleep(0.02)
    grandchild = int(pid_file.read_text())
    _stop(child)
    for _ in range(100):  # killed at once; reaped by init a moment later
        if not _alive(grandchild):
            break
        time.sleep(0.02)
    assert not _alive(grandchild)


def _alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie, killed but not yet reaped, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False


_SAVER = """
    import sys
    sys.path.insert(0, {tmp!r})
    from gpuan.jit_cache import lighter_numba_start
    lighter_numba_start()  # as every gpuan command starts
    from probe_module import twice
    print("imported", flush=True)
    twice(float(sys.argv[1]) if "." in sys.argv[1] else int(sys.argv[1]))
    print("saved", flush=True)
"""


def test_a_command_saves_compiled_code_only_under_the_cache_folders_lock(tmp_path):
    import fcntl

    from gpuan.jit_cache import SAVE_LOCK

    source = "from numba import njit\n\n\n@njit(cache=True)\ndef twice(x):\n    return 2 * x\n"
    (tmp_path / "probe_module.py").write_text(source)
    cache = tmp_path / "numba"
    env = dict(os.environ, PYTHONPATH=str(REPO), NUMBA_CACHE_DIR=str(cache))
    code = textwrap.dedent(_SAVER.format(tmp=str(tmp_path)))

    def saver(value: str) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-c", code, value], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    first = saver("3")
    assert first.communicate(timeout=300)[0].split() == ["imported", "saved"]
    (folder,) = [d for d in cache.iterdir() if d.is_dir()]
    assert len(list(folder.glob("*.nbc"))) == 1
    with open(folder / SAVE_LOCK) as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        second = saver("3.5")  # another signature of the same function
        assert second.stdout.readline().strip() == "imported"
        time.sleep(5)  # its compile takes well under a second: it now waits at its save
        assert second.poll() is None, second.communicate()
        assert len(list(folder.glob("*.nbc"))) == 1
    out, err = second.communicate(timeout=300)  # the lock released (closed): the save goes on
    assert second.returncode == 0 and out.split() == ["saved"], err[-2000:]
    assert len(list(folder.glob("*.nbc"))) == 2
