"""Converting a Kineto trace larger than memory under a ceiling (``gpuan convert --max-memory``).

    python bench/convert.py [--big-mb 36864] [--check-mb 2048] [--max-memory 2G] [--dir /work/big]

Two traces of ../shared/tools/gen_kineto_trace.py (a real PyTorch 2.x layout), generated into --dir and
reused (never committed):
  - the big one (default 36 GiB, 1.5x this machine's 24 GB) is converted with ``gpuan convert
    --max-memory``: wall and CPU seconds, MB/s, peak resident memory of the process (the command as a user
    runs it, process start included), against the ceiling; then ``gpuan info`` of its Parquet file;
  - the check one (default 2 GiB) gives ``gpuan info --format json`` read whole in memory, and the same
    after ``gpuan convert --max-memory`` (in several parts at that size): the two must be equal.
The anchor, measured in the same run, is ``gpuan convert`` of the check trace in memory (its MB/s and peak
memory: what the ceiling saves). A Markdown report goes to <out>/convert-<date>-<machine>.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest import git_commit, machine_info, save_report, versions  # noqa: E402  (shared helpers of the benchmarks)

GENERATOR = REPO.parent / "shared" / "tools" / "gen_kineto_trace.py"


def ensure_trace(directory: Path, size_mb: int) -> Path:
    """Return a generated trace of about `size_mb` MiB in `directory`, making it the first time."""
    path = directory / f"gen_kineto_{size_mb}mb.json"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        subprocess.run([sys.executable, str(GENERATOR), str(tmp), "--size-mb", str(size_mb)], check=True)
        tmp.rename(path)
    return path


def run(cmd: list[str]) -> dict:
    """Run one command in a fresh process; returns its wall and CPU seconds, peak RSS and output."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own usage, not the largest child's so far
        wall = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {stderr.strip()}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "peak": usage.ru_maxrss * 1024,
            "stdout": stdout, "stderr": stderr}  # fmt: skip


def gpuan(*args: object) -> list[str]:
    return [sys.executable, "-m", "gpuan", *map(str, args)]


def info_json(text: str) -> dict:
    """Return gpuan info's JSON without what names the file read (the two inputs differ in that alone)."""
    doc = json.loads(text)
    for key in ("source", "path", "format", "file"):
        doc.pop(key, None)
    doc.get("summary", {}).pop("source", None)
    return doc


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--big-mb", type=int, default=36864)
    p.add_argument("--check-mb", type=int, default=2048)
    p.add_argument("--max-memory", default="2G")
    p.add_argument("--check-max-memory", default="900M", help="ceiling for the check trace (several parts)")
    p.add_argument("--dir", default="/tmp/gpuan-bench", help="where the generated traces are kept")
    p.add_argument("--out", default=str(REPO / "bench" / "results"))
    args = p.parse_args()
    d = Path(args.dir)
    d.mkdir(parents=True, exist_ok=True)
    lines = []
    load_before = os.getloadavg()

    check = ensure_trace(d, args.check_mb)
    mb = check.stat().st_size / 2**20
    print(f"check trace {check} ({mb:,.0f} MiB)", flush=True)
    whole = run(gpuan("info", check, "--format", "json"))
    anchor = run(gpuan("convert", check, "-o", d / "check-whole.parquet"))
    parts = run(gpuan("convert", check, "--max-memory", args.check_max_memory, "-o", d / "check-parts.parquet"))
    from_parts = run(gpuan("info", d / "check-parts.parquet", "--format", "json"))
    same = info_json(whole["stdout"]) == info_json(from_parts["stdout"])
    lines.append(f"| convert in memory (anchor), {mb:,.0f} MiB | {anchor['wall']:.1f} | {anchor['cpu']:.1f} | "
                 f"{mb / anchor['wall']:,.0f} | {anchor['peak'] / 2**30:.2f} | – |")  # fmt: skip
    lines.append(f"| convert --max-memory {args.check_max_memory}, {mb:,.0f} MiB | {parts['wall']:.1f} | "
                 f"{parts['cpu']:.1f} | {mb / parts['wall']:,.0f} | {parts['peak'] / 2**30:.2f} | "
                 f"{'under' if parts['peak'] < _bytes(args.check_max_memory) else 'OVER'} |")  # fmt: skip
    print(lines[-2], lines[-1], f"info equal: {same}", sep="\n", flush=True)

    big = ensure_trace(d, args.big_mb)
    gb = big.stat().st_size / 2**30
    print(f"big trace {big} ({gb:,.1f} GiB)", flush=True)
    out = d / "big.parquet"
    conv = run(gpuan("convert", big, "--max-memory", args.max_memory, "-o", out))
    under = conv["peak"] < _bytes(args.max_memory)
    verdict = "under" if under else "OVER"
    lines.append(f"| convert --max-memory {args.max_memory}, {gb:,.1f} GiB | {conv['wall']:.1f} | {conv['cpu']:.1f} | "
                 f"{gb * 1024 / conv['wall']:,.0f} | {conv['peak'] / 2**30:.2f} | {verdict} |")  # fmt: skip
    print(lines[-1], conv["stderr"].strip(), flush=True)
    info = run(gpuan("info", out, "--top", "3"))
    lines.append(f"| info of its Parquet ({out.stat().st_size / 2**20:,.0f} MiB) | {info['wall']:.1f} | "
                 f"{info['cpu']:.1f} | – | {info['peak'] / 2**30:.2f} | – |")  # fmt: skip
    print(lines[-1], flush=True)

    machine = machine_info()
    report = "\n".join([
        f"# Converting a trace larger than memory, {dt.date.today()} on {machine['cpu']} ({machine['cores']} cores, "
        f"{machine['ram'] / 2**30:.0f} GiB)",
        f"commit {git_commit()}; {versions(('numpy', 'pyarrow', 'numba'))}",
        "",
        "Each row is one fresh `python -m gpuan` process, as a user runs it (process start included); peak is the",
        "process's resident high-water mark. Traces: ../shared/tools/gen_kineto_trace.py. Load average (1 min)",
        f"before {load_before[0]:.1f}, after {os.getloadavg()[0]:.1f} on {machine['cores']} cores.",
        "",
        "| what | wall s | CPU s | MB/s | peak RSS GiB | vs ceiling |",
        "|---|---:|---:|---:|---:|---|",
        *lines,
        "",
        f"`gpuan info --format json` of the {mb:,.0f} MiB trace read whole and of its Parquet file converted in parts: "
        f"{'equal' if same else 'DIFFERENT'}.",
        "",
        "`gpuan info` of the big trace's Parquet file:",
        "",
        "```text",
        info["stdout"].rstrip(),
        "```",
        "",
    ])  # fmt: skip
    path = save_report(args.out, "convert", machine, report)
    print(f"wrote {path}")
    return 0 if same and under else 1


def _bytes(size: str) -> int:
    from gpuan.trace.bounded import parse_size

    return parse_size(size)


if __name__ == "__main__":
    sys.exit(main())
