/**
 * @file @brief The Sputnik-style tiled SpMM kernel: C = A * B (+ bias, ReLU) with A sparse CSR, B and C dense
 * row-major. Each block computes a (block_items_y, block_items_x) tile of C; each subwarp of block_width
 * threads owns one row of A. Instantiated once per row of variants.txt by build.rs.
 */
#include "common/barrier.cuh"
#include "common/memory_aligner.cuh"
#include "common/params.cuh"
#include "common/vector.cuh"
#include "spmm/compute.cuh"
#include "spmm/dense_tile.cuh"
#include "spmm/output_tile.cuh"
#include "spmm/predicates.cuh"
#include "spmm/sparse_tile.cuh"
#include "spmm/spmm_config.cuh"

namespace ts {

/// @brief The kernel body. Reads: commit the fetched sparse tile, sync, fetch the next one, load the dense
/// fragment, multiply-accumulate, sync; then the residue; then the store.
template <typename Config>
__device__ __forceinline__ void spmm_kernel(const SpmmParams& p) {
  typedef typename Config::Scalar T;
  constexpr int kK = Config::kBlockItemsK;

  // Subwarps of rows past m leave at once; no block-wide barrier follows, so this is safe.
  const int slot = blockIdx.x * Config::kBlockItemsY + threadIdx.y;
  if (slot >= p.m) return;
  const int row = p.row_swizzle != nullptr ? __ldg(p.row_swizzle + slot) : slot;
  const int n_index = blockIdx.y * Config::kBlockItemsX;
  const int thread_column = n_index + threadIdx.x * Config::kDenseVectorWidth;
  const PredicatesN<Config> predicates(thread_column, p.n);

  const int row_start = __ldg(p.row_offsets + row);
  const MemoryAligner<Config::kSparseVectorWidth, kK> aligner(row_start, __ldg(p.row_offsets + row + 1) - row_start);

  // (block_items_y, block_items_k) tiles; each subwarp uses its own row of them.
  __shared__ __align__(16) T values_tile_array[Config::kBlockItemsY * kK];
  __shared__ __align__(16) int offsets_tile_array[Config::kBlockItemsY * kK];
  T* values_tile = values_tile_array + threadIdx.y * kK;
  int* offsets_tile = offsets_tile_array + threadIdx.y * kK;

  SparseTileLoader<Config> sparse_tile_loader(p.n, aligner.row_offset, threadIdx.x,
                                              static_cast<const T*>(p.values), p.column_indices, values_tile,
                                              offsets_tile);
  const DenseTileLoader<Config> dense_tile_loader(static_cast<const T*>(p.dense) + thread_column);
  typename DenseTileLoader<Config>::Fragment dense_fragment;
  float accumulator[Config::kThreadVectorsX * Config::kDenseVectorWidth] = {};
  const SubwarpBarrier<Config::kBlockItemsY, Config::kBlockWidth> barrier(threadIdx.y);

  int nonzeros = aligner.nonzeros;
  // The first tile is peeled: only it can hold foreign entries from the aligner, so only it pays for masking.
  // Each tile's sparse loads are issued one tile ahead (fetch), so they overlap the previous tile's work.
  if (nonzeros >= kK) {
    sparse_tile_loader.fetch();
    sparse_tile_loader.template commit<true>(aligner.lead);
    barrier.sync();
    nonzeros -= kK;
    if (nonzeros >= kK) sparse_tile_loader.fetch();
    dense_tile_loader.template load<true>(offsets_tile, predicates, dense_fragment);
    tile_mac<Config>(values_tile, dense_fragment, accumulator);
    for (; nonzeros >= kK; nonzeros -= kK) {
      barrier.sync();  // the previous tile has been read by the whole subwarp before it is overwritten
      sparse_tile_loader.template commit<false>(0);
      barrier.sync();
      if (nonzeros >= 2 * kK) sparse_tile_loader.fetch();
      dense_tile_loader.template load<false>(offsets_tile, predicates, dense_fragment);
      tile_mac<Config>(values_tile, dense_fragment, accumulator);
    }
  }

  barrier.sync();
  sparse_tile_loader.load_residue(nonzeros);
  barrier.sync();
  dense_tile_loader.residue_mac(nonzeros, values_tile, offsets_tile, predicates, accumulator);

  T* out_row = static_cast<T*>(p.out) + static_cast<size_t>(row) * p.n + thread_column;
  store_output_tile<Config>(accumulator, p.bias, row, out_row, predicates);
}

}  // namespace ts

/// One exported kernel per variant; `name` is SpmmConfig::kernel_name() on the Rust side.
#define TILESPARSE_SPMM_INSTANCE(name, T, sv, dv, y, k, x, w, ru, pred, lb, mo)                               \
  extern "C" __global__ void __launch_bounds__((y) * (w), (lb) ? (mo) : 1) name(const ts::SpmmParams p) {   \
    ts::spmm_kernel<ts::SpmmConfig<T, sv, dv, y, k, x, w, ru, pred, lb, mo>>(p);                            \
  }
