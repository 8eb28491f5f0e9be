"""What the commands need to know about numba's compiled code."""

from __future__ import annotations

import os


def compiled_on_disk(dispatcher) -> bool:
    """Return whether numba's on-disk cache already holds the compiled code of `dispatcher` (an
    ``@njit(cache=True)`` function); if not, its first call compiles it. Best effort: True when it
    cannot tell."""
    try:
        return os.path.exists(dispatcher._cache._cache_file._index_path)
    except AttributeError:
        return True
