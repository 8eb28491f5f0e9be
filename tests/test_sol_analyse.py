"""``gpuan.sol.analyse`` on a real trace: the one contract's Result (Arrow tables, a JSON-able summary), its
tables agreeing with the scorer beneath it and with each other, and the CLI's report made from it."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

import gpuan.sol
from gpuan.cli import main
from gpuan.devices.ceilings import read_ceilings
from gpuan.devices.model import Ceilings
from gpuan.errors import TraceError, UsageError
from gpuan.outputs import sol as report
from gpuan.result import Result
from gpuan.sol import analyse, score
from gpuan.sol.sections import TOTALS
from gpuan.trace.load import load

TABLES = {"ops", "by_layer_type", "by_function", "by_phase", "lost_time"}


@pytest.fixture(scope="module")
def mi250(data_dir):
    return load(str(data_dir / "kineto/mi250_minitoy_train_rocm.json.gz"))


@pytest.fixture(scope="module")
def result(mi250) -> Result:
    return analyse(mi250, engine="cpu")


def test_analyse_returns_the_scored_ops_and_sections_as_arrow(mi250, result):
    assert gpuan.sol.analyse is analyse and result.analysis == "sol"
    assert set(result.tables) == TABLES and all(isinstance(t, pa.Table) for t in result.tables.values())
    scored = score(mi250)
    assert result["ops"].equals(scored.ops)
    assert result.summary["device"] == "MI250 GCD / MI210" and result.summary["ceilings"] == "datasheet"
    assert result.summary["ops"] == scored.ops.num_rows == 15 and result.summary["model_errors"] == 0
    assert result.summary["op_ms"] == scored.op_ns / 1e6 and result.summary["shares_of"] == "op_ms"
    assert set(TOTALS) | {"source", "on_cpu", "roofs"} == set(result.summary)
    json.dumps(result.summary)  # plain numbers and strings only


def test_sections_add_up_to_the_ops(result):
    ops = result.to_pandas("ops")
    for name, key in (("by_layer_type", "layer"), ("by_function", "name"), ("by_phase", "phase")):
        table = result.to_pandas(name)
        assert table.columns.tolist() == [key, "ops", "estimated_ms", "share", "measured_ms", "efficiency"]
    layers = result.to_pandas("by_layer_type")
    assert layers.ops.sum() == len(ops) and layers.share.sum() == pytest.approx(1.0)
    assert layers.measured_ms.sum() == pytest.approx(ops.measured_ns.sum() / 1e6)
    # the phase table rolls children up: its top-level rows add up to every op
    phases = result.to_pandas("by_phase")
    assert phases[~phases.phase.str.contains("/")].ops.sum() == len(ops)
    lost = result.to_pandas("lost_time")
    assert len(lost) == result.summary["modelled_ops"] and lost.lost_ns.is_monotonic_decreasing


def test_to_pandas_gives_every_table(result):
    frames = result.to_pandas()
    assert set(frames) == TABLES and len(frames["ops"]) == result["ops"].num_rows
    assert frames["by_function"].name.iloc[0] == result.to_pandas("by_function").name.iloc[0]


def test_top_limits_the_lost_table_only(mi250):
    small = analyse(mi250, top=2)
    assert small["lost_time"].num_rows == 2 and small["by_function"].num_rows > 2


def test_report_and_json_come_from_the_result(result):
    text = report.text(result, top=3)
    assert "device MI250 GCD / MI210 (datasheet roofs)" in text and "top 3 ops by lost time" in text
    doc = json.loads(report.json_text(result))
    assert list(doc) == ["totals", "by_layer_type", "by_function", "by_phase", "roofs"]
    assert list(doc["totals"]) == list(TOTALS)
    assert sum(row["ops"] for row in doc["by_layer_type"].values()) == result.summary["ops"]


def test_options_name_the_gpu_or_the_cpu(mi250, tmp_path):
    assert analyse(mi250, gpu="H100").summary["device"] == "H100 SXM5"
    with pytest.raises(UsageError, match="--gpu: unknown device 'Z100'"):
        analyse(mi250, gpu="Z100")
    none = tmp_path / "none.json"
    with pytest.raises(UsageError, match=f"no measured ceilings for 'cpu' in {none}; run gpuan sol calibrate --cpu"):
        analyse(mi250, cpu=True, ceilings=read_ceilings(none))


def test_measured_ceilings_are_handed_in_loaded(mi250, tmp_path, monkeypatch):
    # the analysis reads neither the ceilings file nor $GPUAN_CEILINGS: only what it is handed counts
    monkeypatch.setenv("GPUAN_CEILINGS", str(tmp_path / "never_read.json"))
    saved = {"MI250 GCD / MI210": {"memory_bandwidth": 1e12, "flops": {"vector:fp32": 1e13}, "measured_at": "t"}}
    path = tmp_path / "ceilings.json"
    path.write_text(json.dumps(saved))
    loaded = read_ceilings(path)
    assert loaded == Ceilings(saved, path, f"--ceilings-file {path}")
    for ceilings in (loaded, Ceilings(saved)):
        result = analyse(mi250, ceilings=ceilings)
        assert result.summary["ceilings"] == "measured" and result.summary["device"] == "MI250 GCD / MI210"
        roofs = result.summary["roofs"]
        # measured rates replace the datasheet's; rates not measured keep the datasheet value
        assert roofs["memory_bandwidth"] == 1e12 and roofs["flops"]["vector:fp32"] == 1e13
        assert roofs["flops"]["tensor:fp16"] == analyse(mi250).summary["roofs"]["flops"]["tensor:fp16"]
    with pytest.raises(UsageError, match="no measured ceilings for 'cpu' in the ceilings given"):
        analyse(mi250, cpu=True, ceilings=Ceilings(saved))


def test_measured_ceilings_must_be_loaded_first(mi250):
    with pytest.raises(UsageError, match=r"ceilings='measured': use \"datasheet\", or the loaded ceilings file"):
        analyse(mi250, ceilings="measured")
    with pytest.raises(UsageError, match=r"cpu=True scores against this machine's measured ceilings: pass ceilings="):
        analyse(mi250, cpu=True)


def test_a_bad_ceilings_file_names_the_option(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("[1]")
    with pytest.raises(UsageError, match=f"--ceilings-file {bad}: not a ceilings file"):
        read_ceilings(bad)


def test_environment_variable_names_the_ceilings_file(mi250, tmp_path, monkeypatch, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("not json")
    monkeypatch.setenv("GPUAN_CEILINGS", str(bad))
    with pytest.raises(UsageError, match=f"GPUAN_CEILINGS={bad}: not a ceilings file"):
        read_ceilings()
    # and the command reads it (and names it) only where measured roofs are asked for
    trace = str(mi250.metadata["source"])
    assert main(["sol", trace, "--top", "1"]) == 0
    for option in ("--ceilings=measured", "--cpu"):
        capsys.readouterr()
        assert main(["sol", trace, option]) == 2
        assert capsys.readouterr().err.startswith(f"gpuan: error: GPUAN_CEILINGS={bad}: not a ceilings file")


def test_a_trace_without_a_device_is_a_trace_error(data_dir):
    trace = load(str(data_dir / "kineto/sampled_128rank_rank0.json.gz"))
    with pytest.raises(TraceError, match="the trace records no device; pass --gpu"):
        analyse(trace)
