"""Reading a run directory in one process (``gpuan.load(RUN)``, what ``gpuan info|cycles|sol RUN`` do without
``mpirun``): its files read side by side against the same files read one after another.

    python bench/run_read.py [--runs 5] [--gen-mb 64] [--gen-ranks 4] [--gen-last-mb N] [--baseline CHECKOUT]
                             [--out bench/results]

The runs: the two real run directories of ``../shared/data/kineto`` (DLRM, 8 ranks; the Gloo 4-rank set; both
``.json.gz``) and a run of ``--gen-ranks`` traces of ``../shared/tools/gen_kineto_trace.py`` (``--gen-mb`` MB each,
the last ``--gen-last-mb`` MB where given: a run with one large rank; seeds 0.., each file's
``distributedInfo.rank`` set to its rank), as ``.json`` and as ``.json.gz`` (python-isal, level 1), written once
into ``--dir`` (kept between runs, never in the repository).

The paths, each in ``--runs`` fresh processes (bench/timing.py: the first call and a warm second call of each
process; medians, never a best of N), with ``GPUAN_THREADS`` 1 and 2:
- ``gpuan.load(RUN)``: the run as gpuan reads it now (at 2 threads, two files at a time, one thread each);
- ranks one after another: the same files listed the same way, each read by ``gpuan.load`` with all the
  threads, then merged by ``gpuan.trace.load.merge_ranks`` (how gpuan read a run before 2026-12-02);
- simdjson parse of every file of the run (pysimdjson's DOM; ``.json.gz`` inflated by isal first), the parse-only
  anchor of bench/ingest.py: one thread, so its wall time is its CPU time;
- with ``--baseline CHECKOUT``: that checkout's ``gpuan.load(RUN)``, each of its processes right after one of
  this checkout's, so that both see the same load.

A Markdown report goes to <out>/run-read-<date>-<machine>.md with the machine, date, commit and load average.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest import _peak_rss_bytes, git_commit, machine_info, save_report, versions  # noqa: E402  (shared helpers)
from timing import checkout_commit, checkout_env, emit, first_and_warm, fresh_runs, median, spread  # noqa: E402

HERE = Path(__file__).resolve()
REPO = HERE.parents[1]
SHARED = REPO.parent / "shared"
DEFAULT_DIR = Path(tempfile.gettempdir()) / "gpuan-bench-run-read"
PATHS = ("run", "ranks", "simdjson")
LABELS = {
    "run": "gpuan.load(RUN): files side by side",
    "ranks": "ranks one after another, each gpuan.load",
    "simdjson": "simdjson parse of each file (one thread)",
    "baseline": "baseline gpuan.load(RUN)",
}


# ---------------------------------------------------------------------------------------------------
# Child side: one path over one run, timed in this process


def _cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


def child(path: str, run: str) -> None:
    """Time `path` over the run directory `run` (first and warm call) and emit the result."""
    import gpuan
    from gpuan.jit_cache import lighter_numba_start

    lighter_numba_start()  # as the command line does before it loads numba code (bench/ingest.py does too)

    if path == "simdjson":
        import simdjson
        from isal import igzip

        files = sorted(p for p in Path(run).iterdir() if p.is_file())
        parser = simdjson.Parser()

        def call() -> int:
            rows = 0
            for f in files:
                data = f.read_bytes()
                if data[:2] == b"\x1f\x8b":
                    data = igzip.decompress(data)
                rows += len(parser.parse(data)["traceEvents"])
            return rows
    elif path == "ranks":

        def call() -> int:
            # imported here, as gpuan.load(RUN) imports them in its first call
            from gpuan.trace.load import merge_ranks
            from gpuan.trace.ranks import ranked_files

            ranked = ranked_files(Path(run))
            traces = [gpuan.load(f.path, rank=f.rank, use_cache=False) for f in ranked]
            return merge_ranks(traces, [f.rank for f in ranked], source=run).events.num_rows

    else:

        def call() -> int:
            return gpuan.load(run, use_cache=False).events.num_rows

    cpu = _cpu_seconds()
    first, warms, rows = first_and_warm(call)
    emit({"first_s": first, "warm_s": warms, "cpu_s": _cpu_seconds() - cpu, "rows": rows, "rss": _peak_rss_bytes()})


# ---------------------------------------------------------------------------------------------------
# Parent side


def gen_run(directory: Path, ranks: int, size_mb: int, last_mb: int | None = None) -> tuple[Path, Path]:
    """Return a run of `ranks` generated traces of `size_mb` MB (the last of `last_mb` MB, where given) as .json
    and as .json.gz (written once into `directory`)."""
    from isal import igzip

    name = f"gen-{ranks}x{size_mb}mb" + (f"-last{last_mb}mb" if last_mb else "")
    plain, packed = directory / name, directory / f"{name}-gz"
    for d in (plain, packed):
        d.mkdir(parents=True, exist_ok=True)
    for r in range(ranks):
        f, z = plain / f"rank{r}.json", packed / f"rank{r}.json.gz"
        if not f.exists():
            tmp = f.with_suffix(".tmp")
            gen = SHARED / "tools" / "gen_kineto_trace.py"
            mb = last_mb if last_mb and r == ranks - 1 else size_mb
            cmd = [sys.executable, str(gen), str(tmp), "--size-mb", str(mb), "--seed", str(r)]
            subprocess.run(cmd, check=True, capture_output=True)
            data = tmp.read_bytes()
            # the generator writes rank 0 into every file; a run's files must hold their own ranks
            at = data.index(b'"rank": 0', data.index(b'"distributedInfo"'))
            tmp.write_bytes(data[:at] + f'"rank": {r}'.encode() + data[at + len(b'"rank": 0') :])
            tmp.rename(f)
        if not z.exists():
            z.with_suffix(".tmp").write_bytes(igzip.compress(f.read_bytes(), compresslevel=1))
            z.with_suffix(".tmp").rename(z)
    return plain, packed


def runs_measured(args: argparse.Namespace) -> list[tuple[str, Path]]:
    """Return (label, directory) of every run measured."""
    real = SHARED / "data" / "kineto"
    out = [(name, real / name) for name in ("dlrm_8rank_nccl", "cpu_ddp_gloo_4rank_slow_rank1_step2")]
    out = [(n, d) for n, d in out if d.is_dir() and not args.skip_real]
    plain, packed = gen_run(Path(args.dir), args.gen_ranks, args.gen_mb, args.gen_last_mb)
    if args.gen_last_mb:
        label = f"gen {args.gen_ranks - 1} x {args.gen_mb} MB + {args.gen_last_mb} MB .json"
    else:
        label = f"gen {args.gen_ranks} x {args.gen_mb} MB .json"
    return out + [(label, plain), (label.removesuffix(".json") + ".json.gz", packed)]


def run_bytes(run: Path) -> int:
    """Return the bytes of the run's JSON, uncompressed."""
    import gzip

    total = 0
    for f in run.iterdir():
        if f.name.endswith(".gz"):
            with gzip.open(f) as g:
                while chunk := g.read(16 << 20):
                    total += len(chunk)
        elif f.is_file():
            total += f.stat().st_size
    return total


def measure(args: argparse.Namespace, run: Path) -> dict[tuple[str, str], list[dict]]:
    """Return the fresh runs of every path at 1 and 2 threads, by (path, threads)."""
    out: dict[tuple[str, str], list[dict]] = {}
    for threads in ("1", "2"):
        env = dict(checkout_env(REPO), GPUAN_THREADS=threads)
        base_env = dict(checkout_env(Path(args.baseline)), GPUAN_THREADS=threads) if args.baseline else None
        for path in PATHS:
            if path == "simdjson" and threads == "2":
                continue  # one thread parses: pysimdjson has no threads
            cmd = [sys.executable, str(HERE), "--child", path, str(run)]
            print(f"  {path} @ {threads} thread(s):", end="", flush=True)
            if path == "run" and base_env is not None:
                for _ in range(args.runs):  # alternating, so that both see the same load
                    out.setdefault((path, threads), []).extend(fresh_runs(cmd, 1, env=env, echo=_echo))
                    out.setdefault(("baseline", threads), []).extend(fresh_runs(cmd, 1, env=base_env, echo=_echo))
            else:
                out[(path, threads)] = fresh_runs(cmd, args.runs, env=env, echo=_echo)
            print()
    return out


def _echo(r: dict) -> str:
    return f"{r['first_s']:.2f}/{r['warm_s'][0]:.2f}"


def report(args: argparse.Namespace, results: list[tuple[str, Path, int, dict]], load: tuple) -> str:
    """Return the Markdown report."""
    info = machine_info()
    lines = [
        f"# Reading a run directory, {dt.date.today()}, {args.slug}",
        "",
        f"- machine: {info['cpu']}, {info['cores']} cores, {info['ram'] / 2**30:.1f} GiB RAM",
        f"- date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC; load average (1 min) {load[0]:.2f} before, "
        f"{os.getloadavg()[0]:.2f} after",
        f"- git commit: {git_commit()}"
        + (f"; baseline: {args.baseline} ({checkout_commit(Path(args.baseline))})" if args.baseline else ""),
        "- versions: " + ", ".join(f"{k} {v}" for k, v in versions().items()),
        f"- command: `python bench/run_read.py {' '.join(sys.argv[1:])}`",
        f"- method: every row is {args.runs} fresh Python processes; 'first' is the first call in a process (after "
        "`import gpuan` and numba's lighter start as the command line makes it; numba's cache on disk), 'warm' the "
        "second call in the same process: medians, then the first calls' min-max. Never a best of N. MB/s over the "
        "run's uncompressed JSON, from the warm median. Peak RSS: the process's VmHWM (both calls, imports included).",
        "",
    ]
    for name, run, size, res in results:
        lines += [f"## {name}: {len(list(run.iterdir()))} files, {size / 1e6:.1f} MB of JSON", ""]
        head = "| path | threads | warm s | first s (min-max) | MB/s (warm) | CPU s a process | peak RSS MB | rows |"
        lines += [head]
        lines += ["|---|---:|---:|---:|---:|---:|---:|---:|"]
        for (path, threads), rs in res.items():
            warm = median([w for r in rs for w in r["warm_s"]])
            cells = [LABELS[path], threads, f"{warm:.3f}", spread([r["first_s"] for r in rs]).cell(3)]
            cells += [f"{size / 1e6 / warm:.0f}", f"{median([r['cpu_s'] for r in rs]):.2f}"]
            cells += [f"{median([r.get('rss', 0) for r in rs]) / 1e6:,.0f}", f"{rs[0]['rows']:,}"]
            lines.append("| " + " | ".join(cells) + " |")

        def warm_of(path: str, threads: str, res: dict = res) -> float | None:
            rs = res.get((path, threads))
            return median([w for r in rs for w in r["warm_s"]]) if rs else None

        lines.append("")
        run1, run2, ranks2 = warm_of("run", "1"), warm_of("run", "2"), warm_of("ranks", "2")
        lines.append(f"- gpuan.load(RUN), 2 threads vs 1: {run1 / run2:.2f}x (warm medians)")
        lines.append(f"- ranks one after another (2 threads each) / gpuan.load(RUN) at 2 threads: {ranks2 / run2:.2f}x")
        base2 = warm_of("baseline", "2")
        if base2 is not None:
            lines.append(f"- baseline / this checkout, gpuan.load(RUN) at 2 threads: {base2 / run2:.2f}x")
        simd = warm_of("simdjson", "1")
        if simd is not None:
            # one thread parses: its wall time is its CPU time
            lines.append(f"- gpuan.load(RUN) at 2 threads / simdjson's parse of the run (one thread: CPU = wall): "
                         f"{run2 / simd:.2f}x (target <= 2)")  # fmt: skip
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--gen-mb", type=int, default=64)
    ap.add_argument("--gen-ranks", type=int, default=4)
    ap.add_argument("--gen-last-mb", type=int, default=None, help="the last rank's size (a run with one large rank)")
    ap.add_argument("--skip-real", action="store_true", help="only the generated run")
    ap.add_argument("--baseline", default=None, help="another checkout whose gpuan.load(RUN) is timed alongside")
    ap.add_argument("--dir", default=str(DEFAULT_DIR), help="where the generated run is written (and kept)")
    ap.add_argument("--out", default=str(HERE.parent / "results"))
    ap.add_argument("--stem", default="run-read")
    ap.add_argument("--child", nargs=2, metavar=("PATH", "RUN"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    from ingest import machine_slug

    args.slug = machine_slug(machine_info())
    load = os.getloadavg()
    results = []
    for name, run in runs_measured(args):
        print(name, flush=True)
        results.append((name, run, run_bytes(run), measure(args, run)))
    text = report(args, results, load)
    print(text)
    print("written to", save_report(args.out, args.stem, machine_info(), text))


if __name__ == "__main__":
    main()
