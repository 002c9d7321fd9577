/**
 * @file @brief Seed kernels 0 and 1: one thread per row of A, its accumulator for `scratch_tile` output columns
 * in global scratch (column-major over the grid's threads, so that element c of neighbouring threads is
 * contiguous), a touched bit per column, and one global atomic per emitted entry.
 */
#pragma once

#include "spgemm/spgemm_params.cuh"

/// @brief Kernel 0: the seed's base implementation. Every loop bound and array is read through the params
/// struct at each use; rows are taken grid-stride so the scratch is sized by the grid, not by m.
extern "C" __global__ void spgemm_k0_f32(const ts::SpgemmParams p) {
  const int thread = blockIdx.x * blockDim.x + threadIdx.x;
  if (thread >= p.m) return;
  for (int c = 0; c < p.scratch_tile; ++c) p.scratch_acc[c * p.scratch_threads + thread] = 0.0f;
  for (int w = 0; w < p.scratch_tile / 32; ++w) p.scratch_touched[w * p.scratch_threads + thread] = 0u;
  for (int row = thread; row < p.m; row += p.scratch_threads) {
    for (int tile_start = 0; tile_start < p.n; tile_start += p.scratch_tile) {
      for (int i = p.a_row_offsets[row]; i < p.a_row_offsets[row + 1]; ++i) {
        const int j = p.a_column_indices[i];
        for (int q = p.b_row_offsets[j]; q < p.b_row_offsets[j + 1]; ++q) {
          const int c = p.b_column_indices[q] - tile_start;
          if (c >= 0 && c < p.scratch_tile) {
            p.scratch_acc[c * p.scratch_threads + thread] += p.a_values[i] * p.b_values[q];
            p.scratch_touched[(c >> 5) * p.scratch_threads + thread] |= 1u << (c & 31);
          }
        }
      }
      for (int c = 0; c < p.scratch_tile && tile_start + c < p.n; ++c) {
        if ((p.scratch_touched[(c >> 5) * p.scratch_threads + thread] >> (c & 31)) & 1u) {
          const int pos = atomicAdd(p.out_count, 1);
          if (pos < p.capacity) {
            p.out_rows[pos] = row;
            p.out_columns[pos] = tile_start + c;
            p.out_values[pos] = p.scratch_acc[c * p.scratch_threads + thread];
          }
          p.scratch_acc[c * p.scratch_threads + thread] = 0.0f;
        }
      }
      for (int w = 0; w < p.scratch_tile / 32; ++w) p.scratch_touched[w * p.scratch_threads + thread] = 0u;
    }
  }
}

/// @brief Kernel 1: kernel 0 with the row bounds and sizes hoisted out of the tile loop, the params' pointers
/// cached in `__restrict__` locals (read-only ones through the non-coherent cache), this thread's scratch
/// pointers computed once, and the write-back walking the set bits of each touched word (not every column).
extern "C" __global__ void spgemm_k1_f32(const ts::SpgemmParams p) {
  const int thread = blockIdx.x * blockDim.x + threadIdx.x;
  const int m = p.m;
  if (thread >= m) return;
  const int n = p.n;
  const int tile = p.scratch_tile;
  const int stride = p.scratch_threads;
  const int* __restrict__ a_row_offsets = p.a_row_offsets;
  const int* __restrict__ a_column_indices = p.a_column_indices;
  const float* __restrict__ a_values = p.a_values;
  const int* __restrict__ b_row_offsets = p.b_row_offsets;
  const int* __restrict__ b_column_indices = p.b_column_indices;
  const float* __restrict__ b_values = p.b_values;
  int* __restrict__ out_rows = p.out_rows;
  int* __restrict__ out_columns = p.out_columns;
  float* __restrict__ out_values = p.out_values;
  int* __restrict__ out_count = p.out_count;
  const int capacity = p.capacity;
  float* __restrict__ acc = p.scratch_acc + thread;            // element c at acc[c * stride]
  unsigned* __restrict__ touched = p.scratch_touched + thread;  // word w at touched[w * stride]
  for (int c = 0; c < tile; ++c) acc[c * stride] = 0.0f;
  for (int w = 0; w < tile / 32; ++w) touched[w * stride] = 0u;
  for (int row = thread; row < m; row += stride) {
    const int a_begin = a_row_offsets[row];
    const int a_end = a_row_offsets[row + 1];
    for (int tile_start = 0; tile_start < n; tile_start += tile) {
      const int tile_width = min(tile, n - tile_start);
      for (int i = a_begin; i < a_end; ++i) {
        const int j = a_column_indices[i];
        const float a_value = a_values[i];
        const int b_end = b_row_offsets[j + 1];
        for (int q = b_row_offsets[j]; q < b_end; ++q) {
          const int c = b_column_indices[q] - tile_start;
          if (c >= 0 && c < tile_width) {
            acc[c * stride] += a_value * b_values[q];
            touched[(c >> 5) * stride] |= 1u << (c & 31);
          }
        }
      }
      for (int w = 0; w * 32 < tile_width; ++w) {
        unsigned bits = touched[w * stride];
        touched[w * stride] = 0u;
        while (bits != 0u) {
          const int c = w * 32 + __ffs(bits) - 1;
          bits &= bits - 1;
          const int pos = atomicAdd(out_count, 1);
          if (pos < capacity) {
            out_rows[pos] = row;
            out_columns[pos] = tile_start + c;
            out_values[pos] = acc[c * stride];
          }
          acc[c * stride] = 0.0f;
        }
      }
    }
  }
}
