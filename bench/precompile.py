"""What ``gpuan precompile`` saves: each command's first run with an empty numba cache (as in a fresh container,
or on a node whose cache is cold) against the same command after ``gpuan precompile`` filled the cache.

    python bench/precompile.py [--out bench/results] [--runs 3] [--dir DIR]

Every run is a fresh process timed from outside (bench/startup.py's ``wall``: wall clock and CPU time, process
start to exit), with ``NUMBA_CACHE_DIR`` a new empty directory: per round, each command once with a cache of its
own (its first run after an install: it compiles what it uses), then ``gpuan precompile`` into another, then each
command with that one. Rows give the median of ``--runs`` rounds and their spread (min-max), never the best of N;
the speed-up is the cold median over the median after precompile, over the same rounds. The trace is
the demo's sample (``gpuan.synth.kineto.sample_trace_path``: 3 steps of a 4-layer training job, 3,603 events).

A Markdown report goes to <out>/precompile-<date>-<machine>.md with the machine, date, commit and the load average.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest import git_commit, machine_info, save_report, versions  # noqa: E402  (shared helpers)
from startup import user_env, wall  # noqa: E402
from timing import spread  # noqa: E402

from gpuan.cli.precompile import CHAINS  # noqa: E402


def commands(trace: Path, out: Path) -> dict[str, list[str]]:
    """Return the commands timed, by name: argv after ``python -m gpuan``."""
    return {
        "info": ["info", str(trace)],
        "cycles": ["cycles", str(trace), "-o", str(out / "c")],
        "sol": ["sol", str(trace)],
        "streams --streams 2": ["streams", str(trace), "--streams", "2", "--stream", "7"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dir", default=None, help="where the sample trace is written (default: a temp directory)")
    args = ap.parse_args()
    from gpuan.synth.kineto import sample_trace_path

    work = Path(args.dir or tempfile.mkdtemp(prefix="gpuan-bench-precompile-"))
    trace = sample_trace_path(work)
    out = work / "out"
    out.mkdir(exist_ok=True)
    gpuan = [sys.executable, "-m", "gpuan"]
    named = commands(trace, out)
    load_before = os.getloadavg()
    cold: dict[str, list[tuple[float, float]]] = {name: [] for name in named}
    after: dict[str, list[tuple[float, float]]] = {name: [] for name in named}
    pre: list[tuple[float, float]] = []
    for r in range(args.runs):
        for name, argv in named.items():
            with tempfile.TemporaryDirectory(prefix="gpuan-cold-numba-") as empty:
                cold[name].append(wall(gpuan + argv, env=user_env(NUMBA_CACHE_DIR=empty)))
            print(f"round {r + 1}: {name} cold {cold[name][-1][0]:.1f} s", flush=True)
        with tempfile.TemporaryDirectory(prefix="gpuan-precompiled-numba-") as cache:
            env = user_env(NUMBA_CACHE_DIR=cache)
            pre.append(wall(gpuan + ["precompile"], env=env))
            print(f"round {r + 1}: precompile {pre[-1][0]:.1f} s", flush=True)
            for name, argv in named.items():
                after[name].append(wall(gpuan + argv, env=env))
    load_after = os.getloadavg()

    info = machine_info()
    lines = [
        f"# gpuan precompile: first runs with a cold numba cache and after `gpuan precompile`, {dt.date.today()} "
        f"on {info['cpu']} ({info['cores']} cores)",
        f"commit {git_commit()}; {versions()}",
        f"load average before {', '.join(f'{x:.2f}' for x in load_before)}; after "
        f"{', '.join(f'{x:.2f}' for x in load_after)} (on {info['cores']} cores)",
        "",
        __doc__.split("\n\n", 2)[2].split("\n\nA Markdown")[0].replace("\n", " "),
        "",
        "| what | cold cache: wall s (min–max) | CPU s | after precompile: wall s (min–max) | CPU s | speed-up wall |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name in named:
        c, a = spread([w for w, _ in cold[name]]), spread([w for w, _ in after[name]])
        c_cpu, a_cpu = spread([u for _, u in cold[name]]), spread([u for _, u in after[name]])
        lines.append(
            f"| gpuan {name} | {c.cell(2)} | {c_cpu.median:.2f} | {a.cell(2)} | {a_cpu.median:.2f} "
            f"| {c.median / a.median:.1f}x |"
        )
    p, p_cpu = spread([w for w, _ in pre]), spread([u for _, u in pre])
    summed = spread([sum(cold[name][i][0] for name in named) for i in range(args.runs)])
    lines += [
        "",
        f"`gpuan precompile` itself (empty cache, {min(len(os.sched_getaffinity(0)), len(CHAINS))} processes): "
        f"{p.cell(1)} s wall, {p_cpu.median:.1f} CPU-s; the four cold first runs above add up to "
        f"{summed.cell(1)} s, and each later command of every other kind (convert, compare, replay, fleet) "
        "would have compiled too.",
    ]
    path = save_report(args.out, "precompile", info, "\n".join(lines) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
