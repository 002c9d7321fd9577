/**
 * @file @brief Seed kernels 2, 3, 4 and the prefix-sum alternative: one block per row of A, the tile's
 * accumulator and touched bitmap in shared memory, a block-strided walk over the row's entries of A. The
 * kernels differ only in how a finished tile is written back (`WriteBack`), so each ladder step is one branch.
 */
#pragma once

#include "spgemm/spgemm_params.cuh"
#include "spgemm/tile_utils.cuh"

namespace ts {

/// @brief How a finished tile reaches the COO output: the ladder's steps.
enum class WriteBack {
  kPerEntryAtomic,  // kernel 2: one global atomic per entry
  kSharedCount,     // kernel 3: count with shared atomics, one global atomic per tile, shared write offset
  kWarpCount,       // kernel 4: first touches counted per thread while accumulating, warp-reduced
  kPrefixSum,       // kp: exclusive scan of the touched words gives each entry its position, no shared atomics
};

/// @brief Adds the products of A's entries [a_begin, a_end) (one row) with B into the tile of output
/// columns [tile_start, tile_start + kTile), block-strided over A's entries. Returns how many columns this
/// thread touched first (exact: taken from the touched bit's previous value, not from the float).
template <int kTile>
__device__ __forceinline__ int accumulate_tile(const SpgemmParams& p, int a_begin, int a_end, int tile_start,
                                               float* acc_tile, unsigned* touched_tile) {
  const int* __restrict__ a_column_indices = p.a_column_indices;
  const float* __restrict__ a_values = p.a_values;
  const int* __restrict__ b_row_offsets = p.b_row_offsets;
  const int* __restrict__ b_column_indices = p.b_column_indices;
  const float* __restrict__ b_values = p.b_values;
  int first_touches_fragment = 0;
  for (int i = a_begin + threadIdx.x; i < a_end; i += blockDim.x) {
    const int j = __ldg(a_column_indices + i);
    const float a_value = __ldg(a_values + i);
    const int b_end = __ldg(b_row_offsets + j + 1);
    for (int q = __ldg(b_row_offsets + j); q < b_end; ++q) {
      const int c = __ldg(b_column_indices + q) - tile_start;
      if (c >= 0 && c < kTile) {
        atomicAdd(acc_tile + c, a_value * __ldg(b_values + q));
        first_touches_fragment += touch_column(touched_tile, c);
      }
    }
  }
  return first_touches_fragment;
}

/// @brief Writes one output entry at `pos` (dropped past the capacity, which the host bound makes
/// unreachable) and clears its accumulator slot.
__device__ __forceinline__ void emit_entry(const SpgemmParams& p, int pos, int row, int column, float* acc_slot) {
  if (pos < p.capacity) {
    p.out_rows[pos] = row;
    p.out_columns[pos] = column;
    p.out_values[pos] = *acc_slot;
  }
  *acc_slot = 0.0f;
}

/// @brief The block-per-row kernel body: for each tile of kTile output columns, accumulate, then write back
/// the touched columns as `kMode` says. Launched with kBlock threads and one block per row of A.
template <int kBlock, int kTile, WriteBack kMode>
__device__ __forceinline__ void spgemm_block_per_row(const SpgemmParams& p) {
  static_assert(kTile % 32 == 0, "the tile must be whole 32-column words of the touched bitmap");
  static_assert(kBlock % 32 == 0, "the block must be whole warps (warp reductions and scans)");
  static_assert(kTile * 4 + kTile / 8 + 160 <= 48 * 1024, "static shared memory must stay within 48 KB");
  constexpr int kWords = kTile / 32;
  __shared__ float acc_tile[kTile];
  __shared__ unsigned touched_tile[kWords];
  __shared__ int word_offsets_tile[kMode == WriteBack::kPrefixSum ? kWords : 1];
  __shared__ int warp_totals_tile[32];
  __shared__ int tile_count;
  __shared__ int tile_global_start;
  __shared__ int tile_write_offset;

  const int row = blockIdx.x;
  const int a_begin = __ldg(p.a_row_offsets + row);
  const int a_end = __ldg(p.a_row_offsets + row + 1);
  if (a_begin == a_end) return;  // block-uniform: an empty row has no output
  for (int c = threadIdx.x; c < kTile; c += kBlock) acc_tile[c] = 0.0f;
  zero_block(touched_tile, kWords);
  if (threadIdx.x == 0) tile_count = 0;
  __syncthreads();

  for (int tile_start = 0; tile_start < p.n; tile_start += kTile) {
    const int first_touches_fragment = accumulate_tile<kTile>(p, a_begin, a_end, tile_start, acc_tile, touched_tile);
    if constexpr (kMode == WriteBack::kWarpCount) {
      const int warp_count = __reduce_add_sync(kFullWarp, first_touches_fragment);
      if ((threadIdx.x & 31) == 0 && warp_count > 0) atomicAdd(&tile_count, warp_count);
    }
    __syncthreads();

    if constexpr (kMode == WriteBack::kPerEntryAtomic) {
      for (int c = threadIdx.x; c < kTile; c += kBlock) {
        if (is_touched(touched_tile, c)) emit_entry(p, atomicAdd(p.out_count, 1), row, tile_start + c, acc_tile + c);
      }
    } else if constexpr (kMode == WriteBack::kSharedCount || kMode == WriteBack::kWarpCount) {
      if constexpr (kMode == WriteBack::kSharedCount) {
        for (int c = threadIdx.x; c < kTile; c += kBlock) {
          if (is_touched(touched_tile, c)) atomicAdd(&tile_count, 1);
        }
        __syncthreads();
      }
      if (threadIdx.x == 0) {
        tile_global_start = atomicAdd(p.out_count, tile_count);
        tile_write_offset = 0;
      }
      __syncthreads();
      if (tile_count > 0) {
        for (int c = threadIdx.x; c < kTile; c += kBlock) {
          if (is_touched(touched_tile, c)) {
            emit_entry(p, tile_global_start + atomicAdd(&tile_write_offset, 1), row, tile_start + c, acc_tile + c);
          }
        }
      }
    } else {
      // Each thread owns kWordsPerThread consecutive words; their popcounts are scanned across the block.
      constexpr int kWordsPerThread = (kWords + kBlock - 1) / kBlock;
      const int w0 = min(threadIdx.x * kWordsPerThread, kWords);
      const int w1 = min(w0 + kWordsPerThread, kWords);
      int count_fragment = 0;
      for (int w = w0; w < w1; ++w) count_fragment += __popc(touched_tile[w]);
      int offset_fragment = block_exclusive_scan<kBlock>(count_fragment, warp_totals_tile, &tile_count);
      for (int w = w0; w < w1; ++w) {
        word_offsets_tile[w] = offset_fragment;
        offset_fragment += __popc(touched_tile[w]);
      }
      if (threadIdx.x == 0) tile_global_start = atomicAdd(p.out_count, tile_count);
      __syncthreads();
      if (tile_count > 0) {
        for (int c = threadIdx.x; c < kTile; c += kBlock) {
          const unsigned word = touched_tile[c >> 5];
          const unsigned bit = 1u << (c & 31);
          if (word & bit) {
            const int pos = tile_global_start + word_offsets_tile[c >> 5] + __popc(word & (bit - 1u));
            emit_entry(p, pos, row, tile_start + c, acc_tile + c);
          }
        }
      }
    }
    __syncthreads();
    zero_block(touched_tile, kWords);
    if (threadIdx.x == 0) tile_count = 0;
    __syncthreads();
  }
}

}  // namespace ts
