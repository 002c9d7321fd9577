//! The config heuristic: a pure function of the problem, unit-tested, each branch citing NOTES.md.

use super::split::{has_long_rows, is_skewed};
use super::SpmmConfig;
use crate::csr::RowStats;
use crate::scalar::DType;

/// The widest of `widths` that divides `n` (1 always does).
pub(crate) fn widest_dividing(n: usize, widths: &[u32]) -> u32 {
    widths.iter().copied().filter(|&w| n % w as usize == 0).max().unwrap_or(1)
}

/// SMs of the H100 the selection was measured on: it sizes the waves of blocks where a branch depends on them.
const H100_SMS: usize = 132;

/// Elements of the largest B (k x n, 48 MiB in f32) in the sweeps behind the branches that bound it: past it the
/// k = 8 tile won (uniform 4096^2 at 95%, n = 4096; NOTES.md, "SpMM step 14"), and no larger B was measured since.
const LARGEST_SWEPT_B: usize = 3072 * 4096;

/// f16/bf16 with at most this many rows and n <= 256 take Sputnik's 32-wide tile where the tensor cores do not
/// take them (the pruned 384- and 1536-row weights). The bound was 2048 rows until step 41 (H100, NOTES.md "SpMM
/// step 41"). At 2048 rows that tile ran slower than the k = 8 tile on every matrix swept:
/// - uniform, k = 384, 1536 and 8192 at 2%, 10% and 30%, n = 128 and 256: 1.02x-2.15x slower;
/// - through `spmm_auto` (2048 x 384-8192 at 2%, n = 256, uniform or pruned, where the tensor cores leave the
///   matrix to the tiles): 1.22x-2.15x slower;
/// - 2048 x 8192 at 4-7% (328-573 per row), n = 256, against the k = 16 tile (f16) and the 256-column tile (bf16)
///   that the branch gives rows of 300-600: 1.27x-1.37x slower.
///
/// At 1536 rows the pruned 1536 x 384 weights are split at n = 256: the k = 8 tile is 1.32x-1.33x faster at 70%
/// sparsity and 1.16x-1.23x slower at 98%. So the bound stays there.
const HALF_FEW_ROWS: usize = 1536;

/// Whether `blocks`, handed out `wave` at a time, leave the last wave at least three quarters full (or fit in one).
fn fills_its_last_wave(blocks: usize, wave: usize) -> bool {
    blocks <= wave || blocks.saturating_mul(4) >= wave.saturating_mul(3).saturating_mul(blocks.div_ceil(wave))
}

/// f16/bf16 at n = 64 and 128: whether the k = 8 tile's launch (four rows by 64 columns per block) fits in one wave
/// at the 32 blocks per SM of its 64-register form but not at the 28 of its unbounded form, which then runs a
/// second wave of a few blocks. n = 128, measured on an H200 (132 SMs; NOTES.md, "SpMM step 43"): at 8192 rows
/// (4096 blocks) the bounded tile ran 1.14x-1.28x faster (uniform 8192 x 2048 at 3% and 6%, 8192 x 4096 at 3%; f16
/// and bf16: 8192 x 2048 at 6%, f16 31.8 -> 24.8 us); outside the band the unbounded tile was as fast or faster (its
/// time 0.93-0.99 of the bounded one's where both fit one wave, 4096 and 6144 rows; 0.91-1.00 where neither does,
/// 12288 rows); on the H100 1.15x-1.30x on four shapes in the band. n = 64, on the H100 (NOTES.md, "SpMM step
/// 46"): 1.10x-1.17x faster in the band (15000-16383 rows, k 1024-4096, 2-8%; f16 16000 x 2048 at 5%: 24.6 -> 21.1
/// us), 0.99x-1.01x outside it (12288, 14000 and 17000 rows). The H200 has the H100's 132 SMs and registers per SM.
fn one_wave_if_bounded(m: usize, n: usize) -> bool {
    let blocks = m.div_ceil(4).saturating_mul(n.div_ceil(64));
    (n == 64 || n == 128) && blocks > 28 * H100_SMS && blocks <= 32 * H100_SMS
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn tile(dtype: DType, sv: u32, dv: u32, y: u32, k: u32, x: u32, w: u32, pred: bool) -> SpmmConfig {
    SpmmConfig {
        dtype,
        sparse_vector_width: sv,
        dense_vector_width: dv,
        block_items_y: y,
        block_items_k: k,
        block_items_x: x,
        block_width: w,
        residue_unroll: 4,
        predicate_loads: pred,
        launch_bounds: false,
        min_occupancy: 8,
        row_split: 1,
        column_tiles: 1,
    }
}

/// f16/bf16 rows of 6 entries or fewer on average, not very uneven (cv at most 0.8), over k up to 8192, at n =
/// 256-2048 (a multiple of 256): where the 256-column tile beat the k = 8 tile (NOTES.md, "SpMM steps 53-54").
fn very_short_rows_wide_n_half(k: usize, n: usize, stats: &RowStats) -> bool {
    n % 256 == 0 && n <= 2048 && k <= 8192 && stats.mean <= 6.0 && stats.cv <= 0.8
}

/// f16/bf16 very short rows in 8192-16383 rows (at most 7.5 entries on average, cv at most 1) at n = 256 and 512,
/// over any k: the 256-column tile of [`very_short_rows_wide_n_half`] too. Measured on the H200 (NOTES.md, "SpMM
/// step 64"; the sweep of [`very_short_rows_fewer_rows_wide_n_half`]): where the k = 8 tile held to 64 registers was
/// the choice (k past 8192, or rows of 6-7.5), the 256-column tile ran 1.04x-1.28x faster in f16 (1.11x on 28
/// problems; wrld_1deg 1.11x-1.18x) and 1.10x-1.37x in bf16 at n = 512 (1.18x on 14). Rows of 10 are left out.
fn very_short_rows_fewer_rows_half(m: usize, n: usize, stats: &RowStats) -> bool {
    (8192..16384).contains(&m) && (n == 256 || n == 512) && stats.mean <= 7.5 && stats.cv <= 1.0
}

/// f16/bf16 rows of 16 entries or fewer on average in 4096 rows or more at n = 512-2048 (a multiple of 64): where
/// the k = 8 tile held to 64 registers beat the unbounded one (NOTES.md, "SpMM steps 53-54" for n = 512-1024; step
/// 62 for n = 2048, where the unbounded tile ran 1.02x-1.10x slower on rows of 10-12.7 in 7434-65536 rows, and on
/// 16 matrices not used to fit, rows of 3-9 in 9000-100000 rows at n = 1536 and 2048, 30 of 32 f16 problems moved,
/// 1.06x faster, 1.0x-1.09x; bf16 the same, 1.05x). In 4096-8191 rows too where the rows are even (cv at most
/// 0.5, as measured; NOTES.md, "SpMM step 65"): on 20 generated matrices of 4096 and 6144 rows (rows of 4-12, cv at
/// most 0.44), where the unbounded tile was the choice, the bounded one ran 1.029x faster in f16 (30 problems,
/// 0.996x-1.08x) and 1.028x in bf16 (20); on 10 matrices not used to fit (stencils, 4elt, rows of 4-12 in 4500-7900
/// rows) 1.037x (27, 0.995x-1.10x) and 1.033x (18, 1.006x-1.08x).
fn short_rows_many_rows_wide_n_half(m: usize, n: usize, stats: &RowStats) -> bool {
    let rows = m >= 8192 || (m >= 4096 && stats.cv <= 0.5);
    rows && n % 64 == 0 && (512..=2048).contains(&n) && stats.mean <= 16.0
}

/// `config` compiled with `__launch_bounds__` for `min_occupancy` blocks per SM (its `_lb<N>` variant).
fn bounded(config: SpmmConfig, min_occupancy: u32) -> SpmmConfig {
    SpmmConfig { launch_bounds: true, min_occupancy, ..config }
}

/// Two rows of 16 threads over 128 columns, k = 16, held to 128 registers (16 blocks per SM): the tile the
/// selection gives most shapes from 512 rows, and the one `spmm::block_order` may run SM-affine.
pub(crate) fn two_row_tile(dtype: DType) -> SpmmConfig {
    bounded(unbounded_two_row_tile(dtype), 16)
}

/// [`two_row_tile`] without its launch bound.
fn unbounded_two_row_tile(dtype: DType) -> SpmmConfig {
    tile(dtype, 1, 4, 2, 16, 128, 16, false)
}

/// Eight one-row warps on one 64-column tile, held to 128 registers (two blocks per SM): the tile for long,
/// uneven rows over a wide B ([`uneven_long_rows`]), and one `spmm::block_order` may run SM-affine.
pub(crate) fn eight_row_tile(dtype: DType) -> SpmmConfig {
    bounded(tile(dtype, 1, 2, 8, 32, 64, 32, false), 2)
}

/// Four rows of 8 threads over 64 columns, k = 16, two-entry sparse vectors, held to eight blocks per SM: the
/// tile for long uneven rows over a large k in 640-4096 rows ([`long_uneven_rows_large_k`]), and one
/// `spmm::block_order` may run SM-affine.
pub(crate) fn four_row_tile(dtype: DType) -> SpmmConfig {
    bounded(tile(dtype, 2, 4, 4, 16, 64, 8, false), 8)
}

/// Four rows of 8 threads over 32 columns, k = 8, in dense vectors of `dv`: the tile for short rows and the one
/// that takes any n (in scalars, `dv` = 1).
fn k8_tile(dtype: DType, dv: u32, pred: bool) -> SpmmConfig {
    tile(dtype, 1, dv, 4, 8, 32, 8, pred)
}

/// Four rows of 8 threads over 32 columns, k = 16, two-entry sparse vectors, float4 dense vectors: the k = 8 tile's
/// twin taking 16 entries a step, as rows of a few tiles want ([`long_skewed_rows_wide_n`], the power-law rows of
/// [`power_law_rows_narrow_n`] at n = 32 in 8193-16384 rows).
fn k16_tile(dtype: DType, pred: bool) -> SpmmConfig {
    tile(dtype, 2, 4, 4, 16, 32, 8, pred)
}

/// One warp per row over 128 columns (k = 32).
fn warp_per_row_tile(dtype: DType) -> SpmmConfig {
    tile(dtype, 1, 4, 1, 32, 128, 32, false)
}

/// Sixteen one-row warps on one 64-column tile (one block per SM at 108 registers).
fn sixteen_row_tile(dtype: DType) -> SpmmConfig {
    tile(dtype, 1, 2, 16, 32, 64, 32, false)
}

/// Two rows of 16 threads over 32 columns, k = 32, two-element dense vectors: the 32-entry tile for n = 32 in
/// [`power_law_rows_narrow_n`] and for n = 32-64 in [`longest_row_tile`].
fn narrow_k32_tile(dtype: DType) -> SpmmConfig {
    tile(dtype, 1, 2, 2, 32, 32, 16, false)
}

/// One row per two warps over 128 columns (k = 32, `row_split` 2): [`row_split_tile`] for 397-792 blocks.
pub(crate) fn split_row_warp_tile(dtype: DType) -> SpmmConfig {
    SpmmConfig { row_split: 2, ..tile(dtype, 1, 4, 2, 32, 128, 32, false) }
}

/// Two rows per block, each over four 8-thread subwarps on 32 columns (k = 8, `row_split` 4): [`row_split_tile`]
/// for up to 396 blocks.
pub(crate) fn split_row_k8_tile(dtype: DType) -> SpmmConfig {
    SpmmConfig { row_split: 4, ..tile(dtype, 1, 4, 8, 8, 32, 8, false) }
}

/// f32 with few rows and a small n: the row-split tiles, where a warp per row over 128 columns (`m * n / 128` blocks)
/// would have at most six blocks per SM of the H100 (eight on short rows) and some rows span several tiles. The rows'
/// loads then come from too few warps, and two or four subwarps per row put more of them in flight. Up to three blocks
/// per SM the k = 8 tile with four subwarps per row (four on rows of fewer than 150 entries on average, six on rows of
/// fewer than 64 where k is at most 512), up to six the warp-wide tile with two (eight on rows of at most 40). Measured
/// on the H100 (NOTES.md, "SpMM step 29"; slices of the suite's pruned weights at 70%, 90% and 98%, against the
/// selection before it, which ran a warp per row, the sixteen-row block or, at 70%, the tensor cores): on the first
/// 128-1024 rows at n = 128, 256 and 512, 1.141x faster on geometric mean over the 63 problems in the rule
/// (1.00x-1.39x; 384 x 1536 at 70%, n = 128: 18.8 -> 13.5 us; at n = 256 16.3 us against the tensor cores' 18.8); on
/// the first 32-96 rows, 1.167x over 48 (1.05x-1.35x); on the last 160-640 rows, 1.121x over 36 against the best of a
/// warp per row and both tensor-core kernels (0.97x-1.27x). Past six blocks per SM the split lost on those slices
/// (0.70x-1.12x at 7.8-31 blocks per SM, bar the short rows below; 1536 x 384 at 98%, n = 1024: 12.0 vs 18.4 us), and
/// so it does where every row fits one 32-entry tile (uniform 256-768 x 1024 at 1-2%, rows of 10-20 and at most about
/// 35 entries: 0.90x-1.00x), hence a longest row of at least 48 entries (the pruned slices' are 55-817) and a mean of 7
/// or more. Skewed rows keep their pieces ([`is_skewed`]). Not measured: fewer than 32 rows; not taken: n = 1024 (the
/// four-way split ran 1.00x-1.50x in 32 rows but 0.97x-1.16x in 64 and 96, the two-way one 0.91x-1.34x).
///
/// n = 32, 64 and 96 take the k = 8 tile (the only split tile narrower than 128 columns) up to the same six blocks
/// per SM, counted the same way (NOTES.md, "SpMM step 30"). On the 51 slices above at n = 32, 64 and 96 and 16
/// generated problems (pruned 2048-3072 x 384-1536 at 10% and 30%, n = 32; uniform 256-3072 x 2048 at 3%, n = 32
/// and 64) it was 1.52x faster than the selection before it on geometric mean (1.00x-2.14x; 384 x 1536 at 98%, n
/// = 64: 15.8 -> 7.6 us), and the suite's nine weights at n = 32 and 64 went from 0.61x-1.19x of cuSPARSE's speed
/// to 1.13x-1.69x. Past six blocks per SM it lost (uniform 3072 x 2048 at 3%, n = 64, 1536 blocks: 0.88x).
///
/// Two bands move with the rows' mean length (NOTES.md, "SpMM step 37"; every f32 variant timed on 105 row slices
/// of the nine weights, 128-1024 rows, at n = 128-512). The k = 8 tile goes up to four blocks per SM where rows have
/// fewer than 150 entries on average: at 3.4-3.9 per SM it took 0.91x-1.04x of the warp-wide split's time on rows
/// of 8-136 entries, but 0.91x-1.10x on the 384 x 1536 weight's rows of 151-461. The warp-wide split goes up to
/// eight per SM on rows of at most 40 entries: at 6.5-8.0 per SM it ran 0.95x-1.19x as fast as a warp per row
/// there, and lost on longer rows. Checked through the selection on 45 other slices, old and new side by side: the
/// 36 choices moved at n = 128-512 ran 1.072x faster on geometric mean (0.99x-1.19x), the 37 at n = 140, 236, 332
/// and 480, where the tiles run guarded, 1.108x (0.99x-1.34x).
///
/// At 4.4-5.8 blocks per SM the k = 8 tile also beat the warp-wide split on rows of fewer than 64 entries where k
/// is 384 (the attention and ffn_in weights: its time 0.93x-1.04x of the split's, 0.98x on geometric mean over 33
/// problems), but not on the 384 x 1536 weight's rows of 30 (0.94x-1.09x), so it takes that band where k is at
/// most 512 (only k = 384 and 1536 were measured). Through the selection on the third set: 16 choices moved at n =
/// 128-512, 1.044x (1.01x-1.09x), 16 at the rounded widths, 1.050x (1.01x-1.10x). It takes the suite's 384 x 384
/// weight at 90% and 98%, n = 256: 7.8 -> 7.7 us and 6.7 -> 6.4 us.
///
/// Where n has a [`rounded_width`] (f32, a multiple of 4 but not of 128, nor 32, 64 or 96), the tile is the one
/// chosen there, guarded in n ([`predicated_for`]).
pub(crate) fn row_split_tile(m: usize, k: usize, n: usize, stats: &RowStats, dtype: DType) -> Option<SpmmConfig> {
    match rounded_width(n, dtype) {
        Some(width) => row_split_tile_at(m, k, width, stats, dtype).map(|config| predicated_for(config, n)),
        None => row_split_tile_at(m, k, n, stats, dtype),
    }
}

fn row_split_tile_at(m: usize, k: usize, n: usize, stats: &RowStats, dtype: DType) -> Option<SpmmConfig> {
    let narrow = n % 32 == 0 && (32..128).contains(&n);
    let shape = dtype == DType::F32 && ((n % 128 == 0 && n <= 512) || narrow) && m >= 32;
    if !shape || stats.mean < 7.0 || stats.max < 48 || is_skewed(stats) {
        return None;
    }
    // The blocks a warp per row over 128 columns would launch, and the blocks per SM up to which each split tile
    // takes them (the warp-wide tile has no narrow form).
    let blocks = m.saturating_mul(n).div_ceil(128);
    let mean = stats.mean;
    let k8_per_sm = if narrow || (mean < 64.0 && k <= 512) {
        6
    } else if mean < 150.0 {
        4
    } else {
        3
    };
    let warp_per_sm = if narrow {
        0
    } else if mean <= 40.0 {
        8
    } else {
        6
    };
    if blocks <= k8_per_sm * H100_SMS {
        Some(split_row_k8_tile(dtype))
    } else if blocks <= warp_per_sm * H100_SMS {
        Some(split_row_warp_tile(dtype))
    } else {
        None
    }
}

/// f32 power-law rows in 16384 rows or more at n = 64 ([`long_rows_tile`]): four rows of 8 threads over the 64
/// columns, unsplit ([`four_row_tile`]), where the longest row takes at most this many times a resident row's share
/// of steps in it ([`longest_row_steps_over_share`]), instead of the k = 8 tile over the split. Measured on the H200
/// (NOTES.md, "SpMM step 76"; every f32 variant on 16 power-law matrices of 14155-64502 rows, means 3.6-8.9, longest
/// rows 269-3336, n = 64): at 1.21-1.86 times the share the four-row tile ran 1.53x-1.73x faster than the k = 8 tile
/// (all 4; power-law 40730 x 269, mean 4.0: 20.3 -> 11.7 us, 1.05x -> 1.65x of cuSPARSE); at 2.08-2.66 times
/// 1.01x-1.27x (4), and from 3.66 times it lost on all 8 (0.27x-0.93x).
const LONG_ROWS_UNSPLIT_SHARE: f64 = 2.0;

/// [`long_rows_tile`] at n = 512 keeps the two-row tile held to 128 registers (unsplit) where the rows hold more than
/// 350 times the longest row's entries on rows of up to this many entries on average (6 before step 77, as at n =
/// 128-384; steps 66-67 measured rows of 12-40 faster split). Measured on the H200 (NOTES.md, "SpMM step 77"; every
/// f32 variant on steps 75-76's power-law matrices of 26576-59078 rows, means 6.2-6.7, 445-833 times the longest row):
/// the held tile ran 0.88x-0.96x of the split one's time at n = 512 on all 4 (59078 x 475, mean 6.7: 115.0 -> 101.4
/// us). Held out (same step; 10 fresh power-law matrices of 22977-63926 rows, means 6.0-8.0, 351-1037 times, through
/// the library before and after): 1.00x-1.14x at n = 512 (1.08x on geometric mean), but 0.80x-1.13x at n = 128 and
/// 0.89x-1.13x at n = 256, which keep the bound of 6.
const LONG_ROWS_HELD_MAX_MEAN: f64 = 8.0;

/// The tile for rows whose longest is long for the mean though not skewed ([`has_long_rows`]: 257-1024 entries and
/// more than sixteen times the mean), f32 at n a multiple of 4: one that walks the row split's pieces, so that no
/// subwarp walks a whole long row. Power-law matrices (NOTES.md, "SpMM step 49"; 2048-65536 rows, means 4-40, longest
/// rows 313-1024, n = 32-512, every variant with and without the split): the k = 8 tile at n below 128 (4096 x 1024,
/// mean 40, longest 1024, n = 32: 37.8 -> 13.8 us), the two rows of 16 threads over 128 columns at n a multiple of 128
/// (8192 x 2048, mean 12, longest 890, n = 256: 46.2 -> 20.3 us). Where the rows hold more than 350 times the longest
/// row's entries, the longest is not the critical path and that tile held to 128 registers without the split was
/// the fastest (65536 x 4096, mean 4, longest 313, n = 256: 86.8 -> 59.1 us; at 276 times, 16384 x 8192, the split
/// won, 33.9 -> 28.5 us). On 8 fresh power-law matrices at n = 8-1024 (64 problems, through the library): 1.43x
/// faster on geometric mean (1.00x-2.83x), 0.86x -> 1.23x of cuSPARSE. At n = 128 only rows of up to 6 on average keep
/// the held tile (step 49 measured means of 4-6 there): on the H200 (NOTES.md, "SpMM step 66"; every f32 variant on
/// power-law 8192-32768 x 1024-16384, means 4-40, n = 128) rows of 12-40 that hold 413-1275 times the longest row's
/// entries ran 1.12x-1.79x faster split (12288 x 1024, mean 39, longest 1024: 44.2 -> 24.7 us, cuSPARSE 25.2). So
/// at n = 256 and 512 (NOTES.md, "SpMM step 67"; every f32 variant on power-law 12288-32768 x 1024-16384, means 12 and
/// 40): where the held tile was the choice, the split one ran 1.06x-1.48x faster at n = 256 on all 5 (16384 x 1024,
/// mean 40: 67.8 -> 50.8 us, cuSPARSE 62.9) and 0.99x-1.24x at n = 512. Past n = 512 not measured: held, as step 49.
///
/// Since step 77 rows of up to [`LONG_ROWS_HELD_MAX_MEAN`] on average keep the held tile at n = 512.
///
/// At n = 64 in 16384 rows or more, where the longest row takes at most [`LONG_ROWS_UNSPLIT_SHARE`] times a resident
/// row's share of steps in [`four_row_tile`] (which does not walk the split), that tile: see the constant.
fn long_rows_tile(m: usize, n: usize, stats: &RowStats, dtype: DType) -> SpmmConfig {
    let four = four_row_tile(dtype);
    if n == 64 && m >= 16384 && longest_row_steps_over_share(&four, m, n, stats) <= LONG_ROWS_UNSPLIT_SHARE {
        return four;
    }
    if n % 128 != 0 {
        return k8_tile(dtype, 4, n % 32 != 0);
    }
    let held_max_mean = if n == 512 { LONG_ROWS_HELD_MAX_MEAN } else { 6.0 };
    if m as f64 * stats.mean > 350.0 * stats.max as f64 && (n > 512 || stats.mean <= held_max_mean) {
        two_row_tile(dtype)
    } else {
        unbounded_two_row_tile(dtype)
    }
}

/// f16 and bf16 on rows long for their mean though not skewed ([`has_long_rows`]), n a multiple of 8: the 16-row
/// tensor-core windows, which no subwarp walks a long row through, where they were the fastest, else tiles that split
/// the long rows. Power-law matrices (NOTES.md, "SpMM step 50"; 4096-65536 rows, means 4-40, longest rows 313-1024, n
/// = 32-512, every variant with and without the split, both types): the windows at n = 32 (16384 x 1024, mean 12, f16:
/// 52.7 -> 10.6 us; they are 5.6-8.2% full, below [`super::tensor_core::select_tensor_core`]'s 8%), at n = 64 in up
/// to 32768 rows and at n = 128 in up to 16384 (8192 x 2048, n = 128: 55.7 -> 13.7 us); past those the k = 8 tile
/// over 64 columns, split (40960 x 2048, n = 128: 67.6 -> 22.4 us), and from 16384 rows at n a multiple of 256 two
/// rows of 16 threads over 256 columns, split (65536 x 4096, n = 512: 95.6 -> 71.4 us). None below n = 32 (not
/// measured), where the build has no tensor-core counts for A (`tensor_cores` false) and the windows would be the
/// choice, and in f32. Since step 55 also the windows at n up to 1024 wherever C has at most
/// [`LONG_ROWS_SMALL_C`] elements, and the 256-column tile from 8192 rows at n >= 512 (8192 power-law rows of 4
/// and 12 over k = 512-32768, n = 512-1024: 1.00x-1.22x over the 64-column k = 8 tile, both types).
pub(crate) fn long_rows_half(
    m: usize,
    n: usize,
    stats: &RowStats,
    dtype: DType,
    tensor_cores: bool,
) -> Option<super::SpmmKernel> {
    use super::tensor_core::{TensorCoreConfig, WINDOW};
    if dtype.size() != 2 || n < 32 || n % 8 != 0 || !has_long_rows(stats) || is_skewed(stats) {
        return None;
    }
    let windows = n == 32
        || (n <= 64 && m <= 32768)
        || (n <= 128 && m <= 16384)
        || (n <= 1024 && m.saturating_mul(n) <= LONG_ROWS_SMALL_C);
    if windows {
        let tiles_n = long_rows_window_tiles_n(m, n, stats, if n <= 32 { 4 } else { 8 });
        return tensor_cores.then_some(super::SpmmKernel::TensorCore(TensorCoreConfig {
            dtype,
            window: WINDOW as u32,
            tiles_n,
        }));
    }
    let config = if n % 256 == 0 && (m >= 16384 || (m >= 8192 && n >= 512)) {
        half_two_row_256_tile(dtype)
    } else {
        tile(dtype, 1, 8, 4, 8, 64, 8, n % 64 != 0)
    };
    Some(super::SpmmKernel::Tiled(config))
}

/// [`long_rows_half`] takes the 16-row windows at n up to 1024 where C has at most this many elements. Measured on
/// the H100 (NOTES.md, "SpMM step 55"; every variant, f16 and bf16, power-law 1024-8192 rows with longest rows of
/// 257-930, means 4-40, n = 128-1024): the windows beat the best tile by 1.06x-1.87x on all 30 such problems per
/// type at 2^17-2^19 elements of C; with 2^20 elements, rows of 40 ran 0.86x-1.14x on the windows against the tiles
/// that split them.
pub(crate) const LONG_ROWS_SMALL_C: usize = 1 << 19;

/// f16/bf16 rows uneven enough that the tensor-core windows win in more places
/// ([`super::tensor_core::select_tensor_core_rows`]): cv 0.8-2.0, as power-law rows have, but neither [`is_skewed`]
/// nor [`has_long_rows`] (those go to the split or to [`long_rows_half`]). A tile's subwarp walks a row in k = 8
/// steps of dependent loads, so its longest rows set the time where C is small; a window walks its k-blocks with
/// every row's entries side by side.
pub(crate) fn uneven_rows_half(stats: &RowStats, dtype: DType) -> bool {
    dtype.size() == 2 && (0.8..=2.0).contains(&stats.cv) && !is_skewed(stats) && !has_long_rows(stats)
}

/// f16/bf16 skewed rows ([`is_skewed`]) whose longest row holds more than this many entries take no 16-row
/// tensor-core windows: the warp of the longest row's window walks its k-blocks, at least one per 16 of its
/// entries, while the tiles split the row into pieces. Measured on the H100 (NOTES.md, "SpMM step 56"; every
/// variant, f16 and bf16, 32 skewed power-law matrices of 1024-8192 rows, longest rows 1172-28544, n = 8-128): the
/// windows' time grew with the longest row, 8-12 us at 1172-2157 entries (the windows the fastest kernel, or within
/// 3%), 15-19 us at 3855-5925 and 61-70 us at 25385-28544, while the best tile took 12-24 us throughout.
pub(crate) const SKEWED_WINDOW_MAX: usize = 3072;

/// [`SpmmConfig::select_half`] on rows [`too_skewed_for_windows`] at n <= 32: a warp per row up to this many entries.
const SKEWED_WARP_PER_ROW_NNZ: f64 = (1 << 18) as f64;

/// Whether f16/bf16 rows are too skewed for the 16-row windows ([`SKEWED_WINDOW_MAX`]).
pub(crate) fn too_skewed_for_windows(stats: &RowStats, dtype: DType) -> bool {
    dtype.size() == 2 && is_skewed(stats) && stats.max > SKEWED_WINDOW_MAX
}

/// The warps per 16-row window (`tiles_n`: 4 for 32 columns per warp, 8 for 64) on f16/bf16 rows long for their
/// mean ([`is_skewed`] or [`has_long_rows`]) at n = 33-128: 32 columns where the 64-column warps would number at
/// most 128, or at most 256 where the longest row holds 1024 entries or more; else `tiles_n`. The longest row's
/// warp walks all its window's k-blocks, so halving its columns halves the critical path, at the cost of loading
/// A twice. Measured on the H100 (NOTES.md, "SpMM step 56"; every variant, both types): at n = 64, power-law rows
/// with longest rows of 266-930 in 1024 rows, 32 columns per warp ran 1.05x-1.18x faster than 64; skewed rows with
/// longest rows of 1202-2157 in 1024-4096 rows at n = 64 and in 1024-2048 rows at n = 128, 1.03x-1.43x; in 4096 rows
/// of longest rows of 363-909, 64 columns were up to 1.15x faster. Measured at n = 64 and 128; n = 33-128 by the same
/// mechanism.
pub(crate) fn long_rows_window_tiles_n(m: usize, n: usize, stats: &RowStats, tiles_n: u32) -> u32 {
    use super::tensor_core::WINDOW;
    let warps_at_64 = m.div_ceil(WINDOW) * n.div_ceil(64);
    let long = is_skewed(stats) || has_long_rows(stats);
    if long && (33..=128).contains(&n) && (warps_at_64 <= 128 || (stats.max >= 1024 && warps_at_64 <= 256)) {
        4
    } else {
        tiles_n
    }
}

/// f16/bf16 16-row tensor-core windows at n = 32 take 64 columns per warp (`tiles_n` 8, half of them past n) over a
/// B of at most this many rows, in at least [`SMALL_B_MIN_ROWS`] rows of at least [`SMALL_B_MIN_MEAN`] entries on
/// average ([`small_b_window_tiles_n`]).
pub(crate) const SMALL_B_MAX_K: usize = 600;
/// See [`SMALL_B_MAX_K`].
pub(crate) const SMALL_B_MIN_ROWS: usize = 2048;
/// See [`SMALL_B_MAX_K`].
pub(crate) const SMALL_B_MIN_MEAN: f64 = 32.0;

/// The warps per 16-row window (`tiles_n`) at n = 32: 8 (64 columns per warp) where B has at most
/// [`SMALL_B_MAX_K`] rows, A at least [`SMALL_B_MIN_ROWS`] rows of at least [`SMALL_B_MIN_MEAN`] entries on
/// average; else `tiles_n`. The 64-column warps gather B through L1 (cuda/spmm/tensor_core.cuh, `kL1`) and the
/// 32-column ones past it: where B is that small and each window's rows name most of its rows, the windows an SM
/// holds find B in its L1. Measured on the H200 (NOTES.md, "SpMM step 77"; every variant, the 16-row windows the
/// choice at n = 32): f16 power-law and uniform rows of 70-175 in 2872-4991 rows over k = 319-527, 0.81x-0.89x of
/// the 32-column warps' time on all 4 (power-law 4991 x 443, 11.3 -> 9.2 us); under that mean 0.96x (rows of 14.8)
/// and 1.03x (bf16, rows of 20), on shorter rows 1.06x-1.24x (rows of 3-4), over k = 623-28456 1.00x-1.45x. Held out
/// (same step, 12 fresh shapes per type through the library before and after): f16 1.14x (0.95x-1.32x), bf16 1.15x
/// (0.95x-1.32x).
pub(crate) fn small_b_window_tiles_n(m: usize, k: usize, n: usize, stats: &RowStats, tiles_n: u32) -> u32 {
    if n == 32 && k <= SMALL_B_MAX_K && m >= SMALL_B_MIN_ROWS && stats.mean >= SMALL_B_MIN_MEAN {
        8
    } else {
        tiles_n
    }
}

/// f16/bf16: the tile that replaces the 16-row tensor-core windows (which [`super::tensor_core::select_tensor_core`]
/// takes for a small C, m * n < 2^19) where rows of at least 32 entries on average, even ones (cv at most 0.3), fill
/// the windows' k-blocks to less than 8% (`window_fill`, [`super::tensor_core::BlockCounts::narrow_fill`]): rows that
/// share few columns, as uniform rows over a k many times their length do. A window then stores about one entry per
/// column it loads, so it moves the tiles' B and several times their A. At n a multiple of 32 up to 256, where m * n
/// is at most 2^15, or A has at least 1024 rows and m * n is more than 2^16; between those the windows tied or won
/// (1280-2048 rows at n = 32, 1024 at n = 64, 512 at n = 128 and 256: 0.90x-1.14x for the tile). The tile: a warp
/// per row in scalars on up to 1024 rows at n <= 64; the k = 8 tile over 64 columns from m * n = 2^18 at n >= 64
/// (over 32 where n is not a multiple of 64); Sputnik's 32-wide tile on rows of at least 80 entries at n <= 128, but
/// for bf16 at n = 32 from m * n = 2^18, where it ran 1.16x-1.37x slower than the k = 8 tile over 32 columns (8192
/// rows); else that k = 8 tile.
///
/// Measured on the H100 (NOTES.md, "SpMM step 51"; every variant, f16 and bf16, uniform m = 512-8192, k = 1024-32768,
/// 12-400 entries per row, n = 32-256 where the windows were chosen): on the 160 problems in the rule the tile ran
/// 1.23x faster on geometric mean (1.00x-2.14x; f16 8192 x 16384 at 400 per row, n = 32: 60.5 -> 28.1 us; 4096 x
/// 32768, n = 64: 40.3 -> 29.8 us, where cuSPARSE takes 30.0), within 5% of the fastest variant on 156 (0.90x-0.93x
/// on the rest); against cuSPARSE 0.92x -> 1.13x on geometric mean. Through the library on 122 fresh problems per
/// type (m 640-8192, k 2560-32768, 36-400 per row, n 32-256, also 96 and 192): f16 1.26x (1.02x-2.04x), bf16 1.24x
/// (1.01x-1.78x). Rows of 12 entries are left to the windows (a tile up to 1.18x faster there, but on most of step
/// 40's graphs, whose rows are as short, the windows ran up to 1.23x faster than the tiles), as are blocks 8% full or
/// more; but see below for n = 32 in 4096 rows or more.
///
/// At n = 32 in at least 4096 rows the bound on the fill is 14%, and the rule also replaces the 64-row windows
/// (`SpmmKernel::select` asks it for them at n = 32; [`THIN_MANY_ROWS_FILL`]); there rows of 8 entries or more on
/// average take the tile, and rows as uneven as cv 0.4 (since step 77, [`THIN_MANY_ROWS_MIN_MEAN`],
/// [`THIN_MANY_ROWS_MAX_CV`]).
pub(crate) fn sparse_windows_half(
    m: usize,
    n: usize,
    stats: &RowStats,
    dtype: DType,
    window_fill: f64,
) -> Option<SpmmConfig> {
    let c = m.saturating_mul(n);
    let in_band = c <= 1 << 15 || (m >= 1024 && c > 1 << 16);
    // At n = 32 in 4096 rows or more the windows give way at a higher fill, on shorter and less even rows.
    let (fill_bound, min_mean, max_cv) = if n == 32 && m >= 4096 {
        (THIN_MANY_ROWS_FILL, THIN_MANY_ROWS_MIN_MEAN, THIN_MANY_ROWS_MAX_CV)
    } else {
        (0.08, 32.0, 0.3)
    };
    if dtype.size() != 2
        || n % 32 != 0
        || n > 256
        || stats.mean < min_mean
        || stats.cv > max_cv
        || window_fill >= fill_bound
        || !in_band
    {
        return None;
    }
    Some(if n <= 64 && m <= 1024 {
        tile(dtype, 1, 1, 1, 32, 32, 32, true)
    } else if n >= 64 && c >= 1 << 18 && n % 64 == 0 {
        half_k8_tile(dtype)
    } else if n >= 64 && c >= 1 << 18 {
        k8_tile(dtype, 4, true)
    } else if stats.mean >= 80.0 && !(dtype == DType::Bf16 && n == 32 && c >= 1 << 18) && n <= 128 {
        tile(dtype, 4, 4, 4, 32, 32, 8, false)
    } else {
        k8_tile(dtype, 4, true)
    })
}

/// f16/bf16: whether even short rows leave the 16-row tensor-core windows that a small C (m * n < 2^19) gives them
/// ([`super::tensor_core::select_tensor_core`]) for the tile chosen on their rows ([`SpmmConfig::select_with_stats`]):
/// at n = 33-96 in at least [`SHORT_EVEN_MIN_ROWS`] rows of 6-24 entries on average, cv at most 0.3, that fill the
/// windows' k-blocks to less than 8% (`window_fill`, [`super::tensor_core::BlockCounts::narrow_fill`]). Such rows
/// share few columns (uniform rows, a mesh numbered without regard to its windows), so a window stores about one
/// entry per column it loads, and a few thousand rows keep the tile's one-warp blocks busy on every SM.
/// [`sparse_windows_half`] leaves rows this short to the windows: the graphs it was measured on have uneven rows
/// (add32, cv 0.76), few rows (well1850, west0479, utm300) or fuller windows (wrld_1deg, 12%), and there the windows
/// still win.
///
/// Measured on the H200 (NOTES.md, "SpMM step 100"; every variant, f16 and bf16, n = 40, 64 and 96 where C is small:
/// uniform rows of 8 and 16 in 2048-8000 rows, 6.2% full, 4elt, 7434 rows of 11.6, cv 0.16, 7.5% full; and beside
/// them blocks of 2 x 2 and 4 x 4 (cv 0.5-0.6, 11-22% full), power-law rows (cv 1.1-1.4), add32, well1850 and
/// wrld_1deg, where the windows won by up to 2.6x and which the rule leaves): the tile took **0.90x** of the windows'
/// time in f16 (22 problems, 0.80x-1.02x) and 0.91x in bf16 (22, 0.82x-0.99x); 4elt at n = 64 7.5 -> 6.7 us,
/// against cuSPARSE's 6.6. Held out (same step; ten fresh uniform matrices of 2048-8100 rows of 6-24 over k =
/// 2500-12000, and 4elt, at n = 48-88, through the library before and after): 0.869x of the time in f16 and 0.860x
/// in bf16 on the 38 problems per type it moved (0.60x-0.97x, none slower).
pub(crate) fn short_even_rows_leave_windows(
    m: usize,
    n: usize,
    stats: &RowStats,
    dtype: DType,
    window_fill: f64,
) -> bool {
    dtype.size() == 2
        && m >= SHORT_EVEN_MIN_ROWS
        && (33..=96).contains(&n)
        && (6.0..=24.0).contains(&stats.mean)
        && stats.cv <= 0.3
        && window_fill < 0.08
}

/// [`short_even_rows_leave_windows`]: the fewest rows, the fewest measured (on well1850's 1850 rows the tile and the
/// windows tied).
pub(crate) const SHORT_EVEN_MIN_ROWS: usize = 2048;

/// f16/bf16 at n = 32 in at least 4096 rows: [`sparse_windows_half`] takes the tile over the tensor-core windows (the
/// 16-row ones, or the 64-row ones that a large C takes) where they are less than this full, not 8%. On even rows of
/// 32 or more entries there the windows still store little more than an entry per column they load, and a tile keeps
/// every lane busy. Measured on the H100 (NOTES.md, "SpMM step 52"; every variant, f16 and bf16, uniform rows, the
/// windows 8.2-13.5% full): against the windows the library chose, the tile ran 1.23x-2.04x faster in 4096-65536
/// rows of 40 (8192 x 1024, f16: 11.9 -> 7.7 us; 65536 x 1024: 55.8 -> 28.3 us), 1.12x-1.84x on rows of 120 (16384
/// x 1024, f16, the 64-row windows: 38.8 -> 21.0 us) and 1.20x-1.78x on rows of 400 (4096 and 8192 rows); through
/// the library on fresh shapes (5000-12288 rows of 90-200, both types), 1.28x-1.61x. The graphs of
/// `../shared/matrices` fill the 16-row windows to 14-24% at n = 32 and keep them.
pub(crate) const THIN_MANY_ROWS_FILL: f64 = 0.14;

/// f16/bf16 at n = 32 in at least 4096 rows: [`sparse_windows_half`] takes the tile over the windows on even rows of
/// at least this many entries on average, not 32. Measured on the H200 (NOTES.md, "SpMM step 77"; every variant, f16
/// and bf16, 10 fresh uniform matrices each of 4167-63093 rows of 12.7-31.4 entries over k = 308-30954, the windows
/// 6-12% full and the choice): the k = 8 tile over 32 columns ran 1.11x-1.94x faster than the windows on all 20 (f16
/// 15718 x 677, rows of 22: 12.8 -> 8.2 us, where cuSPARSE takes 10.3), and within 5% of the fastest tile; on 16
/// more of rows of 5.3-11.6, 0.99x-1.35x (1.13x on geometric mean; 1.09x-1.35x on the 8 of 8 or more). Held out
/// (same step, through the library before and after): rows of 12-31, f16 1.41x (1.07x-2.15x) and bf16 1.27x
/// (1.06x-1.51x) on 12 each, below cuSPARSE 14 -> 1; rows of 8-12, f16 1.20x (1.07x-1.29x) and bf16 1.07x
/// (1.02x-1.22x) on 8 each. Of the real matrices only 4elt (7434 rows of 11.6, cv 0.16, 7.5% full) moves: 6.3 ->
/// 6.2 us (f16) and 6.4 -> 6.1 us (bf16). wrld_1deg (rows of 7.3) keeps the windows, which tie the tile there.
pub(crate) const THIN_MANY_ROWS_MIN_MEAN: f64 = 8.0;

/// f16/bf16 at n = 32 in at least 4096 rows: [`sparse_windows_half`] takes the tile over the windows on rows whose
/// lengths vary by up to this coefficient of variation, not 0.3: Bernoulli rows of 8-11 entries (cv 0.30-0.35), and
/// copter2 (55476 rows of 12.7, cv 0.33, 9.5% full). Measured on the H200 (NOTES.md, "SpMM step 77"; every variant,
/// 8 fresh pruned matrices per type of 4221-15015 rows of 8.1-10.8, cv 0.30-0.35): the k = 8 tile ran 0.74x-0.99x of
/// the windows' time on all 16 (bf16 11138 x 1131: 8.6 -> 6.3 us); copter2 16.6 -> 14.5 us (f16) and 16.7 -> 14.5
/// (bf16). Held out (same step, 12 fresh pruned matrices per type of rows of 8.2-30, cv 0.18-0.35, through the
/// library before and after): f16 1.36x (1.09x-2.28x), bf16 1.27x (1.06x-2.02x), below cuSPARSE 16 -> 0. Not past
/// 0.4, where nothing was measured.
pub(crate) const THIN_MANY_ROWS_MAX_CV: f64 = 0.4;

/// Thirty-two rows of 16 threads on one 64-column tile, k = 16 (one block of 512 threads per SM): the tile for
/// [`thirty_two_row_rows`], and one `spmm::block_order` runs column tiles first unless the rows are even.
pub(crate) fn thirty_two_row_tile(dtype: DType) -> SpmmConfig {
    tile(dtype, 1, 4, 32, 16, 64, 16, false)
}

/// 256-1024 rows over n from 768 to 3072, where the thirty-two-row block was measured faster than the tiles
/// chosen before (NOTES.md, "SpMM step 21"): rows of cv 0.1-0.5 in 384-1024 rows from n = 768; cv up to 1.0 from
/// 640 rows; cv up to 1.5 from n = 1536 where rows are shorter than 256; and any cv below 1.2 (even rows too) in
/// 256-640 rows from n = 2048. Rows of at least 30 entries (the shortest measured), not skewed enough to split,
/// and k within the sweep's (1024-3072).
fn thirty_two_row_rows(m: usize, k: usize, n: usize, stats: &RowStats) -> bool {
    let (mean, cv) = (stats.mean, stats.cv);
    let rows = (384..=1024).contains(&m);
    let covered = (rows && (768..=3072).contains(&n) && (0.1..0.5).contains(&cv))
        || (rows && (1536..=3072).contains(&n) && (0.1..1.5).contains(&cv) && mean < 256.0)
        || ((640..=1024).contains(&m) && (768..=3072).contains(&n) && (0.1..1.0).contains(&cv))
        || ((256..=640).contains(&m) && (2048..=3072).contains(&n) && cv < 1.2);
    covered && n % 64 == 0 && mean >= 30.0 && !is_skewed(stats) && (1024..=3072).contains(&k)
}

/// Even rows (cv < 0.1) of 400-820 entries over a large k, where the thirty-two-row block beat the two-row tiles (or
/// the warp per row) these shapes took:
/// - 2048-8192 rows over k = 8192-12288 at n = 768-1024 (NOTES.md, "SpMM step 47"): 1.09x-1.48x on 18 problems of
///   two H100 sweeps (uniform 2048-8192 x 8192 at 5-10%: 8192 x 8192 at 5%, n = 1024, 1308.8 vs 882.1 us) and
///   1.19x-1.48x on 6 fresh shapes (k 8192, 10240 and 12288);
/// - 1024-8192 rows, at most 8.5% dense, at n = 768-3072 over k = 5632-16384, and from n = 1536 over k = 5120 too
///   (NOTES.md, "SpMM step 48"): 1.03x-1.77x on 39 problems of four H100 sweeps (uniform, n = 768-1024 over k =
///   5632-16384 and n = 1536-3072 over k = 5120-16384: 2048 x 8192 at 7%, n = 2048, 991.8 vs 589.4 us, 0.76x -> 1.28x
///   of cuSPARSE) and 1.11x-1.80x on 11 fresh shapes (1536 x 8192 at 7%, n = 3072: 0.71x -> 1.27x of cuSPARSE).
///
/// - 1024-8192 rows over k = 16384-32768 at n = 256-1024 (NOTES.md, "SpMM step 55"; every f32 variant, uniform
///   rows of 400): 1.08x-1.58x on all 21 problems (1024 x 16384, n = 256: 45.7 -> 28.9 us); through the library on
///   fresh shapes (1536-8000 x 16384-30000, rows of 390-700) 1.04x-1.47x. At n = 128 the sweep had 0.79x-1.39x
///   and a fresh shape 0.87x: not taken. The same sweep had rows of 399.5-400.5 over k = 8192 at n = 1024 miss
///   step 47's bound of 400 by a fraction, at 1.34x-1.43x slower than this block: the bound on the mean is 380.
///
/// Not k = 5120 at n = 768 (3072 x 5120 at 8%: 0.93x), 10% dense below k = 8192 (0.95x-1.25x), n = 512 below k =
/// 16384 (0.91x-1.09x), nor rows of 246 entries (0.94x-1.25x).
fn thirty_two_rows_large_k(m: usize, k: usize, n: usize, stats: &RowStats) -> bool {
    let step_47 = (2048..=8192).contains(&m) && (8192..=12288).contains(&k) && (768..=1024).contains(&n);
    let least_k = if n >= 1536 { 5120 } else { 5632 };
    let step_48 = (1024..=8192).contains(&m)
        && (least_k..=16384).contains(&k)
        && (768..=3072).contains(&n)
        && stats.mean <= 0.085 * k as f64;
    let step_55 = (1024..=8192).contains(&m) && (16384..=32768).contains(&k) && (256..=1024).contains(&n);
    (step_47 || step_48 || step_55) && n % 128 == 0 && stats.cv < 0.1 && (380.0..=820.0).contains(&stats.mean)
}

/// f32 even rows (cv at most 0.5) of 3-10 entries (3-12.5 over k up to 1024) in 16384-65536 rows over k up to 8192, at
/// n = 256-1024 (a multiple of 128): two rows of 16 threads over 128 columns ([`two_row_tile`]), where the bounded
/// k = 8 tile was taken. Measured on the H100 (NOTES.md, "SpMM step 55"; every f32 variant, uniform 16384-65536 x
/// 512-8192 at 8, 12 and 24 per row, n = 256, 512 and 1024): on rows of 8 the two-row tile ran 1.03x-1.49x faster
/// than the k = 8 tile on all 21 problems it did not already have (k = 512 1.22x-1.49x, 2048 1.13x-1.27x, 8192
/// 1.03x-1.13x); rows of 12 won only over k = 512 (1.04x-1.26x; 0.88x-0.96x over k = 2048-8192) and rows of 24 lost
/// (0.72x-0.94x). Since step 66 rows of up to 12.5 where k is at most 1024: on the H200 (NOTES.md, "SpMM step 66";
/// every f32 variant on uniform 16384 and 32768 x 512 and 1024 at 12-12.0003 per row, n = 256-1024) the two-row tile
/// ran 1.17x-1.27x faster than the k = 8 tile on all 9 problems it did not already have, and over k = 4096
/// 0.97x-0.98x.
/// [`short_rows`] takes the same tile below 200,000 entries at n <= 512.
fn many_short_even_rows(m: usize, k: usize, n: usize, stats: &RowStats) -> bool {
    let longest_mean = if k <= 1024 { 12.5 } else { 10.0 };
    (16384..=65536).contains(&m)
        && k <= 8192
        && n % 128 == 0
        && (256..=1024).contains(&n)
        && (3.0..=longest_mean).contains(&stats.mean)
        && stats.cv <= 0.5
}

/// Even rows (cv at most 0.3) of 16-200 entries over k = 1024-16384 at n = 128, 256 or 512 (a multiple of 128 up to
/// 512), where the thirty-two-row block's launch, one block of 512 threads per SM, is one wave at least 90% full on
/// the H100's 132 SMs: 119-132 blocks of 32 rows by 64 columns (2048 rows at n = 128, 1024 at 256, 512 at 512).
/// Measured on the H100 (NOTES.md, "SpMM step 51"; every f32 variant, uniform 512-3072 x 1024-16384 at 20-160 per
/// row, n = 128-512): at 128 blocks it ran 1.135x faster on geometric mean than the tiles chosen before (1.005x-1.42x
/// on 36 problems; 1024 x 4096 at 80 per row, n = 256: 12.5 -> 9.6 us, 0.83x -> 1.08x of cuSPARSE; 512 x 4096 at
/// 160, n = 512: 19.8 -> 14.0 us), within 6% of the fastest variant. At 96 blocks (0.76x-1.10x), 192 (0.73x-1.00x)
/// and 256 (0.88x-1.25x) it was not the better choice throughout.
fn thirty_two_rows_one_wave(m: usize, k: usize, n: usize, stats: &RowStats) -> bool {
    let blocks = m.div_ceil(32).saturating_mul(n / 64);
    n % 128 == 0
        && (128..=512).contains(&n)
        && (119..=H100_SMS).contains(&blocks)
        && (1024..=16384).contains(&k)
        && (16.0..=200.0).contains(&stats.mean)
        && stats.cv <= 0.3
}

/// Few long rows over a wide B, where the sixteen-row block shares a 64-column tile of B best (NOTES.md, "SpMM
/// step 13"); at n = 768 only uneven rows in 384-640 rows: cv >= 0.4 and mean >= 100 over k >= 1536, or cv >= 0.75
/// and mean >= 70 over k 1024-1535 in at most 512 rows (NOTES.md, "SpMM step 20").
fn sixteen_row_rows(m: usize, k: usize, n: usize, stats: &RowStats) -> bool {
    let wide = (1024..=2048).contains(&n) && m <= 768 && stats.mean >= 128.0;
    let (mean, cv) = (stats.mean, stats.cv);
    let uneven_n768 = n == 768
        && (384..=640).contains(&m)
        && ((k >= 1536 && mean >= 100.0 && cv >= 0.4)
            || ((1024..1536).contains(&k) && m <= 512 && mean >= 70.0 && cv >= 0.75));
    n % 64 == 0 && cv <= 2.0 && (wide || uneven_n768)
}

/// Long rows of moderately uneven length (cv 0.3-0.85, below [`uneven_long_rows`]) in 384-1024 rows over n from
/// 3072 to 4096: the range where the sixteen-row block was measured fastest (NOTES.md, "SpMM step 16").
fn moderately_uneven_rows_wide_n(m: usize, k: usize, n: usize, stats: &RowStats) -> bool {
    n % 64 == 0
        && (3072..=4096).contains(&n)
        && (384..=1024).contains(&m)
        && k.saturating_mul(n) <= LARGEST_SWEPT_B
        && stats.mean >= 150.0
        && (0.3..0.85).contains(&stats.cv)
}

/// How many standard deviations the longest row lies above the mean row length, (max - mean) / (cv * mean); 0 where
/// every row has the same length. Of two matrices with the same cv, it tells rows whose spread is a few long rows
/// far out (a power-law tail: 8-21 here) from rows whose spread is many long rows and many short or empty ones (a
/// weight matrix whose rows differ in scale: 4-7 here).
fn longest_row_sigmas(stats: &RowStats) -> f64 {
    let sd = stats.cv * stats.mean;
    if sd > 0.0 {
        (stats.max as f64 - stats.mean) / sd
    } else {
        0.0
    }
}

/// The longest row at least this many standard deviations above the mean ([`longest_row_sigmas`]): a few rows far
/// longer than the rest ([`rare_long_rows`]).
const RARE_LONG_ROW_SIGMAS: f64 = 9.0;

/// In [`uneven_long_rows`]' range at n = 1024-2048, rows whose longest lies [`RARE_LONG_ROW_SIGMAS`] or more standard
/// deviations above the mean, as power-law rows have: two rows of 16 threads over 32 columns, not the eight-row
/// tile. That tile was set on weight matrices whose rows differ in scale (step 16), where a large share of the
/// rows is long (their longest 4-7 standard deviations out); where a few rows are far longer than the rest, its
/// blocks of eight one-row warps on 64 columns, two per SM, wait on them. Measured on the H200 (NOTES.md, "SpMM
/// step 79"; every f32 variant on 40 matrices the eight-row tile was chosen for, 24 power-law and 16 `scaled-SIGMA`
/// ones, 384-1024 rows, k = 1325-7777, means 78-446, at n = 1024, 1536 and 2048): on the 60 problems from 9.7
/// standard deviations out the two-row tile took 0.51x-0.94x of the eight-row tile's time (0.707x on geometric
/// mean, within 1% of the fastest variant; 464 x 6134, mean 232, n = 1024: 104.8 -> 53.9 us), 0.84x -> 1.18x of
/// cuSPARSE's best, below it 51 -> 0. At 7.8-8.5 (2 matrices, 4 problems) it took 0.97x-1.10x; at 4.1-7.0 (the 16
/// scaled ones, 38 problems) 0.88x-1.28x at n = 1024 (1.003x on geometric mean) and 1.01x-1.16x from n = 1536, so
/// the eight-row tile stays there.
fn rare_long_rows(n: usize, stats: &RowStats) -> bool {
    n <= 2048 && longest_row_sigmas(stats) >= RARE_LONG_ROW_SIGMAS
}

/// Long rows of uneven length (as magnitude pruning leaves a weight matrix whose rows differ in scale) in
/// 384-1024 rows, over n >= 1024: the range of the sweep behind [`eight_row_tile`] (NOTES.md, "SpMM step 16"),
/// less the sixteen-row block's where no row is long enough to split.
fn uneven_long_rows(m: usize, k: usize, n: usize, stats: &RowStats) -> bool {
    n % 64 == 0
        && n >= 1024
        && (384..=1024).contains(&m)
        && k.saturating_mul(n) <= LARGEST_SWEPT_B
        && stats.mean >= 70.0
        && (0.85..=2.1).contains(&stats.cv)
        && (!sixteen_row_rows(m, k, n, stats) || is_skewed(stats))
}

/// Long rows (mean >= 140) of uneven length (cv 0.5-2.0), as magnitude pruning leaves a weight matrix whose rows
/// differ in scale, over k >= 2048 in 640-4096 rows, n from 1024 to 3072: the range of the sweeps behind
/// [`four_row_tile`] (NOTES.md, "SpMM step 17"); past 3072 rows only from cv 0.85, since less uneven rows there
/// ran at 0.88x-1.28x. Checked after [`uneven_long_rows`] and [`moderately_uneven_rows_wide_n`], which keep
/// their ranges.
///
/// Skewed rows ([`is_skewed`]) over k past 4096, which step 17 never swept, only where they average 380 or more and
/// the longest row is within a resident subwarp's share of the launch ([`four_row_tile_longest_within_share`]): the
/// tile has no piece path, so one subwarp walks the longest row whole. Measured on the H200 (NOTES.md, "SpMM step
/// 67"; every f32 variant on power-law 2048-4096 x 6144-12288, means 174-593, n = 1024-2048, the 20 problems in
/// this rule's other bounds): where the longest row took more than that share (1.03-3.3 times it) the tile ran
/// 1.20x-2.39x slower than four rows of 8 threads over 32 columns that split the rows ([`long_skewed_rows_wide_n`];
/// 2048 x 8192, mean 405, n = 1024: 500.8 us against 310.0, cuSPARSE 334.2); within it, rows of 570-588 (longest
/// 6144) ran it 1.01x-1.19x faster than that tile, rows of 174-177 1.06x-1.12x slower.
fn long_uneven_rows_large_k(m: usize, k: usize, n: usize, stats: &RowStats) -> bool {
    n % 64 == 0
        && (1024..=3072).contains(&n)
        && (640..=4096).contains(&m)
        && k >= 2048
        && k.saturating_mul(n) <= LARGEST_SWEPT_B
        && stats.mean >= 140.0
        && (0.5..=2.0).contains(&stats.cv)
        && (m <= 3072 || stats.cv >= 0.85)
        && (k <= 4096 || !is_skewed(stats) || (stats.mean >= 380.0 && four_row_tile_longest_within_share(m, n, stats)))
}

/// [`longest_row_steps_over_share`] of [`four_row_tile`] from which [`rare_long_rows_four_rows`] leaves it.
const FOUR_ROW_CRITICAL_SHARE: f64 = 1.3;

/// In [`long_uneven_rows_large_k`]'s range at n = 1024-1536, rows whose longest lies [`RARE_LONG_ROW_SIGMAS`] or more
/// standard deviations above the mean (power-law rows) and takes [`four_row_tile`] [`FOUR_ROW_CRITICAL_SHARE`] times
/// a resident subwarp's share of the launch or more ([`longest_row_steps_over_share`]): the k = 16 tile over 32
/// columns, whose column tiles split that row's work in two. Measured on the H200 (NOTES.md, "SpMM step 79"; every
/// f32 variant on 43 power-law matrices of 1100-3968 rows over k = 2064-4644, means 144-456, that the four-row tile was
/// chosen for, at n = 1024, and 12 of them at n = 1536 and 2048): where both bounds hold (27 problems at n = 1024 and
/// 1536) the k = 16 tile took 0.63x-0.96x of the four-row tile's time (0.80x on geometric mean; 2197 x 3629, rows of
/// 146, n = 1024: 0.63x); on the other power-law problems 0.82x-1.22x, 1.06x on geometric mean (3231 x 2495, rows of
/// 271, 0.71 times the share: 1.22x); on 13 weight-like `scaled-SIGMA` matrices (3.7-6.2 standard deviations out) at
/// n = 1024, 0.67x-1.20x. Held out (fresh power-law matrices of 1025-4096 rows at n = 1024, 1280 and 1536): 1.28x
/// faster on the 43 problems it moves (1.06x-1.67x, none slower), 0.91x -> 1.17x of cuSPARSE, below it 35 -> 0. Where
/// `longest_row_choice` gives the thirty-two-row block for the four-row tile (steps 68-72), that block stays.
fn rare_long_rows_four_rows(m: usize, n: usize, stats: &RowStats) -> bool {
    n <= 1536
        && longest_row_sigmas(stats) >= RARE_LONG_ROW_SIGMAS
        && longest_row_steps_over_share(&four_row_tile(DType::F32), m, n, stats) >= FOUR_ROW_CRITICAL_SHARE
}

/// Whether [`four_row_tile`]'s longest row, walked by one subwarp 16 entries a step, takes no more steps than a resident
/// subwarp's share of the launch: every row's steps (one for its bounds, one per 16 entries) over n / 64 column tiles,
/// shared by four rows per block, eight blocks per SM, on 132 SMs (the tile's own parameters).
fn four_row_tile_longest_within_share(m: usize, n: usize, stats: &RowStats) -> bool {
    let tile = four_row_tile(DType::F32);
    let k = tile.block_items_k as f64;
    let steps = m as f64 * (1.0 + stats.mean / k) * (n / tile.block_items_x as usize) as f64;
    let resident = tile.block_items_y as usize * tile.min_occupancy as usize * H100_SMS;
    stats.max as f64 / k <= steps / resident as f64
}

/// Short rows (3-12 entries on average, at most 200,000 entries in all) in 2049-32768 rows, or in 1000-2048 even
/// rows (cv <= 0.5), n = 128-512: two rows of 16 threads over 128 columns ([`two_row_tile`]) beat the tiles these
/// shapes had, the k = 8 tile from 2049 rows and a warp per row below (NOTES.md, "SpMM step 30").
/// - 2049-32768 rows (uniform, banded and power-law rows of 3-12, cv up to 1.5; four sweeps): 1.00x-1.73x (28000
///   power-law rows of 3, n = 128: 33.6 -> 19.4 us) but for a few at 0.97x-0.99x (14000 uniform rows of 10; 3000 of
///   10 at n = 384); the real meshes 4elt, wrld_1deg and add32 1.09x-1.31x (wrld_1deg, 15260 rows of 7.3, n = 128:
///   14.3 -> 11.1 us). Past 250,000 entries 0.82x-1.20x, mostly below 1.0x (65536 rows of 8: 0.82x-0.96x; copter2,
///   704,476 entries, 0.94x-0.98x), and at 40000-45000 rows 0.96x-1.08x even under 200,000; rows of 14-16 mixed
///   (0.94x-1.19x).
/// - 1000-2048 rows: even rows (cv up to 0.1) 1.00x-1.32x over a warp per row (1800 rows of 5, n = 128: 6.9 -> 5.5
///   us; well1850, 1850 rows of 4.7: 6.5 -> 5.7 us), but uneven ones lose (power-law rows, cv 0.9-1.1: 0.69x-0.95x at
///   n = 128 and 256; the suite's pruned 1536 x 384 at 98%, cv 1.3, n = 256: 7.5 -> 9.7 us), hence cv <= 0.5. At
///   600 rows the gain was 0-8% at 5-6 us, so the rule starts at 1000.
/// - On 39 fresh problems whose choice this form changed (uniform, banded and power-law, 1100-30000 rows of 4-9, n =
///   128-384): 1.22x (0.99x-1.60x).
fn short_rows(m: usize, k: usize, n: usize, stats: &RowStats) -> bool {
    let rows = ((2049..=32768).contains(&m) && stats.cv <= 2.0) || ((1000..=2048).contains(&m) && stats.cv <= 0.5);
    n % 128 == 0
        && (128..=512).contains(&n)
        && rows
        && (3.0..=12.0).contains(&stats.mean)
        && m as f64 * stats.mean <= 200_000.0
        && k.saturating_mul(n) <= LARGEST_SWEPT_B
}

/// f32 short rows (3-6 entries on average over k up to 16384, 3-10 over k up to 2048; cv at most 0.8) in 3000-8191
/// rows at n = 1024-2048 (a multiple of 128), past [`short_rows`]'s widths and below [`short_rows_fewer_rows_wide_n`]'s
/// rows: two rows of 16 threads over 128 columns ([`two_row_tile`]), where the bounded k = 8 tile was taken. Measured
/// on the H200 (NOTES.md, "SpMM step 66"; every f32 variant on uniform 3000, 4096, 6000 and 8000 x 1024, 4096 and
/// 16384 at 5 and 10 per row, add32 and 4elt, n = 1024 and 2048): 1.24x faster than the k = 8 tile on the 34 problems
/// the rule moves (1.02x-1.58x; 4096 x 1024 at 5, n = 1024: 24.1 -> 16.1 us; add32, 4960 rows of 4.8, cv 0.76, n =
/// 1024: 28.8 -> 22.9 us). Rows of 10 over k = 4096 were mixed (0.92x-1.07x, the losses at n = 2048) and over k =
/// 16384 lost (0.93x-1.00x), hence the bounds. The two-row tile in turn was as fast on rows of 5 (1.03x-1.07x of the
/// fastest variant on geometric mean, by k, against 1.01x-1.07x) and slower on rows of 10 (1.05x-1.17x against
/// 1.02x-1.05x).
fn short_rows_wide_n(m: usize, k: usize, n: usize, stats: &RowStats) -> bool {
    let longest_mean = if k <= 2048 { 10.0 } else { 6.0 };
    (3000..8192).contains(&m)
        && k <= 16384
        && n % 128 == 0
        && (1024..=2048).contains(&n)
        && (3.0..=longest_mean).contains(&stats.mean)
        && stats.cv <= 0.8
}

/// f32 in 512-1024 rows of uneven length (cv at least 0.6) averaging 40 or more entries, whose longest row is more
/// than two pieces (256 entries) but neither skewed nor long enough for the pieces ([`is_skewed`], [`has_long_rows`]),
/// at n = 256: two warps per row over 128 columns ([`split_row_warp_tile`]), past the six blocks per SM where
/// [`row_split_tile`] stops. There a warp per row walks the longest rows alone, and they are the critical path.
/// Measured on the H100 (NOTES.md, "SpMM step 52"; power-law matrices of 512-2048 rows, k = 4096-32768): every f32
/// variant on 28 (8 in this rule), then old against new through the library on 24 fresh ones (6 in it) and on step
/// 48's scan; those in it have means of 41-126 and longest rows of 298-1004. At n = 256 the split ran faster than
/// the warp per row chosen before on all 16: 1.22x-1.39x on 15 (512 x 32768, mean 110, longest 687: 22.3 -> 17.0 us,
/// 0.87x -> 1.14x of cuSPARSE) and 1.03x on the scan's 1024 x 32768 (mean 41, longest 298). Not n = 512
/// (0.86x-1.20x), nor past it (0.82x-1.04x at n = 768 and 1024 on the fresh ones), nor where the pieces split the
/// long rows (0.81x-0.98x against their two rows of 16 threads). No suite weight has such rows (their rows past 256
/// entries are even, cv 0.11-0.34).
fn uneven_few_rows(m: usize, n: usize, stats: &RowStats) -> bool {
    (512..=1024).contains(&m)
        && n == 256
        && stats.cv >= 0.6
        && stats.mean >= 40.0
        && stats.max > 256
        && !is_skewed(stats)
        && !has_long_rows(stats)
}

/// f32 power-law rows in 1025-3072 rows over k = 4096-16384, averaging 25-100 entries, whose longest row passes 256
/// entries and 8 times the mean but is neither [`is_skewed`] nor [`has_long_rows`], so that no tile cuts it into
/// pieces: at n = 256-512 two warps per row over 128 columns ([`split_row_warp_tile`]), at n = 1024-2048 one (n a
/// multiple of 128). The tiles chosen before (two rows of 16 threads held to 128 registers up to 2048 rows, the k = 8
/// tile held to 64 registers past them, a warp per row at n <= 512) walk the longest row 8 or 16 entries a step,
/// and in launches this size it is the critical path. Measured on the H200 (NOTES.md, "SpMM step 67"; every f32
/// variant on 38 such matrices of 1024-3072 rows, means 28-93, longest rows 8-16 times the mean, n = 256, 512, 1024
/// and 2048): in the 104 problems of 1536-3072 rows the choice before took 1.12x-1.31x of the fastest variant's time
/// on geometric mean by width, these tiles 1.01x-1.05x; they moved 102, 1.186x faster (0.95x-1.79x; 2048 x 16384,
/// mean 58, longest 757, n = 512: 61.2 -> 38.2 us), 0.93x -> 1.10x of cuSPARSE (65 below it -> 20). In 512-1024 rows
/// [`uneven_few_rows`] and [`power_law_few_rows_wide_n`] take such rows at n = 256 and 1024-2048.
fn longest_rows_unsplit_few_rows(m: usize, k: usize, n: usize, stats: &RowStats, dtype: DType) -> Option<SpmmConfig> {
    let rows = (1025..=3072).contains(&m)
        && (4096..=16384).contains(&k)
        && (25.0..=100.0).contains(&stats.mean)
        && stats.max > 256
        && stats.max as f64 > 8.0 * stats.mean
        && !is_skewed(stats)
        && !has_long_rows(stats);
    match n {
        _ if !rows || n % 128 != 0 => None,
        256..=512 => Some(split_row_warp_tile(dtype)),
        1024..=2048 => Some(warp_per_row_tile(dtype)),
        _ => None,
    }
}

/// f32 power-law rows in 512-1024 rows over k >= 4096, averaging 37-140 entries (cv at least 0.6, longest past 256
/// entries), at n = 1024-2048 (a multiple of 128): one warp per row over 128 columns. The rules above and below were
/// measured on k <= 3072 (the eight-row tile of [`uneven_long_rows`], step 16) or on even rows (two rows of 16
/// threads held to 128 registers, step 14), and here they leave the longest rows to one subwarp or a slow block:
/// measured on the H100 (NOTES.md, "SpMM step 52"; every f32 variant on 32 power-law matrices of 512-1024 rows, k =
/// 4096-32768, skewed or not, at n = 512-2048, and 18 more at n = 1024), the warp per row ran 1.25x faster than the
/// choice before on geometric mean over the 33 problems the rule moves at n = 1024 and 1.18x over 31 at n = 2048
/// (0.95x-3.28x; 512 x 8192, mean 136, longest 5351, n = 1024: 162.2 -> 49.5 us against the eight-row tile; 768 x
/// 16384, mean 59, n = 2048: 136.4 -> 76.0 us against two rows of 16 threads). Through the library on 16 fresh
/// matrices at n = 1024, 1280, 1536 and 2048: 1.33x on the 35 problems it moves (1.02x-3.35x), 0.86x -> 1.14x of
/// cuSPARSE. Not n = 768 (0.90x-1.43x, mixed), nor means of 140 and up, where [`long_uneven_rows_large_k`] was
/// measured.
fn power_law_few_rows_wide_n(m: usize, k: usize, n: usize, stats: &RowStats) -> bool {
    (512..=1024).contains(&m)
        && k >= 4096
        && n % 128 == 0
        && (1024..=2048).contains(&n)
        && stats.cv >= 0.6
        && (37.0..140.0).contains(&stats.mean)
        && stats.max > 256
}

/// f32 power-law rows (cv at least 0.9, at most 50 entries on average) in 2048-8192 rows over k up to 8192, at n = 32,
/// 64 and 128: the 32-entry tiles Sputnik's own dispatch takes at these widths, two rows of 16 threads over 32 columns
/// in float2 at n = 32 and over 64 columns in float4 at n = 64, and a warp per row over 128 columns at n = 128. The
/// k = 8 tile chosen before walks a long row eight entries a step, and at these widths the launch is about one wave,
/// so the longest rows set its time (or, where they are long enough to split, its second launch does: 12-14 us for
/// almost any such matrix at n = 32-64). Measured on the H200 (NOTES.md, "SpMM step 66"; every f32 variant on 36
/// power-law matrices of 2048, 4096 and 8192 rows over k = 512, 2048 and 8192 with means of 4-48, and 12 more not
/// used to fit, 3072 and 6144 rows over k = 1024 and 4096, means 6-32; n = 32-1024): on the 80 problems the rule
/// moves in the first set 1.254x faster than the choice before (0.96x-1.87x; 4096 x 512, mean 47, n = 32: 18.9 ->
/// 10.1 us), on the 28 of the second 1.265x (1.04x-1.76x). Mixed, hence the bounds: n = 64 in 8192 rows of more than 6
/// entries on average (0.90x-1.60x, 1.07x on geometric mean over 11) and n = 128 in 6144-8192 rows (0.85x-1.61x, 1.03x
/// over 19). At n = 256 and 1024 the choice was already 1.05x-1.06x of the fastest variant on geometric mean. Not
/// uniform rows (0.58x-1.05x at n = 32-128), nor 16384 rows (0.90x-1.07x). Where the row split's tiles take the rows
/// ([`row_split_tile`], checked first) they stay: they took 0.77x-1.11x of these tiles' time.
///
/// At n = 32 in 8193-16384 rows over k up to 16384, four rows of 8 threads over 32 columns, 16 entries a step in
/// float2 (`s2d4_y4k16x32w8`): measured on the H200 (NOTES.md, "SpMM step 67"; every f32 variant on power-law 8192 x
/// 16384 and 10240-16384 x 1024-16384, means 4-40), 1.145x faster than the k = 8 tile chosen before on all 29 such
/// problems (1.00x-1.35x; 16384 x 4096, mean 4: 12.6 -> 9.4 us), where rule 1's tile took 1.00x-1.27x of the fastest
/// variant's time and this one 1.04x-1.09x on geometric mean. Not 32768 rows, where the k = 8 tile was the fastest.
fn power_law_rows_narrow_n(m: usize, k: usize, n: usize, stats: &RowStats, dtype: DType) -> Option<SpmmConfig> {
    let power_law = stats.cv >= 0.9 && stats.mean <= 50.0;
    if n == 32 && power_law && (8193..=16384).contains(&m) && k <= 16384 {
        return Some(k16_tile(dtype, false));
    }
    let rows = (2048..=8192).contains(&m) && k <= 8192 && power_law;
    match n {
        _ if !rows || row_split_tile(m, k, n, stats, dtype).is_some() => None,
        32 => Some(narrow_k32_tile(dtype)),
        64 if m <= 6144 || stats.mean <= 6.0 => Some(tile(dtype, 1, 4, 2, 32, 64, 16, false)),
        128 if m <= 4096 => Some(warp_per_row_tile(dtype)),
        _ => None,
    }
}

/// f32 skewed rows ([`is_skewed`]) of 90 or more entries on average in 2048-4096 rows, at n = 512-2048 (a multiple of
/// 32): four rows of 8 threads over 32 columns taking 16 entries a step in float2 (`s2d4_y4k16x32w8`), which walks
/// the row split's pieces as the k = 8 tile does, in half the steps. Measured on the H200 (NOTES.md, "SpMM step 67";
/// every f32 variant on power-law 2048-8192 x 4096-16384, means 97-407, n = 256-2048): against the k = 8 tile chosen
/// before, 1.03x-1.21x faster in 2048 rows at n = 512-2048 and 0.94x-1.10x in 4096 rows (1.064x on geometric mean
/// over the 30 problems); where [`long_uneven_rows_large_k`] had taken power-law rows over k = 8192 it ran 1.29x-1.62x
/// faster (4096 x 8192, mean 401, n = 1024: 723.5 -> 561.0 us, 0.80x -> 1.04x of cuSPARSE). Not 8192 rows
/// (0.92x-1.04x), nor n = 256 in 2048 rows (0.92x-0.96x on rows of 100). Rows of 58-64 on the k = 8 tile ran it
/// 0.99x-1.05x faster (not taken).
fn long_skewed_rows_wide_n(m: usize, n: usize, stats: &RowStats) -> bool {
    (2048..=4096).contains(&m) && n % 32 == 0 && (512..=2048).contains(&n) && stats.mean >= 90.0
}

/// Whether the k = 8 tiles' one subwarp per row can walk the longest row: at most 256 entries, or long rows the
/// row split cuts into pieces ([`is_skewed`]), or n past 64, where two or more column tiles of 32 give the SMs other
/// work meanwhile. A power-law matrix of 40000 rows (mean 7.5, longest 540, not skewed) ran the k = 8 tiles slower
/// than the 32-entry tiles at n = 20 and 50 (bf16, n = 20: 37.0 vs 24.2 us) and faster from n = 100 (n = 150: 63.2
/// vs 126.8 us; NOTES.md, "SpMM step 32").
fn longest_row_is_short_enough(n: usize, stats: &RowStats) -> bool {
    stats.max <= 256 || is_skewed(stats) || n > 64
}

/// f32 very short rows (at most 6 entries on average, cv at most 1, none past 64) in 16384 rows or more: tiles that
/// take up to eight column tiles in turn per block ([`in_turn`]). Over k > 8192 the k = 8 tile over 32 columns, at n
/// = 128-2048 (a multiple of 32); over k <= 8192 two rows of 16 threads over 128 columns, at n = 256-2048 (a multiple
/// of 128). A block per column tile pays a chain of loads (the rows' bounds, then their entries, then B) for a few
/// entries' work; in turn, the bounds and entries of the tiles after the first are L1 hits and the block's fixed
/// costs are paid once. Measured on the H200 (NOTES.md, "SpMM step 60"; every f32 variant on uniform rows of 2-6
/// in 16384-131072 rows over k = 4096-131072, banded rows of 5 and case_ACTIVSg70k, n = 128-2048): 1.27x faster
/// than the tiles chosen before on the 24 problems over k > 8192 (1.03x-1.43x; case_ACTIVSg70k at n = 512: 174.1 ->
/// 136.0 us, 0.92x -> 1.17x of cuSPARSE), 1.41x of cuSPARSE's best (1.11x before), 1.13x at worst (0.85x before).
/// Over k = 4096 the two-row tile in turn won from n = 256 (1.05x-1.11x over the two-row tile) and lost at n = 128
/// (9.7 vs 9.5 us). The two-row tile in turn was as fast over k > 8192 on geometric mean, faster where B's rows are
/// shared by neighbouring rows (case_ACTIVSg70k at n = 512: 115.4 us; banded rows) and slower on uniform ones (16384
/// rows of 6, n = 2048: 169.2 vs 130.0 us). Not rows of 8 in random columns (65536 of 8: 0.87x-1.03x), nor power-law
/// rows (cv 2, longest 1384: 2.4x-7.7x slower, the longest row walked once per column tile).
///
/// Where neighbouring rows share columns ([`RowStats::columns_per_entry`], over k > 8192), the rows of B that the
/// rows in flight read stay in L2, and the tiles in turn win on longer rows too. Measured on the H200 (NOTES.md,
/// "SpMM step 61"; every f32 variant on 36 generated matrices of 16384 and 65536 rows, even and Poisson rows of 3-10
/// in columns within 32 or 1024 of the diagonal or anywhere, and on meshes and graphs in their own order and
/// permuted at random, n = 128-2048), against the choice before:
/// - even rows (cv <= 0.2) of 6 or fewer, at most 0.4 distinct columns per entry, n = 1024-2048: the two-row tile in
///   turn, 1.064x faster on 17 problems (1.03x-1.11x);
/// - even rows of 6-10, at most 0.5 distinct columns per entry: the k = 8 tile in turn, 1.145x on 53 problems
///   (0.995x-1.39x; a 40^3 seven-point stencil at n = 2048: 622.0 -> 448.1 us, 1.10x -> 1.52x of cuSPARSE);
/// - uneven rows of 6-10 (cv > 0.2), at most 0.3 distinct columns per entry, n = 256-2048: the two-row tile in turn,
///   1.226x on 16 problems (0.98x-1.44x). The k = 8 tile in turn ran 0.95x-1.06x of the k = 8 tile there; rows past 8
///   entries take it two steps of 8.
///
/// Rows of 7 in random columns lose in turn (65536 rows, and the stencil permuted at random: 0.92x-0.97x from n =
/// 256), hence the bounds on shared columns. Over all 198 problems of those sets in the rule's rows, the bounds
/// here give 1.060x; bounds from 0.4 to 0.6 (even rows) and 0.2 to 0.4 (uneven ones) give 1.054x-1.060x.
fn very_short_rows_many_rows(m: usize, k: usize, n: usize, stats: &RowStats) -> Option<SpmmConfig> {
    let rows = m >= 16384 && stats.cv <= 1.0 && stats.max <= 64;
    let shared = |most: f64| stats.columns_per_entry.is_some_and(|c| c <= most);
    let even = stats.cv <= 0.2;
    let (some_n, wide_n) = (n % 32 == 0 && (128..=2048).contains(&n), n % 128 == 0 && (256..=2048).contains(&n));
    if !rows {
        None
    } else if stats.mean <= 6.0 && k > 8192 && some_n {
        let shared_wide = even && shared(0.4) && n >= 1024 && n % 128 == 0;
        Some(if shared_wide { two_row_tile_in_turn() } else { k8_tile_in_turn() })
    } else if stats.mean <= 6.0 && k <= 8192 && wide_n {
        Some(two_row_tile_in_turn())
    } else if stats.mean <= 10.0 && k > 8192 && even && shared(0.5) && some_n {
        Some(k8_tile_in_turn())
    } else if stats.mean <= 10.0 && k > 8192 && !even && shared(0.3) && wide_n {
        Some(two_row_tile_in_turn())
    } else {
        None
    }
}

/// f32 short rows (at most 10 entries on average, cv at most 1, none past 64) in 8192-16383 rows over k >= 8192 (as
/// measured: k = 8192-50000) at n = 1024-2048 (a multiple of 128), where [`short_rows`] (n <= 512) stops and the k = 8
/// tile was taken: the k = 8 tile in turn on
/// even rows (cv <= 0.2) or rows that seldom pass 8 entries (mean (1 + cv) <= 8), else two rows of 16 threads over
/// 128 columns. In these rows a window of rows in flight covers much of B, whether or not neighbouring rows share
/// columns, and [`RowStats::columns_per_entry`] does not tell the two apart. Measured on the H200 (NOTES.md, "SpMM
/// step 61"; every f32 variant on 20 generated matrices of 8192 and 12288 rows, even rows of 5, 7 and 10 and
/// Poisson rows of 3.4 and 7, columns within 32 of the diagonal or anywhere, and wrld_1deg in both orders; n = 1024
/// and 2048): 1.213x faster than the k = 8 tile on the 44 problems it moved (0.98x-1.50x; wrld_1deg at n = 2048:
/// 152.5 -> 130.6 us), 1.194x over all 48; on 8 matrices not used to fit it (9000-15000 rows, n = 1024-2048) 1.226x
/// on the 21 problems it moved (0.99x-1.54x). The two-row tile in turn was faster still on some (up to 1.15x on
/// wrld_1deg) and up to 1.28x slower on others, in both orders; at n = 512 the rule would lose (0.99x on 24).
fn short_rows_fewer_rows_wide_n(m: usize, k: usize, n: usize, stats: &RowStats) -> Option<SpmmConfig> {
    let rows = (8192..16384).contains(&m) && k >= 8192 && stats.mean <= 10.0 && stats.cv <= 1.0 && stats.max <= 64;
    if !(rows && n % 128 == 0 && (1024..=2048).contains(&n)) {
        None
    } else if stats.cv <= 0.2 || stats.mean * (1.0 + stats.cv) <= 8.0 {
        Some(k8_tile_in_turn())
    } else {
        Some(two_row_tile(DType::F32))
    }
}

/// f32 in 2049-16383 rows, below [`very_short_rows_many_rows`]'s rows: the two-row tile taking column tiles in turn
/// ([`two_row_tile_in_turn`]) where rows are very short (fewer than 3 entries on average, below [`short_rows`]'s
/// band, none past 16) at n = 256-2048, or short (3-8 entries on average, 3-10 over k <= 4096; cv at most 1, none
/// past 64) in 8192 rows or more over k < 8192 at n = 1024-2048, where [`short_rows_fewer_rows_wide_n`] (k >= 8192)
/// does not reach (all at n a multiple of 128). The bounded k = 8 tile was taken there, a block per 32 columns of 4
/// rows. Measured on the H200 (NOTES.md, "SpMM step 76"; every f32 variant, then the new choice against the old
/// through the library):
/// - very short rows (uniform rows of 2-3 in 7966-14480 rows; banded rows of up to 3 with 62-90% of the rows empty
///   in 2350 and 12089 rows): 1.39x-2.07x faster than the tiles chosen before on all 16 problems it moves (uniform
///   9553 x 1052, rows of 2, n = 1024: 50.7 -> 24.5 us);
/// - short rows (uniform rows of 3.1-7.7 in 8192-16064 rows, k = 915-5595): 1.32x-1.73x on all 12 (uniform 12200 x
///   2720, rows of 4.4, n = 1024: 63.5 -> 36.6 us);
/// - held out (16 fresh matrices, n = 256-2048, rows of up to 10 over any k < 8192 then): 1.55x on the 36 problems
///   it moved (0.98x-2.10x, and 0.86x-0.87x on rows of 8.8 over k = 8146, which set the bound of 8 entries); over
///   all 64, 1.20x -> 1.53x of cuSPARSE's best;
/// - rows of 6-10 (12 fresh matrices, every variant, n = 1024 and 2048): 1.07x-1.58x on the 18 problems the bounds
///   move; rows of 9.1 and 9.5 over k = 6440 and 5733 lost (0.82x-0.96x), hence 8 entries past k = 4096 (rows of
///   8.2 over k = 4379 would have gained 1.15x-1.17x).
fn short_rows_in_turn_fewer_rows(m: usize, k: usize, n: usize, stats: &RowStats) -> bool {
    let rows = (2049..16384).contains(&m);
    let wide = n % 128 == 0 && (1024..=2048).contains(&n);
    let very_short = stats.mean < 3.0 && stats.max <= 16 && n % 128 == 0 && (256..=2048).contains(&n);
    let longest_mean = if k <= 4096 { 10.0 } else { 8.0 };
    let short = m >= 8192
        && k < 8192
        && (3.0..=longest_mean).contains(&stats.mean)
        && stats.cv <= 1.0
        && stats.max <= 64
        && wide;
    rows && stats.mean > 0.0 && (very_short || short)
}

/// `config` taking up to `tiles` column tiles in turn per block (`SpmmConfig::column_tiles`).
fn in_turn(config: SpmmConfig, tiles: u32) -> SpmmConfig {
    SpmmConfig { column_tiles: tiles, ..config }
}

/// The f32 k = 8 tile over 32 columns, held to 64 registers, taking column tiles in turn
/// (`spmm_f32_s1d4_y4k8x32w8_u4_nopred_c8_lb32`).
fn k8_tile_in_turn() -> SpmmConfig {
    in_turn(bounded(k8_tile(DType::F32, 4, false), 32), 8)
}

/// The f32 two-row tile ([`two_row_tile`]) taking column tiles in turn (`spmm_f32_s1d4_y2k16x128w16_u4_nopred_c8_lb16`).
fn two_row_tile_in_turn() -> SpmmConfig {
    in_turn(two_row_tile(DType::F32), 8)
}

/// f16/bf16 very short rows (at most 7 entries on average, cv at most 1, none past 64) in 16384 rows or more, over k
/// past 8192, at n = 128-2048 (a multiple of 64): the k = 8 tile over 64 columns, held to 64 registers, taking four
/// column tiles in turn per block ([`half_k8_tile_in_turn`]), for the reasons of [`very_short_rows_many_rows`]. In
/// half precision a row's B loads are half the bytes of f32's, so the chain of loads before them weighs more, and
/// the tiles in turn won whether or not neighbouring rows share columns. Measured on the H200 (NOTES.md, "SpMM step
/// 62"; every f16 variant on the 36 generated matrices of step 61, 16384 and 65536 rows of 3-10 in columns near the
/// diagonal or anywhere, and on case_ACTIVSg70k, n = 128-2048): on the 155 problems of rows of 3-7 the four-tile
/// twin ran 1.21x faster than the tiles chosen before (1.01x-1.50x; case_ACTIVSg70k at n = 512: 91.7 -> 75.4 us),
/// 1.60x -> 1.94x of cuSPARSE's best, within 0.6% of each problem's fastest variant on geometric mean. Eight tiles
/// in turn ran 1.016x slower on geometric mean (up to 1.18x on random columns), the 256-column tile four in turn
/// 1.29x slower. Rows of 10 lost in turn at n <= 512 (0.90x-1.0x), hence the bound on the mean. On 19 matrices
/// not used to fit it (stencils and a geometric graph in their own order and permuted, rows of 2.5-9 in 18000-200000
/// rows over k = 9000-200000), 55 of 95 f16 problems moved, 1.22x faster (0.94x-1.63x), 1.64x -> 2.00x of
/// cuSPARSE's best; bf16 on 11 of them, 27 of 33, 1.19x (0.93x-1.58x).
fn very_short_rows_many_rows_half(m: usize, k: usize, n: usize, stats: &RowStats) -> bool {
    let rows = m >= 16384 && stats.mean <= 7.0 && stats.cv <= 1.0 && stats.max <= 64;
    rows && k > 8192 && n % 64 == 0 && (128..=2048).contains(&n)
}

/// f16/bf16 very short rows in fewer rows at a wide n: 8192-16383 rows of at most 7.5 entries on average (cv at
/// most 1, none past 64) over k of 8192 or more, at n = 1024-2048 (a multiple of 64): the tile of
/// [`very_short_rows_many_rows_half`] ([`half_k8_tile_in_turn`]). Measured on the H200 (NOTES.md, "SpMM step 63";
/// every f16 variant at n = 128-2048 and every bf16 one at n = 128, 512 and 2048 on step 61's 20 matrices of 8192
/// and 12288 rows, even rows of 5, 7 and 10 and Poisson rows of 3.4 and 7, columns within 32 or anywhere, and on
/// wrld_1deg, 15,260 rows of 7.3, in its own order and permuted): at n = 1024-2048 the tiles in turn ran 1.147x
/// faster than the choice (1.03x-1.37x, 36 problems) in f16 and 1.111x (1.01x-1.33x, 18) in bf16, none slower. At
/// n = 512 they lost in bf16 on 8192 rows (0.90x-0.96x), at n <= 256 on Poisson rows in f16 (0.76x-0.97x), and
/// rows of 10 lost at n = 256-2048 (15 of 16, 0.88x-0.99x), as in many rows. Under 8192 rows (add32, 4elt): 0.79x-
/// 1.18x, not taken. On 18 matrices not used to fit (stencils, rows of 3-10 in 8500-16000 rows), 42 of 54 problems
/// moved per type, f16 1.161x faster (1.03x-1.43x), bf16 1.134x (1.01x-1.39x).
fn very_short_rows_fewer_rows_wide_n_half(m: usize, k: usize, n: usize, stats: &RowStats) -> bool {
    let rows = (8192..16384).contains(&m) && stats.mean <= 7.5 && stats.cv <= 1.0 && stats.max <= 64;
    rows && k >= 8192 && n % 64 == 0 && (1024..=2048).contains(&n)
}

/// The f16/bf16 k = 8 tile over 64 columns, held to 64 registers, taking four column tiles in turn
/// (`spmm_{f16,bf16}_s1d8_y4k8x64w8_u4_nopred_c4_lb32`).
fn half_k8_tile_in_turn(dtype: DType) -> SpmmConfig {
    in_turn(half_k8_tile_bounded(dtype), 4)
}

/// The f16/bf16 k = 8 tile over 64 columns, held to 64 registers (`spmm_{f16,bf16}_s1d8_y4k8x64w8_u4_nopred_lb32`).
fn half_k8_tile_bounded(dtype: DType) -> SpmmConfig {
    bounded(half_k8_tile(dtype), 32)
}

/// The f16/bf16 k = 8 tile over 64 columns, four rows of 8 threads (`spmm_{f16,bf16}_s1d8_y4k8x64w8_u4_nopred`).
fn half_k8_tile(dtype: DType) -> SpmmConfig {
    tile(dtype, 1, 8, 4, 8, 64, 8, false)
}

/// Two f16/bf16 rows of 16 threads over 256 columns, k = 16 (`spmm_{f16,bf16}_s1d8_y2k16x256w16_u4_nopred`).
fn half_two_row_256_tile(dtype: DType) -> SpmmConfig {
    tile(dtype, 1, 8, 2, 16, 256, 16, false)
}

/// The shapes where the k = 8 tile over 32 columns in narrow vectors or scalars wins in f32 at n <= 16, n = 2 mod 4
/// and odd n, and in f16/bf16 at odd n: 4096 rows or more of at most 20 entries on average, whose longest row the
/// tile can walk ([`longest_row_is_short_enough`]; NOTES.md, "SpMM step 32").
fn many_short_rows(m: usize, n: usize, stats: &RowStats) -> bool {
    m >= 4096 && stats.mean <= 20.0 && longest_row_is_short_enough(n, stats)
}

/// f16/bf16 with n not a multiple of 8: the k = 8 tile in 4- or 2-element vectors over 32 columns, for rows of at
/// most 20 entries on average, or any rows in 2048 or more, unless the longest row is too long
/// ([`longest_row_is_short_enough`]). Before it these shapes had Sputnik's 32-entry tiles (NOTES.md, "SpMM step
/// 32"): on the 20 real matrices at n = 20, 50, 100 and 300, bf16 0.672x -> 0.961x and f16 0.708x -> 0.951x of the
/// best cuSPARSE algorithm's speed with a warp per row for the longer rows in few rows; on ten fresh matrices
/// (uniform, banded and power-law rows, three weight-like shapes) at n = 20-1004, 0.624x -> 1.116x and 0.735x ->
/// 1.128x. The 2048 rows come from one of those (2048 x 512 at 26 per row, n = 300: 30.7 -> 13.8 us).
fn short_rows_narrow_vectors(m: usize, n: usize, stats: &RowStats) -> bool {
    (stats.mean <= 20.0 || m >= 2048) && longest_row_is_short_enough(n, stats)
}

/// How many times longer than a resident subwarp's share of the launch `config` takes over the longest row, walked
/// whole (f32 on m x n, `stats` of A): the longest row's steps (one per `block_items_k` entries) over the larger of
/// every row's steps (one for its bounds, one per `block_items_k` entries, per column tile of C) shared by the
/// subwarps the GPU holds at once, and a mean row's steps (a launch of less than one wave waits for its longest
/// row, not its share). Blocks per SM are the launch bound's, else as many as 2048 threads hold (at most 32;
/// registers are not counted). `use_split` bounds the same ratio for the row split (NOTES.md, "SpMM step 4");
/// [`four_row_tile_longest_within_share`] is this bound at 1 on one tile (step 67).
fn longest_row_steps_over_share(config: &SpmmConfig, m: usize, n: usize, stats: &RowStats) -> f64 {
    let k = (config.block_items_k * config.row_split.max(1)) as f64;
    let blocks_per_sm =
        if config.launch_bounds { config.min_occupancy } else { (2048 / config.threads_per_block().max(1)).min(32) };
    let resident = (H100_SMS as u32 * blocks_per_sm.max(1) * config.block_items_y) as f64;
    let column_tiles = n.div_ceil(config.block_items_x as usize) as f64;
    let share = m as f64 * (1.0 + stats.mean / k) * column_tiles / resident;
    (stats.max as f64 / k).ceil() / share.max(1.0 + stats.mean / k)
}

/// Whether `config` walks each row whole with one subwarp, 8 or 16 entries a step, in blocks of fewer than 32 rows,
/// one column tile at a time: the tiles [`longest_row_tile`], [`longest_row_tile_half`] and
/// [`longest_row_windows_half`] replace where the longest row is the critical path.
fn walks_rows_whole(config: &SpmmConfig) -> bool {
    config.row_split == 1 && config.column_tiles == 1 && config.block_items_k <= 16 && config.block_items_y < 32
}

/// Whether `config` walks A's longest row whole at this launch (`spmm::split::use_split` does not cut it into pieces)
/// for 3 or more times a resident subwarp's share of the launch ([`longest_row_steps_over_share`]): the test of
/// [`longest_row_tile`] and [`longest_row_tile_half`].
fn longest_row_is_the_critical_path(config: &SpmmConfig, m: usize, n: usize, stats: &RowStats) -> bool {
    let nnz = (stats.mean * m as f64).round() as usize;
    // The partial rows' size does not matter here: 0 of them passes use_split's bound on it.
    !super::split::use_split(stats, m, nnz, n, 0, config, H100_SMS)
        && longest_row_steps_over_share(config, m, n, stats) >= 3.0
}

/// The tile for f32 rows whose longest row, walked whole by the tile the rules above chose, is the launch's
/// critical path: at least 3 times a resident subwarp's share ([`longest_row_steps_over_share`]) on a tile that
/// takes 8 or 16 entries a step, one subwarp per row, in blocks of fewer than 32 rows, one column tile at a time
/// (not measured with tiles in turn), and that does not cut the row into pieces at this launch
/// (`spmm::split::use_split`). Such rows are neither skewed nor long enough for the row split ([`is_skewed`],
/// [`has_long_rows`]), or are walked by a tile without the piece path. Tiles taking 32 entries a step shorten that
/// path four- or twofold:
/// - n = 32 and 64, rows of more than 50 on average: four 8-thread subwarps per row ([`split_row_k8_tile`]) in up
///   to 8192 rows, two rows of 16 threads taking 32 entries a step over 32 columns past them; in place of the k = 8
///   tile on rows of at most 12, the same four subwarps in 512-3072 rows (at n = 96 too, in 512-2400 rows), and at
///   n = 32 in 4096-65536 rows of at most 16 the k = 16 tile (step 69; from 4096 rows, step 71);
/// - in place of the k = 8 tile on rows of at most 16 past those (step 71): at n = 64 in 3073-65536 rows the k = 16
///   tile over 64 columns held to 8 blocks per SM ([`four_row_tile`]); at n = 96 in 2401-8192 rows, where the row
///   takes 7 times the share or more, the k = 16 tile over 32 columns, and in 8193-65536 rows the unbounded two-row
///   tile over 128 columns, predicated;
/// - n = 128-512: two warps per row ([`split_row_warp_tile`]) on rows of 40 or more on average in up to 16384 rows;
///   a warp per row over 128 columns on shorter ones in up to 8192 rows, at n = 512 only in place of the k = 8
///   tile; at n = 128 in 8193-24576 rows, two rows of 16 threads over 128 columns, unbounded, in place of the k = 8
///   tile (step 69), and at n = 384 in up to 8192 rows (step 70);
/// - n = 1024-2048 in up to 4096 rows: the thirty-two-row block; in place of the k = 8 tile at the multiples of 64
///   from 192 to 960 that have no branch here (192, 320, ... through the rounded width, [`rounded_width`]) in up to
///   16384 rows of at most 64 (step 70), and at the other multiples of 16 from 144 to 960, guarded in n (step 72);
/// - n = 40, 48 and 56 (through the rounded width 64), in place of the k = 8 tile in 1024-12288 rows of at most 64:
///   two rows of 16 threads over 64 columns taking 32 entries a step, guarded (step 72).
///
/// Measured on the H200 (NOTES.md, "SpMM step 68"; every f32 variant on 70 random power-law and uniform problems
/// whose choice's ratio was 3 or more, m 530-63698, k 555-29426, n = 32-2048): the choice took 1.27x the fastest
/// variant's time on geometric mean (up to 2.5x), and ran 0.52x-2.49x of cuSPARSE (19 problems below it). This rule
/// moves 34 of them, 1.35x faster (0.96x-2.09x). Through the library, old and new in turn on 73 fresh power-law
/// problems it moves: 1.33x (0.93x-2.36x), 0.98x -> 1.31x of cuSPARSE (below it: 43 -> 7). Not n = 32-64 on shorter
/// rows (the k = 16 tile or the thirty-two-row block were fastest there, not consistently); not a warp per row in
/// place of the two-row tile at n = 512 (0.97x on 14 held-out problems), nor in 14336-16384 rows at n = 128
/// (0.90x-1.00x). At n = 384 (NOTES.md, "SpMM step 69"; every variant on 14 such power-law problems) two warps
/// per row took 0.71x-0.77x of the k = 8 tile's time on the three with rows of 40 or more; on shorter rows a warp
/// per row gained nothing (0.99x-1.01x), so n = 384 takes only that branch. Step 69's other branches, from every
/// variant on 14 power-law problems per width (rows of 2-11, the k = 8 tile chosen): at n = 32 and 64 in 515-2765
/// rows, four subwarps per row took 0.54x-0.92x of its time (but 1.2x-1.7x in 9618 rows or more); at n = 32 in
/// 19054-40316 rows the k = 16 tile 0.80x-0.88x; at n = 128 in 8433-23322 rows the unbounded two-row tile 0.56x-0.85x
/// (at n = 64 past 9000 rows and at n = 96 the k = 16 tile was mixed, 0.82x-1.12x: not ruled). At n = 96 four
/// subwarps per row took 0.67x-0.92x in 656-2379 rows, 1.14x-1.52x in 2620-4749 (0.87x in 2930); on 16 fresh
/// problems in 512-2400 rows, the range declared before they ran, 1.38x faster (1.05x-1.82x), in 2401-3072 rows
/// 0.81x-1.47x. At n = 384 on rows of under 40 (NOTES.md, "SpMM step 70"): the unbounded two-row tile took 0.72x-0.92x
/// of the k = 8 tile's time on step 69's five such problems (2051-7558 rows; four of rows of 2-3, one of 39.7: 0.91x);
/// through the library on 16 fresh ones (2051-7674 rows of 2-3, the range declared first), 1.19x faster (1.05x-1.44x,
/// every one), 1.16x -> 1.39x of cuSPARSE (below it: 4 -> 0). At the multiples of 64 from 192 to 960 without a branch
/// here (step 70; every variant on 38 power-law problems at n = 192, 320 and 640 whose k = 8 tile was on the critical
/// path, 2096-16957 rows of 2-57) the thirty-two-row block took 0.90x, 0.85x and 0.90x of its time (0.64x-1.01x), each
/// fastest variant 0.83x-0.86x; through the library on 94 fresh problems at ten widths (the widths and bounds declared
/// first), 1.16x faster (0.94x-1.77x; 1.15x at ratios under 4, 1.18x from 4), 1.04x -> 1.21x of cuSPARSE (below
/// it: 41 -> 8). Step 71 (NOTES.md, "SpMM step 71"; every variant on 12 such power-law problems per width, rows of
/// 2-16 in 1802-34405 rows): at n = 64 the k = 16 tile over 64 columns held to 8 blocks per SM took 0.85x of the
/// k = 8 tile's time (0.72x-0.96x, all 12), at n = 96 at ratios of 7.7-15.6 the k = 16 tile over 32 columns 0.82x
/// (0.76x-0.89x, all 12), at n = 32 below 8192 rows the same 0.84x-0.92x; past 9000 rows at n = 96 (ratios 3.7-7.8)
/// the predicated two-row tile 0.71x-0.92x (8 of 8). The row split with shorter pieces (16, 32 or 64 entries) on
/// the tile that walks them took 0.96x-1.26x of the choice's time by width (0.96x only at n = 96 in pieces of 64), so
/// these rows keep their tiles whole. Through the library on fresh problems, old and new in turn: n = 32 in
/// 4096-8191 rows 1.18x (16, 1.03x-1.33x), n = 64 1.22x (20, 1.08x-1.47x, 3114-63779 rows), n = 96 in 2401-8192
/// rows 1.21x (16, 1.06x-1.33x; the bound of 8192 came from a first such run, where 8988-15860 rows gained
/// 0.95x-1.05x) and in 8193-38809 rows 1.11x (16, 0.91x-1.34x; the gain grows with the rows). Step 72 (NOTES.md,
/// "SpMM step 72"), at widths the rounding reaches (every variant on 10 problems per width): at n = 144, 160 and 224 the thirty-two-row block,
/// guarded, took 0.88x, 0.90x and 0.87x of the k = 8 tile's time (0.72x-1.03x); at n = 40, 48 and 56 the two-row
/// 32-entry tile over 64 columns 0.85x (0.54x-0.98x up to 13092 rows, 1.14x-1.38x in 19825 and 46236). Through the
/// library on fresh problems: the block at eight widths from 144 to 400 (five not measured before) 1.10x (64,
/// 0.88x-1.39x), 1.10x -> 1.21x of cuSPARSE; the two-row tile 1.27x on 30 in 1029-14681 rows, but 0.84x-0.92x in
/// 14224-14681 rows (and 0.92x in 7515), hence up to 12288 rows, a bound chosen on that run.
fn longest_row_tile(config: &SpmmConfig, m: usize, n: usize, stats: &RowStats) -> Option<SpmmConfig> {
    let dtype = config.dtype;
    if dtype != DType::F32 || !walks_rows_whole(config) || !longest_row_is_the_critical_path(config, m, n, stats) {
        return None;
    }
    let k8 = config.block_items_k == 8;
    match n {
        32 | 64 if stats.mean > 50.0 && m <= 8192 => Some(split_row_k8_tile(dtype)),
        32 | 64 if (512..=3072).contains(&m) && stats.mean <= 12.0 && k8 => Some(split_row_k8_tile(dtype)),
        96 if (512..=2400).contains(&m) && stats.mean <= 12.0 && k8 => Some(split_row_k8_tile(dtype)),
        32 | 64 if stats.mean > 50.0 => Some(narrow_k32_tile(dtype)),
        32 if (4096..=65536).contains(&m) && stats.mean <= 16.0 && k8 => Some(k16_tile(dtype, false)),
        64 if (3073..=65536).contains(&m) && stats.mean <= 16.0 && k8 => Some(four_row_tile(dtype)),
        96 if (2401..=8192).contains(&m)
            && stats.mean <= 16.0
            && k8
            && longest_row_steps_over_share(config, m, n, stats) >= 7.0 =>
        {
            Some(k16_tile(dtype, false))
        }
        96 if (8193..=65536).contains(&m) && stats.mean <= 16.0 && k8 => {
            Some(SpmmConfig { predicate_loads: true, ..unbounded_two_row_tile(dtype) })
        }
        128 | 256 if m <= 8192 && stats.mean < 40.0 => Some(warp_per_row_tile(dtype)),
        128 if m <= 24576 && stats.mean < 40.0 && k8 => Some(unbounded_two_row_tile(dtype)),
        384 if m <= 8192 && stats.mean < 40.0 && k8 => Some(unbounded_two_row_tile(dtype)),
        512 if m <= 8192 && stats.mean < 40.0 && k8 => Some(warp_per_row_tile(dtype)),
        128 | 256 | 384 | 512 if m <= 16384 && stats.mean >= 40.0 => Some(split_row_warp_tile(dtype)),
        1024..=2048 if n % 128 == 0 && m <= 4096 => Some(thirty_two_row_tile(dtype)),
        40 | 48 | 56 if (1024..=12288).contains(&m) && stats.mean <= 64.0 && k8 => {
            Some(tile(dtype, 2, 4, 2, 32, 64, 16, true))
        }
        144..=960 if n % 16 == 0 && ![256, 384, 512].contains(&n) && m <= 16384 && stats.mean <= 64.0 && k8 => {
            Some(predicated_for(thirty_two_row_tile(dtype), n))
        }
        _ => None,
    }
}

/// Two warps per row over 128 columns ([`split_row_warp_tile`]) in place of a warp per row, for f32 rows of 40 or more
/// on average whose length varies (cv 0.5 or more) in the few rows of the windows rule, `UNEVEN_FEW_ROWS` rows over k =
/// `UNEVEN_FEW_ROWS_K` (src/spmm/tensor_core.rs; 256-1024 over 1024-8192, the range measured), at n = 128-512 (a
/// multiple of 128), where the warp walks the longest row for 3 times a resident warp's share of the launch or more
/// ([`longest_row_is_the_critical_path`]). [`longest_row_tile`] does the same in place of the 8- and 16-entry tiles;
/// the warp per row reaches these rows from `select_f32`'s rule for rows too few for the two-row tile. Measured on the
/// H200 (NOTES.md, "SpMM step 78"; every f32 variant on 40 fresh power-law matrices of 258-1049 rows and 10 of step
/// 77): where the warp per row was chosen on such rows at n = 128-512 and the windows (`uneven_few_rows_windows`) do
/// not take them, two warps per row took 0.66x-0.95x of its time on all 19 (461 x 3552, rows of 45, n = 512: 15.8 ->
/// 11.6 us); on rows of 34-39 0.83x-1.16x (slower on the three in 915-997 rows at n = 512).
fn few_rows_split_warp(config: &SpmmConfig, m: usize, k: usize, n: usize, stats: &RowStats) -> Option<SpmmConfig> {
    use super::tensor_core::{UNEVEN_FEW_ROWS, UNEVEN_FEW_ROWS_K};
    let dtype = config.dtype;
    let rows = UNEVEN_FEW_ROWS.contains(&m) && UNEVEN_FEW_ROWS_K.contains(&k) && stats.mean >= 40.0 && stats.cv >= 0.5;
    let width = n % 128 == 0 && (128..=512).contains(&n);
    (dtype == DType::F32
        && *config == warp_per_row_tile(dtype)
        && rows
        && width
        && longest_row_is_the_critical_path(config, m, n, stats))
    .then(|| split_row_warp_tile(dtype))
}

/// `config`, or the tile [`longest_row_tile`] or [`few_rows_split_warp`] puts in its place where it walks A's longest
/// row on the launch's critical path, or [`tiny_launch_tile`]'s in a launch of a few hundred rows (f32).
fn longest_row_choice(config: SpmmConfig, m: usize, k: usize, n: usize, stats: &RowStats) -> SpmmConfig {
    longest_row_tile(&config, m, n, stats)
        .or_else(|| few_rows_split_warp(&config, m, k, n, stats))
        .or_else(|| tiny_launch_tile(&config, m, n))
        .unwrap_or(config)
}

/// The most rows of an f32 launch at n = 32 and 96 ([`TINY_LAUNCH_ROWS_N64`] at n = 64) where [`tiny_launch_tile`]
/// replaces the bounded k = 8 tile.
pub(crate) const TINY_LAUNCH_ROWS: usize = 800;
pub(crate) const TINY_LAUNCH_ROWS_N64: usize = 2000;

/// f32 at n = 32, 64 and 96 in few rows, where the rules above give the bounded k = 8 tile (four rows of 8 threads
/// over 32 columns, 8 entries a step, the short-rows choice): a launch of a few hundred one-warp blocks (a thousand
/// at most), each a chain of 8-entry steps, at the floor of a launch (5-6 us). Tiles taking 32 entries a step in wider
/// subwarps shorten the chains: at n = 32 in up to [`TINY_LAUNCH_ROWS`] rows two rows of 16 threads over 32
/// columns (scalar dense loads, guarded), at n = 64 in up to [`TINY_LAUNCH_ROWS_N64`] rows the eight-row tile
/// ([`eight_row_tile`]), at n = 96 in up to [`TINY_LAUNCH_ROWS`] rows a warp per row over 128 columns, guarded.
///
/// Measured on the H200 (NOTES.md, "SpMM step 98"; every f32 variant on 7 small real matrices of 30-7434 rows and
/// 12 generated ones of 150-2000, 30 timed runs each): where the bounded k = 8 tile was the choice, the three tiles took
/// 0.946x (n = 32, 10 problems of 30-800 rows, at most 1.000x), 0.941x (n = 64, 14 of 30-2000 rows, at most 1.006x)
/// and 0.911x (n = 96, 4 of 30-479 rows, at most 0.960x) of its time; past those rows 1.025x-1.59x.
fn tiny_launch_tile(config: &SpmmConfig, m: usize, n: usize) -> Option<SpmmConfig> {
    let dtype = config.dtype;
    if dtype != DType::F32 || *config != bounded(k8_tile(dtype, 4, false), 32) {
        return None;
    }
    match n {
        32 if m <= TINY_LAUNCH_ROWS => Some(tile(dtype, 1, 1, 2, 32, 32, 16, true)),
        64 if m <= TINY_LAUNCH_ROWS_N64 => Some(eight_row_tile(dtype)),
        96 if m <= TINY_LAUNCH_ROWS => Some(SpmmConfig { predicate_loads: true, ..warp_per_row_tile(dtype) }),
        _ => None,
    }
}

/// [`longest_row_tile`] for f16 and bf16: where the tile the other rules give is the k = 8 tile over 64 columns
/// (held to 64 registers or not; one column tile at a time) and walks the longest row whole for 3 times a resident
/// subwarp's share of the launch or more:
/// - at n = 64, in the range of [`longest_row_rows_half`] up to 57344 rows, the k = 16 tile over 64 columns, 16
///   entries a step;
/// - in up to 8192 rows, a warp per row over 256 columns, 32 entries a step: f16 at n = 256-2048 (a multiple of
///   256), bf16 at n = 256; in 8193-32768 rows of at most 64 (step 70), at n = 256 and 512, f16 the same, bf16 two
///   rows of 16 threads over 256 columns, 16 entries a step;
/// - at n = 128 and 192, where that tile is held to 64 registers (step 12's rule), the same tile without the bound,
///   in up to 65536 rows of at most 64 (step 70);
/// - f16 at n = 224 in 4096-32768 rows of at most 64: the warp per row over 256 columns, guarded (step 73: every
///   variant on 10 such problems, 4720-25343 rows, 0.65x-0.88x of the tile's time, all 10; bf16 0.82x-1.10x, not
///   taken; through the library on 12 fresh problems, 1.29x (1.07x-1.54x), 0.99x -> 1.28x of cuSPARSE).
///
/// Measured on the H200 (NOTES.md, "SpMM step 68"; every f16 variant on step 68's f32 problems): where that tile was
/// chosen at n = 256-2048 it took 1.03x-2.11x the fastest variant's time, the warp per row 1.00x-1.33x. Through the
/// library on problems it moved (held out): f16 1.06x-1.57x by width and set, bf16 1.28x-1.43x at n = 256, but
/// 0.82x-1.06x from n = 512 (and the pruned 1536 x 384 at 98%, n = 768-1536, 0.65x-0.88x). At n = 64 (NOTES.md,
/// "SpMM step 69"; every variant on 12 power-law problems, 16640-60949 rows of 2-59): the k = 16 tile took 0.84x
/// (f16) and 0.89x (bf16) of the k = 8 tile's time on geometric mean, 0.76x-0.99x (1.02x at worst in bf16); through
/// the library on 16 held-out problems, 1.20x (f16) and 1.12x (bf16) faster, but 0.88x-1.07x in 61175-62815 rows
/// (and 1.01x-1.03x in 60949 rows in the every-variant set), hence up to 57344 rows.
fn longest_row_tile_half(config: &SpmmConfig, m: usize, n: usize, stats: &RowStats) -> Option<SpmmConfig> {
    let dtype = config.dtype;
    let k8_over_64 = walks_rows_whole(config) && config.block_items_k == 8 && config.block_items_x == 64;
    if dtype.size() != 2 || !k8_over_64 || !longest_row_is_the_critical_path(config, m, n, stats) {
        return None;
    }
    if n == 64 && m <= 57344 && longest_row_rows_half(m, stats) {
        return Some(tile(dtype, 2, 8, 4, 16, 64, 8, false));
    }
    if (n == 128 || n == 192) && config.launch_bounds && m <= 65536 && stats.mean <= 64.0 {
        // The same tile without the bound (step 70).
        return Some(half_k8_tile(dtype));
    }
    // bf16 at n = 256 only: from n = 512 its warp per row lost on held-out problems (0.82x-1.06x by width and set).
    let widths = if dtype == DType::Bf16 { 256..=256 } else { 256..=2048 };
    let warp_per_row = tile(dtype, 1, 8, 1, 32, 256, 32, false);
    if widths.contains(&n) && n % 256 == 0 && m <= 8192 {
        return Some(warp_per_row);
    }
    // f16 at n = 224 in 4096-32768 rows of at most 64 (step 73): the same warp per row, guarded in n.
    if dtype == DType::F16 && n == 224 && (4096..=32768).contains(&m) && stats.mean <= 64.0 {
        return Some(SpmmConfig { predicate_loads: true, ..warp_per_row });
    }
    // Past 8192 rows (step 70): f16 the warp per row, bf16 two rows of 16 threads, at n = 256 and 512.
    if !(8193..=32768).contains(&m) || stats.mean > 64.0 {
        return None;
    }
    match (dtype, n) {
        (DType::F16, 256 | 512) => Some(warp_per_row),
        (DType::Bf16, 256 | 512) => Some(half_two_row_256_tile(dtype)),
        _ => None,
    }
}

/// The rows step 69 measured f16/bf16 critical paths on ([`longest_row_tile_half`] at n = 64,
/// [`longest_row_windows_half`]): 8192-65536 rows of at most 64 entries on average, the longest at most
/// [`SKEWED_WINDOW_MAX`] (past it the windows' time grows with the longest row, step 56).
fn longest_row_rows_half(m: usize, stats: &RowStats) -> bool {
    (8192..=65536).contains(&m) && stats.mean <= 64.0 && stats.max <= SKEWED_WINDOW_MAX
}

/// The tensor-core windows for f16/bf16 rows where the tile the rules give walks the longest row whole on the
/// launch's critical path ([`longest_row_is_the_critical_path`]; one subwarp a row, 8 or 16 entries a step, one
/// column tile at a time), in the range of [`longest_row_rows_half`]. Such rows fill the windows' k-blocks to about
/// 5%, under the tensor cores' own bounds, yet a window's warp walks the longest row's k-blocks faster than a
/// subwarp walks its entries:
/// - n = 32: the 16-row windows, 32 columns a warp;
/// - n = 64, on the k = 16 tile ([`longest_row_tile_half`]) where the ratio on it is 7 or more: the 16-row windows,
///   64 columns a warp;
/// - n = 96 where the ratio ([`longest_row_steps_over_share`]) is 4 or more: the 64-row windows, 128 columns a
///   block (at 3.2-3.4, one problem gained 1.8x and one lost 1.14x-1.18x); at n = 80 the same (step 73);
/// - n = 160 where the ratio is 5 or more: the 16-row windows, 32 columns a warp (step 73);
/// - n = 112 where the ratio is 7 or more: the 64-row windows (step 74).
///
/// Measured on the H200 (NOTES.md, "SpMM step 69"; every variant, f16 and bf16, 12 power-law problems per width,
/// 8873-60949 rows of 2-59 entries, the longest 95-937): at n = 32 the 16-row windows took 0.69x (f16) and 0.73x
/// (bf16) of the tile's time on geometric mean (0.49x-0.95x, every problem faster); at n = 96 the 64-row windows at a
/// ratio of 4 or more 0.75x and 0.81x (0.55x-0.95x). At n = 64 (NOTES.md, "SpMM step 70"; the same set, the ratio on
/// the k = 16 tile) the windows, 64 columns a warp, took 0.67x-0.91x of that tile's time at ratios of 7.6-9.9 (f16 and
/// bf16), about its time at 6.1, and 1.1x-1.4x of it at 4.6 or less; through the library on 16 fresh problems per type
/// at ratios of 7 or more (the bound declared first), f16 1.25x faster (1.09x-1.41x) and bf16 1.13x (0.99x-1.42x); six
/// at 5.0-6.5 ran level (every variant: 1.01x in f16, 0.97x in bf16). Step 73 (NOTES.md, "SpMM step 73"; every
/// variant on 10 power-law problems per type and width, rows of 2-52): at n = 80 the 64-row windows took 0.58x-0.88x
/// (f16) and 0.62x-0.93x (bf16) of the tile's time, all 20, at ratios of 3.5-13.1; at n = 160 in 8192 rows or more the
/// 16-row windows 0.64x-0.85x and 0.71x-0.90x at ratios of 5.4-12.9, but 0.95x-1.10x at 4.3-4.6. Through the library
/// on 12 fresh problems per type and width: n = 80 f16 1.35x (1.02x-1.57x; 1.00x -> 1.35x of cuSPARSE), bf16 1.14x
/// (0.94x-1.49x); n = 160 f16 1.15x (0.88x-1.53x), bf16 1.17x (1.00x-1.43x). Step 74 (NOTES.md, "SpMM step 74"): at
/// n = 112 the 64-row windows took 0.64x-0.75x (f16, 5) and 0.71x-0.89x (bf16, 3) of the tile's time at ratios of
/// 7.4-15.3, but 0.90x-1.25x at 3.0-6.1 on rows of 2-5; through the library on 12 fresh problems per type at ratios of
/// 7 or more, f16 1.33x (0.97x-1.81x), bf16 1.33x (1.05x-2.35x). The caller passes only where the windows can run (no
/// Inf or NaN in A).
pub(crate) fn longest_row_windows_half(
    config: &SpmmConfig,
    m: usize,
    n: usize,
    stats: &RowStats,
) -> Option<super::tensor_core::TensorCoreConfig> {
    use super::tensor_core::{TensorCoreConfig, WIDE_WINDOW, WINDOW};
    let dtype = config.dtype;
    if dtype.size() != 2
        || !walks_rows_whole(config)
        || !longest_row_rows_half(m, stats)
        || !longest_row_is_the_critical_path(config, m, n, stats)
    {
        return None;
    }
    // (window, tiles_n, the ratio from which they are taken); at n = 32 the critical path (3 times) is enough.
    let (window, tiles_n, from) = match n {
        32 => (WINDOW, 4, 3.0),
        64 if config.block_items_k == 16 => (WINDOW, 8, 7.0),
        80 | 96 => (WIDE_WINDOW, 16, 4.0),
        112 => (WIDE_WINDOW, 16, 7.0), // step 74
        160 => (WINDOW, 4, 5.0),       // step 73
        _ => return None,
    };
    (longest_row_steps_over_share(config, m, n, stats) >= from).then_some(TensorCoreConfig {
        dtype,
        window: window as u32,
        tiles_n,
    })
}

/// The rows A stores something in, as the tile kernel walks them where the grid leaves the empty rows out
/// ([`crate::spmm::skips_empty_rows`]): their count and their statistics, from those of all `m` rows. The mean
/// and the length variation follow from the sums over all rows (the empty rows add nothing to either sum); the
/// longest row and [`RowStats::columns_per_entry`] (over windows of consecutive rows, empty ones included) stay;
/// `min` is a lower bound, 1 where some row is empty (the selection does not read it).
pub(crate) fn nonempty_rows(m: usize, stats: &RowStats) -> (usize, RowStats) {
    let rows = m - stats.empty_rows;
    if stats.empty_rows == 0 || rows == 0 {
        return (m, stats.clone());
    }
    let share = rows as f64 / m as f64;
    let cv = ((stats.cv * stats.cv + 1.0) * share - 1.0).max(0.0).sqrt();
    (rows, RowStats { min: 1, mean: stats.mean / share, cv, empty_rows: 0, ..stats.clone() })
}

/// The width whose f32 choice is taken, guarded in n, where n is a multiple of 4 past 16 but not of 128 (32, 64
/// and 96 keep their own): n rounded up to a multiple of 128 past n = 64, else of 32. The rules below were fitted
/// at multiples of 32 and 128, and at other n they fell back to tiles for any n: at n = 100 the pruned 384 x 1536
/// at 98% ran the k = 8 tile in 13.6 us, at n = 128 the four-way row split in 7.6 us. On the H100 (NOTES.md, "SpMM
/// step 35"; every f32 variant on the 20 real matrices and 26 weight-like shapes, the choice replayed from the
/// timings): at n = 20, 36, 60, 100, 140, 200, 300, 420, 500 and 1000, 1.151x faster than the choice at n itself
/// over the 200 real-matrix problems and 1.340x over the 260 weight-like ones (the row splits 1.43x-1.60x, a warp
/// per row over 128 columns 1.17x; 0.92x at worst), where rounding every n up to 32 gained 1.080x and 1.175x, and
/// every n up to 128 1.122x and 1.321x (0.50x on wrld_1deg at n = 20); at n = 160, 224, 320 and 448, 1.096x and
/// 1.216x (0.76x at worst: the 2048 x 512 at 26 per row, n = 320, a warp per row over 128 columns).
fn rounded_width(n: usize, dtype: DType) -> Option<usize> {
    let own_rules = n % 128 == 0 || (n % 32 == 0 && n < 128);
    (dtype == DType::F32 && n > 16 && n % 4 == 0 && !own_rules)
        .then(|| n.next_multiple_of(if n > 64 { 128 } else { 32 }))
}

/// `config`, chosen at a [`rounded_width`], for `n`: as it is where n fills its column tiles, else guarded in n
/// (most tiles run the guards in the last column tile only: `kSplitGuards` in cuda/spmm/spmm.cu). There the k = 8
/// tile held to 64 registers becomes the unbounded one: its guarded form ran 12% slower than its unguarded one at
/// the same n, and no faster than the unbounded tile where n needs the guards (0.998x on the 63 problems of that
/// sweep where it would have been chosen).
fn predicated_for(config: SpmmConfig, n: usize) -> SpmmConfig {
    if n % config.block_items_x as usize == 0 {
        return config;
    }
    // No variant that takes column tiles in turn is compiled with predicates: its one-tile twin is.
    let config = SpmmConfig { column_tiles: 1, ..config };
    let k8 = k8_tile(config.dtype, 4, false);
    let config = if config.same_kernel(&bounded(k8, 32)) { k8 } else { config };
    SpmmConfig { predicate_loads: true, ..config }
}

/// Whether `config` is the two-row tile over 128 columns (held to 128 registers or not) and n leaves more than a
/// tenth of its last column tiles' columns idle: there the tile lost to the choice at n itself (4elt, n = 140:
/// 0.76x; wrld_1deg, n = 300: 0.90x; NOTES.md, "SpMM step 35"), which the rounding then keeps.
fn two_rows_waste_columns(config: &SpmmConfig, n: usize) -> bool {
    let unbounded = |c: SpmmConfig| SpmmConfig { launch_bounds: false, predicate_loads: false, ..c };
    unbounded(*config).same_kernel(&unbounded(two_row_tile(config.dtype))) && n.next_multiple_of(128) * 10 > n * 11
}

impl SpmmConfig {
    /// Chooses a compiled config for C (m x n) = A (m x k, nnz stored entries) * B (k x n), knowing only the
    /// mean row length. [`SpmmConfig::select_with_stats`] also sees how uneven the rows are.
    pub fn select(m: usize, k: usize, n: usize, nnz: usize, dtype: DType) -> SpmmConfig {
        let mean = nnz as f64 / m.max(1) as f64;
        let stats = RowStats { min: 0, max: 0, mean, cv: 0.0, empty_rows: 0, columns_per_entry: None };
        Self::select_with_stats(m, k, n, &stats, dtype)
    }

    /// Chooses a compiled config from the row statistics computed at upload ([`crate::DeviceCsr::stats`]).
    ///
    /// The result always satisfies `validate()`, is in the variant table, and its dense vector width divides
    /// n, so it never needs a misaligned access. Each branch cites the H100 sweep in NOTES.md ("SpMM
    /// selection", 2026-11-22).
    pub fn select_with_stats(m: usize, k: usize, n: usize, stats: &RowStats, dtype: DType) -> SpmmConfig {
        if dtype.size() == 2 {
            let config = Self::select_half(m, k, n, stats, dtype);
            return longest_row_tile_half(&config, m, n, stats).unwrap_or(config);
        }
        if let Some(width) = rounded_width(n, dtype) {
            let mut config = Self::select_f32(m, k, width, stats, dtype);
            if config.column_tiles > 1 && n % config.block_items_x as usize != 0 {
                // Tiles in turn that n cuts run as their one-tile twin, guarded ([`predicated_for`]). The choices for
                // rows that share columns ([`very_short_rows_many_rows`]) were measured at widths their tiles fill;
                // at a width the rounding reaches, the choice without them. Rows of 8 sharing columns at n = 992 (a
                // geometric graph and local Poisson rows; NOTES.md, "SpMM step 61"): the two-row tile, guarded, ran
                // 0.90x and 0.94x of the k = 8 tile the rule gives without them.
                let unshared = RowStats { columns_per_entry: None, ..stats.clone() };
                config = Self::select_f32(m, k, width, &unshared, dtype);
            }
            let config = predicated_for(config, n);
            if !two_rows_waste_columns(&config, n) {
                // Of [`longest_row_tile`]'s branches only the thirty-two-row block (multiples of 16 from 144 to 960)
                // and the two-row 32-entry tile at n = 40-56 reach these widths; the others were measured at widths
                // the tiles fill.
                return longest_row_choice(config, m, k, n, stats);
            }
        }
        longest_row_choice(Self::select_f32(m, k, n, stats, dtype), m, k, n, stats)
    }

    /// The f32 choice at n itself.
    fn select_f32(m: usize, k: usize, n: usize, stats: &RowStats, dtype: DType) -> SpmmConfig {
        let mean = stats.mean;
        let dv = widest_dividing(n, &[1, 2, 4]);
        if n <= 16 && n % 4 == 0 && many_short_rows(m, n, stats) {
            // n = 4-16 on many short rows: the k = 8 tile over 32 columns, most of its lanes idle, as short rows
            // want (NOTES.md, "SpMM step 32"; the real matrices at n = 4, 8, 12, 16: copter2 17.5-20.8 -> 15.5-15.7
            // us, case_ACTIVSg70k 16.8 -> 15.2 at n = 12 and 16, add32 7.5 -> 6.2).
            k8_tile(dtype, 4, true)
        } else if n <= 16 && n % 2 == 0 && mean > 20.0 && mean <= 500.0 {
            // n = 2-16 on longer rows: two rows of 16 threads over 32 columns, each row's entries loaded 16 at a
            // time (the pruned weights at n = 2-16: 384 x 1536 at 70%, n = 4: 22.1 -> 17.2 us; 1536 x 384 at 90%:
            // 9.6 -> 8.6 us; NOTES.md, "SpMM step 32").
            tile(dtype, 2, 2, 2, 32, 32, 16, true)
        } else if n <= 8 {
            // One 8-wide tile covers n; float4 sparse loads (Sputnik's dispatch for n <= 8).
            tile(dtype, 4, 1, 4, 32, 8, 8, n % 8 != 0)
        } else if n <= 16 {
            tile(dtype, 4, dv.min(2), 4, 32, 16, 8, n % 16 != 0)
        } else if let Some(config) = very_short_rows_many_rows(m, k, n, stats) {
            // Very short rows in many rows, and rows of up to 10 that share columns with their neighbours: column
            // tiles in turn ([`very_short_rows_many_rows`]; case_ACTIVSg70k at n = 512: 174.1 -> 136.0 us, a 40^3
            // seven-point stencil at n = 2048: 622.0 -> 448.1 us, on the H200).
            config
        } else if short_rows_in_turn_fewer_rows(m, k, n, stats) {
            // Very short rows, or short rows over k < 8192 at n = 1024-2048, in 2049-16383 rows: the two-row tile
            // in turn ([`short_rows_in_turn_fewer_rows`]; uniform 7966 x 3336, rows of 2.8, n = 512: 23.2 -> 11.6
            // us on the H200).
            two_row_tile_in_turn()
        } else if let Some(config) = short_rows_fewer_rows_wide_n(m, k, n, stats) {
            // Short rows in 8192-16383 rows at n = 1024-2048 ([`short_rows_fewer_rows_wide_n`]; wrld_1deg at n =
            // 2048: 152.5 -> 130.6 us on the H200).
            config
        } else if thirty_two_row_rows(m, k, n, stats) {
            // 256-1024 rows over n = 768-3072: thirty-two rows of 16 threads per block on one 64-column tile,
            // twice the rows of the sixteen-row block sharing each row of B it brings into L1 (cuSPARSE's ALG3
            // runs 32 x 64 blocks of 512 threads too). Uniform rows and magnitude-pruned Gaussian matrices with row
            // scales exp(sigma N) (m 256-1024, k 1024-3072, 5-20%, n 768-3072; NOTES.md, "SpMM step 21"): 1.245x
            // faster than the tiles chosen before on the 632 problems the rule covers (0.93x-1.74x; 512 x 1536 at
            // 10%, cv 0.49, n = 1024: 35.2 -> 27.2 us from the sixteen-row block; 256 x 2048 at 20%, cv 0.58, n =
            // 3072: 136.6 -> 79.1 us from a warp per row), and on the suite's pruned weights at n = 512-3072 1.14x on
            // the 12 problems it covers (384 x 1536 at 90%, n = 1024: 27.6 -> 23.1 us). Not uneven rows in 384
            // rows at n <= 1024 (cv 0.9, 384 x 1536 at 10%: 24.4 vs 32.3 us with the sixteen-row block: 12 row
            // blocks leave the SMs waiting on the longest rows), nor even rows past 640 rows (the two-row tile:
            // 1024 x 1024 at 5%, n = 2048, 35.4 vs 38.9 us).
            thirty_two_row_tile(dtype)
        } else if thirty_two_rows_large_k(m, k, n, stats) {
            // Even rows of 400-820 entries over k = 5120-16384 at n = 768-3072 ([`thirty_two_rows_large_k`]): the
            // thirty-two-row block, 1.03x-1.80x faster than the tiles chosen before on 74 problems on the H100.
            thirty_two_row_tile(dtype)
        } else if thirty_two_rows_one_wave(m, k, n, stats) {
            // Even rows at n = 128-512 where the thirty-two-row block runs one full wave
            // ([`thirty_two_rows_one_wave`]): 1.135x faster than the tiles chosen before on 36 problems on the H100.
            thirty_two_row_tile(dtype)
        } else if power_law_few_rows_wide_n(m, k, n, stats) {
            // Few power-law rows over k >= 4096 at n = 1024-2048: a warp per row over 128 columns
            // ([`power_law_few_rows_wide_n`]; 512 x 8192, mean 136, n = 1024: 162.2 -> 49.5 us from the eight-row
            // tile below).
            warp_per_row_tile(dtype)
        } else if uneven_long_rows(m, k, n, stats) {
            // Long, uneven rows over a wide B: eight one-row warps per block on one 64-column tile, two blocks per
            // SM. Magnitude-pruned Gaussian matrices with row scales exp(sigma N) (cv 0.9-2.1; m 384-1024, k 1536
            // and 3072, 5% and 10%, n 1024-4096; NOTES.md, "SpMM step 16"): 1.18x faster than the tiles chosen
            // before on 46 problems (768 x 3072 at 10%, cv 1.4, n = 2048: 225 -> 158 us, from the k = 8 tile with
            // split rows; 1024 x 1536 at 5%, n = 1024: 59 -> 44 us, from two rows per block), 0.96x at worst; on
            // 25 fresh problems (m 384-896, k 2048 and 2560, 7% and 15%, n 1024-3072) 1.28x (1.02x-1.65x). The
            // uniform rows of the same shapes lose (768 x 1536 at 10%, n = 4096: 173 vs 119 us), and where the
            // sixteen-row block is chosen below it is as fast or faster on rows too short to split (384 x 3072 at
            // 10%, cv 0.9, n = 1024: 41.7 vs 49.6 us). But a few rows far longer than the rest (power-law rows, the
            // longest 9 standard deviations out) take two rows of 16 threads over 32 columns ([`rare_long_rows`]:
            // 1.41x faster on 60 problems at n = 1024-2048 on the H200, 0.84x -> 1.18x of cuSPARSE).
            if rare_long_rows(n, stats) {
                SpmmConfig { predicate_loads: true, ..narrow_k32_tile(dtype) }
            } else {
                eight_row_tile(dtype)
            }
        } else if moderately_uneven_rows_wide_n(m, k, n, stats) {
            // Long rows of moderately uneven length over n = 3072-4096: the sixteen-row block. Pruned Gaussian
            // matrices as above with sigma 0.1-0.2 (cv 0.33-0.68; m 384-1024, k 1536 and 3072, 5% and 10%; NOTES.md,
            // "SpMM step 16"): 1.24x faster than the tiles chosen before on 32 problems (1.02x-1.51x; 768 x 3072 at
            // 10%, cv 0.34, n = 3072: 310 -> 208 us from two rows per block, which runs n = 3072 as slowly as 4096);
            // on 51 fresh ones (m 512-896, k 2048 and 2560, 8% and 12%, n 3072, 3584, 4096) 1.34x (1.14x-1.58x).
            // Not uniform rows (896 x 2048 at 12%, n = 4096: 258 vs 208 us with two rows per block).
            sixteen_row_tile(dtype)
        } else if long_uneven_rows_large_k(m, k, n, stats) {
            // Long uneven rows over a large k, outside the two ranges above: four rows of 8 threads on one
            // 64-column tile, run SM-affine at n <= 2048 (`spmm::block_order`). Magnitude-pruned Gaussian matrices
            // with row scales exp(sigma N) (sigma 0.15-0.6, cv 0.5-2.0; m 640-4096, k 2048-4096, 5-12%, n
            // 1024-3072; NOTES.md, "SpMM step 17"), measured through the library's choice: 1.22x faster than the
            // tiles chosen before on 100 problems (0.99x-1.57x; 2048 x 4096 at 5%, cv 1.9, n = 1024: 227 -> 150
            // us, from the k = 8 tile with split rows; 1792 x 3072 at 11%, cv 1.3, n = 1024: 253 -> 161 us, from
            // two rows per block), and 1.27x on 118 fresh ones (m 704-3328, k 2048-3584; 0.99x-1.63x). Less uneven
            // rows past 3072 rows ran 0.88x-1.28x (cv 0.6-0.8: left out). Not k <= 1536 (mean 51-169 there:
            // 0.75x-1.36x, mixed), n = 512 (0.64x-1.51x), nor uniform rows (2048 x 4096 at 5%: 0.76x-0.85x). Power-law
            // rows whose longest row sets the launch's time at n = 1024-1536 take the k = 16 tile over 32 columns
            // ([`rare_long_rows_four_rows`]: 0.63x-0.96x of the four-row tile's time on 27 problems on the H200).
            // Not where `longest_row_choice` gives the thirty-two-row block for the four-row tile (steps 68-72).
            let four_rows = four_row_tile(dtype);
            if rare_long_rows_four_rows(m, n, stats) && longest_row_tile(&four_rows, m, n, stats).is_none() {
                k16_tile(dtype, false)
            } else {
                four_rows
            }
        } else if uneven_few_rows(m, n, stats) {
            // Few rows of power-law length, longest past two pieces though not skewed, outside the ranges above:
            // two warps per row over 128 columns ([`uneven_few_rows`]; 512 x 32768, n = 256: 22.3 -> 17.0 us).
            split_row_warp_tile(dtype)
        } else if let Some(config) = longest_rows_unsplit_few_rows(m, k, n, stats, dtype) {
            // Power-law rows in 1025-3072 rows whose longest row passes 8 times the mean but is not cut into pieces:
            // two warps per row, or one, over 128 columns ([`longest_rows_unsplit_few_rows`]; 2048 x 16384, mean 58,
            // longest 757, n = 512: 61.2 -> 38.2 us).
            config
        } else if let Some(config) = power_law_rows_narrow_n(m, k, n, stats, dtype) {
            // Power-law rows in 2048-8192 rows at n = 32-128: 32-entry tiles ([`power_law_rows_narrow_n`]; 4096 x
            // 512, mean 47, n = 32: 18.9 -> 10.1 us on the H200).
            config
        } else if dv == 4 && is_skewed(stats) && long_skewed_rows_wide_n(m, n, stats) {
            // Skewed rows of 90 or more entries on average in 2048-4096 rows at n = 512-2048: 16 entries a step
            // ([`long_skewed_rows_wide_n`]; power-law 2048 x 8192, mean 405, n = 1024: 339.1 -> 310.0 us).
            k16_tile(dtype, false)
        } else if dv == 4 && is_skewed(stats) {
            // Rows long and uneven enough to split (spmm::split): the pieces keep the critical path short, and
            // then the short k = 8 tiles win (email-Enron, n = 32: 15.0 us vs 22.4 us with Sputnik's tile;
            // n = 128: 42.2 us vs 55 us with a warp per row, unsplit; NOTES.md, "SpMM step 4").
            k8_tile(dtype, 4, n % 32 != 0)
        } else if let Some(config) = row_split_tile(m, k, n, stats, dtype) {
            // Few rows and a small n: two or four subwarps per row ([`row_split_tile`], NOTES.md "SpMM step 29").
            config
        } else if dv == 4 && has_long_rows(stats) {
            // Longest rows of 257-1024 entries, more than sixteen times the mean: tiles that split them
            // ([`long_rows_tile`]).
            long_rows_tile(m, n, stats, dtype)
        } else if dv == 4
            && n % 128 == 0
            && m <= 2048
            && stats.cv <= 2.0
            && mean <= 64.0
            && m.saturating_mul(n) >= 1 << 20
        {
            // Few short rows and a large C: two rows of 16 threads, k = 16, half the empty slots of a 32-entry
            // tile (pruned 1536 x 384, n = 1024: 90%, 38 per row, 24.0 us vs 26.5 us with a warp per row; 98%,
            // 7.7 per row, 14.4 us vs 17.0 us). Not where C is smaller (1536 x 384 at n = 256: 11.9 us vs 10.1
            // us; 384 x 384, n = 1024: 12.8 vs 13.0 us, a tie; NOTES.md, "SpMM step 11"). Held to 128 registers
            // (16 blocks per SM): 90% 23.4 vs 24.0 us, 98% 13.2 vs 14.4 us (NOTES.md, "SpMM step 12").
            two_row_tile(dtype)
        } else if sixteen_row_rows(m, k, n, stats) {
            // Few long rows over a wide B: sixteen one-row warps per block on one 64-column tile, so the block's
            // rows share that tile's rows of B in L1 (cuSPARSE's ALG3 runs 32 rows x 64 columns per block at a
            // 69% L1 hit rate there; the one-warp blocks hit 16%). Pruned 384 x 1536 at 90% (154 per row): n =
            // 1024 27.6 vs 30.1 us with a warp per row, n = 2048 49.4 vs 66.1 us; not n = 256 (96 blocks: 14.4 vs
            // 14.2 us) nor n = 4096 (91.9 vs 88.3 us). Uniform k = 1536 at 10% and 30%, n = 1024: m = 512 33.6 vs
            // 43.5 and 61.2 vs 92.2 us, m = 768 48.2 vs 62.5 and 89.6 vs 139.5 us; not m = 1024 (62.9 vs 55.5 us),
            // where the one-warp blocks go row blocks first (`spmm::column_tiles_first`) and an SM's blocks share
            // a column tile (NOTES.md, "SpMM step 13"). At n = 768 only uneven rows (magnitude-pruned Gaussian
            // matrices with row scales exp(sigma N), 384-640 rows, k 1024-2048, 7-14%; NOTES.md, "SpMM step 20"):
            // 1.16x faster than the warp per row they had on 26 problems (1.01x-1.52x; 384 x 2048 at 14%, cv 0.72:
            // 45.9 -> 30.2 us), 1.24x on 27 fresh ones (m 384-640, k 1280-3072; 1.03x-1.50x); but 0.82x-1.0x on
            // uniform rows, mixed at cv 0.4-0.6 over k = 1024, and 0.89x-0.97x in 576-640 rows over k = 1280.
            sixteen_row_tile(dtype)
        } else if n % 128 == 0
            && stats.cv <= 2.0
            && m >= 512
            && k.saturating_mul(n) <= LARGEST_SWEPT_B
            && (m <= 2048 || mean > 64.0)
            && (mean <= 400.0
                || (stats.cv < 0.1 && mean <= 1100.0 && k >= 4096 && (1024..=2048).contains(&m))
                || (mean <= 820.0 && n == 512 && (2560..=8192).contains(&m)))
            && (m.saturating_mul(n) >= 1 << 20 || (stats.cv < 0.3 && m.saturating_mul(n) >= 1 << 18))
            && fills_its_last_wave(m.div_ceil(2).saturating_mul(n / 128), 16 * H100_SMS)
        {
            // Two rows of 16 threads at 16 blocks per SM wherever there are blocks enough to fill the SMs. In a
            // sweep of uniform m 256-4096, k 384-3072, n 128-4096 at 2% and 10% and the suite's real matrices,
            // each tile in its own block order (NOTES.md, "SpMM step 14"), it was the fastest of eight tiles on 264
            // of 498 problems and beat the warp per row these shapes had: 2048 x 3072 at 10%, n = 2048, 286 vs 457
            // us; 1024 x 1536, n = 2048, 76.3 vs 107.4 us; 1024 x 768, n = 1024, 23.2 vs 30.8 us. Even rows (cv <
            // 0.3) fill the GPU from 2^18 elements of C (2048 x 768 at 2%, n = 256: 7.4 vs 9.8 us); uneven ones need
            // 2^20 (pruned 1536 x 384 at 70%, cv 0.34, n = 256: 16.3 vs 15.1 us with a warp per row). A last wave
            // under three quarters full loses (1280 x 1024 at 20%, n = 512, 1.2 waves: 46.4 vs 37.2 us). Not a B
            // past 48 MiB, where the k = 8 tile below wins (uniform 4096^2 at 95%, n = 4096: 1.13 vs 0.90 ms), nor
            // short rows over many rows (m > 2048, mean <= 64: 4096 x 3072 at 2%, n = 2048, 203 vs 166 us). Rows
            // of 400-820 entries where they are even (cv < 0.1) and k >= 4096, in 1024-2048 rows (later sweeps:
            // uniform m 1024-3072, k 4096-8192, 6% and 10%, n 256-2048; NOTES.md, "SpMM step 17"): 1.35x faster
            // than the warp per row they had on 40 problems (2048 x 4096 at 10%, n = 1024: 307 -> 193 us), 0.90x
            // at worst (1536 rows at n = 256), and 1.26x on 21 fresh ones (k 5120 and 7168). Not 3072 rows
            // (0.88x-1.02x against the unbounded two-row tile they keep), nor rows of cv 0.18-0.4 (0.76x-1.02x).
            // Up to 1100 entries since step 42 (uniform 2048 x 8192 at 11% and 13%, 901 and 1065 per row, against
            // the warp per row they had: n = 128 66.0 vs 68.8 and 74.8 vs 81.4 us, n = 512 211.3 vs 298.7 and 245.7
            // vs 339.5 us). Rows of 400-820 entries in 2560-8192 rows at n = 512 since step 43 (H200; uniform
            // 2560-8192 x 4096-8192 at 6-11%, means 410-819, against the unbounded two-row tile they had: 1.031x-1.174x
            // faster on all 8 problems, 1.101x on geometric mean, 4096 x 8192 at 6%: 260.3 vs 221.6 us; through the
            // library on 5 fresh shapes, 3072-6144 x 4096-8192 at 7-10.5%, 0.995x-1.059x, 1.031x; and at n = 500,
            // rounded to 512, 4096 x 8192 at 6%: 337.3 -> 267.1 us). Not n = 384 (1.014x-1.117x in the sweep, but
            // 0.929x-1.044x on the fresh shapes), nor from n = 768 (0.955x-1.084x).
            two_row_tile(dtype)
        } else if short_rows(m, k, n, stats)
            || many_short_even_rows(m, k, n, stats)
            || short_rows_wide_n(m, k, n, stats)
        {
            // Short rows, at most 200,000 entries, n = 128-512 ([`short_rows`]), even rows of 3-12.5 in 16384-65536
            // rows at n = 256-1024 ([`many_short_even_rows`]), and short rows in 3000-8191 rows at n = 1024-2048
            // ([`short_rows_wide_n`]): two rows of 16 threads over 128 columns.
            two_row_tile(dtype)
        } else if dv == 4 && n % 128 == 0 && (stats.cv > 2.0 || m <= 2048) {
            // One warp per row over 128 columns: skewed rows (email-Enron, n = 128: 55 us vs 102 us) and rows too
            // few for the two-row tile above, where it makes the most blocks (pruned 384 x 384 at 90%, n = 1024:
            // 11.4 vs 12.4 us; 384 x 1536 at 98%: 11.8 vs 16.8 us; NOTES.md, "SpMM step 14").
            warp_per_row_tile(dtype)
        } else if dv == 4 && stats.cv > 2.0 {
            // Skewed rows with narrower n: Sputnik's default tile (email-Enron, n = 32: 28 us; k = 8: 54 us).
            tile(dtype, 4, 4, 4, 32, 32, 8, n % 32 != 0)
        } else if dv == 4
            && n % 128 == 0
            && n <= 256
            && (64.0..=600.0).contains(&mean)
            && m.saturating_mul(n) >= 1 << 19
        {
            // Many rows of 64-600 entries, small n: two rows of 16 threads over 128 columns at 128 registers, 16
            // blocks per SM. At 168 registers 12 fit, and 2^19 elements of C make 2048 blocks, more than 12 per
            // SM. Uniform 4096^2 (NOTES.md, "SpMM step 12"): 98%, n = 128, 14.9 vs 17.4 us (the best before it);
            // 95% 27.1 vs 33.2 us; 90% 51.4 vs 56.5 us; n = 256: 98% 29.4 vs 31.2, 95% 49.9 vs 59.7, 90% 98.3 vs
            // 110.5 us; 8192 x 2048 at 90%, n = 128, 50.7 vs 58.6 us. Not the pruned 384- and 1536-row weights
            // at n = 256 (fewer blocks than slots: 13.5 vs 9.8 us, 384 x 384 at 70%).
            two_row_tile(dtype)
        } else if dv == 4 && (mean <= 100.0 || (mean <= 250.0 && n > 256)) {
            // Short rows waste most of a 32-entry tile (copter2, 12.7 per row, n = 128: 58 us vs 94 us;
            // uniform 98%, n = 4096: 450 us vs 595 us; uniform 95%, n = 4096: 924 us vs 966 us with k = 16).
            // Held to 64 registers (32 blocks per SM) where n needs no predicates: uniform 98%, n = 4096, 432.8
            // vs 457.5 us; 95% 910.5 vs 922.4 us; copter2, n = 128, 57.7 vs 59.4 us; n = 32 and uniform 98% at
            // n = 1024 within 1% (NOTES.md, "SpMM step 12").
            if n % 32 == 0 {
                bounded(k8_tile(dtype, 4, false), 32)
            } else {
                k8_tile(dtype, 4, true)
            }
        } else if dv == 4 && mean <= 1000.0 && n % 128 == 0 && n > 256 {
            // Two rows of 16 threads over 128 columns, k = 16: uniform 90%, n = 4096: 1.56 ms vs 1.75 ms
            // (8.8 TFLOP/s); uniform 80%, n = 4096: 2.92 ms vs 3.00 ms.
            unbounded_two_row_tile(dtype)
        } else if dv == 4 && mean <= 600.0 && n % 64 == 0 && n <= 256 {
            // Rows of a few tiles, small n (uniform 90% and 95%, n = 128).
            bounded(tile(dtype, 2, 4, 4, 16, 64, 8, false), 8)
        } else if dv == 4 && mean <= 600.0 {
            // Rows of a few tiles, other n (uniform 90%, n = 4096, before the 128-wide tile: 1.70 vs 1.77 ms).
            k16_tile(dtype, n % 32 != 0)
        } else if dv == 4 && n % 64 == 0 {
            // Long rows: the 64-wide tile with launch bounds (best on uniform 50% and 80% for every n).
            bounded(tile(dtype, 4, 4, 4, 32, 64, 8, false), 8)
        } else if dv == 4 {
            tile(dtype, 4, 4, 4, 32, 32, 8, n % 32 != 0)
        } else if dv == 2 && many_short_rows(m, n, stats) {
            // n = 2 mod 4 on many short rows: the k = 8 tile in float2 over 32 columns. On the real matrices at n
            // = 50 (NOTES.md, "SpMM step 32"): case_ACTIVSg70k 58.9 -> 38.2 us, copter2 65.1 -> 41.7, email-Enron
            // 37.7 -> 26.3, wrld_1deg 15.1 -> 11.4, 4elt 11.7 -> 10.0, add32 8.6 -> 8.0 us. Not under 4096 rows
            // (pores_1 5.2 -> 6.2 us, west0479 5.3 -> 6.5), on longer rows (pruned 1536 x 384 at 98%, 7.7 per
            // row: 7.6 -> 10.6 us), nor, at n <= 64, past a long row that the split does not cut (power-law 40000
            // rows, longest 540, n = 50: 35.0 -> 40.5 us; [`longest_row_is_short_enough`]).
            k8_tile(dtype, 2, true)
        } else if dv == 2 {
            // Sputnik's dispatch for even n.
            tile(dtype, 2, 2, 2, 32, 32, 16, n % 32 != 0)
        } else if many_short_rows(m, n, stats) {
            // Odd n on many short rows: the k = 8 tile in scalars over 32 columns. On the real matrices at n = 33
            // (NOTES.md, "SpMM step 32"): case_ACTIVSg70k 88.7 -> 33.6 us, email-Enron 58.9 -> 28.9, copter2 71.4
            // -> 46.6, wrld_1deg 22.9 -> 13.1 us; the pruned weights keep a warp per row (384 x 1536 at 70%: 19.3
            // vs 57.6 us in bf16).
            k8_tile(dtype, 1, true)
        } else {
            tile(dtype, 1, 1, 1, 32, 32, 32, n % 32 != 0)
        }
    }
}

impl SpmmConfig {
    /// The f16/bf16 choice, widths counted in 16-bit elements (8 = one 16-byte vector). From the first f16 and
    /// bf16 sweep on the H100 (NOTES.md, "Mixed precision"): the short k-tiles win far more often than in fp32
    /// (fewer registers, more blocks per SM), and one warp per row over 256 columns loses everywhere but at 50%.
    fn select_half(m: usize, k: usize, n: usize, stats: &RowStats, dtype: DType) -> SpmmConfig {
        let mean = stats.mean;
        let dv = widest_dividing(n, &[1, 2, 4, 8]);
        if dv == 8 && n <= 32 && too_skewed_for_windows(stats, dtype) {
            // Skewed rows too long for the 16-row windows ([`too_skewed_for_windows`]) at n = 8-32: up to 2^18
            // entries Sputnik's warp per row in scalars (compiled with predicates only), past that the k = 8 tile
            // over 32 columns; both walk the row split's pieces. On 39 skewed power-law matrices with longest rows
            // of 3419-28544 (NOTES.md, "SpMM step 56"), each within 1-6% of the best tile on geometric mean at n =
            // 8, 16 and 32 (22 with at most 2^18 entries, 17 with more); the warp per row ran up to 1.4x slower
            // than the k = 8 tile on the larger ones.
            if stats.mean * m as f64 <= SKEWED_WARP_PER_ROW_NNZ {
                tile(dtype, 1, 1, 1, 32, 32, 32, true)
            } else {
                k8_tile(dtype, 4, true)
            }
        } else if dv == 8 && n > 32 && is_skewed(stats) {
            // Split rows (spmm::split), n past one 32-wide tile: email-Enron n = 128, 24.4 us (f16) and 25.6 us
            // (bf16) vs 43.1 / 50.1 us with Sputnik's tile (NOTES.md, "SpMM step 4").
            tile(dtype, 1, 8, 4, 8, 64, 8, n % 64 != 0)
        } else if dv == 8
            && (very_short_rows_many_rows_half(m, k, n, stats)
                || very_short_rows_fewer_rows_wide_n_half(m, k, n, stats))
        {
            half_k8_tile_in_turn(dtype)
        } else if dv == 8 && stats.cv <= 2.0 && !(m <= HALF_FEW_ROWS && n <= 256) {
            if very_short_rows_wide_n_half(k, n, stats) || very_short_rows_fewer_rows_half(m, n, stats) {
                // Rows of a few entries at n a multiple of 256: two rows of 16 threads over 256 columns, whose
                // per-row cost (the row's bounds, its few entries) is spread over four times the columns of the
                // k = 8 tile's (NOTES.md, "SpMM step 54": uniform rows of 3-6 over k = 512-8192, n = 256-2048,
                // 1.08x-1.45x; well1850 and add32 at n = 512-1024 1.03x-1.16x; not case_ACTIVSg70k, k = 70000,
                // 0.93x-0.94x, nor power-law rows of 4, cv 0.91, 0.83x-0.85x). In 8192-16383 rows at n = 256-512
                // over any k and on rows of up to 7.5 too (step 64: wrld_1deg, stencils of 10000-14400 points).
                half_two_row_256_tile(dtype)
            } else if mean > 300.0 && mean <= 600.0 && n > 128 && n <= 256 {
                // Uniform 90% (410 per row), n = 256: the k = 8 tile below runs 0.096-0.102 ms in three runs,
                // f16 (2, 16, 64, 8) 0.070 ms, bf16 (2, 16, 256, 16) 0.073 ms (NOTES.md, "SpMM step 7").
                match dtype {
                    DType::Bf16 if n % 256 == 0 => half_two_row_256_tile(dtype),
                    _ => tile(dtype, 2, 8, 4, 16, 64, 8, n % 64 != 0),
                }
            } else if (mean <= 600.0 && n % 64 == 0 && n <= 256 && (n > 128 || m >= 16384 || one_wave_if_bounded(m, n)))
                || short_rows_many_rows_wide_n_half(m, n, stats)
            {
                // The same k = 8 tile held to 64 registers, 32 blocks per SM instead of 28 (NOTES.md, "SpMM step
                // 12"): uniform 4096^2 at n = 256, f16 95% 38.9 vs 44.1 us, 98% 18.9 vs 21.4 us, bf16 40.1 vs 48.5
                // and 19.7 vs 22.9 us; copter2 (55 476 rows) at n = 128 32.4 vs 34.3 us. Not the uniform 4096^2 at
                // n = 128 (f16 23.1 vs 21.9 us at 95%) nor at n = 4096 (f16 0.510 vs 0.500 ms). At n = 64 and 128
                // also where only the bounded tile's launch fits in one wave ([`one_wave_if_bounded`]). And at n =
                // 512-2048 on many short rows (NOTES.md, "SpMM step 54": uniform rows of 8-14 in 9000-45000 rows,
                // 1.01x-1.14x; copter2 and wrld_1deg 1.06x-1.13x; step 62 at n = 2048).
                half_k8_tile_bounded(dtype)
            } else if mean <= 600.0 && (n == 32 || (n == 96 && mean >= 16.0)) {
                // n = 32, and 96 on rows of 16 or more, where the 64-column tile below would leave half or a
                // quarter of its lanes idle: the k = 8 tile over 32 columns in 4-element vectors (NOTES.md, "SpMM
                // step 52"; uniform rows, every variant, then old against new on fresh shapes). n = 32, 16384-65536
                // rows of 8-120: 1.04x-1.61x faster (65536 x 4096 at 120 per row, f16: 117.1 -> 75.2 us); fresh,
                // 1.25x-1.46x. n = 96, 8192-40960 rows of 16-90: 1.01x-1.15x; not rows of 10 (0.90x-0.97x), nor the
                // graphs (case_ACTIVSg70k, rows of 3.4: 0.74x-0.76x), nor n = 160 (0.96x-1.03x).
                k8_tile(dtype, 4, true)
            } else if mean <= 600.0 {
                // Uniform 90% n = 4096: 0.955 ms (14.4 TFLOP/s) vs 1.215 ms with the 256-wide tile.
                tile(dtype, 1, 8, 4, 8, 64, 8, n % 64 != 0)
            } else if mean > 1500.0 && n % 256 == 0 && n > 256 {
                // Uniform 50% n = 4096: 4.08 ms (f16), 4.78 ms (bf16) vs 4.53 / 5.59 ms.
                half_two_row_256_tile(dtype)
            } else {
                // Uniform 80%: n = 128 66 us vs 82 us, n = 4096 1.89 ms vs 2.06 ms.
                tile(dtype, 2, 8, 4, 16, 64, 8, n % 64 != 0)
            }
        } else if dv == 8 {
            // Skewed rows (email-Enron n = 32, split: 16.8 us, 2.4x cuSPARSE) and small problems (pruned 384-row
            // weights at n = 256: 12 us vs 15 us; [`HALF_FEW_ROWS`]): Sputnik's 32-wide tile.
            tile(dtype, 4, 4, 4, 32, 32, 8, n % 32 != 0)
        } else if (dv == 4 || dv == 2) && n > 16 && short_rows_narrow_vectors(m, n, stats) {
            // n not a multiple of 8 (n = 20, 50, 100, 300, ...): the k = 8 tile in 4- or 2-element vectors over 32
            // columns ([`short_rows_narrow_vectors`]; copter2, n = 300, bf16: 439 -> 138 us; email-Enron 189 -> 91
            // us; n = 50: 104 -> 32 and 49 -> 25 us; NOTES.md, "SpMM step 32").
            k8_tile(dtype, dv, true)
        } else if (dv == 4 || dv == 2) && n > 16 && m <= 1536 {
            // Longer rows in few rows: a warp per row in scalars (pruned 384 x 1536 at 70%, n = 100: 27.3 -> 20.9
            // us, where the k = 8 tile takes 40 us; the nine pruned weights at n = 20-300, NOTES.md, "SpMM step 32").
            tile(dtype, 1, 1, 1, 32, 32, 32, true)
        } else if dv == 4 {
            tile(dtype, 4, 4, 4, 32, 32, 8, n % 32 != 0)
        } else if dv == 2 {
            tile(dtype, 2, 2, 2, 32, 32, 16, true)
        } else if n > 16 && many_short_rows(m, n, stats) {
            // Odd n on many short rows: the k = 8 tile in scalars (bf16 at n = 33: copter2 112.8 -> 43.1 us,
            // case_ACTIVSg70k 90.4 -> 36.2, email-Enron 60.5 -> 32.2; NOTES.md, "SpMM step 32").
            k8_tile(dtype, 1, true)
        } else {
            tile(dtype, 1, 1, 1, 32, 32, 32, true)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::spmm_table;

    #[test]
    fn half_types_on_short_rows_at_wide_n() {
        let rows = |mean: f64, cv: f64| RowStats {
            min: 0,
            max: (mean * 4.0) as usize,
            mean,
            cv,
            empty_rows: 0,
            columns_per_entry: None,
        };
        for dtype in [DType::F16, DType::Bf16] {
            let sel =
                |m: usize, k: usize, n: usize, stats: &RowStats| SpmmConfig::select_with_stats(m, k, n, stats, dtype);
            let wide = tile(dtype, 1, 8, 2, 16, 256, 16, false);
            let k8_bounded = bounded(tile(dtype, 1, 8, 4, 8, 64, 8, false), 32);
            let k8 = tile(dtype, 1, 8, 4, 8, 64, 8, false);
            // Rows of 6 or fewer over k <= 8192 at n = 256-2048, a multiple of 256, cv at most 0.8: 256 columns.
            assert_eq!(sel(12000, 3000, 512, &rows(5.0, 0.45)), wide);
            assert_eq!(sel(3000, 6000, 256, &rows(3.0, 0.6)), wide);
            assert_eq!(sel(2048, 8192, 2048, &rows(6.0, 0.8)), wide);
            // Either side of each bound: longer rows, a wider k, n past 2048 or not a multiple of 256, uneven rows.
            assert_eq!(sel(3000, 6000, 512, &rows(6.5, 0.4)), k8);
            assert_eq!(sel(3000, 8193, 512, &rows(5.0, 0.45)), k8);
            assert_eq!(sel(3000, 6000, 4096, &rows(5.0, 0.45)), k8);
            assert_eq!(sel(3000, 6000, 640, &rows(5.0, 0.45)), k8);
            assert_eq!(sel(3000, 6000, 512, &rows(5.0, 0.85)), k8);
            // Rows of 16 or fewer in 8192 rows or more at n = 512-2048 (a multiple of 64): the bounded k = 8 tile (rows
            // of 7 or fewer over k > 8192 take it in turn: step 62); from 4096 rows where cv <= 0.5 (step 65).
            assert_eq!(sel(20000, 5000, 768, &rows(10.0, 0.3)), k8_bounded);
            assert_eq!(sel(8192, 5000, 640, &rows(16.0, 0.6)), k8_bounded);
            assert_eq!(sel(20000, 5000, 640, &rows(6.0, 0.38)), k8_bounded);
            assert_eq!(sel(4096, 5000, 768, &rows(10.0, 0.5)), k8_bounded);
            assert_eq!(sel(7434, 7434, 512, &rows(11.58, 0.16)), k8_bounded, "4elt");
            assert_eq!(sel(4095, 5000, 768, &rows(10.0, 0.3)), k8);
            assert_eq!(sel(8191, 5000, 768, &rows(10.0, 0.51)), k8);
            assert_eq!(sel(20000, 5000, 2048, &rows(10.0, 0.3)), k8_bounded);
            assert_eq!(sel(20000, 5000, 2112, &rows(10.0, 0.3)), k8);
            assert_eq!(sel(20000, 5000, 448, &rows(10.0, 0.3)), k8);
            assert_eq!(sel(20000, 5000, 768, &rows(16.5, 0.3)), k8);
        }
    }

    #[test]
    fn half_very_short_rows_in_many_rows_take_tiles_in_turn() {
        let rows =
            |mean: f64, cv: f64, max: usize| RowStats { min: 0, max, mean, cv, empty_rows: 0, columns_per_entry: None };
        let (wrld_1deg, short) = (rows(7.34, 0.19, 8), rows(5.0, 0.4, 20));
        for dtype in [DType::F16, DType::Bf16] {
            // `kernel` for each problem of `takes`, not for each of `not` (either side of each bound).
            type Problem = (usize, usize, usize, RowStats);
            let check = |kernel: &str, takes: &[Problem], not: &[Problem]| {
                for (m, k, n, stats) in takes {
                    let got = SpmmConfig::select_with_stats(*m, *k, *n, stats, dtype).kernel_name();
                    assert_eq!(got, kernel, "{m} x {k}, n = {n}, {stats:?}");
                }
                for (m, k, n, stats) in not {
                    let got = SpmmConfig::select_with_stats(*m, *k, *n, stats, dtype).kernel_name();
                    assert_ne!(got, kernel, "{m} x {k}, n = {n}, {stats:?}");
                }
            };
            let in_turn = format!("spmm_{dtype}_s1d8_y4k8x64w8_u4_nopred_c4_lb32");
            // Step 62: 16384 rows or more of at most 7 (cv <= 1, none past 64) over k > 8192, n = 128-2048 (% 64).
            // Not: fewer rows, k <= 8192, longer, more uneven or longer rows at most, n past 2048, below 128 or not
            // a multiple of 64.
            let pois = rows(3.4, 0.38, 14);
            check(
                &in_turn,
                &[
                    (16384, 8193, 128, pois.clone()),
                    (70000, 70000, 512, pois.clone()),
                    (65536, 16384, 2048, pois.clone()),
                    (131072, 131072, 192, pois),
                    (40000, 40000, 1024, rows(7.0, 1.0, 64)),
                ],
                &[
                    (16383, 40000, 512, short.clone()),
                    (40000, 8192, 512, short.clone()),
                    (40000, 40000, 512, rows(7.1, 0.4, 20)),
                    (40000, 40000, 512, rows(5.0, 1.01, 20)),
                    (40000, 40000, 512, rows(5.0, 0.4, 65)),
                    (40000, 40000, 2112, short.clone()),
                    (40000, 40000, 64, short.clone()),
                    (40000, 40000, 544, short.clone()),
                ],
            );
            // Step 63: 8192-16383 rows of at most 7.5 (cv <= 1, none past 64) over k >= 8192, n = 1024-2048 (% 64).
            // Not: fewer rows, k under 8192, longer, more uneven or longer rows at most, n under 1024, past 2048 or
            // not a multiple of 64.
            check(
                &in_turn,
                &[
                    (15260, 15260, 1024, wrld_1deg.clone()),
                    (8192, 8192, 2048, wrld_1deg.clone()),
                    (16383, 50000, 1088, wrld_1deg.clone()),
                    (12288, 12288, 1536, wrld_1deg.clone()),
                    (10000, 10000, 2048, rows(7.5, 1.0, 64)),
                ],
                &[
                    (8191, 40000, 1024, short.clone()),
                    (12000, 8191, 1024, short.clone()),
                    (12000, 12000, 1024, rows(7.6, 0.4, 20)),
                    (12000, 12000, 1024, rows(5.0, 1.01, 20)),
                    (12000, 12000, 1024, rows(5.0, 0.4, 65)),
                    (12000, 12000, 960, short.clone()),
                    (12000, 12000, 2112, short.clone()),
                    (12000, 12000, 1056, short.clone()),
                ],
            );
            // Step 64: at n = 256 and 512 the same rows take the 256-column tile, over any k. Not: fewer or more
            // rows, longer or more uneven rows, another n.
            let seven = rows(7.0, 0.4, 20);
            check(
                &format!("spmm_{dtype}_s1d8_y2k16x256w16_u4_nopred"),
                &[
                    (15260, 15260, 256, wrld_1deg.clone()),
                    (8192, 8192, 512, wrld_1deg.clone()),
                    (16383, 50000, 512, wrld_1deg.clone()),
                    (12288, 4096, 256, wrld_1deg.clone()),
                    (10000, 10000, 512, rows(7.5, 1.0, 64)),
                ],
                &[
                    (8191, 40000, 512, seven.clone()),
                    (16384, 40000, 512, seven.clone()),
                    (12000, 12000, 512, rows(7.6, 0.4, 20)),
                    (12000, 12000, 512, rows(7.0, 1.01, 20)),
                    (12000, 12000, 768, seven.clone()),
                    (12000, 12000, 128, seven.clone()),
                    (12000, 12000, 320, seven),
                ],
            );
        }
    }

    #[test]
    fn f32_many_short_even_rows_and_n64() {
        let pick = |m: usize, k: usize, n: usize, mean: f64, cv: f64| {
            let stats =
                RowStats { min: 0, max: (mean * 2.0) as usize, mean, cv, empty_rows: 0, columns_per_entry: None };
            SpmmConfig::select_with_stats(m, k, n, &stats, DType::F32).kernel_name()
        };
        let (two_rows, k8) = ("spmm_f32_s1d4_y2k16x128w16_u4_nopred_lb16", "spmm_f32_s1d4_y4k8x32w8_u4_nopred_lb32");
        // Step 55: rows of 3-10 in 16384-65536 rows over k <= 8192, n = 256-1024 (multiples of 128), cv <= 0.5.
        for (m, k, n) in [(16384, 512, 1024), (32768, 2048, 256), (65536, 8192, 512), (65536, 512, 768)] {
            assert_eq!(pick(m, k, n, 8.0, 0.0), two_rows, "{m} x {k}, n = {n}");
        }
        assert_eq!(pick(40000, 4000, 384, 3.0, 0.5), "spmm_f32_s1d4_y2k16x128w16_u4_nopred_c8_lb16"); // step 60
        assert_eq!(pick(40000, 4000, 384, 10.0, 0.0), two_rows);
        // Step 66: rows of up to 12.5 where k <= 1024 (the scan's uniform rows of 12 average 12.0003).
        for (m, k, n) in [(16384, 512, 1024), (32768, 1024, 512), (32768, 512, 256)] {
            assert_eq!(pick(m, k, n, 12.0003, 0.0), two_rows, "{m} x {k}, n = {n}");
        }
        assert_eq!(pick(32768, 1024, 512, 12.5, 0.0), two_rows);
        assert_eq!(pick(32768, 1025, 512, 12.0, 0.0), k8);
        assert_eq!(pick(32768, 1024, 512, 12.6, 0.0), k8);
        // Either side: rows of 12 or 2.9, uneven rows, k past 8192, too many rows, n = 128 or past 1024.
        assert_eq!(pick(32768, 2048, 512, 12.0, 0.0), k8);
        assert_ne!(pick(40000, 4000, 384, 2.9, 0.0), two_rows);
        assert_ne!(pick(40000, 4000, 384, 8.0, 0.51), two_rows);
        assert_eq!(pick(32768, 8193, 512, 8.0, 0.0), k8);
        assert_eq!(pick(65537, 2048, 512, 8.0, 0.0), k8);
        assert_eq!(pick(65536, 2048, 1152, 8.0, 0.0), k8);
        assert_eq!(pick(65536, 2048, 128, 8.0, 0.0), k8);
        // n = 64 keeps two rows of 8 threads over 64 columns for rows of 100 or more (step 55 measured the k = 8 tile
        // on rows of 110-150 in 9000-20000 rows: 0.80x-1.12x).
        assert_eq!(pick(16384, 1024, 64, 120.0, 0.0), "spmm_f32_s2d4_y4k16x64w8_u4_nopred_lb8");
    }

    #[test]
    fn half_long_rows_take_the_wide_tile_from_8192_rows_at_n_512() {
        // Power-law rows long for their mean (longest 349, mean 4): 256 columns from 8192 rows at n >= 512 (step 55),
        // from 16384 at n = 256 (step 50).
        let stats = RowStats { min: 0, max: 349, mean: 4.0, cv: 1.44, empty_rows: 0, columns_per_entry: None };
        for dtype in [DType::F16, DType::Bf16] {
            let wide = Some(super::super::SpmmKernel::Tiled(tile(dtype, 1, 8, 2, 16, 256, 16, false)));
            let k8 = Some(super::super::SpmmKernel::Tiled(tile(dtype, 1, 8, 4, 8, 64, 8, false)));
            assert_eq!(long_rows_half(8192, 512, &stats, dtype, true), wide);
            assert_eq!(long_rows_half(8192, 1024, &stats, dtype, true), wide);
            assert_eq!(long_rows_half(8192, 256, &stats, dtype, true), k8);
            assert_eq!(long_rows_half(8191, 512, &stats, dtype, true), k8);
            assert_eq!(long_rows_half(16384, 256, &stats, dtype, true), wide);
            // C of at most 2^19 elements: the windows, at any n up to 1024.
            let windows = |m, n| {
                matches!(long_rows_half(m, n, &stats, dtype, true), Some(super::super::SpmmKernel::TensorCore(_)))
            };
            assert!(windows(1024, 512) && windows(2048, 256) && windows(512, 1024));
            assert!(!windows(1024, 1024) && !windows(4096, 256) && !windows(256, 1032));
        }
    }

    #[test]
    fn skewed_half_rows_past_3072_leave_the_windows_for_tiles() {
        // Step 56: skewed rows (longest past 1024 and eight times the mean) whose longest row holds more than 3072
        // entries take no 16-row windows; at n <= 32 a warp per row up to 2^18 entries, the k = 8 tile past that.
        let skewed =
            |max: usize, mean: f64| RowStats { min: 0, max, mean, cv: 2.5, empty_rows: 0, columns_per_entry: None };
        for dtype in [DType::F16, DType::Bf16] {
            assert!(too_skewed_for_windows(&skewed(3073, 40.0), dtype));
            assert!(!too_skewed_for_windows(&skewed(3072, 40.0), dtype));
            assert!(!too_skewed_for_windows(&skewed(3073, 400.0), dtype), "not skewed: 3073 < 8 * 400");
            let warp_per_row = tile(dtype, 1, 1, 1, 32, 32, 32, true);
            let k8 = k8_tile(dtype, 4, true);
            for n in [8, 16, 32] {
                // 4096 rows of 64: 2^18 entries exactly; of 64.1: past it.
                assert_eq!(SpmmConfig::select_with_stats(4096, 16384, n, &skewed(5000, 64.0), dtype), warp_per_row);
                assert_eq!(SpmmConfig::select_with_stats(4096, 16384, n, &skewed(5000, 64.1), dtype), k8);
            }
            // n = 64: the skewed rows' 64-column k = 8 tile, as before.
            let c = SpmmConfig::select_with_stats(4096, 16384, 64, &skewed(5000, 64.0), dtype);
            assert_eq!(c, tile(dtype, 1, 8, 4, 8, 64, 8, false));
        }
        assert!(!too_skewed_for_windows(&skewed(30000, 40.0), DType::F32), "f16 and bf16 only");
    }

    #[test]
    fn small_b_takes_64_columns_per_window_warp_at_n_32() {
        // Step 77: tiles_n 8 at n = 32 over k <= 600 in 2048 rows or more of 32 entries or more on average.
        let rows = |mean: f64| RowStats { min: 0, max: 300, mean, cv: 0.8, empty_rows: 0, columns_per_entry: None };
        assert_eq!(small_b_window_tiles_n(4991, 443, 32, &rows(95.4), 4), 8, "power-law 4991 x 443");
        assert_eq!(small_b_window_tiles_n(2048, 600, 32, &rows(32.0), 4), 8, "at every bound");
        assert_eq!(small_b_window_tiles_n(2048, 601, 32, &rows(32.0), 4), 4, "k past 600");
        assert_eq!(small_b_window_tiles_n(2047, 600, 32, &rows(32.0), 4), 4, "fewer rows");
        assert_eq!(small_b_window_tiles_n(2048, 600, 32, &rows(31.9), 4), 4, "shorter rows");
        assert_eq!(small_b_window_tiles_n(4991, 443, 24, &rows(95.4), 4), 4, "n = 24");
        assert_eq!(small_b_window_tiles_n(4991, 443, 64, &rows(95.4), 4), 4, "n = 64 keeps its choice");
        assert_eq!(small_b_window_tiles_n(4991, 443, 64, &rows(95.4), 8), 8);
    }

    #[test]
    fn rows_long_for_their_mean_take_32_columns_per_window_warp() {
        // Step 56: 32 columns per warp of a 16-row window (tiles_n 4) at n = 33-128 where the 64-column warps
        // would number at most 128, or 256 where the longest row holds 1024 entries or more.
        let long = RowStats { min: 0, max: 700, mean: 12.0, cv: 1.4, empty_rows: 0, columns_per_entry: None };
        let skewed = RowStats { min: 0, max: 2000, mean: 40.0, cv: 1.5, empty_rows: 0, columns_per_entry: None };
        let even = RowStats { min: 0, max: 60, mean: 40.0, cv: 0.3, empty_rows: 0, columns_per_entry: None };
        assert_eq!(long_rows_window_tiles_n(2048, 64, &long, 8), 4, "128 warps");
        assert_eq!(long_rows_window_tiles_n(2049, 64, &long, 8), 8);
        assert_eq!(long_rows_window_tiles_n(1024, 128, &long, 8), 4);
        assert_eq!(long_rows_window_tiles_n(1025, 128, &long, 8), 8);
        assert_eq!(long_rows_window_tiles_n(4096, 64, &skewed, 8), 4, "256 warps, longest 2000");
        assert_eq!(long_rows_window_tiles_n(4097, 64, &skewed, 8), 8);
        assert_eq!(long_rows_window_tiles_n(2048, 128, &skewed, 8), 4);
        assert_eq!(long_rows_window_tiles_n(4096, 64, &RowStats { max: 1023, ..skewed }, 8), 8);
        assert_eq!(long_rows_window_tiles_n(1024, 64, &even, 8), 8, "rows not long for their mean");
        assert_eq!(long_rows_window_tiles_n(512, 136, &long, 8), 8, "n past 128");
        assert_eq!(long_rows_window_tiles_n(512, 32, &long, 4), 4);
        // long_rows_half's windows take it: 1024 rows at n = 64.
        let windows = |m, n| match long_rows_half(m, n, &long, DType::F16, true) {
            Some(super::super::SpmmKernel::TensorCore(c)) => c.tiles_n,
            other => panic!("{m} x n = {n}: {other:?}"),
        };
        assert_eq!((windows(1024, 64), windows(4096, 64), windows(1024, 128), windows(2048, 128)), (4, 8, 4, 8));
    }

    #[test]
    fn select_is_valid_tabled_and_aligned_for_every_n() {
        // Up to n = 1100: the f32 choice at n rounded up to 1152 must have its predicated twin too.
        for (m, per_row) in
            [(1000usize, 1usize), (1000, 50), (5000, 300), (4096, 2000), (384, 154), (384, 31), (70000, 3)]
        {
            for (n, cv) in (1..=1100usize).flat_map(|n| [(n, 0.0), (n, 3.0)]) {
                // cv 3 with a 5000-entry row: skewed enough to split for the shorter means.
                let max = if cv > 0.0 { 5000 } else { per_row };
                let stats = RowStats { min: 0, max, mean: per_row as f64, cv, empty_rows: 0, columns_per_entry: None };
                for dtype in [DType::F32, DType::F16, DType::Bf16] {
                    let c = SpmmConfig::select_with_stats(m, 1000, n, &stats, dtype);
                    c.validate().unwrap_or_else(|e| panic!("n={n}: {c} invalid: {e}"));
                    assert!(spmm_table().iter().any(|t| t.same_kernel(&c)), "n={n}: {c} is not in variants.txt");
                    assert_eq!(n % c.dense_vector_width as usize, 0, "n={n}: {c}");
                    if !c.predicate_loads {
                        assert_eq!(n % c.block_items_x as usize, 0, "n={n}: {c} without predicates");
                    }
                }
            }
        }
    }

    #[test]
    fn unaligned_n_takes_the_choice_at_the_rounded_width() {
        // Multiples of 4 past 16 and not of 32: up to 128 past n = 64, else up to 32; f32 only.
        for (n, width) in [(20, Some(32)), (36, Some(64)), (60, Some(64)), (68, Some(128)), (100, Some(128))] {
            assert_eq!(rounded_width(n, DType::F32), width, "n = {n}");
        }
        assert_eq!(rounded_width(300, DType::F32), Some(384));
        assert_eq!(rounded_width(1000, DType::F32), Some(1024));
        // Multiples of 32 past 128 too; not 32, 64 and 96, whose own rules were measured (NOTES.md, "SpMM step 30").
        assert_eq!(rounded_width(160, DType::F32), Some(256));
        assert_eq!(rounded_width(448, DType::F32), Some(512));
        for n in [16, 18, 32, 64, 96, 101, 128, 302, 512] {
            assert_eq!(rounded_width(n, DType::F32), None, "n = {n}");
        }
        assert_eq!(rounded_width(100, DType::F16), None);
        assert_eq!(rounded_width(100, DType::Bf16), None);
        // The pruned 384 x 1536 at 98% (mean 30.7, longest 300): the four-way row split of n = 128 at n = 100,
        // guarded; that of 32 at n = 20; the two-way split of n = 256 at n = 200.
        let pruned = RowStats { min: 4, max: 300, mean: 30.7, cv: 0.9, empty_rows: 0, columns_per_entry: None };
        let sel = |m: usize, n: usize, stats: &RowStats| SpmmConfig::select_with_stats(m, 1536, n, stats, DType::F32);
        let k8 = SpmmConfig { predicate_loads: true, ..split_row_k8_tile(DType::F32) };
        assert_eq!(sel(384, 100, &pruned), k8);
        assert_eq!(sel(384, 20, &pruned), k8);
        assert_eq!(sel(384, 200, &pruned), SpmmConfig { predicate_loads: true, ..split_row_warp_tile(DType::F32) });
        assert_eq!(sel(384, 128, &pruned), split_row_k8_tile(DType::F32));
        // A warp per row over 128 columns at n = 500 (its choice at 512), guarded.
        assert_eq!(sel(1536, 500, &pruned).kernel_name(), "spmm_f32_s1d4_y1k32x128w32_u4_pred");
        // The k = 8 tile held to 64 registers at the rounded width runs unbounded where n needs the guards
        // (copter2 at n = 36), as it is where it does not (n = 160: the choice at 256, 32 columns a tile).
        let copter2 = RowStats { min: 1, max: 40, mean: 12.7, cv: 0.33, empty_rows: 0, columns_per_entry: None };
        assert_eq!(
            SpmmConfig::select_with_stats(55476, 55476, 64, &copter2, DType::F32).kernel_name(),
            "spmm_f32_s1d4_y4k8x32w8_u4_nopred_lb32"
        );
        assert_eq!(
            SpmmConfig::select_with_stats(55476, 55476, 36, &copter2, DType::F32).kernel_name(),
            "spmm_f32_s1d4_y4k8x32w8_u4_pred"
        );
        assert_eq!(
            SpmmConfig::select_with_stats(55476, 55476, 160, &copter2, DType::F32).kernel_name(),
            "spmm_f32_s1d4_y4k8x32w8_u4_nopred_lb32"
        );
        // The two-row tile only where its last column tile is at least nine tenths full: 4096 rows of 410 at n =
        // 500 (512) take it (held to 128 registers at 512 since step 43), at n = 100 (128) and 300 (384) the
        // choice at n itself.
        let uniform = RowStats { min: 350, max: 470, mean: 410.0, cv: 0.05, empty_rows: 0, columns_per_entry: None };
        let pick = |n: usize| SpmmConfig::select_with_stats(4096, 4096, n, &uniform, DType::F32).kernel_name();
        assert_eq!(pick(512), "spmm_f32_s1d4_y2k16x128w16_u4_nopred_lb16");
        assert_eq!(pick(500), "spmm_f32_s1d4_y2k16x128w16_u4_pred_lb16");
        assert_eq!(pick(1024), "spmm_f32_s1d4_y2k16x128w16_u4_nopred");
        assert_eq!(pick(1000), "spmm_f32_s1d4_y2k16x128w16_u4_pred");
        assert_eq!(pick(100), "spmm_f32_s2d4_y4k16x32w8_u4_pred");
        assert_eq!(pick(300), "spmm_f32_s2d4_y4k16x32w8_u4_pred");
        assert!(two_rows_waste_columns(&two_row_tile(DType::F32), 300));
        assert!(!two_rows_waste_columns(&two_row_tile(DType::F32), 500));
        assert!(!two_rows_waste_columns(&split_row_warp_tile(DType::F32), 300));
    }

    #[test]
    fn select_follows_the_documented_branches() {
        // (m, n, nnz) -> kernel
        let s = |m: usize, n: usize, nnz: usize| SpmmConfig::select(m, 4096, n, nnz, DType::F32).kernel_name();
        let long = 4096 * 2048; // 2048 per row
        assert_eq!(s(4096, 8, long), "spmm_f32_s4d1_y4k32x8w8_u4_nopred");
        assert_eq!(s(4096, 5, long), "spmm_f32_s4d1_y4k32x8w8_u4_pred");
        assert_eq!(s(4096, 16, long), "spmm_f32_s4d2_y4k32x16w8_u4_nopred");
        assert_eq!(s(4096, 128, long), "spmm_f32_s4d4_y4k32x64w8_u4_nopred_lb8");
        // n = 100 takes the choice at 128, guarded in n.
        assert_eq!(s(4096, 100, long), "spmm_f32_s4d4_y4k32x64w8_u4_pred_lb8");
        assert_eq!(s(4096, 34, long), "spmm_f32_s2d2_y2k32x32w16_u4_pred");
        assert_eq!(s(4096, 33, long), "spmm_f32_s1d1_y1k32x32w32_u4_pred");
        // Short rows in few rows: two rows per block where C has 2^20 elements, else a warp per row.
        assert_eq!(s(1536, 1024, 1536 * 38), "spmm_f32_s1d4_y2k16x128w16_u4_nopred_lb16");
        assert_eq!(s(1536, 1024, 11_796), "spmm_f32_s1d4_y2k16x128w16_u4_nopred_lb16");
        assert_eq!(s(384, 1024, 384 * 38), "spmm_f32_s1d4_y1k32x128w32_u4_nopred");
        // From 512 rows, two rows per block wherever the blocks fill the GPU: 2^20 elements of C, or 2^18 for
        // even rows, and a last wave of 2112 blocks at least three quarters full; not B past 3072 x 4096, short
        // rows (mean <= 64) past 2048 rows, or rows past 400 entries.
        let pick = |m: usize, k: usize, n: usize, mean: f64, cv: f64| {
            let stats = RowStats { min: 0, max: 0, mean, cv, empty_rows: 0, columns_per_entry: None };
            SpmmConfig::select_with_stats(m, k, n, &stats, DType::F32).kernel_name()
        };
        let two_rows = "spmm_f32_s1d4_y2k16x128w16_u4_nopred_lb16";
        assert_eq!(pick(1024, 1536, 2048, 154.0, 0.08), two_rows);
        assert_eq!(pick(2048, 3072, 2048, 307.0, 0.05), two_rows);
        assert_eq!(pick(4096, 3072, 4096, 307.0, 0.05), two_rows);
        assert_eq!(pick(4096, 3072, 1024, 77.0, 0.1), two_rows);
        assert_eq!(pick(512, 768, 512, 77.0, 0.1), two_rows);
        assert_eq!(pick(2048, 768, 256, 15.4, 0.25), two_rows);
        assert_eq!(pick(1536, 384, 256, 115.0, 0.34), "spmm_f32_s1d4_y1k32x128w32_u4_nopred");
        assert_eq!(pick(1280, 1024, 512, 205.0, 0.06), "spmm_f32_s1d4_y1k32x128w32_u4_nopred", "1.2 waves");
        assert_eq!(pick(1280, 2048, 2048, 102.0, 0.09), two_rows, "4.8 waves");
        assert_eq!(pick(511, 768, 1024, 77.0, 0.05), "spmm_f32_s1d4_y1k32x128w32_u4_nopred");
        assert_eq!(pick(512, 768, 256, 77.0, 0.1), "spmm_f32_s1d4_y1k32x128w32_u4_nopred");
        assert_eq!(pick(4096, 3073, 4096, 307.0, 0.05), "spmm_f32_s1d4_y2k16x128w16_u4_nopred");
        assert_eq!(pick(4096, 3072, 2048, 61.0, 0.1), "spmm_f32_s1d4_y4k8x32w8_u4_nopred_lb32");
        assert_eq!(pick(2048, 3072, 2048, 61.0, 0.1), two_rows);
        // n = 2000 takes the choice at 2048, guarded in n (its last column tile 80 of 128 columns full).
        assert_eq!(pick(1024, 1536, 2000, 154.0, 0.08), "spmm_f32_s1d4_y2k16x128w16_u4_pred_lb16");
        assert_eq!(pick(2048, 1536, 2048, 461.0, 0.04), "spmm_f32_s1d4_y1k32x128w32_u4_nopred");
        // Even rows past 400 entries over k >= 4096 in 1024-2048 rows, up to 1100 entries.
        assert_eq!(pick(2048, 8192, 1536, 819.0, 0.0), two_rows);
        assert_eq!(pick(2048, 8192, 512, 1100.0, 0.05), two_rows);
        assert_eq!(pick(1024, 4096, 256, 410.0, 0.09), two_rows);
        assert_ne!(pick(2048, 4095, 1024, 410.0, 0.0), two_rows);
        assert_ne!(pick(2048, 8192, 1024, 1101.0, 0.0), two_rows);
        assert_ne!(pick(2048, 6144, 1024, 614.0, 0.1), two_rows);
        assert_ne!(pick(1023, 8192, 1024, 491.0, 0.0), two_rows);
        assert_ne!(pick(2049, 8192, 1024, 491.0, 0.0), two_rows);
        // Rows of 400-820 entries in 2560-8192 rows at n = 512 (step 43), not at other n, more rows or longer
        // rows; the B bound still holds (the wave bound never bites there: 5120-16384 blocks fill their last
        // wave).
        let unbounded = "spmm_f32_s1d4_y2k16x128w16_u4_nopred";
        assert_eq!(pick(4096, 8192, 512, 492.0, 0.04), two_rows);
        assert_eq!(pick(2560, 8192, 512, 573.0, 0.04), two_rows);
        assert_eq!(pick(8192, 4096, 512, 820.0, 0.05), two_rows);
        assert_eq!(pick(4096, 8192, 384, 492.0, 0.04), unbounded);
        assert_eq!(pick(4096, 4096, 640, 451.0, 0.05), unbounded);
        assert_eq!(pick(4096, 4096, 256, 451.0, 0.05), two_rows, "the n <= 256 band of 64-600 entries");
        assert_eq!(pick(4096, 4096, 512, 821.0, 0.05), unbounded);
        assert_eq!(pick(2559, 8192, 512, 573.0, 0.04), unbounded);
        assert_eq!(pick(8193, 4096, 512, 451.0, 0.05), unbounded);
        assert_eq!(pick(4096, 32769, 512, 451.0, 0.05), unbounded, "B past LARGEST_SWEPT_B");
        // Sizes past any GPU's do not overflow the block counts (a panic in debug builds).
        assert_eq!(pick(usize::MAX / 2, 1, 128, 100.0, 0.1), two_rows);
        // Long uneven rows in 384-1024 rows, n >= 1024: eight warps on one 64-column tile, two blocks per SM,
        // within the sweep's range (cv 0.85-2.1, mean >= 70, B at most 3072 x 4096), outside the sixteen-row
        // block's (m <= 768, n <= 2048, mean >= 128).
        let eight_rows = "spmm_f32_s1d2_y8k32x64w32_u4_nopred_lb2";
        assert_eq!(pick(1024, 3072, 2048, 307.0, 1.22), eight_rows);
        assert_eq!(pick(1024, 1536, 1024, 77.0, 1.62), eight_rows);
        assert_eq!(pick(384, 1536, 4096, 154.0, 0.9), eight_rows);
        assert_eq!(pick(384, 1536, 2048, 77.0, 2.02), eight_rows);
        assert_eq!(pick(1024, 3072, 4096, 70.0, 2.1), eight_rows);
        assert_eq!(pick(384, 3072, 1024, 307.0, 0.9), "spmm_f32_s1d2_y16k32x64w32_u4_nopred");
        // In the sixteen-row block's range, rows long enough to split (max > 1024 and 8 x mean) go to the eight
        // rows too: 768 x 3072 at 10%, cv 1.4, n = 2048, 158 us (sixteen rows: 167; the split: 225).
        let split_long = RowStats { min: 0, max: 3072, mean: 307.0, cv: 1.41, empty_rows: 0, columns_per_entry: None };
        assert_eq!(SpmmConfig::select_with_stats(768, 3072, 2048, &split_long, DType::F32).kernel_name(), eight_rows);
        // Unsplit, those rows now go to the four-row tile (k >= 2048, below).
        assert_eq!(pick(768, 3072, 2048, 307.0, 1.41), "spmm_f32_s2d4_y4k16x64w8_u4_nopred_lb8");
        assert_eq!(pick(768, 1536, 2048, 154.0, 1.6), "spmm_f32_s1d2_y16k32x64w32_u4_nopred");
        assert_ne!(pick(768, 3072, 2048, 307.0, 0.84), eight_rows);
        assert_ne!(pick(768, 3072, 2048, 307.0, 2.11), eight_rows);
        assert_ne!(pick(383, 3072, 4096, 307.0, 1.41), eight_rows);
        assert_ne!(pick(1025, 3072, 2048, 307.0, 1.41), eight_rows);
        assert_ne!(pick(768, 3072, 2048, 69.0, 1.41), eight_rows);
        assert_ne!(pick(768, 3072, 960, 307.0, 1.41), eight_rows);
        assert_ne!(pick(768, 3072, 1056, 307.0, 1.41), eight_rows);
        assert_ne!(pick(768, 3073, 4096, 307.0, 1.41), eight_rows);
        // Unless the longest row lies 9 or more standard deviations above the mean (`rare_long_rows`, power-law
        // rows) at n = 1024-2048: two rows of 16 threads over 32 columns. 910 x 3251, mean 146, cv 1.03 (longest 2850,
        // 18 out: 83.9 -> 55.4 us at n = 1024); a longest row of 1500 is 9.004 out, of 1499 8.997.
        let rare = |n: usize, max: usize| {
            let stats = RowStats { min: 73, max, mean: 146.0, cv: 1.03, empty_rows: 0, columns_per_entry: None };
            SpmmConfig::select_with_stats(910, 3251, n, &stats, DType::F32).kernel_name()
        };
        let two_rows_32 = "spmm_f32_s1d2_y2k32x32w16_u4_pred";
        for n in [1024, 1536, 2048] {
            assert_eq!(rare(n, 2850), two_rows_32, "n = {n}");
            assert_eq!(rare(n, 1500), two_rows_32, "n = {n}");
            assert_eq!(rare(n, 1499), eight_rows, "n = {n}");
        }
        assert_eq!(rare(2112, 2850), eight_rows, "past n = 2048");
        assert_eq!(rare(3072, 2850), eight_rows, "past n = 2048");
        // n = 1000 takes the choice at 1024, guarded as it is.
        assert_eq!(rare(1000, 2850), two_rows_32);
        // Past 1024 rows, the four-row tile's range: the k = 16 tile over 32 columns where such a row also takes the
        // four-row tile 1.3 times a resident subwarp's share or more (`rare_long_rows_four_rows`), at n = 1024-1536.
        // 1100 x 3629, rows of 146, cv 1.16: a longest row of 1671 is 9.005 out (1670: 8.999), and 2.5 times the
        // share at n = 1024; in 2197 rows a longest row of 1745 is 1.305 times it (1744: 1.294).
        let four = |m: usize, n: usize, max: usize| {
            let stats = RowStats { min: 73, max, mean: 146.0, cv: 1.16, empty_rows: 0, columns_per_entry: None };
            SpmmConfig::select_with_stats(m, 3629, n, &stats, DType::F32).kernel_name()
        };
        let (four_rows, k16) = ("spmm_f32_s2d4_y4k16x64w8_u4_nopred_lb8", "spmm_f32_s2d4_y4k16x32w8_u4_nopred");
        for n in [1024, 1536] {
            assert_eq!(four(1100, n, 1671), k16, "n = {n}");
            assert_eq!(four(1100, n, 1670), four_rows, "n = {n}");
        }
        assert_eq!(four(1100, 1600, 1671), four_rows, "past n = 1536");
        assert_eq!(four(2197, 1024, 1745), k16);
        assert_eq!(four(2197, 1024, 1744), four_rows);
        assert_eq!(longest_row_sigmas(&RowStats { max: 5, mean: 5.0, cv: 0.0, ..Default::default() }), 0.0);
        assert_eq!(longest_row_sigmas(&RowStats::default()), 0.0);
        // n = 768: the sixteen-row block for uneven rows in 384-640 rows (cv >= 0.4, mean >= 100 over k >= 1536;
        // cv >= 0.75, mean >= 70 over k 1024-1535 in at most 512 rows); a warp per row otherwise.
        let (sixteen, one_warp) = ("spmm_f32_s1d2_y16k32x64w32_u4_nopred", "spmm_f32_s1d4_y1k32x128w32_u4_nopred");
        assert_eq!(pick(384, 1536, 768, 154.0, 0.9), sixteen);
        assert_eq!(pick(512, 1024, 768, 70.0, 0.75), sixteen);
        assert_eq!(pick(512, 1535, 768, 70.0, 0.75), sixteen);
        assert_eq!(pick(576, 2560, 768, 205.0, 0.93), sixteen);
        assert_eq!(pick(513, 1280, 768, 102.0, 0.98), one_warp);
        assert_eq!(pick(512, 1280, 768, 102.0, 0.74), one_warp);
        assert_eq!(pick(512, 1536, 768, 100.0, 0.5), sixteen);
        assert_eq!(pick(384, 2048, 768, 287.0, 2.0), sixteen);
        assert_eq!(pick(512, 1024, 768, 143.0, 0.5), one_warp);
        assert_eq!(pick(512, 1536, 768, 99.0, 0.5), one_warp);
        assert_eq!(pick(384, 1024, 768, 69.0, 0.9), one_warp);
        assert_eq!(pick(383, 1536, 768, 154.0, 0.9), one_warp);
        assert_eq!(pick(641, 1536, 768, 154.0, 1.0), one_warp);
        assert_eq!(pick(384, 1023, 768, 154.0, 0.9), one_warp);
        // n = 704 takes the choice at 768 (`rounded_width`).
        assert_eq!(pick(384, 1536, 704, 154.0, 0.9), sixteen);
        assert_ne!(pick(384, 1536, 832, 154.0, 0.9), sixteen);
        assert_ne!(pick(384, 1536, 768, 154.0, 2.01), sixteen);
        // Long rows of cv 0.3-0.85 in 384-1024 rows over n = 3072-4096 (mean >= 150, B at most 3072 x 4096): the
        // sixteen-row block; uneven (cv >= 0.85) rows keep the eight-row tile, even ones the choices below.
        let sixteen_rows = "spmm_f32_s1d2_y16k32x64w32_u4_nopred";
        assert_eq!(pick(768, 3072, 4096, 307.0, 0.34), sixteen_rows);
        assert_eq!(pick(384, 1536, 4096, 150.0, 0.3), sixteen_rows);
        assert_eq!(pick(1024, 3072, 4096, 307.0, 0.84), sixteen_rows);
        assert_eq!(pick(512, 2048, 3584, 164.0, 0.47), sixteen_rows);
        assert_eq!(pick(768, 3072, 4096, 307.0, 0.85), eight_rows);
        assert_ne!(pick(768, 3072, 4096, 307.0, 0.29), sixteen_rows);
        assert_ne!(pick(768, 3072, 4096, 149.0, 0.5), sixteen_rows);
        assert_ne!(pick(768, 3072, 2944, 307.0, 0.5), sixteen_rows);
        assert_ne!(pick(768, 3072, 4160, 307.0, 0.5), sixteen_rows);
        assert_ne!(pick(768, 3072, 3104, 307.0, 0.5), sixteen_rows);
        assert_ne!(pick(383, 3072, 4096, 307.0, 0.5), sixteen_rows);
        assert_ne!(pick(1025, 3072, 3072, 307.0, 0.5), sixteen_rows);
        assert_ne!(pick(768, 3073, 4096, 307.0, 0.5), sixteen_rows);
        // Long uneven rows over k >= 2048 in 640-4096 rows, n 1024-3072 (mean >= 140, cv 0.5-2.0, B at most 3072
        // x 4096): four rows of 8 threads on one 64-column tile, outside the two ranges above.
        let four_rows = "spmm_f32_s2d4_y4k16x64w8_u4_nopred_lb8";
        assert_eq!(pick(2048, 4096, 1024, 205.0, 1.94), four_rows);
        assert_eq!(pick(1280, 2048, 1024, 143.0, 0.74), four_rows);
        assert_eq!(pick(4096, 4096, 3072, 410.0, 1.2), four_rows);
        assert_eq!(pick(1280, 2048, 1536, 246.0, 0.58), four_rows);
        assert_eq!(pick(3584, 3072, 2048, 184.0, 2.0), four_rows);
        assert_eq!(pick(3072, 3072, 2048, 184.0, 0.5), four_rows);
        assert_eq!(pick(3328, 2048, 2048, 184.0, 0.85), four_rows);
        assert_ne!(pick(3328, 2048, 2048, 184.0, 0.84), four_rows, "less uneven rows past 3072 rows");
        assert_eq!(pick(1024, 2560, 2048, 256.0, 1.0), eight_rows, "the eight-row tile's range first");
        // The thirty-two-row tile's range comes before both (and before the sixteen-row block's).
        let thirty_two = "spmm_f32_s1d4_y32k16x64w16_u4_nopred";
        assert_eq!(pick(1024, 2560, 2048, 179.0, 0.85), thirty_two);
        assert_eq!(pick(768, 3072, 3072, 184.0, 0.62), thirty_two);
        assert_eq!(pick(640, 2048, 1024, 143.0, 0.74), thirty_two);
        assert_ne!(pick(639, 2048, 1024, 143.0, 0.74), four_rows);
        assert_ne!(pick(4097, 4096, 1024, 205.0, 1.2), four_rows);
        assert_ne!(pick(2048, 2047, 1024, 205.0, 1.2), four_rows);
        // n = 960 and 1056 take the choices at 1024 and 1152 (`rounded_width`), 1056 guarded.
        assert_eq!(pick(2048, 4096, 960, 205.0, 1.2), four_rows);
        assert_eq!(pick(2048, 4096, 1056, 205.0, 1.2), "spmm_f32_s2d4_y4k16x64w8_u4_pred_lb8");
        assert_ne!(pick(2048, 3072, 3136, 205.0, 1.2), four_rows);
        assert_ne!(pick(2048, 4097, 3072, 205.0, 1.2), four_rows);
        assert_ne!(pick(2048, 4096, 1024, 139.0, 1.2), four_rows);
        assert_ne!(pick(2048, 4096, 1024, 205.0, 0.49), four_rows);
        assert_ne!(pick(2048, 4096, 1024, 205.0, 2.01), four_rows);
        // 256-1024 rows over n = 768-3072: thirty-two rows of 16 threads on one 64-column tile. Rows of cv 0.1-0.5
        // in 384-1024 rows from n = 768 (the pruned 384 x 1536 at 90%), cv below 1.0 from 640 rows, below 1.5 from
        // n = 1536 with rows shorter than 256, and any cv below 1.2 in 256-640 rows from n = 2048.
        assert_eq!(pick(384, 1536, 1024, 154.0, 0.21), thirty_two);
        assert_eq!(pick(384, 1536, 768, 154.0, 0.2), thirty_two);
        assert_eq!(pick(1024, 3072, 3072, 614.0, 0.49), thirty_two);
        assert_eq!(pick(512, 1536, 768, 100.0, 0.4), thirty_two);
        assert_eq!(pick(640, 1536, 768, 154.0, 0.99), thirty_two);
        assert_eq!(pick(384, 2048, 1536, 255.0, 1.49), thirty_two);
        assert_eq!(pick(256, 1024, 2048, 51.0, 0.0), thirty_two);
        assert_eq!(pick(640, 3072, 3072, 614.0, 1.19), thirty_two);
        assert_eq!(pick(384, 1536, 1024, 30.0, 0.3), thirty_two);
        assert_ne!(pick(384, 1536, 1024, 154.0, 0.09), thirty_two, "even rows below 640 rows need n >= 2048");
        assert_ne!(pick(384, 1536, 1024, 154.0, 0.5), thirty_two, "uneven rows in 384-639 rows need n >= 1536");
        assert_ne!(pick(639, 1536, 1024, 154.0, 0.5), thirty_two);
        assert_ne!(pick(640, 1536, 1024, 154.0, 1.0), thirty_two);
        assert_ne!(pick(512, 2048, 1536, 256.0, 0.9), thirty_two);
        assert_ne!(pick(512, 2048, 1536, 255.0, 1.5), thirty_two);
        assert_ne!(pick(641, 1536, 2048, 154.0, 0.09), thirty_two, "even rows past 640 rows");
        assert_ne!(pick(512, 1536, 2048, 256.0, 1.2), thirty_two);
        assert_ne!(pick(255, 1536, 2048, 154.0, 0.5), thirty_two);
        assert_ne!(pick(383, 1536, 1536, 154.0, 0.3), thirty_two);
        assert_ne!(pick(1025, 1536, 1024, 154.0, 0.3), thirty_two);
        assert_ne!(pick(512, 1536, 3136, 154.0, 0.3), thirty_two);
        // n = 704 and 1056 take the choices at 768 and 1152 (`rounded_width`), 1056 guarded.
        assert_eq!(pick(512, 1536, 704, 154.0, 0.3), thirty_two);
        assert_eq!(pick(512, 1536, 1056, 154.0, 0.3), "spmm_f32_s1d4_y32k16x64w16_u4_pred");
        assert_ne!(pick(512, 1536, 1024, 29.0, 0.3), thirty_two);
        assert_ne!(pick(512, 3073, 3072, 300.0, 0.3), thirty_two, "k past the sweep's");
        assert_ne!(pick(512, 1023, 1024, 150.0, 0.3), thirty_two, "k below the sweep's");
        let split_long = RowStats { min: 0, max: 2000, mean: 154.0, cv: 0.4, empty_rows: 0, columns_per_entry: None };
        assert_ne!(SpmmConfig::select_with_stats(512, 1536, 1024, &split_long, DType::F32).kernel_name(), thirty_two);
        let f16 =
            SpmmConfig::select_with_stats(384, 1536, 1024, &RowStats { max: 0, cv: 0.21, ..split_long }, DType::F16);
        assert!(!f16.kernel_name().contains("y32k16x64w16"), "f32 only: {f16}");
        // Few long rows over a wide B: sixteen warps on one 64-column tile (pruned 384 x 1536 at 90%).
        assert_eq!(s(384, 1024, 384 * 154), "spmm_f32_s1d2_y16k32x64w32_u4_nopred");
        assert_eq!(s(384, 2048, 384 * 154), "spmm_f32_s1d2_y16k32x64w32_u4_nopred");
        assert_eq!(s(768, 1024, 768 * 461), "spmm_f32_s1d2_y16k32x64w32_u4_nopred");
        assert_eq!(s(384, 4096, 384 * 154), "spmm_f32_s1d4_y1k32x128w32_u4_nopred");
        // (At n = 256 its 768 blocks of a warp per row are few enough for the row split, 14.6 -> 11.5 us, when the
        // longest row is known: `select` does not know it.)
        assert_eq!(s(384, 256, 384 * 154), "spmm_f32_s1d4_y1k32x128w32_u4_nopred");
        assert_eq!(s(384, 1024, 384 * 127), "spmm_f32_s1d4_y1k32x128w32_u4_nopred");
        assert_eq!(s(769, 1024, 769 * 154), "spmm_f32_s1d4_y1k32x128w32_u4_nopred"); // two rows: 1.46 waves
        assert_eq!(s(384, 1088, 384 * 154), "spmm_f32_s1d2_y16k32x64w32_u4_nopred");
        assert_eq!(s(384, 1028, 384 * 154), "spmm_f32_s1d2_y16k32x64w32_u4_pred"); // the choice at 1152, guarded
        assert_eq!(s(55476, 128, 704_476), "spmm_f32_s1d4_y4k8x32w8_u4_nopred_lb32"); // copter2
        assert_eq!(s(4096, 36, 4096 * 82), "spmm_f32_s1d4_y4k8x32w8_u4_pred");
        assert_eq!(s(4096, 4096, 4096 * 205), "spmm_f32_s1d4_y4k8x32w8_u4_nopred_lb32");
        // Many rows of 64-600 entries at n = 128 or 256: the 128-register wide tile.
        assert_eq!(s(4096, 128, 4096 * 410), "spmm_f32_s1d4_y2k16x128w16_u4_nopred_lb16");
        assert_eq!(s(4096, 256, 4096 * 410), "spmm_f32_s1d4_y2k16x128w16_u4_nopred_lb16");
        assert_eq!(s(8192, 128, 8192 * 205), "spmm_f32_s1d4_y2k16x128w16_u4_nopred_lb16");
        assert_eq!(s(4096, 128, 4096 * 82), "spmm_f32_s1d4_y2k16x128w16_u4_nopred_lb16");
        assert_eq!(s(4096, 128, 4096 * 63), "spmm_f32_s1d4_y4k8x32w8_u4_nopred_lb32");
        assert_eq!(s(4096, 64, 4096 * 410), "spmm_f32_s2d4_y4k16x64w8_u4_nopred_lb8");
        assert_eq!(s(4096, 192, 4096 * 410), "spmm_f32_s2d4_y4k16x64w8_u4_nopred_lb8");
        assert_eq!(s(4096, 4096, 4096 * 410), "spmm_f32_s1d4_y2k16x128w16_u4_nopred");
        assert_eq!(s(4096, 4096, 4096 * 2048), "spmm_f32_s4d4_y4k32x64w8_u4_nopred_lb8");
        assert_eq!(s(4096, 100, 4096 * 410), "spmm_f32_s2d4_y4k16x32w8_u4_pred");
        let skewed = RowStats { min: 1, max: 1383, mean: 10.0, cv: 3.6, empty_rows: 0, columns_per_entry: None }; // email-Enron
        let skewed_pick = |n| SpmmConfig::select_with_stats(36692, 36692, n, &skewed, DType::F32).kernel_name();
        assert_eq!(skewed_pick(128), "spmm_f32_s1d4_y4k8x32w8_u4_nopred");
        assert_eq!(skewed_pick(32), "spmm_f32_s1d4_y4k8x32w8_u4_nopred");
        // Uneven rows too short to split keep the unsplit choices.
        let uneven = RowStats { min: 1, max: 250, mean: 10.0, cv: 3.6, empty_rows: 0, columns_per_entry: None };
        let uneven_pick = |n| SpmmConfig::select_with_stats(36692, 36692, n, &uneven, DType::F32).kernel_name();
        assert_eq!(uneven_pick(128), "spmm_f32_s1d4_y1k32x128w32_u4_nopred");
        assert_eq!(uneven_pick(32), "spmm_f32_s4d4_y4k32x32w8_u4_nopred");
        // Longer ones, not skewed, take the tiles that split them ([`long_rows_tile`]).
        let long = RowStats { min: 1, max: 900, mean: 10.0, cv: 3.6, empty_rows: 0, columns_per_entry: None };
        let long_pick = |n| SpmmConfig::select_with_stats(36692, 36692, n, &long, DType::F32).kernel_name();
        assert_eq!(long_pick(1024), "spmm_f32_s1d4_y2k16x128w16_u4_nopred_lb16", "366920 entries > 350 x 900");
        assert_eq!(long_pick(128), "spmm_f32_s1d4_y2k16x128w16_u4_nopred", "rows of 10 at n = 128: split (step 66)");
        assert_eq!(long_pick(512), "spmm_f32_s1d4_y2k16x128w16_u4_nopred", "rows of 10 at n = 512: split (step 67)");
        assert_eq!(long_pick(32), "spmm_f32_s1d4_y4k8x32w8_u4_nopred");
    }

    #[test]
    fn half_selection_follows_its_sweep() {
        let enron = RowStats { min: 1, max: 1383, mean: 10.0, cv: 3.6, empty_rows: 0, columns_per_entry: None };
        let split_pick = |n| SpmmConfig::select_with_stats(36692, 36692, n, &enron, DType::Bf16).kernel_name();
        assert_eq!(split_pick(128), "spmm_bf16_s1d8_y4k8x64w8_u4_nopred");
        assert_eq!(split_pick(32), "spmm_bf16_s4d4_y4k32x32w8_u4_nopred");
        let s = |m: usize, n: usize, mean: f64, cv: f64| {
            let stats = RowStats { min: 0, max: 0, mean, cv, empty_rows: 0, columns_per_entry: None };
            SpmmConfig::select_with_stats(m, 4096, n, &stats, DType::F16).kernel_name()
        };
        assert_eq!(s(4096, 4096, 410.0, 0.05), "spmm_f16_s1d8_y4k8x64w8_u4_nopred");
        // Uniform 95% and copter2: the 64-register k = 8 tile at n = 256, and at n = 128 with many rows.
        assert_eq!(s(4096, 256, 205.0, 0.07), "spmm_f16_s1d8_y4k8x64w8_u4_nopred_lb32");
        assert_eq!(s(4096, 128, 205.0, 0.07), "spmm_f16_s1d8_y4k8x64w8_u4_nopred");
        assert_eq!(s(55476, 128, 12.7, 0.3), "spmm_f16_s1d8_y4k8x64w8_u4_nopred_lb32");
        // At n = 64 and 128 also where only the 64-register form fits one wave: 3697-4224 blocks of four rows by 64
        // columns (steps 43 and 46). At n = 64 the band's top is past 16384 rows, which take it anyway.
        assert_eq!(s(8192, 128, 123.0, 0.09), "spmm_f16_s1d8_y4k8x64w8_u4_nopred_lb32");
        assert_eq!(s(4 * 3697, 64, 123.0, 0.09), "spmm_f16_s1d8_y4k8x64w8_u4_nopred_lb32");
        assert_eq!(s(4 * 3697 - 4, 64, 123.0, 0.09), "spmm_f16_s1d8_y4k8x64w8_u4_nopred");
        assert_eq!(s(16383, 64, 82.0, 0.1), "spmm_f16_s1d8_y4k8x64w8_u4_nopred_lb32");
        assert_eq!(s(4 * 4224 + 1, 64, 82.0, 0.1), "spmm_f16_s1d8_y4k8x64w8_u4_nopred_lb32");
        assert_eq!(s(4 * 3697, 32, 123.0, 0.09), "spmm_f16_s1d4_y4k8x32w8_u4_pred", "n = 32: not the bounded tile");
        // n = 32 and 96: the k = 8 tile over 32 columns, not the 64-column one with idle lanes (step 52); n = 160
        // and 224 keep it.
        for (m, mean) in [(16384, 8.0), (65536, 120.0), (8192, 16.0), (32768, 600.0)] {
            assert_eq!(s(m, 32, mean, 0.1), "spmm_f16_s1d4_y4k8x32w8_u4_pred", "{m} rows of {mean}");
            let at_96 =
                if mean >= 16.0 { "spmm_f16_s1d4_y4k8x32w8_u4_pred" } else { "spmm_f16_s1d8_y4k8x64w8_u4_pred" };
            assert_eq!(s(m, 96, mean, 0.1), at_96, "{m} rows of {mean}");
            if mean <= 300.0 {
                assert_eq!(s(m, 160, mean, 0.1), "spmm_f16_s1d8_y4k8x64w8_u4_pred", "{m} rows of {mean}");
                assert_eq!(s(m, 224, mean, 0.1), "spmm_f16_s1d8_y4k8x64w8_u4_pred", "{m} rows of {mean}");
            }
        }
        assert_eq!(s(16384, 32, 601.0, 0.1), "spmm_f16_s2d8_y4k16x64w8_u4_pred", "past 600 per row: not measured");
        assert_eq!(s(2 * 3697, 192, 123.0, 0.09), "spmm_f16_s1d8_y4k8x64w8_u4_nopred_lb32", "n = 192: n > 128");
        assert_eq!(s(2 * 3697, 128, 123.0, 0.09), "spmm_f16_s1d8_y4k8x64w8_u4_nopred_lb32");
        assert_eq!(s(2 * 3697 - 2, 128, 123.0, 0.09), "spmm_f16_s1d8_y4k8x64w8_u4_nopred");
        assert_eq!(s(2 * 4224, 128, 123.0, 0.09), "spmm_f16_s1d8_y4k8x64w8_u4_nopred_lb32");
        assert_eq!(s(2 * 4224 + 1, 128, 123.0, 0.09), "spmm_f16_s1d8_y4k8x64w8_u4_nopred");
        assert_eq!(s(12288, 128, 82.0, 0.1), "spmm_f16_s1d8_y4k8x64w8_u4_nopred");
        assert_eq!(s(4096, 192, 205.0, 0.07), "spmm_f16_s1d8_y4k8x64w8_u4_nopred_lb32");
        assert_eq!(s(4096, 200, 205.0, 0.07), "spmm_f16_s1d8_y4k8x64w8_u4_pred");
        // Uniform 90%: n = 128 keeps k = 8, n = 256 takes k = 16 (f16) or the 256-wide tile (bf16).
        assert_eq!(s(4096, 128, 410.0, 0.05), "spmm_f16_s1d8_y4k8x64w8_u4_nopred");
        assert_eq!(s(4096, 256, 410.0, 0.05), "spmm_f16_s2d8_y4k16x64w8_u4_nopred");
        let stats = RowStats { min: 0, max: 0, mean: 410.0, cv: 0.05, empty_rows: 0, columns_per_entry: None };
        assert_eq!(
            SpmmConfig::select_with_stats(4096, 4096, 256, &stats, DType::Bf16).kernel_name(),
            "spmm_bf16_s1d8_y2k16x256w16_u4_nopred"
        );
        assert_eq!(s(4096, 4096, 2048.0, 0.02), "spmm_f16_s1d8_y2k16x256w16_u4_nopred");
        assert_eq!(s(4096, 128, 819.0, 0.03), "spmm_f16_s2d8_y4k16x64w8_u4_nopred");
        assert_eq!(s(36692, 128, 10.0, 3.6), "spmm_f16_s4d4_y4k32x32w8_u4_nopred");
        assert_eq!(s(384, 256, 115.0, 0.3), "spmm_f16_s4d4_y4k32x32w8_u4_nopred");
        // Sputnik's 32-wide tile up to HALF_FEW_ROWS rows at n <= 256, the k = 8 tile past them (step 41).
        assert_eq!(s(1536, 256, 115.0, 0.3), "spmm_f16_s4d4_y4k32x32w8_u4_nopred");
        assert_eq!(s(1537, 256, 115.0, 0.3), "spmm_f16_s1d8_y4k8x64w8_u4_nopred_lb32");
        assert_eq!(s(2048, 256, 164.0, 0.07), "spmm_f16_s1d8_y4k8x64w8_u4_nopred_lb32");
        assert_eq!(s(2048, 128, 31.0, 0.2), "spmm_f16_s1d8_y4k8x64w8_u4_nopred");
        assert_eq!(s(1536, 1024, 38.0, 0.7), "spmm_f16_s1d8_y4k8x64w8_u4_nopred");
        assert_eq!(s(100, 7, 5.0, 0.1), "spmm_f16_s1d1_y1k32x32w32_u4_pred");
        // n not a multiple of 8 past 16 (step 32): short rows take the k = 8 tile in the widest vector dividing n,
        // rows past 20 entries a warp per row in scalars; n <= 16 and dv = 8 keep their tiles.
        assert_eq!(s(100, 18, 5.0, 0.1), "spmm_f16_s1d2_y4k8x32w8_u4_pred");
        assert_eq!(s(55476, 300, 12.7, 0.3), "spmm_f16_s1d4_y4k8x32w8_u4_pred");
        assert_eq!(s(36692, 100, 10.0, 3.6), "spmm_f16_s1d4_y4k8x32w8_u4_pred");
        assert_eq!(s(70000, 50, 20.0, 0.4), "spmm_f16_s1d2_y4k8x32w8_u4_pred");
        assert_eq!(s(384, 100, 20.1, 0.5), "spmm_f16_s1d1_y1k32x32w32_u4_pred");
        assert_eq!(s(384, 300, 460.0, 0.1), "spmm_f16_s1d1_y1k32x32w32_u4_pred");
        assert_eq!(s(100, 12, 5.0, 0.1), "spmm_f16_s4d4_y4k32x32w8_u4_pred");
        assert_eq!(s(100, 14, 5.0, 0.1), "spmm_f16_s2d2_y2k32x32w16_u4_pred");
        assert_eq!(s(384, 200, 115.0, 0.3), "spmm_f16_s4d4_y4k32x32w8_u4_pred");
    }

    #[test]
    fn narrow_k8_tiles_for_n_not_a_multiple_of_the_vector() {
        // Rows of cv 0.3: (dtype, m, n, mean) -> kernel. f32 at n = 4-16 (n % 4 == 0), n = 2 mod 4, and odd n in
        // scalars, from 4096 rows of at most 20 on average; at n <= 16 rows of 20-500 take two rows of 16 threads;
        // a warp per row otherwise for odd n. bf16 past 20 per row: the k = 8 tile from 2048 rows, a warp per row up
        // to 1536, Sputnik's tiles between.
        for (dtype, m, n, mean, want) in [
            (DType::F32, 55476, 8, 12.7, "spmm_f32_s1d4_y4k8x32w8_u4_pred"),
            (DType::F32, 4096, 4, 20.0, "spmm_f32_s1d4_y4k8x32w8_u4_pred"),
            (DType::F32, 4095, 16, 12.7, "spmm_f32_s4d2_y4k32x16w8_u4_nopred"),
            (DType::F32, 55476, 6, 12.7, "spmm_f32_s4d1_y4k32x8w8_u4_pred"),
            (DType::F32, 384, 4, 20.1, "spmm_f32_s2d2_y2k32x32w16_u4_pred"),
            (DType::F32, 384, 16, 500.0, "spmm_f32_s2d2_y2k32x32w16_u4_pred"),
            (DType::F32, 384, 16, 500.1, "spmm_f32_s4d2_y4k32x16w8_u4_nopred"),
            (DType::F32, 384, 5, 115.0, "spmm_f32_s4d1_y4k32x8w8_u4_pred"),
            (DType::F32, 55476, 50, 12.7, "spmm_f32_s1d2_y4k8x32w8_u4_pred"),
            (DType::F32, 4096, 150, 20.0, "spmm_f32_s1d2_y4k8x32w8_u4_pred"),
            (DType::F32, 4095, 50, 12.7, "spmm_f32_s2d2_y2k32x32w16_u4_pred"),
            (DType::F32, 55476, 50, 20.1, "spmm_f32_s2d2_y2k32x32w16_u4_pred"),
            (DType::F32, 55476, 52, 12.7, "spmm_f32_s1d4_y4k8x32w8_u4_pred"),
            (DType::F32, 55476, 14, 12.7, "spmm_f32_s4d2_y4k32x16w8_u4_pred"),
            (DType::F32, 55476, 33, 12.7, "spmm_f32_s1d1_y4k8x32w8_u4_pred"),
            (DType::F32, 4095, 33, 12.7, "spmm_f32_s1d1_y1k32x32w32_u4_pred"),
            (DType::F32, 55476, 33, 20.1, "spmm_f32_s1d1_y1k32x32w32_u4_pred"),
            (DType::Bf16, 15260, 100, 7.3, "spmm_bf16_s1d4_y4k8x32w8_u4_pred"),
            (DType::Bf16, 15260, 150, 7.3, "spmm_bf16_s1d2_y4k8x32w8_u4_pred"),
            (DType::Bf16, 2048, 300, 26.0, "spmm_bf16_s1d4_y4k8x32w8_u4_pred"),
            (DType::Bf16, 1536, 300, 26.0, "spmm_bf16_s1d1_y1k32x32w32_u4_pred"),
            (DType::Bf16, 2000, 300, 26.0, "spmm_bf16_s4d4_y4k32x32w8_u4_pred"),
            (DType::Bf16, 2000, 150, 26.0, "spmm_bf16_s2d2_y2k32x32w16_u4_pred"),
        ] {
            let stats = RowStats { min: 0, max: 0, mean, cv: 0.3, empty_rows: 0, columns_per_entry: None };
            let got = SpmmConfig::select_with_stats(m, m, n, &stats, dtype).kernel_name();
            assert_eq!(got, want, "{dtype}, m = {m}, n = {n}, mean {mean}");
        }
        // 40000 power-law rows with a longest row past 256 that the split does not cut: not the k = 8 tiles at n <=
        // 64 (1383 is skewed: split).
        for (dtype, n, max, want) in [
            (DType::F32, 50, 540, "spmm_f32_s2d2_y2k32x32w16_u4_pred"),
            (DType::F32, 50, 256, "spmm_f32_s1d2_y4k8x32w8_u4_pred"),
            (DType::F32, 150, 540, "spmm_f32_s1d2_y4k8x32w8_u4_pred"),
            (DType::F32, 33, 540, "spmm_f32_s1d1_y1k32x32w32_u4_pred"),
            (DType::F32, 101, 540, "spmm_f32_s1d1_y4k8x32w8_u4_pred"),
            (DType::Bf16, 20, 540, "spmm_bf16_s4d4_y4k32x32w8_u4_pred"),
            (DType::Bf16, 50, 540, "spmm_bf16_s2d2_y2k32x32w16_u4_pred"),
            (DType::Bf16, 20, 256, "spmm_bf16_s1d4_y4k8x32w8_u4_pred"),
            (DType::Bf16, 100, 540, "spmm_bf16_s1d4_y4k8x32w8_u4_pred"),
            (DType::Bf16, 20, 1383, "spmm_bf16_s1d4_y4k8x32w8_u4_pred"),
        ] {
            let stats = RowStats { min: 0, max, mean: 7.5, cv: 1.4, empty_rows: 0, columns_per_entry: None };
            let got = SpmmConfig::select_with_stats(40000, 40000, n, &stats, dtype).kernel_name();
            assert_eq!(got, want, "{dtype}, n = {n}, longest {max}");
        }
        for dtype in [DType::F16, DType::Bf16] {
            let stats = RowStats { min: 0, max: 44, mean: 12.7, cv: 0.3, empty_rows: 0, columns_per_entry: None };
            let pick = |m: usize, n: usize| SpmmConfig::select_with_stats(m, m, n, &stats, dtype).kernel_name();
            assert_eq!(pick(55476, 33), format!("spmm_{dtype}_s1d1_y4k8x32w8_u4_pred"));
            assert_eq!(pick(4095, 33), format!("spmm_{dtype}_s1d1_y1k32x32w32_u4_pred"));
            assert_eq!(pick(55476, 15), format!("spmm_{dtype}_s1d1_y1k32x32w32_u4_pred"));
        }
    }

    #[test]
    fn row_split_tiles_for_few_rows_and_small_n() {
        let rows =
            |mean: f64, max: usize| RowStats { min: 0, max, mean, cv: 0.6, empty_rows: 0, columns_per_entry: None };
        let sel = |m: usize, n: usize, stats: &RowStats| SpmmConfig::select_with_stats(m, 384, n, stats, DType::F32);
        let (k8, warp) = (split_row_k8_tile(DType::F32), split_row_warp_tile(DType::F32));
        assert_eq!(k8.kernel_name(), "spmm_f32_s1d4_y8k8x32w8_u4_nopred_r4");
        assert_eq!(warp.kernel_name(), "spmm_f32_s1d4_y2k32x128w32_u4_nopred_r2");
        // The 384 x 384 weight at 90%. Up to three blocks of a warp per row (m * n / 128) per SM: four 8-thread
        // subwarps per row (384 rows at n = 128: 384 blocks); up to four (528 blocks) on rows of fewer than 150
        // entries on average; up to six (792) on rows of fewer than 64 where k is at most 512, as here (38.4, k =
        // 384: the suite's 384 rows at n = 256).
        let pruned = rows(38.4, 154);
        assert_eq!(sel(384, 128, &pruned), k8);
        assert_eq!(sel(198, 256, &pruned), k8);
        assert_eq!(sel(528, 128, &pruned), k8);
        assert_eq!(sel(384, 256, &pruned), k8);
        assert_eq!(sel(792, 128, &pruned), k8);
        assert_eq!(sel(793, 128, &pruned), warp);
        assert_eq!(sel(792, 128, &rows(63.9, 154)), k8);
        assert_eq!(sel(792, 128, &rows(64.0, 154)), warp);
        let wide_k =
            |m: usize, n: usize, stats: &RowStats| SpmmConfig::select_with_stats(m, 1536, n, stats, DType::F32);
        assert_eq!(wide_k(528, 128, &pruned), k8);
        assert_eq!(wide_k(529, 128, &pruned), warp);
        assert_eq!(SpmmConfig::select_with_stats(529, 512, 128, &pruned, DType::F32), k8);
        assert_eq!(SpmmConfig::select_with_stats(529, 513, 128, &pruned, DType::F32), warp);
        let long = rows(460.0, 817); // the 384 x 1536 weight at 70%
        assert_eq!(sel(396, 128, &long), k8);
        assert_eq!(sel(397, 128, &long), warp);
        assert_eq!(sel(528, 128, &rows(149.9, 300)), k8);
        assert_eq!(sel(528, 128, &rows(150.0, 300)), warp);
        // Up to six: two warps per row (384 rows at n = 256, 768 blocks; 792 the last); up to eight (1056) on rows
        // of at most 40 entries ...
        assert_eq!(wide_k(384, 256, &pruned), warp);
        assert_eq!(sel(198, 512, &long), warp);
        assert_eq!(sel(792, 128, &long), warp);
        assert_eq!(sel(1056, 128, &pruned), warp);
        assert_eq!(sel(1056, 128, &rows(40.0, 154)), warp);
        // ... past them a warp per row again (1536 rows at n = 256: 3072 blocks).
        let one_warp = "spmm_f32_s1d4_y1k32x128w32_u4_nopred";
        assert_eq!(sel(1536, 256, &pruned).kernel_name(), one_warp);
        assert_eq!(sel(1057, 128, &pruned).kernel_name(), one_warp);
        assert_eq!(sel(793, 128, &rows(40.1, 154)).kernel_name(), one_warp);
        assert_eq!(sel(793, 128, &long).row_split, 1);
        // From 32 rows (four subwarps per row at every n from 128 to 512).
        assert_eq!(sel(32, 512, &pruned), k8);
        assert_eq!(sel(31, 128, &pruned).row_split, 1);
        // Not n = 1024 (384 x 384 at 90%: 11.5 us against 12.0 for the best split; 64 rows: mixed), nor n past
        // 512, nor rows of fewer than 7 entries on average, nor where the longest fits 48 entries (uniform rows of
        // 10-20), f16, or skewed rows. n = 192 takes the choice at 256 (`rounded_width`), guarded.
        assert_eq!(sel(384, 1024, &pruned).row_split, 1);
        assert_eq!(sel(64, 1024, &pruned).row_split, 1);
        assert_eq!(sel(128, 640, &pruned).row_split, 1);
        assert_eq!(sel(300, 192, &pruned), k8); // 192 is a multiple of its 32-column tiles: no guards
        assert_eq!(wide_k(300, 192, &pruned), SpmmConfig { predicate_loads: true, ..warp });
        // n = 32, 64 and 96: the k = 8 tile up to six blocks per SM (792: 3168 rows at n = 32, 1584 at 64, 1056
        // at 96), then the tiles before it; not n up to 16. Other multiples of 4 take the tile of the width they
        // round up to (`rounded_width`), guarded: 48 that of 64.
        assert_eq!(sel(3168, 32, &pruned), k8);
        assert_eq!(sel(3169, 32, &pruned).row_split, 1);
        assert_eq!(sel(1584, 64, &pruned), k8);
        assert_eq!(sel(1585, 64, &pruned).row_split, 1);
        assert_eq!(sel(1056, 96, &pruned), k8);
        assert_eq!(sel(1057, 96, &pruned).row_split, 1);
        assert_eq!(sel(32, 32, &pruned), k8);
        assert_eq!(sel(384, 16, &pruned).row_split, 1);
        assert_eq!(sel(384, 48, &pruned), SpmmConfig { predicate_loads: true, ..k8 });
        assert_eq!(sel(1585, 48, &pruned).row_split, 1);
        assert_eq!(sel(384, 64, &rows(6.9, 83)).row_split, 1);
        assert_eq!(sel(384, 64, &rows(20.0, 47)).row_split, 1);
        assert_eq!(sel(384, 256, &rows(6.9, 83)).row_split, 1);
        assert_eq!(sel(384, 256, &rows(7.0, 83)), k8);
        assert_eq!(sel(384, 256, &rows(20.0, 47)).row_split, 1);
        assert_eq!(sel(384, 256, &rows(20.0, 48)), k8);
        assert_eq!(SpmmConfig::select_with_stats(384, 384, 256, &pruned, DType::F16).row_split, 1);
        let skewed = rows(10.0, 5000);
        assert!(is_skewed(&skewed));
        assert_eq!(sel(384, 256, &skewed).row_split, 1);
    }

    #[test]
    fn two_row_tile_for_short_rows() {
        let with_max = |m: usize, n: usize, mean: f64, cv: f64, max: usize| {
            let stats = RowStats { min: 0, max, mean, cv, empty_rows: 0, columns_per_entry: None };
            SpmmConfig::select_with_stats(m, m, n, &stats, DType::F32)
        };
        let sel = |m: usize, n: usize, mean: f64, cv: f64| with_max(m, n, mean, cv, (mean * 2.0) as usize);
        let (two, k8) = (two_row_tile(DType::F32), bounded(k8_tile(DType::F32, 4, false), 32));
        let warp = tile(DType::F32, 1, 4, 1, 32, 128, 32, false);
        // From 16384 rows, rows of 6 or fewer take their column tiles in turn (step 60).
        let k8_in_turn = k8_tile_in_turn();
        // wrld_1deg (15260 rows of 7.3, cv 0.19), 4elt (7434 of 11.6), add32 (4960 of 4.8, cv 0.76), well1850 (1850
        // of 4.7, cv 0.10; k = 712).
        for (m, mean, cv) in [(15260, 7.3, 0.19), (7434, 11.6, 0.16), (4960, 4.8, 0.76), (1850, 4.7, 0.1)] {
            for n in [128, 256, 384, 512] {
                assert_eq!(sel(m, n, mean, cv), two, "{m} rows of {mean}, n = {n}");
            }
        }
        // Either side of each bound: 1000-2048 rows of cv 0.5 or less, 2049-32768 rows, 200,000 entries, mean 3-12,
        // n 128-512 and a multiple of 128, B up to 48 MiB: (m, n, mean, cv, the choice, why).
        let cases = [
            (1000, 128, 8.0, 0.5, two, "1000 rows, cv 0.5"),
            (999, 128, 8.0, 0.3, warp, "999 rows"),
            (2048, 128, 8.0, 0.51, warp, "2048 rows, cv past 0.5"),
            (1536, 256, 7.7, 1.31, warp, "the suite's pruned 1536 x 384 at 98%"),
            (2049, 256, 8.0, 1.5, two, "2049 rows, cv 1.5"),
            // Power-law rows (cv >= 0.9) in 2048-4096 rows at n = 128: a warp per row (step 66).
            (2049, 128, 8.0, 1.5, warp, "2049 rows, cv 1.5, n = 128"),
            (4097, 128, 8.0, 1.5, two, "4097 rows, cv 1.5, n = 128"),
            (25000, 128, 8.0, 0.3, two, "200,000 entries"),
            (25001, 128, 8.0, 0.3, k8, "200,008 entries"),
            (32768, 128, 6.1, 0.3, two, "32768 rows"),
            (32769, 128, 6.1, 0.3, k8, "32769 rows"),
            (24000, 512, 4.0, 1.01, two, "B of 12.3M elements"),
            (32000, 512, 4.0, 1.01, k8, "B of 16.4M elements, past the largest swept"),
            // Rows of 6 or fewer (cv up to 1) from 16384 rows take column tiles in turn (step 60).
            (16383, 128, 6.0, 0.3, two, "16383 rows of 6"),
            (32768, 128, 6.0, 0.3, k8_in_turn, "32768 rows of 6: in turn"),
            (24000, 512, 4.0, 0.3, k8_in_turn, "24000 rows of 4 over k = 24000: in turn"),
            (55476, 128, 12.7, 0.33, k8, "copter2"),
            (70000, 128, 3.38, 0.38, k8_in_turn, "case_ACTIVSg70k: in turn"),
            (70000, 512, 3.38, 0.38, k8_in_turn, "case_ACTIVSg70k at n = 512: in turn"),
            (70000, 2048, 3.38, 0.38, k8_in_turn, "case_ACTIVSg70k at n = 2048: in turn"),
            (70000, 2176, 3.38, 0.38, k8, "n = 2176: not in turn"),
            (70000, 96, 3.38, 0.38, k8, "n = 96: not in turn"),
            (8192, 128, 12.0, 0.3, two, "mean 12"),
            (8192, 128, 12.1, 0.3, k8, "mean 12.1"),
            (8192, 128, 3.0, 0.3, two, "mean 3"),
            (8192, 512, 3.0, 0.3, two, "mean 3 in 8192 rows: not in turn"),
            (8192, 128, 2.9, 0.3, k8, "mean 2.9"),
            (8192, 640, 8.0, 0.3, k8, "n = 640"),
            (8192, 64, 8.0, 0.3, k8, "n = 64"),
        ];
        for (m, n, mean, cv, want, why) in cases {
            assert_eq!(sel(m, n, mean, cv), want, "{why}");
        }
        assert_ne!(sel(8192, 192, 8.0, 0.3), two, "n = 192");
        // Skewed rows keep their pieces on the k = 8 tile (email-Enron has 367,662 entries anyway), and rows of cv
        // past 2 a warp per row.
        assert!(is_skewed(&RowStats { min: 0, max: 2000, mean: 8.0, cv: 1.9, empty_rows: 0, columns_per_entry: None }));
        assert_eq!(with_max(8192, 128, 8.0, 1.9, 2000).kernel_name(), "spmm_f32_s1d4_y4k8x32w8_u4_nopred");
        assert_eq!(sel(8192, 128, 8.0, 2.1), warp);
    }

    #[test]
    fn column_tiles_in_turn_for_very_short_rows() {
        let pick = |m: usize, k: usize, n: usize, mean: f64, cv: f64, max: usize| {
            let stats = RowStats { min: 0, max, mean, cv, empty_rows: 0, columns_per_entry: None };
            SpmmConfig::select_with_stats(m, k, n, &stats, DType::F32)
        };
        let k8 = k8_tile_in_turn();
        let two = two_row_tile_in_turn();
        assert_eq!(
            (k8.kernel_name().as_str(), two.kernel_name().as_str()),
            ("spmm_f32_s1d4_y4k8x32w8_u4_nopred_c8_lb32", "spmm_f32_s1d4_y2k16x128w16_u4_nopred_c8_lb16")
        );
        // case_ACTIVSg70k (70,000 rows of 3.38, cv 0.38, longest 17) at every width the rule covers.
        for n in [128, 160, 256, 512, 1024, 2048] {
            assert_eq!(pick(70000, 70000, n, 3.38, 0.38, 17), k8, "n = {n}");
        }
        // Over k <= 8192 the two-row tile, from n = 256.
        for n in [256, 512, 2048] {
            assert_eq!(pick(16384, 4096, n, 4.1, 0.07, 5), two, "k = 4096, n = {n}");
        }
        assert_eq!(pick(16384, 8192, 256, 4.0, 0.0, 5), two);
        assert_eq!(pick(16384, 8193, 256, 4.0, 0.0, 5), k8);
        // Either side of each bound.
        let outside = [
            (16383, 32768, 512, 4.0, 0.0, 5, "16383 rows"),
            (16384, 32768, 512, 6.1, 0.0, 8, "mean 6.1"),
            (16384, 32768, 512, 4.0, 1.01, 30, "cv 1.01"),
            (16384, 32768, 512, 4.0, 0.5, 65, "longest row 65"),
            (16384, 32768, 96, 4.0, 0.0, 5, "n = 96"),
            (16384, 32768, 2080, 4.0, 0.0, 5, "n = 2080"),
            (16384, 32768, 100, 4.0, 0.0, 5, "n = 100, not a multiple of 32"),
            (16384, 4096, 128, 4.1, 0.07, 5, "k = 4096 at n = 128"),
            (16384, 4096, 384 + 32, 4.1, 0.07, 5, "k = 4096 at n = 416"),
        ];
        for (m, k, n, mean, cv, max, why) in outside {
            assert_eq!(pick(m, k, n, mean, cv, max).column_tiles, 1, "{why}");
        }
        for (m, k, n, mean, cv, max) in [(16384, 32768, 512, 6.0, 1.0, 64), (131072, 131072, 2048, 2.0, 0.04, 3)] {
            assert_eq!(pick(m, k, n, mean, cv, max), k8, "{m} x {k}, n = {n}");
        }
    }

    #[test]
    fn short_rows_in_fewer_rows_at_wide_n() {
        let pick = |m: usize, n: usize, mean: f64, cv: f64, max: usize| {
            let stats = RowStats { min: 0, max, mean, cv, empty_rows: 0, columns_per_entry: None };
            SpmmConfig::select_with_stats(m, m, n, &stats, DType::F32)
        };
        let k8 = k8_tile_in_turn();
        // wrld_1deg (15,260 rows of 7.34, cv 0.19, longest 8), Poisson rows of 3.4 and of 7.
        for n in [1024, 1152, 2048] {
            assert_eq!(pick(15260, n, 7.34, 0.19, 8), k8, "n = {n}");
            assert_eq!(pick(8192, n, 3.4, 0.46, 12), k8, "n = {n}, mean (1 + cv) 4.96");
            assert_eq!(pick(12288, n, 7.0, 0.35, 20), two_row_tile(DType::F32), "n = {n}, mean (1 + cv) 9.45");
        }
        assert_eq!(pick(16383, 1024, 10.0, 0.2, 10), k8);
        assert_eq!(pick(8192, 1024, 6.0, 0.33, 20), k8, "mean (1 + cv) 7.98");
        let outside = [
            (8191, 1024, 7.0, 0.0, 7, "8191 rows"),
            (12288, 896, 7.0, 0.0, 7, "n = 896"),
            (12288, 2176, 7.0, 0.0, 7, "n = 2176"),
            (12288, 1024, 10.1, 0.0, 11, "mean 10.1"),
            (12288, 1024, 7.0, 1.01, 40, "cv 1.01"),
            (12288, 1024, 7.0, 0.2, 65, "longest row 65"),
        ];
        for (m, n, mean, cv, max, why) in outside {
            assert_ne!(pick(m, n, mean, cv, max), k8, "{why}");
        }
        let even_rows = RowStats { min: 7, max: 7, mean: 7.0, cv: 0.0, empty_rows: 0, columns_per_entry: None };
        assert_eq!(SpmmConfig::select_with_stats(12288, 8192, 1024, &even_rows, DType::F32), k8);
        assert_ne!(SpmmConfig::select_with_stats(12288, 8191, 1024, &even_rows, DType::F32), k8, "k = 8191");
        // n = 1000 rounds to 1024 and cuts the tile: its one-tile form, guarded, as the k = 8 tile was before.
        assert_eq!(pick(15260, 1000, 7.34, 0.19, 8).kernel_name(), "spmm_f32_s1d4_y4k8x32w8_u4_pred");
    }

    #[test]
    fn column_tiles_in_turn_where_rows_share_columns() {
        // Step 61: the rows' columns per entry over 4096-row windows decide on rows of 6-10, and on even rows of 6 or
        // fewer at n = 1024-2048.
        let pick = |m: usize, k: usize, n: usize, mean: f64, cv: f64, max: usize, columns: Option<f64>| {
            let stats = RowStats { min: 0, max, mean, cv, empty_rows: 0, columns_per_entry: columns };
            SpmmConfig::select_with_stats(m, k, n, &stats, DType::F32)
        };
        let k8 = k8_tile_in_turn();
        let two = two_row_tile_in_turn();
        // The 40^3 seven-point stencil in its own order (0.255) at every width the rule covers, and permuted (0.833).
        for n in [128, 160, 256, 512, 1024, 2048] {
            assert_eq!(pick(64000, 64000, n, 6.85, 0.06, 7, Some(0.255)), k8, "n = {n}");
            assert_eq!(pick(64000, 64000, n, 6.85, 0.06, 7, Some(0.833)).column_tiles, 1, "n = {n}");
            assert_eq!(pick(64000, 64000, n, 6.85, 0.06, 7, None).column_tiles, 1, "n = {n}, not known");
        }
        // Uneven rows of 7 sharing columns: the two-row tile in turn from n = 256; not at n = 128.
        for n in [256, 512, 1024, 2048] {
            assert_eq!(pick(65536, 65536, n, 7.0, 0.35, 20, Some(0.14)), two, "n = {n}");
        }
        assert_eq!(pick(65536, 65536, 128, 7.0, 0.35, 20, Some(0.14)).column_tiles, 1);
        // At a width the rounding reaches (992 -> 1024), the choice without the shared columns: not the two-row tile
        // guarded in n.
        let unshared = pick(65536, 65536, 992, 7.0, 0.35, 20, None);
        assert_eq!(pick(65536, 65536, 992, 7.0, 0.35, 20, Some(0.14)), unshared);
        assert_eq!(unshared.kernel_name(), "spmm_f32_s1d4_y4k8x32w8_u4_nopred_lb32");
        // Even rows of 6 or fewer sharing columns: the two-row tile in turn at n = 1024-2048, the k = 8 tile below.
        for (n, expect) in [(128, k8), (512, k8), (992, k8), (1024, two), (2048, two)] {
            assert_eq!(pick(65536, 65536, n, 5.0, 0.0, 5, Some(0.2)), expect, "n = {n}");
        }
        assert_eq!(pick(65536, 65536, 1024, 5.0, 0.0, 5, Some(0.41)), k8, "0.41 columns per entry");
        assert_eq!(pick(65536, 65536, 1024, 5.0, 0.21, 9, Some(0.2)), k8, "cv 0.21");
        assert_eq!(pick(65536, 65536, 1024, 5.0, 0.0, 5, None), k8, "not known: step 60's choice");
        // Either side of each bound.
        assert_eq!(pick(65536, 65536, 512, 10.0, 0.2, 10, Some(0.5)), k8);
        assert_eq!(pick(16384, 16384, 512, 7.0, 0.0, 7, Some(0.47)), k8, "16384 rows in random columns");
        assert_eq!(pick(65536, 65536, 512, 7.0, 0.35, 20, Some(0.3)), two);
        let outside = [
            (65536, 65536, 512, 10.1, 0.0, 11, Some(0.1), "mean 10.1"),
            (65536, 65536, 512, 7.0, 0.0, 7, Some(0.51), "0.51 columns per entry, even rows"),
            (65536, 65536, 512, 7.0, 0.35, 20, Some(0.31), "0.31 columns per entry, uneven rows"),
            (16383, 16383, 512, 7.0, 0.0, 7, Some(0.1), "16383 rows"),
            (65536, 8192, 512, 7.0, 0.0, 7, Some(0.1), "k = 8192"),
            (65536, 65536, 512, 7.0, 1.01, 40, Some(0.1), "cv 1.01"),
            (65536, 65536, 512, 7.0, 0.2, 65, Some(0.1), "longest row 65"),
            (65536, 65536, 2080, 7.0, 0.0, 7, Some(0.1), "n = 2080"),
            (65536, 65536, 320, 7.0, 0.35, 20, Some(0.1), "uneven rows at n = 320"),
        ];
        for (m, k, n, mean, cv, max, columns, why) in outside {
            assert_eq!(pick(m, k, n, mean, cv, max, columns).column_tiles, 1, "{why}");
        }
    }

    #[test]
    fn thirty_two_rows_for_even_rows_over_a_large_k() {
        let pick = |m: usize, k: usize, n: usize, mean: f64, cv: f64| {
            let stats = RowStats { min: 0, max: 0, mean, cv, empty_rows: 0, columns_per_entry: None };
            SpmmConfig::select_with_stats(m, k, n, &stats, DType::F32).kernel_name()
        };
        let thirty_two = "spmm_f32_s1d4_y32k16x64w16_u4_nopred";
        // Step 47's sweep: uniform 2048-8192 x 8192 at 5-10%, n = 768 and 1024.
        for (m, mean) in [(2048, 573.0), (2560, 573.0), (4096, 410.0), (4096, 819.0), (8192, 410.0), (8192, 573.0)] {
            for n in [768, 1024] {
                assert_eq!(pick(m, 8192, n, mean, 0.05), thirty_two, "{m} x 8192, mean {mean}, n = {n}");
            }
        }
        // Step 47's bounds, both sides, where step 48's (at most 8.5% dense) does not reach: rows, k, n, the mean, cv.
        assert_eq!(pick(2048, 12288, 896, 400.0, 0.099), thirty_two);
        assert_eq!(pick(8192, 8192, 1024, 820.0, 0.05), thirty_two);
        assert_ne!(pick(2047, 8192, 768, 819.0, 0.05), thirty_two);
        assert_ne!(pick(8193, 8192, 768, 573.0, 0.05), thirty_two);
        assert_ne!(pick(4096, 8191, 768, 819.0, 0.05), thirty_two);
        assert_ne!(pick(4096, 8192, 1152, 819.0, 0.05), thirty_two);
        assert_ne!(pick(4096, 8192, 640, 573.0, 0.05), thirty_two);
        assert_eq!(pick(4096, 8192, 832, 573.0, 0.05), thirty_two, "the choice at 896, 64-wide tiles: no guards");
        assert_ne!(pick(4096, 8192, 768, 379.0, 0.05), thirty_two);
        assert_eq!(pick(4096, 8192, 1024, 399.6, 0.0), thirty_two, "step 55: rows of 400 less a fraction");
        // Step 55's sweep: uniform rows of 400 over k = 16384-32768 in 1024-8192 rows at n = 256-1024, not n = 128;
        // both sides of each bound.
        for (m, k) in [(1024, 16384), (1024, 32768), (2048, 16384), (2048, 32768), (4096, 32768), (8192, 16384)] {
            for n in [256, 384, 512, 1024] {
                assert_eq!(pick(m, k, n, 400.3, 0.0), thirty_two, "{m} x {k}, n = {n}");
            }
            assert_ne!(pick(m, k, 128, 400.3, 0.0), thirty_two, "{m} x {k}, n = 128");
        }
        assert_ne!(pick(1023, 20000, 256, 500.0, 0.02), thirty_two);
        assert_ne!(pick(8193, 20000, 256, 500.0, 0.02), thirty_two);
        assert_ne!(pick(4096, 32769, 256, 500.0, 0.02), thirty_two);
        assert_ne!(pick(4096, 16383, 256, 500.0, 0.02), thirty_two);
        assert_ne!(pick(4096, 20000, 1152, 500.0, 0.02), thirty_two);
        assert_ne!(pick(4096, 20000, 256, 500.0, 0.1), thirty_two);
        assert_ne!(pick(4096, 20000, 256, 821.0, 0.02), thirty_two);
        assert_ne!(pick(4096, 8192, 768, 821.0, 0.05), thirty_two);
        assert_ne!(pick(4096, 8192, 768, 573.0, 0.1), thirty_two);
        // Step 48's sweeps: uniform, n = 768-1024 over k = 5632-16384 and n = 1536-3072 over k = 5120-16384.
        for (m, k, mean, widths) in [
            (4096, 6144, 430.0, &[768, 1024, 1536, 2048, 3072][..]),
            (6144, 6144, 492.0, &[768, 1024]),
            (2048, 7168, 573.0, &[768, 1024]),
            (8192, 6656, 466.0, &[768, 1024]),
            (4096, 7680, 461.0, &[768, 1024]),
            (4096, 6144, 522.0, &[768, 1024]),
            (8192, 5632, 422.0, &[768, 1024]),
            (2048, 16384, 492.0, &[768, 1024, 1536, 2048, 3072]),
            (4096, 5120, 410.0, &[1536, 2048, 3072]),
            (1024, 8192, 492.0, &[1536, 2048, 3072]),
            (4096, 12288, 492.0, &[1536, 2048, 3072]),
            (2048, 8192, 573.0, &[1536, 2048]),
            (3072, 8192, 655.0, &[1536, 2048]),
            (8192, 8192, 410.0, &[1536, 2048]),
        ] {
            for &n in widths {
                assert_eq!(pick(m, k, n, mean, 0.05), thirty_two, "{m} x {k}, mean {mean}, n = {n}");
            }
        }
        // Step 48's bounds, both sides: rows, k, n, the density, the mean, cv.
        assert_eq!(pick(1024, 8192, 2048, 492.0, 0.05), thirty_two);
        assert_ne!(pick(1023, 8192, 2048, 492.0, 0.05), thirty_two);
        assert_eq!(pick(8192, 6144, 1536, 492.0, 0.05), thirty_two);
        assert_ne!(pick(8193, 6144, 1536, 492.0, 0.05), thirty_two);
        assert_ne!(pick(4096, 5119, 1536, 410.0, 0.05), thirty_two);
        assert_ne!(pick(3072, 5120, 768, 410.0, 0.05), thirty_two, "k = 5120 at n = 768: 0.93x");
        assert_ne!(pick(4096, 5631, 1408, 430.0, 0.05), thirty_two);
        assert_eq!(pick(4096, 5632, 1408, 430.0, 0.05), thirty_two);
        assert_eq!(pick(4096, 16384, 2048, 492.0, 0.05), thirty_two);
        assert_ne!(pick(4096, 16385, 2048, 492.0, 0.05), thirty_two);
        assert_ne!(pick(4096, 6144, 640, 430.0, 0.05), thirty_two);
        assert_eq!(pick(4096, 6144, 1152, 430.0, 0.05), thirty_two);
        assert_ne!(pick(4096, 6144, 3200, 430.0, 0.05), thirty_two);
        assert_ne!(pick(4096, 6144, 1024, 523.0, 0.05), thirty_two, "8.51% dense");
        assert_ne!(pick(4096, 16384, 2048, 379.0, 0.05), thirty_two);
        assert_eq!(pick(4096, 16384, 2048, 820.0, 0.05), thirty_two);
        assert_ne!(pick(4096, 16384, 2048, 821.0, 0.05), thirty_two);
        assert_ne!(pick(4096, 6144, 2048, 430.0, 0.1), thirty_two);
        // Outside both: 10% dense below k = 8192, n = 512, rows of 246 entries.
        assert_eq!(pick(4096, 6144, 1024, 614.0, 0.04), "spmm_f32_s1d4_y2k16x128w16_u4_nopred");
        assert_eq!(pick(3072, 7168, 768, 717.0, 0.04), "spmm_f32_s1d4_y2k16x128w16_u4_nopred");
        assert_ne!(pick(4096, 8192, 512, 492.0, 0.04), thirty_two);
        assert_ne!(pick(4096, 8192, 2048, 246.0, 0.04), thirty_two);
        // k = 4096 keeps the two-row tiles (unbounded, or held to 128 registers in 1024-2048 rows).
        assert_eq!(pick(4096, 4096, 1024, 410.0, 0.05), "spmm_f32_s1d4_y2k16x128w16_u4_nopred");
        assert_eq!(pick(4096, 4096, 2048, 410.0, 0.05), "spmm_f32_s1d4_y2k16x128w16_u4_nopred");
        // n = 1000 takes the choice at 1024, guarded in n.
        assert_eq!(pick(4096, 8192, 1000, 492.0, 0.05), "spmm_f32_s1d4_y32k16x64w16_u4_pred");
    }

    #[test]
    fn rows_long_for_their_mean_take_tiles_that_split_them() {
        let pick = |m: usize, n: usize, max: usize, mean: f64| {
            let stats = RowStats { min: 1, max, mean, cv: 1.3, empty_rows: 0, columns_per_entry: None };
            SpmmConfig::select_with_stats(m, 4096, n, &stats, DType::F32).kernel_name()
        };
        let (k8, two_rows) = ("spmm_f32_s1d4_y4k8x32w8_u4_nopred", "spmm_f32_s1d4_y2k16x128w16_u4_nopred");
        // Step 49's power-law matrices: the k = 8 tile below n = 128, two rows over 128 columns at its multiples; but
        // in 2048-8192 rows at n = 32, in up to 6144 rows at n = 64 and in up to 4096 at n = 128, the 32-entry tiles
        // of step 66, and in 8193-16384 rows at n = 32 the four-row k = 16 tile of step 67.
        for (m, max, mean) in [(4096, 472, 12.1), (8192, 890, 12.1), (16384, 890, 11.9), (4096, 1024, 40.1)] {
            for n in [32, 64, 96, 128, 256, 512, 1024] {
                let want = match (m, n) {
                    (4096 | 8192, 32) => "spmm_f32_s1d2_y2k32x32w16_u4_nopred",
                    (16384, 32) => "spmm_f32_s2d4_y4k16x32w8_u4_nopred",
                    (4096, 64) => "spmm_f32_s1d4_y2k32x64w16_u4_nopred",
                    (4096, 128) => "spmm_f32_s1d4_y1k32x128w32_u4_nopred",
                    (_, 32..=96) => k8,
                    _ => two_rows,
                };
                assert_eq!(pick(m, n, max, mean), want, "{m} rows, longest {max}, n = {n}");
            }
        }
        assert_eq!(pick(8192, 100, 890, 12.1), "spmm_f32_s1d4_y4k8x32w8_u4_pred");
        assert_eq!(pick(4096, 100, 472, 12.1), "spmm_f32_s1d4_y1k32x128w32_u4_pred", "step 66 at n rounded to 128");
        // More than 350 times the longest row's entries in all: two rows held to 128 registers, unsplit.
        assert_eq!(pick(65536, 256, 313, 4.0), "spmm_f32_s1d4_y2k16x128w16_u4_nopred_lb16");
        assert_eq!(pick(32768, 128, 445, 6.0), "spmm_f32_s1d4_y2k16x128w16_u4_nopred_lb16");
        // At n = 128 rows of more than 6 on average are split (step 66: 12288 rows of 39, longest 1024).
        assert_eq!(pick(12288, 128, 1024, 39.1), two_rows);
        assert_eq!(pick(32768, 128, 445, 6.1), two_rows);
        // At n = 256 and 512 too (step 67: 16384 rows of 40, longest 1024), at n = 512 from rows of more than
        // LONG_ROWS_HELD_MAX_MEAN (8, step 77); past n = 512 held.
        assert_eq!(LONG_ROWS_HELD_MAX_MEAN, 8.0);
        for (n, held_max) in [(256, 6.0), (512, 8.0)] {
            assert_eq!(pick(16384, n, 1024, 39.7), two_rows, "n = {n}");
            assert_eq!(pick(32768, n, 445, held_max + 0.1), two_rows, "n = {n}");
            assert_eq!(pick(32768, n, 445, held_max), "spmm_f32_s1d4_y2k16x128w16_u4_nopred_lb16", "n = {n}");
        }
        assert_eq!(pick(32768, 1024, 445, 8.1), "spmm_f32_s1d4_y2k16x128w16_u4_nopred_lb16");
        assert_eq!(pick(16384, 256, 475, 8.0), two_rows, "276 times");
        // Few rows at n = 32 keep the row split over four subwarps (2048 x 2048, mean 20, longest 473).
        assert_eq!(pick(2048, 32, 473, 20.0), "spmm_f32_s1d4_y8k8x32w8_u4_nopred_r4");
        // Not long: 256 entries, or sixteen times the mean.
        assert_ne!(pick(8192, 256, 256, 12.0), two_rows);
        assert_ne!(pick(8192, 256, 320, 20.0), two_rows);
    }

    #[test]
    fn short_rows_in_fewer_rows_at_n_1024_to_2048() {
        let pick = |m: usize, k: usize, n: usize, mean: f64, cv: f64| {
            let stats =
                RowStats { min: 0, max: (mean * 2.0) as usize, mean, cv, empty_rows: 0, columns_per_entry: None };
            SpmmConfig::select_with_stats(m, k, n, &stats, DType::F32)
        };
        let (two, k8) = (two_row_tile(DType::F32), bounded(k8_tile(DType::F32, 4, false), 32));
        // Step 66: rows of 3-6 over k <= 16384, of 3-10 over k <= 2048, cv <= 0.8, 3000-8191 rows, n = 1024-2048.
        for (m, k, n, mean, cv) in [
            (4960, 4960, 1024, 4.8, 0.76),
            (3000, 16384, 2048, 6.0, 0.0),
            (8191, 1024, 1152, 10.0, 0.5),
            (4096, 2048, 2048, 3.0, 0.8),
        ] {
            assert_eq!(pick(m, k, n, mean, cv), two, "{m} x {k}, n = {n}, mean {mean}, cv {cv}");
        }
        // Either side.
        for (m, k, n, mean, cv, why) in [
            (7434, 7434, 1024, 11.6, 0.16, "4elt: rows of 11.6"),
            (4096, 4096, 1024, 10.0, 0.0, "rows of 10 over k = 4096"),
            (4096, 2049, 1024, 6.1, 0.0, "rows of 6.1 over k = 2049"),
            (4096, 16385, 1024, 5.0, 0.0, "k = 16385"),
            (2999, 1024, 1024, 5.0, 0.0, "2999 rows"),
            (4096, 1024, 1024, 5.0, 0.81, "cv 0.81"),
            (4096, 1024, 2176, 5.0, 0.0, "n = 2176"),
        ] {
            assert_eq!(pick(m, k, n, mean, cv), k8, "{why}");
        }
        // Rows of 2.9 (longest 5): step 76's two-row tile in turn.
        assert_eq!(pick(4096, 1024, 1024, 2.9, 0.0), two_row_tile_in_turn());
        // 8192 rows over k >= 8192: step 61's tiles in turn.
        assert_eq!(pick(8192, 8192, 1024, 5.0, 0.0), k8_tile_in_turn());
        // n = 768 and 896 keep what they had.
        assert_eq!(pick(4096, 1024, 768, 5.0, 0.0), k8);
    }

    #[test]
    fn short_rows_in_fewer_rows_take_the_two_row_tile_in_turn() {
        let pick = |m: usize, k: usize, n: usize, max: usize, mean: f64, cv: f64| {
            SpmmConfig::select_with_stats(m, k, n, &rows_of(max, mean, cv), DType::F32)
        };
        let in_turn = two_row_tile_in_turn();
        // Step 76, measured: very short rows at n = 256-2048, short rows (up to 8, or 10 over k <= 4096) over k <
        // 8192 in 8192-16383 rows at n = 1024-2048.
        for (m, k, n, max, mean, cv) in [
            (9553, 1052, 256, 2, 2.0, 0.0),
            (7966, 3336, 2048, 3, 2.8, 0.15),
            (2350, 881, 512, 3, 1.1, 1.29),
            (2049, 4096, 1024, 16, 2.99, 0.5),
            (16383, 8192, 256, 4, 2.5, 0.2),
            (12200, 2720, 1024, 5, 4.4, 0.11),
            (8192, 4096, 2048, 64, 10.0, 1.0),
            (8192, 8191, 1024, 16, 8.0, 0.2),
            (16064, 2183, 1152, 8, 7.2, 0.06),
        ] {
            assert_eq!(pick(m, k, n, max, mean, cv), in_turn, "{m} x {k}, n = {n}, mean {mean}");
        }
        // Either side: 2048 rows, 16384 rows (step 61's rule there), a row of 17 among very short ones, n = 128 or
        // not a multiple of 128, short rows in 8191 rows or over k = 8192 or of 10.1 or cv 1.01 or longest 65, short
        // rows at n = 512, no entries.
        for (m, k, n, max, mean, cv, why) in [
            (2048, 4096, 1024, 3, 2.0, 0.0, "2048 rows"),
            (16384, 16384, 1024, 3, 2.0, 0.0, "16384 rows over k = 16384"),
            (8192, 4096, 512, 17, 2.0, 0.5, "a row of 17"),
            (8192, 4096, 128, 3, 2.0, 0.0, "n = 128"),
            (8192, 4096, 1000, 3, 2.0, 0.0, "n = 1000"),
            (8191, 4096, 1024, 8, 5.0, 0.1, "short rows in 8191 rows"),
            (8192, 8192, 1024, 8, 5.0, 0.1, "short rows over k = 8192"),
            (8192, 4096, 1024, 20, 10.1, 0.1, "rows of 10.1"),
            (8192, 4097, 1024, 20, 8.1, 0.1, "rows of 8.1 over k = 4097"),
            (8192, 4096, 1024, 20, 5.0, 1.01, "cv 1.01"),
            (8192, 4096, 1024, 65, 5.0, 0.9, "a row of 65"),
            (8192, 4096, 512, 8, 5.0, 0.1, "short rows at n = 512"),
            (8192, 4096, 1024, 0, 0.0, 0.0, "no entries"),
        ] {
            assert_ne!(pick(m, k, n, max, mean, cv), in_turn, "{why}");
        }
    }

    /// [`tiny_launch_tile`]: in few rows, where the bounded k = 8 tile would run, n = 32 takes two rows of 16
    /// threads (scalar, guarded), n = 64 the eight-row tile, n = 96 a warp per row (guarded); one row past each
    /// bound the k = 8 tile stays, and n = 128 and 160 do not take the n = 32 tile. Rows like the real matrices of
    /// step 98 (pores_1, lund_a, utm300, west0479, well1850) and uniform rows of 10.
    #[test]
    fn tiny_launches_take_32_entry_tiles() {
        let f32 = DType::F32;
        let k8 = bounded(k8_tile(f32, 4, false), 32);
        let (n32, n64) = (tile(f32, 1, 1, 2, 32, 32, 16, true), eight_row_tile(f32));
        let n96 = SpmmConfig { predicate_loads: true, ..warp_per_row_tile(f32) };
        let sel = |m: usize, n: usize, max: usize, mean: f64, cv: f64| {
            SpmmConfig::select_with_stats(m, m, n, &rows_of(max, mean, cv), f32)
        };
        for (m, max, mean, cv) in
            [(30, 8, 6.0, 0.2), (147, 21, 16.7, 0.2), (300, 33, 10.5, 0.6), (479, 12, 3.9, 0.6), (800, 20, 10.0, 0.3)]
        {
            assert_eq!(sel(m, 32, max, mean, cv), n32, "{m} rows of {mean}, n = 32");
            assert_eq!(sel(m, 64, max, mean, cv), n64, "{m} rows of {mean}, n = 64");
            assert_eq!(sel(m, 96, max, mean, cv), n96, "{m} rows of {mean}, n = 96");
        }
        assert_eq!(sel(1850, 64, 8, 4.7, 0.1), n64, "well1850, n = 64");
        assert_eq!(sel(TINY_LAUNCH_ROWS_N64, 64, 20, 10.0, 0.3), n64, "the bound at n = 64");
        for (m, n) in [(TINY_LAUNCH_ROWS + 1, 32), (TINY_LAUNCH_ROWS_N64 + 1, 64), (TINY_LAUNCH_ROWS + 1, 96)] {
            assert_eq!(sel(m, n, 20, 10.0, 0.3), k8, "{m} rows of 10, n = {n}");
        }
        for n in [128, 160] {
            assert_ne!(sel(300, n, 20, 10.0, 0.3), n32, "n = {n}");
        }
    }

    /// Row statistics of the given longest, mean and cv (none empty, columns not shared; the shortest row, 1, is not
    /// read by the selection).
    fn rows_of(max: usize, mean: f64, cv: f64) -> RowStats {
        RowStats { min: 1, max, mean, cv, empty_rows: 0, columns_per_entry: None }
    }

    /// The f32 choice for rows of the given longest, mean and cv ([`rows_of`]).
    fn power_law_pick(m: usize, k: usize, n: usize, max: usize, mean: f64, cv: f64) -> String {
        SpmmConfig::select_with_stats(m, k, n, &rows_of(max, mean, cv), DType::F32).kernel_name()
    }

    #[test]
    fn power_law_rows_in_many_rows_at_n_64_take_the_four_row_tile_where_the_longest_row_fits() {
        let four = "spmm_f32_s2d4_y4k16x64w8_u4_nopred_lb8";
        // Step 76, measured: longest rows at 1.2-1.9 times a resident row's share of the four-row tile's steps.
        for (m, k, max, mean, cv) in
            [(40730, 269, 269, 4.0, 1.33), (64502, 2895, 369, 4.0, 1.35), (42100, 380, 380, 4.5, 1.44)]
        {
            assert_eq!(power_law_pick(m, k, 64, max, mean, cv), four, "{m} x {k}");
            // Not at n = 32 or 128.
            assert_ne!(power_law_pick(m, k, 32, max, mean, cv), four, "{m} x {k}, n = 32");
            assert_ne!(power_law_pick(m, k, 128, max, mean, cv), four, "{m} x {k}, n = 128");
        }
        // Either side: 3.7-5.5 times the share (losses), 16383 rows, and the bound itself.
        for (m, k, max, mean, cv, why) in [
            (40806, 2966, 743, 5.0, 1.54, "40806 x 2966"),
            (28100, 1543, 560, 4.7, 1.45, "28100 x 1543"),
            (24188, 668, 668, 5.6, 1.62, "24188 x 668"),
            (16383, 269, 269, 4.0, 1.33, "16383 rows"),
        ] {
            assert_ne!(power_law_pick(m, k, 64, max, mean, cv), four, "{why}");
        }
        let four_row = four_row_tile(DType::F32);
        let at = |m: usize, max: usize| longest_row_steps_over_share(&four_row, m, 64, &rows_of(max, 4.0, 1.3));
        assert!(at(40730, 269) <= LONG_ROWS_UNSPLIT_SHARE && at(40730, 700) > LONG_ROWS_UNSPLIT_SHARE);
    }

    #[test]
    fn power_law_rows_at_narrow_n_take_32_entry_tiles() {
        let pick = power_law_pick;
        let (n32, n64, n128) = (
            "spmm_f32_s1d2_y2k32x32w16_u4_nopred",
            "spmm_f32_s1d4_y2k32x64w16_u4_nopred",
            "spmm_f32_s1d4_y1k32x128w32_u4_nopred",
        );
        // Step 66's power-law matrices (m, k, longest, mean, cv): rows short or long for the mean, skewed or not.
        for (m, k, max, mean, cv) in [
            (4096, 512, 512, 47.1, 1.01),
            (2048, 8192, 97, 3.8, 1.03),
            (3072, 4096, 1678, 16.9, 2.79),
            (4096, 2048, 543, 4.2, 2.44),
            (8192, 8192, 290, 4.1, 1.73),
        ] {
            assert_eq!(pick(m, k, 32, max, mean, cv), n32, "{m} x {k}, mean {mean}, n = 32");
            assert_eq!(pick(m, k, 64, max, mean, cv), n64, "{m} x {k}, mean {mean}, n = 64");
            let at_128 = if m <= 4096 { n128 } else { "spmm_f32_s1d4_y2k16x128w16_u4_nopred" };
            assert_eq!(pick(m, k, 128, max, mean, cv), at_128, "{m} x {k}, mean {mean}, n = 128");
        }
        // n = 64 in 8192 rows only on rows of up to 6 on average; n = 128 only up to 4096 rows.
        assert_ne!(pick(8192, 2048, 64, 455, 9.9, 1.23), n64);
        assert_ne!(pick(6144, 1024, 128, 315, 6.0, 1.37), n128);
        // Where a narrow n rounds up to 32 or 64, the guarded twin.
        assert_eq!(pick(4096, 512, 28, 512, 47.1, 1.01), "spmm_f32_s1d2_y2k32x32w16_u4_pred");
        assert_eq!(pick(4096, 512, 60, 512, 47.1, 1.01), "spmm_f32_s1d4_y2k32x64w16_u4_pred");
        // Either side: rows, cv, mean, k; the row split's tiles first (2048 rows, mean 23, longest 512: 256 blocks).
        let base = (4096, 2048, 32, 835, 46.6, 0.98);
        let others = [
            (2047, base.1, base.2, base.3, base.4, base.5),
            (8193, base.1, base.2, base.3, base.4, base.5),
            (base.0, 8193, base.2, base.3, base.4, base.5),
            (base.0, base.1, base.2, base.3, 50.1, base.5),
            (base.0, base.1, base.2, base.3, base.4, 0.89),
            (base.0, base.1, 256, base.3, base.4, base.5),
            (2048, 512, 32, 512, 23.4, 1.03),
        ];
        assert_eq!(pick(base.0, base.1, base.2, base.3, base.4, base.5), n32);
        for (m, k, n, max, mean, cv) in others {
            let got = pick(m, k, n, max, mean, cv);
            assert!(![n32, n64, n128].contains(&got.as_str()), "{m} x {k}, n = {n}, mean {mean}, cv {cv}: {got}");
        }
        assert_eq!(pick(2048, 512, 32, 512, 23.4, 1.03), "spmm_f32_s1d4_y8k8x32w8_u4_nopred_r4");
        // Uniform rows keep the k = 8 tile.
        assert_eq!(pick(4096, 512, 32, 13, 12.0, 0.0), "spmm_f32_s1d4_y4k8x32w8_u4_nopred_lb32");
    }

    #[test]
    fn power_law_rows_at_n_32_in_8193_to_16384_rows_take_the_k16_tile() {
        let pick = power_law_pick;
        let k16 = "spmm_f32_s2d4_y4k16x32w8_u4_nopred";
        // Step 67's power-law matrices (m, k, longest, mean, cv), skewed or not.
        for (m, k, max, mean, cv) in [
            (10240, 2048, 1321, 6.0, 1.93),
            (12288, 16384, 1902, 12.4, 2.36),
            (14336, 8192, 3187, 19.8, 2.09),
            (16384, 1024, 1024, 39.4, 1.05),
        ] {
            assert_eq!(pick(m, k, 32, max, mean, cv), k16, "{m} x {k}, mean {mean}");
            assert_ne!(pick(m, k, 64, max, mean, cv), k16, "{m} x {k}, mean {mean}, n = 64");
        }
        // Where n = 28 rounds up to 32, the guarded twin.
        assert_eq!(pick(12288, 4096, 28, 1201, 11.8, 2.0), "spmm_f32_s2d4_y4k16x32w8_u4_pred");
        // Either side: rows, k, mean, cv. 8192 rows over k <= 8192 are rule 1's.
        let base = (12288, 4096, 32, 1201, 11.8, 2.0);
        assert_eq!(pick(base.0, base.1, base.2, base.3, base.4, base.5), k16);
        assert_eq!(pick(8193, base.1, base.2, base.3, base.4, base.5), k16);
        assert_eq!(pick(16384, 16384, base.2, base.3, base.4, base.5), k16);
        assert_eq!(pick(8192, base.1, base.2, base.3, base.4, base.5), "spmm_f32_s1d2_y2k32x32w16_u4_nopred");
        for (m, k, n, max, mean, cv) in [
            (16385, base.1, base.2, base.3, base.4, base.5),
            (base.0, 16385, base.2, base.3, base.4, base.5),
            (base.0, base.1, base.2, base.3, 50.1, base.5),
            (base.0, base.1, base.2, base.3, base.4, 0.89),
        ] {
            assert_ne!(pick(m, k, n, max, mean, cv), k16, "{m} x {k}, n = {n}, mean {mean}, cv {cv}");
        }
    }

    #[test]
    fn longest_rows_on_the_critical_path_take_32_entry_tiles() {
        let (r4, narrow, warp, two_warps, block) = (
            "spmm_f32_s1d4_y8k8x32w8_u4_nopred_r4",
            "spmm_f32_s1d2_y2k32x32w16_u4_nopred",
            "spmm_f32_s1d4_y1k32x128w32_u4_nopred",
            "spmm_f32_s1d4_y2k32x128w32_u4_nopred_r2",
            "spmm_f32_s1d4_y32k16x64w16_u4_nopred",
        );
        // Step 68's power-law matrices (m, k, n, longest, mean, cv) and the tile each now takes.
        for (m, k, n, max, mean, cv, want) in [
            (3934, 880, 32, 880, 145.0, 0.81, r4),
            (2968, 883, 64, 883, 182.1, 0.69, r4),
            (63698, 5409, 32, 5409, 388.6, 0.99, narrow),
            (8287, 761, 64, 761, 64.7, 0.99, narrow),
            (3657, 9793, 128, 227, 16.7, 0.89, warp),
            (3024, 4986, 256, 256, 11.7, 1.07, warp),
            (2442, 904, 128, 904, 132.2, 0.79, two_warps),
            (2169, 3844, 256, 600, 42.4, 0.9, two_warps),
            (2114, 1187, 1024, 198, 3.1, 1.69, block),
            (780, 745, 2048, 622, 39.3, 0.98, block),
        ] {
            assert_eq!(power_law_pick(m, k, n, max, mean, cv), want, "{m} x {k}, n = {n}, longest {max}, mean {mean}");
        }
        // The bound itself, on the two-row tile held to 16 blocks per SM: 4096 rows of 5 at n = 256 are 2.55 steps
        // per resident subwarp; a longest row of 113 entries takes 8 steps of 16 (3.1 times), of 112 takes 7 (2.7).
        let stats = |max: usize, mean: f64| rows_of(max, mean, 1.0);
        let two_row = two_row_tile(DType::F32);
        let ratio = longest_row_steps_over_share(&two_row, 4096, 256, &stats(113, 5.0));
        assert!((ratio - 8.0 / (4096.0 * (1.0 + 5.0 / 16.0) * 2.0 / 4224.0)).abs() < 1e-9, "{ratio}");
        assert_eq!(longest_row_tile(&two_row, 4096, 256, &stats(113, 5.0)).map(|c| c.kernel_name()), Some(warp.into()));
        assert_eq!(longest_row_tile(&two_row, 4096, 256, &stats(112, 5.0)), None);
        // Under one wave the mean row's steps stand for the share: 100 rows of 5, longest 64 (4 steps of 16 over 1.3).
        assert_eq!(longest_row_steps_over_share(&two_row, 100, 128, &stats(64, 5.0)), 4.0 / (1.0 + 5.0 / 16.0));
        // Either side of the other bounds, on the same tile walking a row of 1000 or 4000 entries whole.
        let pick = |m: usize, n: usize, max: usize, mean: f64| {
            longest_row_tile(&two_row, m, n, &stats(max, mean)).map(|c| c.kernel_name())
        };
        assert_eq!(pick(8192, 32, 1000, 50.1).as_deref(), Some(r4));
        assert_eq!(pick(8193, 64, 1000, 50.1).as_deref(), Some(narrow));
        assert_eq!(pick(8192, 32, 1000, 50.0), None, "rows of 50 at n = 32-64");
        assert_eq!(pick(8192, 256, 4000, 39.9).as_deref(), Some(warp));
        assert_eq!(pick(8193, 128, 4000, 39.9), None, "rows of under 40 past 8192 rows");
        assert_eq!(pick(8192, 512, 4000, 39.9), None, "the two-row tile at n = 512");
        let k8 = bounded(k8_tile(DType::F32, 4, false), 32);
        assert_eq!(longest_row_tile(&k8, 8192, 512, &stats(4000, 39.9)).map(|c| c.kernel_name()), Some(warp.into()));
        assert_eq!(pick(16384, 128, 1000, 40.0).as_deref(), Some(two_warps));
        assert_eq!(pick(16384, 512, 4000, 40.0).as_deref(), Some(two_warps));
        assert_eq!(pick(16385, 256, 4000, 40.0), None, "past 16384 rows at n = 128-512");
        assert_eq!(pick(4096, 1024, 1000, 20.0).as_deref(), Some(block));
        assert_eq!(pick(4096, 2048, 4000, 20.0).as_deref(), Some(block));
        assert_eq!(pick(4097, 1024, 4000, 20.0), None, "past 4096 rows at n = 1024-2048");
        for n in [16, 96, 640, 768, 1088, 2176, 4096] {
            assert_eq!(pick(1024, n, 1000, 60.0), None, "n = {n} was not measured");
        }
        // n = 384 (step 69): two warps per row on rows of 40 or more; on shorter ones (step 70) the unbounded
        // two-row tile in place of the k = 8 tile only, in up to 8192 rows.
        assert_eq!(pick(16384, 384, 4000, 40.0).as_deref(), Some(two_warps));
        assert_eq!(pick(16385, 384, 4000, 40.0), None, "past 16384 rows at n = 384");
        assert_eq!(pick(8192, 384, 4000, 39.9), None, "rows of under 40 at n = 384 on the two-row tile");
        // Step 69's other branches, in place of the k = 8 tile (here held to 64 registers): four subwarps per row at
        // n = 32-64 on rows of at most 12 in 512-3072 rows; the k = 16 tile at n = 32 in 8192-65536 rows of at most 16; the
        // unbounded two-row tile at n = 128 in up to 24576 rows of under 40.
        let on_k8 =
            |m: usize, n: usize, mean: f64| longest_row_tile(&k8, m, n, &stats(1000, mean)).map(|c| c.kernel_name());
        let (k16, two_rows) = ("spmm_f32_s2d4_y4k16x32w8_u4_nopred", "spmm_f32_s1d4_y2k16x128w16_u4_nopred");
        assert_eq!(on_k8(3072, 32, 5.0).as_deref(), Some(r4));
        assert_eq!(on_k8(3072, 64, 12.0).as_deref(), Some(r4));
        assert_eq!(on_k8(3072, 64, 12.1), None, "rows of 12.1 in 3072 rows at n = 64");
        assert_eq!(on_k8(512, 32, 5.0).as_deref(), Some(r4));
        assert_eq!(on_k8(511, 32, 5.0), None, "rows of 5 in 511 rows at n = 32");
        assert_eq!(on_k8(3073, 32, 5.0), None, "rows of 5 in 3073-4095 rows at n = 32");
        assert_eq!(pick(3072, 32, 1000, 5.0), None, "four subwarps in place of the k = 8 tile only");
        assert_eq!(on_k8(2400, 96, 12.0).as_deref(), Some(r4));
        assert_eq!(on_k8(512, 96, 2.0).as_deref(), Some(r4));
        assert_eq!(on_k8(511, 96, 2.0), None, "under 512 rows at n = 96");
        assert_eq!(on_k8(2400, 96, 12.1), None, "rows of 12.1 at n = 96");
        // Step 71: the k = 16 tile at n = 32 from 4096 rows (step 69: from 8192).
        for (m, mean, taken) in [(4096, 16.0, true), (65536, 16.0, true), (4095, 16.0, false), (65537, 2.0, false)] {
            assert_eq!(on_k8(m, 32, mean).as_deref() == Some(k16), taken, "{m} rows of {mean} at n = 32");
        }
        assert_eq!(on_k8(20000, 32, 16.1), None);
        // Step 71: at n = 64 past four subwarps' rows, the k = 16 tile over 64 columns held to 8 blocks per SM, in
        // 3073-65536 rows of at most 16.
        let four_rows = "spmm_f32_s2d4_y4k16x64w8_u4_nopred_lb8";
        for (m, mean, taken) in [(3073, 5.0, true), (65536, 16.0, true), (65537, 2.0, false), (20000, 16.1, false)] {
            assert_eq!(on_k8(m, 64, mean).as_deref() == Some(four_rows), taken, "{m} rows of {mean} at n = 64");
        }
        assert_eq!(pick(20000, 64, 1000, 2.0), None, "in place of the k = 8 tile only");
        // Step 71: at n = 96 the k = 16 tile in 2401-8192 rows of at most 16 where the k = 8 tile (held to 32 blocks
        // per SM, 16896 resident rows of 3 column tiles) walks the longest row for 7 times its share or more: 8192
        // rows of 2 are 1.82 steps each, a longest row of 97 takes 13 steps of 8 (7.15 times), of 96 takes 12 (6.6).
        // In 8193-65536 rows, the unbounded two-row tile over 128 columns, predicated.
        let on_k8_longest =
            |m: usize, max: usize, mean: f64| longest_row_tile(&k8, m, 96, &stats(max, mean)).map(|c| c.kernel_name());
        let share = 8192.0 * 1.25 * 3.0 / 16896.0;
        assert!((longest_row_steps_over_share(&k8, 8192, 96, &stats(97, 2.0)) - 13.0 / share).abs() < 1e-9);
        assert_eq!(on_k8_longest(8192, 97, 2.0).as_deref(), Some(k16));
        assert_eq!(on_k8_longest(8192, 96, 2.0), None, "under 7 times the share at n = 96");
        assert_eq!(on_k8(2401, 96, 2.0).as_deref(), Some(k16));
        assert_eq!(on_k8(8192, 96, 16.0).as_deref(), Some(k16));
        assert_eq!(on_k8(8192, 96, 16.1), None, "rows of 16.1 at n = 96");
        let two_rows_pred = "spmm_f32_s1d4_y2k16x128w16_u4_pred";
        assert_eq!(on_k8_longest(8193, 96, 2.0).as_deref(), Some(two_rows_pred), "past 8192 rows, any ratio from 3");
        assert_eq!(on_k8(65536, 96, 16.0).as_deref(), Some(two_rows_pred));
        assert_eq!(on_k8(65537, 96, 2.0), None, "past 65536 rows at n = 96");
        assert_eq!(on_k8(20000, 96, 16.1), None, "rows of 16.1 at n = 96");
        assert_eq!(pick(8192, 96, 1000, 2.0), None, "the k = 16 tile at n = 96 in place of the k = 8 tile only");
        assert_eq!(pick(8193, 96, 1000, 2.0), None, "the two-row tile at n = 96 in place of the k = 8 tile only");
        assert_eq!(pick(20000, 32, 1000, 2.0), None, "in place of the k = 8 tile only");
        assert_eq!(on_k8(24576, 128, 39.9).as_deref(), Some(two_rows));
        assert_eq!(on_k8(8193, 128, 2.0).as_deref(), Some(two_rows));
        assert_eq!(on_k8(24577, 128, 2.0), None, "past 24576 rows at n = 128");
        assert_eq!(on_k8(16384, 256, 2.0), None, "the two-row tile at n = 128 and 384 only");
        assert_eq!(on_k8(8192, 384, 39.9).as_deref(), Some(two_rows));
        assert_eq!(on_k8(2048, 384, 2.0).as_deref(), Some(two_rows));
        assert_eq!(on_k8(8193, 384, 2.0), None, "past 8192 rows at n = 384");
        assert_eq!(on_k8(8192, 384, 40.0).as_deref(), Some(two_warps), "rows of 40 at n = 384: two warps per row");
        // Step 70: the thirty-two-row block in place of the k = 8 tile at multiples of 64 from 192 to 960 that have no
        // branch of their own, in up to 16384 rows of at most 64; at 192, 320, ... through the rounded width too.
        for n in [192, 320, 448, 576, 640, 704, 768, 832, 896, 960] {
            assert_eq!(on_k8(16384, n, 2.0).as_deref(), Some(block), "n = {n}");
            assert_eq!(on_k8(16385, n, 2.0), None, "past 16384 rows at n = {n}");
            assert_eq!(on_k8(2048, n, 64.0).as_deref(), Some(block), "n = {n}");
            assert_eq!(on_k8(2048, n, 64.1), None, "rows of 64.1 at n = {n}");
            assert_eq!(power_law_pick(2144, 16099, n, 179, 7.8, 1.07), block, "step 70's 2144 x 16099, n = {n}");
        }
        // Step 72: at the other multiples of 16 from 144 to 960 too, guarded in n where 64 does not divide it; the
        // rounded width reaches them (144 -> 256, 160 -> 256, 272 -> 384).
        let block_pred = "spmm_f32_s1d4_y32k16x64w16_u4_pred";
        for n in [144, 160, 176, 208, 224, 240, 272, 336, 400, 464, 944] {
            assert_eq!(on_k8(16384, n, 2.0).as_deref(), Some(block_pred), "n = {n}");
            assert_eq!(on_k8(16385, n, 2.0), None, "past 16384 rows at n = {n}");
            assert_eq!(on_k8(2048, n, 64.1), None, "rows of 64.1 at n = {n}");
            if n != 240 {
                // At n = 240 the choice at the rounded width 256 is the two-row tile, which the rule does not replace.
                assert_eq!(power_law_pick(2144, 16099, n, 179, 7.8, 1.07), block_pred, "2144 x 16099, n = {n}");
            }
        }
        for n in [136, 152, 1088] {
            assert_eq!(on_k8(4096, n, 5.0), None, "n = {n}");
            assert!(!power_law_pick(2144, 16099, n, 179, 7.8, 1.07).contains("y32k16x64w16"), "n = {n}");
        }
        // Step 72: at n = 40, 48 and 56 (the rounded width 64), two rows of 16 threads over 64 columns taking 32
        // entries a step, guarded, in 1024-12288 rows of at most 64.
        let two_rows_k32 = "spmm_f32_s2d4_y2k32x64w16_u4_pred";
        for n in [40, 48, 56] {
            assert_eq!(on_k8(1024, n, 64.0).as_deref(), Some(two_rows_k32), "n = {n}");
            assert_eq!(on_k8(12288, n, 2.0).as_deref(), Some(two_rows_k32), "n = {n}");
            assert_eq!(on_k8(1023, n, 2.0), None, "under 1024 rows at n = {n}");
            assert_eq!(on_k8(12289, n, 2.0), None, "past 12288 rows at n = {n}");
            assert_eq!(on_k8(4096, n, 64.1), None, "rows of 64.1 at n = {n}");
            assert_eq!(power_law_pick(10437, 2115, n, 239, 3.0, 1.2), two_rows_k32, "step 71's 10437 x 2115, n = {n}");
        }
        for n in [36, 44, 52, 60] {
            assert_eq!(on_k8(4096, n, 5.0), None, "n = {n}");
        }
        assert_eq!(pick(4096, 192, 1000, 5.0), None, "the block in place of the k = 8 tile only");
        // Tiles that already take 32 entries a step, split rows, or hold 32 rows; rows the launch cuts into pieces;
        // f16.
        let rows = stats(1000, 60.0);
        for config in [warp_per_row_tile(DType::F32), split_row_k8_tile(DType::F32), thirty_two_row_tile(DType::F32)] {
            assert_eq!(longest_row_tile(&config, 2048, 1024, &rows), None, "{config}");
        }
        let skewed = stats(3000, 40.0);
        assert!(super::super::split::use_split(
            &skewed,
            4096,
            163840,
            128,
            0,
            &k8_tile(DType::F32, 4, false),
            H100_SMS
        ));
        assert_eq!(longest_row_tile(&k8_tile(DType::F32, 4, false), 4096, 128, &skewed), None);
        assert!(longest_row_tile(&bounded(k8_tile(DType::F32, 4, false), 32), 4096, 128, &skewed).is_some());
        assert_eq!(longest_row_tile(&two_row_tile(DType::F16), 4096, 256, &stats(113, 5.0)), None);
    }

    #[test]
    fn half_longest_rows_on_the_critical_path_take_a_warp_per_row_over_256_columns() {
        let stats = |max: usize, mean: f64| rows_of(max, mean, 1.0);
        for dtype in [DType::F16, DType::Bf16] {
            let warp = tile(dtype, 1, 8, 1, 32, 256, 32, false);
            let k8 = tile(dtype, 1, 8, 4, 8, 64, 8, false);
            // 8192 rows of 4 at n = 256 on the k = 8 tile (32 blocks per SM, 16896 subwarps): 4 column tiles, 2.9
            // steps per subwarp; a longest row of 65 entries takes 9 steps of 8 (3.1 times), of 64 takes 8 (2.75).
            let share = 8192.0 * (1.0 + 4.0 / 8.0) * 4.0 / 16896.0;
            assert_eq!(longest_row_steps_over_share(&k8, 8192, 256, &stats(65, 4.0)), 9.0 / share);
            assert_eq!(longest_row_tile_half(&k8, 8192, 256, &stats(65, 4.0)), Some(warp));
            assert_eq!(longest_row_tile_half(&k8, 8192, 256, &stats(64, 4.0)), None);
            assert_eq!(longest_row_tile_half(&bounded(k8, 32), 8192, 256, &stats(65, 4.0)), Some(warp));
            // Either side of n (256-2048, a multiple of 256) and of 8192 rows, on the tile held to 64 registers (no
            // piece path: it walks even a skewed row whole).
            let (held, long) = (bounded(k8, 32), stats(8000, 10.0));
            let f16 = dtype == DType::F16;
            for (m, n, taken) in [(8192, 256, true), (8192, 2048, f16), (1024, 768, f16), (32769, 256, false)] {
                assert_eq!(longest_row_tile_half(&held, m, n, &long).is_some(), taken, "{dtype:?}, {m} rows, n = {n}");
            }
            // 8193-32768 rows of at most 64 (step 70), at n = 256 and 512: f16 the warp per row, bf16 two rows of 16
            // threads over 256 columns.
            let past = if f16 { warp } else { tile(dtype, 1, 8, 2, 16, 256, 16, false) };
            let many = stats(8000, 2.0);
            assert_eq!(longest_row_tile_half(&held, 8193, 256, &long), Some(past));
            assert_eq!(longest_row_tile_half(&held, 32768, 256, &many), Some(past));
            assert_eq!(longest_row_tile_half(&held, 20000, 512, &many), Some(past));
            assert_eq!(longest_row_tile_half(&held, 16384, 256, &stats(8000, 64.0)), Some(past));
            assert_eq!(longest_row_tile_half(&held, 16384, 256, &stats(8000, 64.1)), None);
            for n in [768, 1024, 2048] {
                assert_eq!(longest_row_tile_half(&held, 20000, n, &many), None, "n = {n} past 8192 rows");
            }
            for n in [320, 2304, 4096] {
                assert_eq!(longest_row_tile_half(&held, 1024, n, &long), None, "n = {n}");
            }
            // At n = 128 the same tile without the bound (step 70), not the warp per row.
            assert_eq!(longest_row_tile_half(&held, 1024, 128, &long), Some(k8));
            // Other tiles, rows cut into pieces at this launch, f32.
            assert_eq!(longest_row_tile_half(&tile(dtype, 2, 8, 4, 16, 64, 8, false), 1024, 512, &long), None);
            assert_eq!(longest_row_tile_half(&tile(dtype, 1, 8, 2, 16, 256, 16, false), 1024, 512, &long), None);
            let skewed = stats(3000, 40.0);
            assert!(super::super::split::use_split(&skewed, 4096, 163840, 512, 0, &k8, H100_SMS));
            assert_eq!(longest_row_tile_half(&k8, 4096, 512, &skewed), None);
        }
        assert_eq!(longest_row_tile_half(&k8_tile(DType::F32, 4, false), 1024, 512, &stats(8000, 10.0)), None);
        // Through the selection: step 68's power-law 611 x 22714 (rows of 28, longest 291) at n = 2048.
        let chosen = SpmmConfig::select_with_stats(611, 22714, 2048, &rows_of(291, 27.5, 0.78), DType::F16);
        assert_eq!(chosen.kernel_name(), "spmm_f16_s1d8_y1k32x256w32_u4_nopred");
    }

    #[test]
    fn half_longest_rows_on_the_critical_path_at_n_32_to_96() {
        use crate::spmm::tensor_core::{BlockCounts, TensorCoreConfig};
        use crate::spmm::SpmmKernel;
        let stats = |max: usize, mean: f64| rows_of(max, mean, 1.0);
        for dtype in [DType::F16, DType::Bf16] {
            let narrow = TensorCoreConfig { dtype, window: 16, tiles_n: 4 };
            let wide = TensorCoreConfig { dtype, window: 64, tiles_n: 16 };
            let k8_32 = k8_tile(dtype, 4, true);
            let k8_64 = tile(dtype, 1, 8, 4, 8, 64, 8, true);
            // 20000 rows of 2 at n = 32 on the k = 8 tile over 32 columns (32 blocks per SM, 16896 subwarps): 1.48
            // steps per subwarp; a longest row of 33 entries takes 5 steps of 8 (3.4 times), of 32 takes 4 (2.7).
            let share = 20000.0 * (1.0 + 2.0 / 8.0) / 16896.0;
            assert_eq!(longest_row_steps_over_share(&k8_32, 20000, 32, &stats(33, 2.0)), 5.0 / share);
            assert_eq!(longest_row_windows_half(&k8_32, 20000, 32, &stats(33, 2.0)), Some(narrow));
            assert_eq!(longest_row_windows_half(&k8_32, 20000, 32, &stats(32, 2.0)), None);
            // At n = 96 the tile over 64 columns runs two column tiles: 2.96 steps per subwarp. A longest row of 89
            // takes 12 steps (4.05 times), of 88 takes 11 (3.7: on the critical path, but under 4).
            assert_eq!(longest_row_windows_half(&k8_64, 20000, 96, &stats(89, 2.0)), Some(wide));
            assert_eq!(longest_row_windows_half(&k8_64, 20000, 96, &stats(88, 2.0)), None);
            // The range: 8192-65536 rows, rows of at most 64 on average, the longest at most 3072.
            let long = stats(200, 2.0);
            for (m, taken) in [(8192, true), (65536, true), (8191, false), (65537, false)] {
                assert_eq!(longest_row_windows_half(&k8_32, m, 32, &long).is_some(), taken, "{m} rows");
            }
            assert!(longest_row_rows_half(20000, &stats(3072, 64.0)));
            assert!(!longest_row_rows_half(20000, &stats(3072, 64.1)));
            assert!(!longest_row_rows_half(20000, &stats(3073, 64.0)));
            // Step 73: n = 80 as n = 96 (two column tiles of 64, the same steps); n = 160 (three: 4.44 steps per
            // subwarp) the 16-row windows, 32 columns a warp, from 5 times the share: a longest row of 177 takes 23
            // steps (5.18 times), of 176 takes 22 (4.96).
            assert_eq!(longest_row_windows_half(&k8_64, 20000, 80, &stats(89, 2.0)), Some(wide));
            assert_eq!(longest_row_windows_half(&k8_64, 20000, 80, &stats(88, 2.0)), None);
            assert_eq!(longest_row_windows_half(&k8_64, 20000, 160, &stats(177, 2.0)), Some(narrow));
            assert_eq!(longest_row_windows_half(&k8_64, 20000, 160, &stats(176, 2.0)), None);
            assert_eq!(longest_row_windows_half(&k8_64, 8191, 160, &long), None, "under 8192 rows at n = 160");
            // Step 74: n = 112 (two column tiles, 2.96 steps per subwarp in 20000 rows of 2) the 64-row windows from 7
            // times the share: a longest row of 161 takes 21 steps (7.1 times), of 160 takes 20 (6.8).
            assert_eq!(longest_row_windows_half(&k8_64, 20000, 112, &stats(161, 2.0)), Some(wide));
            assert_eq!(longest_row_windows_half(&k8_64, 20000, 112, &stats(160, 2.0)), None);
            // f16 at n = 224 (step 73): a warp per row over 256 columns, guarded, in 4096-32768 rows of at most 64;
            // bf16 keeps its tile.
            let warp_224 = SpmmConfig { predicate_loads: true, ..tile(dtype, 1, 8, 1, 32, 256, 32, false) };
            let longest_250 = stats(250, 2.0);
            for (m, mean, taken) in [(4096, 64.0, true), (32768, 2.0, true), (4095, 2.0, false), (32769, 2.0, false)] {
                let rows = if mean == 2.0 { longest_250.clone() } else { stats(1000, mean) };
                let want = (taken && dtype == DType::F16).then_some(warp_224);
                assert_eq!(longest_row_tile_half(&k8_64, m, 224, &rows), want, "{dtype} {m} rows of {mean}");
            }
            assert_eq!(longest_row_tile_half(&k8_64, 20000, 224, &stats(250, 64.1)), None);
            // Other widths, tiles that take 32 entries a step or split rows, f32.
            for n in [64, 128, 192, 256] {
                assert_eq!(longest_row_windows_half(&k8_64, 20000, n, &long), None, "n = {n}");
            }
            assert_eq!(longest_row_windows_half(&tile(dtype, 4, 4, 4, 32, 32, 8, true), 20000, 32, &long), None);
            assert_eq!(longest_row_windows_half(&tile(dtype, 1, 1, 1, 32, 32, 32, true), 20000, 32, &long), None);
            // n = 64: the k = 16 tile in place of the k = 8 tile over 64 columns (held to 64 registers or not).
            let k16 = tile(dtype, 2, 8, 4, 16, 64, 8, false);
            let held = bounded(tile(dtype, 1, 8, 4, 8, 64, 8, false), 32);
            assert_eq!(longest_row_tile_half(&held, 20000, 64, &stats(33, 2.0)), Some(k16));
            assert_eq!(longest_row_tile_half(&held, 20000, 64, &stats(32, 2.0)), None);
            assert_eq!(longest_row_tile_half(&held, 8191, 64, &long), None);
            assert_eq!(longest_row_tile_half(&held, 57344, 64, &stats(1000, 2.0)), Some(k16));
            assert_eq!(longest_row_tile_half(&held, 57345, 64, &stats(1000, 2.0)), None);
            assert_eq!(longest_row_tile_half(&held, 20000, 64, &stats(1000, 64.0)), Some(k16));
            assert_eq!(longest_row_tile_half(&held, 20000, 64, &stats(1000, 64.1)), None);
            assert_eq!(longest_row_tile_half(&held, 20000, 64, &stats(3072, 60.0)), Some(k16));
            assert_eq!(longest_row_tile_half(&held, 20000, 64, &stats(3073, 60.0)), None);
            // n = 128 and 192 (step 70): the same tile without the bound, in up to 65536 rows of at most 64.
            let unbounded = tile(dtype, 1, 8, 4, 8, 64, 8, false);
            assert_eq!(longest_row_tile_half(&held, 20000, 128, &long), Some(unbounded));
            assert_eq!(longest_row_tile_half(&held, 20000, 192, &long), Some(unbounded));
            assert_eq!(longest_row_tile_half(&held, 65536, 192, &stats(3000, 2.0)), Some(unbounded));
            assert_eq!(longest_row_tile_half(&held, 65537, 192, &stats(3000, 2.0)), None);
            assert_eq!(longest_row_tile_half(&held, 4096, 192, &stats(3000, 64.0)), Some(unbounded));
            assert_eq!(longest_row_tile_half(&held, 4096, 192, &stats(3000, 64.1)), None);
            assert_eq!(longest_row_tile_half(&held, 20000, 192, &stats(20, 2.0)), None, "off the critical path");
            assert_eq!(longest_row_tile_half(&unbounded, 20000, 192, &long), None);
            for n in [160, 320, 384] {
                assert_eq!(longest_row_tile_half(&held, 4096, n, &stats(3000, 5.0)), None, "n = {n}");
            }
            // n = 64 on the k = 16 tile (step 70): the 16-row windows, 64 columns a warp, at a ratio of 7 or more.
            // 20000 rows of 2 are 1.33 steps of 16 per resident subwarp; a longest row of 145 takes 10 steps (7.5
            // times), of 144 takes 9 (6.8).
            let narrow_64 = TensorCoreConfig { dtype, window: 16, tiles_n: 8 };
            assert_eq!(longest_row_windows_half(&k16, 20000, 64, &stats(145, 2.0)), Some(narrow_64));
            assert_eq!(longest_row_windows_half(&k16, 20000, 64, &stats(144, 2.0)), None);
            assert_eq!(
                longest_row_windows_half(&k16, 20000, 96, &stats(1000, 2.0)),
                None,
                "on the k = 16 tile at n = 64 only"
            );
            assert_eq!(longest_row_windows_half(&held, 60000, 64, &stats(1000, 2.0)), None, "not on the k = 8 tile");
            // Through the selection: 20000 x 2000 power-law rows of 2 (longest 230), the windows 5% full (under the
            // tensor cores' own bounds); without blocks (A holds Inf or NaN) the tiles.
            let (m, nnz, rows) = (20000, 40000, rows_of(230, 2.0, 1.4));
            let counts = Some(BlockCounts { narrow: 3125, wide: 2604, mid: 0 });
            let pick =
                |n: usize, counts: Option<BlockCounts>| SpmmKernel::select(m, 2000, n, nnz, &rows, dtype, counts);
            assert_eq!(pick(32, counts), SpmmKernel::TensorCore(narrow));
            assert_eq!(pick(96, counts), SpmmKernel::TensorCore(wide));
            assert_eq!(pick(64, counts), SpmmKernel::TensorCore(narrow_64));
            assert_eq!(pick(64, None), SpmmKernel::Tiled(k16));
            assert_eq!(pick(192, counts), SpmmKernel::Tiled(unbounded));
            assert_eq!(pick(32, None), SpmmKernel::Tiled(k8_32));
            assert_eq!(pick(96, None), SpmmKernel::Tiled(k8_64));
        }
        assert_eq!(longest_row_windows_half(&k8_tile(DType::F32, 4, true), 20000, 32, &stats(200, 2.0)), None);
    }

    #[test]
    fn long_skewed_rows_at_wide_n_take_the_k16_tile() {
        let pick = power_law_pick;
        let (k16, k8, four_rows) = (
            "spmm_f32_s2d4_y4k16x32w8_u4_nopred",
            "spmm_f32_s1d4_y4k8x32w8_u4_nopred",
            "spmm_f32_s2d4_y4k16x64w8_u4_nopred_lb8",
        );
        // Step 67's power-law matrices (m, k, longest, mean, cv): skewed, 2048-4096 rows, means 97-405.
        for (m, k, max, mean, cv) in [
            (2048, 4096, 4096, 104.7, 1.55),
            (2048, 8192, 8192, 405.1, 1.30),
            (4096, 8192, 2282, 97.3, 0.97),
            (4096, 16384, 10874, 394.3, 1.04),
        ] {
            for n in [512, 1024, 2048, 1536, 544, 480] {
                assert_eq!(
                    pick(m, k, n, max, mean, cv),
                    k16,
                    "{m} x {k}, mean {mean}, n = {n} (480: the choice at 512)"
                );
            }
            assert_eq!(pick(m, k, 256, max, mean, cv), k8, "{m} x {k}, mean {mean}, n = 256");
        }
        // The four-row tile keeps skewed rows over k <= 4096 and uneven rows that are not skewed over k > 4096.
        assert_eq!(pick(4096, 4096, 1024, 4096, 389.0, 0.90), four_rows);
        assert_eq!(pick(2048, 4096, 2048, 4096, 402.6, 1.01), four_rows);
        assert_eq!(pick(2048, 8192, 1024, 3200, 400.0, 1.3), four_rows);
        // Skewed rows over k > 4096 it keeps where they average 380 or more and the longest row is within a resident
        // subwarp's share (2048 rows of 400 at n = 1024: 201.7 steps, a longest row of 3227 entries); step 67's
        // 3072 x 6144, mean 580, longest 6144, at n = 2048 (0.44 of its share).
        assert_eq!(pick(3072, 6144, 2048, 6144, 580.1, 1.0), four_rows);
        assert_eq!(pick(3072, 6144, 2048, 6144, 379.9, 1.0), k16);
        assert_eq!(pick(2048, 6144, 1024, 3227, 400.0, 1.0), four_rows);
        assert_eq!(pick(2048, 6144, 1024, 3228, 400.0, 1.0), k16);
        // Either side: rows, mean, n.
        let base = (2048, 8192, 1024, 2282, 97.3, 0.97);
        assert_eq!(pick(base.0, base.1, base.2, base.3, base.4, base.5), k16);
        assert_eq!(pick(base.0, base.1, base.2, base.3, 90.0, base.5), k16);
        assert_eq!(pick(4096, base.1, base.2, base.3, base.4, base.5), k16);
        for (m, k, n, max, mean, cv) in [
            (2047, base.1, base.2, base.3, base.4, base.5),
            (4097, base.1, base.2, base.3, base.4, base.5),
            (base.0, base.1, base.2, base.3, 89.9, base.5),
            (base.0, base.1, 384, base.3, base.4, base.5),
            (base.0, base.1, 2176, base.3, base.4, base.5),
        ] {
            assert_ne!(pick(m, k, n, max, mean, cv), k16, "{m} x {k}, n = {n}, mean {mean}, cv {cv}");
        }
    }

    #[test]
    fn longest_rows_unsplit_in_few_rows_take_one_or_two_warps_per_row() {
        let pick = |m: usize, k: usize, n: usize, max: usize, mean: f64| power_law_pick(m, k, n, max, mean, 0.9);
        let (two_warps, warp) = ("spmm_f32_s1d4_y2k32x128w32_u4_nopred_r2", "spmm_f32_s1d4_y1k32x128w32_u4_nopred");
        // Step 67's matrices (m, k, longest, mean): longest rows 8-16 times the mean, neither skewed nor long.
        for (m, k, max, mean) in [(1536, 4096, 668, 58.9), (2048, 16384, 757, 58.1), (3072, 8192, 380, 28.7)] {
            for (n, want) in [(256, two_warps), (512, two_warps), (1024, warp), (2048, warp)] {
                assert_eq!(pick(m, k, n, max, mean), want, "{m} x {k}, mean {mean}, n = {n}");
            }
            assert_ne!(pick(m, k, 768, max, mean), two_warps);
            assert_ne!(pick(m, k, 768, max, mean), warp, "{m} x {k}, n = 768");
            assert_eq!(
                pick(m, k, 500, max, mean),
                "spmm_f32_s1d4_y2k32x128w32_u4_pred_r2",
                "n = 500: the choice at 512"
            );
        }
        // Either side: rows, k, mean, longest (256; 8 times the mean; skewed past 1024; long past 16 times the mean).
        let base = (2048, 8192, 512, 600, 50.0);
        assert_eq!(pick(base.0, base.1, base.2, base.3, base.4), two_warps);
        assert_eq!(pick(1025, base.1, base.2, base.3, base.4), two_warps);
        assert_eq!(pick(3072, base.1, base.2, base.3, base.4), two_warps);
        assert_eq!(pick(base.0, 4096, base.2, base.3, base.4), two_warps);
        assert_eq!(pick(base.0, 16384, base.2, base.3, base.4), two_warps);
        assert_eq!(pick(base.0, base.1, base.2, 401, base.4), two_warps);
        // The rule's own bounds (through the selection, step 68's rule may take some of these shapes:
        // `longest_row_tile`).
        let rule = |m: usize, k: usize, n: usize, max: usize, mean: f64| {
            longest_rows_unsplit_few_rows(m, k, n, &rows_of(max, mean, 0.9), DType::F32)
        };
        for (m, k, n, max, mean) in [
            (1024, base.1, base.2, base.3, base.4),
            (3073, base.1, base.2, base.3, base.4),
            (base.0, 4095, base.2, base.3, base.4),
            (base.0, 16385, base.2, base.3, base.4),
            (base.0, base.1, base.2, 256, 24.0),
            (base.0, base.1, base.2, 400, base.4),
            (base.0, base.1, base.2, 801, base.4),
            (base.0, base.1, base.2, 1025, 100.0),
            (base.0, base.1, base.2, 200, 24.9),
            (base.0, base.1, base.2, 900, 100.1),
            (base.0, base.1, 128, base.3, base.4),
            (base.0, base.1, 2176, base.3, base.4),
        ] {
            assert_eq!(rule(m, k, n, max, mean), None, "{m} x {k}, n = {n}, longest {max}, mean {mean}");
        }
        assert_ne!(pick(base.0, base.1, 2176, base.3, base.4), warp);
        // Past 3072 rows, and over k outside 4096-16384, the tile the other rules give walks the longest row for more
        // than 3 times a subwarp's share of the launch, and step 68's rule takes two warps per row.
        assert_eq!(pick(3073, base.1, base.2, base.3, base.4), two_warps);
        assert_eq!(pick(base.0, 4095, base.2, base.3, base.4), two_warps);
        assert_eq!(pick(base.0, 16385, base.2, base.3, base.4), two_warps);
    }

    #[test]
    fn uneven_few_rows_take_two_warps_per_row() {
        let pick_k = |m: usize, k: usize, n: usize, max: usize, mean: f64, cv: f64| {
            let stats = RowStats { min: 1, max, mean, cv, empty_rows: 0, columns_per_entry: None };
            SpmmConfig::select_with_stats(m, k, n, &stats, DType::F32).kernel_name()
        };
        let pick = |m: usize, n: usize, max: usize, mean: f64, cv: f64| pick_k(m, 8192, n, max, mean, cv);
        let split = "spmm_f32_s1d4_y2k32x128w32_u4_nopred_r2";
        // Step 52's power-law matrices: 512-1024 rows, means 57-126, longest 430-1004, cv 0.67-1.03. (At n = 128-512
        // over k <= 8192 step 78's `few_rows_split_warp` takes such rows too where the longest is the critical path:
        // here over k = 16384 it does not.)
        for (m, max, mean, cv) in [(512, 430, 59.1, 0.77), (512, 687, 110.4, 0.67), (1024, 775, 56.6, 0.92)] {
            assert_eq!(pick(m, 256, max, mean, cv), split, "{m} rows, longest {max}, n = 256");
            for n in [768, 1024, 320] {
                assert_ne!(pick(m, n, max, mean, cv), split, "{m} rows, longest {max}, n = {n}");
            }
            for n in [128, 384, 512] {
                assert_ne!(pick_k(m, 16384, n, max, mean, cv), split, "{m} rows, longest {max}, n = {n}");
            }
        }
        // Step 52's bounds, over k = 16384 (past step 78's rule).
        let pick = |m: usize, n: usize, max: usize, mean: f64, cv: f64| pick_k(m, 16384, n, max, mean, cv);
        assert_ne!(pick(1024, 256, 1006, 45.4, 1.18), split, "long rows: the pieces");
        assert_ne!(pick(1025, 256, 400, 56.6, 0.92), split, "past 1024 rows");
        // (There rows whose longest passes 8 times the mean take it by step 67's rule.)
        assert_eq!(pick(1025, 256, 775, 56.6, 0.92), split, "step 67");
        assert_ne!(pick(511, 256, 775, 56.6, 0.92), split, "under 512 rows");
        assert_ne!(pick(1024, 256, 775, 56.6, 0.59), split, "cv under 0.6");
        assert_ne!(pick(1024, 256, 256, 39.0, 0.92), split, "longest row of two pieces");
        assert_ne!(pick(1024, 256, 600, 39.9, 0.92), split, "mean under 40");
        assert_ne!(pick(1024, 256, 1100, 100.0, 1.2), split, "skewed: the pieces");
        // n = 1024-2048 over k >= 4096: a warp per row (power_law_few_rows_wide_n), k = 16384 here.
        let warp = "spmm_f32_s1d4_y1k32x128w32_u4_nopred";
        for n in [1024, 1152, 1536, 2048] {
            assert_eq!(pick(512, n, 5351, 135.7, 1.91), warp, "skewed, n = {n}");
            assert_eq!(pick(768, n, 813, 59.0, 0.98), warp, "n = {n}");
        }
        let stats = RowStats { min: 1, max: 813, mean: 59.0, cv: 0.98, empty_rows: 0, columns_per_entry: None };
        let wide = |m: usize, k: usize, n: usize, stats: &RowStats| power_law_few_rows_wide_n(m, k, n, stats);
        assert!(wide(768, 4096, 1024, &stats) && wide(512, 32768, 2048, &stats) && wide(1024, 8192, 1920, &stats));
        assert!(!wide(768, 4095, 1024, &stats), "k under 4096: step 16's domain");
        assert!(!wide(768, 8192, 768, &stats), "n = 768");
        assert!(!wide(768, 8192, 2176, &stats), "n = 2176");
        assert!(!wide(768, 8192, 1088, &stats), "n not a multiple of 128");
        assert!(!wide(511, 8192, 1024, &stats) && !wide(1025, 8192, 1024, &stats), "512-1024 rows");
        assert!(!wide(768, 8192, 1024, &RowStats { cv: 0.59, ..stats }));
        assert!(!wide(768, 8192, 1024, &RowStats { mean: 140.0, ..stats }), "step 17's four-row tile");
        assert!(!wide(768, 8192, 1024, &RowStats { mean: 36.9, ..stats }));
        assert!(!wide(768, 8192, 1024, &RowStats { max: 256, ..stats }));
        // Not the suite's pruned weights: their rows past 256 entries are even.
        let weight =
            |max: usize, mean: f64, cv: f64| RowStats { min: 1, max, mean, cv, empty_rows: 0, columns_per_entry: None };
        assert!(!uneven_few_rows(384, 256, &weight(817, 460.8, 0.11)));
        assert!(!uneven_few_rows(1536, 1024, &weight(268, 115.2, 0.34)));
        assert!(!uneven_few_rows(384, 1024, &weight(499, 153.6, 0.21)));
    }

    #[test]
    fn few_uneven_rows_split_the_warp_on_the_critical_path() {
        let rows =
            |max: usize, mean: f64, cv: f64| RowStats { min: 1, max, mean, cv, empty_rows: 0, columns_per_entry: None };
        let warp = warp_per_row_tile(DType::F32);
        let split = Some(split_row_warp_tile(DType::F32));
        let take = |m: usize, k: usize, n: usize, stats: &RowStats| few_rows_split_warp(&warp, m, k, n, stats);
        // Power-law 461 x 3552, rows of 44.5, longest 547 (step 78: 15.8 -> 11.6 us at n = 512).
        let measured = rows(547, 44.5, 1.08);
        for n in [128, 256, 384, 512] {
            assert!(longest_row_is_the_critical_path(&warp, 461, n, &measured), "n = {n}");
            assert_eq!(take(461, 3552, n, &measured), split, "n = {n}");
        }
        // Either side of each bound.
        assert_eq!(take(461, 3552, 640, &measured), None, "n = 640");
        assert_eq!(take(461, 3552, 1024, &measured), None, "n = 1024");
        assert_eq!(take(461, 3552, 320, &measured), None, "n not a multiple of 128");
        assert_eq!(take(256, 3552, 512, &measured), split);
        assert_eq!(take(255, 3552, 512, &measured), None, "255 rows");
        assert_eq!(take(1024, 3552, 512, &rows(590, 49.8, 0.82)), split);
        assert_eq!(take(1025, 3552, 512, &rows(590, 49.8, 0.82)), None, "1025 rows");
        assert_eq!(take(461, 1024, 512, &measured), split);
        assert_eq!(take(461, 1023, 512, &measured), None, "k = 1023");
        assert_eq!(take(461, 8192, 512, &measured), split);
        assert_eq!(take(461, 8193, 512, &measured), None, "k = 8193");
        assert_eq!(take(461, 3552, 512, &rows(547, 40.0, 1.08)), split);
        assert_eq!(take(461, 3552, 512, &rows(547, 39.9, 1.08)), None, "rows of 39.9 (1.02x-1.16x at n = 512)");
        assert_eq!(take(461, 3552, 512, &rows(547, 44.5, 0.5)), split);
        assert_eq!(take(461, 3552, 512, &rows(547, 44.5, 0.49)), None, "cv 0.49");
        // Not where the warp's longest row is short of the critical path, nor in place of another tile.
        assert!(!longest_row_is_the_critical_path(&warp, 461, 512, &rows(100, 44.5, 0.6)));
        assert_eq!(take(461, 3552, 512, &rows(100, 44.5, 0.6)), None);
        assert_eq!(few_rows_split_warp(&two_row_tile(DType::F32), 461, 3552, 512, &measured), None);
        assert_eq!(few_rows_split_warp(&warp_per_row_tile(DType::F16), 461, 3552, 512, &measured), None);
        // Through the selection: the warp per row before, two warps per row now.
        assert_eq!(
            SpmmConfig::select_with_stats(461, 3552, 512, &measured, DType::F32),
            split_row_warp_tile(DType::F32)
        );
    }

    #[test]
    fn thirty_two_rows_where_they_fill_one_wave() {
        let pick = |m: usize, k: usize, n: usize, mean: f64, cv: f64| {
            let stats =
                RowStats { min: 0, max: (2.0 * mean) as usize, mean, cv, empty_rows: 0, columns_per_entry: None };
            SpmmConfig::select_with_stats(m, k, n, &stats, DType::F32).kernel_name()
        };
        let thirty_two = "spmm_f32_s1d4_y32k16x64w16_u4_nopred";
        // Step 51's sweep: 128 blocks (2048 rows at n = 128, 1024 at 256, 512 at 512), 20-160 per row.
        for (m, n) in [(2048, 128), (1024, 256), (512, 512)] {
            for k in [1024, 4096, 16384] {
                for mean in [20.0, 40.0, 80.0, 160.0] {
                    let cv = 1.0 / f64::sqrt(mean);
                    assert_eq!(pick(m, k, n, mean, cv), thirty_two, "{m} x {k}, mean {mean}, n = {n}");
                }
            }
        }
        // 119-132 blocks; n a multiple of 128 up to 512; k 1024-16384; rows of 16-200, cv at most 0.3 (uniform rows
        // of 20-160 entries, as measured, have cv 0.08-0.22).
        assert_eq!(pick(1056, 4096, 256, 40.0, 0.16), thirty_two);
        assert_eq!(pick(929, 4096, 256, 40.0, 0.16), thirty_two);
        assert_eq!(pick(640, 4096, 384, 40.0, 0.16), thirty_two);
        assert_ne!(pick(1057, 4096, 256, 40.0, 0.16), thirty_two);
        assert_ne!(pick(928, 4096, 256, 40.0, 0.16), thirty_two);
        assert_ne!(pick(1536, 4096, 128, 40.0, 0.16), thirty_two, "96 blocks");
        assert_ne!(pick(1024, 4096, 640, 40.0, 0.16), thirty_two);
        // n = 192 takes the choice at 256 (`rounded_width`), whose 64-column tiles it fills.
        assert_eq!(pick(1024, 4096, 192, 40.0, 0.16), thirty_two);
        assert_ne!(pick(1024, 512, 256, 40.0, 0.16), thirty_two);
        assert_ne!(pick(1024, 32768, 256, 40.0, 0.16), thirty_two);
        assert_ne!(pick(1024, 4096, 256, 15.0, 0.26), thirty_two);
        assert_ne!(pick(1024, 4096, 256, 210.0, 0.07), thirty_two);
        assert_ne!(pick(1024, 4096, 256, 40.0, 0.31), thirty_two);
    }

    #[test]
    fn even_short_rows_leave_sparse_windows_in_many_rows_at_n_33_to_96() {
        let rows = |mean: f64, cv: f64| RowStats {
            min: 0,
            max: (2.0 * mean) as usize,
            mean,
            cv,
            empty_rows: 0,
            columns_per_entry: None,
        };
        let leave = |m: usize, n: usize, mean: f64, cv: f64, dtype: DType, fill: f64| {
            short_even_rows_leave_windows(m, n, &rows(mean, cv), dtype, fill)
        };
        for dtype in [DType::F16, DType::Bf16] {
            // 4elt (7434 rows of 11.6, cv 0.16, 7.5% full) at n = 40-64, uniform rows of 8 and 16 in 2048 rows.
            assert!(leave(7434, 64, 11.6, 0.16, dtype, 0.075));
            assert!(leave(2048, 40, 8.0, 0.0, dtype, 0.062) && leave(2048, 96, 16.0, 0.0, dtype, 0.064));
            assert!(
                leave(SHORT_EVEN_MIN_ROWS, 33, 6.0, 0.3, dtype, 0.0799) && leave(100_000, 96, 24.0, 0.3, dtype, 0.0)
            );
            // Each bound: rows, widths, mean, evenness, fill.
            assert!(!leave(SHORT_EVEN_MIN_ROWS - 1, 64, 11.6, 0.16, dtype, 0.075), "well1850's few rows");
            assert!(!leave(7434, 32, 11.6, 0.16, dtype, 0.075) && !leave(7434, 97, 11.6, 0.16, dtype, 0.075));
            assert!(!leave(7434, 64, 5.9, 0.16, dtype, 0.075) && !leave(7434, 64, 24.1, 0.16, dtype, 0.075));
            assert!(!leave(4960, 64, 4.8, 0.76, dtype, 0.103), "add32");
            assert!(!leave(4096, 64, 8.0, 0.31, dtype, 0.062), "blocks of 2 x 2 (cv 0.5) and power-law rows");
            assert!(!leave(15260, 64, 7.3, 0.19, dtype, 0.08), "wrld_1deg's fuller windows (12%)");
        }
        assert!(!leave(7434, 64, 11.6, 0.16, DType::F32, 0.075), "f16/bf16 only");
    }

    #[test]
    fn sparse_windows_give_tiles_in_the_measured_band() {
        let even = |mean: f64| RowStats {
            min: 0,
            max: (2.0 * mean) as usize,
            mean,
            cv: 0.1,
            empty_rows: 0,
            columns_per_entry: None,
        };
        let pick = |m: usize, n: usize, mean: f64, dtype: DType| {
            sparse_windows_half(m, n, &even(mean), dtype, 0.066).map(|c| c.kernel_name())
        };
        let name = |dtype: DType, tile: &str| Some(format!("spmm_{}_{tile}", dtype.name()));
        for dtype in [DType::F16, DType::Bf16] {
            let (warp, k8, k8x64, sputnik) = (
                name(dtype, "s1d1_y1k32x32w32_u4_pred"),
                name(dtype, "s1d4_y4k8x32w8_u4_pred"),
                name(dtype, "s1d8_y4k8x64w8_u4_nopred"),
                name(dtype, "s4d4_y4k32x32w8_u4_nopred"),
            );
            // A warp per row on up to 1024 rows at n <= 64 (n = 64 only up to 512 rows: 1024 is the tie band).
            assert_eq!(pick(512, 32, 40.0, dtype), warp);
            assert_eq!(pick(1024, 32, 400.0, dtype), warp);
            assert_eq!(pick(512, 64, 120.0, dtype), warp);
            assert_eq!(pick(1024, 64, 120.0, dtype), None, "m * n = 2^16");
            assert_eq!(pick(512, 128, 120.0, dtype), None, "m * n = 2^16");
            assert_eq!(pick(512, 256, 120.0, dtype), None, "fewer than 1024 rows");
            // From m * n = 2^18 at n >= 64 the k = 8 tile over 64 columns, over 32 where n is not a multiple of 64.
            assert_eq!(pick(4096, 64, 40.0, dtype), k8x64);
            assert_eq!(pick(2048, 128, 400.0, dtype), k8x64);
            assert_eq!(pick(1024, 256, 40.0, dtype), k8x64);
            assert_eq!(pick(2048, 224, 40.0, dtype), k8);
            // Sputnik's tile on rows of 80 or more at n <= 128, else the k = 8 tile over 32 columns.
            assert_eq!(pick(4096, 32, 120.0, dtype), sputnik);
            assert_eq!(pick(2048, 32, 120.0, dtype), None, "1280-2048 rows at n = 32: the windows tied");
            assert_eq!(pick(1280, 32, 120.0, dtype), None);
            assert_eq!(pick(1024, 32, 120.0, dtype), warp);
            assert_eq!(pick(1024, 128, 120.0, dtype), sputnik);
            assert_eq!(pick(2048, 64, 400.0, dtype), sputnik);
            assert_eq!(pick(4096, 32, 79.0, dtype), k8);
            assert_eq!(pick(4096, 32, 40.0, dtype), k8);
            assert_eq!(pick(1024, 128, 40.0, dtype), k8);
            assert_eq!(pick(2048, 96, 120.0, dtype), sputnik);
            // Outside it: short, uneven or well-shared rows, n not a multiple of 32 or past 256, f32.
            assert_eq!(pick(2048, 64, 31.0, dtype), None);
            let uneven = RowStats { cv: 0.31, ..even(120.0) };
            assert_eq!(sparse_windows_half(2048, 64, &uneven, dtype, 0.066), None);
            assert_eq!(sparse_windows_half(4096, 32, &RowStats { cv: 0.41, ..uneven }, dtype, 0.066), None);
            assert_eq!(sparse_windows_half(2048, 32, &even(40.0), dtype, 0.066), None, "the windows' tie band");
            assert_eq!(sparse_windows_half(2048, 64, &even(120.0), dtype, 0.08), None);
            assert_eq!(sparse_windows_half(4096, 64, &even(120.0), dtype, 0.08), None);
            // At n = 32 in 4096 rows or more the windows give way up to 14% full (step 52).
            assert_eq!(sparse_windows_half(4096, 32, &even(40.0), dtype, 0.082).map(|c| c.kernel_name()), k8);
            assert_eq!(sparse_windows_half(65536, 32, &even(40.0), dtype, 0.139).map(|c| c.kernel_name()), k8);
            assert_eq!(sparse_windows_half(4095, 32, &even(40.0), dtype, 0.082), None);
            assert_eq!(sparse_windows_half(4096, 32, &even(40.0), dtype, 0.14), None);
            // ... on even rows of 8 or more there (step 77), not 32.
            assert_eq!(sparse_windows_half(4096, 32, &even(31.0), dtype, 0.1).map(|c| c.kernel_name()), k8);
            assert_eq!(sparse_windows_half(4096, 32, &even(8.0), dtype, 0.1).map(|c| c.kernel_name()), k8);
            assert_eq!(sparse_windows_half(4096, 32, &even(7.9), dtype, 0.1), None);
            assert_eq!(sparse_windows_half(4095, 32, &even(31.0), dtype, 0.066), None);
            assert_eq!(sparse_windows_half(4096, 64, &even(31.0), dtype, 0.066), None);
            // ... and rows as uneven as Bernoulli rows of 8 (cv up to 0.4) there (step 77), not 0.3.
            let bernoulli = RowStats { cv: 0.4, ..even(10.0) };
            assert_eq!(sparse_windows_half(4096, 32, &bernoulli, dtype, 0.1).map(|c| c.kernel_name()), k8);
            assert_eq!(sparse_windows_half(4096, 32, &RowStats { cv: 0.41, ..bernoulli }, dtype, 0.1), None);
            assert_eq!(pick(4096, 48, 120.0, dtype), None);
            assert_eq!(pick(1024, 512, 120.0, dtype), None);
        }
        // At n = 32 from m * n = 2^18, bf16 keeps the k = 8 tile on long rows; f16 takes Sputnik's.
        assert_eq!(pick(8192, 32, 400.0, DType::Bf16), name(DType::Bf16, "s1d4_y4k8x32w8_u4_pred"));
        assert_eq!(pick(8192, 32, 400.0, DType::F16), name(DType::F16, "s4d4_y4k32x32w8_u4_nopred"));
        assert_eq!(pick(4096, 32, 400.0, DType::Bf16), name(DType::Bf16, "s4d4_y4k32x32w8_u4_nopred"));
        assert_eq!(pick(4096, 32, 400.0, DType::F32), None);
        // Every tile it gives is valid and compiled.
        for n in (32..=256).step_by(32) {
            for m in [256, 512, 1024, 2048, 4096, 8192, 16384] {
                for (mean, dtype) in [(40.0, DType::F16), (120.0, DType::Bf16), (120.0, DType::F16)] {
                    if let Some(c) = sparse_windows_half(m, n, &even(mean), dtype, 0.05) {
                        c.validate().unwrap_or_else(|e| panic!("{m} x n = {n}: {c} invalid: {e}"));
                        assert!(crate::kernels::spmm_table().iter().any(|t| t.same_kernel(&c)), "{c} not compiled");
                        assert!(c.predicate_loads || n % c.block_items_x as usize == 0, "n = {n}: {c}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_last_wave_counts_when_three_quarters_full() {
        assert!(fills_its_last_wave(2048, 2112));
        assert!(fills_its_last_wave(2112, 2112));
        assert!(!fills_its_last_wave(2560, 2112)); // 1.2 waves
        assert!(!fills_its_last_wave(3072, 2112)); // 1.45 waves: 73% of two
        assert!(fills_its_last_wave(3168, 2112)); // 1.5 waves: 75% of two
        assert!(fills_its_last_wave(10240, 2112)); // 4.8 waves
        assert!(fills_its_last_wave(0, 2112));
        assert!(fills_its_last_wave(usize::MAX, 2112));
    }

    #[test]
    fn widest_dividing_picks_the_largest_divisor() {
        assert_eq!(widest_dividing(12, &[1, 2, 4]), 4);
        assert_eq!(widest_dividing(18, &[1, 2, 4]), 2);
        assert_eq!(widest_dividing(7, &[1, 2, 4]), 1);
    }
}
