"""The roofline chart: arithmetic intensity against achieved FLOP/s, the device's roofs drawn, one point per
op sized by its measured time; one self-contained HTML file (plotly.js inlined, no network needed)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from gpuan.outputs.files import replace_atomic
from gpuan.outputs.numbers import duration
from gpuan.outputs.sol import efficiency_text
from gpuan.result import Result
from gpuan.sol.sections import frame

if TYPE_CHECKING:
    import plotly.graph_objects as go

#: beyond this many ops the chart keeps the ones with the most measured time (a browser stays responsive)
MAX_POINTS = 200_000


def figure(result: Result) -> go.Figure:
    """Return the plotly Figure of the roofline chart of a ``gpuan.sol.analyse`` Result."""
    import plotly.graph_objects as go

    df = frame(result["ops"])
    df = df[(~df["model_missing"]) & (df["flops"] > 0) & (df["measured_ns"] > 0)]
    if len(df) > MAX_POINTS:
        df = df.nlargest(MAX_POINTS, "measured_ns")
    achieved = df["flops"] / (df["measured_ns"] * 1e-9)
    fig = go.Figure()
    size = 6 + 30 * np.sqrt(df["measured_ns"] / max(df["measured_ns"].max(), 1)) if len(df) else []
    for category in sorted(df["category"].unique()):
        sel = df["category"] == category
        text = [
            f"{n}<br>{d}<br>phase {p}<br>{duration(m, 'us', 1)} measured, efficiency {efficiency_text(e)}"
            for n, d, p, m, e in zip(df["name"][sel], df["input_dims"][sel], df["phase"][sel],
                                     df["measured_ns"][sel], df["efficiency"][sel])
        ]  # fmt: skip
        fig.add_trace(
            go.Scattergl(
                x=df["intensity"][sel], y=achieved[sel], mode="markers", name=category, text=text,
                hoverinfo="text", marker={"size": size[sel], "opacity": 0.6},
            )
        )  # fmt: skip
    summary = result.summary
    roofs = summary["roofs"]
    lo = max(float(df["intensity"].min()) / 2, 1e-3) if len(df) else 1e-2
    hi = max(float(df["intensity"].max()) * 2, 1e4) if len(df) else 1e4
    for key in sorted({p for p in df["peak"].dropna().unique()} or roofs["flops"]):
        peak = roofs["flops"][key]
        ridge = peak / roofs["memory_bandwidth"]
        xs = [lo, ridge, hi]
        ys = [lo * roofs["memory_bandwidth"], peak, peak]
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=f"roof {key} ({peak / 1e12:,.1f} TFLOP/s)",
                                 line={"dash": "dash"}))  # fmt: skip
    l2_bandwidth = roofs["l2_bandwidth"]
    if l2_bandwidth > 0:  # the hierarchical roof of ops with reads resident in L2
        top = max(roofs["flops"].values())
        fig.add_trace(go.Scatter(x=[lo, top / l2_bandwidth], y=[lo * l2_bandwidth, top], mode="lines",
                                 name=f"L2 roof ({l2_bandwidth / 1e12:,.2f} TB/s, data up to "
                                 f"{roofs['l2_bytes'] / 2**20:,.0f} MiB)", line={"dash": "dot"}))  # fmt: skip
    fig.update_layout(
        title=f"Roofline: {summary['source']} on {summary['device']} ({summary['ceilings']} roofs;"
        f" memory {roofs['memory_bandwidth'] / 1e12:.2f} TB/s)",
        xaxis={"type": "log", "title": "arithmetic intensity (FLOP/byte)"},
        yaxis={"type": "log", "title": "achieved FLOP/s"},
        template="plotly_white",
    )
    return fig


def write_html(result: Result, path: str) -> None:
    """Write the roofline chart of a sol Result to `path` as one self-contained HTML file, atomically."""
    fig = figure(result)
    replace_atomic(path, lambda tmp: fig.write_html(str(tmp), include_plotlyjs=True, full_html=True))
