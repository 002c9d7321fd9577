/**
 * @file @brief The tiled SDDMM kernel: a block takes one unit of a plan (src/sddmm.rs, `SddmmPlan`), a run of one
 * row tile's column segments. It copies the tile's rows of A into shared memory once, then each group of kLanes lanes
 * takes a segment (one column j of C within the tile): it loads row j of B into registers once (at most kMaxVectors
 * vectors per lane) and walks the segment's entries, each a dot product of that row with a row of the tile of A from
 * shared memory, added over the group by shuffles. Where neighbouring rows share columns (uniform 4096^2 at 80-90%:
 * 6-12 entries per column per tile), B's rows are read from L2 that many times fewer than by sddmm_kernel.
 */
#pragma once

#include "common/epilogue.cuh"
#include "common/params.cuh"
#include "common/vector.cuh"

namespace ts {

/// Vectors of a row of B each lane holds: k <= kSddmmMaxVectors x kLanes x kVector.
constexpr int kSddmmMaxVectors = 8;

/// @brief One unit of the plan (see the file's comment). The block's dynamic shared memory holds tile_rows x a_stride
/// elements of T.
template <typename T, int kVector, int kLanes>
__device__ __forceinline__ void sddmm_tiled_kernel(const SddmmTiledParams& p) {
  static_assert(kLanes >= 1 && kLanes <= 32 && (kLanes & (kLanes - 1)) == 0, "kLanes must be a power of two <= 32");
  extern __shared__ __align__(16) unsigned char sddmm_shared[];
  T* a_tile = reinterpret_cast<T*>(sddmm_shared);  // (tile_rows, a_stride), shared
  const int tile = p.units[3 * blockIdx.x];
  const int segment_begin = p.units[3 * blockIdx.x + 1];
  const int segment_end = p.units[3 * blockIdx.x + 2];
  const int row0 = tile * p.tile_rows;
  const int rows = min(p.tile_rows, p.m - row0);
  const T* __restrict__ lhs = static_cast<const T*>(p.lhs);
  const T* __restrict__ rhs = static_cast<const T*>(p.rhs);
  T* values = static_cast<T*>(p.values);

  // The tile's rows of A into shared memory, one vector per thread and step.
  const int row_vectors = p.k / kVector;
  for (int i = threadIdx.x; i < rows * row_vectors; i += blockDim.x) {
    const int r = i / row_vectors;
    const int c = (i - r * row_vectors) * kVector;
    store(a_tile + r * p.a_stride + c, load_global<T, kVector>(lhs + static_cast<long long>(row0 + r) * p.k + c));
  }
  __syncthreads();

  constexpr int kGroups = 32 / kLanes;
  const int lane = threadIdx.x & 31;
  const int group = (threadIdx.x >> 5) * kGroups + lane / kLanes;  // the block's group
  const int slot = lane % kLanes;
  const int block_groups = blockDim.x / kLanes;
  // Block-uniform rounds, so every lane of a warp reaches the shuffles together.
  const int rounds = (segment_end - segment_begin + block_groups - 1) / block_groups;
  for (int round = 0; round < rounds; ++round) {
    const int s = segment_begin + round * block_groups + group;
    const bool has = s < segment_end;
    const int first = has ? __ldg(p.segment_starts + s) : 0;
    const int length = has ? __ldg(p.segment_starts + s + 1) - first : 0;
    const long long b_row = has ? static_cast<long long>(__ldg(p.segment_columns + s)) * p.k : 0;
    // (kSddmmMaxVectors) this lane's vectors of the segment's row of B, registers.
    Vec<T, kVector> b_fragment[kSddmmMaxVectors];
#pragma unroll
    for (int v = 0; v < kSddmmMaxVectors; ++v) {
      const int kk = (v * kLanes + slot) * kVector;
      b_fragment[v] = has && kk < p.k ? load_global<T, kVector>(rhs + b_row + kk) : zero_vec<T, kVector>();
    }
    // The entries in chunks of kLanes: each lane of the group loads one entry's row and index, so the loads of a chunk
    // are in flight together, and the group passes them round by shuffles.
    const int longest = __reduce_max_sync(0xffffffffu, length);
    const int group_lane0 = lane & ~(kLanes - 1);
    for (int base = 0; base < longest; base += kLanes) {
      const bool mine = base + slot < length;
      const int my_row = mine ? __ldg(p.entry_rows + first + base + slot) : 0;
      const int my_index = mine ? __ldg(p.entry_index + first + base + slot) : 0;
      const int count = min(kLanes, longest - base);  // warp-uniform
      for (int j = 0; j < count; ++j) {
        const int row = __shfl_sync(0xffffffffu, my_row, group_lane0 + j);
        const int index = __shfl_sync(0xffffffffu, my_index, group_lane0 + j);
        const T* a_row = a_tile + row * p.a_stride;
        float sum = 0.0f;
#pragma unroll
        for (int v = 0; v < kSddmmMaxVectors; ++v) {
          const int kk = (v * kLanes + slot) * kVector;
          if (kk < p.k) {
            const Vec<T, kVector> a = load_shared<T, kVector>(a_row + kk);
#pragma unroll
            for (int e = 0; e < kVector; ++e) sum = fmaf(to_float(a.v[e]), to_float(b_fragment[v].v[e]), sum);
          }
        }
#pragma unroll
        for (int offset = kLanes / 2; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
        if (base + j < length && slot == 0) {
          float out[1] = {sum};
          finish_store<T, 1>(values + index, out, p.alpha, p.beta, false, 0.0f);
        }
      }
    }
  }
}

}  // namespace ts
