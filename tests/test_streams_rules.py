"""The simulator's rules on small hand-made workloads whose timelines are worked out by hand."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import numpy as np
import pytest

from gpuan.devices import find, lookup
from gpuan.streams.occupancy import blocks_per_sm
from gpuan.streams.simulate import Settings, issue_order, simulate
from gpuan.streams.workload import D2H, H2D, KERNEL, OTHER, Workload

#: a toy GPU: 2 SMs of 1024 threads (4 blocks of 256), no copy-engine time slicing
TOY = replace(lookup("H100 SXM5"), name="toy", sms=2, threads_per_sm=1024, copy_first_turn_ns=None, copy_turn_ns=None)


def ops(*rows: tuple) -> Workload:
    """A workload from (kind, duration, grid or 0, gap) rows; kernels have 256-thread blocks."""
    n = len(rows)
    kind = np.array([r[0] for r in rows], np.int8)
    dur = np.array([r[1] for r in rows], float)
    grid = np.array([r[2] for r in rows], np.int64)
    gap = np.array([r[3] if len(r) > 3 else 0.0 for r in rows], float)
    start = np.cumsum(gap + np.concatenate([[0.0], dur[:-1]]))
    return Workload(
        names=[f"op{i}" for i in range(n)], kind=kind, start=start, dur=dur, gap=gap,
        bytes=np.where(kind == KERNEL, 0, 1000), pageable=np.zeros(n, bool), grid=grid,
        threads=np.where(kind == KERNEL, 256, 0), registers=np.where(kind == KERNEL, 32, 0),
        shared_memory=np.zeros(n, np.int64), device=0, stream=0,
    )  # fmt: skip


def run(w: Workload, n: int, **kw) -> tuple[np.ndarray, np.ndarray]:
    settings = Settings(TOY, n, api_ns=0.0, **({"engines": (1, 1, 1)} | kw))
    tl = simulate(w, settings)
    return tl.start.reshape(n, -1), tl.end.reshape(n, -1)


def test_blocks_per_sm_from_each_limit():
    gtx = find("GeForce GTX 950")
    # threads (2048 / 256), registers (65536 / (64 x 1024)), registers and shared memory (2 x 48 KiB)
    assert blocks_per_sm(gtx, [256, 1024, 128], [28, 64, 255], [0, 0, 48 * 1024]).tolist() == [8, 4 // 4, 2]
    h100 = find("H100")
    # 228 KiB / (100,000 B rounded to 256 B + 1 KiB reserved) = 2; a 1-thread block is capped by 32 slots
    assert blocks_per_sm(h100, [128, 1], [32, 16], [100_000, 0]).tolist() == [2, 32]
    # registers are allocated per warp in 256s: 33 registers take 40 per thread, 2048 threads need 81920
    assert blocks_per_sm(h100, [1024], [33], [0]).tolist() == [1]


def test_a_kernel_alone_keeps_its_duration_and_waves():
    # 16 blocks on 2 SMs x 4 slots: 2 waves of 50 ns each
    start, end = run(ops((KERNEL, 100.0, 16)), 1)
    assert (start[0, 0], end[0, 0]) == (0.0, 100.0)


def test_concurrent_kernels_fill_the_tail_of_the_one_before():
    # 12 blocks: a full wave of 8, then 4 with 4 slots free; the second stream's kernel takes those 4
    # slots in the first kernel's second wave, and its other 8 blocks run in the third wave
    start, end = run(ops((KERNEL, 100.0, 12)), 2)
    assert end[0, 0] == 100.0
    assert (start[1, 0], end[1, 0]) == (50.0, 150.0)


def test_a_kernel_that_fills_the_gpu_waits_for_the_one_before():
    start, end = run(ops((KERNEL, 100.0, 16)), 2)
    assert (start[1, 0], end[1, 0]) == (100.0, 200.0)


def test_copies_one_way_take_turns_on_one_engine():
    start, end = run(ops((H2D, 10.0, 0)), 2)
    assert (start[0, 0], end[0, 0], start[1, 0], end[1, 0]) == (0.0, 10.0, 10.0, 20.0)


def test_time_sliced_engine_round_robin():
    # first turn 4, then turns of 2: S0 0-4, S1 4-6, S0 6-8, S1 8-10, S0 10-12, S1 12-14, S0 14-16 (done),
    # S1 alone 16-20
    start, end = run(ops((H2D, 10.0, 0)), 2, copy_first_turn_ns=4.0, copy_turn_ns=2.0)
    assert (start[0, 0], end[0, 0], start[1, 0], end[1, 0]) == (0.0, 16.0, 4.0, 20.0)


def test_copies_on_two_engines_share_the_bandwidth_equally():
    # two engines one way: both streams' copies move at once, each at half its single-stream speed
    tl = simulate(ops((H2D, 10.0, 0)), Settings(TOY, 2, api_ns=0.0, engines=(2, 1, 1)))
    assert tl.start.tolist() == [0.0, 0.0] and tl.end.tolist() == [20.0, 20.0]
    # a third stream waits for an engine, then shares with the copy still moving
    tl = simulate(ops((H2D, 10.0, 0)), Settings(TOY, 3, api_ns=0.0, engines=(2, 1, 1)))
    assert tl.end.tolist() == [20.0, 20.0, 30.0]


def test_directions_are_full_duplex_and_copies_do_not_slow_kernels():
    # stream 0: H2D 10 then D2H 10; stream 1 the same, so stream 1's H2D (10-20) overlaps stream 0's D2H
    start, end = run(ops((H2D, 10.0, 0), (D2H, 10.0, 0)), 2)
    assert end.tolist() == [[10.0, 20.0], [20.0, 30.0]]
    start, end = run(ops((H2D, 10.0, 0), (KERNEL, 100.0, 16)), 2)
    assert start[1, 0] == 10.0 and end[0, 1] == 110.0 and end[1, 1] == 210.0


def test_measured_gaps_are_kept_when_operations_move():
    start, end = run(ops((H2D, 10.0, 0), (KERNEL, 100.0, 16, 5.0)), 2)
    assert start[0, 1] == 15.0  # 10 + the 5 measured before it
    assert start[1, 1] == 115.0  # its H2D ended at 20, but the GPU is full until 115


def test_launch_orders():
    assert issue_order(2, 2, "breadth").tolist() == [[0, 0], [1, 0], [0, 1], [1, 1]]
    assert issue_order(2, 2, "depth").tolist() == [[0, 0], [0, 1], [1, 0], [1, 1]]
    assert issue_order(3, 2, "breadth").tolist() == [[0, 0], [1, 0], [0, 1], [1, 1], [0, 2], [1, 2]]
    assert issue_order(3, 2, "depth").tolist() == [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2]]
    with pytest.raises(ValueError):
        issue_order(2, 2, "random")


def test_pageable_copies_hold_the_host():
    # the host waits for each pageable copy, so with depth-first issue stream 1 cannot start before
    # stream 0's copy and kernel launch were issued; pinned copies of two streams share no host time
    w = replace(ops((H2D, 10.0, 0), (H2D, 10.0, 0)), pageable=np.array([True, True]))
    tl = simulate(w, Settings(TOY, 2, launch_order="depth", api_ns=0.0, engines=(2, 2, 1)))
    assert tl.issued.tolist() == [0.0, 10.0, 20.0, 30.0]


def test_a_block_too_big_for_the_gpu_is_refused():
    # 1024 threads x 255 registers: 32 warps of 8192 registers, four times an H100 SM's 65536
    w = replace(ops((KERNEL, 100.0, 4)), threads=np.array([1024]), registers=np.array([255]))
    with pytest.raises(ValueError, match="needs 262144 registers per block, a toy SM has 65536"):
        simulate(w, Settings(TOY, 2))


def nvprof_copy_then(path, kernel_fields: str, kernel: str):
    """Write an nvprof GPU trace of one H2D copy and then one kernel on a GTX 950 (`kernel_fields`: its
    Start to Throughput columns) to `path`, and return `path`."""
    path.write_text(
        "==1== Profiling result:\n"
        '"Start","Duration","Grid X","Grid Y","Grid Z","Block X","Block Y","Block Z","Registers Per Thread",'
        '"Static SMem","Dynamic SMem","Size","Throughput","Device","Context","Stream","Name"\n'
        "ms,us,,,,,,,,B,KB,KB,GB/s,,,,\n"
        '1.0,16.0,,,,,,,,,,89.8,5.1,"GeForce GTX 950 (0)","1","13","[CUDA memcpy HtoD]"\n'
        f'{kernel_fields}"GeForce GTX 950 (0)","1","13","{kernel}"\n'
    )
    return path


def test_a_trace_from_a_bigger_gpu_is_one_line_and_exit_2(tmp_path, capsys):
    # an nvprof trace whose kernel uses 200 KB of shared memory per block, simulated on a GTX 950 (96 KiB)
    trace = nvprof_copy_then(tmp_path / "big_smem.csv", "1.1,61.0,90,1,1,256,1,1,28,0,200,,,", "big_kernel(float*)")
    out = tmp_path / "p.json"
    from gpuan.cli import main

    assert main(["streams", str(trace), "--streams", "2", "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"gpuan: error: {trace}: kernel big_kernel")
    assert "bytes of shared memory per block" in err and "cannot run on that GPU" in err
    assert not out.exists()


def test_a_kernel_without_launch_sizes_is_predicted_under_a_stated_assumption(tmp_path, capsys):
    # the kernel row lost its grid. Worked by hand (2 streams, breadth, 2 us per call, one H2D engine): the
    # copies run 0-16 and 16-32 us, the kernels are ready 84 us after them, at 100 and 116 us, for 61 us.
    # Filling the device, stream 1's kernel waits for stream 0's: 161-222 us; as one block, it runs at once:
    # 116-177 us
    trace = nvprof_copy_then(tmp_path / "no_grid.csv", "1.1,61.0,,,,256,1,1,28,0,0,,,", "lost_grid(float*)")
    from gpuan.cli import main

    assert main(["streams", str(trace), "--streams", "2", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["undimensioned"]["kernels"] == 1 and doc["undimensioned"]["assumption"] == "device"
    assert doc["predicted_ns"] == pytest.approx(222_000)
    assert doc["undimensioned"]["predicted_ns_if"] == pytest.approx({"device": 222_000, "block": 177_000})
    assert doc["undimensioned"]["range_ns"] == pytest.approx([177_000, 222_000])
    assert main(["streams", str(trace), "--streams", "2", "--undimensioned", "block"]) == 0
    out = capsys.readouterr().out
    assert "1 of 1 kernels have no grid/block sizes; each is taken to be: one block" in out
    assert re.search(r"2 streams, predicted +0\.177 ms", out)
    assert "predicted with --undimensioned block: 0.177 ms, device: 0.222 ms" in out
    # the kernel's line shows the block it was taken to have, not the trace's 256 threads with no grid:
    # one warp; filling the device, one block per SM of a GTX 950 (6 SMs of 2048 threads, compute 5.2)
    assert "kernel lost_grid(float*): 1 blocks of 32, " in out and "(no launch sizes: assumed)" in out
    assert main(["streams", str(trace), "--streams", "2"]) == 0
    assert "kernel lost_grid(float*): 6 blocks of 2048, 1 per SM" in capsys.readouterr().out


@pytest.mark.parametrize("max_groups", [1, 2])
def test_few_groups_per_kernel_keep_the_rules(max_groups):
    # blocks freed beyond the allowed groups join a running group's wave: the rules still hold
    rng = np.random.default_rng(11)
    for _ in range(60):
        w = random_workload(rng)
        n = int(rng.integers(2, 6))
        tl = simulate(w, Settings(TOY, n, api_ns=0.0, max_groups=max_groups))
        start, end = tl.start.reshape(n, -1), tl.end.reshape(n, -1)
        assert (start[:, 1:] >= end[:, :-1] + w.gap[1:] - 1e-9).all() and (tl.start >= tl.issued).all()
        assert w.span - 1e-9 <= tl.total
        # a kernel can end sooner than alone only by its blocks joining a running wave: by under one block
        kernel = w.kind == KERNEL
        block = w.dur / -(-w.grid // (TOY.sms * 4))
        assert ((end - start)[:, kernel] >= w.dur[kernel] - block[kernel] - 1e-9).all()


def random_workload(rng: np.random.Generator) -> Workload:
    """A random stream of copies, kernels (every block fits an SM of TOY) and memsets."""
    m = int(rng.integers(1, 10))
    kind = rng.choice([H2D, D2H, KERNEL, OTHER], size=m, p=[0.3, 0.2, 0.4, 0.1]).astype(np.int8)
    gaps = np.concatenate([[0.0], rng.integers(0, 3, m - 1)])  # no gap before the first, as in a trace
    w = ops(*[(k, float(rng.integers(1, 40)) * 2.5, int(rng.integers(1, 24)), float(g)) for k, g in zip(kind, gaps)])
    return replace(w, threads=np.where(kind == KERNEL, rng.choice([32, 128, 256, 512], m), 0))


@pytest.mark.parametrize("seed", range(4))
def test_random_workloads_keep_the_rules(seed):
    rng = np.random.default_rng(seed)
    for _ in range(50):
        w = random_workload(rng)
        n, order = int(rng.integers(1, 6)), str(rng.choice(["breadth", "depth"]))
        tl = simulate(w, Settings(TOY, n, launch_order=order, api_ns=0.0, engines=(1, 1, 1)))
        start, end = tl.start.reshape(n, -1), tl.end.reshape(n, -1)
        # one stream alone is the single-stream trace again
        alone = simulate(w, Settings(TOY, 1, api_ns=0.0))
        np.testing.assert_allclose(alone.start, w.start, atol=1e-9)
        np.testing.assert_allclose(alone.end, w.start + w.dur, atol=1e-9)
        # in a stream, each operation waits for the one before plus the measured gap
        assert (start[:, 1:] >= end[:, :-1] + w.gap[1:] - 1e-9).all()
        assert (tl.start >= tl.issued).all()
        # a kernel never runs faster than alone on the GPU; with one engine a way, a copy moves alone, at
        # its single-stream speed, and copies one way never overlap
        dur = end - start
        kernel = w.kind == KERNEL
        assert (dur[:, kernel] >= w.dur[kernel] - 1e-9).all()
        for k in (H2D, D2H):
            one_way = w.kind == k
            np.testing.assert_allclose(dur[:, one_way], np.broadcast_to(w.dur[one_way], dur[:, one_way].shape))
            spans = sorted(zip(start[:, one_way].ravel(), end[:, one_way].ravel()))
            assert all(b[0] >= a[1] - 1e-9 for a, b in zip(spans, spans[1:]))
        assert tl.total >= w.span - 1e-9


def test_the_event_loop_runs_the_same_interpreted(tmp_path):
    # numba compiles the event loop; the same source run by Python (NUMBA_DISABLE_JIT=1) must give
    # bit-identical timelines, so the loop can be debugged as plain Python
    script = tmp_path / "twin.py"
    script.write_text(
        "import sys, numpy as np\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from test_streams_rules import TOY, random_workload\n"
        "from gpuan.streams.simulate import Settings, simulate\n"
        "rng = np.random.default_rng(7)\n"
        "rows = []\n"
        "for i in range(40):\n"
        "    w = random_workload(rng)\n"
        "    s = Settings(TOY, 1 + i % 5, launch_order=('breadth', 'depth')[i % 2], api_ns=0.5 * (i % 3),\n"
        "                 engines=(1 + i % 2, 1, 1), copy_first_turn_ns=(None, 12.5)[i % 2],\n"
        "                 copy_turn_ns=(None, 5.0)[i % 2])\n"
        "    tl = simulate(w, s)\n"
        "    rows.append(np.concatenate([tl.start, tl.end, tl.issued]))\n"
        "np.save(sys.argv[2], np.concatenate(rows))\n"
    )
    import os
    import subprocess
    import sys
    from pathlib import Path

    here = str(Path(__file__).parent)
    for jit, name in (("0", "compiled"), ("1", "interpreted")):
        env = dict(os.environ, NUMBA_DISABLE_JIT=jit)
        subprocess.run([sys.executable, str(script), here, str(tmp_path / name)], env=env, check=True)
    compiled, interpreted = (np.load(tmp_path / f"{n}.npy") for n in ("compiled", "interpreted"))
    assert compiled.size > 400 and np.array_equal(compiled, interpreted)


def test_the_event_loops_long_steps_are_inlined_at_most_twice():
    # numba inlines a closure of the compiled loop at every call site, transitively, and types each copy
    # anew: with its steps called in each branch the loop took over a minute to compile (its copies added
    # up to 1,191 lines). Counted here from the source, each step's copies, through the steps that call it
    import ast
    import inspect

    from gpuan.streams import simulate as module

    run = next(n for n in ast.parse(inspect.getsource(module)).body if getattr(n, "name", None) == "_run")
    steps = {n.name: n for n in run.body if isinstance(n, ast.FunctionDef)}

    def called(node) -> list[str]:
        return [c.func.id for c in ast.walk(node) if isinstance(c, ast.Call) and getattr(c.func, "id", None) in steps]

    copies = dict.fromkeys(steps, 0)
    pending = [name for node in run.body if not isinstance(node, ast.FunctionDef) for name in called(node)]
    while pending:
        name = pending.pop()
        copies[name] += 1
        pending += called(steps[name])
    assert len(steps) > 15 and copies["place_blocks"] >= 1 and copies["push"] >= 2
    long = {name: copies[name] for name, node in steps.items() if node.end_lineno - node.lineno >= 15}
    assert long and max(long.values()) <= 2, long


def test_workload_kinds_pageable_and_overheads_follow_their_rules(tmp_path):
    """The workload's kinds (a kernel; a memcpy by its direction, any other or none a device copy; anything
    else other), its pageable copies (by name, any case), its names, and the median gap of each transition,
    worked out one operation at a time here, on a stream of kernels, copies of every direction and memsets."""
    import gpuan
    from gpuan.streams.workload import KIND_NAMES, overheads, workload

    rng = np.random.default_rng(3)
    names = {
        "kernel": ["gemm", "relu"],
        "memcpy": ["Memcpy HtoD (Pageable -> Device)", "Memcpy DtoH (Device -> PAGEABLE)", "Memcpy DtoD", "memcpy"],
        "memset": ["Memset (Device)"],
    }
    cats = {"kernel": "kernel", "memcpy": "gpu_memcpy", "memset": "gpu_memset"}
    events, t = [], 0
    for _ in range(600):
        kind = ["kernel", "memcpy", "memset"][int(rng.integers(0, 3))]
        name = names[kind][int(rng.integers(0, len(names[kind])))]
        t += int(rng.integers(1, 50))
        dur = int(rng.integers(1, 20))
        events.append({"ph": "X", "cat": cats[kind], "name": name, "ts": t, "dur": dur, "pid": 0, "tid": 7,
                       "args": {"stream": 7, "device": 0}})  # fmt: skip
        t += dur
    path = tmp_path / "ops.json"
    path.write_text(json.dumps({"traceEvents": events}))
    w = workload(gpuan.load(path, use_cache=False))

    def kind_of(e: dict) -> int:
        if e["cat"] == "kernel":
            return KERNEL
        if e["cat"] == "gpu_memcpy":
            return {"HtoD": H2D, "DtoH": D2H}.get(e["name"].split()[1] if " " in e["name"] else "", 3)
        return OTHER

    assert w.kind.tolist() == [kind_of(e) for e in events]
    assert w.names == [e["name"] for e in events]
    assert w.pageable.tolist() == ["pageable" in e["name"].lower() for e in events]
    groups: dict[str, list[float]] = {}
    for i in range(1, len(w)):
        groups.setdefault(f"{KIND_NAMES[w.kind[i - 1]]}->{KIND_NAMES[w.kind[i]]}", []).append(float(w.gap[i]))
    assert overheads(w) == {k: float(np.median(v)) for k, v in sorted(groups.items())}
    assert len(groups) > 9
