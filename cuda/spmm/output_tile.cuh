/**
 * @file @brief Stage 4: the vector stores of the output tile, through the epilogue (alpha, beta, bias + ReLU).
 */
#pragma once

#include "common/epilogue.cuh"
#include "common/params.cuh"
#include "common/vector.cuh"
#include "spmm/predicates.cuh"

namespace ts {

/// @brief Writes this thread's accumulators to C, predicated in n, through the launch's epilogue (finish_store:
/// alpha, beta, bias + ReLU), one dense vector at a time.
template <typename Config>
__device__ __forceinline__ void store_output_tile(
    float (&accumulator)[Config::kThreadVectorsX * Config::kDenseVectorWidth], const SpmmParams& p, int row,
    typename Config::Scalar* out_row, const PredicatesN<Config>& predicates) {
  typedef typename Config::Scalar T;
  constexpr int kDV = Config::kDenseVectorWidth;
  const float b = p.bias != nullptr ? __ldg(p.bias + row) : 0.0f;
#pragma unroll
  for (int v = 0; v < Config::kThreadVectorsX; ++v) {
    if (predicates.in_range[v]) {
      float out[kDV];
#pragma unroll
      for (int e = 0; e < kDV; ++e) out[e] = accumulator[v * kDV + e];
      finish_store<T, kDV>(p, out_row + v * Config::kBlockWidth * kDV, out, b);
    }
  }
}

/// @brief Writes this thread's f32 accumulators to its piece's partial row (no bias: the fix-up adds it),
/// predicated in n, in vectors of up to four floats. `partial_row` is aligned to the dense vector width,
/// hence to the store width.
template <typename Config>
__device__ __forceinline__ void store_partial_tile(
    const float (&accumulator)[Config::kThreadVectorsX * Config::kDenseVectorWidth], float* partial_row,
    const PredicatesN<Config>& predicates) {
  constexpr int kDV = Config::kDenseVectorWidth;
  constexpr int kStoreWidth = kDV < 4 ? kDV : 4;
#pragma unroll
  for (int v = 0; v < Config::kThreadVectorsX; ++v) {
    if (predicates.in_range[v]) {
#pragma unroll
      for (int e = 0; e < kDV; e += kStoreWidth) {
        Vec<float, kStoreWidth> out;
#pragma unroll
        for (int i = 0; i < kStoreWidth; ++i) out.v[i] = accumulator[v * kDV + e + i];
        store(partial_row + v * Config::kBlockWidth * kDV + e, out);
      }
    }
  }
}

}  // namespace ts
