"""The Kineto reader against the raw JSON of every real trace, decoded independently here."""

from __future__ import annotations

import gzip
import json
import mmap
import random
import threading
import zlib
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pytest
from conftest import DATA, KINETO_KIND, kineto_files

import gpuan
from gpuan.trace.kineto import reader
from gpuan.trace.kineto.shapes import _in_one_line, _relaid, one_line, one_line_each


def raw_events(path):
    """The file's events with exact decimal numbers."""
    with gzip.open(path, "rb") as f:
        doc = json.loads(f.read(), parse_float=Decimal)
    return doc["traceEvents"]


def expected_kind(e: dict) -> str:
    """The kind the test expects of an event: by category, except that profiler steps are ranges, not
    operators, where an old PyTorch wrote them as operators."""
    kind = KINETO_KIND.get(str(e.get("cat", "")).lower(), "other")
    if kind == "cpu_op" and str(e.get("name", "")).startswith("ProfilerStep#"):
        return "annotation"
    return kind


def stream_of(e: dict) -> int:
    """A kernel's stream: its ``stream`` argument, else its tid (PyTorch 1.x wrote "stream 7")."""
    s = e["args"].get("stream", e["tid"])
    return int(s.split()[-1]) if isinstance(s, str) else s


def no_none(row: tuple):
    """A sort key for rows that hold None (None before every number)."""
    return tuple(no_none(x) if isinstance(x, tuple) else (x is not None, x or 0) for x in row)


def ns(us) -> int:
    return int((Decimal(us) * 1000).to_integral_value())


@pytest.fixture(scope="module", params=kineto_files() or ["<no data>"])
def loaded(request, data_dir):
    path = data_dir / "kineto" / request.param
    return path, raw_events(path), gpuan.load(path, use_cache=False)


def test_counts_per_kind(loaded):
    path, events, trace = loaded
    expected = Counter(expected_kind(e) for e in events if e.get("ph") in ("X", "i", "I"))
    got = Counter(trace.events["kind"].combine_chunks().dictionary_decode().to_pylist())
    assert got == expected
    assert trace.flows.num_rows == sum(e.get("ph") in ("s", "t", "f") for e in events)


def test_kernel_time_per_stream(loaded):
    path, events, trace = loaded
    expected_n, expected_t = Counter(), Counter()
    for e in events:
        if e.get("ph") == "X" and str(e.get("cat")).lower() == "kernel":
            s = stream_of(e)
            expected_n[s] += 1
            expected_t[s] += ns(e["dur"])
    k = trace.of_kind("kernel")
    got_n = Counter(k["stream"].to_pylist())
    got_t = defaultdict(int)
    for s, d in zip(k["stream"].to_pylist(), k["dur"].to_pylist()):
        got_t[s] += d
    assert got_n == expected_n
    assert dict(got_t) == dict(expected_t)


def test_times_exact_to_the_ns(loaded):
    path, events, trace = loaded
    x = [e for e in events if e.get("ph") == "X"]
    base = min(ns(e["ts"]) for e in events if "ts" in e and e.get("ph") != "M")
    expected = sorted((ns(e["ts"]) - base, ns(e["dur"])) for e in x)
    ev = trace.events.filter(
        pc.invert(pc.is_in(trace.events["name"].combine_chunks().dictionary_decode(), value_set=gpuan_instants(events)))
    )
    got = sorted(zip(ev["ts"].to_pylist(), ev["dur"].to_pylist()))
    assert got == expected
    assert trace.metadata["base_time_ns"] == base + int(json_base(path))


def gpuan_instants(events):
    import pyarrow as pa

    return pa.array(sorted({e["name"] for e in events if e.get("ph") in ("i", "I")}), pa.string())


def json_base(path) -> int:
    with gzip.open(path, "rb") as f:
        doc = json.loads(f.read())
    return doc.get("baseTimeNanoseconds", 0)


def test_linking_arguments(loaded):
    """correlation, External id, grid/block, registers, bytes match the raw args row by row."""
    path, events, trace = loaded
    gpu_categories = ("kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset")
    # HIP calls taking global work sizes record the grid in work-items; the table holds workgroups
    work_items = {
        e["args"].get("correlation")
        for e in events
        if e.get("ph") == "X"
        and str(e.get("cat")).lower() in ("cuda_runtime", "runtime")
        and e.get("name") in ("hipExtModuleLaunchKernel", "hipHccModuleLaunchKernel")
    }

    def grid(e: dict) -> tuple:
        g, b = e["args"].get("grid", [None] * 3), e["args"].get("block", [None] * 3)
        if e["args"].get("correlation") in work_items and str(e.get("cat")).lower() == "kernel":
            return tuple(-(-x // y) if x is not None and y else x for x, y in zip(g, b))
        return tuple(g)

    want = sorted(
        (
            (
                e["args"].get("correlation"),
                e["args"].get("External id"),
                grid(e),
                tuple(e["args"].get("block", [None] * 3)),
                e["args"].get("registers per thread"),
                e["args"].get("bytes"),
            )
            for e in events
            if e.get("ph") == "X" and str(e.get("cat")).lower() in gpu_categories
        ),
        key=no_none,
    )
    g = trace.events.filter(
        pc.is_in(
            trace.events["kind"].combine_chunks().dictionary_decode(),
            value_set=__import__("pyarrow").array(["kernel", "memcpy", "memset"]),
        )
    )
    cols = [
        g[c].to_pylist()
        for c in (
            "correlation",
            "external_id",
            "grid_x",
            "grid_y",
            "grid_z",
            "block_x",
            "block_y",
            "block_z",
            "registers",
            "bytes",
        )
    ]
    got = sorted(((r[0], r[1], tuple(r[2:5]), tuple(r[5:8]), r[8], r[9]) for r in zip(*cols)), key=no_none)
    assert got == want


def test_string_pids_are_mapped_not_dropped(loaded):
    path, events, trace = loaded
    named = {e["pid"] for e in events if isinstance(e.get("pid"), str) and e.get("ph") in ("X", "i")}
    names = set(trace.metadata["id_names"].values())
    for s in named:
        assert s in names
    spans = [e for e in events if e.get("pid") == "Spans" and e.get("ph") == "X"]
    if spans:
        row = trace.events.filter(pc.equal(trace.events["cat"].combine_chunks().dictionary_decode(), "trace"))
        ident = [int(k) for k, v in trace.metadata["id_names"].items() if v == "Spans"][0]
        assert row["pid"].to_pylist() == [ident] * len(spans)


@pytest.mark.parametrize("headroom", [1 << 16, 96])
def test_parallel_blocks_give_the_same_table(loaded, monkeypatch, headroom):
    """Tiny blocks and two threads (chunk guesses, carried partial events, rows drained and bytes read ahead
    while the next block is scanned; events longer than the headroom joined to the bytes read ahead) read
    exactly like one pass."""
    path, events, trace = loaded
    monkeypatch.setattr(reader, "BLOCK_BYTES", 1 << 15)
    monkeypatch.setattr(reader, "MIN_PARALLEL_BYTES", 1 << 10)
    monkeypatch.setattr(reader, "HEADROOM", headroom)
    small = gpuan.trace.kineto.build_trace(reader.scan_file(str(path), threads=2), source=str(path))
    assert small.events.equals(trace.events)
    assert small.flows.equals(trace.flows)
    assert small.metadata == trace.metadata


def _count_scan_statuses(monkeypatch) -> Counter:
    """Have every call of the scanner counted by the status it returns; returns the counter."""
    statuses = Counter()
    scan = reader.sc.scan
    monkeypatch.setattr(reader.sc, "scan", lambda *a: (r := scan(*a)) and statuses.update([r[0]]) or r)
    return statuses


@pytest.mark.parametrize("headroom", [1 << 16, 96])
def test_a_scratch_drained_every_few_rows_gives_the_same_table(loaded, monkeypatch, headroom):
    """One thread scanning into a scratch of 7 rows, drained each time it fills (the scratch of a serial scan
    is a few thousand rows, not a block's: full many times over in a large file), through small blocks,
    reads exactly like one pass; and it did fill."""
    path, events, trace = loaded
    monkeypatch.setattr(reader, "SERIAL_ROWS", 7)
    monkeypatch.setattr(reader, "BLOCK_BYTES", 1 << 15)
    monkeypatch.setattr(reader, "HEADROOM", headroom)
    statuses = _count_scan_statuses(monkeypatch)
    small = gpuan.trace.kineto.build_trace(reader.scan_file(str(path), threads=1), source=str(path))
    assert statuses[reader.sc.FULL] > len(events) // 7 // 2
    assert small.events.equals(trace.events)
    assert small.flows.equals(trace.flows)
    assert small.metadata == trace.metadata


def test_scratches_kept_from_scan_to_scan_give_the_same_tables(data_dir, monkeypatch):
    """Scans one after another in a process reuse the scratches of the scans before (rows of other files
    left in them, scanned at another thread count, in blocks of another shape), and read every real trace
    as scans into fresh scratches do."""
    paths = [data_dir / "kineto" / name for name in kineto_files()]
    if not paths:
        pytest.skip("no real Kineto traces under ../shared/data")
    monkeypatch.setattr(reader, "BLOCK_BYTES", 1 << 18)  # several blocks a file: both scratches written
    monkeypatch.setattr(reader, "MIN_PARALLEL_BYTES", 1 << 12)
    monkeypatch.setattr(reader, "_KEPT", [])
    keep = reader._keep_scratches
    monkeypatch.setattr(reader, "_keep_scratches", lambda scratches: None)
    fresh = [reader.scan_file(str(p), threads=2) for p in paths]
    assert reader._KEPT == []
    monkeypatch.setattr(reader, "_keep_scratches", keep)
    made = Counter()
    new_scratch = reader._Scratch.__init__
    monkeypatch.setattr(reader._Scratch, "__init__", lambda self, *a: made.update([a]) or new_scratch(self, *a))
    for threads in (1, 2, 3, 2):
        made.clear()
        for p, want in zip(paths, fresh):
            got = reader.scan_file(str(p), threads=threads)
            assert got.length == want.length and got.strings == want.strings
            for name, col in want.columns.items():
                assert np.array_equal(got.columns[name], col), (p.name, threads, name)
            for name, (rows, values) in want.sparse.items():
                assert np.array_equal(got.sparse[name][0], rows) and np.array_equal(got.sparse[name][1], values)
            for name, col in want.flows.items():
                assert np.array_equal(got.flows[name], col)
        assert sum(made.values()) <= 2, made  # the first pass at a thread count makes its own; then none


def test_a_kept_scratch_gives_back_the_pages_past_its_bound():
    """A kept scratch keeps each slot's first rows, up to KEPT_BYTES over all its slots, as they were written,
    and gives back the pages of the rest (they read as zeros again)."""
    from gpuan.trace import memory

    if memory._libc is None:
        pytest.skip("not glibc: pages cannot be given back")
    scratch = reader._Scratch(8, 20_000)  # 9 slots of 20k rows: 44 MB, a memory map of its own
    scratch.o64[...] = 7
    scratch.o32[...] = 7
    scratch.trim(9 * 5_000 * reader.ROW_BYTES)
    for k in range(9):
        assert (scratch.o64[k, :5_000] == 7).all() and (scratch.o32[k, :5_000] == 7).all()
        # (a slot's last page, shared with the next slot's first rows, stays)
        assert (scratch.o64[k, -1000:-100] == 0).all() and (scratch.o32[k, -1000:-100] == 0).all()


def test_the_table_is_built_with_huge_pages_advised_and_the_scan_without(data_dir, monkeypatch):
    """numpy's advice to back large arrays with 2 MB pages is off while the file is scanned (its buffers
    are sized for more rows than it writes) and on while the table's columns (written whole) are built;
    the load leaves it as it found it."""
    from gpuan.trace import kineto
    from gpuan.trace.memory import _get_madvise_hugepage, _set_madvise_hugepage

    if _get_madvise_hugepage is None:
        pytest.skip("this numpy has no huge-page advice to switch")

    seen, original = {}, _get_madvise_hugepage()
    scan, build = kineto.scan_file, kineto.build_trace
    monkeypatch.setattr(kineto, "scan_file", lambda *a, **k: seen.update(scan=_get_madvise_hugepage()) or scan(*a, **k))
    monkeypatch.setattr(
        kineto, "build_trace", lambda *a, **k: seen.update(build=_get_madvise_hugepage()) or build(*a, **k)
    )
    for before in (False, True):
        _set_madvise_hugepage(before)
        try:
            kineto.read_kineto(str(data_dir / "kineto" / "a100_alexnet.json.gz"))
            assert seen == {"scan": False, "build": True}
            assert _get_madvise_hugepage() is before
        finally:
            _set_madvise_hugepage(original)


@pytest.mark.parametrize("threads, gz", [(2, False), (3, False), (2, True)])
def test_chunks_taken_by_any_thread_number_strings_the_same_way(tmp_path, monkeypatch, threads, gz):
    """Whichever thread takes which chunk, and through every way a block settles (a chunk guessed to start
    inside a string or at an object nested in args, a full scratch, a full string table; for a .json.gz with
    little headroom, events joined to the block after them, whose chunk scans are dropped), the strings are
    numbered the same way in every read and the table is the one thread's."""
    rng = np.random.default_rng(7)
    # ', {' inside names: guessed chunk starts inside strings; more string bytes than a thread's first
    # table holds (1 MB)
    words = [f'k{i}, {{"ph": "X", ' + "x" * int(rng.integers(60, 120)) for i in range(40_000)]
    events = []
    for j, i in enumerate(rng.integers(0, len(words), 60_000)):
        # an object nested in args after a comma: a guessed start there parses it as an event (and interns
        # its name, a string the events proper use only later)
        frames = [{"x": 1}, {"name": f"frame{j + 7}"}]
        events.append(
            {"ph": "X", "cat": "kernel", "name": words[int(i)] if j % 3 else f"frame{j}", "pid": 0,
             "tid": int(i) % 7, "ts": j, "dur": 1, "args": {"correlation": j, "stream": 7, "frames": frames}}
        )  # fmt: skip
    path = write_json(tmp_path, "many.json", {"traceEvents": events})
    if gz:
        path.with_suffix(".json.gz").write_bytes(gzip.compress(path.read_bytes(), 1))
        path = path.with_suffix(".json.gz")
        monkeypatch.setattr(reader, "HEADROOM", 96)
    one = reader.scan_file(str(path), threads=1)
    want = gpuan.trace.kineto.build_trace(one, source=str(path))
    monkeypatch.setattr(reader, "BLOCK_BYTES", 1 << 18)
    monkeypatch.setattr(reader, "MIN_PARALLEL_BYTES", 1 << 10)
    monkeypatch.setattr(reader, "BYTES_PER_ROW", 1 << 11)  # 80 rows a chunk, which holds about 150 events
    statuses = _count_scan_statuses(monkeypatch)
    reads = [reader.scan_file(str(path), threads=threads) for _ in range(4)]
    assert all(raw.strings == reads[0].strings for raw in reads)
    assert set(one.strings) <= set(reads[0].strings)
    for raw in reads[:2]:
        assert gpuan.trace.kineto.build_trace(raw, source=str(path)).events.equals(want.events)
    sc = reader.sc
    # guessed starts that were not event starts (a string's inside: malformed; a nested object: no phase)
    assert statuses[sc.BAD] and statuses[sc.WRONG_TYPE] and statuses[sc.FULL] and statuses[sc.GROW]


def _scan_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(("gpuan-scan", "gpuan-read"))]


def _many_events(tmp_path, name: str, count: int = 20_000) -> Path:
    event = {"ph": "X", "cat": "kernel", "pid": 0, "dur": 1}
    events = [{**event, "name": f"k{i % 97}", "tid": i % 5, "ts": i} for i in range(count)]
    return write_json(tmp_path, name, {"traceEvents": events, "after": 1})


@pytest.mark.parametrize("gz", [False, True])
def test_a_scan_that_raises_in_a_thread_is_raised_and_leaves_no_thread(tmp_path, monkeypatch, gz):
    """An error inside a scanning thread (here a fake one, at its fifth chunk, while later blocks are queued)
    comes out of scan_file in the main thread, and every scanning thread is gone once it has."""
    path = _many_events(tmp_path, "t.json")
    if gz:
        path = path.with_suffix(".json.gz")
        path.write_bytes(gzip.compress((tmp_path / "t.json").read_bytes()))
    monkeypatch.setattr(reader, "BLOCK_BYTES", 1 << 15)
    monkeypatch.setattr(reader, "MIN_PARALLEL_BYTES", 1 << 10)
    scan, calls = reader.sc.scan, Counter()

    def failing(*a):
        if threading.current_thread().name.startswith("gpuan-scan"):
            calls["thread"] += 1
            if calls["thread"] == 5:
                raise RuntimeError("scan failed in a thread")
        return scan(*a)

    monkeypatch.setattr(reader.sc, "scan", failing)
    with pytest.raises(RuntimeError, match="scan failed in a thread"):
        reader.scan_file(str(path), threads=2)
    assert calls["thread"] >= 5 and not _scan_threads()


@pytest.mark.parametrize(
    ("suffix", "first"),
    [(".json", None), (".json.gz", None), (".json.gz", 1 << 12)],
    ids=["json", "gz", "gz from 4 KB"],
)
@pytest.mark.parametrize("threads", [1, 2])
def test_an_event_longer_than_many_blocks_is_scanned_in_linear_time(tmp_path, monkeypatch, suffix, threads, first):
    """An event longer than many blocks is scanned from its start again in each block it reaches; the blocks
    after it grow with it, so the bytes the scanner walks stay a small multiple of the file (a 2 MB event in
    32 KB blocks walked 63 MB of a plain .json when they did not), and the table is the one of one block.
    A compressed file's blocks starting small (read ahead at the size of the ramp) grow with it too."""
    events = [{"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 1, "ts": i, "dur": 1} for i in range(3000)]
    events.insert(1500, {"ph": "X", "cat": "kernel", "name": "long" * 500_000, "pid": 0, "tid": 1, "ts": 1, "dur": 1})
    path = write_json(tmp_path, "long.json", {"traceEvents": events})
    size = path.stat().st_size
    if suffix == ".json.gz":
        path.with_suffix(".json.gz").write_bytes(gzip.compress(path.read_bytes(), 1))
        path = path.with_suffix(".json.gz")
    want = gpuan.trace.kineto.build_trace(reader.scan_file(str(path), threads=1), source="t")
    monkeypatch.setattr(reader, "BLOCK_BYTES", 1 << 15)
    monkeypatch.setattr(reader, "MIN_PARALLEL_BYTES", 1 << 10)
    if first is not None:
        monkeypatch.setattr(reader, "FIRST_READ_BYTES", first)
    scan, walked = reader.sc.scan, Counter()

    def counting(buf, b64, pos, end, n, *rest):
        status, stop, rows = scan(buf, b64, pos, end, n, *rest)
        walked["bytes"] += (n if status == reader.sc.NEED_MORE else stop) - pos
        return status, stop, rows

    monkeypatch.setattr(reader.sc, "scan", counting)
    got = gpuan.trace.kineto.build_trace(reader.scan_file(str(path), threads=threads), source="t")
    assert got.events.equals(want.events)
    assert walked["bytes"] < 6 * size


@pytest.mark.parametrize("gz", [False, True])
def test_parts_left_part_way_leave_no_thread(tmp_path, monkeypatch, gz):
    """A caller that stops asking for parts part-way through a file (closing the generator) stops the
    scanning threads, with blocks still queued for them, and the read thread of a .json.gz."""
    path = _many_events(tmp_path, "t.json")
    if gz:
        path = path.with_suffix(".json.gz")
        path.write_bytes(gzip.compress((tmp_path / "t.json").read_bytes()))
    monkeypatch.setattr(reader, "BLOCK_BYTES", 1 << 15)
    monkeypatch.setattr(reader, "MIN_PARALLEL_BYTES", 1 << 10)
    parts = reader.scan_parts(str(path), part_rows=2_000, threads=2)
    first = next(parts)
    assert first.length >= 2_000 and not first.last and _scan_threads()
    assert any(t.name.startswith("gpuan-read") for t in _scan_threads()) == gz
    parts.close()
    assert not _scan_threads()
    whole = list(reader.scan_parts(str(path), part_rows=2_000, threads=2))
    assert sum(p.length for p in whole) == 20_000 and whole[-1].metadata == {"after": 1}


@pytest.mark.parametrize("threads", [1, 2])
def test_a_string_longer_than_the_string_pool_reads(tmp_path, monkeypatch, threads):
    """A name of 3 MB, more than the string tables first hold, is read whole (the tables grew only with their
    use, so a read asked them to grow forever), by a scanning thread's table too at 2 threads."""
    monkeypatch.setattr(reader, "MIN_PARALLEL_BYTES", 1 << 20)  # 3 MB: two threads' shares
    started = []
    workers = reader._Workers
    monkeypatch.setattr(reader, "_Workers", lambda n, *a: started.append(n) or workers(n, *a))
    long = "n" * (3 << 20)
    events = [{"ph": "X", "name": "a", "pid": 0, "tid": 0, "ts": 1, "dur": 1, "args": {"Input Dims": [[1]]}},
              {"ph": "X", "name": long, "pid": 0, "tid": 0, "ts": 2, "dur": 1}]  # fmt: skip
    path = write_json(tmp_path, "long.json", {"traceEvents": events})
    raw = reader.scan_file(str(path), threads=threads)
    assert sorted(raw.strings[i] for i in raw.columns["name"][: raw.length]) == sorted(["a", long])
    assert started == [0 if threads == 1 else 2]


def _readable(packed: bytes) -> int:
    """Return how many bytes of JSON a cut gzip stream still inflates to."""
    return len(zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(packed))


@pytest.mark.parametrize("first", [None, 1 << 12], ids=["blocks alike", "blocks from 4 KB"])
@pytest.mark.parametrize("before_cut", [None, 20_000, 3_000_000])
def test_parallel_blocks_report_bad_input_as_one_pass(data_dir, tmp_path, monkeypatch, before_cut, first):
    """Reading ahead does not change which problem a damaged file is reported with: a gzip stream cut short,
    alone or after a malformed event shortly (20 kB: where the reads ahead already meet the cut) or long
    (3 MB) before the cut, gives the one-thread read's message, with blocks alike or starting small."""
    text = gzip.decompress((data_dir / "kineto" / "a100_ddp2_rank0_nccl.json.gz").read_bytes())
    packed = gzip.compress(text)
    if before_cut is not None:
        at = text.rindex(b'"ts"', 0, _readable(packed[: len(packed) * 6 // 10]) - before_cut)
        text = text[:at] + b"@" + text[at + 1 :]
        packed = gzip.compress(text)
    path = tmp_path / "damaged.json.gz"
    path.write_bytes(packed[: len(packed) * 6 // 10])
    monkeypatch.setattr(reader, "BLOCK_BYTES", 1 << 15)
    monkeypatch.setattr(reader, "MIN_PARALLEL_BYTES", 1 << 10)
    if first is not None:
        monkeypatch.setattr(reader, "FIRST_READ_BYTES", first)
    problems = []
    for threads in (1, 2):
        with pytest.raises(gpuan.errors.TraceError) as e:
            reader.scan_file(str(path), threads=threads)
        problems.append(str(e.value))
    assert problems[0] == problems[1]
    if before_cut is None:
        assert "truncated gzip" in problems[0]
    if before_cut == 3_000_000:
        assert "malformed JSON near byte" in problems[0]


def _events_text(n: int, first: int = 0) -> str:
    """Return n small complete events as JSON array elements, numbered from `first`."""
    return ",\n".join(
        f'{{"ph": "X", "cat": "kernel", "name": "k{i % 7}", "pid": 0, "tid": 7, "ts": {1000 + i}.5, "dur": 1, '
        f'"args": {{"stream": 7, "correlation": {i}}}}}'
        for i in range(first, first + n)
    )


def _ending(text: bytes, room: bool | int) -> bytes:
    """Return `text` with spaces after it, so that a file of it ends where its map's last page has room
    for the scanner's word reads past the data (True: halfway through the page) or none (False: on a
    page's end); an int: that many bytes of the last page left past the file's end."""
    left = room if not isinstance(room, bool) else mmap.PAGESIZE // 2 if room else 0
    return text + b" " * ((-left - len(text)) % mmap.PAGESIZE)


@pytest.mark.parametrize(
    "layout",
    [
        "events ending in the head, a long tail",  # the tail read from the map past the head
        "a key after the events longer than two windows",  # the events end in a window of the map
        "events to the last bytes",  # the events end in the last bytes: in the map, or copied
    ],
)
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("room", [True, False], ids=["room past the end", "no room past the end"])
def test_plain_json_map_ends_wherever_the_events_end(tmp_path, monkeypatch, layout, threads, room):
    """Wherever the events array ends (in the head, in a window of the map, in the last bytes, which are
    copied where the map's last page has no room for the scanner's reads past them), the file's keys after
    it are read whole and the table is the gzipped stream's."""
    monkeypatch.setattr(reader, "BLOCK_BYTES", 1 << 15)
    monkeypatch.setattr(reader, "MIN_PARALLEL_BYTES", 1 << 10)
    if layout.startswith("events ending in the head"):
        events, after = _events_text(50), {"deviceProperties": [{"id": 0, "note": "x" * 200_000}]}
    elif layout.startswith("a key after"):
        events, after = _events_text(3000), {"notes": "y" * 100_000, "traceName": "t"}
    else:
        events, after = _events_text(3000), {}
    text = ('{"schemaVersion": 1, "traceEvents": [\n' + events + "\n]" + "".join(
        f", {json.dumps(k)}: {json.dumps(v)}" for k, v in after.items()) + "}").encode()  # fmt: skip
    text = _ending(text, room)
    plain, packed = tmp_path / "t.json", tmp_path / "t.json.gz"
    plain.write_bytes(text)
    packed.write_bytes(gzip.compress(text, 1))
    mapped = gpuan.trace.kineto.build_trace(reader.scan_file(str(plain), threads=threads), source="t")
    streamed = gpuan.trace.kineto.build_trace(reader.scan_file(str(packed), threads=1), source="t")
    _same_trace(mapped, streamed)
    assert mapped.events.num_rows == events.count('"ph": "X"')
    for key, value in after.items():
        got = mapped.metadata["file"][key] if key != "deviceProperties" else mapped.metadata["device_properties"]
        assert got == value


def test_plain_json_parts_read_as_the_stream(data_dir, tmp_path, monkeypatch):
    """A plain .json read in parts (as ``gpuan convert`` does past a memory ceiling) gives, part after part,
    the rows that the gzipped stream gives (where parts end follows the blocks, which differ), each part
    numbered on from the rows before it."""
    text = gzip.decompress((data_dir / "kineto" / "a100_ddp2_rank0_nccl.json.gz").read_bytes())
    plain, packed = tmp_path / "t.json", tmp_path / "t.json.gz"
    plain.write_bytes(text)
    packed.write_bytes(gzip.compress(text, 1))
    monkeypatch.setattr(reader, "BLOCK_BYTES", 1 << 15)
    monkeypatch.setattr(reader, "MIN_PARALLEL_BYTES", 1 << 10)

    def rows(path: Path, threads: int) -> tuple[int, dict[str, np.ndarray], list[str]]:
        parts, columns, names, before = 0, defaultdict(list), [], 0
        for part in reader.scan_parts(str(path), part_rows=5_000, threads=threads):
            assert part.first_row == before
            before += part.length
            parts += 1
            for name in ("ts", "dur", "pid", "tid", "correlation"):
                columns[name].append(part.columns[name].copy())  # the part's buffers are reused by the next
            names += [part.strings[i] for i in part.columns["name"]]
        return parts, {k: np.concatenate(v) for k, v in columns.items()}, names

    parts, mapped, mapped_names = rows(plain, 2)
    _, streamed, streamed_names = rows(packed, 1)
    assert parts > 3
    assert all(np.array_equal(mapped[k], streamed[k]) for k in streamed)
    assert mapped_names == streamed_names


@pytest.mark.parametrize("threads", [1, 2])
def test_compressed_blocks_start_small_and_double(data_dir, tmp_path, monkeypatch, threads):
    """A .json.gz is read in blocks that start at FIRST_READ_BYTES and double up to BLOCK_BYTES, each
    inflated by the read thread while the one before is scanned: the blocks' sizes are those, the table and
    the keys after the events are the plain file's, and no read thread is left once the scan is done."""
    text = gzip.decompress((data_dir / "kineto" / "a100_ddp2_rank0_nccl.json.gz").read_bytes())
    text = text[: text.rindex(b"}")] + b', "after": {"note": "' + b"z" * 300_000 + b'"}}'
    plain, packed = tmp_path / "t.json", tmp_path / "t.json.gz"
    plain.write_bytes(text)
    packed.write_bytes(gzip.compress(text, 1))
    want = gpuan.trace.kineto.build_trace(reader.scan_file(str(plain), threads=1), source="t")
    monkeypatch.setattr(reader, "BLOCK_BYTES", 1 << 18)
    monkeypatch.setattr(reader, "FIRST_READ_BYTES", 1 << 12)
    monkeypatch.setattr(reader, "MIN_PARALLEL_BYTES", 1 << 10)
    fill, asked, where = reader.fill, [], []

    def recording(src, buf, have):
        asked.append(buf.size - reader.SLACK - have)
        where.append(threading.current_thread().name)
        return fill(src, buf, have)

    monkeypatch.setattr(reader, "fill", recording)
    got = gpuan.trace.kineto.build_trace(reader.scan_file(str(packed), threads=threads), source="t")
    _same_trace(got, want)
    assert got.metadata["file"]["after"] == {"note": "z" * 300_000}
    ramp = [(1 << 12) << k for k in range(7)]
    assert asked[: len(ramp)] == ramp and set(asked[len(ramp) :]) == {1 << 18} and len(asked) > 40
    # the head is read before the scan starts; every block after it by the read thread
    assert where[0] == threading.current_thread().name and all(w.startswith("gpuan-read") for w in where[1:])
    assert not _scan_threads()


def test_blocks_are_the_same_whichever_thread_scans_them(tmp_path, monkeypatch):
    """A .json.gz with events longer than half a block is read in the same blocks at 1 thread (each block
    settled before the next is taken) and at 2 (the next taken first, for the scanning threads), so a damaged
    file is reported the same way at both."""
    events = [{"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 1, "ts": i, "dur": 1} for i in range(4000)]
    for at, length in ((300, 40_000), (1500, 150_000), (2500, 700_000)):
        events.insert(at, {"ph": "X", "name": "n" * length, "pid": 0, "tid": 1, "ts": at, "dur": 1})
    path = write_json(tmp_path, "long.json", {"traceEvents": events})
    packed = path.with_suffix(".json.gz")
    packed.write_bytes(gzip.compress(path.read_bytes(), 1))
    monkeypatch.setattr(reader, "BLOCK_BYTES", 1 << 16)
    monkeypatch.setattr(reader, "FIRST_READ_BYTES", 1 << 12)
    monkeypatch.setattr(reader, "MIN_PARALLEL_BYTES", 1 << 10)
    fill, asked = reader.fill, []
    monkeypatch.setattr(reader, "fill", lambda src, buf, have: asked.append(buf.size - have) or fill(src, buf, have))
    sizes, tables = [], []
    for threads in (1, 2):
        asked.clear()
        tables.append(gpuan.trace.kineto.build_trace(reader.scan_file(str(packed), threads=threads), source="t"))
        sizes.append(list(asked))
    assert sizes[0] == sizes[1] and max(sizes[0]) > 1 << 16  # the long events made longer blocks
    assert tables[0].events.equals(tables[1].events)


def _mapped_reads(src, whole, at: int):
    """Return the reads of a mapped file whose bytes before `at` are taken."""
    return reader._Reads(src, whole, reader.Head(whole, at, False, 0, None), [], reader.BLOCK_BYTES, None)


@pytest.mark.parametrize("left", [2048, reader.SLACK, reader.SLACK - 1, 0])
def test_map_window_reaches_the_files_end_where_the_map_holds_the_reads_past_it(tmp_path, monkeypatch, left):
    """Where the map's last page holds SLACK bytes past the file's end (`left` bytes are left there), the
    last window is the map's, up to that end; where it does not, the last bytes are copied into a padded
    buffer."""
    monkeypatch.setattr(reader, "BLOCK_BYTES", 4096)
    path = tmp_path / "t.json"
    path.write_bytes(_ending(b" " * 10_000, left))
    room = left >= reader.SLACK
    from gpuan.trace.source import open_bytes

    with open_bytes(path) as src:
        assert (-src.total) % mmap.PAGESIZE == left
        whole = src.mapped(past=reader.SLACK)
        assert whole.size == src.total + (reader.SLACK if room else 0)
        at = src.total - 3000
        block = _mapped_reads(src, whole, at)._window(reader.BLOCK_BYTES, reader._Scratch(0, 16), 0)
        assert block.eof and block.base + block.n == src.total and block.buf.size >= block.n + reader.SLACK
        assert (block.buf is whole) == room
        assert bytes(block.buf[block.lo : block.n]) == path.read_bytes()[at:]
        if room:
            assert not whole[src.total :].any()  # the page's bytes past the file's end read as zeros


@pytest.mark.parametrize("beyond", [0, 1])
def test_map_window_stops_short_of_the_last_bytes(tmp_path, monkeypatch, beyond):
    """In a map without room past the file's end, a window may end at most SLACK bytes before the file's end
    (the scanner's word reads past a window's end stay inside the map); one byte further and the rest is
    copied into a padded buffer."""
    monkeypatch.setattr(reader, "BLOCK_BYTES", 4096)
    path = tmp_path / "t.json"
    at = 1000
    path.write_bytes(b" " * (at + 4096 + reader.SLACK - beyond))
    from gpuan.trace.source import open_bytes

    with open_bytes(path) as src:
        whole = src.mapped()
        block = _mapped_reads(src, whole, at)._window(reader.BLOCK_BYTES, reader._Scratch(0, 16), 0)
        if beyond == 0:
            assert block.buf is whole and (block.lo, block.n, block.eof) == (at, at + 4096, False)
            assert block.n + reader.SLACK <= whole.size
        else:
            assert block.buf is not whole and block.eof and block.n - block.lo == whole.size - at
            assert block.buf.size >= block.n + reader.SLACK and block.base + block.lo == at
            assert bytes(block.buf[block.lo : block.n]) == bytes(whole[at:])


def _same_trace(a, b) -> None:
    """Assert two loads of the same events give the same tables and metadata (the source aside)."""
    assert a.events.equals(b.events)
    assert a.flows.equals(b.flows)
    assert {k: v for k, v in a.metadata.items() if k != "source"} == {
        k: v for k, v in b.metadata.items() if k != "source"
    }


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("room", [True, False], ids=["room past the end", "no room past the end"])
def test_plain_json_scanned_in_its_map_reads_as_the_stream(data_dir, tmp_path, monkeypatch, threads, room):
    """A plain .json is scanned where it lies, in its memory map, window by window, its head too; with tiny
    windows (events cut at every window's end), an event longer than several windows and the file's keys
    after the events, it gives the table that the same bytes gzipped give through read buffers, and the
    progress it reports grows to the last window."""
    text = gzip.decompress((data_dir / "kineto" / "a100_ddp2_rank0_nccl.json.gz").read_bytes())
    assert text.rstrip().endswith(b"}") and text.index(b'"traceName"') > text.index(b"traceEvents")
    long_event = {"ph": "X", "cat": "kernel", "name": "k" * 200_000, "pid": 0, "tid": 7, "ts": 1.5, "dur": 2}
    at = text.index(b"\n  {\n", len(text) // 2) + 1  # an event's start, far past the head
    text = _ending(text[:at] + json.dumps(long_event).encode() + b",\n" + text[at:], room)
    plain, packed = tmp_path / "t.json", tmp_path / "t.json.gz"
    plain.write_bytes(text)
    packed.write_bytes(gzip.compress(text, 1))
    monkeypatch.setattr(reader, "BLOCK_BYTES", 1 << 15)
    monkeypatch.setattr(reader, "MIN_PARALLEL_BYTES", 1 << 10)
    seen, reads = [], []
    fill = reader.fill
    monkeypatch.setattr(reader, "fill", lambda *a: reads.append(1) or fill(*a))
    mapped = gpuan.trace.kineto.build_trace(
        reader.scan_file(str(plain), threads=threads, progress=lambda done, total: seen.append((done, total))),
        source="t",
    )
    assert not reads  # no read: the map from the first byte
    streamed = gpuan.trace.kineto.build_trace(reader.scan_file(str(packed), threads=1), source="t")
    assert len(reads) > 100
    _same_trace(mapped, streamed)
    assert "k" * 200_000 in mapped.events["name"].combine_chunks().dictionary.to_pylist()
    assert mapped.metadata["file"]["traceName"] == "/tmp/tmpu3g3sevh.json"  # a key after the events
    done = [d for d, _ in seen]
    assert done == sorted(done) and {t for _, t in seen} == {len(text)} and done[-1] > len(text) - (1 << 16)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("left", [2048, reader.SLACK, reader.SLACK - 1, 0])
def test_a_small_plain_json_is_scanned_in_its_map_where_its_last_page_has_room(tmp_path, monkeypatch, threads, left):
    """A file smaller than a block is scanned in its map, with no read, where the map's last page holds the
    scanner's reads past its end (`left` bytes are left there: SLACK or more); else it is read into a padded
    buffer. Both give the gzipped stream's table, in chunks at 2 threads."""
    text = _ending(('{"traceEvents": [\n' + _events_text(40) + '\n], "traceName": "t"}').encode(), left)
    plain, packed = tmp_path / "t.json", tmp_path / "t.json.gz"
    plain.write_bytes(text)
    packed.write_bytes(gzip.compress(text, 1))
    monkeypatch.setattr(reader, "MIN_PARALLEL_BYTES", 1 << 10)
    reads, chunks = [], []
    fill, plan = reader.fill, reader._plan
    monkeypatch.setattr(reader, "fill", lambda *a: reads.append(1) or fill(*a))
    monkeypatch.setattr(reader, "_plan", lambda *a, **k: chunks.append((block := plan(*a, **k)).starts.size) or block)
    mapped = gpuan.trace.kineto.build_trace(reader.scan_file(str(plain), threads=threads), source="t")
    assert bool(reads) != (left >= reader.SLACK)
    assert (max(chunks) > 1) == (threads == 2)
    streamed = gpuan.trace.kineto.build_trace(reader.scan_file(str(packed), threads=1), source="t")
    _same_trace(mapped, streamed)
    assert mapped.events.num_rows == 40 and mapped.metadata["file"]["traceName"] == "t"


@pytest.mark.parametrize("damage", ["malformed", "truncated"])
def test_plain_json_scanned_in_its_map_reports_bad_input_as_the_stream(data_dir, tmp_path, monkeypatch, damage):
    """A damaged plain .json, its damage far past the head (in the memory map), gets the message that the
    same bytes gzipped get, byte offsets included: one malformed event, or the file cut short."""
    text = gzip.decompress((data_dir / "kineto" / "a100_ddp2_rank0_nccl.json.gz").read_bytes())
    if damage == "malformed":
        at = text.index(b'"ts"', len(text) * 3 // 4)
        text = text[:at] + b"@" + text[at + 1 :]
    else:
        text = text[: len(text) * 3 // 4]
    problems = []
    for name, data in (("t.json", text), ("t.json.gz", gzip.compress(text, 1))):
        (tmp_path / name).write_bytes(data)
        monkeypatch.setattr(reader, "BLOCK_BYTES", 1 << 15)
        monkeypatch.setattr(reader, "MIN_PARALLEL_BYTES", 1 << 10)
        for threads in (1, 2):
            with pytest.raises(gpuan.errors.TraceError) as e:
                reader.scan_file(str(tmp_path / name), threads=threads)
            problems.append(str(e.value).replace(name, "T"))
    assert len(set(problems)) == 1, problems
    if damage == "malformed":
        offset = int(problems[0].split("near byte ")[1].replace(",", ""))
        assert text[offset - 4096 : offset + 4096].count(b"@") == 1
    else:
        assert "truncated file" in problems[0]


def test_shapes_and_collectives(data_dir):
    t = gpuan.load(data_dir / "kineto" / "cpu_tiny_lm_prefill_decode.json.gz", use_cache=False)
    events = raw_events(data_dir / "kineto" / "cpu_tiny_lm_prefill_decode.json.gz")
    dims = Counter(json.dumps(e["args"]["Input Dims"]) for e in events if "Input Dims" in e.get("args", {}))
    got = Counter(json.dumps(json.loads(s)) for s in t.events["input_dims"].to_pylist() if s is not None)
    assert got == dims

    t = gpuan.load(data_dir / "kineto" / "a100_ddp2_rank0_nccl.json.gz", use_cache=False)
    events = raw_events(data_dir / "kineto" / "a100_ddp2_rank0_nccl.json.gz")
    coll = Counter(
        (e["args"]["Collective name"], e["args"].get("In msg nelems"), e["args"].get("Group size"))
        for e in events
        if "Collective name" in e.get("args", {})
    )
    got = Counter(
        zip(
            t.events["collective"].to_pylist(),
            t.events["in_msg_nelems"].to_pylist(),
            t.events["group_size"].to_pylist(),
        )
    )
    got.pop((None, None, None))
    assert got == coll and sum(coll.values()) > 0


def test_memcpy_kinds(data_dir):
    for name in ("v100_rank0_ns_resolution.json.gz", "mi250_minitoy_train_rocm.json.gz"):
        events = raw_events(data_dir / "kineto" / name)
        want = Counter(e["name"].split()[1] for e in events if e.get("cat") == "gpu_memcpy")
        t = gpuan.load(data_dir / "kineto" / name, use_cache=False)
        got = Counter(t.of_kind("memcpy")["memcpy_kind"].to_pylist())
        assert got == want


def test_memcpy_kinds_from_names_and_arguments(tmp_path):
    """Each memcpy's direction comes from its name, else from ROCm's "kind" argument (a hipMemcpyKind number
    or a direction); a copy with neither, or whose argument is null or no direction, has none; other kinds'
    rows have none. Many rows over few distinct names and arguments."""
    names = ["Memcpy HtoD (Pageable -> Device)", "Memcpy DtoH (Device -> Pinned)", "CopyDeviceToHost", "hipMemcpy"]
    kinds = [None, "1", "2", "DtoD", "0", "PtoP", "not a kind", "", 7]
    events, want = [], []
    for i in range(3_000):
        name, arg = names[i % len(names)], kinds[i % len(kinds)]
        event = {"ph": "X", "cat": "gpu_memcpy", "name": name, "ts": i, "dur": 1, "pid": 0, "tid": 7}
        if i % 5:
            event["args"] = {"kind": arg}
        if name.startswith("Memcpy "):
            want.append(name.split()[1])
        elif i % 5 and isinstance(arg, str):
            want.append({"1": "HtoD", "2": "DtoH", "0": "HtoH"}.get(arg, arg if arg.isalpha() else None))
        else:
            want.append(None)
        events.append(event)
        events.append({"ph": "X", "cat": "kernel", "name": "k", "ts": i, "dur": 1, "pid": 0, "tid": 7})
    path = tmp_path / "copies.json"
    path.write_text(json.dumps({"traceEvents": events}))
    t = gpuan.load(path, use_cache=False)
    copies = t.of_kind("memcpy").sort_by("ts")
    assert copies["memcpy_kind"].to_pylist() == want
    assert set(t.of_kind("kernel")["memcpy_kind"].to_pylist()) == {None}
    assert {"HtoD", "DtoH", "DtoD", "HtoH", "PtoP", None} == set(want)


def test_metadata(data_dir):
    t = gpuan.load(data_dir / "kineto" / "a100_ddp2_rank0_nccl.json.gz", use_cache=False)
    assert t.metadata["device_properties"][0]["name"] == "NVIDIA A100-PG509-200"
    assert t.metadata["distributed_info"]["world_size"] == 2
    assert t.metadata["rank"] == 0 and set(t.events["rank"].to_pylist()) == {0}
    assert t.metadata["processes"]["0"]["labels"] == "GPU 0"


def write_json(tmp_path, name, doc, *, indent=None):
    p = tmp_path / name
    p.write_text(json.dumps(doc, indent=indent))
    return p


def test_generic_chrome_trace_forms(tmp_path):
    """A bare array, B/E pairs, string numbers, escaped strings, a string pid with a number in it."""
    events = [
        {"ph": "B", "name": "outer", "pid": 1, "tid": 2, "ts": 10.5},
        {"ph": "B", "name": 'inner "q" \\ é', "pid": 1, "tid": 2, "ts": 11},
        {"ph": "E", "pid": 1, "tid": 2, "ts": 12.25},
        {"ph": "E", "pid": 1, "tid": 2, "ts": 20},
        {
            "ph": "X",
            "cat": "Kernel",
            "name": "k",
            "pid": "0",
            "tid": "stream 7",
            "ts": 13,
            "dur": 1.0005,
            "args": {"correlation": "42", "stream": 7, "grid": [4, 1, 1]},
        },
        {"ph": "i", "name": "mark", "pid": 1, "tid": 2, "ts": 14, "s": "t"},
    ]
    t = gpuan.load(write_json(tmp_path, "bare.json", events), use_cache=False)
    rows = {r["name"]: r for r in t.events.to_pylist()}
    assert rows["outer"]["ts"] == 0 and rows["outer"]["dur"] == 9500
    assert rows['inner "q" \\ é']["dur"] == 1250
    assert rows["k"]["kind"] == "kernel" and rows["k"]["cat"] == "kernel"
    assert rows["k"]["dur"] == 1001 and rows["k"]["correlation"] == 42
    assert (rows["k"]["pid"], rows["k"]["tid"], rows["k"]["stream"], rows["k"]["device"]) == (0, 7, 7, 0)
    assert rows["k"]["grid_x"] == 4 and rows["mark"]["dur"] == 0
    assert len(rows) == 4


def test_numbers_in_exponent_form_and_minified(tmp_path):
    doc = {
        "traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1.5e3, "dur": 2e-3}],
        "deviceProperties": [],
    }
    p = tmp_path / "m.json"
    p.write_text(json.dumps(doc, separators=(",", ":")))
    r = gpuan.load(p, use_cache=False).events.to_pylist()[0]
    assert (r["ts"], r["dur"]) == (0, 2)
    assert np.int64 is not None


@pytest.mark.parametrize("threads", [1, 2])
def test_string_tables_sized_for_a_small_file_grow_to_hold_its_strings(tmp_path, monkeypatch, threads):
    """A 55 KB trace starts with the smallest string tables (512 strings, a 16 KB pool); 1,000 distinct names
    and one name longer than the pool make them grow, slots, offsets and pool: the names read back as the
    JSON has them, and as scans into full-size tables give them (the same strings, in the same order)."""
    events = [{"ph": "X", "name": f"n{i}", "ts": i, "dur": 1} for i in range(1000)]
    events[500]["name"] = "long " * 3400  # 17 KB
    p = tmp_path / "small.json"
    p.write_text(json.dumps({"traceEvents": events}, separators=(",", ":")))
    assert p.stat().st_size < reader.FULL_TABLE_BYTES >> 6  # the smallest tables
    monkeypatch.setattr(reader, "MIN_PARALLEL_BYTES", 1 << 12)  # and a parallel scan's tables
    small = reader.scan_file(str(p), threads=threads)
    monkeypatch.setattr(reader, "FULL_TABLE_BYTES", 1)  # every file full-size
    full = reader.scan_file(str(p), threads=threads)
    assert small.strings == full.strings
    names = gpuan.trace.kineto.build_trace(small, source=str(p)).events["name"].to_pylist()
    assert sorted(names) == sorted(e["name"] for e in events)


def test_nested_values_over_lines_are_skipped_to_their_end():
    """skip_value passes the indentation after a newline eight bytes at a time: arrays and objects laid
    out over lines with random runs of spaces, tabs and returns, at every alignment of the words, end where
    json says they end, and a value cut anywhere (the data ending inside a run) is -1."""
    sc = reader.sc
    rng = random.Random(7)

    def blanks() -> str:
        return "".join(rng.choice(["\n", " " * rng.randrange(1, 20), "\t", "\r", " "]) for _ in range(rng.randrange(4)))

    for _ in range(2000):
        items = [rng.choice(["1", '"a b"', "[]", "null", "-2.5e3"]) for _ in range(rng.randrange(1, 4))]
        value = "[" + ",".join(blanks() + i + blanks() for i in items) + "]"
        value = rng.choice([value, "{" + blanks() + '"k":' + blanks() + value + blanks() + "}"])
        lead = rng.randrange(8)
        text = ("x" * lead + value + rng.choice([",", "}", " ]"])).encode()
        assert json.loads(value) is not None
        buf = np.zeros(len(text) + 16, np.uint8)
        buf[: len(text)] = np.frombuffer(text, np.uint8)
        b64 = sc.words(buf)
        end = lead + len(value.encode())
        assert sc.skip_value(buf, b64, lead, len(text)) == end, text
        for n in range(lead + 1, end):
            assert sc.skip_value(buf, b64, lead, n) == -1, (text, n)


@pytest.mark.parametrize("name", ["cpu_tiny_lm_prefill_decode.json.gz", "mi300x_qwen05b_inference.json.gz"])
def test_indented_layouts_read_as_the_compact_one(data_dir, tmp_path, monkeypatch, name):
    """A real trace written back compact and indented by 1, 7, 8 or 9 spaces or a tab (nested, runs of
    indentation of many lengths around the scanner's 8-byte words, in argument arrays too) gives the compact
    file's table, through tiny parallel blocks as well; argument texts come out in one line either way."""
    path = data_dir / "kineto" / name
    if not path.exists():
        pytest.skip(f"{path} is absent (../shared/data)")
    doc = json.loads(gzip.decompress(path.read_bytes()))
    compact = write_json(tmp_path, "compact.json", doc, indent=None)
    want = gpuan.load(compact, use_cache=False)
    monkeypatch.setattr(reader, "BLOCK_BYTES", 1 << 16)
    monkeypatch.setattr(reader, "MIN_PARALLEL_BYTES", 1 << 12)
    for indent in (1, 7, 8, 9, "\t"):
        p = write_json(tmp_path, "indented.json", doc, indent=indent)
        for threads in (1, 2):
            got = gpuan.trace.kineto.build_trace(reader.scan_file(str(p), threads=threads), source=str(p))
            assert got.events.equals(want.events), (indent, threads)
            assert got.flows.equals(want.flows), (indent, threads)


@pytest.mark.parametrize("seed", range(4))
def test_random_strings_and_layouts(tmp_path, monkeypatch, seed):
    """Names with quotes, backslashes, unicode and control characters at every length and alignment,
    minified or indented, read back exactly (also through tiny parallel blocks)."""
    rng = np.random.default_rng(seed)
    alphabet = list('ab"\\/\n\té€😀{}[],: xyz')
    events = []
    for i in range(400):
        name = "".join(rng.choice(alphabet, rng.integers(0, 40)))
        e = {
            "name": name,
            "ph": "X",
            "cat": rng.choice(["kernel", "cpu_op", "Kernel"]),
            "pid": int(rng.integers(0, 3)),
            "tid": int(rng.integers(0, 9)),
            "ts": int(rng.integers(0, 10**9)) / 1000,
            "dur": int(rng.integers(0, 10**6)) / 1000,
            "args": {"correlation": i, "junk": {"nested": [name, {"x": [1, 2]}]}, "stream": int(rng.integers(0, 9))},
        }
        events.append(dict(sorted(e.items(), key=lambda kv: rng.random())))
    indent = None if seed % 2 else 2
    p = write_json(tmp_path, "r.json", {"traceEvents": events, "deviceProperties": []}, indent=indent)
    want = sorted((e["name"], round(e["ts"] * 1000), e["args"]["correlation"]) for e in events)
    for block in (None, 1 << 12):
        if block:
            monkeypatch.setattr(reader, "BLOCK_BYTES", block)
            monkeypatch.setattr(reader, "MIN_PARALLEL_BYTES", 256)
        t = gpuan.trace.kineto.build_trace(reader.scan_file(str(p), threads=2), source=str(p))
        base = t.metadata["base_time_ns"]
        got = sorted(
            zip(
                t.events["name"].to_pylist(),
                (v + base for v in t.events["ts"].to_pylist()),
                t.events["correlation"].to_pylist(),
            )
        )
        assert got == want


def test_times_in_exponent_form_and_null(tmp_path):
    """Exponent notation is exact to the ns; a ts/dur of null is missing."""
    text = (
        '{"traceEvents": [{"ph": "X", "name": "e", "ts": 1.7000001234567e15, "dur": 1.23456e3},'
        '{"ph": "X", "name": "s", "ts": 1700000123456700.5004, "dur": 2},'
        '{"ph": "X", "name": "n", "ts": null, "dur": null}]}'
    )
    p = tmp_path / "e.json"
    p.write_text(text)
    t = gpuan.load(p, use_cache=False)
    rows = {r["name"]: r for r in t.events.to_pylist()}
    base = t.metadata["base_time_ns"]
    assert rows["e"]["ts"] + base == 1_700_000_123_456_700_000 and rows["e"]["dur"] == 1_234_560
    assert rows["s"]["ts"] + base == 1_700_000_123_456_700_500 and rows["s"]["dur"] == 2_000
    assert rows["n"]["ts"] is None and rows["n"]["dur"] is None


GOOD = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 5, "dur": 1, "args": {"stream": 7}}


@pytest.mark.parametrize(
    "field, value, problem",
    [
        ("dur", "abc", 'dur is "abc", not a number (microseconds)'),
        ("dur", "12.5", 'dur is "12.5", not a number (microseconds)'),  # a number in a string is no number either
        ("ts", float("nan"), "ts is NaN, not a number (microseconds)"),
        ("ts", 1e300, "ts is 1e+300, not a time gpuan can hold (int64 nanoseconds: within about 292 years)"),
        ("pid", [0], "pid is [0], not a number or a string"),
        ("name", 5, "name is 5, not a string"),
        ("args", [1], "args is [1], not an object"),
        ("args.device", "gpu0", 'args.device is "gpu0", not an integer (a number or a string of digits)'),
        ("args.correlation", {"a": 1}, 'args.correlation is {"a": 1}, not an integer (a number or a string of digits)'),
        ("args.grid", [1, "x", 1], 'args.grid is [1, "x", 1], not a list of integers'),
        ("ph", "12.5", 'ph is "12.5", not one of the Chrome trace phases (X, B, E, i, ...)'),
        ("ph", None, "ph is null, not one of the Chrome trace phases (X, B, E, i, ...)"),
        (
            "dur",
            2**70,
            "dur is 1180591620717411303424, not a time gpuan can hold (int64 nanoseconds: within about 292 years)",
        ),
        ("args.correlation", 2**70, "args.correlation is 1180591620717411303424, not an integer that int64 holds"),
    ],
)
def test_a_field_of_the_wrong_type_is_bad_input(tmp_path, field, value, problem):
    """The error names the file, the event (index, name, byte offset) and the field; no cache is written."""
    from gpuan.errors import TraceError

    bad = json.loads(json.dumps(GOOD))
    if field.startswith("args."):
        bad["args"][field[5:]] = value
    else:
        bad[field] = value
    path = write_json(tmp_path, "t.json", {"traceEvents": [GOOD, GOOD, bad, GOOD]})
    offset = len('{"traceEvents": [') + 2 * len(json.dumps(GOOD) + ", ")
    name = "" if field == "name" else " 'k'"
    with pytest.raises(TraceError) as err:
        gpuan.load(path)
    assert str(err.value) == f"{path}: traceEvents[2]{name} at byte {offset}: {problem}"
    assert not list(tmp_path.glob("*.parquet"))


def test_the_scanner_takes_exactly_the_chrome_trace_phases():
    """The phase table answers for every byte: the format's phases (its list, written out here) and nothing else."""
    from gpuan.trace.kineto import scanner

    chrome_phases = set("BEXiICbneSTpFstfPONDMVvRc") | {"(", ")"}
    assert {chr(b) for b in range(256) if scanner._is_phase(np.uint8(b))} == chrome_phases


def test_keys_strings_and_raw_values_hash_alike():
    """A key's hash as the scanner's tables know it (key_hash, in Python), the hash taken in the same pass
    that finds a string's end (string_end_hash) and the hash of any span of bytes (_hash_bytes) agree, on
    strings of every length around the 8-byte words, with and without escapes, ending at the data's end
    or not; and the ends agree with string_end."""
    from gpuan.trace.kineto import scanner as sc

    rng = np.random.default_rng(3)
    texts = [
        bytes(rng.integers(32, 127, k, dtype=np.uint8)).replace(b"\\", b"/").replace(b'"', b"'") for k in range(40)
    ]
    texts += [b'a\\"b', b"\\\\", b"x" * 9 + b"\\n" + b"y" * 7, "ünïcode kernel".encode(), b"External id"]
    for text in texts:
        for cut in (False, True):  # the closing quote the data's last byte, or more data after it
            data = b'"' + text + b'"' + (b"" if cut else b", 1234567890abcdef")
            buf = np.zeros(len(data) + reader.SLACK, np.uint8)
            buf[: len(data)] = np.frombuffer(data, np.uint8)
            b64 = sc.words(buf)
            end, h = sc.string_end_hash(buf, b64, 1, len(data))
            assert end == sc.string_end(buf, b64, 1, len(data)) == 1 + len(text)
            assert h == sc._hash_bytes(b64, 1, end)
            if b"\\" not in text:
                assert int(h) == sc.key_hash(text.decode())


def test_every_scanner_function_compiles_without_reference_counting():
    """Reference counting of the caller's arrays (out-of-line atomic calls around the inlined helpers) made a
    scan take 1.7-1.8x the CPU: each compiled function of the scanner, those added later included, is built
    without numba's runtime."""
    from numba.core.registry import CPUDispatcher

    from gpuan.trace.kineto import scanner

    compiled = {name: f for name, f in vars(scanner).items() if isinstance(f, CPUDispatcher)}
    assert {"scan", "_parse_event", "_parse_args", "skip_value", "drain"} <= set(compiled)
    assert [name for name, f in compiled.items() if f.targetoptions.get("_nrt") is not False] == []


def test_the_gpu_reader_compiles_every_scanner_function_its_functions_call():
    """The GPU reader compiles the scanner's functions named in ``scanner_cuda.SHARED`` for CUDA, callees
    first, each calling the others' device copies: a scanner function that one of them calls and that is
    missing there would be compiled for CUDA from the CPU module's namespace (its own calls not the device
    copies: ``trailing_zeros`` the CPU intrinsic), so every callee is listed, before its callers."""
    from numba.core.registry import CPUDispatcher

    from gpuan.trace.kineto import scanner
    from gpuan.trace.kineto.gpu.scanner_cuda import SHARED

    compiled = {name for name, f in vars(scanner).items() if isinstance(f, CPUDispatcher)}
    replaced = {"intern"}  # the GPU's record_span stands in for it
    for k, name in enumerate(SHARED):
        callees = set(getattr(scanner, name).py_func.__code__.co_names) & compiled - replaced
        assert callees <= set(SHARED[:k]), (name, callees - set(SHARED[:k]))


def test_every_scanner_function_says_whether_llvm_inlines_it():
    """A function that does not set numba's forceinline takes the setting of the compile that reached it
    first: every scanner function sets it, the helpers on a key's path inlined, and the functions the reader
    calls to scan, collect and grow, and the cold exponent path, not."""
    from numba.core.registry import CPUDispatcher

    from gpuan.trace.kineto import scanner

    compiled = {name: f for name, f in vars(scanner).items() if isinstance(f, CPUDispatcher)}
    out_of_line = {"scan", "drain", "array_end", "find_chunk_start", "_find_events_array", "rehash", "_exponent_ns"}
    assert out_of_line < set(compiled)
    assert [name for name, f in compiled.items() if "forceinline" not in f.targetoptions] == []
    assert {name for name, f in compiled.items() if not f.targetoptions["forceinline"]} == out_of_line


def test_an_event_without_a_phase_is_bad_input(tmp_path):
    from gpuan.errors import TraceError

    no_ph = {k: v for k, v in GOOD.items() if k != "ph"}
    for i, doc in enumerate(([GOOD, no_ph], [GOOD, {}])):
        path = write_json(tmp_path, f"{i}.json", doc)
        with pytest.raises(TraceError, match=r"traceEvents\[1\].* at byte \d+: no ph \(the event's phase"):
            gpuan.load(path)


@pytest.mark.parametrize(
    "text",
    [
        '[{"ph": "X", "name": "a", "ts": 1, "dur": 1} {"ph": "X", "name": "b", "ts": 2, "dur": 1}]',  # no comma
        '[{"ph": "X", "name": "a", "ts": 1, "dur": 1, "pid": 3\u0012227}]',  # a control byte in a number
        '[{"ph": "X", "name": "a", "ts": 1, "dur": 1, "args": {"correlation": 1\u00122}}]',
        '[{"ph": "X", "name": "a", "ts": 1, "dur": 1, "x": tr\u0012ue}]',  # in a value gpuan skips
        '[{"ph": "X", "name": "a", "ts": 1, "dur": 1, "args": {"Input Dims": [[20\u00b9]]}}]',  # inside an array
        '[{"ph": "X", "name": "a", "ts": 1, "dur": 1, "x": {"y": [1, 2 ; 3]}}]',  # in an object gpuan skips
    ],
)
def test_malformed_json_is_bad_input(tmp_path, text):
    from gpuan.errors import TraceError

    p = tmp_path / "m.json"
    p.write_text(text)
    with pytest.raises(ValueError):
        json.loads(p.read_text())  # the test's own reading agrees it is no JSON
    with pytest.raises(TraceError, match="malformed JSON near byte"):
        gpuan.load(p)


def test_values_real_traces_write_are_not_wrong_types(tmp_path):
    """What the real traces hold: string pids/tids, numbers in strings in args (ROCm's "bytes": "1",
    "stream": "0x0"), Triton's grid written as text on its cpu_op, nulls."""
    events = [
        {**GOOD, "pid": "Spans", "tid": "stream 7"},
        {**GOOD, "args": {"bytes": "12", "stream": "0x7", "correlation": None}},
        {**GOOD, "cat": "cpu_op", "args": {"grid": "grid(100,)", "Input Dims": [[1, 2]]}},
    ]
    rows = gpuan.load(write_json(tmp_path, "ok.json", events), use_cache=False).events.to_pylist()
    assert len(rows) == 3
    assert sorted(r["bytes"] for r in rows if r["bytes"] is not None) == [12]


def test_missing_times_sort_last_whatever_the_file_order(tmp_path):
    a = {"ph": "X", "cat": "kernel", "name": "a", "pid": 0, "tid": 7, "dur": 1}
    b = {"ph": "X", "cat": "kernel", "name": "b", "pid": 0, "tid": 7, "ts": 5, "dur": 1}
    c = {"ph": "X", "cat": "kernel", "name": "c", "pid": 0, "tid": 7, "ts": 9, "dur": 1}
    one = gpuan.load(write_json(tmp_path, "1.json", [a, b, c]), use_cache=False)
    two = gpuan.load(write_json(tmp_path, "2.json", [b, c, a]), use_cache=False)
    assert one.events["name"].to_pylist() == two.events["name"].to_pylist() == ["b", "c", "a"]


def test_odd_strings_and_metadata_do_not_break_loading(tmp_path):
    p = tmp_path / "odd.json"
    p.write_text(
        '{"distributedInfo": null, "deviceProperties": null, "baseTimeNanoseconds": "abc", "traceEvents": ['
        '{"ph": "X", "name": "bad \\\\q escape \\q", "ts": 1, "dur": 1},'
        '{"ph": "X", "name": "lone \\ud800 surrogate", "ts": 2, "dur": 1}]}'
    )
    t = gpuan.load(p, use_cache=False)
    names = t.events["name"].to_pylist()
    assert names[0].startswith("bad \\") and names[1].startswith("lone ")
    assert t.metadata["distributed_info"] == {} and t.metadata["device_properties"] == []


def test_strings_decoded_together_as_one_by_one():
    """The reader decodes a scan's strings in one call where it can: the same texts as decoding each alone,
    for lists holding invalid UTF-8 (a lead byte at a string's end, a continuation at the next's start),
    NUL bytes, escapes valid and not, lone surrogates, and none of these."""
    pieces = [b"a", b"\xc3\xa9", b"\xe2\x82", b"\xac", b"\xff", b"\x00", b"\\n", b"\\u00e9", b"\\ud800", b"\\q", b" "]
    rng = random.Random(3)
    plain = 0
    for _ in range(5_000):
        raws = [b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 4))) for _ in range(rng.randint(0, 9))]
        assert reader._decode_all(raws) == [reader._decode(r) for r in raws], raws
        plain += all(b"\\" not in r and b"\x00" not in r for r in raws)
    assert plain > 100


def test_negative_durations_and_no_timestamps_are_bad_input(tmp_path):
    from gpuan.errors import TraceError

    good = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 5, "dur": 1}
    negative = [good, good, {**good, "dur": -3}, {**good, "dur": -1}]
    with pytest.raises(
        TraceError, match=r"2 complete events have a negative duration \(dur\); the first is traceEvents\[2\]"
    ):
        gpuan.load(write_json(tmp_path, "neg.json", negative), use_cache=False)
    no_ts = [{k: v for k, v in good.items() if k != "ts"}] * 3
    with pytest.raises(TraceError, match="no complete event has a timestamp"):
        gpuan.load(write_json(tmp_path, "nots.json", {"traceEvents": no_ts}), use_cache=False)
    assert not list(tmp_path.glob("*.parquet"))  # no cache written for a bad trace


@pytest.mark.parametrize("name", ["mi300x_qwen05b_inference.json.gz", "v100_ddp_6steps_trace_diff_test.json.gz"])
def test_shapes_are_one_line_in_one_form(data_dir, name):
    """Pretty-printed (Qwen, across lines) and compact (V100) Input Dims come out the same way: the test
    re-dumps each raw value with json.dumps; the cpu_ops' shapes, counted by text, are the file's."""
    path = data_dir / "kineto" / name
    want = Counter(
        (e["name"], json.dumps(e["args"]["Input Dims"]), json.dumps(e["args"].get("Input type")))
        for e in json.loads(gzip.open(path).read())["traceEvents"]
        if e.get("cat") == "cpu_op" and "Input Dims" in e.get("args", {})
    )
    ev = gpuan.load(path, use_cache=False).of_kind("cpu_op")
    got = Counter(
        (n, d, t)
        for n, d, t in zip(ev["name"].to_pylist(), ev["input_dims"].to_pylist(), ev["input_types"].to_pylist())
        if d is not None
    )
    assert got == want
    assert not any("\n" in d for _, d, _ in got)


@pytest.mark.parametrize(
    "value",
    [
        [[4, 2798, 2798], [], [4, 2798, 2798]],
        ["float", "c10::Half", "", "Scalar"],
        {"a b": [1, "x, y: z"], 'esc"q': "tab\there", "u": "\u00e9 \u00e0"},
        [[1, 2], {"k": None, "f": -1.5e-3}],
    ],
)
@pytest.mark.parametrize("indent", [2, "\t"])
@pytest.mark.parametrize("ascii_only", [True, False])
def test_one_line_is_json_dumps_of_any_layout(value, indent, ascii_only):
    """Pretty-printed JSON, escaped or not, comes out as json.dumps' one-line text: strings kept as written."""
    text = json.dumps(value, indent=indent, ensure_ascii=ascii_only)
    assert "\n" in text
    assert one_line(text) == json.dumps(value, ensure_ascii=ascii_only)


@pytest.mark.parametrize(
    "text, want",
    [
        ("Tensor  list\n of 3", "Tensor list of 3"),  # words that whitespace kept apart keep one space
        ('a "s t" b', 'a"s t"b'),  # but not a word and a string: JSON needs no space there
        ('[1,\n "x\\\ny"]', '[1, "x\\y"]'),  # a raw newline ends a string (not JSON): then it is whitespace
        ('["cut', '["cut'),  # a string never closed runs to the end
        ("  \n\t ", ""),
        ("", ""),
    ],
)
def test_one_line_of_text_that_is_not_plain_json(text, want):
    assert one_line(text) == want


def test_one_line_takes_text_already_in_one_line_as_it_is():
    """one_line returns a text unchanged where it judges it laid out already (counting, not splitting it into
    words): never where the word-by-word layout would differ, over 200,000 random texts of the characters
    that matter (blanks of every kind, separators, strings, escapes, words)."""
    pieces = [
        "[", "]", "{", "}", ",", ":", " ", "  ", "\n", "\t", "\u00a0", "\u2028", "\x1c", "1", "77", "ab", "_", "\u00e9",
        '"x"', '"a, b"', '"c:d"', '"e\\"f"', '"', "\\", "-", ".", "long int", " ,", ", ", ": ", '", "',
        '"\\\n"', "\x00", '"\x00"',
    ]  # fmt: skip
    rng = random.Random(7)
    kept = 0
    for _ in range(200_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        if _in_one_line(text):
            kept += 1
            assert _relaid(text) == text, repr(text)
        assert one_line(text) == _relaid(text)
    assert kept > 10_000  # the quick path is taken, and checked, often


def test_one_line_each_is_one_line_of_each_text():
    """Texts judged in runs joined by NUL come out as each judged alone: 20,000 random lists, runs that pass
    whole among them (strings that a NUL or a run's end cut open included)."""
    pieces = [
        "[", "]", ",", ":", " ", "\n", "1", "ab", '"x"', '"a, b"', '"', "\\", "long int", ", ", ": ", "\x00", '"\x00"',
    ]  # fmt: skip
    rng = random.Random(11)
    whole = 0
    for _ in range(20_000):
        texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 6))) for _ in range(rng.randint(0, 70))]
        assert one_line_each(texts) == [one_line(t) for t in texts], texts
        whole += _in_one_line("\x00".join(texts[:32]))
    assert whole > 200


def test_one_line_of_real_argument_texts(data_dir):
    """Every JSON text the scanner kept from the real traces (Input Dims, Input type, Concrete Inputs, Process
    Group Ranks, as written: one trace pretty-prints them over many lines) comes out of one_line as the
    word-by-word layout makes it; most (Kineto's own compact layout) were in one line already, not all."""
    texts = set()
    for name in kineto_files():
        texts.update(s for s in reader.scan_file(str(data_dir / "kineto" / name)).strings if s[:1] in "[{")
    assert len(texts) > 1_000
    assert all(one_line(t) == _relaid(t) for t in texts)
    kept = sum(map(_in_one_line, texts))
    assert len(texts) // 2 < kept < len(texts)
    assert one_line_each(sorted(texts)) == [one_line(t) for t in sorted(texts)]


@pytest.mark.parametrize("name", [p.name for p in sorted((DATA / "kineto").glob("mi*.json.gz"))] or ["(none)"])
def test_rocm_gpu_events_name_a_listed_device(data_dir, name):
    """ROCm kernels carry HSA agent ids (CPU agents are numbered first); the table's device is an index
    of deviceProperties, so the device has the listed name. Truth from the raw file: the agents its GPU
    events carry and the devices it lists (one model in each of these traces)."""
    doc = json.loads(gzip.open(data_dir / "kineto" / name).read())
    props = {p["id"]: p["name"] for p in doc["deviceProperties"]}
    agents = {e["args"]["device"] for e in doc["traceEvents"] if e.get("cat") == "kernel"}
    t = gpuan.load(data_dir / "kineto" / name, use_cache=False)
    used = {d for d in t.of_kind("kernel")["device"].to_pylist()}
    assert used <= set(props) and len(used) == len(agents)
    assert {props[d] for d in used} == set(props.values())
    assert {int(a) for a in t.metadata["device_agents"]["agents"].values()} == agents


def rocm_trace(tmp_path, agents, n_devices, memory_device=None, rank=None):
    """A ROCm-like trace: one kernel on each agent, n listed devices named by index, and optionally a
    [memory] event on a GPU device index and a (rank, world size) in distributedInfo."""
    events = [
        {"ph": "X", "cat": "cuda_runtime", "name": "hipLaunchKernel", "pid": 1, "tid": 1, "ts": 1, "dur": 1},
        *(
            {"ph": "X", "cat": "kernel", "name": f"k{a}", "pid": a, "tid": 0, "ts": 2 + i, "dur": 1,
             "args": {"device": a, "stream": 0}}
            for i, a in enumerate(agents)
        ),
    ]  # fmt: skip
    if memory_device is not None:
        events.append({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 9,
                       "args": {"Device Type": 1, "Device Id": memory_device, "Bytes": 512}})  # fmt: skip
    props = [{"id": i, "name": f"GPU model {i}"} for i in range(n_devices)]
    doc = {"deviceProperties": props, "traceEvents": events}
    if rank is not None:
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank[0], "world_size": rank[1]}
    return write_json(tmp_path, "rocm.json", doc)


@pytest.mark.parametrize(
    "agents, n_devices, memory_device, rank, want",
    [
        ([9], 8, 7, None, {9: 7}),  # the memory events say which device
        ([9], 8, 3, (5, 8), {9: 3}),  # ... whatever the count of CPU agents or the rank would suggest
        ([5], 1, None, None, {5: 0}),  # one device listed
        ([2, 9], 8, None, None, {2: 0, 9: 7}),  # eight consecutive agents after two CPU agents: one offset fits
        ([1, 8], 8, None, None, {1: 0, 8: 7}),  # one CPU agent
        ([4], 8, None, (3, 8), {4: 3}),  # rank 3 of a job on one node: its device 3 (one CPU agent before)
        ([4], 8, None, (11, 16), {4: 3}),  # rank 11 of two nodes of 8 GPUs: local rank 3
        ([4], 8, None, (1, 2), {4: 1}),  # rank 1 of 2 on an 8-GPU node
        ([9], 8, None, (11, 12), {9: 7}),  # 12 ranks on 8-GPU nodes: the rank does not say, two CPU agents assumed
        ([9], 8, None, None, {9: 7}),  # nothing says: two CPU agents assumed
    ],
)
def test_rocm_agent_rule(tmp_path, agents, n_devices, memory_device, rank, want):
    t = gpuan.load(rocm_trace(tmp_path, agents, n_devices, memory_device, rank), use_cache=False)
    k = t.of_kind("kernel")
    got = dict(zip((int(n[1:]) for n in k["name"].to_pylist()), k["device"].to_pylist()))
    assert got == want
    assert ("assumed" in t.metadata["device_agents"]["basis"]) == (memory_device is None and want == {9: 7})


def test_rocm_device_of_the_qwen_trace_is_the_one_its_memory_events_name(data_dir):
    """The Qwen inference trace's kernels carry agent 2; its PyTorch [memory] events on a GPU (Device Type
    CUDA or HIP) name the device index. Truth counted from the raw JSON."""
    doc = json.loads(gzip.open(data_dir / "kineto" / "mi300x_qwen05b_inference.json.gz").read())
    gpu_memory = {
        e["args"]["Device Id"]
        for e in doc["traceEvents"]
        if e.get("name") == "[memory]" and e.get("args", {}).get("Device Type") in (1, 6)
    }
    agents = {e["args"]["device"] for e in doc["traceEvents"] if e.get("cat") == "kernel"}
    assert len(gpu_memory) == 1 and len(agents) == 1  # what makes the evidence exact
    t = gpuan.load(data_dir / "kineto" / "mi300x_qwen05b_inference.json.gz", use_cache=False)
    assert set(t.of_kind("kernel")["device"].to_pylist()) == gpu_memory
    assert "memory events" in t.metadata["device_agents"]["basis"]


def test_rocm_device_of_a_ddp_rank_is_its_local_rank(data_dir):
    """The ResNet DDP trace is one rank of a job; its kernels use one agent, with no [memory] events: the
    rank's device is its local rank (rank modulo the GPUs the node lists). Truth from the raw JSON."""
    doc = json.loads(gzip.open(data_dir / "kineto" / "mi300x_resnet_ddp_act_checkpoint.json.gz").read())
    dist, n = doc["distributedInfo"], len(doc["deviceProperties"])
    assert dist["world_size"] % n == 0 and not any(e.get("name") == "[memory]" for e in doc["traceEvents"])
    t = gpuan.load(data_dir / "kineto" / "mi300x_resnet_ddp_act_checkpoint.json.gz", use_cache=False)
    assert set(t.of_kind("kernel")["device"].to_pylist()) == {dist["rank"] % n}
    assert f"rank {dist['rank']} of {dist['world_size']}" in t.metadata["device_agents"]["basis"]


def test_a_small_file_is_scanned_without_scanning_threads(tmp_path, monkeypatch):
    started = []

    class Workers(reader._Workers):
        def __init__(self, threads, tables, size):
            started.append(threads)
            super().__init__(threads, tables, size)

    monkeypatch.setattr(reader, "_Workers", Workers)
    small = tmp_path / "small.json"
    small.write_text(
        json.dumps(
            {"traceEvents": [{"ph": "X", "name": "k", "ts": i, "dur": 1, "pid": 0, "tid": 0} for i in range(50)]}
        )
    )
    assert len(reader.scan_file(str(small), threads=2).columns["ts"]) == 50
    monkeypatch.setattr(reader, "MIN_PARALLEL_BYTES", 256)  # the same file counted as large
    assert len(reader.scan_file(str(small), threads=2).columns["ts"]) == 50
    assert started == [0, 2]


@pytest.mark.parametrize(("share", "asked", "scanning"), [(1.5, 2, 0), (2.0, 2, 2), (3.5, 4, 3), (9.0, 4, 4)])
def test_a_file_is_scanned_by_as_many_threads_as_it_has_shares_for(tmp_path, monkeypatch, share, asked, scanning):
    """Each scanning thread is given MIN_PARALLEL_BYTES of the file or more: a file of 1.5 shares is scanned by
    the calling thread alone at 2 threads, one of 3.5 shares by 3 of the 4 threads asked for; the table is
    the same."""
    started = []

    class Workers(reader._Workers):
        def __init__(self, threads, tables, size):
            started.append(threads)
            super().__init__(threads, tables, size)

    path = tmp_path / "trace.json"
    events = [
        {"ph": "X", "cat": "kernel", "name": f"k{i % 7}", "ts": i, "dur": 1, "pid": 0, "tid": 7} for i in range(400)
    ]
    path.write_text(json.dumps({"traceEvents": events}))
    whole = reader.scan_file(str(path), threads=1)
    monkeypatch.setattr(reader, "_Workers", Workers)
    monkeypatch.setattr(reader, "MIN_PARALLEL_BYTES", int(path.stat().st_size / share))
    raw = reader.scan_file(str(path), threads=asked)
    assert started == [scanning]
    assert raw.columns["ts"].tolist() == whole.columns["ts"].tolist() == [1000 * i for i in range(400)]  # ns
    assert [raw.strings[i] for i in raw.columns["name"]] == [e["name"] for e in events]
