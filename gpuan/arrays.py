"""Array helpers shared by analyses: distinct values of large integer columns."""

from __future__ import annotations

import numpy as np


def sorted_unique(keys: np.ndarray) -> np.ndarray:
    """Return the distinct values of `keys`, sorted (a sort and a compare: numpy's hashing ``unique`` is far
    slower on millions of int64)."""
    k = np.sort(keys)
    return k[np.concatenate(([True], k[1:] != k[:-1]))] if k.size else k
