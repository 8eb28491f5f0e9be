"""The event-driven simulation of N streams on one GPU.

Every change of state happens at an event (an operation issued or ready, a copy or a group of thread
blocks finishing, a copy engine's time slice running out); between events every rate is constant, so
each finish time is computed exactly, never stepped. The rules:

- Host: one thread issues the operations in launch order, ``api_ns`` apart. Copies from or to pageable
  memory hold the host until they finish (pinned ones do not).
- Streams: an operation starts no earlier than its predecessor's end plus the gap measured before it in
  the single-stream trace (launch and dependency overheads kept when operations move).
- Copies: each direction (host to device, device to host, device to device) has its copy engines; an
  engine serves one stream's copies back to back. A copy waiting for a busy engine starts when the engine
  frees or, where the device time-slices its engines (``copy_first_turn_ns``, ``copy_turn_ns``), when the
  holding stream's turn ends: waiting streams then take turns round-robin, a preempted copy going to the
  back of the line with what is left of it. Copies moving at once on several engines of one direction
  share its bandwidth equally (each at its single-stream rate divided by their number). The directions do
  not interfere (full duplex).
- Kernels: thread blocks go to SMs while the SM's threads, registers, shared memory and block slots
  allow, kernels in the order they became ready (a kernel's blocks only after all blocks of the kernels
  before it have been placed). Each block lasts the kernel's average block time: its single-stream
  duration divided by its waves on the whole GPU.
- Other operations (memsets) take their measured time and no shared resource.

The event loop (``_run``) is compiled with numba: one heap of events, the state in numpy arrays. Run with
``NUMBA_DISABLE_JIT=1`` it is plain Python, the same code, for stepping through in a debugger.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from gpuan.devices import GPU
from gpuan.engine.jit import compiled_on_disk
from gpuan.streams.occupancy import block_needs, fit, sm_capacity
from gpuan.streams.workload import COPY, D2H, H2D, KERNEL, Workload

LAUNCH_ORDERS = ("breadth", "depth")


@dataclass(frozen=True)
class Settings:
    """The parameters of a simulation; every one is printed with the prediction."""

    gpu: GPU
    n_streams: int
    launch_order: str = "breadth"
    #: host time between two issued operations
    api_ns: float = 2000.0
    #: copy engines per direction (host to device, device to host, device to device)
    engines: tuple[int, int, int] = (1, 1, 1)
    #: copy engines time-sliced between streams: the turn of a stream taking an idle engine, and every
    #: later turn; None: a stream keeps its engine until its back-to-back copies are done
    copy_first_turn_ns: float | None = None
    copy_turn_ns: float | None = None


@dataclass
class Timeline:
    """The simulated operations: numpy columns, one row per operation of every stream (ns)."""

    stream: np.ndarray
    index: np.ndarray  # position in the stream's workload
    start: np.ndarray
    end: np.ndarray
    issued: np.ndarray

    @property
    def total(self) -> float:
        """Predicted time from the first start to the last end, ns."""
        return float(self.end.max() - self.start.min()) if self.end.size else 0.0


def issue_order(n_ops: int, n_streams: int, order: str) -> list[tuple[int, int]]:
    """Return (stream, op) pairs in the order the host issues them: ``breadth`` issues operation k of
    every stream before operation k+1 of any; ``depth`` issues all of stream 0, then stream 1, ..."""
    if order == "breadth":
        return [(s, k) for k in range(n_ops) for s in range(n_streams)]
    if order == "depth":
        return [(s, k) for s in range(n_streams) for k in range(n_ops)]
    raise ValueError(f"launch order must be one of {LAUNCH_ORDERS}, not {order!r}")


@dataclass(frozen=True)
class Blocks:
    """How each operation's kernel runs as thread blocks (rows of non-kernels are unused): what one block
    holds on an SM, how many blocks, how many fit one SM, and how long one lasts (ns)."""

    needs: np.ndarray  # (n, 4), the columns of block_needs
    grid: np.ndarray
    per_sm: np.ndarray
    time: np.ndarray


def kernel_blocks(w: Workload, gpu: GPU) -> Blocks:
    """Return the blocks of the workload's kernels; a block lasts the kernel's average block time, its
    duration / ceil(grid / (SMs x blocks per SM)). Kernels without a launch configuration run as one block
    per SM holding the whole SM, for their full duration."""
    capacity = sm_capacity(gpu)
    known = (w.kind == KERNEL) & (w.grid > 0) & (w.threads > 0)
    needs = np.where(known[:, None], block_needs(gpu, w.threads, w.registers, w.shared_memory), capacity[None, :])
    per_sm = np.maximum(fit(capacity[None, :], needs), 1)
    grid = np.where(known, w.grid, gpu.sms)
    waves = -(-grid // (gpu.sms * per_sm))
    return Blocks(needs, grid, per_sm, np.where(w.kind == KERNEL, w.dur / waves, 0.0))


RESOURCES = ("threads", "registers", "bytes of shared memory", "block slots")


class BlockTooBig(ValueError):
    """A kernel's thread block does not fit an empty SM of the GPU simulated (a trace from a larger GPU
    simulated on a smaller one)."""


def too_big(w: Workload, gpu: GPU) -> list[str]:
    """Return, for each kernel whose thread block does not fit an empty SM of `gpu`, what it needs against
    what an SM has; empty when all fit."""
    capacity = sm_capacity(gpu)
    needs = kernel_blocks(w, gpu).needs  # rows other than kernels with a launch configuration hold capacity
    return [
        f"kernel {w.names[i][:80]} needs {needs[i, j]} {RESOURCES[j]} per block, a {gpu.name} SM has {capacity[j]}"
        for i, j in np.argwhere(needs > capacity[None, :])
    ]


def simulate(w: Workload, settings: Settings) -> Timeline:
    """Return the timeline of `settings.n_streams` copies of workload `w` issued on as many streams.
    Raises :class:`BlockTooBig` if a kernel's block does not fit an SM of the GPU (see :func:`too_big`)."""
    gpu, n, m = settings.gpu, settings.n_streams, len(w)
    problems = too_big(w, gpu)
    if problems:
        raise BlockTooBig(problems[0])
    blocks = kernel_blocks(w, gpu)
    direction = np.array([_direction(k) for k in w.kind], np.int64)
    order = np.array([s * m + k for s, k in issue_order(m, n, settings.launch_order)], np.int64)
    turn = settings.copy_turn_ns if settings.copy_turn_ns is not None else math.inf
    first_turn = settings.copy_first_turn_ns if settings.copy_first_turn_ns is not None else turn
    start, end, issued = _run(
        n, np.asarray(w.kind, np.int64), direction, np.asarray(w.dur, np.float64), np.asarray(w.gap, np.float64),
        np.asarray(w.pageable, np.bool_), np.asarray(blocks.needs, np.int64), np.asarray(blocks.grid, np.int64),
        np.asarray(blocks.time, np.float64), sm_capacity(gpu), int(gpu.sms), np.array(settings.engines, np.int64),
        float(settings.api_ns), float(turn), float(first_turn), order,
    )  # fmt: skip
    if np.isnan(end).any():  # pragma: no cover - every op finishes by construction
        raise RuntimeError("simulation ended with unfinished operations")
    stream, index = np.repeat(np.arange(n), m), np.tile(np.arange(m), n)
    return Timeline(stream=stream, index=index, start=start, end=end, issued=issued)


def is_compiled() -> bool:
    """Return whether numba's on-disk cache holds the compiled event loop (else the first simulation
    compiles it, about 15 seconds)."""
    return compiled_on_disk(_run)


def _direction(kind: int) -> int:
    return {H2D: 0, D2H: 1, COPY: 2}.get(int(kind), -1)


# Event kinds. Events are (time, sequence number, kind, a, b, c): equal times pop in the order pushed.
_ISSUE, _READY, _COPY_DONE, _BLOCKS_DONE, _OTHER_DONE, _TURN_ENDS, _HOST_FREE = range(7)
# Slots of the loop's counters (numba closures cannot rebind captured scalars, so they live in an array).
_SEQ, _HOST_WAITS_FOR, _NEXT_ISSUE, _WAIT_HEAD, _WAIT_TAIL, _POOL_FREE, _HOLD_SEQ, _ROOM_FOR = range(8)


@njit(cache=True)
def _run(n, kind, direction, dur, gap, pageable, needs, grid, block_time, capacity, sms, engines, api_ns, turn,
         first_turn, order):  # fmt: skip
    """The event loop of :func:`simulate`; returns the start, end and issue time of every operation (row
    stream * m + k). Operation ids are rows; per-direction copy state is one row per direction, one column
    per stream."""
    m = kind.size
    total = n * m
    start = np.full(total, np.nan)
    end = np.full(total, np.nan)
    issued = np.full(total, np.nan)
    dep_ready = np.full(total, np.nan)  # when the stream predecessor allows the op (end + gap)
    ctr = np.zeros(8, np.int64)
    ctr[_HOST_WAITS_FOR] = -1  # the pageable copy the host is held by, if any
    ctr[_ROOM_FOR] = -1  # the kernel row `room` holds each SM's room for
    heap = [(0.0, np.int64(0), np.int64(0), np.int64(0), np.int64(0), np.int64(0))]
    heap.pop()

    # kernels: free SM resources, kernels placing blocks in ready order, block groups in flight
    free = np.empty((sms, 4), np.int64)
    for i in range(sms):
        free[i] = capacity
    waiting = np.empty(total, np.int64)
    blocks_left = np.zeros(total, np.int64)  # blocks not yet placed
    blocks_running = np.zeros(total, np.int64)
    pool = sms * capacity[3] + 1  # every group in flight holds at least one of the GPU's block slots
    group_op = np.empty(pool, np.int64)
    group_take = np.zeros((pool, sms), np.int64)
    pool_free = np.arange(pool)
    ctr[_POOL_FREE] = pool
    room = np.empty(sms, np.int64)  # kept up to date for one kernel row, the one placing blocks

    # copies: per direction, the streams holding an engine (their moving copy or -1 between two
    # back-to-back copies, turn end, order taken), the queue of copies waiting for a turn
    held = np.zeros((3, n), np.bool_)
    holder_copy = np.full((3, n), -1, np.int64)
    turn_ends_at = np.zeros((3, n))
    held_since = np.zeros((3, n), np.int64)
    n_held = np.zeros(3, np.int64)
    queue = np.empty((3, n + 1), np.int64)  # ring buffers: a stream has at most one copy waiting
    q_head = np.zeros(3, np.int64)
    q_len = np.zeros(3, np.int64)
    left = np.zeros(total)  # ns of transfer at its single-stream rate still to do
    since = np.zeros(3)  # time the holders' `left` was last brought up to date
    version = np.zeros(3, np.int64)

    def push(t, what, a, b, c):
        heapq.heappush(heap, (t, ctr[_SEQ], np.int64(what), np.int64(a), np.int64(b), np.int64(c)))
        ctr[_SEQ] += 1

    def issue_next(t):
        if ctr[_NEXT_ISSUE] < order.size:
            push(t, _ISSUE, order[ctr[_NEXT_ISSUE]], 0, 0)
            ctr[_NEXT_ISSUE] += 1

    def maybe_ready(op, t):
        if not math.isnan(issued[op]) and not math.isnan(dep_ready[op]):
            push(max(issued[op], dep_ready[op], t), _READY, op, 0, 0)

    def finish(op, t):
        end[op] = t
        if op % m + 1 < m:
            dep_ready[op + 1] = t + gap[(op + 1) % m]
            maybe_ready(op + 1, t)
        if ctr[_HOST_WAITS_FOR] == op:
            ctr[_HOST_WAITS_FOR] = -1
            push(t + api_ns, _HOST_FREE, 0, 0, 0)

    # -- copies ----------------------------------------------------------------------------------------
    def progress(d, t):
        moving = 0
        for s in range(n):
            moving += holder_copy[d, s] >= 0
        if moving and t > since[d]:
            done = (t - since[d]) / moving
            for s in range(n):
                if holder_copy[d, s] >= 0:
                    left[holder_copy[d, s]] -= done
        since[d] = t

    def reschedule(d, t):
        version[d] += 1
        moving, first = 0, -1
        for s in range(n):
            c = holder_copy[d, s]
            if c >= 0:
                moving += 1
                if first < 0 or left[c] < left[first] or (left[c] == left[first] and c < first):
                    first = c
        if moving:
            push(t + max(left[first], 0.0) * moving, _COPY_DONE, d, version[d], first)
        if q_len[d] and n_held[d]:
            soonest = math.inf
            for s in range(n):
                if held[d, s]:
                    soonest = min(soonest, turn_ends_at[d, s])
            push(max(t, soonest), _TURN_ENDS, d, version[d], 0)

    def enqueue(d, op):
        queue[d, (q_head[d] + q_len[d]) % (n + 1)] = op
        q_len[d] += 1

    def take_turn(d, op, t, length):
        s = op // m
        held[d, s] = True
        holder_copy[d, s] = op
        turn_ends_at[d, s] = t + length
        held_since[d, s] = ctr[_HOLD_SEQ]
        ctr[_HOLD_SEQ] += 1
        n_held[d] += 1
        if math.isnan(start[op]):  # a preempted copy keeps its first start
            start[op] = t

    def release(d, s, t):
        if held[d, s]:
            held[d, s] = False
            holder_copy[d, s] = -1
            n_held[d] -= 1
        while q_len[d] and n_held[d] < engines[d]:
            op = queue[d, q_head[d]]
            q_head[d] = (q_head[d] + 1) % (n + 1)
            q_len[d] -= 1
            take_turn(d, op, t, turn)

    def copy_ready(op, t):
        d, s = direction[op % m], op // m
        progress(d, t)
        if held[d, s]:  # back to back within the stream's turn
            holder_copy[d, s] = op
            start[op] = t
        elif n_held[d] < engines[d]:
            # an idle engine: a full first turn before waiting streams get theirs
            take_turn(d, op, t, first_turn if n_held[d] == 0 and q_len[d] == 0 else turn)
        else:
            enqueue(d, op)
        reschedule(d, t)

    def copy_done(d, op, t):
        progress(d, t)
        s, k = op // m, op % m
        holder_copy[d, s] = -1
        finish(op, t)
        # the stream keeps its turn if its next operation, already issued, is a copy the same way
        back_to_back = k + 1 < m and direction[k + 1] == d and not math.isnan(issued[op + 1])
        if not back_to_back:
            release(d, s, t)
        reschedule(d, t)

    def turn_over(d, t):
        progress(d, t)
        due = np.flatnonzero(held[d] & (turn_ends_at[d] <= t))
        for s in due[np.argsort(held_since[d, due])]:  # in the order the streams took their engines
            if q_len[d] == 0:
                turn_ends_at[d, s] = t + turn
                continue
            if holder_copy[d, s] >= 0:
                enqueue(d, holder_copy[d, s])  # back of the line with what is left of it
            release(d, s, t)
        reschedule(d, t)

    # -- kernels ---------------------------------------------------------------------------------------
    def fit_one(i, k):  # blocks of kernel row k that SM i has room for now
        r = np.iinfo(np.int64).max
        for j in range(4):
            if needs[k, j] > 0:
                r = min(r, free[i, j] // needs[k, j])
        return r

    def place_blocks(t):
        while ctr[_WAIT_HEAD] < ctr[_WAIT_TAIL]:
            op = waiting[ctr[_WAIT_HEAD]]
            k = op % m
            if ctr[_ROOM_FOR] != k:
                for i in range(sms):
                    room[i] = fit_one(i, k)
                ctr[_ROOM_FOR] = k
            want = min(blocks_left[op], room.sum())
            if want == 0:
                return
            g = pool_free[ctr[_POOL_FREE] - 1]
            ctr[_POOL_FREE] -= 1
            group_op[g] = op
            _spread(room, want, group_take[g])
            for i in range(sms):
                if group_take[g, i]:
                    for j in range(4):
                        free[i, j] -= group_take[g, i] * needs[k, j]
                    room[i] = fit_one(i, k)
            if math.isnan(start[op]):
                start[op] = t
            blocks_left[op] -= want
            blocks_running[op] += want
            push(t + block_time[k], _BLOCKS_DONE, g, 0, 0)
            if blocks_left[op] == 0:
                ctr[_WAIT_HEAD] += 1
            else:
                return

    # -- the loop --------------------------------------------------------------------------------------
    for s in range(n):
        dep_ready[s * m] = 0.0
    issue_next(0.0)
    while heap:
        t, _, what, a, b, c = heapq.heappop(heap)
        if what == _ISSUE:
            issued[a] = t
            maybe_ready(a, t)
            if pageable[a % m] and (kind[a % m] == H2D or kind[a % m] == D2H):
                ctr[_HOST_WAITS_FOR] = a
            else:
                push(t + api_ns, _HOST_FREE, 0, 0, 0)
        elif what == _HOST_FREE:
            issue_next(t)
        elif what == _READY:
            k = a % m
            if kind[k] == KERNEL:
                blocks_left[a] = grid[k]
                waiting[ctr[_WAIT_TAIL]] = a
                ctr[_WAIT_TAIL] += 1
                place_blocks(t)
            elif direction[k] >= 0:
                left[a] = dur[k]
                copy_ready(a, t)
            else:
                start[a] = t
                push(t + dur[k], _OTHER_DONE, a, 0, 0)
        elif what == _COPY_DONE:
            if b == version[a]:
                copy_done(a, c, t)
        elif what == _TURN_ENDS:
            if b == version[a]:
                turn_over(a, t)
        elif what == _BLOCKS_DONE:
            op = group_op[a]
            taken = 0
            for i in range(sms):
                if group_take[a, i]:
                    for j in range(4):
                        free[i, j] += group_take[a, i] * needs[op % m, j]
                    taken += group_take[a, i]
                    if ctr[_ROOM_FOR] >= 0:
                        room[i] = fit_one(i, ctr[_ROOM_FOR])
            blocks_running[op] -= taken
            pool_free[ctr[_POOL_FREE]] = a
            ctr[_POOL_FREE] += 1
            if blocks_left[op] == 0 and blocks_running[op] == 0:
                finish(op, t)
            place_blocks(t)
        elif what == _OTHER_DONE:
            finish(a, t)
    return start, end, issued


@njit(cache=True)
def _spread(room, want, take):
    """Fill `take` with how many of `want` blocks go to each SM as the hardware's block distributor deals
    them: one per SM in turn (lowest index first), never more than an SM's room."""
    lo, hi = 0, room.max()  # the largest level L with sum(min(room, L)) <= want
    while lo < hi:
        mid = (lo + hi + 1) // 2
        dealt = 0
        for r in room:
            dealt += min(r, mid)
        if dealt <= want:
            lo = mid
        else:
            hi = mid - 1
    dealt = 0
    for i in range(room.size):
        take[i] = min(room[i], lo)
        dealt += take[i]
    for i in range(room.size):
        if dealt == want:
            break
        if room[i] > lo:
            take[i] += 1
            dealt += 1
