"""The side inputs of a tensor-access log: the tensor name table (CSV) and buffer events (JSON lines)."""

from __future__ import annotations

import csv
import json
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


def read_buffers(path: str | os.PathLike) -> pd.DataFrame:
    """Return the buffer events, one row per line, ordered by time (``timestamp_ms`` float, ``event``
    "alloc"/"dealloc", ``buffer_id``, ``buffer_ptr`` uint64, ``size``, ``name``, ``backend``, ``usage``,
    ``layer``)."""
    path = os.fspath(path)
    rows = []
    try:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as e:
                    raise TraceError(path, f"line {n}: not JSON ({e.msg})") from None
                if not isinstance(rec, dict) or "event" not in rec or "timestamp_ms" not in rec:
                    raise TraceError(path, f"line {n}: a buffer event needs 'timestamp_ms' and 'event'")
                if rec["event"] not in ("alloc", "dealloc"):
                    raise TraceError(path, f"line {n}: unknown buffer event {rec['event']!r}")
                rows.append(rec)
    except (OSError, UnicodeDecodeError) as e:
        raise TraceError(path, f"cannot read the buffer events: {getattr(e, 'strerror', None) or e}") from None
    df = pd.DataFrame(rows, columns=list(BUFFER_FIELDS))
    try:
        df["timestamp_ms"] = df["timestamp_ms"].astype(float)
        df["buffer_ptr"] = np.array([_pointer(p) if pd.notna(p) else 0 for p in df["buffer_ptr"]], dtype=np.uint64)
        df["size"] = pd.to_numeric(df["size"]).fillna(0).astype(np.int64)
        df["buffer_id"] = pd.to_numeric(df["buffer_id"]).fillna(-1).astype(np.int64)
        df["layer"] = pd.to_numeric(df["layer"]).fillna(-1).astype(np.int64)
    except (ValueError, TypeError, OverflowError) as e:
        raise TraceError(path, f"bad value in the buffer events: {e}") from None
    for c in ("name", "backend", "usage"):
        df[c] = df[c].fillna("").astype(str)
    return df.sort_values("timestamp_ms", kind="stable").reset_index(drop=True)
