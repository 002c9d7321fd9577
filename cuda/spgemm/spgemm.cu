/**
 * @file @brief The SpGEMM family (C = A * B, CSR inputs, fp32): the seed's kernel ladder k0..k4 and its
 * prefix-sum alternative kp, each appending C's entries to an unordered COO output, and the COO -> sorted CSR
 * conversion; then the production SpGEMM (plan_*.cuh: count, bin, symbolic, scan, numeric). Kernel names are
 * rebuilt in one place on the Rust side (`LadderKernel::kernel_name`, `plan::bin_kernel_name`).
 */
#include "spgemm/block_per_row.cuh"
#include "spgemm/coo_to_csr.cuh"
#include "spgemm/plan_numeric.cuh"
#include "spgemm/plan_setup.cuh"
#include "spgemm/plan_symbolic.cuh"
#include "spgemm/thread_per_row.cuh"

namespace ts {

/// Kernels 2 and 3 use the seed's block and tile (Rust: `SEED_BLOCK`, `SEED_TILE` in src/spgemm.rs).
constexpr int kSeedBlock = 256;
constexpr int kSeedTile = 2048;

}  // namespace ts

/// @brief Kernel 2: one block per row, shared accumulator, one global atomic per output entry.
extern "C" __global__ void __launch_bounds__(ts::kSeedBlock) spgemm_k2_f32(const ts::SpgemmParams p) {
  ts::spgemm_block_per_row<ts::kSeedBlock, ts::kSeedTile, ts::WriteBack::kPerEntryAtomic>(p);
}

/// @brief Kernel 3: kernel 2 with the tile's entries counted in shared memory and reserved with one global atomic.
extern "C" __global__ void __launch_bounds__(ts::kSeedBlock) spgemm_k3_f32(const ts::SpgemmParams p) {
  ts::spgemm_block_per_row<ts::kSeedBlock, ts::kSeedTile, ts::WriteBack::kSharedCount>(p);
}

// The (block, tile) grid of kernel 4 and kp. Its one mirror is `SPGEMM_K4_GRID` in src/spgemm.rs: change both
// (tests/spgemm.rs parses this macro and compares).
#define TILESPARSE_SPGEMM_K4_GRID(X)                                                                    \
  X(64, 64) X(64, 128) X(64, 256) X(64, 512) X(64, 1024) X(64, 2048) X(64, 4096)                         \
  X(128, 64) X(128, 128) X(128, 256) X(128, 512) X(128, 1024) X(128, 2048) X(128, 4096)                  \
  X(256, 64) X(256, 128) X(256, 256) X(256, 512) X(256, 1024) X(256, 2048) X(256, 4096)                  \
  X(512, 64) X(512, 128) X(512, 256) X(512, 512) X(512, 1024) X(512, 2048) X(512, 4096)                  \
  X(1024, 64) X(1024, 128) X(1024, 256) X(1024, 512) X(1024, 1024) X(1024, 2048) X(1024, 4096)

/// @brief Kernel 4 (first touches counted per thread, warp-reduced) and kp (prefix-sum write offsets) for
/// one (block, tile) point of the grid.
#define TILESPARSE_SPGEMM_BLOCK_TILE_INSTANCES(BLOCK, TILE)                                                 \
  extern "C" __global__ void __launch_bounds__(BLOCK) spgemm_k4_b##BLOCK##_t##TILE##_f32(                 \
      const ts::SpgemmParams p) {                                                                        \
    ts::spgemm_block_per_row<BLOCK, TILE, ts::WriteBack::kWarpCount>(p);                                 \
  }                                                                                                      \
  extern "C" __global__ void __launch_bounds__(BLOCK) spgemm_kp_b##BLOCK##_t##TILE##_f32(                 \
      const ts::SpgemmParams p) {                                                                        \
    ts::spgemm_block_per_row<BLOCK, TILE, ts::WriteBack::kPrefixSum>(p);                                 \
  }

TILESPARSE_SPGEMM_K4_GRID(TILESPARSE_SPGEMM_BLOCK_TILE_INSTANCES)

/// @brief The production SpGEMM's symbolic and numeric kernels of one hash bin (plan_common.cuh's table):
/// launched with BLOCK threads, (BLOCK / THREADS) rows per block, and the bin's rows at bin_rows[bin_begin, +
/// bin_size).
#define TILESPARSE_SPGEMM_BIN_INSTANCES(BIN, BOUND, THREADS, BLOCK)                                          \
  extern "C" __global__ void __launch_bounds__(BLOCK) spgemm_symbolic_bin##BIN(                            \
      const ts::SpgemmPlanParams p, int bin_begin, int bin_size) {                                          \
    ts::symbolic_bin<THREADS, BLOCK, 2 * BOUND>(p, bin_begin, bin_size);                                    \
  }                                                                                                         \
  extern "C" __global__ void __launch_bounds__(BLOCK) spgemm_numeric_bin##BIN(                             \
      const ts::SpgemmPlanParams p, int bin_begin, int bin_size) {                                          \
    ts::numeric_bin<THREADS, BLOCK, 2 * BOUND>(p, bin_begin, bin_size);                                     \
  }

TILESPARSE_SPGEMM_BINS(TILESPARSE_SPGEMM_BIN_INSTANCES)
