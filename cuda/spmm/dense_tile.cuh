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

  __device__ __forceinline__ explicit DenseTileLoader(const T* dense) : dense_(dense) {
    // Held in a register pair, opaque to nvcc, a load's address is one IMAD.WIDE from its offset. Otherwise nvcc
    // rebuilt every address from the parameter bank and a 64-bit column index, four instructions per load and in
    // the f32 tiles again for each of a thread's vectors (NOTES.md, "SpMM step 58").
    asm("" : "+l"(dense_));
  }

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

  /// Whether the residue takes a step's kResidueUnroll entries together (residue_step: one shared vector load of
  /// their values and one of their offsets, then all their B loads, then their FMAs) or one by one. For 2-byte
  /// elements the one-by-one loop spent per entry two shared loads, a branch and the B address (NOTES.md, "SpMM
  /// step 57"), and in vectors narrower than 16 bytes waited on each load before the next (step 33); taken
  /// together, f16/bf16 ran 1.01x-1.10x faster (by problem set) where a CUDA-core tile is chosen (step 58).
  /// f32 takes them together in the k = 32 tiles whose step of B vectors fits in 16 registers: there its
  /// variants ran 1.024x faster on geometric mean (0.98x-1.07x by variant), and the problems that choose one
  /// 1.02x (step 59). Its one-by-one loop, which nvcc predicates with several loads in flight, stays in the
  /// k = 8 and 16 tiles (0.96x-1.02x by variant with the entries taken together; the k = 8 tiles held 20-26 more
  /// registers) and in the k = 32 tiles of 8 floats a B row, bound to 255 registers (0.98x-0.99x).
  static constexpr bool kVectorResidue =
      sizeof(T) == 2 || (kK == 32 && Config::kResidueUnroll * kVX * kDV <= 16);
  static_assert(!kVectorResidue || (Config::kResidueUnroll <= 4 &&
                                    (Config::kResidueUnroll & (Config::kResidueUnroll - 1)) == 0),
                "the vector residue loads residue_unroll offsets at once: 1, 2 or 4");

  /// @brief The residue: the `count` < block_items_k entries left after the full tiles, kResidueUnroll per
  /// step, so no full fragment is needed.
  __device__ __forceinline__ void residue_mac(int count, const T* values_tile, const int* offsets_tile,
                                              const PredicatesN<Config>& predicates,
                                              float (&accumulator)[kVX * kDV]) const {
    constexpr int kU = Config::kResidueUnroll;
    if constexpr (kVectorResidue) {
      int k0 = 0;
      for (; k0 + kU <= count; k0 += kU) {
        residue_step<false>(k0, count, values_tile, offsets_tile, predicates, accumulator);
      }
      if (k0 < count) residue_step<true>(k0, count, values_tile, offsets_tile, predicates, accumulator);
    } else {
      for (int k0 = 0; k0 < count; k0 += kU) {
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
  /// @brief One step of the vector residue: entries k0 .. k0 + kResidueUnroll - 1 of the tiles, all live
  /// unless kTail. The step's values and offsets come in one shared vector load each: k0 is a multiple of
  /// kResidueUnroll, which divides block_items_k, so the vectors are aligned and inside the subwarp's tiles.
  /// In the tail step the slots from `count` on hold stale or unwritten data; their B vectors are not loaded
  /// but zero, and their value is taken as -0, so they add -0 (which leaves every accumulator, even a -0,
  /// as it is) and never a NaN from 0 * Inf.
  template <bool kTail>
  __device__ __forceinline__ void residue_step(int k0, int count, const T* values_tile, const int* offsets_tile,
                                               const PredicatesN<Config>& predicates,
                                               float (&accumulator)[kVX * kDV]) const {
    constexpr int kU = Config::kResidueUnroll;
    const Vec<int, kU> offsets = load_shared<int, kU>(offsets_tile + k0);
    const Vec<T, kU> values = load_shared<T, kU>(values_tile + k0);
    Vec<T, kDV> b[kU][kVX];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const bool live = !kTail || k0 + u < count;
#pragma unroll
      for (int v = 0; v < kVX; ++v) {
        b[u][v] = zero_vec<T, kDV>();
        if (live && predicates.in_range[v]) b[u][v] = load_global<T, kDV>(dense_ + offsets.v[u] + v * kStride);
      }
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const float a = !kTail || k0 + u < count ? to_float(values.v[u]) : -0.0f;
#pragma unroll
      for (int v = 0; v < kVX; ++v) mac_vector(a, b[u][v], accumulator + v * kDV);
    }
  }

  /// @brief accumulator[e] += a * b[e] for the kDV elements of one dense vector.
  __device__ __forceinline__ static void mac_vector(float a, const Vec<T, kDV>& b, float* accumulator) {
#pragma unroll
    for (int e = 0; e < kDV; ++e) accumulator[e] = fmaf(a, to_float(b.v[e]), accumulator[e]);
  }
};

}  // namespace ts
