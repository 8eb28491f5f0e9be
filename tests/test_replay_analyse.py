"""``gpuan.replay.analyse`` as a Python user calls it: the lazy sources of a real run from
``gpuan.trace.ranks.load_run``, a Result of Arrow tables and a JSON-able summary, ``to_pandas()``, and a
bad option as a UsageError."""

from __future__ import annotations

import json

import pandas as pd
import pyarrow as pa
import pytest

from gpuan.engine.procs import Procs, from_launcher
from gpuan.errors import TraceError, UsageError
from gpuan.options import REPLAY_REPORTS
from gpuan.replay import analyse
from gpuan.result import Result
from gpuan.trace.inputs import RankSource, RunSources
from gpuan.trace.ranks import load_run

GLOO = "kineto/cpu_ddp_gloo_4rank_slow_rank1_step2"
PING_PONG = "otf2/ping_pong_2rank"
TABLES = ["collectives", "collective_waits", "p2p", "wait_totals", "stragglers", "breakdown", "comm_matrix",
          "clock_offsets"]  # fmt: skip


@pytest.fixture(scope="module")
def gloo_sources(data_dir) -> RunSources:
    return load_run(data_dir / GLOO)


@pytest.fixture(scope="module")
def gloo(gloo_sources) -> Result:
    return analyse(gloo_sources, engine="cpu")


def test_load_run_lists_without_reading(gloo_sources, data_dir):
    assert gloo_sources.path == str(data_dir / GLOO)
    assert gloo_sources.ranks == [0, 1, 2, 3] and len(gloo_sources) == 4
    first = next(iter(gloo_sources))
    assert isinstance(first, RankSource) and not first.otf2
    assert first.path == data_dir / GLOO / "rank0.json.gz" and first.size == first.path.stat().st_size
    trace = first.load()
    assert len(trace) > 0 and set(trace.events["rank"].to_pylist()) == {0}


def test_load_run_of_an_otf2_archive(data_dir):
    pytest.importorskip("otf2")
    sources = load_run(data_dir / PING_PONG)
    assert sources.ranks == [0, 1] and all(s.otf2 and s.path.name == "traces.otf2" for s in sources)
    assert set(sources.sources[1].load().events["rank"].to_pylist()) == {1}


def test_analyse_returns_arrow_tables_and_a_json_summary(gloo, data_dir):
    assert isinstance(gloo, Result) and gloo.analysis == "replay"
    assert list(gloo.tables) == TABLES
    assert all(isinstance(t, pa.Table) for t in gloo.tables.values())
    assert gloo["collectives"].num_rows == 23 and gloo["collective_waits"].num_rows == 92
    assert gloo["breakdown"]["rank"].to_pylist() == [0, 1, 2, 3]
    assert gloo["clock_offsets"].column_names == ["rank", "offset_ns"]
    s = gloo.summary
    assert s["source"] == str(data_dir / GLOO) and s["ranks"] == [0, 1, 2, 3] and s["processes"] == 1
    assert s["analyses"] == list(REPLAY_REPORTS) and s["clocks_aligned"] is False
    assert s["last_to_finish"]["rank"] in (0, 1, 2, 3) and s["last_to_finish"]["end_ns"] > 0
    (process,) = s["diagnostics"]["per_process"]
    assert {"read", "extract", "exchange", "analyse", "total", "events"} <= set(process)
    json.dumps(s)  # the summary is plain data


def test_to_pandas(gloo):
    frames = gloo.to_pandas()
    assert list(frames) == TABLES and all(isinstance(f, pd.DataFrame) for f in frames.values())
    stragglers = gloo.to_pandas("stragglers")
    assert (stragglers.loc[0, "step"], stragglers.loc[0, "rank"]) == (2, 1)  # the held-back rank
    assert stragglers["caused_total"].dtype == "int64"


def test_chosen_analyses_only(gloo_sources):
    r = analyse(gloo_sources, analyses=("stragglers", "comm-matrix"), deal="size", align_clocks=True)
    assert list(r.tables) == ["stragglers", "comm_matrix", "clock_offsets"]
    assert r.summary["clocks_aligned"] is True


@pytest.mark.parametrize(
    "options, words",
    [
        ({"analyses": ("waits", "queues")}, "unknown analysis queues"),
        ({"deal": "random"}, "unknown deal 'random'"),
        ({"engine": "tpu"}, "unknown engine 'tpu'"),
    ],
)
def test_a_bad_option_is_a_usage_error(gloo_sources, options, words):
    with pytest.raises(UsageError, match=words):
        analyse(gloo_sources, **options)


def test_analyse_is_one_process_whatever_the_environment(gloo_sources, monkeypatch):
    # only the command line asks the environment for MPI (from_launcher): a bad GPUAN_MPI stops it ...
    monkeypatch.setenv("GPUAN_MPI", "yes")
    with pytest.raises(UsageError, match="GPUAN_MPI"):
        from_launcher()
    # ... while analyse, handed no processes, runs them all here without looking
    assert analyse(gloo_sources, analyses=("stragglers",)).summary["processes"] == 1


def test_from_launcher_without_a_launcher_is_one_process(monkeypatch):
    monkeypatch.setenv("GPUAN_MPI", "0")
    assert from_launcher() == Procs()


def test_analyse_is_deterministic_but_for_its_diagnostics(gloo_sources, gloo):
    again = analyse(gloo_sources, engine="cpu", procs=Procs())
    assert list(again.tables) == list(gloo.tables)
    assert all(again[name].equals(gloo[name]) for name in gloo.tables)
    deterministic = {k: v for k, v in gloo.summary.items() if k != "diagnostics"}
    assert {k: v for k, v in again.summary.items() if k != "diagnostics"} == deterministic


def test_load_run_shared_among_processes_lists_the_same(gloo_sources, data_dir):
    assert load_run(data_dir / GLOO, Procs()) == gloo_sources


def test_load_run_of_a_bad_run_raises_with_processes(tmp_path):
    with pytest.raises(TraceError, match="no trace files"):
        load_run(tmp_path, Procs())
