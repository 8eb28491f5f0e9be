"""Which phase (annotation range) each operator ran in; which operator launched each GPU activity is
:mod:`gpuan.trace.launch`."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gpuan.arrays import unique_rows
from gpuan.trace.launch import callers, innermost

#: annotations that mark steps or communication, not phases
_NOT_PHASES = re.compile(
    r"^(ProfilerStep#\d+|nccl:.*|gloo:.*|mpi:.*|PyTorch Profiler.*|Iteration Start.*|Record Window End.*)$"
)


def phase_paths(annotations: pa.Table) -> tuple[pa.Table, np.ndarray]:
    """Return the annotations that are phases (steps and communication ranges left out) and the path of
    each, ``outer/inner``, built from the annotations that hold it on its thread (an object array of str;
    None for an outermost phase without a name).
    Each name is matched once, and each distinct path made once: a path is an (outer path, name) pair, found
    level by level from the outermost ranges in."""
    col = annotations["name"].combine_chunks()
    words = [*col.dictionary.to_pylist(), None]  # the last: a null name
    codes = pc.fill_null(col.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    is_phase = np.array([not _NOT_PHASES.match(w or "") for w in words], bool)
    keep = is_phase[codes]
    phases = annotations.filter(pa.array(keep))
    codes = codes[keep]
    parent = callers(phases) if phases.num_rows else np.empty(0, np.int64)
    path_id = np.full(codes.size, -1, np.int64)
    made: dict[tuple[int, int], int] = {}  # (outer path id or -1, name code) -> path id
    texts: list[str | None] = []
    todo = np.arange(codes.size)
    while todo.size:
        outer = parent[todo]
        outer_id = np.where(outer < 0, -1, path_id[np.maximum(outer, 0)])
        ready = (outer < 0) | (outer_id >= 0)  # the outermost, or inside a path made
        outer_id = outer_id[ready]
        ready = todo[ready]
        distinct, inverse = unique_rows((outer_id, codes[ready]))
        ids = np.empty(len(distinct), np.int64)
        for i, (o, c) in enumerate(distinct.tolist()):
            if (o, c) not in made:
                prefix = texts[o] if o >= 0 else ""
                made[(o, c)] = len(texts)
                texts.append(f"{prefix}/{words[c]}" if prefix else words[c])
            ids[i] = made[(o, c)]
        path_id[ready] = ids[inverse]
        todo = todo[path_id[todo] < 0]
    return phases, np.array(texts, object)[path_id] if texts else np.empty(0, object)


def phases_of(points: pa.Table, phases: pa.Table, paths: np.ndarray) -> np.ndarray:
    """Return the phase path of each row of `points` (ops or runtime calls): that of the innermost phase
    range holding it on its thread, else in its process (backward ops run on autograd threads), else ""."""
    row = innermost(points, phases, ("rank", "pid", "tid"))
    missing = row < 0
    if missing.any():
        row[missing] = innermost(points.filter(pa.array(missing)), phases, ("rank", "pid"))
    return np.append(paths, "")[row]  # paths is an object array: so is this
