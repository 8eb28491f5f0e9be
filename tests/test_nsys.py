"""The Nsight Systems SQLite reader, checked against the real sample export read directly with sqlite3."""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from gpuan.errors import TraceError
from gpuan.trace.kinds import KINDS
from gpuan.trace.nsys import read_nsys
from gpuan.trace.schema import SCHEMA

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
SAMPLE = DATA / "nsys" / "saxpy_mpi_cuda_rank0.sqlite"

# Nsight's CUDA event classes: 0 runtime, 1 driver, 67 a backtrace copy of a call (not a call itself)
RUNTIME_CLASS, DRIVER_CLASS, BACKTRACE_CLASS = 0, 1, 67
NVTX_RANGES = "NVTX_EVENTS WHERE end IS NOT NULL AND eventType IN (59, 60)"


def by_time(trace) -> list[dict]:
    """The event rows in time order (the table itself is grouped by kind, in time order within each)."""
    return sorted(trace.events.to_pylist(), key=lambda r: r["ts"])


@pytest.fixture(scope="module")
def sample() -> Path:
    if not SAMPLE.is_file():
        pytest.skip(f"real test data not found: {SAMPLE} (the shared data directory ../shared/data is absent)")
    return SAMPLE


@pytest.fixture(scope="module")
def trace(sample):
    return read_nsys(str(sample))


@pytest.fixture(scope="module")
def db(sample):
    conn = sqlite3.connect(f"file:{sample}?mode=ro", uri=True)
    yield conn
    conn.close()


def scalar(db: sqlite3.Connection, sql: str):
    return db.execute(sql).fetchone()[0]


def rows(trace, kind: str) -> list[dict]:
    return trace.of_kind(kind).to_pylist()


def test_schema_and_metadata(trace, sample, db):
    assert trace.events.schema.equals(SCHEMA)
    assert trace.events["kind"].combine_chunks().dictionary.to_pylist() == list(KINDS)
    meta = trace.metadata
    assert meta["source"] == str(sample) and meta["format"] == "nsys"
    assert meta["distributed_info"] == {} and meta["rank"] is None
    base = scalar(
        db,
        "SELECT MIN(s) FROM (SELECT MIN(start) s FROM CUPTI_ACTIVITY_KIND_KERNEL"
        " UNION ALL SELECT MIN(start) FROM CUPTI_ACTIVITY_KIND_MEMCPY"
        f" UNION ALL SELECT MIN(start) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass != {BACKTRACE_CLASS}"
        f" UNION ALL SELECT MIN(start) FROM {NVTX_RANGES})",
    )
    assert meta["base_time_ns"] == base == 65_117_824  # the MPI_Init NVTX range opens the trace
    assert pa.compute.min(trace.events["ts"]).as_py() == 0
    assert meta["file"]["EXPORT_PRODUCT_VERSION"] == "2022.2.1.31"


def test_counts_match_the_tables(trace, db):
    counts = Counter(trace.events["kind"].to_pylist())
    assert counts["kernel"] == scalar(db, "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL") == 5
    assert counts["memcpy"] == scalar(db, "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY") == 15
    assert counts["memset"] == scalar(db, "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_MEMSET") == 0
    runtime_sql = "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass = "
    assert counts["runtime"] == scalar(db, runtime_sql + str(RUNTIME_CLASS)) == 56
    assert counts["driver"] == scalar(db, runtime_sql + str(DRIVER_CLASS)) == 1
    # the 38 backtrace rows repeat runtime calls; counting them would double the API time
    assert scalar(db, runtime_sql + str(BACKTRACE_CLASS)) == 38
    assert counts["annotation"] == scalar(db, f"SELECT COUNT(*) FROM {NVTX_RANGES}") == 22
    assert trace.events.num_rows == 5 + 15 + 56 + 1 + 22
    assert Counter(trace.events["cat"].to_pylist()) == {
        "kernel": 5,
        "gpu_memcpy": 15,
        "cuda_runtime": 56,
        "cuda_driver": 1,
        "nvtx": 22,
    }


def test_kernel_time_per_stream(trace, db):
    expected = dict(db.execute("SELECT streamId, SUM(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY streamId"))
    got = trace.of_kind("kernel").group_by("stream").aggregate([("dur", "sum")]).to_pylist()
    assert {r["stream"]: r["dur_sum"] for r in got} == expected == {7: 88_573_480}


def test_kernel_rows_exact(trace, db):
    base = trace.metadata["base_time_ns"]
    kernels = rows(trace, "kernel")
    expected = db.execute(
        "SELECT k.start, k.end, k.correlationId, k.deviceId, k.streamId, s.value, k.gridX, k.blockX,"
        " k.registersPerThread, k.staticSharedMemory + k.dynamicSharedMemory"
        " FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName ORDER BY k.start"
    ).fetchall()
    got = [
        (
            k["ts"] + base,
            k["ts"] + base + k["dur"],
            k["correlation"],
            k["device"],
            k["stream"],
            k["name"],
            k["grid_x"],
            k["block_x"],
            k["registers"],
            k["shared_memory"],
        )
        for k in kernels
    ]
    assert got == expected
    first = kernels[0]
    assert (first["ts"], first["dur"]) == (859_804_362, 17_704_808)
    assert first["name"] == "saxpy(double *, double *, double *, double, int)"
    assert (first["grid_x"], first["grid_y"], first["grid_z"]) == (2, 1, 1)
    assert (first["block_x"], first["block_y"], first["block_z"]) == (512, 1, 1)
    assert (first["pid"], first["tid"], first["correlation"]) == (0, 7, 140)
    assert first["bytes"] is None and first["memcpy_kind"] is None


def test_memcpy_kinds_and_bytes(trace, db):
    copies = rows(trace, "memcpy")
    by_kind = Counter(c["memcpy_kind"] for c in copies)
    sql = dict(db.execute("SELECT copyKind, COUNT(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY copyKind"))
    assert by_kind == {"HtoD": sql[1], "DtoH": sql[2]} == {"HtoD": 10, "DtoH": 5}
    assert {c["bytes"] for c in copies} == {262_144_000}
    assert sum(c["bytes"] for c in copies) == scalar(db, "SELECT SUM(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY")
    assert {c["name"] for c in copies} == {"[CUDA memcpy HtoD]", "[CUDA memcpy DtoH]"}
    base = trace.metadata["base_time_ns"]
    assert (copies[0]["ts"] + base, copies[0]["dur"]) == (887_857_742, 906_688_200 - 887_857_742)


def test_runtime_calls(trace, db):
    calls = rows(trace, "runtime")
    global_tid = scalar(db, "SELECT DISTINCT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME")
    pid, tid = (global_tid >> 24) & 0xFFFFFF, global_tid & 0xFFFFFF
    assert {(c["pid"], c["tid"]) for c in calls} == {(pid, tid)} == {(1_230_493, 1_230_493)}
    assert Counter(c["name"] for c in calls) == {
        "cudaHostRegister": 9,
        "cudaHostUnregister": 9,
        "cudaMalloc": 15,
        "cudaMemcpy": 15,
        "cudaLaunchKernel": 5,
        "cudaFree": 3,
    }
    correlations = [c["correlation"] for c in calls]
    assert len(set(correlations)) == len(correlations)  # no call twice
    launches = {c["correlation"]: c for c in calls if c["name"] == "cudaLaunchKernel"}
    for k in rows(trace, "kernel"):
        assert launches[k["correlation"]]["ts"] < k["ts"]
    (driver,) = rows(trace, "driver")
    assert driver["name"] == "cuModuleGetLoadingMode" and driver["correlation"] == 1


def test_nvtx_ranges(trace, db):
    ranges = rows(trace, "annotation")
    expected = Counter(
        name
        for (name,) in db.execute(
            "SELECT COALESCE(n.text, s.value) FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId"
            " WHERE n.end IS NOT NULL AND n.eventType IN (59, 60)"
        )
    )
    assert Counter(r["name"] for r in ranges) == expected
    assert expected == {"MPI_Send": 10, "MPI_Recv": 5, "saxpy": 5, "MPI_Init": 1, "MPI_Finalize": 1}
    assert {r["cat"] for r in ranges} == {"nvtx"}
    init = next(r for r in ranges if r["name"] == "MPI_Init")
    assert (init["ts"], init["dur"]) == (0, 710_796_807 - 65_117_824)
    assert init["device"] is None and init["stream"] is None


def test_device_properties(trace, db):
    (device,) = trace.metadata["device_properties"]
    name, sms, major, minor, memory = db.execute(
        "SELECT name, smCount, computeMajor, computeMinor, totalMemory FROM TARGET_INFO_GPU"
    ).fetchone()
    assert device["name"] == name == "NVIDIA A100-SXM4-40GB"
    assert device["numSms"] == sms == 108
    assert (device["computeMajor"], device["computeMinor"]) == (major, minor) == (8, 0)
    assert device["totalGlobalMem"] == memory
    assert device["id"] == 0


def test_thread_names(trace):
    assert trace.metadata["threads"]["1230493:1230493"] == {"name": "MPI Rank 0"}
    assert trace.metadata["processes"] == {"1230493": {"name": "./saxpy-mpi-cuda"}}


def test_truncated_export_is_a_trace_error(sample, tmp_path):
    bad = tmp_path / "truncated.sqlite"
    bad.write_bytes(sample.read_bytes()[:200_000])
    with pytest.raises(TraceError) as err:
        read_nsys(str(bad))
    assert err.value.path == str(bad) and "\n" not in err.value.problem


@pytest.mark.parametrize("dropped", [["streamId"], ["start", "end"]])
def test_an_activity_table_without_a_needed_column_is_named(sample, tmp_path, dropped):
    copy = tmp_path / "dropped.sqlite"
    copy.write_bytes(sample.read_bytes())
    with sqlite3.connect(copy) as conn:
        for col in dropped:
            conn.execute(f'ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN "{col}"')
    with pytest.raises(
        TraceError, match=f"table CUPTI_ACTIVITY_KIND_KERNEL has no column {', '.join(sorted(dropped))}"
    ):
        read_nsys(str(copy))


def test_sqlite_without_nsight_tables(tmp_path):
    path = tmp_path / "other.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE measurements (x INTEGER)")
    conn.commit()
    conn.close()
    with pytest.raises(TraceError) as err:
        read_nsys(str(path))
    assert err.value.problem == "an SQLite file without Nsight Systems tables"


@pytest.mark.parametrize("content", [b"this is not a database" * 50, b"SQLite format 3\x00" + b"\xff" * 4096])
def test_corrupt_sqlite(tmp_path, content):
    path = tmp_path / "corrupt.sqlite"
    path.write_bytes(content)
    with pytest.raises(TraceError) as err:
        read_nsys(str(path))
    assert "\n" not in str(err.value)


def test_missing_file(tmp_path):
    with pytest.raises(TraceError, match="no such file"):
        read_nsys(str(tmp_path / "absent.sqlite"))


def test_small_export_with_memset_enums_and_absent_tables(tmp_path):
    """Paths the sample does not exercise: memsets, the enum tables of newer exports, NVTX text ids, no
    kernel table at all."""
    path = tmp_path / "mini.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);
        INSERT INTO StringIds VALUES (1, 'phase'), (2, 'cuMemcpyDtoD_v2'), (3, 'cudaMemset_v3020');
        CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start, end, deviceId, streamId, correlationId, bytes);
        INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (1000, 1050, 1, 3, 5, 4096);
        CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, streamId, correlationId, bytes, copyKind);
        INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (1100, 1200, 1, 3, 6, 64, 8), (1150, 1300, 1, 3, 7, 32, 10);
        CREATE TABLE ENUM_CUDA_MEMCPY_OPER (id INTEGER, name TEXT, label TEXT);
        INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (8, 'CUDA_MEMCPY_KIND_DTOD', 'Device-to-Device'),
                                                 (10, 'CUDA_MEMCPY_KIND_PTOP', 'Peer-to-Peer');
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, correlationId, nameId);
        INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES
            (990, 999, 0, (42 << 24) | 43, 5, 3), (989, 1000, 67, (42 << 24) | 43, 5, 3),
            (1090, 1095, 1, (42 << 24) | 44, 6, 2);
        CREATE TABLE NVTX_EVENTS (start, end, eventType, text, globalTid, textId);
        INSERT INTO NVTX_EVENTS VALUES (900, 1400, 59, NULL, (42 << 24) | 43, 1), (950, 960, 60, 'inline', NULL, NULL),
                                       (970, NULL, 34, 'a mark', NULL, NULL);
        """
    )
    conn.commit()
    conn.close()
    trace = read_nsys(str(path))
    assert trace.events.schema.equals(SCHEMA)
    assert trace.metadata["base_time_ns"] == 900
    got = [(r["kind"], r["name"], r["ts"], r["dur"]) for r in by_time(trace)]
    assert got == [
        ("annotation", "phase", 0, 500),
        ("annotation", "inline", 50, 10),
        ("runtime", "cudaMemset", 90, 9),
        ("memset", "[CUDA memset]", 100, 50),
        ("driver", "cuMemcpyDtoD_v2", 190, 5),
        ("memcpy", "[CUDA memcpy DtoD]", 200, 100),
        ("memcpy", "[CUDA memcpy PtoP]", 250, 150),
    ]
    table = by_time(trace)
    assert [r["memcpy_kind"] for r in table if r["kind"] == "memcpy"] == ["DtoD", "PtoP"]
    assert [(r["pid"], r["tid"]) for r in table if r["kind"] in ("runtime", "driver")] == [(42, 43), (42, 44)]
    memset = next(r for r in table if r["kind"] == "memset")
    assert (memset["bytes"], memset["device"], memset["stream"], memset["correlation"]) == (4096, 1, 3, 5)


@pytest.mark.parametrize(
    "table, column, row, value",
    [
        ("CUPTI_ACTIVITY_KIND_KERNEL", "start", 1, float("inf")),
        ("CUPTI_ACTIVITY_KIND_KERNEL", "start", 4, 0.5),
        ("CUPTI_ACTIVITY_KIND_MEMCPY", "streamId", 4, 1.18e21),
        ("CUPTI_ACTIVITY_KIND_KERNEL", "gridX", 2, float("-inf")),
        ("NVTX_EVENTS", "start", 8, "abc"),
    ],
)
def test_a_value_that_is_no_integer_is_named(sample, tmp_path, table, column, row, value):
    """Nsight writes integers in these columns: a REAL or TEXT there is a corrupt export, named by table,
    row and column, never a traceback nor a truncated value."""
    copy = tmp_path / "odd.sqlite"
    copy.write_bytes(sample.read_bytes())
    with sqlite3.connect(copy) as conn:
        conn.execute(f'UPDATE {table} SET "{column}" = ? WHERE rowid = ?', (value, row))
    with pytest.raises(TraceError, match=rf"{table} row {row}: .* is .*, where Nsight writes an integer"):
        read_nsys(str(copy))


@pytest.mark.parametrize(
    "table, where",
    [
        ("CUPTI_ACTIVITY_KIND_KERNEL", "rowid = 3"),
        # a backtrace copy of a runtime call (eventClass 67) is not read as an event, but it is in the export
        ("CUPTI_ACTIVITY_KIND_RUNTIME", "eventClass = 67"),
    ],
)
def test_an_event_that_ends_before_it_starts_is_bad_input(sample, tmp_path, table, where):
    copy = tmp_path / "backwards.sqlite"
    copy.write_bytes(sample.read_bytes())
    with sqlite3.connect(copy) as conn:
        row, start = conn.execute(f"SELECT rowid, start FROM {table} WHERE {where} LIMIT 1").fetchone()
        conn.execute(f"UPDATE {table} SET end = -1 WHERE rowid = ?", (row,))
    with pytest.raises(TraceError, match=f"{table} row {row}: ends at -1 ns, before it starts at {start} ns"):
        read_nsys(str(copy))


def test_a_schema_with_bytes_that_are_no_utf8_is_bad_input(sample, tmp_path):
    """SQLite's own error message quotes the corrupt name: still one line naming the file, not a traceback."""
    copy = tmp_path / "schema.sqlite"
    copy.write_bytes(sample.read_bytes())
    with sqlite3.connect(copy) as conn:
        conn.execute("PRAGMA writable_schema = ON")
        conn.execute("CREATE TABLE x (a)")
        conn.execute("UPDATE sqlite_master SET name = CAST(X'78FF8E' AS TEXT) WHERE name = 'x'")
    with pytest.raises(TraceError, match="not a readable SQLite database"):
        read_nsys(str(copy))
