"""Loading the inputs of a tensor-access analysis: the log (opened, its format found; the entries stay on
disk), the GGUF model's layout and the units accesses are joined to, and the optional name table and
buffer events, as one :class:`~gpuan.trace.inputs.TensorInputs` for ``gpuan.tensors.analyse``."""

from __future__ import annotations

import os

from gpuan.errors import UsageError
from gpuan.options import TENSOR_LOG_CHOICES
from gpuan.trace.gguf_map import read_gguf, units
from gpuan.trace.inputs import TensorInputs
from gpuan.trace.tensorlog.read import open_log
from gpuan.trace.tensorlog.sides import read_buffers, read_names


def load_tensor_inputs(
    log: str | os.PathLike,
    gguf: str | os.PathLike,
    names: str | os.PathLike | None = None,
    buffers: str | os.PathLike | None = None,
    log_format: str = "auto",
) -> TensorInputs:
    """Open the tensor-access log `log` (entry layout `log_format`: one of
    :data:`~gpuan.options.TENSOR_LOG_CHOICES`; ``auto`` picks it by the plausibility of the fields), read the
    GGUF model `gguf` and, when given, the name table `names` and the buffer events `buffers`; return them as
    :class:`~gpuan.trace.inputs.TensorInputs`. A bad file is a :class:`~gpuan.errors.TraceError`, an unknown
    `log_format` a :class:`~gpuan.errors.UsageError`."""
    if log_format not in TENSOR_LOG_CHOICES:
        raise UsageError(f"unknown log format {log_format!r}; choose from {', '.join(TENSOR_LOG_CHOICES)}")
    model = read_gguf(gguf)
    table = read_names(names) if names else None
    events = read_buffers(buffers) if buffers else None
    opened = open_log(log, log_format, file_bytes=model.file_bytes)
    return TensorInputs(opened, model, units(model), table, events)
