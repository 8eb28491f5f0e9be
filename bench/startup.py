"""Command start-up: what a user waits for before gpuan does any work, process start included.

    python bench/startup.py [--out bench/results] [--repeat 7]

Each command is run as a fresh process (`sys.executable -m gpuan ...`, as the console script does) and
timed from outside, best of `--repeat`. The anchors, measured in the same run: a bare interpreter
(`python -c pass`) and the imports gpuan's work needs (numpy + pyarrow, and numba). Rows: `--version`,
`--help`, a usage error, and `gpuan info` on the smallest real trace of ../shared/data (a whole command
on a small trace: reading, analysis and the console report).

A Markdown table goes to <out>/startup-<date>-<machine>.md with the machine, date and commit.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest import git_commit, machine_info, save_report, versions  # noqa: E402  (shared helpers of the benchmarks)

SMALL_TRACE = DATA / "kineto" / "a100_triton_example.json.gz"


def best_of(argv: list[str], repeat: int) -> float:
    """Return the fastest wall time, in seconds, of `repeat` fresh runs of `argv` (output discarded)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)
        times.append(time.perf_counter() - start)
    return min(times)


def rows(repeat: int) -> list[tuple[str, float]]:
    """Return (what, seconds) for the anchors and the gpuan commands."""
    py, gpuan = [sys.executable], [sys.executable, "-m", "gpuan"]
    runs = [
        ("anchor: python -c pass", [*py, "-c", "pass"]),
        ("anchor: import numpy, pyarrow", [*py, "-c", "import numpy, pyarrow"]),
        ("anchor: import numpy, pyarrow, numba", [*py, "-c", "import numpy, pyarrow, numba"]),
        ("gpuan --version", [*gpuan, "--version"]),
        ("gpuan --help", [*gpuan, "--help"]),
        ("gpuan sol --help", [*gpuan, "sol", "--help"]),
        ("gpuan streams T --streams 0 (usage error)", [*gpuan, "streams", "T", "--streams", "0"]),
    ]
    if SMALL_TRACE.is_file():
        runs.append((f"gpuan info {SMALL_TRACE.name} (whole command)", [*gpuan, "info", str(SMALL_TRACE)]))
    best_of(runs[-1][1], 1)  # the numba cache and the page cache warm, as on a user's second run
    return [(what, best_of(argv, repeat)) for what, argv in runs]


def report(measured: list[tuple[str, float]], repeat: int) -> str:
    """Return the Markdown report of the measured rows, each against the bare interpreter."""
    info = machine_info()
    bare = measured[0][1]
    lines = [
        f"# gpuan start-up, {time.strftime('%Y-%m-%d')} on {info['cpu']} ({info['cores']} cores)",
        f"commit {git_commit()}; {versions(('numpy', 'pyarrow', 'numba'))}",
        "",
        f"Fresh processes, best of {repeat}, wall time from outside (process start included).",
        "",
        "| what | seconds | x python -c pass |",
        "|---|---|---|",
    ]
    lines += [f"| {what} | {seconds:.3f} | {seconds / bare:.1f} |" for what, seconds in measured]
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(REPO / "bench" / "results"))
    p.add_argument("--repeat", type=int, default=7)
    args = p.parse_args()
    text = report(rows(args.repeat), args.repeat)
    print(text)
    print(f"wrote {save_report(args.out, 'startup', machine_info(), text)}")


if __name__ == "__main__":
    main()
