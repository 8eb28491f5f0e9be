"""The GPU twin of :func:`gpuan.cycles.periods.match_counts`: a numba-CUDA kernel.

Scoring the candidate periods and tracing their periodic regions (:mod:`gpuan.cycles.regions_cuda`) are
the steps whose work grows with events x candidates, so they run on the GPU; every later step touches
each event a few times and stays on the host. Both kernels count in integers, so the outputs are
bit-identical between CPU and GPU runs. The kernel runs unchanged in numba's
CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``), which is how CI checks it against the CPU version.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda

THREADS = 256
#: blocks per candidate along the sequence (each strides over its share of the comparisons)
BLOCKS_PER_PERIOD = 64


@cuda.jit
def _match_counts_kernel(ids, periods, out):
    cand = cuda.blockIdx.y
    L = periods[cand]
    n = ids.shape[0]
    tid = cuda.threadIdx.x
    partial = cuda.shared.array(THREADS, dtype=np.int64)
    matches = 0
    i = cuda.blockIdx.x * cuda.blockDim.x + tid
    stride = cuda.gridDim.x * cuda.blockDim.x
    while i < n - L:
        if ids[i] == ids[i + L]:
            matches += 1
        i += stride
    partial[tid] = matches
    cuda.syncthreads()
    step = THREADS // 2
    while step > 0:
        if tid < step:
            partial[tid] += partial[tid + step]
        cuda.syncthreads()
        step //= 2
    if tid == 0:
        cuda.atomic.add(out, cand, partial[0])


def device_ids(ids: Any) -> Any:
    """Return `ids` as a numba device array: a device array (CuPy, numba) as it is, a host array copied."""
    if hasattr(ids, "__cuda_array_interface__"):
        return cuda.as_cuda_array(ids)
    return cuda.to_device(np.ascontiguousarray(ids))


def match_counts(ids: Any, periods: np.ndarray, blocks: int | None = None) -> np.ndarray:
    """Return, for each period ``L``, how many ``i`` have ``ids[i] == ids[i + L]`` (computed on the GPU).

    `ids` may be a host array or any device array (CuPy, numba); the counts come back to the host.
    `blocks` per candidate (default :data:`BLOCKS_PER_PERIOD`) shapes the launch, never the result.
    """
    blocks = blocks or BLOCKS_PER_PERIOD
    if len(periods) == 0:
        return np.zeros(0, np.int64)
    d_ids = device_ids(ids)
    d_periods = cuda.to_device(np.ascontiguousarray(periods, dtype=np.int64))
    d_out = cuda.to_device(np.zeros(len(periods), np.int64))
    _match_counts_kernel[(blocks, len(periods)), THREADS](d_ids, d_periods, d_out)
    return d_out.copy_to_host()
