"""Ranks in a replay come from the traces' own metadata, as in every other command: the real DLRM run
renamed so that neither the name order nor the numbers in the names are the ranks still names its real
straggler, alone and under ``mpiexec -n 2`` and ``-n 4``; two files with one rank stop info and replay
with the same one-line error. Expected values are computed here from the raw JSON."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from test_replay_mpi import _run as run_gpuan

MPIEXEC = shutil.which("mpiexec")
needs_mpiexec = pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (the test command installs mpich from PyPI)")
DLRM = "kineto/dlrm_8rank_nccl"


def gpuan(args: list, n: int | None = None) -> subprocess.CompletedProcess:
    """Run gpuan as a user does: one process without MPI (n None), or under ``mpiexec -n n``."""
    return run_gpuan([str(a) for a in args], n)


def _read(path: Path) -> dict:
    with gzip.open(path) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def renamed(data_dir, tmp_path_factory) -> Path:
    """The DLRM run as worker{rank+8}_...: lexicographically worker10..15 come before worker8 and 9, and
    no name holds its rank."""
    d = tmp_path_factory.mktemp("dlrm")
    for f in (data_dir / DLRM).iterdir():
        rank = _read(f)["distributedInfo"]["rank"]
        (d / f"worker{rank + 8}{f.name[f.name.index('_') :]}").write_bytes(f.read_bytes())
    return d


@pytest.fixture(scope="module")
def truth(renamed) -> dict:
    """From the raw JSON: per collective (the k-th NCCL kernel of every rank) the rank that entered last,
    and the wait it caused the others (each waits from its enter to the last enter, or its leave)."""
    kernels = {}
    for f in renamed.iterdir():
        doc = _read(f)
        ev = [e for e in doc["traceEvents"] if e.get("cat") == "kernel" and e["name"].startswith("ncclKernel_")]
        kernels[doc["distributedInfo"]["rank"]] = sorted((e["ts"] * 1000, (e["ts"] + e["dur"]) * 1000) for e in ev)
    n = {len(k) for k in kernels.values()}
    assert n == {8}
    late, caused = Counter(), Counter()
    for k in range(8):
        enters = {r: kernels[r][k][0] for r in kernels}
        last = max(enters.values())
        culprit = min(r for r in enters if enters[r] == last)
        late[culprit] += 1
        caused[culprit] += sum(max(0, min(last, kernels[r][k][1]) - enters[r]) for r in kernels if r != culprit)
    worst = max(caused, key=lambda r: (caused[r], -r))
    return {"ranks": sorted(kernels), "worst": worst, "late": late[worst], "caused": caused[worst]}


@pytest.mark.parametrize("n", [None, pytest.param(2, marks=needs_mpiexec), pytest.param(4, marks=needs_mpiexec)])
def test_straggler_of_the_renamed_run(renamed, truth, n):
    p = gpuan(["replay", renamed, "--format", "json"], n)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    top = out["stragglers"][0]
    assert (top["rank"], top["late"], top["collectives"]) == (truth["worst"], truth["late"], 8)
    assert top["caused_total"] == truth["caused"]
    assert truth["worst"] == 7 and truth["late"] == 5  # what the run is known for
    assert sorted(b["rank"] for b in out["breakdown"]) == truth["ranks"]


def test_info_reports_the_same_ranks(renamed, truth):
    p = gpuan(["info", renamed, "--format", "json"])
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["ranks"] == truth["ranks"]


@pytest.mark.parametrize(
    "command, n",
    [("info", None), ("replay", None), pytest.param("replay", 2, marks=needs_mpiexec)],
)
def test_two_files_with_one_rank(renamed, tmp_path, command, n):
    d = tmp_path / "run"
    shutil.copytree(renamed, d)
    twin = next(d.glob("worker9_*"))  # distributedInfo rank 1
    shutil.copy(twin, d / "again.json.gz")
    p = gpuan([command, d], n)
    assert p.returncode == 2
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and p.stdout == "", p.stderr
    assert lines[0].startswith(f"gpuan: error: {d}: two files hold rank 1: ")
    assert "again.json.gz" in lines[0] and twin.name in lines[0]
