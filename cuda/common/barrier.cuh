/**
 * @file @brief Synchronisation among the threads of one subwarp (the `block_width` threads that share one
 * row of the sparse matrix and one slice of shared memory).
 */
#pragma once

namespace ts {

/// @brief Barrier over the `kBlockWidth` threads with the same `threadIdx.y`.
///
/// Each subwarp owns its own slice of the shared tiles, so subwarps never wait for each other: with
/// `kBlockWidth <= 32` a `__syncwarp` over the subwarp's lanes is enough and also orders its shared-memory
/// accesses. Rows finish at different times, which is why a block-wide `__syncthreads` would be wrong here
/// (threads of finished rows have returned).
template <int kBlockItemsY, int kBlockWidth>
struct SubwarpBarrier {
  static_assert(kBlockWidth <= 32, "a subwarp barrier needs block_width <= 32");
  unsigned int mask;

  __device__ __forceinline__ explicit SubwarpBarrier(int thread_idx_y) {
    if constexpr (kBlockWidth == 32) {
      mask = 0xffffffffu;
    } else {
      const int subwarp_in_warp = thread_idx_y % (32 / kBlockWidth);
      mask = ((1u << kBlockWidth) - 1u) << (subwarp_in_warp * kBlockWidth);
    }
  }

  __device__ __forceinline__ void sync() const { __syncwarp(mask); }
};

}  // namespace ts
