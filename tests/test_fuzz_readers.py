"""Fuzzing every reader with mutations of the real files in ../shared/data.

Each case mutates a small real input (a truncation, flipped bytes, or a structural change: a deleted field,
a value of the wrong type, NaN, a huge or negative number, a duplicated or deleted event), then reads it
through ``gpuan.load`` (or the reader's own API) and through the command line. Every case must end in one
of two ways: exit 0 with the same events as this module's own, independent reading of the mutated file
(json/gzip, sqlite3, csv, pyarrow, the otf2 and gguf packages, struct), or exit 2 with one line naming a
file of the case. A traceback, a hang, an accepted input that the independent reading finds bad, or a file
left behind by a failed command is a failure.

The mutations are drawn from a :class:`Choices` (hypothesis here; a seeded ``random.Random`` in
``bench/fuzz_readers.py``, the long run by hand, which imports this module).
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import io
import json
import math
import os
import random
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import tempfile
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from pathlib import Path

import pytest
from conftest import DATA, KINETO_KIND

INT64_MAX = 2**63 - 1
# one case reads a file of a few KB; the OTF2 library spins 10 to 20 s on some corrupt anchor files before it
# reports them (a bounded cost of the library, not of gpuan), so a hang is anything beyond a minute
CASE_TIMEOUT_S = 60

# ---------------------------------------------------------------------------------------------------------
# where mutations come from


class Choices:
    """The draws a mutation makes: hypothesis' ``data.draw`` or a seeded random generator."""

    def __init__(self, rng: random.Random | None = None, data=None) -> None:
        self.rng, self.data = rng, data

    def integer(self, lo: int, hi: int) -> int:
        """Return an integer in [lo, hi]."""
        if self.data is not None:
            from hypothesis import strategies as st

            return self.data.draw(st.integers(lo, hi))
        return self.rng.randint(lo, hi)

    def pick(self, items):
        """Return one of `items` (a sequence)."""
        items = list(items)
        return items[self.integer(0, len(items) - 1)]


class Rejected(Exception):
    """The independent reading finds the input bad: the only right answer is exit 2."""


class Failure(AssertionError):
    """A case ended in a way no input may make it end."""


# values a field is swapped for: wrong types, non-finite, huge and negative numbers
SWAPS: list[tuple[str, object]] = [
    ("string", "abc"),
    ("numeric string", "12.5"),
    ("null", None),
    ("true", True),
    ("list", [1, 2]),
    ("object", {"a": 1}),
    ("NaN", float("nan")),
    ("Infinity", float("inf")),
    ("-Infinity", float("-inf")),
    ("1e308", 1e308),
    ("-1", -1),
    ("2**70", 2**70),
    ("int64 max", INT64_MAX),
    ("0", 0),
    ("0.5", 0.5),
]


def flip_bytes(raw: bytes, c: Choices, lo: int = 0, hi: int | None = None) -> tuple[bytes, str]:
    """Return `raw` with 1 to 4 bytes in [lo, hi) xor-ed with non-zero masks, and what was done."""
    hi = len(raw) if hi is None else min(hi, len(raw))
    if hi <= lo:
        return raw, "no flip (empty range)"
    b = bytearray(raw)
    done = []
    for _ in range(c.integer(1, 4)):
        at, mask = c.integer(lo, hi - 1), c.integer(1, 255)
        b[at] ^= mask
        done.append(f"{at}^{mask:#x}")
    return bytes(b), "flip " + ",".join(done)


def truncate(raw: bytes, c: Choices) -> tuple[bytes, str]:
    """Return a prefix of `raw` (possibly empty), and what was done."""
    n = c.integer(0, max(0, len(raw) - 1))
    return raw[:n], f"truncate to {n} bytes"


# ---------------------------------------------------------------------------------------------------------
# running a case


@dataclass
class Case:
    """One mutated input: `path` (a file or, for OTF2, a directory) inside the case's own directory."""

    reader: str
    mutation: str
    path: Path
    workdir: Path
    extra: dict = field(default_factory=dict)


class _Hang(BaseException):
    """Raised by the alarm when a case runs past CASE_TIMEOUT_S (a BaseException: no reader catches it)."""


@contextlib.contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    def ring(signum, frame):
        raise _Hang()

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """Return (exit code, stdout, stderr) of ``gpuan ARGV`` run in this process; an exception escaping the
    command line (which a user would see as a traceback) raises Failure."""
    from gpuan.cli import main

    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(argv)
    except SystemExit as e:  # argparse
        rc = e.code if isinstance(e.code, int) else 1
    except _Hang:
        raise
    except BaseException:
        raise Failure(f"gpuan {' '.join(argv)} raised:\n{traceback.format_exc()}") from None
    return rc, out.getvalue(), err.getvalue()


def check_error_line(case: Case, where: str, message: str) -> None:
    """Raise Failure unless `message` is one line that names a file of the case."""
    lines = message.strip().splitlines()
    if len(lines) != 1:
        raise Failure(f"{where}: error is {len(lines)} lines, not one:\n{message}")
    if str(case.workdir) not in lines[0] and case.workdir.name not in lines[0]:
        raise Failure(f"{where}: error does not name the file: {lines[0]}")


def files_in(d: Path) -> set[str]:
    """Every file and directory under `d`, relative to it."""
    return {str(p.relative_to(d)) for p in d.rglob("*")}


def judge(case: Case, truth: dict | Rejected, got: dict | None, where: str) -> str:
    """Return "ok", "rejected" or "refused" (exit 2 on an input the independent reading reads) for one reading
    of the case (`got` None: it exited 2); raise Failure when it accepted an input the independent reading
    rejects, or read other events than it."""
    if got is None:
        return "refused" if isinstance(truth, dict) else "rejected"
    if isinstance(truth, Rejected):
        raise Failure(f"{where}: exit 0 on an input the independent reading rejects ({truth})")
    for key, want in truth.items():
        if key in got and got[key] != want:
            raise Failure(f"{where}: {key} differs from the independent reading:\n  gpuan: {got[key]}\n  truth: {want}")
    return "ok"


def run_case(case: Case) -> str:
    """Run one case through the load API and the command line; return "ok" (read, same events as the
    independent reading), "rejected" (exit 2, one line, and the independent reading rejects it too) or
    "refused" (exit 2, one line, where the independent reading finds events); raise Failure for anything
    else."""
    spec = READERS[case.reader]
    try:
        truth: dict | Rejected = spec.truth(case)
    except Rejected as e:
        truth = e
    cli_truth = truth
    if spec.cli_truth is not None:
        try:
            cli_truth = spec.cli_truth(case)
        except Rejected as e:
            cli_truth = e
    before = files_in(case.workdir)
    with _deadline(CASE_TIMEOUT_S):
        try:
            got = _api(spec, case)
            api = judge(case, truth, got, f"{spec.name} load API")
            # a trace without events loads, and the commands refuse it (there is nothing to analyse)
            empty = got is not None and not got.get("per_kind", True)
            for argv, summary in spec.commands(case):
                rc, out, err = run_cli(argv)
                where = f"gpuan {' '.join(argv)}"
                if rc not in (0, 2):
                    raise Failure(f"{where}: exit {rc}\n{err}")
                if rc == 2:
                    check_error_line(case, where, err)
                    left = files_in(case.workdir) - before
                    if left:
                        raise Failure(f"{where}: exit 2 left {sorted(left)} behind")
                cli = judge(case, cli_truth, summary(case, out) if rc == 0 else None, where)
                # a command reading fewer columns than the load API may read a file the API rejects, never
                # refuse one the API reads
                differs = cli != api if spec.cli_truth is None else cli == "refused" and api == "ok"
                if differs and not (empty and rc == 2):
                    raise Failure(f"{where}: {cli}, but the load API: {api}")
        except _Hang:
            raise Failure(f"hang: still running after {CASE_TIMEOUT_S} s") from None
    return api


def _api(spec: Reader, case: Case) -> dict | None:
    from gpuan.errors import TraceError

    try:
        return spec.api(case)
    except TraceError as e:
        check_error_line(case, f"{spec.name} load API", str(e))
        case.extra["error"] = str(e)
        return None
    except _Hang:
        raise
    except Exception:
        raise Failure(f"{spec.name} load API raised:\n{traceback.format_exc()}") from None


@dataclass(frozen=True)
class Reader:
    """One reader under fuzz: how to make a case, the independent truth, the API reading and the commands."""

    name: str
    make: Callable[[Choices, Path], Case]  # writes a mutated input under the given directory
    truth: Callable[[Case], dict]  # raises Rejected for a bad input
    api: Callable[[Case], dict]
    commands: Callable[[Case], list[tuple[list[str], Callable[[Case, str], dict]]]]
    # the truth of what the commands read, where they read less than the load API does (a Parquet file's
    # columns that a command's analysis does not declare are never decoded, so damage there goes unseen)
    cli_truth: Callable[[Case], dict] | None = None


def events_summary(trace) -> dict:
    """The summary of a Trace that the truths are compared with: events and duration (ns) per kind."""
    kinds = trace.events["kind"].combine_chunks().dictionary_decode().to_pylist()
    durs = trace.events["dur"].to_pylist()
    count, total = Counter(kinds), Counter()
    for k, d in zip(kinds, durs):
        total[k] += d or 0
    return {"per_kind": dict(count), "dur_per_kind": {k: v for k, v in total.items() if v}}


def info_summary(case: Case, out: str) -> dict:
    """The per-kind counts of ``gpuan info --format json``."""
    return {"per_kind": {k: v for k, v in json.loads(out)["per_kind"].items() if v}}


def trace_commands(case: Case) -> list[tuple[list[str], Callable[[Case, str], dict]]]:
    """``info`` (compared by kind) and ``convert`` (its cache then loaded and compared by the API)."""
    return [(["info", str(case.path), "--format", "json"], info_summary), (["convert", str(case.path)], _cached)]


def _cached(case: Case, out: str) -> dict:
    from gpuan.trace import parquet

    return events_summary(parquet.read(parquet.cache_path(case.path)))


def load_summary(case: Case) -> dict:
    import gpuan

    return events_summary(gpuan.load(case.path, use_cache=False))


# ---------------------------------------------------------------------------------------------------------
# Kineto JSON (.json and .json.gz)

KINETO_SOURCES = (
    "a100_triton_example.json.gz",
    "a100_event_sync_multistream.json.gz",
    "cpu_gloo_rank34_of_300.json.gz",
)
KINETO_FIELDS = ("ts", "dur", "ph", "cat", "name", "pid", "tid", "args")
KINETO_ARGS = ("stream", "correlation", "External id", "device", "grid", "block", "bytes")


def _kineto_doc(name: str) -> dict:
    with gzip.open(DATA / "kineto" / name, "rb") as f:
        return json.loads(f.read())


def _mutate_kineto(doc: dict, c: Choices) -> str:
    events = doc.get("traceEvents")
    what = c.integer(0, 9)
    if not isinstance(events, list) or not events:
        what = 0
    if what == 0:
        doc_key = c.pick(["traceEvents", "deviceProperties", "distributedInfo", "baseTimeNanoseconds"])
        if c.integer(0, 1):
            doc.pop(doc_key, None)
            return f"delete top-level {doc_key}"
        label, value = c.pick(SWAPS)
        doc[doc_key] = value
        return f"top-level {doc_key} = {label}"
    i = c.integer(0, len(events) - 1)
    e = events[i]
    if not isinstance(e, dict):
        return "no change"
    if what == 1:
        events.insert(i, json.loads(json.dumps(e)))
        return f"duplicate traceEvents[{i}]"
    if what == 2:
        del events[i]
        return f"delete traceEvents[{i}]"
    if what == 3:
        key = c.pick(KINETO_FIELDS)
        e.pop(key, None)
        return f"delete traceEvents[{i}].{key}"
    if what == 4 and isinstance(e.get("args"), dict):
        key = c.pick(KINETO_ARGS)
        label, value = c.pick(SWAPS)
        e["args"][key] = value
        return f"traceEvents[{i}].args[{key!r}] = {label}"
    if what == 5:
        events[i] = c.pick([[], "event", 5, None])
        return f"traceEvents[{i}] = {json.dumps(events[i])}"
    key = c.pick(("ts", "dur", "ts", "dur", "ph", "cat", "name", "pid", "tid"))
    label, value = c.pick(SWAPS)
    e[key] = value
    return f"traceEvents[{i}].{key} = {label}"


def make_kineto(c: Choices, d: Path) -> Case:
    name = c.pick(KINETO_SOURCES)
    gz = c.integer(0, 1) == 1
    level = c.integer(0, 3)  # 0, 1: structural; 2: bytes of the JSON; 3: bytes of the gzip stream
    raw_json = gzip.decompress((DATA / "kineto" / name).read_bytes())
    if level <= 1:
        doc = json.loads(raw_json)
        mutation = _mutate_kineto(doc, c)
        if c.integer(0, 3) == 0:
            mutation += "; " + _mutate_kineto(doc, c)
        data = json.dumps(doc).encode()
    elif level == 2:
        data, mutation = truncate(raw_json, c) if c.integer(0, 1) else flip_bytes(raw_json, c)
    if level == 3:
        stream = gzip.compress(raw_json, mtime=0)
        data, mutation = truncate(stream, c) if c.integer(0, 1) else flip_bytes(stream, c)
        mutation, gz = mutation + " of the gzip stream", True
    elif gz:
        data = gzip.compress(data, mtime=0)
    path = d / ("trace.json.gz" if gz else "trace.json")
    path.write_bytes(data)
    return Case("kineto", f"{name}: {mutation}", path, d)


def _us_to_ns(value, what: str) -> int | None:
    """A Kineto time in µs as whole ns (None when absent); Rejected for anything but a finite number that
    fits an int64 of ns."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        raise Rejected(f"{what} is {json.dumps(value, default=str)}, not a number")
    d = Decimal(value)
    if not d.is_finite():
        raise Rejected(f"{what} is {value}")
    ns = int((d * 1000).to_integral_value(ROUND_HALF_EVEN))
    if abs(ns) > INT64_MAX // 4:
        raise Rejected(f"{what} {value} µs does not fit in int64 ns")
    return ns


def kineto_truth(case: Case) -> dict:
    raw = case.path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib_error()) as e:
            raise Rejected(f"gzip: {e}") from None
    try:
        # strings are read leniently (README, Errors): invalid UTF-8 in a name becomes U+FFFD, and control
        # characters in a string are kept as written (strict=False)
        text = raw.decode("utf-8", "replace")
        doc = json.loads(text, parse_float=Decimal, parse_constant=lambda s: float(s), strict=False)
    except (ValueError, RecursionError) as e:
        raise Rejected(f"JSON: {e}") from None
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        raise Rejected("no traceEvents array")
    count, total, flows, stamped = Counter(), Counter(), 0, False
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            continue
        ph = e.get("ph")
        if ph in ("s", "t", "f"):
            flows += 1
        if ph not in ("X", "i", "I"):
            continue
        ts = _us_to_ns(e.get("ts"), f"traceEvents[{i}].ts")
        dur = _us_to_ns(e.get("dur"), f"traceEvents[{i}].dur")
        if ph == "X":
            if dur is not None and dur < 0:
                raise Rejected(f"traceEvents[{i}].dur is negative")
            stamped |= ts is not None
        cat = e.get("cat")
        kind = KINETO_KIND.get(cat.lower(), "other") if isinstance(cat, str) else "other"
        if kind == "cpu_op" and str(e.get("name", "")).startswith("ProfilerStep#"):
            kind = "annotation"
        count[kind] += 1
        total[kind] += dur or 0
    if any(isinstance(e, dict) and e.get("ph") == "X" for e in events) and not stamped:
        raise Rejected("no complete event has a timestamp")
    return {"per_kind": dict(count), "dur_per_kind": {k: v for k, v in total.items() if v}, "flows": flows}


def zlib_error():
    import zlib

    return zlib.error


def kineto_api(case: Case) -> dict:
    import gpuan

    trace = gpuan.load(case.path, use_cache=False)
    return events_summary(trace) | {"flows": trace.flows.num_rows}


# ---------------------------------------------------------------------------------------------------------
# Nsight Systems SQLite

NSYS_SOURCE = "nsys/saxpy_mpi_cuda_rank0.sqlite"
KERNEL, MEMCPY, MEMSET = "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"
RUNTIME, NVTX = "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS"
NSYS_COLUMNS = {
    KERNEL: ("start", "end", "deviceId", "streamId", "correlationId", "demangledName", "gridX", "blockX"),
    MEMCPY: ("start", "end", "deviceId", "streamId", "bytes", "copyKind"),
    RUNTIME: ("start", "end", "globalTid", "correlationId", "nameId", "eventClass"),
    NVTX: ("start", "end", "globalTid", "textId", "text", "eventType"),
    "StringIds": ("id", "value"),
}
# Nsight's documented values: eventClass 1 and 13 are driver calls, 67 a backtrace copy of a call; NVTX
# eventType 59 and 60 are push/pop and start/end ranges
DRIVER_CLASSES, BACKTRACE_CLASS, NVTX_RANGES = (1, 13), 67, (59, 60)


def make_nsys(c: Choices, d: Path) -> Case:
    path = d / "trace.sqlite"
    shutil.copyfile(DATA / NSYS_SOURCE, path)
    what = c.integer(0, 5)
    if what == 0:
        data, mutation = truncate(path.read_bytes(), c) if c.integer(0, 1) else flip_bytes(path.read_bytes(), c)
        path.write_bytes(data)
        return Case("nsys", mutation, path, d)
    table = c.pick(NSYS_COLUMNS)
    conn = sqlite3.connect(path)
    try:
        rowids = [r for (r,) in conn.execute(f'SELECT rowid FROM "{table}"')]
        column = c.pick(NSYS_COLUMNS[table])
        if what == 1 and rowids:
            rowid = c.pick(rowids)
            label, value = c.pick([s for s in SWAPS if not isinstance(s[1], (list, dict))])
            value = int(value) if isinstance(value, bool) else value
            if isinstance(value, int) and value > INT64_MAX:
                value = str(value)
            conn.execute(f'UPDATE "{table}" SET "{column}" = ? WHERE rowid = ?', (value, rowid))
            mutation = f"{table} row {rowid}: {column} = {label}"
        elif what == 2 and rowids:
            rowid = c.pick(rowids)
            conn.execute(f'INSERT INTO "{table}" SELECT * FROM "{table}" WHERE rowid = ?', (rowid,))
            mutation = f"{table}: duplicate row {rowid}"
        elif what == 3 and rowids:
            rowid = c.pick(rowids)
            conn.execute(f'DELETE FROM "{table}" WHERE rowid = ?', (rowid,))
            mutation = f"{table}: delete row {rowid}"
        elif what == 4:
            conn.execute(f'ALTER TABLE "{table}" DROP COLUMN "{column}"')
            mutation = f"{table}: drop column {column}"
        else:
            conn.execute(f'DROP TABLE "{table}"')
            mutation = f"drop table {table}"
        conn.commit()
    except sqlite3.Error as e:
        mutation = f"(sqlite refused the mutation: {e})"
    finally:
        conn.close()
    return Case("nsys", mutation, path, d)


def _times(rows: list[tuple], what: str) -> list[tuple]:
    """Check (start, end, ...) rows: integers that order; Rejected otherwise."""
    for r in rows:
        start, end = r[0], r[1]
        for v in (start, end):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
                raise Rejected(f"{what}: time {v!r} is not an integer")
        if start is not None and end is not None and end < start:
            raise Rejected(f"{what}: end {end} before start {start}")
    return rows


def nsys_truth(case: Case) -> dict:
    try:
        conn = sqlite3.connect(case.path.resolve().as_uri() + "?mode=ro", uri=True)
        conn.text_factory = lambda raw: raw.decode("utf-8", "replace")  # read leniently, as README says
        try:
            return _nsys_truth(conn)
        finally:
            conn.close()
    except (sqlite3.Error, UnicodeDecodeError) as e:  # SQLite's message may quote corrupt bytes
        raise Rejected(f"sqlite: {e}") from None


def _nsys_truth(conn: sqlite3.Connection) -> dict:
    tables = {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    count, total = Counter(), Counter()

    def add(kind: str, rows: list[tuple]) -> None:
        for r in rows:
            count[kind] += 1
            if r[0] is not None and r[1] is not None:
                total[kind] += r[1] - r[0]

    def columns(table: str) -> set[str]:
        have = {r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')}
        if not {"start", "end"} <= have and table != NVTX:
            raise Rejected(f"{table} has no start or end column")
        return have

    for table, kind in ((KERNEL, "kernel"), (MEMCPY, "memcpy"), (MEMSET, "memset")):
        if table in tables and columns(table):
            add(kind, _times(conn.execute(f'SELECT "start", "end" FROM "{table}"').fetchall(), table))
    if RUNTIME in tables:
        event_class = '"eventClass"' if "eventClass" in columns(RUNTIME) else "NULL"
        rows = _times(conn.execute(f'SELECT "start", "end", {event_class} FROM "{RUNTIME}"').fetchall(), RUNTIME)
        add("runtime", [r for r in rows if r[2] not in DRIVER_CLASSES and r[2] != BACKTRACE_CLASS])
        add("driver", [r for r in rows if r[2] in DRIVER_CLASSES])
    if NVTX in tables and {"start", "end"} <= columns(NVTX):  # without an end, no ranges
        ranges = ' AND "eventType" IN (59, 60)' if "eventType" in columns(NVTX) else ""
        sql = f'SELECT "start", "end" FROM "{NVTX}" WHERE "end" IS NOT NULL{ranges}'
        add("annotation", _times(conn.execute(sql).fetchall(), NVTX))
    if not count:
        raise Rejected("no CUDA or NVTX activity")
    return {"per_kind": dict(count), "dur_per_kind": {k: v for k, v in total.items() if v}}


# ---------------------------------------------------------------------------------------------------------
# nvprof CSV

NVPROF_SOURCES = ("mem_mem_1stream_23000.csv", "mem_mem_2stream_23000.csv")
TIME_UNIT = {"s": 10**9, "ms": 10**6, "us": 10**3, "µs": 10**3, "ns": 1}
SIZE_UNIT = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4}
NVPROF_CELLS = ("1e308", "NaN", "inf", "-1", "abc", "", "12.5", "9223372036854775807", "99999999999", "0")


def make_nvprof(c: Choices, d: Path) -> Case:
    name = c.pick(NVPROF_SOURCES)
    text = (DATA / "nvprof" / name).read_text()
    what = c.integer(0, 2)
    if what == 0:
        data, mutation = truncate(text.encode(), c) if c.integer(0, 1) else flip_bytes(text.encode(), c)
    else:
        lines = text.splitlines()
        at = next(i for i, line in enumerate(lines) if line.startswith('"Start"'))
        i = c.integer(at, len(lines) - 1)
        row = next(csv.reader([lines[i]]))
        if what == 1:
            j = c.integer(0, len(row) - 1)
            value = c.pick(NVPROF_CELLS)
            row[j] = value
            mutation = f"line {i + 1} field {j + 1} = {value!r}"
        else:
            op = c.pick(("duplicate", "delete", "drop field"))
            mutation = f"{op} line {i + 1}"
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerow(row[:-1] if what == 2 and op == "drop field" else row)
        new = [buf.getvalue().rstrip("\n")]
        if what == 2 and op == "duplicate":
            new = [lines[i], lines[i]]
        elif what == 2 and op == "delete":
            new = []
        data = "\n".join(lines[:i] + new + lines[i + 1 :]).encode() + b"\n"
    path = d / "trace.csv"
    path.write_bytes(data)
    return Case("nvprof", f"{name}: {mutation}", path, d)


def _number(cell: str, what: str, whole: bool = False) -> Decimal | None:
    if not cell.strip():
        return None
    try:
        v = Decimal(cell.strip())
    except InvalidOperation:
        raise Rejected(f"{what} {cell!r} is not a number") from None
    if not v.is_finite() or (whole and v != v.to_integral_value()):
        raise Rejected(f"{what} {cell!r} is not a {'whole ' if whole else ''}number")
    return v


def nvprof_truth(case: Case) -> dict:
    text = case.path.read_bytes().decode("utf-8", "replace")
    # one record per line: nvprof writes no field across lines, so a stray quote spoils only its own line
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("==")]
    rows = [next(csv.reader([line]), []) for line in lines]
    need = {"Start", "Duration", "Device", "Stream", "Name"}
    at = next((i for i, r in enumerate(rows) if need <= {x.strip() for x in r}), None)
    if at is None or at + 1 >= len(rows):
        raise Rejected("no GPU-trace header and units")
    header = [x.strip() for x in rows[at]]
    units = dict(zip(header, [u.strip() for u in rows[at + 1]]))
    if units.get("Start") not in TIME_UNIT:
        raise Rejected("no units row")
    count, total, table = Counter(), Counter(), []
    for r in rows[at + 2 :]:
        if len(r) != len(header):
            raise Rejected(f"row of {len(r)} fields")
        cell = dict(zip(header, r))
        values = {}
        for col, scale in (("Start", TIME_UNIT), ("Duration", TIME_UNIT), ("Size", SIZE_UNIT)):
            v = _number(cell.get(col, ""), col)
            if v is not None:
                if units.get(col) not in scale:
                    raise Rejected(f"{col}: unknown unit")
                v = int((v * scale[units[col]]).to_integral_value(ROUND_HALF_EVEN))
                if not -(2**63) < v < 2**63:
                    raise Rejected(f"{col} does not fit in int64")
                if v < 0 and col != "Start":
                    raise Rejected(f"negative {col}")
            values[col] = v
        for col in ("Grid X", "Grid Y", "Grid Z", "Block X", "Block Y", "Block Z", "Registers Per Thread"):
            v = _number(cell.get(col, ""), col, whole=True)
            if v is not None and not -(2**31) < v < 2**31:
                raise Rejected(f"{col} {v} does not fit in int32")
        v = _number(cell.get("Stream", ""), "Stream", whole=True)
        if v is not None and not -(2**63) < v < 2**63:
            raise Rejected("Stream does not fit in int64")
        device = cell.get("Device", "").strip()
        if device.endswith(")") and "(" in device:
            index = device[device.rindex("(") + 1 : -1]
            if index.isdigit() and int(index) >= 2**15 - 1:
                raise Rejected(f"device index {index} does not fit in int16")
        name = cell["Name"].strip()
        words = name[1:-1].split() if name.startswith("[") and name.endswith("]") else []
        copy = words[-1] if len(words) == 3 and words[1].lower() == "memcpy" else ""
        if words[:1] in (["CUDA"], ["Unified"]) and len(copy) == 4 and copy[1:3] == "to" and copy.isalpha():
            kind = "memcpy"
        elif name.lower() == "[cuda memset]":
            kind = "memset"
        elif name.startswith("[") and name.endswith("]"):
            kind = "other"
        else:
            kind = "kernel"
        count[kind] += 1
        total[kind] += values["Duration"] or 0
        table.append((kind, values["Start"], values["Duration"], values["Size"]))
    starts = [t[1] for t in table if t[1] is not None]
    base = min(starts) if starts else 0
    rows_out = _sorted_rows((k, None if s is None else s - base, du, sz) for k, s, du, sz in table)
    return {"per_kind": dict(count), "dur_per_kind": {k: v for k, v in total.items() if v}, "rows": rows_out}


def _sorted_rows(rows) -> list[tuple]:
    """The rows in one order, None before every number."""
    return sorted((tuple(rows_) for rows_ in rows), key=lambda r: [(x is not None, x or 0) for x in r])


def nvprof_api(case: Case) -> dict:
    import gpuan

    t = gpuan.load(case.path, use_cache=False)
    kinds = t.events["kind"].combine_chunks().dictionary_decode().to_pylist()
    rows = _sorted_rows(
        zip(kinds, t.events["ts"].to_pylist(), t.events["dur"].to_pylist(), t.events["bytes"].to_pylist())
    )
    return events_summary(t) | {"rows": rows}


# ---------------------------------------------------------------------------------------------------------
# Parquet cache (written by gpuan convert from a small real trace, then mutated)


def make_parquet(c: Choices, d: Path) -> Case:
    import pyarrow as pa
    import pyarrow.parquet as pq

    source = _parquet_source()
    path = d / "trace.parquet"
    what = c.integer(0, 2)
    if what == 0:
        raw = source.read_bytes()
        data, mutation = truncate(raw, c) if c.integer(0, 1) else flip_bytes(raw, c)
        path.write_bytes(data)
        return Case("parquet", mutation, path, d)
    f = pq.ParquetFile(source)
    flow_groups = int(f.metadata.metadata.get(b"gpuan.flow_row_groups", b"0"))
    table = f.read_row_groups(range(f.num_row_groups - flow_groups))  # the events: pq.write_table keeps no record
    meta = dict(f.schema_arrow.metadata)  # the schema's, without the footer's records of the row groups
    cols = table.column_names
    if what == 1:
        col = c.pick(cols)
        op = c.pick(("drop", "as string", "as float", "nulls", "unknown kind", "huge"))
        i = cols.index(col)
        if op == "drop":
            table = table.remove_column(i)
        elif op == "as string":
            table = table.set_column(i, col, pa.array([str(x) for x in table[col].to_pylist()]))
        elif op == "as float":
            values = [float(x) if isinstance(x, (int, float)) else math.nan for x in table[col].to_pylist()]
            table = table.set_column(i, col, pa.array(values, pa.float64()))
        elif op == "nulls":
            table = table.set_column(i, col, pa.nulls(table.num_rows, table.schema.field(col).type))
        elif op == "unknown kind":
            col = "kind"
            kinds = table["kind"].combine_chunks().dictionary_decode().to_pylist()
            kinds[c.integer(0, len(kinds) - 1)] = "warp_drive"
            table = table.set_column(cols.index("kind"), "kind", pa.array(kinds).dictionary_encode())
        else:
            col = "dur"
            durs = table["dur"].to_pylist()
            durs[c.integer(0, len(durs) - 1)] = c.pick((INT64_MAX, -1, -INT64_MAX))
            table = table.set_column(cols.index("dur"), "dur", pa.array(durs, pa.int64()))
        mutation = f"column {col}: {op}"
    else:
        key = c.pick(list(meta))
        op = c.pick(("delete", "garbage", "json list", "no format"))
        if op == "delete":
            del meta[key]
        elif op == "garbage":
            meta[key] = b"\x00garbage{"
        elif op == "json list":
            meta[key] = b"[1, 2]"
        else:
            m = json.loads(meta[b"gpuan.metadata"])
            m.pop("format", None)
            m["base_time_ns"] = "abc"
            meta[b"gpuan.metadata"] = json.dumps(m).encode()
        mutation = f"metadata {key.decode()}: {op}"
    pq.write_table(table.replace_schema_metadata(meta), path)
    return Case("parquet", mutation, path, d)


_PARQUET: dict[str, Path] = {}


def _parquet_source() -> Path:
    """A gpuan Parquet file of a small real Kineto trace (written once per process)."""
    if "path" not in _PARQUET:
        import gpuan
        from gpuan.trace import parquet

        d = Path(tempfile.mkdtemp(prefix="gpuan-fuzz-parquet-"))
        _PARQUET["path"] = parquet.write(
            gpuan.load(DATA / "kineto" / KINETO_SOURCES[1], use_cache=False), d / "t.parquet"
        )
    return _PARQUET["path"]


def parquet_truth(case: Case, columns: set[str] | None = None) -> dict:
    """The independent reading of the file; with `columns`, only those of the events are decoded."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from gpuan.trace.kinds import KINDS
    from gpuan.trace.schema import SCHEMA

    try:
        t, flows = _read_parquet(case.path, columns)
    except (OSError, pa.ArrowException, ValueError) as e:  # ValueError: a column path or record that is no UTF-8/JSON
        raise Rejected(f"pyarrow: {e}") from None
    meta = t.schema.metadata or {}
    try:
        gmeta = json.loads(meta[b"gpuan.metadata"])
    except (KeyError, ValueError):
        raise Rejected("no gpuan metadata") from None
    if not isinstance(gmeta, dict):
        raise Rejected("gpuan metadata is not an object")
    for f in SCHEMA:
        if f.name not in t.column_names:
            raise Rejected(f"no column {f.name}")
        if t.schema.field(f.name).type != f.type:
            raise Rejected(f"column {f.name} is {t.schema.field(f.name).type}, not {f.type}")
    kinds = t["kind"].combine_chunks().dictionary_decode().to_pylist()
    if set(kinds) - set(KINDS):
        raise Rejected("unknown kind")
    if flows is None and b"gpuan.flows" in meta:  # format 8 and before: the flows as a file in the footer
        try:
            flows = pq.read_table(pa.BufferReader(meta[b"gpuan.flows"])).num_rows
        except (OSError, pa.ArrowException) as e:
            raise Rejected(f"flows: {e}") from None
    count, total = Counter(kinds), Counter()
    for k, d in zip(kinds, t["dur"].to_pylist()):
        total[k] += d or 0
    out = {"per_kind": dict(count), "dur_per_kind": {k: v for k, v in total.items() if v}}
    return out | {"flows": flows} if flows is not None else out


#: the event columns that hold a flow's fields in the flows' row groups (id, cat, phase, ts, pid, tid, rank)
FLOW_COLUMNS = ("correlation", "cat", "name", "ts", "pid", "tid", "rank")


def parquet_info_truth(case: Case) -> dict:
    """The independent reading of what `gpuan info` reads of the file: the columns its analysis declares."""
    from gpuan.info.analysis import reads

    return parquet_truth(case, set(reads().columns))


def _read_parquet(path: Path, columns: set[str] | None = None):
    """The file's events and the number of its flows (None where the footer records no flow row groups),
    read with pyarrow; the columns the writer recorded as null throughout a row group (footer key
    gpuan.null_columns, one list per row group) are taken as nulls without decoding them, and the last row
    groups, as many as footer key gpuan.flow_row_groups says, hold the flows in the event columns of
    FLOW_COLUMNS, as gpuan's reader documents. With `columns` (what a projected read decodes), the events'
    other columns are not decoded either, and the flows are counted, not decoded.
    No column chunk's metadata is touched: on a corrupt footer pyarrow aborts."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    f = pq.ParquetFile(path)
    schema = f.schema_arrow
    record = (f.metadata.metadata or {}).get(b"gpuan.null_columns")
    nulls = json.loads(record) if record is not None else [[] for _ in range(f.num_row_groups)]
    if not (isinstance(nulls, list) and len(nulls) == f.num_row_groups):
        raise pa.ArrowInvalid("the record of null columns does not fit the row groups")
    if not all(isinstance(g, list) and set(g) <= set(schema.names) for g in nulls):
        raise pa.ArrowInvalid("the record of null columns names no columns of the file")
    flow_record = (f.metadata.metadata or {}).get(b"gpuan.flow_row_groups", b"0")
    if not (flow_record.isdigit() and int(flow_record) <= f.num_row_groups):
        raise pa.ArrowInvalid("the record of the flows' row groups does not fit the row groups")
    first_flows = f.num_row_groups - int(flow_record)
    pieces = []
    for i in range(first_flows):
        n = f.metadata.row_group(i).num_rows
        null = set(nulls[i]) | (set() if columns is None else set(schema.names) - columns)
        got = f.read_row_group(i, columns=[c for c in schema.names if c not in null])
        cols = [got[c] if c not in null else pa.nulls(n, schema.field(c).type) for c in schema.names]
        pieces.append(pa.Table.from_arrays(cols, schema=schema))
    flows = None
    if first_flows < f.num_row_groups:
        groups = range(first_flows, f.num_row_groups)
        if columns is None:
            flows = f.read_row_groups(groups, columns=[c for c in FLOW_COLUMNS if c in schema.names]).num_rows
        else:
            flows = sum(f.metadata.row_group(i).num_rows for i in groups)
    return pa.concat_tables(pieces) if pieces else schema.empty_table(), flows


def parquet_api(case: Case) -> dict:
    import gpuan

    t = gpuan.load(case.path)
    # the flows are decoded on first use: a broken blob must fail here too, as a TraceError
    return events_summary(t) | {"flows": t.flows.num_rows}


def parquet_commands(case: Case):
    return [(["info", str(case.path), "--format", "json"], info_summary)]


# ---------------------------------------------------------------------------------------------------------
# OTF2 archives


def make_otf2(c: Choices, d: Path) -> Case:
    archive = d / "run"
    shutil.copytree(DATA / "otf2" / "ping_pong_2rank", archive)
    files = sorted(p for p in archive.rglob("*") if p.is_file() and p.suffix in (".otf2", ".def", ".evt"))
    victim = c.pick(files)
    what = c.integer(0, 4)
    rel = victim.relative_to(archive)
    if what == 0:
        victim.unlink()
        mutation = f"delete {rel}"
    else:
        raw = victim.read_bytes()
        data, mutation = truncate(raw, c) if what == 1 else flip_bytes(raw, c)
        victim.write_bytes(data)
        mutation = f"{rel}: {mutation}"
    return Case("otf2", mutation, archive, d)


def otf2_truth(case: Case) -> dict:
    import otf2

    count, total = Counter(), Counter()
    try:
        with _quiet_fd2(), otf2.reader.open(str(case.path / "traces.otf2")) as r:
            res = int(r.timer_resolution)
            open_: dict[int, list] = {}
            # definitions without locations: no events to read (the package refuses to read none)
            for loc, e in r.events if r.definitions.locations else ():
                if isinstance(e, otf2.events.Enter):
                    kind = "comm" if e.region.paradigm == otf2.Paradigm.MPI else "cpu_op"
                    open_.setdefault(loc._ref, []).append((kind, int(e.time)))
                elif isinstance(e, otf2.events.Leave):
                    stack = open_.get(loc._ref)
                    if not stack:
                        raise Rejected("Leave without Enter")
                    kind, t0 = stack.pop()
                    count[kind] += 1
                    total[kind] += (int(e.time) - t0) * 10**9 // res  # both end and start rounded alike
            if any(open_.values()):
                raise Rejected("Enter without Leave")
    except Rejected:
        raise
    except Exception as e:
        raise Rejected(f"otf2: {e}") from None
    return {"per_kind": dict(count)}


@contextlib.contextmanager
def _quiet_fd2() -> Iterator[None]:
    """The OTF2 C library writes to file descriptor 2: keep it off the test's output."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "wb") as null:
        os.dup2(null.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def otf2_commands(case: Case):
    return [(["info", str(case.path), "--format", "json"], info_summary)]


# ---------------------------------------------------------------------------------------------------------
# GGUF models and tensor-access logs (``gpuan tensors LOG --gguf MODEL``)

GGUF_SOURCE = "gguf/stories260K.gguf"


def _gguf_header_end() -> int:
    from gguf import GGUFReader

    return int(GGUFReader(DATA / GGUF_SOURCE, "r").data_offset)


def make_gguf(c: Choices, d: Path) -> Case:
    raw = (DATA / GGUF_SOURCE).read_bytes()
    head = _gguf_header_end()
    what = c.integer(0, 3)
    if what == 0:
        data, mutation = truncate(raw, c)
    elif what == 1:
        data, mutation = flip_bytes(raw, c, 0, head)
    else:
        # a count or length field near the start set to a huge value
        at = c.pick((8, 16, 24, 32, 40))  # version / tensor count / kv count / first key length / ...
        value = c.pick((2**63, 2**32 - 1, 2**40, 0))
        data = raw[:at] + struct.pack("<Q", value % 2**64) + raw[at + 8 :]
        mutation = f"u64 at byte {at} = {value}"
    path = d / "model.gguf"
    path.write_bytes(data)
    log = d / "access.log"
    shutil.copyfile(_tensor_log_source("seed64"), log)
    return Case("gguf", mutation, path, d, {"log": log, "format": "seed64"})


def gguf_truth(case: Case) -> dict:
    from gguf import GGUFReader

    try:
        r = GGUFReader(case.path, "r")
        tensors = sorted((t.name, int(t.data_offset), int(t.n_bytes)) for t in r.tensors)
    except Exception as e:
        raise Rejected(f"gguf: {type(e).__name__}: {e}") from None
    size = case.path.stat().st_size
    if not tensors:
        raise Rejected("no tensors")
    if any(off + n > size for _, off, n in tensors):
        raise Rejected("tensor data past the end of the file")
    return {"tensors": tensors}


def gguf_api(case: Case) -> dict:
    from gpuan.trace.gguf_map import read_gguf

    m = read_gguf(case.path)
    return {"tensors": sorted(zip(m.tensors["name"], map(int, m.tensors["offset"]), map(int, m.tensors["n_bytes"])))}


def tensors_commands(case: Case):
    argv = [
        "tensors",
        str(case.extra["log"]),
        "--gguf",
        str(_model_of(case)),
        "--format",
        "json",
        "--log-format",
        case.extra["format"],
        "-o",
        str(case.workdir / "out"),
    ]
    return [(argv, _tensors_summary)]


def _model_of(case: Case) -> Path:
    return case.path if case.reader == "gguf" else DATA / GGUF_SOURCE


def _tensors_summary(case: Case, out: str) -> dict:
    s = json.loads(out)
    got = {"entries": s["entries"], "accesses": s["accesses"], "format": s["format"]}
    if not (case.workdir / "out").is_dir():
        raise Failure("gpuan tensors -o: exit 0 but no output directory")
    return got


_LOGS: dict[str, Path] = {}
LOG_FORMATS = ("seed64", "packed64", "op256", "op1024")


def _tensor_log_source(fmt: str) -> Path:
    """A small tensor-access log of `fmt` written against the real stories260K model (once per process)."""
    if fmt not in _LOGS:
        from gpuan.synth import tensors as synth_tensors
        from gpuan.trace.gguf_map import read_gguf

        d = Path(tempfile.mkdtemp(prefix="gpuan-fuzz-log-"))
        _LOGS[fmt] = d / f"stories.{fmt}"
        synth_tensors.write_log(_LOGS[fmt], read_gguf(DATA / GGUF_SOURCE), fmt, tokens=3, threads=2)
    return _LOGS[fmt]


def make_tensorlog(c: Choices, d: Path) -> Case:
    fmt = c.pick(LOG_FORMATS)
    raw = _tensor_log_source(fmt).read_bytes()
    width = {"seed64": 64, "packed64": 64, "op256": 256, "op1024": 1024}[fmt]
    n = len(raw) // width
    what = c.integer(0, 3)
    if what == 0:
        data, mutation = truncate(raw, c)
    elif what == 1:
        data, mutation = flip_bytes(raw, c)
    elif what == 2:
        # one field of one entry: the timestamp, token id, layer or thread set to 0 or all ones
        i = c.integer(0, n - 1)
        at, size = c.pick(((0, 8), (8, 4), (12, 2), (14, 2)))
        value = c.pick((0, 2 ** (8 * size) - 1, 1 << 20))
        data = raw[: i * width + at] + (value % 2 ** (8 * size)).to_bytes(size, "little") + raw[i * width + at + size :]
        mutation = f"entry {i}: bytes {at}..{at + size} = {value}"
    else:
        i, j = c.integer(0, n - 1), c.integer(0, n - 1)
        entries = [raw[k * width : (k + 1) * width] for k in range(n)]
        entries.insert(i, entries[j])
        data = b"".join(entries)
        mutation = f"entry {j} copied before entry {i}"
    log = d / "access.log"
    log.write_bytes(data)
    return Case("tensorlog", f"{fmt}: {mutation}", log, d, {"log": log, "format": fmt})


def tensorlog_truth(case: Case) -> dict:
    from test_tensors import read_entries  # the independent struct decoding of test_tensors.py

    fmt = case.extra["format"]
    raw = case.extra["log"].read_bytes()
    width = {"seed64": 64, "packed64": 64, "op256": 256, "op1024": 1024}[fmt]
    if not raw or len(raw) % width:
        raise Rejected("size is not a whole number of entries")
    stamps = [struct.unpack_from("<Q", raw, i)[0] for i in range(0, len(raw), width)]
    used = stamps.index(0) if 0 in stamps else len(stamps)
    for i in range(used):  # the counts of a per-operation entry: at most 4 sources, 16 experts
        if fmt.startswith("op") and raw[i * width + 18] > 4 or fmt == "op1024" and raw[i * width + 856] > 16:
            raise Rejected(f"entry {i} claims more sources or experts than it holds")
    try:
        acc = read_entries(case.extra["log"], fmt)
    except UnicodeDecodeError:
        # a flipped byte in a source name: the struct reading stops there, and the counts do not depend on it
        return {}
    if not acc:
        raise Rejected("no used entries")
    last = max((i for i, t in enumerate(stamps) if t), default=-1)
    if 0 in stamps[:last]:
        raise Rejected("a zero timestamp before the last used entry (a zero marks only the unused tail)")
    if any(a["token"] >= 1 << 20 for a in acc):
        raise Rejected("a token id that is not a token position")
    entries = len({a["entry"] for a in acc})
    if case.reader == "gguf":
        truth = gguf_truth(case)
        return truth | {"entries": entries, "accesses": len(acc), "format": fmt}
    return {"entries": entries, "accesses": len(acc), "format": fmt}


def tensorlog_api(case: Case) -> dict:
    from gpuan.tensors import analyse
    from gpuan.trace.tensor_inputs import load_tensor_inputs

    # the format is given, as a user who knows it would: auto-detection by plausibility is tested in
    # test_tensors.py, and one entry of a truncated op1024 log is a plausible op256 entry
    s = analyse(load_tensor_inputs(case.extra["log"], _model_of(case), log_format=case.extra["format"])).summary
    return {"entries": s["entries"], "accesses": s["accesses"], "format": s["log_format"]}


READERS: dict[str, Reader] = {
    r.name: r
    for r in (
        Reader("kineto", make_kineto, kineto_truth, kineto_api, trace_commands),
        Reader("nsys", make_nsys, nsys_truth, load_summary, trace_commands),
        Reader("nvprof", make_nvprof, nvprof_truth, nvprof_api, trace_commands),
        Reader("parquet", make_parquet, parquet_truth, parquet_api, parquet_commands, parquet_info_truth),
        Reader("otf2", make_otf2, otf2_truth, load_summary, otf2_commands),
        Reader("gguf", make_gguf, tensorlog_truth, gguf_api, tensors_commands),
        Reader("tensorlog", make_tensorlog, tensorlog_truth, tensorlog_api, tensors_commands),
    )
}


def fuzz_one(reader: str, c: Choices) -> tuple[str, Case]:
    """Make one mutated case of `reader` from `c` in a fresh directory and run it; return (outcome, case).
    The directory is removed afterwards; a Failure names the mutation."""
    d = Path(tempfile.mkdtemp(prefix=f"gpuan-fuzz-{reader}-"))
    try:
        case = READERS[reader].make(c, d)
        try:
            return run_case(case), case
        except Failure as e:
            raise Failure(f"[{reader}] {case.mutation}\n{e}") from None
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ---------------------------------------------------------------------------------------------------------
# the short run in CI

EXAMPLES = int(os.environ.get("GPUAN_FUZZ_EXAMPLES", "20"))


@pytest.fixture(scope="module")
def real_data():
    if not DATA.is_dir():
        pytest.skip(f"real test data not found at {DATA} (../shared/data beside the project)")
    return DATA


@pytest.mark.parametrize("reader", list(READERS))
def test_fuzz_reader(reader, real_data):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    @settings(
        max_examples=EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.data())
    def case(data):
        fuzz_one(reader, Choices(data=data))

    case()


# the cases that once crashed or were misread, by the seed that draws them (the mutation is checked, so that a
# change to the mutators cannot silently turn one into another case)
REGRESSIONS = [
    ("nvprof", "nvprof-reg-124", "mem_mem_2stream_23000.csv: line 12 field 16 = '9223372036854775807'"),
    ("nvprof", "nvprof-reg-154", "mem_mem_2stream_23000.csv: line 7 field 2 = '1e308'"),
    ("nvprof", "nvprof-reg-204", "mem_mem_1stream_23000.csv: line 9 field 1 = '1e308'"),
    ("nvprof", "nvprof-reg-540", "mem_mem_1stream_23000.csv: line 4 field 5 = '99999999999'"),
    ("nvprof", "nvprof-reg-828", "mem_mem_2stream_23000.csv: line 4 field 2 = '-1'"),
    ("parquet", "parquet-reg-35", "column pid: as float"),
    ("parquet", "parquet-reg-435", "column name: as string"),
    ("parquet", "parquet-4-135", "flip 9107^0x6,15987^0x1f"),
    ("otf2", "otf2-1-4", "traces.def: flip 3916^0xd9,957^0xcd,4320^0x2e"),
    ("otf2", "otf2-6-209", "traces.def: flip 3093^0x44,4876^0xc1,6177^0x94,3778^0x27"),
    ("gguf", "gguf-reg-3", "u64 at byte 8 = 0"),
    ("tensorlog", "tensorlog-reg-210", "seed64: entry 244: bytes 0..8 = 0"),
    ("kineto", "kineto-reg-287", "cpu_gloo_rank34_of_300.json.gz: traceEvents[6].ts = 2**70"),
    ("kineto", "kineto-reg-384", "a100_event_sync_multistream.json.gz: traceEvents[145].ph = numeric string"),
    ("kineto", "kineto-reg-496", "cpu_gloo_rank34_of_300.json.gz: traceEvents[2].dur = 2**70"),
    ("kineto", "kineto-reg-801", "cpu_gloo_rank34_of_300.json.gz: delete traceEvents[22].ph"),
    ("nsys", "nsys-reg-80", "CUPTI_ACTIVITY_KIND_MEMCPY row 10: end = 0.5"),
    ("nsys", "nsys-reg-435", "CUPTI_ACTIVITY_KIND_KERNEL row 5: gridX = 1e308"),
    ("nsys", "nsys-reg-1331", "CUPTI_ACTIVITY_KIND_KERNEL row 2: start = Infinity"),
    ("nsys", "nsys-reg-1532", "CUPTI_ACTIVITY_KIND_KERNEL row 5: end = -1"),
    # from the long run (bench/fuzz_readers.py)
    ("otf2", "otf2-long-417", "traces.otf2: flip 36^0x90,78^0x5e,70^0x2b"),
    ("nvprof", "nvprof-long-603", "mem_mem_2stream_23000.csv: flip 744^0xc8,751^0xc3,583^0x7"),
    ("nsys", "nsys-long-161", "CUPTI_ACTIVITY_KIND_RUNTIME row 83: start = int64 max"),
    ("kineto", "kineto-long-329", "cpu_gloo_rank34_of_300.json.gz: flip 20836^0x88"),
    ("tensorlog", "tensorlog-3-189", "op1024: entry 214: bytes 0..8 = 0"),
    ("tensorlog", "tensorlog-3-1119", "op1024: entry 250: bytes 0..8 = 0"),
    ("kineto", "kineto-3-1286", "a100_triton_example.json.gz: flip 10794^0x68"),
    ("parquet", "parquet-4-788", "flip 39236^0x3b,12467^0x70,29504^0xd"),
    ("parquet", "parquet-5-940", "flip 12675^0x8d"),
]


@pytest.mark.parametrize("reader,seed,mutation", REGRESSIONS, ids=[r[1] for r in REGRESSIONS])
def test_fuzz_regression(reader, seed, mutation, real_data):
    outcome, case = fuzz_one(reader, Choices(rng=random.Random(seed)))
    assert case.mutation == mutation


# broken for certain: a gzip stream cut short, a flipped byte in its deflate data (its CRC fails), an SQLite file
# cut short, an nvprof CSV cut inside its units row
SUBPROCESS_CASES = [
    ("kineto/a100_triton_example.json.gz", "truncate", 1000),
    ("kineto/a100_triton_example.json.gz", "flip", 700),
    ("nsys/saxpy_mpi_cuda_rank0.sqlite", "truncate", 100_000),
    ("nvprof/mem_mem_1stream_23000.csv", "truncate", 300),
]


@pytest.mark.parametrize("source,how,at", SUBPROCESS_CASES)
def test_fuzz_subprocess(source, how, at, real_data, tmp_path):
    """The real entry point: a broken file gives exit 2 and one line on stderr naming it, no traceback and
    no cache left beside it."""
    raw = (real_data / source).read_bytes()
    data = raw[:at] if how == "truncate" else raw[:at] + bytes([raw[at] ^ 0xFF]) + raw[at + 1 :]
    path = tmp_path / Path(source).name
    path.write_bytes(data)
    r = subprocess.run(
        [sys.executable, "-m", "gpuan", "convert", str(path)], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and str(path) in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]
