"""Speed-of-light scoring speed: 10M synthetic ops scored on the CPU (and the GPU where there is one).

    python bench/sol.py [--ops 10000000] [--distinct 2000] [--out bench/results]

The ops are drawn from a few thousand distinct calls (GEMMs, attention, norms, elementwise, embedding,
copies, and unmodelled names) with the profiler's ``Input Dims`` / ``Input type`` / ``Concrete Inputs``
text, as a long trace has them. Timed: :func:`gpuan.sol.score_ops` from the op table to every score
column (best of 3; building the table is not timed). The anchor, measured in the same run: the
straightforward way, one Python call per op (parse its JSON, cost it, roofline it), timed on 200k ops.

A Markdown table goes to <out>/sol-<date>-<machine>.md with the machine, date and commit.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest import git_commit, machine_info, save_report, versions  # noqa: E402  (shared helpers of the benchmarks)

from gpuan import devices, engine  # noqa: E402
from gpuan.devices.calibrate import best_seconds  # noqa: E402
from gpuan.sol.costs import Call, cost  # noqa: E402
from gpuan.sol.roofs import datasheet, peak_key  # noqa: E402
from gpuan.sol.score import OPS_SCHEMA, score_ops  # noqa: E402

BF16, F32 = "c10::BFloat16", "float"


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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", type=int, default=10_000_000)
    ap.add_argument("--distinct", type=int, default=2000)
    ap.add_argument("--anchor-ops", type=int, default=200_000)
    ap.add_argument("--out", default=str(REPO / "bench" / "results"))
    args = ap.parse_args(argv)

    rng = np.random.default_rng(7)
    calls = distinct_calls(args.distinct, rng)
    table = synth_ops(args.ops, calls, rng)
    roofs = datasheet(devices.lookup("H100"), "bench")
    rows = []
    score_ops(table.slice(0, 1000), roofs, engine=engine.CPU)  # warm numba / imports
    t_cpu = best_seconds(lambda: score_ops(table, roofs, engine=engine.CPU), 3)
    rows.append(("gpuan score_ops, CPU (numpy)", args.ops, t_cpu))
    if engine.gpu_available():
        gpu = engine.select("gpu")
        score_ops(table.slice(0, 1000), roofs, engine=gpu)
        t_gpu = best_seconds(lambda: score_ops(table, roofs, engine=gpu), 3)
        rows.append(("gpuan score_ops, GPU (CuPy)", args.ops, t_gpu))
    sample = table.slice(0, args.anchor_ops)
    t_anchor = best_seconds(lambda: per_row(sample, roofs), 1)
    rows.append(("anchor: one Python call per op", args.anchor_ops, t_anchor))

    info = machine_info()
    anchor_rate = args.anchor_ops / t_anchor
    lines = [
        f"# gpuan sol benchmark, {dt.date.today()} on {info['cpu']} ({info['cores']} cores)",
        f"commit {git_commit()}; {versions(('gpuan', 'numpy', 'pyarrow', 'pandas'), ('cupy',))}",
        "",
        f"{args.ops:,} synthetic ops from {len(calls):,} distinct calls, scored against H100 SXM5 datasheet roofs.",
        "",
        "| what | ops | seconds | ops/s | vs anchor |",
        "|---|---|---|---|---|",
    ]
    for label, n, t in rows:
        lines.append(f"| {label} | {n:,} | {t:.3f} | {n / t:,.0f} | {n / t / anchor_rate:,.0f}x |")
    if not engine.gpu_available():
        lines.append("\nNo GPU on this machine: the GPU row is measured where CuPy sees a device.")
    text = "\n".join(lines) + "\n"
    print(text)
    save_report(args.out, "sol", info, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
