"""``gpuan.sol.analyse``: the one-contract entry of speed-of-light scoring."""

from __future__ import annotations

import pyarrow as pa

from gpuan.devices.model import Ceilings
from gpuan.engine import Engine
from gpuan.result import Result
from gpuan.sol.roofs import roofs_for
from gpuan.sol.score import merged_ops, score, scored_ops
from gpuan.sol.sections import result
from gpuan.trace.projection import Projection, projection
from gpuan.trace.table import Trace

#: rows of the ``lost_time`` table by default; the XLSX output's "top lost" sheet shows as many, so
#: ``gpuan sol`` asks for at least these
LOST_ROWS = 50


def reads() -> Projection:
    """Return what :func:`analyse` reads of the event table: the ops with their shapes, the GPU work and
    the launch calls that link them, and the annotations that name phases."""
    return projection(
        ("ts", "dur", "name", "cat", "kind", "pid", "tid", "device", "stream", "rank", "correlation", "external_id",
         "bytes", "memcpy_kind", "dtype", "input_dims", "input_types", "concrete_inputs", "grid_x", "grid_y",
         "grid_z", "block_x", "block_y", "block_z"),
        ("kernel", "memcpy", "memset", "cpu_op", "annotation", "gpu_annotation", "runtime", "driver"),
    )  # fmt: skip


def analyse(
    trace: Trace,
    *,
    engine: Engine | str | None = None,
    gpu: str | None = None,
    cpu: bool = False,
    ceilings: str | Ceilings = "datasheet",
    tf32: bool = False,
    top: int = LOST_ROWS,
) -> Result:
    """Score every op of a loaded `trace` against the roofs of the GPU named `gpu` (default: the GPU the
    trace recorded), or with `cpu` against this machine's CPU as ``gpuan sol calibrate --cpu`` measured it,
    and return the Result: tables ``ops``, ``by_layer_type``, ``by_function``, ``by_phase``, ``lost_time``
    (the `top` modelled ops losing the most time) and the summary of :func:`gpuan.sol.sections.result`.

    `ceilings`: "datasheet" peaks, or the measured ceilings ``gpuan sol calibrate`` saved, loaded like the
    trace: ``ceilings=gpuan.devices.ceilings.read_ceilings()`` (the file of ``$GPUAN_CEILINGS`` or
    ``~/.cache/gpuan/ceilings.json``; or pass a path); `cpu` needs them. `tf32` scores FP32 matrix ops
    against TF32 tensor cores; `engine`: None, "cpu", "gpu", "auto" or an Engine."""
    scored = score(trace, gpu=gpu, cpu=cpu, ceilings=ceilings, tf32=tf32, engine=engine)
    return result(scored, top)


def combine(
    parts: dict[str, pa.Table],
    metadata: dict,
    words: dict[str, pa.Array],
    *,
    gpu_activity: bool,
    engine: Engine | str | None = None,
    gpu: str | None = None,
    cpu: bool = False,
    ceilings: str | Ceilings = "datasheet",
    tf32: bool = False,
    top: int = LOST_ROWS,
) -> Result:
    """Return :func:`analyse` of a merged run from its ranks' ops (`parts`: :func:`gpuan.sol.score.rank_ops`
    of each rank, in rank order; `gpu_activity`: whether any rank has GPU activity), the merged run's
    `metadata` and the merged event table's dictionaries `words` (:func:`gpuan.sol.score.merged_ops`). The
    ops are scored here, on the whole table: whether FP32 matrix ops run on TF32, the element size of
    tensor lists and the clock's resolution are the run's, and the sections' sums run over every op in its
    order."""
    source = str(metadata.get("source", ""))
    roofs = roofs_for(metadata, source, gpu=gpu, cpu=cpu, ceilings=ceilings)
    found = merged_ops(parts, gpu_activity, words)
    return result(scored_ops(found, roofs, source, tf32=tf32, engine=engine), top)
