"""Speed of light: roofline scoring of every op of a trace (``gpuan sol``).

``score(trace, device=...)`` returns a :class:`Scored` (one row per op with FLOPs, bytes, roofline time,
bound and efficiency); :mod:`gpuan.sol.report` turns it into the report and tables."""

from gpuan.sol.score import Scored, score, score_ops, trace_ops

__all__ = ["Scored", "score", "score_ops", "trace_ops"]
