"""``gpuan streams TRACE --streams N``: the predicted N-stream timeline of a single-stream trace."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from gpuan.cli.arguments import nonempty, positive
from gpuan.streams.simulate import LAUNCH_ORDERS, UNDIMENSIONED


def add_parser(sub) -> None:
    p = sub.add_parser("streams", help="predict the timeline of a single-stream trace's work on N streams")
    p.add_argument("trace", help="single-stream trace (Kineto JSON, Nsight SQLite or nvprof CSV)")
    p.add_argument("--streams", type=positive, required=True, metavar="N", help="number of streams to predict")
    p.add_argument(
        "--launch-order",
        choices=LAUNCH_ORDERS,
        default="breadth",
        help="host issue order: operation k of every stream first (breadth, default) or stream by stream",
    )
    p.add_argument(
        "--device",
        dest="gpu_name",
        type=nonempty,
        metavar="NAME",
        help="GPU to simulate (default: the one the trace recorded)",
    )
    p.add_argument("--stream", type=int, help="which stream's work to use, if the trace has several")
    p.add_argument(
        "--undimensioned",
        choices=tuple(UNDIMENSIONED),
        default="device",
        help="what a kernel without grid/block sizes is taken to be (both totals are printed either way): "
        + "; ".join(f"{k}: {v}" for k, v in UNDIMENSIONED.items())
        + " (default: device)",
    )
    p.add_argument(
        "-o",
        "--output",
        type=nonempty,
        metavar="PREDICTED.json",
        help="write the predicted timeline as Chrome-trace JSON",
    )
    p.add_argument(
        "--measured", type=nonempty, metavar="TRACE", help="a measured N-stream trace of the same work to compare with"
    )
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(run=run)  # fmt: skip


def run(args) -> int:
    from gpuan.cli.loading import load_trace
    from gpuan.outputs.files import write_text
    from gpuan.streams import check, predict
    from gpuan.streams.chrome import chrome_json
    from gpuan.streams.simulate import is_compiled

    if sys.stderr.isatty() and not is_compiled():  # a note for people, not for scripts
        print("gpuan: compiling the stream simulator (first run only, about 15 seconds)", file=sys.stderr)
    trace = load_trace(args.trace)
    with simulation_progress() as progress:
        prediction = predict(
            trace, args.streams, launch_order=args.launch_order, device=args.gpu_name, stream=args.stream,
            source=args.trace, undimensioned=args.undimensioned, progress=progress,
        )  # fmt: skip
    checked = check(prediction, load_trace(args.measured), args.measured) if args.measured else None
    if args.output:
        write_text(args.output, chrome_json(prediction))
    if args.format == "json":
        print(json.dumps(_json(prediction, checked, args), indent=1, default=float))
    else:
        print(_text(prediction, checked, args))
    return 0


@contextmanager
def simulation_progress() -> Iterator[Callable[[int, int], None] | None]:
    """Yield a progress callback (operations simulated, operations) that shows a bar on stderr once a
    simulation has run a while, or None when stderr is not a terminal."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn, TimeRemainingColumn

    bar = Progress(
        "[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        TimeRemainingColumn(), transient=True, console=Console(stderr=True),
    )  # fmt: skip
    task = None

    def update(done: int, total: int) -> None:
        nonlocal task
        if task is None:  # the bar appears with the first report, after the simulation's first second
            bar.start()
            task = bar.add_task("simulating", total=total)
        bar.update(task, completed=done, total=total)

    try:
        yield update
    finally:
        if task is not None:
            bar.stop()


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms" if ns >= 1e5 else f"{ns / 1e3:.1f} us"


def _text(p, checked, args) -> str:
    n = p.n_streams
    lines = [
        f"{args.trace}: {n} stream{'s' * (n > 1)} on {p.settings.gpu.name}, launch order {p.settings.launch_order}",
        f"  one stream, measured    {_ms(p.workload.span):>12}  ({len(p.workload)} operations)",
        f"  {n} x that, serial       {_ms(p.serial_ns):>12}",
        f"  {n} streams, predicted   {_ms(p.total_ns):>12}  speed-up {p.speedup:.2f}x",
    ]
    for s, (a, b) in enumerate(p.stream_spans()):
        lines.append(f"    stream {s}: {_ms(a)} to {_ms(b)}")
    if p.undimensioned:
        u = p.parameters()["undimensioned"]
        totals = p.totals_if
        lines += [
            f"  {u['kernels']:,} of {u['of']:,} kernels have no grid/block sizes; each is taken to be: {u['meaning']}",
            "    predicted with --undimensioned "
            + ", ".join(f"{a}: {_ms(v)}" for a, v in totals.items())
            + f" (range {_ms(min(totals.values()))} to {_ms(max(totals.values()))})",
        ]
    if checked:
        lines.append(f"  measured ({args.measured}) {_ms(checked.measured_ns)}: error {checked.error * 100:+.2f}%")
        for sid, a, b in checked.measured_streams:
            lines.append(f"    measured stream {sid}: {_ms(a)} to {_ms(b)}")
    if args.output:
        lines.append(f"  predicted timeline: {args.output} (open in https://ui.perfetto.dev)")
    par = p.parameters()
    per = par["per_sm"]
    turns = (
        f"time-sliced, first turn {_ms(par['copy_first_turn_ns'])}, then {_ms(par['copy_turn_ns'])}"
        if par["copy_turn_ns"] else "a stream keeps its engine while its copies last"
    )  # fmt: skip
    lines += [
        "parameters:",
        f"  {par['sms']} SMs; per SM {per['threads']} threads, {per['registers']} registers, "
        f"{per['shared_memory'] // 1024} KiB shared memory, {per['blocks']} blocks",
        f"  copy engines per direction: {par['copy_engines_per_direction']['H2D']} ({turns}); link {par['link']}",
        f"  host overhead per call {_ms(par['api_ns'])}",
        "  overheads kept: " + ", ".join(f"{k} {_ms(v)}" for k, v in par["overheads_ns"].items()),
        "  copy bandwidth: " + ", ".join(f"{k} {v / 1e9:.2f} GB/s" for k, v in par["copy_bandwidth_Bps"].items()),
    ]
    for k in par["kernels"][:5]:
        lines.append(
            f"  kernel {k['name'][:60]}: {k['blocks']} blocks of {k['threads_per_block']}, "
            f"{k['blocks_per_sm']} per SM, {_ms(k['block_ns'])} per block"
            + " (no launch sizes: assumed)"
            * k["assumed"]
        )
    return "\n".join(lines)


def _json(p, checked, args) -> dict:
    tl = p.timeline
    out = {
        "trace": args.trace,
        "streams": p.n_streams,
        "single_stream_ns": p.workload.span,
        "serial_ns": p.serial_ns,
        "predicted_ns": p.total_ns,
        "speedup": p.speedup,
        "stream_spans_ns": p.stream_spans(),
        "undimensioned": {
            "kernels": p.undimensioned, "assumption": p.settings.undimensioned, "predicted_ns_if": p.totals_if,
            "range_ns": [min(p.totals_if.values()), max(p.totals_if.values())] if p.totals_if else None,
        },
        "operations": [
            {"stream": int(tl.stream[i]), "name": p.workload.names[int(tl.index[i])],
             "start_ns": float(tl.start[i]), "end_ns": float(tl.end[i])}
            for i in range(tl.start.size)
        ],
        "parameters": p.parameters(),
    }  # fmt: skip
    if checked:
        out["measured"] = {"trace": args.measured, "measured_ns": checked.measured_ns, "error": checked.error}
    return out
