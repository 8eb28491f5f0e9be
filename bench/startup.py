"""Whole commands, process start included: what a user waits for from the shell prompt to the prompt.

    python bench/startup.py [--out bench/results] [--repeat 7] [--sizes 50k,250k,1M] [--dir DIR]
                            [--no-cold | --only-cold] [--no-profiles] [--peer 'uplifter -i {trace}']
                            [--baseline DIR [--baseline-name NAME]] [--server]

Every row is a fresh process (``sys.executable -m gpuan ...``, as the console script runs it) timed from
outside with a wall clock around ``subprocess.run`` (interpreter start, imports, numba's cache load, the
work, the report and the exit), ``--repeat`` times in a row. The table gives the **median** of those
fresh processes and their spread (min-max), never the best of N. Their numba cache is warm on disk
(an untimed run before each series compiles whatever the series needs, once), which is what a user
pays on every run but the first. The **first call** after installing, with an empty numba cache (it
compiles the scanner and the analysis' kernels), is measured too, once per command, with
``NUMBA_CACHE_DIR`` pointed at a fresh empty directory (``--no-cold`` skips it: minutes; ``--only-cold``
measures only it; with ``--baseline`` the baseline's first call follows each, with its own empty cache).

With ``--server``, every whole command is also timed handed to a warm gpuan server (``gpuan server
start``, its sockets in a directory of the benchmark's own), and on a converted copy of each trace (the
Parquet cache ``gpuan convert`` writes beside it), by itself and in the server. A server row's CPU time
is the client's alone (the command runs in the server's child): its wall time is what the user waits.
Every other row runs with ``GPUAN_SERVER=off``.

Anchors in the same run: a bare interpreter (``python -c pass``), the imports every command's work
needs (numpy + pyarrow; and numba), and a compiled peer where one is given (``--peer``, a command with
``{trace}`` for the trace; uplifter, the Go tool ``gpuan cycles`` replaces, where it is on PATH).

Traces, generated once into ``--dir`` (kept between runs, never in the repository):

- ``llm-<size>.json.gz``: ``gpuan.synth.cycles.llm_kernel_trace`` (a vLLM-style prefill, then decode
  steps of 32 layers, a side stream) written as Kineto JSON with the kernel events CUPTI writes and
  nothing else: 227k kernels make a 4.8 MB .json.gz, like the issue's 4.7 MB trace of 227k kernels.
- ``training-50k.json.gz``: ``gpuan.synth.kineto`` (a whole profile of a 32-layer training job:
  CPU ops with record_shapes, runtime calls, flows, kernels; ~50k kernels in 420k events), and
  ``gen-50k.json.gz``: ``../shared/tools/gen_kineto_trace.py`` at a size of ~50k kernels
  (``--no-profiles`` skips both).

A Markdown report goes to <out>/startup-<date>-<machine>.md with the machine, date, commit and the load
average before and after (the machine may be shared).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
GEN_TOOL = REPO.parent / "shared" / "tools" / "gen_kineto_trace.py"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from cycles import parse_size, size_label  # noqa: E402  (shared helpers of the benchmarks)
from ingest import git_commit, machine_info, save_report, versions  # noqa: E402
from timing import checkout_commit  # noqa: E402

SMALL_TRACE = DATA / "kineto" / "a100_triton_example.json.gz"
DEFAULT_DIR = Path(tempfile.gettempdir()) / "gpuan-bench-startup"
COMMANDS = ("info", "cycles", "sol")
PROFILE_KERNELS = 50_000
TRAINING_KERNELS_PER_STEP = 1_490  # gpuan.synth.kineto, 32 layers
GEN_KERNELS_PER_MB = 3_180 / 11.8  # ../shared/tools/gen_kineto_trace.py, default layers
TRACE_START_NS = 5_129_387_241_123_456  # a boot-relative clock, as Kineto's


# ---------------------------------------------------------------------------------------------------
# Traces


def _kernel_head(name: str) -> str:
    """Return the %-template of one kernel event of `name` (stream, ts, dur, correlation to fill in),
    laid out as libkineto writes it, with a launch configuration drawn from the name."""
    h = zlib.crc32(name.encode())
    regs, grid, block, smem = 16 * (1 + h % 8), 1 + (h >> 3) % 1024, 64 << ((h >> 13) % 4), ((h >> 15) % 4) * 16384
    quoted = name.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    return (
        '  {\n    "ph": "X", "cat": "kernel", "name": "' + quoted + '", "pid": 0, "tid": %d,\n'
        '    "ts": %d.%03d, "dur": %d.%03d,\n    "args": {\n'
        '      "queued": 0, "device": 0, "context": 1,\n'
        f'      "stream": %d, "correlation": %d, "registers per thread": {regs}, "shared memory": {smem},\n'
        f'      "blocks per SM": {grid / 132:.6f}, "warps per SM": {grid / 132 * block / 32:.6f}, '
        f'"grid": [{grid}, 1, 1], "block": [{block}, 1, 1],\n'
        '      "est. achieved occupancy %%": 0\n    }\n  }'
    )


def write_llm_trace(path: Path, n_kernels: int) -> int:
    """Write gpuan.synth.cycles' LLM-inference kernels (at least `n_kernels`) as a gzipped Kineto trace of
    kernel events only; returns the number of kernels."""
    from gpuan.synth.cycles import llm_kernel_trace

    events = llm_kernel_trace(n_kernels)[0].events
    names = events.column("name").combine_chunks()
    ids = names.indices.to_numpy(zero_copy_only=False)
    heads = [_kernel_head(n) for n in names.dictionary.to_pylist()]
    ts = events.column("ts").to_numpy() + TRACE_START_NS
    dur, stream = events.column("dur").to_numpy(), events.column("stream").to_numpy()
    corr = events.column("correlation").to_numpy()
    tmp = path.with_suffix(".tmp")
    with gzip.open(tmp, "wt", compresslevel=6) as f:
        f.write(
            '{\n  "schemaVersion": 1,\n  "deviceProperties": [\n    {"id": 0, "name": "NVIDIA H100 80GB HBM3", '
            '"totalGlobalMem": 85520809984, "computeMajor": 9, "computeMinor": 0, "numSms": 132}\n  ],\n'
            '  "traceEvents": [\n'
        )
        step = 65536
        for a in range(0, ids.size, step):
            rows = zip(ids[a : a + step].tolist(), stream[a : a + step].tolist(), ts[a : a + step].tolist(),
                       dur[a : a + step].tolist(), corr[a : a + step].tolist())  # fmt: skip
            text = ",\n".join(heads[i] % (s, t // 1000, t % 1000, d // 1000, d % 1000, s, c) for i, s, t, d, c in rows)
            f.write(("" if a == 0 else ",\n") + text)
        f.write(
            '\n  ],\n  "traceName": "llm.json",\n  "displayTimeUnit": "ms",\n'
            '  "baseTimeNanoseconds": 1731000000000000000\n}\n'
        )
    tmp.replace(path)
    return int(ids.size)


def _gzip_file(src: Path, dst: Path) -> None:
    """Write `src` gzipped (level 6) to `dst`."""
    tmp = dst.with_suffix(".tmp")
    with open(src, "rb") as f, gzip.open(tmp, "wb", compresslevel=6) as g:
        shutil.copyfileobj(f, g, 16 << 20)
    tmp.replace(dst)


@dataclass
class TraceFile:
    """A generated trace: its label, path and what it holds."""

    label: str
    path: Path
    what: str


def ensure_traces(directory: Path, sizes: list[int], profiles: bool) -> list[TraceFile]:
    """Return the benchmark's traces in `directory`, writing those that are missing (not timed)."""
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for n in sizes:
        path = directory / f"llm-{size_label(n)}.json.gz"
        if not path.exists():
            print(f"writing {path} ...", flush=True)
            write_llm_trace(path, n)
        out.append(TraceFile(f"llm {size_label(n)}", path, "kernels only"))
    if not profiles:
        return out
    path = directory / f"training-{size_label(PROFILE_KERNELS)}.json.gz"
    if not path.exists():
        from gpuan.synth.kineto import write_kineto_trace

        print(f"writing {path} ...", flush=True)
        write_kineto_trace(path, steps=-(-PROFILE_KERNELS // TRAINING_KERNELS_PER_STEP), layers=32, gzip=True)
    out.append(TraceFile(f"training {size_label(PROFILE_KERNELS)}", path, "whole profile, gpuan.synth.kineto"))
    if GEN_TOOL.is_file():
        path = directory / f"gen-{size_label(PROFILE_KERNELS)}.json.gz"
        if not path.exists():
            print(f"writing {path} ...", flush=True)
            plain = directory / "gen.json"
            size_mb = str(round(PROFILE_KERNELS / GEN_KERNELS_PER_MB))
            subprocess.run([sys.executable, str(GEN_TOOL), str(plain), "--size-mb", size_mb], check=True,
                           stdout=subprocess.DEVNULL)  # fmt: skip
            _gzip_file(plain, path)
            plain.unlink()
        out.append(TraceFile(f"gen {size_label(PROFILE_KERNELS)}", path, "whole profile, gen_kineto_trace.py"))
    return out


# ---------------------------------------------------------------------------------------------------
# Timing


@dataclass
class Row:
    """One command's fresh-process wall times and CPU times (user + system, all its threads), in seconds;
    `base`, `base_cpu`: the same command's in the baseline checkout, run alternately with these (empty
    without one)."""

    what: str
    times: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    base: list[float] = field(default_factory=list)
    base_cpu: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.times)


def user_env(**extra: str) -> dict[str, str]:
    """Return this environment as a user's shell has it, plus `extra`: without PYTHONDONTWRITEBYTECODE (set
    on some CI and sandbox machines), so that the untimed first run writes gpuan's .pyc files, as
    ``pip install`` does, and no timed run pays for compiling gpuan's Python modules again (0.2-0.3 s);
    with ``GPUAN_SERVER=off`` unless `extra` says otherwise (no row runs in a server left running)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "GPUAN_SERVER")}
    return {**env, "GPUAN_SERVER": "off", **extra}


def wall(
    argv: list[str], *, where: Path = REPO, env: dict[str, str] | None = None, code: int = 0
) -> tuple[float, float]:
    """Return the wall time and the CPU time (user + system of the process and its threads), in seconds, of
    one fresh run of `argv` in the directory `where` (output discarded); an exit code other than `code`
    stops the benchmark (the timing of a failure is no timing of the command). CPU time is what load from
    other work on the machine changes least."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    r = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=where, env=env or user_env())
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != code:
        raise SystemExit(f"{shlex.join(argv)} exited {r.returncode}: {r.stderr.decode()[-2000:]}")
    return seconds, (after.ru_utime - used.ru_utime) + (after.ru_stime - used.ru_stime)


def series(
    what: str,
    argv: list[str],
    repeat: int,
    code: int = 0,
    baseline: Path | None = None,
    env: dict[str, str] | None = None,
) -> Row:
    """Return `repeat` fresh runs of `argv` (in `env`, default :func:`user_env`), after one untimed run
    (numba's cache filled and on disk). With a `baseline` checkout (``python -m gpuan`` there runs its
    gpuan), its runs alternate with these, so that both see the same load."""
    other = {"where": baseline, "env": user_env(PYTHONPATH=str(baseline))} if baseline else None
    wall(argv, code=code, env=env)
    if other:
        wall(argv, code=code, **other)
    row = Row(what)
    for _ in range(repeat):
        seconds, cpu = wall(argv, code=code, env=env)
        row.times.append(seconds)
        row.cpu.append(cpu)
        if other:
            seconds, cpu = wall(argv, code=code, **other)
            row.base.append(seconds)
            row.base_cpu.append(cpu)
    base = f" (baseline {statistics.median(row.base):.3f} s)" if row.base else ""
    print(f"  {what}: median {row.median:.3f} s{base}", flush=True)
    return row


def cold(what: str, argv: list[str], baseline: Path | None = None) -> Row:
    """Return the one run of `argv` with an empty numba cache (everything it calls compiles first); with a
    `baseline` checkout, then one run of its gpuan with another empty cache."""

    def first_call(where: Path, **extra: str) -> tuple[float, float]:
        with tempfile.TemporaryDirectory(prefix="gpuan-cold-numba-") as empty:
            return wall(argv, where=where, env=user_env(NUMBA_CACHE_DIR=empty, **extra))

    seconds, cpu = first_call(REPO)
    row = Row(what, [seconds], [cpu])
    if baseline:
        seconds, cpu = first_call(baseline, PYTHONPATH=str(baseline))
        row.base, row.base_cpu = [seconds], [cpu]
    base = f" (baseline {row.base[0]:.2f} s)" if row.base else ""
    print(f"  {what} (cold cache): {row.times[0]:.2f} s{base}", flush=True)
    return row


# ---------------------------------------------------------------------------------------------------
# The run and the report


@dataclass
class Measured:
    """Everything one run measured."""

    startup: list[Row]
    per_trace: list[tuple[str, list[Row]]]
    cold: list[Row]
    traces: list[TraceFile]


def run(args: argparse.Namespace) -> Measured:
    """Measure everything."""
    py, gpuan = [sys.executable], [sys.executable, "-m", "gpuan"]
    base = Path(args.baseline).resolve() if args.baseline else None
    traces = ensure_traces(Path(args.dir), [parse_size(s) for s in args.sizes.split(",")], args.profiles)
    r = args.repeat
    if args.only_cold:
        return Measured([series("python -c pass", [*py, "-c", "pass"], r)], [], _cold_rows(traces, base), traces)
    print("start-up", flush=True)
    startup = [
        series("python -c pass", [*py, "-c", "pass"], r),
        series("python -c 'import numpy, pyarrow'", [*py, "-c", "import numpy, pyarrow"], r),
        series("python -c 'import numpy, pyarrow, numba'", [*py, "-c", "import numpy, pyarrow, numba"], r),
        series("gpuan --version", [*gpuan, "--version"], r, baseline=base),
        series("gpuan --help", [*gpuan, "--help"], r, baseline=base),
        series("gpuan streams T --streams 0 (usage error)", [*gpuan, "streams", "T", "--streams", "0"], r, code=2),
    ]
    with _server(args.server) as server:
        if SMALL_TRACE.is_file():
            small = [*gpuan, "info", str(SMALL_TRACE)]
            startup.append(series(f"gpuan info {SMALL_TRACE.name} (2 KB)", small, r, baseline=base))
            if server:
                startup.append(series(f"gpuan info {SMALL_TRACE.name} (2 KB), server", small, r, env=server))
        per_trace = []
        for t in traces:
            print(f"{t.label}: {t.path}", flush=True)
            rows = [series(f"gpuan {c}", [*gpuan, c, str(t.path)], r, baseline=base) for c in COMMANDS]
            if server:
                converted = _converted(t.path)
                for c in COMMANDS:
                    rows.append(series(f"gpuan {c}, server", [*gpuan, c, str(t.path)], r, env=server))
                    rows.append(series(f"gpuan {c}, converted", [*gpuan, c, str(converted)], r))
                    rows.append(series(f"gpuan {c}, converted, server", [*gpuan, c, str(converted)], r, env=server))
            if args.peer:
                rows.append(series(f"peer: {args.peer}", shlex.split(args.peer.format(trace=t.path)), r))
            per_trace.append((t.label, rows))
    return Measured(startup, per_trace, _cold_rows(traces, base) if args.cold else [], traces)


@contextlib.contextmanager
def _server(wanted: bool) -> Iterator[dict[str, str] | None]:
    """Yield the environment of commands that run in a warm gpuan server started for the benchmark (its
    socket in a directory of its own), stopped at the end; None where not `wanted`."""
    if not wanted:
        yield None
        return
    runtime = tempfile.mkdtemp(prefix="gpuan-bench-server-", dir="/tmp")
    env = user_env(XDG_RUNTIME_DIR=runtime, GPUAN_SERVER="on")
    gpuan = [sys.executable, "-m", "gpuan"]
    r = subprocess.run([*gpuan, "server", "start", "--idle", "60"], env=env, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"gpuan server start failed: {r.stderr}")
    print(f"  {r.stdout.strip()}", flush=True)
    try:
        yield env
    finally:
        subprocess.run([*gpuan, "server", "stop"], env=env, capture_output=True)
        shutil.rmtree(runtime, ignore_errors=True)


def _converted(trace: Path) -> Path:
    """Return a copy of `trace` in a ``converted`` directory beside it with a fresh Parquet cache (``gpuan
    convert``), made once."""
    copy = trace.parent / "converted" / trace.name
    copy.parent.mkdir(exist_ok=True)
    if not copy.exists() or copy.stat().st_size != trace.stat().st_size:
        shutil.copyfile(trace, copy)
    subprocess.run([sys.executable, "-m", "gpuan", "convert", str(copy)], env=user_env(), check=True,
                   capture_output=True)  # fmt: skip
    return copy


def _cold_rows(traces: list[TraceFile], baseline: Path | None) -> list[Row]:
    """Return each command's first call with an empty numba cache on the second trace (the first if only one),
    and that of ``gpuan streams`` on its main stream (7 in every generated trace)."""
    mid = traces[min(1, len(traces) - 1)]
    print(f"cold numba cache, {mid.label}", flush=True)
    gpuan = [sys.executable, "-m", "gpuan"]
    rows = [cold(f"gpuan {c} ({mid.label})", [*gpuan, c, str(mid.path)], baseline) for c in COMMANDS]
    streams = [*gpuan, "streams", str(mid.path), "--streams", "2", "--stream", "7"]
    return [*rows, cold(f"gpuan streams --streams 2 --stream 7 ({mid.label})", streams, baseline)]


def _size(path: Path) -> str:
    return f"{path.stat().st_size / 1e6:.1f} MB"


def _spread(times: list[float]) -> str:
    return f"{min(times):.3f}-{max(times):.3f}"


def _cells(row: Row, bare: float) -> list[str]:
    """Median wall time, spread, median CPU time, x python -c pass; then the baseline's median wall and CPU
    times and this checkout's speed-up over it in each (dashes without a baseline)."""
    cells = [f"{row.median:.3f}", _spread(row.times), f"{statistics.median(row.cpu):.3f}", f"{row.median / bare:.1f}"]
    if not row.base:
        return [*cells, "–", "–", "–"]
    base, base_cpu = statistics.median(row.base), statistics.median(row.base_cpu)
    speed = f"{base / row.median:.2f}x / {base_cpu / statistics.median(row.cpu):.2f}x"
    return [*cells, f"{base:.3f}", f"{base_cpu:.3f}", speed]


def report(m: Measured, args: argparse.Namespace, load: tuple[tuple[float, ...], ...]) -> str:
    """Return the Markdown report."""
    info = machine_info()
    bare = m.startup[0].median
    base = None
    if args.baseline:
        base = f"`{args.baseline}` ({args.baseline_name or checkout_commit(Path(args.baseline))})"
    lines = [
        f"# gpuan whole commands and start-up, {time.strftime('%Y-%m-%d')} on {info['cpu']} ({info['cores']} cores)",
        f"commit {git_commit()}; {versions(('numpy', 'pyarrow', 'numba', 'pandas'))}",
        f"load average before {', '.join(f'{x:.2f}' for x in load[0])}; "
        f"after {', '.join(f'{x:.2f}' for x in load[1])} (on {info['cores']} cores)",
        "",
        f"Fresh processes timed from outside (wall clock, process start and exit included): the median of "
        f"{args.repeat} runs in a row and their spread, each series after one untimed run so that numba's cache "
        "is on disk (what a user pays on every run but the first). Not the best of N. CPU s: the median CPU "
        "time (user + system, every thread) of the same runs, what other work on a shared machine changes least.",
    ]
    if base:
        lines += [
            "",
            f"Baseline: the same commands in {base}, each of its runs alternating with this checkout's, so that "
            "both see the same load; speed-up = baseline median / this median.",
        ]
    columns = (
        "median s | min-max s | CPU s | x python -c pass | baseline median s | baseline CPU s | speed-up wall / CPU"
    )
    rule = "---:|---:|---:|---:|---:|---:|---:|"
    lines += ["", "## Start-up", "", f"| what | {columns} |", f"|---|{rule}"]
    lines += ["| " + " | ".join([r.what, *_cells(r, bare)]) + " |" for r in m.startup]
    lines += ["", "## Whole commands on generated traces", "", "| trace | .json.gz | what |", "|---|---:|---|"]
    lines += [f"| {t.label} | {_size(t.path)} | {t.what} |" for t in m.traces]
    if m.per_trace:
        lines += ["", f"| trace | command | {columns} | x peer |", f"|---|---|{rule}---:|"]
    for label, rows in m.per_trace:
        peer_row = rows[-1] if args.peer else None
        for r in rows:
            vs_peer = f"{r.median / peer_row.median:.2f}" if peer_row else "–"
            lines.append("| " + " | ".join([label, r.what, *_cells(r, bare), vs_peer]) + " |")
    if args.server:
        lines += ["", "Rows with *server*: the command handed to a warm `gpuan server` (started once for the run); "
                  "their CPU s is the client's alone, the command's own runs in the server's child. Rows with "
                  "*converted*: the same trace copied beside with its Parquet cache (`gpuan convert`), which "
                  "every command reads instead of the JSON."]  # fmt: skip
    if not args.peer and m.per_trace:
        which = shutil.which("uplifter")
        lines += ["", f"No compiled peer measured (`which uplifter`: {which or 'not installed'}; no Go toolchain "
                  "here): the anchor is `python -c pass`."]  # fmt: skip
    if m.cold:
        lines += [
            "",
            "## First call: empty numba cache",
            "",
            "One run each with `NUMBA_CACHE_DIR` pointed at a new empty directory: what the very first command "
            "after installing gpuan costs (it compiles the scanner and the analysis' kernels, then caches them).",
            "",
            "| command | seconds | CPU s | baseline seconds | baseline CPU s |",
            "|---|---:|---:|---:|---:|",
        ]
        for r in m.cold:
            base_cells = [f"{r.base[0]:.1f}", f"{r.base_cpu[0]:.1f}"] if r.base else ["–", "–"]
            lines.append("| " + " | ".join([r.what, f"{r.times[0]:.1f}", f"{r.cpu[0]:.1f}", *base_cells]) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(REPO / "bench" / "results"))
    p.add_argument("--repeat", type=int, default=7, help="fresh processes per row (default 7)")
    p.add_argument("--sizes", default="50k,250k,1M", help="kernels of the LLM traces (default 50k,250k,1M)")
    p.add_argument("--dir", default=str(DEFAULT_DIR), help=f"where the traces are written (default {DEFAULT_DIR})")
    p.add_argument("--no-cold", dest="cold", action="store_false", help="skip the empty-cache first calls")
    p.add_argument("--only-cold", action="store_true", help="only the empty-cache first calls (and python -c pass)")
    p.add_argument("--no-profiles", dest="profiles", action="store_false", help="LLM kernel traces only")
    p.add_argument("--peer", default=None, help="a compiled peer's command, {trace} for the trace")
    p.add_argument("--baseline", default=None, help="another gpuan checkout to time alternately (before/after)")
    p.add_argument("--baseline-name", default=None, help="what the baseline is (default: its git commit)")
    p.add_argument(
        "--server", action="store_true",
        help="also time the commands in a warm gpuan server and on converted traces (their Parquet cache)",
    )  # fmt: skip
    args = p.parse_args()
    before = os.getloadavg()
    measured = run(args)
    text = report(measured, args, (before, os.getloadavg()))
    print(text)
    print(f"wrote {save_report(args.out, 'startup', machine_info(), text)}")


if __name__ == "__main__":
    main()
