"""``gpuan sol calibrate``: measure the ceilings this machine reaches (a large copy for memory bandwidth, a
large matrix product per dtype for FLOP/s) and save them beside the datasheet values.

On a GPU it uses PyTorch (CUDA events, best of several runs); with ``--cpu`` it measures this machine's CPU
with numpy, so that CPU traces and the live tracker on the CPU can be scored against real roofs."""

from __future__ import annotations

import datetime
import json
import time
from pathlib import Path

import numpy as np

from gpuan.devices.ceilings import ceilings_path, read_ceilings
from gpuan.devices.model import CPU
from gpuan.errors import UsageError
from gpuan.outputs.files import make_dir, write_text

#: CPU sizes: a copy well beyond the last-level cache, a product long enough to time
CPU_COPY_BYTES, CPU_GEMM_N = 256 << 20, 1536
GPU_COPY_BYTES, GPU_GEMM_N = 2 << 30, 8192


def best_seconds(run, repeats: int) -> float:
    """Return the shortest wall time of `repeats` calls of `run`, in seconds."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t0)
    return best


def _cache_bytes() -> int:
    """The size of this CPU's per-core data cache below the shared last level (L2), from sysfs; 1 MiB if
    unknown."""
    sizes = {}
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            level = int((index / "level").read_text())
            text = (index / "size").read_text().strip().upper()
        except (OSError, ValueError):
            continue
        scale = {"K": 1 << 10, "M": 1 << 20}.get(text[-1:], 1)
        sizes[level] = int(text.rstrip("KM")) * scale
    return sizes.get(2, 1 << 20)


def _copy_pair(nbytes: int) -> tuple[np.ndarray, np.ndarray]:
    """Return a source of ones and a destination of `nbytes` each, placed half a page apart modulo 4 KiB.

    Where the allocator puts both at the same offset within a page, every store aliases the load of the
    same offset (4K aliasing) and an in-cache copy runs at a tenth of its speed: which arrays got that
    placement decided whether L2 measured faster or slower than DRAM."""
    n = nbytes // 8
    src = np.ones(n)
    spare = np.empty(n + 4096 // 8)
    shift = ((src.ctypes.data + 2048 - spare.ctypes.data) % 4096) // 8
    return src, spare[shift : shift + n]


def measure_cpu(repeats: int = 5) -> dict:
    """Return this CPU's ceilings: memory bandwidth (a copy well beyond the caches; bytes read + written
    per second), the bandwidth of data that fits in L2 (a copy of half its size, repeated), and numpy
    matmul FLOP/s for fp32 and fp64."""
    src, dst = _copy_pair(CPU_COPY_BYTES)
    t = best_seconds(lambda: np.copyto(dst, src), repeats)
    cache = _cache_bytes()
    small, small_dst = _copy_pair(cache // 4)
    rounds = max(1, CPU_COPY_BYTES // cache)

    def copies() -> None:
        for _ in range(rounds):
            np.copyto(small_dst, small)

    t_cache = best_seconds(copies, repeats) / rounds
    flops = {}
    for key, dtype in (("vector:fp32", np.float32), ("vector:fp64", np.float64)):
        a = np.ones((CPU_GEMM_N, CPU_GEMM_N), dtype)
        a @ a  # warm the BLAS threads
        flops[key] = 2 * CPU_GEMM_N**3 / best_seconds(lambda a=a: a @ a, repeats)
    # on a CPU the matrix "units" are the same cores
    flops |= {"tensor:fp32": flops["vector:fp32"], "tensor:fp64": flops["vector:fp64"]}
    bandwidth = 2 * CPU_COPY_BYTES / t
    return {"flops": flops, "memory_bandwidth": bandwidth, "link_bandwidth": bandwidth,
            "l2_bytes": cache, "l2_bandwidth": 2 * (cache // 4) / t_cache}  # fmt: skip


def measure_gpu(repeats: int = 10) -> tuple[str, dict]:
    """Return (device name, ceilings) of the current CUDA GPU, measured with PyTorch: a device-to-device
    copy, and an N×N product for FP32, TF32, FP16, BF16 (and FP8 where the GPU has it)."""
    try:
        import torch
    except ImportError:
        raise UsageError("calibrate: measuring a GPU needs PyTorch with CUDA; use --cpu for this CPU") from None
    if not torch.cuda.is_available():
        raise UsageError("calibrate: no CUDA GPU is visible; use --cpu to measure this CPU")

    def timed(fn) -> float:
        fn()
        torch.cuda.synchronize()
        best = float("inf")
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            best = min(best, start.elapsed_time(end) / 1e3)
        return best

    def copy_bandwidth() -> float:  # its buffers are freed on return, before the products
        src = torch.empty(GPU_COPY_BYTES, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        return 2 * GPU_COPY_BYTES / timed(lambda: dst.copy_(src))

    bandwidth = copy_bandwidth()
    n, flops = GPU_GEMM_N, {}
    cases = [("vector:fp32", torch.float32, False), ("tensor:tf32", torch.float32, True),
             ("tensor:fp16", torch.float16, False), ("tensor:bf16", torch.bfloat16, False)]  # fmt: skip
    for key, dtype, tf32 in cases:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        a = torch.randn(n, n, device="cuda", dtype=dtype)
        flops[key] = 2 * n**3 / timed(lambda a=a: a @ a)
    torch.backends.cuda.matmul.allow_tf32 = False
    if torch.cuda.get_device_capability() >= (8, 9) and hasattr(torch, "float8_e4m3fn"):
        a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
        b = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn).t()
        one = torch.tensor(1.0, device="cuda")
        flops["tensor:fp8"] = 2 * n**3 / timed(lambda: torch._scaled_mm(a, b, one, one, out_dtype=torch.bfloat16))
    return torch.cuda.get_device_name(), {"flops": flops, "memory_bandwidth": bandwidth}


def calibrate(cpu: bool = False, path: str | None = None) -> tuple[str, dict, Path]:
    """Measure this machine's CPU (`cpu`) or its GPU, save the ceilings under the device's name in the
    ceilings file (`path`, else :func:`gpuan.devices.ceilings.ceilings_path`), and return (device name,
    ceilings, file)."""
    from gpuan.devices import find

    target = ceilings_path(path)
    make_dir(target.parent)  # before measuring: a place it cannot write is found in a second, not after a minute
    saved = read_ceilings(path).by_device
    if cpu:
        name, result = CPU, measure_cpu()
    else:
        raw, result = measure_gpu()
        known = find(raw)
        name = known.name if known else raw
    result |= {"measured_at": datetime.datetime.now().isoformat(timespec="seconds")}
    saved |= {name: result}
    write_text(target, json.dumps(saved, indent=1, sort_keys=True) + "\n")
    return name, result, target
