/**
 * @file @brief New values of A written into its tensor-core blocks in place (src/csr.rs, `DeviceCsr::set_values`):
 * the blocks hold a copy of A's values in mma fragment order (src/spmm/tensor_core.rs, `HostBlocks::build`), so
 * a matrix whose values change while its structure does not (a pruned weight being trained) would otherwise need
 * them rebuilt on the host from a download. The kernel walks the blocks, not the entries: each thread takes one
 * value of a k-block, finds its (row, slot) by the layout's inverse index, and reads the entry there, if the row
 * stores one, at the row's first entry in the k-block (block_starts) plus the stored slots before it (a popcount
 * of the mask). So every element of the blocks is written, zeros included, in order: whole sectors, where
 * writing only the entries (scattered 2- or 4-byte stores) ran at a quarter of the speed (NOTES.md, "SpMM step 102").
 */
#pragma once

#include "common/params.cuh"

namespace ts {

/// The three orders of values in a k-block (each the device twin of a function in src/spmm/tensor_core.rs).
enum TcValuesOrder {
  kFragment16 = 0,  // 16-bit values, mma.m16n8k16 A fragments: fragment_index, fragment_slot
  kFragment32 = 1,  // f32 values, two mma.m16n8k8 A fragments per 16 x 16 block: fragment_index_f32, fragment_slot_f32
  kCore32 = 2,      // f32 values, wgmma K-major core matrices of a 64-row window: core_index_f32, core_slot_f32
};

/// @brief The (row of the window, slot of the k-block) whose value sits at `at` among a k-block's values in order
/// kOrder: the inverse of the order's index function.
template <int kOrder>
__device__ __forceinline__ void tc_value_slot(int at, int& row, int& slot) {
  if (kOrder == kCore32) {  // [j / 8][r / 8][(j % 8) / 4][r % 8][j % 4]
    row = (at % 512) / 64 * 8 + (at % 32) / 4;
    slot = at / 512 * 8 + (at % 64) / 32 * 4 + at % 4;
    return;
  }
  const int tile = at / 256;
  const int lane = (at % 256) / (kOrder == kFragment16 ? 8 : 4) % 32;
  const int g = lane / 4;
  const int t = lane % 4;
  if (kOrder == kFragment16) {  // lane 4 g + t: (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1), then slots + 8
    const int w = at % 8;
    row = tile * 16 + g + (w & 2) * 4;
    slot = 2 * t + (w & 1) + (w & 4) * 2;
  } else {  // per k8 half (128 values): lane 4 g + t: (g, t), (g+8, t), (g, t+4), (g+8, t+4)
    const int w = at % 4;
    row = tile * 16 + g + (w & 1) * 8;
    slot = (at % 256) / 128 * 8 + t + (w & 2) * 2;
  }
}

/// @brief Every value of every k-block rewritten from A's values: block b (a grid-stride loop over k-blocks) writes
/// k-block b's rows_per_window x 16 values in order, a thread per value. E: the element as bits (unsigned short
/// or unsigned).
template <typename E, int kOrder>
__device__ __forceinline__ void spmm_tc_values(const SpmmTcValuesParams& p) {
  const E* __restrict__ values = static_cast<const E*>(p.values);
  E* __restrict__ block_values = static_cast<E*>(p.block_values);
  const int per_block = p.rows_per_window * 16;
  for (int b = blockIdx.x; b < p.num_blocks; b += gridDim.x) {
    const size_t first_row = static_cast<size_t>(b) * p.rows_per_window;
    E* __restrict__ out = block_values + first_row * 16;
    for (int at = threadIdx.x; at < per_block; at += blockDim.x) {
      int row, slot;
      tc_value_slot<kOrder>(at, row, slot);
      const unsigned mask = __ldg(p.block_masks + first_row + row);
      E v = 0;
      if (mask >> slot & 1u) {
        v = values[__ldg(p.block_starts + first_row + row) + __popc(mask & ((1u << slot) - 1u))];
      }
      out[at] = v;
    }
  }
}

}  // namespace ts

/// Threads per block of spmm_tc_values_<order> (src/spmm/tensor_core.rs launches them with the same number).
#define TILESPARSE_SPMM_TC_VALUES_THREADS 256

#define TILESPARSE_SPMM_TC_VALUES(name, E, order)                                                              \
  extern "C" __global__ void __launch_bounds__(TILESPARSE_SPMM_TC_VALUES_THREADS)                              \
      name(const ts::SpmmTcValuesParams p) {                                                                   \
    ts::spmm_tc_values<E, order>(p);                                                                           \
  }
