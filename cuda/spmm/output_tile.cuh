/**
 * @file @brief Stage 4: the optional bias + ReLU epilogue and the vector stores of the output tile.
 */
#pragma once

#include "common/vector.cuh"
#include "spmm/predicates.cuh"

namespace ts {

/// @brief Writes this thread's accumulators to C, predicated in n.
template <typename Config>
__device__ __forceinline__ void store_output_tile(
    float (&accumulator)[Config::kThreadVectorsX * Config::kDenseVectorWidth], const float* bias, int row,
    typename Config::Scalar* out_row, const PredicatesN<Config>& predicates) {
  typedef typename Config::Scalar T;
  constexpr int kDV = Config::kDenseVectorWidth;
  if (bias != nullptr) {
    const float b = __ldg(bias + row);
#pragma unroll
    for (int i = 0; i < Config::kThreadVectorsX * kDV; ++i) {
      const float x = accumulator[i] + b;
      // `x < 0 ? 0 : x` and not `x > 0 ? x : 0`: a NaN must come out as NaN, not as 0.
      accumulator[i] = x < 0.0f ? 0.0f : x;
    }
  }
#pragma unroll
  for (int v = 0; v < Config::kThreadVectorsX; ++v) {
    if (predicates.in_range[v]) {
      Vec<T, kDV> out;
#pragma unroll
      for (int e = 0; e < kDV; ++e) out.v[e] = from_float<T>(accumulator[v * kDV + e]);
      store(out_row + v * Config::kBlockWidth * kDV, out);
    }
  }
}

}  // namespace ts
