"""The one pass over a tensor-access log: window by window (each a fresh memory mapping, decoded by
:class:`~gpuan.trace.inputs.TensorInputs`), every access is joined to the model file and to names,
and only fixed-size aggregates are kept, so memory stays near one window however long the log. Array work
runs on the engine's namespace (numpy, or CuPy on the GPU).

Each aggregate is one small class with ``add(window)`` and a ``finish`` that returns host arrays."""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from gpuan.arrays import sorted_unique
from gpuan.engine import Engine
from gpuan.engine.scatter import extreme_at
from gpuan.tensors.join import expert_slices, interval_of
from gpuan.trace.gguf_names import layer_of
from gpuan.trace.inputs import TensorInputs
from gpuan.trace.schema import UNNAMED

DENSE_PAIRS = 1 << 27  # token x unit cells kept as a bitmap up to this size, else as sorted keys
NEVER = np.iinfo(np.int64).max
# per-token accumulators and their starting values
TOKEN_FILLS = {"count": 0, "bytes": 0, "weight": 0, "first": NEVER, "last": -1, "phase": -1}
GAPS_KEPT = 5  # longest gaps between entries kept for the timestamps check
OUTSIDE_EXAMPLES = 5  # file offsets inside no tensor kept as examples


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
    window_entries: int = 1 << 19


@dataclass
class Scanned:
    """What the pass kept, as host arrays. Per unit (row of `units`): count, bytes, first/last ts. Per
    intermediate name (`names`, id 0 unnamed): count, bytes. Per token id: count, bytes, weight bytes,
    first/last ts, phase. `token_layer`: bytes per token and layer + 1 (column 0: no layer). `pairs`:
    sorted distinct keys token * n_units + unit. `page_hits`: accesses covering each page of the file.
    `thread_time` / `time_offset` / `time_kind`: counts per thread and time bin, per time bin and offset
    bin, bytes per time bin of weights and intermediates. `sample`: columns of a uniform sample of accesses."""

    inputs: TensorInputs
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

    @property
    def log(self):
        """The opened log (:class:`~gpuan.trace.tensorlog.TensorLog`)."""
        return self.inputs.log

    @property
    def model(self):
        """The model file's layout (:class:`~gpuan.trace.gguf_map.ModelMap`)."""
        return self.inputs.model

    @property
    def units(self) -> pd.DataFrame:
        """The tensors and expert slices accesses were joined to."""
        return self.inputs.units


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
    as_bytes = np.ascontiguousarray(names).view(np.uint8).reshape(len(names), -1).astype(np.uint64)
    mult = np.uint64(0x100000001B3) ** np.arange(as_bytes.shape[1], dtype=np.uint64)
    hashes = (as_bytes * mult).sum(axis=1, dtype=np.uint64)
    order = np.argsort(hashes, kind="stable")
    sorted_hashes = hashes[order]
    first = np.ones(len(sorted_hashes), bool)
    first[1:] = sorted_hashes[1:] != sorted_hashes[:-1]
    ids = np.empty(int(first.sum()), np.int64)
    for j, i in enumerate(order[first]):
        key = names[i].rstrip(b"\0")
        if key not in vocab:
            vocab[key] = len(listing)
            listing.append(key.decode("utf-8", "replace") or UNNAMED)
        ids[j] = vocab[key]
    return ids[np.cumsum(first) - 1][np.argsort(order, kind="stable")]


@dataclass
class _Window:
    """One window's accesses joined to the model: `unit` (-1: none), `layer` (the unit's, else the log's),
    `name_id` (intermediates only, 0 unnamed, -1 for file accesses); offset and size moved to the expert
    slice where the log named the whole expert tensor."""

    start: int
    n: int
    entry: object
    ts: object
    token: object
    thread: object
    op: object
    phase: object
    offset: object
    size: object
    unit: object
    layer: object
    in_file: object
    name_id: object

    @property
    def hit(self):
        """Accesses that lie in a unit."""
        return self.unit >= 0


class _Join:
    """The model's units and the name table's tensors (by address) on the engine, and the join of each
    window to them."""

    def __init__(self, eng: Engine, inputs: TensorInputs, unit_layer: np.ndarray, listing: list[str]) -> None:
        xp = self.xp = eng.xp
        self.starts, self.ends, self.unit_tensor, self.unit_expert = (
            xp.asarray(inputs.units[c].to_numpy()) for c in ("start", "end", "tensor", "expert")
        )
        self.layer_of_unit = xp.asarray(unit_layer)
        self.vocab: dict[bytes, int] = {}
        self.listing = listing
        ptr_starts, ptr_ends, ptr_ids = self._pointers(inputs.names)
        self.ptr_starts, self.ptr_ends, self.ptr_ids = (xp.asarray(a) for a in (ptr_starts, ptr_ends, ptr_ids))

    @property
    def _slices(self) -> tuple:
        """What :func:`~gpuan.tensors.join.expert_slices` needs of the units after the accesses."""
        return self.starts, self.ends, self.unit_tensor, self.unit_expert

    def _pointers(self, table: pd.DataFrame | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The name table's tensors by address (starts, ends, name ids), for accesses not read from the file."""
        if table is None or len(table) == 0:
            empty = np.zeros(0, np.uint64)
            return empty, empty, empty
        named = table[table["data_ptr"] != 0].sort_values("data_ptr", kind="stable")
        named = named.drop_duplicates("data_ptr", keep="last")
        starts = named["data_ptr"].to_numpy(np.uint64)
        ends = starts + np.maximum(named["size_bytes"].to_numpy(), 1).astype(np.uint64)
        return starts, ends, _name_ids(named["tensor_name"].to_numpy().astype("S"), self.vocab, self.listing)

    def window(self, start: int, columns: dict[str, np.ndarray]) -> _Window | None:
        """Return the window's accesses joined (None for an empty window)."""
        xp = self.xp
        record_names = _name_ids(columns.pop("name"), self.vocab, self.listing) if "name" in columns else None
        col = {k: xp.asarray(v) for k, v in columns.items()}
        n = int(col["ts"].shape[0])
        if n == 0:
            return None
        in_file = col["offset"] >= 0
        unit = interval_of(xp, self.starts, self.ends, col["offset"], in_file)
        unit, offset, size = expert_slices(xp, unit, col["offset"], col["size"], col["expert"], *self._slices)
        layer = xp.where(unit >= 0, self.layer_of_unit[xp.maximum(unit, 0)], col["layer"])
        return _Window(
            start, n, col["entry"], col["ts"], col["token"], col["thread"], col["op"], col["phase"],
            offset, size, unit, layer, in_file, self._name_id(col["ptr"], ~in_file, record_names),
        )  # fmt: skip

    def _name_id(self, ptr, intermediate, record_names):
        """Name ids of intermediates: from the record itself, else by pointer into the name table; -1 for
        file accesses."""
        xp = self.xp
        if record_names is not None:
            ids = xp.asarray(record_names)
        else:
            row = interval_of(xp, self.ptr_starts, self.ptr_ends, ptr, intermediate)
            ids = xp.where(row >= 0, self.ptr_ids[xp.maximum(row, 0)] if len(self.ptr_ids) else 0, 0)
        return xp.where(intermediate, ids, -1)


class _UnitTotals:
    """Per unit: accesses, bytes, first and last timestamp; and the file accesses that lie in no unit."""

    def __init__(self, eng: Engine, n_units: int) -> None:
        xp, i64 = eng.xp, eng.xp.int64
        self.eng, self.n_units = eng, n_units
        self.count, self.bytes = xp.zeros(n_units, i64), xp.zeros(n_units, i64)
        self.first, self.last = xp.full(n_units, NEVER, i64), xp.full(n_units, -1, i64)
        self.outside = self.outside_bytes = 0
        self.examples: list[int] = []

    def add(self, window: _Window) -> None:
        xp = self.eng.xp
        hit = window.hit
        unit, size, ts = window.unit[hit], window.size[hit], window.ts[hit]
        self.count += xp.bincount(unit, minlength=self.n_units)
        self.bytes += xp.bincount(unit, weights=size, minlength=self.n_units).astype(xp.int64)
        extreme_at(xp, "min", self.first, unit, ts)
        extreme_at(xp, "max", self.last, unit, ts)
        outside = window.in_file & ~hit
        n_outside = int(outside.sum())
        if n_outside:
            self.outside += n_outside
            self.outside_bytes += int(window.size[outside].sum())
            wanted = OUTSIDE_EXAMPLES - len(self.examples)
            if wanted > 0:
                self.examples += [int(x) for x in self.eng.to_host(window.offset[outside][:wanted])]

    def finish(self, scanned: Scanned) -> None:
        host = self.eng.to_host
        scanned.unit_count, scanned.unit_bytes = host(self.count), host(self.bytes)
        scanned.unit_first, scanned.unit_last = host(self.first), host(self.last)
        scanned.outside, scanned.outside_bytes, scanned.outside_examples = (
            self.outside,
            self.outside_bytes,
            self.examples,
        )


class _NameTotals:
    """Per intermediate name: accesses and bytes (the names grow as windows bring new ones)."""

    def __init__(self, eng: Engine, listing: list[str]) -> None:
        self.eng, self.listing = eng, listing
        self.count, self.bytes = eng.xp.zeros(16, eng.xp.int64), eng.xp.zeros(16, eng.xp.int64)

    def add(self, window: _Window) -> None:
        xp = self.eng.xp
        if len(self.listing) > self.count.shape[0]:
            self.count, self.bytes = _grow(xp, self.count, len(self.listing)), _grow(xp, self.bytes, len(self.listing))
        rows = self.count.shape[0]
        intermediate = ~window.in_file
        ids = window.name_id[intermediate]
        self.count += xp.bincount(ids, minlength=rows)[:rows]
        self.bytes += xp.bincount(ids, weights=window.size[intermediate], minlength=rows).astype(xp.int64)[:rows]

    def finish(self, scanned: Scanned) -> None:
        scanned.names = self.listing
        scanned.name_count = self.eng.to_host(self.count)[: len(self.listing)]
        scanned.name_bytes = self.eng.to_host(self.bytes)[: len(self.listing)]


class _Pairs:
    """The distinct (token, unit) pairs: a bitmap while tokens x units stays small, else sorted keys."""

    def __init__(self, eng: Engine, tokens: int, n_units: int) -> None:
        self.eng, self.n_units = eng, n_units
        dense = tokens * max(n_units, 1) <= DENSE_PAIRS
        self.bitmap = eng.xp.zeros((tokens, n_units), bool) if dense else None
        self.chunks: list[np.ndarray] = []

    def grow(self, tokens: int) -> None:
        if self.bitmap is None:
            return
        if tokens * max(self.n_units, 1) > DENSE_PAIRS:
            self.chunks.append(self._bitmap_keys())
            self.bitmap = None
        else:
            self.bitmap = _grow(self.eng.xp, self.bitmap, tokens, False)

    def add(self, token, unit) -> None:
        if self.bitmap is not None:
            self.bitmap[token, unit] = True
        else:
            self.chunks.append(sorted_unique(self.eng.to_host(token * self.n_units + unit)))

    def _bitmap_keys(self) -> np.ndarray:
        """The set cells of the bitmap as sorted keys token * n_units + unit: its flat indices."""
        return self.eng.to_host(self.eng.xp.flatnonzero(self.bitmap)).astype(np.int64)

    def keys(self) -> np.ndarray:
        """Return the sorted distinct keys token * n_units + unit."""
        if self.bitmap is not None and not self.chunks:
            return self._bitmap_keys()  # already sorted and distinct
        if self.bitmap is not None:
            self.chunks.append(self._bitmap_keys())
        return sorted_unique(np.concatenate(self.chunks)) if self.chunks else np.zeros(0, np.int64)


class _TokenTotals:
    """Per token id: accesses, bytes (all and of weights), first/last timestamp, phase, bytes per layer,
    and the distinct units it touched."""

    def __init__(self, eng: Engine, tokens: int, n_units: int, n_layers: int) -> None:
        xp = eng.xp
        self.eng = eng
        self.values = {k: xp.full(tokens, fill, xp.int64) for k, fill in TOKEN_FILLS.items()}
        self.by_layer = xp.zeros((tokens, n_layers), xp.int64)
        self.pairs = _Pairs(eng, tokens, n_units)

    def add(self, window: _Window) -> None:
        xp, values = self.eng.xp, self.values
        top = int(window.token.max()) + 1
        if top > values["count"].shape[0]:
            self.values = values = {k: _grow(xp, v, top, TOKEN_FILLS[k]) for k, v in values.items()}
            self.by_layer = _grow(xp, self.by_layer, top)
            self.pairs.grow(top)
        rows, token, size = values["count"].shape[0], window.token, window.size
        values["count"] += xp.bincount(token, minlength=rows)
        values["bytes"] += xp.bincount(token, weights=size, minlength=rows).astype(xp.int64)
        values["weight"] += xp.bincount(token, weights=xp.where(window.in_file, size, 0), minlength=rows).astype(
            xp.int64
        )
        extreme_at(xp, "min", values["first"], token, window.ts)
        extreme_at(xp, "max", values["last"], token, window.ts)
        extreme_at(xp, "max", values["phase"], token, window.phase.astype(xp.int64))
        columns = self.by_layer.shape[1]
        layer = xp.clip(window.layer + 1, 0, columns - 1).astype(xp.int64)
        cells = xp.bincount(token * columns + layer, weights=size, minlength=rows * columns)
        self.by_layer += cells.astype(xp.int64).reshape(rows, columns)
        hit = window.hit
        self.pairs.add(token[hit], window.unit[hit])

    def finish(self, scanned: Scanned) -> None:
        host = self.eng.to_host
        top = int(np.max(np.nonzero(host(self.values["count"]))[0], initial=-1)) + 1
        (
            scanned.tok_count,
            scanned.tok_bytes,
            scanned.tok_weight_bytes,
            scanned.tok_first,
            scanned.tok_last,
            scanned.tok_phase,
        ) = (host(self.values[k])[:top] for k in TOKEN_FILLS)
        scanned.token_layer = host(self.by_layer)[:top]
        scanned.pairs = self.pairs.keys()


class _Pages:
    """How many accesses cover each page of the model file (as a difference array until the end)."""

    def __init__(self, eng: Engine, file_bytes: int, page_bytes: int) -> None:
        self.eng, self.file_bytes, self.page_bytes = eng, file_bytes, page_bytes
        self.pages = file_bytes // page_bytes + 2
        self.diff = eng.xp.zeros(self.pages + 1, eng.xp.int64)

    def add(self, window: _Window) -> None:
        xp, page = self.eng.xp, self.page_bytes
        offset, size = window.offset[window.in_file], window.size[window.in_file]
        inside = offset < self.file_bytes
        offset, size = offset[inside], size[inside]
        first_page = offset // page
        last_page = xp.minimum(offset + xp.maximum(size, 1) - 1, self.file_bytes - 1) // page
        self.diff += xp.bincount(first_page, minlength=self.pages + 1)[: self.pages + 1]
        self.diff -= xp.bincount(last_page + 1, minlength=self.pages + 1)[: self.pages + 1]

    def finish(self, scanned: Scanned) -> None:
        scanned.page_hits = np.cumsum(self.eng.to_host(self.diff))[: -(-self.file_bytes // self.page_bytes)]


class _TimeViews:
    """The pre-binned views: accesses per thread and time bin, per time bin and file-offset bin, bytes per
    time bin of weights and intermediates, and entries per operation type."""

    def __init__(self, eng: Engine, t0: int, t1: int, options: Options, file_bytes: int) -> None:
        xp = eng.xp
        self.eng, self.t0, self.span, self.file_bytes = eng, t0, max(t1 - t0, 0) + 1, file_bytes
        self.time_bins, self.offset_bins = options.time_bins, options.offset_bins
        self.thread_time = xp.zeros((1, self.time_bins), xp.int64)
        self.time_offset = xp.zeros(self.time_bins * self.offset_bins, xp.int64)
        self.time_kind = xp.zeros(2 * self.time_bins, xp.int64)
        self.op_count = xp.zeros(256, xp.int64)

    def add(self, window: _Window) -> None:
        xp, time_bins, offset_bins = self.eng.xp, self.time_bins, self.offset_bins
        time_bin = xp.clip((window.ts - self.t0) * time_bins // self.span, 0, time_bins - 1)
        self.thread_time = _grow(xp, self.thread_time, int(window.thread.max()) + 1)
        cells = xp.bincount(window.thread.astype(xp.int64) * time_bins + time_bin, minlength=self.thread_time.size)
        self.thread_time += cells.reshape(-1, time_bins)
        # offsets beyond the file go to the last bin (capped first: offset * bins must not overflow int64)
        capped = xp.minimum(window.offset, self.file_bytes)
        offset_bin = xp.clip(capped * offset_bins // max(self.file_bytes, 1), 0, offset_bins - 1)
        cell = (time_bin * offset_bins + offset_bin)[window.in_file]
        self.time_offset += xp.bincount(cell, minlength=time_bins * offset_bins)
        kind = time_bin * 2 + (~window.in_file).astype(xp.int64)
        self.time_kind += xp.bincount(kind, weights=window.size, minlength=2 * time_bins).astype(xp.int64)
        first_of_entry = xp.ones(window.n, bool)
        first_of_entry[1:] = window.entry[1:] != window.entry[:-1]
        self.op_count += xp.bincount(window.op[first_of_entry].astype(xp.int64), minlength=256)

    def finish(self, scanned: Scanned) -> None:
        host = self.eng.to_host
        scanned.thread_time = host(self.thread_time)
        scanned.time_offset = host(self.time_offset).reshape(self.time_bins, self.offset_bins)
        scanned.time_kind = host(self.time_kind).reshape(self.time_bins, 2)
        scanned.op_count = host(self.op_count)


class _Timestamps:
    """Steps back in time and gaps over the threshold between consecutive entries, across windows too;
    the longest gaps with where they are."""

    def __init__(self, eng: Engine, gap_ns: int) -> None:
        self.eng, self.gap_ns = eng, gap_ns
        self.backward = self.gap_count = 0
        self.longest: list[tuple[int, int, int]] = []  # a min-heap of (gap ns, entry, token)
        self.previous: int | None = None

    def add(self, window: _Window) -> None:
        xp, ts = self.eng.xp, window.ts
        before = ts[:1] if self.previous is None else xp.asarray([self.previous], dtype=ts.dtype)
        step = xp.diff(ts, prepend=before)
        self.backward += int((step < 0).sum())
        self.gap_count += int((step > self.gap_ns).sum())
        # the longest gap of the window plus every gap over the threshold: a full partition costs more
        # than the rest of the pass
        over = xp.flatnonzero(step > self.gap_ns)[:64]
        for i in {int(xp.argmax(step)), *(int(x) for x in self.eng.to_host(over))}:
            gap = int(step[i])
            if gap > 0:
                item = (gap, window.start + int(window.entry[i]), int(window.token[i]))
                (heapq.heappush if len(self.longest) < GAPS_KEPT else heapq.heappushpop)(self.longest, item)
        self.previous = int(ts[-1])

    def finish(self, scanned: Scanned) -> None:
        scanned.backward, scanned.gap_count, scanned.gaps = (
            self.backward,
            self.gap_count,
            sorted(self.longest, reverse=True),
        )


class _Sample:
    """Every stride-th access (by entry index), for the scatter views; at most `max_points` in the end."""

    def __init__(self, eng: Engine, entries: int, max_points: int) -> None:
        self.eng, self.max_points = eng, max_points
        self.stride = max(1, -(-entries // max(max_points, 1)))
        self.parts: list[dict[str, np.ndarray]] = []

    def add(self, window: _Window) -> None:
        keep = (window.start + window.entry) % self.stride == 0
        columns = ("ts", "token", "layer", "thread", "offset", "unit")
        self.parts.append({k: self.eng.to_host(getattr(window, k)[keep]) for k in columns})

    def finish(self, scanned: Scanned) -> None:
        sample = {k: np.concatenate([p[k] for p in self.parts]) for k in self.parts[0]} if self.parts else {}
        if sample and len(sample["ts"]) > self.max_points:
            pick = np.linspace(0, len(sample["ts"]) - 1, self.max_points).astype(np.int64)
            sample = {k: v[pick] for k, v in sample.items()}
        scanned.sample = sample


def scan(inputs: TensorInputs, options: Options, engine: Engine) -> Scanned:
    """Run the pass over the log of `inputs` joined to its model (and name table, when given) and return
    what it kept (:class:`Scanned`, host arrays)."""
    model, units = inputs.model, inputs.units
    unit_layer = np.array([layer_of(n) for n in model.tensors["name"].to_numpy()], np.int32)[units["tensor"].to_numpy()]
    t0, t1 = inputs.span()
    scanned = Scanned(inputs, unit_layer, options, t0, t1, engine.name)
    join = _Join(engine, inputs, unit_layer, scanned.names)
    n_layers = int(max(unit_layer.max(initial=-1), 0)) + 2
    parts = (
        _UnitTotals(engine, len(units)),
        _NameTotals(engine, scanned.names),
        _TokenTotals(engine, inputs.token_hint(), len(units), n_layers),
        _Pages(engine, model.file_bytes, options.page_bytes),
        _TimeViews(engine, t0, t1, options, model.file_bytes),
        _Timestamps(engine, options.gap_ns),
        _Sample(engine, inputs.log.entries, options.max_points),
    )
    for start, columns in inputs.windows(options.window_entries):
        window = join.window(start, columns)
        del columns
        if window is None:
            continue
        scanned.accesses += window.n
        for part in parts:
            part.add(window)
        del window
    for part in parts:
        part.finish(scanned)
    return scanned
