"""Cycle-detection benchmark: gpuan.cycles.detect on synthetic LLM-inference kernel traces.

    python bench/cycles.py [--sizes 100k,1M,10M] [--gpu] [--noise 1e-4] [--runs 5] [--cold-cache]
                           [--out bench/results]

For each size a trace is built by gpuan.synth.cycles.llm_kernel_trace (a prefill pass, then decode steps
of 32 layers, a side stream and rare stray kernels; not timed) and ``gpuan.cycles.detect(trace)`` is
timed in ``--runs`` fresh Python processes (bench/timing.py): in each, the first call apart (numba's
cache loads, lazy imports: what ``gpuan cycles`` pays) and one warm call after it (``--repeat`` calls in
all); a row gives the median first call, their min-max and the median warm call. ``--cold-cache`` adds
one process with numba's cache in an empty directory, so that the first call compiles. Each process's
peak RSS is reset after the trace is built, so the peak belongs to detection (the trace's own memory
included). ``--gpu`` adds the same runs with ``gpuan.engine.select("gpu")`` (the candidate scoring and their
verification, the periodic regions of every traced candidate, on the GPU), each size on the CPU first,
so that one run prints both. The verification is also timed alone ("verify s": the ids already on the
engine, after detection: warm, the median of 3 calls, then of the processes).

What detection found in the main sequence (device 0's compute streams 7 and 20, interleaved in time, as
``gpuan.cycles.sequences`` groups them) is compared with the generator's ground truth: the prefill as one
aperiodic segment with its layer as sub-cycle, the decode steps as one periodic segment whose cycle is
the step (stream 7's kernels plus the side stream's two), and the decode layer as its sub-cycle. A
Markdown table is written to <out>/cycles-<date>-<machine>.md. Targets: 10M kernels in under 3 s on the
CPU, under 0.3 s on an H100.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest import git_commit, machine_info, machine_slug, versions  # noqa: E402  (shared helpers of the benchmarks)
from timing import (  # noqa: E402  (how every benchmark times: fresh processes, the first call apart)
    DEFAULT_RUNS,
    FreshRunError,
    cold_cache_run,
    emit,
    first_and_warm,
    fresh_runs,
    method_note,
    numba_note,
    spread,
    warm_median,
)

CHILD_TIMEOUT_S = 1800
DEFAULT_SIZES = "100k,1M,10M"
TARGET_S = {"cpu": 3.0, "gpu": 0.3}  # at 10M kernels
TARGET_KERNELS = 10_000_000
DEFAULT_REPEAT = 2  # calls of detect per process: the first and one warm call
DETECT_PACKAGES = ("gpuan", "numpy", "pyarrow", "numba")
GPU_PACKAGES = ("cupy-cuda12x", "numba-cuda")


def parse_size(text: str) -> int:
    """Return a kernel count written as ``100000``, ``100k`` or ``1M``."""
    t = text.strip().lower().replace("_", "")
    scale = {"k": 1_000, "m": 1_000_000}.get(t[-1:], 1)
    return int(float(t[:-1] if scale > 1 else t) * scale)


def size_label(n: int) -> str:
    """Return a short label of a kernel count: 100k, 1M, 10M."""
    if n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n % 1_000 == 0:
        return f"{n // 1_000}k"
    return str(n)


# ---------------------------------------------------------------------------------------------------
# Child side: one size on one engine, in a fresh process


def _status_kib(key: str) -> int:
    """Return a VmRSS / VmHWM line of /proc/self/status in bytes (0 where there is none)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _reset_peak() -> bool:
    """Reset this process's peak RSS (VmHWM) to its current RSS; returns whether the kernel allowed it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _cycle_text(length: int, reps: int) -> str:
    return f"{length} x {reps}"


def compare_with_truth(found: list, truth: dict[str, Any]) -> dict[str, Any]:
    """Return what detection found in the largest sequence, next to the ground truth, and whether they agree.

    Keys: ``sequence`` (its label), ``segments`` (one dict per segment), ``prefill``, ``decode``,
    ``layer`` (found / expected texts), ``matches`` (bool) and ``problems`` (why not, one line each).
    Positions are those of the merged (time-ordered, both streams) sequence.
    """
    from gpuan.synth.cycles import DECODE_LAYER, PREFILL_LAYER

    sc = max(found, key=lambda candidate: len(candidate.sequence))
    seq = sc.sequence
    m = truth["merged"]
    n, layers = len(seq), truth["layers"]
    step_len, steps = m["step_length"], truth["decode"]["steps"]
    strays = int(m["noise_positions"].shape[0])
    dec_start = m["decode_start"]
    pre_len, dec_layer_len = truth["prefill"]["layer_length"], truth["decode"]["layer_length"]
    layer_first = {str(DECODE_LAYER[0][0]), str(PREFILL_LAYER[0][0])}
    segments, problems = [], []
    for seg in sc.segments:
        subs = [
            {"length": sub.length, "per_parent": sub.per_parent, "reps": sub.repetitions, "offset": sub.offset}
            for sub in seg.sub_cycles
        ]
        row = {"start": seg.start, "end": seg.end, "periodic": seg.periodic, "sub_cycles": subs}
        if seg.cycle is not None:
            row.update(length=seg.cycle.length, reps=seg.cycle.repetitions, first=int(seg.cycle.starts[0]))
        segments.append(row)

    # prefill: one aperiodic segment [0, decode start) whose sub-cycle is the prefill layer
    first = sc.segments[0]
    pre_subs = [sub for sub in first.sub_cycles if sub.length == pre_len]
    prefill = {
        "expected": f"aperiodic [0, {dec_start}), layer {_cycle_text(pre_len, layers)}",
        "found": f"{'periodic' if first.periodic else 'aperiodic'} [{first.start}, {first.end})"
        + (f", layer {_cycle_text(pre_subs[0].length, pre_subs[0].repetitions)}" if pre_subs else ", no layer"),
    }
    if first.periodic or first.end != dec_start:
        problems.append(f"prefill: expected aperiodic [0, {dec_start}), found {prefill['found']}")
    elif not pre_subs or pre_subs[0].repetitions < layers - 1:
        problems.append(f"prefill: expected layer {_cycle_text(pre_len, layers)}, found {prefill['found']}")

    # decode: one periodic segment of the step from the first decode kernel to the end
    periodic = [seg for seg in sc.segments if seg.periodic]
    step_segs = [seg for seg in periodic if seg.cycle.length == step_len]
    found_reps = sum(seg.cycle.repetitions for seg in step_segs)
    aligned = (
        float(np.isin(np.concatenate([seg.cycle.starts for seg in step_segs]), m["step_starts"]).mean())
        if step_segs
        else 0.0
    )
    decode = {
        "expected": f"1 periodic segment [{dec_start}, {n}), step {_cycle_text(step_len, steps)}"
        + (f" ({strays} of them with a stray kernel)" if strays else ""),
        "found": f"{len(periodic)} periodic segment(s), {len(step_segs)} of length {step_len}: "
        + (
            ", ".join(
                f"[{seg.start}, {seg.end}) {_cycle_text(seg.cycle.length, seg.cycle.repetitions)}"
                for seg in periodic[:4]
            )
        )
        + (" ..." if len(periodic) > 4 else ""),
        "steps_found": found_reps,
        "aligned_to_step_starts": aligned,
    }
    if len(periodic) != 1 or len(step_segs) != 1:
        problems.append(
            f"decode: expected 1 periodic segment of step length {step_len}, found {len(periodic)} periodic "
            f"segment(s) ({len(step_segs)} of that length, {found_reps} of {steps} steps) among "
            f"{len(sc.segments)} segments"
        )
    else:
        seg = step_segs[0]
        # a step holding a stray kernel is one kernel longer: it may or may not count as an instance
        if seg.start != dec_start or seg.end != n or not steps - strays <= seg.cycle.repetitions <= steps:
            reps = f"{steps}" if not strays else f"{steps - strays} to {steps}"
            problems.append(
                f"decode: expected [{dec_start}, {n}) {step_len} x {reps}, "
                f"found [{seg.start}, {seg.end}) {_cycle_text(step_len, seg.cycle.repetitions)}"
            )
    if step_segs and aligned < 1.0:
        problems.append(f"decode: only {aligned:.1%} of the step instances start at a true step start")

    # decode layer: the sub-cycle of the step of the layer's length
    layer_subs = [sub for seg in step_segs for sub in seg.sub_cycles if sub.length == dec_layer_len]
    # with the side stream, its two kernels land inside layer 0: 31 undisturbed layers per step
    min_per_step = layers - 1 if len(truth["per_stream"]) > 1 else layers
    if layer_subs:
        best = max(layer_subs, key=lambda sub: sub.per_parent)
        at_first = str(seq.vocab[best.template[0]]) in layer_first
        layer = {
            "found": f"{_cycle_text(best.length, best.per_parent)} per step at offset {best.offset}"
            + ("" if at_first else " (instances do not start at the layer's first kernel)"),
            "starts_at_layer_boundary": at_first,
        }
        if best.per_parent < min_per_step:
            problems.append(f"layer: expected >= {min_per_step} layers per step, found {layer['found']}")
    else:
        layer = {"found": "none", "starts_at_layer_boundary": False}
        if step_segs:
            problems.append(f"layer: no sub-cycle of length {dec_layer_len} in the decode step")
    layer["expected"] = f"{_cycle_text(dec_layer_len, layers)} per step"
    return {
        "sequence": seq.label,
        "sequence_events": n,
        "segments": segments,
        "prefill": prefill,
        "decode": decode,
        "layer": layer,
        "matches": not problems,
        "problems": problems,
    }


def verification(seq, eng) -> dict[str, Any]:
    """Time the verification of the candidate periods of `seq` alone (the periodic regions of every traced
    candidate, :func:`gpuan.cycles.detect.traced_regions`: one launch on the GPU), the median of 3 calls, the
    ids already on the engine (after detection: warm); returns ``verify_s`` and ``verify_candidates``."""
    from gpuan.cycles.detect import to_device, traced_periods, traced_regions

    on_device = to_device(seq.ids, eng)
    _, cands = traced_periods(seq.ids, len(seq.vocab), eng, on_device)
    times = []
    for _ in range(3):
        t = time.perf_counter()
        traced_regions(seq.ids, cands, eng, on_device)  # the regions come back to the host: synchronised
        times.append(time.perf_counter() - t)
    return {"verify_s": statistics.median(times), "verify_candidates": int(cands.size)}


def run_child(n: int, engine_name: str, repeat: int, layers: int, seed: int, noise: float) -> dict[str, Any]:
    """Build the trace of `n` kernels, time detect `repeat` times on the engine (the first call apart);
    returns the measurements."""
    from gpuan import engine as engines
    from gpuan.cycles import detect, sequences
    from gpuan.cycles.detect import detect_sequence
    from gpuan.synth.cycles import llm_kernel_trace

    eng = engines.select(engine_name)  # raises where "gpu" has no GPU: the row then says why
    t = time.perf_counter()
    trace, truth = llm_kernel_trace(n, layers=layers, seed=seed, noise=noise)
    build_s = time.perf_counter() - t
    rss_trace = _status_kib("VmRSS")
    peak_reset = _reset_peak()
    first, warm, found = first_and_warm(lambda: detect(trace, engine=eng), max(repeat, 1) - 1)
    peak = _status_kib("VmHWM")
    # where the time goes, once more after the timed runs: the sequences, then the detection proper
    t = time.perf_counter()
    seqs = sequences(trace)
    t_seq = time.perf_counter() - t
    t = time.perf_counter()
    for seq in seqs:
        detect_sequence(seq, eng)
    t_detect = time.perf_counter() - t
    verify = verification(max(seqs, key=len), eng)
    del seqs
    report = compare_with_truth(found, truth)
    return {
        "n": n,
        "engine": eng.name,
        "kernels": truth["kernels"],
        "per_stream": {str(k): v for k, v in truth["per_stream"].items()},
        "steps": truth["decode"]["steps"],
        "strays": int(truth["noise"]["positions"].shape[0]),
        "first_s": first,
        "warm_s": warm,
        "sequences_s": t_seq,
        "detect_sequence_s": t_detect,
        **verify,
        "build_s": build_s,
        "rss_trace": rss_trace,
        "peak_rss": peak,
        "peak_reset": peak_reset,
        **report,
    }


# ---------------------------------------------------------------------------------------------------
# Parent side


def measure(n: int, engine_name: str, args: argparse.Namespace) -> dict[str, Any]:
    """Return the results of `args.runs` fresh processes on one size and engine, merged (``error`` set where
    one failed): the first run's fields, ``runs`` (every run), ``cold`` (the cold-cache run or None)."""
    print(f"  {size_label(n)} on {engine_name} ({args.runs} fresh processes) ...", end="", flush=True)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(n), "--engine", engine_name]
    cmd += ["--repeat", str(args.repeat), "--layers", str(args.layers), "--seed", str(args.seed)]
    cmd += ["--noise", str(args.noise)]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    kw = {"env": env, "cwd": REPO, "timeout": CHILD_TIMEOUT_S}
    try:
        runs = fresh_runs(cmd, args.runs, echo=lambda r: f"{r['first_s']:.3f}", **kw)
        cold = None
        if args.cold_cache:
            print(" cold cache ...", end="", flush=True)
            cold = cold_cache_run(cmd, **kw)
            print(f" {cold['first_s']:.3f}", end="", flush=True)
    except FreshRunError as e:
        print(f" failed: {e}")
        return {"n": n, "engine": engine_name, "error": str(e)}
    r = dict(runs[0])
    r["runs"], r["cold"] = runs, cold
    r["matches"] = all(x["matches"] for x in runs)
    r["problems"] = list(dict.fromkeys(p for x in runs for p in x["problems"]))
    print(" s (first calls)" + ("" if r["matches"] else "  (structure differs)"))
    return r


def headers(cold: bool) -> list[str]:
    """Return the table's column names (with the cold-cache column where one run had an empty cache)."""
    return [
        "size", "engine", "kernels", "first call s, median (min–max)", "warm s", *(["first call s, cold cache"] * cold),
        "verify s (warm)", "kernels/s (first)", "peak RSS MB", "prefill found", "decode step found",
        "decode layer found", "matches truth",
    ]  # fmt: skip


def table_rows(results: list[dict[str, Any]], cold: bool) -> list[list[str]]:
    """Return the formatted cells of each result (``n/a`` and the error where a run failed)."""
    rows = []
    width = len(headers(cold))
    for r in results:
        if "error" in r:
            rows.append([size_label(r["n"]), r["engine"]] + ["n/a"] * (width - 3) + [f"n/a: {r['error']}"])
            continue
        first = spread([x["first_s"] for x in r["runs"]])
        warm = warm_median(r["runs"])
        d = r["decode"]
        rows.append(
            [
                size_label(r["n"]),
                r["engine"],
                f"{r['kernels']:,}",
                first.cell(),
                "n/a" if warm is None else f"{warm:.3f}",
                *([f"{r['cold']['first_s']:.3f}" if r["cold"] else "not run"] * cold),
                f"{statistics.median(x['verify_s'] for x in r['runs']):.4f}",
                f"{r['kernels'] / first.median:,.0f}",
                f"{statistics.median(x['peak_rss'] for x in r['runs']) / 1e6:,.0f}",
                r["prefill"]["found"],
                f"{d['steps_found']:,} of {r['steps']:,} steps; {d['found']}",
                r["layer"]["found"],
                "yes" if r["matches"] else "no",
            ]
        )
    return rows


def console_table(rows: list[list[str]], names: list[str], widths_cap: int = 60) -> str:
    """Return the table as aligned plain text (long cells cut at `widths_cap` characters)."""
    cells = [names] + [[cell if len(cell) <= widths_cap else cell[: widths_cap - 1] + "…" for cell in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(names))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)) for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def target_lines(results: list[dict[str, Any]]) -> list[str]:
    """Return one line per engine measured at 10M kernels: its median first call against the target."""
    out = []
    for r in results:
        if r["n"] != TARGET_KERNELS or "error" in r:
            continue
        first, target = spread([x["first_s"] for x in r["runs"]]), TARGET_S[r["engine"]]
        verdict = "met" if first.median <= target else f"missed ({first.median / target:.2f}x the target)"
        warm = warm_median(r["runs"])
        out.append(
            f"{r['engine']}: 10M kernels in {first.median:.2f} s (median first call of {first.n} fresh processes, "
            f"{first.low:.2f}–{first.high:.2f}"
            + ("" if warm is None else f"; warm {warm:.2f} s")
            + f"), target {target} s: {verdict}"
        )
    return out


def structure_notes(results: list[dict[str, Any]]) -> list[str]:
    """Return the notes per row: memory, build time, every process's calls, numba, the comparison with the
    truth and its problems."""
    notes = []
    for r in results:
        tag = f"{size_label(r['n'])} on {r['engine']}"
        if "error" in r:
            notes.append(f"{tag}: failed: {r['error']}")
            continue
        peak_note = "" if r["peak_reset"] else " (peak not reset after the build: it includes the build)"
        calls = "; ".join(f"{x['first_s']:.3f}" + "".join(f", {w:.3f}" for w in x["warm_s"]) for x in r["runs"])
        notes.append(
            f"{tag}: trace built in {r['build_s']:.2f} s (not timed), RSS {r['rss_trace'] / 1e6:,.0f} MB with the "
            f"trace, peak {r['peak_rss'] / 1e6:,.0f} MB during detection{peak_note}; calls per process (first, "
            f"warm) {calls} s; {r['strays']} stray kernel(s) in {r['steps']:,} decode steps; streams "
            f"{r['per_stream']}; {numba_note(r['runs'], r['cold'])}"
        )
        med = {k: statistics.median(x[k] for x in r["runs"]) for k in ("sequences_s", "detect_sequence_s", "verify_s")}
        notes.append(
            f"{tag}: split of one more (warm) run, medians of the processes: gpuan.cycles.sequences "
            f"{med['sequences_s']:.3f} s (events of the kind, grouping, name ids), detect_sequence "
            f"{med['detect_sequence_s']:.3f} s, of which the verification of the largest sequence's "
            f"{r['verify_candidates']} traced candidate periods (their periodic regions; one launch on the GPU) "
            f"{med['verify_s']:.4f} s"
        )
        notes.append(
            f"{tag}: sequence '{r['sequence']}' ({r['sequence_events']:,} events), {len(r['segments'])} segment(s); "
            f"prefill expected {r['prefill']['expected']}; decode expected {r['decode']['expected']}, "
            f"{r['decode']['aligned_to_step_starts']:.1%} of found step instances start at a true step start; "
            f"layer expected {r['layer']['expected']}, found {r['layer']['found']}"
        )
        for p in r["problems"]:
            notes.append(f"{tag}: differs from the truth: {p}")
    return notes


def markdown_report(info: dict, results: list[dict[str, Any]], args: argparse.Namespace) -> str:
    """Return the Markdown result file: header (machine, date, commit, versions), table, targets, notes."""
    now = dt.datetime.now(dt.timezone.utc)
    names = headers(args.cold_cache)
    head = [
        f"# Cycle-detection benchmark, {now:%Y-%m-%d}, {machine_slug(info)}",
        "",
        f"- machine: {info['cpu']}, {info['cores']} cores, {info['ram'] / 2**30:.1f} GiB RAM",
        f"- date: {now:%Y-%m-%d %H:%M} UTC",
        f"- git commit: {git_commit()}",
        "- versions: " + ", ".join(f"{k} {v}" for k, v in versions(DETECT_PACKAGES, GPU_PACKAGES).items()),
        f"- traces: gpuan.synth.cycles.llm_kernel_trace (LLM inference on an H100: prefill, then decode steps of "
        f"{args.layers} layers; side stream 20 with 2 kernels a step; noise {args.noise}: that share of decode "
        f"steps holds one stray kernel; seed {args.seed})",
        "- "
        + method_note(args.runs, f"the {args.repeat - 1} call(s) after it in the same processes")
        + " The timed function is `gpuan.cycles.detect(trace)` on a trace built before in the same process (not "
        "timed); the interpreter's start and the imports are not in it. "
        + (
            "'cold cache' is one more process with an empty NUMBA_CACHE_DIR: every numba function compiles in "
            "the first call. "
            if args.cold_cache
            else ""
        )
        + "Peak RSS (median of the processes) is the high-water mark (VmHWM) reset after the trace was built, so "
        "it is the trace plus what detection allocates. The found structure is that of the largest sequence "
        "(device 0, compute streams 7 and 20 in time order) against the generator's ground truth, in every process.",
        f"- targets: 10M kernels under {TARGET_S['cpu']} s on the CPU, under {TARGET_S['gpu']} s on an H100, "
        "judged on the median first call",
        "",
        "| " + " | ".join(names) + " |",
        "|---|---|" + "---:|" * (len(names) - 6) + "---|" * 4,
    ]
    body = [
        "| " + " | ".join(cell.replace("|", "\\|") for cell in r) + " |" for r in table_rows(results, args.cold_cache)
    ]
    tail = []
    targets = target_lines(results)
    if targets:
        tail += ["", "Targets:", ""] + [f"- {t}" for t in targets]
    tail += ["", "Notes:", ""] + [f"- {n}" for n in structure_notes(results)]
    return "\n".join(head + body + tail) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (or, with --child, one size on one engine); returns the exit code."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default=DEFAULT_SIZES, help=f"kernel counts, comma-separated (default {DEFAULT_SIZES})")
    p.add_argument("--gpu", action="store_true", help="also run detection with the GPU engine")
    p.add_argument("--out", default=str(REPO / "bench" / "results"), help="directory for the Markdown result")
    p.add_argument("--layers", type=int, default=32, help="decoder layers of the synthetic model")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--noise", type=float, default=1e-4, help="share of decode steps with one stray kernel")
    p.add_argument("--runs", type=int, default=DEFAULT_RUNS, help=f"fresh processes per size (default {DEFAULT_RUNS})")
    p.add_argument("--repeat", type=int, default=DEFAULT_REPEAT,
                   help=f"calls of detect per process, the first one apart (default {DEFAULT_REPEAT})")  # fmt: skip
    p.add_argument("--cold-cache", action="store_true", help="one more process per size with an empty numba cache")
    p.add_argument("--child", type=int, help=argparse.SUPPRESS)
    p.add_argument("--engine", default="cpu", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.repeat = max(args.repeat, 1)

    if args.child:
        result = run_child(args.child, args.engine, args.repeat, args.layers, args.seed, args.noise)
        emit(result)
        return 0

    sizes = [parse_size(size) for size in args.sizes.split(",") if size.strip()]
    engines = ["cpu"] + (["gpu"] if args.gpu else [])
    results = [measure(n, e, args) for n in sizes for e in engines]

    names = headers(args.cold_cache)
    print()
    print(console_table(table_rows(results, args.cold_cache), names))
    print()
    for line in target_lines(results):
        print(line)
    for r in results:
        if "error" in r:
            continue
        tag = f"{size_label(r['n'])} on {r['engine']}"
        if r["matches"]:
            print(f"{tag}: found structure matches the ground truth in every process")
        for problem in r["problems"]:
            print(f"{tag}: differs from the truth: {problem}")

    info = machine_info()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"cycles-{dt.date.today():%Y-%m-%d}-{machine_slug(info)}.md"
    out.write_text(markdown_report(info, results, args))
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
