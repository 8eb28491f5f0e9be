"""A run's ranks read one by one (:mod:`gpuan.trace.dealt`), each analysed on its own and combined, give what
the merged run gives: the decomposition that ``gpuan info|convert|cycles|sol RUN_DIR`` rely on under
``mpirun``, checked in one process (``tests/test_mpi_commands.py`` runs the commands under ``mpiexec``)."""

from __future__ import annotations

import pytest

from gpuan import cycles, info, sol
from gpuan.engine.procs import Procs
from gpuan.outputs import cycles as cycles_output
from gpuan.outputs import info as info_output
from gpuan.outputs import sol as sol_output
from gpuan.sol.score import ACTIVITY_KINDS, EVENT_WORDS, RANK_OPS_SCHEMAS, rank_ops
from gpuan.synth.ranks import plan, write_run
from gpuan.trace import parquet
from gpuan.trace.dealt import any_rank, load_dealt, map_ranks, unified_dictionaries, write_parquet
from gpuan.trace.load import load

RUNS = ["kineto/dlrm_8rank_nccl", "kineto/cpu_ddp_gloo_4rank_slow_rank1_step2"]


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    d = tmp_path_factory.mktemp("run5")
    write_run(plan(5, 6, 1500, repeat=True, stragglers=((3, 2, 4_000_000),), seed=1), d)
    return d


@pytest.fixture(params=["synthetic", *RUNS])
def run_dir(request, data_dir, synthetic):
    return synthetic if request.param == "synthetic" else data_dir / request.param


def test_info(run_dir):
    run = load_dealt(run_dir, Procs())
    dealt = info.analysis.combine(map_ranks(run, info.analysis.partial, info.analysis.PART_SCHEMAS), run.metadata)
    merged = info.analyse(load(run_dir))
    assert info_output.json_text(dealt) == info_output.json_text(merged)
    assert info_output.text(dealt, width=120) == info_output.text(merged, width=120)


@pytest.mark.parametrize("options", [{}, {"mode": "llm"}, {"kind": "cpu_op", "ops": "leaf"}, {"sequences": "stream"}])
def test_cycles(run_dir, options):
    run = load_dealt(run_dir, Procs())
    parts = map_ranks(run, lambda trace: cycles.analysis.partial(trace, **options), cycles.analysis.PART_SCHEMAS)
    dealt, merged = cycles.analysis.combine(parts, **options), cycles.analyse(load(run_dir), **options)
    assert dealt.summary == merged.summary
    assert {n: t.to_pylist() for n, t in dealt.tables.items()} == {n: t.to_pylist() for n, t in merged.tables.items()}
    assert cycles_output.json_text(dealt, "run", "base") == cycles_output.json_text(merged, "run", "base")


def test_sol(run_dir, tmp_path):
    run = load_dealt(run_dir, Procs())
    on_gpu = any_rank(run, lambda trace: len(trace.of_kind(*ACTIVITY_KINDS)) > 0)
    parts = map_ranks(run, lambda trace: rank_ops(trace, on_gpu), RANK_OPS_SCHEMAS)
    words = unified_dictionaries(run, "events", EVENT_WORDS)
    dealt = sol.analysis.combine(parts, run.metadata, words, gpu_activity=on_gpu, gpu="H100")
    merged = sol.analyse(load(run_dir), gpu="H100")
    assert sol_output.json_text(dealt) == sol_output.json_text(merged)
    assert dealt["ops"].schema == merged["ops"].schema
    for name in ("name", "phase", "input_dims", "caller_types", "dtype"):  # a Parquet file holds dictionaries
        assert dealt["ops"][name].chunk(0).dictionary.equals(merged["ops"][name].chunk(0).dictionary), name
    for result, name in ((dealt, "dealt"), (merged, "merged")):
        sol_output.write_table(result, str(tmp_path / f"{name}.parquet"))
    assert (tmp_path / "dealt.parquet").read_bytes() == (tmp_path / "merged.parquet").read_bytes()


def test_convert(run_dir, tmp_path):
    events = write_parquet(load_dealt(run_dir, Procs(), use_cache=False), tmp_path / "dealt.parquet")
    merged = load(run_dir, use_cache=False)
    parquet.write(merged, tmp_path / "merged.parquet")
    assert events == merged.events.num_rows
    assert (tmp_path / "dealt.parquet").read_bytes() == (tmp_path / "merged.parquet").read_bytes()
