"""What a replay's Result becomes: the console summary naming the worst stragglers, the JSON document,
the tables as CSV or Parquet in an output directory, and a self-contained HTML view (plotly.js inlined).
Under MPI only process 0 has a Result, so only it prints and writes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from gpuan.outputs.files import write_frames, write_text
from gpuan.outputs.numbers import duration
from gpuan.replay.breakdown import CATEGORIES
from gpuan.result import Result

#: the per-rank table that JSON gives as a plain list (``clock_offsets_ns``), indexed by rank
_OFFSETS = "clock_offsets"
#: the tables the console summary reads (as DataFrames; of p2p it reads only the row count)
_TEXT_TABLES = ("collectives", "wait_totals", "stragglers", "breakdown", _OFFSETS)


def _time(ns: float) -> str:
    """Return a time as the replay report writes it: ms with one decimal, us below 0.1 ms."""
    return duration(ns, "ms", 1, below=(1e5, "us", 1))


def text(result: Result, top: int = 5) -> str:
    """Return the console summary: the run, wait-state totals, the `top` worst stragglers, the time
    breakdown per rank, the last rank to finish and the clock offsets."""
    tables = {name: result.to_pandas(name) for name in _TEXT_TABLES if name in result.tables}
    summary = result.summary
    n_procs = summary["processes"]
    lines = [f"{summary['source']}: {len(summary['ranks'])} ranks replayed by {n_procs} process{'es' * (n_procs > 1)}"]
    if "collectives" in tables:
        lines += _wait_lines(tables, result["p2p"].num_rows)
    if "stragglers" in tables:
        lines += _straggler_lines(tables["stragglers"], top)
    if "breakdown" in tables:
        lines.append("  time per rank:      span     compute        wait       setup       comm.        idle")
        for row in tables["breakdown"].itertuples():
            lines.append(
                f"    rank {row.rank:<5} {_time(row.span):>11} {row.compute_pct:>10.1f}% {row.wait_pct:>10.1f}% "
                f"{row.setup_pct:>10.1f}% {row.communication_pct:>10.1f}% {row.idle_pct:>10.1f}%"
            )
    last = summary["last_to_finish"]
    if last["rank"] >= 0:
        lines.append(f"  last to finish: rank {last['rank']}, at {_time(last['end_ns'])}")
    offsets = tables[_OFFSETS]["offset_ns"].to_numpy()
    if np.any(offsets):
        worst = int(np.argmax(np.abs(offsets)))
        applied = "applied" if summary["clocks_aligned"] else "not applied; --align-clocks applies them"
        lines.append(
            f"  clock offsets from collective completion: up to {_time(offsets[worst])} (rank {worst}), {applied}"
        )
    return "\n".join(lines) + "\n"


def _wait_lines(tables: dict, n_messages: int) -> list[str]:
    """Return the lines on collectives, the `n_messages` point-to-point messages and the wait-state totals."""
    collectives = tables["collectives"]
    incomplete = int((~collectives["complete"]).sum())
    inconsistent = int((~collectives["consistent"]).sum())
    note = f", {incomplete} with members missing from the run" if incomplete else ""
    note += f", {inconsistent} whose members disagree on operation or size" if inconsistent else ""
    lines = [f"  {len(collectives)} collectives, {n_messages} point-to-point messages{note}", "  wait states:"]
    for total in tables["wait_totals"].itertuples():
        if total.instances:
            lines.append(f"    {total.wait_state:<15} {total.instances:>7} instances  {_time(total.total_ns):>12}")
    return lines


def _straggler_lines(stragglers, top: int) -> list[str]:
    """Return the lines naming the `top` stragglers that caused others to wait."""
    worst = stragglers[stragglers["caused_total"] > 0].head(top)
    lines = ["  worst stragglers (wait they caused others):"] if len(worst) else []
    for row in worst.itertuples():
        what = (
            f"last to {row.late} of {row.collectives} collectives, arrived up to {_time(row.max_delay)} after the first"
            if row.collectives
            else "sent late"
        )
        lines.append(f"    step {row.step:<5} rank {row.rank:<5} {_time(row.caused_total):>12}  {what}")
    return lines


def json_text(result: Result) -> str:
    """Return the JSON document: each table as a list of records, the clock offsets in ns indexed by
    rank (``clock_offsets_ns``), and the last rank to finish (``last_to_finish``: rank, end_ns)."""
    document = {
        name: json.loads(frame.to_json(orient="records"))
        for name, frame in result.to_pandas().items()
        if name != _OFFSETS
    }
    document["clock_offsets_ns"] = result[_OFFSETS]["offset_ns"].to_pylist()
    document["last_to_finish"] = dict(result.summary["last_to_finish"])
    return json.dumps(document, indent=1) + "\n"


def write_tables(result: Result, out: str | os.PathLike, fmt: str = "csv") -> list[Path]:
    """Write each table to OUT/<name>.<fmt> (csv or parquet; atomically; OUT is created) and return the
    paths written."""
    return write_frames(result.to_pandas(), out, fmt)


def write_html(result: Result, path: str | os.PathLike) -> None:
    """Write the HTML view: caused and suffered wait per rank and step, the time breakdown per rank, and
    the communication matrix; one file, no network needed."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    tables = result.to_pandas()
    fig = make_subplots(
        rows=2, cols=2, subplot_titles=("wait caused (ms) per step and rank", "own wait (ms) per step and rank",
                                        "time per rank (%)", "bytes sent (src → dst)"),
    )  # fmt: skip
    if "stragglers" in tables and len(tables["stragglers"]):
        stragglers = tables["stragglers"]
        for column, name, col in (("caused_total", "caused", 1), ("own_wait", "own", 2)):
            grid = stragglers.pivot_table(index="rank", columns="step", values=column, aggfunc="sum", fill_value=0)
            grid = grid / 1e6
            fig.add_trace(go.Heatmap(z=grid.values, x=[str(x) for x in grid.columns], y=[str(y) for y in grid.index],
                                     colorscale="Reds", name=name, showscale=False), row=1, col=col)  # fmt: skip
    if "breakdown" in tables:
        per_rank = tables["breakdown"]
        for category in (*CATEGORIES, "idle"):
            fig.add_trace(
                go.Bar(x=[str(x) for x in per_rank["rank"]], y=per_rank[f"{category}_pct"], name=category), row=2, col=1
            )
        fig.update_layout(barmode="stack")
    if "comm_matrix" in tables and len(tables["comm_matrix"]):
        matrix = tables["comm_matrix"].groupby(["src", "dst"])["bytes"].sum().unstack(fill_value=0)
        fig.add_trace(go.Heatmap(z=matrix.values, x=[str(x) for x in matrix.columns], y=[str(y) for y in matrix.index],
                                 colorscale="Blues", showscale=False), row=2, col=2)  # fmt: skip
    fig.update_layout(title=f"gpuan replay: {result.summary['source']}", height=900)
    write_text(path, fig.to_html(include_plotlyjs=True, full_html=True))
