"""The C writer ``gpuan_tensor_log.h``: tests/c/tensor_log_roundtrip.c (built with gcc) writes logs in the four
formats whose every field is a formula of the entry index; they are read back here with numpy and compared
field by field, byte for byte, with the Python writer's files and through the reader's auto-detection."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from gpuan.trace.tensorlog.formats import DTYPES, MAX_EXPERTS, MAX_SOURCES, NO_EXPERT, NO_LAYER, NO_OFFSET, NO_TENSOR

ROOT = Path(__file__).resolve().parents[1]
HEADER_DIR = ROOT / "gpuan" / "trace" / "tensorlog"
PROGRAM = ROOT / "tests" / "c" / "tensor_log_roundtrip.c"
GCC, GXX = shutil.which("gcc"), shutil.which("g++")
CFLAGS = ["-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-pthread"]

pytestmark = pytest.mark.skipif(GCC is None, reason="gcc not found on PATH: cannot build the C tensor-log writer")

# (format, capacity, entries offered). The program offers the first half through gtl_append and the rest
# through batches of 7: seed64's batch reserving slots 899..905 straddles the capacity (1 stored, 6 dropped),
# op256 is already full in the append half, packed64 and op1024 leave a zero tail (op1024 ends on a partial
# batch).
SINGLE = {"seed64": (900, 1000), "packed64": (1000, 600), "op256": (100, 300), "op1024": (64, 50)}
# (format, capacity, entries offered, threads): every entry fits, and a log too small for the threads
THREADED = [("packed64", 4000, 4000, 8), ("op256", 500, 1500, 4)]

KINDS = np.array(["attn_q", "attn_k", "ffn_up", "ffn_gate_exps.weight"])


def expected(fmt: str, idx: np.ndarray) -> np.ndarray:
    """Return the entries the C program writes for indices `idx` (its fill(), vectorised)."""
    i = np.asarray(idx, np.int64)
    e = np.zeros(len(i), DTYPES[fmt])
    no_layer = i % 11 == 10
    layer = np.where(no_layer, NO_LAYER, i % 5)
    e["timestamp_ns"] = 1000 + 7 * i
    e["token_id"] = i // 13
    e["layer_id"] = layer
    e["thread_id"] = i % 3
    e["operation_type"] = i % 7
    e["phase"] = i % 2
    if fmt in ("seed64", "packed64"):
        e["tensor_idx"] = np.where(i % 17 == 16, NO_TENSOR, i % 97)
        e["tensor_ptr"] = 0x7F0000000000 + 64 * i
        offset = (4096 + 32 * i).astype(np.uint64)
        offset[no_layer] = NO_OFFSET
        e["file_offset"] = offset
        e["size_bytes"] = 1024 + 16 * i
        e["attention_head"] = i % 8
        e["qkv_type"] = i % 3
        e["expert_id"] = np.where(i % 4 == 3, NO_EXPERT, i % 8)
        e["expert_rank"] = i % 2
        e["routing_score"] = (i * 37) & 0xFFFF
        return e
    num = 1 + i % 4
    prefix = np.char.add(np.char.add("blk.", (i % 5).astype(str)), ".")
    e["num_sources"] = num
    e["dst_name"] = np.char.add(np.char.add(np.char.add(prefix, KINDS[i % 4]), "-"), i.astype(str))
    for k in range(MAX_SOURCES):
        used = num > k
        name = np.char.add(np.char.add(prefix, KINDS[(i + k) % 4]), f".src{k}-")
        memory = (i + k) % 2
        src = e["sources"][:, k]
        src["name"] = np.where(used, np.char.add(name, i.astype(str)), "")
        src["ptr"] = np.where(used, 0x7F0000000000 + 64 * i + 0x1000000 * (k + 1), 0)
        src["size"] = np.where(used, 1024 + 16 * i + k, 0)
        src["layer"] = np.where(used, layer, 0)
        src["memory_source"] = np.where(used, memory, 0)
        src["disk_offset_or_buffer_id"] = np.where(
            used, np.where(memory == 0, 4096 + 32 * i + 8 * k, 1 + (i + k) % 6), 0
        )
        src["tensor_idx"] = np.where(used, 4 * i + k, 0)
    if fmt == "op1024":
        ne = i % 9
        j = np.arange(MAX_EXPERTS)
        e["num_experts"] = ne
        e["expert_ids"] = np.where(j < ne[:, None], (3 * i[:, None] + j) % 64, -1)
    return e


def assert_fields_equal(got: np.ndarray, want: np.ndarray, where: str = "") -> None:
    for name in want.dtype.names:
        if want.dtype[name].names or (want.dtype[name].subdtype and want.dtype[name].subdtype[0].names):
            assert_fields_equal(got[name], want[name], f"{where}{name}.")
        else:
            np.testing.assert_array_equal(got[name], want[name], err_msg=f"field {where}{name}")


def read_back(path: Path, fmt: str, written: int) -> np.ndarray:
    """Return the written entries of `path` after checking that everything past them is zero."""
    raw = np.memmap(path, dtype=DTYPES[fmt], mode="r")
    tail = np.memmap(path, dtype=np.uint8, mode="r", offset=written * DTYPES[fmt].itemsize)
    assert not tail.any(), "bytes after the written entries must stay zero"
    return raw[:written]


def sidecar(path: Path) -> dict:
    return json.loads(Path(f"{path}.meta.json").read_text(encoding="utf-8"))


def run(exe: Path, path: Path, fmt: str, capacity: int, count: int, threads: int = 0) -> tuple[int, int]:
    out = subprocess.run(
        [str(exe), str(path), fmt, str(capacity), str(count), str(threads)], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    written, overflow = map(int, out.stdout.split())
    return written, overflow


@pytest.fixture(scope="module")
def exe(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("c") / "tensor_log_roundtrip"
    cmd = [GCC, *CFLAGS, f"-I{HEADER_DIR}", str(PROGRAM), "-o", str(path)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return path


@pytest.fixture(scope="module")
def c_logs(exe, tmp_path_factory) -> dict[str, Path]:
    """The single-threaded logs, one per format, written once for the tests below."""
    out = tmp_path_factory.mktemp("logs")
    logs = {}
    for fmt, (capacity, count) in SINGLE.items():
        logs[fmt] = out / f"{fmt}.log"
        assert run(exe, logs[fmt], fmt, capacity, count) == (min(capacity, count), max(0, count - capacity))
    return logs


@pytest.mark.parametrize("fmt", SINGLE)
def test_c_log_round_trip(c_logs, fmt):
    capacity, count = SINGLE[fmt]
    written, overflow = min(capacity, count), max(0, count - capacity)
    path = c_logs[fmt]
    assert path.stat().st_size == capacity * DTYPES[fmt].itemsize
    meta = {"format": fmt, "entry_bytes": DTYPES[fmt].itemsize, "capacity": capacity, "written": written}
    assert sidecar(path) == meta | {"overflow": overflow}
    got = read_back(path, fmt, written)
    want = expected(fmt, np.arange(written))
    assert_fields_equal(got, want)
    # the padding too, seed64's compiler hole included
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize(("fmt", "capacity", "count", "threads"), THREADED)
def test_c_log_threads(exe, tmp_path, fmt, capacity, count, threads):
    path = tmp_path / f"{fmt}.log"
    written, overflow = run(exe, path, fmt, capacity, count, threads)
    assert (written, overflow) == (min(capacity, count), count - min(capacity, count))
    assert sidecar(path)["written"] == written and sidecar(path)["overflow"] == overflow
    got = read_back(path, fmt, written)
    # slots go to threads in reservation order, so only the set of entries is known
    step, rest = np.divmod(got["timestamp_ns"].astype(np.int64) - 1000, 7)
    assert not rest.any()
    assert len(np.unique(step)) == written and step.min() >= 0 and step.max() < count
    if written == count:
        assert np.array_equal(np.sort(step), np.arange(count))
    want = expected(fmt, step)
    assert_fields_equal(got, want)
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("fmt", SINGLE)
def test_c_log_matches_python_writer(c_logs, tmp_path, fmt):
    try:
        from gpuan.trace.tensorlog.write import open_writer
    except ImportError:
        pytest.skip("gpuan.trace.tensorlog.write.open_writer is not available")
    capacity, count = SINGLE[fmt]
    path = tmp_path / f"{fmt}.log"
    writer = open_writer(path, fmt, capacity)
    entries = expected(fmt, np.arange(count))
    writer.append(entries[: count // 2])
    writer.append(entries[count // 2 :])
    writer.close()
    assert path.read_bytes() == c_logs[fmt].read_bytes()
    assert sidecar(path) == sidecar(c_logs[fmt])


@pytest.mark.parametrize("fmt", SINGLE)
def test_c_log_auto_detected(c_logs, fmt):
    try:
        from gpuan.trace.tensorlog.read import open_log
    except ImportError:
        pytest.skip("gpuan.trace.tensorlog.read.open_log is not available")
    capacity, count = SINGLE[fmt]
    log = open_log(c_logs[fmt], format="auto")
    assert (log.format, log.entries, log.capacity) == (fmt, min(capacity, count), capacity)
    assert log.overflow == max(0, count - capacity)


CPP_USER = r"""
#ifdef WITH_IMPL
#define GPUAN_TENSOR_LOG_IMPLEMENTATION
#endif
#include "gpuan_tensor_log.h"

static thread_local gtl_batch batch;

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    gtl_log *log = gtl_open(argv[1], GTL_OP1024, 4);
    if (log == nullptr) return 1;
    gtl_op1024 e = {};
    e.num_sources = 1;
    gtl_copy_name(e.dst_name, sizeof e.dst_name, "blk.0.attn_q.weight");
    gtl_copy_name(e.sources[0].name, sizeof e.sources[0].name, "blk.0.attn_norm.weight");
    gtl_batch_init(&batch, log, 0);
    for (int i = 0; i < 5; i++) {
        e.timestamp_ns = 1000 + static_cast<uint64_t>(i);
        gtl_batch_add(&batch, &e);
    }
    if (gtl_batch_flush(&batch) != 1 || gtl_now_ns() == 0) return 1;
    return gtl_close(log) == 0 ? 0 : 1;
}
"""


@pytest.mark.skipif(GXX is None, reason="g++ not found on PATH: cannot check that the header is C++-clean")
def test_header_is_cpp_clean(tmp_path):
    """C++ code can use the header with the implementation compiled as C (extern "C" linkage) or as C++
    (std::atomic in place of C11 atomics)."""
    user, impl = tmp_path / "user.cpp", tmp_path / "impl.c"
    user.write_text(CPP_USER, encoding="utf-8")
    impl.write_text('#define GPUAN_TENSOR_LOG_IMPLEMENTATION\n#include "gpuan_tensor_log.h"\n', encoding="utf-8")
    cxx = [GXX, "-std=c++11", "-O1", "-Wall", "-Wextra", "-Werror", "-pedantic", "-pthread", f"-I{HEADER_DIR}"]
    builds = {
        "c_impl": [[GCC, *CFLAGS, f"-I{HEADER_DIR}", "-c", str(impl), "-o", str(tmp_path / "impl.o")],
                   [*cxx, str(user), str(tmp_path / "impl.o"), "-o", str(tmp_path / "c_impl")]],
        "cpp_impl": [[*cxx, "-DWITH_IMPL", str(user), "-o", str(tmp_path / "cpp_impl")]],
    }  # fmt: skip
    for name, steps in builds.items():
        for cmd in steps:
            out = subprocess.run(cmd, capture_output=True, text=True)
            assert out.returncode == 0, out.stderr
        log = tmp_path / f"{name}.log"
        assert subprocess.run([str(tmp_path / name), str(log)]).returncode == 0
        assert sidecar(log) == {"format": "op1024", "entry_bytes": 1024, "capacity": 4, "written": 4, "overflow": 1}
        got = read_back(log, "op1024", 4)
        assert got["timestamp_ns"].tolist() == [1000, 1001, 1002, 1003]
        assert set(got["dst_name"]) == {b"blk.0.attn_q.weight"}
        assert set(got["sources"][:, 0]["name"]) == {b"blk.0.attn_norm.weight"}
