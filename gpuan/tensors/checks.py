"""The correctness checks a tensor analysis reports: holes and disorder in the timestamps, accesses outside
every tensor, the model's layout against its data section, a log that filled up, and a name table whose
offsets or sizes disagree with the GGUF file."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from gpuan.tensors.scan import Scanned
from gpuan.trace.gguf_map import layout_problems


@dataclass(frozen=True)
class Check:
    """One check: its name, whether it passed, and what was found."""

    name: str
    ok: bool
    detail: str


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.3f} ms"


def timestamps(s: Scanned) -> Check:
    """Entries out of time order (thread-local batches reorder a little) and gaps longer than the threshold."""
    parts = []
    if s.backward:
        parts.append(f"{s.backward:,} step(s) back in time")
    if s.gap_count:
        gap, entry, token = s.gaps[0]
        parts.append(
            f"{s.gap_count:,} gap(s) over {_ms(s.options.gap_ns)}, longest {_ms(gap)} before entry "
            f"{entry:,} (token {token})"
        )
    return Check("timestamps", not parts, "; ".join(parts) or "in order, no gap over " + _ms(s.options.gap_ns))


def outside(s: Scanned) -> Check:
    """File offsets that fall in no tensor (a wrong layout, relative offsets, or a different model file)."""
    if not s.outside:
        return Check("offsets", True, "every file offset lies inside a tensor")
    ex = ", ".join(f"0x{x:x}" for x in s.outside_examples)
    return Check(
        "offsets",
        False,
        f"{s.outside:,} access(es), {s.outside_bytes:,} bytes, at file offsets inside no tensor (e.g. {ex})",
    )


def layout(s: Scanned) -> Check:
    """Tensor bytes against the data section: they differ only by alignment padding, and the last tensor
    ends at the end of the file."""
    m = s.model
    t = m.tensors
    total = int(t["n_bytes"].sum())
    end = int(t["offset"].iloc[-1] + t["n_bytes"].iloc[-1]) if len(t) else m.data_start
    padding = m.data_bytes - total
    problems = layout_problems(m)
    if end != m.file_bytes and not problems:
        problems.append(f"the last tensor ends at byte {end:,}, not at the end of the file ({m.file_bytes:,})")
    if padding < 0 or padding >= max(len(t), 1) * m.alignment:
        problems.append(f"tensors hold {total:,} bytes but the data section is {m.data_bytes:,}")
    detail = (
        f"{len(t)} tensors, {total:,} bytes in a {m.data_bytes:,}-byte data section ({padding:,} bytes of "
        f"alignment padding at {m.alignment})"
    )
    return Check("layout", not problems, "; ".join(problems) or detail)


def capacity(s: Scanned) -> Check:
    """Whether the log filled up, so accesses after that point were dropped."""
    log = s.log
    if log.overflow:
        return Check(
            "capacity",
            False,
            f"the writer dropped {log.overflow:,} entries after the log filled ({log.capacity:,} entries)",
        )
    if log.entries == log.capacity:
        return Check("capacity", False, f"the log is full ({log.capacity:,} entries): later accesses may be missing")
    return Check("capacity", True, f"{log.entries:,} of {log.capacity:,} entries used")


def name_table(s: Scanned, names: pd.DataFrame | None) -> Check | None:
    """A name table's offsets and sizes against the GGUF file's own (dumpers are known to print offsets
    relative to the data section and wrong sizes for quantized types); None without a table."""
    if names is None:
        return None
    t = s.model.tensors.set_index("name")
    both = names[names["tensor_name"].isin(t.index) & (names["file_offset"] >= 0)]
    if both.empty:
        return Check("name table", True, "no weight of the name table is in the model file")
    true_off = t.loc[both["tensor_name"], "offset"].to_numpy()
    true_size = t.loc[both["tensor_name"], "n_bytes"].to_numpy()
    off, size = both["file_offset"].to_numpy(), both["size_bytes"].to_numpy()
    parts = []
    rel = off + s.model.data_start == true_off
    if np.any(off != true_off):
        how = " (relative to the data section)" if np.all(rel | (off == true_off)) else ""
        parts.append(f"{int(np.sum(off != true_off))} offset(s) differ from the GGUF file's{how}")
    if np.any(size != true_size):
        bad = both["tensor_name"].to_numpy()[size != true_size]
        parts.append(f"{len(bad)} size(s) differ, e.g. {bad[0]}")
    note = "; the GGUF file's values are used" if parts else ""
    return Check("name table", not parts, ("; ".join(parts) + note) or f"{len(both)} weights agree with the GGUF file")


def run_checks(s: Scanned, names: pd.DataFrame | None = None) -> list[Check]:
    """Return every check, in report order."""
    out = [timestamps(s), outside(s), layout(s), capacity(s), name_table(s, names)]
    return [c for c in out if c is not None]
