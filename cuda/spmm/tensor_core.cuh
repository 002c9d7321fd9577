/**
 * @file @brief Tensor-core SpMM for f16 and bf16 (fp32 accumulation): C = A * B with A cut into windows of 16
 * rows, each window's columns condensed (the sorted union of the columns its rows store) and cut into k-blocks
 * of 16 slots, one dense 16 x 16 block of A per k-block (src/spmm/tensor_core.rs builds them). A block of four
 * warps owns one window and one slice of kTilesN * 8 columns of C; the warps take the window's k-blocks in turn.
 * Per k-block a warp gathers the 16 rows of B its slots name (cp.async, a ring of k-blocks in flight), loads the
 * B fragments with ldmatrix.trans and runs kTilesN mma.sync.m16n8k16; warp 0 adds the four partial tiles.
 *
 * Semantics are those of the sparse product: a block's padding zeros (slots a row does not store, padding
 * slots) would multiply B too, and 0 * Inf = NaN, so a k-block whose B tile holds an Inf or NaN is computed
 * instead by exact scalar FMAs over the stored entries only (each block carries a bit mask of them).
 */
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common/params.cuh"
#include "common/vector.cuh"

namespace ts {

/// Warps per block of the tensor-core kernels (src/spmm/tensor_core.rs launches them with the same number).
constexpr int kTcWarps = 4;
/// k-blocks in flight per warp: as many as 48 KB of static shared memory per block hold.
template <int kTilesN>
__host__ __device__ constexpr int tc_stages() {
  return kTilesN <= 4 ? 6 : 4;
}

/// @brief The element type's mma and its test for Inf/NaN on two packed elements (conversions: common/vector.cuh).
template <typename T>
struct TcOps;

template <>
struct TcOps<__half> {
  static __device__ __forceinline__ void mma(float* c, const unsigned* a, unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  static __device__ __forceinline__ bool nonfinite2(unsigned w) {
    return ((w & 0x7c00u) == 0x7c00u) | ((w & 0x7c000000u) == 0x7c000000u);
  }
};

template <>
struct TcOps<__nv_bfloat16> {
  static __device__ __forceinline__ void mma(float* c, const unsigned* a, unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  static __device__ __forceinline__ bool nonfinite2(unsigned w) {
    return ((w & 0x7f80u) == 0x7f80u) | ((w & 0x7f800000u) == 0x7f800000u);
  }
};

/// @brief A 16-byte cp.async, zero-filled when !valid; kL1: through L1 (.ca), else L2 only (.cg).
template <bool kL1>
__device__ __forceinline__ void cp_async_16(unsigned smem, const void* global, bool valid) {
  if (kL1) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem), "l"(global), "r"(valid ? 16 : 0));
  } else {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem), "l"(global), "r"(valid ? 16 : 0));
  }
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

/// @brief The kernel body; see the file comment. Grid: (windows, column slices); the kTcWarps warps of block
/// (x, y) share window x and column slice y and take its k-blocks in turn (warp w: k-blocks w, w + kTcWarps,
/// ...), so that a window's chain of k-blocks is walked by four warps at once; warp 0 adds the four partial
/// tiles in warp order (the same bits every run) and stores C.
template <typename T, int kTilesN>
__device__ __forceinline__ void spmm_tc_kernel(const SpmmTcParams& p) {
  constexpr int kColumns = kTilesN * 8;          // columns of C per warp
  constexpr int kChunksPerRow = kColumns / 8;    // 16-byte chunks per row of the B tile
  constexpr int kChunks = 16 * kChunksPerRow;    // per k-block
  constexpr int kChunksPerLane = kChunks / 32;
  constexpr int kStride = kColumns * 2 + 16;     // bytes per B tile row (+16: ldmatrix rows hit distinct banks)
  constexpr int kTileBytes = 16 * kStride;
  constexpr int kTcStages = tc_stages<kTilesN>();
  // Copies through L1 for the 64-column warps: the blocks an SM holds gather the same B rows when windows share
  // columns (f16, uniform 50%, n = 128: 0.078 -> 0.068 ms; 1536 x 384 at 70%, n = 256: 0.0117 -> 0.0097 ms);
  // the 32-column warps lost 5-13% with it (NOTES.md, "SpMM step 6").
  constexpr bool kL1 = kTilesN >= 8;
  static_assert(kChunks % 32 == 0, "whole chunks per lane");

  __shared__ __align__(128) unsigned char b_tiles[kTcWarps][kTcStages][kTileBytes];
  __shared__ __align__(16) uint4 a_tiles[kTcWarps][kTcStages][32];
  __shared__ __align__(16) int c_ring[kTcWarps][kTcStages][16];

  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int window = blockIdx.x;
  const int n0 = blockIdx.y * kColumns;  // < n: the grid has ceil(n / kColumns) column slices
  const int window_first = __ldg(p.window_blocks + window);
  const int window_blocks = __ldg(p.window_blocks + window + 1) - window_first;
  // This warp's k-blocks: window_first + warp + kTcWarps * b for b < blocks.
  const int first = window_first + warp;
  const int blocks = window_blocks > warp ? (window_blocks - warp + kTcWarps - 1) / kTcWarps : 0;
  const auto block_of = [&](int b) { return first + kTcWarps * b; };
  const T* dense = static_cast<const T*>(p.dense);
  unsigned char* my_b = &b_tiles[warp][0][0];
  const unsigned b_base = static_cast<unsigned>(__cvta_generic_to_shared(my_b));
  const unsigned a_base = static_cast<unsigned>(__cvta_generic_to_shared(&a_tiles[warp][0][0]));
  const unsigned c_base = static_cast<unsigned>(__cvta_generic_to_shared(&c_ring[warp][0][0]));

  // Issues the copies of k-block `b` (window-relative) into ring slot `stage`; `column(row)` gives the B row
  // of each slot.
  const auto load = [&](int b, int stage, auto column) {
    const int block = block_of(b);
#pragma unroll
    for (int i = 0; i < kChunksPerLane; ++i) {
      const int chunk = lane + 32 * i;
      const int row = chunk / kChunksPerRow;
      const int part = chunk % kChunksPerRow;
      const int c = column(row);
      const int n_at = n0 + 8 * part;
      const bool valid = c >= 0 && n_at < p.n;
      const T* src = valid ? dense + static_cast<size_t>(c) * p.n + n_at : dense;
      cp_async_16<kL1>(b_base + stage * kTileBytes + row * kStride + part * 16, src, valid);
    }
    const uint4* a_src = p.block_values + 32 * static_cast<size_t>(block) + lane;
    cp_async_16<kL1>(a_base + (stage * 32 + lane) * 16, a_src, true);
  };
  // The slot columns of k-block `b` travel through the same pipeline, kTcStages - 1 steps before the B rows
  // they name: lanes 0-3 copy 16 bytes each into ring slot b % kTcStages.
  const auto copy_columns = [&](int b) {
    if (lane < 4 && b < blocks) {
      const int* src = p.block_columns + 16 * static_cast<size_t>(block_of(b)) + 4 * lane;
      cp_async_16<kL1>(c_base + ((b % kTcStages) * 16 + 4 * lane) * 4, src, true);
    }
  };

  float acc[kTilesN][4];
#pragma unroll
  for (int j = 0; j < kTilesN; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;

  // Prologue: blocks 0 .. kTcStages - 2 with their columns read directly; columns of the blocks after them.
#pragma unroll
  for (int s = 0; s < kTcStages - 1; ++s) {
    if (s < blocks) {
      load(s, s, [&](int row) { return __ldg(p.block_columns + 16 * static_cast<size_t>(block_of(s)) + row); });
    }
    copy_columns(s + kTcStages - 1);
    cp_async_commit();
  }
  const int g = lane / 4;
  const int t = lane % 4;
  for (int b = 0; b < blocks; ++b) {
    // Step b's group (and with it every earlier one) is complete: block b's B rows and A values, and the
    // columns of block b + kTcStages - 1.
    cp_async_wait<kTcStages - 2>();
    __syncwarp();
    const int stage = b % kTcStages;
    if (b + kTcStages - 1 < blocks) {
      const int slot = (b + kTcStages - 1) % kTcStages;
      load(b + kTcStages - 1, slot, [&](int row) { return c_ring[warp][slot][row]; });
    }
    copy_columns(b + 2 * kTcStages - 2);  // into the slot of block b + kTcStages - 2, read in step b - 1
    cp_async_commit();

    const unsigned char* tile = my_b + stage * kTileBytes;
    bool bad = false;
#pragma unroll
    for (int i = 0; i < kChunksPerLane; ++i) {
      const int chunk = lane + 32 * i;
      const uint4 v = *reinterpret_cast<const uint4*>(tile + (chunk / kChunksPerRow) * kStride +
                                                      (chunk % kChunksPerRow) * 16);
      bad |= TcOps<T>::nonfinite2(v.x) | TcOps<T>::nonfinite2(v.y) | TcOps<T>::nonfinite2(v.z) |
             TcOps<T>::nonfinite2(v.w);
    }
    if (!__any_sync(0xffffffffu, bad)) {
      const uint4 a4 = a_tiles[warp][stage][lane];
      const unsigned a[4] = {a4.x, a4.y, a4.z, a4.w};
      // ldmatrix.x4.trans: lanes 0-7 address k rows 0-7, lanes 8-15 k rows 8-15 of the first 8 columns, lanes
      // 16-31 the same for the next 8 columns: b0/b1 of two n8 tiles.
      const int k_row = (lane & 8) + (lane & 7);
      const int col_half = (lane >> 4) * 8;
#pragma unroll
      for (int j = 0; j < kTilesN / 2; ++j) {
        const unsigned address = b_base + stage * kTileBytes + k_row * kStride + (16 * j + col_half) * 2;
        unsigned b0, b1, b2, b3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(b0), "=r"(b1), "=r"(b2), "=r"(b3)
                     : "r"(address));
        TcOps<T>::mma(acc[2 * j], a, b0, b1);
        TcOps<T>::mma(acc[2 * j + 1], a, b2, b3);
      }
    } else {
      // Exact path: only stored entries multiply B (rows g and g + 8 of the window, this lane's columns).
      const int block = block_of(b);
      const T* values = reinterpret_cast<const T*>(p.block_values) + 256 * static_cast<size_t>(block);
      const unsigned mask_lo = __ldg(p.block_masks + 16 * static_cast<size_t>(block) + g);
      const unsigned mask_hi = __ldg(p.block_masks + 16 * static_cast<size_t>(block) + g + 8);
      for (int kk = 0; kk < 16; ++kk) {
        const bool lo = (mask_lo >> kk) & 1u;
        const bool hi = (mask_hi >> kk) & 1u;
        if (!lo && !hi) continue;
        // Position of (row, kk) in the fragment order (see tensor_core.rs): lane g * 4 + (kk % 8) / 2.
        const int at = (g * 4 + (kk % 8) / 2) * 8 + (kk >= 8 ? 4 : 0) + (kk & 1);
        const float a_lo = to_float(values[at]);
        const float a_hi = to_float(values[at + 2]);
        const T* b_row = reinterpret_cast<const T*>(tile + kk * kStride);
#pragma unroll
        for (int j = 0; j < kTilesN; ++j) {
          const float b0 = to_float(b_row[8 * j + 2 * t]);
          const float b1 = to_float(b_row[8 * j + 2 * t + 1]);
          if (lo) {
            acc[j][0] = fmaf(a_lo, b0, acc[j][0]);
            acc[j][1] = fmaf(a_lo, b1, acc[j][1]);
          }
          if (hi) {
            acc[j][2] = fmaf(a_hi, b0, acc[j][2]);
            acc[j][3] = fmaf(a_hi, b1, acc[j][3]);
          }
        }
      }
    }
  }
  cp_async_wait<0>();
  __syncwarp();  // every lane is done reading the ring before it holds partial sums

  // Warps 1.. leave their partial tiles in their own (now idle) B ring; warp 0 adds them in warp order.
  float* partials = reinterpret_cast<float*>(my_b);
  static_assert(kTilesN * 4 * 32 * 4 <= kTcStages * kTileBytes, "a partial tile fits in a warp's B ring");
  if (warp != 0) {
#pragma unroll
    for (int j = 0; j < kTilesN; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) partials[(j * 4 + e) * 32 + lane] = acc[j][e];
    }
  }
  __syncthreads();
  if (warp != 0) return;
#pragma unroll
  for (int w = 1; w < kTcWarps; ++w) {
    const float* other = reinterpret_cast<const float*>(&b_tiles[w][0][0]);
#pragma unroll
    for (int j = 0; j < kTilesN; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[j][e] += other[(j * 4 + e) * 32 + lane];
    }
  }

  T* out = static_cast<T*>(p.out);
  const int row_lo = window * 16 + g;
  const int row_hi = row_lo + 8;
#pragma unroll
  for (int j = 0; j < kTilesN; ++j) {
    const int column = n0 + 8 * j + 2 * t;  // n % 8 == 0: column < n means column + 1 < n
    if (column >= p.n) continue;
    // Two adjacent elements per row in one 4-byte store (column and n even: aligned).
    if (row_lo < p.m) {
      const Vec<T, 2> v = {{from_float<T>(acc[j][0]), from_float<T>(acc[j][1])}};
      store(out + static_cast<size_t>(row_lo) * p.n + column, v);
    }
    if (row_hi < p.m) {
      const Vec<T, 2> v = {{from_float<T>(acc[j][2]), from_float<T>(acc[j][3])}};
      store(out + static_cast<size_t>(row_hi) * p.n + column, v);
    }
  }
}

}  // namespace ts

/// One kernel per (dtype, n8 tiles per warp); src/spmm/tensor_core.rs builds the same names.
#define TILESPARSE_SPMM_TC(tag, T, tiles)                                                               \
  extern "C" __global__ void __launch_bounds__(ts::kTcWarps * 32)                                    \
      spmm_tc_##tag##_n##tiles(const ts::SpmmTcParams p) {                                           \
    ts::spmm_tc_kernel<T, tiles>(p);                                                                 \
  }
TILESPARSE_SPMM_TC(f16, __half, 4)
TILESPARSE_SPMM_TC(f16, __half, 8)
TILESPARSE_SPMM_TC(bf16, __nv_bfloat16, 4)
TILESPARSE_SPMM_TC(bf16, __nv_bfloat16, 8)
