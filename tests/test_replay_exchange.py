"""The replay's records between processes: byte rows laid out as the structured arrays' bytes, the one
choice of how device buffers cross (CUDA-aware MPI, ucxx, host staging) with the real mpi4py and MPI
library, exchanges under ``mpiexec -n 2`` and ``-n 4`` that give each process what one process computes,
and, on a GPU, the same with CuPy records on every device path and the replay's tables on the GPU engine."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gpuan.engine import gpu_available
from gpuan.engine.procs import DEVICE_PATHS, device_path, exchange_path
from gpuan.replay import analyse
from gpuan.replay.breakdown import BREAKDOWN
from gpuan.replay.collectives import COLLECTIVE, WAIT, match
from gpuan.replay.comms import CALL
from gpuan.replay.p2p import MESSAGE, PARTNER
from gpuan.replay.records import Records
from gpuan.synth.ranks import plan, write_run
from gpuan.trace.ranks import load_run

MPIEXEC = shutil.which("mpiexec")
SCRIPT = Path(__file__).parent / "mpi" / "exchange_paths.py"
NO_GPU = "needs a GPU with CuPy (none here): runs the exchange and the replay on CuPy arrays"
GLOO = "kineto/cpu_ddp_gloo_4rank_slow_rank1_step2"


def _random(dtype: np.dtype, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.zeros(n, dtype)
    for name in dtype.names:
        kind = dtype[name]
        if kind.kind in "iu":
            out[name] = rng.integers(np.iinfo(kind).min, np.iinfo(kind).max, n, dtype=kind)
        elif kind.kind == "f":
            out[name] = rng.normal(0, 1e9, n)
        else:
            out[name] = rng.random(n) < 0.5
    return out


@pytest.mark.parametrize("dtype", [CALL, WAIT, COLLECTIVE, MESSAGE, PARTNER, BREAKDOWN])
@pytest.mark.parametrize("n", [0, 1, 257])
def test_rows_are_the_structured_arrays_bytes(dtype, n):
    recs = _random(dtype, n, seed=n)
    rows = Records.of(recs).rows()
    assert rows.shape == (n, dtype.itemsize) and rows.dtype == np.uint8
    assert rows.tobytes() == recs.tobytes()
    back = Records.from_rows(rows, dtype)
    assert back.to_numpy().tobytes() == recs.tobytes()
    assert all(back[name].flags.c_contiguous for name in dtype.names)


def test_records_select_assign_and_concatenate_as_structured_arrays_do():
    recs = _random(CALL, 300, seed=5)
    r = Records.of(recs)
    keep = recs["enter"] > 0
    assert r[keep].to_numpy().tobytes() == recs[keep].tobytes()
    order = np.argsort(recs["leave"], kind="stable")
    assert r.sort_by("leave").to_numpy().tobytes() == recs[order].tobytes()
    both = Records.concat([r[:100], r[100:]], CALL)
    assert both.to_numpy().tobytes() == recs.tobytes()
    target, expect = Records.zeros(300, CALL), np.zeros(300, CALL)
    target[order], expect[order] = r, recs
    target["rank"], expect["rank"] = 7.9, 7.9  # cast as numpy casts into a field
    assert target.to_numpy().tobytes() == expect.tobytes()


def test_match_takes_records_or_structured_arrays_alike(data_dir):
    from gpuan.replay.comms import COLLECTIVE as KIND
    from gpuan.replay.comms import comm_calls

    sources = load_run(data_dir / GLOO)
    calls = np.concatenate([comm_calls(s.load(), s.rank, len(sources))[0] for s in sources])
    calls = calls[calls["kind"] == KIND]
    assert calls.size > 50
    waits_a, colls_a = match(calls)
    waits_b, colls_b = match(Records.of(calls))
    assert waits_a.to_numpy().tobytes() == waits_b.to_numpy().tobytes()
    assert colls_a.to_numpy().tobytes() == colls_b.to_numpy().tobytes()
    assert int(waits_a["wait"].sum()) > 0


def test_one_choice_of_the_device_path():
    assert device_path(cuda_aware=True, ucxx=True) == "cuda-aware-mpi"
    assert device_path(cuda_aware=False, ucxx=True) == "ucxx"
    assert device_path(cuda_aware=False, ucxx=False) == "host-staging"
    assert {device_path(a, b) for a in (False, True) for b in (False, True)} == set(DEVICE_PATHS)
    # host buffers go to MPI as they are, whatever the device path
    assert {exchange_path(False, path) for path in DEVICE_PATHS} == {"host"}
    assert [exchange_path(True, path) for path in DEVICE_PATHS] == list(DEVICE_PATHS)


def _run_script(n: int, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([MPIEXEC, "-n", str(n), sys.executable, str(SCRIPT), *args],
                          capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})})  # fmt: skip


_LINE = re.compile(r"process (\d+) of (\d+): device path ([\w-]+); cuda-aware (True|False); queried (\d+) MPI")


@pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (the test command installs mpich from PyPI)")
@pytest.mark.parametrize("n", [2, 4])
def test_exchanges_under_mpiexec_give_what_one_process_computes(n):
    p = _run_script(n)
    assert p.returncode == 0, p.stderr
    lines = [m.groups() for m in _LINE.finditer(p.stdout)]
    assert sorted(int(rank) for rank, *_ in lines) == list(range(n))
    for _, size, path, aware, queried in lines:
        # the library itself was asked (MPIX_Query_cuda_support of the libmpi mpi4py loaded)
        assert int(size) == n and int(queried) >= 1
        if not gpu_available():  # this MPICH wheel, without a GPU: not CUDA-aware, so staging
            assert (aware, path) == ("False", "host-staging")
        else:
            assert path in DEVICE_PATHS and (aware == "False" or path == "cuda-aware-mpi")


@pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (the test command installs mpich from PyPI)")
def test_gpuan_mpi_cuda_sets_the_answer_and_rejects_other_values():
    p = _run_script(2, env={"GPUAN_MPI_CUDA": "1"})
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("device path cuda-aware-mpi") == 2
    p = _run_script(2, env={"GPUAN_MPI_CUDA": "yes"})
    assert p.returncode != 0 and "GPUAN_MPI_CUDA must be 0 or 1" in p.stderr


@pytest.mark.skipif(not gpu_available(), reason=NO_GPU)
@pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (the test command installs mpich from PyPI)")
def test_cupy_records_cross_on_every_device_path_as_host_records_do():
    p = _run_script(2, "--gpu")
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("exchanged on host,host-staging") == 2, p.stdout


@pytest.mark.skipif(not gpu_available(), reason=NO_GPU)
def test_replay_on_the_gpu_engine_gives_the_cpu_tables(data_dir, tmp_path):
    write_run(plan(6, 5, 3000, stragglers=((2, 4, 25_000_000),), seed=3), tmp_path)
    otf2 = [data_dir / "otf2/ping_pong_2rank"] if importlib.util.find_spec("otf2") else []
    for run in (data_dir / GLOO, *otf2, tmp_path):
        cpu, gpu = analyse(load_run(run), engine="cpu"), analyse(load_run(run), engine="gpu")
        assert list(gpu.tables) == list(cpu.tables)
        assert all(gpu[name].equals(cpu[name]) for name in cpu.tables), run


@pytest.mark.skipif(not gpu_available(), reason=NO_GPU)
@pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (the test command installs mpich from PyPI)")
def test_replay_under_mpiexec_on_the_gpu_gives_the_cpu_tables(data_dir):
    def tables(device: str, n: int | None) -> dict:
        cmd = [sys.executable, "-m", "gpuan", "--device", device, "replay", str(data_dir / GLOO), "--format", "json"]
        env = {**os.environ, "GPUAN_MPI": "0"} if n is None else dict(os.environ)
        p = subprocess.run([MPIEXEC, "-n", str(n), *cmd] if n else cmd, capture_output=True, text=True,
                           timeout=600, env=env)  # fmt: skip
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout)

    assert tables("gpu", 2) == tables("cpu", None)


@pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (the test command installs mpich from PyPI)")
def test_verbose_says_how_records_crossed_on_stderr_only(data_dir):
    def run(n: int | None, *extra: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "gpuan", "--device", "cpu", "replay", str(data_dir / GLOO), *extra]
        env = (
            {**os.environ, "GPUAN_MPI": "0"} if n is None else {k: v for k, v in os.environ.items() if k != "GPUAN_MPI"}
        )
        p = subprocess.run([MPIEXEC, "-n", str(n), *cmd] if n else cmd, capture_output=True, text=True,
                           timeout=300, env=env)  # fmt: skip
        assert p.returncode == 0, p.stderr
        return p

    alone, told = run(None), run(None, "--verbose")
    assert told.stdout == alone.stdout and alone.stderr == ""
    assert told.stderr == "gpuan replay: engine cpu, 1 process, records exchanged: none\n"
    two = run(2, "--verbose")
    assert two.stdout.splitlines()[1:] == alone.stdout.splitlines()[1:]  # the first line names the processes
    assert two.stderr == "gpuan replay: engine cpu, 2 processes, records exchanged: host\n"
