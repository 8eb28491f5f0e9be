"""Buffer events (allocations of the backends' buffers) as tables: one row per buffer, and the bytes in use
per backend after each event."""

from __future__ import annotations

import numpy as np
import pandas as pd


def per_buffer(events: pd.DataFrame) -> pd.DataFrame:
    """Return one row per allocated buffer: id, name, backend, usage, layer, size, alloc_ms and dealloc_ms
    (NaN while still allocated at the end of the log)."""
    alloc = events[events["event"] == "alloc"].drop_duplicates("buffer_id", keep="first")
    free = events[events["event"] == "dealloc"].groupby("buffer_id")["timestamp_ms"].max()
    out = alloc[["buffer_id", "name", "backend", "usage", "layer", "size", "timestamp_ms"]].rename(
        columns={"timestamp_ms": "alloc_ms"}
    )
    out["dealloc_ms"] = free.reindex(out["buffer_id"]).to_numpy()
    return out.reset_index(drop=True)


def in_use(events: pd.DataFrame) -> pd.DataFrame:
    """Return the bytes allocated per backend after each event (a dealloc frees what its buffer's alloc
    took, whatever size it names)."""
    size_of = events[events["event"] == "alloc"].groupby("buffer_id")["size"].first()
    sizes = np.where(
        events["event"] == "alloc", events["size"], -size_of.reindex(events["buffer_id"]).fillna(0).to_numpy()
    )
    deltas = pd.DataFrame(
        {
            "timestamp_ms": events["timestamp_ms"].to_numpy(),
            "backend": events["backend"].to_numpy(),
            "delta": sizes.astype(np.int64),
        }
    )
    deltas["bytes_in_use"] = deltas.groupby("backend")["delta"].cumsum()
    return deltas.drop(columns="delta")
