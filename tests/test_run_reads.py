"""The files of a run are read side by side: the load's threads shared out among the files read at once,
results and errors in rank order, and the same trace whatever the number of threads."""

from __future__ import annotations

import gzip
import shutil
import signal
import threading
import time

import pytest

import gpuan
from gpuan.errors import TraceError, UsageError
from gpuan.trace import kineto
from gpuan.trace import threads as threads_module
from gpuan.trace.kineto import reader
from gpuan.trace.threads import (
    ReadStopped,
    check_stop,
    files_side_by_side,
    keep_threads,
    most_threads,
    take_spare_threads,
    threads_held,
)

RUNS = ("dlrm_8rank_nccl", "cpu_ddp_gloo_4rank_slow_rank1_step2")


def _recording(log: list, running: list, peak: list, pause: float = 0.02):
    """Return a read that notes its thread and threads given, and how many reads ran at once."""
    lock = threading.Lock()

    def make(i: int):
        def read(threads: int) -> int:
            with lock:
                running.append(i)
                peak[0] = max(peak[0], len(running))
            log.append((i, threads, threading.current_thread().name))
            time.sleep(pause)  # long enough that reads given threads overlap
            with lock:
                running.remove(i)
            return i * i

        return read

    return make


@pytest.mark.parametrize(
    "threads, reads, at_once, given",
    [(1, 3, 1, {1}), (2, 5, 2, {1}), (3, 5, 3, {1}), (4, 2, 2, {2}), (3, 2, 2, {2, 1}), (5, 2, 2, {3, 2}),
     (2, 1, 1, {2})],
)  # fmt: skip
def test_reads_share_the_threads_and_return_in_order(threads, reads, at_once, given):
    log, running, peak = [], [], [0]
    make = _recording(log, running, peak)
    assert files_side_by_side([make(i) for i in range(reads)], threads) == [i * i for i in range(reads)]
    assert peak[0] == at_once
    assert {t for _, t, _ in log} == given
    on_pool = {name.startswith("gpuan-files") for _, _, name in log}
    assert on_pool == ({True} if at_once > 1 else {False})


def test_the_largest_files_start_first_and_results_stay_in_order():
    """At 2 threads, reads 3 and 1 (the largest) start first; read 1 waits until read 0 has run, so the worker
    that ended read 3 takes read 2 and then read 0, in that order."""
    log, zero_ran = [], threading.Event()

    def read(i: int):
        def run(threads: int) -> int:
            log.append(i)
            if i == 1:
                assert zero_ran.wait(30)
            if i == 0:
                zero_ran.set()
            return i * i

        return run

    assert files_side_by_side([read(i) for i in range(4)], 2, sizes=[1, 50, 7, 900]) == [0, 1, 4, 9]
    assert set(log[:2]) == {3, 1} and log[2:] == [2, 0]


def test_files_of_one_size_start_in_order_and_the_spare_threads_go_to_the_largest():
    """4 threads, 3 reads: one thread each and one spare, which the first read started gets."""
    for sizes, given in (([50, 1, 50], [2, 1, 1]), ([1, 50, 9], [1, 2, 1])):
        log, running, peak = [], [], [0]
        make = _recording(log, running, peak)
        files_side_by_side([make(i) for i in range(3)], 4, sizes=sizes)
        assert [t for _, t, _ in sorted(log)] == given


def test_a_read_queued_after_a_failed_one_is_not_run():
    """Read 1 (the largest) fails at once; read 2, queued next, is not wanted and does not run; read 3 runs
    meanwhile; read 0, before the failure, runs, and read 1's error is raised."""
    ran, failed = [], threading.Event()

    def read(i: int):
        def run(threads: int) -> None:
            ran.append(i)
            if i == 1:
                failed.set()
                raise TraceError("rank1.json", "read 1")
            if i == 3:
                assert failed.wait(30)
                time.sleep(0.05)  # let read 1's failure be noted before this worker takes the next read

        return run

    with pytest.raises(TraceError, match="read 1"):
        files_side_by_side([read(i) for i in range(4)], 2, sizes=[1, 9, 5, 6])
    assert 2 not in ran and 0 in ran


def test_with_sizes_the_first_error_in_order_is_still_the_one_raised():
    """Read 2, the largest, fails first; read 1, before it in order, goes on (its checks do not stop it) and
    fails later: its error is raised. Read 0 is not stopped either."""
    two_failed, checked = threading.Event(), []

    def first(threads: int) -> int:
        assert two_failed.wait(30)
        for _ in range(3):
            check_stop()  # read 2's failure does not stop a read before it
            checked.append(0)
        return 0

    def second(threads: int) -> None:
        assert two_failed.wait(30)
        check_stop()
        checked.append(1)
        raise TraceError("run", "read 1")

    def third(threads: int) -> None:
        two_failed.set()
        raise TraceError("run", "read 2")

    with pytest.raises(TraceError, match="read 1"):
        files_side_by_side([first, second, third], 3, sizes=[1, 2, 3])
    assert sorted(checked) == [0, 0, 0, 1]


def test_a_run_s_files_are_read_largest_first_and_on_the_gpu_one_at_a_time(tmp_path):
    """read_run_files, which gpuan.load(RUN) and each MPI process's read_own use: the files' sizes order the
    reads; for the GPU they run one after another in the calling thread, each with every thread."""
    from gpuan.trace.load import read_run_files

    paths = [tmp_path / f"rank{r}.json" for r in range(3)]
    for p, size in zip(paths, (10, 1000, 100)):
        p.write_bytes(b" " * size)
    log, running, peak = [], [], [0]
    make = _recording(log, running, peak, pause=0)
    assert read_run_files([make(i) for i in range(3)], paths, gpu=False, threads=1) == [0, 1, 4]
    assert [i for i, _, _ in log] == [0, 1, 2]  # one thread: one read at a time, in order
    log.clear()
    assert read_run_files([make(i) for i in range(3)], paths, gpu=True, threads=2) == [0, 1, 4]
    assert [(i, t) for i, t, _ in log] == [(0, 2), (1, 2), (2, 2)]
    assert {name for _, _, name in log} == {threading.current_thread().name}
    log.clear()
    gate = threading.Event()

    def held(i: int):
        def read(threads: int) -> int:
            log.append(i)
            if i == 2:  # the second largest waits until the smallest has started, on the other worker
                assert gate.wait(30)
            if i == 0:
                gate.set()
            return i

        return read

    assert read_run_files([held(i) for i in range(3)], paths, gpu=False, threads=2) == [0, 1, 2]
    assert set(log[:2]) == {1, 2} and log[2] == 0


def test_the_threads_of_ended_reads_go_to_those_running_once_none_waits():
    """2 threads, 3 reads: read 0 (the largest) and read 1 start on one thread each. When read 1 ends, read 2
    still waits, so its thread goes to read 2, and read 0 finds none spare; when read 2 ends, read 0 takes its
    thread and holds both. Outside a read of files_side_by_side nothing is spare."""
    read2_started, read0_checked, seen = threading.Event(), threading.Event(), {}

    def read0(threads: int) -> int:
        seen["most"] = most_threads(threads)
        assert read2_started.wait(30)
        seen["while read 2 runs"] = take_spare_threads()
        read0_checked.set()
        taken = 0
        for _ in range(3000):  # until read 2 has ended
            taken += take_spare_threads()
            if taken:
                break
            time.sleep(0.01)
        seen["after read 2"] = taken
        seen["held"] = threads_held(threads)
        seen["more"] = take_spare_threads()  # both threads held: none left to take
        return 0

    def read1(threads: int) -> int:
        return 1

    def read2(threads: int) -> int:
        seen["read 2 given"] = threads
        read2_started.set()
        assert read0_checked.wait(30)
        return 2

    assert files_side_by_side([read0, read1, read2], 2, sizes=[9, 5, 1]) == [0, 1, 2]
    assert seen == {"most": 2, "read 2 given": 1, "while read 2 runs": 0, "after read 2": 1, "held": 2, "more": 0}
    assert take_spare_threads() == 0 and threads_held(3) == 3 and most_threads(3) == 3


def test_reads_still_running_each_take_their_part_of_the_spare_threads():
    """6 threads, 3 reads of 2 each: read 0 ends, and its 2 threads are shared by the two reads still running,
    one each, not both taken by whichever asks first; what one leaves, it or the other may take later."""
    asked, answered, seen = threading.Event(), threading.Event(), {}

    def read0(threads: int) -> int:
        return 0

    def read1(threads: int) -> int:
        taken = 0
        for _ in range(3000):  # until read 0 has ended
            taken = take_spare_threads()
            if taken:
                break
            time.sleep(0.01)
        seen["read 1 took"] = taken
        asked.set()
        assert answered.wait(30)  # still running while read 2 asks
        return 1

    def read2(threads: int) -> int:
        assert asked.wait(30)
        seen["read 2 took"] = take_spare_threads()
        seen["read 2 holds"] = threads_held(threads)
        answered.set()
        return 2

    assert files_side_by_side([read0, read1, read2], 6) == [0, 1, 2]
    assert seen == {"read 1 took": 1, "read 2 took": 1, "read 2 holds": 3}


def test_a_read_that_ends_no_longer_counts_among_those_sharing_the_spare_threads():
    """8 threads, 4 reads of 2 each: once reads 0 and 1 have ended, their 4 threads are shared by the two
    reads still running: read 2 takes 2 of them (4 over 2 running), not 1 (4 over 4)."""
    started, took, seen = threading.Event(), threading.Event(), {}

    def ends(threads: int) -> int:
        return 0

    def read2(threads: int) -> int:
        assert started.wait(30)
        _free_threads(4)
        seen["read 2 took"] = take_spare_threads()
        took.set()
        return 2

    def read3(threads: int) -> int:
        started.set()
        assert took.wait(30)  # still running while read 2 takes
        return 3

    assert files_side_by_side([ends, ends, read2, read3], 8) == [0, 0, 2, 3]
    assert seen == {"read 2 took": 2}


def test_a_kineto_read_gives_back_before_building_a_small_table(tmp_path, monkeypatch):
    """4 threads, 2 reads of 2 each: the Kineto read of a small file keeps one thread for its table build
    (one thread builds it), and the read beside it takes the other while that build runs."""
    path = tmp_path / "rank0.json"
    path.write_text(
        '{"traceEvents": [' + ",".join(f'{{"ph": "X", "name": "k", "ts": {i}, "dur": 1}}' for i in range(99)) + "]}"
    )
    building, took, seen = threading.Event(), threading.Event(), {}
    build = kineto.build_trace

    def waiting_build(*a, **k):
        building.set()
        assert took.wait(30)
        return build(*a, **k)

    monkeypatch.setattr(kineto, "build_trace", waiting_build)

    def beside(threads: int) -> int:
        assert building.wait(30)
        _free_threads(1)
        seen["took"] = take_spare_threads()
        took.set()
        return 1

    table, _ = files_side_by_side([lambda t: kineto.read_kineto(str(path), threads=t), beside], 4)
    assert len(table.events) == 99 and seen == {"took": 1}


def test_a_kineto_read_puts_the_threads_it_takes_to_work_and_reads_the_same(large_rank, monkeypatch):
    """Beside a read that ends at once, the large rank's read (given one thread: it scans alone) takes the spare
    thread between blocks and scans the blocks after with two scanning threads, the main thread settling; its
    table is the one a read on one thread gives."""
    added = []
    add = reader._Workers.add

    def noting(self, threads, strings):
        if threads:
            added.append((threads, len(self._tables)))
        return add(self, threads, strings)

    monkeypatch.setattr(reader._Workers, "add", noting)
    alone = kineto.read_kineto(str(large_rank), threads=1)
    assert added == []
    _, beside = files_side_by_side([lambda t: 1, lambda t: kineto.read_kineto(str(large_rank), threads=t)], 2)
    assert added == [(2, 1)]  # two scanning threads beside the main thread's table
    assert beside.events.equals(alone.events) and beside.flows.equals(alone.flows)
    assert beside.metadata == alone.metadata


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 1 MB (the first read of a gzipped file 256 KB), cut into chunks from 256 KB: a few MB make a
    file of many blocks."""
    monkeypatch.setattr(reader, "BLOCK_BYTES", 1 << 20)
    monkeypatch.setattr(reader, "FIRST_READ_BYTES", 256 << 10)
    monkeypatch.setattr(reader, "MIN_PARALLEL_BYTES", 256 << 10)


def _many_strings(path, gz: bool) -> None:
    """Write a trace of 60k events, 30k distinct names and thread names given as strings (their synthetic ids
    follow the order the strings are met in), over 6 MB."""
    event = (
        '{"ph": "X", "cat": "%s", "name": "op%d", "pid": 1, "tid": "worker %d", "ts": %d, "dur": 3, '
        '"args": {"External id": %d, "Input Dims": [[%d, 64]], "Input type": ["float"]}}'
    )
    body = ",\n".join(
        event % (("cpu_op", "kernel")[i % 2], (i * 7919) % 30_000, (i * 31) % 1000, 5 * i, i, i % 997)
        for i in range(60_000)
    )
    text = '{"traceEvents": [\n' + body + "\n]}\n"
    assert len(text) > 6 * reader.BLOCK_BYTES
    path.write_bytes(gzip.compress(text.encode(), 1) if gz else text.encode())


def _free_threads(at_least: int) -> None:
    """Wait (in a read of files_side_by_side) until at least `at_least` of the call's threads are free: the
    reads meant to end before have ended and given theirs back."""
    for _ in range(3000):
        if threads_module._PLACE.get().free.count >= at_least:
            return
        time.sleep(0.01)
    raise AssertionError(f"fewer than {at_least} threads free after 30 s")


def _once_the_other_ended(read):
    """Return `read` run once one thread of its files_side_by_side call is free (the other read has ended)."""

    def run(threads: int):
        _free_threads(1)
        return read(threads)

    return run


def _noting_growth(monkeypatch) -> tuple[list, list]:
    """Record each _Workers.add (threads added, tables before) and each chunk scanned by a scanning thread
    (its block's chunk count, the thread's table)."""
    added, chunks = [], []
    add, scan_chunk = reader._Workers.add, reader._scan_chunk

    def noting_add(self, threads, strings):
        added.append((threads, len(self._tables)))
        return add(self, threads, strings)

    def noting_chunk(block, k, t, table):
        chunks.append((block.starts.size, t))
        return scan_chunk(block, k, t, table)

    monkeypatch.setattr(reader._Workers, "add", noting_add)
    monkeypatch.setattr(reader, "_scan_chunk", noting_chunk)
    return added, chunks


@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
@pytest.mark.parametrize(
    "threads, grows",
    [(2, (2, 1)), (3, (1, 3))],
    ids=["alone-then-two-scanning-threads", "two-scanning-threads-then-three"],
)
def test_a_read_that_takes_threads_midway_reads_as_alone(tmp_path, monkeypatch, small_blocks, suffix, threads, grows):
    """A file of many blocks read once the read beside it has ended: at 2 threads it starts alone on its one
    thread and switches to two scanning threads; at 3 it starts with two and takes a third, and its next blocks
    are cut for three. Its strings, in the order they are numbered, and its table are those of a read on one
    thread, plain and gzipped."""
    path = tmp_path / f"rank0{suffix}"
    _many_strings(path, suffix.endswith(".gz"))
    alone_raw, alone = reader.scan_file(str(path), threads=1), kineto.read_kineto(str(path), threads=1)
    added, chunks = _noting_growth(monkeypatch)
    assert not chunks
    scan = _once_the_other_ended(lambda t: reader.scan_file(str(path), threads=t))
    raw, _ = files_side_by_side([scan, lambda t: 1], threads)
    scanners = max(threads, 2)  # at 2 threads: the main thread's one and the one taken
    assert added == [grows]
    assert sum(n == scanners * reader.CHUNKS_PER_THREAD for n, _ in chunks) > 10
    assert {t for _, t in chunks} == set(range(1, scanners + 1))
    assert raw.strings == alone_raw.strings and len(raw.strings) > 31_000
    added.clear()
    read = _once_the_other_ended(lambda t: kineto.read_kineto(str(path), threads=t))
    table, _ = files_side_by_side([read, lambda t: 1], threads)
    assert added == [grows]
    assert table.events.equals(alone.events) and table.flows.equals(alone.flows)
    assert table.metadata == alone.metadata and len(table.metadata["id_names"]) == 1000


def test_a_read_does_not_take_threads_on_its_last_block(tmp_path, monkeypatch, small_blocks):
    """A file of one block (mapped whole) has nothing left to share out once it could take a thread."""
    path = tmp_path / "rank0.json"
    path.write_text(
        '{"traceEvents": [' + ",".join(f'{{"ph": "X", "name": "k", "ts": {i}, "dur": 1}}' for i in range(9000)) + "]}"
    )
    added, _ = _noting_growth(monkeypatch)
    files_side_by_side([lambda t: 1, _once_the_other_ended(lambda t: kineto.read_kineto(str(path), threads=t))], 2)
    assert added == []


def test_a_read_whose_table_is_built_alone_gives_back_the_threads_it_holds():
    """4 threads, 2 reads of 2 each: read 0 keeps one (its table is small) and read 1 takes the other."""
    kept, took, seen = threading.Event(), threading.Event(), {}

    def read0(threads: int) -> int:
        keep_threads(1)
        seen["read 0 holds"] = threads_held(threads)
        kept.set()
        assert took.wait(30)  # still running: its one thread is not given back yet
        return 0

    def read1(threads: int) -> int:
        assert kept.wait(30)
        seen["read 1 took"] = take_spare_threads()
        took.set()
        return 1

    assert files_side_by_side([read0, read1], 4) == [0, 1]
    assert seen == {"read 0 holds": 1, "read 1 took": 1}


def test_sizes_must_match_the_reads():
    with pytest.raises(ValueError, match="2 sizes for 3 reads"):
        files_side_by_side([lambda t: 0] * 3, 2, sizes=[1, 2])


def test_one_at_a_time_gives_each_read_every_thread_and_stops_at_a_failure():
    log, running, peak = [], [], [0]
    make = _recording(log, running, peak, pause=0)

    def bad(threads: int) -> None:
        raise TraceError("rank1.json", "bad")

    with pytest.raises(TraceError, match="bad"):
        files_side_by_side([make(0), bad, make(2)], 4, one_at_a_time=True)
    assert [(i, t) for i, t, _ in log] == [(0, 4)] and peak[0] == 1
    assert log[0][2] == threading.current_thread().name


@pytest.mark.parametrize("threads", [0, -1, 1.5, "2", True])
def test_a_bad_thread_count_is_a_usage_error(data_dir, threads):
    with pytest.raises(UsageError, match="threads: must be a whole number of at least 1"):
        gpuan.load(data_dir / "kineto" / RUNS[1], threads=threads)


def test_the_first_error_in_order_is_raised_not_the_first_in_time():
    def late_failure(threads: int) -> None:
        time.sleep(0.2)
        raise TraceError("rank0.json", "first in order")

    def early_failure(threads: int) -> None:
        raise TraceError("rank1.json", "first in time")

    with pytest.raises(TraceError, match="first in order"):
        files_side_by_side([late_failure, early_failure, lambda threads: 2], 2)


@pytest.fixture(scope="module")
def large_rank(tmp_path_factory):
    """A Kineto file of about 70 MB: several of the reader's blocks (reader.BLOCK_BYTES)."""
    path = tmp_path_factory.mktemp("large") / "rank1.json"
    event = '{"ph": "X", "cat": "kernel", "name": "k%d", "pid": 0, "tid": 7, "ts": %d, "dur": 1, "args": {"stream": 7}}'
    with open(path, "w") as f:
        f.write('{"traceEvents": [\n')
        f.write(",\n".join(event % (i % 97, 10 * i) for i in range(650_000)))
        f.write("\n]}\n")
    assert path.stat().st_size > 4 * reader.BLOCK_BYTES
    return path


def _large_read(path, stopped: list, scanning: threading.Event, signal_main: bool = False):
    """Return a read of the large rank that, once its first block is scanned, waits in its progress report
    until it is told to stop (then raises ReadStopped from there, noting it in `stopped`), for 30 s at most;
    with `signal_main`, it first sends SIGINT to the main thread, as Ctrl-C does."""

    def progress(done: int, total: int) -> None:
        if scanning.is_set():
            return
        scanning.set()
        if signal_main:
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        for _ in range(3000):
            try:
                check_stop()
            except ReadStopped:
                stopped.append(done < total)
                raise
            time.sleep(0.01)

    return lambda threads: kineto.read_kineto(str(path), threads=threads, progress=progress)


def test_reads_after_a_failure_stop_at_once_and_those_before_it_run_on(large_rank):
    """Read 1 fails while read 0 still runs: read 2, after it, is stopped at once (its result is not wanted,
    whatever read 0 gives), read 0 is not, and read 1's error is raised once read 0 has ended."""
    stopped, scanning, ended = [], threading.Event(), []

    def still_running(threads: int) -> int:
        assert scanning.wait(30)
        for _ in range(3000):  # until read 2 has been stopped
            if stopped:
                break
            check_stop()  # never raises: no read before this one failed
            time.sleep(0.01)
        ended.append(bool(stopped))
        return 0

    def failing(threads: int) -> None:
        assert scanning.wait(30)
        raise TraceError("rank1.json", "read 1")

    large = _large_read(large_rank, stopped, scanning)
    with pytest.raises(TraceError, match="read 1"):
        files_side_by_side([still_running, failing, large], 3)
    assert stopped == [True], "read 2 was not stopped within its file"
    assert ended == [True], "read 2 was stopped only once read 0 had ended"


def test_ctrl_c_stops_every_read_running(large_rank):
    """SIGINT to the thread that waits for the reads (Ctrl-C) stops the reads running, the first in order
    too, within a block; read whole, the same file gives every event."""
    stopped, scanning = [], threading.Event()
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # CI may start with SIGINT ignored
    try:
        with pytest.raises(KeyboardInterrupt):
            files_side_by_side([_large_read(large_rank, stopped, scanning, signal_main=True), lambda t: 1], 2)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert stopped == [True], "the read was not stopped within its file"
    whole = files_side_by_side([lambda t: 1, lambda t: kineto.read_kineto(str(large_rank), threads=t)], 2)
    assert len(whole[1].events) == 650_000


@pytest.mark.parametrize("run", RUNS)
def test_a_run_reads_the_same_at_any_number_of_threads(data_dir, monkeypatch, run):
    """Read at 1, 2 and 3 threads, a real run gives equal tables, flows and metadata; at 2 threads its
    files were read two at a time, each on one thread."""
    seen = []
    read = kineto.read_kineto

    def noting(*a, **k):
        seen.append((threading.current_thread().name, k["threads"]))
        return read(*a, **k)

    monkeypatch.setattr(kineto, "read_kineto", noting)
    d = data_dir / "kineto" / run
    one = gpuan.load(d, use_cache=False, threads=1)
    assert {t for _, t in seen} == {1} and not any(n.startswith("gpuan-files") for n, _ in seen)
    seen.clear()
    for threads in (2, 3):
        other = gpuan.load(d, use_cache=False, threads=threads)
        assert other.events.equals(one.events) and other.flows.equals(one.flows)
        assert other.metadata == one.metadata
    assert {t for _, t in seen} == {1}
    assert all(n.startswith("gpuan-files") for n, _ in seen)
    assert len(seen) == 2 * len(list(d.iterdir()))


def test_a_run_with_two_bad_files_names_the_lower_rank(data_dir, tmp_path):
    """Read side by side, a run whose ranks 1 and 3 are truncated raises the error of rank 1's file (the
    one a rank-by-rank read meets first), whichever finishes first; nothing is written beside the files."""
    src = data_dir / "kineto" / "cpu_ddp_gloo_4rank_slow_rank1_step2"
    run = tmp_path / "run"
    shutil.copytree(src, run)
    for r, keep in ((1, 4000), (3, 300)):  # rank 3 cut shorter: it fails sooner
        f = run / f"rank{r}.json.gz"
        f.write_bytes(f.read_bytes()[:keep])
    before = sorted(p.name for p in run.iterdir())
    for threads in (1, 2):
        with pytest.raises(TraceError) as e:
            gpuan.load(run, use_cache=False, threads=threads)
        assert "rank1.json.gz" in str(e.value) and "rank3" not in str(e.value)
    assert sorted(p.name for p in run.iterdir()) == before


def test_huge_page_advice_is_on_while_any_thread_builds():
    """numpy's advice is process-wide: a read that starts and ends while another thread builds a table
    leaves it on for that build; once neither is inside, it is as before."""
    from gpuan.trace.memory import _get_madvise_hugepage, _set_madvise_hugepage, huge_pages, lean_memory

    if _get_madvise_hugepage is None:
        pytest.skip("this numpy has no huge-page advice to switch")
    original = _get_madvise_hugepage()
    building, read_done, seen = threading.Event(), threading.Event(), {}

    def build() -> None:
        with lean_memory(), huge_pages():
            building.set()
            read_done.wait(5)
            seen["build, after the read ended"] = _get_madvise_hugepage()

    for before in (False, True):
        _set_madvise_hugepage(before)
        try:
            t = threading.Thread(target=build)
            t.start()
            building.wait(5)
            with lean_memory():
                seen["read, beside the build"] = _get_madvise_hugepage()
            read_done.set()
            t.join(5)
            assert seen == {"read, beside the build": True, "build, after the read ended": True}
            assert _get_madvise_hugepage() is before
            with lean_memory():
                assert _get_madvise_hugepage() is False
        finally:
            building.clear()
            read_done.clear()
            _set_madvise_hugepage(original)


def test_arrow_pool_is_put_back_once_the_last_parquet_read_ends():
    """Arrow's default memory pool is process-wide: a Parquet read that started first and ends first leaves
    the other read on jemalloc, and the pool from before is back once both have ended."""
    import pyarrow as pa

    from gpuan.trace.parquet import _steady_memory_pool

    try:
        jemalloc = pa.jemalloc_memory_pool().backend_name
    except (NotImplementedError, pa.ArrowNotImplementedError):
        pytest.skip("this pyarrow has no jemalloc pool")
    original = pa.default_memory_pool()
    pa.set_memory_pool(pa.system_memory_pool())  # a pool other than jemalloc before the reads
    first_in, second_in, first_out, seen = threading.Event(), threading.Event(), threading.Event(), {}

    def first_read() -> None:
        with _steady_memory_pool():
            first_in.set()
            second_in.wait(5)
        first_out.set()

    try:
        t = threading.Thread(target=first_read)
        t.start()
        first_in.wait(5)
        with _steady_memory_pool():
            second_in.set()
            first_out.wait(5)
            seen["second read, after the first ended"] = pa.default_memory_pool().backend_name
        t.join(5)
        assert seen == {"second read, after the first ended": jemalloc}
        assert pa.default_memory_pool().backend_name == "system"
    finally:
        pa.set_memory_pool(original)


def test_a_run_of_parquet_caches_reads_the_same_side_by_side(data_dir, tmp_path):
    """Each rank's fresh Parquet cache is what a run's second load reads: side by side, the same trace as
    one at a time, and Arrow's pool as it was."""
    import pyarrow as pa

    from gpuan.trace import parquet

    run = tmp_path / "run"
    shutil.copytree(data_dir / "kineto" / RUNS[1], run)
    for f in sorted(run.iterdir()):
        parquet.write(gpuan.load(f, use_cache=False), parquet.cache_path(f), source=f)
    before = pa.default_memory_pool().backend_name
    one, two = gpuan.load(run, threads=1), gpuan.load(run, threads=2)
    assert two.events.equals(one.events) and two.flows.equals(one.flows) and two.metadata == one.metadata
    assert one.events.equals(gpuan.load(run, use_cache=False).events)
    assert pa.default_memory_pool().backend_name == before
