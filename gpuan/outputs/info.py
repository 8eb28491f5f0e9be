"""What ``gpuan info`` shows of a trace's :func:`gpuan.info.analyse` Result: the console report (rich
tables, rendered to a string) and the JSON report (times in ns)."""

from __future__ import annotations

import json
from typing import Any

from gpuan.outputs.numbers import duration
from gpuan.result import Result


def document(result: Result) -> dict[str, Any]:
    """Return the Result as the JSON document ``gpuan info --format json`` prints: the summary's numbers
    with each table as a list of rows (``per_kind`` as a mapping of kind to events; a device's ROCm agent
    only where it has one)."""
    summary = result.summary
    devices = []
    for device in result["devices"].to_pylist():
        mapped = device["rocm_agent"] is not None
        agent = {"rocm_agent": device["rocm_agent"], "mapped_by": device["mapped_by"]} if mapped else {}
        devices.append({"id": device["id"], "name": device["name"], "sms": device["sms"], **agent})
    return {
        "source": summary["source"],
        "format": summary["format"],
        "events": summary["events"],
        "flows": summary["flows"],
        "per_kind": {row["kind"]: row["events"] for row in result["kinds"].to_pylist()},
        "other_categories": result["other_categories"].to_pylist(),
        "ranks": summary["ranks"],
        "devices": devices,
        "span_ns": summary["span_ns"],
        "start_ns": summary["start_ns"],
        "end_ns": summary["end_ns"],
        "streams": result["streams"].to_pylist(),
        "top_kernels": result["top_kernels"].to_pylist(),
    }


def json_text(result: Result) -> str:
    """Return the JSON report: the :func:`document`, indented by 2, with a closing newline."""
    return json.dumps(document(result), indent=2) + "\n"


def _device(device: dict) -> str:
    """A device as the text summary names it: index, name, and the ROCm agent id its events carry."""
    named = f"{device['id']} {device['name'] or '(no name in the trace)'}"
    if device["rocm_agent"] is None:
        return named
    return named + f" (ROCm agent {device['rocm_agent']}: {device['mapped_by']})"


def text(result: Result, width: int | None = None) -> str:
    """Return the console report: the header line and the tables of events per kind, devices, GPU streams
    and the top kernels, laid out `width` columns wide (default: the console's own width, and its colours
    when stdout is a terminal, so that printing the string shows what rich would have printed)."""
    from rich.console import Console
    from rich.markup import escape

    summary = result.summary
    console = Console(width=width)
    ranks = ", ".join(str(rank) for rank in summary["ranks"]) or "-"
    counts = f"events {summary['events']:,}   flows {summary['flows']:,}"
    with console.capture() as report:
        console.print(f"[bold]{summary['source']}[/bold]  ({summary['format']})")
        console.print(f"{counts}   ranks {ranks}   span {duration(summary['span_ns'])}")
        console.print(_kinds_table(result))
        devices = result["devices"].to_pylist()
        if devices:
            console.print(escape("devices: " + ", ".join(_device(device) for device in devices)))
        if result["streams"].num_rows:
            console.print(_streams_table(result))
        if result["top_kernels"].num_rows:
            console.print(_kernels_table(result, console.width))
    return report.get()


def _kinds_table(result: Result):
    """Return the table of events per kind, with the categories of kind "other" below them."""
    from rich.markup import escape
    from rich.table import Table

    others = result["other_categories"].to_pylist()
    table = Table(title="events per kind", title_justify="left")
    table.add_column("kind")
    table.add_column("events", justify="right")
    if others:
        table.add_column("other: what the category holds")
    for row in result["kinds"].to_pylist():
        table.add_row(row["kind"], f"{row['events']:,}")
    for other in others:
        table.add_row(escape(f"  {other['category']}"), f"{other['events']:,}", other["what"] or "not analysed")
    return table


def _streams_table(result: Result):
    """Return the table of GPU streams: kernels, kernel time, busy time and its share of the span."""
    from rich.table import Table

    span = result.summary["span_ns"]
    table = Table(title="GPU streams", title_justify="left")
    for column in ("rank", "device", "stream", "kernels", "kernel ms", "busy ms", "busy %"):
        table.add_column(column, justify="right")
    for row in result["streams"].to_pylist():
        busy_pct = 100 * row["busy_ns"] / span if span else 0
        table.add_row(
            str(row["rank"] if row["rank"] is not None else "-"), str(row["device"]), str(row["stream"]),
            f"{row['kernels']:,}", duration(row["kernel_ns"], label=False), duration(row["busy_ns"], label=False),
            f"{busy_pct:.1f}",
        )  # fmt: skip
    return table


def _kernels_table(result: Result, width: int):
    """Return the table of the top kernels by time, their names cut to the console's `width`."""
    from rich.table import Table

    table = Table(title="top kernels by time", title_justify="left")
    for column in ("total ms", "share", "count", "mean us"):
        table.add_column(column, justify="right", no_wrap=True, min_width=len(column) + 1)
    table.add_column("kernel", overflow="ellipsis", no_wrap=True, max_width=max(24, width - 50))
    for kernel in result["top_kernels"].to_pylist():
        table.add_row(
            duration(kernel["total_ns"], label=False), f"{100 * kernel['share']:.1f}%", f"{kernel['count']:,}",
            duration(kernel["mean_ns"], "us", 1, label=False), kernel["name"],
        )  # fmt: skip
    return table
