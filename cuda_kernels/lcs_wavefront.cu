// Longest common subsequence of kernel-signature sequences as an anti-diagonal wavefront, for
// `gpuan compare` (loaded by gpuan/compare/lcs_gpu.py with cupy.RawModule; CPU twin: gpuan/compare/lcs.py).
//
// The DP table t[i][j] (LCS length of the rotated baseline's first i ids and the new cycle's first j)
// is filled one anti-diagonal d = i + j at a time: every cell of a diagonal depends only on the two
// diagonals before it, so a block computes all cells of a diagonal in parallel, then synchronises.
//
//   t[i][j] = a[(i - 1 + rot) % n] == b[j - 1] ? t[i - 1][j - 1] + 1 : max(t[i - 1][j], t[i][j - 1])
//
// lcs_lengths: one block per (pair, rotation) job; only the last three diagonals are kept, in shared
//   memory, indexed by i (3 * (n + 1) ints of dynamic shared memory; n is the pair's baseline length).
//   Index 0 and index d (the table's border) are never written, so they stay 0.
// lcs_tables:  one block per pair, the chosen rotation; writes the whole (n + 1) x (m + 1) table
//   (row-major, at the pair's offset) for the host to trace the alignment back, exactly as the CPU does.
//
// The batch is all pairs of a `compare --all` run at once: sequences are concatenated, each pair names
// its offsets and lengths. Lengths are int32 (cycles hold thousands of kernels, far below 2^31).

// The index in a of row i (1-based, as the table's) of a rotated by rot: (i - 1 + rot) % n without a division.
__device__ __forceinline__ int rotated_row(int i, int rot, int n) {
    const int ai = i - 1 + rot;
    return ai >= n ? ai - n : ai;
}

extern "C" __global__ void lcs_lengths(const int* __restrict__ a_all, const long long* __restrict__ a_off,
                                       const int* __restrict__ a_len, const int* __restrict__ b_all,
                                       const long long* __restrict__ b_off, const int* __restrict__ b_len,
                                       const int* __restrict__ job_pair, const int* __restrict__ job_rot,
                                       int* __restrict__ lengths) {
    extern __shared__ int diagonals[];
    const int job = blockIdx.x;
    const int p = job_pair[job];
    const int rot = job_rot[job];
    const int n = a_len[p];
    const int m = b_len[p];
    const int* a = a_all + a_off[p];
    const int* b = b_all + b_off[p];
    int* prev2 = diagonals;          // diagonal d - 2
    int* prev1 = diagonals + n + 1;  // diagonal d - 1
    int* cur = diagonals + 2 * (n + 1);
    for (int k = threadIdx.x; k < 3 * (n + 1); k += blockDim.x) {
        diagonals[k] = 0;
    }
    __syncthreads();
    for (int d = 2; d <= n + m; ++d) {
        const int lo = max(1, d - m);
        const int hi = min(n, d - 1);
        for (int i = lo + threadIdx.x; i <= hi; i += blockDim.x) {
            const int j = d - i;
            const int ai = rotated_row(i, rot, n);
            cur[i] = a[ai] == b[j - 1] ? prev2[i - 1] + 1 : max(prev1[i - 1], prev1[i]);
        }
        __syncthreads();
        int* spare = prev2;
        prev2 = prev1;
        prev1 = cur;
        cur = spare;
    }
    if (threadIdx.x == 0) {
        lengths[job] = (n == 0 || m == 0) ? 0 : prev1[n];
    }
}

extern "C" __global__ void lcs_tables(const int* __restrict__ a_all, const long long* __restrict__ a_off,
                                      const int* __restrict__ a_len, const int* __restrict__ b_all,
                                      const long long* __restrict__ b_off, const int* __restrict__ b_len,
                                      const int* __restrict__ rotation, const long long* __restrict__ t_off,
                                      int* __restrict__ tables) {
    const int p = blockIdx.x;
    const int rot = rotation[p];
    const int n = a_len[p];
    const int m = b_len[p];
    const int* a = a_all + a_off[p];
    const int* b = b_all + b_off[p];
    int* t = tables + t_off[p];
    const long long w = m + 1;  // row stride
    for (int j = threadIdx.x; j <= m; j += blockDim.x) {
        t[j] = 0;
    }
    for (int i = threadIdx.x; i <= n; i += blockDim.x) {
        t[i * w] = 0;
    }
    __syncthreads();
    for (int d = 2; d <= n + m; ++d) {
        const int lo = max(1, d - m);
        const int hi = min(n, d - 1);
        for (int i = lo + threadIdx.x; i <= hi; i += blockDim.x) {
            const int j = d - i;
            const int ai = rotated_row(i, rot, n);
            t[i * w + j] = a[ai] == b[j - 1] ? t[(i - 1) * w + j - 1] + 1 : max(t[(i - 1) * w + j], t[i * w + j - 1]);
        }
        __syncthreads();
    }
}
