"""``gpuan.cycles.analyse``: the Result's tables on real traces, as the detection and the patterns give
them, and what the outputs layer renders from them."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import gpuan
from gpuan.cycles import detect, distinct_patterns
from gpuan.cycles.patterns import STAT_COLUMNS, llm_phases
from gpuan.errors import UsageError
from gpuan.outputs import cycles as output

TABLES = ["sequences", "segments", "cycles", "instances", "positions", "patterns", "phases"]
SUMMARY = ["kind", "mode", "ops", "sequences", "events", "segments", "patterns", "phases"]


def _real(data_dir, name: str):
    path = data_dir / "kineto" / name
    if not path.is_file():
        pytest.skip(f"{path} not found")
    return gpuan.load(path)


@pytest.fixture(scope="module")
def v100(data_dir):
    return _real(data_dir, "v100_rank0_ns_resolution.json.gz")


@pytest.fixture(scope="module")
def tiny_lm(data_dir):
    return _real(data_dir, "cpu_tiny_lm_prefill_decode.json.gz")


def test_tables_and_summary(v100):
    result = gpuan.cycles.analyse(v100, engine="cpu")
    assert result.analysis == "cycles"
    assert list(result.tables) == TABLES and list(result.summary) == SUMMARY
    found = detect(v100, engine=gpuan.engine.CPU)
    patterns = distinct_patterns(found)
    assert result["sequences"].num_rows == len(found) > 0
    assert result["sequences"]["label"].to_pylist() == [sc.sequence.label for sc in found]
    assert result["segments"].num_rows == result.summary["segments"] == sum(len(sc.segments) for sc in found)
    assert result["patterns"].num_rows == result.summary["patterns"] == len(patterns) > 0
    assert result.summary["events"] == sum(len(sc.sequence) for sc in found)
    assert result["phases"].num_rows == 0 and result.summary["phases"] == []
    json.dumps(result.summary)  # plain values only


def test_every_cycle_has_its_instances_and_positions(v100):
    result = gpuan.cycles.analyse(v100)
    cycles = result.to_pandas("cycles")
    instances = result.to_pandas("instances").groupby("cycle").size()
    positions = result.to_pandas("positions").groupby("cycle").size()
    assert (cycles.cycle == np.arange(len(cycles))).all()
    assert instances.reindex(cycles.cycle).tolist() == cycles.repetitions.tolist()
    assert positions.reindex(cycles.cycle).tolist() == cycles.length.tolist()
    segments = result.to_pandas("segments")
    referenced = set(segments.cycle.dropna().astype(int)) | {c for subs in segments.sub_cycles for c in subs}
    referenced |= set(result["patterns"]["cycle"].to_pylist())
    assert referenced == set(cycles.cycle)


def test_positions_are_the_pattern_statistics(v100):
    result = gpuan.cycles.analyse(v100)
    patterns = distinct_patterns(detect(v100))
    positions = result.to_pandas("positions")
    for k, cycle in zip(result["patterns"]["k"].to_pylist(), result["patterns"]["cycle"].to_pylist()):
        mine = positions[positions.cycle == cycle].drop(columns="cycle").reset_index(drop=True)
        assert list(mine.columns) == list(STAT_COLUMNS)
        pd.testing.assert_frame_equal(mine, patterns[k - 1].stats(), check_dtype=False)
        times = patterns[k - 1].instance_times()
        row = result["cycles"].to_pylist()[cycle]
        assert row["total_busy_ns"] == int(times.busy_ns.sum()) and row["repetitions"] == len(times)


def test_to_pandas_gives_every_table(v100):
    result = gpuan.cycles.analyse(v100)
    frames = result.to_pandas()
    assert list(frames) == TABLES and all(isinstance(f, pd.DataFrame) for f in frames.values())
    assert frames["instances"].columns.tolist() == [
        "cycle", "instance", "first_event", "start_ns", "end_ns", "busy_ns", "wall_ns", "order_moved"
    ]  # fmt: skip
    wall = frames["instances"].end_ns - frames["instances"].start_ns
    assert (wall == frames["instances"].wall_ns).all()


def test_llm_phases(tiny_lm):
    result = gpuan.cycles.analyse(tiny_lm, kind="cpu_op", mode="llm")
    phases = llm_phases(detect(tiny_lm, "cpu_op"))
    assert result.summary["phases"] == list(phases) == result["phases"]["phase"].to_pylist()
    cycles = result["cycles"].to_pylist()
    for row in result["phases"].to_pylist():
        pattern = phases[row["phase"]]
        cycle = cycles[row["cycle"]]
        assert (cycle["length"], cycle["repetitions"], cycle["role"], cycle["segment"]) == (
            pattern.cycle.length, pattern.cycle.repetitions, pattern.role, pattern.segment
        )  # fmt: skip


def test_no_events_of_the_kind(tiny_lm):
    result = gpuan.cycles.analyse(tiny_lm, kind="kernel")
    assert result.summary["events"] == 0 and all(t.num_rows == 0 for t in result.tables.values())
    assert output.text(result) == ""


def test_bad_options_are_usage_errors(tiny_lm):
    for options in ({"mode": "phases"}, {"kind": "kernels"}, {"ops": "top-level"}, {"sequences": "streams"}):
        with pytest.raises(UsageError, match=next(iter(options))):
            gpuan.cycles.analyse(tiny_lm, **options)


def test_outputs_render_the_result(v100, tmp_path):
    result = gpuan.cycles.analyse(v100)
    files = output.write_csvs(result, str(tmp_path / "v"))
    assert files == [str(tmp_path / f"v_cycle_{k}.csv") for k in range(1, result.summary["patterns"] + 1)]
    report = json.loads(output.json_text(result, "v100.json.gz", str(tmp_path / "v")))
    assert report["files"] == files and [p["file"] for p in report["patterns"]] == files
    assert json.loads(output.json_text(result, "v100.json.gz"))["files"] == []
    assert len(report["sequences"]) == result["sequences"].num_rows
    text = output.text(result)
    assert text.startswith(result["sequences"]["label"][0].as_py())
    first = output.csv_text(result, result["patterns"]["cycle"][0].as_py())
    assert first.splitlines()[6] == ",".join(STAT_COLUMNS)
    assert (tmp_path / "v_cycle_1.csv").read_text(encoding="utf-8") == first
