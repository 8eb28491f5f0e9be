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
from gpuan.trace.table import sparse_column

#: HIP launch calls whose grid arguments are global work sizes (work-items), not blocks
WORK_ITEM_LAUNCHES = ("hipExtModuleLaunchKernel", "hipHccModuleLaunchKernel")
DIMS = ("x", "y", "z")


def work_item_kernels(table: pa.Table, launches: np.ndarray | None = None) -> np.ndarray:
    """Return the rows of `table` that are kernels launched by a call in :data:`WORK_ITEM_LAUNCHES` (matched
    by rank and correlation id), in row order. `launches`, for a part of one file's table, holds the
    correlation ids of every such call in the whole file (the call may lie in another part)."""
    names = table["name"].combine_chunks()
    if launches is not None:
        if launches.size == 0:
            return np.empty(0, np.int64)
        kind = table["kind"].combine_chunks().dictionary_decode()
        kernel_rows = np.flatnonzero(pc.equal(kind, "kernel").fill_null(False).to_numpy(zero_copy_only=False))
        corr = ints(table, "correlation")[kernel_rows]
        return kernel_rows[(corr != -1) & np.isin(corr, launches)]
    if pa.types.is_dictionary(names.type):
        launches_named = pc.is_in(names.dictionary, pa.array(WORK_ITEM_LAUNCHES))
        if not pc.any(launches_named).as_py():  # every CUDA trace, and ROCm traces without module launches
            return np.empty(0, np.int64)
    kind = table["kind"].combine_chunks().dictionary_decode()
    is_launch = pc.and_(pc.equal(kind, "runtime"), pc.is_in(pc.cast(names, pa.string()), pa.array(WORK_ITEM_LAUNCHES)))
    launch_rows = np.flatnonzero(is_launch.fill_null(False).to_numpy(zero_copy_only=False))
    kernel_rows = np.flatnonzero(pc.equal(kind, "kernel").fill_null(False).to_numpy(zero_copy_only=False))
    if launch_rows.size == 0 or kernel_rows.size == 0:
        return np.empty(0, np.int64)
    rank = ints(table, "rank", 0) if "rank" in table.column_names else np.zeros(table.num_rows, np.int64)
    corr = ints(table, "correlation")
    found = match((rank[kernel_rows], corr[kernel_rows]), (rank[launch_rows], corr[launch_rows]))
    return kernel_rows[found >= 0]


def grids_in_workgroups(table: pa.Table, launches: np.ndarray | None = None) -> pa.Table:
    """Return `table` with the grid of every kernel launched in work-items (see :func:`work_item_kernels`,
    which takes `launches`) given in workgroups: ceil(grid / block) in each dimension that has both. Other
    rows are unchanged; a table without such kernels is returned as it is."""
    rows = work_item_kernels(table, launches)
    if rows.size == 0:
        return table
    n = table.num_rows
    for d in DIMS:
        grid, block = table[f"grid_{d}"].combine_chunks(), ints(table, f"block_{d}", 0)
        valid = np.flatnonzero(grid.is_valid().to_numpy(zero_copy_only=False))
        values = grid.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        r = rows[block[rows] > 0]
        values[r] = -(-values[r] // block[r])
        column = sparse_column(n, valid, values[valid], grid.type)
        table = table.set_column(table.column_names.index(f"grid_{d}"), f"grid_{d}", column)
    return table
