"""gpuan: GPU-accelerated analytics for GPU performance traces."""

from gpuan.errors import TraceError
from gpuan.trace.load import load
from gpuan.trace.table import Trace

__version__ = "0.1.0"
__all__ = ["Trace", "TraceError", "load", "__version__"]
