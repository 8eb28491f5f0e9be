"""The single-stream workload: a trace's GPU operations in stream order, with what the simulator needs of
each (kind, duration, bytes, launch configuration) and the measured gap before it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gpuan.errors import TraceError, UsageError
from gpuan.trace.table import Trace

#: operation kinds of the workload
H2D, D2H, KERNEL, COPY, OTHER = 0, 1, 2, 3, 4
KIND_NAMES = ("H2D", "D2H", "kernel", "copy", "other")


@dataclass(frozen=True)
class Workload:
    """One stream's operations in issue order (numpy columns of equal length, times in ns).

    ``gap`` is the measured time from the end of the previous operation to the start of this one (0 for
    the first); ``pageable`` marks host copies from or to pageable memory; launch configuration columns
    are 0 where unknown."""

    names: list[str]
    kind: np.ndarray  # int8, one of H2D, D2H, KERNEL, COPY, OTHER
    start: np.ndarray  # float64 ns from the first operation's start
    dur: np.ndarray  # float64 ns
    gap: np.ndarray  # float64 ns
    bytes: np.ndarray  # int64
    pageable: np.ndarray  # bool
    grid: np.ndarray  # int64 blocks (workgroups), 0 where unknown
    threads: np.ndarray  # int64 threads per block
    registers: np.ndarray  # int64 per thread
    shared_memory: np.ndarray  # int64 per block
    device: int
    stream: int

    def __len__(self) -> int:
        return self.kind.size

    def undimensioned(self) -> np.ndarray:
        """Return the mask of kernels without launch dimensions (grid or block size unknown): the trace
        did not record them (ROCm's Triton kernels, launched through hipModuleLaunchKernel, often lack them)."""
        return (self.kind == KERNEL) & ((self.grid < 1) | (self.threads < 1))

    @property
    def span(self) -> float:
        """Measured time from the first start to the last end, ns."""
        return float((self.start + self.dur).max()) if len(self) else 0.0


def _filled(table: pa.Table, name: str) -> np.ndarray:
    return pc.fill_null(table[name], 0).to_numpy().astype(np.int64)


def _volume(table: pa.Table, prefix: str) -> np.ndarray:
    """x * y * z of a launch dimension (``grid`` or ``block``); 0 where x is unknown."""
    return (
        _filled(table, f"{prefix}_x")
        * np.maximum(_filled(table, f"{prefix}_y"), 1)
        * np.maximum(_filled(table, f"{prefix}_z"), 1)
    )


def gpu_operations(trace: Trace) -> pa.Table:
    """Return the trace's kernels, memcpys and memsets in time order (device, stream, ts, dur, name,
    kind, memcpy_kind, bytes and the launch configuration columns)."""
    ops = trace.of_kind("kernel", "memcpy", "memset")
    ops = ops.filter(pc.and_(pc.is_valid(ops["ts"]), pc.is_valid(ops["dur"])))
    return ops.sort_by([("ts", "ascending")])


def streams_of(ops: pa.Table) -> list[tuple[int, int, int]]:
    """Return (device, stream, operations) for each stream with GPU work, busiest first."""
    if ops.num_rows == 0:
        return []
    keys = pa.table({"device": pc.fill_null(ops["device"], -1), "stream": pc.fill_null(ops["stream"], -1)})
    counts = keys.group_by(["device", "stream"]).aggregate([([], "count_all")])
    rows = sorted(
        zip(*(counts[column].to_pylist() for column in ("device", "stream", "count_all"))), key=lambda row: -row[2]
    )
    return [(int(device), int(stream), int(count)) for device, stream, count in rows]


def workload(trace: Trace, *, stream: int | None = None, source: str = "trace") -> Workload:
    """Return the single-stream workload of `trace`: the operations of `stream` (default: the trace's
    only stream with GPU work). Raises :class:`TraceError` when the trace has no GPU operations, or
    several streams and no `stream` was chosen; :class:`UsageError` when `stream` has none."""
    ops = gpu_operations(trace)
    found = streams_of(ops)
    if not found:
        raise TraceError(source, "no GPU operations (kernels, memcpys, memsets) to predict from")
    if stream is None:
        if len(found) > 1:
            listed = ", ".join(f"{sid} ({n} ops)" for _, sid, n in found[:8])
            raise TraceError(source, f"not a single-stream trace: GPU work on streams {listed}; pass --stream")
        device, stream_id = found[0][0], found[0][1]
    else:
        match = [(d, sid) for d, sid, _ in found if sid == stream]
        if not match:
            streams = [sid for _, sid, _ in found]
            raise UsageError(f"--stream: no GPU operations on stream {stream} in {source}; streams: {streams}")
        device, stream_id = match[0]
    ops = ops.filter(pc.equal(pc.fill_null(ops["stream"], -1), stream_id))

    kind = _kinds(ops)
    name = pc.fill_null(ops["name"].combine_chunks().dictionary_decode(), "None")
    names = name.to_pylist()
    pageable = pc.match_substring(name, "pageable", ignore_case=True).to_numpy(zero_copy_only=False)

    ts = _filled(ops, "ts").astype(np.float64)
    dur = _filled(ops, "dur").astype(np.float64)
    start = ts - ts.min()
    end = start + dur
    gap = np.zeros_like(start)
    gap[1:] = np.maximum(start[1:] - end[:-1], 0.0)
    grid, threads = _volume(ops, "grid"), _volume(ops, "block")
    return Workload(
        names=names, kind=kind, start=start, dur=dur, gap=gap, bytes=_filled(ops, "bytes"), pageable=pageable,
        grid=grid, threads=threads, registers=_filled(ops, "registers"),
        shared_memory=_filled(ops, "shared_memory"), device=int(device), stream=int(stream_id),
    )  # fmt: skip


def _kinds(ops: pa.Table) -> np.ndarray:
    """Return each operation's workload kind (H2D, D2H, KERNEL, COPY or OTHER): a kernel, a memcpy by its
    direction (HtoD, DtoH; any other or none: COPY), else OTHER; one lookup per distinct kind and direction."""
    kinds = ops["kind"].combine_chunks()
    of_kind = np.array(
        [KERNEL if k == "kernel" else COPY if k == "memcpy" else OTHER for k in kinds.dictionary.to_pylist()]
    )
    kind = of_kind[kinds.indices.to_numpy(zero_copy_only=False)].astype(np.int8)
    copies = ops["memcpy_kind"].combine_chunks()
    if copies.type != pa.null() and copies.null_count < len(copies):
        direction = np.array([{"HtoD": H2D, "DtoH": D2H}.get(d, COPY) for d in copies.dictionary.to_pylist()] + [COPY])
        codes = copies.indices.fill_null(-1).to_numpy(zero_copy_only=False)  # -1: the last slot, no direction
        kind = np.where(kind == COPY, direction[codes], kind).astype(np.int8)
    return kind


def overheads(w: Workload) -> dict[str, float]:
    """Return the median measured gap (ns) for each transition seen in the workload, keyed like
    ``"H2D->kernel"``: the overheads the prediction keeps when operations move."""
    pair = w.kind[:-1].astype(np.int64) * len(KIND_NAMES) + w.kind[1:]
    out = {}
    for p in np.unique(pair).tolist():
        before, after = divmod(p, len(KIND_NAMES))
        out[f"{KIND_NAMES[before]}->{KIND_NAMES[after]}"] = float(np.median(w.gap[1:][pair == p]))
    return dict(sorted(out.items()))


def bandwidths(w: Workload) -> dict[str, float]:
    """Return the median measured bandwidth (bytes/s) of the workload's copies per direction."""
    out = {}
    for k in (H2D, D2H, COPY):
        m = (w.kind == k) & (w.bytes > 0) & (w.dur > 0)
        if m.any():
            out[KIND_NAMES[k]] = float(np.median(w.bytes[m] / (w.dur[m] * 1e-9)))
    return out
