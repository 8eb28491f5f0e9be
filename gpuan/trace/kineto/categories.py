"""Each event's normalised category and its kind, from the scanner's category codes, in one compiled pass.

numpy took a gather for the categories, a gather for the kinds, and for traces with profiler steps a mask of
the operators, a gather of their names and a scatter: 28 ms on the 1 GB gen trace (2.5M rows), in the part of
the table build that no thread shares.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from gpuan.trace.kinds import KIND_CODE

_JIT = {"cache": True, "nogil": True, "_nrt": False}


@njit(**_JIT)
def _codes_and_kinds(cat_ids, cat_map, kind_map, name_ids, steps, op, annotation, cats, kinds):
    """Write cats[i] = cat_map[cat_ids[i]] and kinds[i] = kind_map[cats[i]] (a null code, -1, reads a map's
    last slot); with `steps` (a mark per name id, its last slot for null names), an event of kind `op` whose
    name is marked gets kind `annotation`. (The kind codes are arguments, not globals: numba's cache would
    keep a global's value from the compile even after gpuan/trace/kinds.py changed.)"""
    with_steps = steps.shape[0] > 0
    for i in range(cat_ids.shape[0]):
        c = cat_map[cat_ids[i]]
        cats[i] = c
        k = kind_map[c]
        if with_steps and k == op and steps[name_ids[i]]:
            k = annotation
        kinds[i] = k


def codes_and_kinds(
    cat_ids: np.ndarray,
    cat_map: np.ndarray,
    kind_map: np.ndarray,
    steps: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Return (category codes, kind codes) of the events: cat_map[cat_ids] as int32 and kind_map of those as
    int8, where the maps end in a slot for null codes (-1). With `steps` (the events' name ids, and a mark per
    name id with one last for null names), operators whose names are marked get the annotation kind instead."""
    cats = np.empty(cat_ids.size, np.int32)
    kinds = np.empty(cat_ids.size, np.int8)
    name_ids, marks = (np.empty(0, np.int32), np.empty(0, np.bool_)) if steps is None else steps
    _codes_and_kinds(cat_ids, cat_map.astype(np.int32, copy=False), kind_map.astype(np.int8, copy=False),
                     name_ids, marks, KIND_CODE["cpu_op"], KIND_CODE["annotation"], cats, kinds)  # fmt: skip
    return cats, kinds
