"""Bad input to ``gpuan replay``, alone and as an MPI job: exit code 2, exactly one line on stderr naming
the file (printed by process 0 only), nothing on stdout and no output files."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpuan.errors import TraceError
from gpuan.replay.deal import sources
from gpuan.trace import parquet
from gpuan.trace.load import load

MPIEXEC = shutil.which("mpiexec")
needs_mpiexec = pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (the test command installs mpich from PyPI)")
GLOO = "kineto/cpu_ddp_gloo_4rank_slow_rank1_step2"


def gpuan(args: list, n: int | None = None) -> subprocess.CompletedProcess:
    """Run gpuan as a user does: one process without MPI (n None), or under ``mpiexec -n n``."""
    env = dict(os.environ)  # PYTHONPATH goes through, so the processes run this checkout
    cmd = [sys.executable, "-m", "gpuan", *map(str, args)]
    if n is None:
        env["GPUAN_MPI"] = "0"
    else:
        env.pop("GPUAN_MPI", None)
        cmd = [MPIEXEC, "-n", str(n), *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)


def assert_one_line_error(p: subprocess.CompletedProcess, path, words: str, out: Path | None = None) -> None:
    """Assert exit code 2, one stderr line ``gpuan: error: PATH: ...WORDS...``, no stdout, no `out`."""
    assert p.returncode == 2, p.stderr
    lines = p.stderr.splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith(f"gpuan: error: {path}") and words in lines[0], lines[0]
    assert p.stdout == ""
    assert out is None or not out.exists()


def mixed_dir(tmp_path: Path, data_dir: Path) -> Path:
    """Return a run directory of a Kineto rank 0 and an nvprof rank 1."""
    d = tmp_path / "mixed"
    d.mkdir()
    shutil.copy(data_dir / GLOO / "rank0.json.gz", d / "rank0.json.gz")
    shutil.copy(data_dir / "nvprof/mem_mem_1stream_23000.csv", d / "rank1.csv")
    return d


def test_mixed_formats_are_rejected(tmp_path, data_dir):
    d = mixed_dir(tmp_path, data_dir)
    out = tmp_path / "out"
    assert_one_line_error(gpuan(["replay", d, "-o", out]), d, "mixes trace formats (kineto, nvprof)", out)


def test_mixed_formats_are_found_from_the_listing(tmp_path, data_dir):
    d = mixed_dir(tmp_path, data_dir)
    with pytest.raises(TraceError, match="mixes trace formats") as e:
        sources(d)
    assert e.value.path == str(d)
    with pytest.raises(TraceError, match="mixes trace formats"):
        load(d)  # what info, convert and cycles read: the same check
    # a Parquet file converted from a Kineto trace is a Kineto rank: its clock is Kineto's
    (d / "rank1.csv").unlink()
    parquet.write(load(data_dir / GLOO / "rank1.json.gz"), d / "rank1.parquet")
    assert [(s.rank, s.path.name) for s in sources(d)] == [(0, "rank0.json.gz"), (1, "rank1.parquet")]
