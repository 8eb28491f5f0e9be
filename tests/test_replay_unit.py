"""The replay's pieces on small hand-made inputs: operation names of every NCCL generation, wait states
of N x N and rooted collectives, the breakdown, the deal, and the synthetic run's planted straggler."""

from __future__ import annotations

import numpy as np
import pytest

from gpuan.engine.deal import deal
from gpuan.replay import analyse
from gpuan.replay.breakdown import breakdown
from gpuan.replay.collectives import match
from gpuan.replay.comms import CALL, OP, op_name
from gpuan.synth.ranks import plan, write_run
from gpuan.trace.ranks import load_run


@pytest.mark.parametrize(
    "name, collective, op",
    [
        ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", None, "all_reduce"),
        ("ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", None, "all_gather"),
        ("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", None, "reduce_scatter"),
        ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", None, "send_recv"),
        ("ncclDevKernel_Broadcast_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", None, "broadcast"),
        ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", "allreduce", "all_reduce"),
        ("nccl:_all_gather_base", None, "all_gather"),
        ("nccl:all_to_all", None, "all_to_all"),
        ("gloo:broadcast", None, "broadcast"),
        ("MPI_Allreduce", "allreduce", "all_reduce"),
        ("MPI_Bcast", "bcast", "broadcast"),
        ("record_param_comms", "_reduce_scatter_base", "reduce_scatter"),
        ("aten::mm", None, "other"),
    ],
)
def test_operation_names(name, collective, op):
    assert op_name(name, collective) == op


def _calls(op: str, enters, leaves, root: int = -1) -> np.ndarray:
    r = np.zeros(len(enters), CALL)
    r["rank"] = np.arange(len(enters))
    r["op"], r["members"], r["peer"], r["pg"], r["seq"] = OP[op], len(enters), root, 7, 0
    r["enter"], r["leave"], r["row"] = enters, leaves, np.arange(len(enters))
    return r


def test_wait_at_n_x_n():
    w, c = match(_calls("all_reduce", [0, 50, 20], [100, 101, 100]))
    assert w["wait"].tolist() == [50, 0, 30]
    assert c["late_rank"].tolist() == [1] and c["skew"].tolist() == [50] and c["transfer"].tolist() == [51]
    assert w["culprit"].tolist() == [False, True, False]
    # a member that leaves before the last arrives (it can: NCCL's LL kernels) waits only until it left
    w, _ = match(_calls("all_reduce", [0, 50], [30, 60]))
    assert w["wait"].tolist() == [30, 0]


def test_late_broadcast_and_early_reduce():
    # broadcast from rank 2, which enters at 40: the others wait for it, not for the last arriver
    w, _ = match(_calls("broadcast", [0, 60, 40], [100, 100, 100], root=2))
    assert w["wait"].tolist() == [40, 0, 0]
    # reduce to rank 0: only the root waits, for the last sender
    w, _ = match(_calls("reduce", [0, 60, 40], [100, 100, 100], root=0))
    assert w["wait"].tolist() == [60, 0, 0]


def test_nobody_is_late_when_all_arrive_together():
    w, c = match(_calls("all_reduce", [10, 10], [20, 20]))
    assert c["late_rank"].tolist() == [-1] and not w["culprit"].any()


def test_breakdown_counts_each_ns_once():
    b = breakdown(
        0,
        (np.array([0, 50]), np.array([40, 60])),  # compute
        (np.array([30]), np.array([45])),  # wait: 40..45 shows, 30..40 is under compute
        (np.array([0, 85]), np.array([5, 95])),  # set-up: 0..5 is under compute
        (np.array([30, 88]), np.array([80, 92])),  # communication: 88..92 is under set-up
        (0, 100),
    )
    assert (b["compute"], b["wait"], b["setup"], b["communication"], b["idle"]) == (50, 5, 10, 25, 10)


def test_deal():
    assert deal([1] * 5, 2) == [0, 1, 0, 1, 0]
    owners = deal([100, 1, 1, 1, 90], 2, "size")
    assert owners[0] != owners[4]


def test_synthetic_straggler(tmp_path):
    write_run(plan(4, 6, 2000, stragglers=((4, 2, 40_000_000),), seed=1), tmp_path)
    r = analyse(load_run(tmp_path)).to_pandas()
    s = r["stragglers"].iloc[0]
    assert (s["step"], s["rank"]) == (4, 2)
    c = r["collectives"]
    first = c[c["step"] == 4].iloc[0]
    assert first["late_rank"] == 2 and first["skew"] >= 40_000_000 - 3_000_000


@pytest.mark.parametrize("run", ["cpu_ddp_gloo_4rank_slow_rank1_step2", "dlrm_8rank_nccl"])
def test_calls_are_described_as_one_call_at_a_time_would(data_dir, run):
    """Every event's operation (its collective, else its name), message bytes (bytes, else elements times
    the dtype's size, else the first input's shape times its type's size) and process group (its name, else
    its stream, else the world), worked out once per distinct value, are what the rules give call by call."""
    import json

    from gpuan.replay import comms
    from gpuan.trace.load import load

    directory = data_dir / "kineto" / run
    if not directory.is_dir():
        pytest.skip(f"{directory} is not there (../shared/data)")
    trace = load(sorted(directory.iterdir())[0], use_cache=False)
    events = trace.events
    name_code, names = comms._texts(events, "name")
    said = comms._Described(events, names, name_code)
    rows = np.arange(events.num_rows)
    pairs = zip(name_code, said.coll_code)
    assert said.ops(rows).tolist() == [OP[op_name(str(names[c]), said.colls[k])] for c, k in pairs]

    def nbytes(row: int) -> int:
        if said.bytes[row] >= 0:
            return int(said.bytes[row])
        size = comms.DTYPE_BYTES.get(str(said.dtypes[said.dtype_code[row]]).lower(), 0)
        if said.nelems[row] >= 0 and size:
            return int(said.nelems[row]) * size
        try:
            dims, types = json.loads(said.dims[said.dims_code[row]]), json.loads(said.types[said.types_code[row]])
            shape, dtype = dims[0], types[0]
        except (TypeError, ValueError, IndexError):
            return 0
        return int(np.prod(shape)) * comms.DTYPE_BYTES.get(str(dtype).lower(), 0) if isinstance(shape, list) else 0

    got = said.nbytes(rows)
    assert got.tolist() == [max(nbytes(r), 0) for r in rows.tolist()]
    assert (got > 0).any()

    pg_code, pg_texts = comms._texts(events, "pg_name")
    stream = events["stream"].fill_null(-1).to_numpy()
    keys = [
        f"pg {pg_texts[c]}" if pg_texts[c] is not None else (f"stream {s}" if s >= 0 else "world")
        for c, s in zip(pg_code, stream)
    ]
    ids, named = comms._process_groups(events, rows)
    assert ids.tolist() == [comms.pg_id(k) for k in keys]
    assert named == {comms.pg_id(k): k for k in keys}
