"""Stream-overlap prediction: accuracy against measured runs, and simulation speed.

    python bench/streams.py [--out bench/results]        # accuracy on ../shared/data/nvprof, speed
    python bench/streams.py --recorded DIR               # also the runs bench/record_streams.py made

Accuracy: each 1-stream trace is predicted for the stream count (and launch order) of its measured
partner and the error of the predicted end time is printed; for the nvprof pairs beside the research
model's error on the same files (the anchor). ``--recorded DIR`` adds the runs that
``bench/record_streams.py DIR`` recorded on a GPU (its manifest.json says which trace predicts which).

Speed: the simulation of N copies of the largest single stream of ../shared/data (v100_rank0, stream 7:
6,095 kernels and copies) for N = 1, 2, 4, 8, 16 (one run each, after one untimed run that compiles
the event loop), against the time to read that trace in the same run. Then the ROCm SD-3.5 inference
(mi300x_xdit_sd35_rank0, 8,066 operations, kernels that split into hundreds of groups of blocks) for
N = 2, 4, 8, 16, each also without the limit on groups per kernel (``max_groups=0``, the exact timeline)
to show what the limit moves.

A Markdown table goes to <out>/streams-<date>-<machine>.md with the machine, date and commit.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest import git_commit, machine_info, save_report, versions  # noqa: E402  (shared helpers of the benchmarks)

from gpuan.streams import check, predict  # noqa: E402
from gpuan.trace.load import load as load_cached  # noqa: E402


def load(path):
    """Read a trace afresh (never from a Parquet cache), so the files are what is measured."""
    return load_cached(path, use_cache=False)


#: (1-stream file, measured N-stream file, N, launch order, the research model's error on that pair)
NVPROF_PAIRS = (
    ("mem_mem_1stream_10M.csv", "mem_mem_2stream_10M_h2d_h2d_ovlp.csv", 2, "breadth", -0.036),
    ("mem_mem_1stream_23000.csv", "mem_mem_2stream_23000.csv", 2, "breadth", +0.087),
)
SPEED_TRACE, SPEED_STREAM = "kineto/v100_rank0_ns_resolution.json.gz", 7
#: the block-completion events multiply as more GPU-filling kernels interleave (1.2M at N = 4)
SPEED_COUNTS = (1, 2, 4, 8, 16)
ROCM_TRACE, ROCM_COUNTS = "kineto/mi300x_xdit_sd35_rank0.json.gz", (2, 4, 8, 16)
ELEMENTS = 1 << 24  # 64 MiB of float32 per copy


def accuracy(pairs) -> list[dict]:
    """Return one row per (1-stream, measured, N, order, anchor) pair: predicted, measured, error."""
    rows = []
    for one, many, n, order, anchor in pairs:
        p = predict(load(one), n, launch_order=order)
        c = check(p, load(many), str(many))
        rows.append({"trace": Path(one).name, "measured_trace": Path(many).name, "n": n, "order": order,
                     "predicted_ms": p.total_ns / 1e6, "measured_ms": c.measured_ns / 1e6, "error": c.error,
                     "anchor": anchor, "device": p.settings.gpu.name})  # fmt: skip
    return rows


def recorded_pairs(directory: Path) -> list[tuple[Path, Path, int, str, None]]:
    """Return the pairs that bench/record_streams.py wrote to `directory` (from its manifest.json)."""
    manifest = json.loads((directory / "manifest.json").read_text())
    return [(directory / r["one"], directory / r["many"], r["n"], r["order"], None) for r in manifest["runs"]]


def speed() -> tuple[float, list[dict]]:
    """Return the seconds to read the speed trace (the anchor) and, per N, the seconds to predict N copies
    of its stream. The first prediction is made once untimed, so numba's compilation is not counted."""
    t = time.perf_counter()
    trace = load(DATA / SPEED_TRACE)
    read = time.perf_counter() - t
    predict(trace, 1, stream=SPEED_STREAM)
    rows = []
    for n in SPEED_COUNTS:
        t = time.perf_counter()
        p = predict(trace, n, stream=SPEED_STREAM)
        best = time.perf_counter() - t
        ops = n * len(p.workload)
        rows.append({"n": n, "ops": ops, "seconds": best, "ops_per_s": ops / best, "speedup": p.speedup})
    return read, rows


def rocm_speed() -> list[dict]:
    """Return, per N, the seconds to predict N copies of the SD-3.5 trace, its total, and the total and
    seconds without the limit on groups per kernel."""
    from dataclasses import replace

    from gpuan.streams.predict import _api_ns, gpu_of, settings_for
    from gpuan.streams.simulate import simulate
    from gpuan.streams.workload import workload

    trace = load(DATA / ROCM_TRACE)
    w, gpu = workload(trace), gpu_of(trace, None, ROCM_TRACE)
    rows = []
    for n in ROCM_COUNTS:
        t = time.perf_counter()
        p = predict(trace, n)
        seconds = time.perf_counter() - t
        exact = replace(settings_for(gpu, n, "breadth", _api_ns(trace)), max_groups=0)
        t = time.perf_counter()
        total = simulate(w, exact).total
        rows.append({"n": n, "ops": n * len(p.workload), "seconds": seconds, "predicted_ms": p.total_ns / 1e6,
                     "speedup": p.speedup, "exact_ms": total / 1e6, "exact_seconds": time.perf_counter() - t,
                     "assumed": p.undimensioned})  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(REPO / "bench" / "results"))
    ap.add_argument("--recorded", metavar="DIR", help="also the runs bench/record_streams.py recorded in DIR")
    args = ap.parse_args(argv)

    pairs = []
    if args.recorded:
        pairs += recorded_pairs(Path(args.recorded))
    if (DATA / "nvprof").is_dir():
        pairs += [(DATA / "nvprof" / a, DATA / "nvprof" / b, n, o, e) for a, b, n, o, e in NVPROF_PAIRS]
    info = machine_info()
    acc = accuracy(pairs)
    read, spd = speed() if (DATA / SPEED_TRACE).exists() else (0.0, [])
    rocm = rocm_speed() if (DATA / ROCM_TRACE).exists() else []

    lines = [
        f"# gpuan streams benchmark, {dt.date.today()} on {info['cpu']} ({info['cores']} cores)"
        + (f" with an {info['gpu']}" if info.get("gpu") else ""),
        f"commit {git_commit()}; {versions(('gpuan', 'numpy', 'pyarrow'), ('torch',))}",
        "",
        "## Accuracy: predicted vs measured end time",
        "",
        "| 1-stream trace | measured trace | N | order | device | predicted | measured | gpuan error "
        "| research model's error |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in acc:
        anchor = f"{r['anchor'] * 100:+.1f}%" if r["anchor"] is not None else "-"
        lines.append(f"| {r['trace']} | {r['measured_trace']} | {r['n']} | {r['order']} | {r['device']} | "
                     f"{r['predicted_ms']:.3f} ms | {r['measured_ms']:.3f} ms | {r['error'] * 100:+.2f}% "
                     f"| {anchor} |")  # fmt: skip
    lines += [
        "",
        f"## Speed: simulating N copies of {SPEED_TRACE} stream {SPEED_STREAM} (one run each)",
        "",
        f"Anchor: reading the trace (gpuan, no cache) took {read:.3f} s in this run.",
        "",
        "| N | operations | seconds | x the read | operations/s | predicted speed-up |",
        "|---|---|---|---|---|---|",
    ]
    for r in spd:
        lines.append(f"| {r['n']} | {r['ops']:,} | {r['seconds']:.3f} | {r['seconds'] / read:.2f} | "
                     f"{r['ops_per_s']:,.0f} | {r['speedup']:.2f}x |")  # fmt: skip
    lines += [
        "",
        f"## Speed: {ROCM_TRACE} (MI300X) on N streams (one run each)",
        "",
        "Limited: at most 32 groups of blocks per kernel (the default); exact: no limit.",
        "",
        "| N | operations | seconds | predicted | speed-up | exact: predicted | difference | exact: seconds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rocm:
        lines.append(f"| {r['n']} | {r['ops']:,} | {r['seconds']:.2f} | {r['predicted_ms']:.3f} ms | "
                     f"{r['speedup']:.2f}x | {r['exact_ms']:.3f} ms | {r['predicted_ms'] / r['exact_ms'] - 1:+.3%} | "
                     f"{r['exact_seconds']:.2f} |")  # fmt: skip
    text = "\n".join(lines) + "\n"
    print(text)
    save_report(args.out, "streams", info, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
