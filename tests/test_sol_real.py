"""``gpuan sol`` on the real traces: kernels linked to the ops that launched them (checked against the raw
JSON), no efficiency above 1, phases, the CPU path with calibrated ceilings, outputs and bad input."""

from __future__ import annotations

import gzip
import json

import numpy as np
import openpyxl
import pyarrow.parquet as pq
import pytest
from conftest import kineto_files

from gpuan.cli import main
from gpuan.devices.ceilings import read_ceilings
from gpuan.sol import score
from gpuan.trace.launch import link
from gpuan.trace.load import load

GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


def expected_links(path) -> dict[int, tuple[str, int]]:
    """From the raw JSON, independently of gpuan: correlation of each GPU activity → (name, External id) of
    the op
    that launched it: the op its runtime call's External id names if that op holds the call on its thread,
    else the innermost op holding the call."""
    events = json.load(gzip.open(path))["traceEvents"]
    ops = [e for e in events if e.get("cat") == "cpu_op" and e.get("ph") == "X"]
    runtime = {e["args"]["correlation"]: e for e in events if e.get("cat") in ("cuda_runtime", "hip_runtime")
               and "correlation" in e.get("args", {})}  # fmt: skip
    by_id = {o["args"].get("External id"): o for o in ops}

    def holds(o, r):
        return o["pid"] == r["pid"] and o["tid"] == r["tid"] and o["ts"] <= r["ts"] <= o["ts"] + o["dur"]

    out = {}
    for a in events:
        if a.get("cat") not in GPU_CATS or a["args"].get("correlation") not in runtime:
            continue
        r = runtime[a["args"]["correlation"]]
        named = by_id.get(r["args"].get("External id"))
        if named is not None and holds(named, r):
            op = named
        else:
            holding = [(i, o) for i, o in enumerate(ops) if holds(o, r)]
            # innermost: the latest start, then the shortest, then the later in the file (a child written
            # after its parent with the same rounded times)
            op = max(holding, key=lambda io: (io[1]["ts"], -io[1]["dur"], io[0]))[1] if holding else None
        if op is not None:
            out[a["args"]["correlation"]] = (op["name"], op["args"]["External id"])
    return out


@pytest.mark.parametrize("name", ["sampled_128rank_rank0", "mi250_minitoy_train_rocm"])
def test_kernels_link_to_the_ops_the_raw_json_names(data_dir, name):
    path = data_dir / "kineto" / f"{name}.json.gz"
    expected = expected_links(path)
    trace = load(str(path))
    activities = trace.of_kind("kernel", "memcpy", "memset")
    ops = trace.of_kind("cpu_op")
    links = link(activities, trace.of_kind("runtime"), ops, trace.flows)
    corr = activities["correlation"].to_numpy(zero_copy_only=False)
    op_names = ops["name"].combine_chunks().dictionary_decode().to_pylist()
    op_ids = ops["external_id"].to_numpy(zero_copy_only=False)
    got = {int(c): (op_names[o], int(op_ids[o])) for c, o in zip(corr, links.op_of_activity) if o >= 0}
    assert len(expected) > 0.9 * activities.num_rows
    assert got == expected


@pytest.mark.parametrize(
    "name, device",
    [("sampled_128rank_rank0", "A100"), ("mi250_minitoy_train_rocm", None)],
)
def test_scores_are_never_above_one(data_dir, capsys, name, device):
    path = str(data_dir / "kineto" / f"{name}.json.gz")
    scored = score(load(path), gpu=device)
    ops = scored.ops.to_pandas()
    modelled = ops[~ops.model_missing]
    assert len(modelled) > 10
    assert (modelled.efficiency <= 1).all() and not ops.model_error.any()
    assert (modelled.estimated_ns > 0).all() and (modelled.flops >= 0).all()
    # every GPU activity is in one op's row: the ops' summed time covers the GPU's busy time
    assert 0 < scored.modelled_share <= 1 and ops.measured_ns.sum() == scored.op_ns >= scored.busy_ns
    assert main(["sol", path, *(["--gpu", device] if device else []), "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert f"modelled {scored.modelled_share:.1%} of op time" in out and "shares are of op time" in out
    for section in ("by layer type", "by function", "by phase", "top 3 ops by lost time"):
        assert section in out


def test_mi250_gemms_are_matrix_core_fp32(data_dir):
    scored = score(load(str(data_dir / "kineto/mi250_minitoy_train_rocm.json.gz")))
    ops = scored.ops.to_pandas()
    gemm = ops[ops.category == "gemm"]
    assert scored.roofs.device == "MI250 GCD / MI210"
    assert set(gemm.name) == {"aten::addmm", "aten::mm"} and set(gemm.peak) == {"tensor:fp32"}
    # addmm(bias[128], x[5,128], W[128,128]): 2·5·128·128 + 5·128
    addmm = gemm[gemm.name == "aten::addmm"].iloc[0]
    assert addmm.flops == 2 * 5 * 128 * 128 + 5 * 128


def test_tf32_kernels_switch_fp32_gemms_to_tensor_cores(data_dir):
    # the A100 job ran FP32 GEMMs on cutlass tensorop_s1688 (TF32) kernels
    ops = score(load(str(data_dir / "kineto/sampled_128rank_rank0.json.gz")), gpu="A100").ops.to_pandas()
    mm = ops[(ops.category == "gemm") & (ops.dtype == "fp32")]
    assert len(mm) > 100 and set(mm.peak) == {"tensor:tf32"}


@pytest.fixture(scope="module")
def cpu_ceilings(tmp_path_factory):
    path = tmp_path_factory.mktemp("ceilings") / "ceilings.json"
    assert main(["sol", "calibrate", "--cpu", "--ceilings-file", str(path)]) == 0
    return path


def test_calibrate_cpu_saves_measured_ceilings(cpu_ceilings):
    saved = json.loads(cpu_ceilings.read_text())["cpu"]
    assert saved["memory_bandwidth"] > 1e8 and saved["flops"]["vector:fp32"] > 1e8
    assert saved["flops"]["vector:fp32"] > saved["flops"]["vector:fp64"] * 0.5
    # data that fits in L2 moves faster than data from DRAM
    assert saved["l2_bytes"] > 0 and saved["l2_bandwidth"] > saved["memory_bandwidth"]


def test_cpu_trace_by_phase_has_prefill_and_decode(data_dir, capsys, cpu_ceilings):
    path = str(data_dir / "kineto/cpu_tiny_lm_prefill_decode.json.gz")
    args = ["sol", path, "--cpu", "--ceilings-file", str(cpu_ceilings), "--format", "json"]
    assert main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    phases = doc["by_phase"]
    assert {"prefill", "decode"} <= set(phases)
    assert phases["prefill"]["ops"] > 0 and phases["decode"]["ops"] > phases["prefill"]["ops"]
    assert doc["totals"]["ceilings"] == "measured" and doc["totals"]["device"] == "cpu"
    # every scored op lies inside its phase's record_function range
    trace = load(path)
    ann = trace.of_kind("annotation").to_pandas()
    ranges = {n: (r.ts, r.ts + r.dur) for n, r in ann.set_index("name").iterrows() if n in ("prefill", "decode")}
    ops = score(trace, cpu=True, ceilings=read_ceilings(cpu_ceilings)).ops.to_pandas()
    for phase, (lo, hi) in ranges.items():
        inside = ops[ops.phase == phase]
        assert len(inside) and ((inside.ts >= lo) & (inside.ts <= hi)).all()
    # the outermost modelled op is scored, not its modelled children: linear, not the addmm inside it
    assert "aten::linear" in set(ops.name) and "aten::addmm" not in set(ops.name)
    assert set(ops.category) >= {"gemm", "attention", "norm", "embedding"}


def test_outputs(data_dir, tmp_path, capsys):
    path = str(data_dir / "kineto/mi250_minitoy_train_rocm.json.gz")
    files = {s: tmp_path / f"ops.{s}" for s in ("csv", "parquet", "xlsx")}
    for suffix, out in files.items():
        args = ["sol", path, "-o", str(out)] + (["--html", str(tmp_path / "roofline.html")] if suffix == "csv" else [])
        assert main(args) == 0
    n = score(load(path)).ops.num_rows
    table = pq.read_table(files["parquet"])
    assert table.num_rows == n and {"flops", "bytes", "efficiency", "bound", "phase"} <= set(table.column_names)
    assert len(files["csv"].read_text().splitlines()) == n + 1
    book = openpyxl.load_workbook(files["xlsx"], read_only=True)
    assert {"totals", "by layer type", "by function", "by phase", "top lost", "ops"} <= set(book.sheetnames)
    html = (tmp_path / "roofline.html").read_text()
    assert "plotly" in html and '<script src="http' not in html and "roof tensor:fp32" in html


@pytest.mark.parametrize(
    "trace, extra, message",
    [
        ("kineto/sampled_128rank_rank0.json.gz", [], "the trace records no device; pass --gpu, one of"),
        ("kineto/mi250_minitoy_train_rocm.json.gz", ["--gpu", "Z100"], "--gpu: unknown device 'Z100'; closest known: "),
        ("kineto/mi250_minitoy_train_rocm.json.gz", ["--gpu", "cpu"], "pass --cpu to score against this machine's"),
        ("kineto/mi250_minitoy_train_rocm.json.gz", ["--gpu", "H100", "--cpu"], "--gpu and --cpu"),
        ("kineto/mi250_minitoy_train_rocm.json.gz", ["--ceilings", "measured", "--ceilings-file", "{tmp}/none.json"],
         "no measured ceilings for 'MI250 GCD / MI210'"),
        ("kineto/mi250_minitoy_train_rocm.json.gz", ["--ceilings-file", "{tmp}/c.json"],
         "--ceilings-file needs --ceilings measured or --cpu"),
        ("kineto/mi250_minitoy_train_rocm.json.gz", ["-o", "{tmp}/ops.txt"], "-o {tmp}/ops.txt: unknown table format"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(data_dir, tmp_path, capsys, trace, extra, message):
    extra = [a.replace("{tmp}", str(tmp_path)) for a in extra]
    message = message.replace("{tmp}", str(tmp_path))
    assert main(["sol", str(data_dir / trace), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("gpuan: error: ") and message in err
    assert not list(tmp_path.glob("ops*"))


def test_a_gpu_given_to_device_points_to_gpu(data_dir, capsys):
    # --device is the engine: a GPU model there is refused before any work, naming --gpu
    with pytest.raises(SystemExit) as exit_:
        main(["sol", str(data_dir / "kineto/mi250_minitoy_train_rocm.json.gz"), "--device", "H100"])
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2 and len(err.splitlines()) == 1 and "--gpu H100" in err


def test_truncated_trace(data_dir, tmp_path, capsys):
    raw = (data_dir / "kineto/mi250_minitoy_train_rocm.json.gz").read_bytes()
    bad = tmp_path / "cut.json.gz"
    bad.write_bytes(raw[: len(raw) // 2])
    out = tmp_path / "ops.csv"
    assert main(["sol", str(bad), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(bad) in err and not out.exists()


def test_gpu_scoring_agrees_with_cpu(data_dir):
    from gpuan import engine

    if not engine.gpu_available():
        pytest.skip("no GPU here (CuPy absent or no CUDA device): the GPU twin runs on the GPU machine")
    trace = load(str(data_dir / "kineto/sampled_128rank_rank0.json.gz"))
    cpu = score(trace, gpu="A100", engine=engine.CPU).ops
    gpu = score(trace, gpu="A100", engine=engine.select("gpu")).ops
    for col in ("flops", "bytes", "estimated_ns", "efficiency"):
        np.testing.assert_allclose(gpu[col].to_numpy(), cpu[col].to_numpy(), rtol=1e-12, equal_nan=True)


def test_cuda_graph_launch_and_flow_arrows_link_generated_trace():
    """A generated trace: one cudaGraphLaunch replaying three kernels, and a kernel whose correlation is
    missing but whose ac2g flow arrow names its launch."""
    import pyarrow as pa

    from gpuan.sol.score import trace_ops
    from gpuan.trace.schema import FLOW_SCHEMA
    from gpuan.trace.table import Trace, build_table

    rows = [  # name, kind, ts, dur, pid, tid, correlation, external_id, dims
        ("aten::graph_replay", "cpu_op", 0, 100, 1, 1, None, 10, None),
        ("aten::mm", "cpu_op", 200, 100, 1, 1, None, 11, "[[64, 64], [64, 64]]"),
        ("cudaGraphLaunch", "runtime", 10, 5, 1, 1, 500, 10, None),
        ("cudaLaunchKernel", "runtime", 210, 5, 1, 1, 501, 11, None),
        ("graph_kernel_a", "kernel", 1000, 50, 0, 7, 500, None, None),
        ("graph_kernel_b", "kernel", 1040, 50, 0, 7, 500, None, None),
        ("graph_kernel_c", "kernel", 1200, 50, 0, 7, 500, None, None),
        ("gemm_kernel", "kernel", 1300, 40, 0, 7, None, None, None),
    ]
    cols = list(zip(*rows))
    events = build_table(
        {
            "name": pa.array(cols[0]).dictionary_encode(), "kind": pa.array(cols[1]).dictionary_encode(),
            "ts": pa.array(cols[2], pa.int64()), "dur": pa.array(cols[3], pa.int64()),
            "pid": pa.array(cols[4], pa.int64()), "tid": pa.array(cols[5], pa.int64()),
            "correlation": pa.array(cols[6], pa.int64()), "external_id": pa.array(cols[7], pa.int64()),
            "input_dims": pa.array(cols[8], pa.string()).dictionary_encode(),
            "input_types": pa.array([None, '["float", "float"]'] + [None] * 6, pa.string()).dictionary_encode(),
            "device": pa.array([None] * 4 + [0] * 4, pa.int16()),
        },
        len(rows),
    )  # fmt: skip
    flows = pa.table(
        {"id": [501, 501], "cat": ["ac2g", "ac2g"], "phase": ["s", "f"], "ts": [210, 1300], "pid": [1, 0],
         "tid": [1, 7], "rank": [None, None]}
    ).cast(FLOW_SCHEMA)  # fmt: skip
    trace = Trace(events, flows, {"source": "generated"})
    activities = trace.of_kind("kernel")
    links = link(activities, trace.of_kind("runtime"), trace.of_kind("cpu_op"), trace.flows)
    assert links.op_of_activity.tolist() == [0, 0, 0, 1]
    ops, busy, *_ = trace_ops(trace)
    table = ops.to_pandas().set_index("name")
    # the graph op: the union of its three kernels (1000..1090 and 1200..1250), not their sum
    assert table.loc["aten::graph_replay", "measured_ns"] == 140 and table.loc["aten::graph_replay", "kernels"] == 3
    assert table.loc["aten::mm", "measured_ns"] == 40 and busy == 180


def test_nsight_nvtx_ranges_are_phases(data_dir, capsys):
    # Nsight SQLite has no shapes: its memcpys are scored from their bytes, kernels are unmodelled, and the
    # NVTX range "saxpy" around the launches is their phase
    path = str(data_dir / "nsys/saxpy_mpi_cuda_rank0.sqlite")
    assert main(["sol", path, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert "saxpy" in doc["by_phase"] and doc["by_phase"]["saxpy"]["ops"] > 0
    assert doc["by_layer_type"]["copy"]["ops"] > 0 and doc["totals"]["model_errors"] == 0


def _paths_walked(annotations) -> list:
    """The phase paths as the rule says, one annotation at a time: its name after the path of the phase that
    holds it on its thread (steps and communication ranges are no phases)."""
    import pyarrow as pa

    from gpuan.sol.link import _NOT_PHASES
    from gpuan.trace.launch import callers

    names = annotations["name"].combine_chunks().dictionary_decode().to_pylist()
    keep = np.array([not _NOT_PHASES.match(n or "") for n in names], bool)
    phases = annotations.filter(pa.array(keep))
    names = [n for n, k in zip(names, keep) if k]
    parent = callers(phases) if phases.num_rows else np.empty(0, np.int64)
    paths: list = []
    for i in range(len(names)):
        chain, j = [], i
        while j >= 0:
            chain.append(names[j])
            j = int(parent[j])
        path = None
        for n in reversed(chain):
            path = f"{path}/{n}" if path else n
        paths.append(path)
    return paths


@pytest.mark.parametrize("name", kineto_files() or ["<no data>"])
def test_phase_paths_follow_the_rule(data_dir, name):
    """Each phase's path, made once per distinct (outer path, name), is what walking its holders gives."""
    from gpuan.sol.link import phase_paths

    if name == "<no data>":
        pytest.skip("no real Kineto traces under ../shared/data")
    trace = load(data_dir / "kineto" / name, use_cache=False)
    for kind in ("annotation", "gpu_annotation"):
        annotations = trace.of_kind(kind)
        phases, paths = phase_paths(annotations)
        assert paths.tolist() == _paths_walked(annotations)
        assert len(paths) == phases.num_rows
