/**
 * @file @brief Per-thread guards in the n dimension, for n that is not a multiple of block_items_x.
 */
#pragma once

namespace ts {

/// @brief Which of a thread's dense vectors fall inside the n columns of B and C.
template <typename Config>
struct PredicatesN {
  bool in_range[Config::kThreadVectorsX];

  /// `first_column` is the column of this thread's first vector; vectors are block_width apart.
  __device__ __forceinline__ PredicatesN(int first_column, int n) {
#pragma unroll
    for (int v = 0; v < Config::kThreadVectorsX; ++v) {
      // n % dense_vector_width == 0 (checked on the host), so a vector is either wholly in or wholly out.
      in_range[v] = !Config::kPredicateLoads ||
                    first_column + v * Config::kBlockWidth * Config::kDenseVectorWidth < n;
    }
  }
};

}  // namespace ts
