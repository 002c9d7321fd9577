/**
 * @file @brief Stage 3: multiply-accumulate of a shared-memory value tile with a register fragment of B, fully
 * unrolled, accumulating in float.
 */
#pragma once

#include "common/vector.cuh"
#include "spmm/dense_tile.cuh"

namespace ts {

/// @brief accumulator[x] += sum over the tile's k of value[k] * fragment[k][x].
template <typename Config>
__device__ __forceinline__ void tile_mac(const typename Config::Scalar* values_tile,
                                         const typename DenseTileLoader<Config>::Fragment& fragment,
                                         float (&accumulator)[Config::kThreadVectorsX * Config::kDenseVectorWidth]) {
  typedef typename Config::Scalar T;
  constexpr int kSV = Config::kSparseVectorWidth;
  constexpr int kDV = Config::kDenseVectorWidth;
#pragma unroll
  for (int k0 = 0; k0 < Config::kBlockItemsK; k0 += kSV) {
    // The whole subwarp reads the same values: broadcast vector loads from shared memory.
    const Vec<T, kSV> values = load_shared<T, kSV>(values_tile + k0);
#pragma unroll
    for (int j = 0; j < kSV; ++j) {
      const float a = to_float(values.v[j]);
#pragma unroll
      for (int v = 0; v < Config::kThreadVectorsX; ++v) {
#pragma unroll
        for (int e = 0; e < kDV; ++e) {
          accumulator[v * kDV + e] = fmaf(a, to_float(fragment[k0 + j][v].v[e]), accumulator[v * kDV + e]);
        }
      }
    }
  }
}

}  // namespace ts
