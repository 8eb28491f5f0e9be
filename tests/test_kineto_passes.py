"""The Kineto build's compiled passes against numpy doing the same: the row order against the table's
`kind_time_order` (which the other readers use), with each file row's place in it; the category codes and
kinds against numpy's gathers; B/E pairs against a walk over the events in Python."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import kineto_files

from gpuan.trace.kinds import KIND_CODE
from gpuan.trace.kineto.categories import codes_and_kinds
from gpuan.trace.kineto.events import _settle_events
from gpuan.trace.kineto.order import table_order
from gpuan.trace.kineto.reader import scan_file
from gpuan.trace.kineto.spans import pair_begin_end
from gpuan.trace.table import NULL64, kind_time_order


def reference(kind: np.ndarray, ts: np.ndarray, keep: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    order = kind_time_order(kind, ts, keep)
    new_row = np.full(kind.size, -1, np.int64)
    new_row[order] = np.arange(order.size)
    return order, new_row


def assert_same(kind: np.ndarray, ts: np.ndarray, keep: np.ndarray | None) -> None:
    order, new_row = table_order(kind, ts, keep)
    want_order, want_new_row = reference(kind, ts, keep)
    np.testing.assert_array_equal(order, want_order)
    np.testing.assert_array_equal(new_row, want_new_row)


@pytest.mark.parametrize("seed", range(6))
def test_generated_columns(seed):
    """Kinds interleaved, times with ties, missing times and kinds out of order, some rows dropped."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 5000))
    kind = rng.choice(np.array([-128, -1, 0, 3, 5, 10, 127]), n).astype(np.int8)  # both ends of int8
    ts = np.sort(rng.integers(0, n // 3 + 2, n)).astype(np.int64)  # ties
    if seed % 2:
        swap = rng.integers(0, n, n // 10)
        ts[swap] = rng.integers(0, n, swap.size)  # some kinds out of order
    ts[rng.random(n) < 0.05] = NULL64
    keep = None if seed % 3 == 0 else rng.random(n) < 0.9
    assert_same(kind, ts, keep)


def test_kind_codes_must_be_int8():
    with pytest.raises(TypeError, match="int8"):
        table_order(np.zeros(3, np.int16), np.zeros(3, np.int64))


def test_edges():
    """No rows; every row dropped; one kind in time order; one kind reversed, with missing times."""
    empty = np.empty(0, np.int64)
    assert_same(np.empty(0, np.int8), empty, None)
    kind = np.array([3, 1, 3, 1], np.int8)
    ts = np.array([4, 3, 2, 1], np.int64)
    assert_same(kind, ts, np.zeros(4, bool))
    assert_same(np.zeros(5, np.int8), np.arange(5, dtype=np.int64), None)
    assert_same(np.zeros(5, np.int8), np.array([5, NULL64, 3, NULL64, 1], np.int64), None)
    order, new_row = table_order(kind, ts, np.array([True, False, True, True]))
    assert order.tolist() == [3, 2, 0] and new_row.tolist() == [2, -1, 1, 0]


@pytest.mark.parametrize("name", kineto_files() or ["<no data>"])
def test_real_traces(name, data_dir):
    """The columns of every real trace, as the build settles them (B/E pairs dropped where there are any)."""
    path = data_dir / "kineto" / name
    raw = scan_file(str(path), threads=1)
    events = _settle_events(raw, str(path), {})
    assert_same(events.kind, events.ts, events.keep)


@pytest.mark.parametrize("with_steps", [False, True])
def test_codes_and_kinds_as_numpy_gathers(with_steps):
    """Null category codes (-1) read the maps' last slots, null names the steps' last slot; with steps, only
    operators named as steps become annotations."""
    rng = np.random.default_rng(3)
    strings, n = 50, 20_000
    cat_ids = rng.integers(-1, strings, n).astype(np.int32)
    name_ids = rng.integers(-1, strings, n).astype(np.int32)
    cat_map = np.append(rng.integers(-1, 6, strings), -1).astype(np.int32)
    six = [KIND_CODE[k] for k in ("cpu_op", "kernel", "runtime", "annotation", "cpu_op", "memcpy")]
    kind_map = np.array([*six, KIND_CODE["other"]], np.int8)
    steps = np.zeros(strings + 1, bool)
    steps[rng.integers(0, strings, 5)] = True
    steps[-1] = True  # the null names' slot: set here (never in the build) to see that it is read as numpy reads it
    cats, kinds = codes_and_kinds(cat_ids, cat_map, kind_map, (name_ids, steps) if with_steps else None)
    want_kinds = kind_map[cat_map[cat_ids]]
    ops = want_kinds == KIND_CODE["cpu_op"]
    if with_steps:
        want_kinds = np.where(ops & steps[name_ids], KIND_CODE["annotation"], want_kinds)
    np.testing.assert_array_equal(cats, cat_map[cat_ids])
    np.testing.assert_array_equal(kinds, want_kinds)
    assert (cat_ids == -1).any() and (ops & steps[name_ids] & (name_ids == -1)).any() and (ops & ~steps[name_ids]).any()


def spans_walked(begins, ends, ts, pid, tid) -> tuple[list[int], list[int]]:
    """B/E pairs as the rule says, one event at a time: on each pid and tid, in time order (file order breaking
    ties), an E closes the latest open B."""
    end_rows = set(ends.tolist())
    events = sorted((int(pid[r]), int(tid[r]), int(ts[r]), int(r), int(r) in end_rows) for r in [*begins, *ends])
    open_: dict[tuple[int, int], list[int]] = {}
    closed = {}
    for p, t, _, r, is_end in events:
        stack = open_.setdefault((p, t), [])
        if not is_end:
            stack.append(r)
        elif stack:
            b = stack.pop()
            closed[b] = int(ts[r] - ts[b])
    return sorted(closed), [closed[b] for b in sorted(closed)]


@pytest.mark.parametrize("seed", range(8))
def test_begin_end_pairs(seed):
    """Nested and interleaved spans on a few pids and tids (negative ones: string pids' synthetic ids), times
    with ties, Es with no open B, Bs never closed, file order unlike time order."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    ts = rng.integers(0, n // 4 + 2, n).astype(np.int64)
    pid = rng.choice(np.array([-(1 << 32), 0, 7]), n).astype(np.int64)
    tid = rng.integers(-2, 3, n).astype(np.int64)
    phase = rng.choice(np.array([0, 1, 2]), n, p=[0.45, 0.45, 0.1])  # B, E, or another event
    begins, ends = np.flatnonzero(phase == 0), np.flatnonzero(phase == 1)
    rows, durations = pair_begin_end(begins, ends, ts, pid, tid)
    want_rows, want_durations = spans_walked(begins, ends, ts, pid, tid)
    assert rows.tolist() == want_rows and durations.tolist() == want_durations
    assert len(want_rows) > 0 or min(begins.size, ends.size) == 0
