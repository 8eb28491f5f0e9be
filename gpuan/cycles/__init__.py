"""Cycle detection: repeating event patterns (iterations, layers, prefill/decode) and their statistics.

``analyse(trace)`` is the entry point (``gpuan cycles``): a :class:`~gpuan.result.Result` of Arrow tables.
Underneath, ``detect(trace)`` returns, per device stream group (or CPU thread), the segments of the trace
with their outer cycle and sub-cycles, and ``distinct_patterns`` flattens those into the patterns that
``gpuan cycles -o`` writes as uplifter-compatible CSV files.
"""

from gpuan.cycles.analysis import analyse, reads
from gpuan.cycles.detect import Cycle, Segment, SequenceCycles, detect
from gpuan.cycles.patterns import Pattern, distinct_patterns
from gpuan.cycles.sequence import Sequence, sequences

__all__ = [
    "Cycle",
    "Pattern",
    "Segment",
    "Sequence",
    "SequenceCycles",
    "analyse",
    "detect",
    "distinct_patterns",
    "reads",
    "sequences",
]
