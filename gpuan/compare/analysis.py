"""``gpuan compare`` as functions: :func:`analyse` compares two cycle tables, :func:`analyse_runs` every
cycle of two runs (see :mod:`gpuan.compare` for the Result's tables)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from gpuan.compare.pairing import COLUMNS, MATCH_TYPES, pair_all
from gpuan.compare.similarity import cycle_change_pct, cycle_time_us, pair_cycles, similarity
from gpuan.engine import Engine, resolve
from gpuan.errors import UsageError
from gpuan.options import COMPARE_MODES
from gpuan.result import Result
from gpuan.trace.inputs import CycleTable


def _finite(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def _cycle_row(pair: int, i: int, j: int, base: CycleTable, new: CycleTable, score: float, frame) -> dict:
    """Return the ``cycles`` row of one pair of cycles and its kernel pairing `frame`."""
    counts = frame["match_type"].value_counts()
    row = {"pair": pair, "base": i, "new": j, "base_file": base.path, "new_file": new.path, "similarity": score}
    for side, table in (("base", base), ("new", new)):
        row[f"{side}_kernels"] = len(table.rows)
        row[f"{side}_iterations"] = table.iterations
        row[f"{side}_cycle_us"] = cycle_time_us(table)
        row[f"{side}_sum_us"] = float(table.rows["avg_duration_us"].sum())
    row["change_pct"] = _finite(cycle_change_pct(base, new))
    row["rotation"] = frame.attrs.get("rotation")
    row["common"] = frame.attrs.get("common")
    row.update({kind: int(counts.get(kind, 0)) for kind in MATCH_TYPES})
    return row


_CYCLE_SCHEMA = pa.schema(
    [("pair", pa.int64()), ("base", pa.int64()), ("new", pa.int64()), ("base_file", pa.string()),
     ("new_file", pa.string()), ("similarity", pa.float64())]
    + [(f"{side}_{key}", kind) for side in ("base", "new")
       for key, kind in (("kernels", pa.int64()), ("iterations", pa.int64()), ("cycle_us", pa.float64()),
                         ("sum_us", pa.float64()))]
    + [("change_pct", pa.float64()), ("rotation", pa.int64()), ("common", pa.int64())]
    + [(kind, pa.int64()) for kind in MATCH_TYPES]
)  # fmt: skip


def _kernels_table(frames: list) -> pa.Table:
    tables = []
    for pair, frame in enumerate(frames):
        # a kernel missing on one side counts with 0 µs there: removing or adding it is a time change too
        delta = frame["new_avg"].fillna(0.0) - frame["base_avg"].fillna(0.0)
        table = pa.Table.from_pandas(frame.assign(delta_us=delta.astype(np.float64)), preserve_index=False)
        tables.append(table.add_column(0, "pair", pa.array(np.full(len(frame), pair, np.int64))))
    return pa.concat_tables(tables) if tables else _empty_kernels()


def _empty_kernels() -> pa.Table:
    fields = [("pair", pa.int64())] + [
        (name, pa.string() if name.endswith(("_kernel", "match_type")) else pa.float64()) for name in COLUMNS
    ]
    return pa.schema([*fields, ("delta_us", pa.float64())]).empty_table()


def _check_mode(mode: str) -> None:
    if mode not in COMPARE_MODES:
        raise UsageError(f"unknown compare mode {mode!r}; choose one of {', '.join(COMPARE_MODES)}")


def analyse(
    tables: tuple[CycleTable, CycleTable], *, engine: Engine | str | None = None, mode: str = "align"
) -> Result:
    """Return the kernel-by-kernel comparison of two cycle tables, `tables` = (baseline, new), as a Result
    ``compare`` (tables
    ``kernels`` and ``cycles``, one row; see the module docstring). `mode` is ``align`` (best rotation,
    then longest common subsequence of signatures) or ``match`` (by name, then by signature).

    Summary: ``mode``, ``pairs`` (1), the counts of each match type, ``base_cycle_us``, ``new_cycle_us``,
    ``cycle_change_pct`` (None from a 0 baseline), and for ``align`` the ``rotation`` and ``common``
    length. On the GPU engine the alignment runs there (:mod:`gpuan.compare.lcs_gpu`), with the same result."""
    engine = resolve(engine)
    _check_mode(mode)
    base, new = tables
    (frame,) = pair_all([(base, new)], mode, engine)
    row = _cycle_row(0, 0, 0, base, new, similarity(base, new), frame)
    summary = {"mode": mode, "pairs": 1, **{kind: row[kind] for kind in MATCH_TYPES}}
    summary.update(base_cycle_us=row["base_cycle_us"], new_cycle_us=row["new_cycle_us"],
                   cycle_change_pct=row["change_pct"])  # fmt: skip
    if mode == "align":
        summary.update(rotation=row["rotation"], common=row["common"])
    out = {"kernels": _kernels_table([frame]), "cycles": pa.Table.from_pylist([row], schema=_CYCLE_SCHEMA)}
    return Result("compare", out, summary)


def analyse_runs(
    runs: tuple[Sequence[CycleTable], Sequence[CycleTable]],
    *,
    engine: Engine | str | None = None,
    mode: str = "align",
) -> Result:
    """Return the comparison of every cycle of two runs, `runs` = (the baseline's cycle tables, the new
    run's), as a Result ``compare``: the cycles paired by :func:`~gpuan.compare.similarity.pair_cycles`
    (most similar first, none below :data:`~gpuan.compare.similarity.MIN_SIMILARITY`), then each pair's
    kernels as :func:`analyse` does (tables ``kernels`` and ``cycles``: one row per pair, none when no cycle
    resembles another).

    Summary: ``mode``, ``pairs``, ``unpaired_base`` and ``unpaired_new`` (the files of the cycles left
    without a partner)."""
    engine = resolve(engine)
    _check_mode(mode)
    bases, news = runs
    pairs = pair_cycles(bases, news)
    frames = pair_all([(bases[i], news[j]) for i, j, _ in pairs], mode, engine)  # one batch on the GPU
    rows = [_cycle_row(pair, i, j, bases[i], news[j], score, frame)
            for pair, ((i, j, score), frame) in enumerate(zip(pairs, frames))]  # fmt: skip
    paired_base, paired_new = {p[0] for p in pairs}, {p[1] for p in pairs}
    summary = {
        "mode": mode,
        "pairs": len(pairs),
        "unpaired_base": [t.path for k, t in enumerate(bases) if k not in paired_base],
        "unpaired_new": [t.path for k, t in enumerate(news) if k not in paired_new],
    }
    tables = {"kernels": _kernels_table(frames), "cycles": pa.Table.from_pylist(rows, schema=_CYCLE_SCHEMA)}
    return Result("compare", tables, summary)
