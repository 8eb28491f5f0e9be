"""The side inputs of a tensor-access log: the tensor name table (CSV) and buffer events (JSON lines)."""

from __future__ import annotations

import csv
import json
import math
import os

import numpy as np
import pandas as pd

from gpuan.errors import TraceError

NAME_COLUMNS = ("tensor_idx", "tensor_name", "data_ptr", "file_offset", "size_bytes", "layer_id")
BUFFER_FIELDS = ("timestamp_ms", "event", "buffer_id", "buffer_ptr", "size", "name", "backend", "usage", "layer")


def _pointer(text: str) -> int:
    """A pointer as printed by ``%p``: ``0x...``, ``(nil)``, or a decimal number."""
    t = str(text).strip()
    if t in ("(nil)", "", "0", "nil", "NULL", "nan"):
        return 0
    p = int(t, 16) if t.lower().startswith("0x") else int(t)
    if not 0 <= p < 1 << 64:
        raise ValueError(f"pointer {t} is not a 64-bit address")
    return p


# the name table's numeric columns: what an empty field means (unknown), and whether negatives are wrong
_NAME_INTS = {"file_offset": (-1, False), "size_bytes": (0, True), "layer_id": (-1, False)}


def _name_row(row: list[str], header: list[str]) -> tuple[int, str, int, int, int, int]:
    """Return one name-table row as (tensor_idx, tensor_name, data_ptr, file_offset, size_bytes, layer_id),
    or raise ValueError saying which field is wrong."""
    f = dict(zip(header, (x.strip() for x in row), strict=True))

    def integer(column: str, text: str) -> int:
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"{column} {text!r} is not an integer") from None

    idx = integer("tensor_idx", f["tensor_idx"])
    try:
        ptr = _pointer(f["data_ptr"])
    except ValueError:
        raise ValueError(f"data_ptr {f['data_ptr']!r} is not a pointer (0x..., (nil) or a decimal number)") from None
    ints = []
    for column, (unknown, unsigned) in _NAME_INTS.items():
        value = integer(column, f[column]) if f[column] else unknown
        if unsigned and value < 0:
            raise ValueError(f"{column} {value} is negative")
        ints.append(value)
    return (idx, f["tensor_name"], ptr, *ints)


def read_names(path: str | os.PathLike) -> pd.DataFrame:
    """Return the tensor name table (columns of :data:`NAME_COLUMNS`; ``data_ptr`` as uint64, 0 for nil;
    an empty ``file_offset`` or ``layer_id`` is -1 and an empty ``size_bytes`` 0). Every row must have the
    header's number of fields and parse; a row that does not is an error naming its line."""
    path = os.fspath(path)
    rows = []
    try:
        with open(path, encoding="utf-8", newline="") as f:
            reader = csv.reader(f)
            header = [h.strip() for h in next(reader, [])]
            if not header:
                raise TraceError(path, "empty file: not a tensor name table")
            missing = [c for c in NAME_COLUMNS if c not in header]
            if missing:
                raise TraceError(path, f"name table lacks column(s) {', '.join(missing)}")
            for row in reader:
                if not row:  # a blank line
                    continue
                n = reader.line_num
                if len(row) != len(header):
                    raise TraceError(
                        path, f"line {n}: {len(row)} field(s), the header has {len(header)} ({','.join(header)})"
                    )
                try:
                    rows.append(_name_row(row, header))
                except ValueError as e:
                    raise TraceError(path, f"line {n}: {e}") from None
    except csv.Error as e:
        raise TraceError(path, f"not a tensor name table CSV: {e}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise TraceError(path, f"cannot read the name table: {getattr(e, 'strerror', None) or e}") from None
    df = pd.DataFrame(rows, columns=list(NAME_COLUMNS))
    for c in NAME_COLUMNS:
        df[c] = df[c].astype(str) if c == "tensor_name" else df[c].astype(np.uint64 if c == "data_ptr" else np.int64)
    return df


# the optional fields of a buffer event and what a missing or null one means (unknown)
_BUFFER_UNKNOWN = {"buffer_id": -1, "buffer_ptr": 0, "size": 0, "name": "", "backend": "", "usage": "", "layer": -1}
# and what a present one must be
_BUFFER_KINDS = {
    "buffer_id": "an integer",
    "buffer_ptr": "a pointer (0x..., (nil) or a number)",
    "size": "a byte count",
    "name": "a string",
    "backend": "a string",
    "usage": "a string",
    "layer": "an integer",
}


def _buffer_value(field: str, value: object) -> int | str:
    """Return the optional field `field` of a buffer event as its type (a pointer or integer, or text), or
    raise ValueError saying what is wrong with it."""
    if value is None:
        return _BUFFER_UNKNOWN[field]
    text = isinstance(value, str)
    integer = isinstance(value, int) and not isinstance(value, bool)
    if field == "buffer_ptr":
        if text or integer:
            try:
                return _pointer(value)
            except ValueError:
                pass
    elif isinstance(_BUFFER_UNKNOWN[field], str):
        if text:
            return value
    elif integer and (value >= 0 or field != "size"):
        return value
    raise ValueError(f"{field} {json.dumps(value)} is not {_BUFFER_KINDS[field]}")


def _buffer_event(rec: object) -> dict:
    """Return one buffer event (a parsed JSON line) with every field of :data:`BUFFER_FIELDS`, typed, or raise
    ValueError saying which field is wrong. ``timestamp_ms`` and ``event`` are required; the other fields
    may be missing or null (unknown)."""
    if not isinstance(rec, dict) or "event" not in rec or "timestamp_ms" not in rec:
        raise ValueError("a buffer event needs 'timestamp_ms' and 'event'")
    if rec["event"] not in ("alloc", "dealloc"):
        raise ValueError(f"unknown buffer event {rec['event']!r}")
    ts = rec["timestamp_ms"]
    # json reads NaN and Infinity too: neither orders events
    if isinstance(ts, bool) or not isinstance(ts, int | float) or not math.isfinite(ts):
        raise ValueError(f"timestamp_ms {json.dumps(ts)} is not a number of milliseconds")
    out = {"timestamp_ms": float(ts), "event": rec["event"]}
    for field in _BUFFER_UNKNOWN:
        out[field] = _buffer_value(field, rec.get(field))
    return out


def read_buffers(path: str | os.PathLike) -> pd.DataFrame:
    """Return the buffer events, one row per line, ordered by time (``timestamp_ms`` float, ``event``
    "alloc"/"dealloc", ``buffer_id``, ``buffer_ptr`` uint64, ``size``, ``name``, ``backend``, ``usage``,
    ``layer``). A line that is not a buffer event (:func:`_buffer_event`) is an error naming it."""
    path = os.fspath(path)
    rows = []
    try:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    rows.append(_buffer_event(json.loads(line)))
                except json.JSONDecodeError as e:
                    raise TraceError(path, f"line {n}: not JSON ({e.msg})") from None
                except ValueError as e:
                    raise TraceError(path, f"line {n}: {e}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise TraceError(path, f"cannot read the buffer events: {getattr(e, 'strerror', None) or e}") from None
    df = pd.DataFrame(rows, columns=list(BUFFER_FIELDS))
    df["timestamp_ms"] = df["timestamp_ms"].astype(float)
    df["buffer_ptr"] = df["buffer_ptr"].astype(np.uint64)
    for c in ("size", "buffer_id", "layer"):
        df[c] = df[c].astype(np.int64)
    for c in ("name", "backend", "usage"):
        df[c] = df[c].astype(str)
    return df.sort_values("timestamp_ms", kind="stable").reset_index(drop=True)
