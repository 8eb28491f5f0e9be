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
# a workbook holds its creation time, so its compressed size may differ by a few bytes from run to run
_WORKBOOK_SIZE = re.compile(r"(\.xlsx) \([0-9.]+ kB\)")


def _outputs(text: str) -> str:
    # a step's header repeats its arguments, which may be spelled anew (--device H100 is --gpu H100 now);
    # what is compared is what the step printed and wrote (the workbooks by their cells)
    return _WORKBOOK_SIZE.sub(r"\1 (size)", _STEP.sub(r"\1", text))


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
