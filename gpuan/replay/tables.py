"""The replay's output tables, built on process 0 from the gathered records: pandas frames with one
deterministic row order, so that any number of processes gives the same tables."""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpuan.replay.breakdown import CATEGORIES
from gpuan.replay.comms import N_TO_ONE, ONE_TO_N, OPS


def frames(g: dict[str, np.ndarray], pg_names: dict[int, str], analyses: tuple[str, ...]) -> dict[str, pd.DataFrame]:
    """Return the named output tables for the chosen analyses from the gathered records."""
    calls = pd.DataFrame(g["calls"])
    waits = pd.DataFrame(g["waits"])
    colls = pd.DataFrame(g["collectives"])
    msgs = pd.DataFrame(g["messages"]).sort_values(["src", "dst", "tag", "seq"], kind="stable").reset_index(drop=True)
    per_call = calls.merge(waits, on=["rank", "row"], how="inner")
    colls["process_group"] = colls["pg"].map(pg_names)
    per_call["process_group"] = per_call["pg"].map(pg_names)
    for f in (colls, per_call):
        f["op"] = [OPS[o] for o in f["op"]]
    colls = colls.sort_values(["process_group", "seq"], kind="stable").reset_index(drop=True)
    per_call = per_call.sort_values(["process_group", "seq", "rank"], kind="stable").reset_index(drop=True)
    out: dict[str, pd.DataFrame] = {}
    if "waits" in analyses:
        out["collectives"] = colls[
            ["process_group", "seq", "op", "step", "members", "present", "nbytes", "first_enter", "last_enter",
             "late_rank", "skew", "total_wait", "max_wait", "transfer", "complete", "consistent"]
        ]  # fmt: skip
        out["collective_waits"] = per_call[
            ["process_group", "seq", "op", "step", "rank", "enter", "leave", "wait", "delay", "culprit", "nbytes"]
        ]
        out["p2p"] = msgs
        out["wait_totals"] = wait_totals(colls, per_call, msgs)
    if "stragglers" in analyses:
        out["stragglers"] = stragglers(colls, per_call, msgs)
    if "breakdown" in analyses:
        b = pd.DataFrame(g["breakdown"]).sort_values("rank").reset_index(drop=True)
        for c in (*CATEGORIES, "idle"):
            b[f"{c}_pct"] = np.where(b["span"] > 0, 100.0 * b[c] / b["span"].clip(lower=1), 0.0)
        out["breakdown"] = b
    if "comm-matrix" in analyses:
        out["comm_matrix"] = comm_matrix(per_call, msgs)
    return out


def wait_kind(op: pd.Series, has_root: pd.Series) -> pd.Series:
    """Return the wait-state name of each collective's waits."""
    kind = np.where(op.isin(list(ONE_TO_N)) & has_root, "late_broadcast", "wait_at_nxn")
    return pd.Series(np.where(op.isin(list(N_TO_ONE)) & has_root, "early_reduce", kind), index=op.index)


def wait_totals(colls: pd.DataFrame, per_call: pd.DataFrame, msgs: pd.DataFrame) -> pd.DataFrame:
    """Return the instances (waits > 0) and total ns of each wait-state kind."""
    rooted = per_call["op"].isin(list(ONE_TO_N | N_TO_ONE))
    kinds = wait_kind(per_call["op"], rooted & (per_call["peer"] >= 0))
    rows = []
    for k in ("wait_at_nxn", "late_broadcast", "early_reduce"):
        w = per_call["wait"][kinds == k]
        rows.append((k, int((w > 0).sum()), int(w.sum())))
    for k in ("late_sender", "late_receiver"):
        w = msgs[k] if len(msgs) else pd.Series([], dtype=np.int64)
        rows.append((k, int((w > 0).sum()), int(w.sum())))
    return pd.DataFrame(rows, columns=["wait_state", "instances", "total_ns"])


def stragglers(colls: pd.DataFrame, per_call: pd.DataFrame, msgs: pd.DataFrame) -> pd.DataFrame:
    """Return, per step and rank: collectives taken part in, times it arrived last, the wait it caused
    the others (their waits in collectives it was last to, plus Late Sender waits on its sends), its own
    wait, and its arrival delay after the first member (mean, max)."""
    own = per_call.groupby(["step", "rank"]).agg(
        collectives=("seq", "size"), own_wait=("wait", "sum"), mean_delay=("delay", "mean"), max_delay=("delay", "max"),
        late=("culprit", "sum"),
    )  # fmt: skip
    blamed = (
        colls[(colls["present"] > 1) & (colls["late_rank"] >= 0)]
        .groupby(["step", "late_rank"])["total_wait"]
        .sum()
        .rename("caused_wait")
    )
    blamed.index = blamed.index.set_names(["step", "rank"])
    frame = own.join(blamed, how="outer")
    if len(msgs):
        ls = msgs[msgs["late_sender"] > 0].groupby(["step", "src"])["late_sender"].sum().rename("caused_p2p_wait")
        ls.index = ls.index.set_names(["step", "rank"])
        frame = frame.join(ls, how="outer")
    else:
        frame["caused_p2p_wait"] = 0
    frame = frame.fillna(0).reset_index()
    for c in ("collectives", "own_wait", "late", "caused_wait", "caused_p2p_wait", "max_delay"):
        frame[c] = frame[c].astype(np.int64)
    frame["caused_total"] = frame["caused_wait"] + frame["caused_p2p_wait"]
    return frame.sort_values(
        ["caused_total", "step", "rank"], ascending=[False, True, True], kind="stable"
    ).reset_index(drop=True)


def comm_matrix(per_call: pd.DataFrame, msgs: pd.DataFrame) -> pd.DataFrame:
    """Return bytes and messages per (src, dst): point-to-point messages as recorded, and collectives as
    the traffic of their usual algorithm among the present members (ring for all-reduce, all-gather and
    reduce-scatter; every pair for all-to-all, each member's message split evenly among the members;
    root to each or each to root for rooted ones)."""
    parts = []
    if len(msgs):
        p = msgs.groupby(["src", "dst"]).agg(bytes=("nbytes", "sum"), messages=("nbytes", "size")).reset_index()
        p["kind"] = "p2p"
        parts.append(p)
    rows: dict[tuple[int, int], list[float]] = {}
    for (_, _), g in per_call.groupby(["process_group", "seq"], sort=False):
        members = np.sort(g["rank"].to_numpy())
        k = members.size
        if k < 2:
            continue
        op, size = g["op"].iloc[0], float(g["nbytes"].max())
        if op in ("all_reduce", "all_gather", "reduce_scatter"):
            per = size * (k - 1) / k * (2 if op == "all_reduce" else 1)
            pairs = [(members[i], members[(i + 1) % k], per) for i in range(k)]
        elif op == "all_to_all":  # each member sends its own message, in equal parts
            sent = dict(zip(g["rank"], g["nbytes"]))
            pairs = [(a, b, sent[a] / k) for a in members for b in members if a != b]
        elif op in ONE_TO_N | N_TO_ONE:
            root = int(g["peer"].iloc[0]) if "peer" in g and g["peer"].iloc[0] >= 0 else int(members[0])
            pairs = [((root, b) if op in ONE_TO_N else (b, root)) + (size,) for b in members if b != root]
        else:
            continue
        for a, b, n in pairs:
            acc = rows.setdefault((int(a), int(b)), [0.0, 0])
            acc[0] += n
            acc[1] += 1
    if rows:
        c = pd.DataFrame([(a, b, int(round(v[0])), v[1]) for (a, b), v in sorted(rows.items())],
                         columns=["src", "dst", "bytes", "messages"])  # fmt: skip
        c["kind"] = "collective"
        parts.append(c)
    if not parts:
        return pd.DataFrame(columns=["src", "dst", "kind", "bytes", "messages"])
    return (
        pd.concat(parts)[["src", "dst", "kind", "bytes", "messages"]]
        .sort_values(["kind", "src", "dst"])
        .reset_index(drop=True)
    )
