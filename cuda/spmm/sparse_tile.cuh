/**
 * @file @brief Stage 1: the subwarp loads a tile of its row's nonzeros (values and pre-scaled column
 * indices) into shared memory, collaboratively and with vector loads.
 */
#pragma once

#include "common/vector.cuh"

namespace ts {

/// @brief Loads `kBlockItemsK` nonzeros of one row at a time into the subwarp's shared tiles: `fetch` to
/// registers, `commit` to shared memory, so the next tile can be in flight while the current one is used.
template <typename Config>
struct SparseTileLoader {
  typedef typename Config::Scalar T;
  static constexpr int kSV = Config::kSparseVectorWidth;
  static constexpr int kStride = Config::kBlockWidth * kSV;  // entries between one thread's vectors

  const T* values_;           // global: this thread's next vector of A's values
  const int* column_indices_;  // global: the matching column indices
  T* values_tile_;            // shared: this thread's first slot in the subwarp's (block_items_k) value tile
  int* offsets_tile_;         // shared: the same slot in the (block_items_k) tile of offsets into B
  int first_slot_;            // tile position of this thread's first vector
  int n_;                     // columns of B: a column index c becomes the row offset c * n

  __device__ __forceinline__ SparseTileLoader(int n, int row_offset, int thread_idx_x, const T* values,
                                              const int* column_indices, T* values_tile, int* offsets_tile)
      : values_(values + row_offset + thread_idx_x * kSV),
        column_indices_(column_indices + row_offset + thread_idx_x * kSV),
        values_tile_(values_tile + thread_idx_x * kSV),
        offsets_tile_(offsets_tile + thread_idx_x * kSV),
        first_slot_(thread_idx_x * kSV),
        n_(n) {}

  /// (thread_vectors_k) vectors of the next tile, fetched ahead into registers so that their global-memory
  /// latency overlaps the dense loads and the multiply of the current tile.
  Vec<T, kSV> values_fragment_[Config::kThreadVectorsK];
  Vec<int, kSV> columns_fragment_[Config::kThreadVectorsK];

  /// @brief Issues the global loads of the next full tile into registers and advances to the tile after it.
  __device__ __forceinline__ void fetch() {
#pragma unroll
    for (int i = 0; i < Config::kThreadVectorsK; ++i) {
      values_fragment_[i] = load_global<T, kSV>(values_ + i * kStride);
      columns_fragment_[i] = load_global<int, kSV>(column_indices_ + i * kStride);
    }
    // The subwarp's next tile: with a row split, the row's tiles are dealt round robin to its subwarps.
    values_ += Config::kBlockItemsK * Config::kRowSplit;
    column_indices_ += Config::kBlockItemsK * Config::kRowSplit;
  }

  /// @brief Writes the fetched tile to shared memory, column indices scaled to row offsets of B. With
  /// kMaskPrefix, tile positions below `lead` (entries of the previous row, brought in by the memory aligner)
  /// get value 0 and offset -1.
  template <bool kMaskPrefix>
  __device__ __forceinline__ void commit(int lead) {
#pragma unroll
    for (int i = 0; i < Config::kThreadVectorsK; ++i) {
      Vec<T, kSV> values = values_fragment_[i];
      Vec<int, kSV> offsets;
#pragma unroll
      for (int j = 0; j < kSV; ++j) {
        offsets.v[j] = columns_fragment_[i].v[j] * n_;
        if (kMaskPrefix && first_slot_ + i * kStride + j < lead) {
          values.v[j] = from_float<T>(0.0f);
          offsets.v[j] = -1;
        }
      }
      store(values_tile_ + i * kStride, values);
      store(offsets_tile_ + i * kStride, offsets);
    }
  }

  /// @brief Fetches what follows the tile about to be multiplied, given the `remaining` entries of the subwarp's
  /// share after that tile: the next full tile, else with kAhead the residue (fetch_residue). Without kAhead the
  /// residue is loaded after the last full tile (load_residue).
  template <bool kAhead>
  __device__ __forceinline__ void fetch_next(int remaining) {
    if (remaining >= Config::kBlockItemsK) {
      fetch();
    } else if (kAhead) {
      fetch_residue(remaining);
    }
  }

  /// @brief Issues the loads of the row's last `count < kBlockItemsK` entries (the residue) into the fetch
  /// registers, so that they are in flight while the last full tile is multiplied; commit_residue stores them.
  /// Scalar loads: a vector could run past the end of the arrays, and a row too short for a full tile is not
  /// aligned. The residue never holds foreign entries (see MemoryAligner). Call it where the next full tile
  /// would have been fetched: the loader then points at the residue (with a row split, in the subwarp whose
  /// turn follows the row's last full tile; the others pass count 0).
  __device__ __forceinline__ void fetch_residue(int count) {
    for_each_residue_slot(count, [&](int i, int j, int e) {
      values_fragment_[i].v[j] = values_[e];
      columns_fragment_[i].v[j] = __ldg(column_indices_ + e);
    });
  }

  /// @brief Loads the residue's `count` entries straight into shared memory (scalar loads, as fetch_residue):
  /// the path of the tiles that do not fetch the residue ahead (kResidueAhead in spmm.cu). Not fetch_residue
  /// then commit_residue: through the fetch registers, even right before the store, five of those tiles spilled
  /// (NOTES.md step 39).
  __device__ __forceinline__ void load_residue(int count) {
    const T* values = values_ - first_slot_;
    const int* column_indices = column_indices_ - first_slot_;
    T* values_tile = values_tile_ - first_slot_;
    int* offsets_tile = offsets_tile_ - first_slot_;
    for (int i = first_slot_ / kSV; i < count; i += Config::kBlockWidth) {
      values_tile[i] = values[i];
      offsets_tile[i] = __ldg(column_indices + i) * n_;
    }
  }

  /// @brief Writes the fetched residue's `count` entries to shared memory, column indices scaled to row
  /// offsets of B. The slots past `count` are not written (the residue loop does not read them).
  __device__ __forceinline__ void commit_residue(int count) {
    for_each_residue_slot(count, [&](int i, int j, int e) {
      values_tile_[e] = values_fragment_[i].v[j];
      offsets_tile_[e] = columns_fragment_[i].v[j] * n_;
    });
  }

 private:
  /// @brief Calls f(i, j, e) for this thread's slots of the fetch registers (vector i, element j; e entries past
  /// its first slot) that lie in the residue's first `count` entries.
  template <typename F>
  __device__ __forceinline__ void for_each_residue_slot(int count, F f) const {
#pragma unroll
    for (int i = 0; i < Config::kThreadVectorsK; ++i) {
#pragma unroll
      for (int j = 0; j < kSV; ++j) {
        if (first_slot_ + i * kStride + j < count) f(i, j, i * kStride + j);
      }
    }
  }
};

}  // namespace ts
