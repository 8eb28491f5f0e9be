"""``gpuan tensors``: the GGUF map, the four log formats, the one-pass analysis, the checks, the CLI and the HTML
report, each against expectations computed here independently of the code under test: the GGUF header is
parsed by hand (the GGUF spec's layout, sizes from ``gguf.GGML_QUANT_SIZES``), log entries are decoded with
``struct`` at the byte offsets the spec gives, and accesses are joined to tensors and expert slices with
plain Python loops."""

from __future__ import annotations

import base64
import csv
import json
import os
import re
import shutil
import struct
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import gguf
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from gpuan.cli import main
from gpuan.engine import gpu_available
from gpuan.errors import TraceError, UsageError
from gpuan.outputs.tensors import check_detail
from gpuan.result import Result
from gpuan.synth import tensors as st
from gpuan.tensors import REPORT_TABLES, analyse
from gpuan.trace.gguf_map import layout_problems, read_gguf, units
from gpuan.trace.gguf_names import component_of, layer_of
from gpuan.trace.tensor_inputs import load_tensor_inputs
from gpuan.trace.tensorlog import open_log, open_writer, windows
from gpuan.trace.tensorlog.read import used_entries
from gpuan.trace.tensorlog.sides import read_buffers, read_names

FORMATS = ("seed64", "packed64", "op256", "op1024")
WIDTH = {"seed64": 64, "packed64": 64, "op256": 256, "op1024": 1024}
NONE64 = (1 << 64) - 1
EXPERTS = 4
TOKENS = 16


def analyze(log, gguf, names=None, buffers=None, log_format="auto", engine=None, **options) -> Result:
    """Load the files (:func:`load_tensor_inputs`) and analyse them; return the Result."""
    return analyse(load_tensor_inputs(log, gguf, names, buffers, log_format), engine=engine, **options)


def checks(result: Result) -> dict[str, dict]:
    """The Result's checks by name, each with the sentence the report prints as its ``detail``."""
    return {c["check"]: {**c, "detail": check_detail(c)} for c in result.summary["checks"]}


# ---------------------------------------------------------------------------------------------------------
# independent readers: the GGUF header by hand, log entries with struct


_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def parse_gguf(path) -> dict:
    """Parse a GGUF (v2/v3) file by the spec: header, metadata, tensor infos; the data section starts at the
    end of the tensor infos rounded up to ``general.alignment`` (32 when absent); a tensor's bytes are its
    element count / block size * type size."""
    b = Path(path).read_bytes()
    pos = 4
    assert b[:4] == b"GGUF"

    def take(fmt):
        nonlocal pos
        (v,) = struct.unpack_from(fmt, b, pos)
        pos += struct.calcsize(fmt)
        return v

    def string():
        nonlocal pos
        n = take("<Q")
        s = b[pos : pos + n].decode("utf-8", "replace")
        pos += n
        return s

    def value(vt):
        if vt == 8:
            return string()
        if vt == 9:
            et, n = take("<I"), take("<Q")
            return [value(et) for _ in range(n)]
        return take(_SCALAR[vt])

    version, n_tensors, n_kv = take("<I"), take("<Q"), take("<Q")
    meta = {}
    for _ in range(n_kv):
        key = string()
        meta[key] = value(take("<I"))
    infos = []
    for _ in range(n_tensors):
        name = string()
        dims = [take("<Q") for _ in range(take("<I"))]
        infos.append((name, dims, take("<I"), take("<Q")))
    header_end = pos
    alignment = meta.get("general.alignment", 32)
    data_start = -(-header_end // alignment) * alignment
    tensors = []
    for name, dims, typ, rel in infos:
        qtype = gguf.GGMLQuantizationType(typ)
        block, type_size = gguf.GGML_QUANT_SIZES[qtype]
        elements = int(np.prod(dims))
        assert elements % block == 0
        experts = dims[-1] if len(dims) == 3 and re.search(r"_exps(\.|$)", name) else 0
        tensors.append(
            {
                "name": name,
                "dims": dims,
                "type": qtype.name,
                "offset": data_start + rel,
                "n_bytes": elements // block * type_size,
                "n_experts": experts,
                "layer": int(m.group(1)) if (m := re.match(r"blk\.(\d+)\.", name)) else -1,
            }
        )
    tensors.sort(key=lambda t: t["offset"])
    return {
        "version": version,
        "size": len(b),
        "meta": meta,
        "alignment": alignment,
        "header_end": header_end,
        "data_start": data_start,
        "tensors": tensors,
    }


def read_entries(path, fmt: str) -> list[dict]:
    """Decode the used entries of a log at the spec's byte offsets; one dict per access (a per-operation
    entry gives one per used source; in op1024 a disk source of an op that selected experts gives one per
    selected expert). `offset` is -1 for an access not read from the model file."""
    b = Path(path).read_bytes()
    w = WIDTH[fmt]
    out = []
    for i in range(len(b) // w):
        e = b[i * w : (i + 1) * w]
        ts, token, layer, thread, op, phase = struct.unpack_from("<QIHHBB", e, 0)
        if ts == 0:
            break
        head = {"entry": i, "ts": ts, "token": token, "thread": thread, "op": op}
        if w == 64:
            at = 32 if fmt == "seed64" else 28  # seed64: the compiler's 4-byte hole before tensor_ptr
            ptr, off, size = struct.unpack_from("<QQI", e, at)
            expert = e[at + 24]
            out.append(
                head
                | {
                    "layer": -1 if layer == 0xFFFF else layer,
                    "ptr": ptr,
                    "offset": -1 if off in (0, NONE64) else off,
                    "size": size,
                    "expert": -1 if expert == 0xFF else expert,
                    "name": None,
                }
            )
            continue
        name_len, first = (20, 48) if fmt == "op256" else (128, 152)
        experts = []
        if fmt == "op1024":
            experts = list(struct.unpack_from("<16i", e, 792))[: min(e[856], 16)]
        for k in range(e[18]):
            s = first + k * (name_len + 32)
            name = e[s : s + name_len].split(b"\0")[0].decode()
            ptr, size, slayer, memory = struct.unpack_from("<QIHB", e, s + name_len)
            (where,) = struct.unpack_from("<Q", e, s + name_len + 16)
            disk = memory == 0
            rec = head | {
                "layer": -1 if slayer == 0xFFFF else slayer,
                "ptr": ptr,
                "offset": where if disk and where not in (0, NONE64) else -1,
                "size": size,
                "expert": -1,
                "name": name,
            }
            if disk and experts:
                out += [rec | {"expert": x} for x in experts]
            else:
                out.append(rec)
    return out


def join(acc: list[dict], model: dict) -> list[dict]:
    """Attach to each access its tensor (None: not a file access; "outside": in no tensor), expert slice
    (-1: none), counted bytes and counted offset (`at`). An access that names its expert and starts at an
    expert tensor's start means that expert's slice (its size cut to one slice)."""
    out = []
    for a in acc:
        a = dict(a, tensor=None, slice=-1, bytes=a["size"], unit=None, at=a["offset"])
        off = a["offset"]
        if off >= 0:
            hit = [t for t in model["tensors"] if t["offset"] <= off < t["offset"] + t["n_bytes"]]
            if not hit:
                a["tensor"] = "outside"
            else:
                (t,) = hit
                a["tensor"] = t["name"]
                a["unit_bytes"] = t["n_bytes"]
                if t["n_experts"]:
                    width = t["n_bytes"] // t["n_experts"]
                    if 0 <= a["expert"] < t["n_experts"] and off == t["offset"]:
                        a["slice"], a["bytes"] = a["expert"], min(a["size"], width)
                        a["at"] = off + a["slice"] * width
                    else:
                        a["slice"] = (off - t["offset"]) // width
                    a["unit_bytes"] = width
                a["unit"] = (t["name"], a["slice"])
                a["tensor_layer"] = t["layer"]
        out.append(a)
    return out


def names_by_pointer(acc: list[dict], names_csv) -> None:
    """Name each non-file access of a 64-byte log by the name table row whose [data_ptr, +size) holds its
    pointer (rows of nil pointers skipped); "(unnamed)" otherwise."""
    rows = []
    with open(names_csv, newline="") as f:
        for r in csv.DictReader(f):
            p = r["data_ptr"].strip()
            if p not in ("(nil)", "0", ""):
                rows.append((int(p, 16), int(r["size_bytes"]), r["tensor_name"]))
    for a in acc:
        if a["offset"] < 0:
            hit = [n for p, s, n in rows if p <= a["ptr"] < p + max(s, 1)]
            a["name"] = hit[-1] if hit else "(unnamed)"


def expected(acc: list[dict]) -> dict:
    """The aggregates of joined accesses, by plain loops."""
    tensors = defaultdict(lambda: [0, 0, set()])
    experts = defaultdict(lambda: [0, 0, set()])
    tokens = defaultdict(lambda: [0, 0, 0, set()])
    token_layer = Counter()
    inter = defaultdict(lambda: [0, 0])
    unit_bytes = {}
    for a in acc:
        tok = tokens[a["token"]]
        tok[0] += 1
        tok[1] += a["bytes"]
        if a["offset"] >= 0:
            tok[2] += a["bytes"]
        else:
            n = inter[a["name"] or "(unnamed)"]
            n[0] += 1
            n[1] += a["bytes"]
        if a["unit"] is not None:
            t = tensors[a["tensor"]]
            t[0] += 1
            t[1] += a["bytes"]
            t[2].add(a["token"])
            tok[3].add(a["unit"])
            unit_bytes[a["unit"]] = a["unit_bytes"]
            if a["slice"] >= 0:
                x = experts[(a["tensor_layer"], a["slice"])]
                x[0] += 1
                x[1] += a["bytes"]
                x[2].add(a["token"])
            layer = a["tensor_layer"]
        else:
            layer = a["layer"]
        token_layer[(a["token"], layer)] += a["bytes"]
    # several expert tensors per layer: a (layer, expert) pair's token set counts distinct tokens
    return {
        "tensors": {k: (v[0], v[1], len(v[2])) for k, v in tensors.items()},
        "experts": {k: (v[0], v[1], len(v[2])) for k, v in experts.items()},
        "tokens": {k: (v[0], v[1], v[2], sum(unit_bytes[u] for u in v[3])) for k, v in tokens.items()},
        "token_layer": dict(token_layer),
        "intermediates": {k: tuple(v) for k, v in inter.items()},
        "outside": sum(a["tensor"] == "outside" for a in acc),
    }


def assert_tables_match(tables: dict[str, pd.DataFrame], exp: dict) -> None:
    t = tables["tensors"]
    got = {r.name: (r.accesses, r.bytes_accessed, r.tokens) for r in t.itertuples() if r.accesses}
    assert got == exp["tensors"]
    assert (t["accesses"] > 0).sum() == len(exp["tensors"])
    e = tables["experts"]
    got = {(r.layer, r.expert): (r.accesses, r.bytes_accessed, r.tokens) for r in e.itertuples() if r.accesses}
    assert got == exp["experts"]
    k = tables["tokens"]
    got = {r.token: (r.accesses, r.bytes_accessed, r.weight_bytes, r.distinct_weight_bytes) for r in k.itertuples()}
    assert got == exp["tokens"]
    tl = tables["token_layer"]
    assert dict(zip(zip(tl["token"], tl["layer"], strict=True), tl["bytes_accessed"], strict=True)) == {
        k: v for k, v in exp["token_layer"].items() if v
    }
    i = tables["intermediates"]
    assert (
        dict(zip(i["name"], zip(i["accesses"], i["bytes_accessed"], strict=True), strict=True)) == exp["intermediates"]
    )


# ---------------------------------------------------------------------------------------------------------
# fixtures


@pytest.fixture(scope="module")
def moe(tmp_path_factory):
    """A MoE model (4 experts, alignment 64) and one synthetic log per format against it."""
    d = tmp_path_factory.mktemp("moe")
    path = st.write_model(d / "moe.gguf", experts=EXPERTS, alignment=64)
    model = read_gguf(path)
    logs = {fmt: d / f"{fmt}.log" for fmt in FORMATS}
    for fmt, log in logs.items():
        st.write_log(log, model, fmt=fmt, tokens=TOKENS)
    return {"dir": d, "gguf": Path(path), "model": model, "parsed": parse_gguf(path), "logs": logs}


@pytest.fixture(scope="module")
def stories(data_dir):
    path = data_dir / "gguf" / "stories260K.gguf"
    if not path.is_file():
        pytest.skip(f"{path} not found (see ../shared/data/PROVENANCE.md)")
    return path


# ---------------------------------------------------------------------------------------------------------
# 1, 2: the GGUF map


def test_stories260k_map(stories):
    m = read_gguf(stories)
    p = parse_gguf(stories)
    t = m.tensors
    assert len(t) == 48 == len(p["tensors"])
    assert m.file_bytes == 1_185_376 == p["size"]
    assert "general.alignment" not in p["meta"] and m.alignment == 32  # GGUF's default
    assert m.data_start == p["data_start"] and m.data_start % 32 == 0 and m.data_start >= p["header_end"]
    assert m.architecture == p["meta"]["general.architecture"] == "llama"
    assert list(t["offset"]) == sorted(t["offset"])
    assert [(r.name, r.offset, r.n_bytes, r.type) for r in t.itertuples()] == [
        (x["name"], x["offset"], x["n_bytes"], x["type"]) for x in p["tensors"]
    ]
    assert set(t["type"]) == {"F32"} and all(n % 4 == 0 for n in t["n_bytes"])
    assert all((o - m.data_start) % 32 == 0 for o in t["offset"])
    assert t["offset"].iloc[0] == m.data_start
    assert all(t["offset"].iloc[i] + t["n_bytes"].iloc[i] <= t["offset"].iloc[i + 1] for i in range(47))
    assert t["offset"].iloc[-1] + t["n_bytes"].iloc[-1] == m.file_bytes
    assert layout_problems(m) == []
    assert (t["n_experts"] == 0).all()
    u = units(m)
    assert len(u) == 48 and (u["expert"] == -1).all()
    assert list(u["start"]) == list(t["offset"]) and list(u["end"] - u["start"]) == list(t["n_bytes"])


@pytest.mark.parametrize("fmt", ["seed64", "op256"])
def test_synthetic_log_against_stories260k(stories, tmp_path, fmt):
    """A log written against the real model joins to its real tensors: every one of the 48 is read, by the
    counts an independent decode and join of the raw entries gives."""
    log = tmp_path / f"stories.{fmt}"
    st.write_log(log, read_gguf(stories), fmt, tokens=6, capacity=4096)
    a = analyze(log, stories)
    acc = join(read_entries(log, fmt), parse_gguf(stories))
    exp = expected(acc)
    assert_tables_match(a.to_pandas(), exp)
    assert checks(a)["offsets"]["accesses"] == 0 and (a.to_pandas("tensors")["accesses"] > 0).sum() == 48


def test_analyse_returns_a_result_of_arrow_tables(stories, tmp_path):
    """The contract on the real model: ``analyse(load_tensor_inputs(...))`` is a Result of Arrow tables (the
    report's, then the views the HTML draws) and a summary of plain values, the checks among them."""
    log = tmp_path / "stories.log"
    st.write_log(log, read_gguf(stories), "op256", tokens=4, capacity=2048)
    inputs = load_tensor_inputs(log, stories)
    assert inputs.log.format == "op256" and inputs.model.path == str(stories) and inputs.names is None
    result = analyse(inputs, engine="cpu", max_points=50)
    assert isinstance(result, Result) and result.analysis == "tensors"
    views = ["sample", "timeline", "time_offset", "thread_time"]
    assert list(result.tables) == [*REPORT_TABLES, *views]
    assert all(isinstance(table, pa.Table) for table in result.tables.values())
    frames = result.to_pandas()
    assert list(frames) == list(result.tables) and all(isinstance(f, pd.DataFrame) for f in frames.values())
    tensors = result.to_pandas("tensors")
    assert len(tensors) == 48 and (tensors["accesses"] > 0).all()
    assert tensors["accesses"].sum() == result.summary["weight_accesses"]
    assert 0 < len(result.to_pandas("sample")) <= 50 and len(result.to_pandas("timeline")) == 600
    s = result.summary
    assert (s["log"], s["log_format"], s["engine"]) == (str(log), "op256", "cpu")
    assert (s["model_tensors"], s["tokens"]) == (48, 4)
    assert s["entries"] < s["capacity"] == 2048 and s["overflow"] == 0
    assert [c["check"] for c in s["checks"]] == ["timestamps", "offsets", "layout", "capacity"]
    assert all(c["ok"] for c in s["checks"])
    # a dense model: no expert numbers; the hot/cold points grow with the share of the accesses
    assert (s["expert_layers"], s["experts_per_layer"], s["hottest_expert"], s["expert_reuse"]) == (0, 0, None, None)
    assert 0 < s["file_share_at_50"] <= s["file_share_at_90"] <= s["file_share_at_99"] <= 1
    assert json.loads(json.dumps(s)) == s  # plain values only
    with pytest.raises(KeyError, match="tensors has no table 'nope'"):
        result.to_pandas("nope")


def test_analyse_refuses_unknown_options_and_formats(moe):
    with pytest.raises(TypeError, match="max_point"):
        analyze(moe["logs"]["seed64"], moe["gguf"], max_point=10)
    with pytest.raises(UsageError, match="unknown log format 'seed128'"):
        load_tensor_inputs(moe["logs"]["seed64"], moe["gguf"], log_format="seed128")


@pytest.mark.parametrize("experts,alignment", [(EXPERTS, 64), (0, None)])
def test_synthetic_model_map(tmp_path, experts, alignment):
    path = st.write_model(tmp_path / "m.gguf", experts=experts, alignment=alignment)
    m = read_gguf(path)
    p = parse_gguf(path)
    align = alignment or 32
    assert m.alignment == p["alignment"] == align
    assert m.data_start == p["data_start"] and m.data_start % align == 0
    t = m.tensors
    types = set(t["type"])
    assert {"F32", "F16", "Q8_0"} <= types
    by_name = {x["name"]: x for x in p["tensors"]}
    assert set(t["name"]) == set(by_name)
    q8_block, q8_size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType.Q8_0]
    assert (q8_block, q8_size) == (32, 34)
    for r in t.itertuples():
        x = by_name[r.name]
        assert r.n_bytes == x["n_bytes"], r.name
        assert r.offset == x["offset"] and (r.offset - m.data_start) % align == 0, r.name
        assert r.type == x["type"] and r.shape == "x".join(map(str, x["dims"]))
        assert r.n_experts == x["n_experts"]
        if r.type == "Q8_0":
            assert r.n_bytes == int(np.prod(x["dims"])) // 32 * 34
    assert layout_problems(m) == []
    assert t["offset"].iloc[-1] + t["n_bytes"].iloc[-1] == m.file_bytes == p["size"]

    u = units(m)
    want = []
    for x in p["tensors"]:
        if x["n_experts"]:
            w = x["n_bytes"] // x["n_experts"]
            want += [(x["offset"] + e * w, x["offset"] + (e + 1) * w, x["name"], e) for e in range(x["n_experts"])]
        else:
            want.append((x["offset"], x["offset"] + x["n_bytes"], x["name"], -1))
    names = t["name"].to_numpy()
    assert list(zip(u["start"], u["end"], names[u["tensor"]], u["expert"], strict=True)) == want
    n_exp_tensors = sum(1 for x in p["tensors"] if x["n_experts"])
    assert n_exp_tensors == (3 * 2 if experts else 0)  # gate/up/down in each of 2 layers
    assert len(u) == len(t) + n_exp_tensors * (experts - 1)


# ---------------------------------------------------------------------------------------------------------
# 3: the analysis against an independent computation


@pytest.mark.parametrize("fmt", FORMATS)
def test_analysis_matches_raw_entries(moe, fmt):
    log = moe["logs"][fmt]
    a = analyze(log, moe["gguf"])
    acc = join(read_entries(log, fmt), moe["parsed"])
    exp = expected(acc)
    assert a.summary["log_format"] == fmt
    assert a.summary["accesses"] == len(acc)
    assert len(exp["experts"]) == 2 * EXPERTS  # every expert of both layers was used
    assert_tables_match(a.to_pandas(), exp)
    # the summary's MoE numbers are those of the tables
    experts, reuse = a.to_pandas("experts"), a.to_pandas("expert_reuse")
    hot = experts.loc[experts["accesses"].idxmax()]
    assert (a.summary["expert_layers"], a.summary["experts_per_layer"]) == (2, EXPERTS)
    assert a.summary["hottest_expert"]["share"] == pytest.approx(hot["share"])
    assert a.summary["expert_reuse"] == pytest.approx(reuse["reuse"].mean())
    assert exp["outside"] == 0 == checks(a)["offsets"]["accesses"]
    found = checks(a)
    assert found["offsets"]["ok"] and found["layout"]["ok"] and found["timestamps"]["ok"]


def test_whole_expert_entries_go_to_their_slice(moe, tmp_path):
    log = tmp_path / "whole.log"
    st.write_log(log, moe["model"], fmt="seed64", tokens=TOKENS, whole_experts=True)
    acc = join(read_entries(log, "seed64"), moe["parsed"])
    exp_tensors = {x["name"]: x for x in moe["parsed"]["tensors"]}
    whole = [a for a in acc if a["slice"] >= 0]
    assert whole and all(
        a["offset"] == exp_tensors[a["tensor"]]["offset"] and a["size"] == exp_tensors[a["tensor"]]["n_bytes"]
        for a in whole
    )  # the log names the whole tensor and the expert id
    assert {a["slice"] for a in whole} == set(range(EXPERTS))
    a = analyze(log, moe["gguf"])
    exp = expected(acc)
    assert_tables_match(a.to_pandas(), exp)
    sliced = analyze(moe["logs"]["seed64"], moe["gguf"]).to_pandas()
    # the same counts as the log that names each slice directly (timestamps differ: sizes differ)
    for name, cols in (("tensors", ["name", "accesses", "bytes_accessed", "tokens"]), ("experts", None)):
        pd.testing.assert_frame_equal(a.to_pandas(name)[cols or slice(None)], sliced[name][cols or slice(None)])


def _append_entries(log: Path, offsets: list[int]) -> None:
    """Fill the zero tail of a seed64 log with copies of its last entry at `offsets` (8 bytes each, later
    timestamps), at the spec's byte offsets."""
    b = bytearray(log.read_bytes())
    n = next(i for i in range(len(b) // 64) if struct.unpack_from("<Q", b, i * 64)[0] == 0)
    last = bytes(b[(n - 1) * 64 : n * 64])
    (ts,) = struct.unpack_from("<Q", last, 0)
    for j, off in enumerate(offsets):
        e = bytearray(last)
        struct.pack_into("<Q", e, 0, ts + 100 * (j + 1))
        struct.pack_into("<QQI", e, 32, st.WEIGHT_BASE + off % (1 << 40), off, 8)
        e[56] = 0xFF
        b[(n + j) * 64 : (n + j + 1) * 64] = e
    log.write_bytes(bytes(b))


@pytest.mark.parametrize("where", ["header", "padding", "huge"])
def test_offsets_outside_every_tensor_are_counted(tmp_path, where):
    # alignment 1024 leaves padding after the 256-byte norms and 4,352-byte Q8_0 tensors
    path = st.write_model(tmp_path / "m.gguf", alignment=1024)
    p = parse_gguf(path)
    if where == "header":
        offsets = [24, p["header_end"] // 2, p["data_start"] - 8]
    elif where == "huge":  # garbage beyond 2^63 (but not the all-ones "none"): still outside every tensor
        offsets = [1 << 63, (1 << 63) + 4096, NONE64 - 1]
    else:
        ts = p["tensors"]
        gaps = [(x["offset"] + x["n_bytes"], y["offset"]) for x, y in zip(ts, ts[1:], strict=False)]
        gaps = [(s, e) for s, e in gaps if e - s >= 16]
        assert len(gaps) >= 4
        offsets = [s for s, _ in gaps[:3]] + [gaps[3][1] - 8]
    log = tmp_path / "x.log"
    n = len(st.template(read_gguf(path)).rows) * 4
    st.write_log(log, read_gguf(path), fmt="seed64", tokens=4, capacity=n + len(offsets))
    _append_entries(log, offsets)
    acc = join(read_entries(log, "seed64"), p)
    assert len(acc) == n + len(offsets)
    exp = expected(acc)
    assert exp["outside"] == len(offsets)
    a = analyze(log, path)
    assert checks(a)["offsets"]["accesses"] == len(offsets)
    assert checks(a)["offsets"]["bytes"] == 8 * len(offsets)
    check = checks(a)["offsets"]
    assert not check["ok"]
    assert check["detail"].startswith(f"{len(offsets)} access(es), {8 * len(offsets)} bytes")
    for off in offsets if where != "huge" else ():
        assert f"0x{off:x}" in check["detail"]
    assert_tables_match(a.to_pandas(), exp)
    # the pre-binned file-offset view: every file access binned, offsets beyond the file in the last bin
    ob = a.summary["offset_bins"]
    bins = Counter(min(x["offset"] * ob // p["size"], ob - 1) for x in acc if x["offset"] >= 0)
    per_bin = a.to_pandas("time_offset").groupby("offset_bin")["accesses"].sum()
    assert list(per_bin.reindex(range(ob), fill_value=0)) == [bins[i] for i in range(ob)]


def test_intermediates_named_by_pointer(moe, tmp_path):
    tpl = st.template(moe["model"])
    table = st.names_table(moe["model"], tpl)
    names_csv = tmp_path / "names.csv"
    table.to_csv(names_csv, index=False)
    log = moe["logs"]["seed64"]
    acc = join(read_entries(log, "seed64"), moe["parsed"])
    names_by_pointer(acc, names_csv)
    exp = expected(acc)
    assert "(unnamed)" not in exp["intermediates"] and len(exp["intermediates"]) == len(tpl.names)
    a = analyze(log, moe["gguf"], names=names_csv)
    assert_tables_match(a.to_pandas(), exp)
    i = a.to_pandas("intermediates")
    assert {"cache_k_l0", "Qcur-1", "result_output"} <= set(i["name"])
    comp = dict(zip(i["name"], i["component"], strict=True))
    assert comp["cache_v_l1"] == "kv_cache" and comp["kq-0"] == "activations"
    check = checks(a)["name table"]
    assert check["ok"], check["detail"]
    # without the table, every intermediate of a 64-byte log is unnamed
    plain = analyze(log, moe["gguf"]).to_pandas("intermediates")
    assert list(plain["name"]) == ["(unnamed)"]
    assert plain["accesses"].iloc[0] == sum(v[0] for v in exp["intermediates"].values())


def test_name_table_with_relative_offsets_is_flagged(moe, tmp_path):
    table = st.names_table(moe["model"], st.template(moe["model"]))
    weights = table["file_offset"] >= 0
    table.loc[weights, "file_offset"] -= moe["parsed"]["data_start"]
    path = tmp_path / "rel.csv"
    table.to_csv(path, index=False)
    a = analyze(moe["logs"]["seed64"], moe["gguf"], names=path)
    check = checks(a)["name table"]
    assert not check["ok"]
    relative = f"{int(weights.sum())} offset(s) differ from the GGUF file's (relative to the data"
    assert check["detail"].startswith(relative)


# ---------------------------------------------------------------------------------------------------------
# 4: format detection, empty and garbage files, the zero tail, capacity


@pytest.mark.parametrize("fmt", FORMATS)
def test_format_detected_by_plausibility(moe, fmt):
    log = open_log(moe["logs"][fmt], file_bytes=moe["model"].file_bytes)
    assert log.format == fmt and log.entry_bytes == WIDTH[fmt]
    assert log.scores[fmt] >= 0.95
    others = {k: v for k, v in log.scores.items() if k != fmt}
    assert others and all(v < 0.95 for v in others.values()), log.scores
    if fmt in ("seed64", "packed64"):
        twin = "packed64" if fmt == "seed64" else "seed64"
        assert log.scores[twin] < 0.5
    assert log.entries == len({a["entry"] for a in read_entries(moe["logs"][fmt], fmt)})


@pytest.mark.parametrize("fmt,wrong", [("seed64", "packed64"), ("packed64", "seed64")])
def test_explicit_wrong_64_byte_format_gives_implausible_offsets(moe, fmt, wrong):
    # an explicit format is taken as given: the file offsets come from the wrong bytes, and the offsets
    # check says so
    path = moe["logs"][fmt]
    a = analyze(path, moe["gguf"], log_format=wrong)
    acc = join(read_entries(path, wrong), moe["parsed"])
    exp = expected(acc)
    assert a.summary["log_format"] == wrong
    assert exp["outside"] > len(acc) // 2
    assert checks(a)["offsets"]["accesses"] == exp["outside"]
    assert not checks(a)["offsets"]["ok"]
    assert_tables_match(a.to_pandas(), exp)


def test_sizes_empty_and_garbage_files(moe, tmp_path):
    odd = tmp_path / "odd.log"
    odd.write_bytes(moe["logs"]["seed64"].read_bytes() + b"\1" * 10)
    with pytest.raises(TraceError, match="not a multiple of the 64-byte seed64 entry") as e:
        open_log(odd, "seed64")
    assert e.value.path == str(odd)
    with pytest.raises(TraceError, match="fits no log format"):
        open_log(odd)

    garbage = tmp_path / "random.log"
    garbage.write_bytes(np.random.default_rng(7).bytes(64 * 1024))
    with pytest.raises(TraceError, match="not a tensor-access log"):
        open_log(garbage, file_bytes=moe["model"].file_bytes)

    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    for fmt in ("auto", "seed64"):
        with pytest.raises(TraceError, match="empty file"):
            open_log(empty, fmt)

    zeros = tmp_path / "zeros.log"
    open_writer(zeros, "packed64", capacity=1024).close()  # 64 KiB: a whole number of entries of every format
    assert zeros.stat().st_size == 65_536 and not any(zeros.read_bytes())
    for fmt in ("auto", "packed64", "op1024"):
        with pytest.raises(TraceError, match="empty log"):
            open_log(zeros, fmt)
    with pytest.raises(TraceError, match="unknown log format"):
        open_log(moe["logs"]["seed64"], "seed128")


def test_ambiguous_64_byte_log_needs_a_format(moe, tmp_path):
    # entries of tensors with no data (nil pointer, no file offset) read the same in both 64-byte layouts
    path = tmp_path / "nil.log"
    b = bytearray(64 * 200)
    for i in range(200):
        struct.pack_into("<QIHHBB", b, i * 64, 1000 + 10 * i, i // 20, i % 3, i % 4, 5, 1)
        struct.pack_into("<I", b, i * 64 + 24, 0xFFFFFFFF)  # tensor_idx: none
        b[i * 64 + 56] = 0xFF  # expert_id: none
    path.write_bytes(bytes(b))
    with pytest.raises(TraceError, match=r"ambiguous log format: both (seed64 and packed64|packed64 and seed64) fit"):
        open_log(path, file_bytes=moe["model"].file_bytes)
    log = open_log(path, "seed64")
    assert (log.format, log.entries, log.capacity) == ("seed64", 200, 200)
    a = analyze(path, moe["gguf"], log_format="packed64")
    assert a.summary["accesses"] == 200 and a.to_pandas("tensors")["accesses"].sum() == 0
    assert a.to_pandas("intermediates")["accesses"].sum() == 200


@pytest.mark.parametrize("fmt", ["packed64", "op256"])
def test_zero_tail_of_a_presized_log(moe, tmp_path, fmt):
    n = open_log(moe["logs"][fmt]).entries
    log = tmp_path / f"tail.{fmt}"
    st.write_log(log, moe["model"], fmt=fmt, tokens=TOKENS, capacity=n + 333)
    w = WIDTH[fmt]
    raw = log.read_bytes()
    assert len(raw) == (n + 333) * w
    first_zero = next(i for i in range(len(raw) // w) if struct.unpack_from("<Q", raw, i * w)[0] == 0)
    assert first_zero == n and not any(raw[n * w :])
    opened = open_log(log)
    assert (opened.format, opened.entries, opened.capacity, opened.overflow) == (fmt, n, n + 333, 0)
    mm = np.memmap(log, dtype=np.dtype([("timestamp_ns", "<u8"), ("rest", f"V{w - 8}")]), mode="r")
    assert used_entries(mm) == n
    for k in (0, 1, 2, 7, len(mm)):  # the binary search on shorter prefixes
        assert used_entries(mm[:k]) == min(k, n)
    a = analyze(log, moe["gguf"])
    check = checks(a)["capacity"]
    assert check["ok"] and check["detail"] == f"{n:,} of {n + 333:,} entries used"
    pd.testing.assert_frame_equal(a.to_pandas("tensors"), analyze(moe["logs"][fmt], moe["gguf"]).to_pandas("tensors"))


def test_full_log_and_overflow_sidecar(moe, tmp_path):
    n = len(read_entries(moe["logs"]["seed64"], "seed64"))  # the uncapped log holds every entry offered
    full = analyze(moe["logs"]["seed64"], moe["gguf"])
    check = checks(full)["capacity"]
    assert full.summary["entries"] == full.summary["capacity"] == n
    assert not check["ok"] and check["detail"] == f"the log is full ({n:,} entries): later accesses may be missing"

    cap = 500
    log = tmp_path / "small.log"
    st.write_log(log, moe["model"], fmt="seed64", tokens=TOKENS, capacity=cap)
    meta = json.loads(Path(f"{log}.meta.json").read_text())
    assert meta == {"format": "seed64", "entry_bytes": 64, "capacity": cap, "written": cap, "overflow": n - cap}
    a = analyze(log, moe["gguf"])
    assert a.summary["overflow"] == n - cap and a.summary["entries"] == cap
    check = checks(a)["capacity"]
    assert not check["ok"]
    assert check["detail"] == f"the writer dropped {n - cap:,} entries after the log filled ({cap:,} entries)"
    # what was kept is the first `cap` entries
    acc = join(read_entries(log, "seed64"), moe["parsed"])
    assert len(acc) == cap
    assert_tables_match(a.to_pandas(), expected(acc))


@pytest.mark.parametrize(
    "text,problem",
    [
        ('{"format": "seed64", "overfl', r"not JSON \(.*line 1 column \d+\)"),
        ("[0]", "not a JSON object"),
        ('{"format": "seed64", "capacity": 500}', "no 'overflow' count"),
        ('{"overflow": -1}', "'overflow' is -1, not a count of dropped entries"),
        ('{"overflow": "12"}', "'overflow' is \"12\", not a count of dropped entries"),
    ],
)
def test_corrupt_sidecar(moe, tmp_path, capsys, text, problem):
    log = tmp_path / "run.log"
    shutil.copy(moe["logs"]["seed64"], log)
    meta = tmp_path / "run.log.meta.json"
    meta.write_text(text)
    args = [str(log), "--gguf", str(moe["gguf"])]
    _rejected(capsys, tmp_path, meta, args, f"corrupt sidecar of run.log: {problem}; remove it to analyse")
    meta.unlink()
    assert open_log(log).overflow is None  # no sidecar is no overflow count, not an error


# ---------------------------------------------------------------------------------------------------------
# 5: windows of memory-mapped entries


@pytest.mark.parametrize("fmt", FORMATS)
def test_windows_are_bounded_memmaps_and_change_nothing(moe, fmt):
    path = moe["logs"][fmt]
    log = open_log(path)
    rows = 97
    got = list(windows(log, rows))
    assert len(got) == -(-log.entries // rows) >= 3
    assert [s for s, _ in got] == list(range(0, log.entries, rows))
    for _, w in got:
        assert isinstance(w, np.memmap) and 0 < len(w) <= rows
    joined = b"".join(w.tobytes() for _, w in got)
    assert joined == path.read_bytes()[: log.entries * WIDTH[fmt]]
    del got

    one = analyze(path, moe["gguf"])
    small = analyze(path, moe["gguf"], window_entries=rows)
    assert one.tables.keys() == small.tables.keys()
    for name in one.tables:
        pd.testing.assert_frame_equal(small.to_pandas(name), one.to_pandas(name), obj=name)
    assert small.summary == one.summary


# ---------------------------------------------------------------------------------------------------------
# 6: the command line


def test_cli_writes_tables_and_report(moe, tmp_path, capsys):
    out = tmp_path / "out"
    log = moe["logs"]["op1024"]
    assert main(["tensors", str(log), "--gguf", str(moe["gguf"]), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "hottest tensors" in text and "checks" in text
    a = analyze(log, moe["gguf"])
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [f"{k}.csv" for k in REPORT_TABLES] + ["checks.csv", "report.html"]
    )
    exp = expected(join(read_entries(log, "op1024"), moe["parsed"]))
    t = pd.read_csv(out / "tensors.csv")
    got = {r.name: (r.accesses, r.bytes_accessed, r.tokens) for r in t.itertuples() if r.accesses}
    assert got == exp["tensors"]
    checks = pd.read_csv(out / "checks.csv")
    assert list(checks["check"]) == [c["check"] for c in a.summary["checks"]]

    pq = tmp_path / "pq"
    assert main(["tensors", str(log), "--gguf", str(moe["gguf"]), "-o", str(pq), "--table-format", "parquet"]) == 0
    assert sorted(p.name for p in pq.iterdir()) == sorted(
        [f"{k}.parquet" for k in REPORT_TABLES] + ["checks.parquet", "report.html"]
    )
    for name in ("tensors", "experts", "tokens", "hot_curve"):
        pd.testing.assert_frame_equal(pd.read_parquet(pq / f"{name}.parquet"), a.to_pandas(name), check_dtype=False)


def _never_touched(acc: list[dict], p: dict, page: int = 4096) -> int:
    """Bytes of the data section in pages that no file access covers."""
    touched = set()
    for a in acc:
        if a["offset"] >= 0:
            end = min(a["at"] + max(a["bytes"], 1), p["size"])
            touched.update(range(a["at"] // page, (end - 1) // page + 1))
    cold = 0
    for q in range(p["data_start"] // page, -(-p["size"] // page)):
        if q not in touched:
            cold += min((q + 1) * page, p["size"]) - max(q * page, p["data_start"])
    return cold


@pytest.mark.parametrize("fmt", ["seed64", "op1024"])
def test_cli_json_numbers(moe, fmt, capsys):
    log = moe["logs"][fmt]
    assert main(["tensors", str(log), "--gguf", str(moe["gguf"]), "--format", "json", "--top", "5"]) == 0
    out = json.loads(capsys.readouterr().out)
    acc = join(read_entries(log, fmt), moe["parsed"])
    exp = expected(acc)
    entries = len({a["entry"] for a in acc})
    assert out["format"] == fmt
    assert out["entries"] == out["capacity"] == entries
    assert out["accesses"] == len(acc)
    assert out["tokens"] == len({a["token"] for a in acc}) == TOKENS
    assert out["data_bytes"] == moe["parsed"]["size"] - moe["parsed"]["data_start"]
    assert out["never_touched_bytes"] == _never_touched(acc, moe["parsed"])
    offset = {x["name"]: x["offset"] for x in moe["parsed"]["tensors"]}
    hottest = sorted(exp["tensors"].items(), key=lambda kv: (-kv[1][0], offset[kv[0]]))[:5]
    assert [(h["name"], h["accesses"], h["bytes_accessed"]) for h in out["hottest"]] == [
        (k, v[0], v[1]) for k, v in hottest
    ]
    assert [c["check"] for c in out["checks"]] == ["timestamps", "offsets", "layout", "capacity"]
    assert [c["ok"] for c in out["checks"]] == [True, True, True, False]


@pytest.mark.parametrize(
    "args,problem",
    [
        (["--format", "seed64"], "argument --format: 'seed64' is a log layout: give it with --log-format seed64"),
        (["--format", "auto"], "argument --format: 'auto' is a log layout: give it with --log-format auto"),
        (["--format", "xml"], "argument --format: invalid choice: 'xml' \\(choose from text, json\\)"),
        (["--log-format", "seed128"], "argument --log-format: invalid choice: 'seed128'"),
        (["--json"], "unrecognized arguments: --json"),
    ],
)
def test_format_is_the_output_and_log_format_the_layout(moe, capsys, args, problem):
    with pytest.raises(SystemExit) as e:
        main(["tensors", str(moe["logs"]["seed64"]), "--gguf", str(moe["gguf"]), *args])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and re.search(problem, err), err


def test_log_and_model_are_required(capsys):
    assert main(["tensors", "--format", "json"]) == 2
    assert capsys.readouterr().err == "gpuan: error: gpuan tensors needs a log and --gguf MODEL.gguf\n"


def _bad_inputs(moe, tmp_path) -> list[tuple[str, list[str]]]:
    """(the file the error must name, extra arguments) for each kind of bad input."""
    log, model = str(moe["logs"]["seed64"]), str(moe["gguf"])
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(moe["gguf"].read_bytes()[:200])  # inside the metadata
    text = tmp_path / "model.txt"
    text.write_text("this is not a GGUF model file\n" * 20)
    odd = tmp_path / "odd.log"
    odd.write_bytes(moe["logs"]["seed64"].read_bytes() + b"\1" * 10)
    table = st.names_table(moe["model"], st.template(moe["model"]))
    names = tmp_path / "names.csv"
    table.drop(columns="data_ptr").to_csv(names, index=False)
    events = tmp_path / "buffers.jsonl"
    events.write_text(
        '{"timestamp_ms": 1.0, "event": "alloc", "buffer_id": 1, "size": 10, "backend": "CPU"}\n'
        '{"timestamp_ms": 2.0, "event": "dealloc", "buffer_id": 1\n'
    )
    return [
        (str(cut), [log, "--gguf", str(cut)]),
        (str(text), [log, "--gguf", str(text)]),
        (str(odd), [str(odd), "--gguf", model, "--log-format", "seed64"]),
        (str(names), [log, "--gguf", model, "--names", str(names)]),
        (str(events), [log, "--gguf", model, "--buffers", str(events)]),
        (str(tmp_path / "missing.log"), [str(tmp_path / "missing.log"), "--gguf", model]),
    ]


def test_cli_bad_inputs(moe, tmp_path, capsys):
    for i, (culprit, args) in enumerate(_bad_inputs(moe, tmp_path)):
        out = tmp_path / f"out{i}"
        html = tmp_path / f"r{i}.html"
        rc = main(["tensors", *args, "-o", str(out), "--html", str(html)])
        err = capsys.readouterr().err
        assert rc == 2, args
        assert err.startswith(f"gpuan: error: {culprit}: ") and err.count("\n") == 1, err
        assert not out.exists() and not html.exists(), args
    inputs = {"cut.gguf", "model.txt", "odd.log", "names.csv", "buffers.jsonl"}
    assert {p.name for p in tmp_path.iterdir()} == inputs  # nothing written, not even a temporary file


def _rejected(capsys, tmp_path: Path, culprit, args: list[str], problem: str) -> str:
    """Run ``gpuan tensors ARGS -o OUT --html HTML`` (both in `tmp_path`), assert the rule for bad input (exit
    code 2, one line on stderr naming `culprit`, its problem matching the regex `problem`, no output left)
    and return that line."""
    out, html = tmp_path / "out", tmp_path / "report.html"
    rc = main(["tensors", *args, "-o", str(out), "--html", str(html)])
    err = capsys.readouterr().err
    assert rc == 2, args
    assert err.startswith(f"gpuan: error: {culprit}: ") and err.count("\n") == 1, err
    assert re.search(problem, err), err
    assert not out.exists() and not html.exists(), args
    return err


def _gguf_cuts(p: dict) -> dict[str, tuple[int, str]]:
    """Where to cut the parsed GGUF `p` short, and the message expected for each cut."""
    n_kv, n_t, end = len(p["meta"]), len(p["tensors"]), p["header_end"]
    first, last = p["tensors"][0], p["tensors"][-1]
    data = f"but its tensor data run to byte {last['offset'] + last['n_bytes']:,}; it ends inside"
    return {
        "header": (10, "it ends at byte 10, inside the header .*, which runs to byte 16"),
        "metadata": (27, rf"it ends at byte 27, inside metadata key-value pair 1 of {n_kv}, which runs to byte 32"),
        "tensor infos": (end - 2, rf"inside tensor info {n_t} of {n_t} \(\S+\), which runs to byte {end:,}"),
        "first tensor": (
            first["offset"] + 100,
            rf"{first['offset'] + 100:,} bytes, {data} {re.escape(first['name'])} "
            rf"\(bytes {first['offset']:,} to {first['offset'] + first['n_bytes']:,}\)",
        ),
        "last byte": (p["size"] - 1, rf"{data} {re.escape(last['name'])} \(bytes {last['offset']:,} to"),
    }


@pytest.mark.parametrize("where", ["header", "metadata", "tensor infos", "first tensor", "last byte"])
def test_truncated_gguf_says_where(moe, tmp_path, capsys, where):
    last = moe["parsed"]["tensors"][-1]
    assert last["offset"] + last["n_bytes"] == moe["parsed"]["size"]  # the last byte is the last tensor's
    cut_at, problem = _gguf_cuts(moe["parsed"])[where]
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(moe["gguf"].read_bytes()[:cut_at])
    args = [str(moe["logs"]["seed64"]), "--gguf", str(cut)]
    err = _rejected(capsys, tmp_path, cut, args, f"truncated GGUF file: .*{problem}")
    assert "out of bounds" not in err and "reshape" not in err


def test_log_that_is_not_a_regular_file(moe, tmp_path, capsys):
    folder = tmp_path / "logs"
    folder.mkdir()
    _rejected(capsys, tmp_path, folder, [str(folder), "--gguf", str(moe["gguf"])], "is a directory, not a tensor-")
    fifo = tmp_path / "fifo.log"
    os.mkfifo(fifo)  # opening it to read would block: it must be refused before that
    _rejected(capsys, tmp_path, fifo, [str(fifo), "--gguf", str(moe["gguf"])], "not a regular file")
    assert {p.name for p in tmp_path.iterdir()} == {"logs", "fifo.log"}


def _set_token(log: Path, entry: int, token: int, width: int) -> None:
    """Overwrite the token_id (u32 at byte 8 of every format) of entry `entry` (-1: the last used one)."""
    b = bytearray(log.read_bytes())
    if entry < 0:
        n = len(b) // width
        entry = next((i for i in range(n) if struct.unpack_from("<Q", b, i * width)[0] == 0), n) - 1
    struct.pack_into("<I", b, entry * width + 8, token)
    log.write_bytes(bytes(b))


@pytest.mark.parametrize(
    "fmt,entry,token",
    [("seed64", 100, 0xFFFFFFF0), ("op256", 7, 50_000_000), ("packed64", -1, 0xFFFFFFF0), ("op1024", 0, 1 << 20)],
)
def test_token_id_beyond_any_token_position(moe, tmp_path, capsys, fmt, entry, token):
    log = tmp_path / f"bad.{fmt}"
    shutil.copy(moe["logs"][fmt], log)
    _set_token(log, entry, token, WIDTH[fmt])
    at = entry if entry >= 0 else len(read_entries(log, fmt)) - 1
    _rejected(
        capsys,
        tmp_path,
        log,
        [str(log), "--gguf", str(moe["gguf"])],
        rf"entry {at:,} \(byte {at * WIDTH[fmt]:,}\): token_id {token:,} is not a token position \(at most 1,048,575\)",
    )


def test_garbage_entries_inside_a_log(moe, tmp_path, capsys):
    log = tmp_path / "garbage.log"
    b = bytearray(moe["logs"]["seed64"].read_bytes())
    rng = np.random.default_rng(3)
    bad = sorted(int(i) for i in rng.choice(len(b) // 64, 10, replace=False))
    for i in bad:
        b[i * 64 : i * 64 + 64] = rng.bytes(64)
    log.write_bytes(bytes(b))
    first = next(i for i in bad if struct.unpack_from("<I", b, i * 64 + 8)[0] >= 1 << 20)
    args = [str(log), "--gguf", str(moe["gguf"]), "--log-format", "seed64"]
    _rejected(capsys, tmp_path, log, args, rf"entry {first:,} \(byte {first * 64:,}\): token_id [\d,]+ is not a token")


def test_last_token_position_is_accepted(moe, tmp_path):
    log = tmp_path / "far.log"
    shutil.copy(moe["logs"]["seed64"], log)
    _set_token(log, 5, (1 << 20) - 1, 64)
    tokens = analyze(log, moe["gguf"]).to_pandas("tokens")
    assert tokens["token"].iloc[-1] == (1 << 20) - 1 and len(tokens) == TOKENS + 1


@pytest.mark.parametrize(
    "option,value,problem",
    [
        ("--max-points", "0", "must be from 1 to 500,000 \\(WebGL fails beyond\\), not 0"),
        ("--max-points", "-1", "must be from 1 to 500,000 .*, not -1"),
        ("--max-points", "500001", "must be from 1 to 500,000 .*, not 500001"),
        ("--top", "-1", "must be 0 or more, not -1"),
    ],
)
def test_options_out_of_range(moe, tmp_path, option, value, problem):
    args = [str(moe["logs"]["seed64"]), "--gguf", str(moe["gguf"]), option, value, "-o", str(tmp_path / "out")]
    r = subprocess.run([sys.executable, "-m", "gpuan", "tensors", *args], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith(f"gpuan tensors: error: argument {option}: ") and re.search(problem, r.stderr), r.stderr
    assert not any(tmp_path.iterdir())


def test_top_zero_lists_no_tensors(moe, capsys):
    args = ["tensors", str(moe["logs"]["seed64"]), "--gguf", str(moe["gguf"]), "--top", "0"]
    assert main([*args, "--max-points", "500000"]) == 0
    text = capsys.readouterr().out
    assert "hottest tensors" not in text and "components" in text
    assert main([*args, "--format", "json", "--max-points", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["hottest"] == []


@pytest.mark.parametrize(
    "row,problem",
    [
        (
            "1,2",
            "2 field\\(s\\), the header has 6 \\(tensor_idx,tensor_name,data_ptr,file_offset,size_bytes,layer_id\\)",
        ),
        ("1,blk.0.x,0x10,0,8,0,extra", "7 field\\(s\\), the header has 6"),
        ("one,blk.0.x,0x10,0,8,0", "tensor_idx 'one' is not an integer"),
        ("1,blk.0.x,0xfoo,0,8,0", "data_ptr '0xfoo' is not a pointer"),
        ("1,blk.0.x,0x10,1.5,8,0", "file_offset '1.5' is not an integer"),
        ("1,blk.0.x,0x10,0,-8,0", "size_bytes -8 is negative"),
        ("1,blk.0.x,0x10,0,8,first", "layer_id 'first' is not an integer"),
    ],
)
def test_name_table_rows_that_do_not_parse(moe, tmp_path, capsys, row, problem):
    names = tmp_path / "names.csv"
    table = st.names_table(moe["model"], st.template(moe["model"]))
    names.write_text(table.to_csv(index=False) + row + "\n")
    args = [str(moe["logs"]["seed64"]), "--gguf", str(moe["gguf"]), "--names", str(names)]
    _rejected(capsys, tmp_path, names, args, f"line {len(table) + 2}: {problem}")


def test_name_table_empty_fields_are_unknown(moe, tmp_path):
    names = tmp_path / "names.csv"
    names.write_text("tensor_idx,tensor_name,data_ptr,file_offset,size_bytes,layer_id\n\n7, Qcur-0,,,,\n")
    t = read_names(names)
    assert t.to_dict("records") == [
        {"tensor_idx": 7, "tensor_name": "Qcur-0", "data_ptr": 0, "file_offset": -1, "size_bytes": 0, "layer_id": -1}
    ]


# ---------------------------------------------------------------------------------------------------------
# 7: the HTML report


def _plots(html: str) -> list[list[dict]]:
    """The traces of every ``Plotly.newPlot`` call in `html`."""
    dec = json.JSONDecoder()
    out = []
    for m in re.finditer(r"Plotly\.newPlot\(\s*", html):
        _, pos = dec.raw_decode(html, m.end())  # the div id
        pos = re.compile(r"\s*,\s*").match(html, pos).end()
        traces, _ = dec.raw_decode(html, pos)
        out.append(traces)
    return out


def _length(a) -> int:
    if isinstance(a, dict) and "bdata" in a:
        return len(base64.b64decode(a["bdata"])) // np.dtype(a["dtype"]).itemsize
    return len(a)


@pytest.fixture(scope="module")
def report(moe, tmp_path_factory):
    d = tmp_path_factory.mktemp("html")
    html = d / "report.html"
    rc = main(
        ["tensors", str(moe["logs"]["seed64"]), "--gguf", str(moe["gguf"]), "--html", str(html), "--max-points", "150"]
    )
    assert rc == 0
    return html


def test_html_is_self_contained_and_sampled(report):
    html = report.read_text()
    assert not re.search(r"<script[^>]+src=[\"']?(https?:)?//", html)
    assert 'src="http' not in html
    assert len(re.findall(r"plotly\.js v\d+\.\d+\.\d+", html)) == 1  # the library, inlined once
    assert "Plotly.newPlot" in html
    plots = _plots(html)
    assert len(plots) >= 8
    kinds = Counter(t["type"] for traces in plots for t in traces)
    assert kinds["scatter3d"] == 1 and kinds["scattergl"] == 1
    points = [_length(t["x"]) for traces in plots for t in traces if t["type"] in ("scatter3d", "scattergl")]
    assert all(0 < n <= 150 for n in points), points


def test_html_sampling_has_effect(moe, tmp_path, capsys):
    html = tmp_path / "r.html"
    log = moe["logs"]["seed64"]
    n_file = sum(a["offset"] >= 0 for a in read_entries(log, "seed64"))
    assert n_file > 600
    seen = []
    for cap in (40, 600, 5000):
        args = ["tensors", str(log), "--gguf", str(moe["gguf"]), "--html", str(html), "--max-points", str(cap)]
        assert main(args) == 0
        capsys.readouterr()
        traces = [t for plot in _plots(html.read_text()) for t in plot if t["type"] in ("scatter3d", "scattergl")]
        points = {_length(t["x"]) for t in traces}
        assert len(traces) == 2 and len(points) == 1, points
        (n,) = points
        assert 0 < n <= min(cap, n_file)
        seen.append(n)
    assert seen[0] < seen[1] < seen[2] == n_file  # a cap above the log's size keeps every file access


CHROMIUM = next(
    (
        shutil.which(b)
        for b in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless_shell")
        if shutil.which(b)
    ),
    None,
)

_PROBE = """<script>
window.__errs = [];
window.addEventListener('error', function (e) { window.__errs.push('error: ' + (e.message || e)); });
window.addEventListener('unhandledrejection', function (e) { window.__errs.push('rejection: ' + e.reason); });
(function () {
  var ce = console.error;
  console.error = function () {
    window.__errs.push('console: ' + Array.prototype.join.call(arguments, ' '));
    return ce.apply(console, arguments);
  };
})();
window.addEventListener('load', function () {
  document.title = window.__errs.length ? 'GPUAN-JS-ERROR ' + window.__errs.join(' | ') : 'GPUAN-RENDERED-OK';
});
</script>"""


def _dump_dom(html: str, path: Path) -> str:
    path.write_text(html.replace("<head>", "<head>" + _PROBE, 1))
    r = subprocess.run(
        [CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox", "--dump-dom", path.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium/Chrome on this machine")
def test_html_renders_in_headless_chromium(report, tmp_path):
    # the probe itself: a page that throws is reported
    dom = _dump_dom("<html><head></head><body><script>undefined_fn()</script></body></html>", tmp_path / "bad.html")
    assert "GPUAN-JS-ERROR" in dom
    html = report.read_text()
    dom = _dump_dom(html, tmp_path / "report.html")
    title = re.search(r"<title>([^<]*)</title>", dom).group(1)
    assert title == "GPUAN-RENDERED-OK", title
    assert "main-svg" in dom
    assert dom.count('class="plot-container') == len(_plots(html))


# ---------------------------------------------------------------------------------------------------------
# 8: buffer events


def test_buffer_events(moe, tmp_path):
    events = [
        {"timestamp_ms": 0.5, "event": "alloc", "buffer_id": 1, "buffer_ptr": "0x7e0000000000", "size": 1000,
         "name": "CPU_compute", "backend": "CPU", "usage": "compute", "layer": -1},
        {"timestamp_ms": 2.0, "event": "alloc", "buffer_id": 3, "buffer_ptr": "0x7d0000100000", "size": 700,
         "name": "blk1", "backend": "CUDA0", "usage": "weights", "layer": 1},
        {"timestamp_ms": 1.0, "event": "alloc", "buffer_id": 2, "buffer_ptr": "0x7d0000000000", "size": 5000,
         "name": "blk0", "backend": "CUDA0", "usage": "weights", "layer": 0},
        {"timestamp_ms": 1.5, "event": "alloc", "buffer_id": 4, "buffer_ptr": "(nil)", "size": 300,
         "name": "kv", "backend": "CPU", "usage": "kv_cache", "layer": 0},
        {"timestamp_ms": 3.0, "event": "dealloc", "buffer_id": 2, "size": 0, "backend": "CUDA0"},
        {"timestamp_ms": 4.0, "event": "dealloc", "buffer_id": 1, "size": 999, "backend": "CPU"},
        {"timestamp_ms": 5.0, "event": "alloc", "buffer_id": 5, "buffer_ptr": "0x7d0000200000", "size": 100,
         "name": "out", "backend": "CUDA0", "usage": "compute", "layer": -1},
    ]  # fmt: skip
    path = tmp_path / "buffers.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events) + "\n")

    df = read_buffers(path)
    ordered = sorted(events, key=lambda e: e["timestamp_ms"])
    assert list(df["timestamp_ms"]) == [e["timestamp_ms"] for e in ordered]
    assert list(df["buffer_ptr"]) == [
        0 if e.get("buffer_ptr", "(nil)") == "(nil)" else int(e["buffer_ptr"], 16) for e in ordered
    ]

    alloc_size, in_use, want = {}, defaultdict(int), []
    for e in ordered:
        if e["event"] == "alloc":
            alloc_size[e["buffer_id"]] = e["size"]
            in_use[e["backend"]] += e["size"]
        else:
            in_use[e["backend"]] -= alloc_size[e["buffer_id"]]  # frees what the alloc took
        want.append((e["timestamp_ms"], e["backend"], in_use[e["backend"]]))
    assert dict(in_use) == {"CPU": 300, "CUDA0": 800}

    a = analyze(moe["logs"]["seed64"], moe["gguf"], buffers=path)
    m = a.to_pandas("buffer_memory")
    assert list(zip(m["timestamp_ms"], m["backend"], m["bytes_in_use"], strict=True)) == want
    b = a.to_pandas("buffers").set_index("buffer_id")
    assert sorted(b.index) == [1, 2, 3, 4, 5]
    freed = {e["buffer_id"]: e["timestamp_ms"] for e in events if e["event"] == "dealloc"}
    for e in events:
        if e["event"] == "alloc":
            r = b.loc[e["buffer_id"]]
            assert (r["size"], r["backend"], r["alloc_ms"], r["layer"]) == (
                e["size"], e["backend"], e["timestamp_ms"], e["layer"]
            )  # fmt: skip
            if e["buffer_id"] in freed:
                assert r["dealloc_ms"] == freed[e["buffer_id"]]
            else:
                assert np.isnan(r["dealloc_ms"])


@pytest.mark.parametrize(
    "line,problem",
    [
        ('{"timestamp_ms": null, "event": "alloc", "buffer_id": 2}', "timestamp_ms null is not a number"),
        ('{"timestamp_ms": "2.5", "event": "alloc", "buffer_id": 2}', 'timestamp_ms "2.5" is not a number'),
        ('{"timestamp_ms": NaN, "event": "alloc", "buffer_id": 2}', "timestamp_ms NaN is not a number"),
        ('{"event": "alloc", "buffer_id": 2}', "a buffer event needs 'timestamp_ms' and 'event'"),
        ('{"timestamp_ms": 2, "event": "alloc", "buffer_id": "two"}', 'buffer_id "two" is not an integer'),
        ('{"timestamp_ms": 2, "event": "alloc", "size": -4}', "size -4 is not a byte count"),
        ('{"timestamp_ms": 2, "event": "alloc", "buffer_ptr": "0xzz"}', 'buffer_ptr "0xzz" is not a pointer'),
        ('{"timestamp_ms": 2, "event": "alloc", "backend": 0}', "backend 0 is not a string"),
    ],
)
def test_buffer_events_that_do_not_parse(moe, tmp_path, capsys, line, problem):
    events = tmp_path / "buffers.jsonl"
    events.write_text('{"timestamp_ms": 1.0, "event": "alloc", "buffer_id": 1, "size": 10}\n\n' + line + "\n")
    args = [str(moe["logs"]["seed64"]), "--gguf", str(moe["gguf"]), "--buffers", str(events)]
    _rejected(capsys, tmp_path, events, args, f"line 3: {re.escape(problem)}")


def test_buffer_events_optional_fields(tmp_path):
    events = tmp_path / "buffers.jsonl"
    events.write_text('{"timestamp_ms": 1, "event": "dealloc", "buffer_ptr": null, "name": null}\n')
    assert read_buffers(events).iloc[0].to_dict() == {
        "timestamp_ms": 1.0, "event": "dealloc", "buffer_id": -1, "buffer_ptr": 0, "size": 0,
        "name": "", "backend": "", "usage": "", "layer": -1,
    }  # fmt: skip
    events.write_text("\n")
    assert list(read_buffers(events).columns) == ["timestamp_ms", "event", "buffer_id", "buffer_ptr", "size",
                                                  "name", "backend", "usage", "layer"]  # fmt: skip


# ---------------------------------------------------------------------------------------------------------
# 9: names


@pytest.mark.parametrize(
    "name,weight,layer,component",
    [
        ("blk.3.attn_q.weight", True, 3, "attn_q"),
        ("blk.12.attn_output.weight", True, 12, "attn_o"),
        ("blk.0.ffn_gate_exps.weight", True, 0, "experts"),
        ("blk.2.ffn_down.weight", True, 2, "ffn"),
        ("token_embd.weight", True, -1, "embeddings"),
        ("output.weight", True, -1, "output"),
        ("output_norm.weight", True, -1, "norms"),
        ("blk.1.ffn_gate_inp.weight", True, 1, "router"),
        ("Qcur-5", False, 5, "activations"),
        ("cache_k_l7", False, 7, "kv_cache"),
    ],
)
def test_layer_and_component_of_llama_cpp_names(name, weight, layer, component):
    assert layer_of(name) == layer
    assert component_of(name, weight=weight) == component


# ---------------------------------------------------------------------------------------------------------
# the GPU engine


@pytest.mark.skipif(not gpu_available(), reason="no GPU here (CuPy is not installed or sees no CUDA device)")
@pytest.mark.parametrize("fmt", FORMATS)
def test_gpu_engine_gives_the_cpu_tables(moe, fmt, tmp_path):
    from gpuan.engine import CPU, select

    try:
        gpu = select("gpu")
    finally:
        select(None)
    assert gpu.is_gpu
    names = None
    if fmt == "seed64":
        names = tmp_path / "names.csv"
        st.names_table(moe["model"], st.template(moe["model"])).to_csv(names, index=False)
    cpu = analyze(moe["logs"][fmt], moe["gguf"], names=names, window_entries=97, engine=CPU)
    on_gpu = analyze(moe["logs"][fmt], moe["gguf"], names=names, window_entries=97, engine=gpu)
    assert on_gpu.summary["engine"] == "gpu"
    for name in cpu.tables:
        pd.testing.assert_frame_equal(on_gpu.to_pandas(name), cpu.to_pandas(name), obj=name)
    assert {**on_gpu.summary, "engine": "cpu"} == cpu.summary
