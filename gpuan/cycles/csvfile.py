"""The per-position cycle CSV that uplifter writes and reads (with or without its ``#`` metadata rows)."""

from __future__ import annotations

import csv
import io
import math
import os
from dataclasses import dataclass

import pandas as pd

from gpuan.cycles.patterns import STAT_COLUMNS, Pattern
from gpuan.errors import TraceError


@dataclass(frozen=True)
class CycleTable:
    """A cycle CSV read back: per-position rows plus the metadata rows (0 where absent)."""

    path: str
    rows: pd.DataFrame
    iterations: int = 0
    avg_cycle_us: float = 0.0


def render(pattern: Pattern) -> str:
    """Return the CSV text of a pattern: metadata rows, a blank line, header, one row per position."""
    stats = pattern.stats()
    times = pattern.instance_times()
    total_us = float(times.busy_ns.sum()) / 1e3
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["# Cycle Statistics"])
    w.writerow(["# Iterations", pattern.cycle.repetitions])
    w.writerow(["# Kernels per cycle", pattern.cycle.length])
    w.writerow(["# Avg cycle time (us)", f"{total_us / pattern.cycle.repetitions:.3f}"])
    w.writerow(["# Total time (us)", f"{total_us:.3f}"])
    w.writerow([])
    w.writerow(STAT_COLUMNS)
    for r in stats.itertuples(index=False):
        w.writerow([
            r.index, r.kernel_name, f"{r.avg_duration_us:.3f}", f"{r.min_duration_us:.3f}",
            f"{r.max_duration_us:.3f}", f"{r.stddev_us:.3f}", r.count, f"{r.pct_of_cycle:.4f}",
        ])  # fmt: skip
    return buf.getvalue()


def _number(text: str) -> float | None:
    """Return `text` as a finite float, else None."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def read(path: str | os.PathLike) -> CycleTable:
    """Read a cycle CSV written by gpuan or uplifter (old files without ``#`` rows too).

    Needs the ``kernel_name`` and ``avg_duration_us`` columns; min/max/stddev default to 0.
    """
    name = str(path)
    limit = csv.field_size_limit()
    try:
        with open(path, encoding="utf-8", newline="") as f:
            # a kernel name may be longer than the csv module's field limit (128 KiB); none is longer than the file
            csv.field_size_limit(max(limit, os.fstat(f.fileno()).st_size))
            reader = csv.reader(f)
            records = [(reader.line_num, rec) for rec in reader]
    except (OSError, UnicodeDecodeError) as e:
        raise TraceError(name, f"cannot read: {getattr(e, 'strerror', None) or e}") from None
    except csv.Error as e:
        raise TraceError(name, f"not a CSV file: {e}") from None
    finally:
        csv.field_size_limit(limit)
    meta: dict[str, str] = {}
    header = None
    rows = []
    for line, rec in records:
        if not rec or not any(rec):
            continue
        if rec[0].startswith("#"):
            if len(rec) >= 2:
                meta[rec[0].lstrip("#").strip()] = rec[1]
            continue
        if header is None:
            if len(rec) >= 2 and rec[0].strip() == "index":
                header = [h.strip() for h in rec]
            continue
        rows.append((line, rec))
    if header is None:
        raise TraceError(name, "not a cycle CSV: no header row starting with 'index'")
    if "kernel_name" not in header or "avg_duration_us" not in header:
        raise TraceError(name, "cycle CSV misses the kernel_name or avg_duration_us column")
    col = {h: i for i, h in enumerate(header)}
    out = {"kernel_name": [], "avg_duration_us": [], "min_duration_us": [], "max_duration_us": [], "stddev_us": []}
    for line, rec in rows:
        # a short row or a duration that is not a number is a damaged file, never a kernel to leave out
        if len(rec) <= max(col["kernel_name"], col["avg_duration_us"]):
            raise TraceError(name, f"line {line}: {len(rec)} fields, the header has {len(header)}")
        avg = _number(rec[col["avg_duration_us"]])
        if avg is None:
            raise TraceError(name, f"line {line}: avg_duration_us {rec[col['avg_duration_us']]!r} is not a number")
        out["kernel_name"].append(rec[col["kernel_name"]])
        out["avg_duration_us"].append(avg)
        for key in ("min_duration_us", "max_duration_us", "stddev_us"):
            i = col.get(key)
            v = _number(rec[i]) if i is not None and i < len(rec) else None
            out[key].append(v or 0.0)
    if not out["kernel_name"]:
        raise TraceError(name, "cycle CSV has no kernel rows")
    iterations = _number(meta.get("Iterations", "")) or 0
    avg_cycle = _number(meta.get("Avg cycle time (us)", "")) or 0.0
    return CycleTable(name, pd.DataFrame(out), int(iterations), float(avg_cycle))
