"""Projected Parquet reads (issue 22): what `gpuan info|cycles|sol` cost on a converted trace when each reads
only its columns and the row groups of its kinds, against a checkout that reads the whole table.

A trace of ../shared/tools/gen_kineto_trace.py (PyTorch 2.x layout) is converted by each checkout; then
each command runs on that checkout's Parquet file in fresh processes, alternating with the baseline
checkout (``--baseline DIR``, a copy of the package at an older commit, run with PYTHONPATH=DIR) so both
see the same load. Reported: median wall and CPU seconds, median peak RSS, and whether the two printed the
same report.

    git archive 122537a gpuan | tar -x -C /tmp/head     # a baseline that reads whole tables
    scripts/with-venv --test python bench/parquet_reads.py --size-mb 2048 --baseline /tmp/head --repeat 3
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest import ensure_gen_trace, gen_trace_arguments, git_commit, machine_info, save_report  # noqa: E402  (shared helpers of the benchmarks)

COMMANDS = (["info"], ["cycles"], ["sol"])


def one_run(argv: list[str], baseline: Path | None = None) -> tuple[float, float, float, bytes]:
    """Return wall seconds, CPU seconds, peak RSS in MB and stdout of one fresh run of `argv` (of the
    `baseline` checkout's gpuan: ``python -m`` imports the package of its working directory first)."""
    env = {**os.environ, "PYTHONPATH": str(baseline)} if baseline else None
    start = time.perf_counter()
    with open(os.devnull, "wb") as null:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=null, env=env, cwd=baseline or REPO)
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}")
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out


def measure(command: list[str], files: dict[Path | None, Path], baseline: Path | None, repeat: int) -> dict:
    """Run `command` on this checkout's Parquet file (``files[None]``) `repeat` times (after an untimed run),
    alternating with the baseline on its own file (``files[baseline]``: its format may differ)."""
    argv = [sys.executable, "-m", "gpuan", *command, str(files[None])]
    argv0 = [sys.executable, "-m", "gpuan", *command, str(files[baseline])] if baseline else []
    one_run(argv)
    if baseline:
        one_run(argv0, baseline)
    new, old, outs = [], [], set()
    for _ in range(repeat):
        *m, out = one_run(argv)
        new.append(m)
        if baseline:
            *m, out_old = one_run(argv0, baseline)
            old.append(m)
            outs.add(out_old)
        outs.add(out)
    med = lambda rows, i: statistics.median(r[i] for r in rows)  # noqa: E731
    row = {"command": " ".join(command), "wall": med(new, 0), "cpu": med(new, 1), "rss": med(new, 2)}
    if baseline:
        row |= {"wall0": med(old, 0), "cpu0": med(old, 1), "rss0": med(old, 2), "same": len(outs) == 1}
    print(row, flush=True)
    return row


def main() -> None:
    args = gen_trace_arguments(__doc__.splitlines()[0], size_mb=2048, repeat=3).parse_args()
    d = Path(args.dir)
    trace = ensure_gen_trace(d, args.size_mb)
    baseline = Path(args.baseline).resolve() if args.baseline else None
    # each checkout converts the trace itself, every run: a file of another format (or an older run's) would
    # be misread, or refused
    files = {}
    checkouts = {None: "this", baseline: "baseline"} if baseline else {None: "this"}
    for checkout, name in checkouts.items():
        files[checkout] = d / f"kineto_gen_{args.size_mb}mb.{name}.parquet"
        env = {**os.environ, "PYTHONPATH": str(checkout or REPO)}
        convert = [sys.executable, "-m", "gpuan", "convert", str(trace), "-o", str(files[checkout])]
        subprocess.run(convert, check=True, env=env, cwd=checkout or REPO)
    parquet = files[None]
    load0 = os.getloadavg()
    rows = [measure(c, files, baseline, args.repeat) for c in COMMANDS]
    load1 = os.getloadavg()
    machine = machine_info()
    lines = [
        f"# Projected Parquet reads, {date.today()} on {machine['cpu']} ({machine['cores']} cores)",
        "",
        f"Commit {git_commit()}; baseline {args.baseline_name or args.baseline or 'none'}. "
        "Written by bench/parquet_reads.py.",
        f"Load average before {load0[0]:.1f}, after {load1[0]:.1f} (a shared machine).",
        "",
        f"Trace: gen_kineto_trace.py --size-mb {args.size_mb} ({trace.stat().st_size / 1e9:.2f} GB JSON), "
        f"converted to {parquet.stat().st_size / 1e6:.1f} MB of Parquet. Medians of {args.repeat} fresh processes "
        "per command, alternating with the baseline.",
        "",
        "| command | wall s | CPU s | peak RSS MB | baseline wall s | baseline CPU s | baseline peak RSS MB "
        "| same report |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        base = ["–"] * 4
        if baseline:
            base = [f"{r['wall0']:.2f}", f"{r['cpu0']:.2f}", f"{r['rss0']:.0f}", "yes" if r["same"] else "NO"]
        lines.append(
            f"| gpuan {r['command']} | {r['wall']:.2f} | {r['cpu']:.2f} | {r['rss']:.0f} | " + " | ".join(base) + " |"
        )
    print(f"wrote {save_report(args.out, 'parquet-reads', machine, chr(10).join(lines) + chr(10))}")


if __name__ == "__main__":
    main()
