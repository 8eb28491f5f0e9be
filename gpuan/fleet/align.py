"""Which ranks' steps can be compared position by position, and how to line their positions up.

Ranks whose step patterns are one pattern (the same length, and the same names on at least 95 % of the
positions, possibly starting at another place of it) form a group; each group's reference is the pattern
the most ranks have (the lowest rank's on a tie), and every other member is told by how many slots to
rotate its steps (:func:`gpuan.fleet.steps.rotated`) so that position k means the same op on every rank.
A rank whose whole sequence is one step (no cycle) joins a group only with ranks whose sequence has the
same names in the same order. Every process computes the same groups from the same gathered patterns.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuan.cycles.periods import TOLERANCE, rotation_of

#: the header of a rank's steps, shared by all processes before the steps are lined up
HEADER = np.dtype([
    ("rank", np.int32), ("periodic", np.bool_), ("length", np.int64), ("steps", np.int64),
    ("first_step", np.int64), ("events", np.int64), ("label", np.int64), ("digest", np.int64),
])  # fmt: skip


@dataclass(frozen=True)
class Groups:
    """Per rank: its group and the slots by which to rotate its steps; per group: its reference rank and
    pattern (codes into the shared vocabulary; for a group of one-pass ranks, the reference rank's whole
    sequence is not kept here, only its length)."""

    group: dict[int, int]
    rotation: dict[int, int]
    reference_rank: list[int]
    reference: list[np.ndarray | None]
    periodic: list[bool]


def digest(codes: np.ndarray) -> int:
    """Return a 63-bit digest of a sequence of codes (equal sequences, equal digests, on every process)."""
    import hashlib

    raw = hashlib.blake2b(np.ascontiguousarray(codes, np.int64).tobytes(), digest_size=8).digest()
    return int.from_bytes(raw, "little") & 0x7FFF_FFFF_FFFF_FFFF


def groups(headers: np.ndarray, templates: dict[int, np.ndarray]) -> Groups:
    """Return the groups of the ranks in `headers` (:data:`HEADER` rows of every rank with steps);
    `templates` holds the pattern (shared codes) of every periodic rank."""
    by_key: dict[tuple, list[int]] = {}
    for h in headers:
        key = (bool(h["periodic"]), int(h["length"]), int(h["digest"]))
        by_key.setdefault(key, []).append(int(h["rank"]))
    # the pattern most ranks run is the reference of its group
    keys = sorted(by_key, key=lambda k: (-len(by_key[k]), min(by_key[k])))
    out = Groups({}, {}, [], [], [])
    for key in keys:
        periodic, length, _ = key
        ranks = sorted(by_key[key])
        pattern = templates.get(ranks[0]) if periodic else None
        joined = None
        for g, ref in enumerate(out.reference):
            if out.periodic[g] != periodic or not periodic:
                continue  # one-pass ranks join only their exact equals, which share this key
            if ref.shape[0] == length:
                d = rotation_of(ref, pattern, length - int(length * TOLERANCE))
                if d >= 0:
                    joined = (g, int(d))
                    break
        if joined is None:
            joined = (len(out.reference), 0)
            out.reference.append(pattern)
            out.reference_rank.append(ranks[0])
            out.periodic.append(periodic)
        for r in ranks:
            out.group[r], out.rotation[r] = joined
    return out
