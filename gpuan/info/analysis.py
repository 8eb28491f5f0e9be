"""What ``gpuan info`` reports: counts per kind, devices, streams, ranks, span, busy time, top kernels."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gpuan.arrays import unique_rows
from gpuan.engine import Engine, resolve
from gpuan.engine.intervals import busy_time
from gpuan.engine.parts import Parts, tagged
from gpuan.result import Result
from gpuan.trace.kinds import KINDS
from gpuan.trace.projection import Projection, projection
from gpuan.trace.table import NULL64, Trace, is_one_of

GPU_ACTIVITY = ("kernel", "memcpy", "memset")
#: what categories that gpuan does not analyse hold (Kineto's activity types), named in the summary so that
#: they are not silently counted as "other"; a key ending in "_" covers every category it begins
OTHER_CATEGORIES = {
    "cuda_profiler_range": "CUPTI range profiling (counter ranges; not timed GPU work)",
    "mtia_": "Meta MTIA accelerator activity (not analysed)",
    "xpu_": "Intel XPU activity (not analysed)",
    "privateuse1_": "a PyTorch out-of-tree backend's activity (not analysed)",
    "cpu_instant_event": "instant markers (memory allocations, iteration starts)",
    "overhead": "profiler overhead",
    "cuda_sync": "CUDA synchronisation",
    "ac2g": "flow arrows from launches to GPU work",
    "fwdbwd": "flow arrows from forward to backward ops",
    "trace": "the profiler's own spans",
    "(none)": "events without a category",
}


def reads() -> Projection:
    """Return what :func:`analyse` reads of the event table (it counts events of every kind)."""
    return projection(("ts", "dur", "name", "cat", "kind", "device", "stream", "rank"))


KINDS_SCHEMA = pa.schema([("kind", pa.string()), ("events", pa.int64())])
OTHER_SCHEMA = pa.schema([("category", pa.string()), ("events", pa.int64()), ("what", pa.string())])
DEVICES_SCHEMA = pa.schema(
    [("id", pa.int64()), ("name", pa.string()), ("sms", pa.int64()), ("rocm_agent", pa.int64()),
     ("mapped_by", pa.string())]
)  # fmt: skip
STREAMS_SCHEMA = pa.schema(
    [(column, pa.int64()) for column in ("rank", "device", "stream", "events", "kernels", "kernel_ns", "busy_ns")]
)
KERNELS_SCHEMA = pa.schema(
    [("name", pa.string()), ("count", pa.int64()), ("total_ns", pa.int64()), ("mean_ns", pa.float64()),
     ("share", pa.float64())]
)  # fmt: skip


def analyse(trace: Trace, *, engine: Engine | str | None = None, top: int = 10) -> Result:
    """Return what is in `trace` as a Result named "info".

    Tables: ``kinds`` (kind, events; kinds with events only), ``other_categories`` (category, events,
    what: the categories of the events of kind "other"), ``devices`` (id, name, sms, rocm_agent,
    mapped_by: the devices with GPU activity), ``streams`` (rank, device, stream, events, kernels,
    kernel_ns, busy_ns: per GPU stream) and ``top_kernels`` (name, count, total_ns, mean_ns, share: the
    `top` kernels by total time). Summary: source, format, events, flows, ranks, span_ns, start_ns,
    end_ns (times in ns from the trace's start)."""
    return combine(tagged(partial(trace, engine=engine), 0), trace.metadata, top=top)


#: the tables of :func:`partial`: what one rank (or a whole trace) holds, in sums and rows that add up
PART_SCHEMAS = {
    "kinds": KINDS_SCHEMA,
    "other_categories": pa.schema([("category", pa.string()), ("events", pa.int64())]),
    "ranks": pa.schema([("rank", pa.int64())]),
    "devices": pa.schema([("device", pa.int64())]),
    "streams": STREAMS_SCHEMA,
    "kernels": pa.schema([("name", pa.string()), ("total_ns", pa.int64()), ("count", pa.int64())]),
    "totals": pa.schema([("events", pa.int64()), ("flows", pa.int64()), ("start_ns", pa.int64()),
                         ("end_ns", pa.int64())]),
}  # fmt: skip


def partial(trace: Trace, *, engine: Engine | str | None = None) -> Parts:
    """Return what :func:`combine` makes the info of: the events per kind and per category of kind
    "other", the ranks and devices that occur, the rows of the GPU streams (each stream is of one rank),
    the kernels' time and count by name, and the totals (events, flows, earliest start and latest end,
    null without a time). The partials of a run's ranks (each on the run's clock), concatenated, give the
    info of the merged run: ``gpuan info RUN_DIR`` under ``mpirun`` makes one per rank."""
    engine = resolve(engine)
    ev = trace.events
    # decoded once: counted here and filtered by _other_categories
    kind = ev["kind"].combine_chunks().dictionary_decode() if ev.num_rows else None
    kinds = [] if kind is None else [(item["values"].as_py(), item["counts"].as_py()) for item in pc.value_counts(kind)]
    start, end = _span(ev)
    tables = {
        "kinds": {"kind": [k for k, _ in kinds], "events": [n for _, n in kinds]},
        "other_categories": _other_categories(ev, kind),
        "ranks": {"rank": pc.unique(ev["rank"]).drop_null().cast(pa.int64())},
        "devices": {"device": pc.unique(ev["device"]).drop_null().cast(pa.int64())},
        "streams": _streams(trace.of_kind(*GPU_ACTIVITY), engine),
        "kernels": _kernel_times(trace.of_kind("kernel")),
        "totals": {"events": [ev.num_rows], "flows": [trace.flow_count], "start_ns": [start], "end_ns": [end]},
    }
    return {name: _table(rows, PART_SCHEMAS[name]) for name, rows in tables.items()}


def _table(rows: dict | list, schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=schema) if isinstance(rows, list) else pa.table(rows, schema=schema)


def combine(parts: Parts, metadata: dict, *, top: int = 10) -> Result:
    """Return the info Result (see :func:`analyse`) of the partials `parts` (:func:`partial`, tagged with
    their part by :mod:`gpuan.engine.parts` and in part order) of a trace whose `metadata` (the merged
    run's, for a run's ranks) gives its source, format and devices."""
    counted = parts["kinds"].group_by("kind", use_threads=False).aggregate([("events", "sum")])
    per_kind = dict.fromkeys(KINDS, 0) | dict(zip(counted["kind"].to_pylist(), counted["events_sum"].to_pylist()))
    totals = parts["totals"]
    ranks = sorted(set(parts["ranks"]["rank"].to_pylist()))
    start, end = _earliest_latest(totals)
    kinds = [{"kind": k, "events": v} for k, v in per_kind.items() if v]
    tables = {
        "kinds": pa.Table.from_pylist(kinds, schema=KINDS_SCHEMA),
        "other_categories": pa.Table.from_pylist(_categories(parts["other_categories"]), schema=OTHER_SCHEMA),
        "devices": pa.Table.from_pylist(_devices(metadata, parts["devices"]["device"]), schema=DEVICES_SCHEMA),
        "streams": _sorted_streams(parts["streams"]),
        "top_kernels": pa.Table.from_pylist(_top_kernels(parts["kernels"], top), schema=KERNELS_SCHEMA),
    }
    summary = {
        "source": metadata.get("source"),
        "format": metadata.get("format"),
        "events": int(pc.sum(totals["events"]).as_py() or 0),
        "flows": int(pc.sum(totals["flows"]).as_py() or 0),
        "ranks": ranks,
        "span_ns": end - start,
        "start_ns": start,
        "end_ns": end,
    }
    return Result("info", tables, summary)


def _earliest_latest(totals: pa.Table) -> tuple[int, int]:
    """Return the (earliest start, latest end) over the partials' totals: (0, 0) without events, 0 for
    either where no event has a time."""
    if not pc.sum(totals["events"]).as_py():
        return 0, 0
    return int(pc.min(totals["start_ns"]).as_py() or 0), int(pc.max(totals["end_ns"]).as_py() or 0)


def _other_categories(ev: pa.Table, kind: pa.Array | None) -> list[dict]:
    """Return the categories of the events of kind "other" with their events. `kind` is the events' kind
    column decoded (None when there are no events)."""
    if kind is None:
        return []
    cats = pc.fill_null(ev["cat"].combine_chunks().dictionary_decode().filter(pc.equal(kind, "other")), "(none)")
    return [{"category": c["values"].as_py(), "events": c["counts"].as_py()} for c in pc.value_counts(cats)]


def _categories(counts: pa.Table) -> list[dict]:
    """Return the categories of kind "other" of the partials' `counts`, most events first: category,
    events, and what the category holds where gpuan knows it."""
    summed = counts.group_by("category", use_threads=False).aggregate([("events", "sum")])
    counted = sorted(zip(summed["category"].to_pylist(), summed["events_sum"].to_pylist()), key=lambda x: (-x[1], x[0]))
    return [{"category": cat, "events": n, "what": _category_note(cat)} for cat, n in counted]


def _category_note(cat: str) -> str | None:
    """Return what a category that gpuan does not analyse holds, or None when gpuan does not know it."""
    for key, note in OTHER_CATEGORIES.items():
        if cat == key or (key.endswith("_") and cat.startswith(key)):
            return note
    return None


def _span(ev: pa.Table) -> tuple[int | None, int | None]:
    """Return the (earliest start, latest end) of the events, in ns; None where no event has a time."""
    if ev.num_rows == 0:
        return None, None
    ends = pc.add(ev["ts"], pc.fill_null(ev["dur"], 0))
    return pc.min(ev["ts"]).as_py(), pc.max(ends).as_py()


def _devices(metadata: dict, used: pa.ChunkedArray) -> list[dict]:
    """Return the devices that have GPU activity (`used`: the device ids the events hold): id, name and SM
    count where the trace's `metadata` has them, and the ROCm agent id its events carry with the evidence
    that mapped it (else None)."""
    listed = metadata.get("device_properties") or []
    # only whole-number ids can match the device column (a damaged file's list or dict id would not hash)
    props = {p["id"]: p for p in listed if isinstance(p, dict) and isinstance(p.get("id"), int)}
    agents = metadata.get("device_agents") or {}
    out = []
    for device in sorted(set(used.to_pylist())):
        known = props.get(device, {})
        agent = agents.get("agents", {}).get(str(device))
        out.append({
            "id": device, "name": _text_or_none(known.get("name")), "sms": _int_or_none(known.get("numSms")),
            "rocm_agent": _int_or_none(agent), "mapped_by": None if agent is None else _text_or_none(agents["basis"]),
        })  # fmt: skip
    return out


def _text_or_none(value: object) -> str | None:
    """Return a value of the trace's metadata as text (None stays None): names are text in every trace,
    and the table's column must hold one type whatever a damaged file puts there."""
    return None if value is None else str(value)


def _int_or_none(value: object) -> int | None:
    """Return a whole number of the trace's metadata, or None where it is none (absent or damaged)."""
    whole = isinstance(value, int) and not isinstance(value, bool)
    return value if whole and -(2**63) <= value < 2**63 else None


def _streams(gpu: pa.Table, engine: Engine) -> list[dict]:
    """Return per (rank, device, stream) of the GPU activity rows: events, kernels, kernel time, and busy
    time (the union of their kernel, memcpy and memset intervals)."""
    rows = gpu.select(["rank", "device", "stream", "kind", "ts", "dur"])
    if rows["ts"].null_count:
        rows = rows.filter(pc.is_valid(rows["ts"]))
    if rows.num_rows == 0:
        return []
    null = NULL64
    keys = [rows[column].cast(pa.int64()).fill_null(null).to_numpy() for column in ("rank", "device", "stream")]
    uniq, gid = unique_rows(keys)
    n_groups = uniq.shape[0]
    ts = rows["ts"].to_numpy()
    end = ts + rows["dur"].fill_null(0).to_numpy()
    is_kernel = is_one_of(rows["kind"], ["kernel"])
    busy = engine.to_host(busy_time(engine.asarray(gid), engine.asarray(ts), engine.asarray(end), n_groups, engine))
    n_events = np.bincount(gid, minlength=n_groups)
    n_kernels = np.bincount(gid[is_kernel], minlength=n_groups)
    k_time = np.zeros(n_groups, np.int64)
    np.add.at(k_time, gid[is_kernel], (end - ts)[is_kernel])
    out = []
    for i, key in enumerate(uniq.tolist()):
        rank, device, stream = (None if v == null else v for v in key)
        counts = dict(events=int(n_events[i]), kernels=int(n_kernels[i]), kernel_ns=int(k_time[i]))
        out.append(dict(rank=rank, device=device, stream=stream, **counts, busy_ns=int(busy[i])))
    return out


def _sorted_streams(rows: pa.Table) -> pa.Table:
    """Return the partials' stream rows (each stream is of one rank) ordered by (rank, device, stream),
    missing values first."""
    rows = rows.select(STREAMS_SCHEMA.names)
    if rows.num_rows < 2:
        return rows
    keys = [rows[c].fill_null(NULL64).to_numpy() for c in ("stream", "device", "rank")]
    return rows.take(pa.array(np.lexsort(keys)))


def _kernel_times(kernels: pa.Table) -> dict:
    """Return the kernel rows' time and count by name."""
    if kernels.num_rows == 0:
        return {"name": [], "total_ns": [], "count": []}
    # summed per dictionary code first: decoding every row's name would copy gigabytes of strings (and
    # overflow an Arrow string array) on a trace of millions of kernels
    names = kernels["name"].combine_chunks()
    codes = names.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64) + 1  # 0: no name
    dur = kernels["dur"].fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    order = np.argsort(codes, kind="stable")
    codes, dur = codes[order], dur[order]
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
    words = pa.concat_arrays([pa.nulls(1, pa.string()), names.dictionary.cast(pa.string())])
    per_code = pa.table({
        "name": words.take(pa.array(codes[starts])),
        "dur_sum": np.add.reduceat(dur, starts),
        "dur_count": np.diff(np.r_[starts, codes.size]),
    })  # fmt: skip
    # a dictionary may hold a word twice (chunks unified by concatenation): one row per name
    agg = per_code.group_by("name", use_threads=False).aggregate([("dur_sum", "sum"), ("dur_count", "sum")])
    return {"name": agg["name"], "total_ns": agg["dur_sum_sum"], "count": agg["dur_count_sum"]}


def _top_kernels(times: pa.Table, top: int) -> list[dict]:
    """Return the `top` kernels of the partials' kernel `times` by total time: name, count, total, mean, and
    share of kernel time."""
    if times.num_rows == 0:
        return []
    agg = times.group_by("name", use_threads=False).aggregate([("total_ns", "sum"), ("count", "sum")])
    agg = agg.sort_by([("total_ns_sum", "descending"), ("name", "ascending")])
    total = int(pc.sum(times["total_ns"]).as_py() or 0)
    out = []
    for row in agg.slice(0, top).to_pylist():
        out.append(
            {
                "name": row["name"],
                "count": row["count_sum"],
                "total_ns": row["total_ns_sum"],
                "mean_ns": row["total_ns_sum"] / row["count_sum"],
                "share": row["total_ns_sum"] / total if total else 0.0,
            }
        )
    return out
