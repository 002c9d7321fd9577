/**
 * @file @brief Tensor-core SpMM for f16 and bf16 (fp32 accumulation), and for f32 in 3xTF32 (TcElem<float>,
 * tf32_split_b, mma_tf32x3: 32 columns per warp): C = A * B with A cut into windows of 16
 * rows, each window's columns condensed (the sorted union of the columns its rows store) and cut into k-blocks
 * of 16 slots, one dense 16 x 16 block of A per k-block (src/spmm/tensor_core.rs builds them). A block of four
 * warps owns one window and one slice of kTilesN * 8 columns of C; the warps take the window's k-blocks in turn.
 * Per k-block a warp gathers the 16 rows of B its slots name (cp.async, a ring of k-blocks in flight), loads the
 * B fragments with ldmatrix.trans and runs kTilesN mma.sync.m16n8k16 (f32: 16-byte shared loads, six
 * mma.m16n8k8.tf32 per n8 tile); warp 0 adds the four partial tiles. The wide kernels (spmm_tcw_kernel) take
 * windows of 64 or 32 rows.
 *
 * Semantics are those of the sparse product: a block's padding zeros (slots a row does not store, padding
 * slots) would multiply B too, and 0 * Inf = NaN, so a warp whose B fragments held an Inf or NaN redoes its
 * tile by exact scalar FMAs over the stored entries only (each block carries a bit mask of them), reading B from
 * global memory. Such a value leaves Inf or NaN in the warp's accumulators, so the test is one look at them
 * after the last k-block (any_nonfinite); the redo is rare.
 */
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common/params.cuh"
#include "common/vector.cuh"
#include "common/tc_shared.cuh"

namespace ts {

/// Warps per block of the tensor-core kernels (src/spmm/tensor_core.rs launches them with the same number).
constexpr int kTcWarps = 4;
/// @brief Zero, computed from all `kCount` values at `v` through a term the compiler cannot fold (n > 0, so n >> 31
/// is 0). A prologue adds it to its first copy's column: that copy then depends on every column the prologue
/// loaded, so ptxas issues all those loads before it. Without it ptxas sank each load next to its own stage's
/// copies and the prologue waited one load latency per stage (NOTES.md, "SpMM step 92").
template <int kCount>
__device__ __forceinline__ int depend_on_all(const int* v, int n) {
  int all = 0;
#pragma unroll
  for (int i = 0; i < kCount; ++i) all |= v[i];
  return all & (n >> 31);
}

/// k-blocks in flight per warp of the narrow kernels: as many as 48 KB of static shared memory per block hold
/// (a stage is a warp's B tile, its A block and its slot columns). f16/bf16: 6 (32 columns) or 4 (64); f32 (32
/// columns, 3.6 KB per stage and warp): 3.
template <int kBytes, int kTilesN>
__host__ __device__ constexpr int tc_stages() {
  return kBytes == 4 ? 3 : kTilesN <= 4 ? 6 : 4;
}

/// @brief One k8 half of a k-block's B fragments split for 3xTF32: `rows` holds rows t and t + 4 of the half, four
/// columns each (TcElem<float>: column j of the four is n8 tile j's), into [n8 tile][b0, b1] big and small parts.
__device__ __forceinline__ void tf32_split_b(const float4 (&rows)[2], unsigned (&big)[4][2], unsigned (&small)[4][2]) {
#pragma unroll
  for (int q = 0; q < 2; ++q) {
    const float x[4] = {rows[q].x, rows[q].y, rows[q].z, rows[q].w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      big[j][q] = tf32_big(x[j]);
      small[j][q] = __float_as_uint(x[j] - __uint_as_float(big[j][q]));
    }
  }
}

/// @brief One k8 half of a 16-row tile of A (its mma A fragment, four f32) times the half's B parts
/// (tf32_split_b), four n8 tiles, three mma.m16n8k8.tf32 each, the small terms first, into `part`.
__device__ __forceinline__ void mma_tf32x3(float (&part)[4][4], const uint4& a, const unsigned (&b_big)[4][2],
                                          const unsigned (&b_small)[4][2]) {
  const float x[4] = {__uint_as_float(a.x), __uint_as_float(a.y), __uint_as_float(a.z), __uint_as_float(a.w)};
  unsigned a_big[4], a_small[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    a_big[i] = tf32_big(x[i]);
    a_small[i] = __float_as_uint(x[i] - __uint_as_float(a_big[i]));
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    mma_tf32(part[j], a_small, b_big[j][0], b_big[j][1]);
    mma_tf32(part[j], a_big, b_small[j][0], b_small[j][1]);
    mma_tf32(part[j], a_big, b_big[j][0], b_big[j][1]);
  }
}

/// @brief Layout of an element type in the tensor-core kernels (src/spmm/tensor_core.rs, `fragment_index`,
/// builds the same). f16/bf16: one mma.m16n8k16 per 16 x 16 block of A and n8 tile; a block is 32 lanes x
/// 16 bytes, lane 4g + t holding rows g, g + 8 and slots 2t, 2t + 1, 2t + 8, 2t + 9; B fragments by ldmatrix;
/// an n8 tile's C fragment holds columns 8j + 2t, 8j + 2t + 1. f32 (3xTF32): two k8 halves of mma.m16n8k8 per
/// block; a block is two halves of 32 lanes x 16 bytes (a0-a3 of the half's mma: rows g, g + 8 of slot t,
/// then of slot t + 4); B fragments by 16-byte shared loads, the columns of a warp's 32 permuted so that lane
/// (g, t) needs columns 4g .. 4g + 3 of one B row: n8 tile j, mma column c is the warp's column 4c + j, so
/// the C fragment of tile j holds columns 8t + j and 8t + 4 + j (a lane stores 8 adjacent columns per row).
template <typename T>
struct TcElem {
  static constexpr int kBytes = 2;
  static constexpr int kPad = 16;   // bytes after each B tile row: ldmatrix rows hit distinct banks
  static constexpr int kAVecs = 1;  // 16-byte pieces of a 16 x 16 block per lane
  static constexpr int kRowPlus8 = 2;     // a_index(r + 8, kk) - a_index(r, kk) for r < 8
  static constexpr int kElementStep = 1;  // column(j, 1, t) - column(j, 0, t)
  /// Position of (row r of the 16-row tile, slot kk) in the block.
  static __device__ __forceinline__ int a_index(int r, int kk) {
    return ((r % 8) * 4 + (kk % 8) / 2) * 8 + (kk >= 8 ? 4 : 0) + (r >= 8 ? 2 : 0) + (kk & 1);
  }
  /// The warp-relative column of element e (0: c0/c2, 1: c1/c3) of n8 tile j's C fragment in lane (g, t).
  static __device__ __forceinline__ int column(int j, int e, int t) { return 8 * j + 2 * t + e; }
};
template <>
struct TcElem<float> {
  static constexpr int kBytes = 4;
  static constexpr int kPad = 32;   // rows 32 bytes apart in the banks: lanes (g, t) load row t, column 4g
  static constexpr int kAVecs = 2;
  static constexpr int kRowPlus8 = 1;
  static constexpr int kElementStep = 4;
  static __device__ __forceinline__ int a_index(int r, int kk) {
    return (kk / 8) * 128 + ((r % 8) * 4 + kk % 4) * 4 + ((kk % 8) >= 4 ? 2 : 0) + (r >= 8 ? 1 : 0);
  }
  static __device__ __forceinline__ int column(int j, int e, int t) { return 8 * t + 4 * e + j; }
};

/// @brief Loads kPairs ldmatrix.x4.trans fragments (b0/b1 of two n8 tiles each) from `address`, `address` + 32,
/// ... (lanes address their k row and 8-column half).
template <int kPairs>
__device__ __forceinline__ void load_b_fragments(unsigned (&frag)[kPairs][4], unsigned address) {
#pragma unroll
  for (int j = 0; j < kPairs; ++j) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(frag[j][0]), "=r"(frag[j][1]), "=r"(frag[j][2]), "=r"(frag[j][3])
                 : "r"(address + 32 * j));
  }
}

/// @brief Whether any lane of the warp holds an Inf or NaN among its `kCount` accumulators.
///
/// This is the test for B values that are Inf or NaN, made once after a warp's last k-block instead of on every
/// fragment: such a value makes every accumulator of its column in the warp's tile Inf or NaN (a padding zero
/// times it is NaN, a stored value times it Inf or NaN), and an accumulator that is Inf or NaN stays so (NaN
/// plus anything is NaN, Inf plus a finite value Inf, plus the opposite Inf NaN). It also flags a warp whose A
/// values held an Inf or NaN or whose fp32 sums overflowed; the exact redo gives those the same answer.
template <int kCount>
__device__ __forceinline__ bool any_nonfinite(const float* acc) {
  bool any = false;
#pragma unroll
  for (int i = 0; i < kCount; ++i) any |= (__float_as_uint(acc[i]) & 0x7f800000u) == 0x7f800000u;
  return __any_sync(0xffffffffu, any);
}

/// @brief The exact product of one 16 x 16 block of A by B: only its stored entries (`masks`, one per row)
/// multiply the rows of B its slots name (`columns`; padding slots store nothing), read from global memory,
/// into this lane's accumulators of rows g and g + 8 (mma C-fragment order, kTiles n8 tiles from column
/// `column0`, columns as TcElem<T>::column; columns >= n are skipped). `values`: the block in fragment order.
/// The tensor cores would multiply B by the block's padding zeros too, and 0 * Inf = NaN: a warp whose B
/// fragments held an Inf or NaN redoes its tile with this.
template <typename T, int kTiles>
__device__ __forceinline__ void exact_block(float (&acc)[kTiles][4], const T* values, const unsigned short* masks,
                                            const int* columns, const T* dense, int n, int column0, int g, int t) {
  const unsigned mask_lo = __ldg(masks + g);
  const unsigned mask_hi = __ldg(masks + g + 8);
  for (int kk = 0; kk < 16; ++kk) {
    const bool lo = (mask_lo >> kk) & 1u;
    const bool hi = (mask_hi >> kk) & 1u;
    if (!lo && !hi) continue;
    const int at = TcElem<T>::a_index(g, kk);
    const float a_lo = to_float(values[at]);
    const float a_hi = to_float(values[at + TcElem<T>::kRowPlus8]);
    const T* b_row = dense + static_cast<size_t>(__ldg(columns + kk)) * n + column0;  // a stored slot: column >= 0
#pragma unroll
    for (int j = 0; j < kTiles; ++j) {
      const int c0 = TcElem<T>::column(j, 0, t);
      const int c1 = c0 + TcElem<T>::kElementStep;
      // n % 8 == 0 and column0 a multiple of 8: both in or both out (they share an 8-column group)
      if (column0 + c0 >= n) continue;
      const float b0 = to_float(b_row[c0]);
      const float b1 = to_float(b_row[c1]);
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

/// @brief The kernel body; see the file comment. Grid: (windows, column slices); the kTcWarps warps of block
/// (x, y) share window x (p.windows[x] where the launch leaves empty windows out: tc_window) and column slice y
/// and take its k-blocks in turn (warp w: k-blocks w, w + kTcWarps, ...), so that a window's chain of k-blocks is
/// walked by four warps at once; warp 0 adds the four partial tiles in warp order (the same bits every run) and
/// stores C. f32 (3xTF32, 32 columns per warp): B fragments by 16-byte shared loads and the k-block's six mma per
/// n8 tile summed from zero, as in spmm_tcw_kernel.
template <typename T, int kTilesN, bool kScaled>
__device__ __forceinline__ void spmm_tc_kernel(const SpmmTcParams& p) {
  using Elem = TcElem<T>;
  constexpr bool kF32 = Elem::kBytes == 4;       // 3xTF32
  static_assert(!kF32 || kTilesN == 4, "f32: 32 columns per warp (mma_tf32x3)");
  constexpr int kColumns = kTilesN * 8;          // columns of C per warp
  constexpr int kChunkColumns = 16 / Elem::kBytes;  // columns per 16-byte chunk
  constexpr int kChunksPerRow = kColumns / kChunkColumns;  // per row of the B tile
  constexpr int kChunks = 16 * kChunksPerRow;    // per k-block
  constexpr int kChunksPerLane = kChunks / 32;
  // Bytes per B tile row (+16: ldmatrix rows hit distinct banks; f32 +32: TcElem<float>).
  constexpr int kStride = kColumns * Elem::kBytes + Elem::kPad;
  constexpr int kTileBytes = 16 * kStride;
  constexpr int kTcStages = tc_stages<Elem::kBytes, kTilesN>();
  // Copies through L1 for B tile rows of 128 bytes (f16/bf16 64-column warps, f32 32-column ones): the blocks an
  // SM holds gather the same B rows when windows share columns (f16, uniform 50%, n = 128: 0.078 -> 0.068 ms;
  // 1536 x 384 at 70%, n = 256: 0.0117 -> 0.0097 ms); the f16 32-column warps lost 5-13% with it (NOTES.md, "SpMM
  // step 6").
  constexpr bool kL1 = kColumns * Elem::kBytes >= 128;
  static_assert(kChunks % 32 == 0, "whole chunks per lane");

  __shared__ __align__(128) unsigned char b_tiles[kTcWarps][kTcStages][kTileBytes];
  __shared__ __align__(16) uint4 a_tiles[kTcWarps][kTcStages][32 * Elem::kAVecs];
  __shared__ __align__(16) int c_ring[kTcWarps][kTcStages][16];

  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int window = tc_window(p);
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

  // This lane's chunks of every B tile: chunk lane + 32 i is row lane / kChunksPerRow + i * (32 /
  // kChunksPerRow), part lane % kChunksPerRow, the same columns of B in every k-block.
  constexpr int kRowStep = 32 / kChunksPerRow;
  const int chunk_row = lane / kChunksPerRow;
  const int chunk_part = lane % kChunksPerRow;
  const bool in_n = n0 + kChunkColumns * chunk_part < p.n;  // n % 8 == 0: a chunk is in or out as a whole
  const PieceAddresses pieces(dense, p.n, n0 + kChunkColumns * chunk_part, in_n);
  const unsigned chunk_smem = b_base + chunk_row * kStride + chunk_part * 16;

  // This lane's A pieces and (lanes 0-3) slot columns of this warp's first k-block; k-block b's are kAStep and
  // kColumnStep further per b (the warps take the window's k-blocks in turn).
  constexpr int kAStep = kTcWarps * 32 * Elem::kAVecs;
  constexpr int kColumnStep = kTcWarps * 16;
  const uint4* a_first = p.block_values + 32 * Elem::kAVecs * static_cast<size_t>(first) + lane;
  const int* columns_first = p.block_columns + 16 * static_cast<size_t>(first) + 4 * lane;
  // Issues the copies of a k-block into ring slot `stage`: the B rows (`column(row)` gives the B row of each slot)
  // and the A block from `a_src` (16 bytes per lane, 32 for f32).
  const auto load_from = [&](const uint4* a_src, int stage, auto column) {
#pragma unroll
    for (int i = 0; i < kChunksPerLane; ++i) {
      const int c = column(i);
      const bool valid = c >= 0 && in_n;
      cp_async_16<kL1>(chunk_smem + stage * kTileBytes + kRowStep * i * kStride, pieces.at(c), valid);
    }
#pragma unroll
    for (int v = 0; v < Elem::kAVecs; ++v) {
      cp_async_16<kL1>(a_base + ((stage * Elem::kAVecs + v) * 32 + lane) * 16, a_src + 32 * v, true);
    }
  };
  // The same for k-block `b` (warp-relative).
  const auto load = [&](int b, int stage, auto column) { load_from(a_first + kAStep * b, stage, column); };
  // The slot columns of k-block `b` travel through the same pipeline, kTcStages steps before the B rows they
  // name: lanes 0-3 copy 16 bytes each from `src` (block b's columns, plus 4 lane) into ring slot `slot` (b %
  // kTcStages).
  const auto copy_columns_from = [&](const int* src, bool in_range, int slot) {
    if (lane < 4 && in_range) cp_async_16<kL1>(c_base + (slot * 16 + 4 * lane) * 4, src, true);
  };
  const auto copy_columns = [&](int b, int slot) {
    copy_columns_from(columns_first + kColumnStep * b, b < blocks, slot);
  };

  float acc[kTilesN][4];
#pragma unroll
  for (int j = 0; j < kTilesN; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
  // Pipeline: block x's B rows and A values live in ring slot x % kTcStages, its slot columns in c_ring slot x %
  // kTcStages. The prologue commits groups 0 .. kTcStages - 2, group s with the copies of block s and the columns
  // of block s + kTcStages; step b commits group b + kTcStages - 1 with the copies of block b + kTcStages - 1 and
  // the columns of block b + 2 kTcStages - 1. Step b waits for group b, copies block b + kTcStages - 1 into the slot
  // of block b - 1 (read in step b - 1) from the columns in `ahead` (read in step b - 1, or here for step 0), and
  // reads block b + kTcStages's columns (group b or earlier) into `ahead`: no copy waits on a shared-memory load of
  // its own step.
  // The prologue reads the columns of blocks 0 .. kTcStages - 1 directly, all of them before the first copy
  // (depend_on_all: 0.94x-0.97x of the 16-row kernels' time on the real matrices at n = 32-128, f16).
  int ahead[kChunksPerLane];
  {
    int columns[kTcStages][kChunksPerLane];
#pragma unroll
    for (int s = 0; s < kTcStages; ++s) {
#pragma unroll
      for (int i = 0; i < kChunksPerLane; ++i) {
        const int* at = p.block_columns + 16 * static_cast<size_t>(block_of(s)) + chunk_row + kRowStep * i;
        columns[s][i] = s < blocks ? __ldg(at) : -1;
      }
    }
    columns[0][0] += depend_on_all<kTcStages * kChunksPerLane>(&columns[0][0], p.n);
#pragma unroll
    for (int s = 0; s < kTcStages - 1; ++s) {
      if (s < blocks) load(s, s, [&](int i) { return columns[s][i]; });
      copy_columns(s + kTcStages, s);
      cp_async_commit();
    }
#pragma unroll
    for (int i = 0; i < kChunksPerLane; ++i) ahead[i] = columns[kTcStages - 1][i];
  }
  const int g = lane / 4;
  const int t = lane % 4;
  // ldmatrix.x4.trans: lanes 0-7 address k rows 0-7, lanes 8-15 k rows 8-15 of the first 8 columns, lanes
  // 16-31 the same for the next 8 columns: b0/b1 of two n8 tiles.
  // f32: lane (g, t) loads row t (and t + 4) of each k8 half, columns 4g .. 4g + 3 (TcElem<float>).
  const int k_row = kF32 ? t : (lane & 8) + (lane & 7);
  const int col_half = kF32 ? 4 * g : (lane >> 4) * 8;
  const unsigned frag_smem = b_base + k_row * kStride + col_half * Elem::kBytes;
  // Ring slots as counters: stage = b % kTcStages is read (the B tile and A block of block b, the columns of
  // block b + kTcStages), slot = (b - 1) % kTcStages written (block b + kTcStages - 1, the columns of block b + 2
  // kTcStages - 1).
  int stage = 0;
  int slot = kTcStages - 1;
  const auto next = [](int x) { return x + 1 == kTcStages ? 0 : x + 1; };
  // The sources of step b's copies, advanced a k-block per step: block b + kTcStages - 1's A, block b + 2
  // kTcStages - 1's columns (no index arithmetic from the window's start in the loop).
  const uint4* a_next = a_first + kAStep * (kTcStages - 1);
  const int* columns_next = columns_first + kColumnStep * (2 * kTcStages - 1);
  for (int b = 0; b < blocks; ++b) {
    // Step b's group (and with it every earlier one) is complete: block b's B rows and A values, and the
    // columns of block b + kTcStages.
    cp_async_wait<kTcStages - 2>();
    __syncwarp();
    // Fragments first, then the copies of a later k-block, then the mma (as in spmm_tcw_kernel).
    const auto refill = [&] {
      if (b + kTcStages - 1 < blocks) load_from(a_next, slot, [&](int i) { return ahead[i]; });
      // A read for a block past the range finds stale or unwritten columns, never used.
#pragma unroll
      for (int i = 0; i < kChunksPerLane; ++i) ahead[i] = c_ring[warp][stage][chunk_row + kRowStep * i];
      // The slot's columns (block b + kTcStages - 1) are in `ahead`.
      copy_columns_from(columns_next, b + 2 * kTcStages - 1 < blocks, slot);
      a_next += kAStep;
      columns_next += kColumnStep;
      cp_async_commit();
    };
    if constexpr (kF32) {
      // [k8 half][rows t, t + 4] of B, four columns each; the A block's two halves. Each half's mma sum into the
      // k-block's partial sums from zero, added to the accumulators in f32 after both (spmm_tcw_kernel's reason).
      float4 rows[2][2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          const unsigned at = frag_smem + stage * kTileBytes + (8 * h + 4 * q) * kStride;
          asm volatile("ld.shared.v4.f32 {%0,%1,%2,%3}, [%4];\n"
                       : "=f"(rows[h][q].x), "=f"(rows[h][q].y), "=f"(rows[h][q].z), "=f"(rows[h][q].w)
                       : "r"(at));
        }
      }
      const uint4 a_half[2] = {a_tiles[warp][stage][lane], a_tiles[warp][stage][32 + lane]};
      refill();
      float part[4][4] = {};
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        unsigned b_big[4][2], b_small[4][2];
        tf32_split_b(rows[h], b_big, b_small);
        mma_tf32x3(part, a_half[h], b_big, b_small);
      }
#pragma unroll
      for (int j = 0; j < kTilesN; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[j][e] += part[j][e];
      }
    } else {
      unsigned frag[kTilesN / 2][4];
      load_b_fragments(frag, frag_smem + stage * kTileBytes);
      const uint4 a4 = a_tiles[warp][stage][lane];
      refill();
      const unsigned a[4] = {a4.x, a4.y, a4.z, a4.w};
#pragma unroll
      for (int j = 0; j < kTilesN / 2; ++j) {
        TcOps<T>::mma(acc[2 * j], a, frag[j][0], frag[j][1]);
        TcOps<T>::mma(acc[2 * j + 1], a, frag[j][2], frag[j][3]);
      }
    }
    stage = next(stage);
    slot = next(slot);
  }
  cp_async_wait<0>();
  __syncwarp();  // every lane is done reading the ring before it holds partial sums
  if (any_nonfinite<kTilesN * 4>(&acc[0][0])) {
    // An accumulator is Inf or NaN (a B tile held one, see any_nonfinite): redo this warp's k-blocks exactly,
    // stored entries only (rows g and g + 8 of the window, this lane's columns).
#pragma unroll
    for (int j = 0; j < kTilesN; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
    for (int b = 0; b < blocks; ++b) {
      const size_t block = static_cast<size_t>(block_of(b));
      exact_block<T, kTilesN>(acc, reinterpret_cast<const T*>(p.block_values) + 256 * block,
                              p.block_masks + 16 * block, p.block_columns + 16 * block, dense, p.n, n0, g, t);
    }
  }

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
  // Rows g and g + 8 of the window: row_lo and row_hi. The plain twin adds the bias + ReLU in place; the twin that
  // takes the scalars applies the whole epilogue in its stores (store_sums), with the rows' biases b_lo and b_hi.
  if (!kScaled && p.bias != nullptr) {
    const float b_lo = row_bias(p, row_lo), b_hi = row_bias(p, row_hi);
#pragma unroll
    for (int j = 0; j < kTilesN; ++j) add_relu_fragment(acc[j], b_lo, b_hi);
  }
  const float b_lo = kScaled ? row_bias(p, row_lo) : 0.0f, b_hi = kScaled ? row_bias(p, row_hi) : 0.0f;
  if constexpr (kF32) {
    // Columns 8t + 4e + j of the warp's (TcElem<float>): four adjacent columns per store, 16-byte aligned (n % 8
    // == 0), in or out as a whole.
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int column = n0 + 8 * t + 4 * e;
      if (column >= p.n) continue;
      if (row_lo < p.m) {
        float v[4] = {acc[0][e], acc[1][e], acc[2][e], acc[3][e]};
        store_sums<kScaled>(p, out + static_cast<size_t>(row_lo) * p.n + column, v, b_lo);
      }
      if (row_hi < p.m) {
        float v[4] = {acc[0][2 + e], acc[1][2 + e], acc[2][2 + e], acc[3][2 + e]};
        store_sums<kScaled>(p, out + static_cast<size_t>(row_hi) * p.n + column, v, b_hi);
      }
    }
  } else {
#pragma unroll
    for (int j = 0; j < kTilesN; ++j) {
      const int column = n0 + 8 * j + 2 * t;  // n % 8 == 0: column < n means column + 1 < n
      if (column >= p.n) continue;
      // Two adjacent elements per row in one 4-byte store (column and n even: aligned).
      if (row_lo < p.m) {
        float v[2] = {acc[j][0], acc[j][1]};
        store_sums<kScaled>(p, out + static_cast<size_t>(row_lo) * p.n + column, v, b_lo);
      }
      if (row_hi < p.m) {
        float v[2] = {acc[j][2], acc[j][3]};
        store_sums<kScaled>(p, out + static_cast<size_t>(row_hi) * p.n + column, v, b_hi);
      }
    }
  }
}


#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
/// Thread block clusters (sm_90): the blocks in this block's cluster, a barrier over them (release/acquire: the
/// shared-memory stores before it are seen by every block's loads after it), the address of `smem` (this
/// block's shared memory) in block `rank`'s shared memory, and a 16-byte load from there.
__device__ __forceinline__ unsigned cluster_blocks() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(r));
  return r;
}
__device__ __forceinline__ unsigned cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
__device__ __forceinline__ unsigned cluster_address(unsigned smem, unsigned rank) {
  unsigned r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(smem), "r"(rank));
  return r;
}
__device__ __forceinline__ float4 cluster_load(unsigned address) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0,%1,%2,%3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(address)
               : "memory");
  return v;
}
#define TILESPARSE_CLUSTERS 1
#endif

/// k-blocks in flight in the wide-window kernel's ring (shared by the block's warps), as many as 48 KB of static
/// shared memory per block hold: a stage is the B tile (16 x (kTilesN * 8 * element bytes + pad) bytes), the A
/// blocks (16 bytes per thread, 32 for f32) and two slots of columns (128 bytes). f16/bf16: 8 (n8) or 6 (n16: 7
/// measured no faster, NOTES.md "SpMM step 7"); f32 n8: 5 (8.7 KB per stage).
template <typename T, int kTilesN>
__host__ __device__ constexpr int tcw_stages() {
  return TcElem<T>::kBytes == 4 ? 5 : kTilesN <= 8 ? 8 : 6;
}

/// Blocks per SM the wide-window kernel is compiled for: 3 for f16/bf16 (at most 168 registers: the
/// double-buffered fragments of the n16 kernel need 162), 4 for f32 (at most 128 registers: one set of
/// fragments, NOTES.md "SpMM step 11"; 4 x 44 KB of shared memory).
template <typename T>
__host__ __device__ constexpr int tcw_min_blocks() {
  return TcElem<T>::kBytes == 4 ? 4 : 3;
}

/// @brief One k-block's fragments of a warp of the wide kernel, in registers: f16/bf16: B from ldmatrix (b0/b1
/// of two n8 tiles per entry) and the warp's kMt A blocks; f32: B as [k8 half][row t, row t + 4] four columns
/// each (TcElem<float>), A as [row tile][k8 half].
template <typename T, int kWarpTiles, int kMt>
struct TcwFragments {
  unsigned b[kWarpTiles / 2][4];
  uint4 a[kMt];
};
template <int kWarpTiles, int kMt>
struct TcwFragments<float, kWarpTiles, kMt> {
  static_assert(kWarpTiles == 4, "f32: 32 columns per warp");
  float4 b[2][2];
  uint4 a[kMt][2];
};

/// @brief The wide-window kernel: windows of kRows = 64 or 32 rows whose k-blocks hold one 16 x 16 block of A per
/// 16 rows (src/spmm/tensor_core.rs, `WIDE_WINDOW`, `MID_WINDOW`). A block of four warps owns one window and one
/// slice of kTilesN * 8 columns of C; per k-block the block gathers the 16 rows of B its slots name once, into a
/// ring shared by its warps, and the warps split the kRows x kTilesN * 8 tile two by two: warp w multiplies rows
/// kRows / 2 * (w / 2) .. (kMt = kRows / 32 mma row tiles) by columns (w % 2) * kTilesN * 4 .. + kTilesN * 4 of
/// the slice. Each gathered B tile serves kRows / 16 row tiles, each B fragment kMt mma, each A fragment
/// kTilesN / 2. The 32-row windows are for rows that share their columns in runs of 32 (32 x 32 blocks), which
/// leave half of a 64-row window's slots empty. A warp whose B fragments held an Inf or NaN redoes its tile of the
/// range by exact FMAs over the stored entries (exact_block). With p.splits > 1 (a grid too small for the GPU), block z of a window takes the z-th of
/// p.splits equal ranges of its k-blocks; launched as clusters of the p.splits blocks of a window (sm_90), the
/// blocks add their tiles in range order through distributed shared memory, else each stores an f32 partial
/// tile and spmm_tc_fixup adds them in range order.
template <typename T, int kTilesN, int kRows, bool kScaled>
__device__ __forceinline__ void spmm_tcw_kernel(const SpmmTcParams& p) {
  using Elem = TcElem<T>;
  constexpr bool kF32 = Elem::kBytes == 4;        // 3xTF32
  constexpr int kColumns = kTilesN * 8;           // columns of C per block
  constexpr int kWarpTiles = kTilesN / 2;         // n8 tiles per warp
  constexpr int kThreads = kTcWarps * 32;
  constexpr int kChunkColumns = 16 / Elem::kBytes;  // columns per 16-byte chunk
  constexpr int kChunksPerRow = kColumns / kChunkColumns;  // per row of the B tile
  constexpr int kChunks = 16 * kChunksPerRow;     // per k-block
  constexpr int kChunksPerThread = kChunks / kThreads;
  constexpr int kStride = kColumns * Elem::kBytes + Elem::kPad;  // bytes per B tile row
  constexpr int kTileBytes = 16 * kStride;
  constexpr int kStages = tcw_stages<T, kTilesN>();
  static_assert(kRows == 64 || kRows == 32, "windows of four or two 16-row tiles");
  constexpr int kMt = kRows / 32;                   // mma row tiles per warp
  static_assert(kTcWarps == 4 && kChunks % kThreads == 0 && kWarpTiles % 2 == 0, "2 x 2 warps, whole chunks");
  // Threads that copy a k-block's A blocks, 16 bytes each per 16-byte vector of an A fragment (32 lanes per 16 rows).
  constexpr int kAThreads = 2 * kRows;

  // The ring of kStages k-blocks: B tiles, then A blocks (one buffer: a split range's partial tile reuses it).
  constexpr int kABytes = kAThreads * 16 * Elem::kAVecs;
  constexpr int kRingBytes = kStages * (kTileBytes + kABytes);
  __shared__ __align__(128) unsigned char ring[kRingBytes];
  auto b_tiles = reinterpret_cast<unsigned char (*)[kTileBytes]>(ring);
  auto a_tiles = reinterpret_cast<uint4 (*)[kAThreads * Elem::kAVecs]>(ring + kStages * kTileBytes);
  __shared__ __align__(16) int c_ring[2 * kStages][16];  // slot columns of block x at x % (2 kStages)

  const int tid = threadIdx.x;
  const int lane = tid % 32;
  const int warp = tid / 32;
  const int warp_row = warp / 2;                  // row tiles kMt warp_row ..
  const int warp_col = (warp % 2) * kWarpTiles * 8;
  const int window = tc_window(p);
  const int n0 = blockIdx.y * kColumns;  // < n: the grid has ceil(n / kColumns) column slices
  // This block's range of the window's k-blocks (all of them when p.splits == 1).
  const WindowRange range(p, window);
  const int first = range.first;
  const int blocks = range.blocks;
  const T* dense = static_cast<const T*>(p.dense);
  const unsigned b_base = static_cast<unsigned>(__cvta_generic_to_shared(&b_tiles[0][0]));
  const unsigned a_base = static_cast<unsigned>(__cvta_generic_to_shared(&a_tiles[0][0]));
  const unsigned c_base = static_cast<unsigned>(__cvta_generic_to_shared(&c_ring[0][0]));

  // This thread's chunks of every B tile: chunk tid + kThreads * i is row (tid / kChunksPerRow) + i *
  // (kThreads / kChunksPerRow), part tid % kChunksPerRow, the same columns of B in every k-block.
  constexpr int kRowStep = kThreads / kChunksPerRow;
  const int chunk_row = tid / kChunksPerRow;
  const int chunk_part = tid % kChunksPerRow;
  const bool in_n = n0 + kChunkColumns * chunk_part < p.n;  // n % 8 == 0: a chunk is in or out as a whole
  const PieceAddresses pieces(static_cast<const T*>(p.dense), p.n, n0 + kChunkColumns * chunk_part, in_n);
  const unsigned chunk_smem = b_base + chunk_row * kStride + chunk_part * 16;

  // This thread's 16-byte pieces of the range's first k-block of A (tid, tid + kAThreads, ...; threads below
  // kAThreads); k-block b's are kAThreads * Elem::kAVecs further per b.
  const uint4* a_first = p.block_values + static_cast<size_t>(kAThreads * Elem::kAVecs) * first + tid;
  // Issues the copies of a k-block's B rows into ring slot `stage`: `column(i)` gives the B row of this thread's
  // chunk i (slot chunk_row + kRowStep * i); a padding slot's (-1) copy zero-fills.
  const auto load_b = [&](int stage, auto column) {
#pragma unroll
    for (int i = 0; i < kChunksPerThread; ++i) {
      const int c = column(i);
      const bool valid = c >= 0 && in_n;
      cp_async_16<false>(chunk_smem + stage * kTileBytes + kRowStep * i * kStride, pieces.at(c), valid);
    }
  };
  // Issues the copies of a k-block's kRows / 16 blocks of A, this thread's pieces at `src` (a_first's for that
  // k-block), into ring slot `stage` (16 bytes per thread below kAThreads, 32 for f32).
  constexpr int kAStep = kAThreads * Elem::kAVecs;  // uint4 from one k-block's A to the next's
  const auto load_a_from = [&](const uint4* src, int stage) {
    if (kAThreads == kThreads || tid < kAThreads) {  // whole warps
#pragma unroll
      for (int v = 0; v < Elem::kAVecs; ++v) {
        cp_async_16<false>(a_base + ((stage * Elem::kAVecs + v) * kAThreads + tid) * 16, src + kAThreads * v, true);
      }
    }
  };
  // The same for k-block `b` (range-relative).
  const auto load_a = [&](int b, int stage) { load_a_from(a_first + kAStep * b, stage); };
  // The slot columns of k-block `b` travel through the same pipeline, kStages steps before the B rows they
  // name: threads 0-3 copy 16 bytes each from `src` (the k-block's 16 columns, plus 4 tid) into column ring slot
  // `slot` (b % (2 kStages)).
  const int* columns_first = p.block_columns + 16 * static_cast<size_t>(first) + 4 * tid;
  const auto copy_columns_from = [&](const int* src, bool in_range, int slot) {
    if (tid < 4 && in_range) cp_async_16<false>(c_base + (slot * 16 + 4 * tid) * 4, src, true);
  };
  const auto copy_columns = [&](int b, int slot) { copy_columns_from(columns_first + 16 * b, b < blocks, slot); };

  float acc[kMt][kWarpTiles][4];
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt) {
#pragma unroll
    for (int j = 0; j < kWarpTiles; ++j) acc[mt][j][0] = acc[mt][j][1] = acc[mt][j][2] = acc[mt][j][3] = 0.0f;
  }

  // Pipeline: block x lives in ring slot x % kStages and its columns in column slot x % (2 kStages). Group g
  // (one commit each) holds the copies of block g and the columns of block g + kStages: the prologue commits
  // groups 0 .. kStages - 1 (the columns of blocks 0 .. kStages - 1 read directly), step b group kStages + b.
  // Step b waits for group b + 1 and then, after one barrier, loads the fragments of block b + 1 (registers,
  // double-buffered), runs the mma of block b (fragments loaded in step b - 1) and refills slot b % kStages with
  // block b + kStages: every warp read that slot in step b - 1, before the barrier. No mma waits on a
  // shared-memory load of its own step, and no copy either (`read_columns` below). (f16/bf16; f32 runs its own
  // loop below, one step later.) The heads and the read-ahead: 0.90x-0.95x of the wide kernels' time on 32 x 32
  // blocks, NOTES.md "SpMM step 90".
  // The prologue reads the slot columns of its kStages k-blocks first, all of them, then issues the copies, so
  // that its gathers wait on one round of loads, not on a load per stage (depend_on_all keeps ptxas from sinking
  // each load next to its copy). The first range of a window (blockIdx.z == 0) reads them from p.window_heads, at
  // a place fixed by the window, so that they need not wait on p.window_blocks either; padding past the window's
  // last k-block zero-fills a stage no step reads (a first range shorter than kStages also fills its stages past
  // its end from the heads, unread). The other ranges read them from p.block_columns, at their first k-block.
  static_assert(kStages <= kTcHeadBlocks, "the prologue's slot columns fit in the window's heads");
  const auto prologue = [&](const int* source, bool heads) {
    int columns[kStages][kChunksPerThread];
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
#pragma unroll
      for (int i = 0; i < kChunksPerThread; ++i) {
        columns[s][i] = heads || s < blocks ? __ldg(source + 16 * s + kRowStep * i) : -1;
      }
    }
    columns[0][0] += depend_on_all<kStages * kChunksPerThread>(&columns[0][0], p.n);
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      if (heads || s < blocks) load_b(s, [&](int i) { return columns[s][i]; });
      if (s < blocks) load_a(s, s);
      copy_columns(s + kStages, s + kStages);
      cp_async_commit();
    }
  };
  if (p.window_heads != nullptr && blockIdx.z == 0) {
    prologue(p.window_heads + static_cast<size_t>(window) * kTcHeadBlocks * 16 + chunk_row, true);
  } else {
    prologue(p.block_columns + 16 * static_cast<size_t>(first) + chunk_row, false);
  }
  const int g = lane / 4;
  const int t = lane % 4;
  // ldmatrix.x4.trans as in spmm_tc_kernel: lanes 0-15 address k rows 0-15 of 8 columns, lanes 16-31 those of
  // the next 8: b0/b1 of two n8 tiles per instruction.
  // f32: lane (g, t) loads row t (and t + 4) of each k8 half, columns 4g .. 4g + 3 of the warp's (TcElem).
  const int k_row = kF32 ? t : (lane & 8) + (lane & 7);
  const int col_half = kF32 ? 4 * g : (lane >> 4) * 8;
  const unsigned frag_smem = b_base + k_row * kStride + (warp_col + col_half) * Elem::kBytes;
  // One k-block's fragments in registers: B and this warp's kMt A blocks.
  using Fragments = TcwFragments<T, kWarpTiles, kMt>;
  const auto fetch = [&](Fragments& f, int stage) {
    if constexpr (kF32) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          const unsigned at = frag_smem + stage * kTileBytes + (8 * h + 4 * q) * kStride;
          asm volatile("ld.shared.v4.f32 {%0,%1,%2,%3}, [%4];\n"
                       : "=f"(f.b[h][q].x), "=f"(f.b[h][q].y), "=f"(f.b[h][q].z), "=f"(f.b[h][q].w)
                       : "r"(at));
        }
      }
#pragma unroll
      for (int mt = 0; mt < kMt; ++mt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) f.a[mt][h] = a_tiles[stage][((kMt * warp_row + mt) * 2 + h) * 32 + lane];
      }
    } else {
      load_b_fragments(f.b, frag_smem + stage * kTileBytes);
#pragma unroll
      for (int mt = 0; mt < kMt; ++mt) f.a[mt] = a_tiles[stage][(kMt * warp_row + mt) * 32 + lane];
    }
  };
  const auto multiply = [&](const Fragments& f) {
    if constexpr (kF32) {
      // Per k8 half h: B's big and small parts ([n8 tile][b0, b1]), then for each row tile A's and three mma per
      // n8 tile into the k-block's partial sums, which start from zero; after both halves they are added to the
      // accumulators in f32 (round to nearest): the tensor core truncates its sums, and a long chain of mma into
      // one accumulator lost 5-9 times the CUDA-core kernels' accuracy on the H100 (NOTES.md, "SpMM step 10").
      float part[kMt][4][4] = {};
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        unsigned b_big[4][2], b_small[4][2];
        tf32_split_b(f.b[h], b_big, b_small);
#pragma unroll
        for (int mt = 0; mt < kMt; ++mt) mma_tf32x3(part[mt], f.a[mt][h], b_big, b_small);
      }
#pragma unroll
      for (int mt = 0; mt < kMt; ++mt) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[mt][j][e] += part[mt][j][e];
        }
      }
    } else {
#pragma unroll
      for (int mt = 0; mt < kMt; ++mt) {
        const unsigned a[4] = {f.a[mt].x, f.a[mt].y, f.a[mt].z, f.a[mt].w};
#pragma unroll
        for (int j = 0; j < kWarpTiles / 2; ++j) {
          TcOps<T>::mma(acc[mt][2 * j], a, f.b[j][0], f.b[j][1]);
          TcOps<T>::mma(acc[mt][2 * j + 1], a, f.b[j][2], f.b[j][3]);
        }
      }
    }
  };
  // Ring slots as counters (no modulo in the loop), in step b: stage = b % kStages (block b's slot, refilled
  // with block b + kStages), column_read = (b + kStages) % (2 kStages), column_write = b % (2 kStages); the f32
  // loop refills one step later (its comment).
  const auto next = [](int x, int ring) { return x + 1 == ring ? 0 : x + 1; };
  int stage = 0;
  int column_read = kStages;
  int column_write = 0;
  if constexpr (kF32) {
    // f32 keeps one set of fragments in registers (the double-buffered pair and the split parts would need
    // more than the 128 registers of four blocks per SM): step b loads block b's fragments after the barrier
    // and multiplies them, then refills the slot of block b - 1 (every warp read it in step b - 1, before this
    // barrier) with block b - 1 + kStages. Step 0 refills nothing and commits a group without blocks (the
    // columns of block 2 kStages), so group g holds block g for g < kStages and block g - 1 after: waiting for
    // group b + 1 covers block b either way (and block 1 at step 0).
    int stage_prev = kStages - 1;  // (b - 1) % kStages
    // The sources of step b's copies, advanced a k-block per step: block b - 1 + kStages's A (from step 1),
    // block b + 2 kStages's columns.
    const uint4* a_refill = a_first + kAStep * (kStages - 1);
    const int* columns_next = columns_first + 16 * 2 * kStages;
    for (int b = 0; b < blocks; ++b) {
      cp_async_wait<kStages - 2>();  // group b + 1
      __syncthreads();
      Fragments f;
      fetch(f, stage);
      multiply(f);
      if (b > 0) {
        a_refill += kAStep;
        if (b - 1 + kStages < blocks) {
          load_b(stage_prev, [&](int i) { return c_ring[column_read][chunk_row + kRowStep * i]; });
          load_a_from(a_refill, stage_prev);
        }
        column_read = next(column_read, 2 * kStages);  // (b + kStages) % (2 kStages) for step b + 1
      }
      copy_columns_from(columns_next, b + 2 * kStages < blocks, column_write);
      columns_next += 16;
      cp_async_commit();
      stage_prev = stage;
      stage = next(stage, kStages);
      column_write = next(column_write, 2 * kStages);
    }
  } else {
    // Step b of the f16/bf16 pipeline (see above): fragments of block b + 1 into `following`, the mma of block
    // b from `current`, slot b % kStages refilled with block b + kStages.
    // The refill's B rows are read from the column ring one step before its copies (`columns`: block b +
    // kStages's, read in step b - 1), so that no copy waits on a shared-memory load of its own step. A read for a
    // block past the range finds a slot no copy writes (stale columns, never used).
    int columns[kChunksPerThread] = {};  // read before the loop (read_columns below)
    const auto read_columns = [&](int slot, int (&out)[kChunksPerThread]) {
#pragma unroll
      for (int i = 0; i < kChunksPerThread; ++i) out[i] = c_ring[slot][chunk_row + kRowStep * i];
    };
    // The sources of step b's copies, advanced a k-block per step: block b + kStages's A, block b + 2 kStages's
    // columns (no index arithmetic from the range's start in the loop).
    const uint4* a_next = a_first + kAStep * kStages;
    const int* columns_next = columns_first + 16 * 2 * kStages;
    const auto step = [&](int b, const Fragments& current, Fragments& following) {
      cp_async_wait<kStages - 2>();  // group b + 1: block b + 1, the columns of block b + kStages + 1
      __syncthreads();
      const int stage_next = next(stage, kStages);
      int later[kChunksPerThread];  // block b + 1 + kStages's, for step b + 1
      read_columns(next(column_read, 2 * kStages), later);
      if (b + 1 < blocks) fetch(following, stage_next);
      multiply(current);
      if (b + kStages < blocks) {
        load_b(stage, [&](int i) { return columns[i]; });
        load_a_from(a_next, stage);
      }
#pragma unroll
      for (int i = 0; i < kChunksPerThread; ++i) columns[i] = later[i];
      copy_columns_from(columns_next, b + 2 * kStages < blocks, column_write);
      a_next += kAStep;
      columns_next += 16;
      cp_async_commit();
      stage = stage_next;
      column_read = next(column_read, 2 * kStages);
      column_write = next(column_write, 2 * kStages);
    };
    Fragments even, odd;
    cp_async_wait<kStages - 1>();  // group 0: block 0, the columns of block kStages
    __syncthreads();
    if (blocks > 0) fetch(even, 0);
    read_columns(column_read, columns);
    for (int b = 0; b < blocks; b += 2) {
      step(b, even, odd);
      if (b + 1 < blocks) step(b + 1, odd, even);
    }
  }
  cp_async_wait<0>();
  if (any_nonfinite<kMt * kWarpTiles * 4>(&acc[0][0][0])) {
    // An accumulator is Inf or NaN (a B tile held one, see any_nonfinite): redo this warp's tile of the range
    // exactly, stored entries only (rows g and g + 8 of each of its kMt row tiles, this lane's columns).
#pragma unroll
    for (int mt = 0; mt < kMt; ++mt) {
#pragma unroll
      for (int j = 0; j < kWarpTiles; ++j) acc[mt][j][0] = acc[mt][j][1] = acc[mt][j][2] = acc[mt][j][3] = 0.0f;
    }
    for (int b = 0; b < blocks; ++b) {
      const size_t block = static_cast<size_t>(first + b);
#pragma unroll
      for (int mt = 0; mt < kMt; ++mt) {
        const int sub = kMt * warp_row + mt;  // 16-row tile of the window
        const T* values = reinterpret_cast<const T*>(p.block_values) + (block * (kRows / 16) + sub) * 256;
        exact_block<T, kWarpTiles>(acc[mt], values, p.block_masks + block * kRows + 16 * sub,
                                   p.block_columns + 16 * block, dense, p.n, n0 + warp_col, g, t);
      }
    }
  }

  T* out = static_cast<T*>(p.out);
#ifdef TILESPARSE_CLUSTERS
  if (p.splits > 1 && cluster_blocks() == static_cast<unsigned>(p.splits)) {
    // Launched with the window's p.splits ranges as one cluster (grid z = cluster z, so rank = range): each
    // block leaves its f32 partial tile in its own ring, and block r adds the r-th share of every tile's
    // elements in range order (the fix-up's order: the same bits) and stores C. No scratch in global memory,
    // no second launch.
    constexpr int kTileStride = kColumns + 8;  // floats per row (+8: the float2 stores of a half-warp hit
                                               // distinct banks)
    static_assert(kRows * kTileStride * 4 <= kRingBytes, "a partial tile fits in the ring");
    __syncthreads();  // every warp is done with the ring
    float* tile = reinterpret_cast<float*>(ring);
#pragma unroll
    for (int mt = 0; mt < kMt; ++mt) {
      const int row = warp_row * 16 * kMt + mt * 16 + g;
      if constexpr (kF32) {
        // Columns 8t + 4e + j of the warp's (TcElem<float>): two float4 per row.
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int column = warp_col + 8 * t + 4 * e;
          *reinterpret_cast<float4*>(tile + row * kTileStride + column) =
              make_float4(acc[mt][0][e], acc[mt][1][e], acc[mt][2][e], acc[mt][3][e]);
          *reinterpret_cast<float4*>(tile + (row + 8) * kTileStride + column) =
              make_float4(acc[mt][0][2 + e], acc[mt][1][2 + e], acc[mt][2][2 + e], acc[mt][3][2 + e]);
        }
      } else {
#pragma unroll
        for (int j = 0; j < kWarpTiles; ++j) {
          const int column = warp_col + 8 * j + 2 * t;
          *reinterpret_cast<float2*>(tile + row * kTileStride + column) = make_float2(acc[mt][j][0], acc[mt][j][1]);
          *reinterpret_cast<float2*>(tile + (row + 8) * kTileStride + column) =
              make_float2(acc[mt][j][2], acc[mt][j][3]);
        }
      }
    }
    cluster_sync();
    constexpr int kQuads = kColumns / 4;  // four-column pieces per row
    const int rank = static_cast<int>(cluster_rank());
    const int share_lo = kRows * kQuads * rank / p.splits;
    const int share_hi = kRows * kQuads * (rank + 1) / p.splits;
    const unsigned tile_smem = static_cast<unsigned>(__cvta_generic_to_shared(tile));
    for (int i = share_lo + tid; i < share_hi; i += kThreads) {
      const int row = i / kQuads;
      const int column = 4 * (i % kQuads);
      const unsigned at = tile_smem + 4 * (row * kTileStride + column);
      float4 sum = cluster_load(cluster_address(at, 0));
      for (int r = 1; r < p.splits; ++r) {
        const float4 v = cluster_load(cluster_address(at, r));
        sum.x += v.x;
        sum.y += v.y;
        sum.z += v.z;
        sum.w += v.w;
      }
      const int out_row = window * kRows + row;
      const int out_column = n0 + column;  // a multiple of 4 and n of 8: in or out as a whole, 8-byte aligned
      if (out_row < p.m && out_column < p.n) {
        if constexpr (kScaled) {
          float v[4] = {sum.x, sum.y, sum.z, sum.w};
          finish_store<T, 4>(p, out + static_cast<size_t>(out_row) * p.n + out_column, v, row_bias(p, out_row));
        } else {
          if (p.bias != nullptr) {
            const float b = __ldg(p.bias + out_row);
            sum = make_float4(add_relu(sum.x, b), add_relu(sum.y, b), add_relu(sum.z, b), add_relu(sum.w, b));
          }
          const Vec<T, 4> v = {{from_float<T>(sum.x), from_float<T>(sum.y), from_float<T>(sum.z),
                                from_float<T>(sum.w)}};
          store(out + static_cast<size_t>(out_row) * p.n + out_column, v);
        }
      }
    }
    cluster_sync();  // no block leaves while another still reads its tile
    return;
  }
#endif
  float* partial = p.splits > 1 ? p.partials + static_cast<size_t>(blockIdx.z) * p.m * p.n : nullptr;
  if constexpr (kScaled) {
    // kWidth adjacent elements of a row per store (column and n even, 16-byte pieces in f32: aligned): C through the
    // epilogue (finish_store; `b` the row's bias), or this range's partial tile as they are (the fix-up finishes it).
    const auto put = [&](int row, int column, float b, auto&& v) {
      constexpr int kWidth = sizeof(v) / sizeof(float);
      const size_t at = static_cast<size_t>(row) * p.n + column;
      if (p.splits == 1) {
        finish_store<T, kWidth>(p, out + at, v, b);
      } else {
        Vec<float, kWidth> raw;
#pragma unroll
        for (int i = 0; i < kWidth; ++i) raw.v[i] = v[i];
        store(partial + at, raw);
      }
    };
#pragma unroll
    for (int mt = 0; mt < kMt; ++mt) {
      const int row_lo = window * kRows + warp_row * 16 * kMt + mt * 16 + g;
      const int row_hi = row_lo + 8;
      const float b_lo = p.splits == 1 ? row_bias(p, row_lo) : 0.0f;
      const float b_hi = p.splits == 1 ? row_bias(p, row_hi) : 0.0f;
      if constexpr (kF32) {
        // Columns 8t + 4e + j of the warp's (TcElem<float>): four adjacent columns per store, 16-byte aligned
        // (n % 8 == 0), in or out as a whole.
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int column = n0 + warp_col + 8 * t + 4 * e;
          if (column >= p.n) continue;
          if (row_lo < p.m) {
            float v[4] = {acc[mt][0][e], acc[mt][1][e], acc[mt][2][e], acc[mt][3][e]};
            put(row_lo, column, b_lo, v);
          }
          if (row_hi < p.m) {
            float v[4] = {acc[mt][0][2 + e], acc[mt][1][2 + e], acc[mt][2][2 + e], acc[mt][3][2 + e]};
            put(row_hi, column, b_hi, v);
          }
        }
      } else {
#pragma unroll
        for (int j = 0; j < kWarpTiles; ++j) {
          const int column = n0 + warp_col + 8 * j + 2 * t;  // n % 8 == 0: column < n means column + 1 < n
          if (column >= p.n) continue;
          if (row_lo < p.m) {
            float v[2] = {acc[mt][j][0], acc[mt][j][1]};
            put(row_lo, column, b_lo, v);
          }
          if (row_hi < p.m) {
            float v[2] = {acc[mt][j][2], acc[mt][j][3]};
            put(row_hi, column, b_hi, v);
          }
        }
      }
    }
  } else {
    if (p.bias != nullptr && p.splits == 1) {
      // The bias + ReLU epilogue, in place (C only: a partial tile gets it in the fix-up, after the ranges' sum).
#pragma unroll
      for (int mt = 0; mt < kMt; ++mt) {
        const int row_lo = window * kRows + warp_row * 16 * kMt + mt * 16 + g;
        const float b_lo = row_bias(p, row_lo), b_hi = row_bias(p, row_lo + 8);
#pragma unroll
        for (int j = 0; j < kWarpTiles; ++j) add_relu_fragment(acc[mt][j], b_lo, b_hi);
      }
    }
    // Two adjacent elements of a row per store (column and n even: aligned): C, or this range's partial tile.
    const auto put = [&](int row, int column, float x, float y) {
      const size_t at = static_cast<size_t>(row) * p.n + column;
      if (p.splits == 1) {
        const Vec<T, 2> v = {{from_float<T>(x), from_float<T>(y)}};
        store(out + at, v);
      } else {
        *reinterpret_cast<float2*>(partial + at) = make_float2(x, y);
      }
    };
#pragma unroll
    for (int mt = 0; mt < kMt; ++mt) {
      const int row_lo = window * kRows + warp_row * 16 * kMt + mt * 16 + g;
      const int row_hi = row_lo + 8;
      if constexpr (kF32) {
        // Columns 8t + 4e + j of the warp's (TcElem<float>): four adjacent columns per store, 16-byte aligned
        // (n % 8 == 0), in or out as a whole.
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int column = n0 + warp_col + 8 * t + 4 * e;
          if (column >= p.n) continue;
          float* base = p.splits == 1 ? static_cast<float*>(p.out) : partial;
          const auto put4 = [&](int row, int first) {
            *reinterpret_cast<float4*>(base + static_cast<size_t>(row) * p.n + column) =
                make_float4(acc[mt][0][first], acc[mt][1][first], acc[mt][2][first], acc[mt][3][first]);
          };
          if (row_lo < p.m) put4(row_lo, e);
          if (row_hi < p.m) put4(row_hi, 2 + e);
        }
      } else {
#pragma unroll
        for (int j = 0; j < kWarpTiles; ++j) {
          const int column = n0 + warp_col + 8 * j + 2 * t;  // n % 8 == 0: column < n means column + 1 < n
          if (column >= p.n) continue;
          if (row_lo < p.m) put(row_lo, column, acc[mt][j][0], acc[mt][j][1]);
          if (row_hi < p.m) put(row_hi, column, acc[mt][j][2], acc[mt][j][3]);
        }
      }
    }
  }
}

/// @brief C = the sum of the p.splits partial tiles of spmm_tcw_kernel, added in range order (the same bits
/// every run), through the launch's epilogue (finish_store), rounded once to T. Two elements per
/// thread, grid-stride.
template <typename T>
__device__ __forceinline__ void spmm_tc_fixup(const SpmmTcParams& p) {
  const size_t pairs = static_cast<size_t>(p.m) * p.n / 2;  // n is even
  const size_t plane = static_cast<size_t>(p.m) * p.n;
  T* out = static_cast<T*>(p.out);
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < pairs;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    float2 sum = reinterpret_cast<const float2*>(p.partials)[i];
    for (int z = 1; z < p.splits; ++z) {
      const float2 v = reinterpret_cast<const float2*>(p.partials + z * plane)[i];
      sum.x += v.x;
      sum.y += v.y;
    }
    float v[2] = {sum.x, sum.y};
    // n even: both elements are in one row.
    finish_store<T, 2>(p, out + 2 * i, v, p.bias != nullptr ? __ldg(p.bias + 2 * i / p.n) : 0.0f);
  }
}

}  // namespace ts

/// One kernel per (dtype, n8 tiles per warp), and its twin `_s` whose stores take the scalars alpha and beta
/// (finish_store); src/spmm/tensor_core.rs builds the same names. Two kernels, not a runtime test, because the
/// runtime test cost the plain product 5-13% on small problems (NOTES.md, "SpMM step 101").
#define TILESPARSE_SPMM_TC(tag, T, tiles)                                                               \
  extern "C" __global__ void __launch_bounds__(ts::kTcWarps * 32)                                    \
      spmm_tc_##tag##_n##tiles(const ts::SpmmTcParams p) {                                           \
    ts::spmm_tc_kernel<T, tiles, false>(p);                                                          \
  }                                                                                                  \
  extern "C" __global__ void __launch_bounds__(ts::kTcWarps * 32)                                    \
      spmm_tc_##tag##_n##tiles##_s(const ts::SpmmTcParams p) {                                       \
    ts::spmm_tc_kernel<T, tiles, true>(p);                                                           \
  }
TILESPARSE_SPMM_TC(f16, __half, 4)
TILESPARSE_SPMM_TC(f16, __half, 8)
TILESPARSE_SPMM_TC(bf16, __nv_bfloat16, 4)
TILESPARSE_SPMM_TC(bf16, __nv_bfloat16, 8)
TILESPARSE_SPMM_TC(f32, float, 4)

/// The wide-window kernels: spmm_tc_<dtype>_w<rows>_n<tiles> (src/spmm/tensor_core.rs builds the same names), for
/// tcw_min_blocks<T>() blocks per SM, each with its twin `_s` that takes the scalars (as TILESPARSE_SPMM_TC's).
#define TILESPARSE_SPMM_TCW(tag, T, rows, tiles)                                                        \
  extern "C" __global__ void __launch_bounds__(ts::kTcWarps * 32, ts::tcw_min_blocks<T>())            \
      spmm_tc_##tag##_w##rows##_n##tiles(const ts::SpmmTcParams p) {                                 \
    ts::spmm_tcw_kernel<T, tiles, rows, false>(p);                                                   \
  }                                                                                                  \
  extern "C" __global__ void __launch_bounds__(ts::kTcWarps * 32, ts::tcw_min_blocks<T>())            \
      spmm_tc_##tag##_w##rows##_n##tiles##_s(const ts::SpmmTcParams p) {                             \
    ts::spmm_tcw_kernel<T, tiles, rows, true>(p);                                                    \
  }
TILESPARSE_SPMM_TCW(f16, __half, 64, 8)
TILESPARSE_SPMM_TCW(f16, __half, 64, 16)
TILESPARSE_SPMM_TCW(bf16, __nv_bfloat16, 64, 8)
TILESPARSE_SPMM_TCW(bf16, __nv_bfloat16, 64, 16)
TILESPARSE_SPMM_TCW(f32, float, 64, 8)
TILESPARSE_SPMM_TCW(f16, __half, 32, 8)
TILESPARSE_SPMM_TCW(f16, __half, 32, 16)
TILESPARSE_SPMM_TCW(bf16, __nv_bfloat16, 32, 8)
TILESPARSE_SPMM_TCW(bf16, __nv_bfloat16, 32, 16)
TILESPARSE_SPMM_TCW(f32, float, 32, 8)
/// Threads per block of the fix-up (src/spmm/tensor_core.rs launches it with the same number).
#define TILESPARSE_SPMM_TC_FIXUP_THREADS 256
TILESPARSE_KERNEL_PER_TYPE(spmm_tc_fixup, SpmmTcParams, TILESPARSE_SPMM_TC_FIXUP_THREADS)
