"""Distributed replay of per-rank traces: collective and point-to-point wait states, stragglers, time
breakdown and communication matrix, as one process or as an MPI job (``mpirun -np P gpuan replay``).

Data flows one way: :mod:`deal` shares the ranks' sources among the processes, :mod:`comms` turns each
rank's events into communication records, :mod:`collectives` and :mod:`p2p` find the wait states (with
:mod:`fetch` for other ranks' records), :mod:`breakdown` splits each rank's time, and :mod:`tables`
builds the outputs on process 0. :mod:`run` ties them together.
"""

from gpuan.replay.run import ANALYSES, Replayed, replay

__all__ = ["ANALYSES", "Replayed", "replay"]
