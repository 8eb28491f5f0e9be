"""Reading the per-position cycle CSV that ``gpuan cycles -o`` and uplifter write (with or without its ``#``
metadata rows), and finding the cycle CSVs of one ``gpuan cycles -o BASE`` run (``gpuan compare --all``)."""

from __future__ import annotations

import csv
import math
import os
from pathlib import Path

import pandas as pd

from gpuan.errors import TraceError
from gpuan.trace.inputs import CycleTable

__all__ = ["cycle_files", "read_cycle_csv"]


def _number(text: str) -> float | None:
    """Return `text` as a finite float, else None."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _records(path: str | os.PathLike) -> list[tuple[int, list[str]]]:
    """Return the CSV records of `path` with their line numbers; a file that cannot be read is a TraceError."""
    name = str(path)
    limit = csv.field_size_limit()
    try:
        with open(path, encoding="utf-8", newline="") as f:
            # a kernel name may be longer than the csv module's field limit (128 KiB); none is longer than the file
            csv.field_size_limit(max(limit, os.fstat(f.fileno()).st_size))
            reader = csv.reader(f)
            return [(reader.line_num, rec) for rec in reader]
    except (OSError, UnicodeDecodeError) as e:
        raise TraceError(name, f"cannot read: {getattr(e, 'strerror', None) or e}") from None
    except csv.Error as e:
        raise TraceError(name, f"not a CSV file: {e}") from None
    finally:
        csv.field_size_limit(limit)


def read_cycle_csv(path: str | os.PathLike) -> CycleTable:
    """Return the cycle CSV at `path` (written by gpuan or uplifter; old files without ``#`` rows too) as a
    :class:`~gpuan.trace.inputs.CycleTable`.

    Needs the ``kernel_name`` and ``avg_duration_us`` columns; min/max/stddev default to 0. A file that is
    no such CSV, or has a short row or a duration that is not a number, raises :class:`TraceError`.
    """
    name = str(path)
    meta: dict[str, str] = {}
    header = None
    rows = []
    for line, rec in _records(path):
        if not rec or not any(rec):
            continue
        if rec[0].startswith("#"):
            if len(rec) >= 2:
                meta[rec[0].lstrip("#").strip()] = rec[1]
            continue
        if header is None:
            if len(rec) >= 2 and rec[0].strip() == "index":
                header = [field.strip() for field in rec]
            continue
        rows.append((line, rec))
    if header is None:
        raise TraceError(name, "not a cycle CSV: no header row starting with 'index'")
    if "kernel_name" not in header or "avg_duration_us" not in header:
        raise TraceError(name, "cycle CSV misses the kernel_name or avg_duration_us column")
    col = {field: i for i, field in enumerate(header)}
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


def cycle_files(base: str) -> list[str]:
    """Return the cycle CSVs of a ``gpuan cycles -o BASE`` run: ``BASE_cycle_1.csv``, ``_2``, ... up to the
    first missing one, else the ``BASE_prefill.csv`` / ``BASE_decode.csv`` that exist; none is a
    :class:`TraceError` naming `base`."""
    files = []
    while Path(f"{base}_cycle_{len(files) + 1}.csv").is_file():
        files.append(f"{base}_cycle_{len(files) + 1}.csv")
    if not files:
        files = [f for f in (f"{base}_prefill.csv", f"{base}_decode.csv") if Path(f).is_file()]
    if not files:
        raise TraceError(base, f"no cycle CSVs: neither {base}_cycle_1.csv nor {base}_prefill/decode.csv exists")
    return files
