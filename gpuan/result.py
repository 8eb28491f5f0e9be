"""What every analysis returns: named Arrow tables plus a small summary of plain numbers and strings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa


@dataclass(frozen=True)
class Result:
    """The result of one analysis (``gpuan.<analysis>.analyse(...)``).

    ``tables`` holds the rows (one Arrow table per name, e.g. ``"ops"``, ``"stragglers"``); ``summary``
    holds the scalars and small lists a report shows above them (JSON-serialisable). The outputs layer
    (:mod:`gpuan.outputs`) renders a Result as text, JSON, CSV, Parquet, XLSX or HTML."""

    analysis: str
    tables: Mapping[str, pa.Table] = field(default_factory=dict)
    summary: Mapping[str, Any] = field(default_factory=dict)

    def __getitem__(self, name: str) -> pa.Table:
        """Return the table called `name`; a KeyError lists the names there are."""
        try:
            return self.tables[name]
        except KeyError:
            names = ", ".join(self.tables) or "none"
            raise KeyError(f"{self.analysis} has no table {name!r}; it has {names}") from None

    def to_pandas(self, name: str | None = None):
        """Return the table `name` as a pandas DataFrame, or, without a name, every table as a dict of
        DataFrames."""
        if name is not None:
            return self[name].to_pandas()
        return {n: t.to_pandas() for n, t in self.tables.items()}

    def __repr__(self) -> str:
        tables = ", ".join(f"{n}: {t.num_rows:,} rows" for n, t in self.tables.items())
        return f"Result({self.analysis!r}, tables={{{tables}}}, summary keys={list(self.summary)})"
