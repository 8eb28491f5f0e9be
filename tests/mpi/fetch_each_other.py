"""Run under ``mpiexec -n 2``: each process owns one rank and fetches the other's records, at once."""

import sys

import numpy as np

from gpuan.engine.procs import from_launcher
from gpuan.replay.fetch import Fetcher
from gpuan.replay.p2p import PARTNER

me = from_launcher()
assert me.size == 2, me.size
other = 1 - me.rank
f = Fetcher(me, np.array([0, 1]), PARTNER)
mine = np.zeros(1000, PARTNER)
mine["rank"], mine["key"] = me.rank, np.arange(1000) * 7
mine["enter"] = mine["key"] * 10 + me.rank
f.hold(me.rank, mine)
for _ in range(3):  # asked again: answered from the cache, nothing crosses
    got, found = f.fetch(np.full(500, other), np.arange(500) * 14)
    assert found.all()
    assert (got["enter"] == np.arange(500) * 140 + other).all()
missing, found = f.fetch(np.array([other]), np.array([3]))
assert not found.any()
assert f.sent == 501, f.sent  # 500 keys once, then the one that does not exist
print(f"process {me.rank}: fetched {f.sent} records in {f.rounds} rounds", flush=True)
sys.exit(0)
