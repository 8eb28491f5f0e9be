"""Read ``nvprof --print-gpu-trace --csv`` output into the event table.

The format: banner lines starting with ``==PID==``, a header row, a units row (``ms,us,...,B,B,KB,GB/s``),
then one row per GPU activity. Times and sizes are converted exactly (decimal arithmetic, then rounded to
whole ns / bytes), never through float. nvprof's size units are binary: KB = 1024 B.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable, Sequence
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import Any

import numpy as np
import pyarrow as pa

from gpuan.errors import TraceError
from gpuan.trace.kinds import KINDS
from gpuan.trace.schema import kind_codes
from gpuan.trace.source import open_file
from gpuan.trace.table import NULL64, Trace, build_table, dict_column, int_column, kind_time_order

NULL = NULL64  # an empty cell in the int64 arrays
NOT_NVPROF = "not an nvprof --print-gpu-trace CSV"

TIME_UNITS = {"s": Decimal(10**9), "ms": Decimal(10**6), "us": Decimal(10**3), "µs": Decimal(10**3), "ns": Decimal(1)}
SIZE_UNITS = {
    "B": Decimal(1),
    "KB": Decimal(1024),
    "MB": Decimal(1024**2),
    "GB": Decimal(1024**3),
    "TB": Decimal(1024**4),
}

#: header → event-table column, for the plain integer columns
INT_COLUMNS = {
    "Grid X": "grid_x",
    "Grid Y": "grid_y",
    "Grid Z": "grid_z",
    "Block X": "block_x",
    "Block Y": "block_y",
    "Block Z": "block_z",
    "Registers Per Thread": "registers",
    "Stream": "stream",
}
# the GPU trace always has these; the API trace (Start, Duration, Name) and the summary modes do not
HEADER_COLUMNS = frozenset({"Start", "Duration", "Device", "Stream", "Name"})
# a negative duration or size cannot be measured: such a cell is corrupt, not a value to sum
NON_NEGATIVE = frozenset({"Duration", "Size"})

_MEMCPY = re.compile(r"\[(?:CUDA|Unified Memory) memcpy ([A-Z])to([A-Z])\]", re.IGNORECASE)
_MEMSET = re.compile(r"\[CUDA memset\]", re.IGNORECASE)
_CORRELATION = re.compile(r"^(.*\S)\s+\[(\d+)\]$")  # "kernel(args) [215]": the launching API call's id
_DEVICE = re.compile(r"^(.*\S)\s+\((\d+)\)$")  # "GeForce GTX 950 (0)"


def read_nvprof(path: str) -> Trace:
    """Return the Trace of an ``nvprof --print-gpu-trace --csv`` file at ``path``.

    Raises TraceError for a missing file, a CSV that is not nvprof GPU-trace output, or a bad value."""
    path = str(path)
    header, units, rows, lines = _parse(path, _read_text(path))
    col = {name: i for i, name in enumerate(header)}
    cells = list(zip(*rows)) if rows else [()] * len(header)

    def column(name: str) -> Sequence[str]:
        return cells[col[name]] if name in col else ("",) * len(rows)

    def unit(name: str) -> str:
        return units[col[name]].strip() if name in col else ""

    start = _scaled(path, "Start", column("Start"), TIME_UNITS, unit("Start"), lines)
    dur = _scaled(path, "Duration", column("Duration"), TIME_UNITS, unit("Duration"), lines)
    base = int(start[start != NULL].min()) if (start != NULL).any() else 0
    cat, name, correlation, memcpy_kind = _classify(column("Name"))
    device, device_names = _devices(path, column("Device"), lines)
    stream = _ints(path, "Stream", column("Stream"), lines, bits=64)

    cols: dict[str, Any] = {
        "ts": int_column(np.where(start != NULL, start - base, NULL), NULL, pa.int64()),
        "dur": int_column(dur, NULL, pa.int64()),
        "name": name,
        "cat": cat,
        "kind": _kinds(cat),
        "pid": int_column(device, NULL, pa.int64()),
        "tid": int_column(stream, NULL, pa.int64()),
        "device": int_column(device, NULL, pa.int16()),
        "correlation": int_column(correlation, NULL, pa.int64()),
        "memcpy_kind": memcpy_kind,
        "shared_memory": int_column(_shared_memory(path, column, unit, lines), NULL, pa.int64()),
        "bytes": int_column(_scaled(path, "Size", column("Size"), SIZE_UNITS, unit("Size"), lines), NULL, pa.int64()),
    }
    for header_name, field in INT_COLUMNS.items():
        values = stream if field == "stream" else _ints(path, header_name, column(header_name), lines)
        cols[field] = int_column(values, NULL, pa.int64() if field == "stream" else pa.int32())
    meta = {
        "source": path,
        "format": "nvprof",
        "base_time_ns": base,
        "device_properties": [{"id": i, "name": n} for i, n in sorted(device_names.items())],
        "distributed_info": {},
        "rank": None,
    }
    table = build_table(cols, len(rows))
    kinds = table["kind"].combine_chunks().indices.to_numpy(zero_copy_only=False)
    order = kind_time_order(kinds, table["ts"].fill_null(NULL64).to_numpy())
    return Trace(table.take(order), metadata=meta)


def _read_text(path: str) -> str:
    """Return the file's text; a missing file or a directory raises TraceError."""
    with open_file(path) as f:
        data = f.read()
    # a binary file decodes to replacement characters and then fails the header check
    return data.decode("utf-8", errors="replace")


def _parse(path: str, text: str) -> tuple[list[str], list[str], list[list[str]], list[int]]:
    """Return (header, units, rows, line number of each row): banner lines are dropped, the header is the
    first row with the GPU-trace columns (HEADER_COLUMNS), the units row follows it."""
    numbered = [(i + 1, line) for i, line in enumerate(text.splitlines()) if line.strip() and not line.startswith("==")]
    # one reader per line, so that a stray quote cannot swallow the next line and shift line numbers
    records = [next(csv.reader([line]), []) for _, line in numbered]
    at = next((i for i, r in enumerate(records) if HEADER_COLUMNS <= {c.strip() for c in r}), None)
    if at is None or at + 1 >= len(records):
        raise TraceError(path, NOT_NVPROF)
    header = [c.strip() for c in records[at]]
    units = records[at + 1] + [""] * len(header)
    if units[header.index("Start")].strip() not in TIME_UNITS:
        raise TraceError(path, f"{NOT_NVPROF} (no units row after the header)")
    rows, lines = records[at + 2 :], [n for n, _ in numbered[at + 2 :]]
    for row, line in zip(rows, lines):
        if len(row) != len(header):
            raise TraceError(path, f"line {line}: {len(row)} fields where the header has {len(header)}")
    return header, units, rows, lines


def _scaled(
    path: str, name: str, cells: Sequence[str], units: dict[str, Decimal], unit: str, lines: list[int]
) -> np.ndarray:
    """Return the cells times the unit's factor, rounded to whole numbers (NULL for empty cells)."""
    if not any(c.strip() for c in cells):
        return np.full(len(cells), NULL, np.int64)
    if unit not in units:
        raise TraceError(path, f"column {name}: unknown unit {unit!r} (expected one of {', '.join(units)})")
    factor = units[unit]
    out = np.full(len(cells), NULL, np.int64)
    for i, c in enumerate(cells):
        if c.strip():
            value = int((_decimal(path, name, c, lines[i]) * factor).to_integral_value(ROUND_HALF_EVEN))
            out[i] = _in_range(path, name, c, lines[i], value, 64)
    if name in NON_NEGATIVE and (out[out != NULL] < 0).any():
        i = int(np.flatnonzero((out != NULL) & (out < 0))[0])
        raise TraceError(path, f"line {lines[i]}: {name} value {cells[i]!r} is negative")
    return out


def _ints(path: str, name: str, cells: Sequence[str], lines: list[int], bits: int = 32) -> np.ndarray:
    """Return integer cells as int64 (NULL for empty cells); each must fit a signed integer of `bits` bits,
    the width of its column in the event table."""
    out = np.full(len(cells), NULL, np.int64)
    for i, c in enumerate(cells):
        if c.strip():
            value = _decimal(path, name, c, lines[i])
            if value != value.to_integral_value():
                raise TraceError(path, f"line {lines[i]}: {name} value {c!r} is not a whole number")
            out[i] = _in_range(path, name, c, lines[i], int(value), bits)
    return out


def _in_range(path: str, name: str, cell: str, line: int, value: int, bits: int) -> int:
    """Return `value` when it fits a signed integer of `bits` bits (the null value excluded), else raise
    TraceError naming the line: a bigger one would wrap around in the event table's column."""
    if not -(1 << (bits - 1)) < value < 1 << (bits - 1):
        raise TraceError(path, f"line {line}: {name} value {cell.strip()!r} is out of range")
    return value


def _decimal(path: str, name: str, cell: str, line: int) -> Decimal:
    """Return the cell as a Decimal; a non-number raises TraceError naming the line."""
    try:
        value = Decimal(cell.strip())
    except InvalidOperation:
        value = Decimal("NaN")
    if not value.is_finite():
        raise TraceError(path, f"line {line}: {name} value {cell!r} is not a number")
    return value


def _shared_memory(
    path: str, column: Callable[[str], Sequence[str]], unit: Callable[[str], str], lines: list[int]
) -> np.ndarray:
    """Return static + dynamic shared memory per block in bytes (NULL where both cells are empty)."""
    static = _scaled(path, "Static SMem", column("Static SMem"), SIZE_UNITS, unit("Static SMem") or "B", lines)
    dynamic = _scaled(path, "Dynamic SMem", column("Dynamic SMem"), SIZE_UNITS, unit("Dynamic SMem") or "B", lines)
    both_null = (static == NULL) & (dynamic == NULL)
    return np.where(both_null, NULL, np.where(static == NULL, 0, static) + np.where(dynamic == NULL, 0, dynamic))


def _classify(names: Sequence[str]) -> tuple[pa.Array, pa.Array, np.ndarray, pa.Array]:
    """Return (cat, name, correlation, memcpy_kind) columns from the Name cells.

    ``[CUDA memcpy HtoD]`` is a memcpy, ``[CUDA memset]`` a memset, other bracketed names are other
    activities, everything else is a kernel; nvprof appends the launching call's correlation id to kernel
    names (``kernel(args) [215]``), which moves to the correlation column."""
    distinct = sorted(set(names))
    info = [_classify_one(n) for n in distinct]
    index = {n: i for i, n in enumerate(distinct)}
    codes = np.array([index[n] for n in names], np.int64) if names else np.empty(0, np.int64)

    def strings(k: int) -> tuple[np.ndarray, list[str]]:
        words = sorted({x[k] for x in info if x[k] is not None})
        pos = {w: i for i, w in enumerate(words)}
        lookup = np.array([pos[x[k]] if x[k] is not None else -1 for x in info] + [-1], np.int64)
        return lookup[codes], words

    correlation = np.array([x[2] for x in info] + [NULL], np.int64)[codes]
    return (
        dict_column(*strings(0)),
        dict_column(*strings(1)),
        correlation,
        dict_column(*strings(3)),
    )


def _classify_one(name: str) -> tuple[str, str, int, str | None]:
    """Return (category, name, correlation or NULL, memcpy direction or None) of one Name cell."""
    name = name.strip()
    m = _MEMCPY.fullmatch(name)
    if m:
        return "gpu_memcpy", name, NULL, f"{m.group(1).upper()}to{m.group(2).upper()}"
    if _MEMSET.fullmatch(name):
        return "gpu_memset", name, NULL, None
    if name.startswith("[") and name.endswith("]"):
        return "other", name, NULL, None
    m = _CORRELATION.match(name)
    if m:
        return "kernel", m.group(1), int(m.group(2)), None
    return "kernel", name, NULL, None


def _kinds(cat: pa.DictionaryArray) -> pa.DictionaryArray:
    """Return the kind column for the category column."""
    to_kind = kind_codes(cat.dictionary.to_pylist())
    codes = to_kind[cat.indices.to_numpy()] if len(cat) else np.empty(0, np.int8)
    return pa.DictionaryArray.from_arrays(pa.array(codes, pa.int8()), pa.array(KINDS))


def _devices(path: str, cells: Sequence[str], lines: list[int]) -> tuple[np.ndarray, dict[int, str]]:
    """Return the device index of each row ("GeForce GTX 950 (0)" → 0) and {index: device name}; an index
    beyond the event table's int16 device column raises TraceError naming its line."""
    parsed = {c: _DEVICE.match(c.strip()) for c in set(cells)}
    index = {c: int(m.group(2)) if m else NULL for c, m in parsed.items()}
    for i, c in enumerate(cells):
        if index[c] != NULL:
            _in_range(path, "Device", parsed[c].group(2), lines[i], index[c], 16)
    names = {int(m.group(2)): m.group(1) for m in parsed.values() if m}
    return np.array([index[c] for c in cells], np.int64), names
