"""Every CUDA C file in ``cuda_kernels/`` compiles for the H100 (sm_90) with no error and no warning.

This machine and CI have ``nvcc`` but no GPU, so a build error would otherwise surface only on a GPU
machine; whether each kernel computes what its CPU twin does is tested in the kernel's own twin tests."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

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
