/**
 * @file @brief SDDMM on the tensor cores, for structures whose 64 x 64 tiles hold many entries (moderately pruned
 * weights, attention masks of windows and blocks): a block computes a 64 x 64 tile of A B^T densely with mma.sync
 * (f16/bf16: m16n8k16 with f32 sums; f32: 3xTF32 on m16n8k8, as the SpMM tensor-core kernels), keeps it in shared
 * memory, and writes the tile's stored entries of C from it. Tiles holding no entry cost nothing.
 *
 * A plan (src/sddmm.rs, `SddmmPlan::tensor_cores`) lists the tiles of C that hold an entry with the most entries a row
 * has in each, and for each of their 64 rows the row's first entry in the tile; a block takes one tile, so every tile's latency overlaps the others' and
 * no row of tiles (a global token's full row) sets the time. Four warps, 2 x 2, each 32 x 32 of the tile. The k loop
 * copies a chunk of 64 bytes of each of the tile's 64 rows of A and of B per stage (cp.async, kSddmmTcStages in
 * flight; element loads where k is not a multiple of 16 bytes).
 * f32: each chunk (16 of k) is summed on the tensor cores from zero (six mma per n8 tile, small terms first) and
 * added to the f32 sums with round-to-nearest adds: the model of `spmm_error_bound_tf32x3` (src/cpu/oracle.rs).
 * f16/bf16: one chain of mma over k, the model of `spmm_error_bound_tc_half`.
 *
 * Every product of an entry's dot product is a real one (k is dense), so unlike the SpMM kernels no padding multiplies
 * an Inf; rows past m, columns past n and k past its end are zeros and never stored. A sum that comes out Inf or NaN
 * (an Inf or NaN in A or B; 3xTF32 splits an Inf into Inf and NaN) is computed again by one lane with exact f32 FMAs
 * over k in order, reading A and B from global memory, so Inf and NaN reach C as the gather kernel gives them.
 */
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common/epilogue.cuh"
#include "common/params.cuh"
#include "common/tc_shared.cuh"
#include "common/vector.cuh"

namespace ts {

/// Rows and columns of C per tile, threads per block (four warps, 2 x 2 of 32 x 32), stages of the k loop.
constexpr int kSddmmTcTile = 64;
constexpr int kSddmmTcThreads = 128;
constexpr int kSddmmTcStages = 3;
/// Bytes of a row per stage (a chunk of k), and the row's stride in shared memory: 16 bytes of padding make the
/// fragment loads (row g, word t of a chunk, lanes 4g + t) fall in 32 distinct banks.
constexpr int kSddmmTcChunkBytes = 64;
constexpr int kSddmmTcRowWords = (kSddmmTcChunkBytes + 16) / 4;
/// Words of one stage: the chunk of A's 64 rows, then B's.
constexpr int kSddmmTcStageWords = 2 * kSddmmTcTile * kSddmmTcRowWords;
/// The tile of A B^T in shared memory (f32, a stride of 68 words), over the stages once the k loop is done.
constexpr int kSddmmTcSumStride = kSddmmTcTile + 4;
constexpr int kSddmmTcSharedWords = kSddmmTcStages * kSddmmTcStageWords > kSddmmTcTile * kSddmmTcSumStride
                                        ? kSddmmTcStages * kSddmmTcStageWords
                                        : kSddmmTcTile * kSddmmTcSumStride;

/// @brief Copies chunk `chunk` of k (kSddmmTcChunkBytes per row) of rows first..first + 63 of `dense` (rows x k,
/// row-major) into `stage` (64 rows at kSddmmTcRowWords): 16-byte cp.async where kAligned (k a multiple of 16 bytes;
/// zero-filled past the rows and k), element loads otherwise (zeros likewise).
template <typename T, bool kAligned>
__device__ __forceinline__ void sddmm_tc_load(unsigned* stage, const T* __restrict__ dense, int rows, int k,
                                              int first, int chunk) {
  constexpr int kVec = 16 / sizeof(T);
  constexpr int kPieces = kSddmmTcChunkBytes / 16;  // per row
  const int k0 = chunk * (kSddmmTcChunkBytes / static_cast<int>(sizeof(T)));
#pragma unroll
  for (int i = 0; i < kSddmmTcTile * kPieces / kSddmmTcThreads; ++i) {
    const int piece = threadIdx.x + i * kSddmmTcThreads;
    const int r = piece / kPieces;
    const int kk = k0 + (piece % kPieces) * kVec;
    const int row = first + r;
    unsigned* to = stage + r * kSddmmTcRowWords + (piece % kPieces) * 4;
    if constexpr (kAligned) {
      const bool valid = row < rows && kk < k;
      const T* from = valid ? dense + static_cast<long long>(row) * k + kk : dense;
      cp_async_16<true>(static_cast<unsigned>(__cvta_generic_to_shared(to)), from, valid);
    } else {
      T v[kVec];
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        v[j] = row < rows && kk + j < k ? dense[static_cast<long long>(row) * k + kk + j] : from_float<T>(0.0f);
      }
      uint4 words;
      memcpy(&words, v, 16);
      *reinterpret_cast<uint4*>(to) = words;
    }
  }
}

/// @brief One stage's products for a warp's 32 x 32 of the tile: `acc` [m16 tile][n8 tile][4]. f16/bf16: two k16
/// steps of mma.m16n8k16 into acc. f32: two k8 halves of 3xTF32 summed from zero, then added to acc.
template <typename T>
__device__ __forceinline__ void sddmm_tc_stage(const unsigned* stage, int warp_row, int warp_col,
                                               float (&acc)[2][4][4]) {
  const int lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const unsigned* a_rows = stage + warp_row * kSddmmTcRowWords;
  const unsigned* b_rows = stage + (kSddmmTcTile + warp_col) * kSddmmTcRowWords;
  if constexpr (sizeof(T) == 2) {
#pragma unroll
    for (int step = 0; step < 2; ++step) {
      unsigned a[2][4], b[4][2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const unsigned* r0 = a_rows + (16 * i + g) * kSddmmTcRowWords + 8 * step + t;
        const unsigned* r1 = r0 + 8 * kSddmmTcRowWords;
        a[i][0] = r0[0];
        a[i][1] = r1[0];
        a[i][2] = r0[4];
        a[i][3] = r1[4];
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const unsigned* c = b_rows + (8 * j + g) * kSddmmTcRowWords + 8 * step + t;
        b[j][0] = c[0];
        b[j][1] = c[4];
      }
#pragma unroll
      for (int i = 0; i < 2; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          TcOps<T>::mma(acc[i][j], a[i], b[j][0], b[j][1]);
        }
      }
    }
  } else {
    float part[2][4][4];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int q = 0; q < 4; ++q) part[i][j][q] = 0.0f;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      unsigned a_big[2][4], a_small[2][4], b_big[4][2], b_small[4][2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const unsigned* r0 = a_rows + (16 * i + g) * kSddmmTcRowWords + 8 * half + t;
        const unsigned* r1 = r0 + 8 * kSddmmTcRowWords;
        const unsigned x[4] = {r0[0], r1[0], r0[4], r1[4]};
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          a_big[i][q] = tf32_big(__uint_as_float(x[q]));
          a_small[i][q] = __float_as_uint(__uint_as_float(x[q]) - __uint_as_float(a_big[i][q]));
        }
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const unsigned* c = b_rows + (8 * j + g) * kSddmmTcRowWords + 8 * half + t;
        const unsigned x[2] = {c[0], c[4]};
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          b_big[j][q] = tf32_big(__uint_as_float(x[q]));
          b_small[j][q] = __float_as_uint(__uint_as_float(x[q]) - __uint_as_float(b_big[j][q]));
        }
      }
#pragma unroll
      for (int i = 0; i < 2; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          mma_tf32(part[i][j], a_small[i], b_big[j][0], b_big[j][1]);
          mma_tf32(part[i][j], a_big[i], b_small[j][0], b_small[j][1]);
          mma_tf32(part[i][j], a_big[i], b_big[j][0], b_big[j][1]);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int q = 0; q < 4; ++q) acc[i][j][q] += part[i][j][q];
  }
}

/// @brief Entry (row, column)'s dot product with exact f32 FMAs over k in order, from global memory (the rare redo
/// of a sum that came out Inf or NaN).
template <typename T>
__device__ __noinline__ float sddmm_tc_exact(const T* lhs, const T* rhs, int k, int row, int column) {
  const T* a = lhs + static_cast<long long>(row) * k;
  const T* b = rhs + static_cast<long long>(column) * k;
  float sum = 0.0f;
  for (int i = 0; i < k; ++i) sum = fmaf(to_float(a[i]), to_float(b[i]), sum);
  return sum;
}

/// @brief The k loop for one 64 x 64 tile (rows row0.., columns col0..): the warp's 32 x 32 of A B^T in `acc`.
template <typename T, bool kAligned>
__device__ __forceinline__ void sddmm_tc_products(const SddmmTcParams& p, unsigned* shared, int row0, int col0,
                                                  float (&acc)[2][4][4]) {
  const int warp = threadIdx.x >> 5;
  const int warp_row = (warp >> 1) * 32, warp_col = (warp & 1) * 32;
  const T* lhs = static_cast<const T*>(p.lhs);
  const T* rhs = static_cast<const T*>(p.rhs);
  constexpr int kChunk = kSddmmTcChunkBytes / static_cast<int>(sizeof(T));
  const int chunks = (p.k + kChunk - 1) / kChunk;
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.0f;
  auto load = [&](int chunk) {
    unsigned* stage = shared + (chunk % kSddmmTcStages) * kSddmmTcStageWords;
    sddmm_tc_load<T, kAligned>(stage, lhs, p.m, p.k, row0, chunk);
    sddmm_tc_load<T, kAligned>(stage + kSddmmTcTile * kSddmmTcRowWords, rhs, p.n, p.k, col0, chunk);
  };
#pragma unroll
  for (int s = 0; s < kSddmmTcStages - 1; ++s) {
    if (s < chunks) load(s);
    cp_async_commit();
  }
  for (int chunk = 0; chunk < chunks; ++chunk) {
    cp_async_wait<kSddmmTcStages - 2>();
    // Every warp's copies of this chunk have landed, and every warp is done with the stage the next load reuses.
    __syncthreads();
    if (chunk + kSddmmTcStages - 1 < chunks) load(chunk + kSddmmTcStages - 1);
    cp_async_commit();
    sddmm_tc_stage<T>(shared + (chunk % kSddmmTcStages) * kSddmmTcStageWords, warp_row, warp_col, acc);
  }
  cp_async_wait<0>();
  // The stages are the tile of sums next: every warp is done reading them.
  __syncthreads();
}

/// @brief Writes a tile's stored entries from its sums (`sums`, 64 rows at kSddmmTcSumStride): each warp takes 16
/// rows; each lane loads the columns of its rows' entries first + lane (and first + 32 + lane where kHalves is 2: a
/// row of the tile holds at most 64), all loads in flight together, and stores the entries whose column lies below the
/// tile's end (columns ascend within a row, so they are the row's first). The plan says per tile how many entries its
/// widest row has, so tiles of rows of at most 32 take one half.
template <typename T, int kHalves>
__device__ __forceinline__ void sddmm_tc_store_entries(const SddmmTcParams& p, const float* sums,
                                                       const int* first_entry, const int* row_end, int row0,
                                                       int col0) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  T* values = static_cast<T*>(p.values);
  const int tile_end = col0 + kSddmmTcTile;
  int column[16][kHalves];
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const int r = warp * 16 + i;
    const int e = first_entry[r] + lane;
    const int end = row_end[r];
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
      column[i][h] = e + 32 * h < end ? __ldg(p.column_indices + e + 32 * h) : tile_end;
    }
  }
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const int r = warp * 16 + i;
    const float* row_sums = sums + r * kSddmmTcSumStride;
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
      const int c = column[i][h];
      if (c < tile_end) {
        float v = row_sums[c - col0];
        if (!isfinite(v)) {
          v = sddmm_tc_exact<T>(static_cast<const T*>(p.lhs), static_cast<const T*>(p.rhs), p.k, row0 + r, c);
        }
        float out[1] = {v};
        finish_store<T, 1>(values + first_entry[r] + 32 * h + lane, out, p.alpha, p.beta, false, 0.0f);
      }
    }
  }
}

/// @brief One block of the tensor-core SDDMM: one tile of the plan (see the file's comment).
template <typename T>
__device__ __forceinline__ void sddmm_tc_kernel(const SddmmTcParams& p) {
  __shared__ __align__(16) unsigned shared[kSddmmTcSharedWords];
  __shared__ int first_entry[kSddmmTcTile], row_end[kSddmmTcTile];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int row0 = __ldg(p.tiles + 3 * blockIdx.x) * kSddmmTcTile;
  const int col0 = __ldg(p.tiles + 3 * blockIdx.x + 1) * kSddmmTcTile;
  const int widest = __ldg(p.tiles + 3 * blockIdx.x + 2);  // the most entries a row has in the tile

  // Each row's first entry in the tile (the plan's) and its end, read while the k loop runs (its first barrier
  // publishes them).
  if (threadIdx.x < kSddmmTcTile) {
    const int row = row0 + threadIdx.x;
    first_entry[threadIdx.x] = __ldg(p.starts + static_cast<long long>(blockIdx.x) * kSddmmTcTile + threadIdx.x);
    row_end[threadIdx.x] = row < p.m ? __ldg(p.row_offsets + row + 1) : 0;
  }

  float acc[2][4][4];
  if (p.k % (16 / static_cast<int>(sizeof(T))) == 0) {
    sddmm_tc_products<T, true>(p, shared, row0, col0, acc);
  } else {
    sddmm_tc_products<T, false>(p, shared, row0, col0, acc);
  }
  {
    const int g = lane >> 2, t = lane & 3;
    const int warp_row = (warp >> 1) * 32, warp_col = (warp & 1) * 32;
    float* out = reinterpret_cast<float*>(shared);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float* at = out + (warp_row + 16 * i + g) * kSddmmTcSumStride + warp_col + 8 * j + 2 * t;
        *reinterpret_cast<float2*>(at) = make_float2(acc[i][j][0], acc[i][j][1]);
        *reinterpret_cast<float2*>(at + 8 * kSddmmTcSumStride) = make_float2(acc[i][j][2], acc[i][j][3]);
      }
    }
  }
  __syncthreads();

  // The tile's stored entries (sddmm_tc_store_entries), in one half or two.
  if (widest > 32) {
    sddmm_tc_store_entries<T, 2>(p, reinterpret_cast<const float*>(shared), first_entry, row_end, row0, col0);
  } else {
    sddmm_tc_store_entries<T, 1>(p, reinterpret_cast<const float*>(shared), first_entry, row_end, row0, col0);
  }
}

}  // namespace ts
