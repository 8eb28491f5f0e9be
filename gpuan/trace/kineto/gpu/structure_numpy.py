"""The CPU twin of :mod:`structure_cuda`: the same structural masks and event starts, byte by byte in numpy."""

from __future__ import annotations

import numpy as np

QUOTE, BACKSLASH = ord('"'), ord("\\")
OPENS, CLOSES = (ord("{"), ord("[")), (ord("}"), ord("]"))


def escaped(buf: np.ndarray) -> np.ndarray:
    """Return a bool per byte: escaped by an odd run of backslashes just before it."""
    out = np.zeros(buf.size, np.bool_)
    run = 0
    for i, c in enumerate(buf.tolist()):
        out[i] = run & 1
        run = run + 1 if c == BACKSLASH else 0
    return out


def quotes(buf: np.ndarray) -> np.ndarray:
    """Return a bool per byte: a quote that is not escaped."""
    return (buf == QUOTE) & ~escaped(buf)


def in_string(buf: np.ndarray) -> np.ndarray:
    """Return a bool per byte: inside a string (its opening quote included, its closing quote not)."""
    return (np.cumsum(quotes(buf)) & 1).astype(np.bool_)


def brackets(buf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return (opening, closing): bools per byte for the brackets outside strings."""
    outside = ~in_string(buf)
    return np.isin(buf, OPENS) & outside, np.isin(buf, CLOSES) & outside


def depth(buf: np.ndarray) -> np.ndarray:
    """Return the nesting depth after each byte."""
    o, c = brackets(buf)
    return np.cumsum(o.astype(np.int64) - c.astype(np.int64))


def event_starts(buf: np.ndarray, start: int, level: int) -> tuple[np.ndarray, int]:
    """Return what :func:`structure_cuda.event_starts` returns, computed byte by byte."""
    o, c = brackets(buf)
    d = depth(buf)
    pos = np.arange(buf.size)
    closing = np.flatnonzero(c & (d == level - 1) & (pos >= start))
    end = int(closing[0]) if closing.size else buf.size
    starts = np.flatnonzero(o & (buf == ord("{")) & (d == level + 1) & (pos >= start) & (pos < end))
    return starts.astype(np.int64), end
