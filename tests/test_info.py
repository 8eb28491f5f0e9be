"""``gpuan.info.analyse`` on the real traces of ../shared/data: the Result's tables and summary, and the
JSON that ``gpuan info`` builds from them."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from gpuan.info import analyse
from gpuan.outputs.info import document, json_text, text
from gpuan.result import Result
from gpuan.trace.load import load

TABLES = {"kinds", "other_categories", "devices", "streams", "top_kernels"}


def test_analyse_returns_the_tables_and_summary(data_dir):
    trace = load(data_dir / "kineto/a100_alexnet.json.gz")
    result = analyse(trace, top=3, engine="cpu")
    assert isinstance(result, Result) and result.analysis == "info" and set(result.tables) == TABLES
    assert all(isinstance(t, pa.Table) for t in result.tables.values())
    s = result.summary
    assert s["events"] == trace.events.num_rows == 870 and s["flows"] == 500 and s["ranks"] == [0]
    assert s["span_ns"] == s["end_ns"] - s["start_ns"] > 0 and s["format"] == "kineto"
    kinds = dict(zip(*(result["kinds"][c].to_pylist() for c in ("kind", "events"))))
    assert sum(kinds.values()) == s["events"] and all(kinds.values())
    assert kinds["kernel"] == trace.of_kind("kernel").num_rows
    top = result["top_kernels"]
    assert top.num_rows == 3 and top.column_names == ["name", "count", "total_ns", "mean_ns", "share"]
    totals = top["total_ns"].to_pylist()
    assert totals == sorted(totals, reverse=True) and 0 < sum(top["share"].to_pylist()) <= 1
    streams = result["streams"].to_pylist()
    assert sum(r["kernels"] for r in streams) == kinds["kernel"]
    assert all(0 < r["busy_ns"] <= s["span_ns"] for r in streams)
    assert result["devices"]["id"].to_pylist() == [0]
    json.dumps(s)  # the summary is plain JSON


def test_to_pandas_gives_every_table(data_dir):
    result = analyse(load(data_dir / "nvprof/mem_mem_2stream_23000.csv"))
    frames = result.to_pandas()
    assert set(frames) == TABLES
    assert list(result.to_pandas("streams").columns) == [
        "rank", "device", "stream", "events", "kernels", "kernel_ns", "busy_ns",
    ]  # fmt: skip
    assert len(frames["streams"]) == 2


def test_rocm_agents_are_named_only_where_mapped(data_dir):
    result = analyse(load(data_dir / "kineto/mi300x_qwen05b_inference.json.gz"), top=1)
    (device,) = result["devices"].to_pylist()
    assert device["rocm_agent"] == 2 and "memory events" in device["mapped_by"]
    doc = document(result)
    assert doc["devices"][0]["rocm_agent"] == 2
    plain = document(analyse(load(data_dir / "nvprof/mem_mem_2stream_23000.csv")))
    assert plain["devices"] and all("rocm_agent" not in d for d in plain["devices"])


def test_the_reports_are_strings_the_command_prints(data_dir):
    result = analyse(load(data_dir / "nvprof/mem_mem_2stream_23000.csv"), top=2)
    assert json.loads(json_text(result)) == json.loads(json.dumps(document(result))) and json_text(result)[-1] == "\n"
    report = text(result, width=100)
    lines = report.splitlines()
    assert lines[0] == f"{result.summary['source']}  (nvprof)" and report.endswith("\n")
    assert max(map(len, lines)) <= 100 and "top kernels by time" in report and "\x1b" not in report
    narrow = text(result, width=60)
    assert max(map(len, narrow.splitlines())) <= 60 and narrow != report


def test_an_empty_kind_selection_gives_empty_tables_with_their_columns(data_dir):
    trace = load(data_dir / "kineto/cpu_tiny_lm_prefill_decode.json.gz")
    result = analyse(trace, top=0)
    assert result["top_kernels"].num_rows == 0 and result["streams"].num_rows == 0
    assert "busy_ns" in result["streams"].column_names and "share" in result["top_kernels"].column_names


@pytest.mark.parametrize(
    "props",
    [[{"id": 0, "name": 7, "numSms": "many"}], [{"id": 0, "numSms": True}], [{"id": [0], "name": "x"}, "junk"]],
)
def test_odd_device_properties_do_not_break_the_tables(data_dir, props):
    from gpuan.trace.table import Trace

    trace = load(data_dir / "nvprof/mem_mem_2stream_23000.csv")
    odd = Trace(trace.events, trace.flows, dict(trace.metadata, device_properties=props))
    (device,) = analyse(odd)["devices"].to_pylist()
    assert device["sms"] is None and device["name"] in ("7", None)


def test_kernel_times_by_code_equal_by_name():
    """Kernel times are summed per dictionary code, then per name: chunks with their own dictionaries, a
    word twice in one dictionary and kernels without a name give the sums of a plain group-by of names."""
    import pyarrow as pa

    from gpuan.info.analysis import _kernel_times

    idx_type = pa.int32()
    chunks = [
        pa.DictionaryArray.from_arrays(pa.array([0, 1, 0, None, 2], idx_type), pa.array(["gemm", "relu", "gemm"])),
        pa.DictionaryArray.from_arrays(pa.array([1, 0, None], idx_type), pa.array(["gemm", "softmax"])),
    ]
    kernels = pa.table({
        "name": pa.chunked_array(chunks),
        "dur": pa.chunked_array([pa.array([5, 7, 11, 13, None]), pa.array([17, 19, 23])]),
    })  # fmt: skip
    got = _kernel_times(kernels)
    by_code = {
        n: (t, c) for n, t, c in zip(got["name"].to_pylist(), got["total_ns"].to_pylist(), got["count"].to_pylist())
    }
    names = [None if n is None else str(n) for n in kernels["name"].to_pylist()]
    durs = [d or 0 for d in kernels["dur"].to_pylist()]
    expected: dict = {}
    for n, d in zip(names, durs):
        total, count = expected.get(n, (0, 0))
        expected[n] = (total + d, count + 1)
    assert by_code == expected == {"gemm": (5 + 11 + 0 + 19, 4), "relu": (7, 1), "softmax": (17, 1), None: (13 + 23, 2)}
