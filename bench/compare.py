"""``gpuan compare --all`` speed: every cycle of one run aligned with its partner in another, CPU and GPU.

    python bench/compare.py [--lengths 50,200,426,893,1545,3000] [--per-length 2] [--gpu] [--out bench/results]

Two runs of synthetic cycle tables are built (not timed): per length, `--per-length` baseline cycles (a
layer of about a quarter of the length's kernels repeated, so the alignment has many ties), and per
baseline a new cycle that is a rotation of it with 5 % of its kernels renamed in tile suffixes (same
signature), 2 % removed and 2 % added. Timed: ``gpuan.compare.analyse_runs((base, new), mode="align")``
(pairing the cycles, then aligning every pair: on the GPU one batched launch per kernel of
cuda_kernels/lcs_wavefront.cu), best of 3 after one untimed run (numba's and NVRTC's compiles), on the
CPU and, with ``--gpu``, on the GPU in the same run; the GPU's tables are checked equal to the CPU's.

A Markdown table goes to <out>/compare-<date>-<machine>.md with the machine, date and commit.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest import git_commit, machine_info, save_report, versions  # noqa: E402  (shared helpers of the benchmarks)

from gpuan import compare, engine  # noqa: E402
from gpuan.trace.inputs import CycleTable  # noqa: E402

DEFAULT_LENGTHS = "50,200,426,893,1545,3000"
PACKAGES = ("gpuan", "numpy", "pandas", "numba")
GPU_PACKAGES = ("cupy-cuda12x",)


def _table(path: str, names: list[str], rng: np.random.Generator) -> CycleTable:
    avg = rng.gamma(2.0, 20.0, len(names))
    rows = pd.DataFrame(
        {
            "kernel_name": names,
            "avg_duration_us": avg,
            "min_duration_us": avg * 0.9,
            "max_duration_us": avg * 1.2,
            "stddev_us": avg * 0.05,
        }
    )
    return CycleTable(path, rows, iterations=10, avg_cycle_us=float(avg.sum()))


def runs(lengths: list[int], per_length: int, seed: int) -> tuple[list[CycleTable], list[CycleTable]]:
    """Return (baseline cycles, new cycles): per length `per_length` pairs, as the module docstring says."""
    rng = np.random.default_rng(seed)
    bases, news = [], []
    for n in lengths:
        for c in range(per_length):
            tag = f"c{n}_{c}"
            layer = [f"void {tag}_k{k}<float, 128>(float*)_BLOCK_SIZE_M_64" for k in range(max(2, n // 4))]
            names = [layer[k % len(layer)] for k in range(n)]
            new = list(np.roll(np.array(names, object), int(rng.integers(0, n))))
            for k in np.flatnonzero(rng.random(n) < 0.05):
                new[k] = new[k].replace("_M_64", "_M_128")  # another tile size: the same signature
            new = [name for name, drop in zip(new, rng.random(n) < 0.02) if not drop]
            for _ in range(int(0.02 * n)):
                new.insert(int(rng.integers(0, len(new) + 1)), f"void {tag}_extra_{rng.integers(0, 9)}(float*)")
            bases.append(_table(f"base_cycle_{len(bases) + 1}.csv", names, rng))
            news.append(_table(f"new_cycle_{len(news) + 1}.csv", new, rng))
    return bases, news


def best_of(fn, repeat: int = 3) -> tuple[float, object]:
    """Return (best seconds of `repeat` calls, the last result), after one untimed call."""
    out = fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns the exit code."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lengths", default=DEFAULT_LENGTHS, help=f"cycle lengths (default {DEFAULT_LENGTHS})")
    p.add_argument("--per-length", type=int, default=2, help="cycles per length in each run")
    p.add_argument("--gpu", action="store_true", help="also align on the GPU")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(REPO / "bench" / "results"), help="directory for the Markdown result")
    args = p.parse_args(argv)

    lengths = [int(x) for x in args.lengths.split(",") if x.strip()]
    bases, news = runs(lengths, args.per_length, args.seed)
    kernels = sum(len(t.rows) for t in bases) + sum(len(t.rows) for t in news)
    rows, results = [], {}
    for name in ["cpu"] + (["gpu"] if args.gpu else []):
        try:
            eng = engine.select(name)
        except engine.EngineError as e:
            rows.append([name, "n/a", "n/a", f"n/a: {e}"])
            continue
        seconds, result = best_of(lambda eng=eng: compare.analyse_runs((bases, news), engine=eng, mode="align"))
        results[name] = result
        same = "(reference)"
        if name != "cpu":
            same = "yes" if all(result[t].equals(results["cpu"][t]) for t in ("kernels", "cycles")) else "NO"
        rows.append([name, f"{seconds:.3f}", f"{result.summary['pairs']}", same])
        print(f"{name}: {seconds:.3f} s for {result.summary['pairs']} pairs ({kernels:,} kernels); same tables: {same}")

    info = machine_info()
    now = dt.datetime.now(dt.timezone.utc)
    lines = [
        f"# compare --all benchmark, {now:%Y-%m-%d}",
        "",
        f"- machine: {info['cpu']}, {info['cores']} cores, {info['ram'] / 2**30:.1f} GiB RAM"
        + (f", GPU {info['gpu']}" if info.get("gpu") else ""),
        f"- date: {now:%Y-%m-%d %H:%M} UTC",
        f"- git commit: {git_commit()}",
        "- versions: " + ", ".join(f"{k} {v}" for k, v in versions(PACKAGES, GPU_PACKAGES).items()),
        f"- cycles: {len(bases)} per run, lengths {args.lengths} ({args.per_length} each), {kernels:,} kernels in "
        f"all; seed {args.seed}",
        "- method: `gpuan.compare.analyse_runs((base, new), mode='align')`, best of 3 after one untimed run; "
        "on the GPU every (pair, rotation) in one launch of `lcs_lengths`, every chosen rotation's table in one "
        "launch of `lcs_tables`",
        "",
        "| engine | seconds | pairs | same tables as the CPU |",
        "|---|---:|---:|---|",
        *["| " + " | ".join(r) + " |" for r in rows],
    ]
    out = save_report(args.out, "compare", info, "\n".join(lines) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
