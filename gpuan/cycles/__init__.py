"""Cycle detection: repeating event patterns (iterations, layers, prefill/decode) and their statistics.

``detect(trace)`` returns, per device stream group (or CPU thread), the segments of the trace with
their outer cycle and sub-cycles; ``distinct_patterns`` flattens those into the patterns that
``gpuan cycles`` writes as uplifter-compatible CSV files.
"""

from __future__ import annotations

from gpuan.cycles.detect import Cycle, Segment, detect_sequence
from gpuan.cycles.patterns import Pattern, SequenceCycles, distinct_patterns
from gpuan.cycles.sequence import SPLITS, Sequence, sequences
from gpuan.engine import Engine, current
from gpuan.trace.table import Trace

__all__ = [
    "Cycle",
    "Pattern",
    "SPLITS",
    "Segment",
    "Sequence",
    "SequenceCycles",
    "detect",
    "distinct_patterns",
    "sequences",
]


def detect(
    trace: Trace,
    kind: str = "kernel",
    *,
    split: str = "group",
    ops: str = "top",
    engine: Engine | None = None,
) -> list[SequenceCycles]:
    """Find the cycles of `trace`: one :class:`SequenceCycles` per sequence that has events.

    `kind` is any event kind (``kernel`` by default; ``cpu_op`` for CPU-only traces, with `ops` choosing
    top-level, leaf or all operators); `split` makes one sequence per GPU stream (``stream``), per
    stream group (``group``: compute streams apart from communication streams) or per device
    (``merged``). The scoring of candidate periods runs on `engine` (default: the current
    one); the results are the same on CPU and GPU.
    """
    engine = engine or current()
    return [SequenceCycles(seq, detect_sequence(seq, engine)) for seq in sequences(trace, kind, split=split, ops=ops)]
