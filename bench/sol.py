"""Speed-of-light scoring speed: 10M synthetic ops scored on the CPU (and the GPU where there is one).

    python bench/sol.py [--ops 10000000] [--distinct 2000] [--runs 5] [--out bench/results]

The ops are drawn from a few thousand distinct calls (GEMMs, attention, norms, elementwise, embedding,
copies, and unmodelled names) with the profiler's ``Input Dims`` / ``Input type`` / ``Concrete Inputs``
text, as a long trace has them. Timed: :func:`gpuan.sol.score_ops` from the op table to every score
column, in ``--runs`` fresh processes (bench/timing.py): in each, the table is built (not timed), then
the first call is timed apart (lazy imports, first touches of memory: what ``gpuan sol`` pays) and one
warm call after it; a row gives the median first call, their min-max and the median warm call. The
anchor, measured the same way in the same run: the straightforward way, one Python call per op (parse
its JSON, cost it, roofline it), on 200k ops drawn from the same calls.

A Markdown table goes to <out>/sol-<date>-<machine>.md with the machine, date and commit.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest import git_commit, machine_info, save_report, versions  # noqa: E402  (shared helpers of the benchmarks)
from timing import (  # noqa: E402  (how every benchmark times: fresh processes, the first call apart)
    DEFAULT_RUNS,
    FreshRunError,
    emit,
    first_and_warm,
    fresh_runs,
    method_note,
    numba_note,
    spread,
    warm_median,
)

from gpuan import devices, engine  # noqa: E402
from gpuan.sol.costs import Call, cost  # noqa: E402
from gpuan.sol.roofs import datasheet, peak_key  # noqa: E402
from gpuan.sol.score import OPS_SCHEMA, score_ops  # noqa: E402

BF16, F32 = "c10::BFloat16", "float"
CHILD_TIMEOUT_S = 1800
#: what a child times: (label in the report, the engine or "anchor")
PATHS = {"cpu": "gpuan score_ops, CPU (numpy)", "gpu": "gpuan score_ops, GPU (CuPy)",
         "anchor": "anchor: one Python call per op"}  # fmt: skip


def distinct_calls(n: int, rng: np.random.Generator) -> list[tuple[str, str, str, str]]:
    """Return `n` distinct (name, Input Dims, Input type, Concrete Inputs) calls of a transformer job."""
    calls = set()
    while len(calls) < n:
        m, k, nn = (int(x) for x in rng.choice([64, 128, 256, 512, 1024, 2048, 4096, 8192], 3))
        b, h, s, d = int(rng.integers(1, 8)), int(rng.choice([8, 16, 32])), int(rng.choice([128, 512, 2048])), 128
        kind = rng.integers(0, 9)
        if kind == 0:
            call = ("aten::mm", [[m, k], [k, nn]], [BF16, BF16], ["", ""])
        elif kind == 1:
            call = ("aten::addmm", [[nn], [m, k], [k, nn], [], []], [BF16] * 3 + ["Scalar"] * 2, [""] * 3 + ["1", "1"])
        elif kind == 2:
            call = ("aten::_scaled_dot_product_flash_attention", [[b, h, s, d]] * 3 + [[], [], [], []],
                    [BF16] * 3 + ["Scalar"] * 4, ["", "", "", "0.", "True", "False", ""])  # fmt: skip
        elif kind == 3:
            types = [BF16, "ScalarList", BF16, BF16, "Scalar"]
            call = ("aten::native_layer_norm", [[b, s, k], [], [k], [k], []], types, ["", f"[{k}]", "", "", "1e-05"])
        elif kind == 4:
            call = ("aten::add", [[b, s, k], [b, s, k], []], [BF16, BF16, "Scalar"], ["", "", "1"])
        elif kind == 5:
            call = ("aten::embedding", [[32000, k], [b, s], [], [], []], [BF16, "long int"] + ["Scalar"] * 3,
                    ["", "", "-1", "False", "False"])  # fmt: skip
        elif kind == 6:
            call = ("aten::copy_", [[b, s, k], [b, s, k], []], [BF16, F32, "Scalar"], ["", "", "False"])
        elif kind == 7:
            call = ("aten::_softmax", [[b, h, s, s], [], []], [F32, "Scalar", "Scalar"], ["", "-1", "False"])
        else:
            call = (f"custom::fused_op_{int(rng.integers(0, 50))}", [[b, s, k]], [BF16], [""])
        calls.add(tuple(json.dumps(x) if not isinstance(x, str) else x for x in call))
    return sorted(calls)


def synth_ops(n: int, calls: list[tuple], rng: np.random.Generator) -> pa.Table:
    """Return an op table (OPS_SCHEMA) of `n` rows drawn from `calls`, with measured times."""
    pick = rng.integers(0, len(calls), n).astype(np.int32)
    columns = {}
    for i, name in enumerate(("name", "input_dims", "input_types", "concrete_inputs")):
        words = [c[i] for c in calls]
        uniq, codes = np.unique(np.array(words, dtype=object), return_inverse=True)
        columns[name] = pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32)[pick]), pa.array(list(uniq)))
    phases = pa.DictionaryArray.from_arrays(
        pa.array((pick % 3).astype(np.int32)), pa.array(["forward", "backward", "optimizer"])
    )
    table = pa.table(
        {
            **columns,
            "layer": pa.nulls(n, OPS_SCHEMA.field("layer").type),
            "phase": phases,
            "rank": np.zeros(n, np.int32),
            "ts": np.arange(n, dtype=np.int64) * 1000,
            "measured_ns": rng.integers(2_000, 2_000_000, n),
            "kernels": np.ones(n, np.int32),
            "copy_bytes": pa.nulls(n, pa.int64()),
            "copy_over_link": np.zeros(n, bool),
            "tf32": np.zeros(n, bool),
            "thread": np.zeros(n, np.int64),
            "grad_bytes": pa.nulls(n, pa.int64()),
            "caller_dims": pa.nulls(n, pa.string()),
            "caller_types": pa.nulls(n, pa.string()),
        }
    )
    return table.select(OPS_SCHEMA.names).cast(OPS_SCHEMA)


def per_row(table: pa.Table, roofs) -> None:
    """The anchor: one Python call per op."""
    rows = zip(*(table[c].to_pylist() for c in ("name", "input_dims", "input_types", "concrete_inputs", "measured_ns")))
    for name, dims, types, concrete, measured in rows:
        c = cost(name, Call(json.loads(dims), json.loads(types), json.loads(concrete)))
        if c is None:
            continue
        key = peak_key(roofs, c.category, c.dtype)
        t = max(c.flops / roofs.flops[key], c.bytes / roofs.memory_bandwidth) * 1e9
        _ = (t / measured, c.flops / c.bytes if c.bytes else 0)


def child(kind: str, args: argparse.Namespace) -> None:
    """In a fresh process: build the ops (not timed), time the first call of `kind`'s path and one warm call;
    print the tagged result line."""
    rng = np.random.default_rng(7)
    calls = distinct_calls(args.distinct, rng)
    n = args.anchor_ops if kind == "anchor" else args.ops
    table = synth_ops(n, calls, rng)
    roofs = datasheet(devices.lookup("H100"), "bench")
    if kind == "anchor":
        first, warm, _ = first_and_warm(lambda: per_row(table, roofs))
    else:
        eng = engine.select(kind)
        first, warm, _ = first_and_warm(lambda: score_ops(table, roofs, engine=eng))
    emit({"kind": kind, "ops": n, "calls": len(calls), "first_s": first, "warm_s": warm})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", type=int, default=10_000_000)
    ap.add_argument("--distinct", type=int, default=2000)
    ap.add_argument("--anchor-ops", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=DEFAULT_RUNS, help=f"fresh processes per path (default {DEFAULT_RUNS})")
    ap.add_argument("--out", default=str(REPO / "bench" / "results"))
    ap.add_argument("--child", choices=tuple(PATHS), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child, args)
        return 0

    cmd = [sys.executable, str(Path(__file__).resolve()), "--ops", str(args.ops), "--distinct", str(args.distinct)]
    cmd += ["--anchor-ops", str(args.anchor_ops)]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    kinds = ["cpu"] + (["gpu"] if engine.gpu_available() else []) + ["anchor"]
    runs = {}
    for kind in kinds:
        print(f"  {PATHS[kind]} ({args.runs} fresh processes) ...", end="", flush=True)
        try:
            runs[kind] = fresh_runs(cmd + ["--child", kind], args.runs, env=env, cwd=REPO, timeout=CHILD_TIMEOUT_S,
                                    echo=lambda r: f"{r['first_s']:.3f}")  # fmt: skip
            print(" s (first calls)")
        except FreshRunError as e:
            print(f" failed: {e}")
            runs[kind] = e
    if isinstance(runs["anchor"], FreshRunError):
        raise SystemExit(f"the anchor failed: {runs['anchor']}")

    info = machine_info()
    anchor = runs["anchor"]
    anchor_first = args.anchor_ops / spread([r["first_s"] for r in anchor]).median
    anchor_warm = args.anchor_ops / warm_median(anchor)
    lines = [
        f"# gpuan sol benchmark, {dt.date.today()} on {info['cpu']} ({info['cores']} cores)",
        f"commit {git_commit()}; {versions(('gpuan', 'numpy', 'pyarrow', 'pandas'), ('cupy',))}",
        "",
        f"{args.ops:,} synthetic ops from {anchor[0]['calls']:,} distinct calls, scored against H100 SXM5 datasheet "
        "roofs. The timed function is `gpuan.sol.score_ops(table, roofs)` on an op table built before in the same "
        "process (not timed); the anchor is one Python call per op on its own table of the same calls.",
        "",
        method_note(args.runs),
        "",
        "| what | ops | first call s, median (min–max) | warm s | ops/s (first) | vs anchor (first) "
        "| vs anchor (warm) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for kind in kinds:
        got = runs[kind]
        if isinstance(got, FreshRunError):
            lines.append(f"| {PATHS[kind]} | - | failed: {got} | | | | |")
            continue
        n = got[0]["ops"]
        first, warm = spread([r["first_s"] for r in got]), warm_median(got)
        lines.append(
            f"| {PATHS[kind]} | {n:,} | {first.cell()} | {warm:.3f} | {n / first.median:,.0f} | "
            f"{n / first.median / anchor_first:,.1f}x | {n / warm / anchor_warm:,.1f}x |"
        )
    lines.append("")
    for kind in kinds:
        if not isinstance(runs[kind], FreshRunError):
            lines.append(f"- {PATHS[kind]}: {numba_note(runs[kind])}")
    if not engine.gpu_available():
        lines.append("\nNo GPU on this machine: the GPU row is measured where CuPy sees a device.")
    text = "\n".join(lines) + "\n"
    print(text)
    save_report(args.out, "sol", info, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
