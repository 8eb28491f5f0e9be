"""A directory of per-rank traces loads as one table with a rank column on a common time base."""

from __future__ import annotations

import gzip
import json

import pyarrow.compute as pc

import gpuan


def test_rank_directory(data_dir):
    d = data_dir / "kineto" / "cpu_ddp_gloo_4rank_slow_rank1_step2"
    t = gpuan.load(d, use_cache=False)
    assert t.metadata["ranks"] == [0, 1, 2, 3]
    per_rank = {}
    absolute_start = {}
    for r in range(4):
        doc = json.loads(gzip.open(d / f"rank{r}.json.gz").read())
        ev = [e for e in doc["traceEvents"] if e.get("ph") in ("X", "i")]
        per_rank[r] = len(ev)
        first = min(round(e["ts"] * 1000) for e in doc["traceEvents"] if "ts" in e and e.get("ph") != "M")
        absolute_start[r] = doc["baseTimeNanoseconds"] + first
    counts = {r["values"]: r["counts"] for r in pc.value_counts(t.events["rank"]).to_pylist()}
    assert counts == per_rank
    # every rank's first event sits at its own absolute start relative to the earliest rank
    base = min(absolute_start.values())
    assert t.metadata["base_time_ns"] == base
    for r in range(4):
        first = pc.min(t.events.filter(pc.equal(t.events["rank"], r))["ts"]).as_py()
        assert first == absolute_start[r] - base


def test_rank_from_file_name(tmp_path):
    for r in (3, 5):
        doc = {"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1 + r, "dur": 1}]}
        (tmp_path / f"trace_rank{r}.json").write_text(json.dumps(doc))
    t = gpuan.load(tmp_path)
    assert sorted(t.events["rank"].to_pylist()) == [3, 5]
