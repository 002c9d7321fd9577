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

  /// Whether the residue issues a step's B loads before its FMAs (residue_mac). For 2-byte elements in vectors
  /// narrower than 16 bytes nvcc kept the plain loop's guards as branches and waited on each load before the
  /// next: batched, f16/bf16 at n not a multiple of 8 ran up to 1.7x faster. f32 (whose guards nvcc turns
  /// into predicates, several loads in flight) lost 1-2% batched, 16-byte half vectors 0.96x-1.08x (NOTES.md
  /// step 33).
  static constexpr bool kBatchedResidue = sizeof(T) == 2 && kDV * sizeof(T) < 16;

  /// @brief The residue: loads and multiplies `kResidueUnroll` nonzeros per step, so no full fragment is
  /// needed for the fewer than block_items_k entries left; with kBatchedResidue a step's loads (its values from
  /// shared memory, then B) all come before its FMAs.
  __device__ __forceinline__ void residue_mac(int count, const T* values_tile, const int* offsets_tile,
                                              const PredicatesN<Config>& predicates,
                                              float (&accumulator)[kVX * kDV]) const {
    constexpr int kU = Config::kResidueUnroll;
    for (int k0 = 0; k0 < count; k0 += kU) {
      if constexpr (kBatchedResidue) {
        float a[kU];
        Vec<T, kDV> b[kU][kVX];
#pragma unroll
        for (int u = 0; u < kU; ++u) {
          const bool live = k0 + u < count;
          // Entries past the residue read slot 0 of the tiles (always written) and load nothing from B.
          const int k = live ? k0 + u : 0;
          a[u] = to_float(values_tile[k]);
          const int offset = offsets_tile[k];
#pragma unroll
          for (int v = 0; v < kVX; ++v) {
            b[u][v] = live && predicates.in_range[v] ? load_global<T, kDV>(dense_ + offset + v * kStride)
                                                     : zero_vec<T, kDV>();
          }
        }
#pragma unroll
        for (int u = 0; u < kU; ++u) {
          if (k0 + u < count) {
#pragma unroll
            for (int v = 0; v < kVX; ++v) {
              if (predicates.in_range[v]) mac_vector(a[u], b[u][v], accumulator + v * kDV);
            }
          }
        }
      } else {
#pragma unroll
        for (int u = 0; u < kU; ++u) {
          const int k = k0 + u;
          if (k < count) {
            const float a = to_float(values_tile[k]);
            const int offset = offsets_tile[k];
#pragma unroll
            for (int v = 0; v < kVX; ++v) {
              if (predicates.in_range[v]) {
                mac_vector(a, load_global<T, kDV>(dense_ + offset + v * kStride), accumulator + v * kDV);
              }
            }
          }
        }
      }
    }
  }

 private:
  /// @brief accumulator[e] += a * b[e] for the kDV elements of one dense vector.
  __device__ __forceinline__ static void mac_vector(float a, const Vec<T, kDV>& b, float* accumulator) {
#pragma unroll
    for (int e = 0; e < kDV; ++e) accumulator[e] = fmaf(a, to_float(b.v[e]), accumulator[e]);
  }
};

}  // namespace ts
