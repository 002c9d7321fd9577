/**
 * @file @brief New values of A written into its tensor-core blocks in place (src/csr.rs, `DeviceCsr::set_values`):
 * the blocks hold a copy of A's values in mma fragment order (src/spmm/tensor_core.rs, `HostBlocks::build`), so
 * a matrix whose values change while its structure does not (a pruned weight being trained) would otherwise need
 * them rebuilt on the host from a download. Every entry's place follows from the structure alone: its window
 * (row / rows_per_window), its slot (where its column sits in the window's sorted column union, found by a
 * binary search of the window's block_columns), and the layout's index of (row in the window, slot in the
 * k-block). The first update of a matrix's blocks searches (spmm_tc_values_<order>) and keeps each entry's place;
 * later ones only scatter (spmm_tc_values_scatter<bits>). Padding slots and the masks are not touched: they
 * depend on the structure only.
 */
#pragma once

#include "common/params.cuh"

namespace ts {

/// The three orders of values in a k-block (each the device twin of a function in src/spmm/tensor_core.rs).
enum TcValuesOrder {
  kFragment16 = 0,  // 16-bit values, mma.m16n8k16 A fragments: fragment_index
  kFragment32 = 1,  // f32 values, two mma.m16n8k8 A fragments per 16 x 16 block: fragment_index_f32
  kCore32 = 2,      // f32 values, wgmma K-major core matrices of a 64-row window: core_index_f32
};

/// @brief Where (row r of the window, slot j of the k-block) sits among a k-block's values in order kOrder.
template <int kOrder>
__device__ __forceinline__ int tc_value_index(int r, int j) {
  if (kOrder == kCore32) {
    return (j / 8) * 512 + (r / 8) * 64 + ((j % 8) / 4) * 32 + (r % 8) * 4 + j % 4;
  }
  const int tile = r / 16;
  const int rr = r % 16;
  if (kOrder == kFragment16) {
    const int lane = (rr % 8) * 4 + (j % 8) / 2;
    return tile * 256 + lane * 8 + (j >= 8 ? 4 : 0) + (rr >= 8 ? 2 : 0) + (j & 1);
  }
  const int lane = (rr % 8) * 4 + j % 4;
  return tile * 256 + (j / 8) * 128 + lane * 4 + (j % 8 >= 4 ? 2 : 0) + (rr >= 8 ? 1 : 0);
}

/// @brief The first position in [lo, hi) of block_columns holding `column` or more, the padding (-1) counted as
/// past every column (compared unsigned): the window's columns are sorted and its padding comes last.
__device__ __forceinline__ int tc_slot_of(const int* __restrict__ block_columns, int lo, int hi, int column) {
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    if (static_cast<unsigned>(__ldg(block_columns + mid)) < static_cast<unsigned>(column)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

/// @brief One warp per row (a grid-stride loop over rows), a lane per entry: each entry's value is stored at its
/// place in the blocks, and the place in `positions` where that is not null. E: the element as bits (unsigned
/// short or unsigned).
template <typename E, int kOrder>
__device__ __forceinline__ void spmm_tc_values(const SpmmTcValuesParams& p) {
  const int lane = threadIdx.x % 32;
  const int warps = gridDim.x * (blockDim.x / 32);
  const E* __restrict__ values = static_cast<const E*>(p.values);
  E* __restrict__ block_values = static_cast<E*>(p.block_values);
  const size_t per_block = static_cast<size_t>(p.rows_per_window) * 16;
  // 64-bit counters: a row or entry index past the last one may pass 2^31.
  for (long long row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; row < p.rows; row += warps) {
    const int window = static_cast<int>(row / p.rows_per_window);
    const int r = static_cast<int>(row - static_cast<long long>(window) * p.rows_per_window);
    const int first = __ldg(p.window_blocks + window);
    const int lo = first * 16;
    const int hi = __ldg(p.window_blocks + window + 1) * 16;
    const int end = __ldg(p.row_offsets + row + 1);
    for (long long e = __ldg(p.row_offsets + row) + lane; e < end; e += 32) {
      const int slot = tc_slot_of(p.block_columns, lo, hi, __ldg(p.column_indices + e)) - lo;
      const size_t at = static_cast<size_t>(first + slot / 16) * per_block + tc_value_index<kOrder>(r, slot % 16);
      block_values[at] = values[e];
      if (p.positions != nullptr) p.positions[e] = static_cast<unsigned>(at);  // < 2^32: the host checks
    }
  }
}

/// @brief block_values[positions[e]] = values[e] for every entry e (positions written by spmm_tc_values): a
/// grid-stride loop, four entries per trip with their loads issued before their stores.
template <typename E>
__device__ __forceinline__ void spmm_tc_values_scatter(const SpmmTcValuesParams& p) {
  const E* __restrict__ values = static_cast<const E*>(p.values);
  const unsigned* __restrict__ positions = p.positions;
  E* __restrict__ block_values = static_cast<E*>(p.block_values);
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;  // 64-bit: e + 3 stride may pass 2^31
  long long e = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; e + 3 * stride < p.nnz; e += 4 * stride) {
    E v[4];
    unsigned at[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      v[j] = values[e + j * stride];
      at[j] = __ldg(positions + e + j * stride);
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) block_values[at[j]] = v[j];
  }
  for (; e < p.nnz; e += stride) block_values[__ldg(positions + e)] = values[e];
}

}  // namespace ts

/// Threads per block of spmm_tc_values_<order> and spmm_tc_values_scatter<bits> (src/spmm/tensor_core.rs launches
/// them with the same number).
#define TILESPARSE_SPMM_TC_VALUES_THREADS 256

#define TILESPARSE_SPMM_TC_VALUES(name, E, order)                                                              \
  extern "C" __global__ void __launch_bounds__(TILESPARSE_SPMM_TC_VALUES_THREADS)                              \
      name(const ts::SpmmTcValuesParams p) {                                                                   \
    ts::spmm_tc_values<E, order>(p);                                                                           \
  }

#define TILESPARSE_SPMM_TC_VALUES_SCATTER(name, E)                                                             \
  extern "C" __global__ void __launch_bounds__(TILESPARSE_SPMM_TC_VALUES_THREADS)                              \
      name(const ts::SpmmTcValuesParams p) {                                                                   \
    ts::spmm_tc_values_scatter<E>(p);                                                                          \
  }
