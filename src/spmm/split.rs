//! The row split for skewed matrices: rows longer than [`PIECE_LEN`] entries are cut into pieces that
//! separate subwarps multiply, each piece's f32 sum goes to a partial row, and a second kernel adds each split
//! row's partials in piece order (deterministic: the same bits every run).
//!
//! Why: one subwarp walks a whole row, so a graph's longest row is the kernel's critical path. In email-Enron
//! (mean 10 per row, longest 1383) one subwarp walks 44 tiles while every other one is done after one or two
//! (NOTES.md, "SpMM step 4").

use super::SpmmConfig;
use crate::csr::RowStats;

/// Entries per piece: a multiple of every compiled `block_items_k` (8, 16, 32), so pieces are whole tiles.
pub const PIECE_LEN: usize = 128;

/// The pieces of a matrix whose rows are uneven enough to split (see [`is_skewed`] and [`has_long_rows`]), host side.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct HostSplit {
    /// Four ints per piece: row, first entry, end entry, partial row (-1: the piece is the whole row).
    /// Longest first (ties in row order), like the row swizzle.
    pub(crate) pieces: Vec<i32>,
    /// Three ints per split row: row, first partial row, number of partial rows (= its pieces).
    pub(crate) split_rows: Vec<i32>,
    pub(crate) num_partials: usize,
}

impl HostSplit {
    pub(crate) fn num_pieces(&self) -> usize {
        self.pieces.len() / 4
    }
    pub(crate) fn num_split_rows(&self) -> usize {
        self.split_rows.len() / 3
    }
}

/// Whether a matrix has rows long enough, and uneven enough, that splitting them can pay: a longest row of
/// more than eight pieces (1024 entries) and more than eight times the mean. The split costs a second launch
/// and the partial rows, a few microseconds: on a pruned 384 x 384 weight at 90% (longest row ~330 of mean 38)
/// it took 8.3 us to 13.2 us; on email-Enron (longest 1383 of mean 10) it saves more than that (NOTES.md,
/// "SpMM step 4").
pub fn is_skewed(stats: &RowStats) -> bool {
    stats.max > 8 * PIECE_LEN && stats.max as f64 > 8.0 * stats.mean
}

/// Whether a matrix has rows that are long for its mean though not [`is_skewed`]: a longest row of more than two
/// pieces (256 entries) and more than sixteen times the mean, as power-law rows of a few thousand rows have. The
/// tiles split them too ([`use_split`]): in f32 on power-law matrices of 4096-16384 rows with means of 12-40 and
/// longest rows of 472-1024, at n = 32-256, the tiles chosen before, one subwarp walking the longest row, took 22-47
/// us where cuSPARSE took 16-32 (0.44x-0.75x of it; NOTES.md, "SpMM step 49"); f16 and bf16 the same (step 50).
pub fn has_long_rows(stats: &RowStats) -> bool {
    stats.max > 2 * PIECE_LEN && stats.max as f64 > 16.0 * stats.mean
}

/// Whether the split may cut a matrix's rows: [`is_skewed`] or [`has_long_rows`]. [`plan`] cuts them into pieces
/// at upload, and [`use_split`] then decides launch by launch.
fn has_rows_to_split(stats: &RowStats) -> bool {
    is_skewed(stats) || has_long_rows(stats)
}

/// The pieces of every row of `indptr` (None when no row is long enough to split, [`has_rows_to_split`]). Row
/// offsets must fit in i32 (DeviceCsr guarantees it).
pub(crate) fn plan(indptr: &[usize], stats: &RowStats) -> Option<HostSplit> {
    if !has_rows_to_split(stats) {
        return None;
    }
    // Every piece in row and piece order, with its length: a row's own piece, or its pieces of PIECE_LEN entries
    // each (the last shorter) naming partial rows numbered in that order.
    let each_piece = |f: &mut dyn FnMut(usize, [i32; 4])| {
        let mut partials = 0;
        for (row, w) in indptr.windows(2).enumerate() {
            let (start, end) = (w[0], w[1]);
            if end - start <= PIECE_LEN {
                f(end - start, [row as i32, start as i32, end as i32, -1]);
                continue;
            }
            for (q, begin) in (start..end).step_by(PIECE_LEN).enumerate() {
                let stop = (begin + PIECE_LEN).min(end);
                f(stop - begin, [row as i32, begin as i32, stop as i32, (partials + q) as i32]);
            }
            partials += (end - start).div_ceil(PIECE_LEN);
        }
    };
    // Longest first by a counting sort (stable: ties stay in row and piece order): one walk counts the pieces of
    // each length (no piece passes PIECE_LEN), a second puts each in its place.
    let mut next = vec![0usize; PIECE_LEN + 1];
    let mut split_rows = Vec::new();
    let mut num_partials = 0usize;
    each_piece(&mut |len, [row, _, _, partial]| {
        next[len] += 1;
        if partial == num_partials as i32 {
            // The first piece of a split row: its partials start here.
            let count = (indptr[row as usize + 1] - indptr[row as usize]).div_ceil(PIECE_LEN);
            split_rows.extend([row, partial, count as i32]);
            num_partials += count;
        }
    });
    let total = next.iter().sum::<usize>();
    crate::csr::longest_first_slots(&mut next);
    let mut sorted = vec![0i32; 4 * total];
    each_piece(&mut |len, piece| {
        let at = 4 * next[len];
        next[len] += 1;
        sorted[at..at + 4].copy_from_slice(&piece);
    });
    Some(HostSplit { pieces: sorted, split_rows, num_partials })
}

/// Whether a launch should use the split: when the longest row's tiles (`max / block_items_k`) exceed eight
/// times the mean work of a resident subwarp over one column tile of C (all tiles of all rows over the subwarps the
/// GPU holds at once, 2048 threads per SM), the longest row is the critical path and splitting shortens it.
/// Measured on email-Enron (NOTES.md, "SpMM step 4"): the warp-per-row tile at n = 128 (longest 43 tiles, 5.7 per
/// subwarp) ran 55 us unsplit and 58 us split, the (4, 8, 32, 8) tile at n = 32 (173 tiles, 2.4 per subwarp) 15
/// us split. The count is per column tile, not over all of C's columns: wider n does not hide the long rows
/// (NOTES.md, "SpMM step 31": on email-Enron, two of its row slices and ten power-law matrices, n = 32-4096, the
/// k = 8 tile split was as fast or faster on all 130 f32 problems, and 1.38x faster on the 66 where counting
/// every column block had refused the split, 1.04x-2.22x; email-Enron at n = 512: 214 -> 127 us; the same in
/// f16 and bf16, 1.36x and 1.38x on 34 problems each). Also refused when the partial rows would pass 256 MiB,
/// and for the variants that do not walk pieces ([`SpmmConfig::walks_pieces`]). No longest row of 12
/// tiles or fewer is split: the second launch cost more than it saved there (power-law 3072 x 3072, longest 288,
/// n = 8 on 32-entry tiles: 10.1 us unsplit, 11.3 split; 1.14x-1.37x faster split from 16 tiles; NOTES.md, "SpMM
/// step 49"; a skewed matrix's longest row is 32 tiles or more).
pub fn use_split(
    stats: &RowStats,
    rows: usize,
    nnz: usize,
    n: usize,
    num_partials: usize,
    config: &SpmmConfig,
    sm_count: usize,
) -> bool {
    let k = config.block_items_k.max(1) as f64;
    let tiles = rows as f64 + nnz as f64 / k;
    let resident_subwarps = (sm_count.max(1) * 2048 / config.block_width.max(1) as usize) as f64;
    let longest = stats.max as f64 / k;
    let partial_bytes = num_partials.saturating_mul(n).saturating_mul(4);
    config.walks_pieces()
        && has_rows_to_split(stats)
        && longest > 12.0
        && longest > 8.0 * tiles / resident_subwarps
        && partial_bytes <= 256 << 20
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(indptr: &[usize]) -> RowStats {
        RowStats::from_indptr(indptr)
    }

    #[test]
    fn uneven_rows_are_cut_into_pieces_that_cover_each_row_once() {
        // Row lengths 3, 0, 300, 5, 129, 1100, then 200 rows of 2 (mean 9.4, longest 1100: skewed).
        let mut lens = vec![3usize, 0, 300, 5, 129, 1100];
        lens.extend(std::iter::repeat_n(2, 200));
        let mut indptr = vec![0usize];
        for l in &lens {
            indptr.push(indptr.last().unwrap() + l);
        }
        let s = stats(&indptr);
        assert!(is_skewed(&s), "{s:?}");
        let split = plan(&indptr, &s).unwrap();
        // Split rows: 2 (300 -> 3 pieces), 4 (129 -> 2), 5 (1100 -> 9), partials numbered in row order.
        assert_eq!(split.split_rows, vec![2, 0, 3, 4, 3, 2, 5, 5, 9]);
        assert_eq!(split.num_partials, 14);
        assert_eq!(split.num_pieces(), lens.len() - 3 + 14);
        // Every entry of every row is in exactly one piece, pieces of split rows name their own partials.
        let mut covered = vec![0u32; *indptr.last().unwrap()];
        let mut seen_rows = vec![0u32; lens.len()];
        let (mut prev_len, mut prev_begin) = (usize::MAX, 0);
        for p in split.pieces.chunks(4) {
            let (row, begin, end, partial) = (p[0] as usize, p[1] as usize, p[2] as usize, p[3]);
            assert!(end - begin <= PIECE_LEN && end - begin <= prev_len, "longest first: {p:?}");
            // Ties in row and piece order, that is in entry order (no piece is empty but an empty row's).
            assert!(end - begin < prev_len || begin > prev_begin || begin == end, "stable: {p:?}");
            (prev_len, prev_begin) = (end - begin, begin);
            assert!(indptr[row] <= begin && end <= indptr[row + 1], "{p:?}");
            covered[begin..end].iter_mut().for_each(|c| *c += 1);
            seen_rows[row] += 1;
            if partial < 0 {
                assert_eq!((begin, end), (indptr[row], indptr[row + 1]));
            } else {
                let s = split.split_rows.chunks(3).find(|s| s[0] as usize == row).expect("a split row");
                let q = (partial - s[1]) as usize;
                assert!(q < s[2] as usize && begin == indptr[row] + q * PIECE_LEN, "{p:?} in {s:?}");
            }
        }
        assert!(covered.iter().all(|&c| c == 1));
        assert!(seen_rows.iter().zip(&lens).all(|(&n, &l)| n as usize == l.div_ceil(PIECE_LEN).max(1)));
    }

    #[test]
    fn even_rows_are_not_split() {
        let indptr: Vec<usize> = (0..=100).map(|r| r * 300).collect(); // 300 per row: long but even
        assert!(plan(&indptr, &stats(&indptr)).is_none());
        let indptr: Vec<usize> = (0..=100).map(|r| r * 10).chain([1000 + 256]).collect(); // max 256: short
        assert!(plan(&indptr, &stats(&indptr)).is_none());
        let indptr: Vec<usize> = (0..=100).map(|r| r * 70).chain([7000 + 1024]).collect(); // 1024, 12.9x the mean 79
        assert!(plan(&indptr, &stats(&indptr)).is_none());
    }

    #[test]
    fn long_rows_of_a_short_mean_are_split_though_not_skewed() {
        // 100 rows of 10 and one of 257 (mean 12.4): more than two pieces and sixteen times the mean.
        let indptr: Vec<usize> = (0..=100).map(|r| r * 10).chain([1000 + 257]).collect();
        let s = stats(&indptr);
        assert!(has_long_rows(&s) && !is_skewed(&s), "{s:?}");
        let split = plan(&indptr, &s).unwrap();
        assert_eq!(split.split_rows, vec![100, 0, 3]);
        // Each bound: 256 entries is short; at 16 times the mean or less it is not long.
        let at = |max: usize, mean: f64| {
            has_long_rows(&RowStats { min: 0, max, mean, cv: 1.0, empty_rows: 0, columns_per_entry: None })
        };
        assert!(at(257, 16.0) && !at(256, 12.0) && !at(320, 20.0) && at(320, 19.9));
        assert!(at(1024, 40.0), "the band below is_skewed's 1024");
    }

    #[test]
    fn the_split_is_used_only_when_the_longest_row_is_the_critical_path() {
        let tile = |k: u32, x: u32, w: u32| -> SpmmConfig {
            format!("f32_s1d4_y{}k{k}x{x}w{w}_u4_nopred", 32 / w.min(32)).parse().unwrap()
        };
        // email-Enron: 36692 rows, 367662 entries, longest 1383.
        let s = RowStats { min: 0, max: 1383, mean: 10.02, cv: 3.6, empty_rows: 0, columns_per_entry: None };
        let (rows, nnz) = (36692, 367_662);
        assert!(use_split(&s, rows, nnz, 32, 2000, &tile(8, 32, 8), 132));
        assert!(use_split(&s, rows, nnz, 128, 2000, &tile(8, 32, 8), 132));
        // A warp per row over 128 columns at n = 128: 43 tiles against 5.7 per subwarp; no split.
        assert!(!use_split(&s, rows, nnz, 128, 2000, &tile(32, 128, 32), 132));
        // n = 4096: 128 column blocks, but each column tile still waits on the longest row; split.
        assert!(use_split(&s, rows, nnz, 4096, 2000, &tile(8, 32, 8), 132));
        // A million rows of 2 and a longest of 1100: 138 tiles against 37 per subwarp and column tile; no split.
        let many = RowStats { min: 0, max: 1100, mean: 2.0, cv: 1.0, empty_rows: 0, columns_per_entry: None };
        assert!(is_skewed(&many) && !use_split(&many, 1_000_000, 2_000_000, 32, 2000, &tile(8, 32, 8), 132));
        // Long rows, not skewed (power-law, 8192 rows of 12, longest 890): split, in every type.
        let long = RowStats { min: 1, max: 890, mean: 12.1, cv: 1.5, empty_rows: 0, columns_per_entry: None };
        assert!(!is_skewed(&long) && has_long_rows(&long));
        assert!(use_split(&long, 8192, 99_123, 32, 100, &tile(8, 32, 8), 132));
        let half = SpmmConfig { dtype: crate::DType::F16, ..tile(8, 32, 8) };
        assert!(use_split(&long, 8192, 99_123, 32, 100, &half, 132));
        // At most 12 tiles in the longest row: not split (3072 rows of 12, longest 288 or 384, on 32-entry tiles).
        let short = |max: usize| RowStats { min: 1, max, mean: 12.0, cv: 1.1, empty_rows: 0, columns_per_entry: None };
        assert!(!use_split(&short(288), 3072, 36_864, 8, 10, &tile(32, 32, 8), 132));
        assert!(!use_split(&short(384), 3072, 36_864, 8, 10, &tile(32, 32, 8), 132));
        assert!(use_split(&short(385), 3072, 36_864, 8, 10, &tile(32, 32, 8), 132));
        // Not skewed: never.
        let even = RowStats { min: 400, max: 420, mean: 410.0, cv: 0.05, empty_rows: 0, columns_per_entry: None };
        assert!(!use_split(&even, 4096, 4096 * 410, 32, 0, &tile(32, 32, 8), 132));
        // Partial rows past 256 MiB: refused.
        assert!(!use_split(&s, rows, nnz, 32, 3 << 20, &tile(8, 32, 8), 132));
        // A launch-bounded variant has no piece path: never split, however skewed.
        let bounded = SpmmConfig { launch_bounds: true, ..tile(8, 32, 8) };
        assert!(use_split(&s, rows, nnz, 32, 2000, &SpmmConfig { launch_bounds: false, ..bounded }, 132));
        assert!(!use_split(&s, rows, nnz, 32, 2000, &bounded, 132));
    }
}
