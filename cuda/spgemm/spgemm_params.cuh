/**
 * @file @brief Kernel argument structs of the SpGEMM family (C = A * B, A and B CSR, fp32 values, i32 indices),
 * mirrored field for field by `#[repr(C)]` structs in src/spgemm.rs (each side checks the size).
 */
#pragma once

namespace ts {

/// @brief Arguments of every SpGEMM ladder kernel (k0..k4, kp): A (m x k) * B (k x n) appended to a COO output.
struct SpgemmParams {
  int m;                        // rows of A and C
  int k;                        // columns of A, rows of B
  int n;                        // columns of B and C
  int capacity;                 // entries allocated in out_*: a host-computed upper bound of nnz(C)
  const int* a_row_offsets;     // (m + 1) global
  const int* a_column_indices;  // (nnz(A)) global
  const float* a_values;        // (nnz(A)) global
  const int* b_row_offsets;     // (k + 1) global
  const int* b_column_indices;  // (nnz(B)) global
  const float* b_values;        // (nnz(B)) global
  int* out_rows;                // (capacity) COO row indices, global, unordered
  int* out_columns;             // (capacity) COO column indices, global
  float* out_values;            // (capacity) COO values, global
  int* out_count;               // (1) entries appended so far, global atomic counter; zero before launch
  float* scratch_acc;           // (scratch_tile, scratch_threads) k0/k1 accumulators, global, column-major
  unsigned* scratch_touched;    // (scratch_tile / 32, scratch_threads) k0/k1 touched bits, global
  int scratch_threads;          // k0/k1: threads in the grid (rows in flight)
  int scratch_tile;             // k0/k1: output columns per tile, a multiple of 32
};
static_assert(sizeof(SpgemmParams) == 120, "SpgemmParams must match src/spgemm.rs");

/// @brief Arguments of the COO -> sorted CSR conversion kernels.
struct CooToCsrParams {
  int m;                        // rows
  int nnz;                      // COO entries
  const int* coo_rows;          // (nnz) global
  const int* coo_columns;       // (nnz) global, (row, column) pairs unique
  const float* coo_values;      // (nnz) global
  int* row_offsets;             // (m + 1) global: row counts, then (scanned in place) the CSR row pointer
  int* row_cursor;              // (m) global, zero before the scatter: entries placed per row so far
  int* unsorted_columns;        // (nnz) global: entries grouped by row, columns unordered
  float* unsorted_values;       // (nnz) global
  int* csr_columns;             // (nnz) global: the result, columns ascending within each row
  float* csr_values;            // (nnz) global
};
static_assert(sizeof(CooToCsrParams) == 80, "CooToCsrParams must match src/spgemm.rs");

/// @brief Arguments of the production SpGEMM kernels (plan_*.cuh): C = A (m x k) * B (k x n), all CSR, C's
/// columns ascending within each row. Symbolic kernels read only the structures; numeric kernels the values too.
struct SpgemmPlanParams {
  int m;                          // rows of A and C
  int k;                          // columns of A, rows of B
  int n;                          // columns of B and C
  int dense_from;                 // rows with more entries (bound or nnz) than this go to the dense bin
  const int* a_row_offsets;       // (m + 1) global
  const int* a_column_indices;    // (nnz(A)) global
  const float* a_values;          // (nnz(A)) global
  const int* b_row_offsets;       // (k + 1) global
  const int* b_column_indices;    // (nnz(B)) global
  const float* b_values;          // (nnz(B)) global
  int* row_products;              // (m) global: products per row; a dense-tile row's slot in tile_counts after symbolic
  int* c_row_offsets;             // (m + 1) global: nnz of each row at [row], then (scanned in place) C's row pointer
  int* c_column_indices;          // (nnz(C)) global, numeric output
  float* c_values;                // (nnz(C)) global, numeric output
  int* bin_rows;                  // (m) global: rows grouped by bin (the symbolic bins, then the numeric bins)
  int* bin_cursors;               // (kBinSlots) global, zero before each binning: rows placed per bin so far
  unsigned long long* counters;   // (kCounters) global: bin sizes, products, nnz(C), error flags (kCounter*)
  int* tile_counts;               // (dense-tile rows, tiles) global: nnz of each (row, column tile) of the dense bin
  long long* block_sums;          // (scan blocks) global scratch of the row-pointer scan
  int tiles;                      // column tiles of the dense bin: ceil(n / kDenseTile)
  int pad;
};
static_assert(sizeof(SpgemmPlanParams) == 144, "SpgemmPlanParams must match src/spgemm/plan.rs");

}  // namespace ts
