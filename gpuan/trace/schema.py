"""The event table's columns, their Arrow types, and the category → kind mapping.

Every reader produces a table with exactly these columns (in this order), so every analysis can rely on
them. Optional columns are present but null where the source has no value.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pyarrow as pa

from gpuan.trace.kinds import KIND_CODE

#: how analyses label an event (or tensor) whose source gave it no name
UNNAMED = "(unnamed)"

# Category spellings seen across PyTorch/Kineto versions (lower-cased) and other tools.
_CATEGORY_KIND: dict[str, str] = {
    "kernel": "kernel",
    "gpu_kernel": "kernel",
    "cuda_kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
    "gpu_memset": "memset",
    "memset": "memset",
    "cuda_runtime": "runtime",
    "runtime": "runtime",
    "hip_runtime": "runtime",
    "cuda_driver": "driver",
    "driver": "driver",
    "cpu_op": "cpu_op",
    "operator": "cpu_op",
    "user_annotation": "annotation",
    "nvtx": "annotation",
    "gpu_user_annotation": "gpu_annotation",
    "python_function": "python",
    "comm": "comm",
    "communication": "comm",
    "mpi": "comm",
}


def kind_of_category(cat: str) -> str:
    """Return the event kind (one of :data:`KINDS`) for a normalised category string."""
    return _CATEGORY_KIND.get(cat, "other")


def kind_codes(categories: Iterable[str]) -> np.ndarray:
    """Return the kind code (index into :data:`KINDS`) of each normalised category, as int8."""
    return np.array([KIND_CODE[kind_of_category(c)] for c in categories], np.int8)


def normalise_category(cat: str) -> str:
    """Return the category in the one spelling gpuan uses: lower case, spaces as underscores."""
    return cat.strip().lower().replace(" ", "_")


_DICT32 = pa.dictionary(pa.int32(), pa.string())

#: (name, Arrow type, description) of every column of the event table.
COLUMNS: tuple[tuple[str, pa.DataType, str], ...] = (
    ("ts", pa.int64(), "start, ns from the trace's base time (metadata base_time_ns)"),
    ("dur", pa.int64(), "duration in ns (0 for instants)"),
    ("name", _DICT32, "event name (kernel name, op name, ...)"),
    ("cat", _DICT32, "category, normalised to lower case"),
    ("kind", pa.dictionary(pa.int8(), pa.string()), "one of KINDS"),
    ("pid", pa.int64(), "process id; for GPU events the device as the source writes it"),
    ("tid", pa.int64(), "thread id; for GPU events the stream as the source writes it"),
    ("device", pa.int16(), "GPU index for GPU events"),
    ("stream", pa.int64(), "CUDA/HIP stream for GPU events"),
    ("correlation", pa.int64(), "runtime-call ↔ GPU-activity correlation id"),
    ("external_id", pa.int64(), "CPU op ↔ runtime/kernel link (Kineto 'External id')"),
    ("rank", pa.int32(), "distributed rank of the trace the event came from"),
    ("grid_x", pa.int32(), "kernel grid size in blocks (workgroups)"),
    ("grid_y", pa.int32(), ""),
    ("grid_z", pa.int32(), ""),
    ("block_x", pa.int32(), "kernel block size"),
    ("block_y", pa.int32(), ""),
    ("block_z", pa.int32(), ""),
    ("registers", pa.int32(), "registers per thread"),
    ("shared_memory", pa.int64(), "shared memory per block, bytes"),
    ("bytes", pa.int64(), "bytes moved by a memcpy/memset"),
    ("memcpy_kind", _DICT32, "HtoD, DtoH, DtoD, HtoH, PtoP, ..."),
    ("collective", _DICT32, "collective name (Kineto 'Collective name')"),
    ("in_msg_nelems", pa.int64(), "collective input elements"),
    ("out_msg_nelems", pa.int64(), "collective output elements"),
    ("group_size", pa.int32(), "collective group size"),
    ("dtype", _DICT32, "collective dtype"),
    ("pg_name", _DICT32, "process group name"),
    ("pg_ranks", _DICT32, "process group ranks, as JSON text"),
    ("seq", pa.int64(), "autograd sequence number (forward ↔ backward)"),
    ("fwd_tid", pa.int64(), "forward thread id of a backward op"),
    ("input_dims", _DICT32, "CPU op input shapes, JSON text, e.g. [[512, 128], [128]]"),
    ("input_types", _DICT32, "CPU op input dtypes, JSON text"),
    ("concrete_inputs", _DICT32, "CPU op scalar inputs, JSON text"),
    ("peer", pa.int32(), "point-to-point partner rank: the receiver of a send, the sender of a receive"),
    ("tag", pa.int64(), "point-to-point message tag (MPI)"),
)

SCHEMA: pa.Schema = pa.schema([(n, t) for n, t, _ in COLUMNS])

#: The flow table (``ph`` s/t/f arrows, e.g. Kineto's ``ac2g`` runtime → kernel links).
FLOW_SCHEMA: pa.Schema = pa.schema(
    [
        ("id", pa.int64()),
        ("cat", _DICT32),
        ("phase", pa.dictionary(pa.int8(), pa.string())),
        ("ts", pa.int64()),
        ("pid", pa.int64()),
        ("tid", pa.int64()),
        ("rank", pa.int32()),
    ]
)
