"""The CPU scanner's byte-level JSON functions compiled for CUDA: one definition of the fields' semantics.

Each function of :mod:`gpuan.trace.kineto.scanner` named in :data:`SHARED` is recompiled from its own
Python source as a CUDA device function, in a namespace where the functions it calls are their device
copies too. Two names differ from the CPU: ``intern`` records where a string lies (its hash, offset and
length) instead of looking it up in a table, since the GPU gives strings their ids afterwards
(:mod:`strings_cuda`); and ``trailing_zeros`` is a bit trick rather than an LLVM intrinsic.
"""

from __future__ import annotations

import types
from functools import lru_cache

from numba import cuda

from gpuan.trace.kineto import scanner as sc
from gpuan.trace.kineto.gpu import bits

#: the scanner's functions the GPU reader runs, callees first
SHARED = (
    "_is_ws", "skip_ws", "_load8", "_skip_spaces", "_zero_bytes", "string_end", "_is_bracket", "_nested",
    "skip_value", "_mix", "_tail", "_finish", "_hash_bytes", "string_end_hash", "_same_bytes", "_exponent_ns",
    "parse_ns", "_time_value", "_number_rest", "parse_int", "_int_value", "_int32", "_parse_triple",
    "_string_id", "_parse_key", "_member_key", "_arg_target", "_next_member", "_parse_args", "_is_phase",
    "_clear_row", "_parse_event",
)  # fmt: skip


def record_span(buf, b64, a, b, h, hashes, offsets, pool64, lengths, ulen, st):
    """The GPU's ``intern``: note the string buf[a:b] as span st[0] of the event (its hash h, offset and
    length) and return that span's number, -1 when the event has no span left. Same signature as the
    CPU's intern; pool64 and ulen are unused."""
    k = st[0]
    if k >= hashes.shape[0]:
        return -1
    hashes[k] = h
    offsets[k] = a
    lengths[k] = b - a
    st[0] = k + 1
    return k


def _copy(func: types.FunctionType, namespace: dict) -> types.FunctionType:
    """Return func with `namespace` as its globals, so that the names it calls resolve there."""
    return types.FunctionType(func.__code__, namespace, func.__name__, func.__defaults__, func.__closure__)


def compile_module(module: types.ModuleType, names: tuple[str, ...], extra: dict | None = None) -> dict:
    """Return a namespace holding `module`'s functions `names` (plain Python, or numba functions whose Python
    source is taken) compiled as CUDA device functions that call each other's device copies; `extra`
    adds or replaces names in it first."""
    ns = dict(vars(module), **(extra or {}))
    device = cuda.jit(device=True)
    for name in names:
        func = getattr(module, name)
        ns[name] = device(_copy(getattr(func, "py_func", func), ns))
    return ns


@lru_cache(maxsize=1)
def device_bits() -> dict:
    """Return :mod:`bits`' functions as CUDA device functions, by name."""
    return compile_module(bits, ("popcount64", "trailing_zeros64", "byte_bits", "prefix_xor64"))


@lru_cache(maxsize=1)
def device_functions() -> dict:
    """Return the namespace of the scanner's functions compiled as CUDA device functions (name -> function)."""
    ns = compile_module(sc, SHARED, {"trailing_zeros": device_bits()["trailing_zeros64"]})
    ns["intern"] = cuda.jit(device=True)(_copy(record_span, ns))
    return ns
