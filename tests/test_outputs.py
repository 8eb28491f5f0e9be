"""Output files: a failed or killed run leaves no half-written file, and a command that writes several
files leaves all of them or none; bad option values are refused in one line before any work."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from gpuan.errors import TraceError
from gpuan.outputs.files import all_or_none, make_dir, write_text
from gpuan.synth.kineto import sample_trace_path


def gpuan(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "gpuan", *map(str, args)], capture_output=True, text=True, cwd=cwd)


def one_line(result, *words):
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for w in words:
        assert str(w) in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    return sample_trace_path(tmp_path_factory.mktemp("sample"))


def test_all_or_none_moves_every_file_only_when_the_block_succeeds(tmp_path):
    kept = tmp_path / "b.txt"
    kept.write_text("old")
    with pytest.raises(RuntimeError), all_or_none():
        write_text(tmp_path / "a.txt", "new a")
        write_text(kept, "new b")
        assert not (tmp_path / "a.txt").exists() and kept.read_text() == "old"  # held back until the end
        raise RuntimeError("a later step fails")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.txt"] and kept.read_text() == "old"

    with all_or_none():
        write_text(tmp_path / "a.txt", "new a")
        write_text(kept, "new b")
    assert (tmp_path / "a.txt").read_text() == "new a" and kept.read_text() == "new b"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.txt"]  # no temporary file left


def test_all_or_none_removes_the_directories_it_made_but_not_others(tmp_path):
    (tmp_path / "mine").mkdir()
    with pytest.raises(TraceError, match="is a file, not a directory"), all_or_none():
        write_text(make_dir(tmp_path / "new" / "deeper") / "t.csv", "x")
        write_text(make_dir(tmp_path / "mine") / "t.csv", "x")
        (tmp_path / "afile").write_text("")
        make_dir(tmp_path / "afile" / "sub")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "mine"]
    assert list((tmp_path / "mine").iterdir()) == []


def test_the_same_path_written_twice_keeps_the_last(tmp_path):
    with all_or_none():
        write_text(tmp_path / "a.txt", "first")
        write_text(tmp_path / "a.txt", "second")
    assert (tmp_path / "a.txt").read_text() == "second" and len(list(tmp_path.iterdir())) == 1


def test_sigterm_unwinds_and_removes_staged_files(tmp_path):
    code = (
        "import os, signal, sys, time\n"
        "from pathlib import Path\n"
        "from gpuan.cli import _exit_on_sigterm\n"
        "from gpuan.outputs.files import all_or_none, write_text\n"
        "_exit_on_sigterm()\n"
        "d = Path(sys.argv[1])\n"
        "with all_or_none():\n"
        "    write_text(d / 'a.txt', 'x')\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    time.sleep(30)\n"
    )
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 128 + signal.SIGTERM, r.stderr
    assert list(tmp_path.iterdir()) == []


def test_an_output_under_a_file_is_one_line_and_writes_nothing(tmp_path, sample):
    (tmp_path / "afile").write_text("")
    for args, bad in [
        (["sol", sample, "-o", "afile/s.csv"], "afile/s.csv"),
        (["sol", sample, "-o", "afile/s.xlsx"], "afile/s.xlsx"),
        (["sol", sample, "--html", "afile/r.html"], "afile/r.html"),
        (["cycles", sample, "-o", "afile/cy"], "afile/cy_cycle_1.csv"),
        (["demo", "--dir", "afile/sub"], "afile/sub"),
    ]:
        one_line(gpuan(*args, cwd=tmp_path), bad, "afile is a file, not a directory")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_a_later_output_that_fails_leaves_the_earlier_ones_unwritten(tmp_path, sample):
    (tmp_path / "keep.csv").write_text("old")
    one_line(gpuan("sol", sample, "-o", "keep.csv", "--html", "nodir/r.html", cwd=tmp_path), "nodir does not exist")
    assert (tmp_path / "keep.csv").read_text() == "old"

    first = gpuan("cycles", sample, "-o", "q", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    written = sorted(p.name for p in tmp_path.glob("q_*.csv"))
    assert len(written) >= 2
    for name in written:
        (tmp_path / name).write_text("old")
    blocker = tmp_path / written[-1]
    blocker.unlink()
    blocker.mkdir()
    one_line(gpuan("cycles", sample, "-o", "q", cwd=tmp_path), written[-1], "Is a directory")
    assert all((tmp_path / n).read_text() == "old" for n in written[:-1])
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file


def test_convert_refuses_to_overwrite_its_own_trace(tmp_path, sample):
    trace = tmp_path / "t.json.gz"
    trace.write_bytes(sample.read_bytes())
    one_line(gpuan("convert", trace, "-o", trace), trace, "is the trace itself")
    assert trace.read_bytes() == sample.read_bytes()


@pytest.mark.parametrize(
    "args, words",
    [
        (["streams", "T", "--streams", "abc"], ["--streams", "not a whole number"]),
        (["streams", "T", "--streams", "0"], ["--streams", "at least 1"]),
        (["streams", "T", "--streams", "2", "--gpu", ""], ["--gpu", "must not be empty"]),
        (["info", "T", "--top", "-1"], ["--top", "0 or more"]),
        (["sol", "T", "--top", "-3"], ["--top", "0 or more"]),
        (["replay", "T", "--top", "x"], ["--top", "not a whole number"]),
        (["convert", "T", "-o", ""], ["--output", "must not be empty"]),
        (["demo", "--dir", " "], ["--dir", "must not be empty"]),
        (["cycles", "T", "-o", ""], ["--output", "must not be empty"]),
        (["no-such-command"], ["invalid choice"]),
    ],
)
def test_bad_option_values_are_one_line(tmp_path, args, words):
    line = one_line(gpuan(*args, cwd=tmp_path), *words)
    assert line.startswith("gpuan") and "--help" in line
    assert list(tmp_path.iterdir()) == []


def test_calibrate_checks_its_file_before_measuring(tmp_path):
    (tmp_path / "afile").write_text("")
    one_line(gpuan("sol", "calibrate", "--cpu", "--ceilings-file", "afile/c.json", cwd=tmp_path), "afile")
    assert sorted(os.listdir(tmp_path)) == ["afile"]


@pytest.mark.parametrize("value", ["0", "abc", "-3"])
def test_a_bad_thread_count_is_one_line(tmp_path, sample, value):
    env = {**os.environ, "GPUAN_THREADS": value}
    r = subprocess.run([sys.executable, "-m", "gpuan", "info", str(sample)], capture_output=True, text=True, env=env)
    one_line(r, "GPUAN_THREADS", repr(value))


def test_a_bad_mpi_switch_is_one_line(tmp_path):
    env = {**os.environ, "GPUAN_MPI": "yes"}
    r = subprocess.run(
        [sys.executable, "-m", "gpuan", "replay", str(tmp_path)], capture_output=True, text=True, env=env
    )
    one_line(r, "GPUAN_MPI", "must be 0 or 1")
