"""``gpuan precompile``: compile the numba code of gpuan's CPU commands into numba's on-disk cache now.

A command's first run after an install compiles what it uses (15-45 s on a 2-core machine; the stream
simulator's event loop alone 20-30 s) and caches it. Where that first run is paid again and again (a
container started afresh for every job, each rank of an ``mpirun`` on a node whose cache is cold, a shared
install), this pays it once: it runs the commands themselves (info, convert, cycles, compare, sol, replay,
fleet) on small traces it writes, beside the stream simulator's event loop (in two processes where it may use
two cores), then checks that numba's cache holds every cached function of gpuan for this machine.
``--check`` compiles nothing and only checks.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from gpuan.cli.arguments import positive
from gpuan.jit_cache import python_running

#: the work (run_task's names), in chains: each chain runs in a process of its own, its tasks in turn. No two
#: chains compile the same function, which would be work done twice: the cycle search's kernels compile before
#: the commands (cycles and fleet then find them cached and start no process of their own to compile them),
#: beside the stream simulator's event loop, which only ``gpuan streams`` uses
CHAINS = (("cycle_kernels", "commands"), ("stream_loop",))
#: seconds a chain may take before it is stopped and reported (a cold one takes about a minute on 2 cores)
DEADLINE_S = 1800


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add the command's parser to `sub` (the subcommands of ``gpuan``)."""
    p = sub.add_parser(
        "precompile",
        help="compile gpuan's numba code into numba's on-disk cache now (container images, shared installs, "
        "before a large mpirun)",
    )
    p.add_argument(
        "--jobs", type=positive, default=None,
        help=f"processes that compile side by side (default: the cores this process may use, at most {len(CHAINS)})",
    )  # fmt: skip
    p.add_argument(
        "--check", action="store_true",
        help="compile nothing: exit 1 if numba's cache lacks any of gpuan's functions for this machine",
    )  # fmt: skip
    # CPU code only: no GPU is picked (nor initialised) for it
    p.set_defaults(run=run, picks_engine=False)


def run(args: argparse.Namespace) -> int:
    """Compile (or, with --check, only look), then report what numba's cache holds; returns the exit code:
    1 where a function is missing from the cache or a task failed."""
    from gpuan.jit_functions import cache_report

    start = time.perf_counter()
    try:
        before = cache_report()
    except ImportError as e:
        print(f"gpuan: error: precompile: {e}", file=sys.stderr)
        return 1
    if before.functions == 0:  # numba's private API changed under gpuan: nothing to compile can be found
        print("gpuan: error: precompile: found none of gpuan's cached numba functions", file=sys.stderr)
        return 1
    if not args.check:
        jobs = min(args.jobs or len(os.sched_getaffinity(0)), len(CHAINS))
        # the chains run even where no function lacks code: a function counts as cached when any of its
        # signatures is, and loading what is cached takes seconds
        print(f"gpuan: compiling what numba's cache lacks ({len(before.missing)} of gpuan's {before.functions} "
              f"numba functions have no code there; {before.target}), in {jobs} "
              f"process{'es' if jobs > 1 else ''} ...", file=sys.stderr)  # fmt: skip
        failed = run_chains(CHAINS, jobs)
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


def run_chains(chains: Sequence[Sequence[str]], jobs: int, deadline_s: float = DEADLINE_S) -> list[tuple[str, str]]:
    """Run each chain of tasks (:func:`run_task`'s names) in a process of its own, at most `jobs` (1 or more)
    at once; returns (chain, why) for each chain that failed or ran past `deadline_s`, the chain named by its
    tasks ("cycle_kernels then commands"). A hang-up, like Ctrl-C and SIGTERM (which the command line makes
    end a command), stops the chains and what they started."""
    if jobs < 1:
        raise ValueError(f"jobs: {jobs}, not 1 or more")
    # two threads whatever the machine: a plain trace of 4 MB or more is then cut into chunks, whose code
    # a machine with more cores needs; the CPU engine, and never a server
    env = dict(os.environ, GPUAN_THREADS="2", GPUAN_DEVICE="cpu", GPUAN_SERVER="0")
    failed: list[tuple[str, str]] = []
    with _hang_up_ends(), tempfile.TemporaryDirectory(prefix="gpuan-precompile-") as scratch:
        waiting = [" then ".join(chain) for chain in chains]
        tasks = dict(zip(waiting, chains))
        running: dict[str, tuple[subprocess.Popen, float]] = {}
        try:
            while waiting or running:
                while waiting and len(running) < jobs:
                    name = waiting.pop(0)
                    # stderr to a file, not a pipe: a child that says much would block on a full pipe; a
                    # session of its own, so that a chain stopped takes what it started with it
                    with open(_err_path(scratch, name), "wb") as err:
                        child = subprocess.Popen(
                            python_running(f"from gpuan.cli.precompile import run_tasks; "
                                           f"run_tasks({list(tasks[name])!r}, {scratch!r})"),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=env,
                            start_new_session=True,
                        )  # fmt: skip
                    running[name] = (child, time.monotonic())
                name, child, late = _first_done(running, deadline_s)
                del running[name]
                if late:
                    _stop(child)
                    failed.append((name, f"still compiling after {deadline_s:.0f} s: stopped"))
                elif child.returncode:
                    with open(_err_path(scratch, name), "rb") as err:
                        lines = err.read().decode(errors="replace").strip().splitlines()
                    why = " / ".join(lines[-3:]) if lines else f"exit code {child.returncode}"
                    failed.append((name, why))
        finally:
            for child, _ in running.values():
                _stop(child)
    return failed


def _err_path(scratch: str, name: str) -> str:
    """Return the file that chain `name`'s process writes its stderr to."""
    return os.path.join(scratch, name.replace(" ", "_") + ".err")


@contextmanager
def _hang_up_ends() -> Iterator[None]:
    """Within the block, a hang-up (SIGHUP: the terminal closed) raises SystemExit, as SIGTERM does in a
    command (gpuan.cli), so that the chains, each in a session of its own which the signal does not reach,
    are stopped on the way out. Off the main thread, where Python sets no handler, nothing changes."""
    try:
        previous = signal.signal(signal.SIGHUP, lambda signum, frame: sys.exit(128 + signum))
    except (ValueError, AttributeError):  # not the main thread; no SIGHUP (Windows)
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGHUP, previous)


def _first_done(
    running: dict[str, tuple[subprocess.Popen, float]], deadline_s: float
) -> tuple[str, subprocess.Popen, bool]:
    """Return the first of the `running` processes to end or to run past `deadline_s`: (name, process,
    whether it ran past the deadline)."""
    while True:
        for name, (child, started) in running.items():
            if child.poll() is not None:
                return name, child, False
            if time.monotonic() - started > deadline_s:
                return name, child, True
        time.sleep(0.05)


def _stop(child: subprocess.Popen) -> None:
    """Stop `child` and every process of its session, and wait for it."""
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except OSError:  # already gone
        pass
    child.wait()


def run_tasks(names: Sequence[str], scratch: str) -> None:
    """Run the tasks `names` in turn in this process (:func:`run_task`)."""
    for name in names:
        run_task(name, scratch)


def run_task(name: str, scratch: str) -> None:
    """Run task `name` (one of :data:`CHAINS`') in this process, writing what it writes under `scratch`;
    raises ValueError for a name that is none of them."""
    from gpuan.cli import first_run

    if name == "commands":
        _commands(Path(scratch) / "commands")
    elif name in ("cycle_kernels", "stream_loop"):
        getattr(first_run, name)()
    else:
        raise ValueError(f"no precompile task {name!r}")


def _commands(directory: Path) -> None:
    """Write a run of two ranks (one gzipped, one plain, both over 4 MB inflated, so that two threads scan
    each, and named without their rank) and a directory of one small trace that gives its rank after its
    events, with more distinct strings than a string table sized for its bytes holds at first (two an event,
    whatever the rounding of the table's size) and B/E pairs; run each CPU command on them as a user would.
    Raises if a command fails."""
    import contextlib
    import io

    from gpuan.cli import main
    from gpuan.synth.kineto import write_kineto_trace

    run_dir, out = directory / "run", directory / "out"
    gz, plain = run_dir / "host_a.json.gz", run_dir / "host_b.json"
    run_dir.mkdir(parents=True)
    out.mkdir()
    for rank, path in enumerate((gz, plain)):
        write_kineto_trace(path, target_bytes=5 << 20, rank=rank, world_size=2, seed=rank)
    late = directory / "late" / "trace.json"
    late.parent.mkdir()
    events = ",".join(
        [f'{{"ph": "X", "cat": "c{i}", "name": "k{i}", "pid": 0, "tid": 7, "ts": {i}, "dur": 1}}' for i in range(3000)]
        + [
            f'{{"ph": "{ph}", "cat": "user_annotation", "name": "span", "pid": 0, "tid": 1, "ts": {i}}}'
            for i, ph in enumerate("BBEE")
        ]
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
