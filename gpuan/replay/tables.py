"""The replay's output tables, built on process 0 from the gathered records: pandas frames with one
deterministic row order, so that any number of processes gives the same tables. The stragglers and the
collectives' traffic are totals computed on the engine the records are on (:mod:`aggregates`); the rest
is the records themselves, joined and named on the host."""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpuan.replay import aggregates
from gpuan.replay.breakdown import CATEGORIES
from gpuan.replay.comms import N_TO_ONE, ONE_TO_N, OPS
from gpuan.replay.records import Records, find_sorted


def frames(
    gathered: dict[str, Records], pg_names: dict[int, str], analyses: tuple[str, ...]
) -> dict[str, pd.DataFrame]:
    """Return the named output tables for the chosen analyses from the gathered records (on any engine)."""
    calls = pd.DataFrame(gathered["calls"].to_numpy())
    waits = pd.DataFrame(gathered["waits"].to_numpy())
    collectives = pd.DataFrame(gathered["collectives"].to_numpy())
    messages = pd.DataFrame(gathered["messages"].to_numpy())
    messages = messages.sort_values(["src", "dst", "tag", "seq"], kind="stable").reset_index(drop=True)
    per_call = calls.merge(waits, on=["rank", "row"], how="inner")
    for frame in (collectives, per_call):
        frame["process_group"] = frame["pg"].map(pg_names)
        frame["op"] = np.array(OPS, object)[frame["op"].to_numpy(np.int64)]
    collectives = collectives.sort_values(["process_group", "seq"], kind="stable").reset_index(drop=True)
    per_call = per_call.sort_values(["process_group", "seq", "rank"], kind="stable").reset_index(drop=True)
    out: dict[str, pd.DataFrame] = {}
    if "waits" in analyses:
        out["collectives"] = collectives[
            ["process_group", "seq", "op", "step", "members", "present", "nbytes", "first_enter", "last_enter",
             "late_rank", "skew", "total_wait", "max_wait", "transfer", "complete", "consistent"]
        ]  # fmt: skip
        out["collective_waits"] = per_call[
            ["process_group", "seq", "op", "step", "rank", "enter", "leave", "wait", "delay", "culprit", "nbytes"]
        ]
        out["p2p"] = messages
        out["wait_totals"] = wait_totals(collectives, per_call, messages)
    if "stragglers" in analyses:
        columns = ("calls", "waits", "collectives", "messages")
        out["stragglers"] = pd.DataFrame(aggregates.stragglers(*(gathered[name] for name in columns)))
    if "breakdown" in analyses:
        out["breakdown"] = _with_shares(pd.DataFrame(gathered["breakdown"].to_numpy()))
    if "comm-matrix" in analyses:
        matched = aggregates.with_waits(gathered["calls"], gathered["waits"])[0]
        out["comm_matrix"] = comm_matrix(aggregates.pair_traffic(matched, _places(pg_names, matched.xp)), messages)
    return out


def _places(pg_names: dict[int, str], xp):
    """Return a function giving each process group id its place in the order of the groups' names."""
    ids = np.array(sorted(pg_names), np.int64)
    place = np.empty(ids.size, np.int64)
    place[sorted(range(ids.size), key=lambda i: pg_names[int(ids[i])])] = np.arange(ids.size)
    ids, place = xp.asarray(ids), xp.asarray(place)
    return lambda pg: place[find_sorted(xp, ids, pg)[0]]


def _with_shares(breakdowns: pd.DataFrame) -> pd.DataFrame:
    """Return the breakdown by rank with each category's share of the span in percent (``<category>_pct``)."""
    table = breakdowns.sort_values("rank").reset_index(drop=True)
    for category in (*CATEGORIES, "idle"):
        table[f"{category}_pct"] = np.where(
            table["span"] > 0, 100.0 * table[category] / table["span"].clip(lower=1), 0.0
        )
    return table


def wait_kind(op: pd.Series, has_root: pd.Series) -> pd.Series:
    """Return the wait-state name of each collective's waits."""
    kind = np.where(op.isin(list(ONE_TO_N)) & has_root, "late_broadcast", "wait_at_nxn")
    return pd.Series(np.where(op.isin(list(N_TO_ONE)) & has_root, "early_reduce", kind), index=op.index)


def wait_totals(collectives: pd.DataFrame, per_call: pd.DataFrame, messages: pd.DataFrame) -> pd.DataFrame:
    """Return the instances (waits > 0) and total ns of each wait-state kind."""
    rooted = per_call["op"].isin(list(ONE_TO_N | N_TO_ONE))
    kinds = wait_kind(per_call["op"], rooted & (per_call["peer"] >= 0))
    rows = []
    for kind in ("wait_at_nxn", "late_broadcast", "early_reduce"):
        waits = per_call["wait"][kinds == kind]
        rows.append((kind, int((waits > 0).sum()), int(waits.sum())))
    for kind in ("late_sender", "late_receiver"):
        waits = messages[kind] if len(messages) else pd.Series([], dtype=np.int64)
        rows.append((kind, int((waits > 0).sum()), int(waits.sum())))
    return pd.DataFrame(rows, columns=["wait_state", "instances", "total_ns"])


def comm_matrix(collective_traffic: dict[str, np.ndarray], messages: pd.DataFrame) -> pd.DataFrame:
    """Return bytes and messages per (src, dst): point-to-point messages as recorded, and collectives as
    the traffic of their usual algorithm among the present members (:func:`aggregates.pair_traffic`)."""
    parts = []
    if len(messages):
        p2p = messages.groupby(["src", "dst"]).agg(bytes=("nbytes", "sum"), messages=("nbytes", "size")).reset_index()
        p2p["kind"] = "p2p"
        parts.append(p2p)
    if len(collective_traffic["src"]):
        sent = collective_traffic
        rows = [(src, dst, int(round(total)), count) for src, dst, total, count in
                zip(*(sent[name].tolist() for name in ("src", "dst", "bytes", "messages")))]  # fmt: skip
        collectives = pd.DataFrame(rows, columns=["src", "dst", "bytes", "messages"])
        collectives["kind"] = "collective"
        parts.append(collectives)
    if not parts:
        return pd.DataFrame(columns=["src", "dst", "kind", "bytes", "messages"])
    return (
        pd.concat(parts)[["src", "dst", "kind", "bytes", "messages"]]
        .sort_values(["kind", "src", "dst"])
        .reset_index(drop=True)
    )
