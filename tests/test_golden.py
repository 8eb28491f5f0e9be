"""Every command's output, byte for byte, on the real traces: what ``tests/golden/record.py`` recorded
before the refactor of issue 20 must still come out (stdout, stderr, exit codes and every file written).

A failure shows the difference; if the change is intended, record the case again and say why."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "golden"))

from cases import CASES, MPI_CASES  # noqa: E402
from observe import DATA, EXPECTED, run_case  # noqa: E402

pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason=f"real test data not found at {DATA}")


_STEP = re.compile(r"^(=== step \d+): .*$", re.MULTILINE)
# the size a command announces for a file it wrote: the file itself is compared by content, while its size
# varies with what is not content (a workbook's creation time, the length of a path written into it)
_ANNOUNCED_SIZE = re.compile(r"(\.[a-z]+) \([0-9.,]+ [kMG]?B\)")


def _outputs(text: str) -> str:
    # a step's header repeats its arguments, which may be spelled anew (--device H100 is --gpu H100 now);
    # what is compared is what the step printed and wrote (the workbooks by their cells)
    return _ANNOUNCED_SIZE.sub(r"\1 (size)", _STEP.sub(r"\1", text))


def _check(name: str, steps: list[list[str]], tmp_path: Path, mpi: int = 0) -> None:
    expected = (EXPECTED / f"{name}.txt").read_text()
    assert _outputs(run_case(steps, tmp_path / "case", mpi)) == _outputs(expected)


@pytest.mark.parametrize("name", sorted(CASES))
def test_command_output_unchanged(name, tmp_path):
    _check(name, CASES[name], tmp_path)


@pytest.mark.skipif(shutil.which("mpiexec") is None, reason="mpiexec not on PATH (pip install mpich)")
@pytest.mark.parametrize("name", sorted(MPI_CASES))
def test_command_output_unchanged_under_mpi(name, tmp_path):
    processes, step = MPI_CASES[name]
    _check(name, [step], tmp_path, processes)
