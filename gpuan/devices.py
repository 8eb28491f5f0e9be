"""The GPUs gpuan knows: per-SM resource limits, copy engines, host link, and the dense peak arithmetic
rates and memory bandwidth, each with its source.

Analyses that need hardware facts (stream-overlap prediction, roofline scoring) take a :class:`GPU` from
here, found by name (``--device``) or from a trace's ``deviceProperties``; a trace's own properties
override the table's SM count and per-SM limits, because they describe the exact part that ran.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from gpuan.errors import TraceError


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
    l2_bytes: int = 0
    #: L2 read bandwidth, bytes/s, where the vendor publishes it (data that fits in L2 may come from there)
    l2_bandwidth: float | None = None


def _peaks(**tflops: float) -> dict[str, float]:
    """Return a ``flops`` dict from TFLOP/s given as ``tensor_bf16=989.4, vector_fp32=66.9, ...``;
    ``tensor_fp16_bf16`` sets both 16-bit types."""
    out: dict[str, float] = {}
    for key, value in tflops.items():
        unit, *dtypes = key.split("_")
        for dtype in dtypes:
            out[f"{unit}:{dtype}"] = value * 1e12
    return out


_PCIE_X16 = {3: 15.75e9, 4: 31.5e9, 5: 63.0e9}  # per direction, after 128b/130b encoding
_CUDA_TABLE = "CUDA C Programming Guide, table 'Technical Specifications per Compute Capability'"

# Every GPU here (compute capability 5.2 to 9.0) has 2048 threads, 32 blocks and 64K registers per SM.
_PER_SM = {"threads_per_sm": 2048, "blocks_per_sm": 32, "registers_per_sm": 65536}

_NV_DENSE = "tensor-core figures are the datasheet's 'with sparsity' values halved (dense)"
_H100_PEAKS = _peaks(
    vector_fp64=33.5, tensor_fp64=66.9, vector_fp32=66.9, tensor_tf32=494.7, tensor_fp16_bf16=989.4,
    tensor_fp8=1978.9, tensor_int8=1978.9,
)  # fmt: skip

_H100_SXM5 = GPU(
    "H100 SXM5", sms=132, shared_memory_per_sm=228 * 1024, copy_engines=3, link="PCIe 5.0 x16",
    link_bandwidth=_PCIE_X16[5], compute_capability=(9, 0), shared_memory_reserved=1024,
    aliases=("h100", "h100-sxm", "h100 sxm", "h100 80gb hbm3", "h100-sxm5-80gb"), **_PER_SM,
    flops=_H100_PEAKS, memory_bandwidth=3.35e12, memory_bytes=80 * 2**30, l2_bytes=50 * 2**20,
    sources={
        "sms": "NVIDIA H100 Tensor Core GPU Architecture whitepaper (132 SMs on SXM5)",
        "per-SM limits": _CUDA_TABLE + ", compute capability 9.0",
        "copy_engines": "published deviceQuery output of an NVIDIA H100 80GB HBM3 (CUDA 12.5): 'Yes with 3 copy"
                        " engine(s)'",
        "flops": "NVIDIA H100 Tensor Core GPU datasheet, SXM column; " + _NV_DENSE,
        "memory_bandwidth": "NVIDIA H100 datasheet, SXM: 3.35 TB/s HBM3",
    },
)  # fmt: skip


def _hopper(name: str, aliases: tuple[str, ...], sources: dict[str, str], **changes) -> GPU:
    """A GH100 part: the H100 SXM5 entry with its own name, aliases, sources and differences."""
    return replace(_H100_SXM5, name=name, aliases=aliases, sources=_H100_SXM5.sources | sources, **changes)


_A100_80GB = GPU(
    "A100-SXM4-80GB", sms=108, shared_memory_per_sm=164 * 1024, copy_engines=3, link="PCIe 4.0 x16",
    link_bandwidth=_PCIE_X16[4], compute_capability=(8, 0), shared_memory_reserved=1024,
    aliases=("a100", "a100-sxm4", "a100 sxm", "a100-sxm4-80gb", "a100 80gb"), **_PER_SM,
    flops=_peaks(vector_fp64=9.7, tensor_fp64=19.5, vector_fp32=19.5, tensor_tf32=156, tensor_fp16_bf16=312,
                 tensor_int8=624),
    memory_bandwidth=2.039e12, memory_bytes=80 * 2**30, l2_bytes=40 * 2**20, l2_bandwidth=5120 * 1.41e9,
    sources={
        "sms": "NVIDIA A100 Tensor Core GPU Architecture whitepaper (108 SMs)",
        "per-SM limits": _CUDA_TABLE + ", compute capability 8.0",
        "copy_engines": "published deviceQuery output of a 108-SM A100 (CUDA 12.0): 'Yes with 3 copy engine(s)'",
        "flops": "NVIDIA A100 Tensor Core GPU datasheet, 80GB SXM column; " + _NV_DENSE,
        "memory_bandwidth": "NVIDIA A100 datasheet, 80GB SXM: 2,039 GB/s HBM2e",
        "l2_bandwidth": "NVIDIA A100 Tensor Core GPU Architecture whitepaper: L2 read bandwidth 5120 bytes/clk,"
        " at the 1410 MHz boost clock",
    },
)  # fmt: skip

# AMD reports no per-CU block limits in deviceProperties; these are the trace's values where it has them
_AMD_CU = {"threads_per_sm": 2048, "blocks_per_sm": 32, "registers_per_sm": 65536,
           "shared_memory_per_sm": 64 * 1024}  # fmt: skip
_AMD_CU_SOURCE = "the MI250 trace's deviceProperties (2048 threads, 64 KiB LDS per CU); 32 blocks assumed"

KNOWN: tuple[GPU, ...] = (
    GPU(
        "GeForce GTX 950", sms=6, shared_memory_per_sm=96 * 1024, copy_engines=2, link="PCIe 3.0 x16",
        link_bandwidth=_PCIE_X16[3], copy_first_turn_ns=3.158e6, copy_turn_ns=1.05e6, compute_capability=(5, 2),
        aliases=("gtx950", "gtx 950"), **_PER_SM,
        sources={
            "sms": "NVIDIA GeForce GTX 950 specifications (768 CUDA cores, 6 SMM)",
            "per-SM limits": _CUDA_TABLE + ", compute capability 5.2",
            "copy_engines": "assumed 2, one per direction: no published deviceQuery of a GTX 950 was found to check it",
            "copy_first_turn_ns": "measured on this GPU by the trans_kernel_model study (2017): 3.158 ms",
            "copy_turn_ns": "fitted to that study's 5M-element 2- and 3-stream runs on this GPU (copy start and"
            " end times; not the files gpuan validates on): 1.05 ms",
        },
    ),
    GPU(
        "Quadro GP100", sms=56, shared_memory_per_sm=64 * 1024, copy_engines=2, link="PCIe 3.0 x16",
        link_bandwidth=_PCIE_X16[3], compute_capability=(6, 0), aliases=("gp100",), **_PER_SM,
        flops=_peaks(vector_fp64=5.2, vector_fp32=10.3, vector_fp16=20.7), memory_bandwidth=717e9,
        memory_bytes=16 * 2**30, l2_bytes=4 * 2**20,
        sources={
            "sms": "NVIDIA Quadro GP100 datasheet (3584 CUDA cores, 56 SMs)",
            "per-SM limits": _CUDA_TABLE + ", compute capability 6.0",
            "copy_engines": "assumed 2 (one per direction)",
            "flops": "NVIDIA Quadro GP100 datasheet (no tensor cores)",
            "memory_bandwidth": "NVIDIA Quadro GP100 datasheet: 717 GB/s HBM2",
        },
    ),
    GPU(
        "Tesla V100-SXM2", sms=80, shared_memory_per_sm=96 * 1024, copy_engines=6, link="PCIe 3.0 x16",
        link_bandwidth=_PCIE_X16[3], compute_capability=(7, 0), aliases=("v100",), **_PER_SM,
        flops=_peaks(vector_fp64=7.8, vector_fp32=15.7, tensor_fp16=125), memory_bandwidth=900e9,
        memory_bytes=32 * 2**30, l2_bytes=6 * 2**20,
        sources={
            "sms": "NVIDIA Tesla V100 datasheet (80 SMs)",
            "per-SM limits": _CUDA_TABLE + ", compute capability 7.0",
            "copy_engines": "published deviceQuery output of a Tesla V100-SXM2-16GB (CUDA 12.4): 'Yes with 6 copy"
                            " engine(s)'",
            "flops": "NVIDIA Tesla V100 datasheet, SXM2 column (tensor cores: FP16 only, no sparsity)",
            "memory_bandwidth": "NVIDIA Tesla V100 datasheet, SXM2: 900 GB/s HBM2",
        },
    ),
    _A100_80GB,
    replace(
        _A100_80GB, name="A100-SXM4-40GB", aliases=("a100-sxm4-40gb", "a100 40gb", "a100-pg509-200"),
        memory_bandwidth=1.555e12, memory_bytes=40 * 2**30,
        sources=_A100_80GB.sources | {"memory_bandwidth": "NVIDIA A100 datasheet, 40GB SXM: 1,555 GB/s HBM2"},
    ),  # fmt: skip
    _H100_SXM5,
    _hopper(
        "H100 PCIe", ("h100-pcie", "h100 pcie"), sms=114,
        flops=_peaks(vector_fp64=25.6, tensor_fp64=51.2, vector_fp32=51.2, tensor_tf32=378, tensor_fp16_bf16=756,
                     tensor_fp8=1513, tensor_int8=1513),
        memory_bandwidth=2.0e12,
        sources={"sms": "NVIDIA H100 Tensor Core GPU Architecture whitepaper (114 SMs on PCIe)",
                 "copy_engines": "as H100 SXM5",
                 "flops": "NVIDIA H100 Tensor Core GPU datasheet, PCIe column; " + _NV_DENSE,
                 "memory_bandwidth": "NVIDIA H100 datasheet, PCIe: 2.0 TB/s HBM2e"},
    ),
    _hopper(
        "H200", ("h200", "h200 sxm", "nvidia h200"), memory_bandwidth=4.8e12, memory_bytes=141 * 10**9,
        sources={"sms": "NVIDIA H200 datasheet (same GH100 configuration as H100 SXM5: 132 SMs)",
                 "copy_engines": "as H100 SXM5",
                 "flops": "NVIDIA H200 datasheet, SXM column; " + _NV_DENSE,
                 "memory_bandwidth": "NVIDIA H200 datasheet: 4.8 TB/s HBM3e"},
    ),
    _hopper(
        "GH200", ("gh200", "grace hopper"), link="NVLink-C2C", link_bandwidth=450e9, memory_bandwidth=4.0e12,
        memory_bytes=96 * 2**30,
        sources={"sms": "NVIDIA GH200 Grace Hopper Superchip datasheet (H100 with 132 SMs)",
                 "link_bandwidth": "GH200 datasheet: NVLink-C2C 900 GB/s total, 450 GB/s per direction",
                 "copy_engines": "as H100 SXM5",
                 "flops": "GH200 datasheet (the H100 SXM5 rates); " + _NV_DENSE,
                 "memory_bandwidth": "GH200 datasheet: 4 TB/s HBM3 (96 GB)"},
    ),
    GPU(
        "B200", sms=148, shared_memory_per_sm=228 * 1024, copy_engines=3, link="PCIe 6.0 x16",
        link_bandwidth=2 * _PCIE_X16[5], compute_capability=(10, 0), shared_memory_reserved=1024,
        aliases=("b200", "nvidia b200"), **_PER_SM,
        flops=_peaks(vector_fp64=37, vector_fp32=75, tensor_tf32=1100, tensor_fp16_bf16=2250, tensor_fp8=4500,
                     tensor_int8=4500),
        memory_bandwidth=7.7e12, memory_bytes=180 * 10**9,
        sources={"sms": "NVIDIA Blackwell architecture technical brief (148 SMs on B200)",
                 "per-SM limits": _CUDA_TABLE + ", compute capability 10.0",
                 "copy_engines": "assumed as H100 SXM5",
                 "flops": "NVIDIA DGX B200 / HGX B200 datasheet per GPU; " + _NV_DENSE,
                 "memory_bandwidth": "gpuan spec table (HGX B200: 7.7 TB/s per GPU)"},
    ),
    GPU(
        "L40S", sms=142, shared_memory_per_sm=100 * 1024, copy_engines=2, link="PCIe 4.0 x16",
        link_bandwidth=_PCIE_X16[4], compute_capability=(8, 9), shared_memory_reserved=1024,
        threads_per_sm=1536, blocks_per_sm=24, registers_per_sm=65536, aliases=("l40s", "nvidia l40s"),
        flops=_peaks(vector_fp32=91.6, tensor_tf32=183, tensor_fp16_bf16=362, tensor_fp8=733, tensor_int8=733),
        memory_bandwidth=864e9, memory_bytes=48 * 2**30, l2_bytes=96 * 2**20,
        sources={"sms": "NVIDIA L40S datasheet (142 third-generation RT cores / SMs)",
                 "per-SM limits": _CUDA_TABLE + ", compute capability 8.9",
                 "copy_engines": "assumed 2 (one per direction)",
                 "flops": "NVIDIA L40S datasheet; " + _NV_DENSE,
                 "memory_bandwidth": "NVIDIA L40S datasheet: 864 GB/s GDDR6"},
    ),
    GPU(
        "MI250 GCD / MI210", sms=104, copy_engines=2, link="PCIe 4.0 x16", link_bandwidth=_PCIE_X16[4],
        compute_capability=(9, 0), aliases=("mi250", "mi250x gcd", "mi210", "gfx90a"), **_AMD_CU,
        flops=_peaks(vector_fp64=22.6, tensor_fp64=45.3, vector_fp32=22.6, tensor_fp32=45.3,
                     tensor_fp16_bf16=181.0, tensor_int8=181.0),
        memory_bandwidth=1.6384e12, memory_bytes=64 * 2**30, l2_bytes=8 * 2**20,
        sources={"sms": "AMD Instinct MI210 datasheet (104 CUs; one MI250 GCD is the same part)",
                 "per-SM limits": _AMD_CU_SOURCE, "copy_engines": "assumed 2 (one per direction)",
                 "flops": "AMD Instinct MI210 datasheet (= MI250 datasheet halved per GCD); matrix cores as"
                 " 'tensor', no sparsity",
                 "memory_bandwidth": "AMD Instinct MI210 datasheet: 1.6384 TB/s HBM2e"},
    ),
    GPU(
        "MI300X", sms=304, copy_engines=2, link="PCIe 5.0 x16", link_bandwidth=_PCIE_X16[5],
        compute_capability=(9, 4), aliases=("mi300x", "gfx942"), **_AMD_CU,
        flops=_peaks(vector_fp64=81.7, tensor_fp64=163.4, vector_fp32=163.4, tensor_fp32=163.4, tensor_tf32=653.7,
                     tensor_fp16_bf16=1307.4, tensor_fp8=2614.9, tensor_int8=2614.9),
        memory_bandwidth=5.3e12, memory_bytes=192 * 2**30, l2_bytes=256 * 2**20,
        sources={"sms": "AMD Instinct MI300X datasheet (304 CUs)", "per-SM limits": _AMD_CU_SOURCE,
                 "copy_engines": "assumed 2 (one per direction)",
                 "flops": "AMD Instinct MI300X datasheet, dense (the 'with sparsity' values halved)",
                 "memory_bandwidth": "AMD Instinct MI300X datasheet: 5.3 TB/s HBM3",
                 "l2_bytes": "256 MB AMD Infinity Cache"},
    ),
)  # fmt: skip

#: device names too generic to identify a part ("AMD Radeon Graphics" is what ROCm reports for Instinct
#: GPUs): the part is then identified by its CU count and memory size
_GENERIC_NAMES = ("amd radeon graphics", "amd instinct", "")


def _key(name: str) -> str:
    name = name.lower().replace("nvidia", "").replace("geforce", "").replace("tesla", "")
    return re.sub(r"[\s_]+", " ", name).strip(" -")


def names() -> list[str]:
    """Return the names of the known GPUs, as ``--device`` accepts them."""
    return [g.name for g in KNOWN]


def find(name: str) -> GPU | None:
    """Return the known GPU whose name or alias matches `name` (case and vendor words ignored), the longest
    match if several do, or None."""
    key = _key(name)
    best: tuple[int, GPU] | None = None
    for gpu in KNOWN:
        for alias in (gpu.name, *gpu.aliases):
            a = _key(alias)
            if key == a:
                return gpu
            if a and (key.startswith(a) or a in key) and (best is None or len(a) > best[0]):
                best = (len(a), gpu)
    return best[1] if best else None


def lookup(name: str, source: str = "--device") -> GPU:
    """Return the known GPU called `name`; raises :class:`TraceError` listing the known ones otherwise."""
    gpu = find(name)
    if gpu is None:
        raise TraceError(source, f"unknown device {name!r}; known devices: {', '.join(names())}")
    return gpu


def _identify(props: dict[str, Any]) -> GPU | None:
    """Return the known GPU a deviceProperties entry names. Parts that differ only in memory (A100 40GB and
    80GB, H100 and H200) are told apart by ``totalGlobalMem``; a generic name by CU count and memory."""
    name, sms = str(props.get("name", "")), props.get("numSms")
    memory = props.get("totalGlobalMem") or 0
    if _key(name) in _GENERIC_NAMES:
        candidates = [g for g in KNOWN if g.sms == sms and g.memory_bytes]
    else:
        base = find(name)
        if base is None or not memory:
            return base
        same_compute = (base.sms, base.compute_capability, base.flops)
        candidates = [g for g in KNOWN if (g.sms, g.compute_capability, g.flops) == same_compute and g.memory_bytes]
    if not candidates:
        return None
    return min(candidates, key=lambda g: abs(g.memory_bytes - memory))


def from_properties(props: dict[str, Any], source: str) -> GPU:
    """Return the GPU a trace's ``deviceProperties`` entry describes: the table's entry for its name, with
    the SM count and per-SM limits the trace recorded (they describe the exact part that ran). Raises
    :class:`TraceError` if the name is unknown and the entry lacks the limits to stand on its own."""
    base = _identify(props)
    recorded = {
        "sms": props.get("numSms"),
        "threads_per_sm": props.get("maxThreadsPerMultiprocessor"),
        "registers_per_sm": props.get("regsPerMultiprocessor"),
        "shared_memory_per_sm": props.get("sharedMemPerMultiprocessor")
        or props.get("maxSharedMemoryPerMultiProcessor"),
    }
    recorded = {k: int(v) for k, v in recorded.items() if isinstance(v, (int, float)) and v > 0}
    if base is None:
        if len(recorded) < 4:
            raise TraceError(
                source,
                f"unknown device {props.get('name')!r} and its deviceProperties lack SM limits; "
                f"pass --device, one of: {', '.join(names())}",
            )
        major, minor = int(props.get("computeMajor", 0)), int(props.get("computeMinor", 0))
        base = GPU(
            str(props.get("name")), blocks_per_sm=32, copy_engines=2, link="PCIe (unknown generation)",
            link_bandwidth=_PCIE_X16[4], compute_capability=(major, minor), **recorded,
            sources={"per-SM limits": "the trace's deviceProperties", "blocks_per_sm": "assumed 32",
                     "copy_engines": "assumed 2 (one per direction)"},
        )  # fmt: skip
        return base
    changed = {k: v for k, v in recorded.items() if getattr(base, k) != v}
    if not changed:
        return base
    sources = dict(base.sources) | {k: "the trace's deviceProperties" for k in changed}
    return replace(base, sources=sources, **changed)


def of_trace(metadata: dict[str, Any], source: str, device: int = 0) -> GPU | None:
    """Return the GPU a trace recorded for `device` (``deviceProperties``), or None if it recorded none."""
    props = [p for p in metadata.get("device_properties") or [] if isinstance(p, dict)]
    if not props:
        return None
    entry = next((p for p in props if p.get("id") == device), props[0])
    return from_properties(entry, source)
