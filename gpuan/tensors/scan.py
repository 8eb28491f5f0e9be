"""The one pass over a tensor-access log: window by window (each a fresh memory mapping), every access is
joined to the model file and to names, and only fixed-size aggregates are kept, so memory stays near one
window however long the log. Array work runs on the engine's namespace (numpy, or CuPy on the GPU)."""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from gpuan.arrays import sorted_unique
from gpuan.engine import Engine, current
from gpuan.tensors.join import expert_slices, interval_of
from gpuan.trace.gguf_map import ModelMap, units
from gpuan.trace.gguf_names import layer_of
from gpuan.trace.schema import UNNAMED
from gpuan.trace.tensorlog import TensorLog, entries, windows
from gpuan.trace.tensorlog.columns import accesses
from gpuan.trace.tensorlog.formats import TOKEN_LIMIT

DENSE_PAIRS = 1 << 27  # token x unit cells kept as a bitmap up to this size, else as sorted keys
NEVER = np.iinfo(np.int64).max
# per-token accumulators and their starting values
TOKEN_FILLS = {"count": 0, "bytes": 0, "weight": 0, "first": NEVER, "last": -1, "phase": -1}


@dataclass(frozen=True)
class Options:
    """Resolution of the aggregates: time and offset bins of the pre-binned views, points kept for the
    scatter views, page size of the coverage map, the gap that counts as a hole in the timestamps, and
    entries per window."""

    time_bins: int = 600
    offset_bins: int = 400
    max_points: int = 200_000
    page_bytes: int = 4096
    gap_ns: int = 10_000_000
    rows: int = 1 << 19


@dataclass
class Scanned:
    """What the pass kept, as host arrays. Per unit (row of `units`): count, bytes, first/last ts. Per
    intermediate name (`names`, id 0 unnamed): count, bytes. Per token id: count, bytes, weight bytes,
    first/last ts, phase. `token_layer`: bytes per token and layer + 1 (column 0: no layer). `pairs`:
    sorted distinct keys token * n_units + unit. `page_hits`: accesses covering each page of the file.
    `thread_time` / `time_offset` / `time_kind`: counts per thread and time bin, per time bin and offset
    bin, bytes per time bin of weights and intermediates. `sample`: columns of a uniform sample of accesses."""

    log: TensorLog
    model: ModelMap
    units: pd.DataFrame
    unit_layer: np.ndarray
    options: Options
    t0: int
    t1: int
    engine: str
    accesses: int = 0
    unit_count: np.ndarray = None
    unit_bytes: np.ndarray = None
    unit_first: np.ndarray = None
    unit_last: np.ndarray = None
    names: list[str] = field(default_factory=lambda: [UNNAMED])
    name_count: np.ndarray = None
    name_bytes: np.ndarray = None
    tok_count: np.ndarray = None
    tok_bytes: np.ndarray = None
    tok_weight_bytes: np.ndarray = None
    tok_first: np.ndarray = None
    tok_last: np.ndarray = None
    tok_phase: np.ndarray = None
    token_layer: np.ndarray = None
    pairs: np.ndarray = None
    page_hits: np.ndarray = None
    thread_time: np.ndarray = None
    time_offset: np.ndarray = None
    time_kind: np.ndarray = None
    op_count: np.ndarray = None
    sample: dict = None
    outside: int = 0
    outside_bytes: int = 0
    outside_examples: list[int] = field(default_factory=list)
    backward: int = 0
    gaps: list[tuple[int, int, int]] = field(default_factory=list)  # (gap ns, entry, token), longest first
    gap_count: int = 0


def _grow(xp, a, n: int, fill=0):
    """`a` with axis 0 grown (doubling) to at least `n` rows, new rows set to `fill`."""
    if a.shape[0] >= n:
        return a
    rows = max(n, 2 * a.shape[0])
    out = xp.full((rows, *a.shape[1:]), fill, dtype=a.dtype)
    out[: a.shape[0]] = a
    return out


def _name_ids(names: np.ndarray, vocab: dict[bytes, int], listing: list[str]) -> np.ndarray:
    """Ids of fixed-width byte names in `vocab` (new names are added); hashing the bytes to one integer
    keeps the distinct-name search a numeric sort, not a string one."""
    if len(names) == 0:
        return np.zeros(0, np.int64)
    b = np.ascontiguousarray(names).view(np.uint8).reshape(len(names), -1).astype(np.uint64)
    mult = np.uint64(0x100000001B3) ** np.arange(b.shape[1], dtype=np.uint64)
    h = (b * mult).sum(axis=1, dtype=np.uint64)
    order = np.argsort(h, kind="stable")
    hs = h[order]
    first = np.ones(len(hs), bool)
    first[1:] = hs[1:] != hs[:-1]
    ids = np.empty(int(first.sum()), np.int64)
    for j, i in enumerate(order[first]):
        key = names[i].rstrip(b"\0")
        if key not in vocab:
            vocab[key] = len(listing)
            listing.append(key.decode("utf-8", "replace") or UNNAMED)
        ids[j] = vocab[key]
    return ids[np.cumsum(first) - 1][np.argsort(order, kind="stable")]


class _Pointers:
    """The name table's tensors by address, for accesses not read from the model file."""

    def __init__(self, table: pd.DataFrame | None, vocab: dict[bytes, int], listing: list[str]) -> None:
        if table is None or len(table) == 0:
            self.starts = self.ends = self.ids = np.zeros(0, np.uint64)
            return
        t = table[table["data_ptr"] != 0].sort_values("data_ptr", kind="stable")
        t = t.drop_duplicates("data_ptr", keep="last")
        self.starts = t["data_ptr"].to_numpy(np.uint64)
        self.ends = self.starts + np.maximum(t["size_bytes"].to_numpy(), 1).astype(np.uint64)
        self.ids = _name_ids(t["tensor_name"].to_numpy().astype("S"), vocab, listing)


def scan(
    log: TensorLog,
    model: ModelMap,
    names: pd.DataFrame | None = None,
    options: Options | None = None,
    engine: Engine | None = None,
) -> Scanned:
    """Run the pass over `log` joined to `model` (and to the name table `names`, when given) and return
    what it kept (:class:`Scanned`, host arrays)."""
    o = options or Options()
    eng = engine or current()
    xp = eng.xp
    u = units(model)
    tnames = model.tensors["name"].to_numpy()
    unit_layer = np.array([layer_of(n) for n in tnames], np.int32)[u["tensor"].to_numpy()]
    first_rows = entries(log, 0, 1)
    last_rows = entries(log, log.entries - 1, log.entries)
    t0, t1 = int(first_rows["timestamp_ns"][0]), int(last_rows["timestamp_ns"][0])
    span = max(t1 - t0, 0) + 1
    # only a first size for the per-token arrays: the windows' token ids are checked as they are read, so a
    # corrupt last entry must not size them before its window reports it
    ends = [int(rows["token_id"][0]) for rows in (first_rows, last_rows)]
    tokens_guess = max([t for t in ends if t < TOKEN_LIMIT], default=0) + 1
    del first_rows, last_rows

    n_units, n_layers = len(u), int(max(unit_layer.max(initial=-1), 0)) + 2
    starts, ends = xp.asarray(u["start"].to_numpy()), xp.asarray(u["end"].to_numpy())
    unit_tensor, unit_expert = xp.asarray(u["tensor"].to_numpy()), xp.asarray(u["expert"].to_numpy())
    layer_of_unit = xp.asarray(unit_layer)
    pages = model.file_bytes // o.page_bytes + 2
    TB, OB = o.time_bins, o.offset_bins
    dense = tokens_guess * max(n_units, 1) <= DENSE_PAIRS

    s = Scanned(log, model, u, unit_layer, o, t0, t1, eng.name)
    i64 = xp.int64
    unit_count, unit_bytes = xp.zeros(n_units, i64), xp.zeros(n_units, i64)
    unit_first, unit_last = xp.full(n_units, NEVER, i64), xp.full(n_units, -1, i64)
    name_count, name_bytes = xp.zeros(16, i64), xp.zeros(16, i64)
    tok = {k: xp.full(tokens_guess, fill, i64) for k, fill in TOKEN_FILLS.items()}
    token_layer = xp.zeros((tokens_guess, n_layers), i64)
    bitmap = xp.zeros((tokens_guess, n_units), bool) if dense else None
    pair_chunks: list[np.ndarray] = []
    page_diff = xp.zeros(pages + 1, i64)
    thread_time = xp.zeros((1, TB), i64)
    time_offset = xp.zeros(TB * OB, i64)
    time_kind = xp.zeros(2 * TB, i64)
    op_count = xp.zeros(256, i64)
    samples: list[dict] = []
    stride = max(1, -(-log.entries // max(o.max_points, 1)))
    vocab: dict[bytes, int] = {}
    pointers = _Pointers(names, vocab, s.names)
    ptr_starts, ptr_ends, ptr_ids = (xp.asarray(a) for a in (pointers.starts, pointers.ends, pointers.ids))
    prev_ts, gaps_heap = None, []

    for start, window in windows(log, o.rows):
        cols = accesses(window, log.format)
        del window
        host_names = _name_ids(cols.pop("name"), vocab, s.names) if "name" in cols else None
        c = {k: xp.asarray(v) for k, v in cols.items()}
        del cols
        n = int(c["ts"].shape[0])
        if n == 0:
            continue
        s.accesses += n
        ts, token, off = c["ts"], c["token"], c["offset"]
        in_file = off >= 0
        unit = interval_of(xp, starts, ends, off, in_file)
        unit, off, size = expert_slices(xp, unit, off, c["size"], c["expert"], starts, ends, unit_tensor, unit_expert)
        hit = unit >= 0
        safe_unit = xp.maximum(unit, 0)
        layer = xp.where(hit, layer_of_unit[safe_unit], c["layer"])

        # per unit
        uh, sh, th = unit[hit], size[hit], ts[hit]
        unit_count += xp.bincount(uh, minlength=n_units)
        unit_bytes += xp.bincount(uh, weights=sh, minlength=n_units).astype(i64)
        _scatter(xp, "min", unit_first, uh, th)
        _scatter(xp, "max", unit_last, uh, th)

        # outside every tensor (a file offset, but in no tensor)
        out = in_file & ~hit
        n_out = int(out.sum())
        if n_out:
            s.outside += n_out
            s.outside_bytes += int(size[out].sum())
            if len(s.outside_examples) < 5:
                s.outside_examples += [int(x) for x in eng.to_host(off[out][: 5 - len(s.outside_examples)])]

        # intermediates by name: from the record itself, else by pointer into the name table
        inter = ~in_file
        if host_names is not None:
            nid = xp.asarray(host_names)
        else:
            row = interval_of(xp, ptr_starts, ptr_ends, c["ptr"], inter)
            nid = xp.where(row >= 0, ptr_ids[xp.maximum(row, 0)] if len(ptr_ids) else 0, 0)
        nid = xp.where(inter, nid, -1)
        if len(s.names) > name_count.shape[0]:
            name_count, name_bytes = _grow(xp, name_count, len(s.names)), _grow(xp, name_bytes, len(s.names))
        ni = nid[inter]
        name_count += xp.bincount(ni, minlength=name_count.shape[0])[: name_count.shape[0]]
        name_bytes += xp.bincount(ni, weights=size[inter], minlength=name_count.shape[0]).astype(i64)[
            : name_count.shape[0]
        ]

        # per token
        top = int(token.max()) + 1
        if top > tok["count"].shape[0]:
            tok = {k: _grow(xp, v, top, TOKEN_FILLS[k]) for k, v in tok.items()}
            token_layer = _grow(xp, token_layer, top)
            if bitmap is not None:
                if top * max(n_units, 1) > DENSE_PAIRS:
                    pair_chunks.append(_bitmap_keys(xp, eng, bitmap, n_units))
                    bitmap = None
                else:
                    bitmap = _grow(xp, bitmap, top, False)
        m = tok["count"].shape[0]
        tok["count"] += xp.bincount(token, minlength=m)
        tok["bytes"] += xp.bincount(token, weights=size, minlength=m).astype(i64)
        tok["weight"] += xp.bincount(token, weights=xp.where(in_file, size, 0), minlength=m).astype(i64)
        _scatter(xp, "min", tok["first"], token, ts)
        _scatter(xp, "max", tok["last"], token, ts)
        _scatter(xp, "max", tok["phase"], token, c["phase"].astype(i64))
        L = token_layer.shape[1]
        lay = xp.clip(layer + 1, 0, L - 1).astype(i64)
        token_layer += xp.bincount(token * L + lay, weights=size, minlength=m * L).astype(i64).reshape(m, L)

        # distinct (token, unit) pairs
        if bitmap is not None:
            bitmap[token[hit], uh] = True
        else:
            pair_chunks.append(sorted_unique(eng.to_host(token[hit] * n_units + uh)))

        # coverage of the file's pages
        fo, fs = off[in_file], size[in_file]
        inside = fo < model.file_bytes
        fo, fs = fo[inside], fs[inside]
        first_page = fo // o.page_bytes
        last_page = xp.minimum(fo + xp.maximum(fs, 1) - 1, model.file_bytes - 1) // o.page_bytes
        page_diff += xp.bincount(first_page, minlength=pages + 1)[: pages + 1]
        page_diff -= xp.bincount(last_page + 1, minlength=pages + 1)[: pages + 1]

        # pre-binned views
        tb = xp.clip((ts - t0) * TB // span, 0, TB - 1)
        threads = int(c["thread"].max()) + 1
        thread_time = _grow(xp, thread_time, threads)
        thread_time += xp.bincount(c["thread"].astype(i64) * TB + tb, minlength=thread_time.shape[0] * TB).reshape(
            -1, TB
        )
        # offsets beyond the file go to the last bin (capped first: off * OB must not overflow int64)
        ob = xp.clip(xp.minimum(off, model.file_bytes) * OB // max(model.file_bytes, 1), 0, OB - 1)
        time_offset += xp.bincount((tb * OB + ob)[in_file], minlength=TB * OB)
        time_kind += xp.bincount(tb * 2 + inter.astype(i64), weights=size, minlength=2 * TB).astype(i64)
        first_of_entry = xp.ones(n, bool)
        first_of_entry[1:] = c["entry"][1:] != c["entry"][:-1]
        op_count += xp.bincount(c["op"][first_of_entry].astype(i64), minlength=256)

        # timestamp holes and disorder, across window boundaries too
        d = xp.diff(ts, prepend=ts[:1] if prev_ts is None else xp.asarray([prev_ts], dtype=ts.dtype))
        s.backward += int((d < 0).sum())
        s.gap_count += int((d > o.gap_ns).sum())
        # the longest gap of the window plus every gap over the threshold: a full partition costs more
        # than the rest of the pass
        big = xp.flatnonzero(d > o.gap_ns)[:64]
        for i in {int(xp.argmax(d)), *(int(x) for x in eng.to_host(big))}:
            gap = int(d[i])
            if gap > 0:
                item = (gap, start + int(c["entry"][i]), int(token[i]))
                (heapq.heappush if len(gaps_heap) < 5 else heapq.heappushpop)(gaps_heap, item)
        prev_ts = int(ts[-1])

        keep = (start + c["entry"]) % stride == 0
        samples.append(
            {
                "ts": eng.to_host(ts[keep]),
                "token": eng.to_host(token[keep]),
                "layer": eng.to_host(layer[keep]),
                "thread": eng.to_host(c["thread"][keep]),
                "offset": eng.to_host(off[keep]),
                "unit": eng.to_host(unit[keep]),
            }
        )
        del c, ts, token, size, off, unit

    h = eng.to_host
    s.unit_count, s.unit_bytes, s.unit_first, s.unit_last = h(unit_count), h(unit_bytes), h(unit_first), h(unit_last)
    s.name_count, s.name_bytes = h(name_count)[: len(s.names)], h(name_bytes)[: len(s.names)]
    top = int(np.max(np.nonzero(h(tok["count"]))[0], initial=-1)) + 1
    s.tok_count, s.tok_bytes, s.tok_weight_bytes, s.tok_first, s.tok_last, s.tok_phase = (
        h(tok[k])[:top] for k in TOKEN_FILLS
    )
    s.token_layer = h(token_layer)[:top]
    if bitmap is not None:
        pair_chunks.append(_bitmap_keys(xp, eng, bitmap, n_units))
    if len(pair_chunks) == 1 and bitmap is not None:
        s.pairs = pair_chunks[0]  # already sorted and distinct
    else:
        s.pairs = sorted_unique(np.concatenate(pair_chunks)) if pair_chunks else np.zeros(0, np.int64)
    s.page_hits = np.cumsum(h(page_diff))[: -(-model.file_bytes // o.page_bytes)]
    s.thread_time = h(thread_time)
    s.time_offset = h(time_offset).reshape(TB, OB)
    s.time_kind = h(time_kind).reshape(TB, 2)
    s.op_count = h(op_count)
    s.sample = {k: np.concatenate([x[k] for x in samples]) for k in samples[0]} if samples else {}
    if s.sample and len(s.sample["ts"]) > o.max_points:
        pick = np.linspace(0, len(s.sample["ts"]) - 1, o.max_points).astype(np.int64)
        s.sample = {k: v[pick] for k, v in s.sample.items()}
    s.gaps = sorted(gaps_heap, reverse=True)
    return s


def _scatter(xp, how: str, out, idx, values) -> None:
    """out[idx] = min/max(out[idx], values), repeated indices included."""
    if xp is np:
        (np.minimum if how == "min" else np.maximum).at(out, idx, values)
    else:
        import cupyx

        (cupyx.scatter_min if how == "min" else cupyx.scatter_max)(out, idx, values)


def _bitmap_keys(xp, eng: Engine, bitmap, n_units: int) -> np.ndarray:
    """The set cells of the (token, unit) bitmap as sorted keys token * n_units + unit: its flat indices."""
    return eng.to_host(xp.flatnonzero(bitmap)).astype(np.int64)
