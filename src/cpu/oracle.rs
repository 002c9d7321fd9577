//! f64 reference results for checking the kernels.
//!
//! Deliberately independent of every optimized path: plain sequential loops over the raw
//! CSR arrays, f64 accumulation in storage order, no skipping of zeros and no special
//! cases, so NaN and infinities propagate exactly as IEEE f64 arithmetic makes them
//! (0 * NaN is NaN, inf + -inf is NaN).

use crate::scalar::{DType, Scalar};
use sprs::{CsMat, CsMatView};

/// C = A (m x k, CSR) * B (k x n, row-major), returned m x n row-major.
pub fn spmm<T: Scalar>(a: CsMatView<T>, b: &[T], n: usize) -> Vec<f64> {
    spmm_mapped(a, b, n, |v| v)
}

/// |A| * |B|, the magnitude that scales the rounding error of each C entry.
pub fn spmm_abs<T: Scalar>(a: CsMatView<T>, b: &[T], n: usize) -> Vec<f64> {
    spmm_mapped(a, b, n, f64::abs)
}

/// A * B with `f` applied to every operand after widening to f64.
fn spmm_mapped<T: Scalar>(a: CsMatView<T>, b: &[T], n: usize, f: fn(f64) -> f64) -> Vec<f64> {
    assert!(a.is_csr(), "oracle expects CSR");
    let (m, k) = a.shape();
    assert_eq!(b.len(), k * n, "B must be k x n");
    // Row slices of a bigger matrix keep absolute offsets; rebase them to 0.
    let indptr = a.proper_indptr();
    let (ind, val) = (a.indices(), a.data());
    let mut c = vec![0.0f64; m * n];
    for i in 0..m {
        let c_row = &mut c[i * n..(i + 1) * n];
        for p in indptr[i]..indptr[i + 1] {
            let av = f(val[p].to_f64());
            let b_row = &b[ind[p] * n..(ind[p] + 1) * n];
            for j in 0..n {
                c_row[j] += av * f(b_row[j].to_f64());
            }
        }
    }
    c
}

/// y' = alpha * A * x + beta * y. When `beta == 0`, `y` is not read at all (it may be
/// `None` or hold NaN), matching BLAS semantics; otherwise it must be given.
pub fn spmv<T: Scalar>(a: CsMatView<T>, x: &[T], alpha: f64, y: Option<&[T]>, beta: f64) -> Vec<f64> {
    assert!(a.is_csr(), "oracle expects CSR");
    let (m, k) = a.shape();
    assert_eq!(x.len(), k, "x must have k entries");
    let y = (beta != 0.0).then(|| {
        let y = y.expect("beta != 0 needs y");
        assert_eq!(y.len(), m, "y must have m entries");
        y
    });
    let indptr = a.proper_indptr();
    let (ind, val) = (a.indices(), a.data());
    (0..m)
        .map(|i| {
            let mut acc = 0.0f64;
            for p in indptr[i]..indptr[i + 1] {
                acc += val[p].to_f64() * x[ind[p]].to_f64();
            }
            match y {
                Some(y) => alpha * acc + beta * y[i].to_f64(),
                None => alpha * acc,
            }
        })
        .collect()
}

/// Structural sparse product C = A * B (both CSR), sorted columns.
///
/// An entry (i, j) is stored wherever some product a_ik * b_kj exists, even when the
/// values sum to exactly 0 or a stored a_ik is 0: the kernels emit the symbolic
/// structure, so comparing structures needs the oracle to keep it too.
/// Gustavson's row-by-row algorithm with a dense accumulator and a row marker.
pub fn spgemm<T: Scalar>(a: CsMatView<T>, b: CsMatView<T>) -> CsMat<f64> {
    assert!(a.is_csr() && b.is_csr(), "oracle expects CSR");
    assert_eq!(a.cols(), b.rows(), "inner dimensions differ");
    let (m, n) = (a.rows(), b.cols());
    let (a_ptr, b_ptr) = (a.proper_indptr(), b.proper_indptr());
    let mut acc = vec![0.0f64; n];
    // mark[j] == i + 1 means column j already appeared in row i (0 = never).
    let mut mark = vec![0usize; n];
    let mut touched = Vec::new();
    let mut indptr = vec![0usize];
    let (mut indices, mut data) = (Vec::new(), Vec::new());
    for i in 0..m {
        touched.clear();
        for p in a_ptr[i]..a_ptr[i + 1] {
            let av = a.data()[p].to_f64();
            let r = a.indices()[p];
            for q in b_ptr[r]..b_ptr[r + 1] {
                let j = b.indices()[q];
                if mark[j] != i + 1 {
                    mark[j] = i + 1;
                    acc[j] = 0.0;
                    touched.push(j);
                }
                acc[j] += av * b.data()[q].to_f64();
            }
        }
        touched.sort_unstable();
        indices.extend_from_slice(&touched);
        data.extend(touched.iter().map(|&j| acc[j]));
        indptr.push(indices.len());
    }
    CsMat::new((m, n), indptr, indices, data)
}

/// Outcome of [`compare`].
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// Largest |got - want| over the elements; infinite if a non-finite mismatch exists.
    pub max_abs_err: f64,
    /// Largest |got - want| / |want| over elements with `want != 0` (same convention).
    pub max_rel_err: f64,
    /// The element that most exceeds its bound (largest error / bound; the first
    /// non-finite mismatch if any); 0 when everything is exact.
    pub worst_index: usize,
    /// How many elements fail.
    pub mismatches: usize,
    /// The first failing element as (index, got, want).
    pub first_mismatch: Option<(usize, f64, f64)>,
}

/// Element-wise check of `got` against `want`.
///
/// Element i passes iff both are NaN, or both are infinite with the same sign, or both
/// are finite and `|got - want| <= bound[i]` with a finite bound. Anything else (NaN vs
/// a number, inf vs finite, opposite infinities) is a mismatch, so kernels that swallow
/// or invent NaN/Inf are caught; so is a finite pair under an infinite or NaN bound,
/// which would pass any answer (a bound past its formula's range, e.g. gamma(n) for
/// n u >= 1, says nothing).
pub fn compare(got: &[f64], want: &[f64], bound: &[f64]) -> Comparison {
    assert_eq!(got.len(), want.len(), "got and want differ in length");
    assert_eq!(got.len(), bound.len(), "bound differs in length");
    let mut out =
        Comparison { max_abs_err: 0.0, max_rel_err: 0.0, worst_index: 0, mismatches: 0, first_mismatch: None };
    let mut worst_ratio = 0.0f64;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let (err, pass) = if g.is_finite() && w.is_finite() {
            let err = (g - w).abs();
            (err, bound[i].is_finite() && err <= bound[i])
        } else {
            let same = (g.is_nan() && w.is_nan()) || (g.is_infinite() && g == w);
            (if same { 0.0 } else { f64::INFINITY }, same)
        };
        out.max_abs_err = out.max_abs_err.max(err);
        if w != 0.0 && !w.is_nan() {
            out.max_rel_err = out.max_rel_err.max(err / w.abs());
        }
        let ratio = if err == 0.0 { 0.0 } else { err / bound[i] };
        if ratio > worst_ratio {
            worst_ratio = ratio;
            out.worst_index = i;
        }
        if !pass {
            out.mismatches += 1;
            out.first_mismatch.get_or_insert((i, g, w));
        }
    }
    out
}

/// gamma(l) = l u / (1 - l u), the classic bound on the relative error of l roundings;
/// infinite once l u >= 1, where no bound holds.
fn gamma(l: usize, u: f64) -> f64 {
    let lu = l as f64 * u;
    if lu < 1.0 {
        lu / (1.0 - lu)
    } else {
        f64::INFINITY
    }
}

/// Per-element error bound for C = A * B computed by a kernel, given |A||B|
/// (from [`spmm_abs`], m x n row-major) and the row lengths of A.
///
/// Derivation: the kernel and the oracle read the same stored inputs, so input rounding
/// is not an error. Entry (i, j) is a sum of l = len_i products accumulated in a format
/// with unit roundoff `u_acc` (f32 for f32/f16/bf16). Each product is rounded once (not
/// at all with FMA) and the sum takes at most l additions in any order, so (Higham,
/// *Accuracy and Stability of Numerical Algorithms*, eq. 3.5)
/// |c_acc - c| <= gamma(l) |A||B|_ij. We use gamma(l + 1) to leave room for one more
/// rounding (an alpha scale or a split-k merge). Rounding to the storage type adds
/// u_out |c_acc| <= u_out (1 + gamma) |A||B|_ij. The oracle's own f64 sum is off by up
/// to gamma_f64(l) |A||B|_ij, which matters only when `u_acc` is f64's. Finally an
/// absolute floor covers gradual underflow, whose errors are absolute, not relative:
/// 1e-30 for f32 accumulation and f32/bf16/f64 outputs, raised to 2^-25 (half the f16
/// subnormal spacing) when `u_out` is f16's, because f16 outputs below 2^-14 are
/// subnormal and products of small f16 values land there often.
pub fn spmm_error_bound(a_abs_b_abs: &[f64], row_lengths: &[usize], n: usize, u_acc: f64, u_out: f64) -> Vec<f64> {
    assert_eq!(a_abs_b_abs.len(), row_lengths.len() * n, "|A||B| must be rows x n");
    let floor = if u_out == DType::F16.unit_roundoff() { 2f64.powi(-25) } else { 1e-30 };
    let mut bound = Vec::with_capacity(a_abs_b_abs.len());
    for (i, &len) in row_lengths.iter().enumerate() {
        let g = gamma(len + 1, u_acc);
        let coef = if g.is_finite() { g + u_out * (1.0 + g) + gamma(len, f64::EPSILON / 2.0) } else { f64::INFINITY };
        // An all-zero |A||B| means an exact zero: keep inf * 0 from making the bound NaN.
        let scaled = |ab: f64| if ab == 0.0 { 0.0 } else { coef * ab };
        bound.extend(a_abs_b_abs[i * n..(i + 1) * n].iter().map(|&ab| scaled(ab) + floor));
    }
    bound
}

/// The largest finite |x| of `values` (0 if none): the magnitudes [`spmm_error_bound_tf32x3`] takes.
pub fn max_finite_abs<T: Scalar>(values: &[T]) -> f64 {
    values.iter().map(|x| x.to_f64().abs()).filter(|x| x.is_finite()).fold(0.0, f64::max)
}

/// Per-element error bound for C = A * B (f32) computed in 3xTF32 on the tensor cores
/// (crate::spmm::tensor_core, cuda/spmm/tensor_core.cuh), given |A||B| ([`spmm_abs`]), A's row lengths, and
/// the largest finite |a| of A and |b| of B ([`max_finite_abs`]; an element that meets an Inf or NaN gets an
/// infinite bound through |A||B| already; the kernel computes it exactly).
///
/// Derivation. Each f32 x is split into big = x rounded to tf32 (10 fraction bits: |x - big| <= 2^-11 |x|)
/// and small = x - big (exact in f32); the mma reads small's tf32 bits, i.e. small truncated to 10 fraction
/// bits (error <= 2^-10 |small| <= 2^-21 |x|), call it small'. a * b is computed as a_small' b_big + a_big
/// b_small' + a_big b_big; the error is a_big (b_small - b_small') + (a_small - a_small') b_big + a_small
/// b_small, at most (2 * 2^-21 (1 + 2^-11) + 2^-22) |a b| <= 6 * 2^-22 |a b|. The tensor core forms each
/// product of tf32 values exactly (11 x 11 significant bits). Each k-block (16 slots) is summed on the tensor
/// cores from zero, six mma.m16n8k8 in a chain, each adding 8 products to the chain's f32 value c. We do not
/// rely on the tensor core's internal rounding beyond this model: the sum is aligned to the largest term and
/// truncated, so each of the at most 9 terms loses less than one unit in the last place of the largest, an
/// error of at most 9 * 2^-23 (|c| + sum |p|) <= 9 * 2^-23 S_b per mma, S_b the k-block's share of
/// S = |A||B|_ij: 54 * 2^-23 S over all k-blocks. The k-block sums are added to the accumulator in f32 (round
/// to nearest; a k-block with no entry in the row adds an exact zero, so at most l adds round), then a
/// window's ranges (at most 8): gamma(l + 8) S for a row of l entries. Underflow: a small part below 2^-126 may be
/// flushed to zero by the tensor core, which loses at most 2^-126 |b| (or |a|) per product, and products below
/// 2^-126 at most 2^-126 each: an absolute 2^-124 l (max|a| + max|b| + 1). The oracle's own f64 error is
/// gamma_f64(l) S. Worst cases: on random data the 3xTF32 kernel's errors are 3-5 times below the FMA kernels'
/// (NOTES.md, "SpMM steps 10 and 11"); this bound is above [`spmm_error_bound`]'s f32 one (unit-tested).
pub fn spmm_error_bound_tf32x3(
    a_abs_b_abs: &[f64],
    row_lengths: &[usize],
    n: usize,
    max_abs_a: f64,
    max_abs_b: f64,
) -> Vec<f64> {
    assert_eq!(a_abs_b_abs.len(), row_lengths.len() * n, "|A||B| must be rows x n");
    let u32_ = DType::F32.unit_roundoff();
    let mut bound = Vec::with_capacity(a_abs_b_abs.len());
    for (i, &len) in row_lengths.iter().enumerate() {
        let coef = 6.0 * 2f64.powi(-22) + 54.0 * 2f64.powi(-23) + gamma(len + 8, u32_) + gamma(len, f64::EPSILON / 2.0);
        let floor = 2f64.powi(-124) * len as f64 * (max_abs_a + max_abs_b + 1.0) + 1e-30;
        bound.extend(a_abs_b_abs[i * n..(i + 1) * n].iter().map(|&ab| coef * ab + floor));
    }
    bound
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;

    /// [[1, 0*, 2], [], [-1, 3, 0]] where 0* is a stored zero.
    fn a3() -> CsMat<f32> {
        CsMat::new((3, 3), vec![0, 3, 3, 5], vec![0, 1, 2, 0, 1], vec![1.0, 0.0, 2.0, -1.0, 3.0])
    }

    const B3: [f32; 6] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];

    #[test]
    fn spmm_hand_computed() {
        let a = a3();
        assert_eq!(spmm(a.view(), &B3, 2), vec![11.0, 14.0, 0.0, 0.0, 8.0, 10.0]);
        assert_eq!(spmm_abs(a.view(), &B3.map(|v| -v), 2), vec![11.0, 14.0, 0.0, 0.0, 10.0, 14.0]);
        // Same numbers through f16 storage.
        let ah = crate::gen::convert::<f16>(&a);
        let bh = B3.map(f16::from_f32);
        assert_eq!(spmm(ah.view(), &bh, 2), vec![11.0, 14.0, 0.0, 0.0, 8.0, 10.0]);
        // A row slice (indptr not starting at 0) gives that row of the product.
        let bottom = a.slice_outer(2..3);
        assert_eq!(spmm(bottom, &B3, 2), vec![8.0, 10.0]);
    }

    #[test]
    fn spmm_propagates_nan_and_inf() {
        let a = a3();
        // B row 1 meets only the stored zero of row 0: 0 * NaN must still give NaN.
        let b = [1.0, 2.0, f32::NAN, 4.0, 5.0, 6.0];
        let c = spmm(a.view(), &b, 2);
        assert!(c[0].is_nan());
        assert_eq!(&c[1..4], &[14.0, 0.0, 0.0]);
        assert!(c[4].is_nan());
        // inf alone stays inf, 0 * inf and inf - inf are NaN.
        let inf = f32::INFINITY;
        let b = [inf, inf, 0.0, inf, 0.0, 0.0];
        let c = spmm(a.view(), &b, 2);
        assert_eq!(c[0], f64::INFINITY);
        assert!(c[1].is_nan());
        assert_eq!(c[4], f64::NEG_INFINITY);
        assert!(c[5].is_nan());
    }

    #[test]
    fn spmv_hand_computed_and_beta_zero() {
        let a = a3();
        let x = [1.0f32, 2.0, 3.0];
        let y = [1.0f32, 1.0, 1.0];
        assert_eq!(spmv(a.view(), &x, 2.0, Some(&y), 0.5), vec![14.5, 0.5, 10.5]);
        let nan_y = [f32::NAN; 3];
        assert_eq!(spmv(a.view(), &x, 2.0, Some(&nan_y), 0.0), vec![14.0, 0.0, 10.0]);
        assert_eq!(spmv(a.view(), &x, 2.0, None, 0.0), vec![14.0, 0.0, 10.0]);
        // With beta != 0 the NaN in y does get through.
        assert!(spmv(a.view(), &x, 2.0, Some(&nan_y), 1.0).iter().all(|v| v.is_nan()));
    }

    #[test]
    fn spgemm_is_structural() {
        // [1, -1] * [1; 1] = [0], but the entry exists.
        let a = CsMat::new((1, 2), vec![0, 2], vec![0, 1], vec![1.0f32, -1.0]);
        let b = CsMat::new((2, 1), vec![0, 1, 2], vec![0, 0], vec![1.0f32, 1.0]);
        let c = spgemm(a.view(), b.view());
        assert_eq!(c.nnz(), 1);
        assert_eq!(c.get(0, 0), Some(&0.0));
    }

    #[test]
    fn spgemm_matches_dense_product() {
        let a = crate::gen::uniform_random(40, 30, 0.1, 1);
        let b = crate::gen::uniform_random(30, 50, 0.1, 2);
        let c = spgemm(a.view(), b.view());
        assert_eq!(c.shape(), (40, 50));
        // Same per-entry summation order as spmm with B dense, so values are bit-equal.
        let dense_b = b.to_dense();
        let want = spmm(a.view(), dense_b.as_slice().unwrap(), 50);
        for i in 0..40 {
            let cols = &c.indices()[c.indptr().outer_inds_sz(i)];
            assert!(cols.windows(2).all(|w| w[0] < w[1]));
            for j in 0..50 {
                // The pattern: some k with a_ik and b_kj stored.
                let structural = a.outer_view(i).unwrap().iter().any(|(k, _)| b.get(k, j).is_some());
                assert_eq!(c.get(i, j).is_some(), structural, "({i}, {j})");
                assert_eq!(c.get(i, j).copied().unwrap_or(0.0), want[i * 50 + j]);
            }
        }
    }

    #[test]
    fn tf32x3_bound_formula() {
        // One row of 4 entries, |A||B| = 2 and 0 in its two columns, max |a| = 1, max |b| = 3.
        let b = spmm_error_bound_tf32x3(&[2.0, 0.0], &[4], 2, 1.0, 3.0);
        let coef =
            6.0 * 2f64.powi(-22) + 54.0 * 2f64.powi(-23) + gamma(12, 2f64.powi(-24)) + gamma(4, f64::EPSILON / 2.0);
        let floor = 2f64.powi(-124) * 4.0 * 5.0 + 1e-30;
        assert_eq!(b, vec![coef * 2.0 + floor, floor]);
        // Never tighter than the f32 FMA bound of the same row; NaN/Inf in |A||B| leave an infinite bound.
        let f32_bound = spmm_error_bound(&[2.0], &[4], 1, DType::F32.unit_roundoff(), DType::F32.unit_roundoff());
        assert!(spmm_error_bound_tf32x3(&[2.0], &[4], 1, 1.0, 1.0)[0] > f32_bound[0]);
        assert_eq!(spmm_error_bound_tf32x3(&[f64::INFINITY], &[1], 1, 1.0, 1.0)[0], f64::INFINITY);
    }

    #[test]
    fn compare_classifies() {
        let inf = f64::INFINITY;
        let nan = f64::NAN;
        let cases = [
            (1.0, 1.0 + 1e-9, 1e-8, true),
            (1.0, 1.1, 0.01, false),
            (nan, nan, 0.0, true),
            (nan, 1.0, 1e300, false),
            (1.0, nan, 1e300, false),
            (inf, inf, 0.0, true),
            (-inf, -inf, 0.0, true),
            (inf, -inf, 1e300, false),
            (inf, 1e308, 1e308, false),
            (1e308, inf, 1e308, false),
            (nan, inf, 0.0, false),
            (0.0, -0.0, 0.0, true),
        ];
        for (g, w, b, pass) in cases {
            let r = compare(&[g], &[w], &[b]);
            assert_eq!(r.mismatches == 0, pass, "got {g} want {w} bound {b}");
        }
        let r = compare(&[1.0, 2.5, nan, 4.0], &[1.0, 2.0, 3.0, 4.0], &[0.0, 0.1, 0.0, 0.0]);
        assert_eq!(r.mismatches, 2);
        assert_eq!(r.first_mismatch, Some((1, 2.5, 2.0)));
        assert_eq!(r.worst_index, 2);
        assert_eq!(r.max_abs_err, inf);
        let r = compare(&[1.0, 2.5, 4.0], &[1.0, 2.0, 4.2], &[0.0, 1.0, 0.1]);
        assert_eq!(r.mismatches, 1);
        assert_eq!(r.worst_index, 2);
        assert_eq!(r.max_abs_err, 0.5);
        assert_eq!(r.max_rel_err, 0.25);
    }

    #[test]
    fn error_bound_formula_and_tightness() {
        let (u32_, u16_) = (2f64.powi(-24), 2f64.powi(-11));
        let b = spmm_error_bound(&[2.0, 0.0], &[3], 2, u32_, u16_);
        let g = 4.0 * u32_ / (1.0 - 4.0 * u32_);
        let want = (g + u16_ * (1.0 + g) + gamma(3, f64::EPSILON / 2.0)) * 2.0 + 1e-30;
        let floor16 = 2f64.powi(-25);
        assert_eq!(b, vec![want - 1e-30 + floor16, floor16]);
        let b = spmm_error_bound(&[1.0, 0.0], &[1 << 24], 2, u32_, u32_);
        assert_eq!(b, vec![f64::INFINITY, 1e-30]);

        // A real f32 dot product of 4096 terms stays inside its bound.
        let a = crate::gen::uniform_random(1, 4096, 1.0, 3);
        let x = crate::gen::dense_matrix(4096, 1, 4);
        let f32_sum: f32 = a.data().iter().zip(&x).map(|(p, q)| p * q).sum();
        let want = spmm(a.view(), &x, 1);
        let bound = spmm_error_bound(&spmm_abs(a.view(), &x, 1), &[4096], 1, u32_, u32_);
        assert_eq!(compare(&[f32_sum as f64], &want, &bound).mismatches, 0);

        // And it is tight enough to see a kernel bug on a row of 256: dropping any one
        // product, or reading the next column of x for it, is caught for at least 95% of
        // the terms (a worst-case bound grows like n u, so very long rows hide small terms).
        let (a, x) = (crate::gen::uniform_random(1, 256, 1.0, 5), crate::gen::dense_matrix(257, 1, 6));
        let want = spmm(a.view(), &x[..256], 1);
        let bound = spmm_error_bound(&spmm_abs(a.view(), &x[..256], 1), &[256], 1, u32_, u32_);
        let caught = |err: &dyn Fn(usize) -> f64| {
            (0..256).filter(|&j| compare(&[want[0] + err(j)], &want, &bound).mismatches == 1).count()
        };
        let v = a.data();
        assert!(caught(&|j| -(v[j] as f64 * x[j] as f64)) >= 243, "a dropped product");
        assert!(caught(&|j| v[j] as f64 * (x[j + 1] as f64 - x[j] as f64)) >= 243, "a column off by one");
    }

    #[test]
    fn compare_refuses_a_vacuous_bound() {
        // A finite answer under an infinite or NaN bound fails; matching non-finite values still pass.
        let r = compare(
            &[1.0, 2.0, f64::NAN, f64::INFINITY],
            &[5.0, 2.0, f64::NAN, f64::INFINITY],
            &[f64::INFINITY, f64::NAN, f64::INFINITY, f64::NAN],
        );
        assert_eq!(r.mismatches, 2);
        assert_eq!(r.first_mismatch, Some((0, 1.0, 5.0)));
    }
}
