"""gpuan: GPU-accelerated analytics for GPU performance traces.

``gpuan.load(path)`` returns a :class:`Trace`; each analysis is a subpackage with one entry point,
``analyse(inputs, *, engine=None, **options) -> Result``: ``gpuan.info``, ``gpuan.cycles``,
``gpuan.compare``, ``gpuan.sol``, ``gpuan.streams``, ``gpuan.tensors``, ``gpuan.replay``. They import on
first use (``gpuan.sol.analyse(trace)`` works after ``import gpuan``)."""

from __future__ import annotations

import importlib

from gpuan.errors import TraceError, UsageError
from gpuan.result import Result
from gpuan.trace.load import load
from gpuan.trace.table import Trace

__version__ = "0.1.0"
ANALYSES = ("info", "cycles", "compare", "sol", "streams", "tensors", "replay")
__all__ = ["ANALYSES", "Result", "Trace", "TraceError", "UsageError", "load", "__version__", *ANALYSES]


def __getattr__(name: str):
    # the analyses load on first use: `import gpuan` stays cheap for the CLI and for readers-only users
    if name in ANALYSES:
        return importlib.import_module(f"gpuan.{name}")
    raise AttributeError(f"module 'gpuan' has no attribute {name!r}")
