"""A compiled scanner for Chrome-trace / Kineto JSON, specialised for trace events.

The scanner walks the bytes of the ``traceEvents`` array once and writes each event's fields straight into
integer scratch columns; it never creates Python objects. Strings (names, categories, shape lists) are
interned on the fly into a per-thread hash table whose entries are verified byte for byte, so equal
strings get equal ids and different strings never share one. ``reader.py`` drives it block by block and
in parallel and turns the scratch columns into Arrow.

Only the keys that gpuan's analyses need are extracted (see ``F64``/``F32``); all other values are
skipped structurally.

Every function on the path of a key or a byte is compiled with ``forceinline=True``: LLVM's
``alwaysinline``, so that it is inlined into its caller when the machine code is built. numba's own
``inline="always"`` (which the scanner used before) inlines the callee's IR and types it again at every call
site: the first compile of ``scan`` took 26.9 s that way and takes 9.6-10.2 s now
(bench/results/compile-2026-11-29-forceinline-info-2c-amd-epyc.md), and the scan is faster
(bench/results/scan-2026-11-29-forceinline-2c-amd-epyc.md), since LLVM inlines every helper, not only those
numba's inlining could afford. numba passes ``forceinline`` on to the functions a compile calls unless they
set it, so ``_jit`` always sets it: False for the cold ``_exponent_ns`` and for the functions the reader
calls to scan, collect and grow (``scan``, ``drain``, ``array_end``, ``find_chunk_start``, ``rehash``, ...);
a helper the reader also calls from Python (``skip_value``, ``skip_ws``) runs through numba's wrapper there
as any compiled function does.
``_string_id``'s ``raw`` flag is never a literal: numba would compile one copy per literal value.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import trailing_zeros


def _jit(forceinline: bool = False, **options):
    """numba's njit as the scanner compiles with it: cached on disk, without numba's reference counting, and
    ``forceinline`` always said (numba would otherwise take the calling function's; see the module's doc).

    The scanner allocates nothing: every array it touches is the caller's and outlives the call. With
    reference counting on, numba brackets the inlined helpers and calls with increments and decrements of
    each array argument's count that its pruning pass cannot prove redundant (131 call sites of out-of-line
    atomic calls in _parse_event's machine code): without them a scan needs 55-57% of the CPU it needed
    (bench/results/scan-2026-11-28-2c-amd-epyc.md). ``_nrt=False`` is numba's option for code that needs no
    runtime; a function that allocated an array would fail to compile under it, not misbehave."""
    return njit(cache=True, _nrt=False, forceinline=forceinline, **options)


NULL64 = np.iinfo(np.int64).min
NULL32 = np.iinfo(np.int32).min

MAX_US = (2**63 - 1) // 1000  # the most whole microseconds int64 nanoseconds hold
MAX_INT_DIGITS = 18  # an integer of more digits may not fit int64: such a value is out of range

# Scanner status codes.
OK_END = 0  # the next event starts at or after `end`
ARRAY_END = 1  # the closing ']' of the events array was reached; pos is just after it
GROW = 2  # the intern table or its pool is full: grow them and call again from pos
FULL = 3  # the scratch columns are full: drain them and call again from pos
NEED_MORE = 4  # an event runs past the end of the buffer: read more bytes and call again from pos
WRONG_TYPE = 5  # the event at pos has a field of the wrong type; its value starts at the row's "bad_at"
BAD = -1  # malformed JSON at pos

# 64-bit scratch fields.
F64 = (
    "ts", "dur", "pid", "tid", "correlation", "external_id", "flow_id", "stream", "shared_memory",
    "bytes", "in_msg_nelems", "out_msg_nelems", "seq", "fwd_tid", "sort_index", "bad_at", "written",
)  # fmt: skip
# 32-bit scratch fields: single characters, small numbers and string ids.
F32 = (
    "ph", "bp", "cat", "name", "pid_str", "tid_str", "device", "grid_x", "grid_y", "grid_z",
    "block_x", "block_y", "block_z", "registers", "group_size", "collective", "dtype", "pg_name",
    "pg_ranks", "input_dims", "input_types", "concrete_inputs", "arg_name", "arg_labels", "arg_kind",
    "peer", "mem_device", "mem_device_type",
)  # fmt: skip
I64 = {n: i for i, n in enumerate(F64)}
I32 = {n: i for i, n in enumerate(F32)}

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)


def key_hash(key: str) -> int:
    """Return the scanner's 64-bit hash of a JSON object key: the same function as _hash_bytes, in
    Python, over the key's UTF-8 bytes as they appear between the quotes."""
    data = key.encode()
    mask = (1 << 64) - 1
    h = 0xCBF29CE484222325
    p = 0
    while p + 8 <= len(data):
        h = ((h ^ int.from_bytes(data[p : p + 8], "little")) * 0x100000001B3) & mask
        h ^= h >> 29
        p += 8
    if p < len(data):
        h = ((h ^ int.from_bytes(data[p:], "little")) * 0x100000001B3) & mask
    h = ((h ^ len(data)) * 0x100000001B3) & mask
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) & mask
    h ^= h >> 33
    return h


# Keys of an event object.
K_PH = np.uint64(key_hash("ph"))
K_CAT = np.uint64(key_hash("cat"))
K_NAME = np.uint64(key_hash("name"))
K_PID = np.uint64(key_hash("pid"))
K_TID = np.uint64(key_hash("tid"))
K_TS = np.uint64(key_hash("ts"))
K_DUR = np.uint64(key_hash("dur"))
K_ID = np.uint64(key_hash("id"))
K_BP = np.uint64(key_hash("bp"))
K_ARGS = np.uint64(key_hash("args"))
K_TRACE_EVENTS = np.uint64(key_hash("traceEvents"))

# Scratch indices as plain ints so numba folds them into constants.
S_TS, S_DUR, S_PID, S_TID, S_CORR, S_EXT, S_FLOW, S_STREAM, S_SHMEM, S_BYTES = range(10)
S_IN_N, S_OUT_N, S_SEQ, S_FWD, S_SORT, S_BAD, S_WRITTEN = range(10, 17)
#: a row's "written" field has bit c set once 64-bit field c was written, bit T_BIT0 + c for 32-bit field c
T_BIT0 = 32
T_PH, T_BP, T_CAT, T_NAME, T_PID_STR, T_TID_STR, T_DEVICE = range(7)
T_GRID, T_BLOCK = 7, 10
T_REGS, T_GROUP, T_COLL, T_DTYPE, T_PG_NAME, T_PG_RANKS = range(13, 19)
T_IN_DIMS, T_IN_TYPES, T_CONCRETE, T_ARG_NAME, T_ARG_LABELS, T_ARG_KIND, T_PEER = range(19, 26)
T_MEM_DEV, T_MEM_DEV_TYPE = 26, 27

# Intern-table state slots.
ST_UNIQUE, ST_POOL = 0, 1

# The bytes JSON is made of, by name: numba folds module-level ints into constants, as if written as numbers.
QUOTE, BACKSLASH = ord('"'), ord("\\")
COMMA, COLON = ord(","), ord(":")
OPEN_OBJECT, CLOSE_OBJECT = ord("{"), ord("}")
OPEN_ARRAY, CLOSE_ARRAY = ord("["), ord("]")
SPACE, TAB, NEWLINE, RETURN = ord(" "), ord("\t"), ord("\n"), ord("\r")
MINUS, PLUS, POINT = ord("-"), ord("+"), ord(".")
DIGIT_0, DIGIT_5, DIGIT_9 = ord("0"), ord("5"), ord("9")
EXP_LOWER, EXP_UPPER = ord("e"), ord("E")
HEX_X_LOWER, HEX_X_UPPER = ord("x"), ord("X")  # the x of a "0x1f" string
LOWER_A, LOWER_F, LOWER_Z = ord("a"), ord("f"), ord("z")
UPPER_A, UPPER_F, UPPER_Z = ord("A"), ord("F"), ord("Z")
NULL_START = ord("n")  # no other JSON value starts with n
UTF8_BOM = (0xEF, 0xBB, 0xBF)

# Event phases ("ph") of the Chrome trace format, the context phases ( and ) included.
PHASES = "BEXiICbneSTpFstfPONDMVvRc()"
IS_PHASE = np.zeros(256, np.bool_)
IS_PHASE[[ord(p) for p in PHASES]] = True
PH_FLOW_START, PH_FLOW_STEP, PH_FLOW_END = ord("s"), ord("t"), ord("f")
PH_METADATA = ord("M")

# What skip_ws and skip_value do with each byte, as one table lookup rather than a chain of compares (the
# chains cost about 10 cycles a byte on the numbers and blanks that make up most of what is skipped).
C_OTHER, C_VALUE, C_BLANK, C_QUOTE, C_OPEN, C_CLOSE, C_COMMA, C_COLON = range(8)
BYTE_CLASS = np.zeros(256, np.uint8)  # C_OTHER: no JSON value holds this byte outside strings
BYTE_CLASS[[ord(c) for c in "0123456789+-."]] = C_VALUE
BYTE_CLASS[LOWER_A : LOWER_Z + 1] = C_VALUE  # literals (true, false, null; NaN, Infinity: rejected later)
BYTE_CLASS[UPPER_A : UPPER_Z + 1] = C_VALUE
BYTE_CLASS[[SPACE, TAB, NEWLINE, RETURN]] = C_BLANK
BYTE_CLASS[QUOTE] = C_QUOTE
BYTE_CLASS[[OPEN_OBJECT, OPEN_ARRAY]] = C_OPEN
BYTE_CLASS[[CLOSE_OBJECT, CLOSE_ARRAY]] = C_CLOSE
BYTE_CLASS[COMMA] = C_COMMA
BYTE_CLASS[COLON] = C_COLON


@_jit(forceinline=True)
def _is_ws(c):
    return BYTE_CLASS[c] == C_BLANK


@_jit(forceinline=True)
def skip_ws(buf, pos, n):
    """Return the first position at or after pos that is not JSON whitespace (n if none)."""
    while pos < n and _is_ws(buf[pos]):
        pos += 1
    return pos


@_jit(forceinline=True)
def _load8(b64, p):
    """The 8 bytes at byte position p as a little-endian word (buffers have 8 bytes of slack)."""
    q = p >> 3
    sh = np.uint64((p & 7) * 8)
    lo = b64[q]
    if sh == 0:
        return lo
    return (lo >> sh) | (b64[q + 1] << (np.uint64(64) - sh))


_ONES = np.uint64(0x0101010101010101)
_HIGHS = np.uint64(0x8080808080808080)
_QUOTES = np.uint64(0x2222222222222222)
_BACKSLASHES = np.uint64(0x5C5C5C5C5C5C5C5C)
_SPACES = np.uint64(0x2020202020202020)


@_jit(forceinline=True)
def _zero_bytes(x):
    """High bit set in each byte of x that is zero (exact for the lowest such byte)."""
    return (x - _ONES) & ~x & _HIGHS


@_jit(forceinline=True)
def string_end(buf, b64, pos, n):
    """pos is just after an opening quote; return the position of the closing quote, or -1.

    Eight bytes at a time: a word with no quote and no backslash is skipped whole."""
    while pos + 8 <= n:
        w = _load8(b64, pos)
        hits = _zero_bytes(w ^ _QUOTES) | _zero_bytes(w ^ _BACKSLASHES)
        if hits == 0:
            pos += 8
            continue
        pos += trailing_zeros(hits) >> 3
        if buf[pos] == QUOTE:
            return pos
        pos += 2
    while pos < n:
        c = buf[pos]
        if c == QUOTE:
            return pos
        if c == BACKSLASH:
            pos += 2
        else:
            pos += 1
    return -1


@_jit(forceinline=True)
def _skip_spaces(b64, pos, n):
    """Return the first position at or after pos that is not a space, passing eight bytes at a time (the
    indentation of a pretty-printed line); where the spaces run into the last 7 bytes before n, a position
    there, from which a byte-by-byte walk goes on."""
    while pos + 8 <= n:
        x = _load8(b64, pos) ^ _SPACES
        if x != 0:
            return pos + np.int64(trailing_zeros(x) >> 3)
        pos += 8
    return pos


@_jit(forceinline=True)
def _is_bracket(c):
    return c == OPEN_OBJECT or c == OPEN_ARRAY or c == CLOSE_OBJECT or c == CLOSE_ARRAY


@_jit(forceinline=True)
def _nested(c, depth):
    """Return the nesting depth after the bracket c (outside strings): one deeper after an opening one."""
    return depth + 1 if c == OPEN_OBJECT or c == OPEN_ARRAY else depth - 1


@_jit(forceinline=True)
def skip_value(buf, b64, pos, n):
    """Return the position just after the JSON value starting at pos, -1 if it runs past n, -2 if a byte
    outside its strings is one no JSON value holds there (the insides of strings are not checked, nor the
    order of the tokens in objects and arrays)."""
    k = BYTE_CLASS[buf[pos]]
    if k == C_QUOTE:
        e = string_end(buf, b64, pos + 1, n)
        return -1 if e < 0 else e + 1
    if k == C_OPEN:
        depth = 0
        while pos < n:
            k = BYTE_CLASS[buf[pos]]
            if k == C_QUOTE:
                e = string_end(buf, b64, pos + 1, n)
                if e < 0:
                    return -1
                pos = e + 1
                continue
            if k == C_OPEN:
                depth += 1
            elif k == C_CLOSE:
                depth -= 1
                if depth == 0:
                    return pos + 1
            elif k == C_BLANK and buf[pos] == NEWLINE:
                # a nested value laid out over lines (json.dump's indent: "Input Dims" of 20-40 lines);
                # only after a newline, where the one space after a comma or colon would pay for the word
                pos = _skip_spaces(b64, pos + 1, n)
                continue
            elif k == C_OTHER:
                return -2
            pos += 1
        return -1
    # number or literal: runs to the next delimiter, through the bytes numbers and literals are made of
    while pos < n:
        k = BYTE_CLASS[buf[pos]]
        if k != C_VALUE:
            if k == C_COMMA or k == C_CLOSE or k == C_BLANK:
                return pos
            return -2  # no JSON value has this byte here
        pos += 1
    return -1


@_jit(forceinline=True)
def _mix(h, w):
    """One 8-byte word into the hash."""
    h = (h ^ w) * _FNV_PRIME
    return h ^ (h >> np.uint64(29))


@_jit(forceinline=True)
def _tail(w, k):
    """The first k (1 to 7) bytes of the word w."""
    return w & ((np.uint64(1) << np.uint64(8 * k)) - np.uint64(1))


@_jit(forceinline=True)
def _finish(h, length):
    """The hash of bytes whose whole words and tail went into h: their length in, then an avalanche."""
    h = (h ^ np.uint64(length)) * _FNV_PRIME
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xFF51AFD7ED558CCD)
    return h ^ (h >> np.uint64(33))


@_jit(forceinline=True)
def _hash_bytes(b64, a, b):
    """64-bit hash of bytes [a, b): a multiply per 8-byte word (the last one's bytes past b masked off),
    then the length and a final avalanche."""
    h = _FNV_OFFSET
    p = a
    while p + 8 <= b:
        h = _mix(h, _load8(b64, p))
        p += 8
    if p < b:
        h = (h ^ _tail(_load8(b64, p), b - p)) * _FNV_PRIME
    return _finish(h, b - a)


@_jit(forceinline=True)
def string_end_hash(buf, b64, pos, n):
    """pos is just after an opening quote; return (the position of the closing quote, or -1; the
    _hash_bytes of the string's bytes): string_end and the hash in one pass over the words, where the
    string has no backslash (with one, the hash is taken again over the string once its end is known)."""
    a = pos
    h = _FNV_OFFSET
    while pos + 8 <= n:
        w = _load8(b64, pos)
        hits = _zero_bytes(w ^ _QUOTES) | _zero_bytes(w ^ _BACKSLASHES)
        if hits == 0:
            h = _mix(h, w)
            pos += 8
            continue
        k = trailing_zeros(hits) >> 3
        if buf[pos + k] != QUOTE:
            break  # a backslash
        if k:
            h = (h ^ _tail(w, k)) * _FNV_PRIME
        return pos + k, _finish(h, pos + k - a)
    e = string_end(buf, b64, pos, n)
    return e, _hash_bytes(b64, a, e) if e >= 0 else np.uint64(0)


@_jit(forceinline=True)
def _same_bytes(b64, a, pool64, o, ln):
    """Whether bytes [a, a+ln) of the buffer equal bytes [o, o+ln) of the pool."""
    i = 0
    while i + 8 <= ln:
        if _load8(b64, a + i) != _load8(pool64, o + i):
            return False
        i += 8
    if i < ln:
        mask = (np.uint64(1) << np.uint64(8 * (ln - i))) - np.uint64(1)
        if (_load8(b64, a + i) ^ _load8(pool64, o + i)) & mask:
            return False
    return True


@_jit(forceinline=True)
def _put_bytes(pool64, o, buf, a, ln):
    """Copy buf[a:a+ln] to bytes [o, o+ln) of the word array pool64, byte by byte (new strings only). Not
    through a byte view of pool64: a view's error path would make loading every cached scanner function
    import numba's unicode support (0.1-0.2 s of each command)."""
    for i in range(ln):
        p = o + i
        q = p >> 3
        sh = np.uint64((p & 7) * 8)
        pool64[q] = (pool64[q] & ~(np.uint64(0xFF) << sh)) | (np.uint64(buf[a + i]) << sh)


@_jit(forceinline=True)
def intern(buf, b64, a, b, h, tkeys, tvals, pool64, uoff, ulen, st):
    """Return the id of the bytes buf[a:b] (their _hash_bytes: h) in the intern table, adding them if new;
    -1 if full."""
    mask = tkeys.shape[0] - 1
    slot = np.int64(h & np.uint64(mask))
    ln = b - a
    while True:
        v = tvals[slot]
        if v < 0:
            break
        if tkeys[slot] == h and ulen[v] == ln and _same_bytes(b64, a, pool64, uoff[v], ln):
            return v
        slot = (slot + 1) & mask
    nu = st[ST_UNIQUE]
    used = st[ST_POOL]
    if nu >= uoff.shape[0] or used + ln + 16 > pool64.shape[0] * 8 or 2 * (nu + 1) > tkeys.shape[0]:
        return -1
    _put_bytes(pool64, used, buf, a, ln)
    uoff[nu] = used
    ulen[nu] = ln
    tkeys[slot] = h
    tvals[slot] = nu
    st[ST_UNIQUE] = nu + 1
    st[ST_POOL] = used + ln
    return nu


@_jit()
def rehash(tkeys, tvals, pool64, uoff, ulen, n_unique):
    """Fill a fresh (larger) table from the interned strings already in the pool."""
    tvals[:] = -1
    mask = tkeys.shape[0] - 1
    for v in range(n_unique):
        h = _hash_bytes(pool64, uoff[v], uoff[v] + ulen[v])
        slot = np.int64(h & np.uint64(mask))
        while tvals[slot] >= 0:
            slot = (slot + 1) & mask
        tkeys[slot] = h
        tvals[slot] = v


@_jit()
def _exponent_ns(buf, start, epos, n):
    """The digits of a number start at `start` and its 'e' is at `epos`: return (|value| in ns, end).

    Integer arithmetic on up to 18 significant digits, rounded half up, so the result is exact."""
    mant = np.int64(0)
    scale = 0  # value = mant * 10**scale microseconds
    sig = 0
    round_up = False
    seen_point = False
    for i in range(start, epos):
        c = buf[i]
        if c == POINT:
            seen_point = True
            continue
        if sig < 18:
            if mant > 0 or c != DIGIT_0:
                sig += 1
            mant = mant * 10 + (c - DIGIT_0)
            if seen_point:
                scale -= 1
        elif not seen_point:
            scale += 1  # a digit beyond what int64 holds, before the point: a power of ten
            if sig == 18:
                round_up = c >= DIGIT_5
                sig += 1
        elif sig == 18:
            round_up = c >= DIGIT_5
            sig += 1
    if round_up:
        mant += 1
    pos = epos + 1
    eneg = False
    if pos < n and (buf[pos] == MINUS or buf[pos] == PLUS):
        eneg = buf[pos] == MINUS
        pos += 1
    e = 0
    while pos < n and DIGIT_0 <= buf[pos] <= DIGIT_9:
        # int64 before the subtraction: a uint8 difference would wrap where numpy interprets this (the
        # CUDA simulator runs the GPU reader's copy of these functions as Python)
        e = e * 10 + (np.int64(buf[pos]) - DIGIT_0)
        if e > 10_000:  # (not min(): numba-CUDA's min is not a device function here)
            e = 10_000
        pos += 1
    if pos >= n:
        return np.int64(0), -1
    k = scale + (-e if eneg else e) + 3  # to nanoseconds
    if k >= 0:
        for _ in range(k):
            if mant > 922337203685477580:
                return np.int64(0), -1  # beyond int64 nanoseconds: not a time
            mant *= 10
        return mant, pos
    if k < -18:
        return np.int64(0), pos
    div = np.int64(1)
    for _ in range(-k):
        div *= 10
    return (mant + div // 2) // div, pos


@_jit(forceinline=True)
def parse_ns(buf, b64, pos, n):
    """Parse a JSON number of microseconds at pos into integer nanoseconds.

    Exact for the usual forms (digits after the point beyond the third round half up) and for
    exponent notation. Returns (value, end position); end is -1 if the number runs past n or is not a
    number."""
    neg = False
    if pos < n and buf[pos] == MINUS:
        neg = True
        pos += 1
    digits_start = pos
    ip = np.int64(0)
    nd = 0
    while pos < n and DIGIT_0 <= buf[pos] <= DIGIT_9:
        ip = ip * 10 + (buf[pos] - DIGIT_0)
        pos += 1
        nd += 1
    frac = np.int64(0)
    fd = 0
    round_up = False
    if pos < n and buf[pos] == POINT:
        pos += 1
        while pos < n and DIGIT_0 <= buf[pos] <= DIGIT_9:
            d = buf[pos] - DIGIT_0
            if fd < 3:
                frac = frac * 10 + d
            elif fd == 3:
                round_up = d >= 5
            fd += 1
            pos += 1
    if pos >= n:
        return np.int64(0), -1
    if buf[pos] == EXP_LOWER or buf[pos] == EXP_UPPER:
        v, pos = _exponent_ns(buf, digits_start, pos, n)
        return (-v if neg else v), pos
    if (nd == 0 and fd == 0) or nd > 16 or ip > MAX_US:  # MAX_US has 16 digits: more may have wrapped
        return np.int64(0), -1  # not a number, or beyond int64 nanoseconds (the digits may have wrapped)
    for _ in range(fd, 3):
        frac *= 10
    v = ip * 1000 + frac + (1 if round_up else 0)
    return (-v if neg else v), pos


@_jit(forceinline=True)
def _time_value(buf, b64, pos, n):
    """Parse a ts/dur value: a JSON number, or null (missing: NULL64). Returns (value, end, ok): ok is
    False for any other value (a string, NaN, true) and for a number beyond int64 nanoseconds."""
    c = buf[pos]
    if c == MINUS or DIGIT_0 <= c <= DIGIT_9:
        v, end = parse_ns(buf, b64, pos, n)
        if end >= 0:
            return v, end, True
        # the token's own end (skipped only here: walking every time twice costs ~10% of a scan)
        e = skip_value(buf, b64, pos, n)
        if e >= 0:
            return NULL64, e, False  # a whole token that is no time: "-", or out of range
        return v, end, True
    return NULL64, skip_value(buf, b64, pos, n), c == NULL_START  # null


@_jit(forceinline=True)
def parse_int(buf, b64, pos, n):
    """Parse an integer value at pos: a JSON number (fraction dropped), or a string holding a decimal
    or 0x-hex number. Returns (value or NULL64, end position or -1)."""
    c = buf[pos]
    if c == QUOTE:
        e = string_end(buf, b64, pos + 1, n)
        if e < 0:
            return NULL64, -1
        a = pos + 1
        neg = False
        if a < e and buf[a] == MINUS:
            neg = True
            a += 1
        v = np.int64(0)
        if e - a > 2 and buf[a] == DIGIT_0 and (buf[a + 1] == HEX_X_LOWER or buf[a + 1] == HEX_X_UPPER):
            for i in range(a + 2, e):
                d = buf[i]
                if DIGIT_0 <= d <= DIGIT_9:
                    v = v * 16 + (d - DIGIT_0)
                elif LOWER_A <= d <= LOWER_F:
                    v = v * 16 + (d - LOWER_A + 10)
                elif UPPER_A <= d <= UPPER_F:
                    v = v * 16 + (d - UPPER_A + 10)
                else:
                    return NULL64, e + 1
        else:
            if a == e or e - a > MAX_INT_DIGITS:
                return NULL64, e + 1
            for i in range(a, e):
                d = buf[i]
                if DIGIT_0 <= d <= DIGIT_9:
                    v = v * 10 + (d - DIGIT_0)
                else:
                    return NULL64, e + 1
        return (-v if neg else v), e + 1
    if c == MINUS or DIGIT_0 <= c <= DIGIT_9:
        neg = c == MINUS
        if neg:
            pos += 1
        v = np.int64(0)
        start = pos
        while pos < n and DIGIT_0 <= buf[pos] <= DIGIT_9:
            v = v * 10 + (buf[pos] - DIGIT_0)
            pos += 1
        digits = pos - start
        pos = _number_rest(buf, pos, n)  # a fraction or exponent is dropped; anything else ends the value
        if digits == 0 or digits > MAX_INT_DIGITS:
            return NULL64, pos
        return (-v if neg else v), pos
    return NULL64, skip_value(buf, b64, pos, n)


@_jit(forceinline=True)
def _number_rest(buf, pos, n):
    """Return the position after the fraction and exponent (if any) of a number whose integer digits end
    at pos, or -1 when the buffer ends first."""
    if pos < n and buf[pos] == POINT:
        pos += 1
        while pos < n and DIGIT_0 <= buf[pos] <= DIGIT_9:
            pos += 1
    if pos < n and (buf[pos] == EXP_LOWER or buf[pos] == EXP_UPPER):
        pos += 1
        if pos < n and (buf[pos] == PLUS or buf[pos] == MINUS):
            pos += 1
        while pos < n and DIGIT_0 <= buf[pos] <= DIGIT_9:
            pos += 1
    return pos if pos < n else -1


@_jit(forceinline=True)
def _int_value(buf, b64, pos, n):
    """Parse an integer-valued field: a JSON number, a string holding a decimal or 0x-hex integer, or
    null. Returns (value or NULL64, end or -1, ok): ok is False for any other value."""
    c = buf[pos]
    v, e = parse_int(buf, b64, pos, n)
    if e < 0:
        return v, e, True
    if c == MINUS or DIGIT_0 <= c <= DIGIT_9:
        return v, e, v != NULL64  # NULL64: no digits, or more than int64 holds
    if c == QUOTE:
        return v, e, v != NULL64
    return v, e, c == NULL_START


@_jit(forceinline=True)
def _int32(v):
    if v == NULL64 or v > 2147483647 or v < -2147483647:
        return NULL32
    return np.int32(v)


@_jit(forceinline=True)
def _parse_triple(buf, b64, pos, n, o32, col, row):
    """Parse an array of up to three integers (grid/block) into o32[row, col:col+3]. Returns the end
    position, -1 on error or truncation, -3 (the value's position in o32 is not needed: the caller
    knows it) when the value is neither such an array, nor null, nor a string (Triton's launcher records
    its grid as text, e.g. "grid(100,)", on the cpu_op)."""
    c = buf[pos]
    if c != OPEN_ARRAY:
        e = skip_value(buf, b64, pos, n)
        return e if e < 0 or c == QUOTE or c == NULL_START else -3
    pos += 1
    k = 0
    while True:
        pos = skip_ws(buf, pos, n)
        if pos >= n:
            return -1
        if buf[pos] == CLOSE_ARRAY:
            return pos + 1
        v, pos, ok = _int_value(buf, b64, pos, n)
        if pos < 0:
            return -1
        if not ok:
            return -3
        if k < 3:
            o32[row, col + k] = _int32(v)
        k += 1
        pos = skip_ws(buf, pos, n)
        if pos < n and buf[pos] == COMMA:
            pos += 1


@_jit(forceinline=True)
def _string_id(buf, b64, pos, n, raw, tkeys, tvals, pool64, uoff, ulen, st):
    """Intern the value at pos. A string is interned without its quotes; with raw=True any JSON value
    is interned as its text. Returns (id, end), id -1 when the table is full, NULL32 for null/non-string."""
    if buf[pos] == QUOTE:
        e, h = string_end_hash(buf, b64, pos + 1, n)
        if e < 0:
            return NULL32, -1
        sid = intern(buf, b64, pos + 1, e, h, tkeys, tvals, pool64, uoff, ulen, st)
        return sid, e + 1
    e = skip_value(buf, b64, pos, n)
    if e < 0:
        return NULL32, -1
    if raw and buf[pos] != NULL_START:  # anything but null
        sid = intern(buf, b64, pos, e, _hash_bytes(b64, pos, e), tkeys, tvals, pool64, uoff, ulen, st)
        return sid, e
    return NULL32, e


@_jit(forceinline=True)
def _parse_key(buf, b64, pos, n):
    """pos is at an opening quote; return (hash of the key, position after the ':' and whitespace)."""
    e, h = string_end_hash(buf, b64, pos + 1, n)
    if e < 0:
        return np.uint64(0), -1
    p = skip_ws(buf, e + 1, n)
    if p >= n or buf[p] != COLON:
        return h, -1
    return h, skip_ws(buf, p + 1, n)


@_jit(forceinline=True)
def _member_key(buf, b64, pos, n):
    """pos is where an object's next member should start: return (hash of its key, position of its value),
    or (a hash, -1) where no well-formed key stands there or its value would start past the buffer."""
    if buf[pos] != QUOTE:
        return np.uint64(0), -1
    h, pos = _parse_key(buf, b64, pos, n)
    if pos < 0 or pos >= n:
        return h, -1
    return h, pos


# How an "args" value is kept (see _arg_target).
SKIP, INT64, INT32, TEXT, JSON_TEXT, TRIPLE = range(6)


# The args keys gpuan reads: (key, how its value is kept, its scratch column). PyTorch names the other side
# of a send/recv "Dst Rank"/"Src Rank" (record_param_comms); [memory] events name the framework's device
# ("Device Id", "Device Type"): evidence for ROCm's agent numbering.
ARG_FIELDS = (
    ("correlation", INT64, S_CORR), ("External id", INT64, S_EXT), ("stream", INT64, S_STREAM),
    ("shared memory", INT64, S_SHMEM), ("bytes", INT64, S_BYTES), ("In msg nelems", INT64, S_IN_N),
    ("Out msg nelems", INT64, S_OUT_N), ("Sequence number", INT64, S_SEQ), ("Fwd thread id", INT64, S_FWD),
    ("sort_index", INT64, S_SORT), ("device", INT32, T_DEVICE), ("registers per thread", INT32, T_REGS),
    ("Group size", INT32, T_GROUP), ("Dst Rank", INT32, T_PEER), ("Src Rank", INT32, T_PEER),
    ("Device Id", INT32, T_MEM_DEV), ("Device Type", INT32, T_MEM_DEV_TYPE), ("grid", TRIPLE, T_GRID),
    ("block", TRIPLE, T_BLOCK), ("Collective name", TEXT, T_COLL), ("dtype", TEXT, T_DTYPE),
    ("Process Group Name", TEXT, T_PG_NAME), ("name", TEXT, T_ARG_NAME), ("labels", TEXT, T_ARG_LABELS),
    ("Process Group Ranks", JSON_TEXT, T_PG_RANKS), ("Input Dims", JSON_TEXT, T_IN_DIMS),
    ("Input type", JSON_TEXT, T_IN_TYPES), ("Concrete Inputs", JSON_TEXT, T_CONCRETE),
    ("kind", JSON_TEXT, T_ARG_KIND),
)  # fmt: skip


def _arg_slots(bits: int = 7) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """Return (shift, hashes, hows, columns): a table of 2**bits slots that holds each of ARG_FIELDS at slot
    (key hash >> shift) % 2**bits, the first shift that gives every key a slot of its own (SKIP elsewhere)."""
    hashes = [key_hash(key) for key, _, _ in ARG_FIELDS]
    mask = (1 << bits) - 1
    shift = next((s for s in range(64 - bits + 1) if len({(h >> s) & mask for h in hashes}) == len(hashes)), None)
    if shift is None:
        raise ValueError(f"no {bits} bits of the args keys' hashes tell all {len(hashes)} keys apart: use more bits")
    keys, hows, cols = np.zeros(mask + 1, np.uint64), np.full(mask + 1, SKIP, np.int64), np.zeros(mask + 1, np.int64)
    for h, (_, how, col) in zip(hashes, ARG_FIELDS):
        slot = (h >> shift) & mask
        keys[slot], hows[slot], cols[slot] = h, how, col
    return shift, keys, hows, cols


_ARG_SHIFT, ARG_KEYS, ARG_HOWS, ARG_COLS = _arg_slots()
_ARG_SHIFT_U, _ARG_MASK = np.uint64(_ARG_SHIFT), np.uint64(ARG_KEYS.size - 1)


@_jit(forceinline=True)
def _arg_target(h):
    """Return (how, scratch column) for the value of the args key with hash h: one table lookup, not a compare
    per key read (most keys of real traces' args are skipped: "Ev Idx", "Python id", "Input Strides", ...)."""
    slot = np.int64((h >> _ARG_SHIFT_U) & _ARG_MASK)
    if ARG_KEYS[slot] == h:
        return ARG_HOWS[slot], ARG_COLS[slot]
    return SKIP, np.int64(0)


@_jit(forceinline=True)
def _next_member(buf, pos, n):
    """After a member's value ends at `pos` (-1: it was malformed): return (the next member's position, 0),
    or (just past the object's closing brace, 1), or (-1, 0) for malformed JSON or the end of the buffer."""
    if pos < 0:
        return -1, 0
    pos = skip_ws(buf, pos, n)
    if pos >= n:
        return -1, 0
    c = buf[pos]
    if c == COMMA:
        return skip_ws(buf, pos + 1, n), 0
    if c == CLOSE_OBJECT:
        return pos + 1, 1
    return -1, 0


@_jit(forceinline=True)
def _parse_args(buf, b64, pos, n, o64, o32, row, tkeys, tvals, pool64, uoff, ulen, st):
    """Parse an "args" object at pos into the row; returns the end position, -1 on error or truncation,
    -2 when the intern table is full, -3 when a value gpuan reads has the wrong type (its position in
    the row's S_BAD)."""
    if buf[pos] != OPEN_OBJECT:
        e = skip_value(buf, b64, pos, n)
        if e >= 0 and buf[pos] != NULL_START:
            o64[row, S_BAD] = pos
            return -3
        return e if e >= 0 else -1  # (-2 from skip_value is malformed JSON here, not a full table)
    pos = skip_ws(buf, pos + 1, n)
    if pos < n and buf[pos] == CLOSE_OBJECT:
        return pos + 1
    while pos < n:
        h, pos = _member_key(buf, b64, pos, n)
        if pos < 0:
            return -1
        sid = NULL32
        how, col = _arg_target(h)
        at = pos
        if how == INT64 or how == INT32:
            v, pos, ok = _int_value(buf, b64, pos, n)
            if not ok:
                o64[row, S_BAD] = at
                return -3
            if how == INT64:
                o64[row, col] = v
                o64[row, S_WRITTEN] |= np.int64(1) << col
            else:
                o32[row, col] = _int32(v)
                o64[row, S_WRITTEN] |= np.int64(1) << (T_BIT0 + col)
        elif how == TEXT or how == JSON_TEXT:
            sid, pos = _string_id(buf, b64, pos, n, how == JSON_TEXT, tkeys, tvals, pool64, uoff, ulen, st)
            o32[row, col] = sid
            o64[row, S_WRITTEN] |= np.int64(1) << (T_BIT0 + col)
        elif how == TRIPLE:
            pos = _parse_triple(buf, b64, pos, n, o32, col, row)
            if pos == -3:
                o64[row, S_BAD] = at
                return -3
            o64[row, S_WRITTEN] |= np.int64(7) << (T_BIT0 + col)
        else:
            pos = skip_value(buf, b64, pos, n)
        if sid == -1:
            return -2
        pos, closed = _next_member(buf, pos, n)
        if pos < 0 or closed:
            return pos
    return -1


@_jit(forceinline=True)
def _is_phase(c):
    """Whether the byte c is one of the Chrome trace format's event phases (PHASES)."""
    return IS_PHASE[c]


@_jit(forceinline=True)
def _clear_row(o64, o32, row):
    # element loops rather than slice assignment: the GPU reader compiles this function for CUDA too
    for j in range(o64.shape[1]):
        o64[row, j] = NULL64
    for j in range(o32.shape[1]):
        o32[row, j] = NULL32
    o64[row, S_WRITTEN] = 0


@_jit(forceinline=True)
def _parse_event(buf, b64, pos, n, o64, o32, row, tkeys, tvals, pool64, uoff, ulen, st):
    """Parse one event object starting at pos ('{'). Returns the end position, -1 on error or
    truncation (the caller tells them apart by the position), -2 when the intern table is full, -3 when
    a field has the wrong type (the position of its value in o64[row, S_BAD])."""
    _clear_row(o64, o32, row)
    pos = skip_ws(buf, pos + 1, n)
    if pos < n and buf[pos] == CLOSE_OBJECT:
        o64[row, S_BAD] = -1  # {}: no phase
        return -3
    while pos < n:
        h, pos = _member_key(buf, b64, pos, n)
        if pos < 0:
            return -1
        sid = NULL32
        col = -1  # the string column this key's value goes to, interned at the one call site below
        at = pos
        ok = True
        if h == K_PH:
            e = skip_value(buf, b64, pos, n)
            # a string of one character, a phase: three bytes with its quotes
            ok = buf[pos] == QUOTE and e == pos + 3 and _is_phase(buf[pos + 1])
            if ok:
                o32[row, T_PH] = buf[pos + 1]
            pos = e
        elif h == K_BP:
            c = buf[pos]
            e = skip_value(buf, b64, pos, n)
            if c == QUOTE and e > pos + 2:
                o32[row, T_BP] = buf[pos + 1]
            ok = c == QUOTE or c == NULL_START
            pos = e
        elif h == K_NAME or h == K_CAT:
            c = buf[pos]
            if c == QUOTE or c == NULL_START:
                col = T_NAME if h == K_NAME else T_CAT
            else:
                ok = False
                pos = skip_value(buf, b64, pos, n)
        elif h == K_TS or h == K_DUR:
            o64[row, S_TS if h == K_TS else S_DUR], pos, ok = _time_value(buf, b64, pos, n)
        elif h == K_PID or h == K_TID:
            if buf[pos] == QUOTE:
                col = T_PID_STR if h == K_PID else T_TID_STR
            else:
                o64[row, S_PID if h == K_PID else S_TID], pos, ok = _int_value(buf, b64, pos, n)
        elif h == K_ID:
            o64[row, S_FLOW], pos = parse_int(buf, b64, pos, n)
        elif h == K_ARGS:
            pos = _parse_args(buf, b64, pos, n, o64, o32, row, tkeys, tvals, pool64, uoff, ulen, st)
            if pos == -2 or pos == -3:
                return pos
        else:
            pos = skip_value(buf, b64, pos, n)
        if not ok and pos >= 0:
            o64[row, S_BAD] = at
            return -3
        if col >= 0:
            sid, pos = _string_id(buf, b64, pos, n, np.bool_(False), tkeys, tvals, pool64, uoff, ulen, st)
            o32[row, col] = sid
            o64[row, S_WRITTEN] |= np.int64(1) << (T_BIT0 + col)
        if sid == -1:
            return -2
        pos, closed = _next_member(buf, pos, n)
        if pos < 0:
            return -1
        if closed:
            if o32[row, T_PH] == NULL32:
                o64[row, S_BAD] = -1  # no phase: not an event of any kind
                return -3
            return pos
    return -1


@_jit(nogil=True)
def scan(buf, b64, pos, end, n, o64, o32, row0, tkeys, tvals, pool64, uoff, ulen, st):
    """Parse the events of the array that start in [pos, end) of buf[:n] into rows row0.. of the scratch.

    buf must extend at least 16 bytes past n (word reads look ahead); b64 is its :func:`words`. pos must
    be at an event's '{' or at the separators before one. Returns (status, pos, rows): status
    is one of the codes above; pos is where to resume (an event start, or after the array's ']');
    rows is the number of the first unfilled scratch row.
    """
    cap = o64.shape[0]
    row = row0
    while True:
        pos = skip_ws(buf, pos, n)
        if pos < n and buf[pos] == COMMA:
            pos = skip_ws(buf, pos + 1, n)
        if pos >= n:
            return NEED_MORE, pos, row
        if pos >= end:
            return OK_END, pos, row
        c = buf[pos]
        if c == CLOSE_ARRAY:
            return ARRAY_END, pos + 1, row
        if c != OPEN_OBJECT:
            return BAD, pos, row
        if row >= cap:
            return FULL, pos, row
        e = _parse_event(buf, b64, pos, n, o64, o32, row, tkeys, tvals, pool64, uoff, ulen, st)
        if e == -2:
            return GROW, pos, row
        if e == -3:
            return WRONG_TYPE, pos, row
        if e < 0:
            # distinguish an event cut by the buffer end from a malformed one
            if skip_value(buf, b64, pos, n) == -1:
                return NEED_MORE, pos, row
            return BAD, pos, row
        row += 1
        pos = skip_ws(buf, e, n)
        if pos < n and buf[pos] != COMMA and buf[pos] != CLOSE_ARRAY:
            return BAD, pos, row  # events are separated by commas


@_jit()
def find_chunk_start(buf, lo, pos, n):
    """Return the first position >= pos holding a '{' whose previous non-blank byte, at lo or after, is ',';
    n if none.

    Such a position is very likely an event start; reader.py verifies it before trusting it. (Bytes before
    lo may be left over from an earlier read: a guess made from them would differ from run to run.)
    """
    while pos < n:
        if buf[pos] == OPEN_OBJECT:
            q = pos - 1
            while q >= lo and _is_ws(buf[q]):
                q -= 1
            if q >= lo and buf[q] == COMMA:
                return pos
        pos += 1
    return n


def words(buf: np.ndarray) -> np.ndarray:
    """Return buf's whole 8-byte words as a uint64 view, for the scanner's word reads. Made here, not in the
    compiled functions: a view's error path there would make loading them import numba's unicode support."""
    return buf[: (buf.size // 8) * 8].view(np.uint64)


def find_events_array(buf: np.ndarray, n: int) -> tuple[int, int]:
    """Find the traceEvents array in the head of a trace.

    Returns (kind, pos): kind 1 = object with "traceEvents", pos just after its '['; kind 2 = the file is
    a bare array of events, pos after '['; 0 = not found in buf[:n] (need more bytes); -1 = not a trace.
    """
    return _find_events_array(buf, words(buf), n)


@_jit()
def _find_events_array(buf, b64, n):
    pos = skip_ws(buf, 0, n)
    if pos >= n:
        return 0, 0
    # a UTF-8 byte-order mark
    if n - pos >= 3 and buf[pos] == UTF8_BOM[0] and buf[pos + 1] == UTF8_BOM[1] and buf[pos + 2] == UTF8_BOM[2]:
        pos = skip_ws(buf, pos + 3, n)
    if pos >= n:
        return 0, 0
    if buf[pos] == OPEN_ARRAY:
        return 2, pos + 1
    if buf[pos] != OPEN_OBJECT:
        return -1, pos
    pos = skip_ws(buf, pos + 1, n)
    while pos < n:
        if buf[pos] != QUOTE:
            return -1, pos
        h, pos = _parse_key(buf, b64, pos, n)
        if pos < 0 or pos >= n:
            return 0, 0
        if h == K_TRACE_EVENTS:
            if buf[pos] == OPEN_ARRAY:
                return 1, pos + 1
            return -1, pos
        pos = skip_value(buf, b64, pos, n)
        if pos < 0:
            return 0, 0
        pos = skip_ws(buf, pos, n)
        if pos >= n:
            return 0, 0
        if buf[pos] == COMMA:
            pos = skip_ws(buf, pos + 1, n)
        else:
            return -1, pos
    return 0, 0


@_jit(nogil=True)
def array_end(buf, pos, n, state):
    """Skip JSON text in buf[pos:n] until the array open at the start of the first call closes, without
    reading any value. `state` carries (nesting depth, inside a string, the next byte is escaped) from call
    to call; start it at (1, 0, 0) just after the '['. Returns the position after the closing ']', or -1
    when buf[pos:n] ends first (call again with the next bytes from position 0)."""
    depth, in_string = state[0], state[1]
    pos += state[2]  # a backslash ended the previous bytes: the byte it escapes is skipped
    while pos < n:
        c = buf[pos]
        if in_string:
            while pos < n and buf[pos] != QUOTE and buf[pos] != BACKSLASH:
                pos += 1
            if pos >= n:
                break
            if buf[pos] == BACKSLASH:
                pos += 2
            else:
                in_string = 0
                pos += 1
            continue
        if c == QUOTE:
            in_string = 1
        elif _is_bracket(c):
            depth = _nested(c, depth)
            if depth == 0:
                return pos + 1
        pos += 1
    state[0], state[1], state[2] = depth, in_string, pos - n
    return -1


@_jit(forceinline=True)
def _global_id(gmap, v):
    """gmap's last entry is -1: the global id of a null (NULL32) local id."""
    return gmap[gmap.shape[0] - 1 if v == NULL32 else v]


@_jit(nogil=True)
def drain(
    o64, o32, rows, gmap,
    d64, d64_src, d32, d32_src, ph_out, at,
    s64_idx, s64_val, s32_idx, s32_val, bit_slot, s32_is_string, s_count,
    f64, f32, f_count,
):  # fmt: skip
    """Move scratch rows [0, rows) into the output columns, string ids made global through gmap.

    Event rows go to the dense columns d64/d32/ph_out from row `at` on (fields d64_src/d32_src of the
    scratch) and to the sparse columns (row, value) where the scratch field is not null: sparse column
    bit_slot[b] for the field of bit b of the row's "written" field (-1: not a sparse field; the 64-bit
    columns come first, s64_idx.shape[0] of them). Flow rows (ph s/t/f) go to f64 (id, ts, pid, tid) and
    f32 (cat, phase, pid_str, tid_str). Metadata rows are left to the caller. Returns the number of event
    rows written."""
    sparse_bits = np.int64(0)
    for b in range(bit_slot.shape[0]):
        if bit_slot[b] >= 0:
            sparse_bits |= np.int64(1) << b
    n64 = s64_idx.shape[0]
    n = 0
    nf = f_count[0]
    for r in range(rows):
        ph = o32[r, T_PH]
        if ph == PH_FLOW_START or ph == PH_FLOW_STEP or ph == PH_FLOW_END:
            f64[0, nf] = o64[r, S_FLOW]
            f64[1, nf] = o64[r, S_TS]
            f64[2, nf] = o64[r, S_PID]
            f64[3, nf] = o64[r, S_TID]
            f32[0, nf] = _global_id(gmap, o32[r, T_CAT])
            f32[1, nf] = ph
            f32[2, nf] = _global_id(gmap, o32[r, T_PID_STR])
            f32[3, nf] = _global_id(gmap, o32[r, T_TID_STR])
            nf += 1
            continue
        if ph == PH_METADATA:  # handled by the caller
            continue
        row = at + n
        for j in range(d64_src.shape[0]):
            d64[j, row] = o64[r, d64_src[j]]
        for j in range(d32_src.shape[0]):
            d32[j, row] = _global_id(gmap, o32[r, d32_src[j]])
        ph_out[row] = ph
        # only the fields the scanner wrote: a row holds about 3 of the 29 sparse fields, and testing each
        # for null cost three quarters of the drain in mispredicted branches
        written = o64[r, S_WRITTEN] & sparse_bits
        while written != 0:
            b = trailing_zeros(written)
            written &= written - 1
            j = bit_slot[b]
            if b < T_BIT0:
                v = o64[r, b]
                if v != NULL64:
                    k = s_count[j]
                    s64_idx[j, k] = row
                    s64_val[j, k] = v
                    s_count[j] = k + 1
            else:
                v32 = o32[r, b - T_BIT0]
                if v32 != NULL32:
                    if s32_is_string[j - n64]:
                        v32 = gmap[v32]
                    k = s_count[j]
                    s32_idx[j - n64, k] = row
                    s32_val[j - n64, k] = v32
                    s_count[j] = k + 1
        n += 1
    f_count[0] = nf
    return n
