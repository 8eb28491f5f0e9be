"""``gpuan streams``: stream-overlap prediction, from one single-stream trace to the timeline of the same
work on N streams.

``analyse(trace, streams=N)`` returns the prediction as a :class:`gpuan.result.Result` (the schedule, each
stream's span, totals, speed-up and every parameter); ``predict(trace, n)`` and ``check(prediction,
measured)`` are the model it is built on (a :class:`Prediction` with numpy columns, and a :class:`Check`).
"""

from gpuan.streams.analysis import analyse, reads
from gpuan.streams.predict import Check, Prediction, check, predict

__all__ = ["Check", "Prediction", "analyse", "check", "predict", "reads"]
