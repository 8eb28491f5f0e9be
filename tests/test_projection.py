"""Each analysis reads only what its projection declares, so reading a Parquet file that far and no further
(the columns it names, the row groups of its kinds) gives the same result as reading it whole.

The check is stronger than a projected read: the columns an analysis does not declare are filled with
random values and the rows of the kinds it does not declare are dropped; its result on every real trace of
../shared/data must not change."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import DATA, kineto_files

from gpuan import cycles, fleet, info, replay, sol, streams
from gpuan.trace import parquet
from gpuan.trace.inputs import RankSource, RunSources
from gpuan.trace.load import load
from gpuan.trace.projection import Projection, apply, projection, union
from gpuan.trace.ranks import load_run
from gpuan.trace.schema import SCHEMA
from gpuan.trace.table import Trace

ANALYSES = {
    "info": (info.reads(), lambda t: info.analyse(t)),
    "cycles": (cycles.reads("kernel"), lambda t: cycles.analyse(t)),
    "cycles-llm": (cycles.reads("kernel"), lambda t: cycles.analyse(t, mode="llm", sequences="stream")),
    "cycles-cpu": (cycles.reads("cpu_op"), lambda t: cycles.analyse(t, kind="cpu_op", ops="leaf")),
    "sol": (sol.reads(), lambda t: sol.analyse(t, top=1000)),
    "streams": (streams.reads(), lambda t: streams.analyse(t, streams=2)),
}

SOURCES = (
    [f"kineto/{name}" for name in kineto_files()]
    + ["kineto/dlrm_8rank_nccl", "kineto/cpu_ddp_gloo_4rank_slow_rank1_step2", "otf2/ping_pong_2rank/traces.otf2"]
    + ["nsys/saxpy_mpi_cuda_rank0.sqlite", "nvprof/mem_mem_1stream_23000.csv"]
    + ["nvprof/mem_mem_2stream_10M_h2d_h2d_ovlp.csv"]
)  # fmt: skip


@pytest.fixture(scope="module")
def traces(data_dir):
    return {}


def trace_of(traces: dict, source: str) -> Trace:
    if source not in traces:
        path = DATA / source
        if not path.exists():
            pytest.skip(f"{path} is not in ../shared/data")
        traces[source] = load(path, use_cache=False)
    return traces[source]


def scrambled(trace: Trace, proj: Projection, seed: int = 7) -> Trace:
    """The trace with the rows of undeclared kinds dropped and every undeclared column random."""
    events = trace.events
    if proj.kinds is not None:
        kind = pc.cast(events["kind"], pa.string())
        events = events.filter(pc.fill_null(pc.is_in(kind, pa.array(sorted(proj.kinds))), False))
    rng = np.random.default_rng(seed)
    n = events.num_rows
    cols = []
    for f in SCHEMA:
        if f.name in proj.columns:
            cols.append(events[f.name])
        elif pa.types.is_dictionary(f.type):
            words = pa.array([f"scrambled{i}" for i in range(5)])
            cols.append(pa.DictionaryArray.from_arrays(pa.array(rng.integers(0, 5, n), f.type.index_type), words))
        else:
            cols.append(pa.array(rng.integers(1, 1000, n), f.type))
    return Trace(pa.Table.from_arrays(cols, schema=SCHEMA), trace._flows, trace.metadata)


def outcome(run, trace: Trace):
    """What running the analysis gives: its tables and summary, or the error it raised."""
    try:
        result = run(trace)
    except Exception as e:  # noqa: BLE001 - an analysis that fails must fail the same way on both
        return ("error", type(e).__name__, str(e))
    summary = {k: v for k, v in result.summary.items() if k != "diagnostics"}
    return ("result", summary, dict(result.tables))


def same_summary(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_summary(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_summary(x, y) for x, y in zip(a, b))
    return a == b


@pytest.mark.parametrize("analysis", ANALYSES)
@pytest.mark.parametrize("source", SOURCES)
def test_an_analysis_reads_nothing_it_does_not_declare(traces, source, analysis):
    proj, run = ANALYSES[analysis]
    trace = trace_of(traces, source)
    full = outcome(run, trace)
    part = outcome(run, scrambled(trace, proj))
    assert full[0] == part[0], (full, part)
    if full[0] == "error":
        assert full == part
        return
    assert same_summary(full[1], part[1]), (full[1], part[1])
    assert full[2].keys() == part[2].keys()
    for name, table in full[2].items():
        # to Python values: Arrow's equals() holds NaN unequal to itself
        assert table.schema == part[2][name].schema
        assert same_summary(table.to_pydict(), part[2][name].to_pydict()), f"{analysis} on {source}: {name} differs"


@dataclass(frozen=True)
class Given(RankSource):
    """A rank whose trace is given: the run analyses see it whole, or scrambled."""

    trace: Trace | None = field(default=None, compare=False, repr=False)

    def load(self, **options) -> Trace:
        return self.trace


RUN_ANALYSES = {
    "replay": (replay.reads(), lambda run: replay.analyse(run)),
    "fleet": (fleet.reads(), lambda run: fleet.analyse(run)),
}


@pytest.mark.parametrize("analysis", RUN_ANALYSES)
@pytest.mark.parametrize(
    "run", ["kineto/dlrm_8rank_nccl", "kineto/cpu_ddp_gloo_4rank_slow_rank1_step2", "otf2/ping_pong_2rank/traces.otf2"]
)
def test_a_run_analysis_reads_nothing_it_does_not_declare(data_dir, run, analysis):
    proj, analyse = RUN_ANALYSES[analysis]
    sources = load_run(data_dir / run)
    read = {s.rank: s.load() for s in sources}

    def given(change) -> RunSources:
        fields = ("rank", "path", "size", "otf2")
        return RunSources(
            sources.path, tuple(Given(*(getattr(s, f) for f in fields), change(read[s.rank])) for s in sources)
        )

    full = outcome(analyse, given(lambda t: t))
    part = outcome(analyse, given(lambda t: scrambled(t, proj)))
    assert full[0] == part[0] == "result", (full, part)
    assert same_summary(full[1], part[1]), (full[1], part[1])
    for name, table in full[2].items():
        assert table.schema == part[2][name].schema
        assert same_summary(table.to_pydict(), part[2][name].to_pydict()), f"{analysis} on {run}: {name} differs"


@pytest.mark.parametrize("name", kineto_files()[:6] + ["dlrm_8rank_nccl"])
def test_a_projected_parquet_read_is_the_whole_read_projected(data_dir, tmp_path, name):
    source = data_dir / "kineto" / name
    path = parquet.write(load(source, use_cache=False), tmp_path / "t.parquet")
    whole = parquet.read(path)
    for proj in (info.reads(), cycles.reads("kernel"), cycles.reads("cpu_op"), sol.reads(), streams.reads()):
        got = parquet.read(path, proj)
        want = apply(whole.events, proj)
        assert got.events.equals(want), f"{name}: {proj}"
        assert got.metadata == whole.metadata
        assert got.flows.equals(whole.flows)
        # loading names the same table whatever the source: the Kineto file itself is projected alike
        from_json = load(source, use_cache=False, projection=proj).events
        assert from_json.num_rows == want.num_rows
        assert from_json.column_names == want.column_names
        nulls = [c for c in SCHEMA.names if c not in proj.columns]
        assert all(from_json[c].null_count == from_json.num_rows for c in nulls)
        assert all(want[c].null_count == want.num_rows for c in nulls)


def test_a_projected_read_decodes_less(data_dir, tmp_path):
    # the kernels of a trace of many kinds: what is decoded is a fraction of the whole
    source = data_dir / "kineto" / "a100_alexnet.json.gz"
    path = parquet.write(load(source, use_cache=False), tmp_path / "t.parquet")
    before = pa.total_allocated_bytes()
    whole = parquet.read(path)
    whole_bytes = pa.total_allocated_bytes() - before
    before = pa.total_allocated_bytes()
    part = parquet.read(path, projection(("ts", "dur", "name"), ("kernel",)))
    part_bytes = pa.total_allocated_bytes() - before
    kernels = pc.sum(pc.equal(pc.cast(whole.events["kind"], pa.string()), "kernel")).as_py()
    assert part.events.num_rows == kernels < whole.events.num_rows
    assert part_bytes < whole_bytes / 3, (part_bytes, whole_bytes)


def test_projections_combine_and_check_their_names():
    a = projection(("ts",), ("kernel",))
    b = projection(("dur",), ("memcpy",))
    both = union(a, b)
    assert both.columns == {"ts", "dur", "kind", "rank"} and both.kinds == {"kernel", "memcpy"}
    assert union(a, projection(("name",))).kinds is None
    assert union(a, None) is None
    with pytest.raises(ValueError, match="unknown columns"):
        projection(("tss",))
    with pytest.raises(ValueError, match="unknown kinds"):
        projection(("ts",), ("kernels",))
