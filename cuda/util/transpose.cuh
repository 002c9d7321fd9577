/**
 * @file @brief The transposition of a CSR structure on the device (src/csr/transpose.rs, `DeviceCsr::transpose`): a
 * counting sort of A's entries by column, in row order, so every row of A^T comes out sorted and the result does
 * not depend on scheduling. A's rows are cut into `parts` runs of consecutive rows, one warp each; a warp walks
 * its rows in order, its lanes over a row's entries, which hold distinct columns, so no two lanes ever touch the
 * same counter at once and a __syncwarp between rows orders the rows. Each part has its own counter per column
 * (parts x cols ints): first its counts (ts_transpose_count), then, per column, the counts' exclusive prefix over
 * the parts, so each part's first slot within the column (ts_transpose_offsets); the host scans the column totals
 * into A^T's row pointer; then each warp places its entries (ts_transpose_place).
 */

#pragma once

/// @brief The part of `parts` this thread's warp walks (one warp per part, rows split evenly; 64-bit products,
/// rows < 2^31): its rows first..last, and false for a warp past the last part, which has nothing to do.
__device__ __forceinline__ bool transpose_warp_part(int rows, int parts, int& part, int& first, int& last) {
  part = static_cast<int>((static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5);
  if (part >= parts) return false;
  first = static_cast<int>(static_cast<long long>(rows) * part / parts);
  last = static_cast<int>(static_cast<long long>(rows) * (part + 1) / parts);
  return true;
}

/// @brief counts[p * cols + c] += the entries of part p's rows in column c, one warp per part (counts zeroed).
/// indptr: rows + 1 offsets, indices: nnz columns (global memory, A's CSR structure, validated at upload).
extern "C" __global__ void ts_transpose_count(const int* __restrict__ indptr, const int* __restrict__ indices,
                                              int rows, int cols, int parts, int* __restrict__ counts) {
  int part, first, last;
  if (!transpose_warp_part(rows, parts, part, first, last)) return;
  const int lane = threadIdx.x & 31;
  int* count = counts + static_cast<size_t>(part) * cols;
  for (int r = first; r < last; ++r) {
    const int end = indptr[r + 1];
    for (int e = indptr[r] + lane; e < end; e += 32) count[indices[e]] += 1;
    __syncwarp();
  }
}

/// @brief Per column c: the parts' counts become their exclusive prefix over the parts (part p's first slot within
/// the column), and totals[c] the column's entries. One thread per column, a grid-stride loop (cols < 2^31).
extern "C" __global__ void ts_transpose_offsets(int* __restrict__ counts, int parts, int cols,
                                                int* __restrict__ totals) {
  const unsigned stride = gridDim.x * blockDim.x;
  for (unsigned c = blockIdx.x * blockDim.x + threadIdx.x; c < static_cast<unsigned>(cols); c += stride) {
    int running = 0;
    for (int p = 0; p < parts; ++p) {
      int* at = counts + static_cast<size_t>(p) * cols + c;
      const int n = *at;
      *at = running;
      running += n;
    }
    totals[c] = running;
  }
}

/// @brief Places A's entries in A^T: entry e of row r in column c goes to slot t_indptr[c] + part p's next slot in
/// c, which is then advanced; A^T's column index there is r, and source[slot] = e (the map its values are gathered
/// by). One warp per part, its rows in order, as ts_transpose_count walked them; cursors: ts_transpose_offsets'.
extern "C" __global__ void ts_transpose_place(const int* __restrict__ indptr, const int* __restrict__ indices,
                                              int rows, int cols, int parts, const int* __restrict__ t_indptr,
                                              int* __restrict__ cursors, int* __restrict__ t_indices,
                                              int* __restrict__ source) {
  int part, first, last;
  if (!transpose_warp_part(rows, parts, part, first, last)) return;
  const int lane = threadIdx.x & 31;
  int* cursor = cursors + static_cast<size_t>(part) * cols;
  for (int r = first; r < last; ++r) {
    const int end = indptr[r + 1];
    for (int e = indptr[r] + lane; e < end; e += 32) {
      const int c = indices[e];
      const int slot = t_indptr[c] + cursor[c];
      cursor[c] += 1;
      t_indices[slot] = r;
      source[slot] = e;
    }
    __syncwarp();
  }
}
