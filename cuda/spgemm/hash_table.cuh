/**
 * @file @brief The per-row hash tables of the production SpGEMM: open addressing with linear probing over a
 * power-of-two number of slots in shared memory, keys are C's column indices (kEmptyKey marks a free slot).
 * The symbolic phase inserts keys only; the numeric phase also adds each product into its key's value.
 */
#pragma once

#include <cuda/atomic>

namespace ts {

constexpr int kEmptyKey = -1;

/// @brief log2 of a power of two, at compile time.
__host__ __device__ constexpr int log2_exact(int v) { return v <= 1 ? 0 : 1 + log2_exact(v / 2); }

/// @brief Reads a slot's key while other threads may claim slots (a relaxed atomic load: as cheap as a plain
/// load, and race-free under the CUDA memory model).
__device__ __forceinline__ int load_key(int* keys_tile, unsigned slot) {
  return cuda::atomic_ref<int, cuda::thread_scope_block>(keys_tile[slot]).load(cuda::memory_order_relaxed);
}

/// @brief The home slot of `key` in a table of kSlots slots: Fibonacci hashing (the top bits of key times
/// 2^32 / phi), which spreads both runs of consecutive columns (banded, FEM rows) and strided ones.
template <int kSlots>
__device__ __forceinline__ unsigned hash_slot(int key) {
  static_assert(kSlots >= 2 && (kSlots & (kSlots - 1)) == 0, "hash tables have a power-of-two number of slots");
  constexpr int kShift = 32 - log2_exact(kSlots);
  return (static_cast<unsigned>(key) * 2654435761u) >> kShift;
}

/// @brief Inserts `key` into `keys_tile` (shared, kSlots slots); returns whether this call inserted it (so
/// that summing the returns over all calls counts the distinct keys). A full table without the key returns
/// false: the symbolic tables hold twice their bin's bound, so that never happens there.
template <int kSlots>
__device__ __forceinline__ bool insert_key(int* keys_tile, int key) {
  unsigned slot = hash_slot<kSlots>(key);
#pragma unroll 1
  for (int probe = 0; probe < kSlots; ++probe) {
    int current = load_key(keys_tile, slot);
    if (current == key) return false;
    if (current == kEmptyKey) {
      current = atomicCAS(keys_tile + slot, kEmptyKey, key);
      if (current == kEmptyKey) return true;
      if (current == key) return false;
    }
    slot = (slot + 1) & (kSlots - 1);
  }
  return false;
}

/// @brief Adds `value` into the slot of `key` (inserting the key if absent) in `keys_tile` / `values_tile`
/// (shared, kSlots slots each). Returns false only when the table is full without the key: the product is
/// dropped and the caller raises an error flag (a plan reused on a matrix with another pattern).
template <int kSlots>
__device__ __forceinline__ bool insert_add(int* keys_tile, float* values_tile, int key, float value) {
  unsigned slot = hash_slot<kSlots>(key);
#pragma unroll 1
  for (int probe = 0; probe < kSlots; ++probe) {
    int current = load_key(keys_tile, slot);
    if (current == kEmptyKey) current = atomicCAS(keys_tile + slot, kEmptyKey, key);
    if (current == key || current == kEmptyKey) {
      atomicAdd(values_tile + slot, value);
      return true;
    }
    slot = (slot + 1) & (kSlots - 1);
  }
  return false;
}

}  // namespace ts
