"""Kineto ingest on the GPU (gpuan/trace/kineto/gpu/) against the CPU reader.

The kernels run in numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1`` must be set before numba is
imported, so each check runs this file as a script in a subprocess: ``python tests/test_kineto_gpu.py
CHECK ARGS``), with few threads and few blocks per thread so that thread boundaries fall inside strings
and escapes. The simulator runs every CUDA thread as Python: about 30 s per MB of JSON here, so the real
traces checked are those of at most :data:`SIM_MAX_BYTES` decompressed.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve()
DATA = HERE.parents[1].parent / "shared" / "data"
SIM_MAX_BYTES = 2_000_000  # decompressed: the simulator reads about 30 kB/s, so up to a minute a file
LAUNCH = {"threads": 8, "items": 3}  # few threads, thread boundaries every 192 bytes


def _sim(*args: str) -> str:
    """Run a check of this file in the CUDA simulator; return its stdout (it fails the test on error)."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    r = subprocess.run([sys.executable, str(HERE), *args], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def _small_kineto_files() -> list[Path]:
    """The Kineto files of ../shared/data small enough for the simulator (empty where it is absent): every
    single-file trace, and the smallest rank of each run directory (its ranks come from one program and
    one profiler, so one of them stands for the others at a minute of simulation each)."""
    if not DATA.is_dir():
        return []
    small = []
    for group in [sorted((DATA / "kineto").glob("*.json.gz"))] + [
        sorted(d.glob("*.json.gz"), key=lambda f: f.stat().st_size)[:1] for d in sorted((DATA / "kineto").iterdir())
        if d.is_dir()
    ]:  # fmt: skip
        for f in group:
            with gzip.open(f, "rb") as g:
                if len(g.read(SIM_MAX_BYTES + 1)) <= SIM_MAX_BYTES:
                    small.append(f)
    return small


# ---------------------------------------------------------------------------------------------------
# Generated traces: escapes, unicode, nested args, numbers in every JSON form

_NAMES = [
    "plain",
    'quote \\" inside',
    "back\\\\slash\\\\",
    "sl\\/ash",
    "uni \\u00e9\\u4e2D",
    "pair \\ud83d\\ude00",
    "lone \\ud800 half",
    "raw ünïcödé 中文 😀",
    "tab\\tnl\\n\\r\\b\\f",
    'brackets {[}] in a string, and \\\\\\" and }',
    "",
]
_TIMES = ["1", "0", "-0", "0.5", "12.345678", "1e3", "1.5E+2", "2e-3", "123456789012.125", "1.0e0", "7.0005", "3E2"]
_INTS = ["5", "-12", "0", "123456789012345678", "3.7", "1e2", '"0x1f"', '"42"', '"-7"', "null", "-0"]


def _event(rng: random.Random, i: int) -> dict:
    """One event as JSON text fragments (key -> value text)."""
    ph = rng.choice(["X", "X", "X", "i", "s", "f", "M", "B", "E"])
    ev = {
        "ph": f'"{ph}"',
        "name": f'"{rng.choice(_NAMES)}"',
        "cat": f'"{rng.choice(["kernel", "cpu_op", "gpu_memcpy", "user_annotation"])}"',
    }
    ev["pid"] = rng.choice(["1", "2", '"stream 7"', '"Spans"', "-3"])
    ev["tid"] = rng.choice(["1", "7", '"7"', '"thread \\"x\\""'])
    if ph == "M":
        ev["name"] = rng.choice(['"process_name"', '"thread_name"', '"process_sort_index"'])
        ev["args"] = f'{{"name": "{rng.choice(_NAMES)}", "sort_index": {rng.choice(["1", "-2", "3"])}, "labels": "L"}}'
        return ev
    ev["ts"] = rng.choice(_TIMES)
    if ph == "X":
        ev["dur"] = rng.choice(_TIMES[:-3] + ["null"])
    if ph in "sf":
        ev["id"] = rng.choice(["1", "2", '"3"'])
        if ph == "f":
            ev["bp"] = '"e"'
        return ev
    args = {
        "External id": rng.choice(_INTS),
        "correlation": rng.choice(_INTS),
        "stream": rng.choice(["7", "20", '"24"']),
        "device": rng.choice(["0", "1"]),
        "grid": rng.choice(["[1, 2, 3]", "[128]", "[]", "null", '"grid(100,)"', "[4, 5, 6, 7]"]),
        "block": rng.choice(["[128, 1, 1]", "[ 32 , 2 ]"]),
        "registers per thread": rng.choice(["32", "255"]),
        "shared memory": rng.choice(["0", "49152"]),
        # the last one laid out over lines, as json.dump(indent=...) writes it: runs of spaces after newlines
        "Input Dims": rng.choice(
            [
                "[[1, 2], [], [3]]",
                "[[1,2],[3,4,5]]",
                "[]",
                '"[1, 2]"',
                "[\n" + " " * 11 + "[\n  1,\n\t2],\n" + " " * 17 + "[]\n]",
            ]
        ),
        "Input type": rng.choice(['["float", "c10::Half"]', '["", "Scalar"]']),
        "Concrete Inputs": rng.choice(['["", "1.5", "[1, 2]"]', '["\\"quoted\\""]']),
        "Collective name": rng.choice(['"allreduce"', '"all_gather"']),
        "dtype": '"Float"',
        "Process Group Name": '"0"',
        "Process Group Ranks": rng.choice(["[0, 1]", "[0,1,2,3]"]),
        "In msg nelems": rng.choice(_INTS[:4]),
        "Out msg nelems": rng.choice(_INTS[:4]),
        "Group size": "2",
        "Sequence number": str(i),
        "Fwd thread id": "1",
        "bytes": rng.choice(["100", "1e3"]),
        "nested": rng.choice(
            [
                '{"a": [1, {"b": "}]\\"{"}, -0.0, 1e-300, true, false, null], "c": {}}',
                "{\n"
                + " " * 8
                + '"a": [\n'
                + " " * 16
                + '1, {"b": "}]\\"{"},\n'
                + " " * 9
                + 'null],\n  "c": {}\n    }',
            ]
        ),
        "kind": rng.choice(["1", "2", '"3"']),
        "Dst Rank": rng.choice(["1", "-1"]),
    }
    keep = rng.sample(sorted(args), rng.randint(0, len(args)))
    ev["args"] = "{" + ", ".join(f'"{k}": {args[k]}' for k in keep) + "}"
    return ev


def generated_trace(seed: int, top_object: bool, events: int = 60) -> bytes:
    """Return a Kineto-like trace exercising every JSON form the reader meets (see the constants above)."""
    rng = random.Random(seed)
    parts = []
    for i in range(events):
        ev = _event(rng, i)
        items = list(ev.items())
        rng.shuffle(items)
        sep = rng.choice([", ", ",", ",\n    ", " ,\t"])
        parts.append("{" + sep.join(f'"{k}"{rng.choice([":", ": ", " : "])}{v}' for k, v in items) + "}")
    body = "[" + rng.choice(["\n", "", " "]) + ",\n".join(parts) + rng.choice(["\n", "", "  "]) + "]"
    if not top_object:
        return body.encode()
    head = (
        '{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "H100 \\"SXM\\""}], "distributedInfo": {"rank": 0}'
    )
    return f'{head}, "traceEvents": {body}, "traceName": "t[1]", "displayTimeUnit": "ms"}}'.encode()


# ---------------------------------------------------------------------------------------------------
# The checks, run as a script in the simulator


def _quiet() -> None:
    # numpy warns about the wrapping uint64 arithmetic (the hash) that CUDA does silently
    warnings.simplefilter("ignore", RuntimeWarning)


def check_tables(*paths: str) -> None:
    """The GPU reader's trace equals the CPU reader's for each file: event table (dictionaries
    included), flows and metadata; and the GPU's scratch rows are the CPU scanner's."""
    _quiet()
    from gpuan.trace.kineto import read_kineto
    from gpuan.trace.kineto.events import build_trace
    from gpuan.trace.kineto.gpu.reader import scan_file_gpu

    for path in paths:
        raw = scan_file_gpu(path, np, **LAUNCH)
        assert raw is not None, f"{path}: the GPU path handed the file to the CPU reader"
        gpu = build_trace(raw, source=path)
        cpu = read_kineto(path)
        assert len(gpu) == len(cpu) > 0, path
        for name in cpu.events.column_names:
            assert gpu.events[name].equals(cpu.events[name]), f"{path}: column {name} differs"
        assert gpu.events.equals(cpu.events), path
        assert gpu.flows.equals(cpu.flows), path
        assert gpu.metadata == cpu.metadata, path
        print("equal", path, len(cpu))


def check_generated(out_dir: str) -> None:
    """Generated traces (with and without a top-level object, plain and gzipped): tables equal."""
    paths = []
    for seed in range(4):
        for top in (True, False):
            data = generated_trace(seed, top)
            json.loads(data)  # the generator writes valid JSON
            p = Path(out_dir) / f"gen{seed}_{int(top)}.json"
            p.write_bytes(data)
            if seed == 0:
                p = p.with_suffix(".json.gz")
                p.write_bytes(gzip.compress(data))
            paths.append(str(p))
    check_tables(*paths)


def check_structure(seed: str) -> None:
    """Stage 1's masks and event starts against the numpy twin, on random JSON-ish bytes and on JSON."""
    _quiet()
    from gpuan.trace.kineto.gpu import structure_cuda as sc_cuda
    from gpuan.trace.kineto.gpu import structure_numpy as ref
    from gpuan.trace.kineto.gpu.upload import padded_size

    rng = np.random.default_rng(int(seed))
    alphabet = np.frombuffer(b'{}[]""\\\\\\ab,: ', np.uint8)
    texts = [alphabet[rng.integers(0, alphabet.size, int(rng.integers(1, 900)))] for _ in range(6)]
    texts += [np.frombuffer(generated_trace(int(seed), top), np.uint8) for top in (True, False)]
    for raw in texts:
        n = raw.size
        buf = np.full(padded_size(n), 0x20, np.uint8)
        buf[:n] = raw
        nblocks = buf.size // 64
        items = int(rng.integers(1, 4))
        nthreads = -(-nblocks // items)
        grid = (-(-nthreads // 4), 4)
        b64 = buf.view(np.uint64)
        quotes = np.zeros(nblocks, np.uint64)
        parity = np.zeros(nthreads, np.int64)
        sc_cuda._quotes_kernel[grid](buf, b64, nblocks, items, quotes, parity)
        assert np.array_equal(_bits_of(quotes)[:n], ref.quotes(raw)), "quote mask"
        before = (np.cumsum(parity) - parity) & 1
        opens, closes = np.zeros(nblocks, np.uint64), np.zeros(nblocks, np.uint64)
        delta = np.zeros(nthreads, np.int64)
        sc_cuda._brackets_kernel[grid](b64, quotes, before, nblocks, items, opens, closes, delta)
        want_o, want_c = ref.brackets(raw)
        assert np.array_equal(_bits_of(opens)[:n], want_o), "opening brackets"
        assert np.array_equal(_bits_of(closes)[:n], want_c), "closing brackets"
        assert int(delta.sum()) == int(ref.depth(raw)[-1]), "depth"
        for start, level in ((0, 0), (1, 1), (int(rng.integers(0, n)), 2)):
            got, end = sc_cuda.event_starts(np, buf, n, start, level, items=items, threads=4)
            want, want_end = ref.event_starts(raw, start, level)
            assert end == want_end and np.array_equal(got, want), (start, level)
    print("agree")


def _bits_of(masks: np.ndarray) -> np.ndarray:
    """Return the bits of 64-bit masks as bools, bit 0 of mask 0 first."""
    return np.unpackbits(masks.astype("<u8").view(np.uint8), bitorder="little").astype(np.bool_)


def check_strings(seed: str) -> None:
    """The span comparison kernel against its twin, and string ids that survive forced hash collisions."""
    _quiet()
    from gpuan.trace.kineto.gpu import strings_cuda as st
    from gpuan.trace.kineto.gpu.upload import padded_size

    rng = np.random.default_rng(int(seed))
    words = [b"ab", b"abc", b"ba", b"", b"x" * 20, b"x" * 19 + b"y", "é😀".encode()]
    text = b"".join(words[i] for i in rng.integers(0, len(words), 300))
    buf = np.full(padded_size(len(text)), 0x20, np.uint8)
    buf[: len(text)] = np.frombuffer(text, np.uint8)
    m = 400
    lengths = rng.integers(0, 24, m).astype(np.int64)
    offsets = rng.integers(0, len(text) - 24, m).astype(np.int64)
    # half the spans compared with a span of the same bytes elsewhere, half with a random one
    firsts = rng.integers(0, len(text) - 24, m).astype(np.int64)
    for i in range(0, m, 2):
        at = text.find(text[offsets[i] : offsets[i] + lengths[i]])
        firsts[i] = at
    got = st.same_bytes(np, buf, offsets, lengths, firsts, threads=8, blocks=2)
    want = st.same_bytes_numpy(buf, offsets, lengths, firsts)
    assert np.array_equal(got, want) and want.any() and not want.all()
    # hashes that collide for most spans (a hash is a function of the bytes: equal spans, equal hashes)
    for hashes in (np.zeros(m, np.uint64), (lengths % 3).astype(np.uint64)):
        first = st.first_occurrences(np, buf, hashes, offsets, lengths, threads=8, blocks=2)
        spans = [text[o : o + n] for o, n in zip(offsets, lengths)]
        want_first = [min(o for o, s in zip(offsets, spans) if s == t) for t in spans]
        assert first.tolist() == want_first
    print("agree")


def check_refused(out_dir: str) -> None:
    """Input the GPU path must not read as a trace goes to the CPU reader (None), which raises."""
    _quiet()
    from gpuan.errors import TraceError
    from gpuan.trace.kineto.gpu.reader import scan_file_gpu
    from gpuan.trace.kineto.reader import scan_file

    good = '{"ph": "X", "name": "a", "ts": 1, "dur": 2, "pid": 1, "tid": 1}'
    bad = {
        "wrong_type": [good, '{"ph": "X", "name": "b", "ts": "soon", "pid": 1, "tid": 1}'],
        "no_phase": [good, '{"name": "b"}'],
        "not_an_object": [good, "5"],
        "two_commas": [good, "", good],
        "bad_args": ['{"ph": "X", "name": "a", "ts": 1, "pid": 1, "tid": 1, "args": 5}'],
        "int_too_large": ['{"ph": "X", "ts": 1, "pid": 1, "tid": 1, "args": {"stream": 12345678901234567890}}'],
    }
    texts = {name: '{"traceEvents": [' + ", ".join(events) + "]}" for name, events in bad.items()}
    texts["truncated"] = '{"traceEvents": [' + good + ', {"ph": "X", "na'
    texts["unclosed_array"] = '{"traceEvents": [' + good + ", " + good
    texts["not_a_trace"] = '{"events": []}'
    for name, text in texts.items():
        p = Path(out_dir) / f"{name}.json"
        p.write_text(text)
        assert scan_file_gpu(str(p), np, **LAUNCH) is None, name
        try:
            scan_file(str(p), threads=1)
        except TraceError as e:
            assert str(p) in str(e), name
        else:
            raise AssertionError(f"{name}: the CPU reader read it")
    print("refused")


# ---------------------------------------------------------------------------------------------------
# The tests


@pytest.mark.gpu_twin("gpuan/trace/kineto/gpu/structure_cuda.py::_quotes_kernel")
@pytest.mark.gpu_twin("gpuan/trace/kineto/gpu/structure_cuda.py::_brackets_kernel")
@pytest.mark.gpu_twin("gpuan/trace/kineto/gpu/structure_cuda.py::_starts_kernel")
@pytest.mark.parametrize("seed", [1, 2])
def test_structural_scan_agrees_with_numpy_in_the_simulator(seed):
    assert "agree" in _sim("check_structure", str(seed))


@pytest.mark.gpu_twin("gpuan/trace/kineto/gpu/strings_cuda.py::_same_bytes_kernel")
def test_string_ids_agree_and_survive_collisions_in_the_simulator():
    assert "agree" in _sim("check_strings", "3")


@pytest.mark.gpu_twin("gpuan/trace/kineto/gpu/fields_cuda.py::_fields_kernel")
@pytest.mark.gpu_twin("gpuan/trace/kineto/gpu/strings_cuda.py::_same_bytes_kernel")
@pytest.mark.gpu_twin("gpuan/trace/kineto/gpu/structure_cuda.py::_starts_kernel")
def test_generated_traces_give_the_cpu_table_in_the_simulator(tmp_path):
    out = _sim("check_generated", str(tmp_path))
    assert out.count("equal") == 8  # 4 seeds, with and without a top-level object (seed 0 gzipped)


@pytest.mark.gpu_twin("gpuan/trace/kineto/gpu/fields_cuda.py::_fields_kernel")
@pytest.mark.parametrize("path", _small_kineto_files(), ids=lambda p: p.name)
def test_real_traces_give_the_cpu_table_in_the_simulator(path, data_dir):
    assert "equal" in _sim("check_tables", str(path))


def test_there_are_real_traces_for_the_simulator(data_dir):
    assert len(_small_kineto_files()) >= 5


@pytest.mark.gpu_twin("gpuan/trace/kineto/gpu/fields_cuda.py::_fields_kernel")
def test_bad_input_goes_to_the_cpu_reader_in_the_simulator(tmp_path):
    assert "refused" in _sim("check_refused", str(tmp_path))


def test_load_device_cpu_is_the_default_and_gpu_needs_one(tmp_path):
    import gpuan
    from gpuan.engine import EngineError, gpu_available

    path = tmp_path / "t.json"
    path.write_bytes(generated_trace(5, True))
    assert gpuan.load(path, use_cache=False, device="cpu").events.equals(gpuan.load(path, use_cache=False).events)
    with pytest.raises(gpuan.UsageError, match="device"):
        gpuan.load(path, device="tpu")
    if not gpu_available():
        with pytest.raises(EngineError, match="no GPU here"):
            gpuan.load(path, device="gpu")


@pytest.mark.gpu_twin("gpuan/trace/kineto/gpu/fields_cuda.py::_fields_kernel")
@pytest.mark.gpu_twin("gpuan/trace/kineto/gpu/structure_cuda.py::_quotes_kernel")
def test_load_on_a_real_gpu(data_dir, tmp_path):
    from gpuan.engine import gpu_available

    if not gpu_available():
        pytest.skip("no GPU here: the simulator tests cover the kernels")
    import gpuan
    from gpuan.engine import resolve

    paths = [data_dir / "kineto" / "mi300x_qwen05b_inference.json.gz", data_dir / "kineto" / "a100_alexnet.json.gz"]
    gen = tmp_path / "gen.json"
    gen.write_bytes(generated_trace(7, True, events=2000))
    for path in [*paths, gen]:
        gpu = gpuan.load(path, use_cache=False, device="gpu")
        cpu = gpuan.load(path, use_cache=False)
        assert gpu.events.equals(cpu.events) and gpu.flows.equals(cpu.flows) and gpu.metadata == cpu.metadata
        engine = resolve("gpu")
        first = engine.columns(gpu.events, ["ts"])["ts"]
        assert engine.columns(gpu.events, ["ts"])["ts"] is first  # resident: no second upload
        assert first.get().tolist() == cpu.events["ts"].to_numpy().tolist()


def test_commands_read_on_the_gpu_under_device_gpu(data_dir):
    """`gpuan --device gpu` loads through the GPU reader and runs the analyses there, and each command prints
    what it prints on the CPU (compare and tensors: tests/test_compare_gpu.py, tests/test_tensors.py)."""
    from gpuan.engine import gpu_available

    if not gpu_available():
        pytest.skip("no GPU here (CuPy absent or no CUDA device): the simulator tests cover the GPU reader")
    trace = str(data_dir / "kineto" / "a100_alexnet.json.gz")
    for args in (
        ["info", trace],
        ["cycles", trace],
        ["sol", trace, "--top", "5"],
        ["streams", trace, "--streams", "2"],
        ["replay", str(data_dir / "kineto" / "cpu_ddp_gloo_4rank_slow_rank1_step2")],
    ):
        runs = [
            subprocess.run([sys.executable, "-m", "gpuan", "--device", d, *args], capture_output=True, text=True)
            for d in ("cpu", "gpu")
        ]
        assert runs[1].returncode == runs[0].returncode == 0, runs[1].stderr
        assert runs[1].stdout == runs[0].stdout, args


if __name__ == "__main__":
    globals()[sys.argv[1]](*sys.argv[2:])
