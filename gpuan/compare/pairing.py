"""Kernel-by-kernel pairing of two cycles: by alignment (best rotation, then longest common subsequence of
signatures) or by matching (same name, else same signature).

A pairing is a DataFrame with one row per pair: the baseline kernel and its statistics, the new kernel and
its statistics, the change of the average in percent and the match type (``exact``: same name,
``similar``: same signature, ``removed``: baseline only, ``new_only``: new only).
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
import pandas as pd

from gpuan.compare import lcs
from gpuan.cycles.signature import signature
from gpuan.engine import CPU, Engine
from gpuan.trace.inputs import CycleTable

COLUMNS = (
    "base_kernel", "base_avg", "base_min", "base_max", "base_std",
    "new_kernel", "new_avg", "new_min", "new_max", "new_std", "change_pct", "match_type",
)  # fmt: skip
MATCH_TYPES = ("exact", "similar", "removed", "new_only")
_STATS = ("avg_duration_us", "min_duration_us", "max_duration_us", "stddev_us")


def signature_ids(base: CycleTable, new: CycleTable) -> tuple[np.ndarray, np.ndarray]:
    """Return the kernels of both tables as int64 ids of their signatures (one id per distinct signature)."""
    ids: dict[str, int] = {}
    base_ids, new_ids = (
        np.array([ids.setdefault(signature(name), len(ids)) for name in table.rows["kernel_name"]], np.int64)
        for table in (base, new)
    )
    return base_ids, new_ids


def _frame(
    base: CycleTable, new: CycleTable, base_index: np.ndarray, new_index: np.ndarray, kind: np.ndarray
) -> pd.DataFrame:
    """Return the pairing frame for pairs (baseline index or -1, new index or -1, match type)."""
    columns: dict[str, object] = {}
    for side, table, index in (("base", base, base_index), ("new", new, new_index)):
        present = index >= 0
        take = np.where(present, index, 0)
        names = table.rows["kernel_name"].to_numpy(object)
        columns[f"{side}_kernel"] = np.where(present, names[take] if len(names) else "", "")
        for key, column in zip(("avg", "min", "max", "std"), _STATS):
            values = table.rows[column].to_numpy(np.float64)
            columns[f"{side}_{key}"] = np.where(present, values[take] if len(values) else np.nan, np.nan)
    base_avg, new_avg = columns["base_avg"], columns["new_avg"]
    with np.errstate(divide="ignore", invalid="ignore"):
        change = (new_avg - base_avg) / base_avg * 100.0
    # a kernel at 0 µs in the baseline has no relative change (0 when it stays at 0)
    change = np.where(base_avg == 0, np.where(new_avg == 0, 0.0, np.nan), change)
    columns["change_pct"] = change
    columns["match_type"] = kind
    frame = pd.DataFrame(columns, columns=list(COLUMNS))
    frame["base_kernel"] = frame["base_kernel"].astype(object)
    frame["new_kernel"] = frame["new_kernel"].astype(object)
    return frame


def align(base: CycleTable, new: CycleTable, alignment: lcs.Alignment | None = None) -> pd.DataFrame:
    """Return the pairing by alignment: the rotation of the baseline with the longest common
    subsequence of signatures with the new cycle, then that subsequence's pairs in order, with the
    kernels of either side between them as ``removed`` / ``new_only``.

    ``frame.attrs["rotation"]`` is the rotation chosen (row ``i`` of the rotated baseline is row
    ``(i + rotation) % n`` of the file), ``frame.attrs["common"]`` the length of the subsequence.
    `alignment` is that of the two tables' :func:`signature_ids` where it was computed already (the
    GPU aligns a whole batch at once); else :func:`lcs.alignment` computes it.
    """
    if alignment is None:
        alignment = lcs.alignment(*signature_ids(base, new))
    rotation, common, rotated_index, new_index = alignment
    n = len(base.rows)
    order = lcs.rotation_order(n, rotation)
    base_index = np.where(rotated_index >= 0, order[np.maximum(rotated_index, 0)] if n else -1, -1)
    base_names = base.rows["kernel_name"].to_numpy(object)
    new_names = new.rows["kernel_name"].to_numpy(object)
    kind = np.empty(base_index.shape[0], object)
    for k in range(base_index.shape[0]):
        if base_index[k] < 0:
            kind[k] = "new_only"
        elif new_index[k] < 0:
            kind[k] = "removed"
        else:
            kind[k] = "exact" if base_names[base_index[k]] == new_names[new_index[k]] else "similar"
    frame = _frame(base, new, base_index, new_index, kind)
    frame.attrs.update(rotation=int(rotation), common=int(common))
    return frame


def _first_free(queue: deque | None, used: np.ndarray) -> int:
    """Return the lowest unused index left in `queue` (dropping used ones), or -1."""
    while queue:
        if not used[queue[0]]:
            return queue.popleft()
        queue.popleft()
    return -1


def match(base: CycleTable, new: CycleTable) -> pd.DataFrame:
    """Return the pairing by matching: each new kernel in order takes the first unmatched baseline
    kernel of the same name (``exact``), else of the same signature (``similar``), else is ``new_only``;
    the baseline kernels left follow in baseline order as ``removed``."""
    base_names = list(base.rows["kernel_name"])
    by_name: dict[str, deque] = {}
    by_signature: dict[str, deque] = {}
    for i, name in enumerate(base_names):
        by_name.setdefault(name, deque()).append(i)
        by_signature.setdefault(signature(name), deque()).append(i)
    used = np.zeros(len(base_names), bool)
    base_index, new_index, kind = [], [], []
    for j, name in enumerate(new.rows["kernel_name"]):
        i, how = _first_free(by_name.get(name), used), "exact"
        if i < 0:
            i, how = _first_free(by_signature.get(signature(name)), used), "similar"
        if i < 0:
            how = "new_only"
        else:
            used[i] = True
        base_index.append(i)
        new_index.append(j)
        kind.append(how)
    left = np.flatnonzero(~used)
    base_index.extend(left.tolist())
    new_index.extend([-1] * len(left))
    kind.extend(["removed"] * len(left))
    return _frame(base, new, np.array(base_index, np.int64), np.array(new_index, np.int64), np.array(kind, object))


def pair_all(
    pairs: list[tuple[CycleTable, CycleTable]], mode: str = "align", engine: Engine = CPU
) -> list[pd.DataFrame]:
    """Return the pairing of `mode` (``align``: :func:`align`, ``match``: :func:`match`) of each
    (baseline, new) pair of tables. On the GPU all pairs are aligned together
    (:func:`gpuan.compare.lcs_gpu.alignments`: one launch per kernel for the whole batch); the result is
    the CPU's."""
    if mode != "align":
        return [match(base, new) for base, new in pairs]
    ids = [signature_ids(base, new) for base, new in pairs]
    if engine.is_gpu:
        from gpuan.compare import lcs_gpu

        found = lcs_gpu.alignments(ids)
    else:
        # the LCS functions release the GIL: the pairs align side by side, one per thread of numba's pool
        with ThreadPoolExecutor(max_workers=numba.get_num_threads()) as pool:
            found = list(pool.map(lambda pair: lcs.alignment(*pair), ids))
    return [align(base, new, alignment) for (base, new), alignment in zip(pairs, found)]
