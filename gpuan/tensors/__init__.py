"""Tensor-access analysis: which parts of a model file an instrumented llama.cpp touched, when, per token,
layer, component and expert; weights against intermediates; the checks that say whether to trust it.

``analyse(inputs)`` takes what :func:`gpuan.trace.tensor_inputs.load_tensor_inputs` loaded, makes one pass
over the log (:mod:`gpuan.tensors.scan`) and returns a :class:`~gpuan.result.Result` of the tables
(:mod:`gpuan.tensors.tables`) and a summary holding the checks (:mod:`gpuan.tensors.checks`)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pandas as pd
import pyarrow as pa

from gpuan.engine import Engine, resolve
from gpuan.errors import UsageError
from gpuan.result import Result
from gpuan.tensors.buffers import in_use, per_buffer
from gpuan.tensors.checks import run_checks
from gpuan.tensors.scan import Options, Scanned, scan
from gpuan.tensors.tables import build, never_touched, views
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


def _options(given: dict[str, Any]) -> Options:
    """The :class:`Options` named by keyword; an unknown name is a :class:`UsageError`."""
    known = [f.name for f in dataclasses.fields(Options)]
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise UsageError(f"tensors: unknown option(s) {', '.join(unknown)}; the options are {', '.join(known)}")
    return Options(**given)


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
        "page_bytes": scanned.options.page_bytes,
        "time_bins": scanned.options.time_bins,
        "offset_bins": scanned.options.offset_bins,
        "max_points": scanned.options.max_points,
        "token_layer_shape": [int(n) for n in scanned.token_layer.shape],
        "checks": checks,
    }


def analyse(inputs: TensorInputs, *, engine: Engine | str | None = None, **options: Any) -> Result:
    """Analyse the tensor-access log of `inputs` against its model (and name table and buffer events, when
    loaded) on `engine` (None, "cpu", "gpu", "auto" or an Engine); `options` are fields of :class:`Options`
    (``rows``, ``max_points``, ``time_bins``, ``offset_bins``, ``page_bytes``, ``gap_ns``).

    Return a Result whose tables are those of :data:`REPORT_TABLES`, ``buffers`` and ``buffer_memory`` when
    buffer events were given, and the views the HTML report draws (``sample``, ``timeline``,
    ``time_offset``, ``thread_time``); its summary holds the log's and model's numbers, the weight and
    intermediate totals, ``never_touched_bytes`` and ``checks`` (one dict per check)."""
    scanned = scan(inputs, _options(options), resolve(engine))
    frames = build(scanned)
    if inputs.buffers is not None:
        frames["buffers"], frames["buffer_memory"] = per_buffer(inputs.buffers), in_use(inputs.buffers)
    frames |= views(scanned)
    summary = _summary(scanned, frames, run_checks(scanned, inputs.names))
    tables = {name: pa.Table.from_pandas(df, preserve_index=False) for name, df in frames.items()}
    return Result("tensors", tables, summary)


__all__ = ["REPORT_TABLES", "Options", "analyse"]
