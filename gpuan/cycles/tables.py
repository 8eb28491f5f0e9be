"""The Arrow tables of a cycles Result, built from the detected segments, the distinct patterns and the
LLM phases (see :func:`gpuan.cycles.analyse` for what each table holds).

Every pattern that any table refers to (a segment's cycle or sub-cycle, a distinct pattern, a phase) is
one row of ``cycles``, made once; the others name it by its ``cycle`` id."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from gpuan.cycles.detect import SequenceCycles
from gpuan.cycles.patterns import Pattern, pattern_signature

_INT = pa.int64()
_INTS = pa.list_(pa.int64())
SCHEMAS = {
    "sequences": pa.schema([
        ("sequence", _INT), ("label", pa.string()), ("kind", pa.string()), ("rank", _INT), ("device", _INT),
        ("group", pa.string()), ("streams", _INTS), ("events", _INT),
    ]),
    "segments": pa.schema([
        ("sequence", _INT), ("segment", _INT), ("periodic", pa.bool_()), ("first_event", _INT),
        ("end_event", _INT), ("start_ns", _INT), ("end_ns", _INT), ("cycle", _INT), ("sub_cycles", _INTS),
    ]),
    "cycles": pa.schema([
        ("cycle", _INT), ("sequence", _INT), ("segment", _INT), ("role", pa.string()), ("length", _INT),
        ("repetitions", _INT), ("offset", _INT), ("per_parent", _INT), ("ordered", pa.bool_()),
        ("start_ns", _INT), ("end_ns", _INT), ("avg_busy_ns", pa.float64()), ("avg_wall_ns", pa.float64()),
        ("total_busy_ns", _INT), ("signature", pa.string()), ("first_name", pa.string()), ("streams", _INTS),
        ("stream_events", _INTS),
    ]),
    "instances": pa.schema([
        ("cycle", _INT), ("instance", _INT), ("first_event", _INT), ("start_ns", _INT), ("end_ns", _INT),
        ("busy_ns", _INT), ("wall_ns", _INT), ("order_moved", pa.float64()),
    ]),
    "positions": pa.schema([
        ("cycle", _INT), ("index", _INT), ("kernel_name", pa.string()), ("avg_duration_us", pa.float64()),
        ("min_duration_us", pa.float64()), ("max_duration_us", pa.float64()), ("stddev_us", pa.float64()),
        ("count", _INT), ("pct_of_cycle", pa.float64()),
    ]),
    "patterns": pa.schema([("k", _INT), ("cycle", _INT)]),
    "phases": pa.schema([("phase", pa.string()), ("cycle", _INT)]),
}  # fmt: skip


class _Builder:
    """Collects the rows of every table, giving each pattern its ``cycle`` id on first sight."""

    def __init__(self, found: list[SequenceCycles]) -> None:
        self.sequence_of = {id(sc.sequence): k for k, sc in enumerate(found)}
        self.ids: dict[tuple, int] = {}
        self.cycles: list[dict] = []
        self.instances: list[dict[str, np.ndarray]] = []
        self.positions: list[dict[str, np.ndarray]] = []

    def cycle_id(self, pattern: Pattern) -> int:
        """Return the id of `pattern`'s row in ``cycles``, adding its rows (cycle, instances, positions)
        the first time it is seen."""
        key = (id(pattern.sequence), pattern.segment, pattern.role, id(pattern.cycle))
        if key in self.ids:
            return self.ids[key]
        cycle_id = len(self.cycles)
        self.ids[key] = cycle_id
        cyc, seq = pattern.cycle, pattern.sequence
        times = pattern.instance_times()
        streams = pattern.streams()
        self.cycles.append({
            "cycle": cycle_id, "sequence": self.sequence_of[id(seq)], "segment": pattern.segment,
            "role": pattern.role, "length": cyc.length, "repetitions": cyc.repetitions, "offset": cyc.offset,
            "per_parent": cyc.per_parent, "ordered": cyc.ordered, "start_ns": int(times.start_ns.iloc[0]),
            "end_ns": int(times.end_ns.iloc[-1]), "avg_busy_ns": float(times.busy_ns.mean()),
            "avg_wall_ns": float(times.wall_ns.mean()), "total_busy_ns": int(times.busy_ns.sum()),
            "signature": pattern_signature(pattern.names), "first_name": str(seq.vocab[cyc.template[0]]),
            "streams": list(streams), "stream_events": list(streams.values()),
        })  # fmt: skip
        self.instances.append({
            "cycle": np.full(cyc.repetitions, cycle_id, np.int64),
            "instance": np.arange(cyc.repetitions, dtype=np.int64),
            "first_event": np.asarray(cyc.starts, np.int64),
            **{column: times[column].to_numpy(np.int64) for column in ("start_ns", "end_ns", "busy_ns", "wall_ns")},
            "order_moved": np.asarray(pattern.order_moved(), np.float64),
        })  # fmt: skip
        stats = pattern.stats()
        self.positions.append(
            {
                "cycle": np.full(cyc.length, cycle_id, np.int64),
                **{column: stats[column].to_numpy() for column in SCHEMAS["positions"].names[1:]},
            }
        )
        return cycle_id


def _columns(parts: list[dict[str, np.ndarray]], schema: pa.Schema) -> pa.Table:
    if not parts:
        return schema.empty_table()
    columns = {name: np.concatenate([p[name] for p in parts]) for name in schema.names}
    return pa.table(columns, schema=schema)


def build(found: list[SequenceCycles], patterns: list[Pattern], phases: dict[str, Pattern]) -> dict[str, pa.Table]:
    """Return the tables ``sequences``, ``segments``, ``cycles``, ``instances``, ``positions``,
    ``patterns`` and ``phases`` of the detected cycles."""
    builder = _Builder(found)
    sequences, segments = [], []
    for k, sc in enumerate(found):
        seq = sc.sequence
        sequences.append({
            "sequence": k, "label": seq.label, "kind": seq.kind, "rank": seq.rank, "device": seq.device,
            "group": seq.group, "streams": list(seq.streams), "events": len(seq),
        })  # fmt: skip
        for si, seg in enumerate(sc.segments):
            cycle = None if seg.cycle is None else builder.cycle_id(Pattern(seq, si, "cycle", seg.cycle))
            subs = [builder.cycle_id(Pattern(seq, si, "sub-cycle", sub)) for sub in seg.sub_cycles]
            segments.append({
                "sequence": k, "segment": si, "periodic": seg.periodic, "first_event": seg.start,
                "end_event": seg.end, "start_ns": int(seq.ts[seg.start]),
                "end_ns": int((seq.ts[seg.start : seg.end] + seq.dur[seg.start : seg.end]).max()),
                "cycle": cycle, "sub_cycles": subs,
            })  # fmt: skip
    pattern_rows = [{"k": k, "cycle": builder.cycle_id(p)} for k, p in enumerate(patterns, 1)]
    phase_rows = [{"phase": phase, "cycle": builder.cycle_id(p)} for phase, p in phases.items()]
    rows = {
        "sequences": sequences, "segments": segments, "cycles": builder.cycles, "patterns": pattern_rows,
        "phases": phase_rows,
    }  # fmt: skip
    tables = {name: pa.Table.from_pylist(r, schema=SCHEMAS[name]) for name, r in rows.items()}
    tables["instances"] = _columns(builder.instances, SCHEMAS["instances"])
    tables["positions"] = _columns(builder.positions, SCHEMAS["positions"])
    order = ("sequences", "segments", "cycles", "instances", "positions", "patterns", "phases")
    return {name: tables[name] for name in order}
