//! SpGEMM: C = A * B with A and B CSR on the device, fp32 values, i32 indices.
//!
//! - [`spgemm`] / [`SpgemmPlan`]: the production SpGEMM. A symbolic phase (products per row, rows binned by
//!   work, each row's nnz from a hash table or a dense column tile, C's row pointer) makes a plan that can be
//!   reused for new values on the same patterns; a numeric phase fills C's sorted columns and values.
//! - [`spgemm_ladder`] and [`coo_to_csr`]: the seed write-up's kernels 0..4 and its prefix-sum alternative
//!   (shared/seeds/spgemm-kernels-0-4-report.md), kept as the ladder they describe.
//!
//! Semantics, for every kernel here: C holds an entry for every (i, j) that received at least one product
//! a_ik * b_kj, also when the products sum to exactly 0 (the structural product of
//! [`crate::cpu::oracle::spgemm`]). cuSPARSE's `cusparseSpGEMM` and sprs's SMMP product keep such entries too:
//! the structure depends on the patterns only, which is what lets a plan be reused for new values.

mod ladder;
mod plan;

pub use ladder::*;
pub use plan::*;

use cudarc::driver::CudaSlice;
use sprs::{CsMat, CsMatView};

use crate::cpu::oracle;
use crate::csr::DeviceCsr;
use crate::error::{Error, Result};
use crate::gpu::Gpu;

/// Uninitialised device memory of `len.max(1)` elements (every pointer handed to a kernel stays valid).
fn alloc_uninit<T: cudarc::driver::DeviceRepr>(gpu: &Gpu, len: usize, what: &'static str) -> Result<CudaSlice<T>> {
    let len = len.max(1);
    // SAFETY: every caller's kernel writes an element before anything reads it, and only the written prefix
    // is ever read back.
    unsafe { gpu.stream().alloc::<T>(len) }.map_err(Error::driver(what, len * std::mem::size_of::<T>()))
}

fn alloc_zeroed<T: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits>(
    gpu: &Gpu,
    len: usize,
    what: &'static str,
) -> Result<CudaSlice<T>> {
    let len = len.max(1);
    gpu.stream().alloc_zeros::<T>(len).map_err(Error::driver(what, len * std::mem::size_of::<T>()))
}

fn check_shapes(gpu: &Gpu, a: &DeviceCsr<f32>, b: &DeviceCsr<f32>) -> Result<()> {
    a.check_gpu(gpu, "A")?;
    b.check_gpu(gpu, "B")?;
    if a.cols() != b.rows() {
        return Err(Error::ShapeMismatch(format!(
            "A is {} x {} and B is {} x {}: A's columns must equal B's rows",
            a.rows(),
            a.cols(),
            b.rows(),
            b.cols()
        )));
    }
    Ok(())
}

/// Checks a computed C = A * B against the f64 oracle: the structure (row pointer and column indices) must be
/// equal, and each value within gamma(p + 1) * (|A| |B|)_ij, p the number of products summed into (i, j) and
/// gamma(t) = t u / (1 - t u) with u = 2^-24 (fp32 summation in any order, plus the final rounding), plus
/// p times the smallest normal for underflow. Returns the value comparison.
pub fn check_product(a: CsMatView<f32>, b: CsMatView<f32>, got: &CsMat<f32>) -> Result<oracle::Comparison> {
    let want = oracle::spgemm(a, b);
    if got.shape() != want.shape() || got.indptr().raw_storage() != want.indptr().raw_storage() {
        return Err(Error::Verification(format!(
            "the row pointer differs from the oracle's (nnz {} vs {})",
            got.nnz(),
            want.nnz()
        )));
    }
    if let Some(i) = (0..want.nnz()).find(|&i| got.indices()[i] != want.indices()[i]) {
        return Err(Error::Verification(format!(
            "column index {i} differs from the oracle's: {} vs {}",
            got.indices()[i],
            want.indices()[i]
        )));
    }
    let abs = oracle::spgemm(a.map(|v| v.abs()).view(), b.map(|v| v.abs()).view());
    let products = oracle::spgemm(a.map(|_| 1.0f32).view(), b.map(|_| 1.0f32).view());
    let u = f32::EPSILON as f64 / 2.0;
    let bound: Vec<f64> = abs
        .data()
        .iter()
        .zip(products.data())
        .map(|(&mag, &p)| {
            let t = (p + 1.0) * u;
            t / (1.0 - t) * mag + p * f32::MIN_POSITIVE as f64
        })
        .collect();
    let got64: Vec<f64> = got.data().iter().map(|&v| v as f64).collect();
    let cmp = oracle::compare(&got64, want.data(), &bound);
    if cmp.mismatches > 0 {
        return Err(Error::Verification(format!(
            "{} of {} values mismatch; first (index, got, want) = {:?}",
            cmp.mismatches,
            want.nnz(),
            cmp.first_mismatch
        )));
    }
    Ok(cmp)
}
