"""``gpuan compare --all`` speed: every cycle of one run aligned with its partner in another, CPU and GPU.

    python bench/compare.py [--lengths 50,200,426,893,1545,3000] [--per-length 2] [--gpu] [--runs 5] [--cold-cache]
                            [--out bench/results]

Two runs of synthetic cycle tables are built (not timed): per length, `--per-length` baseline cycles (a
layer of about a quarter of the length's kernels repeated, so the alignment has many ties), and per
baseline a new cycle that is a rotation of it with 5 % of its kernels renamed in tile suffixes (same
signature), 2 % removed and 2 % added. Timed: ``gpuan.compare.analyse_runs((base, new), mode="align")``
(pairing the cycles, then aligning every pair: on the GPU one batched launch per kernel of
cuda_kernels/lcs_wavefront.cu), in ``--runs`` fresh processes per engine (bench/timing.py): in each, the
cycles are built (not timed), then the first call is timed apart (numba's cache loads, NVRTC's compiles:
what ``gpuan compare --all`` pays) and one warm call after it; a row gives the median first call, their
min-max and the median warm call. ``--cold-cache`` adds one process per engine with numba's cache in an
empty directory (the first call compiles). On the CPU and, with ``--gpu``, on the GPU in the same run;
the GPU's tables are checked equal to the CPU's (by a digest of each process's tables).

A Markdown table goes to <out>/compare-<date>-<machine>.md with the machine, date and commit.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest import git_commit, machine_info, save_report, versions  # noqa: E402  (shared helpers of the benchmarks)
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

from gpuan import compare, engine  # noqa: E402
from gpuan.trace.inputs import CycleTable  # noqa: E402

DEFAULT_LENGTHS = "50,200,426,893,1545,3000"
PACKAGES = ("gpuan", "numpy", "pandas", "numba")
GPU_PACKAGES = ("cupy-cuda12x",)
CHILD_TIMEOUT_S = 1800


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


def digest(result) -> str:
    """Return a digest of the kernels and cycles tables of a compare result (schema and values)."""
    h = hashlib.sha256()
    for name in ("kernels", "cycles"):
        table = result[name]  # Arrow
        h.update(str(table.schema).encode())
        h.update(table.to_pandas().to_csv().encode())
    return h.hexdigest()


def child(name: str, args: argparse.Namespace) -> None:
    """In a fresh process: build the cycles (not timed), time the first call of analyse_runs on engine `name`
    and one warm call; print the tagged result line."""
    lengths = [int(x) for x in args.lengths.split(",") if x.strip()]
    bases, news = runs(lengths, args.per_length, args.seed)
    eng = engine.select(name)  # raises where there is no GPU: the parent's row says why
    first, warm, result = first_and_warm(lambda: compare.analyse_runs((bases, news), engine=eng, mode="align"))
    emit({"engine": name, "first_s": first, "warm_s": warm, "pairs": result.summary["pairs"], "digest": digest(result)})


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns the exit code."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lengths", default=DEFAULT_LENGTHS, help=f"cycle lengths (default {DEFAULT_LENGTHS})")
    p.add_argument("--per-length", type=int, default=2, help="cycles per length in each run")
    p.add_argument("--gpu", action="store_true", help="also align on the GPU")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--runs", type=int, default=DEFAULT_RUNS, help=f"fresh processes per engine (default {DEFAULT_RUNS})"
    )
    p.add_argument("--cold-cache", action="store_true", help="one more process per engine with an empty numba cache")
    p.add_argument("--out", default=str(REPO / "bench" / "results"), help="directory for the Markdown result")
    p.add_argument("--child", choices=("cpu", "gpu"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(args.child, args)
        return 0

    lengths = [int(x) for x in args.lengths.split(",") if x.strip()]
    bases, news = runs(lengths, args.per_length, args.seed)
    kernels = sum(len(t.rows) for t in bases) + sum(len(t.rows) for t in news)
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--lengths",
        args.lengths,
        "--per-length",
        str(args.per_length),
    ]
    cmd += ["--seed", str(args.seed)]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    kw = {"env": env, "cwd": REPO, "timeout": CHILD_TIMEOUT_S}
    rows, notes, digests = [], [], {}
    for name in ["cpu"] + (["gpu"] if args.gpu else []):
        print(f"  {name} ({args.runs} fresh processes) ...", end="", flush=True)
        try:
            got = fresh_runs(cmd + ["--child", name], args.runs, echo=lambda r: f"{r['first_s']:.3f}", **kw)
            cold = None
            if args.cold_cache:
                print(" cold cache ...", end="", flush=True)
                cold = cold_cache_run(cmd + ["--child", name], **kw)
                print(f" {cold['first_s']:.3f}", end="", flush=True)
            print(" s (first calls)")
        except FreshRunError as e:
            print(f" failed: {e}")
            rows.append([name, f"n/a: {e}", "n/a", *(["n/a"] * args.cold_cache), "n/a", "n/a"])
            continue
        first, warm = spread([r["first_s"] for r in got]), warm_median(got)
        digests[name] = {r["digest"] for r in got} | ({cold["digest"]} if cold else set())
        same = "(reference)" if name == "cpu" else "yes" if digests[name] == digests.get("cpu") else "NO"
        if len(digests[name]) > 1:
            same += "; NOT the same in every process"
        cold_cell = [f"{cold['first_s']:.3f}" if cold else "not run"] * args.cold_cache
        rows.append([name, first.cell(), f"{warm:.3f}", *cold_cell, f"{got[0]['pairs']}", same])
        firsts = ", ".join(f"{r['first_s']:.3f}" for r in got)
        warms = ", ".join(f"{w:.3f}" for r in got for w in r["warm_s"])
        notes.append(f"- {name}: first calls {firsts} s; warm calls {warms} s; {numba_note(got, cold)}")
        print(f"{name}: {first.median:.3f} s first call (median; warm {warm:.3f} s) for {got[0]['pairs']} pairs "
              f"({kernels:,} kernels); same tables: {same}")  # fmt: skip

    info = machine_info()
    now = dt.datetime.now(dt.timezone.utc)
    cold_head = " first call s, cold cache |" * args.cold_cache
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
        "- the timed function: `gpuan.compare.analyse_runs((base, new), mode='align')` on cycles built before in the "
        "same process (not timed); on the GPU every (pair, rotation) in one launch of `lcs_lengths`, every chosen "
        "rotation's table in one launch of `lcs_tables`",
        "- "
        + method_note(args.runs)
        + (" 'cold cache' is one more process with an empty NUMBA_CACHE_DIR." if args.cold_cache else ""),
        "",
        f"| engine | first call s, median (min–max) | warm s |{cold_head} pairs | same tables as the CPU |",
        "|---|---:|---:|" + "---:|" * args.cold_cache + "---:|---|",
        *["| " + " | ".join(r) + " |" for r in rows],
        "",
        *notes,
    ]
    out = save_report(args.out, "compare", info, "\n".join(lines) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
