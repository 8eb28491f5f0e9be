"""Array helpers shared by analyses: distinct values of large integer columns, a stable sort on either
engine, and an array of either engine on the host."""

from __future__ import annotations

from types import ModuleType

import numpy as np


def sorted_unique(keys: np.ndarray) -> np.ndarray:
    """Return the distinct values of `keys`, sorted (a sort and a compare: numpy's hashing ``unique`` is far
    slower on millions of int64)."""
    k = np.sort(keys)
    return k[np.concatenate(([True], k[1:] != k[:-1]))] if k.size else k


def stable_argsort(xp: ModuleType, a):
    """Return the indices that sort `a`, equal values in their order, on numpy or CuPy (`xp`; CuPy's argsort
    is always stable and takes no ``kind``)."""
    return np.argsort(a, kind="stable") if xp is np else xp.argsort(a)


def to_host(a) -> np.ndarray:
    """Return an array of either engine as a numpy array (a CuPy one copied from the device, a numpy one as
    it is)."""
    return a.get() if hasattr(a, "get") else np.asarray(a)
