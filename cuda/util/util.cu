/**
 * @file @brief Small kernels the library needs beside the products: the stream hold of the timing
 * (src/timing.rs), which keeps the GPU busy while the host enqueues every timed run, so that the runs execute
 * back to back and no event pair brackets host time; a row copy that pads or unpads columns; the bias + ReLU
 * epilogue as a pass of its own over C, the unfused form the benchmarks time cuSPARSE with; the transposition of
 * a CSR structure (transpose.cuh) and the gather that gives a transposed matrix its values from the matrix's own
 * (src/csr/transpose.rs); the transposition of a dense matrix, which lets the products take column-major B and C
 * (src/spmm/layout.rs).
 */

#include "common/epilogue.cuh"
#include "common/vector.cuh"
#include "transpose.cuh"

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

/// @brief Calls `body(total)` with the element count of a rows x cols pass (rows, cols >= 0) as a 32-bit unsigned
/// where it is below 2^31, else as a 64-bit one: the index type of the pass's loop (copy_rows, bias_relu_rows).
template <typename Body>
__device__ __forceinline__ void with_index_type(int rows, int cols, Body&& body) {
  const unsigned long long total = static_cast<unsigned long long>(rows) * static_cast<unsigned>(cols);
  if (total < (1ull << 31)) {
    body(static_cast<unsigned>(total));
  } else {
    body(total);
  }
}

template <typename E>
__device__ __forceinline__ void copy_rows_any(const E* src, E* dst, int rows, int src_cols, int dst_cols,
                                              int copy_cols) {
  with_index_type(rows, dst_cols, [&](auto total) {
    using I = decltype(total);
    copy_rows<E, I>(src, dst, total, src_cols, dst_cols, copy_cols);
  });
}

extern "C" __global__ void ts_copy_rows_b16(const unsigned short* src, unsigned short* dst, int rows, int src_cols,
                                            int dst_cols, int copy_cols) {
  copy_rows_any(src, dst, rows, src_cols, dst_cols, copy_cols);
}

extern "C" __global__ void ts_copy_rows_b32(const unsigned* src, unsigned* dst, int rows, int src_cols, int dst_cols,
                                            int copy_cols) {
  copy_rows_any(src, dst, rows, src_cols, dst_cols, copy_cols);
}

/// @brief c[r][j] = ReLU(c[r][j] + bias[r]) over C (rows x cols, row-major, `total` = rows x cols elements): the
/// epilogue of `ts::add_relu` as a pass after a product that has none (cuSPARSE's SpMM), so each element of C is
/// read and written once more and, in f16/bf16, rounded twice (the product's rounding, then this one). One thread
/// per element, a grid-stride loop, four elements per trip with their loads issued before their stores (I: the
/// index type, 32-bit where C has fewer than 2^31 elements).
template <typename T, typename I>
__device__ __forceinline__ void bias_relu_rows(T* __restrict__ c, const float* __restrict__ bias, I total, I cols) {
  const I stride = static_cast<I>(gridDim.x) * blockDim.x;
  I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < total; i += 4 * stride) {
    float v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const I at = i + j * stride;
      v[j] = ts::add_relu(ts::to_float(c[at]), __ldg(bias + at / cols));
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) c[i + j * stride] = ts::from_float<T>(v[j]);
  }
  for (; i < total; i += stride) c[i] = ts::from_float<T>(ts::add_relu(ts::to_float(c[i]), __ldg(bias + i / cols)));
}

template <typename T>
__device__ __forceinline__ void bias_relu_rows_any(T* c, const float* bias, int rows, int cols) {
  with_index_type(rows, cols, [&](auto total) {
    using I = decltype(total);
    bias_relu_rows<T, I>(c, bias, total, static_cast<I>(cols));
  });
}

extern "C" __global__ void ts_bias_relu_rows_f32(float* c, const float* bias, int rows, int cols) {
  bias_relu_rows_any(c, bias, rows, cols);
}

extern "C" __global__ void ts_bias_relu_rows_f16(__half* c, const float* bias, int rows, int cols) {
  bias_relu_rows_any(c, bias, rows, cols);
}

extern "C" __global__ void ts_bias_relu_rows_bf16(__nv_bfloat16* c, const float* bias, int rows, int cols) {
  bias_relu_rows_any(c, bias, rows, cols);
}

/// @brief dst[i] = src[from[i]] for i < count (count < 2^31; every from[i] indexes src): the values of A^T in its CSR
/// order, gathered from A's by the map its transposition made (src/csr/transpose.rs, `CsrTranspose::refresh`).
/// Elements are moved as bits (E: 2-, 4- or 8-byte unsigned), so NaN payloads pass unchanged. One thread per
/// element, a grid-stride loop; from and dst are read and written in order, src in A^T's order.
template <typename E>
__device__ __forceinline__ void gather(const E* __restrict__ src, const int* __restrict__ from, E* __restrict__ dst,
                                       int count) {
  // Unsigned: i + stride stays below 2^32 while count and the grid stay below 2^31.
  const unsigned stride = gridDim.x * blockDim.x;
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < static_cast<unsigned>(count); i += stride) {
    dst[i] = src[__ldg(from + i)];
  }
}

extern "C" __global__ void ts_gather_b16(const unsigned short* src, const int* from, unsigned short* dst, int count) {
  gather(src, from, dst, count);
}

extern "C" __global__ void ts_gather_b32(const unsigned* src, const int* from, unsigned* dst, int count) {
  gather(src, from, dst, count);
}

extern "C" __global__ void ts_gather_b64(const unsigned long long* src, const int* from, unsigned long long* dst,
                                         int count) {
  gather(src, from, dst, count);
}

/// @brief dst = src^T, dense: src rows x cols and dst cols x rows, both row-major (rows, cols < 2^31), elements
/// moved as bits (E: 2-, 4- or 8-byte unsigned, so NaN payloads pass unchanged). A column-major matrix is the
/// row-major one of its transpose, so this turns one layout into the other (src/spmm/layout.rs,
/// `DeviceDense::transpose_into`, which picks this kernel or `transpose_dense_wide`).
///
/// Tiles of 32 x 32 through shared memory, with a column of padding so that a tile's columns fall in distinct
/// banks: a block of 32 x 8 threads reads a tile along src's rows, one element per thread and row, eight rows apart,
/// and writes it along dst's rows, so both sides are coalesced. Any shape; many blocks for a small matrix.
/// blockIdx.x is the column tile; the row tiles are walked from blockIdx.y in steps of the grid's height (at most
/// 65535 tiles high).
template <typename E>
__device__ __forceinline__ void transpose_dense(const E* __restrict__ src, E* __restrict__ dst, int rows, int cols) {
  __shared__ E tile[32][33];
  const long long c0 = static_cast<long long>(blockIdx.x) * 32;
  const long long step = static_cast<long long>(gridDim.y) * 32;
  for (long long r0 = static_cast<long long>(blockIdx.y) * 32; r0 < rows; r0 += step) {
    for (int j = threadIdx.y; j < 32; j += 8) {
      const long long r = r0 + j, c = c0 + threadIdx.x;
      if (r < rows && c < cols) tile[j][threadIdx.x] = src[r * cols + c];
    }
    __syncthreads();
    for (int j = threadIdx.y; j < 32; j += 8) {
      const long long c = c0 + j, r = r0 + threadIdx.x;
      if (c < cols && r < rows) dst[c * rows + r] = tile[threadIdx.x][j];
    }
    // The next tile's reads must wait until every thread has written this one out.
    __syncthreads();
  }
}

/// @brief transpose_dense for a large matrix whose rows and cols are multiples of P: each access moves a vector V
/// of P elements (8 bytes for 2- and 4-byte E, 16 for 8-byte), so a warp moves 256 or 512 bytes per row where the
/// narrow kernel moves 64-256. Tiles of 32 P x 32 P held column by column (tile[c][r], a column of padding): a block
/// of 32 x 8 threads loads P neighbouring elements of a row per thread, eight rows apart, every load of the tile
/// issued before the first store to shared memory; then it stores P neighbouring elements of a dst row per thread
/// (P rows of the tile) the same way. Every vector lies at a multiple of P elements, so it is aligned (the buffers
/// are). Fewer, larger tiles than the narrow kernel: the caller takes it where they still cover the SMs.
template <typename E, typename V, int P>
__device__ __forceinline__ void transpose_dense_wide(const E* __restrict__ src, E* __restrict__ dst, int rows,
                                                     int cols) {
  static_assert(sizeof(V) == P * sizeof(E), "V holds P elements");
  constexpr int kTile = 32 * P, kSteps = kTile / 8;
  union Pack {
    V v;
    E e[P];
  };
  __shared__ E tile[kTile][kTile + 1];
  const int lane = P * static_cast<int>(threadIdx.x);
  const long long c0 = static_cast<long long>(blockIdx.x) * kTile;
  const long long step = static_cast<long long>(gridDim.y) * kTile;
  for (long long r0 = static_cast<long long>(blockIdx.y) * kTile; r0 < rows; r0 += step) {
    Pack held[kSteps];
#pragma unroll
    for (int i = 0; i < kSteps; ++i) {
      const long long r = r0 + threadIdx.y + 8 * i, c = c0 + lane;
      if (r < rows && c < cols) held[i].v = *reinterpret_cast<const V*>(src + r * cols + c);
    }
#pragma unroll
    for (int i = 0; i < kSteps; ++i) {
      const long long r = r0 + threadIdx.y + 8 * i, c = c0 + lane;
      if (r >= rows || c >= cols) continue;
#pragma unroll
      for (int p = 0; p < P; ++p) tile[lane + p][threadIdx.y + 8 * i] = held[i].e[p];
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kSteps; ++i) {
      const int j = threadIdx.y + 8 * i;
      const long long c = c0 + j, r = r0 + lane;
      if (c >= cols || r >= rows) continue;
      Pack out;
#pragma unroll
      for (int p = 0; p < P; ++p) out.e[p] = tile[j][lane + p];
      *reinterpret_cast<V*>(dst + c * rows + r) = out.v;
    }
    // The next tile's stores to shared memory must wait until every thread has read this one out.
    __syncthreads();
  }
}

extern "C" __global__ void __launch_bounds__(256) ts_transpose_dense_b16(const unsigned short* src, unsigned short* dst,
                                                                         int rows, int cols) {
  transpose_dense(src, dst, rows, cols);
}

extern "C" __global__ void __launch_bounds__(256) ts_transpose_dense_b32(const unsigned* src, unsigned* dst, int rows,
                                                                         int cols) {
  transpose_dense(src, dst, rows, cols);
}

extern "C" __global__ void __launch_bounds__(256) ts_transpose_dense_b64(const unsigned long long* src,
                                                                         unsigned long long* dst, int rows, int cols) {
  transpose_dense(src, dst, rows, cols);
}

extern "C" __global__ void __launch_bounds__(256) ts_transpose_dense_wide_b16(const unsigned short* src,
                                                                              unsigned short* dst, int rows, int cols) {
  transpose_dense_wide<unsigned short, ushort4, 4>(src, dst, rows, cols);
}

extern "C" __global__ void __launch_bounds__(256) ts_transpose_dense_wide_b32(const unsigned* src, unsigned* dst,
                                                                              int rows, int cols) {
  transpose_dense_wide<unsigned, uint2, 2>(src, dst, rows, cols);
}

extern "C" __global__ void __launch_bounds__(256) ts_transpose_dense_wide_b64(const unsigned long long* src,
                                                                              unsigned long long* dst, int rows,
                                                                              int cols) {
  transpose_dense_wide<unsigned long long, ulonglong2, 2>(src, dst, rows, cols);
}
