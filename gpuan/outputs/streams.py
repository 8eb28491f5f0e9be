"""What ``gpuan streams`` shows of a :func:`gpuan.streams.analyse` Result: the text report, the JSON
report, and the predicted timeline as Chrome-trace JSON (which Perfetto and chrome://tracing open)."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from gpuan.outputs.files import write_text
from gpuan.outputs.numbers import duration
from gpuan.result import Result

#: a time in the report: milliseconds, or microseconds below 0.1 ms, never grouped
_time = partial(duration, unit="ms", places=3, group=False, below=(1e5, "us", 1))


def emit(result: Result, fmt: str = "text", timeline: str | None = None) -> None:
    """Write the predicted timeline to `timeline` as Chrome-trace JSON if given, then print the report on
    stdout as text (`fmt` "text", naming that file) or as the JSON :func:`document`."""
    if timeline:
        write_text(timeline, chrome_json(result))
    if fmt == "json":
        print(json.dumps(document(result), indent=1, default=float))
    else:
        print(text(result, timeline))


def text(result: Result, timeline: str | None = None) -> str:
    """Return the text report: totals and speed-up, each stream's span, the range left by kernels without
    launch sizes, the measured run where there is one, the timeline file `timeline`, and the parameters."""
    s = result.summary
    n = s["streams"]
    lines = [
        f"{s['source']}: {n} stream{'s' * (n > 1)} on {s['gpu']}, launch order {s['launch_order']}",
        f"  one stream, measured    {_time(s['single_stream_ns']):>12}  ({s['single_stream_operations']} operations)",
        f"  {n} x that, serial       {_time(s['serial_ns']):>12}",
        f"  {n} streams, predicted   {_time(s['predicted_ns']):>12}  speed-up {s['speedup']:.2f}x",
    ]
    for row in result["streams"].to_pylist():
        lines.append(f"    stream {row['stream']}: {_time(row['start_ns'])} to {_time(row['end_ns'])}")
    if s["undimensioned"]["kernels"]:
        u = s["parameters"]["undimensioned"]
        totals = s["undimensioned"]["predicted_ns_if"]
        lines += [
            f"  {u['kernels']:,} of {u['of']:,} kernels have no grid/block sizes; each is taken to be: {u['meaning']}",
            "    predicted with --undimensioned "
            + ", ".join(f"{a}: {_time(v)}" for a, v in totals.items())
            + f" (range {_time(min(totals.values()))} to {_time(max(totals.values()))})",
        ]
    if "measured" in s:
        m = s["measured"]
        lines.append(f"  measured ({m['source']}) {_time(m['measured_ns'])}: error {m['error'] * 100:+.2f}%")
        for row in result["measured_streams"].to_pylist():
            lines.append(f"    measured stream {row['stream']}: {_time(row['start_ns'])} to {_time(row['end_ns'])}")
    if timeline:
        lines.append(f"  predicted timeline: {timeline} (open in https://ui.perfetto.dev)")
    return "\n".join(lines + _parameters(s["parameters"]))


def _parameters(par: dict[str, Any]) -> list[str]:
    """Return the lines of the text report that list the simulation's parameters (the first 5 kernels)."""
    per = par["per_sm"]
    turns = (
        f"time-sliced, first turn {_time(par['copy_first_turn_ns'])}, then {_time(par['copy_turn_ns'])}"
        if par["copy_turn_ns"] else "a stream keeps its engine while its copies last"
    )  # fmt: skip
    lines = [
        "parameters:",
        f"  {par['sms']} SMs; per SM {per['threads']} threads, {per['registers']} registers, "
        f"{per['shared_memory'] // 1024} KiB shared memory, {per['blocks']} blocks",
        f"  copy engines per direction: {par['copy_engines_per_direction']['H2D']} ({turns}); link {par['link']}",
        f"  host overhead per call {_time(par['api_ns'])}",
        "  overheads kept: " + ", ".join(f"{k} {_time(v)}" for k, v in par["overheads_ns"].items()),
        "  copy bandwidth: " + ", ".join(f"{k} {v / 1e9:.2f} GB/s" for k, v in par["copy_bandwidth_Bps"].items()),
    ]
    for k in par["kernels"][:5]:
        lines.append(
            f"  kernel {k['name'][:60]}: {k['blocks']} blocks of {k['threads_per_block']}, "
            f"{k['blocks_per_sm']} per SM, {_time(k['block_ns'])} per block"
            + (" (no launch sizes: assumed)" if k["assumed"] else "")
        )
    return lines


def document(result: Result) -> dict[str, Any]:
    """Return the JSON report: the summary's totals, each stream's span, the undimensioned kernels, every
    predicted operation (stream, name, start_ns, end_ns), the parameters and the measured run."""
    s = result.summary
    operations = result["operations"].select(["stream", "name", "start_ns", "end_ns"]).to_pylist()
    out = {
        "trace": s["source"],
        "streams": s["streams"],
        "single_stream_ns": s["single_stream_ns"],
        "serial_ns": s["serial_ns"],
        "predicted_ns": s["predicted_ns"],
        "speedup": s["speedup"],
        "stream_spans_ns": [[r["start_ns"], r["end_ns"]] for r in result["streams"].to_pylist()],
        "undimensioned": s["undimensioned"],
        "operations": operations,
        "parameters": s["parameters"],
    }
    if "measured" in s:
        m = s["measured"]
        out["measured"] = {"trace": m["source"], "measured_ns": m["measured_ns"], "error": m["error"]}
    return out


def chrome_trace(result: Result) -> dict[str, Any]:
    """Return the predicted timeline as a Chrome-trace document: one complete event (``ph: X``) per
    operation, one thread per predicted stream, times in microseconds, the parameters under ``otherData``."""
    s = result.summary
    pid = f"gpuan prediction: {s['streams']} streams on {s['gpu']}"
    events: list[dict] = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": pid}}]
    for n in range(s["streams"]):
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
            "source": s["source"],
            "predicted_total_us": s["predicted_ns"] / 1e3,
            "parameters": s["parameters"],
        },
    }


def chrome_json(result: Result) -> str:
    """Return :func:`chrome_trace` as compact JSON text."""
    return json.dumps(chrome_trace(result), indent=None, separators=(",", ":"), default=float)
