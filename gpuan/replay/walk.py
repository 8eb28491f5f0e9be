"""Forward and backward replay of one rank's events: visit them in time order (or its reverse) and hand
them to callbacks registered by event kind.

Callbacks receive runs: the positions of consecutive events of one kind, so that a stretch of a million
kernels costs one call, not a million, while the order between kinds is kept exactly (an annotation
between two kernels splits their run). State that an analysis carries from event to event lives in the
callbacks' closure, as in a classic replay-based analyser.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

#: a callback: (kind, positions of the run's events in the arrays given to :func:`walk`)
Callback = Callable[[str, np.ndarray], None]


def time_order(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Return the replay order: by start, an enclosing event before the events it holds (longer first)."""
    return np.lexsort((-(end - start), start))


def walk(
    kind: np.ndarray,
    kinds: tuple[str, ...],
    start: np.ndarray,
    end: np.ndarray,
    callbacks: Mapping[str, Callback],
    *,
    backward: bool = False,
) -> int:
    """Replay events given as columns (`kind`: codes into `kinds`) in time order, or in reverse with
    `backward`, calling ``callbacks[kind name]`` on every run of consecutive events of a kind that has a
    callback (events of other kinds are skipped but still split runs). Returns the number of calls."""
    wanted = np.array([k in callbacks for k in kinds], bool)
    order = time_order(start, end)
    if backward:
        order = order[::-1]
    codes = kind[order]
    if codes.size == 0:
        return 0
    cut = np.flatnonzero(codes[1:] != codes[:-1]) + 1
    bounds = np.concatenate(([0], cut, [codes.size]))
    calls = 0
    for first, stop in zip(bounds[:-1], bounds[1:]):
        code = int(codes[first])
        if wanted[code]:
            callbacks[kinds[code]](kinds[code], order[first:stop])
            calls += 1
    return calls
