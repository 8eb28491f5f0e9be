"""Converting a Kineto trace in parts under a memory ceiling (``gpuan convert --max-memory``): the Parquet
file holds the table, flows and metadata of a conversion in memory, however the parts were cut; the
ceiling holds; bad input leaves nothing behind."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import DATA, kineto_files

from gpuan.trace import bounded, parquet
from gpuan.trace.kineto import read_kineto, reader
from gpuan.trace.projection import projection

GENERATOR = DATA.parent / "tools" / "gen_kineto_trace.py"


def plain(t: pa.Table) -> pa.Table:
    """The table with dictionary columns decoded (dictionaries may be ordered and chunked differently)."""
    cols = [c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c for c in t.columns]
    return pa.table(cols, names=t.column_names)


def convert_both(src: Path, tmp: Path, part_rows: int, monkeypatch) -> tuple[Path, Path]:
    """Convert `src` in memory and in parts of `part_rows` rows; return both files."""
    whole = parquet.write(read_kineto(str(src)), tmp / "whole.parquet")
    monkeypatch.setattr(bounded, "part_rows_for", lambda max_memory: part_rows)
    # a part ends where a block read ends: small blocks, so that small files are cut into many parts too
    monkeypatch.setattr(reader, "BLOCK_BYTES", 4096)
    parts = tmp / "parts.parquet"
    bounded.convert(src, parts, max_memory=1 << 30)
    return whole, parts


def parts_made(monkeypatch) -> list[int]:
    """Record the number of parts each conversion spills (one entry per conversion)."""
    from gpuan.trace import spill

    counts = []
    merged = spill.Spill.merged

    def counted(self, rows):
        counts.append(len(self.runs))
        return merged(self, rows)

    monkeypatch.setattr(spill.Spill, "merged", counted)
    return counts


def assert_same_file(whole: Path, parts: Path) -> None:
    """The two Parquet files load to the same trace, in the same row groups."""
    a, b = parquet.read(whole), parquet.read(parts)
    assert a.events.schema.equals(b.events.schema)
    assert plain(a.events).equals(plain(b.events))
    assert plain(a.flows).equals(plain(b.flows))
    assert a.metadata == b.metadata
    fa, fb = pq.ParquetFile(whole), pq.ParquetFile(parts)
    groups = [[f.metadata.row_group(i).num_rows for i in range(f.num_row_groups)] for f in (fa, fb)]
    assert groups[0] == groups[1]
    assert fa.metadata.metadata[parquet.NULLS_KEY] == fb.metadata.metadata[parquet.NULLS_KEY]


@pytest.mark.parametrize("name", kineto_files())
def test_real_traces_in_parts_equal_whole(tmp_path, data_dir, monkeypatch, name):
    # 997 rows: parts cut mid-step, mid-kernel-launch, between a ROCm launch call and its kernel
    counts = parts_made(monkeypatch)
    whole, parts = convert_both(data_dir / "kineto" / name, tmp_path, 997, monkeypatch)
    assert_same_file(whole, parts)
    rows = pq.ParquetFile(whole).metadata.num_rows
    assert counts[0] >= min(rows // 997, 3), (counts, rows)  # really cut into parts
    assert not list(tmp_path.glob("*.parts.*")), "the spilled parts are removed"


def test_run_directory_ranks_in_parts_equal_whole(tmp_path, data_dir, monkeypatch):
    rank = sorted((data_dir / "kineto" / "dlrm_8rank_nccl").glob("*.json.gz"))[3]
    whole, parts = convert_both(rank, tmp_path, 500, monkeypatch)
    assert_same_file(whole, parts)


@pytest.mark.parametrize("name", ["a100_ddp2_rank0_nccl.json.gz", "mi300x_resnet_ddp_act_checkpoint.json.gz"])
def test_parallel_blocks_in_parts_equal_whole(tmp_path, data_dir, monkeypatch, name):
    # two scanner threads on blocks large enough to scan in parallel: a block's chunks are drained while the
    # threads scan its later chunks and the next block's, so a part is handed on while chunks are scanned
    monkeypatch.setenv("GPUAN_THREADS", "2")
    monkeypatch.setattr(reader, "MIN_PARALLEL_BYTES", 1 << 10)
    whole = parquet.write(read_kineto(str(data_dir / "kineto" / name)), tmp_path / "whole.parquet")
    monkeypatch.setattr(bounded, "part_rows_for", lambda max_memory: 997)
    monkeypatch.setattr(reader, "BLOCK_BYTES", 1 << 15)
    counts = parts_made(monkeypatch)
    parts = tmp_path / "parts.parquet"
    bounded.convert(data_dir / "kineto" / name, parts, max_memory=1 << 30)
    assert_same_file(whole, parts)
    assert counts[0] >= 3, counts


def quirky_trace() -> dict:
    """A small trace with everything that spans parts: B/E pairs (nested, across parts, out of file order),
    string pids and tids, instants, events without ts, flows, a ROCm launch call whose kernel (grid in
    work-items) comes rows later, [memory] events naming the GPU, and metadata after the events."""
    ev = [
        {"ph": "M", "name": "process_name", "pid": "Spans", "args": {"name": "spans"}},
        {"ph": "M", "name": "thread_name", "pid": 7, "tid": "worker", "args": {"name": "w"}},
    ]
    for i in range(40):
        t = 1000 + 100 * i
        ev.append({"ph": "B", "name": f"outer{i}", "pid": 7, "tid": "worker", "ts": t, "cat": "user_annotation"})
        ev.append({"ph": "X", "name": "aten::mm", "pid": 7, "tid": 8, "ts": t + 5, "dur": 20, "cat": "cpu_op",
                   "args": {"External id": i, "Input Dims": [[4, 4], [4, 4]]}})  # fmt: skip
        ev.append({"ph": "X", "name": "hipExtModuleLaunchKernel", "pid": 7, "tid": 8, "ts": t + 10, "dur": 4,
                   "cat": "cuda_runtime", "args": {"correlation": 500 + i}})  # fmt: skip
        ev.append({"ph": "s", "id": 500 + i, "pid": 7, "tid": 8, "ts": t + 10, "cat": "ac2g", "name": "ac2g"})
        ev.append({"ph": "i", "name": "mark", "pid": "Spans", "tid": "Traces", "ts": t + 1, "s": "t"})
        if i % 7 == 0:
            ev.append({"ph": "X", "name": "no time", "pid": 7, "tid": 8, "dur": 1, "cat": "cpu_op"})
            ev.append({"ph": "i", "name": "[memory]", "pid": 7, "tid": 8, "ts": t + 2, "cat": "cpu_instant_event",
                       "args": {"Device Type": 1, "Device Id": 3, "Bytes": 64}})  # fmt: skip
    for i in range(40):  # kernels rows after their launch calls, in reverse time order
        t = 1000 + 100 * (39 - i)
        ev.append({"ph": "X", "name": "Cijk_gemm", "pid": 5, "tid": "stream 2", "ts": t + 30, "dur": 9,
                   "cat": "kernel", "args": {"correlation": 500 + 39 - i, "device": 5, "stream": 2,
                                             "grid": [1024, 2, 1], "block": [256, 1, 1]}})  # fmt: skip
        ev.append({"ph": "f", "id": 500 + 39 - i, "pid": 5, "tid": "stream 2", "ts": t + 30, "cat": "ac2g",
                   "name": "ac2g", "bp": "e"})  # fmt: skip
    for i in reversed(range(40)):  # the E events last, newest first
        ev.append({"ph": "E", "pid": 7, "tid": "worker", "ts": 1000 + 100 * i + 60})
    return {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "AMD Instinct MI300X"}],
        "distributedInfo": {"rank": 0, "world_size": 1},
        "traceEvents": ev,
        "roctracer_version": "4.1",
        "traceName": "quirky",
        "baseTimeNanoseconds": 1700000000000000000,
    }


@pytest.mark.parametrize("part_rows", [3, 17, 64, 10_000])
@pytest.mark.parametrize("compressed", [False, True])
def test_generated_quirks_in_parts_equal_whole(tmp_path, monkeypatch, part_rows, compressed):
    data = json.dumps(quirky_trace()).encode()
    src = tmp_path / ("q.json.gz" if compressed else "q.json")
    src.write_bytes(gzip.compress(data) if compressed else data)
    whole, parts = convert_both(src, tmp_path, part_rows, monkeypatch)
    assert_same_file(whole, parts)
    t = parquet.read(parts)
    spans = t.of_kind("annotation")
    assert spans["dur"].to_pylist() == [60_000] * 40  # B/E pairs closed (µs in the file, ns here)
    kernels = t.of_kind("kernel")
    assert kernels["grid_x"].to_pylist() == [4] * 40  # work-items made workgroups across parts
    assert t.metadata["id_names"]  # "Spans", "worker", "Traces": numbered as a whole read numbers them


@pytest.mark.parametrize("fan_in", [2, 3])
def test_many_parts_merge_in_rounds(tmp_path, data_dir, monkeypatch, fan_in):
    # more parts than the merge reads at once: rounds of merges on disk, the same file in the end
    from gpuan.trace import spill

    monkeypatch.setattr(spill, "FAN_IN", fan_in)
    rounds = []
    merge_to_file = spill.Spill._merge_to_file
    monkeypatch.setattr(spill.Spill, "_merge_to_file", lambda self, *a: rounds.append(a[1]) or merge_to_file(self, *a))
    data = json.dumps(quirky_trace()).encode()
    (tmp_path / "q.json").write_bytes(data)
    whole, parts = convert_both(tmp_path / "q.json", tmp_path, 3, monkeypatch)
    assert_same_file(whole, parts)
    assert rounds and (fan_in > 2 or any("level2" in name for name in rounds)), rounds  # two rounds with pairs
    for name in ("a100_alexnet.json.gz", "mi300x_qwen05b_inference.json.gz"):
        out = tmp_path / name
        out.mkdir()
        whole, parts = convert_both(data_dir / "kineto" / name, out, 997, monkeypatch)
        assert_same_file(whole, parts)
    assert not list(tmp_path.rglob("*.parts.*")), "the spilled parts and merged runs are removed"


def test_merged_dictionary_columns_hold_the_words_their_rows_use():
    """Slices of batches that share one large dictionary, a slice of nulls only, one over an empty dictionary
    and one over another dictionary stack into one column over the sorted words the rows use, row for row
    what each slice says."""
    from gpuan.trace.spill import _dictionary_concat

    rng = np.random.default_rng(5)
    shared = pa.array([f"[[{i}, 64]]" for i in range(20_000)])
    other = pa.array(["b", "a", "[[7, 64]]"])
    chunks = []
    for k in range(6):
        codes = rng.integers(0, 20_000, 1000).astype(np.int32)
        nulls = pa.array(rng.random(1000) < 0.1)
        batch = pa.DictionaryArray.from_arrays(pa.array(codes, mask=nulls.to_numpy(zero_copy_only=False)), shared)
        chunks += [batch.slice(0, 300 + k), batch.slice(300 + k)]
    chunks.append(pa.DictionaryArray.from_arrays(pa.nulls(5, pa.int32()), shared))
    chunks.append(pa.DictionaryArray.from_arrays(pa.nulls(3, pa.int32()), pa.array([], pa.string())))
    chunks.append(pa.DictionaryArray.from_arrays(pa.array([0, 1, 2, 2], pa.int32()), other))
    type_ = pa.dictionary(pa.int32(), pa.string())
    merged = _dictionary_concat(chunks, type_)
    want = [w for c in chunks for w in c.to_pylist()]
    assert merged.type == type_ and merged.to_pylist() == want
    assert merged.dictionary.to_pylist() == sorted({w for w in want if w is not None})


def gpuan(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuan", *map(str, args)], capture_output=True, text=True)


def test_cli_max_memory(tmp_path, data_dir):
    src = data_dir / "kineto" / "v100_ddp_6steps_trace_diff_test.json.gz"
    out = tmp_path / "out.parquet"
    r = gpuan("convert", src, "--max-memory", "1500M", "-o", out)
    assert r.returncode == 0, r.stderr
    assert r.stderr.startswith(f"gpuan: wrote {out} (68,326 events")
    assert plain(parquet.read(out).events).equals(plain(read_kineto(str(src)).events))


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--max-memory", "2X"), "--max-memory: '2X' is not a size"),
        (("--max-memory", "64M"), "--max-memory 64 MiB is too little"),
    ],
)
def test_cli_bad_ceiling_is_one_line(tmp_path, data_dir, args, words):
    src = data_dir / "kineto" / "a100_alexnet.json.gz"
    r = gpuan("convert", src, *args, "-o", tmp_path / "out.parquet")
    assert r.returncode == 2 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not list(tmp_path.iterdir())


def test_cli_max_memory_refuses_other_inputs(tmp_path, data_dir):
    for src, what in ((data_dir / "nsys" / "saxpy_mpi_cuda_rank0.sqlite", "nsys"),
                      (data_dir / "kineto" / "dlrm_8rank_nccl", "directory")):  # fmt: skip
        r = gpuan("convert", src, "--max-memory", "2G", "-o", tmp_path / "o.parquet")
        assert r.returncode == 2 and str(src) in r.stderr and what in r.stderr, r.stderr


def test_bad_input_in_parts_leaves_nothing(tmp_path, data_dir, monkeypatch):
    raw = (data_dir / "kineto" / "v100_ddp_6steps_trace_diff_test.json.gz").read_bytes()
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(raw[: len(raw) * 3 // 4])  # truncated after several parts were read
    out = tmp_path / "cut.parquet"
    r = gpuan("convert", cut, "--max-memory", "1500M", "-o", out)
    assert r.returncode == 2 and "truncated gzip" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.json.gz"]  # no output, no spilled parts
    negative = tmp_path / "neg.json"
    events = [{"ph": "X", "name": "a", "ts": i, "dur": 1, "pid": 1, "tid": 1} for i in range(50)]
    events[37]["dur"] = -5
    negative.write_text(json.dumps({"traceEvents": events}))
    monkeypatch.setattr(bounded, "part_rows_for", lambda max_memory: 10)
    with pytest.raises(Exception, match=r"negative duration \(dur\); the first is traceEvents\[37\]"):
        bounded.convert(negative, tmp_path / "neg.parquet", max_memory=1 << 30)
    assert not (tmp_path / "neg.parquet").exists() and not list(tmp_path.glob("*.parts.*"))


def test_auto_parts_when_the_trace_would_not_fit(tmp_path, data_dir):
    """Without --max-memory, a trace larger than the memory available converts in parts by itself."""
    src = data_dir / "kineto" / "a100_alexnet.json.gz"
    out = tmp_path / "o.parquet"
    script = textwrap.dedent(f"""
        import sys
        from gpuan.trace import bounded
        bounded.available_bytes = lambda: 3 << 30
        bounded.memory_estimate = lambda source: 5 << 30
        from gpuan.cli import main
        sys.exit(main(["convert", {str(src)!r}, "-o", {str(out)!r}]))
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "converting in parts under 1.5 GiB (--max-memory to choose)" in r.stderr
    assert plain(parquet.read(out).events).equals(plain(read_kineto(str(src)).events))


PEAK = """
import sys
from gpuan.trace import bounded, parquet
from gpuan.trace.projection import projection
from gpuan.trace.kineto import read_kineto
src, how, small = sys.argv[1:4]
read_kineto(small)  # loads the compiled scanner, whose own peak is not the conversion's
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # the peak resident memory starts again from now
if how == "parts":
    parquet.ROW_GROUP_ROWS = 1 << 16  # pieces of the merge stay small too
    bounded.part_rows_for = lambda max_memory: 50_000
    bounded.convert(src, src + ".parquet", max_memory=1 << 30)
else:
    parquet.write(read_kineto(src), src + ".parquet")
status = open("/proc/self/status").read()
print(int(status.split("VmHWM:")[1].split()[0]) * 1024)
"""


@pytest.mark.skipif(not GENERATOR.is_file(), reason=f"the trace generator is not at {GENERATOR}")
def test_memory_in_parts_stays_below_the_whole_conversion(tmp_path, data_dir):
    """On a 600 MB trace, converting in parts of 50k rows peaks well below converting in memory (measured:
    367 against 462 MB, from a 240 MB process): a part's table, the reader's buffers, and in the merge a batch
    of every part (a few MB a part: the one cost that grows with the trace, through its number of parts)."""
    src = tmp_path / "g600.json"
    subprocess.run([sys.executable, str(GENERATOR), str(src), "--size-mb", "600"], check=True, capture_output=True)
    small = data_dir / "kineto" / "a100_alexnet.json.gz"
    peaks = {}
    for how in ("whole", "parts"):
        r = subprocess.run([sys.executable, "-c", PEAK, str(src), how, str(small)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        peaks[how] = int(r.stdout.split()[-1])
    assert peaks["parts"] < peaks["whole"] - (60 << 20), peaks
    assert plain(parquet.read(str(src) + ".parquet").events).num_rows > 1_000_000


def test_the_flows_fill_row_groups_of_their_own_not_the_footer(tmp_path, data_dir):
    """The flows are written after the events, in row groups of their own that only the flows are read from:
    the footer stays small (it held the flows up to format 8: 202 MB for the 36 GiB trace of bench/convert.py)
    and the events read as if there were none."""
    t = read_kineto(str(data_dir / "kineto" / "a100_ddp2_rank0_nccl.json.gz"))
    assert t.flows.num_rows > 10_000
    path = parquet.write(t, tmp_path / "flows.parquet")
    f = pq.ParquetFile(path)
    flow_groups = int(f.metadata.metadata[parquet.FLOW_GROUPS_KEY])
    assert flow_groups == 1
    assert f.metadata.row_group(f.num_row_groups - 1).num_rows == t.flows.num_rows
    assert f.metadata.serialized_size < 64 << 10
    back = parquet.read(path)
    assert plain(back.events).equals(plain(t.events))
    assert back.flows.equals(t.flows)
    assert parquet.read(path, projection(("ts", "name"), ("kernel",))).flows.equals(t.flows)


def test_flows_cut_anyhow_fill_the_same_row_groups(tmp_path, data_dir, monkeypatch):
    """Flows handed over in parts of any size (a conversion in parts spills them part by part) are written
    in the same row groups of ROW_GROUP_ROWS rows as the flows of a conversion in memory."""
    t = read_kineto(str(data_dir / "kineto" / "a100_ddp2_rank0_nccl.json.gz"))
    monkeypatch.setattr(parquet, "ROW_GROUP_ROWS", 4096)
    whole = parquet.write_pieces([t.events], t.metadata, [t.flows], tmp_path / "whole.parquet")
    cuts = [0, 1, 4095, 4097, 9000, 9001, 20_000, t.flows.num_rows]
    pieces = [t.flows.slice(a, b - a) for a, b in zip(cuts[:-1], cuts[1:])]
    cut = parquet.write_pieces([t.events], t.metadata, pieces, tmp_path / "cut.parquet")
    sizes = []
    for path in (whole, cut):
        f = pq.ParquetFile(path)
        n = int(f.metadata.metadata[parquet.FLOW_GROUPS_KEY])
        sizes.append([f.metadata.row_group(i).num_rows for i in range(f.num_row_groups - n, f.num_row_groups)])
        assert parquet.read(path).flows.equals(t.flows)
    assert sizes[0] == sizes[1]
    assert set(sizes[0][:-1]) == {4096} and len(sizes[0]) == -(-t.flows.num_rows // 4096)


def _format_8_file(t, path: Path, flows: bytes) -> Path:
    """Write the trace's events as gpuan wrote them up to format 8: the flows, as a Parquet file of their own,
    in the schema's metadata."""
    meta = dict(t.metadata, gpuan_parquet_version=8)
    schema = t.events.schema.with_metadata({parquet.META_KEY: json.dumps(meta).encode(), parquet.FLOWS_KEY: flows})
    pq.write_table(t.events.replace_schema_metadata(schema.metadata), path)
    return path


def test_a_format_8_file_with_flows_in_its_footer_reads(tmp_path, data_dir):
    """Files of format 8 and before keep their flows in the footer, past Thrift's default limit of 100 MB
    for tens of millions of flows: their events and flows still read."""
    t = read_kineto(str(data_dir / "kineto" / "a100_alexnet.json.gz"))
    sink = pa.BufferOutputStream()
    pq.write_table(t.flows, sink)
    path = _format_8_file(t, tmp_path / "v8.parquet", sink.getvalue().to_pybytes())
    back = parquet.read(path)
    assert plain(back.events).equals(plain(t.events))
    assert plain(back.flows).equals(plain(t.flows))
    big = _format_8_file(t, tmp_path / "big-footer.parquet", bytes(110 << 20))  # only read when flows are used
    with pytest.raises(OSError, match="size limit"):
        pq.ParquetFile(big)  # what gpuan's reader met before it raised the limit
    assert plain(parquet.read(big).events).equals(plain(t.events))
    assert parquet.stored_format(big) == "kineto"


def test_parts_are_spilled_with_the_default_garbage_collection(tmp_path, data_dir, monkeypatch):
    """The command line collects garbage rarely for its start (gpuan.cli.run); a convert under a ceiling
    collects as often as Python by default, so that cycles holding a part's buffers are freed in time."""
    import gc

    from gpuan.trace import spill

    monkeypatch.setattr(bounded, "part_rows_for", lambda max_memory: 4096)  # not from this process's RSS
    seen = []
    add = spill.Spill.add
    monkeypatch.setattr(spill.Spill, "add", lambda self, table: seen.append(gc.get_threshold()) or add(self, table))
    before = gc.get_threshold()
    gc.set_threshold(100_000, 10, 10)
    try:
        bounded.convert(data_dir / "kineto" / "a100_alexnet.json.gz", tmp_path / "t.parquet", max_memory=1 << 30)
        assert seen and set(seen) == {(700, 10, 10)}
        assert gc.get_threshold() == (100_000, 10, 10)  # as it was, once done
    finally:
        gc.set_threshold(*before)
