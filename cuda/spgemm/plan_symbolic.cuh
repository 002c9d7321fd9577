/**
 * @file @brief The production SpGEMM's symbolic phase: nnz of each row of C = A * B from the structures alone.
 * Hash bins insert every product's column into a shared-memory table and count first insertions; the dense
 * bin sets bits of a per-tile bitmap and counts them per (row, column tile).
 */
#pragma once

#include "spgemm/hash_table.cuh"
#include "spgemm/plan_common.cuh"

namespace ts {

/// @brief One row per group of kThreads lanes, kBlock / kThreads rows per block, a table of kSlots keys per
/// row. Writes c_row_offsets[row] = nnz of the row.
template <int kThreads, int kBlock, int kSlots>
__device__ __forceinline__ void symbolic_group(const SpgemmPlanParams& p, int bin_begin, int bin_size) {
  static_assert(kThreads <= 32 && 32 % kThreads == 0, "a group lies within one warp");
  constexpr int kRows = kBlock / kThreads;
  int* keys_tile = dynamic_smem<int>();  // (kRows, kSlots)
  for (int i = threadIdx.x; i < kRows * kSlots; i += kBlock) keys_tile[i] = kEmptyKey;
  __syncthreads();
  const int group = threadIdx.x / kThreads;
  const int lane = threadIdx.x % kThreads;
  const int item = blockIdx.x * kRows + group;
  int* row_keys_tile = keys_tile + group * kSlots;
  int row = -1;
  int count_fragment = 0;
  if (item < bin_size) {
    row = p.bin_rows[bin_begin + item];
    for_each_product_group<kThreads>(p, row, 0, p.n, [&](int, int b) {
      count_fragment += insert_key<kSlots>(row_keys_tile, __ldg(p.b_column_indices + b));
    });
  }
  const int count = group_sum<kThreads>(count_fragment);
  if (row >= 0 && lane == 0) p.c_row_offsets[row] = count;
}

/// @brief One row per block of kBlock threads, a table of kSlots keys.
template <int kBlock, int kSlots>
__device__ __forceinline__ void symbolic_block(const SpgemmPlanParams& p, int bin_begin) {
  __shared__ int warp_tile[32];
  __shared__ int inclusive_tile[kBlock];
  __shared__ int start_tile[kBlock];
  __shared__ int total_tile;
  int* keys_tile = dynamic_smem<int>();  // (kSlots)
  for (int i = threadIdx.x; i < kSlots; i += kBlock) keys_tile[i] = kEmptyKey;
  __syncthreads();
  const int row = p.bin_rows[bin_begin + blockIdx.x];
  int count_fragment = 0;
  for_each_product_block<kBlock>(p, row, 0, p.n, inclusive_tile, start_tile, warp_tile, &total_tile, [&](int, int b) {
    count_fragment += insert_key<kSlots>(keys_tile, __ldg(p.b_column_indices + b));
  });
  const int count = block_sum<kBlock>(count_fragment, warp_tile);
  if (threadIdx.x == 0) p.c_row_offsets[row] = count;
}

/// @brief A hash bin's symbolic kernel body: groups when kThreads < kBlock, else a block per row.
template <int kThreads, int kBlock, int kSlots>
__device__ __forceinline__ void symbolic_bin(const SpgemmPlanParams& p, int bin_begin, int bin_size) {
  if constexpr (kThreads < kBlock) {
    symbolic_group<kThreads, kBlock, kSlots>(p, bin_begin, bin_size);
  } else {
    symbolic_block<kBlock, kSlots>(p, bin_begin);
  }
}

}  // namespace ts

/// @brief The dense bin, symbolic: block (x, y) takes row bin_rows[bin_begin + x] and column tiles y, y +
/// gridDim.y, ...; sets a bit per product's column in the tile's bitmap, writes the tile's count to
/// tile_counts[x][tile] and adds it to c_row_offsets[row] (zeroed by the count kernel). Block y = 0 also
/// records x, the row's slot in tile_counts, in row_products[row] for the numeric kernel.
extern "C" __global__ void __launch_bounds__(ts::kDenseBlock) spgemm_symbolic_dense(const ts::SpgemmPlanParams p,
                                                                                  int bin_begin) {
  __shared__ unsigned bits_tile[ts::kDenseTile / 32];
  __shared__ int warp_tile[32];
  __shared__ int inclusive_tile[ts::kDenseBlock];
  __shared__ int start_tile[ts::kDenseBlock];
  __shared__ int total_tile;
  const int slot = blockIdx.x;
  const int row = p.bin_rows[bin_begin + slot];
  for (int tile = blockIdx.y; tile < p.tiles; tile += gridDim.y) {
    const int lo = tile * ts::kDenseTile;
    const int hi = min(lo + ts::kDenseTile, p.n);  // lo < n, so no overflow
    bits_tile[threadIdx.x] = 0u;
    __syncthreads();
    ts::for_each_product_block<ts::kDenseBlock>(p, row, lo, hi, inclusive_tile, start_tile, warp_tile, &total_tile,
                                                [&](int, int b) {
                                                  const int c = __ldg(p.b_column_indices + b) - lo;
                                                  atomicOr(bits_tile + (c >> 5), 1u << (c & 31));
                                                });
    const int count = ts::block_sum<ts::kDenseBlock>(__popc(bits_tile[threadIdx.x]), warp_tile);
    if (threadIdx.x == 0) {
      p.tile_counts[static_cast<long long>(slot) * p.tiles + tile] = count;
      if (count > 0) atomicAdd(p.c_row_offsets + row, count);
    }
    __syncthreads();  // the bitmap is cleared for the next tile
  }
  if (blockIdx.y == 0 && threadIdx.x == 0) p.row_products[row] = slot;
}
