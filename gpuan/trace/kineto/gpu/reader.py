"""Read a Kineto / Chrome-trace JSON file on the GPU into the CPU reader's RawTrace.

The bytes go to the device once (:mod:`upload`); stage 1 finds the events, stage 2 parses them into the
scanner's scratch rows, and the strings get the CPU reader's ids, all on the device. The rows then take the
CPU reader's own way into Arrow (``reader.collect``, ``reader._assemble``, ``events.build_trace``), so the
table is the CPU reader's, column for column. Anything the GPU path does not take as a well-formed trace
(malformed JSON, a field of the wrong type, an event with more strings than it keeps) is handed to the CPU
reader, which reads it or raises its one-line TraceError: messages have one source.
"""

from __future__ import annotations

import numpy as np

from gpuan.arrays import to_host
from gpuan.trace.kineto import reader as cpu
from gpuan.trace.kineto import scanner as sc
from gpuan.trace.kineto.gpu import fields_cuda, strings_cuda, structure_cuda, upload

HEAD_BYTES = 1 << 20
#: the string fields of the scratch's F32 row, by index
_STRING_COLUMNS = np.array([sc.I32[f] for f in sc.F32 if f in cpu.STRING_FIELDS], np.int64)


def scan_file_gpu(path: str, xp, **launch) -> cpu.RawTrace | None:
    """Return the file's RawTrace computed on the device of `xp` (cupy; numpy runs the kernels in numba's
    CUDA simulator), or None where the CPU reader must read it (see the module docstring). `launch` may set
    the kernels' `threads` and `items` (few, in the simulator)."""
    buf, n = upload.read_to_device(path, xp)
    head = _head(buf, n)
    kind, pos = sc.find_events_array(head, head.size - upload.PAD)
    if kind <= 0:
        return None
    threads, items = launch.get("threads", structure_cuda.THREADS), launch.get("items", structure_cuda.ITEMS)
    starts, end = structure_cuda.event_starts(xp, buf, n, pos, 2 if kind == 1 else 1, items=items, threads=threads)
    if end >= n or not _opens_well(buf, pos, int(starts[0]) if starts.size else end):
        return None
    fields = fields_cuda.extract(xp, buf, n, starts, end, threads=threads)
    if starts.size and int(fields["status"].max()) != fields_cuda.OK:
        return None
    slot_ids, first, lengths = strings_cuda.string_ids(xp, buf, fields, threads=threads)
    o32, columns = fields["o32"], xp.asarray(_STRING_COLUMNS)
    codes = o32[:, columns]
    rows = xp.arange(codes.shape[0], dtype=np.int64)[:, None] * fields_cuda.MAX_SPANS
    o32[:, columns] = xp.where(codes != sc.NULL32, slot_ids[rows + xp.maximum(codes, 0)], sc.NULL32)
    out = cpu.Collected(1, int(starts.size) + 1024)
    gmap = out.strings.add(_string_bytes(xp, buf, first, lengths))
    cpu.collect(to_host(fields["o64"]), to_host(o32), int(starts.size), gmap, out)
    text = to_host(buf[: pos - 1]).tobytes() if kind == 1 else None
    metadata = cpu.parse_metadata(path, text, to_host(buf[end + 1 : n]).tobytes()) if text is not None else {}
    return cpu._assemble(out, metadata)


def _head(buf, n: int) -> np.ndarray:
    """Return the file's first bytes on the host, enough to hold what precedes the events array."""
    size = HEAD_BYTES
    while True:
        head = to_host(buf[: min(size, n) + upload.PAD]).copy()
        head[min(size, n) :] = 0x20
        kind, _ = sc.find_events_array(head, min(size, n))
        if kind != 0 or size >= n:
            return head
        size *= 4


def _opens_well(buf, pos: int, first: int) -> bool:
    """Whether the bytes from the array's start `pos` to its first event (or its end) at `first` are what the
    CPU scanner accepts there: blanks and at most one comma."""
    gap = to_host(buf[pos : first + 1])
    p = sc.skip_ws(gap, 0, gap.size - 1)
    if gap[p] == sc.COMMA:
        p = sc.skip_ws(gap, p + 1, gap.size - 1)
    return p == gap.size - 1


def _string_bytes(xp, buf, first, lengths) -> list[bytes]:
    """Return the raw bytes of the strings at offsets `first` with `lengths` (in id order), gathered on the
    device and copied back at once."""
    if first.size == 0:
        return []
    ends = xp.cumsum(lengths)
    k = xp.arange(int(ends[-1]))
    s = xp.searchsorted(ends, k, side="right")  # the string that packed byte k belongs to
    where = first[s] + k - (ends - lengths)[s]
    data = to_host(buf[where]).tobytes()
    cuts = to_host(ends).tolist()
    return [data[a:b] for a, b in zip([0, *cuts[:-1]], cuts)]
