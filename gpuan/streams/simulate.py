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
  duration divided by its waves on the whole GPU. A kernel without launch dimensions is placed under the
  assumption ``undimensioned`` (see :func:`kernel_blocks`).
- Other operations (memsets) take their measured time and no shared resource.

Why the cost does not grow with the grid: blocks placed at one time are one group and end together. While
a kernel still has blocks to place (the head of the ready order), every group of it that ends is refilled
at once by the same number of its blocks on the same SMs (nothing else may take them, and the room freed
is exactly the group's), so each of its groups recurs with the period of one block time. The head's
groups are therefore not events: their waves are counted when needed (a float sum per wave), and one
event marks the wave where the head's blocks run out (``_EXHAUST``; far ahead, a ``_REPLAN`` first). The
timeline is the one the loop with an event per group and wave gave, to the bit (compared on the real traces
of ../shared/data, N = 1 to 16, when it replaced that loop). The events grow with the groups, not the
blocks; groups split when blocks of several kernels interleave, so a head kernel runs at most
``max_groups`` of them: blocks freed beyond that join the group whose wave boundary is nearest (its
running wave, ending with it, or its next one, their room held idle until then). This bounds the events
per kernel; where it applied it moved the SD-3.5 trace's prediction by under 0.5 % (bench/streams.py), and
a run whose kernels never split into that many groups is unchanged by it.

The event loop (``_run``) is compiled with numba: one heap of events, the state in numpy arrays, its steps
closures over that state. numba inlines a closure at every call site and types it again there, so the loop
calls each step from one place, after the branch of the event's kind has said what is left to do: with the
steps called in each branch (a closure inlined within another's inlined copies) it compiled for over a
minute and a half, now for about a third of that on a 2-core machine. Run with ``NUMBA_DISABLE_JIT=1`` it
is plain Python, the same code, for stepping through in a debugger.
"""

from __future__ import annotations

import heapq
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numba import njit

from gpuan.devices import GPU
from gpuan.options import STREAMS_LAUNCH_ORDERS, STREAMS_UNDIMENSIONED
from gpuan.streams.occupancy import WARP, block_needs, fit, sm_capacity
from gpuan.streams.workload import COPY, D2H, H2D, KERNEL, KIND_NAMES, Workload


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
    #: what a kernel without launch dimensions is taken to be (one of STREAMS_UNDIMENSIONED)
    undimensioned: str = "device"
    #: groups of blocks the kernel placing blocks may run at once: blocks freed beyond them wait for the
    #: group whose next wave starts first (see the module docstring); 0: no limit
    max_groups: int = 32


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


def issue_order(n_ops: int, n_streams: int, order: str) -> np.ndarray:
    """Return the (stream, op) pairs in the order the host issues them, as rows of an (n_streams * n_ops, 2)
    array: ``breadth`` issues operation k of every stream before operation k+1 of any; ``depth`` issues all
    of stream 0, then stream 1, ..."""
    if order not in ("breadth", "depth"):
        raise ValueError(f"launch order must be one of {STREAMS_LAUNCH_ORDERS}, not {order!r}")
    stream, op = np.meshgrid(np.arange(n_streams), np.arange(n_ops), indexing="xy" if order == "breadth" else "ij")
    return np.stack([stream.ravel(), op.ravel()], axis=1)


@dataclass(frozen=True)
class Blocks:
    """How each operation's kernel runs as thread blocks (rows of non-kernels are unused): what one block
    holds on an SM, how many blocks, how many fit one SM, and how long one lasts (ns)."""

    needs: np.ndarray  # (n, 4), the columns of block_needs
    grid: np.ndarray
    per_sm: np.ndarray
    time: np.ndarray


def kernel_blocks(w: Workload, gpu: GPU, undimensioned: str = "device") -> Blocks:
    """Return the blocks of the workload's kernels; a block lasts the kernel's average block time, its
    duration / ceil(grid / (SMs x blocks per SM)). Kernels without a launch configuration (see
    :meth:`Workload.undimensioned`) are what :data:`STREAMS_UNDIMENSIONED` says of `undimensioned`."""
    if undimensioned not in STREAMS_UNDIMENSIONED:
        raise ValueError(f"undimensioned must be one of {sorted(STREAMS_UNDIMENSIONED)}, not {undimensioned!r}")
    capacity = sm_capacity(gpu)
    known = (w.kind == KERNEL) & ~w.undimensioned()
    if undimensioned == "device":
        assumed, assumed_grid = capacity, gpu.sms
    else:
        assumed, assumed_grid = block_needs(gpu, [WARP], [0], [0])[0], 1
    needs = np.where(known[:, None], block_needs(gpu, w.threads, w.registers, w.shared_memory), assumed[None, :])
    per_sm = np.maximum(fit(capacity[None, :], needs), 1)
    grid = np.where(known, w.grid, assumed_grid)
    waves = -(-grid // (gpu.sms * per_sm))
    return Blocks(needs, grid, per_sm, np.where(w.kind == KERNEL, w.dur / waves, 0.0))


RESOURCES = ("threads", "registers", "bytes of shared memory", "block slots")


class BlockTooBig(ValueError):
    """A kernel's thread block does not fit an empty SM of the GPU simulated (a trace from a larger GPU
    simulated on a smaller one)."""


def too_big(w: Workload, gpu: GPU, undimensioned: str = "device") -> list[str]:
    """Return, for each kernel whose thread block does not fit an empty SM of `gpu`, what it needs against
    what an SM has; empty when all fit."""
    capacity = sm_capacity(gpu)
    needs = kernel_blocks(w, gpu, undimensioned).needs  # rows other than launched kernels fit by construction
    return [
        f"kernel {w.names[i][:80]} needs {needs[i, j]} {RESOURCES[j]} per block, a {gpu.name} SM has {capacity[j]}"
        for i, j in np.argwhere(needs > capacity[None, :])
    ]


def simulate(w: Workload, settings: Settings, progress: Callable[[int, int], None] | None = None) -> Timeline:
    """Return the timeline of `settings.n_streams` copies of workload `w` issued on as many streams.
    Raises :class:`BlockTooBig` if a kernel's block does not fit an SM of the GPU (see :func:`too_big`).

    `progress`, if given, is called with (operations finished, operations) every tenth of a second once
    the simulation has run for :data:`PROGRESS_AFTER_S` (never for a short one)."""
    gpu, n, m = settings.gpu, settings.n_streams, len(w)
    problems = too_big(w, gpu, settings.undimensioned)
    if problems:
        raise BlockTooBig(problems[0])
    blocks = kernel_blocks(w, gpu, settings.undimensioned)
    direction = _DIRECTION[np.asarray(w.kind, np.int64)]
    pairs = issue_order(m, n, settings.launch_order)
    order = (pairs[:, 0] * m + pairs[:, 1]).astype(np.int64)
    turn = settings.copy_turn_ns if settings.copy_turn_ns is not None else math.inf
    first_turn = settings.copy_first_turn_ns if settings.copy_first_turn_ns is not None else turn
    args = (
        n, np.asarray(w.kind, np.int64), direction, np.asarray(w.dur, np.float64), np.asarray(w.gap, np.float64),
        np.asarray(w.pageable, np.bool_), np.asarray(blocks.needs, np.int64), np.asarray(blocks.grid, np.int64),
        np.asarray(blocks.time, np.float64), sm_capacity(gpu), int(gpu.sms), np.array(settings.engines, np.int64),
        float(settings.api_ns), float(turn), float(first_turn), order, int(settings.max_groups or -1),
    )  # fmt: skip
    done = np.zeros(1, np.int64)
    start, end, issued = _run(*args, done) if progress is None else _reporting(args, done, n * m, progress)
    if np.isnan(end).any():  # pragma: no cover - every op finishes by construction
        raise RuntimeError("simulation ended with unfinished operations")
    stream, index = np.repeat(np.arange(n), m), np.tile(np.arange(m), n)
    return Timeline(stream=stream, index=index, start=start, end=end, issued=issued)


#: seconds a simulation runs before it reports progress
PROGRESS_AFTER_S = 1.0


def _reporting(args: tuple, done: np.ndarray, total: int, progress: Callable[[int, int], None]):
    """Run the event loop in a thread (it holds no GIL) and report `done` to `progress` while it runs;
    return what the loop returns, or raise what it raised."""
    out: list = []

    def work() -> None:
        try:
            out.append(_run(*args, done))
        except BaseException as e:  # handed to the caller's thread
            out.append(e)

    worker = threading.Thread(target=work, name="gpuan-streams", daemon=True)
    began = time.monotonic()
    worker.start()
    while worker.is_alive():
        worker.join(0.1)
        if worker.is_alive() and time.monotonic() - began >= PROGRESS_AFTER_S:
            progress(int(done[0]), total)
    if isinstance(out[0], BaseException):
        raise out[0]
    return out[0]


#: each workload kind's copy direction (0 to the device, 1 to the host, 2 within it), -1 for non-copies
_DIRECTION = np.full(len(KIND_NAMES), -1, np.int64)
_DIRECTION[[H2D, D2H, COPY]] = [0, 1, 2]


# Event kinds. Events are (time, sequence number, kind, a, b, copy_op): equal times pop in the order pushed;
# copy_op is the copy a _COPY_DONE ends (0 for the other kinds).
_ISSUE, _READY, _COPY_DONE, _BLOCKS_DONE, _OTHER_DONE, _TURN_ENDS, _HOST_FREE, _EXHAUST, _REPLAN = range(9)
# Slots of the loop's counters (numba closures cannot rebind captured scalars, so they live in an array).
_SEQ, _HOST_WAITS_FOR, _NEXT_ISSUE, _WAIT_HEAD, _WAIT_TAIL, _POOL_FREE, _HOLD_SEQ, _ROOM_FOR = range(8)
_GROUP_SEQ, _N_HEAD, _PLAN = range(8, 11)


@njit(cache=True, nogil=True)
def _run(n, kind, direction, dur, gap, pageable, needs, grid, block_time, capacity, sms, engines, api_ns, turn,
         first_turn, order, max_groups, done):  # fmt: skip
    """The event loop of :func:`simulate`; returns the start, end and issue time of every operation (row
    stream * m + k). Operation ids are rows; per-direction copy state is one row per direction, one column
    per stream. ``done[0]`` counts the finished operations as it runs (read by another thread for a
    progress bar; the loop holds no GIL)."""
    m = kind.size
    total = n * m
    start = np.full(total, np.nan)
    end = np.full(total, np.nan)
    issued = np.full(total, np.nan)
    dep_ready = np.full(total, np.nan)  # when the stream predecessor allows the op (end + gap)
    ctr = np.zeros(11, np.int64)
    ctr[_HOST_WAITS_FOR] = -1  # the pageable copy the host is held by, if any
    ctr[_ROOM_FOR] = -1  # the kernel row `room` holds each SM's room for
    heap = [(0.0, 0.0, np.int64(0), np.int64(0), np.int64(0), np.int64(0), np.int64(0))]
    heap.pop()
    clock = np.zeros(1)  # the time of the event being handled

    # kernels: free SM resources, kernels placing blocks in ready order, block groups in flight. A group
    # is the blocks of one kernel placed at one time; they end together. The head kernel's groups recur
    # (see _EXHAUST): wave j of group g runs from born[g] + j x block time, and only the wave where the
    # head's blocks run out is an event.
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
    group_w = np.zeros(pool, np.int64)  # blocks per wave
    group_placed = np.zeros(pool)  # when it was placed
    group_seq = np.zeros(pool, np.int64)  # creation order
    group_j = np.zeros(pool, np.int64)  # its wave that started last (0: the one placed)
    group_at = np.zeros(pool)  # when that wave started
    group_cap = np.zeros(pool, np.int64)  # its last full wave under the head's current plan
    head = np.empty(pool, np.int64)  # the recurring groups of the head kernel (ctr[_N_HEAD] of them)
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

    def push_from(t, scheduled, what, a, b, copy_op):
        # events at one time pop in the order they were scheduled (time, then order of pushing); a
        # recurring group's wave is scheduled when the wave before it starts, though pushed later
        heapq.heappush(heap, (t, scheduled, ctr[_SEQ], np.int64(what), np.int64(a), np.int64(b), np.int64(copy_op)))
        ctr[_SEQ] += 1

    def push(t, what, a, b, copy_op):
        push_from(t, clock[0], what, a, b, copy_op)

    def issue_next(t):
        if ctr[_NEXT_ISSUE] < order.size:
            push(t, _ISSUE, order[ctr[_NEXT_ISSUE]], 0, 0)
            ctr[_NEXT_ISSUE] += 1

    def maybe_ready(op, t):
        if not math.isnan(issued[op]) and not math.isnan(dep_ready[op]):
            push(max(issued[op], dep_ready[op], t), _READY, op, 0, 0)

    def finish(op, t):
        end[op] = t
        done[0] += 1
        if op % m + 1 < m:
            dep_ready[op + 1] = t + gap[(op + 1) % m]
            maybe_ready(op + 1, t)
        if ctr[_HOST_WAITS_FOR] == op:
            ctr[_HOST_WAITS_FOR] = -1
            push(t + api_ns, _HOST_FREE, 0, 0, 0)

    # -- copies ----------------------------------------------------------------------------------------
    def progress(d, t):
        moving = 0
        for stream in range(n):
            moving += holder_copy[d, stream] >= 0
        if moving and t > since[d]:
            each = (t - since[d]) / moving
            for stream in range(n):
                if holder_copy[d, stream] >= 0:
                    left[holder_copy[d, stream]] -= each
        since[d] = t

    def reschedule(d, t):
        version[d] += 1
        moving, first = 0, -1
        for stream in range(n):
            moving_copy = holder_copy[d, stream]
            if moving_copy >= 0:
                moving += 1
                if (
                    first < 0
                    or left[moving_copy] < left[first]
                    or (left[moving_copy] == left[first] and moving_copy < first)
                ):
                    first = moving_copy
        if moving:
            push(t + max(left[first], 0.0) * moving, _COPY_DONE, d, version[d], first)
        if q_len[d] and n_held[d]:
            soonest = math.inf
            for stream in range(n):
                if held[d, stream]:
                    soonest = min(soonest, turn_ends_at[d, stream])
            push(max(t, soonest), _TURN_ENDS, d, version[d], 0)

    def enqueue(d, op):
        queue[d, (q_head[d] + q_len[d]) % (n + 1)] = op
        q_len[d] += 1

    def take_turn(d, op, t, length):
        stream = op // m
        held[d, stream] = True
        holder_copy[d, stream] = op
        turn_ends_at[d, stream] = t + length
        held_since[d, stream] = ctr[_HOLD_SEQ]
        ctr[_HOLD_SEQ] += 1
        n_held[d] += 1
        if math.isnan(start[op]):  # a preempted copy keeps its first start
            start[op] = t

    def release(d, stream, t):
        if held[d, stream]:
            held[d, stream] = False
            holder_copy[d, stream] = -1
            n_held[d] -= 1
        while q_len[d] and n_held[d] < engines[d]:
            op = queue[d, q_head[d]]
            q_head[d] = (q_head[d] + 1) % (n + 1)
            q_len[d] -= 1
            take_turn(d, op, t, turn)

    def copy_ready(op, t):
        d, stream = direction[op % m], op // m
        progress(d, t)
        if held[d, stream]:  # back to back within the stream's turn
            holder_copy[d, stream] = op
            start[op] = t
        elif n_held[d] < engines[d]:
            # an idle engine: a full first turn before waiting streams get theirs
            take_turn(d, op, t, first_turn if n_held[d] == 0 and q_len[d] == 0 else turn)
        else:
            enqueue(d, op)

    def copy_done(d, op, t):
        progress(d, t)
        stream, k = op // m, op % m
        holder_copy[d, stream] = -1  # the loop finishes op after this (nothing here reads what that sets)
        # the stream keeps its turn if its next operation, already issued, is a copy the same way
        back_to_back = k + 1 < m and direction[k + 1] == d and not math.isnan(issued[op + 1])
        if not back_to_back:
            release(d, stream, t)

    def turn_over(d, t):
        progress(d, t)
        due = np.flatnonzero(held[d] & (turn_ends_at[d] <= t))
        for stream in due[np.argsort(held_since[d, due])]:  # in the order the streams took their engines
            if q_len[d] == 0:
                turn_ends_at[d, stream] = t + turn
                continue
            if holder_copy[d, stream] >= 0:
                enqueue(d, holder_copy[d, stream])  # back of the line with what is left of it
            release(d, stream, t)

    # -- kernels ---------------------------------------------------------------------------------------
    def fit_one(i, k):  # blocks of kernel row k that SM i has room for now
        r = np.iinfo(np.int64).max
        for j in range(4):
            if needs[k, j] > 0:
                r = min(r, free[i, j] // needs[k, j])
        return r

    def settle(t):
        # the head's waves that started before t take their blocks (never past the plan's caps). A wave
        # starts where the one before it ends, start + block time, the sum the one-event-per-wave loop
        # formed: waves of groups placed at one instant stay at one instant, as there
        for nth in range(ctr[_N_HEAD]):
            g = head[nth]
            tb = block_time[group_op[g] % m]
            j, at = group_j[g], group_at[g]
            while j < group_cap[g] and at + tb < t:
                at += tb
                j += 1
            blocks_left[group_op[g]] -= (j - group_j[g]) * group_w[g]
            group_j[g], group_at[g] = j, at

    def wave_order(rounds, starts):
        # the head's groups in the order their waves `rounds` after the next one start (returned in
        # `starts`, the start of the wave before it in starts[nh:]): by time, then the group placed later
        # first (its wave was scheduled by an event handled before the older group's wave at that
        # instant), then the one created first
        nh = ctr[_N_HEAD]
        placed = np.empty(nh)
        seq = np.empty(nh, np.int64)
        for nth in range(nh):
            g = head[nth]
            tb = block_time[group_op[g] % m]
            at = group_at[g]
            for _ in range(rounds):
                at += tb
            starts[nh + nth] = at
            starts[nth] = at + tb
            placed[nth] = -group_placed[g]
            seq[nth] = group_seq[g]
        idx = np.argsort(seq)
        idx = idx[np.argsort(placed[idx], kind="mergesort")]
        return idx[np.argsort(starts[:nh][idx], kind="mergesort")]

    def plan(t):
        # where the head's blocks run out: its groups take their blocks wave after wave, `rounds` full
        # rounds, then in order until the last blocks; caps say how many waves each group runs before.
        # Far from the end (more than 2 rounds) the caps stop every group a round early and a _REPLAN
        # comes before any reaches its cap, so a plan walks at most 3 waves of each group
        op = group_op[head[0]]
        nh = ctr[_N_HEAD]
        per_round = 0
        for nth in range(nh):
            per_round += group_w[head[nth]]
        rounds = (blocks_left[op] - 1) // per_round
        ctr[_PLAN] += 1
        if rounds > 2:
            for nth in range(nh):
                group_cap[head[nth]] = group_j[head[nth]] + rounds - 1
            push(t + (rounds - 1.5) * block_time[op % m], _REPLAN, ctr[_PLAN], 0, 0)
            return
        still = blocks_left[op] - rounds * per_round
        starts = np.empty(2 * nh)
        last = -1
        for nth in wave_order(rounds, starts):
            g = head[nth]
            if last < 0 and still <= group_w[g]:
                last = nth
            group_cap[g] = group_j[g] + rounds + (1 if last < 0 else 0)
            still -= group_w[g] if last < 0 else 0
        push_from(starts[last], starts[nh + last], _EXHAUST, ctr[_PLAN], head[last], 0)

    def release_group(g):
        op = group_op[g]
        taken = 0
        for i in range(sms):
            if group_take[g, i]:
                for j in range(4):
                    free[i, j] += group_take[g, i] * needs[op % m, j]
                taken += group_take[g, i]
                if ctr[_ROOM_FOR] >= 0:
                    room[i] = fit_one(i, ctr[_ROOM_FOR])
        blocks_running[op] -= taken
        pool_free[ctr[_POOL_FREE]] = g
        ctr[_POOL_FREE] += 1

    def place_blocks(t, replan):
        # the head's waves up to t take their blocks, then the waiting kernels place theirs; with `replan`
        # the head's waves are only planned again
        settle(t)
        while not replan and ctr[_WAIT_HEAD] < ctr[_WAIT_TAIL]:
            op = waiting[ctr[_WAIT_HEAD]]
            k = op % m
            if ctr[_ROOM_FOR] != k:
                for i in range(sms):
                    room[i] = fit_one(i, k)
                ctr[_ROOM_FOR] = k
            want = min(blocks_left[op], room.sum())
            if want == 0:
                break
            g = pool_free[ctr[_POOL_FREE] - 1]
            ctr[_POOL_FREE] -= 1
            group_op[g] = op
            group_w[g] = want
            group_placed[g] = t
            group_at[g] = t
            group_j[g] = 0
            group_seq[g] = ctr[_GROUP_SEQ]
            ctr[_GROUP_SEQ] += 1
            _spread(room, want, group_take[g])
            for i in range(sms):
                if group_take[g, i]:
                    for j in range(4):
                        free[i, j] -= group_take[g, i] * needs[k, j]
                    room[i] = fit_one(i, k)
            if math.isnan(start[op]):
                start[op] = t
            blocks_running[op] += want
            if blocks_left[op] > want and ctr[_N_HEAD] == max_groups:
                # as many groups as allowed: these blocks join the group whose wave boundary is nearest, the
                # wave running now (ending with it, sooner than a wave of their own would) or the next one
                # (holding their room idle until it starts)
                tb = block_time[k]
                latest, soonest = head[0], head[0]
                for nth in range(1, ctr[_N_HEAD]):
                    if group_at[head[nth]] > group_at[latest]:
                        latest = head[nth]
                    if group_at[head[nth]] < group_at[soonest]:
                        soonest = head[nth]
                now = t - group_at[latest] <= group_at[soonest] + tb - t
                into = latest if now else soonest
                if now:
                    blocks_left[op] -= want
                group_w[into] += want
                for i in range(sms):
                    group_take[into, i] += group_take[g, i]
                pool_free[ctr[_POOL_FREE]] = g
                ctr[_POOL_FREE] += 1
                replan = True
                break
            blocks_left[op] -= want
            if blocks_left[op] > 0:  # the head: this group recurs with the others
                head[ctr[_N_HEAD]] = g
                ctr[_N_HEAD] += 1
                replan = True
                break
            # all placed: every group of the kernel ends with the wave it runs
            nh = ctr[_N_HEAD]
            ends = np.empty(2 * nh)
            for nth in wave_order(0, ends):
                push_from(ends[nth], ends[nh + nth], _BLOCKS_DONE, head[nth], 0, 0)
            push(t + block_time[k], _BLOCKS_DONE, g, 0, 0)
            ctr[_N_HEAD] = 0
            ctr[_PLAN] += 1
            ctr[_WAIT_HEAD] += 1
        if replan:
            plan(t)

    # -- the loop --------------------------------------------------------------------------------------
    for stream in range(n):
        dep_ready[stream * m] = 0.0
    issue_next(0.0)
    while heap:
        t, _, _, what, a, b, copy_op = heapq.heappop(heap)
        clock[0] = t
        finished, place, replan, copies = -1, False, False, -1  # what is left to do after the branches
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
                place = True
            elif direction[k] >= 0:
                left[a] = dur[k]
                copy_ready(a, t)
                copies = direction[k]
            else:
                start[a] = t
                push(t + dur[k], _OTHER_DONE, a, 0, 0)
        elif what == _COPY_DONE:
            if b == version[a]:
                copy_done(a, copy_op, t)
                finished, copies = copy_op, a
        elif what == _TURN_ENDS:
            if b == version[a]:
                turn_over(a, t)
                copies = a
        elif what == _BLOCKS_DONE:
            op = group_op[a]
            release_group(a)
            if blocks_left[op] == 0 and blocks_running[op] == 0:
                finished = op
            place = True
        elif what == _EXHAUST:
            if a == ctr[_PLAN]:  # the head's groups run their planned waves; group b ends with its last
                settle(math.inf)
                at = 0
                for nth in range(ctr[_N_HEAD]):
                    at = nth if head[nth] == b else at
                ctr[_N_HEAD] -= 1
                head[at] = head[ctr[_N_HEAD]]
                release_group(b)
                place = True  # the head's last blocks where b ran (its settle(t) a no-op now), then the next kernels
        elif what == _REPLAN:
            if a == ctr[_PLAN]:
                replan = True
        elif what == _OTHER_DONE:
            finished = a
        # each step is called at one place: numba inlines a closure at every call site and types it again
        # there (with these steps in each branch, the loop took over a minute to compile)
        if finished >= 0:
            finish(finished, t)
        if place or replan:
            place_blocks(t, replan)
        if copies >= 0:
            reschedule(copies, t)
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
