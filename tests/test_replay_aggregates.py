"""The replay's totals on the engine, on small hand-made collectives: the traffic of each algorithm per
(src, dst) pair summed over collectives, and stragglers that only caused waits or only sent late."""

from __future__ import annotations

import numpy as np
import pytest

from gpuan.engine.scatter import extreme_at_unsigned
from gpuan.replay.aggregates import pair_traffic, stragglers
from gpuan.replay.collectives import match
from gpuan.replay.comms import CALL, OP
from gpuan.replay.p2p import MESSAGE
from gpuan.replay.records import Records, lexsort_by_argsorts, reduceat_by_at


def _calls(*collectives: tuple[str, list[int], list[int], int]) -> np.ndarray:
    """(op, ranks, bytes per member, root) per collective, each its own number in one group."""
    rows = []
    for seq, (op, ranks, nbytes, root) in enumerate(collectives):
        for rank, size in zip(ranks, nbytes):
            rows.append((rank, 0, OP[op], len(ranks), root, 9, seq, 0, size, 10 * seq + rank, 10 * seq + 5, 0, seq))
    return np.array(rows, CALL)


def _traffic(calls: np.ndarray) -> dict[tuple[int, int], tuple[float, int]]:
    t = pair_traffic(Records.of(calls), lambda pg: pg * 0)
    return {(s, d): (b, m) for s, d, b, m in zip(*(t[k].tolist() for k in ("src", "dst", "bytes", "messages")))}


def test_ring_all_to_all_and_rooted_traffic_add_up_per_pair():
    calls = _calls(
        ("all_reduce", [2, 0, 1], [9, 9, 9], -1),  # a ring 0 → 1 → 2 → 0, each step 9 x 2/3 x 2 = 12
        ("all_gather", [0, 1, 2], [9, 9, 6], -1),  # the largest message counts: 9 x 2/3 = 6 per step
        ("all_to_all", [0, 1], [4, 10], -1),  # each member's message split between the two
        ("broadcast", [0, 1, 2], [5, 5, 5], 2),  # from the root to each
        ("reduce", [0, 1, 2], [3, 3, 3], -1),  # no root known: the lowest rank receives
        ("barrier", [0, 1, 2], [0, 0, 0], -1),  # moves nothing
        ("all_reduce", [1], [100], -1),  # one member: nothing to move
    )
    # the ring: 12 on each of 0→1, 1→2, 2→0; the all-gather: 6 on the same; the all-to-all: 2 on 0→1, 5 on
    # 1→0; the broadcast from 2: 5 on 2→0 and on 2→1; the reduce to 0: 3 on 1→0 and on 2→0
    assert _traffic(calls) == {
        (0, 1): (12 + 6 + 2, 3), (1, 2): (12 + 6, 2), (2, 0): (12 + 6 + 5 + 3, 4), (1, 0): (5 + 3, 2), (2, 1): (5, 1),
    }  # fmt: skip


def test_no_transfers_is_an_empty_table():
    assert _traffic(_calls(("barrier", [0, 1], [0, 0], -1))) == {}
    assert _traffic(np.zeros(0, CALL)) == {}


def test_stragglers_count_collectives_late_arrivals_and_late_sends():
    calls = _calls(("all_reduce", [0, 1, 2], [8, 8, 8], -1), ("all_reduce", [0, 1, 2], [8, 8, 8], -1))
    calls["enter"] = [0, 30, 10, 100, 100, 150]  # rank 1 last to the first, rank 2 to the second
    calls["leave"] = 200
    calls["step"] = [3, 3, 3, 4, 4, 4]
    waits, collectives = match(calls)
    messages = Records.zeros(2, MESSAGE)
    messages["src"], messages["dst"], messages["step"], messages["late_sender"] = [1, 0], [0, 2], [5, 5], [7, 0]
    t = stragglers(Records.of(calls), waits, collectives, messages)
    rows = list(zip(*(t[k].tolist() for k in ("step", "rank", "collectives", "caused_wait", "caused_p2p_wait"))))
    # caused: rank 1 made 0 and 2 wait 30 + 20 in step 3; rank 2 made 0 and 1 wait 50 + 50 in step 4
    assert rows == [(4, 2, 1, 100, 0), (3, 1, 1, 50, 0), (5, 1, 0, 0, 7), (3, 0, 1, 0, 0), (3, 2, 1, 0, 0),
                    (4, 0, 1, 0, 0), (4, 1, 1, 0, 0)]  # fmt: skip
    assert t["mean_delay"].tolist() == [50.0, 30.0, 0.0, 0.0, 10.0, 0.0, 0.0]
    assert t["late"].tolist() == [1, 1, 0, 0, 0, 0, 0] and t["max_delay"].tolist() == [50, 30, 0, 0, 10, 0, 0]


@pytest.mark.parametrize("op", ["minimum", "maximum"])
@pytest.mark.parametrize("dtype", [np.int16, np.int32, np.int64])
def test_the_run_wise_min_and_max_cupy_takes_equal_numpys_reduceat(op, dtype):
    rng = np.random.default_rng(7)
    info = np.iinfo(dtype)
    values = rng.integers(info.min, info.max, 1000, dtype=dtype, endpoint=True)
    starts = np.concatenate(([0], np.sort(rng.choice(np.arange(1, 1000), 120, replace=False))))
    # CuPy's path: the minimum / maximum through uint64 (its ufunc.at refuses int64)
    got = reduceat_by_at(np, op, values, starts, at=extreme_at_unsigned)
    assert got.dtype == dtype and (got == getattr(np, op).reduceat(values, starts)).all()
    one_run = reduceat_by_at(np, op, values, np.zeros(1, np.int64), at=extreme_at_unsigned)
    assert one_run.tolist() == [getattr(np, op).reduce(values)]


def test_the_lexsort_cupy_runs_equals_numpys():
    rng = np.random.default_rng(3)
    keys = (rng.integers(0, 5, 2000), rng.normal(size=2000).round(1), rng.integers(-3, 3, 2000).astype(np.int32))
    assert (lexsort_by_argsorts(np, keys) == np.lexsort(keys)).all()
    assert lexsort_by_argsorts(np, (np.zeros(0, np.int64),)).size == 0
