"""The replay on real runs: the 4-rank Gloo DDP job with a held-back rank, a rank of a 300-rank Gloo job,
the 8-rank DLRM job (older NCCL traces), and a real 2-rank MPI ping-pong (OTF2). Expected values are
computed here from the raw files, independently of gpuan's readers."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict

import numpy as np
import pytest

from gpuan.replay import analyse
from gpuan.trace.ranks import load_run

GLOO = "kineto/cpu_ddp_gloo_4rank_slow_rank1_step2"
PING_PONG = "otf2/ping_pong_2rank"
DLRM = "kineto/dlrm_8rank_nccl"


def replay(run) -> dict:
    """The replay's tables of `run`, as pandas DataFrames by name."""
    return analyse(load_run(run)).to_pandas()


@pytest.fixture(scope="module")
def gloo(data_dir):
    return replay(data_dir / GLOO)


def _raw_gloo(run_dir):
    """Per rank, the Gloo collectives (name, enter ns, leave ns) on one clock, straight from the JSON."""
    out = {}
    for r in range(4):
        with gzip.open(run_dir / f"rank{r}.json.gz") as f:
            ev = json.load(f)["traceEvents"]
        calls = sorted(
            (round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000), e["name"])
            for e in ev
            if e.get("ph") == "X" and e.get("name", "").startswith("gloo:")
        )
        forwards = sorted(round(e["ts"] * 1000) for e in ev if e.get("name") == "DistributedDataParallel.forward")
        out[r] = (calls, forwards)
    return out


def test_gloo_rank1_is_the_straggler_of_step_2(gloo, data_dir):
    s = gloo["stragglers"]
    worst = s.iloc[0]
    assert (worst["step"], worst["rank"]) == (2, 1)
    # no other step shows a comparable culprit
    assert worst["caused_total"] > 3 * s["caused_total"].iloc[1]
    c = gloo["collectives"]
    step2 = c[(c["step"] == 2) & (c["op"] == "all_reduce")]
    assert len(step2) == 4
    big = step2[step2["total_wait"] > 20e6]
    assert len(big) >= 2 and (big["late_rank"] == 1).all()
    w = gloo["collective_waits"]
    others = w[w["seq"].isin(big["seq"]) & (w["rank"] != 1)]
    # the others wait tens of ms there
    assert others["wait"].between(10e6, 100e6).all()


def test_gloo_matches_an_independent_pass_over_the_json(gloo, data_dir):
    raw = _raw_gloo(data_dir / GLOO)
    n = {len(calls) for calls, _ in raw.values()}
    assert n == {23}
    c = gloo["collectives"].sort_values("seq")
    w = gloo["collective_waits"]
    for k in range(23):
        enters = {r: raw[r][0][k][0] for r in raw}
        leaves = {r: raw[r][0][k][1] for r in raw}
        names = {raw[r][0][k][2] for r in raw}
        assert len(names) == 1
        latest = max(enters.values())
        late = min(r for r in enters if enters[r] == latest)
        row = c.iloc[k]
        assert row["op"] == names.pop().split(":")[1]
        assert row["late_rank"] == late
        assert row["skew"] == latest - min(enters.values())
        for r in raw:
            expect = max(0, min(latest, leaves[r]) - enters[r])
            got = w[(w["seq"] == k) & (w["rank"] == r)]["wait"].item()
            assert got == expect, (k, r)
    # the step of a collective: DDP forwards counted from 0 on rank 0
    calls0, fwd0 = raw[0]
    steps = [int(np.searchsorted(fwd0, e, side="right")) - 1 for e, _, _ in calls0]
    assert c["step"].tolist() == steps


def test_gloo_breakdown_adds_up(gloo):
    b = gloo["breakdown"]
    assert (b["compute"] + b["wait"] + b["communication"] + b["idle"] == b["span"]).all()
    # the held-back rank idles most and waits least
    assert b.loc[b["idle"].idxmax(), "rank"] == 1
    assert b.loc[b["wait"].idxmin(), "rank"] == 1


def _raw_ping_pong(path):
    """Every region of the archive by name, as (rank, enter, leave, peer, tag, bytes), in ns (peer, tag and
    bytes for MPI_Send and MPI_Recv), read with the otf2 package directly."""
    otf2 = pytest.importorskip("otf2")
    calls = defaultdict(list)
    with otf2.reader.open(str(path / "traces.otf2")) as r:
        res, off = r.timer_resolution, r.definitions.clock_properties.global_offset
        open_ = {}
        for loc, e in r.events:
            rank = int(loc.group.name.split()[-1])
            t = (e.time - off) * 10**9 // res
            if isinstance(e, otf2.events.Enter):
                open_[rank] = [e.region.name, t, None, None, None, None]
            elif isinstance(e, otf2.events.MpiSend):
                open_[rank][3:] = [e.receiver, e.msg_tag, e.msg_length]
            elif isinstance(e, otf2.events.MpiRecv):
                open_[rank][3:] = [e.sender, e.msg_tag, e.msg_length]
            elif isinstance(e, otf2.events.Leave) and rank in open_:
                name, enter, _, peer, tag, size = open_.pop(rank)
                calls[name].append((rank, enter, t, peer, tag, size))
    return calls


def test_ping_pong_late_sender_and_receiver(data_dir):
    calls = _raw_ping_pong(data_dir / PING_PONG)
    got = replay(data_dir / PING_PONG)
    p = got["p2p"]
    # pair the k-th send s→d with tag t with the k-th receive on d from s with tag t
    sends, recvs = defaultdict(list), defaultdict(list)
    for rank, enter, leave, peer, tag, size in calls["MPI_Send"]:
        sends[(rank, peer, tag)].append((enter, leave, size))
    for rank, enter, leave, peer, tag, size in calls["MPI_Recv"]:
        recvs[(peer, rank, tag)].append((enter, leave, size))
    expect_ls, expect_lr, n = 0, 0, 0
    for key, ss in sends.items():
        for k, (s_enter, s_leave, size) in enumerate(ss):
            r_enter, r_leave, _ = recvs[key][k]
            ls = max(0, min(s_enter, r_leave) - r_enter)
            lr = max(0, r_enter - s_enter) if s_leave > r_enter else 0
            row = p[(p["src"] == key[0]) & (p["dst"] == key[1]) & (p["tag"] == key[2]) & (p["seq"] == k)]
            assert row["late_sender"].item() == ls
            assert row["late_receiver"].item() == lr
            assert row["nbytes"].item() == size
            expect_ls += ls
            expect_lr += lr
            n += 1
    assert n == len(p) == 16
    totals = got["wait_totals"].set_index("wait_state")
    assert totals.loc["late_sender", "total_ns"] == expect_ls > 0
    assert totals.loc["late_receiver", "total_ns"] == expect_lr > 0
    m = got["comm_matrix"]
    assert set(zip(m["src"], m["dst"])) == {(0, 1), (1, 0)}
    assert m["bytes"].sum() == sum(c[5] for c in calls["MPI_Send"])


def _union(intervals) -> int:
    """Total length of the union of (start, end) intervals."""
    total, reach = 0, None
    for a, b in sorted(intervals):
        if reach is None or a > reach:
            total += b - a
            reach = b
        elif b > reach:
            total += b - reach
            reach = b
    return total


def test_ping_pong_setup_is_not_communication(data_dir):
    calls = _raw_ping_pong(data_dir / PING_PONG)
    b = replay(data_dir / PING_PONG)["breakdown"].set_index("rank")
    # a region nests nothing else of MPI here: each is counted whole in one category
    init = {c[0]: c[2] - c[1] for c in calls["MPI_Init"]}
    assert init[0] > 0.9 * b.loc[0, "span"]  # MPI_Init's 193 ms is most of rank 0's span
    for r in (0, 1):
        setup = sum(c[2] - c[1] for name in ("MPI_Init", "MPI_Finalize", "MPI_Comm_rank", "MPI_Comm_size")
                    for c in calls[name] if c[0] == r)  # fmt: skip
        sends_recvs = _union([(c[1], c[2]) for name in ("MPI_Send", "MPI_Recv") for c in calls[name] if c[0] == r])
        assert b.loc[r, "setup"] == setup
        assert b.loc[r, "communication"] + b.loc[r, "wait"] == sends_recvs < init[r]
        assert b.loc[r, "communication"] < 0.05 * b.loc[r, "span"]
        assert b.loc[r, ["compute", "wait", "setup", "communication", "idle"]].sum() == b.loc[r, "span"]


def test_gloo_ranges_are_communication(data_dir, tmp_path):
    # one rank of a 300-rank job: 10 gloo:all_reduce ranges on two threads, 4 tiny ops on a third
    src = data_dir / "kineto/cpu_gloo_rank34_of_300.json.gz"
    (tmp_path / src.name).write_bytes(src.read_bytes())
    with gzip.open(src) as f:
        ev = json.load(f)["traceEvents"]
    ranges = [e for e in ev if e.get("name") == "gloo:all_reduce"]
    spans = [(round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000)) for e in ranges]
    assert len(spans) == 10 and len({e["tid"] for e in ranges}) == 2
    r = replay(tmp_path)
    b = r["breakdown"].iloc[0]
    assert b["rank"] == 34
    assert b["communication"] == _union(spans)  # nothing else runs under them
    assert b["span"] >= max(e for _, e in spans) - min(s for s, _ in spans)
    assert b["communication"] > 0.8 * b["span"]
    c = r["collectives"]
    assert (c["op"] == "all_reduce").all() and len(c) == 10
    sizes = sorted(e["args"]["Input Dims"][0][0] * 4 for e in ranges)  # float
    assert sorted(c["nbytes"]) == sizes


def test_dlrm_all_to_all_has_its_type_and_bytes(data_dir):
    # older NCCL traces: all-to-alls run as ncclKernel_SendRecv kernels, and only the CPU-side nccl:* op
    # that launched each kernel says what it is and how large (its Input Dims and Input type)
    size_of = {"float": 4, "int": 4, "long int": 8}
    expect = {}
    for f in (data_dir / DLRM).iterdir():
        with gzip.open(f) as fh:
            doc = json.load(fh)
        ops = sorted(
            (
                e["ts"],
                e["name"].split(":")[1],
                int(np.prod(e["args"]["Input Dims"][0])) * size_of[e["args"]["Input type"][0]],
            )
            for e in doc["traceEvents"]
            if e.get("name", "").startswith("nccl:")
        )
        kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel" and e["name"].startswith("ncclKernel_")]
        assert len(ops) == len(kernels) == 8 and sum("SendRecv" in k["name"] for k in kernels) == 5
        expect[doc["distributedInfo"]["rank"]] = [(op, n) for _, op, n in ops]
    t = replay(data_dir / DLRM)
    w = t["collective_waits"].sort_values(["rank", "seq"])
    for r, calls in expect.items():
        mine = w[w["rank"] == r]
        assert list(zip(mine["op"], mine["nbytes"])) == calls
    assert all(n > 0 for calls in expect.values() for _, n in calls)
    # the matrix: every rank sends each all-to-all's message in equal parts to the 7 others
    m = t["comm_matrix"].set_index(["src", "dst"])
    for a in range(8):
        sent = sum(n for op, n in expect[a] if op == "all_to_all")
        for b in range(8):
            if b not in (a, (a + 1) % 8):  # not a ring neighbour of the all-reduces
                assert abs(m.loc[(a, b), "bytes"] - sent / 8) <= 1
                assert m.loc[(a, b), "messages"] == 5
    # the waits and the straggler stay what they were: rank 7 last to 5 of 8 collectives, 35.6 ms
    top = t["stragglers"].iloc[0]
    assert (top["rank"], top["late"], top["collectives"]) == (7, 5, 8)
    assert round(top["caused_total"] / 1e5) == 356
