"""Tensor-access logs of an instrumented llama.cpp: formats, memory-mapped reading, writing, side inputs."""

from gpuan.trace.tensorlog.formats import DTYPES, dtype_of
from gpuan.trace.tensorlog.read import TensorLog, entries, open_log, windows
from gpuan.trace.tensorlog.write import LogWriter, c_header_path, open_writer

__all__ = [
    "DTYPES",
    "LogWriter",
    "TensorLog",
    "c_header_path",
    "dtype_of",
    "entries",
    "open_log",
    "open_writer",
    "windows",
]
