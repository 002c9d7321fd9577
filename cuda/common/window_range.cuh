/**
 * @file @brief The k-block range of a wide tensor-core block (cuda/spmm/tensor_core.cuh, cuda/spmm90a/spmm90a.cu):
 * block z of a window takes the z-th of p.splits equal ranges of the window's k-blocks.
 */
#pragma once

#include "common/params.cuh"

namespace ts {

/// @brief The first k-block (in the block arrays) and the number of k-blocks of this block's range of window
/// blockIdx.x: all of the window's k-blocks when p.splits == 1.
struct WindowRange {
  int first;
  int blocks;
  __device__ __forceinline__ explicit WindowRange(const SpmmTcParams& p) {
    const int window_first = __ldg(p.window_blocks + blockIdx.x);
    const int window_blocks = __ldg(p.window_blocks + blockIdx.x + 1) - window_first;
    const int lo = static_cast<int>(static_cast<long long>(window_blocks) * blockIdx.z / p.splits);
    const int hi = static_cast<int>(static_cast<long long>(window_blocks) * (blockIdx.z + 1) / p.splits);
    first = window_first + lo;
    blocks = hi - lo;
  }
};

}  // namespace ts
