"""What ``gpuan cycles`` shows and writes from a :mod:`gpuan.cycles` Result: the console report, the JSON
report, and one uplifter-layout cycle CSV per pattern (``BASE_cycle_<k>.csv``) or per LLM phase
(``BASE_prefill.csv`` / ``BASE_decode.csv``), which :mod:`gpuan.trace.cycle_csv` reads back."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pyarrow as pa

from gpuan.cycles.patterns import STAT_COLUMNS
from gpuan.outputs.files import write_text
from gpuan.outputs.numbers import duration
from gpuan.result import Result


class _Rows:
    """The rows of a table that holds a ``cycle`` column in cycle order (``instances``, ``positions``),
    as numpy columns, sliced per cycle."""

    def __init__(self, table: pa.Table) -> None:
        self.columns = {name: table[name].to_numpy(zero_copy_only=False) for name in table.column_names}
        cycle = self.columns["cycle"]
        top = int(cycle.max()) if cycle.size else -1
        self.bounds = np.searchsorted(cycle, np.arange(top + 2))

    def of(self, cycle: int) -> dict[str, np.ndarray]:
        """Return the columns of `cycle`'s rows."""
        lo, hi = self.bounds[cycle], self.bounds[cycle + 1]
        return {name: values[lo:hi] for name, values in self.columns.items()}


class _View:
    """A cycles Result read for rendering: rows of ``sequences`` and ``cycles`` as dicts, and each
    cycle's instances and positions."""

    def __init__(self, result: Result) -> None:
        self.summary = result.summary
        self.sequences = result["sequences"].to_pylist()
        self.segments = result["segments"].to_pylist()
        self.cycles = result["cycles"].to_pylist()
        self.instances = _Rows(result["instances"])
        self.positions = _Rows(result["positions"])
        self.patterns = result["patterns"].to_pylist()
        self.phases = result["phases"].to_pylist()

    def label(self, cycle: dict) -> str:
        """Return the label of the sequence `cycle` was found in."""
        return self.sequences[cycle["sequence"]]["label"]

    def order_moved(self, cycle: dict) -> np.ndarray:
        """Return the share of `cycle`'s events out of template order, per instance."""
        return self.instances.of(cycle["cycle"])["order_moved"]


def _csv_files(result: Result, base: str | None) -> dict[str, tuple[str, int]]:
    """Return the CSV files a ``-o BASE`` run writes: path -> (what it holds, in words: ``cycle <k>`` or the
    phase; the id of its row in ``cycles``), every distinct pattern (``BASE_cycle_<k>.csv``) or, in ``llm``
    mode, each phase (``BASE_<phase>.csv``); none without `base`."""
    if not base:
        return {}
    if result.summary["mode"] == "llm":
        return {f"{base}_{p['phase']}.csv": (p["phase"], p["cycle"]) for p in result["phases"].to_pylist()}
    return {f"{base}_cycle_{p['k']}.csv": (f"cycle {p['k']}", p["cycle"]) for p in result["patterns"].to_pylist()}


def _csv_text(view: _View, cycle: dict) -> str:
    """Return the cycle CSV of one pattern: metadata rows, a blank line, header, one row per position."""
    total_us = float(cycle["total_busy_ns"]) / 1e3
    reps = cycle["repetitions"]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["# Cycle Statistics"])
    writer.writerow(["# Iterations", reps])
    writer.writerow(["# Kernels per cycle", cycle["length"]])
    # the uplifter layout's own precision: µs with 3 decimals, shares with 4
    writer.writerow(["# Avg cycle time (us)", f"{total_us / reps:.3f}"])
    writer.writerow(["# Total time (us)", f"{total_us:.3f}"])
    writer.writerow([])
    writer.writerow(STAT_COLUMNS)
    rows = view.positions.of(cycle["cycle"])
    for j in range(cycle["length"]):
        writer.writerow([
            int(rows["index"][j]), rows["kernel_name"][j], f"{rows['avg_duration_us'][j]:.3f}",
            f"{rows['min_duration_us'][j]:.3f}", f"{rows['max_duration_us'][j]:.3f}", f"{rows['stddev_us'][j]:.3f}",
            int(rows["count"][j]), f"{rows['pct_of_cycle'][j]:.4f}",
        ])  # fmt: skip
    return buf.getvalue()


def csv_text(result: Result, cycle: int) -> str:
    """Return the uplifter-layout cycle CSV of the pattern whose ``cycles`` id is `cycle`."""
    view = _View(result)
    return _csv_text(view, view.cycles[cycle])


def write_csvs(result: Result, base: str) -> list[str]:
    """Write the cycle CSVs of `result` under `base` (``BASE_cycle_<k>.csv`` per distinct pattern, or
    ``BASE_<phase>.csv`` per LLM phase), each atomically and announced with what it holds, and return
    their paths (none where the trace holds no repetition). All are rendered before the first is
    written, so that a failure leaves no partial set."""
    files = _csv_files(result, base)
    view = _View(result)
    texts = {path: _csv_text(view, view.cycles[cycle]) for path, (_, cycle) in files.items()}
    for path, csv_body in texts.items():
        what, cycle = files[path]
        row = view.cycles[cycle]
        detail = f"{what}: {row['length']:,} events x {row['repetitions']:,}, {view.label(row)}"
        write_text(path, csv_body, detail=detail)
    return list(files)


def _pattern_json(view: _View, cycle: dict) -> dict:
    """Return one pattern as the JSON report shows it: size, span, per-instance times, statistics."""
    instances = view.instances.of(cycle["cycle"])
    out = {
        "role": cycle["role"],
        "segment": cycle["segment"],
        "length": cycle["length"],
        "repetitions": cycle["repetitions"],
        "start_ns": cycle["start_ns"],
        "end_ns": cycle["end_ns"],
        "avg_busy_us": round(cycle["avg_busy_ns"] / 1e3, 3),
        "avg_wall_us": round(cycle["avg_wall_ns"] / 1e3, 3),
        "total_busy_us": round(float(cycle["total_busy_ns"]) / 1e3, 3),
        "signature": cycle["signature"],
        "ordered": cycle["ordered"],
        "streams": {str(stream): n for stream, n in zip(cycle["streams"], cycle["stream_events"])},
        "instances": {
            "first_event": instances["first_event"].tolist(),
            "order_moved": [round(float(x), 4) for x in instances["order_moved"]],
            "start_ns": instances["start_ns"].tolist(),
            "busy_ns": instances["busy_ns"].tolist(),
            "wall_ns": instances["wall_ns"].tolist(),
        },
    }
    if cycle["role"] == "sub-cycle":
        out["offset"] = cycle["offset"]
        out["per_parent"] = cycle["per_parent"]
    positions = view.positions.of(cycle["cycle"])
    names = STAT_COLUMNS[1:]
    out["positions"] = [
        {name: (round(v, 3) if isinstance(v, float) else v) for name, v in zip(names, row)}
        for row in zip(*(positions[name].tolist() for name in names))
    ]
    return out


def json_text(result: Result, trace: str, base: str | None = None) -> str:
    """Return the JSON report of `result` (for the trace named `trace`; `base`: where :func:`write_csvs`
    wrote the CSVs, if it did): per sequence its segments with their cycle and sub-cycles in full, then
    the distinct patterns and phases by reference (each with its file), and the files."""
    files = _csv_files(result, base)
    view = _View(result)
    out = {"trace": trace, "kind": view.summary["kind"], "sequences": []}  # the split is in each sequence's group
    for seq in view.sequences:
        segments = []
        for seg in (row for row in view.segments if row["sequence"] == seq["sequence"]):
            segments.append({
                "index": seg["segment"], "periodic": seg["periodic"], "first_event": seg["first_event"],
                "end_event": seg["end_event"], "start_ns": seg["start_ns"], "end_ns": seg["end_ns"],
                "cycle": None if seg["cycle"] is None else _pattern_json(view, view.cycles[seg["cycle"]]),
                "sub_cycles": [_pattern_json(view, view.cycles[sub]) for sub in seg["sub_cycles"]],
            })  # fmt: skip
        out["sequences"].append({
            "label": seq["label"], "rank": seq["rank"], "device": seq["device"], "group": seq["group"],
            "streams": seq["streams"], "events": seq["events"], "segments": segments,
        })  # fmt: skip
    by_label = {what: path for path, (what, _) in files.items()}

    def ref(cycle: int, what: str) -> dict:
        """Return a pattern named by reference: where it is, its size, and the file that holds it."""
        row = view.cycles[cycle]
        return {"sequence": view.label(row), "segment": row["segment"], "role": row["role"],
                "length": row["length"], "repetitions": row["repetitions"], "file": by_label.get(what)}  # fmt: skip

    out["patterns"] = [{"k": p["k"], **ref(p["cycle"], f"cycle {p['k']}")} for p in view.patterns]
    if view.phases:
        out["phases"] = {p["phase"]: ref(p["cycle"], p["phase"]) for p in view.phases}
    out["files"] = list(files)
    return json.dumps(out, indent=1) + "\n"


def _streams_and_order(view: _View, cycle: dict) -> str:
    """Where a multi-stream pattern's events run, and how much their order changes between instances."""
    split = ", ".join(f"{stream}: {n:,}" for stream, n in zip(cycle["streams"], cycle["stream_events"]))
    if cycle["ordered"]:
        return f"streams {split}; same order in every instance"
    moved = view.order_moved(cycle) * 100
    return (f"streams {split}; order varies: {moved.mean():.1f}% of events out of order on average "
            f"(up to {moved.max():.1f}%)")  # fmt: skip


def text(result: Result) -> str:
    """Return the console report: per sequence its segments, each with its outer cycle (size, busy and
    wall time per instance, the streams of a multi-stream one) and sub-cycles; then the LLM phases."""
    view = _View(result)
    lines = []
    for seq in view.sequences:
        segments = [row for row in view.segments if row["sequence"] == seq["sequence"]]
        lines.append(f"{seq['label']}: {seq['events']:,} {seq['kind']} events, {len(segments)} segment(s)")
        for seg in segments:
            span = f"events {seg['first_event']:,}-{seg['end_event'] - 1:,}"
            if seg["cycle"] is not None:
                cycle = view.cycles[seg["cycle"]]
                lines.append(
                    f"  [{seg['segment']}] {span}: cycle of {cycle['length']:,} x {cycle['repetitions']:,}, "
                    f"busy {duration(cycle['avg_busy_ns'], 'us', 1)}, wall {duration(cycle['avg_wall_ns'], 'us', 1)} "
                    "per instance"
                )
                if len(seq["streams"]) > 1:
                    lines.append(f"       {_streams_and_order(view, cycle)}")
            else:
                lines.append(f"  [{seg['segment']}] {span}: no outer cycle (one pass)")
            for sub in (view.cycles[cycle_id] for cycle_id in seg["sub_cycles"]):
                lines.append(f"       sub-cycle of {sub['length']:,} x {sub['per_parent']} at +{sub['offset']:,} "
                             f"({sub['repetitions']:,} in all), starts with {sub['first_name'][:60]}")  # fmt: skip
    for phase in view.phases:
        cycle = view.cycles[phase["cycle"]]
        unit = "layer" if cycle["role"] == "sub-cycle" else "cycle"
        lines.append(f"{phase['phase']}: segment [{cycle['segment']}], its {unit} of {cycle['length']:,} events x "
                     f"{cycle['repetitions']:,} ({view.label(cycle)})")  # fmt: skip
    return "".join(f"{line}\n" for line in lines)
