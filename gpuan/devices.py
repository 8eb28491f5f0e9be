"""The GPUs gpuan knows: per-SM resource limits, copy engines and host link, each with its source.

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


_PCIE_X16 = {3: 15.75e9, 4: 31.5e9, 5: 63.0e9}  # per direction, after 128b/130b encoding
_CUDA_TABLE = "CUDA C Programming Guide, table 'Technical Specifications per Compute Capability'"

# Every GPU here (compute capability 5.2 to 9.0) has 2048 threads, 32 blocks and 64K registers per SM.
_PER_SM = {"threads_per_sm": 2048, "blocks_per_sm": 32, "registers_per_sm": 65536}

_H100_SXM5 = GPU(
    "H100 SXM5", sms=132, shared_memory_per_sm=228 * 1024, copy_engines=3, link="PCIe 5.0 x16",
    link_bandwidth=_PCIE_X16[5], compute_capability=(9, 0), shared_memory_reserved=1024,
    aliases=("h100", "h100-sxm", "h100 80gb hbm3", "h100-sxm5-80gb"), **_PER_SM,
    sources={
        "sms": "NVIDIA H100 Tensor Core GPU Architecture whitepaper (132 SMs on SXM5)",
        "per-SM limits": _CUDA_TABLE + ", compute capability 9.0",
        "copy_engines": "deviceQuery asyncEngineCount on H100 SXM5",
    },
)  # fmt: skip


def _hopper(name: str, aliases: tuple[str, ...], sources: dict[str, str], **changes) -> GPU:
    """A GH100 part: the H100 SXM5 entry with its own name, aliases, sources and differences."""
    return replace(_H100_SXM5, name=name, aliases=aliases, sources=_H100_SXM5.sources | sources, **changes)


KNOWN: tuple[GPU, ...] = (
    GPU(
        "GeForce GTX 950", sms=6, shared_memory_per_sm=96 * 1024, copy_engines=2, link="PCIe 3.0 x16",
        link_bandwidth=_PCIE_X16[3], copy_first_turn_ns=3.158e6, copy_turn_ns=1.05e6, compute_capability=(5, 2),
        aliases=("gtx950", "gtx 950"), **_PER_SM,
        sources={
            "sms": "NVIDIA GeForce GTX 950 specifications (768 CUDA cores, 6 SMM)",
            "per-SM limits": _CUDA_TABLE + ", compute capability 5.2",
            "copy_engines": "deviceQuery asyncEngineCount on GM206",
            "copy_first_turn_ns": "measured on this GPU by the trans_kernel_model study (2017): 3.158 ms",
            "copy_turn_ns": "fitted to that study's 5M-element 2- and 3-stream runs on this GPU (copy start and"
            " end times; not the files gpuan validates on): 1.05 ms",
        },
    ),
    GPU(
        "Tesla V100-SXM2", sms=80, shared_memory_per_sm=96 * 1024, copy_engines=6, link="PCIe 3.0 x16",
        link_bandwidth=_PCIE_X16[3], compute_capability=(7, 0), aliases=("v100",), **_PER_SM,
        sources={
            "sms": "NVIDIA Tesla V100 datasheet (80 SMs)",
            "per-SM limits": _CUDA_TABLE + ", compute capability 7.0",
            "copy_engines": "deviceQuery asyncEngineCount on V100-SXM2",
        },
    ),
    GPU(
        "A100-SXM4", sms=108, shared_memory_per_sm=164 * 1024, copy_engines=3, link="PCIe 4.0 x16",
        link_bandwidth=_PCIE_X16[4], compute_capability=(8, 0), shared_memory_reserved=1024,
        aliases=("a100", "a100-pg509-200", "a100-sxm4-40gb", "a100-sxm4-80gb"), **_PER_SM,
        sources={
            "sms": "NVIDIA A100 Tensor Core GPU Architecture whitepaper (108 SMs)",
            "per-SM limits": _CUDA_TABLE + ", compute capability 8.0",
            "copy_engines": "deviceQuery asyncEngineCount on A100-SXM4",
        },
    ),
    _H100_SXM5,
    _hopper(
        "H100 PCIe", ("h100-pcie", "h100 pcie"), sms=114,
        sources={"sms": "NVIDIA H100 Tensor Core GPU Architecture whitepaper (114 SMs on PCIe)",
                 "copy_engines": "as H100 SXM5"},
    ),
    _hopper(
        "H200", ("h200", "h200 sxm", "nvidia h200"),
        sources={"sms": "NVIDIA H200 datasheet (same GH100 configuration as H100 SXM5: 132 SMs)",
                 "copy_engines": "as H100 SXM5"},
    ),
    _hopper(
        "GH200", ("gh200", "grace hopper"), link="NVLink-C2C", link_bandwidth=450e9,
        sources={"sms": "NVIDIA GH200 Grace Hopper Superchip datasheet (H100 with 132 SMs)",
                 "link_bandwidth": "GH200 datasheet: NVLink-C2C 900 GB/s total, 450 GB/s per direction",
                 "copy_engines": "as H100 SXM5"},
    ),
)  # fmt: skip


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


def from_properties(props: dict[str, Any], source: str) -> GPU:
    """Return the GPU a trace's ``deviceProperties`` entry describes: the table's entry for its name, with
    the SM count and per-SM limits the trace recorded (they describe the exact part that ran). Raises
    :class:`TraceError` if the name is unknown and the entry lacks the limits to stand on its own."""
    base = find(str(props.get("name", "")))
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
