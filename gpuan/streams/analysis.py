"""``gpuan.streams.analyse``: the predicted N-stream timeline of a single-stream trace as a Result."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa

from gpuan.engine import Engine, resolve
from gpuan.result import Result
from gpuan.streams.predict import Check, Prediction, check, predict
from gpuan.streams.workload import KIND_NAMES
from gpuan.trace.projection import Projection, projection
from gpuan.trace.table import Trace


def reads() -> Projection:
    """Return what :func:`analyse` reads of the event table (and of the measured trace): the GPU work, its
    launch dimensions and resources, and the launch calls that order it."""
    return projection(
        ("ts", "dur", "name", "kind", "pid", "tid", "device", "stream", "correlation", "grid_x", "grid_y", "grid_z",
         "block_x", "block_y", "block_z", "registers", "shared_memory", "bytes", "memcpy_kind"),
        ("kernel", "memcpy", "memset", "runtime", "driver"),
    )  # fmt: skip


SPANS_SCHEMA = pa.schema([("stream", pa.int64()), ("start_ns", pa.float64()), ("end_ns", pa.float64())])


def analyse(
    trace: Trace,
    *,
    engine: Engine | str | None = None,
    streams: int,
    gpu: str | None = None,
    launch_order: str = "breadth",
    stream: int | None = None,
    undimensioned: str = "device",
    measured: Trace | None = None,
    source: str | None = None,
    measured_source: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Result:
    """Return the predicted timeline of `streams` copies of the single-stream work in `trace` (that of
    `stream` where it has several), each on its own stream, on the GPU called `gpu` (default: the one the
    trace recorded), as a Result named "streams".

    Tables: ``operations`` (the predicted schedule, one row per operation of every stream: stream, index
    in the single-stream work, name, kind, start_ns, end_ns, issued_ns, single_stream_dur_ns, grid, block,
    registers, bytes), ``streams`` (stream, start_ns, end_ns: each predicted stream's span) and, with
    `measured` (a loaded N-stream trace of the same work), ``measured_streams`` (its streams' spans).
    Summary: source, streams, gpu, launch_order, single_stream_ns, single_stream_operations, serial_ns,
    predicted_ns, speedup, undimensioned (kernels without launch sizes, the assumption, predicted_ns_if
    each assumption and their range_ns), parameters (every number the simulation used, with its
    sources) and, with `measured`, measured (source, measured_ns, error). Times in ns.

    `source` and `measured_source` name the traces (default: their metadata's source); `progress` is
    called with (operations simulated, operations to simulate) while a long simulation runs. The engine
    is checked but the simulation is an event loop on the CPU either way."""
    resolve(engine)
    prediction = predict(
        trace, streams, launch_order=launch_order, gpu=gpu, stream=stream, source=source,
        undimensioned=undimensioned, progress=progress,
    )  # fmt: skip
    tables = {"operations": _operations(prediction), "streams": _spans(enumerate(prediction.stream_spans()))}
    summary = _summary(prediction)
    if measured is not None:
        measured_source = measured_source or str(measured.metadata.get("source", "measured trace"))
        checked = check(prediction, measured, measured_source)
        tables["measured_streams"] = _spans((stream, (a, b)) for stream, a, b in checked.measured_streams)
        summary["measured"] = _measured(checked, measured_source)
    return Result("streams", tables, summary)


def _operations(prediction: Prediction) -> pa.Table:
    """Return the predicted schedule: one row per operation of every stream, with what the single-stream
    work said of it (its kind, duration, launch configuration or bytes)."""
    work, timeline = prediction.workload, prediction.timeline
    index = np.asarray(timeline.index, np.int64)
    return pa.table({
        "stream": pa.array(np.asarray(timeline.stream, np.int64)),
        "index": pa.array(index),
        "name": pa.array(work.names, pa.string()).take(index),
        "kind": pa.array(KIND_NAMES, pa.string()).take(work.kind[index].astype(np.int64)),
        "start_ns": pa.array(np.asarray(timeline.start, np.float64)),
        "end_ns": pa.array(np.asarray(timeline.end, np.float64)),
        "issued_ns": pa.array(np.asarray(timeline.issued, np.float64)),
        "single_stream_dur_ns": pa.array(np.asarray(work.dur[index], np.float64)),
        "grid": pa.array(work.grid[index].astype(np.int64)),
        "block": pa.array(work.threads[index].astype(np.int64)),
        "registers": pa.array(work.registers[index].astype(np.int64)),
        "bytes": pa.array(work.bytes[index].astype(np.int64)),
    })  # fmt: skip


def _spans(spans) -> pa.Table:
    """Return (stream, (first start, last end)) pairs as a table of stream spans."""
    rows = [{"stream": stream, "start_ns": a, "end_ns": b} for stream, (a, b) in spans]
    return pa.Table.from_pylist(rows, schema=SPANS_SCHEMA)


def _summary(prediction: Prediction) -> dict:
    """Return the prediction's numbers: totals, speed-up, the assumption for kernels without launch sizes
    and every parameter."""
    totals = prediction.totals_if
    return {
        "source": prediction.source,
        "streams": prediction.n_streams,
        "gpu": prediction.settings.gpu.name,
        "launch_order": prediction.settings.launch_order,
        "single_stream_ns": prediction.workload.span,
        "single_stream_operations": len(prediction.workload),
        "serial_ns": prediction.serial_ns,
        "predicted_ns": prediction.total_ns,
        "speedup": prediction.speedup,
        "undimensioned": {
            "kernels": prediction.undimensioned, "assumption": prediction.settings.undimensioned,
            "predicted_ns_if": totals, "range_ns": [min(totals.values()), max(totals.values())] if totals else None,
        },
        "parameters": prediction.parameters(),
    }  # fmt: skip


def _measured(checked: Check, source: str) -> dict:
    """Return the measured run's end and the prediction's error against it."""
    return {"source": source, "measured_ns": checked.measured_ns, "error": checked.error}
