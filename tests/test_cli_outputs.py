"""What the commands write, run as a user runs them: files asked for are written whatever happens to stdout
(a reader that went away), every file written is announced in one line on stderr, bad input is one line
naming the file and what is wrong, and demo keeps its results apart from its trace."""

from __future__ import annotations

import csv
import gzip
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest


def gpuan(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuan", *map(str, args)], capture_output=True, text=True, cwd=cwd)


def gpuan_closed_stdout(*args, cwd=None, stderr_too: bool = False) -> subprocess.CompletedProcess:
    """Run gpuan with a stdout whose reader is gone before it starts (``gpuan ... | true``): every write to
    it fails with a broken pipe. With `stderr_too`, stderr goes to that pipe as well (``2>&1 | true``), and
    the result's stderr is empty."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        p = subprocess.run(
            [sys.executable, "-m", "gpuan", *map(str, args)], stdout=write_end,
            stderr=write_end if stderr_too else subprocess.PIPE, text=True, cwd=cwd,
        )  # fmt: skip
    finally:
        os.close(write_end)
    return p


def gpuan_closed_stderr(*args) -> subprocess.CompletedProcess:
    """Run gpuan with a stderr whose reader is gone before it starts (``gpuan ... 2>&1 >/dev/null | true``)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "gpuan", *map(str, args)], stdout=subprocess.PIPE, stderr=write_end
        )
    finally:
        os.close(write_end)


def csv_rows(path: Path) -> int:
    """The data rows of a CSV file, counted by the csv module (cells may hold newlines)."""
    with open(path, newline="") as f:
        return sum(1 for _ in csv.reader(f)) - 1


def wrote_lines(stderr: str) -> dict[str, str]:
    """{path: detail} of the ``gpuan: wrote PATH (DETAIL)`` lines."""
    return dict(re.findall(r"^gpuan: wrote (.+?) \((.*)\)$", stderr, flags=re.MULTILINE))


def assert_quiet(r: subprocess.CompletedProcess) -> None:
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr and "Exception ignored" not in r.stderr, r.stderr


def assert_one_line_error(r: subprocess.CompletedProcess, path, words: str) -> str:
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert str(path) in lines[0] and words in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def ddp(data_dir) -> Path:
    return data_dir / "kineto" / "a100_ddp2_rank0_nccl.json.gz"


# ---------------------------------------------------------------------------------------- a closed stdout


def test_cycles_writes_its_files_when_stdout_is_closed(tmp_path, ddp):
    r = gpuan_closed_stdout("cycles", ddp, "-o", tmp_path / "p")
    assert_quiet(r)
    files = sorted(tmp_path.glob("p_cycle_*.csv"))
    assert files and set(wrote_lines(r.stderr)) == {str(f) for f in files}
    assert gpuan("cycles", ddp, "--format", "json").stdout.count('"k":') == len(files)


def test_sol_writes_table_and_chart_when_stdout_is_closed(tmp_path, ddp):
    r = gpuan_closed_stdout("sol", ddp, "-o", tmp_path / "x.csv", "--html", tmp_path / "r.html", "--format", "json")
    assert_quiet(r)
    wrote = wrote_lines(r.stderr)
    assert wrote[str(tmp_path / "x.csv")] == f"{csv_rows(tmp_path / 'x.csv'):,} rows"
    assert (tmp_path / "r.html").stat().st_size > 0 and str(tmp_path / "r.html") in wrote


def test_sol_json_to_a_reader_that_stops_early(tmp_path, ddp):
    """``gpuan sol T -o x.csv --format json | head -c 10``: the reader takes 10 bytes and goes."""
    p = subprocess.Popen(
        [sys.executable, "-m", "gpuan", "sol", str(ddp), "-o", str(tmp_path / "x.csv"), "--format", "json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    first = p.stdout.read(10)
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait() == 0, err
    assert first == b'{\n "totals' and "Traceback" not in err
    assert csv_rows(tmp_path / "x.csv") > 0


@pytest.mark.parametrize("command", ["info", "convert", "replay", "streams", "tensors", "compare", "demo"])
def test_every_command_survives_a_closed_stdout(tmp_path, data_dir, ddp, command):
    """Each command, its stdout closed, still writes what it was asked for, and exits quietly."""
    if command == "info":
        args, want = ["info", ddp], []
    elif command == "convert":
        args, want = ["convert", ddp, "-o", tmp_path / "t.parquet"], [tmp_path / "t.parquet"]
    elif command == "replay":
        run = data_dir / "kineto" / "cpu_ddp_gloo_4rank_slow_rank1_step2"
        args, want = ["replay", run, "-o", tmp_path / "out"], [tmp_path / "out"]
    elif command == "streams":
        trace = data_dir / "nvprof" / "mem_mem_1stream_23000.csv"
        args, want = ["streams", trace, "--streams", "2", "-o", tmp_path / "p.json"], [tmp_path / "p.json"]
    elif command == "tensors":
        from gpuan.synth.tensors import write_sample

        model, log, names = write_sample(tmp_path / "in", tokens=4)
        args, want = ["tensors", log, "--gguf", model, "--names", names, "-o", tmp_path / "out"], [tmp_path / "out"]
    elif command == "compare":
        assert gpuan("cycles", ddp, "-o", tmp_path / "a").returncode == 0
        base = tmp_path / "a_cycle_1.csv"
        args, want = ["compare", base, base, "-o", tmp_path / "c.csv"], [tmp_path / "c.csv"]
    else:
        args, want = ["demo", "--dir", tmp_path / "demo"], [tmp_path / "demo" / "out"]
    r = gpuan_closed_stdout(*args)
    assert_quiet(r)
    wrote = wrote_lines(r.stderr)
    for path in want:
        written = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        assert written and {str(p) for p in written} <= set(wrote), (written, wrote)
        for p in written:
            if p.suffix == ".csv":
                assert wrote[str(p)].endswith(f"{csv_rows(p):,} rows") or command == "demo"


# ---------------------------------------------------------------------------------------- a closed stderr


@pytest.fixture
def lists_json(tmp_path) -> Path:
    """A JSON document that is not a trace: a list of lists."""
    path = tmp_path / "lists.json"
    path.write_text(json.dumps([[1, 2], [3]]))
    return path


def test_bad_input_exits_2_when_stderr_is_closed(lists_json):
    """``gpuan info lists.json 2>&1 | true``: the one-line error has no reader, the exit code still says bad
    input, as it does with stderr open."""
    assert_one_line_error(gpuan("info", lists_json), lists_json, "not a Chrome/Kineto trace")
    r = gpuan_closed_stdout("info", lists_json, stderr_too=True)
    assert r.returncode == 2
    r = gpuan_closed_stderr("info", lists_json)
    assert r.returncode == 2 and r.stdout == b""


def test_cycles_writes_its_files_when_stdout_and_stderr_are_closed(tmp_path, ddp):
    """``gpuan cycles T -o p 2>&1 | true``: no one reads the report nor the ``wrote`` lines, the files
    are written all the same, and the exit is 0."""
    r = gpuan_closed_stdout("cycles", ddp, "-o", tmp_path / "p", stderr_too=True)
    assert r.returncode == 0
    files = sorted(tmp_path.glob("p_cycle_*.csv"))
    assert files and all(csv_rows(f) > 0 for f in files)
    assert gpuan("cycles", ddp, "--format", "json").stdout.count('"k":') == len(files)


def test_convert_writes_its_file_when_stderr_is_closed(tmp_path, ddp):
    """convert announces its file inside the run (the Parquet writer puts it in place itself): that line
    meeting a closed stderr neither loses the file nor changes the exit code."""
    import pyarrow.parquet as pq

    assert gpuan("convert", ddp, "-o", tmp_path / "open.parquet").returncode == 0
    r = gpuan_closed_stderr("convert", ddp, "-o", tmp_path / "t.parquet")
    assert r.returncode == 0
    assert pq.read_metadata(tmp_path / "t.parquet").num_rows == pq.read_metadata(tmp_path / "open.parquet").num_rows


# ------------------------------------------------------------------------------------------ wrong types


@pytest.mark.parametrize("value", ["abc", "12.5"])
def test_a_duration_of_the_wrong_type_is_bad_input(tmp_path, data_dir, value):
    """A kernel's dur written as a string, in a real trace: exit 2, one line naming the file, the event
    (its index in traceEvents, counted here) and the field; no output, no cache."""
    doc = json.loads(gzip.open(data_dir / "kineto" / "v100_ddp_6steps_trace_diff_test.json.gz").read())
    index = [i for i, e in enumerate(doc["traceEvents"]) if e.get("cat") == "kernel"][100]
    doc["traceEvents"][index]["dur"] = value
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    for args in (["info", path], ["sol", path, "-o", tmp_path / "x.csv"], ["cycles", path, "-o", tmp_path / "p"]):
        line = assert_one_line_error(gpuan(*args), path, f"traceEvents[{index:,}]")
        assert f'dur is "{value}", not a number' in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]


# ------------------------------------------------------------------------------------------------ demo


def test_demo_then_info_on_its_directory(tmp_path):
    d = tmp_path / "demo"
    r = gpuan("demo", "--dir", d)
    assert r.returncode == 0, r.stderr
    csvs = sorted((d / "out").glob("*.csv"))
    assert csvs and not list(d.glob("*.csv"))
    assert set(wrote_lines(r.stderr)) == {str(p) for p in csvs}
    info = gpuan("info", d, "--format", "json")
    assert info.returncode == 0, info.stderr
    assert (
        json.loads(info.stdout)["events"]
        == json.loads(gpuan("info", d / "gpuan_sample.json.gz", "--format", "json").stdout)["events"]
    )


# -------------------------------------------------------------------------------------- what was written


def test_tensors_says_what_it_wrote(tmp_path):
    from gpuan.synth.tensors import write_sample

    model, log, names = write_sample(tmp_path / "in", tokens=4)
    r = gpuan("tensors", log, "--gguf", model, "--names", names, "-o", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    wrote = wrote_lines(r.stderr)
    tables = sorted((tmp_path / "out").glob("*.csv"))
    assert tables and {str(p): f"{csv_rows(p):,} rows" for p in tables}.items() <= wrote.items()
    assert str(tmp_path / "out" / "report.html") in wrote
    assert "wrote" not in r.stdout


def test_convert_and_compare_say_it_on_stderr_too(tmp_path, ddp):
    r = gpuan("convert", ddp, "-o", tmp_path / "t.parquet")
    assert list(wrote_lines(r.stderr)) == [str(tmp_path / "t.parquet")] and "wrote" not in r.stdout
    assert gpuan("cycles", ddp, "-o", tmp_path / "a").returncode == 0
    r = gpuan("compare", tmp_path / "a_cycle_1.csv", tmp_path / "a_cycle_2.csv", "-o", tmp_path / "c.csv")
    assert r.returncode == 0, r.stderr
    assert wrote_lines(r.stderr) == {str(tmp_path / "c.csv"): f"{csv_rows(tmp_path / 'c.csv'):,} rows"}


# ---------------------------------------------------------------------------------------------- messages


def test_a_json_document_that_is_not_a_trace(tmp_path):
    p = tmp_path / "lists.json"
    p.write_text(json.dumps([[1, 2], [3]]))
    assert_one_line_error(gpuan("info", p), p, "not a Chrome/Kineto trace: element 0 of its top-level array is a list")
    q = tmp_path / "numbers.json"
    q.write_text(json.dumps({"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 1}, 7]}))
    assert_one_line_error(gpuan("info", q), q, "not a Chrome/Kineto trace: traceEvents[1] is a number")


def test_nsight_exports_without_cuda_or_nvtx_activity(tmp_path, data_dir):
    real = data_dir / "nsys" / "saxpy_mpi_cuda_rank0.sqlite"
    emptied = tmp_path / "emptied.sqlite"
    emptied.write_bytes(real.read_bytes())
    with sqlite3.connect(emptied) as c:
        for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                      "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS"):  # fmt: skip
            c.execute(f"DELETE FROM {table}")
    cpu_only = tmp_path / "cpu_only.sqlite"
    with sqlite3.connect(cpu_only) as c:
        c.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)")
        c.execute("CREATE TABLE OSRT_API (start INTEGER, end INTEGER, nameId INTEGER)")
    for path in (emptied, cpu_only):
        assert_one_line_error(gpuan("info", path), path, "an Nsight Systems export without CUDA or NVTX activity")


def test_an_nsight_report_names_the_export_command(tmp_path):
    p = tmp_path / "run.nsys-rep"
    p.write_bytes(b"\x00\x01binary report")
    assert_one_line_error(gpuan("info", p), p, "nsys export --type sqlite")


def test_info_names_categories_it_does_not_analyse(tmp_path):
    """CUPTI range profiling and MTIA activity are listed by category in info, with what they are."""
    events = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 1, "args": {"stream": 7}}]
    events += [{"ph": "X", "cat": "cuda_profiler_range", "name": "range", "pid": 0, "tid": 1, "ts": 2, "dur": 1}] * 3
    events += [{"ph": "X", "cat": "mtia_runtime", "name": "launch", "pid": 1, "tid": 1, "ts": 3, "dur": 1}] * 2
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": events}))
    s = json.loads(gpuan("info", p, "--format", "json").stdout)
    other = {c["category"]: (c["events"], c["what"]) for c in s["other_categories"]}
    assert other["cuda_profiler_range"][0] == 3 and "CUPTI range profiling" in other["cuda_profiler_range"][1]
    assert other["mtia_runtime"][0] == 2 and "MTIA" in other["mtia_runtime"][1]
    assert s["per_kind"]["other"] == 5
    text = gpuan("info", p).stdout
    assert "cuda_profiler_range" in text and "mtia_runtime" in text


@pytest.mark.parametrize(
    "name", ["mi300x_qwen05b_inference.json.gz", "mi300x_xdit_sd35_rank0.json.gz", "mi250_minitoy_train_rocm.json.gz"]
)
def test_info_names_rocm_devices(data_dir, name):
    """Truth from the raw file: the model its deviceProperties list (one per trace) and the agent ids its
    kernels carry."""
    path = data_dir / "kineto" / name
    doc = json.loads(gzip.open(path).read())
    models = {p["name"] for p in doc["deviceProperties"]}
    agents = {e["args"]["device"] for e in doc["traceEvents"] if e.get("cat") == "kernel"}
    s = json.loads(gpuan("info", path, "--format", "json").stdout)
    assert [d["name"] for d in s["devices"]] == sorted(models) * len(agents)
    assert {d["rocm_agent"] for d in s["devices"]} == agents
    assert f"{s['devices'][0]['name']} (ROCm agent" in gpuan("info", path).stdout.replace("\n", " ")
