/**
 * @file @brief Kernel argument structs, one per kernel family, mirrored field for field by `#[repr(C)]`
 * structs in src/ (each side checks the size).
 */
#pragma once

namespace ts {

/// @brief Arguments of every SpMM kernel: C (m x n) = A (m x k, CSR) * B (k x n, row-major).
struct SpmmParams {
  int m;                        // rows of A and C
  int k;                        // columns of A, rows of B
  int n;                        // columns of B and C
  int nnz;                      // stored entries of A
  const int4* swizzled_rows;    // (m) rows longest first: first entry, end entry, row, 0 (csr::swizzled_rows),
                                // global; null = row order (spmm::rows_longest_first)
  const void* values;           // (nnz) A's values, global, element type of the kernel
  const int* row_offsets;       // (m + 1) CSR row pointer, global
  const int* column_indices;    // (nnz) CSR column indices, global
  const void* dense;            // (k, n) B, row-major, global
  const float* bias;            // (m) bias added before a ReLU, global; null = plain SpMM
  void* out;                    // (m, n) C, row-major, global; every element is written
  // Row split (null pieces = one subwarp per row, in swizzled_rows order). Each piece is 4 ints: row, first
  // entry, end entry, partial row (-1: the piece is the whole row and writes C). Pieces of split rows write
  // their f32 sums to partials[partial row]; spmm_fixup_<dtype> adds a split row's partials in piece order.
  const int* pieces;            // (num_pieces, 4) global
  float* partials;              // (num_partials, n) f32 scratch, global
  const int* split_rows;        // (num_split_rows, 3): row, first partial row, partial rows, global
  int num_pieces;
  int num_split_rows;
  // Block order (src/spmm/mod.rs, `BlockOrder`): kRowBlocksFirst = a 2-D grid, x over row blocks (pieces) and
  // y over column tiles; kColumnTilesFirst = a 1-D grid with the column tiles of one row block consecutive;
  // kSmAffine = a 1-D grid of row_blocks x column tiles blocks, each claiming its pair from tile_counters
  // (cuda/spmm/block_order.cuh) so that an SM's blocks share one column tile of B.
  int block_order;
  int row_blocks;               // ceil(rows or pieces / block_items_y)
  int* tile_counters;           // kSmAffine: (column tiles + 1) ints, zero at launch and left zero; else null
  float alpha;                  // C = alpha A B + beta C (cuda/common/epilogue.cuh, finish_store), where C is stored
  float beta;                   // 0: C is not read
};
static_assert(sizeof(SpmmParams) == 128, "SpmmParams must match src/spmm/mod.rs");
enum SpmmBlockOrder { kRowBlocksFirst = 0, kColumnTilesFirst = 1, kSmAffine = 2 };

/// @brief Arguments of spmm_zero_rows_<dtype>: the rows of C that A leaves empty, when the tile kernel's grid
/// leaves them out (src/spmm/mod.rs, `skips_empty_rows`). Each is written as the tile kernel would: zeros, or
/// ReLU(bias) with a bias.
struct SpmmZeroRowsParams {
  const int* rows;              // rows[i * stride] for i < count: the rows to write, global (the row field of the
                                // tail of swizzled_rows or of pieces, where the empty rows go: longest first)
  int stride;                   // ints from one row to the next in `rows`
  int count;                    // rows to write
  int n;                        // columns of C
  float alpha;                  // each element is finish_store's from a zero sum: alpha 0 + beta C (+ bias, ReLU)
  float beta;                   // 0: C is not read
  int pad;
  const float* bias;            // (m) bias added before a ReLU, global; null = none
  void* out;                    // (m, n) C, row-major, global
};
static_assert(sizeof(SpmmZeroRowsParams) == 48, "SpmmZeroRowsParams must match src/spmm/mod.rs");

/// @brief Arguments of spmm_zero_windows: the rows of C in the tensor-core windows that hold no entry, when the
/// launch leaves them out of its grid (src/spmm/tensor_core.rs, `leaves_out_empty_windows`). A window's rows are
/// one contiguous range of C, written with the windows kernels' value for a row with no entry: zero, or with a
/// bias ReLU(bias[row]).
struct SpmmZeroWindowsParams {
  const int* windows;           // (count) the empty windows, global
  int count;                    // windows to write
  int rows_per_window;          // 16 or 64
  int m;                        // rows of C: the last window stops there
  int row_vectors;              // 16-byte pieces per row of C (n * sizeof(T) / 16; n * sizeof(T) a multiple of 16)
  void* out;                    // (m, n) C, row-major, global
  const float* bias;            // null: none; else (m) the bias of each row, before a ReLU
  float alpha;                  // each element is finish_store's from a zero sum, as the tensor-core kernels would
  float beta;                   // store it from an empty one: alpha 0 + beta C (+ bias, ReLU); beta 0: C not read
};
static_assert(sizeof(SpmmZeroWindowsParams) == 48, "SpmmZeroWindowsParams must match src/spmm/tensor_core.rs");

/// @brief Arguments of the seed SpMV kernels: y = alpha * A x + beta * y.
struct SpmvParams {
  int m;                        // rows of A, length of y
  int k;                        // columns of A, length of x
  int nnz;                      // stored entries of A
  float alpha;
  float beta;                   // 0 means y is not read
  int pad;
  const float* values;          // (nnz) global
  const int* row_offsets;       // (m + 1) global
  const int* column_indices;    // (nnz) global
  const float* x;               // (k) global
  float* prefix;                // (nnz) per-32-block inclusive prefix sums of the products, global scratch
  float* y;                     // (m) global
};
static_assert(sizeof(SpmvParams) == 72, "SpmvParams must match src/spmv.rs");

/// Arguments of the tensor-core SpMM kernels (cuda/spmm/tensor_core.cuh); mirrored by src/spmm/tensor_core.rs.
struct SpmmTcParams {
  int m;                              // rows of A and C
  int n;                              // columns of B and C, a multiple of 8
  int num_windows;                    // ceil(m / rows per window)
  int splits;                         // wide kernels: k-block ranges per window (grid z); 1 for the narrow ones
  const int* window_blocks;           // (num_windows + 1) first k-block of each window
  const int* block_columns;           // (16 per k-block) the row of B each slot multiplies, -1 for padding
  const uint4* block_values;          // (32 per 16 rows of a window, per k-block; 64 for f32) A's 16 x 16
                                      // blocks in mma A-fragment order (TcElem in cuda/spmm/tensor_core.cuh)
  const unsigned short* block_masks;  // (one per row of a window, per k-block) bit j of row r: A stores (r, slot j)
  const void* dense;                  // B (k x n), row-major, element type of the kernel
  void* out;                          // C (m x n), row-major, element type of the kernel
  float* partials;                    // splits > 1: (splits, m, n) f32 partial products, global scratch
  const int* windows;                 // null: block x takes window x; else (grid x) the window block x takes: the
                                      // windows holding k-blocks, the empty ones left to spmm_zero_windows
  const int* window_heads;            // wide kernels (32- and 64-row windows): (kTcHeadBlocks x 16 per window) the
                                      // slot columns of each window's first kTcHeadBlocks k-blocks, -1 past its
                                      // last; null elsewhere (src/spmm/tensor_core.rs, `HostBlocks::window_heads`)
  const float* bias;                  // null: none; else (m) + bias[row] and ReLU after the scalars
  float alpha;                        // C = alpha A B + beta C (+ bias, ReLU): finish_store where C is stored,
  float beta;                         // never on a partial tile (the fix-up or the cluster's sum applies it)
};
static_assert(sizeof(SpmmTcParams) == 104, "SpmmTcParams must match src/spmm/tensor_core.rs");
/// @brief Arguments of spmm_tc_values_<order> (cuda/spmm/tc_values.cuh): new values of A written into its
/// tensor-core blocks in place, the structure (and so every slot, mask and start) unchanged.
struct SpmmTcValuesParams {
  const void* values;                 // (nnz) A's new values, global: 16-bit (f16, bf16) or 32-bit (f32) elements
  const unsigned short* block_masks;  // (one per row of a window, per k-block) bit j of row r: A stores (r, slot j)
  const int* block_starts;            // (one per row of a window, per k-block) the first of row r's entries in the
                                      // k-block, an index into values; 0 where the row stores none there
  void* block_values;                 // (rows_per_window x 16 per k-block) the blocks' values, element bits
  int num_blocks;                     // k-blocks
  int rows_per_window;                // 16, 32 or 64
};
static_assert(sizeof(SpmmTcValuesParams) == 40, "SpmmTcValuesParams must match src/spmm/tensor_core.rs");
/// @brief Arguments of spmm_tc_build_count and spmm_tc_build_fill (cuda/spmm/tc_build.cuh): A's tensor-core
/// blocks, but their values, built on the device from its structure.
struct SpmmTcBuildParams {
  const int* row_offsets;       // (m + 1) A's row pointer, global
  const int* columns;           // (nnz) A's column indices, sorted within each row, global
  const int* window_blocks;     // fill: (num_windows + 1) first k-block of each window; null for the count
  int* window_slots;            // count: (num_windows) distinct columns of each window; null for the fill
  int* block_columns;           // fill: (16 per k-block) the slot columns, -1 for padding
  unsigned short* block_masks;  // fill: (rows_per_window per k-block) zero before; bit j of row r: A stores slot j
  int* block_starts;            // fill: (rows_per_window per k-block) zero before; the row's first entry there
  int* window_heads;            // fill: null, or (kTcHeadBlocks x 16 per window) the first slot columns, -1 past
  int m;                        // rows of A
  int cols;                     // columns of A: the bitmap's bits
  int num_windows;              // ceil(m / rows_per_window)
  int rows_per_window;          // 16, 32 or 64
};
static_assert(sizeof(SpmmTcBuildParams) == 80, "SpmmTcBuildParams must match src/spmm/tensor_core.rs");
/// k-blocks per window in SpmmTcParams::window_heads (src/spmm/tensor_core.rs, `HEAD_BLOCKS`): the most ring
/// stages of the wide kernel (cuda/spmm/tensor_core.cuh, `tcw_stages`).
constexpr int kTcHeadBlocks = 8;

/// @brief Arguments of the production SpMV kernels (cuda/spmv/spmv_csr.cu): y = alpha * A x + beta * y.
struct SpmvCsrParams {
  int m;                        // rows of A, length of y
  int k;                        // columns of A, length of x
  int long_row;                 // vector kernel: rows longer than this are left to the long-row kernels
  int num_long;                 // entries of long_rows
  double alpha;                 // converted to the accumulation type in the kernel
  double beta;                  // 0 means y is not read
  const void* values;           // (nnz) A's values, global, element type of the kernel
  const int* row_offsets;       // (m + 1) CSR row pointer, global
  const int* column_indices;    // (nnz) CSR column indices, global
  const void* x;                // (k) global, element type of the kernel
  void* y;                      // (m) global, element type of the kernel; each row written by exactly one thread
  const int* long_rows;         // (num_long) rows longer than long_row, ascending, global
  const int* long_row_chunks;   // (num_long + 1) first chunk of each long row, global
  const int* chunk_bounds;      // (2 * chunks) [start, end) of each chunk in A's entries, global; null: chunk = row
  void* partials;               // (chunks) chunk sums in the accumulation type, global scratch
  const short* column_offsets;  // (nnz) column - row of each entry, 16-bit (the plan's compressed indices), global;
                                // read instead of column_indices by the `_i16` vector kernels
  int* overflow;                // the encoding kernel sets it to 1 when an entry's column - row does not fit
  const int* tile_rows;         // (tiles + 1) segmented strategy: first row starting in each entry tile, then m
};
static_assert(sizeof(SpmvCsrParams) == 128, "SpmvCsrParams must match src/spmv.rs");

/// @brief Arguments of every SDDMM kernel (cuda/sddmm/sddmm.cu): C = alpha (A B^T) o spy(C) + beta C, the product of
/// two dense row-major matrices sampled at C's entries.
struct SddmmParams {
  int m;                        // rows of A and C
  int n;                        // rows of B, columns of C
  int k;                        // columns of A and B (the inner dimension)
  int nnz;                      // stored entries of C
  const int* row_offsets;       // (m + 1) C's CSR row pointer, global
  const int* column_indices;    // (nnz) C's CSR column indices, global
  const void* lhs;              // (m, k) A, row-major, global, element type of the kernel
  const void* rhs;              // (n, k) B, row-major, global, element type of the kernel
  void* values;                 // (nnz) C's values, global: every one written, read first where beta is not 0
  float alpha;
  float beta;                   // 0: C's old values are not read
};
static_assert(sizeof(SddmmParams) == 64, "SddmmParams must match src/sddmm.rs");

/// @brief Arguments of the tiled SDDMM kernels (cuda/sddmm/tiled.cuh), which run a plan (src/sddmm.rs, `SddmmPlan`):
/// C's rows in tiles of tile_rows, each tile's entries ordered by column, so that one load of a row of B serves every
/// entry of its column in the tile, and the tile's rows of A sit in shared memory.
struct SddmmTiledParams {
  int m;                        // rows of A and C
  int n;                        // rows of B, columns of C
  int k;                        // columns of A and B
  int nnz;                      // stored entries of C
  int tile_rows;                // rows of C per tile
  int a_stride;                 // elements from one row of the tile of A to the next in shared memory (k + a vector)
  int num_units;                // blocks: one per unit
  int pad;
  const int* units;             // (num_units, 3): tile, first segment, end segment, global
  const int* segment_columns;   // (segments) the column of C (row of B) of each segment, global
  const int* segment_starts;    // (segments + 1) each segment's first entry in the plan's order, global
  const int* entry_rows;        // (nnz) in the plan's order: the entry's row within its tile, global
  const int* entry_index;       // (nnz) in the plan's order: the entry's index in C's values, global
  const void* lhs;              // (m, k) A, row-major, global
  const void* rhs;              // (n, k) B, row-major, global
  void* values;                 // (nnz) C's values, global
  float alpha;
  float beta;                   // 0: C's old values are not read
};
static_assert(sizeof(SddmmTiledParams) == 104, "SddmmTiledParams must match src/sddmm.rs");

/// @brief Arguments of the tensor-core SDDMM kernels (cuda/sddmm/tc.cuh), which run a plan (src/sddmm.rs,
/// `SddmmPlan::tensor_cores`): the 64 x 64 tiles of C that hold an entry, one block each.
struct SddmmTcParams {
  int m;                        // rows of A and C
  int n;                        // rows of B, columns of C
  int k;                        // columns of A and B
  int nnz;                      // stored entries of C
  int num_tiles;                // blocks: one per tile
  int pad;
  const int* row_offsets;       // (m + 1) C's CSR row pointer, global
  const int* column_indices;    // (nnz) C's CSR column indices, global
  const int* tiles;             // (num_tiles, 3) each tile's row tile, column tile (64 rows and columns each) and
                                // the most entries one of its rows has in it
  const int* starts;            // (num_tiles, 64) each tile's rows' first entries at or past its first column
  const void* lhs;              // (m, k) A, row-major, global
  const void* rhs;              // (n, k) B, row-major, global
  void* values;                 // (nnz) C's values, global
  float alpha;
  float beta;                   // 0: C's old values are not read
};
static_assert(sizeof(SddmmTcParams) == 88, "SddmmTcParams must match src/sddmm.rs");

/// @brief Arguments of the sparse softmax kernels (cuda/softmax/softmax.cu): each row's stored entries replaced by
/// their softmax (forward), or a softmax's gradient from its output P and the gradient dP (backward).
struct SoftmaxParams {
  int m;                        // rows
  int long_threshold;           // rows longer than this are left to the chunk kernels (INT_MAX: none are)
  const int* row_offsets;       // (m + 1) CSR row pointer, global
  const void* input;            // (nnz) forward: the scores; backward: P; element type of the kernel, global
  const void* grad;             // (nnz) backward: dP; forward: null
  void* output;                 // (nnz) forward: P; backward: dS. May be input (forward) or grad (backward): each
                                // entry is read before it is written, by the thread that writes it
  int4* chunks;                 // (long_capacity) the long rows' chunks: row, the row's first chunk, the row's
                                // chunk count, this chunk's index in its row; in no order of rows, global
  int* chunk_count;             // entries of chunks, zeroed before the finding kernel
  float* partials;              // (2 x long_capacity) each chunk's (maximum, sum) or (dot, unused), global scratch
  int long_capacity;            // room in chunks: the finding kernel lists no row whose chunks would pass it
  int nnz;                      // entries: the rows kernels load no vector that reaches past the values' end
};
static_assert(sizeof(SoftmaxParams) == 72, "SoftmaxParams must match src/softmax.rs");

}  // namespace ts
