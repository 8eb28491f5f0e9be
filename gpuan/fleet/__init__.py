"""The fleet view of a multi-rank run: which rank is slow, in which step, and why.

``analyse(load_run(path))`` (:func:`gpuan.trace.ranks.load_run`) finds every rank's steps by cycle
detection, compares each (rank, step) with the median rank, and names, for the slowest, the positions of
the step (ops, or the idle time before an op) that made it slow, apart from the waiting that replay
explains. It runs as one process unless handed MPI's processes (``procs=gpuan.engine.procs.from_launcher()``,
what ``gpuan fleet`` does under ``mpirun``).

:mod:`steps` finds a rank's steps, :mod:`align` lines up the positions of ranks that run one pattern,
:mod:`intervals` and :mod:`measure` turn a rank's steps into typed records with the waiting taken out,
:mod:`exchange` shares names and records between processes, :mod:`compare` finds the slow steps and their
causes on process 0, and :mod:`tables` builds the Result's tables; :mod:`analysis` ties them together.
"""

from gpuan.fleet.analysis import analyse, reads

__all__ = ["analyse", "reads"]
