"""The GPUs gpuan knows: per-SM resource limits, copy engines, host link, and the dense peak arithmetic
rates, memory bandwidth and last-level cache, each with its source (the tables are in
:mod:`gpuan.devices.nvidia` and :mod:`gpuan.devices.amd`).

Analyses that need hardware facts (stream-overlap prediction, roofline scoring) take a :class:`GPU` from
here, found by name (``--gpu``) or from a trace's ``deviceProperties``; a trace's own properties
override the table's SM count and per-SM limits, because they describe the exact part that ran.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import replace
from typing import Any

from gpuan.devices import amd, nvidia
from gpuan.devices.model import GPU, PCIE_X16
from gpuan.errors import TraceError, UsageError

__all__ = ["GPU", "KNOWN", "find", "from_properties", "lookup", "names", "nearest", "of_trace", "suggestion"]

KNOWN: tuple[GPU, ...] = nvidia.KNOWN + amd.KNOWN

#: device names too generic to identify a part ("AMD Radeon Graphics" is what ROCm reports for Instinct
#: GPUs): the part is then identified by its CU count, compute capability and memory size
_GENERIC_NAMES = ("amd radeon graphics", "amd instinct", "")
_VENDOR_WORDS = re.compile(r"\b(nvidia|geforce|tesla)\b")


def _key(name: str) -> str:
    name = _VENDOR_WORDS.sub("", name.lower())
    return re.sub(r"[\s_]+", " ", name).strip(" -")


def _contains(key: str, alias: str) -> bool:
    """Whether `alias` occurs in `key` as whole words ("h20" is not in "h200", "l4" not in "l40s")."""
    return re.search(rf"(?<![a-z0-9]){re.escape(alias)}(?![a-z0-9])", key) is not None


def names() -> list[str]:
    """Return the names of the known GPUs, as ``--gpu`` accepts them."""
    return [g.name for g in KNOWN]


def find(name: str) -> GPU | None:
    """Return the known GPU whose name or alias matches `name` (case and vendor words ignored), the longest
    alias found in it as whole words if none matches exactly, or None."""
    key = _key(name)
    best: tuple[int, GPU] | None = None
    for gpu in KNOWN:
        for alias in (gpu.name, *gpu.aliases):
            a = _key(alias)
            if key == a:
                return gpu
            if a and _contains(key, a) and (best is None or len(a) > best[0]):
                best = (len(a), gpu)
    return best[1] if best else None


def _vendor_of(name: str) -> str:
    return "AMD" if re.search(r"\b(amd|radeon|instinct|mi\d{3}|gfx\d+)", name.lower()) else "NVIDIA"


def _segment_of(name: str) -> str:
    key = name.lower()
    if re.search(r"geforce|\b(rtx|gtx) ?\d{4}\b|\brx ?\d{4}", key):
        return "GeForce"
    if re.search(r"\b(rtx|quadro|radeon pro|titan)\b", key):
        return "workstation"
    return "data centre"


def nearest(name: str, compute_capability: tuple[int, int] | None = None, sms: int | None = None) -> GPU:
    """Return the known GPU with peak rates nearest to a part gpuan does not know: same vendor, then the
    same (or nearest) compute capability / gfx target, then the same market segment (data centre,
    workstation, GeForce), then the closest SM count; by name likeness where only a name is known."""
    rated = [g for g in KNOWN if g.flops and g.memory_bandwidth]
    vendor, segment = _vendor_of(name), _segment_of(name)
    if compute_capability is None and sms is None:
        by_name = _close_names(name)
        if by_name:
            return by_name[0]

    def distance(g: GPU) -> tuple:
        cc_gap = (
            abs((g.compute_capability[0] * 10 + g.compute_capability[1]) - (cc[0] * 10 + cc[1]))
            if (cc := compute_capability)
            else 0
        )
        sm_gap = abs(math.log(g.sms / sms)) if sms else 0.0
        return (g.vendor != vendor, cc_gap, g.segment != segment, sm_gap)

    return min(rated, key=distance)


def _close_names(name: str, n: int = 3) -> list[GPU]:
    """Return up to `n` known GPUs whose names or aliases look most like `name`, best first."""
    by_alias = {_key(a): g for g in KNOWN for a in (g.name, *g.aliases)}
    out: list[GPU] = []
    for alias in difflib.get_close_matches(_key(name), list(by_alias), n=4 * n, cutoff=0.5):
        if by_alias[alias] not in out:
            out.append(by_alias[alias])
    return out[:n]


def suggestion(gpu: GPU) -> str:
    """Return the ``--gpu`` a part without peak rates may be scored as, and why it is the nearest."""
    near = nearest(gpu.name, gpu.compute_capability, gpu.sms)
    cc = ".".join(map(str, near.compute_capability))
    why = f"{near.vendor} {near.arch} {near.segment}, compute capability {cc}, {near.sms} SMs"
    return f'--gpu "{near.name}" (nearest known: {why})'


def lookup(name: str, source: str = "--gpu") -> GPU:
    """Return the known GPU called `name`; raises :class:`UsageError` (a bad option value, given by
    `source`) naming the closest known names (and listing all) otherwise."""
    gpu = find(name)
    if gpu is None:
        close = _close_names(name) or [nearest(name)]
        raise UsageError(
            f"{source}: unknown device {name!r}; closest known: {', '.join(g.name for g in close)}; "
            f"known devices: {', '.join(names())}"
        )
    return gpu


def _identify(props: dict[str, Any]) -> GPU | None:
    """Return the known GPU a deviceProperties entry names. Parts that differ only in memory (A100 40/80GB,
    H100/H200/GH200) are told apart by ``totalGlobalMem``, the named part winning a tie; a generic name by
    CU count, compute capability and memory."""
    name, sms = str(props.get("name", "")), props.get("numSms")
    memory = props.get("totalGlobalMem") or 0
    cc = (props.get("computeMajor"), props.get("computeMinor"))
    if _key(name) in _GENERIC_NAMES:
        base = None
        candidates = [
            g for g in KNOWN if g.sms == sms and g.memory_bytes and (None in cc or g.compute_capability == cc)
        ]
    else:
        base = find(name)
        if base is None or not memory:
            return base
        same_compute = (base.sms, base.compute_capability, base.flops)
        candidates = [g for g in KNOWN if (g.sms, g.compute_capability, g.flops) == same_compute and g.memory_bytes]
    if not candidates:
        return base
    return min(candidates, key=lambda g: (abs(g.memory_bytes - memory), g is not base))


def from_properties(props: dict[str, Any], source: str) -> GPU:
    """Return the GPU a trace's ``deviceProperties`` entry describes: the table's entry for its name, with
    the SM count and per-SM limits the trace recorded (they describe the exact part that ran). An unknown
    part with all four limits recorded stands on its own, without peak rates; raises :class:`TraceError`
    naming the nearest known device if it lacks them."""
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
        major, minor = props.get("computeMajor"), props.get("computeMinor")
        cc = (int(major), int(minor)) if isinstance(major, int) and isinstance(minor, int) else None
        name = str(props.get("name"))
        assumed = {"blocks_per_sm": "assumed 32"}
        if _vendor_of(name) == "AMD" and "registers_per_sm" not in recorded:
            # ROCm never records a per-CU register count, and its kernels record no registers to fit
            recorded["registers_per_sm"] = 65536
            assumed["registers_per_sm"] = "assumed 65,536 (ROCm reports no per-CU register count)"
        if len(recorded) < 4:
            near = nearest(name, cc, recorded.get("sms"))
            raise TraceError(
                source,
                f"unknown device {props.get('name')!r} and its deviceProperties lack SM limits; pass "
                f'--gpu "{near.name}" (the nearest known) or another of: {", ".join(names())}',
            )
        return GPU(
            name, blocks_per_sm=32, copy_engines=2, link="PCIe (unknown generation)",
            link_bandwidth=PCIE_X16[4], compute_capability=cc or (0, 0), vendor=_vendor_of(name),
            segment=_segment_of(name), **recorded,
            sources={"per-SM limits": "the trace's deviceProperties", "copy_engines": "assumed 2 (one per direction)"}
            | assumed,
        )  # fmt: skip
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
