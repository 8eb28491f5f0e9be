"""The CUDA C kernels of ``cuda_kernels/``, compiled at run time by CuPy (NVRTC) for the module that uses
them: the one place that reads their sources, so that analyses open no file."""

from __future__ import annotations

from functools import cache
from pathlib import Path

#: the CUDA C sources, beside the gpuan package in a checkout (an editable install)
KERNELS_DIR = Path(__file__).resolve().parents[2] / "cuda_kernels"


@cache
def cuda_module(source: str):
    """Return ``cuda_kernels/<source>`` compiled as a ``cupy.RawModule`` (C++17), once per process. CuPy
    caches builds on disk by their code, so an edited source is compiled anew."""
    path = KERNELS_DIR / source
    if not path.is_file():
        raise FileNotFoundError(f"{path}: the CUDA C source is missing (gpuan's GPU kernels need a checkout)")
    import cupy

    return cupy.RawModule(code=path.read_text(), options=("-std=c++17",))
