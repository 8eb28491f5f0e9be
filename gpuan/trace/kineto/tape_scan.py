"""Stage 2 of the CPU scanner: events parsed by jumping along the structural tape of :mod:`structural`.

:func:`scan` has the contract of the byte-walking scanner (``scanner.scan_walk``: same statuses, rows,
resume positions and intern-table order) and shares its value parsers (numbers, integers, strings,
grid/block triples, skipped values), so a field means the same whichever path read it. What the tape
saves is the walking between values: the end of a key, the colon after it, where its value starts and
the comma or brace after it are the next tape entries, not searched for byte by byte.

The fast path only *accepts* events: every position it takes from the tape is the one the byte walker
would have found (only whitespace lies between tape entries), and wherever it meets anything it does not
expect (an empty object, a truncated event, a value of the wrong type, junk after a value, the end of the
tape) it gives up and the byte walker parses that event from its '{' again, deciding the status. Strings
it interned before giving up are the ones the walker interns first anyway, in the same order.

Not used by the reader: measured on a 256 MB trace of ../shared/tools/gen_kineto_trace.py (same process,
alternating, this 2-core machine under load), this scan takes 1.18x (min) to 1.32x (median) the byte
walker's CPU time. The walker's walking is already cheap (SWAR string ends, blanks one or two bytes long);
its cost is in the values (interning, numbers, key dispatch), which both paths share, and stage 1 in
scalar numba adds about 2.4 ns a byte (the tape extraction loop, 3x the SWAR classification). It is kept,
tested against the walker, as the base for a stage 1 in real SIMD.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from gpuan.trace.kineto import scanner as sc
from gpuan.trace.kineto.structural import build_tape

GIVE_UP = -4  # the tape parser leaves this event to the byte walker
#: bytes of the buffer indexed per call past the chunk's end, for the last event that runs over it
MARGIN = 1 << 16
MAX_TAPE_BYTES = 1 << 30  # tape entries are int32 offsets from the call's start


@njit(cache=True, inline="always")
def _after(tape, k, ntok, start, e):
    """The index of the first tape entry at or after position e."""
    while k < ntok and start + tape[k] < e:
        k += 1
    return k


@njit(cache=True, inline="always")
def _separator(buf, tape, k, ntok, start, e, n):
    """After a member's value ends at e: return (index of the next member's key, 0), (index after the
    object's '}', 1), or (GIVE_UP, 0) where anything but blanks and one ',' or '}' follows the value."""
    if e < 0:
        return GIVE_UP, 0
    k = _after(tape, k, ntok, start, e)
    if k >= ntok:
        return GIVE_UP, 0
    t = start + tape[k]
    if sc.skip_ws(buf, e, n) != t:
        return GIVE_UP, 0  # junk between the value and the next token (e.g. "12x")
    c = buf[t]
    if c == sc.COMMA:
        return k + 1, 0
    if c == sc.CLOSE_OBJECT:
        return k + 1, 1
    return GIVE_UP, 0


@njit(cache=True, inline="always")
def _key(buf, b64, tape, k, ntok, start):
    """tape[k] should be a key's opening quote: return (its hash, the value's position, the value's tape
    index), or a position of GIVE_UP when no '"key":' stands there."""
    if k + 3 >= ntok:
        return np.uint64(0), GIVE_UP, k
    a = start + tape[k]
    c = start + tape[k + 2]
    if buf[a] != sc.QUOTE or buf[c] != sc.COLON:
        return np.uint64(0), GIVE_UP, k
    # tape[k + 1] is the closing quote: no token lies inside a string
    return sc._hash_bytes(b64, a + 1, start + tape[k + 1]), start + tape[k + 3], k + 3


@njit(cache=True)
def _args(buf, b64, tape, k, ntok, start, n, o64, o32, row, tkeys, tvals, pool64, uoff, ulen, st):
    """tape[k] is the '{' of an "args" object: parse it into the row as ``scanner._parse_args`` does.
    Returns (end position, next tape index), or a position of GIVE_UP."""
    pos = start + tape[k]
    k += 1
    if k >= ntok:
        return GIVE_UP, k
    if buf[start + tape[k]] == sc.CLOSE_OBJECT:
        return start + tape[k] + 1, k + 1
    while True:
        h, pos, k = _key(buf, b64, tape, k, ntok, start)
        if pos < 0:
            return GIVE_UP, k
        how, col = sc._arg_target(h)
        if how == sc.INT64 or how == sc.INT32:
            v, pos, ok = sc._int_value(buf, b64, pos, n)
            if not ok:
                return GIVE_UP, k
            if how == sc.INT64:
                o64[row, col] = v
            else:
                o32[row, col] = sc._int32(v)
        elif how == sc.TEXT or how == sc.JSON_TEXT:
            sid, pos = sc._string_id(buf, b64, pos, n, how == sc.JSON_TEXT, tkeys, tvals, pool64, uoff, ulen, st)
            if sid == -1:
                return GIVE_UP, k
            o32[row, col] = sid
        elif how == sc.TRIPLE:
            pos = sc._parse_triple(buf, b64, pos, n, o32, col, row)
        else:
            pos = sc.skip_value(buf, b64, pos, n)
        k, closed = _separator(buf, tape, k, ntok, start, pos, n)
        if k < 0:
            return GIVE_UP, k
        if closed:
            return start + tape[k - 1] + 1, k


@njit(cache=True)
def _event(buf, b64, tape, k, ntok, start, n, o64, o32, row, tkeys, tvals, pool64, uoff, ulen, st):
    """tape[k] is an event's '{': parse it into the row as ``scanner._parse_event`` does. Returns (the
    position after its '}', the next tape index), or a position of GIVE_UP."""
    sc._clear_row(o64, o32, row)
    k += 1
    if k >= ntok or buf[start + tape[k]] != sc.QUOTE:
        return GIVE_UP, k  # {} (no phase) or no key: the byte walker says which
    while True:
        h, pos, k = _key(buf, b64, tape, k, ntok, start)
        if pos < 0:
            return GIVE_UP, k
        c = buf[pos]
        col = -1  # the string column this key's value goes to
        if h == sc.K_PH:
            # a string of one character, a phase: its closing quote two bytes on
            if not (c == sc.QUOTE and k + 1 < ntok and start + tape[k + 1] == pos + 2 and sc._is_phase(buf[pos + 1])):
                return GIVE_UP, k
            o32[row, sc.T_PH] = buf[pos + 1]
            pos += 3
        elif h == sc.K_BP:
            e = sc.skip_value(buf, b64, pos, n)
            if c == sc.QUOTE and e > pos + 2:
                o32[row, sc.T_BP] = buf[pos + 1]
            if not (c == sc.QUOTE or c == sc.NULL_START):
                return GIVE_UP, k
            pos = e
        elif h == sc.K_NAME or h == sc.K_CAT:
            if not (c == sc.QUOTE or c == sc.NULL_START):
                return GIVE_UP, k
            col = sc.T_NAME if h == sc.K_NAME else sc.T_CAT
        elif h == sc.K_TS or h == sc.K_DUR:
            if c == sc.MINUS or sc.DIGIT_0 <= c <= sc.DIGIT_9:
                v, pos = sc.parse_ns(buf, b64, pos, n)
                if pos < 0:
                    return GIVE_UP, k
                o64[row, sc.S_TS if h == sc.K_TS else sc.S_DUR] = v
            elif c == sc.NULL_START:
                pos = sc.skip_value(buf, b64, pos, n)  # null: the scratch already holds NULL64
            else:
                return GIVE_UP, k
        elif h == sc.K_PID or h == sc.K_TID:
            if c == sc.QUOTE:
                col = sc.T_PID_STR if h == sc.K_PID else sc.T_TID_STR
            else:
                v, pos, ok = sc._int_value(buf, b64, pos, n)
                if not ok:
                    return GIVE_UP, k
                o64[row, sc.S_PID if h == sc.K_PID else sc.S_TID] = v
        elif h == sc.K_ID:
            o64[row, sc.S_FLOW], pos = sc.parse_int(buf, b64, pos, n)
        elif h == sc.K_ARGS:
            if c != sc.OPEN_OBJECT:
                return GIVE_UP, k  # null, or the wrong type: the byte walker decides
            pos, k = _args(buf, b64, tape, k, ntok, start, n, o64, o32, row, tkeys, tvals, pool64, uoff, ulen, st)
            if pos < 0:
                return GIVE_UP, k
        else:
            pos = sc.skip_value(buf, b64, pos, n)
        if col >= 0:
            sid, pos = sc._string_id(buf, b64, pos, n, False, tkeys, tvals, pool64, uoff, ulen, st)
            if sid == -1:
                return GIVE_UP, k
            o32[row, col] = sid
        k, closed = _separator(buf, tape, k, ntok, start, pos, n)
        if k < 0:
            return GIVE_UP, k
        if closed:
            if o32[row, sc.T_PH] == sc.NULL32:
                return GIVE_UP, k  # no phase
            return start + tape[k - 1] + 1, k


@njit(cache=True, nogil=True)
def scan(buf, pos, end, n, o64, o32, row0, tkeys, tvals, pool64, uoff, ulen, st):
    """Parse the events of the array that start in [pos, end) of buf[:n] into rows row0.. of the scratch:
    the contract of ``scanner.scan_walk`` (its statuses, resume positions and rows, byte for byte), with
    each event read along a structural tape of buf[pos:end + MARGIN] where it can be."""
    cap = o64.shape[0]
    row = row0
    b64 = buf[: (buf.size // 8) * 8].view(np.uint64)
    start = pos
    stop = min(n, max(end, pos) + MARGIN, pos + MAX_TAPE_BYTES)
    tape, ntok, covered = build_tape(buf, start, stop, (stop - start) // 3 + 256)
    k = 0
    while True:
        pos = sc.skip_ws(buf, pos, n)
        if pos < n and buf[pos] == sc.COMMA:
            pos = sc.skip_ws(buf, pos + 1, n)
        if pos >= n:
            return sc.NEED_MORE, pos, row
        if pos >= end:
            return sc.OK_END, pos, row
        c = buf[pos]
        if c == sc.CLOSE_ARRAY:
            return sc.ARRAY_END, pos + 1, row
        if c != sc.OPEN_OBJECT:
            return sc.BAD, pos, row
        if row >= cap:
            return sc.FULL, pos, row
        e = GIVE_UP
        k = _after(tape, k, ntok, start, pos)
        ke = k  # the event's '{' on the tape (when it is there)
        if k < ntok and start + tape[k] == pos and pos < covered:
            e, k = _event(buf, b64, tape, k, ntok, start, n, o64, o32, row, tkeys, tvals, pool64, uoff, ulen, st)
        if e == GIVE_UP:
            e = sc._parse_event(buf, b64, pos, n, o64, o32, row, tkeys, tvals, pool64, uoff, ulen, st)
            if e == -2:
                return sc.GROW, pos, row
            if e == -3:
                return sc.WRONG_TYPE, pos, row
            if e < 0:
                # distinguish an event cut by the buffer end from a malformed one
                if sc.skip_value(buf, b64, pos, n) == -1:
                    return sc.NEED_MORE, pos, row
                return sc.BAD, pos, row
            k = ke
        row += 1
        pos = sc.skip_ws(buf, e, n)
        if pos < n and buf[pos] != sc.COMMA and buf[pos] != sc.CLOSE_ARRAY:
            return sc.BAD, pos, row  # events are separated by commas
