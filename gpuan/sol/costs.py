"""The cost model: FLOPs and bytes of one operator call from its shapes, dtypes and scalar arguments.

Each model reads the profiler's record of a call (``Input Dims``, ``Input type``, ``Concrete Inputs``,
already parsed from JSON) and returns a :class:`Cost`, or None when the call cannot be modelled (an
unknown operator, or shapes the trace did not record). Models are plain functions, one per operator
family, so each can be checked against a hand computation.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import NamedTuple

from gpuan.sol.dtypes import SCALAR_TYPES, dtype_of
from gpuan.sol.schemas import functional

#: the report's layer types, in report order
CATEGORIES = (
    "gemm", "attention", "conv", "norm", "softmax", "elementwise", "reduction", "embedding", "copy", "unmodelled",
)  # fmt: skip
#: categories whose arithmetic runs on tensor (matrix) cores where the dtype allows
MATRIX_CATEGORIES = frozenset({"gemm", "attention", "conv"})


class Cost(NamedTuple):
    """FLOPs and bytes of one call; ``dtype`` is the operands' element type (fp32, bf16, fp8, ...)."""

    flops: float
    bytes: float
    category: str
    dtype: str
    #: the tensor the call writes, as (shape, bytes per element), where the record determines it, else None
    output: tuple[tuple[int, ...], int] | None = None


class Call(NamedTuple):
    """One recorded call: per input its shape (a list of ints, a list of shapes for a tensor list, or []
    for a non-tensor), its type name and its concrete value (text, "" where not recorded)."""

    dims: list
    types: list
    concrete: list
    #: bytes per element of tensor lists, whose element type the profiler does not record (score() passes
    #: the trace's most common floating-point size)
    list_bpe: int = 4

    def shape(self, i: int) -> list[int] | None:
        """The shape of input `i` if it is a tensor (a list of ints), else None."""
        if i >= len(self.dims) or i >= len(self.types) or dtype_of(self.types[i]) is None:
            return None
        d = self.dims[i]
        return d if all(isinstance(x, int) for x in d) else None

    def size(self, i: int) -> int:
        """Bytes per element of input `i` (4 when the type is unknown)."""
        t = dtype_of(self.types[i]) if i < len(self.types) else None
        return t[1] if t else 4

    def dtype(self, i: int) -> str:
        t = dtype_of(self.types[i]) if i < len(self.types) else None
        return t[0] if t else "fp32"

    def value(self, i: int) -> str:
        return str(self.concrete[i]).strip() if i < len(self.concrete) else ""

    def flag(self, i: int, default: bool = False) -> bool:
        v = self.value(i)
        return default if v == "" else v in ("True", "true", "1")

    def ints(self, i: int) -> list[int] | None:
        """A scalar list argument (stride, padding, ...) as ints, or None if not recorded."""
        found = re.findall(r"-?\d+", self.value(i))
        return [int(x) for x in found] if found else None


def _n(shape: list[int] | None) -> int:
    return math.prod(shape) if shape else (1 if shape == [] else 0)


def _broadcast(*shapes: list[int]) -> list[int]:
    """The broadcast shape; ValueError if the shapes do not broadcast (then they are not what the model
    thinks they are: an ``out=`` argument, a different overload)."""
    width = max((len(s) for s in shapes), default=0)
    out = [1] * width
    for s in shapes:
        for k, x in enumerate(s, start=width - len(s)):
            if x != 1 and out[k] not in (1, x):
                raise ValueError(f"shapes {shapes} do not broadcast")
            out[k] = max(out[k], x)
    return out


# --- GEMM -----------------------------------------------------------------------------------------------


def gemm(batch: int, m: int, n: int, k: int, bpe: int, bias: int = 0, out_bpe: int | None = None) -> tuple[int, int]:
    """Return (FLOPs, bytes) of `batch` products of an M×K and a K×N matrix: F = 2·batch·M·N·K, plus
    batch·M·N for a bias of `bias` elements; B = (MK + KN + MN)·batch·bpe + bias·bpe."""
    out_bpe = bpe if out_bpe is None else out_bpe
    flops = 2 * batch * m * n * k + (batch * m * n if bias else 0)
    nbytes = batch * (m * k + k * n) * bpe + batch * m * n * out_bpe + bias * bpe
    return flops, nbytes


def _mm(call: Call, first: int = 0, bias: int | None = None) -> Cost | None:
    a, b = call.shape(first), call.shape(first + 1)
    if not a or not b or len(a) != len(b) or len(a) not in (2, 3):
        return None
    batch = a[0] if len(a) == 3 else 1
    (m, k), n = a[-2:], b[-1]
    bias_n = _n(call.shape(bias)) if bias is not None and call.shape(bias) is not None else 0
    f, nb = gemm(batch, m, n, k, call.size(first), bias_n)
    return Cost(f, nb, "gemm", call.dtype(first), ((*a[:-2], m, n), call.size(first)))


def _matmul(call: Call) -> Cost | None:
    a, b = call.shape(0), call.shape(1)
    if not a or not b:
        return None
    a2 = [1, *a] if len(a) == 1 else a
    b2 = [*b, 1] if len(b) == 1 else b
    batch = _n(_broadcast(a2[:-2], b2[:-2]))
    f, nb = gemm(batch, a2[-2], b2[-1], a2[-1], call.size(0))
    # broadcast operands are read once, not once per batch
    nb += (_n(a) + _n(b) - batch * (a2[-2] * a2[-1] + b2[-2] * b2[-1])) * call.size(0)
    return Cost(f, nb, "gemm", call.dtype(0))


def _linear(call: Call) -> Cost | None:
    x, w = call.shape(0), call.shape(1)
    if not x or not w or len(w) != 2:
        return None
    bias = call.shape(2)
    f, nb = gemm(1, _n(x[:-1]), w[0], x[-1], call.size(0), _n(bias) if bias else 0)
    return Cost(f, nb, "gemm", call.dtype(0), ((*x[:-1], w[0]), call.size(0)))


def _mv(call: Call, first: int = 0, bias: int | None = None) -> Cost | None:
    a, v = call.shape(first), call.shape(first + 1)
    if not a or not v or len(a) != 2:
        return None
    bias_n = _n(call.shape(bias)) if bias is not None and call.shape(bias) else 0
    f, nb = gemm(1, a[0], 1, a[1], call.size(first), bias_n)
    return Cost(f, nb, "gemm", call.dtype(first))


def _scaled_mm(call: Call) -> Cost | None:
    a, b = call.shape(0), call.shape(1)
    if not a or not b or len(a) != 2:
        return None
    # (self, mat2, scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum)
    out = SCALAR_TYPES.get(int(call.value(6))) if call.value(6).lstrip("-").isdigit() else None
    bias = call.shape(4)
    f, nb = gemm(1, a[0], b[1], a[1], 1, 0, out_bpe=out[1] if out else 2)
    if bias:
        f, nb = f + a[0] * b[1], nb + _n(bias) * call.size(4)
    return Cost(f, nb, "gemm", "fp8")


def _int_mm(call: Call) -> Cost | None:
    a, b = call.shape(0), call.shape(1)
    if not a or not b:
        return None
    f, nb = gemm(1, a[0], b[1], a[1], 1, 0, out_bpe=4)
    return Cost(f, nb, "gemm", "int8")


# --- convolution ----------------------------------------------------------------------------------------


def conv(
    output: list[int], weight: list[int], input_: list[int], bpe: int, transposed: bool = False
) -> tuple[int, int]:
    """Return (FLOPs, bytes) of a convolution: F = 2·prod(output dims)·prod(weight dims except the
    output-channel dim), B = (input + weight + output)·bpe. For a transposed convolution the roles of input
    and output swap (its weight is [C_in, C_out/groups, k...])."""
    macs = _n(input_ if transposed else output) * _n(weight[1:])
    return 2 * macs, (_n(input_) + _n(weight) + _n(output)) * bpe


def conv_output(
    input_: list[int], weight: list[int], stride, padding, dilation, transposed=False, out_pad=None, groups=1
):
    """Return the output shape [N, C_out, spatial...] of a convolution (PyTorch's arithmetic)."""
    nd = len(input_) - 2
    strides, pads, dilations = (_expand(v, nd, dflt) for v, dflt in ((stride, 1), (padding, 0), (dilation, 1)))
    kernel = weight[2:]
    if transposed:
        extra = _expand(out_pad, nd, 0)
        spatial = [
            (input_[2 + i] - 1) * strides[i] - 2 * pads[i] + dilations[i] * (kernel[i] - 1) + extra[i] + 1
            for i in range(nd)
        ]
        return [input_[0], weight[1] * groups, *spatial]
    spatial = [(input_[2 + i] + 2 * pads[i] - dilations[i] * (kernel[i] - 1) - 1) // strides[i] + 1 for i in range(nd)]
    return [input_[0], weight[0], *spatial]


def _expand(v: list[int] | None, nd: int, default: int) -> list[int]:
    if not v:
        return [default] * nd
    return v * nd if len(v) == 1 else v


# argument positions: (stride, padding, dilation, transposed, output_padding, groups); None = not an argument
_CONV_ARGS = {
    "convolution": (3, 4, 5, 6, 7, 8),
    "_convolution": (3, 4, 5, 6, 7, 8),
    "conv1d": (3, 4, 5, None, None, 6),
    "conv2d": (3, 4, 5, None, None, 6),
    "conv3d": (3, 4, 5, None, None, 6),
    "cudnn_convolution": (3, 2, 4, None, None, 5),
    "miopen_convolution": (4, 3, 5, None, None, 6),
    "mkldnn_convolution": (4, 3, 5, None, None, 6),
    "cudnn_convolution_transpose": (4, 2, 5, True, 3, 6),
}


def _conv(name: str) -> Callable[[Call], Cost | None]:
    si, pi, di, ti, oi, gi = _CONV_ARGS[name]

    def model(call: Call) -> Cost | None:
        x, w = call.shape(0), call.shape(1)
        stride = call.ints(si)
        if not x or not w or len(x) < 3 or stride is None:  # no scalar arguments recorded: output unknown
            return None
        transposed = ti is True or (ti is not None and call.flag(ti))
        groups = (call.ints(gi) or [1])[0]
        out = conv_output(x, w, stride, call.ints(pi), call.ints(di), transposed, call.ints(oi) if oi else None, groups)
        f, nb = conv(out, w, x, call.size(0), transposed)
        return Cost(f, nb, "conv", call.dtype(0), (tuple(out), call.size(0)))

    return model


def _conv_backward(call: Call) -> Cost | None:
    # (grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed, output_padding, groups,
    #  output_mask): each of grad-input and grad-weight costs one forward convolution
    g, x, w = call.shape(0), call.shape(1), call.shape(2)
    if not g or not x or not w:
        return None
    mask = [v == "True" or v == "1" for v in re.findall(r"True|False|1|0", call.value(10))] or [True, True, True]
    f, _ = conv(g, w, x, call.size(0), call.flag(7))
    passes = int(mask[0]) + int(mask[1])
    nb = (_n(g) + _n(x) + _n(w) + mask[0] * _n(x) + mask[1] * _n(w)) * call.size(0)
    return Cost(f * passes, nb, "conv", call.dtype(0))


# --- attention ------------------------------------------------------------------------------------------


def causal_pairs(n_q: int, n_kv: int, align: str = "top-left") -> int:
    """Return the (query, key) pairs a causal mask leaves visible.

    ``top-left`` (PyTorch's ``is_causal``): query i sees keys 0..i. ``bottom-right`` (FlashAttention-2,
    KV-cache decoding): query i sees keys 0..i + N_kv − N_q. Both give N_q·N_kv − N_q(N_q−1)/2 when
    N_q = N_kv."""
    if align == "top-left":
        if n_q <= n_kv:
            return n_q * (n_q + 1) // 2
        return n_kv * (n_kv + 1) // 2 + (n_q - n_kv) * n_kv
    if n_q <= n_kv:
        return n_q * n_kv - n_q * (n_q - 1) // 2
    return n_kv * (n_kv + 1) // 2


def attention(
    b: int, h_q: int, h_kv: int, n_q: int, n_kv: int, d_qk: int, d_v: int, bpe: int, causal: str | None = None
):
    """Return (FLOPs, bytes) of attention: F = 2·B·H_q·pairs·(d_qk + d_v), pairs = N_q·N_kv or the causal
    count (`causal` is the mask alignment); B = (Q + K + V + O)·bpe, with K and V on H_kv heads (GQA)."""
    pairs = n_q * n_kv if causal is None else causal_pairs(n_q, n_kv, causal)
    flops = 2 * b * h_q * pairs * (d_qk + d_v)
    nbytes = (b * h_q * n_q * (d_qk + d_v) + b * h_kv * n_kv * (d_qk + d_v)) * bpe
    return flops, nbytes


#: name → (index of q, index of the causal argument, layout, backward, causal argument is a mask type)
_ATTENTION = {
    "scaled_dot_product_attention": (0, 5, "bhnd", False, False),
    "_scaled_dot_product_flash_attention": (0, 4, "bhnd", False, False),
    "_scaled_dot_product_flash_attention_for_cpu": (0, 4, "bhnd", False, False),
    "_scaled_dot_product_efficient_attention": (0, 6, "bhnd", False, False),
    "_scaled_dot_product_cudnn_attention": (0, 6, "bhnd", False, False),
    "_scaled_dot_product_fused_attention_overrideable": (0, 5, "bhnd", False, False),
    "_flash_attention_forward": (0, 8, "bnhd", False, False),
    "_efficient_attention_forward": (0, 9, "bnhd", False, True),
    "_scaled_dot_product_flash_attention_backward": (1, 11, "bhnd", True, False),
    "_scaled_dot_product_flash_attention_for_cpu_backward": (1, 7, "bhnd", True, False),
    "_scaled_dot_product_efficient_attention_backward": (1, 11, "bhnd", True, False),
    "_scaled_dot_product_cudnn_attention_backward": (1, 14, "bhnd", True, False),
    "_flash_attention_backward": (1, 11, "bnhd", True, False),
    "_efficient_attention_backward": (1, 14, "bnhd", True, True),
}
#: backward ≈ 2.5× the forward FLOPs (recompute of P plus dQ, dK, dV); it reads Q, K, V, O, dO and writes
#: dQ, dK, dV: twice the forward's bytes
BACKWARD_FLOPS, BACKWARD_BYTES = 2.5, 2.0


def _attention(name: str) -> Callable[[Call], Cost | None]:
    qi, ci, layout, backward, mask_type = _ATTENTION[name]

    def model(call: Call) -> Cost | None:
        q, k, v = call.shape(qi), call.shape(qi + 1), call.shape(qi + 2)
        if not q or not k or not v or not (len(q) == len(k) == len(v)) or len(q) not in (3, 4):
            return None
        if len(q) == 3:
            q, k, v = [1, *q], [1, *k], [1, *v]
        if layout == "bnhd":
            q, k, v = ([s[0], s[2], s[1], s[3]] for s in (q, k, v))
        if mask_type:  # 0 none, 1 causal from the top left, 2 causal from the bottom right
            kind = (call.ints(ci) or [0])[0]
            causal = {1: "top-left", 2: "bottom-right"}.get(kind)
        else:
            causal = "top-left" if call.flag(ci) else None
        f, nb = attention(q[0], q[1], k[1], q[2], k[2], q[3], v[3], call.size(qi), causal)
        if backward:
            f, nb = f * BACKWARD_FLOPS, nb * BACKWARD_BYTES
        return Cost(f, nb, "attention", call.dtype(qi))

    return model


# --- memory-bound families ------------------------------------------------------------------------------


def _tensors(call: Call) -> list[tuple[list[int], int]]:
    """The (shape, bytes per element) of every tensor input, tensor lists flattened."""
    out = []
    for i, (d, t) in enumerate(zip(call.dims, call.types)):
        if t == "TensorList" and d and all(isinstance(x, list) for x in d):
            out.extend((s, call.list_bpe) for s in d)
        elif call.shape(i) is not None:
            out.append((d, call.size(i)))
    return out


def elementwise(in_elems: list[int], in_bpe: list[int], out_elems: int, out_bpe: int, flops_per_elem: float = 1):
    """Return (FLOPs, bytes) of an elementwise op: F = out elements × flops_per_elem, B = inputs + output."""
    return out_elems * flops_per_elem, sum(n * b for n, b in zip(in_elems, in_bpe)) + out_elems * out_bpe


_COMPARISONS = {"eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf", "logical_not", "logical_and", "logical_or"}


def _elementwise(name: str) -> Callable[[Call], Cost | None]:
    def model(call: Call) -> Cost | None:
        if name.startswith("_foreach_"):  # lists of tensors: the first list is the output
            lists = [d for d, t in zip(call.dims, call.types) if t == "TensorList" and d]
            if not lists or not all(isinstance(s, list) for s in lists[0]):
                return None
            out = sum(_n(s) for s in lists[0])
            ins = [sum(_n(s) for s in lst) for lst in lists]
            bpe = call.size(0) if dtype_of(call.types[0]) else call.list_bpe
            f, nb = elementwise(ins, [bpe] * len(ins), out, bpe)
            return Cost(f, nb, "elementwise", "fp32")
        shapes = [(i, call.shape(i)) for i in range(len(call.dims)) if call.shape(i) is not None]
        if not shapes:
            return None
        first = shapes[0][0]
        shape = _broadcast(*(s for _, s in shapes))
        out, out_bpe = _n(shape), 1 if name in _COMPARISONS else call.size(first)
        written = (tuple(shape), out_bpe)
        if name in ("fill", "zero", "normal", "uniform", "bernoulli", "random"):  # writes only
            return Cost(out, out * out_bpe, "elementwise", call.dtype(first), written)
        f, nb = elementwise([_n(s) for _, s in shapes], [call.size(i) for i, _ in shapes], out, out_bpe)
        return Cost(f, nb, "elementwise", call.dtype(first), written)

    return model


def _reduction(call: Call) -> Cost | None:
    x = call.shape(0)
    if x is None:
        return None
    return Cost(_n(x), _n(x) * call.size(0), "reduction", call.dtype(0))


def _nll_loss(backward: bool) -> Callable[[Call], Cost | None]:
    """nll_loss reads one log-probability per target (not the whole [N, C] input); its backward writes one
    value per target (the zeros of the rest are a fill op of their own)."""

    def model(call: Call) -> Cost | None:
        x, target = (call.shape(1), call.shape(2)) if backward else (call.shape(0), call.shape(1))
        if not x or target is None:
            return None
        n, bpe = _n(target), call.size(1 if backward else 0)
        index_bpe = call.size(2 if backward else 1)
        return Cost(n, n * bpe + n * index_bpe + bpe, "reduction", call.dtype(1 if backward else 0))

    return model


def _scan(call: Call) -> Cost | None:
    x = call.shape(0)
    if x is None:
        return None
    return Cost(_n(x), 2 * _n(x) * call.size(0), "reduction", call.dtype(0))


#: FLOPs per element: softmax = max, subtract, exp, sum, divide; its backward = multiply, sum, subtract,
#: multiply; layer norm = mean, subtract, square, sum, scale, weight, bias (+ the two rsqrt-free passes);
#: RMS norm = square, sum, scale, weight
SOFTMAX_FLOPS, SOFTMAX_BACKWARD_FLOPS, LAYER_NORM_FLOPS, RMS_NORM_FLOPS = 5, 4, 8, 4


def _softmax(backward: bool) -> Callable[[Call], Cost | None]:
    def model(call: Call) -> Cost | None:
        x = call.shape(0)
        if x is None:
            return None
        e, bpe = _n(x), call.size(0)
        if backward:  # (grad_output, output, dim, input_dtype): reads two, writes one
            return Cost(SOFTMAX_BACKWARD_FLOPS * e, 3 * e * bpe, "softmax", call.dtype(0), (tuple(x), bpe))
        return Cost(SOFTMAX_FLOPS * e, 2 * e * bpe, "softmax", call.dtype(0), (tuple(x), bpe))

    return model


def norm(elements: int, params: int, bpe: int, flops_per_elem: int, backward: bool = False) -> tuple[int, int]:
    """Return (FLOPs, bytes) of a normalisation over `elements` with `params` weight (+bias) elements:
    reads the input and parameters, writes the output; a backward pass also reads the output's gradient and
    writes the parameters' gradients."""
    if backward:
        return 2 * flops_per_elem * elements, (3 * elements + 2 * params) * bpe
    return flops_per_elem * elements, (2 * elements + params) * bpe


def _norm(
    per_elem: int, params: tuple[int, ...], backward: bool = False, data: int = 0
) -> Callable[[Call], Cost | None]:
    def model(call: Call) -> Cost | None:
        x = call.shape(data)
        if x is None:
            return None
        p = sum(_n(call.shape(i)) for i in params if call.shape(i) is not None)
        f, nb = norm(_n(x), p, call.size(data), per_elem, backward)
        return Cost(f, nb, "norm", call.dtype(data), (tuple(x), call.size(data)))

    return model


def embedding(rows: int, width: int, bpe: int, index_bpe: int) -> tuple[int, int]:
    """Return (FLOPs, bytes) of gathering `rows` rows of `width` elements: F = 0; B = gathered rows +
    indices + output."""
    return 0, rows * width * bpe + rows * index_bpe + rows * width * bpe


def _embedding(call: Call) -> Cost | None:
    w, idx = call.shape(0), call.shape(1)
    if not w or idx is None:
        return None
    f, nb = embedding(_n(idx), _n(w[1:]), call.size(0), call.size(1))
    return Cost(f, nb, "embedding", call.dtype(0))


def _index_select(call: Call) -> Cost | None:
    w, idx = call.shape(0), call.shape(2)
    dim = call.ints(1)
    if not w or idx is None:
        return None
    d = (dim or [0])[0] % len(w)
    f, nb = embedding(_n(idx), _n(w) // max(w[d], 1), call.size(0), call.size(2))
    return Cost(f, nb, "embedding", call.dtype(0))


def _embedding_backward(call: Call) -> Cost | None:
    g, idx = call.shape(0), call.shape(1)
    if not g or idx is None:
        return None
    return Cost(_n(g), 2 * _n(g) * call.size(0) + _n(idx) * call.size(1), "embedding", call.dtype(0))


def _copy(call: Call) -> Cost | None:
    """copy_(dst, src), clone, contiguous: read the source, write the destination."""
    tensors = _tensors(call)
    if not tensors:
        return None
    if len(tensors) >= 2:
        (dst, db), (src, sb) = tensors[0], tensors[1]
        return Cost(0, _n(dst) * db + _n(src) * sb, "copy", call.dtype(1))
    ((x, b),) = tensors
    return Cost(0, 2 * _n(x) * b, "copy", call.dtype(0))


def _cat(call: Call) -> Cost | None:
    """cat / stack of a tensor list: read every input, write their sum. Old traces record the list without
    its shapes: not modelled then."""
    lists = [d for d, t in zip(call.dims, call.types) if t == "TensorList"]
    if not lists or not lists[0] or not all(isinstance(s, list) for s in lists[0]):
        return None
    total = sum(_n(s) for s in lists[0]) * call.list_bpe
    return Cost(0, 2 * total, "copy", {2: "bf16", 8: "fp64"}.get(call.list_bpe, "fp32"))


def _to_copy(call: Call) -> Cost | None:
    x = call.shape(0)
    if x is None:
        return None
    code = call.value(1)
    out = SCALAR_TYPES.get(int(code)) if code.lstrip("-").isdigit() else None
    return Cost(0, _n(x) * (call.size(0) + (out[1] if out else call.size(0))), "copy", call.dtype(0))


_ELEMENTWISE = (
    "add sub mul div rsub neg abs exp exp2 expm1 log log2 log1p sqrt rsqrt pow relu gelu silu sigmoid tanh clamp"
    " clamp_min clamp_max where masked_fill eq ne lt le gt ge maximum minimum threshold threshold_backward"
    " gelu_backward silu_backward sigmoid_backward tanh_backward hardtanh hardtanh_backward leaky_relu"
    " leaky_relu_backward softplus elu erf reciprocal square sin cos nan_to_num fill zero dropout native_dropout"
    " native_dropout_backward bernoulli normal uniform random lerp addcmul addcdiv floor ceil round trunc sign"
    " logical_and logical_or logical_not bitwise_and bitwise_or bitwise_xor bitwise_not remainder fmod isnan"
    " isinf mse_loss_backward mish hardswish hardsigmoid log_sigmoid_forward triu tril"
).split()
_FOREACH = "add sub mul div addcmul addcdiv lerp sqrt neg copy zero norm".split()
_REDUCTIONS = (
    "sum mean amax amin max min argmax argmin norm linalg_vector_norm var std var_mean std_mean prod all any"
    " logsumexp mse_loss count_nonzero"
).split()

#: operator name (without ``aten::`` and a trailing ``_``) → model
MODELS: dict[str, Callable[[Call], Cost | None]] = {
    "mm": _mm,
    "bmm": _mm,
    "addmm": lambda c: _mm(c, 1, bias=0),
    "baddbmm": lambda c: _mm(c, 1, bias=0),
    "matmul": _matmul,
    "linear": _linear,
    "mv": _mv,
    "addmv": lambda c: _mv(c, 1, bias=0),
    "_scaled_mm": _scaled_mm,
    "_int_mm": _int_mm,
    **{name: _conv(name) for name in _CONV_ARGS},
    "convolution_backward": _conv_backward,
    **{name: _attention(name) for name in _ATTENTION},
    **{name: _elementwise(name) for name in _ELEMENTWISE},
    **{f"_foreach_{name}": _elementwise(f"_foreach_{name}") for name in _FOREACH},
    **dict.fromkeys(_REDUCTIONS, _reduction),
    "nll_loss_forward": _nll_loss(False),
    "nll_loss2d_forward": _nll_loss(False),
    "nll_loss_backward": _nll_loss(True),
    "nll_loss2d_backward": _nll_loss(True),
    "cumsum": _scan,
    "cumprod": _scan,
    "softmax": _softmax(False),
    "_softmax": _softmax(False),
    "log_softmax": _softmax(False),
    "_log_softmax": _softmax(False),
    "_softmax_backward_data": _softmax(True),
    "_log_softmax_backward_data": _softmax(True),
    "layer_norm": _norm(LAYER_NORM_FLOPS, (2, 3)),
    "native_layer_norm": _norm(LAYER_NORM_FLOPS, (2, 3)),
    "native_layer_norm_backward": _norm(LAYER_NORM_FLOPS, (5, 6), backward=True),
    "rms_norm": _norm(RMS_NORM_FLOPS, (2,)),
    "_fused_rms_norm": _norm(RMS_NORM_FLOPS, (2,)),
    "_fused_rms_norm_backward": _norm(RMS_NORM_FLOPS, (3,), backward=True),
    "group_norm": _norm(LAYER_NORM_FLOPS, (1, 2)),
    "native_group_norm": _norm(LAYER_NORM_FLOPS, (1, 2)),
    "batch_norm": _norm(LAYER_NORM_FLOPS, (1, 2)),
    "native_batch_norm": _norm(LAYER_NORM_FLOPS, (1, 2)),
    "cudnn_batch_norm": _norm(LAYER_NORM_FLOPS, (1, 2)),
    "_batch_norm_impl_index": _norm(LAYER_NORM_FLOPS, (1, 2)),
    "native_batch_norm_backward": _norm(LAYER_NORM_FLOPS, (2,), backward=True, data=1),
    "cudnn_batch_norm_backward": _norm(LAYER_NORM_FLOPS, (2,), backward=True),
    "embedding": _embedding,
    "index_select": _index_select,
    "embedding_dense_backward": _embedding_backward,
    "copy": _copy,
    "clone": _copy,
    "contiguous": _copy,
    "cat": _cat,
    "stack": _cat,
    "_to_copy": _to_copy,
}


def op_key(name: str) -> str:
    """Return the model key of an operator name: without the ``aten::`` namespace and the in-place ``_``."""
    base = name.split("::", 1)[-1]
    return base[:-1] if base.endswith("_") and not base.endswith("__") and base[:-1] in MODELS else base


def cost(name: str, call: Call) -> Cost | None:
    """Return the cost of one call of operator `name` (its ``out=`` outputs, if recorded among the arguments,
    counted once as the written output), or None if there is no model or too little shape information."""
    model = MODELS.get(op_key(name))
    if model is None:
        return None
    # an out= variant's output is among its recorded arguments: the models read the functional call
    dims, types, concrete = functional(name, call.dims, call.types, call.concrete)
    try:
        return model(call._replace(dims=dims, types=types, concrete=concrete))
    except (IndexError, ValueError, TypeError, ZeroDivisionError):  # a shape the model did not foresee
        return None
