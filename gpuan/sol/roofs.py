"""The roofs an op is scored against: peak arithmetic rates per (unit, dtype) and memory bandwidth, from the
datasheet table (:mod:`gpuan.devices`) or measured by ``gpuan sol calibrate`` and saved in the ceilings file.
Scoring is handed that file loaded (a :class:`gpuan.devices.model.Ceilings`, read by the command, the
live tracker or the caller), like its trace: it reads no file and no environment variable itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuan import devices
from gpuan.devices.model import CPU, Ceilings
from gpuan.errors import TraceError, UsageError
from gpuan.sol.costs import MATRIX_CATEGORIES


@dataclass(frozen=True)
class Roofs:
    """``flops``: FLOP/s keyed "unit:dtype"; bandwidths in bytes/s; ``kind``: "datasheet" or "measured"."""

    device: str
    flops: dict[str, float]
    memory_bandwidth: float
    link_bandwidth: float
    kind: str
    sources: dict[str, str] = field(default_factory=dict)
    #: an op whose bytes fit in L2 (``l2_bytes``) may be served at ``l2_bandwidth``; 0 where unknown
    l2_bytes: int = 0
    l2_bandwidth: float = 0.0


def datasheet(gpu: devices.GPU, source: str | None = None) -> Roofs:
    """Return the datasheet roofs of a known GPU; an error saying how to go on (calibrate it, or score it as
    the nearest known device) if the table has no rates for it: a :class:`TraceError` naming `source`, the
    trace that recorded the GPU, or a :class:`UsageError` where the user named it (`source` None)."""
    if not gpu.flops or not gpu.memory_bandwidth:
        problem = (
            f"no peak rates for {gpu.name}; run `gpuan sol calibrate` on that GPU and score with --ceilings"
            f" measured, or pass {devices.suggestion(gpu)}"
        )
        raise UsageError(f"--gpu: {problem}") if source is None else TraceError(source, problem)
    keys = ("flops", "memory_bandwidth", "link_bandwidth", "l2_bandwidth")
    sources = {k: v for k, v in gpu.sources.items() if k in keys}
    l2 = (gpu.l2_bytes, gpu.l2_bandwidth) if gpu.l2_bandwidth else (0, 0.0)
    return Roofs(gpu.name, dict(gpu.flops), gpu.memory_bandwidth, gpu.link_bandwidth, "datasheet", sources, *l2)


def measured(device: str, base: Roofs | None, ceilings: Ceilings) -> Roofs:
    """Return the calibrated roofs of `device` from the loaded `ceilings` file; rates the calibration did
    not measure keep the datasheet value of `base`. A :class:`UsageError` naming the command to run if it
    was never calibrated."""
    saved = ceilings.by_device.get(device)
    if not saved:
        hint = "gpuan sol calibrate --cpu" if device == CPU else "gpuan sol calibrate (on that GPU)"
        where = ceilings.path or ceilings.named_by
        raise UsageError(f"no measured ceilings for {device!r} in {where}; run {hint}")
    flops = dict(base.flops if base else {}) | {k: float(v) for k, v in saved.get("flops", {}).items()}
    bandwidth = float(saved.get("memory_bandwidth") or (base.memory_bandwidth if base else 0))
    link = float(saved.get("link_bandwidth") or (base.link_bandwidth if base else bandwidth))
    if not flops or not bandwidth:
        raise UsageError(f"{ceilings.named_by}: the ceilings saved for {device!r} lack FLOP rates or bandwidth")
    how = f"measured by gpuan sol calibrate on {saved.get('measured_at', '?')}"
    l2 = (base.l2_bytes, base.l2_bandwidth) if base else (0, 0.0)
    if saved.get("l2_bandwidth"):
        l2 = (int(saved["l2_bytes"]), float(saved["l2_bandwidth"]))
    return Roofs(device, flops, bandwidth, link, "measured", {"flops": how, "memory_bandwidth": how}, *l2)


def roofs_for(
    metadata: dict[str, Any],
    source: str,
    *,
    gpu: str | None = None,
    cpu: bool = False,
    ceilings: str | Ceilings = "datasheet",
) -> Roofs:
    """Return the roofs to score a trace (its `metadata`, read from `source`) against: the GPU named `gpu`
    (``--gpu``), this machine's calibrated CPU (`cpu`, ``--cpu``), else the GPU the trace recorded;
    `ceilings` "datasheet" for the datasheet peaks, or the loaded ceilings file to score against what
    ``gpuan sol calibrate`` measured (see :func:`measured`; `cpu` needs them)."""
    if not isinstance(ceilings, Ceilings) and ceilings != "datasheet":
        raise UsageError(
            f'ceilings={ceilings!r}: use "datasheet", or the loaded ceilings file for measured roofs: '
            "ceilings=gpuan.devices.ceilings.read_ceilings()"
        )
    if gpu is not None and cpu:
        raise UsageError("--gpu and --cpu: score against one of them, not both")
    if gpu is not None and gpu.strip().lower() == CPU:
        raise UsageError("--gpu cpu: a CPU is not a GPU; pass --cpu to score against this machine's calibrated CPU")
    if cpu:
        if not isinstance(ceilings, Ceilings):
            raise UsageError(
                "cpu=True scores against this machine's measured ceilings: pass "
                "ceilings=gpuan.devices.ceilings.read_ceilings() (after `gpuan sol calibrate --cpu`)"
            )
        return measured(CPU, None, ceilings)
    if gpu is not None:
        known, named = devices.lookup(gpu), None
    else:
        known, named = devices.of_trace(metadata, source), source
        if known is None:
            raise TraceError(
                source,
                f"the trace records no device; pass --gpu, one of: {', '.join(devices.names())}; "
                "or --cpu for this machine's calibrated CPU",
            )
    if isinstance(ceilings, Ceilings):
        # a part the table has no rates for is scored on its calibrated ceilings alone
        base = datasheet(known, named) if known.flops and known.memory_bandwidth else None
        return measured(known.name, base, ceilings)
    return datasheet(known, named)


def peak_key(roofs: Roofs, category: str, dtype: str, tf32: bool = False) -> str | None:
    """Return the ``flops`` key an op's arithmetic is bounded by: tensor (matrix) cores for GEMM,
    convolution and attention in 16-bit, 8-bit and TF32 (and FP32/FP64 where the part has FP32/FP64 matrix
    units), the vector unit otherwise; None if the device has no rate for the dtype."""
    if category in MATRIX_CATEGORIES:
        candidates = {
            "fp16": ["tensor:fp16"],
            "bf16": ["tensor:bf16", "tensor:fp16"],
            "fp8": ["tensor:fp8", "tensor:fp16"],
            "int8": ["tensor:int8"],
            # PyTorch runs FP32 convolutions on TF32 by default (torch.backends.cudnn.allow_tf32)
            "fp32": (["tensor:tf32"] if tf32 or category == "conv" else []) + ["tensor:fp32", "vector:fp32"],
            "fp64": ["tensor:fp64", "vector:fp64"],
        }.get(dtype, ["vector:fp32"])
        candidates = candidates + ["vector:" + dtype, "vector:fp32"]
    else:
        candidates = ["vector:fp64"] if dtype == "fp64" else ["vector:fp32"]
    return next((k for k in candidates if k in roofs.flops), None)
