"""Comparing two cycles kernel by kernel (``gpuan compare``): two cycle tables, or every cycle of two runs.

``analyse((base, new))`` pairs the kernels of two cycle tables (loaded by
:func:`gpuan.trace.cycle_csv.read_cycle_csv`); ``analyse_runs((bases, news))`` first pairs the cycles of
two ``gpuan cycles -o`` runs (their files listed by :func:`gpuan.trace.cycle_csv.cycle_files`) by the
similarity of their time shares per kernel signature, then the kernels of each pair. Both return a
:class:`~gpuan.result.Result` with the tables

- ``kernels``: one row per kernel pair: ``pair`` (row of ``cycles``), ``base_kernel``, ``base_avg``,
  ``base_min``, ``base_max``, ``base_std``, the same for ``new_``, ``change_pct``, ``match_type``
  (``exact``, ``similar``, ``removed``, ``new_only``), ``delta_us`` (new minus baseline average, a
  missing side counting 0); durations in µs;
- ``cycles``: one row per pair of cycles: ``pair``, ``base`` / ``new`` (index of the cycle given),
  ``base_file`` / ``new_file``, ``similarity``, per side ``_kernels``, ``_iterations``, ``_cycle_us``
  (the cycle time) and ``_sum_us`` (the summed kernel averages), ``change_pct`` (of the cycle time),
  ``rotation`` and ``common`` (alignment only), and the count of each match type.
"""

from gpuan.compare.analysis import analyse, analyse_runs
from gpuan.compare.pairing import MATCH_TYPES
from gpuan.compare.similarity import MIN_SIMILARITY

__all__ = ["MATCH_TYPES", "MIN_SIMILARITY", "analyse", "analyse_runs"]
