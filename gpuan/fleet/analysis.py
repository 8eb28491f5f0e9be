"""The fleet's :func:`analyse`: which rank is slow, in which step, and where its extra time went.

Every process runs :func:`analyse` with the same arguments. Each reads only the ranks dealt to it
(:mod:`gpuan.engine.deal`), finds their steps by cycle detection (:mod:`gpuan.fleet.steps`), and the same
traces go to replay (:func:`gpuan.replay.analyse`, which reads nothing again) for the wait states. Then,
all as typed buffers: the waits go from process 0 to every process, the names of the ops to a shared
vocabulary, each rank's step pattern to every process (which lines the ranks' positions up the same way,
:mod:`gpuan.fleet.align`), and each rank's per-step and per-position records to process 0, which compares
them (:mod:`gpuan.fleet.compare`) and builds the tables (:mod:`gpuan.fleet.tables`). The result does not
depend on the number of processes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np

from gpuan.cycles import reads as cycles_reads
from gpuan.cycles.detect import detect
from gpuan.engine import Engine, resolve
from gpuan.engine.deal import owners, read_own
from gpuan.engine.procs import Procs
from gpuan.errors import UsageError
from gpuan.fleet import align, exchange, measure, tables
from gpuan.fleet.intervals import Intervals
from gpuan.fleet.steps import RankSteps, find, rotated
from gpuan.options import CYCLES_OPS, CYCLES_SEQUENCES, REPLAY_DEALS
from gpuan.replay import analyse as replay
from gpuan.replay import reads as replay_reads
from gpuan.result import Result
from gpuan.trace.inputs import RankSource, RunSources
from gpuan.trace.kinds import KINDS
from gpuan.trace.projection import Projection, union
from gpuan.trace.table import Trace


@dataclass(frozen=True)
class _Read(RankSource):
    """A rank source already read by this process: replay gets its trace without reading it again."""

    trace: Trace | None = field(default=None, compare=False, repr=False)

    def load(self, **options) -> Trace:
        """Return the trace read before (`options`, how to read it, no longer matter)."""
        return self.trace


def reads() -> Projection:
    """Return what :func:`analyse` reads of each rank's event table: what cycle detection reads of kernels
    or CPU operators, and what replay reads."""
    return union(cycles_reads("kernel"), cycles_reads("cpu_op"), replay_reads())


def analyse(
    sources: RunSources,
    *,
    engine: Engine | str | None = None,
    procs: Procs | None = None,
    kind: str = "auto",
    sequences: str = "merged",
    ops: str = "top",
    deal: str = "round-robin",
    slowest: int = 5,
) -> Result | None:
    """Return, on process 0, the fleet view of a run's per-rank sources (:func:`gpuan.trace.ranks.load_run`):
    every rank's step times from cycle detection, their spread across ranks, the `slowest` (rank, step)
    pairs by the time they spent on their own work (less the waiting that replay explains) against the
    median rank, and for each the positions of its step that made it slow. None on the other processes.

    `kind` is the event kind whose cycles are the steps ("auto": kernels where any rank has them, else CPU
    ops); `sequences` and `ops` are those of :func:`gpuan.cycles.detect` (default "merged": all of a
    device's streams in one sequence, so that a step holds its communication kernels too); `deal` shares
    the ranks among `procs` (default: this process alone). Raises TraceError, the same on every process,
    when a rank cannot be read; UsageError for an unknown option.

    Tables: ``ranks``, ``steps``, ``distribution``, ``slowest``, ``causes``, ``outliers`` (see
    :mod:`gpuan.fleet.tables`). Summary: ``source``, ``ranks``, ``processes``, ``kind``, ``sequences``,
    ``ops``, ``groups``, ``steps`` (the step numbers compared), ``step_ns`` (the spread of the ranks' median
    step times), ``slowest`` (the slowest rank, step and excess), ``replay`` (its collectives and waits)."""
    _check("kind", kind, ("auto", *KINDS))
    _check("sequences", sequences, CYCLES_SEQUENCES)
    _check("ops", ops, CYCLES_OPS)
    _check("deal", deal, REPLAY_DEALS)
    if slowest < 0:
        raise UsageError(f"fleet: slowest must be 0 or more, not {slowest}")
    engine = resolve(engine)
    procs = procs or Procs()
    owner = owners(sources, procs.size, deal)
    traces = read_own(sources, owner, procs, projection=reads())
    kind = _kind(kind, traces, procs)
    shifts = _shifts(traces, procs)
    found: dict[int, RankSteps | None] = {
        rank: find(detect(trace, kind, sequences=sequences, ops=ops, engine=engine, sub_cycles=False), rank)
        for rank, trace in traces.items()
    }
    read = RunSources(sources.path, tuple(_Read(**_fields(s), trace=traces.get(s.rank)) for s in sources))
    replayed = replay(read, engine=engine, analyses=("waits",), deal=deal, procs=procs)
    del traces, read  # the steps hold what the rest needs
    waits = exchange.from_root(_waits(replayed), procs)
    own = {rank: steps for rank, steps in found.items() if steps is not None}
    labels = {rank: steps.sequence.label for rank, steps in own.items()}
    words = [w for steps in own.values() for w in steps.sequence.vocab.tolist()] + list(labels.values())
    vocab = exchange.shared_words(map(str, words), procs)
    codes = exchange.codes_of(vocab)
    rank_codes = {
        rank: np.array([codes[str(w)] for w in s.sequence.vocab.tolist()], np.int64) for rank, s in own.items()
    }
    headers, templates = _patterns(own, rank_codes, labels, codes, procs)
    groups = align.groups(headers, templates)
    step_parts, position_parts = [], []
    for rank, steps in sorted(own.items()):
        steps = rotated(steps, groups.rotation[rank])
        mine = waits[waits["rank"] == rank]
        wait, call = mine[mine["wait"]], mine[~mine["wait"]]
        s, p = measure.records(steps, shifts[rank], Intervals.union(wait["start"], wait["end"]),
                               Intervals.union(call["start"], call["end"]), rank_codes[rank])  # fmt: skip
        step_parts.append(s)
        position_parts.append(p)
    all_steps = procs.gatherv(_concat(step_parts, measure.STEP))
    all_positions = procs.gatherv(_concat(position_parts, measure.POSITION))
    if not procs.is_root:
        return None
    comm = measure.is_comm(vocab)
    built, summary = tables.build(
        sources.ranks, headers, groups, all_steps, all_positions, vocab, comm, replayed, slowest
    )
    summary = {"source": sources.path, "ranks": sources.ranks, "processes": procs.size, "kind": kind,
               "sequences": sequences, "ops": ops, **summary}  # fmt: skip
    return Result("fleet", built, summary)


def _fields(source: RankSource) -> dict:
    """Return the fields of a rank source, by name."""
    return {f.name: getattr(source, f.name) for f in fields(RankSource)}


def _check(option: str, value: str, choices) -> None:
    if value not in choices:
        raise UsageError(f"fleet: unknown {option} {value!r}; choose one of {', '.join(choices)}")


def _has_kind(trace: Trace, kind: str) -> bool:
    """Return whether `trace` holds an event of `kind`."""
    col = trace.events["kind"]
    for chunk in col.chunks:
        words = chunk.dictionary.to_pylist()
        if kind in words and np.any(chunk.indices.to_numpy(zero_copy_only=False) == words.index(kind)):
            return True
    return False


def _kind(kind: str, traces: dict[int, Trace], procs: Procs) -> str:
    """Return the kind whose cycles are the steps: `kind`, or for "auto" kernels where any rank of any
    process has one, else CPU ops."""
    if kind != "auto":
        return kind
    mine = any(_has_kind(trace, "kernel") for trace in traces.values())
    return "kernel" if procs.allreduce(np.array([int(mine)]), "max")[0] else "cpu_op"


def _shifts(traces: dict[int, Trace], procs: Procs) -> dict[int, int]:
    """Return, per rank of this process, the ns that move its times onto the run's clock: replay's, which
    counts from the earliest start of any rank with events."""
    bases = {rank: int(t.metadata.get("base_time_ns", 0)) for rank, t in traces.items()}
    have = [bases[r] for r, t in traces.items() if len(t)]
    base = int(procs.allreduce(np.array([min(have) if have else np.iinfo(np.int64).max]), "min")[0])
    return {rank: b - base if len(traces[rank]) else 0 for rank, b in bases.items()}


def _waits(replayed: Result | None) -> np.ndarray:
    """Return replay's wait states and communication calls as :data:`~gpuan.fleet.measure.WAIT` records
    (process 0; none elsewhere): each collective call and its wait, each message's receive with its Late
    Sender wait and its send with its Late Receiver wait."""
    if replayed is None:
        return np.zeros(0, measure.WAIT)
    cw = replayed.to_pandas("collective_waits")
    parts = [(cw["rank"], True, cw["enter"], cw["enter"] + cw["wait"]), (cw["rank"], False, cw["enter"], cw["leave"])]
    p2p = replayed.to_pandas("p2p")
    if len(p2p):
        parts += [
            (p2p["dst"], True, p2p["recv_enter"], p2p["recv_enter"] + p2p["late_sender"]),
            (p2p["src"], True, p2p["send_enter"], p2p["send_enter"] + p2p["late_receiver"]),
            (p2p["dst"], False, p2p["recv_enter"], p2p["recv_leave"]),
            (p2p["src"], False, p2p["send_enter"], p2p["send_leave"]),
        ]
    out = np.zeros(sum(len(p[0]) for p in parts), measure.WAIT)
    at = 0
    for rank, wait, start, end in parts:
        n = len(rank)
        rows = out[at : at + n]
        rows["rank"], rows["wait"], rows["start"], rows["end"] = rank, wait, start, end
        at += n
    return out[out["end"] > out["start"]]


def _patterns(
    own: dict[int, RankSteps], rank_codes: dict[int, np.ndarray], labels: dict[int, str], codes: dict, procs: Procs
) -> tuple[np.ndarray, dict[int, np.ndarray]]:
    """Return every rank's :data:`~gpuan.fleet.align.HEADER` and the pattern (shared codes) of every
    periodic rank, on every process. A one-pass rank sends only a digest of its sequence."""
    headers = np.zeros(len(own), align.HEADER)
    patterns = []
    for i, (rank, steps) in enumerate(sorted(own.items())):
        pattern = rank_codes[rank][steps.template]
        headers[i] = (rank, steps.periodic, pattern.size, steps.steps, steps.first_step, len(steps.sequence),
                      codes[labels[rank]], align.digest(pattern))  # fmt: skip
        if steps.periodic:
            patterns.append(pattern)
    headers = procs.allgatherv(headers)
    flat = procs.allgatherv(np.concatenate(patterns) if patterns else np.zeros(0, np.int64))
    templates, at = {}, 0
    for h in headers:
        if h["periodic"]:
            templates[int(h["rank"])] = flat[at : at + int(h["length"])]
            at += int(h["length"])
    order = np.argsort(headers["rank"], kind="stable")
    return headers[order], templates


def _concat(parts: list[np.ndarray], dtype: np.dtype) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype)
