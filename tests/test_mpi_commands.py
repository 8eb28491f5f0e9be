"""``gpuan info|convert|cycles|sol RUN_DIR`` under ``mpiexec -n 1, 2, 4``: the ranks dealt among the processes,
each reading only its own, process 0 printing and writing once. Every run's exit code, stdout, stderr and
every file it writes equal those of one process without MPI, byte for byte (an HTML chart's random element
ids aside; a workbook, whose zip stamps the time it was written, cell by cell); a bad rank file stops every
process with one error line."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

MPIEXEC = shutil.which("mpiexec")
pytestmark = pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (the test command installs mpich from PyPI)")

DLRM = "kineto/dlrm_8rank_nccl"  # 8 ranks: -n 4 gives each process 2
GLOO = "kineto/cpu_ddp_gloo_4rank_slow_rank1_step2"  # 4 ranks of CPU ops
# per run directory, the commands to compare (outputs relative to the run's own directory)
CASES = {
    "info": (["info"], []),
    "info-json": (["info", "--format", "json"], []),
    "convert": (["convert", "-o", "run.parquet"], []),
    "cycles": (["cycles", "-o", "cyc"], ["--kind", "cpu_op"]),
    "cycles-llm-json": (["cycles", "--mode", "llm", "--format", "json", "-o", "llm"], ["--kind", "cpu_op"]),
    "sol": (["sol", "-o", "ops.parquet", "--html", "roofline.html"], ["--gpu", "H100"]),
    "sol-json": (["sol", "--format", "json", "-o", "ops.csv"], ["--gpu", "H100", "-o", "ops.xlsx"]),
}
_UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _run(args: list[str], n: int | None, cwd: Path) -> subprocess.CompletedProcess:
    """Run gpuan with `args` in `cwd`: alone without MPI (`n` None), else under ``mpiexec -n n``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUAN_", "OMPI_", "PMI_"))}
    env.update(GPUAN_DEVICE="cpu", GPUAN_CACHE_DIR=str(cwd), COLUMNS="120", TERM="dumb", NO_COLOR="1")
    cmd = [sys.executable, "-m", "gpuan", *args]
    if n is None:
        env["GPUAN_MPI"] = "0"
    else:
        cmd = [MPIEXEC, "-n", str(n), *cmd]
    return subprocess.run(cmd, capture_output=True, cwd=cwd, env=env, timeout=600)


def _contents(path: Path) -> object:
    """What a written file holds: its bytes; an HTML page's with its random ids fixed, a workbook's cells."""
    if path.suffix == ".xlsx":
        import openpyxl

        book = openpyxl.load_workbook(path)
        return {sheet.title: [list(row) for row in sheet.iter_rows(values_only=True)] for sheet in book.worksheets}
    data = path.read_bytes()
    return _UUID.sub(b"-", data) if path.suffix == ".html" else data


def _observed(case: str, run_dir: str, n: int | None, data_dir: Path, out: Path) -> dict:
    """Run one case and return everything a user sees of it: exit code, stdout, stderr, each file."""
    out.mkdir(parents=True)
    args, extra = CASES[case]
    extra = extra if run_dir == GLOO else []
    if "-o" in extra:  # a case's own output for that run: in place of the default one
        at = args.index("-o")
        args = args[:at] + args[at + 2 :]
    p = _run([*args, str(data_dir / run_dir), *extra], n, out)
    files = {str(f.relative_to(out)): _contents(f) for f in sorted(out.rglob("*")) if f.is_file()}
    return {"exit": p.returncode, "stdout": p.stdout, "stderr": p.stderr, "files": files}


@pytest.fixture(scope="module")
def alone(data_dir, tmp_path_factory):
    """What one process without MPI gives, per (case, run directory)."""
    if not (data_dir / DLRM).is_dir():
        pytest.skip("no ../shared/data run directories")
    seen = {}
    for case in CASES:
        for run_dir in (DLRM, GLOO):
            out = tmp_path_factory.mktemp("alone") / "out"
            seen[case, run_dir] = _observed(case, run_dir, None, data_dir, out)
    return seen


@pytest.mark.parametrize("run_dir", [DLRM, GLOO], ids=["dlrm8", "gloo4"])
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("n", [1, 2, 4])
def test_the_same_output_as_one_process(n, case, run_dir, alone, data_dir, tmp_path):
    expected = alone[case, run_dir]
    assert expected["exit"] == 0, expected["stderr"]
    assert expected["files"] or case.startswith("info")
    got = _observed(case, run_dir, n, data_dir, tmp_path / "out")
    assert got["exit"] == 0, got["stderr"]
    assert got["stdout"] == expected["stdout"]
    assert got["stderr"] == expected["stderr"]  # the files announced once: the other processes say nothing
    assert got["files"].keys() == expected["files"].keys()
    for name, contents in expected["files"].items():
        assert got["files"][name] == contents, name


@pytest.mark.parametrize("command", [["info"], ["convert", "-o", "out.parquet"], ["cycles", "-o", "cyc"],
                                     ["sol", "--gpu", "H100", "-o", "ops.csv"]], ids=lambda c: c[0])  # fmt: skip
def test_a_truncated_rank_file_stops_every_process(command, tmp_path, data_dir):
    run = tmp_path / "run"
    run.mkdir()
    for r in range(4):
        shutil.copy(data_dir / GLOO / f"rank{r}.json.gz", run / f"rank{r}.json.gz")
    data = (run / "rank3.json.gz").read_bytes()
    (run / "rank3.json.gz").write_bytes(data[: len(data) // 2])
    out = tmp_path / "out"
    out.mkdir()
    alone, dealt = _run([*command, str(run)], None, out), _run([*command, str(run)], 2, out)
    assert dealt.returncode == alone.returncode == 2
    lines = dealt.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuan: error:") and "rank3.json.gz" in lines[0], lines
    assert dealt.stderr == alone.stderr and dealt.stdout == b""
    assert [p.name for p in out.iterdir()] == []


def test_of_two_bad_ranks_of_one_process_the_lower_is_named(tmp_path, data_dir):
    """Process 1 of 2 owns ranks 1 and 3 and reads them side by side; rank 3, cut shorter, fails first, but
    the error every process reports is rank 1's, as one process reading the ranks in order meets it."""
    run = tmp_path / "run"
    shutil.copytree(data_dir / GLOO, run)
    for r, keep in ((1, 4000), (3, 300)):
        f = run / f"rank{r}.json.gz"
        f.write_bytes(f.read_bytes()[:keep])
    out = tmp_path / "out"
    out.mkdir()
    alone, dealt = _run(["info", str(run)], None, out), _run(["info", str(run)], 2, out)
    assert dealt.returncode == alone.returncode == 2
    lines = dealt.stderr.decode().splitlines()
    assert len(lines) == 1 and "rank1.json.gz" in lines[0], lines
    assert dealt.stderr == alone.stderr and dealt.stdout == b""


def test_partial_tables_and_dictionaries_cross_whole():
    script = Path(__file__).parent / "mpi" / "gather_parts.py"
    p = subprocess.run([MPIEXEC, "-n", "3", sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("gathered") == 1
