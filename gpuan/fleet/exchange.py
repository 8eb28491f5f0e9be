"""What the fleet's processes share, as typed numpy buffers (:class:`gpuan.engine.procs.Procs`), never as
pickled objects: a vocabulary of names (UTF-8 bytes and their lengths), and records."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from gpuan.engine.procs import Procs


def shared_words(words: Iterable[str], procs: Procs) -> np.ndarray:
    """Return the sorted distinct `words` of every process (an object array of str), the same on every
    process: each sends its words as UTF-8 bytes and their lengths, and every process decodes them all."""
    encoded = [w.encode("utf-8", "surrogatepass") for w in sorted(set(words))]
    lengths = np.array([len(b) for b in encoded], np.int64)
    blob = np.frombuffer(b"".join(encoded), np.uint8)
    all_lengths = procs.allgatherv(lengths)
    data = procs.allgatherv(blob).tobytes()
    ends = np.cumsum(all_lengths)
    found = {
        data[end - n : end].decode("utf-8", "surrogatepass") for n, end in zip(all_lengths.tolist(), ends.tolist())
    }
    return np.array(sorted(found), dtype=object)


def codes_of(vocab: np.ndarray) -> dict[str, int]:
    """Return each word's place in the shared vocabulary `vocab` (:func:`shared_words`)."""
    return {w: i for i, w in enumerate(vocab.tolist())}


def from_root(records: np.ndarray, procs: Procs) -> np.ndarray:
    """Return process 0's `records` on every process (the other processes pass records of the same dtype,
    which are dropped: pass zero rows)."""
    return procs.allgatherv(records if procs.is_root else records[:0])
