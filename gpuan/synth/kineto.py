"""Synthetic PyTorch-profiler (Kineto) traces of a transformer training job on an H100.

The output follows the layout real Kineto writes: a top-level object with schemaVersion,
deviceProperties, distributedInfo and ``traceEvents`` (one event per multi-line object, ``ts``/``dur``
in microseconds with nanosecond decimals), then traceName, displayTimeUnit and baseTimeNanoseconds.
Each training step holds a ``ProfilerStep#N`` annotation, forward and backward ``cpu_op`` trees with
record_shapes arguments, ``cudaLaunchKernel`` runtime calls, kernels / memcpys / memsets on the GPU
timeline with ``ac2g`` flows, a DDP all-reduce per layer (``record_param_comms`` and an NCCL kernel
on its own stream), a fused AdamW step and a ``.item()`` sync.

Speed comes from rendering each step as one ``%``-template: a few variants of a step are built once
(with their own random timings), and every emitted step is one of them with its times and ids shifted
by numpy arithmetic, so gigabyte files stream out at well over 50 MB/s in bounded memory.
"""

from __future__ import annotations

import gzip as gzip_module
import io
import json
import math
import os
import random
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["write_kineto_trace", "sample_trace_path", "SAMPLE_NAME"]

SAMPLE_NAME = "gpuan_sample.json.gz"

# ---------------------------------------------------------------------------------------------------
# The machine and the model

PEAK_BF16_FLOPS = 989.4e12  # H100 SXM dense bf16 tensor-core peak
PEAK_HBM_BYTES = 3.35e12  # H100 SXM HBM3 bandwidth
NUM_SMS = 132
DEVICE_COUNT = 8
DEVICE_PROPERTIES = {
    "name": "NVIDIA H100 80GB HBM3",
    "totalGlobalMem": 85520809984,
    "computeMajor": 9,
    "computeMinor": 0,
    "maxThreadsPerBlock": 1024,
    "maxThreadsPerMultiprocessor": 2048,
    "regsPerBlock": 65536,
    "warpSize": 32,
    "sharedMemPerBlock": 49152,
    "numSms": NUM_SMS,
    "regsPerMultiprocessor": 65536,
    "sharedMemPerBlockOptin": 232448,
    "sharedMemPerMultiprocessor": 233472,
}

BATCH, SEQ, HIDDEN, HEADS, VOCAB = 4, 2048, 4096, 32, 32000
HEAD_DIM = HIDDEN // HEADS
FFN = 4 * HIDDEN
TOKENS = BATCH * SEQ
BF16 = "c10::BFloat16"

PID = 2381467
MAIN_TID = PID
BWD_TID = PID + 213  # the autograd engine's device thread
COMPUTE_STREAM = 7
NCCL_STREAM = 24
TRACE_START_NS = 5_129_387_241_123_456  # Kineto's ts come from a boot-relative clock, here ~59 days
BASE_TIME_NS = 1_731_000_000_000_000_000
STEP_START_OFFSET_NS = 1_873_419  # profiler warm-up before the first recorded step

# Slot kinds: what each %d placeholder of a step template is offset by when the step is shifted.
K_TIME, K_EXT, K_CORR, K_RF, K_EVIDX, K_SEQ, K_FLOW, K_PYID, K_STEP = range(9)
N_KINDS = 9
TS = "%d.%03d"  # one time placeholder = two %d fields: microseconds and the nanosecond remainder

_MAX_VARIANTS = 8
_CHUNK_CHARS = 8 << 20
_TRAILER_CHARS = 9_000  # the closing metadata events, roughly


# ---------------------------------------------------------------------------------------------------
# record_shapes arguments


def _strides(dims: tuple[int, ...]) -> list[int]:
    """Return the contiguous strides of a tensor of shape `dims`."""
    out, acc = [], 1
    for d in reversed(dims):
        out.append(acc)
        acc *= d
    return out[::-1]


def tensor(*dims: int, dtype: str = BF16, strides: tuple[int, ...] | None = None) -> tuple:
    """Return one record_shapes input (concrete, type, strides, dims) for a tensor."""
    return ("", dtype, list(strides) if strides else _strides(dims), list(dims))


def scalar(value: object) -> tuple:
    """Return one record_shapes input for a Python scalar, written as Kineto writes it."""
    text = value if isinstance(value, str) else json.dumps(value) if not isinstance(value, bool) else str(value)
    return (text, "Scalar", [], [])


def scalar_list(values: list[int]) -> tuple:
    """Return one record_shapes input for an int list (sizes, dims)."""
    return (json.dumps(values), "ScalarList", [], [])


def tensor_list(shapes: list[tuple[int, ...]], dtype: str = BF16) -> tuple:
    """Return one record_shapes input for a TensorList: nested dims and strides."""
    return ("", "TensorList", [_strides(s) for s in shapes], [list(s) for s in shapes])


NONE = ("", "", [], [])


def shapes_text(inputs: list[tuple]) -> str:
    """Return the record_shapes members of an op's args ("Concrete Inputs" ... "Input Dims")."""
    conc, types, strides, dims = zip(*inputs) if inputs else ((), (), (), ())
    return (
        f'"Concrete Inputs": {json.dumps(list(conc))}, "Input type": {json.dumps(list(types))}, '
        f'"Input Strides": {json.dumps(list(strides))}, "Input Dims": {json.dumps(list(dims))}'
    )


def _lit(text: str) -> str:
    """Return `text` safe to sit in a %-template."""
    return text.replace("%", "%%")


def _name(text: str) -> str:
    """Return a JSON string literal for an event name, safe for a %-template."""
    return _lit(json.dumps(text))


def fmt_us(ns: int) -> str:
    """Return a nanosecond duration as Kineto's microseconds with three decimals."""
    return f"{ns // 1000}.{ns % 1000:03d}"


# ---------------------------------------------------------------------------------------------------
# Kernels


@dataclass(frozen=True)
class Kernel:
    """A GPU kernel as CUPTI reports it: name and launch configuration."""

    name: str
    regs: int
    smem: int
    grid: tuple[int, int, int]
    block: tuple[int, int, int]

    def args_text(self) -> str:
        """Return the static kernel members of the args (after "correlation")."""
        blocks = self.grid[0] * self.grid[1] * self.grid[2]
        threads = self.block[0] * self.block[1] * self.block[2]
        warps = -(-threads // 32)
        per_sm = blocks / NUM_SMS
        resident = min(
            32,
            2048 // max(threads, 1),
            65536 // max(self.regs * threads, 1),
            233472 // self.smem if self.smem else 32,
        )
        occupancy = int(min(resident, math.ceil(per_sm)) * warps * 100 // 64)
        return (
            f'"registers per thread": {self.regs},      "shared memory": {self.smem},      '
            f'"blocks per SM": {per_sm:.6f},      "warps per SM": {per_sm * warps:.6f},      '
            f'"grid": [{self.grid[0]}, {self.grid[1]}, {self.grid[2]}],      '
            f'"block": [{self.block[0]}, {self.block[1]}, {self.block[2]}],      '
            f'"est. achieved occupancy %%": {min(occupancy, 100)}'
        )


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def gemm_kernel(m: int, n: int, k: int, layout: str, family: str) -> Kernel:
    """Return the cuBLAS / CUTLASS kernel an H100 picks for a bf16 GEMM of (m, n, k)."""
    if family == "sm90":
        name = (
            f"sm90_xmma_gemm_bf16bf16_bf16f32_f32_{layout}_n_tilesize128x256x64_warpgroupsize2x1x1_"
            "execute_segment_k_off_kernel__5x_cublas"
        )
        return Kernel(name, 168, 213248, (_cdiv(n, 256), _cdiv(m, 128), 1), (384, 1, 1))
    if family == "nvjet":
        name = f"nvjet_tst_192x192_64x4_2x1_v_bz_coopA_{layout.upper()}N"
        return Kernel(name, 168, 218112, (_cdiv(n, 192) * _cdiv(m, 192), 1, 1), (384, 1, 1))
    if family == "cutlass":
        tag = f"cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x3_{layout}_align8"
        return Kernel(
            f"void cutlass::Kernel2<{tag}>({tag}::Params)", 230, 73728, (_cdiv(n, 128), _cdiv(m, 256), 1), (256, 1, 1)
        )
    name = f"ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_{layout}"
    return Kernel(name, 232, 98304, (_cdiv(n, 128), _cdiv(m, 128), 1), (128, 1, 1))


def elementwise_kernel(functor: str, arity: int, numel: int) -> Kernel:
    """Return ATen's vectorized elementwise kernel for `functor` over `numel` elements."""
    arr = f"std::array<char*, {arity}ul>"
    name = f"void at::native::vectorized_elementwise_kernel<4, {functor}, {arr} >(int, {functor}, {arr})"
    return Kernel(name, 28, 0, (_cdiv(numel, 512), 1, 1), (128, 1, 1))


def _gelu_functor(backward: bool) -> str:
    impl = "GeluBackwardCUDAKernelImpl" if backward else "GeluCUDAKernelImpl"
    lam = "c10::BFloat16, c10::BFloat16" if backward else "c10::BFloat16"
    return (
        f"at::native::{impl}(at::TensorIteratorBase&, at::native::GeluType)::{{lambda()#2}}::operator()() const"
        f"::{{lambda()#4}}::operator()() const::{{lambda({lam})#1}}"
    )


_COPY_LAMBDA = (
    "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const"
    "::{lambda()#7}::operator()() const::{lambda(c10::BFloat16)#1}"
)
_COPY_IMPL = f"at::native::gpu_kernel_impl_nocast<{_COPY_LAMBDA}>(at::TensorIteratorBase&, {_COPY_LAMBDA} const&)"
_COPY_LOOP = f"{_COPY_IMPL}::{{lambda(int)#1}}"
COPY_KERNEL_NAME = f"void at::native::elementwise_kernel<128, 4, {_COPY_LOOP}>(int, {_COPY_LOOP})"
LN_FWD = (
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, "
    "c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)"
)
LN_BWD_INPUT = (
    "void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized<c10::BFloat16, float>("
    "c10::BFloat16 const*, c10::BFloat16 const*, float const*, float const*, c10::BFloat16 const*, "
    "c10::BFloat16*, int)"
)
LN_BWD_GAMMA = (
    "void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernel_32x32<c10::BFloat16, float>(long, long, "
    "c10::BFloat16 const*, c10::BFloat16 const*, float const*, float const*, c10::BFloat16*, c10::BFloat16*)"
)
_FLASH_FWD_TRAITS = (
    "pytorch_flash::Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, "
    "pytorch_flash::Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >"
)
FLASH_FWD = (
    f"void pytorch_flash::flash_fwd_kernel<{_FLASH_FWD_TRAITS}, false, true, false, false, true, true, false, false>"
    "(pytorch_flash::Flash_fwd_params)"
)
_FLASH_BWD_TRAITS = (
    "pytorch_flash::Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t, "
    "pytorch_flash::Flash_kernel_traits<128, 64, 128, 8, cutlass::bfloat16_t> >"
)
FLASH_BWD_DOT = (
    f"void pytorch_flash::flash_bwd_dot_do_o_kernel<true, {_FLASH_BWD_TRAITS} >(pytorch_flash::Flash_bwd_params)"
)
FLASH_BWD_MAIN = (
    f"void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<{_FLASH_BWD_TRAITS}, true, false, true, "
    "true, false, false, false>(pytorch_flash::Flash_bwd_params)"
)
FLASH_BWD_CONVERT = (
    f"void pytorch_flash::flash_bwd_convert_dq_kernel<{_FLASH_BWD_TRAITS} >(pytorch_flash::Flash_bwd_params, int)"
)
_SUM_OP = (
    "at::native::ReduceOp<c10::BFloat16, at::native::func_wrapper_t<c10::BFloat16, at::native::sum_functor<"
    "c10::BFloat16, float, c10::BFloat16>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
    "unsigned int, c10::BFloat16, 4, 4>"
)
SUM_KERNEL = f"void at::native::reduce_kernel<512, 1, {_SUM_OP} >({_SUM_OP})"
INDEX_SELECT = (
    "void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, -2, "
    "true>(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, at::cuda::detail::TensorInfo<c10::BFloat16 "
    "const, unsigned int>, at::cuda::detail::TensorInfo<long const, unsigned int>, int, int, unsigned int, "
    "unsigned int, long)"
)
CAT_KERNEL = (
    "void at::native::(anonymous namespace)::CatArrayBatchedCopy_aligned16_contig<at::native::(anonymous "
    "namespace)::OpaqueType<2u>, unsigned int, 3, 128, 1>(at::native::(anonymous namespace)::OpaqueType<2u>*, "
    "at::native::(anonymous namespace)::CatArrInputTensorMetadata<at::native::(anonymous namespace)::"
    "OpaqueType<2u>, unsigned int, 128, 1>, at::native::(anonymous namespace)::TensorSizeStride<unsigned int, "
    "4u>, int, unsigned int)"
)
LOG_SOFTMAX_FWD = (
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16, float, c10::BFloat16, "
    "at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>(c10::BFloat16*, c10::BFloat16 const*, int)"
)
LOG_SOFTMAX_BWD = (
    "void at::native::(anonymous namespace)::cunn_SoftMaxBackward<8, c10::BFloat16, float, c10::BFloat16, "
    "at::native::(anonymous namespace)::LogSoftMaxBackwardEpilogue>(c10::BFloat16*, c10::BFloat16 const*, "
    "c10::BFloat16 const*, int)"
)
NLL_FWD = (
    "void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<c10::BFloat16, float, long>("
    "c10::BFloat16*, c10::BFloat16*, c10::BFloat16 const*, long const*, c10::BFloat16 const*, bool, long, long, "
    "long, long)"
)
NLL_BWD = (
    "void at::native::(anonymous namespace)::nll_loss_backward_reduce_cuda_kernel_2d<c10::BFloat16, long>("
    "c10::BFloat16*, c10::BFloat16 const*, long const*, c10::BFloat16 const*, c10::BFloat16 const*, bool, int, "
    "int, long, long)"
)
_ADAM_META = "at::native::(anonymous namespace)::FusedOptimizerTensorListMetadata<4>"
_ADAM_FUNCTOR = (
    "at::native::(anonymous namespace)::FusedAdamMathFunctor<c10::BFloat16, 4, (at::native::ADAM_MODE)1, false>"
)
_ADAM_ARGS = f"{_ADAM_META}, {_ADAM_FUNCTOR}, double*, double, double, double, double, double, bool, double*, double*"
FUSED_ADAM = f"void at::native::(anonymous namespace)::multi_tensor_apply_kernel<{_ADAM_ARGS}>({_ADAM_ARGS})"
_FOREACH_ARGS = (
    "at::native::(anonymous namespace)::TensorListMetadata<1>, at::native::(anonymous namespace)::"
    "UnaryOpScalarFunctor<float, 1, 1, 0>, std::plus<float>, float"
)
FOREACH_ADD = f"void at::native::(anonymous namespace)::multi_tensor_apply_kernel<{_FOREACH_ARGS}>({_FOREACH_ARGS})"
NCCL_ALLREDUCE = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
ADD_FUNCTOR = "at::native::CUDAFunctor_add<c10::BFloat16>"
FILL_FUNCTOR = "at::native::FillFunctor<c10::BFloat16>"


def gemm_ns(m: int, n: int, k: int, efficiency: float) -> float:
    """Return the time of a bf16 GEMM at `efficiency` of the H100 tensor-core peak, in ns."""
    return 2.0 * m * n * k / (PEAK_BF16_FLOPS * efficiency) * 1e9


def memory_ns(nbytes: float, efficiency: float = 0.82) -> float:
    """Return the time of a bandwidth-bound kernel moving `nbytes`, in ns (with a launch floor)."""
    return nbytes / (PEAK_HBM_BYTES * efficiency) * 1e9 + 1800.0


# ---------------------------------------------------------------------------------------------------
# One step, built once per variant


@dataclass
class _Event:
    """One event of a step: sort key, its %-template text and the slots its placeholders read."""

    key: tuple
    text: str
    slots: list[tuple[int, int]]
    evidx_slot: int = -1
    counts_as: tuple[str, str] = ("X", "")


@dataclass
class _Span:
    """An op being recorded: where and when it started, and the ids its args and launches carry."""

    tid: int
    name: str
    cat: str
    start: int
    ext: int
    rf: int
    order: int
    args_before: str = ""
    args_slots: list[tuple[int, int]] = field(default_factory=list)


class _StepBuilder:
    """Builds one training step: CPU ops on two threads, launches, and a simulated GPU timeline."""

    def __init__(self, rng: random.Random, layers: int, world_size: int) -> None:
        self.rng = rng
        self.layers = layers
        self.world_size = world_size
        self.cpu: list[_Event] = []
        self.gpu: list[_Event] = []
        self.counters = [0] * N_KINDS
        self.cursor = {MAIN_TID: 0, BWD_TID: 0}
        self.stack: dict[int, list[_Span]] = {MAIN_TID: [], BWD_TID: []}
        self.tid = MAIN_TID
        self.free = {COMPUTE_STREAM: 0, NCCL_STREAM: 0}
        self.order = 0
        self.launches: list[tuple[int, int, int, int]] = []  # (runtime ts, stream, gpu start, gpu end)
        self.gpu_ranges: list[tuple[str, list, int, int, bool]] = []  # (name, launches, ext, start, step)
        self.autograd: dict[tuple, tuple[int, int]] = {}

    # -- primitives ---------------------------------------------------------------------------------
    def alloc(self, kind: int) -> int:
        """Return the next step-relative id of `kind`."""
        v = self.counters[kind]
        self.counters[kind] += 1
        return v

    def next_order(self) -> int:
        """Return a tie-breaker that keeps creation order among events with equal timestamps."""
        self.order += 1
        return self.order

    def advance(self, lo_ns: float, hi_ns: float) -> int:
        """Move the current thread's clock on by a random gap; return the new time."""
        self.cursor[self.tid] += int(self.rng.uniform(lo_ns, hi_ns))
        return self.cursor[self.tid]

    def jitter(self, ns: float, spread: float = 0.03) -> int:
        """Return `ns` with a few percent of run-to-run noise, as an int of at least 1 µs."""
        return max(1000, int(ns * (1.0 + self.rng.gauss(0.0, spread))))

    @contextmanager
    def span(
        self,
        name: str,
        inputs: list[tuple] | None = None,
        cat: str = "cpu_op",
        seq: tuple[int, int] | None = None,
        step_slot: bool = False,
    ) -> Iterator[_Span]:
        """Record an op (or user annotation) around whatever runs inside the block.

        `seq` is (sequence number, forward-thread flag) for ops that make or run an autograd node;
        `step_slot` makes the name's ``%d`` the step number."""
        tid = self.tid
        start = self.advance(400, 2500)
        sp = _Span(tid, name, cat, start, self.alloc(K_EXT), self.alloc(K_RF), self.next_order())
        head = ""
        if inputs is not None:
            head = ", " + _lit(shapes_text(inputs))
        if seq is not None:
            head += ', "Sequence number": %d, "Fwd thread id": ' + str(seq[1])
            sp.args_slots.append((K_SEQ, seq[0]))
        sp.args_before = head
        self.stack[tid].append(sp)
        yield sp
        self.stack[tid].pop()
        end = self.cursor[tid] = self.cursor[tid] + int(self.rng.uniform(300, 1500))
        name_lit = json.dumps(name) if step_slot else _name(name)
        text = (
            f'  {{\n    "ph": "X", "cat": "{cat}", "name": {name_lit}, "pid": {PID}, "tid": {tid},\n'
            f'    "ts": {TS}, "dur": {fmt_us(end - start)},\n    "args": {{\n'
            f'      "External id": %d,"Record function id": %d{sp.args_before}, "Ev Idx": %d\n    }}\n  }}'
        )
        slots = [(K_STEP, 0)] if step_slot else []
        slots += [(K_TIME, start), (K_EXT, sp.ext), (K_RF, sp.rf), *sp.args_slots, (K_EVIDX, 0)]
        self.cpu.append(_Event((start, sp.order, 0), text, slots, len(slots) - 1, ("X", cat)))

    def comms_span(self) -> _Span:
        """Open a record_param_comms op (closed by the caller) whose args describe an all-reduce."""
        tid = self.tid
        start = self.advance(500, 2000)
        sp = _Span(tid, "record_param_comms", "cpu_op", start, self.alloc(K_EXT), self.alloc(K_RF), self.next_order())
        self.stack[tid].append(sp)
        return sp

    def close_comms(self, sp: _Span, nelems: int) -> None:
        """Close a record_param_comms op opened by :meth:`comms_span`."""
        self.stack[sp.tid].pop()
        end = self.cursor[sp.tid] = self.cursor[sp.tid] + int(self.rng.uniform(2000, 6000))
        text = (
            f'  {{\n    "ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": {PID}, "tid": {sp.tid},\n'
            f'    "ts": {TS}, "dur": {fmt_us(end - sp.start)},\n    "args": {{\n'
            f'      "External id": %d,"Record function id": %d, "Ev Idx": %d, "Global rank start": 0, '
            f'"Global rank stride": 1{_allreduce_args(nelems, self.world_size)}\n    }}\n  }}'
        )
        slots = [(K_TIME, sp.start), (K_EXT, sp.ext), (K_RF, sp.rf), (K_EVIDX, 0)]
        self.cpu.append(_Event((sp.start, sp.order, 0), text, slots, 3, ("X", "cpu_op")))

    @contextmanager
    def python(self, name: str, module_id: int | None = None) -> Iterator[int]:
        """Record a python_function frame (with_stack / with_modules) around the block; yields its id."""
        stack = [s for s in self.stack[self.tid] if s.cat == "python_function"]
        parent = stack[-1].ext if stack else None
        start = self.advance(300, 1200)
        pyid = self.alloc(K_PYID)
        sp = _Span(self.tid, name, "python_function", start, pyid, 0, self.next_order())
        self.stack[self.tid].append(sp)
        yield pyid
        self.stack[self.tid].pop()
        end = self.cursor[self.tid] = self.cursor[self.tid] + int(self.rng.uniform(500, 2500))
        parent_text = '"Python parent id": %d, ' if parent is not None else ""
        module_text = f', "Python module id": {module_id}' if module_id is not None else ""
        text = (
            f'  {{\n    "ph": "X", "cat": "python_function", "name": {_name(name)}, "pid": {PID}, "tid": {sp.tid},\n'
            f'    "ts": {TS}, "dur": {fmt_us(end - start)},\n    "args": {{\n'
            f'      {parent_text}"Python id": %d{module_text}, "Ev Idx": %d\n    }}\n  }}'
        )
        slots = [(K_TIME, start)] + ([(K_PYID, parent)] if parent is not None else []) + [(K_PYID, pyid), (K_EVIDX, 0)]
        self.cpu.append(_Event((start, sp.order, 0), text, slots, len(slots) - 1, ("X", "python_function")))

    def fwdbwd_flow(self, phase: str, flow_id: int, ts: int, order: int) -> None:
        """Record one end of a forward→backward flow arrow at `ts` on the current thread."""
        tail = ', "bp": "e"' if phase == "f" else ""
        text = (
            f'  {{\n    "ph": "{phase}", "id": %d, "pid": {PID}, "tid": {self.tid}, "ts": {TS},\n'
            f'    "cat": "fwdbwd", "name": "fwdbwd"{tail}\n  }}'
        )
        self.cpu.append(_Event((ts, order, 1), text, [(K_FLOW, flow_id), (K_TIME, ts)], -1, (phase, "fwdbwd")))

    def _runtime_text(self, name: str, cbid: int, ts: int, dur: int) -> tuple[str, list]:
        ext = next(s.ext for s in reversed(self.stack[self.tid]) if s.cat != "python_function")
        corr = self.alloc(K_CORR)
        text = (
            f'  {{\n    "ph": "X", "cat": "cuda_runtime", "name": "{name}", "pid": {PID}, "tid": {self.tid},\n'
            f'    "ts": {TS}, "dur": {fmt_us(dur)},\n    "args": {{\n'
            f'      "External id": %d,      "cbid": {cbid}, "correlation": %d\n    }}\n  }}'
        )
        return text, [(K_TIME, ts), (K_EXT, ext), (K_CORR, corr)]

    def runtime(self, name: str, cbid: int, dur_ns: int | None = None) -> int:
        """Record a runtime call with no GPU activity (event record, stream wait, sync); returns its end."""
        ts = self.advance(400, 1500)
        dur = dur_ns if dur_ns is not None else int(self.rng.uniform(700, 2500))
        text, slots = self._runtime_text(name, cbid, ts, dur)
        self.gpu.append(_Event((ts, self.next_order(), 0), text, slots, -1, ("X", "cuda_runtime")))
        self.cursor[self.tid] = ts + dur
        return ts + dur

    def _gpu_activity(
        self, api: str, cbid: int, stream: int, dur_ns: int, gpu_cat: str, name_lit: str, body: str, not_before: int = 0
    ) -> int:
        """Record a launch call, its GPU activity and the ac2g flow between them; returns the GPU end.

        `name_lit` is the activity's JSON name literal and `body` its args after "External id", both
        %-escaped, with one ``%d`` for the correlation."""
        ts = self.advance(1200, 4500)
        # launches are a few µs, but now and then the CPU thread is descheduled mid-call
        slow = self.rng.random() < 0.01
        rt_dur = int(self.rng.uniform(15e3, 60e3) if slow else self.rng.uniform(2600, 6500))
        rt_text, rt_slots = self._runtime_text(api, cbid, ts, rt_dur)
        ext, corr = rt_slots[1][1], rt_slots[2][1]
        start = max(ts + int(self.rng.uniform(3500, 7000)), self.free[stream] + int(self.rng.uniform(900, 2600)))
        start = max(start, not_before)
        end = start + dur_ns
        self.free[stream] = end
        self.cursor[self.tid] = ts + rt_dur
        self.launches.append((ts, stream, start, end))
        gpu = (
            f'  {{\n    "ph": "X", "cat": "{gpu_cat}", "name": {name_lit}, "pid": 0, "tid": {stream},\n'
            f'    "ts": {TS}, "dur": {fmt_us(dur_ns)},\n    "args": {{\n      "External id": %d,{body}\n    }}\n  }}'
        )
        flow_f = (
            f'  {{\n    "ph": "f", "id": %d, "pid": 0, "tid": {stream}, "ts": {TS},\n'
            f'    "cat": "ac2g", "name": "ac2g", "bp": "e"\n  }}'
        )
        flow_s = (
            f'  {{\n    "ph": "s", "id": %d, "pid": {PID}, "tid": {self.tid}, "ts": {TS},\n'
            f'    "cat": "ac2g", "name": "ac2g"\n  }}'
        )
        text = ",\n".join((gpu, flow_f, rt_text, flow_s))
        slots = [(K_TIME, start), (K_EXT, ext), (K_CORR, corr), (K_CORR, corr), (K_TIME, start)]
        slots += rt_slots + [(K_CORR, corr), (K_TIME, ts)]
        self.gpu.append(_Event((ts, self.next_order(), 0), text, slots, -1, ("bundle", gpu_cat)))
        return end

    def kernel(
        self, k: Kernel, dur_ns: float, stream: int = COMPUTE_STREAM, extra: str = "", not_before: int = 0
    ) -> int:
        """Launch kernel `k` running about `dur_ns` on `stream` from the current op; returns its end."""
        body = (
            f'      "queued": 0, "device": 0, "context": 1,      "stream": {stream}, "correlation": %d,      '
            f"{k.args_text()}{_lit(extra)}"
        )
        # NCCL launches through cuLaunchKernelEx, which the runtime reports as cudaLaunchKernelExC
        api, cbid = ("cudaLaunchKernelExC", 430) if stream == NCCL_STREAM else ("cudaLaunchKernel", 211)
        return self._gpu_activity(api, cbid, stream, self.jitter(dur_ns), "kernel", _name(k.name), body, not_before)

    def _copy_body(self, nbytes: int, dur: int) -> str:
        return (
            f'      "device": 0, "context": 1,      "stream": {COMPUTE_STREAM}, "correlation": %d,      '
            f'"bytes": {nbytes}, "memory bandwidth (GB/s)": {nbytes / dur!r}'
        )

    def memcpy(self, kind: str, label: str, nbytes: int) -> int:
        """Launch a cudaMemcpyAsync of `nbytes` on the compute stream; returns its GPU end."""
        dur = self.jitter(nbytes / 45e9 * 1e9 + 1300)  # PCIe Gen5 host copies
        name = _name(f"Memcpy {kind} ({label})")
        return self._gpu_activity(
            "cudaMemcpyAsync", 41, COMPUTE_STREAM, dur, "gpu_memcpy", name, self._copy_body(nbytes, dur)
        )

    def memset(self, nbytes: int) -> int:
        """Launch a cudaMemsetAsync of `nbytes` on the compute stream; returns its GPU end."""
        dur = self.jitter(memory_ns(nbytes, 0.6))
        body = self._copy_body(nbytes, dur)
        return self._gpu_activity("cudaMemsetAsync", 51, COMPUTE_STREAM, dur, "gpu_memset", '"Memset (Device)"', body)

    @contextmanager
    def annotation(self, name: str, gpu: bool = True, step_slot: bool = False) -> Iterator[_Span]:
        """Record a user annotation (record_function) and, if `gpu`, its gpu_user_annotation range."""
        first = len(self.launches)
        with self.span(name, cat="user_annotation", step_slot=step_slot) as sp:
            yield sp
        if gpu:
            self.gpu_ranges.append((name, self.launches[first:], sp.ext, sp.start, step_slot))

    # -- autograd bookkeeping ---------------------------------------------------------------------
    def forward_node(self, key: tuple) -> tuple[int, int]:
        """Allocate the sequence number of a forward op that records an autograd node."""
        seq = self.alloc(K_SEQ)
        self.autograd[key] = (seq, -1)
        return seq, 0

    def fwd_flow_start(self, key: tuple, sp: _Span) -> None:
        """Start the forward→backward flow of the autograd node `key` at op `sp`."""
        flow = self.alloc(K_FLOW)
        self.autograd[key] = (self.autograd[key][0], flow)
        self.fwdbwd_flow("s", flow, sp.start, sp.order)


# ---------------------------------------------------------------------------------------------------
# The model: what one training step runs


def _op_leaf(b: _StepBuilder, name: str, inputs: list[tuple]) -> None:
    """Record a CPU-only op (views, metadata) with no GPU work."""
    with b.span(name, inputs):
        pass


def _layer_norm(b: _StepBuilder, key: tuple) -> None:
    x = tensor(BATCH, SEQ, HIDDEN)
    w = tensor(HIDDEN)
    seq = b.forward_node(key)
    with b.span("aten::layer_norm", [x, scalar_list([HIDDEN]), w, w, scalar(1e-05), scalar(True)]):
        with b.span("aten::native_layer_norm", [x, scalar_list([HIDDEN]), w, w, scalar(1e-05)], seq=seq) as sp:
            b.fwd_flow_start(key, sp)
            b.advance(1500, 4000)
            b.kernel(Kernel(LN_FWD, 30, 0, (TOKENS, 1, 1), (128, 1, 1)), memory_ns(TOKENS * HIDDEN * 4))


def _linear(b: _StepBuilder, key: tuple, n_in: int, n_out: int, family: str, eff: float) -> None:
    x = tensor(BATCH, SEQ, n_in)
    w = tensor(n_out, n_in)
    bias = tensor(n_out)
    seq = b.forward_node(key)
    with b.span("aten::linear", [x, w, bias]):
        with b.span("aten::t", [w]):
            with b.span("aten::transpose", [w, scalar(0), scalar(1)]):
                _op_leaf(b, "aten::as_strided", [w, scalar_list([n_in, n_out]), scalar_list([1, n_in]), NONE])
        _op_leaf(b, "aten::view", [x, scalar_list([TOKENS, n_in])])
        wt = tensor(n_in, n_out, strides=(1, n_in))
        inputs = [bias, tensor(TOKENS, n_in), wt, scalar(1), scalar(1)]
        with b.span("aten::addmm", inputs, seq=seq) as sp:
            b.fwd_flow_start(key, sp)
            b.advance(3000, 9000)
            layout = "tn" if family in ("sm90", "nvjet") else "nt"
            b.kernel(gemm_kernel(TOKENS, n_out, n_in, layout, family), gemm_ns(TOKENS, n_out, n_in, eff))
        _op_leaf(b, "aten::view", [tensor(TOKENS, n_out), scalar_list([BATCH, SEQ, n_out])])


def _elementwise_op(b: _StepBuilder, name: str, key: tuple | None, kernel: Kernel, inputs: list, nbytes: int) -> None:
    seq = b.forward_node(key) if key else None
    with b.span(name, inputs, seq=seq) as sp:
        if key:
            b.fwd_flow_start(key, sp)
        b.advance(2000, 6000)
        b.kernel(kernel, memory_ns(nbytes))


def _attention(b: _StepBuilder, layer: int) -> None:
    qkv = tensor(BATCH, SEQ, 3 * HIDDEN)
    with b.span("aten::split", [qkv, scalar(HIDDEN), scalar(-1)]):
        for i in range(3):
            with b.span("aten::narrow", [qkv, scalar(-1), scalar(i * HIDDEN), scalar(HIDDEN)]):
                _op_leaf(b, "aten::slice", [qkv, scalar(2), scalar(i * HIDDEN), scalar((i + 1) * HIDDEN), scalar(1)])
    strided = (SEQ * 3 * HIDDEN, HEAD_DIM, 3 * HIDDEN, 1)
    for _ in range(3):
        _op_leaf(
            b,
            "aten::view",
            [
                tensor(BATCH, SEQ, HIDDEN, strides=(SEQ * 3 * HIDDEN, 3 * HIDDEN, 1)),
                scalar_list([BATCH, SEQ, HEADS, HEAD_DIM]),
            ],
        )
        _op_leaf(b, "aten::transpose", [tensor(BATCH, SEQ, HEADS, HEAD_DIM), scalar(1), scalar(2)])
    q = tensor(BATCH, HEADS, SEQ, HEAD_DIM, strides=strided)
    key = ("sdpa", layer)
    seq = b.forward_node(key)
    sdpa_in = [q, q, q, NONE, scalar(0.0), scalar(True), NONE, scalar(False)]
    with b.span("aten::scaled_dot_product_attention", sdpa_in):
        with b.span(
            "aten::_scaled_dot_product_flash_attention",
            [q, q, q, scalar(0.0), scalar(True), scalar(False), NONE],
            seq=seq,
        ) as sp:
            b.fwd_flow_start(key, sp)
            for _ in range(3):
                _op_leaf(b, "aten::transpose", [q, scalar(1), scalar(2)])
            qt = tensor(BATCH, SEQ, HEADS, HEAD_DIM, strides=(SEQ * 3 * HIDDEN, 3 * HIDDEN, HEAD_DIM, 1))
            causal = [scalar(SEQ), scalar(SEQ), scalar(0.0), scalar(True), scalar(False)]
            fa_in = [qt] * 3 + [NONE] * 2 + causal + [NONE] * 4
            with b.span("aten::_flash_attention_forward", fa_in):
                _op_leaf(b, "aten::empty_like", [qt, NONE, NONE, NONE, NONE, NONE])
                _op_leaf(b, "aten::empty", [scalar_list([BATCH, HEADS, SEQ]), scalar(6), scalar(0), NONE, NONE, NONE])
                b.advance(3000, 8000)
                flops = 4.0 * BATCH * HEADS * SEQ * SEQ * HEAD_DIM / 2
                b.kernel(
                    Kernel(FLASH_FWD, 255, 49152, (SEQ // 128, BATCH, HEADS), (128, 1, 1)),
                    flops / (PEAK_BF16_FLOPS * 0.52) * 1e9,
                )
    ctx = tensor(BATCH, SEQ, HEADS, HEAD_DIM, strides=(SEQ * HIDDEN, HEAD_DIM, SEQ * HEAD_DIM, 1))
    _op_leaf(b, "aten::transpose", [tensor(BATCH, HEADS, SEQ, HEAD_DIM), scalar(1), scalar(2)])
    with b.span("aten::reshape", [ctx, scalar_list([BATCH, SEQ, HIDDEN])]):
        with b.span("aten::clone", [ctx, scalar(0)]):
            _op_leaf(b, "aten::empty_like", [ctx, NONE, NONE, NONE, NONE, scalar(0)])
            with b.span("aten::copy_", [tensor(BATCH, SEQ, HEADS, HEAD_DIM), ctx, scalar(False)]):
                b.advance(2000, 5000)
                b.kernel(
                    Kernel(COPY_KERNEL_NAME, 24, 0, (_cdiv(TOKENS * HIDDEN, 512), 1, 1), (128, 1, 1)),
                    memory_ns(TOKENS * HIDDEN * 4),
                )
        _op_leaf(b, "aten::_unsafe_view", [tensor(BATCH, SEQ, HEADS, HEAD_DIM), scalar_list([BATCH, SEQ, HIDDEN])])


def _forward_layer(b: _StepBuilder, layer: int) -> None:
    x = tensor(BATCH, SEQ, HIDDEN)
    add = elementwise_kernel(ADD_FUNCTOR, 3, TOKENS * HIDDEN)
    with b.python(f"nn.Module: TransformerLayer_{layer}", module_id=layer + 1):
        _layer_norm(b, ("ln1", layer))
        _linear(b, ("qkv", layer), HIDDEN, 3 * HIDDEN, "sm90", 0.70)
        _attention(b, layer)
        _linear(b, ("proj", layer), HIDDEN, HIDDEN, "ampere", 0.62)
        _elementwise_op(b, "aten::add", ("res1", layer), add, [x, x, scalar(1)], TOKENS * HIDDEN * 6)
        _layer_norm(b, ("ln2", layer))
        _linear(b, ("fc1", layer), HIDDEN, FFN, "sm90", 0.72)
        gelu = elementwise_kernel(_gelu_functor(False), 2, TOKENS * FFN)
        _elementwise_op(b, "aten::gelu", ("gelu", layer), gelu, [tensor(BATCH, SEQ, FFN), NONE], TOKENS * FFN * 4)
        _linear(b, ("fc2", layer), FFN, HIDDEN, "nvjet", 0.71)
        _elementwise_op(b, "aten::add", ("res2", layer), add, [x, x, scalar(1)], TOKENS * HIDDEN * 6)


def _embedding(b: _StepBuilder) -> None:
    ids = tensor(BATCH, SEQ, dtype="long int")
    w = tensor(VOCAB, HIDDEN)
    with b.span("aten::embedding", [w, ids, scalar(-1), scalar(False), scalar(False)]):
        _op_leaf(b, "aten::reshape", [ids, scalar_list([-1])])
        with b.span("aten::index_select", [w, scalar(0), tensor(TOKENS, dtype="long int")]):
            b.advance(2000, 6000)
            k = Kernel(INDEX_SELECT, 32, 0, (_cdiv(TOKENS * HIDDEN, 1024), 1, 1), (128, 1, 1))
            b.kernel(k, memory_ns(TOKENS * HIDDEN * 4))
        _op_leaf(b, "aten::view", [tensor(TOKENS, HIDDEN), scalar_list([BATCH, SEQ, HIDDEN])])


def _lm_head_and_loss(b: _StepBuilder) -> None:
    _layer_norm(b, ("lnf", 0))
    x = tensor(BATCH, SEQ, HIDDEN)
    w = tensor(VOCAB, HIDDEN)
    seq = b.forward_node(("lm_head", 0))
    with b.span("aten::linear", [x, w, NONE]):
        with b.span("aten::t", [w]):
            _op_leaf(b, "aten::transpose", [w, scalar(0), scalar(1)])
        with b.span("aten::matmul", [x, tensor(HIDDEN, VOCAB, strides=(1, HIDDEN))]):
            _op_leaf(b, "aten::view", [x, scalar_list([TOKENS, HIDDEN])])
            with b.span(
                "aten::mm", [tensor(TOKENS, HIDDEN), tensor(HIDDEN, VOCAB, strides=(1, HIDDEN))], seq=seq
            ) as sp:
                b.fwd_flow_start(("lm_head", 0), sp)
                b.advance(3000, 8000)
                b.kernel(gemm_kernel(TOKENS, VOCAB, HIDDEN, "tn", "sm90"), gemm_ns(TOKENS, VOCAB, HIDDEN, 0.74))
            _op_leaf(b, "aten::_unsafe_view", [tensor(TOKENS, VOCAB), scalar_list([BATCH, SEQ, VOCAB])])
    logits = tensor(TOKENS, VOCAB)
    target = tensor(TOKENS, dtype="long int")
    with b.span("aten::cross_entropy_loss", [logits, target, NONE, scalar(1), scalar(-100), scalar(0.0)]):
        seq = b.forward_node(("log_softmax", 0))
        with b.span("aten::log_softmax", [logits, scalar(1), NONE]):
            with b.span("aten::_log_softmax", [logits, scalar(1), scalar(False)], seq=seq) as sp:
                b.fwd_flow_start(("log_softmax", 0), sp)
                b.advance(2000, 5000)
                b.kernel(Kernel(LOG_SOFTMAX_FWD, 40, 0, (TOKENS, 1, 1), (1024, 1, 1)), memory_ns(TOKENS * VOCAB * 4))
        seq = b.forward_node(("nll", 0))
        with b.span("aten::nll_loss_nd", [logits, target, NONE, scalar(1), scalar(-100)]):
            with b.span("aten::nll_loss", [logits, target, NONE, scalar(1), scalar(-100)]):
                with b.span("aten::nll_loss_forward", [logits, target, NONE, scalar(1), scalar(-100)], seq=seq) as sp:
                    b.fwd_flow_start(("nll", 0), sp)
                    b.advance(2000, 5000)
                    b.kernel(Kernel(NLL_FWD, 32, 0, (1, 1, 1), (32, 1, 1)), 9000)


@contextmanager
def _node(b: _StepBuilder, node: str, key: tuple | None, grad_inputs: list[tuple]) -> Iterator[None]:
    """Run an autograd node on the backward thread: the engine's wrapper op and the node op inside it."""
    seq = b.autograd.get(key, (None, -1)) if key else (None, -1)
    tag = (seq[0], 1) if seq[0] is not None else None
    with b.span(f"autograd::engine::evaluate_function: {node}", seq=tag):
        with b.span(node, grad_inputs, seq=tag) as sp:
            if seq[1] >= 0:
                b.fwdbwd_flow("f", seq[1], sp.start, sp.order)
            yield


def _accumulate_grad(b: _StepBuilder, shape: tuple[int, ...], bucket_nelems: int = 0) -> None:
    """AccumulateGrad of one parameter; the last one of a DDP bucket launches its all-reduce."""
    g = tensor(*shape)
    numel = math.prod(shape)
    with b.span("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"):
        with b.span("torch::autograd::AccumulateGrad", [g]):
            with b.span("aten::add_", [g, g, scalar(1)]):
                b.advance(1500, 4000)
                b.kernel(elementwise_kernel(ADD_FUNCTOR, 3, numel), memory_ns(numel * 6))
        if bucket_nelems:
            _ddp_allreduce(b, bucket_nelems)


def _allreduce_args(nelems: int, world_size: int) -> str:
    """Return the collective args (", ..." JSON members) that Kineto puts on an all-reduce's
    record_param_comms op and on its NCCL kernel."""
    ranks = json.dumps(list(range(world_size)))
    return (
        f', "Collective name": "allreduce", "In msg nelems": {nelems}, "Out msg nelems": {nelems}, '
        f'"Group size": {world_size}, "dtype": "BFloat16", "In split size": "[]", "Out split size": "[]", '
        f'"Process Group Name": "0", "Process Group Description": "default_pg", "Process Group Ranks": "{ranks}"'
    )


def _ddp_allreduce(b: _StepBuilder, nelems: int) -> None:
    """The DDP reducer's bucket all-reduce: NCCL on its own stream after waiting on the compute stream."""
    flat = tensor_list([(nelems,)])
    with b.span("c10d::allreduce_", [flat, NONE, NONE, NONE, scalar(-1)]):
        sp = b.comms_span()
        b.runtime("cudaEventRecord", 135)
        b.runtime("cudaStreamWaitEvent", 147)
        with b.span("nccl:all_reduce", cat="user_annotation"):
            ready = b.free[COMPUTE_STREAM]
            extra = _allreduce_args(nelems, b.world_size)
            n = max(b.world_size, 2)
            dur = 2.0 * (n - 1) / n * nelems * 2 / 370e9 * 1e9 + 18000
            b.kernel(
                Kernel(NCCL_ALLREDUCE, 96, 87568, (24, 1, 1), (640, 1, 1)), dur, NCCL_STREAM, extra, not_before=ready
            )
        b.runtime("cudaEventRecord", 135)
        b.close_comms(sp, nelems)


def _linear_grads(b: _StepBuilder, g, w, mm_weight, n_in: int, n_out: int, efficiency: tuple[float, float]) -> None:
    """The two GEMMs of a linear layer's backward: grad input = g @ W (``mm_weight`` as the op records it)
    and grad weight = g^T @ x, each after the transpose of its operand."""
    _op_leaf(b, "aten::t", [w])
    with b.span("aten::mm", [g, mm_weight]):
        b.advance(3000, 8000)
        b.kernel(gemm_kernel(TOKENS, n_in, n_out, "nn", "sm90"), gemm_ns(TOKENS, n_in, n_out, efficiency[0]))
    _op_leaf(b, "aten::t", [g])
    with b.span("aten::mm", [tensor(n_out, TOKENS, strides=(1, n_out)), tensor(TOKENS, n_in)]):
        b.advance(3000, 8000)
        b.kernel(gemm_kernel(n_out, n_in, TOKENS, "nt", "cutlass"), gemm_ns(n_out, n_in, TOKENS, efficiency[1]))


def _addmm_backward(b: _StepBuilder, key: tuple, n_in: int, n_out: int, bucket: int = 0) -> None:
    g = tensor(TOKENS, n_out)
    with _node(b, "AddmmBackward0", key, [g]):
        w = tensor(n_out, n_in)
        _linear_grads(b, g, w, w, n_in, n_out, (0.68, 0.64))
        with b.span("aten::sum", [g, scalar_list([0]), scalar(True), NONE]):
            b.advance(2000, 6000)
            b.kernel(Kernel(SUM_KERNEL, 32, 16, (_cdiv(n_out, 32), 4, 1), (32, 16, 1)), memory_ns(TOKENS * n_out * 2))
        _op_leaf(b, "aten::view", [tensor(1, n_out), scalar_list([n_out])])
        _op_leaf(b, "aten::t", [tensor(n_in, n_out)])
    _accumulate_grad(b, (n_out,))
    _accumulate_grad(b, (n_out, n_in), bucket)


def _layer_norm_backward(b: _StepBuilder, key: tuple, bucket: int = 0) -> None:
    g = tensor(BATCH, SEQ, HIDDEN)
    with _node(b, "NativeLayerNormBackward0", key, [g]):
        stats = tensor(TOKENS, 1, dtype="float")
        w = tensor(HIDDEN)
        inputs = [g, g, scalar_list([HIDDEN]), stats, stats, w, w, scalar_list([1, 1, 1])]
        with b.span("aten::native_layer_norm_backward", inputs):
            b.advance(3000, 7000)
            b.kernel(Kernel(LN_BWD_INPUT, 40, 0, (TOKENS, 1, 1), (128, 1, 1)), memory_ns(TOKENS * HIDDEN * 6))
            b.kernel(
                Kernel(LN_BWD_GAMMA, 64, 8448, (_cdiv(HIDDEN, 32), 1, 1), (32, 32, 1)), memory_ns(TOKENS * HIDDEN * 4)
            )
    _accumulate_grad(b, (HIDDEN,))
    _accumulate_grad(b, (HIDDEN,), bucket)


def _attention_backward(b: _StepBuilder, layer: int) -> None:
    qt = tensor(BATCH, SEQ, HEADS, HEAD_DIM)
    with _node(b, "ScaledDotProductFlashAttentionBackward0", ("sdpa", layer), [tensor(BATCH, HEADS, SEQ, HEAD_DIM)]):
        q = tensor(BATCH, HEADS, SEQ, HEAD_DIM)
        stats = tensor(BATCH, HEADS, SEQ, dtype="float")
        bwd_tail = [NONE, NONE, scalar(SEQ), scalar(SEQ), scalar(0.0), scalar(True), NONE, NONE, NONE]
        inputs = [q] * 5 + [stats] + bwd_tail
        with b.span("aten::_scaled_dot_product_flash_attention_backward", inputs):
            with b.span("aten::_flash_attention_backward", [qt] * 5 + [stats] + bwd_tail):
                for _ in range(3):
                    _op_leaf(b, "aten::empty_like", [qt, NONE, NONE, NONE, NONE, NONE])
                _op_leaf(b, "aten::empty", [scalar_list([BATCH, HEADS, SEQ]), scalar(6), NONE, NONE, NONE, NONE])
                acc = BATCH * SEQ * HEADS * HEAD_DIM * 4
                with b.span("aten::zeros", [scalar_list([BATCH, SEQ, HEADS, HEAD_DIM]), scalar(6), NONE, NONE, NONE]):
                    _op_leaf(
                        b,
                        "aten::empty",
                        [scalar_list([BATCH, SEQ, HEADS, HEAD_DIM]), scalar(6), NONE, NONE, NONE, NONE],
                    )
                    with b.span("aten::zero_", [tensor(BATCH, SEQ, HEADS, HEAD_DIM, dtype="float")]):
                        b.advance(1500, 4000)
                        b.memset(acc)
                b.advance(3000, 7000)
                grid = (SEQ // 128, BATCH, HEADS)
                b.kernel(Kernel(FLASH_BWD_DOT, 40, 0, grid, (256, 1, 1)), memory_ns(TOKENS * HIDDEN * 4))
                flops = 2.5 * 4.0 * BATCH * HEADS * SEQ * SEQ * HEAD_DIM / 2
                b.kernel(
                    Kernel(FLASH_BWD_MAIN, 255, 98304, (SEQ // 64, BATCH, HEADS), (256, 1, 1)),
                    flops / (PEAK_BF16_FLOPS * 0.42) * 1e9,
                )
                b.kernel(
                    Kernel(FLASH_BWD_CONVERT, 56, 0, (SEQ // 128, BATCH, HEADS), (256, 1, 1)), memory_ns(acc * 1.5)
                )
    with _node(b, "TransposeBackward0", None, [q]):
        _op_leaf(b, "aten::transpose", [q, scalar(1), scalar(2)])
    with _node(b, "SplitBackward0", None, [qt, qt, qt]):
        with b.span("aten::cat", [tensor_list([(BATCH, SEQ, HIDDEN)] * 3), scalar(-1)]):
            b.advance(2000, 6000)
            b.kernel(
                Kernel(CAT_KERNEL, 30, 0, (_cdiv(TOKENS * HIDDEN, 4096), 3, 1), (128, 1, 1)),
                memory_ns(TOKENS * 3 * HIDDEN * 4),
            )


def _backward_layer(b: _StepBuilder, layer: int) -> None:
    x = tensor(BATCH, SEQ, HIDDEN)
    with _node(b, "AddBackward0", ("res2", layer), [x]):
        pass
    _addmm_backward(b, ("fc2", layer), FFN, HIDDEN)
    with _node(b, "GeluBackward0", ("gelu", layer), [tensor(BATCH, SEQ, FFN)]):
        h = tensor(BATCH, SEQ, FFN)
        with b.span("aten::gelu_backward", [h, h, NONE]):
            b.advance(2000, 6000)
            b.kernel(elementwise_kernel(_gelu_functor(True), 3, TOKENS * FFN), memory_ns(TOKENS * FFN * 6))
    _addmm_backward(b, ("fc1", layer), HIDDEN, FFN)
    _layer_norm_backward(b, ("ln2", layer))
    with _node(b, "AddBackward0", ("res1", layer), [x]):
        pass
    _addmm_backward(b, ("proj", layer), HIDDEN, HIDDEN)
    with _node(b, "UnsafeViewBackward0", None, [x]):
        _op_leaf(b, "aten::reshape", [x, scalar_list([BATCH, SEQ, HEADS, HEAD_DIM])])
    _attention_backward(b, layer)
    _addmm_backward(b, ("qkv", layer), HIDDEN, 3 * HIDDEN)
    params = 4 * HIDDEN * HIDDEN + 2 * HIDDEN * FFN + 9 * HIDDEN + FFN + 4 * HIDDEN
    _layer_norm_backward(b, ("ln1", layer), bucket=params)


def _loss_backward(b: _StepBuilder) -> None:
    logits = tensor(TOKENS, VOCAB)
    with _node(b, "NllLossBackward0", ("nll", 0), [tensor()]):
        with b.span(
            "aten::nll_loss_backward",
            [tensor(), logits, tensor(TOKENS, dtype="long int"), NONE, scalar(1), scalar(-100), tensor()],
        ):
            with b.span("aten::zero_", [logits]):
                with b.span("aten::fill_", [logits, scalar(0)]):
                    b.advance(1500, 4000)
                    b.kernel(elementwise_kernel(FILL_FUNCTOR, 1, TOKENS * VOCAB), memory_ns(TOKENS * VOCAB * 2))
            b.advance(1500, 4000)
            b.kernel(Kernel(NLL_BWD, 30, 0, (1, 1, 1), (32, 1, 1)), 4000)
    with _node(b, "LogSoftmaxBackward0", ("log_softmax", 0), [logits]):
        with b.span("aten::_log_softmax_backward_data", [logits, logits, scalar(1), scalar(15)]):
            b.advance(2000, 5000)
            b.kernel(Kernel(LOG_SOFTMAX_BWD, 40, 0, (TOKENS, 1, 1), (1024, 1, 1)), memory_ns(TOKENS * VOCAB * 6))
    with _node(b, "UnsafeViewBackward0", None, [tensor(BATCH, SEQ, VOCAB)]):
        _op_leaf(b, "aten::reshape", [tensor(BATCH, SEQ, VOCAB), scalar_list([TOKENS, VOCAB])])
    g = tensor(TOKENS, VOCAB)
    with _node(b, "MmBackward0", ("lm_head", 0), [g]):
        w = tensor(HIDDEN, VOCAB, strides=(1, HIDDEN))
        _linear_grads(b, g, w, tensor(VOCAB, HIDDEN), HIDDEN, VOCAB, (0.70, 0.63))
    _accumulate_grad(b, (VOCAB, HIDDEN))
    _layer_norm_backward(b, ("lnf", 0), bucket=VOCAB * HIDDEN + 2 * HIDDEN)


def _optimizer(b: _StepBuilder) -> None:
    per_layer = [
        (3 * HIDDEN, HIDDEN),
        (3 * HIDDEN,),
        (HIDDEN, HIDDEN),
        (HIDDEN,),
        (FFN, HIDDEN),
        (FFN,),
        (HIDDEN, FFN),
        (HIDDEN,),
    ]
    per_layer += [(HIDDEN,)] * 4
    with b.annotation("Optimizer.step#AdamW.step"):
        b.runtime("cudaStreamWaitEvent", 147)
        b.free[COMPUTE_STREAM] = max(b.free[COMPUTE_STREAM], b.free[NCCL_STREAM])
        steps = [()] * len(per_layer)
        with b.span("aten::_foreach_add_", [tensor_list(steps, "float"), scalar(1)]):
            b.advance(3000, 9000)
            b.kernel(Kernel(FOREACH_ADD, 18, 0, (1, 1, 1), (512, 1, 1)), 4500)
        for _ in range(b.layers):  # one parameter group per layer
            numel = sum(math.prod(s) for s in per_layer)
            lists = [tensor_list(per_layer)] * 4 + [tensor_list([]), tensor_list(steps, "float")]
            hyper = [
                scalar(3e-4),
                scalar(0.9),
                scalar(0.95),
                scalar(0.1),
                scalar(1e-08),
                scalar(False),
                scalar(False),
                NONE,
                NONE,
            ]
            with b.span("aten::_fused_adamw_", lists + hyper):
                b.advance(8000, 20000)
                b.kernel(
                    Kernel(FUSED_ADAM, 90, 0, (_cdiv(numel, 65536 * 4), 1, 1), (512, 1, 1)), memory_ns(numel * 16, 0.85)
                )


def build_step(rng: random.Random, layers: int, world_size: int) -> _StepBuilder:
    """Return the builder holding one complete training step (times relative to its start)."""
    b = _StepBuilder(rng, layers, world_size)
    step_name = "ProfilerStep#%d"
    with b.annotation(step_name, step_slot=True):
        with b.annotation("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", gpu=False):
            ids = tensor(BATCH, SEQ, dtype="long int")
            with b.span("aten::stack", [tensor_list([(SEQ,)] * BATCH, "long int"), scalar(0)]):
                _op_leaf(b, "aten::cat", [tensor_list([(1, SEQ)] * BATCH, "long int"), scalar(0)])
            b.advance(150e3, 450e3)  # collate and pin_memory in Python
        for _ in range(2):
            with b.span("aten::to", [ids, NONE, NONE, NONE, NONE, scalar(True), scalar(False), NONE]):
                with b.span("aten::_to_copy", [ids, NONE, NONE, NONE, NONE, scalar(True), NONE]):
                    _op_leaf(
                        b,
                        "aten::empty_strided",
                        [scalar_list([BATCH, SEQ]), scalar_list([SEQ, 1]), scalar(4), NONE, NONE, NONE],
                    )
                    with b.span("aten::copy_", [ids, ids, scalar(True)]):
                        b.memcpy("HtoD", "Pinned -> Device", BATCH * SEQ * 8)
        with b.annotation("Optimizer.zero_grad#AdamW.zero_grad", gpu=False):
            b.advance(20e3, 60e3)
        with b.annotation("## forward ##"):
            with b.python("nn.Module: GPT_0", module_id=0):
                _embedding(b)
                for layer in range(layers):
                    _forward_layer(b, layer)
                _lm_head_and_loss(b)
        with b.annotation("## backward ##"):
            with b.span("aten::ones_like", [tensor(), NONE, NONE, NONE, NONE, NONE]):
                with b.span("aten::fill_", [tensor(), scalar(1)]):
                    b.advance(1500, 4000)
                    b.kernel(elementwise_kernel(FILL_FUNCTOR, 1, 1), 1900)
            b.cursor[BWD_TID] = b.advance(15e3, 40e3)
            b.tid = BWD_TID
            _loss_backward(b)
            for layer in reversed(range(layers)):
                _backward_layer(b, layer)
            b.tid = MAIN_TID
            b.cursor[MAIN_TID] = b.cursor[BWD_TID] + int(rng.uniform(8e3, 25e3))
        _optimizer(b)
        with b.span("aten::item", [tensor(dtype="float")]):
            with b.span("aten::_local_scalar_dense", [tensor(dtype="float")]):
                done = b.memcpy("DtoH", "Device -> Pageable", 4)
                now = b.cursor[MAIN_TID]
                b.runtime("cudaStreamSynchronize", 131, max(done - now, 0) + int(rng.uniform(3000, 9000)))
    return b


# ---------------------------------------------------------------------------------------------------
# Compiling a step into a shiftable template


@dataclass
class _Variant:
    """One compiled step: a %-template and how to compute its placeholder values for any shift."""

    template: str
    base: np.ndarray  # per slot: step-relative value
    kind: np.ndarray  # per slot: which offset to add
    src: np.ndarray  # per output field: its slot
    div_pos: np.ndarray  # output fields holding a time's microseconds
    mod_pos: np.ndarray  # output fields holding a time's nanosecond remainder
    counters: list[int]
    span_ns: int
    counts: Counter


def _gpu_annotation_event(name: str, ext: int, launches: list, step_slot: bool) -> _Event | None:
    """Return the gpu_user_annotation spanning an annotation's compute-stream work (None if it had none)."""
    on_stream = [(s, e) for _, stream, s, e in launches if stream == COMPUTE_STREAM]
    if not on_stream:
        return None
    start = min(s for s, _ in on_stream)
    end = max(e for _, e in on_stream)
    name_lit = json.dumps(name) if step_slot else _name(name)
    text = (
        f'  {{\n    "ph": "X", "cat": "gpu_user_annotation", "name": {name_lit}, '
        f'"pid": 0, "tid": {COMPUTE_STREAM},\n    "ts": {TS}, "dur": {fmt_us(end - start)},\n'
        f'    "args": {{\n      "External id": %d\n    }}\n  }}'
    )
    slots = ([(K_STEP, 0)] if step_slot else []) + [(K_TIME, start), (K_EXT, ext)]
    return _Event((start, 0, 0), text, slots, -1, ("X", "gpu_user_annotation"))


def compile_step(b: _StepBuilder) -> _Variant:
    """Return the step of builder `b` as a shiftable template, events in Kineto's file order."""
    cpu = sorted(b.cpu, key=lambda e: e.key)
    evidx = 0
    for ev in cpu:
        if ev.evidx_slot >= 0:
            kind, _ = ev.slots[ev.evidx_slot]
            ev.slots[ev.evidx_slot] = (kind, evidx)
            evidx += 1
    b.counters[K_EVIDX] = evidx
    gpu = sorted(b.gpu, key=lambda e: e.key)
    annots = [_gpu_annotation_event(n, ext, ls, step) for n, ls, ext, _, step in b.gpu_ranges]
    events = cpu + gpu + [a for a in annots if a is not None]
    counts: Counter = Counter()
    for ev in events:
        if ev.counts_as[0] == "bundle":
            counts[("X", ev.counts_as[1])] += 1
            counts[("f", "ac2g")] += 1
            counts[("X", "cuda_runtime")] += 1
            counts[("s", "ac2g")] += 1
        else:
            counts[ev.counts_as] += 1
    slots = [s for ev in events for s in ev.slots]
    kind = np.array([k for k, _ in slots], dtype=np.int64)
    base = np.array([v for _, v in slots], dtype=np.int64)
    n_out = len(slots) + int((kind == K_TIME).sum())
    src = np.empty(n_out, dtype=np.int64)
    is_time = kind == K_TIME
    width = np.where(is_time, 2, 1)
    first = np.cumsum(width) - width
    src[first] = np.arange(len(slots))
    src[first[is_time] + 1] = np.flatnonzero(is_time)
    span = max(max(b.cursor.values()), max(b.free.values())) + int(b.rng.uniform(40e3, 120e3))
    template = ",\n".join(ev.text for ev in events)
    return _Variant(template, base, kind, src, first[is_time], first[is_time] + 1, list(b.counters), span, counts)


def render(v: _Variant, offsets: np.ndarray) -> str:
    """Return the text of variant `v` with its times and ids shifted by `offsets` (one per slot kind)."""
    values = v.base + offsets[v.kind]
    out = values[v.src]
    out[v.div_pos] //= 1000
    out[v.mod_pos] %= 1000
    return v.template % tuple(out.tolist())


# ---------------------------------------------------------------------------------------------------
# Header and trailer


def header_text(rank: int, world_size: int) -> str:
    """Return everything before the first event: trace metadata in Kineto's order and layout."""
    p = DEVICE_PROPERTIES
    devices = []
    for i in range(DEVICE_COUNT):
        devices.append(
            f'    {{\n      "id": {i}, "name": "{p["name"]}", "totalGlobalMem": {p["totalGlobalMem"]},\n'
            f'      "computeMajor": {p["computeMajor"]}, "computeMinor": {p["computeMinor"]},\n'
            f'      "maxThreadsPerBlock": {p["maxThreadsPerBlock"]}, "maxThreadsPerMultiprocessor": '
            f"{p['maxThreadsPerMultiprocessor']},\n"
            f'      "regsPerBlock": {p["regsPerBlock"]}, "warpSize": {p["warpSize"]},\n'
            f'      "sharedMemPerBlock": {p["sharedMemPerBlock"]}, "numSms": {p["numSms"]}\n'
            f'    , "regsPerMultiprocessor": {p["regsPerMultiprocessor"]}, "sharedMemPerBlockOptin": '
            f'{p["sharedMemPerBlockOptin"]}, "sharedMemPerMultiprocessor": {p["sharedMemPerMultiprocessor"]}\n    }}'
        )
    dist = {
        "backend": "nccl",
        "rank": rank,
        "world_size": world_size,
        "pg_count": 1,
        "pg_config": [
            {
                "pg_name": "0",
                "pg_desc": "default_pg",
                "backend_config": "cuda:nccl",
                "pg_size": world_size,
                "ranks": list(range(world_size)),
            }
        ],
        "nccl_version": "2.21.5",
    }
    return (
        '\n{\n  "schemaVersion": 1,\n  "deviceProperties": [\n'
        + ",\n".join(devices)
        + '\n  ],\n  "cupti_version": 24,\n  "cuda_runtime_version": 12040,\n  "cuda_driver_version": 12040,\n'
        + f'  "record_shapes": 1,\n  "distributedInfo": {json.dumps(dist)},\n  "traceEvents": [\n'
    )


def _meta_event(name: str, ts: int, pid: int | str, tid: int | str, key: str, value: object) -> str:
    """Return one "M" (metadata) event naming or ordering a process or thread."""
    where = f'"pid": {json.dumps(pid)}, "tid": {json.dumps(tid)}'
    return (
        f'  {{\n    "name": "{name}", "ph": "M", "ts": {fmt_us(ts)}, {where},\n'
        f'    "args": {{\n      "{key}": {json.dumps(value)}\n    }}\n  }}'
    )


def trailer_events(start_ns: int, end_ns: int) -> list[tuple[str, tuple[str, str]]]:
    """Return the closing events (process/thread metadata, the profiler span, instants) with their (ph, cat)."""
    out: list[tuple[str, tuple[str, str]]] = []
    meta = ("M", "")
    out.append((_meta_event("process_name", start_ns, PID, 0, "name", "python3"), meta))
    out.append((_meta_event("process_labels", start_ns, PID, 0, "labels", "CPU"), meta))
    out.append((_meta_event("process_sort_index", start_ns, PID, 0, "sort_index", PID), meta))
    for dev in range(DEVICE_COUNT):
        out.append((_meta_event("process_name", start_ns, dev, 0, "name", "python3"), meta))
        out.append((_meta_event("process_labels", start_ns, dev, 0, "labels", f"GPU {dev}"), meta))
        out.append((_meta_event("process_sort_index", start_ns, dev, 0, "sort_index", 16777216 + dev), meta))
    for stream in (COMPUTE_STREAM, NCCL_STREAM):
        out.append((_meta_event("thread_name", start_ns, 0, stream, "name", f"stream {stream} "), meta))
        out.append((_meta_event("thread_sort_index", start_ns, 0, stream, "sort_index", stream), meta))
    for tid, label in ((MAIN_TID, "python3"), (BWD_TID, "pt_autograd_0")):
        out.append((_meta_event("thread_name", start_ns, PID, tid, "name", f"thread {tid} ({label})"), meta))
        out.append((_meta_event("thread_sort_index", start_ns, PID, tid, "sort_index", tid), meta))
    span = (
        f'  {{\n    "ph": "X", "cat": "Trace", "ts": {fmt_us(start_ns)}, "dur": {fmt_us(end_ns - start_ns)},\n'
        '    "pid": "Spans", "tid": "PyTorch Profiler",\n    "name": "PyTorch Profiler (0)",\n'
        '    "args": {\n      "Op count": 0\n    }\n  }'
    )
    out.append((span, ("X", "Trace")))
    sort_spans = (
        f'  {{\n    "name": "process_sort_index", "ph": "M", "ts": {fmt_us(start_ns)},\n'
        '    "pid": "Spans", "tid": 0,\n    "args": {\n      "sort_index": 536870912\n    }\n  }'
    )
    out.append((sort_spans, meta))
    out.append(
        (
            '  {\n    "name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g",\n'
            f'    "pid": "Traces", "tid": "Trace PyTorch Profiler", "ts": {fmt_us(start_ns)}\n  }}',
            ("i", ""),
        )
    )
    out.append(
        (
            '  {\n    "name": "Record Window End", "ph": "i", "s": "g",\n'
            f'    "pid": "", "tid": "", "ts": {fmt_us(end_ns)}\n  }}',
            ("i", ""),
        )
    )
    return out


def closing_text(rank: int) -> str:
    """Return everything after the events array: traceName, displayTimeUnit, baseTimeNanoseconds."""
    return (
        f'\n  ],\n  "traceName": "/tmp/gpuan_synth/rank{rank}.pt.trace.json",\n  "displayTimeUnit": "ms",\n'
        f'  "baseTimeNanoseconds": {BASE_TIME_NS}\n}}\n'
    )


# ---------------------------------------------------------------------------------------------------
# Writing


def _open_sink(path: Path, compress: bool) -> tuple[io.BufferedIOBase, io.BufferedIOBase]:
    raw = open(path, "wb")
    if not compress:
        return raw, raw
    # mtime=0 and no file name keep the bytes reproducible; level 1 keeps gzip from being the bottleneck
    gz = gzip_module.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=1)
    return gz, raw


class _StepVariants:
    """The compiled steps a trace is made of: the first _MAX_VARIANTS steps are built each from its own
    seed, and every later step repeats one of them picked at random (building is the slow part)."""

    def __init__(self, seed: int, layers: int, world_size: int) -> None:
        self.seed, self.layers, self.world_size = seed, layers, world_size
        self.built: list[_Variant] = []
        self.pick = random.Random(seed * 7919 + 17)

    def for_step(self, step_index: int) -> _Variant:
        """Return the variant that step `step_index` (counted from 0, asked for in order) repeats."""
        if step_index < _MAX_VARIANTS and step_index >= len(self.built):
            rng = random.Random(self.seed * 1_000_003 + step_index)
            self.built.append(compile_step(build_step(rng, self.layers, self.world_size)))
        if step_index < _MAX_VARIANTS:
            return self.built[step_index]
        return self.built[self.pick.randrange(_MAX_VARIANTS)]


class _Chunks:
    """Text gathered into large writes. The writes fall where they always did, so that a gzip stream
    is the same bytes from one version to the next."""

    def __init__(self, sink: io.BufferedIOBase) -> None:
        self.sink = sink
        self.parts: list[str] = []
        self.pending = 0  # characters gathered and not yet written
        self.chars = 0  # characters in all

    def add(self, text: str) -> None:
        self.parts.append(text)
        self.pending += len(text)
        self.chars += len(text)

    def write_when_full(self) -> None:
        if self.pending >= _CHUNK_CHARS:
            self.write()

    def write(self) -> None:
        self.sink.write("".join(self.parts).encode("ascii"))
        self.parts, self.pending = [], 0


@dataclass
class _Written:
    """What a trace holds: events by (ph, cat), uncompressed characters, steps and its end time (ns)."""

    counts: Counter
    chars: int
    steps: int
    end_ns: int


def _first_offsets() -> np.ndarray:
    """Return the offsets (one per slot kind) of the first step: its start time and the first ids."""
    offsets = np.zeros(N_KINDS, dtype=np.int64)
    offsets[K_TIME] = TRACE_START_NS + STEP_START_OFFSET_NS
    offsets[K_EXT], offsets[K_CORR], offsets[K_RF], offsets[K_SEQ] = 1, 5183, 1, 1000
    offsets[K_FLOW], offsets[K_PYID], offsets[K_STEP] = 1, 1, 1
    return offsets


def _advance(offsets: np.ndarray, v: _Variant) -> None:
    """Shift `offsets` past one step of variant `v`: the ids it used and its time span."""
    for k in (K_EXT, K_CORR, K_RF, K_EVIDX, K_SEQ, K_FLOW, K_PYID):
        offsets[k] += v.counters[k]
    offsets[K_TIME] += v.span_ns
    offsets[K_STEP] += 1


def _enough_steps(n_steps: int, steps: int, target_bytes: int | None, chars: int, last_step_chars: int) -> bool:
    """Whether the trace has its `steps`, or (with `target_bytes`) is as near that size as it gets."""
    if target_bytes is None:
        return n_steps >= steps
    # one more step would overshoot the target by more than stopping undershoots it
    return n_steps > 0 and chars + last_step_chars // 2 + _TRAILER_CHARS >= target_bytes


def _trailer(n_steps: int, end_ns: int, rank: int, counts: Counter) -> str:
    """Return the closing events and everything after the events array, counting the events in `counts`."""
    tail = []
    for i, (text, key) in enumerate(trailer_events(TRACE_START_NS, end_ns)):
        tail.append((",\n" if n_steps or i else "") + text)
        counts[key] += 1
    tail.append(closing_text(rank))
    return "".join(tail)


def _write_trace(
    sink: io.BufferedIOBase, variants: _StepVariants, steps: int, target_bytes: int | None, rank: int
) -> _Written:
    """Write the whole trace to `sink`: header, steps until there are enough, trailer."""
    offsets = _first_offsets()
    counts: Counter = Counter()
    chunks = _Chunks(sink)
    chunks.add(header_text(rank, variants.world_size))
    n_steps = last_step_chars = 0
    while not _enough_steps(n_steps, steps, target_bytes, chunks.chars, last_step_chars):
        v = variants.for_step(n_steps)
        text = render(v, offsets)
        if n_steps:
            text = ",\n" + text
        chunks.add(text)
        last_step_chars = len(text)
        counts.update(v.counts)
        _advance(offsets, v)
        n_steps += 1
        chunks.write_when_full()
    end_ns = int(offsets[K_TIME]) + 250_000
    chunks.add(_trailer(n_steps, end_ns, rank, counts))
    chunks.write()
    return _Written(counts, chunks.chars, n_steps, end_ns)


def _summary(path: Path, compress: bool, layers: int, written: _Written, t0: float) -> dict:
    """Return write_kineto_trace's summary of the trace written to `path` (see there)."""
    counts = written.counts
    by_ph_cat = {f"{ph}/{cat}": n for (ph, cat), n in sorted(counts.items())}
    by_cat: Counter = Counter()
    by_ph: Counter = Counter()
    for (ph, cat), n in counts.items():
        by_cat[cat] += n
        by_ph[ph] += n
    return {
        "path": str(path),
        "gzip": compress,
        "events": sum(counts.values()),
        "kernels": counts[("X", "kernel")],
        "cpu_ops": counts[("X", "cpu_op")],
        "runtime": counts[("X", "cuda_runtime")],
        "memcpy": counts[("X", "gpu_memcpy")],
        "memset": counts[("X", "gpu_memset")],
        "bytes": written.chars,
        "file_bytes": path.stat().st_size,
        "steps": written.steps,
        "layers": layers,
        "duration_ns": written.end_ns - TRACE_START_NS,
        "by_ph_cat": by_ph_cat,
        "by_cat": dict(sorted(by_cat.items())),
        "by_ph": dict(sorted(by_ph.items())),
        "seconds": time.perf_counter() - t0,
    }


def write_kineto_trace(
    path: str | os.PathLike,
    *,
    steps: int = 3,
    layers: int = 4,
    target_bytes: int | None = None,
    seed: int = 0,
    gzip: bool | None = None,
    rank: int = 0,
    world_size: int = 1,
) -> dict:
    """Write a synthetic Kineto trace of `steps` training steps of a `layers`-layer transformer.

    With `target_bytes`, steps are added (ignoring `steps`) until the uncompressed JSON reaches about
    that size. Output is gzip-compressed when `gzip` is true, or by default when `path` ends in ``.gz``.
    The same arguments always give the same bytes. Returns a summary: ``events``, ``kernels``,
    ``bytes`` (uncompressed), ``file_bytes``, ``steps``, ``by_ph_cat`` ({"X/cpu_op": n, "M/": n, ...}),
    ``by_cat``, ``by_ph``, ``duration_ns``, ``path``, ``gzip`` and ``seconds`` (time taken).
    """
    t0 = time.perf_counter()
    path = Path(path)
    compress = path.name.endswith(".gz") if gzip is None else bool(gzip)
    if layers < 1:
        raise ValueError("layers must be at least 1")
    variants = _StepVariants(seed, layers, world_size)
    sink, raw = _open_sink(path, compress)
    try:
        written = _write_trace(sink, variants, steps, target_bytes, rank)
    finally:
        sink.close()
        if raw is not sink:
            raw.close()
    return _summary(path, compress, layers, written, t0)


def sample_trace_path(directory: str | os.PathLike) -> Path:
    """Return the path of the sample trace ``gpuan_sample.json.gz`` in `directory`, writing it if missing.

    It is 3 steps of a 4-layer model (well under 1 MB compressed), written atomically so that concurrent
    callers never see half a file."""
    directory = Path(directory)
    path = directory / SAMPLE_NAME
    if path.exists():
        return path
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{SAMPLE_NAME}.{os.getpid()}.tmp"
    try:
        write_kineto_trace(tmp, steps=3, layers=4, seed=0, gzip=True)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path
