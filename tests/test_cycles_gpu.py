"""The GPU path of cycle detection gives the same bytes as the CPU path (runs where there is a GPU)."""

from __future__ import annotations

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
