/**
 * @file @brief Small kernels the library needs beside the products: the stream hold of the timing
 * (src/timing.rs), which keeps the GPU busy while the host enqueues every timed run, so that the runs execute
 * back to back and no event pair brackets host time; and a row copy that pads or unpads columns.
 */

/// @brief Spins one thread for `ns` nanoseconds of the GPU's global timer, then returns.
extern "C" __global__ void __launch_bounds__(1) ts_hold_stream(unsigned long long ns) {
  unsigned long long start;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  for (;;) {
    unsigned long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start >= ns) return;
    __nanosleep(1000);
  }
}

/// @brief dst (rows x dst_cols, row-major) = src (rows x src_cols) in its first `copy_cols` columns and zero in
/// the rest (copy_cols <= min(src_cols, dst_cols)). The tensor-core SpMM pads B to a multiple of 8 columns with
/// it and copies C back out of its padded product (src/spmm/tensor_core.rs, `spmm_tensor_core_with`). Elements
/// are moved as bits (E: 2- or 4-byte unsigned). One thread per element of dst, a grid-stride loop over dst in
/// order (rows of a few columns are as cheap as long ones), four elements per trip with their loads issued before
/// their stores; 32-bit index arithmetic where dst has fewer than 2^31 elements (I: the index type).
template <typename E, typename I>
__device__ __forceinline__ void copy_rows(const E* __restrict__ src, E* __restrict__ dst, I total, I src_cols,
                                          I dst_cols, I copy_cols) {
  const auto element = [&](I at) {
    const I r = at / dst_cols;
    const I c = at - r * dst_cols;
    return c < copy_cols ? src[r * src_cols + c] : E(0);
  };
  const I stride = static_cast<I>(gridDim.x) * blockDim.x;
  I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < total; i += 4 * stride) {
    E v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = element(i + j * stride);
#pragma unroll
    for (int j = 0; j < 4; ++j) dst[i + j * stride] = v[j];
  }
  for (; i < total; i += stride) dst[i] = element(i);
}

template <typename E>
__device__ __forceinline__ void copy_rows_any(const E* src, E* dst, int rows, int src_cols, int dst_cols,
                                              int copy_cols) {
  const unsigned long long total = static_cast<unsigned long long>(rows) * static_cast<unsigned>(dst_cols);
  if (total < (1ull << 31)) {
    copy_rows<E, unsigned>(src, dst, static_cast<unsigned>(total), src_cols, dst_cols, copy_cols);
  } else {
    copy_rows<E, unsigned long long>(src, dst, total, src_cols, dst_cols, copy_cols);
  }
}

extern "C" __global__ void ts_copy_rows_b16(const unsigned short* src, unsigned short* dst, int rows, int src_cols,
                                            int dst_cols, int copy_cols) {
  copy_rows_any(src, dst, rows, src_cols, dst_cols, copy_cols);
}

extern "C" __global__ void ts_copy_rows_b32(const unsigned* src, unsigned* dst, int rows, int src_cols, int dst_cols,
                                            int copy_cols) {
  copy_rows_any(src, dst, rows, src_cols, dst_cols, copy_cols);
}
