"""Synthetic LLM-inference kernel traces, built straight as a :class:`gpuan.trace.table.Trace`.

A vLLM-style serving run of a Llama-like model on an H100: one prefill pass (embedding, ``layers``
prefill layers, final norm, lm_head and sampling) and then decode steps (embedding, ``layers`` decode
layers, final norm, lm_head, sampling), each decode step after an idle gap in which the host samples
and schedules the next one. Prefill and decode use other GEMM and attention kernels, as they do on a
real GPU (large-M tensor-core GEMMs and ``flash_fwd_kernel`` against small-M GEMMs and
``flash_fwd_splitkv_kernel``). A decoder layer repeats some names inside itself (three GEMMs of one
kernel, two norms, two residual adds), so layers have an inner structure too.

Optional disturbances: a share of decode steps gets one stray kernel (a fill) at a random position
inside the step, and a second compute stream runs a small side pattern (a copy and an increment per
decode step) that overlaps the main stream in time.

Nothing is rendered as JSON: a decode step is one array of name ids that is tiled, and every time is
numpy arithmetic over whole arrays, so ten million kernels take a few seconds. The second value
returned is the ground truth (where prefill, decode steps, layers and stray kernels are) to check
cycle detection against.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from gpuan.trace.kinds import KINDS
from gpuan.trace.table import Trace, build_table, dict_column, int_column

__all__ = ["MAIN_STREAM", "SIDE_STREAM", "llm_kernel_trace"]

MAIN_STREAM = 7
SIDE_STREAM = 20
DEVICE = 0

# ---------------------------------------------------------------------------------------------------
# Kernel names (as CUPTI reports them on an H100 for a bf16 Llama-style model served by vLLM)

_BF16 = "c10::BFloat16"
RMS_NORM = f"void vllm::rms_norm_kernel<{_BF16}>({_BF16}*, {_BF16} const*, {_BF16} const*, float, int, int)"
ROTARY = (
    f"void vllm::rotary_embedding_kernel<{_BF16}, true>(long const*, {_BF16}*, {_BF16}*, {_BF16} const*, int, "
    "long, long, int, int, int)"
)
KV_CACHE = (
    "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>("
    "__nv_bfloat16 const*, __nv_bfloat16 const*, __nv_bfloat16*, __nv_bfloat16*, long const*, long, long, long, "
    "int, int, int, float const*, float const*)"
)
SILU_MUL = (
    f"void vllm::act_and_mul_kernel<{_BF16}, &({_BF16} vllm::silu_kernel<{_BF16}>({_BF16} const&)), true>("
    f"{_BF16}*, {_BF16} const*, int)"
)
_ADD_ARR = "std::array<char*, 3ul>"
ADD = (
    f"void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<{_BF16}>, {_ADD_ARR} >(int, "
    f"at::native::CUDAFunctor_add<{_BF16}>, {_ADD_ARR})"
)
_CUTLASS_TAG = "cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8"
GEMM_DECODE = f"void cutlass::Kernel2<{_CUTLASS_TAG}>({_CUTLASS_TAG}::Params)"
GEMM_DECODE_UP = "ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x4_tn"
GEMM_PREFILL = (
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel"
    "__5x_cublas"
)
GEMM_PREFILL_UP = "nvjet_tst_192x192_64x4_2x1_v_bz_coopA_TNN"
LM_HEAD = (
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel"
    "__5x_cublas"
)
_FA_TRAITS = (
    "Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t, "
    "Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t> >"
)
_FA_TRAITS_PREFILL = (
    "Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, "
    "Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >"
)
FLASH_PREFILL = (
    f"void flash::flash_fwd_kernel<{_FA_TRAITS_PREFILL}, false, true, false, false, true, true, false, false>"
    "(flash::Flash_fwd_params)"
)
FLASH_SPLITKV = (
    f"void flash::flash_fwd_splitkv_kernel<{_FA_TRAITS}, false, false, false, false, true, true, false, false>"
    "(flash::Flash_fwd_params)"
)
FLASH_COMBINE = f"void flash::flash_fwd_splitkv_combine_kernel<{_FA_TRAITS}, 4, 3, false>(flash::Flash_fwd_params)"
_INDEX_ARGS = (
    f"at::cuda::detail::TensorInfo<{_BF16}, unsigned int>, at::cuda::detail::TensorInfo<{_BF16} const, unsigned "
    "int>, at::cuda::detail::TensorInfo<long const, unsigned int>, int, int, unsigned int, unsigned int, long"
)
EMBED_PREFILL = (
    f"void at::native::(anonymous namespace)::indexSelectLargeIndex<{_BF16}, long, unsigned int, 2, 2, -2, true>"
    f"({_INDEX_ARGS})"
)
EMBED_DECODE = (
    f"void at::native::(anonymous namespace)::indexSelectSmallIndex<{_BF16}, long, unsigned int, 2, 2, -2>"
    f"({_INDEX_ARGS})"
)
_COPY_LAMBDA = (
    "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{{lambda()#3}}::operator()() const"
    "::{{lambda()#{k}}}::operator()() const::{{lambda({t})#1}}"
)
_TO_FLOAT = _COPY_LAMBDA.format(k=7, t=_BF16)
TO_FLOAT = (
    f"void at::native::vectorized_elementwise_kernel<4, {_TO_FLOAT}, std::array<char*, 2ul> >(int, {_TO_FLOAT}, "
    "std::array<char*, 2ul>)"
)
_DIV = "at::native::BinaryFunctor<float, float, float, at::native::binary_internal::DivFunctor<float> >"
DIV_TEMPERATURE = (
    f"void at::native::vectorized_elementwise_kernel<4, {_DIV}, std::array<char*, 3ul> >(int, {_DIV}, "
    "std::array<char*, 3ul>)"
)
SOFTMAX = (
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, at::native::(anonymous "
    "namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)"
)
_ARGMAX_OP = "at::native::ReduceOp<float, at::native::ArgMaxOps<float>, unsigned int, long, 4>"
ARGMAX = f"void at::native::reduce_kernel<512, 1, {_ARGMAX_OP} >({_ARGMAX_OP})"
_COPY_LONG = _COPY_LAMBDA.format(k=4, t="long")
COPY_TOKENS = (
    f"void at::native::unrolled_elementwise_kernel<{_COPY_LONG}, std::array<char*, 2ul>, 4, "
    "TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, "
    "at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1> >(int, "
    f"{_COPY_LONG}, std::array<char*, 2ul>, TrivialOffsetCalculator<1, unsigned int>, "
    "TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, "
    "at::native::memory::StoreWithCast<1>)"
)
_COPY_INT = _COPY_LAMBDA.format(k=5, t="int")
SIDE_COPY = (
    f"void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<{_COPY_INT}>("
    f"at::TensorIteratorBase&, {_COPY_INT} const&)::{{lambda(int)#1}}>(int, at::native::gpu_kernel_impl_nocast<"
    f"{_COPY_INT}>(at::TensorIteratorBase&, {_COPY_INT} const&)::{{lambda(int)#1}})"
)
SIDE_INCREMENT = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctorOnSelf_add<long>, std::array<char*, "
    "2ul> >(int, at::native::CUDAFunctorOnSelf_add<long>, std::array<char*, 2ul>)"
)
STRAY_FILL = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >("
    "int, at::native::FillFunctor<float>, std::array<char*, 1ul>)"
)

# (name, base duration in ns) of each kernel of a layer or a block, in launch order. Decode: batch 32
# with ~1k tokens of context; prefill: 2,048 tokens.
DECODE_LAYER: tuple[tuple[str, int], ...] = (
    (RMS_NORM, 3_200),
    (GEMM_DECODE, 14_500),  # qkv_proj
    (ROTARY, 2_600),
    (KV_CACHE, 2_300),
    (FLASH_SPLITKV, 21_000),
    (FLASH_COMBINE, 3_400),
    (GEMM_DECODE, 9_800),  # o_proj
    (ADD, 2_100),
    (RMS_NORM, 3_200),
    (GEMM_DECODE_UP, 52_000),  # gate_up_proj
    (SILU_MUL, 3_600),
    (GEMM_DECODE, 27_000),  # down_proj
    (ADD, 2_100),
)
PREFILL_LAYER: tuple[tuple[str, int], ...] = (
    (RMS_NORM, 14_000),
    (GEMM_PREFILL, 160_000),
    (ROTARY, 21_000),
    (KV_CACHE, 12_000),
    (FLASH_PREFILL, 240_000),
    (GEMM_PREFILL, 110_000),
    (ADD, 16_000),
    (RMS_NORM, 14_000),
    (GEMM_PREFILL_UP, 720_000),
    (SILU_MUL, 38_000),
    (GEMM_PREFILL, 360_000),
    (ADD, 16_000),
)
#: final norm, lm_head and greedy sampling on the last token(s)
HEAD_AND_SAMPLING: tuple[tuple[str, int], ...] = (
    (RMS_NORM, 3_200),
    (LM_HEAD, 88_000),
    (TO_FLOAT, 6_000),
    (DIV_TEMPERATURE, 5_500),
    (SOFTMAX, 9_500),
    (ARGMAX, 7_200),
    (COPY_TOKENS, 1_900),
)
SIDE_PATTERN: tuple[tuple[str, int], ...] = ((SIDE_COPY, 2_400), (SIDE_INCREMENT, 1_800))
STRAY_DUR_NS = 1_500

#: duration jitter (relative standard deviation) and the gaps between kernels, ns
JITTER = 0.03
LAUNCH_GAP_NS = (800, 2_500)
STEP_IDLE_NS = (50_000, 200_000)
#: the side pattern starts this long after its decode step's first kernel, ns
SIDE_OFFSET_NS = (15_000, 25_000)
SIDE_GAP_NS = (1_000, 2_000)
START_NS = 10_000

DEVICE_PROPERTIES = {
    "id": DEVICE,
    "name": "NVIDIA H100 80GB HBM3",
    "totalGlobalMem": 85520809984,
    "computeMajor": 9,
    "computeMinor": 0,
    "numSms": 132,
}


def _block(parts: list[tuple[tuple[str, int], ...]], vocab: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """Return (name ids, base durations in ns) of the concatenated `parts`, adding new names to `vocab`."""
    names = [name for part in parts for name, _ in part]
    durs = [d for part in parts for _, d in part]
    ids = np.array([vocab.setdefault(n, len(vocab)) for n in names], np.int32)
    return ids, np.array(durs, np.float64)


def _jittered(base: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Return int64 durations: `base` times a normal factor (mean 1, sd JITTER), at least half of base."""
    factor = rng.normal(1.0, JITTER, base.shape[0])
    np.maximum(factor, 0.5, out=factor)
    factor *= base
    return np.rint(factor).astype(np.int64)


def _timeline(dur: np.ndarray, gap: np.ndarray, start: int) -> np.ndarray:
    """Return the starts of back-to-back kernels on one stream: kernel ``i`` starts ``gap[i]`` ns after
    kernel ``i - 1`` ends (the first at ``start + gap[0]``)."""
    ts = np.cumsum(gap)
    ts[1:] += np.cumsum(dur[:-1])
    ts += start
    return ts


@dataclass
class _Blocks:
    """Name ids and base durations (ns) of the prefill pass, one decode step and the side pattern, with the
    names the ids stand for."""

    names: list[str]
    prefill_ids: np.ndarray
    prefill_base: np.ndarray
    step_ids: np.ndarray
    step_base: np.ndarray
    side_ids: np.ndarray
    side_base: np.ndarray
    stray_id: int


@dataclass
class _Stream:
    """Kernels of one stream (or of both, merged) in time order: name ids, starts and durations in ns."""

    ids: np.ndarray
    ts: np.ndarray
    dur: np.ndarray


@dataclass
class _Decode:
    """Where stream 7's decode steps start and its stray kernels are (positions among its kernels), and
    the decode step of each stray kernel."""

    step_starts: np.ndarray
    stray_pos: np.ndarray
    stray_steps: np.ndarray


def _check_arguments(n_kernels: int, layers: int, noise: float) -> None:
    if n_kernels < 1:
        raise ValueError(f"n_kernels must be positive, not {n_kernels}")
    if layers < 1:
        raise ValueError(f"layers must be positive, not {layers}")
    if not 0.0 <= noise <= 1.0:
        raise ValueError(f"noise is a share of decode steps, in [0, 1], not {noise}")


def _blocks(layers: int, second_stream: bool) -> _Blocks:
    """Return the prefill pass, a decode step and the side pattern (empty without `second_stream`)."""
    vocab: dict[str, int] = {}
    pre_ids, pre_base = _block([((EMBED_PREFILL, 18_000),), *([PREFILL_LAYER] * layers), HEAD_AND_SAMPLING], vocab)
    step_ids, step_base = _block([((EMBED_DECODE, 2_800),), *([DECODE_LAYER] * layers), HEAD_AND_SAMPLING], vocab)
    side_ids, side_base = _block([SIDE_PATTERN], vocab) if second_stream else _block([], vocab)
    stray_id = vocab.setdefault(STRAY_FILL, len(vocab))
    return _Blocks(list(vocab), pre_ids, pre_base, step_ids, step_base, side_ids, side_base, stray_id)


def _main_stream(blocks: _Blocks, steps: int, n_stray: int, rng: np.random.Generator) -> tuple[_Stream, _Decode]:
    """Return stream 7: the prefill pass, then `steps` decode steps with `n_stray` stray kernels inserted,
    and where its decode steps and strays are."""
    prefill_len, step_len = blocks.prefill_ids.shape[0], blocks.step_ids.shape[0]
    stray_steps = np.sort(rng.choice(steps, n_stray, replace=False)).astype(np.int64)
    stray_at = prefill_len + stray_steps * step_len + rng.integers(1, step_len, n_stray)  # before insertion
    ids = np.insert(np.concatenate([blocks.prefill_ids, np.tile(blocks.step_ids, steps)]), stray_at, blocks.stray_id)
    base = np.concatenate([blocks.prefill_base, np.tile(blocks.step_base, steps)])
    base = np.insert(base, stray_at, float(STRAY_DUR_NS))
    stray_pos = stray_at + np.arange(n_stray)
    step_starts = prefill_len + np.arange(steps, dtype=np.int64) * step_len
    step_starts += np.searchsorted(stray_steps, np.arange(steps), side="left")

    dur = _jittered(base, rng)
    gap = rng.integers(LAUNCH_GAP_NS[0], LAUNCH_GAP_NS[1] + 1, ids.shape[0], dtype=np.int64)
    gap[step_starts] = rng.integers(STEP_IDLE_NS[0], STEP_IDLE_NS[1] + 1, steps, dtype=np.int64)
    ts = _timeline(dur, gap, START_NS)
    ts &= ~np.int64(1)  # even: never tied with stream 20; gaps >= 2 ns keep kernels apart
    return _Stream(ids, ts, dur), _Decode(step_starts, stray_pos, stray_steps)


def _side_stream(blocks: _Blocks, step_ts: np.ndarray, rng: np.random.Generator) -> _Stream:
    """Return stream 20: the side pattern once per decode step, starting a little after the step's first
    kernel (`step_ts`, one per step) and overlapping stream 7."""
    steps, side_len = step_ts.shape[0], blocks.side_ids.shape[0]
    first = step_ts + rng.integers(SIDE_OFFSET_NS[0], SIDE_OFFSET_NS[1] + 1, steps, dtype=np.int64)
    dur = _jittered(np.tile(blocks.side_base, steps), rng).reshape(steps, side_len)
    gap = rng.integers(SIDE_GAP_NS[0], SIDE_GAP_NS[1] + 1, (steps, side_len), dtype=np.int64)
    gap[:, 0] = 0
    ts = first[:, None] + np.cumsum(gap, axis=1)
    ts[:, 1:] += np.cumsum(dur[:, :-1], axis=1)
    return _Stream(np.tile(blocks.side_ids, steps), ts.reshape(-1) | 1, dur.reshape(-1))  # odd ts


def _interleave(main: _Stream, side: _Stream) -> tuple[_Stream, np.ndarray, np.ndarray]:
    """Return the kernels of both time-ordered streams in the order a stable argsort of ts would give
    (there are no ties), whether each is on the side stream, and the rows of the main stream's kernels."""
    n_side = side.ts.shape[0]
    n = main.ts.shape[0] + n_side
    side_rows = np.searchsorted(main.ts, side.ts) + np.arange(n_side)
    is_side = np.zeros(n, bool)
    is_side[side_rows] = True
    main_rows = np.flatnonzero(~is_side)

    def merge(main_values: np.ndarray, side_values: np.ndarray) -> np.ndarray:
        out = np.empty(n, main_values.dtype)
        out[main_rows] = main_values
        out[side_rows] = side_values
        return out

    merged = _Stream(merge(main.ids, side.ids.astype(np.int32)), merge(main.ts, side.ts), merge(main.dur, side.dur))
    return merged, is_side, main_rows


def _kernel_trace(kernels: _Stream, is_side: np.ndarray, names: list[str]) -> Trace:
    """Return the kernels as a Trace: all on device 0, pid 0; tid and stream 20 where `is_side`, else 7."""
    n = kernels.ts.shape[0]
    stream = np.where(is_side, SIDE_STREAM, MAIN_STREAM).astype(np.int64)
    columns = {
        "ts": int_column(kernels.ts, None, pa.int64()),
        "dur": int_column(kernels.dur, None, pa.int64()),
        "name": dict_column(kernels.ids, names),
        "cat": dict_column(np.zeros(n, np.int32), ["kernel"]),
        "kind": pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int8)), pa.array(KINDS)),
        "pid": int_column(np.full(n, DEVICE, np.int64), None, pa.int64()),
        "tid": int_column(stream, None, pa.int64()),
        "device": int_column(np.full(n, DEVICE, np.int16), None, pa.int16()),
        "stream": int_column(stream, None, pa.int64()),
        "correlation": int_column(np.arange(1, n + 1, dtype=np.int64), None, pa.int64()),
    }
    metadata = {
        "source": "gpuan.synth.cycles",
        "format": "synthetic",
        "base_time_ns": 0,
        "device_properties": [dict(DEVICE_PROPERTIES)],
        "distributed_info": {},
    }
    return Trace(build_table(columns, n), metadata=metadata)


def _ground_truth(
    blocks: _Blocks, layers: int, n_main: int, n_side: int | None, decode: _Decode, main_rows: np.ndarray
) -> dict[str, Any]:
    """Return llm_kernel_trace's ground truth (see there); `n_side` is None without a second stream."""
    prefill_len, step_len = blocks.prefill_ids.shape[0], blocks.step_ids.shape[0]
    return {
        "kernels": n_main + (n_side or 0),
        "per_stream": {MAIN_STREAM: n_main, **({SIDE_STREAM: n_side} if n_side is not None else {})},
        "vocabulary": len(blocks.names),
        "layers": layers,
        "prefill": {"start": 0, "end": prefill_len, "layer_start": 1, "layer_length": len(PREFILL_LAYER)},
        "decode": {
            "start": prefill_len,
            "end": n_main,
            "steps": decode.step_starts.shape[0],
            "step_length": step_len,
            "step_starts": decode.step_starts,
            "layer_offset": 1,
            "layer_length": len(DECODE_LAYER),
        },
        "noise": {"positions": decode.stray_pos, "steps": decode.stray_steps},
        "merged": {
            "decode_start": int(main_rows[prefill_len]),
            "step_length": step_len + blocks.side_ids.shape[0],
            "step_starts": main_rows[decode.step_starts],
            "noise_positions": main_rows[decode.stray_pos],
        },
    }


def llm_kernel_trace(
    n_kernels: int,
    *,
    layers: int = 32,
    seed: int = 0,
    noise: float = 1e-4,
    second_stream: bool = True,
) -> tuple[Trace, dict[str, Any]]:
    """Return a synthetic LLM-inference kernel trace of at least `n_kernels` kernels and its ground truth.

    The trace has one prefill pass and then whole decode steps until `n_kernels` is reached (all streams
    and stray kernels counted), so it may hold a few hundred kernels more. Main stream 7 runs the model;
    with `second_stream`, stream 20 runs a copy and an increment per decode step, overlapping stream 7.
    ``round(noise * decode steps)`` decode steps get one stray fill kernel at a random position inside
    the step (never its first kernel). Everything is on device 0, pid 0, kind ``kernel``; the table's
    rows are in time order (streams interleaved; stream 7 starts at even ns, stream 20 at odd ns, so
    there are no ties) and correlation ids increase along them. The same arguments give the same trace.

    The ground-truth dict (positions are indices into stream 7's kernels in time order unless the key
    says ``merged``, which means the time-ordered kernels of both streams, as cycle detection sees them):

    - ``kernels``, ``per_stream`` ({stream: count}), ``vocabulary`` (distinct names), ``layers``
    - ``prefill``: ``start``, ``end`` (half-open), ``layer_start``, ``layer_length``
    - ``decode``: ``start``, ``end``, ``steps``, ``step_length`` (kernels per step without strays),
      ``step_starts`` (array), ``layer_offset`` (first layer's position inside a step), ``layer_length``
    - ``noise``: ``positions`` (array, the stray kernels), ``steps`` (array, their decode steps)
    - ``merged``: ``decode_start``, ``step_length`` (with the side pattern), ``step_starts``,
      ``noise_positions`` (arrays)
    """
    _check_arguments(n_kernels, layers, noise)
    rng = np.random.default_rng(seed)
    blocks = _blocks(layers, second_stream)
    step_kernels = blocks.step_ids.shape[0] + blocks.side_ids.shape[0]
    steps = max(1, math.ceil((n_kernels - blocks.prefill_ids.shape[0]) / step_kernels))
    main, decode = _main_stream(blocks, steps, int(round(noise * steps)), rng)
    if second_stream:
        side = _side_stream(blocks, main.ts[decode.step_starts], rng)
    else:
        side = _Stream(np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, np.int64))
    kernels, is_side, main_rows = _interleave(main, side)
    trace = _kernel_trace(kernels, is_side, blocks.names)
    n_side = side.ts.shape[0] if second_stream else None
    return trace, _ground_truth(blocks, layers, main.ts.shape[0], n_side, decode, main_rows)
