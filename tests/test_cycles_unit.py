"""Cycle-detection rules on small hand-made sequences whose answers are known."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import tracemalloc

import numpy as np
import pyarrow as pa
import pytest

import gpuan
from gpuan.cycles import detect, periods
from gpuan.cycles.detect import Pick, SequenceCycles, _outer_cycles, cover, detect_sequence
from gpuan.cycles.patterns import Pattern, distinct_patterns
from gpuan.cycles.periods import idle_before
from gpuan.cycles.sequence import Sequence, is_comm_name, sequences
from gpuan.cycles.signature import signature
from gpuan.cycles.tables import combine, part
from gpuan.engine.parts import tagged
from gpuan.outputs.cycles import csv_text
from gpuan.result import Result
from gpuan.trace.cycle_csv import read_cycle_csv
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


@pytest.mark.gpu_twin("gpuan/cycles/periods_cuda.py::_match_counts_kernel")
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


@pytest.mark.gpu_twin("gpuan/cycles/periods_cuda.py::_match_counts_kernel")
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
    positions = starts[:, None] + np.arange(12)[None, :]
    count, total, lo, hi, m2 = periods.position_stats(ids, dur, positions, np.arange(12, dtype=np.int32))
    for j in range(12):
        d = np.array([dur[s + j] for s in starts if ids[s + j] == j], float)
        assert count[j] == len(d) and total[j] == d.sum() and lo[j] == d.min() and hi[j] == d.max()
        assert m2[j] == pytest.approx(((d - d.mean()) ** 2).sum())
    # instances whose events are not contiguous (slots of interleaved streams): the rows say where each is
    slots = np.stack([rng.permutation(12) for _ in starts])
    shuffled = np.take_along_axis(positions, slots, axis=1)
    again = periods.position_stats(ids, dur, shuffled, np.take_along_axis(ids[positions], slots, axis=1)[0])
    first = shuffled[0]
    for j in range(12):
        d = np.array([dur[row[j]] for row in shuffled if ids[row[j]] == ids[first[j]]], float)
        assert again[0][j] == len(d) and again[1][j] == d.sum()


def render(seq, seg) -> str:
    """The cycle CSV of `seg`'s outer cycle, as ``gpuan cycles -o`` writes it."""
    result = Result("cycles", combine(tagged(part([SequenceCycles(seq, [seg])]), 0)), {})
    return csv_text(result, 0)


def test_csv_round_trip(tmp_path):
    ids = np.tile(np.arange(25, dtype=np.int32), 4)
    s = seq_of(ids, dur=np.arange(100, dtype=np.int64) * 1000 + 1234)
    (seg,) = detect_sequence(s)
    p = Pattern(s, 0, "cycle", seg.cycle)
    path = tmp_path / "c.csv"
    path.write_text(render(s, seg))
    back = read_cycle_csv(path)
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
    assert [(p.period, p.starts.tolist(), p.ordered) for p in picks] == [(8, [3, 11, 19, 27], True)]


def test_synthetic_llm_inference_phases():
    from gpuan.cycles import detect
    from gpuan.cycles.patterns import llm_phases
    from gpuan.synth.cycles import llm_kernel_trace

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


# ---- edge inputs ------------------------------------------------------------------------------------------


def kineto_file(path, names, *, device=0, stream=7, start=0, null_ts=()):
    """Write a Kineto trace of kernels `names` (10 us apart) on one device and stream; events at the
    positions `null_ts` have no ``ts``."""
    events = []
    for i, name in enumerate(names):
        e = {"ph": "X", "cat": "kernel", "name": name, "pid": device, "tid": stream, "ts": start + 10 * i, "dur": 5,
             "args": {"device": device, "stream": stream}}  # fmt: skip
        if i in null_ts:
            del e["ts"]
        events.append(e)
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def gpuan_cli(*args):
    return subprocess.run([sys.executable, "-m", "gpuan", *map(str, args)], capture_output=True, text=True)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_a_few_events_are_one_pass(n):
    s = seq_of(list(range(n)))
    (seg,) = detect_sequence(s)
    assert (seg.start, seg.end, seg.periodic, seg.sub_cycles) == (0, n, False, ())
    assert detect_sequence(seq_of([0] * n))[0].end == n


def test_one_kernel_over_and_over_is_a_cycle_of_one():
    s = seq_of([0] * 1000)
    runs = [detect_sequence(s) for _ in range(2)]
    (seg,) = runs[0]
    assert seg.cycle.length == 1 and seg.cycle.starts.tolist() == list(range(1000)) and not seg.sub_cycles
    assert runs[1][0].cycle.starts.tolist() == seg.cycle.starts.tolist()


def test_regions_that_share_an_event_give_instances_that_do_not():
    unit = list(range(12)) + [0]  # the pattern starts and ends with one kernel ...
    ids = unit * 4 + unit[:-1] + unit * 4  # ... and one instance misses its last one
    s, e = periods.periodic_regions(np.array(ids, np.int32), 13, 0)
    assert e[0] > s[1]  # the regions on either side of the gap share an event
    (seg,) = detect_sequence(seq_of(ids))
    starts = seg.cycle.starts
    assert seg.cycle.length == 13 and len(starts) == 8 and (np.diff(starts) >= 13).all()


def test_rotations_merge_only_whole_instances():
    # the rotated run is followed by other kernels: its last instance re-aligned would run into them
    unit = list(range(30))
    rotated = unit[10:] + unit[:10]
    s = seq_of(unit * 5 + list(range(100, 400)) + rotated * 5 + list(range(400, 460)))
    (pat,) = [p for p in distinct_patterns([SequenceCycles(s, detect_sequence(s))]) if p.role == "cycle"]
    assert pat.cycle.repetitions == 9
    assert all((s.ids[st : st + 30] == pat.cycle.template).all() for st in pat.cycle.starts)


def test_merged_runs_hold_only_whole_instances():
    unit = list(range(10))
    rotated = unit[3:] + unit[:3]
    ids = np.array(unit * 3 + rotated * 2 + [50] * 5 + rotated * 2, np.int32)
    # two picks of one pattern, the second rotated and with stray kernels between its instances 2 and 3
    (run,) = _outer_cycles(seq_of(ids), [Pick(10, np.array([0, 10, 20])), Pick(10, np.array([30, 40, 55, 65]))])
    assert run[2].starts.tolist() == [0, 10, 20, 37, 62]


def test_consensus_is_the_most_frequent_name_and_ties_go_to_the_earliest_instance():
    ids = np.array([1, 2, 3, 1, 5, 3, 1, 5, 4, 1, 6, 4, 7, 6, 9], np.int32)
    assert periods.consensus(ids, np.array([0, 3, 6, 9]), 3).tolist() == [1, 5, 3]  # 2 5 5 6: no majority
    assert periods.consensus(ids, np.array([0, 3, 6, 9, 12]), 3).tolist() == [1, 5, 3]
    assert periods.consensus(ids, np.array([9, 12]), 3).tolist() == [1, 6, 4]


def test_comm_names_of_a_vocabulary_with_a_huge_name():
    vocab = np.array(["x" * 200_000] + [f"k{i}" for i in range(200)] + ["ncclKernel_AllReduce", "RCCL_y"], object)
    tracemalloc.start()
    try:
        mask = is_comm_name(vocab)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert mask.tolist() == [False] * 201 + [True, True]
    assert peak < 10 << 20  # not 200 names as wide as the longest


def test_kernels_without_a_start_are_left_out(tmp_path):
    path = kineto_file(tmp_path / "t.json", [f"k{i % 6}" for i in range(60)] + ["late"], null_ts={60})
    (s,) = sequences(gpuan.load(path, use_cache=False))
    assert len(s) == 60 and "late" not in s.vocab
    (seg,) = detect_sequence(s)
    assert seg.cycle.length == 6 and seg.cycle.starts[0] == 0


def test_awkward_names_round_trip_through_the_csv(tmp_path):
    names = ["a,b", 'say "hi"', "two\nlines", "cr\r\nlf", " padded ", "#not meta", "x" * 200_000, "é"]
    ids = np.tile(np.arange(len(names), dtype=np.int32), 4)
    s = seq_of(ids)
    s = Sequence(s.kind, s.rank, s.device, s.group, s.streams, np.array(names, object), s.ids, s.ts, s.dur)
    (seg,) = detect_sequence(s)
    path = tmp_path / "c.csv"
    path.write_text(render(s, seg), encoding="utf-8")
    assert read_cycle_csv(path).rows.kernel_name.tolist() == names
    assert csv.field_size_limit() == 128 << 10  # left as it was


def test_cli_on_a_trace_without_repetition(tmp_path):
    path = kineto_file(tmp_path / "t.json", [f"u{i}" for i in range(50)])
    r = gpuan_cli("cycles", path, "--mode", "llm", "-o", tmp_path / "lm")
    assert r.returncode == 0, r.stderr
    assert "no prefill or decode phase found" in r.stderr and "no files written" in r.stderr
    r = gpuan_cli("cycles", path, "--format", "json", "-o", tmp_path / "all")
    assert r.returncode == 0 and "no repeating pattern found" in r.stderr
    doc = json.loads(r.stdout)
    assert doc["trace"] == str(path) and doc["patterns"] == [] and doc["files"] == []
    assert [seg["periodic"] for seg in doc["sequences"][0]["segments"]] == [False]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]


def test_cli_json_names_the_trace_when_it_writes_files(tmp_path):
    path = kineto_file(tmp_path / "t.json", ["a", "b", "c"] * 10)
    r = gpuan_cli("cycles", path, "--format", "json", "-o", tmp_path / "base")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["trace"] == str(path) and doc["files"] == [str(tmp_path / "base_cycle_1.csv")]


def test_two_ranks_of_two_devices(tmp_path):
    d = tmp_path / "ranks"
    d.mkdir()
    for r in range(2):
        events = []
        for dev in range(2):
            f = kineto_file(tmp_path / "one.json", [f"k{(i + dev) % 6}" for i in range(60)], device=dev, start=r)
            events += json.loads(f.read_text())["traceEvents"]
        (d / f"rank{r}.json").write_text(json.dumps({"traceEvents": events}))
    found = detect(gpuan.load(d, use_cache=False))
    assert [sc.sequence.label for sc in found] == [
        f"rank {r} device {dev} compute (stream 7)" for r in range(2) for dev in range(2)
    ]
    assert all([(s.cycle.length, s.cycle.repetitions) for s in sc.segments] == [(6, 10)] for sc in found)
    runs = [gpuan_cli("cycles", d, "--format", "json").stdout for _ in range(2)]
    assert runs[0] == runs[1] and len(json.loads(runs[0])["patterns"]) == 4


def test_interleaved_first_instance_sets_the_rotation():
    # a step: head 90 91, then 6 layers of 0..9; a side kernel 50 lands inside the first layer of every
    # step, so the periodic run of layers starts mid-way through layer 0; no idle time marks anything
    layer = list(range(10))
    first = layer[:4] + [50] + layer[4:]
    step = [90, 91] + first + layer * 5 + [92]
    s = seq_of(step * 6)
    (seg,) = detect_sequence(s)
    assert seg.cycle.length == len(step)
    (sub,) = seg.sub_cycles
    assert sub.template.tolist() == layer  # begins where a layer begins, not where the run of layers does
    assert sub.offset == 2 + len(first) and sub.per_parent == 5
