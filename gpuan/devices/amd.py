"""The AMD GPUs gpuan knows, by generation: CU count, host link, dense peak rates (matrix cores as
"tensor"), memory and last-level cache (Infinity Cache where the part has one), each with its source.
ROCm shows each graphics compute die (GCD) of an MI250/MI250X as its own device, so those are per GCD."""

from __future__ import annotations

from typing import Any

from gpuan.devices.model import GB, GIB, GPU, PCIE_X16, cu_limits, cu_source, peaks


def _amd(name: str, gfx: str, cus: int, link: str, sources: dict[str, str], **fields: Any) -> GPU:
    """Return an AMD entry: the gfx target's per-CU limits, PCIe N.0 x16 per direction, and `sources` over
    the shared ones (copy engines are not published for any AMD part: 2 assumed, one per direction)."""
    shared = {
        "per-SM limits": cu_source(gfx),
        "copy_engines": "assumed 2 (one per direction): AMD publishes no SDMA engine count per part",
        "link_bandwidth": f"{link}, per direction after encoding",
    }
    return GPU(
        name, sms=cus, copy_engines=2, link=link, link_bandwidth=PCIE_X16[int(link.split()[1][0])],
        arch=fields.pop("arch"), sources=shared | sources, **cu_limits(gfx), **fields,
    )  # fmt: skip


# --- CDNA 2 (gfx90a): one GCD per ROCm device ----------------------------------------------------------------

_CDNA2_L2 = "AMD CDNA 2 architecture whitepaper: 8 MB L2 per GCD"
MI210 = _amd(
    "MI250 GCD / MI210", "gfx90a", 104, "PCIe 4.0 x16", arch="CDNA2",
    aliases=("mi250", "mi210", "gfx90a", "instinct mi210", "instinct mi250", "mi250 gcd"),
    flops=peaks(vector_fp64=22.6, tensor_fp64=45.3, vector_fp32=22.6, tensor_fp32=45.3, tensor_fp16_bf16=181.0,
                tensor_int8=181.0),
    memory_bandwidth=1.6384e12, memory_bytes=64 * GIB, l2_bytes=8 * 2**20,
    sources={"sms": "AMD Instinct MI210 datasheet (104 CUs; one MI250 GCD is the same part)",
             "flops": "AMD Instinct MI210 datasheet (= MI250 datasheet halved per GCD); matrix cores as"
                      " 'tensor', no sparsity; vector FP32 without packed math (the datasheet's packed-FP32"
                      " 45.3 needs v_pk_fma_f32)",
             "memory_bandwidth": "AMD Instinct MI210 datasheet: 1.6384 TB/s HBM2e",
             "l2_bytes": _CDNA2_L2},
)  # fmt: skip
MI250X_GCD = _amd(
    "MI250X GCD", "gfx90a", 110, "PCIe 4.0 x16", arch="CDNA2",
    aliases=("mi250x", "mi250x gcd", "instinct mi250x"),
    flops=peaks(vector_fp64=47.9 / 2, tensor_fp64=95.7 / 2, vector_fp32=47.9 / 2, tensor_fp32=95.7 / 2,
                tensor_fp16_bf16=383 / 2, tensor_int8=383 / 2),
    memory_bandwidth=3.2768e12 / 2, memory_bytes=64 * GIB, l2_bytes=8 * 2**20,
    sources={"sms": "AMD Instinct MI250X datasheet (220 CUs over 2 GCDs: 110 per ROCm device)",
             "flops": "AMD Instinct MI250X datasheet halved per GCD (FP64/FP32 vector 47.9, matrix 95.7,"
                      " FP16/BF16/INT8 383); no sparsity",
             "memory_bandwidth": "AMD Instinct MI250X datasheet: 3.2768 TB/s HBM2e over 2 GCDs, halved",
             "l2_bytes": _CDNA2_L2},
)  # fmt: skip

# --- CDNA 3 (gfx942) -------------------------------------------------------------------------------------

#: MI300-series Infinity Cache: the last level before HBM, where an op's working set may stay
_MALL = {"l2_bytes": 256 * 2**20, "l2_bandwidth": 17.2e12}
_MALL_SOURCES = {
    "l2_bytes": "AMD CDNA 3 architecture whitepaper: 256 MB AMD Infinity Cache (the 4 MB L2 per XCD is"
                " private to its 38 CUs)",
    "l2_bandwidth": "AMD CDNA 3 architecture whitepaper: Infinity Cache peak bandwidth 17.2 TB/s (AMD's MI300"
                    " launch slides, as reported by ServeTheHome: '17TB/s of peak bandwidth')",
}  # fmt: skip
_MI300X_PEAKS = peaks(vector_fp64=81.7, tensor_fp64=163.4, vector_fp32=163.4, tensor_fp32=163.4,
                      tensor_tf32=653.7, tensor_fp16_bf16=1307.4, tensor_fp8=2614.9, tensor_int8=2614.9)  # fmt: skip
_MI300X_FLOPS = "AMD Instinct {} datasheet, dense (the 'with sparsity' values are twice); matrix cores as 'tensor'"
MI300X = _amd(
    "MI300X", "gfx942", 304, "PCIe 5.0 x16", arch="CDNA3",
    aliases=("mi300x", "gfx942", "instinct mi300x", "mi300x vf"),
    flops=_MI300X_PEAKS, memory_bandwidth=5.3e12, memory_bytes=192 * GIB, **_MALL,
    sources=_MALL_SOURCES | {"sms": "AMD Instinct MI300X datasheet (304 CUs)",
                             "flops": _MI300X_FLOPS.format("MI300X"),
                             "memory_bandwidth": "AMD Instinct MI300X datasheet: 5.3 TB/s HBM3"},
)  # fmt: skip
MI325X = _amd(
    "MI325X", "gfx942", 304, "PCIe 5.0 x16", arch="CDNA3", aliases=("mi325x", "instinct mi325x"),
    flops=_MI300X_PEAKS, memory_bandwidth=6.0e12, memory_bytes=256 * GB, **_MALL,
    sources=_MALL_SOURCES | {"sms": "AMD Instinct MI325X datasheet (304 CUs)",
                             "flops": _MI300X_FLOPS.format("MI325X") + " (the MI300X rates)",
                             "memory_bandwidth": "AMD Instinct MI325X datasheet: 6 TB/s HBM3E (256 GB)"},
)  # fmt: skip
MI300A = _amd(
    "MI300A", "gfx942", 228, "PCIe 5.0 x16", arch="CDNA3", aliases=("mi300a", "instinct mi300a"),
    flops=peaks(vector_fp64=61.3, tensor_fp64=122.6, vector_fp32=122.6, tensor_fp32=122.6, tensor_tf32=490.3,
                tensor_fp16_bf16=980.6, tensor_fp8=1961.2, tensor_int8=1961.2),
    memory_bandwidth=5.3e12, memory_bytes=128 * GIB, **_MALL,
    sources=_MALL_SOURCES | {"sms": "AMD Instinct MI300A datasheet (228 CUs)",
                             "flops": _MI300X_FLOPS.format("MI300A"),
                             "memory_bandwidth": "AMD Instinct MI300A datasheet: 5.3 TB/s HBM3 (128 GB, shared"
                                                 " with the CPU cores: host copies stay in HBM, the PCIe figure"
                                                 " is an upper bound on their cost)"},
)  # fmt: skip

# --- CDNA 4 (gfx950) -------------------------------------------------------------------------------------

#: CDNA 4's Infinity Cache: sources found disagree on its size and none gives its bandwidth, so unknown
_CDNA4_MALL = {"l2_bandwidth": "Infinity Cache size and bandwidth not sourced for CDNA 4: left unknown"}
MI355X = _amd(
    "MI355X", "gfx950", 256, "PCIe 5.0 x16", arch="CDNA4", aliases=("mi355x", "gfx950", "instinct mi355x"),
    flops=peaks(vector_fp64=78.6, tensor_fp64=78.6, vector_fp32=157.3, tensor_fp32=157.3, tensor_fp16_bf16=2516.6,
                tensor_fp8=5033.2, tensor_int8=5033.2),
    memory_bandwidth=8.0e12, memory_bytes=288 * GB,
    sources=_CDNA4_MALL | {
        "sms": "AMD Instinct MI355X datasheet (256 CUs: 8 XCDs of 32)",
        "flops": "AMD Instinct MI355X datasheet, dense (no TF32: CDNA 4 dropped it); agrees with AMD's ISSCC 2026"
                 " figure of 8,192 FP8 FLOP/clk per CU x 256 CUs x 2.4 GHz = 5.03 PFLOP/s",
        "memory_bandwidth": "AMD Instinct MI355X datasheet: 8 TB/s HBM3E (288 GB)"},
)  # fmt: skip
MI350X = _amd(
    "MI350X", "gfx950", 256, "PCIe 5.0 x16", arch="CDNA4", aliases=("mi350x", "instinct mi350x"),
    flops=peaks(vector_fp64=72.1, tensor_fp64=72.1, vector_fp32=144.2, tensor_fp32=144.2, tensor_fp16_bf16=2307.2,
                tensor_fp8=4614.4, tensor_int8=4614.4),
    memory_bandwidth=8.0e12, memory_bytes=288 * GB,
    sources=_CDNA4_MALL | {
        "sms": "AMD Instinct MI350X datasheet (256 CUs)",
        "flops": "AMD Instinct MI350X datasheet, dense (the MI355X rates at its 2.2 GHz peak clock)",
        "memory_bandwidth": "AMD Instinct MI350X datasheet: 8 TB/s HBM3E (288 GB)"},
)  # fmt: skip

# --- RDNA 3 workstation (gfx1100) ------------------------------------------------------------------------

W7900 = _amd(
    "Radeon PRO W7900", "gfx1100", 96, "PCIe 4.0 x16", arch="RDNA3", segment="workstation",
    aliases=("w7900", "radeon pro w7900", "amd radeon pro w7900"),
    flops=peaks(vector_fp32=61.3, tensor_fp16=122.6), memory_bandwidth=864e9, memory_bytes=48 * GIB,
    l2_bytes=96 * 2**20,
    sources={"sms": "AMD Radeon PRO W7900 datasheet (96 CUs)",
             "flops": "AMD Radeon PRO W7900 datasheet: peak FP32 61.3 TFLOPS (dual-issue), peak FP16 122.6"
                      " TFLOPS (the WMMA matrix rate, used for 16-bit GEMMs)",
             "memory_bandwidth": "AMD Radeon PRO W7900 datasheet: 864 GB/s GDDR6",
             "l2_bytes": "AMD Radeon PRO W7900 datasheet: 96 MB AMD Infinity Cache"},
)  # fmt: skip
W7800 = _amd(
    "Radeon PRO W7800", "gfx1100", 70, "PCIe 4.0 x16", arch="RDNA3", segment="workstation",
    aliases=("w7800", "radeon pro w7800", "amd radeon pro w7800"),
    flops=peaks(vector_fp32=45.2, tensor_fp16=90.5), memory_bandwidth=576e9, memory_bytes=32 * GIB,
    l2_bytes=64 * 2**20,
    sources={"sms": "AMD Radeon PRO W7800 datasheet (70 CUs)",
             "flops": "AMD Radeon PRO W7800 datasheet: peak FP32 45.2 TFLOPS (dual-issue), peak FP16 90.5 TFLOPS",
             "memory_bandwidth": "AMD Radeon PRO W7800 datasheet: 576 GB/s GDDR6",
             "l2_bytes": "AMD Radeon PRO W7800 datasheet: 64 MB AMD Infinity Cache"},
)  # fmt: skip

KNOWN: tuple[GPU, ...] = (MI210, MI250X_GCD, MI300X, MI325X, MI300A, MI355X, MI350X, W7900, W7800)
