"""Point-to-point wait states: Late Sender and Late Receiver, from matched send/receive pairs.

The k-th send from rank s to rank d with tag t in group g matches the k-th receive on d from s with
tag t in g (MPI's non-overtaking rule; NCCL's Send/Recv pairs the same way). With Enter/Leave of the
calls:
- Late Sender (on the receiver): min(Enter(send), Leave(recv)) - Enter(recv), when positive;
- Late Receiver (on the sender): Enter(recv) - Enter(send), when positive and the send left after the
  receive was posted (the send blocked until then).
Each side fetches its partner's record from the process that owns the partner rank (:mod:`fetch`).
"""

from __future__ import annotations

import numpy as np

from gpuan.replay.comms import CALL, RECV, SEND
from gpuan.replay.fetch import Fetcher, lookup
from gpuan.replay.procs import Procs

#: what a rank offers its partners: one record per send or receive
PARTNER = np.dtype([("rank", np.int32), ("key", np.int64), ("enter", np.int64), ("leave", np.int64)])
#: one matched message, seen from the side that found the wait
MESSAGE = np.dtype(
    [
        ("src", np.int32), ("dst", np.int32), ("tag", np.int64), ("seq", np.int64), ("nbytes", np.int64),
        ("send_enter", np.int64), ("send_leave", np.int64), ("recv_enter", np.int64), ("recv_leave", np.int64),
        ("late_sender", np.int64), ("late_receiver", np.int64), ("step", np.int64),
    ]
)  # fmt: skip


def message_key(pg: np.ndarray, src: np.ndarray, dst: np.ndarray, tag: np.ndarray, seq: np.ndarray) -> np.ndarray:
    """Return the int64 key of each message: the same on its send and its receive side."""
    h = pg.astype(np.uint64)
    for part in (src, dst, tag, seq):
        h = (h ^ part.astype(np.uint64)) * np.uint64(0x100000001B3)
        h ^= h >> np.uint64(29)
    return (h & np.uint64(0x7FFF_FFFF_FFFF_FFFF)).astype(np.int64)


def _keys(calls: np.ndarray, side: int) -> np.ndarray:
    mine = calls["rank"]
    src, dst = (mine, calls["peer"]) if side == SEND else (calls["peer"], mine)
    return message_key(calls["pg"], src, dst, calls["tag"], calls["seq"])


def late_states(
    procs: Procs, owner: np.ndarray, calls_by_rank: dict[int, np.ndarray]
) -> tuple[np.ndarray, np.ndarray, Fetcher]:
    """Return (the messages of this process's ranks with their waits, dtype :data:`MESSAGE`, one row per
    message, listed on the receiving rank's process; the Late Receiver waits of this process's sends as
    ``PARTNER`` records (``enter`` the send's Enter, ``leave`` its Enter plus the wait); the fetcher used).
    Collective over all processes."""
    sends = {r: c[c["kind"] == SEND] for r, c in calls_by_rank.items()}
    recvs = {r: c[c["kind"] == RECV] for r, c in calls_by_rank.items()}
    fetch_send = Fetcher(procs, owner, PARTNER)
    fetch_recv = Fetcher(procs, owner, PARTNER)
    for r in calls_by_rank:
        fetch_send.hold(r, _partner(sends[r], _keys(sends[r], SEND)))
        fetch_recv.hold(r, _partner(recvs[r], _keys(recvs[r], RECV)))

    # the receiver's side asks for the sends; the sender's side asks for the receives: one round each,
    # entered by every process in the same order
    rv = np.concatenate([recvs[r] for r in sorted(recvs)]) if recvs else np.zeros(0, CALL)
    sd = np.concatenate([sends[r] for r in sorted(sends)]) if sends else np.zeros(0, CALL)
    send_of_recv, has_send = fetch_send.fetch(rv["peer"], _keys(rv, RECV))
    recv_of_send, has_recv = fetch_recv.fetch(sd["peer"], _keys(sd, SEND))

    late_recv = np.zeros(sd.size, np.int64)
    ok = has_recv & (sd["leave"] > recv_of_send["enter"])
    late_recv[ok] = np.maximum(0, recv_of_send["enter"][ok] - sd["enter"][ok])
    # the receiver lists the message; the sender's Late Receiver reaches it by key
    lr = np.zeros(sd.size, PARTNER)
    lr["rank"], lr["key"], lr["enter"] = sd["peer"], _keys(sd, SEND), late_recv
    got = procs.alltoallv(lr, owner[lr["rank"]].astype(np.int64))
    held = {r: np.sort(got[got["rank"] == r], order="key") for r in calls_by_rank}
    lr_of_recv, has_lr = lookup(held, rv["rank"], _keys(rv, RECV), PARTNER)

    m = np.zeros(int(has_send.sum()), MESSAGE)
    v, s, lrv = rv[has_send], send_of_recv[has_send], lr_of_recv[has_send]
    m["src"], m["dst"], m["tag"], m["seq"], m["nbytes"], m["step"] = (
        v["peer"],
        v["rank"],
        v["tag"],
        v["seq"],
        v["nbytes"],
        v["step"],
    )
    m["send_enter"], m["send_leave"], m["recv_enter"], m["recv_leave"] = s["enter"], s["leave"], v["enter"], v["leave"]
    m["late_sender"] = np.maximum(0, np.minimum(s["enter"], v["leave"]) - v["enter"])
    m["late_receiver"] = np.where(has_lr[has_send], lrv["enter"], 0)
    waits = np.zeros(sd.size, PARTNER)
    waits["rank"], waits["enter"], waits["leave"] = sd["rank"], sd["enter"], sd["enter"] + late_recv
    return m, waits, fetch_send


def _partner(calls: np.ndarray, keys: np.ndarray) -> np.ndarray:
    p = np.zeros(calls.size, PARTNER)
    p["rank"], p["key"], p["enter"], p["leave"] = calls["rank"], keys, calls["enter"], calls["leave"]
    return p
