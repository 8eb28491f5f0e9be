"""Stage 2 on the GPU: one thread per event parses it into its scratch row, as the CPU scanner does.

The parsing is the CPU scanner's own code (:mod:`scanner_cuda` compiles it for CUDA): the same scratch
fields F64/F32, the same nulls, the same wrong-type and malformed-JSON checks. Strings come out as spans
(hash, offset, length; at most :data:`MAX_SPANS` per event) whose numbers stand in the string fields
until :mod:`strings_cuda` gives them ids. Each thread also checks that its event is followed by a comma
and the next event (or by the array's end), so that the events found by stage 1 are exactly those the
CPU scanner would read, or the status says otherwise. The twin is the CPU scanner (``scanner.scan``).
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from gpuan.trace.kineto import scanner as sc
from gpuan.trace.kineto.gpu.scanner_cuda import device_functions

MAX_SPANS = 16  # strings kept per event: 14 string fields, and room for a repeated key
THREADS = 128

# status of an event
OK, MALFORMED, SPANS_FULL, WRONG_TYPE = 0, 1, 2, 3

_d = device_functions()
_parse_event, _skip_ws = _d["_parse_event"], _d["skip_ws"]
_COMMA = sc.COMMA


@cuda.jit
def _fields_kernel(buf, b64, n, starts, end, o64, o32, hashes, offsets, lengths, counts, status):
    first = cuda.grid(1)
    stride = cuda.gridsize(1)
    nev = starts.shape[0]
    for e in range(first, nev, stride):
        # the CPU's intern-table arguments, here the event's span slots (record_span's parameters)
        h, o, ln = hashes[e], offsets[e], lengths[e]
        r = _parse_event(buf, b64, starts[e], n, o64, o32, e, h, o, o, ln, ln, counts[e : e + 1])
        if r == -2:
            status[e] = SPANS_FULL
        elif r == -3:
            status[e] = WRONG_TYPE
        elif r < 0:
            status[e] = MALFORMED
        else:
            # what the CPU scanner accepts between events: one comma (before the ']' too), and blanks
            p = _skip_ws(buf, r, n)
            if p < n and buf[p] == _COMMA:
                p = _skip_ws(buf, p + 1, n)
            following = starts[e + 1] if e + 1 < nev else end
            status[e] = OK if p == following else MALFORMED


def extract(xp, buf, n: int, starts, end: int, *, threads: int = THREADS, blocks: int | None = None) -> dict:
    """Parse the events starting at `starts` (device positions in buf[:n], the array's ']' at `end`) and
    return the device arrays: "o64"/"o32" (the scanner's scratch rows, string fields holding span
    numbers), "hashes"/"offsets"/"lengths" (MAX_SPANS spans per event), "counts" (spans used per event)
    and "status" (OK, MALFORMED, SPANS_FULL or WRONG_TYPE per event)."""
    nev = int(starts.size)
    out = {
        "o64": xp.empty((nev, len(sc.F64)), np.int64),
        "o32": xp.empty((nev, len(sc.F32)), np.int32),
        "hashes": xp.zeros((nev, MAX_SPANS), np.uint64),
        "offsets": xp.zeros((nev, MAX_SPANS), np.int64),
        "lengths": xp.zeros((nev, MAX_SPANS), np.int64),
        "counts": xp.zeros(nev, np.int64),
        "status": xp.zeros(nev, np.int32),
    }
    if nev:
        blocks = blocks or -(-nev // threads)
        b64 = buf.view(np.uint64)
        _fields_kernel[blocks, threads](
            buf, b64, n, starts, end, out["o64"], out["o32"], out["hashes"], out["offsets"], out["lengths"],
            out["counts"], out["status"],
        )  # fmt: skip
    return out
