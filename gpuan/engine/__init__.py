"""The engine switch: the one place that decides whether analyses run on the CPU or the GPU.

Choice, first match wins: an explicit ``select("cpu"|"gpu"|"auto")`` (the CLI's ``--device``), the
environment variable ``GPUAN_DEVICE``, then auto-detection (a GPU when CuPy imports and sees a device).
Analyses ask :func:`current` for the engine and write array code once against ``engine.xp``.
"""

from __future__ import annotations

import os
import weakref
from dataclasses import dataclass
from functools import lru_cache
from types import ModuleType

import numpy as np
import pyarrow as pa

from gpuan.errors import UsageError
from gpuan.options import ENGINES


class EngineError(UsageError):
    """The requested engine cannot run here (e.g. ``--device gpu`` or ``GPUAN_DEVICE=gpu`` without a GPU), or is
    not one."""


@dataclass(frozen=True)
class Engine:
    """An array backend: ``name`` is "cpu" or "gpu", ``xp`` is numpy or cupy."""

    name: str
    xp: ModuleType

    @property
    def is_gpu(self) -> bool:
        return self.name == "gpu"

    def asarray(self, a: np.ndarray):
        """Return a host numpy array on this engine's device."""
        return self.xp.asarray(a)

    def to_host(self, a) -> np.ndarray:
        """Return an engine array as a numpy array."""
        return a.get() if self.is_gpu else np.asarray(a)

    def column(self, col: pa.Array | pa.ChunkedArray, null: int | None = None):
        """Return an Arrow column as an engine array.

        Integer columns keep their dtype with nulls replaced by `null` (default: the dtype's minimum);
        dictionary columns become their int32 codes with -1 for null."""
        if isinstance(col, pa.ChunkedArray):
            # one chunk (the readers' tables) is taken as it is: combining would copy every column once more
            col = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
        if pa.types.is_dictionary(col.type):
            codes = _filled(col.indices, -1).to_numpy(zero_copy_only=False).astype(np.int32, copy=False)
            return self.asarray(codes)
        if pa.types.is_integer(col.type):
            fill = null if null is not None else np.iinfo(col.type.to_pandas_dtype()).min
            return self.asarray(_filled(col, fill).to_numpy(zero_copy_only=False))
        return self.asarray(col.to_numpy(zero_copy_only=False))

    def columns(self, table: pa.Table, names: list[str] | None = None) -> dict:
        """Return the table's columns (all, or `names`) as engine arrays: the table on the device. Columns
        made resident with :meth:`keep_resident` come back as they are, without another upload."""
        held = _RESIDENT.get(id(table), (None, {}))[1] if self.is_gpu else {}
        return {n: held[n] if n in held else self.column(table[n]) for n in names or table.column_names}

    def keep_resident(self, table: pa.Table) -> dict:
        """Upload every column of the table once and keep the device arrays for as long as the table lives,
        so that :meth:`columns` of this table uploads nothing; returns them. On the CPU: the numpy columns."""
        arrays = {n: self.column(table[n]) for n in table.column_names}
        if self.is_gpu:
            key = id(table)
            _RESIDENT[key] = (weakref.ref(table, lambda _, key=key: _RESIDENT.pop(key, None)), arrays)
        return arrays


#: id(table) -> (a weak reference to the table, its columns on the GPU), while the table lives
_RESIDENT: dict[int, tuple[weakref.ref, dict]] = {}


def _filled(col: pa.Array, fill: int) -> pa.Array:
    """Return `col` with its nulls replaced by `fill`; a column without nulls as it is (no copy)."""
    return col.fill_null(fill) if col.null_count else col


CPU = Engine("cpu", np)


@lru_cache(maxsize=1)
def gpu_available() -> bool:
    """Return whether CuPy is installed and sees at least one CUDA device."""
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - any failure to reach a GPU means "no GPU"
        return False


def _gpu_engine() -> Engine:
    import cupy

    return Engine("gpu", cupy)


_selected: str | None = None


def select(choice: str | None) -> Engine:
    """Set the engine for this process ("auto", "cpu", "gpu"; None keeps the environment's) and return
    it. Raises EngineError for "gpu" where there is none."""
    global _selected
    if choice is not None and choice not in ENGINES:
        raise EngineError(f"unknown device {choice!r}; choose one of {', '.join(ENGINES)}")
    _selected = choice
    return current()


def resolve(engine: Engine | str | None) -> Engine:
    """Return the engine an analysis runs on: `engine` itself, the one named ("auto", "cpu", "gpu"), or,
    for None, the one in force (:func:`current`)."""
    if isinstance(engine, Engine):
        return engine
    if engine is None:
        return current()
    if engine not in ENGINES:
        raise EngineError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")
    return _named(engine, asked_by=f"engine {engine!r}")


def current() -> Engine:
    """Return the engine in force (see the module docstring for the order of choice)."""
    choice = _selected or os.environ.get("GPUAN_DEVICE", "auto").lower()
    if choice not in ENGINES:
        raise EngineError(f"GPUAN_DEVICE={choice!r} is not one of {', '.join(ENGINES)}")
    # name the setting the user actually made, so that an error points at the command line or the environment
    return _named(choice, asked_by="--device gpu" if _selected else "GPUAN_DEVICE=gpu")


def _named(choice: str, asked_by: str) -> Engine:
    if choice == "cpu":
        return CPU
    if gpu_available():
        return _gpu_engine()
    if choice == "gpu":
        raise EngineError(f"{asked_by}: no GPU here (CuPy is not installed or sees no CUDA device)")
    return CPU
