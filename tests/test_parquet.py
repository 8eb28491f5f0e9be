"""The Parquet cache: round trips, freshness, atomic writes, bad files."""

from __future__ import annotations

import os
import time

import pyarrow.parquet as pq
import pytest

import gpuan
from gpuan.errors import TraceError
from gpuan.trace import parquet


@pytest.fixture
def trace_copy(tmp_path, data_dir):
    p = tmp_path / "a.json.gz"
    p.write_bytes((data_dir / "kineto" / "a100_ddp2_rank0_nccl.json.gz").read_bytes())
    return p


def same_content(a, b) -> bool:
    """Tables equal value for value (dictionaries may be chunked and ordered differently)."""
    import pyarrow as pa

    def plain(t):
        cols = [c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c for c in t.columns]
        return pa.table(cols, names=t.column_names)

    return a.schema.names == b.schema.names and plain(a).equals(plain(b))


def test_round_trip_keeps_table_flows_and_metadata(tmp_path, trace_copy):
    t = gpuan.load(trace_copy, use_cache=False)
    out = parquet.write(t, tmp_path / "a.parquet")
    back = gpuan.load(out)
    assert back.events.schema.equals(t.events.schema)
    assert same_content(back.events, t.events)
    assert back.flow_count == t.flows.num_rows > 0
    assert callable(back._flows)  # counted from the row groups, not decoded (what `gpuan info` needs)
    assert back.flows.equals(t.flows)
    assert back.metadata["device_properties"] == t.metadata["device_properties"]
    assert back.metadata["base_time_ns"] == t.metadata["base_time_ns"]


def test_flows_of_a_file_replaced_after_its_events_were_read_are_refused(tmp_path, trace_copy):
    """The flows are read from the file when first used: a file written in its place since then (another
    trace, or the same one again) is one error, never another trace's flows."""
    t = gpuan.load(trace_copy, use_cache=False)
    out = parquet.write(t, tmp_path / "a.parquet")
    back = gpuan.load(out)
    parquet.write(t, out)  # atomically, as every gpuan write: a new file in its place
    with pytest.raises(TraceError, match="changed after its events were read"):
        assert back.flows.num_rows >= 0
    assert gpuan.load(out).flows.equals(t.flows)


def test_cache_is_used_only_while_fresh(trace_copy):
    t = gpuan.load(trace_copy, use_cache=False)
    cache = parquet.write(t, parquet.cache_path(trace_copy), source=trace_copy)
    assert parquet.is_fresh(cache, trace_copy)
    # a doctored cache proves which file was read
    doctored = t.events.slice(0, 10)
    pq.write_table(doctored.replace_schema_metadata(pq.read_schema(cache).metadata), cache)
    assert gpuan.load(trace_copy).events.num_rows == 10
    # touching the source makes the cache stale: the source is read again
    later = time.time() + 5
    os.utime(trace_copy, (later, later))
    assert not parquet.is_fresh(cache, trace_copy)
    assert gpuan.load(trace_copy).events.num_rows == t.events.num_rows


def test_failed_write_leaves_no_partial_file(tmp_path, trace_copy, monkeypatch):
    t = gpuan.load(trace_copy, use_cache=False)
    target = tmp_path / "x.parquet"
    parquet.write(t, target)
    before = target.read_bytes()

    real_slices = parquet._kind_slices

    def slices_then_disk_full(table):
        pieces = real_slices(table)
        yield pieces[0]  # part of the file is written ...
        raise OSError("disk full")  # ... then the disk fills up

    monkeypatch.setattr(parquet, "_kind_slices", slices_then_disk_full)
    with pytest.raises(OSError):
        parquet.write(t, target)
    assert target.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("x.parquet.")] == []


def test_foreign_parquet_is_refused(tmp_path):
    import pyarrow as pa

    p = tmp_path / "foreign.parquet"
    pq.write_table(pa.table({"a": [1, 2]}), p)
    with pytest.raises(TraceError, match="did not write"):
        gpuan.load(p)


def _rewritten(src, dst, metadata=None, kind=None):
    """Copy the events of the gpuan Parquet file `src` to `dst` with some schema metadata replaced, or every
    event's kind."""
    import pyarrow as pa

    table = parquet.read(src).events  # without the flows' rows
    meta = dict(pq.read_schema(src).metadata)
    meta.update(metadata or {})
    if kind is not None:
        kinds = pa.array([kind] * table.num_rows).dictionary_encode()
        table = table.set_column(table.schema.get_field_index("kind"), "kind", kinds)
    pq.write_table(table.replace_schema_metadata(meta), dst)
    return dst


@pytest.mark.parametrize(
    "change, words",
    [
        ({"metadata": {parquet.META_KEY: b"[1, 2]"}}, "unreadable gpuan metadata"),
        ({"metadata": {parquet.META_KEY: b"{not json"}}, "unreadable gpuan metadata"),
        ({"metadata": {parquet.FLOWS_KEY: b"PAR1..."}}, "unreadable flows"),  # format 8: flows in the footer
        ({"metadata": {parquet.FLOW_GROUPS_KEY: b"two"}}, "unreadable record of the flows' row groups"),
        ({"metadata": {parquet.FLOW_GROUPS_KEY: b"5"}}, "unreadable record of the flows' row groups"),
        ({"kind": "zzz"}, "unknown event kinds in the Parquet file: zzz"),
    ],
)
def test_damaged_gpuan_parquet_is_one_error(tmp_path, change, words):
    from gpuan.synth.kineto import sample_trace_path

    good = parquet.write(gpuan.load(sample_trace_path(tmp_path), use_cache=False), tmp_path / "good.parquet")
    bad = _rewritten(good, tmp_path / "bad.parquet", **change)
    with pytest.raises(TraceError, match=words):
        assert gpuan.load(bad).flows.num_rows >= 0  # the flows are read on first use


def test_the_cache_directory_variable(tmp_path, monkeypatch):
    from gpuan.errors import UsageError

    monkeypatch.setenv("GPUAN_CACHE_DIR", str(tmp_path))
    assert parquet.cache_path("/runs/a.json.gz") == tmp_path / "a.json.gz.gpuan.parquet"
    monkeypatch.setenv("GPUAN_CACHE_DIR", "")
    assert str(parquet.cache_path("/runs/a.json.gz")) == "/runs/a.json.gz.gpuan.parquet"
    # a variable that names no directory is a usage error naming it, not a file error
    for bad, why in ((tmp_path / "none", "does not exist"), (tmp_path / "f", "is not a directory")):
        (tmp_path / "f").write_text("")
        monkeypatch.setenv("GPUAN_CACHE_DIR", str(bad))
        with pytest.raises(UsageError, match=f"GPUAN_CACHE_DIR: {bad} {why}"):
            parquet.cache_path("/runs/a.json.gz")


def test_bad_environment_variables_are_one_line_usage_errors(tmp_path, trace_copy):
    import subprocess
    import sys

    for name, value in (("GPUAN_CACHE_DIR", str(tmp_path / "none")), ("GPUAN_THREADS", "0")):
        env = {**os.environ, name: value}
        r = subprocess.run(
            [sys.executable, "-m", "gpuan", "convert", str(trace_copy)], capture_output=True, text=True, env=env
        )
        assert r.returncode == 2 and r.stderr.startswith(f"gpuan: error: {name}: ") and len(r.stderr.splitlines()) == 1
    assert not list(tmp_path.glob("*.parquet"))
