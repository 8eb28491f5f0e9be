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
from gpuan.trace import parquet
from gpuan.trace.load import load
from gpuan.trace.otf2 import _library_messages, read_otf2
from gpuan.trace.ranks import load_run

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
        load_run(d)
    assert e.value.path == str(d)
    with pytest.raises(TraceError, match="mixes trace formats"):
        load(d)  # what info, convert and cycles read: the same check
    # a Parquet file converted from a Kineto trace is a Kineto rank: its clock is Kineto's
    (d / "rank1.csv").unlink()
    parquet.write(load(data_dir / GLOO / "rank1.json.gz"), d / "rank1.parquet")
    assert [(s.rank, s.path.name) for s in load_run(d)] == [(0, "rank0.json.gz"), (1, "rank1.parquet")]


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


def broken_archive(tmp_path: Path, data_dir: Path, part: str, how: str) -> Path:
    """Return a copy of the OTF2 ping-pong archive whose file `part` is "empty", "truncated" or "missing"."""
    src, d = data_dir / "otf2/ping_pong_2rank", tmp_path / "archive"
    for f in src.rglob("*"):  # byte copies: the shared files are read-only
        if f.is_file():
            (d / f.relative_to(src)).parent.mkdir(parents=True, exist_ok=True)
            (d / f.relative_to(src)).write_bytes(f.read_bytes())
    target = d / part
    if how == "missing":
        target.unlink()
    else:
        target.write_bytes(target.read_bytes()[: 60 if how == "truncated" else 0])
    return d


@pytest.mark.parametrize(
    "part, how, words",
    [
        ("traces.otf2", "empty", "Zero bytes to read"),
        ("traces.otf2", "truncated", ""),
        ("traces.def", "empty", "no chunk header"),
        ("traces.def", "truncated", ""),
        ("traces/0.evt", "empty", "no chunk header"),
        ("traces/1.evt", "truncated", ""),
        ("traces/1.evt", "missing", "does not exist: POSIX: "),
        # the otf2 package reads on without a location's local definitions (and gets its events wrong)
        ("traces/1.def", "empty", "no chunk header"),
        ("traces/0.def", "missing", "does not exist: POSIX: "),
    ],
)
@pytest.mark.parametrize("command", ["replay", "info"])
def test_broken_otf2_archive_is_one_line(tmp_path, data_dir, part, how, words, command):
    pytest.importorskip("otf2")
    d = broken_archive(tmp_path, data_dir, part, how)
    p = gpuan([command, d] + (["-o", tmp_path / "out"] if command == "replay" else []))
    assert_one_line_error(p, d / "traces.otf2", "unreadable OTF2 archive: ", tmp_path / "out")
    assert words in p.stderr  # the library's first message, the cause
    if how == "missing":  # which names the file
        assert part in p.stderr


@needs_mpiexec
def test_broken_otf2_rank_under_mpi_is_one_line(tmp_path, data_dir):
    pytest.importorskip("otf2")
    d = broken_archive(tmp_path, data_dir, "traces/1.evt", "empty")  # read by process 1
    p = gpuan(["replay", d, "-o", tmp_path / "out"], 2)
    assert_one_line_error(p, d / "traces.otf2", "unreadable OTF2 archive: ", tmp_path / "out")


def test_otf2_library_is_silenced_and_stderr_restored(tmp_path, data_dir, capfd):
    pytest.importorskip("otf2")
    d = broken_archive(tmp_path, data_dir, "traces/1.evt", "missing")
    with pytest.raises(TraceError, match=r"unreadable OTF2 archive: File or directory does not exist: .*1\.evt"):
        read_otf2(d)
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "after\n"
    assert len(read_otf2(data_dir / "otf2/ping_pong_2rank")) == 42  # a sound archive reads as before
    assert capfd.readouterr().err == ""


def test_library_lines_are_told_from_other_output():
    text = (
        "[OTF2] src/OTF2_File.c:247: error: Parameter value out of range: Zero bytes to read!\n"
        "[OTF2] src/OTF2_Archive.c:195: error: Parameter value out of range: Could not read data from anchor file!\n"
        "[OTF2] src/OTF2_Reader.c:9: warning: something odd\n"
        "not the library\n"
    )
    assert _library_messages(text) == (
        ["Parameter value out of range: Zero bytes to read!", "Parameter value out of range: Could not read data "
         "from anchor file!"],
        "not the library\n",
    )  # fmt: skip
