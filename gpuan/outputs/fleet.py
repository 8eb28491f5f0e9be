"""What a fleet Result becomes: the console report (step times per step and per rank, the slowest ranks and
where their extra time went), the JSON document, the tables as CSV or Parquet in an output directory, and a
self-contained HTML view (plotly.js inlined): a ranks x steps heat map of step time, one of the time each
rank took on its own beyond the median rank, and the per-position outliers. Under MPI only process 0 has a
Result, so only it prints and writes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd

from gpuan.outputs.files import write_frames, write_text
from gpuan.outputs.numbers import duration
from gpuan.result import Result

#: the longest op name the console report shows (kernel names run to hundreds of characters)
NAME_WIDTH = 60


def _time(ns: float) -> str:
    """Return a time as the fleet report writes it: ms with one decimal, us below 0.1 ms (none: 0 ms)."""
    return duration(ns, "ms", 1, below=(1e5, "us", 1)) if ns else "0 ms"


def _signed(ns: float) -> str:
    return ("+" if ns >= 0 else "-") + _time(abs(ns))


def _name(name: str) -> str:
    return name if len(name) <= NAME_WIDTH else name[: NAME_WIDTH - 3] + "..."


def _ranks_text(ranks: list[int]) -> str:
    """Return ranks as ranges: ``0-3, 5, 7``."""
    out, run = [], []
    for r in sorted(ranks):
        if run and r == run[-1] + 1:
            run.append(r)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [r]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ", ".join(out)


def text(result: Result) -> str:
    """Return the console report: how steps were found and lined up, the spread of step time per step and
    per rank, then each slow (rank, step) with the positions that account for its excess, its time by
    category against the median rank's, and what replay says of it."""
    s = result.summary
    t = result.to_pandas()
    n_procs = s["processes"]
    lines = [f"{s['source']}: {len(s['ranks'])} ranks by {n_procs} process{'es' * (n_procs > 1)}; "
             f"steps found as cycles of {s['kind']} events"]  # fmt: skip
    lines += _group_lines(t["ranks"])
    if t["steps"].empty:
        return "\n".join([*lines, f"  no rank has {s['kind']} events: no steps to compare"]) + "\n"
    lines += _step_lines(t["distribution"])
    lines += _rank_lines(t["ranks"], s["step_ns"])
    lines += _slow_lines(t["slowest"], t["causes"])
    return "\n".join(lines) + "\n"


def _group_lines(ranks: pd.DataFrame) -> list[str]:
    """Return how each group of ranks found its steps."""
    lines = []
    missing = ranks[ranks["steps"] == 0]
    for _, part in ranks[ranks["steps"] > 0].groupby("group", sort=True):
        who = f"rank{'s' * (len(part) > 1)} {_ranks_text(part['rank'].tolist())}"
        first, last = int(part["first_step"].min()), int(part["last_step"].max())
        if part["periodic"].iloc[0]:
            rotated = part[part["rotation"] > 0]
            note = f" ({len(rotated)} of them lined up by rotating their cycle)" if len(rotated) else ""
            lines.append(f"  {who}: a cycle of {int(part['length'].iloc[0]):,} events, steps {first}-{last}{note}")
        else:
            n = int(part["length"].iloc[0])
            lines.append(f"  {who}: no cycle (nothing repeats), one step of {n:,} event{'s' * (n != 1)}")
    if len(missing):
        lines.append(
            f"  rank{'s' * (len(missing) > 1)} {_ranks_text(missing['rank'].tolist())}: no events of that kind"
        )
    return lines


def _step_lines(distribution: pd.DataFrame) -> list[str]:
    """Return step time across ranks, per step."""
    lines = ["  step time across ranks:  ranks        min     median        max  longest    own time beyond the median"]
    for row in distribution.itertuples():
        beyond = f"rank {row.slowest_rank} {_signed(row.slowest_excess_ns)}" if row.slowest_excess_ns > 0 else "-"
        lines.append(f"    step {row.step:<6} {row.ranks:>10} {_time(row.min_ns):>10} {_time(row.median_ns):>10} "
                     f"{_time(row.max_ns):>10}  rank {row.longest_rank:<4} {beyond}")  # fmt: skip
    return lines


def _rank_lines(ranks: pd.DataFrame, spread: dict) -> list[str]:
    """Return step time per rank, and its spread across ranks."""
    lines = [f"  step time per rank (median step: {_time(spread['min'])} to {_time(spread['max'])} across ranks, "
             f"median {_time(spread['median'])}):"]  # fmt: skip
    lines.append("                  median        max   own (median)   beyond the median rank (summed)")
    for row in ranks[ranks["steps"] > 0].itertuples():
        lines.append(f"    rank {row.rank:<5} {_time(row.median_step_ns):>10} {_time(row.max_step_ns):>10} "
                     f"{_time(row.median_own_ns):>14}   {_signed(row.excess_ns)}")  # fmt: skip
    return lines


def _slow_lines(slowest: pd.DataFrame, causes: pd.DataFrame) -> list[str]:
    """Return each slow (rank, step), its causes, its time by category and what replay says of it."""
    if slowest.empty:
        return ["  no rank took longer on its own than the median rank, beyond the noise of every step"]
    lines = ["  slowest (own time: the step less the waiting that replay explains, against the median rank):"]
    for row in slowest.itertuples():
        lines.append(f"    rank {row.rank}, step {row.step}: {_signed(row.excess_ns)} (own {_time(row.own_ns)}, "
                     f"median rank {_time(row.typical_own_ns)}; step {_time(row.step_ns)}, "
                     f"median {_time(row.median_step_ns)})")  # fmt: skip
        mine = causes[(causes["rank"] == row.rank) & (causes["step"] == row.step)]
        if row.peers < 2:
            lines.append("      no other rank runs its step's ops in that order: compared as a whole, not by position")
        elif mine.empty:
            lines.append("      no one position: the excess is spread thinly over the step")
        for c in mine.itertuples():
            lines.append(f"      {_signed(c.excess_ns):>10}  {_cause(c)}: {_time(c.value_ns)}, "
                         f"median rank {_time(c.median_ns)}")  # fmt: skip
        lines.append(
            f"      compute {_time(row.compute_ns)} (median {_time(row.median_compute_ns)}), communication "
            f"{_time(row.comm_ns)} ({_time(row.median_comm_ns)}), in no op {_time(row.idle_ns)} "
            f"({_time(row.median_idle_ns)}); waiting {_time(row.wait_ns)} ({_time(row.median_wait_ns)})"
        )
        lines.append(f"      replay: {_replay(row)}")
    return lines


def _cause(c) -> str:
    """Return where a cause's time went, in words."""
    if c.phase == "forward" and 0 <= c.backward_at - c.position <= 2:
        phase = f" (just before backward, which begins at position {c.backward_at})"
    else:
        phase = f" ({c.phase})" if c.phase else ""
    if c.where == "op":
        return f"{c.category} in position {c.position} {_name(c.name)}{phase}"
    after = f", after {_name(c.before)}" if c.before else ""
    what = "in no op" if c.category == "idle" else "in no op, waiting on a communication call"
    return f"{what} before position {c.position} {_name(c.name)}{after}{phase}"


def _replay(row) -> str:
    """Return what replay says of a slow step's collectives."""
    if not row.collectives:
        return "no collectives entered in this step"
    if not row.late_at:
        return f"last to arrive at none of the {row.collectives} collectives it entered in this step"
    return (f"last to arrive at {row.late_at} of the {row.collectives} collectives it entered in this step, up to "
            f"{_time(row.max_delay_ns)} after the first; the others waited {_time(row.caused_ns)} there")  # fmt: skip


def document(result: Result) -> dict:
    """Return the JSON document: the summary and each table as a list of records."""
    out = {"summary": dict(result.summary)}
    out.update({name: json.loads(frame.to_json(orient="records")) for name, frame in result.to_pandas().items()})
    return out


def json_text(result: Result) -> str:
    """Return the JSON report (:func:`document`)."""
    return json.dumps(document(result), indent=1) + "\n"


def write_tables(result: Result, out: str | os.PathLike, fmt: str = "csv") -> list[Path]:
    """Write each table to OUT/<name>.<fmt> (csv or parquet; atomically; OUT is created) and return the
    paths written."""
    return write_frames(result.to_pandas(), out, fmt)


def figure(result: Result):
    """Return the plotly figure of the HTML view: step time per rank and step, the own time beyond the median
    rank per rank and step, and per position the largest excess over the median rank (bars coloured by
    what it was: compute, communication or time in no op)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    steps, outliers = result.to_pandas("steps"), result.to_pandas("outliers")
    fig = make_subplots(rows=3, cols=1, vertical_spacing=0.08, subplot_titles=(
        "step time (ms) per rank and step", "own time beyond the median rank (ms) per rank and step",
        "per position: the largest excess over the median rank (ms)"))  # fmt: skip
    if len(steps):
        for row, column, scale in ((1, "step_ns", "Viridis"), (2, "excess_ns", "RdBu_r")):
            grid = steps.pivot_table(index="rank", columns="step", values=column, aggfunc="sum") / 1e6
            extra = {"zmid": 0} if column == "excess_ns" else {}
            fig.add_trace(go.Heatmap(z=grid.values, x=[str(x) for x in grid.columns], y=[str(y) for y in grid.index],
                                     colorscale=scale, showscale=False, **extra,
                                     hovertemplate="rank %{y}, step %{x}: %{z:.2f} ms<extra></extra>"),
                          row=row, col=1)  # fmt: skip
        fig.update_yaxes(title_text="rank", row=1, col=1)
        fig.update_yaxes(title_text="rank", row=2, col=1)
    for category, colour in (("compute", "#d62728"), ("communication", "#1f77b4"), ("idle", "#7f7f7f")):
        part = outliers[outliers["category"] == category]
        if part.empty:
            continue
        labels = [f"group {g} position {p}: {n[:80]}<br>rank {r}, step {s}, {w}"
                  for g, p, n, r, s, w in zip(part["group"], part["position"], part["name"], part["rank"],
                                              part["step"], part["where"])]  # fmt: skip
        fig.add_trace(go.Bar(x=part["position"], y=part["excess_ns"] / 1e6, name=category, marker_color=colour,
                             text=labels, hovertemplate="%{text}<br>%{y:.3f} ms<extra></extra>", textposition="none"),
                      row=3, col=1)  # fmt: skip
    fig.update_xaxes(title_text="position in the step", row=3, col=1)
    fig.update_layout(title=f"gpuan fleet: {result.summary['source']}", height=1200, barmode="overlay")
    return fig


def write_html(result: Result, path: str | os.PathLike) -> None:
    """Write the HTML view (:func:`figure`): one file, no network needed."""
    write_text(path, figure(result).to_html(include_plotlyjs=True, full_html=True))
