"""Nesting of time intervals on one timeline: which interval holds which (call stacks, annotation ranges)."""

from __future__ import annotations

import numba
import numpy as np


def enclosing(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Return, for each interval [start, end), the row of the innermost other interval of the same group
    (e.g. one thread) that holds its start, or -1 if none does.

    Intervals that start together nest longest outermost, and equal intervals in row order; a zero-length
    interval (a point) nests like any other. Intervals that overlap without nesting (clock rounding) still
    get the interval open at their start as parent."""
    n = start.shape[0]
    order = np.lexsort((np.arange(n), -end.astype(np.int64), start, group))
    return _walk(order, group.astype(np.int64), start.astype(np.int64), end.astype(np.int64))


@numba.njit(cache=True, nogil=True)
def _walk(order, group, start, end):
    n = order.shape[0]
    parent = np.full(n, -1, np.int64)
    stack = np.empty(n, np.int64)
    top = 0
    for k in range(n):
        i = order[k]
        if top > 0 and group[stack[top - 1]] != group[i]:
            top = 0
        while top > 0 and end[stack[top - 1]] <= start[i]:
            top -= 1
        if top > 0:
            parent[i] = stack[top - 1]
        stack[top] = i
        top += 1
    return parent


def ancestor_where(parent: np.ndarray, mark: np.ndarray) -> np.ndarray:
    """Return, for each row, the nearest row at or above it in the `parent` tree where `mark` is True,
    or -1."""
    return _nearest(parent, mark)


@numba.njit(cache=True, nogil=True)
def _nearest(parent, mark):
    n = parent.shape[0]
    out = np.full(n, -2, np.int64)
    path = np.empty(n, np.int64)
    for i in range(n):
        depth = 0
        j = i
        while j >= 0 and out[j] == -2 and not mark[j]:
            path[depth] = j
            depth += 1
            j = parent[j]
        found = -1 if j < 0 else (j if mark[j] else out[j])
        if j >= 0 and out[j] == -2:
            out[j] = found
        for d in range(depth):
            out[path[d]] = found
    return out
