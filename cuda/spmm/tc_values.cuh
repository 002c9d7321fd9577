/**
 * @file @brief A's values written into its tensor-core blocks in place: new ones (src/csr.rs,
 * `DeviceCsr::set_values`), and the first ones after the device build of the rest (tc_build.cuh). The blocks hold
 * a copy of A's values in mma fragment order (src/spmm/tensor_core.rs, `HostBlocks::build`), so a matrix whose
 * values change while its structure does not (a pruned weight being trained) would otherwise need them rebuilt.
 * The kernel walks the blocks, not the entries: each thread takes 16 bytes of a k-block's values, finds their
 * rows and slots by the layout's inverse index, and reads each value, if its row stores the slot, at the row's
 * first entry in the k-block (block_starts) plus the stored slots before it (a popcount of the mask). So every
 * element of the blocks is written, zeros included, in order and in whole sectors. Writing only the entries
 * (scattered 2- or 4-byte stores) ran 2.6x slower on full f32 blocks (4096^2 at 80%) and 2.1x faster on f16
 * blocks 10% full, on the H200 (NOTES.md, "SpMM step 102").
 */
#pragma once

#include "common/params.cuh"

namespace ts {

/// The three orders of values in a k-block (each the device twin of a function in src/spmm/tensor_core.rs).
enum TcValuesOrder {
  kFragment16 = 0,  // 16-bit values, mma.m16n8k16 A fragments: fragment_index, fragment_slot
  kFragment32 = 1,  // f32 values, two mma.m16n8k8 A fragments per 16 x 16 block: fragment_index_f32,
                    // fragment_slot_f32
  kCore32 = 2,      // f32 values, wgmma K-major core matrices of a 64-row window: core_index_f32, core_slot_f32
};

/// @brief The (row of the window, slot of the k-block) whose value sits at `at` among a k-block's values in order
/// kOrder: the inverse of the order's index function.
template <int kOrder>
__device__ __forceinline__ void tc_value_slot(unsigned at, int& row, int& slot) {
  // Unsigned: the divisions and remainders by powers of two are shifts and masks, with no sign fix-ups.
  if (kOrder == kCore32) {  // [j / 8][r / 8][(j % 8) / 4][r % 8][j % 4]
    row = static_cast<int>((at % 512) / 64 * 8 + (at % 32) / 4);
    slot = static_cast<int>(at / 512 * 8 + (at % 64) / 32 * 4 + at % 4);
    return;
  }
  const unsigned tile = at / 256;
  const unsigned lane = (at % 256) / (kOrder == kFragment16 ? 8 : 4) % 32;
  const unsigned g = lane / 4;
  const unsigned t = lane % 4;
  if (kOrder == kFragment16) {  // lane 4 g + t: (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1), then slots + 8
    const unsigned w = at % 8;
    row = static_cast<int>(tile * 16 + g + (w & 2) * 4);
    slot = static_cast<int>(2 * t + (w & 1) + (w & 4) * 2);
  } else {  // per k8 half (128 values): lane 4 g + t: (g, t), (g+8, t), (g, t+4), (g+8, t+4)
    const unsigned w = at % 4;
    row = static_cast<int>(tile * 16 + g + (w & 1) * 8);
    slot = static_cast<int>((at % 256) / 128 * 8 + t + (w & 2) * 2);
  }
}

/// @brief `count` values of one row at consecutive slots from `slot`, into `piece_fragment[0, count)` (registers):
/// the row's entry where its mask stores the slot, else 0. The row's entries in the k-block begin at `start`; a
/// slot's is after the stored slots before it (one popcount, then a running count). An unstored slot loads the
/// row's start (a valid entry: 0 where the row has none, and nnz > 0 where there are k-blocks) and selects 0, so
/// there is no branch per value.
template <typename E, int kCount>
__device__ __forceinline__ void tc_row_values(const E* __restrict__ values, unsigned mask, int start, int slot,
                                              E* piece_fragment) {
  int below = __popc(mask & ((1u << slot) - 1u));
#pragma unroll
  for (int j = 0; j < kCount; ++j) {
    const int stored = (mask >> (slot + j)) & 1u;
    const E v = values[start + (stored ? below : 0)];
    piece_fragment[j] = stored ? v : E(0);
    below += stored;
  }
}

/// @brief Every value of every k-block rewritten from A's values, a thread per 16 bytes of them (kChunk values,
/// one 16-byte store): a grid-stride loop over the chunks of all k-blocks, k-block after k-block (a k-block of a
/// 16-row f16 window is only 32 chunks, so a block per k-block would leave most threads idle). A chunk's values
/// lie in one or two rows, at runs of consecutive slots from its first value's (row, slot) (tc_value_slot):
///   fragment16: rows r, r + 8; slots s, s + 1 of each, then s + 8, s + 9 of each;
///   fragment32: rows r, r + 8; slot s of each, then s + 4 of each;
///   core32:     row r; slots s to s + 3.
/// So each row's mask and start are loaded once, and the runs cost a popcount each: the index of every value
/// worked out alone was 44 instructions a value, and the kernel issue-bound (ncu, NOTES.md "SpMM step 103").
/// E: the element as bits (unsigned short or unsigned).
template <typename E, int kOrder>
__device__ __forceinline__ void spmm_tc_values(const SpmmTcValuesParams& p) {
  constexpr unsigned kChunk = 16 / sizeof(E);
  static_assert(kChunk == (kOrder == kFragment16 ? 8 : 4), "16-bit values in fragment16, f32 in the others");
  const E* __restrict__ values = static_cast<const E*>(p.values);
  uint4* __restrict__ out = static_cast<uint4*>(p.block_values);
  // Chunks per k-block: 16 x 16 / kChunk per 16 rows, a power of two (32 to 256).
  const unsigned shift = __ffs(p.rows_per_window * 16 / kChunk) - 1;
  const size_t total = static_cast<size_t>(p.num_blocks) << shift;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t at = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; at < total; at += stride) {
    const size_t first_row = (at >> shift) * p.rows_per_window;  // the k-block's first row of masks and starts
    const unsigned chunk = static_cast<unsigned>(at & ((1u << shift) - 1));
    int row, slot;
    tc_value_slot<kOrder>(chunk * kChunk, row, slot);
    union {
      uint4 vector;
      E v[kChunk];
    } piece;
    const unsigned mask = __ldg(p.block_masks + first_row + row);
    const int start = __ldg(p.block_starts + first_row + row);
    if (kOrder == kCore32) {
      tc_row_values<E, 4>(values, mask, start, slot, piece.v);
    } else {
      const unsigned mask8 = __ldg(p.block_masks + first_row + row + 8);
      const int start8 = __ldg(p.block_starts + first_row + row + 8);
      constexpr int kRun = kOrder == kFragment16 ? 2 : 1;  // consecutive slots per row and run
      constexpr int kGap = kOrder == kFragment16 ? 8 : 4;  // from a row's first run to its second
      tc_row_values<E, kRun>(values, mask, start, slot, piece.v);
      tc_row_values<E, kRun>(values, mask8, start8, slot, piece.v + kRun);
      tc_row_values<E, kRun>(values, mask, start, slot + kGap, piece.v + 2 * kRun);
      tc_row_values<E, kRun>(values, mask8, start8, slot + kGap, piece.v + 3 * kRun);
    }
    out[at] = piece.vector;
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
