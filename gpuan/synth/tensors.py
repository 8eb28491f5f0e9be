"""Synthetic models and tensor-access logs, for tests and benchmarks: a GGUF file written with
``gguf.GGUFWriter`` (F32, F16 and Q8_0 tensors, optional MoE expert tensors, chosen alignment) and the
log an instrumented llama.cpp would write while generating tokens with it, in any of the four formats."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pandas as pd

from gpuan.trace.gguf_map import ModelMap
from gpuan.trace.tensorlog.formats import DTYPES, FROM_BUFFER, FROM_DISK, NO_LAYER, NO_OFFSET
from gpuan.trace.tensorlog.write import open_writer

WEIGHT_BASE = 0x7F0000000000  # where the model file is mapped
BUFFER_BASE = 0x7E0000000000  # the compute buffer of intermediates
OP_RMS_NORM, OP_MUL_MAT, OP_MUL_MAT_ID, OP_GET_ROWS, OP_ADD = 1, 2, 3, 4, 5


def write_model(
    path: str | os.PathLike,
    layers: int = 2,
    n_embd: int = 64,
    n_ff: int = 128,
    vocab: int = 256,
    experts: int = 0,
    alignment: int | None = None,
    seed: int = 0,
) -> str:
    """Write a llama-like GGUF model: F16 embeddings, F32 norms, Q8_0 attention, F16 FFN (or, with
    `experts`, a router and 3-D ``ffn_*_exps`` tensors), F32 output; return the path."""
    import gguf

    Q8 = gguf.GGMLQuantizationType.Q8_0
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(os.fspath(path), "llama")
    w.add_block_count(layers)
    w.add_embedding_length(n_embd)
    if alignment:
        w.add_custom_alignment(alignment)
    if experts:
        w.add_expert_count(experts)

    def add(name: str, shape: tuple[int, ...], kind: str) -> None:
        a = rng.standard_normal(shape).astype(np.float32)
        if kind == "Q8_0":
            w.add_tensor(name, gguf.quants.quantize(a, Q8), raw_dtype=Q8)
        else:
            w.add_tensor(name, a.astype(np.float16 if kind == "F16" else np.float32))

    add("token_embd.weight", (vocab, n_embd), "F16")
    for i in range(layers):
        add(f"blk.{i}.attn_norm.weight", (n_embd,), "F32")
        for p in ("q", "k", "v", "output"):
            add(f"blk.{i}.attn_{p}.weight", (n_embd, n_embd), "Q8_0")
        add(f"blk.{i}.ffn_norm.weight", (n_embd,), "F32")
        if experts:
            add(f"blk.{i}.ffn_gate_inp.weight", (experts, n_embd), "F32")
            add(f"blk.{i}.ffn_gate_exps.weight", (experts, n_ff, n_embd), "F16")
            add(f"blk.{i}.ffn_up_exps.weight", (experts, n_ff, n_embd), "F16")
            add(f"blk.{i}.ffn_down_exps.weight", (experts, n_embd, n_ff), "F16")
        else:
            add(f"blk.{i}.ffn_gate.weight", (n_ff, n_embd), "F16")
            add(f"blk.{i}.ffn_up.weight", (n_ff, n_embd), "F16")
            add(f"blk.{i}.ffn_down.weight", (n_embd, n_ff), "F16")
    add("output_norm.weight", (n_embd,), "F32")
    add("output.weight", (vocab, n_embd), "F32")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return os.fspath(path)


@dataclass(frozen=True)
class Template:
    """One token's accesses, in order. Per row: layer (-1 none), thread, op, tensor (row of the model's
    tensors, -1 for an intermediate), name (intermediate's index in `names`, -1 for a weight), part offset
    and size within the tensor, expert slot (-1: not an expert access), embedding row flag."""

    rows: pd.DataFrame
    names: list[str]
    name_bytes: int


def template(model: ModelMap, threads: int = 4, top_k: int = 2) -> Template:
    """Return the per-token access template of a llama-like model (the order llama.cpp evaluates a token)."""
    t = model.tensors
    by_name = {n: i for i, n in enumerate(t["name"])}
    rows, names = [], []

    def weight(name: str, layer: int, op: int, split: bool = True, slot: int = -1, embedding: bool = False) -> None:
        i = by_name[name]
        n_bytes = int(t["n_bytes"][i])
        if slot >= 0:
            e = int(t["n_experts"][i])
            rows.append((layer, slot % threads, OP_MUL_MAT_ID, i, -1, 0, n_bytes // e, slot, False))
        elif split and threads > 1:
            part = n_bytes // threads
            for th in range(threads):
                size = part if th < threads - 1 else n_bytes - part * (threads - 1)
                rows.append((layer, th, op, i, -1, th * part, size, -1, False))
        else:
            rows.append((layer, 0, op, i, -1, 0, n_bytes, -1, embedding))

    def inter(name: str, layer: int, op: int = OP_ADD) -> None:
        if name not in names:
            names.append(name)
        rows.append((layer, 0, op, -1, names.index(name), 0, 4096, -1, False))

    weight("token_embd.weight", -1, OP_GET_ROWS, split=False, embedding=True)
    inter("inp_embd", -1)
    layers = 1 + max((int(n.split(".")[1]) for n in t["name"] if n.startswith("blk.")), default=-1)
    for la in range(layers):
        weight(f"blk.{la}.attn_norm.weight", la, OP_RMS_NORM, split=False)
        inter(f"attn_norm-{la}", la)
        for p, out in (("q", "Qcur"), ("k", "Kcur"), ("v", "Vcur")):
            weight(f"blk.{la}.attn_{p}.weight", la, OP_MUL_MAT)
            inter(f"{out}-{la}", la)
        inter(f"cache_k_l{la}", la)
        inter(f"cache_v_l{la}", la)
        inter(f"kq-{la}", la)
        weight(f"blk.{la}.attn_output.weight", la, OP_MUL_MAT)
        weight(f"blk.{la}.ffn_norm.weight", la, OP_RMS_NORM, split=False)
        inter(f"ffn_inp-{la}", la)
        if f"blk.{la}.ffn_gate_inp.weight" in by_name:
            weight(f"blk.{la}.ffn_gate_inp.weight", la, OP_MUL_MAT, split=False)
            for slot in range(top_k):
                for p in ("gate", "up", "down"):
                    weight(f"blk.{la}.ffn_{p}_exps.weight", la, OP_MUL_MAT_ID, slot=slot)
        else:
            for p in ("gate", "up", "down"):
                weight(f"blk.{la}.ffn_{p}.weight", la, OP_MUL_MAT)
        inter(f"ffn_out-{la}", la)
    weight("output_norm.weight", -1, OP_RMS_NORM, split=False)
    weight("output.weight", -1, OP_MUL_MAT)
    inter("result_output", -1)
    cols = ["layer", "thread", "op", "tensor", "name", "part", "size", "slot", "embedding"]
    return Template(pd.DataFrame(rows, columns=cols), names, 4096)


def expert_choices(tokens: int, layers: int, experts: int, top_k: int, seed: int = 0) -> np.ndarray:
    """Return (tokens, layers, top_k) expert ids: distinct per token and layer, skewed towards low ids so
    some experts are hot and consecutive tokens often share experts."""
    rng = np.random.default_rng(seed)
    score = rng.random((tokens, max(layers, 1), experts)) * (1.0 + np.arange(experts)) ** 0.7
    return np.argsort(score, axis=2)[:, :, :top_k]


def names_table(model: ModelMap, tpl: Template) -> pd.DataFrame:
    """Return the tensor name table an instrumented run would dump: weights (mapped file pointers, absolute
    offsets) then intermediates (compute-buffer pointers, no offset)."""
    t = model.tensors
    from gpuan.trace.gguf_names import layer_of

    rows = [
        (i, n, WEIGHT_BASE + int(o), int(o), int(b), layer_of(n))
        for i, (n, o, b) in enumerate(zip(t["name"], t["offset"], t["n_bytes"], strict=True))
    ]
    for j, n in enumerate(tpl.names):
        rows.append((len(t) + j, n, BUFFER_BASE + j * tpl.name_bytes, -1, tpl.name_bytes, layer_of(n)))
    df = pd.DataFrame(rows, columns=["tensor_idx", "tensor_name", "data_ptr", "file_offset", "size_bytes", "layer_id"])
    df["data_ptr"] = [f"0x{p:x}" for p in df["data_ptr"]]
    return df


def accesses64(
    model: ModelMap,
    tpl: Template,
    first_token: int,
    tokens: int,
    ts0: int,
    prompt: int = 4,
    experts: np.ndarray | None = None,
    whole_experts: bool = False,
    fmt: str = "seed64",
) -> np.ndarray:
    """Return the 64-byte entries of `tokens` tokens from `first_token`, timestamps from `ts0`. With
    `whole_experts` an expert access is logged as the whole tensor plus its expert id."""
    r = tpl.rows
    R = len(r)
    out = np.zeros(tokens * R, DTYPES[fmt])
    t = model.tensors
    tensor = r["tensor"].to_numpy()
    weight = tensor >= 0
    ti = np.maximum(tensor, 0)
    base_off = np.where(weight, t["offset"].to_numpy()[ti] + r["part"].to_numpy(), 0)
    size = r["size"].to_numpy().astype(np.int64)
    tok = np.repeat(np.arange(first_token, first_token + tokens), R)
    off = np.tile(base_off, tokens).astype(np.int64)
    sz = np.tile(size, tokens)
    slot = np.tile(r["slot"].to_numpy(), tokens)
    expert_id = np.full(tokens * R, 0xFF, np.int64)
    if experts is not None and (slot >= 0).any():
        layer = np.tile(r["layer"].to_numpy(), tokens)
        k = tok - first_token
        chosen = experts[k, np.maximum(layer, 0), np.maximum(slot, 0)]
        is_e = slot >= 0
        expert_id[is_e] = chosen[is_e]
        if not whole_experts:
            off[is_e] += chosen[is_e] * sz[is_e]
        else:
            sz[is_e] = np.tile(np.where(r["slot"] >= 0, t["n_bytes"].to_numpy()[ti], 0), tokens)[is_e]
    emb = np.tile(r["embedding"].to_numpy(), tokens)
    if emb.any():
        i = int(tensor[np.argmax(r["embedding"].to_numpy())])
        vocab = int(t["shape"][i].split("x")[1])
        row_bytes = int(t["n_bytes"][i]) // vocab
        off[emb] += (tok[emb] * 7919) % vocab * row_bytes  # the token's row of the embedding table
        sz[emb] = row_bytes
    dur = 200 + sz // 64
    ts = ts0 + np.cumsum(dur)
    name = np.tile(r["name"].to_numpy(), tokens)
    inter = name >= 0
    out["timestamp_ns"] = ts
    out["token_id"] = tok
    out["layer_id"] = np.where(
        np.tile(r["layer"].to_numpy(), tokens) < 0, NO_LAYER, np.tile(r["layer"].to_numpy(), tokens)
    )
    out["thread_id"] = np.tile(r["thread"].to_numpy(), tokens)
    out["operation_type"] = np.tile(r["op"].to_numpy(), tokens)
    out["phase"] = (tok >= prompt).astype(np.uint8)
    out["tensor_idx"] = np.where(inter, len(t) + name, np.tile(ti, tokens))
    out["tensor_ptr"] = np.where(inter, BUFFER_BASE + np.maximum(name, 0) * tpl.name_bytes, WEIGHT_BASE + off)
    out["file_offset"] = np.where(inter, np.uint64(NO_OFFSET), off.astype(np.uint64))
    out["size_bytes"] = sz
    out["expert_id"] = expert_id
    out["expert_rank"] = np.where(slot >= 0, slot, 0)
    out["routing_score"] = np.where(slot >= 0, 1000 * (slot + 1), 0)
    return out


def accesses_per_op(
    model: ModelMap, tpl: Template, tokens: int, fmt: str, prompt: int = 4, experts: np.ndarray | None = None
) -> np.ndarray:
    """Return the per-operation entries (``op256`` / ``op1024``) of `tokens` tokens: one entry per template
    row of thread 0 (a weight op reads its whole tensor and the layer's input activation); in ``op1024``
    the expert slots of one expert tensor are one MUL_MAT_ID entry with the selected expert ids."""
    t = model.tensors
    r = tpl.rows
    r0 = r[(r["thread"] == 0) | (r["slot"] >= 0)]
    recs = []
    ts = 1000
    for tok in range(tokens):
        done, last = set(), 0
        for row in r0.itertuples(index=False):
            srcs, exps = [], []
            if row.tensor >= 0:
                name = t["name"][row.tensor]
                off, size = int(t["offset"][row.tensor]), int(t["n_bytes"][row.tensor])
                if row.slot >= 0:
                    e = int(experts[tok, row.layer, row.slot])
                    if fmt == "op1024":
                        if (row.layer, row.tensor) in done:
                            continue
                        done.add((row.layer, row.tensor))
                        exps = [int(x) for x in experts[tok, row.layer]]
                    else:
                        width = size // int(t["n_experts"][row.tensor])
                        off, size = off + e * width, width
                elif row.embedding:
                    vocab = int(t["shape"][row.tensor].split("x")[1])
                    size //= vocab
                    off += (tok * 7919) % vocab * size
                srcs.append((name, WEIGHT_BASE + off, size, row.layer, FROM_DISK, off, row.tensor))
                dst = f"{name}-out"
            else:
                dst = tpl.names[row.name]
            # a weight op reads the activation written last; an intermediate op reads itself
            j = last if row.tensor >= 0 else row.name
            last = j
            srcs.append(
                (tpl.names[j], BUFFER_BASE + j * tpl.name_bytes, tpl.name_bytes, row.layer, FROM_BUFFER, j, len(t) + j)
            )
            recs.append((ts, tok, row.layer, row.thread, row.op, int(tok >= prompt), dst, srcs, exps))
            ts += 300 + sum(s[2] for s in srcs) // 64
    out = np.zeros(len(recs), DTYPES[fmt])
    for i, (ts_, tok, layer, thread, op, phase, dst, srcs, exps) in enumerate(recs):
        e = out[i]
        e["timestamp_ns"], e["token_id"], e["thread_id"], e["operation_type"], e["phase"] = ts_, tok, thread, op, phase
        e["layer_id"] = NO_LAYER if layer < 0 else layer
        e["num_sources"] = len(srcs)
        e["dst_name"] = dst.encode()
        for k, (name, ptr, size, lay, mem, where, idx) in enumerate(srcs):
            s = e["sources"][k]
            s["name"], s["ptr"], s["size"] = name.encode(), ptr, size
            s["layer"] = NO_LAYER if lay < 0 else lay
            s["memory_source"], s["disk_offset_or_buffer_id"], s["tensor_idx"] = mem, where, idx
        if fmt == "op1024" and exps:
            e["expert_ids"][: len(exps)] = exps
            e["num_experts"] = len(exps)
    return out


def write_log(
    path: str | os.PathLike,
    model: ModelMap,
    fmt: str = "seed64",
    tokens: int = 16,
    threads: int = 4,
    top_k: int = 2,
    prompt: int = 4,
    capacity: int | None = None,
    whole_experts: bool = False,
    seed: int = 0,
    batch_tokens: int = 256,
) -> Template:
    """Write a log of `tokens` generated tokens against `model` (capacity: the entries, unless given) and
    return the template it followed."""
    tpl = template(model, threads, top_k)
    n_exp = int(model.tensors["n_experts"].max())
    layers = int(tpl.rows["layer"].max()) + 1
    experts = expert_choices(tokens, layers, n_exp, top_k, seed) if n_exp else None
    if fmt in ("op256", "op1024"):
        batch = accesses_per_op(model, tpl, tokens, fmt, prompt, experts)
        with open_writer(path, fmt, capacity or len(batch)) as w:
            w.append(batch)
        return tpl
    with open_writer(path, fmt, capacity or tokens * len(tpl.rows)) as w:
        ts = 1000
        for first in range(0, tokens, batch_tokens):
            n = min(batch_tokens, tokens - first)
            ex = experts[first : first + n] if experts is not None else None
            batch = accesses64(model, tpl, first, n, ts, prompt, ex, whole_experts=whole_experts, fmt=fmt)
            w.append(batch)
            ts = int(batch["timestamp_ns"][-1])
    return tpl


def write_sample(directory: str | os.PathLike, tokens: int = 64) -> tuple[str, str, str]:
    """Write a sample to try ``gpuan tensors`` on: a 4-layer MoE model (8 experts, top-2), a seed64 log of
    `tokens` tokens on 4 threads, and its name table; return (model, log, names) paths."""
    d = os.fspath(directory)
    os.makedirs(d, exist_ok=True)
    model_path = write_model(os.path.join(d, "sample-moe.gguf"), layers=4, n_embd=128, n_ff=256, vocab=2048, experts=8)
    from gpuan.trace.gguf_map import read_gguf

    model = read_gguf(model_path)
    log_path = os.path.join(d, "sample.log")
    tpl = write_log(log_path, model, "seed64", tokens=tokens, capacity=1 << 16, prompt=8)
    names_path = os.path.join(d, "names.csv")
    names_table(model, tpl).to_csv(names_path, index=False)
    return model_path, log_path, names_path
