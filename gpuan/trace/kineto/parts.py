"""A Kineto file too large for memory, read in parts: memory is a ceiling set by the caller, not a share
of the file.

Two passes over the file. The first (:func:`whole_file`) keeps only what a part's table depends on in
the rest of the file: the time zero, whether it is a ROCm trace and its GPU agents, the GPUs of its
[memory] events, the B/E pairs (which may span parts), the metadata that follows the events. The second
(:func:`part_traces`) builds each part's table against those facts, so that every row has the values the
whole file's table gives it; the parts' rows are then merged into the table's order (by kind, then time,
then file position) by :func:`gpuan.trace.parquet.write_parts`, which never holds more than a few batches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from gpuan.trace.kinds import GPU_KINDS, KIND_CODE
from gpuan.trace.kineto import scanner as sc
from gpuan.trace.kineto.events import (
    WholeFile,
    _categories,
    _id_of_string,
    _is_rocm,
    _memory_gpus,
    _process_names,
    _resolve_ids,
    build_trace,
    check_complete_events,
    check_timed,
    device_values,
    work_item_launches,
)
from gpuan.trace.kineto.reader import scan_parts
from gpuan.trace.kineto.spans import pair_begin_end
from gpuan.trace.memory import lean_memory
from gpuan.trace.table import Trace

N64 = sc.NULL64
_GPU_CODES = [KIND_CODE[k] for k in GPU_KINDS]


@dataclass
class _Facts:
    """What the first pass has gathered so far."""

    base: int | None = None
    hip_calls: bool = False
    memory_gpus: set[int] = field(default_factory=set)
    agents: set[int] = field(default_factory=set)
    complete: bool = False  # some complete event...
    timed: bool = False  # ...and some complete event with a timestamp
    be_rows: list[np.ndarray] = field(default_factory=list)  # file rows of B and E events
    be_end: list[np.ndarray] = field(default_factory=list)
    be_ts: list[np.ndarray] = field(default_factory=list)
    be_pid: list[np.ndarray] = field(default_factory=list)
    be_tid: list[np.ndarray] = field(default_factory=list)
    # the string ids of string pids and tids, of events and of flows, and the metadata events: enough to
    # number the synthetic ids as reading the file whole numbers them
    pid_strings: set[int] = field(default_factory=set)
    tid_strings: set[int] = field(default_factory=set)
    flow_pid_strings: set[int] = field(default_factory=set)
    flow_tid_strings: set[int] = field(default_factory=set)
    meta_rows: list[tuple] = field(default_factory=list)
    work_item_launches: list[np.ndarray] = field(default_factory=list)  # their correlation ids

    def earliest(self, ts: np.ndarray) -> None:
        """Take the earliest of the timestamps `ts` (nulls aside) into the time zero."""
        ts = ts[ts != N64]
        if ts.size:
            low = int(ts.min())
            self.base = low if self.base is None else min(self.base, low)


def whole_file(
    path: str, part_rows: int, *, threads: int | None = None, progress: Callable[[int, int], None] | None = None
) -> WholeFile:
    """Return what the parts of the Kineto file at `path` depend on in the whole file, reading it once in
    parts of about `part_rows` rows. Raises TraceError for a file that is no readable trace, as reading it
    whole would (the negative-duration and untimed checks included)."""
    facts = _Facts()
    named: dict[int, str] = {}  # this pass's own pid/tid ids: they only need to pair B and E
    metadata: dict = {}
    strings: list[str] = []
    with lean_memory():
        for raw in scan_parts(path, part_rows=part_rows, threads=threads, progress=progress):
            _gather(raw, facts, named, path)
            metadata, strings = raw.metadata, raw.strings
    check_timed(facts.complete, facts.timed, path)
    begins, durations = _pairs(facts)
    no_events = np.empty(0, np.int8)
    rocm = facts.hip_calls or _is_rocm(metadata, no_events, np.empty(0, np.int32), [])
    return WholeFile(
        metadata=metadata,
        base=facts.base or 0,
        rocm=rocm,
        memory_gpus=sorted(facts.memory_gpus),
        agents=np.array(sorted(facts.agents), np.int64),
        begins=begins,
        durations=durations,
        work_item_launches=np.unique(np.concatenate([np.empty(0, np.int64), *facts.work_item_launches])),
        ids_named=_synthetic_ids(facts, strings),
    )


def _synthetic_ids(facts: _Facts, strings: list[str]) -> dict[int, str]:
    """Return the synthetic ids of the file's non-numeric pid and tid strings, numbered in the order that
    reading the file whole numbers them: events' pids, their tids (each by string id), the metadata
    events, the flows' pids and tids."""
    named: dict[int, str] = {}
    for ids in (facts.pid_strings, facts.tid_strings):
        for i in sorted(ids):
            _id_of_string(strings[i], named)
    _process_names(facts.meta_rows, strings, named)
    for ids in (facts.flow_pid_strings, facts.flow_tid_strings):
        for i in sorted(ids):
            _id_of_string(strings[i], named)
    return named


def _gather(raw, facts: _Facts, named: dict[int, str], path: str) -> None:
    """Add what one part of the file says of the whole to `facts`."""
    c, sp, strings = raw.columns, raw.sparse, raw.strings
    ts, dur, ph = c["ts"], c["dur"], c["ph"]
    check_complete_events(ts, dur, ph, path, raw.first_row, whole_file=False)
    complete = ph == ord("X")
    facts.complete |= bool(complete.any())
    facts.timed |= bool((ts[complete] != N64).any())
    facts.earliest(ts)
    if raw.flows:
        facts.earliest(raw.flows["ts"])
        for key, ids in (("pid_str", facts.flow_pid_strings), ("tid_str", facts.flow_tid_strings)):
            ids.update(np.unique(raw.flows[key][raw.flows[key] >= 0]).tolist())
    facts.pid_strings.update(np.unique(sp["pid_str"][1]).tolist())
    facts.tid_strings.update(np.unique(sp["tid_str"][1]).tolist())
    facts.meta_rows += raw.process_meta
    pid = _resolve_ids(c["pid"], sp["pid_str"], strings, named)
    tid = _resolve_ids(c["tid"], sp["tid_str"], strings, named)
    kind = _categories(c["cat"], strings)[2]
    runtime = np.unique(c["name"][kind == KIND_CODE["runtime"]])
    facts.hip_calls |= any(strings[i].startswith("hip") for i in runtime if i >= 0)
    facts.work_item_launches.append(work_item_launches(kind, c["name"], c["correlation"], strings))
    facts.memory_gpus.update(_memory_gpus(sp["mem_device"], sp["mem_device_type"]))
    kept = ph != ord("E")  # E rows are dropped from the table: their values are no device's
    gpu_rows = np.flatnonzero(np.isin(kind, _GPU_CODES) & kept)
    r, v = sp["device"]
    _, values = device_values(r[kept[r]], v[kept[r]], gpu_rows, pid)
    facts.agents.update(np.unique(values).tolist())
    be = np.flatnonzero((ph == ord("B")) | (ph == ord("E")))
    if be.size:
        facts.be_rows.append(be + raw.first_row)
        facts.be_end.append(ph[be] == ord("E"))
        facts.be_ts.append(ts[be].copy())
        facts.be_pid.append(pid[be].copy())
        facts.be_tid.append(tid[be].copy())


def _pairs(facts: _Facts) -> tuple[np.ndarray, np.ndarray]:
    """Return (file rows of the B events an E closes, their durations) over the whole file."""
    if not facts.be_rows:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    rows = np.concatenate(facts.be_rows)
    is_end = np.concatenate(facts.be_end)
    ts, pid, tid = (np.concatenate(a) for a in (facts.be_ts, facts.be_pid, facts.be_tid))
    # positions into these few rows stand for file rows: they rise together
    at, durations = pair_begin_end(np.flatnonzero(~is_end), np.flatnonzero(is_end), ts, pid, tid)
    return rows[at], durations


def part_traces(
    path: str,
    whole: WholeFile,
    part_rows: int,
    *,
    rank: int | None = None,
    threads: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Iterator[Trace]:
    """Yield the Trace of each part of the Kineto file at `path` (about `part_rows` rows each, in file
    order), each built against `whole` (from :func:`whole_file`): its rows are the whole file's table's
    rows for those events, in the table's order within the part. The last one's metadata is the whole
    file's."""
    meta_rows: list[tuple] = []
    agents_note = None
    parts = scan_parts(path, part_rows=part_rows, threads=threads, progress=progress)
    with lean_memory():
        for raw in parts:
            meta_rows += raw.process_meta
            last, strings = raw.last, raw.strings
            trace = build_trace(raw, source=str(path), rank=rank, whole=whole, threads=threads)
            agents_note = trace.metadata.get("device_agents", agents_note)
            if last:
                trace.metadata.update(_process_names(meta_rows, strings, whole.ids_named))
                trace.metadata["id_names"] = {str(k): v for k, v in sorted(whole.ids_named.items())}
                if agents_note is not None:
                    trace.metadata["device_agents"] = agents_note
            yield trace
