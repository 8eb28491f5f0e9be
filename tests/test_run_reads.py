"""The files of a run are read side by side: the load's threads shared out among the files read at once,
results and errors in rank order, and the same trace whatever the number of threads."""

from __future__ import annotations

import shutil
import threading
import time

import pytest

import gpuan
from gpuan.errors import TraceError
from gpuan.trace import kineto
from gpuan.trace.threads import files_side_by_side

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
    "threads, reads, at_once, each",
    [(1, 3, 1, 1), (2, 5, 2, 1), (3, 5, 3, 1), (4, 2, 2, 2), (5, 2, 2, 2), (2, 1, 1, 2)],
)
def test_reads_share_the_threads_and_return_in_order(threads, reads, at_once, each):
    log, running, peak = [], [], [0]
    make = _recording(log, running, peak)
    assert files_side_by_side([make(i) for i in range(reads)], threads) == [i * i for i in range(reads)]
    assert peak[0] == at_once
    assert {t for _, t, _ in log} == {each}
    on_pool = {name.startswith("gpuan-files") for _, _, name in log}
    assert on_pool == ({True} if at_once > 1 else {False})


def test_the_first_error_in_order_is_raised_not_the_first_in_time():
    def late_failure(threads: int) -> None:
        time.sleep(0.2)
        raise TraceError("rank0.json", "first in order")

    def early_failure(threads: int) -> None:
        raise TraceError("rank1.json", "first in time")

    with pytest.raises(TraceError, match="first in order"):
        files_side_by_side([late_failure, early_failure, lambda threads: 2], 2)


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
