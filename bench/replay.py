"""Benchmark of ``gpuan replay`` as an MPI job: synthetic per-rank traces (default 16 ranks x 1M events,
all-reduces with planted stragglers), replayed with P = 1, 2, 4 processes.

Every measured path runs in ``--runs`` fresh processes (bench/timing.py; for P > 1, fresh ``mpiexec``
jobs): in each, the first call of ``analyse(load_run(RUN_DIR))`` is timed apart (lazy imports, first
reads: what ``mpiexec -n P gpuan replay`` pays, less the interpreter's start and the imports) and one warm
call after it, the slowest process's wall time; a row gives the median first call, their min-max and the
median warm call. Reports per P: events/s, the time in exchanges, the peak RSS per process, parallel
efficiency against P = 1 (of the median first calls), and whether the tables equal the one-process
result in every run. Anchors measured the same way in the same run: reading the same Parquet files with
pandas (the I/O floor of any tool), and moving one million call records per process as typed buffers
(what gpuan does) against the same records as pickled Python objects.

With ``--device gpu`` the replay runs on the GPU engine (CuPy) and a second table times one all-to-all
of ``--exchange-records`` call records per process on every path this machine has, in the same run:
host numpy buffers (the CPU engine's), CuPy buffers staged through pinned host memory, and, where
available, CuPy buffers handed to a CUDA-aware MPI or sent through ucxx (GB/s per process; the first
all-to-all of each path apart, then the median of 3).

    python3 bench/replay.py [--ranks 16] [--events 1000000] [--procs 1,2,4] [--device cpu|gpu] [--runs 5]
                            [--out bench/results]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest import git_commit, machine_info, save_report, versions  # noqa: E402
from timing import (  # noqa: E402  (how every benchmark times: fresh processes, the first call apart)
    DEFAULT_RUNS,
    FreshRunError,
    emit,
    first_and_warm,
    fresh_runs,
    median,
    method_note,
    numba_note,
    spread,
)

CHILD_TIMEOUT_S = 1800


def child(run_dir: str, exchange_records: int, device: str) -> None:
    """Inside mpiexec (or alone): replay, the first call apart, then once more (warm); then time the
    typed-vs-pickled exchange and the exchange paths; process 0 prints the tagged result line."""
    import numpy as np

    from gpuan.engine.procs import from_launcher
    from gpuan.replay import analyse
    from gpuan.replay.comms import CALL
    from gpuan.trace.ranks import load_run

    me = from_launcher()

    def replay():
        if me.comm is not None:
            me.comm.Barrier()  # every process starts the call together: the slowest one's wall is the run's
        # every process lists the run itself: reading a few Parquet footers costs next to nothing
        return analyse(load_run(run_dir), procs=me, engine=device)

    first, _, r = first_and_warm(replay, warm=0)
    warm, _, _ = first_and_warm(replay, warm=0)
    walls = me.allgather_small({"first": first, "warm": warm})
    recs = np.zeros(exchange_records, CALL)
    recs["enter"] = np.arange(exchange_records)
    dest = np.arange(exchange_records) % me.size
    t = time.perf_counter()
    me.alltoallv(recs, dest)
    typed = time.perf_counter() - t
    pickled = None
    if me.comm is not None:
        rows = recs.tolist()  # tuples, as an object-per-event design would hold them
        parts = [rows[p :: me.size] for p in range(me.size)]
        me.comm.Barrier()
        t = time.perf_counter()
        me.comm.alltoall(parts)
        pickled = time.perf_counter() - t
    times = me.allgather_small({"typed": typed, "pickled": pickled})
    paths = _time_paths(me, recs, dest, device) if me.comm is not None else {}
    if me.is_root:
        tables = {name: frame.to_json(orient="records") for name, frame in r.to_pandas().items()}
        diagnostics = r.summary["diagnostics"]  # of the first call
        emit({"timings": diagnostics["per_process"], "first_s": max(w["first"] for w in walls),
              "warm_s": [max(w["warm"] for w in walls)], "exchange": times, "tables": tables, "paths": paths,
              "path": diagnostics["exchange"]})  # fmt: skip


def pandas_child(run_dir: str) -> None:
    """The anchor, in a fresh process: read every rank's Parquet file with pandas, the first time apart,
    then once more (warm); print the tagged result line."""
    import pandas as pd

    files = sorted(Path(run_dir).glob("rank*.parquet"))
    first, warm, rows = first_and_warm(lambda: sum(len(pd.read_parquet(f)) for f in files))
    emit({"first_s": first, "warm_s": warm, "rows": rows})


def _time_paths(me, recs, dest, device: str, repeats: int = 3) -> dict[str, dict]:
    """Return, per exchange path, the slowest process's seconds for one all-to-all of `recs` (as byte rows):
    the first (it warms the path up: pinned pool, endpoints) and the median of `repeats` after it; and
    whether every process received the host path's bytes."""
    import dataclasses

    from gpuan.engine.procs import cuda_aware_mpi, ucxx_available
    from gpuan.replay.records import Records

    rows = Records.of(recs).rows()
    expect = me.alltoallv(rows, dest)
    trials = {"host": (me, rows, dest)}
    if device == "gpu":
        import cupy

        on_gpu, gpu_dest = cupy.asarray(rows), cupy.asarray(dest)
        tried = ["host-staging"] + ["cuda-aware-mpi"] * cuda_aware_mpi() + ["ucxx"] * ucxx_available()
        for path in tried:
            trials[path] = (dataclasses.replace(me, device_path=path), on_gpu, gpu_dest)
    out = {}
    for path, (procs, buffer, where) in trials.items():
        times, same = [], True
        for _ in range(repeats + 1):  # the first warms the path up (pinned pool, endpoints)
            me.comm.Barrier()
            t = time.perf_counter()
            got = procs.alltoallv(buffer, where)
            if hasattr(got, "__cuda_array_interface__"):
                cupy.cuda.get_current_stream().synchronize()
            times.append(time.perf_counter() - t)
            same = same and bytes(got.get() if hasattr(got, "get") else got) == bytes(expect)
        first = max(me.allgather_small(times[0]))
        slowest = max(me.allgather_small(median(times[1:])))
        out[path] = {"first_s": first, "s": slowest, "bytes": int(rows.nbytes), "same": all(me.allgather_small(same))}
    return out


def _run_child(n: int | None, run_dir: Path, records: int, device: str, runs: int) -> list[dict]:
    """Return the results of `runs` fresh replays with `n` MPI processes (None: one process without MPI)."""
    env = dict(os.environ)
    cmd = [sys.executable, __file__, "--child", str(run_dir), "--exchange-records", str(records), "--device", device]
    if n is None:
        env["GPUAN_MPI"] = "0"
    else:
        env.pop("GPUAN_MPI", None)
        cmd = [shutil.which("mpiexec") or "mpiexec", "-n", str(n), *cmd]
    print(f"  replay, {'1 process without MPI' if n is None else f'P = {n}'} ({runs} fresh runs) ...", end="",
          flush=True)  # fmt: skip
    try:
        out = fresh_runs(cmd, runs, env=env, timeout=CHILD_TIMEOUT_S, echo=lambda r: f"{r['first_s']:.2f}")
    except FreshRunError as e:
        raise SystemExit(f"replay with {n} processes failed: {e}") from e
    print(" s (first calls)")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=16)
    ap.add_argument("--events", type=int, default=1_000_000, help="events per rank")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--procs", default="1,2,4")
    ap.add_argument("--exchange-records", type=int, default=1_000_000)
    ap.add_argument("--cache", default="/tmp/gpuan-bench-replay")
    ap.add_argument("--device", choices=("cpu", "gpu"), default="cpu", help="the replay's engine (gpu: CuPy)")
    ap.add_argument("--runs", type=int, default=DEFAULT_RUNS, help=f"fresh runs per path (default {DEFAULT_RUNS})")
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--pandas-child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.exchange_records, args.device)
        return 0
    if args.pandas_child:
        pandas_child(args.pandas_child)
        return 0

    from gpuan.synth.ranks import plan, write_run

    run_dir = Path(args.cache) / f"r{args.ranks}-e{args.events}-s{args.steps}"
    stragglers = ((args.steps // 2, args.ranks // 3, 40_000_000), (args.steps - 1, args.ranks - 1, 25_000_000))
    if not run_dir.is_dir():
        t = time.perf_counter()
        write_run(plan(args.ranks, args.steps, args.events, stragglers=stragglers, seed=11), run_dir)
        print(f"wrote {args.ranks} ranks to {run_dir} in {time.perf_counter() - t:.1f} s", file=sys.stderr)

    print("  pandas read (anchor) ...", end="", flush=True)
    try:
        anchor = fresh_runs([sys.executable, __file__, "--pandas-child", str(run_dir)], args.runs,
                            timeout=CHILD_TIMEOUT_S, echo=lambda r: f"{r['first_s']:.2f}")  # fmt: skip
    except FreshRunError as e:
        raise SystemExit(f"the pandas anchor failed: {e}") from e
    print(" s (first calls)")
    n_rows = anchor[0]["rows"]
    pandas_read = spread([r["first_s"] for r in anchor])

    info = machine_info()
    # the reference tables: one process without MPI on the CPU engine, whatever --device
    base_runs = _run_child(None, run_dir, 0, "cpu", args.runs)
    base = base_runs[0]
    base_same = all(r["tables"] == base["tables"] for r in base_runs)
    rows, path_rows, all_runs = [], [], list(base_runs)
    for n in [int(x) for x in args.procs.split(",")]:
        runs = _run_child(n, run_dir, args.exchange_records, args.device, args.runs)
        all_runs += runs
        for path in runs[0]["paths"]:
            got = [r["paths"][path] for r in runs]
            path_rows.append((n, runs[0]["path"], path, {
                "first_s": median([g["first_s"] for g in got]), "s": median([g["s"] for g in got]),
                "bytes": got[0]["bytes"], "same": all(g["same"] for g in got)}))  # fmt: skip
        first = spread([r["first_s"] for r in runs])
        events = sum(x["events"] for x in runs[0]["timings"])
        rows.append(
            {
                "procs": n, "first": first, "warm": median([r["warm_s"][0] for r in runs]), "events": events,
                "events_per_s": events / first.median,
                "exchange": median([max(x["exchange"] for x in r["timings"]) for r in runs]),
                "read": median([max(x["read"] for x in r["timings"]) for r in runs]),
                "rss": median([max(x["peak_rss_mb"] for x in r["timings"]) for r in runs]),
                "same": all(r["tables"] == base["tables"] for r in runs),
                "typed": median([max(x["typed"] for x in r["exchange"]) for r in runs]),
                "pickled": median([max(x["pickled"] for x in r["exchange"]) for r in runs]) if n > 1 else None,
            }
        )  # fmt: skip
    t1 = rows[0]["first"].median
    found = ", ".join(f"({x['step']}, {x['rank']})" for x in json.loads(base["tables"]["stragglers"])[:2])
    base_first = spread([r["first_s"] for r in base_runs])
    vers = ", ".join(
        f"{k} {v}"
        for k, v in versions(
            ("gpuan", "numpy", "pyarrow", "mpi4py"), ("mpich", "cupy-cuda12x", "cupy-cuda13x", "ucxx-cu12")
        ).items()
    )
    lines = [
        f"# gpuan replay benchmark, {time.strftime('%Y-%m-%d')} on {info['cpu']} ({info['cores']} cores)"
        + (f", engine {args.device}{_gpu_name()}" if args.device == "gpu" else ""),
        f"commit {git_commit()}; {vers}",
        "",
        f"{args.ranks} ranks x {args.events:,} events ({n_rows:,} events in all, {args.steps} steps, "
        f"{args.steps * 4} all-reduces per rank), Parquet event tables; stragglers planted at (step, rank) "
        f"{', '.join(f'({s}, {r})' for s, r, _ in stragglers)}; found: "
        f"{found}.",
        "",
        method_note(args.runs, "the second call in the same processes")
        + " The timed function is `gpuan.replay.analyse(load_run(RUN_DIR))`, the slowest process's wall time; "
        "read s, exchange s and peak RSS are gpuan's own diagnostics of the first call (medians of the runs); "
        "the 1M-record exchanges are one all-to-all each after the replays (medians of the runs).",
        "",
        f"Anchor: pandas reads the same files in {pandas_read.cell(2)} s, first read of a fresh process (warm "
        f"{median([r['warm_s'][0] for r in anchor]):.2f} s; {n_rows / pandas_read.median:,.0f} events/s). One process "
        f"without MPI: {base_first.cell(2)} s, warm {median([r['warm_s'][0] for r in base_runs]):.2f} s"
        + ("" if base_same else "; its tables were NOT the same in every run")
        + ".",
        "",
        "| P | replay s, first call, median (min–max) | warm s | events/s (first) | vs pandas read | read s "
        "| exchange s | peak RSS/process | parallel efficiency | tables equal P=1 no-MPI | 1M records typed "
        "| same pickled |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        pick = f"{r['pickled'] * 1e3:,.0f} ms" if r["pickled"] is not None else "-"
        lines.append(
            f"| {r['procs']} | {r['first'].cell(2)} | {r['warm']:.2f} | {r['events_per_s']:,.0f} | "
            f"{pandas_read.median / r['first'].median:.2f}x | {r['read']:.2f} | {r['exchange'] * 1e3:.1f} ms | "
            f"{r['rss']:,.0f} MB | {t1 / (r['procs'] * r['first'].median) * 100:.0f}% | "
            f"{'yes' if r['same'] else 'NO'} (every run) | {r['typed'] * 1e3:,.1f} ms | {pick} |"
        )
    lines += [
        "",
        f"Parallel efficiency = T(1) / (P x T(P)), of the median first calls. This machine has {info['cores']} "
        "cores: with P above that, processes share cores and efficiency falls by construction.",
        "",
        f"numba: {numba_note(all_runs)}.",
    ]
    if path_rows:
        lines += [
            "",
            f"Exchange paths: one all-to-all of {args.exchange_records:,} call records per process "
            f"({path_rows[0][3]['bytes'] / 1e6:,.1f} MB each), the slowest process: the first all-to-all of the "
            "path (it warms it up), then the median of 3 after it; medians of the runs. GB/s = the bytes each "
            "process sends / the median time. 'host' is numpy buffers (the CPU engine's); the others are CuPy "
            "buffers, staged through pinned host memory or handed to MPI / ucxx as they are. The replay's own "
            "path is the one gpuan chose for the run.",
            "",
            "| P | replay's path | path | first s | s (after the first) | GB/s per process | same bytes as host |",
            "|---|---|---|---|---|---|---|",
        ]
        for n, chosen, path, t in path_rows:
            lines.append(
                f"| {n} | {chosen} | {path} | {t['first_s']:.4f} | {t['s']:.4f} | {t['bytes'] / t['s'] / 1e9:.2f} | "
                f"{'yes' if t['same'] else 'NO'} |"
            )
    text = "\n".join(lines) + "\n"
    print(text)
    save_report(args.out, "replay", info, text)
    return 0


def _gpu_name() -> str:
    try:
        import cupy

        return f" ({cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()}, CuPy {cupy.__version__})"
    except Exception:  # noqa: BLE001 - the report says only what it can
        return ""


if __name__ == "__main__":
    sys.exit(main())
