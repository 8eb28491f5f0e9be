"""The fleet view (``gpuan fleet``): step times from cycles across ranks, the slowest ranks and why.

On the real runs: the 4-rank Gloo DDP job whose rank 1 slept 40 ms before the backward pass of step 2, and
the 8-rank DLRM job (one profiler step per rank). Expected values are computed here from the raw JSON,
independently of gpuan's readers. Synthetic runs plant a slow kernel and an idle gap at a known rank, step
and position. As an MPI job, -n 2 and -n 4 give what one process gives; bad input is one line, exit 2.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpuan.cycles.sequence import Sequence
from gpuan.fleet import analyse
from gpuan.fleet.align import HEADER, digest, groups
from gpuan.fleet.intervals import Intervals
from gpuan.fleet.steps import RankSteps, leading_steps, rotated
from gpuan.replay import analyse as replay
from gpuan.synth.ranks import plan, write_run
from gpuan.trace.ranks import load_run

GLOO = "kineto/cpu_ddp_gloo_4rank_slow_rank1_step2"
DLRM = "kineto/dlrm_8rank_nccl"
MPIEXEC = shutil.which("mpiexec")
MS = 1_000_000


@pytest.fixture(scope="module")
def gloo(data_dir):
    return analyse(load_run(data_dir / GLOO))


@pytest.fixture(scope="module")
def dlrm(data_dir):
    return analyse(load_run(data_dir / DLRM))


# the synthetic run: 8 ranks of 6 steps; rank 5's kernel at position 40 of step 3 runs 8 ms longer, and
# rank 2 idles 12 ms before position 100 of step 1
SLOW_KERNEL = (3, 5, 40, 8 * MS)
IDLE_GAP = (1, 2, 100, 12 * MS)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    d = tmp_path_factory.mktemp("fleet8")
    write_run(plan(8, 6, 3000, repeat=True, slow_kernels=(SLOW_KERNEL,), idle_gaps=(IDLE_GAP,), seed=4), d)
    return d


def _json(path: Path) -> list[dict]:
    with gzip.open(path) as f:
        return json.load(f)["traceEvents"]


# ---- the Gloo run -------------------------------------------------------------------------------------


def test_gloo_names_rank_1_in_step_2(gloo):
    slow = gloo.to_pandas("slowest")
    top = slow.iloc[0]
    assert (top["rank"], top["step"]) == (1, 2)
    assert gloo.summary["slowest"] == {"rank": 1, "step": 2, "excess_ns": top["excess_ns"]}
    # rank 1 slept 40 ms: its own time exceeds the median rank's by about that
    assert 35 * MS <= top["excess_ns"] <= 50 * MS
    # no other (rank, step) comes close
    assert slow["excess_ns"].iloc[1] < 0.75 * top["excess_ns"]
    # every rank's step 2 lasts long (the others wait for rank 1), so it is not the longest step: its own time is
    steps = gloo.to_pandas("steps")
    step2 = steps[steps["step"] == 2].set_index("rank")
    assert step2["step_ns"].idxmax() != 1 and step2["own_ns"].idxmax() == 1
    assert (step2.drop(index=1)["wait_ns"] > 40 * MS).all() and step2.loc[1, "wait_ns"] < 10 * MS


def test_gloo_extra_time_is_a_gap_in_no_op_before_backward(gloo):
    causes = gloo.to_pandas("causes")
    first = causes[(causes["rank"] == 1) & (causes["step"] == 2)].iloc[0]
    assert first["where"] == "before" and first["category"] == "idle"
    # the gap between the loss (aten::mean) and the first op of the backward pass (aten::ones_like, the
    # loss's gradient seed; the autograd ops follow it)
    assert (first["name"], first["before"]) == ("aten::ones_like", "aten::mean")
    assert first["phase"] == "forward" and first["backward_at"] == first["position"] + 1
    assert 35 * MS <= first["excess_ns"] <= 50 * MS and first["median_ns"] < MS
    assert first["share"] > 0.9


def test_gloo_replay_names_rank_1_the_late_arriver(gloo, data_dir):
    top = gloo.to_pandas("slowest").iloc[0]
    assert top["collectives"] == 4 and top["late_at"] >= 2
    assert top["max_delay_ns"] > 40 * MS and top["caused_ns"] > 200 * MS
    # replay itself, run apart, names the same rank and step (its steps count DDP forwards from 0)
    stragglers = replay(load_run(data_dir / GLOO)).to_pandas("stragglers")
    assert (stragglers.iloc[0]["step"], stragglers.iloc[0]["rank"]) == (2, 1)


def test_gloo_steps_are_the_ddp_iterations(gloo, data_dir):
    """Each rank's cycle is its training step: the first step runs other ops (DDP's first iteration) and
    counts as step 0; steps 1-5 each lie between the DDP forward of that iteration and the next one, as the
    raw JSON has them."""
    ranks = gloo.to_pandas("ranks")
    assert ranks["periodic"].all() and (ranks["length"] == 57).all() and (ranks["group"] == 0).all()
    assert (ranks["first_step"] == 1).all() and (ranks["last_step"] == 5).all()
    steps = gloo.to_pandas("steps")
    raw = {r: _json(data_dir / GLOO / f"rank{r}.json.gz") for r in range(4)}
    # gpuan's run clock: ns from the earliest first event of any rank (the files share baseTimeNanoseconds)
    base = min(round(min(float(e["ts"]) for e in ev if "ts" in e) * 1000) for ev in raw.values())
    for r, ev in raw.items():
        forwards = sorted(round(float(e["ts"]) * 1000) - base for e in ev
                          if e.get("name") == "DistributedDataParallel.forward")  # fmt: skip
        assert len(forwards) == 6  # the leading step and the five found
        mine = steps[steps["rank"] == r].sort_values("step")
        for row in mine.itertuples():
            # the step's first op comes inside its forward, and its last op ends before the next forward
            assert forwards[row.step] <= row.first_ns + 1_000, (r, row.step)
            assert row.step == 5 or row.end_ns <= forwards[row.step + 1] + 1_000, (r, row.step)
            if row.step >= 2:
                # its window opens when the previous step's last op ends, before the forward begins (the
                # forward of step 1 first broadcasts DDP's buffers: ops no later step runs, left to step 0)
                assert row.start_ns - 1_000 <= forwards[row.step], (r, row.step)


def test_gloo_times_add_up(gloo):
    steps = gloo.to_pandas("steps")
    # one thread, one op at a time: each step's time is its waiting, compute, communication and idle time
    parts = steps[["wait_ns", "compute_ns", "comm_ns", "idle_ns"]].sum(axis=1)
    assert (parts == steps["step_ns"]).all()
    assert (steps["own_ns"] == steps["step_ns"] - steps["wait_ns"]).all()


# ---- the DLRM run -------------------------------------------------------------------------------------


def _dlrm_counts(run: Path) -> dict[int, tuple[int, int, bool]]:
    """Per rank (distributedInfo.rank), from the raw JSON: the span of its kernels in ns, the span of the
    kernels launched inside its ProfilerStep, and whether those are all its kernels (by correlation id)."""
    out = {}
    for path in sorted(run.glob("*.json.gz")):
        with gzip.open(path) as f:
            doc = json.load(f)
        ev = doc["traceEvents"]
        kernels = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "kernel"]
        launch = {e["args"]["correlation"]: e["ts"] for e in ev
                  if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}  # fmt: skip
        (step,) = [e for e in ev if str(e.get("name", "")).startswith("ProfilerStep#")]
        inside = [
            k for k in kernels if step["ts"] <= launch.get(k["args"].get("correlation"), -1) <= step["ts"] + step["dur"]
        ]

        def span(ks):
            return round(max(k["ts"] + k["dur"] for k in ks) * 1000) - round(min(k["ts"] for k in ks) * 1000)

        out[doc["distributedInfo"]["rank"]] = (span(kernels), span(inside), len(inside) == len(kernels))
    return out


def test_dlrm_step_times_match_an_independent_count(dlrm, data_dir):
    """One profiler step per rank: nothing repeats, so each rank's kernels are its one step, and its step
    time is the span of its kernels, to the ns. On the six ranks whose kernels were all launched inside
    ProfilerStep#10 that is the span of the step's kernels; ranks 1 and 3 also ran 64 kernels launched
    before the step began, which fleet (reading no annotation) counts in."""
    counts = _dlrm_counts(data_dir / DLRM)
    steps = dlrm.to_pandas("steps").set_index("rank")
    assert sorted(steps.index) == list(range(8)) and (steps["step"] == 0).all()
    for rank, (kernel_span, step_span, all_inside) in counts.items():
        assert steps.loc[rank, "step_ns"] == kernel_span, rank
        if all_inside:
            assert steps.loc[rank, "step_ns"] == step_span, rank
        else:
            assert steps.loc[rank, "step_ns"] > step_span, rank
    assert sorted(r for r, c in counts.items() if not c[2]) == [1, 3]
    ranks = dlrm.to_pandas("ranks")
    assert not ranks["periodic"].any()
    # ranks that ran the same kernels in the same order compare position by position
    assert ranks.groupby("group")["rank"].apply(list).tolist() == [[2, 6, 7], [0, 5], [1], [3], [4]]


def test_dlrm_text_lists_every_rank(dlrm):
    from gpuan.outputs import fleet as output

    text = output.text(dlrm)
    steps = dlrm.to_pandas("steps")
    for row in steps.itertuples():
        assert f"rank {row.rank:<5} {row.step_ns / 1e6:>7.1f} ms" in text
    # rank 4 alone runs its kernels in its order: it is compared with the median rank as a whole
    alone = steps[steps["peers"] < 2]["rank"].tolist()
    assert alone == [1, 3, 4]
    slow = dlrm.to_pandas("slowest")
    if 4 in slow["rank"].tolist():
        assert "compared as a whole, not by position" in text


# ---- synthetic runs: the planted slow kernel and idle gap ---------------------------------------------


def test_synthetic_planted_causes_are_found(synthetic):
    result = analyse(load_run(synthetic))
    slow = result.to_pandas("slowest")
    assert [tuple(x) for x in slow[["rank", "step"]].to_numpy()] == [(2, 1), (5, 3)]
    causes = result.to_pandas("causes")
    gap = causes[(causes["rank"] == 2) & (causes["step"] == 1)].iloc[0]
    assert (gap["position"], gap["where"], gap["category"]) == (100, "before", "idle")
    assert abs(gap["excess_ns"] - IDLE_GAP[3]) < 0.01 * MS
    kernel = causes[(causes["rank"] == 5) & (causes["step"] == 3)].iloc[0]
    assert (kernel["position"], kernel["where"], kernel["category"]) == (40, "op", "compute")
    assert abs(kernel["excess_ns"] - SLOW_KERNEL[3]) < 0.01 * MS
    # the others waited for them in the all-reduces, which replay explains: not their own time
    assert (slow["late_at"] >= 1).all()
    steps = result.to_pandas("steps")
    others = steps[(steps["step"] == 3) & (steps["rank"] != 5)]
    assert (others["wait_ns"] > 7 * MS).all()
    outliers = result.to_pandas("outliers").set_index("position")
    assert (outliers.loc[40, "rank"], outliers.loc[40, "step"]) == (5, 3)
    assert (outliers.loc[100, "rank"], outliers.loc[100, "step"], outliers.loc[100, "where"]) == (2, 1, "before")


def test_synthetic_step_times_match_the_plan(synthetic):
    """The steps found are the plan's: a step's first kernel starts where the plan's step does (the
    ProfilerStep annotations fleet does not read), and there are as many steps as the plan has."""
    p = plan(8, 6, 3000, repeat=True, slow_kernels=(SLOW_KERNEL,), idle_gaps=(IDLE_GAP,), seed=4)
    steps = analyse(load_run(synthetic)).to_pandas("steps")
    assert len(steps) == 8 * 6
    for row in steps.itertuples():
        assert row.first_ns == p.step_start[row.step], (row.rank, row.step)


def test_a_rotated_pattern_is_lined_up():
    """A rank whose cycle starts at another place of the pattern is rotated onto the reference's."""
    template = np.arange(10, dtype=np.int64)
    other = np.roll(template, -3)  # starts at the reference's position 3
    headers = np.zeros(3, HEADER)
    for i, t in enumerate((template, template, other)):
        headers[i] = (i, True, 10, 4, 0, 40, 0, digest(t))
    g = groups(headers, {0: template, 1: template, 2: other})
    assert g.group == {0: 0, 1: 0, 2: 0} and g.rotation[2] == 7 and g.rotation[0] == 0
    ids = np.tile(other, 4)
    seq = Sequence("kernel", 2, 0, "all", (7,), np.array([str(i) for i in range(10)], object), ids,
                   np.arange(40, dtype=np.int64) * 10, np.full(40, 5, np.int64))  # fmt: skip
    steps = RankSteps(2, seq, other, np.arange(40, dtype=np.int64).reshape(4, 10), 0, True)
    moved = rotated(steps, g.rotation[2])
    assert (ids[moved.positions] == template).all() and moved.positions.shape == (3, 10)
    # the 7 events before the first rotated step are most of a pattern: one step before it
    assert moved.first_step == 1


@pytest.mark.parametrize(
    "before, expected",
    [([], 0), ([0, 1, 2, 3, 4, 5, 6, 7, 8, 9], 1), ([0, 1, 2, 3, 4, 5, 6, 7, 50, 51, 52], 1), ([7, 8, 9], 0),
     (list(range(10)) * 2, 2)],
)  # fmt: skip
def test_leading_steps(before, expected):
    assert leading_steps(np.array(before, np.int64), np.arange(10, dtype=np.int64)) == expected


def test_intervals_against_a_bitmap():
    rng = np.random.default_rng(0)
    for _ in range(200):
        s, s2 = rng.integers(0, 50, rng.integers(0, 8)), rng.integers(0, 50, rng.integers(0, 8))
        e, e2 = s + rng.integers(0, 10, s.size), s2 + rng.integers(0, 10, s2.size)
        a, b = Intervals.union(s, e), Intervals.union(s2, e2)
        bits = np.zeros((2, 70), bool)
        for row, (starts, ends) in enumerate(((s, e), (s2, e2))):
            for x, y in zip(starts, ends):
                bits[row, x:y] = True
        lo = rng.integers(0, 70, 20)
        hi = lo + rng.integers(0, 20, 20)
        want = [np.count_nonzero((bits[0] & ~bits[1])[x:y]) for x, y in zip(lo, hi)]
        assert a.minus(b).within(lo, hi).tolist() == want


# ---- the command: outputs, MPI, bad input -------------------------------------------------------------


def _run(args: list[str], n: int | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    cmd = [sys.executable, "-m", "gpuan", *args]
    if n is None:
        env["GPUAN_MPI"] = "0"
    else:
        env.pop("GPUAN_MPI", None)
        cmd = [MPIEXEC, "-n", str(n), *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)


def _document(run, n: int | None) -> dict:
    p = _run(["fleet", str(run), "--format", "json"], n)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["summary"].pop("processes") == (n or 1)
    return doc


@pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (the test command installs mpich from PyPI)")
@pytest.mark.parametrize("n", [2, 4])
def test_same_result_for_any_number_of_processes(n, synthetic, data_dir):
    for run in (synthetic, data_dir / GLOO):
        assert _document(run, n) == _document(run, None), run


def test_text_csv_and_html(tmp_path, data_dir):
    out = tmp_path / "tables"
    p = _run(["fleet", str(data_dir / GLOO), "-o", str(out), "--html", str(tmp_path / "f.html"), "--top", "2"])
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].endswith("4 ranks by 1 process; steps found as cycles of cpu_op events")
    at = next(i for i, line in enumerate(lines) if line.startswith("    rank 1, step 2: +"))
    assert "in no op before position 10 aten::ones_like, after aten::mean (just before backward" in lines[at + 1]
    assert any(line.startswith("      replay: last to arrive at 2 of the 4 collectives") for line in lines[at:])
    written = {line.split()[2] for line in p.stderr.splitlines() if line.startswith("gpuan: wrote ")}
    names = ("ranks", "steps", "distribution", "slowest", "causes", "outliers")
    assert written == {str(out / f"{n}.csv") for n in names} | {str(tmp_path / "f.html")}
    tables = {n: pd.read_csv(out / f"{n}.csv") for n in names}
    assert len(tables["steps"]) == 20 and len(tables["slowest"]) == 2
    assert tables["causes"].iloc[0][["rank", "step", "name"]].tolist() == [1, 2, "aten::ones_like"]
    html = (tmp_path / "f.html").read_text()
    assert "step time (ms) per rank and step" in html and "plotly" in html.lower()


def test_parquet_tables(tmp_path, synthetic):
    p = _run(["fleet", str(synthetic), "-o", str(tmp_path / "t"), "--table-format", "parquet"])
    assert p.returncode == 0, p.stderr
    assert len(pd.read_parquet(tmp_path / "t" / "steps.parquet")) == 48


def test_bad_inputs_exit_2_with_one_line(tmp_path):
    for args in (["fleet", str(tmp_path / "missing")], ["fleet", str(tmp_path)],
                 ["fleet", str(tmp_path), "--kind", "nope"]):  # fmt: skip
        p = _run(args)
        assert p.returncode == 2 and len(p.stderr.splitlines()) == 1, (args, p.stderr)
        assert p.stdout == ""


@pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (the test command installs mpich from PyPI)")
def test_a_truncated_rank_file_stops_every_process(tmp_path, data_dir):
    for r in range(4):
        shutil.copy(data_dir / GLOO / f"rank{r}.json.gz", tmp_path / f"rank{r}.json.gz")
    data = (tmp_path / "rank2.json.gz").read_bytes()
    (tmp_path / "rank2.json.gz").write_bytes(data[: len(data) // 2])
    p = _run(["fleet", str(tmp_path), "-o", str(tmp_path / "out")], 2)
    assert p.returncode == 2
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuan: error:") and "rank2.json.gz" in lines[0], p.stderr
    assert not (tmp_path / "out").exists()
