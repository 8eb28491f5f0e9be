"""Run under ``mpiexec -n P``: the exchanges of typed records give every process what one process computes
for it, as structured numpy, as byte rows of Records, and (with ``--gpu``) as CuPy Records on every
device path this machine has; prints one line per process with the path chosen and the library's answer.

    mpiexec -n 2 python3 tests/mpi/exchange_paths.py [--gpu]
"""

import dataclasses
import sys

import numpy as np

from gpuan.engine.procs import _loaded_mpi_libraries, cuda_aware_mpi, from_launcher, ucxx_available
from gpuan.replay.comms import CALL
from gpuan.replay.records import Records, allgather, gather, send


def records_of(rank: int, n_procs: int) -> tuple[np.ndarray, np.ndarray]:
    """Return (process `rank`'s records, where each goes): the same on every process, from the rank."""
    rng = np.random.default_rng(100 + rank)
    n = int(rng.integers(0, 400))
    recs = np.zeros(n, CALL)
    for name in CALL.names:
        info = np.iinfo(CALL[name]) if CALL[name].kind in "iu" else None
        recs[name] = rng.integers(info.min, info.max, n, dtype=CALL[name]) if info else rng.random(n) < 0.5
    return recs, rng.integers(0, n_procs, n)


me = from_launcher()
P = me.size
assert P > 1, P
mine, dest = records_of(me.rank, P)
everyone = [records_of(r, P) for r in range(P)]
# what one process computes: each sender's records to me, in sender order, each in its own order
expect_to_me = np.concatenate([recs[where == me.rank] for recs, where in everyone])
expect_all = np.concatenate([recs for recs, _ in everyone])

paths = ["host"]
assert (me.alltoallv(mine, dest) == expect_to_me).all()
assert (me.allgatherv(mine) == expect_all).all()
gathered = me.gatherv(mine)
assert (gathered == expect_all).all() if me.is_root else gathered is None
assert (send(me, Records.of(mine), dest).to_numpy() == expect_to_me).all()
assert (allgather(me, Records.of(mine)).to_numpy() == expect_all).all()
gathered = gather(me, Records.of(mine))
assert (gathered.to_numpy() == expect_all).all() if me.is_root else gathered is None

if "--gpu" in sys.argv:
    import cupy

    on_gpu = Records.of(mine, cupy)
    tried = ["host-staging"] + ["cuda-aware-mpi"] * cuda_aware_mpi() + ["ucxx"] * ucxx_available()
    for path in tried:
        procs = dataclasses.replace(me, device_path=path)
        got = send(procs, on_gpu, cupy.asarray(dest))
        assert got.xp is cupy and (got.to_numpy() == expect_to_me).all(), path
        assert (allgather(procs, on_gpu).to_numpy() == expect_all).all(), path
        gathered = gather(procs, on_gpu)
        assert gathered.xp is cupy and (gathered.to_numpy() == expect_all).all() if me.is_root else gathered is None
        paths.append(path)

print(
    f"process {me.rank} of {P}: device path {me.device_path}; cuda-aware {cuda_aware_mpi()}; "
    f"queried {len(_loaded_mpi_libraries())} MPI library; exchanged on {','.join(paths)}",
    flush=True,
)
