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


def expert_slices(
    xp,
    unit,
    size,
    expert,
    offset,
    tensor_start,
    unit_start,
    unit_tensor,
    unit_expert,
    first_unit,
    n_experts,
    slice_bytes,
):
    """Return (unit, offset, size) with accesses that name their expert and start at the start of an expert tensor
    moved to that expert's slice, their size cut to one slice: loggers that record the whole MUL_MAT_ID
    source tensor plus the selected expert id mean that slice, not slice 0. `first_unit`, `n_experts`
    and `slice_bytes` are per tensor."""
    safe = xp.maximum(unit, 0)
    tensor = unit_tensor[safe]
    whole = (unit >= 0) & (expert >= 0) & (unit_expert[safe] == 0) & (offset == tensor_start[tensor])
    whole &= expert < n_experts[tensor]
    moved = xp.where(whole, first_unit[tensor] + expert.astype(unit.dtype), unit)
    offset = xp.where(whole, unit_start[xp.maximum(moved, 0)], offset)
    return moved, offset, xp.where(whole, xp.minimum(size, slice_bytes[tensor]), size)
