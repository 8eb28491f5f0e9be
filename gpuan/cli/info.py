"""``gpuan info TRACE``: what is in a trace, as text or JSON."""

from __future__ import annotations

import json

from gpuan.cli.arguments import count
from gpuan.engine import current
from gpuan.summary.info import summarize


def add_parser(sub) -> None:
    p = sub.add_parser("info", help="summarise a trace: events per kind, devices, streams, busy time, top kernels")
    p.add_argument(
        "trace",
        help="trace file (Kineto .json/.json.gz, Nsight .sqlite, nvprof .csv, .parquet) or a directory of rank traces",
    )
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--top", type=count, default=10, help="how many kernels to list (default 10)")
    p.set_defaults(run=run)


def run(args) -> int:
    return show(args.trace, fmt=args.format, top=args.top)


def show(path: str, *, fmt: str = "text", top: int = 10) -> int:
    """Load the trace at `path` and print its summary as text or JSON; returns the exit code."""
    from gpuan.cli.loading import load_trace

    summary = summarize(load_trace(path), top=top, engine=current())
    if fmt == "json":
        print(json.dumps(summary, indent=2))
    else:
        render(summary)
    return 0


def _ms(ns: int) -> str:
    return f"{ns / 1e6:,.3f}"


def _device(d: dict) -> str:
    """A device as the text summary names it: index, name, and the ROCm agent id its events carry."""
    text = f"{d['id']} {d['name'] or '(no name in the trace)'}"
    return text + (f" (ROCm agent {d['rocm_agent']}: {d['mapped_by']})" if "rocm_agent" in d else "")


def render(s: dict) -> None:
    """Print the summary as console tables."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    con = Console()
    ranks = ", ".join(str(r) for r in s["ranks"]) or "-"
    con.print(f"[bold]{s['source']}[/bold]  ({s['format']})")
    con.print(f"events {s['events']:,}   flows {s['flows']:,}   ranks {ranks}   span {_ms(s['span_ns'])} ms")
    kinds = Table(title="events per kind", title_justify="left")
    kinds.add_column("kind")
    kinds.add_column("events", justify="right")
    if s["other_categories"]:
        kinds.add_column("other: what the category holds")
    for k, v in s["per_kind"].items():
        kinds.add_row(k, f"{v:,}")
    for c in s["other_categories"]:
        kinds.add_row(escape(f"  {c['category']}"), f"{c['events']:,}", c["what"] or "not analysed")
    con.print(kinds)
    if s["devices"]:
        con.print(escape("devices: " + ", ".join(_device(d) for d in s["devices"])))
    if s["streams"]:
        t = Table(title="GPU streams", title_justify="left")
        for c in ("rank", "device", "stream", "kernels", "kernel ms", "busy ms", "busy %"):
            t.add_column(c, justify="right")
        for r in s["streams"]:
            busy_pct = 100 * r["busy_ns"] / s["span_ns"] if s["span_ns"] else 0
            t.add_row(
                str(r["rank"] if r["rank"] is not None else "-"), str(r["device"]), str(r["stream"]),
                f"{r['kernels']:,}", _ms(r["kernel_ns"]), _ms(r["busy_ns"]), f"{busy_pct:.1f}",
            )  # fmt: skip
        con.print(t)
    if s["top_kernels"]:
        t = Table(title="top kernels by time", title_justify="left")
        for c in ("total ms", "share", "count", "mean us"):
            t.add_column(c, justify="right", no_wrap=True, min_width=len(c) + 1)
        t.add_column("kernel", overflow="ellipsis", no_wrap=True, max_width=max(24, con.width - 50))
        for k in s["top_kernels"]:
            t.add_row(
                _ms(k["total_ns"]), f"{100 * k['share']:.1f}%", f"{k['count']:,}", f"{k['mean_ns'] / 1e3:,.1f}",
                k["name"],
            )  # fmt: skip
        con.print(t)
