"""Point-to-point wait states: Late Sender and Late Receiver, from matched send/receive pairs.

The k-th send from rank s to rank d with tag t in group g matches the k-th receive on d from s with
tag t in g (MPI's non-overtaking rule; NCCL's Send/Recv pairs the same way). With Enter/Leave of the
calls:
- Late Sender (on the receiver): min(Enter(send), Leave(recv)) - Enter(recv), when positive;
- Late Receiver (on the sender): Enter(recv) - Enter(send), when positive and the send left after the
  receive was posted (the send blocked until then).
Each side fetches its partner's record from the process that owns the partner rank (:mod:`fetch`).
The records are :class:`~gpuan.replay.records.Records` on the engine's device; the keys and waits are
array work there.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpuan.engine.procs import Procs
from gpuan.replay.comms import CALL, RECV, SEND
from gpuan.replay.fetch import Fetcher, lookup
from gpuan.replay.records import Records, send

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


def message_key(pg, src, dst, tag, seq):
    """Return the int64 key of each message (columns of any engine): the same on its send and its receive
    side."""
    key = pg.astype(np.uint64)
    for part in (src, dst, tag, seq):
        key = (key ^ part.astype(np.uint64)) * np.uint64(0x100000001B3)
        key ^= key >> np.uint64(29)
    return (key & np.uint64(0x7FFF_FFFF_FFFF_FFFF)).astype(np.int64)


def _keys(calls: Records, side: int):
    mine = calls["rank"]
    src, dst = (mine, calls["peer"]) if side == SEND else (calls["peer"], mine)
    return message_key(calls["pg"], src, dst, calls["tag"], calls["seq"])


def late_states(
    procs: Procs, owner: Any, calls_by_rank: dict[int, Records], xp: Any = np
) -> tuple[Records, Records, Fetcher]:
    """Return (the messages of this process's ranks with their waits, dtype :data:`MESSAGE`, one row per
    message, listed on the receiving rank's process; the Late Receiver waits of this process's sends as
    ``PARTNER`` records (``enter`` the send's Enter, ``leave`` its Enter plus the wait); the fetcher used).
    `owner` and the records are on the engine `xp`. Collective over all processes."""
    ranks = sorted(calls_by_rank)
    sends = [calls_by_rank[r][calls_by_rank[r]["kind"] == SEND] for r in ranks]
    recvs = [calls_by_rank[r][calls_by_rank[r]["kind"] == RECV] for r in ranks]
    all_sends = Records.concat(sends, CALL, xp)
    all_recvs = Records.concat(recvs, CALL, xp)
    # each message's key, made once per side: for the records held, the fetches and the Late Receiver lookup
    send_keys, recv_keys = _keys(all_sends, SEND), _keys(all_recvs, RECV)
    fetch_send = Fetcher(procs, owner, PARTNER, xp)
    fetch_recv = Fetcher(procs, owner, PARTNER, xp)
    for fetcher, per_rank, all_calls, keys in ((fetch_send, sends, all_sends, send_keys),
                                               (fetch_recv, recvs, all_recvs, recv_keys)):  # fmt: skip
        partners = _partner(all_calls, keys)
        sizes = np.array([calls.size for calls in per_rank], np.int64)
        for rank, end, size in zip(ranks, np.cumsum(sizes).tolist(), sizes.tolist()):
            fetcher.hold(rank, partners[end - size : end])

    # the receiver's side asks for the sends; the sender's side asks for the receives: one round each,
    # entered by every process in the same order
    send_of_recv, has_send = fetch_send.fetch(all_recvs["peer"], recv_keys)
    recv_of_send, has_recv = fetch_recv.fetch(all_sends["peer"], send_keys)

    late_recv = xp.zeros(all_sends.size, np.int64)
    blocked = has_recv & (all_sends["leave"] > recv_of_send["enter"])
    late_recv[blocked] = xp.maximum(0, recv_of_send["enter"][blocked] - all_sends["enter"][blocked])
    # the receiver lists the message; the sender's Late Receiver reaches it by key
    to_receiver = Records.zeros(all_sends.size, PARTNER, xp)
    to_receiver["rank"], to_receiver["key"] = all_sends["peer"], send_keys
    to_receiver["enter"] = late_recv
    got = send(procs, to_receiver, owner[to_receiver["rank"]].astype(np.int64))
    held = {rank: got[got["rank"] == rank].sort_by("key") for rank in calls_by_rank}
    late_recv_of_recv, has_late_recv = lookup(held, all_recvs["rank"], recv_keys, PARTNER, xp)

    messages = _messages(all_recvs[has_send], send_of_recv[has_send])
    messages["late_receiver"] = xp.where(has_late_recv[has_send], late_recv_of_recv[has_send]["enter"], 0)
    send_waits = Records.zeros(all_sends.size, PARTNER, xp)
    send_waits["rank"], send_waits["enter"] = all_sends["rank"], all_sends["enter"]
    send_waits["leave"] = all_sends["enter"] + late_recv
    return messages, send_waits, fetch_send


def _messages(recvs: Records, sends: Records) -> Records:
    """Return the :data:`MESSAGE` of each receive and its matching send (Late Receiver left 0)."""
    xp = recvs.xp
    messages = Records.zeros(recvs.size, MESSAGE, xp)
    messages["src"], messages["dst"], messages["tag"] = recvs["peer"], recvs["rank"], recvs["tag"]
    messages["seq"], messages["nbytes"], messages["step"] = recvs["seq"], recvs["nbytes"], recvs["step"]
    messages["send_enter"], messages["send_leave"] = sends["enter"], sends["leave"]
    messages["recv_enter"], messages["recv_leave"] = recvs["enter"], recvs["leave"]
    messages["late_sender"] = xp.maximum(0, xp.minimum(sends["enter"], recvs["leave"]) - recvs["enter"])
    return messages


def _partner(calls: Records, keys) -> Records:
    """Return the :data:`PARTNER` records of `calls` under their message keys."""
    partners = Records.zeros(calls.size, PARTNER, calls.xp)
    partners["rank"], partners["key"] = calls["rank"], keys
    partners["enter"], partners["leave"] = calls["enter"], calls["leave"]
    return partners
