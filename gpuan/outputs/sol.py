"""The speed-of-light report of a ``gpuan.sol.analyse`` Result: the console text (totals, by layer type, by
function, by phase, the ops that lose the most time), the JSON document, the per-op table as CSV, Parquet
or XLSX, and what ``gpuan sol calibrate`` measured. The roofline chart is :mod:`gpuan.outputs.roofline_chart`."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from gpuan.errors import UsageError
from gpuan.outputs.files import replace_atomic
from gpuan.outputs.numbers import duration
from gpuan.result import Result
from gpuan.sol.analysis import LOST_ROWS
from gpuan.sol.sections import SECTION_COLUMNS, TOTALS, frame

#: the per-op table's columns, in the order files get them
TABLE_COLUMNS = [
    "name", "category", "layer", "phase", "rank", "ts", "input_dims", "dtype", "peak", "flops", "bytes",
    "intensity", "estimated_ns", "measured_ns", "kernels", "bound", "efficiency", "model_error", "lost_ns",
]  # fmt: skip
TABLE_SUFFIXES = (".csv", ".parquet", ".xlsx")


def efficiency_text(value: float) -> str:
    """Return an efficiency as a percentage; above 1 it is a modelling error and is shown as such, never
    >100%."""
    if value != value:  # NaN
        return "–"
    return "model error" if value > 1 else f"{value:.1%}"


def _ms(ms: float) -> str:
    # section figures: 3 decimals, 4 below a millisecond (sub-ms ops would all read 0.000)
    return duration(ms * 1e6, "ms", 3, label=False, below=(1e6, "ms", 4))


def section_frame(result: Result, name: str) -> pd.DataFrame:
    """Return the section table `name` of a sol Result as a DataFrame indexed by its first column (the
    layer type, function or phase)."""
    table = result.to_pandas(name)
    return table.set_index(table.columns[0])


def totals(result: Result) -> dict:
    """Return the totals of a sol Result (the summary's :data:`gpuan.sol.sections.TOTALS`), in order."""
    return {key: result.summary[key] for key in TOTALS}


def text(result: Result, top: int = 10, width: int | None = None) -> str:
    """Return the console report: totals, the three sections (the by-function one cut to `top` rows) and
    the `top` ops by lost time."""
    from rich.console import Console

    console = Console(file=io.StringIO(), record=True, width=width or 120, color_system=None)
    for line in _header(result):
        console.print(line, soft_wrap=True)
    for title, table in (
        ("by layer type", section_frame(result, "by_layer_type")),
        ("by function", section_frame(result, "by_function").head(top)),
        ("by phase (a phase holds its children: top-level rows add up)", section_frame(result, "by_phase")),
    ):
        console.print(_section_table(title, table))
    console.print(_lost_table(result.to_pandas("lost_time").head(top)))
    return console.export_text()


def _header(result: Result) -> list[str]:
    """The four lines above the tables: source, device and counts, busy and op time, shares."""
    facts = result.summary
    busy = "top-level ops" if facts["on_cpu"] else "union of its activity"
    if facts["overlap_ms"] >= 0:
        gap = f"{duration(facts['overlap_ms'] * 1e6)} of it overlapping"
    else:
        gap = f"{duration(-facts['overlap_ms'] * 1e6)} less: busy in no scored op"
    return [
        facts["source"],
        f"device {facts['device']} ({facts['ceilings']} roofs)   ops {facts['ops']:,}   "
        f"modelled {facts['modelled_ops']:,}   on the L2 roof {facts['l2_ops']:,}   "
        f"model errors {facts['model_errors']}",
        f"{'CPU' if facts['on_cpu'] else 'GPU'} busy {duration(facts['busy_ms'] * 1e6)} ({busy})   "
        f"op time {duration(facts['op_ms'] * 1e6)} (ops' times summed, {gap})",
        f"shares are of op time   modelled {facts['modelled_share']:.1%} of op time   "
        f"estimated {duration(facts['estimated_ms'] * 1e6)}",
    ]


def _section_table(title: str, table: pd.DataFrame):
    from rich.table import Table

    shown = Table(title=title, title_justify="left")
    shown.add_column(title.removeprefix("by ").split(" (")[0], overflow="ellipsis", max_width=52, no_wrap=True)
    for column in SECTION_COLUMNS:
        shown.add_column(column.replace("_", " "), justify="right")
    for key, row in table.iterrows():
        shown.add_row(
            str(key), f"{int(row['ops']):,}", _ms(row["estimated_ms"]), f"{row['share']:.1%}",
            _ms(row["measured_ms"]), efficiency_text(row["efficiency"]),
        )  # fmt: skip
    return shown


def _lost_table(lost: pd.DataFrame):
    from rich.table import Table

    shown = Table(title=f"top {len(lost)} ops by lost time", title_justify="left")
    # fixed widths that fit 120 columns: the figures and the bound whole, names and shapes cut with "…"
    for column, width in (
        ("op", 22), ("phase", 10), ("shapes", 28), ("bound", 11), ("est. us", 8), ("meas. us", 8), ("efficiency", 11),
    ):  # fmt: skip
        left = column in ("op", "phase", "shapes", "bound")
        shown.add_column(column, justify="left" if left else "right", overflow="ellipsis", width=width, no_wrap=True)
    for _, op in lost.iterrows():
        shapes = op["input_dims"] if isinstance(op["input_dims"], str) else "–"
        shown.add_row(
            op["name"], op["phase"], shapes, op["bound"], duration(op["estimated_ns"], "us", 1, label=False),
            duration(op["measured_ns"], "us", 1, label=False), efficiency_text(op["efficiency"]),
        )  # fmt: skip
    return shown


def json_text(result: Result) -> str:
    """Return the JSON document: totals, by_layer_type, by_function, by_phase (each keyed by its first
    column; every share is of totals.op_ms, the ops' times summed) and roofs."""
    roofs = result.summary["roofs"]
    document = {
        "totals": totals(result),
        "by_layer_type": _records(section_frame(result, "by_layer_type")),
        "by_function": _records(section_frame(result, "by_function")),
        "by_phase": _records(section_frame(result, "by_phase")),
        "roofs": {key: roofs[key] for key in ("flops", "memory_bandwidth", "l2_bytes", "l2_bandwidth", "sources")},
    }
    return json.dumps(document, indent=1, default=float) + "\n"


def _records(table: pd.DataFrame) -> dict:
    # NaN (no modelled op in the row) is JSON null
    rows = table.to_dict("index")
    return {str(key): {column: (None if v != v else v) for column, v in row.items()} for key, row in rows.items()}


def check_table_path(path: str) -> None:
    """Raise :class:`UsageError` unless `path` (``-o``) ends in a table format :func:`write_table` writes."""
    if Path(path).suffix.lower() not in TABLE_SUFFIXES:
        raise UsageError(f"-o {path}: unknown table format; use .csv, .parquet or .xlsx")


def write_table(result: Result, path: str) -> None:
    """Write every scored op of a sol Result to `path` (.csv, .parquet or .xlsx, by its suffix; the XLSX
    also holds the totals and the sections), atomically."""
    check_table_path(path)
    suffix = Path(path).suffix.lower()
    table = result["ops"].select(TABLE_COLUMNS)
    if suffix == ".parquet":
        replace_atomic(path, lambda tmp: pq.write_table(table, tmp))
    elif suffix == ".csv":
        plain = pa.table(
            {
                c: table[c].cast(pa.string()) if pa.types.is_dictionary(table[c].type) else table[c]
                for c in TABLE_COLUMNS
            }
        )
        replace_atomic(path, lambda tmp: pacsv.write_csv(plain, tmp))
    else:
        replace_atomic(path, lambda tmp: _xlsx(result, tmp))


def _xlsx(result: Result, path: Path) -> None:
    with pd.ExcelWriter(path, engine="xlsxwriter") as book:
        pd.DataFrame([totals(result)]).to_excel(book, sheet_name="totals", index=False)
        section_frame(result, "by_layer_type").to_excel(book, sheet_name="by layer type")
        section_frame(result, "by_function").to_excel(book, sheet_name="by function")
        section_frame(result, "by_phase").to_excel(book, sheet_name="by phase")
        result.to_pandas("lost_time").head(LOST_ROWS).to_excel(book, sheet_name="top lost", index=False)
        frame(result["ops"])[TABLE_COLUMNS].to_excel(book, sheet_name="ops", index=False)


def calibration_text(name: str, ceilings: dict, path: str | Path) -> str:
    """Return what ``gpuan sol calibrate`` says it measured (`ceilings` of device `name`, saved to `path`)."""
    lines = [f"measured ceilings of {name}, saved to {path}",
             f"  memory bandwidth {ceilings['memory_bandwidth'] / 1e9:,.1f} GB/s"]  # fmt: skip
    if ceilings.get("l2_bandwidth"):
        lines.append(
            f"  L2 bandwidth {ceilings['l2_bandwidth'] / 1e9:,.1f} GB/s (data up to {ceilings['l2_bytes'] >> 10:,} KiB)"
        )
    lines += [f"  {key:12} {value / 1e12:,.3f} TFLOP/s" for key, value in sorted(ceilings["flops"].items())]
    return "\n".join(lines) + "\n"
