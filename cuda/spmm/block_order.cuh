/**
 * @file @brief The SM-affine block order of the tile kernel: each block claims a (row block, column tile) pair
 * from per-column-tile counters, starting at the column tile its SM is assigned (%smid modulo the column tiles),
 * so that the blocks an SM runs over the whole launch share one column tile of B in its L1.
 */
#pragma once

namespace ts {

/// @brief Claims this block's (row block, column tile) pair: x = row block, y = column tile. Called by one thread
/// of each block of a 1-D grid of exactly row_blocks * tiles blocks. counters holds tiles + 1 ints, zero at
/// launch: one per column tile (the next row block to hand out) and the number of blocks that have claimed.
///
/// Every block gets a distinct pair: a counter hands each value out once, values past row_blocks are refused
/// and the scan moves to the next column tile, and since there are as many blocks as pairs, a block that scans
/// all tiles finds one not yet exhausted. The last block to claim (all others have claimed, each before it
/// counted itself, with a fence between) sets the counters back to zero for the next launch on the stream,
/// so no memset runs between launches.
__device__ __forceinline__ int2 claim_tile_block(int* counters, int row_blocks, int tiles) {
  unsigned smid;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
  int tile = static_cast<int>(smid % static_cast<unsigned>(tiles));
  int row_block = row_blocks;
  for (int scanned = 0; scanned < tiles; ++scanned) {
    row_block = atomicAdd(counters + tile, 1);
    if (row_block < row_blocks) break;
    tile = tile + 1 == tiles ? 0 : tile + 1;
  }
  __threadfence();
  const int blocks = row_blocks * tiles;  // the grid size, < 2^31 (checked on the host)
  if (atomicAdd(counters + tiles, 1) == blocks - 1) {
    for (int i = 0; i <= tiles; ++i) counters[i] = 0;
  }
  return make_int2(row_block, tile);
}

}  // namespace ts
