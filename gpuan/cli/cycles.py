"""``gpuan cycles TRACE -o BASE``: repeating patterns as uplifter-compatible CSVs, text or JSON summary."""

from __future__ import annotations

import json
import sys

from gpuan.cli.arguments import nonempty
from gpuan.trace.schema import KINDS


def add_parser(sub) -> None:
    p = sub.add_parser("cycles", help="find repeating kernel patterns (iterations, layers, prefill/decode)")
    p.add_argument("trace", help="trace file or directory of rank traces")
    p.add_argument(
        "-o",
        "--output",
        type=nonempty,
        metavar="BASE",
        help="write BASE_cycle_<k>.csv (all) or BASE_prefill/decode.csv (llm)",
    )
    p.add_argument("--mode", choices=("all", "llm"), default="all", help="which patterns to write (default all)")
    p.add_argument(
        "--kind", choices=KINDS, default="kernel", help="events to analyse (default kernel; cpu_op for CPU-only traces)"
    )
    p.add_argument(
        "--ops",
        choices=("top", "leaf", "all"),
        default="top",
        help="CPU operators: top-level (default), leaves, or all",
    )
    p.add_argument(
        "--sequences",
        choices=("stream", "group", "merged"),
        default="group",
        help="GPU events: one sequence per stream, per stream group (compute apart from communication; "
        "default) or per device (all streams merged)",
    )
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(run=run)  # fmt: skip


def run(args) -> int:
    return show(args.trace, args.output, mode=args.mode, kind=args.kind, ops=args.ops,
                split=args.sequences, fmt=args.format)  # fmt: skip


def show(
    path: str,
    output: str | None,
    *,
    mode: str = "all",
    kind: str = "kernel",
    ops: str = "top",
    split: str = "group",
    fmt: str = "text",
) -> int:
    """Detect the cycles of the trace at `path`, write the CSVs under `output`, print the summary;
    returns the exit code."""
    from gpuan.cli.loading import load_trace
    from gpuan.cycles import detect, distinct_patterns
    from gpuan.cycles.csvfile import render
    from gpuan.cycles.patterns import llm_phases
    from gpuan.errors import TraceError
    from gpuan.outputs.files import write_text

    trace = load_trace(path)
    found = detect(trace, kind, split=split, ops=ops)
    if not found:
        raise TraceError(path, f"no {kind} events to look for cycles in")
    patterns = distinct_patterns(found)
    chosen = llm_phases(found) if mode == "llm" else {}
    if mode == "llm":
        files = {f"{output}_{phase}.csv": p for phase, p in chosen.items()} if output else {}
        labels = {id(p): phase for phase, p in chosen.items()}
    else:
        files = {f"{output}_cycle_{k}.csv": p for k, p in enumerate(patterns, 1)} if output else {}
        labels = {id(p): f"cycle {k}" for k, p in enumerate(patterns, 1)}
    # render everything first: a failure then leaves no partial set of files
    texts = {file: render(p) for file, p in files.items()}
    for file, text in texts.items():
        p = files[file]
        detail = f"{labels.get(id(p), '')}: {p.cycle.length:,} events x {p.cycle.repetitions:,}, {p.sequence.label}"
        write_text(file, text, detail=detail)
    if output and not files:
        # not an error (a trace may hold no repetition), but say why no file appeared, beside stdout's report
        what = "prefill or decode phase" if mode == "llm" else "repeating pattern"
        print(f"gpuan: no {what} found in {path}: no files written", file=sys.stderr)
    if fmt == "json":
        print(json.dumps(_json(path, kind, found, patterns, files, chosen), indent=1))
    else:
        _print_text(found, chosen)
    return 0


def _json(path, kind, found, patterns, files, phases) -> dict:
    from gpuan.cycles import Pattern

    written = {id(p): path for path, p in files.items()}
    out = {"trace": path, "kind": kind, "sequences": []}  # the split is in each sequence's group
    for sc in found:
        seq = sc.sequence
        segs = []
        for si, seg in enumerate(sc.segments):
            segs.append({
                "index": si,
                "periodic": seg.periodic,
                "first_event": seg.start,
                "end_event": seg.end,
                "start_ns": int(seq.ts[seg.start]),
                "end_ns": int((seq.ts[seg.start:seg.end] + seq.dur[seg.start:seg.end]).max()),
                "cycle": None if seg.cycle is None else Pattern(seq, si, "cycle", seg.cycle).summary(),
                "sub_cycles": [Pattern(seq, si, "sub-cycle", c).summary() for c in seg.sub_cycles],
            })  # fmt: skip
        out["sequences"].append({
            "label": seq.label, "rank": seq.rank, "device": seq.device, "group": seq.group,
            "streams": list(seq.streams), "events": len(seq), "segments": segs,
        })  # fmt: skip

    def ref(p) -> dict:
        return {"sequence": p.sequence.label, "segment": p.segment, "role": p.role, "length": p.cycle.length,
                "repetitions": p.cycle.repetitions, "file": written.get(id(p))}  # fmt: skip

    out["patterns"] = [{"k": k, **ref(p)} for k, p in enumerate(patterns, 1)]
    if phases:
        out["phases"] = {phase: ref(p) for phase, p in phases.items()}
    out["files"] = list(files)
    return out


def _us(ns: float) -> str:
    return f"{ns / 1e3:,.1f} us"


def _streams_and_order(p) -> str:
    """Where a multi-stream pattern's events run, and how much their order changes between instances."""
    split = ", ".join(f"{s}: {n:,}" for s, n in p.streams().items())
    if p.cycle.ordered:
        return f"streams {split}; same order in every instance"
    moved = p.order_moved() * 100
    return (f"streams {split}; order varies: {moved.mean():.1f}% of events out of order on average "
            f"(up to {moved.max():.1f}%)")  # fmt: skip


def _print_text(found, phases) -> None:
    from gpuan.cycles import Pattern

    for sc in found:
        seq = sc.sequence
        print(f"{seq.label}: {len(seq):,} {seq.kind} events, {len(sc.segments)} segment(s)")
        for si, seg in enumerate(sc.segments):
            span = f"events {seg.start:,}-{seg.end - 1:,}"
            if seg.cycle is not None:
                p = Pattern(seq, si, "cycle", seg.cycle)
                t = p.instance_times()
                print(f"  [{si}] {span}: cycle of {seg.cycle.length:,} x {seg.cycle.repetitions:,}, "
                      f"busy {_us(t.busy_ns.mean())}, wall {_us(t.wall_ns.mean())} per instance")  # fmt: skip
                if seq.multi_stream:
                    print(f"       {_streams_and_order(p)}")
            else:
                print(f"  [{si}] {span}: no outer cycle (one pass)")
            for c in seg.sub_cycles:
                first = seq.vocab[c.template[0]]
                print(f"       sub-cycle of {c.length:,} x {c.per_parent} at +{c.offset:,} "
                      f"({c.repetitions:,} in all), starts with {first[:60]}")  # fmt: skip
    for phase, p in phases.items():
        print(f"{phase}: segment [{p.segment}], its {'layer' if p.role == 'sub-cycle' else 'cycle'} of "
              f"{p.cycle.length:,} events x {p.cycle.repetitions:,} ({p.sequence.label})")  # fmt: skip
