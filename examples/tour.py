"""A tour of gpuan's Python API: every analysis, its tables as pandas frames, its charts.

Run it as ``python examples/tour.py [OUTDIR]`` (a temporary directory by default), or paste its cells
(``# %%``) into a notebook. Its inputs are generated, so it runs anywhere gpuan is installed: a sample
Kineto trace of a 4-layer transformer training run on an H100, a tensor-access log of a small MoE model,
an 8-rank run in which rank 5 is late in step 2, and one in which rank 3 runs a slow kernel in step 2.
``tests/test_examples.py`` runs it.
"""

# %%
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pandas as pd

import gpuan
from gpuan.outputs import cycles as cycles_output
from gpuan.outputs import fleet as fleet_output
from gpuan.outputs import replay as replay_output
from gpuan.outputs import roofline_chart
from gpuan.outputs import sol as sol_output
from gpuan.outputs import tensors as tensors_output
from gpuan.synth import ranks as synth_ranks
from gpuan.synth import tensors as synth_tensors
from gpuan.synth.kineto import sample_trace_path
from gpuan.trace.cycle_csv import read_cycle_csv
from gpuan.trace.ranks import load_run
from gpuan.trace.tensor_inputs import load_tensor_inputs

pd.set_option("display.width", 140)
pd.set_option("display.max_columns", 12)


def show(title: str, frame: pd.DataFrame, rows: int = 5) -> None:
    """Print a frame under a title, as a notebook cell would show it."""
    print(f"\n## {title}  ({len(frame):,} rows)\n{frame.head(rows).to_string(max_colwidth=48)}")


def main(out: Path) -> dict[str, gpuan.Result]:
    """Run every analysis on generated inputs in `out`; return the Results by analysis name."""
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, gpuan.Result] = {}

    # %% load a trace: one Arrow table of events, whatever the format
    trace = gpuan.load(sample_trace_path(out))
    show("events", trace.events.slice(0, 5).to_pandas()[["ts", "dur", "kind", "name", "stream"]])

    # %% info: what the trace holds
    results["info"] = info = gpuan.info.analyse(trace, top=5)
    print("\n", info)
    show("top kernels", info.to_pandas("top_kernels"))

    # %% cycles: the training step and the layers inside it, found without annotations
    results["cycles"] = cycles = gpuan.cycles.analyse(trace)
    show("repeating patterns", cycles.to_pandas("patterns"))
    show("per-position statistics of the first pattern", cycles.to_pandas("positions"))

    # %% compare: two of those patterns, position by position (through the uplifter-layout CSVs)
    files = cycles_output.write_csvs(cycles, str(out / "sample"))
    first, second = (read_cycle_csv(path) for path in files[:2])
    results["compare"] = compared = gpuan.compare.analyse((first, second))
    print("\n", compared)

    # %% sol: every op against the H100's roofs; the report and the roofline chart
    results["sol"] = sol = gpuan.sol.analyse(trace)
    print("\n" + sol_output.text(sol, top=3))
    show("the ops farthest from their roof", sol.to_pandas("lost_time"))
    roofline_chart.figure(sol).write_html(out / "roofline.html", include_plotlyjs="cdn")

    # %% streams: what the compute stream's work would take on 4 streams
    results["streams"] = streams = gpuan.streams.analyse(trace, streams=4, stream=7)
    print(f"\nstreams: {streams.summary['speedup']:.2f}x predicted on 4 streams")
    show("predicted schedule", streams.to_pandas("operations")[["stream", "name", "start_ns", "end_ns"]])

    # %% tensors: which tensors and expert slices an instrumented llama.cpp touched
    model, log, names = synth_tensors.write_sample(out / "tensors", tokens=16)
    results["tensors"] = tensors = gpuan.tensors.analyse(load_tensor_inputs(log, model, names=names))
    show("hottest tensors", tensors.to_pandas("tensors").sort_values("accesses", ascending=False))
    tensors_output.write_html(tensors, out / "tensors.html")

    # %% replay: an 8-rank run with a planted straggler (rank 5, step 2)
    plan = synth_ranks.plan(8, 4, 2_000, stragglers=((2, 5, 20_000_000),), seed=1)
    synth_ranks.write_run(plan, out / "run")
    results["replay"] = replay = gpuan.replay.analyse(load_run(out / "run"))
    print("\n" + replay_output.text(replay, top=3))
    show("stragglers", replay.to_pandas("stragglers"))
    replay_output.write_html(replay, out / "replay.html")

    # %% fleet: which rank is slow, in which step, and why (steps from cycles, waiting taken out)
    plan = synth_ranks.plan(8, 4, 2_000, repeat=True, slow_kernels=((2, 3, 30, 20_000_000),), seed=1)
    synth_ranks.write_run(plan, out / "fleet_run")
    results["fleet"] = fleet = gpuan.fleet.analyse(load_run(out / "fleet_run"))
    print("\n" + fleet_output.text(fleet))
    show("causes", fleet.to_pandas("causes"))
    fleet_output.write_html(fleet, out / "fleet.html")

    print(f"\ncharts: {out / 'roofline.html'}, {out / 'tensors.html'}, {out / 'replay.html'}, {out / 'fleet.html'}")
    return results


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="gpuan-tour-")))
