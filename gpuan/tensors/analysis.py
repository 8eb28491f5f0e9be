"""``gpuan tensors`` as a function: :func:`analyse` makes one pass over the log (:mod:`gpuan.tensors.scan`) and
returns the tables (:mod:`gpuan.tensors.tables`) and a summary holding the checks (:mod:`gpuan.tensors.checks`)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import pyarrow as pa

from gpuan.engine import Engine, resolve
from gpuan.result import Result
from gpuan.tensors.buffers import in_use, per_buffer
from gpuan.tensors.checks import run_checks
from gpuan.tensors.scan import Options, Scanned, scan
from gpuan.tensors.tables import build, file_share_for, never_touched, views
from gpuan.trace.inputs import TensorInputs

#: the tables of the report, in the order they are written (with ``buffers`` and ``buffer_memory`` after
#: them when buffer events were given)
REPORT_TABLES = (
    "tensors",
    "intermediates",
    "layers",
    "components",
    "experts",
    "expert_reuse",
    "tokens",
    "token_layer",
    "hot_curve",
    "threads",
    "ops",
)


#: the shares of the accesses at which the summary reads the hot/cold curve
HOT_ACCESS_SHARES = (0.5, 0.9, 0.99)


def _finite(value: float) -> float | None:
    """`value` as a float, None where it is NaN (the summary is JSON)."""
    return float(value) if math.isfinite(value) else None


def _hot_cold(curve: pd.DataFrame) -> dict[str, float | None]:
    """The points of the hot/cold curve the report names: the share of the file whose hottest units take
    50, 90 and 99 % of the accesses (None without accesses)."""
    counted = bool(len(curve) and curve["accesses"].sum())
    return {
        f"file_share_at_{round(share * 100)}": _finite(file_share_for(curve, share)) if counted else None
        for share in HOT_ACCESS_SHARES
    }


def _experts(experts: pd.DataFrame, reuse: pd.DataFrame) -> dict[str, Any]:
    """The MoE numbers of the report: layers with experts, experts per layer, the hottest expert (its
    ``layer``, ``expert`` and ``share`` of its layer's accesses) and the mean reuse between consecutive
    tokens; 0 and None for a dense model."""
    if not len(experts):
        return {"expert_layers": 0, "experts_per_layer": 0, "hottest_expert": None, "expert_reuse": None}
    hot = experts.sort_values("accesses", ascending=False).iloc[0]
    return {
        "expert_layers": int(experts["layer"].nunique()),
        "experts_per_layer": int(experts["expert"].nunique()),
        "hottest_expert": {"layer": int(hot["layer"]), "expert": int(hot["expert"]), "share": float(hot["share"])},
        "expert_reuse": _finite(reuse["reuse"].mean()),
    }


def _summary(scanned: Scanned, frames: dict[str, pd.DataFrame], checks: list[dict]) -> dict[str, Any]:
    """The numbers the report shows above its tables, as plain Python values."""
    log, model, tensors, inter = scanned.log, scanned.model, frames["tensors"], frames["intermediates"]
    return {
        "log": log.path,
        "log_format": log.format,
        "entries": log.entries,
        "capacity": log.capacity,
        "overflow": log.overflow,
        "accesses": scanned.accesses,
        "engine": scanned.engine,
        "model": model.path,
        "architecture": model.architecture,
        "model_tensors": len(model.tensors),
        "file_bytes": model.file_bytes,
        "data_start": model.data_start,
        "data_bytes": model.data_bytes,
        "alignment": model.alignment,
        "start_ns": scanned.t0,
        "span_ns": scanned.t1 - scanned.t0,
        "tokens": len(frames["tokens"]),
        "threads": len(frames["threads"]),
        "weight_accesses": int(tensors["accesses"].sum()),
        "weight_bytes": int(tensors["bytes_accessed"].sum()),
        "intermediate_accesses": int(inter["accesses"].sum()),
        "intermediate_bytes": int(inter["bytes_accessed"].sum()),
        "never_touched_bytes": never_touched(scanned),
        **_hot_cold(frames["hot_curve"]),
        **_experts(frames["experts"], frames["expert_reuse"]),
        "page_bytes": scanned.options.page_bytes,
        "time_bins": scanned.options.time_bins,
        "offset_bins": scanned.options.offset_bins,
        "max_points": scanned.options.max_points,
        "token_layer_shape": [int(n) for n in scanned.token_layer.shape],
        "checks": checks,
    }


def analyse(
    inputs: TensorInputs,
    *,
    engine: Engine | str | None = None,
    window_entries: int = Options.window_entries,
    max_points: int = Options.max_points,
    time_bins: int = Options.time_bins,
    offset_bins: int = Options.offset_bins,
    page_bytes: int = Options.page_bytes,
    gap_ns: int = Options.gap_ns,
) -> Result:
    """Analyse the tensor-access log of `inputs` against its model (and name table and buffer events, when
    loaded) on `engine` (None, "cpu", "gpu", "auto" or an Engine), reading `window_entries` log entries at
    a time (memory stays near one window; the results do not depend on it), keeping `max_points` sampled
    accesses for the scatter views, `time_bins` x `offset_bins` bins for the pre-binned views, pages of
    `page_bytes` for the coverage map, and calling a pause of more than `gap_ns` a hole in the timestamps.

    Return a Result whose tables are those of :data:`REPORT_TABLES`, ``buffers`` and ``buffer_memory`` when
    buffer events were given, and the views the HTML report draws (``sample``, ``timeline``,
    ``time_offset``, ``thread_time``); its summary holds the log's and model's numbers, the weight and
    intermediate totals, ``never_touched_bytes``, the hot/cold points (``file_share_at_50``, ``_90``,
    ``_99``), the experts' numbers (``expert_layers``, ``experts_per_layer``, ``hottest_expert``,
    ``expert_reuse``) and ``checks`` (one dict per check)."""
    options = Options(
        time_bins=time_bins, offset_bins=offset_bins, max_points=max_points, page_bytes=page_bytes,
        gap_ns=gap_ns, window_entries=window_entries,
    )  # fmt: skip
    scanned = scan(inputs, options, resolve(engine))
    frames = build(scanned)
    if inputs.buffers is not None:
        frames["buffers"], frames["buffer_memory"] = per_buffer(inputs.buffers), in_use(inputs.buffers)
    frames |= views(scanned)
    summary = _summary(scanned, frames, run_checks(scanned, inputs.names))
    tables = {name: pa.Table.from_pandas(df, preserve_index=False) for name, df in frames.items()}
    return Result("tensors", tables, summary)
