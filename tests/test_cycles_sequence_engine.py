"""The sequences of cycle detection are built on the engine: its array helpers against plain references
(numpy runs the code CuPy runs), the sequences of real traces against a plain-Python rebuild, and, where
there is a GPU, the GPU's sequences against the CPU's."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import gpuan
import gpuan.trace.table
from gpuan.cycles.sequence import (
    _rows,
    _sorted_codes,
    group_codes,
    name_ids,
    running_max,
    running_max_doubling,
    sequences,
)
from gpuan.engine import CPU, gpu_available, resolve
from gpuan.trace.schema import UNNAMED

SIZES = (0, 1, 2, 3, 7, 8, 9, 1000, 4097)


@pytest.mark.parametrize("n", SIZES)
def test_running_max_doubling_is_the_accumulated_max(n):
    rng = np.random.default_rng(n)
    a = rng.integers(-(10**12), 10**12, n)
    expected = np.array([max(a[: i + 1]) for i in range(n)], np.int64)
    assert np.array_equal(running_max_doubling(np, a), expected)
    assert np.array_equal(running_max(np, a), expected)


def _unique_rows(keys):
    uniq, inverse = np.unique(np.stack(keys, axis=1), axis=0, return_inverse=True)
    return inverse.reshape(-1), [tuple(int(x) for x in row) for row in uniq]


@pytest.mark.parametrize("seed", range(6))
def test_group_codes_are_the_rows_unique_tuples_in_order(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    # a constant key (one rank), a few values with nulls (-1), a sparse key (stream ids far apart)
    keys = (
        np.full(n, int(rng.integers(-1, 3)), np.int64),
        rng.integers(-1, 4, n).astype(np.int64),
        rng.choice(np.array([-1, 7, 20, 1 << 20]), n).astype(np.int64),
    )
    codes, tuples = group_codes(CPU, keys)
    want_codes, want_tuples = _unique_rows(keys)
    assert tuples == want_tuples
    assert np.array_equal(codes, want_codes)
    # the path for keys too far apart for a slot per tuple (CuPy has no unique(axis=0)) agrees
    codes, tuples = _sorted_codes(CPU, keys)
    assert tuples == want_tuples
    assert np.array_equal(codes, want_codes)


def test_group_codes_of_keys_far_apart_take_the_sorted_path():
    rng = np.random.default_rng(1)
    keys = tuple(rng.choice(np.array([-1, 1 << 40, 5, 1 << 33]), 500).astype(np.int64) for _ in range(3))
    codes, tuples = group_codes(CPU, keys)
    want_codes, want_tuples = _unique_rows(keys)
    assert tuples == want_tuples
    assert np.array_equal(codes, want_codes)


@pytest.mark.parametrize("seed", range(4))
def test_name_ids_rank_the_names_that_occur(seed):
    rng = np.random.default_rng(seed)
    dictionary = [f"k{int(x)}" for x in rng.permutation(60)]  # dictionary order is not name order
    codes = rng.integers(-1, 30, 2000).astype(np.int32)  # -1: no name; half the dictionary never occurs
    ids, vocab = name_ids(CPU, codes, dictionary)
    names = [UNNAMED if c < 0 else dictionary[c] for c in codes.tolist()]
    assert vocab.tolist() == sorted(set(names))
    assert ids.dtype == np.int32
    assert [vocab[i] for i in ids.tolist()] == names


@pytest.mark.parametrize("layout", ["one run", "two runs", "scattered", "none"])
def test_rows_of_kinds(layout):
    rng = np.random.default_rng(3)
    kind = {
        "one run": np.repeat(np.array([0, 2, 1], np.int32), [50, 400, 30]),
        "two runs": np.repeat(np.array([2, 0, 2, 1], np.int32), [50, 400, 30, 9]),
        "scattered": rng.integers(0, 4, 500).astype(np.int32),
        "none": np.zeros(100, np.int32),
    }[layout]
    valid = rng.random(kind.shape[0]) < 0.9
    for codes in ([2], [2, 3]):
        for keep in (None, valid):
            want = np.flatnonzero(np.isin(kind, codes) & (True if keep is None else keep))
            rows = _rows(np, kind, codes, keep)
            if want.size == 0:
                assert rows is None
            else:
                assert np.array_equal(np.arange(kind.shape[0])[rows], want)


def _plain_stream_sequences(trace, kind="kernel"):
    """Per (rank, device, stream), the names of the `kind` events in time order (ties: longer first, then
    name), rebuilt row by row in Python."""
    table = trace.of_kind(kind).to_pylist()
    groups = {}
    for e in table:
        if e["ts"] is None:
            continue
        key = tuple(-1 if e[k] is None else e[k] for k in ("rank", "device", "stream"))
        groups.setdefault(key, []).append((e["ts"], -max(e["dur"] or 0, 0), e["name"] or UNNAMED))
    return {key: [(ts, -negdur, name) for ts, negdur, name in sorted(rows)] for key, rows in groups.items()}


@pytest.mark.parametrize(
    "name", ["a100_ddp2_rank0_nccl.json.gz", "a100_event_sync_multistream.json.gz", "mi300x_qwen05b_inference.json.gz"]
)
def test_stream_sequences_of_real_traces_are_their_events_in_time_order(data_dir, name):
    trace = gpuan.load(data_dir / "kineto" / name)
    plain = _plain_stream_sequences(trace)
    found = sequences(trace, sequences="stream", engine=CPU)
    assert len(found) == len(plain)
    for seq in found:
        key = (-1 if seq.rank is None else seq.rank, -1 if seq.device is None else seq.device, seq.streams[0])
        events = [(int(t), int(d), str(seq.vocab[i])) for t, d, i in zip(seq.ts, seq.dur, seq.ids)]
        assert events == plain[key], seq.label


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert (x.kind, x.rank, x.device, x.group, x.streams) == (y.kind, y.rank, y.device, y.group, y.streams)
        for field in ("vocab", "ids", "ts", "dur", "stream", "early"):
            u, v = getattr(x, field), getattr(y, field)
            assert (u is None) == (v is None), field
            if u is not None:
                assert type(u) is np.ndarray and u.dtype == v.dtype and np.array_equal(u, v), field


@pytest.mark.parametrize(
    "name,kind",
    [("v100_rank0_ns_resolution.json.gz", "kernel"), ("a100_ddp2_rank0_nccl.json.gz", "kernel"),
     ("cpu_tiny_lm_prefill_decode.json.gz", "cpu_op")],
)  # fmt: skip
def test_gpu_sequences_equal_the_cpu_sequences(data_dir, name, kind):
    if not gpu_available():
        pytest.skip("no GPU here (CuPy absent or no CUDA device); the engine's numpy path is tested above")
    gpu = resolve("gpu")
    path = data_dir / "kineto" / name
    resident = gpuan.load(path, device="gpu")  # columns already on the GPU: engine.columns hands them over
    on_host = gpuan.load(path)
    for mode in ("group", "stream", "merged"):
        for ops in ("top", "leaf", "all") if kind == "cpu_op" else ("top",):
            on_gpu = sequences(resident, kind, sequences=mode, ops=ops, engine=gpu)
            _same(on_gpu, sequences(on_host, kind, sequences=mode, ops=ops, engine=CPU))
            for seq in on_gpu:
                assert np.array_equal(gpu.to_host(seq.device_ids), seq.ids)


def _own_dictionaries(table: pa.Table) -> pa.Table:
    """`table` with every dictionary column encoded afresh (its words in order of first appearance)."""
    columns = []
    for name in table.column_names:
        col = table[name].combine_chunks()
        if pa.types.is_dictionary(col.type):
            col = col.dictionary_decode().dictionary_encode().cast(col.type)
        columns.append(col)
    return pa.table(columns, schema=table.schema)


def test_chunks_with_own_dictionaries_and_events_without_start(data_dir):
    # NCCL streams, and kernels launched before the trace window opened
    trace = gpuan.load(data_dir / "kineto" / "mi300x_resnet_ddp_act_checkpoint.json.gz")
    events = trace.events
    kernel = pc.equal(events["kind"].combine_chunks().dictionary_decode(), "kernel").to_numpy(zero_copy_only=False)
    unstarted = kernel & (np.arange(events.num_rows) % 11 == 0)
    nulled = events.set_column(
        events.column_names.index("ts"),
        "ts",
        pc.if_else(pa.array(unstarted), pa.scalar(None, pa.int64()), events["ts"]),
    )
    # three chunks, each with its own dictionaries (a trace concatenated from several files or batches)
    cuts = [0, 40, events.num_rows // 2, events.num_rows]  # the first holds few of the names
    chunked = pa.concat_tables([_own_dictionaries(nulled.slice(a, b - a)) for a, b in zip(cuts, cuts[1:])])
    assert chunked["name"].num_chunks == 3
    assert not chunked["name"].chunk(0).dictionary.equals(chunked["name"].chunk(1).dictionary)
    # the events without a start are left out, as if the trace had never held them
    without = gpuan.trace.table.Trace(events.filter(pa.array(~unstarted)))
    for mode in ("group", "stream"):
        found = sequences(gpuan.trace.table.Trace(chunked), sequences=mode, engine=CPU)
        assert any(seq.early is not None for seq in found)
        assert mode == "stream" or any(seq.group == "comm" for seq in found)
        _same(found, sequences(without, sequences=mode, engine=CPU))
