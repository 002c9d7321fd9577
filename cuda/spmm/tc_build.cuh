/**
 * @file @brief A's tensor-core blocks built on the device (src/spmm/tensor_core.rs, `DeviceBlocks::build`): the
 * structure, in two kernels around one download of a count per window. `spmm_tc_build_count` counts each window's
 * distinct columns (its slot columns); the host turns those into k-blocks, each window's first one, and the memory
 * to check and allocate; `spmm_tc_build_fill` writes the slot columns, the window heads, the row masks and the
 * rows' starts; `spmm_tc_values_<order>` (tc_values.cuh) then writes the values, as for new ones. The device twin
 * of `HostBlocks::build`: the same bits (tests/spmm.rs compares them).
 *
 * A block takes a window at a time. The window's columns are marked in a bitmap of all of A's columns in shared
 * memory (so a window's sorted union costs no sort), and a column's slot is its rank among the marked ones: a
 * prefix of the words' popcounts, plus a popcount within its word. The bitmap and the prefix take 8 bytes per 32
 * columns: where A has more columns than the shared memory the launch asks holds (src/spmm/tensor_core.rs,
 * `DEVICE_BUILD_MAX_COLUMNS`), the host builds.
 */
#pragma once

#include "common/params.cuh"

namespace ts {

/// Threads per block of the build kernels (src/spmm/tensor_core.rs launches them with the same number).
constexpr int kTcBuildThreads = 256;

/// @brief Marks the columns of window w's entries in `bitmap_tile` (shared, one bit per column of A, cleared
/// here); ends with a barrier.
__device__ __forceinline__ void tc_build_mark(const SpmmTcBuildParams& p, int w, unsigned* bitmap_tile,
                                              int words) {
  for (int i = threadIdx.x; i < words; i += blockDim.x) bitmap_tile[i] = 0;
  __syncthreads();
  const int r0 = w * p.rows_per_window;
  const int r1 = min(r0 + p.rows_per_window, p.m);
  const int e1 = __ldg(p.row_offsets + r1);
  for (int e = __ldg(p.row_offsets + r0) + threadIdx.x; e < e1; e += blockDim.x) {
    const int c = __ldg(p.columns + e);
    atomicOr(bitmap_tile + (c >> 5), 1u << (c & 31));
  }
  __syncthreads();
}

/// @brief The block-wide sum of `x`, every thread getting it; `sums_tile` (shared, a word per warp) is reused
/// after a barrier, so calls may follow one another.
__device__ __forceinline__ int tc_build_block_sum(int x, int* sums_tile) {
#pragma unroll
  for (int d = 16; d > 0; d /= 2) x += __shfl_xor_sync(0xffffffffu, x, d);
  __syncthreads();  // the tile's last readers are done
  if (threadIdx.x % 32 == 0) sums_tile[threadIdx.x / 32] = x;
  __syncthreads();
  int total = 0;
  for (int i = 0; i < kTcBuildThreads / 32; ++i) total += sums_tile[i];
  return total;
}

/// @brief Window after window (a grid-stride loop), its distinct columns: `window_slots[w]`.
__device__ __forceinline__ void spmm_tc_build_count(const SpmmTcBuildParams& p) {
  extern __shared__ unsigned build_shared[];
  __shared__ int sums_tile[kTcBuildThreads / 32];
  unsigned* bitmap_tile = build_shared;  // (words) one bit per column of A
  const int words = (p.cols + 31) / 32;
  for (int w = blockIdx.x; w < p.num_windows; w += gridDim.x) {
    tc_build_mark(p, w, bitmap_tile, words);
    int distinct = 0;
    for (int i = threadIdx.x; i < words; i += blockDim.x) distinct += __popc(bitmap_tile[i]);
    distinct = tc_build_block_sum(distinct, sums_tile);
    if (threadIdx.x == 0) p.window_slots[w] = distinct;
    __syncthreads();  // the bitmap is cleared for the next window only after every thread has read it
  }
}

/// @brief Window after window, everything of its k-blocks but the values. The slot columns in rank order, -1 in
/// the last k-block's padding; the first kTcHeadBlocks x 16 of them again in the window heads (if asked), -1 past
/// the last k-block. For each entry, its slot's bit in its row's mask of its k-block (a 32-bit atomic OR on the
/// word that holds the 16-bit mask); the row's first entry in each k-block it stores in, its start. The masks and
/// starts must be zero before: a row that stores nothing in a k-block keeps mask 0 and start 0, as the host's.
__device__ __forceinline__ void spmm_tc_build_fill(const SpmmTcBuildParams& p) {
  extern __shared__ unsigned build_shared[];
  __shared__ int sums_tile[kTcBuildThreads / 32];
  const int words = (p.cols + 31) / 32;
  unsigned* bitmap_tile = build_shared;        // (words) one bit per column of A
  int* prefix_tile = reinterpret_cast<int*>(build_shared + words);  // (words) marked columns before each word
  // Each thread's words for the prefix: a contiguous run, so its running sum needs one block-wide scan.
  const int per_thread = (words + kTcBuildThreads - 1) / kTcBuildThreads;
  const int own_begin = min(static_cast<int>(threadIdx.x) * per_thread, words);
  const int own_end = min(own_begin + per_thread, words);
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  for (int w = blockIdx.x; w < p.num_windows; w += gridDim.x) {
    tc_build_mark(p, w, bitmap_tile, words);
    // Exclusive prefix of the popcounts: the thread's run, then across the warp, then across the warps.
    int own = 0;
    for (int i = own_begin; i < own_end; ++i) own += __popc(bitmap_tile[i]);
    int inclusive = own;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      const int up = __shfl_up_sync(0xffffffffu, inclusive, d);
      if (lane >= d) inclusive += up;
    }
    if (lane == 31) sums_tile[warp] = inclusive;
    __syncthreads();
    int before = inclusive - own;
    for (int i = 0; i < warp; ++i) before += sums_tile[i];
    for (int i = own_begin; i < own_end; ++i) {
      prefix_tile[i] = before;
      before += __popc(bitmap_tile[i]);
    }
    int distinct = 0;
    for (int i = 0; i < kTcBuildThreads / 32; ++i) distinct += sums_tile[i];
    __syncthreads();  // the prefix is whole, and sums_tile read
    const int first = __ldg(p.window_blocks + w);
    const int slots = (__ldg(p.window_blocks + w + 1) - first) * 16;
    int* columns_out = p.block_columns + static_cast<size_t>(first) * 16;
    int* heads_out = p.window_heads == nullptr ? nullptr : p.window_heads + static_cast<size_t>(w) * kTcHeadBlocks * 16;
    // The slot columns: each marked column at its rank.
    for (int i = threadIdx.x; i < words; i += blockDim.x) {
      unsigned bits = bitmap_tile[i];
      int rank = prefix_tile[i];
      while (bits != 0) {
        const int b = __ffs(bits) - 1;
        bits &= bits - 1;
        columns_out[rank] = i * 32 + b;
        if (heads_out != nullptr && rank < kTcHeadBlocks * 16) heads_out[rank] = i * 32 + b;
        ++rank;
      }
    }
    for (int s = distinct + threadIdx.x; s < slots; s += blockDim.x) columns_out[s] = -1;
    if (heads_out != nullptr) {
      for (int s = distinct + threadIdx.x; s < kTcHeadBlocks * 16; s += blockDim.x) heads_out[s] = -1;
    }
    // The masks and starts: a warp per row of the window, its lanes on the row's entries in turn.
    const int r0 = w * p.rows_per_window;
    const int rows = min(p.rows_per_window, p.m - r0);
    auto slot_of = [&](int c) {
      return prefix_tile[c >> 5] + __popc(bitmap_tile[c >> 5] & ((1u << (c & 31)) - 1u));
    };
    for (int r = warp; r < rows; r += kTcBuildThreads / 32) {
      const int begin = __ldg(p.row_offsets + r0 + r);
      const int end = __ldg(p.row_offsets + r0 + r + 1);
      for (int e = begin + lane; e < end; e += 32) {
        const int s = slot_of(__ldg(p.columns + e));
        const size_t at = static_cast<size_t>(first + s / 16) * p.rows_per_window + r;
        // The 16-bit mask at `at` is half of a 32-bit word (little-endian: the even one is the low half).
        atomicOr(reinterpret_cast<unsigned*>(p.block_masks) + at / 2, (1u << (s % 16)) << (at % 2 * 16));
        // A row's entries come in column order, so in rank order: the first in a k-block starts the row there.
        if (e == begin || slot_of(__ldg(p.columns + e - 1)) / 16 != s / 16) p.block_starts[at] = e;
      }
    }
    __syncthreads();  // the bitmap and prefix are rebuilt for the next window only after every thread is done
  }
}

}  // namespace ts

#define TILESPARSE_SPMM_TC_BUILD(name, body)                                                                    \
  extern "C" __global__ void __launch_bounds__(ts::kTcBuildThreads) name(const ts::SpmmTcBuildParams p) {     \
    ts::body(p);                                                                                               \
  }
