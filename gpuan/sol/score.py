"""Speed-of-light scoring: the ops of a trace with their measured time, then FLOPs, bytes, roofline time,
bound and efficiency for every one of them as whole-column arithmetic (numpy, or CuPy on the GPU).

Two steps, so that each can be used alone: :func:`trace_ops` turns a trace into one row per scored op
(what ran, its shapes, its phase, its measured time); :func:`score_ops` scores such a table (the live
tracker builds the same table from a running PyTorch job).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from gpuan.devices.model import Ceilings
from gpuan.engine import Engine, resolve
from gpuan.engine.intervals import busy_time
from gpuan.sol.costs import CATEGORIES, Call, Cost, cost
from gpuan.sol.dtypes import dtype_of
from gpuan.sol.link import phase_paths, phases_of
from gpuan.sol.roofs import Roofs, peak_key, roofs_for
from gpuan.sol.schemas import functional
from gpuan.trace.launch import callers, group_ids, ints, link
from gpuan.trace.nesting import ancestor_where, enclosing
from gpuan.trace.table import Trace, is_one_of

#: kernel names of tensor-core GEMMs/convolutions, which for an FP32 op mean TF32 (cuBLAS "tf32" kernels,
#: CUTLASS "tensorop_s1688"/"tensorop_s16816" FP32-in kernels)
TF32_KERNELS = r"(?i)tf32|tensorop_s"

#: an op whose roofline time is below this cannot be faster than a kernel's fixed cost (launch, ramp-up,
#: tail): it is latency bound, whatever its FLOPs and bytes
LATENCY_NS = 3000.0
BOUNDS = ("compute", "memory", "latency", "unmodelled", "memory (L2)")
#: the GPU activities that ops are measured by; a trace without any is scored as a CPU trace
ACTIVITY_KINDS = ("kernel", "memcpy", "memset")
#: autograd nodes whose recorded input, the incoming gradient, the ops under them read expanded (a stride-0
#: view) to the forward input's shape: the backward of mean and sum
EXPANDING_BACKWARD = r"^(Mean|Sum)Backward\d*$"

_STR = pa.dictionary(pa.int32(), pa.string())
#: the table :func:`score_ops` takes: one row per op
OPS_SCHEMA = pa.schema(
    [
        ("name", _STR),
        ("layer", _STR),  # module class where known (live tracker), else null: the category is used
        ("phase", _STR),
        ("input_dims", _STR),
        ("input_types", _STR),
        ("concrete_inputs", _STR),
        ("rank", pa.int32()),
        ("ts", pa.int64()),
        ("measured_ns", pa.int64()),
        ("kernels", pa.int32()),
        ("copy_bytes", pa.int64()),  # bytes of an op whose GPU work is only memcpy/memset (if recorded), else null
        ("copy_over_link", pa.bool_()),  # the op's GPU work is only copies and they cross the host link
        ("tf32", pa.bool_()),  # an FP32 op whose kernels run on tensor cores (TF32), judged by their names
        ("thread", pa.int64()),  # the CPU thread that called the op (its calls' order), null where unknown
        # the shapes and types the op that called this one recorded (a backward's gradients have the shapes of
        # the tensors it records), null at top level
        ("caller_dims", _STR),
        ("caller_types", _STR),
        # bytes of the incoming gradient of the mean/sum backward that called the op, else null: its inputs
        # larger than that are the gradient expanded, read once
        ("grad_bytes", pa.int64()),
    ]
)


@dataclass(frozen=True)
class Scored:
    """``ops``: one row per op (the columns of :data:`OPS_SCHEMA` plus category, dtype, peak, flops, bytes,
    intensity, estimated_ns, bound, efficiency, model_error, lost_ns); ``busy_ns``: the GPU's busy time
    (union of all its activities, per GPU), or on a CPU trace the time of the top-level ops.

    Every share is taken of :attr:`op_ns`, the ops' measured times summed, so that the rows of a table add
    up to 100 %. It differs from the busy time: ops on concurrent streams overlap (their sum exceeds the
    union, by :attr:`overlap_ns`), and on the CPU top-level ops spend time outside the scored ops."""

    ops: pa.Table
    roofs: Roofs
    busy_ns: int
    source: str = ""
    #: the ops ran on the CPU (a trace without GPU activity, or the live tracker on the CPU)
    on_cpu: bool = False

    @property
    def op_ns(self) -> int:
        """The ops' measured times summed: what every share is a share of."""
        return int(pc.sum(self.ops["measured_ns"]).as_py() or 0)

    @property
    def overlap_ns(self) -> int:
        """Summed op time minus busy time: > 0 where ops ran at the same time (concurrent streams), < 0 where
        busy time lies outside every scored op (CPU traces)."""
        return self.op_ns - self.busy_ns

    @property
    def modelled_share(self) -> float:
        """The share of summed op time spent in modelled ops."""
        modelled = pc.sum(self.ops.filter(pc.invert(self.ops["model_missing"]))["measured_ns"]).as_py()
        return (modelled or 0) / self.op_ns if self.op_ns else 0.0


def score(
    trace: Trace,
    *,
    gpu: str | None = None,
    cpu: bool = False,
    ceilings: str | Ceilings = "datasheet",
    tf32: bool = False,
    engine: Engine | str | None = None,
) -> Scored:
    """Return every op of `trace` scored against the roofs of the GPU named `gpu` (default: the GPU the
    trace recorded), or with `cpu` against this machine's CPU as ``gpuan sol calibrate --cpu`` measured it;
    `ceilings` "datasheet" peaks or the loaded ceilings file of ``gpuan sol calibrate``
    (:func:`gpuan.devices.ceilings.read_ceilings`). `tf32` scores FP32 matrix ops against TF32 tensor
    cores; `engine` as for :func:`gpuan.engine.resolve`."""
    source = str(trace.metadata.get("source", ""))
    roofs = roofs_for(trace.metadata, source, gpu=gpu, cpu=cpu, ceilings=ceilings)
    return scored_ops(trace_ops(trace), roofs, source, tf32=tf32, engine=engine)


def scored_ops(
    found: TraceOps, roofs: Roofs, source: str, *, tf32: bool = False, engine: Engine | str | None = None
) -> Scored:
    """Return the ops `found` in a trace (:func:`trace_ops`, or :func:`merged_ops` of a run's ranks)
    scored against `roofs` (see :func:`score`)."""
    scored = score_ops(found.ops, roofs, tf32=tf32, resolution_ns=found.resolution_ns, engine=engine)
    return Scored(scored, roofs, found.busy_ns, source, found.on_cpu)


# --- trace → ops ----------------------------------------------------------------------------------------


def _strings(table: pa.Table, name: str) -> pa.Array:
    return table[name].combine_chunks().cast(_STR) if table.num_rows else pa.array([], _STR)


class TraceOps(NamedTuple):
    """``ops``: one row per op to score (:data:`OPS_SCHEMA`); ``busy_ns``: the busy time they fall in;
    ``resolution_ns``: the resolution of the trace's clock (1000 where every time is a whole µs);
    ``on_cpu``: the trace has no GPU activity; ``launched``: the first rows that are ops (the rest are GPU
    activities that no op launched)."""

    ops: pa.Table
    busy_ns: int
    resolution_ns: int
    on_cpu: bool
    launched: int = 0


def _resolution(start: np.ndarray, end: np.ndarray) -> int:
    return 0 if (start % 1000).any() or (end % 1000).any() else 1000


def trace_ops(trace: Trace, gpu_activity: bool | None = None) -> TraceOps:
    """Return the ops of `trace` to score, with their measured time.

    With GPU activity: the leaf ops that launched kernels, memcpys or memsets, each measured as the union of
    its activities' intervals, plus one row per activity no op launched (it counts as unmodelled). Without
    (a CPU trace): the outermost ops that have a cost model, each measured by its duration, plus the
    top-level ops that hold none of them. `gpu_activity` says which (default: whether `trace` has GPU
    activity; a rank of a run takes the run's answer)."""
    activities = trace.of_kind(*ACTIVITY_KINDS)
    ops = trace.of_kind("cpu_op")
    if gpu_activity is None:
        gpu_activity = activities.num_rows > 0
    if gpu_activity and not activities.num_rows:  # a rank without GPU work in a run with some
        return TraceOps(OPS_SCHEMA.empty_table(), 0, 0, False)
    phases, paths = phase_paths(trace.of_kind("annotation"))
    if gpu_activity:
        return _gpu_ops(trace, activities, ops, phases, paths)
    return _cpu_ops(ops, phases, paths)


#: the tables of :func:`rank_ops`: a rank's ops (``lone``: a GPU activity no op launched), and its totals
#: (``timed``: the events its clock resolution was judged on)
RANK_OPS_SCHEMAS = {
    "ops": OPS_SCHEMA.append(pa.field("lone", pa.bool_())),
    "totals": pa.schema([("busy_ns", pa.int64()), ("resolution_ns", pa.int64()), ("timed", pa.int64())]),
}
#: the ops table's columns whose words are those of an event column (the same dictionary), and whether
#: only rows of ops (not lone GPU activities) take them from there
_EVENT_WORDS = {
    "name": ("name", False),
    "input_dims": ("input_dims", True),
    "input_types": ("input_types", True),
    "concrete_inputs": ("concrete_inputs", True),
    "caller_dims": ("input_dims", True),
    "caller_types": ("input_types", True),
}
#: the event columns whose dictionaries the ops table carries (:func:`merged_ops`)
EVENT_WORDS = sorted({column for column, _ in _EVENT_WORDS.values()})


def rank_ops(trace: Trace, gpu_activity: bool) -> dict[str, pa.Table]:
    """Return one rank's part of a run's ops (:data:`RANK_OPS_SCHEMAS`): :func:`trace_ops` of the rank (on
    the run's clock; `gpu_activity`: whether any rank of the run has GPU activity), with the totals
    :func:`merged_ops` adds up."""
    found = trace_ops(trace, gpu_activity)
    lone = np.arange(found.ops.num_rows) >= found.launched
    timed = len(trace.of_kind(*(ACTIVITY_KINDS if gpu_activity else ("cpu_op",))))
    totals = {"busy_ns": [found.busy_ns], "resolution_ns": [found.resolution_ns], "timed": [timed]}
    return {
        "ops": found.ops.append_column("lone", pa.array(lone)),
        "totals": pa.table(totals, schema=RANK_OPS_SCHEMAS["totals"]),
    }


def merged_ops(parts: dict[str, pa.Table], gpu_activity: bool, words: dict[str, pa.Array]) -> TraceOps:
    """Return :func:`trace_ops` of a merged run from its ranks' :func:`rank_ops` (`parts`, in rank order):
    the ops of every rank, then the GPU activities that no op launched of every rank, the busy times summed,
    the clock's resolution that of every rank. `words` are the merged event table's dictionaries of
    :data:`EVENT_WORDS` (as :func:`gpuan.trace.dealt.unified_dictionaries` gives them), which the columns
    taken from the events carry; the phases' dictionary is in the order they first appear."""
    ops, totals = parts["ops"], parts["totals"]
    lone = ops["lone"].to_numpy(zero_copy_only=False)
    ops = ops.take(pa.array(np.argsort(lone, kind="stable")))
    launched = int((~lone).sum())
    columns = {}
    for field in OPS_SCHEMA:
        column = ops[field.name].combine_chunks()
        if field.name in _EVENT_WORDS:
            event_column, only_ops = _EVENT_WORDS[field.name]
            holds = launched if only_ops else ops.num_rows
            column = _in_dictionary(column, words[event_column] if holds else pa.array([], pa.string()))
        elif field.name == "phase":
            column = column.cast(pa.string()).dictionary_encode()
        columns[field.name] = column
    timed = totals["timed"].to_numpy() > 0
    resolution = int(totals["resolution_ns"].to_numpy()[timed].min()) if timed.any() else 0
    busy = int(pc.sum(totals["busy_ns"]).as_py() or 0)
    return TraceOps(pa.table(columns).cast(OPS_SCHEMA), busy, resolution, not gpu_activity, launched)


def _in_dictionary(column: pa.Array, words: pa.Array) -> pa.DictionaryArray:
    """Return a string (or dictionary) `column` coded into the dictionary `words`, which holds its words."""
    values = column.cast(pa.string())
    return pa.DictionaryArray.from_arrays(pc.index_in(values, value_set=words), words)


def _gpu_ops(trace: Trace, activities: pa.Table, ops: pa.Table, phases: pa.Table, paths: np.ndarray) -> TraceOps:
    runtime = trace.of_kind("runtime")
    links = link(activities, runtime, ops, trace.flows)
    op_of = links.op_of_activity
    launched = np.unique(op_of[op_of >= 0])
    lone = np.flatnonzero(op_of < 0)
    # group: position among the launching ops, then one group per activity that no op launched
    group = np.empty(op_of.shape[0], np.int64)
    group[op_of >= 0] = np.searchsorted(launched, op_of[op_of >= 0])
    group[lone] = launched.size + np.arange(lone.size)
    n = launched.size + lone.size

    start = ints(activities, "ts")
    end = start + ints(activities, "dur", 0)
    measured = busy_time(group, start, end, n)
    # each GPU (a rank's device) is busy on its own
    gpu = group_ids(ints(activities, "rank", 0), ints(activities, "device", 0))
    busy = int(busy_time(gpu, start, end, int(gpu.max()) + 1).sum())

    # ops whose GPU work is only copies and fills are bounded by the bytes they moved
    # kinds, copy kinds and names decided once per dictionary entry, then gathered by the codes
    is_copy = is_one_of(activities["kind"], ["memcpy", "memset"])
    is_memcpy = is_one_of(activities["kind"], ["memcpy"])
    over_link = _lower_in(activities["memcpy_kind"], ("htod", "dtoh", "htoh")) & is_memcpy
    nbytes = ints(activities, "bytes")
    all_copy = np.bincount(group, weights=~is_copy, minlength=n) == 0
    bytes_known = all_copy & (np.bincount(group, weights=nbytes < 0, minlength=n) == 0)
    copy_bytes = np.bincount(group, weights=np.maximum(nbytes, 0), minlength=n).astype(np.int64)
    any_link = all_copy & (np.bincount(group, weights=over_link, minlength=n) > 0)
    names = activities["name"].combine_chunks()
    tensor_core = pc.match_substring_regex(names.dictionary, TF32_KERNELS).take(names.indices)
    tf32 = np.bincount(group, weights=tensor_core.fill_null(False).to_numpy(zero_copy_only=False), minlength=n) > 0

    launched_ops = ops.take(pa.array(launched))
    parent = callers(ops)
    grad = np.concatenate([_expanded_gradient(ops, parent)[launched], -np.ones(lone.size)])
    lone_acts = activities.take(pa.array(lone))
    phase = np.concatenate(
        [
            phases_of(launched_ops, phases, paths),
            _activity_phases(trace, runtime, lone_acts, links, lone, phases, paths),
        ]
    )
    table = pa.table(
        {
            "name": pa.concat_arrays([_strings(launched_ops, "name"), _strings(lone_acts, "name")]),
            "layer": pa.nulls(n, _STR),
            "phase": pa.array(phase, pa.string()).dictionary_encode(),
            "input_dims": pa.concat_arrays([_strings(launched_ops, "input_dims"), pa.nulls(lone.size, _STR)]),
            "input_types": pa.concat_arrays([_strings(launched_ops, "input_types"), pa.nulls(lone.size, _STR)]),
            "concrete_inputs": pa.concat_arrays([_strings(launched_ops, "concrete_inputs"), pa.nulls(lone.size, _STR)]),
            "rank": np.concatenate([ints(launched_ops, "rank", 0), ints(lone_acts, "rank", 0)]).astype(np.int32),
            "ts": np.concatenate([ints(launched_ops, "ts"), start[lone]]),
            "measured_ns": measured.astype(np.int64),
            "kernels": np.bincount(group, minlength=n).astype(np.int32),
            "copy_bytes": pa.array(copy_bytes, mask=~bytes_known),
            "copy_over_link": any_link,
            "tf32": tf32,
            "thread": pa.array(np.concatenate([ints(launched_ops, "tid", 0), np.zeros(lone.size, np.int64)]),
                               mask=np.arange(n) >= launched.size),
            "grad_bytes": _nulls_below(grad),
            **{f"caller_{c}": pa.concat_arrays([_callers(ops, parent, launched, c), pa.nulls(lone.size, _STR)])
               for c in ("dims", "types")},
        }
    )  # fmt: skip
    ops_table = table.select(OPS_SCHEMA.names).cast(OPS_SCHEMA)
    return TraceOps(ops_table, busy, _resolution(start, end), False, launched.size)


def _lower_in(column: pa.ChunkedArray, values: tuple[str, ...]) -> np.ndarray:
    """Return whether each value of a string column, lower-cased, is one of `values` (false where null),
    deciding once per distinct value of a dictionary column."""
    col = column.combine_chunks()
    if not pa.types.is_dictionary(col.type):
        strings = col.cast(pa.string()).fill_null("").to_numpy(zero_copy_only=False)
        return np.isin(np.char.lower(strings.astype(str)), values)
    hits = np.array([str(v).lower() in values for v in col.dictionary.to_pylist()] + [False], bool)
    return hits[pc.fill_null(col.indices, -1).to_numpy(zero_copy_only=False)]


def _activity_phases(trace, runtime, activities, links, rows, phases, paths) -> np.ndarray:
    """Phases of activities no op launched: from the runtime call that launched them, else the GPU-side
    annotation (``gpu_user_annotation``) that holds them on their stream."""
    if not activities.num_rows:
        return np.empty(0, object)
    out = np.full(activities.num_rows, "", object)
    runtime_rows = links.runtime_of_activity[rows]
    has = runtime_rows >= 0
    if has.any():
        out[has] = phases_of(runtime.take(pa.array(runtime_rows[has])), phases, paths)
    gpu_phases, gpu_paths = phase_paths(trace.of_kind("gpu_annotation"))
    if gpu_phases.num_rows and (~has).any():
        out[~has] = phases_of(activities.filter(pa.array(~has)), gpu_phases, gpu_paths)
    return out


def _cpu_ops(ops: pa.Table, phases: pa.Table, paths: np.ndarray) -> TraceOps:
    if not ops.num_rows:
        return TraceOps(OPS_SCHEMA.empty_table(), 0, 0, True)
    start = ints(ops, "ts")
    end = start + ints(ops, "dur", 0)
    group = group_ids(*(ints(ops, c, 0) for c in ("rank", "pid", "tid")))
    parent = enclosing(group, start, end)
    modelled = _has_model(ops)
    above = ancestor_where(parent, modelled)
    strict = np.where(parent >= 0, above[np.maximum(parent, 0)], -1)
    scored = modelled & (strict < 0)
    top = parent < 0
    root = ancestor_where(parent, top)
    holds_scored = np.zeros(ops.num_rows, bool)
    holds_scored[root[scored]] = True
    rows = np.flatnonzero(scored | (top & ~holds_scored))
    busy = int(busy_time(group[top], start[top], end[top], int(group.max()) + 1).sum())
    chosen = ops.take(pa.array(rows))
    table = pa.table(
        {
            "name": _strings(chosen, "name"),
            "layer": pa.nulls(rows.size, _STR),
            "phase": pa.array(phases_of(chosen, phases, paths), pa.string()).dictionary_encode(),
            "input_dims": _strings(chosen, "input_dims"),
            "input_types": _strings(chosen, "input_types"),
            "concrete_inputs": _strings(chosen, "concrete_inputs"),
            "rank": ints(chosen, "rank", 0).astype(np.int32),
            "ts": start[rows],
            "measured_ns": (end - start)[rows],
            "kernels": np.zeros(rows.size, np.int32),
            "copy_bytes": pa.nulls(rows.size, pa.int64()),
            "copy_over_link": np.zeros(rows.size, bool),
            "tf32": np.zeros(rows.size, bool),
            "thread": ints(chosen, "tid", 0),
            "grad_bytes": _nulls_below(_expanded_gradient(ops, parent)[rows]),
            "caller_dims": _callers(ops, parent, rows, "dims"),
            "caller_types": _callers(ops, parent, rows, "types"),
        }
    )
    return TraceOps(table.select(OPS_SCHEMA.names).cast(OPS_SCHEMA), busy, _resolution(start, end), True, rows.size)


def _nulls_below(values: np.ndarray) -> pa.Array:
    return pa.array(values.astype(np.int64), mask=values < 0)


def _callers(ops: pa.Table, parent: np.ndarray, rows: np.ndarray, what: str) -> pa.Array:
    """The ``input_{what}`` of the callers of the ops at `rows` (null at top level)."""
    up = parent[rows]
    column = _strings(ops, f"input_{what}")
    if not rows.size:
        return pa.array([], _STR)
    return column.take(pa.array(np.maximum(up, 0), mask=up < 0))


def _expanded_gradient(ops: pa.Table, parent: np.ndarray) -> np.ndarray:
    """Return per op the bytes of the incoming gradient of the mean or sum backward node
    (:data:`EXPANDING_BACKWARD`) it runs under, -1 where none or the node recorded no shape. `parent`: the
    ops' nesting (:func:`gpuan.trace.launch.callers`)."""
    out = np.full(ops.num_rows, -1, np.int64)
    if not ops.num_rows:
        return out
    node = pc.match_substring_regex(ops["name"].combine_chunks().cast(pa.string()), EXPANDING_BACKWARD)
    node = pc.and_(node, ops["input_dims"].combine_chunks().is_valid()).fill_null(False).to_numpy(zero_copy_only=False)
    if not node.any():
        return out
    above = np.where(parent >= 0, ancestor_where(parent, node)[np.maximum(parent, 0)], -1)
    dims, types = ops["input_dims"].combine_chunks(), ops["input_types"].combine_chunks()
    for row in np.unique(above[above >= 0]):  # each node's bytes at its own row, then one gather
        call = Call(_parse(dims[int(row)].as_py()), _parse(types[int(row)].as_py()), [])
        shape = call.shape(0) if call.dims else None
        if shape is not None:
            out[row] = math.prod(shape) * call.size(0)
    return np.where(above >= 0, out[above], -1)


def _has_model(ops: pa.Table) -> np.ndarray:
    """Whether each op's call has a cost model (decided once per distinct call)."""
    keys, uniques = _distinct_calls(ops)
    costs = _costs(uniques, 4)
    return np.array([c is not None for c in costs], bool)[keys] if len(costs) else np.zeros(ops.num_rows, bool)


# --- ops → scores ---------------------------------------------------------------------------------------

_CALL_COLUMNS = ("name", "input_dims", "input_types", "concrete_inputs")


def _distinct_calls(table: pa.Table, columns: tuple[str, ...] = _CALL_COLUMNS) -> tuple[np.ndarray, list[tuple]]:
    """Return (per row the index of its distinct call, the distinct calls as (name, dims, types, concrete)
    strings, or those of other `columns`). Done on dictionary codes, so 10M rows with a few thousand distinct
    calls take a hash pass."""
    codes, dictionaries = [], []
    for name in columns:
        col = table[name].combine_chunks()
        if not pa.types.is_dictionary(col.type):
            col = col.dictionary_encode()
        indices = col.indices if col.null_count == 0 else col.indices.fill_null(-1)
        codes.append(indices.to_numpy(zero_copy_only=False).astype(np.int64) + 1)
        dictionaries.append(col.dictionary.to_pylist())
    sizes = [len(d) + 1 for d in dictionaries]
    if np.prod(np.array(sizes, dtype=np.float64)) < 2**62:
        key = codes[0]
        for code, size in zip(codes[1:], sizes[1:]):
            key = key * size + code
        inverse, unique_keys = pd.factorize(key)
        parts = []
        for size in reversed(sizes[1:]):
            unique_keys, rest = np.divmod(unique_keys, size)
            parts.append(rest)
        parts.append(unique_keys)
        parts.reverse()
    else:
        unique_rows, inverse = np.unique(np.stack(codes, 1), axis=0, return_inverse=True)
        parts = list(unique_rows.T)
        inverse = inverse.ravel()
    uniques = [
        tuple(d[k - 1] if k > 0 else None for d, k in zip(dictionaries, combo))
        for combo in zip(*(p.tolist() for p in parts))
    ]
    return np.asarray(inverse, np.int64), uniques


def _parse(text: str | None) -> list:
    if not text:
        return []
    try:
        value = json.loads(text)
    except ValueError:
        return []
    return value if isinstance(value, list) else []


def _costs(uniques: list[tuple], list_bpe: int) -> list:
    out = []
    for name, dims, types, concrete in uniques:
        call = Call(_parse(dims), _parse(types), _parse(concrete), list_bpe)
        out.append(cost(name or "", call) if call.dims else None)
    return out


def _list_bpe(uniques: list[tuple]) -> int:
    """The most common floating-point element size among the calls (for tensor lists, whose type the
    profiler omits)."""
    sizes: dict[int, int] = {}
    for _, _, types, _ in uniques:
        for t in _parse(types):
            d = dtype_of(t)
            if d and d[0].startswith(("fp", "bf")):
                sizes[d[1]] = sizes.get(d[1], 0) + 1
    return max(sizes, key=sizes.get) if sizes else 4


def roofline(
    flops,
    nbytes,
    peak,
    bandwidth,
    xp=np,
    l2_bytes: float = 0,
    l2_bandwidth: float | np.ndarray = 0.0,
    resident_bytes: float | np.ndarray = 0,
) -> dict:
    """Return the roofline of ops with `flops`, `nbytes`, the arithmetic `peak` (FLOP/s) and DRAM
    `bandwidth` (bytes/s) that bound each: estimated_ns = max(F/peak, memory time)·1e9, intensity = F/B, and
    bound, the term that set the estimate (an index into :data:`BOUNDS`: 0 compute, 1 memory, 4 memory (L2);
    2 latency: estimated under :data:`LATENCY_NS`; 3 no model: a NaN peak), and resident_bytes, the r used
    (0 where the L2 roof does not apply).

    Memory time is B / bandwidth, except for an op with `resident_bytes` > 0 of its reads already in an L2
    of `l2_bytes` and `l2_bandwidth` (both > 0): every byte passes through L2 and only those not resident
    go to DRAM, so memory time = max(B / l2_bandwidth, (B − r) / bandwidth), r = min(resident_bytes,
    l2_bytes, B). Whole-array arithmetic in `xp` (numpy or cupy)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        t_compute = flops / peak * 1e9
        resident = xp.minimum(xp.minimum(resident_bytes, l2_bytes), nbytes)
        in_l2 = (xp.asarray(l2_bandwidth) > 0) & (resident > 0)
        t_l2 = nbytes / xp.where(in_l2, l2_bandwidth, 1.0) * 1e9
        t_dram = (nbytes - xp.where(in_l2, resident, 0)) / bandwidth * 1e9
        t_memory = xp.where(in_l2, xp.maximum(t_l2, t_dram), t_dram)
        estimated = xp.maximum(t_compute, t_memory)
        intensity = xp.where(nbytes > 0, flops / xp.where(nbytes > 0, nbytes, 1), xp.nan)
    bound = xp.where(t_compute >= t_memory, 0, xp.where(in_l2 & (t_l2 >= t_dram), 4, 1)).astype(xp.int8)
    bound[estimated < LATENCY_NS] = 2
    bound[xp.isnan(estimated)] = 3
    return {"estimated_ns": estimated, "intensity": intensity, "bound": bound,
            "resident_bytes": xp.where(in_l2, resident, 0.0) + xp.zeros_like(estimated)}  # fmt: skip


def efficiency(estimated_ns, measured_ns, xp=np, resolution_ns: float = 0) -> dict:
    """Return efficiency = estimated / measured (NaN where unmodelled or not measured), model_error
    (efficiency > 1: the model, not the op, is wrong) and lost_ns = measured − estimated. A clock of
    `resolution_ns` records a time up to that much short, so efficiency divides by measured + resolution."""
    measured = measured_ns.astype(xp.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        eff = estimated_ns / (measured + resolution_ns)
    eff[measured <= 0] = xp.nan
    return {"efficiency": eff, "model_error": eff > 1.0, "lost_ns": measured - estimated_ns}


def score_ops(
    ops: pa.Table,
    roofs: Roofs,
    *,
    tf32: bool = False,
    resolution_ns: float = 0,
    engine: Engine | str | None = None,
) -> pa.Table:
    """Return `ops` (:data:`OPS_SCHEMA`) with the score columns added: category, dtype, peak (the roof's
    key), flops, bytes, resident_bytes, intensity, estimated_ns, bound, efficiency, model_error, model_missing,
    lost_ns.

    FP32 matrix ops are scored against TF32 tensor cores when `tf32` is set, or when any FP32 GEMM of the
    table ran TF32 kernels (``allow_tf32`` is a process-wide switch). Copies over the host link are bounded
    by the link. The memory roof is DRAM's, or the hierarchical L2 roof (:func:`roofline`) for the bytes of an
    input that the op before it on its thread had just read or written (:func:`resident_bytes`); an op under
    a mean or sum backward reads the gradient it expands once (:func:`expanded_bytes`). Costs are modelled
    once per distinct call (and TF32 use); every op gathers its call's values, and the roofline is whole-column
    arithmetic over the ops."""
    engine = resolve(engine)
    call_of_op, calls = _distinct_calls(ops)
    costs = _costs(calls, _list_bpe(calls))
    per_call = _call_costs(costs, roofs, tf32)
    on_tf32 = _runs_tf32(ops, per_call, call_of_op)
    call_tensors = [_tensors(*call, modelled) for call, modelled in zip(calls, costs)]
    columns = _op_columns(ops, roofs, per_call, engine.asarray(2 * call_of_op + on_tf32), engine)
    # bytes the trace's context changes: an expanded gradient read once; resident reads of the L2 roof
    columns["bytes"] -= engine.asarray(expanded_bytes(call_of_op, ints(ops, "grad_bytes", -1), call_tensors))
    resident = engine.asarray(_resident_after_previous(ops, call_of_op, call_tensors))
    _override_copies(ops, columns, roofs, engine)
    line = roofline(
        columns["flops"], columns["bytes"], columns["rate"], columns["bandwidth"], engine.xp, roofs.l2_bytes,
        columns["l2_bandwidth"], resident,
    )  # fmt: skip
    measured = engine.asarray(ops["measured_ns"].combine_chunks().to_numpy(zero_copy_only=False))
    scores = efficiency(line["estimated_ns"], measured, engine.xp, resolution_ns)
    return _with_scores(ops, columns, line | scores, per_call, engine)


class _CallCosts(NamedTuple):
    """The costs of the distinct calls, each twice: as recorded (row 2u) and on TF32 tensor cores (row
    2u + 1). ``flops``/``bytes`` NaN where unmodelled; ``category``, ``dtype`` and ``peak`` are codes into
    :data:`CATEGORIES`, ``dtypes`` and ``peak_names`` (-1 none); ``rates`` the FLOP/s of each peak name, NaN
    last (the rate of code -1)."""

    flops: np.ndarray
    bytes: np.ndarray
    category: np.ndarray
    dtype: np.ndarray
    peak: np.ndarray
    dtypes: list[str]
    peak_names: list[str]
    rates: np.ndarray


def _call_costs(costs: list[Cost | None], roofs: Roofs, tf32: bool) -> _CallCosts:
    """Return the costs of the distinct calls (`costs`, None where unmodelled) and the roof each is held
    to, as recorded and on TF32 tensor cores; a call whose dtype `roofs` has no rate for stays unmodelled."""
    peak_names = sorted(roofs.flops)
    dtypes = sorted({c.dtype for c in costs if c is not None})
    rows = 2 * len(costs)
    flops, nbytes = np.full(rows, np.nan), np.full(rows, np.nan)
    category = np.full(rows, CATEGORIES.index("unmodelled"), np.int32)
    dtype, peak = np.full(rows, -1, np.int32), np.full(rows, -1, np.int32)
    for call, modelled in enumerate(costs):
        if modelled is None:
            continue
        for on_tensor_cores in (0, 1):
            key = peak_key(roofs, modelled.category, modelled.dtype, tf32 or bool(on_tensor_cores))
            if key is None:
                continue
            row = 2 * call + on_tensor_cores
            flops[row], nbytes[row] = modelled.flops, modelled.bytes
            category[row], dtype[row] = CATEGORIES.index(modelled.category), dtypes.index(modelled.dtype)
            peak[row] = peak_names.index(key)
    rates = np.array([roofs.flops[k] for k in peak_names] + [np.nan])
    return _CallCosts(flops, nbytes, category, dtype, peak, dtypes, peak_names, rates)


def _runs_tf32(ops: pa.Table, per_call: _CallCosts, call_of_op: np.ndarray) -> np.ndarray:
    """Return per op whether it runs on TF32 tensor cores: its kernels did, or any FP32 GEMM of the table
    ran TF32 kernels (``allow_tf32`` is a process-wide switch, so then every FP32 matrix op does)."""
    on_tf32 = _bools(ops, "tf32")
    fp32 = per_call.dtypes.index("fp32") if "fp32" in per_call.dtypes else -2
    fp32_gemm = (per_call.category == CATEGORIES.index("gemm")) & (per_call.dtype == fp32)
    if (on_tf32 & fp32_gemm[2 * call_of_op]).any():
        on_tf32[:] = True
    return on_tf32


def _resident_after_previous(
    ops: pa.Table, call_of_op: np.ndarray, call_tensors: list[tuple[dict, list]]
) -> np.ndarray:
    """Return per op the bytes of its input already in L2 after the op before it on its thread
    (:func:`resident_bytes`)."""
    caller_of_op, callers = _distinct_calls(ops, ("caller_dims", "caller_types"))
    caller_tensors = [_tensors(None, dims, types, None, None)[0] for dims, types in callers]
    return resident_bytes(call_of_op, caller_of_op, _previous(ops), call_tensors, caller_tensors)


def _op_columns(ops: pa.Table, roofs: Roofs, per_call: _CallCosts, variant_row, engine: Engine) -> dict:
    """Return per op (on the engine) its call's costs (`variant_row`: the row of :class:`_CallCosts` it
    gathers) and the roofs it is held to: flops, bytes, category, dtype, peak (codes), rate (FLOP/s),
    bandwidth and l2_bandwidth (bytes/s)."""
    xp = engine.xp
    columns = {
        name: xp.asarray(getattr(per_call, name))[variant_row]
        for name in ("flops", "bytes", "category", "dtype", "peak")
    }
    columns["rate"] = xp.asarray(per_call.rates)[columns["peak"]]
    columns["bandwidth"] = xp.full(ops.num_rows, roofs.memory_bandwidth)
    columns["l2_bandwidth"] = xp.full(ops.num_rows, roofs.l2_bandwidth)
    return columns


def _override_copies(ops: pa.Table, columns: dict, roofs: Roofs, engine: Engine) -> None:
    """Set, in `columns` (:func:`_op_columns`), what the trace gives beyond shapes: an op whose GPU work is
    only copies moved its recorded bytes and does no arithmetic (category "copy"); one whose copies cross
    the host link is bounded by the link's bandwidth, without an L2 roof."""
    xp = engine.xp
    copy = ops["copy_bytes"].combine_chunks()
    is_copy = copy.is_valid().to_numpy(zero_copy_only=False)
    over_link = _bools(ops, "copy_over_link")
    special = np.flatnonzero(is_copy | over_link)
    if not special.size:
        return
    at = engine.asarray(special)
    moved = copy.fill_null(0).to_numpy(zero_copy_only=False)[special].astype(np.float64)
    copy_rows = xp.asarray(is_copy[special])
    link_rows = xp.asarray(over_link[special])
    columns["flops"][at] = xp.where(copy_rows, 0.0, columns["flops"][at])
    columns["bytes"][at] = xp.where(copy_rows, xp.asarray(moved), columns["bytes"][at])
    columns["rate"][at] = xp.where(copy_rows, xp.inf, columns["rate"][at])
    columns["bandwidth"][at] = xp.where(link_rows, roofs.link_bandwidth, roofs.memory_bandwidth)
    columns["l2_bandwidth"][at] = xp.where(link_rows, 0.0, roofs.l2_bandwidth)
    columns["category"][at] = xp.where(copy_rows, CATEGORIES.index("copy"), columns["category"][at])
    columns["dtype"][at] = xp.where(copy_rows, -1, columns["dtype"][at])
    columns["peak"][at] = xp.where(copy_rows, -1, columns["peak"][at])


def _with_scores(ops: pa.Table, columns: dict, scores: dict, per_call: _CallCosts, engine: Engine) -> pa.Table:
    """Return `ops` with the score columns appended, on the host: the op columns (:func:`_op_columns`) and
    the roofline and efficiency ones (`scores`: :func:`roofline` | :func:`efficiency`)."""
    host = engine.to_host
    bound = host(scores["bound"]).astype(np.int32)
    appended = {
        "category": _dict(host(columns["category"]), CATEGORIES),
        "dtype": _dict(host(columns["dtype"]), per_call.dtypes),
        "peak": _dict(host(columns["peak"]), per_call.peak_names),
        "flops": host(columns["flops"]),
        "bytes": host(columns["bytes"]),
        "resident_bytes": host(scores["resident_bytes"]),
        "intensity": host(scores["intensity"]),
        "estimated_ns": host(scores["estimated_ns"]),
        "bound": _dict(bound, BOUNDS),
        "efficiency": host(scores["efficiency"]),
        "model_error": host(scores["model_error"]),
        "model_missing": bound == BOUNDS.index("unmodelled"),
        "lost_ns": host(scores["lost_ns"]),
    }
    for name, values in appended.items():
        ops = ops.append_column(name, values if isinstance(values, pa.Array) else pa.array(values))
    return ops


def _tensors(
    name: str | None, dims: str | None, types: str | None, concrete: str | None, modelled: Cost | None
) -> tuple[dict, list]:
    """Return the tensors of a call, each keyed by (shape, bytes per element): those it wrote or touched
    (every recorded one, in place and ``out=`` included, and the output its cost model derives) as {key:
    bytes}, and its inputs (without the ``out=`` outputs) as [(key, bytes)]."""
    call = Call(_parse(dims), _parse(types), _parse(concrete))
    n_inputs = len(functional(name or "", call.dims, call.types, call.concrete)[0])
    touched, inputs = {}, []
    for i in range(len(call.dims)):
        shape = call.shape(i)
        if shape:
            key = (tuple(shape), call.size(i))
            touched[key] = math.prod(shape) * key[1]
            if i < n_inputs:
                inputs.append((key, touched[key]))
    if modelled is not None and modelled.output is not None:
        touched[modelled.output] = math.prod(modelled.output[0]) * modelled.output[1]
    return touched, inputs


def _previous(ops: pa.Table) -> np.ndarray:
    """Return per op the row of the op before it on the same rank and thread (by start, then row), -1 for the
    first and for ops of no known thread."""
    n = ops.num_rows
    thread = ops["thread"].combine_chunks()
    known = thread.is_valid().to_numpy(zero_copy_only=False)
    rank, tid = ints(ops, "rank", 0), thread.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    order = np.lexsort((np.arange(n), ints(ops, "ts"), tid, rank))
    order = order[known[order]]
    out = np.full(n, -1, np.int64)
    a, b = order[1:], order[:-1]
    same = (rank[a] == rank[b]) & (tid[a] == tid[b])
    out[a[same]] = b[same]
    return out


def resident_bytes(
    keys: np.ndarray,
    caller_keys: np.ndarray,
    previous: np.ndarray,
    tensors: list[tuple[dict, list]],
    caller_tensors: list[dict],
) -> np.ndarray:
    """Return per op the bytes of its largest input whose shape and element size match a tensor the op
    before it on its thread (`previous`, -1 none) touched: one it recorded (read, written in place or
    ``out=``), the output its cost model derives, or one its caller recorded. That tensor was just in the
    cache. `keys`/`caller_keys`: each op's distinct call and caller; `tensors`: per call, :func:`_tensors`;
    `caller_tensors`: per caller, the tensors it recorded."""
    out = np.zeros(keys.size)
    has = np.flatnonzero(previous >= 0)
    if not has.size:
        return out
    # one int per distinct (call before, its caller, this call): a trace repeats few of them
    n_calls, n_callers = len(tensors), len(caller_tensors)
    triple = (keys[previous[has]] * n_callers + caller_keys[previous[has]]) * n_calls + keys[has]
    unique_triples, which = np.unique(triple, return_inverse=True)
    before = unique_triples // (n_callers * n_calls)
    caller, this = unique_triples // n_calls % n_callers, unique_triples % n_calls
    # every tensor key as an int; a (call, key) pair as one int, to test membership with searchsorted
    sig: dict = {}

    def pairs(owners) -> np.ndarray:
        codes = [owner * (1 << 32) + sig.setdefault(k, len(sig)) for owner, owned in owners for k in owned]
        return np.unique(np.array(codes, np.int64))

    touched = pairs((i, t[0].keys()) for i, t in enumerate(tensors))
    by_caller = pairs(enumerate(d.keys() for d in caller_tensors))
    count = np.array([len(t[1]) for t in tensors], np.int64)
    first = np.concatenate([[0], np.cumsum(count)[:-1]])
    flat_sig = np.array([sig.setdefault(k, len(sig)) for t in tensors for k, _ in t[1]], np.int64)
    flat_bytes = np.array([b for t in tensors for _, b in t[1]], np.float64)
    # the inputs of each distinct triple's op, one row each
    n_in = count[this]
    row = np.repeat(np.arange(this.size), n_in)
    at = first[this][row] + np.arange(row.size) - np.repeat(np.cumsum(n_in) - n_in, n_in)
    key = flat_sig[at]
    hit = _member(touched, before[row] * (1 << 32) + key) | _member(by_caller, caller[row] * (1 << 32) + key)
    values = np.zeros(this.size)
    np.maximum.at(values, row, np.where(hit, flat_bytes[at], 0.0))
    out[has] = values[which.ravel()]
    return out


def _member(sorted_values: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Whether each of `x` is in `sorted_values` (sorted, unique)."""
    if not sorted_values.size:
        return np.zeros(x.size, bool)
    i = np.minimum(np.searchsorted(sorted_values, x), sorted_values.size - 1)
    return sorted_values[i] == x


def expanded_bytes(keys: np.ndarray, grad_bytes: np.ndarray, tensors: list[tuple[dict, list]]) -> np.ndarray:
    """Return per op the bytes its model counts but it does not read: under a mean or sum backward
    (`grad_bytes` ≥ 0, the incoming gradient's bytes) an input larger than the gradient is the gradient
    expanded by a stride-0 view, so only the gradient's bytes are read."""
    out = np.zeros(keys.size)
    has = np.flatnonzero(grad_bytes >= 0)
    if not has.size:
        return out
    # once per distinct (call, gradient bytes), each pair as one int, then one gather
    grads, grad_code = np.unique(grad_bytes[has], return_inverse=True)
    pairs, which = np.unique(grad_code.ravel() * len(tensors) + keys[has], return_inverse=True)
    saved = [
        sum(b - grad for _, b in tensors[key][1] if b > grad)
        for key, grad in zip((pairs % len(tensors)).tolist(), grads[pairs // len(tensors)].tolist())
    ]
    out[has] = np.array(saved, np.float64)[which.ravel()]
    return out


def _bools(table: pa.Table, name: str) -> np.ndarray:
    return table[name].combine_chunks().fill_null(False).to_numpy(zero_copy_only=False).astype(bool)


def _dict(codes: np.ndarray, words) -> pa.DictionaryArray:
    """A dictionary column from int codes into `words` (-1 = null)."""
    codes = codes.astype(np.int32, copy=False)
    invalid = codes < 0
    indices = pa.array(codes, pa.int32(), mask=invalid if invalid.any() else None)
    return pa.DictionaryArray.from_arrays(indices, pa.array(list(words), pa.string()))


__all__ = [
    "Scored", "score", "score_ops", "scored_ops", "trace_ops", "rank_ops", "merged_ops", "roofline", "OPS_SCHEMA",
    "ACTIVITY_KINDS", "LATENCY_NS", "BOUNDS",
]  # fmt: skip
