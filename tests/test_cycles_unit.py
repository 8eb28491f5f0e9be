"""Cycle-detection rules on small hand-made sequences whose answers are known."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

from gpuan.cycles import periods
from gpuan.cycles.csvfile import read, render
from gpuan.cycles.detect import cover, detect_sequence
from gpuan.cycles.patterns import Pattern, SequenceCycles, distinct_patterns
from gpuan.cycles.periods import idle_before
from gpuan.cycles.sequence import Sequence, sequences
from gpuan.cycles.signature import signature
from gpuan.trace.schema import SCHEMA
from gpuan.trace.table import Trace, build_table, dict_column


def seq_of(ids, ts=None, dur=None) -> Sequence:
    ids = np.asarray(ids, np.int32)
    n = ids.shape[0]
    ts = np.arange(n, dtype=np.int64) * 10 if ts is None else np.asarray(ts, np.int64)
    dur = np.full(n, 5, np.int64) if dur is None else np.asarray(dur, np.int64)
    vocab = np.array([f"k{i:03d}" for i in range(int(ids.max()) + 1)], dtype=object)
    return Sequence("kernel", None, 0, "compute", (7,), vocab, ids, ts, dur)


def brute_regions(ids, L, allowed):
    """Independent reference: good windows by direct counting, runs of them, trimmed to matches."""
    n = len(ids)
    eq = [ids[i] == ids[i + L] for i in range(n - L)]
    good = [sum(not e for e in eq[w : w + L]) <= allowed for w in range(n - 2 * L + 1)]
    out, w = [], 0
    while w < len(good):
        if not good[w]:
            w += 1
            continue
        a = w
        while w + 1 < len(good) and good[w + 1]:
            w += 1
        first = next(i for i in range(a, w + L) if eq[i])
        last = next(i for i in range(w + L - 1, a - 1, -1) if eq[i])
        out.append((first, last + L + 1))
        w += 1
    return out


@pytest.mark.parametrize("seed", range(6))
def test_periodic_regions_match_brute_force(seed):
    rng = np.random.default_rng(seed)
    unit = rng.integers(0, 50, 40)
    ids = np.concatenate([rng.integers(50, 60, 30), np.tile(unit, 5), rng.integers(50, 60, 17), np.tile(unit[:25], 4)])
    ids[rng.integers(0, len(ids), 3)] = 99  # a few substitutions
    for L in (25, 40, 80):
        allowed = int(L * periods.TOLERANCE)
        s, e = periods.periodic_regions(ids, L, allowed)
        assert list(zip(s.tolist(), e.tolist())) == brute_regions(ids.tolist(), L, allowed)


def test_match_counts_equal_numpy():
    rng = np.random.default_rng(1)
    ids = np.tile(rng.integers(0, 30, 97), 60).astype(np.int32)
    ps = np.array([1, 2, 96, 97, 194, 500], np.int64)
    want = [int((ids[:-p] == ids[p:]).sum()) for p in ps]
    assert periods.match_counts(ids, ps).tolist() == want


def test_gpu_match_counts_kernel_agrees_in_the_simulator():
    code = (
        "import numpy as np\n"
        "from gpuan.cycles import periods, periods_cuda\n"
        "rng = np.random.default_rng(2)\n"
        "ids = np.tile(rng.integers(0, 20, 37), 30).astype(np.int32)\n"
        "ps = np.array([1, 5, 36, 37, 74, 300], np.int64)\n"
        "gpu = periods_cuda.match_counts(ids, ps, blocks=2)\n"
        "cpu = periods.match_counts(ids, ps)\n"
        "assert gpu.tolist() == cpu.tolist(), (gpu, cpu)\n"
        "print('agree', gpu.tolist())\n"
    )
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert "agree" in r.stdout


def test_gpu_match_counts_on_a_real_gpu():
    from gpuan.engine import gpu_available

    if not gpu_available():
        pytest.skip("no GPU here: the simulator test covers the kernel")
    from gpuan.cycles import periods_cuda

    rng = np.random.default_rng(3)
    ids = np.tile(rng.integers(0, 300, 1000), 500).astype(np.int32)
    ps = periods.candidate_periods(ids, 300, len(ids) // 2)
    assert periods_cuda.match_counts(ids, ps).tolist() == periods.match_counts(ids, ps).tolist()


def test_long_period_is_a_candidate_among_short_gaps():
    # a 900-event step made of 30 repeats of a 29-event layer plus 30 unique events, 8 steps
    rng = np.random.default_rng(4)
    layer = rng.integers(0, 20, 29)
    step = np.concatenate([np.arange(100, 115), np.tile(layer, 30), np.arange(115, 130)])
    ids = np.tile(step, 8).astype(np.int32)
    assert len(ids) > periods.EXHAUSTIVE
    assert len(step) in periods.candidate_periods(ids, 130, len(ids) // 2).tolist()
    (seg,) = detect_sequence(seq_of(ids))
    assert seg.cycle.length == len(step) and seg.cycle.repetitions == 8
    assert [(c.offset, c.length, c.per_parent) for c in seg.sub_cycles] == [(15, 29, 30)]


def test_long_cycles_need_three_instances_and_short_ones_more():
    filler = list(range(100, 160))
    five = list(range(5))
    thirty = list(range(10, 40))
    short = seq_of(filler + five * 3 + filler[::-1])
    assert not any(s.periodic for s in detect_sequence(short, min_share=0))
    shorter_ok = seq_of(filler + five * 6 + filler[::-1])
    assert [s.cycle.repetitions for s in detect_sequence(shorter_ok, min_share=0) if s.periodic] == [6]
    long = seq_of(filler + thirty * 3 + filler[::-1])
    assert [s.cycle.repetitions for s in detect_sequence(long, min_share=0) if s.periodic] == [3]
    two = seq_of(filler + thirty * 2 + filler[::-1])
    assert not any(s.periodic for s in detect_sequence(two, min_share=0))


def test_rotation_starts_after_the_idle_gap():
    # an iteration is 0 1 2 3 4, but the trace starts and ends mid-way
    ids = np.array([3, 4] + [0, 1, 2, 3, 4] * 9 + [0, 1], np.int32)
    dur = np.full(len(ids), 5, np.int64)
    gaps = np.where(ids == 0, 100, 1)  # the host idles before each iteration's first kernel
    ts = np.cumsum(gaps + np.concatenate([[0], dur[:-1]]))
    (seg,) = [s for s in detect_sequence(seq_of(ids, ts, dur)) if s.periodic]
    assert seg.cycle.template.tolist() == [0, 1, 2, 3, 4]
    assert seg.cycle.starts.tolist() == list(range(2, 47, 5))
    assert seg.start == 2 and seg.end == 47


def test_one_substitution_keeps_the_run_and_is_left_out_of_the_statistics():
    unit = list(range(40))
    ids = np.array(unit * 6, np.int32)
    dur = np.tile(np.arange(40, dtype=np.int64) + 100, 6)
    ids[2 * 40 + 7] = 55  # instance 2 runs another kernel at position 7
    dur[2 * 40 + 7] = 10_000
    s = seq_of(ids, dur=dur)
    (seg,) = detect_sequence(s)
    assert seg.cycle.repetitions == 6 and seg.cycle.template.tolist() == unit
    stats = Pattern(s, 0, "cycle", seg.cycle).stats()
    assert stats["count"][7] == 5 and stats["count"][8] == 6
    assert stats["max_duration_us"][7] == pytest.approx(0.107)
    assert stats["stddev_us"][3] == 0


def test_a_stray_event_does_not_split_the_phase():
    unit = list(range(50))
    ids = unit * 4 + [77] + unit * 5  # one extra kernel between instances 4 and 5 ...
    ids = ids[:130] + [88] + ids[130:]  # ... and one inside instance 3
    (seg,) = detect_sequence(seq_of(ids))
    assert seg.periodic and seg.cycle.template.tolist() == unit
    starts = seg.cycle.starts.tolist()
    assert starts[0] == 0 and starts[-1] == len(ids) - 50
    assert len(starts) >= 7  # the instance holding the stray kernel may be left out, no more


def test_position_stats_against_numpy():
    rng = np.random.default_rng(5)
    ids = np.tile(np.arange(12, dtype=np.int32), 9)
    ids[30] = 20
    dur = rng.integers(100, 10_000, len(ids))
    starts = np.arange(0, len(ids), 12)
    count, total, lo, hi, m2 = periods.position_stats(ids, dur, starts, np.arange(12, dtype=np.int32))
    for j in range(12):
        d = np.array([dur[s + j] for s in starts if ids[s + j] == j], float)
        assert count[j] == len(d) and total[j] == d.sum() and lo[j] == d.min() and hi[j] == d.max()
        assert m2[j] == pytest.approx(((d - d.mean()) ** 2).sum())


def test_csv_round_trip(tmp_path):
    ids = np.tile(np.arange(25, dtype=np.int32), 4)
    s = seq_of(ids, dur=np.arange(100, dtype=np.int64) * 1000 + 1234)
    (seg,) = detect_sequence(s)
    p = Pattern(s, 0, "cycle", seg.cycle)
    path = tmp_path / "c.csv"
    path.write_text(render(p))
    back = read(path)
    stats = p.stats()
    assert back.iterations == 4 and back.rows.kernel_name.tolist() == stats.kernel_name.tolist()
    assert np.allclose(back.rows.avg_duration_us, stats.avg_duration_us.round(3))
    assert back.avg_cycle_us == pytest.approx(p.instance_times().busy_ns.mean() / 1e3, abs=1e-3)
    lines = path.read_text().splitlines()
    assert lines[:3] == ["# Cycle Statistics", "# Iterations,4", "# Kernels per cycle,25"]
    assert lines[5] == "" and lines[6].startswith("index,kernel_name,avg_duration_us")


def test_rotations_of_one_pattern_are_one_pattern():
    unit = list(range(30))
    rotated = unit[10:] + unit[:10]
    filler = list(range(100, 400))
    s = seq_of(unit * 5 + filler + rotated * 5)
    segs = detect_sequence(s)
    assert sum(sg.periodic for sg in segs) == 2
    pats = [p for p in distinct_patterns([SequenceCycles(s, segs)]) if p.role == "cycle"]
    assert len(pats) == 1 and pats[0].cycle.repetitions >= 9
    assert pats[0].cycle.template.tolist() == unit


@pytest.mark.parametrize(
    "name, sig",
    [
        ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float> >(int)",
         "void at::native::vectorized_elementwise_kernel"),
        ("Cijk_Ailk_Bljk_HHS_BH_MT128x128x32_SN_1LDSB0_GRID_MN_4_3", "Cijk_Ailk_Bljk_HHS_BH_MT128x128x32_SN_1LDSB0"),
        ("ampere_bf16_s16816gemm_128x64_ldg8_stages_64x4_tn", "ampere_bf16_s16816gemm_128x64_ldg8_stages_64x4_tn"),
        ("triton_poi_fused_add_mul_0", "triton_poi_fused_add_mul"),
        ("fmha_fwd_kernel_1tg_ps_128x64", "fmha_fwd_kernel"),
        ("gemm_kernel_64x128", "gemm_kernel"),
        ("_1", signature("_1")),
    ],
)  # fmt: skip
def test_signature(name, sig):
    assert signature(name) == sig
    if sig.startswith("other_"):
        assert signature(name) == signature(name)


def test_cpu_ops_top_and_leaf():
    # thread 1: a(0-100) contains b(0-40) contains c(10-20); d(50-60) in a; e(200-210) alone
    rows = [("a", 0, 100), ("b", 0, 40), ("c", 10, 10), ("d", 50, 10), ("e", 200, 10)]
    n = len(rows)
    names = [r[0] for r in rows]
    cols = {
        "ts": np.array([r[1] for r in rows], np.int64),
        "dur": np.array([r[2] for r in rows], np.int64),
        "name": dict_column(np.arange(n, dtype=np.int32), names),
        "kind": dict_column(np.full(n, 5, np.int32), ["kernel", "memcpy", "memset", "runtime", "driver", "cpu_op"]),
        "pid": np.ones(n, np.int64),
        "tid": np.ones(n, np.int64),
    }
    trace = Trace(build_table(cols, n, SCHEMA))
    assert isinstance(trace.events, pa.Table)

    def names_of(ops):
        (s,) = sequences(trace, "cpu_op", ops=ops)
        return s.vocab[s.ids].tolist()

    assert names_of("top") == ["a", "e"]
    assert names_of("leaf") == ["c", "d", "e"]
    assert names_of("all") == ["a", "b", "c", "d", "e"]


def test_idle_before_and_cover_are_exact():
    ts = np.array([0, 10, 15, 100], np.int64)
    dur = np.array([20, 2, 5, 1], np.int64)
    assert idle_before(ts, dur).tolist() == [0, 0, 0, 80]
    ids = np.array([9] * 3 + list(range(8)) * 4 + [9] * 3, np.int32)
    picks = cover(ids, np.zeros(len(ids)), 10, lambda L, k: k >= 3 and L >= 2)
    assert [(L, st.tolist()) for L, st in picks] == [(8, [3, 11, 19, 27])]


def test_synthetic_llm_inference_phases():
    from gpuan.cycles import detect
    from gpuan.cycles.patterns import llm_phases
    from gpuan.synth_cycles import llm_kernel_trace

    trace, truth = llm_kernel_trace(60_000, noise=0.05, seed=11)
    (sc,) = detect(trace)  # streams 7 and 20 are both compute: one sequence
    merged = truth["merged"]
    prefill, decode = sc.segments
    assert (prefill.start, prefill.end, prefill.periodic) == (0, truth["prefill"]["end"], False)
    (pre_layer,) = prefill.sub_cycles
    assert (pre_layer.length, pre_layer.per_parent) == (truth["prefill"]["layer_length"], truth["layers"])
    assert decode.cycle.length == merged["step_length"] and decode.end == len(sc.sequence)
    # every instance found is a true decode step; only steps disturbed by a stray kernel may be missing
    true_starts = set(merged["step_starts"].tolist())
    found = decode.cycle.starts.tolist()
    assert set(found) <= true_starts
    assert len(true_starts) - len(found) <= 2 * len(truth["noise"]["steps"])
    layer = max(decode.sub_cycles, key=lambda c: c.length * c.per_parent)
    assert layer.length == truth["decode"]["layer_length"] and layer.per_parent >= truth["layers"] - 1
    phases = llm_phases([sc])
    assert set(phases) == {"prefill", "decode"}
    assert phases["prefill"].cycle.length == truth["prefill"]["layer_length"]
    assert phases["decode"].cycle.length == truth["decode"]["layer_length"]
