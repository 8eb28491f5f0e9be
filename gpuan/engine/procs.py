"""The distributed engine: the processes an analysis shares its work among, MPI's (through mpi4py) or
this one alone.

``Procs()`` is one process, which answers every exchange locally, so an analysis has one code path. Only
:func:`from_launcher` looks at the environment (the MPI launcher's variables, ``GPUAN_MPI``): the command
line calls it, an analysis is handed the result. Every exchange moves typed numpy buffers (structured
arrays go as their bytes), never pickled event objects.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuan.errors import TraceError, UsageError

# what MPI launchers put in the environment of the processes they start
_LAUNCHER_VARS = ("PMI_SIZE", "PMI_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS", "HYDI_CONTROL_FD")


@dataclass(frozen=True)
class Procs:
    """This process's place among the processes of a distributed analysis: ``rank`` of ``size``, and the
    MPI communicator (None for a single process without MPI)."""

    rank: int = 0
    size: int = 1
    comm: Any = None

    @property
    def is_root(self) -> bool:
        """Whether this is process 0, which gathers the results."""
        return self.rank == 0

    def alltoallv(self, records: np.ndarray, dest: np.ndarray) -> np.ndarray:
        """Send each record to process ``dest[i]``; return the records this process received, grouped by
        sender in process order (each sender's records in their original order)."""
        if dest.size < 2 or bool(np.all(dest[1:] >= dest[:-1])):
            send = np.ascontiguousarray(records)  # already grouped: no copy
        else:  # a counting sort: one pass per process beats a general sort of a million keys
            order = np.concatenate([np.flatnonzero(dest == p) for p in range(self.size)])
            send = records[order]
        counts = np.bincount(dest, minlength=self.size).astype(np.int64)
        if self.comm is None:
            return send
        from mpi4py import MPI

        got = np.empty(self.size, np.int64)
        self.comm.Alltoall(counts, got)
        out = np.empty(int(got.sum()), records.dtype)
        size = records.dtype.itemsize
        self.comm.Alltoallv(
            [_bytes(send), (counts * size, _displs(counts) * size), MPI.BYTE],
            [_bytes(out), (got * size, _displs(got) * size), MPI.BYTE],
        )
        return out

    def gatherv(self, records: np.ndarray) -> np.ndarray | None:
        """Return every process's records concatenated in process order on process 0, None elsewhere."""
        if self.comm is None:
            return records
        from mpi4py import MPI

        records = np.ascontiguousarray(records)
        counts = np.array(self.comm.gather(records.size, root=0) or [], np.int64)
        size = records.dtype.itemsize
        if not self.is_root:
            self.comm.Gatherv([_bytes(records), MPI.BYTE], None, root=0)
            return None
        out = np.empty(int(counts.sum()), records.dtype)
        self.comm.Gatherv(
            [_bytes(records), MPI.BYTE], [_bytes(out), (counts * size, _displs(counts) * size), MPI.BYTE], root=0
        )
        return out

    def allgatherv(self, records: np.ndarray) -> np.ndarray:
        """Return every process's records concatenated in process order, on every process."""
        if self.comm is None:
            return records
        from mpi4py import MPI

        records = np.ascontiguousarray(records)
        counts = np.empty(self.size, np.int64)
        self.comm.Allgather(np.array([records.size], np.int64), counts)
        out = np.empty(int(counts.sum()), records.dtype)
        size = records.dtype.itemsize
        self.comm.Allgatherv(
            [_bytes(records), MPI.BYTE], [_bytes(out), (counts * size, _displs(counts) * size), MPI.BYTE]
        )
        return out

    def allreduce(self, values: np.ndarray, op: str) -> np.ndarray:
        """Return the element-wise "min", "max" or "sum" of `values` over all processes."""
        if self.comm is None:
            return values
        from mpi4py import MPI

        out = np.empty_like(values)
        self.comm.Allreduce(np.ascontiguousarray(values), out, op={"min": MPI.MIN, "max": MPI.MAX, "sum": MPI.SUM}[op])
        return out

    def maxloc(self, values: np.ndarray, where: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Return, element-wise over all processes, the largest value and the `where` that came with it
        (MPI MAXLOC: the smallest `where` among equal values)."""
        pairs = np.empty(values.size, np.dtype([("v", np.float64), ("i", np.int32)], align=True))  # MPI_DOUBLE_INT
        pairs["v"], pairs["i"] = values, where
        if self.comm is not None:
            from mpi4py import MPI

            out = np.empty_like(pairs)
            self.comm.Allreduce([pairs, MPI.DOUBLE_INT], [out, MPI.DOUBLE_INT], op=MPI.MAXLOC)
            pairs = out
        return pairs["v"].copy(), pairs["i"].astype(np.int64)

    def allgather_small(self, obj: Any) -> list[Any]:
        """Return every process's `obj` (small metadata: names, sizes; never event records)."""
        return [obj] if self.comm is None else self.comm.allgather(obj)

    def raise_together(self, error: TraceError | None, at: int = -1) -> None:
        """Return when no process met an error; else raise on every process the same TraceError: the one
        met at the lowest `at` (a rank; -1 before any), so that which one does not depend on the number
        of processes. A process that stopped alone would leave the others waiting in the next exchange."""
        problem = None if error is None else (at, error.path, error.problem)
        problems = [p for p in self.allgather_small(problem) if p]
        if problems:
            raise TraceError(*min(problems)[1:])


def _bytes(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint8) if a.size else np.empty(0, np.uint8)


def _displs(counts: np.ndarray) -> np.ndarray:
    return np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)


def under_mpi_launcher() -> bool:
    """Whether an MPI launcher started this process (``GPUAN_MPI=1`` forces it, ``0`` forbids it)."""
    forced = os.environ.get("GPUAN_MPI")
    if forced is not None:
        if forced.strip() not in ("0", "1"):
            raise UsageError(f"GPUAN_MPI must be 0 or 1, not {forced!r}")
        return forced.strip() == "1"
    return any(v in os.environ for v in _LAUNCHER_VARS)


def from_launcher(use_mpi: bool | None = None) -> Procs:
    """Return this process's Procs: MPI's COMM_WORLD when started by an MPI launcher (or `use_mpi`), else
    a single process. Raises UsageError for a bad ``GPUAN_MPI``, RuntimeError if MPI is wanted and mpi4py
    is missing."""
    if use_mpi is None:
        use_mpi = under_mpi_launcher()
    if not use_mpi:
        return Procs()
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise RuntimeError("running under an MPI launcher needs mpi4py (pip install 'gpuan[mpi]')") from e
    comm = MPI.COMM_WORLD
    return Procs(comm.Get_rank(), comm.Get_size(), comm if comm.Get_size() > 1 else None)
