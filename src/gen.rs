//! Seeded generators of test and benchmark matrices.
//!
//! Every generator is a pure function of its arguments and seed. Rows are generated in
//! parallel, each from its own random stream derived from (seed, generator, row), so
//! the result does not depend on the number of rayon threads. All matrices are CSR with
//! sorted, unique column indices; values are uniform in [-1, 1) unless said otherwise.

use crate::scalar::Scalar;
use crate::{Error, Result};
use rayon::prelude::*;
use sprs::CsMat;
use std::collections::HashSet;

/// SplitMix64: tiny, fast, and good enough for test data; also used to derive the
/// per-row streams (its output function is a strong 64-bit mixer).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator whose whole stream is determined by `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 uniformly distributed bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix64(self.0)
    }

    /// Uniform in [0, 1), with 53 random bits.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.uniform()
    }

    /// Uniform integer in 0..n, without modulo bias (Lemire's multiply-and-reject).
    pub fn below(&mut self, n: usize) -> usize {
        assert!(n > 0, "Rng::below(0)");
        let n = n as u64;
        // Products whose low half falls below 2^64 mod n would over-represent some
        // results; rejecting them makes every result equally likely.
        let threshold = n.wrapping_neg() % n;
        loop {
            let p = self.next_u64() as u128 * n as u128;
            if (p as u64) >= threshold {
                return (p >> 64) as usize;
            }
        }
    }

    /// An integer in lo..=hi (1 <= lo <= hi), uniform in its logarithm: each factor of 2 as likely as the next,
    /// for drawing sizes across several orders of magnitude.
    pub fn log_uniform(&mut self, lo: usize, hi: usize) -> usize {
        assert!(1 <= lo && lo <= hi, "Rng::log_uniform({lo}, {hi})");
        (self.range((lo as f64).ln(), ((hi + 1) as f64).ln()).exp() as usize).clamp(lo, hi)
    }

    /// Standard normal (Box-Muller; the second value is dropped to keep the state one u64).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform(); // in (0, 1]: ln stays finite
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Uniform in [-1, 1) as f32, built from 24 random bits so that the f32 value is
    /// exact (rounding an f64 draw could produce exactly 1.0).
    fn signed_unit_f32(&mut self) -> f32 {
        let u = (self.next_u64() >> 40) as f32 * (1.0 / (1u32 << 24) as f32);
        2.0 * u - 1.0
    }
}

/// The SplitMix64 output function.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Salts that give each generator its own streams, so that e.g. a sparse A and a dense
/// B made with the same seed are not built from the same random numbers.
mod salt {
    pub const UNIFORM: u64 = 1;
    pub const NNZ: u64 = 2;
    pub const POWER_LAW: u64 = 3;
    pub const BANDED: u64 = 4;
    pub const EMPTY_ROWS: u64 = 5;
    pub const DENSE_ROW: u64 = 6;
    pub const PRUNED: u64 = 7;
    pub const DENSE: u64 = 8;
    pub const ROW_SCALE: u64 = 9;
    pub const BLOCKS: u64 = 10;
    pub const BLOCK_VALUES: u64 = 11;
}

/// The random stream for item `index` (usually a row) of generator `salt`.
fn stream(seed: u64, salt: u64, index: usize) -> Rng {
    Rng::new(seed ^ mix64(mix64(salt).wrapping_add(index as u64)))
}

/// `x` rounded down or up at random so that the expected result is exactly `x`; this
/// keeps the average density right when `density * k` is not an integer.
fn stochastic_round(x: f64, rng: &mut Rng) -> usize {
    let f = x.floor();
    f as usize + usize::from(rng.uniform() < x - f)
}

/// Fills `out` with `out.len()` distinct values from 0..n, sorted ascending.
///
/// Dense picks (over a third of n) use selection sampling, one pass over 0..n that
/// emits in order; sparse ones use Floyd's algorithm, O(len) draws, then a sort.
fn sample_sorted(rng: &mut Rng, n: usize, out: &mut [usize]) {
    let len = out.len();
    assert!(len <= n, "cannot pick {len} distinct values from 0..{n}");
    if len * 3 > n {
        let mut pos = 0;
        for c in 0..n {
            if pos == len {
                break;
            }
            // Take c with probability (still needed) / (still available).
            if rng.below(n - c) < len - pos {
                out[pos] = c;
                pos += 1;
            }
        }
    } else {
        let mut set = HashSet::with_capacity(len);
        for j in n - len..n {
            let t = rng.below(j + 1);
            if !set.insert(t) {
                set.insert(j);
            }
        }
        for (o, v) in out.iter_mut().zip(set) {
            *o = v;
        }
        out.sort_unstable();
    }
}

/// Builds an m x k CSR matrix whose row lengths can be computed up front: the lengths
/// give indptr, then rows are filled in parallel straight into the final arrays, which
/// keeps huge matrices (the 110M-entry stencil) free of per-row allocations.
/// `fill(row, cols, vals)` must write sorted, unique columns.
fn build_rows(
    m: usize,
    k: usize,
    row_len: impl Fn(usize) -> usize + Sync,
    fill: impl Fn(usize, &mut [usize], &mut [f32]) + Sync,
) -> CsMat<f32> {
    let lens: Vec<usize> = (0..m).into_par_iter().map(&row_len).collect();
    let mut indptr = Vec::with_capacity(m + 1);
    indptr.push(0usize);
    for len in lens {
        indptr.push(indptr[indptr.len() - 1] + len);
    }
    let nnz = indptr[m];
    let mut indices = vec![0usize; nnz];
    let mut data = vec![0f32; nnz];

    // Cut the output into disjoint blocks of rows so that blocks can be written in
    // parallel without unsafe code.
    const BLOCK: usize = 1024;
    let mut blocks = Vec::with_capacity(m.div_ceil(BLOCK));
    let (mut ind_rest, mut val_rest) = (&mut indices[..], &mut data[..]);
    for r0 in (0..m).step_by(BLOCK) {
        let r1 = (r0 + BLOCK).min(m);
        let len = indptr[r1] - indptr[r0];
        let (ind, ind_tail) = std::mem::take(&mut ind_rest).split_at_mut(len);
        let (val, val_tail) = std::mem::take(&mut val_rest).split_at_mut(len);
        blocks.push((r0, r1, ind, val));
        (ind_rest, val_rest) = (ind_tail, val_tail);
    }
    blocks.into_par_iter().for_each(|(r0, r1, ind, val)| {
        let base = indptr[r0];
        for r in r0..r1 {
            let (s, e) = (indptr[r] - base, indptr[r + 1] - base);
            fill(r, &mut ind[s..e], &mut val[s..e]);
        }
    });
    CsMat::new((m, k), indptr, indices, data)
}

/// The generators by the names the command line takes: `uniform` ([`uniform_random`] at `density`), `powerlaw`
/// ([`power_law`], mean row length `density * k`, exponent 2), `banded` ([`banded`], half-bandwidth
/// `density * k / 2`), `pruned` ([`pruned_dense`] at sparsity `1 - density`), `scaled-SIGMA`
/// ([`pruned_row_scaled`], rows scaled by `exp(SIGMA * N(0, 1))` before the pruning, SIGMA in [0, 4], e.g.
/// `scaled-0.45`) and `blocks-RxC` or `blocks-B` ([`block_sparse`], blocks of R x C or B x B kept at `density`,
/// e.g. `blocks-16x16`, `blocks-1x8`). A clear error, before anything is drawn, for an unknown name, a density
/// that is not a fraction in [0, 1], a dimension past i32::MAX (the kernels' index type), a block side that is
/// 0 or not a number and, for `pruned` and `scaled-SIGMA`, a dense m x k past i32::MAX elements (they draw that
/// matrix first).
pub fn by_name(generator: &str, m: usize, k: usize, density: f64, seed: u64) -> Result<CsMat<f32>> {
    if !(0.0..=1.0).contains(&density) {
        return Err(Error::Usage(format!("density {density}: must be a fraction in [0, 1]")));
    }
    if let Some(d) = [m, k].into_iter().find(|&d| d > i32::MAX as usize) {
        return Err(Error::TooLarge(format!("dimension {d} is past i32::MAX, which the kernels index with")));
    }
    // `scaled-SIGMA`: pruned rows scaled by exp(SIGMA * N(0, 1)); plain `pruned` is SIGMA = 0.
    let row_scale = match generator.strip_prefix("scaled-").map(str::parse::<f64>) {
        Some(Ok(sigma)) if (0.0..=4.0).contains(&sigma) => Some(sigma),
        Some(_) => {
            return Err(Error::Usage(format!("generator '{generator}': SIGMA of scaled-SIGMA must be in [0, 4]")))
        }
        None => (generator == "pruned").then_some(0.0),
    };
    if let Some(shape) = generator.strip_prefix("blocks-") {
        let side = |t: &str| t.parse::<usize>().ok().filter(|&b| b >= 1);
        let (r, c) = match shape.split_once('x') {
            Some((r, c)) => (side(r), side(c)),
            None => (side(shape), side(shape)),
        };
        let (Some(r), Some(c)) = (r, c) else {
            return Err(Error::Usage(format!(
                "generator '{generator}': blocks-RxC or blocks-B takes block sides that are whole numbers >= 1"
            )));
        };
        return Ok(block_sparse(m, k, r, c, density, seed));
    }
    if let Some(sigma) = row_scale {
        if m.checked_mul(k).is_none_or(|e| e > i32::MAX as usize) {
            return Err(Error::TooLarge(format!("{generator}: {m} x {k} elements before pruning, past i32::MAX")));
        }
        return Ok(pruned_row_scaled(m, k, 1.0 - density, sigma, seed));
    }
    Ok(match generator {
        "uniform" => uniform_random(m, k, density, seed),
        "powerlaw" => power_law(m, k, density * k as f64, 2.0, seed),
        "banded" => banded(m, k, ((density * k as f64) / 2.0) as usize, seed),
        other => {
            return Err(Error::Usage(format!(
                "unknown generator '{other}' (uniform, powerlaw, banded, pruned, scaled-SIGMA, blocks-RxC)"
            )))
        }
    })
}

/// Random m x k matrix where each row holds about `density * k` distinct uniformly
/// chosen columns (the count is rounded up or down at random so the mean is exact).
pub fn uniform_random(m: usize, k: usize, density: f64, seed: u64) -> CsMat<f32> {
    assert!((0.0..=1.0).contains(&density), "density {density} not in [0, 1]");
    let target = density * k as f64;
    // Each row's stream is replayed in `fill`, so the length drawn first is the same.
    let row_len = |r: usize| stochastic_round(target, &mut stream(seed, salt::UNIFORM, r)).min(k);
    build_rows(m, k, row_len, |r, cols, vals| {
        let mut rng = stream(seed, salt::UNIFORM, r);
        // Replay the length draw (never inside debug_assert!: release must draw it too).
        let len = stochastic_round(target, &mut rng).min(k);
        debug_assert_eq!(len, cols.len());
        sample_sorted(&mut rng, k, cols);
        vals.iter_mut().for_each(|v| *v = rng.signed_unit_f32());
    })
}

/// Random m x k matrix with exactly `nnz` entries at distinct uniformly chosen positions
/// (Sputnik's test list uses shapes like 7 x 96 with 333 entries). Sequential: meant
/// for small and medium matrices.
pub fn uniform_random_nnz(m: usize, k: usize, nnz: usize, seed: u64) -> CsMat<f32> {
    let cells = m.checked_mul(k).expect("m * k overflows usize");
    assert!(nnz <= cells, "nnz {nnz} > m * k = {cells}");
    let mut rng = stream(seed, salt::NNZ, 0);
    let mut pos = vec![0usize; nnz];
    sample_sorted(&mut rng, cells, &mut pos);
    let mut indptr = vec![0usize; m + 1];
    for &p in &pos {
        indptr[p / k + 1] += 1;
    }
    for r in 0..m {
        indptr[r + 1] += indptr[r];
    }
    // Row-major positions are sorted, so columns within a row come out sorted too.
    let indices = pos.iter().map(|&p| p % k).collect();
    let data = (0..nnz).map(|_| rng.signed_unit_f32()).collect();
    CsMat::new((m, k), indptr, indices, data)
}

/// Random m x k matrix with Pareto-distributed row lengths (finite tail exponent
/// `alpha` > 1, finite mean `avg_row_len` >= 0 before clamping to k): most rows near
/// the minimum `avg_row_len * (alpha - 1) / alpha`, a few very long ones, like
/// power-law graphs. Columns are uniform.
pub fn power_law(m: usize, k: usize, avg_row_len: f64, alpha: f64, seed: u64) -> CsMat<f32> {
    // Infinite alpha makes (alpha - 1) / alpha NaN, which the clamp to k turns into full rows.
    assert!(alpha > 1.0 && alpha.is_finite(), "alpha {alpha} must be finite and exceed 1 (for a finite mean)");
    assert!(
        avg_row_len >= 0.0 && avg_row_len.is_finite(),
        "average row length {avg_row_len} must be finite and non-negative"
    );
    // The ratio first: avg_row_len * (alpha - 1) overflows to inf for huge alpha, which
    // would fill every row.
    let x_min = avg_row_len * ((alpha - 1.0) / alpha);
    let draw_len = |rng: &mut Rng| {
        // Inverse CDF of Pareto(x_min, alpha); 1 - u is in (0, 1], so this is finite.
        let x = x_min * (1.0 - rng.uniform()).powf(-1.0 / alpha);
        stochastic_round(x.min(k as f64), rng).min(k)
    };
    build_rows(
        m,
        k,
        |r| draw_len(&mut stream(seed, salt::POWER_LAW, r)),
        |r, cols, vals| {
            let mut rng = stream(seed, salt::POWER_LAW, r);
            let len = draw_len(&mut rng);
            debug_assert_eq!(len, cols.len());
            sample_sorted(&mut rng, k, cols);
            vals.iter_mut().for_each(|v| *v = rng.signed_unit_f32());
        },
    )
}

/// Columns of row `i` in a band of half-width `hb`, clipped to 0..k.
fn band(i: usize, k: usize, hb: usize) -> std::ops::Range<usize> {
    let lo = i.saturating_sub(hb).min(k);
    let hi = i.saturating_add(hb).saturating_add(1).min(k);
    lo..hi.max(lo)
}

/// m x k matrix with every entry |i - j| <= `half_bandwidth` (and j < k) present.
pub fn banded(m: usize, k: usize, half_bandwidth: usize, seed: u64) -> CsMat<f32> {
    build_rows(
        m,
        k,
        |r| band(r, k, half_bandwidth).len(),
        |r, cols, vals| {
            let mut rng = stream(seed, salt::BANDED, r);
            for ((c, v), j) in cols.iter_mut().zip(vals).zip(band(r, k, half_bandwidth)) {
                *c = j;
                *v = rng.signed_unit_f32();
            }
        },
    )
}

/// Copy of CSR `a` with `round(fraction * rows)` randomly chosen rows emptied.
pub fn with_empty_rows(a: &CsMat<f32>, fraction: f64, seed: u64) -> CsMat<f32> {
    assert!(a.is_csr(), "expected a CSR matrix");
    assert!((0.0..=1.0).contains(&fraction), "fraction {fraction} not in [0, 1]");
    let (m, k) = a.shape();
    let mut cleared_rows = vec![0usize; (fraction * m as f64).round() as usize];
    sample_sorted(&mut stream(seed, salt::EMPTY_ROWS, 0), m, &mut cleared_rows);
    let mut cleared = vec![false; m];
    cleared_rows.iter().for_each(|&r| cleared[r] = true);
    let indptr = a.proper_indptr();
    let row = |r: usize| indptr[r]..indptr[r + 1];
    build_rows(
        m,
        k,
        |r| if cleared[r] { 0 } else { row(r).len() },
        |r, cols, vals| {
            if cleared[r] {
                return;
            }
            cols.copy_from_slice(&a.indices()[row(r)]);
            vals.copy_from_slice(&a.data()[row(r)]);
        },
    )
}

/// Copy of CSR `a` whose row `row` holds all k columns. Entries already there keep
/// their values; new ones are uniform in [-1, 1) from a stream seeded by `row`.
pub fn with_dense_row(a: &CsMat<f32>, row: usize) -> CsMat<f32> {
    assert!(a.is_csr(), "expected a CSR matrix");
    let (m, k) = a.shape();
    assert!(row < m, "row {row} out of range for {m} rows");
    let indptr = a.proper_indptr();
    let span = |r: usize| indptr[r]..indptr[r + 1];
    build_rows(
        m,
        k,
        |r| if r == row { k } else { span(r).len() },
        |r, cols, vals| {
            let (old_cols, old_vals) = (&a.indices()[span(r)], &a.data()[span(r)]);
            if r != row {
                cols.copy_from_slice(old_cols);
                vals.copy_from_slice(old_vals);
                return;
            }
            let mut rng = stream(row as u64, salt::DENSE_ROW, 0);
            let mut next = 0; // merge cursor into the old, sorted row
            for (j, (c, v)) in cols.iter_mut().zip(vals.iter_mut()).enumerate() {
                *c = j;
                // Drawn for every column, so a new value depends only on (row, column),
                // not on which entries the row had before.
                let fresh = rng.signed_unit_f32();
                if old_cols.get(next) == Some(&j) {
                    *v = old_vals[next];
                    next += 1;
                } else {
                    *v = fresh;
                }
            }
        },
    )
}

/// DL-style weight matrix: dense normal(0, 1) * 0.05 values, of which the
/// `round((1 - sparsity) * m * k)` largest in magnitude over the whole matrix are kept
/// (global magnitude pruning); ties at the threshold are kept in row-major order.
pub fn pruned_dense(m: usize, k: usize, sparsity: f64, seed: u64) -> CsMat<f32> {
    pruned_row_scaled(m, k, sparsity, 0.0, seed)
}

/// [`pruned_dense`] with each row's values first scaled by `exp(sigma * N(0, 1))`, drawn per row: the weight
/// matrix of a layer whose rows (output units) differ in scale, which global magnitude pruning leaves with rows
/// of lognormally spread lengths (row cv about 0.9-2.1 at sigma 0.3-0.6 and 5-10% density; NOTES.md, "SpMM step
/// 16", whose `scaled:M:SIGMA` sweeps set `select`'s eight-row tile rule). `sigma = 0` is [`pruned_dense`]
/// exactly: the row scales come from their own streams and `exp(0)` is 1.
pub fn pruned_row_scaled(m: usize, k: usize, sparsity: f64, sigma: f64, seed: u64) -> CsMat<f32> {
    // Callers often pass 1 - density, so the density is named too.
    assert!((0.0..=1.0).contains(&sparsity), "sparsity {sparsity} (density {}) not in [0, 1]", 1.0 - sparsity);
    assert!(sigma.is_finite() && sigma >= 0.0, "row-scale sigma {sigma} must be finite and >= 0");
    let cells = m.checked_mul(k).unwrap_or_else(|| panic!("pruned_dense: {m} x {k} entries overflow usize"));
    let mut dense = vec![0f32; cells];
    if k > 0 {
        dense.par_chunks_mut(k).enumerate().for_each(|(r, row)| {
            let scale = if sigma == 0.0 { 1.0 } else { (sigma * stream(seed, salt::ROW_SCALE, r).normal()).exp() };
            let mut rng = stream(seed, salt::PRUNED, r);
            row.iter_mut().for_each(|v| *v = (rng.normal() * 0.05 * scale) as f32);
        });
    }
    let total = dense.len();
    let keep = (((1.0 - sparsity) * total as f64).round() as usize).min(total);
    // The keep-th largest magnitude is the threshold; an O(total) selection beats a sort.
    let (threshold, mut ties_left) = if keep == 0 {
        (f32::INFINITY, 0)
    } else {
        let mut mags: Vec<f32> = dense.iter().map(|v| v.abs()).collect();
        let (_, &mut t, _) = mags.select_nth_unstable_by(total - keep, f32::total_cmp);
        let above = dense.iter().filter(|v| v.abs() > t).count();
        (t, keep - above)
    };
    let mut indptr = Vec::with_capacity(m + 1);
    let mut indices = Vec::with_capacity(keep);
    let mut data = Vec::with_capacity(keep);
    indptr.push(0);
    for r in 0..m {
        for (j, &v) in dense[r * k..(r + 1) * k].iter().enumerate() {
            let tie = v.abs() == threshold && ties_left > 0;
            if v.abs() > threshold || tie {
                ties_left -= usize::from(tie);
                indices.push(j);
                data.push(v);
            }
        }
        indptr.push(indices.len());
    }
    CsMat::new((m, k), indptr, indices, data)
}

/// Block-sparse weight matrix: m x k cut into `r` x `c` blocks (the last block row and block column cut short
/// where `r` does not divide m or `c` does not divide k), each kept whole with probability `density`, drawn
/// independently per block; values normal(0, 1) * 0.05 as in [`pruned_dense`]. This is what magnitude pruning
/// by blocks (the norm of each block of iid weights against one global threshold) keeps, but for the exact
/// count: the kept blocks of such pruning are a uniform choice, and each block row holds a binomial number of
/// them. The rows of one block row have the same columns; `r = c = 1` is unstructured, `1 x c` keeps runs of
/// c columns in a row, `r x 1` the same columns in r rows.
pub fn block_sparse(m: usize, k: usize, r: usize, c: usize, density: f64, seed: u64) -> CsMat<f32> {
    assert!((0.0..=1.0).contains(&density), "density {density} not in [0, 1]");
    assert!(r >= 1 && c >= 1, "block of {r} x {c}: both sides must be at least 1");
    let block_cols = k.div_ceil(c);
    // The kept blocks of each block row, by block column, ascending.
    let kept: Vec<Vec<usize>> = (0..m.div_ceil(r))
        .into_par_iter()
        .map(|br| {
            let mut rng = stream(seed, salt::BLOCKS, br);
            (0..block_cols).filter(|_| rng.uniform() < density).collect()
        })
        .collect();
    let width = |bc: usize| c.min(k - bc * c);
    build_rows(
        m,
        k,
        |row| kept[row / r].iter().map(|&bc| width(bc)).sum(),
        |row, cols, vals| {
            let run = kept[row / r].iter().flat_map(|&bc| bc * c..bc * c + width(bc));
            cols.iter_mut().zip(run).for_each(|(o, j)| *o = j);
            let mut rng = stream(seed, salt::BLOCK_VALUES, row);
            vals.iter_mut().for_each(|v| *v = (rng.normal() * 0.05) as f32);
        },
    )
}

/// 27-point stencil on an nx * ny * nz grid (row = x + nx * (y + ny * z)): 26 on the
/// diagonal, -1 for each of the up to 26 neighbours. Built straight into the CSR arrays
/// in parallel, because 160^3 has 4.1M rows and 110M entries.
pub fn laplacian_27pt(nx: usize, ny: usize, nz: usize) -> CsMat<f32> {
    let n = nx
        .checked_mul(ny)
        .and_then(|n| n.checked_mul(nz))
        .unwrap_or_else(|| panic!("laplacian_27pt: {nx} x {ny} x {nz} grid points overflow usize"));
    let coords = |r: usize| (r % nx, (r / nx) % ny, r / (nx * ny));
    // Neighbour offsets that stay inside 0..len along one axis.
    let span = |x: usize, len: usize| (x.saturating_sub(1))..(x + 2).min(len);
    build_rows(
        n,
        n,
        |r| {
            let (x, y, z) = coords(r);
            span(x, nx).len() * span(y, ny).len() * span(z, nz).len()
        },
        |r, cols, vals| {
            let (x, y, z) = coords(r);
            let mut p = 0;
            // z, then y, then x ascending is ascending column order.
            for zz in span(z, nz) {
                for yy in span(y, ny) {
                    for xx in span(x, nx) {
                        let c = xx + nx * (yy + ny * zz);
                        cols[p] = c;
                        vals[p] = if c == r { 26.0 } else { -1.0 };
                        p += 1;
                    }
                }
            }
        },
    )
}

/// Dense rows x cols matrix, row-major, uniform in [-1, 1).
pub fn dense_matrix(rows: usize, cols: usize, seed: u64) -> Vec<f32> {
    let len = rows.checked_mul(cols).unwrap_or_else(|| panic!("dense_matrix: {rows} x {cols} entries overflow usize"));
    let mut out = vec![0f32; len];
    if cols > 0 {
        out.par_chunks_mut(cols).enumerate().for_each(|(r, row)| {
            let mut rng = stream(seed, salt::DENSE, r);
            row.iter_mut().for_each(|v| *v = rng.signed_unit_f32());
        });
    }
    out
}

/// `a` with its values converted to `T` (round to nearest); same structure and storage.
pub fn convert<T: Scalar>(a: &CsMat<f32>) -> CsMat<T> {
    let indptr = a.proper_indptr().into_owned();
    let indices = a.indices().to_vec();
    let data = a.data().par_iter().map(|&v| T::from_f32(v)).collect();
    if a.is_csr() {
        CsMat::new(a.shape(), indptr, indices, data)
    } else {
        CsMat::new_csc(a.shape(), indptr, indices, data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;

    /// Shape, CSR, sorted unique in-range columns, values in [-1, 1) when `unit`.
    fn check(a: &CsMat<f32>, m: usize, k: usize, unit: bool) {
        assert_eq!(a.shape(), (m, k));
        assert!(a.is_csr());
        let ip = a.indptr();
        let ip = ip.raw_storage();
        assert_eq!(ip.len(), m + 1);
        assert_eq!(ip[0], 0);
        assert_eq!(ip[m], a.nnz());
        for r in 0..m {
            let cols = &a.indices()[ip[r]..ip[r + 1]];
            assert!(cols.windows(2).all(|w| w[0] < w[1]), "row {r} not strictly sorted");
            assert!(cols.iter().all(|&c| c < k));
        }
        if unit {
            assert!(a.data().iter().all(|&v| (-1.0..1.0).contains(&v)));
        }
    }

    fn row_len(a: &CsMat<f32>, r: usize) -> usize {
        a.indptr().outer_inds_sz(r).len()
    }

    fn one_thread<R: Send>(f: impl FnOnce() -> R + Send) -> R {
        rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap().install(f)
    }

    #[test]
    fn rng_basics() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        let xs: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        assert_eq!(xs, (0..8).map(|_| b.next_u64()).collect::<Vec<_>>());
        assert_ne!(xs[0], Rng::new(8).next_u64());
        let mut counts = [0usize; 5];
        let (mut sum, mut sq) = (0.0, 0.0);
        for _ in 0..100_000 {
            let u = a.uniform();
            assert!((0.0..1.0).contains(&u));
            let r = a.range(-3.0, 5.0);
            assert!((-3.0..5.0).contains(&r));
            counts[a.below(5)] += 1;
            let z = a.normal();
            sum += z;
            sq += z * z;
        }
        assert!(counts.iter().all(|&c| (19_000..21_000).contains(&c)), "{counts:?}");
        let mean = sum / 1e5;
        assert!(mean.abs() < 0.02 && (sq / 1e5 - 1.0).abs() < 0.03, "{mean} {sq}");
    }

    #[test]
    fn uniform_random_invariants_and_density() {
        for (density, m, k) in [(0.1, 300, 257), (0.5, 200, 300), (0.0, 5, 10), (1.0, 4, 9)] {
            let a = uniform_random(m, k, density, 3);
            check(&a, m, k, true);
            let want = density * k as f64;
            for r in 0..m {
                assert!((row_len(&a, r) as f64 - want).abs() < 1.0, "row {r}");
            }
            let mean = a.nnz() as f64 / m as f64;
            assert!((mean - want).abs() < 0.1, "density {density}: mean {mean} vs {want}");
        }
        let a = uniform_random(100, 1000, 0.0125, 9);
        assert!((a.nnz() as f64 / 100.0 - 12.5).abs() < 0.2);
    }

    #[test]
    fn uniform_random_is_deterministic_and_thread_independent() {
        for density in [0.05, 0.6] {
            let a = uniform_random(3000, 200, density, 11);
            assert_eq!(a, uniform_random(3000, 200, density, 11));
            assert_eq!(a, one_thread(|| uniform_random(3000, 200, density, 11)));
            assert_ne!(a, uniform_random(3000, 200, density, 12));
        }
    }

    #[test]
    fn uniform_random_nnz_exact() {
        for (m, k, nnz) in [(7, 96, 333), (8, 8, 64), (5, 5, 0), (1000, 1000, 5000)] {
            let a = uniform_random_nnz(m, k, nnz, 1);
            check(&a, m, k, true);
            assert_eq!(a.nnz(), nnz);
            assert_eq!(a, uniform_random_nnz(m, k, nnz, 1));
        }
        assert_ne!(uniform_random_nnz(7, 96, 333, 1), uniform_random_nnz(7, 96, 333, 2));
    }

    #[test]
    fn power_law_lengths() {
        let (m, k, avg) = (20_000, 4096, 16.0);
        let a = power_law(m, k, avg, 2.5, 5);
        check(&a, m, k, true);
        let mean = a.nnz() as f64 / m as f64;
        assert!((mean - avg).abs() < 0.8, "mean row length {mean}");
        let long = (0..m).filter(|&r| row_len(&a, r) as f64 > 3.0 * avg).count();
        let short = (0..m).filter(|&r| row_len(&a, r) < 16).count();
        assert!(long > 100 && long < 1000, "{long} long rows");
        assert!(short > m / 2, "{short} short rows");
        assert_eq!(a, power_law(m, k, avg, 2.5, 5));
        assert_ne!(a, power_law(m, k, avg, 2.5, 6));
        // Clamped to k.
        let b = power_law(50, 8, 100.0, 1.5, 1);
        check(&b, 50, 8, true);
        assert_eq!(b.nnz(), 50 * 8);
    }

    #[test]
    fn power_law_huge_alpha_is_not_dense() {
        // Pareto with a huge alpha is nearly constant at the mean; avg * (alpha - 1)
        // used to overflow to inf and fill every row.
        let a = power_law(50, 1000, 4.0, 1e308, 1);
        check(&a, 50, 1000, true);
        assert!((0..50).all(|r| row_len(&a, r) == 4), "nnz {}", a.nnz());
    }

    #[test]
    #[should_panic(expected = "alpha inf must be finite and exceed 1")]
    fn power_law_rejects_infinite_alpha() {
        power_law(4, 4, 2.0, f64::INFINITY, 1);
    }

    #[test]
    #[should_panic(expected = "average row length NaN must be finite and non-negative")]
    fn power_law_rejects_nan_average() {
        power_law(4, 4, f64::NAN, 2.0, 1);
    }

    #[test]
    #[should_panic(expected = "average row length inf must be finite and non-negative")]
    fn power_law_rejects_infinite_average() {
        power_law(4, 4, f64::INFINITY, 2.0, 1);
    }

    #[test]
    #[should_panic(expected = "pruned_dense: 4294967296 x 4294967297 entries overflow usize")]
    fn pruned_dense_size_overflow_panics_with_sizes() {
        // 2^32 * (2^32 + 1) wraps to 2^32 cells, which used to be generated as a wrong shape.
        pruned_dense(1 << 32, (1 << 32) + 1, 0.5, 1);
    }

    #[test]
    #[should_panic(expected = "sparsity -0.5 (density 1.5) not in [0, 1]")]
    fn pruned_dense_names_density() {
        pruned_dense(4, 4, 1.0 - 1.5, 1);
    }

    #[test]
    #[should_panic(expected = "dense_matrix: 4294967296 x 4294967296 entries overflow usize")]
    fn dense_matrix_size_overflow_panics_with_sizes() {
        // 2^32 * 2^32 wraps to 0: an empty "matrix" instead of a panic.
        dense_matrix(1 << 32, 1 << 32, 1);
    }

    #[test]
    #[should_panic(expected = "laplacian_27pt: 4294967296 x 4294967296 x 1 grid points overflow usize")]
    fn laplacian_size_overflow_panics_with_sizes() {
        laplacian_27pt(1 << 32, 1 << 32, 1);
    }

    #[test]
    fn banded_has_exactly_the_band() {
        let (m, k, hb) = (10, 7, 2);
        let a = banded(m, k, hb, 4);
        check(&a, m, k, true);
        for i in 0..m {
            for j in 0..k {
                assert_eq!(a.get(i, j).is_some(), i.abs_diff(j) <= hb, "({i}, {j})");
            }
        }
        assert_eq!(a, banded(m, k, hb, 4));
        assert_ne!(a, banded(m, k, hb, 5));
        assert_eq!(banded(3, 3, usize::MAX, 0).nnz(), 9);
    }

    #[test]
    fn empty_and_dense_rows() {
        let base = banded(200, 150, 60, 1); // every row non-empty
        let a = with_empty_rows(&base, 0.25, 2);
        check(&a, 200, 150, true);
        let empty: Vec<usize> = (0..200).filter(|&r| row_len(&a, r) == 0).collect();
        assert_eq!(empty.len(), 50);
        for r in (0..200).filter(|r| !empty.contains(r)) {
            assert_eq!(a.outer_view(r), base.outer_view(r), "row {r}");
        }
        assert_eq!(a, with_empty_rows(&base, 0.25, 2));
        assert_ne!(a, with_empty_rows(&base, 0.25, 3));

        let d = with_dense_row(&base, 7);
        check(&d, 200, 150, true);
        assert_eq!(row_len(&d, 7), 150);
        assert_eq!(d.nnz(), base.nnz() - row_len(&base, 7) + 150);
        for (j, v) in base.outer_view(7).unwrap().iter() {
            assert_eq!(d.get(7, j), Some(v));
        }
        assert_eq!(d.outer_view(8), base.outer_view(8));
    }

    #[test]
    fn pruned_dense_keeps_the_largest() {
        let (m, k) = (64, 48);
        let full = pruned_dense(m, k, 0.0, 8);
        assert_eq!(full.nnz(), m * k);
        let std = (full.data().iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / (m * k) as f64).sqrt();
        assert!((std - 0.05).abs() < 0.005, "std {std}");
        let a = pruned_dense(m, k, 0.9, 8);
        check(&a, m, k, false);
        assert_eq!(a.nnz(), (0.1f64 * (m * k) as f64).round() as usize);
        let min_kept = a.data().iter().map(|v| v.abs()).fold(f32::INFINITY, f32::min);
        let max_dropped =
            full.iter().filter(|(_, (i, j))| a.get(*i, *j).is_none()).map(|(v, _)| v.abs()).fold(0.0, f32::max);
        assert!(min_kept >= max_dropped);
        for (v, (i, j)) in a.iter() {
            assert_eq!(full.get(i, j), Some(v));
        }
        assert_ne!(a, pruned_dense(m, k, 0.9, 9));
        assert_eq!(pruned_dense(m, k, 1.0, 8).nnz(), 0);
    }

    #[test]
    fn row_scaled_pruning_spreads_the_row_lengths() {
        let (m, k) = (512, 1536);
        // sigma = 0 is pruned_dense, draw for draw.
        assert_eq!(pruned_row_scaled(m, k, 0.9, 0.0, 5), pruned_dense(m, k, 0.9, 5));
        let cv = |a: &CsMat<f32>| {
            let lens: Vec<f64> = a.indptr().as_slice().unwrap().windows(2).map(|w| (w[1] - w[0]) as f64).collect();
            let mean = lens.iter().sum::<f64>() / lens.len() as f64;
            (lens.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / lens.len() as f64).sqrt() / mean
        };
        let even = pruned_dense(m, k, 0.9, 5);
        let mut last = cv(&even);
        assert!(last < 0.3, "unscaled rows cv {last}");
        for sigma in [0.3, 0.6] {
            let a = pruned_row_scaled(m, k, 0.9, sigma, 5);
            check(&a, m, k, false);
            // The global threshold keeps the same count; the scales only move it between rows.
            assert_eq!(a.nnz(), even.nnz());
            let c = cv(&a);
            assert!(c > last + 0.3, "sigma {sigma}: cv {c} after {last}");
            last = c;
        }
        // The scale multiplies the whole row: a row's values keep their order (the unscaled row's kept values in
        // the same columns are the same normals).
        let full = pruned_row_scaled(4, 64, 0.0, 0.5, 7);
        let plain = pruned_dense(4, 64, 0.0, 7);
        for r in 0..4 {
            let (a, b) = (full.outer_view(r).unwrap(), plain.outer_view(r).unwrap());
            let ratios: Vec<f64> = a.data().iter().zip(b.data()).map(|(&x, &y)| x as f64 / y as f64).collect();
            assert!(ratios.iter().all(|q| (q / ratios[0] - 1.0).abs() < 1e-5), "row {r}: {ratios:?}");
        }
        assert!(matches!(by_name("scaled-0.45", m, k, 0.1, 5), Ok(a) if a == pruned_row_scaled(m, k, 0.9, 0.45, 5)));
        for bad in ["scaled-", "scaled-x", "scaled--1", "scaled-5", "scaled-NaN", "scaled-inf"] {
            assert!(matches!(by_name(bad, 8, 8, 0.5, 1), Err(Error::Usage(_))), "{bad}");
        }
        assert!(matches!(by_name("scaled", 8, 8, 0.5, 1), Err(Error::Usage(_))));
        assert!(matches!(by_name("scaled-0.3", 1 << 16, 1 << 16, 0.5, 1), Err(Error::TooLarge(_))));
    }

    #[test]
    fn block_sparse_keeps_whole_blocks() {
        // 100 x 90 in 16 x 8 blocks: the last block row has 4 rows and the last block column 2 columns.
        let (m, k, r, c) = (100, 90, 16, 8);
        let a = block_sparse(m, k, r, c, 0.3, 11);
        check(&a, m, k, false);
        let (block_rows, block_cols) = (m.div_ceil(r), k.div_ceil(c));
        let mut kept = 0;
        for br in 0..block_rows {
            for bc in 0..block_cols {
                // A block is all there or all missing.
                let cells: Vec<bool> = (br * r..(br * r + r).min(m))
                    .flat_map(|i| (bc * c..(bc * c + c).min(k)).map(move |j| (i, j)))
                    .map(|(i, j)| a.get(i, j).is_some())
                    .collect();
                assert!(cells.iter().all(|&x| x == cells[0]), "block ({br}, {bc}) partly kept");
                kept += usize::from(cells[0]);
            }
        }
        // 132 blocks at 0.3: 39.6 expected, sd 5.3.
        assert!((20..=60).contains(&kept), "{kept} of {} blocks kept", block_rows * block_cols);
        assert!(a.data().iter().all(|v| v.is_finite() && *v != 0.0));
        let std = (a.data().iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / a.nnz() as f64).sqrt();
        assert!((std - 0.05).abs() < 0.01, "std {std}");
        assert_eq!(a, block_sparse(m, k, r, c, 0.3, 11));
        assert_ne!(a, block_sparse(m, k, r, c, 0.3, 12));
        // Density over a large matrix, and the extremes.
        let big = block_sparse(512, 512, 4, 4, 0.1, 3);
        let d = big.nnz() as f64 / (512.0 * 512.0);
        assert!((d - 0.1).abs() < 0.01, "density {d}");
        assert_eq!(block_sparse(m, k, r, c, 1.0, 1).nnz(), m * k);
        assert_eq!(block_sparse(m, k, r, c, 0.0, 1).nnz(), 0);
        assert_eq!(block_sparse(0, k, r, c, 0.5, 1).shape(), (0, k));
        assert_eq!(block_sparse(m, 0, r, c, 0.5, 1).nnz(), 0);
        // By name: blocks-RxC and blocks-B.
        assert!(matches!(by_name("blocks-16x8", m, k, 0.3, 11), Ok(b) if b == a));
        assert!(matches!(by_name("blocks-4", 512, 512, 0.1, 3), Ok(b) if b == big));
        for bad in ["blocks-", "blocks-0", "blocks-4x0", "blocks-x4", "blocks-4x", "blocks-a", "blocks-4x4x4"] {
            assert!(matches!(by_name(bad, 8, 8, 0.5, 1), Err(Error::Usage(_))), "{bad}");
        }
    }

    #[test]
    fn laplacian_structure() {
        let (nx, ny, nz) = (3, 4, 5);
        let a = laplacian_27pt(nx, ny, nz);
        let n = nx * ny * nz;
        check(&a, n, n, false);
        // Per axis, a path of length l has 3l - 2 (i, j) pairs with |i - j| <= 1.
        assert_eq!(a.nnz(), (3 * nx - 2) * (3 * ny - 2) * (3 * nz - 2));
        assert_eq!(a, a.transpose_view().to_csr());
        for r in 0..n {
            assert_eq!(a.get(r, r), Some(&26.0));
            let sum: f32 = a.outer_view(r).unwrap().iter().map(|(_, v)| v).sum();
            assert_eq!(sum, 27.0 - row_len(&a, r) as f32, "row {r}");
        }
        // The interior point (1, 1, 1) has all 26 neighbours.
        assert_eq!(row_len(&a, 1 + nx * (1 + ny)), 27);
    }

    #[test]
    fn dense_matrix_values() {
        let d = dense_matrix(300, 17, 4);
        assert_eq!(d.len(), 300 * 17);
        assert!(d.iter().all(|v| (-1.0..1.0).contains(v)));
        assert_eq!(d, one_thread(|| dense_matrix(300, 17, 4)));
        assert_ne!(d, dense_matrix(300, 17, 5));
        assert!(dense_matrix(0, 5, 1).is_empty() && dense_matrix(5, 0, 1).is_empty());
    }

    #[test]
    fn convert_rounds_values() {
        let a = uniform_random(20, 30, 0.3, 6);
        let h = convert::<f16>(&a);
        assert_eq!(h.indptr(), a.indptr());
        assert_eq!(h.indices(), a.indices());
        for (x, y) in a.data().iter().zip(h.data()) {
            assert_eq!(*y, f16::from_f32(*x));
        }
        let d = convert::<f64>(&a);
        assert!(a.data().iter().zip(d.data()).all(|(x, y)| *x as f64 == *y));
    }
}
