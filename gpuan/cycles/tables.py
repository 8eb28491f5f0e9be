"""The Arrow tables of a cycles Result, built from the detected segments, the distinct patterns and the
LLM phases (see :func:`gpuan.cycles.analyse` for what each table holds).

Every pattern that any table refers to (a segment's cycle or sub-cycle, a distinct pattern, a phase) is
one row of ``cycles``, made once; the others name it by its ``cycle`` id.

Two steps, so that a run's ranks can be searched by the processes of an MPI job: :func:`part` makes the
rows of some sequences (a rank's) with ids of their own, every pattern each sequence can contribute
included; :func:`combine` numbers the rows of every part as one search of all the sequences would have
(sequences in order, then the distinct patterns by temporal centre, then the phases of the sequence with
the most events), keeping the rows that search would make."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gpuan.cycles.detect import SequenceCycles
from gpuan.cycles.patterns import Pattern, llm_phases, pattern_signature, sequence_patterns
from gpuan.engine.parts import PART

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


#: what :func:`part` adds to the tables it shares with the Result: the stage a cycle row was made in
#: (:data:`SEGMENT`, :data:`PATTERN` or :data:`PHASE`), and each sequence's distinct patterns and phases
PART_SCHEMAS = {
    **{name: SCHEMAS[name] for name in ("sequences", "segments", "instances", "positions")},
    "cycles": SCHEMAS["cycles"].append(pa.field("stage", _INT)),
    "patterns": pa.schema([("sequence", _INT), ("order", _INT), ("centre_ns", pa.float64()), ("cycle", _INT)]),
    "phases": pa.schema([("sequence", _INT), ("phase", pa.string()), ("cycle", _INT)]),
}
SEGMENT, PATTERN, PHASE = 0, 1, 2


class _Builder:
    """Collects the rows of every table, giving each pattern its ``cycle`` id on first sight."""

    def __init__(self, found: list[SequenceCycles]) -> None:
        self.sequence_of = {id(sc.sequence): k for k, sc in enumerate(found)}
        self.ids: dict[tuple, int] = {}
        self.stage = SEGMENT
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
            "streams": list(streams), "stream_events": list(streams.values()), "stage": self.stage,
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


def part(found: list[SequenceCycles], llm: bool = False) -> dict[str, pa.Table]:
    """Return the tables of :data:`PART_SCHEMAS` of the sequences `found`, with ids of their own (sequence
    k of `found` is ``sequence`` k): ``sequences``, ``segments``, the rows of every pattern a segment holds
    (stage :data:`SEGMENT`), then of each sequence's distinct patterns (:func:`sequence_patterns`, stage
    :data:`PATTERN` where not a segment's), then with `llm` of each sequence's phases (:func:`llm_phases`
    of it alone, stage :data:`PHASE`); ``patterns`` and ``phases`` name them per sequence."""
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
    builder.stage = PATTERN
    pattern_rows = [
        {"sequence": k, "order": j, "centre_ns": p.centre_ns(), "cycle": builder.cycle_id(p)}
        for k, sc in enumerate(found)
        for j, p in enumerate(sequence_patterns(sc))
    ]
    builder.stage = PHASE
    phase_rows = [
        {"sequence": k, "phase": phase, "cycle": builder.cycle_id(p)}
        for k, sc in enumerate(found)
        for phase, p in (llm_phases([sc]).items() if llm else ())
    ]
    rows = {
        "sequences": sequences, "segments": segments, "cycles": builder.cycles, "patterns": pattern_rows,
        "phases": phase_rows,
    }  # fmt: skip
    tables = {name: pa.Table.from_pylist(r, schema=PART_SCHEMAS[name]) for name, r in rows.items()}
    tables["instances"] = _columns(builder.instances, SCHEMAS["instances"])
    tables["positions"] = _columns(builder.positions, SCHEMAS["positions"])
    return tables


def combine(parts: dict[str, pa.Table]) -> dict[str, pa.Table]:
    """Return the tables ``sequences``, ``segments``, ``cycles``, ``instances``, ``positions``,
    ``patterns`` and ``phases`` of the :func:`part` tables of several parts (tagged with their
    :data:`~gpuan.engine.parts.PART`, in part order, a part's sequences in order): numbered as one
    :func:`part` of all their sequences, one after another, gives them, with the distinct patterns of all
    sorted by temporal centre (stable) and the phases of the sequence with the most events (the first of
    those), and only the cycle rows that these name."""
    seqs, cycles = parts["sequences"], parts["cycles"]
    seq_first = _first_rows(seqs[PART].to_numpy())
    cyc_part = cycles[PART].to_numpy()
    cyc_first = _first_rows(cyc_part)

    def sequence_of(table: pa.Table) -> np.ndarray:
        """The global sequence of each row of a part table (its part and its own ``sequence``)."""
        return seq_first(table[PART].to_numpy()) + table["sequence"].to_numpy()

    def cycle_rows(part_of: np.ndarray, cycle: np.ndarray) -> np.ndarray:
        """The row in the parts' ``cycles`` of each (part, own cycle id)."""
        return cyc_first(part_of) + cycle

    # ids as one search gives them: the segments' cycles in order, then the patterns', then the phases'
    new_id = np.full(cycles.num_rows, -1, np.int64)
    segment_rows = np.flatnonzero(cycles["stage"].to_numpy() == SEGMENT)
    new_id[segment_rows] = np.arange(segment_rows.size)
    next_id = segment_rows.size

    def named(rows: np.ndarray) -> np.ndarray:
        """Give the cycle rows `rows` (in the order they are named) ids where they have none; return them."""
        nonlocal next_id
        for row in rows.tolist():
            if new_id[row] < 0:
                new_id[row] = next_id
                next_id += 1
        return new_id[rows]

    patterns = parts["patterns"]
    order = np.lexsort((patterns["order"].to_numpy(), sequence_of(patterns), patterns["centre_ns"].to_numpy()))
    patterns = patterns.take(pa.array(order, pa.int64()))
    pattern_ids = named(cycle_rows(patterns[PART].to_numpy(), patterns["cycle"].to_numpy()))
    phases = parts["phases"]
    events = seqs["events"].to_numpy()
    if events.size:
        phases = phases.filter(pa.array(sequence_of(phases) == int(np.argmax(events))))
    phase_ids = named(cycle_rows(phases[PART].to_numpy(), phases["cycle"].to_numpy()))

    kept = np.flatnonzero(new_id >= 0)
    kept = kept[np.argsort(new_id[kept], kind="stable")]
    tables = {
        "sequences": seqs.drop_columns([PART]).set_column(0, "sequence", pa.array(np.arange(seqs.num_rows))),
        "segments": _segments(parts["segments"], sequence_of, cycle_rows, new_id),
        "cycles": _renumbered(cycles.take(pa.array(kept, pa.int64())), new_id[kept], sequence_of),
        "instances": _cycle_rows(parts["instances"], cycle_rows, new_id),
        "positions": _cycle_rows(parts["positions"], cycle_rows, new_id),
        "patterns": pa.table({"k": np.arange(1, patterns.num_rows + 1, dtype=np.int64), "cycle": pattern_ids}),
        "phases": pa.table({"phase": phases["phase"], "cycle": pa.array(phase_ids, _INT)}),
    }
    return {name: table.cast(SCHEMAS[name]) for name, table in tables.items()}


def _first_rows(part: np.ndarray):
    """Return a function giving, for part numbers, the first row of each in the sorted column `part`."""
    return lambda of: np.searchsorted(part, of, side="left").astype(np.int64)


def _renumbered(cycles: pa.Table, ids: np.ndarray, sequence_of) -> pa.Table:
    """The parts' cycle rows with their new ids and global sequences."""
    table = cycles.set_column(cycles.schema.get_field_index("sequence"), "sequence", pa.array(sequence_of(cycles)))
    table = table.set_column(table.schema.get_field_index("cycle"), "cycle", pa.array(ids, _INT))
    return table.drop_columns([PART, "stage"])


def _segments(segments: pa.Table, sequence_of, cycle_rows, new_id: np.ndarray) -> pa.Table:
    """The parts' segments with their global sequences and cycle ids."""
    part_of = segments[PART].to_numpy()
    missing = segments["cycle"].is_null().to_numpy()
    mapped = np.zeros(part_of.size, np.int64)
    mapped[~missing] = new_id[cycle_rows(part_of[~missing], segments["cycle"].drop_null().to_numpy())]
    subs = segments["sub_cycles"].combine_chunks()
    lengths = pc.list_value_length(subs).fill_null(0).to_numpy()
    flat = subs.flatten().to_numpy()
    flat_ids = new_id[cycle_rows(np.repeat(part_of, lengths), flat)] if flat.size else flat.astype(np.int64)
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int32)
    table = segments.drop_columns([PART])
    table = table.set_column(0, "sequence", pa.array(sequence_of(segments)))
    table = table.set_column(table.schema.get_field_index("cycle"), "cycle",
                             pa.array(mapped, _INT, mask=missing))  # fmt: skip
    subs_ids = pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat_ids, _INT))
    return table.set_column(table.schema.get_field_index("sub_cycles"), "sub_cycles", subs_ids)


def _cycle_rows(table: pa.Table, cycle_rows, new_id: np.ndarray) -> pa.Table:
    """The rows of the parts' `table` (instances or positions) of the kept cycles, by new id, renumbered."""
    ids = new_id[cycle_rows(table[PART].to_numpy(), table["cycle"].to_numpy())]
    keep = np.flatnonzero(ids >= 0)
    keep = keep[np.argsort(ids[keep], kind="stable")]
    table = table.take(pa.array(keep, pa.int64())).drop_columns([PART])
    return table.set_column(0, "cycle", pa.array(ids[keep], _INT))
