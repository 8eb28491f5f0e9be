"""Record the golden outputs: ``python tests/golden/record.py [CASE ...]`` (all cases when none is named).

Run it only when a change of output is intended, and say why in the commit; ``tests/test_golden.py``
compares every command's output with what is recorded here.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cases import CASES, MPI_CASES  # noqa: E402
from observe import EXPECTED, run_case  # noqa: E402


def main(names: list[str]) -> None:
    EXPECTED.mkdir(exist_ok=True)
    every = {**{k: (0, v) for k, v in CASES.items()}, **{k: (n, [s]) for k, (n, s) in MPI_CASES.items()}}
    for name in names or list(every):
        mpi, steps = every[name]
        with tempfile.TemporaryDirectory() as tmp:
            text = run_case(steps, Path(tmp) / "case", mpi)
        (EXPECTED / f"{name}.txt").write_text(text)
        print(f"{name}: {len(text):,} chars")


if __name__ == "__main__":
    main(sys.argv[1:])
