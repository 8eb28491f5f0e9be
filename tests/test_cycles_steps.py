"""Every real trace with ``ProfilerStep#N`` annotations: `gpuan cycles` recovers the training steps without
reading them.

The truth is counted here from the JSON itself (gzip + json): the CPU step ranges, each GPU kernel's
launch call (by correlation id), and so the step each kernel belongs to. gpuan's sequences are matched
to those kernels stream by stream (a stream runs its kernels in time order).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

import gpuan
from gpuan.cycles import detect
from gpuan.cycles.patterns import Pattern

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "kineto"
LAUNCH_CATEGORIES = {"cuda_runtime", "runtime", "hip_runtime", "cuda_driver"}


def _events(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def _has_steps(path: Path) -> bool:
    with gzip.open(path, "rb") as f:
        return b"ProfilerStep#" in f.read()


def step_traces() -> list[str]:
    """The Kineto traces of ../shared/data that hold ProfilerStep annotations (relative names)."""
    if not DATA.is_dir():
        return []
    return sorted(str(p.relative_to(DATA)) for p in DATA.rglob("*.json.gz") if _has_steps(p))


def cpu_steps(events: list[dict]) -> list[tuple[float, float, object]]:
    """(start, end, thread) of the ProfilerStep ranges the host recorded, in time order (not the copies
    some ROCm traces also put on the GPU timeline)."""
    steps = [
        (float(e["ts"]), float(e["ts"]) + float(e["dur"]), e.get("tid"))
        for e in events
        if e.get("ph") == "X"
        and str(e.get("name", "")).startswith("ProfilerStep#")
        and str(e.get("cat", "")).lower() in ("user_annotation", "operator", "cpu_op")
    ]
    return sorted(steps)


def kernel_steps(events: list[dict], steps) -> dict[int, list[tuple[float, int]]]:
    """Per stream: (start, step index) of each kernel in time order; the step is the one whose range
    holds the kernel's launch call, -1 for none (launched before, between or after the steps)."""
    launch = {}
    for e in events:
        if e.get("ph") == "X" and str(e.get("cat", "")).lower() in LAUNCH_CATEGORIES:
            corr = (e.get("args") or {}).get("correlation")
            if corr is not None:
                launch[corr] = float(e["ts"])
    starts = np.array([s[0] for s in steps])
    out: dict[int, list[tuple[float, int]]] = {}
    for e in events:
        if e.get("ph") != "X" or str(e.get("cat", "")).lower() != "kernel":
            continue
        t = launch.get((e.get("args") or {}).get("correlation"))
        k = -1
        if t is not None:
            i = int(np.searchsorted(starts, t, side="right")) - 1
            k = i if i >= 0 and t <= steps[i][1] else -1
        tid = e["tid"]
        stream = int(tid.split()[-1]) if isinstance(tid, str) else int(tid)
        out.setdefault(stream, []).append((float(e["ts"]), k))
    return {s: sorted(v) for s, v in out.items()}


def step_of_events(seq, per_stream) -> np.ndarray:
    """The step of each event of gpuan's sequence, from the test's own count, stream by stream."""
    out = np.full(len(seq), -2)
    for s in seq.streams:
        at = np.flatnonzero(seq.event_streams == s)
        truth = per_stream[s]
        assert len(at) == len(truth), f"stream {s}: gpuan has {len(at)} kernels, the file {len(truth)}"
        out[at] = [k for _, k in truth]
    return out


@pytest.mark.parametrize("name", step_traces())
def test_steps_recovered_without_reading_them(name):
    path = DATA / name
    events = _events(path)
    steps = cpu_steps(events)
    per_stream = kernel_steps(events, steps)
    trace = gpuan.load(path)
    if not per_stream:
        # a CPU-only trace: no instance of its operators' cycles holds operators of two steps
        bounds = np.array([(a, b) for a, b, _ in steps])
        for sc in detect(trace, "cpu_op"):
            at = (trace.metadata["base_time_ns"] + sc.sequence.ts) / 1e3
            step_at = [{i for i, (a, b) in enumerate(bounds) if a <= t <= b} for t in at]
            for seg in sc.segments:
                for row in [] if seg.cycle is None else seg.cycle.positions():
                    assert len(set().union(*(step_at[i] for i in row))) <= 1
        return
    found = detect(trace)
    for sc in found:
        step_of = step_of_events(sc.sequence, per_stream)
        for seg in sc.segments:
            if seg.cycle is None:
                continue
            for row in seg.cycle.positions():
                # no instance straddles a step boundary: its kernels were all launched in one step, or
                # all outside the steps
                assert len(set(step_of[row].tolist())) == 1, f"{sc.sequence.label}: an instance spans steps"
    # the main compute sequence: where every step launched the same number of its kernels, the outer
    # cycle is the step, one instance per step, each holding exactly that step's kernels
    main = max((sc for sc in found if sc.sequence.group == "compute"), key=lambda sc: len(sc.sequence))
    step_of = step_of_events(main.sequence, per_stream)
    per_step = np.bincount(step_of[step_of >= 0], minlength=len(steps))
    if len(steps) < 2 or per_step.min() == 0 or (per_step != per_step[0]).any():
        return  # one step, or steps of different sizes: nothing repeats to recover
    cycles = [seg.cycle for seg in main.segments if seg.cycle is not None and seg.cycle.length == per_step[0]]
    assert cycles, f"no outer cycle of {per_step[0]} kernels (the step) in {main.sequence.label}"
    instances = [step_of[row] for c in cycles for row in c.positions()]
    for k in range(len(steps)):
        assert any((inst == k).all() and len(inst) == per_step[0] for inst in instances), f"step {k} not found"


def test_multi_stream_step_of_the_v100_ddp_trace(data_dir):
    """Stream 7's and stream 14's kernels interleave differently in every step: still one step of
    1,545 kernels x 6 (1,510 + 35 per stream), each instance exactly its ProfilerStep's kernels."""
    path = data_dir / "kineto" / "v100_ddp_6steps_trace_diff_test.json.gz"
    events = _events(path)
    steps = cpu_steps(events)
    per_stream = kernel_steps(events, steps)
    counts = {s: np.bincount([k for _, k in v if k >= 0], minlength=len(steps)) for s, v in per_stream.items()}
    trace = gpuan.load(path)
    (compute,) = [sc for sc in detect(trace) if sc.sequence.group == "compute"]
    assert set(compute.sequence.streams) == {7, 14}
    (seg,) = [s for s in compute.segments if s.periodic]
    p = Pattern(compute.sequence, 0, "cycle", seg.cycle)
    assert seg.cycle.length == counts[7][0] + counts[14][0] and seg.cycle.repetitions == len(steps) == 6
    assert p.streams() == {7: counts[7][0], 14: counts[14][0]}
    step_of = step_of_events(compute.sequence, per_stream)
    assert [int(step_of[row][0]) for row in seg.cycle.positions()] == list(range(6))
    assert all(len(set(step_of[row].tolist())) == 1 for row in seg.cycle.positions())
    # the order does change between steps, and is reported
    moved = p.order_moved()
    assert not seg.cycle.ordered and moved.max() > 0
    # per stream, each stream is exactly periodic and lined up with the steps too
    by_stream = {sc.sequence.streams: sc for sc in detect(trace, sequences="stream")}
    for s in (7, 14):
        sc = by_stream[(s,)]
        truth = np.array([k for _, k in per_stream[s]])
        (c,) = [x.cycle for x in sc.segments if x.periodic]
        assert (c.length, c.repetitions) == (counts[s][0], 6)
        assert [set(truth[row].tolist()) for row in c.positions()] == [{k} for k in range(6)]


def test_pt19_steps_are_ranges(data_dir):
    """PyTorch 1.9 wrote ProfilerStep#N as operators: they are annotations, and the top-level operators
    of the main thread repeat once per step, lined up with the steps (the profiler's own ``aten::zeros``
    between two steps belongs to neither: it may open an instance)."""
    path = data_dir / "kineto" / "v100_pt19_resnet50_worker0.json.gz"
    events = _events(path)
    steps = cpu_steps(events)
    (thread,) = {t for _, _, t in steps}
    trace = gpuan.load(path)
    ann = trace.of_kind("annotation")
    names = ann["name"].cast("string").to_pylist()
    assert sum(n.startswith("ProfilerStep#") for n in names) == len(steps) == 6
    ops = trace.of_kind("cpu_op")["name"].cast("string").to_pylist()
    assert not any(n.startswith("ProfilerStep#") for n in ops)
    (main,) = [sc for sc in detect(trace, "cpu_op") if sc.sequence.streams == (int(thread),)]
    (seg,) = [s for s in main.segments if s.periodic]
    assert seg.cycle.repetitions == 6
    seq = main.sequence
    starts_us = (trace.metadata["base_time_ns"] + seq.ts) / 1e3
    bounds = np.array([(a, b) for a, b, _ in steps])
    for k, row in enumerate(seg.cycle.positions()):
        at = starts_us[row]
        inside = [{i for i, (a, b) in enumerate(bounds) if a <= t <= b} for t in at]
        assert set().union(*inside) == {k}, f"instance {k} holds operators of steps {set().union(*inside)}"
        assert sum(not x for x in inside) <= 1
