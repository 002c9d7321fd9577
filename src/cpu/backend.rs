//! Multi-threaded CPU fallback used when no GPU is present.
//!
//! Rows run in parallel on rayon. Accumulation is in f32 for f32, f16 and bf16 (what
//! the GPU kernels do, so results agree to the same error bound) and f64 for f64.
//! Zeros are never skipped, so NaN and Inf propagate like the oracle's.

use crate::scalar::{DType, Scalar};
use rayon::prelude::*;
use sprs::{CsMat, CsMatView};
use std::ops::{AddAssign, Div, Mul, Sub};

/// The accumulation precision (f32 or f64) and its conversions to and from storage.
trait Acc:
    Copy
    + Send
    + Sync
    + Default
    + PartialEq
    + PartialOrd
    + AddAssign
    + Mul<Output = Self>
    + Sub<Output = Self>
    + Div<Output = Self>
{
    const NEG_INFINITY: Self;
    fn exp(self) -> Self;
    fn load<S: Scalar>(v: S) -> Self;
    fn store<T: Scalar>(self) -> T;
    fn from_f64(v: f64) -> Self;
    /// `a * b + c`, rounded once when `FUSED`, twice otherwise.
    fn mul_add<const FUSED: bool>(a: Self, b: Self, c: Self) -> Self;
}

impl Acc for f32 {
    const NEG_INFINITY: Self = f32::NEG_INFINITY;
    #[inline]
    fn exp(self) -> Self {
        f32::exp(self)
    }
    #[inline]
    fn load<S: Scalar>(v: S) -> Self {
        v.to_f32()
    }
    #[inline]
    fn store<T: Scalar>(self) -> T {
        T::from_f32(self)
    }
    #[inline]
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    #[inline(always)]
    fn mul_add<const FUSED: bool>(a: Self, b: Self, c: Self) -> Self {
        if FUSED {
            a.mul_add(b, c)
        } else {
            a * b + c
        }
    }
}

impl Acc for f64 {
    const NEG_INFINITY: Self = f64::NEG_INFINITY;
    #[inline]
    fn exp(self) -> Self {
        f64::exp(self)
    }
    #[inline]
    fn load<S: Scalar>(v: S) -> Self {
        v.to_f64()
    }
    #[inline]
    fn store<T: Scalar>(self) -> T {
        T::from_f64(self)
    }
    #[inline]
    fn from_f64(v: f64) -> Self {
        v
    }
    #[inline(always)]
    fn mul_add<const FUSED: bool>(a: Self, b: Self, c: Self) -> Self {
        if FUSED {
            a.mul_add(b, c)
        } else {
            a * b + c
        }
    }
}

/// C = A (m x k, CSR) * B (k x n, row-major) into `c` (m x n, row-major, overwritten).
pub fn spmm<T: Scalar>(a: CsMatView<T>, b: &[T], n: usize, c: &mut [T]) {
    assert!(a.is_csr(), "backend expects CSR");
    let (m, k) = a.shape();
    assert_eq!(b.len(), k * n, "B must be k x n");
    assert_eq!(c.len(), m * n, "C must be m x n");
    match T::DTYPE {
        DType::F64 => spmm_acc::<T, T, f64, F64_PANEL>(a, b, n, c),
        DType::F32 => spmm_acc::<T, T, f32, F32_PANEL>(a, b, n, c),
        DType::F16 | DType::Bf16 => {
            // Widen B once: converting in the inner loop would redo it for every
            // nonzero that touches a row of B.
            let b32: Vec<f32> = b.par_iter().map(|v| v.to_f32()).collect();
            spmm_acc::<T, f32, f32, F32_PANEL>(a, &b32, n, c)
        }
    }
}

/// SDDMM, C = alpha (A B^T) o spy(C) + beta C, into `values` (C's nnz values in entry order; read only where beta is
/// not 0): for each stored entry (i, j) of `pattern` (CSR m x n; its values are not read) the dot product of row i of
/// `a` (m x k, row-major) with row j of `b` (n x k, row-major), summed in f32 (f64 for f64) in k order with fused
/// multiply-adds, then scaled and added as the GPU's epilogue does, rounded once to T. Rows run in parallel.
pub fn sddmm<T: Scalar>(pattern: CsMatView<T>, a: &[T], b: &[T], k: usize, alpha: f32, beta: f32, values: &mut [T]) {
    assert!(pattern.is_csr(), "backend expects CSR");
    let (m, n) = pattern.shape();
    assert_eq!(a.len(), m * k, "A must be m x k");
    assert_eq!(b.len(), n * k, "B must be n x k");
    assert_eq!(values.len(), pattern.nnz(), "C's values must be nnz long");
    match T::DTYPE {
        DType::F64 => sddmm_acc::<T, f64>(pattern, a, b, k, alpha, beta, values),
        _ => sddmm_acc::<T, f32>(pattern, a, b, k, alpha, beta, values),
    }
}

/// Each row's stored entries replaced by their softmax, in place: M = max(x), S = sum(exp(x - M)), y = exp(x - M) / S
/// (as the dense softmax: a NaN or +inf in a row makes it NaN, a row of -inf alone is NaN). `indptr` is the CSR row
/// pointer (m + 1 offsets from 0) and `values` its nnz values.
pub fn softmax<T: Scalar>(indptr: &[usize], values: &mut [T]) {
    match T::DTYPE {
        DType::F64 => softmax_acc::<T, f64>(indptr, values),
        _ => softmax_acc::<T, f32>(indptr, values),
    }
}

/// [`softmax`] computing in `A`.
fn softmax_acc<T: Scalar, A: Acc>(indptr: &[usize], values: &mut [T]) {
    rows_of(indptr, values).into_par_iter().for_each(|row| {
        // f32::max passes over NaN, which then reaches the sum through its own term.
        let max = row.iter().fold(A::NEG_INFINITY, |m, &x| {
            let x = A::load(x);
            if x > m {
                x
            } else {
                m
            }
        });
        let mut sum = A::default();
        for &x in row.iter() {
            sum += (A::load(x) - max).exp();
        }
        for x in row.iter_mut() {
            *x = ((A::load(*x) - max).exp() / sum).store();
        }
    });
}

/// A softmax's gradient, in place of `grad`: per row D = sum(P dP) and dS = P (dP - D), `prob` the softmax's output
/// P and `grad` the gradient dP, both with the structure of `indptr`.
pub fn softmax_backward<T: Scalar>(indptr: &[usize], prob: &[T], grad: &mut [T]) {
    assert_eq!(prob.len(), grad.len(), "P and dP must have the same entries");
    match T::DTYPE {
        DType::F64 => softmax_backward_acc::<T, f64>(indptr, prob, grad),
        _ => softmax_backward_acc::<T, f32>(indptr, prob, grad),
    }
}

/// [`softmax_backward`] computing in `A`.
fn softmax_backward_acc<T: Scalar, A: Acc>(indptr: &[usize], prob: &[T], grad: &mut [T]) {
    rows_of(indptr, grad).into_par_iter().enumerate().for_each(|(i, row)| {
        let p = &prob[indptr[i]..indptr[i + 1]];
        let dot =
            p.iter().zip(row.iter()).fold(A::default(), |d, (&x, &g)| A::mul_add::<true>(A::load(x), A::load(g), d));
        for (g, &x) in row.iter_mut().zip(p) {
            *g = (A::load(x) * (A::load(*g) - dot)).store();
        }
    });
}

/// `values` cut into the rows of `indptr`, each a chunk of its own.
fn rows_of<'a, T>(indptr: &[usize], values: &'a mut [T]) -> Vec<&'a mut [T]> {
    assert_eq!(indptr.last().copied().unwrap_or(0), values.len(), "the row pointer must end at the values' length");
    let mut rows: Vec<&mut [T]> = Vec::with_capacity(indptr.len().saturating_sub(1));
    let mut rest = values;
    for w in indptr.windows(2) {
        let (row, tail) = rest.split_at_mut(w[1] - w[0]);
        rows.push(row);
        rest = tail;
    }
    rows
}

/// [`sddmm`] accumulating in `A`.
fn sddmm_acc<T: Scalar, A: Acc>(
    pattern: CsMatView<T>,
    a: &[T],
    b: &[T],
    k: usize,
    alpha: f32,
    beta: f32,
    values: &mut [T],
) {
    let indptr = pattern.proper_indptr();
    let ind = pattern.indices();
    let (alpha, beta) = (A::from_f64(alpha as f64), A::from_f64(beta as f64));
    let one = A::from_f64(1.0);
    rows_of(&indptr, values).into_par_iter().enumerate().for_each(|(i, out)| {
        let a_row = &a[i * k..(i + 1) * k];
        for (v, &j) in out.iter_mut().zip(&ind[indptr[i]..indptr[i + 1]]) {
            let b_row = &b[j * k..(j + 1) * k];
            let mut sum = A::default();
            for (&x, &y) in a_row.iter().zip(b_row) {
                sum = A::mul_add::<true>(A::load(x), A::load(y), sum);
            }
            if alpha != one {
                sum = alpha * sum;
            }
            if beta != A::default() {
                sum = A::mul_add::<true>(beta, A::load(*v), sum);
            }
            *v = sum.store();
        }
    });
}

/// C = ReLU(A * B + bias) into `c` (m x n, row-major, overwritten), `bias` one f32 per row: [`spmm_epilogue`] with
/// alpha 1 and beta 0.
pub fn spmm_bias_relu<T: Scalar>(a: CsMatView<T>, b: &[T], n: usize, bias: &[f32], c: &mut [T]) {
    spmm_epilogue(a, b, n, 1.0, 0.0, Some(bias), c);
}

/// C = alpha * A * B + beta * C, then ReLU(. + bias) where there is a bias (one f32 per row), into `c` (m x n,
/// row-major; read only where beta is not 0): [`spmm`]'s f32 sum of each element (f64's for f64), then as the GPU
/// kernels' epilogue does (cuda/common/epilogue.cuh, `finish_store`): times alpha where alpha is not 1, plus beta
/// times C's old value where beta is not 0 (a product and a sum here, an FMA there; the oracle's bound,
/// `oracle::epilogue_reference`, allows both), the bias added and the ReLU applied, then one rounding to `T`. A NaN
/// stays NaN. f32 and f64 with beta 0 work on [`spmm`]'s C in place; otherwise the sums go to a buffer of their own
/// (f16 and bf16 from an f32 copy of A and B: exact widenings, the same products and order as [`spmm`]'s half path).
pub fn spmm_epilogue<T: Scalar>(
    a: CsMatView<T>,
    b: &[T],
    n: usize,
    alpha: f32,
    beta: f32,
    bias: Option<&[f32]>,
    c: &mut [T],
) {
    assert!(a.is_csr(), "backend expects CSR");
    let m = a.rows();
    if let Some(bias) = bias {
        assert_eq!(bias.len(), m, "the bias needs one element per row of C");
    }
    assert_eq!(c.len(), m * n, "C must be m x n");
    // The epilogue of one element from its sum and old value, in f32 (f64 for f64).
    let finish32 = |s: f32, old: T, bi: Option<f32>| {
        let mut v = if alpha != 1.0 { alpha * s } else { s };
        if beta != 0.0 {
            v += beta * old.to_f32();
        }
        match bi {
            Some(bi) => relu(v + bi),
            None => v,
        }
    };
    let finish64 = |s: f64, old: T, bi: Option<f32>| {
        let mut v = if alpha != 1.0 { alpha as f64 * s } else { s };
        if beta != 0.0 {
            v += beta as f64 * old.to_f64();
        }
        match bi {
            Some(bi) => relu(v + bi as f64),
            None => v,
        }
    };
    // f32 and f64 elements: the epilogue in their own type.
    let finish = |s: T, old: T, bi: Option<f32>| {
        if T::DTYPE == DType::F64 {
            T::from_f64(finish64(s.to_f64(), old, bi))
        } else {
            T::from_f32(finish32(s.to_f32(), old, bi))
        }
    };
    let row_bias = |r: usize| bias.map(|bias| bias[r]);
    let rows = n.max(1);
    match T::DTYPE {
        DType::F64 | DType::F32 if beta == 0.0 => {
            // C holds the sums: the epilogue in place, no copies of A, B or C.
            spmm(a, b, n, c);
            c.par_chunks_mut(rows).enumerate().for_each(|(r, row)| {
                let bi = row_bias(r);
                row.iter_mut().for_each(|v| *v = finish(*v, *v, bi));
            });
        }
        DType::F64 | DType::F32 => {
            let mut sums = vec![T::from_f32(0.0); m * n];
            spmm(a, b, n, &mut sums);
            c.par_chunks_mut(rows).zip(sums.par_chunks(rows)).enumerate().for_each(|(r, (row, sums))| {
                let bi = row_bias(r);
                row.iter_mut().zip(sums).for_each(|(v, &s)| *v = finish(s, *v, bi));
            });
        }
        DType::F16 | DType::Bf16 => {
            let a32: sprs::CsMat<f32> = a.map(|v| v.to_f32());
            let b32: Vec<f32> = b.par_iter().map(|v| v.to_f32()).collect();
            let mut c32 = vec![0.0f32; m * n];
            spmm(a32.view(), &b32, n, &mut c32);
            c.par_chunks_mut(rows).zip(c32.par_chunks(rows)).enumerate().for_each(|(r, (row, sums))| {
                let bi = row_bias(r);
                // Then one rounding to T.
                row.iter_mut().zip(sums).for_each(|(v, &s)| *v = T::from_f32(finish32(s, *v, bi)));
            });
        }
    }
}

/// ReLU(y) as the kernels take it, `y < 0 ? 0 : y` (f32, or f64 for f64 matrices): a NaN stays NaN.
fn relu<F: PartialOrd + Default>(y: F) -> F {
    if y < F::default() {
        F::default()
    } else {
        y
    }
}

/// Columns of C that one row's accumulators cover at a time: eight 256-bit registers.
/// Keeping them in registers across the row's nonzeros leaves one load of B per FMA,
/// where an accumulator row in memory costs two loads and a store.
const F32_PANEL: usize = 64;
const F64_PANEL: usize = 32;

/// Up to this n, rows are computed panel by panel in registers; wider rows keep their
/// accumulators in memory and stream whole rows of B, which the prefetchers follow
/// (a panel-by-panel walk reads B in 256-byte pieces of scattered rows). Measured
/// on this project's 2-core AMD EPYC (AVX2), 4096 x 4096 at 10%, both with FMA:
/// registers 27.9 / 30.2 / 35.2 GFLOP/s at n = 64 / 256 / 512, memory 18.2 / 22.5 /
/// 28.4; at n = 1024 memory wins, 25.4 against 22.7, at 4096 11.3 against 7.5.
const MAX_PANEL_N: usize = 512;

/// Rows per parallel task: enough to amortize a task, few enough to balance skewed rows.
const TASK_ROWS: usize = 64;

/// One row of A: its column indices, its values, and its row of C.
type Row<'a, T> = (&'a [usize], &'a [T], &'a mut [T]);

/// The SpMM loop. Each element of C is the sum of a_ip * b_pj over the row's entries
/// in stored order, the same sequential sum as the oracle's, rounded once per term
/// with FMA where the CPU has it.
fn spmm_acc<T: Scalar, S: Scalar, A: Acc, const P: usize>(a: CsMatView<T>, b: &[S], n: usize, c: &mut [T]) {
    spmm_rows::<T, S, A, P>(a, b, n, c, cfg!(target_arch = "x86_64"))
}

/// [`spmm_acc`], with the AVX2 path allowed or not (the tests run both).
fn spmm_rows<T: Scalar, S: Scalar, A: Acc, const P: usize>(
    a: CsMatView<T>,
    b: &[S],
    n: usize,
    c: &mut [T],
    allow_avx2: bool,
) {
    if n == 0 {
        return; // nothing to write, and chunks of 0 are not allowed
    }
    let indptr = a.proper_indptr();
    let (ind, val) = (a.indices(), a.data());
    c.par_chunks_mut(TASK_ROWS * n).enumerate().for_each(|(task, c_rows)| {
        let rows = (task * TASK_ROWS..).zip(c_rows.chunks_mut(n));
        let rows: Vec<Row<T>> =
            rows.map(|(i, c_row)| (&ind[indptr[i]..indptr[i + 1]], &val[indptr[i]..indptr[i + 1]], c_row)).collect();
        #[cfg(target_arch = "x86_64")]
        if allow_avx2 && std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
            // SAFETY: the CPU has just been found to support AVX2 and FMA, the features
            // `rows_avx2` is compiled for; it is otherwise an ordinary safe function.
            unsafe { rows_avx2::<T, S, A, P>(rows, b, n) };
            return;
        }
        rows_any::<T, S, A, P, false>(rows, b, n);
    });
}

/// `rows_any` compiled for AVX2 with fused multiply-adds.
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn rows_avx2<T: Scalar, S: Scalar, A: Acc, const P: usize>(rows: Vec<Row<T>>, b: &[S], n: usize) {
    rows_any::<T, S, A, P, true>(rows, b, n)
}

/// One task's rows. `FUSED` rounds each multiply-add once (FMA); without hardware FMA
/// a fused multiply-add is a slow library call, so it is off there.
#[inline(always)]
fn rows_any<T: Scalar, S: Scalar, A: Acc, const P: usize, const FUSED: bool>(rows: Vec<Row<T>>, b: &[S], n: usize) {
    if n > MAX_PANEL_N {
        let mut acc = vec![A::default(); n];
        for (cols, vals, c_row) in rows {
            acc.fill(A::default());
            axpy_rows::<T, S, A, FUSED>(cols, vals, b, n, 0, &mut acc);
            for (o, &x) in c_row.iter_mut().zip(&acc) {
                *o = x.store();
            }
        }
        return;
    }
    for (cols, vals, c_row) in rows {
        let mut j0 = 0;
        while j0 + P <= n {
            panel::<T, S, A, P, FUSED>(cols, vals, b, n, j0, c_row);
            j0 += P;
        }
        // The last columns in narrower register panels, then the rest (under 8) in memory.
        if 32 < P && j0 + 32 <= n {
            panel::<T, S, A, 32, FUSED>(cols, vals, b, n, j0, c_row);
            j0 += 32;
        }
        if 16 < P && j0 + 16 <= n {
            panel::<T, S, A, 16, FUSED>(cols, vals, b, n, j0, c_row);
            j0 += 16;
        }
        if 8 < P && j0 + 8 <= n {
            panel::<T, S, A, 8, FUSED>(cols, vals, b, n, j0, c_row);
            j0 += 8;
        }
        if j0 < n {
            let mut acc = [A::default(); 8];
            let acc = &mut acc[..n - j0];
            axpy_rows::<T, S, A, FUSED>(cols, vals, b, n, j0, acc);
            for (o, &x) in c_row[j0..].iter_mut().zip(acc.iter()) {
                *o = x.store();
            }
        }
    }
}

/// Columns `j0..j0 + P` of one row of C, the accumulators in registers.
#[inline(always)]
fn panel<T: Scalar, S: Scalar, A: Acc, const P: usize, const FUSED: bool>(
    cols: &[usize],
    vals: &[T],
    b: &[S],
    n: usize,
    j0: usize,
    c_row: &mut [T],
) {
    let mut acc = [A::default(); P];
    for (&col, &v) in cols.iter().zip(vals) {
        let av = A::load(v);
        let b_panel: &[S; P] = b[col * n + j0..][..P].try_into().expect("P elements");
        for (x, &bv) in acc.iter_mut().zip(b_panel) {
            *x = A::mul_add::<FUSED>(av, A::load(bv), *x);
        }
    }
    for (o, &x) in c_row[j0..j0 + P].iter_mut().zip(&acc) {
        *o = x.store();
    }
}

/// `acc += a_ip * B[p, j0..j0 + acc.len()]` over one row's entries, in order.
#[inline(always)]
fn axpy_rows<T: Scalar, S: Scalar, A: Acc, const FUSED: bool>(
    cols: &[usize],
    vals: &[T],
    b: &[S],
    n: usize,
    j0: usize,
    acc: &mut [A],
) {
    let w = acc.len();
    for (&col, &v) in cols.iter().zip(vals) {
        let av = A::load(v);
        for (x, &bv) in acc.iter_mut().zip(&b[col * n + j0..][..w]) {
            *x = A::mul_add::<FUSED>(av, A::load(bv), *x);
        }
    }
}

/// y = alpha * A * x + beta * y. With `beta == 0` the old `y` is not read, so it may
/// hold garbage or NaN (BLAS semantics). alpha and beta are rounded to the accumulation
/// type (f64 for f64, f32 otherwise), as the GPU's `spmv` does.
pub fn spmv<T: Scalar>(a: CsMatView<T>, x: &[T], alpha: f64, beta: f64, y: &mut [T]) {
    assert!(a.is_csr(), "backend expects CSR");
    let (m, k) = a.shape();
    assert_eq!(x.len(), k, "x must have k entries");
    assert_eq!(y.len(), m, "y must have m entries");
    match T::DTYPE {
        DType::F64 => spmv_acc::<T, f64>(a, x, alpha, beta, y),
        DType::F32 | DType::F16 | DType::Bf16 => spmv_acc::<T, f32>(a, x, alpha, beta, y),
    }
}

fn spmv_acc<T: Scalar, A: Acc>(a: CsMatView<T>, x: &[T], alpha: f64, beta: f64, y: &mut [T]) {
    let read_y = beta != 0.0;
    let (alpha, beta) = (A::from_f64(alpha), A::from_f64(beta));
    let indptr = a.proper_indptr();
    let (ind, val) = (a.indices(), a.data());
    // Rows are short; batching them keeps rayon's per-task overhead negligible.
    y.par_iter_mut().with_min_len(256).enumerate().for_each(|(i, yi)| {
        let mut acc = A::default();
        for p in indptr[i]..indptr[i + 1] {
            acc += A::load(val[p]) * A::load(x[ind[p]]);
        }
        let mut r = alpha * acc;
        if read_y {
            r += beta * A::load(*yi);
        }
        *yi = r.store();
    });
}

/// Structural sparse product C = A * B (both CSR), sorted columns.
///
/// Our own parallel Gustavson, not sprs's `&a * &b`: that needs `num_traits::Zero` and
/// `MulAcc` on the element type (not available for f16/bf16 here) and would accumulate
/// in the storage type. Like [`super::oracle::spgemm`], every (i, j) reached by some
/// product is stored, even if its value sums to 0.
pub fn spgemm<T: Scalar>(a: CsMatView<T>, b: CsMatView<T>) -> CsMat<T> {
    assert!(a.is_csr() && b.is_csr(), "backend expects CSR");
    assert_eq!(a.cols(), b.rows(), "inner dimensions differ");
    match T::DTYPE {
        DType::F64 => spgemm_acc::<T, f64>(a, b),
        DType::F32 | DType::F16 | DType::Bf16 => spgemm_acc::<T, f32>(a, b),
    }
}

/// The rows of C that one parallel task produced.
struct RowBlock<T> {
    row_lens: Vec<usize>,
    indices: Vec<usize>,
    data: Vec<T>,
}

fn spgemm_acc<T: Scalar, A: Acc>(a: CsMatView<T>, b: CsMatView<T>) -> CsMat<T> {
    // Enough rows per task to amortize a task, few enough to balance skewed rows.
    const BLOCK_ROWS: usize = 256;
    let (m, n) = (a.rows(), b.cols());
    let (a_ptr, b_ptr) = (a.proper_indptr(), b.proper_indptr());
    let blocks: Vec<RowBlock<T>> = (0..m.div_ceil(BLOCK_ROWS))
        .into_par_iter()
        .map_init(
            // Zero-filled, so the allocator can hand out untouched pages even for wide B.
            // mark[j] == i + 1 means column j already appeared in row i.
            || (vec![A::default(); n], vec![0usize; n], Vec::new()),
            |(acc, mark, touched), blk| {
                let rows = blk * BLOCK_ROWS..((blk + 1) * BLOCK_ROWS).min(m);
                // The number of products bounds the block's output: reserving it up
                // front avoids regrowing (and re-faulting) the vectors.
                let products: usize =
                    a.indices()[a_ptr[rows.start]..a_ptr[rows.end]].iter().map(|&r| b_ptr[r + 1] - b_ptr[r]).sum();
                let mut out = RowBlock {
                    row_lens: Vec::with_capacity(rows.len()),
                    indices: Vec::with_capacity(products),
                    data: Vec::with_capacity(products),
                };
                for i in rows {
                    touched.clear();
                    for p in a_ptr[i]..a_ptr[i + 1] {
                        let av = A::load(a.data()[p]);
                        let r = a.indices()[p];
                        for q in b_ptr[r]..b_ptr[r + 1] {
                            let j = b.indices()[q];
                            if mark[j] != i + 1 {
                                mark[j] = i + 1;
                                acc[j] = A::default();
                                touched.push(j);
                            }
                            acc[j] += av * A::load(b.data()[q]);
                        }
                    }
                    touched.sort_unstable();
                    out.indices.extend_from_slice(touched);
                    out.data.extend(touched.iter().map(|&j| acc[j].store::<T>()));
                    out.row_lens.push(touched.len());
                }
                out
            },
        )
        .collect();

    let nnz = blocks.iter().map(|blk| blk.indices.len()).sum();
    let mut indptr = Vec::with_capacity(m + 1);
    let mut indices = Vec::with_capacity(nnz);
    let mut data = Vec::with_capacity(nnz);
    indptr.push(0);
    for blk in blocks {
        for len in blk.row_lens {
            indptr.push(indptr[indptr.len() - 1] + len);
        }
        indices.extend(blk.indices);
        data.extend(blk.data);
    }
    CsMat::new((m, n), indptr, indices, data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::oracle;
    use crate::gen;
    use half::{bf16, f16};

    fn row_lengths<T>(a: &CsMat<T>) -> Vec<usize> {
        (0..a.rows()).map(|i| a.indptr().outer_inds_sz(i).len()).collect()
    }

    /// Backend SpMM vs the oracle within the fp32-accumulation bound, for storage `T`.
    fn check_spmm<T: Scalar>(a32: &CsMat<f32>, n: usize, seed: u64) {
        let a = gen::convert::<T>(a32);
        let b: Vec<T> = gen::dense_matrix(a.cols(), n, seed).into_iter().map(T::from_f32).collect();
        let want = oracle::spmm(a.view(), &b, n);
        let u_acc = if T::DTYPE == DType::F64 { DType::F64 } else { DType::F32 }.unit_roundoff();
        let bound = oracle::spmm_error_bound(
            &want,
            &oracle::spmm_abs(a.view(), &b, n),
            &row_lengths(&a),
            n,
            u_acc,
            T::DTYPE.unit_roundoff(),
        );
        // The public entry point, then the portable loop (no AVX2) on the f32 and f64 paths.
        type Run<T> = fn(CsMatView<T>, &[T], usize, &mut [T]);
        let runs: [Run<T>; 2] = [spmm, |a, b, n, c| match T::DTYPE {
            DType::F64 => spmm_rows::<T, T, f64, F64_PANEL>(a, b, n, c, false),
            _ => {
                let b32: Vec<f32> = b.iter().map(|v| v.to_f32()).collect();
                spmm_rows::<T, f32, f32, F32_PANEL>(a, &b32, n, c, false)
            }
        }];
        for (path, run) in runs.iter().enumerate() {
            let mut c = vec![T::from_f32(-7.5e3); a.rows() * n];
            run(a.view(), &b, n, &mut c);
            let got: Vec<f64> = c.iter().map(|v| v.to_f64()).collect();
            let r = oracle::compare(&got, &want, &bound);
            assert_eq!(r.mismatches, 0, "{} n {n} path {path}: {r:?}", T::DTYPE);
        }
    }

    #[test]
    fn spmm_matches_oracle() {
        let a = gen::uniform_random(123, 77, 0.2, 1);
        let skewed = gen::with_empty_rows(&gen::power_law(300, 200, 8.0, 1.8, 2), 0.1, 3);
        // Every column path: register panels of 64 (f64: 32), 32, 16 and 8, the last
        // columns in memory, and rows past MAX_PANEL_N in memory.
        for n in [1, 7, 19, 64, 100, 125, 513, 600] {
            check_spmm::<f32>(&a, n, 10);
            check_spmm::<f64>(&a, n, 11);
            check_spmm::<f16>(&a, n, 12);
            check_spmm::<bf16>(&a, n, 13);
            check_spmm::<f32>(&skewed, n, 14);
        }
        // n = 0 and an empty matrix are no-ops, not panics.
        spmm::<f32>(a.view(), &[], 0, &mut []);
        let empty = CsMat::<f32>::zero((0, 5));
        spmm(empty.view(), &[0.0; 10], 2, &mut []);
    }

    /// C = ReLU(A * B + bias) on the backend against `SpmmReference::bias_relu` (the FMA bound through
    /// `oracle::bias_relu_reference`), on skewed rows with empty ones, for f32, f16 and bf16: a NaN bias makes its row
    /// NaN, -Inf its row 0 and +Inf its row +Inf (no entry of B is infinite); a bias far below C's values clears its
    /// row. The check fails a result with one element moved past its bound, a cleared element made positive, and a
    /// NaN made a number.
    fn check_bias_relu<T: Scalar>(a32: &CsMat<f32>, n: usize, seed: u64) {
        let a = gen::convert::<T>(a32);
        let m = a.rows();
        let b: Vec<T> = gen::dense_matrix(a.cols(), n, seed).into_iter().map(T::from_f32).collect();
        let mut bias: Vec<f32> = (0..m).map(|r| ((r % 7) as f32 - 3.0) * 0.4).collect();
        bias[..4].copy_from_slice(&[f32::NAN, f32::NEG_INFINITY, f32::INFINITY, -1e4]);
        let mut c = vec![T::from_f32(-7.5e3); m * n];
        spmm_bias_relu(a.view(), &b, n, &bias, &mut c);
        let reference = oracle::SpmmReference::new(a.view(), &b, n).bias_relu::<T>(&bias, n);
        let what = format!("{} n {n}", T::DTYPE);
        let r = reference.compare(&c, oracle::Summation::Fma).unwrap();
        assert_eq!(r.mismatches, 0, "{what}: {r:?}");
        let row = |r: usize| c[r * n..(r + 1) * n].iter().map(|v| v.to_f64()).collect::<Vec<f64>>();
        assert!(row(0).iter().all(|v| v.is_nan()), "{what}: a NaN bias");
        assert!(row(1).iter().all(|&v| v == 0.0), "{what}: a -Inf bias");
        assert!(row(2).iter().all(|&v| v == f64::INFINITY), "{what}: a +Inf bias");
        assert!(row(3).iter().all(|&v| v == 0.0), "{what}: a bias far below C");
        let (cleared, positive) =
            (c.iter().filter(|v| v.to_f64() == 0.0).count(), c.iter().filter(|v| v.to_f64() > 0.0).count());
        assert!(cleared > 4 * n && positive > m * n / 5, "{what}: {cleared} cleared, {positive} positive");
        let fails = |i: usize, v: f64| {
            let mut wrong = c.clone();
            wrong[i] = T::from_f64(v);
            reference.compare(&wrong, oracle::Summation::Fma).unwrap().mismatches == 1
        };
        let big = (4 * n..m * n).max_by(|&i, &j| c[i].to_f64().partial_cmp(&c[j].to_f64()).unwrap()).unwrap();
        assert!(fails(big, c[big].to_f64() * 1.02), "{what}: 2% off at {big}");
        // A cleared element made positive by 5% of C's largest value (the bound near 0 is the sum's, about
        // u_T |A * B|, not u_T |A * B + bias|).
        let zero = (4 * n..m * n).find(|&i| c[i].to_f64() == 0.0).unwrap();
        assert!(fails(zero, 0.05 * c[big].to_f64()), "{what}: a cleared element made positive at {zero}");
        assert!(fails(0, 0.0), "{what}: the NaN row made 0");
    }

    #[test]
    fn spmm_bias_relu_matches_oracle() {
        let skewed = gen::with_empty_rows(&gen::power_law(300, 200, 8.0, 1.8, 2), 0.1, 3);
        for n in [1, 19, 64, 130] {
            check_bias_relu::<f32>(&skewed, n, 20);
            check_bias_relu::<f16>(&skewed, n, 21);
            check_bias_relu::<bf16>(&skewed, n, 22);
        }
    }

    /// C = alpha * A * B + beta * C (+ bias, ReLU) on the backend against `SpmmReference::epilogue`, for f32, f16,
    /// bf16 and f64, on skewed rows with empty ones: with beta 0 a C of NaN is not read; with beta not 0 a NaN and
    /// an Inf in C reach their elements (an empty row's elements are beta times the old value exactly, where alpha
    /// is 1 and there is no bias); the check fails an element moved by 2% and one that ignores C's old value.
    fn check_epilogue<T: Scalar>(a32: &CsMat<f32>, n: usize, seed: u64) {
        let a = gen::convert::<T>(a32);
        let m = a.rows();
        let b: Vec<T> = gen::dense_matrix(a.cols(), n, seed).into_iter().map(T::from_f32).collect();
        let bias: Vec<f32> = (0..m).map(|r| ((r % 7) as f32 - 3.0) * 0.4).collect();
        let mut old: Vec<T> = gen::dense_matrix(m, n, seed + 1).into_iter().map(T::from_f32).collect();
        old[0] = T::from_f32(f32::NAN);
        old[n.min(m * n - 1)] = T::from_f32(f32::INFINITY);
        let plain = oracle::SpmmReference::new(a.view(), &b, n);
        let empty = (0..m).find(|&r| a.outer_view(r).unwrap().nnz() == 0 && r > 1).expect("an empty row");
        for (alpha, beta, bias) in
            [(-1.5f32, 0.75f32, None), (1.0, 1.0, None), (0.5, 0.0, Some(&bias[..])), (2.0, -1.0, Some(&bias[..]))]
        {
            let what = format!("{} n {n}, alpha {alpha}, beta {beta}, bias {}", T::DTYPE, bias.is_some());
            let mut c = if beta == 0.0 { vec![T::from_f32(f32::NAN); m * n] } else { old.clone() };
            spmm_epilogue(a.view(), &b, n, alpha, beta, bias, &mut c);
            let reference = plain.epilogue::<T>(alpha, beta, &old, bias, n);
            let r = reference.compare(&c, oracle::Summation::Fma).unwrap();
            assert_eq!(r.mismatches, 0, "{what}: {r:?}");
            if beta == 0.0 {
                assert!(c.iter().skip(n).all(|v| !v.to_f64().is_nan()), "{what}: C's NaN was read");
            } else {
                assert!(c[0].to_f64().is_nan(), "{what}: the NaN in C must reach C");
                if bias.is_none() && alpha == 1.0 {
                    let row = &c[empty * n..(empty + 1) * n];
                    let want = &old[empty * n..(empty + 1) * n];
                    let exact =
                        row.iter().zip(want).all(|(v, o)| v.to_f64() == (beta as f64 * o.to_f64()) as f32 as f64);
                    assert!(exact, "{what}: empty row {empty} is not beta C");
                }
                // C's old value left out of one element (where it is not small) must fail.
                let i = (n..m * n).find(|&i| old[i].to_f64().abs() > 0.5 && c[i].to_f64().abs() > 0.1).unwrap();
                let mut wrong = c.clone();
                wrong[i] = T::from_f64(c[i].to_f64() - beta as f64 * old[i].to_f64());
                assert_eq!(reference.compare(&wrong, oracle::Summation::Fma).unwrap().mismatches, 1, "{what}: at {i}");
            }
            let finite = (n..m * n).filter(|&i| c[i].to_f64().is_finite());
            let big = finite.max_by(|&i, &j| c[i].to_f64().abs().total_cmp(&c[j].to_f64().abs())).unwrap();
            let mut wrong = c.clone();
            wrong[big] = T::from_f64(c[big].to_f64() * 1.02);
            assert_eq!(reference.compare(&wrong, oracle::Summation::Fma).unwrap().mismatches, 1, "{what}: 2% at {big}");
        }
    }

    #[test]
    fn spmm_epilogue_matches_oracle() {
        let skewed = gen::with_empty_rows(&gen::power_law(300, 200, 8.0, 1.8, 2), 0.1, 3);
        for n in [1, 19, 64] {
            check_epilogue::<f32>(&skewed, n, 30);
            check_epilogue::<f16>(&skewed, n, 31);
            check_epilogue::<bf16>(&skewed, n, 32);
            check_epilogue::<f64>(&skewed, n, 33);
        }
    }

    #[test]
    fn spmm_propagates_nan() {
        // A stored zero meeting a NaN in B must give NaN, as in the oracle.
        let a = CsMat::new((2, 2), vec![0, 1, 2], vec![1, 0], vec![0.0f32, 1.0]);
        let b = [1.0f32, 2.0, f32::NAN, 3.0];
        let mut c = [-7.5e3f32; 4]; // poison: every element must be written
        spmm(a.view(), &b, 2, &mut c);
        assert!(c[0].is_nan());
        assert_eq!(c[1], 0.0);
        assert_eq!(&c[2..], &[1.0, 2.0]);
        // A stored zero times -Inf is NaN; Inf times a nonzero stays Inf.
        let b = [f32::INFINITY, 1.0, 2.0, f32::NEG_INFINITY];
        let mut c = [-7.5e3f32; 4];
        spmm(a.view(), &b, 2, &mut c);
        assert_eq!(c[0], 0.0, "{c:?}");
        assert!(c[1].is_nan(), "{c:?}");
        assert_eq!(&c[2..], &[f32::INFINITY, 1.0]);
    }

    fn check_spmv<T: Scalar>(alpha: f64, beta: f64, y0: f32) {
        let a = gen::convert::<T>(&gen::uniform_random(1000, 800, 0.05, 4));
        let x: Vec<T> = gen::dense_matrix(800, 1, 5).into_iter().map(T::from_f32).collect();
        let y_in: Vec<T> = gen::dense_matrix(1000, 1, 6).into_iter().map(|v| T::from_f32(v + y0)).collect();
        let mut y = y_in.clone();
        spmv(a.view(), &x, alpha, beta, &mut y);
        let got: Vec<f64> = y.iter().map(|v| v.to_f64()).collect();
        let want = oracle::spmv(a.view(), &x, alpha, Some(&y_in), beta);
        let bound = crate::spmv::spmv_error_bound(a.view(), &x, alpha, beta, Some(&y_in));
        let r = oracle::compare(&got, &want, &bound);
        assert_eq!(r.mismatches, 0, "{} alpha {alpha} beta {beta}: {r:?}", T::DTYPE);
    }

    #[test]
    fn spmv_matches_oracle() {
        check_spmv::<f32>(1.5, -0.5, 0.0);
        check_spmv::<f64>(-2.0, 3.0, 0.0);
        check_spmv::<f16>(1.0, 1.0, 0.0);
        check_spmv::<bf16>(0.5, 0.25, 0.0);
        // beta = 0 with y full of NaN: y must not be read.
        check_spmv::<f32>(1.0, 0.0, f32::NAN);
        check_spmv::<f16>(2.0, 0.0, f32::NAN);
        // alpha and beta that f32 cannot hold: f64 must keep them (f32 would be off by ~1e-9).
        check_spmv::<f64>(0.1, -0.3, 0.0);
        check_spmv::<f32>(0.1, 1.0 / 3.0, 0.0);
    }

    #[test]
    fn spmv_reads_y_only_when_beta_nonzero() {
        let a = CsMat::new((2, 2), vec![0, 1, 2], vec![0, 1], vec![2.0f32, 3.0]);
        let mut y = [f32::NAN, f32::NAN];
        spmv(a.view(), &[1.0, 1.0], 1.0, 0.0, &mut y);
        assert_eq!(y, [2.0, 3.0]);
        spmv(a.view(), &[1.0, 1.0], 1.0, 1.0, &mut y);
        assert_eq!(y, [4.0, 6.0]);
        let mut y = [f32::NAN, 1.0];
        spmv(a.view(), &[1.0, 1.0], 1.0, 1.0, &mut y);
        assert!(y[0].is_nan());
        assert_eq!(y[1], 4.0);
    }

    /// Backend SpGEMM vs the oracle: identical structure, values within the bound.
    fn check_spgemm<T: Scalar>(a32: &CsMat<f32>, b32: &CsMat<f32>) {
        let (a, b) = (gen::convert::<T>(a32), gen::convert::<T>(b32));
        let got = spgemm(a.view(), b.view());
        let want = oracle::spgemm(a.view(), b.view());
        assert_eq!(got.shape(), want.shape());
        assert_eq!(got.indptr().raw_storage(), want.indptr().raw_storage());
        assert_eq!(got.indices(), want.indices());
        // |A||B| on the same structure, one "row" per stored entry.
        let abs = |m: &CsMat<T>| m.map(|v| T::from_f64(v.to_f64().abs()));
        let ab = oracle::spgemm(abs(&a).view(), abs(&b).view());
        let a_lens = row_lengths(&a);
        let lens: Vec<usize> = (0..want.rows())
            .flat_map(|i| std::iter::repeat_n(a_lens[i], want.indptr().outer_inds_sz(i).len()))
            .collect();
        let u_acc = if T::DTYPE == DType::F64 { DType::F64 } else { DType::F32 }.unit_roundoff();
        let bound = oracle::spmm_error_bound(want.data(), ab.data(), &lens, 1, u_acc, T::DTYPE.unit_roundoff());
        let got_vals: Vec<f64> = got.data().iter().map(|v| v.to_f64()).collect();
        let r = oracle::compare(&got_vals, want.data(), &bound);
        assert_eq!(r.mismatches, 0, "{}: {r:?}", T::DTYPE);
    }

    #[test]
    fn spgemm_matches_oracle() {
        let a = gen::uniform_random(700, 300, 0.03, 7);
        let b = gen::power_law(300, 500, 6.0, 2.0, 8);
        check_spgemm::<f32>(&a, &b);
        check_spgemm::<f64>(&a, &b);
        check_spgemm::<f16>(&a, &b);
        check_spgemm::<bf16>(&a, &b);
        let lap = gen::laplacian_27pt(6, 5, 4);
        check_spgemm::<f32>(&lap, &lap);
    }

    #[test]
    fn spgemm_keeps_structural_zeros() {
        let a = CsMat::new((1, 2), vec![0, 2], vec![0, 1], vec![1.0f32, -1.0]);
        let b = CsMat::new((2, 3), vec![0, 1, 2], vec![2, 2], vec![1.0f32, 1.0]);
        let c = spgemm(a.view(), b.view());
        assert_eq!(c.shape(), (1, 3));
        assert_eq!(c.indices(), &[2]);
        assert_eq!(c.data(), &[0.0]);
    }
}
