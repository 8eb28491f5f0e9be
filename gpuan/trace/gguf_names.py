"""What a tensor is, from its name: its layer and its component (llama.cpp / GGUF naming)."""

from __future__ import annotations

import re

_LAYER = (re.compile(r"(?:^|\.)blk\.(\d+)\."), re.compile(r"-(\d+)$"), re.compile(r"_l(\d+)$"))

# first match wins: expert tensors before the plain FFN, the router before ffn_gate, norms before the rest
_WEIGHTS = (
    ("experts", re.compile(r"_exps(\.|$)")),
    ("shared_expert", re.compile(r"_shexp(\.|$)")),
    ("router", re.compile(r"ffn_gate_inp(\.|$)")),
    ("norms", re.compile(r"_norm(\.|$)")),
    ("embeddings", re.compile(r"^token_embd(\.|$)|^position_embd(\.|$)|^token_types(\.|$)")),
    ("output", re.compile(r"^output(\.|$)")),
    ("attn_qkv", re.compile(r"attn_qkv(\.|$)")),
    ("attn_q", re.compile(r"attn_q(\.|$)")),
    ("attn_k", re.compile(r"attn_k(\.|$)")),
    ("attn_v", re.compile(r"attn_v(\.|$)")),
    ("attn_o", re.compile(r"attn_output(\.|$)")),
    ("ffn", re.compile(r"ffn_(gate|up|down)(\.|$)")),
    ("rope", re.compile(r"rope_")),
)
_KV = re.compile(r"cache_[kv]|[kv]_cache|^kv_|_kv_")


def layer_of(name: str) -> int:
    """Return the layer number in a tensor name (``blk.12.attn_q.weight``, ``Qcur-12``, ``cache_k_l12``),
    or -1 for a tensor outside the layers."""
    for pattern in _LAYER:
        m = pattern.search(name)
        if m:
            return int(m.group(1))
    return -1


def component_of(name: str, weight: bool = True) -> str:
    """Return the component of a tensor: for a weight (read from the model file) one of experts,
    shared_expert, router, norms, embeddings, output, attn_qkv, attn_q, attn_k, attn_v, attn_o, ffn, rope
    or other; for an intermediate, kv_cache or activations."""
    if not weight:
        return "kv_cache" if _KV.search(name) else "activations"
    for component, pattern in _WEIGHTS:
        if pattern.search(name):
            return component
    return "other"
