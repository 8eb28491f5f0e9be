"""The sections of the speed-of-light report as tables: totals, by layer type, by function, by phase (rolled
up), and the ops that lose the most time; :func:`result` gathers them with the scored ops into the
:class:`gpuan.result.Result` of ``gpuan.sol.analyse``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from gpuan.result import Result
from gpuan.sol.score import Scored
from gpuan.trace.schema import UNNAMED

SECTION_COLUMNS = ["ops", "estimated_ms", "share", "measured_ms", "efficiency"]
#: the columns of the top-lost table
LOST_COLUMNS = ["name", "phase", "input_dims", "dtype", "bound", "estimated_ns", "measured_ns", "efficiency", "lost_ns"]
#: the summary keys the report's totals show, in their order
TOTALS = (
    "device", "ceilings", "ops", "modelled_ops", "busy_ms", "op_ms", "overlap_ms", "shares_of", "modelled_share",
    "l2_ops", "estimated_ms", "model_errors",
)  # fmt: skip


def frame(ops: pa.Table) -> pd.DataFrame:
    """Return scored ops (:func:`gpuan.sol.score.score_ops`) as a DataFrame with ``layer`` filled (module
    class, else category), ``phase`` "(none)" where no range held the op, and ``name`` "(unnamed)" where the
    trace gave none."""
    df = ops.to_pandas()
    for c in ("name", "category", "layer", "phase", "bound", "dtype", "peak", "input_dims"):
        df[c] = df[c].astype(object)
    df["name"] = df["name"].fillna(UNNAMED)
    df["layer"] = df["layer"].where(df["layer"].notna(), df["category"])
    df["phase"] = df["phase"].where(df["phase"].fillna("") != "", "(none)")
    return df


def section(df: pd.DataFrame, by: str, total_ns: int) -> pd.DataFrame:
    """Return one row per value of `by`: ops, estimated ms (modelled ops), share (measured / `total_ns`, the
    summed op time :attr:`Scored.op_ns`, so the rows add up to 100 %), measured ms (the ops' times summed),
    efficiency (estimated / measured over the modelled ops), sorted by measured time."""
    modelled = ~df["model_missing"]
    groups = df.assign(
        est=df["estimated_ns"].where(modelled, 0.0),
        meas_modelled=df["measured_ns"].where(modelled, 0),
    ).groupby(by, sort=False)
    table = pd.DataFrame(
        {
            "ops": groups.size(),
            "estimated_ms": groups["est"].sum() / 1e6,
            "share": groups["measured_ns"].sum() / total_ns if total_ns else np.nan,
            "measured_ms": groups["measured_ns"].sum() / 1e6,
            "efficiency": groups["est"].sum() / groups["meas_modelled"].sum().replace(0, np.nan),
        }
    )
    return table.sort_values("measured_ms", ascending=False)


def by_phase(df: pd.DataFrame, total_ns: int) -> pd.DataFrame:
    """Return the by-phase section with the hierarchy rolled up: an op in ``a/b/c`` counts in ``a``,
    ``a/b`` and ``a/b/c``; rows in path order, so children follow their parent. The top-level rows (and
    "(none)") add up to 100 % of `total_ns`; a child's share is also in its parent's."""
    # the paths split once per distinct phase, not once per op (a few phases, up to millions of ops); a
    # phase that is not a string (code -1 where missing) has no level, as .str.split makes of it
    codes, phases = pd.factorize(df["phase"])
    parts = [p.split("/") if isinstance(p, str) else [] for p in phases]
    depth = np.array([len(p) for p in parts] + [0], np.int64)[codes]
    rolled = []
    for d in range(1, int(depth.max()) + 1 if len(df) else 1):
        has = depth >= d
        prefix = np.array(["/".join(p[:d]) for p in parts] + [None], dtype=object)
        rolled.append(df[has].assign(phase=prefix[codes[has]]))
    table = section(pd.concat(rolled) if rolled else df, "phase", total_ns)
    return table.sort_index(key=lambda index: index.map(lambda p: (p == "(none)", p)))


def top_lost(df: pd.DataFrame, n: int = 10) -> pd.DataFrame:
    """Return the `n` modelled ops with the most lost time (measured − estimated)."""
    return df[~df["model_missing"]].nlargest(n, "lost_ns")[LOST_COLUMNS]


def totals(scored: Scored, df: pd.DataFrame) -> dict:
    """Return the totals line's facts (:data:`TOTALS`): device, roofs, ops, busy ms (the union of activity),
    op ms (the ops' times summed: what every share is of), overlap ms (op − busy), modelled share (of op
    ms), estimated ms, model errors and the ops scored against the L2 roof."""
    return {
        "device": scored.roofs.device,
        "ceilings": scored.roofs.kind,
        "ops": int(len(df)),
        "modelled_ops": int((~df["model_missing"]).sum()),
        "busy_ms": scored.busy_ns / 1e6,
        "op_ms": scored.op_ns / 1e6,
        "overlap_ms": scored.overlap_ns / 1e6,
        "shares_of": "op_ms",
        "modelled_share": scored.modelled_share,
        "l2_ops": int((df["resident_bytes"] > 0).sum()),  # scored against the hierarchical roof
        "estimated_ms": float(df["estimated_ns"].where(~df["model_missing"], 0).sum() / 1e6),
        "model_errors": int(df["model_error"].sum()),
    }


def _arrow(table: pd.DataFrame) -> pa.Table:
    """A section (indexed by its key) or the lost table as Arrow, the key its first column."""
    plain = table.reset_index() if table.index.name else table.reset_index(drop=True)
    return pa.Table.from_pandas(plain, preserve_index=False)


def result(scored: Scored, top: int = 50) -> Result:
    """Return the Result of scored ops: tables ``ops`` (every scored op, :func:`gpuan.sol.score.score_ops`),
    ``by_layer_type``, ``by_function``, ``by_phase`` (a row per layer type, function or phase: ops,
    estimated_ms, share, measured_ms, efficiency, after a first column naming it) and ``lost_time`` (the
    `top` modelled ops losing the most time); summary: the totals (:data:`TOTALS`), ``source``, ``on_cpu``
    and ``roofs`` (flops by unit:dtype, memory_bandwidth, link_bandwidth, l2_bytes, l2_bandwidth, sources)."""
    df = frame(scored.ops)
    sections = {
        "by_layer_type": section(df, "layer", scored.op_ns),
        "by_function": section(df, "name", scored.op_ns),
        "by_phase": by_phase(df, scored.op_ns),
        "lost_time": top_lost(df, top),
    }
    roofs = scored.roofs
    summary = totals(scored, df) | {
        "source": scored.source,
        "on_cpu": scored.on_cpu,
        "roofs": {"flops": dict(roofs.flops), "memory_bandwidth": roofs.memory_bandwidth,
                  "link_bandwidth": roofs.link_bandwidth, "l2_bytes": roofs.l2_bytes,
                  "l2_bandwidth": roofs.l2_bandwidth, "sources": dict(roofs.sources)},
    }  # fmt: skip
    tables = {"ops": scored.ops} | {name: _arrow(table) for name, table in sections.items()}
    return Result("sol", tables, summary)
