//! f64 reference results for checking the kernels.
//!
//! Deliberately independent of every optimized path: plain sequential loops over the raw
//! CSR arrays, f64 accumulation in storage order, no skipping of zeros and no special
//! cases, so NaN and infinities propagate exactly as IEEE f64 arithmetic makes them
//! (0 * NaN is NaN, inf + -inf is NaN). The SpMM oracle runs its rows on rayon's threads,
//! each row one such loop, which gives the same bits as one thread.

use crate::scalar::{DType, Scalar};
use rayon::prelude::*;
use sprs::{CsMat, CsMatView};

/// The entries of (A B^T) o spy(C), SDDMM's product: for each stored entry (i, j) of `pattern` (CSR, m x n; its
/// values are not read), the dot product of row i of `a` (m x k, row-major) with row j of `b` (n x k, row-major),
/// summed in f64 in k order; returned in C's entry order, with the same sums of magnitudes (|A| |B|^T at the
/// entries), which scale the rounding error.
pub fn sddmm<T: Scalar>(pattern: CsMatView<T>, a: &[T], b: &[T], k: usize) -> (Vec<f64>, Vec<f64>) {
    assert!(pattern.is_csr(), "oracle expects CSR");
    let (m, n) = pattern.shape();
    assert_eq!(a.len(), m * k, "A must be m x k");
    assert_eq!(b.len(), n * k, "B must be n x k");
    let indptr = pattern.proper_indptr();
    let ind = pattern.indices();
    let rows: Vec<Vec<(f64, f64)>> = (0..m)
        .into_par_iter()
        .map(|i| {
            let a_row = &a[i * k..(i + 1) * k];
            ind[indptr[i]..indptr[i + 1]]
                .iter()
                .map(|&j| {
                    let b_row = &b[j * k..(j + 1) * k];
                    let (mut dot, mut abs) = (0.0f64, 0.0f64);
                    for (x, y) in a_row.iter().zip(b_row) {
                        let (x, y) = (x.to_f64(), y.to_f64());
                        dot += x * y;
                        abs += (x * y).abs();
                    }
                    (dot, abs)
                })
                .collect()
        })
        .collect();
    rows.into_iter().flatten().unzip()
}

/// SDDMM's reference: the oracle's entries of C ([`sddmm`]) and the bound a kernel that sums in f32 with FMAs (in
/// any order, each entry's k products through at most k + 1 roundings) and stores T must meet: [`spmm_error_bound`]
/// with each entry a row of k products. The tensor-core kernel's bound (`crate::SddmmPlan::tensor_cores`) is
/// [`spmm_error_bound_tf32x3`] (f32) or [`spmm_error_bound_tc_half`] (f16, bf16) with each entry a row of k products
/// ([`SddmmReference::compare_summed`]).
#[derive(Clone, Debug)]
pub struct SddmmReference {
    want: Vec<f64>,
    bound: Vec<f64>,
    /// The tensor-core kernel's summation and bound (None for f64).
    tensor_cores: Option<(Summation, Vec<f64>)>,
}

impl SddmmReference {
    /// The reference for C's entries of A B^T, `pattern` C's structure, `a` m x k and `b` n x k row-major.
    pub fn new<T: Scalar>(pattern: CsMatView<T>, a: &[T], b: &[T], k: usize) -> Self {
        let (want, abs) = sddmm(pattern, a, b, k);
        let lens = vec![k; want.len()];
        let u_acc = if T::DTYPE == DType::F64 { DType::F64 } else { DType::F32 }.unit_roundoff();
        let bound = spmm_error_bound(&want, &abs, &lens, 1, u_acc, T::DTYPE.unit_roundoff());
        let (max_a, max_b) = (max_finite_abs(a), max_finite_abs(b));
        let tensor_cores = match T::DTYPE {
            DType::F32 => Some((Summation::Tf32x3, spmm_error_bound_tf32x3(&abs, &lens, 1, max_a, max_b))),
            DType::F16 | DType::Bf16 => Some((
                Summation::TensorCoreHalf,
                spmm_error_bound_tc_half(&want, &abs, &lens, 1, T::DTYPE, max_a, max_b),
            )),
            DType::F64 => None,
        };
        SddmmReference { want, bound, tensor_cores }
    }

    /// The reference for C = alpha A B^T o spy(C) + beta C0, `c0` C's values before the product as stored in T
    /// (read only where `beta` is not 0): each bound through [`epilogue_reference`].
    pub fn epilogue<T: Scalar>(&self, alpha: f32, beta: f32, c0: &[T]) -> Self {
        let c0: Vec<f64> = c0.iter().map(|v| v.to_f64()).collect();
        let scalars = EpilogueScalars { alpha, beta, c0: &c0, bias: None };
        let (want, bound) = epilogue_reference(&self.want, &self.bound, &scalars, 1, T::DTYPE);
        let tensor_cores = self
            .tensor_cores
            .as_ref()
            .map(|(summation, tc)| (*summation, epilogue_reference(&self.want, tc, &scalars, 1, T::DTYPE).1));
        SddmmReference { want, bound, tensor_cores }
    }

    /// The oracle's entries of C, in C's entry order.
    pub fn want(&self) -> &[f64] {
        &self.want
    }

    /// `got` (C's values, stored as T) against the oracle ([`compare_stored`] with T's range), for a kernel that sums
    /// with FMAs.
    pub fn compare<T: Scalar>(&self, got: &[T]) -> Comparison {
        self.compare_summed(Summation::Fma, got)
    }

    /// `got` against the oracle with the bound of a kernel that sums as `summation` ([`Summation::Fma`]: the gather
    /// and tiled kernels; T's tensor-core summation: `crate::SddmmPlan::tensor_cores`). Panics for a tensor-core summation of
    /// another type.
    pub fn compare_summed<T: Scalar>(&self, summation: Summation, got: &[T]) -> Comparison {
        let bound = match (summation, &self.tensor_cores) {
            (Summation::Fma, _) => &self.bound,
            (s, Some((ours, tc))) if s == *ours => tc,
            _ => panic!("no {summation:?} bound for {}", T::DTYPE),
        };
        let got: Vec<f64> = got.iter().map(|v| v.to_f64()).collect();
        compare_stored(&got, &self.want, bound, T::DTYPE)
    }
}

/// The softmax of each row of `a` (CSR) over its stored entries, in f64 and in a's entry order: M = max(x) (f64::max,
/// which passes over NaN), S = sum(exp(x - M)) in storage order, y = exp(x - M) / S. A NaN or +inf in a row makes it
/// NaN (through S), a row of -inf alone is NaN (M = -inf), a -inf beside finite entries gives 0.
pub fn softmax<T: Scalar>(a: CsMatView<T>) -> Vec<f64> {
    assert!(a.is_csr(), "oracle expects CSR");
    let indptr = a.proper_indptr();
    let val = a.data();
    let rows: Vec<Vec<f64>> = (0..a.rows())
        .into_par_iter()
        .map(|i| {
            let x: Vec<f64> = val[indptr[i]..indptr[i + 1]].iter().map(|v| v.to_f64()).collect();
            let max = x.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v));
            let sum: f64 = x.iter().map(|&v| (v - max).exp()).sum();
            x.iter().map(|&v| (v - max).exp() / sum).collect()
        })
        .collect();
    rows.into_iter().flatten().collect()
}

/// A softmax's gradient in f64: for each row of `prob` (CSR, the softmax's output P) and `grad` (dP, P's entries'
/// gradients in P's entry order), D = sum(P dP) in storage order and dS = P (dP - D); returned with the rows' sums
/// of |P dP|, which scale D's rounding error.
pub fn softmax_backward<T: Scalar>(prob: CsMatView<T>, grad: &[T]) -> (Vec<f64>, Vec<f64>) {
    assert!(prob.is_csr(), "oracle expects CSR");
    assert_eq!(grad.len(), prob.nnz(), "dP must have P's entries");
    let indptr = prob.proper_indptr();
    let val = prob.data();
    let rows: Vec<(Vec<f64>, f64)> = (0..prob.rows())
        .into_par_iter()
        .map(|i| {
            let entries = indptr[i]..indptr[i + 1];
            let p: Vec<f64> = val[entries.clone()].iter().map(|v| v.to_f64()).collect();
            let g: Vec<f64> = grad[entries].iter().map(|v| v.to_f64()).collect();
            let (mut dot, mut abs) = (0.0f64, 0.0f64);
            for (&x, &y) in p.iter().zip(&g) {
                dot += x * y;
                abs += (x * y).abs();
            }
            (p.iter().zip(&g).map(|(&x, &y)| x * (y - dot)).collect(), abs)
        })
        .collect();
    let mut want = Vec::with_capacity(prob.nnz());
    let mut abs = Vec::with_capacity(prob.nnz());
    for (row, a) in rows {
        abs.extend(std::iter::repeat_n(a, row.len()));
        want.extend(row);
    }
    (want, abs)
}

/// The softmax's reference ([`softmax`], [`softmax_backward`]) and the bound a kernel computing in f32 (or f64 for
/// f64) and storing T must meet.
///
/// Forward, for an entry x of a row of l entries with maximum M and y = exp(x - M) / S. A kernel may keep running
/// maxima and rescale partial sums as they grow: each term of S reaches the sum through at most l / 4 + 12 rescales
/// (a merge of 4 values or a level of a reduction of up to 1024 threads), each one exp (4 u: CUDA's expf is within
/// 2 ulp), its argument's rounding and one product, and through l additions; the arguments' roundings add up to at
/// most u |x_i - M| per term, and exp(x_i - M) |x_i - M| <= 1/e, so with S >= 1 (its largest term is 1)
/// |S~ - S| <= (5 (l / 4 + 12) + 2 l) u S. y~ = exp(x - m) exp(m - M) (1 / S~) (m a partial maximum, or M) then adds
/// at most 16 u + u |x - M| (two exps, a reciprocal, two products), storing T u_out |y~|, and gradual underflow
/// [`output_floor`]. The oracle's own error is gamma_f64(l + 2).
///
/// Backward: D~ is a sum of l products in f32 with FMAs, |D~ - D| <= gamma(l + 1) A with A = sum |P dP|; then
/// y~ = P (dP - D~) adds two roundings, u (|dP| + |D| + |D~ - D|) |P| and u |y|, and storing as forward.
#[derive(Clone, Debug)]
pub struct SoftmaxReference {
    want: Vec<f64>,
    bound: Vec<f64>,
}

impl SoftmaxReference {
    /// The reference for the softmax of each row of `a`'s stored values.
    pub fn new<T: Scalar>(a: CsMatView<T>) -> Self {
        let want = softmax(a);
        let u = accumulation_unit::<T>();
        let (u_out, floor) = (T::DTYPE.unit_roundoff(), output_floor(T::DTYPE.unit_roundoff()));
        let indptr = a.proper_indptr();
        let val = a.data();
        let mut bound = vec![0.0; want.len()];
        for i in 0..a.rows() {
            let entries = indptr[i]..indptr[i + 1];
            let l = entries.len() as f64;
            let max = val[entries.clone()].iter().fold(f64::NEG_INFINITY, |m, v| m.max(v.to_f64()));
            let g_sum = (5.0 * (l / 4.0 + 12.0) + 2.0 * l) * u;
            let g64 = gamma(entries.len() + 2, f64::EPSILON / 2.0);
            for e in entries {
                let (y, x) = (want[e], val[e].to_f64());
                // A masked entry (x = -inf beside finite ones) gives exp(-inf) = 0 exactly: no spread to charge.
                let spread = if (x - max).is_finite() { (x - max).abs() } else { 0.0 };
                let rel = g_sum + (16.0 + spread) * u + g64;
                bound[e] = y.abs() * rel + u_out * y.abs() * (1.0 + rel) + floor;
            }
        }
        SoftmaxReference { want, bound }
    }

    /// The reference for the gradient dS = P (dP - sum(P dP)) of each row, `prob` P (CSR) and `grad` dP.
    pub fn backward<T: Scalar>(prob: CsMatView<T>, grad: &[T]) -> Self {
        let (want, abs) = softmax_backward(prob, grad);
        let u = accumulation_unit::<T>();
        let (u_out, floor) = (T::DTYPE.unit_roundoff(), output_floor(T::DTYPE.unit_roundoff()));
        let indptr = prob.proper_indptr();
        let val = prob.data();
        let mut bound = vec![0.0; want.len()];
        for i in 0..prob.rows() {
            let entries = indptr[i]..indptr[i + 1];
            if entries.is_empty() {
                continue;
            }
            // |D~ - D| through the kernel's sum and the oracle's; |D| <= A = sum |P dP| (the row's `abs`).
            let (l, sum_abs) = (entries.len(), abs[entries.start]);
            let dot_err = (gamma(l + 1, u) + gamma(l, f64::EPSILON / 2.0)) * sum_abs;
            for e in entries {
                let (y, p, g) = (want[e], val[e].to_f64().abs(), grad[e].to_f64().abs());
                let err = p * (dot_err + u * (g + sum_abs + dot_err) * (1.0 + u)) + u * y.abs();
                bound[e] = err + u_out * (y.abs() + err) + floor;
            }
        }
        SoftmaxReference { want, bound }
    }

    /// The oracle's entries, in the matrix's entry order.
    pub fn want(&self) -> &[f64] {
        &self.want
    }

    /// `got` (the values, stored as T) against the oracle ([`compare_stored`] with T's range).
    pub fn compare<T: Scalar>(&self, got: &[T]) -> Comparison {
        let got: Vec<f64> = got.iter().map(|v| v.to_f64()).collect();
        compare_stored(&got, &self.want, &self.bound, T::DTYPE)
    }
}

/// The unit roundoff of the arithmetic the kernels use for T: f64 for f64, f32 for the rest.
fn accumulation_unit<T: Scalar>() -> f64 {
    if T::DTYPE == DType::F64 { DType::F64 } else { DType::F32 }.unit_roundoff()
}

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
    // Rows in parallel: each row is its own sequential loop in storage order, so the bits are those of one thread.
    c.par_chunks_mut(n.max(1)).take(m).enumerate().for_each(|(i, c_row)| {
        for p in indptr[i]..indptr[i + 1] {
            let av = f(val[p].to_f64());
            let b_row = &b[ind[p] * n..(ind[p] + 1) * n];
            for j in 0..n {
                c_row[j] += av * f(b_row[j].to_f64());
            }
        }
    });
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
    /// Its error / bound: 0 when everything is exact, infinite for a non-finite mismatch under a finite bound.
    pub worst_ratio: f64,
    /// How many elements fail.
    pub mismatches: usize,
    /// The first failing element as (index, got, want).
    pub first_mismatch: Option<(usize, f64, f64)>,
}

impl Comparison {
    /// Nothing compared yet, or every element exact.
    const EXACT: Comparison = Comparison {
        max_abs_err: 0.0,
        max_rel_err: 0.0,
        worst_index: 0,
        worst_ratio: 0.0,
        mismatches: 0,
        first_mismatch: None,
    };
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
    compare_stored(got, want, bound, DType::F64)
}

/// The smallest magnitude that rounds to infinity when stored as `dtype` (to nearest): the largest finite value
/// plus half its ulp, 2^(emax + 1) (1 - 2^-(p + 1)) for p significand bits. 65520 for f16; infinite for f64 (an
/// f64 oracle has no range of its own to leave).
pub fn overflow_threshold(dtype: DType) -> f64 {
    let (emax, p) = match dtype {
        DType::F16 => (15, 11),
        DType::Bf16 => (127, 8),
        DType::F32 => (127, 24),
        DType::F64 => return f64::INFINITY,
    };
    2f64.powi(emax + 1) * (1.0 - 2f64.powi(-(p + 1)))
}

/// [`compare`] for results stored as `dtype`: an infinite `got` of the oracle's sign also passes where the
/// oracle's finite value is within its (finite) bound of `dtype`'s [`overflow_threshold`], because rounding to
/// nearest stores such a sum as infinite (f16 sums of 65520 and more are +Inf, the IEEE result). Everything else
/// is as in [`compare`].
pub fn compare_stored(got: &[f64], want: &[f64], bound: &[f64], dtype: DType) -> Comparison {
    let overflow = overflow_threshold(dtype);
    assert_eq!(got.len(), want.len(), "got and want differ in length");
    assert_eq!(got.len(), bound.len(), "bound differs in length");
    // Chunks in parallel, merged in order: the same outcome as one pass (the first mismatch, the first element
    // of the largest ratio).
    const CHUNK: usize = COMPARE_CHUNK;
    let parts: Vec<Comparison> = got
        .par_chunks(CHUNK)
        .zip(want.par_chunks(CHUNK))
        .zip(bound.par_chunks(CHUNK))
        .map(|((g, w), b)| compare_chunk(g, w, b, overflow))
        .collect();
    let mut out = Comparison::EXACT;
    for (c, part) in parts.into_iter().enumerate() {
        let base = c * CHUNK;
        out.max_abs_err = out.max_abs_err.max(part.max_abs_err);
        out.max_rel_err = out.max_rel_err.max(part.max_rel_err);
        if part.worst_ratio > out.worst_ratio {
            out.worst_ratio = part.worst_ratio;
            out.worst_index = base + part.worst_index;
        }
        out.mismatches += part.mismatches;
        if out.first_mismatch.is_none() {
            out.first_mismatch = part.first_mismatch.map(|(i, g, w)| (base + i, g, w));
        }
    }
    out
}

/// The elements [`compare_stored`] gives each thread.
const COMPARE_CHUNK: usize = 1 << 15;

/// [`compare_stored`] over one stretch of elements (indices from its start).
fn compare_chunk(got: &[f64], want: &[f64], bound: &[f64], overflow: f64) -> Comparison {
    let mut out = Comparison::EXACT;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let (err, pass) = if g.is_finite() && w.is_finite() {
            let err = (g - w).abs();
            (err, bound[i].is_finite() && err <= bound[i])
        } else {
            let rounds_over = overflow.is_finite()
                && g.is_infinite()
                && w.is_finite()
                && bound[i].is_finite()
                && g.signum() == w.signum()
                && w.abs() + bound[i] >= overflow;
            let same = (g.is_nan() && w.is_nan()) || (g.is_infinite() && g == w) || rounds_over;
            (if same { 0.0 } else { f64::INFINITY }, same)
        };
        out.max_abs_err = out.max_abs_err.max(err);
        if w != 0.0 && !w.is_nan() {
            out.max_rel_err = out.max_rel_err.max(err / w.abs());
        }
        let ratio = if err == 0.0 { 0.0 } else { err / bound[i] };
        if ratio > out.worst_ratio {
            out.worst_ratio = ratio;
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
pub(crate) fn gamma(l: usize, u: f64) -> f64 {
    let lu = l as f64 * u;
    if lu < 1.0 {
        lu / (1.0 - lu)
    } else {
        f64::INFINITY
    }
}

/// The absolute floor for gradual underflow of a result stored with unit roundoff `u_out`: half the f16
/// subnormal spacing (2^-25) for f16, whose outputs below 2^-14 are subnormal (products of small f16 values land
/// there often), else 1e-30, above the losses of f32 (or wider) accumulation in gradual underflow (at most
/// 2^-150 per rounding) and of bf16's subnormal outputs (2^-134).
pub fn output_floor(u_out: f64) -> f64 {
    if u_out == DType::F16.unit_roundoff() {
        2f64.powi(-25)
    } else {
        1e-30
    }
}

/// The bound of one element from its parts (see [`spmm_error_bound`]): the oracle's value `c` and magnitude
/// `ab`, the accumulation's relative bound `g_acc` (|c_acc - c_exact| <= g_acc S_exact), the oracle's own
/// `g64`, the storage type's `u_out` and the absolute `floor`.
fn element_bound(c: f64, ab: f64, g_acc: f64, g64: f64, u_out: f64, floor: f64) -> f64 {
    // An all-zero |A||B| means an exact zero: keep inf * 0 from making the bound NaN.
    if ab == 0.0 {
        return floor;
    }
    // The exact |A||B| is at most the oracle's / (1 - g64) (its sum of positive terms is not above it by more).
    let s = ab / (1.0 - g64);
    let accumulation = (g_acc + g64) * s;
    // |c_acc| from the oracle's value, or from |A||B| where that is smaller (rows whose products do not cancel).
    // A NaN c (then the comparison is exact anyway) leaves the second.
    let c_acc = (c.abs() + accumulation).min((1.0 + g_acc) * s);
    accumulation + u_out * c_acc + floor
}

/// Per-element error bound for C = A * B computed by a kernel that sums in a format of unit roundoff `u_acc`
/// with correctly rounded multiplies and adds or FMAs (the CUDA-core tiles, the CPU backend), given the oracle's
/// C ([`spmm`]) and |A||B| ([`spmm_abs`]), both m x n row-major, and the row lengths of A.
///
/// Derivation. The kernel and the oracle read the same stored inputs, so input rounding is not an error. For
/// entry (i, j) of a row of l = len_i entries write c and S for the exact (AB)_ij and (|A||B|)_ij, and c~, S~
/// for the oracle's.
/// 1. Accumulation: the l products are summed in some order (a chain, a tree of partial sums, split pieces),
///    each product rounded once (not at all with FMA), so each reaches the sum through at most l roundings and
///    |c_acc - c| <= gamma(l) S (Higham, *Accuracy and Stability of Numerical Algorithms*, eq. 3.5). We use
///    g = gamma(l + 1) to leave room for one more rounding (an alpha scale or a split-k merge).
/// 2. The oracle: its f64 sum in storage order has |c~ - c| <= g64 S, g64 = gamma_f64(l), and its sum of the
///    same magnitudes S~ >= (1 - g64) S, so S <= S' := S~ / (1 - g64).
/// 3. Storing: rounding c_acc to the storage type (to nearest) costs at most u_out |c_acc|, and by 1 and 2
///    |c_acc| <= |c~| + (g + g64) S' and |c_acc| <= (1 + g) S'.
///
/// So |got - c~| <= (g + g64) S' + u_out min(|c~| + (g + g64) S', (1 + g) S') + floor. The rounding to the
/// storage type is charged to |c~|, not to S: on rows whose products cancel (|c| << S) rounding to f16 costs
/// 2^-11 |c|, and a dropped product of such a row shows even when it is well below 2^-11 S. The min keeps rows
/// that do not cancel where the earlier bound (g + g64 + u_out (1 + g)) S~ put them (up to the factor
/// 1 / (1 - g64), which that bound left out). The floor covers gradual underflow, whose errors are
/// absolute, not relative ([`output_floor`]: 2^-25 for f16 outputs, 1e-30 otherwise).
///
/// Not for the tensor-core kernels: their mma truncates ([`spmm_error_bound_tf32x3`],
/// [`spmm_error_bound_tc_half`]).
pub fn spmm_error_bound(
    c: &[f64],
    a_abs_b_abs: &[f64],
    row_lengths: &[usize],
    n: usize,
    u_acc: f64,
    u_out: f64,
) -> Vec<f64> {
    let floor = output_floor(u_out);
    row_bounds(c, a_abs_b_abs, row_lengths, n, u_out, |len| (gamma(len + 1, u_acc), floor))
}

/// [`element_bound`] over every element of C (m x n row-major, `row_lengths` m long), with the accumulation's
/// bound g and the absolute floor of a row of l entries given by `row(l)`; the oracle's g64 is gamma_f64(l).
fn row_bounds(
    c: &[f64],
    a_abs_b_abs: &[f64],
    row_lengths: &[usize],
    n: usize,
    u_out: f64,
    row: impl Fn(usize) -> (f64, f64) + Sync,
) -> Vec<f64> {
    assert_eq!(a_abs_b_abs.len(), row_lengths.len() * n, "|A||B| must be rows x n");
    assert_eq!(c.len(), a_abs_b_abs.len(), "C and |A||B| differ in length");
    let mut bound = vec![0.0; a_abs_b_abs.len()];
    bound.par_chunks_mut(n.max(1)).zip(row_lengths).enumerate().for_each(|(i, (out, &len))| {
        let ((g, floor), g64) = (row(len), gamma(len, f64::EPSILON / 2.0));
        let elements = i * n..(i + 1) * n;
        for ((o, &c), &ab) in out.iter_mut().zip(&c[elements.clone()]).zip(&a_abs_b_abs[elements]) {
            *o = element_bound(c, ab, g, g64, u_out, floor);
        }
    });
    bound
}

/// How a kernel sums the products of a row, which decides the rounding bound its C meets
/// ([`spmm_error_bound_for`]; `crate::SpmmKernel::summation` says which a kernel does).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Summation {
    /// Correctly rounded multiplies and adds, or FMAs: the CUDA-core tiles and the CPU backend.
    Fma,
    /// f32 on the tensor cores in 3xTF32.
    Tf32x3,
    /// f16 or bf16 products summed on the tensor cores.
    TensorCoreHalf,
}

impl Summation {
    /// How the tensor-core kernels sum `dtype` (None for f64, which has none).
    pub fn tensor_cores(dtype: DType) -> Option<Summation> {
        match dtype {
            DType::F32 => Some(Summation::Tf32x3),
            DType::F16 | DType::Bf16 => Some(Summation::TensorCoreHalf),
            DType::F64 => None,
        }
    }
}

/// The per-element bound for C = A * B (`b` k x n row-major) computed by a kernel that sums as `summation`, given
/// the oracle's C ([`spmm`]) and |A||B| ([`spmm_abs`]): [`spmm_error_bound`] (accumulating in f32, or f64 for
/// f64), [`spmm_error_bound_tf32x3`] or [`spmm_error_bound_tc_half`], each rounding to `T`.
pub fn spmm_error_bound_for<T: Scalar>(
    summation: Summation,
    a: CsMatView<T>,
    b: &[T],
    n: usize,
    c: &[f64],
    a_abs_b_abs: &[f64],
) -> Vec<f64> {
    let lens: Vec<usize> = a.outer_iterator().map(|r| r.nnz()).collect();
    let (max_a, max_b) = (max_finite_abs(a.data()), max_finite_abs(b));
    match summation {
        Summation::Fma => {
            let u_acc = if T::DTYPE == DType::F64 { DType::F64 } else { DType::F32 }.unit_roundoff();
            spmm_error_bound(c, a_abs_b_abs, &lens, n, u_acc, T::DTYPE.unit_roundoff())
        }
        Summation::Tf32x3 => spmm_error_bound_tf32x3(a_abs_b_abs, &lens, n, max_a, max_b),
        Summation::TensorCoreHalf => spmm_error_bound_tc_half(c, a_abs_b_abs, &lens, n, T::DTYPE, max_a, max_b),
    }
}

/// The largest finite |x| of `values` (0 if none): the magnitudes [`spmm_error_bound_tf32x3`] and
/// [`spmm_error_bound_tc_half`] take.
pub fn max_finite_abs<T: Scalar>(values: &[T]) -> f64 {
    values.iter().map(|x| x.to_f64().abs()).filter(|x| x.is_finite()).fold(0.0, f64::max)
}

/// Written into every output before a checked run: a finite value no correct result equals, so an unwritten
/// element shows up as a mismatch (NaN poison would hide unwritten elements where NaN propagates).
pub const POISON: f64 = -12345.678;

/// The oracle's C = A * B for one problem and the bound every kind of kernel that can run `T` must meet:
/// [`spmm`] and [`spmm_abs`] once, then [`spmm_error_bound_for`] for the FMA kernels and for `T`'s tensor-core
/// summation (3xTF32 for f32, [`Summation::TensorCoreHalf`] for f16 and bf16; none for f64).
#[derive(Clone, Debug)]
pub struct SpmmReference {
    want: Vec<f64>,
    fma: Vec<f64>,
    tensor_cores: Option<(Summation, Vec<f64>)>,
}

impl SpmmReference {
    /// The reference for A (CSR) times `b` (k x n, row-major), both as stored in `T`.
    pub fn new<T: Scalar>(a: CsMatView<T>, b: &[T], n: usize) -> Self {
        let want = spmm(a, b, n);
        let abs = spmm_abs(a, b, n);
        let bound_for = |summation| spmm_error_bound_for(summation, a, b, n, &want, &abs);
        let tensor_cores = Summation::tensor_cores(T::DTYPE).map(|summation| (summation, bound_for(summation)));
        SpmmReference { fma: bound_for(Summation::Fma), tensor_cores, want }
    }

    /// The oracle's C, row-major.
    pub fn want(&self) -> &[f64] {
        &self.want
    }

    /// The per-element bound of a kernel that sums as `summation`; None where `T` has no such kernel (a
    /// tensor-core summation of another type).
    pub fn bound(&self, summation: Summation) -> Option<&[f64]> {
        match (summation, &self.tensor_cores) {
            (Summation::Fma, _) => Some(&self.fma),
            (s, Some((ours, bound))) if s == *ours => Some(bound),
            _ => None,
        }
    }

    /// The reference for C = ReLU(A * B + bias), `bias` one f32 per row and A * B n columns wide: each bound
    /// through [`bias_relu_reference`] for `T`.
    pub fn bias_relu<T: Scalar>(&self, bias: &[f32], n: usize) -> SpmmReference {
        let (want, fma) = bias_relu_reference(&self.want, &self.fma, bias, n, T::DTYPE);
        let tensor_cores = self
            .tensor_cores
            .as_ref()
            .map(|(s, bound)| (*s, bias_relu_reference(&self.want, bound, bias, n, T::DTYPE).1));
        SpmmReference { want, fma, tensor_cores }
    }

    /// The reference for C = alpha * A * B + beta * C0 (+ bias, ReLU), `c0` C's values before the product as
    /// stored in `T` (read only where `beta` is not 0), `bias` one f32 per row: each bound through
    /// [`epilogue_reference`] for `T`.
    pub fn epilogue<T: Scalar>(&self, alpha: f32, beta: f32, c0: &[T], bias: Option<&[f32]>, n: usize) -> Self {
        let c0: Vec<f64> = c0.par_iter().map(|v| v.to_f64()).collect();
        let scalars = EpilogueScalars { alpha, beta, c0: &c0, bias };
        let (want, fma) = epilogue_reference(&self.want, &self.fma, &scalars, n, T::DTYPE);
        let tensor_cores = self
            .tensor_cores
            .as_ref()
            .map(|(s, bound)| (*s, epilogue_reference(&self.want, bound, &scalars, n, T::DTYPE).1));
        SpmmReference { want, fma, tensor_cores }
    }

    /// `got`, stored as `T`, against the oracle with `summation`'s bound ([`compare_stored`] with `T`'s range, so
    /// results widened to f64 before the check are held to f64's); None where [`SpmmReference::bound`] has none.
    pub fn compare<T: Scalar>(&self, got: &[T], summation: Summation) -> Option<Comparison> {
        let bound = self.bound(summation)?;
        let got: Vec<f64> = got.par_iter().map(|v| v.to_f64()).collect();
        Some(compare_stored(&got, &self.want, bound, T::DTYPE))
    }
}

/// The reference for C = ReLU(A * B + bias) from one for A * B: `want`, the oracle's A * B (m x n row-major), and
/// `bound`, a kernel's bound for it ([`spmm_error_bound_for`] or [`SpmmReference::bound`]) when it stores `dtype`;
/// `bias` has one f32 per row. Returns the oracle's ReLU(A * B + bias) and its bound, for [`compare_stored`].
///
/// Derivation. Every kernel adds the bias to its f32 sum s of the row's products and applies the ReLU before it
/// rounds to `dtype` (the tiles' `store_output_tile`, the tensor cores' in-place `add_relu`, the CPU backend's
/// `spmm_bias_relu`). Write c~ for the oracle's value, b for the bias and e for |s - c~|, at most the bound of A * B
/// (which also holds an absolute floor for gradual underflow, at least the final rounding's). The f32 add gives
/// y = (s + b)(1 + d1), |d1| <= u32; the ReLU is 1-Lipschitz; storing gives ReLU(y)(1 + d2) + floor, |d2| <= u_T.
/// With w = c~ + b and M = |w| + e >= |s + b|: |y - w| <= e + u32 M, ReLU(y) <= max(w, 0) + e + u32 M, so
/// |got - ReLU(w)| <= e + u32 M + u_T (max(w, 0) + e + u32 M) + floor, and the bound here is that with `bound`
/// for e + floor. A cleared element (w < 0) is held to about the sum's bound, not to u_T |w|. Where w is not finite
/// the result must match exactly: NaN and +Inf stay, -Inf becomes 0 (the ReLU), and the bound is 0.
pub fn bias_relu_reference(want: &[f64], bound: &[f64], bias: &[f32], n: usize, dtype: DType) -> (Vec<f64>, Vec<f64>) {
    assert_eq!(want.len(), bound.len(), "want and bound differ in length");
    assert_eq!(want.len(), bias.len() * n, "the bias needs one element per row of C");
    let (u32_, u_t) = (DType::F32.unit_roundoff(), dtype.unit_roundoff());
    (0..want.len())
        .into_par_iter()
        .map(|i| {
            let w = want[i] + bias[i / n] as f64;
            if w.is_finite() {
                let add = u32_ * (w.abs() + bound[i]);
                (w.max(0.0), bound[i] + add + u_t * (w.max(0.0) + bound[i] + add))
            } else {
                (if w == f64::NEG_INFINITY { 0.0 } else { w }, 0.0)
            }
        })
        .unzip()
}

/// The scalars and bias of an SpMM epilogue, C = alpha * A * B + beta * C0 (+ bias, ReLU) (`crate::spmm::SpmmEpilogue`
/// on the GPU, `crate::cpu::backend::spmm_epilogue` on the CPU): `c0` is C's old value as stored (m x n, row-major),
/// read only where `beta` is not 0.
#[derive(Clone, Copy, Debug)]
pub struct EpilogueScalars<'a> {
    pub alpha: f32,
    pub beta: f32,
    pub c0: &'a [f64],
    pub bias: Option<&'a [f32]>,
}

/// The reference for C = alpha * A * B + beta * C0 (+ bias, ReLU) from one for A * B: `want`, the oracle's A * B (m x n
/// row-major), and `bound`, a kernel's bound for it when it stores `dtype`. Returns the oracle's value and its bound,
/// for [`compare_stored`].
///
/// Derivation. Every kernel (the GPU's `finish_store` in cuda/common/epilogue.cuh, the CPU backend's epilogue) takes
/// its f32 sum s, |s - c~| <= e (`bound`, which holds a floor for gradual underflow), and computes in f32:
/// t = alpha s where alpha is not 1 (one rounding), then y = beta c0 + t where beta is not 0 (an FMA on the GPU, a
/// product and a sum on the CPU: at most two roundings), then the bias and ReLU as [`bias_relu_reference`] derives,
/// then one rounding to `dtype`. With u = f32's unit roundoff and w1 = alpha c~:
/// |t - w1| <= |alpha| e + u |alpha| (|c~| + e) =: E1 (E1 = e with alpha 1). With w = w1 + beta c0 (c0 exact in
/// f64, so is beta c0): |y - w| <= E1 + u |beta c0| + u (|w| + E1 + u |beta c0|) =: E2 (E2 = E1 with beta 0). With a
/// bias, [`bias_relu_reference`] from (w, E2); without one, storing adds u_T (|w| + E2). An absolute
/// [`output_floor`] is added, since scaling by alpha < 1 can take the sum's own floor below the stored result's.
/// Where w (or w + bias) is not finite the result must match exactly: NaN stays NaN, +-Inf stay (ReLU takes -Inf
/// to 0), and the bound is 0. With beta 0 the old value plays no part (0 * NaN is not formed).
pub fn epilogue_reference(
    want: &[f64],
    bound: &[f64],
    scalars: &EpilogueScalars,
    n: usize,
    dtype: DType,
) -> (Vec<f64>, Vec<f64>) {
    assert_eq!(want.len(), bound.len(), "want and bound differ in length");
    let EpilogueScalars { alpha, beta, c0, bias } = *scalars;
    if beta != 0.0 {
        assert_eq!(c0.len(), want.len(), "C's old values need one element per element of C");
    }
    let (u, u_t) = (DType::F32.unit_roundoff(), dtype.unit_roundoff());
    let (alpha, beta) = (alpha as f64, beta as f64);
    let floor = output_floor(u_t);
    let (mut w, mut e): (Vec<f64>, Vec<f64>) = (0..want.len())
        .into_par_iter()
        .map(|i| {
            let (c, b) = (want[i], bound[i]);
            let (w1, e1) =
                if alpha == 1.0 { (c, b) } else { (alpha * c, alpha.abs() * b + u * alpha.abs() * (c.abs() + b)) };
            if beta == 0.0 {
                (w1, e1)
            } else {
                let old = beta * c0[i];
                let w = w1 + old;
                (w, e1 + u * old.abs() + u * (w.abs() + e1 + u * old.abs()))
            }
        })
        .unzip();
    if let Some(bias) = bias {
        assert_eq!(want.len(), bias.len() * n, "the bias needs one element per row of C");
        (w, e) = bias_relu_reference(&w, &e, bias, n, dtype);
    } else {
        e.par_iter_mut().zip(&w).for_each(|(e, &w)| *e += u_t * (w.abs() + *e));
    }
    w.par_iter().zip(e.par_iter_mut()).for_each(|(w, e)| *e = if w.is_finite() { *e + floor } else { 0.0 });
    (w, e)
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
    let mut bound = vec![0.0; a_abs_b_abs.len()];
    bound.par_chunks_mut(n.max(1)).zip(row_lengths).enumerate().for_each(|(i, (out, &len))| {
        let coef = 6.0 * 2f64.powi(-22) + 54.0 * 2f64.powi(-23) + gamma(len + 8, u32_) + gamma(len, f64::EPSILON / 2.0);
        let floor = 2f64.powi(-124) * len as f64 * (max_abs_a + max_abs_b + 1.0) + 1e-30;
        for (o, &ab) in out.iter_mut().zip(&a_abs_b_abs[i * n..(i + 1) * n]) {
            *o = coef * ab + floor;
        }
    });
    bound
}

/// The most partial sums the tensor-core kernels add per element of C: a wide kernel's k-block ranges (at most
/// `SPLIT_MAX` = 8) or a narrow kernel's 4 warps (src/spmm/tensor_core.rs asserts both at compile time).
pub const TC_MAX_PARTIALS: usize = 8;

/// Per-element error bound for C = A * B in f16 or bf16 (`dtype`) computed on the tensor cores
/// (crate::spmm::tensor_core; cuda/spmm/tensor_core.cuh: `spmm_tc_kernel`, `spmm_tcw_kernel`, `spmm_tc_fixup`),
/// given the oracle's C ([`spmm`]), |A||B| ([`spmm_abs`]), A's row lengths, and the largest finite |a| of A and
/// |b| of B ([`max_finite_abs`]).
///
/// Derivation (c~, S, S' = S~ / (1 - g64), g64 as in [`spmm_error_bound`]; u = 2^-23, one f32 ulp at 1.0).
/// - What the kernels do for element (i, j). Each stored entry of row i sits in one slot of one k-block of its
///   window; the other slots of the row's 16 x 16 blocks hold zeros. A chain starts from f32 zero and runs one
///   mma.m16n8k16 per k-block, which adds that k-block's 16 products to the chain's f32 value in place: a narrow
///   kernel's warp w takes its window's k-blocks w, w + 4, ...; a wide kernel's warp takes every k-block of its
///   block's range for its own rows and columns. The chains are then added in f32, rounding to nearest: the
///   narrow kernel's warp 0 adds its 4 warps' in warp order, the wide kernel its ranges' (at most 8, in a cluster
///   or by `spmm_tc_fixup`) in range order: at most [`TC_MAX_PARTIALS`] - 1 = 7 adds. One rounding to nearest
///   (`__float2half_rn`, `__float2bfloat16_rn`) stores the result.
/// - The mma. Products of f16 (11-bit) or bf16 (8-bit) significands are exact. How the sum is formed is not
///   documented; measurements (Fasi, Higham, Mikaitis, Pranesh, "Numerical behavior of NVIDIA tensor cores",
///   PeerJ CS 2021, on V100/T4/A100; [`spmm_error_bound_tf32x3`] rests on the same model, and the H100 runs meet it)
///   find the terms aligned to the largest magnitude, the bits past f32's 24 truncated, and the sum normalized
///   with truncation, in one or more internal steps per instruction. We assume only that: each internal step adds
///   some r of the products to the running f32 value c; each of its terms loses less than 2^-23 times the largest
///   term's magnitude (at least 24 bits kept below the largest term's leading bit); and the normalized result is
///   off by less than 2^-23 of its magnitude. We do not count on the largest term being kept exactly, on guard
///   bits, on the step size, or on the rounding direction. Zeros lose nothing and c is on its own grid, so a step
///   whose products are all zero (padding slots, entries of other rows, zeros of B) leaves c exactly as it was. A
///   step with r >= 1 nonzero products (at most that many of the row's entries) errs by at most (r + 1) u T for
///   its terms plus u (1 + (r + 1) u) T for the normalization, T = |c| + sum |p| over the step, so within
///   ((1 + u)^(r + 2) - 1) T. The usual induction over a chain (Higham, Lemma 3.1) gives
///   |chain - exact| <= ((1 + u)^K - 1) S_chain, where K, the sum of r + 2 over the steps with nonzero products,
///   is at most 3 l_chain; the at most 7 adds of the chains (unit roundoff 2^-24 < u) raise that to
///   |c_acc - c| <= gamma(3 l + 7, u) S =: g S for a row of l entries: about 6 times [`spmm_error_bound`]'s
///   gamma(l + 1, 2^-24) S, which does not hold here (16 products each just under 2^-23 added to a running 1 are
///   all truncated away, almost 16 * 2^-23 = 32 * 2^-24 for a row of 17 against gamma(18, 2^-24) S, about
///   18 * 2^-24). The FMA bound's former output term u_out S hid this; charged to |c~|, it no longer does.
/// - Inf and NaN: a warp whose accumulators end up Inf or NaN redoes its tile with exact scalar FMAs over the
///   stored entries (`exact_block`): f32 FMA chains and the same adds, within gamma(l + 7, 2^-24) S <= g S; the
///   elements whose oracle value is Inf or NaN are compared exactly ([`compare`]).
/// - Storing, as in [`spmm_error_bound`]: u_out min(|c~| + (g + g64) S', (1 + g) S').
/// - Underflow: bf16 values and their products may lie below f32's normal range, where the tensor core may flush
///   a subnormal input, a product or c to zero: a subnormal a loses |a b| < 2^-126 |b| (a subnormal b likewise),
///   a flushed product or c less than 2^-126; at most 2^-124 l (max|a| + max|b| + 1) in all, with the adds'
///   gradual underflow (2^-150 each). f16 products lie in [2^-48, 2^32) and never get there. f16 subnormal inputs
///   are assumed kept (Fasi et al. found them supported): flushed, each would lose up to 2^-14 |b|, more than any
///   useful bound allows. Plus the storage type's floor ([`output_floor`]).
///
/// So |got - c~| <= (g + g64) S' + u_out min(|c~| + (g + g64) S', (1 + g) S') + 2^-124 l (max|a| + max|b| + 1) +
/// floor, never below [`spmm_error_bound`]'s f32-accumulation bound of the same inputs (unit-tested).
pub fn spmm_error_bound_tc_half(
    c: &[f64],
    a_abs_b_abs: &[f64],
    row_lengths: &[usize],
    n: usize,
    dtype: DType,
    max_abs_a: f64,
    max_abs_b: f64,
) -> Vec<f64> {
    assert!(matches!(dtype, DType::F16 | DType::Bf16), "the half tensor-core bound is for f16 and bf16, not {dtype}");
    let (u, u_out) = (2f64.powi(-23), dtype.unit_roundoff());
    row_bounds(c, a_abs_b_abs, row_lengths, n, u_out, |len| {
        let underflow = 2f64.powi(-124) * len as f64 * (max_abs_a + max_abs_b + 1.0);
        (gamma(3 * len + TC_MAX_PARTIALS - 1, u), underflow + output_floor(u_out))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_comparison_in_chunks_is_the_comparison_in_one_pass() {
        let len = 3 * COMPARE_CHUNK + 17;
        let want: Vec<f64> = (0..len).map(|i| (i as f64 * 0.37).sin()).collect();
        let mut got = want.clone();
        let mut bound = vec![1e-3; len];
        let c = COMPARE_CHUNK;
        got[5] = f64::NAN; // NaN against a number: infinite, a mismatch
        got[c - 1] += 5e-4; // within its bound, ratio 0.5
        got[c + 3] += 2e-3; // ratio 2, the first finite mismatch past the first chunk
        got[2 * c] += 2e-3; // the same ratio again: the first keeps it
        bound[2 * c + 1] = f64::INFINITY; // a finite pair under an infinite bound fails
        got[2 * c + 1] += 1.0;
        got[3 * c + 16] = f64::INFINITY;
        let (mut nan_want, mut nan_got) = (want.clone(), got.clone());
        (nan_want[7], nan_got[7]) = (f64::NAN, f64::NAN); // NaN against NaN passes
        for (g, w) in [(&got, &want), (&nan_got, &nan_want)] {
            for dtype in [DType::F16, DType::F32, DType::F64] {
                // Compared as printed, since NaN != NaN.
                let one_pass = compare_chunk(g, w, &bound, overflow_threshold(dtype));
                assert_eq!(format!("{:?}", compare_stored(g, w, &bound, dtype)), format!("{one_pass:?}"));
            }
        }
        let r = compare_stored(&got, &want, &bound, DType::F32);
        assert_eq!((r.mismatches, r.first_mismatch.map(|m| m.0), r.worst_index), (5, Some(5), 5));
        assert!(r.worst_ratio.is_infinite(), "{r:?}");
        // Without the NaN the largest ratio is the first of the two at 2.
        got[5] = want[5];
        got[3 * c + 16] = want[3 * c + 16];
        let r = compare_stored(&got, &want, &bound, DType::F32);
        assert_eq!((r.mismatches, r.first_mismatch.map(|m| m.0), r.worst_index), (3, Some(c + 3), c + 3));
        assert!((r.worst_ratio - 2.0).abs() < 1e-9, "{r:?}");
    }
    use half::f16;

    /// [[1, 0*, 2], [], [-1, 3, 0]] where 0* is a stored zero.
    fn a3() -> CsMat<f32> {
        CsMat::new((3, 3), vec![0, 3, 3, 5], vec![0, 1, 2, 0, 1], vec![1.0, 0.0, 2.0, -1.0, 3.0])
    }

    const B3: [f32; 6] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];

    #[test]
    fn sums_past_the_storage_range_may_be_stored_as_infinite() {
        // The thresholds are where the half crate and f32 casts round to infinity.
        for (dtype, to) in [
            (DType::F16, (|v: f64| half::f16::from_f64(v).to_f64()) as fn(f64) -> f64),
            (DType::Bf16, |v: f64| half::bf16::from_f64(v).to_f64()),
            (DType::F32, |v: f64| v as f32 as f64),
        ] {
            let t = overflow_threshold(dtype);
            assert!(to(t).is_infinite() && to(t * (1.0 - 1e-6)).is_finite(), "{dtype}: {t}");
        }
        assert_eq!(overflow_threshold(DType::F16), 65520.0);
        let inf = f64::INFINITY;
        // 250 x 280 = 70000 in f16: +Inf is the stored sum; -Inf, a NaN, or the same Inf for f32 or f64 are not.
        let pass = |g: f64, w: f64, b: f64, dtype| compare_stored(&[g], &[w], &[b], dtype).mismatches == 0;
        assert!(pass(inf, 70000.0, 0.1, DType::F16));
        assert!(pass(-inf, -70000.0, 0.1, DType::F16));
        assert!(!pass(-inf, 70000.0, 0.1, DType::F16));
        assert!(!pass(f64::NAN, 70000.0, 0.1, DType::F16));
        assert!(!pass(inf, 70000.0, 0.1, DType::F32) && !pass(inf, 70000.0, 0.1, DType::F64));
        assert_eq!(compare(&[inf], &[70000.0], &[0.1]).mismatches, 1);
        // Within the bound of the threshold (65500 + 32 >= 65520) it may round either way; past it, not.
        assert!(pass(inf, 65500.0, 32.0, DType::F16) && pass(65504.0, 65500.0, 32.0, DType::F16));
        assert!(!pass(inf, 65000.0, 32.0, DType::F16));
        // An infinite bound says nothing: no Inf passes under it.
        assert!(!pass(inf, 70000.0, inf, DType::F16));
    }

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
        let f32_bound =
            spmm_error_bound(&[2.0], &[2.0], &[4], 1, DType::F32.unit_roundoff(), DType::F32.unit_roundoff());
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
        let close = |x: f64, y: f64| (x - y).abs() <= 1e-15 * y.abs();
        // One row of 3 entries, |A||B| = 2 in both columns; C = 2 (no cancellation: storing is charged to
        // (1 + g) S') and C = -0.5 (charged to |C| + (g + g64) S'); a zero |A||B| gives the floor alone.
        let b = spmm_error_bound(&[2.0, -0.5, 0.0], &[2.0, 2.0, 0.0], &[3], 3, u32_, u16_);
        let (g, g64) = (4.0 * u32_ / (1.0 - 4.0 * u32_), gamma(3, f64::EPSILON / 2.0));
        let s = 2.0 / (1.0 - g64);
        let floor16 = 2f64.powi(-25);
        assert!(close(b[0], (g + g64) * s + u16_ * (1.0 + g) * s + floor16), "{b:?}");
        assert!(close(b[1], (g + g64) * s + u16_ * (0.5 + (g + g64) * s) + floor16), "{b:?}");
        assert_eq!(b[2], floor16);
        // Past the formula's range the bound is infinite (compare fails any finite answer), but an exact zero
        // keeps its floor.
        let b = spmm_error_bound(&[1.0, 0.0], &[1.0, 0.0], &[1 << 24], 2, u32_, u32_);
        assert_eq!(b, vec![f64::INFINITY, 1e-30]);
        // A NaN C (compared exactly) does not make the bound NaN.
        assert!(spmm_error_bound(&[f64::NAN], &[1.0], &[2], 1, u32_, u16_)[0].is_finite());

        // A real f32 dot product of 4096 terms stays inside its bound.
        let a = crate::gen::uniform_random(1, 4096, 1.0, 3);
        let x = crate::gen::dense_matrix(4096, 1, 4);
        let f32_sum: f32 = a.data().iter().zip(&x).map(|(p, q)| p * q).sum();
        let want = spmm(a.view(), &x, 1);
        let bound = spmm_error_bound(&want, &spmm_abs(a.view(), &x, 1), &[4096], 1, u32_, u32_);
        assert_eq!(compare(&[f32_sum as f64], &want, &bound).mismatches, 0);

        // And it is tight enough to see a kernel bug on a row of 256: dropping any one
        // product, or reading the next column of x for it, is caught for at least 95% of
        // the terms (a worst-case bound grows like n u, so very long rows hide small terms).
        let (a, x) = (crate::gen::uniform_random(1, 256, 1.0, 5), crate::gen::dense_matrix(257, 1, 6));
        let want = spmm(a.view(), &x[..256], 1);
        let bound = spmm_error_bound(&want, &spmm_abs(a.view(), &x[..256], 1), &[256], 1, u32_, u32_);
        let caught = |err: &dyn Fn(usize) -> f64| {
            (0..256).filter(|&j| compare(&[want[0] + err(j)], &want, &bound).mismatches == 1).count()
        };
        let v = a.data();
        assert!(caught(&|j| -(v[j] as f64 * x[j] as f64)) >= 243, "a dropped product");
        assert!(caught(&|j| v[j] as f64 * (x[j + 1] as f64 - x[j] as f64)) >= 243, "a column off by one");
    }

    /// The FMA bound before storing was charged to |C|: (gamma(l + 1) + u_out (1 + gamma(l + 1)) +
    /// gamma_f64(l)) |A||B| + floor, and its accumulation part alone (the same without u_out).
    fn previous_bound(ab: &[f64], lens: &[usize], n: usize, u_acc: f64, u_out: f64) -> (Vec<f64>, Vec<f64>) {
        let floor = output_floor(u_out);
        let (mut whole, mut accumulation) = (Vec::new(), Vec::new());
        for (i, &len) in lens.iter().enumerate() {
            let (g, g64) = (gamma(len + 1, u_acc), gamma(len, f64::EPSILON / 2.0));
            for &s in &ab[i * n..(i + 1) * n] {
                whole.push((g + u_out * (1.0 + g) + g64) * s + floor);
                accumulation.push((g + g64) * s + floor);
            }
        }
        (whole, accumulation)
    }

    /// Rows of lengths 0 to 700 (n = 3) with random values in `T`, rows 0-9 of them cancelling pairs (+x, -x):
    /// the oracle's C, |A||B|, the row lengths and max |a|, max |b|.
    #[allow(clippy::type_complexity)]
    fn random_problem<T: Scalar>(seed: u64) -> (Vec<f64>, Vec<f64>, Vec<usize>, f64, f64) {
        let k = 800;
        let lens = [2, 3, 16, 17, 40, 255, 700, 1, 31, 64, 0, 1, 2, 5, 15, 16, 17, 33, 100, 256, 511, 700];
        let values = crate::gen::dense_matrix(lens.iter().sum(), 1, seed);
        let (mut indptr, mut indices, mut data) = (vec![0], Vec::new(), Vec::new());
        for (i, &len) in lens.iter().enumerate() {
            let mut columns: Vec<usize> = (0..len).map(|j| (i * 37 + j * 13) % k).collect();
            columns.sort_unstable();
            let mut row: Vec<T> = values[indices.len()..indices.len() + len].iter().map(|&v| T::from_f32(v)).collect();
            if i < 10 {
                // Every odd entry the negative of the one before it, a last unpaired one a stored zero: against
                // B's column of ones (below) the products cancel exactly.
                for j in (1..len).step_by(2) {
                    row[j] = T::from_f64(-row[j - 1].to_f64());
                }
                if len % 2 == 1 {
                    row[len - 1] = T::from_f32(0.0);
                }
            }
            indices.extend(columns);
            data.extend(row);
            indptr.push(indices.len());
        }
        let a = CsMat::new((lens.len(), k), indptr, indices, data);
        let mut b: Vec<T> = crate::gen::dense_matrix(k, 3, seed + 1).into_iter().map(T::from_f32).collect();
        for r in 0..k {
            b[3 * r] = T::from_f32(1.0);
        }
        let (max_a, max_b) = (max_finite_abs(a.data()), max_finite_abs(&b));
        (spmm(a.view(), &b, 3), spmm_abs(a.view(), &b, 3), lens.to_vec(), max_a, max_b)
    }

    #[test]
    fn storing_is_charged_to_c_never_below_the_accumulation_and_tighter_where_products_cancel() {
        for (dtype, seed) in [(DType::F16, 31), (DType::Bf16, 32), (DType::F32, 33)] {
            let (c, ab, lens, _, _) = match dtype {
                DType::F16 => random_problem::<f16>(seed),
                DType::Bf16 => random_problem::<half::bf16>(seed),
                _ => random_problem::<f32>(seed),
            };
            let (u_acc, u_out) = (DType::F32.unit_roundoff(), dtype.unit_roundoff());
            let new = spmm_error_bound(&c, &ab, &lens, 3, u_acc, u_out);
            let (old, accumulation) = previous_bound(&ab, &lens, 3, u_acc, u_out);
            for idx in 0..c.len() {
                let g64 = gamma(lens[idx / 3], f64::EPSILON / 2.0);
                assert!(new[idx] >= accumulation[idx], "{dtype} {idx}: {} < {}", new[idx], accumulation[idx]);
                // Never looser than before, but for the factor 1 / (1 - g64) the old bound left out.
                assert!(new[idx] <= old[idx] / (1.0 - g64) * (1.0 + 1e-15), "{dtype} {idx}");
            }
            // The cancelling rows (C exactly 0 in column 0): storing costs nothing there, so the bound drops to
            // its accumulation part, far below the old one in f16/bf16 (u_out >> (l + 1) 2^-24) and below it
            // in f32 too.
            for i in (0..10).filter(|&i| lens[i] >= 2) {
                let idx = 3 * i;
                assert_eq!(c[idx], 0.0, "row {i}");
                let factor = if dtype == DType::F32 { 1.0 } else { 8.0 };
                assert!(new[idx] * factor < old[idx], "{dtype} row {i}: {} vs {}", new[idx], old[idx]);
            }
        }
    }

    /// A long row whose products cancel: 127 pairs (+v, -v) of values in [1, 2) and two small entries, 0.125 and
    /// 0.0625, against B's column of ones, so C = 0.1875 while |A||B| is about 380. A kernel that drops the
    /// 0.125 (f16, bf16) or one of the pairs' 1.0 (bf16) is off by far more than its rounding, but by less than
    /// 2^-11 |A||B| (2^-8 in bf16): the bound that charged storing to |A||B| passed it; charged to |C| it fails.
    fn dropped_product_case<T: Scalar>() {
        let mut values = Vec::new();
        for k in 0..127 {
            let v = 1.0 + k as f32 / 128.0;
            values.extend([v, -v]);
        }
        values.extend([0.125, 0.0625]);
        let len = values.len();
        let a: CsMat<T> =
            CsMat::new((1, len), vec![0, len], (0..len).collect(), values.iter().map(|&v| T::from_f32(v)).collect());
        let b = vec![T::from_f32(1.0); len];
        let want = spmm(a.view(), &b, 1);
        assert_eq!(want, vec![0.1875]);
        let ab = spmm_abs(a.view(), &b, 1);
        let (u_acc, u_out) = (DType::F32.unit_roundoff(), T::DTYPE.unit_roundoff());
        let bound = spmm_error_bound(&want, &ab, &[len], 1, u_acc, u_out);
        let (old, _) = previous_bound(&ab, &[len], 1, u_acc, u_out);
        // What a kernel that sums all but `dropped` stores (its f32 sum here is exact).
        let stored = |dropped: Option<f32>| T::from_f64(0.1875 - dropped.map_or(0.0, |p| p as f64)).to_f64();
        assert_eq!(compare(&[stored(None)], &want, &bound).mismatches, 0, "{}: the right answer", T::DTYPE);
        let mut drops = vec![0.125f32];
        if T::DTYPE == DType::Bf16 {
            drops.push(1.0);
        }
        for p in drops {
            let got = [stored(Some(p))];
            assert_eq!(compare(&got, &want, &old).mismatches, 0, "{}: the old bound passed dropping {p}", T::DTYPE);
            assert_eq!(compare(&got, &want, &bound).mismatches, 1, "{}: dropping {p} must fail", T::DTYPE);
        }
    }

    #[test]
    fn a_dropped_product_of_a_cancelling_row_fails_in_f16_and_bf16() {
        dropped_product_case::<f16>();
        dropped_product_case::<half::bf16>();
    }

    #[test]
    fn tc_half_bound_formula_and_above_the_fma_bound() {
        let u = 2f64.powi(-23);
        // One row of 4 entries: C = -0.5 with |A||B| = 2, and an exact zero; max |a| = 1, max |b| = 3.
        let b = spmm_error_bound_tc_half(&[-0.5, 0.0], &[2.0, 0.0], &[4], 2, DType::Bf16, 1.0, 3.0);
        let (g, g64) = (gamma(3 * 4 + 7, u), gamma(4, f64::EPSILON / 2.0));
        let s = 2.0 / (1.0 - g64);
        let floor = 2f64.powi(-124) * 4.0 * 5.0 + 1e-30;
        let want = (g + g64) * s + 2f64.powi(-8) * (0.5 + (g + g64) * s) + floor;
        assert!((b[0] - want).abs() <= 1e-15 * want, "{b:?} vs {want}");
        assert_eq!(b[1], floor);
        // f16 outputs keep their subnormal floor; Inf in |A||B| leaves an infinite bound.
        let b = spmm_error_bound_tc_half(&[0.0], &[0.0], &[0], 1, DType::F16, 0.0, 0.0);
        assert_eq!(b, vec![2f64.powi(-25)]);
        let b = spmm_error_bound_tc_half(&[f64::INFINITY], &[f64::INFINITY], &[2], 1, DType::F16, 1.0, 1.0);
        assert_eq!(b, vec![f64::INFINITY]);

        // Never below the FMA bound of the same inputs (the tensor cores' exact-redo path for Inf/NaN is made of
        // FMAs), strictly above it wherever |A||B| > 0, on short, long, empty and cancelling rows.
        for (dtype, seed) in [(DType::F16, 41), (DType::Bf16, 42)] {
            let (c, ab, lens, max_a, max_b) = match dtype {
                DType::F16 => random_problem::<f16>(seed),
                _ => random_problem::<half::bf16>(seed),
            };
            let u_acc = DType::F32.unit_roundoff();
            let fma = spmm_error_bound(&c, &ab, &lens, 3, u_acc, dtype.unit_roundoff());
            let tc = spmm_error_bound_tc_half(&c, &ab, &lens, 3, dtype, max_a, max_b);
            for idx in 0..c.len() {
                assert!(tc[idx] >= fma[idx], "{dtype} {idx}: {} < {}", tc[idx], fma[idx]);
                if ab[idx] > 0.0 {
                    assert!(tc[idx] > fma[idx], "{dtype} {idx}");
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "for f16 and bf16")]
    fn tc_half_bound_refuses_f32() {
        spmm_error_bound_tc_half(&[1.0], &[1.0], &[1], 1, DType::F32, 1.0, 1.0);
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
