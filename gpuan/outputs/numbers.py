"""The one number formatter of every output: durations, sizes and shares as text.

Each report keeps the layout its users know (the golden tests hold it byte for byte), so the formatter
takes the unit, the decimals and the grouping as arguments instead of each report writing its own."""

from __future__ import annotations

import math

_PER_NS = {"s": 1e9, "ms": 1e6, "us": 1e3, "ns": 1.0}


def duration(
    ns: float,
    unit: str = "ms",
    places: int = 3,
    *,
    label: bool = True,
    group: bool = True,
    below: tuple[float, str, int] | None = None,
) -> str:
    """Return a duration given in nanoseconds as text: in `unit` with `places` decimals, thousands grouped
    (`group`), the unit appended (`label`): ``duration(1_234_567_000) == "1,234.567 ms"``.

    `below` = (threshold in ns, unit, places) switches to a finer unit for short times (by magnitude):
    ``duration(52_000, below=(1e5, "us", 1)) == "52.0 us"``."""
    if below is not None and abs(ns) < below[0]:
        _, unit, places = below
    spec = f"{',' if group else ''}.{places}f"
    text = format(ns / _PER_NS[unit], spec)
    return f"{text} {unit}" if label else text


def size_text(nbytes: float) -> str:
    """Return a size in bytes as text in decimal units: ``512 bytes``, ``7.68 kB``, ``186.96 MB``, ``1.20 GB``."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(nbytes) >= scale:
            return f"{nbytes / scale:,.2f} {unit}"
    return f"{nbytes:,.0f} bytes"


def change(percent: float) -> str:
    """Return a signed change in percent (``+12.5%``), or ``-`` where there is none (from or to zero)."""
    return f"{percent:+.1f}%" if math.isfinite(percent) else "-"
