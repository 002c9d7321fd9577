/**
 * @file @brief SDDMM, the sampled dense-dense product: C = alpha (A B^T) o spy(C) + beta C, with A (m x k) and B
 * (n x k) dense row-major and C (m x n) CSR, each stored entry (i, j) of C the dot product of row i of A with row j
 * of B. It is a sparse layer's weight gradient, dW = (dY X^T) o spy(W), beside the products with W and W^T
 * (Sputnik's CudaSddmm computes the same, with the same operand layouts). Sums in f32 for every storage type.
 *
 * Work split (src/sddmm.rs, `SddmmConfig`): a warp takes a run of consecutive entries of C, so rows of any
 * length balance (no warp holds a long row alone), in groups of kLanes lanes, one entry per group at a time, kEntries
 * entries per group. A group's lanes stride over k in vectors of kVector elements, then add their partial sums in
 * a butterfly of shuffles. The warp finds the rows of its first and last entry by binary search over the row
 * pointer, and each entry's row by a search between those two (zero to a few steps: a run of a few dozen entries
 * spans few rows), so empty rows cost nothing.
 */

#include "common/epilogue.cuh"
#include "common/params.cuh"
#include "common/vector.cuh"

namespace ts {

/// Entries each group of lanes takes in turn: their loads are issued together, so a lane has that many B rows in
/// flight.
constexpr int kSddmmEntries = 4;
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

/// @brief One SDDMM launch (see the file's comment). kVector elements per load (k must be a multiple of it, and
/// A and B aligned to a vector: src/sddmm.rs checks), kLanes lanes per entry (a power of two up to 32).
template <typename T, int kVector, int kLanes>
__device__ __forceinline__ void sddmm_kernel(const SddmmParams& p) {
  static_assert(kLanes >= 1 && kLanes <= 32 && (kLanes & (kLanes - 1)) == 0, "kLanes must be a power of two <= 32");
  static_assert(sizeof(T) * kVector <= 16, "a vector access moves at most 16 bytes");
  constexpr int kGroups = 32 / kLanes;
  constexpr int kWarpEntries = kGroups * kSddmmEntries;
  const int lane = threadIdx.x & 31;
  const long long warp = (static_cast<long long>(blockIdx.x) * kSddmmThreads + threadIdx.x) >> 5;
  const long long first_entry = warp * kWarpEntries;
  if (first_entry >= p.nnz) return;  // warp-uniform
  const int first = static_cast<int>(first_entry);
  const int last = min(first + kWarpEntries, p.nnz) - 1;

  // The rows of the warp's first and last entries, found by lanes 0 and 1 side by side.
  int found = 0;
  if (lane < 2) found = sddmm_row_of(p.row_offsets, lane == 0 ? first : last, 0, p.m - 1);
  const int row_lo = __shfl_sync(0xffffffffu, found, 0);
  const int row_hi = __shfl_sync(0xffffffffu, found, 1);

  const int group = lane / kLanes;
  const int slot = lane % kLanes;
  const T* __restrict__ lhs = static_cast<const T*>(p.lhs);
  const T* __restrict__ rhs = static_cast<const T*>(p.rhs);
  T* values = static_cast<T*>(p.values);

  // Each entry's row of A and row of B, as element offsets (64-bit: m k and n k may pass 2^31).
  long long lhs_row[kSddmmEntries], rhs_row[kSddmmEntries];
  bool valid[kSddmmEntries];
#pragma unroll
  for (int i = 0; i < kSddmmEntries; ++i) {
    const int e = first + i * kGroups + group;
    valid[i] = e <= last;
    const int row = valid[i] ? sddmm_row_of(p.row_offsets, e, row_lo, row_hi) : row_lo;
    const int column = valid[i] ? __ldg(p.column_indices + e) : 0;
    lhs_row[i] = static_cast<long long>(row) * p.k;
    rhs_row[i] = static_cast<long long>(column) * p.k;
  }

  // (kSddmmEntries) partial dot products over this lane's stride of k, f32 fragments.
  float sum_fragment[kSddmmEntries];
#pragma unroll
  for (int i = 0; i < kSddmmEntries; ++i) sum_fragment[i] = 0.0f;
  for (int kk = slot * kVector; kk < p.k; kk += kLanes * kVector) {
    Vec<T, kVector> a[kSddmmEntries], b[kSddmmEntries];
#pragma unroll
    for (int i = 0; i < kSddmmEntries; ++i) {
      if (valid[i]) {
        a[i] = load_global<T, kVector>(lhs + lhs_row[i] + kk);
        b[i] = load_global<T, kVector>(rhs + rhs_row[i] + kk);
      } else {
        a[i] = zero_vec<T, kVector>();
        b[i] = zero_vec<T, kVector>();
      }
    }
#pragma unroll
    for (int i = 0; i < kSddmmEntries; ++i) {
#pragma unroll
      for (int j = 0; j < kVector; ++j) sum_fragment[i] = fmaf(to_float(a[i].v[j]), to_float(b[i].v[j]), sum_fragment[i]);
    }
  }

  // The group's lanes add their partial sums (every lane of the warp takes part: the shuffles are warp-wide).
#pragma unroll
  for (int i = 0; i < kSddmmEntries; ++i) {
#pragma unroll
    for (int offset = kLanes / 2; offset > 0; offset /= 2) {
      sum_fragment[i] += __shfl_xor_sync(0xffffffffu, sum_fragment[i], offset);
    }
  }
  if (slot == 0) {
#pragma unroll
    for (int i = 0; i < kSddmmEntries; ++i) {
      if (!valid[i]) continue;
      float v[1] = {sum_fragment[i]};
      finish_store<T, 1>(values + first + i * kGroups + group, v, p.alpha, p.beta, false, 0.0f);
    }
  }
}

}  // namespace ts

#define TILESPARSE_SDDMM(NAME, T, VECTOR, LANES)                                               \
  extern "C" __global__ void __launch_bounds__(ts::kSddmmThreads) NAME(const ts::SddmmParams p) { \
    ts::sddmm_kernel<T, VECTOR, LANES>(p);                                                     \
  }

#define TILESPARSE_SDDMM_LANES(DTYPE, T, VECTOR)                     \
  TILESPARSE_SDDMM(sddmm_##DTYPE##_v##VECTOR##_l1, T, VECTOR, 1)     \
  TILESPARSE_SDDMM(sddmm_##DTYPE##_v##VECTOR##_l2, T, VECTOR, 2)     \
  TILESPARSE_SDDMM(sddmm_##DTYPE##_v##VECTOR##_l4, T, VECTOR, 4)     \
  TILESPARSE_SDDMM(sddmm_##DTYPE##_v##VECTOR##_l8, T, VECTOR, 8)     \
  TILESPARSE_SDDMM(sddmm_##DTYPE##_v##VECTOR##_l16, T, VECTOR, 16)   \
  TILESPARSE_SDDMM(sddmm_##DTYPE##_v##VECTOR##_l32, T, VECTOR, 32)

// Every config `SddmmConfig::compiled` lists (src/sddmm.rs): vectors of 1 element up to 16 bytes, 1-32 lanes.
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
