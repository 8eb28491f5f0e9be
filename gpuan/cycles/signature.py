"""Kernel-name signatures: the name with its template arguments and tuning suffixes removed, so that
two builds of one kernel (other tile sizes, another split-K) compare as the same kernel."""

from __future__ import annotations

import re
import zlib

_CONFIG_MARKERS = (
    "_GROUP_K_", "_GROUP_N_", "_GROUP_SIZE_", "_BLOCK_SIZE_", "_SPLITK_BLOCK_SIZE_", "_NUM_KSPLIT_",
    "_ACTUAL_KSPLIT_", "_MAX_KSPLIT_", "_GRID_MN_", "_GRID_", "_EVEN_K_", "_cache_modifier_",
)  # fmt: skip
_VARIANT_SUFFIXES = ("_1tg_ps", "_1tg", "_ps", "_novs", "_vs")
_TILE = re.compile(r"_\d+x\d+[^_]*$")
_DIGIT_TAIL = re.compile(r"(?:_\d)+$")


def signature(name: str) -> str:
    """Return the signature of a kernel name (the rules of the uplifter tool, in its order).

    Cut at the first ``<``; cut at the first config marker (``_GROUP_K_``, ``_BLOCK_SIZE_``, ...); drop a
    trailing ``_<m>x<n>`` tile; cut at a variant suffix (``_1tg_ps``, ``_vs``, ...); strip trailing
    ``_<digit>`` groups and ``_``. A name left shorter than 3 characters becomes ``other_<hash>``.
    """
    stem = name
    cut = stem.find("<")
    if cut > 0:
        stem = stem[:cut]
    for marker in _CONFIG_MARKERS:
        cut = stem.find(marker)
        if cut > 0:
            stem = stem[:cut]
    stem = _TILE.sub("", stem)
    for suffix in _VARIANT_SUFFIXES:
        cut = stem.rfind(suffix)
        if cut > 0:
            stem = stem[:cut]
    stem = _DIGIT_TAIL.sub("", stem).rstrip("_")
    if len(stem) < 3:
        # stable across runs and platforms (Python's str hash is salted per process)
        return f"other_{zlib.crc32(name.encode()) % 1000}"
    return stem
