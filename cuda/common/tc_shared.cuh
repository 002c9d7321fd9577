/**
 * @file @brief Pieces shared by the tensor-core SpMM kernels, mma.sync (cuda/spmm/tensor_core.cuh) and wgmma
 * (cuda/spmm90a/spmm90a.cu): the 3xTF32 split, 16-byte cp.async gathers of B rows, and a block's k-block range.
 */
#pragma once

#include "common/epilogue.cuh"
#include "common/params.cuh"

namespace ts {

/// @brief The big part of x for 3xTF32: x rounded to tf32 on the bits (cuda/spmm/tensor_core.cuh explains the
/// split and why the bits; NOTES.md, "SpMM step 11").
__device__ __forceinline__ unsigned tf32_big(float x) { return (__float_as_uint(x) + 0x1000u) & 0xffffe000u; }

/// @brief A 16-byte cp.async, zero-filled when !valid; kL1: through L1 (.ca), else L2 only (.cg).
template <bool kL1>
__device__ __forceinline__ void cp_async_16(unsigned smem, const void* global, bool valid) {
  if (kL1) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem), "l"(global), "r"(valid ? 16 : 0));
  } else {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem), "l"(global), "r"(valid ? 16 : 0));
  }
}
/// @brief Where a lane's 16-byte pieces of gathered B rows are: row c's piece at base + c * stride bytes. A lane
/// whose piece lies past n (`in_n` false) gets B's first element and stride 0: a valid address for every c,
/// which its zero-filling copies never read. Set up once per kernel, so that each gather costs one multiply-add.
struct PieceAddresses {
  const char* base;
  unsigned stride;  // bytes per row of B (n * sizeof(T) < 2^32), or 0
  template <typename T>
  __device__ __forceinline__ PieceAddresses(const T* dense, int n, int column, bool in_n)
      : base(reinterpret_cast<const char*>(in_n ? dense + column : dense)),
        stride(in_n ? static_cast<unsigned>(n) * static_cast<unsigned>(sizeof(T)) : 0u) {}
  /// Row c's piece; a padding slot (c < 0) gets row 0's, which its copy does not read either.
  __device__ __forceinline__ const void* at(int c) const {
    return base + static_cast<size_t>(static_cast<unsigned>(max(c, 0))) * stride;
  }
};
/// @brief Closes this thread's group of cp.async copies.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
/// @brief Waits until at most kPending of this thread's groups are in flight. A memory clobber: the thread may
/// read what its own copies wrote right after it, before any barrier (cuda/spmm90a/spmm90a.cu splits its pieces
/// of A so), and that read must not move above the wait.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

/// @brief The window this block takes: blockIdx.x, or its entry of p.windows where the launch leaves empty windows
/// out (src/spmm/tensor_core.rs, `leaves_out_empty_windows`).
__device__ __forceinline__ int tc_window(const SpmmTcParams& p) {
  return p.windows != nullptr ? __ldg(p.windows + blockIdx.x) : static_cast<int>(blockIdx.x);
}

/// @brief The first k-block (in the block arrays) and the number of k-blocks of this block's range of window
/// `window`: all of the window's k-blocks when p.splits == 1.
struct WindowRange {
  int first;
  int blocks;
  __device__ __forceinline__ WindowRange(const SpmmTcParams& p, int window) {
    const int window_first = __ldg(p.window_blocks + window);
    const int window_blocks = __ldg(p.window_blocks + window + 1) - window_first;
    const int lo = static_cast<int>(static_cast<long long>(window_blocks) * blockIdx.z / p.splits);
    const int hi = static_cast<int>(static_cast<long long>(window_blocks) * (blockIdx.z + 1) / p.splits);
    first = window_first + lo;
    blocks = hi - lo;
  }
};

}  // namespace ts
