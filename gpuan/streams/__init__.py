"""Stream-overlap prediction: from one single-stream trace to the timeline of the same work on N streams.

``predict(trace, n)`` returns a :class:`Prediction` (its timeline, total, speed-up and parameters);
``check(prediction, measured)`` compares it with a measured N-stream trace.
"""

from gpuan.streams.predict import Check, Prediction, check, predict

__all__ = ["Check", "Prediction", "check", "predict"]
