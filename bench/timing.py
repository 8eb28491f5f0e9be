"""How the benchmarks time what they measure (issue 22): fresh processes, the first call apart.

A CLI user starts a new process and pays the first call of the work: numba's on-disk cache loads (or
its compiles, with a cold cache), lazy imports, the first touches of fresh memory. So each measured path
runs in `runs` fresh processes (:data:`DEFAULT_RUNS`), each of which times the FIRST call of the timed
function apart and, where useful, a second (warm) call in the same process. A row reports the median of
the fresh processes' first calls, their min-max, and the median of the warm calls; never a best of N.
Anchors are measured the same way in the same run, and ratios are against their medians.

Child side: :func:`first_and_warm` times the calls, :func:`emit` prints the result as one tagged JSON
line. Parent side: :func:`fresh_runs` runs a command in `n` fresh processes and returns what each
printed, :func:`cold_cache_run` runs it once more with numba's cache in a new empty directory,
:func:`checkout_env` and :func:`checkout_commit` run and name another checkout's gpuan (a baseline),
:func:`alternating` runs this checkout and a baseline in turn and :func:`completed` sorts their runs;
:func:`spread` and :func:`median` summarise, :func:`method_note` says all this in a report.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RESULT_TAG = "BENCH-RESULT "
DEFAULT_RUNS = 5


# ---------------------------------------------------------------------------------------------------
# Child side


def first_and_warm(fn: Callable[[], Any], warm: int = 1) -> tuple[float, list[float], Any]:
    """Call `fn` 1 + `warm` times in this process; return (seconds of the first call, seconds of each
    warm call, the last call's result). The previous result is dropped before each warm call, so two
    results are never held at once."""
    t = time.perf_counter()
    out = fn()
    first = time.perf_counter() - t
    warms = []
    for _ in range(warm):
        out = None
        t = time.perf_counter()
        out = fn()
        warms.append(time.perf_counter() - t)
    return first, warms, out


def numba_functions_run() -> dict[str, int]:
    """Return, per gpuan module, how many of its numba functions have run in this process (have a compiled
    signature: loaded from numba's on-disk cache or compiled); empty where numba was not even imported."""
    if "numba" not in sys.modules:
        return {}
    from numba.core.dispatcher import Dispatcher

    out: dict[str, int] = {}
    for name, module in list(sys.modules.items()):
        if name == "gpuan" or name.startswith("gpuan."):
            ran = sum(isinstance(v, Dispatcher) and bool(v.signatures) for v in list(vars(module).values()))
            if ran:
                out[name] = ran
    return out


def emit(result: dict[str, Any]) -> None:
    """Print `result` as the tagged JSON line that :func:`fresh_runs` reads back, with ``numba`` added:
    :func:`numba_functions_run` at the end of the process's work."""
    print(RESULT_TAG + json.dumps({"numba": numba_functions_run(), **result}), flush=True)


# ---------------------------------------------------------------------------------------------------
# Parent side


class FreshRunError(RuntimeError):
    """A fresh process failed, timed out or printed no result; the message says which and why."""


def _one_run(cmd: Sequence[str], env: dict[str, str] | None, cwd: Any, timeout: float | None) -> dict[str, Any]:
    t = time.perf_counter()
    try:
        proc = subprocess.run(list(cmd), env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise FreshRunError(f"timed out after {timeout} s") from e
    wall = time.perf_counter() - t
    lines = [line for line in proc.stdout.splitlines() if line.startswith(RESULT_TAG)]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or ["no output"])[-1]
        raise FreshRunError(f"exit {proc.returncode}: {tail[:300]}")
    result = json.loads(lines[-1][len(RESULT_TAG) :])
    result["wall_s"] = wall
    return result


def fresh_runs(
    cmd: Sequence[str],
    n: int = DEFAULT_RUNS,
    *,
    env: dict[str, str] | None = None,
    cwd: Any = None,
    timeout: float | None = None,
    echo: Callable[[dict[str, Any]], str] | None = None,
) -> list[dict[str, Any]]:
    """Run `cmd` `n` times, each in a new process, one after the other; return what each printed on its
    last :data:`RESULT_TAG` line (a JSON object), with ``wall_s`` added: the whole process, start to exit.
    `echo` turns a result into a few words printed as it comes (on the current line). Raises
    FreshRunError where a process fails."""
    out = []
    for _ in range(n):
        r = _one_run(cmd, env, cwd, timeout)
        if echo is not None:
            print(" " + echo(r), end="", flush=True)
        out.append(r)
    return out


def checkout_env(checkout: Path) -> dict[str, str]:
    """Return this process's environment with `checkout` first on PYTHONPATH: a child started with it
    imports that checkout's gpuan (a baseline's, or this one's rather than an installed copy). Without
    PYTHONDONTWRITEBYTECODE, as a user's shell has it: with it, a checkout whose .pyc files are stale (an edit
    since its last import) compiles those modules in every child, 0.1-0.2 s of each first call."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return dict(env, PYTHONPATH=os.pathsep.join(filter(None, [str(checkout), os.environ.get("PYTHONPATH")])))


def checkout_commit(checkout: Path) -> str:
    """Return "commit <short hash>" of a checkout, or that it has no git history."""
    r = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return f"commit {r.stdout.strip()}" if r.returncode == 0 else "no git history: name it with --baseline-name"


def alternating(one: Callable[[Path], dict[str, Any] | str], runs: int, this: Path, baseline: Path | None) -> dict:
    """Call one(this) `runs` times, each followed by one(baseline) where a baseline is given, so both see the
    same load; return their results (a dict, or the text of why that run failed) as {"this": [...],
    "baseline": [...]}."""
    if baseline is not None and not baseline.is_dir():
        raise SystemExit(f"{baseline}: no such checkout to compare with")
    out: dict[str, list] = {"this": [], "baseline": []}
    for _ in range(runs):
        out["this"].append(one(this))
        if baseline is not None:
            out["baseline"].append(one(baseline))
    return out


def completed(rows: Sequence[dict[str, Any] | str]) -> tuple[list[dict[str, Any]], str | None]:
    """Return the runs of `rows` that completed, and the first failure's text where none did (else None)."""
    done = [r for r in rows if isinstance(r, dict)]
    return done, (str(rows[0]) if rows and not done else None)


def cold_cache_run(
    cmd: Sequence[str], *, env: dict[str, str] | None = None, cwd: Any = None, timeout: float | None = None
) -> dict[str, Any]:
    """Run `cmd` once with ``NUMBA_CACHE_DIR`` pointing at a new empty directory (removed after), so every
    numba function that the process calls compiles: a user's first command after an install or an
    upgrade. Returns its result as :func:`fresh_runs` does."""
    env = dict(os.environ if env is None else env)
    with tempfile.TemporaryDirectory(prefix="gpuan-cold-numba-") as empty:
        env["NUMBA_CACHE_DIR"] = empty
        return _one_run(cmd, env, cwd, timeout)


@dataclass(frozen=True)
class Spread:
    """The median, min and max of a few measurements."""

    median: float
    low: float
    high: float
    n: int

    def cell(self, digits: int = 3, scale: float = 1.0) -> str:
        """Return "median (min-max)", each value times `scale` with `digits` decimals."""
        m, lo, hi = (f"{v * scale:,.{digits}f}" for v in (self.median, self.low, self.high))
        return m if self.n == 1 else f"{m} ({lo}–{hi})"


def spread(values: Sequence[float]) -> Spread:
    """Return the median, min and max of `values` (at least one)."""
    return Spread(statistics.median(values), min(values), max(values), len(values))


def median(values: Sequence[float]) -> float:
    """Return the median of `values` (at least one)."""
    return statistics.median(values)


def warm_median(results: Sequence[dict[str, Any]], key: str = "warm_s") -> float | None:
    """Return the median of every warm call of `results` (each a list under `key`), or None if none."""
    values = [v for r in results for v in r.get(key) or []]
    return statistics.median(values) if values else None


def numba_note(results: Sequence[dict[str, Any]], cold: dict[str, Any] | None = None, key: str = "first_s") -> str:
    """Return what numba did in these runs (from :func:`emit`'s ``numba``): no numba function ran, or which
    ran (loaded from the on-disk cache in the first call; compiled there when the cache is cold), and the
    cold cache's first call from `cold`'s `key` where it was measured."""
    ran: dict[str, int] = {}
    for r in results:
        for module, count in (r.get("numba") or {}).items():
            ran[module] = max(ran.get(module, 0), count)
    if not ran:
        return "no numba function ran on this path: nothing compiles on first use"
    where = ", ".join(f"{module} {count}" for module, count in sorted(ran.items()))
    text = (
        f"numba functions ran ({where}): in each process the first call loads them from numba's on-disk cache; "
        "with a cold cache (a new install, a changed source) it compiles them"
    )
    if cold is not None and key in cold:
        return text + f": {cold[key]:.3f} s in one process with an empty NUMBA_CACHE_DIR"
    return text


def method_note(runs: int, warm: str = "the second call in the same process") -> str:
    """Return the report's line on the method, shared by every benchmark."""
    return (
        f"method: each row runs in {runs} fresh Python processes. 'first' is the first call of the timed "
        "function in a process (numba cache loads or compiles, lazy imports, first touches of memory: what a "
        "CLI user pays, less the interpreter's start and the module imports before the call): the median of "
        f"the {runs} processes, then their min–max. 'warm' is the median of {warm}. Never a best of N; "
        "ratios are of medians."
    )
