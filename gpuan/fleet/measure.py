"""One rank's steps as typed records: per step its window and the waiting in it, per position the op's
time, the idle time before it and the part of each that was waiting (what replay explains).

Times are on the run's common clock (replay's: ns from the earliest rank's start). A step's window runs
from the end of whatever ran before its first event (the idle time before a step belongs to it) to the
end of its last event. Waiting is the time a rank spent in replay's wait states (a collective waiting for
its last member, a receive for its late sender) while its step sequence ran no compute op: idle time on
the sequence, or time inside a communication op. A compute op that overlaps a wait on another thread or
stream (Gloo's worker threads, an NCCL stream) is compute, not waiting. Idle time on the sequence during
one of the rank's communication calls that is not waiting (the transfer of a collective that runs on
another thread, which the sequence then waits for) is communication; the rest of the idle time is time
in no op at all.
"""

from __future__ import annotations

import re

import numpy as np

from gpuan.cycles.sequence import is_comm_name
from gpuan.fleet.intervals import Intervals
from gpuan.fleet.steps import RankSteps

#: one step of one rank
STEP = np.dtype([
    ("rank", np.int32), ("step", np.int64), ("start", np.int64), ("first", np.int64), ("end", np.int64),
    ("wait", np.int64),
])  # fmt: skip
#: one position of one step of one rank: the op (its name as a shared code, and its duration), the op
#: that ended last before it (``before``, -1 for none), the idle time before it, the waiting in each, and
#: the part of the idle time spent in a communication call but not waiting (``gap_comm``)
POSITION = np.dtype([
    ("rank", np.int32), ("step", np.int32), ("position", np.int32), ("name", np.int32), ("before", np.int32),
    ("dur", np.int64), ("gap", np.int64), ("op_wait", np.int64), ("gap_wait", np.int64), ("gap_comm", np.int64),
])  # fmt: skip
#: a stretch of one rank's time from replay's tables: a wait state (``wait`` true) or a communication call
WAIT = np.dtype([("rank", np.int32), ("wait", np.bool_), ("start", np.int64), ("end", np.int64)])

# the CPU side of communication: PyTorch's collective ranges and ops, MPI calls
_CPU_COMM = re.compile(r"^(?:gloo|nccl|ucc|mpi):|^c10d::|^record_param_comms$|^MPI_", re.IGNORECASE)


def is_comm(names: np.ndarray) -> np.ndarray:
    """Return a mask of the `names` that are communication ops: NCCL/RCCL kernels, PyTorch's collective ops
    and ranges (``gloo:*``, ``nccl:*``, ``c10d::*``, ``record_param_comms``) and MPI calls."""
    names = np.asarray(names, dtype=object)
    cpu = np.fromiter((bool(_CPU_COMM.match(str(w))) for w in names), bool, count=names.size)
    return is_comm_name(names) | cpu


# the backward pass: PyTorch's autograd ops on the CPU, kernels named for it on the GPU
_BACKWARD = re.compile(r"^autograd::|Backward|backward", re.IGNORECASE)


def is_backward(names: np.ndarray) -> np.ndarray:
    """Return a mask of the `names` that belong to a backward pass: PyTorch's autograd ops
    (``autograd::engine::evaluate_function: ...``) and kernels or ops named for it (``...Backward...``)."""
    names = np.asarray(names, dtype=object)
    return np.fromiter((bool(_BACKWARD.search(str(w))) for w in names), bool, count=names.size)


def records(
    steps: RankSteps, shift: int, waits: Intervals, calls: Intervals, codes: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Return the (:data:`STEP`, :data:`POSITION`) records of one rank's steps. `shift` moves the rank's
    times onto the run's clock, `waits` are its wait states there and `calls` its communication calls,
    `codes` maps its sequence's name ids to shared codes."""
    seq = steps.sequence
    ts = seq.ts.astype(np.int64) + shift
    end = ts + seq.dur.astype(np.int64)
    gap = steps.gaps
    comm = is_comm(seq.vocab)[seq.ids]
    # waiting counts only where no compute op of the sequence ran
    blocked = waits.minus(Intervals.union(ts[~comm], end[~comm]))
    P = steps.positions
    n_steps, L = P.shape
    step_no = steps.first_step + np.arange(n_steps, dtype=np.int64)

    out_steps = np.zeros(n_steps, STEP)
    if n_steps:
        first_slot = np.argmin(ts[P], axis=1)
        first_event = P[np.arange(n_steps), first_slot]
        out_steps["rank"] = steps.rank
        out_steps["step"] = step_no
        out_steps["first"] = ts[first_event]
        out_steps["start"] = ts[first_event] - gap[first_event]
        out_steps["end"] = end[P].max(axis=1)
        out_steps["wait"] = blocked.within(out_steps["start"], out_steps["end"])

    flat = P.reshape(-1)
    pos = np.zeros(flat.size, POSITION)
    pos["rank"] = steps.rank
    pos["step"] = np.repeat(step_no, L)
    pos["position"] = np.tile(np.arange(L, dtype=np.int64), n_steps)
    pos["name"] = codes[seq.ids[flat]]
    before = np.full(flat.size, -1, np.int64)
    has = flat > 0
    # the op that ended last before this one: in time order, the latest end among the earlier events
    last_end = _latest_ender(ts, end)
    before[has] = codes[seq.ids[last_end[flat[has] - 1]]]
    pos["before"] = before
    pos["dur"] = end[flat] - ts[flat]
    pos["gap"] = gap[flat]
    pos["gap_wait"] = blocked.within(ts[flat] - gap[flat], ts[flat])
    pos["gap_comm"] = calls.minus(waits).within(ts[flat] - gap[flat], ts[flat])
    pos["op_wait"] = np.where(comm[flat], blocked.within(ts[flat], end[flat]), 0)
    return out_steps, pos


def _latest_ender(ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Return, per event i, the index among events 0..i whose end is the latest (the earliest on a tie)."""
    n = ts.shape[0]
    if n == 0:
        return np.zeros(0, np.int64)
    running = np.maximum.accumulate(end)
    # where the running maximum rises, the event at that place is the latest to end so far
    rises = np.ones(n, bool)
    rises[1:] = running[1:] > running[:-1]
    return np.maximum.accumulate(np.where(rises, np.arange(n, dtype=np.int64), 0))
