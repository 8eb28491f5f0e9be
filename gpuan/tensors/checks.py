"""The correctness checks a tensor analysis reports: holes and disorder in the timestamps, accesses outside
every tensor, the model's layout against its data section, a log that filled up, and a name table whose
offsets or sizes disagree with the GGUF file.

Each check is a dict of plain values: ``check`` (its name), ``ok``, and what was found (counts, bytes,
examples); :mod:`gpuan.outputs.tensors` words them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from gpuan.tensors.scan import Scanned
from gpuan.trace.gguf_map import layout_problems

Check = dict[str, Any]


def timestamps(scanned: Scanned) -> Check:
    """Entries out of time order (thread-local batches reorder a little) and gaps longer than the threshold,
    with the longest: its length, the entry after it and that entry's token."""
    check = {"check": "timestamps", "ok": not scanned.backward and not scanned.gap_count, "backward": scanned.backward}
    check |= {"gaps": scanned.gap_count, "gap_ns": scanned.options.gap_ns}
    if scanned.gap_count:
        gap, entry, token = scanned.gaps[0]
        check |= {"longest_gap_ns": gap, "longest_gap_entry": entry, "longest_gap_token": token}
    return check


def outside(scanned: Scanned) -> Check:
    """File offsets that fall in no tensor (a wrong layout, relative offsets, or a different model file)."""
    return {
        "check": "offsets",
        "ok": not scanned.outside,
        "accesses": scanned.outside,
        "bytes": scanned.outside_bytes,
        "examples": list(scanned.outside_examples),
    }


def layout(scanned: Scanned) -> Check:
    """Tensor bytes against the data section: they differ only by alignment padding, and the last tensor
    ends at the end of the file."""
    model = scanned.model
    tensors = model.tensors
    total = int(tensors["n_bytes"].sum())
    end = int(tensors["offset"].iloc[-1] + tensors["n_bytes"].iloc[-1]) if len(tensors) else model.data_start
    padding = model.data_bytes - total
    problems = layout_problems(model)
    if end != model.file_bytes and not problems:
        problems.append(f"the last tensor ends at byte {end:,}, not at the end of the file ({model.file_bytes:,})")
    if padding < 0 or padding >= max(len(tensors), 1) * model.alignment:
        problems.append(f"tensors hold {total:,} bytes but the data section is {model.data_bytes:,}")
    return {
        "check": "layout",
        "ok": not problems,
        "problems": problems,
        "tensors": len(tensors),
        "tensor_bytes": total,
        "data_bytes": model.data_bytes,
        "padding": padding,
        "alignment": model.alignment,
    }


def capacity(scanned: Scanned) -> Check:
    """Whether the log filled up, so accesses after that point were dropped (`overflow`: the writer's count
    of dropped entries, None without its sidecar)."""
    log = scanned.log
    ok = not log.overflow and log.entries != log.capacity
    return {"check": "capacity", "ok": ok, "entries": log.entries, "capacity": log.capacity, "overflow": log.overflow}


def name_table(scanned: Scanned, names: pd.DataFrame | None) -> Check | None:
    """A name table's offsets and sizes against the GGUF file's own (dumpers are known to print offsets
    relative to the data section and wrong sizes for quantized types); None without a table."""
    if names is None:
        return None
    by_name = scanned.model.tensors.set_index("name")
    both = names[names["tensor_name"].isin(by_name.index) & (names["file_offset"] >= 0)]
    check = {"check": "name table", "ok": True, "weights": len(both), "offsets_differ": 0, "relative": False}
    check |= {"sizes_differ": 0, "size_example": None}
    if both.empty:
        return check
    true_offset = by_name.loc[both["tensor_name"], "offset"].to_numpy()
    true_size = by_name.loc[both["tensor_name"], "n_bytes"].to_numpy()
    offset, size = both["file_offset"].to_numpy(), both["size_bytes"].to_numpy()
    wrong_offset, wrong_size = offset != true_offset, size != true_size
    relative = offset + scanned.model.data_start == true_offset
    check["offsets_differ"], check["sizes_differ"] = int(wrong_offset.sum()), int(wrong_size.sum())
    check["relative"] = bool(wrong_offset.any() and np.all(relative | ~wrong_offset))
    if wrong_size.any():
        check["size_example"] = str(both["tensor_name"].to_numpy()[wrong_size][0])
    check["ok"] = not wrong_offset.any() and not wrong_size.any()
    return check


def run_checks(scanned: Scanned, names: pd.DataFrame | None = None) -> list[Check]:
    """Return every check, in report order."""
    found = [timestamps(scanned), outside(scanned), layout(scanned), capacity(scanned), name_table(scanned, names)]
    return [c for c in found if c is not None]
