"""Steps whose streams interleave differently every time, on generated multi-stream sequences whose
true steps are known: multiset regions, per-stream cuts, the trace-window rule and order variation."""

from __future__ import annotations

import numpy as np
import pytest

from gpuan.cycles import interleave, periods
from gpuan.cycles.detect import detect_sequence
from gpuan.cycles.patterns import Pattern
from gpuan.cycles.sequence import Sequence


def brute_bag_regions(keys, vocab, L, allowed):
    """Independent reference: each window pair's multiset difference counted from scratch."""
    good = []
    for w in range(len(keys) - 2 * L + 1):
        a = np.bincount(keys[w : w + L], minlength=vocab)
        b = np.bincount(keys[w + L : w + 2 * L], minlength=vocab)
        good.append(np.abs(a - b).sum() // 2 <= allowed)
    out, w = [], 0
    while w < len(good):
        if good[w]:
            a = w
            while w + 1 < len(good) and good[w + 1]:
                w += 1
            out.append((a, w + 2 * L))
        w += 1
    return out


@pytest.mark.parametrize("seed", range(6))
def test_bag_regions_match_brute_force(seed):
    rng = np.random.default_rng(seed)
    for _ in range(40):
        vocab, L = int(rng.integers(2, 8)), int(rng.integers(1, 12))
        base = rng.integers(0, vocab, L)
        parts = []
        for _ in range(int(rng.integers(1, 8))):
            parts.append(rng.permutation(base))
            if rng.random() < 0.3:
                parts[-1][rng.integers(0, L)] = rng.integers(0, vocab)
            if rng.random() < 0.2:
                parts.append(rng.integers(0, vocab, int(rng.integers(1, 5))))
        keys = np.concatenate(parts).astype(np.int32)
        allowed = int(rng.integers(0, 2))
        starts, ends, _ = periods.bag_regions(keys, vocab, L, allowed)
        assert list(zip(starts.tolist(), ends.tolist())) == brute_bag_regions(keys, vocab, L, allowed)
        for a, b in [(0, L), (1, L + 2)]:
            if b + L <= len(keys):
                diff = np.bincount(keys[a : a + L], minlength=vocab) - np.bincount(keys[b : b + L], minlength=vocab)
                assert periods.bag_mismatch(keys, vocab, a, b, L) == np.abs(diff).sum() // 2


def two_stream_steps(steps=8, main=60, side=9, seed=0, early=0, cross=2):
    """A training loop on two streams: each step launches `main` kernels on stream 7 (always in one
    order) and `side` on stream 14, spread over the step, each of which runs a random few main kernels
    earlier or later than in the step before; the first `cross` side kernels of a step run under the
    previous step's tail. The first `early` main kernels were launched before the trace window opened
    (the tail of a step before it).

    Returns the time-ordered sequence and the true step of each event (-1: the early tail)."""
    rng = np.random.default_rng(seed)
    ts, stream, ids, step = [], [], [], []
    t = 0.0
    main_ids, side_ids = np.arange(main), 100 + np.arange(side)
    nominal = (np.arange(side) + 0.5) * main * 10.0 / max(side, 1)
    for k in range(-1, steps):
        span = main * 10.0
        first = main - early if k == -1 else 0
        if k == -1 and early == 0:
            continue
        for j in range(first, main):
            ts.append(t + j * 10.0)
            stream.append(7)
            ids.append(main_ids[j])
            step.append(k)
        if k >= 0:
            when = np.sort(nominal + rng.uniform(-35, 35, side))
            when[:cross] = -rng.uniform(5, 40, cross)  # run under the previous step's tail
            for j in range(side):
                ts.append(t + when[j])
                stream.append(14)
                ids.append(side_ids[j])
                step.append(k)
        t += span + 50.0
    # a stream runs its kernels in launch order: a side kernel never starts before the one launched before it
    side_rows = np.flatnonzero(np.array(stream) == 14)
    ts = np.array(ts)
    ts[side_rows] = np.maximum.accumulate(ts[side_rows]) + np.arange(side_rows.size) * 1e-3
    order = np.argsort(ts, kind="stable")
    ts = (ts[order] * 1000).astype(np.int64)
    ids = np.array(ids, np.int32)[order]
    vocab = np.array([f"k{i:03d}" for i in range(int(ids.max()) + 1)], dtype=object)
    stream = np.array(stream, np.int64)[order]
    step = np.array(step)[order]
    early_mask = step == -1 if early else None
    seq = Sequence("kernel", 0, 0, "compute", (7, 14), vocab, ids, ts, np.full(len(ids), 5000, np.int64),
                   stream, early_mask)  # fmt: skip
    return seq, step


@pytest.mark.parametrize("seed", range(5))
def test_interleaved_step_is_one_cycle_of_exactly_its_kernels(seed):
    seq, step = two_stream_steps(seed=seed, early=23)
    periodic = [s for s in detect_sequence(seq) if s.periodic]
    assert len(periodic) == 1
    cyc = periodic[0].cycle
    assert (cyc.length, cyc.repetitions) == (69, 8)
    assert not cyc.ordered
    # each instance holds exactly one step's kernels, in step order, and every step is an instance
    assert [sorted(set(step[row].tolist())) for row in cyc.positions()] == [[k] for k in range(8)]
    assert all(len(row) == (step == k).sum() for k, row in enumerate(cyc.positions()))
    p = Pattern(seq, 0, "cycle", cyc)
    assert p.streams() == {7: 60, 14: 9}
    stats = p.stats()
    # a slot is one kernel of one stream: every instance has its own kernel there
    assert (stats["count"] == 8).all()
    assert sorted(stats.kernel_name) == sorted(seq.vocab[np.unique(seq.ids)].tolist())


def test_a_side_stream_without_a_tail_still_lines_up():
    # the main stream's tail from before the window is 23 kernels; the side stream has none
    seq, step = two_stream_steps(seed=7, early=23, cross=3)
    (cyc,) = [s.cycle for s in detect_sequence(seq) if s.periodic]
    assert [set(step[row].tolist()) for row in cyc.positions()] == [{k} for k in range(8)]


def test_order_variation_is_measured():
    seq, _ = two_stream_steps(seed=1)
    (cyc,) = [s.cycle for s in detect_sequence(seq) if s.periodic]
    moved = Pattern(seq, 0, "cycle", cyc).order_moved()
    assert moved.shape == (cyc.repetitions,) and 0 < moved.max() <= 9 / 69
    # one instance in template order, one with its first and last slots swapped
    members = np.array([[0, 1, 2, 3, 4], [14, 11, 12, 13, 10]])
    assert interleave.moved_share(members).tolist() == [0.0, 0.4]


def test_a_stream_whose_own_order_changes_is_cut_by_name():
    # two host threads launch onto one stream: the same 12 kernels in another order every step
    rng = np.random.default_rng(2)
    ids = np.concatenate([rng.permutation(12) for _ in range(6)]).astype(np.int32)
    stream = np.where(ids < 2, 3, 7).astype(np.int64)  # two of the kernels go to a second stream
    vocab = np.array([f"k{i:03d}" for i in range(12)], dtype=object)
    ts = np.arange(len(ids), dtype=np.int64) * 10
    seq = Sequence("kernel", 0, 0, "compute", (3, 7), vocab, ids, ts, np.full(len(ids), 5, np.int64), stream)
    members = interleave.stream_members(ids, 12, stream, None, np.arange(0, 72, 12), 12)
    assert members is not None and members.shape == (6, 12)
    # every slot holds one name in every instance, and every instance is its step
    assert (ids[members] == ids[members[0]]).all()
    assert [set((row // 12).tolist()) for row in members] == [{k} for k in range(6)]
    assert seq.multi_stream


def test_ordered_steps_stay_ordered():
    # two streams whose kernels keep one interleaving: the ordered match wins, as before
    seq, _ = two_stream_steps(seed=3, side=0, cross=0)
    seq = Sequence(seq.kind, 0, 0, "compute", (7, 14), seq.vocab, seq.ids, seq.ts, seq.dur, seq.stream)
    (cyc,) = [s.cycle for s in detect_sequence(seq) if s.periodic]
    assert cyc.ordered and (cyc.length, cyc.repetitions) == (60, 8)
