/**
 * @file @brief COO (unordered, unique (row, column) pairs) -> CSR with ascending columns, in four kernels:
 * row histogram, single-block exclusive scan of the row counts, scatter into row segments, per-row sort.
 */
#pragma once

#include <climits>

#include "spgemm/spgemm_params.cuh"
#include "spgemm/tile_utils.cuh"

namespace ts {

/// Threads of the single-block scan.
constexpr int kScanBlock = 1024;
/// Threads per row in the sort.
constexpr int kSortBlock = 256;
/// Longest row sorted in shared memory (bitonic); longer rows are rank-sorted from global memory.
constexpr int kSortTile = 2048;

}  // namespace ts

/// @brief Counts the entries of each row: row_offsets[r] += 1 per entry (row_offsets zeroed before).
extern "C" __global__ void spgemm_coo_row_histogram(const ts::CooToCsrParams p) {
  for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < p.nnz; e += gridDim.x * blockDim.x) {
    atomicAdd(p.row_offsets + __ldg(p.coo_rows + e), 1);
  }
}

/// @brief Exclusive scan of row_offsets[0..m] in place with one block (row_offsets[m] starts at 0 and ends
/// as nnz). Each thread scans a contiguous chunk serially; the chunk totals are scanned across the block.
extern "C" __global__ void __launch_bounds__(ts::kScanBlock) spgemm_exclusive_scan_single_block(
    const ts::CooToCsrParams p) {
  __shared__ int warp_totals_tile[32];
  __shared__ int total_tile;
  const int len = p.m + 1;
  const int chunk = (len + ts::kScanBlock - 1) / ts::kScanBlock;
  const int begin = min(static_cast<int>(threadIdx.x) * chunk, len);
  const int end = min(begin + chunk, len);
  int sum_fragment = 0;
  for (int i = begin; i < end; ++i) sum_fragment += p.row_offsets[i];
  int running_fragment = ts::block_exclusive_scan<ts::kScanBlock>(sum_fragment, warp_totals_tile, &total_tile);
  for (int i = begin; i < end; ++i) {
    const int count = p.row_offsets[i];
    p.row_offsets[i] = running_fragment;
    running_fragment += count;
  }
}

/// @brief Places each entry in its row's segment (order within the row arbitrary).
extern "C" __global__ void spgemm_coo_scatter_rows(const ts::CooToCsrParams p) {
  for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < p.nnz; e += gridDim.x * blockDim.x) {
    const int r = __ldg(p.coo_rows + e);
    const int pos = __ldg(p.row_offsets + r) + atomicAdd(p.row_cursor + r, 1);
    p.unsorted_columns[pos] = __ldg(p.coo_columns + e);
    p.unsorted_values[pos] = __ldg(p.coo_values + e);
  }
}

/// @brief Sorts one row's segment by column (one block per row, kSortBlock threads) into csr_columns and
/// csr_values. Rows up to kSortTile entries: bitonic sort in shared memory, padded to a power of two with
/// INT_MAX keys (columns are < n <= INT_MAX, so strictly below the pad). Longer rows: each entry's rank is
/// the number of smaller columns in the row (columns within a row are unique), O(len^2 / kSortBlock) reads.
extern "C" __global__ void __launch_bounds__(ts::kSortBlock) spgemm_sort_rows(const ts::CooToCsrParams p) {
  __shared__ int columns_tile[ts::kSortTile];
  __shared__ float values_tile[ts::kSortTile];
  const int row = blockIdx.x;
  const int begin = __ldg(p.row_offsets + row);
  const int len = __ldg(p.row_offsets + row + 1) - begin;
  const int* __restrict__ columns = p.unsorted_columns + begin;
  const float* __restrict__ values = p.unsorted_values + begin;
  if (len > ts::kSortTile) {
    for (int i = threadIdx.x; i < len; i += ts::kSortBlock) {
      const int key = columns[i];
      int rank = 0;
      for (int j = 0; j < len; ++j) rank += columns[j] < key;
      p.csr_columns[begin + rank] = key;
      p.csr_values[begin + rank] = values[i];
    }
    return;
  }
  int padded = 1;
  while (padded < len) padded *= 2;
  for (int i = threadIdx.x; i < padded; i += ts::kSortBlock) {
    columns_tile[i] = i < len ? columns[i] : INT_MAX;
    values_tile[i] = i < len ? values[i] : 0.0f;
  }
  __syncthreads();
  for (int size = 2; size <= padded; size *= 2) {
    for (int stride = size / 2; stride > 0; stride /= 2) {
      for (int i = threadIdx.x; i < padded; i += ts::kSortBlock) {
        const int partner = i ^ stride;
        if (partner > i) {
          const bool ascending = (i & size) == 0;
          if ((columns_tile[i] > columns_tile[partner]) == ascending) {
            const int c = columns_tile[i];
            columns_tile[i] = columns_tile[partner];
            columns_tile[partner] = c;
            const float v = values_tile[i];
            values_tile[i] = values_tile[partner];
            values_tile[partner] = v;
          }
        }
      }
      __syncthreads();
    }
  }
  for (int i = threadIdx.x; i < len; i += ts::kSortBlock) {
    p.csr_columns[begin + i] = columns_tile[i];
    p.csr_values[begin + i] = values_tile[i];
  }
}
