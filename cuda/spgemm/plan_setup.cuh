/**
 * @file @brief The production SpGEMM's bookkeeping kernels: products per row (and the symbolic bin sizes),
 * binning rows, and the scan of row sizes into C's row pointer (with the numeric bin sizes and nnz(C)).
 */
#pragma once

#include "spgemm/plan_common.cuh"

namespace ts {

constexpr int kCountBlock = 256;          // threads of the product count: one warp per row of A
constexpr int kBinBlock = 256;            // threads of the binning kernel: one row each
constexpr int kPlanScanBlock = 512;       // threads of the row-pointer scan
constexpr int kPlanScanItems = 8;         // entries per thread of the scan
constexpr int kPlanScanChunk = kPlanScanBlock * kPlanScanItems;

}  // namespace ts

/// @brief Products of each row of A * B (a warp per row, grid-stride): row_products[row]; rows with at most one
/// product get their nnz(C) at once (c_row_offsets[row] = products), the others 0 and a symbolic bin by
/// min(products, n). Adds the bin sizes and the total number of products into `counters`.
extern "C" __global__ void __launch_bounds__(ts::kCountBlock) spgemm_plan_count(const ts::SpgemmPlanParams p) {
  __shared__ int histogram_tile[ts::kBinSlots];
  __shared__ unsigned long long products_tile;
  if (threadIdx.x < ts::kBinSlots) histogram_tile[threadIdx.x] = 0;
  if (threadIdx.x == 0) products_tile = 0;
  __syncthreads();
  const int lane = threadIdx.x & 31;
  const int warps = gridDim.x * (ts::kCountBlock / 32);
  unsigned long long products_fragment = 0;
  for (int row = blockIdx.x * (ts::kCountBlock / 32) + (threadIdx.x >> 5); row < p.m; row += warps) {
    const int a_end = __ldg(p.a_row_offsets + row + 1);
    int products = 0;  // <= nnz(B): the row's columns of A are distinct, so each entry of B counts once
#pragma unroll 4
    for (int a = __ldg(p.a_row_offsets + row) + lane; a < a_end; a += 32) {
      const int j = __ldg(p.a_column_indices + a);
      products += __ldg(p.b_row_offsets + j + 1) - __ldg(p.b_row_offsets + j);
    }
    products = ts::group_sum<32>(products);
    if (lane == 0) {
      p.row_products[row] = products;
      products_fragment += products;
      if (products <= 1) {
        p.c_row_offsets[row] = products;
      } else {
        p.c_row_offsets[row] = 0;  // the dense bin adds its tiles' counts into it
        atomicAdd(histogram_tile + ts::bin_of(min(products, p.n), p.dense_from), 1);
      }
    }
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) p.c_row_offsets[p.m] = 0;
  if (lane == 0 && products_fragment > 0) atomicAdd(&products_tile, products_fragment);
  __syncthreads();
  if (threadIdx.x < ts::kBinSlots && histogram_tile[threadIdx.x] > 0) {
    atomicAdd(p.counters + ts::kCounterSymbolicBins + threadIdx.x,
              static_cast<unsigned long long>(histogram_tile[threadIdx.x]));
  }
  if (threadIdx.x == 0 && products_tile > 0) atomicAdd(p.counters + ts::kCounterProducts, products_tile);
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
  long long running = offset + ts::block_exclusive_scan_ll<ts::kPlanScanBlock>(sum_fragment, warp_tile, &unused_total);
#pragma unroll
  for (int i = 0; i < ts::kPlanScanItems; ++i) {
    if (first + i <= p.m) {
      p.c_row_offsets[first + i] = static_cast<int>(running);
      if (first + i == p.m) p.counters[ts::kCounterNnz] = static_cast<unsigned long long>(running);
    }
    running += items_fragment[i];
  }
}
