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
import pyarrow.compute as pc

from gpuan.trace.launch import ints, match
from gpuan.trace.table import kind_mask

#: HIP launch calls whose grid arguments are global work sizes (work-items), not blocks
WORK_ITEM_LAUNCHES = ("hipExtModuleLaunchKernel", "hipHccModuleLaunchKernel")
DIMS = ("x", "y", "z")


def work_item_kernels(table: pa.Table, launches: np.ndarray | None = None) -> np.ndarray:
    """Return the rows of `table` that are kernels launched by a call in :data:`WORK_ITEM_LAUNCHES` (matched
    by rank and correlation id), in row order. `launches`, for a part of one file's table, holds the
    correlation ids of every such call in the whole file (the call may lie in another part)."""
    if launches is not None:
        if launches.size == 0:
            return np.empty(0, np.int64)
        kernel_rows = _rows(kind_mask(table["kind"], ("kernel",)))
        corr = ints(table, "correlation", rows=kernel_rows)
        return kernel_rows[(corr != -1) & np.isin(corr, launches)]
    named = _named(table["name"], WORK_ITEM_LAUNCHES)
    if named is None or not named.true_count:  # every CUDA trace, and ROCm traces without module launches
        return np.empty(0, np.int64)
    launch_rows = _rows(pc.and_(kind_mask(table["kind"], ("runtime",)), named))
    kernel_rows = _rows(kind_mask(table["kind"], ("kernel",)))
    if launch_rows.size == 0 or kernel_rows.size == 0:
        return np.empty(0, np.int64)
    keys = [(ints(table, "correlation", rows=r),) for r in (kernel_rows, launch_rows)]
    if "rank" in table.column_names:
        keys = [(ints(table, "rank", 0, r), *k) for r, k in zip((kernel_rows, launch_rows), keys)]
    found = match(*keys)
    return kernel_rows[found >= 0]


def _named(names: pa.ChunkedArray, values: tuple[str, ...]) -> pa.Array | None:
    """Return whether each row's name is one of `values` (false where null), or None where no dictionary
    entry is: decided per dictionary entry where the names are dictionary-encoded, as the reader writes
    them (a CUDA trace's 2.5 million rows are then never gathered: 34 ms a load of the 1 GB gen trace)."""
    names = names.combine_chunks()
    if pa.types.is_dictionary(names.type):
        if not pc.is_in(names.dictionary, pa.array(values, pa.string())).true_count:
            return None
        return kind_mask(names, values)
    return pc.is_in(names, pa.array(values, pa.string())).fill_null(False)


def _rows(mask: pa.Array) -> np.ndarray:
    """Return the positions where the boolean array `mask` is true."""
    return np.flatnonzero(mask.to_numpy(zero_copy_only=False))


def grids_in_workgroups(table: pa.Table, launches: np.ndarray | None = None) -> pa.Table:
    """Return `table` with the grid of every kernel launched in work-items (see :func:`work_item_kernels`,
    which takes `launches`) given in workgroups: ceil(grid / block) in each dimension that has both. Other
    rows are unchanged; a table without such kernels is returned as it is."""
    rows = work_item_kernels(table, launches)
    if rows.size == 0:
        return table
    at = pa.array(rows)
    for d in DIMS:
        grid = table[f"grid_{d}"].combine_chunks()
        grid_at, block_at = grid.take(at), table[f"block_{d}"].combine_chunks().take(at)
        both = pc.and_(grid_at.is_valid(), pc.greater(block_at, 0).fill_null(False))
        if not both.true_count:
            continue
        g, b = _int64s(grid_at.filter(both)), _int64s(block_at.filter(both))
        table = table.set_column(
            table.column_names.index(f"grid_{d}"), f"grid_{d}", _with_values(grid, rows[_rows(both)], -(-g // b))
        )
    return table


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


def _int64s(values: pa.Array) -> np.ndarray:
    """Return an integer array without nulls as int64 numpy."""
    return values.to_numpy(zero_copy_only=False).astype(np.int64)
