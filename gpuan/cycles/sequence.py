"""Event sequences to search for cycles: one per device and stream group (or per CPU thread), in time
order, with names as integer ids.

Ids are the rank of the name in the sorted vocabulary, so they do not depend on the order in which a
file happened to list its events: the same trace written in another order gives the same ids.

The per-event work runs on the engine (numpy, or CuPy over the columns a trace loaded with
``device="gpu"`` keeps resident); only vocabulary-sized work (the names' strings, which of them are
collectives, the groups' keys) is done on the host.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import ModuleType

import numpy as np
import pyarrow as pa

from gpuan.arrays import stable_argsort
from gpuan.engine import Engine, resolve
from gpuan.engine.scatter import extreme_at
from gpuan.options import CYCLES_OPS, CYCLES_SEQUENCES
from gpuan.trace.kinds import GPU_KINDS
from gpuan.trace.schema import UNNAMED
from gpuan.trace.table import Trace


@dataclass(frozen=True)
class Sequence:
    """The events of one stream group (or CPU thread) in time order.

    ``ids[i]`` indexes ``vocab`` (sorted names); ``ts``/``dur`` are ns from the trace's start.
    ``group`` is ``compute``, ``comm``, ``stream`` or ``all`` for GPU work and ``thread`` for CPU
    operators. ``stream[i]`` is the stream (or thread) of event ``i``; ``early[i]`` is true for an event
    launched before the trace window opened (a kernel whose launch call, by its correlation id, precedes
    every launch call the trace holds), or is None where the trace cannot tell. These arrays are on the
    host; ``device_ids`` is ``ids`` on the GPU where the sequence was built there (else None).
    """

    kind: str
    rank: int | None
    device: int | None
    group: str
    streams: tuple[int, ...]
    vocab: np.ndarray
    ids: np.ndarray
    ts: np.ndarray
    dur: np.ndarray
    stream: np.ndarray | None = None
    early: np.ndarray | None = None
    device_ids: object = field(default=None, compare=False, repr=False)

    @property
    def multi_stream(self) -> bool:
        """Whether the events run on more than one stream (their order in time is then not the program's)."""
        return len(self.streams) > 1

    @property
    def event_streams(self) -> np.ndarray:
        """The stream of each event (all ``streams[0]`` for a sequence built without them)."""
        if self.stream is not None:
            return self.stream
        return np.full(len(self), self.streams[0] if self.streams else 0, np.int64)

    @property
    def label(self) -> str:
        """A short human-readable name, e.g. ``rank 0 device 0 compute (streams 7)``."""
        parts = [] if self.rank is None else [f"rank {self.rank}"]
        if self.group == "thread":
            parts.append(f"thread {self.streams[0]}")
        else:
            if self.device is not None:
                parts.append(f"device {self.device}")
            if self.group == "stream":
                parts.append(f"stream {self.streams[0]}")
            else:
                parts.append(f"{self.group} (stream{'s' if len(self.streams) > 1 else ''} "
                             f"{', '.join(map(str, self.streams))})")  # fmt: skip
        return " ".join(parts)

    def __len__(self) -> int:
        return int(self.ids.shape[0])


_INT64_MIN = np.iinfo(np.int64).min
_INT64_MAX = np.iinfo(np.int64).max


def dictionary_of(col: pa.ChunkedArray) -> list:
    """Return the words that the engine's int32 codes of the dictionary column `col` index."""
    dicts = [chunk.dictionary for chunk in col.chunks]
    if all(d.equals(dicts[0]) for d in dicts[1:]):
        return dicts[0].to_pylist() if dicts else []
    # chunks with dictionaries of their own: Engine.column combined them, which unifies the words
    return col.combine_chunks().dictionary.to_pylist()


def _column(engine: Engine, events: pa.Table, name: str):
    """The event table's column `name` on the engine: the resident array where the table was loaded to the
    GPU, else converted (integers with nulls as the dtype's minimum, dictionaries as int32 codes, -1 null)."""
    return engine.columns(events, [name])[name]


def _filled(engine: Engine, events: pa.Table, name: str, rows, count: int, fill: int):
    """The `rows` (`count` of them) of the integer column `name` on the engine, as int64 with nulls as
    `fill`. The Arrow column's null count spares converting a column of nulls, and looking for nulls in
    a column without."""
    col = events[name]
    if col.null_count == len(col):
        return engine.xp.full(count, fill, np.int64)
    a = _column(engine, events, name)[rows]
    out = a.astype(np.int64, copy=False)
    if col.null_count:
        out = engine.xp.where(a == np.iinfo(a.dtype).min, np.int64(fill), out)
    return out


def _rows(xp: ModuleType, kind, codes: list[int], valid=None):
    """The rows whose kind code is one of `codes` (and, given `valid`, where it holds): a slice where they
    are one run (the rows of a kind are contiguous, per rank: selecting them then copies nothing), else
    their indices; None where there are none."""
    if not codes:
        return None
    mask = kind == codes[0]
    for code in codes[1:]:
        mask |= kind == code
    if valid is not None:
        mask &= valid
    padded = xp.zeros(mask.shape[0] + 2, bool)
    padded[1:-1] = mask
    edges = xp.flatnonzero(padded[1:] != padded[:-1])
    if edges.shape[0] == 0:
        return None
    if edges.shape[0] == 2:
        start, end = edges.tolist()
        return slice(start, end)
    return xp.flatnonzero(mask)


def _codes_of(col: pa.ChunkedArray, words: tuple[str, ...]) -> list[int]:
    return [code for code, word in enumerate(dictionary_of(col)) if word in words]


def name_ids(engine: Engine, codes, dictionary: list) -> tuple:
    """Return (ids, vocab): each event's name as its rank in the sorted vocabulary of the names that
    occur (int32, on the engine), and that vocabulary (host object array), from the int32 codes (-1 for
    none) of a name column over its `dictionary`."""
    xp = engine.xp
    words = np.array([*dictionary, UNNAMED], dtype=object)
    # code -1 (an event without a name) indexes the last slot, UNNAMED: one more word
    used = xp.zeros(len(words), bool)
    used[codes] = True
    used = engine.to_host(used)
    order = np.argsort(words, kind="stable")
    rank = np.empty(len(words), np.int64)
    rank[order] = np.arange(len(words))
    # the vocabulary keeps only names that occur, so ids stay dense whatever the dictionary held
    dense = (np.cumsum(used[order]) - 1).astype(np.int32)
    return engine.asarray(dense[rank])[codes], words[order][used[order]]


def group_codes(engine: Engine, keys: tuple) -> tuple:
    """Code rows by a tuple of small-integer keys (int64 engine arrays, at least one row); returns (codes
    on the engine, the key tuple of each code), codes in the order of the key tuples, so that they do
    not depend on row order."""
    xp = engine.xp
    lows = [int(k.min()) for k in keys]
    spans = [int(k.max()) - lo + 1 for k, lo in zip(keys, lows)]
    if float(np.prod(spans, dtype=float)) > 1 << 24:
        return _sorted_codes(engine, keys)
    # a slot per possible tuple; a key with one value (one rank, one device) adds nothing to it
    slot, stride = None, 1
    for k, lo, span in zip(keys[::-1], lows[::-1], spans[::-1]):
        if span > 1:
            term = k - lo
            if stride > 1:
                term *= stride
            if slot is None:
                slot = term
            else:
                slot += term
        stride *= span
    if slot is None:
        slot = xp.zeros(keys[0].shape[0], np.int64)
    present = xp.zeros(stride, bool)
    present[slot] = True
    slots = xp.flatnonzero(present)
    lookup = xp.zeros(stride, np.int64)
    lookup[slots] = xp.arange(slots.shape[0], dtype=np.int64)
    tuples = []
    for s in engine.to_host(slots).tolist():
        key = []
        for lo, span in zip(lows[::-1], spans[::-1]):
            key.append(s % span + lo)
            s //= span
        tuples.append(tuple(key[::-1]))
    return lookup[slot], tuples


def _sorted_codes(engine: Engine, keys: tuple) -> tuple:
    """:func:`group_codes` by sorting the rows (keys too far apart for a slot per tuple)."""
    xp = engine.xp
    stacked = xp.stack(keys)
    order = xp.lexsort(stacked[::-1])  # the first key is the primary one
    ordered = stacked[:, order]
    change = xp.ones(order.shape[0], bool)
    change[1:] = (ordered[:, 1:] != ordered[:, :-1]).any(axis=0)
    codes = xp.empty(order.shape[0], np.int64)
    codes[order] = xp.cumsum(change) - 1
    return codes, [tuple(row) for row in engine.to_host(ordered[:, change]).T.tolist()]


def running_max(xp: ModuleType, a):
    """``out[i] = max(a[: i + 1])`` (numpy's ``maximum.accumulate``; CuPy accumulates only add and
    multiply)."""
    return np.maximum.accumulate(a) if xp is np else running_max_doubling(xp, a)


def running_max_doubling(xp: ModuleType, a):
    """:func:`running_max` in log2(n) whole-array steps, each doubling the span an element has seen (what
    CuPy runs; numpy can too, which is how it is tested)."""
    out = a.copy()
    step = 1
    while step < out.shape[0]:
        out[step:] = xp.maximum(out[step:], out[:-step])
        step *= 2
    return out


def _time_order(xp: ModuleType, ts, dur, ids, stream):
    """The order that sorts a group by time.

    Ties (a parent operator and its first child, two streams starting together) are broken by longer
    duration first, then stream, then name, never by file order.
    """
    # one 2-D array of keys, the last primary (CuPy's lexsort takes no tuple)
    return xp.lexsort(xp.stack((ids.astype(np.int64), stream, -dur, ts)))


def _op_level(xp: ModuleType, ts, end, level: str):
    """Mask of the operators to keep on one thread (time-ordered, parents before children)."""
    if level == "all" or ts.shape[0] == 0:
        return xp.ones(ts.shape[0], bool)
    if level == "top":
        before = xp.empty_like(end)
        before[0] = _INT64_MIN
        before[1:] = end[:-1]
        return ts >= running_max(xp, before)
    # a leaf contains no later-starting operator: the next one starts after it ends
    nxt = xp.empty_like(ts)
    nxt[:-1] = ts[1:]
    nxt[-1] = _INT64_MAX
    return nxt >= end


def is_comm_name(vocab: np.ndarray) -> np.ndarray:
    """Mask of the names (of a vocabulary) that are collective-communication kernels (NCCL / RCCL)."""
    # one name at a time: np.char would copy every name into a fixed-width array as wide as the longest
    words = (str(w).lower() for w in vocab)
    return np.fromiter((("nccl" in w) or ("rccl" in w) for w in words), bool, count=len(vocab))


def _comm_share(engine: Engine, events: pa.Table, rows, codes, groups: int, ids, vocab: np.ndarray) -> np.ndarray:
    """Per group code, the share of its events (`rows` of the event table) that are collectives: a
    communication kernel by name, or an event with a collective name."""
    xp = engine.xp
    comm_name = is_comm_name(vocab)
    named = events["collective"].null_count < len(events["collective"])
    if not (comm_name.any() or named):
        return np.zeros(groups)  # no collective anywhere: no pass over the events
    comm_row = engine.asarray(comm_name)[ids]
    if named:
        comm_row |= _column(engine, events, "collective")[rows] >= 0
    counts = engine.to_host(xp.bincount(codes, minlength=groups))
    # counts, not float weights: the same shares without a float copy of every row
    return engine.to_host(xp.bincount(codes[comm_row], minlength=groups)) / counts


def _launched_early(engine: Engine, events: pa.Table, kinds, rows, rank):
    """Per GPU event (`rows` of the event table, of ranks `rank`), whether it was launched before the trace
    window opened: its correlation id is below every launch call's (runtime and driver events) of its
    rank. Correlation ids count a process's launches in order. None where the trace holds no launch calls.
    `kinds` is the kind column on the engine."""
    xp = engine.xp
    calls = _rows(xp, kinds, _codes_of(events["kind"], ("runtime", "driver")))
    if calls is None:
        return None
    every_correlation = _column(engine, events, "correlation")
    call_correlation = every_correlation[calls]
    # ranks are small numbers from -1 (none) up: one slot each
    call_rank = _filled(engine, events, "rank", calls, call_correlation.shape[0], -1) + 1
    if events["correlation"].null_count:
        known = call_correlation != _INT64_MIN
        call_correlation, call_rank = call_correlation[known], call_rank[known]
        if call_correlation.shape[0] == 0:
            return None
    last_call_rank = int(call_rank.max())
    first = xp.full(max(last_call_rank, int(rank.max()) + 1) + 1, _INT64_MIN, np.int64)
    first[: last_call_rank + 1] = _INT64_MAX
    extreme_at(xp, "min", first, call_rank, call_correlation)
    first[first == _INT64_MAX] = _INT64_MIN  # a rank without calls: nothing is early
    correlation = every_correlation[rows]
    # an event without a correlation id cannot be placed
    return (correlation != _INT64_MIN) & (correlation < first[rank + 1])


def sequences(
    trace: Trace, kind: str = "kernel", *, sequences: str = "group", ops: str = "top", engine: Engine | None = None
) -> list[Sequence]:
    """Return the time-ordered sequences of `kind` events in which to look for cycles.

    GPU kinds: one sequence per rank and device, split by `sequences`: ``group`` (the streams that mostly
    run compute apart from those that mostly run collectives), ``stream`` (one per stream) or ``merged``
    (all of a device's streams in one). CPU kinds: one per rank, process and thread, keeping the
    top-level operators, the leaves, or all (`ops`). The events are picked, coded and ordered on `engine`
    (default: the current one), from the columns it holds resident where the trace was loaded to the GPU;
    the sequences' arrays are on the host, the same on either engine.
    """
    if ops not in CYCLES_OPS:
        raise ValueError(f"ops must be one of {CYCLES_OPS}, not {ops!r}")
    if sequences not in CYCLES_SEQUENCES:
        raise ValueError(f"sequences must be one of {CYCLES_SEQUENCES}, not {sequences!r}")
    engine = resolve(engine)
    xp = engine.xp
    events = trace.events
    gpu = kind in GPU_KINDS  # per device and stream group; the others are CPU operators, per thread
    kinds = _column(engine, events, "kind")
    every_ts = _column(engine, events, "ts")
    # an event without a start has no place in time order (as time 0 it would break the first cycle)
    timed = every_ts != _INT64_MIN if events["ts"].null_count else None
    rows = _rows(xp, kinds, _codes_of(events["kind"], (kind,)), timed)
    if rows is None:
        return []
    ts = every_ts[rows]
    count = ts.shape[0]
    dur = xp.maximum(_column(engine, events, "dur")[rows], 0)  # a missing duration (the int64 minimum) is 0 too
    ids, vocab = name_ids(engine, _column(engine, events, "name")[rows], dictionary_of(events["name"]))
    rank = _filled(engine, events, "rank", rows, count, -1)
    if gpu:
        device = _filled(engine, events, "device", rows, count, -1)
        stream = _filled(engine, events, "stream", rows, count, -1)
        codes, keys = group_codes(engine, (rank, device, stream))
        share = _comm_share(engine, events, rows, codes, len(keys), ids, vocab)
        group_of = {}
        for code, (r, d, st) in enumerate(keys):
            kind_of_stream = "comm" if share[code] > 0.5 else "compute"
            group_of[code] = {"group": (r, d, kind_of_stream), "stream": (r, d, st), "merged": (r, d, "all")}[sequences]
        early = _launched_early(engine, events, kinds, rows, rank)
    else:
        stream = _filled(engine, events, "tid", rows, count, -1)
        codes, keys = group_codes(engine, (rank, _filled(engine, events, "pid", rows, count, -1), stream))
        group_of = {code: (r, p, t) for code, (r, p, t) in enumerate(keys)}
        early = None
    final = sorted(set(group_of.values()))
    if len(final) == 1:
        # one group (the common case): no regrouping copy of ten million rows
        groups = [slice(None)]
    else:
        # small integer codes sort stably by radix sort
        final_code = np.array([final.index(group_of[code]) for code in range(len(keys))],
                              np.int16 if len(final) < 1 << 15 else np.int32)  # fmt: skip
        row_group = engine.asarray(final_code)[codes]
        order = stable_argsort(xp, row_group)
        bounds = [0, *np.cumsum(engine.to_host(xp.bincount(row_group, minlength=len(final)))).tolist()]
        groups = [order[bounds[g] : bounds[g + 1]] for g in range(len(final))]
    out = []
    host = engine.to_host
    for key, rows in zip(final, groups):
        g_ts, g_dur, g_ids, g_stream = ts[rows], dur[rows], ids[rows], stream[rows]
        g_early = None if early is None else early[rows]
        if g_ts.shape[0] > 1 and not bool(xp.all(g_ts[1:] > g_ts[:-1])):
            sub = _time_order(xp, g_ts, g_dur, g_ids, g_stream)
            g_ts, g_dur, g_ids, g_stream = g_ts[sub], g_dur[sub], g_ids[sub], g_stream[sub]
            g_early = None if g_early is None else g_early[sub]
        if not gpu:
            keep = _op_level(xp, g_ts, g_ts + g_dur, ops)
            g_ts, g_dur, g_ids, g_stream = g_ts[keep], g_dur[keep], g_ids[keep], g_stream[keep]
        streams = tuple(sorted(k[2] for code, k in enumerate(keys) if group_of[code] == key))
        r = None if key[0] < 0 else int(key[0])
        on_device = g_ids if engine.is_gpu else None
        arrays = host(g_ids), host(g_ts), host(g_dur), host(g_stream)
        if gpu:
            dev = None if key[1] < 0 else int(key[1])
            group = "stream" if sequences == "stream" else key[2]
            g_early = host(g_early) if g_early is not None and bool(g_early.any()) else None
            out.append(Sequence(kind, r, dev, group, streams, vocab, *arrays, g_early, device_ids=on_device))
        else:
            out.append(Sequence(kind, r, None, "thread", streams, vocab, *arrays, device_ids=on_device))
    return out
