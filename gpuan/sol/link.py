"""Which phase (annotation range) each operator ran in; which operator launched each GPU activity is
:mod:`gpuan.trace.launch`."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa

from gpuan.trace.launch import callers, innermost

#: annotations that mark steps or communication, not phases
_NOT_PHASES = re.compile(
    r"^(ProfilerStep#\d+|nccl:.*|gloo:.*|mpi:.*|PyTorch Profiler.*|Iteration Start.*|Record Window End.*)$"
)


def phase_paths(annotations: pa.Table) -> tuple[pa.Table, list[str]]:
    """Return the annotations that are phases (steps and communication ranges left out) and the path of
    each, ``outer/inner``, built from the annotations that hold it on its thread."""
    names = annotations["name"].combine_chunks().dictionary_decode().to_pylist()
    keep = np.array([not _NOT_PHASES.match(n or "") for n in names], bool)
    phases = annotations.filter(pa.array(keep))
    names = [n for n, k in zip(names, keep) if k]
    parent = callers(phases) if phases.num_rows else np.empty(0, np.int64)
    paths: list[str | None] = [None] * len(names)

    def path(i: int) -> str:
        chain = []
        j = i
        while j >= 0 and paths[j] is None:
            chain.append(j)
            j = int(parent[j])
        prefix = paths[j] if j >= 0 else ""
        for k in reversed(chain):
            prefix = f"{prefix}/{names[k]}" if prefix else names[k]
            paths[k] = prefix
        return paths[i]

    return phases, [path(i) for i in range(len(names))]


def phases_of(points: pa.Table, phases: pa.Table, paths: list[str]) -> np.ndarray:
    """Return the phase path of each row of `points` (ops or runtime calls): that of the innermost phase
    range holding it on its thread, else in its process (backward ops run on autograd threads), else ""."""
    row = innermost(points, phases, ("rank", "pid", "tid"))
    missing = row < 0
    if missing.any():
        row[missing] = innermost(points.filter(pa.array(missing)), phases, ("rank", "pid"))
    table = np.array([*paths, ""], dtype=object)
    return table[row]
