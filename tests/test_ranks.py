"""A directory of per-rank traces loads as one table with a rank column on a common time base; each file's
rank comes from its own metadata, else its name, else its place in the natural order of the names."""

from __future__ import annotations

import gzip
import json
import sqlite3

import numpy as np
import pyarrow.compute as pc
import pytest

import gpuan
from gpuan.errors import TraceError
from gpuan.trace import parquet
from gpuan.trace.kineto.scanner import array_end
from gpuan.trace.ranks import natural_key, own_rank, ranked_files


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


DLRM = "kineto/dlrm_8rank_nccl"


def _own_rank(path) -> int:
    """distributedInfo.rank of a Kineto file, read with json."""
    with gzip.open(path) as f:
        return json.load(f)["distributedInfo"]["rank"]


def renamed_dlrm(data_dir, tmp_path):
    """Copy the DLRM run as worker{rank+8}_... so that neither name order nor name numbers are the ranks:
    lexicographically worker10..worker15 come before worker8 and worker9."""
    d = tmp_path / "dlrm"
    d.mkdir()
    for f in (data_dir / DLRM).iterdir():
        rank = _own_rank(f)
        (d / f"worker{rank + 8}{f.name[f.name.index('_') :]}").write_bytes(f.read_bytes())
    return d


def test_ranks_come_from_distributed_info_before_names(data_dir, tmp_path):
    d = renamed_dlrm(data_dir, tmp_path)
    names = [p.name for p in d.iterdir()]
    assert sorted(names)[0].startswith("worker10")  # the lexicographic order is not the rank order
    own = {_own_rank(p): p for p in d.iterdir()}
    assert sorted(own) == list(range(8))
    events = {}
    for r, p in own.items():
        with gzip.open(p) as f:
            events[r] = sum(e.get("ph") in ("X", "i") for e in json.load(f)["traceEvents"])
    t = gpuan.load(d, use_cache=False)
    assert t.metadata["ranks"] == list(range(8))
    counts = {r["values"]: r["counts"] for r in pc.value_counts(t.events["rank"]).to_pylist()}
    assert counts == events  # each rank's events are those of the file whose distributedInfo names it
    assert [f.rank for f in ranked_files(d)] == list(range(8))
    assert [f.path for f in ranked_files(d)] == [own[r] for r in range(8)]


def _tiny_trace(rank_at: str | None, rank: int = 5) -> dict:
    """A small Kineto trace whose distributedInfo comes before or after its events (or is absent); event
    names hold brackets, braces, quotes and backslashes that a bracket counter must not count."""
    events = [
        {"ph": "X", "cat": "kernel", "name": n, "pid": 0, "tid": 7, "ts": 10 * i, "dur": 5}
        for i, n in enumerate(['k]}"', "k\\", 'k\\"[{', "]"])
    ]
    doc = {}
    if rank_at == "before":
        doc["distributedInfo"] = {"rank": rank}
    doc["traceEvents"] = events
    if rank_at == "after":
        doc["distributedInfo"] = {"rank": rank, "pg_config": [{"ranks": [0, 1]}]}
    doc["traceName"] = "t"
    return doc


@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
@pytest.mark.parametrize("rank_at", ["before", "after", None])
def test_own_rank_before_or_after_the_events(tmp_path, suffix, rank_at):
    text = json.dumps(_tiny_trace(rank_at)).encode()
    p = tmp_path / f"trace_r9{suffix}"
    p.write_bytes(gzip.compress(text) if suffix.endswith(".gz") else text)
    want = 5 if rank_at else None
    assert own_rank(p) == want
    assert gpuan.load(p, use_cache=False).metadata["rank"] == want  # what the full reader finds
    assert ranked_files(tmp_path)[0].rank == (5 if rank_at else 9)  # else the number in the name


def test_array_end_across_every_split():
    doc = b'[{"a": "x\\\\", "b": "q\\"]}", "c": [1, {"d": "\\\\\\"["}]}, "]", {"e": []}], "after": 1}'
    end = doc.index(b'], "after"') + 1
    for cut in range(1, len(doc) + 1):
        for cut2 in range(cut, len(doc) + 1):
            state, offset, found = np.array([1, 0, 0], np.int64), 1, None
            for piece in (doc[1:cut], doc[cut:cut2], doc[cut2:]):
                buf = np.zeros(len(piece) + 64, np.uint8)
                buf[: len(piece)] = np.frombuffer(piece, np.uint8)
                at = array_end(buf, 0, len(piece), state)
                if at >= 0:
                    found = offset + at
                    break
                offset += len(piece)
            assert found == end, (cut, cut2)


def test_names_sort_numbers_as_numbers(tmp_path):
    # no metadata, no rank in the names: the place in the natural order
    for n in (10, 9, 1):
        doc = {"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": n, "dur": 1}]}
        (tmp_path / f"worker{n}.json").write_text(json.dumps(doc))
    assert [(f.rank, f.path.name) for f in ranked_files(tmp_path)] == [
        (0, "worker1.json"), (1, "worker9.json"), (2, "worker10.json")
    ]  # fmt: skip
    assert natural_key("w9_x") < natural_key("w10_x") and natural_key("r01") != natural_key("r1")


def test_two_files_with_one_rank_are_an_error(tmp_path, data_dir):
    d = tmp_path / "run"
    d.mkdir()
    src = data_dir / "kineto/cpu_ddp_gloo_4rank_slow_rank1_step2"
    for r in (0, 1):
        (d / f"rank{r}.json.gz").write_bytes((src / f"rank{r}.json.gz").read_bytes())
    (d / "extra.json.gz").write_bytes((src / "rank1.json.gz").read_bytes())  # distributedInfo rank 1 too
    with pytest.raises(TraceError) as e:
        gpuan.load(d)
    assert e.value.path == str(d)
    assert "two files hold rank 1" in e.value.problem
    assert "extra.json.gz" in e.value.problem and "rank1.json.gz" in e.value.problem


def test_parquet_and_nsys_ranks(tmp_path, data_dir):
    # a converted rank keeps the rank it was read with
    parquet.write(
        gpuan.load(data_dir / "kineto/cpu_ddp_gloo_4rank_slow_rank1_step2/rank3.json.gz"), tmp_path / "a.parquet"
    )
    assert own_rank(tmp_path / "a.parquet") == 3
    # an Nsight Systems export of a traced MPI run names its rank in MPI_RANKS
    db = tmp_path / "b.sqlite"
    db.write_bytes((data_dir / "nsys/saxpy_mpi_cuda_rank0.sqlite").read_bytes())
    assert own_rank(db) is None  # this export did not trace MPI
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE MPI_RANKS (rank INTEGER, globalTid INTEGER)")
        c.execute("INSERT INTO MPI_RANKS VALUES (6, 1), (6, 2)")
    assert own_rank(db) == 6
    assert set(gpuan.load(db, use_cache=False).events["rank"].to_pylist()) == {6}
