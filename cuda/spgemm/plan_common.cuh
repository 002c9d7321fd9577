/**
 * @file @brief What the production SpGEMM's kernels share: the bins (one X-macro table), the counters layout,
 * the walk over one row's products, and group / block reductions, scans and the shared-memory sort.
 *
 * A row goes to a bin by its bound: min(products, n) in the symbolic phase (an upper bound of its nnz), its
 * exact nnz in the numeric phase. Hash bin b holds bounds up to 16 * 2^b, in a hash table of twice that many
 * slots; rows above `dense_from` (at most the last hash bin's bound) go to the dense bin, which walks the row
 * once per column tile of kDenseTile columns with a dense accumulator and touched bitmap (no hashing, no
 * sort). A row dense in the numeric phase is dense in the symbolic one, since its bound there is larger.
 */
#pragma once

#include "spgemm/spgemm_params.cuh"
#include "spgemm/tile_utils.cuh"

namespace ts {

// The hash bins: X(bin, bound, threads per row, threads per block). threads < block: several rows per block,
// one group of `threads` lanes (within a warp) per row; threads == block: one block per row. The table has
// 2 * bound slots (symbolic: keys; numeric: keys and values). Mirrored by `PLAN_BINS` in src/spgemm/plan.rs
// (tests/spgemm.rs parses this macro and compares).
#define TILESPARSE_SPGEMM_BINS(X) \
  X(0, 16, 4, 128)                \
  X(1, 32, 8, 128)                \
  X(2, 64, 16, 128)               \
  X(3, 128, 32, 128)              \
  X(4, 256, 32, 128)              \
  X(5, 512, 128, 128)             \
  X(6, 1024, 256, 256)            \
  X(7, 2048, 512, 512)            \
  X(8, 4096, 1024, 1024)          \
  X(9, 8192, 1024, 1024)

constexpr int kHashBins = 10;
constexpr int kDenseBin = kHashBins;      // rows whose bound exceeds the last hash bin
constexpr int kBinSlots = kHashBins + 1;  // hash bins and the dense bin
constexpr int kDenseTile = 32768;         // columns per tile of the dense bin (numeric: 128 KB of floats)
constexpr int kDenseBlock = 1024;         // threads per block of the dense bin: one bitmap word each
static_assert(kDenseTile / 32 == kDenseBlock, "the dense write-back gives each thread one bitmap word");

// Layout of `counters` (unsigned long long each).
constexpr int kCounterSymbolicBins = 0;                           // kBinSlots sizes of the symbolic bins
constexpr int kCounterNumericBins = kCounterSymbolicBins + kBinSlots;  // kBinSlots sizes of the numeric bins
constexpr int kCounterProducts = kCounterNumericBins + kBinSlots;      // products of A * B
constexpr int kCounterNnz = kCounterProducts + 1;                      // nnz(C), 64-bit
constexpr int kCounterFlags = kCounterNnz + 1;                         // numeric error flags (kFlag*)
constexpr int kCounterLongRows = kCounterFlags + 1;                    // rows of A left to spgemm_plan_count_long
constexpr int kCounters = 32;
static_assert(kCounterLongRows < kCounters, "counters overflow their allocation");

constexpr unsigned long long kFlagTableFull = 1;     // a hash table filled up: the pattern has changed
constexpr unsigned long long kFlagRowCount = 2;      // a row's nnz differs from the plan's: the pattern has changed
constexpr unsigned long long kFlagTileCount = 4;     // a dense tile's nnz differs from the plan's

/// @brief The bin of a row with `bound` >= 1 entries at most: the dense bin above `dense_from` (at most the
/// last hash bin's bound), else hash bin ceil(log2(bound)) - 4, at least 0.
__device__ __forceinline__ int bin_of(int bound, int dense_from) {
  if (bound > dense_from) return kDenseBin;
  const int ceil_log2 = 32 - __clz(bound - 1);
  return min(max(ceil_log2 - 4, 0), kDenseBin);
}

/// @brief The block's dynamic shared memory (one declaration for every kernel of the family).
template <typename T>
__device__ __forceinline__ T* dynamic_smem() {
  extern __shared__ __align__(16) unsigned char ts_spgemm_dynamic_smem[];
  return reinterpret_cast<T*>(ts_spgemm_dynamic_smem);
}

/// @brief First index in [begin, end) of the ascending `columns` whose column is >= `column`.
__device__ __forceinline__ int lower_bound(const int* __restrict__ columns, int begin, int end, int column) {
  while (begin < end) {
    const int mid = begin + (end - begin) / 2;
    if (__ldg(columns + mid) < column) {
      begin = mid + 1;
    } else {
      end = mid;
    }
  }
  return begin;
}

/// @brief The entries of B's row j whose columns lie in [lo, hi): [*first, *first + return value). The whole
/// row unless `ranged` (a column tile of the dense bin), else two binary searches (B's columns ascend).
__device__ __forceinline__ int b_row_range(const SpgemmPlanParams& p, int j, bool ranged, int lo, int hi,
                                           int* first) {
  int begin = __ldg(p.b_row_offsets + j);
  int end = __ldg(p.b_row_offsets + j + 1);
  if (ranged) {
    begin = lower_bound(p.b_column_indices, begin, end, lo);
    end = lower_bound(p.b_column_indices, begin, end, hi);
  }
  *first = begin;
  return end - begin;
}

/// @brief The lanes of the calling thread's group of kThreads (a power of two <= 32, groups aligned in the warp).
template <int kThreads>
__device__ __forceinline__ unsigned group_mask() {
  return kThreads == 32 ? kFullWarp : ((1u << kThreads) - 1u) << ((threadIdx.x & 31) & ~(kThreads - 1));
}

/// @brief Calls f(a, b) for every product a_{row,j} * b_{j,c} of C's row `row` with c in [lo, hi) (a indexes
/// A's entries, b B's), the products spread evenly over a group of kThreads lanes (a power of two <= 32, groups
/// aligned in the warp). The row's entries of A are taken kThreads at a time: each lane loads one entry's range
/// of B, a scan of the range lengths numbers the chunk's products, and lane t takes products t, t + kThreads,
/// ..., finding its entry by a binary search over the scan (shuffles). Every load of B is independent of the
/// others, and a long row of B is shared by all lanes instead of falling to one.
template <int kThreads, typename F>
__device__ __forceinline__ void for_each_product_group(const SpgemmPlanParams& p, int row, int lo, int hi, F&& f) {
  static_assert(kThreads <= 32 && (kThreads & (kThreads - 1)) == 0, "a group is a power of two within a warp");
  const int lane = threadIdx.x % kThreads;
  const unsigned mask = group_mask<kThreads>();
  const bool ranged = lo > 0 || hi < p.n;
  const int a_end = __ldg(p.a_row_offsets + row + 1);
  for (int chunk = __ldg(p.a_row_offsets + row); chunk < a_end; chunk += kThreads) {
    const int a = chunk + lane;
    int first = 0;
    const int length = a < a_end ? b_row_range(p, __ldg(p.a_column_indices + a), ranged, lo, hi, &first) : 0;
    int inclusive = length;
#pragma unroll
    for (int offset = 1; offset < kThreads; offset *= 2) {
      const int up = __shfl_up_sync(mask, inclusive, offset, kThreads);
      if (lane >= offset) inclusive += up;
    }
    const int total = __shfl_sync(mask, inclusive, kThreads - 1, kThreads);
    const int start = first - (inclusive - length);  // product q of this entry is B's entry start + q
    for (int base = 0; base < total; base += kThreads) {
      const int q = base + lane;
      int owner = 0;  // the number of entries whose products all come before q
#pragma unroll
      for (int step = kThreads / 2; step > 0; step /= 2) {
        if (__shfl_sync(mask, inclusive, owner + step - 1, kThreads) <= q) owner += step;
      }
      const int owner_start = __shfl_sync(mask, start, owner, kThreads);
      if (q < total) f(chunk + owner, owner_start + q);
    }
  }
}

/// @brief for_each_product_group for a whole block of kBlock threads on one row: the scan of each chunk's range
/// lengths lives in shared memory (`inclusive_tile`, `start_tile`: kBlock ints each; `warp_totals_tile`: 32,
/// `total_tile`: 1). Each warp takes an equal, contiguous share of the chunk's products, its lanes 32 apart:
/// one binary search per lane finds its first product's entry, and each next product (32 further) moves the
/// entry forward by a short linear step, so a product costs about two shared loads instead of log2(kBlock).
/// Block-uniform; contains __syncthreads.
template <int kBlock, typename F>
__device__ __forceinline__ void for_each_product_block(const SpgemmPlanParams& p, int row, int lo, int hi,
                                                       int* inclusive_tile, int* start_tile, int* warp_totals_tile,
                                                       int* total_tile, F&& f) {
  constexpr int kWarps = kBlock / 32;
  const bool ranged = lo > 0 || hi < p.n;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int a_end = __ldg(p.a_row_offsets + row + 1);
  for (int chunk = __ldg(p.a_row_offsets + row); chunk < a_end; chunk += kBlock) {
    const int a = chunk + threadIdx.x;
    int first = 0;
    const int length = a < a_end ? b_row_range(p, __ldg(p.a_column_indices + a), ranged, lo, hi, &first) : 0;
    const int exclusive = block_exclusive_scan<kBlock>(length, warp_totals_tile, total_tile);
    const int total = *total_tile;
    inclusive_tile[threadIdx.x] = exclusive + length;
    start_tile[threadIdx.x] = first - exclusive;
    __syncthreads();
    const int share = ((total + kWarps - 1) / kWarps + 31) & ~31;  // products per warp, whole rounds of 32
    const int q_end = min(total, (warp + 1) * share);
    int q = warp * share + lane;
    if (q < q_end) {
      int owner = 0;
#pragma unroll
      for (int step = kBlock / 2; step > 0; step /= 2) {
        if (inclusive_tile[owner + step - 1] <= q) owner += step;
      }
      for (; q < q_end; q += 32) {
        while (inclusive_tile[owner] <= q) ++owner;
        f(chunk + owner, start_tile[owner] + q);
      }
    }
    __syncthreads();  // the tiles are rewritten by the next chunk
  }
}

/// @brief Sum over a group of kThreads lanes (a power of two dividing 32, groups aligned in the warp). Every
/// lane of the calling group must call it (other groups of the warp need not: group_mask).
template <int kThreads, typename T>
__device__ __forceinline__ T group_sum(T value) {
  const unsigned mask = group_mask<kThreads>();
#pragma unroll
  for (int offset = kThreads / 2; offset > 0; offset /= 2) value += __shfl_xor_sync(mask, value, offset, kThreads);
  return value;
}

/// @brief Exclusive scan over a group of kThreads lanes; `*total` receives the group's sum. Every lane of the
/// warp must call it.
template <int kThreads>
__device__ __forceinline__ int group_exclusive_scan(int value, int* total) {
  const int lane = threadIdx.x % kThreads;
  int inclusive = value;
#pragma unroll
  for (int offset = 1; offset < kThreads; offset *= 2) {
    const int up = __shfl_up_sync(kFullWarp, inclusive, offset, kThreads);
    if (lane >= offset) inclusive += up;
  }
  *total = __shfl_sync(kFullWarp, inclusive, kThreads - 1, kThreads);
  return inclusive - value;
}

/// @brief Sum over the block (kBlock threads, whole warps); every thread gets it. `warp_tile` is 32 values
/// of shared scratch. Contains __syncthreads: every thread must call it.
template <int kBlock, typename T>
__device__ __forceinline__ T block_sum(T value, T* warp_tile) {
  static_assert(kBlock % 32 == 0 && kBlock <= 1024, "block_sum needs whole warps, at most 32");
  value = group_sum<32>(value);
  __syncthreads();  // warp_tile may still be read by a previous call
  if ((threadIdx.x & 31) == 0) warp_tile[threadIdx.x >> 5] = value;
  __syncthreads();
  T total = 0;
#pragma unroll
  for (int w = 0; w < kBlock / 32; ++w) total += warp_tile[w];
  return total;
}

/// @brief One compare-exchange stage of a bitonic network over keys_tile[0, count) (count a power of two),
/// carrying values_tile along: pair i of count / 2 is (idx, idx + stride) with idx = 2i - (i mod stride),
/// ascending where idx & size is 0. `first`, `step`: this thread's pairs.
__device__ __forceinline__ void bitonic_stage(int* keys_tile, float* values_tile, int count, int size, int stride,
                                              int first, int step) {
  for (int i = first; i < count / 2; i += step) {
    const int idx = 2 * i - (i & (stride - 1));
    const int partner = idx + stride;
    const int ki = keys_tile[idx];
    const int kp = keys_tile[partner];
    if ((ki > kp) == ((idx & size) == 0)) {
      keys_tile[idx] = kp;
      keys_tile[partner] = ki;
      const float v = values_tile[idx];
      values_tile[idx] = values_tile[partner];
      values_tile[partner] = v;
    }
  }
}

/// @brief Sorts keys_tile[0, count) ascending, carrying values_tile along (shared memory, count a power of two,
/// keys unique except padding), with the kBlock threads of the block. Contains __syncthreads.
template <int kBlock>
__device__ __forceinline__ void bitonic_sort(int* keys_tile, float* values_tile, int count) {
  for (int size = 2; size <= count; size *= 2) {
    for (int stride = size / 2; stride > 0; stride /= 2) {
      bitonic_stage(keys_tile, values_tile, count, size, stride, threadIdx.x, kBlock);
      __syncthreads();
    }
  }
}

}  // namespace ts
