"""Typed records as columns on the engine: what the replay computes on and sends between processes.

A numpy structured dtype (``CALL``, ``WAIT``...) names the fields; :class:`Records` holds one engine
array per field (numpy's or CuPy's: a structured dtype cannot live on a GPU). Rows are selected,
assigned and concatenated like a structured array's; between processes they travel as byte rows laid
out exactly as the structured array's bytes (:meth:`Records.rows`), through :mod:`gpuan.engine.procs`,
which decides how device buffers cross.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

from gpuan.arrays import stable_argsort, to_host
from gpuan.engine.procs import Procs
from gpuan.engine.scatter import extreme_at


class Records:
    """Rows of the structured `dtype`, as one array per field in the array namespace `xp`."""

    def __init__(self, dtype: np.dtype, columns: dict, xp: ModuleType = np) -> None:
        self.dtype, self.xp, self._columns = np.dtype(dtype), xp, columns

    @classmethod
    def zeros(cls, n: int, dtype: np.dtype, xp: ModuleType = np) -> Records:
        """Return `n` rows of zeros."""
        return cls(dtype, {name: xp.zeros(n, dtype[name]) for name in dtype.names}, xp)

    @classmethod
    def of(cls, records: np.ndarray | Records, xp: ModuleType = np) -> Records:
        """Return structured numpy `records` (or Records) as Records on `xp` (each field contiguous)."""
        if isinstance(records, Records):
            if records.xp is xp:
                return records
            records = records.to_numpy()
        columns = {name: xp.asarray(np.ascontiguousarray(records[name])) for name in records.dtype.names}
        return cls(records.dtype, columns, xp)

    @classmethod
    def concat(cls, parts: list[Records], dtype: np.dtype, xp: ModuleType = np) -> Records:
        """Return the rows of `parts` one after the other (zero rows for none)."""
        if not parts:
            return cls.zeros(0, dtype, xp)
        return cls(dtype, {name: xp.concatenate([p[name] for p in parts]) for name in dtype.names}, xp)

    @classmethod
    def where(cls, mask, a: Records, b: Records) -> Records:
        """Return, row by row, `a`'s row where `mask` holds, else `b`'s."""
        return cls(a.dtype, {name: a.xp.where(mask, a[name], b[name]) for name in a.dtype.names}, a.xp)

    @property
    def size(self) -> int:
        """The number of rows."""
        return int(self._columns[self.dtype.names[0]].shape[0])

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, key):
        """A field name gives its column; anything else (mask, positions, slice) selects rows."""
        if isinstance(key, str):
            return self._columns[key]
        return Records(self.dtype, {name: col[key] for name, col in self._columns.items()}, self.xp)

    def __setitem__(self, key, value) -> None:
        """A field name assigns (and casts to) its column; anything else assigns `value`'s rows there."""
        if isinstance(key, str):
            self._columns[key][...] = self.xp.asarray(value)
            return
        for name, col in self._columns.items():
            col[key] = value[name]

    def to_numpy(self) -> np.ndarray:
        """Return the rows as a structured numpy array (on the host)."""
        out = np.zeros(self.size, self.dtype)
        for name, col in self._columns.items():
            out[name] = to_host(col)
        return out

    def sort_by(self, field: str) -> Records:
        """Return the rows ordered by `field` (stable)."""
        return self[stable_argsort(self.xp, self[field])]

    def rows(self):
        """Return the rows as a 2-D uint8 array of ``dtype.itemsize`` bytes each, on the same device, laid out
        as the structured array's bytes: what crosses between processes."""
        xp, n = self.xp, self.size
        out = xp.zeros((n, self.dtype.itemsize), xp.uint8)
        for name in self.dtype.names:
            field, at = self.dtype.fields[name][:2]
            width = field.itemsize
            out[:, at : at + width] = xp.ascontiguousarray(self[name]).view(xp.uint8).reshape(n, width)
        return out

    @classmethod
    def from_rows(cls, rows, dtype: np.dtype, xp: ModuleType = np) -> Records:
        """Return the Records whose :meth:`rows` are `rows` (a 2-D uint8 array on `xp`'s device)."""
        n = rows.shape[0]
        columns = {}
        for name in dtype.names:
            field, at = dtype.fields[name][:2]
            raw = xp.ascontiguousarray(rows[:, at : at + field.itemsize])
            columns[name] = raw.view(field).reshape(n)
        return cls(dtype, columns, xp)


def lexsort(xp: ModuleType, keys: tuple) -> object:
    """Return the stable order that sorts by the last of `keys`, then the one before... (numpy's lexsort).
    On CuPy, one stable sort per key from the least significant: its lexsort wants one stacked array, which
    would cast int64 keys beside float ones to float64."""
    return np.lexsort(keys) if xp is np else lexsort_by_argsorts(xp, keys)


def lexsort_by_argsorts(xp: ModuleType, keys: tuple):
    """Return :func:`lexsort`'s order by one stable sort per key, the least significant first (what CuPy
    runs; numpy can too, which is how it is tested)."""
    order = xp.arange(keys[0].shape[0])
    for key in keys:
        order = order[stable_argsort(xp, key[order])]
    return order


def run_starts(xp: ModuleType, *keys):
    """Return where each run of equal rows starts among rows sorted by `keys` (columns of one length)."""
    new = xp.zeros(keys[0].shape[0], bool)
    new[:1] = True
    for key in keys:
        new[1:] |= key[1:] != key[:-1]
    return xp.flatnonzero(new)


def run_numbers(xp: ModuleType, starts, n: int):
    """Return, for `n` sorted rows whose runs begin at `starts` (:func:`run_starts`), the run of each row
    (0, 1, ...)."""
    marks = xp.zeros(n, np.int64)
    marks[starts] = 1
    return xp.cumsum(marks) - 1


def find_sorted(xp: ModuleType, sorted_keys, want) -> tuple:
    """Return (where each of `want` is among the ascending `sorted_keys`, whether it is there): a binary
    search; a position not found is some valid one (0 when `sorted_keys` is empty, where none is found)."""
    n = sorted_keys.shape[0]
    if n == 0:
        return xp.zeros(want.shape[0], np.int64), xp.zeros(want.shape[0], bool)
    at = xp.clip(xp.searchsorted(sorted_keys, want), 0, n - 1)
    return at, sorted_keys[at] == want


def reduceat(xp: ModuleType, op: str, values, starts):
    """Return numpy's ``<op>.reduceat(values, starts)`` ("add", "minimum" or "maximum") over the runs of
    rows that begin at `starts` (increasing, the first 0). CuPy has only ``add.reduceat``: there the
    minimum and maximum of integers go through ``ufunc.at`` over each row's run, exact in any order, so
    the same."""
    if xp is np or op == "add":
        return getattr(xp, op).reduceat(values, starts)
    return reduceat_by_at(xp, op, values, starts)


def reduceat_by_at(xp: ModuleType, op: str, values, starts, at=extreme_at):
    """Return :func:`reduceat`'s "minimum" or "maximum" of integer `values` by `at` (:func:`extreme_at`, which
    on CuPy goes through uint64) over each row's run (what CuPy runs; numpy can too, which is how it is
    tested, with :func:`extreme_at_unsigned` as `at`)."""
    start = np.iinfo(np.int64).min if op == "maximum" else np.iinfo(np.int64).max
    out = xp.full(starts.shape[0], start, np.int64)
    at(xp, "max" if op == "maximum" else "min", out, run_numbers(xp, starts, values.shape[0]), values)
    return out.astype(values.dtype)


def send(procs: Procs, records: Records, dest) -> Records:
    """Return the records this process receives when each of `records` goes to process ``dest[i]`` (grouped
    by sender in process order, each sender's in their order); collective over `procs`."""
    got = procs.alltoallv(records.rows(), dest)
    return Records.from_rows(got, records.dtype, records.xp)


def gather(procs: Procs, records: Records) -> Records | None:
    """Return every process's `records` concatenated in process order on process 0 (on the same engine),
    None elsewhere; collective over `procs`."""
    got = procs.gatherv(records.rows())
    return None if got is None else Records.from_rows(got, records.dtype, records.xp)


def allgather(procs: Procs, records: Records) -> Records:
    """Return every process's `records` concatenated in process order, on every process."""
    return Records.from_rows(procs.allgatherv(records.rows()), records.dtype, records.xp)
