"""The LCS wavefront of ``cuda_kernels/lcs_wavefront.cu`` against its CPU twin, :mod:`gpuan.compare.lcs`.

The kernels cannot run here, so their schedule is written below a second time in numpy, line for line:
anti-diagonals in order, each computed vectorised from the previous two (``lcs_lengths`` keeps three
diagonals indexed by the baseline row ``i``; ``lcs_tables`` fills the whole table). These references are
checked against lcs.py on random and real sequences; the kernels themselves against lcs.py where a GPU is.
"""

from __future__ import annotations

import numpy as np
import pytest

import gpuan
from gpuan import compare
from gpuan.compare import lcs, lcs_gpu
from gpuan.cycles.signature import signature
from gpuan.engine import CPU, gpu_available, select


def rotated_row(i: np.ndarray, rot: int, n: int) -> np.ndarray:
    """The index in ``a`` of rows `i` (1-based) of ``a`` rotated by `rot`, as the kernels' ``rotated_row``."""
    ai = i - 1 + rot
    return np.where(ai >= n, ai - n, ai)


def wavefront_length(a: np.ndarray, b: np.ndarray, rot: int) -> int:
    """The LCS length of rotation `rot` of `a` with `b`, by ``lcs_lengths``'s schedule (one block's work)."""
    n, m = a.shape[0], b.shape[0]
    diagonals = np.zeros(3 * (n + 1), np.int32)
    prev2, prev1, cur = diagonals[: n + 1], diagonals[n + 1 : 2 * (n + 1)], diagonals[2 * (n + 1) :]
    for d in range(2, n + m + 1):
        lo, hi = max(1, d - m), min(n, d - 1)
        i = np.arange(lo, hi + 1)  # the kernel's threads, each one cell of the diagonal
        j = d - i
        ai = rotated_row(i, rot, n)
        cur[i] = np.where(a[ai] == b[j - 1], prev2[i - 1] + 1, np.maximum(prev1[i - 1], prev1[i]))
        prev2, prev1, cur = prev1, cur, prev2  # __syncthreads(), then the buffers rotate
    return 0 if n == 0 or m == 0 else int(prev1[n])


def wavefront_table(a: np.ndarray, b: np.ndarray, rot: int) -> np.ndarray:
    """The ``(n + 1, m + 1)`` LCS table of rotation `rot` of `a` with `b`, by ``lcs_tables``'s schedule."""
    n, m = a.shape[0], b.shape[0]
    t = np.empty((n + 1) * (m + 1), np.int32)
    w = m + 1  # row stride
    t[np.arange(m + 1)] = 0
    t[np.arange(n + 1) * w] = 0
    for d in range(2, n + m + 1):
        lo, hi = max(1, d - m), min(n, d - 1)
        i = np.arange(lo, hi + 1)
        j = d - i
        ai = rotated_row(i, rot, n)
        t[i * w + j] = np.where(
            a[ai] == b[j - 1], t[(i - 1) * w + j - 1] + 1, np.maximum(t[(i - 1) * w + j], t[i * w + j - 1])
        )
    return t.reshape(n + 1, m + 1)


def _same_alignments(pairs, found) -> None:
    """Assert that `found` holds per pair of `pairs` the CPU's :func:`lcs.alignment`."""
    for (a, b), got in zip(pairs, found):
        want = lcs.alignment(a, b)
        assert got[:2] == want[:2]
        assert got[2].tolist() == want[2].tolist() and got[3].tolist() == want[3].tolist()


def _random_pairs(seed: int, count: int) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    pairs = []
    for _ in range(count):
        n, m, vocab = int(rng.integers(1, 40)), int(rng.integers(1, 40)), int(rng.integers(1, 8))
        pairs.append((rng.integers(0, vocab, n), rng.integers(0, vocab, m)))
    return pairs


def _real_cycles(data_dir) -> list[np.ndarray]:
    """The signature ids of every cycle that gpuan finds in two real traces (one id space)."""
    ids: dict[str, int] = {}
    out = []
    for name in ("a100_ddp2_rank0_nccl", "v100_ddp_6steps_trace_diff_test"):
        positions = gpuan.cycles.analyse(gpuan.load(data_dir / "kineto" / f"{name}.json.gz")).to_pandas("positions")
        for _, rows in positions.groupby("cycle", sort=True):
            names = rows.sort_values("index")["kernel_name"]
            out.append(np.array([ids.setdefault(signature(k), len(ids)) for k in names], np.int64))
    return out


def _real_pairs(data_dir) -> list[tuple[np.ndarray, np.ndarray]]:
    """Pairs of real cycles of similar length (the rotations of one, the other in its order)."""
    cycles = [c for c in _real_cycles(data_dir) if c.shape[0] >= 5]
    cycles.sort(key=len)
    return [(cycles[k], cycles[k + 1]) for k in range(len(cycles) - 1)]


@pytest.mark.parametrize("seed", range(4))
def test_wavefront_lengths_are_the_bit_parallel_lengths_of_every_rotation(seed):
    for a, b in _random_pairs(seed, 15):
        lengths = [wavefront_length(a, b, r) for r in range(a.shape[0])]
        vocab = int(max(a.max(), b.max())) + 1
        # the host's choice over the kernel's lengths: the first maximum, as best_rotation's
        assert (int(np.argmax(lengths)), max(lengths)) == lcs.best_rotation(a, b, vocab)
        for r in range(a.shape[0]):
            assert lengths[r] == lcs.lcs_table(np.roll(a, -r), b)[-1, -1]


@pytest.mark.parametrize("seed", range(4))
def test_wavefront_table_is_the_cpu_table_and_gives_its_alignment(seed):
    for a, b in _random_pairs(100 + seed, 15):
        rotation, common, rows_a, rows_b = lcs.alignment(a, b)
        table = wavefront_table(a, b, rotation)
        rotated = np.roll(a, -rotation)
        assert np.array_equal(table, lcs.lcs_table(rotated, b))
        assert table[-1, -1] == common
        traced = lcs.backtrack(table, rotated, b)
        assert traced[0].tolist() == rows_a.tolist() and traced[1].tolist() == rows_b.tolist()


def test_wavefront_on_real_cycles(data_dir):
    pairs = _real_pairs(data_dir)
    assert len(pairs) >= 10
    checked = 0
    for a, b in pairs:
        if a.shape[0] * b.shape[0] > 200_000:
            continue  # the 893- and 1,545-kernel steps: the numpy reference is slow, the GPU test takes them
        rotation, common, rows_a, rows_b = lcs.alignment(a, b)
        table = wavefront_table(a, b, rotation)
        assert np.array_equal(table, lcs.lcs_table(np.roll(a, -rotation), b))
        for r in {0, rotation, (rotation + 1) % a.shape[0], a.shape[0] - 1}:
            assert wavefront_length(a, b, r) == lcs.lcs_table(np.roll(a, -r), b)[-1, -1]
        assert wavefront_length(a, b, rotation) == common
        checked += 1
    assert checked >= 10


def test_the_batch_around_the_numpy_schedule_gives_the_cpu_alignments(data_dir):
    # lcs_gpu's host side (jobs, offsets, the choice of rotation, the tables' layout, the backtrack) with
    # the kernels' schedule in their place, reading the batch's arrays as the kernels do
    pairs = _random_pairs(11, 20) + [p for p in _real_pairs(data_dir) if p[0].shape[0] * p[1].shape[0] < 5_000]
    batch = lcs_gpu.Batch.of(pairs)

    def sides(p):
        return (batch.a[batch.a_off[p] : batch.a_off[p] + batch.n[p]],
                batch.b[batch.b_off[p] : batch.b_off[p] + batch.m[p]])  # fmt: skip

    lengths = np.array([wavefront_length(*sides(p), r) for p, r in zip(batch.job_pair, batch.job_rot)], np.int32)
    best, common = batch.best_rotations(lengths)
    tables = np.full(int(batch.t_size.sum()), -1, np.int32)
    for p in range(len(pairs)):
        tables[batch.t_off[p] : batch.t_off[p] + batch.t_size[p]] = wavefront_table(*sides(p), best[p]).ravel()
    assert (tables >= 0).all()  # the layout leaves no gap
    _same_alignments(pairs, batch.alignments(best, common, tables))


# ---- the kernels themselves: where a GPU is


@pytest.fixture(scope="module")
def gpu():
    if not gpu_available():
        pytest.skip("no GPU here (CuPy absent or no CUDA device): the numpy wavefront reference is checked instead")
    return select("gpu")


@pytest.mark.gpu_twin("cuda_kernels/lcs_wavefront.cu::lcs_lengths")
@pytest.mark.gpu_twin("cuda_kernels/lcs_wavefront.cu::lcs_tables")
def test_kernels_align_random_pairs_as_the_cpu_in_one_batch(gpu):
    pairs = _random_pairs(7, 60) + [(np.zeros(0, np.int64), np.arange(3)), (np.arange(3), np.zeros(0, np.int64))]
    _same_alignments(pairs, lcs_gpu.alignments(pairs))


@pytest.mark.gpu_twin("cuda_kernels/lcs_wavefront.cu::lcs_lengths")
@pytest.mark.gpu_twin("cuda_kernels/lcs_wavefront.cu::lcs_tables")
def test_kernels_align_real_cycles_as_the_cpu(gpu, data_dir):
    pairs = _real_pairs(data_dir)
    _same_alignments(pairs, lcs_gpu.alignments(pairs))


def test_compare_all_gives_the_cpu_tables_on_the_gpu(gpu, data_dir, tmp_path):
    from gpuan.outputs.cycles import write_csvs
    from gpuan.trace.cycle_csv import cycle_files, read_cycle_csv

    runs = []
    for name in ("a100_ddp2_rank0_nccl", "v100_ddp_6steps_trace_diff_test"):
        result = gpuan.cycles.analyse(gpuan.load(data_dir / "kineto" / f"{name}.json.gz"))
        write_csvs(result, tmp_path / name)
        runs.append([read_cycle_csv(f) for f in cycle_files(tmp_path / name)])
    for mode in ("align", "match"):
        on_gpu = compare.analyse_runs((runs[0], runs[1]), engine=gpu, mode=mode)
        on_cpu = compare.analyse_runs((runs[0], runs[1]), engine=CPU, mode=mode)
        assert on_gpu["cycles"].num_rows > 0
        for table in ("kernels", "cycles"):
            assert on_gpu[table].equals(on_cpu[table]), (mode, table)


def test_batches_are_cut_where_the_tables_would_not_fit():
    from gpuan.compare.lcs_gpu import groups_within, table_bytes

    rng = np.random.default_rng(5)
    sizes = rng.integers(1, 100, 200)
    for budget in (100, 250, 1000, int(sizes.sum())):
        groups = groups_within(sizes, budget)
        assert [i for g in groups for i in g] == list(range(len(sizes)))  # all, in order, once
        assert all(sizes[g].sum() <= budget for g in groups)
        # greedy: a group closes only when the next size would not fit
        assert all(sizes[g].sum() + sizes[h[0]] > budget for g, h in zip(groups, groups[1:]))
    assert groups_within(sizes, int(sizes.sum())) == [list(range(len(sizes)))]
    assert groups_within(np.zeros(0, np.int64), 10) == []
    assert table_bytes(np.zeros(3), np.zeros(5)) == 4 * 6 * 4
