"""The engine switch and the interval arithmetic written against it."""

from __future__ import annotations

import numpy as np
import pytest

from gpuan import engine
from gpuan.engine.intervals import busy_time


def brute_force_busy(group, start, end, n_groups):
    out = np.zeros(n_groups, np.int64)
    for g in range(n_groups):
        covered = set()
        for s, e in zip(start[group == g], end[group == g]):
            covered.update(range(s, e))
        out[g] = len(covered)
    return out


@pytest.mark.parametrize("seed", range(5))
def test_busy_time_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = 300
    group = rng.integers(0, 4, n)
    start = rng.integers(0, 2000, n)
    end = start + rng.integers(0, 60, n)
    assert busy_time(group, start, end, 5).tolist() == brute_force_busy(group, start, end, 5).tolist()


def test_busy_time_on_the_gpu_agrees():
    if not engine.gpu_available():
        pytest.skip("no GPU here (CuPy absent or no CUDA device): the GPU twin runs on the GPU machine")
    gpu = engine.select("gpu")
    try:
        rng = np.random.default_rng(1)
        group, start = rng.integers(0, 8, 10_000), rng.integers(0, 10**9, 10_000)
        end = start + rng.integers(0, 10**6, 10_000)
        got = gpu.to_host(busy_time(gpu.asarray(group), gpu.asarray(start), gpu.asarray(end), 8, gpu))
        assert got.tolist() == busy_time(group, start, end, 8).tolist()
    finally:
        engine.select(None)


def test_selection(monkeypatch):
    monkeypatch.setenv("GPUAN_DEVICE", "cpu")
    engine.select(None)
    assert engine.current().name == "cpu"
    assert engine.select("cpu") is engine.CPU
    with pytest.raises(engine.EngineError):
        engine.select("tpu")
    monkeypatch.setenv("GPUAN_DEVICE", "fpga")
    with pytest.raises(engine.EngineError, match="fpga"):
        engine.select(None)
    monkeypatch.delenv("GPUAN_DEVICE")
    engine.select(None)


def test_gpu_request_without_gpu_is_an_error(monkeypatch):
    if engine.gpu_available():
        pytest.skip("a GPU is present")
    monkeypatch.delenv("GPUAN_DEVICE", raising=False)
    try:
        with pytest.raises(engine.EngineError, match="^--device gpu: no GPU here"):
            engine.select("gpu")
    finally:
        engine.select(None)


def test_gpu_request_from_the_environment_names_the_variable(monkeypatch):
    if engine.gpu_available():
        pytest.skip("a GPU is present")
    engine.select(None)
    monkeypatch.setenv("GPUAN_DEVICE", "gpu")
    with pytest.raises(engine.EngineError, match="^GPUAN_DEVICE=gpu: no GPU here"):
        engine.current()
    # the command line wins over the environment, and so does its wording
    try:
        with pytest.raises(engine.EngineError, match="^--device gpu: no GPU here"):
            engine.select("gpu")
    finally:
        monkeypatch.delenv("GPUAN_DEVICE")
        engine.select(None)


def test_columns_come_out_with_null_sentinels(data_dir):
    import gpuan

    t = gpuan.load(data_dir / "kineto" / "a100_triton_example.json.gz", use_cache=False)
    cols = engine.CPU.columns(t.events, ["ts", "correlation", "name"])
    assert cols["ts"].dtype == np.int64 and cols["name"].dtype == np.int32
    corr = t.events["correlation"].to_pylist()
    assert [None if v == np.iinfo(np.int64).min else v for v in cols["correlation"].tolist()] == corr


def test_trace_column_is_the_engine_column_and_to_cudf_needs_rapids(data_dir):
    import importlib.util

    import gpuan
    from gpuan.errors import UsageError

    t = gpuan.load(data_dir / "kineto" / "a100_triton_example.json.gz", use_cache=False)
    assert t.column("ts", engine.CPU).tolist() == engine.CPU.column(t.events["ts"]).tolist()
    if importlib.util.find_spec("cudf") is not None:
        pytest.skip("RAPIDS cuDF is installed here: the GPU tests cover to_cudf")
    with pytest.raises(UsageError, match="cuDF is not installed"):
        t.to_cudf()


def test_trace_to_cudf_on_a_gpu(data_dir):
    import importlib.util

    import gpuan

    if importlib.util.find_spec("cudf") is None or not engine.gpu_available():
        pytest.skip("no RAPIDS cuDF or no GPU here")
    t = gpuan.load(data_dir / "kineto" / "a100_triton_example.json.gz", use_cache=False)
    frame = t.to_cudf()
    assert len(frame) == len(t) and frame["ts"].to_arrow().to_pylist() == t.events["ts"].to_pylist()


@pytest.mark.parametrize("how", ["min", "max"])
def test_extreme_at_through_uint64_equals_numpys_minimum_and_maximum_at(how):
    # CuPy's path (its minimum.at / maximum.at refuse int64), run with numpy against numpy's own ufunc.at
    from gpuan.engine.scatter import extreme_at_unsigned

    rng = np.random.default_rng(11)
    info = np.iinfo(np.int64)
    values = np.concatenate([rng.integers(info.min, info.max, 3000, endpoint=True), [info.min, info.max, -1, 0]])
    idx = rng.integers(0, 50, values.size)
    fill = info.max if how == "min" else info.min
    for vals in (values, values.astype(np.int32)):  # int32 values widen as numpy's ufunc.at widens them
        want, got = np.full(60, fill, np.int64), np.full(60, fill, np.int64)
        (np.minimum if how == "min" else np.maximum).at(want, idx, vals)
        extreme_at_unsigned(np, how, got, idx, vals)
        assert got.dtype == np.int64 and (got == want).all()
