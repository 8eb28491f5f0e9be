"""The nvprof GPU-trace CSV reader, checked against the real sample files read directly with the csv module."""

from __future__ import annotations

import csv
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path

import pytest

from gpuan.errors import TraceError
from gpuan.trace.kinds import KINDS
from gpuan.trace.nvprof import read_nvprof
from gpuan.trace.schema import SCHEMA

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
NVPROF = DATA / "nvprof"
FILES = [
    "mem_mem_1stream_10M.csv",
    "mem_mem_1stream_23000.csv",
    "mem_mem_2stream_10M_h2d_h2d_ovlp.csv",
    "mem_mem_2stream_23000.csv",
]
NS_PER = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}
NOT_NVPROF = "not an nvprof --print-gpu-trace CSV"


def by_time(trace) -> list[dict]:
    """The event rows in time order (the table itself is grouped by kind, in time order within each)."""
    return sorted(trace.events.to_pylist(), key=lambda r: r["ts"])


def sample(name: str) -> Path:
    path = NVPROF / name
    if not path.is_file():
        pytest.skip(f"real test data not found: {path} (the shared data directory ../shared/data is absent)")
    return path


def read_csv(path: Path) -> list[dict]:
    """Return the activity rows with times in ns, parsed here independently of the reader."""
    lines = [ln for ln in path.read_text().splitlines() if ln and not ln.startswith("==")]
    header, units, *rows = list(csv.reader(lines))
    out = []
    for row in rows:
        r = dict(zip(header, row))
        r["start_ns"] = int(Decimal(r["Start"]) * NS_PER[units[header.index("Start")]])
        r["dur_ns"] = int(Decimal(r["Duration"]) * NS_PER[units[header.index("Duration")]])
        out.append(r)
    return out


@pytest.mark.parametrize("name", FILES)
def test_counts_and_kernel_time_per_stream(name):
    path = sample(name)
    expected = read_csv(path)
    trace = read_nvprof(str(path))
    assert trace.events.schema.equals(SCHEMA)
    assert trace.events["kind"].combine_chunks().dictionary.to_pylist() == list(KINDS)
    counts = Counter(trace.events["kind"].to_pylist())
    assert counts["kernel"] == sum(not r["Name"].startswith("[") for r in expected)
    assert counts["memcpy"] == sum(r["Name"].startswith("[CUDA memcpy") for r in expected)
    assert counts["memset"] == sum(r["Name"].startswith("[CUDA memset") for r in expected) == 0
    assert trace.events.num_rows == len(expected)

    kernel_ns: dict[int, int] = defaultdict(int)
    for r in expected:
        if not r["Name"].startswith("["):
            kernel_ns[int(r["Stream"])] += r["dur_ns"]
    got = trace.of_kind("kernel").group_by("stream").aggregate([("dur", "sum")]).to_pylist()
    assert {g["stream"]: g["dur_sum"] for g in got} == kernel_ns

    base = min(r["start_ns"] for r in expected)
    assert trace.metadata["base_time_ns"] == base
    assert [r["ts"] for r in by_time(trace)] == [r["start_ns"] - base for r in expected]
    assert [r["dur"] for r in by_time(trace)] == [r["dur_ns"] for r in expected]


@pytest.mark.parametrize("name", FILES)
def test_per_stream_work_and_devices(name):
    """Each run does, per stream, 2 H2D copies, 1 kernel and 1 D2H copy on one GeForce GTX 950."""
    trace = read_nvprof(str(sample(name)))
    streams = 2 if "2stream" in name else 1
    per_stream = Counter((r["stream"], r["kind"], r["memcpy_kind"]) for r in by_time(trace))
    assert len({s for s, _, _ in per_stream}) == streams
    for s in {s for s, _, _ in per_stream}:
        assert per_stream[(s, "memcpy", "HtoD")] == 2
        assert per_stream[(s, "memcpy", "DtoH")] == 1
        assert per_stream[(s, "kernel", None)] == 1
    assert trace.metadata["device_properties"] == [{"id": 0, "name": "GeForce GTX 950"}]
    events = by_time(trace)
    assert {r["device"] for r in events} == {r["pid"] for r in events} == {0}
    assert all(r["tid"] == r["stream"] for r in events)
    assert trace.metadata["format"] == "nvprof" and trace.metadata["rank"] is None


def test_exact_rows_10m():
    trace = read_nvprof(str(sample("mem_mem_1stream_10M.csv")))
    h2d, _, kernel, d2h = by_time(trace)
    assert trace.metadata["base_time_ns"] == 610_840_271  # 610.840271 ms
    assert (h2d["ts"], h2d["dur"]) == (0, 6_436_815)
    assert h2d["bytes"] == d2h["bytes"] == 10_000_000 * 4  # 38.146973 MB (MB = 2**20 B): 10M floats
    assert (h2d["name"], h2d["cat"], h2d["memcpy_kind"]) == ("[CUDA memcpy HtoD]", "gpu_memcpy", "HtoD")
    assert (kernel["ts"], kernel["dur"]) == (623_719_789 - 610_840_271, 1_276_618)
    assert kernel["name"] == "kernel_vectorAdd(float const *, float const *, int, int, float*)"
    assert kernel["correlation"] == 215  # nvprof's "[215]" suffix: the launching API call
    assert (kernel["grid_x"], kernel["grid_y"], kernel["grid_z"]) == (39063, 1, 1)
    assert (kernel["block_x"], kernel["block_y"], kernel["block_z"]) == (256, 1, 1)
    assert (kernel["registers"], kernel["shared_memory"], kernel["bytes"]) == (8, 0, None)
    assert (d2h["memcpy_kind"], d2h["dur"]) == ("DtoH", 6_269_646)


def test_exact_rows_23000_in_microseconds():
    trace = read_nvprof(str(sample("mem_mem_1stream_23000.csv")))
    events = by_time(trace)
    assert [r["bytes"] for r in events] == [23_000 * 4, 23_000 * 4, None, 23_000 * 4]  # 89.843750 KB, KB = 1024 B
    kernel = events[2]
    assert (kernel["ts"], kernel["dur"]) == (527_157_829 - 526_961_828, 61_056)  # Duration in us
    assert (kernel["registers"], kernel["grid_x"], kernel["correlation"]) == (28, 90, 223)


@pytest.mark.parametrize(
    "name, span_ns",
    [("mem_mem_2stream_23000.csv", 307_395), ("mem_mem_2stream_10M_h2d_h2d_ovlp.csv", 37_784_463)],
)
def test_measured_two_stream_span(name, span_ns):
    """The provenance notes give the measured spans: 0.3074 ms and 37.78 ms."""
    events = by_time(read_nvprof(str(sample(name))))
    assert max(r["ts"] + r["dur"] for r in events) - min(r["ts"] for r in events) == span_ns


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "trace.csv"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    "text",
    [
        "name,value\nalpha,1\nbeta,2\n",
        "==1== Profiling result:\n"
        '"Type","Time(%)","Time","Calls","Avg","Min","Max","Name"\n'
        ",%,ms,,ms,ms,ms,\n"
        '"GPU activities",60.0,1.0,1,1.0,1.0,1.0,"[CUDA memcpy HtoD]"\n',
        '"Start","Duration","Name","Correlation_ID"\ns,s,,\n1.0,0.5,"cudaMalloc",1\n',
        "==1== NVPROF is profiling process 1\n==1== Profiling result:\n",
        "",
    ],
    ids=["plain-csv", "gpu-summary", "api-trace", "banner-only", "empty"],
)
def test_non_nvprof_csv(tmp_path, text):
    with pytest.raises(TraceError) as err:
        read_nvprof(write(tmp_path, text))
    assert err.value.problem.startswith(NOT_NVPROF)


def test_bad_value_names_its_line(tmp_path):
    text = (
        '"Start","Duration","Device","Context","Stream","Name"\n'
        "ms,us,,,,\n"
        '1.0,2.0,"GPU (0)","1","7","k [1]"\n'
        'soon,2.0,"GPU (0)","1","7","k [2]"\n'
    )
    with pytest.raises(TraceError, match="line 4: Start"):
        read_nvprof(write(tmp_path, text))


def test_missing_file(tmp_path):
    with pytest.raises(TraceError, match="no such file"):
        read_nvprof(str(tmp_path / "absent.csv"))


def test_units_memset_and_peer_copies(tmp_path):
    """Units the samples do not use (s, ns, GB), memsets, peer copies and unified-memory rows."""
    text = (
        "==7== Profiling result:\n"
        '"Start","Duration","Grid X","Grid Y","Grid Z","Block X","Block Y","Block Z","Registers Per Thread",'
        '"Static SMem","Dynamic SMem","Size","Throughput","SrcMemType","DstMemType",'
        '"Device","Context","Stream","Name"\n'
        "s,ns,,,,,,,,KB,B,GB,GB/s,,,,,,\n"
        '2.000000001,1500,,,,,,,,,,0.5,1.0,,,"Tesla V100 (1)","1","7","[CUDA memset]"\n'
        '2.000000101,250,,,,,,,,,,0.25,1.0,"Device","Device","Tesla V100 (1)","1","8","[CUDA memcpy PtoP]"\n'
        '2.1,10,1,2,3,4,5,6,32,1,256,,,,,"Tesla V100 (1)","1","7","void k<int>(int*) [99]"\n'
        '2.2,10,,,,,,,,,,0.0009765625,,,,"Tesla V100 (1)","1",,"[Unified Memory GPU page faults]"\n'
    )
    trace = read_nvprof(write(tmp_path, text))
    events = by_time(trace)
    assert trace.metadata["base_time_ns"] == 2_000_000_001
    assert [(r["kind"], r["ts"], r["dur"]) for r in events] == [
        ("memset", 0, 1500),
        ("memcpy", 100, 250),
        ("kernel", 99_999_999, 10),
        ("other", 199_999_999, 10),
    ]
    memset, peer, kernel, fault = events
    assert (memset["bytes"], memset["name"], memset["cat"]) == (2**29, "[CUDA memset]", "gpu_memset")
    assert (peer["bytes"], peer["memcpy_kind"], peer["stream"]) == (2**28, "PtoP", 8)
    assert (kernel["name"], kernel["correlation"], kernel["registers"]) == ("void k<int>(int*)", 99, 32)
    assert (kernel["grid_z"], kernel["block_z"], kernel["shared_memory"]) == (3, 6, 1024 + 256)
    assert (fault["bytes"], fault["stream"], fault["tid"]) == (2**20, None, None)
    assert trace.metadata["device_properties"] == [{"id": 1, "name": "Tesla V100"}]
    assert {r["device"] for r in events} == {1}
