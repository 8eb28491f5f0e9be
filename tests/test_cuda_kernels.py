"""Every CUDA C file in ``cuda_kernels/`` compiles for the H100 (sm_90) with no error and no warning.

This machine and CI have ``nvcc`` but no GPU, so a build error would otherwise surface only on a GPU
machine; whether each kernel computes what its CPU twin does is tested in the kernel's own twin tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from numba import types as nt

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "cuda_kernels").glob("*.cu"))
NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None)
# warnings are errors, in the front end (all-warnings) and in the assembler (spills, unused registers...)
FLAGS = ["-arch=sm_90", "-std=c++17", "-Werror", "all-warnings", "-Xptxas", "-Werror", "--resource-usage"]


@pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH (install the CUDA toolkit to compile cuda_kernels/)")
@pytest.mark.parametrize("source", SOURCES, ids=[p.name for p in SOURCES])
def test_compiles_for_sm90_without_warnings(source, tmp_path):
    r = subprocess.run([NVCC, *FLAGS, "-c", str(source), "-o", str(tmp_path / "k.o")], capture_output=True, text=True)
    assert r.returncode == 0, f"{source.name} does not compile:\n{r.stderr}"
    assert "warning" not in r.stderr.lower(), f"{source.name} compiles with warnings:\n{r.stderr}"


@pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH")
def test_a_warning_fails_the_build(tmp_path):
    """The flags above do turn a warning into a failure (an unused variable, here)."""
    bad = tmp_path / "bad.cu"
    bad.write_text('extern "C" __global__ void k(int* x) { int unused = 1; x[0] = 2; }\n')
    r = subprocess.run([NVCC, *FLAGS, "-c", str(bad), "-o", str(tmp_path / "bad.o")], capture_output=True, text=True)
    assert r.returncode != 0 or "warning" in r.stderr.lower()


def test_the_loader_finds_every_source_and_names_a_missing_one():
    from gpuan.engine.kernels import KERNELS_DIR, cuda_module

    assert SOURCES and all(p.parent == KERNELS_DIR for p in SOURCES)
    with pytest.raises(FileNotFoundError, match="no_such_kernel.cu"):
        cuda_module("no_such_kernel.cu")


# The numba-CUDA kernels' argument types, for compiling them without a GPU. Every kernel that
# tests/test_gpu_twins.py finds must be here (a new kernel without its signature fails the test below).
u8, u64, i32, i64, n = nt.uint8[::1], nt.uint64[::1], nt.int32[::1], nt.int64[::1], nt.int64
rows64, rows32, spans = nt.int64[:, ::1], nt.int32[:, ::1], nt.uint64[:, ::1]
SIGNATURES = {
    "gpuan/cycles/periods_cuda.py::_match_counts_kernel": (i32, i64, i64),
    "gpuan/cycles/regions_cuda.py::_regions_kernel": (i32, i64, i64, n, rows64, rows64, rows64),
    "gpuan/trace/kineto/gpu/structure_cuda.py::_quotes_kernel": (u8, u64, n, n, u64, i64),
    "gpuan/trace/kineto/gpu/structure_cuda.py::_brackets_kernel": (u64, u64, i64, n, n, u64, u64, i64),
    "gpuan/trace/kineto/gpu/structure_cuda.py::_starts_kernel": (u8, u64, u64, i64, n, n, n, n, n, i64, i64, i64, i64),
    "gpuan/trace/kineto/gpu/strings_cuda.py::_same_bytes_kernel": (u64, i64, i64, i64, nt.boolean[::1]),
    "gpuan/trace/kineto/gpu/fields_cuda.py::_fields_kernel": (
        u8, u64, n, i64, n, rows64, rows32, spans, rows64, rows64, i64, nt.int32[::1]
    ),
}  # fmt: skip

# run in a process of its own, without the simulator: the real CUDA target compiles
_COMPILE = """
import importlib, sys, types
import numba.cuda.dispatcher as dispatcher
from numba.cuda import compile_ptx
from test_cuda_kernels import SIGNATURES
# no GPU to ask for its compute capability: device functions are compiled for the one named here
dispatcher.get_current_device = lambda: types.SimpleNamespace(compute_capability=(9, 0))
for key in sys.argv[1:]:
    path, name = key.split("::")
    kernel = getattr(importlib.import_module(path[:-3].replace("/", ".")), name)
    ptx, _ = compile_ptx(kernel.py_func, SIGNATURES[key], cc=(9, 0))
    assert ".target sm_90" in ptx, key
    print("compiled", key)
"""


def test_every_numba_kernel_compiles_for_sm_90():
    """The simulator runs kernels as Python: the CUDA target's typing (which refuses max(a, b), for one)
    and code generation are checked only by compiling them, which NVVM does without a GPU."""
    from test_gpu_twins import all_kernels

    try:
        from numba.cuda.cudadrv.nvvm import NVVM

        NVVM()
    except Exception as e:  # noqa: BLE001 - any failure to load NVVM means no CUDA toolkit to compile with
        pytest.skip(f"no NVVM (CUDA toolkit) to compile with: {e}")
    kernels = sorted(k for k, kind in all_kernels().items() if kind == "numba")
    missing = [k for k in kernels if k not in SIGNATURES]
    assert not missing, f"numba-CUDA kernels without a signature in SIGNATURES: {missing}"
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "tests"), env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-c", _COMPILE, *kernels], capture_output=True, text=True, env=env,
                       cwd=ROOT, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert r.stdout.count("compiled") == len(kernels)
