"""What an analysis reads of the event table: its columns and its kinds.

An analysis declares a :class:`Projection`; reading a gpuan Parquet file with it decodes only those column
chunks and only the row groups of those kinds (:func:`gpuan.trace.parquet.read`), so a trace that was too
large to load whole can still be analysed from its Parquet file. The other columns stay in the table as
null columns that take no memory, so the table keeps the event schema every analysis relies on.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa

from gpuan.trace.kinds import KINDS
from gpuan.trace.schema import SCHEMA
from gpuan.trace.table import null_column, rows_of_kinds

#: the columns every projection reads
ALWAYS = frozenset({"kind", "rank"})


@dataclass(frozen=True)
class Projection:
    """The event columns an analysis reads (`columns`) and the event kinds it reads (`kinds`; None: all).
    ``kind`` and ``rank`` are always read: row groups are chosen by kind, and a rank's reader sets its rank."""

    columns: frozenset[str]
    kinds: frozenset[str] | None = None

    def __post_init__(self) -> None:
        unknown = set(self.columns) - set(SCHEMA.names)
        if unknown:
            raise ValueError(f"Projection: unknown columns {sorted(unknown)}")
        if self.kinds is not None and set(self.kinds) - set(KINDS):
            raise ValueError(f"Projection: unknown kinds {sorted(set(self.kinds) - set(KINDS))}")
        object.__setattr__(self, "columns", frozenset(self.columns) | ALWAYS)


def projection(columns: Iterable[str], kinds: Iterable[str] | None = None) -> Projection:
    """Return the Projection of `columns` and `kinds` (None: every kind)."""
    return Projection(frozenset(columns), None if kinds is None else frozenset(kinds))


def union(*projections: Projection | None) -> Projection | None:
    """Return the projection that reads what each of `projections` reads (None, everything, if any is None)."""
    if not projections or any(p is None for p in projections):
        return None
    kinds = None if any(p.kinds is None for p in projections) else frozenset().union(*(p.kinds for p in projections))
    return Projection(frozenset().union(*(p.columns for p in projections)), kinds)


def apply(events: pa.Table, proj: Projection | None) -> pa.Table:
    """Return the event table as a projected read gives it: the rows of `proj`'s kinds, and null columns in
    place of the columns it does not read (the table unchanged for None)."""
    if proj is None:
        return events
    read = events.select([f.name for f in SCHEMA if f.name in proj.columns])  # only these are copied, if any
    if proj.kinds is not None and set(proj.kinds) != set(KINDS):
        read = rows_of_kinds(read, sorted(proj.kinds))
    n = read.num_rows
    cols = [read[f.name] if f.name in proj.columns else null_column(n, f.type) for f in SCHEMA]
    return pa.Table.from_arrays(cols, schema=SCHEMA)
