"""The Python tour (examples/tour.py) runs, end to end, on the inputs it generates: every analysis gives a
Result whose tables open as pandas frames, the charts are written, and what it plants is found."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

import gpuan

TOUR = Path(__file__).resolve().parents[1] / "examples" / "tour.py"


@pytest.fixture(scope="module")
def tour(tmp_path_factory):
    spec = importlib.util.spec_from_file_location("gpuan_tour", TOUR)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path_factory.mktemp("tour")
    return out, module.main(out)


def test_every_analysis_runs_and_gives_frames(tour):
    _, results = tour
    assert sorted(results) == sorted(gpuan.ANALYSES)
    for name, result in results.items():
        assert isinstance(result, gpuan.Result) and result.analysis == name
        assert result.tables, f"{name} has no tables"
        frames = result.to_pandas()
        assert set(frames) == set(result.tables)
        assert all(len(frames[t]) == result.tables[t].num_rows for t in frames)


def test_the_charts_are_written(tour):
    out, _ = tour
    for chart in ("roofline.html", "tensors.html", "replay.html", "fleet.html"):
        text = (out / chart).read_text()
        assert "plotly" in text.lower() and len(text) > 1_000, chart


def test_the_planted_straggler_is_found(tour):
    _, results = tour
    worst = results["replay"].to_pandas("stragglers").sort_values("caused_total", ascending=False).iloc[0]
    assert (worst["step"], worst["rank"]) == (2, 5)


def test_the_planted_slow_kernel_is_found(tour):
    _, results = tour
    fleet = results["fleet"]
    assert (fleet.summary["slowest"]["rank"], fleet.summary["slowest"]["step"]) == (3, 2)
    cause = fleet.to_pandas("causes").iloc[0]
    assert (cause["position"], cause["category"]) == (30, "compute")


def test_the_sample_trace_is_what_the_tour_says(tour):
    _, results = tour
    assert results["info"].summary["events"] > 0
    devices = results["info"].to_pandas("devices")
    assert "H100" in devices["name"].iloc[0]
    assert 0.5 < results["sol"].summary["modelled_share"] <= 1.0
    assert results["streams"].summary["speedup"] >= 1.0


def test_the_readme_python_block_runs(tmp_path, capsys):
    # the front page's Python block, on the sample trace instead of the reader's own rank0.json.gz
    import re

    from gpuan.synth.kineto import sample_trace_path

    readme = (TOUR.parents[1] / "README.md").read_text()
    code = re.search(r"```python\n(.*?)```", readme, re.S).group(1)
    assert '"rank0.json.gz"' in code and '"run/"' in code and ".show()" in code
    sample = sample_trace_path(tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(sample, run / sample.name)  # a run of one rank
    code = code.replace('"rank0.json.gz"', repr(str(sample))).replace('"run/"', repr(str(run)))
    code = code.replace(".show()", ".to_html(include_plotlyjs=False)")
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)
    assert scope["sol"].summary["modelled_share"] > 0.5 and scope["pred"].summary["speedup"] >= 1.0
    assert scope["run"].events.num_rows == scope["trace"].events.num_rows
    assert "by layer type" in capsys.readouterr().out
