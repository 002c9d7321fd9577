//! A small safe wrapper over the cuSPARSE generic API: SpMM and SpMV on CSR with row-major dense operands.

use std::ffi::c_void;
use std::marker::PhantomData;

use cudarc::cusparse::sys as cs;
use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut};

use super::cuda_data_type;
use crate::csr::DeviceCsr;
use crate::dense::DeviceDense;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::scalar::{DType, Scalar};

fn check(what: &'static str, status: cs::cusparseStatus_t) -> Result<()> {
    if status == cs::cusparseStatus_t::CUSPARSE_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(Error::Cusparse { what, status })
    }
}

/// A cuSPARSE handle bound to the [`Gpu`]'s stream.
pub struct Cusparse {
    handle: cs::cusparseHandle_t,
}

impl Cusparse {
    /// Loads libcusparse and creates a handle on `gpu`'s stream.
    pub fn new(gpu: &Gpu) -> Result<Self> {
        // SAFETY: only tries to dlopen the library (cudarc panics on first use when it is missing).
        if !unsafe { cs::is_culib_present() } {
            return Err(Error::LibraryMissing("libcusparse"));
        }
        gpu.context().bind_to_thread().map_err(Error::driver("binding the context", 0))?;
        let mut handle = std::ptr::null_mut();
        // SAFETY: writes a handle; the context is current.
        check("cusparseCreate", unsafe { cs::cusparseCreate(&mut handle) })?;
        let lib = Cusparse { handle };
        // SAFETY: the handle is live; the stream outlives it (both owned by the caller's Gpu).
        check("cusparseSetStream", unsafe {
            cs::cusparseSetStream(lib.handle, gpu.stream().cu_stream() as cs::cudaStream_t)
        })?;
        Ok(lib)
    }
}

impl Drop for Cusparse {
    fn drop(&mut self) {
        // SAFETY: created in new, destroyed once.
        unsafe { cs::cusparseDestroy(self.handle) };
    }
}

/// cuSPARSE's CSR SpMM algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpmmAlg {
    CsrAlg1,
    CsrAlg2,
    CsrAlg3,
}

impl SpmmAlg {
    pub const ALL: [SpmmAlg; 3] = [SpmmAlg::CsrAlg1, SpmmAlg::CsrAlg2, SpmmAlg::CsrAlg3];
    fn raw(self) -> cs::cusparseSpMMAlg_t {
        match self {
            SpmmAlg::CsrAlg1 => cs::cusparseSpMMAlg_t::CUSPARSE_SPMM_CSR_ALG1,
            SpmmAlg::CsrAlg2 => cs::cusparseSpMMAlg_t::CUSPARSE_SPMM_CSR_ALG2,
            SpmmAlg::CsrAlg3 => cs::cusparseSpMMAlg_t::CUSPARSE_SPMM_CSR_ALG3,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            SpmmAlg::CsrAlg1 => "CSR_ALG1",
            SpmmAlg::CsrAlg2 => "CSR_ALG2",
            SpmmAlg::CsrAlg3 => "CSR_ALG3",
        }
    }
}

fn compute_type(dtype: DType) -> cs::cudaDataType {
    if dtype == DType::F64 {
        cs::cudaDataType::CUDA_R_64F
    } else {
        cs::cudaDataType::CUDA_R_32F
    }
}

/// A CSR descriptor over a [`DeviceCsr`] (borrowed for the descriptor's life).
struct CsrDescr<'a> {
    raw: cs::cusparseSpMatDescr_t,
    _a: PhantomData<&'a ()>,
}

impl<'a> CsrDescr<'a> {
    fn new<T: Scalar>(gpu: &Gpu, a: &'a DeviceCsr<T>) -> Result<Self> {
        let stream = gpu.stream();
        let (offsets, _g1) = a.row_offsets.device_ptr(stream);
        let (cols, _g2) = a.column_indices.device_ptr(stream);
        let (vals, _g3) = a.values.device_ptr(stream);
        let mut raw = std::ptr::null_mut();
        // SAFETY: the pointers stay valid while 'a borrows `a`; cuSPARSE only reads through them.
        check("cusparseCreateCsr", unsafe {
            cs::cusparseCreateCsr(
                &mut raw,
                a.rows() as i64,
                a.cols() as i64,
                a.nnz() as i64,
                offsets as *mut c_void,
                cols as *mut c_void,
                vals as *mut c_void,
                cs::cusparseIndexType_t::CUSPARSE_INDEX_32I,
                cs::cusparseIndexType_t::CUSPARSE_INDEX_32I,
                cs::cusparseIndexBase_t::CUSPARSE_INDEX_BASE_ZERO,
                cuda_data_type(T::DTYPE),
            )
        })?;
        Ok(CsrDescr { raw, _a: PhantomData })
    }
}

impl Drop for CsrDescr<'_> {
    fn drop(&mut self) {
        // SAFETY: created in new, destroyed once.
        unsafe { cs::cusparseDestroySpMat(self.raw) };
    }
}

/// A row-major dense descriptor.
struct DnMatDescr<'a> {
    raw: cs::cusparseDnMatDescr_t,
    _b: PhantomData<&'a ()>,
}

impl DnMatDescr<'_> {
    fn new(rows: usize, cols: usize, ptr: u64, dtype: DType) -> Result<Self> {
        let mut raw = std::ptr::null_mut();
        // SAFETY: ptr addresses rows * cols elements that outlive the descriptor (tied by the caller's borrow).
        check("cusparseCreateDnMat", unsafe {
            cs::cusparseCreateDnMat(
                &mut raw,
                rows as i64,
                cols as i64,
                cols as i64,
                ptr as *mut c_void,
                cuda_data_type(dtype),
                cs::cusparseOrder_t::CUSPARSE_ORDER_ROW,
            )
        })?;
        Ok(DnMatDescr { raw, _b: PhantomData })
    }
}

impl Drop for DnMatDescr<'_> {
    fn drop(&mut self) {
        // SAFETY: created in new, destroyed once.
        unsafe { cs::cusparseDestroyDnMat(self.raw) };
    }
}

/// A prepared cuSPARSE SpMM C = A * B (descriptors, workspace and, for ALG3, preprocessing done once),
/// so that [`CusparseSpmm::run`] times only the multiplication.
pub struct CusparseSpmm<'a> {
    lib: &'a Cusparse,
    a: CsrDescr<'a>,
    b: DnMatDescr<'a>,
    c: DnMatDescr<'a>,
    alg: SpmmAlg,
    dtype: DType,
    buffer: CudaSlice<u8>,
}

impl<'a> CusparseSpmm<'a> {
    /// Prepares C = A * B with algorithm `alg`. Fails with [`Error::Cusparse`] where cuSPARSE does not
    /// support the combination.
    pub fn new<T: Scalar>(
        gpu: &Gpu,
        lib: &'a Cusparse,
        a: &'a DeviceCsr<T>,
        b: &'a DeviceDense<T>,
        c: &'a mut DeviceDense<T>,
        alg: SpmmAlg,
    ) -> Result<Self> {
        if a.cols() != b.rows() || c.rows() != a.rows() || c.cols() != b.cols() {
            return Err(Error::ShapeMismatch(format!(
                "A {}x{}, B {}x{}, C {}x{}",
                a.rows(),
                a.cols(),
                b.rows(),
                b.cols(),
                c.rows(),
                c.cols()
            )));
        }
        let stream = gpu.stream();
        let a_d = CsrDescr::new(gpu, a)?;
        let b_d = DnMatDescr::new(b.rows(), b.cols(), b.data.device_ptr(stream).0, T::DTYPE)?;
        let c_d = DnMatDescr::new(c.rows(), c.cols(), c.data.device_ptr_mut(stream).0, T::DTYPE)?;
        let (alpha, beta) = (1f64, 0f64);
        let (alpha32, beta32) = (1f32, 0f32);
        let (pa, pb) = scalars(T::DTYPE, &alpha, &beta, &alpha32, &beta32);
        let mut size = 0usize;
        let op = cs::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE;
        // SAFETY: descriptors and handle are live; alpha/beta point at host scalars of the compute type.
        check("cusparseSpMM_bufferSize", unsafe {
            cs::cusparseSpMM_bufferSize(
                lib.handle,
                op,
                op,
                pa,
                a_d.raw,
                b_d.raw,
                pb,
                c_d.raw,
                compute_type(T::DTYPE),
                alg.raw(),
                &mut size,
            )
        })?;
        let mut buffer = stream
            .alloc_zeros::<u8>(size.max(1))
            .map_err(Error::driver("allocating the cuSPARSE SpMM buffer", size))?;
        if alg == SpmmAlg::CsrAlg3 {
            let (buf, _g) = buffer.device_ptr_mut(stream);
            // SAFETY: as above; buf holds `size` bytes.
            check("cusparseSpMM_preprocess", unsafe {
                cs::cusparseSpMM_preprocess(
                    lib.handle,
                    op,
                    op,
                    pa,
                    a_d.raw,
                    b_d.raw,
                    pb,
                    c_d.raw,
                    compute_type(T::DTYPE),
                    alg.raw(),
                    buf as *mut c_void,
                )
            })?;
        }
        Ok(CusparseSpmm { lib, a: a_d, b: b_d, c: c_d, alg, dtype: T::DTYPE, buffer })
    }

    /// Runs C = A * B on the stream.
    pub fn run(&mut self, gpu: &Gpu) -> Result<()> {
        let (alpha, beta) = (1f64, 0f64);
        let (alpha32, beta32) = (1f32, 0f32);
        let (pa, pb) = scalars(self.dtype, &alpha, &beta, &alpha32, &beta32);
        let op = cs::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE;
        let (buf, _g) = self.buffer.device_ptr_mut(gpu.stream());
        // SAFETY: everything was prepared in new and is still borrowed.
        check("cusparseSpMM", unsafe {
            cs::cusparseSpMM(
                self.lib.handle,
                op,
                op,
                pa,
                self.a.raw,
                self.b.raw,
                pb,
                self.c.raw,
                compute_type(self.dtype),
                self.alg.raw(),
                buf as *mut c_void,
            )
        })
    }

    pub fn alg(&self) -> SpmmAlg {
        self.alg
    }
}

/// Host pointers to alpha and beta in the compute type.
fn scalars(dtype: DType, a64: &f64, b64: &f64, a32: &f32, b32: &f32) -> (*const c_void, *const c_void) {
    if dtype == DType::F64 {
        (a64 as *const f64 as *const c_void, b64 as *const f64 as *const c_void)
    } else {
        (a32 as *const f32 as *const c_void, b32 as *const f32 as *const c_void)
    }
}

/// cuSPARSE's CSR SpMV algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpmvAlg {
    CsrAlg1,
    CsrAlg2,
}

impl SpmvAlg {
    pub const ALL: [SpmvAlg; 2] = [SpmvAlg::CsrAlg1, SpmvAlg::CsrAlg2];
    fn raw(self) -> cs::cusparseSpMVAlg_t {
        match self {
            SpmvAlg::CsrAlg1 => cs::cusparseSpMVAlg_t::CUSPARSE_SPMV_CSR_ALG1,
            SpmvAlg::CsrAlg2 => cs::cusparseSpMVAlg_t::CUSPARSE_SPMV_CSR_ALG2,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            SpmvAlg::CsrAlg1 => "CSR_ALG1",
            SpmvAlg::CsrAlg2 => "CSR_ALG2",
        }
    }
}

/// A dense vector descriptor.
struct DnVecDescr<'a> {
    raw: cs::cusparseDnVecDescr_t,
    _v: PhantomData<&'a ()>,
}

impl DnVecDescr<'_> {
    fn new(len: usize, ptr: u64, dtype: DType) -> Result<Self> {
        let mut raw = std::ptr::null_mut();
        // SAFETY: ptr addresses len elements that outlive the descriptor (tied by the caller's borrow).
        check("cusparseCreateDnVec", unsafe {
            cs::cusparseCreateDnVec(&mut raw, len as i64, ptr as *mut c_void, cuda_data_type(dtype))
        })?;
        Ok(DnVecDescr { raw, _v: PhantomData })
    }
}

impl Drop for DnVecDescr<'_> {
    fn drop(&mut self) {
        // SAFETY: created in new, destroyed once.
        unsafe { cs::cusparseDestroyDnVec(self.raw) };
    }
}

/// A prepared cuSPARSE SpMV y = A x (descriptors and workspace made once), so that [`CusparseSpmv::run`] times
/// only the multiplication.
pub struct CusparseSpmv<'a> {
    lib: &'a Cusparse,
    a: CsrDescr<'a>,
    x: DnVecDescr<'a>,
    y: DnVecDescr<'a>,
    alg: SpmvAlg,
    dtype: DType,
    buffer: CudaSlice<u8>,
}

impl<'a> CusparseSpmv<'a> {
    /// Prepares y = A x with algorithm `alg`. Fails with [`Error::Cusparse`] where cuSPARSE does not support the
    /// combination.
    pub fn new<T: Scalar>(
        gpu: &Gpu,
        lib: &'a Cusparse,
        a: &'a DeviceCsr<T>,
        x: &'a CudaSlice<T>,
        y: &'a mut CudaSlice<T>,
        alg: SpmvAlg,
    ) -> Result<Self> {
        crate::spmv::check_operands(a, x.len(), y.len())?;
        let stream = gpu.stream();
        let a_d = CsrDescr::new(gpu, a)?;
        let x_d = DnVecDescr::new(a.cols(), x.device_ptr(stream).0, T::DTYPE)?;
        let y_d = DnVecDescr::new(a.rows(), y.device_ptr_mut(stream).0, T::DTYPE)?;
        let (alpha, beta) = (1f64, 0f64);
        let (alpha32, beta32) = (1f32, 0f32);
        let (pa, pb) = scalars(T::DTYPE, &alpha, &beta, &alpha32, &beta32);
        let mut size = 0usize;
        // SAFETY: descriptors and handle are live; alpha/beta point at host scalars of the compute type.
        check("cusparseSpMV_bufferSize", unsafe {
            cs::cusparseSpMV_bufferSize(
                lib.handle,
                cs::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE,
                pa,
                a_d.raw,
                x_d.raw,
                pb,
                y_d.raw,
                compute_type(T::DTYPE),
                alg.raw(),
                &mut size,
            )
        })?;
        let buffer = stream
            .alloc_zeros::<u8>(size.max(1))
            .map_err(Error::driver("allocating the cuSPARSE SpMV buffer", size))?;
        Ok(CusparseSpmv { lib, a: a_d, x: x_d, y: y_d, alg, dtype: T::DTYPE, buffer })
    }

    /// Runs y = A x on the stream.
    pub fn run(&mut self, gpu: &Gpu) -> Result<()> {
        let (alpha, beta) = (1f64, 0f64);
        let (alpha32, beta32) = (1f32, 0f32);
        let (pa, pb) = scalars(self.dtype, &alpha, &beta, &alpha32, &beta32);
        let (buf, _g) = self.buffer.device_ptr_mut(gpu.stream());
        // SAFETY: everything was prepared in new and is still borrowed.
        check("cusparseSpMV", unsafe {
            cs::cusparseSpMV(
                self.lib.handle,
                cs::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE,
                pa,
                self.a.raw,
                self.x.raw,
                pb,
                self.y.raw,
                compute_type(self.dtype),
                self.alg.raw(),
                buf as *mut c_void,
            )
        })
    }

    pub fn alg(&self) -> SpmvAlg {
        self.alg
    }
}
