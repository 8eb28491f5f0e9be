"""What ``gpuan tensors`` prints and writes from a tensor-access :class:`~gpuan.result.Result`: the console
text, the JSON summary, the tables (CSV or Parquet, with ``checks``) and one self-contained HTML report
(plotly.js inlined once) with the hot/cold, token x layer, file-offset timeline, 3-D, thread, expert,
weights-vs-intermediates and buffer views."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd

from gpuan.options import TENSORS_MAX_POINTS
from gpuan.outputs.files import write_frames, write_text
from gpuan.outputs.numbers import duration, size_text
from gpuan.result import Result
from gpuan.tensors import REPORT_TABLES
from gpuan.tensors.analysis import HOT_ACCESS_SHARES

# ---------------------------------------------------------------------------------------------------------
# the checks in words


def _timestamps(check: dict) -> str:
    parts = []
    if check["backward"]:
        parts.append(f"{check['backward']:,} step(s) back in time")
    if check["gaps"]:
        parts.append(
            f"{check['gaps']:,} gap(s) over {duration(check['gap_ns'])}, longest "
            f"{duration(check['longest_gap_ns'])} before entry {check['longest_gap_entry']:,} "
            f"(token {check['longest_gap_token']})"
        )
    return "; ".join(parts) or "in order, no gap over " + duration(check["gap_ns"])


def _offsets(check: dict) -> str:
    if check["ok"]:
        return "every file offset lies inside a tensor"
    examples = ", ".join(f"0x{x:x}" for x in check["examples"])
    return (
        f"{check['accesses']:,} access(es), {check['bytes']:,} bytes, at file offsets inside no tensor "
        f"(e.g. {examples})"
    )


def _layout(check: dict) -> str:
    return "; ".join(check["problems"]) or (
        f"{check['tensors']} tensors, {check['tensor_bytes']:,} bytes in a {check['data_bytes']:,}-byte data section "
        f"({check['padding']:,} bytes of alignment padding at {check['alignment']})"
    )


def _capacity(check: dict) -> str:
    if check["overflow"]:
        return f"the writer dropped {check['overflow']:,} entries after the log filled ({check['capacity']:,} entries)"
    if check["entries"] == check["capacity"]:
        return f"the log is full ({check['capacity']:,} entries): later accesses may be missing"
    return f"{check['entries']:,} of {check['capacity']:,} entries used"


def _name_table(check: dict) -> str:
    if not check["weights"]:
        return "no weight of the name table is in the model file"
    parts = []
    if check["offsets_differ"]:
        how = " (relative to the data section)" if check["relative"] else ""
        parts.append(f"{check['offsets_differ']} offset(s) differ from the GGUF file's{how}")
    if check["sizes_differ"]:
        parts.append(f"{check['sizes_differ']} size(s) differ, e.g. {check['size_example']}")
    if parts:
        return "; ".join(parts) + "; the GGUF file's values are used"
    return f"{check['weights']} weights agree with the GGUF file"


_DETAILS = {"timestamps": _timestamps, "offsets": _offsets, "layout": _layout, "capacity": _capacity}
_DETAILS["name table"] = _name_table


def check_detail(check: dict) -> str:
    """Return what a check of the Result's summary found, as the sentence the report prints."""
    return _DETAILS[check["check"]](check)


def checks_frame(result: Result) -> pd.DataFrame:
    """Return the checks as a table: check, ok, detail."""
    rows = [(check["check"], check["ok"], check_detail(check)) for check in result.summary["checks"]]
    return pd.DataFrame(rows, columns=["check", "ok", "detail"])


# ---------------------------------------------------------------------------------------------------------
# console text and JSON


def _share(value: float | None, places: int = 1) -> str:
    """`value` as a percentage; None (a share of nothing) as ``nan%``, as pandas' mean of nothing reads."""
    return f"{float('nan') if value is None else value:.{places}%}"


def _header(result: Result) -> list[str]:
    """The lines on the log, the model, the span and the weights against the intermediates."""
    summary = result.summary
    weight_bytes, inter_bytes = summary["weight_bytes"], summary["intermediate_bytes"]
    return [
        f"{summary['log']}  ({summary['log_format']}: {summary['entries']:,} entries of {summary['capacity']:,}, "
        f"{summary['accesses']:,} accesses, {summary['engine'].upper()})",
        f"model {summary['model']}  ({summary['architecture'] or '?'}, {summary['model_tensors']} tensors, "
        f"{size_text(summary['file_bytes'])}, alignment {summary['alignment']})",
        f"span {duration(summary['span_ns'])}   tokens {summary['tokens']:,}   threads {summary['threads']}",
        f"weights        {summary['weight_accesses']:>12,} accesses  {size_text(weight_bytes):>12} read  "
        f"({weight_bytes / max(weight_bytes + inter_bytes, 1):.0%} of bytes)",
        f"intermediates  {summary['intermediate_accesses']:>12,} accesses  {size_text(inter_bytes):>12} read",
    ]


def _coverage(result: Result) -> list[str]:
    """The lines on bytes per token, the share of the file never touched and the hot/cold curve."""
    summary, tokens = result.summary, result.to_pandas("tokens")
    lines = []
    if len(tokens):
        lines.append(
            f"per token: {size_text(tokens['bytes_accessed'].mean())} read "
            f"({size_text(tokens['weight_bytes'].mean())} weights), "
            f"touching {size_text(tokens['distinct_weight_bytes'].median())} of tensors and expert slices (median)"
        )
    cold, data = summary["never_touched_bytes"], summary["data_bytes"]
    lines.append(
        f"never touched: {cold / max(data, 1):.1%} of the data section ({size_text(cold)} of {size_text(data)}, "
        f"{summary['page_bytes'] // 1024} KiB pages)"
    )
    shares = [summary[f"file_share_at_{round(share * 100)}"] for share in HOT_ACCESS_SHARES]
    if shares[0] is not None:
        points = ", ".join(f"{p:.0%} -> {_share(f)}" for p, f in zip(HOT_ACCESS_SHARES, shares))
        lines.append(f"hot/cold: share of accesses -> share of the file: {points}")
    return lines


def _listings(result: Result, top: int) -> list[str]:
    """The hottest tensors, the components and the experts."""
    lines = []
    if top > 0:  # --top 0 asks for no list, not for an empty table
        lines.append("hottest tensors")
        lines.append(f"  {'accesses':>10} {'share':>6} {'read':>10} {'size':>10}  tensor")
        for row in result.to_pandas("tensors").head(top).itertuples():
            lines.append(
                f"  {row.accesses:>10,} {row.share:>6.1%} {size_text(row.bytes_accessed):>10} "
                f"{size_text(row.n_bytes):>10}  {row.name}"
            )
    lines.append("components")
    lines.append(f"  {'accesses':>10} {'read':>10} {'file':>10} {'untouched':>10}  component")
    for row in result.to_pandas("components").itertuples():
        kind = "" if row.weight else "  (intermediate)"
        lines.append(
            f"  {row.accesses:>10,} {size_text(row.bytes_accessed):>10} {size_text(row.file_bytes):>10} "
            f"{size_text(row.untouched_bytes):>10}  {row.component}{kind}"
        )
    summary, hot = result.summary, result.summary["hottest_expert"]
    if summary["expert_layers"]:
        lines.append(
            f"experts: {summary['experts_per_layer']} per layer in {summary['expert_layers']} layers; hottest "
            f"layer {hot['layer']} expert {hot['expert']} ({hot['share']:.0%} of its layer); "
            f"reuse between consecutive tokens {_share(summary['expert_reuse'], 0)}"
        )
    return lines


def text(result: Result, top: int = 10) -> str:
    """Return the console report: what was read, weights against intermediates, bytes per token, the share
    of the file never touched, the hot/cold curve, the `top` hottest tensors, components, experts and checks."""
    lines = _header(result) + _coverage(result) + _listings(result, top) + ["checks"]
    for check in result.summary["checks"]:
        lines.append(f"  {'ok  ' if check['ok'] else 'WARN'} {check['check']}: {check_detail(check)}")
    return "\n".join(lines) + "\n"


def json_text(result: Result, top: int = 10) -> str:
    """Return the JSON summary: the log, its entries and accesses, tokens, the bytes never touched, the
    `top` hottest tensors and the checks (with their details)."""
    summary = result.summary
    hottest = result.to_pandas("tensors").head(top)[["name", "accesses", "bytes_accessed"]]
    out = {
        "log": summary["log"],
        "format": summary["log_format"],
        "entries": summary["entries"],
        "capacity": summary["capacity"],
        "accesses": summary["accesses"],
        "tokens": summary["tokens"],
        "never_touched_bytes": summary["never_touched_bytes"],
        "data_bytes": summary["data_bytes"],
        "hottest": hottest.to_dict("records"),
        "checks": [
            {"check": check["check"], "ok": check["ok"], "detail": check_detail(check)} for check in summary["checks"]
        ],
    }
    return json.dumps(out, indent=1, default=int) + "\n"


# ---------------------------------------------------------------------------------------------------------
# files


def write_tables(result: Result, out: str | os.PathLike, fmt: str = "csv") -> list[Path]:
    """Write the report's tables (and the buffer tables, when there are) to OUT/<name>.<fmt>, plus
    checks.<fmt>; return the paths."""
    names = [*REPORT_TABLES, *(n for n in ("buffers", "buffer_memory") if n in result.tables)]
    frames = {name: result.to_pandas(name) for name in names}
    frames["checks"] = checks_frame(result)
    return write_frames(frames, out, fmt)


def write_html(result: Result, path: str | os.PathLike) -> None:
    """Write the HTML report to `path`: one file, plotly.js inlined once, no network needed; the 3-D view
    samples at most the analysis' max_points accesses."""
    summary = result.summary
    figs = figures(result)
    checks = "".join(
        f"<li>{'ok' if check['ok'] else '<b>warning</b>'} {check['check']}: {check_detail(check)}</li>"
        for check in summary["checks"]
    )
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>gpuan tensors</title></head><body "
        "style='font-family:sans-serif'>",
        f"<h2>gpuan tensors: {summary['log']}</h2><p>model {summary['model']}; {summary['log_format']}, "
        f"{summary['entries']:,} entries, {summary['accesses']:,} accesses</p><ul>{checks}</ul>",
    ]
    for i, fig in enumerate(figs):
        fig.update_layout(template="plotly_white", height=520)
        parts.append(fig.to_html(full_html=False, include_plotlyjs=i == 0))
    parts.append("</body></html>")
    write_text(path, "\n".join(parts))


# ---------------------------------------------------------------------------------------------------------
# the report's figures


def _dense(table: pd.DataFrame, rows: str, columns: str, value: str, shape: tuple[int, int]) -> np.ndarray:
    """The long-form nonzero cells of `table` as a dense int64 matrix of `shape`."""
    matrix = np.zeros(shape, np.int64)
    matrix[table[rows].to_numpy(), table[columns].to_numpy()] = table[value].to_numpy()
    return matrix


def _over_time(result: Result, heat, y: np.ndarray, title: str, y_title: str):
    """Return a figure of the heatmap `heat` over the time bins (x, in ms) and `y`."""
    heat.update(x=_time_axis(result), y=y)
    return _figure(heat, title=title, xaxis_title="ms", yaxis_title=y_title)


def _time_axis(result: Result) -> np.ndarray:
    """The start of each time bin, in ms from the log's start."""
    summary = result.summary
    span_ms = (summary["span_ns"] + 1) / 1e6
    return np.arange(summary["time_bins"]) * span_ms / summary["time_bins"]


def _figure(data, **layout):
    """Return a plotly figure of `data` (a trace) with `layout` applied."""
    import plotly.graph_objects as go

    figure = go.Figure(data)
    figure.update_layout(**layout)
    return figure


def _hottest_and_curve(result: Result) -> list:
    """The hottest tensors (bars) and the hot/cold curve."""
    import plotly.graph_objects as go

    tensors, curve = result.to_pandas("tensors").head(40), result.to_pandas("hot_curve")
    bars = _figure(
        go.Bar(
            x=tensors["name"],
            y=tensors["accesses"],
            marker_color="firebrick",
            customdata=tensors["bytes_accessed"],
            hovertemplate="%{x}<br>%{y:,} accesses<br>%{customdata:,} bytes",
        ),
        title="hottest tensors (accesses)",
        xaxis_tickangle=-45,
    )
    line = _figure(
        go.Scatter(x=curve["file_share"] * 100, y=curve["access_share"] * 100, mode="lines", text=curve["unit"]),
        title="hot/cold: % of accesses against % of the file, hottest first",
        xaxis_title="% of the model's data section",
        yaxis_title="% of accesses",
    )
    return [bars, line]


def _token_layer(result: Result) -> list:
    """The bytes read per token and layer (tokens binned to at most 1,000 columns); none without tokens."""
    import plotly.graph_objects as go

    shape = tuple(result.summary["token_layer_shape"])
    if not shape[0] * shape[1]:
        return []
    cells = result.to_pandas("token_layer")
    cells["layer"] += 1  # layer -1 (none) is column 0
    grid = _dense(cells, "token", "layer", "bytes_accessed", shape)
    step = max(1, -(-shape[0] // 1000))
    binned = np.add.reduceat(grid, np.arange(0, shape[0], step), axis=0) if step > 1 else grid
    fig = _figure(
        go.Heatmap(
            z=binned.T.astype(np.float32),
            x=np.arange(0, shape[0], step),
            y=np.arange(shape[1]) - 1,
            colorscale="Viridis",
            colorbar_title="bytes",
        ),
        title=f"bytes read per token and layer (layer -1: none; {step} token(s) per column)",
        xaxis_title="token",
        yaxis_title="layer",
    )
    return [fig]


def _offset_timeline(result: Result) -> list:
    """The file-offset timeline, pre-binned as a heatmap."""
    import plotly.graph_objects as go

    summary = result.summary
    bins = (summary["time_bins"], summary["offset_bins"])
    grid = _dense(result.to_pandas("time_offset"), "time_bin", "offset_bin", "accesses", bins)
    offsets_mb = np.arange(bins[1]) * summary["file_bytes"] / bins[1] / 1e6
    heat = go.Heatmap(z=np.log1p(grid.T.astype(np.float32)), colorscale="Hot", reversescale=True,
                      colorbar_title="log(1+accesses)")  # fmt: skip
    return [_over_time(result, heat, offsets_mb, "file-offset timeline (pre-binned)", "file offset (MB)")]


def _sampled(result: Result) -> list:
    """The sampled file accesses: a WebGL scatter over time and offset, and a time x layer x offset 3-D view
    of at most the analysis' max_points of them; none without a sample."""
    import plotly.graph_objects as go

    sample = result.to_pandas("sample")
    if not len(sample):
        return []
    in_file = sample["offset"].to_numpy() >= 0
    x = (sample["ts_ns"].to_numpy()[in_file] / 1e6).astype(np.float32)
    y = (sample["offset"].to_numpy()[in_file] / 1e6).astype(np.float32)
    layer = sample["layer"].to_numpy()[in_file]
    in_file_count = int(in_file.sum())
    scatter = _figure(
        go.Scattergl(
            x=x,
            y=y,
            mode="markers",
            marker=dict(size=3, color=layer, colorscale="Turbo", colorbar_title="layer"),
            name="accesses",
        ),
        title=f"file-offset timeline, {in_file_count:,} sampled accesses coloured by layer (WebGL)",
        xaxis_title="ms",
        yaxis_title="file offset (MB)",
    )
    limit = min(result.summary["max_points"], TENSORS_MAX_POINTS)
    pick = np.linspace(0, in_file_count - 1, min(in_file_count, limit)).astype(np.int64)
    cloud = _figure(
        go.Scatter3d(
            x=x[pick],
            y=layer[pick].astype(np.float32),
            z=y[pick],
            mode="markers",
            marker=dict(size=1.5, color=layer[pick], colorscale="Turbo"),
        ),
        title=f"time x layer x file offset ({len(pick):,} sampled accesses)",
        scene=dict(xaxis_title="ms", yaxis_title="layer", zaxis_title="offset (MB)"),
    )
    return [scatter, cloud]


def _threads(result: Result) -> list:
    """Accesses per thread over time."""
    import plotly.graph_objects as go

    cells = result.to_pandas("thread_time")
    rows = int(cells["thread"].max()) + 1 if len(cells) else 1
    grid = _dense(cells, "thread", "time_bin", "accesses", (rows, result.summary["time_bins"]))
    heat = go.Heatmap(z=grid.astype(np.float64), colorscale="Blues", colorbar_title="accesses")
    return [_over_time(result, heat, np.arange(rows), "thread utilisation over time (accesses per bin)", "thread")]


def _experts(result: Result) -> list:
    """The MoE expert activation heatmap and the expert reuse per layer; none for a dense model."""
    import plotly.graph_objects as go

    experts = result.to_pandas("experts")
    if not len(experts):
        return []
    grid = experts.pivot_table(index="layer", columns="expert", values="accesses", fill_value=0)
    heat = _figure(
        go.Heatmap(z=grid.values, x=grid.columns, y=grid.index, colorscale="Reds", colorbar_title="accesses"),
        title="MoE expert activation (layer x expert)",
        xaxis_title="expert",
        yaxis_title="layer",
    )
    reuse = result.to_pandas("expert_reuse").groupby("layer")["reuse"].mean()
    bars = _figure(
        go.Bar(x=reuse.index, y=reuse.values * 100),
        title="expert reuse between consecutive tokens (% of a token's experts the previous token used)",
        xaxis_title="layer",
        yaxis_title="%",
    )
    return [heat, bars]


def _bytes_over_time(result: Result) -> list:
    """Bytes read over time by weights and by intermediates (stacked)."""
    import plotly.graph_objects as go

    timeline, axis = result.to_pandas("timeline"), _time_axis(result)
    fig = _figure(
        [
            go.Scatter(x=axis, y=timeline["weight_bytes"].to_numpy(), name="weights", stackgroup="kind"),
            go.Scatter(x=axis, y=timeline["intermediate_bytes"].to_numpy(), name="intermediates", stackgroup="kind"),
        ],
        title="bytes read over time: parameters against intermediates",
        xaxis_title="ms",
        yaxis_title="bytes",
    )
    return [fig]


def _buffers(result: Result) -> list:
    """The buffer memory in use per backend; none without buffer events."""
    import plotly.graph_objects as go

    if "buffer_memory" not in result.tables or not result.tables["buffer_memory"].num_rows:
        return []
    memory = result.to_pandas("buffer_memory")
    fig = _figure(
        [
            go.Scatter(x=events["timestamp_ms"], y=events["bytes_in_use"], name=str(backend), line_shape="hv")
            for backend, events in memory.groupby("backend")
        ],
        title="buffer memory in use per backend",
        xaxis_title="ms",
        yaxis_title="bytes",
    )
    return [fig]


def figures(result: Result) -> list:
    """Return the report's plotly figures in order (2-D views in WebGL or pre-binned; the 3-D view sampled
    to the analysis' max_points)."""
    return [
        *_hottest_and_curve(result),
        *_token_layer(result),
        *_offset_timeline(result),
        *_sampled(result),
        *_threads(result),
        *_experts(result),
        *_bytes_over_time(result),
        *_buffers(result),
    ]
