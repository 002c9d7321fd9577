//! Multi-threaded CPU fallback used when no GPU is present.
//!
//! Rows run in parallel on rayon. Accumulation is in f32 for f32, f16 and bf16 (what
//! the GPU kernels do, so results agree to the same error bound) and f64 for f64.
//! Zeros are never skipped, so NaN and Inf propagate like the oracle's.

use crate::scalar::{DType, Scalar};
use rayon::prelude::*;
use sprs::{CsMat, CsMatView};
use std::ops::{AddAssign, Mul};

/// The accumulation precision (f32 or f64) and its conversions to and from storage.
trait Acc: Copy + Send + Sync + Default + AddAssign + Mul<Output = Self> {
    fn load<S: Scalar>(v: S) -> Self;
    fn store<T: Scalar>(self) -> T;
    fn from_f32(v: f32) -> Self;
}

impl Acc for f32 {
    #[inline]
    fn load<S: Scalar>(v: S) -> Self {
        v.to_f32()
    }
    #[inline]
    fn store<T: Scalar>(self) -> T {
        T::from_f32(self)
    }
    #[inline]
    fn from_f32(v: f32) -> Self {
        v
    }
}

impl Acc for f64 {
    #[inline]
    fn load<S: Scalar>(v: S) -> Self {
        v.to_f64()
    }
    #[inline]
    fn store<T: Scalar>(self) -> T {
        T::from_f64(self)
    }
    #[inline]
    fn from_f32(v: f32) -> Self {
        v as f64
    }
}

/// C = A (m x k, CSR) * B (k x n, row-major) into `c` (m x n, row-major, overwritten).
pub fn spmm<T: Scalar>(a: CsMatView<T>, b: &[T], n: usize, c: &mut [T]) {
    assert!(a.is_csr(), "backend expects CSR");
    let (m, k) = a.shape();
    assert_eq!(b.len(), k * n, "B must be k x n");
    assert_eq!(c.len(), m * n, "C must be m x n");
    match T::DTYPE {
        DType::F64 => spmm_acc::<T, T, f64>(a, b, n, c),
        DType::F32 => spmm_acc::<T, T, f32>(a, b, n, c),
        DType::F16 | DType::Bf16 => {
            // Widen B once: converting in the inner loop would redo it for every
            // nonzero that touches a row of B.
            let b32: Vec<f32> = b.par_iter().map(|v| v.to_f32()).collect();
            spmm_acc::<T, f32, f32>(a, &b32, n, c)
        }
    }
}

/// The SpMM loop: for each nonzero a_ip, axpy row p of B into an accumulator row.
fn spmm_acc<T: Scalar, S: Scalar, A: Acc>(a: CsMatView<T>, b: &[S], n: usize, c: &mut [T]) {
    if n == 0 {
        return; // nothing to write, and chunks of 0 are not allowed
    }
    let indptr = a.proper_indptr();
    let (ind, val) = (a.indices(), a.data());
    c.par_chunks_mut(n).enumerate().for_each_init(
        || vec![A::default(); n],
        |acc, (i, c_row)| {
            acc.fill(A::default());
            for p in indptr[i]..indptr[i + 1] {
                let av = A::load(val[p]);
                let b_row = &b[ind[p] * n..(ind[p] + 1) * n];
                for (x, &bv) in acc.iter_mut().zip(b_row) {
                    *x += av * A::load(bv);
                }
            }
            for (o, &x) in c_row.iter_mut().zip(acc.iter()) {
                *o = x.store();
            }
        },
    );
}

/// y = alpha * A * x + beta * y. With `beta == 0` the old `y` is not read, so it may
/// hold garbage or NaN (BLAS semantics).
pub fn spmv<T: Scalar>(a: CsMatView<T>, x: &[T], alpha: f32, beta: f32, y: &mut [T]) {
    assert!(a.is_csr(), "backend expects CSR");
    let (m, k) = a.shape();
    assert_eq!(x.len(), k, "x must have k entries");
    assert_eq!(y.len(), m, "y must have m entries");
    match T::DTYPE {
        DType::F64 => spmv_acc::<T, f64>(a, x, alpha, beta, y),
        DType::F32 | DType::F16 | DType::Bf16 => spmv_acc::<T, f32>(a, x, alpha, beta, y),
    }
}

fn spmv_acc<T: Scalar, A: Acc>(a: CsMatView<T>, x: &[T], alpha: f32, beta: f32, y: &mut [T]) {
    let read_y = beta != 0.0;
    let (alpha, beta) = (A::from_f32(alpha), A::from_f32(beta));
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
        let mut c = vec![T::from_f32(f32::NAN); a.rows() * n];
        spmm(a.view(), &b, n, &mut c);
        let got: Vec<f64> = c.iter().map(|v| v.to_f64()).collect();
        let want = oracle::spmm(a.view(), &b, n);
        let u_acc = if T::DTYPE == DType::F64 { DType::F64 } else { DType::F32 }.unit_roundoff();
        let bound = oracle::spmm_error_bound(
            &oracle::spmm_abs(a.view(), &b, n),
            &row_lengths(&a),
            n,
            u_acc,
            T::DTYPE.unit_roundoff(),
        );
        let r = oracle::compare(&got, &want, &bound);
        assert_eq!(r.mismatches, 0, "{}: {r:?}", T::DTYPE);
    }

    #[test]
    fn spmm_matches_oracle() {
        let a = gen::uniform_random(123, 77, 0.2, 1);
        let skewed = gen::with_empty_rows(&gen::power_law(300, 200, 8.0, 1.8, 2), 0.1, 3);
        for n in [1, 19, 64] {
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

    #[test]
    fn spmm_propagates_nan() {
        // A stored zero meeting a NaN in B must give NaN, as in the oracle.
        let a = CsMat::new((2, 2), vec![0, 1, 2], vec![1, 0], vec![0.0f32, 1.0]);
        let b = [1.0f32, 2.0, f32::NAN, 3.0];
        let mut c = [0.0f32; 4];
        spmm(a.view(), &b, 2, &mut c);
        assert!(c[0].is_nan());
        assert_eq!(c[1], 0.0);
        assert_eq!(&c[2..], &[1.0, 2.0]);
    }

    fn check_spmv<T: Scalar>(alpha: f32, beta: f32, y0: f32) {
        let a = gen::convert::<T>(&gen::uniform_random(1000, 800, 0.05, 4));
        let x: Vec<T> = gen::dense_matrix(800, 1, 5).into_iter().map(T::from_f32).collect();
        let y_in: Vec<T> = gen::dense_matrix(1000, 1, 6).into_iter().map(|v| T::from_f32(v + y0)).collect();
        let mut y = y_in.clone();
        spmv(a.view(), &x, alpha, beta, &mut y);
        let got: Vec<f64> = y.iter().map(|v| v.to_f64()).collect();
        let want = oracle::spmv(a.view(), &x, alpha as f64, Some(&y_in), beta as f64);
        // |alpha| |A||x| + |beta y| with two extra roundings (alpha scale, beta add).
        let ax = oracle::spmm_abs(a.view(), &x, 1);
        let mag: Vec<f64> = ax
            .iter()
            .zip(&y_in)
            .map(|(v, yi)| {
                let by = if beta == 0.0 { 0.0 } else { (beta as f64 * yi.to_f64()).abs() };
                alpha.abs() as f64 * v + by
            })
            .collect();
        let lens: Vec<usize> = row_lengths(&a).iter().map(|l| l + 2).collect();
        let u_acc = if T::DTYPE == DType::F64 { DType::F64 } else { DType::F32 }.unit_roundoff();
        let bound = oracle::spmm_error_bound(&mag, &lens, 1, u_acc, T::DTYPE.unit_roundoff());
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
        let bound = oracle::spmm_error_bound(ab.data(), &lens, 1, u_acc, T::DTYPE.unit_roundoff());
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
