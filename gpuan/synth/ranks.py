"""Synthetic per-rank GPU traces of a data-parallel job, for the replay's tests and benchmark.

Each step, every rank runs its compute kernels, then a run of NCCL all-reduces (one process group, one
stream) that all ranks enter in the same order. A collective starts on a rank when that rank arrives and
ends on every rank together, a transfer time after the last arrival, as NCCL's kernels do. A straggler
(step, rank, delay) makes that rank's compute of that step longer, so the others wait for it. The
plan (arrivals per step and rank) is computed for all ranks at once; each rank's events come from the
plan alone, so ranks can be generated one by one, and each is written as a Parquet event table.

By default the compute kernels of a step are random slices of it with random names. With ``repeat`` every
step runs the same kernels in the same order on every rank (a training step: what ``gpuan fleet`` finds
as a cycle), each kernel's duration its own base time scaled by a per-(step, rank) factor, and slow
kernels or idle gaps can be planted at a (step, rank, position).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from gpuan.trace import parquet
from gpuan.trace.kinds import KINDS
from gpuan.trace.table import Trace, build_table

ALLREDUCE_KERNEL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
COMPUTE_KERNELS = ("sm90_xmma_gemm_bf16bf16_bf16f32", "vectorized_elementwise_kernel", "reduce_kernel")
#: the kernels a ``repeat`` plan's steps are made of: three that run once a step (first, middle, last, as
#: an embedding, a loss and an optimizer kernel do), and the others in a random order drawn once
REPEAT_KERNELS = ("embedding_forward_kernel", "loss_kernel", "optimizer_step_kernel") + tuple(
    f"{name}_{i}" for i in range(6) for name in COMPUTE_KERNELS
)
#: the idle ns between consecutive compute kernels of a ``repeat`` plan
REPEAT_GAP = 200


@dataclass(frozen=True)
class Plan:
    """When each rank arrives at each step's collectives, and how long they take."""

    n_ranks: int
    steps: int
    kernels_per_step: int
    collectives_per_step: int
    step_start: np.ndarray  # [steps] ns
    compute: np.ndarray  # [steps, ranks] ns of compute before the collectives
    transfer: np.ndarray  # [steps, collectives] ns after the last arrival
    nelems: int
    seed: int
    #: with ``repeat``: the kernel name of each position of a step (indexes :data:`REPEAT_KERNELS`), its
    #: base duration in ns, the per-(step, rank) factor on it, and the planted (step, rank, position, ns)
    #: extra kernel time and idle time before a kernel
    repeat: bool = False
    template: np.ndarray | None = None
    base: np.ndarray | None = None
    factor: np.ndarray | None = None
    slow_kernels: tuple[tuple[int, int, int, int], ...] = ()
    idle_gaps: tuple[tuple[int, int, int, int], ...] = ()


def plan(
    n_ranks: int,
    steps: int,
    events_per_rank: int,
    *,
    collectives_per_step: int = 4,
    stragglers: tuple[tuple[int, int, int], ...] = (),
    seed: int = 0,
    repeat: bool = False,
    slow_kernels: tuple[tuple[int, int, int, int], ...] = (),
    idle_gaps: tuple[tuple[int, int, int, int], ...] = (),
) -> Plan:
    """Return the plan of a job whose ranks each hold about `events_per_rank` events; each straggler is
    (step, rank, extra compute in ns). With `repeat` the steps repeat one kernel sequence (see the module
    docstring); `slow_kernels` and `idle_gaps` are (step, rank, position, extra ns) on the kernel at that
    position, or before it, and stragglers are idle time before a step's first kernel."""
    rng = np.random.default_rng(seed)
    per_step = max(events_per_rank // steps - collectives_per_step - 1, 1)
    compute = rng.normal(20e6, 0.5e6, (steps, n_ranks)).clip(10e6).astype(np.int64)
    for s, r, delay in stragglers:
        compute[s, r] += delay
    transfer = rng.uniform(0.5e6, 1.5e6, (steps, collectives_per_step)).astype(np.int64)
    extra: dict = {}
    if repeat:
        # drawn after the default plan's numbers, so that a plan without `repeat` is the same as before
        template = rng.integers(3, len(REPEAT_KERNELS), per_step)
        # kernels that run once a step: what makes the step's length show as a period
        template[[0, per_step // 2, per_step - 1]] = [0, 1, 2]
        base = rng.uniform(0.2, 1.8, per_step) * 20e6 / per_step
        factor = rng.normal(1.0, 0.01, (steps, n_ranks))
        extra = dict(repeat=True, template=template, base=base, factor=factor, slow_kernels=tuple(slow_kernels),
                     idle_gaps=tuple(idle_gaps) + tuple((s, r, 0, delay) for s, r, delay in stragglers))  # fmt: skip
        compute = np.stack([_repeat_durations(base, factor, extra, r).sum(axis=(1, 2)) for r in range(n_ranks)], 1)
    step_len = compute.max(axis=1) + transfer.sum(axis=1) + 1_000_000
    start = np.concatenate(([1_000_000], 1_000_000 + np.cumsum(step_len)[:-1]))
    return Plan(n_ranks, steps, per_step, collectives_per_step, start, compute, transfer, 25_000_000, seed, **extra)


def _repeat_durations(base: np.ndarray, factor: np.ndarray, extra: dict, rank: int) -> np.ndarray:
    """Return a ``repeat`` plan's (steps, kernels, 2) ns of `rank`: the idle time before each compute kernel
    (:data:`REPEAT_GAP`, none before the first, plus the planted gaps) and its duration (plus the planted
    extra time)."""
    steps = factor.shape[0]
    out = np.empty((steps, base.size, 2), np.int64)
    out[:, :, 1] = np.rint(base[None, :] * factor[:, rank, None]).astype(np.int64)
    out[:, :, 0] = REPEAT_GAP
    out[:, 0, 0] = 0
    for s, r, position, ns in extra["slow_kernels"]:
        if r == rank:
            out[s, position, 1] += ns
    for s, r, position, ns in extra["idle_gaps"]:
        if r == rank:
            out[s, position, 0] += ns
    return out


def rank_trace(p: Plan, rank: int) -> Trace:
    """Return rank `rank`'s trace under plan `p`: ProfilerStep annotations, compute kernels on stream 7,
    all-reduce kernels on stream 20 with their collective metadata."""
    rng = np.random.default_rng((p.seed, rank))
    k = p.kernels_per_step
    if p.repeat:
        # each kernel starts after its idle time, right after the previous one ends
        parts = _repeat_durations(p.base, p.factor, {"slow_kernels": p.slow_kernels, "idle_gaps": p.idle_gaps}, rank)
        ends = np.cumsum(parts.sum(axis=2), axis=1)
        k_start = (p.step_start[:, None] + ends - parts[:, :, 1]).ravel()
        k_dur = parts[:, :, 1].ravel()
    else:
        # compute kernels: back-to-back slices of the step's compute, tiny gaps between them
        cuts = np.sort(rng.integers(0, p.compute[:, rank, None], (p.steps, k - 1)), axis=1)
        edges = np.concatenate((np.zeros((p.steps, 1), np.int64), cuts, p.compute[:, rank, None]), axis=1)
        k_start = (p.step_start[:, None] + edges[:, :-1]).ravel()
        k_dur = np.maximum(np.diff(edges, axis=1) - 200, 1).ravel()
    # the collectives: the first starts at this rank's arrival, each ends for all at last arrival + transfer
    arrive = p.step_start + p.compute[:, rank]
    last = p.step_start + p.compute.max(axis=1)
    ends = last[:, None] + np.cumsum(p.transfer, axis=1)
    starts = np.concatenate((arrive[:, None], ends[:, :-1]), axis=1)
    c_start, c_dur = starts.ravel(), (ends - starts).ravel()
    a_start = p.step_start
    a_dur = ends[:, -1] - p.step_start

    n_k, n_c, n_a = k_start.size, c_start.size, a_start.size
    n = n_k + n_c + n_a
    kind = np.concatenate((np.full(n_k + n_c, KINDS.index("kernel")), np.full(n_a, KINDS.index("annotation"))))
    kernels = REPEAT_KERNELS if p.repeat else COMPUTE_KERNELS
    names = [*kernels, ALLREDUCE_KERNEL] + [f"ProfilerStep#{s}" for s in range(p.steps)]
    if p.repeat:
        compute_code = np.tile(p.template, p.steps)
    else:
        compute_code = rng.integers(0, len(COMPUTE_KERNELS), n_k)
    name_code = np.concatenate((compute_code, np.full(n_c, len(kernels)), len(kernels) + 1 + np.arange(n_a)))
    is_coll = np.zeros(n, bool)
    is_coll[n_k : n_k + n_c] = True
    gpu = np.arange(n) < n_k + n_c

    def dict_of(values: list[str], codes: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
        idx = pa.array(codes.astype(np.int32), mask=None if valid is None else ~valid)
        return pa.DictionaryArray.from_arrays(idx, pa.array(values))

    cols = {
        "ts": np.concatenate((k_start, c_start, a_start)),
        "dur": np.concatenate((k_dur, c_dur, a_dur)),
        "name": dict_of(names, name_code),
        "cat": dict_of(["kernel", "user_annotation"], (~gpu).astype(np.int32)),
        "kind": pa.DictionaryArray.from_arrays(pa.array(kind.astype(np.int8)), pa.array(KINDS)),
        "pid": np.where(gpu, 0, 1000 + rank),
        "tid": np.where(gpu, np.where(is_coll, 20, 7), 1000 + rank),
        "device": pa.array(np.zeros(n, np.int16), mask=~gpu),
        "stream": pa.array(np.where(is_coll, 20, 7), mask=~gpu),
        "rank": np.full(n, rank, np.int32),
        "collective": dict_of(["allreduce"], np.zeros(n), is_coll),
        "in_msg_nelems": pa.array(np.full(n, p.nelems), mask=~is_coll),
        "out_msg_nelems": pa.array(np.full(n, p.nelems), mask=~is_coll),
        "group_size": pa.array(np.full(n, p.n_ranks, np.int32), mask=~is_coll),
        "dtype": dict_of(["BFloat16"], np.zeros(n), is_coll),
        "pg_name": dict_of(["0"], np.zeros(n), is_coll),
    }
    order = np.lexsort((cols["ts"], kind))
    table = build_table(cols, n).take(pa.array(order))
    meta = {
        "source": f"synthetic rank {rank}",
        "format": "synthetic",
        "base_time_ns": 0,
        "rank": rank,
        "distributed_info": {"backend": "nccl", "rank": rank, "world_size": p.n_ranks},
    }
    return Trace(table, metadata=meta)


def write_run(p: Plan, directory: str | os.PathLike) -> list[Path]:
    """Write every rank's trace as ``rank<N>.parquet`` in `directory`; returns the paths."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    paths = []
    for r in range(p.n_ranks):
        paths.append(parquet.write(rank_trace(p, r), d / f"rank{r}.parquet"))
    return paths
