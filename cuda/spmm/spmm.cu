/**
 * @file @brief The Sputnik-style tiled SpMM kernel: C = A * B (+ bias, ReLU) with A sparse CSR, B and C dense
 * row-major. Each block computes a (rows per block, block_items_x) tile of C; each subwarp of block_width
 * threads owns one row of A, or a share of one with a row split. Instantiated once per row of variants.txt by
 * build.rs.
 */
#include "common/barrier.cuh"
#include "common/memory_aligner.cuh"
#include "common/params.cuh"
#include "common/vector.cuh"
#include "spmm/block_order.cuh"
#include "spmm/compute.cuh"
#include "spmm/dense_tile.cuh"
#include "spmm/output_tile.cuh"
#include "spmm/predicates.cuh"
#include "spmm/sparse_tile.cuh"
#include "spmm/spmm_config.cuh"
#include "spmm/tc_build.cuh"
#include "spmm/tc_values.cuh"
#include "spmm/tensor_core.cuh"

namespace ts {

/// @brief `Config` with its loads and stores guarded in n (kGuarded) or not: a predicated variant may run the
/// guarded code only in a column tile that n cuts (kSplitGuards, spmm_kernel).
template <typename Config, bool kGuarded>
struct Guarded;
template <typename T, int sv, int dv, int y, int k, int x, int w, int ru, bool pred, bool lb, int mo, int rs,
          int ct, bool kGuarded>
struct Guarded<SpmmConfig<T, sv, dv, y, k, x, w, ru, pred, lb, mo, rs, ct>, kGuarded> {
  typedef SpmmConfig<T, sv, dv, y, k, x, w, ru, kGuarded, lb, mo, rs, ct> type;
};

/// @brief The row split's shared sums: parts 1.. of each row leave their accumulators here for part 0 (empty
/// without a split).
template <typename Config, bool kSplit = (Config::kRowSplit > 1)>
struct PartSums {
  float v[Config::kRowsPerBlock][Config::kRowSplit - 1][Config::kThreadVectorsX * Config::kDenseVectorWidth]
         [Config::kBlockWidth];
};
template <typename Config>
struct PartSums<Config, false> {};

/// @brief The work of one block on its (row block, column tile) of C. Reads: commit the fetched sparse tile,
/// sync, fetch the next one (or the residue), load the dense fragment, multiply-accumulate, sync; then the
/// residue; then the store. Returns early for subwarps past the last row (or piece); no block-wide barrier
/// follows (but the row split's, which keeps them), so this is safe.
template <typename Config, typename Sums>
__device__ __forceinline__ void spmm_tile(const SpmmParams& p, int row_block, int column_tile,
                                          typename Config::Scalar* values_tile_array, int* offsets_tile_array,
                                          Sums& shared_part_sums) {
  typedef typename Config::Scalar T;
  constexpr int kK = Config::kBlockItemsK;
  constexpr int kRowSplit = Config::kRowSplit;
  // With a row split, subwarp `part` of a row takes the row's full tiles part, part + kRowSplit, ...
  const int part = kRowSplit == 1 ? 0 : threadIdx.y % kRowSplit;
  const int slot = row_block * Config::kRowsPerBlock + threadIdx.y / kRowSplit;
  // `target` >= 0: the row of C this subwarp writes; < 0: ~target is the partial row of its piece (one int
  // live through the main loop instead of two, which keeps the 255-register variants from spilling).
  int target, row_start, row_end;
  if (Config::kWalksPieces && p.pieces != nullptr) {
    if (slot >= p.num_pieces) return;
    const int4 piece = __ldg(reinterpret_cast<const int4*>(p.pieces) + slot);
    target = piece.w >= 0 ? ~piece.w : piece.x;
    row_start = piece.y;
    row_end = piece.z;
  } else if (slot < p.m) {
    if (p.swizzled_rows != nullptr) {
      // The row's bounds and the row itself, two loads issued together: no load waits on another. (One int4
      // load, four registers at once, made the 128- and 255-register tiles spill.)
      const int2 bounds = __ldg(reinterpret_cast<const int2*>(p.swizzled_rows + slot));
      target = __ldg(reinterpret_cast<const int*>(p.swizzled_rows + slot) + 2);
      row_start = bounds.x;
      row_end = bounds.y;
    } else {
      target = slot;
      row_start = __ldg(p.row_offsets + slot);
      row_end = __ldg(p.row_offsets + slot + 1);
    }
  } else if (kRowSplit == 1) {
    return;
  } else {
    // The row split ends on a block-wide barrier: subwarps past the last row walk an empty row to it.
    target = -1;
    row_start = 0;
    row_end = 0;
  }
  const int n_index = column_tile * Config::kBlockItemsX;
  const int thread_column = n_index + threadIdx.x * Config::kDenseVectorWidth;
  const PredicatesN<Config> predicates(thread_column, p.n);

  // A piece that starts inside its row is aligned like a row: the entries before it are masked.
  const MemoryAligner<Config::kSparseVectorWidth, kK> aligner(row_start, row_end - row_start);

  T* values_tile = values_tile_array + threadIdx.y * kK;
  int* offsets_tile = offsets_tile_array + threadIdx.y * kK;

  SparseTileLoader<Config> sparse_tile_loader(p.n, aligner.row_offset + part * kK, threadIdx.x,
                                              static_cast<const T*>(p.values), p.column_indices, values_tile,
                                              offsets_tile);
  const DenseTileLoader<Config> dense_tile_loader(static_cast<const T*>(p.dense) + thread_column);
  typename DenseTileLoader<Config>::Fragment dense_fragment;
  float accumulator[Config::kThreadVectorsX * Config::kDenseVectorWidth] = {};
  const SubwarpBarrier<Config::kBlockItemsY, Config::kBlockWidth> barrier(threadIdx.y);

  // The residue's entries are fetched with the last full tile, so that their loads overlap its multiply rather
  // than start the residue's chain of loads. Not in the launch-bounded tiles of k > 8: there the fetch
  // registers, live past the loop, made five tiles spill at their register cap (NOTES.md step 39).
  constexpr bool kResidueAhead = !(Config::kLaunchBounds && kK > 8);
  int nonzeros = aligner.nonzeros;
  if constexpr (kRowSplit > 1) {
    // This subwarp's share: its full tiles, and the residue if the row's next tile would have been its turn.
    const int full_tiles = nonzeros / kK;
    const int mine = full_tiles > part ? (full_tiles - 1 - part) / kRowSplit + 1 : 0;
    nonzeros = mine * kK + (full_tiles % kRowSplit == part ? nonzeros - full_tiles * kK : 0);
  }
  // The first tile is peeled: only it can hold foreign entries from the aligner, so only it pays for masking
  // (with a row split, only part 0's first tile is the row's first).
  // Each tile's sparse loads are issued one tile ahead (fetch), so they overlap the previous tile's work.
  if (nonzeros >= kK) {
    sparse_tile_loader.fetch();
    sparse_tile_loader.template commit<true>(part == 0 ? aligner.lead : 0);
    barrier.sync();
    nonzeros -= kK;
    sparse_tile_loader.template fetch_next<kResidueAhead>(nonzeros);
    dense_tile_loader.template load<true>(offsets_tile, predicates, dense_fragment);
    tile_mac<Config>(values_tile, dense_fragment, accumulator);
    for (; nonzeros >= kK; nonzeros -= kK) {
      barrier.sync();  // the previous tile has been read by the whole subwarp before it is overwritten
      sparse_tile_loader.template commit<false>(0);
      barrier.sync();
      sparse_tile_loader.template fetch_next<kResidueAhead>(nonzeros - kK);
      dense_tile_loader.template load<false>(offsets_tile, predicates, dense_fragment);
      tile_mac<Config>(values_tile, dense_fragment, accumulator);
    }
  } else {
    sparse_tile_loader.template fetch_next<kResidueAhead>(nonzeros);
  }

  barrier.sync();
  if constexpr (kResidueAhead) {
    sparse_tile_loader.commit_residue(nonzeros);
  } else {
    sparse_tile_loader.load_residue(nonzeros);
  }
  barrier.sync();
  dense_tile_loader.residue_mac(nonzeros, values_tile, offsets_tile, predicates, accumulator);

  if constexpr (kRowSplit > 1) {
    // Parts 1.. leave their sums in shared memory; part 0 adds them in part order (the same bits every run).
    constexpr int kAccumulators = Config::kThreadVectorsX * Config::kDenseVectorWidth;
    auto& part_sums = shared_part_sums.v;
    const int row_in_block = threadIdx.y / kRowSplit;
    if (part > 0) {
#pragma unroll
      for (int i = 0; i < kAccumulators; ++i) part_sums[row_in_block][part - 1][i][threadIdx.x] = accumulator[i];
    }
    __syncthreads();
    if (part > 0 || target < 0) return;
#pragma unroll
    for (int q = 0; q < kRowSplit - 1; ++q) {
#pragma unroll
      for (int i = 0; i < kAccumulators; ++i) accumulator[i] += part_sums[row_in_block][q][i][threadIdx.x];
    }
  }
  if (Config::kWalksPieces && target < 0) {
    store_partial_tile<Config>(accumulator, p.partials + static_cast<size_t>(~target) * p.n + thread_column,
                               predicates);
    return;
  }
  T* out_row = static_cast<T*>(p.out) + static_cast<size_t>(target) * p.n + thread_column;
  store_output_tile<Config>(accumulator, p, target, out_row, predicates);
}

/// @brief Whether `Config` is the tile (sparse and dense vector widths, block items y, k, x, block width) given.
template <typename Config>
constexpr bool is_tile(int sv, int dv, int y, int k, int x, int w) {
  return Config::kSparseVectorWidth == sv && Config::kDenseVectorWidth == dv && Config::kBlockItemsY == y &&
         Config::kBlockItemsK == k && Config::kBlockItemsX == x && Config::kBlockWidth == w;
}

/// @brief Whether a predicated variant runs unguarded code in the column tiles that n does not cut (and guarded
/// code in the last one only). Measured per f32 variant at n = 33, 50, 150 and 300 on 46 matrices, with the split
/// and without (NOTES.md, "SpMM step 35"): it pays up to 1.7x where the guards are dear (the 32-column k = 32
/// tiles), but five tiles ran 0.86-0.985x as fast with it (two paths' code), and they keep their guards everywhere.
/// In f16 and bf16 it was within noise (the selected variants on 100 problems each): they keep them too.
template <typename Config>
constexpr bool kSplitGuards = sizeof(typename Config::Scalar) == 4 &&
                              !((is_tile<Config>(1, 4, 2, 32, 128, 32) && Config::kRowSplit == 2) ||
                                is_tile<Config>(1, 4, 2, 32, 64, 16) ||
                                (is_tile<Config>(1, 4, 2, 16, 128, 16) && !Config::kLaunchBounds) ||
                                (is_tile<Config>(1, 4, 8, 8, 32, 8) && Config::kRowSplit == 4) ||
                                is_tile<Config>(2, 2, 2, 32, 32, 16));

/// @brief One (row block, column tile) of C: spmm_tile, guarded in n where the variant is predicated (and, with
/// kSplitGuards, the column tile is the one n cuts). Each variant instantiates only the paths it can take (if
/// constexpr): guarded everywhere, guarded only in the column tile that n cuts, or unguarded (no predicates).
template <typename Config, typename Sums>
__device__ __forceinline__ void spmm_column_tile(const SpmmParams& p, int row_block, int column_tile,
                                                 typename Config::Scalar* values_tile_array, int* offsets_tile_array,
                                                 Sums& part_sums) {
  using GuardedTile = typename Guarded<Config, true>::type;
  using UnguardedTile = typename Guarded<Config, false>::type;
  if constexpr (Config::kPredicateLoads && !kSplitGuards<Config>) {
    spmm_tile<GuardedTile>(p, row_block, column_tile, values_tile_array, offsets_tile_array, part_sums);
  } else if constexpr (Config::kPredicateLoads) {
    if ((column_tile + 1) * Config::kBlockItemsX > p.n) {
      spmm_tile<GuardedTile>(p, row_block, column_tile, values_tile_array, offsets_tile_array, part_sums);
    } else {
      spmm_tile<UnguardedTile>(p, row_block, column_tile, values_tile_array, offsets_tile_array, part_sums);
    }
  } else {
    spmm_tile<UnguardedTile>(p, row_block, column_tile, values_tile_array, offsets_tile_array, part_sums);
  }
}

/// @brief The kernel body: the block's (row block, column tile) in its block order, then spmm_column_tile, on
/// that column tile or, with kColumnTiles above 1, on each of the block's group of column tiles in turn.
template <typename Config>
__device__ __forceinline__ void spmm_kernel(const SpmmParams& p) {
  // Shared memory, declared here once for both paths of a predicated variant (in one struct, nvcc gave the half
  // tiles up to 8 registers more): (block_items_y, block_items_k) tiles, a row of each per subwarp, and the row
  // split's sums.
  __shared__ __align__(16) typename Config::Scalar values_tile_array[Config::kBlockItemsY * Config::kBlockItemsK];
  __shared__ __align__(16) int offsets_tile_array[Config::kBlockItemsY * Config::kBlockItemsK];
  __shared__ PartSums<Config> part_sums;
  int row_block = blockIdx.x;
  int column_tile = blockIdx.y;  // with kColumnTiles > 1, the first of the block's group of column tiles
  if (p.block_order != kRowBlocksFirst) {
    // Column groups of kColumnTiles tiles (the grid's column extent); one group per tile when kColumnTiles is 1.
    const int groups = (p.n + Config::kBlockItemsX * Config::kColumnTiles - 1) /
                       (Config::kBlockItemsX * Config::kColumnTiles);
    if (p.block_order == kColumnTilesFirst) {
      row_block = blockIdx.x / groups;
      column_tile = blockIdx.x - row_block * groups;
    } else if constexpr (Config::kClaimsBlocks) {  // kSmAffine (the host refuses it for the other variants)
      __shared__ int2 claimed;
      if (threadIdx.x == 0 && threadIdx.y == 0) claimed = claim_tile_block(p.tile_counters, p.row_blocks, groups);
      __syncthreads();
      row_block = claimed.x;
      column_tile = claimed.y;
    }
  }
  if constexpr (Config::kColumnTiles == 1) {
    spmm_column_tile<Config>(p, row_block, column_tile, values_tile_array, offsets_tile_array, part_sums);
  } else {
    const int tiles = (p.n + Config::kBlockItemsX - 1) / Config::kBlockItemsX;
    const int first = column_tile * Config::kColumnTiles;
    const int end = min(first + Config::kColumnTiles, tiles);
#pragma unroll 1
    for (int tile = first; tile < end; ++tile) {
      // The tiles share the block's shared memory: the last one's reads are done before the next one's writes.
      if (tile != first) __syncthreads();
      spmm_column_tile<Config>(p, row_block, tile, values_tile_array, offsets_tile_array, part_sums);
    }
  }
}

/// @brief The second pass of a row split: block x sums split row x's partial rows in piece order (the same
/// order every run) and writes the row of C through the launch's epilogue (finish_store).
template <typename T>
__device__ __forceinline__ void spmm_fixup(const SpmmParams& p) {
  const int* split_row = p.split_rows + 3 * static_cast<size_t>(blockIdx.x);
  const int row = __ldg(split_row);
  const float* partial = p.partials + static_cast<size_t>(__ldg(split_row + 1)) * p.n;
  const int count = __ldg(split_row + 2);
  T* out = static_cast<T*>(p.out) + static_cast<size_t>(row) * p.n;
  const float b = p.bias != nullptr ? __ldg(p.bias + row) : 0.0f;
  for (int c = blockIdx.y * blockDim.x + threadIdx.x; c < p.n; c += gridDim.y * blockDim.x) {
    float sum[1] = {partial[c]};
    for (int q = 1; q < count; ++q) sum[0] += partial[static_cast<size_t>(q) * p.n + c];
    finish_store<T, 1>(p, out + c, sum, b);
  }
}

/// @brief The rows of C that A leaves empty and the tile kernel's grid left out: each warp writes whole rows,
/// 16 bytes a lane where n * sizeof(T) keeps every row 16-byte aligned, one element a lane otherwise. Each element
/// is the tile's for an empty row (finish_store from a zero sum), so C has the same bits either way.
template <typename T>
__device__ __forceinline__ void spmm_zero_rows(const SpmmZeroRowsParams& p) {
  constexpr int kVector = 16 / sizeof(T);
  const int warps = blockDim.x / 32;
  const int lane = threadIdx.x % 32;
  for (size_t i = static_cast<size_t>(blockIdx.x) * warps + threadIdx.x / 32; i < static_cast<size_t>(p.count);
       i += static_cast<size_t>(gridDim.x) * warps) {
    const int row = __ldg(p.rows + i * p.stride);
    const float b = p.bias != nullptr ? __ldg(p.bias + row) : 0.0f;
    T* out = static_cast<T*>(p.out) + static_cast<size_t>(row) * p.n;
    if (p.n % kVector == 0) {
      for (int c = lane * kVector; c < p.n; c += 32 * kVector) {
        float zeros[kVector] = {};
        finish_store<T, kVector>(p, out + c, zeros, b);
      }
    } else {
      for (int c = lane; c < p.n; c += 32) {
        float zero[1] = {0.0f};
        finish_store<T, 1>(p, out + c, zero, b);
      }
    }
  }
}

/// @brief The rows of the empty tensor-core windows (SpmmZeroWindowsParams): block b writes windows b,
/// b + gridDim.x, ..., each window's region of C (contiguous: its rows are consecutive) as one stream of 16-byte
/// stores by the block's threads in turn, cut at row m. Zeros (all zero bits in f32, f16 and bf16) for a plain
/// product, else finish_store's value from a zero sum, the value the tensor-core kernels store for a row with no
/// entry.
template <typename T>
__device__ __forceinline__ void spmm_zero_windows(const SpmmZeroWindowsParams& p) {
  constexpr int kVector = 16 / sizeof(T);
  const size_t per_window = static_cast<size_t>(p.rows_per_window) * p.row_vectors;
  const size_t limit = static_cast<size_t>(p.m) * p.row_vectors;  // pieces of C
  uint4* out = static_cast<uint4*>(p.out);
  for (int w = blockIdx.x; w < p.count; w += gridDim.x) {
    const size_t first = static_cast<size_t>(__ldg(p.windows + w)) * per_window;  // < limit: window < windows
    const size_t end = min(first + per_window, limit);
    if (p.bias == nullptr && p.alpha == 1.0f && p.beta == 0.0f) {
      for (size_t i = first + threadIdx.x; i < end; i += blockDim.x) out[i] = make_uint4(0, 0, 0, 0);
      continue;
    }
    for (size_t i = first + threadIdx.x; i < end; i += blockDim.x) {
      const int row = static_cast<int>(i / p.row_vectors);  // < m: i < limit
      float zeros[kVector] = {};
      finish_store<T, kVector>(p, reinterpret_cast<T*>(out + i), zeros, row_bias(p, row));
    }
  }
}

}  // namespace ts

/// Threads per block of spmm_zero_windows_<dtype> (src/spmm/tensor_core.rs launches them with the same number).
#define TILESPARSE_SPMM_ZERO_WINDOWS_THREADS 256
TILESPARSE_KERNEL_PER_TYPE(spmm_zero_windows, SpmmZeroWindowsParams, TILESPARSE_SPMM_ZERO_WINDOWS_THREADS)

/// Threads per block of spmm_zero_rows_<dtype> (src/spmm/mod.rs launches them with the same number).
#define TILESPARSE_SPMM_ZERO_ROWS_THREADS 256
TILESPARSE_KERNEL_PER_TYPE(spmm_zero_rows, SpmmZeroRowsParams, TILESPARSE_SPMM_ZERO_ROWS_THREADS)

/// Threads per block of the fix-up kernels (src/spmm/mod.rs launches them with the same number).
#define TILESPARSE_SPMM_FIXUP_THREADS 256
TILESPARSE_KERNEL_PER_TYPE(spmm_fixup, SpmmParams, TILESPARSE_SPMM_FIXUP_THREADS)

/// One exported kernel per variant; `name` is SpmmConfig::kernel_name() on the Rust side.
#define TILESPARSE_SPMM_INSTANCE(name, T, sv, dv, y, k, x, w, ru, pred, lb, mo, rs, ct)                       \
  extern "C" __global__ void __launch_bounds__((y) * (w), (lb) ? (mo) : 1) name(const ts::SpmmParams p) {   \
    ts::spmm_kernel<ts::SpmmConfig<T, sv, dv, y, k, x, w, ru, pred, lb, mo, rs, ct>>(p);                    \
  }

/// New values of A written into its tensor-core blocks (src/spmm/tensor_core.rs, `DeviceBlocks::set_values`).
TILESPARSE_SPMM_TC_VALUES(spmm_tc_values_fragment16, unsigned short, ts::kFragment16)
TILESPARSE_SPMM_TC_VALUES(spmm_tc_values_fragment32, unsigned, ts::kFragment32)
TILESPARSE_SPMM_TC_VALUES(spmm_tc_values_core32, unsigned, ts::kCore32)

/// A's tensor-core blocks built on the device (src/spmm/tensor_core.rs, `DeviceBlocks::build`).
TILESPARSE_SPMM_TC_BUILD(spmm_tc_build_count, spmm_tc_build_count)
TILESPARSE_SPMM_TC_BUILD(spmm_tc_build_fill, spmm_tc_build_fill)
