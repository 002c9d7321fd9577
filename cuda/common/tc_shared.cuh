/**
 * @file @brief Pieces shared by the tensor-core SpMM kernels, mma.sync (cuda/spmm/tensor_core.cuh) and wgmma
 * (cuda/spmm90a/spmm90a.cu), and by the tensor-core SDDMM (cuda/sddmm/tc.cuh): the mma.sync of each element type and
 * of 3xTF32's parts, the 3xTF32 split, 16-byte cp.async gathers of B rows, and a block's k-block range.
 */
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common/epilogue.cuh"
#include "common/params.cuh"

namespace ts {

/// @brief The element type's mma (conversions: common/vector.cuh).
template <typename T>
struct TcOps;

template <>
struct TcOps<__half> {
  static __device__ __forceinline__ void mma(float* c, const unsigned* a, unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

template <>
struct TcOps<__nv_bfloat16> {
  static __device__ __forceinline__ void mma(float* c, const unsigned* a, unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

/// @brief f32 on the tensor cores (3xTF32): x = big + small, big = x rounded to tf32 (cvt.rna), small = x - big
/// (exact in f32), passed as is (the mma reads its tf32 bits: the low 13 are dropped, a truncation), and
/// a * b = a_small * b_big + a_big * b_small + a_big * b_big, three mma.m16n8k8.tf32, the small terms first,
/// summed per k-block from zero and added to the f32 accumulators with round-to-nearest adds. The dropped
/// a_small * b_small and the truncation of the small parts leave at most 6 * 2^-22 |a b| per product
/// (src/cpu/oracle.rs, `spmm_error_bound_tf32x3`, derives the whole bound).
/// big is cvt.rna.tf32.f32 done on the bits: adding half a tf32 ulp (bit 12) to the magnitude and clearing the
/// low 13 bits rounds to nearest, ties away from zero, a carry moving into the exponent as it should (subnormals
/// too). Two integer instructions where nvcc 13.0 emulates the cvt in four for sm_90 (an extra NaN test and
/// select: NOTES.md, "SpMM step 11"). The bits differ from the cvt's only for a NaN x, whose big may come out
/// Inf; its small (x - big) is then NaN, the accumulators are not finite, and the exact redo computes the tile.
/// (tf32_big: below.)
__device__ __forceinline__ void mma_tf32(float* c, const unsigned* a, unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// @brief The big part of x for 3xTF32: x rounded to tf32 on the bits (mma_tf32 above explains the split and why
/// the bits; NOTES.md, "SpMM step 11").
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
