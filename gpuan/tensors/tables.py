"""The tables of a tensor-access analysis, built from what the pass kept (:class:`~gpuan.tensors.scan.Scanned`):
per tensor, per intermediate, per layer, per component, per expert, per token, token x layer, expert
reuse between consecutive tokens, the hot/cold curve, threads and operation types (:func:`build`); and the
pre-binned and sampled views the HTML report draws (:func:`views`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpuan.arrays import sorted_unique
from gpuan.tensors.scan import NEVER, Scanned
from gpuan.trace.gguf_names import component_of, layer_of


def _rel(ts: np.ndarray, t0: int) -> np.ndarray:
    """Timestamps relative to the log's start; -1 for never."""
    return np.where((ts == NEVER) | (ts < 0), -1, ts - t0)


def _unit_frame(scanned: Scanned) -> pd.DataFrame:
    """One row per unit with its tensor's name, layer and component."""
    model_tensors = scanned.model.tensors
    units = scanned.units
    tensor = units["tensor"].to_numpy()
    component = np.array([component_of(n) for n in model_tensors["name"]], dtype=object)
    return pd.DataFrame(
        {
            "tensor": tensor,
            "expert": units["expert"].to_numpy(),
            "name": model_tensors["name"].to_numpy()[tensor],
            "layer": scanned.unit_layer,
            "component": component[tensor],
            "offset": units["start"].to_numpy(),
            "n_bytes": (units["end"] - units["start"]).to_numpy(),
            "accesses": scanned.unit_count,
            "bytes_accessed": scanned.unit_bytes,
            "first_ns": _rel(scanned.unit_first, scanned.t0),
            "last_ns": _rel(scanned.unit_last, scanned.t0),
        }
    )


def _pair_split(scanned: Scanned) -> tuple[np.ndarray, np.ndarray]:
    """(token, unit) of each distinct pair."""
    n_units = max(len(scanned.units), 1)
    return scanned.pairs // n_units, scanned.pairs % n_units


def per_tensor(scanned: Scanned) -> pd.DataFrame:
    """Return one row per tensor of the model file (expert slices summed), hottest first: layer, component,
    type, shape, offset, n_bytes, accesses, bytes_accessed, tokens (distinct tokens that read it),
    first_ns / last_ns (first and last access from the log's start, -1 if never) and share of all accesses."""
    model_tensors = scanned.model.tensors
    by_unit = _unit_frame(scanned)
    grouped = by_unit.groupby("tensor")
    # pairs are sorted by (token, unit) and a tensor's units are consecutive, so (token, tensor) comes
    # out sorted too: its distinct values are where it changes
    token, unit = _pair_split(scanned)
    key = token * max(len(model_tensors), 1) + scanned.units["tensor"].to_numpy()[unit]
    first = np.ones(len(key), bool)
    first[1:] = key[1:] != key[:-1]
    tokens = np.bincount(scanned.units["tensor"].to_numpy()[unit][first], minlength=len(model_tensors))
    first = grouped["first_ns"].apply(lambda x: x[x >= 0].min() if (x >= 0).any() else -1)
    out = pd.DataFrame(
        {
            "name": model_tensors["name"],
            "layer": [layer_of(n) for n in model_tensors["name"]],
            "component": [component_of(n) for n in model_tensors["name"]],
            "type": model_tensors["type"],
            "shape": model_tensors["shape"],
            "offset": model_tensors["offset"],
            "n_bytes": model_tensors["n_bytes"],
            "accesses": grouped["accesses"].sum().to_numpy(),
            "bytes_accessed": grouped["bytes_accessed"].sum().to_numpy(),
            "tokens": tokens,
            "first_ns": first.to_numpy(),
            "last_ns": grouped["last_ns"].max().to_numpy(),
        }
    )
    out["share"] = out["accesses"] / max(scanned.accesses, 1)
    return out.sort_values(["accesses", "offset"], ascending=[False, True], kind="stable").reset_index(drop=True)


def intermediates(scanned: Scanned) -> pd.DataFrame:
    """Return one row per named tensor not read from the model file (activations, KV cache), busiest first."""
    df = pd.DataFrame(
        {
            "name": scanned.names,
            "layer": [layer_of(n) for n in scanned.names],
            "component": [component_of(n, weight=False) for n in scanned.names],
            "accesses": scanned.name_count,
            "bytes_accessed": scanned.name_bytes,
        }
    )
    df = df[df["accesses"] > 0]
    return df.sort_values("accesses", ascending=False, kind="stable").reset_index(drop=True)


def per_layer(scanned: Scanned, tensors: pd.DataFrame) -> pd.DataFrame:
    """Return one row per layer (-1: outside the layers): file bytes of its weights, weight accesses and bytes
    read, all bytes read (weights and intermediates, by the layer the log recorded for intermediates) and
    the weight bytes never touched."""
    by_unit = _unit_frame(scanned)
    untouched_units = by_unit[by_unit["accesses"] == 0].groupby("layer")["n_bytes"].sum()
    layers = tensors.groupby("layer").agg(
        tensors=("name", "size"),
        file_bytes=("n_bytes", "sum"),
        weight_accesses=("accesses", "sum"),
        weight_bytes=("bytes_accessed", "sum"),
    )
    layers["untouched_bytes"] = untouched_units.reindex(layers.index, fill_value=0)
    all_bytes = scanned.token_layer.sum(axis=0) if scanned.token_layer.size else np.zeros(1, np.int64)
    total = pd.Series(all_bytes, index=np.arange(len(all_bytes)) - 1)  # column 0 of token_layer: no layer
    index = layers.index.union(total.index[total > 0])
    layers = layers.reindex(index, fill_value=0)
    layers["bytes_accessed"] = total.reindex(index, fill_value=0)
    layers["intermediate_bytes"] = (layers["bytes_accessed"] - layers["weight_bytes"]).clip(lower=0)
    return layers.rename_axis("layer").reset_index()


def per_component(tensors: pd.DataFrame, inter: pd.DataFrame) -> pd.DataFrame:
    """Return one row per component (weights: attention q/k/v/o, FFN, norms, embeddings, output, experts, ...;
    intermediates: activations, kv_cache): tensors, file bytes, accesses, bytes read, untouched bytes."""
    weights = tensors.assign(untouched_bytes=np.where(tensors["accesses"] == 0, tensors["n_bytes"], 0), weight=True)
    intermediates = inter.assign(n_bytes=0, untouched_bytes=0, weight=False)
    both = pd.concat([weights, intermediates], ignore_index=True)
    grouped = both.groupby(["component", "weight"]).agg(
        tensors=("name", "size"),
        file_bytes=("n_bytes", "sum"),
        accesses=("accesses", "sum"),
        bytes_accessed=("bytes_accessed", "sum"),
        untouched_bytes=("untouched_bytes", "sum"),
    )
    return grouped.reset_index().sort_values("bytes_accessed", ascending=False, kind="stable").reset_index(drop=True)


def per_expert(scanned: Scanned, used: tuple | None = None) -> pd.DataFrame:
    """Return one row per (layer, expert) of the MoE expert tensors: accesses, bytes read, distinct tokens,
    share of the layer's expert accesses; empty for a dense model. `used` is :func:`expert_tokens` of `scanned`
    when the caller has it already."""
    by_unit = _unit_frame(scanned)
    expert_units = by_unit[by_unit["expert"] >= 0]
    if expert_units.empty:
        return pd.DataFrame(columns=["layer", "expert", "accesses", "bytes_accessed", "tokens", "share"])
    grouped = expert_units.groupby(["layer", "expert"]).agg(
        accesses=("accesses", "sum"), bytes_accessed=("bytes_accessed", "sum")
    )
    keys, n_tokens, width = used or expert_tokens(scanned)
    layer_expert = keys // n_tokens
    tokens = pd.Series(np.bincount(layer_expert, minlength=int(layer_expert.max(initial=0)) + 1))
    grouped["tokens"] = tokens.reindex(
        [(layer + 1) * width + expert for layer, expert in grouped.index], fill_value=0
    ).to_numpy()
    grouped = grouped.reset_index()
    grouped["share"] = grouped["accesses"] / grouped.groupby("layer")["accesses"].transform("sum").clip(lower=1)
    return grouped


def expert_tokens(scanned: Scanned) -> tuple[np.ndarray, int, int]:
    """Return the distinct (layer, expert, token) triples, which experts each token used in each layer, as
    sorted keys ``((layer + 1) * width + expert) * n_tokens + token``, with n_tokens and width (keys stay
    integers: a frame of millions of triples is the slow part otherwise)."""
    token, unit = _pair_split(scanned)
    expert = scanned.units["expert"].to_numpy()[unit]
    is_expert = expert >= 0
    n_tokens = int(token.max(initial=0)) + 2
    width = int(expert.max(initial=0)) + 1
    layer = scanned.unit_layer[unit[is_expert]].astype(np.int64) + 1
    return sorted_unique((layer * width + expert[is_expert]) * n_tokens + token[is_expert]), n_tokens, width


def expert_reuse(scanned: Scanned, used: tuple | None = None) -> pd.DataFrame:
    """Return, per layer and token (from the second token on), the experts it used, how many of them the
    previous token used too, and that share (the reuse an expert cache would see). `used` as in
    :func:`per_expert`."""
    columns = ["layer", "token", "experts", "reused", "reuse"]
    keys, n_tokens, width = used or expert_tokens(scanned)
    if not len(keys):
        return pd.DataFrame(columns=columns)
    previous = keys - 1
    at = np.minimum(np.searchsorted(keys, previous), len(keys) - 1)
    reused = (keys[at] == previous) & (keys % n_tokens > 0)
    layer, token = keys // n_tokens // width - 1, keys % n_tokens
    group = (layer + 1) * n_tokens + token  # bounded: (layers + 1) * tokens cells
    experts = np.bincount(group)
    again = np.bincount(group, weights=reused, minlength=len(experts)).astype(np.int64)
    cells = np.flatnonzero(experts)
    had_prev = (cells % n_tokens > 0) & (experts[np.maximum(cells - 1, 0)] > 0)
    cells = cells[had_prev]
    out = pd.DataFrame(
        {"layer": cells // n_tokens - 1, "token": cells % n_tokens, "experts": experts[cells], "reused": again[cells]}
    )
    out["reuse"] = out["reused"] / out["experts"]
    return out[columns]


def per_token(scanned: Scanned) -> pd.DataFrame:
    """Return one row per token id seen: phase, accesses, bytes read (all, weights, intermediates), distinct
    weight bytes (sum of the tensors / expert slices it touched), first/last ns and duration."""
    seen = scanned.tok_count > 0
    token, unit = _pair_split(scanned)
    width = (scanned.units["end"] - scanned.units["start"]).to_numpy()
    distinct = np.bincount(token, weights=width[unit], minlength=len(scanned.tok_count)).astype(np.int64)[
        : len(scanned.tok_count)
    ]
    token_ids = np.arange(len(scanned.tok_count))
    frame = pd.DataFrame(
        {
            "token": token_ids,
            "phase": scanned.tok_phase,
            "accesses": scanned.tok_count,
            "bytes_accessed": scanned.tok_bytes,
            "weight_bytes": scanned.tok_weight_bytes,
            "intermediate_bytes": scanned.tok_bytes - scanned.tok_weight_bytes,
            "distinct_weight_bytes": distinct,
            "first_ns": _rel(scanned.tok_first, scanned.t0),
            "last_ns": _rel(scanned.tok_last, scanned.t0),
        }
    )
    frame["duration_ns"] = np.where(seen, scanned.tok_last - scanned.tok_first, 0)
    return frame[seen].reset_index(drop=True)


def token_layer(scanned: Scanned) -> pd.DataFrame:
    """Return bytes read per (token, layer) in long form, nonzero cells only (layer -1: no layer)."""
    cells = _cells(scanned.token_layer, "token", "layer", "bytes_accessed")
    cells["layer"] -= 1  # column 0 of token_layer: no layer
    return cells


def hot_curve(scanned: Scanned) -> pd.DataFrame:
    """Return the hot/cold curve over units (tensors and expert slices), hottest first: cumulative share of
    accesses against cumulative share of the model's data section."""
    by_unit = _unit_frame(scanned)
    by_unit = by_unit.sort_values(["accesses", "offset"], ascending=[False, True], kind="stable")
    label = np.where(
        by_unit["expert"] >= 0, by_unit["name"] + "[" + by_unit["expert"].astype(str) + "]", by_unit["name"]
    )
    accesses, size = by_unit["accesses"].to_numpy(), by_unit["n_bytes"].to_numpy()
    return pd.DataFrame(
        {
            "rank": np.arange(1, len(by_unit) + 1),
            "unit": label,
            "accesses": accesses,
            "n_bytes": size,
            "access_share": np.cumsum(accesses) / max(accesses.sum(), 1),
            "file_share": np.cumsum(size) / max(scanned.model.data_bytes, 1),
        }
    )


def file_share_for(curve: pd.DataFrame, access_share: float) -> float:
    """Return the smallest share of the file whose hottest units take `access_share` of the accesses."""
    reached = curve[curve["access_share"] >= access_share - 1e-12]
    return float(reached["file_share"].iloc[0]) if len(reached) else float("nan")


def threads(scanned: Scanned) -> pd.DataFrame:
    """Return accesses per thread and their share."""
    count = scanned.thread_time.sum(axis=1)
    frame = pd.DataFrame({"thread": np.arange(len(count)), "accesses": count})
    frame = frame[frame["accesses"] > 0].reset_index(drop=True)
    frame["share"] = frame["accesses"] / max(int(count.sum()), 1)
    return frame


def ops(scanned: Scanned) -> pd.DataFrame:
    """Return log entries per operation type (the ggml op number the log recorded)."""
    op = np.nonzero(scanned.op_count)[0]
    return pd.DataFrame({"operation_type": op, "entries": scanned.op_count[op]})


def never_touched(scanned: Scanned) -> int:
    """Return the bytes of the data section in pages no access touched."""
    page = scanned.options.page_bytes
    first = scanned.model.data_start // page
    hits = scanned.page_hits[first:]
    starts = np.maximum(np.arange(first, first + len(hits)) * page, scanned.model.data_start)
    ends = np.minimum(starts - starts % page + page, scanned.model.file_bytes)
    return int(np.sum((ends - starts)[hits == 0]))


def sample(scanned: Scanned) -> pd.DataFrame:
    """Return the sampled accesses: ts_ns (from the log's start), token, layer, thread, offset (-1: not in
    the file) and unit (row of the units, -1: none)."""
    types = {"ts": np.int64, "token": np.int64, "layer": np.int32, "thread": np.int32, "offset": np.int64}
    types["unit"] = np.int64
    df = pd.DataFrame({c: scanned.sample[c] if scanned.sample else np.zeros(0, dtype) for c, dtype in types.items()})
    df["ts"] = df["ts"] - scanned.t0
    return df.rename(columns={"ts": "ts_ns"})


def timeline(scanned: Scanned) -> pd.DataFrame:
    """Return bytes read per time bin (the log's span cut into equal bins) by weights and by intermediates."""
    return pd.DataFrame(
        {
            "time_bin": np.arange(scanned.time_kind.shape[0]),
            "weight_bytes": scanned.time_kind[:, 0],
            "intermediate_bytes": scanned.time_kind[:, 1],
        }
    )


def _cells(matrix: np.ndarray, rows: str, columns: str, value: str) -> pd.DataFrame:
    """The nonzero cells of `matrix` in long form."""
    row, column = np.nonzero(matrix)
    return pd.DataFrame({rows: row, columns: column, value: matrix[row, column]})


def time_offset(scanned: Scanned) -> pd.DataFrame:
    """Return file accesses per time bin and file-offset bin (the file cut into equal bins; offsets beyond
    it in the last), nonzero cells only."""
    return _cells(scanned.time_offset, "time_bin", "offset_bin", "accesses")


def thread_time(scanned: Scanned) -> pd.DataFrame:
    """Return accesses per thread and time bin, nonzero cells only."""
    return _cells(scanned.thread_time, "thread", "time_bin", "accesses")


def views(scanned: Scanned) -> dict[str, pd.DataFrame]:
    """Return the tables behind the report's pre-binned and sampled views by name: sample, timeline,
    time_offset, thread_time."""
    return {
        "sample": sample(scanned),
        "timeline": timeline(scanned),
        "time_offset": time_offset(scanned),
        "thread_time": thread_time(scanned),
    }


def build(scanned: Scanned) -> dict[str, pd.DataFrame]:
    """Return every table by name."""
    tensors = per_tensor(scanned)
    inter = intermediates(scanned)
    used = expert_tokens(scanned)
    return {
        "tensors": tensors,
        "intermediates": inter,
        "layers": per_layer(scanned, tensors),
        "components": per_component(tensors, inter),
        "experts": per_expert(scanned, used),
        "expert_reuse": expert_reuse(scanned, used),
        "tokens": per_token(scanned),
        "token_layer": token_layer(scanned),
        "hot_curve": hot_curve(scanned),
        "threads": threads(scanned),
        "ops": ops(scanned),
    }
