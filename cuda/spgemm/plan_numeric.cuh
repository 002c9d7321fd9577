/**
 * @file @brief The production SpGEMM's numeric phase: C's column indices (ascending) and values, into the row
 * pointer the symbolic phase made. Hash bins accumulate a row in a shared-memory table, compact it and sort it
 * (rank counting within a group, a bitonic network within a block); the dense bin accumulates each column tile
 * densely and writes the touched columns in bitmap order, already sorted.
 *
 * A plan reused on operands whose pattern differs from the plan's could overfill a table or produce a row of
 * another length: the kernels then write nothing for that row and raise a flag (kFlag*), which the host turns
 * into an error. They never write outside the row's range of C.
 */
#pragma once

#include <climits>

#include "spgemm/hash_table.cuh"
#include "spgemm/plan_common.cuh"

namespace ts {

/// @brief One row per group of kThreads lanes, kBlock / kThreads rows per block, a table of kSlots keys and
/// values per row.
template <int kThreads, int kBlock, int kSlots>
__device__ __forceinline__ void numeric_group(const SpgemmPlanParams& p, int bin_begin, int bin_size) {
  static_assert(kThreads <= 32 && 32 % kThreads == 0, "a group lies within one warp");
  static_assert(kSlots % kThreads == 0, "each lane compacts whole slots");
  constexpr int kRows = kBlock / kThreads;
  constexpr int kPerLane = kSlots / kThreads;
  int* keys_tile = dynamic_smem<int>();                                     // (kRows, kSlots)
  float* values_tile = reinterpret_cast<float*>(keys_tile + kRows * kSlots);  // (kRows, kSlots)
  for (int i = threadIdx.x; i < kRows * kSlots; i += kBlock) {
    keys_tile[i] = kEmptyKey;
    values_tile[i] = 0.0f;
  }
  __syncthreads();
  const int group = threadIdx.x / kThreads;
  const int lane = threadIdx.x % kThreads;
  const int item = blockIdx.x * kRows + group;
  int* row_keys_tile = keys_tile + group * kSlots;
  float* row_values_tile = values_tile + group * kSlots;
  int row = -1;
  bool stored = true;
  if (item < bin_size) {
    row = p.bin_rows[bin_begin + item];
    for_each_product_group<kThreads>(p, row, 0, p.n, [&](int a, int b) {
      stored &= insert_add<kSlots>(row_keys_tile, row_values_tile, __ldg(p.b_column_indices + b),
                                   __ldg(p.a_values + a) * __ldg(p.b_values + b));
    });
  }
  __syncwarp();
  // Compact the occupied slots to the front of the row's table, in slot order: each lane owns kPerLane
  // consecutive slots, read into registers before any lane writes.
  int keys_fragment[kPerLane];
  float values_fragment[kPerLane];
  int count_fragment = 0;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    keys_fragment[i] = row_keys_tile[lane * kPerLane + i];
    values_fragment[i] = row_values_tile[lane * kPerLane + i];
    count_fragment += keys_fragment[i] != kEmptyKey;
  }
  int count;
  int position = group_exclusive_scan<kThreads>(count_fragment, &count);
  __syncwarp();
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    if (keys_fragment[i] != kEmptyKey) {
      row_keys_tile[position] = keys_fragment[i];
      row_values_tile[position] = values_fragment[i];
      ++position;
    }
  }
  __syncwarp();
  if (row < 0) return;
  if (!stored) atomicOr(p.counters + kCounterFlags, kFlagTableFull);
  const int start = p.c_row_offsets[row];
  const int nnz = p.c_row_offsets[row + 1] - start;
  if (count != nnz) {
    if (lane == 0) atomicOr(p.counters + kCounterFlags, kFlagRowCount);
    return;
  }
  // Each entry's place in the row is the number of smaller columns (columns are unique). Measured against a
  // bitonic network within the group on the H100 (NOTES.md, SpGEMM step 5): this rank count is faster up to the
  // group bins' 256 entries (one broadcast shared load per comparison, no barriers).
  for (int e = lane; e < nnz; e += kThreads) {
    const int key = row_keys_tile[e];
    int rank = 0;
    for (int f = 0; f < nnz; ++f) rank += row_keys_tile[f] < key;
    p.c_column_indices[start + rank] = key;
    p.c_values[start + rank] = row_values_tile[e];
  }
}

/// @brief One row per block of kBlock threads, a table of kSlots keys and values.
template <int kBlock, int kSlots>
__device__ __forceinline__ void numeric_block(const SpgemmPlanParams& p, int bin_begin) {
  static_assert(kSlots % kBlock == 0, "each thread compacts whole slots");
  constexpr int kPerThread = kSlots / kBlock;
  __shared__ int warp_totals_tile[32];
  __shared__ int inclusive_tile[kBlock];
  __shared__ int start_tile[kBlock];
  __shared__ int count_tile;
  int* keys_tile = dynamic_smem<int>();                              // (kSlots)
  float* values_tile = reinterpret_cast<float*>(keys_tile + kSlots);  // (kSlots)
  for (int i = threadIdx.x; i < kSlots; i += kBlock) {
    keys_tile[i] = kEmptyKey;
    values_tile[i] = 0.0f;
  }
  __syncthreads();
  const int row = p.bin_rows[bin_begin + blockIdx.x];
  bool stored = true;
  for_each_product_block<kBlock>(p, row, 0, p.n, inclusive_tile, start_tile, warp_totals_tile, &count_tile,
                                 [&](int a, int b) {
                                   stored &= insert_add<kSlots>(keys_tile, values_tile, __ldg(p.b_column_indices + b),
                                                                __ldg(p.a_values + a) * __ldg(p.b_values + b));
                                 });
  const bool full = __syncthreads_or(!stored);
  int keys_fragment[kPerThread];
  float values_fragment[kPerThread];
  int count_fragment = 0;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    keys_fragment[i] = keys_tile[threadIdx.x * kPerThread + i];
    values_fragment[i] = values_tile[threadIdx.x * kPerThread + i];
    count_fragment += keys_fragment[i] != kEmptyKey;
  }
  // The scan's barriers order every read above before the writes below.
  int position = block_exclusive_scan<kBlock>(count_fragment, warp_totals_tile, &count_tile);
  const int count = count_tile;
  const int start = p.c_row_offsets[row];
  const int nnz = p.c_row_offsets[row + 1] - start;
  if (full || count != nnz) {
    if (threadIdx.x == 0) atomicOr(p.counters + kCounterFlags, full ? kFlagTableFull : kFlagRowCount);
    return;  // block-uniform
  }
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    if (keys_fragment[i] != kEmptyKey) {
      keys_tile[position] = keys_fragment[i];
      values_tile[position] = values_fragment[i];
      ++position;
    }
  }
  int padded = 1;
  while (padded < nnz) padded *= 2;  // <= kSlots: the bin's bound is kSlots / 2
  for (int i = nnz + threadIdx.x; i < padded; i += kBlock) keys_tile[i] = INT_MAX;  // columns are < INT_MAX
  __syncthreads();
  bitonic_sort<kBlock>(keys_tile, values_tile, padded);
  for (int i = threadIdx.x; i < nnz; i += kBlock) {
    p.c_column_indices[start + i] = keys_tile[i];
    p.c_values[start + i] = values_tile[i];
  }
}

/// @brief A hash bin's numeric kernel body: groups when kThreads < kBlock, else a block per row.
template <int kThreads, int kBlock, int kSlots>
__device__ __forceinline__ void numeric_bin(const SpgemmPlanParams& p, int bin_begin, int bin_size) {
  if constexpr (kThreads < kBlock) {
    numeric_group<kThreads, kBlock, kSlots>(p, bin_begin, bin_size);
  } else {
    numeric_block<kBlock, kSlots>(p, bin_begin);
  }
}

}  // namespace ts

/// @brief The dense bin, numeric: block (x, y) takes row bin_rows[bin_begin + x] and column tiles y, y +
/// gridDim.y, ...; accumulates the tile's products in a dense shared array with a touched bitmap, then writes
/// the touched columns in order at the tile's offset in the row (the row start plus the plan's counts of the
/// tiles before it). Dynamic shared memory: kDenseTile floats, then kDenseTile / 32 words.
extern "C" __global__ void __launch_bounds__(ts::kDenseBlock) spgemm_numeric_dense(const ts::SpgemmPlanParams p,
                                                                                 int bin_begin) {
  __shared__ int warp_totals_tile[32];
  __shared__ int inclusive_tile[ts::kDenseBlock];
  __shared__ int start_tile[ts::kDenseBlock];
  __shared__ int count_tile;
  float* values_tile = ts::dynamic_smem<float>();                                    // (kDenseTile)
  unsigned* bits_tile = reinterpret_cast<unsigned*>(values_tile + ts::kDenseTile);  // (kDenseTile / 32)
  const int row = p.bin_rows[bin_begin + blockIdx.x];
  const long long slot = p.row_products[row];  // the row's slot in tile_counts (symbolic dense kernel)
  const int* tile_counts = p.tile_counts + slot * p.tiles;
  const int row_start = p.c_row_offsets[row];
  for (int tile = blockIdx.y; tile < p.tiles; tile += gridDim.y) {
    const int planned = tile_counts[tile];
    if (planned == 0) continue;  // block-uniform
    int before_fragment = 0;
    for (int t = threadIdx.x; t < tile; t += ts::kDenseBlock) before_fragment += tile_counts[t];
    const int before = ts::block_sum<ts::kDenseBlock>(before_fragment, warp_totals_tile);
    const int lo = tile * ts::kDenseTile;
    const int hi = min(lo + ts::kDenseTile, p.n);
    for (int c = threadIdx.x; c < ts::kDenseTile; c += ts::kDenseBlock) values_tile[c] = 0.0f;
    bits_tile[threadIdx.x] = 0u;
    __syncthreads();
    ts::for_each_product_block<ts::kDenseBlock>(p, row, lo, hi, inclusive_tile, start_tile, warp_totals_tile,
                                                &count_tile, [&](int a, int b) {
                                                  const int c = __ldg(p.b_column_indices + b) - lo;
                                                  atomicOr(bits_tile + (c >> 5), 1u << (c & 31));
                                                  atomicAdd(values_tile + c, __ldg(p.a_values + a) * __ldg(p.b_values + b));
                                                });
    unsigned word = bits_tile[threadIdx.x];
    int position = ts::block_exclusive_scan<ts::kDenseBlock>(__popc(word), warp_totals_tile, &count_tile);
    if (count_tile != planned) {
      if (threadIdx.x == 0) atomicOr(p.counters + ts::kCounterFlags, ts::kFlagTileCount);
    } else {
      position += row_start + before;
      while (word != 0u) {
        const int bit = __ffs(word) - 1;
        word &= word - 1u;
        const int c = threadIdx.x * 32 + bit;
        p.c_column_indices[position] = lo + c;
        p.c_values[position] = values_tile[c];
        ++position;
      }
    }
    __syncthreads();  // the tile is cleared for the next one
  }
}
