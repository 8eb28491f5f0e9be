"""The roofs an op is scored against: peak arithmetic rates per (unit, dtype) and memory bandwidth, from the
datasheet table (:mod:`gpuan.devices`) or measured by ``gpuan sol calibrate`` and saved in a ceilings file.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuan import devices
from gpuan.errors import TraceError
from gpuan.sol.costs import MATRIX_CATEGORIES

#: the device name under which ``gpuan sol calibrate --cpu`` saves this machine's CPU ceilings
CPU = "cpu"


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


def ceilings_path() -> Path:
    """Return where calibrated ceilings are kept: ``$GPUAN_CEILINGS`` or ``~/.cache/gpuan/ceilings.json``."""
    env = os.environ.get("GPUAN_CEILINGS")
    return Path(env) if env else Path.home() / ".cache" / "gpuan" / "ceilings.json"


def read_ceilings(path: str | os.PathLike | None = None) -> dict[str, Any]:
    """Return the saved ceilings, by device name ({} if there is no file yet)."""
    path = Path(path) if path else ceilings_path()
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise TraceError(str(path), f"not a ceilings file ({e})") from None
    if not isinstance(data, dict):
        raise TraceError(str(path), "not a ceilings file (expected an object keyed by device)")
    return data


def datasheet(gpu: devices.GPU, source: str) -> Roofs:
    """Return the datasheet roofs of a known GPU; an error saying how to go on (calibrate it, or score it as
    the nearest known device) if the table has no rates for it."""
    if not gpu.flops or not gpu.memory_bandwidth:
        raise TraceError(
            source,
            f"no peak rates for {gpu.name}; run `gpuan sol calibrate` on that GPU and score with --ceilings"
            f" measured, or pass {devices.suggestion(gpu)}",
        )
    keys = ("flops", "memory_bandwidth", "link_bandwidth", "l2_bandwidth")
    sources = {k: v for k, v in gpu.sources.items() if k in keys}
    l2 = (gpu.l2_bytes, gpu.l2_bandwidth) if gpu.l2_bandwidth else (0, 0.0)
    return Roofs(gpu.name, dict(gpu.flops), gpu.memory_bandwidth, gpu.link_bandwidth, "datasheet", sources, *l2)


def measured(device: str, base: Roofs | None, path: str | os.PathLike | None, source: str) -> Roofs:
    """Return the calibrated roofs of `device` (rates the calibration did not measure keep the datasheet
    value of `base`); an error naming the command to run if it was never calibrated."""
    saved = read_ceilings(path).get(device)
    if not saved:
        where = path or ceilings_path()
        hint = "gpuan sol calibrate --cpu" if device == CPU else "gpuan sol calibrate (on that GPU)"
        raise TraceError(source, f"no measured ceilings for {device!r} in {where}; run {hint}")
    flops = dict(base.flops if base else {}) | {k: float(v) for k, v in saved.get("flops", {}).items()}
    bandwidth = float(saved.get("memory_bandwidth") or (base.memory_bandwidth if base else 0))
    link = float(saved.get("link_bandwidth") or (base.link_bandwidth if base else bandwidth))
    if not flops or not bandwidth:
        raise TraceError(source, f"the ceilings saved for {device!r} lack FLOP rates or bandwidth")
    how = f"measured by gpuan sol calibrate on {saved.get('measured_at', '?')}"
    l2 = (base.l2_bytes, base.l2_bandwidth) if base else (0, 0.0)
    if saved.get("l2_bandwidth"):
        l2 = (int(saved["l2_bytes"]), float(saved["l2_bandwidth"]))
    return Roofs(device, flops, bandwidth, link, "measured", {"flops": how, "memory_bandwidth": how}, *l2)


def roofs_for(metadata: dict, device: str | None, ceilings: str, path: str | None, source: str) -> Roofs:
    """Return the roofs to score a trace against: `device` by name (``--device``; "cpu" for this machine's
    calibrated CPU), else the GPU the trace recorded; ``ceilings`` "datasheet" or "measured"."""
    if device is not None and device.lower() == CPU:
        return measured(CPU, None, path, "--device")
    if device is not None:
        gpu = devices.lookup(device)
    else:
        gpu = devices.of_trace(metadata, source)
        if gpu is None:
            raise TraceError(
                source,
                "the trace records no device; pass --device, one of: " + ", ".join([*devices.names(), CPU]),
            )
    if ceilings == "measured":
        # a part the table has no rates for is scored on its calibrated ceilings alone
        base = datasheet(gpu, source) if gpu.flops and gpu.memory_bandwidth else None
        return measured(gpu.name, base, path, source)
    return datasheet(gpu, source)


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
