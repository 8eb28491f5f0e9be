"""Turn the scanner's rows of a Kineto trace into a :class:`~gpuan.trace.table.Trace`.

Here the format's quirks are settled once: category spellings, string pids/tids ("stream 7", "Spans"),
B/E pairs, instants, devices and streams of GPU events, memcpy directions, the time base.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from gpuan.errors import TraceError
from gpuan.trace.kinds import GPU_KINDS, KIND_CODE, KINDS
from gpuan.trace.kineto import scanner as sc
from gpuan.trace.kineto import scatter
from gpuan.trace.kineto.agents import GPU_DEVICE_TYPES, agent_devices
from gpuan.trace.kineto.categories import codes_and_kinds
from gpuan.trace.kineto.order import table_order
from gpuan.trace.kineto.reader import RawTrace
from gpuan.trace.kineto.shapes import one_line_each
from gpuan.trace.kineto.spans import pair_begin_end
from gpuan.trace.launch_dims import WORK_ITEM_LAUNCHES, grids_in_workgroups
from gpuan.trace.memory import release
from gpuan.trace.schema import FLOW_SCHEMA, kind_codes, normalise_category
from gpuan.trace.table import (
    Trace,
    build_table,
    dict_column,
    int_column,
    sparse_column,
    used_codes,
)
from gpuan.trace.threads import side_by_side

N64, N32 = sc.NULL64, sc.NULL32
#: synthetic ids for pid/tid strings that are not numbers start here and go down
SYNTHETIC_ID_BASE = -(1 << 32)
_MEMCPY_KIND = re.compile(r"Memcpy\s+([A-Za-z]+)")
_ROCM_MEMCPY_KIND = {"1": "HtoD", "2": "DtoH", "3": "DtoD", "0": "HtoH"}


@dataclass
class _Events:
    """The per-event columns settled from the scan: pids and tids resolved, durations completed, categories
    normalised (codes into `cat_strings`) and kinds; `keep` masks the rows to keep (None: all)."""

    pid: np.ndarray
    tid: np.ndarray
    ts: np.ndarray
    dur: np.ndarray
    keep: np.ndarray | None
    cat: np.ndarray
    cat_strings: list[str]
    kind: np.ndarray

    def permute(self, order: np.ndarray, name: np.ndarray, threads: int | None) -> np.ndarray:
        """Put the columns in the table's row order, each in its own memory; return the event names' column
        (string ids, in file order) put in that order too. The gathers run side by side: 69 -> 41 ms on the
        1 GB gen trace at 2 threads (settling and ordering beside other work were slower there, not faster:
        51 -> 74-80 ms and 97 -> 135-150 ms). Each gather holds a copy of its column until it is written
        back, so as many columns as there are threads are copied at once (two int64 columns, 16 bytes a
        row, at 2 threads; all seven, 41 bytes a row, at 7 or more)."""
        columns = (self.kind, self.cat, self.pid, self.tid, self.ts, self.dur, name)
        permuted = side_by_side([lambda a=a: _permute(a, order) for a in columns], order.size, threads)
        self.kind, self.cat, self.pid, self.tid, self.ts, self.dur, name = permuted
        return name


class _SparseFields:
    """The scanner's sparse fields, made columns in the table's row order, each by its own call (calls
    for different fields may run at once); each field's scan buffers are given back as soon as its column
    is built, which keeps the peak down."""

    def __init__(self, sparse: dict[str, tuple[np.ndarray, np.ndarray]], new_row: np.ndarray, n: int) -> None:
        self.sparse = sparse
        self.n = n
        self.new_row = new_row  # each file row's place in the table, -1 for a row left out

    def column(self, name: str, make: Callable[[np.ndarray, np.ndarray], pa.Array]) -> pa.Array:
        """Return make(rows, values) of field `name` in the new row order (rows dropped from the table left out)."""

        def in_new_order(idx: np.ndarray, vals: np.ndarray) -> pa.Array:
            rows = self.new_row[idx]
            ok = rows >= 0
            return make(rows, vals) if ok.all() else make(rows[ok], vals[ok])

        return self._made(name, in_new_order)

    def ints(self, name: str, type_: pa.DataType) -> pa.Array:
        """Return the integer column of field `name`, null where an event lacks it."""
        return self._made(name, lambda idx, vals: scatter.int_column(self.new_row, idx, vals, self.n, type_))

    def texts(self, name: str, strings: list[str], form: Callable[[list[str]], list[str]] | None = None) -> pa.Array:
        """Return the dictionary column of field `name` (string ids into `strings`; with `form`, which puts each
        of the strings it is given in one form, the strings in that form first), null where an event lacks it."""
        return self._made(name, lambda idx, vals: scatter.text_column(self.new_row, idx, vals, self.n, strings, form))

    def _made(self, name: str, make: Callable[[np.ndarray, np.ndarray], pa.Array]) -> pa.Array:
        """Return make(file rows, values) of field `name`, then give the field's scan buffers back."""
        idx, vals = self.sparse.pop(name)
        col = make(idx, vals)
        release(idx)
        release(vals)
        return col


@dataclass
class WholeFile:
    """What the table of a part of a file depends on in the whole file, for a file read in parts
    (:func:`gpuan.trace.kineto.parts.whole_file` gathers it in a first pass over the file): with it,
    :func:`build_trace` gives each part exactly the rows, values and metadata the whole file's table has."""

    metadata: dict  # the file's top-level keys
    base: int  # the earliest timestamp (file ns), the trace's time zero
    rocm: bool
    memory_gpus: list[int]
    agents: np.ndarray  # the distinct device values of GPU events (on ROCm: agent ids)
    begins: np.ndarray  # file rows of the B events closed by an E event, ascending
    durations: np.ndarray  # their durations
    work_item_launches: np.ndarray  # correlation ids of the launch calls that give grids in work-items
    ids_named: dict[int, str] = field(default_factory=dict)  # synthetic pid/tid ids, filled part by part


def build_trace(
    raw: RawTrace, source: str, rank: int | None = None, whole: WholeFile | None = None, threads: int | None = None
) -> Trace:
    """Return the Trace for the scanned rows of one Kineto file, or of a part of one (`whole`: what the
    part's rows depend on in the rest of the file); a large table's columns are made on `threads` threads
    (None: :func:`gpuan.trace.threads.thread_count`).

    Rows come out grouped by kind and in time order within each kind (file order breaks ties), so the
    same events give the same table whatever their order in the file, a kind is a contiguous slice, and
    a column that only one kind fills stays untouched memory elsewhere."""
    strings = raw.strings
    file_meta = whole.metadata if whole is not None else raw.metadata
    meta = _trace_metadata(file_meta, source)
    ids_named: dict[int, str] = whole.ids_named if whole is not None else {}
    events = _settle_events(raw, source, ids_named, whole)
    order, new_row = table_order(events.kind, events.ts, events.keep)
    fields = _SparseFields(raw.sparse, new_row, order.size)
    mem_ids, mem_types = raw.sparse.pop("mem_device"), raw.sparse.pop("mem_device_type")
    if whole is None:
        rocm = _is_rocm(file_meta, events.kind, raw.columns["name"], strings)
        memory_gpus = _memory_gpus(mem_ids, mem_types)
        launches = (
            work_item_launches(events.kind, raw.columns["name"], raw.columns["correlation"], strings)
            if rocm
            else np.empty(0, np.int64)
        )
    else:
        rocm, memory_gpus, launches = whole.rocm, whole.memory_gpus, whole.work_item_launches
    for a in (*mem_ids, *mem_types):
        release(a)
    name = events.permute(order, raw.columns.pop("name"), threads)
    shape = _distributed_shape(file_meta)
    agents = whole.agents if whole is not None else None
    base = whole.base if whole is not None else _base_time(events.ts, raw.flows.get("ts"))
    meta["base_time_ns"] = base + int(meta.pop("_file_base_ns", 0))
    rank = rank if rank is not None else distributed_rank(file_meta)
    meta["rank"] = rank

    makers = _event_columns(events, name, raw.columns, order, base, strings)
    makers.update(_device_and_stream(fields, events, (meta, memory_gpus, shape, agents) if rocm else None))
    makers["memcpy_kind"] = lambda: fields.column(
        "arg_kind", lambda r, v: _memcpy_kinds(name, (r, v), events.kind, strings)
    )
    makers.update(_argument_columns(fields, strings))
    cols = dict(zip(makers, side_by_side(list(makers.values()), fields.n, threads)))
    release(name)  # the dictionary column holds its own codes
    if rank is not None:
        # np.zeros pages stay untouched for rank 0, the common single-file case
        n = fields.n
        cols["rank"] = int_column(np.zeros(n, np.int32) if rank == 0 else np.full(n, rank, np.int32), None, pa.int32())
    table = grids_in_workgroups(build_table(cols, fields.n), launches)

    meta.update(_process_names(raw.process_meta, strings, ids_named))
    flows = _flow_table(raw.flows, strings, ids_named, base, rank)
    meta["id_names"] = {str(k): v for k, v in sorted(ids_named.items())}
    return Trace(table, flows, meta)


def _settle_events(raw: RawTrace, source: str, ids_named: dict[int, str], whole: WholeFile | None = None) -> _Events:
    """Return the events' columns in file order, settling the format's quirks (string pids/tids, recorded
    in `ids_named`; B/E pairs, from `whole` for a part of a file; instants; category spellings; step
    ranges); raises TraceError for events no timeline can hold."""
    c, sp, strings = raw.columns, raw.sparse, raw.strings
    pid = _resolve_ids(c.pop("pid"), sp.pop("pid_str"), strings, ids_named)
    tid = _resolve_ids(c.pop("tid"), sp.pop("tid_str"), strings, ids_named)
    ph, raw_cat = c.pop("ph"), c.pop("cat")
    check_complete_events(ts := c.pop("ts"), dur := c.pop("dur"), ph, source, raw.first_row, whole is None)
    paired = None if whole is None else (whole.begins, whole.durations, raw.first_row)
    ts, dur, keep = _complete_durations(ts, dur, ph, pid, tid, paired)
    cat, cat_strings, kind = _categories(raw_cat, strings, c["name"])
    release(ph)
    release(raw_cat)
    return _Events(pid, tid, ts, dur, keep, cat, cat_strings, kind)


def _device_and_stream(
    fields: _SparseFields,
    events: _Events,
    rocm: tuple[dict, list[int], tuple[int, int] | None, np.ndarray | None] | None,
) -> dict[str, Callable[[], pa.Array]]:
    """Return the makers of the device and stream columns: the args' values, else for GPU events the pid
    and tid, where Kineto writes them. On ROCm (`rocm`: the metadata, the GPUs of [memory] events, the
    distributed shape and, for a part of a file, the whole file's agents) devices are agent ids, turned
    into device indexes."""
    n = fields.n
    gpu_rows = np.flatnonzero(_code_set([KIND_CODE[k] for k in GPU_KINDS], 256)[events.kind.view(np.uint8)])

    def devices(r: np.ndarray, v: np.ndarray) -> pa.Array:
        idx, vals = device_values(r, v, gpu_rows, events.pid)
        if rocm is not None:
            vals = _agents_as_devices(vals, *rocm)
        return sparse_column(n, idx, vals, pa.int16())

    def streams(r: np.ndarray, v: np.ndarray) -> pa.Array:
        return sparse_column(n, *_fill_sparse(r, v, gpu_rows, events.tid[gpu_rows], _is_id), pa.int64())

    return {"device": lambda: fields.column("device", devices), "stream": lambda: fields.column("stream", streams)}


def _event_columns(
    events: _Events, name: np.ndarray, c: dict[str, np.ndarray], order: np.ndarray, base: int, strings: list[str]
) -> dict[str, Callable[[], pa.Array]]:
    """Return the makers of the columns every event has (times on `base`), the scanner's dense columns `c`
    reordered."""
    correlation, external_id = c.pop("correlation"), c.pop("external_id")
    return {
        "ts": lambda: int_column(_rebase(events.ts, base), N64, pa.int64()),
        "dur": lambda: int_column(events.dur, N64, pa.int64()),
        "name": lambda: dict_column(name, strings),
        "cat": lambda: dict_column(events.cat, events.cat_strings),
        "kind": lambda: pa.DictionaryArray.from_arrays(pa.array(events.kind, pa.int8()), pa.array(KINDS)),
        "pid": lambda: int_column(events.pid, N64, pa.int64()),
        "tid": lambda: int_column(events.tid, N64, pa.int64()),
        "correlation": lambda: int_column(_permute(correlation, order), N64, pa.int64()),
        "external_id": lambda: int_column(_permute(external_id, order), N64, pa.int64()),
    }


def _argument_columns(fields: _SparseFields, strings: list[str]) -> dict[str, Callable[[], pa.Array]]:
    """Return the makers of the columns of the events' args: launch shapes, sizes, collectives and the JSON
    values."""
    makers: dict[str, Callable[[], pa.Array]] = {}
    for col in ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers", "group_size", "peer"):
        makers[col] = lambda col=col: fields.ints(col, pa.int32())
    for col in ("shared_memory", "bytes", "in_msg_nelems", "out_msg_nelems", "seq", "fwd_tid"):
        makers[col] = lambda col=col: fields.ints(col, pa.int64())
    for col in ("collective", "dtype", "pg_name"):
        makers[col] = lambda col=col: fields.texts(col, strings)
    for col in ("pg_ranks", "input_dims", "input_types", "concrete_inputs"):  # JSON values: one layout for all
        makers[col] = lambda col=col: fields.texts(col, strings, one_line_each)
    return makers


def _code_set(codes: list[int], size: int) -> np.ndarray:
    """Return a mask of `size` slots, True at `codes`: indexing it with a column of codes tests membership
    in one gather (np.isin sorts)."""
    mask = np.zeros(size, bool)
    mask[codes] = True
    return mask


def _permute(a: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Return a reordered by `order`, written over a's own memory (a is a view into the reader's
    buffers, which stay alive anyway: a fresh array would only add to the peak)."""
    a[: order.size] = a[order]
    return a[: order.size]


def distributed_rank(file_meta: dict) -> int | None:
    """Return the rank a Kineto file's top-level keys give it (``distributedInfo.rank``), or None."""
    dist = file_meta.get("distributedInfo")
    return _as_int(dist.get("rank")) if isinstance(dist, dict) else None


def _distributed_shape(file_meta: dict) -> tuple[int, int] | None:
    """Return (rank, world size) from a Kineto file's ``distributedInfo``, or None where it lacks either."""
    dist = file_meta.get("distributedInfo")
    if not isinstance(dist, dict):
        return None
    rank, world = _as_int(dist.get("rank")), _as_int(dist.get("world_size"))
    return None if rank is None or world is None else (rank, world)


def _as_int(value) -> int | None:
    """Return value as an int when it is one (or a string of one), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


def _rebase(ts: np.ndarray, base: int) -> np.ndarray:
    """Return ts - base in place, leaving nulls as they are."""
    missing = ts == N64
    ts -= base
    ts[missing] = N64
    return ts


def _categories(
    cat_ids: np.ndarray, strings: list[str], name_ids: np.ndarray | None = None
) -> tuple[np.ndarray, list[str], np.ndarray]:
    """Return (normalised category codes, their strings, kind codes), each normalisation done once per
    distinct string. With `name_ids`, the profiler's step ranges (``ProfilerStep#N``) are annotations
    whatever their category: PyTorch 1.x wrote them as operators (category ``Operator``), later versions as
    ``user_annotation``; as operators they would be the top-level op of everything inside them. Without
    (a part's first pass, which looks only at runtime and GPU kinds), such steps stay operators."""
    norm_index: dict[str, int] = {}
    # the last slot of each map is for null (-1) codes
    cat_map = np.full(len(strings) + 1, -1, np.int32)
    for i in used_codes(cat_ids, len(strings)).tolist():
        cat_map[i] = norm_index.setdefault(normalise_category(strings[i]), len(norm_index))
    kind_map = np.append(kind_codes(norm_index), np.int8(KIND_CODE["other"]))  # null category: other
    steps = None
    if name_ids is not None:
        step_ids = [i for i, s in enumerate(strings) if s.startswith("ProfilerStep#")]
        if step_ids:
            steps = (name_ids, _code_set(step_ids, len(strings) + 1))  # the last slot: null names
    cats, kinds = codes_and_kinds(cat_ids, cat_map, kind_map, steps)
    return cats, list(norm_index), kinds


def _is_rocm(file_meta: dict, kind: np.ndarray, name_ids: np.ndarray, strings: list[str]) -> bool:
    """Whether the trace was recorded on ROCm: roctracer's version in the file's keys, or HIP runtime calls."""
    if "roctracer_version" in file_meta or "hip_runtime_version" in file_meta:
        return True
    runtime = used_codes(name_ids[kind == KIND_CODE["runtime"]], len(strings))
    return any(strings[i].startswith("hip") for i in runtime.tolist())


def work_item_launches(
    kind: np.ndarray, name_ids: np.ndarray, correlation: np.ndarray, strings: list[str]
) -> np.ndarray:
    """Return the distinct correlation ids of the runtime calls named in :data:`WORK_ITEM_LAUNCHES` (their
    kernels' grids are in work-items), from the events' kind codes, name ids and correlation ids in file
    order: what :func:`grids_in_workgroups` matches a file's kernels against."""
    is_runtime = kind == KIND_CODE["runtime"]
    names = [i for i in used_codes(name_ids[is_runtime], len(strings)).tolist() if strings[i] in WORK_ITEM_LAUNCHES]
    if not names:
        return np.empty(0, np.int64)
    corr = correlation[is_runtime & np.isin(name_ids, names)]
    return np.unique(corr[corr != N64]).astype(np.int64, copy=False)


def _memory_gpus(ids: tuple[np.ndarray, np.ndarray], types: tuple[np.ndarray, np.ndarray]) -> list[int]:
    """Return the GPU device indexes that the trace's [memory] events name (Device Id where Device Type is
    a GPU), given the (rows, values) of both arguments."""
    by_row = np.argsort(types[0])
    t_rows, t_vals = types[0][by_row], types[1][by_row]
    pos = np.minimum(np.searchsorted(t_rows, ids[0]), max(t_rows.size - 1, 0))
    if t_rows.size == 0:
        return []
    gpu = (t_rows[pos] == ids[0]) & np.isin(t_vals[pos], GPU_DEVICE_TYPES)
    return np.unique(ids[1][gpu]).tolist()


def device_values(r: np.ndarray, v: np.ndarray, gpu_rows: np.ndarray, pid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return (rows, values) of the device column before ROCm's agent ids are mapped: the args' values
    (`r`, `v`), and for GPU events (`gpu_rows`) without one, the pid where it can be a device."""
    return _fill_sparse(r, v, gpu_rows, pid[gpu_rows], _is_device)


def _agents_as_devices(
    agents: np.ndarray,
    meta: dict,
    memory_gpus: list[int],
    rank: tuple[int, int] | None,
    every_agent: np.ndarray | None = None,
) -> np.ndarray:
    """Return the device indexes of a ROCm trace's GPU events from their agent ids (see
    :mod:`gpuan.trace.kineto.agents`), noting the map and its evidence in `meta`. The map is made from
    `every_agent` (the whole file's, for a part of it), else from `agents`."""
    uniq, inverse = np.unique(agents, return_inverse=True)
    known = uniq if every_agent is None else every_agent
    ids = [p["id"] for p in meta["device_properties"] if isinstance(p.get("id"), int)]
    mapping, basis = agent_devices(known.tolist(), ids, memory_gpus, rank)
    if not mapping:
        return agents
    meta["device_agents"] = {"agents": {str(d): a for a, d in sorted(mapping.items())}, "basis": basis}
    return np.array([mapping.get(int(a), int(a)) for a in uniq], np.int64)[inverse.ravel()]


def _is_device(pid: np.ndarray) -> np.ndarray:
    """Return where a GPU event's pid can be its device index (Kineto writes the device as the pid)."""
    return (pid >= 0) & (pid < 4096)


def _is_id(v: np.ndarray) -> np.ndarray:
    """Return where v holds a value (not the null marker)."""
    return v != N64


def _fill_sparse(idx, vals, rows, fallback, ok) -> tuple[np.ndarray, np.ndarray]:
    """Return (rows, values) of a sparse column: the given values, plus `fallback` on `rows` that have
    none (where ok(fallback) holds) - e.g. a GPU event's device from its pid when args lack it."""
    missing = ~np.isin(rows, idx) & ok(fallback)
    all_idx = np.concatenate([idx, rows[missing]])
    all_vals = np.concatenate([vals.astype(np.int64), fallback[missing].astype(np.int64)])
    return all_idx, all_vals


def _trace_metadata(file_meta: dict, source: str) -> dict:
    """Return gpuan's metadata from the file's top-level keys."""
    meta = {"source": source, "format": "kineto"}
    props, dist = file_meta.get("deviceProperties"), file_meta.get("distributedInfo")
    meta["device_properties"] = [p for p in props if isinstance(p, dict)] if isinstance(props, list) else []
    meta["distributed_info"] = dist if isinstance(dist, dict) else {}
    meta["_file_base_ns"] = _as_int(file_meta.get("baseTimeNanoseconds")) or 0
    extra = {k: v for k, v in file_meta.items() if k not in ("deviceProperties", "distributedInfo", "INFO")}
    meta["file"] = extra
    return meta


def _resolve_ids(nums: np.ndarray, strs: tuple[np.ndarray, np.ndarray], strings: list[str], named: dict[int, str]):
    """Return pid or tid as int64 (in place of `nums`): numbers as they are; strings that hold a number
    ("7", "stream 7") as that number; other strings ("Spans") as synthetic negative ids, recorded in
    `named`. `strs` holds the (rows, string ids) of the values that were strings."""
    rows, sids = strs
    if rows.size == 0:
        return nums
    lookup = np.zeros(len(strings), np.int64)
    for i in np.unique(sids):
        lookup[i] = _id_of_string(strings[i], named)
    nums[rows] = lookup[sids]
    return nums


def _id_of_string(text: str, named: dict[int, str]) -> int:
    """Return the pid/tid for a string one: its number ("7", "stream 7"), else a synthetic id below
    SYNTHETIC_ID_BASE, the same for the same text, recorded in `named`."""
    s = text.strip()
    m = re.fullmatch(r"(?:stream\s*)?(-?\d+)", s, flags=re.IGNORECASE)
    if m:
        return int(m.group(1))
    for k, v in named.items():
        if v == s:
            return k
    ident = SYNTHETIC_ID_BASE - len(named)
    named[ident] = s
    return ident


def check_complete_events(
    ts: np.ndarray, dur: np.ndarray, ph: np.ndarray, source: str, first_row: int = 0, whole_file: bool = True
) -> None:
    """Raise :class:`TraceError` if complete ("X") events have negative durations, or none of them has a
    timestamp: such a trace cannot be placed on a timeline. (A few events without ts or dur are kept,
    with nulls, as other Chrome-trace readers keep them.) For a part of a file (`whole_file` False, its
    rows from `first_row` on), only the durations are checked."""
    complete = ph == ord("X")
    negative = complete & (dur != N64) & (dur < 0)
    n = int(np.count_nonzero(negative))
    if n:
        first = first_row + int(np.flatnonzero(negative)[0])
        raise TraceError(
            source, f"{n:,} complete events have a negative duration (dur); the first is traceEvents[{first}]"
        )
    if whole_file:
        check_timed(bool(complete.any()), bool((ts[complete] != N64).any()), source)


def check_timed(complete: bool, timed: bool, source: str) -> None:
    """Raise :class:`TraceError` if the trace has complete events (`complete`) but none with a timestamp
    (`timed`)."""
    if complete and not timed:
        raise TraceError(source, "no complete event has a timestamp (ts)")


def _complete_durations(ts, dur, ph, pid, tid, paired=None):
    """Return (ts, dur, keep): instants get duration 0; B/E pairs become one event with a duration
    (the E rows are dropped: keep is a mask, or None when nothing is dropped). `paired`, for a part of a
    file, is (file rows of the paired B events, their durations, the part's first file row)."""
    instant = (ph == ord("i")) | (ph == ord("I"))
    dur[instant & (dur == N64)] = 0
    begins = np.flatnonzero(ph == ord("B"))
    ends = np.flatnonzero(ph == ord("E"))
    if begins.size == 0 and ends.size == 0:
        return ts, dur, None
    if paired is None:
        rows, durations = pair_begin_end(begins, ends, ts, pid, tid)
    else:  # pairs found over the whole file, some of them across parts
        file_rows, file_durations, first = paired
        at = slice(*np.searchsorted(file_rows, [first, first + ts.size]))
        rows, durations = file_rows[at] - first, file_durations[at]
    dur[rows] = durations
    keep = np.ones(ts.size, bool)
    keep[ends] = False
    return ts, dur, keep


def _base_time(ts: np.ndarray, flow_ts: np.ndarray | None) -> int:
    """Return the earliest timestamp of the trace (its time zero), in the file's ns."""
    lows = [_earliest(a) for a in (ts, flow_ts) if a is not None]
    lows = [t for t in lows if t is not None]
    return min(lows) if lows else 0


def _earliest(ts: np.ndarray) -> int | None:
    """Return the smallest timestamp that is not null, None if there is none."""
    if ts.size == 0:
        return None
    low = int(ts.min())  # one pass; nulls are the int64 minimum, so only a column with nulls needs a mask
    if low != N64:
        return low
    timed = ts[ts != N64]
    return int(timed.min()) if timed.size else None


def _memcpy_kinds(name_ids, arg_kind, kind, strings) -> pa.Array:
    """Return the memcpy direction (HtoD, DtoH, DtoD, HtoH, PtoP, ...) of memcpy events, from the name
    ("Memcpy HtoD (Pageable -> Device)") or, for ROCm, from the "kind" argument; each distinct name and
    argument read once, whatever the number of memcpy rows."""
    rows = np.flatnonzero(kind == KIND_CODE["memcpy"])
    index: dict[str, int] = {}

    def codes_of(ids: np.ndarray, direction: Callable[[str], str | None]) -> np.ndarray:
        """Return the code of each string id's direction (-1 for none, and for null ids, -1)."""
        lookup = np.full(len(strings) + 1, -1, np.int64)  # the last slot: null ids
        for i in used_codes(ids, len(strings)).tolist():
            text = direction(strings[i])
            lookup[i] = index.setdefault(text, len(index)) if text else -1
        return lookup[ids]

    codes = codes_of(name_ids[rows], _kind_from_name)
    a_idx, a_ids = arg_kind
    by_row = np.argsort(a_idx)
    a_idx, a_ids = a_idx[by_row], a_ids[by_row]
    if (codes < 0).any() and a_idx.size:
        pos = np.searchsorted(a_idx, rows)
        pos = np.minimum(pos, a_idx.size - 1)
        has = (a_idx[pos] == rows) & (codes < 0)
        codes[has] = codes_of(a_ids[pos[has]], _kind_from_arg)
    return dict_column(codes, list(index), idx=rows, length=kind.size)


def _kind_from_name(name: str) -> str | None:
    """Return the direction in a memcpy name ("Memcpy HtoD (Pageable -> Device)" -> "HtoD"), or None."""
    m = _MEMCPY_KIND.match(name)
    return m.group(1) if m else None


def _kind_from_arg(value: str) -> str | None:
    """Return the direction in ROCm's memcpy "kind" argument ("HtoD", or a hipMemcpyKind number)."""
    v = value.strip('"')
    return _ROCM_MEMCPY_KIND.get(v, v if v.isalpha() else None)


def _process_names(rows, strings, ids_named) -> dict:
    """Return process/thread names, labels and sort indexes from the 'M' events."""
    procs: dict[str, dict] = {}
    threads: dict[str, dict] = {}

    def ident(num: int, s: int) -> int:
        return num if num != N64 else _id_of_string(strings[s] if s >= 0 else "", ids_named)

    for pid_n, tid_n, pid_s, tid_s, name, arg_name, arg_labels, sort_index in rows:
        what = strings[name] if name >= 0 else ""
        pid = ident(pid_n, pid_s)
        if what.startswith("process_"):
            entry = procs.setdefault(str(pid), {})
        elif what.startswith("thread_"):
            entry = threads.setdefault(f"{pid}:{ident(tid_n, tid_s)}", {})
        else:
            continue
        if arg_name >= 0:
            entry["name"] = strings[arg_name]
        if arg_labels >= 0:
            entry["labels"] = strings[arg_labels]
        if sort_index != N64:
            entry["sort_index"] = sort_index
    return {"processes": procs, "threads": threads}


def _flow_table(f: dict, strings, ids_named, base: int, rank) -> pa.Table:
    """Return the flow table from the scanned flow rows (ids resolved, times on the trace's base)."""
    if not f:
        return FLOW_SCHEMA.empty_table()

    def as_sparse(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rows = np.flatnonzero(a >= 0)
        return rows, a[rows]

    pid = _resolve_ids(f["pid"], as_sparse(f["pid_str"]), strings, ids_named)
    tid = _resolve_ids(f["tid"], as_sparse(f["tid_str"]), strings, ids_named)
    n = pid.size
    phase = np.searchsorted(np.array([ord("f"), ord("s"), ord("t")]), f["phase"].astype(np.int64))
    cols = {
        "id": int_column(f["id"], N64, pa.int64()),
        "cat": dict_column(f["cat"], strings),
        "phase": pa.DictionaryArray.from_arrays(pa.array(phase.astype(np.int8)), pa.array(["f", "s", "t"])),
        "ts": int_column(_rebase(f["ts"], base), N64, pa.int64()),
        "pid": int_column(pid, N64, pa.int64()),
        "tid": int_column(tid, N64, pa.int64()),
    }
    if rank is not None:
        cols["rank"] = pa.array(np.full(n, int(rank), np.int32))
    return build_table(cols, n, FLOW_SCHEMA)
