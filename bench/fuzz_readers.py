"""The long fuzz run of every reader, by hand: the cases of tests/test_fuzz_readers.py, drawn from a seeded
random generator instead of hypothesis, round-robin over the readers, for a number of cases or minutes.

    python bench/fuzz_readers.py --minutes 15 [--cases N] [--seed S] [--out bench/results]

Prints, per reader, the cases tried and how they ended: "ok" (exit 0, the same events as the independent
reading), "rejected" (exit 2, one line, and the independent reading rejects it too), "refused" (exit 2, one
line, where the independent reading finds events: allowed, counted to show how strict a reader is), and
failures split into tracebacks, hangs and wrong results, each with its mutation and seed (rerun one with
--replay READER:SEED). Runs on one core (GPUAN_THREADS=1, NUMBA_NUM_THREADS=1). With --out, writes
<out>/fuzz-<date>-<machine>.md with the machine, date and commit.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import random
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

os.environ.setdefault("GPUAN_THREADS", "1")
os.environ.setdefault("NUMBA_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import test_fuzz_readers as fz  # noqa: E402  (the cases live with the CI test, one definition of them)
from ingest import git_commit, machine_info, machine_slug  # noqa: E402  (shared helpers of the benchmarks)


def kind_of(failure: str) -> str:
    """Return "traceback", "hang" or "wrong" for a Failure's text."""
    if "hang:" in failure:
        return "hang"
    return "traceback" if "Traceback (most recent call last)" in failure else "wrong"


def run(readers: list[str], cases: int | None, minutes: float | None, seed: str) -> tuple[dict, list, float]:
    """Run cases round-robin until `cases` are done or `minutes` have passed; return (outcomes per reader,
    failures as (reader, seed, kind, text), seconds)."""
    counts: dict[str, Counter] = defaultdict(Counter)
    failures = []
    start = time.monotonic()
    i = 0
    while (cases is None or i < cases) and (minutes is None or time.monotonic() - start < minutes * 60):
        reader = readers[i % len(readers)]
        case_seed = f"{reader}-{seed}-{i // len(readers)}"
        try:
            outcome, _ = fz.fuzz_one(reader, fz.Choices(rng=random.Random(case_seed)))
        except fz.Failure as e:
            outcome = kind_of(str(e))
            failures.append((reader, case_seed, outcome, str(e)))
        counts[reader][outcome] += 1
        i += 1
        if i % 500 == 0:
            print(f"{i:,} cases, {time.monotonic() - start:,.0f} s, {len(failures)} failures", file=sys.stderr)
    return counts, failures, time.monotonic() - start


def table(counts: dict[str, Counter]) -> list[str]:
    """Return the per-reader outcome table as Markdown lines."""
    cols = ("ok", "rejected", "refused", "traceback", "hang", "wrong")
    lines = ["| reader | cases | " + " | ".join(cols) + " |", "|---|---:|" + "---:|" * len(cols)]
    total = Counter()
    for reader, c in counts.items():
        total.update(c)
        lines.append(f"| {reader} | {sum(c.values()):,} | " + " | ".join(f"{c[k]:,}" for k in cols) + " |")
    lines.append(f"| all | {sum(total.values()):,} | " + " | ".join(f"{total[k]:,}" for k in cols) + " |")
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=int, help="stop after this many cases")
    p.add_argument("--minutes", type=float, help="stop after this many minutes")
    p.add_argument("--seed", default="long", help="seed of the run (cases are READER-SEED-N)")
    p.add_argument("--readers", default=",".join(fz.READERS), help="comma-separated readers")
    p.add_argument("--replay", metavar="READER:SEED", help="run one case and print how it ends")
    p.add_argument("--out", type=Path, help="write fuzz-<date>-<machine>.md here")
    args = p.parse_args()
    if not fz.DATA.is_dir():
        print(f"real data not found at {fz.DATA}", file=sys.stderr)
        return 2
    if args.replay:
        reader, seed = args.replay.split(":", 1)
        try:
            outcome, case = fz.fuzz_one(reader, fz.Choices(rng=random.Random(seed)))
            print(outcome, case.mutation)
        except fz.Failure as e:
            print(e)
        return 0
    if args.cases is None and args.minutes is None:
        args.cases = 1000
    readers = args.readers.split(",")
    # the commit the run's code came from: read before the run, as others may commit during it
    commit, info = git_commit(), machine_info()
    counts, failures, seconds = run(readers, args.cases, args.minutes, args.seed)
    lines = table(counts)
    kinds = Counter(k for _, _, k, _ in failures)
    summary = (
        f"{sum(sum(c.values()) for c in counts.values()):,} cases in {seconds / 60:,.1f} min: "
        f"tracebacks {kinds['traceback']}, hangs {kinds['hang']}, wrong results {kinds['wrong']}"
    )
    print("\n".join(lines))
    print(summary)
    for reader, seed, kind, text in failures[:20]:
        print(f"\n--- {kind}: --replay {reader}:{seed}\n" + "\n".join(text.splitlines()[:2] + text.splitlines()[-2:]))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        path = args.out / f"fuzz-{dt.date.today()}-{machine_slug(info)}.md"
        body = [
            "# Reader fuzzing, long run (bench/fuzz_readers.py)",
            "",
            f"- machine: {info['cpu']}, {info['cores']} cores, Python {platform.python_version()}, run on one core"
            " (GPUAN_THREADS=1)",
            f"- date: {dt.datetime.now().isoformat(timespec='minutes')}",
            f"- commit: {commit}",
            f"- command: python bench/fuzz_readers.py {' '.join(sys.argv[1:])}",
            "",
            *lines,
            "",
            summary,
            "",
            *[f"- {kind}: `--replay {reader}:{seed}`: {text.splitlines()[0]}" for reader, seed, kind, text in failures],
        ]
        path.write_text("\n".join(body) + "\n")
        print(f"wrote {path}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
