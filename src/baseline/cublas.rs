//! cuBLAS GEMM on the densified sparse matrix: the dense baseline every SpMM figure is compared with.

use std::ffi::c_void;

use cudarc::cublas::sys as cb;
use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut};

use super::cuda_data_type;
use crate::dense::DeviceDense;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::scalar::{DType, Scalar};

fn check(what: &'static str, status: cb::cublasStatus_t) -> Result<()> {
    if status == cb::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(Error::Cublas { what, status })
    }
}

/// A cuBLAS handle on the [`Gpu`]'s stream.
pub struct Cublas {
    handle: cb::cublasHandle_t,
}

impl Cublas {
    /// Loads libcublas and creates a handle on `gpu`'s stream.
    pub fn new(gpu: &Gpu) -> Result<Self> {
        // SAFETY: only tries to dlopen the library.
        if !unsafe { cb::is_culib_present() } {
            return Err(Error::LibraryMissing("libcublas"));
        }
        gpu.context().bind_to_thread().map_err(Error::driver("binding the context", 0))?;
        let mut handle = std::ptr::null_mut();
        // SAFETY: writes a handle; the context is current.
        check("cublasCreate", unsafe { cb::cublasCreate_v2(&mut handle) })?;
        let lib = Cublas { handle };
        // SAFETY: live handle; the stream outlives it.
        check("cublasSetStream", unsafe {
            cb::cublasSetStream_v2(lib.handle, gpu.stream().cu_stream() as cb::cudaStream_t)
        })?;
        Ok(lib)
    }

    /// C (m x n) = A (m x k) * B (k x n), all row-major, accumulating in f32 (f64 for f64). For f32 this is
    /// plain SGEMM arithmetic (CUBLAS_COMPUTE_32F, no TF32); for f16/bf16 it uses the tensor cores.
    pub fn gemm_row_major<T: Scalar>(
        &self,
        gpu: &Gpu,
        a: &CudaSlice<T>,
        b: &DeviceDense<T>,
        c: &mut DeviceDense<T>,
    ) -> Result<()> {
        let (m, k, n) = (c.rows(), b.rows(), b.cols());
        if a.len() < m * k || c.cols() != n {
            return Err(Error::ShapeMismatch(format!(
                "GEMM: A has {} elements for {m} x {k}, C is {} x {}",
                a.len(),
                c.rows(),
                c.cols()
            )));
        }
        if m == 0 || n == 0 || k == 0 {
            return Err(Error::ShapeMismatch("GEMM needs m, n, k > 0".into()));
        }
        let stream = gpu.stream();
        let (pa, _g1) = a.device_ptr(stream);
        let (pb, _g2) = b.data.device_ptr(stream);
        let (pc, _g3) = c.data.device_ptr_mut(stream);
        let (alpha64, beta64, alpha32, beta32) = (1f64, 0f64, 1f32, 0f32);
        let (alpha, beta, compute) = if T::DTYPE == DType::F64 {
            (
                &alpha64 as *const f64 as *const c_void,
                &beta64 as *const f64 as *const c_void,
                cb::cublasComputeType_t::CUBLAS_COMPUTE_64F,
            )
        } else {
            (
                &alpha32 as *const f32 as *const c_void,
                &beta32 as *const f32 as *const c_void,
                cb::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            )
        };
        let ty = cuda_data_type(T::DTYPE) as u32;
        // SAFETY: the same enum values in both bindings (cudaDataType is CUDA's library-wide enum).
        let ty: cb::cudaDataType = unsafe { std::mem::transmute(ty) };
        let op = cb::cublasOperation_t::CUBLAS_OP_N;
        // Row-major C = A B is column-major C^T = B^T A^T: swap the operands, keep n as the leading dimension.
        // SAFETY: buffers hold m*k, k*n and m*n elements (checked above) and outlive the call on this stream.
        check("cublasGemmEx", unsafe {
            cb::cublasGemmEx(
                self.handle,
                op,
                op,
                n as i32,
                m as i32,
                k as i32,
                alpha,
                pb as *const c_void,
                ty,
                n as i32,
                pa as *const c_void,
                ty,
                k as i32,
                beta,
                pc as *mut c_void,
                ty,
                n as i32,
                compute,
                cb::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        })
    }
}

impl Drop for Cublas {
    fn drop(&mut self) {
        // SAFETY: created in new, destroyed once.
        unsafe { cb::cublasDestroy_v2(self.handle) };
    }
}
