/**
 * @file @brief The production CSR SpMV, y = alpha * A x + beta * y, deterministic (no atomics, fixed
 * reduction orders). Three kernels, combined by src/spmv.rs according to the plan's strategy:
 * `spmv_csr_vector_<dtype>_t<T>` (a subwarp of T lanes per row, xor-shuffle reduction),
 * `spmv_csr_block_<dtype>` (one block per row, or per chunk of a long row into a scratch partial) and
 * `spmv_csr_fixup_<dtype>` (sums each long row's chunk partials in order and writes y).
 * Values are float, double, __half or __nv_bfloat16; the sums run in double for double, in float otherwise.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common/params.cuh"

namespace ts {

/// Threads per block of the vector and block kernels.
constexpr int kSpmvBlock = 256;
/// Threads per block of the fix-up kernel (one thread per long row).
constexpr int kSpmvFixupBlock = 128;
/// Entries each lane loads before adding (independent loads in flight): two per step in the vector kernel
/// (SpmvPlan::choose gives each lane about seven entries of its row), four in the block kernel, whose rows are
/// long.
constexpr int kVectorUnroll = 2;
constexpr int kBlockUnroll = 4;

/// @brief The accumulation type of a value type: double for double, float for the others.
template <typename Value>
struct Accumulator {
  using Type = float;
};
template <>
struct Accumulator<double> {
  using Type = double;
};

/// @brief Widens a stored value to its accumulation type.
__device__ __forceinline__ float to_acc(float v) { return v; }
__device__ __forceinline__ double to_acc(double v) { return v; }
__device__ __forceinline__ float to_acc(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_acc(__nv_bfloat16 v) { return __bfloat162float(v); }

/// @brief Rounds an accumulated value to the storage type (round to nearest).
template <typename Value>
__device__ __forceinline__ Value from_acc(typename Accumulator<Value>::Type v) {
  return static_cast<Value>(v);
}
template <>
__device__ __forceinline__ __half from_acc<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_acc<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

/// @brief The sum of a_ij * x_j over entries begin, begin + stride, ... < end (one lane of a group of `stride`
/// lanes), added in ascending order, so the result is the same every run. Groups of `kUnroll` entries load all
/// their indices and values, then all their x, before the first add: several loads in flight per lane
/// (a plain `#pragma unroll` keeps a branch between steps, and each step's add stalls the next step's loads).
/// Unsigned positions, so that i + kUnroll * stride cannot overflow when nnz is close to 2^31.
/// With `kOffsets16` the column of entry i is row + column_offsets[i] (the plan's 16-bit indices, 6 bytes
/// per f32 entry instead of 8), else column_indices[i]: the same columns, so the same sums, bit for bit.
template <typename Value, int kUnroll, bool kOffsets16 = false>
__device__ __forceinline__ typename Accumulator<Value>::Type lane_dot(const SpmvCsrParams& p, unsigned begin,
                                                                      unsigned end, unsigned stride, int row = 0) {
  const Value* values = static_cast<const Value*>(p.values);
  const Value* x = static_cast<const Value*>(p.x);
  const auto column = [&](unsigned i) -> int {
    return kOffsets16 ? row + static_cast<int>(__ldg(p.column_offsets + i)) : __ldg(p.column_indices + i);
  };
  typename Accumulator<Value>::Type sum = 0;
  unsigned i = begin;
  for (; i + (kUnroll - 1) * stride < end; i += kUnroll * stride) {
    int col_fragment[kUnroll];
    Value value_fragment[kUnroll];
    Value x_fragment[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      col_fragment[u] = column(i + u * stride);
      value_fragment[u] = __ldg(values + i + u * stride);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) x_fragment[u] = __ldg(x + col_fragment[u]);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) sum += to_acc(value_fragment[u]) * to_acc(x_fragment[u]);
  }
#pragma unroll 1
  for (; i < end; i += stride) sum += to_acc(__ldg(values + i)) * to_acc(__ldg(x + column(i)));
  return sum;
}

/// @brief Sums `v` over aligned groups of `kLanes` lanes with xor shuffles; every lane of the warp must call
/// it. The butterfly order is fixed, and every lane of a group ends with the same bits.
template <int kLanes, typename Acc>
__device__ __forceinline__ Acc group_sum(Acc v) {
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

/// @brief y[row] = alpha * sum + beta * y[row], in the accumulation type; y is not read when beta == 0 (it may
/// hold NaN or be uninitialised).
template <typename Value>
__device__ __forceinline__ void store_row(const SpmvCsrParams& p, int row, typename Accumulator<Value>::Type sum) {
  using Acc = typename Accumulator<Value>::Type;
  Value* y = static_cast<Value*>(p.y);
  Acc out = static_cast<Acc>(p.alpha) * sum;
  if (p.beta != 0.0) out += static_cast<Acc>(p.beta) * to_acc(y[row]);
  y[row] = from_acc<Value>(out);
}

/// @brief Vector CSR: subwarp `threadIdx.x / kThreadsPerRow` of the grid owns one row of at most `p.long_row`
/// entries; its lanes stride through the row and reduce with `group_sum`. Rows past m and longer rows
/// reduce zeros and write nothing (the shuffles need every lane of the warp).
template <typename Value, int kThreadsPerRow, bool kOffsets16>
__device__ __forceinline__ void spmv_csr_vector(const SpmvCsrParams& p) {
  static_assert(kThreadsPerRow >= 1 && kThreadsPerRow <= 32 && (kThreadsPerRow & (kThreadsPerRow - 1)) == 0,
                "threads per row must be a power of two in [1, 32] so that subwarps do not straddle warps");
  using Acc = typename Accumulator<Value>::Type;
  const long long thread = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const long long row_wide = thread / kThreadsPerRow;
  const int lane = threadIdx.x % kThreadsPerRow;
  const int row = row_wide < p.m ? static_cast<int>(row_wide) : -1;
  int begin = 0;
  int end = 0;
  if (row >= 0) {
    begin = __ldg(p.row_offsets + row);
    end = __ldg(p.row_offsets + row + 1);
  }
  const bool mine = row >= 0 && end - begin <= p.long_row;
  const Acc lane_sum =
      mine ? lane_dot<Value, kVectorUnroll, kOffsets16>(p, begin + lane, end, kThreadsPerRow, row) : Acc(0);
  const Acc sum = group_sum<kThreadsPerRow>(lane_sum);
  if (mine && lane == 0) store_row<Value>(p, row, sum);
}

/// @brief One block per work item. Without chunks (`p.chunk_bounds == null`) item b is row b and its result goes
/// to y; with chunks, item b is the entry range chunk_bounds[2b, 2b + 1) of a long row and its plain sum goes
/// to `p.partials[b]`. Reduction: xor shuffles within each warp, then warp 0 over the per-warp sums.
template <typename Value>
__device__ __forceinline__ void spmv_csr_block(const SpmvCsrParams& p) {
  using Acc = typename Accumulator<Value>::Type;
  constexpr int kWarps = kSpmvBlock / 32;
  __shared__ Acc warp_sums_tile[kWarps];
  const int item = blockIdx.x;
  int begin, end;
  if (p.chunk_bounds == nullptr) {
    begin = __ldg(p.row_offsets + item);
    end = __ldg(p.row_offsets + item + 1);
  } else {
    begin = __ldg(p.chunk_bounds + 2 * item);
    end = __ldg(p.chunk_bounds + 2 * item + 1);
  }
  const Acc warp_sum = group_sum<32>(lane_dot<Value, kBlockUnroll>(p, begin + threadIdx.x, end, kSpmvBlock));
  if (threadIdx.x % 32 == 0) warp_sums_tile[threadIdx.x / 32] = warp_sum;
  __syncthreads();
  if (threadIdx.x >= 32) return;
  const Acc sum = group_sum<32>(threadIdx.x < kWarps ? warp_sums_tile[threadIdx.x] : Acc(0));
  if (threadIdx.x != 0) return;
  if (p.chunk_bounds == nullptr) {
    store_row<Value>(p, item, sum);
  } else {
    static_cast<Acc*>(p.partials)[item] = sum;
  }
}

/// @brief One thread per long row: sums the row's chunk partials in chunk order and writes y.
template <typename Value>
__device__ __forceinline__ void spmv_csr_fixup(const SpmvCsrParams& p) {
  using Acc = typename Accumulator<Value>::Type;
  const int i = blockIdx.x * kSpmvFixupBlock + threadIdx.x;
  if (i >= p.num_long) return;
  const Acc* partials = static_cast<const Acc*>(p.partials);
  const int first = __ldg(p.long_row_chunks + i);
  const int last = __ldg(p.long_row_chunks + i + 1);
  Acc sum = 0;
  for (int c = first; c < last; ++c) sum += partials[c];
  store_row<Value>(p, __ldg(p.long_rows + i), sum);
}

/// @brief Measurement only (`tilesparse bench spmv`, the "x gathers alone" line): reads every column index once,
/// in order, and x at it, four of each in flight per thread, and nothing else (no values, no row pointer but
/// its last entry, one store per warp into y). Its time is what the x gathers of a CSR SpMV that reads x once
/// per entry cost by themselves (NOTES.md, "Production SpMV", step 7).
__device__ __forceinline__ void spmv_gather_probe(const SpmvCsrParams& p) {
  const float* x = static_cast<const float*>(p.x);
  const unsigned nnz = static_cast<unsigned>(__ldg(p.row_offsets + p.m));
  const unsigned stride = gridDim.x * blockDim.x;
  const unsigned thread = blockIdx.x * blockDim.x + threadIdx.x;
  float sum = 0.0f;
  unsigned i = thread;
  for (; i + 3 * stride < nnz; i += 4 * stride) {
    int col[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) col[u] = __ldg(p.column_indices + i + u * stride);
    float v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = __ldg(x + col[u]);
#pragma unroll
    for (int u = 0; u < 4; ++u) sum += v[u];
  }
  for (; i < nnz; i += stride) sum += __ldg(x + __ldg(p.column_indices + i));
  sum = group_sum<32>(sum);
  if (threadIdx.x % 32 == 0 && thread / 32 < static_cast<unsigned>(p.m)) static_cast<float*>(p.y)[thread / 32] = sum;
}

/// @brief The plan's 16-bit indices: one thread per row writes column - row of each of its entries to
/// `p.column_offsets`, and sets `*p.overflow` when one does not fit in a short (the plan then keeps the 32-bit
/// indices; the offsets written are never read).
__device__ __forceinline__ void spmv_encode_offsets16(const SpmvCsrParams& p) {
  short* offsets = const_cast<short*>(p.column_offsets);
  for (int row = blockIdx.x * kSpmvBlock + threadIdx.x; row < p.m; row += gridDim.x * kSpmvBlock) {
    const int begin = __ldg(p.row_offsets + row);
    const int end = __ldg(p.row_offsets + row + 1);
    bool overflow = false;
    for (int i = begin; i < end; ++i) {
      const int offset = __ldg(p.column_indices + i) - row;
      overflow |= offset < -32768 || offset > 32767;
      offsets[i] = static_cast<short>(offset);
    }
    if (overflow) *p.overflow = 1;
  }
}

}  // namespace ts

extern "C" __global__ void __launch_bounds__(ts::kSpmvBlock) spmv_encode_offsets16(const ts::SpmvCsrParams p) {
  ts::spmv_encode_offsets16(p);
}

extern "C" __global__ void __launch_bounds__(ts::kSpmvBlock) spmv_gather_probe_f32(const ts::SpmvCsrParams p) {
  ts::spmv_gather_probe(p);
}

/// @brief The `extern "C"` vector kernel for one (dtype, threads per row); src/spmv.rs builds the same name.
/// The `_i16` twin reads the plan's 16-bit column offsets.
#define TILESPARSE_SPMV_VECTOR(tag, Value, threads)                                               \
  extern "C" __global__ void __launch_bounds__(ts::kSpmvBlock)                                    \
      spmv_csr_vector_##tag##_t##threads(const ts::SpmvCsrParams p) {                             \
    ts::spmv_csr_vector<Value, threads, false>(p);                                                \
  }                                                                                               \
  extern "C" __global__ void __launch_bounds__(ts::kSpmvBlock)                                    \
      spmv_csr_vector_##tag##_t##threads##_i16(const ts::SpmvCsrParams p) {                       \
    ts::spmv_csr_vector<Value, threads, true>(p);                                                 \
  }

/// @brief Every kernel of one dtype: the six vector widths, the block kernel and the fix-up.
#define TILESPARSE_SPMV_DTYPE(tag, Value)                                                         \
  TILESPARSE_SPMV_VECTOR(tag, Value, 1)                                                           \
  TILESPARSE_SPMV_VECTOR(tag, Value, 2)                                                           \
  TILESPARSE_SPMV_VECTOR(tag, Value, 4)                                                           \
  TILESPARSE_SPMV_VECTOR(tag, Value, 8)                                                           \
  TILESPARSE_SPMV_VECTOR(tag, Value, 16)                                                          \
  TILESPARSE_SPMV_VECTOR(tag, Value, 32)                                                          \
  extern "C" __global__ void __launch_bounds__(ts::kSpmvBlock)                                    \
      spmv_csr_block_##tag(const ts::SpmvCsrParams p) {                                           \
    ts::spmv_csr_block<Value>(p);                                                                 \
  }                                                                                               \
  extern "C" __global__ void __launch_bounds__(ts::kSpmvFixupBlock)                               \
      spmv_csr_fixup_##tag(const ts::SpmvCsrParams p) {                                           \
    ts::spmv_csr_fixup<Value>(p);                                                                 \
  }

TILESPARSE_SPMV_DTYPE(f32, float)
TILESPARSE_SPMV_DTYPE(f64, double)
TILESPARSE_SPMV_DTYPE(f16, __half)
TILESPARSE_SPMV_DTYPE(bf16, __nv_bfloat16)
