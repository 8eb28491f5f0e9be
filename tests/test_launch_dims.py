"""ROCm grids given in work-items become workgroups (gpuan.trace.launch_dims), on small tables built here:
the rows the rule must change and those it must leave alone (other launch calls, null grids, null or zero
blocks), the column types kept, and a part of a file (the launches found elsewhere) converted the same way.
The real ROCm traces are checked row by row against their JSON in test_kineto.test_linking_arguments."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from gpuan.trace.launch_dims import WORK_ITEM_LAUNCHES, grids_in_workgroups, work_item_kernels

# (kind, name, correlation, grid, block): grids and blocks per dimension, None for a null
ROWS = [
    ("runtime", "hipExtModuleLaunchKernel", 1, (None, None, None), (None, None, None)),
    ("kernel", "Cijk_gemm", 1, (61440, 1, 1), (256, 1, 1)),  # 240 workgroups
    ("runtime", "hipLaunchKernel", 2, (None, None, None), (None, None, None)),
    ("kernel", "elementwise", 2, (3, 1, 1), (256, 1, 1)),  # already in blocks: unchanged
    ("runtime", "hipHccModuleLaunchKernel", 3, (None, None, None), (None, None, None)),
    ("kernel", "igemm_fwd", 3, (100, None, 7), (64, 4, 0)),  # partial last workgroup; null grid; block 0
    ("runtime", "hipExtModuleLaunchKernel", 4, (None, None, None), (None, None, None)),
    ("kernel", "transpose", 4, (512, 64, 1), (None, 16, 1)),  # no block x: x unchanged
    ("kernel", "no_launch_seen", 5, (1024, 1, 1), (256, 1, 1)),  # no launch call in the table
    ("cpu_op", "aten::mm", 1, (None, None, None), (None, None, None)),  # same correlation, not a kernel
]


def table(rows=ROWS, dictionary: bool = True) -> pa.Table:
    """Return the rows as an event table's columns: kind and name dictionary-encoded (name as plain strings
    if `dictionary` is false), correlation int64, grid and block int32 as in gpuan's schema."""
    kind = pa.array([r[0] for r in rows], pa.string()).dictionary_encode()
    name = pa.array([r[1] for r in rows], pa.string())
    cols = {
        "kind": kind,
        "name": name.dictionary_encode() if dictionary else name,
        "correlation": pa.array([r[2] for r in rows], pa.int64()),
    }
    for i, d in enumerate("xyz"):
        cols[f"grid_{d}"] = pa.array([r[3][i] for r in rows], pa.int32())
        cols[f"block_{d}"] = pa.array([r[4][i] for r in rows], pa.int32())
    return pa.table(cols)


def expected_grids(rows=ROWS) -> dict[str, list]:
    """The rule written out row by row: a kernel whose correlation id has a work-item launch call gets
    ceil(grid / block) in each dimension with a grid and a positive block."""
    launched = {r[2] for r in rows if r[0] == "runtime" and r[1] in WORK_ITEM_LAUNCHES}
    out: dict[str, list] = {f"grid_{d}": [] for d in "xyz"}
    for kind, _, corr, grid, block in rows:
        for i, d in enumerate("xyz"):
            g, b = grid[i], block[i]
            converts = kind == "kernel" and corr in launched and g is not None and b is not None and b > 0
            out[f"grid_{d}"].append(-(-g // b) if converts else g)
    return out


@pytest.mark.parametrize("dictionary", [True, False], ids=["dictionary names", "plain names"])
def test_work_item_grids_become_workgroups(dictionary):
    t = grids_in_workgroups(table(dictionary=dictionary))
    want = expected_grids()
    for d in "xyz":
        assert t[f"grid_{d}"].to_pylist() == want[f"grid_{d}"], d
        assert t[f"grid_{d}"].type == pa.int32()
    assert t["grid_x"].to_pylist()[1] == 240  # the hipBLASLt example of the module's doc
    assert work_item_kernels(table(dictionary=dictionary)).tolist() == [1, 5, 7]


def test_a_part_converts_with_the_launches_of_the_whole_file():
    """A part of a file holds kernels whose launch calls lie in another part: `launches` names them."""
    whole = table()
    launches = np.array([r[2] for r in ROWS if r[0] == "runtime" and r[1] in WORK_ITEM_LAUNCHES], np.int64)
    part_rows = [r for r in ROWS if r[0] != "runtime"]
    part = grids_in_workgroups(table(part_rows), launches)
    converted = grids_in_workgroups(whole)
    keep = [i for i, r in enumerate(ROWS) if r[0] != "runtime"]
    for d in "xyz":
        assert part[f"grid_{d}"].to_pylist() == [converted[f"grid_{d}"].to_pylist()[i] for i in keep]


def test_tables_without_work_item_launches_come_back_unchanged():
    cuda_like = [r for r in ROWS if r[1] not in WORK_ITEM_LAUNCHES]
    t = table(cuda_like)
    assert grids_in_workgroups(t) is t
    empty = table([])
    assert grids_in_workgroups(empty) is empty
    assert grids_in_workgroups(t, np.empty(0, np.int64)) is t


def test_a_kineto_file_converts_its_own_work_item_launches(tmp_path):
    """gpuan.load of a ROCm Kineto file: the reader finds the file's work-item launch calls itself (by their
    names and correlation ids, before the table is built) and gives the same grids as the rule."""
    import json

    import gpuan

    events = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}}]
    for i, (kind, name, corr, grid, block) in enumerate(ROWS):
        event = {"ph": "X", "name": name, "pid": 1, "tid": 1, "ts": 10 * i, "dur": 5}
        event["cat"] = {"runtime": "cuda_runtime", "kernel": "kernel", "cpu_op": "cpu_op"}[kind]
        event["args"] = {"correlation": corr}
        if kind == "kernel":
            event["pid"], event["tid"] = 0, 7
            event["args"].update(device=0, stream=7, grid=list(grid), block=list(block))
        events.append(event)
    path = tmp_path / "rocm.json"
    path.write_text(json.dumps({"traceEvents": events, "roctracer_version": "4.1"}))
    table = gpuan.load(path, use_cache=False).events
    kernels = [i for i, r in enumerate(ROWS) if r[0] == "kernel"]
    got = table.filter(pa.compute.equal(table["kind"].cast(pa.string()), "kernel")).sort_by("ts")
    want = expected_grids()
    for d in "xyz":
        assert got[f"grid_{d}"].to_pylist() == [want[f"grid_{d}"][i] for i in kernels], d


def test_work_item_launches_are_the_named_runtime_calls_with_a_correlation():
    """events.work_item_launches: the distinct correlation ids of runtime rows named as work-item launches;
    rows of other kinds or names, null names (-1) and null correlations (the scanner's int64 minimum) give
    none."""
    from gpuan.trace.kinds import KIND_CODE
    from gpuan.trace.kineto.events import N64, work_item_launches

    strings = ["hipExtModuleLaunchKernel", "hipLaunchKernel", "Cijk_gemm", "hipHccModuleLaunchKernel"]
    rt, k = KIND_CODE["runtime"], KIND_CODE["kernel"]
    rows = [(rt, 0, 7), (rt, 0, 7), (rt, 1, 8), (k, 0, 9), (rt, -1, 10), (rt, 3, N64), (rt, 3, 4), (rt, 0, 2)]
    kind, names, corr = (np.array(c) for c in zip(*rows))
    got = work_item_launches(kind.astype(np.int8), names.astype(np.int32), corr.astype(np.int64), strings)
    assert got.tolist() == [2, 4, 7]
    none = work_item_launches(kind.astype(np.int8), np.full(len(rows), 1, np.int32), corr.astype(np.int64), strings)
    assert none.tolist() == []
