/**
 * @file @brief The epilogue every SpMM kernel applies where it stores C, shared by the tiles
 * (cuda/spmm/output_tile.cuh), their fix-up and fills (cuda/spmm/spmm.cu) and the tensor-core kernels
 * (cuda/spmm/tensor_core.cuh, cuda/spmm90a/spmm90a.cu): C = alpha A B + beta C, then + bias[row] and ReLU where
 * there is a bias.
 */
#pragma once

#include <utility>

#include "common/vector.cuh"

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

/// @brief The bias of C's row `row` in a launch (`Params::bias`, `Params::m`): 0 without a bias and past row m (a
/// row that is not stored).
template <typename Params>
__device__ __forceinline__ float row_bias(const Params& p, int row) {
  return p.bias != nullptr && row < p.m ? __ldg(p.bias + row) : 0.0f;
}

/// @brief Stores kWidth consecutive elements of C at `at` (aligned to the vector) from their f32 sums `v`, in
/// this order: v = alpha v where alpha is not 1; v = fma(beta, C's old value, v) where beta is not 0 (C is read
/// only then, as BLAS reads it: a NaN left in C does not reach a product with beta = 0); ReLU(v + b) where
/// `has_bias`; one rounding to T. With alpha = 1, beta = 0 and no bias the sums are stored as they are, so the
/// plain product has the same bits as before the epilogue had scalars. C's old value is read through a plain
/// load: the kernel writes C.
template <typename T, int kWidth>
__device__ __forceinline__ void finish_store(T* at, float (&v)[kWidth], float alpha, float beta, bool has_bias,
                                             float b) {
  if (alpha != 1.0f) {
#pragma unroll
    for (int i = 0; i < kWidth; ++i) v[i] *= alpha;
  }
  if (beta != 0.0f) {
    const Vec<T, kWidth> old = load_shared<T, kWidth>(at);
#pragma unroll
    for (int i = 0; i < kWidth; ++i) v[i] = fmaf(beta, to_float(old.v[i]), v[i]);
  }
  if (has_bias) {
#pragma unroll
    for (int i = 0; i < kWidth; ++i) v[i] = add_relu(v[i], b);
  }
  Vec<T, kWidth> out;
#pragma unroll
  for (int i = 0; i < kWidth; ++i) out.v[i] = from_float<T>(v[i]);
  store(at, out);
}

/// @brief finish_store with a launch's scalars and bias (`Params`: alpha, beta, bias), `b` the bias of the row
/// (read by the caller once per row; unused without a bias).
template <typename T, int kWidth, typename Params>
__device__ __forceinline__ void finish_store(const Params& p, T* at, float (&v)[kWidth], float b) {
  finish_store<T, kWidth>(at, v, p.alpha, p.beta, p.bias != nullptr, b);
}

/// @brief The sums `v` rounded to T, as one vector built in one expression: the form the narrow tensor-core
/// kernels' plain stores were measured with (filled element by element, nvcc 13.0 gave the f16/bf16 ones other
/// machine code).
template <typename T, int kWidth, int... kIndex>
__device__ __forceinline__ Vec<T, kWidth> rounded(const float (&v)[kWidth], std::integer_sequence<int, kIndex...>) {
  return Vec<T, kWidth>{{from_float<T>(v[kIndex])...}};
}

/// @brief The store of a narrow tensor-core kernel (cuda/spmm/tensor_core.cuh, spmm_tc_kernel), whose twins differ
/// in the epilogue: finish_store with the launch's scalars and bias in the twin that takes them (kScaled), else the
/// sums as they are, rounded once to T (the plain twin has added its bias in place).
template <bool kScaled, typename T, int kWidth, typename Params>
__device__ __forceinline__ void store_sums(const Params& p, T* at, float (&v)[kWidth], float b) {
  if constexpr (kScaled) {
    finish_store<T, kWidth>(p, at, v, b);
  } else {
    store(at, rounded<T>(v, std::make_integer_sequence<int, kWidth>()));
  }
}

}  // namespace ts
