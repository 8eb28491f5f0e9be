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


def _unit_frame(s: Scanned) -> pd.DataFrame:
    """One row per unit with its tensor's name, layer and component."""
    t = s.model.tensors
    u = s.units
    tensor = u["tensor"].to_numpy()
    component = np.array([component_of(n) for n in t["name"]], dtype=object)
    return pd.DataFrame(
        {
            "tensor": tensor,
            "expert": u["expert"].to_numpy(),
            "name": t["name"].to_numpy()[tensor],
            "layer": s.unit_layer,
            "component": component[tensor],
            "offset": u["start"].to_numpy(),
            "n_bytes": (u["end"] - u["start"]).to_numpy(),
            "accesses": s.unit_count,
            "bytes_accessed": s.unit_bytes,
            "first_ns": _rel(s.unit_first, s.t0),
            "last_ns": _rel(s.unit_last, s.t0),
        }
    )


def _pair_split(s: Scanned) -> tuple[np.ndarray, np.ndarray]:
    """(token, unit) of each distinct pair."""
    n = max(len(s.units), 1)
    return s.pairs // n, s.pairs % n


def per_tensor(s: Scanned) -> pd.DataFrame:
    """Return one row per tensor of the model file (expert slices summed), hottest first: layer, component,
    type, shape, offset, n_bytes, accesses, bytes_accessed, tokens (distinct tokens that read it),
    first_ns / last_ns (first and last access from the log's start, -1 if never) and share of all accesses."""
    t = s.model.tensors
    uf = _unit_frame(s)
    g = uf.groupby("tensor")
    # pairs are sorted by (token, unit) and a tensor's units are consecutive, so (token, tensor) comes
    # out sorted too: its distinct values are where it changes
    tok, unit = _pair_split(s)
    key = tok * max(len(t), 1) + s.units["tensor"].to_numpy()[unit]
    first = np.ones(len(key), bool)
    first[1:] = key[1:] != key[:-1]
    tokens = np.bincount(s.units["tensor"].to_numpy()[unit][first], minlength=len(t))
    first = g["first_ns"].apply(lambda x: x[x >= 0].min() if (x >= 0).any() else -1)
    out = pd.DataFrame(
        {
            "name": t["name"],
            "layer": [layer_of(n) for n in t["name"]],
            "component": [component_of(n) for n in t["name"]],
            "type": t["type"],
            "shape": t["shape"],
            "offset": t["offset"],
            "n_bytes": t["n_bytes"],
            "accesses": g["accesses"].sum().to_numpy(),
            "bytes_accessed": g["bytes_accessed"].sum().to_numpy(),
            "tokens": tokens,
            "first_ns": first.to_numpy(),
            "last_ns": g["last_ns"].max().to_numpy(),
        }
    )
    out["share"] = out["accesses"] / max(s.accesses, 1)
    return out.sort_values(["accesses", "offset"], ascending=[False, True], kind="stable").reset_index(drop=True)


def intermediates(s: Scanned) -> pd.DataFrame:
    """Return one row per named tensor not read from the model file (activations, KV cache), busiest first."""
    df = pd.DataFrame(
        {
            "name": s.names,
            "layer": [layer_of(n) for n in s.names],
            "component": [component_of(n, weight=False) for n in s.names],
            "accesses": s.name_count,
            "bytes_accessed": s.name_bytes,
        }
    )
    df = df[df["accesses"] > 0]
    return df.sort_values("accesses", ascending=False, kind="stable").reset_index(drop=True)


def per_layer(s: Scanned, tensors: pd.DataFrame) -> pd.DataFrame:
    """Return one row per layer (-1: outside the layers): file bytes of its weights, weight accesses and bytes
    read, all bytes read (weights and intermediates, by the layer the log recorded for intermediates) and
    the weight bytes never touched."""
    w = tensors.assign(untouched=np.where(tensors["accesses"] == 0, tensors["n_bytes"], 0))
    uf = _unit_frame(s)
    untouched_units = uf[uf["accesses"] == 0].groupby("layer")["n_bytes"].sum()
    g = w.groupby("layer").agg(
        tensors=("name", "size"),
        file_bytes=("n_bytes", "sum"),
        weight_accesses=("accesses", "sum"),
        weight_bytes=("bytes_accessed", "sum"),
    )
    g["untouched_bytes"] = untouched_units.reindex(g.index, fill_value=0)
    all_bytes = s.token_layer.sum(axis=0) if s.token_layer.size else np.zeros(1, np.int64)
    layers = np.arange(len(all_bytes)) - 1
    total = pd.Series(all_bytes, index=layers)
    idx = g.index.union(total.index[total > 0])
    g = g.reindex(idx, fill_value=0)
    g["bytes_accessed"] = total.reindex(idx, fill_value=0)
    g["intermediate_bytes"] = (g["bytes_accessed"] - g["weight_bytes"]).clip(lower=0)
    return g.rename_axis("layer").reset_index()


def per_component(tensors: pd.DataFrame, inter: pd.DataFrame) -> pd.DataFrame:
    """Return one row per component (weights: attention q/k/v/o, FFN, norms, embeddings, output, experts, ...;
    intermediates: activations, kv_cache): tensors, file bytes, accesses, bytes read, untouched bytes."""
    w = tensors.assign(untouched_bytes=np.where(tensors["accesses"] == 0, tensors["n_bytes"], 0), weight=True)
    i = inter.assign(n_bytes=0, untouched_bytes=0, weight=False)
    both = pd.concat([w, i], ignore_index=True)
    g = both.groupby(["component", "weight"]).agg(
        tensors=("name", "size"),
        file_bytes=("n_bytes", "sum"),
        accesses=("accesses", "sum"),
        bytes_accessed=("bytes_accessed", "sum"),
        untouched_bytes=("untouched_bytes", "sum"),
    )
    return g.reset_index().sort_values("bytes_accessed", ascending=False, kind="stable").reset_index(drop=True)


def per_expert(s: Scanned, used: tuple | None = None) -> pd.DataFrame:
    """Return one row per (layer, expert) of the MoE expert tensors: accesses, bytes read, distinct tokens,
    share of the layer's expert accesses; empty for a dense model. `used` is :func:`expert_tokens` of `s`
    when the caller has it already."""
    uf = _unit_frame(s)
    e = uf[uf["expert"] >= 0]
    if e.empty:
        return pd.DataFrame(columns=["layer", "expert", "accesses", "bytes_accessed", "tokens", "share"])
    g = e.groupby(["layer", "expert"]).agg(accesses=("accesses", "sum"), bytes_accessed=("bytes_accessed", "sum"))
    keys, n_tok, width = used or expert_tokens(s)
    le = keys // n_tok
    tokens = pd.Series(np.bincount(le, minlength=int(le.max(initial=0)) + 1))
    g["tokens"] = tokens.reindex([(la + 1) * width + ex for la, ex in g.index], fill_value=0).to_numpy()
    g = g.reset_index()
    g["share"] = g["accesses"] / g.groupby("layer")["accesses"].transform("sum").clip(lower=1)
    return g


def expert_tokens(s: Scanned) -> tuple[np.ndarray, int, int]:
    """Return the distinct (layer, expert, token) triples, which experts each token used in each layer, as
    sorted keys ``((layer + 1) * width + expert) * n_tokens + token``, with n_tokens and width (keys stay
    integers: a frame of millions of triples is the slow part otherwise)."""
    tok, unit = _pair_split(s)
    expert = s.units["expert"].to_numpy()[unit]
    ex = expert >= 0
    n_tok = int(tok.max(initial=0)) + 2
    width = int(expert.max(initial=0)) + 1
    layer = s.unit_layer[unit[ex]].astype(np.int64) + 1
    return sorted_unique((layer * width + expert[ex]) * n_tok + tok[ex]), n_tok, width


def expert_reuse(s: Scanned, used: tuple | None = None) -> pd.DataFrame:
    """Return, per layer and token (from the second token on), the experts it used, how many of them the
    previous token used too, and that share (the reuse an expert cache would see). `used` as in
    :func:`per_expert`."""
    cols = ["layer", "token", "experts", "reused", "reuse"]
    keys, n_tok, width = used or expert_tokens(s)
    if not len(keys):
        return pd.DataFrame(columns=cols)
    prev = keys - 1
    at = np.minimum(np.searchsorted(keys, prev), len(keys) - 1)
    reused = (keys[at] == prev) & (keys % n_tok > 0)
    layer, token = keys // n_tok // width - 1, keys % n_tok
    group = (layer + 1) * n_tok + token  # bounded: (layers + 1) * tokens cells
    experts = np.bincount(group)
    again = np.bincount(group, weights=reused, minlength=len(experts)).astype(np.int64)
    g = np.flatnonzero(experts)
    had_prev = (g % n_tok > 0) & (experts[np.maximum(g - 1, 0)] > 0)
    g = g[had_prev]
    out = pd.DataFrame({"layer": g // n_tok - 1, "token": g % n_tok, "experts": experts[g], "reused": again[g]})
    out["reuse"] = out["reused"] / out["experts"]
    return out[cols]


def per_token(s: Scanned) -> pd.DataFrame:
    """Return one row per token id seen: phase, accesses, bytes read (all, weights, intermediates), distinct
    weight bytes (sum of the tensors / expert slices it touched), first/last ns and duration."""
    seen = s.tok_count > 0
    tok, unit = _pair_split(s)
    width = (s.units["end"] - s.units["start"]).to_numpy()
    distinct = np.bincount(tok, weights=width[unit], minlength=len(s.tok_count)).astype(np.int64)[: len(s.tok_count)]
    t = np.arange(len(s.tok_count))
    df = pd.DataFrame(
        {
            "token": t,
            "phase": s.tok_phase,
            "accesses": s.tok_count,
            "bytes_accessed": s.tok_bytes,
            "weight_bytes": s.tok_weight_bytes,
            "intermediate_bytes": s.tok_bytes - s.tok_weight_bytes,
            "distinct_weight_bytes": distinct,
            "first_ns": _rel(s.tok_first, s.t0),
            "last_ns": _rel(s.tok_last, s.t0),
        }
    )
    df["duration_ns"] = np.where(seen, s.tok_last - s.tok_first, 0)
    return df[seen].reset_index(drop=True)


def token_layer(s: Scanned) -> pd.DataFrame:
    """Return bytes read per (token, layer) in long form, nonzero cells only (layer -1: no layer)."""
    t, la = np.nonzero(s.token_layer)
    return pd.DataFrame({"token": t, "layer": la - 1, "bytes_accessed": s.token_layer[t, la]})


def hot_curve(s: Scanned) -> pd.DataFrame:
    """Return the hot/cold curve over units (tensors and expert slices), hottest first: cumulative share of
    accesses against cumulative share of the model's data section."""
    uf = _unit_frame(s)
    uf = uf.sort_values(["accesses", "offset"], ascending=[False, True], kind="stable")
    label = np.where(uf["expert"] >= 0, uf["name"] + "[" + uf["expert"].astype(str) + "]", uf["name"])
    acc, size = uf["accesses"].to_numpy(), uf["n_bytes"].to_numpy()
    return pd.DataFrame(
        {
            "rank": np.arange(1, len(uf) + 1),
            "unit": label,
            "accesses": acc,
            "n_bytes": size,
            "access_share": np.cumsum(acc) / max(acc.sum(), 1),
            "file_share": np.cumsum(size) / max(s.model.data_bytes, 1),
        }
    )


def file_share_for(curve: pd.DataFrame, access_share: float) -> float:
    """Return the smallest share of the file whose hottest units take `access_share` of the accesses."""
    reached = curve[curve["access_share"] >= access_share - 1e-12]
    return float(reached["file_share"].iloc[0]) if len(reached) else float("nan")


def threads(s: Scanned) -> pd.DataFrame:
    """Return accesses per thread and their share."""
    count = s.thread_time.sum(axis=1)
    df = pd.DataFrame({"thread": np.arange(len(count)), "accesses": count})
    df = df[df["accesses"] > 0].reset_index(drop=True)
    df["share"] = df["accesses"] / max(int(count.sum()), 1)
    return df


def ops(s: Scanned) -> pd.DataFrame:
    """Return log entries per operation type (the ggml op number the log recorded)."""
    op = np.nonzero(s.op_count)[0]
    return pd.DataFrame({"operation_type": op, "entries": s.op_count[op]})


def never_touched(s: Scanned) -> int:
    """Return the bytes of the data section in pages no access touched."""
    page = s.options.page_bytes
    first = s.model.data_start // page
    hits = s.page_hits[first:]
    starts = np.maximum(np.arange(first, first + len(hits)) * page, s.model.data_start)
    ends = np.minimum(starts - starts % page + page, s.model.file_bytes)
    return int(np.sum((ends - starts)[hits == 0]))


def sample(s: Scanned) -> pd.DataFrame:
    """Return the sampled accesses: ts_ns (from the log's start), token, layer, thread, offset (-1: not in
    the file) and unit (row of the units, -1: none)."""
    types = {"ts": np.int64, "token": np.int64, "layer": np.int32, "thread": np.int32, "offset": np.int64}
    types["unit"] = np.int64
    df = pd.DataFrame({c: s.sample[c] if s.sample else np.zeros(0, dtype) for c, dtype in types.items()})
    df["ts"] = df["ts"] - s.t0
    return df.rename(columns={"ts": "ts_ns"})


def timeline(s: Scanned) -> pd.DataFrame:
    """Return bytes read per time bin (the log's span cut into equal bins) by weights and by intermediates."""
    return pd.DataFrame(
        {
            "time_bin": np.arange(s.time_kind.shape[0]),
            "weight_bytes": s.time_kind[:, 0],
            "intermediate_bytes": s.time_kind[:, 1],
        }
    )


def _cells(matrix: np.ndarray, rows: str, columns: str, value: str) -> pd.DataFrame:
    """The nonzero cells of `matrix` in long form."""
    r, c = np.nonzero(matrix)
    return pd.DataFrame({rows: r, columns: c, value: matrix[r, c]})


def time_offset(s: Scanned) -> pd.DataFrame:
    """Return file accesses per time bin and file-offset bin (the file cut into equal bins; offsets beyond
    it in the last), nonzero cells only."""
    return _cells(s.time_offset, "time_bin", "offset_bin", "accesses")


def thread_time(s: Scanned) -> pd.DataFrame:
    """Return accesses per thread and time bin, nonzero cells only."""
    return _cells(s.thread_time, "thread", "time_bin", "accesses")


def views(s: Scanned) -> dict[str, pd.DataFrame]:
    """Return the tables behind the report's pre-binned and sampled views by name: sample, timeline,
    time_offset, thread_time."""
    return {"sample": sample(s), "timeline": timeline(s), "time_offset": time_offset(s), "thread_time": thread_time(s)}


def build(s: Scanned) -> dict[str, pd.DataFrame]:
    """Return every table by name."""
    tensors = per_tensor(s)
    inter = intermediates(s)
    used = expert_tokens(s)
    return {
        "tensors": tensors,
        "intermediates": inter,
        "layers": per_layer(s, tensors),
        "components": per_component(tensors, inter),
        "experts": per_expert(s, used),
        "expert_reuse": expert_reuse(s, used),
        "tokens": per_token(s),
        "token_layer": token_layer(s),
        "hot_curve": hot_curve(s),
        "threads": threads(s),
        "ops": ops(s),
    }
