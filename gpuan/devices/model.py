"""What a GPU entry holds (:class:`GPU`), what a loaded ceilings file holds (:class:`Ceilings`), and the
facts shared by every part of one architecture: per-SM limits by compute capability / gfx target, host-link
rates, and how rates are written."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: the device name under which ``gpuan sol calibrate --cpu`` saves this machine's CPU ceilings
CPU = "cpu"


@dataclass(frozen=True)
class GPU:
    """One GPU model. Sizes in bytes, bandwidths in bytes/s, times in ns."""

    name: str
    sms: int
    threads_per_sm: int
    blocks_per_sm: int
    registers_per_sm: int
    shared_memory_per_sm: int
    #: copy engines that can each run one copy at a time; at least one serves each direction
    copy_engines: int
    #: host link, per direction (PCIe x16 of the generation, or NVLink-C2C)
    link: str
    link_bandwidth: float
    #: copy engines time-sliced between streams: the turn of a stream that takes an idle engine, and each
    #: later turn; None where not measured (a stream then keeps its engine while its copies last)
    copy_first_turn_ns: float | None = None
    copy_turn_ns: float | None = None
    compute_capability: tuple[int, int] = (0, 0)
    aliases: tuple[str, ...] = ()
    #: where each number comes from
    sources: dict[str, str] = field(default_factory=dict, compare=False)
    #: registers are allocated per warp in units of this many
    register_unit: int = 256
    #: shared memory is allocated per block in units of this many bytes (plus 1 KiB reserved from sm_80)
    shared_memory_unit: int = 256
    shared_memory_reserved: int = 0
    #: dense peak rates in FLOP/s (OP/s for int8), keyed "unit:dtype": unit "tensor" (tensor/matrix cores)
    #: or "vector" (CUDA cores / SIMD); never the datasheets' "with sparsity" figures
    flops: dict[str, float] = field(default_factory=dict, compare=False)
    #: device memory (HBM/GDDR) bandwidth, bytes/s; None where not known
    memory_bandwidth: float | None = None
    memory_bytes: int = 0
    #: the last-level cache an op's working set may be served from: L2 on NVIDIA, the Infinity Cache (MALL)
    #: on AMD parts that have one
    l2_bytes: int = 0
    #: that cache's read bandwidth, bytes/s, where a vendor document or a microbenchmark paper gives it
    l2_bandwidth: float | None = None
    #: what "nearest known device" compares: vendor, architecture (generation), and market segment
    vendor: str = "NVIDIA"
    arch: str = ""
    segment: str = "data centre"


@dataclass(frozen=True)
class Ceilings:
    """A loaded ceilings file (:func:`gpuan.devices.ceilings.read_ceilings` reads it): ``by_device``, the
    saved ceilings by device name (empty where there is no file yet); ``path``, the file (None for ceilings
    made in code); ``named_by``, how the user named it (``--ceilings-file F``, ``GPUAN_CEILINGS=F`` or the
    default path), which messages about it quote."""

    by_device: dict[str, dict[str, Any]] = field(default_factory=dict)
    path: Path | None = None
    named_by: str = "the ceilings given"


def peaks(**tflops: float) -> dict[str, float]:
    """Return a ``flops`` dict from TFLOP/s given as ``tensor_bf16=989.4, vector_fp32=66.9, ...``;
    ``tensor_fp16_bf16`` sets both 16-bit types."""
    out: dict[str, float] = {}
    for key, value in tflops.items():
        unit, *dtypes = key.split("_")
        for dtype in dtypes:
            out[f"{unit}:{dtype}"] = value * 1e12
    return out


def halved(**sparse_tflops: float) -> dict[str, float]:
    """Return a ``flops`` dict from a datasheet's "with sparsity" TFLOP/s: the dense rate is half of it."""
    return peaks(**{k: v / 2 for k, v in sparse_tflops.items()})


PCIE_X16 = {3: 15.75e9, 4: 31.5e9, 5: 63.0e9, 6: 126.0e9}  # per direction, after encoding
GIB, GB = 2**30, 10**9

CUDA_TABLE = "CUDA C++ Programming Guide, table 'Technical Specifications per Compute Capability'"
NV_DENSE = "tensor-core figures are the datasheet's 'with sparsity' values halved (dense)"

#: per-SM limits by compute capability (CUDA C++ Programming Guide, technical specifications table):
#: resident threads, resident blocks, 32-bit registers, shared memory per SM
_CC_LIMITS = {
    (5, 2): (2048, 32, 65536, 96 * 1024),
    (6, 0): (2048, 32, 65536, 64 * 1024),
    (7, 0): (2048, 32, 65536, 96 * 1024),
    (8, 0): (2048, 32, 65536, 164 * 1024),
    (8, 6): (1536, 16, 65536, 100 * 1024),
    (8, 9): (1536, 24, 65536, 100 * 1024),
    (9, 0): (2048, 32, 65536, 228 * 1024),
    (10, 0): (2048, 32, 65536, 228 * 1024),
    (10, 3): (2048, 32, 65536, 228 * 1024),
    (12, 0): (1536, 32, 65536, 100 * 1024),
}


def sm_limits(cc: tuple[int, int]) -> dict[str, Any]:
    """Return the GPU fields a compute capability fixes: per-SM limits, the capability itself, the 1 KiB
    of shared memory the driver reserves per block from sm_80, and the limits' source."""
    threads, blocks, registers, shared = _CC_LIMITS[cc]
    return {
        "threads_per_sm": threads, "blocks_per_sm": blocks, "registers_per_sm": registers,
        "shared_memory_per_sm": shared, "compute_capability": cc,
        "shared_memory_reserved": 1024 if cc >= (8, 0) else 0,
    }  # fmt: skip


def cc_source(cc: tuple[int, int]) -> str:
    """Return the source line of the per-SM limits of compute capability `cc`."""
    return f"{CUDA_TABLE}, compute capability {cc[0]}.{cc[1]}"


#: AMD per-CU limits by gfx target: ROCm reports 2048 threads and the LDS size per CU in deviceProperties
#: (the MI250 and MI300X traces), but no per-CU block or register limit
_GFX_LIMITS = {
    "gfx90a": ((9, 0), 64 * 1024),
    "gfx942": ((9, 4), 64 * 1024),
    "gfx950": ((9, 5), 160 * 1024),
    "gfx1100": ((11, 0), 64 * 1024),
}
_GFX_LDS_SOURCE = {
    "gfx90a": "the MI250 trace's deviceProperties (maxSharedMemoryPerMultiProcessor 65536)",
    "gfx942": "the MI300X traces' deviceProperties (maxSharedMemoryPerMultiProcessor 65536)",
    "gfx950": "AMD CDNA 4 architecture whitepaper (LDS enlarged to 160 KB per CU)",
    "gfx1100": "AMD RDNA 3 ISA / HIP: 64 KB LDS per CU (128 KB per work-group processor)",
}


def cu_limits(gfx: str) -> dict[str, Any]:
    """Return the GPU fields a gfx target fixes: per-CU limits, the HIP compute capability it reports, and
    the ``arch`` alias (so a trace naming only ``gfx942`` finds its part)."""
    cc, lds = _GFX_LIMITS[gfx]
    return {
        "threads_per_sm": 2048, "blocks_per_sm": 32, "registers_per_sm": 65536, "shared_memory_per_sm": lds,
        "compute_capability": cc, "vendor": "AMD",
    }  # fmt: skip


def cu_source(gfx: str) -> str:
    """Return the source line of the per-CU limits of `gfx`."""
    return (
        f"{_GFX_LDS_SOURCE[gfx]}; 2048 threads per CU as ROCm reports them; 32 workgroups and 65,536 registers"
        " per CU assumed (ROCm reports neither)"
    )
