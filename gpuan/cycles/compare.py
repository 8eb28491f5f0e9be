"""Kernel-by-kernel comparison of two cycle CSVs (``gpuan compare``): pairing, cycle pairing, writers.

A comparison is a DataFrame with one row per pair: the baseline kernel and its statistics, the new
kernel and its statistics, the change of the average in percent and the match type (``exact``: same
name, ``similar``: same signature, ``removed``: baseline only, ``new_only``: new only).
"""

from __future__ import annotations

import csv
import io
import os
from collections import deque
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from gpuan.cycles import lcs
from gpuan.cycles.csvfile import CycleTable
from gpuan.cycles.signature import signature
from gpuan.outputs.files import replace_atomic, write_text

COLUMNS = (
    "base_kernel", "base_avg", "base_min", "base_max", "base_std",
    "new_kernel", "new_avg", "new_min", "new_max", "new_std", "change_pct", "match_type",
)  # fmt: skip
HEADERS = (
    "Baseline Kernel", "Base Avg (µs)", "Base Min", "Base Max", "Base StdDev",
    "New Kernel", "New Avg (µs)", "New Min", "New Max", "New StdDev", "Change (%)", "Match Type",
)  # fmt: skip
MATCH_TYPES = ("exact", "similar", "removed", "new_only")
#: cycles of two runs less alike than this (weighted Jaccard of time shares) are not paired
MIN_SIMILARITY = 0.2
_STATS = ("avg_duration_us", "min_duration_us", "max_duration_us", "stddev_us")


def cycle_time_us(table: CycleTable) -> float:
    """Return the average cycle time of a table in µs: its metadata row, else the sum of the averages."""
    return table.avg_cycle_us if table.avg_cycle_us > 0 else float(table.rows["avg_duration_us"].sum())


def _signature_ids(*tables: CycleTable) -> tuple[list[np.ndarray], int]:
    ids: dict[str, int] = {}
    out = [np.array([ids.setdefault(signature(n), len(ids)) for n in t.rows["kernel_name"]], np.int64) for t in tables]
    return out, len(ids)


def _frame(base: CycleTable, new: CycleTable, bi: np.ndarray, nj: np.ndarray, kind: np.ndarray) -> pd.DataFrame:
    """Return the comparison frame for pairs (baseline index or -1, new index or -1, match type)."""
    out: dict[str, object] = {}
    for side, table, idx in (("base", base, bi), ("new", new, nj)):
        has = idx >= 0
        take = np.where(has, idx, 0)
        names = table.rows["kernel_name"].to_numpy(object)
        out[f"{side}_kernel"] = np.where(has, names[take] if len(names) else "", "")
        for key, col in zip(("avg", "min", "max", "std"), _STATS):
            values = table.rows[col].to_numpy(np.float64)
            out[f"{side}_{key}"] = np.where(has, values[take] if len(values) else np.nan, np.nan)
    base_avg, new_avg = out["base_avg"], out["new_avg"]
    with np.errstate(divide="ignore", invalid="ignore"):
        change = (new_avg - base_avg) / base_avg * 100.0
    # a kernel at 0 µs in the baseline has no relative change (0 when it stays at 0)
    change = np.where(base_avg == 0, np.where(new_avg == 0, 0.0, np.nan), change)
    out["change_pct"] = change
    out["match_type"] = kind
    frame = pd.DataFrame(out, columns=list(COLUMNS))
    frame["base_kernel"] = frame["base_kernel"].astype(object)
    frame["new_kernel"] = frame["new_kernel"].astype(object)
    return frame


def align(base: CycleTable, new: CycleTable) -> pd.DataFrame:
    """Return the comparison by alignment: the rotation of the baseline with the longest common
    subsequence of signatures with the new cycle, then that subsequence's pairs in order, with the
    kernels of either side between them as ``removed`` / ``new_only``.

    ``frame.attrs["rotation"]`` is the rotation chosen (row ``i`` of the rotated baseline is row
    ``(i + rotation) % n`` of the file), ``frame.attrs["common"]`` the length of the subsequence.
    """
    (a, b), vocab = _signature_ids(base, new)
    rot, common = lcs.best_rotation(a, b, vocab)
    n = a.shape[0]
    order = (np.arange(n) + rot) % n if n else np.zeros(0, np.int64)
    rotated = a[order]
    ai, bj = lcs.backtrack(lcs.lcs_table(rotated, b), rotated, b)
    bi = np.where(ai >= 0, order[np.maximum(ai, 0)] if n else -1, -1)
    base_names = base.rows["kernel_name"].to_numpy(object)
    new_names = new.rows["kernel_name"].to_numpy(object)
    kind = np.empty(bi.shape[0], object)
    for k in range(bi.shape[0]):
        if bi[k] < 0:
            kind[k] = "new_only"
        elif bj[k] < 0:
            kind[k] = "removed"
        else:
            kind[k] = "exact" if base_names[bi[k]] == new_names[bj[k]] else "similar"
    frame = _frame(base, new, bi, bj, kind)
    frame.attrs.update(rotation=int(rot), common=int(common))
    return frame


def _first_free(queue: deque | None, used: np.ndarray) -> int:
    """Return the lowest unused index left in `queue` (dropping used ones), or -1."""
    while queue:
        if not used[queue[0]]:
            return queue.popleft()
        queue.popleft()
    return -1


def match(base: CycleTable, new: CycleTable) -> pd.DataFrame:
    """Return the comparison by matching: each new kernel in order takes the first unmatched baseline
    kernel of the same name (``exact``), else of the same signature (``similar``), else is ``new_only``;
    the baseline kernels left follow in baseline order as ``removed``."""
    base_names = list(base.rows["kernel_name"])
    by_name: dict[str, deque] = {}
    by_sig: dict[str, deque] = {}
    for i, name in enumerate(base_names):
        by_name.setdefault(name, deque()).append(i)
        by_sig.setdefault(signature(name), deque()).append(i)
    used = np.zeros(len(base_names), bool)
    bi, nj, kind = [], [], []
    for j, name in enumerate(new.rows["kernel_name"]):
        i, how = _first_free(by_name.get(name), used), "exact"
        if i < 0:
            i, how = _first_free(by_sig.get(signature(name)), used), "similar"
        if i < 0:
            how = "new_only"
        else:
            used[i] = True
        bi.append(i)
        nj.append(j)
        kind.append(how)
    left = np.flatnonzero(~used)
    bi.extend(left.tolist())
    nj.extend([-1] * len(left))
    kind.extend(["removed"] * len(left))
    return _frame(base, new, np.array(bi, np.int64), np.array(nj, np.int64), np.array(kind, object))


def time_shares(table: CycleTable) -> pd.Series:
    """Return each signature's share of the table's summed average time (0 for all when that sum is 0)."""
    rows = table.rows
    total = float(rows["avg_duration_us"].sum())
    sigs = rows["kernel_name"].map(signature)
    shares = rows["avg_duration_us"] / total if total > 0 else rows["avg_duration_us"] * 0.0
    return shares.groupby(sigs.to_numpy(), sort=True).sum()


def similarity(base: CycleTable, new: CycleTable) -> float:
    """Return the weighted Jaccard similarity (0..1) of the two tables' signature time shares."""
    a, b = time_shares(base), time_shares(new)
    a, b = a.align(b, fill_value=0.0)
    top = float(np.maximum(a, b).sum())
    return float(np.minimum(a, b).sum()) / top if top > 0 else 0.0


def pair_cycles(base_tables: Sequence[CycleTable], new_tables: Sequence[CycleTable]) -> list[tuple[int, int, float]]:
    """Return ``(i, j, similarity)`` pairs of baseline and new cycles (0-based list indices), sorted by
    ``i``: greedily the most similar pair first (ties: lower ``i``, then lower ``j``), each cycle in at
    most one pair, none below :data:`MIN_SIMILARITY`."""
    scores = [(similarity(b, n), i, j) for i, b in enumerate(base_tables) for j, n in enumerate(new_tables)]
    scores.sort(key=lambda s: (-s[0], s[1], s[2]))
    used_b, used_n, pairs = set(), set(), []
    for sim, i, j in scores:
        if sim < MIN_SIMILARITY:
            break
        if i in used_b or j in used_n:
            continue
        used_b.add(i)
        used_n.add(j)
        pairs.append((i, j, sim))
    return sorted(pairs)


def summary_label(side: str, table: CycleTable) -> str:
    """Return the summary text of one side: ``Baseline: N kernels × I iters, X.X µs/cycle``."""
    text = f"{side}: {len(table.rows)} kernels"
    if table.iterations > 0:
        text += f" × {table.iterations} iters"
    t = cycle_time_us(table)
    if t > 0:
        text += f", {t:.1f} µs/cycle"
    return text


def cycle_change_pct(base: CycleTable, new: CycleTable) -> float:
    """Return the change of the cycle time from `base` to `new` in percent (NaN for a 0 baseline)."""
    b, n = cycle_time_us(base), cycle_time_us(new)
    return (n - b) / b * 100.0 if b > 0 else float("nan")


def sheet_name(name: str) -> str:
    """Return `name` as a valid worksheet name: no ``[]:*?/\\``, at most 31 characters."""
    for ch in "[]:*?/\\":
        name = name.replace(ch, "_")
    return name.strip("'")[:31] or "Sheet"


def _styles(wb) -> dict:
    fill = {"exact": "#E2EFDA", "similar": "#DDEBF7", "removed": "#FFC7CE", "new_only": "#FFEB9C"}
    centred = {"bold": True, "align": "center", "pattern": 1}
    return {
        "header": wb.add_format({**centred, "font_color": "#FFFFFF", "bg_color": "#4472C4", "valign": "vcenter"}),
        "faster": wb.add_format({**centred, "font_color": "#FFFFFF", "bg_color": "#00B050", "num_format": "0.00"}),
        "slower": wb.add_format({**centred, "font_color": "#FFFFFF", "bg_color": "#FF0000", "num_format": "0.00"}),
        "neutral": wb.add_format({**centred, "bg_color": "#FFC000", "num_format": "0.00"}),
        **{k: wb.add_format({"pattern": 1, "bg_color": c, "num_format": "0.000"}) for k, c in fill.items()},
    }


def _heat(change: float, styles: dict):
    if change < -5:
        return styles["faster"]
    return styles["slower"] if change > 5 else styles["neutral"]


def _write_sheet(ws, styles: dict, base: CycleTable, new: CycleTable, frame: pd.DataFrame) -> None:
    ws.write_row(0, 0, HEADERS, styles["header"])
    ws.write_string(1, 0, summary_label("Baseline", base))
    ws.write_number(1, 1, round(float(base.rows["avg_duration_us"].sum()), 3))
    ws.write_string(1, 5, summary_label("New", new))
    ws.write_number(1, 6, round(float(new.rows["avg_duration_us"].sum()), 3))
    change = round(cycle_change_pct(base, new), 2)
    if np.isfinite(change):
        ws.write_number(1, 10, change, _heat(change, styles))
    for r, row in enumerate(frame.itertuples(index=False), start=2):
        style = styles[row.match_type]
        for c, (name, stats) in enumerate(((row.base_kernel, row[1:5]), (row.new_kernel, row[6:10]))):
            present = isinstance(name, str) and name != ""
            if present:
                ws.write_string(r, 5 * c, name, style)
            else:
                ws.write_blank(r, 5 * c, None, style)
            for k, v in enumerate(stats, start=5 * c + 1):
                if present and np.isfinite(v):
                    ws.write_number(r, k, float(v), style)
                else:
                    ws.write_blank(r, k, None, style)
        if row.match_type == "new_only":
            ws.write_string(r, 10, "NEW", styles["neutral"])
        elif row.match_type == "removed":
            ws.write_string(r, 10, "REMOVED", styles["faster"])
        elif np.isfinite(row.change_pct):
            # coloured by the value shown, so that a cell reading -5.00 is never green
            change = round(float(row.change_pct), 2)
            ws.write_number(r, 10, change, _heat(change, styles))
        else:
            ws.write_blank(r, 10, None, styles["neutral"])
        ws.write_string(r, 11, row.match_type, style)
    ws.freeze_panes(1, 0)
    ws.autofilter(0, 0, max(len(frame) + 1, 1), len(HEADERS) - 1)
    for first, last, width in ((0, 0, 55), (1, 4, 12), (5, 5, 55), (6, 9, 12), (10, 10, 12), (11, 11, 15)):
        ws.set_column(first, last, width)


def write_xlsx(path: str | os.PathLike, results: Sequence[tuple[str, CycleTable, CycleTable, pd.DataFrame]]) -> None:
    """Write one worksheet per ``(sheet name, baseline, new, comparison frame)`` to `path`, atomically:
    headers, a summary row (kernels, iterations and cycle time per side, change of cycle time), one row
    per pair coloured by match type, the change column as a heat map; header frozen, autofilter on."""
    import xlsxwriter
    from xlsxwriter.exceptions import FileCreateError

    def write(tmp: Path) -> None:
        wb = xlsxwriter.Workbook(str(tmp))
        try:
            styles = _styles(wb)
            for name, base, new, frame in results:
                _write_sheet(wb.add_worksheet(sheet_name(name)), styles, base, new, frame)
        finally:
            wb.close()

    replace_atomic(path, write, (FileCreateError,))


def _fmt(value: float, spec: str) -> str:
    return format(value, spec) if np.isfinite(value) else ""


def render_csv(frame: pd.DataFrame) -> str:
    """Return the comparison as CSV text: the XLSX headers, durations with 3 decimals, the change with 2
    (``NEW`` / ``REMOVED`` where one side is missing), empty cells for the missing side."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(HEADERS)
    for row in frame.itertuples(index=False):
        if row.match_type == "new_only":
            change = "NEW"
        elif row.match_type == "removed":
            change = "REMOVED"
        else:
            change = _fmt(row.change_pct, ".2f")
        w.writerow([
            row.base_kernel, *(_fmt(v, ".3f") for v in row[1:5]),
            row.new_kernel, *(_fmt(v, ".3f") for v in row[6:10]), change, row.match_type,
        ])  # fmt: skip
    return buf.getvalue()


def write_csv(path: str | os.PathLike, frame: pd.DataFrame) -> None:
    """Write the comparison CSV (:func:`render_csv`) to `path`, atomically."""
    write_text(path, render_csv(frame))
