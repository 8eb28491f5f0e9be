"""Stage 1 on the GPU: where the events of the traceEvents array start (the simdjson stage-1 idea).

The bytes are taken 64 at a time, one bit each (a *block*). Three kernels, each thread walking its own
run of `items` blocks, with a scan of the threads' totals between them:

1. ``_quotes_kernel``: the quotes not escaped by an odd run of backslashes, and their parity per thread;
2. ``_brackets_kernel``: the in-string mask by prefix XOR (within a block by shifts, across threads from
   the scanned parities), the brackets outside strings, and the nesting depth each thread changes by;
3. ``_starts_kernel``: walks the brackets from the scanned depths and counts (then writes) the '{' that
   open an object one level inside the events array, and the position of the array's closing ']'.

The twin is :mod:`structure_numpy` (the same masks, byte by byte).
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from gpuan.trace.kineto import scanner as sc
from gpuan.trace.kineto.gpu.bits import ALL, ONE
from gpuan.trace.kineto.gpu.scanner_cuda import device_bits

BLOCK_BYTES = 64
ITEMS = 16  # blocks per thread: 1 KiB of JSON
THREADS = 128

_b = device_bits()
_popcount, _tz, _byte_bits, _prefix_xor = _b["popcount64"], _b["trailing_zeros64"], _b["byte_bits"], _b["prefix_xor64"]
_QUOTES = np.uint64(0x2222222222222222)
_BACKSLASHES = np.uint64(0x5C5C5C5C5C5C5C5C)
_OPEN_OBJECTS = np.uint64(0x7B7B7B7B7B7B7B7B)
_OPEN_ARRAYS = np.uint64(0x5B5B5B5B5B5B5B5B)
_CLOSE_OBJECTS = np.uint64(0x7D7D7D7D7D7D7D7D)
_CLOSE_ARRAYS = np.uint64(0x5D5D5D5D5D5D5D5D)
_BACKSLASH, _OPEN_OBJECT = sc.BACKSLASH, sc.OPEN_OBJECT


@cuda.jit(device=True)
def _mask(b64, blk, pattern):
    """The 64 bits of block blk: bit i set where byte blk*64+i equals the byte `pattern` repeats."""
    m = np.uint64(0)
    for k in range(8):
        m |= _byte_bits(b64[blk * 8 + k], pattern) << np.uint64(8 * k)
    return m


@cuda.jit(device=True)
def _escaped_from_before(buf, pos):
    """1 if the byte at pos is escaped by the backslashes just before it (an odd run), else 0."""
    run = 0
    q = pos - 1
    while q >= 0 and buf[q] == _BACKSLASH:
        run += 1
        q -= 1
    return run & 1


@cuda.jit
def _quotes_kernel(buf, b64, nblocks, items, quotes, parity):
    t = cuda.grid(1)
    first = t * items
    if first >= nblocks:
        return
    last = first + items if first + items < nblocks else nblocks
    carry = _escaped_from_before(buf, first * 64)
    par = 0
    for blk in range(first, last):
        backslashes = _mask(b64, blk, _BACKSLASHES)
        escaped = np.uint64(carry)
        carry = 0
        rest = backslashes
        while rest != 0:  # backslashes are rare: walk them one by one
            i = _tz(rest)
            if (escaped >> np.uint64(i)) & ONE == 0:  # a backslash that is not itself escaped
                if i == 63:
                    carry = 1
                else:
                    escaped |= ONE << np.uint64(i + 1)
            rest &= rest - ONE
        q = _mask(b64, blk, _QUOTES) & ~escaped
        quotes[blk] = q
        par ^= _popcount(q) & 1
    parity[t] = par


@cuda.jit
def _brackets_kernel(b64, quotes, in_string_before, nblocks, items, opens, closes, delta):
    t = cuda.grid(1)
    first = t * items
    if first >= nblocks:
        return
    last = first + items if first + items < nblocks else nblocks
    inside = ALL if in_string_before[t] else np.uint64(0)
    d = 0
    for blk in range(first, last):
        # an opening quote and the string's bytes are inside, the closing quote is not
        in_string = _prefix_xor(quotes[blk]) ^ inside
        inside = ALL if in_string >> np.uint64(63) else np.uint64(0)
        o = (_mask(b64, blk, _OPEN_OBJECTS) | _mask(b64, blk, _OPEN_ARRAYS)) & ~in_string
        c = (_mask(b64, blk, _CLOSE_OBJECTS) | _mask(b64, blk, _CLOSE_ARRAYS)) & ~in_string
        opens[blk] = o
        closes[blk] = c
        d += _popcount(o) - _popcount(c)
    delta[t] = d


@cuda.jit
def _starts_kernel(buf, opens, closes, depth_before, nblocks, items, start, level, write, counts, offsets, out, end):
    t = cuda.grid(1)
    first = t * items
    if first >= nblocks:
        return
    last = first + items if first + items < nblocks else nblocks
    d = depth_before[t]
    found = 0
    base = offsets[t] if write else 0
    for blk in range(first, last):
        o = opens[blk]
        rest = o | closes[blk]
        while rest != 0:
            i = _tz(rest)
            pos = blk * 64 + i
            if (o >> np.uint64(i)) & ONE:
                d += 1  # the depth after this bracket
                if d == level + 1 and pos >= start and buf[pos] == _OPEN_OBJECT:
                    if write:
                        out[base + found] = pos
                    found += 1
            else:
                d -= 1
                if d == level - 1 and pos >= start:
                    cuda.atomic.min(end, 0, pos)
            rest &= rest - ONE
    if not write:
        counts[t] = found


def event_starts(xp, buf, n: int, start: int, level: int, *, items: int = ITEMS, threads: int = THREADS):
    """Return (starts, end): the positions of the '{' that open the events of the array whose first byte
    is at `start` (just after its '['), the '[' leaving the nesting depth at `level`; and the position of
    the array's closing ']' (n if it has none). `buf` holds the n bytes of JSON on the device (an array
    of xp: cupy, or numpy in the simulator), padded with spaces to a multiple of 64 bytes."""
    nblocks = buf.size // BLOCK_BYTES
    b64 = buf.view(np.uint64)
    nthreads = max(-(-nblocks // items), 1)
    grid = (-(-nthreads // threads), threads)
    quotes = xp.empty(nblocks, np.uint64)
    parity = xp.zeros(nthreads, np.int64)
    _quotes_kernel[grid](buf, b64, nblocks, items, quotes, parity)
    in_string_before = (xp.cumsum(parity) - parity) & 1
    opens = xp.empty(nblocks, np.uint64)
    closes = xp.empty(nblocks, np.uint64)
    delta = xp.zeros(nthreads, np.int64)
    _brackets_kernel[grid](b64, quotes, in_string_before, nblocks, items, opens, closes, delta)
    depth_before = xp.cumsum(delta) - delta
    counts = xp.zeros(nthreads, np.int64)
    end = xp.full(1, n, np.int64)
    unused = xp.zeros(1, np.int64)  # the offsets and output of the writing pass (no aliases: the simulator copies)
    _starts_kernel[grid](buf, opens, closes, depth_before, nblocks, items, start, level, 0, counts, unused, unused, end)
    offsets = xp.cumsum(counts) - counts
    out = xp.empty(int(counts.sum()), np.int64)
    _starts_kernel[grid](buf, opens, closes, depth_before, nblocks, items, start, level, 1, counts, offsets, out, end)
    end = int(end[0])
    return out[out < end], end
