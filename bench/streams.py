"""Stream-overlap prediction: accuracy against measured runs, and simulation speed.

    python bench/streams.py [--out bench/results]              # accuracy on ../shared/data/nvprof, speed
    python bench/streams.py --record DIR [--streams 2,4,8]     # on a GPU: record, predict, compare

Accuracy: each 1-stream trace is predicted for the stream count of its measured partner and the error of
the predicted end time is printed beside the research model's (the anchor: its errors on the same files).
With ``--record`` (needs torch and a CUDA GPU) the script first records, with the PyTorch profiler, a
1-stream run and N-stream runs of the same per-stream work (a pinned H2D copy, a kernel, a pinned D2H
copy; issued breadth-first from one host thread), saves them gzipped under DIR, and predicts each N from
the 1-stream trace.

Speed: the simulation of N copies of the largest single stream of ../shared/data (v100_rank0, stream 7:
6,095 kernels and copies) for N = 1, 2, 4, 8, 16 (one run each, after one untimed run that compiles
the event loop), against the time to read that trace in the same run.

A Markdown table goes to <out>/streams-<date>-<machine>.md with the machine, date and commit.
"""

from __future__ import annotations

import argparse
import datetime as dt
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


#: (1-stream file, measured N-stream file, N, the research model's error on that pair)
NVPROF_PAIRS = (
    ("mem_mem_1stream_10M.csv", "mem_mem_2stream_10M_h2d_h2d_ovlp.csv", 2, -0.036),
    ("mem_mem_1stream_23000.csv", "mem_mem_2stream_23000.csv", 2, +0.087),
)
SPEED_TRACE, SPEED_STREAM = "kineto/v100_rank0_ns_resolution.json.gz", 7
#: the block-completion events multiply as more GPU-filling kernels interleave (1.2M at N = 4)
SPEED_COUNTS = (1, 2, 4, 8, 16)
ELEMENTS = 1 << 24  # 64 MiB of float32 per copy


def accuracy(pairs) -> list[dict]:
    """Return one row per (1-stream, measured) pair: predicted, measured, error, anchor error."""
    rows = []
    for one, many, n, anchor in pairs:
        p = predict(load(one), n)
        c = check(p, load(many), str(many))
        rows.append({"trace": Path(one).name, "n": n, "predicted_ms": p.total_ns / 1e6,
                     "measured_ms": c.measured_ns / 1e6, "error": c.error, "anchor": anchor,
                     "device": p.settings.gpu.name})  # fmt: skip
    return rows


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


def record(out: Path, counts: list[int]) -> list[tuple[Path, Path, int, None]]:
    """Record the 1-stream and N-stream runs on the GPU with the PyTorch profiler; return the pairs."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    out.mkdir(parents=True, exist_ok=True)

    def run(n: int) -> Path:
        streams = [torch.cuda.Stream() for _ in range(n)]
        host = [torch.randn(ELEMENTS).pin_memory() for _ in range(n)]
        back = [torch.empty(ELEMENTS).pin_memory() for _ in range(n)]
        dev = [torch.empty(ELEMENTS, device="cuda") for _ in range(n)]
        res = [torch.empty(ELEMENTS, device="cuda") for _ in range(n)]
        for _ in range(2):  # warm-up: allocator, kernels loaded
            for s in range(n):
                with torch.cuda.stream(streams[s]):
                    dev[s].copy_(host[s], non_blocking=True)
                    torch.mul(dev[s], 2.0, out=res[s])
                    back[s].copy_(res[s], non_blocking=True)
            torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for s in range(n):  # breadth-first: the copies of every stream, then the kernels, then back
                with torch.cuda.stream(streams[s]):
                    dev[s].copy_(host[s], non_blocking=True)
            for s in range(n):
                with torch.cuda.stream(streams[s]):
                    torch.mul(dev[s], 2.0, out=res[s])
            for s in range(n):
                with torch.cuda.stream(streams[s]):
                    back[s].copy_(res[s], non_blocking=True)
            torch.cuda.synchronize()
        path = out / f"h2d_kernel_d2h_{n}stream.json"
        prof.export_chrome_trace(str(path))
        import gzip
        import shutil

        with open(path, "rb") as src, gzip.open(f"{path}.gz", "wb") as dst:
            shutil.copyfileobj(src, dst)
        path.unlink()
        return Path(f"{path}.gz")

    one = run(1)
    return [(one, run(n), n, None) for n in counts]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(REPO / "bench" / "results"))
    ap.add_argument("--record", metavar="DIR", help="record 1- and N-stream runs on this GPU first")
    ap.add_argument("--streams", default="2,4,8", help="stream counts to record (default 2,4,8)")
    args = ap.parse_args(argv)

    pairs = [(DATA / "nvprof" / a, DATA / "nvprof" / b, n, e) for a, b, n, e in NVPROF_PAIRS]
    if args.record:
        pairs = record(Path(args.record), [int(x) for x in args.streams.split(",")]) + pairs
    info = machine_info()
    acc = accuracy(pairs)
    read, spd = speed()

    lines = [
        f"# gpuan streams benchmark, {dt.date.today()} on {info['cpu']} ({info['cores']} cores)",
        f"commit {git_commit()}; {versions(('gpuan', 'numpy', 'pyarrow'), ('torch',))}",
        "",
        "## Accuracy: predicted vs measured end time",
        "",
        "| 1-stream trace | N | device | predicted | measured | gpuan error | research model's error |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in acc:
        anchor = f"{r['anchor'] * 100:+.1f}%" if r["anchor"] is not None else "-"
        lines.append(f"| {r['trace']} | {r['n']} | {r['device']} | {r['predicted_ms']:.3f} ms | "
                     f"{r['measured_ms']:.3f} ms | {r['error'] * 100:+.2f}% | {anchor} |")  # fmt: skip
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
    text = "\n".join(lines) + "\n"
    print(text)
    save_report(args.out, "streams", info, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
