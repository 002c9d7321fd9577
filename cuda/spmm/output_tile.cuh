/**
 * @file @brief Stage 4: the optional bias + ReLU epilogue and the vector stores of the output tile.
 */
#pragma once

#include "common/epilogue.cuh"
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
    for (int i = 0; i < Config::kThreadVectorsX * kDV; ++i) accumulator[i] = add_relu(accumulator[i], b);
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
