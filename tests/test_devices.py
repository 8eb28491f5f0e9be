"""The GPU table: every part `streams` knows has the rates `sol` needs, each number has a source, trace
device names find their part, and a part gpuan lacks rates for (or a name it does not know) is an error
that says how to go on."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from gpuan import devices
from gpuan.cli import main
from gpuan.devices.ceilings import read_ceilings
from gpuan.sol.roofs import datasheet, roofs_for

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


# --- the table --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("gpu", devices.KNOWN, ids=lambda g: g.name)
def test_every_device_has_sol_rates_and_sources(gpu):
    assert gpu.flops.get("vector:fp32", 0) > 0 and gpu.memory_bandwidth and gpu.memory_bandwidth > 0
    assert datasheet(gpu, "t").flops == gpu.flops  # sol can score on it
    must = {"sms", "per-SM limits", "copy_engines", "link_bandwidth", "flops", "memory_bandwidth"}
    must |= {k for k in ("l2_bytes", "l2_bandwidth", "copy_first_turn_ns", "copy_turn_ns") if getattr(gpu, k)}
    assert must <= {k for k, v in gpu.sources.items() if v.strip()}, must - set(gpu.sources)
    # a matrix unit is never slower than the vector unit on the same type
    for key, rate in gpu.flops.items():
        unit, dtype = key.split(":")
        vector = gpu.flops.get("vector:" + dtype)
        if unit == "tensor" and vector:
            assert rate >= vector
    assert gpu.l2_bandwidth is None or gpu.l2_bandwidth > gpu.memory_bandwidth
    assert gpu.sms > 0 and gpu.threads_per_sm in (1536, 2048) and gpu.shared_memory_per_sm >= 64 * 1024


def test_names_and_aliases_are_unambiguous():
    seen: dict[str, str] = {}
    for gpu in devices.KNOWN:
        for alias in (gpu.name, *gpu.aliases):
            key = devices._key(alias)
            assert seen.setdefault(key, gpu.name) == gpu.name, f"{alias!r} names {seen[key]} and {gpu.name}"
            assert devices.find(alias) is gpu


#: the names drivers report for the parts the table must cover (nvidia-smi / torch.cuda.get_device_name /
#: rocm-smi spellings) and the word of the entry each must find
COVERED = {
    "NVIDIA A100-SXM4-40GB": "A100-SXM4-40GB", "NVIDIA A100-SXM4-80GB": "A100-SXM4-80GB",
    "NVIDIA A100-PCIE-40GB": "A100-PCIE-40GB", "NVIDIA A100 80GB PCIe": "A100 80GB PCIe", "NVIDIA A30": "A30",
    "NVIDIA A10": "A10", "NVIDIA A40": "A40", "NVIDIA H100 80GB HBM3": "H100 SXM5", "NVIDIA H100 PCIe": "H100 PCIe",
    "NVIDIA H100 NVL": "H100 NVL", "NVIDIA H200": "H200", "NVIDIA H200 NVL": "H200 NVL", "NVIDIA H20": "H20",
    "NVIDIA GH200 480GB": "GH200", "NVIDIA B200": "B200", "NVIDIA GB200": "GB200", "NVIDIA B300": "B300",
    "NVIDIA GB300": "GB300", "NVIDIA RTX A6000": "RTX A6000", "NVIDIA RTX 6000 Ada Generation": "RTX 6000 Ada",
    "NVIDIA L40": "L40", "NVIDIA L40S": "L40S", "NVIDIA L4": "L4",
    "NVIDIA RTX PRO 6000 Blackwell Workstation Edition": "RTX PRO 6000 Blackwell",
    "NVIDIA GeForce RTX 3090": "GeForce RTX 3090", "NVIDIA GeForce RTX 4090": "GeForce RTX 4090",
    "NVIDIA GeForce RTX 5090": "GeForce RTX 5090", "Tesla V100-SXM2-16GB": "Tesla V100-SXM2-16GB",
    "Tesla V100-PCIE-32GB": "Tesla V100-PCIE", "AMD Instinct MI210": "MI250 GCD / MI210",
    "AMD Instinct MI250": "MI250 GCD / MI210", "AMD Instinct MI250X": "MI250X GCD", "AMD Instinct MI300X": "MI300X",
    "AMD Instinct MI300X VF": "MI300X", "AMD Instinct MI300A": "MI300A", "AMD Instinct MI325X": "MI325X",
    "AMD Instinct MI350X": "MI350X", "AMD Instinct MI355X": "MI355X", "gfx942": "MI300X",
    "AMD Radeon PRO W7900": "Radeon PRO W7900", "AMD Radeon PRO W7800": "Radeon PRO W7800",
}  # fmt: skip


@pytest.mark.parametrize("reported, entry", COVERED.items())
def test_reported_names_find_their_part(reported, entry):
    gpu = devices.find(reported)
    assert gpu is not None and gpu.name == entry and gpu.flops
    assert gpu.vendor == ("AMD" if reported.startswith(("AMD", "gfx")) else "NVIDIA")


# --- real traces ------------------------------------------------------------------------------------------


def _device_properties() -> list[tuple[str, dict]]:
    if not DATA.is_dir():
        return []
    found = []
    for path in sorted(DATA.glob("kineto/**/*.json.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            doc = json.load(f)
        for props in (doc.get("deviceProperties") or []) if isinstance(doc, dict) else []:
            found.append((str(path.relative_to(DATA)), props))
    return found


PROPERTIES = _device_properties()


@pytest.mark.skipif(not PROPERTIES, reason="../shared/data (the real traces) is absent")
@pytest.mark.parametrize("where, props", PROPERTIES, ids=[f"{w}:{p.get('id')}" for w, p in PROPERTIES])
def test_real_trace_devices_are_identified(where, props):
    gpu = devices.from_properties(props, where)
    # the trace's own facts: SM count, compute capability, memory size, vendor, model number
    assert gpu.sms == props["numSms"]
    assert gpu.compute_capability == (props["computeMajor"], props["computeMinor"])
    assert abs(gpu.memory_bytes - props["totalGlobalMem"]) < 0.1 * props["totalGlobalMem"]
    name = props["name"]
    assert gpu.vendor == ("AMD" if name.startswith("AMD") else "NVIDIA")
    model = re.search(r"[A-Z]+\d{3}[A-Z]?", name)
    if model:  # "AMD Radeon Graphics" names none: its CU count and memory chose the part
        assert model.group() in gpu.name or model.group().lower() in gpu.aliases
    assert datasheet(gpu, where).memory_bandwidth > 0


# --- messages ---------------------------------------------------------------------------------------------


def _renamed_trace(tmp_path: Path, trace: str, name: str) -> tuple[Path, dict]:
    """Write `trace` (a real Kineto file) with its GPU renamed to one gpuan does not know."""
    with gzip.open(DATA / trace, "rt", encoding="utf-8") as f:
        doc = json.load(f)
    doc["deviceProperties"][0]["name"] = name
    out = tmp_path / "renamed.json"
    out.write_text(json.dumps(doc), encoding="utf-8")
    return out, doc["deviceProperties"][0]


@pytest.mark.skipif(not DATA.is_dir(), reason="../shared/data (the real traces) is absent")
@pytest.mark.parametrize(
    "trace, name",
    [("kineto/a100_triton_example.json.gz", "NVIDIA Future GPU 9000"),
     ("kineto/mi250_minitoy_train_rocm.json.gz", "AMD Instinct MI999")],
)  # fmt: skip
def test_unknown_gpu_says_calibrate_or_nearest_known(tmp_path, capsys, trace, name):
    path, props = _renamed_trace(tmp_path, trace, name)
    assert main(["sol", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("gpuan: error: ") and str(path) in err
    assert f"no peak rates for {name}" in err and "gpuan sol calibrate" in err and "--ceilings measured" in err
    suggested = re.search(r'--gpu "([^"]+)"', err).group(1)
    near = devices.lookup(suggested)
    # nearest: same vendor and the compute capability / gfx target the trace recorded
    assert near.vendor == ("AMD" if name.startswith("AMD") else "NVIDIA")
    assert near.compute_capability == (props["computeMajor"], props["computeMinor"])
    # and the suggestion works
    assert main(["sol", str(path), "--gpu", suggested, "--top", "1"]) == 0


@pytest.mark.skipif(not DATA.is_dir(), reason="../shared/data (the real traces) is absent")
def test_unknown_gpu_scores_on_its_measured_ceilings(tmp_path):
    path, props = _renamed_trace(tmp_path, "kineto/a100_triton_example.json.gz", "NVIDIA Future GPU 9000")
    ceilings = tmp_path / "ceilings.json"
    ceilings.write_text(json.dumps({props["name"]: {"flops": {"vector:fp32": 1e13}, "memory_bandwidth": 1e12}}))
    loaded = read_ceilings(ceilings)
    roofs = roofs_for({"device_properties": [props]}, str(path), ceilings=loaded)
    assert (roofs.kind, roofs.flops, roofs.memory_bandwidth) == ("measured", {"vector:fp32": 1e13}, 1e12)


@pytest.mark.skipif(not DATA.is_dir(), reason="../shared/data (the real traces) is absent")
@pytest.mark.parametrize("typed, expected", [("RTX 3080", "GeForce RTX 3090"), ("H10O", "H100 SXM5")])
def test_unknown_device_name_suggests_the_closest(capsys, typed, expected):
    assert main(["sol", str(DATA / "kineto/a100_triton_example.json.gz"), "--gpu", typed]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"gpuan: error: --gpu: unknown device {typed!r}; closest known: " in err
    closest = err.split("closest known: ")[1].split(";")[0].split(", ")
    assert closest[0] == expected and set(closest) <= set(devices.names())


@pytest.mark.parametrize("nbytes", [32 << 10, 128 << 10, 8 << 20])
def test_calibration_copies_never_alias_within_a_page(nbytes):
    # a copy whose source and destination share their offset within a page ran L2 at 5 GB/s, below DRAM
    from gpuan.devices.calibrate import _copy_pair

    src, dst = _copy_pair(nbytes)
    assert src.nbytes == dst.nbytes == nbytes and (src == 1).all()
    assert (dst.ctypes.data - src.ctypes.data) % 4096 == 2048
