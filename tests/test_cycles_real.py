"""Cycle detection on the real traces of ../shared/data, checked against what the traces annotate.

The detector never reads annotations; these tests do, to know where the steps and phases really are.
"""

from __future__ import annotations

import gzip
import json
import random
import re
import subprocess
import sys

import numpy as np
import pyarrow.compute as pc
import pytest

import gpuan
from gpuan.cycles import detect, distinct_patterns


def gpuan_cli(*args):
    return subprocess.run([sys.executable, "-m", "gpuan", *map(str, args)], capture_output=True, text=True)


def annotated(trace, prefix: str):
    """(start, end) ns of the annotations whose name starts with `prefix`, in time order."""
    ann = trace.of_kind("annotation")
    ann = ann.filter(pc.starts_with(ann["name"].cast("string"), prefix))
    ts = ann["ts"].to_numpy()
    order = np.argsort(ts)
    return ts[order], (ts + ann["dur"].to_numpy())[order]


def launch_steps(trace, streams) -> np.ndarray:
    """Per kernel of `streams`, in time order: the annotated ProfilerStep its launch fell in."""
    k = trace.of_kind("kernel")
    k = k.filter(pc.is_in(k["stream"], pc.cast(list(streams), k["stream"].type)))
    k = k.take(np.argsort(k["ts"].to_numpy(), kind="stable"))
    rt = trace.of_kind("runtime")
    launch = dict(zip(rt["correlation"].to_pylist(), rt["ts"].to_pylist()))
    lts = np.array([launch[c] for c in k["correlation"].to_pylist()])
    starts, _ = annotated(trace, "ProfilerStep#")
    return np.searchsorted(starts, lts, side="right") - 1


@pytest.mark.parametrize("name, steps", [("a100_ddp2_rank0_nccl", 3), ("v100_rank0_ns_resolution", 5)])
def test_outer_cycle_is_the_profiler_step(data_dir, name, steps):
    trace = gpuan.load(data_dir / "kineto" / f"{name}.json.gz")
    found = [sc for sc in detect(trace) if sc.sequence.group == "compute"]
    assert len(found) == 1
    sc = found[0]
    step_of = launch_steps(trace, sc.sequence.streams)
    per_step = np.bincount(step_of)
    assert len(per_step) == steps and (per_step == per_step[0]).all()
    periodic = [s for s in sc.segments if s.periodic]
    assert len(periodic) == 1
    cyc = periodic[0].cycle
    assert cyc.length == per_step[0] and cyc.repetitions == steps
    for k, s in enumerate(cyc.starts):
        assert (step_of[s : s + cyc.length] == k).all(), f"instance {k} is not step {k}"
    # the repeating blocks inside the step come with it, inside the step
    subs = periodic[0].sub_cycles
    assert subs and all(c.offset + c.length * c.per_parent <= cyc.length for c in subs)
    assert all(c.repetitions == c.per_parent * steps for c in subs)


def test_v100_step_holds_the_34_kernel_block(data_dir):
    trace = gpuan.load(data_dir / "kineto" / "v100_rank0_ns_resolution.json.gz")
    (sc,) = detect(trace)
    subs = {(c.length, c.per_parent) for c in sc.segments[0].sub_cycles}
    assert (34, 5) in subs


def test_nccl_stream_is_its_own_sequence(data_dir):
    trace = gpuan.load(data_dir / "kineto" / "a100_ddp2_rank0_nccl.json.gz")
    groups = {sc.sequence.group: sc for sc in detect(trace)}
    assert set(groups) == {"compute", "comm"}
    assert groups["comm"].sequence.streams == (40,) and len(groups["comm"].sequence) == 21
    merged = detect(trace, sequences="merged")
    assert [sc.sequence.group for sc in merged] == ["all"] and len(merged[0].sequence) == 2700


def test_prefill_and_decode_phases_of_a_cpu_lm(data_dir):
    trace = gpuan.load(data_dir / "kineto" / "cpu_tiny_lm_prefill_decode.json.gz")
    (sc,) = detect(trace, "cpu_op")
    pre_start, pre_end = annotated(trace, "prefill")
    dec_start, dec_end = annotated(trace, "decode")
    seq = sc.sequence
    assert len(sc.segments) == 2
    prefill, decode = sc.segments
    assert not prefill.periodic and decode.periodic
    # the boundary between the two segments is the boundary between the annotated phases (the first
    # token's argmax runs between the two annotations, so it may sit on either side of the boundary)
    assert seq.ts[prefill.start] >= pre_start[0] and seq.ts[prefill.end - 1] < dec_start[0]
    assert seq.ts[prefill.end - 2] < pre_end[0]
    assert seq.ts[decode.start] >= dec_start[0] and seq.ts[decode.end - 1] < dec_end[0]
    assert decode.cycle.repetitions in (15, 16)
    layer = max(decode.sub_cycles, key=lambda c: c.length * c.per_parent)
    assert layer.per_parent == 2 and layer.repetitions in (30, 32)
    names = seq.vocab[layer.template]
    assert "aten::scaled_dot_product_attention" in names and "aten::embedding" not in names
    # prefill has its own two layers (without the KV-cache concatenation of decode)
    (pre_layer,) = prefill.sub_cycles
    assert pre_layer.per_parent == 2 and "aten::cat" not in seq.vocab[pre_layer.template]


def test_llm_mode_writes_prefill_and_decode(data_dir, tmp_path):
    src = data_dir / "kineto" / "cpu_tiny_lm_prefill_decode.json.gz"
    r = gpuan_cli("cycles", src, "--kind", "cpu_op", "--mode", "llm", "-o", tmp_path / "lm", "--format", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lm_decode.csv", "lm_prefill.csv"]
    decode = (tmp_path / "lm_decode.csv").read_text().splitlines()
    assert decode[1] in ("# Iterations,32", "# Iterations,30")
    (s,) = out["sequences"]
    assert [seg["periodic"] for seg in s["segments"]] == [False, True]
    phases = out["phases"]
    assert (phases["prefill"]["segment"], phases["decode"]["segment"]) == (0, 1)
    assert phases["decode"]["repetitions"] == 32 and phases["decode"]["file"].endswith("lm_decode.csv")


def _shuffled_copy(src, dst, seed):
    """Write `src` with its events in another order, numbers kept digit for digit (a float round trip
    would move nanosecond timestamps)."""
    with gzip.open(src, "rt") as f:
        doc = json.load(f, parse_float=lambda text: f"\0num{text}")
    random.Random(seed).shuffle(doc["traceEvents"])
    text = re.sub(r'"\\u0000num([^"]+)"', r"\1", json.dumps(doc))
    with gzip.open(dst, "wt") as f:
        f.write(text)


def test_same_bytes_every_run_and_whatever_the_file_order(data_dir, tmp_path):
    src = data_dir / "kineto" / "v100_rank0_ns_resolution.json.gz"
    shuffled = tmp_path / "shuffled.json.gz"
    _shuffled_copy(src, shuffled, seed=3)
    outputs = []
    for i, path in enumerate([src, src, shuffled]):
        (tmp_path / f"run{i}").mkdir(exist_ok=True)
        r = gpuan_cli("cycles", path, "-o", tmp_path / f"run{i}" / "v100", "--format", "json")
        assert r.returncode == 0, r.stderr
        files = sorted((tmp_path / f"run{i}").iterdir())
        outputs.append({p.name: p.read_bytes() for p in files})
        doc = json.loads(r.stdout)
        doc.pop("trace"), doc.pop("files")
        for p in doc["patterns"]:
            p.pop("file")
        outputs[-1]["json"] = json.dumps(doc).encode()
    assert len(outputs[0]) > 2
    assert outputs[0] == outputs[1] == outputs[2]


def test_every_pattern_is_written_in_time_order(data_dir, tmp_path):
    trace = gpuan.load(data_dir / "kineto" / "v100_rank0_ns_resolution.json.gz")
    patterns = distinct_patterns(detect(trace))
    centres = [p.centre_ns() for p in patterns]
    assert centres == sorted(centres)
    forms = {tuple(sorted(p.cycle.template.tolist())) + (p.cycle.length,) for p in patterns}
    assert len(forms) == len(patterns)
    step = [p for p in patterns if p.role == "cycle"]
    assert len(step) == 1 and step[0].cycle.length == 870
    stats = step[0].stats()
    assert (stats["count"] == 5).all()
    assert stats.pct_of_cycle.sum() == pytest.approx(100, abs=1e-6)


def test_json_summary_has_instances_and_sub_cycles(data_dir):
    src = data_dir / "kineto" / "a100_ddp2_rank0_nccl.json.gz"
    r = gpuan_cli("cycles", src, "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    (compute,) = [s for s in doc["sequences"] if s["group"] == "compute"]
    (seg,) = compute["segments"]
    cyc = seg["cycle"]
    assert cyc["length"] == 893 and cyc["repetitions"] == 3
    inst = cyc["instances"]
    assert len(inst["busy_ns"]) == len(inst["wall_ns"]) == len(inst["start_ns"]) == 3
    assert all(0 < b <= w for b, w in zip(inst["busy_ns"], inst["wall_ns"]))
    assert cyc["avg_busy_us"] == pytest.approx(sum(inst["busy_ns"]) / 3e3, abs=1e-3)
    assert seg["sub_cycles"] and all(s["repetitions"] == 3 * s["per_parent"] for s in seg["sub_cycles"])
    assert len(cyc["positions"]) == 893 and doc["files"] == []


def test_bad_input_is_one_line_and_writes_nothing(data_dir, tmp_path):
    nvprof = data_dir / "nvprof" / "mem_mem_1stream_23000.csv"
    r = gpuan_cli("cycles", nvprof, "--kind", "cpu_op", "-o", tmp_path / "x")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert str(nvprof) in r.stderr and "no cpu_op events" in r.stderr
    src = data_dir / "kineto" / "a100_alexnet.json.gz"
    missing_dir = tmp_path / "nowhere" / "base"
    r = gpuan_cli("cycles", src, "-o", missing_dir)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "cannot write" in r.stderr
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes((data_dir / "kineto" / "v100_rank0_ns_resolution.json.gz").read_bytes()[:50_000])
    r = gpuan_cli("cycles", cut, "-o", tmp_path / "cut")
    assert r.returncode == 2 and "truncated" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.json.gz"]
