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


def gpuan(args: list, n: int | None = None, exits: Path | None = None) -> subprocess.CompletedProcess:
    """Run gpuan as a user does: one process without MPI (n None), or under ``mpiexec -n n``; with
    `exits`, each MPI process also writes its exit code to the file `exits`/its MPI rank."""
    env = dict(os.environ)  # PYTHONPATH goes through, so the processes run this checkout
    cmd = [sys.executable, "-m", "gpuan", *map(str, args)]
    if n is None:
        env["GPUAN_MPI"] = "0"
    else:
        env.pop("GPUAN_MPI", None)
        if exits is not None:
            script = '"$@"; code=$?; echo $code > "$GPUAN_TEST_EXITS/$PMI_RANK"; exit $code'
            env["GPUAN_TEST_EXITS"] = str(exits)
            cmd = ["sh", "-c", script, "sh", *cmd]
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


def bad_run(kind: str, tmp_path: Path, data_dir: Path) -> tuple[Path, Path, str]:
    """Return a bad run directory of the given kind, the path its error names, and words of the error."""
    if kind == "mixed formats":
        d = mixed_dir(tmp_path, data_dir)
        return d, d, "mixes trace formats (kineto, nvprof)"
    d = tmp_path / "run"
    d.mkdir()
    if kind == "empty directory":
        return d, d, "directory holds no trace files"
    for r in range(4):
        shutil.copy(data_dir / GLOO / f"rank{r}.json.gz", d / f"rank{r}.json.gz")
    if kind == "not a trace":  # found when listing: its first bytes are no trace format
        (d / "rank2.json").write_bytes(bytes(range(256)))
        (d / "rank2.json.gz").unlink()
        return d, d / "rank2.json", "unknown trace format"
    cut = d / "rank1.json.gz"  # read by process 1
    cut.write_bytes(cut.read_bytes()[:5000])
    if kind == "truncated rank":
        return d, cut, "truncated gzip"
    # two bad ranks, read by different processes: the lowest rank's error, whatever the number of processes
    (d / "rank2.json.gz").unlink()
    (d / "rank2.json").write_text('{"name": "not a trace", "values": [1, 2, 3]}')
    return d, cut, "truncated gzip"


BAD_RUNS = ("mixed formats", "empty directory", "not a trace", "truncated rank", "two bad ranks")


@pytest.mark.parametrize("n", [None, pytest.param(2, marks=needs_mpiexec), pytest.param(4, marks=needs_mpiexec)])
@pytest.mark.parametrize("kind", BAD_RUNS)
def test_bad_run_is_reported_once_and_every_process_exits_2(kind, n, tmp_path, data_dir):
    run, named, words = bad_run(kind, tmp_path, data_dir)
    out, exits = tmp_path / "out", tmp_path / "exits"
    exits.mkdir()
    p = gpuan(["replay", run, "-o", out, "--html", tmp_path / "view.html"], n, exits)
    assert_one_line_error(p, named, words, out)
    assert not (tmp_path / "view.html").exists()
    if n is not None:
        assert {f.name: f.read_text().strip() for f in exits.iterdir()} == {str(i): "2" for i in range(n)}


def test_otf2_archive_without_ranks(tmp_path):
    otf2 = pytest.importorskip("otf2")
    with otf2.writer.open(str(tmp_path / "archive"), timer_resolution=1_000_000):
        pass  # definitions only: no location group, no location
    anchor = tmp_path / "archive" / "traces.otf2"
    p = gpuan(["replay", tmp_path / "archive", "-o", tmp_path / "out"])
    assert_one_line_error(p, anchor, "OTF2 archive without ranks", tmp_path / "out")
