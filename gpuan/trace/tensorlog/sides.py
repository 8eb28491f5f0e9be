"""The side inputs of a tensor-access log: the tensor name table (CSV) and buffer events (JSON lines)."""

from __future__ import annotations

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
    return int(t, 16) if t.lower().startswith("0x") else int(t)


def read_names(path: str | os.PathLike) -> pd.DataFrame:
    """Return the tensor name table (columns of :data:`NAME_COLUMNS`; ``data_ptr`` as uint64, 0 for nil)."""
    path = os.fspath(path)
    try:
        df = pd.read_csv(path, dtype={"tensor_name": str, "data_ptr": str}, skipinitialspace=True)
    except (OSError, UnicodeDecodeError) as e:
        raise TraceError(path, f"cannot read the name table: {getattr(e, 'strerror', None) or e}") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise TraceError(path, f"not a tensor name table CSV: {str(e).splitlines()[0]}") from None
    missing = [c for c in NAME_COLUMNS if c not in df.columns]
    if missing:
        raise TraceError(path, f"name table lacks column(s) {', '.join(missing)}")
    try:
        ptr = np.array([_pointer(p) for p in df["data_ptr"]], dtype=np.uint64)
        out = pd.DataFrame(
            {
                "tensor_idx": df["tensor_idx"].astype(np.int64),
                "tensor_name": df["tensor_name"].fillna("").astype(str),
                "data_ptr": ptr,
                "file_offset": pd.to_numeric(df["file_offset"]).fillna(-1).astype(np.int64),
                "size_bytes": pd.to_numeric(df["size_bytes"]).fillna(0).astype(np.int64),
                "layer_id": pd.to_numeric(df["layer_id"]).fillna(-1).astype(np.int64),
            }
        )
    except (ValueError, TypeError, OverflowError) as e:
        raise TraceError(path, f"bad value in the name table: {e}") from None
    return out


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
