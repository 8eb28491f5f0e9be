"""Live speed-of-light capture inside a PyTorch job (optional: needs ``torch``).

    from gpuan.capture.live import Tracker
    with Tracker(model, gpu="H100", report_every=100) as tracker:
        for step, batch in enumerate(data):
            with tracker.phase("forward"):
                loss = model(batch)
            ...
            tracker.step()          # prints the report every 100 steps
    print(tracker.report())

Forward hooks on ``nn.Linear``, convolutions, norms and ``nn.Embedding`` and wrappers around the
matmul family (``torch.matmul/mm/bmm/addmm/baddbmm``, ``Tensor.__matmul__``, ``F.linear``,
``F.scaled_dot_product_attention``) record each call's shapes, dtypes and time (CUDA events on the GPU,
the wall clock on the CPU) as the profiler would (``aten::`` names, ``Input Dims``), so the same cost
model and report serve both. A call made inside a tracked module is not recorded again (no double
counting), and nothing is recorded while ``torch.compile`` traces.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from gpuan import devices
from gpuan.devices.ceilings import read_ceilings
from gpuan.devices.model import CPU, Ceilings
from gpuan.errors import UsageError
from gpuan.result import Result
from gpuan.sol.roofs import Roofs, datasheet, measured
from gpuan.sol.score import OPS_SCHEMA, Scored, score_ops
from gpuan.sol.sections import result

_TYPE_NAMES = {
    "float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
    "float8_e4m3fn": "c10::Float8_e4m3fn", "float8_e5m2": "c10::Float8_e5m2", "int64": "long int",
    "int32": "int", "int16": "short int", "int8": "signed char", "uint8": "unsigned char", "bool": "bool",
}  # fmt: skip


def _arg(x: Any) -> tuple[list, str, str]:
    """(Input Dims, Input type, Concrete Inputs) of one argument, as the profiler records them."""
    import torch

    if isinstance(x, torch.Tensor):
        return list(x.shape), _TYPE_NAMES.get(str(x.dtype).removeprefix("torch."), "float"), ""
    if x is None:
        return [], "", ""
    if isinstance(x, (list, tuple)) and all(isinstance(v, int) for v in x):
        return [], "ScalarList", str(list(x))
    return [], "Scalar", str(x)


def _compiling_probe():
    """Return torch's "is torch.compile tracing now?" function (a constant to the tracer, so a wrapper that
    asks it first is traced straight through to the original call, without a graph break)."""
    import torch

    compiler = getattr(torch, "compiler", None)
    return getattr(compiler, "is_compiling", None) or (lambda: False)


class Tracker:
    """Records the matmul-family calls and tracked modules of a running model and scores them.

    `gpu`: a known GPU name, or None for the current CUDA GPU if there is one, else this machine's CPU;
    `cpu`: score against this machine's CPU (calibrated with ``gpuan sol calibrate --cpu``); `ceilings`:
    "datasheet" peaks or the measured ceilings, as for :func:`gpuan.sol.analyse`
    (``ceilings=gpuan.devices.ceilings.read_ceilings()``; the CPU's are read from the default ceilings
    file where none are given); `roofs` overrides all of these with explicit roofs; `report_every`: print
    the report every that many :meth:`step` calls (0: never)."""

    def __init__(
        self,
        model=None,
        gpu: str | None = None,
        *,
        cpu: bool = False,
        roofs: Roofs | None = None,
        ceilings: str | Ceilings = "datasheet",
        report_every: int = 0,
    ) -> None:
        import torch

        self.model = model
        self.cuda = torch.cuda.is_available() and (model is None or any(p.is_cuda for p in model.parameters()))
        self.roofs = roofs or self._roofs(gpu, cpu, ceilings)
        self.report_every = report_every
        self.records: list[tuple] = []  # (name, layer, phase, dims, types, concrete, start, end)
        self._phases: list[str] = []
        self._local = threading.local()
        self._undo: list = []
        self._steps = 0
        self._started = 0.0

    def _roofs(self, gpu: str | None, cpu: bool, ceilings: str | Ceilings) -> Roofs:
        import torch

        if not isinstance(ceilings, Ceilings) and ceilings != "datasheet":
            raise UsageError(f'Tracker(ceilings={ceilings!r}): use "datasheet" or ceilings.read_ceilings()')
        if cpu or (gpu is None and not self.cuda):
            # a CPU has no datasheet roofs: its measured ones are the only ones there are
            return measured(CPU, None, ceilings if isinstance(ceilings, Ceilings) else read_ceilings())
        known = devices.lookup(gpu or torch.cuda.get_device_name(), "Tracker(gpu=)")
        base = datasheet(known)
        return measured(known.name, base, ceilings) if isinstance(ceilings, Ceilings) else base

    # --- recording ---------------------------------------------------------------------------------------

    def _clock(self):
        import torch

        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter_ns()

    def _depth(self) -> int:
        return getattr(self._local, "depth", 0)

    def _begin(self) -> Any:
        self._local.depth = self._depth() + 1
        return self._clock()

    def _end(self, start, name: str, layer: str | None, args: tuple) -> None:
        end = self._clock()
        self._local.depth = self._depth() - 1
        dims, types, concrete = zip(*(_arg(a) for a in args)) if args else ((), (), ())
        self.records.append(
            (name, layer, "/".join(self._phases), json.dumps(list(dims)), json.dumps(list(types)),
             json.dumps(list(concrete)), start, end)
        )  # fmt: skip

    def _wrap(self, owner, attr: str, name: str) -> None:
        original = getattr(owner, attr)
        tracker = self
        compiling = _compiling_probe()

        def wrapper(*args, **kwargs):
            if compiling() or tracker._depth() > 0:
                return original(*args, **kwargs)
            start = tracker._begin()
            try:
                return original(*args, **kwargs)
            finally:
                tracker._end(start, name, None, _call_args(name, args, kwargs))

        wrapper.__wrapped__ = original
        setattr(owner, attr, wrapper)
        self._undo.append(lambda: setattr(owner, attr, original))

    def _hook(self, module) -> None:
        described = _module_call(module)
        if described is None:
            return
        compiling = _compiling_probe()

        def pre(mod, inputs):
            if compiling():
                return
            nested = self._depth() > 0
            mod._gpuan_sol = None if nested else self._begin()
            if nested:
                self._local.depth = self._depth() + 1

        def post(mod, inputs, output):
            if compiling():
                return
            start = getattr(mod, "_gpuan_sol", None)
            if start is None:
                self._local.depth = self._depth() - 1
                return
            name, args = described(inputs)
            self._end(start, name, type(mod).__name__, args)

        self._undo.append(module.register_forward_pre_hook(pre).remove)
        self._undo.append(module.register_forward_hook(post).remove)

    def __enter__(self) -> Tracker:
        import torch
        import torch.nn.functional as F

        for owner, attr, name in (
            (torch, "matmul", "aten::matmul"), (torch, "mm", "aten::mm"), (torch, "bmm", "aten::bmm"),
            (torch, "addmm", "aten::addmm"), (torch, "baddbmm", "aten::baddbmm"),
            (torch.Tensor, "__matmul__", "aten::matmul"), (F, "linear", "aten::linear"),
            (F, "scaled_dot_product_attention", "aten::scaled_dot_product_attention"),
        ):  # fmt: skip
            self._wrap(owner, attr, name)
        if self.model is not None:
            for module in self.model.modules():
                self._hook(module)
        self._started = time.perf_counter_ns()
        return self

    def __exit__(self, *exc) -> None:
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Tag the calls inside with phase `name` (nested phases make ``outer/inner``); also opens a
        profiler range (``record_function``) and, on a GPU, an NVTX range of that name."""
        import torch

        self._phases.append(name)
        if self.cuda:
            torch.cuda.nvtx.range_push(name)
        try:
            with torch.profiler.record_function(name):
                yield
        finally:
            if self.cuda:
                torch.cuda.nvtx.range_pop()
            self._phases.pop()

    def step(self) -> None:
        """Count one step; every `report_every` steps, print the report."""
        self._steps += 1
        if self.report_every and self._steps % self.report_every == 0:
            print(self.report(), flush=True)

    # --- results -----------------------------------------------------------------------------------------

    def ops(self) -> pa.Table:
        """Return the recorded calls as an op table (:data:`gpuan.sol.score.OPS_SCHEMA`)."""
        if self.cuda and self.records:
            import torch

            torch.cuda.synchronize()
            durations = [int(start.elapsed_time(end) * 1e6) for *_, start, end in self.records]
            starts = np.zeros(len(self.records), np.int64)
        else:
            durations = [end - start for *_, start, end in self.records]
            starts = np.array([start for *_, start, _ in self.records], np.int64) - self._started
        columns = list(zip(*self.records)) if self.records else [[]] * 8
        n = len(self.records)
        table = pa.table(
            {
                "name": pa.array(columns[0], pa.string()),
                "layer": pa.array(columns[1], pa.string()),
                "phase": pa.array(columns[2], pa.string()),
                "input_dims": pa.array(columns[3], pa.string()),
                "input_types": pa.array(columns[4], pa.string()),
                "concrete_inputs": pa.array(columns[5], pa.string()),
                "rank": pa.array(np.zeros(n, np.int32)),
                "ts": pa.array(starts),
                "measured_ns": pa.array(np.array(durations, np.int64)),
                "kernels": pa.array(np.zeros(n, np.int32)),
                "copy_bytes": pa.nulls(n, pa.int64()),
                "copy_over_link": pa.array(np.zeros(n, bool)),
                "tf32": pa.array(np.full(n, self._tf32(), bool)),
                "thread": pa.array(np.zeros(n, np.int64)),  # recorded in call order, on one thread
                "grad_bytes": pa.nulls(n, pa.int64()),
                "caller_dims": pa.nulls(n, pa.string()),
                "caller_types": pa.nulls(n, pa.string()),
            }
        )
        return table.select(OPS_SCHEMA.names).cast(OPS_SCHEMA)

    def _tf32(self) -> bool:
        import torch

        return bool(self.cuda and torch.backends.cuda.matmul.allow_tf32)

    def scored(self) -> Scored:
        """Return the recorded calls scored; the share is taken of the wall time since tracking began."""
        ops = score_ops(self.ops(), self.roofs)
        busy = max(time.perf_counter_ns() - self._started, 1)
        return Scored(ops, self.roofs, busy, "live tracker", on_cpu=not self.cuda)

    def result(self, top: int = 50) -> Result:
        """Return the recorded calls scored as ``gpuan.sol.analyse`` returns a trace's (`top`: rows of the
        ``lost_time`` table)."""
        return result(self.scored(), top)

    def report(self, top: int = 10) -> str:
        """Return the console report of what was recorded so far."""
        from gpuan.outputs.sol import text

        return text(self.result(top), top=top)


def _call_args(name: str, args: tuple, kwargs: dict) -> tuple:
    """The arguments in the order of the aten op the profiler would record."""
    if name == "aten::scaled_dot_product_attention":
        names = ("attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
        defaults = (None, 0.0, False, None, False)
        rest = list(args[3:]) + [kwargs.get(k, d) for k, d in zip(names[len(args) - 3 :], defaults[len(args) - 3 :])]
        return (*args[:3], *rest)
    if name == "aten::linear":
        return (*args, kwargs.get("bias")) if len(args) == 2 else args
    return args


def _module_call(module):
    """Return a function (forward inputs → (aten name, aten-ordered args)) for the module types the
    tracker times as a whole, or None."""
    import torch.nn as nn

    if isinstance(module, nn.Linear):
        return lambda inputs: ("aten::linear", (inputs[0], module.weight, module.bias))
    if isinstance(module, (nn.Conv1d, nn.Conv2d, nn.Conv3d)):

        def conv(inputs):
            padding = module.padding
            if isinstance(padding, str):  # 'valid' / 'same' (odd kernels)
                padding = [0] * len(module.kernel_size) if padding == "valid" else [
                    d * (k - 1) // 2 for d, k in zip(module.dilation, module.kernel_size)]  # fmt: skip
            return "aten::convolution", (inputs[0], module.weight, module.bias, list(module.stride), list(padding),
                                         list(module.dilation), False, [0], module.groups)  # fmt: skip

        return conv
    if isinstance(module, nn.LayerNorm):
        return lambda inputs: (
            "aten::layer_norm",
            (inputs[0], list(module.normalized_shape), module.weight, module.bias, module.eps),
        )
    if hasattr(nn, "RMSNorm") and isinstance(module, nn.RMSNorm):
        return lambda inputs: ("aten::rms_norm", (inputs[0], list(module.normalized_shape), module.weight, module.eps))
    if isinstance(module, nn.Embedding):
        return lambda inputs: ("aten::embedding", (module.weight, inputs[0]))
    return None
