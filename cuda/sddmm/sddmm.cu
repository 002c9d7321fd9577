/**
 * @file @brief SDDMM, the sampled dense-dense product: C = alpha (A B^T) o spy(C) + beta C, with A (m x k) and B
 * (n x k) dense row-major and C (m x n) CSR, each stored entry (i, j) of C the dot product of row i of A with row j
 * of B. It is a sparse layer's weight gradient, dW = (dY X^T) o spy(W), beside the products with W and W^T
 * (Sputnik's CudaSddmm computes the same, with the same operand layouts). Sums in f32 for every storage type.
 *
 * Work split (src/sddmm.rs, `SddmmConfig`): a warp takes kRuns runs of consecutive entries of C in turn, so rows
 * of any length balance (no warp holds a long row alone). A run goes to groups of kLanes lanes, one entry per group at
 * a time, kEntries entries per group. A group's lanes stride over k in vectors of kVector elements, then add their
 * partial sums in a butterfly of shuffles. The warp finds the rows of its first run's first and last entry by binary
 * search over the row pointer (each later run's from the last one's, 32 rows per coalesced load), and each entry's
 * row by a search between those two (zero to a few steps: a run of a few dozen entries spans few rows), so empty
 * rows cost nothing. Where a run lies in one row, each step loads A's vector once for all of a lane's entries.
 *
 * Each stored entry of B's rows is read from L2 once per entry of C that reads it, as in Sputnik's kernel: on
 * uniform random structures cuSPARSE's SDDMM is faster (NOTES.md, SDDMM steps 1-2). The tiled kernel (tiled.cuh),
 * which a plan runs, reads each row of B once per column of a row tile instead (SDDMM step 4).
 */

#include "common/epilogue.cuh"
#include "common/params.cuh"
#include "common/vector.cuh"
#include "tc.cuh"
#include "tiled.cuh"

namespace ts {

/// Threads per block.
constexpr int kSddmmThreads = 256;

/// @brief The row holding entry `e`: the largest r in [lo, hi] with row_offsets[r] <= e (the caller knows the
/// row lies in that range). Empty rows share their start with the next row, so they are never the answer.
__device__ __forceinline__ int sddmm_row_of(const int* __restrict__ row_offsets, int e, int lo, int hi) {
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    if (__ldg(row_offsets + mid) <= e) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

/// @brief The loads of one step of k: each entry's vector of B, and of A (one vector for all entries where kOneRow:
/// the group's entries share a row), zeros for entries past the warp's run.
template <typename T, int kVector, int kEntries, bool kOneRow>
__device__ __forceinline__ void sddmm_load_step(const T* __restrict__ lhs, const T* __restrict__ rhs,
                                                const long long (&lhs_row)[kEntries],
                                                const long long (&rhs_row)[kEntries], const bool (&valid)[kEntries],
                                                int kk, Vec<T, kVector> (&a_fragment)[kEntries],
                                                Vec<T, kVector> (&b_fragment)[kEntries]) {
  if constexpr (kOneRow) {
    a_fragment[0] = load_global<T, kVector>(lhs + lhs_row[0] + kk);
  }
#pragma unroll
  for (int i = 0; i < kEntries; ++i) {
    if (valid[i]) {
      if constexpr (!kOneRow) a_fragment[i] = load_global<T, kVector>(lhs + lhs_row[i] + kk);
      b_fragment[i] = load_global<T, kVector>(rhs + rhs_row[i] + kk);
    } else {
      if constexpr (!kOneRow) a_fragment[i] = zero_vec<T, kVector>();
      b_fragment[i] = zero_vec<T, kVector>();
    }
  }
}

/// @brief Multiplies one step's vectors into the entries' partial sums (f32 fragments).
template <typename T, int kVector, int kEntries, bool kOneRow>
__device__ __forceinline__ void sddmm_fma_step(const Vec<T, kVector> (&a_fragment)[kEntries],
                                               const Vec<T, kVector> (&b_fragment)[kEntries],
                                               float (&sum_fragment)[kEntries]) {
#pragma unroll
  for (int i = 0; i < kEntries; ++i) {
    const Vec<T, kVector>& a = a_fragment[kOneRow ? 0 : i];
#pragma unroll
    for (int j = 0; j < kVector; ++j) {
      sum_fragment[i] = fmaf(to_float(a.v[j]), to_float(b_fragment[i].v[j]), sum_fragment[i]);
    }
  }
}

/// @brief The walk over k for one lane: a step's loads, then its products. (Issuing the next step's loads before
/// this step's products, an unrolled walk, and loads of B that bypass L1 were each measured slower or no faster:
/// NOTES.md, SDDMM step 2.)
template <typename T, int kVector, int kLanes, int kEntries, bool kOneRow>
__device__ __forceinline__ void sddmm_walk_k(const T* __restrict__ lhs, const T* __restrict__ rhs, int k, int slot,
                                             const long long (&lhs_row)[kEntries],
                                             const long long (&rhs_row)[kEntries], const bool (&valid)[kEntries],
                                             float (&sum_fragment)[kEntries]) {
  Vec<T, kVector> a_fragment[kEntries], b_fragment[kEntries];
  for (int kk = slot * kVector; kk < k; kk += kLanes * kVector) {
    sddmm_load_step<T, kVector, kEntries, kOneRow>(lhs, rhs, lhs_row, rhs_row, valid, kk, a_fragment, b_fragment);
    sddmm_fma_step<T, kVector, kEntries, kOneRow>(a_fragment, b_fragment, sum_fragment);
  }
}

/// @brief The row holding entry `e`, at or after row `from` (which holds an entry at or before e): the lanes test 32
/// rows past `from` at once with one coalesced load of the row pointer, where the rows of a few consecutive runs
/// lie; a binary search over the rest beyond those. Warp-uniform: every lane passes the same e and from.
__device__ __forceinline__ int sddmm_row_from(const int* __restrict__ row_offsets, int m, int e, int from) {
  const int lane = threadIdx.x & 31;
  const int r = from + 1 + lane;
  const bool starts_before = r < m && __ldg(row_offsets + r) <= e;
  const unsigned before = __ballot_sync(0xffffffffu, starts_before);
  if (before != 0xffffffffu) return from + __popc(before);
  return sddmm_row_of(row_offsets, e, from + 32, m - 1);
}

/// @brief One run of a warp: entries first..last (at most kGroups x kEntries), in rows row_lo..row_hi.
template <typename T, int kVector, int kLanes, int kEntries>
__device__ __forceinline__ void sddmm_run(const SddmmParams& p, int first, int last, int row_lo, int row_hi) {
  constexpr int kGroups = 32 / kLanes;
  const int lane = threadIdx.x & 31;
  const int group = lane / kLanes;
  const int slot = lane % kLanes;
  const T* __restrict__ lhs = static_cast<const T*>(p.lhs);
  const T* __restrict__ rhs = static_cast<const T*>(p.rhs);
  T* values = static_cast<T*>(p.values);

  // Each entry's row of A and row of B, as element offsets (64-bit: m k and n k may pass 2^31).
  long long lhs_row[kEntries], rhs_row[kEntries];
  bool valid[kEntries];
#pragma unroll
  for (int i = 0; i < kEntries; ++i) {
    const int e = first + i * kGroups + group;
    valid[i] = e <= last;
    const int row = valid[i] ? sddmm_row_of(p.row_offsets, e, row_lo, row_hi) : row_lo;
    const int column = valid[i] ? __ldg(p.column_indices + e) : 0;
    lhs_row[i] = static_cast<long long>(row) * p.k;
    rhs_row[i] = static_cast<long long>(column) * p.k;
  }

  // (kEntries) partial dot products over this lane's stride of k, f32 fragments. Where the run lies in one row
  // (rows of a few dozen entries or more), each step loads A's vector once for all entries.
  float sum_fragment[kEntries];
#pragma unroll
  for (int i = 0; i < kEntries; ++i) sum_fragment[i] = 0.0f;
  if (row_lo == row_hi) {
    sddmm_walk_k<T, kVector, kLanes, kEntries, true>(lhs, rhs, p.k, slot, lhs_row, rhs_row, valid, sum_fragment);
  } else {
    sddmm_walk_k<T, kVector, kLanes, kEntries, false>(lhs, rhs, p.k, slot, lhs_row, rhs_row, valid, sum_fragment);
  }

  // The group's lanes add their partial sums (every lane of the warp takes part: the shuffles are warp-wide).
#pragma unroll
  for (int i = 0; i < kEntries; ++i) {
#pragma unroll
    for (int offset = kLanes / 2; offset > 0; offset /= 2) {
      sum_fragment[i] += __shfl_xor_sync(0xffffffffu, sum_fragment[i], offset);
    }
  }
  if (slot == 0) {
#pragma unroll
    for (int i = 0; i < kEntries; ++i) {
      if (!valid[i]) continue;
      float v[1] = {sum_fragment[i]};
      finish_store<T, 1>(values + first + i * kGroups + group, v, p.alpha, p.beta, false, 0.0f);
    }
  }
}

/// @brief One SDDMM launch (see the file's comment). kVector elements per load (k must be a multiple of it, and
/// A and B aligned to a vector: src/sddmm.rs checks), kLanes lanes per entry (a power of two up to 32), kEntries
/// entries per group in turn, kRuns runs of kGroups x kEntries consecutive entries per warp, one after the other
/// (the first run's rows found by binary search, each later one's from the last's, so the search's latency is paid
/// once per warp).
template <typename T, int kVector, int kLanes, int kEntries, int kRuns>
__device__ __forceinline__ void sddmm_kernel(const SddmmParams& p) {
  static_assert(kLanes >= 1 && kLanes <= 32 && (kLanes & (kLanes - 1)) == 0, "kLanes must be a power of two <= 32");
  static_assert(sizeof(T) * kVector <= 16, "a vector access moves at most 16 bytes");
  constexpr int kRunEntries = 32 / kLanes * kEntries;
  const int lane = threadIdx.x & 31;
  const long long warp = (static_cast<long long>(blockIdx.x) * kSddmmThreads + threadIdx.x) >> 5;
  const long long first_entry = warp * kRunEntries * kRuns;
  if (first_entry >= p.nnz) return;  // warp-uniform
  int first = static_cast<int>(first_entry);
  int last = min(first + kRunEntries, p.nnz) - 1;

  // The rows of the first run's first and last entries, found by lanes 0 and 1 side by side.
  int found = 0;
  if (lane < 2) found = sddmm_row_of(p.row_offsets, lane == 0 ? first : last, 0, p.m - 1);
  int row_lo = __shfl_sync(0xffffffffu, found, 0);
  int row_hi = __shfl_sync(0xffffffffu, found, 1);
  for (int run = 0;;) {
    sddmm_run<T, kVector, kLanes, kEntries>(p, first, last, row_lo, row_hi);
    if (++run == kRuns || last + 1 >= p.nnz) break;
    first = last + 1;
    last = min(first + kRunEntries, p.nnz) - 1;
    row_lo = sddmm_row_from(p.row_offsets, p.m, first, row_hi);
    row_hi = sddmm_row_from(p.row_offsets, p.m, last, row_lo);
  }
}

}  // namespace ts

/// Entries each group of lanes takes in turn (`sddmm::ENTRIES_PER_GROUP` in src/sddmm.rs).
#define TILESPARSE_SDDMM_ENTRIES 4

#define TILESPARSE_SDDMM(NAME, T, VECTOR, LANES, RUNS)                                           \
  extern "C" __global__ void __launch_bounds__(ts::kSddmmThreads) NAME(const ts::SddmmParams p) { \
    ts::sddmm_kernel<T, VECTOR, LANES, TILESPARSE_SDDMM_ENTRIES, RUNS>(p);                       \
  }

#define TILESPARSE_SDDMM_RUNS(DTYPE, T, VECTOR, LANES)                             \
  TILESPARSE_SDDMM(sddmm_##DTYPE##_v##VECTOR##_l##LANES##_r1, T, VECTOR, LANES, 1) \
  TILESPARSE_SDDMM(sddmm_##DTYPE##_v##VECTOR##_l##LANES##_r4, T, VECTOR, LANES, 4)

#define TILESPARSE_SDDMM_LANES(DTYPE, T, VECTOR)  \
  TILESPARSE_SDDMM_RUNS(DTYPE, T, VECTOR, 1)      \
  TILESPARSE_SDDMM_RUNS(DTYPE, T, VECTOR, 2)      \
  TILESPARSE_SDDMM_RUNS(DTYPE, T, VECTOR, 4)      \
  TILESPARSE_SDDMM_RUNS(DTYPE, T, VECTOR, 8)      \
  TILESPARSE_SDDMM_RUNS(DTYPE, T, VECTOR, 16)     \
  TILESPARSE_SDDMM_RUNS(DTYPE, T, VECTOR, 32)

// Every config `SddmmConfig::compiled` lists (src/sddmm.rs): vectors of 1 element up to 16 bytes, 1-32 lanes, 1 or 4
// runs per warp.
TILESPARSE_SDDMM_LANES(f32, float, 1)
TILESPARSE_SDDMM_LANES(f32, float, 2)
TILESPARSE_SDDMM_LANES(f32, float, 4)
TILESPARSE_SDDMM_LANES(f16, __half, 1)
TILESPARSE_SDDMM_LANES(f16, __half, 2)
TILESPARSE_SDDMM_LANES(f16, __half, 4)
TILESPARSE_SDDMM_LANES(f16, __half, 8)
TILESPARSE_SDDMM_LANES(bf16, __nv_bfloat16, 1)
TILESPARSE_SDDMM_LANES(bf16, __nv_bfloat16, 2)
TILESPARSE_SDDMM_LANES(bf16, __nv_bfloat16, 4)
TILESPARSE_SDDMM_LANES(bf16, __nv_bfloat16, 8)

#define TILESPARSE_SDDMM_TILED(DTYPE, T, VECTOR, LANES)                                                    \
  extern "C" __global__ void __launch_bounds__(ts::kSddmmThreads)                                          \
      sddmm_tiled_##DTYPE##_v##VECTOR##_l##LANES(const ts::SddmmTiledParams p) {                           \
    ts::sddmm_tiled_kernel<T, VECTOR, LANES>(p);                                                           \
  }

// The tiled kernels `SddmmPlan` runs (src/sddmm.rs): 16-byte vectors, 4-32 lanes.
TILESPARSE_SDDMM_TILED(f32, float, 4, 4)
TILESPARSE_SDDMM_TILED(f32, float, 4, 8)
TILESPARSE_SDDMM_TILED(f32, float, 4, 16)
TILESPARSE_SDDMM_TILED(f32, float, 4, 32)
TILESPARSE_SDDMM_TILED(f16, __half, 8, 4)
TILESPARSE_SDDMM_TILED(f16, __half, 8, 8)
TILESPARSE_SDDMM_TILED(f16, __half, 8, 16)
TILESPARSE_SDDMM_TILED(f16, __half, 8, 32)
TILESPARSE_SDDMM_TILED(bf16, __nv_bfloat16, 8, 4)
TILESPARSE_SDDMM_TILED(bf16, __nv_bfloat16, 8, 8)
TILESPARSE_SDDMM_TILED(bf16, __nv_bfloat16, 8, 16)
TILESPARSE_SDDMM_TILED(bf16, __nv_bfloat16, 8, 32)

#define TILESPARSE_SDDMM_TC(DTYPE, T)                                                                           \
  extern "C" __global__ void __launch_bounds__(ts::kSddmmTcThreads) sddmm_tc_##DTYPE(const ts::SddmmTcParams p) { \
    ts::sddmm_tc_kernel<T>(p);                                                                                  \
  }

// The tensor-core kernels (tc.cuh) the plans run: dense 64 x 64 tiles of A B^T where C has entries.
TILESPARSE_SDDMM_TC(f32, float)
TILESPARSE_SDDMM_TC(f16, __half)
TILESPARSE_SDDMM_TC(bf16, __nv_bfloat16)
