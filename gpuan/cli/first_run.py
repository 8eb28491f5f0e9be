"""What a command's first run compiles in a process of its own while it reads its trace
(:func:`gpuan.jit_cache.compiled_beside`): each entry calls an analysis on a small made-up input, so that
numba compiles its kernels, for the argument types real traces give them, into its on-disk cache; beside
each, the numba functions whose first compile in the command waits for that process."""

from __future__ import annotations

from typing import Any

import numpy as np


def stream_functions() -> list[Any]:
    """Return the numba functions :func:`stream_loop` compiles: the event loop (its helpers compile with it)."""
    from gpuan.streams.simulate import _run

    return [_run]


def cycle_functions() -> list[Any]:
    """Return the numba functions of cycle detection, which :func:`cycle_kernels` compiles."""
    from importlib import import_module

    from numba.core.registry import CPUDispatcher

    # by module name: the package's `detect` is the function of that name
    modules = [import_module(f"gpuan.cycles.{m}") for m in ("periods", "detect", "interleave")]
    return [f for m in modules for f in vars(m).values() if isinstance(f, CPUDispatcher)]


def stream_loop() -> None:
    """Simulate a kernel and a copy on two streams: the stream simulator's event loop (``gpuan streams``).
    :func:`~gpuan.streams.simulate.simulate` fixes the loop's argument types, whatever the workload."""
    from gpuan.devices import lookup
    from gpuan.streams.simulate import Settings, simulate
    from gpuan.streams.workload import H2D, KERNEL, Workload

    def col(*values, dtype=np.int64) -> np.ndarray:
        return np.array(values, dtype)

    f8 = np.float64
    w = Workload(
        names=["kernel", "copy"], kind=col(KERNEL, H2D, dtype=np.int8), start=col(0, 10, dtype=f8),
        dur=col(5, 5, dtype=f8), gap=col(0, 5, dtype=f8), bytes=col(0, 1 << 20), pageable=col(False, True, dtype=bool),
        grid=col(4, 0), threads=col(128, 0), registers=col(32, 0), shared_memory=col(0, 0), device=0, stream=7,
    )  # fmt: skip
    simulate(w, Settings(lookup("H100"), 2))


def cycle_kernels() -> None:
    """Find the cycles of a small synthetic inference trace on the CPU: the kernels of ``gpuan cycles``.

    The trace is long enough for the search's histogram of gaps (over 4,096 events), and it is searched
    twice: as one group, whose arrays are views of the table's read-only memory, and stream by stream,
    whose arrays are gathered copies; numba compiles a kernel once for each of the two."""
    from gpuan.cycles import analyse
    from gpuan.synth.cycles import llm_kernel_trace

    trace = llm_kernel_trace(5000, layers=2)[0]
    for how in ("group", "stream"):
        analyse(trace, engine="cpu", sequences=how)
