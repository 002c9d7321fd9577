/**
 * @file @brief The production SpGEMM's bookkeeping kernels: products per row (and the symbolic bin sizes),
 * binning rows, and the scan of row sizes into C's row pointer (with the numeric bin sizes and nnz(C)).
 */
#pragma once

#include "spgemm/plan_common.cuh"

namespace ts {

constexpr int kCountBlock = 256;          // threads of the product count
constexpr int kCountGroup = 8;            // lanes per row of A in the product count
constexpr int kLongRow = 256;             // rows of A longer than this are counted by a block instead
constexpr int kBinBlock = 256;            // threads of the binning kernel: one row each
constexpr int kPlanScanBlock = 512;       // threads of the row-pointer scan
constexpr int kPlanScanItems = 8;         // entries per thread of the scan
constexpr int kPlanScanChunk = kPlanScanBlock * kPlanScanItems;

/// @brief What the count kernels record for one row once its product count is known: row_products; nnz(C) at
/// once for rows of at most one product, else 0 and a symbolic bin by min(products, n).
__device__ __forceinline__ void finish_row_count(const SpgemmPlanParams& p, int row, int products,
                                                 int* histogram_tile) {
  p.row_products[row] = products;
  if (products <= 1) {
    p.c_row_offsets[row] = products;
  } else {
    p.c_row_offsets[row] = 0;  // the dense bin adds its tiles' counts into it
    atomicAdd(histogram_tile + bin_of(min(products, p.n), p.dense_from), 1);
  }
}

/// @brief Adds a block's bin histogram and product total into the counters.
__device__ __forceinline__ void flush_counts(const SpgemmPlanParams& p, const int* histogram_tile,
                                             unsigned long long products) {
  if (threadIdx.x < kBinSlots && histogram_tile[threadIdx.x] > 0) {
    atomicAdd(p.counters + kCounterSymbolicBins + threadIdx.x,
              static_cast<unsigned long long>(histogram_tile[threadIdx.x]));
  }
  if (threadIdx.x == 0 && products > 0) atomicAdd(p.counters + kCounterProducts, products);
}

}  // namespace ts

/// @brief Products of each row of A * B (kCountGroup lanes per row, grid-stride: a row costs two dependent
/// loads, so many rows must be in flight), recorded by finish_row_count. A row of more than kLongRow entries
/// would make its group the kernel's tail: it is listed (in bin_rows, free until the binning) for
/// spgemm_plan_count_long instead. Adds the bin sizes and the number of products into `counters`.
extern "C" __global__ void __launch_bounds__(ts::kCountBlock) spgemm_plan_count(const ts::SpgemmPlanParams p) {
  constexpr int kGroups = ts::kCountBlock / ts::kCountGroup;
  __shared__ int histogram_tile[ts::kBinSlots];
  __shared__ unsigned long long products_tile;
  if (threadIdx.x < ts::kBinSlots) histogram_tile[threadIdx.x] = 0;
  if (threadIdx.x == 0) products_tile = 0;
  __syncthreads();
  const int lane = threadIdx.x % ts::kCountGroup;
  unsigned long long products_fragment = 0;
  for (int row = blockIdx.x * kGroups + threadIdx.x / ts::kCountGroup; row < p.m; row += gridDim.x * kGroups) {
    const int a_begin = __ldg(p.a_row_offsets + row);
    const int a_end = __ldg(p.a_row_offsets + row + 1);
    if (a_end - a_begin > ts::kLongRow) {  // group-uniform
      if (lane == 0) p.bin_rows[atomicAdd(p.counters + ts::kCounterLongRows, 1ull)] = row;
      continue;
    }
    int products = 0;  // <= nnz(B): the row's columns of A are distinct, so each entry of B counts once
#pragma unroll 4
    for (int a = a_begin + lane; a < a_end; a += ts::kCountGroup) {
      const int j = __ldg(p.a_column_indices + a);
      products += __ldg(p.b_row_offsets + j + 1) - __ldg(p.b_row_offsets + j);
    }
    products = ts::group_sum<ts::kCountGroup>(products);  // group-divergent: the group's own mask
    if (lane == 0) {
      ts::finish_row_count(p, row, products, histogram_tile);
      products_fragment += products;
    }
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) p.c_row_offsets[p.m] = 0;
  if (lane == 0 && products_fragment > 0) atomicAdd(&products_tile, products_fragment);
  __syncthreads();
  ts::flush_counts(p, histogram_tile, products_tile);
}

/// @brief The rows spgemm_plan_count listed as long: one block per row (grid-stride over the list), the same
/// record and counters.
extern "C" __global__ void __launch_bounds__(ts::kCountBlock) spgemm_plan_count_long(const ts::SpgemmPlanParams p) {
  __shared__ int histogram_tile[ts::kBinSlots];
  __shared__ int warp_tile[32];
  if (threadIdx.x < ts::kBinSlots) histogram_tile[threadIdx.x] = 0;
  const int rows = static_cast<int>(p.counters[ts::kCounterLongRows]);
  unsigned long long products_total = 0;
  for (int i = blockIdx.x; i < rows; i += gridDim.x) {
    const int row = p.bin_rows[i];
    const int a_end = __ldg(p.a_row_offsets + row + 1);
    int products_fragment = 0;
#pragma unroll 4
    for (int a = __ldg(p.a_row_offsets + row) + threadIdx.x; a < a_end; a += ts::kCountBlock) {
      const int j = __ldg(p.a_column_indices + a);
      products_fragment += __ldg(p.b_row_offsets + j + 1) - __ldg(p.b_row_offsets + j);
    }
    const int products = ts::block_sum<ts::kCountBlock>(products_fragment, warp_tile);  // starts with a barrier
    if (threadIdx.x == 0) ts::finish_row_count(p, row, products, histogram_tile);
    products_total += products;
  }
  __syncthreads();
  ts::flush_counts(p, histogram_tile, products_total);
}

/// @brief Groups rows by bin into bin_rows (bin b's rows start after the rows of the bins before it). `numeric`
/// = 0: symbolic bins, by min(row_products, n), rows with <= 1 product skipped; 1: numeric bins, by the row's
/// nnz(C) from the scanned c_row_offsets, empty rows skipped. One row per thread; bin_cursors zero before.
extern "C" __global__ void __launch_bounds__(ts::kBinBlock) spgemm_plan_bin_rows(const ts::SpgemmPlanParams p,
                                                                               int numeric) {
  __shared__ int local_count_tile[ts::kBinSlots];
  __shared__ int block_base_tile[ts::kBinSlots];
  __shared__ int bin_start_tile[ts::kBinSlots];
  const unsigned long long* sizes = p.counters + (numeric ? ts::kCounterNumericBins : ts::kCounterSymbolicBins);
  if (threadIdx.x == 0) {
    int start = 0;
    for (int b = 0; b < ts::kBinSlots; ++b) {
      bin_start_tile[b] = start;
      start += static_cast<int>(sizes[b]);
    }
  }
  if (threadIdx.x < ts::kBinSlots) local_count_tile[threadIdx.x] = 0;
  __syncthreads();
  const int row = blockIdx.x * ts::kBinBlock + threadIdx.x;
  int bin = -1;
  if (row < p.m) {
    if (numeric) {
      const int nnz = p.c_row_offsets[row + 1] - p.c_row_offsets[row];
      if (nnz > 0) bin = ts::bin_of(nnz, p.dense_from);
    } else {
      const int products = p.row_products[row];
      if (products > 1) bin = ts::bin_of(min(products, p.n), p.dense_from);
    }
  }
  const int local = bin >= 0 ? atomicAdd(local_count_tile + bin, 1) : 0;
  __syncthreads();
  if (threadIdx.x < ts::kBinSlots && local_count_tile[threadIdx.x] > 0) {
    block_base_tile[threadIdx.x] = atomicAdd(p.bin_cursors + threadIdx.x, local_count_tile[threadIdx.x]);
  }
  __syncthreads();
  if (bin >= 0) p.bin_rows[bin_start_tile[bin] + block_base_tile[bin] + local] = row;
}

/// @brief First pass of the row-pointer scan: block b sums entries [b * chunk, (b + 1) * chunk) of
/// c_row_offsets[0..m] (each row's nnz; entry m is 0) into block_sums[b], and adds its rows to the numeric
/// bin sizes.
extern "C" __global__ void __launch_bounds__(ts::kPlanScanBlock) spgemm_plan_scan_reduce(
    const ts::SpgemmPlanParams p) {
  __shared__ int histogram_tile[ts::kBinSlots];
  __shared__ long long warp_tile[32];
  if (threadIdx.x < ts::kBinSlots) histogram_tile[threadIdx.x] = 0;
  __syncthreads();
  const long long base = static_cast<long long>(blockIdx.x) * ts::kPlanScanChunk;
  long long sum_fragment = 0;
  for (int i = threadIdx.x; i < ts::kPlanScanChunk; i += ts::kPlanScanBlock) {
    const long long index = base + i;
    if (index < p.m) {
      const int nnz = p.c_row_offsets[index];
      sum_fragment += nnz;
      if (nnz > 0) atomicAdd(histogram_tile + ts::bin_of(nnz, p.dense_from), 1);
    }
  }
  const long long sum = ts::block_sum<ts::kPlanScanBlock>(sum_fragment, warp_tile);
  if (threadIdx.x == 0) p.block_sums[blockIdx.x] = sum;
  if (threadIdx.x < ts::kBinSlots && histogram_tile[threadIdx.x] > 0) {
    atomicAdd(p.counters + ts::kCounterNumericBins + threadIdx.x,
              static_cast<unsigned long long>(histogram_tile[threadIdx.x]));
  }
}

/// @brief Second pass: block b scans its chunk of c_row_offsets in place, offset by the sums of the blocks
/// before it, so c_row_offsets becomes C's row pointer; the thread holding entry m writes nnz(C) (64-bit) to
/// the counters. Offsets past 2^31 - 1 wrap here; the host reads nnz(C) and refuses such a C before use.
extern "C" __global__ void __launch_bounds__(ts::kPlanScanBlock) spgemm_plan_scan_apply(
    const ts::SpgemmPlanParams p) {
  __shared__ long long warp_tile[32];
  __shared__ long long scan_tile[32];  // apart from warp_tile, which block_sum's threads may still be reading
  __shared__ long long unused_total;
  long long offset_fragment = 0;
  for (int b = threadIdx.x; b < static_cast<int>(blockIdx.x); b += ts::kPlanScanBlock) offset_fragment += p.block_sums[b];
  const long long offset = ts::block_sum<ts::kPlanScanBlock>(offset_fragment, warp_tile);
  const long long first = static_cast<long long>(blockIdx.x) * ts::kPlanScanChunk +
                          static_cast<long long>(threadIdx.x) * ts::kPlanScanItems;
  int items_fragment[ts::kPlanScanItems];
  long long sum_fragment = 0;
#pragma unroll
  for (int i = 0; i < ts::kPlanScanItems; ++i) {
    items_fragment[i] = first + i <= p.m ? p.c_row_offsets[first + i] : 0;
    sum_fragment += items_fragment[i];
  }
  long long running = offset + ts::block_exclusive_scan<ts::kPlanScanBlock>(sum_fragment, scan_tile, &unused_total);
#pragma unroll
  for (int i = 0; i < ts::kPlanScanItems; ++i) {
    if (first + i <= p.m) {
      p.c_row_offsets[first + i] = static_cast<int>(running);
      if (first + i == p.m) p.counters[ts::kCounterNnz] = static_cast<unsigned long long>(running);
    }
    running += items_fragment[i];
  }
}
