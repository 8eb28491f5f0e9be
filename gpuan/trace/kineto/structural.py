"""Stage 1 of the CPU scanner: a structural index of JSON text (the simdjson idea, in numba).

The bytes are taken 64 at a time (a *block*), one bit each. A first pass classifies every 8-byte word at
once with SWAR compares (quotes, backslashes, the six structural characters, whitespace) into bit masks;
it has no data-dependent branch, so LLVM vectorizes it. A second pass, block by block, works out which
quotes are escaped (odd runs of backslashes, carried across blocks), which bytes lie inside strings (the
prefix XOR of the quotes), and writes the *tape*: the positions of

- every quote that is not escaped (both quotes of a string),
- every ``{ } [ ] : ,`` outside strings,
- the first byte of every run of other bytes outside strings (a number, a literal, or junk),

in order. Between two consecutive tape entries there is only whitespace or the rest of a run that starts
at the first of them, so a parser walking the tape never scans whitespace or string contents byte by
byte: the closing quote of a string, the colon after a key and the separator after a value are the next
entries. :mod:`tape_scan` is that parser.

The index starts at a position known to be outside strings and not escaped (an event start, or the
separators before one), as the scanner's chunks do. The twin for tests is :mod:`gpu.structure_numpy`
(the same quotes and in-string masks, byte by byte). On 16 MB of a generated Kineto trace: classification
about 0.01 s, the tape about 0.03 s more (one entry per 4 bytes of JSON).
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import trailing_zeros

_LOW7 = np.uint64(0x7F7F7F7F7F7F7F7F)
_HIGHS = np.uint64(0x8080808080808080)
_GATHER = np.uint64(0x0002040810204081)  # times a word of high bits: the high bit of byte k lands on bit 56 + k
_S56 = np.uint64(56)
_QUOTES = np.uint64(0x2222222222222222)
_BACKSLASHES = np.uint64(0x5C5C5C5C5C5C5C5C)
_CASE = np.uint64(0x2020202020202020)  # '[' | 0x20 == '{' and ']' | 0x20 == '}'
_OPENS = np.uint64(0x7B7B7B7B7B7B7B7B)
_CLOSES = np.uint64(0x7D7D7D7D7D7D7D7D)
_COLONS = np.uint64(0x3A3A3A3A3A3A3A3A)
_COMMAS = np.uint64(0x2C2C2C2C2C2C2C2C)
_SPACES = np.uint64(0x2020202020202020)
_NEWLINES = np.uint64(0x0A0A0A0A0A0A0A0A)
_RETURNS = np.uint64(0x0D0D0D0D0D0D0D0D)
_TABS = np.uint64(0x0909090909090909)
_ODD_BITS = np.uint64(0xAAAAAAAAAAAAAAAA)
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)
_ONE = np.uint64(1)
_S63 = np.uint64(63)


@njit(cache=True, inline="always")
def _eq(w, pattern):
    """High bit of each byte of w set where the byte equals the byte `pattern` repeats (no carries)."""
    x = w ^ pattern
    return ~(((x & _LOW7) + _LOW7) | x) & _HIGHS


@njit(cache=True, inline="always")
def _bits(highs):
    """The 8 high bits of a word's bytes as the low 8 bits of an integer (byte k -> bit k)."""
    return np.uint8((highs * _GATHER) >> _S56)


@njit(cache=True)
def classify(b64, w0, w1, quotes, backslashes, structurals, blanks):
    """Pass 1: for words w0..w1-1 of the buffer, one byte of bits per word (bit k: byte k of the word) in
    each output array, indexed from w0: quotes, backslashes, ``{}[]:,`` and JSON whitespace."""
    for i in range(w1 - w0):
        w = b64[w0 + i]
        folded = w | _CASE
        quotes[i] = _bits(_eq(w, _QUOTES))
        backslashes[i] = _bits(_eq(w, _BACKSLASHES))
        structurals[i] = _bits(_eq(folded, _OPENS) | _eq(folded, _CLOSES) | _eq(w, _COLONS) | _eq(w, _COMMAS))
        blanks[i] = _bits(_eq(w, _SPACES) | _eq(w, _NEWLINES) | _eq(w, _RETURNS) | _eq(w, _TABS))


@njit(cache=True, inline="always")
def prefix_xor(x):
    """Bit i of the result is the parity of bits 0..i of x."""
    x ^= x << np.uint64(1)
    x ^= x << np.uint64(2)
    x ^= x << np.uint64(4)
    x ^= x << np.uint64(8)
    x ^= x << np.uint64(16)
    x ^= x << np.uint64(32)
    return x


@njit(cache=True, inline="always")
def escaped_bits(backslash, carry):
    """simdjson's escape scanner: return (bits of the bytes escaped by an odd run of backslashes before
    them, the carry into the next block: 1 if its first byte is escaped). `carry` is the previous one."""
    if backslash == 0:
        return np.uint64(carry), 0
    potential = backslash & ~np.uint64(carry)
    # a run of backslashes starting on an even bit ends on an odd one when its length is odd, and the
    # subtraction's carry chain marks the byte just past every run; ODD_BITS fixes the run's parity
    codes = (((potential << _ONE) | _ODD_BITS) - potential) ^ _ODD_BITS
    escaped = codes ^ (backslash | np.uint64(carry))
    escape = codes & backslash
    return escaped, np.int64(escape >> _S63)


@njit(cache=True)
def build_tape(buf, start, stop, cap):
    """Index buf[start:stop] (start outside any string and not escaped; the buffer holds at least 8 bytes
    past stop). Returns (tape, count, covered): the tape's first `count` entries are the positions of its
    tokens (see the module's docstring) minus `start`, in order, as int32; every token before `covered`
    is on the tape, none from `covered` on (covered < stop when the tape, `cap` entries, filled up)."""
    base = start - (start & 63)  # blocks are aligned on 64 bytes of the buffer
    w0 = base >> 3
    w1 = (stop + 7) >> 3
    nw = ((w1 - w0 + 7) >> 3) << 3  # whole blocks of 8 words
    b64 = buf[: (buf.size // 8) * 8].view(np.uint64)
    q8 = np.empty(nw, np.uint8)
    b8 = np.empty(nw, np.uint8)
    s8 = np.empty(nw, np.uint8)
    w8 = np.empty(nw, np.uint8)
    classify(b64, w0, w1, q8, b8, s8, w8)
    for i in range(w1 - w0, nw):  # words past the last one read: no bits
        q8[i] = b8[i] = s8[i] = w8[i] = 0
    q64, bs64, st64, ws64 = q8.view(np.uint64), b8.view(np.uint64), s8.view(np.uint64), w8.view(np.uint64)
    tape = np.empty(cap, np.int32)
    count = 0
    esc = 0  # the first byte of the next block is escaped
    inside = np.uint64(0)  # all ones while a string is open at a block boundary
    run = np.uint64(0)  # 1 if the previous block ended inside a run of other bytes
    for blk in range(nw >> 3):
        at = base + (blk << 6)
        if count + 64 > cap:
            return tape, count, at
        valid = _ALL
        if at < start:
            valid &= _ALL << np.uint64(start - at)
        if at + 64 > stop:
            valid &= (_ONE << np.uint64(stop - at)) - _ONE if stop > at else np.uint64(0)
        escaped, esc = escaped_bits(bs64[blk] & valid, esc)
        quote = q64[blk] & valid & ~escaped
        in_string = prefix_xor(quote) ^ inside  # an opening quote is inside, its closing quote is not
        inside = _ALL if in_string >> _S63 else np.uint64(0)
        struct = st64[blk] & valid & ~in_string
        other = valid & ~(q64[blk] | st64[blk] | ws64[blk]) & ~in_string
        starts = other & ~((other << _ONE) | run)
        run = other >> _S63
        tokens = quote | struct | starts
        rel = at - start
        while tokens != 0:
            tape[count] = rel + trailing_zeros(tokens)
            count += 1
            tokens &= tokens - _ONE
    return tape, count, stop
