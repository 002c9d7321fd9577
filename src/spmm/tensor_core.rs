//! Tensor-core SpMM for f16 and bf16 (fp32 accumulation), and for f32 in 3xTF32: A is cut into windows of 16
//! rows (narrow kernels) or 64 or 32 rows (wide kernels); each window's columns are condensed (the sorted union of
//! the columns its rows store) and cut into k-blocks of 16 slots; a k-block holds one dense 16 x 16 block of A per
//! 16 rows of the window (zeros where a row does not store a slot's column), each of which one
//! `mma.sync.m16n8k16` multiplies by the 16 rows of B the slots name (cuda/spmm/tensor_core.cuh). The wide
//! kernels gather those 16 rows of B once for four (or two) row tiles; the narrow ones have four times as many
//! windows, for small or sparse problems.
//!
//! f32 (16-row windows, 32 columns per warp; 64- and 32-row windows, 64 columns per block): each f32 x is split into x = big +
//! small, big = x rounded to tf32 (10 fraction bits), and a * b = a_small b_big + a_big b_small + a_big b_big: three
//! `mma.m16n8k8.tf32` per 8 slots with f32 accumulation ("3xTF32"). Not the f32 FMA's rounding: its elementwise bound,
//! [`crate::cpu::oracle::spmm_error_bound_tf32x3`], is derived there, and [`TensorCoreConfig::is_tf32x3`] names such
//! kernels. The CUDA-core tiles stay available for f32 as plain FMAs (`SpmmConfig`). The f16/bf16 kernels' mma
//! truncates too: their bound is [`crate::cpu::oracle::spmm_error_bound_tc_half`], which counts on at most
//! [`crate::cpu::oracle::TC_MAX_PARTIALS`] partial sums per element (`SPLIT_MAX` ranges, `WARPS` warps).
//!
//! f32 on Hopper (compute capability 9.0, the sm_90a family): `spmm_tc_f32_w64_n16` multiplies the same 64-row
//! windows with the same split on the warpgroup mma (`wgmma.m64n64k8.tf32`), 128 columns per block, taking the
//! product transposed (C^T = B^T A^T: B's fragments in registers, the window's k-block in shared memory) from
//! blocks stored as K-major core matrices (`core_index_f32`; cuda/spmm90a/spmm90a.cu). Its ranges are added by
//! the fix-up only.
//!
//! The blocks are built the first time a matrix is multiplied this way, and kept with the matrix: on the device
//! (cuda/spmm/tc_build.cuh, then `spmm_tc_values_<order>` for the values) where A has at most
//! [`DEVICE_BUILD_MAX_COLUMNS`] columns, else on the host from one download of A. New values of the same
//! structure ([`DeviceCsr::set_values`]) are written into them on the device (`spmm_tc_values_<order>`,
//! cuda/spmm/tc_values.cuh). A warp whose B tiles held an Inf or NaN redoes its
//! tile by exact scalar FMAs over the stored entries (the padding zeros would turn Inf into NaN otherwise).

use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg};

use super::SpmmEpilogue;
use crate::csr::{upload_slice, DeviceCsr};
use crate::dense::DeviceDense;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::kernels::{Family, KERNELS_BUILT, SM90A_BUILT};
use crate::scalar::{DType, Scalar};

/// Rows per window of the narrow kernels (the mma's M) and slots per k-block (its K).
pub const WINDOW: usize = 16;
/// Rows per window of the wide kernels: four 16-row mma tiles, two per warp (the block's warps split the tile
/// two by two).
pub const WIDE_WINDOW: usize = 64;
/// Rows per window of the wide kernels' 32-row form: two 16-row mma tiles, one per warp (the same two-by-two
/// split), for rows that share columns in runs of 32 (32 x 32 blocks half fill a 64-row window).
pub const MID_WINDOW: usize = 32;
/// Slots (columns of A, rows of B) per k-block: the mma's K.
pub const SLOTS: usize = 16;
/// Warps per block (`ts::kTcWarps`).
const WARPS: usize = 4;
/// k-blocks per window in the window heads ([`HostBlocks::window_heads`], `ts::kTcHeadBlocks`): at least the wide
/// kernel's ring stages, whose prologue reads them (`tcw_stages` in cuda/spmm/tensor_core.cuh, at most 8).
pub(crate) const HEAD_BLOCKS: usize = 8;

/// A tensor-core SpMM variant: rows per window (16: narrow, 32 or 64: wide) and the columns of C each block owns,
/// in tiles of 8 (narrow: 4 or 8, i.e. 32 or 64 columns; wide: 8 or 16, i.e. 64 or 128 columns).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TensorCoreConfig {
    pub dtype: DType,
    /// Rows per window: [`WINDOW`], [`MID_WINDOW`] or [`WIDE_WINDOW`].
    pub window: u32,
    /// n8 tiles per block's column slice.
    pub tiles_n: u32,
}

impl TensorCoreConfig {
    /// The compiled (window, tiles_n) pairs of f16 and bf16.
    const COMPILED: [(u32, u32); 6] = [(16, 4), (16, 8), (64, 8), (64, 16), (32, 8), (32, 16)];
    /// The compiled (window, tiles_n) pairs of f32 (3xTF32): 16-row windows, 32 columns per warp; 64-row windows,
    /// 64 columns per block on mma.sync, 128 on the warpgroup mma (compute capability 9.0 only,
    /// [`TensorCoreConfig::is_wgmma`]); 32-row windows, 64 columns per block on mma.sync.
    const COMPILED_F32: [(u32, u32); 4] = [(16, 4), (64, 8), (64, 16), (32, 8)];

    /// The compiled (window, tiles_n) pairs of `dtype` (none for f64).
    fn compiled(dtype: DType) -> &'static [(u32, u32)] {
        match dtype {
            DType::F16 | DType::Bf16 => &Self::COMPILED,
            DType::F32 => &Self::COMPILED_F32,
            DType::F64 => &[],
        }
    }

    /// The compiled variants.
    pub fn all(dtype: DType) -> Vec<TensorCoreConfig> {
        Self::compiled(dtype).iter().map(|&(window, tiles_n)| TensorCoreConfig { dtype, window, tiles_n }).collect()
    }

    /// Whether this kernel multiplies f32 in 3xTF32 (see the module documentation): its results meet
    /// [`crate::cpu::oracle::spmm_error_bound_tf32x3`], not the f32 FMA's bound.
    pub fn is_tf32x3(&self) -> bool {
        self.dtype == DType::F32
    }

    /// Whether this is the Hopper kernel (`spmm_tc_f32_w64_n16`: warpgroup mma, family
    /// [`Family::Spmm90a`], compute capability 9.0 only, ranges added by the fix-up, never in clusters).
    pub fn is_wgmma(&self) -> bool {
        self.dtype == DType::F32 && self.window as usize == WIDE_WINDOW && self.tiles_n == 16
    }

    /// Whether a launch on `info`'s device can run this kernel: the mma.sync ones on every device the build
    /// targets, the wgmma one on compute capability 9.0 with the sm_90a family built.
    pub fn runs_on(&self, info: &crate::gpu::DeviceInfo) -> bool {
        !self.is_wgmma() || wgmma_runs_on(info)
    }

    /// The family whose fatbin holds this kernel.
    pub(crate) fn family(&self) -> Family {
        if self.is_wgmma() {
            Family::Spmm90a
        } else {
            Family::Spmm
        }
    }

    /// The exported kernel name, e.g. `spmm_tc_f16_n4` (16-row windows), `spmm_tc_f16_w64_n16` or
    /// `spmm_tc_f16_w32_n8`.
    pub fn kernel_name(&self) -> String {
        match self.window {
            16 => format!("spmm_tc_{}_n{}", self.dtype, self.tiles_n),
            w => format!("spmm_tc_{}_w{w}_n{}", self.dtype, self.tiles_n),
        }
    }

    /// Columns of C per block (narrow kernels: per warp, the block's warps share the slice).
    pub fn columns_per_block(&self) -> usize {
        8 * self.tiles_n as usize
    }

    /// Whether this is a wide kernel: windows of [`WIDE_WINDOW`] or [`MID_WINDOW`] rows, whose block shares each
    /// gathered B tile among its warps and may split a window's k-blocks into ranges ([`wide_splits`]).
    pub fn is_wide(&self) -> bool {
        self.window as usize > WINDOW
    }
}

impl std::str::FromStr for TensorCoreConfig {
    type Err = String;
    /// Parses a kernel name, e.g. `spmm_tc_bf16_n8` or `spmm_tc_f16_w64_n16` (or without the `spmm_` prefix).
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let rest = s.strip_prefix("spmm_").unwrap_or(s);
        let rest = rest
            .strip_prefix("tc_")
            .ok_or_else(|| format!("'{s}' is not a tensor-core kernel (tc_<dtype>[_w<rows>]_n<tiles>)"))?;
        let (head, tiles) =
            rest.rsplit_once("_n").ok_or_else(|| format!("'{s}': expected tc_<dtype>[_w<rows>]_n<tiles>"))?;
        let (dtype, window) = match head.split_once("_w") {
            Some((dtype, w)) => (dtype, w.parse().map_err(|_| format!("'{s}': window '{w}' is not a number"))?),
            None => (head, WINDOW as u32),
        };
        let dtype: DType = dtype.parse().map_err(|e| format!("'{s}': {e}"))?;
        let tiles_n: u32 = tiles.parse().map_err(|_| format!("'{s}': tiles '{tiles}' is not a number"))?;
        Ok(TensorCoreConfig { dtype, window, tiles_n })
    }
}

impl std::fmt::Display for TensorCoreConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.kernel_name())
    }
}

/// The k-block counts of a matrix for every window height (the selection needs them at upload).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockCounts {
    /// k-blocks of the 16-row windows.
    pub narrow: usize,
    /// k-blocks of the 64-row windows.
    pub wide: usize,
    /// k-blocks of the 32-row windows.
    pub mid: usize,
}

impl BlockCounts {
    /// Counts all three ([`count_blocks`]'s numbers): in one walk over the entries where a stamp per column fits
    /// (`count_windows`; on a large matrix, ranges of 64-row windows in parallel), else by [`count_blocks`] per
    /// height.
    pub fn of(cols: usize, indptr: &[usize], indices: &[usize]) -> BlockCounts {
        if !stamps_fit(cols, indices.len()) {
            return BlockCounts {
                narrow: count_blocks(cols, indptr, indices, WINDOW),
                wide: count_blocks(cols, indptr, indices, WIDE_WINDOW),
                mid: count_blocks(cols, indptr, indices, MID_WINDOW),
            };
        }
        let rows = indptr.len().saturating_sub(1);
        let windows = rows.div_ceil(WINDOW);
        let nnz = indices.len();
        // Ranges of whole 64-row windows, about equal in entries, one per thread, each with its own stamps: as
        // many as keep the stamps within 16 bytes per entry.
        let parts = if crate::csr::in_parallel(rows + nnz) {
            rayon::current_num_threads().min((4 * nnz / cols.max(1)).max(1)).min(windows.div_ceil(SPAN))
        } else {
            1
        };
        let count = |range: std::ops::Range<usize>| count_windows(cols, indptr, indices, range);
        let [narrow, mid, wide] = if parts <= 1 {
            count(0..windows)
        } else {
            use rayon::prelude::*;
            // The first 64-row window whose first entry is at or past `entry` (the first row at or past it, rounded
            // up to a 64-row window), in 16-row windows.
            let first_at = |entry: usize| {
                let row = indptr.partition_point(|&start| start < entry);
                (row.div_ceil(WIDE_WINDOW) * SPAN).min(windows)
            };
            let mut bounds: Vec<usize> = (0..=parts).map(|t| first_at(t * nnz / parts)).collect();
            bounds[parts] = windows;
            bounds.dedup();
            bounds
                .par_windows(2)
                .map(|b| count(b[0]..b[1]))
                .reduce(|| [0; 3], |x, y| [x[0] + y[0], x[1] + y[1], x[2] + y[2]])
        };
        BlockCounts { narrow, mid, wide }
    }

    /// The share of the 16-row windows' slots that A's `nnz` entries fill (0 where there are no blocks).
    pub fn narrow_fill(&self, nnz: usize) -> f64 {
        if self.narrow == 0 {
            return 0.0;
        }
        nnz as f64 / (self.narrow * WINDOW * SLOTS) as f64
    }

    /// The share of the slots of the windows of `window` rows (16, 32 or 64) that A's `nnz` entries fill (0 where
    /// there are no blocks).
    pub fn fill(&self, window: usize, nnz: usize) -> f64 {
        let blocks = match window {
            WIDE_WINDOW => self.wide,
            MID_WINDOW => self.mid,
            _ => self.narrow,
        };
        if blocks == 0 {
            return 0.0;
        }
        nnz as f64 / (blocks * window * SLOTS) as f64
    }

    /// The 16-row windows' k-blocks per window on average over an m-row matrix (windows of empty rows count).
    pub fn narrow_per_window(&self, m: usize) -> f64 {
        self.narrow as f64 / m.div_ceil(WINDOW) as f64
    }

    /// The 64-row windows' work at n columns: (k-block, 64-column slice) pairs.
    pub fn wide_pairs(&self, n: usize) -> usize {
        self.wide.saturating_mul(n.div_ceil(64))
    }
}

/// How a matrix's tensor-core blocks are laid out: the windows' height and the order of each k-block's values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BlockLayout {
    /// 16-row windows, mma A-fragment order ([`fragment_index`], [`fragment_index_f32`]).
    Narrow,
    /// 64-row windows, mma A-fragment order.
    Wide,
    /// 64-row windows of f32 in wgmma's K-major core matrices ([`core_index_f32`]).
    WideCore,
    /// 32-row windows, mma A-fragment order.
    Mid,
}

/// The number of [`BlockLayout`]s: a matrix caches its blocks in one slot per layout ([`BlockLayout::slot`]).
pub(crate) const BLOCK_LAYOUTS: usize = 4;

impl BlockLayout {
    /// Every layout, in slot order ([`BlockLayout::slot`]).
    pub(crate) const ALL: [BlockLayout; BLOCK_LAYOUTS] =
        [BlockLayout::Narrow, BlockLayout::Wide, BlockLayout::WideCore, BlockLayout::Mid];

    /// The layout `config` reads; `InvalidConfig` for windows of a height no layout has.
    pub(crate) fn of(config: &TensorCoreConfig) -> Result<BlockLayout> {
        if config.is_wgmma() {
            return Ok(BlockLayout::WideCore);
        }
        Self::of_rows(config.window as usize)
    }

    /// The mma-order layout of windows of `rows_per_window` rows ([`WINDOW`], [`MID_WINDOW`] or [`WIDE_WINDOW`]).
    pub(crate) fn of_rows(rows_per_window: usize) -> Result<BlockLayout> {
        match rows_per_window {
            WINDOW => Ok(BlockLayout::Narrow),
            MID_WINDOW => Ok(BlockLayout::Mid),
            WIDE_WINDOW => Ok(BlockLayout::Wide),
            _ => Err(Error::InvalidConfig {
                config: format!("tensor-core windows of {rows_per_window} rows"),
                rule: format!("windows are {WINDOW}, {MID_WINDOW} or {WIDE_WINDOW} rows"),
            }),
        }
    }

    pub(crate) fn rows(self) -> usize {
        match self {
            BlockLayout::Narrow => WINDOW,
            BlockLayout::Mid => MID_WINDOW,
            BlockLayout::Wide | BlockLayout::WideCore => WIDE_WINDOW,
        }
    }

    /// The matrix's cache slot of this layout.
    pub(crate) fn slot(self) -> usize {
        self as usize
    }

    /// Whether the blocks keep window heads ([`HostBlocks::window_heads`]): the mma.sync wide kernels' layouts.
    pub(crate) fn has_heads(self) -> bool {
        matches!(self, BlockLayout::Wide | BlockLayout::Mid)
    }
}

/// The kernel that writes values of `dtype` into blocks in `layout` (`spmm_tc_values_<order>`), or why such
/// blocks do not exist: f16, bf16 and f32 in the mma fragment orders, f32 only in wgmma's core matrices.
fn values_kernel(dtype: DType, layout: BlockLayout) -> Result<&'static str> {
    match (dtype.size(), layout) {
        (4, BlockLayout::WideCore) => Ok("spmm_tc_values_core32"),
        (_, BlockLayout::WideCore) => {
            Err(Error::UnsupportedDtype { dtype, op: "tensor-core blocks in core matrices (f32)" })
        }
        (4, _) => Ok("spmm_tc_values_fragment32"),
        (2, _) => Ok("spmm_tc_values_fragment16"),
        _ => Err(Error::UnsupportedDtype { dtype, op: "tensor-core SpMM (f16, bf16, f32)" }),
    }
}

/// The most columns of A whose tensor-core blocks are built on the device (cuda/spmm/tc_build.cuh): a bitmap of A's
/// columns and their prefix take 8 bytes per 32 columns of the 96 KiB of shared memory the build asks. Past this,
/// the host builds them from one download of A.
pub const DEVICE_BUILD_MAX_COLUMNS: usize = DEVICE_BUILD_SHARED_BYTES as usize / 8 * 32;
/// The dynamic shared memory the device build may ask: 96 KiB, which every device of compute capability 8.0 and
/// later gives a block (8.6 and 8.9 give at most 99 KiB).
const DEVICE_BUILD_SHARED_BYTES: u32 = 96 * 1024;
/// Threads per block of the device build (`ts::kTcBuildThreads`, cuda/spmm/tc_build.cuh).
const TC_BUILD_THREADS: u32 = 256;

/// 16-row windows per 64-row window.
const SPAN: usize = WIDE_WINDOW / WINDOW;

/// [`BlockCounts::of`]'s k-blocks of the 16-, 32- and 64-row windows around the 16-row windows `range`, whose ends
/// are multiples of [`SPAN`] or the last window, with a stamp per column: the last 16-row window of the range that
/// stored it, which says whether the 32- and 64-row windows around the current one have met it too.
fn count_windows(cols: usize, indptr: &[usize], indices: &[usize], range: std::ops::Range<usize>) -> [usize; 3] {
    // 16-row windows per window of each height: 16, 32 and 64 rows.
    const SPANS: [usize; 3] = [1, MID_WINDOW / WINDOW, SPAN];
    let rows = indptr.len().saturating_sub(1);
    let end = range.end;
    let mut stamp = vec![u32::MAX; cols];
    let (mut distinct, mut blocks) = ([0usize; 3], [0usize; 3]);
    for w in range {
        for &c in &indices[indptr[w * WINDOW]..indptr[((w + 1) * WINDOW).min(rows)]] {
            let last = stamp[c];
            if last == w as u32 {
                continue; // met in this 16-row window, so in the windows around it too
            }
            stamp[c] = w as u32;
            for (h, span) in SPANS.into_iter().enumerate() {
                // Not met since the first 16-row window of this height's window around w (stamps are of this
                // range's windows, all before w, or u32::MAX).
                if last == u32::MAX || (last as usize) < w - w % span {
                    distinct[h] += 1;
                }
            }
        }
        for (h, span) in SPANS.into_iter().enumerate() {
            if (w + 1) % span == 0 || w + 1 == end {
                blocks[h] += distinct[h].div_ceil(SLOTS);
                distinct[h] = 0;
            }
        }
    }
    blocks
}

/// The number of k-blocks of a CSR matrix of `cols` columns cut into windows of `rows_per_window` rows: per
/// window, its distinct columns / 16 rounded up. O(nnz) with a stamp per column when the columns are not
/// many more than the entries, else a sort per window (so a matrix of 2^31 columns does not cost 8 GB here).
pub fn count_blocks(cols: usize, indptr: &[usize], indices: &[usize], rows_per_window: usize) -> usize {
    let rows = indptr.len().saturating_sub(1);
    let windows = rows.div_ceil(rows_per_window);
    let window = |w: usize| &indices[indptr[w * rows_per_window]..indptr[((w + 1) * rows_per_window).min(rows)]];
    if !stamps_fit(cols, indices.len()) {
        let mut union = Vec::new();
        return (0..windows)
            .map(|w| {
                union.clear();
                union.extend_from_slice(window(w));
                union.sort_unstable();
                union.dedup();
                union.len().div_ceil(SLOTS)
            })
            .sum();
    }
    let mut stamp = vec![u32::MAX; cols];
    let mut blocks = 0;
    for w in 0..windows {
        let mut distinct = 0usize;
        for &c in window(w) {
            if stamp[c] != w as u32 {
                stamp[c] = w as u32;
                distinct += 1;
            }
        }
        blocks += distinct.div_ceil(SLOTS);
    }
    blocks
}

/// Whether the block counts keep a stamp per column ([`count_blocks`], [`BlockCounts::of`]): where the columns are
/// not many more than the `entries`.
fn stamps_fit(cols: usize, entries: usize) -> bool {
    cols <= 8 * entries + 4096
}

/// Where n is not a multiple of 8, [`select_tensor_core`] takes the tensor cores (B and C padded to
/// [`padded_n`] columns around the product, two more launches) only for n > 32 and at least this many
/// multiply-adds (nnz x padded n), and then as its rules say at the padded n. Measured on the H100 (NOTES.md,
/// "SpMM step 34"; f16 and bf16, the 20 real matrices at n = 20-300 and 26 pruned and weight-like shapes at n =
/// 100, 300 and 1001, where those rules at the padded n chose the tensor cores): under 12 million multiply-adds
/// the padded tensor cores were slower than the tiles on 196 of 204 problems (0.26x-1.17x of their speed; 12 us
/// or more against 5-10 us on the small ones), from 12 million faster on 83 of 88 (0.85x-3.6x); at n <= 32 (the
/// rule for thin products) 0.15x-1.11x. In f32 the rules chose them only from 43 million (1.21x-2.35x).
pub const PADDED_MIN_WORK: usize = 12_000_000;

/// (k-block, 64-column slice) pairs from which the wide windows beat the narrow ones on fewer than 1024 rows
/// with blocks at least 8% full (NOTES.md, "SpMM step 23": 3072-3840 pairs always narrow, 4608 split 1.13x /
/// 0.93x / 0.95x between three shapes, 4704-5600 wide by up to 1.24x or level, 6144 and more always wide).
pub const FEW_ROWS_WIDE_PAIRS: usize = 4800;

/// The tensor-core variant for a product C (m x n) = A * B whose A has `nnz` entries in `counts`
/// k-blocks ([`BlockCounts::of`]), or None where the CUDA-core tiles are faster. Pure; each branch from the
/// H100 runs in NOTES.md ("SpMM step 7: 64-row windows" and "step 6: tensor cores"):
/// - the 64-row windows (wide) where A has at least 1024 rows, its 64-row blocks are at least 15% full (8% when
///   n >= 256 or C has 2^19 elements), and the launch has at least 128 blocks with 64 columns (windows x
///   column slices x k-block ranges): uniform 4096^2 at 50% and 80% at every n (f16 80%, n = 128: 0.041 vs
///   0.064 ms; n = 4096: 0.63 vs 1.79 ms), 90% (10% full) at n = 256 (0.061 vs 0.070 ms), 4096 (0.63 vs
///   0.96 ms) and, since step 8's pipelined kernel, 128 (0.0361 vs 0.0408 ms bf16, 0.0365 vs 0.0370 ms f16),
///   8192 x 2048 at 90%, n = 128 (0.040 vs 0.045 ms, bf16 0.040 vs 0.047 ms), the pruned 1536 x 384 at
///   n = 1024 (70%: 0.017 vs 0.025 ms; 90%: 0.017 vs 0.021 ms); not the 384-row weights (six windows: 0.013
///   vs 0.007 ms). 128 columns per block when that still makes 256 blocks (uniform, n = 128: 0.051 vs 0.053
///   ms), else 64 (1536 x 384, n = 1024: 0.017 vs 0.020 ms); and 64 where 128 makes fewer than
///   `SPLIT_BELOW_BLOCKS` (264) blocks before the split into ranges and 64 makes that many, so that 64 needs no
///   split, in waves of 264 at least three quarters busy (step 42, both types, 8-14% full: 512 blocks of 64
///   columns against 256 of 128 in two ranges, uniform 8192 x 2048, n = 256, 53.3-54.6 vs 62.8-65.2 us; 16384 x
///   1024, n = 128, 33.9-35.1 vs 41.1-42.6 us; 2048 x 8192, n = 1024, 177.9-181.1 vs 191.8-196.8 us; 2048 x 6144,
///   n = 1024, 135.5-137.9 vs 153.3-154.4 us; but 384 blocks of 64, 1.45 waves, against 192 of 128 lose:
///   12288 x 1536, n = 128, 0.90x-0.92x, 6144 x 2048, n = 256, 0.87x-0.90x, 1536 x 12288, n = 1024, 0.81x-0.82x;
///   where both widths split, 128 columns stay faster: 4096^2, n = 256, 46.3-47.2 vs 53.8-54.9 us). C counts as
///   large from [`HALF_WIDE_PAIRS`] (k-block, 64-column slice) pairs at n >= 128;
/// - the wide windows on fewer rows too, where n >= 512 (the range measured), their blocks are at least 8% full
///   (as above for a large C) and there are at least [`FEW_ROWS_WIDE_PAIRS`] (k-block, 64-column slice) pairs:
///   since the split ranges are added in clusters (step 9) they beat the narrow windows and the tiles there
///   (NOTES.md, "SpMM step 23", four sweeps of pruned 128-992 rows at 50-95% sparsity, f16 and bf16: 1.35x-1.51x
///   on geometric mean where the rule moves a problem, 0.97x at worst; the pruned 384 x 1536 at 70%, n = 1024,
///   16.4 vs 18.7 us; at 90% a tie; at 98%, 2% full, the narrow windows are 1.46x faster);
/// - the narrow windows below instead of the wide ones where A's rows share their columns in blocks, so that the
///   16-row windows are much fuller than the 64-row ones (`narrow_windows_fuller`);
/// - else the 16-row windows (narrow) where their blocks are at least a quarter full (f16; a fifth for bf16,
///   whose CUDA-core tiles are slower) or C is small (m * n < 2^19, where the tiles leave most of the GPU idle):
///   the pruned 384 x 384 and 384 x 1536 weights at n = 256 and 1024 and 1536 x 384 at n = 256 win at 7-30%
///   full (384 x 1536 at 98%, n = 256: 0.008 vs 0.013 ms); 64 columns per warp when n > 32 and that still
///   makes at least 128 blocks (one per SM), else 32 (384 x 1536, n = 256, 96 blocks: 0.014 vs 0.016 ms); and
///   where n <= 32 and the blocks are at least 8% full (step 8: the graphs at n = 32, 8-10% full, 32 columns
///   per warp: email-Enron 0.0159 vs 0.0171 ms f16, 0.0161 vs 0.0186 ms bf16; copter2 0.0166 vs 0.0185 and
///   0.0199 ms), where the CUDA-core tiles do little work per gathered entry;
/// - f32 (3xTF32): the wide kernel where its blocks are at least 40% full, or 18-25% full with enough work
///   (NOTES.md "SpMM steps 10 and 11"; `select_tf32x3`);
/// - n not a multiple of 8: the rules above at [`padded_n`]`(n)`, for n > 32 and from [`PADDED_MIN_WORK`]
///   multiply-adds only (the product runs on padded copies of B and C).
///
/// This is the choice on a device that runs the warpgroup-mma f32 kernel (an H100);
/// [`select_tensor_core_with`] makes it for one that may not.
pub fn select_tensor_core(
    dtype: DType,
    m: usize,
    n: usize,
    nnz: usize,
    counts: BlockCounts,
) -> Option<TensorCoreConfig> {
    select_tensor_core_with(dtype, m, n, nnz, counts, true)
}

/// The 32-row windows are at least this share of the 16-row windows' fill and ...
pub const MID_FILL_OF_NARROW: f64 = 0.9;
/// ... at least this many times the 64-row windows' fill where [`mid_windows`] takes them.
pub const MID_FILL_OVER_WIDE: f64 = 1.5;

/// Where the choice is the 64-row windows (`config`), the 32-row ones ([`MID_WINDOW`]) when A's rows share their
/// columns in runs of 32: the 32-row windows are about as full as the 16-row ones ([`MID_FILL_OF_NARROW`]) and
/// much fuller than the 64-row ones ([`MID_FILL_OVER_WIDE`]), as 32 x 32 and 32 x 16 blocks make them (100%, 100%
/// and 51-57% full). The 64-row windows gather each B tile once for 64 rows but multiply half their slots by
/// zeros; the 32-row ones gather it for 32 rows at full blocks. 128 columns per block in f16/bf16 from n = 256,
/// else the 64-row choice's width; f32 64 columns (its one 32-row kernel). Pure.
///
/// Measured on the H200 (NOTES.md, "SpMM step 85"; block-sparse matrices of 768-10240 rows in 32 x 32 and 32 x 16
/// blocks at 5% and 20%, n = 128 and 1024, every tensor-core kernel timed): where the choice had been the 64-row
/// windows, the rule's 32-row kernel took 0.921x of its time in f16 (28 problems, 0.77x-1.09x, 3 slower: 3072 x 768
/// at n = 1024), 0.917x in bf16 (2 slower) and 0.856x in f32 (26, 0.68x-1.02x; the choice had been the wgmma
/// kernel). Where the choice was the 16-row windows it stays: the 32-row ones were 1.2x-1.5x slower there (small
/// grids at n = 128). Held out (36 fresh matrices in 32 x 32, 32 x 16, 32 x 64 and 64 x 32 blocks at 3-30%, n = 256
/// and 768): 0.935x of the time in f16 over the 59 problems it moved (0.82x-1.15x, 12 slower, 5 by more than 3%),
/// 0.934x in bf16 (59, 12 slower, 3 by more than 3%), 0.839x in f32 (51, 0.64x-1.01x, one slower by 1%).
pub fn mid_windows(config: &TensorCoreConfig, n: usize, nnz: usize, counts: BlockCounts) -> Option<TensorCoreConfig> {
    if config.window as usize != WIDE_WINDOW || counts.mid == 0 {
        return None;
    }
    let mid = counts.fill(MID_WINDOW, nnz);
    let runs_of_32 = mid >= MID_FILL_OF_NARROW * counts.fill(WINDOW, nnz)
        && mid >= MID_FILL_OVER_WIDE * counts.fill(WIDE_WINDOW, nnz);
    if !runs_of_32 {
        return None;
    }
    let tiles_n = match config.dtype {
        DType::F32 => 8,
        _ if n >= 256 => 16,
        _ => config.tiles_n,
    };
    Some(TensorCoreConfig { dtype: config.dtype, window: MID_WINDOW as u32, tiles_n })
}

/// Whether `info`'s device runs the warpgroup-mma f32 kernel (`spmm_tc_f32_w64_n16`): compute capability 9.0,
/// with the sm_90a family built.
pub fn wgmma_runs_on(info: &crate::gpu::DeviceInfo) -> bool {
    SM90A_BUILT && info.compute_capability == (9, 0)
}

/// [`select_tensor_core`] on a device with (`wgmma`) or without the warpgroup-mma f32 kernel. Without it, f32 takes
/// the mma.sync kernel where that kernel's own rules say it wins, and not at the lower fills where only the wgmma
/// kernel beats the tiles (`wgmma_wins`). Pure.
pub fn select_tensor_core_with(
    dtype: DType,
    m: usize,
    n: usize,
    nnz: usize,
    counts: BlockCounts,
    wgmma: bool,
) -> Option<TensorCoreConfig> {
    select_tensor_core_rows(dtype, m, n, nnz, counts, wgmma, false)
}

/// [`select_tensor_core_with`] knowing whether A's rows are uneven in the sense of
/// [`crate::spmm::select::uneven_rows_half`] (f16/bf16 power-law rows, neither skewed nor long for their mean).
/// Such rows keep a tile's subwarps waiting on their longest rows, and the windows take them in more places
/// (NOTES.md, "SpMM step 55"): the 16-row windows where C has at most 2^20 elements at n = 64-1024 (not only
/// below 2^19; n = 64 since step 56), and the 64-row windows from 7% full where C has at least 2^20 elements (not 8%).
pub(crate) fn select_tensor_core_rows(
    dtype: DType,
    m: usize,
    n: usize,
    nnz: usize,
    counts: BlockCounts,
    wgmma: bool,
    uneven: bool,
) -> Option<TensorCoreConfig> {
    if n == 0 || counts.narrow == 0 {
        return None;
    }
    // n not a multiple of 8: the rules below at the padded n, where the product is large enough to pay for the
    // padding's two launches, and never for n <= 32 (`PADDED_MIN_WORK`).
    let padded = padded_n(n);
    if padded != n && (n <= 32 || nnz.saturating_mul(padded) < PADDED_MIN_WORK) {
        return None;
    }
    let n = padded;
    let wide_windows = m.div_ceil(WIDE_WINDOW);
    let wide_fill = nnz as f64 / (counts.wide * WIDE_WINDOW * SLOTS) as f64;
    let min_fill = match dtype {
        DType::F16 => 0.25,
        DType::Bf16 => 0.2,
        DType::F32 => return select_tf32x3(m, n, nnz, wide_fill, counts.wide, wgmma),
        DType::F64 => return None,
    };
    let launch = |columns: usize| {
        let grid = wide_windows * n.div_ceil(columns);
        grid * wide_splits(dtype, grid, wide_windows, counts.wide)
    };
    let pairs = counts.wide_pairs(n);
    let large = n >= 256 || m.saturating_mul(n) >= 1 << 19 || (n >= 128 && pairs >= HALF_WIDE_PAIRS);
    // From n = 128, where step 55 measured it (at n = 64 the 16-row windows won, NOTES.md "SpMM step 56").
    let uneven_wide = uneven && n >= 128 && wide_fill >= UNEVEN_WIDE_FILL && m.saturating_mul(n) >= 1 << 20;
    let windows = m.div_ceil(WINDOW);
    let narrow = || {
        let tiles_n = if n > 32 && windows * n.div_ceil(64) >= 128 { 8 } else { 4 };
        TensorCoreConfig { dtype, window: WINDOW as u32, tiles_n }
    };
    // The wide windows' columns per block (in tiles of 8) where one of their two rules takes them.
    let wide_tiles_n =
        if m >= 1024 && (wide_fill >= 0.15 || (wide_fill >= 0.08 && large) || uneven_wide) && launch(64) >= 128 {
            // 128 columns per block where that makes 256 blocks, unless only the split into ranges makes them there
            // while 64 columns per block need none and keep three quarters of their waves busy (see the function's
            // documentation). Never at n <= 64, where a block of 128 columns leaves half its warps without columns.
            let grid = |columns: usize| wide_windows * n.div_ceil(columns);
            let unsplit_at_64 = grid(128) < SPLIT_BELOW_BLOCKS
                && grid(64) >= SPLIT_BELOW_BLOCKS
                && keeps_its_waves_busy(grid(64), SPLIT_BELOW_BLOCKS);
            Some(if n > 64 && launch(128) >= 256 && !unsplit_at_64 { 16 } else { 8 })
        } else if m < 1024 && n >= 512 && wide_fill >= 0.08 && pairs >= FEW_ROWS_WIDE_PAIRS {
            Some(few_rows_wide_tiles_n(m, n))
        } else {
            None
        };
    if let Some(tiles_n) = wide_tiles_n {
        // Rows that share their columns in blocks take the narrow windows where those are much fuller.
        if narrow_windows_fuller(m, n, nnz, counts) {
            return Some(narrow());
        }
        return Some(TensorCoreConfig { dtype, window: WIDE_WINDOW as u32, tiles_n });
    }
    let fill = counts.narrow_fill(nnz);
    let small =
        m.saturating_mul(n) < 1 << 19 || (uneven && (64..=1024).contains(&n) && m.saturating_mul(n) <= UNEVEN_SMALL_C);
    let thin = n <= 32 && fill >= 0.08;
    if fill < min_fill && !small && !thin {
        return None;
    }
    Some(narrow())
}

/// f16/bf16 ([`select_tensor_core_rows`]): the 16-row windows instead of the 64-row ones at n = 128-2048 (n padded)
/// where their blocks are fuller by a factor: at least [`NARROW_FULLER`] at n = 128-256 (at n = 128 also from
/// [`NARROW_FULLER_AT_128`] where they hold at least 6 k-blocks per window on average), and from n = 257 at least
/// [`NARROW_FULLER_WIDE_N`] where they hold at least [`NARROW_FULLER_MIN_BLOCKS`] k-blocks per window or A has fewer
/// than 1024 rows. Rows that share their columns in blocks (block-sparse weights, `gen::block_sparse`) fill the
/// 16-row windows 1.3-3.9 times as much as the 64-row ones; on uniform rows the 64-row windows' own thresholds (8%
/// full and more) keep the factor under 1.4; banded rows reach 1.75-2.5 with 2-4 k-blocks per 16-row window, where
/// the 64-row windows stayed faster at n = 128 (the 16-row ones 1.03x-1.54x slower on 10 of 13 problems per type).
///
/// Measured on the H200 (NOTES.md, "SpMM step 80"; every variant, f16 and bf16, 60 block-sparse matrices of 768-4096
/// x 768-4096 in blocks of 4 x 4 to 32 x 32 and 1 x 8 at 3-30%, n = 128-2048; the 200 problems per type the library
/// gave the 64-row windows), alike in both types: where the rule moves a problem the 16-row windows took 0.63x-0.86x
/// of the time at n = 128 (12 problems), 0.63x-0.98x at n = 256 (14) and 0.61x-1.00x from n = 512 (37); at 1.6-2.4
/// times as full they took 0.76x-1.52x (1.09x on geometric mean, 79), and with 1.4-9.5 k-blocks per window in
/// 3072-4096 rows from n = 512 0.94x-1.24x (18). Held out (fresh matrices, the old choice timed in the same run): the
/// first form of the rule (2.6 times from n = 257, 1.75 at n = 128) was slower on 35 of the 78 problems between those
/// bounds and these; with these bounds, on 100 fresh matrices not used to set them, 0.80x of the time on all 169
/// problems per type it moved (0.56x-1.07x, 3 slower), 3.8x -> 4.7x of cuSPARSE's speed in f16, 4.1x -> 5.2x in bf16.
pub(crate) fn narrow_windows_fuller(m: usize, n: usize, nnz: usize, counts: BlockCounts) -> bool {
    if !(128..=2048).contains(&n) || counts.wide == 0 || nnz == 0 {
        return false;
    }
    let (narrow, wide) = (counts.narrow_fill(nnz), counts.fill(WIDE_WINDOW, nnz));
    let per_window = counts.narrow_per_window(m);
    if n > 256 {
        return narrow >= NARROW_FULLER_WIDE_N * wide && (m < 1024 || per_window >= NARROW_FULLER_MIN_BLOCKS);
    }
    narrow >= NARROW_FULLER * wide
        || (n <= 128 && narrow >= NARROW_FULLER_AT_128 * wide && per_window >= NARROW_FULLER_AT_128_MIN_BLOCKS)
}

/// [`narrow_windows_fuller`]: how many times fuller the 16-row windows must be than the 64-row ones at n = 128-256.
pub(crate) const NARROW_FULLER: f64 = 2.6;
/// [`narrow_windows_fuller`]: the same from n = 257.
pub(crate) const NARROW_FULLER_WIDE_N: f64 = 2.9;
/// [`narrow_windows_fuller`]: the same at n = 128 where the 16-row windows hold at least
/// [`NARROW_FULLER_AT_128_MIN_BLOCKS`] k-blocks each on average.
pub(crate) const NARROW_FULLER_AT_128: f64 = 2.2;
/// [`narrow_windows_fuller`]: k-blocks per 16-row window for [`NARROW_FULLER_AT_128`].
pub(crate) const NARROW_FULLER_AT_128_MIN_BLOCKS: f64 = 6.0;
/// [`narrow_windows_fuller`]: k-blocks per 16-row window from n = 257 where A has 1024 rows or more.
pub(crate) const NARROW_FULLER_MIN_BLOCKS: f64 = 12.0;

/// f16/bf16 on uneven rows ([`select_tensor_core_rows`]): the 16-row windows at n = 64-1024 where C has at most
/// this many elements, whatever their fill. Measured on the H100 (NOTES.md, "SpMM step 55"; every variant, f16 and
/// bf16, power-law 1024-8192 x 512-32768 at means of 4-40, cv 0.8-1.7, n = 128-1024): the windows (5.5-10% full)
/// beat the best tile by 1.13x-1.95x on all 38 such problems per type with at most 2^19 elements of C, and on 16 of
/// 19 with 2^20 (0.90x-1.71x), against 5 of 12 with 2^21 (0.72x-1.32x), where the tiles keep every SM busy and the
/// longest row no longer sets the time. n = 64 since step 56: power-law rows of 39 over k = 512 in 6000-16384 rows
/// (C of 2^18.6-2^20 elements), 1.59x-2.43x faster than the tile chosen before, in both types.
pub(crate) const UNEVEN_SMALL_C: usize = 1 << 20;

/// f16/bf16 on uneven rows ([`select_tensor_core_rows`]): the 64-row windows from this fill where C has at least
/// 2^20 elements. Measured on the H100 (NOTES.md, "SpMM step 55"; power-law 1024-8192 x 512 at a mean of 37-40,
/// 7.2-7.8% full, n = 128-1024): against the best tile, 1.29x-1.76x (f16) and 1.41x-1.89x (bf16) on the 10 problems
/// with 2^20 elements or more; the 16-row windows were faster below that.
pub(crate) const UNEVEN_WIDE_FILL: f64 = 0.07;

/// f16/bf16: the 64-row windows count C as large (8% full is enough, see [`select_tensor_core`]) at n >= 128
/// where A's wide k-blocks times n's 64-column slices reach this many, however few the elements of C: 2^15 less
/// 5%, since a uniform matrix at 8-10% leaves a window a few k-blocks short of all its columns (2048 x 8192:
/// 32634 and 32766 pairs at n = 128). Measured on the H100 (NOTES.md, "SpMM step 42"; every variant, medians of
/// 20 event-timed runs): uniform 2048 x 8192 at n = 128 (32 windows of up to 512 k-blocks, C of 2^18 elements)
/// at 8-14% the 64-row windows ran 33.0-33.7 us in both types against 43.8-53.9 us for the 16-row windows the
/// small C chose and 38.3-62.8 us for the best tile; through the library's choice, 1536 x 12288, 3072 x 8192 and
/// 1280 x 16384 at n = 128 and 8.5-13% (36,864-49,152 pairs) ran 1.31x-2.32x faster than on the 16-row windows.
/// (Uniform 2048 x 4096 at n = 128, 2^14 pairs, was not measured and keeps the 16-row windows.)
pub const HALF_WIDE_PAIRS: usize = 31_000;

/// The f32 (3xTF32) choice of [`select_tensor_core`]: the wide kernel where its 64-row blocks are at least 40%
/// full; at least a quarter full with at least 8192 (k-block, 64-column slice) pairs of work, or 2048 pairs when
/// A has at most 512 rows (the CUDA-core tiles spread over rows, and so few leave them short of warps); or at
/// least 18% full (80% sparsity is 20%) with at least 2^15 pairs. Its time is that of the dense blocks, whatever
/// their fill (H100, NOTES.md "SpMM step 11": uniform 4096^2, n = 4096, 2.29 ms at 50% and 2.23 ms at 80%
/// sparsity), against the CUDA-core tiles' time in proportion to nnz. Measured (step 11): 50% full wins at
/// every n (uniform 4096^2, n = 128: 0.091 vs 0.2 ms); 30% full (the pruned weights at 70%) wins at n = 1024
/// on 1536 x 384 and 384 x 1536 (9216 pairs: 0.029 vs 0.046 ms, 0.037 vs 0.052 ms) and with 2304 pairs on the
/// 384-row ones (384 x 384, n = 1024: 0.0170 vs 0.0181 ms; 384 x 1536, n = 256: 0.0184 vs 0.0220 ms), not on
/// 1536 x 384 at n = 256 (2304 pairs, 1536 rows: 0.0170 vs 0.0149 ms) nor with 576 pairs (384 x 384, n = 256:
/// 0.0167 vs 0.0100 ms); 20% full (uniform 80%) wins from 2^15 pairs: 8192 x 2048, n = 128 0.084 vs 0.104 ms,
/// 4096^2 n = 128 0.090 vs 0.101 ms, n = 256 0.155 vs 0.198 ms, n = 4096 2.23 vs 2.99 ms; 10% full (90%) loses
/// (8192 x 2048, n = 128: 0.084 vs 0.059 ms; the tiles' time falls with nnz, so the break-even is near 14% full,
/// where nothing was measured). `SpmmKernel::select` asks the row-split tiles first, and they take few rows at a
/// small n from the tensor cores (384 x 1536 at 70%, n = 256: 16.3 vs 18.8 us; NOTES.md, "SpMM step 29").
///
/// Below [`F32_MIN_WORK`] entries times columns (at n <= 32, that product times the fill below
/// [`F32_THIN_MIN_WORK`]) the tiles win at any fill, and at n <= 64 the mma.sync kernel's 64-column blocks beat the
/// wgmma kernel's 128 ([`F32_WGMMA_MIN_N`]).
fn select_tf32x3(
    m: usize,
    n: usize,
    nnz: usize,
    wide_fill: f64,
    wide_blocks: usize,
    wgmma_built: bool,
) -> Option<TensorCoreConfig> {
    let work = wide_blocks * n.div_ceil(64);
    let quarter_work = if m <= 512 { 2048 } else { 8192 };
    let windows = m.div_ceil(WIDE_WINDOW);
    let grid = windows * n.div_ceil(128);
    let wgmma = wgmma_built
        && grid >= WGMMA_MIN_GRID
        && (wide_blocks >= WGMMA_MIN_WINDOW_BLOCKS * windows || grid >= WGMMA_SHORT_MIN_GRID);
    let product = nnz.saturating_mul(n);
    let enough = if n <= 32 { product as f64 * wide_fill >= F32_THIN_MIN_WORK as f64 } else { product >= F32_MIN_WORK };
    let wins = enough
        && (wide_fill >= 0.4
            || (wide_fill >= 0.25 && work >= quarter_work)
            || (wide_fill >= 0.18 && work >= 1 << 15)
            || (wgmma && wgmma_wins(n, wide_fill, work, grid * wgmma_splits(grid, windows, wide_blocks))));
    // Whether the windows win is asked of the wgmma kernel as above; once they do, it also runs the shorter windows
    // of a launch of at least `WGMMA_SHORT_TILES_MIN_GRID` blocks from n = `WGMMA_SHORT_TILES_MIN_N`.
    let wgmma_tiles = wgmma || (wgmma_built && grid >= WGMMA_SHORT_TILES_MIN_GRID && n >= WGMMA_SHORT_TILES_MIN_N);
    let tiles_n = if wgmma_tiles && n >= F32_WGMMA_MIN_N { 16 } else { 8 };
    wins.then_some(TensorCoreConfig { dtype: DType::F32, window: WIDE_WINDOW as u32, tiles_n })
}

/// f32 takes the tensor cores only from this many entries times columns of B (nnz x n, n padded): below it the
/// windows' fixed costs (8.6 us for the smallest launch, against 5-7 us for a tile) outweigh their speed, at any
/// fill. Measured on the H200 (NOTES.md, "SpMM step 76"; every f32 variant on the 39 shapes of two sets whose choice
/// was the windows at some n, 13-93% full, n = 32-1024, against the tile the selection takes without the tensor
/// cores; held out: 1.34x on the 24 of 96 problems the rules moved): below 2^24 the tile won
/// on 9 of 11 problems at n = 64-256 (1.06x-1.55x; banded 1004 x 413 at 74%, n = 128: 13.2 -> 8.5 us) and lost on 2
/// (0.83x on banded 35465 x 2385 at 61%, rows of 7, n = 64; 0.91x); from 2^24 to 2^25 the two went both ways
/// (0.76x-1.57x on 19).
pub const F32_MIN_WORK: usize = 1 << 24;

/// At n <= 32 (n padded), f32 takes the tensor cores only from this many entries times columns times the fill of
/// their 64-row windows: there the mma.sync kernel's blocks of 64 columns leave half their columns idle. Measured on
/// the H200 (NOTES.md, "SpMM step 76"; the runs of [`F32_MIN_WORK`], 20 problems at n = 32): below it the tile beat
/// the mma.sync windows on 14 of 16 (1.09x-1.62x; uniform 3496 x 351 at 49%: 15.0 -> 9.7 us), tied on one (1.00x)
/// and lost on one (0.97x); from it the windows won or tied on all 4 (their time 0.40x-1.01x of the tile's).
pub const F32_THIN_MIN_WORK: usize = 1 << 25;

/// f32 takes the warpgroup-mma kernel (128 columns per block) only from this n; below, the mma.sync one (64 columns).
/// Measured on the H200 (NOTES.md, "SpMM step 76"): where the wgmma kernel had been chosen, the mma.sync one ran
/// 0.99x-1.67x as fast at n = 32 (faster on 7 of 8; power-law 20762 x 325 at 42%: 41.8 -> 25.2 us) and 0.87x-1.60x
/// at n = 64 (faster on 6 of 8; the two slower ones in 26659 and 35465 rows).
pub const F32_WGMMA_MIN_N: usize = 65;

/// Where f32 takes the warpgroup-mma kernel, it also wins at a lower fill than `select_tf32x3`'s first rules
/// (measured on the mma.sync kernel, before the wgmma one ran 1.1-1.3x faster), for n >= 128: with at least 2^14
/// (k-block, 64-column slice) pairs where the fill times the share of its waves' slots that its launch keeps busy
/// (blocks of 128 columns times [`wgmma_splits`] ranges, `WGMMA_WAVE` at a time) is at least 13% at n < 256 and
/// 11.5% at n >= 256; and from 18% full with 8192 pairs. Its time depends on its waves, not on the fill; the tiles'
/// time grows with the fill.
///
/// Measured on the H100 (NOTES.md, "SpMM step 42"; every variant, medians of 20 event-timed runs; uniform 4096^2,
/// 8192 x 2048 and 2048 x 8192 at 11-19%, launches of 256 blocks, or 512 and 2048 at n = 1024 and 4096): at n = 128
/// the wgmma kernel takes 66.9-68.9 us at every fill, the best tile 54.8-57.2 us at 11%, 63.6-66.8 us at 13% and
/// 72.5-74.7 us at 15% (the break-even 13.1-14.1%); at n = 256 (4096^2) 118.7 us against 115.9 at 12% and 143.6 at
/// 15%; at n = 512 215.7-224.5 us against 205.8-211.3 at 11% and 238.4-245.7 at 13%; at n = 1024 and 4096 (4096^2,
/// 12%) 421.3 and 1640.0 us against 441.9 and 1738.0. The pruned 4096 x 1024 at 85% (15% full, 2^14 pairs at n =
/// 256) 39.6 vs 40.3 us, at n = 1024 113.0 vs 143.3 us; the pruned 1536 x 384 at 80% (20% full, 9216 pairs at n =
/// 1024) 25.9 vs 31.0 us, at 85% 25.9 vs 25.2 us, and with 2304 pairs (n = 256) 15.9 vs 10.9 us (too few).
///
/// Through the library's choice on fresh shapes (same step), where a launch leaves slots idle the kernel needs a
/// higher fill: 192 blocks (73% busy; 6144 x 3072 and 3072 x 6144 at n = 256 and 512) or 384 (1.45 waves, 73%;
/// 3072 x 6144 at n = 1024, 12288 x 2048 at n = 256) ran 0.79x-1.00x of the tile's speed at 12-13.5% full and
/// 1.04x-1.16x at 16%; 640 blocks (81%; 5120 x 4096 at n = 1024, 10240 x 2048 at n = 512) lost at 12.5%
/// (0.88x-0.93x) and won at 15% (1.04x-1.07x); 240 blocks (91%; 1536 x 8192, n = 256) lost at 12.5% (0.92x).
fn wgmma_wins(n: usize, wide_fill: f64, work: usize, launch_blocks: usize) -> bool {
    // Its blocks are 128 columns wide: nothing under n = 128 was measured.
    let fill = if n >= 256 { 0.115 } else { 0.13 };
    let busy = busy_share(launch_blocks, WGMMA_WAVE);
    n >= 128 && ((wide_fill * busy >= fill && work >= 1 << 14) || (wide_fill >= 0.18 && work >= 8192))
}

/// The share of the slots of its waves that a launch of `blocks`, run `wave` at a time, keeps busy: 256 of 264
/// 0.97, 192 0.73, 384 (two waves) 0.73, 640 (three) 0.81; 0 for no blocks.
fn busy_share(blocks: usize, wave: usize) -> f64 {
    if blocks == 0 || wave == 0 {
        return 0.0;
    }
    blocks as f64 / (blocks.div_ceil(wave) * wave) as f64
}

/// Whether `blocks`, run `wave` at a time, keep at least three quarters of the waves' slots busy: 240 or 256 of
/// 264 yes, 192 (one wave) or 384 (two) no.
fn keeps_its_waves_busy(blocks: usize, wave: usize) -> bool {
    blocks > 0 && blocks.saturating_mul(4) >= wave.saturating_mul(3).saturating_mul(blocks.div_ceil(wave))
}

/// Where f32 goes to the tensor cores, [`select_tensor_core`] takes the warpgroup-mma kernel
/// (`spmm_tc_f32_w64_n16`) over the mma.sync one when the launch has at least this many (window, 128-column
/// slice) blocks before any split, and either the windows have at least [`WGMMA_MIN_WINDOW_BLOCKS`] k-blocks each
/// on average or the launch has at least [`WGMMA_SHORT_MIN_GRID`] blocks
/// ([`SpmmKernel::select_for`](super::SpmmKernel::select_for) keeps the mma.sync one on devices without it).
/// Measured on the H100 (NOTES.md, "SpMM step 27"): uniform 4096^2 (64 windows of 256 k-blocks) at 50% and 80%,
/// n = 128: 0.077 vs 0.090 ms, n = 256: 0.141 vs 0.156 ms, n = 4096: 1.82 vs 2.22 ms; 8192 x 2048 at 80%, n = 128
/// (128 windows of 128): 0.077 vs 0.085 ms; the pruned 384 x 1536 at 70% (6 windows of 96), n = 1024 (48 blocks,
/// 5 ranges): 0.031 vs 0.037 ms, at n = 256 (12 blocks) 0.019 vs 0.019 ms; slower on windows of 24 k-blocks (k =
/// 384): 1536 x 384 at 70%, n = 1024 (192 blocks) 0.031 vs 0.029 ms, 384 x 384, n = 1024, 0.020 vs 0.016 ms. After
/// that step's review the wgmma kernel ran 9-17% faster, and 1536 x 384 moved to it ([`WGMMA_SHORT_MIN_GRID`]).
pub const WGMMA_MIN_GRID: usize = 32;
/// See [`WGMMA_MIN_GRID`].
pub const WGMMA_MIN_WINDOW_BLOCKS: usize = 64;
/// Windows shorter than [`WGMMA_MIN_WINDOW_BLOCKS`] still take the wgmma kernel when its launch has at least
/// this many blocks of 128 columns (about one per SM of an H100). Measured on the H100 (NOTES.md, "SpMM step
/// 28"; windows of 24-32 k-blocks, both kernels, medians of 30 event-timed runs): from 128 blocks the wgmma kernel
/// is 1.09-1.33x faster (uniform 1024 x 384 at 70%, n = 1024, 128 blocks: 20.5 vs 22.4 us; 4096 x 384 at 50%,
/// n = 256, 128 blocks: 20.5 vs 22.7 us; 2048 x 512 at 70%, n = 512, 128 blocks: 26.2 vs 28.6 us; 8448 x 384 at
/// 50%, n = 128, 132 blocks: 20.6 vs 23.1 us; the pruned 1536 x 384 at 70%, n = 1024, 192 blocks: 26.4 vs 29.2
/// us; 4096 x 384 at 70%, n = 1024, 512 blocks: 49.3 vs 65.8 us); on 48 blocks the mma.sync kernel, its two
/// ranges added in clusters, is faster (the pruned 384 x 384 at 70%, n = 1024: 16.0 vs 19.8 us). Nothing between
/// 48 and 128 blocks was measured.
pub const WGMMA_SHORT_MIN_GRID: usize = 128;

/// Where the f32 windows win (`select_tf32x3`), windows shorter than [`WGMMA_MIN_WINDOW_BLOCKS`] run on the wgmma
/// kernel from this many blocks of 128 columns at n >= [`WGMMA_SHORT_TILES_MIN_N`], not only from
/// [`WGMMA_SHORT_MIN_GRID`]; whether the windows win at all is still asked with that bound. Measured on the H200
/// (NOTES.md, "SpMM step 77"; every f32 variant on step 75's scan and step 76's sets, both kernels, windows of fewer
/// than 64 k-blocks on average where the choice was the mma.sync kernel): at 70-117 blocks the wgmma kernel ran
/// 0.80x-0.92x of the mma.sync one's time on 17 of 19 problems (banded 6555 x 7585 at 52%, n = 128, 103 blocks:
/// 12.2 -> 10.7 us) and 1.01x-1.06x on 2 (87 blocks); at 19-64 blocks it lost on all 19 (1.04x-1.55x). Nothing
/// between 65 and 69 was measured. Held out (same step; 32 fresh problems and the pruned 384 x 384 at 70%, n = 1536
/// and 2048, through the library's choice before and after): at n = 256-2048 1.08x faster over 29 (0.91x-1.13x;
/// banded 1186 x 12433, n = 512: 11.9 -> 10.5 us), at n = 96-128 0.96x over 5 (0.84x-1.09x), hence
/// [`WGMMA_SHORT_TILES_MIN_N`].
pub const WGMMA_SHORT_TILES_MIN_GRID: usize = 70;
/// See [`WGMMA_SHORT_TILES_MIN_GRID`]: at n = 96-128 (one block of 128 columns per window) the held-out problems
/// lost (banded 6022 x 2373 at 25%, n = 128, 95 blocks: 26.0 -> 30.4 us).
pub const WGMMA_SHORT_TILES_MIN_N: usize = 256;

/// f32 (3xTF32): the 16-row windows (`spmm_tc_f32_n4`, 32 columns per warp) at n = 128-2048 (n padded) where their
/// blocks are at least [`F32_NARROW_MIN_FILL`] full and hold at least [`F32_NARROW_MIN_BLOCKS`] k-blocks per window,
/// and either the product is small ([`F32_NARROW_SMALL_MAX_N`]: n <= 256, at most 4096 rows and 8192 pairs of the
/// 64-row windows' work, from 1.15 times their fill) or they are at least [`F32_NARROW_FULLER`] times as full as the
/// 64-row windows with 3 k-blocks per window or 90% full, or every window height is full and the windows short and
/// few at n <= 256 ([`F32_FULL_MIN_FILL`]); or None. Asked before the other rules. Pure.
///
/// Rows that share their columns in blocks (block-pruned weights, `gen::block_sparse`) fill the 16-row windows 2-4
/// times as much as the 64-row ones: 8 x 8 blocks about half, 16 x 16 and 32 x 32 blocks wholly, against 14-60% for the
/// 64-row windows; banded rows fill them 45-94%, 1.1-2.5 times. Where both heights are about as full, the 64-row
/// windows' reuse of each B row over four row tiles wins once the product is large (uniform 4096 x 4096 at 50%, n =
/// 128: 115 against 67.5 us); on small products the 16-row windows' four times as many blocks win. Uniform rows dense
/// enough to fill the 16-row windows 45% fill the 64-row ones as much (1.0-1.1 times measured).
///
/// Measured on the H200 (NOTES.md, "SpMM step 81"; every f32 variant). Set on step 80's 60 block-sparse matrices
/// (768-4096 x 768-4096, blocks of 4 x 4 to 32 x 32 and 1 x 8 at 3-30%, n = 128, 512, 2048), 79 banded and uniform
/// shapes of statsx `allsel` (n = 128-2048) and 44 block-sparse matrices of step 80's third held-out set (n = 128, 256,
/// 1024, 2048): where the rule moves a problem (235) the 16-row windows took 0.707x of the chosen kernel's time on
/// geometric mean (0.36x-1.15x, 3 slower; 32 x 32 blocks on 1024 x 4096 at 5%, n = 128: 22.9 -> 8.4 us, from the 64-row
/// windows). Held out (fresh: 76 block-sparse matrices of step 80's first held-out set at n = 128-1024, and the 31
/// banded shapes the rule moves at n = 256; the old library and the new one in the same run): block-sparse 0.663x of
/// the time on 209 problems (0.42x-1.003x, one slower), 2.06x -> 3.10x of cuSPARSE; banded 0.834x on 31 (0.55x-1.13x, 3
/// slower).
pub(crate) fn f32_narrow_windows(m: usize, n: usize, nnz: usize, counts: BlockCounts) -> Option<TensorCoreConfig> {
    let padded = padded_n(n);
    if padded != n && nnz.saturating_mul(padded) < PADDED_MIN_WORK {
        return None;
    }
    if !(128..=2048).contains(&padded) || counts.narrow == 0 || counts.wide == 0 || m == 0 {
        return None;
    }
    let (narrow, wide) = (counts.narrow_fill(nnz), counts.fill(WIDE_WINDOW, nnz));
    let per_window = counts.narrow_per_window(m);
    if narrow < F32_NARROW_MIN_FILL || per_window < F32_NARROW_MIN_BLOCKS {
        return None;
    }
    let small = padded <= F32_NARROW_SMALL_MAX_N
        && m <= F32_NARROW_SMALL_MAX_ROWS
        && counts.wide_pairs(padded) <= F32_NARROW_SMALL_MAX_PAIRS
        && narrow >= F32_NARROW_SMALL_FULLER * wide;
    let fuller = narrow >= F32_NARROW_FULLER * wide
        && (per_window >= F32_NARROW_FULLER_MIN_BLOCKS || narrow >= F32_NARROW_FULLER_FULL);
    let full = padded <= F32_FULL_MAX_N
        && wide >= F32_FULL_MIN_FILL
        && per_window <= F32_FULL_MAX_BLOCKS
        && m.div_ceil(WIDE_WINDOW) * padded.div_ceil(128) <= F32_FULL_MAX_WIDE_GRID;
    (small || fuller || full).then_some(TensorCoreConfig { dtype: DType::F32, window: WINDOW as u32, tiles_n: 4 })
}

/// [`f32_narrow_windows`] on windows that every height fills (64 x 64, 128 x 128, 64 x 32 and 64 x 128 blocks: the
/// 64-row windows at least this full) at n <= [`F32_FULL_MAX_N`] (padded): the 16-row windows where they hold at most
/// [`F32_FULL_MAX_BLOCKS`] k-blocks per window and the 64-row launch would have at most [`F32_FULL_MAX_WIDE_GRID`]
/// blocks of 128 columns (under one per SM of an H100 or H200). There the 64-row windows' reuse of each B tile over
/// four row tiles buys less than the 16-row windows' four times as many blocks and shorter chains.
///
/// Measured on the H200 (NOTES.md, "SpMM step 86"; every f32 tensor-core kernel on 36 block-sparse matrices of
/// 1024-12288 rows in 64 x 64 blocks at 5-40% and 128 x 128, 64 x 32 and 64 x 128 blocks at 10%, and step 85's 64 x 64
/// calibration matrices, n = 128 and 256): where the choice had been the 64-row windows on windows at least 90% full
/// (78 problems), the 16-row windows took 0.699x of its time on the 41 within these bounds (3 slower, by up to 1.04x;
/// 128 x 128 blocks on 2048 x 2048 at 10%, n = 128: 24.0 -> 12.1 us); past them they lost on 13 of 37, by up to 1.42x
/// (64 x 32 blocks on 12288 x 1024, n = 256: 192 blocks of the 64-row launch). Held out (38 fresh matrices in 64 x 64,
/// 128 x 128, 64 x 32 and 96 x 96 blocks at 3-30% and two near-dense uniform ones, n = 128, 200 and 256): 0.746x of
/// the time on the 54 problems moved (0.40x-1.13x, 4 slower, the worst two near-dense 2048 x 384 at n = 200 and 256),
/// 2.18x -> 2.92x of cuSPARSE.
pub(crate) const F32_FULL_MIN_FILL: f64 = 0.9;
/// See [`F32_FULL_MIN_FILL`].
pub(crate) const F32_FULL_MAX_N: usize = 256;
/// See [`F32_FULL_MIN_FILL`].
pub(crate) const F32_FULL_MAX_BLOCKS: f64 = 32.0;
/// See [`F32_FULL_MIN_FILL`].
pub(crate) const F32_FULL_MAX_WIDE_GRID: usize = 128;

/// [`f32_narrow_windows`]: the 16-row windows' least fill (8 x 8 blocks at 3-5% leave them 48-51% full; 4 x 4 blocks
/// at 10-30%, which they lost, 29-39%).
pub(crate) const F32_NARROW_MIN_FILL: f64 = 0.45;
/// [`f32_narrow_windows`]: how many times fuller than the 64-row windows the 16-row ones must be on larger products
/// than [`F32_NARROW_SMALL_MAX_N`]'s (8 x 8 blocks are 2.2-3.4 times, 16 x 16 blocks 2.9-3.9, 32 x 32 blocks
/// 1.65-2.0), with [`F32_NARROW_FULLER_MIN_BLOCKS`] k-blocks per window or [`F32_NARROW_FULLER_FULL`] full.
pub(crate) const F32_NARROW_FULLER: f64 = 2.2;
/// See [`F32_NARROW_FULLER`]: banded rows of 15 in two k-blocks per window, 47% full and 2.5 times, lost 1.10x-1.21x
/// from n = 384; block-sparse windows with 1.4-2.5 k-blocks, wholly full, tied or won.
pub(crate) const F32_NARROW_FULLER_MIN_BLOCKS: f64 = 3.0;
/// See [`F32_NARROW_FULLER_MIN_BLOCKS`].
pub(crate) const F32_NARROW_FULLER_FULL: f64 = 0.9;
/// [`f32_narrow_windows`]: the fewest k-blocks per 16-row window on average (windows of empty rows count).
pub(crate) const F32_NARROW_MIN_BLOCKS: f64 = 1.25;
/// [`f32_narrow_windows`]: up to this n (padded), [`F32_NARROW_SMALL_MAX_ROWS`] rows and
/// [`F32_NARROW_SMALL_MAX_PAIRS`] (k-block, 64-column slice) pairs of the 64-row windows' work, the 16-row windows
/// from [`F32_NARROW_SMALL_FULLER`] times as full.
pub(crate) const F32_NARROW_SMALL_MAX_N: usize = 256;
/// See [`F32_NARROW_SMALL_MAX_N`].
pub(crate) const F32_NARROW_SMALL_MAX_ROWS: usize = 4096;
/// See [`F32_NARROW_SMALL_MAX_N`].
pub(crate) const F32_NARROW_SMALL_MAX_PAIRS: usize = 8192;
/// See [`F32_NARROW_SMALL_MAX_N`]: rows as full in both window heights (uniform rows at 50%, 64 x 64 blocks) went both
/// ways (0.47x-1.16x), and uniform 4096 x 4096 at 50% ran 1.7 times as long on the 16-row windows at n = 128.
pub(crate) const F32_NARROW_SMALL_FULLER: f64 = 1.15;

/// The 64-row windows on few uneven rows ([`UNEVEN_FEW_ROWS`] rows over k = [`UNEVEN_FEW_ROWS_K`], cv 0.5-1.2; in f32
/// the cv of the rows that are not empty), or None; checked before the other rules. Pure.
///
/// f32 (3xTF32): at n = 128-1024 (a multiple of 128), from [`UNEVEN_FEW_ROWS_FILL`] full ([`UNEVEN_FEW_ROWS_WIDE_FILL`]
/// at n >= 384 where the wgmma kernel runs), whatever the work; where `select_tf32x3` already takes the windows, its
/// kernel, otherwise the wgmma kernel at n >= 256 where its launch, split into ranges ([`wgmma_splits`]), has at least
/// [`WGMMA_SHORT_MIN_GRID`] blocks, else the mma.sync one.
///
/// Such rows are a launch of a few thousand warps at most whose longest row, often a dense one, sets the tiles'
/// time; the windows' blocks are as full as the matrix is dense, and their ranges cut the long rows. Measured on
/// the H200 (NOTES.md, "SpMM step 78"; every f32 variant on 40 fresh power-law matrices of 258-1049 rows over
/// k = 1052-8122, means 33-780, and 10 of step 77, at n = 128, 256, 512, 1024): from 12% full at n = 128-256 the
/// windows took 0.39x-0.98x of the chosen tile's time on all 21 such problems (870 x 3042, rows of 410, n = 128: 59.9
/// -> 23.2 us; the tile had run 0.51x-1.43x of cuSPARSE's speed), 0.82x-1.24x at 9.6-9.7% and 0.68x-0.88x at 11.9%;
/// from 9% at n = 512-1024, where a tile was chosen, 0.43x-0.96x on all 15 (the tile 0.74x-1.44x of cuSPARSE), and
/// 0.74x-1.16x at 6.5-8.5%. From n = 256 the wgmma kernel took 0.63x-1.04x of the mma.sync one's time where its launch
/// had 128 blocks or more (faster on 33 of 34) and 1.04x-1.30x below (all 8). Even rows in few rows keep the tiles:
/// step 11 measured them faster at 30% full; so do even rows some of which are empty, whose cv over all rows is 0.6-1.2
/// (`u6.sh`: 16 uniform, banded and pruned matrices of 309-973 rows, 28-59% of them emptied: on the cv of all rows the
/// windows took 0.77x-1.75x of the tile's time on 28 problems, 1.15x on geometric mean).
///
/// f16/bf16, at n = 128 and 256: 64 columns per block, where the windows' blocks are at least 8% full and there are
/// at least [`UNEVEN_FEW_ROWS_HALF_PAIRS`] (k-block, 64-column slice) pairs. On fewer rows [`select_tensor_core`]
/// takes them only from n = 512 ([`FEW_ROWS_WIDE_PAIRS`], measured on pruned rows); on these rows they beat the
/// 16-row windows and the tiles at n = 128-256 too.
///
/// Measured on the H200 (NOTES.md, "SpMM step 78"; every f16 and bf16 variant on step 78's 40 calibration matrices):
/// on the 19 problems per type with at least 2900 pairs the 64-row windows took 0.55x-1.01x of the chosen kernel's
/// time (0.79x on geometric mean in both types; f16 757 x 6096, rows of 739, n = 256: 41.5 -> 22.8 us, from the
/// k = 8 tile; 870 x 3042, n = 256: 24.0 -> 16.9 us, from the 16-row windows); with 660-2304 pairs 0.92x-1.31x.
#[allow(clippy::too_many_arguments)]
pub(crate) fn uneven_few_rows_windows(
    dtype: DType,
    m: usize,
    k: usize,
    n: usize,
    nnz: usize,
    stats: &crate::csr::RowStats,
    counts: BlockCounts,
    wgmma: bool,
) -> Option<TensorCoreConfig> {
    // f32: the length variation of the rows A stores something in, so that even rows some of which are empty are not
    // taken for uneven ones (f16/bf16 gained on those too).
    let cv = match dtype {
        DType::F32 => super::select::nonempty_rows(m, stats).1.cv,
        _ => stats.cv,
    };
    if !uneven_few_rows(m, k, cv) || counts.wide == 0 {
        return None;
    }
    let wide_fill = counts.fill(WIDE_WINDOW, nnz);
    let wide = |tiles_n: u32| TensorCoreConfig { dtype, window: WIDE_WINDOW as u32, tiles_n };
    match dtype {
        DType::F32 => {
            let from = if wgmma && n >= 384 { UNEVEN_FEW_ROWS_WIDE_FILL } else { UNEVEN_FEW_ROWS_FILL };
            if !(128..=1024).contains(&n) || n % 128 != 0 || wide_fill < from {
                return None;
            }
            if let Some(config) = select_tf32x3(m, n, nnz, wide_fill, counts.wide, wgmma) {
                return Some(config);
            }
            let windows = m.div_ceil(WIDE_WINDOW);
            let grid = windows * n.div_ceil(128);
            let launch = grid * wgmma_splits(grid, windows, counts.wide);
            Some(wide(if wgmma && n >= 256 && launch >= WGMMA_SHORT_MIN_GRID { 16 } else { 8 }))
        }
        DType::F16 | DType::Bf16 => {
            let pairs = counts.wide_pairs(n);
            let takes = (n == 128 || n == 256) && wide_fill >= 0.08 && pairs >= UNEVEN_FEW_ROWS_HALF_PAIRS;
            takes.then(|| wide(8))
        }
        DType::F64 => None,
    }
}

/// See [`uneven_few_rows_windows`].
pub(crate) const UNEVEN_FEW_ROWS_HALF_PAIRS: usize = 2900;

/// f16/bf16 uneven rows ([`UNEVEN_WIDE_N_CV`]) in [`UNEVEN_WIDE_N_ROWS`] rows at n = 1024-2048 (a multiple of 64;
/// the widths measured were multiples of 256, and a width the windows must pad is left to [`select_tensor_core`]):
/// the 64-row windows from [`UNEVEN_WIDE_N_FILL`] full with at least [`FEW_ROWS_WIDE_PAIRS`] (k-block, 64-column
/// slice) pairs, where [`select_tensor_core`] asks 8% (set on pruned rows, whose lengths are even), as many columns
/// per block as its rule for fewer rows gives them ([`few_rows_wide_tiles_n`]). Checked before the tiles' rules, as
/// [`uneven_few_rows_windows`] is.
///
/// Measured on the H200 (NOTES.md, "SpMM step 79"; every f16 and bf16 variant on 40 matrices of 388-974 rows over k =
/// 1325-7777, 24 power-law and 16 `scaled-SIGMA` weight-like ones, row cv 0.89-1.96, at n = 1024, 1536 and 2048): from
/// 5% full the windows took 0.38x-1.02x of the chosen kernel's time (the k = 8 tile, a warp per row or the 16-row
/// windows; 0.70x f16 and 0.67x bf16 on geometric mean over 33 problems per type), at 4.5-5% 0.46x-1.22x (3-4 of 27 per
/// type slower), under 4% slower on 28 of 30. Held out (26 fresh matrices, f16 at n = 1024, 1536, 2048, bf16 at 1280
/// and 1792): 1.55x faster on the 35 scaled problems (1.11x-2.82x) and 1.22x on the 20 power-law ones (0.95x-1.86x),
/// but even rows lost, which is why the cv bound: uniform rows 0.76x-1.93x (15 of 40 slower), pruned rows 0.83x-1.65x
/// (10 of 35 slower). Held out again with that bound (36 fresh matrices; uniform and pruned rows with 30-60% of them
/// emptied): 1.38x on the 110 problems it moves (0.87x-3.62x; scaled 1.61x, power-law 1.29x, emptied uniform rows
/// 1.19x, emptied pruned rows 1.06x), 5 slower; on the emptied rows it leaves (cv 0.67-0.82) the windows would have
/// run 0.71x-1.27x of the choice's time (0.97x on geometric mean over 65).
pub(crate) fn uneven_few_rows_wide_n(
    dtype: DType,
    m: usize,
    n: usize,
    nnz: usize,
    stats: &crate::csr::RowStats,
    counts: BlockCounts,
) -> Option<TensorCoreConfig> {
    let takes = matches!(dtype, DType::F16 | DType::Bf16)
        && UNEVEN_WIDE_N_ROWS.contains(&m)
        && (1024..=2048).contains(&n)
        && n % 64 == 0
        && UNEVEN_WIDE_N_CV.contains(&stats.cv)
        && counts.wide > 0
        && counts.fill(WIDE_WINDOW, nnz) >= UNEVEN_WIDE_N_FILL
        && counts.wide.saturating_mul(n.div_ceil(64)) >= FEW_ROWS_WIDE_PAIRS;
    takes.then_some(TensorCoreConfig { dtype, window: WIDE_WINDOW as u32, tiles_n: few_rows_wide_tiles_n(m, n) })
}

/// Columns per block (in 8-column mma tiles) of the 64-row windows on fewer than 1024 rows: 128 where that makes 120
/// blocks before any split into ranges, else 64 (within 7% of the better width on the 112 wide problems of step 23's
/// first sweep; the many-row rule's width would be within 16%).
fn few_rows_wide_tiles_n(m: usize, n: usize) -> u32 {
    if m.div_ceil(WIDE_WINDOW) * n.div_ceil(128) >= 120 {
        16
    } else {
        8
    }
}

/// The rows [`uneven_few_rows_wide_n`] takes (388-974 measured; from 1024 [`select_tensor_core`]'s rule for many rows).
pub(crate) const UNEVEN_WIDE_N_ROWS: std::ops::Range<usize> = 384..1024;
/// The row-length variation (cv) [`uneven_few_rows_wide_n`] takes: 0.89-1.96 measured; uniform and pruned rows (cv
/// 0-0.1) lost.
pub(crate) const UNEVEN_WIDE_N_CV: std::ops::RangeInclusive<f64> = 0.85..=2.0;
/// The 64-row windows' fill from which [`uneven_few_rows_wide_n`] takes them.
pub(crate) const UNEVEN_WIDE_N_FILL: f64 = 0.05;

/// Whether A's rows are the few uneven rows [`uneven_few_rows_windows`] takes:
/// [`UNEVEN_FEW_ROWS`] rows over k = [`UNEVEN_FEW_ROWS_K`], of a length variation (cv) of 0.5-1.2.
fn uneven_few_rows(m: usize, k: usize, cv: f64) -> bool {
    UNEVEN_FEW_ROWS.contains(&m) && UNEVEN_FEW_ROWS_K.contains(&k) && (0.5..=1.2).contains(&cv)
}

/// The rows of A [`uneven_few_rows_windows`] takes (295-1017 moved where measured, in a set of 258-1049), and
/// `select::few_rows_split_warp` (258-1014 moved; up to 1024 as step 52's rule).
pub(crate) const UNEVEN_FEW_ROWS: std::ops::RangeInclusive<usize> = 256..=1024;
/// The columns of A [`uneven_few_rows_windows`] and `select::few_rows_split_warp` take (1052-8122 measured; not the
/// pruned 384 x 384 weights, whose rows at 90% sparsity are as uneven and their windows as full).
pub(crate) const UNEVEN_FEW_ROWS_K: std::ops::RangeInclusive<usize> = 1024..=8192;
/// The fill of the 64-row windows from which [`uneven_few_rows_windows`] takes them in f32 at n = 128-256, and at
/// every n on a device without the wgmma kernel (there the mma.sync one ran level with the tile at n = 512 on rows
/// 9.6-12% full).
pub(crate) const UNEVEN_FEW_ROWS_FILL: f64 = 0.12;
/// The same from n = 384 where the wgmma kernel runs.
pub(crate) const UNEVEN_FEW_ROWS_WIDE_FILL: f64 = 0.09;

/// The blocks of A, host side (see the module documentation).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct HostBlocks<V> {
    /// Rows per window: [`WINDOW`] or [`WIDE_WINDOW`].
    pub(crate) rows_per_window: usize,
    /// (windows + 1) first k-block of each window.
    pub(crate) window_blocks: Vec<i32>,
    /// (16 per k-block) the column of each slot, -1 for padding.
    pub(crate) block_columns: Vec<i32>,
    /// (256 per 16 rows of a window, per k-block) the 16 x 16 blocks' values (element bits), rows 0-15 of the
    /// window first, each in mma A-fragment order. 16-bit ([`fragment_index`]): lane l = 4 g + t holds rows g
    /// and g + 8, slots 2t, 2t + 1, 2t + 8, 2t + 9, as [ (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1), (g, 2t+8),
    /// (g, 2t+9), (g+8, 2t+8), (g+8, 2t+9) ]; f32: [`fragment_index_f32`].
    pub(crate) block_values: Vec<V>,
    /// (one per row of a window, per k-block) bit j of row r: A stores (r, slot j).
    pub(crate) block_masks: Vec<u16>,
    /// (one per row of a window, per k-block) the first of row r's entries in the k-block (its index in A's
    /// entries), 0 where the row stores none there: with the mask, where each stored slot's value comes from, so
    /// that new values can be written into the blocks on the device ([`DeviceBlocks::set_values`]).
    pub(crate) block_starts: Vec<i32>,
}

/// Where (row r of the window, slot j of the k-block) sits in a k-block's 16-bit values: the 16 x 16 block of
/// rows 16 (r / 16) .., in fragment order.
pub(crate) fn fragment_index(r: usize, j: usize) -> usize {
    let (tile, r) = (r / 16, r % 16);
    let lane = (r % 8) * 4 + (j % 8) / 2;
    tile * 256 + lane * 8 + if j >= 8 { 4 } else { 0 } + if r >= 8 { 2 } else { 0 } + (j & 1)
}

/// The same for f32 values (`TcElem<float>` in cuda/spmm/tensor_core.cuh): each 16 x 16 block is two k8 halves
/// (slots 0-7, 8-15) of 32 lanes x 4 values, lane l = 4 g + t holding the mma.m16n8k8 A fragment (g, t),
/// (g + 8, t), (g, t + 4), (g + 8, t + 4) of its half.
pub(crate) fn fragment_index_f32(r: usize, j: usize) -> usize {
    let (tile, r) = (r / 16, r % 16);
    let lane = (r % 8) * 4 + j % 4;
    tile * 256 + (j / 8) * 128 + lane * 4 + if j % 8 >= 4 { 2 } else { 0 } + usize::from(r >= 8)
}

/// Where (row r of a 64-row window, slot j of the k-block) sits in a k-block's f32 values for the wgmma kernel
/// (cuda/spmm90a/spmm90a.cu): per k8 half of the slots (512 values), K-major core matrices of 8 rows x 4 slots
/// (16 bytes per row, 128 per matrix), the two of a row group side by side (slots 0-3, 4-7) and the eight row
/// groups 256 bytes apart: [j / 8][r / 8][(j % 8) / 4][r % 8][j % 4].
pub(crate) fn core_index_f32(r: usize, j: usize) -> usize {
    (j / 8) * 512 + (r / 8) * 64 + ((j % 8) / 4) * 32 + (r % 8) * 4 + j % 4
}

/// The (row of the window, slot) whose value sits at `at` (below the window's rows x 16) among a k-block's 16-bit
/// values: the inverse of [`fragment_index`] (`tc_value_slot` in cuda/spmm/tc_values.cuh; here for the tests of its
/// host twin, [`HostBlocks::rewrite_values`]).
#[cfg(test)]
pub(crate) fn fragment_slot(at: usize) -> (usize, usize) {
    let (tile, lane, w) = (at / 256, at % 256 / 8, at % 8);
    let (g, t) = (lane / 4, lane % 4);
    (tile * 16 + g + (w & 2) * 4, 2 * t + (w & 1) + (w & 4) * 2)
}

/// The same for f32 values: the inverse of [`fragment_index_f32`].
#[cfg(test)]
pub(crate) fn fragment_slot_f32(at: usize) -> (usize, usize) {
    let (tile, lane, w) = (at / 256, at % 256 / 4 % 32, at % 4);
    let (g, t) = (lane / 4, lane % 4);
    (tile * 16 + g + (w & 1) * 8, at % 256 / 128 * 8 + t + (w & 2) * 2)
}

/// The same for the wgmma core matrices: the inverse of [`core_index_f32`].
#[cfg(test)]
pub(crate) fn core_slot_f32(at: usize) -> (usize, usize) {
    (at % 512 / 64 * 8 + at % 32 / 4, at / 512 * 8 + at % 64 / 32 * 4 + at % 4)
}

/// The fragment order of values of `bytes` bytes: [`fragment_index`] (2) or [`fragment_index_f32`] (4).
fn fragment_order(bytes: usize) -> fn(usize, usize) -> usize {
    match bytes {
        2 => fragment_index,
        4 => fragment_index_f32,
        _ => panic!("tensor-core blocks hold 16-bit or f32 values, not {bytes}-byte ones"),
    }
}

impl<V: Copy + Default> HostBlocks<V> {
    /// Builds the blocks of a valid CSR matrix (sorted, in-range, unique columns per row) for windows of
    /// `rows_per_window` rows (a multiple of 16), values of 2 or 4 bytes (their bits). Every slot holds at least
    /// one stored entry (only a window's last k-block has padding slots), so a k-block (values, columns, masks,
    /// starts: 672 bytes for 16 rows, 2496 for 64; f32 4544 for 64) holds at least 16 entries: at most 42 bytes
    /// per entry beside the CSR's 6 for 16-row windows, 156 for 64-row ones (284 for f32).
    pub(crate) fn build(indptr: &[usize], indices: &[usize], values: &[V], rows_per_window: usize) -> HostBlocks<V> {
        Self::build_in(indptr, indices, values, rows_per_window, fragment_order(std::mem::size_of::<V>()))
    }

    /// [`HostBlocks::build`] with the values of each k-block placed by `index(row of the window, slot)`, a
    /// permutation of 0 .. rows_per_window * 16.
    pub(crate) fn build_in(
        indptr: &[usize],
        indices: &[usize],
        values: &[V],
        rows_per_window: usize,
        index: fn(usize, usize) -> usize,
    ) -> HostBlocks<V> {
        assert!(rows_per_window % 16 == 0 && rows_per_window > 0);
        let rows = indptr.len() - 1;
        let windows = rows.div_ceil(rows_per_window);
        let per_block = rows_per_window * SLOTS;
        let mut out = HostBlocks {
            rows_per_window,
            window_blocks: Vec::with_capacity(windows + 1),
            block_columns: Vec::new(),
            block_values: Vec::new(),
            block_masks: Vec::new(),
            block_starts: Vec::new(),
        };
        let mut union: Vec<usize> = Vec::new();
        let mut blocks = 0usize;
        for w in 0..windows {
            out.window_blocks.push(blocks as i32);
            let (r0, r1) = (w * rows_per_window, ((w + 1) * rows_per_window).min(rows));
            union.clear();
            union.extend_from_slice(&indices[indptr[r0]..indptr[r1]]);
            union.sort_unstable();
            union.dedup();
            let count = union.len().div_ceil(SLOTS);
            let first = blocks;
            blocks += count;
            out.block_columns.extend(union.iter().map(|&c| c as i32));
            out.block_columns.resize(blocks * SLOTS, -1);
            out.block_values.resize(blocks * per_block, V::default());
            out.block_masks.resize(blocks * rows_per_window, 0);
            out.block_starts.resize(blocks * rows_per_window, 0);
            for r in r0..r1 {
                let lr = r - r0;
                for e in indptr[r]..indptr[r + 1] {
                    let p = union.binary_search(&indices[e]).expect("the window's union holds its columns");
                    let (b, j) = (first + p / SLOTS, p % SLOTS);
                    out.block_values[b * per_block + index(lr, j)] = values[e];
                    let row = b * rows_per_window + lr;
                    if out.block_masks[row] == 0 {
                        // The row's entries come in column order: the first one met in a k-block starts it there.
                        out.block_starts[row] = e as i32;
                    }
                    out.block_masks[row] |= 1 << j;
                }
            }
        }
        out.window_blocks.push(blocks as i32);
        out
    }

    pub(crate) fn num_blocks(&self) -> usize {
        self.block_columns.len() / SLOTS
    }

    /// The blocks' values rewritten from `values` (A's entries in CSR order, the structure these blocks were
    /// built from), value by value in the blocks' order `slot_of` ([`fragment_slot`], [`fragment_slot_f32`],
    /// [`core_slot_f32`]): the host reference of `spmm_tc_values_<order>` (cuda/spmm/tc_values.cuh), value by value.
    #[cfg(test)]
    pub(crate) fn rewrite_values(&mut self, values: &[V], slot_of: fn(usize) -> (usize, usize)) {
        let per_block = self.rows_per_window * SLOTS;
        for (b, out) in self.block_values.chunks_exact_mut(per_block).enumerate() {
            for (at, v) in out.iter_mut().enumerate() {
                let (r, j) = slot_of(at);
                let row = b * self.rows_per_window + r;
                let mask = u32::from(self.block_masks[row]);
                *v = if mask >> j & 1 == 1 {
                    values[self.block_starts[row] as usize + (mask & ((1 << j) - 1)).count_ones() as usize]
                } else {
                    V::default()
                };
            }
        }
    }

    /// The slot columns of each window's first [`HEAD_BLOCKS`] k-blocks, -1 past its last: `HEAD_BLOCKS` x 16 per
    /// window, window after window (`SpmmTcParams::window_heads`). The wide kernel's prologue reads them at a place
    /// fixed by the window, without waiting for `window_blocks` first.
    pub(crate) fn window_heads(&self) -> Vec<i32> {
        let windows = self.window_blocks.len() - 1;
        let mut heads = vec![-1; windows * HEAD_BLOCKS * SLOTS];
        for (w, head) in heads.chunks_exact_mut(HEAD_BLOCKS * SLOTS).enumerate() {
            let first = self.window_blocks[w] as usize * SLOTS;
            let end = (self.window_blocks[w + 1] as usize * SLOTS).min(first + HEAD_BLOCKS * SLOTS);
            head[..end - first].copy_from_slice(&self.block_columns[first..end]);
        }
        heads
    }

    /// The windows that hold k-blocks, and those that hold none, both ascending.
    pub(crate) fn busy_windows(&self) -> (Vec<i32>, Vec<i32>) {
        (0..self.window_blocks.len() as i32 - 1)
            .partition(|&w| self.window_blocks[w as usize + 1] > self.window_blocks[w as usize])
    }
}

/// The blocks on the device, kept with the matrix ([`DeviceCsr`]'s `tensor_core` cache).
pub(crate) struct DeviceBlocks {
    rows_per_window: usize,
    window_blocks: CudaSlice<i32>,
    block_columns: CudaSlice<i32>,
    /// The values' bits: u16 for f16/bf16, f32 as two u16 each (little-endian halves, as the kernel reads them).
    block_values: CudaSlice<u16>,
    block_masks: CudaSlice<u16>,
    num_windows: usize,
    num_blocks: usize,
    /// The windows that hold k-blocks, ascending: the grid of a launch that leaves the empty ones out.
    busy_windows: CudaSlice<i32>,
    num_busy: usize,
    /// The windows that hold no k-block, ascending: whose rows `spmm_zero_windows` writes when a launch leaves them
    /// out ([`leaves_out_empty_windows`]).
    empty_windows: CudaSlice<i32>,
    /// [`HostBlocks::window_heads`], for the layouts of the mma.sync wide kernel (32- and 64-row windows); None
    /// for the others, whose kernels do not read them.
    window_heads: Option<CudaSlice<i32>>,
    /// [`HostBlocks::block_starts`]: where each stored slot's value comes from ([`DeviceBlocks::set_values`]).
    block_starts: CudaSlice<i32>,
}

impl DeviceBlocks {
    /// Builds A's blocks in `layout`: on the device ([`DeviceBlocks::build_on_device`]) where A has at most
    /// [`DEVICE_BUILD_MAX_COLUMNS`] columns, else on the host from one download ([`DeviceBlocks::build_on_host`]).
    pub(crate) fn build<T: Scalar>(gpu: &Gpu, a: &DeviceCsr<T>, layout: BlockLayout) -> Result<DeviceBlocks> {
        if a.cols() <= DEVICE_BUILD_MAX_COLUMNS {
            Self::build_on_device(gpu, a, layout)
        } else {
            Self::build_on_host(gpu, a, layout)
        }
    }

    /// [`Error::OutOfDeviceMemory`] where `blocks` k-blocks in `layout` (with their window heads) need more than
    /// the device has, or more slots than an i32 counts; else the bytes they need.
    fn check_size<T: Scalar>(gpu: &Gpu, a: &DeviceCsr<T>, layout: BlockLayout, blocks: usize) -> Result<usize> {
        let rows = layout.rows();
        let bytes_per_block = SLOTS * 4 + rows * SLOTS * T::DTYPE.size() + rows * (2 + 4);
        let head_bytes = if layout.has_heads() { a.rows().div_ceil(rows) * HEAD_BLOCKS * SLOTS * 4 } else { 0 };
        let bytes = blocks.saturating_mul(bytes_per_block).saturating_add(head_bytes);
        if blocks.saturating_mul(SLOTS) > i32::MAX as usize || bytes > gpu.info().total_mem {
            return Err(Error::OutOfDeviceMemory { what: "building the tensor-core blocks", bytes });
        }
        Ok(bytes)
    }

    /// Builds A's blocks on the device (cuda/spmm/tc_build.cuh): `spmm_tc_build_count` counts each window's
    /// distinct columns, which come back (4 bytes per window, the one synchronisation) to make the windows' first
    /// k-blocks and to check the size; `spmm_tc_build_fill` writes the slot columns, window heads, masks and
    /// starts; `spmm_tc_values_<order>` the values, as for new ones ([`DeviceBlocks::set_values`]). The same bits
    /// as [`DeviceBlocks::build_on_host`] (tests/spmm.rs,
    /// `sanitizer_blocks_built_on_the_device_equal_the_host_build`). A's columns must be at most
    /// [`DEVICE_BUILD_MAX_COLUMNS`] (a bitmap of them in shared memory).
    pub(crate) fn build_on_device<T: Scalar>(gpu: &Gpu, a: &DeviceCsr<T>, layout: BlockLayout) -> Result<DeviceBlocks> {
        values_kernel(T::DTYPE, layout)?;
        assert!(a.cols() <= DEVICE_BUILD_MAX_COLUMNS, "the device build's bitmap holds A's columns");
        let rows = layout.rows();
        let windows = a.rows().div_ceil(rows);
        let words = a.cols().div_ceil(32);
        let stream = gpu.stream();
        let zeros = |len: usize, what: &'static str| {
            stream.alloc_zeros::<i32>(len.max(1)).map_err(Error::driver(what, 4 * len.max(1)))
        };
        // A block per window, at most 16 per SM (2 fit at the most shared memory): the loops take the rest.
        let grid = windows.clamp(1, 16 * gpu.info().sm_count.max(1)) as u32;
        let launch = |name: &str, shared_words: usize, params: SpmmTcBuildParams| -> Result<()> {
            let function = gpu.function_with_shared(Family::Spmm, name, DEVICE_BUILD_SHARED_BYTES)?;
            let cfg = LaunchConfig {
                grid_dim: (grid, 1, 1),
                block_dim: (TC_BUILD_THREADS, 1, 1),
                shared_mem_bytes: (shared_words * 4) as u32,
            };
            // SAFETY: `params` points at A's row pointer (rows + 1) and column indices (nnz, sorted and in range
            // in each row: a DeviceCsr's invariant), so the bitmap of ceil(cols / 32) words (at most
            // DEVICE_BUILD_SHARED_BYTES / 8, asserted above) holds every column; at the outputs the caller
            // allocated for `num_windows` windows and the k-blocks their counts make.
            unsafe { stream.launch_builder(&function).arg(&params).launch(cfg) }
                .map(drop)
                .map_err(Error::driver("launching the device build of the tensor-core blocks", 0))
        };
        let (row_offsets, _g1) = a.row_offsets.device_ptr(stream);
        let (columns, _g2) = a.column_indices.device_ptr(stream);
        let base = SpmmTcBuildParams {
            row_offsets,
            columns,
            window_blocks: 0,
            window_slots: 0,
            block_columns: 0,
            block_masks: 0,
            block_starts: 0,
            window_heads: 0,
            m: a.rows() as i32,
            cols: a.cols() as i32,
            num_windows: windows as i32,
            rows_per_window: rows as i32,
        };
        let mut slots = zeros(windows, "allocating the tensor-core windows' column counts")?;
        if a.nnz() > 0 {
            let (window_slots, _g) = slots.device_ptr_mut(stream);
            launch("spmm_tc_build_count", words, SpmmTcBuildParams { window_slots, ..base })?;
        }
        let slots = stream
            .clone_dtoh(&slots)
            .map_err(Error::driver("downloading the tensor-core windows' column counts", 4 * windows))?;
        let mut window_blocks = Vec::with_capacity(windows + 1);
        let mut blocks = 0usize;
        window_blocks.push(0);
        for &distinct in &slots[..windows] {
            blocks += (distinct as usize).div_ceil(SLOTS);
            window_blocks.push(blocks.min(i32::MAX as usize) as i32);
        }
        Self::check_size(gpu, a, layout, blocks)?;
        let window_blocks_device = upload_slice(gpu, &window_blocks, "uploading the tensor-core windows")?;
        let mut block_columns = zeros(blocks * SLOTS, "allocating the tensor-core block columns")?;
        let mut block_masks = stream
            .alloc_zeros::<u16>((blocks * rows).max(2))
            .map_err(Error::driver("allocating the tensor-core block masks", 2 * blocks * rows))?;
        let mut block_starts = zeros(blocks * rows, "allocating the tensor-core block starts")?;
        let value_words = blocks * rows * SLOTS * T::DTYPE.size() / 2;
        let block_values = stream
            .alloc_zeros::<u16>(value_words.max(1))
            .map_err(Error::driver("allocating the tensor-core block values", 2 * value_words))?;
        let mut window_heads = if layout.has_heads() {
            Some(zeros(windows * HEAD_BLOCKS * SLOTS, "allocating the tensor-core window heads")?)
        } else {
            None
        };
        if windows > 0 {
            // Also where there are no k-blocks: the heads are -1 then, which the fill writes.
            let (window_blocks, _g3) = window_blocks_device.device_ptr(stream);
            let (block_columns, _g4) = block_columns.device_ptr_mut(stream);
            let (block_masks, _g5) = block_masks.device_ptr_mut(stream);
            let (block_starts, _g6) = block_starts.device_ptr_mut(stream);
            let heads = window_heads.as_mut().map(|h| h.device_ptr_mut(stream));
            let params = SpmmTcBuildParams {
                window_blocks,
                block_columns,
                block_masks,
                block_starts,
                window_heads: heads.as_ref().map_or(0, |h| h.0),
                ..base
            };
            launch("spmm_tc_build_fill", 2 * words, params)?;
        }
        let (busy, empty): (Vec<i32>, Vec<i32>) =
            (0..windows as i32).partition(|&w| window_blocks[w as usize + 1] > window_blocks[w as usize]);
        let mut built = DeviceBlocks {
            rows_per_window: rows,
            window_blocks: window_blocks_device,
            block_columns,
            block_values,
            block_masks,
            num_windows: windows,
            num_blocks: blocks,
            busy_windows: upload_slice(gpu, &busy, "uploading the tensor-core windows that hold k-blocks")?,
            num_busy: busy.len(),
            empty_windows: upload_slice(gpu, &empty, "uploading the empty tensor-core windows")?,
            window_heads,
            block_starts,
        };
        built.set_values(gpu, layout, &a.values)?;
        Ok(built)
    }

    /// Downloads A's indices and values once and builds its blocks in `layout` on the host
    /// ([`HostBlocks::build`]), then uploads them: for A of more than [`DEVICE_BUILD_MAX_COLUMNS`] columns.
    pub(crate) fn build_on_host<T: Scalar>(gpu: &Gpu, a: &DeviceCsr<T>, layout: BlockLayout) -> Result<DeviceBlocks> {
        values_kernel(T::DTYPE, layout)?;
        let host = a.download(gpu)?;
        let indptr = host.proper_indptr();
        let (indices, data, rows) = (host.indices(), host.data(), layout.rows());
        // Count first: a scattered matrix can need ~284 bytes per entry in blocks (HostBlocks::build), and a
        // build the device could never hold must be an error, not a host allocation failure.
        Self::check_size(gpu, a, layout, count_blocks(a.cols(), &indptr, indices, rows))?;
        let heads = layout.has_heads();
        // The values' bits, 16 or 32 per element: HostBlocks::build picks the fragment order by their size; the
        // core matrices are f32's only (values_kernel said so above).
        if layout == BlockLayout::WideCore {
            let values = bytemuck::cast_slice(data);
            Self::upload(gpu, HostBlocks::<u32>::build_in(&indptr, indices, values, rows, core_index_f32), heads)
        } else if T::DTYPE.size() == 2 {
            Self::upload(gpu, HostBlocks::<u16>::build(&indptr, indices, bytemuck::cast_slice(data), rows), heads)
        } else {
            Self::upload(gpu, HostBlocks::<u32>::build(&indptr, indices, bytemuck::cast_slice(data), rows), heads)
        }
    }

    /// Uploads `blocks`, with their window heads where `heads` ([`HostBlocks::window_heads`]).
    fn upload<V: bytemuck::Pod + Default>(gpu: &Gpu, blocks: HostBlocks<V>, heads: bool) -> Result<DeviceBlocks> {
        if blocks.block_columns.len() > i32::MAX as usize {
            return Err(Error::TooLarge(format!(
                "the tensor-core blocks of this matrix need {} k-blocks",
                blocks.num_blocks()
            )));
        }
        let values: &[u16] = bytemuck::cast_slice(&blocks.block_values);
        let (busy, empty) = blocks.busy_windows();
        let window_heads = if heads {
            Some(upload_slice(gpu, &blocks.window_heads(), "uploading the tensor-core window heads")?)
        } else {
            None
        };
        Ok(DeviceBlocks {
            window_heads,
            busy_windows: upload_slice(gpu, &busy, "uploading the tensor-core windows that hold k-blocks")?,
            num_busy: busy.len(),
            empty_windows: upload_slice(gpu, &empty, "uploading the empty tensor-core windows")?,
            rows_per_window: blocks.rows_per_window,
            window_blocks: upload_slice(gpu, &blocks.window_blocks, "uploading the tensor-core windows")?,
            block_columns: upload_slice(gpu, &blocks.block_columns, "uploading the tensor-core block columns")?,
            block_values: upload_slice(gpu, values, "uploading the tensor-core block values")?,
            block_masks: upload_slice(gpu, &blocks.block_masks, "uploading the tensor-core block masks")?,
            block_starts: upload_slice(gpu, &blocks.block_starts, "uploading the tensor-core block starts")?,
            num_windows: blocks.window_blocks.len() - 1,
            num_blocks: blocks.num_blocks(),
        })
    }

    /// Writes A's new `values` (its entries in CSR order, of the structure these blocks were built from) into the
    /// blocks in place, in `layout`'s order: `spmm_tc_values_<order>` (cuda/spmm/tc_values.cuh) rewrites every
    /// value of every k-block from the masks and the rows' starts. The windows, slot columns, masks, starts and
    /// heads depend on the structure only and stay. Asynchronous on `gpu`'s stream.
    pub(crate) fn set_values<T: Scalar>(
        &mut self,
        gpu: &Gpu,
        layout: BlockLayout,
        values: &CudaSlice<T>,
    ) -> Result<()> {
        let (rows, blocks, len) = (self.rows_per_window, self.num_blocks, self.block_values.len());
        let (masks, starts) = (&self.block_masks, &self.block_starts);
        let (block_values, _guard) = self.block_values.device_ptr_mut(gpu.stream());
        launch_values(gpu, layout, values, ValuesTarget { rows, blocks, len, masks, starts, block_values })
    }

    /// [`DeviceBlocks::set_values`] with the `values` the blocks already hold (A's own, from which they were
    /// built or last rewritten): the same work and the same bits, so a reader of `&self` sees no change. For
    /// timing a product as it runs when A's values change before each one ([`super::tune::TuneOptions`]).
    pub(crate) fn rewrite_unchanged_values<T: Scalar>(
        &self,
        gpu: &Gpu,
        layout: BlockLayout,
        values: &CudaSlice<T>,
    ) -> Result<()> {
        let (rows, blocks, len) = (self.rows_per_window, self.num_blocks, self.block_values.len());
        let (masks, starts) = (&self.block_masks, &self.block_starts);
        let (block_values, _guard) = self.block_values.device_ptr(gpu.stream());
        launch_values(gpu, layout, values, ValuesTarget { rows, blocks, len, masks, starts, block_values })
    }

    /// How many empty windows a launch of `config` over `slices` column slices in `splits` ranges leaves out of
    /// its grid: all of them where `leave_out` says so (None: [`leaves_out_empty_windows`]) and the launch does not
    /// split, else none.
    fn windows_left_out(
        &self,
        config: &TensorCoreConfig,
        slices: usize,
        splits: usize,
        leave_out: Option<bool>,
    ) -> usize {
        let empty = self.num_windows - self.num_busy;
        let leaves = leave_out.unwrap_or_else(|| leaves_out_empty_windows(config, empty, slices, splits));
        if empty > 0 && splits == 1 && leaves {
            empty
        } else {
            0
        }
    }

    /// Stored entries / (k-blocks * rows per window * 16): how full the blocks are.
    pub(crate) fn fill(&self, nnz: usize) -> f64 {
        nnz as f64 / (self.num_blocks.max(1) * self.rows_per_window * SLOTS) as f64
    }
}

/// The blocks [`launch_values`] writes into: their shape, masks and starts, and their values buffer's address.
struct ValuesTarget<'a> {
    /// Rows per window.
    rows: usize,
    /// k-blocks.
    blocks: usize,
    /// u16 elements of the values buffer.
    len: usize,
    masks: &'a CudaSlice<u16>,
    starts: &'a CudaSlice<i32>,
    block_values: u64,
}

/// Launches `spmm_tc_values_<order>` from `values` into `target`'s blocks.
fn launch_values<T: Scalar>(gpu: &Gpu, layout: BlockLayout, values: &CudaSlice<T>, target: ValuesTarget) -> Result<()> {
    debug_assert_eq!(target.rows, layout.rows(), "blocks kept in their layout's slot");
    let name = values_kernel(T::DTYPE, layout)?;
    if target.blocks == 0 {
        return Ok(());
    }
    // 16-byte chunks of the blocks' values (u16 elements).
    let chunks = target.len * 2 / 16;
    let function = gpu.function(Family::Spmm, name)?;
    let stream = gpu.stream();
    let (values, _g1) = values.device_ptr(stream);
    let (block_masks, _g2) = target.masks.device_ptr(stream);
    let (block_starts, _g3) = target.starts.device_ptr(stream);
    let params = SpmmTcValuesParams {
        values,
        block_masks,
        block_starts,
        block_values: target.block_values,
        num_blocks: target.blocks as i32,
        rows_per_window: target.rows as i32,
    };
    // A thread per 16 bytes of the blocks' values, at most 32 blocks per SM (the kernel's loop takes the rest).
    let cfg = LaunchConfig {
        grid_dim: (chunks.div_ceil(TC_VALUES_THREADS as usize).min(32 * gpu.info().sm_count.max(1)) as u32, 1, 1),
        block_dim: (TC_VALUES_THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: the blocks hold `blocks` (< 2^31 / 16, checked at upload) k-blocks of rows x 16 values, masks and
    // starts, all written by the build (on the device or HostBlocks::build) from the structure of the matrix whose
    // `values` these are (it never changes while it keeps them), so each stored slot's start plus the stored slots
    // before it is an entry index below nnz; `values` holds at least nnz elements of the size the kernel's name
    // says (2 or 4 bytes, matched above); `block_values` is the blocks' buffer of `chunks` 16-byte chunks.
    unsafe { stream.launch_builder(&function).arg(&params).launch(cfg) }
        .map_err(Error::driver("launching the write of new values into the tensor-core blocks", 0))?;
    Ok(())
}

/// How full A's tensor-core blocks for windows of `rows_per_window` rows ([`WINDOW`], [`MID_WINDOW`] or
/// [`WIDE_WINDOW`]) are: stored entries / (k-blocks * rows_per_window * 16); builds the blocks on first use.
pub fn block_fill<T: Scalar>(gpu: &Gpu, a: &DeviceCsr<T>, rows_per_window: usize) -> Result<f64> {
    Ok(a.tensor_core_blocks(gpu, BlockLayout::of_rows(rows_per_window)?)?.fill(a.nnz()))
}

/// For tests/spmm.rs: A's blocks built on the device ([`DeviceBlocks::build_on_device`]) and on the host
/// ([`DeviceBlocks::build_on_host`]) in every layout T has, downloaded and compared part by part. Returns each
/// difference found (the layout, the part, the first index, both values): empty where the bits are the same.
/// [`Error::Unsupported`] where A has more than [`DEVICE_BUILD_MAX_COLUMNS`] columns (the host builds alone).
#[doc(hidden)]
pub fn compare_block_builds<T: Scalar>(gpu: &Gpu, a: &DeviceCsr<T>) -> Result<Vec<String>> {
    if a.cols() > DEVICE_BUILD_MAX_COLUMNS {
        return Err(Error::Unsupported {
            config: "the device build of the tensor-core blocks".into(),
            reason: format!("it takes at most {DEVICE_BUILD_MAX_COLUMNS} columns, not {}", a.cols()),
        });
    }
    let mut differences = Vec::new();
    for layout in BlockLayout::ALL {
        if values_kernel(T::DTYPE, layout).is_err() {
            continue;
        }
        let device = DeviceBlocks::build_on_device(gpu, a, layout)?.parts(gpu, T::DTYPE)?;
        let host = DeviceBlocks::build_on_host(gpu, a, layout)?.parts(gpu, T::DTYPE)?;
        for ((name, d), (_, h)) in device.iter().zip(&host) {
            if d != h {
                let at = d.iter().zip(h).position(|(x, y)| x != y).unwrap_or(d.len().min(h.len()));
                differences.push(format!(
                    "{layout:?} {name}: {} against {} elements, first difference at {at}: device {:?}, host {:?}",
                    d.len(),
                    h.len(),
                    d.get(at),
                    h.get(at)
                ));
            }
        }
    }
    Ok(differences)
}

impl DeviceBlocks {
    /// Every part of the blocks, downloaded to the length its counts say (the buffers may be longer: an empty
    /// one holds an element), each element widened to i64: for [`compare_block_builds`].
    fn parts(&self, gpu: &Gpu, dtype: DType) -> Result<Vec<(&'static str, Vec<i64>)>> {
        fn get<E>(gpu: &Gpu, slice: &CudaSlice<E>, len: usize) -> Result<Vec<i64>>
        where
            E: cudarc::driver::DeviceRepr + Default + Copy + Send + Sync + Into<i64>,
        {
            let part = slice.slice(..len.min(slice.len()));
            let v = crate::csr::download_slice(gpu, &part, "downloading the tensor-core blocks")?;
            Ok(v.into_iter().map(Into::into).collect())
        }
        let (windows, blocks, rows) = (self.num_windows, self.num_blocks, self.rows_per_window);
        let heads = match &self.window_heads {
            Some(h) => get(gpu, h, windows * HEAD_BLOCKS * SLOTS)?,
            None => Vec::new(),
        };
        Ok(vec![
            ("counts", vec![windows as i64, blocks as i64, self.num_busy as i64]),
            ("window_blocks", get(gpu, &self.window_blocks, windows + 1)?),
            ("block_columns", get(gpu, &self.block_columns, blocks * SLOTS)?),
            ("block_values", get(gpu, &self.block_values, blocks * rows * SLOTS * dtype.size() / 2)?),
            ("block_masks", get(gpu, &self.block_masks, blocks * rows)?),
            ("block_starts", get(gpu, &self.block_starts, blocks * rows)?),
            ("busy_windows", get(gpu, &self.busy_windows, self.num_busy)?),
            ("empty_windows", get(gpu, &self.empty_windows, windows - self.num_busy)?),
            ("window_heads", heads),
        ])
    }
}

/// Kernel arguments; mirrors `ts::SpmmTcParams` in cuda/common/params.cuh.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct SpmmTcParams {
    m: i32,
    n: i32,
    num_windows: i32,
    splits: i32,
    window_blocks: u64,
    block_columns: u64,
    block_values: u64,
    block_masks: u64,
    dense: u64,
    out: u64,
    partials: u64,
    windows: u64,
    window_heads: u64,
    bias: u64,
    alpha: f32,
    beta: f32,
}
const _: () = assert!(std::mem::size_of::<SpmmTcParams>() == 104, "SpmmTcParams must match cuda/common/params.cuh");

/// Arguments of `spmm_zero_windows`; mirrors `ts::SpmmZeroWindowsParams` in cuda/common/params.cuh.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct SpmmZeroWindowsParams {
    windows: u64,
    count: i32,
    rows_per_window: i32,
    m: i32,
    row_vectors: i32,
    out: u64,
    bias: u64,
    alpha: f32,
    beta: f32,
}
const _: () = assert!(
    std::mem::size_of::<SpmmZeroWindowsParams>() == 48,
    "SpmmZeroWindowsParams must match cuda/common/params.cuh"
);
// SAFETY: plain old data with the C layout the kernel expects.
unsafe impl cudarc::driver::DeviceRepr for SpmmZeroWindowsParams {}
/// Threads per block of `spmm_zero_windows_<dtype>` (TILESPARSE_SPMM_ZERO_WINDOWS_THREADS in cuda/spmm/spmm.cu).
const ZERO_WINDOWS_THREADS: u32 = 256;

/// Arguments of `spmm_tc_values_<order>`; mirrors `ts::SpmmTcValuesParams` in cuda/common/params.cuh.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct SpmmTcValuesParams {
    values: u64,
    block_masks: u64,
    block_starts: u64,
    block_values: u64,
    num_blocks: i32,
    rows_per_window: i32,
}
const _: () =
    assert!(std::mem::size_of::<SpmmTcValuesParams>() == 40, "SpmmTcValuesParams must match cuda/common/params.cuh");
// SAFETY: plain old data with the C layout the kernel expects.
unsafe impl cudarc::driver::DeviceRepr for SpmmTcValuesParams {}
/// Arguments of `spmm_tc_build_count` and `spmm_tc_build_fill`; mirrors `ts::SpmmTcBuildParams` in
/// cuda/common/params.cuh.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct SpmmTcBuildParams {
    row_offsets: u64,
    columns: u64,
    window_blocks: u64,
    window_slots: u64,
    block_columns: u64,
    block_masks: u64,
    block_starts: u64,
    window_heads: u64,
    m: i32,
    cols: i32,
    num_windows: i32,
    rows_per_window: i32,
}
const _: () =
    assert!(std::mem::size_of::<SpmmTcBuildParams>() == 80, "SpmmTcBuildParams must match cuda/common/params.cuh");
// SAFETY: plain old data with the C layout the kernel expects.
unsafe impl cudarc::driver::DeviceRepr for SpmmTcBuildParams {}
/// Threads per block of `spmm_tc_values_<order>` (TILESPARSE_SPMM_TC_VALUES_THREADS in cuda/spmm/tc_values.cuh).
const TC_VALUES_THREADS: u32 = 256;

/// Dynamic shared memory of `spmm_tc_f32_w64_n16` (`ts::kWgSharedBytes` in cuda/spmm90a/spmm90a.cu): four
/// stages of a k-block of A twice (split) and 16 gathered rows of 128 columns of B.
const WGMMA_SHARED_BYTES: u32 = 67_584;
/// Threads per block of `spmm_tc_fixup_<dtype>` (`TILESPARSE_SPMM_TC_FIXUP_THREADS`).
const FIXUP_THREADS: u32 = 256;
/// A wide launch of fewer blocks than this (two per SM of an H100) splits each window's k-blocks into ranges
/// (grid z) whose partial tiles are added in clusters or by a fix-up ([`RangeSum`]); fixed, so that the bits do
/// not depend on the device.
const SPLIT_BELOW_BLOCKS: usize = 264;
/// Ranges: as many as keep the launch within this many blocks, and at least two: 64 windows x 1 slice -> 5
/// ranges, 128 -> 2. Measured on the H100 (NOTES.md, "SpMM step 9"): 128 blocks in 2 ranges (clusters of 2: 198
/// fit) ran 1.15-1.23x faster than in 3 (clusters of 3: 124 fit, so the fix-up); 64 blocks in 5 ranges (69
/// clusters fit) 0.032 ms, in 6 ranges with clusters 0.044 ms (f16, uniform 4096^2, n = 128).
const SPLIT_MAX_BLOCKS: usize = 320;
/// Fewest k-blocks per range of a split window, and most ranges.
const SPLIT_MIN_BLOCKS: usize = 16;
const SPLIT_MAX: usize = 8;
/// f32 (3xTF32) only: a window too short for two ranges of [`SPLIT_MIN_BLOCKS`] still splits in two, of at least
/// this many k-blocks each, where the grid has at most [`SPLIT_PAIR_MAX_GRID`] blocks. Measured on the H100
/// (NOTES.md, "SpMM step 19"): windows of 24 k-blocks (k = 384) in grids of 32-192 blocks ran 1.07-1.29x faster in
/// two ranges (the pruned 384 x 384 at 70%, n = 1024: 17.5 -> 16.3 us), a grid of 256 (1024 x 384, n = 1024) 0.94x;
/// cutting ranges of 16 to 12-13 k-blocks elsewhere (3 -> 4, 4 -> 5 ranges) was mixed, 0.94-1.15x, and is not done.
const SPLIT_PAIR_MIN_BLOCKS: usize = 12;
const SPLIT_PAIR_MAX_GRID: usize = 192;
const _: () = assert!(
    SPLIT_MAX <= crate::cpu::oracle::TC_MAX_PARTIALS && WARPS <= crate::cpu::oracle::TC_MAX_PARTIALS,
    "the tensor-core error bounds count at most TC_MAX_PARTIALS partial sums per element of C"
);

/// Into how many ranges a wide `dtype` launch of `grid` blocks (windows x column slices) splits each window's
/// k-blocks, `blocks` k-blocks in `windows` windows in all. Pure.
pub fn wide_splits(dtype: DType, grid: usize, windows: usize, blocks: usize) -> usize {
    if grid == 0 || grid >= SPLIT_BELOW_BLOCKS {
        return 1;
    }
    let per_window = blocks / windows.max(1);
    let by_grid = (SPLIT_MAX_BLOCKS / grid).max(2);
    let by_blocks = (per_window / SPLIT_MIN_BLOCKS).max(1);
    let ranges = by_grid.min(by_blocks).min(SPLIT_MAX);
    let pair = dtype == DType::F32 && grid <= SPLIT_PAIR_MAX_GRID && per_window >= 2 * SPLIT_PAIR_MIN_BLOCKS;
    if ranges == 1 && pair {
        2
    } else {
        ranges
    }
}

/// Blocks of the wgmma kernel that run at once on an H100 (two per SM, 132 SMs): a launch splits its windows
/// into as many ranges as keep it within one such wave. Fixed, so that the bits do not depend on the device.
const WGMMA_WAVE: usize = 264;

/// Into how many ranges the wgmma kernel (`spmm_tc_f32_w64_n16`) splits each window's k-blocks for a launch of
/// `grid` blocks (windows x 128-column slices), `blocks` k-blocks in `windows` windows in all: as many as fit in
/// one wave of `WGMMA_WAVE` blocks, at most 8 and at least 16 k-blocks per range (one range where the window
/// is shorter). Pure. The prototype measured before it (NOTES.md, "SpMM step 27"): uniform 4096^2 at 50%,
/// n = 128, 64 windows: 4 ranges 68 us, 8 ranges 74 us, 2 ranges 95 us; in the library 5 ranges (320 blocks,
/// two waves: the mma.sync kernel's [`wide_splits`]) took 111 us.
pub fn wgmma_splits(grid: usize, windows: usize, blocks: usize) -> usize {
    if grid == 0 {
        return 1;
    }
    let per_window = blocks / windows.max(1);
    (WGMMA_WAVE / grid).clamp(1, SPLIT_MAX).min((per_window / SPLIT_MIN_BLOCKS).max(1))
}

/// The ranges of a launch of `config` ([`wgmma_splits`] for the wgmma kernel, [`wide_splits`] for the other
/// wide ones, 1 for the narrow ones) over `grid` blocks (windows x column slices) of `blocks` k-blocks in
/// `windows` windows. Pure.
pub fn launch_splits(config: &TensorCoreConfig, grid: usize, windows: usize, blocks: usize) -> usize {
    if config.is_wgmma() {
        wgmma_splits(grid, windows, blocks)
    } else if config.is_wide() {
        wide_splits(config.dtype, grid, windows, blocks)
    } else {
        1
    }
}

// SAFETY: plain old data with the C layout the kernel expects.
unsafe impl cudarc::driver::DeviceRepr for SpmmTcParams {}

/// [`check_tensor_core`], and that `gpu`'s device runs `config` (the warpgroup kernels need compute capability 9.0
/// and a build with sm_90a).
pub(crate) fn check_tensor_core_here(
    gpu: &Gpu,
    config: &TensorCoreConfig,
    dtype: DType,
    m: usize,
    n: usize,
) -> Result<()> {
    check_tensor_core(config, dtype, m, n)?;
    if !config.runs_on(gpu.info()) {
        let (major, minor) = gpu.info().compute_capability;
        let reason = if SM90A_BUILT {
            format!("it runs on compute capability 9.0 (sm_90a, warpgroup mma) only, this device has {major}.{minor}")
        } else {
            "this build has no sm_90a kernels (TILESPARSE_CUDA_ARCHS without 90)".to_string()
        };
        return Err(Error::Unsupported { config: config.kernel_name(), reason });
    }
    Ok(())
}

/// Checks that `config` can run C (m x n) = A * B for this element type and n. Pure: no device needed.
pub fn check_tensor_core(config: &TensorCoreConfig, dtype: DType, m: usize, n: usize) -> Result<()> {
    // This runs before every launch: the name only for an error.
    let name = || config.kernel_name();
    super::check_dtype(name, config.dtype, dtype)?;
    if dtype == DType::F64 {
        return Err(Error::Unsupported { config: name(), reason: "tensor-core SpMM is for f16, bf16 and f32".into() });
    }
    if !TensorCoreConfig::compiled(dtype).contains(&(config.window, config.tiles_n)) {
        let rule = if dtype == DType::F32 {
            "f32 (3xTF32) has (window, tiles_n) = (16, 4), (32, 8), (64, 8) or (64, 16) (compute capability 9.0)"
        } else {
            "(window, tiles_n) must be (16, 4), (16, 8), (32, 8), (32, 16), (64, 8) or (64, 16)"
        };
        return Err(Error::InvalidConfig { config: name(), rule: rule.into() });
    }
    if !KERNELS_BUILT {
        return Err(Error::KernelsNotBuilt);
    }
    // n not a multiple of 8 runs on B and C padded to `padded_n(n)` columns ([`spmm_tensor_core_with`]).
    super::check_i32(m, padded_n(n))?;
    if n.div_ceil(config.columns_per_block()) > 65_535 {
        return Err(Error::TooLarge(format!("n = {n} needs more than 65535 column blocks")));
    }
    Ok(())
}

/// How a tensor-core launch splits each window's k-blocks into ranges, and whether its ranges fit on the device
/// as clusters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitPlan {
    /// k-block ranges per window ([`launch_splits`]; always 1 for the narrow kernels).
    pub ranges: usize,
    /// Windows x column slices: the blocks of one range, and the clusters of a clustered launch.
    pub grid: usize,
    /// Clusters of `ranges` blocks the device runs at once (0 without ranges or without clusters).
    pub cluster_capacity: usize,
}

impl SplitPlan {
    /// Whether [`RangeSum::Auto`] adds the ranges in clusters: there are ranges and every cluster fits on the
    /// device at once. On the H100 clusters that fit (64 clusters of 5 blocks: uniform 4096^2, n = 128) ran
    /// 1.10-1.14x faster than the fix-up, clusters that did not (128 of 3: uniform 4096^2, n = 256, and 8192 x
    /// 2048, n = 128) 1.23-1.27x slower (NOTES.md, "SpMM step 9").
    pub fn clusters_fit(&self) -> bool {
        self.ranges > 1 && self.cluster_capacity >= self.grid
    }
}

/// The [`SplitPlan`] of `config` on A with n columns (builds A's blocks on first use).
pub fn split_plan<T: Scalar>(gpu: &Gpu, a: &DeviceCsr<T>, config: &TensorCoreConfig, n: usize) -> Result<SplitPlan> {
    plan_splits(gpu, a.tensor_core_blocks(gpu, BlockLayout::of(config)?)?, config, n)
}

fn plan_splits(gpu: &Gpu, blocks: &DeviceBlocks, config: &TensorCoreConfig, n: usize) -> Result<SplitPlan> {
    let grid = blocks.num_windows * n.div_ceil(config.columns_per_block());
    let ranges = launch_splits(config, grid, blocks.num_windows, blocks.num_blocks);
    let cluster_capacity = if ranges > 1 && !config.is_wgmma() {
        // The plain kernel's clusters (its twin with the scalars is launched the same way).
        let kernel = gpu.tensor_core_kernel(config, false, 0)?;
        gpu.cluster_capacity(&kernel.function, (WARPS * 32) as u32, ranges as u32)?
    } else {
        0
    };
    Ok(SplitPlan { ranges, grid, cluster_capacity })
}

/// How a wide launch that splits each window's k-blocks into ranges ([`wide_splits`]) adds the ranges' partial
/// tiles. Both add them in range order: the same bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RangeSum {
    /// [`RangeSum::Cluster`] on devices that have thread block clusters (compute capability 9.0 and up) where
    /// all of a launch's clusters fit on the device at once, else [`RangeSum::FixUp`].
    Auto,
    /// A window's ranges run as one thread block cluster and add their tiles through distributed shared
    /// memory (no scratch, no second launch). An error on devices below compute capability 9.0.
    Cluster,
    /// Each range stores an f32 partial tile in global scratch; a second launch (`spmm_tc_fixup_<dtype>`) adds
    /// them.
    FixUp,
}

/// The columns the tensor-core kernels run with for n columns of B and C: n rounded up to a multiple of 8. The
/// kernels gather rows of B in 16-byte pieces and store C in aligned pairs (f32: fours), so a product with n not
/// a multiple of 8 runs on copies of B and C padded to this many columns ([`spmm_tensor_core_with`]).
pub fn padded_n(n: usize) -> usize {
    n.next_multiple_of(8)
}

/// C = A * B on the tensor cores (f16 or bf16 with fp32 accumulation, f32 in 3xTF32). The first call on a
/// matrix builds its blocks (on the device, [`DEVICE_BUILD_MAX_COLUMNS`]); later calls reuse them. Every element
/// of C is written. Where n is not a multiple of 8, B is copied into a buffer of [`padded_n`] columns (zeros after
/// column n), the product runs there into a padded C, and its first n columns are copied into C: two more launches
/// and buffers of k x padded_n and m x padded_n elements.
pub fn spmm_tensor_core<T: Scalar>(
    gpu: &Gpu,
    a: &DeviceCsr<T>,
    b: &DeviceDense<T>,
    c: &mut DeviceDense<T>,
    config: &TensorCoreConfig,
) -> Result<()> {
    spmm_tensor_core_with(gpu, a, b, c, config, RangeSum::Auto)
}

/// [`spmm_tensor_core`] with the way split ranges are added chosen ([`RangeSum`]; it matters only for the wide
/// kernels on grids small enough to split).
pub fn spmm_tensor_core_with<T: Scalar>(
    gpu: &Gpu,
    a: &DeviceCsr<T>,
    b: &DeviceDense<T>,
    c: &mut DeviceDense<T>,
    config: &TensorCoreConfig,
    sum: RangeSum,
) -> Result<()> {
    spmm_tensor_core_paths(gpu, a, b, SpmmEpilogue::default(), c, config, sum, None).map(|_| ())
}

/// C = ReLU(A * B + bias) on the tensor cores, `bias` one f32 per row of C: [`spmm_tensor_core`] with the bias +
/// ReLU epilogue applied to each element's f32 sum before it is rounded to `T` (the tiles' `spmm_bias_relu` does
/// the same). Where a window's k-blocks are split into ranges, the epilogue follows their sum (in the cluster or
/// the fix-up), so C has the same bits however the ranges are added. A NaN sum or bias stays NaN.
pub fn spmm_tensor_core_bias_relu<T: Scalar>(
    gpu: &Gpu,
    a: &DeviceCsr<T>,
    b: &DeviceDense<T>,
    bias: &CudaSlice<f32>,
    c: &mut DeviceDense<T>,
    config: &TensorCoreConfig,
) -> Result<()> {
    spmm_tensor_core_paths(gpu, a, b, SpmmEpilogue::bias_relu(bias), c, config, RangeSum::Auto, None).map(|_| ())
}

/// [`spmm_tensor_core`] with A's empty windows (those of `config`'s height that hold no entry) left out of the
/// grid and their rows written by a second kernel (`leave_out`), or walked by the grid, however many they are,
/// instead of where [`leaves_out_empty_windows`] says: for tests and benchmarks of both paths. A launch that
/// splits its windows' k-blocks ([`launch_splits`]) walks every window either way. Returns how many windows it
/// left out. C is the same, bit for bit, either way.
pub fn spmm_tensor_core_empty_windows<T: Scalar>(
    gpu: &Gpu,
    a: &DeviceCsr<T>,
    b: &DeviceDense<T>,
    c: &mut DeviceDense<T>,
    config: &TensorCoreConfig,
    leave_out: bool,
) -> Result<usize> {
    spmm_tensor_core_paths(gpu, a, b, SpmmEpilogue::default(), c, config, RangeSum::Auto, Some(leave_out))
}

/// How many of A's windows of `config`'s height hold no entry; builds A's blocks on first use.
pub fn empty_windows<T: Scalar>(gpu: &Gpu, a: &DeviceCsr<T>, config: &TensorCoreConfig) -> Result<usize> {
    let blocks = a.tensor_core_blocks(gpu, BlockLayout::of(config)?)?;
    Ok(blocks.num_windows - blocks.num_busy)
}

/// How many of A's windows [`spmm_tensor_core`] with `config` on A with `n` columns leaves out of its grid
/// ([`leaves_out_empty_windows`]); builds A's blocks on first use.
pub fn skipped_empty_windows<T: Scalar>(
    gpu: &Gpu,
    a: &DeviceCsr<T>,
    n: usize,
    config: &TensorCoreConfig,
) -> Result<usize> {
    if n == 0 {
        return Ok(0);
    }
    let blocks = a.tensor_core_blocks(gpu, BlockLayout::of(config)?)?;
    let padded = padded_n(n);
    let plan = plan_splits(gpu, blocks, config, padded)?;
    Ok(blocks.windows_left_out(config, padded.div_ceil(config.columns_per_block()), plan.ranges, None))
}

/// The blocks a tensor-core launch spends on A's empty windows (empty windows x column slices) from which it
/// leaves those windows out of its grid for `spmm_zero_windows` to write ([`leaves_out_empty_windows`]).
pub const EMPTY_WINDOW_BLOCKS: usize = 3072;

/// Whether a tensor-core launch with `config` of `slices` column slices leaves A's `empty_windows` windows that hold
/// no entry out of its grid (which then walks only the windows that hold k-blocks, through `SpmmTcParams::windows`)
/// and has `spmm_zero_windows` write their rows first: where they would take [`EMPTY_WINDOW_BLOCKS`] blocks or more,
/// the launch does not split its windows' k-blocks (`splits` 1: the fix-up adds every window's partial tiles), and
/// the kernel is not the wgmma one.
///
/// Measured on the H200 (NOTES.md, "SpMM step 84"; tall banded matrices and block-sparse ones with empty rows of
/// blocks, every tensor-core kernel both ways, n = 128-1024): the second launch costs about 2 us, so a few empty
/// windows lose (up to 1.37x slower at 69 blocks on them); the mma.sync kernels lost at most 6% from 2,208 to 2,688
/// blocks and gained everywhere from 3,200 (0.96x to 0.22x of the time; banded 65,337 x 2,329, f16 16-row windows at
/// n = 1024: 236.1 -> 51.4 us). The wgmma kernel walks an empty window for little more than the stores of its zeros:
/// leaving them out never gained more than 4.4% and lost up to 1.44x, so it walks them. Held out (ten fresh tall
/// banded and block-sparse matrices, n = 64-768): 0.564x of the time in f16 and 0.562x in bf16 over 43 pairs each
/// (none slower), 0.739x in f32 over 26 (one slower, by 2.6%).
pub fn leaves_out_empty_windows(config: &TensorCoreConfig, empty_windows: usize, slices: usize, splits: usize) -> bool {
    !config.is_wgmma() && splits == 1 && empty_windows.saturating_mul(slices) >= EMPTY_WINDOW_BLOCKS
}

/// [`spmm_tensor_core`] with `epilogue` ([`SpmmEpilogue`]: alpha, beta, bias + ReLU) and the way split ranges are
/// added chosen ([`RangeSum`]) and A's empty windows left out of the grid or walked as `leave_out` says (None: by
/// [`leaves_out_empty_windows`]), as [`spmm_tensor_core_with`] and [`spmm_tensor_core_empty_windows`] do: the one
/// entry of every tensor-core path, public for tests and benchmarks of each. Returns how many windows it left out.
/// C is the same, bit for bit, on every path.
#[allow(clippy::too_many_arguments)]
pub fn spmm_tensor_core_paths<T: Scalar>(
    gpu: &Gpu,
    a: &DeviceCsr<T>,
    b: &DeviceDense<T>,
    epilogue: SpmmEpilogue,
    c: &mut DeviceDense<T>,
    config: &TensorCoreConfig,
    sum: RangeSum,
    leave_out: Option<bool>,
) -> Result<usize> {
    super::check_gpu_operands(gpu, a, b, c)?;
    super::check_shapes(a, b, c)?;
    super::check_bias(gpu, a, epilogue.bias)?;
    let (m, n) = (a.rows(), b.cols());
    check_tensor_core_here(gpu, config, T::DTYPE, m, n)?;
    if sum == RangeSum::Cluster && config.is_wgmma() {
        return Err(Error::Unsupported {
            config: config.kernel_name(),
            reason: "its split ranges are added by the fix-up, not in clusters".into(),
        });
    }
    let clusters = gpu.info().has_clusters() && !config.is_wgmma();
    if sum == RangeSum::Cluster && !clusters {
        return Err(Error::Unsupported {
            config: config.kernel_name(),
            reason: format!(
                "thread block clusters need compute capability 9.0, this device has {}.{}",
                gpu.info().compute_capability.0,
                gpu.info().compute_capability.1
            ),
        });
    }
    if m == 0 || n == 0 {
        return Ok(0);
    }
    let padded = padded_n(n);
    if padded == n {
        let (dense, _gb) = b.data.device_ptr(gpu.stream());
        let (out, _gc) = c.data.device_ptr_mut(gpu.stream());
        return launch_tensor_core(gpu, a, dense, out, epilogue, n, config, sum, clusters, leave_out);
    }
    let k = a.cols();
    if k > i32::MAX as usize {
        return Err(Error::TooLarge(format!("k = {k}: padding B to {padded} columns needs k to fit in i32")));
    }
    let stream = gpu.stream();
    let bytes = |rows: usize| std::mem::size_of::<T>() * rows * padded;
    // SAFETY: device buffers of plain elements; copy_rows writes every element of B's copy (zeros past column n)
    // before the product reads it, and the product writes every element of C's copy before copy_rows reads it
    // (where beta is not 0 it reads C's copy too: copy_rows fills it from C first). A buffer is never empty (k may
    // be 0: then nothing reads it).
    let mut b_padded = unsafe { stream.alloc::<T>(k.max(1) * padded) }
        .map_err(Error::driver("allocating B padded to a multiple of 8 columns", bytes(k.max(1))))?;
    let mut c_padded = unsafe { stream.alloc::<T>(m * padded) }
        .map_err(Error::driver("allocating C padded to a multiple of 8 columns", bytes(m)))?;
    copy_rows::<T>(gpu, &b.data, &mut b_padded, k, n, padded)?;
    if epilogue.reads_c() {
        copy_rows::<T>(gpu, &c.data, &mut c_padded, m, n, padded)?;
    }
    let left_out = {
        let (dense, _gb) = b_padded.device_ptr(stream);
        let (out, _gc) = c_padded.device_ptr_mut(stream);
        launch_tensor_core(gpu, a, dense, out, epilogue, padded, config, sum, clusters, leave_out)?
    };
    copy_rows::<T>(gpu, &c_padded, &mut c.data, m, padded, n)?;
    Ok(left_out)
}

/// dst (rows x dst_cols) = the first min(src_cols, dst_cols) columns of src (rows x src_cols), zeros after them
/// (`ts_copy_rows_b16`/`_b32` in cuda/util/util.cu). Both buffers hold at least rows x their columns elements.
fn copy_rows<T: Scalar>(
    gpu: &Gpu,
    src: &CudaSlice<T>,
    dst: &mut CudaSlice<T>,
    rows: usize,
    src_cols: usize,
    dst_cols: usize,
) -> Result<()> {
    assert!(src.len() >= rows * src_cols && dst.len() >= rows * dst_cols, "copy_rows: buffers too short");
    if rows == 0 || dst_cols == 0 {
        return Ok(());
    }
    debug_assert!(rows.max(src_cols).max(dst_cols) <= i32::MAX as usize, "checked by the caller");
    let name = match std::mem::size_of::<T>() {
        2 => "ts_copy_rows_b16",
        4 => "ts_copy_rows_b32",
        size => unreachable!("the tensor cores take 2- and 4-byte elements, not {size}"),
    };
    let function = gpu.function(Family::Util, name)?;
    let stream = gpu.stream();
    // One thread per element of dst.
    let cfg = crate::kernels::grid_stride_launch(rows * dst_cols);
    let (rows, src_cols, dst_cols) = (rows as i32, src_cols as i32, dst_cols as i32);
    let copy_cols = src_cols.min(dst_cols);
    let (src_ptr, _gs) = src.device_ptr(stream);
    let (dst_ptr, _gd) = dst.device_ptr_mut(stream);
    // SAFETY: the kernel reads rows x src_cols and writes rows x dst_cols elements of the element size its name
    // says (checked above; rows and columns fit in i32: m and padded_n by check_tensor_core, k by the caller), and
    // its loops stride over any grid.
    unsafe {
        stream
            .launch_builder(&function)
            .arg(&src_ptr)
            .arg(&dst_ptr)
            .arg(&rows)
            .arg(&src_cols)
            .arg(&dst_cols)
            .arg(&copy_cols)
            .launch(cfg)
    }
    .map_err(Error::driver("launching the row copy that pads B and C", 0))?;
    Ok(())
}

/// The launch (and fix-up, or fill of the empty windows' rows) of [`spmm_tensor_core_with`] on B and C at `dense`
/// and `out`, n a multiple of 8; returns how many empty windows it left out of the grid.
#[allow(clippy::too_many_arguments)]
fn launch_tensor_core<T: Scalar>(
    gpu: &Gpu,
    a: &DeviceCsr<T>,
    dense: u64,
    out: u64,
    epilogue: SpmmEpilogue,
    n: usize,
    config: &TensorCoreConfig,
    sum: RangeSum,
    clusters: bool,
    leave_out: Option<bool>,
) -> Result<usize> {
    debug_assert!(n % 8 == 0);
    let m = a.rows();
    let blocks = a.tensor_core_blocks(gpu, BlockLayout::of(config)?)?;
    let shared_mem_bytes = if config.is_wgmma() { WGMMA_SHARED_BYTES } else { 0 };
    // The kernel's twin `_s` takes the scalars: the plain kernel stores without testing for them, which cost the
    // plain product 5-13% on small problems (NOTES.md, "SpMM step 101").
    let kernel = gpu.tensor_core_kernel(config, epilogue.has_scalars(), shared_mem_bytes)?;
    let stream = gpu.stream();
    let slices = n.div_ceil(config.columns_per_block());
    let plan = plan_splits(gpu, blocks, config, n)?;
    let splits = plan.ranges;
    let (window_blocks, _g1) = blocks.window_blocks.device_ptr(stream);
    let (block_columns, _g2) = blocks.block_columns.device_ptr(stream);
    let (block_values, _g3) = blocks.block_values.device_ptr(stream);
    let (block_masks, _g4) = blocks.block_masks.device_ptr(stream);
    let window_heads = blocks.window_heads.as_ref().map(|h| h.device_ptr(stream));
    let bias_ptr = epilogue.bias.map(|s| s.device_ptr(stream));
    let bias = bias_ptr.as_ref().map_or(0, |(p, _)| *p);
    let mut params = SpmmTcParams {
        m: m as i32,
        n: n as i32,
        num_windows: blocks.num_windows as i32,
        splits: splits as i32,
        window_blocks,
        block_columns,
        block_values,
        block_masks,
        dense,
        out,
        partials: 0,
        windows: 0,
        window_heads: window_heads.as_ref().map_or(0, |(h, _)| *h),
        bias,
        alpha: epilogue.alpha,
        beta: epilogue.beta,
    };
    let left_out = blocks.windows_left_out(config, slices, splits, leave_out);
    let busy_windows = (left_out > 0).then(|| blocks.busy_windows.device_ptr(stream));
    let empty_windows = (left_out > 0).then(|| blocks.empty_windows.device_ptr(stream));
    if let Some((windows, _)) = &busy_windows {
        params.windows = *windows;
    }
    let grid_windows = if left_out > 0 { blocks.num_busy } else { blocks.num_windows };
    let cfg = LaunchConfig {
        grid_dim: (grid_windows as u32, slices as u32, splits as u32),
        block_dim: ((WARPS * 32) as u32, 1, 1),
        shared_mem_bytes,
    };
    if let Some((windows, _)) = &empty_windows {
        let zero = SpmmZeroWindowsParams {
            windows: *windows,
            count: left_out as i32,
            rows_per_window: blocks.rows_per_window as i32,
            m: m as i32,
            row_vectors: (n * std::mem::size_of::<T>() / 16) as i32,
            out,
            bias,
            alpha: epilogue.alpha,
            beta: epilogue.beta,
        };
        // A block per window, at most eight per SM (the kernel's loop takes the rest in turn).
        let cfg = LaunchConfig {
            grid_dim: (left_out.min(8 * gpu.info().sm_count.max(1)) as u32, 1, 1),
            block_dim: (ZERO_WINDOWS_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: `windows` holds the `left_out` empty windows, each < ceil(m / rows_per_window), alive with A's
        // blocks; C is m x n at `out` with n * size_of::<T>() a multiple of 16 (n a multiple of 8, 2- or 4-byte
        // elements), so each window's rows below m are whole 16-byte pieces of it; the loops stride over any grid.
        // The launch below leaves these windows out and writes none of their rows. A bias (m f32, check_bias) is
        // read at rows < m only.
        unsafe { stream.launch_builder(&kernel.zero_windows).arg(&zero).launch(cfg) }
            .map_err(Error::driver("launching the fill of the empty tensor-core windows", 0))?;
        if grid_windows == 0 {
            return Ok(left_out);
        }
    }
    // SAFETY (this launch and the next): the shapes and the config were checked (B is k x n, C is m x n, n a
    // multiple of 8 so 16-byte pieces of B rows and 4-byte stores of C are aligned); the blocks were built from
    // this matrix (the cache lives in it and is dropped when its structure changes) for windows of config.window
    // rows in the kernel's layout (BlockLayout::of; the wgmma kernel runs only where runs_on said so, with the
    // dynamic shared memory its limit was raised to when it was loaded): every slot column is < k or -1 (never
    // read), every window's k-blocks lie in the block arrays, windows cover rows < ceil(m / window) * window and rows >= m are
    // not stored; the grid has ceil(n / columns per block) column slices, each starting below n, and `splits`
    // ranges (1 for the narrow kernels, which ignore it); where it leaves the empty windows out (splits 1), its x
    // extent is the windows that hold k-blocks and `windows` names them, each < num_windows. Split ranges either
    // run as clusters of the `splits` (<= 8) blocks of a window, which add their tiles in the kernel and never touch
    // `partials`, or store partial tiles of splits x m x n f32 into `partials`. A bias, where given, holds m f32
    // (check_bias) and is read at rows < m only, by the launch that stores C (never with a partial tile); where beta
    // is not 0, that launch reads each element of C it stores just before, in the same thread.
    if splits > 1 && clusters && (sum == RangeSum::Cluster || (sum == RangeSum::Auto && plan.clusters_fit())) {
        match unsafe { gpu.launch_clustered(&kernel.function, cfg, splits as u32, params) } {
            Ok(()) => return Ok(left_out),
            Err(e) if sum == RangeSum::Cluster => {
                return Err(Error::driver("launching the tensor-core SpMM with clusters", 0)(e));
            }
            // The device cannot schedule the clusters (e.g. a partition with too few SMs per GPC): add the
            // ranges with the fix-up instead.
            Err(_) => {}
        }
    }
    let partials = if splits > 1 {
        // SAFETY: f32 scratch; every element the fix-up reads is written first (each range's block stores its
        // whole tile of rows < m and columns < n, zeros for an empty range).
        Some(
            unsafe { stream.alloc::<f32>(splits * m * n) }
                .map_err(Error::driver("allocating tensor-core partial tiles", 4 * splits * m * n))?,
        )
    } else {
        None
    };
    let partials_ptr = partials.as_ref().map(|p| p.device_ptr(stream));
    params.partials = partials_ptr.as_ref().map_or(0, |(p, _)| *p);
    unsafe { stream.launch_builder(&kernel.function).arg(&params).launch(cfg) }
        .map_err(Error::driver("launching the tensor-core SpMM", 0))?;
    if splits > 1 {
        let pairs = m * n / 2;
        let cfg = LaunchConfig {
            grid_dim: (pairs.div_ceil(FIXUP_THREADS as usize).min(65_535) as u32, 1, 1),
            block_dim: (FIXUP_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: partials holds splits x m x n f32, all written by the launch before on this stream; C is
        // m x n with n even (aligned pairs); the loop strides over the grid.
        unsafe { stream.launch_builder(&kernel.fixup).arg(&params).launch(cfg) }
            .map_err(Error::driver("launching the tensor-core fix-up", 0))?;
    }
    Ok(left_out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn blocks_hold_every_entry_once_in_fragment_order() {
        // 37 rows (three windows, the last partial), 50 columns, uneven rows, an empty row, a row with 20 entries.
        let mut indptr = vec![0usize];
        let mut indices = Vec::new();
        let mut values = Vec::new();
        for r in 0..37usize {
            let len = match r {
                5 => 0,
                9 => 20,
                _ => (r * 7) % 6,
            };
            let mut cols: Vec<usize> = (0..len).map(|j| (r * 13 + j * 17) % 50).collect();
            cols.sort_unstable();
            cols.dedup();
            for c in cols {
                indices.push(c);
                values.push((r * 100 + c) as u16);
            }
            indptr.push(indices.len());
        }
        let mut want: Vec<(usize, usize, u16)> = Vec::new();
        for r in 0..37 {
            for e in indptr[r]..indptr[r + 1] {
                want.push((r, indices[e], values[e]));
            }
        }
        // 16-row windows: three, the last partial; 64-row windows: one, partial; f32 values (32-bit, another
        // fragment order) in 64-row windows.
        let values32: Vec<u32> = values.iter().map(|&v| 0x4000_0000 | v as u32).collect();
        let b32 = HostBlocks::build(&indptr, &indices, &values32, WIDE_WINDOW);
        let b16 = HostBlocks::build(&indptr, &indices, &values, WIDE_WINDOW);
        assert_eq!((&b32.block_columns, &b32.block_masks), (&b16.block_columns, &b16.block_masks));
        for (blk, chunk) in b32.block_values.chunks(WIDE_WINDOW * 16).enumerate() {
            for r in 0..WIDE_WINDOW {
                for j in 0..16 {
                    let (v32, v16) =
                        (chunk[fragment_index_f32(r, j)], b16.block_values[blk * 1024 + fragment_index(r, j)]);
                    assert_eq!(v32, if v16 == 0 { 0 } else { 0x4000_0000 | v16 as u32 }, "block {blk}, ({r}, {j})");
                }
            }
        }
        for (rows_per_window, windows) in [(WINDOW, 3), (MID_WINDOW, 2), (WIDE_WINDOW, 1)] {
            let b = HostBlocks::build(&indptr, &indices, &values, rows_per_window);
            assert_eq!(b.window_blocks.len(), windows + 1);
            let per_block = rows_per_window * 16;
            assert_eq!(b.block_values.len(), b.num_blocks() * per_block);
            assert_eq!(b.block_masks.len(), b.num_blocks() * rows_per_window);
            // Decode every block back to (row, column, value) and compare with the CSR, entry for entry.
            let mut decoded = Vec::new();
            for w in 0..windows {
                let (first, last) = (b.window_blocks[w] as usize, b.window_blocks[w + 1] as usize);
                let cols = &b.block_columns[first * 16..last * 16];
                // The window's slots are its rows' sorted distinct columns, then -1 padding (fewer than 16).
                let real: Vec<i32> = cols.iter().copied().filter(|&c| c >= 0).collect();
                assert!(real.windows(2).all(|p| p[0] < p[1]));
                assert!(cols[real.len()..].iter().all(|&c| c == -1) && cols.len() - real.len() < 16);
                for blk in first..last {
                    for r in 0..rows_per_window {
                        for j in 0..16 {
                            let v = b.block_values[blk * per_block + fragment_index(r, j)];
                            let stored = b.block_masks[blk * rows_per_window + r] >> j & 1 == 1;
                            if stored {
                                decoded.push((w * rows_per_window + r, b.block_columns[blk * 16 + j] as usize, v));
                            } else {
                                assert_eq!(v, 0, "an unstored slot must hold zero");
                            }
                        }
                    }
                }
            }
            decoded.sort_unstable();
            assert_eq!(decoded, want, "{rows_per_window}-row windows");
        }
        // fragment_index and fragment_index_f32 are permutations of 0..256 on each 16-row tile, tile t at 256 t.
        for index in [fragment_index, fragment_index_f32] {
            let mut seen = [false; 1024];
            for r in 0..64 {
                for j in 0..16 {
                    let at = index(r, j);
                    assert_eq!(at / 256, r / 16);
                    assert!(!std::mem::replace(&mut seen[at], true));
                }
            }
        }
        // The f32 order is the mma.m16n8k8 A fragment: lane 4 g + t holds (g, t), (g + 8, t), (g, t + 4),
        // (g + 8, t + 4) of each k8 half, the second half 128 values on.
        assert_eq!(fragment_index_f32(0, 0), 0);
        assert_eq!(fragment_index_f32(8, 0), 1);
        assert_eq!(fragment_index_f32(0, 4), 2);
        assert_eq!(fragment_index_f32(9, 7), (4 + 3) * 4 + 3);
        assert_eq!(fragment_index_f32(2, 9), 128 + (8 + 1) * 4);
    }

    #[test]
    fn core_matrices_hold_every_entry_in_wgmma_order() {
        // K-major core matrices: 16 bytes (4 slots) per row, 8 rows per matrix, the two matrices of a k8 half
        // 128 bytes apart, the row groups 256 bytes apart, the second half 2048 bytes on.
        assert_eq!(core_index_f32(0, 0), 0);
        assert_eq!(core_index_f32(0, 3), 3);
        assert_eq!(core_index_f32(1, 0), 4);
        assert_eq!(core_index_f32(0, 4), 32);
        assert_eq!(core_index_f32(8, 0), 64);
        assert_eq!(core_index_f32(63, 15), 1023);
        assert_eq!(core_index_f32(0, 8), 512);
        let mut seen = [false; 1024];
        for r in 0..64 {
            for j in 0..16 {
                assert!(!std::mem::replace(&mut seen[core_index_f32(r, j)], true), "({r}, {j})");
            }
        }
        // Built in core order, every entry lands where core_index_f32 says, with the same columns and masks as
        // the fragment order: 70 rows (two windows, the second partial), uneven rows.
        let mut indptr = vec![0usize];
        let (mut indices, mut values) = (Vec::new(), Vec::new());
        for r in 0..70usize {
            let mut cols: Vec<usize> = (0..(r * 5) % 9).map(|j| (r * 7 + j * 11) % 40).collect();
            cols.sort_unstable();
            cols.dedup();
            for c in cols {
                indices.push(c);
                values.push(1 + (r * 100 + c) as u32);
            }
            indptr.push(indices.len());
        }
        let core = HostBlocks::build_in(&indptr, &indices, &values, WIDE_WINDOW, core_index_f32);
        let frag = HostBlocks::build(&indptr, &indices, &values, WIDE_WINDOW);
        assert_eq!((&core.block_columns, &core.block_masks), (&frag.block_columns, &frag.block_masks));
        for blk in 0..core.num_blocks() {
            for r in 0..WIDE_WINDOW {
                for j in 0..16 {
                    let (c, f) = (
                        core.block_values[blk * 1024 + core_index_f32(r, j)],
                        frag.block_values[blk * 1024 + fragment_index_f32(r, j)],
                    );
                    assert_eq!(c, f, "block {blk}, ({r}, {j})");
                }
            }
        }
    }

    /// `spmm_tc_values_<order>` takes a chunk's 16 bytes as runs of consecutive slots of one or two rows, from its
    /// first value's (row, slot) (cuda/spmm/tc_values.cuh): fragment16 rows r, r + 8 at slots s, s + 1, then
    /// s + 8, s + 9; fragment32 rows r, r + 8 at slot s, then s + 4; core32 row r at slots s to s + 3. Every
    /// value of every chunk must be where its order's inverse index puts it.
    #[test]
    fn each_chunk_of_new_values_is_the_kernels_runs_of_slots() {
        type Slot = fn(usize) -> (usize, usize);
        type Offsets = fn(usize) -> (usize, usize);
        let orders: [(&str, Slot, usize, Offsets, &[usize]); 3] = [
            (
                "fragment16",
                fragment_slot,
                8,
                |i| (i / 2 % 2 * 8, i % 2 + i / 4 * 8),
                &[WINDOW, MID_WINDOW, WIDE_WINDOW],
            ),
            ("fragment32", fragment_slot_f32, 4, |i| (i % 2 * 8, i / 2 * 4), &[WINDOW, MID_WINDOW, WIDE_WINDOW]),
            ("core32", core_slot_f32, 4, |i| (0, i), &[WIDE_WINDOW]),
        ];
        for (name, slot, chunk, offsets, windows) in orders {
            for &rows in windows {
                for c in 0..rows * SLOTS / chunk {
                    let (r, s) = slot(c * chunk);
                    for i in 0..chunk {
                        let (dr, ds) = offsets(i);
                        assert_eq!(slot(c * chunk + i), (r + dr, s + ds), "{name}, {rows} rows, chunk {c}, value {i}");
                    }
                }
            }
        }
    }

    /// The slot functions invert the index functions on every window height, and blocks built with one set of
    /// values and rewritten value by value from another ([`HostBlocks::rewrite_values`], the host twin of
    /// `spmm_tc_values_<order>`) equal blocks built from the other: every order, every window height, rows of
    /// every length in a k-block (none, one, all 16 slots, a row whose entries span many k-blocks), an empty
    /// window, a last window part past the rows.
    #[test]
    fn new_values_rewritten_in_block_order_equal_a_fresh_build() {
        for rows in [WINDOW, MID_WINDOW, WIDE_WINDOW] {
            for (index, slot) in [
                (fragment_index as fn(usize, usize) -> usize, fragment_slot as fn(usize) -> (usize, usize)),
                (fragment_index_f32, fragment_slot_f32),
            ] {
                for at in 0..rows * SLOTS {
                    let (r, j) = slot(at);
                    assert!(r < rows && j < SLOTS, "{at} -> ({r}, {j})");
                    assert_eq!(index(r, j), at, "({r}, {j}) at {at}, windows of {rows}");
                }
            }
        }
        for at in 0..WIDE_WINDOW * SLOTS {
            let (r, j) = core_slot_f32(at);
            assert_eq!(core_index_f32(r, j), at, "({r}, {j}) at {at}");
        }
        let m = 150;
        let mut indptr = vec![0usize];
        let mut indices = Vec::new();
        for r in 0..m {
            let cols: Vec<usize> = match r {
                64..=127 => Vec::new(),
                3 => (0..90).collect(),
                7 => (16..32).collect(),
                _ => (0..(r * 7) % 13).map(|j| (r * 31 + j * 23) % 90).collect::<BTreeSet<_>>().into_iter().collect(),
            };
            indices.extend(cols);
            indptr.push(indices.len());
        }
        let (old, new): (Vec<u32>, Vec<u32>) =
            (0..indices.len()).map(|e| (e as u32 + 1, 0x4000_0000 | e as u32)).unzip();
        let bits16 = |v: &[u32]| v.iter().map(|&x| x as u16 ^ 0x5a5a).collect::<Vec<u16>>();
        for rows in [WINDOW, MID_WINDOW, WIDE_WINDOW] {
            let mut b = HostBlocks::build(&indptr, &indices, &bits16(&old), rows);
            b.rewrite_values(&bits16(&new), fragment_slot);
            assert_eq!(b, HostBlocks::build(&indptr, &indices, &bits16(&new), rows), "16-bit, windows of {rows}");
            let mut b = HostBlocks::build(&indptr, &indices, &old, rows);
            b.rewrite_values(&new, fragment_slot_f32);
            assert_eq!(b, HostBlocks::build(&indptr, &indices, &new, rows), "f32, windows of {rows}");
        }
        let mut b = HostBlocks::build_in(&indptr, &indices, &old, WIDE_WINDOW, core_index_f32);
        b.rewrite_values(&new, core_slot_f32);
        assert_eq!(b, HostBlocks::build_in(&indptr, &indices, &new, WIDE_WINDOW, core_index_f32), "core matrices");
    }

    #[test]
    fn count_blocks_matches_the_built_blocks() {
        let a = crate::gen::power_law(300, 257, 20.0, 1.5, 3);
        let (indptr, indices) = (a.proper_indptr().to_vec(), a.indices().to_vec());
        let ones = vec![1u16; indices.len()];
        let wide: Vec<usize> = indices.iter().map(|&c| c * 1000).collect();
        for rows_per_window in [WINDOW, MID_WINDOW, WIDE_WINDOW] {
            let b = HostBlocks::build(&indptr, &indices, &ones, rows_per_window);
            assert_eq!(count_blocks(257, &indptr, &indices, rows_per_window), b.num_blocks());
            assert_eq!(count_blocks(5, &[0], &[], rows_per_window), 0);
            // The sorting path (many more columns than entries) agrees.
            assert_eq!(count_blocks(257_000, &indptr, &wide, rows_per_window), b.num_blocks());
        }
        let counts = BlockCounts::of(257, &indptr, &indices);
        assert!(counts.wide < counts.narrow, "{counts:?}: 64-row windows share columns");
        // BlockCounts::of walks the entries once for all three heights: the same numbers as count_blocks per height,
        // on partial last windows (300, 37 and 1 rows), empty rows and windows, one dense row, blocks of 32 rows, no
        // entries, and the sorting path.
        let per_height = |cols: usize, indptr: &[usize], indices: &[usize]| BlockCounts {
            narrow: count_blocks(cols, indptr, indices, WINDOW),
            mid: count_blocks(cols, indptr, indices, MID_WINDOW),
            wide: count_blocks(cols, indptr, indices, WIDE_WINDOW),
        };
        let matrices = [
            a.clone(),
            crate::gen::with_empty_rows(&crate::gen::uniform_random(37, 90, 0.3, 4), 0.5, 5),
            crate::gen::with_dense_row(&crate::gen::uniform_random(130, 700, 0.01, 6), 70),
            crate::gen::block_sparse(200, 300, 32, 32, 0.3, 7),
            crate::gen::uniform_random(1, 40, 0.5, 8),
            sprs::CsMat::zero((100, 50)),
        ];
        for m in &matrices {
            let (indptr, indices) = (m.proper_indptr().to_vec(), m.indices().to_vec());
            assert_eq!(BlockCounts::of(m.cols(), &indptr, &indices), per_height(m.cols(), &indptr, &indices));
        }
        assert_eq!(BlockCounts::of(257_000, &indptr, &wide), per_height(257_000, &indptr, &wide), "sorting path");
        // Large enough for ranges of 64-row windows in parallel: uneven rows (so the ranges' ends are not evenly
        // spaced), a partial last window, and rows sharing columns across the ranges' ends, in pools of 1-7 threads.
        let big = crate::gen::power_law(30_001, 2_000, 12.0, 1.6, 9);
        let (indptr, indices) = (big.proper_indptr().to_vec(), big.indices().to_vec());
        assert!(crate::csr::in_parallel(indptr.len() + indices.len()));
        let want = per_height(2_000, &indptr, &indices);
        for threads in [1, 2, 3, 7] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            assert_eq!(pool.install(|| BlockCounts::of(2_000, &indptr, &indices)), want, "{threads} threads");
        }
    }

    #[test]
    fn busy_windows_and_the_rows_of_the_empty_ones() {
        // 150 rows: entries in rows 20, 70-79 and 149. The 16-row windows 1 (16-31), 4 (64-79) and 9 (144-149, the
        // partial last one) hold them; the others are empty. Every 64-row window holds one.
        let mut indptr = vec![0usize];
        let mut indices = Vec::new();
        for r in 0..150 {
            if r == 20 || (70..80).contains(&r) || r == 149 {
                indices.extend([r % 7, 9]);
            }
            indptr.push(indices.len());
        }
        let values = vec![1u16; indices.len()];
        let narrow = HostBlocks::build(&indptr, &indices, &values, WINDOW);
        assert_eq!(narrow.busy_windows(), (vec![1, 4, 9], vec![0, 2, 3, 5, 6, 7, 8]));
        let wide = HostBlocks::build(&indptr, &indices, &values, WIDE_WINDOW);
        assert_eq!(wide.busy_windows(), (vec![0, 1, 2], vec![]));
        // No entries: every window empty, the last one partial.
        let none = HostBlocks::build(&[0; 41], &[], &[] as &[u16], WIDE_WINDOW);
        assert_eq!(none.busy_windows(), (vec![], vec![0]));
        let none = HostBlocks::build(&[0; 41], &[], &[] as &[u16], WINDOW);
        assert_eq!(none.busy_windows(), (vec![], vec![0, 1, 2]));
        // The rule: the blocks on empty windows from EMPTY_WINDOW_BLOCKS; a launch that splits, and the wgmma
        // kernel, never.
        let narrow: TensorCoreConfig = "spmm_tc_f16_n4".parse().unwrap();
        let wide: TensorCoreConfig = "spmm_tc_f32_w64_n8".parse().unwrap();
        let wgmma: TensorCoreConfig = "spmm_tc_f32_w64_n16".parse().unwrap();
        assert!(wgmma.is_wgmma() && !wide.is_wgmma());
        for config in [narrow, wide] {
            assert!(leaves_out_empty_windows(&config, EMPTY_WINDOW_BLOCKS, 1, 1));
            assert!(leaves_out_empty_windows(&config, 96, 32, 1));
            assert!(!leaves_out_empty_windows(&config, 95, 32, 1));
            assert!(!leaves_out_empty_windows(&config, EMPTY_WINDOW_BLOCKS, 1, 2));
            assert!(!leaves_out_empty_windows(&config, 0, 1 << 20, 1));
        }
        assert!(!leaves_out_empty_windows(&wgmma, 1 << 20, 32, 1));
    }

    #[test]
    fn window_heads_hold_each_windows_first_k_blocks() {
        // 160 rows over k = 1100: row 0 stores columns 0, 5, 10, ..., 995 (200 columns: 13 k-blocks in its window),
        // row 130 columns 1000-1039 (3 k-blocks, the last half padding); every other row is empty.
        let mut indptr = vec![0usize];
        let mut indices = Vec::new();
        for r in 0..160 {
            if r == 0 {
                indices.extend((0..200).map(|j| 5 * j));
            } else if r == 130 {
                indices.extend(1000..1040);
            }
            indptr.push(indices.len());
        }
        let values = vec![1u16; indices.len()];
        let slots = |first: usize| -> Vec<i32> { (first..first + SLOTS).map(|c| c as i32).collect() };
        let padding = vec![-1; SLOTS];
        for (rows, windows, long, short) in [(WIDE_WINDOW, 3, 0, 2), (MID_WINDOW, 5, 0, 4)] {
            let blocks = HostBlocks::build(&indptr, &indices, &values, rows);
            let heads = blocks.window_heads();
            assert_eq!(heads.len(), windows * HEAD_BLOCKS * SLOTS, "{rows}-row windows");
            let head = |w: usize, b: usize| &heads[(w * HEAD_BLOCKS + b) * SLOTS..(w * HEAD_BLOCKS + b + 1) * SLOTS];
            for b in 0..HEAD_BLOCKS {
                // The long window's first 8 of 13 k-blocks: columns 80 b, 80 b + 5, ... (16 of them).
                let expected: Vec<i32> = (0..SLOTS).map(|j| (5 * (SLOTS * b + j)) as i32).collect();
                assert_eq!(head(long, b), &expected[..], "{rows}-row window {long}, k-block {b}");
                let expected = match b {
                    0 => slots(1000),
                    1 => slots(1016),
                    2 => [slots(1032)[..8].to_vec(), vec![-1; 8]].concat(),
                    _ => padding.clone(),
                };
                assert_eq!(head(short, b), &expected[..], "{rows}-row window {short}, k-block {b}");
                for w in (long + 1)..short {
                    assert_eq!(head(w, b), &padding[..], "{rows}-row empty window {w}");
                }
            }
        }
        // No windows with k-blocks at all, and no rows.
        assert!(HostBlocks::build(&[0; 41], &[], &[] as &[u16], WIDE_WINDOW).window_heads().iter().all(|&c| c == -1));
        assert!(HostBlocks::build(&[0], &[], &[] as &[u16], WIDE_WINDOW).window_heads().is_empty());
    }

    /// `uneven_few_rows_wide_n`: either side of each bound (rows, n, cv, fill, pairs), f16 and bf16 only.
    #[test]
    fn uneven_rows_at_a_wide_n_take_the_wide_windows_from_five_percent() {
        // 640 rows: 10 windows; 1280 wide blocks: 5% full at 65,536 entries.
        let pick = |dtype, m: usize, n: usize, nnz: usize, cv: f64, wide: usize| {
            uneven_few_rows_wide_n(dtype, m, n, nnz, &rows(cv), BlockCounts { narrow: 4 * wide, wide, mid: 0 })
                .map(|c| (c.window, c.tiles_n))
        };
        for dtype in [DType::F16, DType::Bf16] {
            assert_eq!(pick(dtype, 640, 1024, 65_536, 1.3, 1_280), Some((64, 8)), "{dtype}");
            assert_eq!(pick(dtype, 640, 2048, 65_536, 1.3, 1_280), Some((64, 16)), "{dtype}: 10 x 16 blocks of 128");
            assert_eq!(pick(dtype, 640, 1024, 65_535, 1.3, 1_280), None, "{dtype}: under 5%");
            assert_eq!(pick(dtype, 640, 960, 65_536, 1.3, 1_280), None, "{dtype}");
            assert_eq!(pick(dtype, 640, 2112, 65_536, 1.3, 1_280), None, "{dtype}");
            assert_eq!(pick(dtype, 640, 1088, 65_536, 1.3, 1_280), Some((64, 8)), "{dtype}");
            assert_eq!(pick(dtype, 640, 1032, 65_536, 1.3, 1_280), None, "{dtype}: not a multiple of 64");
            assert_eq!(pick(dtype, 640, 1024, 65_536, 0.84, 1_280), None, "{dtype}: even rows");
            assert_eq!(pick(dtype, 640, 1024, 65_536, 0.85, 1_280), Some((64, 8)), "{dtype}");
            assert_eq!(pick(dtype, 640, 1024, 65_536, 2.0, 1_280), Some((64, 8)), "{dtype}");
            assert_eq!(pick(dtype, 640, 1024, 65_536, 2.01, 1_280), None, "{dtype}");
            assert_eq!(pick(dtype, 383, 1024, 39_322, 1.3, 768), None, "{dtype}: 383 rows");
            assert_eq!(pick(dtype, 384, 1024, 39_322, 1.3, 768), Some((64, 8)), "{dtype}");
            assert_eq!(pick(dtype, 1023, 1024, 65_536, 1.3, 1_280), Some((64, 16)), "{dtype}: 16 x 8 blocks");
            assert_eq!(pick(dtype, 1024, 1024, 65_536, 1.3, 1_280), None, "{dtype}: select_tensor_core's rows");
            // Pairs: 299 wide blocks at n = 1024 are 4784, 300 are 4800.
            assert_eq!(pick(dtype, 640, 1024, 15_400, 1.3, 300), Some((64, 8)), "{dtype}");
            assert_eq!(pick(dtype, 640, 1024, 15_400, 1.3, 299), None, "{dtype}");
            assert_eq!(pick(dtype, 640, 1024, 0, 1.3, 0), None, "{dtype}: no blocks");
        }
        assert_eq!(pick(DType::F32, 640, 1024, 65_536, 1.3, 1_280), None);
    }

    /// `narrow_windows_fuller`: either side of each bound (the fill ratio at n = 128 and above, the k-blocks per
    /// window from n = 257 in 1024 rows or more, the widths), in both wide branches, and on real block-sparse and
    /// uniform matrices; f32 keeps its 64-row windows.
    #[test]
    fn rows_sharing_columns_in_blocks_take_the_16_row_windows() {
        let sel = |dtype, m: usize, n: usize, nnz: usize, narrow: usize, wide: usize| {
            select_tensor_core(dtype, m, n, nnz, BlockCounts { narrow, wide, mid: 0 }).map(|c| (c.window, c.tiles_n))
        };
        // 4096 rows (256 16-row windows, 64 64-row ones), 25% full in the 64-row windows: 4096 wide blocks of 1024
        // slots for 1,048,576 entries. The 16-row windows 2.6 times as full: 4 x 4096 / 2.6 = 6301.5 blocks.
        let (m, nnz, wide) = (4096, 1 << 20, 4096);
        for dtype in [DType::F16, DType::Bf16] {
            assert_eq!(sel(dtype, m, 128, nnz, 6_301, wide), Some((16, 8)), "{dtype}: 2.6x as full at n = 128");
            assert_eq!(sel(dtype, m, 256, nnz, 6_301, wide), Some((16, 8)), "{dtype}: at n = 256");
            assert_eq!(sel(dtype, m, 136, nnz, 6_301, wide), Some((16, 8)), "{dtype}: n = 129 padded");
            assert_eq!(sel(dtype, m, 256, nnz, 6_302, wide), Some((64, 16)), "{dtype}: just under 2.6x");
            // At n = 128 from 2.2 times with 6 k-blocks per 16-row window (1536 for 256 windows): 4 x 4096 / 2.2 =
            // 7447.3 blocks, 29 per window; 179,200 entries in 700 wide blocks and 1272 narrow ones are 2.2013 times
            // with 4.97 per window, in 1000 wide blocks and 1076 narrow ones 3.7 times with 4.2.
            assert_eq!(sel(dtype, m, 128, nnz, 7_447, wide), Some((16, 8)), "{dtype}: 2.2x at n = 128");
            assert_eq!(sel(dtype, m, 128, nnz, 7_448, wide), Some((64, 16)), "{dtype}: just under 2.2x");
            assert_eq!(sel(dtype, m, 136, nnz, 7_447, wide), Some((64, 16)), "{dtype}: 2.2x above n = 128");
            assert_eq!(sel(dtype, m, 128, 179_200, 1_272, 700).map(|c| c.0), Some(64), "{dtype}: 4.97 per window");
            assert_eq!(sel(dtype, m, 128, 179_200, 1_076, 1_000), Some((16, 8)), "{dtype}: 3.7x, 4.2 per window");
            // From n = 257: 2.9 times (4 x 4096 / 2.9 = 5649.7) and at least 12 blocks per 16-row window (3072), or
            // fewer than 1024 rows.
            assert_eq!(sel(dtype, m, 264, nnz, 5_649, wide), Some((16, 8)), "{dtype}: 2.9x, 22 per window");
            assert_eq!(sel(dtype, m, 264, nnz, 5_650, wide), Some((64, 16)), "{dtype}: just under 2.9x");
            assert_eq!(sel(dtype, m, 2048, nnz, 3_072, wide), Some((16, 8)), "{dtype}: 12 blocks per window");
            let few = (m, 1 << 19, 2_048);
            assert_eq!(sel(dtype, few.0, 2048, few.1, 3_071, few.2), Some((64, 16)), "{dtype}: 11.996 per window");
            assert_eq!(sel(dtype, few.0, 256, few.1, 3_071, few.2), Some((16, 8)), "{dtype}: n = 256");
            // Outside n = 128-2048 (n = 2056 padded).
            assert_eq!(sel(dtype, m, 2056, nnz, 3_072, wide), Some((64, 16)), "{dtype}: n = 2056");
            assert_eq!(sel(dtype, m, 120, nnz, 4_096, wide).map(|c| c.0), Some(64), "{dtype}: n = 120");
            // Fewer than 1024 rows (the few-row wide branch, n >= 512): no bound on blocks per window. 768 rows: 12
            // wide windows, 48 narrow ones; 768 wide blocks 10% full for 78,643 entries; 2.9 times: 1059.3 blocks.
            assert_eq!(sel(dtype, 768, 1024, 78_643, 768, 768), Some((16, 8)), "{dtype}: 768 rows, 16 per window");
            assert_eq!(sel(dtype, 768, 1024, 78_643, 1_059, 768), Some((16, 8)), "{dtype}: 2.9x");
            assert_eq!(sel(dtype, 768, 1024, 78_643, 1_060, 768), Some((64, 8)), "{dtype}: just under 2.9x");
        }
        assert_eq!(sel(DType::F32, m, 1024, nnz, 3_072, wide).map(|c| c.0), Some(64), "f32: 64-row windows only");
        // Generated, 4096 x 1024: 16 x 16 blocks at 10% fill the 16-row windows (29% full in 64 rows), but hold 6.4
        // k-blocks per 16-row window; uniform rows at 10% do not move.
        let counts = |a: &sprs::CsMat<f32>| BlockCounts::of(a.cols(), a.indptr().raw_storage(), a.indices());
        let blocks = crate::gen::block_sparse(4096, 1024, 16, 16, 0.1, 5);
        let uniform = crate::gen::uniform_random(4096, 1024, 0.1, 5);
        let (b, u) = (counts(&blocks), counts(&uniform));
        let window = |a: &sprs::CsMat<f32>, counts, n| {
            select_tensor_core(DType::F16, 4096, n, a.nnz(), counts).map(|c| c.window)
        };
        assert_eq!(window(&blocks, b, 128), Some(16));
        assert_eq!(window(&blocks, b, 1024), Some(64), "6.4 k-blocks per 16-row window");
        assert_eq!(window(&uniform, u, 128), Some(64));
        assert_eq!(window(&uniform, u, 1024), Some(64));
    }

    #[test]
    fn f32_rows_sharing_columns_take_the_16_row_windows() {
        let sel = |m: usize, n: usize, nnz: usize, narrow: usize, wide: usize| {
            f32_narrow_windows(m, n, nnz, BlockCounts { narrow, wide, mid: 0 }).map(|c| (c.dtype, c.window, c.tiles_n))
        };
        let narrow_f32 = Some((DType::F32, 16, 4));
        // 4096 rows: 256 16-row windows, 64 64-row ones. 2^20 entries in 4096 narrow blocks (full, 16 per window) and
        // 4096 wide ones (25%): 4 times as full, at every n from 128 to 2048.
        let (m, nnz) = (4096, 1 << 20);
        for n in [128, 256, 264, 1024, 2048, 130] {
            assert_eq!(sel(m, n, nnz, 4_096, 4_096), narrow_f32, "n = {n}");
        }
        assert_eq!(sel(m, 2056, nnz, 4_096, 4_096), None, "n = 2056");
        assert_eq!(sel(m, 120, nnz, 4_096, 4_096), None, "n = 120");
        assert_eq!(sel(m, 0, nnz, 4_096, 4_096), None, "n = 0");
        // Above n = 256 from 2.2 times as full: 2253 wide blocks are 2.2002 times, 2252 2.1992.
        assert_eq!(sel(m, 1024, nnz, 4_096, 2_253), narrow_f32);
        assert_eq!(sel(m, 1024, nnz, 4_096, 2_252), None, "just under 2.2 times");
        // ... with 3 k-blocks per window (768 blocks) where under 90% full: 98,176 entries, 500 wide blocks (2.6x).
        assert_eq!(sel(m, 1024, 98_176, 768, 500), narrow_f32, "3 per window");
        assert_eq!(sel(m, 1024, 98_176, 767, 500), None, "2.996 per window");
        // At n <= 256 in at most 4096 rows and 8192 (k-block, 64-column slice) pairs, from 1.15 times as full (4 x
        // wide / narrow): 45% full (9102 blocks; 9103 are 44.996%), 1.8 times, 4096 wide blocks at n = 128 (8192
        // pairs).
        assert_eq!(sel(m, 128, nnz, 9_102, 4_096), narrow_f32, "45% full, 1.8 times, n = 128");
        assert_eq!(sel(m, 128, nnz, 9_103, 4_096), None, "just under 45% full");
        assert_eq!(sel(m, 128, nnz, 9_102, 4_097), None, "8194 pairs");
        assert_eq!(sel(m + 1, 128, nnz, 9_102, 4_096), None, "4097 rows");
        assert_eq!(sel(m, 136, nnz, 9_102, 4_096), None, "n = 136: 12288 pairs");
        assert_eq!(sel(m, 128, nnz, 9_102, 2_617), narrow_f32, "1.15008 times");
        assert_eq!(sel(m, 128, nnz, 9_102, 2_616), None, "1.14964 times");
        // Uniform 4096 x 1024 at 50% (64 k-blocks per window in both heights) at n = 128: as full, 8192 pairs.
        assert_eq!(sel(m, 128, 1 << 21, 16_384, 4_096), None, "uniform 4096 x 1024 at 50%");
        // n = 256: 2^19 entries, 4096 narrow blocks (50%), 2048 wide ones (25%, 2 times; 8192 pairs).
        assert_eq!(sel(m, 256, 1 << 19, 4_096, 2_048), narrow_f32, "2 times at n = 256");
        assert_eq!(sel(m, 264, 1 << 19, 4_096, 2_048), None, "2 times at n = 264");
        // At least 1.25 k-blocks per 16-row window (320 of 256 windows); 40,832 entries fill 320 blocks to 49.8%.
        assert_eq!(sel(m, 128, 40_832, 320, 100), narrow_f32, "1.25 per window");
        assert_eq!(sel(m, 128, 40_832, 319, 100), None, "1.246 per window");
        // n not a multiple of 8 from PADDED_MIN_WORK only: 40,832 x 136 is under it.
        assert_eq!(sel(m, 130, 40_832, 320, 100), None, "padded, too little work");
        assert_eq!(sel(m, 128, 0, 0, 0), None, "no entries");
        // The suite's uniform 4096^2 at 50% (every window's union is all 4096 columns) keeps the 64-row windows.
        assert_eq!(sel(m, 128, 8_388_608, 65_536, 16_384), None, "uniform 50%");

        // Through SpmmKernel::select, on generated matrices: 32 x 32 blocks on 1024 x 4096 at 5% at n = 128 (the
        // 64-row windows before, 2.7 times the time) and 16 x 16 blocks on 4096 x 4096 at 10% at n = 2048 take the
        // 16-row windows; uniform rows at 10% and 4 x 4 blocks at 10% (29% full) do not.
        let choose = |a: &sprs::CsMat<f32>, n: usize| {
            let (indptr, indices) = (a.indptr().raw_storage().to_vec(), a.indices().to_vec());
            let stats = crate::csr::RowStats::of_csr(&indptr, &indices);
            let counts = BlockCounts::of(a.cols(), &indptr, &indices);
            crate::spmm::SpmmKernel::select(a.rows(), a.cols(), n, a.nnz(), &stats, DType::F32, Some(counts))
        };
        let narrow =
            crate::spmm::SpmmKernel::TensorCore(TensorCoreConfig { dtype: DType::F32, window: 16, tiles_n: 4 });
        assert_eq!(choose(&crate::gen::block_sparse(1024, 4096, 32, 32, 0.05, 8037), 128), narrow);
        assert_eq!(choose(&crate::gen::block_sparse(4096, 4096, 16, 16, 0.1, 8056), 2048), narrow);
        assert_ne!(choose(&crate::gen::uniform_random(1024, 4096, 0.1, 5), 128), narrow);
        assert_ne!(choose(&crate::gen::block_sparse(1024, 4096, 4, 4, 0.1, 8032), 512), narrow);
    }

    #[test]
    fn f32_full_short_few_windows_take_the_16_row_windows() {
        let sel = |m: usize, n: usize, nnz: usize, narrow: usize, wide: usize| {
            f32_narrow_windows(m, n, nnz, BlockCounts { narrow, wide, mid: 0 }).map(|c| c.window)
        };
        // 4096 rows (256 16-row windows, 64 64-row ones), every window height wholly full: 8192 narrow blocks (32 per
        // window) and 2048 wide ones hold 2^21 entries. At n = 128 and 256 the 64-row launch has 64 and 128 blocks of
        // 128 columns.
        let (m, nnz) = (4096, 1 << 21);
        assert_eq!(sel(m, 128, nnz, 8_192, 2_048), Some(16));
        assert_eq!(sel(m, 256, nnz, 8_192, 2_048), Some(16));
        assert_eq!(sel(m, 264, nnz, 8_192, 2_048), None, "n = 264: past 256");
        assert_eq!(sel(m + 64, 256, nnz, 8_192, 2_048), None, "130 blocks of the 64-row launch");
        assert_eq!(sel(m, 128, nnz, 8_193, 2_049), None, "past 32 k-blocks per window");
        // 90% full in 64 rows: 2276 wide blocks are 89.98%, 2275 90.02% (the 16-row windows' 1.0 is 1.11 times that:
        // under the other branches' 1.15).
        assert_eq!(sel(m, 128, nnz, 8_192, 2_275), Some(16));
        assert_eq!(sel(m, 128, nnz, 8_192, 2_276), None, "the 64-row windows under 90% full");
        // Through SpmmKernel::select, on step 86's calibration matrices: 64 x 64 blocks on 1024 x 4096 at 5% and 128 x
        // 128 blocks on 2048 x 2048 at 10% take them at n = 128; 64 x 64 blocks on 12288 x 1024 (192 blocks of the
        // 64-row launch) and on 3072 x 6144 at 20% (77 k-blocks per window) do not, nor any at n = 512.
        let choose = |a: &sprs::CsMat<f32>, n: usize| {
            let (indptr, indices) = (a.indptr().raw_storage().to_vec(), a.indices().to_vec());
            let stats = crate::csr::RowStats::of_csr(&indptr, &indices);
            let counts = BlockCounts::of(a.cols(), &indptr, &indices);
            crate::spmm::SpmmKernel::select(a.rows(), a.cols(), n, a.nnz(), &stats, DType::F32, Some(counts))
                .to_string()
        };
        let blocks = |m, k, side, density, seed| crate::gen::block_sparse(m, k, side, side, density, seed);
        assert_eq!(choose(&blocks(1024, 4096, 64, 0.05, 9201), 128), "spmm_tc_f32_n4");
        assert_eq!(choose(&blocks(2048, 2048, 128, 0.1, 9216), 128), "spmm_tc_f32_n4");
        assert_ne!(choose(&blocks(12288, 1024, 64, 0.05, 9225), 128), "spmm_tc_f32_n4");
        assert_ne!(choose(&blocks(3072, 6144, 64, 0.2, 9232), 128), "spmm_tc_f32_n4");
        assert_ne!(choose(&blocks(1024, 4096, 64, 0.05, 9201), 512), "spmm_tc_f32_n4");
    }

    #[test]
    fn selection_follows_the_measurements() {
        let sel = |dtype, m: usize, n: usize, nnz: usize, narrow: usize, wide: usize| {
            select_tensor_core(dtype, m, n, nnz, BlockCounts { narrow, wide, mid: 0 }).map(|c| (c.window, c.tiles_n))
        };
        // Uniform 4096^2 at 50% and 80%: every window's union is all 4096 columns (256 k-blocks): wide at every
        // n, 128 columns per block (n = 128: 64 windows x 5 ranges).
        for nnz in [8_388_608, 3_355_437] {
            for n in [128, 256, 4096] {
                assert_eq!(sel(DType::F16, 4096, n, nnz, 65_536, 16_384), Some((64, 16)), "nnz {nnz}, n = {n}");
            }
        }
        // 90% (10% full in 64-row windows): wide, at n = 128 too (C has 2^19 elements).
        let (nnz, narrow, wide) = (1_677_722, 53_500, 16_384);
        assert_eq!(sel(DType::F16, 4096, 4096, nnz, narrow, wide), Some((64, 16)));
        assert_eq!(sel(DType::Bf16, 4096, 256, nnz, narrow, wide), Some((64, 16)));
        assert_eq!(sel(DType::F16, 4096, 128, nnz, narrow, wide), Some((64, 16)));
        // ... but not with fewer than 2^19 elements of C and n < 256 (2048 x 128: narrow, a small C).
        assert_eq!(sel(DType::F16, 2048, 128, nnz / 2, narrow / 2, wide / 2), Some((16, 8)));
        // ... unless A has HALF_WIDE_PAIRS (k-block, 64-column slice) pairs at n >= 128: 2048 x 8192 at 92%
        // (32 windows of 512 k-blocks, 8% full; or 16317, as a uniform draw at 8% has), n = 128, wide; at n = 64
        // (2^14 pairs) narrow; 15500 k-blocks (31000 pairs) wide, 15499 narrow.
        assert_eq!(sel(DType::Bf16, 2048, 128, 1_342_144, 48_332, 16_317), Some((64, 16)));
        assert_eq!(sel(DType::Bf16, 2048, 128, 1_300_000, 48_332, 15_500), Some((64, 16)));
        assert_eq!(sel(DType::Bf16, 2048, 128, 1_300_000, 48_332, 15_499), Some((16, 8)));
        assert_eq!(sel(DType::Bf16, 2048, 128, 1_342_178, 40_000, 16_384), Some((64, 16)));
        assert_eq!(sel(DType::F16, 2048, 128, 1_342_178, 40_000, 16_384), Some((64, 16)));
        assert_eq!(sel(DType::F16, 2048, 64, 1_342_178, 40_000, 16_384), Some((16, 8)));
        // 8192 x 2048 at 80% and 90% (10% full, C of 2^20 elements), n = 128: wide.
        assert_eq!(sel(DType::F16, 8192, 128, 3_355_443, 65_000, 16_384), Some((64, 16)));
        assert_eq!(sel(DType::Bf16, 8192, 128, 1_677_722, 53_500, 16_384), Some((64, 16)));
        // 64 columns per block where 128 make fewer than SPLIT_BELOW_BLOCKS blocks before the split and 64 make
        // that many: 8192 x 2048 at n = 256 (128 windows: 256 and 512 blocks), 16384 x 1024 at n = 128, 2048 x 8192
        // at n = 1024 (32 windows x 8 slices of 128 columns); not 8192 x 2048 at n = 512 (512 blocks of 128).
        assert_eq!(sel(DType::Bf16, 8192, 256, 1_677_722, 53_500, 16_384), Some((64, 8)));
        assert_eq!(sel(DType::F16, 16_384, 128, 1_677_722, 53_500, 16_384), Some((64, 8)));
        assert_eq!(sel(DType::F16, 2048, 1024, 1_677_722, 53_500, 16_384), Some((64, 8)));
        assert_eq!(sel(DType::F16, 8192, 512, 1_677_722, 53_500, 16_384), Some((64, 16)));
        // ... and not where 64 columns make 384 blocks (1.45 waves): 12288 x 1536 at n = 128 (192 windows).
        assert_eq!(sel(DType::F16, 12_288, 128, 1_887_437, 60_000, 18_432), Some((64, 16)));
        // Pruned 1536 x 384 at 70%, n = 1024: 24 windows of 24 k-blocks, no ranges: 64 columns per block; at
        // n = 256 (96 blocks of 64 columns) the narrow windows.
        assert_eq!(sel(DType::F16, 1536, 1024, 176_947, 2_304, 576), Some((64, 8)));
        assert_eq!(sel(DType::F16, 1536, 256, 176_947, 2_304, 576), Some((16, 8)));
        // Pruned 384-row weights: narrow for a small C whatever the fill (384 x 1536 at 98%) ...
        assert_eq!(sel(DType::F16, 384, 256, 11_796, 576, 500), Some((16, 4)));
        assert_eq!(sel(DType::F16, 384, 1024, 44_237, 2_304, 576), Some((16, 8)));
        // ... but wide from 8% full with 4800 (k-block, slice) pairs (step 23): 384 x 1536 at 70% (30% full, 6
        // windows of 96 k-blocks) at n = 1024 (9216 pairs), not at n = 256 (2304); at 90% (10.1% full, a tie) too,
        // at 98% (2% full: narrow 1.46x faster) not; 384 x 384 at 70% (144 k-blocks) at n = 1024 not (2304).
        assert_eq!(sel(DType::F16, 384, 1024, 176_947, 2_304, 576), Some((64, 8)));
        assert_eq!(sel(DType::Bf16, 384, 1024, 176_947, 2_304, 576), Some((64, 8)));
        assert_eq!(sel(DType::F16, 384, 256, 176_947, 2_304, 576), Some((16, 4)));
        assert_eq!(sel(DType::F16, 384, 1024, 58_982, 2_304, 570), Some((64, 8)));
        assert_eq!(sel(DType::F16, 384, 1024, 11_796, 1_400, 576), Some((16, 8)));
        assert_eq!(sel(DType::F16, 384, 1024, 44_237, 576, 144), Some((16, 8)));
        // 640 x 2048 at 80% (10 windows of 128 k-blocks, 20% full), n = 1536: wide where the tiles ran 3.4x
        // slower; 8% full is enough, 7.9% not; 120 blocks of 128 columns take 128 columns each.
        assert_eq!(sel(DType::F16, 640, 1536, 262_144, 5_120, 1_280), Some((64, 16)));
        assert_eq!(sel(DType::F16, 640, 1536, 104_858, 5_120, 1_280), Some((64, 16)));
        assert_eq!(sel(DType::F16, 640, 1536, 103_547, 5_120, 1_280), None);
        // Either side of the pairs: 192 x 1280 (3 windows of 80 k-blocks, 30% full) at n = 1280 is 4800 pairs
        // (wide), at n = 1216 4560 (narrow); 768 x 768 (12 x 48) at n = 512 4608 (narrow), at n = 1024 9216
        // (wide). 128 columns per block from 120 blocks of 128 columns: 512 rows (8 windows) at n = 2048, not 768
        // rows at n = 512.
        assert_eq!(sel(DType::Bf16, 192, 1280, 73_728, 960, 240), Some((64, 8)));
        assert_eq!(sel(DType::Bf16, 192, 1216, 73_728, 960, 240), Some((16, 8)));
        assert_eq!(sel(DType::F16, 768, 512, 294_912, 2_304, 576), Some((16, 8)));
        assert_eq!(sel(DType::F16, 768, 1024, 294_912, 2_304, 576), Some((64, 8)));
        assert_eq!(sel(DType::F16, 512, 2048, 786_432, 6_144, 1_536), Some((64, 16)));
        assert_eq!(sel(DType::F16, 768, 512, 1_179_648, 9_216, 2_304), Some((64, 8)));
        // 1023 rows are few (16 windows of 48 k-blocks, 30% full, 6144 pairs at n = 512); f32 keeps its own rule.
        assert_eq!(sel(DType::F16, 1023, 512, 235_930, 3_072, 768), Some((64, 8)));
        assert_eq!(sel(DType::F32, 1023, 512, 235_930, 3_072, 768), None);
        // n < 512 was not measured on few rows: 960 x 8192 at 70% (60 windows of 512 k-blocks) at n = 256 keeps
        // the narrow windows, 30720 pairs or not.
        assert_eq!(sel(DType::F16, 960, 256, 2_359_296, 30_720, 7_680), Some((16, 8)));
        // Uniform 95% (5% full wide, 9% narrow), large C: the tiles.
        assert_eq!(sel(DType::Bf16, 4096, 4096, 838_861, 36_800, 15_700), None);
        // n <= 32 on a small C: 32 columns per warp.
        assert_eq!(sel(DType::F16, 300, 32, 45_000, 400, 100), Some((16, 4)));
        // The graphs at n = 32 (email-Enron: 8.3% full narrow, 2.8% wide): narrow, 32 columns per warp; at
        // n = 128, or under 8% full, the tiles.
        assert_eq!(sel(DType::F16, 36_692, 32, 367_662, 17_300, 12_820), Some((16, 4)));
        assert_eq!(sel(DType::Bf16, 36_692, 32, 367_662, 17_300, 12_820), Some((16, 4)));
        assert_eq!(sel(DType::F16, 36_692, 128, 367_662, 17_300, 12_820), None);
        assert_eq!(sel(DType::F16, 36_692, 32, 367_662, 30_000, 20_000), None);
        // f32 (3xTF32, the wide kernels only): 50% and 20% full (uniform 80%) at every n of the suite (16384
        // k-blocks x at least 2 slices), 8192 x 2048 at 80%, n = 128 too; the pruned 1536 x 384 at 70% (30% full)
        // at n = 1024 (576 x 16 pairs), not at n = 256 (576 x 4); 10% full (uniform 90%) never; 20% full with
        // fewer than 2^15 pairs (4096^2 at n = 64) not. The wgmma kernel (128 columns per block) from
        // WGMMA_MIN_GRID blocks of 128 columns and WGMMA_MIN_WINDOW_BLOCKS k-blocks per window: 64 windows of 256
        // at every n, 128 of 128 (8192 x 2048), 6 of 96 at n = 1024 (384 x 1536); not windows of 24 k-blocks in small
        // grids.
        for n in [128, 256, 4096] {
            assert_eq!(sel(DType::F32, 4096, n, 8_388_608, 65_536, 16_384), Some((64, 16)), "n = {n}");
            assert_eq!(sel(DType::F32, 4096, n, 1_677_722, 53_500, 16_384), None, "n = {n}");
            assert_eq!(sel(DType::F32, 4096, n, 3_355_443, 65_000, 16_384), Some((64, 16)), "80%, n = {n}");
        }
        assert_eq!(sel(DType::F32, 4096, 64, 3_355_443, 65_000, 16_384), None);
        assert_eq!(sel(DType::F32, 8192, 128, 3_355_443, 65_000, 16_384), Some((64, 16)));
        assert_eq!(sel(DType::F32, 8192, 128, 1_677_722, 53_500, 16_384), None);
        assert_eq!(sel(DType::F32, 1536, 256, 176_947, 2_304, 576), None);
        // 1536 x 384 at n = 1024: windows of 24 k-blocks, but 192 blocks of 128 columns (at least
        // WGMMA_SHORT_MIN_GRID): the wgmma kernel. Either side of that bound, half full at n = 128: 127 windows of
        // 24 k-blocks (8128 x 384) on mma.sync, 128 (8192 x 384) on wgmma.
        assert_eq!(sel(DType::F32, 1536, 1024, 176_947, 2_304, 576), Some((64, 16)));
        assert_eq!(sel(DType::F32, 8128, 128, 1_560_576, 12_192, 3_048), Some((64, 8)));
        assert_eq!(sel(DType::F32, 8192, 128, 1_572_864, 12_288, 3_072), Some((64, 16)));
        // Once the windows win, their wgmma kernel from WGMMA_SHORT_TILES_MIN_GRID blocks at n >= 256: 35 windows of
        // 24 k-blocks (2240 x 384) half full at n = 256 (70 blocks) on wgmma, 34 (68 blocks) on mma.sync; at n = 128
        // (127 windows, above) mma.sync.
        assert_eq!((WGMMA_SHORT_TILES_MIN_GRID, WGMMA_SHORT_TILES_MIN_N), (70, 256));
        assert_eq!(sel(DType::F32, 2240, 256, 430_080, 3_360, 840), Some((64, 16)));
        assert_eq!(sel(DType::F32, 2176, 256, 417_792, 3_264, 816), Some((64, 8)));
        assert_eq!(sel(DType::F32, 2240, 248, 430_080, 3_360, 840), Some((64, 8)), "n = 248");
        // ... and only where the windows win without it: 20% full, 50 windows at n = 256 (100 blocks), win on the
        // wgmma kernel (wgmma_wins) with windows of 64 k-blocks (12,800 pairs), not with windows of 50 (10,000),
        // though 100 blocks are past WGMMA_SHORT_TILES_MIN_GRID.
        assert_eq!(sel(DType::F32, 3200, 256, 655_360, 12_800, 3_200), Some((64, 16)));
        assert_eq!(sel(DType::F32, 3200, 256, 512_000, 10_000, 2_500), None);
        // The 384-row weights at 70% (30% full) from 2048 pairs: 384 x 384 at n = 1024 (144 x 16), 384 x 1536 at
        // n = 256 (576 x 4, 12 blocks of 128 columns: mma.sync); not 384 x 384 at n = 256 (144 x 4). 384 x 1536
        // at n = 1024 (48 blocks of 128 columns, windows of 96 k-blocks): the wgmma kernel.
        assert_eq!(sel(DType::F32, 384, 1024, 44_237, 576, 144), Some((64, 8)));
        assert_eq!(sel(DType::F32, 384, 256, 176_947, 2_304, 576), Some((64, 8)));
        assert_eq!(sel(DType::F32, 384, 1024, 176_947, 2_304, 576), Some((64, 16)));
        // Either side of WGMMA_MIN_GRID: 31 windows (1984 rows) of 64 k-blocks at n = 128 and 32 (2048 rows), half
        // full; and of WGMMA_MIN_WINDOW_BLOCKS: 64 windows of 63 k-blocks (k = 1008) and of 64 (k = 1024).
        assert_eq!(sel(DType::F32, 1984, 128, 1_015_808, 1_984, 1_984), Some((64, 8)));
        assert_eq!(sel(DType::F32, 2048, 128, 1_048_576, 2_048, 2_048), Some((64, 16)));
        assert_eq!(sel(DType::F32, 4096, 128, 2_064_384, 4_032, 4_032), Some((64, 8)));
        assert_eq!(sel(DType::F32, 4096, 128, 2_097_152, 4_096, 4_096), Some((64, 16)));
        assert_eq!(sel(DType::F32, 384, 256, 44_237, 576, 144), None);
        // On the wgmma kernel, with 2^14 pairs, from a fill times the share of busy slots of 13% at n < 256 and
        // 11.5% at n >= 256 (step 42): uniform 4096^2 (16384 k-blocks of 1024 slots; 256 blocks at n = 128 and 256,
        // 2048 at n = 4096, 97% busy) at n = 128 from 2_249_196 entries (13.4% full), at n = 256 and 4096 from
        // 1_989_673 (11.9%); 2^14 pairs at n = 256 with 64 windows of 64 k-blocks (4096 x 1024), not at n = 128;
        // not n = 64 (20% full: 4096^2 at 80%, above), nor on the mma.sync kernel (31 windows, n = 128).
        assert_eq!(sel(DType::F32, 4096, 128, 2_249_196, 60_000, 16_384), Some((64, 16)));
        assert_eq!(sel(DType::F32, 4096, 128, 2_249_195, 60_000, 16_384), None);
        for n in [256, 4096] {
            assert_eq!(sel(DType::F32, 4096, n, 1_989_673, 60_000, 16_384), Some((64, 16)), "n = {n}");
            assert_eq!(sel(DType::F32, 4096, n, 1_989_672, 60_000, 16_384), None, "n = {n}");
        }
        assert_eq!(sel(DType::F32, 4096, 256, 629_146, 10_000, 4_096), Some((64, 16)));
        assert_eq!(sel(DType::F32, 4096, 128, 629_146, 10_000, 4_096), None);
        assert_eq!(sel(DType::F32, 1984, 128, 2_600_000, 60_000, 15_872), None);
        // ... counting the share of its waves of 264 the launch keeps busy: 6144 x 3072 (96 windows of 192
        // k-blocks) 13% full at n = 1024 (768 blocks, 97%), not at n = 256 (192 blocks, 73%) nor n = 512 (384).
        assert_eq!(sel(DType::F32, 6144, 1024, 2_453_667, 70_000, 18_432), Some((64, 16)));
        assert_eq!(sel(DType::F32, 6144, 256, 2_453_667, 70_000, 18_432), None);
        assert_eq!(sel(DType::F32, 6144, 512, 2_453_667, 70_000, 18_432), None);
        assert!(keeps_its_waves_busy(240, 264) && keeps_its_waves_busy(512, 264) && keeps_its_waves_busy(2048, 264));
        assert!(!keeps_its_waves_busy(192, 264) && !keeps_its_waves_busy(384, 264) && !keeps_its_waves_busy(0, 264));
        assert!(keeps_its_waves_busy(198, 264) && !keeps_its_waves_busy(197, 264));
        assert_eq!(
            (busy_share(256, 256), busy_share(384, 256), busy_share(0, 264), busy_share(5, 0)),
            (1.0, 0.75, 0.0, 0.0)
        );
        // ... at 16% full (x 0.73 = 11.6%) even on 192 blocks; 10240 x 2048 (160 windows of 128 k-blocks) at n =
        // 512 (640 blocks, 81% busy) at 14.3% full, not at 12.5%.
        assert_eq!(sel(DType::F32, 6144, 256, 3_019_899, 70_000, 18_432), Some((64, 16)));
        assert_eq!(sel(DType::F32, 10_240, 512, 3_000_000, 70_000, 20_480), Some((64, 16)));
        assert_eq!(sel(DType::F32, 10_240, 512, 2_621_440, 70_000, 20_480), None);
        // ... and from 18% full with 8192 pairs: the pruned 1536 x 384 at 80%, n = 1024 (576 x 16 pairs), not
        // at 85% nor at n = 256 (576 x 4).
        assert_eq!(sel(DType::F32, 1536, 1024, 117_965, 2_304, 576), Some((64, 16)));
        assert_eq!(sel(DType::F32, 1536, 1024, 100_000, 2_304, 576), None);
        assert_eq!(sel(DType::F32, 1536, 256, 117_965, 2_304, 576), None);
        // Without the wgmma kernel (select_tensor_core_with), f32 keeps the mma.sync kernel's rules: 15% full
        // goes to the tiles, half full to the mma.sync kernel; f16 is the same either way.
        let without = |dtype, m: usize, n: usize, nnz: usize, narrow: usize, wide: usize| {
            select_tensor_core_with(dtype, m, n, nnz, BlockCounts { narrow, wide, mid: 0 }, false)
                .map(|c| (c.window, c.tiles_n))
        };
        assert_eq!(without(DType::F32, 4096, 256, 2_516_582, 60_000, 16_384), None);
        assert_eq!(sel(DType::F32, 4096, 256, 2_516_582, 60_000, 16_384), Some((64, 16)));
        assert_eq!(without(DType::F32, 4096, 256, 8_388_608, 65_536, 16_384), Some((64, 8)));
        assert_eq!(without(DType::F16, 4096, 256, 1_677_722, 53_500, 16_384), Some((64, 16)));
        // Not for f64, nnz = 0.
        assert_eq!(sel(DType::F64, 4096, 128, 8_388_608, 65_536, 16_384), None);
        assert_eq!(sel(DType::F16, 10, 64, 0, 0, 0), None);
        // n not a multiple of 8: the rules at the padded n (uniform 4096^2 at 50%, n = 100 as n = 104) from
        // PADDED_MIN_WORK multiply-adds and past n = 32: the pruned 1536 x 384 at 70% (24 k-blocks per window) at
        // n = 100 (104: 18.4 million) and not at n = 50 (56: 9.9 million), nor at n = 20 where it is at n = 24.
        assert_eq!(sel(DType::F32, 4096, 100, 8_388_608, 65_536, 16_384), Some((64, 16)));
        assert_eq!(sel(DType::F16, 4096, 100, 8_388_608, 65_536, 16_384), Some((64, 16)));
        assert_eq!(sel(DType::Bf16, 1536, 100, 176_947, 2_304, 576), sel(DType::Bf16, 1536, 104, 176_947, 2_304, 576));
        assert!(sel(DType::Bf16, 1536, 104, 176_947, 2_304, 576).is_some());
        assert_eq!(sel(DType::Bf16, 1536, 50, 176_947, 2_304, 576), None);
        assert!(sel(DType::Bf16, 1536, 56, 176_947, 2_304, 576).is_some());
        assert_eq!(sel(DType::F16, 4096, 20, 8_388_608, 65_536, 16_384), None);
        assert!(sel(DType::F16, 4096, 24, 8_388_608, 65_536, 16_384).is_some());
        // Either side of PADDED_MIN_WORK: 120_000 entries at n = 97-103 (as 104: 12.48 million) and n = 89-95 (as
        // 96: 11.52 million); n = 96 itself is aligned and has no threshold.
        let at = |n| sel(DType::F16, 384, n, 120_000, 576, 144);
        assert!(at(97).is_some() && at(103).is_some() && at(96).is_some());
        assert!(at(95).is_none() && at(89).is_none());
    }

    #[test]
    fn f32_needs_enough_work_for_the_windows() {
        let sel = |m: usize, n: usize, nnz: usize, wide: usize| {
            select_tensor_core(DType::F32, m, n, nnz, BlockCounts { narrow: 4 * wide, wide, mid: 0 }).map(|c| c.tiles_n)
        };
        // Windows half full: from F32_MIN_WORK entries times columns (65,536 entries at n = 256, 2^24), not below
        // (n = 248), whatever the fill.
        assert_eq!(F32_MIN_WORK, 1 << 24);
        assert!(sel(4096, 256, 65_536, 128).is_some());
        assert_eq!(sel(4096, 248, 65_536, 128), None);
        assert_eq!(sel(4096, 248, 65_536, 65), None, "99% full");
        // The measured loss: banded 1004 x 413 at 74%, n = 128 (79,412 entries, 10.2 million).
        assert_eq!(sel(1004, 128, 79_412, 105), None);
        // n <= 32: entries times columns times the fill, from F32_THIN_MIN_WORK (2^21 entries half full at n = 32),
        // not one entry less on the same windows.
        assert_eq!(F32_THIN_MIN_WORK, 1 << 25);
        assert_eq!(sel(8192, 32, 1 << 21, 4096), Some(8));
        assert_eq!(sel(8192, 32, (1 << 21) - 1, 4096), None);
        // ... which n = 64 does not ask (the same entries at half the fill: 2^27 entries times columns).
        assert!(sel(8192, 64, 1 << 21, 8192).is_some());
        // The mma.sync kernel up to n = 64, the wgmma one from 65 (uniform 4096^2 at 50%).
        assert_eq!(F32_WGMMA_MIN_N, 65);
        for (n, tiles_n) in [(32, 8), (64, 8), (72, 16), (128, 16)] {
            assert_eq!(sel(4096, n, 8_388_608, 16_384), Some(tiles_n), "n = {n}");
        }
    }

    /// Row statistics of length variation `cv`, no row empty (the window rules read only the cv and the empty rows).
    fn rows(cv: f64) -> crate::csr::RowStats {
        crate::csr::RowStats { min: 1, max: 1000, mean: 100.0, cv, empty_rows: 0, columns_per_entry: None }
    }

    #[test]
    fn f32_few_uneven_rows_take_the_windows_from_their_fill() {
        // m x k with `per_window` 64-row k-blocks per window, `fill` of their slots stored, cv 0.8.
        let sel = |m: usize, k: usize, n: usize, fill: f64, per_window: usize, cv: f64, wgmma: bool| {
            let wide = m.div_ceil(WIDE_WINDOW) * per_window;
            let nnz = (fill * (wide * WIDE_WINDOW * SLOTS) as f64).ceil() as usize;
            let counts = BlockCounts { narrow: 4 * wide, wide, mid: 0 };
            uneven_few_rows_windows(DType::F32, m, k, n, nnz, &rows(cv), counts, wgmma).map(|c| c.tiles_n)
        };
        // Power-law 870 x 3042 (14 windows of 190 k-blocks) 13% full: the mma.sync kernel at n = 128 (14 x 8 = 112
        // blocks), the wgmma one at n = 256-1024 (28 x 8 = 224 blocks from n = 256).
        assert_eq!(sel(870, 3042, 128, 0.13, 190, 0.97, true), Some(8));
        for n in [256, 384, 512, 1024] {
            assert_eq!(sel(870, 3042, n, 0.13, 190, 0.97, true), Some(16), "n = {n}");
        }
        // 295 x 1364 (5 windows of 86 k-blocks): 10 x 5 = 50 blocks at n = 256, 20 x 5 = 100 at n = 512: the mma.sync
        // kernel; at n = 1024 40 x 5 = 200: the wgmma one.
        assert_eq!(sel(295, 1364, 256, 0.134, 86, 0.73, true), Some(8));
        assert_eq!(sel(295, 1364, 512, 0.134, 86, 0.73, true), Some(8));
        assert_eq!(sel(295, 1364, 1024, 0.134, 86, 0.73, true), Some(16));
        // The fill: 12% at n = 128-256, 9% from n = 384 (and 12% at every n without the wgmma kernel).
        assert_eq!((UNEVEN_FEW_ROWS_FILL, UNEVEN_FEW_ROWS_WIDE_FILL), (0.12, 0.09));
        assert!(sel(870, 3042, 256, 0.12, 190, 0.97, true).is_some());
        assert_eq!(sel(870, 3042, 256, 0.119, 190, 0.97, true), None);
        assert!(sel(870, 3042, 384, 0.09, 190, 0.97, true).is_some());
        assert_eq!(sel(870, 3042, 384, 0.089, 190, 0.97, true), None);
        assert_eq!(sel(870, 3042, 512, 0.1, 190, 0.97, false), None);
        assert_eq!(sel(870, 3042, 512, 0.12, 190, 0.97, false), Some(8));
        // The widths (the rows: `few_uneven_rows_are_256_to_1024_rows_over_k_1024_to_8192`).
        for (n, takes) in [(128, true), (1024, true), (64, false), (320, false), (1152, false)] {
            assert_eq!(sel(870, 3042, n, 0.2, 100, 0.8, true).is_some(), takes, "n = {n}");
        }
        assert_eq!(sel(870, 3042, 256, 0.2, 100, 0.49, true), None);
        // Where select_tf32x3 takes the windows already (here 40% full), its kernel: the mma.sync one at n = 256
        // on 14 windows (28 blocks, fewer than WGMMA_MIN_GRID).
        let wide = 14 * 190;
        let nnz = (0.4 * (wide * WIDE_WINDOW * SLOTS) as f64) as usize;
        let counts = BlockCounts { narrow: 4 * wide, wide, mid: 0 };
        let own = select_tf32x3(870, 256, nnz, 0.4, wide, true);
        assert!(own.is_some());
        assert_eq!(uneven_few_rows_windows(DType::F32, 870, 3042, 256, nnz, &rows(0.8), counts, true), own);
        // No blocks, no windows.
        let none = BlockCounts { narrow: 0, wide: 0, mid: 0 };
        assert_eq!(uneven_few_rows_windows(DType::F32, 870, 3042, 256, 0, &rows(0.8), none, true), None);
    }

    #[test]
    fn half_few_uneven_rows_take_the_wide_windows_at_n_128_and_256() {
        let sel = |dtype: DType, m: usize, k: usize, n: usize, fill: f64, per_window: usize, cv: f64| {
            let wide = m.div_ceil(WIDE_WINDOW) * per_window;
            let nnz = (fill * (wide * WIDE_WINDOW * SLOTS) as f64).ceil() as usize;
            uneven_few_rows_windows(
                dtype,
                m,
                k,
                n,
                nnz,
                &rows(cv),
                BlockCounts { narrow: 4 * wide, wide, mid: 0 },
                true,
            )
            .map(|c| (c.window, c.tiles_n))
        };
        // Power-law 757 x 6096 (12 windows of 381 k-blocks, 12% full): 9144 pairs at n = 128, both types.
        for dtype in [DType::F16, DType::Bf16] {
            assert_eq!(sel(dtype, 757, 6096, 128, 0.12, 381, 0.83), Some((64, 8)), "{dtype}");
            assert_eq!(sel(dtype, 757, 6096, 256, 0.12, 381, 0.83), Some((64, 8)), "{dtype}");
        }
        assert_eq!(sel(DType::F64, 757, 6096, 128, 0.12, 381, 0.83), None);
        // Pairs: 2900 from 1450 per 64 columns at n = 128 (10 windows of 145), not 2880 (of 144); 8% full.
        assert_eq!(UNEVEN_FEW_ROWS_HALF_PAIRS, 2900);
        assert!(sel(DType::F16, 640, 3000, 128, 0.1, 145, 0.8).is_some());
        assert_eq!(sel(DType::F16, 640, 3000, 128, 0.1, 144, 0.8), None);
        assert!(sel(DType::F16, 640, 3000, 256, 0.08, 145, 0.8).is_some());
        assert_eq!(sel(DType::F16, 640, 3000, 256, 0.079, 145, 0.8), None);
        // The widths (the rows: `few_uneven_rows_are_256_to_1024_rows_over_k_1024_to_8192`).
        for (n, takes) in [(128, true), (256, true), (64, false), (192, false), (384, false)] {
            assert_eq!(sel(DType::Bf16, 870, 3042, n, 0.2, 400, 0.8).is_some(), takes, "n = {n}");
        }
        assert_eq!(sel(DType::Bf16, 870, 3042, 256, 0.2, 400, 1.21), None);
    }

    #[test]
    fn f32_windows_ask_the_cv_of_the_rows_that_are_not_empty() {
        // 870 rows, 40% of them empty, the others even (cv 0.2): cv 0.9 over all rows. f32 keeps its tiles (the
        // windows lost 1.15x on such rows, step 78), f16 and bf16 take the 64-row windows (they gained 1.41x).
        let all_rows = crate::csr::RowStats { empty_rows: 348, ..rows((1.04_f64 / 0.6 - 1.0).sqrt()) };
        let (_, others) = super::super::select::nonempty_rows(870, &all_rows);
        assert!((others.cv - 0.2).abs() < 1e-9 && all_rows.cv > 0.8, "{} {}", others.cv, all_rows.cv);
        let wide = 14 * 190;
        let nnz = (0.2 * (wide * WIDE_WINDOW * SLOTS) as f64) as usize;
        let counts = BlockCounts { narrow: 4 * wide, wide, mid: 0 };
        for (dtype, takes) in [(DType::F32, false), (DType::F16, true), (DType::Bf16, true)] {
            let got = uneven_few_rows_windows(dtype, 870, 3042, 256, nnz, &all_rows, counts, true);
            assert_eq!(got.is_some(), takes, "{dtype}");
        }
        // The same cv with no row empty: f32 takes them.
        assert!(uneven_few_rows_windows(DType::F32, 870, 3042, 256, nnz, &rows(all_rows.cv), counts, true).is_some());
    }

    #[test]
    fn few_uneven_rows_are_256_to_1024_rows_over_k_1024_to_8192() {
        // Each bound from inside, then one step past it: rows, columns, length variation.
        let inside = [(256, 3042, 0.8), (1024, 3042, 0.8), (870, 1024, 0.8), (870, 8192, 0.8), (870, 3042, 0.5)];
        let outside = [(255, 3042, 0.8), (1025, 3042, 0.8), (870, 1023, 0.8), (870, 8193, 0.8), (870, 3042, 0.49)];
        assert!(inside.iter().all(|&(m, k, cv)| uneven_few_rows(m, k, cv)));
        assert!(outside.iter().all(|&(m, k, cv)| !uneven_few_rows(m, k, cv)));
        assert!(uneven_few_rows(870, 3042, 1.2) && !uneven_few_rows(870, 3042, 1.21));
    }

    #[test]
    fn wide_launches_split_only_small_grids_of_long_windows() {
        // Uniform 4096^2 at 50%, n = 4096 (64 windows x 32 slices): no split.
        assert_eq!(wide_splits(DType::F16, 64 * 32, 64, 64 * 256), 1);
        // n = 128 (64 windows x 1 slice of 128 columns): 256 k-blocks per window, 5 ranges (320 / 64).
        assert_eq!(wide_splits(DType::F16, 64, 64, 64 * 256), 5);
        // 128 blocks (4096^2 at n = 256, 8192 x 2048 at n = 128): 2 ranges; 263 blocks still 2, 264 none.
        assert_eq!(wide_splits(DType::F16, 128, 64, 64 * 256), 2);
        assert_eq!(wide_splits(DType::F16, 263, 263, 263 * 256), 2);
        assert_eq!(wide_splits(DType::F16, 264, 264, 264 * 256), 1);
        // A tiny grid is capped at 8 ranges, and by 16 k-blocks per range.
        assert_eq!(wide_splits(DType::F16, 1, 1, 10_000), 8);
        assert_eq!(wide_splits(DType::F16, 6, 6, 6 * 40), 2);
        assert_eq!(wide_splits(DType::F16, 6, 6, 6 * 20), 1);
        assert_eq!(wide_splits(DType::F16, 0, 0, 0), 1);
        for dtype in [DType::F16, DType::Bf16, DType::F32] {
            assert!((0..600).all(|grid| wide_splits(dtype, grid, 1, 1 << 20) <= SPLIT_MAX), "{dtype}");
            // The f32 suite's long windows split as f16's do.
            assert_eq!(wide_splits(dtype, 64, 64, 64 * 256), 5);
            assert_eq!(wide_splits(dtype, 128, 64, 64 * 256), 2);
        }
        // The wgmma kernel: one wave of 264 blocks, at least 16 k-blocks per range, at most 8 ranges: 64 windows
        // of 256 k-blocks at n = 128 -> 4 ranges, 128 -> 2, 133 -> 1; 6 windows of 24 k-blocks -> 1, of 96 -> 6;
        // one window of many -> 8.
        assert_eq!(wgmma_splits(64, 64, 64 * 256), 4);
        assert_eq!(wgmma_splits(128, 128, 128 * 256), 2);
        assert_eq!(wgmma_splits(132, 132, 132 * 256), 2);
        assert_eq!(wgmma_splits(133, 133, 133 * 256), 1);
        assert_eq!(wgmma_splits(48, 6, 6 * 24), 1);
        assert_eq!(wgmma_splits(12, 6, 6 * 96), 6);
        assert_eq!(wgmma_splits(1, 1, 10_000), 8);
        assert_eq!(wgmma_splits(0, 0, 0), 1);
        assert!((0..600).all(|grid| wgmma_splits(grid, 1, 1 << 20) * grid.max(1) <= WGMMA_WAVE.max(grid)));
        let wgmma = TensorCoreConfig { dtype: DType::F32, window: 64, tiles_n: 16 };
        let mma = TensorCoreConfig { dtype: DType::F32, window: 64, tiles_n: 8 };
        let narrow = TensorCoreConfig { dtype: DType::F16, window: 16, tiles_n: 8 };
        assert_eq!(launch_splits(&wgmma, 64, 64, 64 * 256), 4);
        assert_eq!(launch_splits(&mma, 64, 64, 64 * 256), 5);
        assert_eq!(launch_splits(&narrow, 64, 64, 64 * 256), 1);
        // f32 only: windows of 24-31 k-blocks in at most 192 blocks split in two (the pruned 384 x 384 at 70%,
        // n = 1024: 6 windows x 16 slices); 23 k-blocks, or 193 blocks, do not; f16 and bf16 keep one range.
        assert_eq!(wide_splits(DType::F32, 96, 6, 6 * 24), 2);
        assert_eq!(wide_splits(DType::F32, 192, 12, 12 * 31), 2);
        assert_eq!(wide_splits(DType::F32, 96, 6, 6 * 23), 1);
        assert_eq!(wide_splits(DType::F32, 193, 16, 16 * 24), 1);
        assert_eq!(wide_splits(DType::F16, 96, 6, 6 * 24), 1);
        assert_eq!(wide_splits(DType::Bf16, 96, 6, 6 * 24), 1);
        // Ranges of 16 are not cut further: 48 k-blocks in 48 blocks stay 3 ranges, 64 in 32 blocks 4.
        assert_eq!(wide_splits(DType::F32, 48, 6, 6 * 48), 3);
        assert_eq!(wide_splits(DType::F32, 32, 4, 4 * 64), 4);
    }

    #[test]
    fn clusters_are_used_only_where_they_all_fit() {
        let plan = |ranges, grid, cluster_capacity| SplitPlan { ranges, grid, cluster_capacity };
        assert!(plan(5, 64, 64).clusters_fit());
        assert!(!plan(3, 128, 127).clusters_fit());
        assert!(!plan(1, 64, 1000).clusters_fit(), "no ranges, nothing to add");
        assert!(!plan(4, 8, 0).clusters_fit(), "no clusters on this device");
    }

    #[test]
    fn names_round_trip() {
        for dtype in [DType::F16, DType::Bf16, DType::F32] {
            for c in TensorCoreConfig::all(dtype) {
                assert_eq!(c.kernel_name().parse::<TensorCoreConfig>().unwrap(), c);
            }
        }
        assert!("spmm_f16_s1d8_y4k8x64w8_u4_pred".parse::<TensorCoreConfig>().is_err());
        assert!("spmm_tc_f16_wx_n8".parse::<TensorCoreConfig>().is_err());
        let wide: TensorCoreConfig = "tc_bf16_w64_n16".parse().unwrap();
        assert_eq!(wide, TensorCoreConfig { dtype: DType::Bf16, window: 64, tiles_n: 16 });
        assert!(wide.is_wide() && wide.columns_per_block() == 128);
        let mid: TensorCoreConfig = "spmm_tc_f32_w32_n8".parse().unwrap();
        assert_eq!(mid, TensorCoreConfig { dtype: DType::F32, window: 32, tiles_n: 8 });
        assert!(mid.is_wide() && !mid.is_wgmma() && mid.columns_per_block() == 64);
    }

    #[test]
    fn configs_are_checked() {
        let c = TensorCoreConfig { dtype: DType::F16, window: 16, tiles_n: 4 };
        assert!(matches!(check_tensor_core(&c, DType::F32, 10, 64), Err(Error::InvalidConfig { .. })));
        // f32 has 32 columns per warp in 16-row windows, not 64.
        let f32c = TensorCoreConfig { dtype: DType::F32, window: 16, tiles_n: 8 };
        assert!(matches!(check_tensor_core(&f32c, DType::F32, 10, 64), Err(Error::InvalidConfig { .. })));
        // Nor 128 columns per block in 32-row windows (the wgmma kernel's width is 64-row windows only).
        let f32_mid = TensorCoreConfig { dtype: DType::F32, window: 32, tiles_n: 16 };
        assert!(matches!(check_tensor_core(&f32_mid, DType::F32, 10, 64), Err(Error::InvalidConfig { .. })));
        let f32_narrow = TensorCoreConfig { dtype: DType::F32, window: 16, tiles_n: 4 };
        assert!(f32_narrow.is_tf32x3() && !f32_narrow.is_wide() && !f32_narrow.is_wgmma());
        assert_eq!(TensorCoreConfig::all(DType::F32).len(), 4);
        let f64c = TensorCoreConfig { dtype: DType::F64, window: 64, tiles_n: 8 };
        assert!(matches!(check_tensor_core(&f64c, DType::F64, 10, 64), Err(Error::Unsupported { .. })));
        assert!(TensorCoreConfig::all(DType::F64).is_empty());
        let f32_wide = TensorCoreConfig { dtype: DType::F32, window: 64, tiles_n: 8 };
        assert!(f32_wide.is_tf32x3() && !c.is_tf32x3());
        let wgmma = TensorCoreConfig { dtype: DType::F32, window: 64, tiles_n: 16 };
        assert!(wgmma.is_wgmma() && wgmma.is_tf32x3() && !f32_wide.is_wgmma());
        let f16_wide = TensorCoreConfig { dtype: DType::F16, window: 64, tiles_n: 16 };
        assert!(!f16_wide.is_wgmma(), "f16's 128-column wide kernel is an mma.sync one");
        for (window, tiles_n) in [(16, 3), (16, 16), (64, 4), (32, 4), (48, 8), (128, 8)] {
            let bad = TensorCoreConfig { dtype: DType::F16, window, tiles_n };
            assert!(matches!(check_tensor_core(&bad, DType::F16, 10, 64), Err(Error::InvalidConfig { .. })), "{bad}");
        }
        if KERNELS_BUILT {
            // n not a multiple of 8 runs padded (spmm_tensor_core_with); an n near i32::MAX is too large.
            assert!(check_tensor_core(&c, DType::F16, 10, 60).is_ok());
            assert!(check_tensor_core(&c, DType::F16, 10, 64).is_ok());
            assert!(check_tensor_core(&f32_wide, DType::F32, 10, 60).is_ok());
            assert!(check_tensor_core(&f32_wide, DType::F32, 10, 64).is_ok());
            assert!(check_tensor_core(&f32_narrow, DType::F32, 10, 60).is_ok());
            let past = i32::MAX as usize - 2;
            assert!(matches!(check_tensor_core(&c, DType::F16, 10, past), Err(Error::TooLarge(_))));
            assert!(check_tensor_core(&wgmma, DType::F32, 10, 64).is_ok(), "valid; the device decides at launch");
        }
    }
}
