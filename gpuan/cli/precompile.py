"""``gpuan precompile``: compile the numba code of gpuan's CPU commands into numba's on-disk cache now.

A command's first run after an install compiles what it uses (15-45 s on a 2-core machine; the stream
simulator's event loop alone 20-30 s) and caches it. Where that first run is paid again and again (a
container started afresh for every job, each rank of an ``mpirun`` on a node whose cache is cold, a shared
install), this pays it once: it runs the commands themselves (info, convert, cycles, compare, sol, replay,
fleet, streams) on small traces it writes, in a few processes side by side, then checks that numba's cache
holds every cached function of gpuan for this machine. ``--check`` compiles nothing and only checks.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpuan.cli.arguments import positive

#: the work each process does (run_task's names), in the order the processes start: the commands on
#: traces first (the JSON scanner, then every analysis), beside the two analyses whose kernels compile
#: longest, made up in gpuan.cli.first_run
TASKS = ("commands", "stream_loop", "cycle_kernels")


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add the command's parser to `sub` (the subcommands of ``gpuan``)."""
    p = sub.add_parser(
        "precompile",
        help="compile gpuan's numba code into numba's on-disk cache now (container images, shared installs, "
        "before a large mpirun)",
    )
    p.add_argument(
        "--jobs", type=positive, default=None,
        help=f"processes that compile side by side (default: the cores this process may use, at most {len(TASKS)})",
    )  # fmt: skip
    p.add_argument(
        "--check", action="store_true",
        help="compile nothing: exit 1 if numba's cache lacks any of gpuan's functions for this machine",
    )  # fmt: skip
    # CPU code only: no GPU is picked (nor initialised) for it
    p.set_defaults(run=run, picks_engine=False)


def run(args: argparse.Namespace) -> int:
    """Compile (or, with --check, only look), then report what numba's cache holds; returns the exit code:
    1 where a function is missing from the cache."""
    from gpuan.jit_cache import cache_report

    start = time.perf_counter()
    before = cache_report()
    if not args.check:
        jobs = args.jobs or min(len(os.sched_getaffinity(0)), len(TASKS))
        print(f"gpuan: compiling {len(before.missing)} of gpuan's {before.functions} numba functions "
              f"({before.target}) in {jobs} processes ...", file=sys.stderr)  # fmt: skip
        failed = _run_tasks(jobs)
        if failed:
            for name, why in failed:
                print(f"gpuan: error: precompile: {name}: {why}", file=sys.stderr)
            return 1
    after = cache_report()
    seconds = time.perf_counter() - start
    if after.missing:
        print(
            f"gpuan: error: numba's cache ({after.where}) lacks {len(after.missing)} of gpuan's {after.functions} "
            f"functions for {after.target}: {', '.join(after.missing)}",
            file=sys.stderr,
        )
        return 1
    done = "" if args.check else f"{len(before.missing)} compiled now, in {seconds:.1f} s; "
    print(f"gpuan: all {after.functions} of gpuan's numba functions are in numba's cache ({done}{after.where}; "
          f"{after.target})", file=sys.stderr)  # fmt: skip
    return 0


def _run_tasks(jobs: int) -> list[tuple[str, str]]:
    """Run :data:`TASKS` in processes of their own, at most `jobs` at once; returns (task, why) for each
    that failed."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    # two threads whatever the machine: a plain trace of 1 MB or more is then cut into chunks, whose code
    # a machine with more cores needs; the CPU engine, and never a server
    env = dict(os.environ, GPUAN_THREADS="2", GPUAN_DEVICE="cpu", GPUAN_SERVER="0")
    failed: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="gpuan-precompile-") as scratch:
        waiting = list(TASKS)
        running: dict[str, subprocess.Popen] = {}
        try:
            while waiting or running:
                while waiting and len(running) < jobs:
                    name = waiting.pop(0)
                    code = (
                        f"import sys; sys.path[: 0 if getattr(sys.flags, 'safe_path', 0) else 1] = [{root!r}]; "
                        f"from gpuan.cli.precompile import run_task; run_task({name!r}, {scratch!r})"
                    )
                    running[name] = subprocess.Popen(
                        [sys.executable, "-c", code], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                        stderr=subprocess.PIPE, env=env,
                    )  # fmt: skip
                name, child = _first_done(running)
                del running[name]
                if child.returncode:
                    lines = child.stderr.read().decode(errors="replace").strip().splitlines()
                    failed.append((name, lines[-1] if lines else f"exit code {child.returncode}"))
                child.stderr.close()
        finally:
            for child in running.values():
                child.kill()
                child.wait()
    return failed


def _first_done(running: dict[str, subprocess.Popen]) -> tuple[str, subprocess.Popen]:
    """Return the first of the `running` processes to end (name, process), once it has ended."""
    while True:
        for name, child in running.items():
            if child.poll() is not None:
                return name, child
        time.sleep(0.05)


def run_task(name: str, scratch: str) -> None:
    """Run task `name` of :data:`TASKS` in this process, writing what it writes under `scratch`."""
    from gpuan.cli import first_run

    if name == "commands":
        _commands(Path(scratch) / "commands")
    else:
        getattr(first_run, name)()


def _commands(directory: Path) -> None:
    """Write a run of two ranks (one gzipped, one plain, both over 1 MB inflated and named without their
    rank) and a directory of one small trace that gives its rank after its events, with more distinct
    strings than a small trace's string table holds at first; run each CPU command on them as a user
    would. Raises if a command fails."""
    import contextlib
    import io

    from gpuan.cli import main
    from gpuan.synth.kineto import write_kineto_trace

    run_dir, out = directory / "run", directory / "out"
    gz, plain = run_dir / "host_a.json.gz", run_dir / "host_b.json"
    run_dir.mkdir(parents=True)
    out.mkdir()
    for rank, path in enumerate((gz, plain)):
        write_kineto_trace(path, target_bytes=2 << 20, rank=rank, world_size=2, seed=rank)
    late = directory / "late" / "trace.json"
    late.parent.mkdir()
    events = ",".join(
        f'{{"ph": "X", "cat": "kernel", "name": "k{i}", "pid": 0, "tid": 7, "ts": {i}, "dur": 1}}' for i in range(3000)
    )
    late.write_text(f'{{"traceEvents": [{events}], "distributedInfo": {{"rank": 0}}}}')
    commands = [
        ["info", str(late.parent)],
        ["info", str(plain)],
        ["info", str(gz)],
        ["convert", str(gz), "-o", str(directory / "a.parquet")],
        ["info", str(directory / "a.parquet")],
        ["cycles", str(gz), "-o", str(out / "a")],
        ["cycles", str(plain), "-o", str(out / "b")],
        ["compare", str(out / "a_cycle_1.csv"), str(out / "b_cycle_1.csv"), "-o", str(out / "ab.csv")],
        ["sol", str(gz)],
        ["replay", str(run_dir)],
        ["fleet", str(run_dir), "-o", str(out / "fleet")],
    ]
    for argv in commands:
        with contextlib.redirect_stdout(io.StringIO()):
            code = main(argv)
        if code:
            raise SystemExit(f"gpuan {' '.join(argv)}: exit code {code}")
