"""Speed of light: roofline scoring of every op of a trace (``gpuan sol``).

``analyse(trace, gpu=...)`` returns the :class:`gpuan.result.Result` (the scored ops and the report's
sections as tables); ``score(trace, gpu=...)`` is the scorer beneath it, returning a :class:`Scored` (one
row per op with FLOPs, bytes, roofline time, bound and efficiency). :mod:`gpuan.outputs.sol` renders a
Result as text, JSON, tables and the roofline chart."""

from gpuan.sol.analysis import analyse, reads
from gpuan.sol.score import Scored, score, score_ops, trace_ops

__all__ = ["Scored", "analyse", "reads", "score", "score_ops", "trace_ops"]
