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
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

import numpy as np

from gpuan.devices import GPU
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


@dataclass
class _Copy:
    op: int
    stream: int
    direction: int
    left: float  # ns of transfer at its single-stream rate still to do


@dataclass
class _Holder:
    """A stream holding a copy engine: its copy moving now (None between two back-to-back copies) and the
    end of its turn."""

    copy: _Copy | None
    turn_ends: float


@dataclass
class _Direction:
    index: int  # H2D, D2H, device to device: as _direction() numbers them
    engines: int
    holders: dict[int, _Holder] = field(default_factory=dict)  # stream -> its engine turn
    queue: list[_Copy] = field(default_factory=list)  # copies waiting for a turn, in order
    since: float = 0.0  # time the holders' `left` was last brought up to date
    version: int = 0

    def moving(self) -> list[_Copy]:
        return [h.copy for h in self.holders.values() if h.copy is not None]


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


def simulate(w: Workload, settings: Settings) -> Timeline:
    """Return the timeline of `settings.n_streams` copies of workload `w` issued on as many streams."""
    gpu, n, m = settings.gpu, settings.n_streams, len(w)
    total = n * m
    start = np.full(total, np.nan)
    end = np.full(total, np.nan)
    issued = np.full(total, np.nan)
    dep_ready = np.full(total, np.nan)  # when the stream predecessor allows the op (end + gap)
    stream_of = np.repeat(np.arange(n), m)
    index_of = np.tile(np.arange(m), n)

    free = np.tile(sm_capacity(gpu), (gpu.sms, 1))
    blocks = kernel_blocks(w, gpu)
    needs, block_time = blocks.needs, blocks.time
    kernels_waiting: list[int] = []  # op ids ready to place blocks, in order
    blocks_left = np.zeros(total, np.int64)  # blocks not yet placed
    blocks_running = np.zeros(total, np.int64)

    directions = [_Direction(i, e) for i, e in enumerate(settings.engines)]
    events: list[tuple[float, int, int, object]] = []
    seq = 0

    def push(t: float, what: int, payload: object) -> None:
        nonlocal seq
        heapq.heappush(events, (t, seq, what, payload))
        seq += 1

    # event kinds
    ISSUE, READY, COPY_DONE, BLOCKS_DONE, OTHER_DONE, TURN_ENDS, HOST_FREE = range(7)
    order = iter(issue_order(m, n, settings.launch_order))
    host_waits_for = -1  # the pageable copy the host is held by, if any

    def issue_next(t: float) -> None:
        s, k = next(order, (-1, -1))
        if s >= 0:
            push(t, ISSUE, s * m + k)

    def maybe_ready(op: int, t: float) -> None:
        if not math.isnan(issued[op]) and not math.isnan(dep_ready[op]):
            push(max(issued[op], dep_ready[op], t), READY, op)

    # -- copies ----------------------------------------------------------------------------------------
    turn = settings.copy_turn_ns if settings.copy_turn_ns is not None else math.inf
    first_turn = settings.copy_first_turn_ns if settings.copy_first_turn_ns is not None else turn

    def progress(d: _Direction, t: float) -> None:
        moving = d.moving()
        if moving and t > d.since:
            done = (t - d.since) / len(moving)
            for c in moving:
                c.left -= done
        d.since = t

    def reschedule(d: _Direction, t: float) -> None:
        d.version += 1
        moving = d.moving()
        if moving:
            c = min(moving, key=lambda c: (c.left, c.op))
            push(t + max(c.left, 0.0) * len(moving), COPY_DONE, (d.index, d.version, c.op))
        if d.queue and d.holders:
            push(max(t, min(h.turn_ends for h in d.holders.values())), TURN_ENDS, (d.index, d.version))

    def take_turn(d: _Direction, c: _Copy, t: float, length: float) -> None:
        d.holders[c.stream] = _Holder(c, t + length)
        if math.isnan(start[c.op]):  # a preempted copy keeps its first start
            start[c.op] = t

    def copy_ready(c: _Copy, t: float) -> None:
        d = directions[c.direction]
        progress(d, t)
        held = d.holders.get(c.stream)
        if held is not None:  # back to back within the stream's turn
            held.copy = c
            start[c.op] = t
        elif len(d.holders) < d.engines:
            # an idle engine: a full first turn before waiting streams get theirs
            take_turn(d, c, t, first_turn if not d.holders and not d.queue else turn)
        else:
            d.queue.append(c)
        reschedule(d, t)

    def release(d: _Direction, stream: int, t: float) -> None:
        d.holders.pop(stream, None)
        while d.queue and len(d.holders) < d.engines:
            take_turn(d, d.queue.pop(0), t, turn)

    def copy_done(d: _Direction, op: int, t: float) -> None:
        progress(d, t)
        s_ = int(stream_of[op])
        d.holders[s_].copy = None
        finish(op, t)
        # the stream keeps its turn if its next operation, already issued, is a copy the same way
        k = index_of[op]
        back_to_back = k + 1 < m and _direction(w.kind[k + 1]) == d.index and not math.isnan(issued[op + 1])
        if not back_to_back:
            release(d, s_, t)
        reschedule(d, t)

    def turn_ends(d: _Direction, t: float) -> None:
        progress(d, t)
        due = [s_ for s_, h in d.holders.items() if h.turn_ends <= t]
        for s_ in due:
            if not d.queue:
                d.holders[s_].turn_ends = t + turn
                continue
            h = d.holders[s_]
            if h.copy is not None:
                d.queue.append(h.copy)  # back of the line with what is left of it
            release(d, s_, t)
        reschedule(d, t)

    # -- kernels ---------------------------------------------------------------------------------------
    def place_blocks(t: float) -> None:
        while kernels_waiting:
            op = kernels_waiting[0]
            k = index_of[op]
            room = fit(free, needs[k])
            want = int(min(blocks_left[op], room.sum()))
            if want == 0:
                return
            take = _spread(room, want)
            free[:] -= take[:, None] * needs[k][None, :]
            if math.isnan(start[op]):
                start[op] = t
            blocks_left[op] -= want
            blocks_running[op] += want
            push(t + block_time[k], BLOCKS_DONE, (op, take))
            if blocks_left[op] == 0:
                kernels_waiting.pop(0)
            else:
                return

    # -- the loop --------------------------------------------------------------------------------------
    def finish(op: int, t: float) -> None:
        nonlocal host_waits_for
        end[op] = t
        if index_of[op] + 1 < m:
            nxt = op + 1
            dep_ready[nxt] = t + w.gap[index_of[nxt]]
            maybe_ready(nxt, t)
        if host_waits_for == op:
            host_waits_for = -1
            push(t + settings.api_ns, HOST_FREE, None)

    for s in range(n):
        dep_ready[s * m] = 0.0
    issue_next(0.0)
    while events:
        t, _, what, payload = heapq.heappop(events)
        if what == ISSUE:
            op = int(payload)
            issued[op] = t
            maybe_ready(op, t)
            if w.pageable[index_of[op]] and w.kind[index_of[op]] in (H2D, D2H):
                host_waits_for = op
            else:
                push(t + settings.api_ns, HOST_FREE, None)
        elif what == HOST_FREE:
            issue_next(t)
        elif what == READY:
            op = int(payload)
            k = index_of[op]
            kind = w.kind[k]
            if kind == KERNEL:
                blocks_left[op] = blocks.grid[k]
                kernels_waiting.append(op)
                place_blocks(t)
            elif kind in (H2D, D2H, COPY):
                copy_ready(_Copy(op, int(stream_of[op]), _direction(kind), float(w.dur[k])), t)
            else:
                start[op] = t
                push(t + w.dur[k], OTHER_DONE, op)
        elif what == COPY_DONE:
            d_index, version, op = payload
            d = directions[d_index]
            if version == d.version:
                copy_done(d, op, t)
        elif what == TURN_ENDS:
            d_index, version = payload
            d = directions[d_index]
            if version == d.version:
                turn_ends(d, t)
        elif what == BLOCKS_DONE:
            op, take = payload
            free[:] += take[:, None] * needs[index_of[op]][None, :]
            blocks_running[op] -= int(take.sum())
            if blocks_left[op] == 0 and blocks_running[op] == 0:
                finish(op, t)
            place_blocks(t)
        elif what == OTHER_DONE:
            finish(int(payload), t)
    if np.isnan(end).any():  # pragma: no cover - every op finishes by construction
        raise RuntimeError("simulation ended with unfinished operations")
    return Timeline(stream=stream_of, index=index_of, start=start, end=end, issued=issued)


def _direction(kind: int) -> int:
    return {H2D: 0, D2H: 1, COPY: 2}.get(int(kind), -1)


def _spread(room: np.ndarray, want: int) -> np.ndarray:
    """Return how many of `want` blocks go to each SM as the hardware's block distributor deals them: one
    per SM in turn (lowest index first), never more than an SM's room."""
    lo, hi = 0, int(room.max())  # the largest level L with sum(min(room, L)) <= want
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if int(np.minimum(room, mid).sum()) <= want:
            lo = mid
        else:
            hi = mid - 1
    take = np.minimum(room, lo)
    left = want - int(take.sum())
    if left:
        take[np.flatnonzero(room > lo)[:left]] += 1
    return take
