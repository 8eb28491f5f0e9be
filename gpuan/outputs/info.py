"""What ``gpuan info`` shows of a trace's :func:`gpuan.info.analyse` Result: console tables, or one JSON
document (times in ns)."""

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


def emit(result: Result, fmt: str = "text") -> None:
    """Print the Result on stdout: as console tables (`fmt` "text") or as the JSON :func:`document`."""
    if fmt == "json":
        print(json.dumps(document(result), indent=2))
    else:
        print_text(result)


def _device(device: dict) -> str:
    """A device as the text summary names it: index, name, and the ROCm agent id its events carry."""
    text = f"{device['id']} {device['name'] or '(no name in the trace)'}"
    if device["rocm_agent"] is None:
        return text
    return text + f" (ROCm agent {device['rocm_agent']}: {device['mapped_by']})"


def print_text(result: Result) -> None:
    """Print the Result as console tables: the header line, events per kind, devices, GPU streams and the
    top kernels."""
    from rich.console import Console
    from rich.markup import escape

    summary = result.summary
    con = Console()
    ranks = ", ".join(str(rank) for rank in summary["ranks"]) or "-"
    con.print(f"[bold]{summary['source']}[/bold]  ({summary['format']})")
    counts = f"events {summary['events']:,}   flows {summary['flows']:,}"
    con.print(f"{counts}   ranks {ranks}   span {duration(summary['span_ns'])}")
    con.print(_kinds_table(result))
    devices = result["devices"].to_pylist()
    if devices:
        con.print(escape("devices: " + ", ".join(_device(device) for device in devices)))
    if result["streams"].num_rows:
        con.print(_streams_table(result))
    if result["top_kernels"].num_rows:
        con.print(_kernels_table(result, con.width))


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
