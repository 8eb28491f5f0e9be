"""One window of log entries, whatever its layout, as columns of accesses: one row per tensor read.

A 64-byte entry is one access. A per-operation entry gives one access per used source record; in the
1024-byte form a weight source of an operation that selected experts (MUL_MAT_ID) gives one access per
selected expert, so expert slices are counted as the model touched them.

Columns (numpy arrays of one length): ``entry`` (index of the entry in the window), ``ts`` (ns),
``token``, ``layer`` (-1: none), ``thread``, ``op``, ``phase``, ``tensor_idx`` (-1: none), ``ptr``,
``offset`` (absolute offset in the model file, -1 when the tensor is not read from the file), ``buffer``
(buffer id, -1: none), ``size`` (bytes), ``expert`` (-1: none) and, for per-operation formats, ``name``
(fixed-width bytes).
"""

from __future__ import annotations

import numpy as np

from gpuan.trace.tensorlog.formats import FROM_BUFFER, MAX_SOURCES, NO_EXPERT, NO_LAYER, NO_OFFSET, NO_TENSOR

Columns = dict[str, np.ndarray]


def _none(a: np.ndarray, missing: int, dtype) -> np.ndarray:
    """`a` as `dtype`, with the all-ones "none" value as -1."""
    return np.where(a == missing, -1, a.astype(np.int64)).astype(dtype)


def _offset(a: np.ndarray) -> np.ndarray:
    """File offsets as int64; a (garbage) offset of 2^63 or more saturates to the int64 maximum instead of
    wrapping negative, so it stays a file access that lies in no tensor (the offsets check reports it)."""
    return np.minimum(a, np.uint64(np.iinfo(np.int64).max)).astype(np.int64)


def _entry64(raw: np.ndarray) -> Columns:
    off = raw["file_offset"]
    return {
        "entry": np.arange(len(raw), dtype=np.int64),
        "ts": raw["timestamp_ns"].astype(np.int64),
        "token": raw["token_id"].astype(np.int64),
        "layer": _none(raw["layer_id"], NO_LAYER, np.int32),
        "thread": raw["thread_id"].astype(np.int32),
        "op": raw["operation_type"].astype(np.int16),
        "phase": raw["phase"].astype(np.int16),
        "tensor_idx": _none(raw["tensor_idx"], NO_TENSOR, np.int64),
        "ptr": raw["tensor_ptr"].astype(np.uint64),
        "offset": np.where((off == 0) | (off == NO_OFFSET), -1, _offset(off)),
        "buffer": np.full(len(raw), -1, np.int64),
        "size": raw["size_bytes"].astype(np.int64),
        "expert": _none(raw["expert_id"], NO_EXPERT, np.int16),
    }


def _per_op(raw: np.ndarray, with_experts: bool) -> Columns:
    n = len(raw)
    used = np.arange(MAX_SOURCES)[None, :] < raw["num_sources"][:, None]
    row, k = np.nonzero(used)
    src = raw["sources"][row, k]
    disk = src["memory_source"] != FROM_BUFFER
    where = src["disk_offset_or_buffer_id"]
    experts = np.full(len(row), -1, np.int16)
    if with_experts and n:
        # a weight source of an op that selected experts: one access per selected expert
        count = np.where(disk, np.minimum(raw["num_experts"][row], 16), 0).astype(np.int64)
        reps = np.maximum(count, 1)
        pick = np.repeat(np.arange(len(row)), reps)
        first = np.cumsum(reps) - reps
        nth = np.arange(len(pick)) - np.repeat(first, reps)
        chosen = raw["expert_ids"][row[pick], np.minimum(nth, 15)]
        experts = np.where(np.repeat(count, reps) > 0, chosen, -1).astype(np.int16)
        row, src, disk, where = row[pick], src[pick], disk[pick], where[pick]
    return {
        "entry": row.astype(np.int64),
        "ts": raw["timestamp_ns"][row].astype(np.int64),
        "token": raw["token_id"][row].astype(np.int64),
        "layer": _none(src["layer"], NO_LAYER, np.int32),
        "thread": raw["thread_id"][row].astype(np.int32),
        "op": raw["operation_type"][row].astype(np.int16),
        "phase": raw["phase"][row].astype(np.int16),
        "tensor_idx": _none(src["tensor_idx"], NO_TENSOR, np.int64),
        "ptr": src["ptr"].astype(np.uint64),
        "offset": np.where(disk & (where != 0) & (where != NO_OFFSET), _offset(where), -1),
        "buffer": np.where(disk, -1, where.astype(np.int64)),
        "size": src["size"].astype(np.int64),
        "expert": experts,
        "name": np.ascontiguousarray(src["name"]),
    }


def accesses(raw: np.ndarray, fmt: str) -> Columns:
    """Return the accesses in `raw` (entries of log format `fmt`) as columns; see the module docstring."""
    if fmt in ("seed64", "packed64"):
        return _entry64(raw)
    return _per_op(raw, with_experts=fmt == "op1024")
