"""Event sequences to search for cycles: one per device and stream group (or per CPU thread), in time
order, with names as integer ids.

Ids are the rank of the name in the sorted vocabulary, so they do not depend on the order in which a
file happened to list its events: the same trace written in another order gives the same ids.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gpuan.options import CYCLES_OPS, CYCLES_SEQUENCES
from gpuan.trace.schema import UNNAMED
from gpuan.trace.table import Trace


@dataclass(frozen=True)
class Sequence:
    """The events of one stream group (or CPU thread) in time order.

    ``ids[i]`` indexes ``vocab`` (sorted names); ``ts``/``dur`` are ns from the trace's start.
    ``group`` is ``compute``, ``comm``, ``stream`` or ``all`` for GPU work and ``thread`` for CPU
    operators. ``stream[i]`` is the stream (or thread) of event ``i``; ``early[i]`` is true for an event
    launched before the trace window opened (a kernel whose launch call, by its correlation id, precedes
    every launch call the trace holds), or is None where the trace cannot tell.
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


def _filled(col: pa.ChunkedArray, fill: int) -> np.ndarray:
    return col.fill_null(fill).to_numpy().astype(np.int64, copy=False)


def _name_ids(col: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(ids as rank in the sorted vocabulary, sorted vocabulary) of a dictionary-encoded name column."""
    arr = pa.chunked_array(col.chunks, col.type).unify_dictionaries().combine_chunks()
    if not pa.types.is_dictionary(arr.type):
        arr = pc.dictionary_encode(arr)
    words = np.array([*arr.dictionary.to_pylist(), UNNAMED], dtype=object)
    order = np.argsort(words, kind="stable")
    rank = np.empty(len(words), np.int32)
    rank[order] = np.arange(len(words), dtype=np.int32)
    idx = arr.indices.fill_null(len(words) - 1).to_numpy()  # an event without a name is one more word
    used = np.zeros(len(words), bool)
    used[idx] = True
    # the vocabulary keeps only names that occur, so ids stay dense whatever the dictionary held
    dense = np.cumsum(used[order]) - 1
    return dense[rank][idx].astype(np.int32), words[order][used[order]]


@numba.njit(cache=True, nogil=True)
def _dense_codes(outer: np.ndarray, middle: np.ndarray, inner: np.ndarray, lows: np.ndarray, spans: np.ndarray):
    n = outer.shape[0]
    dense = np.empty(n, np.int64)
    present = np.zeros(spans[0] * spans[1] * spans[2], np.int64)
    for i in range(n):
        d = ((outer[i] - lows[0]) * spans[1] + (middle[i] - lows[1])) * spans[2] + (inner[i] - lows[2])
        dense[i] = d
        present[d] = 1
    # codes in the order of the key tuples, so they do not depend on row order
    k = 0
    for d in range(present.shape[0]):
        if present[d]:
            present[d] = k
            k += 1
        else:
            present[d] = -1
    for i in range(n):
        dense[i] = present[dense[i]]
    return dense, present


def _group_codes(
    outer: np.ndarray, middle: np.ndarray, inner: np.ndarray
) -> tuple[np.ndarray, list[tuple[int, int, int]]]:
    """Code rows by the triple of small-integer keys; returns (codes, the key triple of each code)."""
    keys = (outer, middle, inner)
    lows = np.array([k.min() for k in keys], np.int64)
    spans = np.array([k.max() - lo + 1 for k, lo in zip(keys, lows)], np.int64)
    if float(np.prod(spans, dtype=float)) <= 1 << 24:
        codes, lookup = _dense_codes(outer, middle, inner, lows, spans)
        tuples = []
        for d in np.flatnonzero(lookup >= 0).tolist():
            z = d % spans[2]
            y = (d // spans[2]) % spans[1]
            x = d // (spans[2] * spans[1])
            tuples.append((int(x + lows[0]), int(y + lows[1]), int(z + lows[2])))
        return codes, tuples
    uniq, codes = np.unique(np.stack(keys, axis=1), axis=0, return_inverse=True)
    return codes.reshape(-1), [tuple(int(x) for x in row) for row in uniq]


def _time_order(ts: np.ndarray, dur: np.ndarray, ids: np.ndarray, stream: np.ndarray) -> np.ndarray:
    """The order that sorts a group by time.

    Ties (a parent operator and its first child, two streams starting together) are broken by longer
    duration first, then stream, then name, never by file order.
    """
    return np.lexsort((ids, stream, -dur, ts))


def _op_level(ts: np.ndarray, end: np.ndarray, level: str) -> np.ndarray:
    """Mask of the operators to keep on one thread (time-ordered, parents before children)."""
    if level == "all" or ts.size == 0:
        return np.ones(ts.shape[0], bool)
    if level == "top":
        before = np.maximum.accumulate(np.concatenate([[np.iinfo(np.int64).min], end[:-1]]))
        return ts >= before
    # a leaf contains no later-starting operator: the next one starts after it ends
    nxt = np.concatenate([ts[1:], [np.iinfo(np.int64).max]])
    return nxt >= end


def is_comm_name(vocab: np.ndarray) -> np.ndarray:
    """Mask of the names (of a vocabulary) that are collective-communication kernels (NCCL / RCCL)."""
    # one name at a time: np.char would copy every name into a fixed-width array as wide as the longest
    words = (str(w).lower() for w in vocab)
    return np.fromiter((("nccl" in w) or ("rccl" in w) for w in words), bool, count=len(vocab))


#: the columns that sequences are made of
_COLUMNS = ("ts", "dur", "name", "rank", "device", "stream", "pid", "tid", "collective", "correlation")


def _rows_of_kind(trace: Trace, *kinds: str, columns: tuple[str, ...] = _COLUMNS) -> pa.Table:
    """The rows of the `kinds`, only `columns`, as zero-copy slices of the event table (the rows of a
    kind are contiguous, per rank)."""
    events = trace.events.select(["kind", *columns])
    masks = []
    for chunk in events["kind"].chunks:
        words = chunk.dictionary.to_pylist()
        codes = [words.index(k) for k in kinds if k in words]
        masks.append(np.isin(chunk.indices.to_numpy(zero_copy_only=False), codes))
    mask = np.concatenate(masks) if masks else np.zeros(0, bool)
    padded = np.zeros(mask.size + 2, bool)
    padded[1:-1] = mask
    edges = np.flatnonzero(padded[1:] != padded[:-1])
    pieces = [events.slice(a, b - a) for a, b in zip(edges[::2].tolist(), edges[1::2].tolist())]
    return pa.concat_tables(pieces) if pieces else events.slice(0, 0)


@numba.njit(cache=True, nogil=True)
def _strictly_increasing(ts: np.ndarray) -> bool:
    for i in range(1, ts.shape[0]):
        if ts[i] <= ts[i - 1]:
            return False
    return True


def _launched_early(trace: Trace, rank: np.ndarray, correlation: pa.ChunkedArray) -> np.ndarray | None:
    """Per GPU event (of ranks `rank`), whether it was launched before the trace window opened: its
    correlation id is below every launch call's (runtime and driver events) of its rank. Correlation ids
    count a process's launches in order. None where the trace holds no launch calls."""
    calls = _rows_of_kind(trace, "runtime", "driver", columns=("rank", "correlation"))
    calls = calls.filter(calls["correlation"].is_valid())
    if calls.num_rows == 0:
        return None
    # ranks are small numbers from -1 (none) up: one slot each
    call_rank = _filled(calls["rank"], -1) + 1
    top = int(max(call_rank.max(), rank.max() + 1)) + 1
    first = np.full(top, np.iinfo(np.int64).min)
    first[: call_rank.max() + 1] = np.iinfo(np.int64).max
    np.minimum.at(first, call_rank, calls["correlation"].to_numpy())
    first[first == np.iinfo(np.int64).max] = np.iinfo(np.int64).min  # a rank without calls: nothing is early
    # an event without a correlation id cannot be placed
    return _filled(correlation, np.iinfo(np.int64).max) < first[rank + 1]


def sequences(trace: Trace, kind: str = "kernel", *, sequences: str = "group", ops: str = "top") -> list[Sequence]:
    """Return the time-ordered sequences of `kind` events in which to look for cycles.

    GPU kinds: one sequence per rank and device, split by `sequences`: ``group`` (the streams that mostly
    run compute apart from those that mostly run collectives), ``stream`` (one per stream) or ``merged``
    (all of a device's streams in one). CPU kinds: one per rank, process and thread, keeping the
    top-level operators, the leaves, or all (`ops`).
    """
    if ops not in CYCLES_OPS:
        raise ValueError(f"ops must be one of {CYCLES_OPS}, not {ops!r}")
    if sequences not in CYCLES_SEQUENCES:
        raise ValueError(f"sequences must be one of {CYCLES_SEQUENCES}, not {sequences!r}")
    table = _rows_of_kind(trace, kind)
    if table["ts"].null_count:
        # an event without a start has no place in time order (as time 0 it would break the first cycle)
        table = table.filter(table["ts"].is_valid())
    if table.num_rows == 0:
        return []
    ids, vocab = _name_ids(table["name"])
    ts = _filled(table["ts"], 0)
    dur = np.maximum(_filled(table["dur"], 0), 0)
    rank = _filled(table["rank"], -1)
    gpu = kind in ("kernel", "memcpy", "memset", "gpu_annotation")
    if gpu:
        device, stream = _filled(table["device"], -1), _filled(table["stream"], -1)
        comm_row = is_comm_name(vocab)[ids] | table["collective"].is_valid().to_numpy(zero_copy_only=False)
        codes, keys = _group_codes(rank, device, stream)
        share = np.bincount(codes, weights=comm_row, minlength=len(keys)) / np.bincount(codes, minlength=len(keys))
        group_of = {}
        for code, (r, d, st) in enumerate(keys):
            kind_of_stream = "comm" if share[code] > 0.5 else "compute"
            group_of[code] = {"group": (r, d, kind_of_stream), "stream": (r, d, st), "merged": (r, d, "all")}[sequences]
        early = _launched_early(trace, rank, table["correlation"])
    else:
        stream = _filled(table["tid"], -1)
        codes, keys = _group_codes(rank, _filled(table["pid"], -1), stream)
        group_of = {code: (r, p, t) for code, (r, p, t) in enumerate(keys)}
        early = None
    final = sorted(set(group_of.values()))
    if len(final) == 1:
        # one group (the common case): no regrouping copy of ten million rows
        groups = [slice(None)]
    else:
        final_code = np.array([final.index(group_of[code]) for code in range(len(keys))], np.int64)
        row_group = final_code[codes]
        # small integer codes sort stably by radix sort
        order = np.argsort(row_group.astype(np.int16 if len(final) < 1 << 15 else np.int32), kind="stable")
        bounds = np.concatenate([[0], np.cumsum(np.bincount(row_group, minlength=len(final)))])
        groups = [order[bounds[g] : bounds[g + 1]] for g in range(len(final))]
    out = []
    for key, rows in zip(final, groups):
        g_ts, g_dur, g_ids, g_stream = ts[rows], dur[rows], ids[rows], stream[rows]
        g_early = None if early is None else early[rows]
        if not _strictly_increasing(g_ts):
            sub = _time_order(g_ts, g_dur, g_ids, g_stream)
            g_ts, g_dur, g_ids, g_stream = g_ts[sub], g_dur[sub], g_ids[sub], g_stream[sub]
            g_early = None if g_early is None else g_early[sub]
        if not gpu:
            keep = _op_level(g_ts, g_ts + g_dur, ops)
            g_ts, g_dur, g_ids, g_stream = g_ts[keep], g_dur[keep], g_ids[keep], g_stream[keep]
        streams = tuple(sorted(k[2] for code, k in enumerate(keys) if group_of[code] == key))
        r = None if key[0] < 0 else int(key[0])
        if gpu:
            dev = None if key[1] < 0 else int(key[1])
            group = "stream" if sequences == "stream" else key[2]
            g_early = g_early if g_early is not None and g_early.any() else None
            out.append(Sequence(kind, r, dev, group, streams, vocab, g_ids, g_ts, g_dur, g_stream, g_early))
        else:
            out.append(Sequence(kind, r, None, "thread", streams, vocab, g_ids, g_ts, g_dur, g_stream))
    return out
