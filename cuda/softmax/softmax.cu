/**
 * @file @brief The sparse softmax of a CSR matrix, row by row over its stored entries (the entries a row does not
 * store count as -inf, as a mask does), and its gradient: the step between the two products of sparse attention,
 * S = (Q K^T) o spy(S) (an SDDMM), P = softmax(S), O = P V (an SpMM), as Sputnik's CudaSparseSoftmax.
 *
 * Forward, per row: M = max(x), S = sum(exp(x - M)), y = exp(x - M) / S, in f32 for every storage type. Backward,
 * per row, from the forward's output P and the gradient dP: D = sum(P dP), dS = P (dP - D). Both are written in
 * place or not (`SoftmaxParams::output`), as the dense softmax computes them, so that special values behave the
 * same: a NaN or a +inf in a row makes the row NaN, a row of -inf alone is NaN (M = -inf), and a -inf beside finite
 * entries gives 0.
 *
 * Work split (src/softmax.rs): the rows kernel gives each row kLanes lanes (a subwarp). The forward's read the row in
 * 16-byte vectors from its start rounded down to one, masking what lies outside the row (so rows need no padding),
 * each lane holding its first kSoftmaxVectors vectors in registers (the backward's, element by element: see there);
 * longer rows stream the rest, one read for the sums and one more for the output (the forward keeps a running
 * maximum and rescales its running sum, so the sums take one pass).
 * Rows longer than `long_threshold` are left to the chunk kernels: a finding kernel lists them cut into chunks of
 * kSoftmaxChunk entries, the first chunk kernel reduces each chunk to a partial (one block per chunk, its entries in
 * registers), and the second combines each row's partials and writes the chunk, so that a row of a million entries
 * spreads over the whole GPU. Every reduction runs in a fixed order, so a row gets the same bits on every run.
 */

#include "common/params.cuh"
#include "common/vector.cuh"

namespace ts {

/// Threads per block of the rows kernels.
constexpr int kSoftmaxThreads = 256;
/// Blocks of the rows kernels each SM must hold at once (at most 64 registers a thread): half the SM's threads.
constexpr int kSoftmaxMinBlocks = 4;
/// Threads per block (one chunk) of the chunk kernels.
constexpr int kSoftmaxLongThreads = 512;
/// Entries each thread of a chunk kernel, or each lane of the backward rows kernel, holds in registers.
constexpr int kSoftmaxCache = 8;
/// Entries of a long row's chunk: one per register of a chunk kernel's block.
constexpr int kSoftmaxChunk = kSoftmaxLongThreads * kSoftmaxCache;

/// @brief exp(x - m) as a term of a row's sum: 0 for x = -inf (a masked entry), whatever m is (m = -inf would give
/// exp(NaN)); a NaN, or x = m = +inf, gives NaN.
__device__ __forceinline__ float softmax_term(float x, float m) { return x == -INFINITY ? 0.0f : expf(x - m); }

/// @brief A running (maximum, sum of exp(x - maximum)) pair merged with a group of values: the sum rescaled to the
/// new maximum, then the group's terms added. fmaxf passes over NaN, which reaches the sum through its own term.
template <int kCount>
__device__ __forceinline__ void softmax_merge(float& m, float& s, const float (&x)[kCount]) {
  float group = x[0];
#pragma unroll
  for (int i = 1; i < kCount; ++i) group = fmaxf(group, x[i]);
  const float next = fmaxf(m, group);
  s = s * softmax_term(m, next);
#pragma unroll
  for (int i = 0; i < kCount; ++i) s += softmax_term(x[i], next);
  m = next;
}

/// @brief The mask of the kLanes lanes of the calling thread's subwarp.
template <int kLanes>
__device__ __forceinline__ unsigned subwarp_mask() {
  if constexpr (kLanes == 32) {
    return 0xffffffffu;
  } else {
    const int lane = threadIdx.x & 31;
    return ((1u << kLanes) - 1u) << (lane & ~(kLanes - 1));
  }
}

/// @brief The subwarp's (maximum, sum) from its lanes' pairs, in a butterfly: every lane gets the same result.
template <int kLanes>
__device__ __forceinline__ void softmax_reduce_subwarp(float& m, float& s) {
  const unsigned mask = subwarp_mask<kLanes>();
  float row_max = m;
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset /= 2) {
    row_max = fmaxf(row_max, __shfl_xor_sync(mask, row_max, offset, kLanes));
  }
  s = s * softmax_term(m, row_max);
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset /= 2) s += __shfl_xor_sync(mask, s, offset, kLanes);
  m = row_max;
}

/// @brief A subwarp's sum, in a butterfly: every lane gets the same result.
template <int kLanes>
__device__ __forceinline__ float sum_subwarp(float s) {
  const unsigned mask = subwarp_mask<kLanes>();
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset /= 2) s += __shfl_xor_sync(mask, s, offset, kLanes);
  return s;
}

/// @brief Loads kCount entries of a row at first, first + stride, ... (those at or past len as `fill`).
template <typename T, int kCount>
__device__ __forceinline__ void softmax_load(const T* row, int first, int stride, int len, float fill,
                                             float (&x)[kCount]) {
#pragma unroll
  for (int i = 0; i < kCount; ++i) {
    const int j = first + i * stride;
    x[i] = j < len ? to_float(row[j]) : fill;
  }
}

/// @brief Stores exp(x - m) (1 / s) for the kCount entries softmax_load loaded at first, first + stride, ...
template <typename T, int kCount>
__device__ __forceinline__ void softmax_store(T* row, int first, int stride, int len, const float (&x)[kCount],
                                              float m, float s) {
  const float inverse = 1.0f / s;
#pragma unroll
  for (int i = 0; i < kCount; ++i) {
    const int j = first + i * stride;
    if (j < len) row[j] = from_float<T>(expf(x[i] - m) * inverse);
  }
}

/// @brief Stores p (g - dot) for the kCount entries softmax_load loaded at first, first + stride, ...
template <typename T, int kCount>
__device__ __forceinline__ void softmax_backward_store(T* row, int first, int stride, int len,
                                                       const float (&p)[kCount], const float (&g)[kCount],
                                                       float dot) {
#pragma unroll
  for (int i = 0; i < kCount; ++i) {
    const int j = first + i * stride;
    if (j < len) row[j] = from_float<T>(p[i] * (g[i] - dot));
  }
}

/// @brief The calling thread's lane in its subwarp of kLanes, and its subwarp's row's range (an empty one where the
/// row is past m or left to the chunk kernels).
template <int kLanes>
__device__ __forceinline__ int softmax_lane_row(const SoftmaxParams& p, int& start, int& len) {
  const long long thread = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const long long row = thread / kLanes;
  start = 0;
  len = 0;
  if (row < p.m) {
    start = p.row_offsets[row];
    len = p.row_offsets[row + 1] - start;
    if (len > p.long_threshold) len = 0;
  }
  return static_cast<int>(thread % kLanes);
}

/// @brief A row as the rows kernels walk it: in 16-byte vectors from its start rounded down to one (the memory
/// aligner: rows need no padding), the `lead` elements before its start and those past its end masked.
template <typename T>
struct AlignedRow {
  static constexpr int kVec = 16 / sizeof(T);
  long long base;  // the first vector's first element, in the matrix's entries
  int lead;        // elements of the first vector before the row
  int span;        // lead + the row's length: the row is elements [lead, span) from base
  int room;        // elements from base to the end of the values (min with span + kVec): past it, no vector load

  __device__ __forceinline__ AlignedRow(int start, int len, int nnz) {
    lead = start % kVec;
    base = start - lead;
    span = lead + len;
    room = static_cast<int>(min(static_cast<long long>(span) + kVec, nnz - base));
  }

  /// @brief Vector v's elements as floats, `fill` for those outside the row; a vector that would reach past the
  /// values' end is read element by element.
  __device__ __forceinline__ void load(const T* values, int v, float fill, float (&x)[kVec]) const {
    const int first = v * kVec;
    if (first >= span) {
#pragma unroll
      for (int i = 0; i < kVec; ++i) x[i] = fill;
      return;
    }
    const T* at = values + base + first;
    if (first + kVec <= room) {
      Vec<T, kVec> vec = load_shared<T, kVec>(at);  // a plain load: the values may be written in place
#pragma unroll
      for (int i = 0; i < kVec; ++i) x[i] = first + i >= lead && first + i < span ? to_float(vec.v[i]) : fill;
    } else {
#pragma unroll
      for (int i = 0; i < kVec; ++i) x[i] = first + i >= lead && first + i < span ? to_float(at[i]) : fill;
    }
  }

  /// @brief Stores vector v's elements that lie in the row (the whole vector in one store where all do).
  __device__ __forceinline__ void store(T* values, int v, const float (&y)[kVec]) const {
    const int first = v * kVec;
    if (first >= span) return;
    T* at = values + base + first;
    if (first >= lead && first + kVec <= span) {
      Vec<T, kVec> vec;
#pragma unroll
      for (int i = 0; i < kVec; ++i) vec.v[i] = from_float<T>(y[i]);
      ts::store<T, kVec>(at, vec);
    } else {
#pragma unroll
      for (int i = 0; i < kVec; ++i) {
        if (first + i >= lead && first + i < span) at[i] = from_float<T>(y[i]);
      }
    }
  }
};

/// Vectors each lane of a rows kernel holds in registers, and loads at once when it streams the rest of a row.
constexpr int kSoftmaxVectors = 2;

/// @brief Forward: kLanes lanes per row (rows past m, or long, are empty: their lanes take part in no shuffle but
/// their own subwarp's, which they all skip together). Each lane holds the exponentials of its first kSoftmaxVectors
/// vectors, so a row within them is read once and each of its entries takes one exp.
template <typename T, int kLanes>
__device__ __forceinline__ void softmax_rows(const SoftmaxParams& p) {
  using Row = AlignedRow<T>;
  constexpr int kVec = Row::kVec;
  int start, len;
  const int lane = softmax_lane_row<kLanes>(p, start, len);
  if (len == 0) return;
  const Row row(start, len, p.nnz);
  const T* in = static_cast<const T*>(p.input);
  T* out = static_cast<T*>(p.output);

  // The cached vectors: their maximum m, then their exponentials against it, summed into s.
  float cache[kSoftmaxVectors][kVec];
#pragma unroll
  for (int i = 0; i < kSoftmaxVectors; ++i) row.load(in, lane + i * kLanes, -INFINITY, cache[i]);
  float m = -INFINITY;
#pragma unroll
  for (int i = 0; i < kSoftmaxVectors; ++i) {
#pragma unroll
    for (int j = 0; j < kVec; ++j) m = fmaxf(m, cache[i][j]);
  }
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < kSoftmaxVectors; ++i) {
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      cache[i][j] = softmax_term(cache[i][j], m);
      s += cache[i][j];
    }
  }
  const float cache_max = m;
  const int vectors = (row.span + kVec - 1) / kVec;
  for (int v = lane + kSoftmaxVectors * kLanes; v < vectors; v += kSoftmaxVectors * kLanes) {
    float x[kSoftmaxVectors * kVec];
#pragma unroll
    for (int i = 0; i < kSoftmaxVectors; ++i) {
      row.load(in, v + i * kLanes, -INFINITY, reinterpret_cast<float(&)[kVec]>(x[i * kVec]));
    }
    softmax_merge(m, s, x);
  }
  softmax_reduce_subwarp<kLanes>(m, s);

  // y = exp(x - M) / S: the cached exponentials rescaled by exp(cache_max - M) / S, the rest recomputed.
  const float inverse = 1.0f / s;
  const float rescale = softmax_term(cache_max, m) * inverse;
#pragma unroll
  for (int i = 0; i < kSoftmaxVectors; ++i) {
    float y[kVec];
#pragma unroll
    for (int j = 0; j < kVec; ++j) y[j] = cache[i][j] * rescale;
    row.store(out, lane + i * kLanes, y);
  }
  for (int v = lane + kSoftmaxVectors * kLanes; v < vectors; v += kSoftmaxVectors * kLanes) {
    float x[kSoftmaxVectors][kVec];
#pragma unroll
    for (int i = 0; i < kSoftmaxVectors; ++i) row.load(in, v + i * kLanes, -INFINITY, x[i]);
#pragma unroll
    for (int i = 0; i < kSoftmaxVectors; ++i) {
#pragma unroll
      for (int j = 0; j < kVec; ++j) x[i][j] = expf(x[i][j] - m) * inverse;
      row.store(out, v + i * kLanes, x[i]);
    }
  }
}

/// @brief Backward: kLanes lanes per row, each lane holding its first kSoftmaxCache entries of P and of dP and
/// streaming the rest kSoftmaxCache at a time, in element loads (coalesced across the subwarp). In 16-byte vectors, as
/// the forward, it ran 1.0x-1.5x slower: holding two arrays' vectors took 56-89 registers (NOTES.md, "Sparse softmax",
/// step 5).
template <typename T, int kLanes>
__device__ __forceinline__ void softmax_backward_rows(const SoftmaxParams& p) {
  int start, len;
  const int lane = softmax_lane_row<kLanes>(p, start, len);
  if (len == 0) return;
  const T* prob = static_cast<const T*>(p.input) + start;
  const T* grad = static_cast<const T*>(p.grad) + start;
  T* out = static_cast<T*>(p.output) + start;

  float prob_cache[kSoftmaxCache], grad_cache[kSoftmaxCache];
  softmax_load<T, kSoftmaxCache>(prob, lane, kLanes, len, 0.0f, prob_cache);
  softmax_load<T, kSoftmaxCache>(grad, lane, kLanes, len, 0.0f, grad_cache);
  float dot = 0.0f;
#pragma unroll
  for (int i = 0; i < kSoftmaxCache; ++i) dot = fmaf(prob_cache[i], grad_cache[i], dot);
  constexpr int kCached = kSoftmaxCache * kLanes;
  for (int j = kCached + lane; j < len; j += kSoftmaxCache * kLanes) {
    float x[kSoftmaxCache], g[kSoftmaxCache];
    softmax_load<T, kSoftmaxCache>(prob, j, kLanes, len, 0.0f, x);
    softmax_load<T, kSoftmaxCache>(grad, j, kLanes, len, 0.0f, g);
#pragma unroll
    for (int i = 0; i < kSoftmaxCache; ++i) dot = fmaf(x[i], g[i], dot);
  }
  dot = sum_subwarp<kLanes>(dot);

  softmax_backward_store<T, kSoftmaxCache>(out, lane, kLanes, len, prob_cache, grad_cache, dot);
  for (int j = kCached + lane; j < len; j += kSoftmaxCache * kLanes) {
    float x[kSoftmaxCache], g[kSoftmaxCache];
    softmax_load<T, kSoftmaxCache>(prob, j, kLanes, len, 0.0f, x);
    softmax_load<T, kSoftmaxCache>(grad, j, kLanes, len, 0.0f, g);
    softmax_backward_store<T, kSoftmaxCache>(out, j, kLanes, len, x, g, dot);
  }
}

/// @brief Lists the chunks of the rows longer than long_threshold (grid-stride over the rows; one atomic per long
/// row, so the list's order varies, but each chunk's partial and each row's combination do not).
__device__ __forceinline__ void softmax_find_long_rows(const SoftmaxParams& p) {
  for (long long row = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; row < p.m;
       row += static_cast<long long>(gridDim.x) * blockDim.x) {
    const int len = p.row_offsets[row + 1] - p.row_offsets[row];
    if (len > p.long_threshold) {
      const int chunks = (len + kSoftmaxChunk - 1) / kSoftmaxChunk;
      const int first = atomicAdd(p.chunk_count, chunks);
      if (first + chunks <= p.long_capacity) {  // always (the host counts the room), but never a row in part
        for (int c = 0; c < chunks; ++c) p.chunks[first + c] = make_int4(static_cast<int>(row), first, chunks, c);
      }
    }
  }
}

/// @brief The block's chunks in turn: `body(row start, chunk's first entry in the row, the chunk's length, chunk)`.
template <typename Body>
__device__ __forceinline__ void softmax_for_chunks(const SoftmaxParams& p, Body body) {
  const int count = min(*p.chunk_count, p.long_capacity);
  for (int i = blockIdx.x; i < count; i += gridDim.x) {
    const int4 chunk = p.chunks[i];
    if (chunk.z == 0) continue;  // a slot of a row left out (never, as above): nothing listed there
    const int start = p.row_offsets[chunk.x];
    const int len = p.row_offsets[chunk.x + 1] - start;
    const int offset = chunk.w * kSoftmaxChunk;
    body(start + offset, min(kSoftmaxChunk, len - offset), chunk, i);
  }
}

/// @brief A block's (maximum, sum) from its threads' pairs: warps in a butterfly, then warp 0 over the warps'
/// pairs; every thread gets the result. `shared` holds 2 x (threads / 32) floats.
__device__ __forceinline__ void softmax_reduce_block(float& m, float& s, float* shared) {
  constexpr int kWarps = kSoftmaxLongThreads / 32;
  softmax_reduce_subwarp<32>(m, s);
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  if (lane == 0) {
    shared[warp] = m;
    shared[kWarps + warp] = s;
  }
  __syncthreads();
  if (warp == 0) {
    m = lane < kWarps ? shared[lane] : -INFINITY;
    s = lane < kWarps ? shared[kWarps + lane] : 0.0f;
    softmax_reduce_subwarp<32>(m, s);
    if (lane == 0) {
      shared[0] = m;
      shared[kWarps] = s;
    }
  }
  __syncthreads();
  m = shared[0];
  s = shared[kWarps];
  __syncthreads();  // the next chunk's reduction rewrites `shared`
}

/// @brief A block's sum, as softmax_reduce_block.
__device__ __forceinline__ float sum_block(float s, float* shared) {
  constexpr int kWarps = kSoftmaxLongThreads / 32;
  s = sum_subwarp<32>(s);
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  if (lane == 0) shared[warp] = s;
  __syncthreads();
  if (warp == 0) {
    s = sum_subwarp<32>(lane < kWarps ? shared[lane] : 0.0f);
    if (lane == 0) shared[0] = s;
  }
  __syncthreads();
  s = shared[0];
  __syncthreads();
  return s;
}

/// @brief A row's (maximum, sum) from its chunks' partials, combined by warp 0 in a fixed order (lanes over the
/// chunks, then a butterfly) and handed to the block through `shared`.
__device__ __forceinline__ void softmax_combine_chunks(const SoftmaxParams& p, int4 chunk, float& m, float& s,
                                                       float* shared) {
  if (threadIdx.x < 32) {
    m = -INFINITY;
    s = 0.0f;
    for (int c = threadIdx.x; c < chunk.z; c += 32) {
      const float part_max = p.partials[2 * (chunk.y + c)];
      const float part_sum = p.partials[2 * (chunk.y + c) + 1];
      const float next = fmaxf(m, part_max);
      s = s * softmax_term(m, next) + part_sum * softmax_term(part_max, next);
      m = next;
    }
    softmax_reduce_subwarp<32>(m, s);
    if (threadIdx.x == 0) {
      shared[0] = m;
      shared[1] = s;
    }
  }
  __syncthreads();
  m = shared[0];
  s = shared[1];
  __syncthreads();
}

/// @brief Forward, first pass over the long rows: each chunk's (maximum, sum).
template <typename T>
__device__ __forceinline__ void softmax_long_partials(const SoftmaxParams& p) {
  __shared__ float shared[2 * kSoftmaxLongThreads / 32];
  softmax_for_chunks(p, [&](int first, int len, int4, int i) {
    float x[kSoftmaxCache];
    softmax_load<T, kSoftmaxCache>(static_cast<const T*>(p.input) + first, threadIdx.x, kSoftmaxLongThreads, len,
                                   -INFINITY, x);
    float m = -INFINITY, s = 0.0f;
    softmax_merge(m, s, x);
    softmax_reduce_block(m, s, shared);
    if (threadIdx.x == 0) {
      p.partials[2 * i] = m;
      p.partials[2 * i + 1] = s;
    }
  });
}

/// @brief Forward, second pass over the long rows: each chunk written from its row's (maximum, sum).
template <typename T>
__device__ __forceinline__ void softmax_long_write(const SoftmaxParams& p) {
  __shared__ float shared[2];
  softmax_for_chunks(p, [&](int first, int len, int4 chunk, int) {
    float m, s;
    softmax_combine_chunks(p, chunk, m, s, shared);
    float x[kSoftmaxCache];
    softmax_load<T, kSoftmaxCache>(static_cast<const T*>(p.input) + first, threadIdx.x, kSoftmaxLongThreads, len,
                                   -INFINITY, x);
    softmax_store<T, kSoftmaxCache>(static_cast<T*>(p.output) + first, threadIdx.x, kSoftmaxLongThreads, len, x, m,
                                    s);
  });
}

/// @brief Backward, first pass over the long rows: each chunk's sum of P dP.
template <typename T>
__device__ __forceinline__ void softmax_backward_long_partials(const SoftmaxParams& p) {
  __shared__ float shared[kSoftmaxLongThreads / 32];
  softmax_for_chunks(p, [&](int first, int len, int4, int i) {
    float x[kSoftmaxCache], g[kSoftmaxCache];
    softmax_load<T, kSoftmaxCache>(static_cast<const T*>(p.input) + first, threadIdx.x, kSoftmaxLongThreads, len,
                                   0.0f, x);
    softmax_load<T, kSoftmaxCache>(static_cast<const T*>(p.grad) + first, threadIdx.x, kSoftmaxLongThreads, len,
                                   0.0f, g);
    float dot = 0.0f;
#pragma unroll
    for (int u = 0; u < kSoftmaxCache; ++u) dot = fmaf(x[u], g[u], dot);
    dot = sum_block(dot, shared);
    if (threadIdx.x == 0) p.partials[2 * i] = dot;
  });
}

/// @brief Backward, second pass over the long rows: each chunk written from its row's sum of P dP.
template <typename T>
__device__ __forceinline__ void softmax_backward_long_write(const SoftmaxParams& p) {
  __shared__ float shared[1];
  softmax_for_chunks(p, [&](int first, int len, int4 chunk, int) {
    if (threadIdx.x < 32) {
      float dot = 0.0f;
      for (int c = threadIdx.x; c < chunk.z; c += 32) dot += p.partials[2 * (chunk.y + c)];
      dot = sum_subwarp<32>(dot);
      if (threadIdx.x == 0) shared[0] = dot;
    }
    __syncthreads();
    const float dot = shared[0];
    __syncthreads();
    float x[kSoftmaxCache], g[kSoftmaxCache];
    softmax_load<T, kSoftmaxCache>(static_cast<const T*>(p.input) + first, threadIdx.x, kSoftmaxLongThreads, len,
                                   0.0f, x);
    softmax_load<T, kSoftmaxCache>(static_cast<const T*>(p.grad) + first, threadIdx.x, kSoftmaxLongThreads, len,
                                   0.0f, g);
    softmax_backward_store<T, kSoftmaxCache>(static_cast<T*>(p.output) + first, threadIdx.x, kSoftmaxLongThreads,
                                             len, x, g, dot);
  });
}

}  // namespace ts

extern "C" __global__ void __launch_bounds__(ts::kSoftmaxThreads)
    softmax_find_long_rows(const ts::SoftmaxParams p) {
  ts::softmax_find_long_rows(p);
}

#define TILESPARSE_SOFTMAX_ROWS(DTYPE, T, LANES)                                                          \
  extern "C" __global__ void __launch_bounds__(ts::kSoftmaxThreads, ts::kSoftmaxMinBlocks)                \
      softmax_##DTYPE##_l##LANES(const ts::SoftmaxParams p) {                                             \
    ts::softmax_rows<T, LANES>(p);                                                                        \
  }                                                                                                       \
  extern "C" __global__ void __launch_bounds__(ts::kSoftmaxThreads, ts::kSoftmaxMinBlocks)                \
      softmax_backward_##DTYPE##_l##LANES(const ts::SoftmaxParams p) {                                    \
    ts::softmax_backward_rows<T, LANES>(p);                                                               \
  }

#define TILESPARSE_SOFTMAX_LONG(NAME, DTYPE, T)                                                         \
  extern "C" __global__ void __launch_bounds__(ts::kSoftmaxLongThreads) NAME##_##DTYPE(const ts::SoftmaxParams p) { \
    ts::NAME<T>(p);                                                                                       \
  }

#define TILESPARSE_SOFTMAX_TYPE(DTYPE, T)                                                                 \
  TILESPARSE_SOFTMAX_ROWS(DTYPE, T, 1)                                                                    \
  TILESPARSE_SOFTMAX_ROWS(DTYPE, T, 2)                                                                    \
  TILESPARSE_SOFTMAX_ROWS(DTYPE, T, 4)                                                                    \
  TILESPARSE_SOFTMAX_ROWS(DTYPE, T, 8)                                                                    \
  TILESPARSE_SOFTMAX_ROWS(DTYPE, T, 16)                                                                   \
  TILESPARSE_SOFTMAX_ROWS(DTYPE, T, 32)                                                                   \
  TILESPARSE_SOFTMAX_LONG(softmax_long_partials, DTYPE, T)                                                \
  TILESPARSE_SOFTMAX_LONG(softmax_long_write, DTYPE, T)                                                   \
  TILESPARSE_SOFTMAX_LONG(softmax_backward_long_partials, DTYPE, T)                                       \
  TILESPARSE_SOFTMAX_LONG(softmax_backward_long_write, DTYPE, T)

// Every kernel src/softmax.rs names: 1-32 lanes per row and the chunk kernels, for each storage type.
TILESPARSE_SOFTMAX_TYPE(f32, float)
TILESPARSE_SOFTMAX_TYPE(f16, __half)
TILESPARSE_SOFTMAX_TYPE(bf16, __nv_bfloat16)
