"""The synthetic LLM-inference kernel traces: table invariants and a ground truth that holds."""

from __future__ import annotations

import numpy as np
import pytest

from gpuan.synth.cycles import (
    DECODE_LAYER,
    HEAD_AND_SAMPLING,
    MAIN_STREAM,
    PREFILL_LAYER,
    RMS_NORM,
    SIDE_STREAM,
    STEP_IDLE_NS,
    STRAY_FILL,
    llm_kernel_trace,
)
from gpuan.trace.schema import SCHEMA

N = 20_000
LAYERS = 4


@pytest.fixture(scope="module")
def noisy():
    """A 20k-kernel trace of 4 layers in which a fifth of the decode steps hold a stray kernel."""
    return llm_kernel_trace(N, layers=LAYERS, seed=7, noise=0.2)


def _names(trace) -> np.ndarray:
    return np.asarray(trace.events["name"].combine_chunks().dictionary_decode().to_pylist(), dtype=object)


def _stream(trace, stream: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(names, ts, dur) of one stream's kernels, in table order."""
    rows = np.flatnonzero(trace.column("stream") == stream)
    return _names(trace)[rows], trace.column("ts")[rows], trace.column("dur")[rows]


def test_rows_and_columns(noisy) -> None:
    trace, truth = noisy
    ev = trace.events
    assert ev.schema == SCHEMA
    assert len(trace) == truth["kernels"] >= N
    # whole decode steps until N is reached (strays come on top): less than one step more
    without_strays = len(trace) - truth["noise"]["positions"].shape[0]
    assert N <= without_strays < N + truth["merged"]["step_length"]
    assert truth["per_stream"] == {MAIN_STREAM: truth["decode"]["end"], SIDE_STREAM: 2 * truth["decode"]["steps"]}
    assert sum(truth["per_stream"].values()) == len(trace)
    assert set(ev["kind"].combine_chunks().dictionary_decode().to_pylist()) == {"kernel"}
    assert set(ev["cat"].combine_chunks().dictionary_decode().to_pylist()) == {"kernel"}
    assert set(trace.column("device").tolist()) == {0} and set(trace.column("pid").tolist()) == {0}
    assert np.array_equal(trace.column("tid"), trace.column("stream"))
    assert np.all(np.diff(trace.column("correlation")) > 0)
    assert ev["ts"].null_count == ev["dur"].null_count == ev["name"].null_count == 0
    assert truth["vocabulary"] == len(set(_names(trace)))


def test_time_order(noisy) -> None:
    trace, _ = noisy
    ts, dur = trace.column("ts"), trace.column("dur")
    assert np.all(np.diff(ts) > 0)  # rows in time order, no ties between streams
    assert np.all(dur > 0)
    for stream in (MAIN_STREAM, SIDE_STREAM):
        _, s_ts, s_dur = _stream(trace, stream)
        assert np.all(s_ts[1:] >= s_ts[:-1] + s_dur[:-1])  # a stream runs one kernel at a time


def test_prefill_and_layers(noisy) -> None:
    trace, truth = noisy
    names, _, _ = _stream(trace, MAIN_STREAM)
    pre = truth["prefill"]
    assert pre["end"] == truth["decode"]["start"] == 1 + LAYERS * len(PREFILL_LAYER) + len(HEAD_AND_SAMPLING)
    layer = [n for n, _ in PREFILL_LAYER]
    for k in range(LAYERS):
        a = pre["layer_start"] + k * pre["layer_length"]
        assert names[a : a + pre["layer_length"]].tolist() == layer
    shared = set(layer) & {n for n, _ in DECODE_LAYER}
    assert RMS_NORM in shared and len(shared) < len(set(layer))  # norms and adds shared, GEMMs and attention not


def test_decode_steps_and_strays(noisy) -> None:
    trace, truth = noisy
    names, ts, dur = _stream(trace, MAIN_STREAM)
    dec, noise = truth["decode"], truth["noise"]
    starts, L = dec["step_starts"], dec["step_length"]
    assert L == 1 + LAYERS * len(DECODE_LAYER) + len(HEAD_AND_SAMPLING)
    assert starts.shape[0] == dec["steps"] and starts[0] == dec["start"]
    assert noise["positions"].shape[0] == round(0.2 * dec["steps"]) > 0
    assert np.all(names[noise["positions"]] == STRAY_FILL)
    assert np.count_nonzero(names == STRAY_FILL) == noise["positions"].shape[0]
    # a stray sits strictly inside its step, which is one kernel longer
    assert np.array_equal(np.searchsorted(starts, noise["positions"], side="right") - 1, noise["steps"])
    assert not np.isin(noise["positions"], starts).any()
    lengths = np.diff(np.append(starts, dec["end"]))
    assert np.array_equal(lengths - L, np.isin(np.arange(dec["steps"]), noise["steps"]).astype(int))
    template = names[starts[0] : starts[0] + L]
    layer = [n for n, _ in DECODE_LAYER]
    for k in range(LAYERS):
        a = dec["layer_offset"] + k * dec["layer_length"]
        assert template[a : a + dec["layer_length"]].tolist() == layer
    clean = names[names != STRAY_FILL][dec["start"] :]
    assert np.array_equal(clean, np.tile(template, dec["steps"]))
    # each step begins after the host's idle gap; inside a step kernels follow within microseconds
    idle = ts[1:] - (ts[:-1] + dur[:-1])
    gaps_before_steps = idle[starts - 1]
    # (starts are rounded down to even ns: a gap may differ from the drawn one by 1 ns)
    assert gaps_before_steps.min() >= STEP_IDLE_NS[0] - 1 and gaps_before_steps.max() <= STEP_IDLE_NS[1] + 1
    inside = np.delete(idle[dec["start"] :], starts[1:] - 1 - dec["start"])
    assert inside.max() < STEP_IDLE_NS[0]


def test_merged_positions(noisy) -> None:
    trace, truth = noisy
    m = truth["merged"]
    names, stream = _names(trace), trace.column("stream")
    assert m["step_length"] == truth["decode"]["step_length"] + 2
    assert np.all(stream[m["step_starts"]] == MAIN_STREAM)
    assert np.all(names[m["noise_positions"]] == STRAY_FILL)
    assert m["decode_start"] == truth["decode"]["start"]  # no side kernels during the prefill
    bounds = np.append(m["step_starts"], len(trace))
    per_step = np.diff(bounds) - np.isin(np.arange(truth["decode"]["steps"]), truth["noise"]["steps"])
    assert np.all(per_step == m["step_length"])  # both side kernels fall inside their own step


def test_options_and_determinism() -> None:
    a, ta = llm_kernel_trace(5_000, layers=2, seed=1, noise=0.0, second_stream=False)
    b, _ = llm_kernel_trace(5_000, layers=2, seed=1, noise=0.0, second_stream=False)
    c, _ = llm_kernel_trace(5_000, layers=2, seed=2, noise=0.0, second_stream=False)
    assert a.events.equals(b.events)
    assert not np.array_equal(a.column("ts"), c.column("ts"))
    assert ta["per_stream"] == {MAIN_STREAM: len(a)} and ta["noise"]["positions"].size == 0
    assert ta["merged"]["step_length"] == ta["decode"]["step_length"]
    assert set(a.column("stream").tolist()) == {MAIN_STREAM}
    with pytest.raises(ValueError):
        llm_kernel_trace(0)
    with pytest.raises(ValueError):
        llm_kernel_trace(100, noise=2.0)
