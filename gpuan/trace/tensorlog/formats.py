"""The binary layouts of an instrumented llama.cpp's tensor-access log, as numpy dtypes (little-endian).

Four layouts exist in the wild (see ``spec/tensors.md``):

- ``seed64``: the design note's 64-byte entry compiled as a plain C struct; the compiler puts a 4-byte
  hole before ``tensor_ptr`` (offset 32).
- ``packed64``: the same fields in a packed struct with a trailing ``padding4`` (``tensor_ptr`` at 28).
- ``op256`` / ``op1024``: one entry per operation: a 24-byte header, the destination's name and four
  source records; the 1024-byte form has longer names and the experts a MUL_MAT_ID selected.

Every layout starts with ``u64 timestamp_ns``; a zero timestamp marks the unused tail of a pre-sized file.
"""

from __future__ import annotations

import numpy as np

# layer_id, tensor_idx and expert_id use their all-ones value for "none"
NO_LAYER = 0xFFFF
NO_TENSOR = 0xFFFFFFFF
NO_EXPERT = 0xFF
# a 64-byte entry's file_offset for a tensor that is not backed by the model file (0 is the GGUF magic,
# never tensor data, so it means "none" as well)
NO_OFFSET = 0xFFFFFFFFFFFFFFFF
MAX_SOURCES = 4
MAX_EXPERTS = 16
# token ids are the run's token positions, counted from 0, and the per-token tables are indexed by them; a
# run's log holds far fewer than 2^20 of them (at the hundreds of entries a token takes, that many tokens fill
# tens of GiB), so an id at or above this is a corrupt entry, and reading it as a token would size those
# tables (token x layer) by gigabytes
TOKEN_LIMIT = 1 << 20


def _struct(fields: list[tuple[str, str, int]], itemsize: int) -> np.dtype:
    names, formats, offsets = zip(*fields, strict=True)
    return np.dtype({"names": list(names), "formats": list(formats), "offsets": list(offsets), "itemsize": itemsize})


# the first 18 bytes, the same in every layout
_HEAD = [
    ("timestamp_ns", "<u8", 0),
    ("token_id", "<u4", 8),
    ("layer_id", "<u2", 12),
    ("thread_id", "<u2", 14),
    ("operation_type", "u1", 16),
    ("phase", "u1", 17),
]
_HEAD64 = _HEAD + [("padding1", "<u2", 18), ("padding1b", "<u4", 20), ("tensor_idx", "<u4", 24)]


def _tail64(at: int) -> list[tuple[str, str, int]]:
    """The fields from ``tensor_ptr`` on, starting at byte `at`."""
    return [
        ("tensor_ptr", "<u8", at),
        ("file_offset", "<u8", at + 8),
        ("size_bytes", "<u4", at + 16),
        ("attention_head", "u1", at + 20),
        ("qkv_type", "u1", at + 21),
        ("padding2", "<u2", at + 22),
        ("expert_id", "u1", at + 24),
        ("expert_rank", "u1", at + 25),
        ("routing_score", "<u2", at + 26),
        ("padding3", "<u4", at + 28),
    ]


SEED64 = _struct(_HEAD64 + _tail64(32), 64)
PACKED64 = _struct(_HEAD64 + _tail64(28) + [("padding4", "<u4", 60)], 64)

_HEAD_OP = _HEAD + [("num_sources", "u1", 18)]


def _source(name_bytes: int) -> np.dtype:
    """One source record of a per-operation entry: the name, then 32 bytes of fields (packed)."""
    n = name_bytes
    return _struct(
        [
            ("name", f"S{n}", 0),
            ("ptr", "<u8", n),
            ("size", "<u4", n + 8),
            ("layer", "<u2", n + 12),
            ("memory_source", "u1", n + 14),
            ("disk_offset_or_buffer_id", "<u8", n + 16),
            ("tensor_idx", "<u4", n + 24),
        ],
        n + 32,
    )


SOURCE256 = _source(20)
SOURCE1024 = _source(128)
OP256 = _struct(_HEAD_OP + [("dst_name", "S24", 24), ("sources", (SOURCE256, MAX_SOURCES), 48)], 256)
OP1024 = _struct(
    _HEAD_OP
    + [
        ("dst_name", "S128", 24),
        ("sources", (SOURCE1024, MAX_SOURCES), 152),
        ("expert_ids", ("<i4", MAX_EXPERTS), 792),
        ("num_experts", "u1", 856),
    ],
    1024,
)

DTYPES: dict[str, np.dtype] = {"seed64": SEED64, "packed64": PACKED64, "op256": OP256, "op1024": OP1024}

# memory_source of a per-operation source record
FROM_DISK, FROM_BUFFER = 0, 1


def dtype_of(fmt: str) -> np.dtype:
    """Return the numpy dtype of one entry of log format `fmt` (one of :data:`TENSOR_LOG_FORMATS`)."""
    return DTYPES[fmt]
