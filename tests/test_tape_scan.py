"""The structural tape (stage 1) against a byte-by-byte reference, and the tape scanner (stage 2) against
the byte-walking scanner: the same statuses, positions, scratch rows and strings on every input."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from gpuan.trace.kineto import reader as rd
from gpuan.trace.kineto import scanner as sc
from gpuan.trace.kineto import structural, tape_scan
from gpuan.trace.kineto.gpu import structure_numpy

BLANKS = b" \t\r\n"
STRUCTURALS = b"{}[]:,"


def reference_tape(data: bytes, start: int, stop: int) -> list[int]:
    """The tape of data[start:stop] byte by byte: quotes not escaped by an odd run of backslashes (inside
    strings or not, as simdjson has it), structurals outside strings, and the first byte of each run of
    other bytes outside strings (positions relative to start)."""
    out = []
    inside = run = False
    backslashes = 0  # the run of backslashes just before the byte
    for i in range(start, stop):
        c = data[i]
        escaped = backslashes % 2 == 1
        backslashes = backslashes + 1 if c == ord("\\") else 0
        if c == ord('"'):
            run = False
            if not escaped:
                inside = not inside
                out.append(i - start)
        elif inside:
            continue
        elif c in STRUCTURALS or c in BLANKS:
            run = False
            if c in STRUCTURALS:
                out.append(i - start)
        elif not run:
            out.append(i - start)
            run = True
    return out


def _buffer(data: bytes) -> np.ndarray:
    buf = np.zeros(len(data) + 64, np.uint8)
    buf[: len(data)] = np.frombuffer(data, np.uint8)
    return buf


def _random_text(rng: random.Random, size: int) -> bytes:
    """JSON-ish text: strings full of escapes, brackets, quotes and backslash runs, between structurals,
    numbers and blanks (not valid JSON: the tape does not care)."""
    pieces = []
    while sum(map(len, pieces)) < size:
        kind = rng.random()
        if kind < 0.4:
            body = "".join(
                rng.choice(['\\"', "\\\\", "\\", "a", "{", "]", ",", ":", " ", "\\n", "é"])
                for _ in range(rng.randrange(8))
            )
            body = body.rstrip("\\") if body.count("\\") % 2 else body
            pieces.append(b'"' + body.encode() + b'"')
        elif kind < 0.7:
            pieces.append(bytes([rng.choice(STRUCTURALS)]))
        elif kind < 0.85:
            pieces.append(rng.choice([b"12.5", b"-3", b"null", b"true", b"1e9", b"x"]))
        else:
            pieces.append(bytes(rng.choice(BLANKS) for _ in range(rng.randrange(1, 9))))
    return b"".join(pieces)


@pytest.mark.parametrize("seed", range(6))
def test_tape_matches_the_byte_by_byte_reference(seed):
    rng = random.Random(seed)
    data = _random_text(rng, rng.choice([50, 300, 3000]))
    buf = _buffer(data)
    # starts outside strings: positions where the reference is outside a string
    q = structure_numpy.in_string(np.frombuffer(data, np.uint8))
    outside = [i for i in range(len(data)) if not q[i] and (i == 0 or data[i - 1] != ord("\\"))]
    for start in [0] + rng.sample(outside, min(5, len(outside))):
        for stop in {len(data), max(start, len(data) - rng.randrange(1, 70))}:
            tape, count, covered = structural.build_tape(buf, start, stop, stop - start + 64)
            assert covered == stop
            assert tape[:count].tolist() == reference_tape(data, start, stop), (seed, start, stop)


def test_tape_quotes_agree_with_the_numpy_twin():
    rng = random.Random(7)
    data = _random_text(rng, 5000)
    tape, count, _ = structural.build_tape(_buffer(data), 0, len(data), len(data) + 64)
    quotes_on_tape = [int(p) for p in tape[:count] if data[p] == ord('"')]
    assert quotes_on_tape == np.flatnonzero(structure_numpy.quotes(np.frombuffer(data, np.uint8))).tolist()


def test_a_full_tape_covers_a_prefix_of_whole_blocks():
    data = b"[" + b"1," * 2000 + b"1]"
    buf = _buffer(data)
    tape, count, covered = structural.build_tape(buf, 0, len(data), 300)
    assert covered < len(data) and covered % 64 == 0
    ref = reference_tape(data, 0, len(data))
    assert tape[:count].tolist() == [p for p in ref if p < covered]


def test_escaped_bits_carry_backslash_runs_across_blocks():
    for run in range(1, 140):
        data = b'"' + b"a" * (run % 61) + b"\\" * run + b'" , "x"'
        tape, count, _ = structural.build_tape(_buffer(data), 0, len(data), len(data) + 64)
        assert tape[:count].tolist() == reference_tape(data, 0, len(data)), run


# Stage 2: tape_scan.scan against scanner.scan


def _event(rng: random.Random) -> dict:
    ev = {"ph": rng.choice("XBEisftM"), "name": rng.choice(["aten::mm", 'q"uo\\te', "[a]{b}", "x" * 40]),
          "cat": rng.choice(["kernel", "cpu_op", None]), "pid": rng.choice([1, "proc", 7]),
          "tid": rng.choice([3, "0x1f", "stream 7"]), "ts": rng.choice([1.5, 723462524016.978, 0, -2, 1e3]),
          "dur": rng.choice([0.5, 12, None])}  # fmt: skip
    if rng.random() < 0.8:
        ev["args"] = {
            "External id": rng.randrange(1000), "Input Dims": [[1, 2], []], "grid": [1, 2, 3], "name": "n,}",
            "Concrete Inputs": ["", "[x]"], "Ev Idx": 5, "nested": {"a": [{"b": "]"}]},
        }  # fmt: skip
    if rng.random() < 0.2:
        ev["id"] = rng.choice([5, "0x10"])
    keys = list(ev)
    rng.shuffle(keys)
    return {k: ev[k] for k in keys}


def _trace(rng: random.Random, events: int, indent) -> bytes:
    return json.dumps({"traceEvents": [_event(rng) for _ in range(events)]}, indent=indent).encode()


def _scan_all(fn, data: bytes, end_at: int | None, cap: int, table_bits: int):
    """Scan data from its events array with fn, draining and growing as reader.py does; return every
    call's (status, pos, rows), the rows and the strings."""
    n = len(data) if end_at is None else end_at
    buf = _buffer(data)
    _, pos = sc.find_events_array(buf, n)
    o64 = np.empty((cap, len(sc.F64)), np.int64)
    o32 = np.empty((cap, len(sc.F32)), np.int32)
    tables = rd.StringTables(1)
    if table_bits:
        tables.keys, tables.vals = tables.keys[:, : 1 << table_bits].copy(), tables.vals[:, : 1 << table_bits].copy()
    calls, rows, row = [], [], 0
    for _ in range(10_000):
        status, pos, row = fn(buf, pos, n, n, o64, o32, row, *tables.of(0))
        calls.append((status, pos, row))
        if status == sc.GROW:
            tables.grow()
            continue
        rows.append((o64[:row].copy(), o32[:row].copy()))
        if status == sc.FULL:
            row = 0
            continue
        break
    return calls, [(a.tolist(), b.tolist()) for a, b in rows], tables.strings(0)


@pytest.mark.parametrize("seed", range(8))
def test_tape_scan_equals_the_byte_walker(seed):
    rng = random.Random(seed)
    data = _trace(rng, rng.choice([1, 5, 60]), rng.choice([None, 1, 2]))
    for end_at in (None, rng.randrange(10, len(data))):  # a buffer cut inside an event: NEED_MORE
        for cap, table_bits in ((4096, 0), (3, 2)):  # small scratch (FULL) and a small table (GROW)
            assert _scan_all(tape_scan.scan, data, end_at, cap, table_bits) == _scan_all(
                sc.scan, data, end_at, cap, table_bits
            )


MALFORMED = [
    b'{"traceEvents": [{"ph": "X", "ts": 12x, "dur": 1}]}',
    b'{"traceEvents": [{"ph": "X", "ts": 1, "dur": 1} {"ph": "X"}]}',
    b'{"traceEvents": [{"ph": "X" "ts": 1}]}',
    b'{"traceEvents": [{}]}',
    b'{"traceEvents": [{"ph": "XX"}]}',
    b'{"traceEvents": [{"ph": "X", "args": {"a": [1, 2 ?]}}]}',
    b'{"traceEvents": [{"ph": "X", "args": {"grid": "g(1,)"}, "ts": "1"}]}',
    b'{"traceEvents": [{"ph": "X", "args": null, "ts": null, "dur": 1e400}]}',
    b'{"traceEvents": [{"ph": "X", "args": 5}]}',
    b'{"traceEvents": [{"ph": "X", "name": 5}]}',
    b'{"traceEvents": [{"ph": "X", "a": ,"ts": 3}]}',
    b'{"traceEvents": [{"ph": "X", "a": \\"x", "ts": 3}]}',
    b'{"traceEvents": [{"ph": "X", "pid": -, "ts": 3}]}',
    b'{"traceEvents": [{"ph": "X", "cat": "a\\"}", "ts": 3},]}',
    b'{"traceEvents": [{"ph": "X", "ts": 3}\x01, {"ph": "i"}]}',
    b'{"traceEvents": [{"name": "no phase"}]}',
]


@pytest.mark.parametrize("data", MALFORMED)
def test_tape_scan_equals_the_byte_walker_on_malformed_events(data):
    for end_at in (None, len(data) - 3):
        assert _scan_all(tape_scan.scan, data, end_at, 64, 0) == _scan_all(sc.scan, data, end_at, 64, 0)


def test_tape_scan_from_a_chunk_start_inside_the_array():
    rng = random.Random(11)
    data = _trace(rng, 40, 2)
    buf = _buffer(data)
    n = len(data)
    o64 = np.empty((4096, len(sc.F64)), np.int64)
    o32 = np.empty((4096, len(sc.F32)), np.int32)
    start = sc.find_chunk_start(buf, n // 3, n)
    end = sc.find_chunk_start(buf, 2 * n // 3, n)
    got = []
    for fn in (tape_scan.scan, sc.scan):
        tables = rd.StringTables(1)
        status, pos, rows = fn(buf, start, end, n, o64, o32, 0, *tables.of(0))
        got.append((status, pos, rows, o64[:rows].tolist(), o32[:rows].tolist(), tables.strings(0)))
    assert got[0] == got[1]
    assert got[0][0] == sc.OK_END and got[0][1] == end
