"""Benchmark of ``gpuan fleet`` on a synthetic run of 64 ranks, as one process (P = 1, no MPI) and as an MPI
job of two (P = 2, ``mpiexec -n 2``).

    python3 bench/fleet.py [--ranks 64] [--events 20000] [--steps 20] [--repeat 5] [--out bench/results]

The run (``gpuan.synth.ranks.plan(..., repeat=True)``: every step one kernel sequence, all-reduces after it,
a slow kernel and an idle gap planted at known (rank, step, position)) is written once as Parquet event
tables into ``--dir`` (kept between runs, never in the repository). Every measurement is a fresh process
(``python -m gpuan fleet RUN --format json``, under ``mpiexec -n 2`` for P = 2) timed from outside with a
wall clock: the **first call** with an empty numba cache (``NUMBA_CACHE_DIR`` a new empty directory: it
compiles the cycle detection's kernels), then ``--repeat`` calls with the cache warm, of which the table
gives the median and the spread (min-max), never the best. Anchors in the same run, measured the same
way: a bare interpreter (``python -c pass``; under ``mpiexec -n 2`` for P = 2) and ``gpuan replay`` on the
same run, which fleet runs inside itself (its waits are what fleet takes out of each step). The report
checks that P = 2 prints what P = 1 prints and that the planted slow steps are the two slowest found.

A Markdown report goes to <out>/fleet-<date>-<machine>.md with the machine, date, commit and the load
average before and after (the machine may be shared).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest import git_commit, machine_info, save_report, versions  # noqa: E402

DEFAULT_DIR = Path(tempfile.gettempdir()) / "gpuan-bench-fleet"


def _command(args: list[str], procs: int) -> tuple[list[str], dict]:
    """Return the command line and environment of a fresh process (P = 1: no MPI; else under mpiexec)."""
    env = dict(os.environ)
    if procs == 1:
        env["GPUAN_MPI"] = "0"
        return [sys.executable, *args], env
    env.pop("GPUAN_MPI", None)
    return [shutil.which("mpiexec") or "mpiexec", "-n", str(procs), sys.executable, *args], env


def _timed(args: list[str], procs: int, env_extra: dict | None = None) -> tuple[float, str]:
    """Return (wall seconds, stdout) of one fresh process; exits with its stderr if it fails."""
    cmd, env = _command(args, procs)
    env.update(env_extra or {})
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{p.stderr}")
    return wall, p.stdout


def _series(args: list[str], procs: int, repeat: int) -> dict:
    """Return the median, min, max wall seconds of `repeat` warm fresh processes, and the last stdout."""
    times, out = [], ""
    for _ in range(repeat):
        wall, out = _timed(args, procs)
        times.append(wall)
    return {"median": statistics.median(times), "min": min(times), "max": max(times), "out": out}


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--events", type=int, default=20_000, help="events per rank")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=5, help="warm fresh processes per row (default 5)")
    ap.add_argument("--procs", default="1,2")
    ap.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    ap.add_argument("--out", default="bench/results")
    args = ap.parse_args()

    from gpuan.synth.ranks import plan, write_run

    slow_kernel = (args.steps // 2, args.ranks // 3, 50, 30_000_000)
    idle_gap = (args.steps - 1, args.ranks - 1, 7, 20_000_000)
    run_dir = args.dir / f"r{args.ranks}-e{args.events}-s{args.steps}"
    if not run_dir.is_dir():
        t = time.perf_counter()
        p = plan(args.ranks, args.steps, args.events, repeat=True, slow_kernels=(slow_kernel,),
                 idle_gaps=(idle_gap,), seed=11)  # fmt: skip
        write_run(p, run_dir)
        print(f"wrote {args.ranks} ranks to {run_dir} in {time.perf_counter() - t:.1f} s", file=sys.stderr)

    info, load_before = machine_info(), _load()
    fleet = ["-m", "gpuan", "fleet", str(run_dir), "--format", "json"]
    replay = ["-m", "gpuan", "replay", str(run_dir), "--format", "json"]
    rows, documents = [], {}
    for n in [int(x) for x in args.procs.split(",")]:
        with tempfile.TemporaryDirectory() as cache:
            first, _ = _timed(fleet, n, {"NUMBA_CACHE_DIR": cache})
        _timed(fleet, n)  # the numba cache of this checkout, warm for the series
        warm = _series(fleet, n, args.repeat)
        start = _series(["-c", "pass"], n, args.repeat)
        replayed = _series(replay, n, args.repeat)
        documents[n] = json.loads(warm["out"])
        rows.append({"procs": n, "first": first, "fleet": warm, "start": start, "replay": replayed})
        print(f"P={n}: fleet {warm['median']:.2f} s (first call {first:.2f} s), replay {replayed['median']:.2f} s, "
              f"process start {start['median']:.2f} s", file=sys.stderr)  # fmt: skip
    load_after = _load()

    base = documents[rows[0]["procs"]]
    for doc in documents.values():
        doc["summary"].pop("processes")
    same = {n: doc == base for n, doc in documents.items()}
    found = [(s["rank"], s["step"]) for s in base["slowest"][:2]]
    planted = {(idle_gap[1], idle_gap[0]), (slow_kernel[1], slow_kernel[0])}
    events = sum(r["events"] for r in base["ranks"])
    vers = ", ".join(f"{k} {v}" for k, v in versions(("gpuan", "numpy", "pandas", "pyarrow", "numba", "mpi4py"),
                                                      ("mpich",)).items())  # fmt: skip

    def spread(s: dict) -> str:
        return f"{s['median']:.2f} ({s['min']:.2f}-{s['max']:.2f})"

    lines = [
        f"# gpuan fleet benchmark, {time.strftime('%Y-%m-%d')} on {info['cpu']} ({info['cores']} cores)",
        f"commit {git_commit()}; {vers}; load average before {load_before}, after {load_after}",
        "",
        f"{args.ranks} synthetic ranks x {args.events:,} events ({events:,} kernels in the step sequences, "
        f"{args.steps} steps of {base['ranks'][0]['length']:,} kernels and all-reduces), Parquet event tables; "
        f"planted: a {slow_kernel[3] / 1e6:.0f} ms slower kernel at (rank, step, position) "
        f"({slow_kernel[1]}, {slow_kernel[0]}, {slow_kernel[2]}) and {idle_gap[3] / 1e6:.0f} ms idle before "
        f"({idle_gap[1]}, {idle_gap[0]}, {idle_gap[2]}); the two slowest found: "
        f"{', '.join(map(str, found))} ({'as planted' if set(found) == planted else 'NOT as planted'}).",
        "",
        "Wall seconds of fresh processes from outside (interpreter start, imports, reading the 64 ranks, cycle "
        f"detection, replay, the exchanges, the report): median of {args.repeat} with the numba cache warm "
        "(min-max), and the first call with an empty numba cache. Anchors measured the same way in the same run: "
        "a bare interpreter (`python -c pass`, under `mpiexec -n 2` for P = 2) and `gpuan replay` on the same run.",
        "",
        "| P | fleet s (median, min-max) | first call s | process start s | fleet - start s | replay s | "
        "fleet / replay | output equals P=1 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        f, s, rp = r["fleet"], r["start"], r["replay"]
        lines.append(
            f"| {r['procs']} | {spread(f)} | {r['first']:.2f} | {spread(s)} | {f['median'] - s['median']:.2f} | "
            f"{spread(rp)} | {f['median'] / rp['median']:.2f}x | {'yes' if same[r['procs']] else 'NO'} |"
        )
    if len(rows) > 1:
        one, two = rows[0], rows[1]
        work1 = one["fleet"]["median"] - one["start"]["median"]
        work2 = two["fleet"]["median"] - two["start"]["median"]
        replay_ratio = one["replay"]["median"] / two["replay"]["median"]
        lines += [
            "",
            f"P = {two['procs']} against P = {one['procs']}: {one['fleet']['median'] / two['fleet']['median']:.2f}x "
            f"the speed from the prompt, {work1 / work2:.2f}x past process start (replay on the same run: "
            f"{replay_ratio:.2f}x). This machine has {info['cores']} cores, which other sessions may share (see the "
            "load average); each process imports numpy, pandas, pyarrow and numba, and process 0 alone compares "
            "the gathered records and writes the report.",
        ]
    text = "\n".join(lines) + "\n"
    print(text)
    print(f"wrote {save_report(args.out, 'fleet', info, text)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
