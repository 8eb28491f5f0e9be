"""Joining accesses to what they touched: model-file units by offset, named tensors by pointer. Both are
a sorted search over interval starts, written once against the array namespace (numpy or CuPy)."""

from __future__ import annotations


def interval_of(xp, starts, ends, keys, valid=None):
    """Return, for each key, the index of the interval ``[starts[i], ends[i])`` that holds it, else -1.
    `starts` must be sorted and the intervals must not overlap; `valid` (bool) masks keys to leave at -1."""
    i = xp.searchsorted(starts, keys, side="right") - 1
    safe = xp.maximum(i, 0)
    hit = (i >= 0) & (keys < ends[safe]) if len(starts) else xp.zeros(keys.shape, bool)
    if valid is not None:
        hit &= valid
    return xp.where(hit, i, -1)


def expert_slices(xp, unit, offset, size, expert, starts, ends, unit_tensor, unit_expert):
    """Return (unit, offset, size) with accesses that name their expert and start at the start of an expert
    tensor moved to that expert's slice, their size cut to one slice: loggers that record the whole
    MUL_MAT_ID source tensor plus the selected expert id mean that slice, not slice 0. A tensor's slices
    are consecutive units, so slice e of the tensor whose slice 0 is unit u is unit u + e."""
    safe = xp.maximum(unit, 0)
    moved = safe + xp.maximum(expert, 0).astype(unit.dtype)
    inside = moved < unit_tensor.shape[0]
    moved = xp.where(inside, moved, safe)
    whole = (unit >= 0) & (expert >= 0) & (unit_expert[safe] == 0) & (offset == starts[safe])
    whole &= inside & (unit_tensor[moved] == unit_tensor[safe])
    slice_bytes = ends[safe] - starts[safe]
    return (
        xp.where(whole, moved, unit),
        xp.where(whole, starts[moved], offset),
        xp.where(whole, xp.minimum(size, slice_bytes), size),
    )
