"""gpuan: GPU-accelerated analytics for GPU performance traces.

``gpuan.load(path)`` returns a :class:`Trace`; each analysis is a subpackage with one entry point,
``analyse(inputs, *, engine=None, **options) -> Result``: ``gpuan.info``, ``gpuan.cycles``,
``gpuan.compare``, ``gpuan.sol``, ``gpuan.streams``, ``gpuan.tensors``, ``gpuan.replay``, ``gpuan.fleet``.

Everything but the errors imports on first use (``gpuan.sol.analyse(trace)`` works after ``import
gpuan``): the command line answers ``--help``, ``--version`` and usage errors without loading numpy,
pyarrow or numba."""

from __future__ import annotations

import importlib

from gpuan.errors import TraceError, UsageError

__version__ = "0.1.0"
ANALYSES = ("info", "cycles", "compare", "sol", "streams", "tensors", "replay", "fleet")
# name -> the module that defines it
_DEFINED_IN = {"load": "gpuan.trace.load", "Trace": "gpuan.trace.table", "Result": "gpuan.result"}
__all__ = ["ANALYSES", "Result", "Trace", "TraceError", "UsageError", "load", "__version__", *ANALYSES]


def __getattr__(name: str):
    if name in ANALYSES:
        return importlib.import_module(f"gpuan.{name}")
    if name in _DEFINED_IN:
        return getattr(importlib.import_module(_DEFINED_IN[name]), name)
    raise AttributeError(f"module 'gpuan' has no attribute {name!r}")
