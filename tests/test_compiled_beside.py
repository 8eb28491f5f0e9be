"""Compiling an analysis' kernels in a process of their own on a command's first run
(gpuan.jit_cache.compiled_beside): the other process's code is the code the command then calls, and the
entries of gpuan.cli.first_run compile every kernel signature that real traces make the analyses use.

Each check runs in a fresh interpreter: in the test process, other tests have already compiled whatever
signatures real traces need, so a missing one would go unnoticed there."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _python(code: str, tmp_path: Path, **env: str) -> dict:
    """Run `code` in a fresh interpreter with this checkout's gpuan and `env` added; return the JSON object
    its last line printed."""
    import os

    full = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(tmp_path)]), **env)
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=full, cwd=tmp_path, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


_SIGNATURES = """
    import gc, json
    from numba.core.registry import CPUDispatcher

    def signatures(prefix):
        return {f"{d.py_func.__module__}.{d.py_func.__qualname__}": sorted(map(str, d.signatures))
                for d in gc.get_objects()
                if isinstance(d, CPUDispatcher) and d.py_func.__module__.startswith(prefix)}

    def added(before, after):
        return {k: [s for s in v if s not in before.get(k, [])] for k, v in after.items() if v != before.get(k, [])}
"""


def test_the_stream_loop_compiled_beside_is_the_one_a_prediction_calls(data_dir, tmp_path):
    trace = data_dir / "kineto" / "v100_rank0_ns_resolution.json.gz"
    out = _python(
        _SIGNATURES
        + f"""
    import gpuan
    from gpuan.streams import simulate
    from gpuan.streams.predict import predict
    from gpuan.cli.first_run import stream_loop

    stream_loop()
    before = signatures("gpuan.streams")
    result = predict(gpuan.load({str(trace)!r}), 2, stream=7)
    print(json.dumps({{"loop": before.get("gpuan.streams.simulate._run"),
                      "added": added(before, signatures("gpuan.streams")), "speedup": result.speedup}}))
    """,
        tmp_path,
    )
    assert len(out["loop"]) == 1
    assert out["added"] == {}, "the prediction compiled what stream_loop had not"
    assert out["speedup"] > 1


def test_the_cycle_kernels_compiled_beside_cover_real_searches(data_dir, tmp_path):
    kineto = data_dir / "kineto"
    traces = [
        kineto / "dlrm_8rank_nccl",  # 8 ranks, NCCL streams beside compute
        kineto / "cpu_ddp_gloo_4rank_slow_rank1_step2",  # CPU operators, 4 ranks
        kineto / "v100_ddp_6steps_trace_diff_test.json.gz",
        kineto / "mi300x_xdit_sd35_rank0.json.gz",  # 200k events: long sequences
    ]
    out = _python(
        _SIGNATURES
        + f"""
    import gpuan
    from gpuan import cycles
    from gpuan.cli.first_run import cycle_kernels

    cycle_kernels()
    before = signatures("gpuan.cycles")
    found = {{}}
    for path in {[str(p) for p in traces]!r}:
        for kind in ("kernel", "cpu_op"):
            found[f"{{path}} {{kind}}"] = cycles.analyse(gpuan.load(path), kind=kind).summary["events"]
    print(json.dumps({{"compiled": len(before), "added": added(before, signatures("gpuan.cycles")),
                      "found": found}}))
    """,
        tmp_path,
    )
    assert out["compiled"] >= 10
    assert out["added"] == {}, "a real search compiled what cycle_kernels had not"
    assert all(n > 0 for key, n in out["found"].items() if "kernel" in key and "gloo" not in key)


_MODULE = """
import time
from numba import njit

@njit(cache=True)
def add_one(x):
    return x + 1

def warm():
    add_one(1)

def slow():
    time.sleep(600)
"""


def test_compiled_beside_compiles_in_another_process_and_the_caller_loads_it(tmp_path):
    (tmp_path / "beside_mod.py").write_text(_MODULE)
    out = _python(
        """
    import json, os
    import beside_mod
    from gpuan.jit_cache import compiled_beside, compiled_on_disk

    cold = compiled_on_disk(beside_mod.add_one)
    with compiled_beside(beside_mod.add_one, "beside_mod:warm") as compiled:
        started = getattr(compiled, "__self__", None) is not None
        compiled()
    here = len(beside_mod.add_one.signatures)
    value = beside_mod.add_one(41)
    print(json.dumps({"cold": cold, "started": started, "on_disk": compiled_on_disk(beside_mod.add_one),
                      "compiled_here_before": here, "value": value,
                      "cache_hits": sum(beside_mod.add_one.stats.cache_hits.values())}))
    """,
        tmp_path,
        NUMBA_CACHE_DIR=str(tmp_path / "numba"),
    )
    assert out["cold"] is False and out["started"] is True
    assert out["on_disk"] is True and out["compiled_here_before"] == 0
    assert out["value"] == 42 and out["cache_hits"] == 1

    # the cache is warm now: nothing starts, and waiting returns at once
    again = _python(
        """
    import json
    import beside_mod
    from gpuan.jit_cache import compiled_beside

    with compiled_beside(beside_mod.add_one, "beside_mod:slow") as compiled:
        started = getattr(compiled, "__self__", None) is not None
        compiled()
    print(json.dumps({"started": started}))
    """,
        tmp_path,
        NUMBA_CACHE_DIR=str(tmp_path / "numba"),
    )
    assert again["started"] is False


def test_an_error_while_compiling_beside_stops_the_other_process(tmp_path):
    (tmp_path / "beside_mod.py").write_text(_MODULE)
    out = _python(
        """
    import json
    import beside_mod
    from gpuan.jit_cache import compiled_beside

    child = None
    try:
        with compiled_beside(beside_mod.add_one, "beside_mod:slow") as compiled:
            child = compiled.__self__
            raise ValueError("the trace could not be read")
    except ValueError as e:
        print(json.dumps({"error": str(e), "returncode": child.returncode}))
    """,
        tmp_path,
        NUMBA_CACHE_DIR=str(tmp_path / "numba"),
    )
    assert out["error"] == "the trace could not be read"
    assert out["returncode"] not in (None, 0)  # killed, not waited for through its 600 s


def test_no_process_starts_on_one_core(tmp_path):
    (tmp_path / "beside_mod.py").write_text(_MODULE)
    out = _python(
        """
    import json, os
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    import beside_mod
    from gpuan.jit_cache import compiled_beside

    with compiled_beside(beside_mod.add_one, "beside_mod:slow") as compiled:
        started = getattr(compiled, "__self__", None) is not None
    print(json.dumps({"cores": len(os.sched_getaffinity(0)), "started": started}))
    """,
        tmp_path,
        NUMBA_CACHE_DIR=str(tmp_path / "numba"),
    )
    assert out == {"cores": 1, "started": False}
