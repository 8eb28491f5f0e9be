"""Unbuffered min / max of integers by index (numpy's ``minimum.at`` / ``maximum.at``) on either engine.

CuPy's ``minimum.at`` and ``maximum.at`` (and ``cupyx.scatter_min`` / ``scatter_max``) refuse int64, the
dtype of every time and row column: there the values go through uint64, which they take, with the sign
bit flipped, a map that keeps the order of int64 exactly."""

from __future__ import annotations

from types import ModuleType

import numpy as np

_SIGN = np.uint64(1 << 63)


def extreme_at(xp: ModuleType, how: str, out, idx, values) -> None:
    """Set ``out[idx] = min(out[idx], values)`` ("min") or max ("max") in place, repeated indices included;
    `out` is a contiguous int64 array of `xp`, `values` integers."""
    if xp is np:
        (np.minimum if how == "min" else np.maximum).at(out, idx, values)
    else:
        extreme_at_unsigned(xp, how, out, idx, values)


def extreme_at_unsigned(xp: ModuleType, how: str, out, idx, values) -> None:
    """:func:`extreme_at` through uint64 with the sign bit flipped (what CuPy runs; numpy can too, which is
    how it is tested)."""
    flipped = out.view(np.uint64)
    flipped ^= _SIGN
    ufunc = xp.minimum if how == "min" else xp.maximum
    ufunc.at(flipped, idx, values.astype(np.int64).view(np.uint64) ^ _SIGN)
    flipped ^= _SIGN
