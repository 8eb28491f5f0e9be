"""Run under ``mpiexec -n 3``: every column type a partial table holds crosses to process 0 as typed buffers
(nulls, empty strings, lists, dictionaries; process 1 sends no rows), and the merged dictionaries of ranks
that three processes hold come out in the order one process's concatenation gives them."""

import sys

import numpy as np
import pyarrow as pa

from gpuan.engine.parts import PART, gather, gather_json, tagged
from gpuan.engine.procs import from_launcher
from gpuan.trace.dealt import DealtRun, unified_dictionaries
from gpuan.trace.load import concat_ranks
from gpuan.trace.table import Trace

me = from_launcher()
assert me.size == 3, me.size
S = pa.dictionary(pa.int32(), pa.string())


def table(p: int) -> pa.Table:
    """Process p's rows (none on process 1)."""
    n = 0 if p == 1 else 2 + p
    return pa.table(
        {
            "i8": pa.array([p * 10 + i for i in range(n)], pa.int8()),
            "i64": pa.array([None if i == 1 else -(2**40) * p + i for i in range(n)], pa.int64()),
            "f": pa.array([float("nan") if i == 0 else i / 3 for i in range(n)], pa.float64()),
            "b": pa.array([None if i == 2 else bool(i % 2) for i in range(n)], pa.bool_()),
            "s": pa.array([None if i == 0 else "é" * i for i in range(n)], pa.string()),
            "d": pa.array([f"w{(p + i) % 3}" if i != 1 else None for i in range(n)], pa.string()).cast(S),
            "l": pa.array([None if i == 3 else list(range(i)) for i in range(n)], pa.list_(pa.int64())),
            "n": pa.nulls(n, S),
        }
    )


got = gather(me, tagged({"t": table(me.rank)}, me.rank))
metas = gather_json(me, [{"rank": me.rank, "names": ["a", me.rank]}] * me.rank)
# ranks 0..5, rank r on process r % 3, each with its own dictionary of words
words = {r: [f"x{(r * 7 + k) % 5}" for k in range(r % 4)] + [f"only{r}"] for r in range(6)}
events = {r: pa.table({"name": pa.array(words[r] * 2, pa.string()).dictionary_encode()}) for r in range(6)}
run = DealtRun(me, list(range(6)), {r: Trace(events[r]) for r in range(me.rank, 6, 3)}, np.arange(6) % 3, None)
merged = unified_dictionaries(run, "events", ["name"])
if me.is_root:
    expected = pa.concat_tables([tagged({"t": table(p)}, p)["t"] for p in range(3)])
    t = got["t"]
    assert t[PART].to_pylist() == expected[PART].to_pylist()
    for name in ("i8", "i64", "b", "s", "l"):
        assert t[name].to_pylist() == expected[name].to_pylist(), name
        assert t[name].type == expected[name].type, name
    assert np.array_equal(t["f"].to_numpy(), expected["f"].to_numpy(), equal_nan=True)
    assert t["d"].type == S and t["d"].to_pylist() == expected["d"].to_pylist()
    assert t["n"].null_count == t.num_rows
    assert metas == [{"rank": 1, "names": ["a", 1]}] + [{"rank": 2, "names": ["a", 2]}] * 2, metas
    one = concat_ranks([events[r] for r in range(6)])["name"].chunk(0).dictionary
    assert merged["name"].equals(one), (merged["name"], one)
    print("gathered", flush=True)
sys.exit(0)
