"""Where a gpuan Parquet file keeps its flows (issue 22): in row groups of their own (format 9) against the
footer (format 8 and before), on a trace with as many flows as a 36 GiB one.

A trace of ../shared/tools/gen_kineto_trace.py is read once per checkout; its flows are repeated (ids
shifted) up to --flows rows, 21M being the flow count of the 36 GiB trace of bench/convert.py; each checkout
writes its own file with ``gpuan.trace.parquet.write``. Then, in fresh processes alternating between the
checkouts (``--baseline DIR``, a copy of the package at an older commit, run with PYTHONPATH=DIR):

- open: ``parquet.stored_format(path)``, what a cache check or a run directory's listing costs per file;
- kernels: ``parquet.read(path, projection)`` of three kernel columns, what `gpuan cycles` reads;
- flows: decoding the flow table, what `sol` and `replay` do and `info` does to count them;
- the process's peak RSS after all three.

Reported: medians of --repeat processes, the file and footer sizes, and whether both read the same rows.

    git archive a386a98 gpuan | tar -x -C /tmp/base
    scripts/with-venv python bench/parquet_flows.py --baseline /tmp/base --baseline-name a386a98
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest import ensure_gen_trace, gen_trace_arguments, git_commit, machine_info, save_report  # noqa: E402  (shared helpers of the benchmarks)

WRITE = """
import sys, numpy as np, pyarrow as pa, pyarrow.compute as pc, gpuan
from gpuan.trace import parquet
from gpuan.trace.table import Trace
src, out, want = sys.argv[1], sys.argv[2], int(sys.argv[3])
t = gpuan.load(src, use_cache=False)
f = t.flows.combine_chunks()
span = int(pc.max(f["id"]).as_py()) + 1
copies = [f.set_column(0, "id", pc.add(f["id"], k * span)) for k in range(-(-want // f.num_rows))]
flows = pa.concat_tables(copies).slice(0, want)
parquet.write(Trace(t.events, flows, t.metadata), out)
print(t.events.num_rows, flows.num_rows)
"""

TIMED = """
import json, sys, time, resource, pyarrow.parquet as pq
from gpuan.trace import parquet
from gpuan.trace.projection import projection
path = sys.argv[1]
t0 = time.perf_counter(); parquet.stored_format(path); t1 = time.perf_counter()
k = parquet.read(path, projection(("ts", "dur", "name"), ("kernel",))); t2 = time.perf_counter()
n = k.flows.num_rows; t3 = time.perf_counter()
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"open": t1 - t0, "kernels": t2 - t1, "flows": t3 - t2, "rss": rss, "rows": k.events.num_rows,
                  "flow_rows": n, "footer": pq.ParquetFile(path, thrift_string_size_limit=2**31 - 1,
                  thrift_container_size_limit=2**31 - 1).metadata.serialized_size}))
"""


def run(code: str, args: list[str], checkout: Path | None) -> str:
    """Run `code` in a fresh Python of the checkout `checkout` (None: this one); return its stdout."""
    env = {**os.environ, "PYTHONPATH": str(checkout or REPO)}
    r = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True,
                       cwd=checkout or REPO)  # fmt: skip
    if r.returncode:
        raise SystemExit(f"{checkout or REPO}: {r.stderr.strip().splitlines()[-1]}")
    return r.stdout


def main() -> None:
    ap = gen_trace_arguments(__doc__.splitlines()[0], size_mb=1024, repeat=5)
    ap.add_argument("--flows", type=int, default=21_000_000, help="flow rows in the file")
    args = ap.parse_args()
    if not args.baseline:
        ap.error("--baseline is required: the benchmark compares two checkouts")
    d = Path(args.dir)
    trace = ensure_gen_trace(d, args.size_mb)
    sides = {"this": None, "baseline": Path(args.baseline).resolve()}
    files = {name: d / f"flows-{name}-{args.flows}.parquet" for name in sides}
    for name, checkout in sides.items():
        print(f"writing {files[name]} ...", flush=True)
        run(WRITE, [str(trace), str(files[name]), str(args.flows)], checkout)
    got: dict[str, list[dict]] = {name: [] for name in sides}
    load0 = os.getloadavg()
    for _ in range(args.repeat):
        for name, checkout in sides.items():
            got[name].append(json.loads(run(TIMED, [str(files[name])], checkout)))
    load1 = os.getloadavg()
    med = {name: {k: statistics.median(r[k] for r in rows) for k in rows[0]} for name, rows in got.items()}
    same = all(med["this"][k] == med["baseline"][k] for k in ("rows", "flow_rows"))
    machine = machine_info()
    lines = [
        f"# Where the Parquet file keeps its flows, {date.today()} on {machine['cpu']} ({machine['cores']} cores)",
        "",
        f"Commit {git_commit()}; baseline {args.baseline_name or args.baseline}. Written by bench/parquet_flows.py.",
        f"Load average before {load0[0]:.1f}, after {load1[0]:.1f} (a shared machine).",
        "",
        f"Trace: gen_kineto_trace.py --size-mb {args.size_mb}, its flows repeated to {args.flows:,} rows (the "
        "36 GiB trace's count). Medians of "
        f"{args.repeat} fresh processes per checkout, alternating. Same rows read: {'yes' if same else 'NO'}.",
        "",
        "| checkout | file MB | footer MB | open s | kernels s | flows s | peak RSS MB |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name in sides:
        m = med[name]
        lines.append(
            f"| {name} | {files[name].stat().st_size / 1e6:.1f} | {m['footer'] / 1e6:.2f} | {m['open']:.3f} | "
            f"{m['kernels']:.3f} | {m['flows']:.3f} | {m['rss']:.0f} |"
        )
    lines += ["", "Each process's runs (open, kernels, flows s):", ""]
    for name, rows in got.items():
        runs = "; ".join(f"{r['open']:.3f}, {r['kernels']:.3f}, {r['flows']:.3f}" for r in rows)
        lines.append(f"- {name}: {runs}")
    text = "\n".join(lines) + "\n"
    print(text)
    print(f"wrote {save_report(args.out, 'parquet-flows', machine, text)}")


if __name__ == "__main__":
    main()
