"""``gpuan cycles`` as a function: :func:`analyse` turns the cycles :func:`~gpuan.cycles.detect.detect` finds
into a :class:`~gpuan.result.Result` of Arrow tables, by way of :func:`partial` and :func:`combine` (the
steps a run's ranks take when the processes of an MPI job share them)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from gpuan.cycles import tables
from gpuan.cycles.detect import detect
from gpuan.engine import Engine, resolve
from gpuan.engine.parts import tagged
from gpuan.errors import UsageError
from gpuan.options import CYCLES_MODES, CYCLES_OPS, CYCLES_SEQUENCES
from gpuan.result import Result
from gpuan.trace.kinds import GPU_KINDS, KINDS
from gpuan.trace.projection import Projection, projection
from gpuan.trace.table import Trace


def _check(option: str, value: str, choices) -> None:
    if value not in choices:
        raise UsageError(f"cycles: unknown {option} {value!r}; choose one of {', '.join(choices)}")


def reads(kind: str = "kernel") -> Projection:
    """Return what :func:`analyse` reads of the event table to find the cycles of `kind` events: GPU work
    is grouped by device and stream, and its launch calls tell work launched before the trace began; CPU
    operators are grouped by process and thread."""
    columns = ("ts", "dur", "name", "kind", "rank", "device", "stream", "collective", "correlation", "pid", "tid")
    return projection(columns, (kind, "runtime", "driver") if kind in GPU_KINDS else (kind,))


def analyse(
    trace: Trace,
    *,
    engine: Engine | str | None = None,
    mode: str = "all",
    kind: str = "kernel",
    ops: str = "top",
    sequences: str = "group",
) -> Result:
    """Return the cycles of `trace` as a Result ``cycles`` (see :func:`detect` for `kind`, `ops` and
    `sequences`; `mode` ``llm`` also picks the prefill and decode phases).

    Tables: ``sequences`` (one row per sequence searched: ``label``, ``kind``, ``rank``, ``device``,
    ``group``, ``streams``, ``events``); ``segments`` (per sequence its phases: ``first_event``,
    ``end_event``, ``start_ns``, ``end_ns``, ``periodic``, its outer ``cycle`` and ``sub_cycles`` as ids into
    ``cycles``); ``cycles`` (one row per pattern: ``role``, ``length``, ``repetitions``, ``offset``,
    ``per_parent``, ``ordered``, times in ns, ``signature``, ``streams`` with ``stream_events``);
    ``instances`` (per cycle and instance: ``first_event``, ``start_ns``, ``end_ns``, ``busy_ns``,
    ``wall_ns``, ``order_moved``); ``positions`` (per cycle and position the uplifter statistics:
    ``kernel_name``, ``avg_duration_us``, ``min_duration_us``, ``max_duration_us``, ``stddev_us``,
    ``count``, ``pct_of_cycle``); ``patterns`` (the distinct patterns, ``k`` from 1, by temporal centre);
    ``phases`` (``prefill`` / ``decode`` in ``llm`` mode).

    Summary: ``kind``, ``mode``, ``ops``, ``sequences`` (the options), ``events`` (searched, all
    sequences), ``segments``, ``patterns`` and ``phases`` (their names). A trace without events of `kind`
    gives empty tables and ``events`` 0."""
    parts = tagged(partial(trace, engine=engine, mode=mode, kind=kind, ops=ops, sequences=sequences), 0)
    return combine(parts, mode=mode, kind=kind, ops=ops, sequences=sequences)


#: the tables of :func:`partial` (:data:`gpuan.cycles.tables.PART_SCHEMAS`)
PART_SCHEMAS = tables.PART_SCHEMAS


def partial(
    trace: Trace,
    *,
    engine: Engine | str | None = None,
    mode: str = "all",
    kind: str = "kernel",
    ops: str = "top",
    sequences: str = "group",
) -> dict[str, pa.Table]:
    """Return the cycles of `trace` as :func:`combine` takes them (:func:`gpuan.cycles.tables.part`): every
    sequence is searched on its own, so the partials of a run's ranks (each on the run's clock),
    concatenated, give the cycles of the merged run: ``gpuan cycles RUN_DIR`` under ``mpirun`` makes one
    per rank. The options are :func:`analyse`'s."""
    _check("mode", mode, CYCLES_MODES)
    _check("kind", kind, KINDS)
    _check("ops", ops, CYCLES_OPS)
    _check("sequences", sequences, CYCLES_SEQUENCES)
    found = detect(trace, kind, sequences=sequences, ops=ops, engine=resolve(engine))
    return tables.part(found, llm=mode == "llm")


def combine(
    parts: dict[str, pa.Table], *, mode: str = "all", kind: str = "kernel", ops: str = "top", sequences: str = "group"
) -> Result:
    """Return the cycles Result (see :func:`analyse`, with the same options) of the partials `parts`
    (:func:`partial`, tagged with their part by :mod:`gpuan.engine.parts` and in part order)."""
    found = tables.combine(parts)
    summary = {
        "kind": kind,
        "mode": mode,
        "ops": ops,
        "sequences": sequences,
        "events": int(pc.sum(found["sequences"]["events"]).as_py() or 0),
        "segments": found["segments"].num_rows,
        "patterns": found["patterns"].num_rows,
        "phases": found["phases"]["phase"].to_pylist(),
    }
    return Result("cycles", found, summary)
