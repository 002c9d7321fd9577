/**
 * @file @brief f32 SpMM in 3xTF32 on Hopper's warpgroup mma (sm_90a only): `spmm_tc_f32_w64_n16`.
 *
 * The product is taken transposed, C^T = B^T A^T, one 64-row window of A and 128 columns of C per block of one
 * warpgroup (four warps). The dense B is wgmma's A operand: each thread loads its fragments of the k-block's
 * 16 gathered rows of B from shared memory into registers and splits them there (x = big + small, big = x
 * rounded to tf32). The window's k-block of A (64 rows x 16 slots) is wgmma's B operand, read by the tensor
 * cores from shared memory: its values come in K-major core matrices, [k8 half][row / 8][slot / 4][row % 8][slot
 * % 4] (src/spmm/tensor_core.rs, `core_index_f32`), and each thread splits the pieces it copied in place (big)
 * and into a second buffer (small). Per k-block 2 halves x 3 products x 2 column tiles of 64 = 12
 * wgmma.m64n64k8, summed from zero into partial sums that are added to the accumulators in f32 afterwards, as
 * the mma.sync kernel does (cuda/spmm/tensor_core.cuh; NOTES.md "SpMM steps 10, 11 and 27").
 *
 * Threads (w, g, t) (warp w, lane 4 g + t) own columns 32 w + 4 g .. + 3 of the block's 128 (M rows g and g + 8
 * of column tiles 0 and 1 of their warp's 16) and window rows 8 j + 2 t, + 1 (j = 0 .. 7): four adjacent columns
 * per row, loaded and stored as float4.
 */
#include "common/params.cuh"
#include "common/tc_shared.cuh"
#include "spmm90a/wgmma.cuh"

namespace ts {

constexpr int kWgColumns = 128;                         // columns of C per block
constexpr int kWgStrideF = kWgColumns + 8;              // floats per B tile row (+8: conflict-free float4 loads)
constexpr int kWgCoreF = 1024;                          // floats of one k-block of A (64 rows x 16 slots)
constexpr int kWgStageF = 2 * kWgCoreF + 16 * kWgStrideF;  // big, small, B tile
constexpr int kWgStages = 4;
/// Dynamic shared memory per block (src/spmm/tensor_core.rs, `WGMMA_SHARED_BYTES`).
constexpr int kWgSharedBytes = kWgStages * kWgStageF * 4;
static_assert(kWgSharedBytes == 67584, "src/spmm/tensor_core.rs WGMMA_SHARED_BYTES");

/// A K-major, unswizzled shared-memory matrix descriptor: core matrices of 8 rows x 16 bytes, `lbo` bytes apart
/// along K, `sbo` bytes apart along N.
__device__ __forceinline__ unsigned long long wg_desc(unsigned address, unsigned lbo, unsigned sbo) {
  return static_cast<unsigned long long>((address & 0x3ffffu) >> 4) |
         (static_cast<unsigned long long>((lbo & 0x3ffffu) >> 4) << 16) |
         (static_cast<unsigned long long>((sbo & 0x3ffffu) >> 4) << 32);
}

template <bool kScaled>
__device__ __forceinline__ void spmm_tcwg_f32(const SpmmTcParams& p) {
  constexpr int kChunksPerRow = kWgColumns / 4;        // 16-byte pieces per gathered row of B
  constexpr int kRowStep = 128 / kChunksPerRow;        // rows between a thread's pieces
  constexpr int kBChunks = 16 / kRowStep;              // pieces per thread and k-block
  extern __shared__ __align__(128) float wg_smem[];
  const int tid = threadIdx.x;
  const int lane = tid % 32, warp = tid / 32, g = lane / 4, t = lane % 4;
  const int window = tc_window(p);
  const int n0 = blockIdx.y * kWgColumns;
  const WindowRange range(p, window);
  const int first = range.first;
  const int blocks = range.blocks;
  const float* dense = static_cast<const float*>(p.dense);
  const float* core = reinterpret_cast<const float*>(p.block_values);
  const unsigned base = static_cast<unsigned>(__cvta_generic_to_shared(wg_smem));

  // This thread's pieces of each gathered B tile: rows chunk_row + kRowStep i, columns n0 + 4 chunk_part .. + 3
  // (n % 8 == 0: a piece is in or out of n as a whole; out: zero-filled, never read).
  const int chunk_row = tid / kChunksPerRow, chunk_part = tid % kChunksPerRow;
  const bool in_n = n0 + 4 * chunk_part < p.n;
  const PieceAddresses pieces(dense, p.n, n0 + 4 * chunk_part, in_n);
  int columns[kBChunks];  // the B rows of the next k-block to copy, read one step ahead
  const auto read_columns = [&](int b) {
#pragma unroll
    for (int i = 0; i < kBChunks; ++i) {
      columns[i] =
          b < blocks ? __ldg(p.block_columns + 16 * static_cast<size_t>(first + b) + chunk_row + kRowStep * i) : -1;
    }
  };
  const auto load = [&](int b, int stage) {
    const unsigned at = base + stage * kWgStageF * 4;
    const float* block = core + static_cast<size_t>(first + b) * kWgCoreF;
#pragma unroll
    for (int v = 0; v < 2; ++v) cp_async_16<false>(at + (tid + 128 * v) * 16, block + 4 * (tid + 128 * v), true);
#pragma unroll
    for (int i = 0; i < kBChunks; ++i) {
      const int c = columns[i];
      cp_async_16<false>(at + (2 * kWgCoreF + (chunk_row + kRowStep * i) * kWgStrideF + 4 * chunk_part) * 4,
                         pieces.at(c), c >= 0 && in_n);
    }
  };

  // Pipeline: k-block b sits in stage b % kWgStages and is copy group b; the prologue copies blocks 0 .. kWgStages
  // - 2, step b (after its barrier, when every thread has finished step b - 1 and its wgmma) refills the stage
  // of block b - 1 with block b + kWgStages - 1.
  read_columns(0);
#pragma unroll
  for (int s = 0; s < kWgStages - 1; ++s) {
    if (s < blocks) load(s, s);
    read_columns(s + 1);
    cp_async_commit();
  }
  float acc[2][32], part[2][32];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
#pragma unroll
    for (int e = 0; e < 32; ++e) acc[i][e] = 0.0f;
  }
  int stage = 0;
  for (int b = 0; b < blocks; ++b) {
    cp_async_wait<kWgStages - 2>();  // this thread's copies of block b
    float* at = wg_smem + stage * kWgStageF;
    // Split the pieces of A this thread copied: big in place, small into the second buffer.
#pragma unroll
    for (int v = 0; v < 2; ++v) {
      float4* raw = reinterpret_cast<float4*>(at) + tid + 128 * v;
      const float4 x = *raw;
      const float4 big = make_float4(__uint_as_float(tf32_big(x.x)), __uint_as_float(tf32_big(x.y)),
                                     __uint_as_float(tf32_big(x.z)), __uint_as_float(tf32_big(x.w)));
      *raw = big;
      reinterpret_cast<float4*>(at + kWgCoreF)[tid + 128 * v] =
          make_float4(x.x - big.x, x.y - big.y, x.z - big.z, x.w - big.w);
    }
    // The tensor cores read shared memory through the async proxy.
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    {
      const int refill = stage == 0 ? kWgStages - 1 : stage - 1;
      if (b + kWgStages - 1 < blocks) load(b + kWgStages - 1, refill);
      read_columns(b + kWgStages);
      cp_async_commit();
    }
    // This thread's B fragments of both k8 halves, split.
    const float* tile = at + 2 * kWgCoreF + 32 * warp + 4 * g;
    unsigned xb[2][2][4], xs[2][2][4];  // [half][column tile][fragment]
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float4 v0 = *reinterpret_cast<const float4*>(tile + (8 * h + t) * kWgStrideF);
      const float4 v1 = *reinterpret_cast<const float4*>(tile + (8 * h + t + 4) * kWgStrideF);
      const float x[2][4] = {{v0.x, v0.y, v1.x, v1.y}, {v0.z, v0.w, v1.z, v1.w}};
#pragma unroll
      for (int i = 0; i < 2; ++i) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          xb[h][i][e] = tf32_big(x[i][e]);
          xs[h][i][e] = __float_as_uint(x[i][e] - __uint_as_float(xb[h][i][e]));
        }
      }
    }
    const unsigned big = base + stage * kWgStageF * 4, small = big + kWgCoreF * 4;
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        // Core matrices 128 bytes apart along K (slots 0-3, 4-7 of the half), 256 along the rows.
        const unsigned long long d_big = wg_desc(big + h * 2048, 128, 256);
        const unsigned long long d_small = wg_desc(small + h * 2048, 128, 256);
        const unsigned* b_big = xb[h][i];
        const unsigned* b_small = xs[h][i];
        // a_small b_big, a_big b_small, a_big b_big (the mma.sync kernel's order), from zero at the first.
        wgmma_m64n64k8_tf32(part[i], b_big[0], b_big[1], b_big[2], b_big[3], d_small, h);
        wgmma_m64n64k8_tf32(part[i], b_small[0], b_small[1], b_small[2], b_small[3], d_big, 1);
        wgmma_m64n64k8_tf32(part[i], b_big[0], b_big[1], b_big[2], b_big[3], d_big, 1);
      }
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
      for (int e = 0; e < 32; ++e) {
        asm volatile("" : "+f"(part[i][e])::"memory");  // not read before the wait
        acc[i][e] += part[i][e];
      }
    }
    stage = stage + 1 == kWgStages ? 0 : stage + 1;
  }
  cp_async_wait<0>();

  const int column = n0 + 32 * warp + 4 * g;
  const bool column_in = column < p.n;  // n % 8 == 0: the four columns are in or out together
  bool nonfinite = false;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
#pragma unroll
    for (int e = 0; e < 32; ++e) nonfinite |= (__float_as_uint(acc[i][e]) & 0x7f800000u) == 0x7f800000u;
  }
  if (__any_sync(0xffffffffu, nonfinite)) {
    // An accumulator is Inf or NaN (B or A held one, or a sum overflowed; see any_nonfinite in
    // cuda/spmm/tensor_core.cuh): redo this warp's columns of the range exactly, stored entries only, in slot
    // order (the padding zeros would turn a B Inf into NaN).
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
      for (int e = 0; e < 32; ++e) acc[i][e] = 0.0f;
    }
    for (int b = 0; b < blocks && column_in; ++b) {
      const size_t block = static_cast<size_t>(first + b);
      const float* values = core + block * kWgCoreF;
      const int* slot_columns = p.block_columns + 16 * block;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int row = 8 * j + 2 * t + r;
          unsigned mask = __ldg(p.block_masks + block * 64 + row);
          while (mask != 0) {
            const int s = __ffs(mask) - 1;
            mask &= mask - 1;
            const float a = values[(s / 8) * 512 + (row / 8) * 64 + ((s % 8) / 4) * 32 + (row % 8) * 4 + s % 4];
            const float4 x = *reinterpret_cast<const float4*>(dense + static_cast<size_t>(slot_columns[s]) * p.n +
                                                              column);
            acc[0][4 * j + r] = fmaf(a, x.x, acc[0][4 * j + r]);
            acc[0][4 * j + 2 + r] = fmaf(a, x.y, acc[0][4 * j + 2 + r]);
            acc[1][4 * j + r] = fmaf(a, x.z, acc[1][4 * j + r]);
            acc[1][4 * j + 2 + r] = fmaf(a, x.w, acc[1][4 * j + 2 + r]);
          }
        }
      }
    }
  }
  if (!column_in) return;
  if constexpr (kScaled) {
    // C through the epilogue (finish_store) where the launch has one range, else this range's partial tile as it is
    // (the fix-up finishes it after the ranges' sum).
#pragma unroll
    for (int j = 0; j < 8; ++j) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = window * 64 + 8 * j + 2 * t + r;
        if (row < p.m) {
          float v[4] = {acc[0][4 * j + r], acc[0][4 * j + 2 + r], acc[1][4 * j + r], acc[1][4 * j + 2 + r]};
          if (p.splits > 1) {
            float* partial = p.partials + static_cast<size_t>(blockIdx.z) * p.m * p.n;
            *reinterpret_cast<float4*>(partial + static_cast<size_t>(row) * p.n + column) =
                make_float4(v[0], v[1], v[2], v[3]);
          } else {
            finish_store<float, 4>(p, static_cast<float*>(p.out) + static_cast<size_t>(row) * p.n + column, v,
                                   row_bias(p, row));
          }
        }
      }
    }
  } else {
    float* out = p.splits > 1 ? p.partials + static_cast<size_t>(blockIdx.z) * p.m * p.n : static_cast<float*>(p.out);
    if (p.bias != nullptr && p.splits == 1) {
      // The bias + ReLU epilogue, in place (C only: split ranges get it in the fix-up, after their sum).
#pragma unroll
      for (int j = 0; j < 8; ++j) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const float b = row_bias(p, window * 64 + 8 * j + 2 * t + r);
          acc[0][4 * j + r] = add_relu(acc[0][4 * j + r], b);
          acc[0][4 * j + 2 + r] = add_relu(acc[0][4 * j + 2 + r], b);
          acc[1][4 * j + r] = add_relu(acc[1][4 * j + r], b);
          acc[1][4 * j + 2 + r] = add_relu(acc[1][4 * j + 2 + r], b);
        }
      }
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = window * 64 + 8 * j + 2 * t + r;
        if (row < p.m) {
          *reinterpret_cast<float4*>(out + static_cast<size_t>(row) * p.n + column) =
              make_float4(acc[0][4 * j + r], acc[0][4 * j + 2 + r], acc[1][4 * j + r], acc[1][4 * j + 2 + r]);
        }
      }
    }
  }
}

}  // namespace ts

/// Two blocks of one warpgroup per SM (188 registers; 66 KB of shared memory each). Built for sm_90a only.
extern "C" __global__ void __launch_bounds__(128, 2) spmm_tc_f32_w64_n16(const ts::SpmmTcParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  ts::spmm_tcwg_f32<false>(p);
#else
  __trap();  // the host launches it only on compute capability 9.0 from the sm_90a image
#endif
}

/// Its twin whose stores take the scalars alpha and beta (finish_store; cuda/spmm/tensor_core.cuh says why two).
extern "C" __global__ void __launch_bounds__(128, 2) spmm_tc_f32_w64_n16_s(const ts::SpmmTcParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  ts::spmm_tcwg_f32<true>(p);
#else
  __trap();  // as above
#endif
}
