"""Tensor-access analysis: which parts of a model file an instrumented llama.cpp touched, when, per token,
layer, component and expert; weights against intermediates; the checks that say whether to trust it.

``analyze(log, gguf)`` reads the inputs (``gpuan.trace.tensorlog``, ``gpuan.trace.gguf_map``), makes one pass
over the log (:mod:`gpuan.tensors.scan`) and returns the tables (:mod:`gpuan.tensors.tables`)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import pandas as pd

from gpuan.engine import Engine
from gpuan.tensors.checks import Check, run_checks
from gpuan.tensors.scan import Options, Scanned


@dataclass
class Analysis:
    """The result: the pass's aggregates, the tables by name (with ``buffers`` and ``buffer_memory`` when
    buffer events were given), and the checks."""

    scanned: Scanned
    tables: dict[str, pd.DataFrame]
    checks: list[Check]


def analyze(
    log: str | os.PathLike,
    gguf: str | os.PathLike,
    names: str | os.PathLike | None = None,
    buffers: str | os.PathLike | None = None,
    format: str = "auto",
    options: Options | None = None,
    engine: Engine | None = None,
) -> Analysis:
    """Analyse the tensor-access log `log` against the model file `gguf` (and the tensor name table `names`
    and buffer events `buffers`, when given) and return an :class:`Analysis`."""
    from gpuan.tensors.buffers import in_use, per_buffer
    from gpuan.tensors.scan import scan
    from gpuan.tensors.tables import build
    from gpuan.trace.gguf_map import read_gguf
    from gpuan.trace.tensorlog import open_log
    from gpuan.trace.tensorlog.sides import read_buffers, read_names

    model = read_gguf(gguf)
    table = read_names(names) if names else None
    events = read_buffers(buffers) if buffers else None
    opened = open_log(log, format, file_bytes=model.file_bytes)
    s = scan(opened, model, table, options, engine)
    tables = build(s)
    if events is not None:
        tables["buffers"], tables["buffer_memory"] = per_buffer(events), in_use(events)
    return Analysis(s, tables, run_checks(s, table))


__all__ = ["Analysis", "Check", "Options", "analyze"]
