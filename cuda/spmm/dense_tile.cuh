/**
 * @file @brief Stage 2: each thread strip-mines its register fragment of B: for every nonzero in the shared
 * tile, the row of B it selects, at this thread's columns, with dense vector loads.
 */
#pragma once

#include "common/vector.cuh"
#include "spmm/predicates.cuh"

namespace ts {

/// @brief Loads B rows into registers. Vectors of one thread are block_width vectors apart, so a subwarp's
/// loads of one B row are contiguous (coalesced).
template <typename Config>
struct DenseTileLoader {
  typedef typename Config::Scalar T;
  static constexpr int kDV = Config::kDenseVectorWidth;
  static constexpr int kVX = Config::kThreadVectorsX;
  static constexpr int kK = Config::kBlockItemsK;
  static constexpr int kStride = Config::kBlockWidth * kDV;

  /// (block_items_k, thread_vectors_x) dense vectors: registers.
  typedef Vec<T, kDV> Fragment[kK][kVX];

  const T* dense_;  // global: B + this block's first column + this thread's first column

  __device__ __forceinline__ explicit DenseTileLoader(const T* dense) : dense_(dense) {}

  /// @brief Loads the fragment for a full tile. With kMasked, entries whose offset is -1 (masked by the
  /// memory aligner) load zeros instead of B.
  template <bool kMasked>
  __device__ __forceinline__ void load(const int* offsets_tile, const PredicatesN<Config>& predicates,
                                       Fragment& fragment) const {
#pragma unroll
    for (int k4 = 0; k4 < kK; k4 += 4) {
      // Offsets are the same for the whole subwarp: one broadcast 16-byte shared load serves four rows.
      const Vec<int, 4> offsets = load_shared<int, 4>(offsets_tile + k4);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
#pragma unroll
        for (int v = 0; v < kVX; ++v) {
          const bool live = predicates.in_range[v] && (!kMasked || offsets.v[j] >= 0);
          fragment[k4 + j][v] = live ? load_global<T, kDV>(dense_ + offsets.v[j] + v * kStride) : zero_vec<T, kDV>();
        }
      }
    }
  }

  /// @brief The residue: loads and multiplies one nonzero at a time, `kResidueUnroll` per step, so no
  /// full fragment is needed for the fewer than block_items_k entries left.
  __device__ __forceinline__ void residue_mac(int count, const T* values_tile, const int* offsets_tile,
                                              const PredicatesN<Config>& predicates,
                                              float (&accumulator)[kVX * kDV]) const {
    for (int k0 = 0; k0 < count; k0 += Config::kResidueUnroll) {
#pragma unroll
      for (int u = 0; u < Config::kResidueUnroll; ++u) {
        const int k = k0 + u;
        if (k < count) {
          const float a = to_float(values_tile[k]);
          const int offset = offsets_tile[k];
#pragma unroll
          for (int v = 0; v < kVX; ++v) {
            if (predicates.in_range[v]) {
              const Vec<T, kDV> b = load_global<T, kDV>(dense_ + offset + v * kStride);
#pragma unroll
              for (int e = 0; e < kDV; ++e) {
                accumulator[v * kDV + e] = fmaf(a, to_float(b.v[e]), accumulator[v * kDV + e]);
              }
            }
          }
        }
      }
    }
  }
};

}  // namespace ts
