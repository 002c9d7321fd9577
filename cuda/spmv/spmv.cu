/**
 * @file @brief The seed SpMV (shared/seeds/spmv-csr-shared-prefix-sum.md): each thread of a 32-thread block
 * forms one product a_ij * x_j in shared memory, the block builds an inclusive prefix sum of its 32 products,
 * and a second kernel combines, for each row, the block totals it spans and the two partial prefixes at its
 * ends.
 */
#include "common/params.cuh"

namespace ts {

/// The seed's fixed block: one warp of products per block.
constexpr int kSeedBlock = 32;

}  // namespace ts

/// @brief Kernel 1: products into shared memory, per-block inclusive prefix sum, prefix written to
/// `p.prefix` (all of it: the second kernel reads block ends and row ends, a superset of which is every entry).
extern "C" __global__ void __launch_bounds__(ts::kSeedBlock) spmv_seed_block_prefix_f32(const ts::SpmvParams p) {
  __shared__ float products_tile[ts::kSeedBlock];
  const int i = blockIdx.x * ts::kSeedBlock + threadIdx.x;
  products_tile[threadIdx.x] = i < p.nnz ? p.values[i] * __ldg(p.x + __ldg(p.column_indices + i)) : 0.0f;
  __syncwarp();
  // Hillis-Steele inclusive scan in shared memory (the seed's "prefix sum directly into shared memory").
#pragma unroll
  for (int offset = 1; offset < ts::kSeedBlock; offset *= 2) {
    const float add = threadIdx.x >= offset ? products_tile[threadIdx.x - offset] : 0.0f;
    __syncwarp();
    products_tile[threadIdx.x] += add;
    __syncwarp();
  }
  if (i < p.nnz) p.prefix[i] = products_tile[threadIdx.x];
}

/// @brief Kernel 2: one thread per row, y_i = alpha * (sum of the row's products) + beta * y_i.
///
/// With r0, r1 the row's bounds and blocks of 32: sum the totals (prefix[j + 31]) of the blocks that start
/// in [floor32(r0), floor32(r1)), add the partial prefix prefix[r1 - 1] when r1 is not a block start, and
/// subtract prefix[r0 - 1] when r0 is not one. (The seed's pseudocode reads x[j_ii - 1] and x[j_i - 1]
/// there, which are the neighbouring blocks' totals; NOTES.md explains the correction.)
extern "C" __global__ void spmv_seed_combine_rows_f32(const ts::SpmvParams p) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= p.m) return;
  const int r0 = __ldg(p.row_offsets + row);
  const int r1 = __ldg(p.row_offsets + row + 1);
  float sum = 0.0f;
  if (r1 > r0) {
    const int j_first = r0 & ~(ts::kSeedBlock - 1);
    const int j_last = r1 & ~(ts::kSeedBlock - 1);
    for (int j = j_first; j < j_last; j += ts::kSeedBlock) sum += p.prefix[j + ts::kSeedBlock - 1];
    if (j_last != r1) sum += p.prefix[r1 - 1];
    if (j_first != r0) sum -= p.prefix[r0 - 1];
  }
  // beta == 0 must not read y: y may be uninitialised or hold NaN.
  p.y[row] = p.beta == 0.0f ? p.alpha * sum : p.alpha * sum + p.beta * p.y[row];
}

// The production SpMV (issue 6): compiled into the same fatbin.
#include "spmv/spmv_csr.cu"
