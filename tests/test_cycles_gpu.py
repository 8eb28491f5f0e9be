"""The GPU path of cycle detection gives the same bytes as the CPU path (runs where there is a GPU)."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys

import numpy as np
import pytest

import gpuan
from gpuan.engine import CPU, gpu_available, select
from gpuan.outputs.cycles import csv_text


@pytest.fixture(scope="module")
def gpu():
    if not gpu_available():
        pytest.skip("no GPU here (CuPy absent or no CUDA device); the kernel's simulator test runs instead")
    return select("gpu")


def _csvs(trace, engine) -> list[str]:
    result = gpuan.cycles.analyse(trace, engine=engine)
    return [csv_text(result, p["cycle"]) for p in result["patterns"].to_pylist()]


def test_real_trace_same_bytes_on_gpu(gpu, data_dir):
    trace = gpuan.load(data_dir / "kineto" / "v100_rank0_ns_resolution.json.gz")
    assert _csvs(trace, gpu) == _csvs(trace, CPU)


def test_synthetic_llm_same_bytes_on_gpu(gpu):
    from gpuan.synth.cycles import llm_kernel_trace

    trace, _ = llm_kernel_trace(300_000, noise=0.01)
    assert _csvs(trace, gpu) == _csvs(trace, CPU)


# ---- the kernels against their CPU twins: in numba's CUDA simulator here, on the GPU where there is one


def regions_agree(ids, cands, **launch):
    """Assert that regions_cuda's regions of every candidate period are the CPU's; return how many."""
    from gpuan.cycles import periods, regions_cuda

    cands = np.asarray(cands, np.int64)
    allowed = np.array([int(L * periods.TOLERANCE) for L in cands], np.int64)
    gpu = regions_cuda.periodic_regions(ids, cands, allowed, **launch)
    found = 0
    for L, a, (starts, ends) in zip(cands.tolist(), allowed.tolist(), gpu):
        cpu_starts, cpu_ends = periods.periodic_regions(ids, L, a)
        assert starts.tolist() == cpu_starts.tolist(), (L, starts, cpu_starts)
        assert ends.tolist() == cpu_ends.tolist(), (L, ends, cpu_ends)
        found += len(starts)
    return found


# the simulator's process runs regions_agree from its source, after the launch sizes are made small
_SIMULATOR_SETUP = """
import numpy as np
import gpuan
from gpuan.cycles import periods, periods_cuda, regions_cuda, sequences
from gpuan.cycles.detect import detect_sequence
from gpuan.engine import Engine
# small launches: the simulator runs every thread as a Python thread
periods_cuda.THREADS, periods_cuda.BLOCKS_PER_PERIOD = 16, 1
regions_cuda.THREADS, regions_cuda.CHUNK = 16, 512

def noisy_repeats(seed, pattern, reps, noise):
    rng = np.random.default_rng(seed)
    ids = np.tile(rng.integers(0, 20, pattern), reps).astype(np.int32)
    flip = rng.random(ids.size) < noise
    ids[flip] = rng.integers(0, 20, int(flip.sum()))
    return np.concatenate([rng.integers(0, 20, 100), ids, rng.integers(0, 20, 50)]).astype(np.int32)

def real_ids(path):
    return max(sequences(gpuan.load(path)), key=len).ids

def segments(segs):
    def cyc(c):
        return None if c is None else (c.template.tolist(), c.starts.tolist(), c.offset, c.per_parent,
                                       None if c.members is None else c.members.tolist())
    return [(s.start, s.end, cyc(s.cycle), [cyc(c) for c in s.sub_cycles]) for s in segs]
""" + inspect.getsource(regions_agree)


def _in_simulator(code: str) -> str:
    """Run `code` after :data:`_SIMULATOR_SETUP` under NUMBA_ENABLE_CUDASIM=1; returns its stdout."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    r = subprocess.run([sys.executable, "-c", _SIMULATOR_SETUP + code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


@pytest.mark.gpu_twin("gpuan/cycles/regions_cuda.py::_regions_kernel")
def test_regions_kernel_agrees_in_the_simulator_on_random_repeats():
    # chunks of 16 windows cross many run boundaries; a capacity of 3 sends busy candidates to the host path
    out = _in_simulator(
        "ids = noisy_repeats(0, 37, 40, 0.02)\n"
        "cands = [1, 5, 36, 37, 38, 74, 111, 400, 900]\n"
        "print('regions', regions_agree(ids, cands, chunk=16, threads=8, capacity=64))\n"
        "print('overflow', regions_agree(ids, cands, chunk=16, threads=8, capacity=3))\n"
        "print('exact', regions_agree(noisy_repeats(1, 23, 30, 0.0), [22, 23, 46, 47], chunk=7, threads=4))\n"
    )
    counts = dict(line.split() for line in out.splitlines())
    assert int(counts["regions"]) > 10 and int(counts["overflow"]) == int(counts["regions"])
    assert int(counts["exact"]) >= 2


@pytest.mark.gpu_twin("gpuan/cycles/regions_cuda.py::_regions_kernel")
def test_regions_kernel_agrees_in_the_simulator_on_a_real_trace(data_dir):
    path = data_dir / "kineto" / "v100_rank0_ns_resolution.json.gz"
    out = _in_simulator(
        f"ids = real_ids({str(path)!r})\n"
        "cands = periods.candidate_periods(ids, int(ids.max()) + 1, len(ids) // 2)\n"
        "print('regions', regions_agree(ids, cands, chunk=256, threads=32, capacity=16))\n"
    )
    assert int(out.split()[-1]) > 0


@pytest.mark.gpu_twin("gpuan/cycles/regions_cuda.py::_regions_kernel")
@pytest.mark.gpu_twin("gpuan/cycles/periods_cuda.py::_match_counts_kernel")
@pytest.mark.parametrize("name", ["v100_rank0_ns_resolution", "v100_ddp_6steps_trace_diff_test"])
def test_detection_on_the_gpu_path_finds_the_cpu_segments_in_the_simulator(data_dir, name):
    # 4,350 and 9,812 kernels (the second on two streams whose order changes every step: ordered regions on
    # the GPU compete with unordered ones from the host): above EXHAUSTIVE, so both kernels run (engine
    # "gpu" with numpy arrays: the simulator)
    path = data_dir / "kineto" / f"{name}.json.gz"
    out = _in_simulator(
        f"seq = max(sequences(gpuan.load({str(path)!r})), key=len)\n"
        "assert len(seq) > periods.EXHAUSTIVE\n"
        "gpu, cpu = detect_sequence(seq, Engine('gpu', np)), detect_sequence(seq)\n"
        "assert segments(gpu) == segments(cpu), (segments(gpu), segments(cpu))\n"
        "print('cycles', sum(s.cycle is not None for s in cpu))\n"
    )
    assert int(out.split()[-1]) >= 1


@pytest.mark.gpu_twin("gpuan/cycles/regions_cuda.py::_regions_kernel")
def test_regions_kernel_on_a_real_gpu(gpu):
    from gpuan.cycles import periods
    from gpuan.synth.cycles import llm_kernel_trace

    trace, _ = llm_kernel_trace(300_000, noise=0.01)
    ids = max(gpuan.cycles.sequences(trace), key=len).ids
    regions_agree(ids, periods.candidate_periods(ids, int(ids.max()) + 1, len(ids) // 2))


@pytest.mark.gpu_twin("gpuan/cycles/periods_cuda.py::_match_counts_kernel")
def test_match_counts_kernel_agrees_in_the_simulator_on_a_real_trace(data_dir):
    path = data_dir / "kineto" / "a100_ddp2_rank0_nccl.json.gz"
    out = _in_simulator(
        f"ids = real_ids({str(path)!r})\n"
        "cands = np.array([1, 2, 15, 16, 446, 893, 894, 1300], np.int64)\n"
        "gpu, cpu = periods_cuda.match_counts(ids, cands, blocks=2), periods.match_counts(ids, cands)\n"
        "assert gpu.tolist() == cpu.tolist(), (gpu, cpu)\n"
        "print('matches', cpu[cands == 893][0], len(ids))\n"
    )
    matches, n = map(int, out.split()[1:])
    assert matches > n // 2  # the 893-kernel training step repeats 3 times
