"""From a single-stream trace to the predicted N-stream timeline, and its check against a measured one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow.compute as pc

from gpuan.devices import GPU, lookup, of_trace
from gpuan.errors import TraceError, UsageError
from gpuan.options import STREAMS_LAUNCH_ORDERS, STREAMS_UNDIMENSIONED
from gpuan.streams.simulate import (
    BlockTooBig,
    Settings,
    Timeline,
    kernel_blocks,
    simulate,
)
from gpuan.streams.workload import KERNEL, Workload, bandwidths, gpu_operations, overheads, workload
from gpuan.trace.table import Trace

#: host time between two issued operations when the trace has no runtime calls to measure it (the
#: reference model's launch overhead)
DEFAULT_API_NS = 2000.0


@dataclass
class Prediction:
    """A predicted N-stream run: the workload it came from, the settings, the simulated timeline."""

    workload: Workload
    settings: Settings
    timeline: Timeline
    source: str
    #: predicted total (ns) under each assumption for kernels without launch dimensions, where there are
    #: such kernels (the range their unknown size leaves); empty otherwise
    totals_if: dict[str, float] = field(default_factory=dict)

    @property
    def n_streams(self) -> int:
        return self.settings.n_streams

    @property
    def total_ns(self) -> float:
        """Predicted time from the first operation's start to the last one's end, ns."""
        return self.timeline.total

    @property
    def serial_ns(self) -> float:
        """The same work on one stream: N times the measured single-stream span, ns."""
        return self.n_streams * self.workload.span

    @property
    def speedup(self) -> float:
        """Serial time over predicted time."""
        return self.serial_ns / self.total_ns if self.total_ns else float("nan")

    @property
    def undimensioned(self) -> int:
        """How many of the workload's kernels have no launch dimensions (placed under an assumption)."""
        return int(self.workload.undimensioned().sum())

    def stream_spans(self) -> list[tuple[float, float]]:
        """Return (first start, last end) of each predicted stream, ns."""
        timeline = self.timeline
        spans = [
            (timeline.start[timeline.stream == stream].min(), timeline.end[timeline.stream == stream].max())
            for stream in range(self.n_streams)
        ]
        return [(float(a), float(b)) for a, b in spans]

    def parameters(self) -> dict[str, Any]:
        """Return every parameter the prediction used, with where the device's numbers come from."""
        settings, gpu, w = self.settings, self.settings.gpu, self.workload
        blocks, assumed = kernel_blocks(w, gpu, settings.undimensioned), w.undimensioned()
        kernels = [
            {"name": w.names[i], "blocks": int(blocks.grid[i]), "assumed": bool(assumed[i]),
             **(_assumed_block(blocks.needs[i]) if assumed[i] else
                {"threads_per_block": int(w.threads[i]), "registers": int(w.registers[i]),
                 "shared_memory": int(w.shared_memory[i])}),
             "blocks_per_sm": int(blocks.per_sm[i]), "block_ns": float(blocks.time[i]), "duration_ns": float(w.dur[i])}
            for i in np.flatnonzero(w.kind == KERNEL)[:20]
        ]  # fmt: skip
        return {
            "device": gpu.name,
            "sms": gpu.sms,
            "per_sm": {"threads": gpu.threads_per_sm, "registers": gpu.registers_per_sm,
                       "shared_memory": gpu.shared_memory_per_sm, "blocks": gpu.blocks_per_sm},
            "copy_engines_per_direction": dict(zip(("H2D", "D2H", "DtoD"), settings.engines)),
            "copy_first_turn_ns": settings.copy_first_turn_ns,
            "copy_turn_ns": settings.copy_turn_ns,
            "link": gpu.link,
            "launch_order": settings.launch_order,
            "api_ns": settings.api_ns,
            "overheads_ns": overheads(w),
            "copy_bandwidth_Bps": bandwidths(w),
            "max_groups_per_kernel": settings.max_groups,
            "undimensioned": {
                "kernels": self.undimensioned, "of": int((w.kind == KERNEL).sum()),
                "assumption": settings.undimensioned, "meaning": STREAMS_UNDIMENSIONED[settings.undimensioned],
                "predicted_ns_if": self.totals_if,
            },
            "kernels": kernels,
            "sources": gpu.sources,
        }  # fmt: skip


def _assumed_block(needs: np.ndarray) -> dict[str, int]:
    """Return the launch parameters of the block an undimensioned kernel was taken to have (threads,
    registers per thread, shared memory), from what it holds on an SM (a row of ``block_needs``)."""
    threads, registers, shared_memory, _ = (int(x) for x in needs)
    return {"threads_per_block": threads, "registers": registers // max(threads, 1), "shared_memory": shared_memory}


def _api_ns(trace: Trace) -> float:
    """Median duration of the trace's launch and async-copy runtime calls, or the default."""
    rt = trace.of_kind("runtime")
    if rt.num_rows:
        names = pc.cast(rt["name"], "string")
        calls = rt.filter(pc.match_substring_regex(names, "LaunchKernel|MemcpyAsync|cuLaunch"))
        if calls.num_rows:
            return float(np.median(pc.fill_null(calls["dur"], 0).to_numpy()))
    return DEFAULT_API_NS


def gpu_of(trace: Trace, name: str | None, source: str) -> GPU:
    """Return the GPU to simulate: the one called `name` if given, else the one the trace recorded.
    Raises :class:`TraceError` if neither names a known GPU."""
    if name:
        return lookup(name, "--gpu")
    gpu = of_trace(trace.metadata, source)
    if gpu is None:
        raise TraceError(source, "the trace does not say which GPU ran it; pass --gpu")
    return gpu


def settings_for(
    gpu: GPU, n_streams: int, launch_order: str = "breadth", api_ns: float = DEFAULT_API_NS,
    undimensioned: str = "device",
) -> Settings:  # fmt: skip
    """Return the simulation settings for `gpu`: its copy engines split between the two directions (at
    least one each), its engine time slices, and the launch order, host overhead and assumption for
    kernels without launch dimensions given."""
    per_direction = max(1, gpu.copy_engines // 2)
    return Settings(
        gpu=gpu, n_streams=n_streams, launch_order=launch_order, api_ns=api_ns,
        engines=(per_direction, per_direction, 1),
        copy_first_turn_ns=gpu.copy_first_turn_ns, copy_turn_ns=gpu.copy_turn_ns, undimensioned=undimensioned,
    )  # fmt: skip


def predict(
    trace: Trace,
    n_streams: int,
    *,
    launch_order: str = "breadth",
    gpu: str | None = None,
    stream: int | None = None,
    source: str | None = None,
    undimensioned: str = "device",
    progress: Callable[[int, int], None] | None = None,
) -> Prediction:
    """Return the predicted timeline of `n_streams` copies of the single-stream work in `trace`, each on its
    own stream, on the GPU called `gpu` (default: the one the trace recorded). Kernels without launch
    dimensions are placed as `undimensioned` says (see :data:`STREAMS_UNDIMENSIONED`); where there are any, the
    work is simulated under every assumption, and :attr:`Prediction.totals_if` holds each total.
    `progress` is called with (operations simulated, operations to simulate) while a long one runs."""
    source = source or str(trace.metadata.get("source", "trace"))
    if n_streams < 1:
        raise UsageError(f"--streams must be at least 1, not {n_streams}")
    if launch_order not in STREAMS_LAUNCH_ORDERS:
        raise UsageError(f"--launch-order must be one of {', '.join(STREAMS_LAUNCH_ORDERS)}, not {launch_order!r}")
    if undimensioned not in STREAMS_UNDIMENSIONED:
        raise UsageError(f"--undimensioned must be one of {', '.join(STREAMS_UNDIMENSIONED)}, not {undimensioned!r}")
    w = workload(trace, stream=stream, source=source)
    settings = settings_for(gpu_of(trace, gpu, source), n_streams, launch_order, _api_ns(trace), undimensioned)
    others = [a for a in STREAMS_UNDIMENSIONED if a != undimensioned]
    assumptions = [undimensioned, *others] if w.undimensioned().any() else [undimensioned]
    runs = len(assumptions)
    timelines = {}
    for i, assumption in enumerate(assumptions):
        report = None if progress is None else _offset(progress, i * n_streams * len(w), runs * n_streams * len(w))
        try:
            timelines[assumption] = simulate(w, replace(settings, undimensioned=assumption), report)
        except BlockTooBig as e:
            raise TraceError(source, f"{e}: it cannot run on that GPU") from None
    # each assumption's total only where they differ in what they simulate (any undimensioned kernel)
    totals = {a: timelines[a].total for a in assumptions} if runs > 1 else {}
    return Prediction(w, settings, timelines[undimensioned], source, totals)


def _offset(progress: Callable[[int, int], None], before: int, total: int) -> Callable[[int, int], None]:
    """Return a progress callback for one of several simulations: its count after `before`, of `total`."""
    return lambda done, _: progress(before + done, total)


@dataclass(frozen=True)
class Check:
    """A prediction next to a measured run of the same work."""

    measured_ns: float
    predicted_ns: float
    measured_streams: list[tuple[int, float, float]]  # (stream id, first start, last end), ns from start

    @property
    def error(self) -> float:
        """(predicted - measured) / measured."""
        return (self.predicted_ns - self.measured_ns) / self.measured_ns


def check(prediction: Prediction, measured: Trace, source: str = "measured trace") -> Check:
    """Return the prediction's end time against the measured trace's (first start to last end of its GPU
    operations). Raises :class:`TraceError` if the measured trace has no GPU operations."""
    ops = gpu_operations(measured)
    if ops.num_rows == 0:
        raise TraceError(source, "no GPU operations to compare with")
    ts = ops["ts"].to_numpy().astype(np.float64)
    end = ts + ops["dur"].to_numpy().astype(np.float64)
    t0 = ts.min()
    streams = pc.fill_null(ops["stream"], -1).to_numpy()
    per = [(int(stream), float(ts[streams == stream].min() - t0), float(end[streams == stream].max() - t0))
           for stream in np.unique(streams)]  # fmt: skip
    return Check(float(end.max() - t0), prediction.total_ns, per)
