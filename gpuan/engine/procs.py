"""The distributed engine: the processes an analysis shares its work among, MPI's (through mpi4py) or
this one alone.

``Procs()`` is one process, which answers every exchange locally, so an analysis has one code path. Only
:func:`from_launcher` looks at the environment (the MPI launcher's variables, ``GPUAN_MPI``,
``GPUAN_MPI_CUDA``): the command line calls it, an analysis is handed the result. Every exchange moves
typed arrays whose first axis is the records (structured numpy arrays, or byte rows of a record's size),
never pickled event objects, and takes them on the host or on a GPU (CuPy): how a device buffer crosses
to another process is decided once, by :func:`device_path`, and the callers do not know which it was.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuan.arrays import to_host
from gpuan.errors import TraceError, UsageError
from gpuan.options import MPI_LAUNCHER_VARS

#: how device (GPU) buffers cross between processes: handed to a CUDA-aware MPI as they are, through UCX
#: (ucxx), or copied to pinned host memory, sent by MPI and copied back
DEVICE_PATHS = ("cuda-aware-mpi", "ucxx", "host-staging")


@dataclass(frozen=True)
class Procs:
    """This process's place among the processes of a distributed analysis: ``rank`` of ``size``, the MPI
    communicator (None for a single process without MPI), and how its device buffers cross to the other
    processes (one of :data:`DEVICE_PATHS`; host buffers always go to MPI as they are)."""

    rank: int = 0
    size: int = 1
    comm: Any = None
    device_path: str = "host-staging"

    @property
    def is_root(self) -> bool:
        """Whether this is process 0, which gathers the results."""
        return self.rank == 0

    def alltoallv(self, records, dest):
        """Send each record (row of `records`, a numpy or CuPy array) to process ``dest[i]``; return the
        records this process received, grouped by sender in process order (each sender's records in their
        original order), as an array of the same kind on the same device."""
        xp = _namespace(records)
        dest = xp.asarray(dest)
        if dest.size < 2 or bool(xp.all(dest[1:] >= dest[:-1])):
            send = xp.ascontiguousarray(records)  # already grouped: no copy
        else:  # a counting sort: one pass per process beats a general sort of a million keys
            send = records[xp.concatenate([xp.flatnonzero(dest == p) for p in range(self.size)])]
        if self.comm is None:
            return send
        counts = to_host(xp.bincount(dest, minlength=self.size)).astype(np.int64)
        return self._exchange(send, counts)

    def gatherv(self, records):
        """Return every process's records (a numpy or CuPy array) concatenated in process order on process
        0, None elsewhere."""
        if self.comm is None:
            return records
        counts = np.zeros(self.size, np.int64)
        counts[0] = records.shape[0]
        out = self._exchange(_namespace(records).ascontiguousarray(records), counts)
        return out if self.is_root else None

    def allgatherv(self, records):
        """Return every process's records (a numpy or CuPy array) concatenated in process order, on every
        process."""
        if self.comm is None:
            return records
        xp = _namespace(records)
        counts = np.full(self.size, records.shape[0], np.int64)
        return self._exchange(xp.concatenate([xp.ascontiguousarray(records)] * self.size), counts)

    def _exchange(self, send, counts: np.ndarray):
        """Return what arrives when ``counts[p]`` consecutive records of `send` go to process p: the one
        exchange every other is made of, on the path :func:`exchange_path` chooses for `send`."""
        from mpi4py import MPI

        got = np.empty(self.size, np.int64)
        self.comm.Alltoall(counts, got)
        xp = _namespace(send)
        out = xp.empty((int(got.sum()), *send.shape[1:]), send.dtype)
        row = send.dtype.itemsize * int(np.prod(send.shape[1:], dtype=np.int64))
        path = exchange_path(xp is not np, self.device_path)
        if path == "ucxx":
            _ucxx_alltoallv(self.comm, _bytes(send), counts * row, _bytes(out), got * row)
            return out
        if path == "host-staging":  # pinned host copies: the DMA engines copy from them directly
            import cupyx

            staged = cupyx.empty_pinned(send.shape, send.dtype)
            send.get(out=staged)
            send, landed = staged, cupyx.empty_pinned(out.shape, out.dtype)
        else:
            landed = out
            if path == "cuda-aware-mpi":  # MPI reads device memory outside CuPy's stream order
                xp.cuda.get_current_stream().synchronize()
        self.comm.Alltoallv(
            [_bytes(send), (counts * row, _displs(counts) * row), MPI.BYTE],
            [_bytes(landed), (got * row, _displs(got) * row), MPI.BYTE],
        )
        if path == "host-staging":
            out.set(landed)
        return out

    def allreduce(self, values: np.ndarray, op: str) -> np.ndarray:
        """Return the element-wise "min", "max" or "sum" of `values` (small, on the host) over all
        processes."""
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


def exchange_path(on_device: bool, device_path: str) -> str:
    """Return how a buffer crosses between processes: "host" (MPI reads it where it is) for host memory,
    else, `on_device`, `device_path` (one of :data:`DEVICE_PATHS`: what :func:`device_path` chose for
    these processes)."""
    return device_path if on_device else "host"


def device_path(cuda_aware: bool, ucxx: bool) -> str:
    """Return how device buffers cross between processes: handed to MPI as they are where MPI is
    CUDA-aware, else through ucxx where it is installed, else staged through pinned host memory."""
    if cuda_aware:
        return "cuda-aware-mpi"
    return "ucxx" if ucxx else "host-staging"


def cuda_aware_mpi() -> bool:
    """Return whether the MPI library under mpi4py takes CUDA device buffers: mpi4py's own query where it
    has one, else ``MPIX_Query_cuda_support()`` of the loaded MPI library (MPICH 4 and later, Open MPI
    with its CUDA extension); False where neither answers. MPI must be initialised (importing mpi4py.MPI
    does it)."""
    from mpi4py import MPI

    query = getattr(MPI, "Query_cuda_support", None)
    if query is not None:
        return bool(query())
    for path in _loaded_mpi_libraries():
        try:
            function = ctypes.CDLL(path).MPIX_Query_cuda_support
        except (OSError, AttributeError):
            continue
        function.restype = ctypes.c_int
        return bool(function())
    return False


def _loaded_mpi_libraries() -> list[str]:
    """Return the paths of the MPI libraries mapped into this process (mpi4py opens its library privately,
    so its symbols are not global: the library is found by name and opened again, which shares it)."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "/libmpi" in line}
    except OSError:
        return []
    # MPICH, Intel MPI, MVAPICH and Open MPI all name it libmpi.so.N (Open MPI's C++ bindings, libmpi_cxx,
    # answer nothing and are skipped by the caller)
    return sorted(p for p in paths if os.path.basename(p).startswith("libmpi"))


def ucxx_available() -> bool:
    """Return whether ucxx (UCX's Python binding, optional) imports."""
    try:
        import ucxx  # noqa: F401
    except Exception:  # noqa: BLE001 - a broken install counts as none
        return False
    return True


def _namespace(a):
    """Return the array namespace of `a`: CuPy for a device array, else numpy."""
    if hasattr(a, "__cuda_array_interface__"):
        import cupy

        return cupy
    return np


def _bytes(a):
    """Return `a`'s memory as a flat uint8 array of its kind (a structured or multi-dimensional array too)."""
    flat = a.reshape(-1)
    return flat.view(np.uint8) if a.size else _namespace(a).empty(0, np.uint8)


def _displs(counts: np.ndarray) -> np.ndarray:
    return np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)


_UCXX: dict[int, tuple[Any, dict[int, Any]]] = {}  # id of the communicator → (event loop, peer → endpoint)


def _ucxx_alltoallv(comm, send, send_bytes: np.ndarray, out, got_bytes: np.ndarray) -> None:
    """Fill `out` with what each process sends this one, sending ``send_bytes[p]`` bytes of `send` (device
    byte arrays, grouped by process) to process p, over UCX endpoints made once per communicator from the
    workers' addresses (exchanged over MPI)."""
    import asyncio

    import cupy
    import ucxx

    me = comm.Get_rank()
    if id(comm) not in _UCXX:
        addresses = comm.allgather(bytes(memoryview(ucxx.get_worker_address())))
        loop = asyncio.new_event_loop()

        async def connect() -> dict[int, Any]:
            return {
                p: await ucxx.create_endpoint_from_worker_address(ucxx.get_ucx_address_from_buffer(address))
                for p, address in enumerate(addresses)
                if p != me
            }

        _UCXX[id(comm)] = (loop, loop.run_until_complete(connect()))
    loop, endpoints = _UCXX[id(comm)]
    send_at, got_at = _displs(send_bytes), _displs(got_bytes)
    cupy.cuda.get_current_stream().synchronize()  # UCX reads device memory outside CuPy's stream order
    out[got_at[me] : got_at[me] + got_bytes[me]] = send[send_at[me] : send_at[me] + send_bytes[me]]

    async def exchange() -> None:
        moves = []
        for p, endpoint in endpoints.items():
            if send_bytes[p]:
                moves.append(endpoint.send(send[send_at[p] : send_at[p] + send_bytes[p]], tag=me, force_tag=True))
            if got_bytes[p]:
                moves.append(endpoint.recv(out[got_at[p] : got_at[p] + got_bytes[p]], tag=p, force_tag=True))
        await asyncio.gather(*moves)

    loop.run_until_complete(exchange())
    comm.Barrier()  # every process has its bytes before any reuses its buffers


def under_mpi_launcher() -> bool:
    """Whether an MPI launcher started this process (``GPUAN_MPI=1`` forces it, ``0`` forbids it)."""
    forced = os.environ.get("GPUAN_MPI")
    if forced is not None:
        if forced.strip() not in ("0", "1"):
            raise UsageError(f"GPUAN_MPI must be 0 or 1, not {forced!r}")
        return forced.strip() == "1"
    return any(v in os.environ for v in MPI_LAUNCHER_VARS)


def from_launcher(use_mpi: bool | None = None) -> Procs:
    """Return this process's Procs: MPI's COMM_WORLD when started by an MPI launcher (or `use_mpi`), with
    the path its device buffers take (:func:`device_path`), else a single process. Raises UsageError for a
    bad ``GPUAN_MPI`` or ``GPUAN_MPI_CUDA``, RuntimeError if MPI is wanted and mpi4py is missing."""
    if use_mpi is None:
        use_mpi = under_mpi_launcher()
    if not use_mpi:
        return Procs()
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise RuntimeError("running under an MPI launcher needs mpi4py (pip install 'gpuan[mpi]')") from e
    comm = MPI.COMM_WORLD
    if comm.Get_size() == 1:
        return Procs()
    return Procs(comm.Get_rank(), comm.Get_size(), comm, _device_path_here())


def _device_path_here() -> str:
    """Return :func:`device_path` for this process: MPI's CUDA awareness as ``GPUAN_MPI_CUDA`` (0 or 1)
    says, else as the library answers; ucxx only where a GPU is (importing it starts UCX). Raises
    UsageError for a bad ``GPUAN_MPI_CUDA``."""
    from gpuan.engine import gpu_available

    forced = os.environ.get("GPUAN_MPI_CUDA")
    if forced is not None and forced.strip() not in ("0", "1"):
        raise UsageError(f"GPUAN_MPI_CUDA must be 0 or 1, not {forced!r}")
    cuda_aware = forced.strip() == "1" if forced is not None else cuda_aware_mpi()
    return device_path(cuda_aware, gpu_available() and ucxx_available())
