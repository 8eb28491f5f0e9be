"""What a replay prints and writes: the console summary naming the worst stragglers, the tables as CSV
or Parquet in an output directory, and a self-contained HTML view (plotly.js inlined)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from gpuan.outputs.files import TABLE_FORMATS, write_frames, write_text
from gpuan.replay.breakdown import CATEGORIES
from gpuan.replay.run import Replayed

FORMATS = TABLE_FORMATS


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.1f} ms" if abs(ns) >= 1e5 else f"{ns / 1e3:,.1f} us"


def summary(r: Replayed, top: int = 5) -> str:
    """Return the console summary: the run, wait-state totals, the worst stragglers, the breakdown."""
    t = r.tables
    lines = [f"{r.source}: {len(r.ranks)} ranks replayed by {r.n_procs} process{'es' * (r.n_procs > 1)}"]
    if "collectives" in t:
        c = t["collectives"]
        incomplete = int((~c["complete"]).sum())
        inconsistent = int((~c["consistent"]).sum())
        note = f", {incomplete} with members missing from the run" if incomplete else ""
        note += f", {inconsistent} whose members disagree on operation or size" if inconsistent else ""
        lines.append(f"  {len(c)} collectives, {len(t['p2p'])} point-to-point messages{note}")
        lines.append("  wait states:")
        for w in t["wait_totals"].itertuples():
            if w.instances:
                lines.append(f"    {w.wait_state:<15} {w.instances:>7} instances  {_ms(w.total_ns):>12}")
    if "stragglers" in t:
        s = t["stragglers"]
        s = s[s["caused_total"] > 0].head(top)
        if len(s):
            lines.append("  worst stragglers (wait they caused others):")
        for row in s.itertuples():
            what = (
                f"last to {row.late} of {row.collectives} collectives, "
                f"arrived up to {_ms(row.max_delay)} after the first"
                if row.collectives
                else "sent late"
            )
            lines.append(f"    step {row.step:<5} rank {row.rank:<5} {_ms(row.caused_total):>12}  {what}")
    if "breakdown" in t:
        lines.append("  time per rank:      span     compute        wait       setup       comm.        idle")
        b = t["breakdown"]
        for row in b.itertuples():
            lines.append(
                f"    rank {row.rank:<5} {_ms(row.span):>11} {row.compute_pct:>10.1f}% {row.wait_pct:>10.1f}% "
                f"{row.setup_pct:>10.1f}% {row.communication_pct:>10.1f}% {row.idle_pct:>10.1f}%"
            )
    if r.finish[0] >= 0:
        lines.append(f"  last to finish: rank {r.finish[0]}, at {_ms(r.finish[1])}")
    if np.any(r.offsets):
        worst = int(np.argmax(np.abs(r.offsets)))
        applied = "applied" if r.aligned else "not applied; --align-clocks applies them"
        lines.append(
            f"  clock offsets from collective completion: up to {_ms(r.offsets[worst])} (rank {worst}), {applied}"
        )
    return "\n".join(lines)


def write_tables(r: Replayed, out: str, fmt: str = "csv") -> list[Path]:
    """Write each table to OUT/<name>.<fmt> (atomically; OUT is created); returns the paths written."""
    tables = dict(r.tables)
    tables["clock_offsets"] = pd.DataFrame({"rank": np.arange(r.offsets.size), "offset_ns": r.offsets})
    return write_frames(tables, out, fmt)


def write_html(r: Replayed, path: str) -> None:
    """Write the HTML view: caused and suffered wait per rank and step, the time breakdown per rank, and
    the communication matrix; one file, no network needed."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    t = r.tables
    fig = make_subplots(
        rows=2, cols=2, subplot_titles=("wait caused (ms) per step and rank", "own wait (ms) per step and rank",
                                        "time per rank (%)", "bytes sent (src → dst)"),
    )  # fmt: skip
    if "stragglers" in t and len(t["stragglers"]):
        s = t["stragglers"]
        for col, name, c in (("caused_total", "caused", 1), ("own_wait", "own", 2)):
            grid = s.pivot_table(index="rank", columns="step", values=col, aggfunc="sum", fill_value=0) / 1e6
            fig.add_trace(go.Heatmap(z=grid.values, x=[str(x) for x in grid.columns], y=[str(y) for y in grid.index],
                                     colorscale="Reds", name=name, showscale=False), row=1, col=c)  # fmt: skip
    if "breakdown" in t:
        b = t["breakdown"]
        for cat in (*CATEGORIES, "idle"):
            fig.add_trace(go.Bar(x=[str(x) for x in b["rank"]], y=b[f"{cat}_pct"], name=cat), row=2, col=1)
        fig.update_layout(barmode="stack")
    if "comm_matrix" in t and len(t["comm_matrix"]):
        m = t["comm_matrix"].groupby(["src", "dst"])["bytes"].sum().unstack(fill_value=0)
        fig.add_trace(go.Heatmap(z=m.values, x=[str(x) for x in m.columns], y=[str(y) for y in m.index],
                                 colorscale="Blues", showscale=False), row=2, col=2)  # fmt: skip
    fig.update_layout(title=f"gpuan replay: {r.source}", height=900)
    write_text(path, fig.to_html(include_plotlyjs=True, full_html=True))
