//! The bias + ReLU epilogue as a pass of its own over C: how a caller of a product without a fused epilogue
//! (cuSPARSE's SpMM) gets C = ReLU(A * B + bias). `bench spmm --bias-relu` times cuSPARSE with it
//! ([`super::cusparse::CusparseSpmm::run_bias_relu`]) against the kernels' fused epilogue
//! ([`crate::spmm_kernel_bias_relu`]).

use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, PushKernelArg};

use crate::dense::DeviceDense;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::kernels::Family;
use crate::scalar::{DType, Scalar};

/// `c[r][j] = ReLU(c[r][j] + bias[r])` in place, on `gpu`'s stream (`ts_bias_relu_rows_<dtype>` in
/// cuda/util/util.cu): the element is widened to f32, the bias added in f32, the ReLU applied (a NaN stays NaN)
/// and the result rounded to `T`, so an f16 or bf16 C is rounded twice, once by the product and once here, where
/// the fused epilogue rounds once. `bias` holds one f32 per row of C, else [`Error::ShapeMismatch`] (any length
/// when C has no rows, since the device holds no empty buffer); f64 is [`Error::UnsupportedDtype`].
pub fn bias_relu_pass<T: Scalar>(gpu: &Gpu, c: &mut DeviceDense<T>, bias: &CudaSlice<f32>) -> Result<()> {
    c.check_gpu(gpu, "C")?;
    let (rows, cols) = (c.rows(), c.cols());
    check_pass(gpu, bias, rows, cols, T::DTYPE)?;
    let (ptr, _g) = c.data.device_ptr_mut(gpu.stream());
    // SAFETY: `ptr` addresses C's rows x cols elements of T (a DeviceDense holds at least that many), borrowed
    // mutably until the launch is queued.
    unsafe { launch_pass(gpu, ptr, rows, cols, T::DTYPE, bias) }
}

/// The pass's checks on a C of `rows` x `cols` elements of `dtype`: a type the pass is compiled for, a bias that is
/// `gpu`'s and holds one f32 per row (any length with no rows), and rows and columns that fit the kernel's i32.
pub(crate) fn check_pass(gpu: &Gpu, bias: &CudaSlice<f32>, rows: usize, cols: usize, dtype: DType) -> Result<()> {
    kernel_name(dtype)?;
    crate::spmm::check_bias_rows(gpu, bias, rows)?;
    if rows > i32::MAX as usize || cols > i32::MAX as usize {
        return Err(Error::TooLarge(format!("C: {rows} x {cols} (the pass takes i32 rows and columns)")));
    }
    Ok(())
}

/// Queues the pass over the C at `c` (rows x cols elements of `dtype`, row-major), after [`check_pass`].
///
/// # Safety
/// `c` must address at least rows x cols elements of `dtype` on `gpu`'s device, not read or written by anything
/// else until the pass has run on `gpu`'s stream.
pub(crate) unsafe fn launch_pass(
    gpu: &Gpu,
    c: u64,
    rows: usize,
    cols: usize,
    dtype: DType,
    bias: &CudaSlice<f32>,
) -> Result<()> {
    let name = kernel_name(dtype)?;
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let function = gpu.function(Family::Util, name)?;
    let stream = gpu.stream();
    let cfg = crate::kernels::grid_stride_launch(rows * cols);
    let (rows, cols) = (rows as i32, cols as i32);
    let (bias_ptr, _gb) = bias.device_ptr(stream);
    // SAFETY: the kernel reads `rows` f32 of the bias (its length checked by check_pass) and reads and writes
    // rows x cols elements at `c` (the caller's contract), rows and columns in i32 (check_pass); its loop strides
    // over any grid.
    unsafe { stream.launch_builder(&function).arg(&c).arg(&bias_ptr).arg(&rows).arg(&cols).launch(cfg) }
        .map_err(Error::driver("launching the bias + ReLU pass", 0))?;
    Ok(())
}

/// The pass's kernel for elements of `dtype`, or [`Error::UnsupportedDtype`] (f64).
fn kernel_name(dtype: DType) -> Result<&'static str> {
    match dtype {
        DType::F32 => Ok("ts_bias_relu_rows_f32"),
        DType::F16 => Ok("ts_bias_relu_rows_f16"),
        DType::Bf16 => Ok("ts_bias_relu_rows_bf16"),
        DType::F64 => Err(Error::UnsupportedDtype { dtype, op: "the bias + ReLU pass (f32, f16, bf16)" }),
    }
}
