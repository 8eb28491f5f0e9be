"""``gpuan cycles`` as a function: :func:`analyse` turns the cycles :func:`~gpuan.cycles.detect.detect` finds
into a :class:`~gpuan.result.Result` of Arrow tables."""

from __future__ import annotations

from gpuan.cycles import tables
from gpuan.cycles.detect import detect
from gpuan.cycles.patterns import distinct_patterns, llm_phases
from gpuan.engine import Engine, resolve
from gpuan.errors import UsageError
from gpuan.options import CYCLES_MODES, CYCLES_OPS, CYCLES_SEQUENCES
from gpuan.result import Result
from gpuan.trace.kinds import KINDS
from gpuan.trace.table import Trace


def _check(option: str, value: str, choices) -> None:
    if value not in choices:
        raise UsageError(f"cycles: unknown {option} {value!r}; choose one of {', '.join(choices)}")


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
    _check("mode", mode, CYCLES_MODES)
    _check("kind", kind, KINDS)
    _check("ops", ops, CYCLES_OPS)
    _check("sequences", sequences, CYCLES_SEQUENCES)
    found = detect(trace, kind, sequences=sequences, ops=ops, engine=resolve(engine))
    patterns = distinct_patterns(found)
    phases = llm_phases(found) if mode == "llm" else {}
    summary = {
        "kind": kind,
        "mode": mode,
        "ops": ops,
        "sequences": sequences,
        "events": sum(len(sc.sequence) for sc in found),
        "segments": sum(len(sc.segments) for sc in found),
        "patterns": len(patterns),
        "phases": list(phases),
    }
    return Result("cycles", tables.build(found, patterns, phases), summary)
