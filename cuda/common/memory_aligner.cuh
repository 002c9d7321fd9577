/**
 * @file @brief Aligns a CSR row's start for vector loads without padding the matrix.
 */
#pragma once

namespace ts {

/// @brief Rounds a row's first nonzero down to a multiple of the sparse vector width.
///
/// Vector loads need addresses aligned to the vector size, but rows start anywhere. Instead of padding
/// rows (Sputnik's requirement), the row start moves down by `lead < kSparseVectorWidth` entries that belong
/// to the previous row; the first tile masks them (value 0, offset -1, and the dense loader loads zeros for
/// them, so not even 0 * Inf can leak in). Rows too short for one full tile keep their start: the residue
/// uses scalar loads and needs no alignment.
template <int kSparseVectorWidth, int kBlockItemsK>
struct MemoryAligner {
  static_assert((kSparseVectorWidth & (kSparseVectorWidth - 1)) == 0, "vector widths are powers of two");
  int row_offset;  // first entry to load (aligned when lead > 0)
  int nonzeros;    // entries from row_offset to the row's end
  int lead;        // foreign entries at the front of the first tile

  __device__ __forceinline__ MemoryAligner(int row_start, int row_nonzeros) {
    lead = row_start & (kSparseVectorWidth - 1);
    if (row_nonzeros + lead >= kBlockItemsK) {
      row_offset = row_start - lead;
      nonzeros = row_nonzeros + lead;
    } else {
      lead = 0;
      row_offset = row_start;
      nonzeros = row_nonzeros;
    }
  }
};

}  // namespace ts
