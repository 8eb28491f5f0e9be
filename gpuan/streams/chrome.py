"""The predicted timeline as Chrome-trace JSON, which Perfetto and chrome://tracing open."""

from __future__ import annotations

import json

from gpuan.streams.predict import Prediction
from gpuan.streams.workload import KERNEL, KIND_NAMES


def chrome_trace(p: Prediction) -> dict:
    """Return the prediction as a Chrome-trace document: one complete event (``ph: X``) per operation,
    one thread per predicted stream, times in microseconds, the parameters under ``otherData``."""
    w, tl = p.workload, p.timeline
    pid = f"gpuan prediction: {p.n_streams} streams on {p.settings.gpu.name}"
    events: list[dict] = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": pid}}]
    for s in range(p.n_streams):
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": s, "args": {"name": f"stream {s}"}})
    for i in range(tl.start.size):
        k = int(tl.index[i])
        args: dict = {"issued_us": tl.issued[i] / 1e3, "single_stream_dur_us": w.dur[k] / 1e3}
        if w.kind[k] == KERNEL:
            args |= {"grid": int(w.grid[k]), "block": int(w.threads[k]), "registers": int(w.registers[k])}
        elif w.bytes[k]:
            args |= {"bytes": int(w.bytes[k])}
        events.append({
            "ph": "X", "name": w.names[k], "cat": KIND_NAMES[w.kind[k]], "pid": pid, "tid": int(tl.stream[i]),
            "ts": tl.start[i] / 1e3, "dur": (tl.end[i] - tl.start[i]) / 1e3, "args": args,
        })  # fmt: skip
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {"source": p.source, "predicted_total_us": p.total_ns / 1e3, "parameters": p.parameters()},
    }


def chrome_json(p: Prediction) -> str:
    """Return :func:`chrome_trace` as JSON text."""
    return json.dumps(chrome_trace(p), indent=None, separators=(",", ":"), default=float)
