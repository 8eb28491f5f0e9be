"""Benchmark of ``gpuan tensors`` on a big log: a 2 GiB pre-sized seed64 log (capacity 33.5M entries) holding
30M accesses of a synthetic 16-layer MoE model, analysed by gpuan on the CPU (and on the GPU where there is
one), each in a fresh process.

Reports entries/s and the peak RSS of each run against the log's size. Anchor measured in the same run: the
naive way, reading the whole log into memory (``np.fromfile``), joining offsets to tensors with one
``searchsorted`` and counting per tensor with ``bincount``; it computes one table where gpuan computes all.

    python3 bench/tensors.py [--entries 30000000] [--dir /dev/shm] [--out bench/results] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest import git_commit, machine_info, save_report, versions  # noqa: E402

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


def child(kind: str, log: str, model: str) -> None:
    """One measurement in this process; prints a JSON line (seconds, accesses)."""
    import numpy as np

    t = time.perf_counter()
    if kind == "naive":
        from gpuan.trace.gguf_map import read_gguf
        from gpuan.trace.tensorlog.formats import SEED64

        m = read_gguf(model)
        raw = np.fromfile(log, dtype=SEED64)
        raw = raw[: int(np.searchsorted(raw["timestamp_ns"] == 0, True))]
        off = raw["file_offset"].astype(np.int64)
        starts = m.tensors["offset"].to_numpy()
        i = np.searchsorted(starts, off, side="right") - 1
        counts = np.bincount(i[(i >= 0) & (off >= 0)], minlength=len(starts))
        out = {"seconds": time.perf_counter() - t, "accesses": int(counts.sum())}
    else:
        from gpuan.tensors import analyse
        from gpuan.trace.tensor_inputs import load_tensor_inputs

        result = analyse(load_tensor_inputs(log, model), engine=kind)
        out = {"seconds": time.perf_counter() - t, "accesses": result.summary["accesses"],
               "weight_accesses": result.summary["weight_accesses"]}  # fmt: skip
    # the kernel's peak for this process image (ru_maxrss of a child also counts its parent's peak)
    with open("/proc/self/status") as f:
        out["peak_rss"] = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM"))
    print(json.dumps(out))


def measure(kind: str, log: Path, model: Path) -> dict:
    """Run `kind` in a fresh process; return its JSON (seconds, accesses, peak RSS)."""
    p = subprocess.Popen([sys.executable, __file__, "--child", kind, str(log), str(model)], stdout=subprocess.PIPE,
                         text=True)  # fmt: skip
    text, _ = p.communicate()
    if p.returncode != 0:
        return {"error": f"exit {p.returncode}"}
    return json.loads(text.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=30_000_000)
    ap.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else "/tmp")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"))
    ap.add_argument("--keep", action="store_true", help="keep the 2 GiB log for the next run")
    ap.add_argument("--child", nargs=3, metavar=("KIND", "LOG", "MODEL"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    from gpuan.engine import gpu_available

    model, log, info = make_inputs(Path(args.dir), args.entries)
    size = log.stat().st_size
    kinds = ["cpu"] + (["gpu"] if gpu_available() else []) + ["naive"]
    results = {k: measure(k, log, model) for k in kinds}
    rows = []
    for k, r in results.items():
        if "error" in r:
            rows.append(f"| {k} | failed: {r['error']} | | | |")
            continue
        rate = args.entries / r["seconds"]
        rows.append(f"| {k} | {r['seconds']:.2f} | {rate / 1e6:.2f}M | {r['peak_rss'] / 2**20:,.0f} MiB | "
                    f"{r['peak_rss'] / size:.1%} |")  # fmt: skip
    cpu, naive = results["cpu"], results["naive"]
    ratio = (
        f"gpuan CPU peak RSS is {cpu['peak_rss'] / naive['peak_rss']:.2f}x the naive read's, time "
        f"{cpu['seconds'] / naive['seconds']:.2f}x (the naive path computes one table: accesses per tensor)"
    )
    agree = cpu.get("weight_accesses") == naive.get("accesses")
    info_m = machine_info()
    text = "\n".join([
        "# gpuan tensors benchmark", "",
        f"- machine: {info_m}", f"- date: {time.strftime('%Y-%m-%d')}", f"- commit: {git_commit()}",
        f"- versions: {versions(('gpuan', 'numpy', 'pandas', 'gguf'))}",
        f"- log: {log} ({size / 2**30:.2f} GiB pre-sized seed64, {args.entries:,} entries used); "
        f"model: {info['tensors']} tensors, {info['model_bytes'] / 1e6:.1f} MB; {info['tokens']:,} tokens "
        f"of {info['rows_per_token']} accesses", "",
        "| run | seconds | entries/s | peak RSS | RSS / log size |", "|---|---|---|---|---|", *rows, "",
        ratio, f"per-tensor weight access counts agree with the naive path: {agree}",
        "" if "gpu" in results else "No GPU on this machine: the GPU run is not measured.",
    ])  # fmt: skip
    print(text)
    print("written:", save_report(args.out, "tensors", info_m, text + "\n"))
    if not args.keep:
        log.unlink()
        Path(str(log) + ".meta.json").unlink(missing_ok=True)


if __name__ == "__main__":
    main()
