"""Compiling an analysis' kernels in a process of their own on a command's first run
(gpuan.jit_cache.compiled_beside): the other process's code is the code the command then calls, and the
entries of gpuan.cli.first_run compile every kernel signature that real traces make the analyses use.

Each check runs in a fresh interpreter: in the test process, other tests have already compiled whatever
signatures real traces need, so a missing one would go unnoticed there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _python(code: str, tmp_path: Path, **env: str) -> dict:
    """Run `code` in a fresh interpreter with this checkout's gpuan and `env` added; return the JSON object
    its last line printed."""
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
    from gpuan.cli.first_run import cycle_functions, cycle_kernels

    cycle_kernels()
    before = signatures("gpuan.cycles")
    found = {{}}
    for path in {[str(p) for p in traces]!r}:
        for kind in ("kernel", "cpu_op"):
            found[f"{{path}} {{kind}}"] = cycles.analyse(gpuan.load(path), kind=kind).summary["events"]
    after = signatures("gpuan.cycles")
    waited_for = [f"{{d.py_func.__module__}}.{{d.py_func.__qualname__}}" for d in cycle_functions()]
    print(json.dumps({{"compiled": len(before), "added": added(before, after), "found": found,
                      "used": sorted(k for k, v in after.items() if v), "waited_for": sorted(waited_for)}}))
    """,
        tmp_path,
    )
    assert out["compiled"] >= 10
    assert out["added"] == {}, "a real search compiled what cycle_kernels had not"
    # every kernel a search ran is one whose first compile in the command waits for the other process
    assert set(out["used"]) <= set(out["waited_for"]), set(out["used"]) - set(out["waited_for"])
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

_BESIDE = """
    import json
    import beside_mod
    from gpuan.jit_cache import compiled_beside, compiled_on_disk

    def stats(f):
        return {"hits": sum(f.stats.cache_hits.values()), "misses": sum(f.stats.cache_misses.values())}
"""


def _beside(code: str, tmp_path: Path, **env: str) -> dict:
    (tmp_path / "beside_mod.py").write_text(_MODULE)
    # two threads, whatever this machine's cores: a process starts only where a command may use two
    return _python(
        _BESIDE + code, tmp_path, **{"NUMBA_CACHE_DIR": str(tmp_path / "numba"), "GPUAN_THREADS": "2", **env}
    )


def test_a_kernel_compiled_beside_is_loaded_by_its_first_call(tmp_path):
    out = _beside(
        """
    on_disk = compiled_on_disk(beside_mod.add_one)
    with compiled_beside([beside_mod.add_one], "beside_mod:warm") as child:
        value = beside_mod.add_one(41)  # waits for the other process, then loads what it compiled
        print(json.dumps({"on_disk": on_disk, "started": child is not None, "returncode": child.returncode,
                          "value": value, **stats(beside_mod.add_one)}))
    """,
        tmp_path,
    )
    assert out == {"on_disk": False, "started": True, "returncode": 0, "value": 42, "hits": 1, "misses": 0}

    # the cache is warm now: nothing starts
    again = _beside(
        """
    with compiled_beside([beside_mod.add_one], "beside_mod:slow") as child:
        value = beside_mod.add_one(1)
    print(json.dumps({"started": child is not None, "value": value, **stats(beside_mod.add_one)}))
    """,
        tmp_path,
    )
    assert again == {"started": False, "value": 2, "hits": 1, "misses": 0}


def test_leaving_the_block_stops_a_compile_not_waited_for(tmp_path):
    out = _beside(
        """
    try:
        with compiled_beside([beside_mod.add_one], "beside_mod:slow") as child:
            raise ValueError("the trace could not be read")
    except ValueError as e:
        error = str(e)
    with compiled_beside([beside_mod.add_one], "beside_mod:slow") as unneeded:
        pass  # the kernel was never called (no events of the kind asked for, say)
    print(json.dumps({"error": error, "returncodes": [child.returncode, unneeded.returncode],
                      "compile_restored": "compile" not in vars(beside_mod.add_one)}))
    """,
        tmp_path,
    )
    assert out["error"] == "the trace could not be read"
    assert out["returncodes"][0] < 0 and out["returncodes"][1] < 0  # killed, not waited for through 600 s
    assert out["compile_restored"]


def test_one_thread_starts_no_process(tmp_path):
    out = _beside(
        """
    with compiled_beside([beside_mod.add_one], "beside_mod:slow") as child:
        pass
    print(json.dumps({"started": child is not None}))
    """,
        tmp_path,
        GPUAN_THREADS="1",
    )
    assert out == {"started": False}


def test_a_first_simulation_loads_the_loop_compiled_beside(tmp_path):
    """The command's own flow with an empty cache: nothing of the loop is compiled in this process."""
    out = _python(
        """
    import json
    import numpy as np
    from gpuan.cli.first_run import stream_functions
    from gpuan.devices import lookup
    from gpuan.jit_cache import compiled_beside
    from gpuan.streams import simulate
    from gpuan.streams.workload import KERNEL, Workload

    n = 5
    w = Workload(names=["k"] * n, kind=np.full(n, KERNEL, np.int8), start=np.arange(n) * 10.0, dur=np.full(n, 5.0),
                 gap=np.full(n, 5.0), bytes=np.zeros(n, np.int64), pageable=np.zeros(n, bool),
                 grid=np.full(n, 64), threads=np.full(n, 256), registers=np.full(n, 40),
                 shared_memory=np.zeros(n, np.int64), device=0, stream=3)
    with compiled_beside(stream_functions(), "gpuan.cli.first_run:stream_loop") as child:
        total = simulate.simulate(w, simulate.Settings(lookup("A100"), 3)).total
    loop = [simulate._run, simulate._spread]
    print(json.dumps({"started": child is not None, "total": total,
                      "misses": sum(sum(f.stats.cache_misses.values()) for f in loop),
                      "hits": sum(sum(f.stats.cache_hits.values()) for f in loop)}))
    """,
        tmp_path,
        NUMBA_CACHE_DIR=str(tmp_path / "numba"),
        GPUAN_THREADS="2",
    )
    assert out["started"] and out["total"] > 0
    assert out["misses"] == 0 and out["hits"] >= 1, out


def test_an_index_of_older_source_is_not_compiled_code(tmp_path):
    """After an upgrade numba's index on disk is that of the old source: nothing in it is this code's."""
    first = _beside(
        """
    beside_mod.add_one(1)
    print(json.dumps({"on_disk": compiled_on_disk(beside_mod.add_one)}))
    """,
        tmp_path,
    )
    (tmp_path / "beside_mod.py").write_text(_MODULE.replace("x + 1", "x + 10"))  # the "upgrade": another size
    after = _python(
        _BESIDE
        + """
    print(json.dumps({"on_disk": compiled_on_disk(beside_mod.add_one), "value": beside_mod.add_one(1)}))
    """,
        tmp_path,
        NUMBA_CACHE_DIR=str(tmp_path / "numba"),
    )
    assert first == {"on_disk": True} and after == {"on_disk": False, "value": 11}
