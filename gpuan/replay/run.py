"""The replay job: deal the ranks, read, extract, exchange, analyse, gather on process 0.

Every process runs :func:`replay` with the same arguments; each reads only the ranks dealt to it, and
the cross-rank work is bulk exchanges of typed records (:mod:`procs`). The result, on process 0, does
not depend on the number of processes.
"""

from __future__ import annotations

import resource
import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from gpuan.errors import TraceError
from gpuan.replay import breakdown as bd
from gpuan.replay.collectives import clock_offsets, leave_deviations, match, owner_of
from gpuan.replay.comms import CALL, COLLECTIVE, comm_calls
from gpuan.replay.deal import Source, deal, shared_own_ranks, sources
from gpuan.replay.p2p import late_states
from gpuan.replay.procs import Procs
from gpuan.replay.procs import procs as default_procs
from gpuan.replay.tables import frames

ANALYSES = ("waits", "stragglers", "breakdown", "comm-matrix")


@dataclass
class Replayed:
    """What a replay found (on process 0): pandas tables, the run's facts, and how the job went."""

    tables: dict[str, pd.DataFrame]
    ranks: list[int]
    source: str
    n_procs: int
    offsets: np.ndarray
    aligned: bool
    finish: tuple[int, int] = (-1, 0)  # (the rank that finished last, when: ns)
    timings: list[dict[str, float]] = field(default_factory=list)  # per process: seconds per phase, peak RSS


def replay(
    run: str,
    *,
    procs: Procs | None = None,
    analyses: tuple[str, ...] = ANALYSES,
    deal_by: str = "round-robin",
    align_clocks: bool = False,
) -> Replayed | None:
    """Replay the per-rank traces of `run` (a directory of per-rank traces, or an OTF2 archive) and
    return what the analyses found on process 0 (None on the other processes).

    Raises TraceError (the same one on every process) when any process cannot list the run or read its
    ranks."""
    procs = procs or default_procs()
    unknown = set(analyses) - set(ANALYSES)
    if unknown:
        raise ValueError(f"unknown analyses {sorted(unknown)}; choose from {', '.join(ANALYSES)}")
    clock: dict[str, float] = {}
    t0 = time.perf_counter()

    # the listing, too, is agreed on: a directory one process cannot list must not leave the others
    # waiting in the exchanges that follow
    srcs, owner, traces, problem, at = [], np.zeros(0, np.int64), {}, None, -1
    try:
        srcs = sources(run, shared_own_ranks(procs))
        owner = _owners(srcs, procs.size, deal_by)
        for s in srcs:
            if owner[s.rank] == procs.rank:
                at = s.rank
                traces[s.rank] = s.read()
    except TraceError as e:
        problem = (at, e.path, e.problem)
    problems = [p for p in procs.allgather_small(problem) if p]
    if problems:  # every process stops together, none waits forever in a later exchange
        # each process stops at its lowest bad rank: the lowest of those is what one process would meet
        # first, so the error does not depend on the number of processes
        raise TraceError(*min(problems)[1:])
    ranks = [s.rank for s in srcs]
    clock["read"] = time.perf_counter() - t0

    t = time.perf_counter()
    bases = [int(tr.metadata.get("base_time_ns", 0)) for tr in traces.values() if len(tr)]
    base = int(procs.allreduce(np.array([min(bases) if bases else np.iinfo(np.int64).max]), "min")[0])
    worlds = [int((tr.metadata.get("distributed_info") or {}).get("world_size") or 0) for tr in traces.values()]
    world = int(procs.allreduce(np.array([max(worlds + [len(srcs)])]), "max")[0])
    calls, times, pg_names = {}, {}, {}
    n_events = sum(len(tr) for tr in traces.values())
    for r, tr in traces.items():
        shift = int(tr.metadata.get("base_time_ns", 0)) - base if len(tr) else 0
        c, names = comm_calls(tr, r, world)
        c["enter"] += shift
        c["leave"] += shift
        calls[r] = c
        pg_names.update(names)
        times[r] = bd.rank_time(tr, c["row"]).shifted(shift)
    del traces
    for part in procs.allgather_small(pg_names):
        pg_names.update(part)
    clock["extract"] = time.perf_counter() - t

    exchange = 0.0
    t = time.perf_counter()
    local = np.concatenate(list(calls.values())) if calls else np.zeros(0, CALL)
    coll_local = local[local["kind"] == COLLECTIVE]
    got = procs.alltoallv(coll_local, owner_of(coll_local["pg"], coll_local["seq"], procs.size))
    exchange += time.perf_counter() - t

    # clock offsets: every process needs them when they are applied, so the deviations go to everyone
    t = time.perf_counter()
    offsets = clock_offsets(procs.allgatherv(leave_deviations(got)), len(owner))
    exchange += time.perf_counter() - t
    if align_clocks:
        for r, c in calls.items():
            c["enter"] -= offsets[r]
            c["leave"] -= offsets[r]
            times[r] = times[r].shifted(-int(offsets[r]))
    waits, colls = match(got, offsets if align_clocks else None)

    t = time.perf_counter()
    waits_home = procs.alltoallv(waits, owner[waits["rank"]])
    messages, send_waits, fetcher = late_states(procs, owner, calls)
    exchange += time.perf_counter() - t

    rows = []
    for r in sorted(calls):
        c = calls[r]
        w = waits_home[waits_home["rank"] == r]
        by_row = np.argsort(c["row"])
        enter = c["enter"][by_row][np.searchsorted(c["row"], w["row"], sorter=by_row)]
        mr = messages[messages["dst"] == r]
        sw = send_waits[send_waits["rank"] == r]
        wait = (
            np.concatenate((enter, mr["recv_enter"], sw["enter"])),
            np.concatenate((enter + w["wait"], mr["recv_enter"] + mr["late_sender"], sw["leave"])),
        )
        own = times[r]
        comm = (np.concatenate((c["enter"], own.other_comm[0])), np.concatenate((c["leave"], own.other_comm[1])))
        rows.append(bd.breakdown(r, own.compute, wait, own.setup, comm, own.span))
    breakdowns = np.concatenate(rows) if rows else np.zeros(0, bd.BREAKDOWN)
    clock["analyse"] = time.perf_counter() - t0 - clock["read"] - clock["extract"] - exchange

    t = time.perf_counter()
    last = max(times, key=lambda r: (times[r].span[1], -r), default=-1)
    end, who = procs.maxloc(np.array([times[last].span[1] if last >= 0 else -1.0]), np.array([last]))
    gathered = {
        "calls": procs.gatherv(local),
        "waits": procs.gatherv(waits),
        "collectives": procs.gatherv(colls),
        "messages": procs.gatherv(messages),
        "breakdown": procs.gatherv(breakdowns),
    }
    exchange += time.perf_counter() - t
    clock["exchange"] = exchange
    clock["total"] = time.perf_counter() - t0
    clock["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    clock["fetch_rounds"] = fetcher.rounds
    clock["events"] = float(n_events)
    timings = procs.allgather_small(clock)
    if not procs.is_root:
        return None
    tables = frames(gathered, pg_names, analyses)
    return Replayed(tables, ranks, str(run), procs.size, offsets, align_clocks, (int(who[0]), int(end[0])), timings)


def _owners(srcs: list[Source], n_procs: int, deal_by: str) -> np.ndarray:
    """Return, indexed by rank number, the process that reads that rank (-1 where no source has it)."""
    ranks = [s.rank for s in srcs]
    owner = np.full(max(ranks, default=-1) + 1, -1, np.int64)
    owner[ranks] = deal([s.size for s in srcs], n_procs, deal_by)
    return owner
