"""Stream-overlap prediction: accuracy against measured runs, and simulation speed.

    python bench/streams.py [--runs 5] [--cold-cache] [--out bench/results]   # accuracy (nvprof), speed
    python bench/streams.py --recorded DIR               # also the runs bench/record_streams.py made
    python bench/streams.py --only-cold [--baseline DIR] [--runs 3]   # first calls, empty numba cache

Accuracy: each 1-stream trace is predicted for the stream count (and launch order) of its measured
partner and the error of the predicted end time is printed; for the nvprof pairs beside the research
model's error on the same files (the anchor). ``--recorded DIR`` adds the runs that
``bench/record_streams.py DIR`` recorded on a GPU (its manifest.json says which trace predicts which).

Speed: the simulation of N copies of the largest single stream of ../shared/data (v100_rank0, stream 7:
6,095 kernels and copies) for N = 1, 2, 4, 8, 16, against the time to read that trace in the same
processes. Then the ROCm SD-3.5 inference (mi300x_xdit_sd35_rank0, 8,066 operations, kernels that split
into hundreds of groups of blocks) for N = 2, 4, 8, 16, each also without the limit on groups per kernel
(``max_groups=0``, the exact timeline) to show what the limit moves. Every N of each is timed in
``--runs`` fresh processes (bench/timing.py): in each, the trace is read (timed: the first read loads the
JSON scanner's numba code), then the first prediction is timed apart (it loads the event loop's numba
code: what ``gpuan streams TRACE --streams N`` pays after the read) and one warm call after it (none
where the first took over a minute); a row gives the median first call, their min-max and the median
warm call. ``--cold-cache`` adds one process (v100, N = 1) with numba's cache in an empty directory:
the scanner and the event loop compile in their first calls. ``--only-cold`` measures only that, in
``--runs`` processes, each followed by one of the ``--baseline`` checkout's gpuan (run from it, with an empty
cache of its own) where one is given: a report streams-cold-<date>-<machine>.md.

A Markdown table goes to <out>/streams-<date>-<machine>.md with the machine, date and commit.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest import git_commit, machine_info, save_report, versions  # noqa: E402  (shared helpers of the benchmarks)
from timing import (  # noqa: E402  (how every benchmark times: fresh processes, the first call apart)
    DEFAULT_RUNS,
    FreshRunError,
    alternating,
    checkout_commit,
    checkout_env,
    cold_cache_run,
    completed,
    emit,
    first_and_warm,
    fresh_runs,
    method_note,
    numba_note,
    spread,
    warm_median,
)

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
CHILD_TIMEOUT_S = 1800
WARM_UNDER_S = 60.0  # no warm call after a first call longer than this (the exact N = 16 timeline: ~90 s)


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


def _first_and_maybe_warm(fn):
    """Time the first call of `fn` and, where it took under WARM_UNDER_S, one warm call."""
    first, _, out = first_and_warm(fn, warm=0)
    if first >= WARM_UNDER_S:
        return first, [], out
    out = None
    warm, _, out = first_and_warm(fn, warm=0)
    return first, [warm], out


def child(kind: str, n: int) -> None:
    """In a fresh process: read the trace of `kind` (timed, first and warm), then time predicting it on `n`
    streams (``v100``: stream 7's copies; ``rocm``: the SD-3.5 trace, limited groups; ``rocm-exact``: its
    exact timeline, ``max_groups=0``), the first call apart; print the tagged result line."""
    path = DATA / (SPEED_TRACE if kind == "v100" else ROCM_TRACE)
    read_first, read_warm, trace = first_and_warm(lambda: load(path))
    out = {"kind": kind, "n": n, "read_first_s": read_first, "read_warm_s": read_warm}
    if kind == "v100":
        first, warm, p = _first_and_maybe_warm(lambda: predict(trace, n, stream=SPEED_STREAM))
        out.update(ops=n * len(p.workload), speedup=p.speedup)
    elif kind == "rocm":
        first, warm, p = _first_and_maybe_warm(lambda: predict(trace, n))
        out.update(ops=n * len(p.workload), speedup=p.speedup, predicted_ms=p.total_ns / 1e6, assumed=p.undimensioned)
    else:
        from dataclasses import replace

        from gpuan.streams.predict import _api_ns, gpu_of, settings_for
        from gpuan.streams.simulate import simulate
        from gpuan.streams.workload import workload

        w, gpu = workload(trace), gpu_of(trace, None, ROCM_TRACE)
        exact = replace(settings_for(gpu, n, "breadth", _api_ns(trace)), max_groups=0)
        first, warm, total = _first_and_maybe_warm(lambda: simulate(w, exact).total)
        out.update(exact_ms=total / 1e6)
    emit({**out, "first_s": first, "warm_s": warm})


def speed_runs(kind: str, counts: tuple[int, ...], args: argparse.Namespace) -> dict[int, list[dict]]:
    """Return, per N of `counts`, the results of `args.runs` fresh processes of `kind` (an error text where
    they failed)."""
    env = checkout_env(REPO)
    out = {}
    for n in counts:
        print(f"  {kind}, N = {n} ({args.runs} fresh processes) ...", end="", flush=True)
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", kind, str(n)]
        try:
            out[n] = fresh_runs(cmd, args.runs, env=env, cwd=REPO, timeout=CHILD_TIMEOUT_S,
                                echo=lambda r: f"{r['first_s']:.3f}")  # fmt: skip
            print(" s (first calls)")
        except FreshRunError as e:
            print(f" failed: {e}")
            out[n] = str(e)
    return out


def cold_run(checkout: Path = REPO) -> dict | str:
    """One process (v100, N = 1) with the gpuan of `checkout` and numba's cache in an empty directory; its
    result or why it failed."""
    env = checkout_env(checkout)
    print(f"  v100, N = 1, cold cache, {checkout} ...", end="", flush=True)
    try:
        r = cold_cache_run([sys.executable, str(Path(__file__).resolve()), "--child", "v100", "1"], env=env,
                           cwd=checkout, timeout=CHILD_TIMEOUT_S)  # fmt: skip
    except FreshRunError as e:
        print(f" failed: {e}")
        return str(e)
    print(f" read {r['read_first_s']:.3f} s, predict {r['first_s']:.3f} s (first calls)")
    return r


def cold_only(args: argparse.Namespace) -> int:
    """``--only-cold``: `args.runs` first calls with an empty numba cache, each followed by the baseline's
    where one is given; print and save the report."""
    base = Path(args.baseline).resolve() if args.baseline else None
    runs = alternating(cold_run, args.runs, REPO, base)
    info = machine_info()
    lines = [
        f"# gpuan streams, first calls with an empty numba cache, {dt.date.today()} on {info['cpu']} "
        f"({info['cores']} cores)",
        f"commit {git_commit()}; {versions(('gpuan', 'numpy', 'pyarrow', 'numba'))}",
        f"baseline: {base} ({args.baseline_name or checkout_commit(base)})" if base else "no baseline",
        "",
        f"`{SPEED_TRACE}` stream {SPEED_STREAM}, N = 1: each process reads the trace (the JSON scanner "
        "compiles) and predicts once (the stream simulator's event loop compiles), with NUMBA_CACHE_DIR a new "
        f"empty directory; {args.runs} processes per checkout, alternating (this checkout first). A median of "
        "each, every run listed.",
        "",
        "| checkout | first read s, median | first prediction s, median | runs (read / prediction) |",
        "|---|---:|---:|---|",
    ]
    for name, rows in runs.items():
        done, failure = completed(rows)
        if failure:
            lines.append(f"| {name} | failed: {failure} | | |")
        if not done:
            continue
        read, first = spread([r["read_first_s"] for r in done]), spread([r["first_s"] for r in done])
        each = ", ".join(f"{r['read_first_s']:.1f} / {r['first_s']:.1f}" for r in done)
        lines.append(f"| {name} | {read.median:.1f} | {first.median:.1f} | {each} |")
    text = "\n".join(lines) + "\n"
    print(text)
    save_report(args.out, "streams-cold", info, text)
    return 0


def _counts(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(REPO / "bench" / "results"))
    ap.add_argument("--recorded", metavar="DIR", help="also the runs bench/record_streams.py recorded in DIR")
    ap.add_argument("--runs", type=int, default=DEFAULT_RUNS, help=f"fresh processes per N (default {DEFAULT_RUNS})")
    ap.add_argument(
        "--cold-cache", action="store_true", help="one more process (v100, N = 1) with an empty numba cache"
    )
    ap.add_argument("--counts", default=",".join(map(str, SPEED_COUNTS)), help="stream counts of the v100 speed rows")
    ap.add_argument("--rocm-counts", default=",".join(map(str, ROCM_COUNTS)), help="stream counts of the SD-3.5 rows")
    ap.add_argument("--only-cold", action="store_true", help="only first calls with an empty numba cache")
    ap.add_argument("--baseline", metavar="DIR", help="with --only-cold: a checkout to alternate with")
    ap.add_argument("--baseline-name", help="what to call the baseline in the report (default: its git commit)")
    ap.add_argument("--child", nargs=2, metavar=("KIND", "N"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child[0], int(args.child[1]))
        return 0
    if args.only_cold:
        return cold_only(args)
    if args.baseline or args.baseline_name:
        ap.error("--baseline and --baseline-name go with --only-cold")

    pairs = []
    if args.recorded:
        pairs += recorded_pairs(Path(args.recorded))
    if (DATA / "nvprof").is_dir():
        pairs += [(DATA / "nvprof" / a, DATA / "nvprof" / b, n, o, e) for a, b, n, o, e in NVPROF_PAIRS]
    info = machine_info()
    acc = accuracy(pairs)
    spd = speed_runs("v100", _counts(args.counts), args) if (DATA / SPEED_TRACE).exists() else {}
    rocm, exact = {}, {}
    if (DATA / ROCM_TRACE).exists():
        rocm = speed_runs("rocm", _counts(args.rocm_counts), args)
        exact = speed_runs("rocm-exact", _counts(args.rocm_counts), args)
    cold = cold_run() if args.cold_cache and (DATA / SPEED_TRACE).exists() else None

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
    reads = [r for runs in spd.values() if isinstance(runs, list) for r in runs]
    read = spread([r["read_first_s"] for r in reads]) if reads else None
    lines += [
        "",
        f"## Speed: simulating N copies of {SPEED_TRACE} stream {SPEED_STREAM}",
        "",
        "The timed function is `gpuan.streams.predict(trace, N, stream=7)` on the trace read before in the same "
        "process; " + method_note(args.runs, "the second call in the same process"),
        "",
    ]
    if read is not None:
        lines += [
            f"Anchor: reading the trace (gpuan, no cache) in the same {read.n} processes: first read "
            f"{read.cell()} s (it loads the JSON scanner's numba code), warm read "
            f"{warm_median(reads, 'read_warm_s'):.3f} s.",
            "",
        ]
    lines += [
        "| N | operations | first call s, median (min–max) | warm s | x the first read | operations/s (first) "
        "| predicted speed-up |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for n, runs in spd.items():
        if not isinstance(runs, list):
            lines.append(f"| {n} | | failed: {runs} | | | | |")
            continue
        first, warm, r = spread([x["first_s"] for x in runs]), warm_median(runs), runs[0]
        lines.append(f"| {n} | {r['ops']:,} | {first.cell()} | {_s(warm)} | {first.median / read.median:.2f} | "
                     f"{r['ops'] / first.median:,.0f} | {r['speedup']:.2f}x |")  # fmt: skip
    if spd:
        lines += ["", f"numba: {numba_note(reads)}."]
    if cold is not None:
        lines += [
            "",
            f"Cold cache (one process, N = 1, empty NUMBA_CACHE_DIR): first read {cold['read_first_s']:.3f} s "
            f"(the scanner compiles), first prediction {cold['first_s']:.3f} s (the event loop compiles)"
            if isinstance(cold, dict)
            else f"Cold cache run failed: {cold}",
        ]
    lines += [
        "",
        f"## Speed: {ROCM_TRACE} (MI300X) on N streams",
        "",
        "Limited: at most 32 groups of blocks per kernel (the default), `predict(trace, N)`; exact: no limit, "
        "`simulate(workload, settings with max_groups=0)`, in processes of its own. Each in "
        f"{args.runs} fresh processes, the first call apart; warm: the second call in the same process (none "
        f"after a first call over {WARM_UNDER_S:.0f} s).",
        "",
        "| N | operations | first call s, median (min–max) | warm s | predicted | speed-up | exact: predicted "
        "| difference | exact: first call s, median (min–max) | exact: warm s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n, runs in rocm.items():
        ex = exact.get(n)
        if not isinstance(runs, list) or not isinstance(ex, list):
            lines.append(f"| {n} | | failed: {runs if not isinstance(runs, list) else ex} | | | | | | | |")
            continue
        first, r = spread([x["first_s"] for x in runs]), runs[0]
        ex_first, exact_ms = spread([x["first_s"] for x in ex]), ex[0]["exact_ms"]
        diff = r["predicted_ms"] / exact_ms - 1
        lines.append(f"| {n} | {r['ops']:,} | {first.cell(2)} | {_s(warm_median(runs), 2)} "
                     f"| {r['predicted_ms']:.3f} ms | {r['speedup']:.2f}x | {exact_ms:.3f} ms | {diff:+.3%} "
                     f"| {ex_first.cell(2)} | {_s(warm_median(ex), 2)} |")  # fmt: skip
    text = "\n".join(lines) + "\n"
    print(text)
    save_report(args.out, "streams", info, text)
    return 0


def _s(seconds: float | None, digits: int = 3) -> str:
    return "-" if seconds is None else f"{seconds:.{digits}f}"


if __name__ == "__main__":
    sys.exit(main())
