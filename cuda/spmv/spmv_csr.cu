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

/// Entries each thread of the segmented kernel takes: a tile is kSpmvBlock * kSegmentItems consecutive entries.
constexpr int kSegmentItems = 8;
constexpr int kSegmentTile = kSpmvBlock * kSegmentItems;

/// @brief Shared-memory slot of tile position q: one pad word per 32, so that both the coalesced writes (q = j *
/// 256 + thread) and each thread's run of kSegmentItems consecutive positions hit 32 different banks.
__host__ __device__ constexpr int segment_slot(int q) { return q + q / 32; }

/// @brief The segmented-sum operator on (a row starts here or before, sum since the last start): `left` then
/// `right`. Associative in exact arithmetic; in floating point the grouping of the scans below decides the
/// rounding, and that grouping is fixed, so the bits are the same every run. Only entries of one row are ever
/// added together (a start drops the left sum instead of adding it).
template <typename Acc>
__device__ __forceinline__ Acc segment_combine(bool right_starts, Acc left, Acc right) {
  return right_starts ? right : left + right;
}

/// @brief Entry tiles (SpmvStrategy::Segmented): block b takes the kSegmentTile consecutive entries from b *
/// kSegmentTile, whatever rows they belong to, so every block has the same work however skewed the rows are,
/// and rows stay in order (the loads of values and indices are contiguous). Rows starting in the tile are
/// `p.tile_rows[b] ..< p.tile_rows[b + 1]` (from the plan). Products go to shared memory; a segmented inclusive
/// scan (within each thread's kSegmentItems positions, then across the warp with shuffles, then across the
/// eight warps) leaves at each position the sum of its row's entries from the row's start (or from the tile's
/// start) up to it. A row that starts and ends in the tile is written to y from the scan at its last entry; an
/// empty row gets a zero sum. The tile's first, unfinished-before row part ("head": up to the first row start)
/// and the last row when it runs past the tile ("tail") go to `p.partials` (head at [b], tail at [gridDim.x +
/// b]) for `spmv_csr_segmented_fixup`.
template <typename Value>
__device__ __forceinline__ void spmv_csr_segmented(const SpmvCsrParams& p) {
  using Acc = typename Accumulator<Value>::Type;
  constexpr int kWarps = kSpmvBlock / 32;
  __shared__ Acc sums_tile[segment_slot(kSegmentTile)];
  __shared__ unsigned char starts_tile[kSegmentTile];
  __shared__ Acc warp_sums_tile[kWarps];
  __shared__ int warp_starts_tile[kWarps];

  const int nnz = __ldg(p.row_offsets + p.m);
  const int base = blockIdx.x * kSegmentTile;
  const int len = min(kSegmentTile, nnz - base);
  const int first_row = __ldg(p.tile_rows + blockIdx.x);
  const int end_row = __ldg(p.tile_rows + blockIdx.x + 1);
  const Value* values = static_cast<const Value*>(p.values);
  const Value* x = static_cast<const Value*>(p.x);

  // Products: coalesced loads, all indices and values of the thread in flight before its x gathers.
  int col[kSegmentItems];
  Value value[kSegmentItems];
#pragma unroll
  for (int j = 0; j < kSegmentItems; ++j) {
    const int q = j * kSpmvBlock + threadIdx.x;
    starts_tile[q] = 0;
    if (q < len) {
      col[j] = __ldg(p.column_indices + base + q);
      value[j] = __ldg(values + base + q);
    }
  }
#pragma unroll
  for (int j = 0; j < kSegmentItems; ++j) {
    const int q = j * kSpmvBlock + threadIdx.x;
    sums_tile[segment_slot(q)] = q < len ? to_acc(value[j]) * to_acc(__ldg(x + col[j])) : Acc(0);
  }
  __syncthreads();
  // Row starts: each non-empty row starting in the tile marks its first position (one writer per position).
  for (int r = first_row + threadIdx.x; r < end_row; r += kSpmvBlock) {
    const int start = __ldg(p.row_offsets + r) - base;
    if (start < len && __ldg(p.row_offsets + r + 1) - base > start) starts_tile[start] = 1;
  }
  __syncthreads();

  // The thread's run of positions, scanned in order.
  Acc run[kSegmentItems];
  unsigned starts = 0;  // bit j: a row starts at the thread's position j
  Acc sum = 0;
#pragma unroll
  for (int j = 0; j < kSegmentItems; ++j) {
    const int q = threadIdx.x * kSegmentItems + j;
    const bool start = starts_tile[q] != 0;
    starts |= static_cast<unsigned>(start) << j;
    sum = segment_combine(start, sum, sums_tile[segment_slot(q)]);
    run[j] = sum;
  }
  const bool started = starts != 0;
  // Across the warp: inclusive Hillis-Steele scan of (started, sum), then shifted by one lane.
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  Acc inclusive = sum;
  int inclusive_started = started;
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const Acc left = __shfl_up_sync(0xffffffffu, inclusive, d);
    const int left_started = __shfl_up_sync(0xffffffffu, inclusive_started, d);
    if (lane >= d) {
      inclusive = segment_combine(inclusive_started != 0, left, inclusive);
      inclusive_started |= left_started;
    }
  }
  Acc exclusive = __shfl_up_sync(0xffffffffu, inclusive, 1);
  int exclusive_started = __shfl_up_sync(0xffffffffu, inclusive_started, 1);
  if (lane == 0) {
    exclusive = 0;
    exclusive_started = 0;
  }
  if (lane == 31) {
    warp_sums_tile[warp] = inclusive;
    warp_starts_tile[warp] = inclusive_started;
  }
  __syncthreads();
  // Across the warps: every thread folds the warps before its own, in order.
  Acc carry = 0;
#pragma unroll
  for (int w = 0; w < kWarps - 1; ++w) {
    if (w < warp) carry = segment_combine(warp_starts_tile[w] != 0, carry, warp_sums_tile[w]);
  }
  carry = segment_combine(exclusive_started != 0, carry, exclusive);
  // The carry belongs to the thread's positions before its first row start.
#pragma unroll
  for (int j = 0; j < kSegmentItems; ++j) {
    if ((starts & ((2u << j) - 1)) == 0) run[j] = carry + run[j];
    sums_tile[segment_slot(threadIdx.x * kSegmentItems + j)] = run[j];
  }
  __syncthreads();

  Acc* partials = static_cast<Acc*>(p.partials);
  for (int r = first_row + threadIdx.x; r < end_row; r += kSpmvBlock) {
    const int start = __ldg(p.row_offsets + r) - base;
    const int end = __ldg(p.row_offsets + r + 1) - base;
    if (end == start) {
      store_row<Value>(p, r, Acc(0));
    } else if (end <= len) {
      store_row<Value>(p, r, sums_tile[segment_slot(end - 1)]);
    } else {
      partials[gridDim.x + blockIdx.x] = sums_tile[segment_slot(len - 1)];  // the last row, unfinished
    }
  }
  if (threadIdx.x == 0) {
    const int head = first_row < end_row ? min(__ldg(p.row_offsets + first_row) - base, len) : len;
    if (head > 0) partials[blockIdx.x] = sums_tile[segment_slot(head - 1)];
  }
}

/// @brief One thread per entry tile of `spmv_csr_segmented` (`p.num_long` tiles): when the tile's last row runs
/// past it, adds that row's tail in the tile and the heads of the tiles it covers, in tile order, and writes y.
template <typename Value>
__device__ __forceinline__ void spmv_csr_segmented_fixup(const SpmvCsrParams& p) {
  using Acc = typename Accumulator<Value>::Type;
  const int tile = blockIdx.x * kSpmvFixupBlock + threadIdx.x;
  if (tile >= p.num_long) return;
  const int first_row = __ldg(p.tile_rows + tile);
  const int end_row = __ldg(p.tile_rows + tile + 1);
  if (first_row == end_row) return;
  const long long end = __ldg(p.row_offsets + end_row);  // the end of the last row starting in the tile
  long long next = static_cast<long long>(tile + 1) * kSegmentTile;
  if (end <= next) return;
  const Acc* partials = static_cast<const Acc*>(p.partials);
  Acc sum = partials[p.num_long + tile];
  for (int t = tile + 1; next < end; ++t, next += kSegmentTile) sum += partials[t];
  store_row<Value>(p, end_row - 1, sum);
}

/// @brief The plan of the segmented strategy: tile_rows[t] = the first row starting at or after entry t *
/// kSegmentTile (binary search of the row pointer), for t < tiles; tile_rows[tiles] = m. `p.num_long` = tiles.
__device__ __forceinline__ void spmv_tile_rows(const SpmvCsrParams& p) {
  int* tile_rows = const_cast<int*>(p.tile_rows);
  for (int t = blockIdx.x * kSpmvBlock + threadIdx.x; t <= p.num_long; t += gridDim.x * kSpmvBlock) {
    if (t == p.num_long) {
      tile_rows[t] = p.m;
      continue;
    }
    const long long target = static_cast<long long>(t) * kSegmentTile;
    int lo = 0;
    int hi = p.m;  // the answer is in [lo, hi]
    while (lo < hi) {
      const int mid = lo + (hi - lo) / 2;
      if (__ldg(p.row_offsets + mid) >= target) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    tile_rows[t] = lo;
  }
}

/// @brief Measurement only (`tilesparse bench spmv`, the "x gathers alone" lines): reads every column index once,
/// in order, and x at it, kInFlight of each in flight per thread, and nothing else (no values, no row pointer but
/// its last entry, one store per warp into y). Its time is what the x gathers of a CSR SpMV that reads x once per
/// entry cost by themselves (NOTES.md, "Production SpMV", steps 7 and 9). kNoAllocate gathers with
/// `ld.global.nc.L1::no_allocate` (x bypasses L1: the 4M matrices' x, 16 MB, is 64 times an SM's 256 KB of L1).
template <int kInFlight, bool kNoAllocate>
__device__ __forceinline__ void spmv_gather_probe(const SpmvCsrParams& p) {
  const float* x = static_cast<const float*>(p.x);
  const auto gather = [x](int col) {
    if constexpr (kNoAllocate) {
      float v;
      asm volatile("ld.global.nc.L1::no_allocate.f32 %0, [%1];" : "=f"(v) : "l"(x + col));
      return v;
    } else {
      return __ldg(x + col);
    }
  };
  const unsigned nnz = static_cast<unsigned>(__ldg(p.row_offsets + p.m));
  const unsigned stride = gridDim.x * blockDim.x;
  const unsigned thread = blockIdx.x * blockDim.x + threadIdx.x;
  float sum = 0.0f;
  unsigned i = thread;
  // i < nnz <= 2^31 - 1 and 15 stride < 2^25 (the launch caps the grid at 8 blocks of 256 per SM, stride < 2^21
  // up to 1024 SMs): no unsigned wrap.
  for (; i + (kInFlight - 1) * stride < nnz; i += kInFlight * stride) {
    int col[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) col[u] = __ldg(p.column_indices + i + u * stride);
    float v[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) v[u] = gather(col[u]);
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) sum += v[u];
  }
  for (; i < nnz; i += stride) sum += gather(__ldg(p.column_indices + i));
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

extern "C" __global__ void __launch_bounds__(ts::kSpmvBlock) spmv_tile_rows(const ts::SpmvCsrParams p) {
  ts::spmv_tile_rows(p);
}

/// The gather probes src/spmv.rs names (`GatherProbe::kernel_name`): 4, 8 or 16 gathers in flight per thread,
/// through L1 or past it.
#define TILESPARSE_SPMV_GATHER_PROBE(suffix, in_flight, no_allocate)                                          \
  extern "C" __global__ void __launch_bounds__(ts::kSpmvBlock) spmv_gather_probe_f32##suffix(               \
      const ts::SpmvCsrParams p) {                                                                            \
    ts::spmv_gather_probe<in_flight, no_allocate>(p);                                                          \
  }
TILESPARSE_SPMV_GATHER_PROBE(, 4, false)
TILESPARSE_SPMV_GATHER_PROBE(_u8, 8, false)
TILESPARSE_SPMV_GATHER_PROBE(_u16, 16, false)
TILESPARSE_SPMV_GATHER_PROBE(_na, 4, true)
TILESPARSE_SPMV_GATHER_PROBE(_u8_na, 8, true)
TILESPARSE_SPMV_GATHER_PROBE(_u16_na, 16, true)

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

/// @brief Every kernel of one dtype: the six vector widths, the block kernel and its fix-up, the segmented kernel
/// and its fix-up.
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
  }                                                                                               \
  extern "C" __global__ void __launch_bounds__(ts::kSpmvBlock)                                    \
      spmv_csr_segmented_##tag(const ts::SpmvCsrParams p) {                                       \
    ts::spmv_csr_segmented<Value>(p);                                                             \
  }                                                                                               \
  extern "C" __global__ void __launch_bounds__(ts::kSpmvFixupBlock)                               \
      spmv_csr_segmented_fixup_##tag(const ts::SpmvCsrParams p) {                                 \
    ts::spmv_csr_segmented_fixup<Value>(p);                                                       \
  }

TILESPARSE_SPMV_DTYPE(f32, float)
TILESPARSE_SPMV_DTYPE(f64, double)
TILESPARSE_SPMV_DTYPE(f16, __half)
TILESPARSE_SPMV_DTYPE(bf16, __nv_bfloat16)
