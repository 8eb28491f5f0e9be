"""``gpuan sol`` against truths counted here from the raw trace files: the bytes of out-variant ops, no
efficiency above 1 on any real GPU trace without the L2 roof explaining it, shares that add up to the
ops' summed time (and that time and the busy union from the raw JSON), one-line shapes."""

from __future__ import annotations

import csv
import gzip
import json
import math
import re
from collections import defaultdict

import numpy as np
import pytest
from conftest import DATA

from gpuan.cli import main
from gpuan.errors import TraceError
from gpuan.sol import score
from gpuan.trace.load import load

#: bytes per element of the profiler's type names, for the tests' own counting
SIZES = {"float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "long int": 8, "int": 4, "bool": 1,
         "unsigned char": 1, "signed char": 1, "short int": 2}  # fmt: skip
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"}


def raw_events(path) -> list[dict]:
    doc = json.load(gzip.open(path))
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def has_gpu_activity(path) -> bool:
    return any(e.get("cat") in GPU_CATS for e in raw_events(path))


def real_traces() -> list[str]:
    kineto = sorted(str(p.relative_to(DATA)) for p in (DATA / "kineto").rglob("*.json.gz"))
    return kineto + sorted(str(p.relative_to(DATA)) for p in (DATA / "nsys").glob("*.sqlite"))


def scored_with_device(path: str):
    """Score against the device the trace records; the sampled 128-rank job records none (it ran on A100s)."""
    trace = load(path)
    try:
        return score(trace)
    except TraceError:
        return score(trace, "A100")


# --- out= variants ------------------------------------------------------------------------------------


def out_variant_bytes(events) -> dict[tuple[str, str, str], float]:
    """(name, dims, types) → bytes, from the raw JSON, of the three-argument clamp_min and mul calls: the
    out= overloads (self, min/other, out), whose functional forms take two arguments. Bytes: self read,
    the 0-dim `other` read if it is a tensor, the output written once."""
    out = {}
    for e in events:
        if e.get("cat") not in ("cpu_op", "Operator") or e.get("name") not in ("aten::clamp_min", "aten::mul"):
            continue
        dims, types = e["args"].get("Input Dims"), e["args"].get("Input type")
        if not dims or len(dims) != 3 or types[0] not in SIZES or types[2] not in SIZES or dims[0] != dims[2]:
            continue
        n = math.prod(dims[0])
        other = SIZES[types[1]] if types[1] in SIZES and dims[1] == [] else 0
        out[(e["name"], json.dumps(dims), json.dumps(types))] = n * SIZES[types[0]] + other + n * SIZES[types[2]]
    return out


@pytest.mark.parametrize(
    "name, at_least",
    [("v100_pt19_resnet50_worker0", 294), ("mi300x_resnet_ddp_act_checkpoint", 100),
     ("v100_ddp_6steps_trace_diff_test", 500)],
)  # fmt: skip
def test_out_variant_bytes_read_inputs_and_write_the_output_once(data_dir, name, at_least):
    path = data_dir / "kineto" / f"{name}.json.gz"
    expected = out_variant_bytes(raw_events(path))
    ops = scored_with_device(str(path)).ops.to_pandas()
    keys = list(zip(ops["name"].astype(str), ops["input_dims"].astype(str), ops["input_types"].astype(str)))
    matched = [(k, b) for k, b in zip(keys, ops["bytes"]) if k in expected]
    assert len(matched) >= at_least
    assert all(b == expected[k] for k, b in matched)


def test_in_place_add_reads_both_and_writes_self(data_dir):
    # add_(self, other, alpha): no out argument; self is read and written, other read
    path = data_dir / "kineto/v100_pt19_resnet50_worker0.json.gz"
    ops = scored_with_device(str(path)).ops.to_pandas()
    add = ops[(ops["name"] == "aten::add_") & ops["input_types"].astype(str).str.startswith('["float", "float", ')]
    assert len(add) > 100
    for dims, nbytes in zip(add["input_dims"].astype(str), add["bytes"]):
        a, b, _ = json.loads(dims)
        assert a == b and nbytes == 3 * math.prod(a) * 4


# --- no efficiency above 1 ----------------------------------------------------------------------------


@pytest.mark.parametrize("rel", real_traces())
def test_no_efficiency_above_one_without_the_l2_roof(data_dir, rel):
    path = data_dir / rel
    if path.suffix == ".gz" and not has_gpu_activity(path):
        pytest.skip(
            "a CPU trace: its roofs would be this machine's measured ceilings (gpuan sol calibrate --cpu), "
            "not those of the machine and load that recorded it"
        )
    scored = scored_with_device(str(path))
    ops = scored.ops.to_pandas()
    modelled = ops[~ops.model_missing & ops.efficiency.notna()]
    assert (modelled.efficiency <= 1).all() and not ops.model_error.any()
    # the ops scored against the L2 roof beat the DRAM roof, and their estimate is the hierarchical one
    roofs = scored.roofs
    l2 = modelled[modelled.bound == "memory (L2)"]
    if len(l2):
        assert roofs.l2_bandwidth > 0 and roofs.l2_bytes > 0
        rate = np.array([roofs.flops.get(p, np.inf) if isinstance(p, str) else np.inf for p in l2.peak])
        dram_ns = np.maximum(l2.flops / rate, l2.bytes / roofs.memory_bandwidth) * 1e9
        assert (dram_ns > l2.measured_ns).all()
        memory = np.maximum(
            l2.bytes / roofs.l2_bandwidth, np.maximum(l2.bytes - roofs.l2_bytes, 0) / roofs.memory_bandwidth
        )
        np.testing.assert_allclose(l2.estimated_ns, np.maximum(l2.flops / rate, memory) * 1e9, rtol=1e-9)


# --- shares -------------------------------------------------------------------------------------------


def union_ns(intervals) -> float:
    total, end = 0.0, -math.inf
    for s, e in sorted(intervals):
        if s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


@pytest.fixture(scope="module")
def resnet_ddp(data_dir):
    path = data_dir / "kineto/mi300x_resnet_ddp_act_checkpoint.json.gz"
    activities = [e for e in raw_events(path) if e.get("cat") in GPU_CATS and e.get("ph") == "X"]
    per_device, per_stream = defaultdict(list), defaultdict(list)
    for a in activities:
        iv = (a["ts"] * 1e3, (a["ts"] + a["dur"]) * 1e3)
        per_device[a["pid"]].append(iv)
        per_stream[(a["pid"], a["args"]["stream"])].append(iv)
    busy = sum(union_ns(v) for v in per_device.values())
    # one op's kernels run on one stream and a stream runs one kernel at a time: the ops' summed time is
    # the sum of the streams' busy times
    summed = sum(union_ns(v) for v in per_stream.values())
    return str(path), busy, summed


def test_shares_add_up_to_the_summed_op_time(resnet_ddp, capsys):
    path, busy, summed = resnet_ddp
    assert main(["sol", path, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    t = doc["totals"]
    assert t["shares_of"] == "op_ms"
    assert t["busy_ms"] == pytest.approx(busy / 1e6, abs=1e-3) and t["op_ms"] == pytest.approx(summed / 1e6, abs=1e-3)
    # RCCL on its own stream overlapped the compute by the difference
    assert t["overlap_ms"] == pytest.approx((summed - busy) / 1e6, abs=2e-3) and t["overlap_ms"] > 10
    for table in ("by_layer_type", "by_function"):
        rows = doc[table].values()
        assert sum(r["share"] for r in rows) == pytest.approx(1, abs=1e-9)
        assert sum(r["measured_ms"] for r in rows) == pytest.approx(t["op_ms"], rel=1e-9)
    top = [r for k, r in doc["by_phase"].items() if "/" not in k]
    assert sum(r["share"] for r in top) == pytest.approx(1, abs=1e-9)
    assert all(0 <= r["share"] <= 1 for r in doc["by_phase"].values())


def test_text_shares_add_up_and_say_what_they_are_of(resnet_ddp, capsys):
    path, busy, summed = resnet_ddp
    assert main(["sol", path, "--top", "1000"]) == 0
    out = capsys.readouterr().out
    assert f"GPU busy {busy / 1e6:,.3f} ms" in out and f"op time {summed / 1e6:,.3f} ms" in out
    assert "shares are of op time" in out
    tables = re.split(r"\n(?=by |top )", out)
    for title in ("by layer type", "by function", "by phase"):
        (text,) = [t for t in tables if t.startswith(title)]
        rows = [line.split("│")[1:-1] for line in text.splitlines() if line.startswith("│")]
        shares = [float(cells[3].strip().rstrip("%")) for cells in rows if "/" not in cells[0]]
        assert sum(shares) == pytest.approx(100, abs=0.05 * len(shares) + 1e-9)


# --- shapes -------------------------------------------------------------------------------------------


def test_shapes_are_one_line_in_the_report_and_the_table(data_dir, tmp_path, capsys):
    # a pretty-printed trace: its Input Dims span several lines in the file
    path = data_dir / "kineto/mi300x_qwen05b_inference.json.gz"
    raw_dims = {json.dumps(e["args"]["Input Dims"]) for e in raw_events(path) if "Input Dims" in e.get("args", {})}
    table = tmp_path / "ops.csv"
    assert main(["sol", str(path), "--top", "10", "-o", str(table)]) == 0
    out = capsys.readouterr().out
    top = out[out.index("top 10 ops by lost time") :]
    assert len([line for line in top.splitlines() if line.startswith("│")]) == 10
    assert all(len(line) <= 120 for line in out.splitlines()[1:])  # all but the trace's path
    with open(table, newline="") as f:
        cells = [row["input_dims"] for row in csv.DictReader(f)]
    shapes = [c for c in cells if c]
    assert len(shapes) > 1000 and all("\n" not in c for c in shapes) and set(shapes) <= raw_dims


def test_roofline_chart_draws_the_l2_roof(data_dir, tmp_path):
    path = str(data_dir / "kineto/v100_pt19_resnet50_worker0.json.gz")
    html = tmp_path / "roofline.html"
    assert main(["sol", path, "--html", str(html)]) == 0
    roofs = scored_with_device(path).roofs
    assert f"L2 roof ({roofs.l2_bandwidth / 1e12:,.2f} TB\\u002fs, data up to 6 MiB)" in html.read_text()
