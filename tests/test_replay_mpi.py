"""The replay as an MPI job: ``mpiexec -n 1, 2, 4`` give the same tables as one process without MPI,
processes that fetch each other's records finish, and a bad rank file stops every process cleanly."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpuan.synth.ranks import plan, write_run

MPIEXEC = shutil.which("mpiexec")
pytestmark = pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (the test command installs mpich from PyPI)")
HERE = Path(__file__).parent


def _run(args: list[str], n: int | None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    cmd = [sys.executable, "-m", "gpuan", *args]
    if n is None:
        env["GPUAN_MPI"] = "0"
    else:
        env.pop("GPUAN_MPI", None)
        cmd = [MPIEXEC, "-n", str(n), *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)


def _tables(run_dir, n: int | None, *extra: str) -> dict:
    p = _run(["replay", str(run_dir), "--format", "json", *extra], n)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    d = tmp_path_factory.mktemp("run6")
    # six ranks: four processes get uneven shares; rank 4 held back 25 ms in step 2
    write_run(plan(6, 5, 3000, stragglers=((2, 4, 25_000_000),), seed=3), d)
    return d


@pytest.mark.parametrize("n", [1, 2, 4])
def test_same_tables_for_any_number_of_processes(n, synthetic, data_dir):
    for run in (synthetic, data_dir / "kineto/cpu_ddp_gloo_4rank_slow_rank1_step2", data_dir / "otf2/ping_pong_2rank"):
        assert _tables(run, n) == _tables(run, None), run


def test_size_deal_gives_the_same_tables(synthetic):
    assert _tables(synthetic, 4, "--deal", "size") == _tables(synthetic, None)


def test_synthetic_straggler_is_found_under_mpi(synthetic):
    out = _tables(synthetic, 2)
    s = out["stragglers"][0]
    assert (s["step"], s["rank"]) == (2, 4)
    # every rank ends its last all-reduce together; the lowest rank among them is named (MPI MAXLOC)
    b = out["breakdown"]
    assert out["last_to_finish"]["rank"] == 0 and all(x["span"] <= out["last_to_finish"]["end_ns"] for x in b)


def test_processes_fetching_each_other_finish():
    p = subprocess.run([MPIEXEC, "-n", "2", sys.executable, str(HERE / "mpi" / "fetch_each_other.py")],
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("fetched 501 records") == 2


def test_a_truncated_rank_file_stops_every_process(tmp_path, data_dir):
    src = data_dir / "kineto/cpu_ddp_gloo_4rank_slow_rank1_step2"
    for r in range(4):
        shutil.copy(src / f"rank{r}.json.gz", tmp_path / f"rank{r}.json.gz")
    data = (tmp_path / "rank3.json.gz").read_bytes()
    (tmp_path / "rank3.json.gz").write_bytes(data[: len(data) // 2])
    p = _run(["replay", str(tmp_path), "-o", str(tmp_path / "out")], 2)
    assert p.returncode == 2
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuan: error:") and "rank3.json.gz" in lines[0], p.stderr
    assert not (tmp_path / "out").exists()
    with pytest.raises(EOFError):
        gzip.decompress(data[: len(data) // 2])
