"""The NVIDIA GPUs gpuan knows, by generation: SM count, copy engines, host link, dense peak rates,
memory and last-level cache, each number with its source. Per-SM limits come from the compute capability
(:func:`gpuan.devices.model.sm_limits`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gpuan.devices.model import GB, GIB, GPU, NV_DENSE, PCIE_X16, cc_source, halved, peaks, sm_limits


def _nv(name: str, cc: tuple[int, int], sms: int, link: str, sources: dict[str, str], **fields: Any) -> GPU:
    """Return an NVIDIA entry: the compute capability's per-SM limits, the link's rate (PCIe N.0 x16 per
    direction unless ``link_bandwidth`` is given), and `sources` over the shared ones."""
    fields.setdefault("copy_engines", 2)
    if "link_bandwidth" not in fields:
        fields["link_bandwidth"] = PCIE_X16[int(link.split()[1][0])]
        sources = {"link_bandwidth": f"{link}, per direction after encoding"} | sources
    if "copy_engines" not in sources:
        sources = {"copy_engines": "assumed 2 (one per direction): no published deviceQuery found"} | sources
    return GPU(name, sms=sms, link=link, sources={"per-SM limits": cc_source(cc)} | sources, **sm_limits(cc), **fields)


def _variant(base: GPU, name: str, aliases: tuple[str, ...], sources: dict[str, str], **changes: Any) -> GPU:
    """Return `base` with its own name, aliases, sources and differences (a part of the same die)."""
    return replace(base, name=name, aliases=aliases, sources=base.sources | sources, **changes)


# --- Maxwell, Pascal, Volta ------------------------------------------------------------------------------

GTX_950 = _nv(
    "GeForce GTX 950", (5, 2), 6, "PCIe 3.0 x16", arch="Maxwell", segment="GeForce",
    copy_first_turn_ns=3.158e6, copy_turn_ns=1.05e6, aliases=("gtx950", "gtx 950"),
    flops=peaks(vector_fp32=768 * 2 * 1.188e-3, vector_fp64=768 * 2 * 1.188e-3 / 32),
    memory_bandwidth=105.6e9, memory_bytes=2 * GIB, l2_bytes=1 * 2**20,
    sources={
        "sms": "NVIDIA GeForce GTX 950 specifications (768 CUDA cores, 6 SMM)",
        "copy_engines": "assumed 2, one per direction: no published deviceQuery of a GTX 950 was found to check it",
        "copy_first_turn_ns": "measured on this GPU by the trans_kernel_model study (2017): 3.158 ms",
        "copy_turn_ns": "fitted to that study's 5M-element 2- and 3-stream runs on this GPU (copy start and"
        " end times; not the files gpuan validates on): 1.05 ms",
        "flops": "derived from NVIDIA's GTX 950 specifications: 768 CUDA cores x 2 FLOP (FMA) x 1188 MHz boost"
        " = 1.82 TFLOP/s FP32; FP64 at 1/32 of FP32 (compute capability 5.2 throughput table)",
        "memory_bandwidth": "NVIDIA GeForce GTX 950 specifications: 105.6 GB/s",
        "l2_bytes": "NVIDIA GeForce GTX 950 (GM206) deviceQuery: L2 Cache Size 1048576 bytes",
    },
)  # fmt: skip

QUADRO_GP100 = _nv(
    "Quadro GP100", (6, 0), 56, "PCIe 3.0 x16", arch="Pascal", segment="workstation", aliases=("gp100",),
    flops=peaks(vector_fp64=5.2, vector_fp32=10.3, vector_fp16=20.7), memory_bandwidth=717e9,
    memory_bytes=16 * GIB, l2_bytes=4 * 2**20,
    sources={
        "sms": "NVIDIA Quadro GP100 datasheet (3584 CUDA cores, 56 SMs)",
        "flops": "NVIDIA Quadro GP100 datasheet (no tensor cores)",
        "memory_bandwidth": "NVIDIA Quadro GP100 datasheet: 717 GB/s HBM2",
        "l2_bytes": "NVIDIA Tesla P100 whitepaper: 4096 KB L2 on GP100",
    },
)  # fmt: skip

_V100_L2 = 2048 * 1.53e9
_V100_L2_SOURCE = (
    "NVIDIA A100 Tensor Core GPU Architecture whitepaper, table 'Comparison of NVIDIA Data Center GPUs': V100"
    " L2 read bandwidth 2048 bytes/clk, at the 1530 MHz boost clock = 3,133 GB/s (the whitepaper's '2.3x the L2"
    " read bandwidth of V100' for A100's 5120 bytes/clk at 1410 MHz agrees; the same 3,133 GB/s is tabulated in"
    " Ultrasonics Sonochemistry 99 (2023) 106546, table 3)"
)
V100_SXM2 = _nv(
    "Tesla V100-SXM2", (7, 0), 80, "PCIe 3.0 x16", arch="Volta", copy_engines=6,
    aliases=("v100", "v100-sxm2", "v100 sxm2", "v100-sxm2-32gb", "v100-dgxs", "v100-dgxs-32gb"),
    flops=peaks(vector_fp64=7.8, vector_fp32=15.7, tensor_fp16=125), memory_bandwidth=900e9,
    memory_bytes=32 * GIB, l2_bytes=6 * 2**20, l2_bandwidth=_V100_L2,
    sources={
        "sms": "NVIDIA Tesla V100 datasheet (80 SMs)",
        "copy_engines": "published deviceQuery output of a Tesla V100-SXM2-16GB (CUDA 12.4): 'Yes with 6 copy"
                        " engine(s)'",
        "flops": "NVIDIA Tesla V100 datasheet, SXM2 column (tensor cores: FP16 only, no sparsity); the DGX"
                 " Station's V100-DGXS runs the same 1530 MHz boost clock",
        "memory_bandwidth": "NVIDIA Tesla V100 datasheet, SXM2: 900 GB/s HBM2 (16 and 32 GB)",
        "l2_bytes": "NVIDIA Tesla V100 GPU Architecture whitepaper: 6144 KB L2",
        "l2_bandwidth": _V100_L2_SOURCE,
    },
)  # fmt: skip
V100_SXM2_16GB = _variant(
    V100_SXM2, "Tesla V100-SXM2-16GB", ("v100-sxm2-16gb", "v100 16gb"),
    {"memory_bandwidth": "NVIDIA Tesla V100 datasheet, SXM2: 900 GB/s HBM2 (16 GB)"}, memory_bytes=16 * GIB,
)  # fmt: skip
V100_PCIE = _variant(
    V100_SXM2, "Tesla V100-PCIE", ("v100-pcie", "v100 pcie", "v100-pcie-16gb", "v100-pcie-32gb"),
    {"flops": "NVIDIA Tesla V100 datasheet, PCIe column (tensor cores: FP16 only, no sparsity)",
     "l2_bandwidth": "V100 L2 read bandwidth 2048 bytes/clk (A100 whitepaper's comparison table) at the PCIe"
                     " card's 1380 MHz boost clock",
     "copy_engines": "as Tesla V100-SXM2 (same GV100 die)"},
    flops=peaks(vector_fp64=7.0, vector_fp32=14.0, tensor_fp16=112), l2_bandwidth=2048 * 1.38e9,
)  # fmt: skip

# --- Ampere ----------------------------------------------------------------------------------------------

_A100_PEAKS = peaks(vector_fp64=9.7, tensor_fp64=19.5, vector_fp32=19.5, tensor_tf32=156, tensor_fp16_bf16=312,
                    tensor_int8=624)  # fmt: skip
A100_SXM4_80GB = _nv(
    "A100-SXM4-80GB", (8, 0), 108, "PCIe 4.0 x16", arch="Ampere", copy_engines=3,
    aliases=("a100", "a100-sxm4", "a100 sxm", "a100-sxm4-80gb", "a100 80gb", "a100-sxm-80gb"),
    flops=_A100_PEAKS, memory_bandwidth=2.039e12, memory_bytes=80 * GIB, l2_bytes=40 * 2**20,
    l2_bandwidth=5120 * 1.41e9,
    sources={
        "sms": "NVIDIA A100 Tensor Core GPU Architecture whitepaper (108 SMs)",
        "copy_engines": "published deviceQuery output of a 108-SM A100 (CUDA 12.0): 'Yes with 3 copy engine(s)'",
        "flops": "NVIDIA A100 Tensor Core GPU datasheet, 80GB SXM column; " + NV_DENSE,
        "memory_bandwidth": "NVIDIA A100 datasheet, 80GB SXM: 2,039 GB/s HBM2e",
        "l2_bytes": "NVIDIA A100 Tensor Core GPU Architecture whitepaper: 40 MB L2",
        "l2_bandwidth": "NVIDIA A100 Tensor Core GPU Architecture whitepaper: L2 read bandwidth 5120 bytes/clk,"
        " at the 1410 MHz boost clock",
    },
)  # fmt: skip
A100_SXM4_40GB = _variant(
    A100_SXM4_80GB, "A100-SXM4-40GB", ("a100-sxm4-40gb", "a100 40gb", "a100-pg509-200", "a100-sxm-40gb"),
    {"memory_bandwidth": "NVIDIA A100 datasheet, 40GB SXM: 1,555 GB/s HBM2"},
    memory_bandwidth=1.555e12, memory_bytes=40 * GIB,
)  # fmt: skip
A100_PCIE_80GB = _variant(
    A100_SXM4_80GB, "A100 80GB PCIe", ("a100-pcie-80gb", "a100 80gb pcie", "a100 pcie 80gb"),
    {"flops": "NVIDIA A100 datasheet, 80GB PCIe column (same rates as SXM); " + NV_DENSE,
     "memory_bandwidth": "NVIDIA A100 datasheet, 80GB PCIe: 1,935 GB/s HBM2e",
     "copy_engines": "as A100-SXM4 (same GA100 configuration)"},
    memory_bandwidth=1.935e12,
)  # fmt: skip
A100_PCIE_40GB = _variant(
    A100_SXM4_80GB, "A100-PCIE-40GB", ("a100-pcie-40gb", "a100 pcie", "a100-pcie", "a100 40gb pcie"),
    {"flops": "NVIDIA A100 datasheet, 40GB PCIe column (same rates as SXM); " + NV_DENSE,
     "memory_bandwidth": "NVIDIA A100 datasheet, 40GB PCIe: 1,555 GB/s HBM2",
     "copy_engines": "as A100-SXM4 (same GA100 configuration)"},
    memory_bandwidth=1.555e12, memory_bytes=40 * GIB,
)  # fmt: skip
A30 = _nv(
    "A30", (8, 0), 56, "PCIe 4.0 x16", arch="Ampere", aliases=("a30", "nvidia a30"),
    flops=peaks(vector_fp64=5.2, tensor_fp64=10.3, vector_fp32=10.3, tensor_tf32=82, tensor_fp16_bf16=165,
                tensor_int8=330),
    memory_bandwidth=933e9, memory_bytes=24 * GIB,
    sources={"sms": "NVIDIA A30 datasheet (3584 FP32 cores = 56 GA100 SMs of 64)",
             "flops": "NVIDIA A30 Tensor Core GPU datasheet (dense column; the sparse one is twice)",
             "memory_bandwidth": "NVIDIA A30 datasheet: 933 GB/s HBM2"},
)  # fmt: skip
A10 = _nv(
    "A10", (8, 6), 72, "PCIe 4.0 x16", arch="Ampere", aliases=("a10", "nvidia a10", "a10g"),
    flops=peaks(vector_fp32=31.2, tensor_tf32=62.5, tensor_fp16_bf16=125, tensor_int8=250),
    memory_bandwidth=600e9, memory_bytes=24 * GIB, l2_bytes=6 * 2**20,
    sources={"sms": "NVIDIA A10 datasheet (9216 CUDA cores = 72 GA102 SMs of 128)",
             "flops": "NVIDIA A10 Tensor Core GPU datasheet (dense column; the sparse one is twice); the AWS"
                      " A10G is a different clock and is matched here only by name",
             "memory_bandwidth": "NVIDIA A10 datasheet: 600 GB/s GDDR6",
             "l2_bytes": "NVIDIA Ampere GA102 GPU Architecture whitepaper: 6144 KB L2"},
)  # fmt: skip
A40 = _nv(
    "A40", (8, 6), 84, "PCIe 4.0 x16", arch="Ampere", aliases=("a40", "nvidia a40"),
    flops=peaks(vector_fp32=37.4, tensor_tf32=74.8, tensor_fp16_bf16=149.7, tensor_int8=299.3),
    memory_bandwidth=696e9, memory_bytes=48 * GIB, l2_bytes=6 * 2**20,
    sources={"sms": "NVIDIA A40 datasheet (10752 CUDA cores = 84 GA102 SMs of 128)",
             "flops": "NVIDIA A40 datasheet (dense column; the sparse one is twice)",
             "memory_bandwidth": "NVIDIA A40 datasheet: 696 GB/s GDDR6",
             "l2_bytes": "NVIDIA Ampere GA102 GPU Architecture whitepaper: 6144 KB L2"},
)  # fmt: skip
RTX_A6000 = _nv(
    "RTX A6000", (8, 6), 84, "PCIe 4.0 x16", arch="Ampere", segment="workstation",
    aliases=("rtx a6000", "rtx-a6000", "a6000"),
    flops=peaks(vector_fp32=38.7, tensor_tf32=77.4, tensor_fp16_bf16=154.8, tensor_int8=309.7),
    memory_bandwidth=768e9, memory_bytes=48 * GIB, l2_bytes=6 * 2**20,
    sources={"sms": "NVIDIA RTX A6000 datasheet (10752 CUDA cores = 84 SMs)",
             "flops": "NVIDIA Ampere GA102 GPU Architecture whitepaper, RTX A6000 column: FP16/BF16 tensor with"
                      " FP32 accumulate 154.8, TF32 77.4, INT8 309.7 (dense; = the datasheet's 309.7 TFLOPS"
                      " 'Tensor Performance' with sparsity halved); FP32 38.7 (datasheet)",
             "memory_bandwidth": "NVIDIA RTX A6000 datasheet: 768 GB/s GDDR6",
             "l2_bytes": "NVIDIA Ampere GA102 GPU Architecture whitepaper: 6144 KB L2"},
)  # fmt: skip
RTX_3090 = _nv(
    "GeForce RTX 3090", (8, 6), 82, "PCIe 4.0 x16", arch="Ampere", segment="GeForce",
    aliases=("rtx 3090", "rtx3090", "3090"),
    flops=peaks(vector_fp32=35.6, tensor_tf32=35.6, tensor_fp16_bf16=71, tensor_int8=284),
    memory_bandwidth=936e9, memory_bytes=24 * GIB, l2_bytes=6 * 2**20,
    sources={"sms": "NVIDIA Ampere GA102 GPU Architecture whitepaper (RTX 3090: 82 SMs)",
             "flops": "NVIDIA Ampere GA102 GPU Architecture whitepaper, RTX 3090 column, dense: FP16/BF16 tensor"
                      " with FP32 accumulate (what PyTorch uses) 71, TF32 35.6, INT8 284, FP32 35.6",
             "memory_bandwidth": "NVIDIA Ampere GA102 whitepaper: 936 GB/s GDDR6X",
             "l2_bytes": "NVIDIA Ampere GA102 GPU Architecture whitepaper: 6144 KB L2"},
)  # fmt: skip

# --- Ada Lovelace ----------------------------------------------------------------------------------------

_ADA_L2_96MB = "NVIDIA Ada Lovelace architecture whitepaper: 96 MB L2 on the AD102 data-centre/pro parts"
L40S = _nv(
    "L40S", (8, 9), 142, "PCIe 4.0 x16", arch="Ada", aliases=("l40s", "nvidia l40s"),
    flops=peaks(vector_fp32=91.6, tensor_tf32=183, tensor_fp16_bf16=362.05, tensor_fp8=733, tensor_int8=733),
    memory_bandwidth=864e9, memory_bytes=48 * GIB, l2_bytes=96 * 2**20,
    sources={"sms": "NVIDIA L40S datasheet (142 third-generation RT cores, one per SM)",
             "flops": "NVIDIA L40S datasheet (dense figures; the 'with sparsity' ones are twice)",
             "memory_bandwidth": "NVIDIA L40S datasheet: 864 GB/s GDDR6",
             "l2_bytes": _ADA_L2_96MB},
)  # fmt: skip
L40 = _nv(
    "L40", (8, 9), 142, "PCIe 4.0 x16", arch="Ada", aliases=("l40", "nvidia l40"),
    flops=peaks(vector_fp32=90.5, tensor_tf32=90.5, tensor_fp16_bf16=181.05, tensor_fp8=362, tensor_int8=362),
    memory_bandwidth=864e9, memory_bytes=48 * GIB, l2_bytes=96 * 2**20,
    sources={"sms": "NVIDIA L40 datasheet (18176 CUDA cores = 142 SMs)",
             "flops": "NVIDIA L40 datasheet (dense figures; the 'with sparsity' ones are twice)",
             "memory_bandwidth": "NVIDIA L40 datasheet: 864 GB/s GDDR6",
             "l2_bytes": _ADA_L2_96MB},
)  # fmt: skip
L4 = _nv(
    "L4", (8, 9), 58, "PCIe 4.0 x16", arch="Ada", aliases=("l4", "nvidia l4"),
    flops=peaks(vector_fp32=30.3, tensor_tf32=60, tensor_fp16_bf16=121, tensor_fp8=242.5, tensor_int8=242.5),
    memory_bandwidth=300e9, memory_bytes=24 * GIB, l2_bytes=48 * 2**20,
    sources={"sms": "NVIDIA L4 datasheet (7424 CUDA cores = 58 SMs)",
             "flops": "NVIDIA L4 Tensor Core GPU datasheet; " + NV_DENSE,
             "memory_bandwidth": "NVIDIA L4 datasheet: 300 GB/s GDDR6",
             "l2_bytes": "NVIDIA Ada Lovelace architecture whitepaper (AD104: 48 MB L2)"},
)  # fmt: skip
RTX_6000_ADA = _nv(
    "RTX 6000 Ada", (8, 9), 142, "PCIe 4.0 x16", arch="Ada", segment="workstation",
    aliases=("rtx 6000 ada", "rtx 6000 ada generation", "rtx6000 ada"),
    # dense FP8 = the datasheet's 1,457 (with sparsity) / 2; 16-bit at half that, TF32 at a quarter
    flops=peaks(vector_fp32=91.1, tensor_fp8=728.5, tensor_fp16_bf16=364.25, tensor_tf32=182.125),
    memory_bandwidth=960e9, memory_bytes=48 * GIB, l2_bytes=96 * 2**20,
    sources={"sms": "NVIDIA RTX 6000 Ada Generation datasheet (18176 CUDA cores = 142 SMs)",
             "flops": "NVIDIA RTX 6000 Ada datasheet: FP32 91.1 TFLOPS; 'Tensor Performance' 1,457 TFLOPS (FP8"
                      " with sparsity) halved for dense FP8, FP16/BF16 at half the FP8 rate and TF32 at a quarter"
                      " (Ada tensor-core ratios, Ada Lovelace architecture whitepaper); derived, not printed",
             "memory_bandwidth": "NVIDIA RTX 6000 Ada datasheet: 960 GB/s GDDR6",
             "l2_bytes": _ADA_L2_96MB},
)  # fmt: skip
RTX_4090 = _nv(
    "GeForce RTX 4090", (8, 9), 128, "PCIe 4.0 x16", arch="Ada", segment="GeForce",
    aliases=("rtx 4090", "rtx4090", "4090"),
    flops=peaks(vector_fp32=82.6, tensor_tf32=82.6, tensor_fp16_bf16=165.2, tensor_fp8=330.3, tensor_int8=660.6),
    memory_bandwidth=1008e9, memory_bytes=24 * GIB, l2_bytes=72 * 2**20,
    sources={"sms": "NVIDIA Ada Lovelace architecture whitepaper (RTX 4090: 128 SMs)",
             "flops": "NVIDIA Ada Lovelace architecture whitepaper, RTX 4090 column, dense: FP16/BF16 tensor with"
                      " FP32 accumulate 165.2, FP8 with FP32 accumulate 330.3, TF32 82.6, INT8 660.6, FP32 82.6",
             "memory_bandwidth": "NVIDIA Ada Lovelace whitepaper: 1008 GB/s GDDR6X",
             "l2_bytes": "NVIDIA Ada Lovelace architecture whitepaper: 72 MB L2 on the RTX 4090"},
)  # fmt: skip

# --- Hopper ----------------------------------------------------------------------------------------------

_H100_L2 = 5120 * 1.755e9
_H100_L2_SOURCE = (
    "Ultrasonics Sonochemistry 99 (2023) 106546, table 3 (hardware features of V100/A100/H100): H100 L2 cache"
    " bandwidth 8,986 GB/s = 5120 bytes/clk at 1755 MHz; NVIDIA publishes no Hopper L2 figure, and the SXM5"
    " boosts higher (to 1980 MHz), so this is a lower bound there"
)
H100_SXM5 = _nv(
    "H100 SXM5", (9, 0), 132, "PCIe 5.0 x16", arch="Hopper", copy_engines=3,
    aliases=("h100", "h100-sxm", "h100 sxm", "h100 80gb hbm3", "h100-sxm5-80gb", "h100 sxm5"),
    flops=peaks(vector_fp64=33.5, tensor_fp64=66.9, vector_fp32=66.9, tensor_tf32=494.7, tensor_fp16_bf16=989.4,
                tensor_fp8=1978.9, tensor_int8=1978.9),
    memory_bandwidth=3.35e12, memory_bytes=80 * GIB, l2_bytes=50 * 2**20, l2_bandwidth=_H100_L2,
    sources={
        "sms": "NVIDIA H100 Tensor Core GPU Architecture whitepaper (132 SMs on SXM5)",
        "copy_engines": "published deviceQuery output of an NVIDIA H100 80GB HBM3 (CUDA 12.5): 'Yes with 3 copy"
                        " engine(s)'",
        "flops": "NVIDIA H100 Tensor Core GPU Architecture whitepaper, H100 SXM5 column (dense figures at the"
                 " 1830 MHz boost; the datasheet rounds them and doubles the tensor ones 'with sparsity')",
        "memory_bandwidth": "NVIDIA H100 datasheet, SXM: 3.35 TB/s HBM3",
        "l2_bytes": "NVIDIA H100 datasheet / Hopper whitepaper: 50 MB L2",
        "l2_bandwidth": _H100_L2_SOURCE,
    },
)  # fmt: skip
_AS_H100 = {"copy_engines": "as H100 SXM5 (same GH100 die)"}
H100_PCIE = _variant(
    H100_SXM5, "H100 PCIe", ("h100-pcie", "h100 pcie", "h100 pcie 80gb"),
    _AS_H100 | {"sms": "NVIDIA H100 Tensor Core GPU Architecture whitepaper (114 SMs on PCIe)",
                "flops": "NVIDIA H100 Tensor Core GPU datasheet, PCIe column; " + NV_DENSE,
                "memory_bandwidth": "NVIDIA H100 datasheet, PCIe: 2.0 TB/s HBM2e"},
    sms=114, memory_bandwidth=2.0e12,
    flops=peaks(vector_fp64=25.6, tensor_fp64=51.2, vector_fp32=51.2, tensor_tf32=378, tensor_fp16_bf16=756,
                tensor_fp8=1513, tensor_int8=1513),
)  # fmt: skip
_NVL_PEAKS = peaks(vector_fp64=30, tensor_fp64=60, vector_fp32=60) | halved(
    tensor_tf32=835, tensor_fp16_bf16=1671, tensor_fp8=3341, tensor_int8=3341
)  # fmt: skip
H100_NVL = _variant(
    H100_SXM5, "H100 NVL", ("h100 nvl", "h100-nvl", "h100 nvl 94gb"),
    _AS_H100 | {"sms": "assumed 132 as H100 SXM5: the H100 NVL datasheet gives no SM count",
                "flops": "NVIDIA H100 datasheet, H100 NVL column (per GPU: FP64 30, FP64 tensor 60, FP32 60);"
                         " " + NV_DENSE,
                "memory_bandwidth": "NVIDIA H100 datasheet, H100 NVL: 94 GB HBM3, 3.9 TB/s"},
    flops=_NVL_PEAKS, memory_bandwidth=3.9e12, memory_bytes=94 * GB,
)  # fmt: skip
H200 = _variant(
    H100_SXM5, "H200", ("h200", "h200 sxm", "nvidia h200", "h200 141gb hbm3e"),
    _AS_H100 | {"sms": "NVIDIA H200 datasheet (same GH100 configuration as H100 SXM5: 132 SMs)",
                "flops": "NVIDIA H200 datasheet, SXM column; " + NV_DENSE,
                "memory_bandwidth": "NVIDIA H200 datasheet: 4.8 TB/s HBM3e"},
    memory_bandwidth=4.8e12, memory_bytes=141 * GB,
)  # fmt: skip
H200_NVL = _variant(
    H100_SXM5, "H200 NVL", ("h200 nvl", "h200-nvl"),
    _AS_H100 | {"sms": "assumed 132 as H200 SXM: the H200 NVL datasheet gives no SM count",
                "flops": "NVIDIA H200 datasheet, H200 NVL column (FP64 30, FP64 tensor 60, FP32 60); " + NV_DENSE,
                "memory_bandwidth": "NVIDIA H200 datasheet, H200 NVL: 141 GB HBM3e, 4.8 TB/s"},
    flops=_NVL_PEAKS, memory_bandwidth=4.8e12, memory_bytes=141 * GB,
)  # fmt: skip
H20 = _variant(
    H100_SXM5, "H20", ("h20", "nvidia h20"),
    _AS_H100 | {"sms": "78 SMs as reported by a Geekbench 6 run of the H20 (press reports; no NVIDIA datasheet"
                       " is public)",
                "flops": "press reports of NVIDIA's H20 specification (no public NVIDIA datasheet): dense FP16/BF16"
                         " 148, FP8/INT8 296, TF32 74, FP32 44, FP64 1 TFLOP/s",
                "memory_bandwidth": "press reports of NVIDIA's H20 specification: 96 GB HBM3, 4.0 TB/s",
                "l2_bandwidth": "not known for the H20 (fewer SMs and a different clock from H100)"},
    sms=78, memory_bandwidth=4.0e12, memory_bytes=96 * GB, l2_bandwidth=None,
    flops=peaks(vector_fp64=1, vector_fp32=44, tensor_tf32=74, tensor_fp16_bf16=148, tensor_fp8=296,
                tensor_int8=296),
)  # fmt: skip
_C2C = {"link": "NVLink-C2C", "link_bandwidth": 450e9}
_C2C_SOURCE = "NVLink-C2C 900 GB/s total, 450 GB/s per direction"
GH200 = _variant(
    H100_SXM5, "GH200", ("gh200", "grace hopper", "gh200 480gb"),
    _AS_H100 | {"sms": "NVIDIA GH200 Grace Hopper Superchip datasheet (H100 with 132 SMs)",
                "link_bandwidth": "GH200 datasheet: " + _C2C_SOURCE,
                "flops": "GH200 datasheet (the H100 SXM5 rates); " + NV_DENSE,
                "memory_bandwidth": "GH200 datasheet: 4 TB/s HBM3 (96 GB)"},
    memory_bandwidth=4.0e12, memory_bytes=96 * GIB, **_C2C,
)  # fmt: skip
GH200_144GB = _variant(
    GH200, "GH200 144GB", ("gh200 144gb", "gh200 144gb hbm3e", "gh200 624gb"),
    {"memory_bandwidth": "GH200 datasheet: 4.9 TB/s HBM3e (144 GB)"},
    memory_bandwidth=4.9e12, memory_bytes=144 * GIB,
)  # fmt: skip

# --- Blackwell -------------------------------------------------------------------------------------------

B200 = _nv(
    "B200", (10, 0), 148, "PCIe 5.0 x16", arch="Blackwell", copy_engines=3, aliases=("b200", "nvidia b200"),
    flops=peaks(vector_fp64=37, tensor_fp64=37, vector_fp32=75, tensor_tf32=1100, tensor_fp16_bf16=2250,
                tensor_fp8=4500, tensor_int8=4500),
    memory_bandwidth=7.7e12, memory_bytes=180 * GB,
    sources={"sms": "148 SMs per third-party spec databases (hmc-tech's B200 entry); NVIDIA's datasheets give no"
                    " SM count",
             "copy_engines": "assumed as H100 SXM5",
             "link_bandwidth": "NVIDIA HGX B200 datasheet: PCIe Gen5 x16, 128 GB/s (64 GB/s per direction raw,"
                               " 63 GB/s after 128b/130b encoding)",
             "flops": "NVIDIA HGX B200 datasheet, per GPU (FP64/FP64 tensor 37, FP32 75); " + NV_DENSE,
             "memory_bandwidth": "NVIDIA HGX B200 datasheet, per GPU: 180 GB HBM3E, 7.7 TB/s"},
)  # fmt: skip
GB200 = _variant(
    B200, "GB200", ("gb200", "gb200 nvl72", "grace blackwell"),
    {"sms": "assumed 148 as B200 (the GB200 NVL72 datasheet gives no SM count)",
     "link_bandwidth": "GB200 NVL72 datasheet: " + _C2C_SOURCE,
     "flops": "NVIDIA GB200 NVL72 datasheet, individual Blackwell GPU (FP64 40, FP32 80); " + NV_DENSE,
     "memory_bandwidth": "NVIDIA GB200 NVL72 datasheet, per GPU: 186 GB HBM3E, 8 TB/s"},
    flops=peaks(vector_fp64=40, tensor_fp64=40, vector_fp32=80, tensor_tf32=1250, tensor_fp16_bf16=2500,
                tensor_fp8=5000, tensor_int8=5000),
    memory_bandwidth=8.0e12, memory_bytes=186 * GB, **_C2C,
)  # fmt: skip
_ULTRA_SMS = "NVIDIA technical blog 'Inside NVIDIA Blackwell Ultra' (160 SMs)"
B300 = _nv(
    "B300", (10, 3), 160, "PCIe 6.0 x16", arch="Blackwell", copy_engines=3,
    aliases=("b300", "nvidia b300", "blackwell ultra"),
    flops=peaks(vector_fp64=1.25, vector_fp32=75, tensor_tf32=1100, tensor_fp16_bf16=2250, tensor_fp8=4500,
                tensor_int8=150),
    memory_bandwidth=7.7e12, memory_bytes=270 * GB,
    sources={"sms": _ULTRA_SMS, "copy_engines": "assumed as H100 SXM5",
             "per-SM limits": cc_source((10, 3)) + " (B300 is 10.3)",
             "flops": "NVIDIA HGX B300 datasheet per GPU, dense (the 'with sparsity' values halved, as tabulated"
                      " in Verda's 'GB300 NVL72 architecture' post): FP8 4.5 PF, FP16/BF16 2.25 PF, TF32 1.1 PF,"
                      " INT8 0.15 POPS, FP32 75 TF; FP64 1.25 TF",
             "memory_bandwidth": "NVIDIA HGX B300 datasheet, per GPU: 270 GB HBM3E, 7.7 TB/s"},
)  # fmt: skip
GB300 = _variant(
    B300, "GB300", ("gb300", "gb300 nvl72"),
    {"sms": _ULTRA_SMS, "link_bandwidth": "GB300 NVL72 datasheet: " + _C2C_SOURCE,
     "flops": "NVIDIA GB300 NVL72 datasheet per GPU, dense (the 'with sparsity' values halved, as tabulated in"
              " Verda's 'GB300 NVL72 architecture' post): FP8 5 PF, FP16/BF16 2.5 PF, TF32 1.25 PF, INT8 0.165"
              " POPS, FP32 80 TF; FP64 1.25 TF",
     "memory_bandwidth": "NVIDIA GB300 NVL72 datasheet, per GPU: 279 GB HBM3E, 8 TB/s"},
    flops=peaks(vector_fp64=1.25, vector_fp32=80, tensor_tf32=1250, tensor_fp16_bf16=2500, tensor_fp8=5000,
                tensor_int8=165),
    memory_bandwidth=8.0e12, memory_bytes=279 * GB, **_C2C,
)  # fmt: skip
RTX_PRO_6000 = _nv(
    "RTX PRO 6000 Blackwell", (12, 0), 188, "PCIe 5.0 x16", arch="Blackwell", segment="workstation",
    aliases=("rtx pro 6000", "rtx pro 6000 blackwell", "rtx pro 6000 blackwell workstation edition",
             "rtx pro 6000 blackwell server edition"),
    # dense FP4 = the datasheet's 4,000 AI TOPS (with sparsity) / 2 = 2,000; FP8 1/2, 16-bit 1/4, TF32 1/8 of it
    flops=peaks(vector_fp32=125, tensor_fp8=1000, tensor_fp16_bf16=500, tensor_tf32=250),
    memory_bandwidth=1792e9, memory_bytes=96 * GIB, l2_bytes=128 * 2**20,
    sources={"sms": "NVIDIA RTX PRO 6000 Blackwell datasheet (24,064 CUDA cores = 188 SMs)",
             "flops": "NVIDIA RTX PRO 6000 Blackwell datasheet: FP32 125 TFLOPS; 4,000 'AI TOPS' (FP4 with"
                      " sparsity) halved for dense FP4, then FP8 at 1/2, FP16/BF16 at 1/4 and TF32 at 1/8 of"
                      " FP4 (Blackwell tensor-core ratios); derived, not printed",
             "memory_bandwidth": "NVIDIA RTX PRO 6000 Blackwell datasheet: 1,792 GB/s GDDR7 (96 GB)",
             "l2_bytes": "NVIDIA RTX PRO 6000 Blackwell announcements: the full GB202 128 MB L2"},
)  # fmt: skip
RTX_5090 = _nv(
    "GeForce RTX 5090", (12, 0), 170, "PCIe 5.0 x16", arch="Blackwell", segment="GeForce",
    aliases=("rtx 5090", "rtx5090", "5090"),
    flops=peaks(vector_fp32=104.8, tensor_tf32=104.8, tensor_fp16_bf16=209.5, tensor_fp8=419, tensor_int8=838),
    memory_bandwidth=1792e9, memory_bytes=32 * GIB, l2_bytes=96 * 2**20,
    sources={"sms": "NVIDIA RTX Blackwell GPU architecture whitepaper (RTX 5090: 170 SMs)",
             "flops": "NVIDIA RTX Blackwell GPU architecture whitepaper, RTX 5090 column, dense: FP16/BF16 tensor"
                      " with FP32 accumulate 209.5, FP8 with FP32 accumulate 419, TF32 104.8, INT8 838, FP32"
                      " 104.8",
             "memory_bandwidth": "NVIDIA RTX 5090 specifications: 1,792 GB/s GDDR7",
             "l2_bytes": "NVIDIA RTX Blackwell whitepaper: 96 MB L2 on the RTX 5090"},
)  # fmt: skip

KNOWN: tuple[GPU, ...] = (
    GTX_950, QUADRO_GP100, V100_SXM2, V100_SXM2_16GB, V100_PCIE,
    A100_SXM4_80GB, A100_SXM4_40GB, A100_PCIE_80GB, A100_PCIE_40GB, A30, A10, A40, RTX_A6000, RTX_3090,
    L40S, L40, L4, RTX_6000_ADA, RTX_4090,
    H100_SXM5, H100_PCIE, H100_NVL, H200, H200_NVL, H20, GH200, GH200_144GB,
    B200, GB200, B300, GB300, RTX_PRO_6000, RTX_5090,
)  # fmt: skip
