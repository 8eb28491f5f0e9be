"""The layout of a GGUF model file: where each tensor's bytes lie, read from the file itself.

Offsets are absolute (from the start of the file), byte sizes are the package's own for every quantized
type, and the data section starts at the file's ``general.alignment``. MoE expert tensors
(``blk.N.ffn_{gate,up,down}_exps``) are also cut into one slice per expert: the expert index is the
outermost dimension, so each expert's weights are one contiguous run of ``n_bytes / n_experts`` bytes.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from gpuan.errors import TraceError
from gpuan.trace.gguf_header import truncation

EXPERTS = re.compile(r"_exps(\.|$)")


@dataclass(frozen=True)
class ModelMap:
    """A GGUF file's layout. `tensors` has one row per tensor in file order (name, type, shape, offset,
    n_bytes, n_experts: 0 for a tensor that is not split by expert); `data_start` is where the tensor data
    section begins; `alignment` is ``general.alignment``."""

    path: str
    file_bytes: int
    data_start: int
    alignment: int
    architecture: str
    tensors: pd.DataFrame

    @property
    def data_bytes(self) -> int:
        """Size of the tensor data section."""
        return self.file_bytes - self.data_start


def read_gguf(path: str | os.PathLike) -> ModelMap:
    """Read the tensor layout of the GGUF file at `path` (nothing but the header is parsed; the data stay
    on disk) and return its :class:`ModelMap`, tensors sorted by offset."""
    from gguf import GGUFReader

    path = os.fspath(path)
    try:
        size = os.path.getsize(path)
        reader = GGUFReader(path, "r")
    except OSError as e:
        raise TraceError(path, f"cannot read: {e.strerror or e}") from None
    except (ValueError, KeyError, IndexError, TypeError, OverflowError) as e:
        # the gguf package raises these for a wrong magic, an unknown version or a truncated file; for the
        # last, its message is numpy's (out of bounds, cannot reshape), so say where the file is cut instead
        problem = truncation(path) or (
            f"not a readable GGUF file: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
        )
        raise TraceError(path, problem) from None
    if len(reader.tensors) == 0:
        # a vocabulary-only file, or a tensor count of 0 where the header is corrupt: no layout to join to
        raise TraceError(path, "the GGUF file lists no tensors: not a model whose accesses can be mapped")
    arch = reader.fields.get("general.architecture")
    architecture = bytes(arch.parts[arch.data[0]]).decode("utf-8", "replace") if arch is not None else ""
    rows = []
    for t in reader.tensors:
        shape = [int(d) for d in t.shape]  # GGML order: innermost first, so experts are the last dimension
        n_experts = shape[-1] if EXPERTS.search(t.name) and len(shape) == 3 else 0
        rows.append(
            (t.name, t.tensor_type.name, "x".join(map(str, shape)), int(t.data_offset), int(t.n_bytes), n_experts)
        )
    tensors = pd.DataFrame(rows, columns=["name", "type", "shape", "offset", "n_bytes", "n_experts"])
    tensors = tensors.sort_values("offset", kind="stable").reset_index(drop=True)
    return ModelMap(path, size, int(reader.data_offset), int(reader.alignment), architecture, tensors)


def units(model: ModelMap) -> pd.DataFrame:
    """Return the units that accesses are joined to, sorted by offset: each tensor, except that a tensor split
    by expert gives one unit per expert slice. Columns: start, end (absolute offsets), tensor (row of
    ``model.tensors``), expert (-1 for a whole tensor)."""
    t = model.tensors
    split = (t["n_experts"].to_numpy() > 0) & (t["n_bytes"].to_numpy() % np.maximum(t["n_experts"].to_numpy(), 1) == 0)
    count = np.where(split, t["n_experts"].to_numpy(), 1)
    tensor = np.repeat(np.arange(len(t)), count)
    first = np.repeat(np.cumsum(count) - count, count)
    expert = np.where(np.repeat(split, count), np.arange(len(tensor)) - first, -1)
    width = (t["n_bytes"].to_numpy() // count)[tensor]
    start = t["offset"].to_numpy()[tensor] + np.maximum(expert, 0) * width
    return pd.DataFrame({"start": start, "end": start + width, "tensor": tensor, "expert": expert})


def layout_problems(model: ModelMap) -> list[str]:
    """Return what is wrong with the layout, as sentences (empty when tensors are aligned, do not overlap,
    and lie inside the file)."""
    t = model.tensors
    off, n = t["offset"].to_numpy(), t["n_bytes"].to_numpy()
    out = []
    if len(t) == 0:
        return ["the file holds no tensors"]
    overlap = np.nonzero(off[1:] < off[:-1] + n[:-1])[0]
    if overlap.size:
        i = int(overlap[0])
        out.append(f"{overlap.size} tensor(s) overlap the next one, first {t['name'][i]} and {t['name'][i + 1]}")
    bad = np.nonzero((off - model.data_start) % model.alignment)[0]
    if bad.size:
        out.append(f"{bad.size} tensor(s) not aligned to {model.alignment} bytes, first {t['name'][int(bad[0])]}")
    if off[0] < model.data_start:
        out.append(f"{t['name'][0]} starts before the data section")
    end = int(off[-1] + n[-1])
    if end > model.file_bytes:
        out.append(f"the last tensor ends at byte {end:,}, beyond the file's {model.file_bytes:,} bytes (truncated?)")
    return out
