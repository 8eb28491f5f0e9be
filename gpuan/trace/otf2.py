"""Read an OTF2 archive (Score-P MPI traces) into the event table, with the ``otf2`` package.

Every Enter/Leave pair becomes one event: MPI regions are of kind ``comm``, everything else ``cpu_op``.
The MPI records that happen inside a region are folded into it: a send's receiver and a receive's sender
go to ``peer`` (as ranks of MPI_COMM_WORLD), the tag to ``tag``, the message length to ``bytes``, and a
collective's operation, communicator and root to ``collective``, ``pg_name`` and ``peer``. The rank of
an event is its location group's (``MPI Rank N``); ``tid`` is the location. Times are converted from the
timer's ticks to ns from the archive's global offset, exactly (integer arithmetic).
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from gpuan.errors import TraceError
from gpuan.trace.kinds import KINDS
from gpuan.trace.schema import kind_codes
from gpuan.trace.table import NULL64, Trace, build_table, int_column, kind_time_order

ANCHOR = "traces.otf2"
_LIBRARY_LINE = re.compile(r"\[OTF2\] \S+:\d+: (?P<level>\w+): (?P<message>.*)")
# the otf2 package's report of an exception raised in one of its reader callbacks, then its traceback
_CALLBACK_FAILED = "An unhandled python exception has occurred in an "
_EXCEPTION_LINE = re.compile(r"[A-Za-z_][\w.]*: \S")  # "UnicodeDecodeError: 'utf-8' codec can't ..."


def anchor_of(path: str | os.PathLike) -> Path | None:
    """Return the anchor file of an OTF2 archive given as the anchor or its directory, else None."""
    p = Path(path)
    if p.is_dir():
        a = p / ANCHOR
        return a if a.is_file() else None
    return p if p.suffix == ".otf2" and p.is_file() else None


def _otf2():
    try:
        import otf2
    except ImportError as e:  # an optional dependency: say which package to install
        raise TraceError("otf2", "reading OTF2 needs the 'otf2' package (pip install 'gpuan[replay]')") from e
    return otf2


@contextmanager
def _opened(path: str | os.PathLike) -> Iterator[tuple[Any, Any, Path]]:
    """Yield (the otf2 module, an open reader, the anchor file) of an OTF2 archive. What the C library
    reports while the block runs (exceptions of several types, or only messages, all meaning a broken
    archive) becomes one TraceError naming the anchor, with the library's first message; the library's
    own messages never reach stderr."""
    otf2 = _otf2()
    anchor = anchor_of(path)
    if anchor is None:
        raise TraceError(path, f"not an OTF2 archive (no {ANCHOR})")
    said: list[str] = []
    try:
        with _library_errors_to(said), otf2.reader.open(str(anchor)) as r:
            yield otf2, r, anchor
    except Exception as e:
        if isinstance(e, TraceError) and not said:
            raise
        # the library's first message is the cause; the exception's code is only where it gave up
        first = said[0] if said else (str(e).splitlines()[0] if str(e) else type(e).__name__)
        raise TraceError(anchor, f"unreadable OTF2 archive: {first}") from e
    if said:
        # the reader carries on past a missing or broken local definition file and reads that location's
        # events without its mapping tables: wrong results (none of the ping-pong's 16 messages pair)
        raise TraceError(anchor, f"unreadable OTF2 archive: {said[0]}")


@contextmanager
def _library_errors_to(errors: list[str]) -> Iterator[None]:
    """Run the block with file descriptor 2 going to a temporary file and ``sys.stderr`` to a buffer;
    afterwards (on error too) restore both and append to `errors` the error messages found there. The OTF2
    C library prints 4 to 15 lines of its own source locations per failure straight to the descriptor (the
    otf2 package does not wrap OTF2_Error_RegisterCallback, which would turn that off), and the package
    prints the whole traceback of an exception raised in one of its callbacks (a definition it cannot
    decode) to ``sys.stderr``. Whatever else the block wrote to stderr is passed on."""
    sys.stderr.flush()
    saved = os.dup(2)
    python_lines = io.StringIO()
    try:
        with tempfile.TemporaryFile() as sink:
            os.dup2(sink.fileno(), 2)
            try:
                with redirect_stderr(python_lines):
                    yield
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
                sink.seek(0)
                found, rest = _library_messages(sink.read().decode(errors="replace") + python_lines.getvalue())
                errors.extend(found)
                if rest:
                    sys.stderr.write(rest)
    finally:
        os.close(saved)


def _library_messages(text: str) -> tuple[list[str], str]:
    """Return the error messages in `text`, in order, and the lines that are neither the OTF2 library's nor
    the otf2 package's: the library's error lines (``[OTF2] src/OTF2_Buffer.c:1702: error: MESSAGE``; its
    other lines, warnings, are dropped) and the package's report of an exception in a callback (a header
    line, then a traceback, whose last exception is the message)."""
    errors, rest = [], []
    in_callback = in_message = False
    for line in text.splitlines(keepends=True):
        m = _LIBRARY_LINE.match(line)
        if line.startswith(_CALLBACK_FAILED):
            in_callback, in_message = True, False
            errors.append("an exception in the otf2 package's callback")
        elif m is not None:
            in_callback, in_message = False, m["level"] == "error"
            if in_message:
                errors.append(m["message"].strip())
        elif in_message:  # the message goes on: it quotes a corrupt name that holds a line break
            errors[-1] += " " + line.strip()
        elif in_callback:
            if _EXCEPTION_LINE.match(line) and not line.startswith("Traceback"):
                errors[-1] = line.strip()  # a chained traceback: the last exception raised is the cause
        else:
            rest.append(line)
    return errors, "".join(rest)


def otf2_ranks(path: str | os.PathLike) -> list[int]:
    """Return the MPI ranks (location groups) of an OTF2 archive, from its definitions only."""
    with _opened(path) as (_, r, _):
        return sorted(_rank_of_group(g, i) for i, g in enumerate(r.definitions.location_groups))


def _rank_of_group(group, index: int) -> int:
    # Score-P names them "MPI Rank N"; other writers number them in definition order
    tail = group.name.rsplit(" ", 1)[-1]
    return int(tail) if tail.isdigit() else index


def read_otf2(path: str | os.PathLike, ranks: list[int] | None = None) -> Trace:
    """Return the Trace of an OTF2 archive (its anchor file or directory); with `ranks`, only the events
    of those ranks are read (the others' event files are never opened)."""
    with _opened(path) as (otf2, r, anchor):
        return _read(otf2, r, anchor, ranks)


def _read(otf2, r, anchor: Path, ranks: list[int] | None) -> Trace:
    defs = r.definitions
    res = int(r.timer_resolution)
    clock = defs.clock_properties
    offset = int(clock.global_offset) if clock is not None else 0
    rank_of_group = {g._ref: _rank_of_group(g, i) for i, g in enumerate(defs.location_groups)}
    wanted = set(ranks) if ranks is not None else None
    locations = [loc for loc in defs.locations if wanted is None or rank_of_group.get(loc.group._ref) in wanted]
    ev = otf2.events
    mpi = otf2.Paradigm.MPI
    # per location: a stack of open rows; each row: [ts, end, name, category, rank, tid, peer, tag, bytes, coll, comm]
    rows: list[list] = []
    stacks: dict[int, list[int]] = {}
    comm_ranks: dict[int, list[int]] = {}

    def world_rank(comm, i: int) -> int:
        # MPI records give ranks within their communicator; the event table uses world ranks
        members = comm_ranks.get(comm._ref)
        if members is None:
            group = comm.group
            members = (
                [rank_of_group.get(m.group._ref, -1) if hasattr(m, "group") else int(m) for m in group.members]
                if group
                else []
            )
            comm_ranks[comm._ref] = members
        return members[i] if 0 <= i < len(members) else i

    def inner(loc) -> list | None:
        s = stacks.get(loc._ref)
        return rows[s[-1]] if s else None

    if locations:
        for loc, e in r.events(locations):
            t = (int(e.time) - offset) * 1_000_000_000 // res
            if isinstance(e, ev.Enter):
                reg = e.region
                cat = "mpi" if reg.paradigm == mpi else "cpu_op"
                rank = rank_of_group[loc.group._ref]
                stacks.setdefault(loc._ref, []).append(len(rows))
                rows.append([t, None, reg.name, cat, rank, loc._ref, None, None, None, None, None])
            elif isinstance(e, ev.Leave):
                s = stacks.get(loc._ref)
                if not s:
                    raise TraceError(anchor, f"a Leave without an Enter on location {loc._ref}")
                rows[s.pop()][1] = t
            elif isinstance(e, (ev.MpiSend, ev.MpiIsend)):
                row = inner(loc)
                if row is not None:
                    row[6], row[7], row[8] = world_rank(e.communicator, e.receiver), e.msg_tag, e.msg_length
                    row[10] = e.communicator.name
            elif isinstance(e, (ev.MpiRecv, ev.MpiIrecv)):
                row = inner(loc)
                if row is not None:
                    row[6], row[7], row[8] = world_rank(e.communicator, e.sender), e.msg_tag, e.msg_length
                    row[10] = e.communicator.name
            elif isinstance(e, ev.MpiCollectiveEnd):
                row = inner(loc)
                if row is not None:
                    row[9] = e.collective_op.name.lower()
                    row[10] = e.communicator.name
                    row[8] = int(max(e.size_sent, e.size_received))
                    root = int(e.root)
                    # OTF2 writes OTF2_UNDEFINED_UINT32 for "no root"
                    row[6] = world_rank(e.communicator, root) if root < 2**31 else None
    open_rows = sum(len(s) for s in stacks.values())
    if open_rows:
        raise TraceError(anchor, f"truncated OTF2 archive: {open_rows} regions entered but never left")
    return _table(rows, anchor, res, offset, rank_of_group, defs)


def _table(rows: list[list], anchor: Path, res: int, offset: int, rank_of_group, defs) -> Trace:
    n = len(rows)
    cols = list(zip(*rows)) if rows else [()] * 11
    ts = np.array(cols[0], np.int64)
    end = np.array(cols[1], np.int64)
    kind = kind_codes(cols[3])
    order = kind_time_order(kind, ts)

    def ints(col: int, dtype, null) -> np.ndarray:
        return np.array([null if v is None else v for v in cols[col]], dtype)[order]

    def texts(col: int) -> pa.Array:
        return pa.array([cols[col][i] for i in order], pa.string()).dictionary_encode()

    peer = ints(6, np.int64, NULL64)
    table = build_table(
        {
            "ts": ts[order],
            "dur": (end - ts)[order],
            "name": texts(2),
            "cat": texts(3),
            "kind": pa.DictionaryArray.from_arrays(pa.array(kind[order], pa.int8()), pa.array(KINDS)),
            "pid": ints(4, np.int64, NULL64),
            "tid": ints(5, np.int64, NULL64),
            "rank": ints(4, np.int32, 0),
            "peer": int_column(np.where(peer == NULL64, -1, peer).astype(np.int32), -1, pa.int32()),
            "tag": int_column(ints(7, np.int64, NULL64), NULL64, pa.int64()),
            "bytes": int_column(ints(8, np.int64, NULL64), NULL64, pa.int64()),
            "collective": texts(9),
            "pg_name": texts(10),
        },
        n,
    )
    groups = sorted(rank_of_group.values())
    meta = {
        "source": str(anchor),
        "format": "otf2",
        "base_time_ns": 0,
        "timer_resolution": res,
        "global_offset": offset,
        "ranks": groups,
        "distributed_info": {"backend": "mpi", "world_size": len(groups)},
        "comms": json.dumps({c.name: len(c.group.members) if c.group else 0 for c in defs.comms}),
    }
    return Trace(table, metadata=meta)
