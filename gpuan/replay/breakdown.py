"""Where each rank's time went: compute, communication, wait, idle, summing to its span exactly.

Each instant of a rank's span (its first event's start to its last event's end) counts once, as the
first of these that covers it: compute (work that is not communication: non-NCCL kernels and copies on a
GPU trace, else CPU ops that hold no communication call), wait (the wait states found by the replay),
communication (the rest of the communication calls), idle. So communication hidden under compute counts
as compute, which is what overlapping them buys.
"""

from __future__ import annotations

import numpy as np

from gpuan.engine import CPU
from gpuan.engine.unique import sorted_unique
from gpuan.trace.table import Trace

BREAKDOWN = np.dtype(
    [
        ("rank", np.int32), ("span", np.int64), ("compute", np.int64), ("wait", np.int64),
        ("communication", np.int64), ("idle", np.int64),
    ]
)  # fmt: skip
CATEGORIES = ("compute", "wait", "communication")
_SPAN_KINDS = ("kernel", "memcpy", "memset", "runtime", "driver", "cpu_op", "comm")
_GPU_WORK = ("kernel", "memcpy", "memset")


def compute_intervals(trace: Trace, call_rows: np.ndarray) -> tuple[tuple, tuple, tuple[int, int]]:
    """Return ((starts, ends) of compute, (starts, ends) of communication that is not a matched call,
    such as MPI_Init; (span start, span end)) of one rank's trace, given the rows of its calls."""
    ev = trace.events
    kinds = tuple(ev["kind"].combine_chunks().dictionary.to_pylist())
    kind = CPU.column(ev["kind"])
    ts, dur = CPU.column(ev["ts"]), np.maximum(CPU.column(ev["dur"], null=0), 0)
    end = ts + dur
    empty = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    in_span = np.isin(kind, [i for i, k in enumerate(kinds) if k in _SPAN_KINDS])
    if not in_span.any():
        return empty, empty, (0, 0)
    span = (int(ts[in_span].min()), int(end[in_span].max()))
    is_call = np.zeros(ts.size, bool)
    is_call[call_rows] = True
    comm = (kind == (kinds.index("comm") if "comm" in kinds else -1)) & ~is_call
    gpu = np.isin(kind, [i for i, k in enumerate(kinds) if k in _GPU_WORK])
    if gpu.any():
        work = gpu & ~is_call
        return (ts[work], end[work]), (ts[comm], end[comm]), span
    cpu = kind == (kinds.index("cpu_op") if "cpu_op" in kinds else -1)
    work = cpu & ~is_call & ~_wrapper(ev)
    # a CPU op computes except while a communication call of its own thread runs (main() around MPI_Send)
    tid = CPU.column(ev["tid"])
    busy = np.flatnonzero(is_call | comm)
    starts, ends = [], []
    for t in np.unique(tid[work]):
        mine = work & (tid == t)
        cut = busy[tid[busy] == t]
        s, e = _minus((ts[mine], end[mine]), (ts[cut], end[cut]))
        starts.append(s)
        ends.append(e)
    return (np.concatenate(starts or [empty[0]]), np.concatenate(ends or [empty[1]])), (ts[comm], end[comm]), span


def _wrapper(ev) -> np.ndarray:
    """Whether each event only wraps a collective: c10d's enqueue ops and PyTorch's parameter record."""
    name = ev["name"].combine_chunks()
    words = np.array(["c10d::" in s or s == "record_param_comms" for s in name.dictionary.to_pylist()] + [False])
    return words[CPU.column(name)]


def _minus(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Return the disjoint intervals covered by `a` and not by `b` (each given as (starts, ends))."""
    edges = sorted_unique(np.concatenate((a[0], a[1], b[0], b[1])))
    if edges.size < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    keep = _covered(edges, *a) & ~_covered(edges, *b)
    return edges[:-1][keep], edges[1:][keep]


def breakdown(
    rank: int,
    compute: tuple[np.ndarray, np.ndarray],
    wait: tuple[np.ndarray, np.ndarray],
    comm: tuple[np.ndarray, np.ndarray],
    span: tuple[int, int],
) -> np.ndarray:
    """Return one :data:`BREAKDOWN` record: each ns of `span` counted once, as compute, else wait, else
    communication, else idle. Each category is given as (starts, ends) of possibly overlapping
    intervals."""
    lo, hi = span
    cuts = [np.array([lo, hi], np.int64)]
    for s, e in (compute, wait, comm):
        cuts += [np.clip(s, lo, hi), np.clip(e, lo, hi)]
    edges = sorted_unique(np.concatenate(cuts))
    seg = np.diff(edges)
    label = np.full(seg.size, 3, np.int8)  # idle
    for c in range(2, -1, -1):  # the lowest category number wins
        s, e = (compute, wait, comm)[c]
        label[_covered(edges, np.clip(s, lo, hi), np.clip(e, lo, hi))] = c
    out = np.zeros(1, BREAKDOWN)
    out["rank"], out["span"] = rank, hi - lo
    for c, name in enumerate((*CATEGORIES, "idle")):
        out[name] = seg[label == c].sum()
    return out


def _covered(edges: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Return, per elementary segment between consecutive `edges`, whether any interval covers it."""
    delta = np.zeros(edges.size, np.int64)
    keep = ends > starts
    np.add.at(delta, np.searchsorted(edges, starts[keep]), 1)
    np.add.at(delta, np.searchsorted(edges, ends[keep]), -1)
    return np.cumsum(delta)[:-1] > 0
