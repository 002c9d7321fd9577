/**
 * @file @brief Helpers shared by the block-per-row SpGEMM kernels and the COO -> CSR conversion: the per-tile
 * touched bitmap (one bit per output column of the tile) and a block-wide exclusive scan.
 */
#pragma once

namespace ts {

constexpr unsigned kFullWarp = 0xffffffffu;

/// @brief Marks column `c` of the tile as touched; returns whether this call was the first to mark it.
__device__ __forceinline__ bool touch_column(unsigned* touched_tile, int c) {
  const unsigned bit = 1u << (c & 31);
  return (atomicOr(touched_tile + (c >> 5), bit) & bit) == 0;
}

/// @brief Whether column `c` of the tile received at least one product.
__device__ __forceinline__ bool is_touched(const unsigned* touched_tile, int c) {
  return (touched_tile[c >> 5] >> (c & 31)) & 1u;
}

/// @brief Sets `count` ints (shared memory) to 0, block-strided; the caller synchronises.
__device__ __forceinline__ void zero_block(unsigned* tile, int count) {
  for (int i = threadIdx.x; i < count; i += blockDim.x) tile[i] = 0u;
}

/// @brief Block-wide exclusive scan of one value per thread (kBlock threads, a multiple of 32, at most 1024;
/// T an int or long long). `warp_totals_tile` is shared scratch of 32 values, not read by anyone else while the
/// scan runs; `*total_tile` (shared) receives the block total. Contains __syncthreads: every thread of the block
/// must call it.
template <int kBlock, typename T>
__device__ __forceinline__ T block_exclusive_scan(T value, T* warp_totals_tile, T* total_tile) {
  static_assert(kBlock % 32 == 0 && kBlock <= 1024, "block_exclusive_scan needs whole warps, at most 32");
  constexpr int kWarps = kBlock / 32;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  T inclusive_fragment = value;
#pragma unroll
  for (int offset = 1; offset < 32; offset *= 2) {
    const T up = __shfl_up_sync(kFullWarp, inclusive_fragment, offset);
    if (lane >= offset) inclusive_fragment += up;
  }
  if (lane == 31) warp_totals_tile[warp] = inclusive_fragment;
  __syncthreads();
  if (warp == 0) {
    const T total_fragment = lane < kWarps ? warp_totals_tile[lane] : 0;
    T scan_fragment = total_fragment;
#pragma unroll
    for (int offset = 1; offset < 32; offset *= 2) {
      const T up = __shfl_up_sync(kFullWarp, scan_fragment, offset);
      if (lane >= offset) scan_fragment += up;
    }
    if (lane < kWarps) warp_totals_tile[lane] = scan_fragment - total_fragment;  // exclusive
    if (lane == 31) *total_tile = scan_fragment;
  }
  __syncthreads();
  return warp_totals_tile[warp] + inclusive_fragment - value;
}

}  // namespace ts
