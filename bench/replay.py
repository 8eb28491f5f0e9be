"""Benchmark of ``gpuan replay`` as an MPI job: synthetic per-rank traces (default 16 ranks x 1M events,
all-reduces with planted stragglers), replayed with P = 1, 2, 4 processes.

Reports per P: events/s, the time in exchanges, the peak RSS per process, parallel efficiency against
P = 1, and whether the tables equal the one-process result. Anchors measured in the same run: reading the
same Parquet files with pandas (the I/O floor of any tool), and moving one million call records per
process as typed buffers (what gpuan does) against the same records as pickled Python objects.

With ``--device gpu`` the replay runs on the GPU engine (CuPy) and a second table times one all-to-all
of ``--exchange-records`` call records per process on every path this machine has, in the same run:
host numpy buffers (the CPU engine's), CuPy buffers staged through pinned host memory, and, where
available, CuPy buffers handed to a CUDA-aware MPI or sent through ucxx (GB/s per process).

    python3 bench/replay.py [--ranks 16] [--events 1000000] [--procs 1,2,4] [--device cpu|gpu] [--out bench/results]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest import git_commit, machine_info, save_report, versions  # noqa: E402


def child(run_dir: str, exchange_records: int, device: str) -> None:
    """Inside mpiexec: replay, then time the typed-vs-pickled exchange and the exchange paths; process 0
    prints one JSON line."""
    import numpy as np

    from gpuan.engine.procs import from_launcher
    from gpuan.replay import analyse
    from gpuan.replay.comms import CALL
    from gpuan.trace.ranks import load_run

    me = from_launcher()
    # every process lists the run itself: reading a few Parquet footers costs next to nothing
    r = analyse(load_run(run_dir), procs=me, engine=device)
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
        diagnostics = r.summary["diagnostics"]
        print(json.dumps({"timings": diagnostics["per_process"], "exchange": times, "tables": tables,
                          "paths": paths, "path": diagnostics["exchange"]}))  # fmt: skip


def _time_paths(me, recs, dest, device: str, repeats: int = 3) -> dict[str, dict]:
    """Return, per exchange path, the slowest process's best of `repeats` seconds for one all-to-all of
    `recs` (as byte rows) and whether every process received the host path's bytes."""
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
        best, same = float("inf"), True
        for attempt in range(repeats + 1):  # the first warms the path up (pinned pool, endpoints)
            me.comm.Barrier()
            t = time.perf_counter()
            got = procs.alltoallv(buffer, where)
            if hasattr(got, "__cuda_array_interface__"):
                cupy.cuda.get_current_stream().synchronize()
            elapsed = time.perf_counter() - t
            best = min(best, elapsed) if attempt else best
            same = same and bytes(got.get() if hasattr(got, "get") else got) == bytes(expect)
        slowest = max(me.allgather_small(best))
        out[path] = {"s": slowest, "bytes": int(rows.nbytes), "same": all(me.allgather_small(same))}
    return out


def _run_child(n: int | None, run_dir: Path, records: int, device: str) -> tuple[dict, float]:
    env = dict(os.environ)
    cmd = [sys.executable, __file__, "--child", str(run_dir), "--exchange-records", str(records), "--device", device]
    if n is None:
        env["GPUAN_MPI"] = "0"
    else:
        env.pop("GPUAN_MPI", None)
        cmd = [shutil.which("mpiexec") or "mpiexec", "-n", str(n), *cmd]
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"replay with {n} processes failed:\n{p.stderr}")
    return json.loads(p.stdout.strip().splitlines()[-1]), wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=16)
    ap.add_argument("--events", type=int, default=1_000_000, help="events per rank")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--procs", default="1,2,4")
    ap.add_argument("--exchange-records", type=int, default=1_000_000)
    ap.add_argument("--cache", default="/tmp/gpuan-bench-replay")
    ap.add_argument("--device", choices=("cpu", "gpu"), default="cpu", help="the replay's engine (gpu: CuPy)")
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.exchange_records, args.device)
        return 0

    import pandas as pd

    from gpuan.synth.ranks import plan, write_run

    run_dir = Path(args.cache) / f"r{args.ranks}-e{args.events}-s{args.steps}"
    stragglers = ((args.steps // 2, args.ranks // 3, 40_000_000), (args.steps - 1, args.ranks - 1, 25_000_000))
    if not run_dir.is_dir():
        t = time.perf_counter()
        write_run(plan(args.ranks, args.steps, args.events, stragglers=stragglers, seed=11), run_dir)
        print(f"wrote {args.ranks} ranks to {run_dir} in {time.perf_counter() - t:.1f} s", file=sys.stderr)

    t = time.perf_counter()
    n_rows = sum(len(pd.read_parquet(f)) for f in sorted(run_dir.glob("rank*.parquet")))
    pandas_read = time.perf_counter() - t

    info = machine_info()
    # the reference tables: one process without MPI on the CPU engine, whatever --device
    base, base_wall = _run_child(None, run_dir, 0, "cpu")
    rows, path_rows = [], []
    for n in [int(x) for x in args.procs.split(",")]:
        res, wall = _run_child(n, run_dir, args.exchange_records, args.device)
        path_rows += [(n, res["path"], path, t) for path, t in res["paths"].items()]
        tm = res["timings"]
        total = max(x["total"] for x in tm)
        events = sum(x["events"] for x in tm)
        rows.append(
            {
                "procs": n, "total": total, "wall": wall, "events": events, "events_per_s": events / total,
                "exchange": max(x["exchange"] for x in tm), "read": max(x["read"] for x in tm),
                "rss": max(x["peak_rss_mb"] for x in tm), "same": res["tables"] == base["tables"],
                "typed": max(x["typed"] for x in res["exchange"]),
                "pickled": max(x["pickled"] for x in res["exchange"]) if n > 1 else None,
            }
        )  # fmt: skip
    t1 = rows[0]["total"]
    found = ", ".join(f"({x['step']}, {x['rank']})" for x in json.loads(base["tables"]["stragglers"])[:2])
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
        f"Anchor: pandas reads the same files in {pandas_read:.2f} s ({n_rows / pandas_read:,.0f} events/s). "
        f"One process without MPI: {base['timings'][0]['total']:.2f} s.",
        "",
        "| P | replay s (slowest process) | events/s | vs pandas read | read s | exchange s | peak RSS/process | "
        "parallel efficiency | tables equal P=1 no-MPI | 1M records typed | same pickled |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        pick = f"{r['pickled'] * 1e3:,.0f} ms" if r["pickled"] is not None else "-"
        lines.append(
            f"| {r['procs']} | {r['total']:.2f} | {r['events_per_s']:,.0f} | {pandas_read / r['total']:.2f}x | "
            f"{r['read']:.2f} | {r['exchange'] * 1e3:.1f} ms | {r['rss']:,.0f} MB | "
            f"{t1 / (r['procs'] * r['total']) * 100:.0f}% | {'yes' if r['same'] else 'NO'} | "
            f"{r['typed'] * 1e3:,.1f} ms | {pick} |"
        )
    lines += [
        "",
        f"Parallel efficiency = T(1) / (P x T(P)). This machine has {info['cores']} cores: with P above that, "
        "processes share cores and efficiency falls by construction.",
    ]
    if path_rows:
        lines += [
            "",
            f"Exchange paths: one all-to-all of {args.exchange_records:,} call records per process "
            f"({path_rows[0][3]['bytes'] / 1e6:,.1f} MB each), best of 3 after a warm-up, the slowest process; "
            "GB/s = the bytes each process sends / that time. 'host' is numpy buffers (the CPU engine's); the "
            "others are CuPy buffers, staged through pinned host memory or handed to MPI / ucxx as they are. "
            "The replay's own path is the one gpuan chose for the run.",
            "",
            "| P | replay's path | path | s | GB/s per process | same bytes as host |",
            "|---|---|---|---|---|---|",
        ]
        for n, chosen, path, t in path_rows:
            lines.append(
                f"| {n} | {chosen} | {path} | {t['s']:.4f} | {t['bytes'] / t['s'] / 1e9:.2f} | "
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
