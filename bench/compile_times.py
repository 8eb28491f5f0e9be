"""What a command's first run after an install compiles: numba's compile time per function.

    python bench/compile_times.py [--runs 3] [--baseline DIR [--baseline-name NAME]] -- info TRACE

Runs ``gpuan ARGS`` in fresh processes with ``NUMBA_CACHE_DIR`` a new empty directory (bench/timing.py's
cold_cache_run), with numba's compile events recorded: per numba function, the seconds its compile took
itself (exclusive: less the functions it compiled on the way, which numba compiles from inside it) and in
all (inclusive). With ``--baseline`` each run is followed by one of the baseline checkout's gpuan (run from
it, PYTHONPATH), so that both see the same load. A Markdown report goes to
<out>/compile-<date>-<machine>.md: the command's wall time and numba's total per run, then the functions
that took longest (medians over the runs).
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
from timing import FreshRunError, alternating, checkout_commit, checkout_env, cold_cache_run, completed, emit  # noqa: E402

#: functions listed in the report
TOP = 12


def child(argv: list[str]) -> None:
    """In this process: run ``gpuan argv`` with numba's compile events recorded; emit the wall time, numba's
    total and each function's exclusive and inclusive seconds."""
    import contextlib
    import io

    from numba.core import event

    from gpuan.cli import main

    with event.install_recorder("numba:compile") as rec:
        t = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            main(argv)
        wall = time.perf_counter() - t
    stack: list[list] = []
    functions: dict[str, list[float]] = {}
    for at, ev in rec.buffer:
        f = ev.data["dispatcher"].py_func
        if ev.is_start:
            stack.append([at, f"{f.__module__}.{f.__qualname__}", 0.0])
            continue
        began, name, inner = stack.pop()
        took = at - began
        if stack:
            stack[-1][2] += took
        own = functions.setdefault(name, [0.0, 0.0])
        own[0] += took - inner
        own[1] = max(own[1], took)
    emit({"wall_s": wall, "compile_s": sum(v[0] for v in functions.values()), "functions": functions})


def runs_of(checkout: Path, argv: list[str]) -> dict | str:
    """One cold-cache run of ``gpuan argv`` with the gpuan of `checkout`; its result or why it failed."""
    env = checkout_env(checkout)
    print(f"  {checkout} ...", end="", flush=True)
    try:
        r = cold_cache_run([sys.executable, str(Path(__file__).resolve()), "--child", *argv], env=env, cwd=checkout)
    except FreshRunError as e:
        print(f" failed: {e}")
        return str(e)
    print(f" {r['wall_s']:.1f} s, numba compiles {r['compile_s']:.1f} s")
    return r


def report(argv: list[str], results: dict[str, list], names: dict[str, str], runs: int) -> str:
    """Return the Markdown report of the runs of each checkout."""
    info = machine_info()
    lines = [
        f"# numba compile times of a first run, {dt.date.today()} on {info['cpu']} ({info['cores']} cores)",
        f"commit {git_commit()}; {versions(('gpuan', 'numpy', 'pyarrow', 'numba'))}",
        "",
        f"`gpuan {' '.join(argv)}`, {runs} fresh processes per checkout with NUMBA_CACHE_DIR a new empty "
        "directory, alternating (this checkout first); medians, every run listed. Exclusive: the seconds of a "
        "function's own compile, less the functions compiled from inside it.",
        "",
        "| checkout | command s, median | numba compiles s, median | runs (command / compiles) |",
        "|---|---:|---:|---|",
    ]
    done = {}
    for key in results:
        rows, failure = completed(results[key])
        done[key] = rows
        if failure:
            lines.append(f"| {names[key]} | failed: {failure} | | |")
        if not rows:
            continue
        each = ", ".join(f"{r['wall_s']:.1f} / {r['compile_s']:.1f}" for r in rows)
        wall, comp = (statistics.median(r[k] for r in rows) for k in ("wall_s", "compile_s"))
        lines.append(f"| {names[key]} | {wall:.1f} | {comp:.1f} | {each} |")
    for key, rows in done.items():
        if not rows:
            continue
        medians = {
            name: [statistics.median(r["functions"].get(name, [0.0, 0.0])[i] for r in rows) for i in (0, 1)]
            for name in {n for r in rows for n in r["functions"]}
        }
        lines += ["", f"{names[key]}: the {TOP} longest compiles (median s)", "",
                  "| function | exclusive | inclusive |", "|---|---:|---:|"]  # fmt: skip
        for name, (own, total) in sorted(medians.items(), key=lambda kv: -kv[1][0])[:TOP]:
            lines.append(f"| `{name}` | {own:.2f} | {total:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(REPO / "bench" / "results"))
    ap.add_argument("--runs", type=int, default=3, help="cold-cache processes per checkout (default 3)")
    ap.add_argument("--baseline", metavar="DIR", help="another checkout to alternate with")
    ap.add_argument("--baseline-name", help="what to call the baseline in the report (default: its git commit)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("command", nargs=argparse.REMAINDER, help="the gpuan command and its arguments, after --")
    args = ap.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.child:
        child(command)
        return 0
    if not command:
        ap.error("name the gpuan command to run after --, e.g. -- info TRACE")
    base = Path(args.baseline).resolve() if args.baseline else None
    results = alternating(lambda checkout: runs_of(checkout, command), args.runs, REPO, base)
    names = {"this": "this checkout", "baseline": f"{base} ({args.baseline_name or checkout_commit(base)})"}
    text = report(command, results, names, args.runs)
    print(text)
    print(f"wrote {save_report(args.out, 'compile', machine_info(), text)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
