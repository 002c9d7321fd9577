//! SpMV: y = alpha * A x + beta * y. The seed kernel pair of shared/seeds/spmv-csr-shared-prefix-sum.md.

use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg};

use crate::csr::DeviceCsr;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::kernels::{Family, SPMV_SEED_COMBINE, SPMV_SEED_PRODUCTS};

/// Kernel arguments; mirrors `ts::SpmvParams` in cuda/common/params.cuh.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct SpmvParams {
    m: i32,
    k: i32,
    nnz: i32,
    alpha: f32,
    beta: f32,
    pad: i32,
    values: u64,
    row_offsets: u64,
    column_indices: u64,
    x: u64,
    prefix: u64,
    y: u64,
}
const _: () = assert!(std::mem::size_of::<SpmvParams>() == 72, "SpmvParams must match cuda/common/params.cuh");
// SAFETY: plain old data with the C layout the kernel expects.
unsafe impl cudarc::driver::DeviceRepr for SpmvParams {}

/// Scratch for the seed SpMV: the per-block prefix sums of the nnz products.
pub struct SeedSpmvWorkspace {
    prefix: CudaSlice<f32>,
}

impl SeedSpmvWorkspace {
    /// Allocates the scratch for a matrix with `nnz` stored entries.
    pub fn new(gpu: &Gpu, nnz: usize) -> Result<Self> {
        let bytes = nnz.max(1) * 4;
        let prefix = gpu
            .stream()
            .alloc_zeros::<f32>(nnz.max(1))
            .map_err(Error::driver("allocating the SpMV prefix scratch", bytes))?;
        Ok(SeedSpmvWorkspace { prefix })
    }
}

/// y = alpha * A x + beta * y with the seed's two kernels. With beta == 0, y is only written.
///
/// The seed sums a row as differences of block prefix sums: a row's result can lose accuracy when its
/// block holds much larger products, and an Inf or NaN in one row of a 32-entry block can reach the other
/// rows of that block (Inf - Inf). The production SpMV has neither limitation.
pub fn spmv_seed(
    gpu: &Gpu,
    a: &DeviceCsr<f32>,
    x: &CudaSlice<f32>,
    alpha: f32,
    beta: f32,
    y: &mut CudaSlice<f32>,
    workspace: &mut SeedSpmvWorkspace,
) -> Result<()> {
    if x.len() < a.cols() || y.len() < a.rows() {
        return Err(Error::ShapeMismatch(format!(
            "A is {} x {}, x has {} and y has {} elements",
            a.rows(),
            a.cols(),
            x.len(),
            y.len()
        )));
    }
    if workspace.prefix.len() < a.nnz() {
        return Err(Error::ShapeMismatch(format!(
            "the workspace holds {} products, A has {}",
            workspace.prefix.len(),
            a.nnz()
        )));
    }
    if a.rows() == 0 {
        return Ok(());
    }
    let products = gpu.function(Family::Spmv, SPMV_SEED_PRODUCTS)?;
    let combine = gpu.function(Family::Spmv, SPMV_SEED_COMBINE)?;
    let stream = gpu.stream();
    let (values, _g1) = a.values.device_ptr(stream);
    let (row_offsets, _g2) = a.row_offsets.device_ptr(stream);
    let (column_indices, _g3) = a.column_indices.device_ptr(stream);
    let (x_ptr, _g4) = x.device_ptr(stream);
    let (prefix, _g5) = workspace.prefix.device_ptr_mut(stream);
    let (y_ptr, _g6) = y.device_ptr_mut(stream);
    let params = SpmvParams {
        m: a.rows() as i32,
        k: a.cols() as i32,
        nnz: a.nnz() as i32,
        alpha,
        beta,
        pad: 0,
        values,
        row_offsets,
        column_indices,
        x: x_ptr,
        prefix,
        y: y_ptr,
    };
    if a.nnz() > 0 {
        let cfg =
            LaunchConfig { grid_dim: (a.nnz().div_ceil(32) as u32, 1, 1), block_dim: (32, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: A was validated at upload (column indices < k <= x.len()); prefix holds >= nnz floats.
        unsafe { stream.launch_builder(&products).arg(&params).launch(cfg) }
            .map_err(Error::driver("launching the seed SpMV products", 0))?;
    }
    let cfg =
        LaunchConfig { grid_dim: (a.rows().div_ceil(256) as u32, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
    // SAFETY: one thread per row < m <= y.len(); it reads prefix entries below row_offsets[m] = nnz.
    unsafe { stream.launch_builder(&combine).arg(&params).launch(cfg) }
        .map_err(Error::driver("launching the seed SpMV row combine", 0))?;
    Ok(())
}
