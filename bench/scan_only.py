"""The compiled Kineto scanner alone: its CPU seconds over a whole JSON file in memory, one thread.

    python bench/scan_only.py FILE [--runs 4] [--scans 3] [--baseline DIR [--baseline-name NAME]]

Each fresh process reads FILE into memory, scans it once (numba's cached code loaded, pages touched), then
times `--scans` more scans of the whole ``traceEvents`` array by ``scanner.scan`` (the scratch rows reused,
the string tables fresh each time): process CPU seconds, its median reported. No reading, draining or table
build: what ``bench/ingest.py``'s profile calls the scanner's thread-seconds, without the rest of the reader
around it. With ``--baseline`` each process of this checkout is followed by one of the baseline's (its
gpuan first on PYTHONPATH), so both see the same load. A Markdown report goes to
<out>/scan-<date>-<machine>.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest import git_commit, machine_info, save_report, versions  # noqa: E402  (shared helpers)
from timing import FreshRunError, alternating, checkout_commit, checkout_env, completed, emit, fresh_runs  # noqa: E402

SCRATCH_ROWS = 1 << 16


def child(path: str, scans: int) -> None:
    """In this process: scan `path` once untimed, then `scans` times timed; emit the CPU seconds of each."""
    import numpy as np

    from gpuan.trace.kineto import scanner as sc
    from gpuan.trace.kineto.reader import StringTable

    data = np.fromfile(path, np.uint8)
    n = data.size
    buf = np.zeros(n + 64, np.uint8)  # the scanner's word reads look up to 16 bytes past the data
    buf[:n] = data
    del data
    kind, start = sc.find_events_array(buf, n)
    if kind <= 0:
        raise SystemExit(f"{path}: no traceEvents array in its head")
    b64 = sc.words(buf)
    o64 = np.empty((SCRATCH_ROWS, len(sc.F64)), np.int64)
    o32 = np.empty((SCRATCH_ROWS, len(sc.F32)), np.int32)

    def scan_all() -> int:
        table, pos, row, done = StringTable(), start, 0, 0
        while True:
            status, pos, row = sc.scan(buf, b64, pos, n, n, o64, o32, row, *table.arrays())
            if status == sc.GROW:
                table.grow()
            elif status == sc.FULL:
                done, row = done + row, 0
            elif status == sc.ARRAY_END:
                return done + row
            else:
                raise SystemExit(f"{path}: the scanner stopped with status {status} at byte {pos}")

    rows = scan_all()
    cpu = []
    for _ in range(scans):
        t = time.process_time()
        scan_all()
        cpu.append(time.process_time() - t)
    emit({"cpu_s": cpu, "rows": rows, "bytes": n})


def runs_of(checkout: Path, path: str, scans: int) -> dict | str:
    """One fresh process of `checkout`'s scanner over `path`; its result or why it failed."""
    print(f"  {checkout} ...", end="", flush=True)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--scans", str(scans), path]
    try:
        (r,) = fresh_runs(cmd, 1, env=checkout_env(checkout), cwd=checkout)
    except FreshRunError as e:
        print(f" failed: {e}")
        return str(e)
    print(" " + " ".join(f"{c:.2f}" for c in r["cpu_s"]) + " CPU-s")
    return r


def report(path: str, results: dict[str, list], names: dict[str, str], runs: int, scans: int) -> str:
    """Return the Markdown report of the runs of each checkout."""
    info = machine_info()
    lines = [
        f"# The Kineto scanner alone, {dt.date.today()} on {info['cpu']} ({info['cores']} cores)",
        f"commit {git_commit()}; {versions(('gpuan', 'numpy', 'numba'))}",
        "",
        f"`{path}`: `scanner.scan` over the whole file in memory, one thread; {runs} fresh processes per "
        f"checkout, alternating (this checkout first), each scanning once untimed and then {scans} times "
        "timed: the median of a process's timed scans in process CPU seconds; the median over processes "
        "reported, every process's median listed.",
        "",
        "| checkout | CPU s, median | MB/s | rows | each process's median |",
        "|---|---:|---:|---:|---|",
    ]
    medians = {}
    for key, rows in results.items():
        done, failure = completed(rows)
        if failure:
            lines.append(f"| {names[key]} | failed: {failure} | | | |")
        if not done:
            continue
        each = [statistics.median(r["cpu_s"]) for r in done]
        medians[key] = statistics.median(each)
        mb = done[0]["bytes"] / 1e6
        lines.append(
            f"| {names[key]} | {medians[key]:.2f} | {mb / medians[key]:,.0f} | {done[0]['rows']:,} | "
            + " ".join(f"{c:.2f}" for c in each)
            + " |"
        )
    if len(medians) == 2:
        lines += ["", f"baseline / this checkout: {medians['baseline'] / medians['this']:.2f}x"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path", help="a Kineto .json file (uncompressed)")
    ap.add_argument("--out", default=str(REPO / "bench" / "results"))
    ap.add_argument("--runs", type=int, default=4, help="fresh processes per checkout (default 4)")
    ap.add_argument("--scans", type=int, default=3, help="timed scans per process (default 3)")
    ap.add_argument("--baseline", metavar="DIR", help="another checkout to alternate with")
    ap.add_argument("--baseline-name", help="what to call the baseline in the report (default: its git commit)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    path = str(Path(args.path).resolve())
    if args.child:
        child(path, args.scans)
        return 0
    base = Path(args.baseline).resolve() if args.baseline else None
    results = alternating(lambda checkout: runs_of(checkout, path, args.scans), args.runs, REPO, base)
    names = {"this": "this checkout", "baseline": f"{base} ({args.baseline_name or checkout_commit(base)})"}
    text = report(path, results, names, args.runs, args.scans)
    print(text)
    print(f"wrote {save_report(args.out, 'scan', machine_info(), text)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
