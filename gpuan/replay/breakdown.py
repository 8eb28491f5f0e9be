"""Where each rank's time went: compute, wait, set-up, communication, idle, summing to its span exactly.

Each instant of a rank's span (the first start to the last end of its work, its communication calls
and its set-up) counts once, as the first of these that covers it: compute (work that is not
communication: non-NCCL kernels and copies on a GPU trace, else CPU ops that hold no communication
call), wait (the wait states found by the replay), set-up (MPI_Init, MPI_Finalize and the calls that
manage MPI's or NCCL's state rather than move data: communicators, groups, datatypes, queries), and
communication (the rest of the communication calls), else idle. So communication hidden under compute
counts as compute, which is what overlapping them buys.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from gpuan.arrays import sorted_unique
from gpuan.engine import CPU
from gpuan.replay.records import run_starts
from gpuan.trace.table import Trace

BREAKDOWN = np.dtype(
    [
        ("rank", np.int32), ("span", np.int64), ("compute", np.int64), ("wait", np.int64), ("setup", np.int64),
        ("communication", np.int64), ("idle", np.int64),
    ]
)  # fmt: skip
#: the categories in the order in which they claim an instant (idle takes what is left)
CATEGORIES = ("compute", "wait", "setup", "communication")
_SPAN_KINDS = ("kernel", "memcpy", "memset", "runtime", "driver", "cpu_op", "comm")
_GPU_WORK = ("kernel", "memcpy", "memset")
_SETUP = re.compile(
    r"^(?:MPI_(?:Init|Init_thread|Finalize|Initialized|Finalized|Query_thread|Abort|Comm_\w+|Group_\w+"
    r"|Intercomm_\w+|Type_\w+|Op_\w+|Info_\w+|Errhandler_\w+|Keyval_\w+|Attr_\w+|Cart_\w+|Graph_\w+"
    r"|Dist_graph_\w+|Win_(?:create|allocate|free)\w*|Get_(?:processor_name|version|library_version))"
    r"|nccl(?:CommInit\w*|CommSplit|CommDestroy|CommAbort|CommFinalize|GetUniqueId))$"
)
#: events that only wrap a collective: c10d's enqueue ops and PyTorch's parameter record
_WRAPPER = re.compile(r"^(?:.*c10d::.*|record_param_comms)$")

Spans = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class RankTime:
    """One rank's intervals, as (starts, ends) in ns that may overlap: its compute, its set-up and
    tear-down, its communication that is no matched call, and its span (start, end)."""

    compute: Spans
    setup: Spans
    other_comm: Spans
    span: tuple[int, int]

    def shifted(self, delta: int) -> RankTime:
        """Return the same intervals `delta` ns later."""
        return RankTime(
            *((s + delta, e + delta) for s, e in (self.compute, self.setup, self.other_comm)),
            (self.span[0] + delta, self.span[1] + delta),
        )


def rank_time(trace: Trace, call_rows: np.ndarray) -> RankTime:
    """Return the compute, set-up, other communication and span of one rank's trace, given the rows of
    its communication calls (which the span covers, whatever kind of event records them)."""
    ev = trace.events
    kinds = tuple(ev["kind"].combine_chunks().dictionary.to_pylist())
    kind = CPU.column(ev["kind"])
    ts, dur = CPU.column(ev["ts"]), np.maximum(CPU.column(ev["dur"], null=0), 0)
    end = ts + dur
    empty = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    is_call = np.zeros(ts.size, bool)
    is_call[call_rows] = True
    setup = _named(ev, _SETUP)
    in_span = np.isin(kind, [i for i, k in enumerate(kinds) if k in _SPAN_KINDS]) | is_call | setup
    if not in_span.any():
        return RankTime(empty, empty, empty, (0, 0))
    span = (int(ts[in_span].min()), int(end[in_span].max()))
    comm = (kind == (kinds.index("comm") if "comm" in kinds else -1)) & ~is_call & ~setup
    gpu = np.isin(kind, [i for i, k in enumerate(kinds) if k in _GPU_WORK])
    if gpu.any():
        work = gpu & ~is_call & ~setup
        return RankTime((ts[work], end[work]), (ts[setup], end[setup]), (ts[comm], end[comm]), span)
    cpu = kind == (kinds.index("cpu_op") if "cpu_op" in kinds else -1)
    work = cpu & ~is_call & ~setup & ~_named(ev, _WRAPPER)
    # a CPU op computes except while a communication or set-up call of its own thread runs (main()
    # around MPI_Send)
    tid = CPU.column(ev["tid"])
    busy = np.flatnonzero(is_call | comm | setup)
    starts, ends = [], []
    for thread in np.unique(tid[work]):
        mine = work & (tid == thread)
        cut = busy[tid[busy] == thread]
        free_starts, free_ends = _minus((ts[mine], end[mine]), (ts[cut], end[cut]))
        starts.append(free_starts)
        ends.append(free_ends)
    compute = (np.concatenate(starts or [empty[0]]), np.concatenate(ends or [empty[1]]))
    return RankTime(compute, (ts[setup], end[setup]), (ts[comm], end[comm]), span)


def _named(ev, pattern: re.Pattern) -> np.ndarray:
    """Whether each event's name matches `pattern`."""
    name = ev["name"].combine_chunks()
    words = np.array([bool(pattern.match(s)) for s in name.dictionary.to_pylist()] + [False])
    return words[CPU.column(name)]


def _minus(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Return the disjoint intervals covered by `a` and not by `b` (each given as (starts, ends))."""
    edges = sorted_unique(np.concatenate((a[0], a[1], b[0], b[1])))
    if edges.size < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    keep = _covered(np, edges, *a) & ~_covered(np, edges, *b)
    return edges[:-1][keep], edges[1:][keep]


def breakdown(
    rank: int, compute: Spans, wait: Spans, setup: Spans, comm: Spans, span: tuple[int, int], xp: ModuleType = np
) -> np.ndarray:
    """Return one :data:`BREAKDOWN` record (host numpy): each ns of `span` counted once, as compute, else
    wait, else set-up, else communication, else idle. Each category is given as (starts, ends) of possibly
    overlapping intervals, arrays of the engine `xp` (numpy or CuPy): a sort and prefix sums there."""
    lo, hi = span
    given = (compute, wait, setup, comm)
    cuts = [xp.asarray([lo, hi], np.int64)]
    for starts, ends in given:
        cuts += [xp.clip(starts, lo, hi), xp.clip(ends, lo, hi)]
    edges = xp.sort(xp.concatenate(cuts))
    edges = edges[run_starts(xp, edges)]
    segment = xp.diff(edges)
    label = xp.full(segment.size, len(CATEGORIES), np.int8)  # idle
    for category in range(len(CATEGORIES) - 1, -1, -1):  # the lowest category number wins
        starts, ends = given[category]
        label[_covered(xp, edges, xp.clip(starts, lo, hi), xp.clip(ends, lo, hi))] = category
    out = np.zeros(1, BREAKDOWN)
    out["rank"], out["span"] = rank, hi - lo
    for category, name in enumerate((*CATEGORIES, "idle")):
        out[name] = int(segment[label == category].sum())
    return out


def _covered(xp: ModuleType, edges, starts, ends):
    """Return, per elementary segment between consecutive `edges` (sorted, distinct), whether any interval
    [start, end) covers it: +1 at each start's edge, -1 at each end's, a prefix sum."""
    keep = ends > starts
    delta = xp.bincount(xp.searchsorted(edges, starts[keep]), minlength=edges.size).astype(np.int64)
    delta -= xp.bincount(xp.searchsorted(edges, ends[keep]), minlength=edges.size)
    return xp.cumsum(delta)[:-1] > 0
