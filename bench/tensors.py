"""Benchmark of ``gpuan tensors`` on a big log: a 2 GiB pre-sized seed64 log (capacity 33.5M entries) holding
30M accesses of a synthetic 16-layer MoE model, analysed by gpuan on the CPU (and on the GPU where there is
one), each in a fresh process.

Each path runs in ``--runs`` fresh processes (bench/timing.py): in each, the first call of the analysis is
timed apart (lazy imports, the first reads of the log: what ``gpuan tensors`` pays, less the interpreter's
start and the imports) and one warm call after it; a row gives the median first call, their min-max and
the median warm call, entries/s of the median first call and the peak RSS after the first call against
the log's size. Anchor measured the same way in the same run: the naive way, reading the whole log into
memory (``np.fromfile``), joining offsets to tensors with one ``searchsorted`` and counting per tensor with
``bincount``; it computes one table where gpuan computes all.

    python3 bench/tensors.py [--entries 30000000] [--dir /dev/shm] [--runs 5] [--out bench/results] [--keep]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest import git_commit, machine_info, save_report, versions  # noqa: E402
from timing import (  # noqa: E402  (how every benchmark times: fresh processes, the first call apart)
    DEFAULT_RUNS,
    FreshRunError,
    emit,
    first_and_warm,
    fresh_runs,
    median,
    method_note,
    numba_note,
    spread,
    warm_median,
)

CAPACITY = (2 << 30) // 64  # a 2 GiB file of 64-byte entries


def make_inputs(d: Path, entries: int) -> tuple[Path, Path, dict]:
    """Write the model and the log (if not there yet); return their paths and what was generated."""
    import numpy as np

    from gpuan.synth.tensors import accesses64, expert_choices, template, write_model
    from gpuan.trace.gguf_map import read_gguf
    from gpuan.trace.tensorlog import open_writer

    model_path, log_path = d / "bench-moe.gguf", d / "bench-tensors.log"
    if not model_path.exists():
        write_model(model_path, layers=16, n_embd=256, n_ff=256, vocab=4096, experts=8)
    model = read_gguf(model_path)
    tpl = template(model, threads=4, top_k=2)
    tokens = -(-entries // len(tpl.rows))
    info = {"model_bytes": model.file_bytes, "tensors": len(model.tensors), "rows_per_token": len(tpl.rows),
            "tokens": tokens, "entries": entries, "capacity": CAPACITY}  # fmt: skip
    if log_path.exists() and log_path.stat().st_size == CAPACITY * 64:
        return model_path, log_path, info
    experts = expert_choices(tokens, 16, 8, 2, seed=1)
    t = time.perf_counter()
    with open_writer(log_path, "seed64", CAPACITY) as w:
        ts, first, left = 1000, 0, entries
        while left > 0:
            n = min(2048, tokens - first)
            batch = accesses64(model, tpl, first, n, ts, 16, experts[first : first + n])[:left]
            w.append(batch)
            ts, first, left = int(batch["timestamp_ns"][-1]), first + n, left - len(batch)
    info["generate_s"] = round(time.perf_counter() - t, 1)
    del np
    return model_path, log_path, info


def _peak_rss() -> int:
    """This process image's peak RSS in bytes (ru_maxrss of a child also counts its parent's peak)."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM"))


def child(kind: str, log: str, model: str) -> None:
    """One measurement in this process: the first call, its peak RSS, one warm call; prints the tagged
    result line (seconds, accesses, peak RSS)."""
    import numpy as np

    if kind == "naive":
        from gpuan.trace.gguf_map import read_gguf
        from gpuan.trace.tensorlog.formats import SEED64

        def run():
            m = read_gguf(model)
            raw = np.fromfile(log, dtype=SEED64)
            raw = raw[: int(np.searchsorted(raw["timestamp_ns"] == 0, True))]
            off = raw["file_offset"].astype(np.int64)
            starts = m.tensors["offset"].to_numpy()
            i = np.searchsorted(starts, off, side="right") - 1
            counts = np.bincount(i[(i >= 0) & (off >= 0)], minlength=len(starts))
            return {"accesses": int(counts.sum())}
    else:
        from gpuan.tensors import analyse
        from gpuan.trace.tensor_inputs import load_tensor_inputs

        def run():
            result = analyse(load_tensor_inputs(log, model), engine=kind)
            return {"accesses": result.summary["accesses"], "weight_accesses": result.summary["weight_accesses"]}

    first, _, out = first_and_warm(run, warm=0)
    peak = _peak_rss()
    warm, _, _ = first_and_warm(run, warm=0)
    emit({**out, "first_s": first, "warm_s": [warm], "peak_rss": peak})


def measure(kind: str, log: Path, model: Path, runs: int) -> list[dict] | dict:
    """Run `kind` in `runs` fresh processes; return their results (or {"error": why})."""
    print(f"  {kind} ({runs} fresh processes) ...", end="", flush=True)
    try:
        out = fresh_runs([sys.executable, __file__, "--child", kind, str(log), str(model)], runs,
                         echo=lambda r: f"{r['first_s']:.2f}")  # fmt: skip
    except FreshRunError as e:
        print(f" failed: {e}")
        return {"error": str(e)}
    print(" s (first calls)")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=30_000_000)
    ap.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else "/tmp")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"))
    ap.add_argument("--keep", action="store_true", help="keep the 2 GiB log for the next run")
    ap.add_argument("--runs", type=int, default=DEFAULT_RUNS, help=f"fresh processes per path (default {DEFAULT_RUNS})")
    ap.add_argument("--child", nargs=3, metavar=("KIND", "LOG", "MODEL"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    from gpuan.engine import gpu_available

    model, log, info = make_inputs(Path(args.dir), args.entries)
    size = log.stat().st_size
    kinds = ["cpu"] + (["gpu"] if gpu_available() else []) + ["naive"]
    try:
        results = {k: measure(k, log, model, args.runs) for k in kinds}
    finally:
        if not args.keep:  # the 2 GiB log is read only by the measurements
            log.unlink()
            Path(str(log) + ".meta.json").unlink(missing_ok=True)
    rows, summary = [], {}
    for k, runs in results.items():
        if isinstance(runs, dict):
            rows.append(f"| {k} | failed: {runs['error']} | | | | |")
            continue
        first, warm = spread([r["first_s"] for r in runs]), warm_median(runs)
        peak = median([r["peak_rss"] for r in runs])
        summary[k] = {"first": first.median, "warm": warm, "peak_rss": peak, "accesses": runs[0].get("accesses"),
                      "weight_accesses": runs[0].get("weight_accesses")}  # fmt: skip
        rate = args.entries / first.median
        rows.append(f"| {k} | {first.cell(2)} | {warm:.2f} | {rate / 1e6:.2f}M | {peak / 2**20:,.0f} MiB | "
                    f"{peak / size:.1%} |")  # fmt: skip
    if "cpu" not in summary or "naive" not in summary:
        raise SystemExit("the gpuan CPU run or the naive anchor failed: " + "; ".join(rows))
    cpu, naive = summary["cpu"], summary["naive"]
    ratio = (
        f"gpuan CPU peak RSS is {cpu['peak_rss'] / naive['peak_rss']:.2f}x the naive read's, time "
        f"{cpu['first'] / naive['first']:.2f}x on first calls, {cpu['warm'] / naive['warm']:.2f}x warm (medians; "
        "the naive path computes one table: accesses per tensor)"
    )
    agree = cpu.get("weight_accesses") == naive.get("accesses")
    numba = "; ".join(f"{k}: {numba_note(runs)}" for k, runs in results.items() if isinstance(runs, list))
    info_m = machine_info()
    text = "\n".join([
        "# gpuan tensors benchmark", "",
        f"- machine: {info_m}", f"- date: {time.strftime('%Y-%m-%d')}", f"- commit: {git_commit()}",
        f"- versions: {versions(('gpuan', 'numpy', 'pandas', 'gguf'))}",
        f"- log: {log} ({size / 2**30:.2f} GiB pre-sized seed64, {args.entries:,} entries used); "
        f"model: {info['tensors']} tensors, {info['model_bytes'] / 1e6:.1f} MB; {info['tokens']:,} tokens "
        f"of {info['rows_per_token']} accesses", "",
        f"- {method_note(args.runs)} The timed function: `analyse(load_tensor_inputs(LOG, MODEL))` (gpuan), or "
        "the naive read and count; peak RSS after the first call (median of the processes).", "",
        "| run | first call s, median (min–max) | warm s | entries/s (first) | peak RSS | RSS / log size |",
        "|---|---|---|---|---|---|", *rows, "",
        ratio, f"per-tensor weight access counts agree with the naive path: {agree}", f"numba: {numba}.",
        "" if "gpu" in results else "No GPU on this machine: the GPU run is not measured.",
    ])  # fmt: skip
    print(text)
    print("written:", save_report(args.out, "tensors", info_m, text + "\n"))


if __name__ == "__main__":
    main()
