"""The speed-of-light cost model and roofline arithmetic against hand-computed values, and the device
table's peaks against the datasheets (dense, never the 'with sparsity' figures)."""

from __future__ import annotations

import numpy as np
import pytest

from gpuan import devices
from gpuan.sol.costs import MODELS, Call, causal_pairs, cost
from gpuan.sol.roofs import datasheet, peak_key
from gpuan.sol.schemas import SIGNATURES, generate, outputs
from gpuan.sol.score import BOUNDS, LATENCY_NS, efficiency, roofline

F32, BF16 = "float", "c10::BFloat16"


def c(name, dims, types, concrete=None):
    return cost(name, Call(dims, types, concrete or [""] * len(dims)))


def test_gemm_with_bias():
    # addmm(bias[5], a[4,3], b[3,5]): F = 2·4·5·3 + 4·5; B = (4·3 + 3·5 + 4·5 + 5)·4
    got = c("aten::addmm", [[5], [4, 3], [3, 5], [], []], [F32, F32, F32, "Scalar", "Scalar"])
    assert (got.flops, got.bytes, got.category, got.dtype) == (140, 208, "gemm", "fp32")


def test_linear_flattens_leading_dims():
    # x[2,7,3] · W[5,3]ᵀ + b[5]: M = 14
    got = c("aten::linear", [[2, 7, 3], [5, 3], [5]], [F32, F32, F32])
    assert (got.flops, got.bytes) == (2 * 14 * 5 * 3 + 14 * 5, (42 + 15 + 70 + 5) * 4)


def test_bmm_counts_the_batch():
    got = c("aten::bmm", [[8, 4, 3], [8, 3, 5]], [BF16, BF16])
    assert (got.flops, got.bytes, got.dtype) == (8 * 2 * 4 * 5 * 3, 8 * (12 + 15 + 20) * 2, "bf16")


def test_matmul_broadcast_operand_read_once():
    got = c("aten::matmul", [[2, 4, 3], [3, 5]], [F32, F32])
    assert (got.flops, got.bytes) == (2 * 2 * 4 * 5 * 3, (24 + 15 + 40) * 4)


def test_scaled_mm_operands_are_one_byte():
    got = c("aten::_scaled_mm", [[16, 32], [32, 8], [], [], [], [], [], []],
            ["c10::Float8_e4m3fn", "c10::Float8_e4m3fn", F32, F32, "", "", "Scalar", "Scalar"],
            ["", "", "", "", "", "", "15", "False"])  # fmt: skip
    assert (got.flops, got.bytes, got.dtype) == (2 * 16 * 8 * 32, 16 * 32 + 32 * 8 + 16 * 8 * 2, "fp8")


@pytest.mark.parametrize(
    "name, args, out_elems",
    [
        # convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
        ("aten::convolution", (["[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"], 3), 4 * 8 * 8),
        ("aten::convolution", (["[2, 2]", "[0, 0]", "[1, 1]", "False", "[0, 0]", "1"], 3), 4 * 3 * 3),
        # cudnn_convolution(input, weight, padding, stride, dilation, groups, ...): padding before stride
        ("aten::cudnn_convolution", (["[1, 1]", "[2, 2]", "[1, 1]", "1", "False", "False", "True"], 2), 4 * 4 * 4),
    ],
)
def test_convolution(name, args, out_elems):
    scalars, first = args
    dims = [[1, 3, 8, 8], [4, 3, 3, 3]] + ([[4]] if first == 3 else []) + [[]] * len(scalars)
    types = [F32, F32] + ([F32] if first == 3 else []) + ["ScalarList"] * len(scalars)
    got = c(name, dims, types, [""] * first + scalars)
    # F = 2 · output elements · (C_in · k_h · k_w); B = input + weight + output
    assert got.flops == 2 * out_elems * 27
    assert got.bytes == (3 * 64 + 4 * 27 + out_elems) * 4
    assert got.category == "conv"


def test_convolution_without_scalar_arguments_is_not_modelled():
    assert c("aten::cudnn_convolution", [[1, 3, 8, 8], [4, 3, 3, 3]], [F32, F32]) is None


def brute_force_pairs(n_q, n_kv, align):
    offset = n_kv - n_q if align == "bottom-right" else 0
    return int(np.tril(np.ones((n_q, n_kv), bool), k=offset).sum())


@pytest.mark.parametrize("n_q, n_kv", [(4, 4), (1, 1), (2, 5), (5, 2), (1, 48), (7, 3), (128, 128)])
@pytest.mark.parametrize("align", ["top-left", "bottom-right"])
def test_causal_pairs_match_the_mask(n_q, n_kv, align):
    assert causal_pairs(n_q, n_kv, align) == brute_force_pairs(n_q, n_kv, align)
    if n_q == n_kv:
        assert causal_pairs(n_q, n_kv, align) == n_q * n_kv - n_q * (n_q - 1) // 2


def sdpa(q, k, v, causal, name="aten::_scaled_dot_product_flash_attention", dtype=BF16):
    dims = [q, k, v, [], [], [], []]
    return c(
        name, dims, [dtype] * 3 + ["Scalar", "Scalar", "Scalar", "Scalar"], ["", "", "", "0.", str(causal), "False", ""]
    )


def test_causal_sdpa_square():
    # B=1, H=2, N=4, d=8: visible pairs 16 − 6 = 10; F = 2·1·2·10·(8+8); B = (Q + K + V + O)·2
    got = sdpa([1, 2, 4, 8], [1, 2, 4, 8], [1, 2, 4, 8], True)
    assert (got.flops, got.bytes, got.category) == (2 * 2 * 10 * 16, 4 * (2 * 4 * 8) * 2, "attention")


def test_causal_sdpa_fewer_queries_than_keys():
    # PyTorch's is_causal aligns the mask top-left: query i sees keys 0..i, so 2 queries see 1 + 2 keys
    got = sdpa([1, 1, 2, 8], [1, 1, 5, 8], [1, 1, 5, 8], True)
    assert got.flops == 2 * 3 * 16
    assert got.bytes == (2 * 8 + 5 * 8 + 5 * 8 + 2 * 8) * 2


def test_efficient_attention_bottom_right_mask():
    # _efficient_attention_forward: [B, N, H, d] layout; custom_mask_type 2 = causal from the bottom right
    dims = [[1, 2, 1, 8], [1, 5, 1, 8], [1, 5, 1, 8]] + [[]] * 7
    got = c("aten::_efficient_attention_forward", dims, [BF16] * 3 + ["Scalar"] * 7, [""] * 9 + ["2"])
    assert got.flops == 2 * 9 * 16


def test_gqa_reads_kv_heads_only():
    got = sdpa([1, 8, 4, 16], [1, 2, 4, 16], [1, 2, 4, 16], False)
    assert got.flops == 2 * 8 * 16 * 32
    assert got.bytes == (8 * 4 * 32 + 2 * 4 * 32) * 2


def test_attention_backward_is_two_and_a_half_forwards():
    fwd = sdpa([2, 4, 64, 32], [2, 4, 64, 32], [2, 4, 64, 32], True)
    dims = [[2, 4, 64, 32]] * 5 + [[2, 4, 64]] + [[]] * 9
    concrete = [""] * 11 + ["True"] + [""] * 3
    bwd = c("aten::_scaled_dot_product_flash_attention_backward", dims, [BF16] * 5 + [F32] + ["Scalar"] * 9, concrete)
    assert bwd.flops == 2.5 * fwd.flops and bwd.bytes == 2 * fwd.bytes


def test_rms_norm():
    # x[2,3,8], w[8]: F = 4 per element; B = (in + out)·2 + w·2
    got = c("aten::rms_norm", [[2, 3, 8], [], [8], []], [BF16, "ScalarList", BF16, "Scalar"])
    assert (got.flops, got.bytes, got.category) == (4 * 48, (2 * 48 + 8) * 2, "norm")


def test_embedding():
    # 10 rows of 16 fp32 gathered by int64 indices: rows + indices + output, no FLOPs
    got = c("aten::embedding", [[100, 16], [2, 5], [], [], []], [F32, "long int", "Scalar", "Scalar", "Scalar"])
    assert (got.flops, got.bytes, got.category) == (0, 10 * 16 * 4 + 10 * 8 + 10 * 16 * 4, "embedding")


def test_elementwise_broadcast_and_bad_shapes():
    got = c("aten::add", [[4, 1, 8], [3, 8], []], [F32, F32, "Scalar"])
    assert (got.flops, got.bytes) == (96, (32 + 24 + 96) * 4)
    assert c("aten::pow", [[256, 10], [256], []], [F32, F32, "Scalar"]) is None  # not broadcastable
    assert c("aten::no_such_op", [[4]], [F32]) is None
    assert c("aten::mm", [[], []], ["", ""]) is None


# --- devices: dense peaks ---------------------------------------------------------------------------------

#: BF16 tensor-core figures the datasheets print "with sparsity" (TFLOP/s); the L40S datasheet's pair
#: (362.05 dense, 733 sparse) is not exactly a factor of two, so it is checked against the spec table alone
SPARSE_BF16 = {"H100 SXM5": 1979, "H100 PCIe": 1513, "H200": 1979, "A100-SXM4-80GB": 624, "B200": 4500}


@pytest.mark.parametrize("name, sparse", SPARSE_BF16.items())
def test_tensor_core_peaks_are_dense(name, sparse):
    gpu = devices.lookup(name)
    assert gpu.flops["tensor:bf16"] == pytest.approx(sparse * 1e12 / 2, rel=2e-3)
    assert gpu.flops["tensor:bf16"] == gpu.flops["tensor:fp16"]
    if "tensor:fp8" in gpu.flops:
        assert gpu.flops["tensor:fp8"] == pytest.approx(2 * gpu.flops["tensor:bf16"], rel=2e-2)
    assert {"flops", "memory_bandwidth"} <= set(gpu.sources)


def test_h100_bf16_is_not_the_sparse_figure():
    # the widely copied 1979 TFLOPS makes GEMMs look memory bound
    assert devices.lookup("H100").flops["tensor:bf16"] == pytest.approx(989.4e12)
    assert devices.lookup("H100").memory_bandwidth == 3.35e12


@pytest.mark.parametrize(
    "device, category, dtype, tf32, key",
    [
        ("H100", "gemm", "bf16", False, "tensor:bf16"),
        ("H100", "gemm", "fp32", False, "vector:fp32"),
        ("H100", "gemm", "fp32", True, "tensor:tf32"),
        ("H100", "conv", "fp32", False, "tensor:tf32"),
        ("H100", "elementwise", "bf16", False, "vector:fp32"),
        ("V100", "gemm", "bf16", False, "tensor:fp16"),
        ("MI250", "gemm", "fp32", False, "tensor:fp32"),
        ("A100", "gemm", "fp8", False, "tensor:fp16"),
    ],
)
def test_peak_unit_by_category_and_dtype(device, category, dtype, tf32, key):
    assert peak_key(datasheet(devices.lookup(device), "t"), category, dtype, tf32) == key


def test_amd_generic_name_identified_by_cu_count():
    props = {"name": "AMD Radeon Graphics", "numSms": 104, "totalGlobalMem": 68702699520}
    assert devices.from_properties(props, "t").name == "MI250 GCD / MI210"


def test_a100_memory_size_picks_the_part():
    props = {"name": "NVIDIA A100-SXM4-80GB", "numSms": 108, "totalGlobalMem": 85_000_000_000}
    assert devices.from_properties(props, "t").memory_bandwidth == 2.039e12
    props = {"name": "NVIDIA A100-PG509-200", "numSms": 108, "totalGlobalMem": 42_297_524_224}
    assert devices.from_properties(props, "t").memory_bandwidth == 1.555e12


# --- roofline arithmetic ----------------------------------------------------------------------------------


def test_roofline_columns():
    flops = np.array([2e12, 1e9, 1e3, 5e9])
    nbytes = np.array([1e9, 1e9, 1e3, 1e6])
    peak = np.array([1e15, 1e15, 1e15, np.nan])
    cols = roofline(flops, nbytes, peak, np.full(4, 1e12))
    # compute 2 ms vs memory 1 ms; memory 1 ms vs compute 1 us; 1 ns: latency; no peak: unmodelled
    assert cols["estimated_ns"][:3] == pytest.approx([2e6, 1e6, 1.0])
    assert list(cols["bound"]) == [0, 1, 2, 3]
    assert cols["intensity"][0] == 2000 and LATENCY_NS > cols["estimated_ns"][2]
    scores = efficiency(cols["estimated_ns"], np.array([4e6, 2e6, 5e3, 1e6]))
    assert scores["efficiency"][:2] == pytest.approx([0.5, 0.5]) and scores["lost_ns"][0] == pytest.approx(2e6)
    assert np.isnan(scores["efficiency"][3]) and not scores["model_error"].any()
    assert np.isnan(efficiency(np.array([3.0]), np.array([0]))["efficiency"][0])  # not measured
    # a clock that records whole microseconds: the efficiency allows the missing fraction
    assert efficiency(np.array([2e6]), np.array([2e6 - 500]))["model_error"][0]
    again = efficiency(np.array([2e6]), np.array([2e6 - 500]), resolution_ns=1000)
    assert again["efficiency"][0] < 1 and not again["model_error"][0]


def test_nll_loss_reads_one_value_per_target():
    # nll_loss_forward(log_probs[8192, 32000], target[8192]): 8192 bf16 gathers + int64 targets + the loss
    got = c("aten::nll_loss_forward", [[8192, 32000], [8192], [], [], []], [BF16, "long int", "", "Scalar", "Scalar"])
    assert (got.flops, got.bytes) == (8192, 8192 * 2 + 8192 * 8 + 2)
    back = c("aten::nll_loss_backward", [[], [8192, 32000], [8192], [], [], [], []],
             [BF16, BF16, "long int", "", "Scalar", "Scalar", BF16])  # fmt: skip
    assert back.bytes == 8192 * 2 + 8192 * 8 + 2


# --- out= variants ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, dims, types, outs",
    [
        ("aten::clamp_min", [[32, 256, 14, 14], [], [32, 256, 14, 14]], [F32, "Int", F32], 1),  # .out (PyTorch 1.9)
        ("aten::clamp_min", [[32, 256], []], [F32, "Scalar"], 0),
        ("aten::mul", [[4, 8], [], [4, 8]], [F32, "double", F32], 1),  # other: a wrapped Python number
        ("aten::mul", [[4, 8], [4, 8]], [F32, F32], 0),
        ("aten::add_", [[4, 8], [4, 8], []], [F32, F32, "Scalar"], 0),  # in place: self is read and written
        ("aten::threshold_backward", [[4], [4], [], [4]], [F32, F32, "Scalar", F32], 1),  # .grad_input
        ("aten::max", [[4, 8], []], [F32, F32], 0),  # max.other or max.unary_out: not told apart, kept
        ("aten::embedding", [[64, 32], [2, 16]], [F32, "long int"], 0),  # fewer arguments than any overload
        ("aten::mm", [[4, 8], [8, 2], [4, 2]], [BF16, BF16, BF16], 1),
    ],
)
def test_out_arguments_are_found_by_overload(name, dims, types, outs):
    assert outputs(name, dims, types) == outs


def test_out_variant_counts_its_output_once():
    # clamp_min.out(self, min, out=self) behind relu_: read once, write once
    got = c("aten::clamp_min", [[32, 256, 14, 14], [], [32, 256, 14, 14]], [F32, "Int", F32])
    assert got.bytes == 2 * 32 * 256 * 14 * 14 * 4


def modelled_names() -> list[str]:
    """Return the ``aten::`` names of every operator the cost model knows, plain and in-place."""
    return [f"aten::{k}{suffix}" for k in MODELS for suffix in ("", "_")]


def test_signature_table_is_pytorchs():
    pytest.importorskip("torch", reason="the table is generated from PyTorch's schemas")
    generated = generate(modelled_names())
    # on a new PyTorch, the message is the table to paste into gpuan/sol/schemas.py
    assert SIGNATURES == generated, "\n".join(f"    {name!r}: {kinds!r}," for name, kinds in generated.items())


def test_hierarchical_l2_roof_reads_only_the_non_resident_bytes_from_dram():
    # 1 TB/s DRAM, 4 TB/s L2 of 10 MB. 8 MB of which 8 MB resident: L2 time 2 us; 8 MB with 2 MB resident:
    # 6 MB from DRAM, 6 us; 40 MB with 40 MB resident, capped at the L2's 10 MB: 30 us from DRAM; 8 MB with
    # nothing resident: DRAM 8 us; a compute-bound op with its input resident stays compute bound
    nbytes = np.array([8e6, 8e6, 40e6, 8e6, 8e6])
    flops = np.array([0, 0, 0, 0, 8e10])
    resident = np.array([8e6, 2e6, 40e6, 0, 8e6])
    cols = roofline(flops, nbytes, np.full(5, 1e15), 1e12, np, 10e6, 4e12, resident)
    assert cols["estimated_ns"] == pytest.approx([2e3, 6e3, 30e3, 8e3, 80e3])
    # the bound is the term that set the estimate
    assert [BOUNDS[b] for b in cols["bound"]] == ["latency", "memory", "memory", "memory", "compute"]
    assert list(cols["resident_bytes"]) == [8e6, 2e6, 10e6, 0, 8e6]
    big = roofline(np.zeros(1), np.array([80e6]), np.full(1, 1e15), 1e12, np, 100e6, 4e12, np.array([80e6]))
    assert BOUNDS[big["bound"][0]] == "memory (L2)" and big["estimated_ns"][0] == pytest.approx(20e3)
    # no L2 known: the resident bytes change nothing
    flat = roofline(flops, nbytes, np.full(5, 1e15), 1e12, np, 0, 0.0, resident)
    assert flat["estimated_ns"][:4] == pytest.approx([8e3, 8e3, 40e3, 8e3]) and not flat["resident_bytes"].any()
