"""What ``gpuan streams`` shows and writes of a :func:`gpuan.streams.analyse` Result: the console report,
the JSON report, and the predicted timeline as a Chrome-trace JSON file (which Perfetto and
chrome://tracing open)."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from gpuan.outputs.files import write_text
from gpuan.outputs.numbers import duration
from gpuan.result import Result

#: a time in the report: milliseconds, or microseconds below 0.1 ms, never grouped
_time = partial(duration, unit="ms", places=3, group=False, below=(1e5, "us", 1))


def text(result: Result, timeline: str | None = None) -> str:
    """Return the console report: totals and speed-up, each stream's span, the range left by kernels
    without launch sizes, the measured run where there is one, the timeline file `timeline` (where
    :func:`write_timeline` wrote it), and the parameters."""
    summary = result.summary
    n, operations = summary["streams"], summary["single_stream_operations"]
    lines = [
        f"{summary['source']}: {n} stream{'s' * (n > 1)} on {summary['gpu']}, launch order {summary['launch_order']}",
        f"  one stream, measured    {_time(summary['single_stream_ns']):>12}  ({operations} operations)",
        f"  {n} x that, serial       {_time(summary['serial_ns']):>12}",
        f"  {n} streams, predicted   {_time(summary['predicted_ns']):>12}  speed-up {summary['speedup']:.2f}x",
    ]
    for row in result["streams"].to_pylist():
        lines.append(f"    stream {row['stream']}: {_time(row['start_ns'])} to {_time(row['end_ns'])}")
    if summary["undimensioned"]["kernels"]:
        unknown = summary["parameters"]["undimensioned"]
        totals = summary["undimensioned"]["predicted_ns_if"]
        lines += [
            f"  {unknown['kernels']:,} of {unknown['of']:,} kernels have no grid/block sizes; "
            f"each is taken to be: {unknown['meaning']}",
            "    predicted with --undimensioned "
            + ", ".join(f"{a}: {_time(v)}" for a, v in totals.items())
            + f" (range {_time(min(totals.values()))} to {_time(max(totals.values()))})",
        ]
    if "measured" in summary:
        measured = summary["measured"]
        lines.append(
            f"  measured ({measured['source']}) {_time(measured['measured_ns'])}: error {measured['error'] * 100:+.2f}%"
        )
        for row in result["measured_streams"].to_pylist():
            lines.append(f"    measured stream {row['stream']}: {_time(row['start_ns'])} to {_time(row['end_ns'])}")
    if timeline:
        lines.append(f"  predicted timeline: {timeline} (open in https://ui.perfetto.dev)")
    return "".join(f"{line}\n" for line in lines + _parameters(summary["parameters"]))


def _parameters(par: dict[str, Any]) -> list[str]:
    """Return the lines of the text report that list the simulation's parameters (the first 5 kernels)."""
    per_sm = par["per_sm"]
    turns = (
        f"time-sliced, first turn {_time(par['copy_first_turn_ns'])}, then {_time(par['copy_turn_ns'])}"
        if par["copy_turn_ns"] else "a stream keeps its engine while its copies last"
    )  # fmt: skip
    lines = [
        "parameters:",
        f"  {par['sms']} SMs; per SM {per_sm['threads']} threads, {per_sm['registers']} registers, "
        f"{per_sm['shared_memory'] // 1024} KiB shared memory, {per_sm['blocks']} blocks",
        f"  copy engines per direction: {par['copy_engines_per_direction']['H2D']} ({turns}); link {par['link']}",
        f"  host overhead per call {_time(par['api_ns'])}",
        "  overheads kept: " + ", ".join(f"{k} {_time(v)}" for k, v in par["overheads_ns"].items()),
        "  copy bandwidth: " + ", ".join(f"{k} {v / 1e9:.2f} GB/s" for k, v in par["copy_bandwidth_Bps"].items()),
    ]
    for kernel in par["kernels"][:5]:
        lines.append(
            f"  kernel {kernel['name'][:60]}: {kernel['blocks']} blocks of {kernel['threads_per_block']}, "
            f"{kernel['blocks_per_sm']} per SM, {_time(kernel['block_ns'])} per block"
            + (" (no launch sizes: assumed)" if kernel["assumed"] else "")
        )
    return lines


def document(result: Result) -> dict[str, Any]:
    """Return the JSON report: the summary's totals, each stream's span, the undimensioned kernels, every
    predicted operation (stream, name, start_ns, end_ns), the parameters and the measured run."""
    summary = result.summary
    operations = result["operations"].select(["stream", "name", "start_ns", "end_ns"]).to_pylist()
    out = {
        "trace": summary["source"],
        "streams": summary["streams"],
        "single_stream_ns": summary["single_stream_ns"],
        "serial_ns": summary["serial_ns"],
        "predicted_ns": summary["predicted_ns"],
        "speedup": summary["speedup"],
        "stream_spans_ns": [[row["start_ns"], row["end_ns"]] for row in result["streams"].to_pylist()],
        "undimensioned": summary["undimensioned"],
        "operations": operations,
        "parameters": summary["parameters"],
    }
    if "measured" in summary:
        measured = summary["measured"]
        out["measured"] = {
            "trace": measured["source"],
            "measured_ns": measured["measured_ns"],
            "error": measured["error"],
        }
    return out


def json_text(result: Result) -> str:
    """Return the JSON report: the :func:`document`, indented by 1, with a closing newline."""
    return json.dumps(document(result), indent=1, default=float) + "\n"


def chrome_trace(result: Result) -> dict[str, Any]:
    """Return the predicted timeline as a Chrome-trace document: one complete event (``ph: X``) per
    operation, one thread per predicted stream, times in microseconds, the parameters under ``otherData``."""
    summary = result.summary
    pid = f"gpuan prediction: {summary['streams']} streams on {summary['gpu']}"
    events: list[dict] = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": pid}}]
    for n in range(summary["streams"]):
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": n, "args": {"name": f"stream {n}"}})
    for op in result["operations"].to_pylist():
        args: dict = {"issued_us": op["issued_ns"] / 1e3, "single_stream_dur_us": op["single_stream_dur_ns"] / 1e3}
        if op["kind"] == "kernel":
            args |= {"grid": op["grid"], "block": op["block"], "registers": op["registers"]}
        elif op["bytes"]:
            args |= {"bytes": op["bytes"]}
        events.append({
            "ph": "X", "name": op["name"], "cat": op["kind"], "pid": pid, "tid": op["stream"],
            "ts": op["start_ns"] / 1e3, "dur": (op["end_ns"] - op["start_ns"]) / 1e3, "args": args,
        })  # fmt: skip
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {
            "source": summary["source"],
            "predicted_total_us": summary["predicted_ns"] / 1e3,
            "parameters": summary["parameters"],
        },
    }


def write_timeline(result: Result, path: str) -> None:
    """Write the predicted timeline (:func:`chrome_trace`) to `path` as compact JSON, atomically."""
    write_text(path, json.dumps(chrome_trace(result), indent=None, separators=(",", ":"), default=float))
