"""One rank's communication calls, as typed records: what the cross-rank analyses exchange.

Which events are the calls, per trace:
- a GPU trace with NCCL/RCCL kernels (``ncclKernel_*``, ``ncclDevKernel_*``, every naming generation):
  the kernels, because a collective waits for its peers on the GPU, inside its kernel;
- otherwise the CPU-side collective ops (``gloo:*``, ``nccl:*`` ranges, which for Gloo span the blocking
  execution on its worker threads) and MPI calls (OTF2 regions with a peer or a collective).
A kernel that does not name its collective or size (older traces: an all-to-all runs as
``ncclKernel_SendRecv`` kernels; RCCL's ``ncclDevKernel_Generic``) takes them from the CPU-side op that
launched it (``nccl:*``, ``record_param_comms``: the op holding the runtime call of the same correlation).

A call's process group is its ``pg_name`` (``Process Group Name``), else its NCCL stream (one
communicator per stream in PyTorch), else the world. Calls of a group are numbered in order of entry on
each rank; the k-th call of a group on every member rank is one collective.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from gpuan.arrays import unique_rows
from gpuan.engine import CPU
from gpuan.replay.walk import walk
from gpuan.trace.launch import link
from gpuan.trace.table import Trace

#: operation names (the ``op`` code of a record indexes this)
OPS: tuple[str, ...] = (
    "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "barrier", "broadcast", "reduce",
    "gather", "scatter", "scan", "send", "recv", "send_recv", "other",
)  # fmt: skip
OP = {name: i for i, name in enumerate(OPS)}
#: the root sends: the others wait for the root (Late Broadcast)
ONE_TO_N = frozenset({"broadcast", "scatter"})
#: the root receives: the root waits for the last sender (Early Reduce)
N_TO_ONE = frozenset({"reduce", "gather"})
# every other collective is N to N: each member waits for the last to arrive (Wait at NxN)

COLLECTIVE, SEND, RECV = 0, 1, 2

#: the record of one communication call
CALL = np.dtype(
    [
        ("rank", np.int32), ("kind", np.int8), ("op", np.int16), ("members", np.int32), ("peer", np.int32),
        ("pg", np.int64), ("seq", np.int64), ("tag", np.int64), ("nbytes", np.int64), ("enter", np.int64),
        ("leave", np.int64), ("step", np.int64), ("row", np.int64),
    ]
)  # fmt: skip

_NCCL_KERNEL = re.compile(r"^(?:nccl|rccl)(?:Dev)?Kernel_([A-Za-z]+)", re.IGNORECASE)
_CPU_COLLECTIVE = re.compile(r"^(?:gloo|nccl|ucc|mpi):(\w+)$")
_PROFILER_STEP = re.compile(r"^ProfilerStep#(\d+)$")
# without ProfilerStep ranges, a step starts where a data-parallel wrapper's forward does
_FORWARD = re.compile(r"^(?:DistributedDataParallel|FullyShardedDataParallel)\.forward$")

_ALIASES = {
    "allreduce": "all_reduce", "allreduce_coalesced": "all_reduce", "all_reduce_coalesced": "all_reduce",
    "allgather": "all_gather", "all_gather_base": "all_gather", "all_gather_into_tensor": "all_gather",
    "allgather_into_tensor_coalesced": "all_gather", "allgather_base": "all_gather", "allgatherv": "all_gather",
    "allgather_coalesced": "all_gather", "reducescatter": "reduce_scatter", "reduce_scatter_base": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter", "reduce_scatter_tensor_coalesced": "reduce_scatter",
    "alltoall": "all_to_all", "alltoall_base": "all_to_all", "all_to_allv": "all_to_all", "alltoallv": "all_to_all",
    "all_to_all_single": "all_to_all", "bcast": "broadcast", "sendrecv": "send_recv", "exscan": "scan",
    "reduce_scatter_block": "reduce_scatter", "gatherv": "gather", "scatterv": "scatter", "ibarrier": "barrier",
}  # fmt: skip

#: bytes per element of the dtype spellings traces use
DTYPE_BYTES = {
    "float": 4, "float32": 4, "double": 8, "float64": 8, "half": 2, "float16": 2, "bfloat16": 2,
    "long": 8, "int64": 8, "long int": 8, "int": 4, "int32": 4, "short": 2, "int16": 2, "char": 1,
    "byte": 1, "bool": 1, "int8": 1, "uint8": 1, "unsigned char": 1, "signed char": 1,
    "float8_e4m3fn": 1, "float8_e5m2": 1, "c10::half": 2, "c10::bfloat16": 2,
}  # fmt: skip


def op_name(name: str, collective: str | None = None) -> str:
    """Return the normalised operation of a call from its ``collective`` column or event name."""
    raw = collective or ""
    if not raw:
        found = _NCCL_KERNEL.match(name) or _CPU_COLLECTIVE.match(name)
        raw = found.group(1) if found else name
    key = re.sub(r"(?<=[a-z])(?=[A-Z])", "_", raw).lower().lstrip("_").removeprefix("mpi_")
    key = _ALIASES.get(key, _ALIASES.get(key.replace("_", ""), key))
    return key if key in OP else "other"


def pg_id(key: str) -> int:
    """Return the 63-bit id of a process-group key, the same in every process (no exchange of names)."""
    return zlib.crc32(key.encode()) | (zlib.adler32(key.encode()) << 32) & 0x7FFF_FFFF_FFFF_FFFF


def _texts(events: pa.Table, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Return (codes per event, dictionary as an object array) of a dictionary column."""
    col = events[name].combine_chunks()
    codes = CPU.column(col)
    values = np.array(col.dictionary.to_pylist() + [None], object)
    return codes, values


def _nbytes_from_inputs(dims: str | None, types: str | None) -> int:
    # Gloo's ranges and the older CPU-side collective ops carry only their tensor's shape and dtype
    try:
        shape, dtype = json.loads(dims)[0], json.loads(types)[0]
        return int(np.prod(shape)) * DTYPE_BYTES.get(str(dtype).lower(), 0) if isinstance(shape, list) else 0
    except (TypeError, ValueError, IndexError, json.JSONDecodeError):
        return 0


class _Described:
    """What the events say about the messages of communication calls: operation, bytes, partner."""

    def __init__(self, ev: pa.Table, names: np.ndarray, name_code: np.ndarray) -> None:
        self.names, self.name_code = names, name_code
        self.coll_code, self.colls = _texts(ev, "collective")
        self.dims_code, self.dims = _texts(ev, "input_dims")
        self.types_code, self.types = _texts(ev, "input_types")
        self.dtype_code, self.dtypes = _texts(ev, "dtype")
        self.bytes = CPU.column(ev["bytes"], null=-1)
        self.nelems = np.maximum(CPU.column(ev["in_msg_nelems"], null=-1), CPU.column(ev["out_msg_nelems"], null=-1))
        self.peer = CPU.column(ev["peer"], null=-1)

    def ops(self, rows: np.ndarray) -> np.ndarray:
        """Return the operation code of each row: its ``collective`` column, else its name."""
        return _per_distinct(
            (self.name_code[rows], self.coll_code[rows]),
            lambda c, k: OP[op_name(str(self.names[c]), self.colls[k])],
        ).astype(np.int16)

    def nbytes(self, rows: np.ndarray) -> np.ndarray:
        """Return the message bytes of each row: its ``bytes``, else its element count times the size of
        its dtype, else its first input's shape times the size of its type; 0 where none says."""
        out = self.bytes[rows].copy()
        missing = out < 0
        rest = rows[missing]
        size = np.array([DTYPE_BYTES.get(str(d).lower(), 0) for d in self.dtypes], np.int64)[self.dtype_code[rest]]
        nelems = self.nelems[rest]
        shapes = _per_distinct(
            (self.dims_code[rest], self.types_code[rest]),
            lambda d, t: _nbytes_from_inputs(self.dims[d], self.types[t]),
        )
        out[missing] = np.where((nelems >= 0) & (size > 0), nelems * size, shapes)
        return np.maximum(out, 0)


def _launching_ops(trace: Trace, kernels: np.ndarray, describes: np.ndarray) -> np.ndarray:
    """Return, per kernel row, the row of the CPU-side collective op (an event where `describes` holds)
    that launched it, or -1: the op that holds its launch (:func:`gpuan.trace.launch.link`)."""
    ev = trace.events
    ops = np.flatnonzero(describes)
    if ops.size == 0:
        return np.full(kernels.size, -1, np.int64)
    kinds = tuple(ev["kind"].combine_chunks().dictionary.to_pylist())
    runtime = np.flatnonzero(CPU.column(ev["kind"]) == (kinds.index("runtime") if "runtime" in kinds else -1))
    links = link(ev.take(kernels), ev.take(runtime), ev.take(ops), trace.flows)
    return np.where(links.op_of_activity >= 0, ops[np.maximum(links.op_of_activity, 0)], -1)


def comm_calls(trace: Trace, rank: int, world: int) -> tuple[np.ndarray, dict[int, str]]:
    """Return (records of `rank`'s communication calls in order of entry, dtype :data:`CALL`; the names of
    their process groups by id). `world` is the number of ranks of the job (a group's default size)."""
    events = trace.events
    if events.num_rows == 0:
        return np.empty(0, CALL), {}
    name_code, names = _texts(events, "name")
    kind = CPU.column(events["kind"])
    kinds = tuple(events["kind"].combine_chunks().dictionary.to_pylist())
    ts, dur = CPU.column(events["ts"]), CPU.column(events["dur"], null=0)
    end = ts + np.maximum(dur, 0)
    unique = names[:-1].astype(str) if names.size > 1 else np.empty(0, str)
    rows, on_gpu = _call_rows(events, kinds, kind, name_code, unique)
    step_of = _steps(events, unique, name_code, kind, kinds, ts, end, rows)
    recs = np.zeros(rows.size, CALL)
    if rows.size == 0:
        return recs, {}
    said = _Described(events, names, name_code)
    ops, nbytes, peer = said.ops(rows), said.nbytes(rows), said.peer[rows]
    unsaid = np.flatnonzero((said.coll_code[rows] < 0) | (nbytes == 0)) if on_gpu else rows[:0]
    if unsaid.size:
        _adopt_from_launching_ops(
            trace, said, rows, unsaid, (ops, nbytes, peer), _cpu_collective_ops(kinds, kind, name_code, unique)
        )
    pg, pg_names = _process_groups(events, rows)
    send_ops = np.isin(ops, [OP["send"]]) | ((peer >= 0) & _named(names, name_code[rows], "send"))
    recv_ops = np.isin(ops, [OP["recv"]]) | ((peer >= 0) & _named(names, name_code[rows], "recv"))
    group_size = CPU.column(events["group_size"], null=-1)[rows]
    recs["rank"] = rank
    recs["kind"] = np.where(send_ops & (peer >= 0), SEND, np.where(recv_ops & (peer >= 0), RECV, COLLECTIVE))
    recs["op"] = np.where(recs["kind"] == SEND, OP["send"], np.where(recs["kind"] == RECV, OP["recv"], ops))
    recs["members"] = np.where(group_size > 0, group_size, world)
    recs["peer"] = peer
    recs["pg"] = pg
    recs["tag"] = CPU.column(events["tag"], null=0)[rows]
    recs["nbytes"] = nbytes
    recs["enter"] = ts[rows]
    recs["leave"] = end[rows]
    recs["step"] = step_of
    recs["row"] = rows
    recs = recs[np.lexsort((recs["row"], recs["enter"]))]
    _number(recs)
    return recs, pg_names


def _call_rows(
    events: pa.Table, kinds: tuple[str, ...], kind: np.ndarray, name_code: np.ndarray, unique: np.ndarray
) -> tuple[np.ndarray, bool]:
    """Return (the rows of the communication calls, whether they are GPU kernels): the NCCL/RCCL kernels
    where the trace has any, else the CPU-side collective ops and the communication events that name a
    peer or a collective."""
    kernel = kinds.index("kernel") if "kernel" in kinds else -1
    nccl_name = np.append(np.array([bool(_NCCL_KERNEL.match(s)) for s in unique], bool), False)
    gpu_calls = (kind == kernel) & nccl_name[name_code]
    if gpu_calls.any():
        return np.flatnonzero(gpu_calls), True
    cpu_name = np.append(np.array([bool(_CPU_COLLECTIVE.match(s)) for s in unique], bool), False)
    cpu_kinds = np.array([k in ("cpu_op", "annotation") for k in kinds], bool)
    comm_kind = np.array([k == "comm" for k in kinds], bool)
    names_partner = (CPU.column(events["peer"], null=-1) >= 0) | (CPU.column(events["collective"]) >= 0)
    is_call = (cpu_kinds[kind] & cpu_name[name_code]) | (comm_kind[kind] & names_partner)
    return np.flatnonzero(is_call), False


def _cpu_collective_ops(
    kinds: tuple[str, ...], kind: np.ndarray, name_code: np.ndarray, unique: np.ndarray
) -> np.ndarray:
    """Return whether each event is a CPU-side op that describes a collective it launches (``nccl:*``,
    ``gloo:*``..., ``record_param_comms``)."""
    cpu_kinds = np.array([k in ("cpu_op", "annotation") for k in kinds], bool)
    describing = np.array([bool(_CPU_COLLECTIVE.match(s)) or s == "record_param_comms" for s in unique], bool)
    return cpu_kinds[kind] & np.append(describing, False)[name_code]


def _adopt_from_launching_ops(
    trace: Trace,
    said: _Described,
    rows: np.ndarray,
    unsaid: np.ndarray,
    fields: tuple[np.ndarray, np.ndarray, np.ndarray],
    describes: np.ndarray,
) -> None:
    """Fill in, in place, the operation, bytes and peer (`fields`) of the kernels at `unsaid` (positions
    in `rows`) that do not say them (an all-to-all runs as SendRecv kernels), from the CPU-side op that
    launched each (nccl:*, record_param_comms: where `describes` holds)."""
    ops, nbytes, peer = fields
    by = _launching_ops(trace, rows[unsaid], describes)
    has = unsaid[by >= 0]
    by = by[by >= 0]
    op_by, bytes_by = said.ops(by), said.nbytes(by)
    peer[has] = np.where(peer[has] >= 0, peer[has], said.peer[by])
    p2p = np.isin(op_by, [OP["send"], OP["recv"]])
    adopt = (said.coll_code[rows[has]] < 0) & (op_by != OP["other"]) & (~p2p | (peer[has] >= 0))
    ops[has] = np.where(adopt, op_by, ops[has])
    nbytes[has] = np.where(nbytes[has] > 0, nbytes[has], bytes_by)


def _process_groups(events: pa.Table, rows: np.ndarray) -> tuple[np.ndarray, dict[int, str]]:
    """Return (the process group id of each call in `rows`, the groups' names by id): the group named in
    the trace, else the NCCL stream, else the world."""
    pg_code, pg_texts = _texts(events, "pg_name")
    stream = CPU.column(events["stream"], null=-1)[rows]
    names: dict[int, str] = {}

    def group(code: int, on_stream: int) -> int:
        key = (
            f"pg {pg_texts[code]}"
            if pg_texts[code] is not None
            else (f"stream {on_stream}" if on_stream >= 0 else "world")
        )
        ident = pg_id(key)
        names[ident] = key
        return ident

    return _per_distinct((pg_code[rows], stream), group), names


def _named(names: np.ndarray, codes: np.ndarray, word: str) -> np.ndarray:
    """Return whether each of the names at `codes` holds `word` (any case)."""
    return np.array([word in str(name).lower() for name in names], bool)[codes]


def _per_distinct(columns: tuple[np.ndarray, ...], value: Callable[..., int]) -> np.ndarray:
    """Return value(*row) for each row of the integer `columns`, called once per distinct row (int64)."""
    distinct, inverse = unique_rows(columns)
    return np.array([value(*row) for row in distinct.tolist()], np.int64)[inverse]


def _number(recs: np.ndarray) -> None:
    """Set ``seq``: the call's position among its rank's collectives of its group (in order of entry),
    or among its sends/receives to/from one peer with one tag (MPI's non-overtaking order)."""
    coll = recs["kind"] == COLLECTIVE
    key = np.where(
        coll, recs["pg"], recs["pg"] ^ (recs["peer"].astype(np.int64) << 40) ^ (recs["tag"] << 8) ^ recs["kind"]
    )
    order = np.lexsort((np.arange(recs.size), key))
    k = key[order]
    start = np.concatenate(([True], k[1:] != k[:-1]))
    first = np.maximum.accumulate(np.where(start, np.arange(k.size), 0))
    seq = np.empty(recs.size, np.int64)
    seq[order] = np.arange(k.size) - first
    recs["seq"] = seq


def _steps(ev, unique, name_code, kind, kinds, ts, end, rows) -> np.ndarray:
    """Return the training step of each call in `rows`: a forward replay that carries the current step
    from the step markers (``ProfilerStep#N`` ranges, else data-parallel forwards counted from 0) to the
    calls. A GPU call counts from its launch (the runtime call with its correlation id), not its start."""
    prof = np.array([-1 if (m := _PROFILER_STEP.match(s)) is None else int(m.group(1)) for s in unique] + [-1])
    markers = np.flatnonzero(prof[name_code] >= 0)
    number = prof[name_code]
    if markers.size == 0:
        fwd = np.append(np.array([bool(_FORWARD.match(s)) for s in unique], bool), False)
        markers = np.flatnonzero(fwd[name_code])
        # a forward's number is its position among the forwards of its thread's first occurrence
        number = np.full(ts.size, -1, np.int64)
        number[markers[np.argsort(ts[markers], kind="stable")]] = np.arange(markers.size)
    when = ts.copy()
    if rows.size:
        when[rows] = _launch_time(ev, kinds, kind, ts, rows)
    # replay in time order: marker runs move the current step, call runs take it
    cls = np.full(ts.size, 2, np.int8)
    cls[markers] = 0
    cls[rows] = 1
    keep = cls < 2
    idx = np.flatnonzero(keep)
    step_of_row = np.zeros(ts.size, np.int64)
    state = {"step": int(number[markers].min()) if markers.size else 0}

    def on_marker(_kind: str, pos: np.ndarray) -> None:
        state["step"] = int(number[idx[pos[-1]]])

    def on_call(_kind: str, pos: np.ndarray) -> None:
        step_of_row[idx[pos]] = state["step"]

    walk(cls[idx], ("marker", "call"), when[idx], when[idx] + np.where(cls[idx] == 0, end[idx] - ts[idx], 0),
         {"marker": on_marker, "call": on_call})  # fmt: skip
    return step_of_row[rows]


def _launch_time(ev, kinds, kind, ts, rows) -> np.ndarray:
    """Return, for calls in `rows`, the time of the runtime call that launched them (same correlation id),
    or their own start when none did."""
    corr = CPU.column(ev["correlation"], null=-1)
    runtime = kinds.index("runtime") if "runtime" in kinds else -1
    launches = np.flatnonzero((kind == runtime) & (corr >= 0))
    out = ts[rows].copy()
    if launches.size == 0:
        return out
    order = np.argsort(corr[launches], kind="stable")
    keys = corr[launches][order]
    wanted = corr[rows]
    at = np.clip(np.searchsorted(keys, wanted), 0, keys.size - 1)
    hit = (keys[at] == wanted) & (wanted >= 0)
    out[hit] = ts[launches[order][at[hit]]]
    return out
