"""What ``gpuan compare`` shows and writes from a :mod:`gpuan.compare` Result: the console report, the
comparison as CSV, and the XLSX workbook (one sheet per pair of cycles, coloured by match type, the
change column as a heat map)."""

from __future__ import annotations

import csv
import io
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd

from gpuan.compare.pairing import MATCH_TYPES
from gpuan.outputs.files import replace_atomic, write_text
from gpuan.outputs.numbers import change, duration
from gpuan.result import Result

HEADERS = (
    "Baseline Kernel", "Base Avg (µs)", "Base Min", "Base Max", "Base StdDev",
    "New Kernel", "New Avg (µs)", "New Min", "New Max", "New StdDev", "Change (%)", "Match Type",
)  # fmt: skip
#: kernels listed under "largest time changes" in the report of one comparison
TOP_CHANGES = 5


def _percent(value: float | None) -> float:
    return float("nan") if value is None else value


def _runs(result: Result) -> bool:
    return "unpaired_base" in result.summary


def _pair_frames(result: Result) -> list[tuple[dict, pd.DataFrame]]:
    """Return, per pair of cycles, its ``cycles`` row (a dict) and its kernel pairs as a DataFrame
    (the ``kernels`` columns without ``pair``, in the order of the CSV and XLSX, then ``delta_us``; NaN for
    the missing side's numbers)."""
    kernels = result.to_pandas("kernels")
    out = []
    for row in result["cycles"].to_pylist():
        # the kernels table is pair, *COLUMNS, delta_us (compare.analysis._kernels_table and _empty_kernels)
        out.append((row, kernels[kernels["pair"] == row["pair"]].drop(columns=["pair"]).reset_index(drop=True)))
    return out


def _pair_title(row: dict, runs: bool) -> str:
    """Return the name of a pair of cycles: ``Base<i>-New<j> (<similarity>%)`` in a comparison of two
    runs, else ``Comparison``."""
    if not runs:
        return "Comparison"
    return f"Base{row['base'] + 1}-New{row['new'] + 1} ({row['similarity'] * 100:.0f}%)"


def _summary_lines(row: dict, frame: pd.DataFrame, top: int) -> list[str]:
    lines = ["  " + ", ".join(f"{kind} {row[kind]}" for kind in MATCH_TYPES)]
    # the cycle CSVs hold µs; the one formatter takes ns
    before, after = duration(row["base_cycle_us"] * 1e3, "us", 1), duration(row["new_cycle_us"] * 1e3, "us", 1)
    lines.append(f"  cycle time {before} -> {after} ({change(_percent(row['change_pct']))})")
    if top <= 0 or frame.empty:
        return lines
    delta = frame["delta_us"]
    lines.append("  largest time changes:")
    for k in delta.abs().sort_values(ascending=False, kind="stable").index[:top]:
        pair = frame.loc[k]
        name = pair["new_kernel"] or pair["base_kernel"]
        shown = change(pair["change_pct"])
        lines.append(f"    {delta[k]:+10,.3f} us {shown:>8}  {pair['match_type']:<8}  {name[:90]}")
    return lines


def text(result: Result, top: int = TOP_CHANGES) -> str:
    """Return the console report: per pair of cycles the files compared, the count of each match type,
    the cycle time before and after, and (comparing two files) the `top` largest time changes; comparing
    two runs, the cycles left unpaired."""
    runs = _runs(result)
    lines = []
    for row, frame in _pair_frames(result):
        if runs:
            lines.append(f"{_pair_title(row, runs)}: {row['base_file']} vs {row['new_file']}")
        else:
            how = f"align, rotation {row['rotation']}" if result.summary["mode"] == "align" else "match"
            lines.append(f"{row['base_file']} vs {row['new_file']} ({how})")
        lines += _summary_lines(row, frame, 0 if runs else top)
    if runs:
        for label, key in (("baseline", "unpaired_base"), ("new", "unpaired_new")):
            if result.summary[key]:
                lines.append(f"unpaired {label} cycles: {', '.join(result.summary[key])}")
    return "".join(f"{line}\n" for line in lines)


def _cell(value_us: float) -> str:
    if not math.isfinite(value_us):
        return ""
    return duration(value_us * 1e3, "us", 3, label=False, group=False)


def csv_text(result: Result) -> str:
    """Return the kernel pairs of a comparison of two cycle tables as CSV text: the XLSX headers,
    durations in µs with 3 decimals, the change in percent with 2 (``NEW`` / ``REMOVED`` where one side
    is missing), empty cells for the missing side."""
    ((_, frame),) = _pair_frames(result)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(HEADERS)
    for row in frame.itertuples(index=False):
        if row.match_type == "new_only":
            shown = "NEW"
        elif row.match_type == "removed":
            shown = "REMOVED"
        else:
            shown = f"{row.change_pct:.2f}" if math.isfinite(row.change_pct) else ""
        writer.writerow([
            row.base_kernel, *(_cell(v) for v in row[1:5]),
            row.new_kernel, *(_cell(v) for v in row[6:10]), shown, row.match_type,
        ])  # fmt: skip
    return buf.getvalue()


def write_csv(result: Result, path: str | os.PathLike) -> None:
    """Write the kernel pairs of a comparison of two cycle tables (:func:`csv_text`) to `path`, atomically."""
    write_text(path, csv_text(result))


def sheet_name(name: str) -> str:
    """Return `name` as a valid worksheet name: no ``[]:*?/\\``, at most 31 characters."""
    for ch in "[]:*?/\\":
        name = name.replace(ch, "_")
    return name.strip("'")[:31] or "Sheet"


def _side_label(side: str, kernels: int, iterations: int, cycle_us: float) -> str:
    """Return the summary text of one side: ``Baseline: N kernels × I iters, X.X µs/cycle``."""
    label = f"{side}: {kernels} kernels"
    if iterations > 0:
        label += f" × {iterations} iters"
    if cycle_us > 0:
        label += f", {duration(cycle_us * 1e3, 'us', 1, label=False, group=False)} µs/cycle"
    return label


def _styles(wb) -> dict:
    fill = {"exact": "#E2EFDA", "similar": "#DDEBF7", "removed": "#FFC7CE", "new_only": "#FFEB9C"}
    centred = {"bold": True, "align": "center", "pattern": 1}
    return {
        "header": wb.add_format({**centred, "font_color": "#FFFFFF", "bg_color": "#4472C4", "valign": "vcenter"}),
        "faster": wb.add_format({**centred, "font_color": "#FFFFFF", "bg_color": "#00B050", "num_format": "0.00"}),
        "slower": wb.add_format({**centred, "font_color": "#FFFFFF", "bg_color": "#FF0000", "num_format": "0.00"}),
        "neutral": wb.add_format({**centred, "bg_color": "#FFC000", "num_format": "0.00"}),
        **{k: wb.add_format({"pattern": 1, "bg_color": colour, "num_format": "0.000"}) for k, colour in fill.items()},
    }


def _heat(percent: float, styles: dict):
    if percent < -5:
        return styles["faster"]
    return styles["slower"] if percent > 5 else styles["neutral"]


def _write_change(ws, r: int, match_type: str, percent: float, styles: dict) -> None:
    if match_type == "new_only":
        ws.write_string(r, 10, "NEW", styles["neutral"])
    elif match_type == "removed":
        ws.write_string(r, 10, "REMOVED", styles["faster"])
    elif np.isfinite(percent):
        # coloured by the value shown, so that a cell reading -5.00 is never green
        shown = round(float(percent), 2)
        ws.write_number(r, 10, shown, _heat(shown, styles))
    else:
        ws.write_blank(r, 10, None, styles["neutral"])


def _write_sheet(ws, styles: dict, row: dict, frame: pd.DataFrame) -> None:
    ws.write_row(0, 0, HEADERS, styles["header"])
    ws.write_string(1, 0, _side_label("Baseline", row["base_kernels"], row["base_iterations"], row["base_cycle_us"]))
    ws.write_number(1, 1, round(row["base_sum_us"], 3))
    ws.write_string(1, 5, _side_label("New", row["new_kernels"], row["new_iterations"], row["new_cycle_us"]))
    ws.write_number(1, 6, round(row["new_sum_us"], 3))
    cycle_change = round(_percent(row["change_pct"]), 2)
    if np.isfinite(cycle_change):
        ws.write_number(1, 10, cycle_change, _heat(cycle_change, styles))
    for r, pair in enumerate(frame.itertuples(index=False), start=2):
        style = styles[pair.match_type]
        for side, (name, stats) in enumerate(((pair.base_kernel, pair[1:5]), (pair.new_kernel, pair[6:10]))):
            present = isinstance(name, str) and name != ""
            if present:
                ws.write_string(r, 5 * side, name, style)
            else:
                ws.write_blank(r, 5 * side, None, style)
            for k, v in enumerate(stats, start=5 * side + 1):
                if present and np.isfinite(v):
                    ws.write_number(r, k, float(v), style)
                else:
                    ws.write_blank(r, k, None, style)
        _write_change(ws, r, pair.match_type, pair.change_pct, styles)
        ws.write_string(r, 11, pair.match_type, style)
    ws.freeze_panes(1, 0)
    ws.autofilter(0, 0, max(len(frame) + 1, 1), len(HEADERS) - 1)
    for first, last, width in ((0, 0, 55), (1, 4, 12), (5, 5, 55), (6, 9, 12), (10, 10, 12), (11, 11, 15)):
        ws.set_column(first, last, width)


def write_xlsx(result: Result, path: str | os.PathLike) -> None:
    """Write one worksheet per pair of cycles of `result` to `path`, atomically: headers, a summary row
    (kernels, iterations and cycle time per side, change of cycle time), one row per kernel pair coloured
    by match type, the change column as a heat map; header frozen, autofilter on."""
    import xlsxwriter
    from xlsxwriter.exceptions import FileCreateError

    runs = _runs(result)
    sheets = _pair_frames(result)

    def write(tmp: Path) -> None:
        wb = xlsxwriter.Workbook(str(tmp))
        try:
            styles = _styles(wb)
            for row, frame in sheets:
                _write_sheet(wb.add_worksheet(sheet_name(_pair_title(row, runs))), styles, row, frame)
        finally:
            wb.close()

    replace_atomic(path, write, (FileCreateError,))
