/**
 * @file @brief The SpMM template parameters and every rule they must obey. src/spmm/config.rs repeats each
 * rule, with the same message, in `SpmmConfig::validate`.
 */
#pragma once

namespace ts {

/// @brief Compile-time configuration of one SpMM variant (Sputnik's `SpmmConfig`, field for field, and the row
/// split).
template <typename Scalar_,            // element type of A, B and C (float, __half, __nv_bfloat16)
          int kSparseVectorWidth_,     // elements of A per vector load
          int kDenseVectorWidth_,      // elements of B and C per vector load/store
          int kBlockItemsY_,           // subwarps per block (one row each, or kRowSplit_ per row)
          int kBlockItemsK_,           // nonzeros of a row per shared-memory tile
          int kBlockItemsX_,           // columns of C per block
          int kBlockWidth_,            // threads per subwarp (threadIdx.x)
          int kResidueUnroll_,         // unroll factor of the residue loop
          bool kPredicateLoads_,       // guard loads and stores in n (needed when n % block_items_x != 0)
          bool kLaunchBounds_,         // emit __launch_bounds__ with a min occupancy
          int kMinOccupancy_,          // blocks per SM the compiler must fit when kLaunchBounds_
          int kRowSplit_,              // subwarps per row (1: Sputnik's one); not a Sputnik parameter
          int kColumnTiles_>           // column tiles per block, taken in turn (1: Sputnik's one); nor is this
struct SpmmConfig {
  typedef Scalar_ Scalar;
  static constexpr int kSparseVectorWidth = kSparseVectorWidth_;
  static constexpr int kDenseVectorWidth = kDenseVectorWidth_;
  static constexpr int kBlockItemsY = kBlockItemsY_;
  static constexpr int kBlockItemsK = kBlockItemsK_;
  static constexpr int kBlockItemsX = kBlockItemsX_;
  static constexpr int kBlockWidth = kBlockWidth_;
  static constexpr int kResidueUnroll = kResidueUnroll_;
  static constexpr bool kPredicateLoads = kPredicateLoads_;
  static constexpr bool kLaunchBounds = kLaunchBounds_;
  static constexpr int kMinOccupancy = kMinOccupancy_;
  /// Subwarps that share one row: subwarp q of a row takes its full tiles q, q + kRowSplit, ... (and the residue
  /// when its turn comes next), and the block adds the kRowSplit sums in subwarp order (spmm/spmm.cu). Beyond
  /// Sputnik: it puts more loads of one row in flight where few rows are long (NOTES.md, "SpMM step 29").
  static constexpr int kRowSplit = kRowSplit_;
  /// Column tiles of C each block computes, one after another on the same rows: the grid's column extent is
  /// ceil(column tiles / kColumnTiles), and the block's last group may hold fewer. On very short rows the
  /// row's bounds and entries, loaded for the first tile, are L1 hits for the others, and the block's fixed
  /// costs are paid once (NOTES.md, "SpMM step 60"). Beyond Sputnik.
  static constexpr int kColumnTiles = kColumnTiles_;
  /// Rows of C per block.
  static constexpr int kRowsPerBlock = kBlockItemsY_ / kRowSplit_;
  /// Whether the kernel can walk the pieces of a row split (spmm/split.rs). Not the launch-bounded variants:
  /// their register budget is spent, and the piece path cost them 2-4% on unsplit matrices (NOTES.md, "SpMM
  /// step 5"). SpmmConfig::walks_pieces in src/spmm/config.rs repeats the rule.
  /// Nor the row-split ones: a piece is already a share of a row.
  static constexpr bool kWalksPieces = !kLaunchBounds && kRowSplit == 1;
  /// Whether the kernel can run the SM-affine block order (spmm/block_order.cuh): the launch-bounded variants.
  /// In the others the claim's code cost the 128-column tiles 9-31% at n = 4096 even when it did not run
  /// (NOTES.md, "SpMM step 15"). SpmmConfig::claims_blocks in src/spmm/config.rs repeats the rule.
  /// Nor those with column tiles in turn: a claim is one column tile.
  static constexpr bool kClaimsBlocks = kLaunchBounds && kColumnTiles == 1;

  static constexpr int kThreadsPerBlock = kBlockItemsY * kBlockWidth;
  /// Dense vectors each thread loads per row of B (and stores per row of C).
  static constexpr int kThreadVectorsX = kBlockItemsX / (kBlockWidth * kDenseVectorWidth);
  /// Sparse vectors each thread loads per tile.
  static constexpr int kThreadVectorsK = kBlockItemsK / (kBlockWidth * kSparseVectorWidth);

  static_assert(kThreadsPerBlock % 32 == 0, "block_items_y * block_width must be a multiple of 32");
  static_assert(kBlockItemsK >= kBlockWidth && kBlockItemsK % kBlockWidth == 0,
                "block_items_k must be a multiple of block_width");
  static_assert(kBlockItemsX >= kBlockWidth && kBlockItemsX % kBlockWidth == 0,
                "block_items_x must be a multiple of block_width");
  static_assert(kSparseVectorWidth <= kBlockItemsK / kBlockWidth,
                "sparse_vector_width must be <= block_items_k / block_width");
  static_assert(kDenseVectorWidth * kBlockWidth <= kBlockItemsX,
                "dense_vector_width * block_width must be <= block_items_x");
  static_assert(kBlockItemsK % kResidueUnroll == 0, "block_items_k must be a multiple of residue_unroll");
  static_assert(kBlockWidth == 1 || kBlockWidth % 2 == 0, "block_width must be 1 or even");
  // Sputnik also requires block_items_y * block_width == 32 when 1 < block_width < 32 (one warp per block). Here
  // every subwarp has its own shared tiles and barrier (common/barrier.cuh masks its lanes within the warp), so
  // several warps of narrow subwarps per block are fine: the 32-row tile uses 16 warps of two 16-thread rows
  // (NOTES.md, "Where we depart from Sputnik").
  static_assert(kBlockWidth <= 32, "block_width must be <= 32");
  static_assert(kThreadsPerBlock <= 1024, "block_items_y * block_width must be at most 1024 (threads per block)");
  static_assert(kBlockItemsX % (kBlockWidth * kDenseVectorWidth) == 0,
                "block_items_x must be a multiple of block_width * dense_vector_width");
  static_assert(kBlockItemsK % (kBlockWidth * kSparseVectorWidth) == 0,
                "block_items_k must be a multiple of block_width * sparse_vector_width");
  static_assert(sizeof(Scalar) * kSparseVectorWidth <= 16 && sizeof(Scalar) * kDenseVectorWidth <= 16,
                "a vector access moves at most 16 bytes");
  static_assert((kSparseVectorWidth & (kSparseVectorWidth - 1)) == 0 &&
                    (kDenseVectorWidth & (kDenseVectorWidth - 1)) == 0,
                "vector widths must be powers of two");
  static_assert(kRowSplit >= 1 && kBlockItemsY % kRowSplit == 0, "block_items_y must be a multiple of row_split");
  static_assert(kColumnTiles >= 1, "column_tiles must be positive");
};

}  // namespace ts
