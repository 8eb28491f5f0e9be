"""What one thread block of a kernel takes from an SM, and how many fit: the CUDA occupancy rules."""

from __future__ import annotations

import numpy as np

from gpuan.devices import GPU

WARP = 32


def block_needs(gpu: GPU, threads: np.ndarray, registers: np.ndarray, shared_memory: np.ndarray) -> np.ndarray:
    """Return, per kernel, the SM resources one block holds: columns threads, registers, shared memory
    (bytes) and block slots (1), as an int64 array of shape (n, 4).

    Threads are counted in whole warps; registers are allocated per warp in units of
    ``gpu.register_unit``; shared memory in units of ``gpu.shared_memory_unit`` plus the per-block
    reserve of newer architectures."""
    threads = np.asarray(threads, np.int64)
    warps = -(-threads // WARP)
    unit = gpu.register_unit
    regs_per_warp = -(-(np.asarray(registers, np.int64) * WARP) // unit) * unit
    smem = np.asarray(shared_memory, np.int64)
    smem = np.where(smem > 0, -(-smem // gpu.shared_memory_unit) * gpu.shared_memory_unit, 0)
    smem = smem + gpu.shared_memory_reserved
    return np.stack([warps * WARP, warps * regs_per_warp, smem, np.ones_like(threads)], axis=1)


def sm_capacity(gpu: GPU) -> np.ndarray:
    """Return one SM's resources in the order of :func:`block_needs`."""
    return np.array([gpu.threads_per_sm, gpu.registers_per_sm, gpu.shared_memory_per_sm, gpu.blocks_per_sm], np.int64)


def fit(free: np.ndarray, needs: np.ndarray) -> np.ndarray:
    """Return how many blocks with resource needs `needs` (4,) fit into each row of `free` (m, 4)."""
    with np.errstate(divide="ignore"):
        per = np.where(needs > 0, free // np.maximum(needs, 1), np.iinfo(np.int64).max)
    return per.min(axis=-1)


def blocks_per_sm(gpu: GPU, threads, registers, shared_memory) -> np.ndarray:
    """Return how many blocks of each kernel one empty SM holds at once (0: a block does not fit)."""
    needs = block_needs(gpu, threads, registers, shared_memory)
    return fit(sm_capacity(gpu)[None, :], needs)
