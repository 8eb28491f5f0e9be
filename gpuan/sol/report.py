"""The speed-of-light report: totals by layer type, by function and by phase, the ops that lose the most
time, and the per-op table written as CSV, Parquet or XLSX."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from gpuan.errors import TraceError
from gpuan.outputs.files import replace_atomic
from gpuan.sol.score import Scored
from gpuan.trace.schema import UNNAMED

SECTION_COLUMNS = ["ops", "estimated_ms", "share", "measured_ms", "efficiency"]
#: the per-op table's columns, in the order files get them
TABLE_COLUMNS = [
    "name", "category", "layer", "phase", "rank", "ts", "input_dims", "dtype", "peak", "flops", "bytes",
    "intensity", "estimated_ns", "measured_ns", "kernels", "bound", "efficiency", "model_error", "lost_ns",
]  # fmt: skip


def frame(scored: Scored) -> pd.DataFrame:
    """Return the scored ops as a DataFrame with ``layer`` filled (module class, else category),
    ``phase`` "(none)" where no range held the op, and ``name`` "(unnamed)" where the trace gave none."""
    df = scored.ops.to_pandas()
    for c in ("name", "category", "layer", "phase", "bound", "dtype", "peak", "input_dims"):
        df[c] = df[c].astype(object)
    df["name"] = df["name"].fillna(UNNAMED)
    df["layer"] = df["layer"].where(df["layer"].notna(), df["category"])
    df["phase"] = df["phase"].where(df["phase"].fillna("") != "", "(none)")
    return df


def section(df: pd.DataFrame, by: str, total_ns: int) -> pd.DataFrame:
    """Return one row per value of `by`: ops, estimated ms (modelled ops), share (measured / `total_ns`, the
    summed op time :attr:`Scored.op_ns`, so the rows add up to 100 %), measured ms (the ops' times summed),
    efficiency (estimated / measured over the modelled ops), sorted by measured time."""
    modelled = ~df["model_missing"]
    g = df.assign(
        est=df["estimated_ns"].where(modelled, 0.0),
        meas_modelled=df["measured_ns"].where(modelled, 0),
    ).groupby(by, sort=False)
    out = pd.DataFrame(
        {
            "ops": g.size(),
            "estimated_ms": g["est"].sum() / 1e6,
            "share": g["measured_ns"].sum() / total_ns if total_ns else np.nan,
            "measured_ms": g["measured_ns"].sum() / 1e6,
            "efficiency": g["est"].sum() / g["meas_modelled"].sum().replace(0, np.nan),
        }
    )
    return out.sort_values("measured_ms", ascending=False)


def by_phase(df: pd.DataFrame, total_ns: int) -> pd.DataFrame:
    """Return the by-phase section with the hierarchy rolled up: an op in ``a/b/c`` counts in ``a``,
    ``a/b`` and ``a/b/c``; rows in path order, so children follow their parent. The top-level rows (and
    "(none)") add up to 100 % of `total_ns`; a child's share is also in its parent's."""
    parts = df["phase"].str.split("/")
    depth = parts.str.len().max() if len(df) else 0
    rolled = []
    for d in range(1, int(depth) + 1):
        has = parts.str.len() >= d
        sub = df[has].assign(phase=parts[has].str[:d].str.join("/"))
        rolled.append(sub)
    table = section(pd.concat(rolled) if rolled else df, "phase", total_ns)
    return table.sort_index(key=lambda ix: ix.map(lambda p: (p == "(none)", p)))


def top_lost(df: pd.DataFrame, n: int = 10) -> pd.DataFrame:
    """Return the `n` modelled ops with the most lost time (measured − estimated)."""
    cols = ["name", "phase", "input_dims", "dtype", "bound", "estimated_ns", "measured_ns", "efficiency", "lost_ns"]
    return df[~df["model_missing"]].nlargest(n, "lost_ns")[cols]


def totals(scored: Scored, df: pd.DataFrame) -> dict:
    """Return the totals line's facts: device, roofs, ops, busy ms (the union of activity), op ms (the ops'
    times summed: what every share is of), overlap ms (op − busy), modelled share (of op ms), estimated ms,
    model errors and the ops scored against the L2 roof."""
    return {
        "device": scored.roofs.device,
        "ceilings": scored.roofs.kind,
        "ops": int(len(df)),
        "modelled_ops": int((~df["model_missing"]).sum()),
        "busy_ms": scored.busy_ns / 1e6,
        "op_ms": scored.op_ns / 1e6,
        "overlap_ms": scored.overlap_ns / 1e6,
        "shares_of": "op_ms",
        "modelled_share": scored.modelled_share,
        "l2_ops": int((df["resident_bytes"] > 0).sum()),  # scored against the hierarchical roof
        "estimated_ms": float(df["estimated_ns"].where(~df["model_missing"], 0).sum() / 1e6),
        "model_errors": int(df["model_error"].sum()),
    }


def efficiency_text(value: float) -> str:
    """An efficiency as a percentage; above 1 it is a modelling error and is shown as such, never >100%."""
    if value != value:  # NaN
        return "–"
    return "model error" if value > 1 else f"{value:.1%}"


def _ms(value: float) -> str:
    return f"{value:,.3f}" if value >= 1 else f"{value:.4f}"


def render(scored: Scored, top: int = 10, width: int | None = None) -> str:
    """Return the console report: totals, the three sections and the top ops by lost time."""
    from rich.console import Console
    from rich.table import Table

    df = frame(scored)
    console = Console(file=io.StringIO(), record=True, width=width or 120, color_system=None)
    t = totals(scored, df)
    unit = "CPU" if scored.on_cpu else "GPU"
    console.print(scored.source, soft_wrap=True)
    console.print(
        f"device {t['device']} ({t['ceilings']} roofs)   ops {t['ops']:,}   modelled {t['modelled_ops']:,}   "
        f"on the L2 roof {t['l2_ops']:,}   model errors {t['model_errors']}",
        soft_wrap=True,
    )
    busy = "top-level ops" if scored.on_cpu else "union of its activity"
    if t["overlap_ms"] >= 0:
        gap = f"{t['overlap_ms']:,.3f} ms of it overlapping"
    else:
        gap = f"{-t['overlap_ms']:,.3f} ms less: busy in no scored op"
    console.print(
        f"{unit} busy {t['busy_ms']:,.3f} ms ({busy})   op time {t['op_ms']:,.3f} ms (ops' times summed, {gap})",
        soft_wrap=True,
    )
    console.print(
        f"shares are of op time   modelled {t['modelled_share']:.1%} of op time   "
        f"estimated {t['estimated_ms']:,.3f} ms",
        soft_wrap=True,
    )
    for title, table in (
        ("by layer type", section(df, "layer", scored.op_ns)),
        ("by function", section(df, "name", scored.op_ns).head(top)),
        ("by phase (a phase holds its children: top-level rows add up)", by_phase(df, scored.op_ns)),
    ):
        rt = Table(title=title, title_justify="left")
        rt.add_column(title.removeprefix("by ").split(" (")[0], overflow="ellipsis", max_width=52, no_wrap=True)
        for c in SECTION_COLUMNS:
            rt.add_column(c.replace("_", " "), justify="right")
        for key, row in table.iterrows():
            rt.add_row(
                str(key), f"{int(row['ops']):,}", _ms(row["estimated_ms"]), f"{row['share']:.1%}",
                _ms(row["measured_ms"]), efficiency_text(row["efficiency"]),
            )  # fmt: skip
        console.print(rt)
    lost = top_lost(df, top)
    rt = Table(title=f"top {len(lost)} ops by lost time", title_justify="left")
    # fixed widths that fit 120 columns: the figures and the bound whole, names and shapes cut with "…"
    for c, width in (
        ("op", 22),
        ("phase", 10),
        ("shapes", 28),
        ("bound", 11),
        ("est. us", 8),
        ("meas. us", 8),
        ("efficiency", 11),
    ):
        rt.add_column(c, justify="left" if c in ("op", "phase", "shapes", "bound") else "right", overflow="ellipsis",
                      width=width, no_wrap=True)  # fmt: skip
    for _, r in lost.iterrows():
        shapes = r["input_dims"] if isinstance(r["input_dims"], str) else "–"
        rt.add_row(
            r["name"], r["phase"], shapes, r["bound"], f"{r['estimated_ns'] / 1e3:,.1f}",
            f"{r['measured_ns'] / 1e3:,.1f}", efficiency_text(r["efficiency"]),
        )  # fmt: skip
    console.print(rt)
    return console.export_text()


def write_table(scored: Scored, path: str) -> None:
    """Write every scored op to `path` (.csv, .parquet or .xlsx, by its suffix), atomically."""
    suffix = Path(path).suffix.lower()
    table = scored.ops.select(TABLE_COLUMNS)
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
    elif suffix == ".xlsx":
        replace_atomic(path, lambda tmp: _xlsx(scored, tmp))
    else:
        raise TraceError(path, "unknown table format; use .csv, .parquet or .xlsx")


def _xlsx(scored: Scored, path: Path) -> None:
    df = frame(scored)
    with pd.ExcelWriter(path, engine="xlsxwriter") as xl:
        summary = pd.DataFrame([totals(scored, df)])
        summary.to_excel(xl, sheet_name="totals", index=False)
        section(df, "layer", scored.op_ns).to_excel(xl, sheet_name="by layer type")
        section(df, "name", scored.op_ns).to_excel(xl, sheet_name="by function")
        by_phase(df, scored.op_ns).to_excel(xl, sheet_name="by phase")
        top_lost(df, 50).to_excel(xl, sheet_name="top lost", index=False)
        df[TABLE_COLUMNS].to_excel(xl, sheet_name="ops", index=False)
