"""Ingest benchmark: Kineto traces into a table, gpuan against the anchors, on several layouts in one run.

    python bench/ingest.py [--size-mb 1024] [--repeat 5] [--threads 1,2] [--layouts synth,gen,real]
                           [--skip-hta] [--skip-pandas] [--profile] [--out bench/results]

The full run (what docs/benchmarks.md quotes; about 45 minutes on a quiet 2-core machine, most of it
HTA, json + pandas and the compiles with an empty numba cache; run it when nothing else runs):

    scripts/with-venv --extras=bench python bench/ingest.py --size-mb 1024 --repeat 5

Layouts, each as .json and as .json.gz (generated: python-isal level 1 of the same bytes; real: as shipped):
  - synth: gpuan.synth's trace of about --size-mb MB (96 layers a step, ~80 steps per GB);
  - gen: ../shared/tools/gen_kineto_trace.py OUT --size-mb N (libkineto's own text layout of a PyTorch
    2.x training step: pretty-printed, long kernel names and args);
  - real: every *.json.gz under ../shared/data/kineto (28 small real traces, ~190 MB inflated) as one
    group: each path reads all of them in one process; bytes and seconds are summed over the files.

Paths, each in a fresh Python process so that peak RSS belongs to that path alone:
  - gpuan.load with GPUAN_THREADS=1 and 2 (--threads), called twice in the process: the first call is
    what a CLI user pays (numba's cached machine code loaded from disk, after the command line's lighter
    numba start), the second the steady state;
    once more per layout with NUMBA_CACHE_DIR pointed at an empty directory: the very first call after
    an install, which compiles the scanner;
  - the parallel control (.json, with more than one --threads value): a numba byte loop (strings and
    escapes followed, structure counted) over the file's mapped bytes, cut into GPUAN_THREADS equal shares
    run by as many Python threads, as gpuan's scan threads run its scanner; twice, as gpuan. Work that is
    perfectly parallel: its most threads against its fewest (--threads) is what this machine gives at best
    in the same run, so gpuan's thread scaling is read against it;
  - simdjson parse only: pysimdjson's Parser().parse(bytes) (simdjson's DOM parser: the whole tape is
    built; pysimdjson's objects are lazy proxies over it), then len(traceEvents); twice, as gpuan: the
    first parse allocates the parser's buffers, the second reuses them;
  - a msgspec Struct decode: a Struct of the event fields gpuan reads (ph, name, cat, ts, dur, pid, tid,
    args as msgspec.Raw), then those fields as Arrow columns (args left undecoded); twice, as gpuan;
  - stdlib json.load + pandas.DataFrame (--skip-pandas), Holistic Trace Analysis' per-rank parser
    hta.common.trace.parse_trace_file (--skip-hta; in a pandas<3 venv where this one has pandas 3);
  - gpuan's Parquet file of the trace (gpuan.trace.parquet.write once, then gpuan.load of it).
simdjson and msgspec time the parse from the file's bytes in memory (reading them from the page cache is
outside, reported in the notes); for a .json.gz their time includes inflating those bytes (isal), as
gpuan's does. json + pandas and HTA time their whole call (file reading and gzip included).

Every number is the MEDIAN over --repeat fresh processes (slow anchors: --slow-repeat, default 1), never
the best; each run's wall time is listed beside it. Wall seconds by perf_counter, CPU seconds as the
child's user + sys (resource.getrusage(RUSAGE_SELF) deltas around the call, every thread included),
MB/s over the uncompressed JSON bytes, peak RSS the child's VmHWM (interpreter and imports included;
where a path is called twice, the high-water mark of both calls).

The profile (in every run, or alone with --profile) splits gpuan.load of the gen layout at each thread
count into its stages, instrumented from the outside: the bytes alone through gpuan.trace.source.
open_bytes (page-cache read / isal inflate); reader.scan_file, and in it the reading (reader.fill), the
scanner (sc.scan: its wall time, the union over threads, and its thread-seconds), the drain into the
output columns (sc.drain) and the rest of collecting (string ids, metadata rows), the strings decoded
(reader._assemble); then the Arrow table (events.build_trace).

Generated traces are cached in --cache-dir and made again when their generator changes. A Markdown
report goes to <out>/ingest-<date>-<machine>.md (--profile alone: ingest-profile-<date>-<machine>.md).

With --gpu, only the GPU comparison runs instead: for each of --gpu-sizes (default 1 GB and 5 GB, made by
../shared/tools/gen_kineto_trace.py where it is, else gpuan.synth), plain and gzipped, the CPU reader (all
cores), the CPU reader plus the upload of every column, and gpuan.load(device="gpu") (the JSON parsed on
the GPU); GB/s over the uncompressed JSON, to <out>/ingest-gpu-<sizes>mb-<date>-<machine>.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import io
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULT_TAG = "BENCH-RESULT "
CHILD_TIMEOUT_S = 3600
GZIP_MAGIC = b"\x1f\x8b"


# ---------------------------------------------------------------------------------------------------
# Child side: one measurement in a fresh process


def _peak_rss_bytes() -> int:
    """Return this process's peak resident set size in bytes.

    VmHWM belongs to this process's own address space; ru_maxrss would also carry the parent's
    high-water mark into a child started by vfork + exec, as subprocess does on Linux."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def _cpu_seconds() -> float:
    """Return this process's user + sys CPU seconds so far, all its threads included."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class _Clock:
    """Wall and CPU seconds since it was made."""

    def __init__(self) -> None:
        self.wall0, self.cpu0 = time.perf_counter(), _cpu_seconds()

    def read(self) -> tuple[float, float]:
        """Return (wall seconds, CPU seconds) since the clock was made."""
        return time.perf_counter() - self.wall0, _cpu_seconds() - self.cpu0


def _gpuan_load(path: str):
    """Return gpuan.load(path) without the Parquet cache, whatever gpuan.load's signature is now."""
    import gpuan

    try:
        return gpuan.load(path, use_cache=False)
    except TypeError:
        return gpuan.load(path)


def _json_pandas(path: str) -> int:
    """Load the trace with json + pandas; returns the DataFrame's row count."""
    import gzip

    import pandas as pd

    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        trace = json.load(f)
    return len(pd.DataFrame(trace["traceEvents"]))


def _hta(path: str) -> int:
    """Load the trace the way HTA's TraceAnalysis does per rank; returns the DataFrame's row count."""
    from hta.common.trace import parse_trace_file

    _meta, df, _symbols = parse_trace_file(path)
    return len(df)


def _file_bytes(path: str) -> tuple[bytes, dict]:
    """Return a file's bytes (read from the page cache) and the read's wall and CPU seconds."""
    c = _Clock()
    data = Path(path).read_bytes()
    wall, cpu = c.read()
    return data, {"read_s": wall, "read_cpu_s": cpu}


def _inflated(data: bytes) -> bytes | memoryview:
    """Return data, gunzipped by python-isal where it is gzip: streamed into one buffer sized from the gzip
    trailer. Not `igzip.decompress`, which took 4.3 s for the 1 GB gen trace against 1.8-2.1 s this way
    (it grows its output as it goes, faulting in and copying fresh memory); the anchors get the fastest
    inflate into one buffer that isal offers, as a DOM parser needs all the bytes in memory."""
    if not data.startswith(GZIP_MAGIC):
        return data
    from isal import igzip

    # the trailer holds the size mod 2**32 of the last member: a start (and a byte to see the end by without
    # growing), grown if the stream holds more
    buf = bytearray(max(int.from_bytes(data[-4:], "little") + 1, 1 << 20))
    at = 0
    with igzip.open(io.BytesIO(data)) as stream:
        while True:
            if at == len(buf):
                buf.extend(bytes(len(buf)))
            got = stream.readinto(memoryview(buf)[at : at + (8 << 20)])
            if not got:
                break
            at += got
    return memoryview(buf)[:at]


def _simdjson_parse(path: str, parser) -> dict:
    """Parse a file with pysimdjson (DOM) from its bytes in memory, inflating a .gz first; returns the event
    count and seconds (inflate + parse; the parts apart too)."""
    raw, out = _file_bytes(path)
    c = _Clock()
    data = _inflated(raw)
    out["inflate_s"], out["inflate_cpu_s"] = c.read()
    del raw
    c2 = _Clock()
    doc = parser.parse(data)
    events = doc["traceEvents"] if hasattr(doc, "keys") else doc
    out["rows"] = len(events)
    out["parse_s"], out["parse_cpu_s"] = c2.read()
    out["seconds"], out["cpu_s"] = c.read()
    del events, doc  # pysimdjson refuses a new parse while proxies of the last one live
    return out


def _msgspec_types():
    """Return a msgspec JSON decoder of a trace whose events are Structs of the fields gpuan reads."""
    import msgspec

    number, ident = float | None, int | str | None
    event = msgspec.defstruct(
        "Event",
        [("ph", str, ""), ("name", str, ""), ("cat", str, ""), ("ts", number, None), ("dur", number, None),
         ("pid", ident, None), ("tid", ident, None), ("args", msgspec.Raw, msgspec.Raw())],
        gc=False,
    )  # fmt: skip
    trace = msgspec.defstruct("Trace", [("traceEvents", list[event], [])], gc=False)
    return msgspec.json.Decoder(trace)


def _msgspec_columns(events: list):
    """Return the Structs' fields as an Arrow table (strings dictionary-encoded, string pids as null)."""
    import pyarrow as pa

    def text(values):
        return pa.array(values, pa.string()).dictionary_encode()

    def ints(values):
        return pa.array([v if type(v) is int else None for v in values], pa.int64())

    return pa.table(
        {
            "ph": text([e.ph for e in events]),
            "name": text([e.name for e in events]),
            "cat": text([e.cat for e in events]),
            "ts": pa.array([e.ts for e in events], pa.float64()),
            "dur": pa.array([e.dur for e in events], pa.float64()),
            "pid": ints([e.pid for e in events]),
            "tid": ints([e.tid for e in events]),
        }
    )


def _msgspec_decode(path: str, decoder) -> dict:
    """Decode a file into Structs from its bytes in memory (inflating a .gz first), then build the columns;
    returns the row count and seconds (all of it; inflate + decode apart)."""
    raw, out = _file_bytes(path)
    c = _Clock()
    data = _inflated(raw)
    out["inflate_s"], out["inflate_cpu_s"] = c.read()
    del raw
    events = decoder.decode(data).traceEvents
    out["decode_s"], out["decode_cpu_s"] = c.read()  # inflate + decode
    out["decode_peak_rss"] = _peak_rss_bytes()
    del data
    out["rows"] = _msgspec_columns(events).num_rows
    out["seconds"], out["cpu_s"] = c.read()
    return out


def _byte_loop():
    """Return the control's kernel: a numba loop over bytes [lo, hi) that follows strings and escapes and
    counts structure outside them, one byte at a time (no gil, so threads run it side by side)."""
    import numba
    import numpy as np

    @numba.njit(nogil=True)
    def walk(data, lo, hi):
        count, in_string, escaped = 0, False, False
        for i in range(lo, hi):
            c = data[i]
            if escaped:
                escaped = False
            elif in_string:
                if c == 92:  # backslash
                    escaped = True
                elif c == 34:
                    in_string = False
            elif c == 34:
                in_string = True
            elif c == 44 or c == 123:  # comma, open brace
                count += 1
        return count

    walk(np.frombuffer(b'{"a,": 1}', np.uint8), 0, 9)  # compiled here, outside the timing
    return walk


def _control(threads: int):
    """Return fn(path) -> {"rows", "seconds", "cpu_s"}: the parallel control, the byte loop over a .json's
    bytes (mapped, in the page cache) cut into `threads` equal shares, one Python thread each, as gpuan's
    scan threads run its compiled scanner. Perfectly parallel work: what `threads` threads of it gain over
    one is what this machine gives at best, in the same run."""
    import mmap
    import threading

    import numpy as np

    walk = _byte_loop()

    def call(path: str) -> dict:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            data = np.frombuffer(m, np.uint8)
            n = data.size
            cuts = [n * k // threads for k in range(threads + 1)]
            counts = [0] * threads

            def share(view, k: int) -> None:
                counts[k] = walk(view, cuts[k], cuts[k + 1])

            c = _Clock()
            pool = [threading.Thread(target=share, args=(data, k)) for k in range(threads)]
            for t in pool:
                t.start()
            for t in pool:
                t.join()
            wall, cpu = c.read()
            del data, pool  # the map closes only once no view of it is left
        return {"rows": 0, "seconds": wall, "cpu_s": cpu}  # no table: rows stay 0

    return call


def _timed(fn):
    """Return fn(path) -> rows wrapped to return {"rows", "seconds", "cpu_s"} of the whole call."""

    def call(path: str) -> dict:
        c = _Clock()
        rows = fn(path)
        wall, cpu = c.read()
        return {"rows": rows, "seconds": wall, "cpu_s": cpu}

    return call


def _over_files(files: list[str], fn) -> dict:
    """Run fn on every file (a group: a file that fails is skipped and named); returns the sums of what
    fn returned. A lone file that fails raises."""
    total: dict = defaultdict(float)
    failed = []
    for f in files:
        try:
            r = fn(f)
        except Exception as e:  # noqa: BLE001  (one odd real trace must not hide the other 27)
            if len(files) == 1:
                raise
            failed.append(f"{f}: {type(e).__name__}: {str(e)[:120]}")
            continue
        for k, v in r.items():
            total[k] = max(total[k], v) if k.endswith("peak_rss") else total[k] + v
    if len(failed) == len(files):
        raise RuntimeError(f"every file failed, first: {failed[0]}")
    out = dict(total)
    out["rows"] = int(out.get("rows", 0))
    out["failed"] = failed
    return out


def _twice(files: list[str], fn, base_rss: int) -> dict:
    """Run fn over the files twice in this process: the first call (what a one-shot command pays), then
    the steady state; returns the second's sums, the first's seconds beside them, and the peak RSS of
    the whole process (both calls: memory the first did not give back shows)."""
    first = _over_files(files, fn)
    extra = {"first_s": first["seconds"], "first_cpu_s": first["cpu_s"], "first_peak_rss": _peak_rss_bytes()}
    if "decode_peak_rss" in first:
        extra["decode_peak_rss"] = first["decode_peak_rss"]  # up to the Structs, before any columns existed
    r = _over_files(files, fn)
    return {**r, **extra, "peak_rss": _peak_rss_bytes(), "base_rss": base_rss, "warmup_s": 0.0}


def trace_files(trace: str) -> list[str]:
    """Return the files a child reads: the one path, or those listed (one a line) in @LISTFILE."""
    if trace.startswith("@"):
        return [ln for ln in Path(trace[1:]).read_text().splitlines() if ln.strip()]
    return [trace]


def run_child(kind: str, trace: str, parquet: str | None, warmup: str | None) -> dict:
    """Run one measurement in this process; returns seconds, CPU seconds, rows and peak RSS (bytes)."""
    files = trace_files(trace)
    if kind == "gpuan-profile":
        return profile_child(files[0], warmup)
    if kind.startswith("gpuan"):
        import gpuan  # noqa: F401  (import cost stays out of the timing)
        from gpuan.jit_cache import lighter_numba_start
        from gpuan.trace import parquet as gpq

        lighter_numba_start()  # as the command line does before it loads numba code

        t = time.perf_counter()
        if warmup and kind == "gpuan-gpu-ingest":
            gpuan.load(warmup, use_cache=False, device="gpu")  # compiles the CUDA kernels
        elif warmup:
            _gpuan_load(warmup)
        warm_s = time.perf_counter() - t
    else:
        warm_s = 0.0
        if kind == "hta":
            import hta.common.trace  # noqa: F401
        elif kind == "json-pandas":
            import pandas  # noqa: F401
    base_rss = _peak_rss_bytes()
    extra: dict = {}
    c = _Clock()
    if kind == "gpuan" and not warmup:
        # the first call: numba's machine code loaded from its cache (or compiled, NUMBA_CACHE_DIR empty)
        return _twice(files, _timed(lambda p: _gpuan_load(p).events.num_rows), base_rss)
    if kind == "control":
        return _twice(files, _control(int(os.environ.get("GPUAN_THREADS", "1"))), base_rss)
    if kind == "simdjson":
        import simdjson

        parser = simdjson.Parser()  # the first parse allocates its buffers, the second reuses them
        return _twice(files, lambda p: _simdjson_parse(p, parser), base_rss)
    if kind == "msgspec":
        decoder = _msgspec_types()
        return _twice(files, lambda p: _msgspec_decode(p, decoder), base_rss)
    if kind in ("json-pandas", "hta"):
        r = _over_files(files, _timed(_json_pandas if kind == "json-pandas" else _hta))
        return {**r, "peak_rss": _peak_rss_bytes(), "base_rss": base_rss, "warmup_s": 0.0}
    if kind == "gpuan":
        rows = _gpuan_load(trace).events.num_rows
    elif kind == "gpuan-parquet-write":
        tr = _gpuan_load(trace)
        c = _Clock()
        gpq.write(tr, parquet)
        rows = tr.events.num_rows
        extra["parquet_bytes"] = os.path.getsize(parquet)
    elif kind == "gpuan-parquet":
        rows = _gpuan_load(parquet).events.num_rows
    elif kind == "gpuan-gpu":
        from gpuan import engine

        gpu = engine.select("gpu")  # raises where there is no GPU: the row then says why
        table = _gpuan_load(trace).events
        t_cols = time.perf_counter()
        cols = gpu.columns(table)
        gpu.xp.cuda.Device().synchronize()
        extra["to_gpu_s"] = time.perf_counter() - t_cols
        extra["gpu_bytes"] = int(sum(c.nbytes for c in cols.values()))
        rows = table.num_rows
    elif kind == "gpuan-gpu-ingest":
        import cupy

        rows = gpuan.load(trace, use_cache=False, device="gpu").events.num_rows
        cupy.cuda.Device().synchronize()
        seconds, cpu = c.read()
        from gpuan.trace.kineto.gpu.reader import scan_file_gpu

        # outside the timing: whether the GPU took the file whole (else the CPU reader read it)
        extra["parsed_on_gpu"] = scan_file_gpu(trace, cupy) is not None
        return {"seconds": seconds, "cpu_s": cpu, "rows": rows, "peak_rss": _peak_rss_bytes(), "base_rss": base_rss,
                "warmup_s": warm_s, **extra}  # fmt: skip
    else:
        raise SystemExit(f"unknown measurement {kind!r}")
    seconds, cpu = c.read()
    peak = _peak_rss_bytes()
    return {"seconds": seconds, "cpu_s": cpu, "rows": rows, "peak_rss": peak, "base_rss": base_rss,
            "warmup_s": warm_s, **extra}  # fmt: skip


def _union_seconds(spans: list[tuple[float, float]]) -> float:
    """Return the length of the union of [start, end) intervals (time when at least one was running)."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end <= reach:
            continue
        total += end - max(start, reach)
        reach = end
    return total


def _outside_seconds(spans: list[tuple[float, float]], busy: list[tuple[float, float]]) -> float:
    """Return how long the `spans` ran while none of the `busy` intervals did (the reader reads ahead and
    drains while its threads scan: only what runs outside the scan adds to the wall time)."""
    return _union_seconds(list(spans) + list(busy)) - _union_seconds(busy)


def profile_child(path: str, warmup: str | None) -> dict:
    """Split gpuan's load of `path` into its stages (at $GPUAN_THREADS threads), instrumented from the
    outside: the reader's functions are wrapped with timers for this one call. Returns seconds per stage."""
    import numpy as np

    from gpuan.trace.kineto import events, reader
    from gpuan.trace.kineto import scanner as sc
    from gpuan.trace.memory import huge_pages, lean_memory
    from gpuan.trace.source import open_bytes
    from gpuan.trace.threads import thread_count

    if warmup:
        _gpuan_load(warmup)  # numba's machine code loaded outside the timing
    out: dict = {"threads": thread_count()}

    # the bytes alone: read (page cache) or inflated (isal, in its own thread), as the reader gets them
    buf = np.empty(reader.BLOCK_BYTES, np.uint8)
    mv = memoryview(buf)
    c = _Clock()
    with open_bytes(path) as src:
        while src.readinto(mv):
            pass
    out["bytes_s"], out["bytes_cpu_s"] = c.read()
    del buf, mv

    spans: dict[str, list] = defaultdict(list)
    wrapped = [(sc, "scan", "scan"), (sc, "drain", "drain"), (reader, "fill", "fill"),
               (reader._Reads, "_window", "fill"), (reader, "_take", "take"), (reader, "_assemble", "assemble"),
               (reader, "parse_metadata", "metadata")]  # fmt: skip
    originals = []
    for module, name, key in wrapped:
        fn = getattr(module, name)
        originals.append((module, name, fn))

        def timer(*a, _fn=fn, _key=key, **k):
            t = time.perf_counter()
            try:
                return _fn(*a, **k)
            finally:
                spans[_key].append((t, time.perf_counter()))  # list.append: safe from the scanner threads

        setattr(module, name, timer)
    try:
        with lean_memory():  # as gpuan.trace.kineto.read_kineto does
            c = _Clock()
            raw = reader.scan_file(path)
            out["scan_file_s"], out["scan_file_cpu_s"] = c.read()
            c = _Clock()
            with huge_pages():
                trace = events.build_trace(raw, source=path)
            out["build_s"], out["build_cpu_s"] = c.read()
    finally:
        for module, name, fn in originals:
            setattr(module, name, fn)
    out["rows"] = trace.events.num_rows
    out["seconds"] = out["scan_file_s"] + out["build_s"]
    out["cpu_s"] = out["scan_file_cpu_s"] + out["build_cpu_s"]
    out["scanner_s"] = _union_seconds(spans["scan"])
    out["scanner_thread_s"] = sum(e - s for s, e in spans["scan"])
    for key in ("fill", "drain", "take", "assemble", "metadata"):
        out[f"{key}_s"] = _outside_seconds(spans[key], spans["scan"])
        out[f"{key}_overlapped_s"] = sum(e - s for s, e in spans[key]) - out[f"{key}_s"]
    out["collect_other_s"] = out["take_s"] - out["drain_s"]
    out["scan_rest_s"] = out["scan_file_s"] - sum(
        out[k] for k in ("fill_s", "scanner_s", "take_s", "assemble_s", "metadata_s")
    )
    out["scan_calls"] = len(spans["scan"])
    out["peak_rss"], out["base_rss"], out["warmup_s"] = _peak_rss_bytes(), 0, 0.0
    return out


# ---------------------------------------------------------------------------------------------------
# Parent side


@dataclass
class Measurement:
    """One row of the result table (the median of its runs); `error` is set (numbers None) where it failed."""

    label: str
    seconds: float | None = None
    rows: int | None = None
    peak_rss: int | None = None
    base_rss: int | None = None
    warmup_s: float | None = None
    extra: dict | None = None
    error: str | None = None
    cpu_s: float | None = None
    runs: list[float] = field(default_factory=list)  # wall seconds of every run, in order
    failed: list[str] = field(default_factory=list)  # files of a group that this path could not read
    cold_s: float | None = None  # first call with an empty numba cache (one run)


def _median(values: list):
    """Return the median of the numbers in values (the first value where they are not all numbers)."""
    if values and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return statistics.median(values)
    return values[0] if values else None


def median_of(runs: list[Measurement]) -> Measurement:
    """Return one Measurement holding the median of every number of `runs` (and each run's wall time)."""
    keys = {k for m in runs for k in (m.extra or {})}
    extra = {k: _median([(m.extra or {}).get(k) for m in runs if k in (m.extra or {})]) for k in keys}
    return Measurement(
        runs[0].label,
        seconds=statistics.median(m.seconds for m in runs),
        rows=runs[0].rows,
        peak_rss=int(statistics.median(m.peak_rss for m in runs)),
        base_rss=int(statistics.median(m.base_rss for m in runs)),
        warmup_s=statistics.median(m.warmup_s or 0.0 for m in runs),
        extra=extra,
        cpu_s=statistics.median(m.cpu_s for m in runs),
        runs=[m.seconds for m in runs],
        failed=runs[0].failed,
    )


def measure(
    label: str,
    kind: str,
    trace: Path | str,
    env: dict[str, str],
    python: str = sys.executable,
    repeat: int = 1,
    **opts: str | None,
) -> Measurement:
    """Return the median of `repeat` runs of `kind`, each in a fresh `python` process with `env` added."""
    print(f"  {label} ...", end="", flush=True)
    runs = []
    for _ in range(max(repeat, 1)):
        m = _measure_once(label, kind, trace, env, python, opts)
        if m.error:
            print(f" failed: {m.error}")
            return m
        first = (m.extra or {}).get("first_s")
        print(f" {m.seconds:.2f} s" + (f" (first call {first:.2f} s)" if first is not None else ""), end="", flush=True)
        runs.append(m)
    print()
    return median_of(runs)


_RESULT_KEYS = ("seconds", "rows", "peak_rss", "base_rss", "warmup_s", "cpu_s", "failed")


def _measure_once(
    label: str, kind: str, trace: Path | str, env: dict[str, str], python: str, opts: dict
) -> Measurement:
    """Return one run of `kind` in a fresh process (its error set if it failed or timed out)."""
    cmd = [python, str(Path(__file__).resolve()), "--child", kind, "--trace", str(trace)]
    for key, value in opts.items():
        if value is not None:
            cmd += [f"--{key}", value]
    child_env = dict(os.environ)
    child_env.update(env)
    child_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    try:
        proc = subprocess.run(cmd, env=child_env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, cwd=REPO)
    except subprocess.TimeoutExpired:
        return Measurement(label, error=f"timed out after {CHILD_TIMEOUT_S} s")
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(RESULT_TAG)]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return Measurement(label, error=tail[:200])
    r = json.loads(lines[-1][len(RESULT_TAG) :])
    extra = {k: v for k, v in r.items() if k not in _RESULT_KEYS}
    return Measurement(
        label, r["seconds"], r["rows"], r["peak_rss"], r["base_rss"], r["warmup_s"], extra,
        cpu_s=r.get("cpu_s"), failed=r.get("failed", []),
    )  # fmt: skip


def load_synth():
    """Return the gpuan.synth.kineto module, straight from its file if the gpuan package does not import (yet)."""
    try:
        import gpuan.synth.kineto

        return gpuan.synth.kineto
    except Exception:  # noqa: BLE001  (a half-written gpuan must not stop the anchors)
        import importlib.util

        spec = importlib.util.spec_from_file_location("gpuan_synth", REPO / "gpuan" / "synth" / "kineto.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
        spec.loader.exec_module(module)
        return module


def ensure_trace(cache_dir: Path, size_mb: int, layers: int, seed: int) -> tuple[Path, dict]:
    """Return the cached synthetic trace of about `size_mb` MB and its generator summary, making it if needed."""
    synth = load_synth()
    # a trace made by an older generator is made again
    stamp = hashlib.sha256(Path(synth.__file__).read_bytes()).hexdigest()[:16]

    cache_dir.mkdir(parents=True, exist_ok=True)
    path = cache_dir / f"kineto_synth_{size_mb}mb_{layers}l_seed{seed}.json"
    sidecar = path.with_suffix(".summary.json")
    if path.exists() and sidecar.exists():
        summary = json.loads(sidecar.read_text())
        if summary.get("bytes") == path.stat().st_size and summary.get("synth_stamp") == stamp:
            summary["reused"] = True
            return path, summary
    print(f"generating {path} (~{size_mb} MB) ...", flush=True)
    summary = synth.write_kineto_trace(path, target_bytes=size_mb * 1_000_000, layers=layers, seed=seed, gzip=False)
    summary["synth_stamp"] = stamp
    sidecar.write_text(json.dumps(summary, indent=1))
    summary["reused"] = False
    return path, summary


def ensure_gzip(trace: Path) -> Path:
    """Return a gzip copy of the trace beside it (python-isal level 1), made once per trace."""
    from isal import igzip

    gz = trace.with_name(trace.name + ".gz")
    if gz.exists() and gz.stat().st_mtime >= trace.stat().st_mtime:
        return gz
    print(f"compressing {gz} ...", flush=True)
    tmp = gz.with_name(gz.name + ".tmp")
    with open(trace, "rb") as src, igzip.open(tmp, "wb", compresslevel=1) as dst:
        shutil.copyfileobj(src, dst, 16 << 20)
    os.replace(tmp, gz)
    return gz


REAL_DIRS = ("shared/data/kineto", ".shared/data/kineto")  # beside the checkout; in it on a GPU machine


def real_traces_dir() -> Path | None:
    """Return the directory of the real Kineto traces (../shared/data/kineto), or None where it is absent."""
    return next((p for p in (REPO.parent / REAL_DIRS[0], REPO / REAL_DIRS[1]) if p.is_dir()), None)


def ensure_real(cache_dir: Path, source: Path) -> tuple[list[Path], list[Path], dict[str, int]]:
    """Return the real traces (every *.json.gz under `source`, sorted) gzipped as they are and inflated
    into <cache_dir>/real, and every file's uncompressed size by path (both forms)."""
    from isal import igzip

    gz = sorted(source.rglob("*.json.gz"))
    out_dir = cache_dir / "real"
    out_dir.mkdir(parents=True, exist_ok=True)
    plain, sizes = [], {}
    for f in gz:
        target = out_dir / str(f.relative_to(source)).replace(os.sep, "__").removesuffix(".gz")
        if not target.exists() or target.stat().st_mtime < f.stat().st_mtime:
            tmp = target.with_name(target.name + ".tmp")
            tmp.write_bytes(igzip.decompress(f.read_bytes()))
            os.replace(tmp, target)
        plain.append(target)
        sizes[str(f)] = sizes[str(target)] = target.stat().st_size
    return plain, gz, sizes


def hta_python(cache_dir: Path, requested: str | None) -> tuple[str | None, str]:
    """Return the interpreter to run HTA with (None if there is none) and a note saying which and why.

    HTA 0.5.0 fails under pandas 3 on any trace of more than 32767 events (it writes row indices into a
    column pandas has downcast to int16, which pandas 3 refuses instead of upcasting), so where this
    interpreter has pandas 3 HTA runs in a venv beside the cached trace with pandas<3."""
    if requested:
        return requested, f"HTA ran with {requested}"
    import pandas

    if int(pandas.__version__.split(".")[0]) < 3:
        return sys.executable, "HTA ran in this interpreter"
    venv = cache_dir / "hta-venv"
    py = venv / "bin" / "python"
    if not py.exists():
        print(f"setting up {venv} (HolisticTraceAnalysis with pandas<3) ...", flush=True)
        try:
            subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
            pip = [str(py), "-m", "pip", "install", "-q", "HolisticTraceAnalysis", "pandas<3", "psutil"]
            subprocess.run(pip, check=True, timeout=900)
        except (OSError, subprocess.SubprocessError) as e:
            return None, f"could not set up a pandas<3 venv for HTA ({e})"
    probe = subprocess.run([str(py), "-c", "import pandas; print(pandas.__version__)"], capture_output=True, text=True)
    return str(py), f"HTA ran in {venv} with pandas {probe.stdout.strip()} (HTA 0.5.0 fails on pandas 3)"


def warm_page_cache(path: Path) -> None:
    """Read the file once so that every path starts from the page cache, not the disk."""
    with open(path, "rb") as f:
        while f.read(16 << 20):
            pass


def machine_info() -> dict:
    """Return CPU model, core count and RAM of this machine."""
    model = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    ram = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                ram = int(line.split()[1]) * 1024
    except OSError:
        pass
    return {"cpu": model, "cores": os.cpu_count() or 1, "ram": ram, "gpu": gpu_name()}


def gpu_name() -> str:
    """Return the name of this machine's first NVIDIA GPU as nvidia-smi reports it, or "" if none."""
    try:
        run = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return ""
    return run.stdout.splitlines()[0].strip() if run.returncode == 0 and run.stdout.strip() else ""


def machine_slug(info: dict) -> str:
    """Return a file-name-safe short name of the machine, e.g. "2c-intel-xeon-platinum-8481c"."""
    model = re.sub(r"\((r|tm)\)|\bcpu\b|@.*$|\bprocessor\b", "", info["cpu"].lower())
    model = re.sub(r"[^a-z0-9]+", "-", model).strip("-")
    gpu = re.sub(r"[^a-z0-9]+", "-", re.sub(r"^nvidia ", "", info.get("gpu", "").lower())).strip("-")
    return f"{info['cores']}c-{model}"[:60].strip("-") + (f"-{gpu}"[:30] if gpu else "")


def save_report(out_dir: str | Path, stem: str, info: dict, text: str) -> Path:
    """Write a benchmark's Markdown `text` to <out_dir>/<stem>-<date>-<machine>.md and return the path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{stem}-{dt.date.today()}-{machine_slug(info)}.md"
    path.write_text(text)
    return path


def git_commit() -> str:
    """Return the short commit of the checkout (with a note if it has local changes), else $GPUAN_COMMIT
    (a copy of the tree without its .git, e.g. on a GPU machine), else 'uncommitted'."""
    if not (REPO / ".git").exists():
        return os.environ.get("GPUAN_COMMIT", "uncommitted")
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
        if head.returncode != 0:
            return "uncommitted"
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True).stdout
        return head.stdout.strip() + (" (+ local changes)" if dirty.strip() else "")
    except OSError:
        return "uncommitted"


INGEST_PACKAGES = ("gpuan", "numpy", "pandas", "pyarrow", "numba", "isal", "pysimdjson", "msgspec",
                   "HolisticTraceAnalysis")  # fmt: skip


def versions(packages: tuple[str, ...] = INGEST_PACKAGES, optional: tuple[str, ...] = ()) -> dict[str, str]:
    """Return the versions of Python and of `packages` ("not installed" where absent) and of the
    `optional` packages that are installed."""
    out = {"python": platform.python_version()}
    for dist in packages + optional:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            if dist in packages:
                out[dist] = "not installed"
    if out.get("gpuan") == "not installed":
        try:
            import gpuan

            out["gpuan"] = f"{gpuan.__version__} (source tree)"
        except Exception:  # noqa: BLE001  (a half-written gpuan must not stop the anchors)
            pass
    return out


@dataclass
class Layout:
    """One kind of trace, as .json and as .json.gz: what each child reads and how many bytes that is."""

    key: str  # "synth", "gen" or "real"
    title: str  # what it is, for the report
    traces: dict[str, str]  # ".json" / ".json.gz" -> the child's --trace (a path, or @LISTFILE for a group)
    files: dict[str, list[Path]]  # ".json" / ".json.gz" -> the files read
    json_bytes: int  # uncompressed bytes of all its files
    sizes: dict[str, int]  # every file's path (both forms) -> its uncompressed bytes
    parquet: str | None = None  # where its Parquet file goes (generated layouts)


FORMATS = (".json", ".json.gz")


def synth_layout(cache_dir: Path, size_mb: int, layers: int, seed: int) -> Layout:
    """Return the layout of gpuan.synth's trace of about size_mb MB."""
    trace, summary = ensure_trace(cache_dir, size_mb, layers, seed)
    gz = ensure_gzip(trace)
    n = trace.stat().st_size
    title = (
        f"gpuan.synth (`{trace.name}`, H100, {summary['layers']} layers a step): {n / 1e6:,.1f} MB uncompressed, "
        f"{summary['events']:,} events, {summary['steps']:,} steps; .gz {gz.stat().st_size / 1e6:,.1f} MB"
    )
    return Layout("synth", title, {".json": str(trace), ".json.gz": str(gz)}, {".json": [trace], ".json.gz": [gz]},
                  n, {str(trace): n, str(gz): n}, str(cache_dir / (trace.name + ".bench.parquet")))  # fmt: skip


def gen_layout(cache_dir: Path, size_mb: int) -> Layout:
    """Return the layout of ../shared/tools/gen_kineto_trace.py's trace of about size_mb MiB."""
    trace = ensure_gen_trace(cache_dir, size_mb)
    gz = ensure_gzip(trace)
    n = trace.stat().st_size
    made_by = "gen_kineto_trace.py" if trace.name.startswith("kineto_gen_") else "gpuan.synth (no gen_kineto_trace.py)"
    title = (
        f"{made_by} (`{trace.name}`, libkineto's text layout of a PyTorch 2.x Llama-style training step): "
        f"{n / 1e6:,.1f} MB uncompressed; .gz {gz.stat().st_size / 1e6:,.1f} MB"
    )
    return Layout("gen", title, {".json": str(trace), ".json.gz": str(gz)}, {".json": [trace], ".json.gz": [gz]},
                  n, {str(trace): n, str(gz): n}, str(cache_dir / (trace.name + ".bench.parquet")))  # fmt: skip


def real_layout(cache_dir: Path) -> Layout | None:
    """Return the layout of the real traces of ../shared/data/kineto as one group (None where absent)."""
    source = real_traces_dir()
    if source is None:
        return None
    plain, gz, sizes = ensure_real(cache_dir, source)
    if not plain:
        return None
    lists = {}
    for fmt, files in ((".json", plain), (".json.gz", gz)):
        lst = cache_dir / "real" / f"group{fmt}.list"
        lst.write_text("".join(f"{f}\n" for f in files))
        lists[fmt] = f"@{lst}"
    n = sum(f.stat().st_size for f in plain)
    big = max(plain, key=lambda f: f.stat().st_size)
    title = (f"the {len(plain)} real traces of `{source}` (every *.json.gz, subdirectories included) as one group: "
             f"{n / 1e6:,.1f} MB uncompressed in all, {sum(f.stat().st_size for f in gz) / 1e6:,.1f} MB gzipped "
             f"(largest: {big.name}, {big.stat().st_size / 1e6:,.1f} MB); every path reads all of them in one "
             "process, seconds and bytes summed")  # fmt: skip
    return Layout("real", title, lists, {".json": plain, ".json.gz": gz}, n, sizes)


def thread_label(n: str) -> str:
    """Return "gpuan.load, 1 thread" / "gpuan.load, N threads"."""
    return f"gpuan.load, {n} thread{'' if n == '1' else 's'}"


ANCHOR_LABELS = {
    "simdjson": {".json": "simdjson parse only (pysimdjson, DOM)", ".json.gz": "isal inflate + simdjson parse (DOM)"},
    "msgspec-decode": {".json": "msgspec Struct decode", ".json.gz": "isal inflate + msgspec Struct decode"},
    "msgspec": {".json": "msgspec Struct decode + Arrow columns", ".json.gz": "isal inflate + msgspec + columns"},
    "json-pandas": {".json": "json.load + pandas.DataFrame", ".json.gz": "gzip + json.load + pandas.DataFrame"},
    "hta": {".json": "HTA parse_trace_file", ".json.gz": "HTA parse_trace_file"},
}


def run_layout(layout: Layout, args: argparse.Namespace, hta_py: str | None, warmup: str) -> dict:
    """Measure every path on the layout's .json and .json.gz; returns {(format, key): Measurement}."""
    threads = [t.strip() for t in args.threads.split(",") if t.strip()]
    rep, slow = args.repeat, args.slow_repeat
    results: dict[tuple[str, str], Measurement] = {}
    print(f"\n{layout.key}: {layout.title}")
    for fmt in FORMATS:
        trace = layout.traces[fmt]
        for f in layout.files[fmt]:
            warm_page_cache(f)
        print(f" {fmt}")
        for n in threads:
            results[(fmt, f"gpuan-{n}")] = measure(thread_label(n), "gpuan", trace, {"GPUAN_THREADS": n}, repeat=rep)
        if fmt == ".json" and not args.no_cold:
            # the very first call after an install: numba compiles the scanner into an empty cache
            top = threads[-1]
            cold_dir = tempfile.mkdtemp(prefix="gpuan-numba-cold-")
            try:
                env = {"GPUAN_THREADS": top, "NUMBA_CACHE_DIR": cold_dir}
                cold = measure(f"{thread_label(top)}, empty numba cache", "gpuan", trace, env, repeat=1)
            finally:
                shutil.rmtree(cold_dir, ignore_errors=True)
            if cold.error is None and (fmt, f"gpuan-{top}") in results:
                results[(fmt, f"gpuan-{top}")].cold_s = cold.extra["first_s"]
        if fmt == ".json" and len(threads) > 1:
            for n in threads:
                label = f"control: byte loop over the same bytes, {n} thread{'' if n == '1' else 's'}"
                results[(fmt, f"control-{n}")] = measure(label, "control", trace, {"GPUAN_THREADS": n}, repeat=rep)
        results[(fmt, "simdjson")] = measure(ANCHOR_LABELS["simdjson"][fmt], "simdjson", trace, {}, repeat=rep)
        m = measure(ANCHOR_LABELS["msgspec"][fmt], "msgspec", trace, {}, repeat=rep)
        results[(fmt, "msgspec")] = m
        if m.error is None:  # the decode alone: the same runs, timed up to the Structs
            results[(fmt, "msgspec-decode")] = Measurement(
                ANCHOR_LABELS["msgspec-decode"][fmt], m.extra["decode_s"], m.rows, int(m.extra["decode_peak_rss"]),
                m.base_rss, 0.0, {}, cpu_s=m.extra["decode_cpu_s"], failed=m.failed,
            )  # fmt: skip
        if not args.skip_pandas:
            label = ANCHOR_LABELS["json-pandas"][fmt]
            results[(fmt, "json-pandas")] = measure(label, "json-pandas", trace, {}, repeat=slow)
        if not args.skip_hta:
            label = ANCHOR_LABELS["hta"][fmt]
            if hta_py is None:
                results[(fmt, "hta")] = Measurement(label, error="no interpreter with HTA (see the notes)")
            else:
                results[(fmt, "hta")] = measure(label, "hta", trace, {}, python=hta_py, repeat=slow)
        if fmt == ".json" and layout.parquet:
            pq = layout.parquet
            write = measure("gpuan Parquet write", "gpuan-parquet-write", trace, {}, parquet=pq, warmup=warmup)
            results[(fmt, "parquet-write")] = write
            if write.error is None:
                label = "gpuan.load of its Parquet file"
                results[(fmt, "parquet")] = measure(label, "gpuan-parquet", trace, {}, repeat=rep, parquet=pq,
                                                    warmup=warmup)  # fmt: skip
    return results


HEADERS = ["file", "path", "wall s (median)", "CPU s (median)", "MB/s", "peak RSS MB", "RSS / JSON",
           "first call s", "first call, empty numba cache s", "wall s of each run", "rows"]  # fmt: skip
ROW_ORDER = ("gpuan-*", "control-*", "simdjson", "msgspec-decode", "msgspec", "json-pandas", "hta", "parquet")


def ok(m: Measurement | None) -> bool:
    """Whether m is a measurement that succeeded."""
    return m is not None and m.error is None


def read_bytes(m: Measurement, layout: Layout) -> int:
    """Return the uncompressed bytes a measurement read: the layout's, less the files it failed on."""
    return layout.json_bytes - sum(layout.sizes.get(f.split(": ", 1)[0], 0) for f in m.failed)


def layout_rows(layout: Layout, results: dict) -> list[list[str]]:
    """Return the table cells of one layout's measurements, .json first, in ROW_ORDER."""
    rows = []
    for fmt in FORMATS:
        keys = [k for (f, k) in results if f == fmt]
        order = [k for pat in ROW_ORDER for k in keys if (k.startswith(pat[:-1]) if pat.endswith("*") else k == pat)]
        for key in order:
            m = results[(fmt, key)]
            if m.error:
                rows.append([fmt, m.label] + ["n/a"] * (len(HEADERS) - 3) + [f"n/a: {m.error}"])
                continue
            nbytes = read_bytes(m, layout)
            first = f"{m.extra['first_s']:.2f}" if "first_s" in (m.extra or {}) else "same"
            if key in ("parquet", "msgspec-decode"):
                first = ""
            rows.append(
                [
                    fmt,
                    m.label + (f" ({len(m.failed)} files failed)" if m.failed else ""),
                    f"{m.seconds:.2f}",
                    f"{m.cpu_s:.2f}" if m.cpu_s is not None else "n/a",
                    f"{nbytes / m.seconds / 1e6:,.0f}",
                    f"{m.peak_rss / 1e6:,.0f}",
                    f"{m.peak_rss / nbytes:.2f}",
                    first,
                    f"{m.cold_s:.2f}" if m.cold_s is not None else "",
                    " ".join(f"{s:.2f}" for s in m.runs) if key != "msgspec-decode" else "(as above)",
                    f"{m.rows:,}",
                ]
            )
    return rows


def ratio_lines(layout: Layout, results: dict, threads: list[str]) -> list[str]:
    """Return the headline ratios of one layout, against the targets where there is one."""
    out = []
    lo, hi = threads[0], threads[-1]
    for fmt in FORMATS:
        r = {k: m for (f, k), m in results.items() if f == fmt}
        sj = r.get("simdjson")
        if ok(sj):
            what = "parse CPU" if fmt == ".json" else "inflate + parse CPU"
            parts = [f"{n} thread{'s' * (n != '1')} {r[f'gpuan-{n}'].seconds / sj.cpu_s:.2f}x"
                     for n in threads if ok(r.get(f"gpuan-{n}"))]  # fmt: skip
            out.append(f"{fmt}: gpuan wall / simdjson {what} ({sj.cpu_s:.2f} s): {', '.join(parts)} (target <= 2)")
        g1, g2 = r.get(f"gpuan-{lo}"), r.get(f"gpuan-{hi}")
        if lo != hi and ok(g1) and ok(g2):
            first = g1.extra.get("first_s"), g2.extra.get("first_s")
            line = f"{fmt}: gpuan {hi} threads vs {lo}: {g1.seconds / g2.seconds:.2f}x (target >= 1.9)"
            if all(first):
                line += f"; first calls {first[0] / first[1]:.2f}x"
            c1, c2 = r.get(f"control-{lo}"), r.get(f"control-{hi}")
            if ok(c1) and ok(c2):
                best = c1.seconds / c2.seconds
                # a control that barely sped up makes the share noise (or a division by almost zero)
                share = f"{(g1.seconds / g2.seconds - 1) / (best - 1):.0%}" if best > 1.05 else "n/a"
                line += (f"; the control (a perfectly parallel byte loop over the same bytes) {best:.2f}x in this "
                         f"run, its CPU seconds {c2.cpu_s / c1.cpu_s:.2f}x one thread's: gpuan gets {share} of "
                         "the speed-up this machine gave the control")  # fmt: skip
            out.append(line)
        g = g2 if ok(g2) else g1
        if not ok(g):
            continue
        for key, name in (("msgspec", "msgspec Struct decode + columns"), ("msgspec-decode", "msgspec decode alone"),
                          ("hta", "HTA"), ("json-pandas", "json + pandas")):  # fmt: skip
            m = r.get(key)
            if ok(m):
                out.append(f"{fmt}: {name} wall / gpuan ({hi} threads) wall: {m.seconds / g.seconds:.2f}x")
        if ok(r.get("parquet")):
            out.append(
                f"{fmt}: gpuan JSON ({hi} threads) / its Parquet reload: {g.seconds / r['parquet'].seconds:.1f}x"
            )
    return out


def console_table(headers: list[str], rows: list[list[str]]) -> str:
    """Return the table as aligned plain text."""
    cells = [headers] + rows
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for r in cells:
        lines.append("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown_table(headers: list[str], rows: list[list[str]], left: int = 2) -> list[str]:
    """Return the lines of a Markdown table (the first `left` columns left-aligned, the rest right)."""
    return [
        "| " + " | ".join(headers) + " |",
        "|" + "---|" * left + "---:|" * (len(headers) - left),
        *("| " + " | ".join(r) + " |" for r in rows),
    ]


# ---------------------------------------------------------------------------------------------------
# The profile: gpuan.load's stages


PROFILE_STAGES = (
    ("gpuan.load = scan_file + build_trace", "seconds"),
    ("scan_file (reader.scan_file)", "scan_file_s"),
    (
        "- reading: reader.fill / reader._window (page-cache copy / wait on the isal thread / a plain .json's "
        "last bytes copied; its page faults on the map fall in the scanner), while no thread scans",
        "fill_s",
    ),
    ("- scanner sc.scan, wall (at least one thread scanning)", "scanner_s"),
    ("- scanner sc.scan, thread-seconds (all threads)", "scanner_thread_s"),
    ("- drain into the output columns: sc.drain, while no thread scans", "drain_s"),
    ("- rest of collecting: string ids, metadata rows, while no thread scans", "collect_other_s"),
    ("- reading done while the threads scan (read ahead: off the wall time)", "fill_overlapped_s"),
    ("- collecting done while the threads scan (drained behind: off the wall time)", "take_overlapped_s"),
    ("- strings decoded, columns assembled: reader._assemble", "assemble_s"),
    ("- metadata outside the events: parse_metadata", "metadata_s"),
    ("- rest of scan_file: chunk starts, buffer moves, thread hand-offs", "scan_rest_s"),
    ("build_trace: the Arrow table (events.build_trace)", "build_s"),
    ("CPU s of scan_file", "scan_file_cpu_s"),
    ("CPU s of build_trace", "build_cpu_s"),
    ("the bytes alone via open_bytes, a pass of their own (read / isal inflate)", "bytes_s"),
    ("... its CPU s", "bytes_cpu_s"),
)

#: the stages that together make up gpuan.load's wall time (for the shares)
PARTS = (("the scanner", "scanner_s"), ("build_trace", "build_s"), ("reading (fill)", "fill_s"),
         ("sc.drain", "drain_s"), ("the rest of collecting", "collect_other_s"), ("_assemble", "assemble_s"),
         ("the rest of scan_file", "scan_rest_s"), ("parse_metadata", "metadata_s"))  # fmt: skip


def run_profile(layout: Layout, args: argparse.Namespace, warmup: str) -> dict:
    """Profile gpuan.load of the layout's files at each thread count; returns {(format, threads): Measurement}."""
    threads = [t.strip() for t in args.threads.split(",") if t.strip()]
    prof = {}
    print(f"\nprofile: {layout.key}")
    for fmt in FORMATS:
        trace = layout.traces[fmt]
        warm_page_cache(Path(trace))
        for n in threads:
            label = f"profile {fmt}, {thread_label(n)}"
            prof[(fmt, n)] = measure(label, "gpuan-profile", trace, {"GPUAN_THREADS": n}, repeat=args.repeat,
                                     warmup=warmup)  # fmt: skip
    return prof


def profile_table(prof: dict) -> tuple[list[str], list[list[str]]]:
    """Return the profile's headers and rows: a stage a row, a (format, threads) a column."""
    cols = [k for k in prof if ok(prof[k])]
    headers = ["stage (median seconds)"] + [f"{fmt}, {n} thr" for fmt, n in cols]
    rows = []
    for name, key in PROFILE_STAGES:
        row = [name]
        for c in cols:
            m = prof[c]
            v = m.seconds if key == "seconds" else m.extra.get(key)
            row.append(f"{v:.2f}" if v is not None else "n/a")
        rows.append(row)
    return headers, rows


def profile_notes(prof: dict, results: dict | None, threads: list[str]) -> list[str]:
    """Return what the profile shows: what dominates, what limits 2 threads, how far from the simdjson target."""
    notes = []
    lo, hi = threads[0], threads[-1]
    for fmt in FORMATS:
        p1, p2 = prof.get((fmt, lo)), prof.get((fmt, hi))
        if not ok(p1):
            continue
        e1 = p1.extra
        total = p1.seconds
        parts = sorted(((e1.get(k, 0.0), name) for name, k in PARTS), reverse=True)
        shares = ", ".join(f"{name} {v:.2f} s ({v / total:.0%})" for v, name in parts[:4])
        notes.append(f"profile, {fmt} at {lo} thread(s): gpuan.load {total:.2f} s, of which {shares}; the largest "
                     f"stage is {parts[0][1]}")  # fmt: skip
        if results is not None:
            sj = results.get((fmt, "simdjson"))
            if ok(sj):
                notes.append(
                    f"profile, {fmt}: the target (gpuan wall <= 2 x simdjson's {sj.cpu_s:.2f} CPU s = "
                    f"{2 * sj.cpu_s:.2f} s) against the stages: the scanner alone at {lo} thread(s) "
                    f"{e1['scanner_s']:.2f} s ({e1['scanner_s'] / sj.cpu_s:.1f}x simdjson), build_trace alone "
                    f"{e1['build_s']:.2f} s ({e1['build_s'] / sj.cpu_s:.1f}x), everything but the scanner "
                    f"{total - e1['scanner_s']:.2f} s ({(total - e1['scanner_s']) / sj.cpu_s:.1f}x)"
                )
        if lo == hi or not ok(p2):
            continue
        e2 = p2.extra
        # what runs while no thread scans; at `hi` threads the reading and draining run beside the scan, so
        # only what is left with no thread scanning there (the table build, mostly) is serial
        serial1, serial2 = total - e1["scanner_s"], p2.seconds - e2["scanner_s"]
        k = int(hi) / int(lo)
        bound = total / (serial2 + (total - serial2) / k)
        eff = e2["scanner_thread_s"] / (e2["scanner_s"] * int(hi)) if e2["scanner_s"] else 0.0
        notes.append(
            f"profile, {fmt}, {lo} -> {hi} threads: gpuan.load {total:.2f} -> {p2.seconds:.2f} s "
            f"({total / p2.seconds:.2f}x); the scanner's wall {e1['scanner_s']:.2f} -> {e2['scanner_s']:.2f} s "
            f"({e1['scanner_s'] / max(e2['scanner_s'], 1e-9):.2f}x; thread-seconds {e1['scanner_thread_s']:.2f} -> "
            f"{e2['scanner_thread_s']:.2f}, the {hi} threads busy {eff:.0%} of that wall); what runs while no thread "
            f"scans (reading, draining, string ids, build_trace) {serial1:.2f} s at {lo}, and at {hi}, where reading "
            f"and draining run beside the scan, {serial2:.2f} s: with that serial part, {hi} threads can give at most "
            f"{bound:.2f}x (Amdahl)" + _verdict(total / p2.seconds, bound)
        )
        grew = e2["scanner_thread_s"] / max(e1["scanner_thread_s"], 1e-9)
        if grew > 1.1:
            notes.append(
                f"profile, {fmt}: the scanner's thread-seconds grew {grew:.2f}x from {lo} to {hi} threads: each thread "
                "scans slower while the others run (the reading and draining that now run beside the scan, on the same "
                "cores; shared memory bandwidth or caches; cores taken by other work: see the load average)"
            )
    return notes


def _verdict(measured: float, bound: float, target: float = 1.9) -> str:
    """Return what limits the thread scaling, from the measured speed-up and Amdahl's bound."""
    if measured >= target:
        return f"; measured {measured:.2f}x, the {target}x target met"
    if bound < target:
        return f", below the {target}x target: the serial part alone rules it out"
    return f"; the serial part allows {target}x, so what falls short ({measured:.2f}x) is the scanner's own scaling"


# ---------------------------------------------------------------------------------------------------
# The report


def anchor_notes(layouts: list[Layout], all_results: dict) -> list[str]:
    """Return notes worth keeping with the numbers: byte reading and inflating, failures, memory, Parquet."""
    notes = []
    for layout in layouts:
        results = all_results[layout.key]
        sj_plain, sj_gz = results.get((".json", "simdjson")), results.get((".json.gz", "simdjson"))
        if ok(sj_plain):
            notes.append(f"{layout.key}: reading the .json's bytes from the page cache (outside the anchors' timing) "
                         f"{sj_plain.extra.get('read_s', 0):.2f} s")  # fmt: skip
        if ok(sj_gz) and sj_gz.extra.get("inflate_s"):
            s = sj_gz.extra["inflate_s"]
            cpu, rate = sj_gz.extra.get("inflate_cpu_s", 0.0), read_bytes(sj_gz, layout) / s / 1e6
            notes.append(f"{layout.key}: isal inflate of the .json.gz in memory (in the .gz anchors' time) {s:.2f} s "
                         f"wall, {cpu:.2f} s CPU, {rate:,.0f} MB/s of output")  # fmt: skip
        for (fmt, key), m in sorted(results.items()):
            if m.failed:
                names = "; ".join(Path(f.split(": ", 1)[0]).name + ": " + f.split(": ", 1)[-1] for f in m.failed)
                notes.append(f"{layout.key} {fmt}, {m.label}: {len(m.failed)} of {len(layout.files[fmt])} files "
                             f"failed, left out of its MB/s: {names}")  # fmt: skip
            if key == "parquet-write" and ok(m):
                notes.append(f"{layout.key}: Parquet file {m.extra['parquet_bytes'] / 1e6:,.1f} MB, written in "
                             f"{m.seconds:.2f} s from the loaded trace")  # fmt: skip
    first = all_results[layouts[0].key] if layouts else {}
    base = [f"{m.label} {m.base_rss / 1e6:,.0f} MB" for (f, k), m in first.items()
            if f == ".json" and ok(m) and k != "msgspec-decode" and m.base_rss]  # fmt: skip
    if base:
        notes.append("RSS after imports (in every peak RSS): " + ", ".join(base))
    return notes


def method_lines(args: argparse.Namespace) -> list[str]:
    """Return the report's method bullet."""
    return [
        f"- method: every row is the MEDIAN over fresh Python processes ({args.repeat} a path; json + pandas and "
        f"HTA: {args.slow_repeat}), each run's wall time listed; never the best of N. gpuan calls gpuan.load "
        "twice in each process: 'wall' is the second call (numba's machine code already loaded), 'first call' "
        "the first, right after `import gpuan` and numba's lighter start as the command line makes it "
        "(`gpuan.jit_cache.lighter_numba_start`: what a CLI user pays per command, the import aside; numba's "
        "cache on disk); 'empty numba cache' is one more process with NUMBA_CACHE_DIR pointed at an empty "
        "directory (the first command after an install: it compiles the scanner). simdjson and msgspec are "
        "called twice too (simdjson's first parse allocates the parser's buffers, the second reuses them); "
        "json + pandas and HTA once ('same': their one call is their first).",
        "- time: wall by perf_counter, CPU as the process's user + sys (getrusage deltas, all threads) around "
        "the call only (imports outside); simdjson and msgspec from the file's bytes in memory (the read from "
        "the page cache outside, see the notes), for .json.gz inflating them with isal included; json + "
        "pandas and HTA their whole call; the files are in the page cache before every path.",
        "- MB/s over the uncompressed JSON bytes for every path and file; peak RSS is the process's VmHWM "
        "(interpreter and imports included; of both calls where there are two); 'rows' is what each "
        "path produced (simdjson: traceEvents' length; gpuan keeps flow and metadata events out of its table).",
        "- simdjson is pysimdjson's DOM parser (simdjson's dom::parser: the whole tape built, not On-Demand), "
        "from a bytes object (pysimdjson copies it into a padded buffer: in its time); msgspec decodes into "
        "Structs (gc=False) of ph, name, cat, ts, dur, pid, tid and args as msgspec.Raw, then builds those "
        "fields as Arrow columns (strings dictionary-encoded; args stay undecoded bytes: gpuan's table holds "
        "~30 args fields decoded, so this anchor does less work than gpuan).",
        "- .json.gz: python-isal level 1 of the same bytes (the real traces: as shipped).",
    ]


def markdown_report(info: dict, args: argparse.Namespace, layouts: list[Layout], all_results: dict,
                    prof: dict | None, prof_layout: Layout | None, notes: list[str], load: tuple) -> str:  # fmt: skip
    """Return the Markdown result file: header, a table and ratios per layout, the profile, notes."""
    now = dt.datetime.now(dt.timezone.utc)
    threads = [t.strip() for t in args.threads.split(",") if t.strip()]
    head = [
        f"# Ingest benchmark, {now:%Y-%m-%d}, {machine_slug(info)}",
        "",
        f"- machine: {info['cpu']}, {info['cores']} cores, {info['ram'] / 2**30:.1f} GiB RAM",
        f"- date: {now:%Y-%m-%d %H:%M} UTC; load average (1 min) {load[0]:.2f} before, {load[1]:.2f} after",
        f"- git commit: {git_commit()}",
        "- versions: " + ", ".join(f"{k} {v}" for k, v in versions().items()),
        "- command: `python bench/ingest.py " + " ".join(sys.argv[1:]) + "`",
        *method_lines(args),
    ]
    body: list[str] = []
    for i, layout in enumerate(layouts):
        results = all_results[layout.key]
        body += ["", f"## ({'abc'[i] if i < 3 else i}) {layout.key}: {layout.title}", ""]
        body += markdown_table(HEADERS, layout_rows(layout, results))
        body += ["", "Ratios:", ""] + [f"- {r}" for r in ratio_lines(layout, results, threads)]
    if prof and prof_layout is not None:
        headers, rows = profile_table(prof)
        body += ["", f"## Profile: gpuan.load's stages on the {prof_layout.key} layout", "",
                 "Instrumented from the outside (the reader's functions wrapped with timers), median of "
                 f"{args.repeat} fresh processes each, after a warm-up load of a small sample; `thr` = GPUAN_THREADS.",
                 ""]  # fmt: skip
        body += markdown_table(headers, rows, left=1)
    tail = ["", "Notes:", ""] + [f"- {n}" for n in notes] if notes else []
    return "\n".join(head + body + tail) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (or, with --child, one measurement); returns the exit code."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size-mb", type=int, default=1024, help="size of the generated traces (uncompressed MB)")
    p.add_argument("--layouts", default="synth,gen,real", help="which layouts, comma-separated (synth, gen, real)")
    p.add_argument("--out", default=str(REPO / "bench" / "results"), help="directory for the Markdown result")
    p.add_argument("--cache-dir", default="/tmp/gpuan-bench", help="where generated traces are kept and reused")
    p.add_argument("--seed", type=int, default=0)
    # a real 1 GB profile holds a few big steps, not thousands of small ones; HTA's iteration
    # assignment costs events x steps, so a many-step trace would be unfair to it
    p.add_argument("--layers", type=int, default=96, help="transformer layers per step of the synth trace")
    p.add_argument("--skip-hta", action="store_true", help="leave out Holistic Trace Analysis")
    p.add_argument("--skip-pandas", action="store_true", help="leave out json.load + pandas")
    p.add_argument("--no-cold", action="store_true", help="leave out the first call with an empty numba cache")
    p.add_argument("--profile", action="store_true", help="only the profile of gpuan.load's stages (gen layout)")
    p.add_argument("--gpu", action="store_true", help="the GPU reader against the CPU reader (see above)")
    p.add_argument("--gpu-sizes", default="1024,5120", help="with --gpu: trace sizes in MB, comma-separated")
    p.add_argument("--gpu-only", action="store_true", help="with --gpu: skip the CPU rows")
    p.add_argument("--threads", default="1,2", help="GPUAN_THREADS values to measure, comma-separated")
    p.add_argument("--repeat", type=int, default=5, help="fresh processes per path; the median is reported")
    p.add_argument("--slow-repeat", type=int, default=1, help="fresh processes for json + pandas and HTA")
    p.add_argument("--hta-python", help="interpreter with HolisticTraceAnalysis (default: this one, or a venv)")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--trace", help=argparse.SUPPRESS)
    p.add_argument("--parquet", help=argparse.SUPPRESS)
    p.add_argument("--warmup", help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.child:
        result = run_child(args.child, args.trace, args.parquet, args.warmup)
        print(RESULT_TAG + json.dumps(result), flush=True)
        return 0

    sys.path.insert(0, str(REPO))
    if args.gpu:
        return gpu_main(args)
    load_before = os.getloadavg()[0]
    cache_dir = Path(args.cache_dir)
    warmup = str(load_synth().sample_trace_path(cache_dir))
    threads = [t.strip() for t in args.threads.split(",") if t.strip()]
    wanted = {"gen"} if args.profile else {x.strip() for x in args.layouts.split(",") if x.strip()}
    unknown = wanted - {"synth", "gen", "real"}
    if unknown:
        p.error(f"--layouts: unknown {', '.join(sorted(unknown))} (synth, gen, real)")
    layouts: list[Layout] = []
    if "synth" in wanted:
        layouts.append(synth_layout(cache_dir, args.size_mb, args.layers, args.seed))
    if "gen" in wanted:
        layouts.append(gen_layout(cache_dir, args.size_mb))
    if "real" in wanted:
        real = real_layout(cache_dir)
        if real is None:
            print("real: no ../shared/data/kineto here, left out")
        else:
            layouts.append(real)

    notes: list[str] = []
    all_results: dict[str, dict] = {}
    if not args.profile:
        hta_py = None
        if not args.skip_hta:
            hta_py, note = hta_python(cache_dir, args.hta_python)
            notes.append(note)
        for layout in layouts:
            all_results[layout.key] = run_layout(layout, args, hta_py, warmup)
    prof_layout = next((lay for lay in layouts if lay.key == "gen"), None)
    prof = run_profile(prof_layout, args, warmup) if prof_layout is not None else None
    if prof:
        notes += profile_notes(prof, all_results.get("gen"), threads)
    notes += anchor_notes([lay for lay in layouts if lay.key in all_results], all_results)

    info = machine_info()
    report = markdown_report(info, args, [lay for lay in layouts if lay.key in all_results], all_results, prof,
                             prof_layout, notes, (load_before, os.getloadavg()[0]))  # fmt: skip
    print()
    for i, layout in enumerate(lay for lay in layouts if lay.key in all_results):
        print(f"({'abc'[i] if i < 3 else i}) {layout.key}: {layout.title}")
        print(console_table(HEADERS, layout_rows(layout, all_results[layout.key])))
        print("\n".join(ratio_lines(layout, all_results[layout.key], threads)))
        print()
    if prof:
        headers, rows = profile_table(prof)
        print(console_table(headers, rows))
        print()
    print("\n".join(f"- {n}" for n in notes))
    out = save_report(args.out, "ingest-profile" if args.profile else "ingest", info, report)
    print(f"\nwrote {out}")
    return 0


# ---------------------------------------------------------------------------------------------------
# --gpu: the GPU reader against the CPU reader

GPU_PACKAGES = ("cupy-cuda12x", "cupy-cuda13x", "numba-cuda", "isal")
GEN_TOOL = ("shared/tools/gen_kineto_trace.py", ".shared/tools/gen_kineto_trace.py")


def gen_trace_arguments(description: str, size_mb: int, repeat: int) -> argparse.ArgumentParser:
    """Return a parser with the arguments of the benchmarks that time a checkout against a baseline on a
    generated trace: --size-mb, --dir, --baseline, --baseline-name, --repeat, --out."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--size-mb", type=int, default=size_mb, help="size of the generated JSON trace")
    ap.add_argument("--dir", default="/tmp/gpuan-bench", help="where the trace and the files made of it are kept")
    ap.add_argument("--baseline", help="a copy of an older gpuan package, run with PYTHONPATH")
    ap.add_argument("--baseline-name", default="", help="what the baseline is (e.g. its commit)")
    ap.add_argument("--repeat", type=int, default=repeat, help="fresh processes per row")
    ap.add_argument("--out", default=str(REPO / "bench" / "results"))
    return ap


def ensure_gen_trace(cache_dir: Path, size_mb: int) -> Path:
    """Return a cached trace of about size_mb MB made by the shared generator, else by gpuan.synth."""
    tool = next((p for p in (REPO.parent / GEN_TOOL[0], REPO / GEN_TOOL[1]) if p.exists()), None)
    if tool is None:
        return ensure_trace(cache_dir, size_mb, 96, 0)[0]
    cache_dir.mkdir(parents=True, exist_ok=True)
    path = cache_dir / f"kineto_gen_{size_mb}mb.json"
    # a trace made by an older generator is made again
    stamp = hashlib.sha256(tool.read_bytes()).hexdigest()[:16]
    sidecar = path.with_name(path.name + ".stamp")
    if not path.exists() or not sidecar.exists() or sidecar.read_text() != stamp:
        print(f"generating {path} (~{size_mb} MiB) with {tool} ...", flush=True)
        tmp = path.with_name(path.name + ".tmp")
        t = time.perf_counter()
        subprocess.run([sys.executable, str(tool), str(tmp), "--size-mb", str(size_mb)], check=True)
        os.replace(tmp, path)
        sidecar.write_text(stamp)
        print(f"  {path.stat().st_size / 1e6:,.1f} MB in {time.perf_counter() - t:.1f} s", flush=True)
    return path


def gpu_main(args: argparse.Namespace) -> int:
    """Run the --gpu comparison; returns the exit code."""
    cache_dir = Path(args.cache_dir)
    warmup = str(load_synth().sample_trace_path(cache_dir))
    lines = ["| trace | path | seconds | GB/s | rows | parsed on the GPU |", "|---|---|---:|---:|---:|---|"]
    for size in [int(x) for x in args.gpu_sizes.split(",") if x.strip()]:
        plain = ensure_gen_trace(cache_dir, size)
        json_bytes = plain.stat().st_size
        for trace in (plain, ensure_gzip(plain)):
            warm_page_cache(trace)
            paths = [("gpuan-gpu-ingest", "GPU reader: gpuan.load(device='gpu')")]
            if not args.gpu_only:
                paths = [
                    ("gpuan", f"CPU reader, {os.cpu_count()} cores"),
                    ("gpuan-gpu", "CPU reader + every column to the GPU"),
                    *paths,
                ]
            for kind, label in paths:
                m = measure(label, kind, trace, {}, repeat=args.repeat, warmup=warmup)
                if m.error:
                    lines.append(f"| {trace.name} | {label} | n/a | n/a | n/a | {m.error} |")
                    continue
                on_gpu = {True: "yes", False: "no: the CPU reader read it"}.get(
                    (m.extra or {}).get("parsed_on_gpu"), ""
                )
                gbs = json_bytes / m.seconds / 1e9
                lines.append(f"| {trace.name} | {label} | {m.seconds:.2f} | {gbs:.2f} | {m.rows:,} | {on_gpu} |")
    info = machine_info()
    now = dt.datetime.now(dt.timezone.utc)
    head = [
        f"# Ingest on the GPU, {now:%Y-%m-%d}, {machine_slug(info)}",
        "",
        f"- machine: {info['cpu']}, {info['cores']} cores, {info['ram'] / 2**30:.1f} GiB RAM, GPU {info['gpu']}",
        f"- date: {now:%Y-%m-%d %H:%M} UTC; git commit: {git_commit()}",
        "- versions: " + ", ".join(f"{k} {v}" for k, v in versions(optional=GPU_PACKAGES).items()),
        f"- method: each path in a fresh process, median of {args.repeat}, after a warm-up load of a small "
        "sample (the GPU path's warm-up compiles its kernels); GB/s over the uncompressed JSON; .gz is "
        "python-isal level 1, decompressed on the CPU in both readers",
        "",
    ]
    text = "\n".join(head + lines) + "\n"
    print()
    print(text)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    sizes = "-".join(x.strip() for x in args.gpu_sizes.split(",") if x.strip())
    out = out_dir / f"ingest-gpu-{sizes}mb-{now:%Y-%m-%d}-{machine_slug(info)}.md"
    out.write_text(text)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
