"""The Kineto table build alone (``gpuan.trace.kineto.events.build_trace``): the part of a file's load that
the scanner's threads do not share, and what keeps two threads below twice one (issue 22).

    python bench/build.py [--size-mb 1024] [--repeat 5] [--threads 1,2] [--baseline CHECKOUT] [--out bench/results]

The traces: ``../shared/tools/gen_kineto_trace.py``'s trace of ``--size-mb`` MB (kept in ``--dir``) and the
28 real traces of ``../shared/data/kineto`` (inflated into ``--dir``), as one group. Each row is ``--repeat``
fresh processes (bench/timing.py), after an untimed one that fills numba's cache; each scans the file(s)
untimed, then times ``build_trace`` of the rows scanned: the first call (numba's cache loaded, fresh memory)
and a warm second call, with the process's CPU seconds of the warm call (user + sys, all threads). With
``--baseline``, that checkout's build runs right after each of this checkout's, so both see the same load.
Medians, never a best of N.

A Markdown report goes to <out>/build-<date>-<machine>.md with the machine, date, commit and load average.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest import (  # noqa: E402  (shared helpers)
    ensure_gen_trace,
    ensure_real,
    gen_trace_arguments,
    git_commit,
    machine_info,
    machine_slug,
    real_traces_dir,
    save_report,
    versions,
)
from timing import alternating, checkout_commit, checkout_env, completed, emit, fresh_runs, median, spread  # noqa: E402

HERE = Path(__file__).resolve()
REPO = HERE.parents[1]


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def child(files: list[str], threads: int) -> None:
    """Scan every file, then time build_trace of them (summed), twice; emit the first and the warm call."""
    from gpuan.jit_cache import lighter_numba_start

    lighter_numba_start()
    from gpuan.trace.kineto.events import build_trace
    from gpuan.trace.kineto.reader import scan_file
    from gpuan.trace.memory import huge_pages, lean_memory

    calls = []
    for _ in range(2):
        wall = cpu = 0.0
        for f in files:
            with lean_memory():
                raw = scan_file(f, threads=threads)
                c, t = _cpu(), time.perf_counter()
                with huge_pages():  # as read_kineto builds
                    build_trace(raw, source=f, threads=threads)
                wall, cpu = wall + time.perf_counter() - t, cpu + _cpu() - c
            del raw
        calls.append((wall, cpu))
    emit({"first_s": calls[0][0], "warm_s": [calls[1][0]], "warm_cpu_s": calls[1][1]})


def main() -> int:
    ap = gen_trace_arguments(__doc__.split("\n\n")[0], 1024, 5)
    ap.add_argument("--threads", default="1,2", help="GPUAN_THREADS values, comma-separated")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[1:], int(args.child[0]))
        return 0

    cache = Path(args.dir)
    groups = {f"gen {args.size_mb} MB": [ensure_gen_trace(cache, args.size_mb)]}
    real = real_traces_dir()
    if real is not None:
        plain = ensure_real(cache, real)[0]
        groups[f"the {len(plain)} real traces"] = plain
    baseline = Path(args.baseline).resolve() if args.baseline else None
    info, load_before = machine_info(), os.getloadavg()[0]
    rows = []
    for name, files in groups.items():
        for n in [int(x) for x in args.threads.split(",")]:
            cmd = [sys.executable, str(HERE), "--child", str(n), *map(str, files)]
            print(f"{name}, {n} thread(s) ...", flush=True)
            for checkout in filter(None, (REPO, baseline)):  # untimed: numba's cache filled for the series
                fresh_runs(cmd, 1, env=checkout_env(checkout))
            runs = alternating(lambda checkout, cmd=cmd: fresh_runs(cmd, 1, env=checkout_env(checkout))[0],
                               args.repeat, REPO, baseline)  # fmt: skip
            rows.append((name, n, *(completed(runs[k])[0] for k in ("this", "baseline"))))
    load_after = os.getloadavg()[0]

    def cells(done: list[dict]) -> list[str]:
        if not done:
            return ["", "", "", ""]
        warm = spread([r["warm_s"][0] for r in done])
        cpu, first = median([r["warm_cpu_s"] for r in done]), median([r["first_s"] for r in done])
        return [f"{warm.median:.3f}", f"{warm.low:.3f}-{warm.high:.3f}", f"{cpu:.3f}", f"{first:.3f}"]

    base_name = args.baseline_name or (checkout_commit(baseline) if baseline else "")
    lines = [
        f"# Kineto table build (build_trace), {dt.date.today()}, {machine_slug(info)}",
        "",
        f"- machine: {info['cpu']}, {info['cores']} cores, {info['ram'] / 2**30:.1f} GiB RAM",
        f"- date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC; "
        f"load average (1 min) {load_before:.2f} before, {load_after:.2f} after",
        f"- git commit: {git_commit()}" + (f"; baseline: {base_name}, alternating" if baseline else ""),
        f"- versions: {', '.join(f'{k} {v}' for k, v in versions(('gpuan', 'numpy', 'pyarrow', 'numba')).items())}",
        f"- command: `python bench/build.py {' '.join(sys.argv[1:])}`",
        f"- method: {args.repeat} fresh processes a row; each scans its files untimed, then times build_trace of "
        "them, summed: the first call and a warm second call (its CPU seconds: user + sys, all threads). Medians.",
        "",
        "| trace | threads | warm s (median) | min-max | warm CPU s | first call s |"
        + (" baseline warm s | min-max | baseline CPU s | baseline first s | baseline / this |" if baseline else ""),
        "|---|---:|---:|---:|---:|---:|" + ("---:|---:|---:|---:|---:|" if baseline else ""),
    ]
    for name, n, this, base in rows:
        row = [name, str(n), *cells(this)]
        if baseline:
            warm = [median([r["warm_s"][0] for r in runs]) if runs else 0.0 for runs in (base, this)]
            row += [*cells(base), f"{warm[0] / warm[1]:.2f}x" if all(warm) else ""]
        lines.append("| " + " | ".join(row) + " |")
    path = save_report(args.out, "build", info, "\n".join(lines) + "\n")
    print("\n".join(lines[9:]))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
