"""The synthetic Kineto trace generator: valid JSON, honest summary, consistent times, reproducible bytes."""

from __future__ import annotations

import gzip
import json
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from gpuan.synth.kineto import sample_trace_path, write_kineto_trace

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def ns(us: float) -> int:
    """Return a Kineto microsecond value as integer nanoseconds."""
    return round(us * 1000)


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> tuple[Path, dict, dict]:
    """A 2-step, 2-layer trace: its path, the generator's summary and the parsed JSON."""
    path = tmp_path_factory.mktemp("synth") / "small.json"
    summary = write_kineto_trace(path, steps=2, layers=2, seed=3)
    with open(path) as f:
        return path, summary, json.load(f)


def test_layout_matches_kineto(small) -> None:
    _, _, trace = small
    keys = list(trace)
    assert keys[:2] == ["schemaVersion", "deviceProperties"]
    assert keys[-4:] == ["traceEvents", "traceName", "displayTimeUnit", "baseTimeNanoseconds"]
    dev = trace["deviceProperties"][0]
    assert dev["name"] == "NVIDIA H100 80GB HBM3" and dev["numSms"] == 132 and dev["computeMajor"] == 9
    assert trace["distributedInfo"]["rank"] == 0 and trace["distributedInfo"]["world_size"] == 1


def test_counts_match_summary(small) -> None:
    path, summary, trace = small
    events = trace["traceEvents"]
    counts = Counter(f"{e['ph']}/{e.get('cat', '')}" for e in events)
    assert counts == Counter(summary["by_ph_cat"])
    assert len(events) == summary["events"]
    assert counts["X/kernel"] == summary["kernels"] > 0
    assert summary["bytes"] == path.stat().st_size
    assert [e["name"] for e in events if e.get("cat") == "user_annotation" and "ProfilerStep" in e["name"]] == [
        "ProfilerStep#1",
        "ProfilerStep#2",
    ]


def test_gpu_work_on_a_stream_never_overlaps(small) -> None:
    _, _, trace = small
    streams = defaultdict(list)
    for e in trace["traceEvents"]:
        if e.get("cat") in GPU_CATS:
            streams[e["tid"]].append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])))
    assert len(streams) == 2  # compute and NCCL
    for spans in streams.values():
        spans.sort()
        assert all(b[0] >= a[1] for a, b in zip(spans, spans[1:]))


def test_kernels_start_after_their_launch(small) -> None:
    _, _, trace = small
    events = trace["traceEvents"]
    launches = {e["args"]["correlation"]: e for e in events if e.get("cat") == "cuda_runtime"}
    flows = {(e["ph"], e["id"]) for e in events if e.get("cat") == "ac2g"}
    for e in events:
        if e.get("cat") in GPU_CATS:
            corr = e["args"]["correlation"]
            launch = launches[corr]
            assert ns(e["ts"]) > ns(launch["ts"])
            assert e["args"]["External id"] == launch["args"]["External id"]
            assert ("s", corr) in flows and ("f", corr) in flows


def test_cpu_ops_nest_per_thread(small) -> None:
    _, _, trace = small
    threads = defaultdict(list)
    for e in trace["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation", "python_function", "cuda_runtime"):
            threads[e["tid"]].append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])))
    for spans in threads.values():
        open_ends: list[int] = []
        for start, end in sorted(spans, key=lambda s: (s[0], -s[1])):
            while open_ends and open_ends[-1] <= start:
                open_ends.pop()
            assert not open_ends or end <= open_ends[-1]
            open_ends.append(end)


def test_same_seed_same_bytes(tmp_path: Path) -> None:
    for name in ("a.json.gz", "b.json.gz"):
        write_kineto_trace(tmp_path / name, steps=2, layers=2, seed=7)
    assert (tmp_path / "a.json.gz").read_bytes() == (tmp_path / "b.json.gz").read_bytes()
    write_kineto_trace(tmp_path / "c.json.gz", steps=2, layers=2, seed=8)
    assert (tmp_path / "a.json.gz").read_bytes() != (tmp_path / "c.json.gz").read_bytes()


def test_target_bytes_and_gzip(tmp_path: Path) -> None:
    path = tmp_path / "sized.json.gz"
    summary = write_kineto_trace(path, layers=1, target_bytes=2_000_000)
    assert summary["gzip"] and 1_800_000 <= summary["bytes"] <= 2_400_000
    with gzip.open(path, "rt") as f:
        assert len(json.load(f)["traceEvents"]) == summary["events"]


def test_sample_trace_is_small_and_reused(tmp_path: Path) -> None:
    path = sample_trace_path(tmp_path)
    assert path.name == "gpuan_sample.json.gz" and path.stat().st_size < 1_000_000
    mtime = path.stat().st_mtime_ns
    assert sample_trace_path(tmp_path) == path and path.stat().st_mtime_ns == mtime
