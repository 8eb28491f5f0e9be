"""What ``gpuan tensors`` prints and writes: the console summary, the tables (CSV or Parquet) and one
self-contained HTML report (plotly.js inlined once) with the hot/cold, token x layer, file-offset timeline,
3-D, thread, expert, weights-vs-intermediates and buffer views."""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpuan.outputs.files import size_text, write_frames, write_text
from gpuan.tensors import Analysis
from gpuan.tensors.tables import file_share_for


def never_touched(a: Analysis) -> tuple[int, int]:
    """Return (bytes of the data section in pages no access touched, bytes of the data section)."""
    s = a.scanned
    page = s.options.page_bytes
    first = s.model.data_start // page
    hits = s.page_hits[first:]
    starts = np.maximum(np.arange(first, first + len(hits)) * page, s.model.data_start)
    ends = np.minimum(starts - starts % page + page, s.model.file_bytes)
    return int(np.sum((ends - starts)[hits == 0])), s.model.data_bytes


def summary(a: Analysis, top: int = 10) -> str:
    """Return the console summary: what was read, weights against intermediates, bytes per token, the share
    of the file never touched, the hot/cold curve, the hottest tensors, components, experts and checks."""
    s, t = a.scanned, a.tables
    log, model = s.log, s.model
    tokens = t["tokens"]
    w_acc = int(t["tensors"]["accesses"].sum())
    w_bytes = int(t["tensors"]["bytes_accessed"].sum())
    i_acc, i_bytes = int(t["intermediates"]["accesses"].sum()), int(t["intermediates"]["bytes_accessed"].sum())
    lines = [
        f"{log.path}  ({log.format}: {log.entries:,} entries of {log.capacity:,}, {s.accesses:,} accesses, "
        f"{s.engine.upper()})",
        f"model {model.path}  ({model.architecture or '?'}, {len(model.tensors)} tensors, "
        f"{size_text(model.file_bytes)}, alignment {model.alignment})",
        f"span {(s.t1 - s.t0) / 1e6:,.3f} ms   tokens {len(tokens):,}   threads {len(t['threads'])}",
        f"weights        {w_acc:>12,} accesses  {size_text(w_bytes):>12} read  "
        f"({w_bytes / max(w_bytes + i_bytes, 1):.0%} of bytes)",
        f"intermediates  {i_acc:>12,} accesses  {size_text(i_bytes):>12} read",
    ]
    if len(tokens):
        lines.append(
            f"per token: {size_text(tokens['bytes_accessed'].mean())} read "
            f"({size_text(tokens['weight_bytes'].mean())} weights), "
            f"touching {size_text(tokens['distinct_weight_bytes'].median())} of tensors and expert slices (median)"
        )
    cold, data = never_touched(a)
    lines.append(
        f"never touched: {cold / max(data, 1):.1%} of the data section ({size_text(cold)} of {size_text(data)}, "
        f"{s.options.page_bytes // 1024} KiB pages)"
    )
    curve = t["hot_curve"]
    if len(curve) and curve["accesses"].sum():
        pts = ", ".join(f"{p:.0%} -> {file_share_for(curve, p):.1%}" for p in (0.5, 0.9, 0.99))
        lines.append(f"hot/cold: share of accesses -> share of the file: {pts}")
    if top > 0:  # --top 0 asks for no list, not for an empty table
        lines.append("hottest tensors")
        lines.append(f"  {'accesses':>10} {'share':>6} {'read':>10} {'size':>10}  tensor")
        for r in t["tensors"].head(top).itertuples():
            lines.append(
                f"  {r.accesses:>10,} {r.share:>6.1%} {size_text(r.bytes_accessed):>10} "
                f"{size_text(r.n_bytes):>10}  {r.name}"
            )
    lines.append("components")
    lines.append(f"  {'accesses':>10} {'read':>10} {'file':>10} {'untouched':>10}  component")
    for r in t["components"].itertuples():
        kind = "" if r.weight else "  (intermediate)"
        lines.append(
            f"  {r.accesses:>10,} {size_text(r.bytes_accessed):>10} {size_text(r.file_bytes):>10} "
            f"{size_text(r.untouched_bytes):>10}  {r.component}{kind}"
        )
    e = t["experts"]
    if len(e):
        reuse = t["expert_reuse"]
        hot = e.sort_values("accesses", ascending=False).iloc[0]
        lines.append(
            f"experts: {e['expert'].nunique()} per layer in {e['layer'].nunique()} layers; hottest "
            f"layer {int(hot['layer'])} expert {int(hot['expert'])} ({hot['share']:.0%} of its layer); "
            f"reuse between consecutive tokens {reuse['reuse'].mean():.0%}"
        )
    lines.append("checks")
    for c in a.checks:
        lines.append(f"  {'ok  ' if c.ok else 'WARN'} {c.name}: {c.detail}")
    return "\n".join(lines)


def write_tables(a: Analysis, out: str, fmt: str = "csv") -> list:
    """Write every table to OUT/<name>.<fmt> plus checks.<fmt>; return the paths."""
    tables = dict(a.tables)
    tables["checks"] = pd.DataFrame([(c.name, c.ok, c.detail) for c in a.checks], columns=["check", "ok", "detail"])
    return write_frames(tables, out, fmt)


def figures(a: Analysis, max_points_3d: int | None = None) -> list:
    """Return the report's plotly figures (2-D views in WebGL or pre-binned; the 3-D view sampled)."""
    import plotly.graph_objects as go

    s, t = a.scanned, a.tables
    figs = []
    tensors = t["tensors"].head(40)
    f = go.Figure(
        go.Bar(
            x=tensors["name"],
            y=tensors["accesses"],
            marker_color="firebrick",
            customdata=tensors["bytes_accessed"],
            hovertemplate="%{x}<br>%{y:,} accesses<br>%{customdata:,} bytes",
        )
    )
    f.update_layout(title="hottest tensors (accesses)", xaxis_tickangle=-45)
    figs.append(f)
    c = t["hot_curve"]
    f = go.Figure(go.Scatter(x=c["file_share"] * 100, y=c["access_share"] * 100, mode="lines", text=c["unit"]))
    f.update_layout(
        title="hot/cold: % of accesses against % of the file, hottest first",
        xaxis_title="% of the model's data section",
        yaxis_title="% of accesses",
    )
    figs.append(f)
    tl = s.token_layer
    if tl.size:
        step = max(1, -(-tl.shape[0] // 1000))
        binned = np.add.reduceat(tl, np.arange(0, tl.shape[0], step), axis=0) if step > 1 else tl
        f = go.Figure(
            go.Heatmap(
                z=binned.T.astype(np.float32),
                x=np.arange(0, tl.shape[0], step),
                y=np.arange(tl.shape[1]) - 1,
                colorscale="Viridis",
                colorbar_title="bytes",
            )
        )
        f.update_layout(
            title=f"bytes read per token and layer (layer -1: none; {step} token(s) per column)",
            xaxis_title="token",
            yaxis_title="layer",
        )
        figs.append(f)
    span_ms = (s.t1 - s.t0 + 1) / 1e6
    TB, OB = s.time_offset.shape
    time_axis = np.arange(TB) * span_ms / TB
    f = go.Figure(
        go.Heatmap(
            z=np.log1p(s.time_offset.T.astype(np.float32)),
            x=time_axis,
            y=np.arange(OB) * s.model.file_bytes / OB / 1e6,
            colorscale="Hot",
            reversescale=True,
            colorbar_title="log(1+accesses)",
        )
    )
    f.update_layout(title="file-offset timeline (pre-binned)", xaxis_title="ms", yaxis_title="file offset (MB)")
    figs.append(f)
    sm = s.sample
    if sm and len(sm["ts"]):
        infile = sm["offset"] >= 0
        x = ((sm["ts"][infile] - s.t0) / 1e6).astype(np.float32)
        y = (sm["offset"][infile] / 1e6).astype(np.float32)
        f = go.Figure(
            go.Scattergl(
                x=x,
                y=y,
                mode="markers",
                marker=dict(size=3, color=sm["layer"][infile], colorscale="Turbo", colorbar_title="layer"),
                name="accesses",
            )
        )
        f.update_layout(
            title=f"file-offset timeline, {int(infile.sum()):,} sampled accesses coloured by layer (WebGL)",
            xaxis_title="ms",
            yaxis_title="file offset (MB)",
        )
        figs.append(f)
        n3 = int(infile.sum())
        limit = min(max_points_3d or s.options.max_points, 500_000)
        pick = np.linspace(0, n3 - 1, min(n3, limit)).astype(np.int64) if n3 else np.zeros(0, np.int64)
        f = go.Figure(
            go.Scatter3d(
                x=x[pick],
                y=sm["layer"][infile][pick].astype(np.float32),
                z=y[pick],
                mode="markers",
                marker=dict(size=1.5, color=sm["layer"][infile][pick], colorscale="Turbo"),
            )
        )
        f.update_layout(
            title=f"time x layer x file offset ({len(pick):,} sampled accesses)",
            scene=dict(xaxis_title="ms", yaxis_title="layer", zaxis_title="offset (MB)"),
        )
        figs.append(f)
    f = go.Figure(
        go.Heatmap(
            z=s.thread_time.astype(np.float64),
            x=time_axis,
            y=np.arange(s.thread_time.shape[0]),
            colorscale="Blues",
            colorbar_title="accesses",
        )
    )
    f.update_layout(title="thread utilisation over time (accesses per bin)", xaxis_title="ms", yaxis_title="thread")
    figs.append(f)
    e = t["experts"]
    if len(e):
        grid = e.pivot_table(index="layer", columns="expert", values="accesses", fill_value=0)
        f = go.Figure(
            go.Heatmap(z=grid.values, x=grid.columns, y=grid.index, colorscale="Reds", colorbar_title="accesses")
        )
        f.update_layout(title="MoE expert activation (layer x expert)", xaxis_title="expert", yaxis_title="layer")
        figs.append(f)
        r = t["expert_reuse"].groupby("layer")["reuse"].mean()
        f = go.Figure(go.Bar(x=r.index, y=r.values * 100))
        f.update_layout(
            title="expert reuse between consecutive tokens (% of a token's experts the previous token used)",
            xaxis_title="layer",
            yaxis_title="%",
        )
        figs.append(f)
    f = go.Figure(
        [
            go.Scatter(x=time_axis, y=s.time_kind[:, 0], name="weights", stackgroup="kind"),
            go.Scatter(x=time_axis, y=s.time_kind[:, 1], name="intermediates", stackgroup="kind"),
        ]
    )
    f.update_layout(
        title="bytes read over time: parameters against intermediates", xaxis_title="ms", yaxis_title="bytes"
    )
    figs.append(f)
    if "buffer_memory" in t and len(t["buffer_memory"]):
        m = t["buffer_memory"]
        f = go.Figure(
            [
                go.Scatter(x=g["timestamp_ms"], y=g["bytes_in_use"], name=str(b), line_shape="hv")
                for b, g in m.groupby("backend")
            ]
        )
        f.update_layout(title="buffer memory in use per backend", xaxis_title="ms", yaxis_title="bytes")
        figs.append(f)
    return figs


def write_html(a: Analysis, path: str, max_points_3d: int | None = None) -> None:
    """Write the HTML report to `path`: one file, plotly.js inlined once, no network needed."""
    figs = figures(a, max_points_3d)
    s = a.scanned
    checks = "".join(f"<li>{'ok' if c.ok else '<b>warning</b>'} {c.name}: {c.detail}</li>" for c in a.checks)
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>gpuan tensors</title></head><body "
        "style='font-family:sans-serif'>",
        f"<h2>gpuan tensors: {s.log.path}</h2><p>model {s.model.path}; {s.log.format}, {s.log.entries:,} entries, "
        f"{s.accesses:,} accesses</p><ul>{checks}</ul>",
    ]
    for i, f in enumerate(figs):
        f.update_layout(template="plotly_white", height=520)
        parts.append(f.to_html(full_html=False, include_plotlyjs=i == 0))
    parts.append("</body></html>")
    write_text(path, "\n".join(parts))
