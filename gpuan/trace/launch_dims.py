"""One unit for a kernel's launch dimensions: ``grid_*`` counts thread blocks (workgroups) in every event table.

HIP has two kinds of launch call. ``hipLaunchKernel``, ``hipExtLaunchKernel`` and ``hipModuleLaunchKernel``
take the grid in blocks, like CUDA. ``hipExtModuleLaunchKernel`` and ``hipHccModuleLaunchKernel`` (hipBLASLt's
``Cijk_*``, MIOpen's ``igemm_*`` and transposes) take *global work sizes*, in work-items, and ROCm's tracer
records those arguments as the kernel's grid: a hipBLASLt GEMM of 240 tiles of 256 threads shows grid
[61440, 1, 1]. The unit is decided by the runtime call that launched the kernel (same ``correlation``); a
work-item grid becomes ceil(grid / block) per dimension (HIP allows a last, partial workgroup).

On the ROCm traces of ../shared/data every kernel launched through hipExtModuleLaunchKernel has grid >= block
in every dimension (4,609 launches; all but 12 MIOpen transposes exactly divisible), while the other calls
launch grids smaller than their block in hundreds of kernels, as block counts do.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from gpuan.trace.launch import match
from gpuan.trace.table import is_one_of

#: HIP launch calls whose grid arguments are global work sizes (work-items), not blocks
WORK_ITEM_LAUNCHES = ("hipExtModuleLaunchKernel", "hipHccModuleLaunchKernel")
DIMS = ("x", "y", "z")


def work_item_kernels(table: pa.Table, launches: np.ndarray | None = None) -> np.ndarray:
    """Return the rows of `table` that are kernels launched by a call in :data:`WORK_ITEM_LAUNCHES` (matched
    by rank and correlation id), in row order. `launches`, for a part of one file's table, holds the
    correlation ids of every such call in the whole file (the call may lie in another part)."""
    if table.num_rows == 0 or (launches is not None and launches.size == 0):
        return np.empty(0, np.int64)
    if launches is not None:
        kernel_rows = np.flatnonzero(is_one_of(table["kind"], ("kernel",)))
        corr = _ints_at(table["correlation"], kernel_rows)
        return kernel_rows[(corr != -1) & np.isin(corr, launches)]
    named = is_one_of(table["name"], WORK_ITEM_LAUNCHES)
    if not named.any():  # every CUDA trace, and ROCm traces without module launches
        return np.empty(0, np.int64)
    launch_rows = np.flatnonzero(named & is_one_of(table["kind"], ("runtime",)))
    kernel_rows = np.flatnonzero(is_one_of(table["kind"], ("kernel",)))
    launch_corr = _ints_at(table["correlation"], launch_rows)
    corr = _ints_at(table["correlation"], kernel_rows)
    # the correlation ids alone first (a lookup, where matching every kernel's key sorted them all: 5 ms a
    # ROCm rank of 0.2 million rows), then the few kernels they pick matched on rank too
    picked = (corr != -1) & np.isin(corr, launch_corr)
    kernel_rows, corr = kernel_rows[picked], corr[picked]
    if kernel_rows.size and "rank" in table.column_names:
        ranks = [_ints_at(table["rank"], r, 0) for r in (kernel_rows, launch_rows)]
        kernel_rows = kernel_rows[match((ranks[0], corr), (ranks[1], launch_corr)) >= 0]
    return kernel_rows


def grids_in_workgroups(table: pa.Table, launches: np.ndarray | None = None) -> pa.Table:
    """Return `table` with the grid of every kernel launched in work-items (see :func:`work_item_kernels`,
    which takes `launches`) given in workgroups: ceil(grid / block) in each dimension that has both. Other
    rows are unchanged; a table without such kernels is returned as it is."""
    rows = work_item_kernels(table, launches)
    if rows.size == 0:
        return table
    for d in DIMS:
        grid = table[f"grid_{d}"].combine_chunks()
        g, has_grid = _values_at(grid, rows)
        b, has_block = _values_at(table[f"block_{d}"].combine_chunks(), rows)
        both = b > 0
        for valid in (has_grid, has_block):
            if valid is not None:
                both &= valid
        if both.any():
            g, b = g[both].astype(np.int64), b[both].astype(np.int64)
            column = _with_values(grid, rows[both], -(-g // b))
            table = table.set_column(table.column_names.index(f"grid_{d}"), f"grid_{d}", column)
    return table


# The helpers below read the columns' buffers in numpy (as is_one_of does the kinds and names): a table of a
# small trace paid 1.3-1.9 ms here in Arrow compute calls (tens of microseconds each) for a few hundred rows.


def _values_at(column: pa.Array, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """Return the fixed-width integer `column`'s values at `rows` (all of them where None) as numpy, and
    whether each is valid (None where all are); a null's value is whatever its slot holds."""
    validity, data = column.buffers()
    n, offset = len(column), column.offset
    values = np.frombuffer(data, column.type.to_pandas_dtype(), count=offset + n)[offset:]
    if rows is not None:
        values = values[rows]
    if validity is None or column.null_count == 0:
        return values, None
    bits = np.frombuffer(validity, np.uint8)
    if rows is None:
        return values, np.unpackbits(bits, count=offset + n, bitorder="little")[offset:].view(bool)
    at = rows + offset
    return values, (bits[at >> 3] >> (at & 7).astype(np.uint8) & 1).view(bool)


def _ints_at(column: pa.ChunkedArray, rows: np.ndarray, null: int = -1) -> np.ndarray:
    """Return the integer `column` at `rows` as int64 numpy, nulls as `null`."""
    values, valid = _values_at(column.combine_chunks(), rows)
    values = values.astype(np.int64)
    return values if valid is None else np.where(valid, values, null)


def _with_values(column: pa.Array, rows: np.ndarray, values: np.ndarray) -> pa.Array:
    """Return the fixed-width `column` with `values` at `rows`, rows that hold a value (validity kept as it
    is): its data copied and written in numpy, where Arrow's replace_with_mask took a mask of every row and
    5-11 ms a ROCm trace of 0.1-0.2 million rows."""
    validity, data = column.buffers()
    dtype = column.type.to_pandas_dtype()
    new = np.frombuffer(data, dtype, count=column.offset + len(column)).copy()
    new[rows + column.offset] = values
    return pa.Array.from_buffers(
        column.type, len(column), [validity, pa.py_buffer(new)], null_count=column.null_count, offset=column.offset
    )
