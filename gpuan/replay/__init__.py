"""Distributed replay of per-rank traces: collective and point-to-point wait states, stragglers, time
breakdown and communication matrix, as one process or as an MPI job (``mpirun -np P gpuan replay``).

``analyse(load_run(path))`` (:func:`gpuan.trace.ranks.load_run`) returns a Result with the tables
``collectives``, ``collective_waits``, ``p2p``, ``wait_totals``, ``stragglers``, ``breakdown``,
``comm_matrix`` (those of the reports chosen from :data:`gpuan.options.REPLAY_REPORTS`) and
``clock_offsets``. It runs as one process unless handed MPI's processes
(``procs=gpuan.engine.procs.from_launcher()``, what the command does).

Data flows one way: :mod:`deal` shares the ranks' sources among the processes, :mod:`comms` turns each
rank's events into communication records, :mod:`collectives` and :mod:`p2p` find the wait states (with
:mod:`fetch` for other ranks' records), :mod:`breakdown` splits each rank's time, and :mod:`tables`
builds the tables on process 0. :mod:`analysis` ties them together.
"""

from gpuan.replay.analysis import analyse, reads

__all__ = ["analyse", "reads"]
