"""The replay's output tables, built on process 0 from the gathered records: pandas frames with one
deterministic row order, so that any number of processes gives the same tables."""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpuan.replay.breakdown import CATEGORIES
from gpuan.replay.comms import N_TO_ONE, ONE_TO_N, OPS


def frames(
    gathered: dict[str, np.ndarray], pg_names: dict[int, str], analyses: tuple[str, ...]
) -> dict[str, pd.DataFrame]:
    """Return the named output tables for the chosen analyses from the gathered records."""
    calls = pd.DataFrame(gathered["calls"])
    waits = pd.DataFrame(gathered["waits"])
    collectives = pd.DataFrame(gathered["collectives"])
    messages = pd.DataFrame(gathered["messages"])
    messages = messages.sort_values(["src", "dst", "tag", "seq"], kind="stable").reset_index(drop=True)
    per_call = calls.merge(waits, on=["rank", "row"], how="inner")
    for frame in (collectives, per_call):
        frame["process_group"] = frame["pg"].map(pg_names)
        frame["op"] = [OPS[op] for op in frame["op"]]
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
        out["stragglers"] = stragglers(collectives, per_call, messages)
    if "breakdown" in analyses:
        out["breakdown"] = _with_shares(pd.DataFrame(gathered["breakdown"]))
    if "comm-matrix" in analyses:
        out["comm_matrix"] = comm_matrix(per_call, messages)
    return out


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


def stragglers(collectives: pd.DataFrame, per_call: pd.DataFrame, messages: pd.DataFrame) -> pd.DataFrame:
    """Return, per step and rank: collectives taken part in, times it arrived last, the wait it caused
    the others (their waits in collectives it was last to, plus Late Sender waits on its sends), its own
    wait, and its arrival delay after the first member (mean, max)."""
    own = per_call.groupby(["step", "rank"]).agg(
        collectives=("seq", "size"), own_wait=("wait", "sum"), mean_delay=("delay", "mean"), max_delay=("delay", "max"),
        late=("culprit", "sum"),
    )  # fmt: skip
    blamed = (
        collectives[(collectives["present"] > 1) & (collectives["late_rank"] >= 0)]
        .groupby(["step", "late_rank"])["total_wait"]
        .sum()
        .rename("caused_wait")
    )
    blamed.index = blamed.index.set_names(["step", "rank"])
    table = own.join(blamed, how="outer")
    if len(messages):
        late_sends = messages[messages["late_sender"] > 0]
        sent_late = late_sends.groupby(["step", "src"])["late_sender"].sum().rename("caused_p2p_wait")
        sent_late.index = sent_late.index.set_names(["step", "rank"])
        table = table.join(sent_late, how="outer")
    else:
        table["caused_p2p_wait"] = 0
    table = table.fillna(0).reset_index()
    for column in ("collectives", "own_wait", "late", "caused_wait", "caused_p2p_wait", "max_delay"):
        table[column] = table[column].astype(np.int64)
    table["caused_total"] = table["caused_wait"] + table["caused_p2p_wait"]
    return table.sort_values(
        ["caused_total", "step", "rank"], ascending=[False, True, True], kind="stable"
    ).reset_index(drop=True)


def comm_matrix(per_call: pd.DataFrame, messages: pd.DataFrame) -> pd.DataFrame:
    """Return bytes and messages per (src, dst): point-to-point messages as recorded, and collectives as
    the traffic of their usual algorithm among the present members (ring for all-reduce, all-gather and
    reduce-scatter; every pair for all-to-all, each member's message split evenly among the members;
    root to each or each to root for rooted ones)."""
    parts = []
    if len(messages):
        p2p = messages.groupby(["src", "dst"]).agg(bytes=("nbytes", "sum"), messages=("nbytes", "size")).reset_index()
        p2p["kind"] = "p2p"
        parts.append(p2p)
    traffic: dict[tuple[int, int], list[float]] = {}  # (src, dst) → [bytes, messages]
    for _, calls in per_call.groupby(["process_group", "seq"], sort=False):
        for src, dst, nbytes in _collective_traffic(calls):
            pair = traffic.setdefault((int(src), int(dst)), [0.0, 0])
            pair[0] += nbytes
            pair[1] += 1
    if traffic:
        rows = [(src, dst, int(round(sent[0])), sent[1]) for (src, dst), sent in sorted(traffic.items())]
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


def _collective_traffic(calls: pd.DataFrame) -> list[tuple[int, int, float]]:
    """Return (src, dst, bytes) of each transfer of one collective (its members' calls), by the usual
    algorithm of its operation; none for a collective of one member or of an unknown operation."""
    members = np.sort(calls["rank"].to_numpy())
    n_members = members.size
    if n_members < 2:
        return []
    op, size = calls["op"].iloc[0], float(calls["nbytes"].max())
    if op in ("all_reduce", "all_gather", "reduce_scatter"):
        per_step = size * (n_members - 1) / n_members * (2 if op == "all_reduce" else 1)
        return [(members[i], members[(i + 1) % n_members], per_step) for i in range(n_members)]
    if op == "all_to_all":  # each member sends its own message, in equal parts
        sent = dict(zip(calls["rank"], calls["nbytes"]))
        return [(a, b, sent[a] / n_members) for a in members for b in members if a != b]
    if op in ONE_TO_N | N_TO_ONE:
        first_root = calls["peer"].iloc[0] if "peer" in calls else -1
        root = int(first_root) if first_root >= 0 else int(members[0])
        return [(root, b, size) if op in ONE_TO_N else (b, root, size) for b in members if b != root]
    return []
