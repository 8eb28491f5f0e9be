"""The replay's :func:`analyse`: deal the ranks, read, extract, exchange, analyse, gather on process 0.

Every process runs :func:`analyse` with the same arguments; each loads only the ranks dealt to it, and
the cross-rank work is bulk exchanges of typed records (:mod:`gpuan.engine.procs`). The result, on
process 0, does not depend on the number of processes, nor on the engine.

What runs where: reading a rank and extracting its communication calls and intervals is host work over
the Arrow event table (regular expressions over names, a replay in time order); from there the call
records move to the engine (:class:`~gpuan.replay.records.Records`: numpy, or CuPy on a GPU), where
matching, wait states, clock offsets, the point-to-point pairing and each rank's time breakdown run and
whence they are exchanged (device buffers go between processes by the path
:func:`gpuan.engine.procs.device_path` chose). On process 0 the stragglers and the traffic per pair are
totalled there too (:mod:`~gpuan.replay.aggregates`); the tables themselves are pandas frames, built on
the host.
"""

from __future__ import annotations

import contextlib
import resource
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa

from gpuan.arrays import stable_argsort
from gpuan.engine import Engine, resolve
from gpuan.engine.deal import owners, read_own
from gpuan.engine.procs import Procs, exchange_path
from gpuan.errors import UsageError
from gpuan.options import REPLAY_REPORTS
from gpuan.replay.breakdown import BREAKDOWN, RankTime, breakdown, rank_time
from gpuan.replay.collectives import clock_offsets, leave_deviations, match, owner_of
from gpuan.replay.comms import CALL, COLLECTIVE, comm_calls
from gpuan.replay.p2p import late_states
from gpuan.replay.records import Records, allgather, gather, send
from gpuan.replay.tables import frames
from gpuan.result import Result
from gpuan.trace.inputs import RunSources
from gpuan.trace.projection import Projection, projection
from gpuan.trace.table import Trace


@dataclass
class _OwnRanks:
    """What this process extracted from the ranks dealt to it, on the run's common clock: each rank's
    communication calls (:data:`~gpuan.replay.comms.CALL` records, on the engine) and intervals of time."""

    calls: dict[int, Records] = field(default_factory=dict)
    times: dict[int, RankTime] = field(default_factory=dict)
    pg_names: dict[int, str] = field(default_factory=dict)  # process group id → name, of every process
    events: int = 0

    def shift(self, rank: int, delta: int) -> None:
        """Move a rank's calls and intervals `delta` ns later."""
        calls = self.calls[rank]
        calls["enter"] += delta
        calls["leave"] += delta
        self.times[rank] = self.times[rank].shifted(delta)


@dataclass
class _Waits:
    """The wait states this process found: the waits in the collectives it matched (and those
    collectives), the waits of its own ranks' collective calls (sent home from the matching processes),
    the point-to-point messages its ranks received and their sends' Late Receiver waits; and its call
    records as they were before any clock alignment (what the tables report as enter and leave)."""

    calls: Records
    matched_waits: Records
    collectives: Records
    rank_waits: Records
    messages: Records
    send_waits: Records
    offsets: np.ndarray
    fetch_rounds: int


def reads() -> Projection:
    """Return what :func:`analyse` reads of each rank's event table: the communication calls with their
    sizes, groups and peers, the launches that tie them to GPU work, and every kind (it counts the events)."""
    return projection(
        ("ts", "dur", "name", "cat", "kind", "pid", "tid", "device", "stream", "correlation", "external_id", "rank",
         "bytes", "collective", "in_msg_nelems", "out_msg_nelems", "group_size", "dtype", "pg_name", "pg_ranks",
         "seq", "input_dims", "input_types", "concrete_inputs", "peer", "tag"),
    )  # fmt: skip


def analyse(
    sources: RunSources,
    *,
    engine: Engine | str | None = None,
    analyses: tuple[str, ...] = REPLAY_REPORTS,
    deal: str = "round-robin",
    align_clocks: bool = False,
    procs: Procs | None = None,
) -> Result | None:
    """Replay the per-rank sources of a run (:func:`gpuan.trace.ranks.load_run`) and return, on process 0,
    the Result of the `analyses` (some of :data:`REPLAY_REPORTS`; None on the other processes, which only helped).

    `deal` shares the ranks among the processes ("round-robin" or "size"); `align_clocks` applies the
    clock offsets estimated from collective completion before matching; `procs` are the processes that
    share the work (default: this one alone; :func:`gpuan.engine.procs.from_launcher` gives MPI's). The
    tables and the summary do not depend on the run, except ``summary["diagnostics"]`` (wall times, peak
    memory, how device buffers crossed). The matching, the wait states and the exchanges run on the
    `engine` (the module docstring says what stays on the host). Raises TraceError, the same on every
    process, when a rank cannot be read; UsageError for an unknown analysis or deal."""
    engine = resolve(engine)
    unknown = sorted(set(analyses) - set(REPLAY_REPORTS))
    if unknown:
        raise UsageError(f"unknown analysis {', '.join(unknown)}; choose from {', '.join(REPLAY_REPORTS)}")
    procs = procs or Procs()
    clock: dict[str, float] = {}
    start = time.perf_counter()
    with _timed(clock, "read"):
        owner = owners(sources, procs.size, deal)
        traces = read_own(sources, owner, procs, projection=reads())
    with _timed(clock, "extract"):
        own = _extract(traces, len(sources), procs, engine)
    del traces  # the events are no longer needed: only the records extracted from them
    found = _find_waits(own, owner, procs, align_clocks, clock, engine)
    with _timed(clock, "analyse"):
        breakdowns = _breakdowns(own, found, engine)
    with _timed(clock, "exchange"):
        last_rank, last_end = _last_to_finish(own.times, procs)
        gathered = _gather(found, breakdowns, procs)
    clock.update(
        total=time.perf_counter() - start,
        peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        fetch_rounds=found.fetch_rounds,
        events=float(own.events),
    )
    per_process = procs.allgather_small(clock)
    if not procs.is_root:
        return None
    summary = {
        "source": sources.path,
        "ranks": sources.ranks,
        "processes": procs.size,
        "analyses": list(analyses),
        "last_to_finish": {"rank": last_rank, "end_ns": last_end},
        "clocks_aligned": align_clocks,
        # run-dependent (wall times, memory, the exchange's path): what a benchmark reads; no output prints it
        "diagnostics": {"per_process": per_process, "exchange": _exchange_path(procs, engine)},
    }
    return Result("replay", _tables(gathered, own.pg_names, analyses, found.offsets), summary)


def _tables(
    gathered: dict[str, Records], pg_names: dict[int, str], analyses: tuple[str, ...], offsets: np.ndarray
) -> dict[str, pa.Table]:
    """Return the Result's tables: those of the analyses (:func:`~gpuan.replay.tables.frames`) and the
    clock offsets by rank."""
    tables = frames(gathered, pg_names, analyses)
    tables["clock_offsets"] = pd.DataFrame({"rank": np.arange(offsets.size), "offset_ns": offsets})
    return {name: pa.Table.from_pandas(frame, preserve_index=False) for name, frame in tables.items()}


@contextlib.contextmanager
def _timed(clock: dict[str, float], phase: str) -> Iterator[None]:
    """Add the seconds the block takes to ``clock[phase]`` (what the benchmark reports per process)."""
    started = time.perf_counter()
    try:
        yield
    finally:
        clock[phase] = clock.get(phase, 0.0) + time.perf_counter() - started


def _exchange_path(procs: Procs, engine: Engine) -> str:
    """Return how this run's records crossed between processes: "none" (one process), "host" (host
    memory to MPI), or the path device buffers took (:data:`gpuan.engine.procs.DEVICE_PATHS`)."""
    return "none" if procs.comm is None else exchange_path(engine.is_gpu, procs.device_path)


def _extract(traces: dict[int, Trace], n_sources: int, procs: Procs, engine: Engine) -> _OwnRanks:
    """Return the communication calls (on the `engine`) and intervals of this process's ranks, shifted
    onto the clock of the run's earliest rank; the process groups' names are those of every process."""
    bases = [int(trace.metadata.get("base_time_ns", 0)) for trace in traces.values() if len(trace)]
    base = int(procs.allreduce(np.array([min(bases) if bases else np.iinfo(np.int64).max]), "min")[0])
    worlds = [int((t.metadata.get("distributed_info") or {}).get("world_size") or 0) for t in traces.values()]
    world = int(procs.allreduce(np.array([max(worlds + [n_sources])]), "max")[0])
    own = _OwnRanks(events=sum(len(trace) for trace in traces.values()))
    for rank, trace in traces.items():
        calls, names = comm_calls(trace, rank, world)
        own.calls[rank] = Records.of(calls, engine.xp)
        own.times[rank] = rank_time(trace, calls["row"])
        own.pg_names.update(names)
        if len(trace):
            own.shift(rank, int(trace.metadata.get("base_time_ns", 0)) - base)
    for names in procs.allgather_small(own.pg_names):
        own.pg_names.update(names)
    return own


def _find_waits(
    own: _OwnRanks, owner: np.ndarray, procs: Procs, align_clocks: bool, clock: dict, engine: Engine
) -> _Waits:
    """Return the wait states of this process's ranks: collectives matched by the process that owns each
    (process group, sequence number), their waits sent home to the ranks' processes, and the
    point-to-point messages; with `align_clocks`, `own` is first moved by the estimated clock offsets.
    The records are on the `engine`."""
    xp, n_ranks, owner = engine.xp, len(owner), engine.asarray(owner)
    with _timed(clock, "exchange"):
        calls = Records.concat(list(own.calls.values()), CALL, xp)
        collective_calls = calls[calls["kind"] == COLLECTIVE]
        to_match = send(procs, collective_calls, owner_of(collective_calls["pg"], collective_calls["seq"], procs.size))
        # every process applies the offsets to its own ranks: the deviations go to everyone
        offsets = clock_offsets(allgather(procs, leave_deviations(to_match)), n_ranks)
    with _timed(clock, "analyse"):
        if align_clocks:
            for rank in own.calls:
                own.shift(rank, -int(offsets[rank]))
        waits, collectives = match(to_match, offsets if align_clocks else None)
    with _timed(clock, "exchange"):
        rank_waits = send(procs, waits, owner[waits["rank"]])
        messages, send_waits, fetcher = late_states(procs, owner, own.calls, xp)
    return _Waits(calls, waits, collectives, rank_waits, messages, send_waits, offsets, fetcher.rounds)


def _breakdowns(own: _OwnRanks, found: _Waits, engine: Engine) -> np.ndarray:
    """Return the :data:`~gpuan.replay.breakdown.BREAKDOWN` record of each of this process's ranks, swept on
    the `engine`: each rank's intervals, read on the host (:func:`rank_time`), move there once."""
    xp, on = engine.xp, engine.asarray
    rows = []
    for rank in sorted(own.calls):
        calls = own.calls[rank]
        waits = found.rank_waits[found.rank_waits["rank"] == rank]
        by_row = stable_argsort(xp, calls["row"])
        wait_enter = calls["enter"][by_row][xp.searchsorted(calls["row"][by_row], waits["row"])]
        received = found.messages[found.messages["dst"] == rank]
        sent = found.send_waits[found.send_waits["rank"] == rank]
        wait_leave = wait_enter + waits["wait"]
        wait = (
            xp.concatenate((wait_enter, received["recv_enter"], sent["enter"])),
            xp.concatenate((wait_leave, received["recv_enter"] + received["late_sender"], sent["leave"])),
        )
        times = own.times[rank]
        communication = (
            xp.concatenate((calls["enter"], on(times.other_comm[0]))),
            xp.concatenate((calls["leave"], on(times.other_comm[1]))),
        )
        compute, setup = (on(times.compute[0]), on(times.compute[1])), (on(times.setup[0]), on(times.setup[1]))
        rows.append(breakdown(rank, compute, wait, setup, communication, times.span, xp))
    return np.concatenate(rows) if rows else np.zeros(0, BREAKDOWN)


def _gather(found: _Waits, breakdowns: np.ndarray, procs: Procs) -> dict[str, Records | None]:
    """Return every process's records that the tables are built from, on process 0 (None elsewhere)."""
    return {
        "calls": gather(procs, found.calls),
        "waits": gather(procs, found.matched_waits),
        "collectives": gather(procs, found.collectives),
        "messages": gather(procs, found.messages),
        "breakdown": gather(procs, Records.of(breakdowns)),
    }


def _last_to_finish(times: dict[int, RankTime], procs: Procs) -> tuple[int, int]:
    """Return (the rank of the run that finished last, its end in ns); the lowest such rank on a tie."""
    last = max(times, key=lambda rank: (times[rank].span[1], -rank), default=-1)
    end, who = procs.maxloc(np.array([times[last].span[1] if last >= 0 else -1.0]), np.array([last]))
    return int(who[0]), int(end[0])
