/**
 * @file @brief The optional bias + ReLU epilogue, shared by the tiles (cuda/spmm/output_tile.cuh) and the
 * tensor-core kernels (cuda/spmm/tensor_core.cuh, cuda/spmm90a/spmm90a.cu): C = ReLU(A B + bias[row]).
 */
#pragma once

namespace ts {

/// @brief ReLU(x + b). `x < 0 ? 0 : x` and not `x > 0 ? x : 0`: a NaN must come out as NaN, not as 0.
__device__ __forceinline__ float add_relu(float x, float b) {
  x += b;
  return x < 0.0f ? 0.0f : x;
}

/// @brief The bias + ReLU epilogue of one mma.sync C fragment (m16n8): elements 0 and 1 are in row g of its 16-row
/// tile, whose bias is `lo`, 2 and 3 in row g + 8, whose bias is `hi`.
__device__ __forceinline__ void add_relu_fragment(float (&c)[4], float lo, float hi) {
  c[0] = add_relu(c[0], lo);
  c[1] = add_relu(c[1], lo);
  c[2] = add_relu(c[2], hi);
  c[3] = add_relu(c[3], hi);
}

/// @brief The bias of C's row `row` in a tensor-core launch that has one (SpmmTcParams::bias), 0 past row m (a row
/// that is not stored).
template <typename Params>
__device__ __forceinline__ float row_bias(const Params& p, int row) {
  return row < p.m ? __ldg(p.bias + row) : 0.0f;
}

}  // namespace ts
