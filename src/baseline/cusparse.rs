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
        crate::spmv::check_operands(gpu, a, x, y)?;
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

/// cuSPARSE's SpGEMM algorithms (`cusparseSpGEMM_*`, CSR x CSR -> CSR).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpgemmAlg {
    /// The default: buffers proportional to the intermediate products.
    Alg1,
    /// Less memory: `cusparseSpGEMM_estimateMemory` sizes the compute buffer.
    Alg2,
    /// Least memory: chunked, with `chunk_fraction` 0.2 (the cuSPARSE sample's value).
    Alg3,
}

impl SpgemmAlg {
    pub const ALL: [SpgemmAlg; 3] = [SpgemmAlg::Alg1, SpgemmAlg::Alg2, SpgemmAlg::Alg3];
    fn raw(self) -> cs::cusparseSpGEMMAlg_t {
        match self {
            SpgemmAlg::Alg1 => cs::cusparseSpGEMMAlg_t::CUSPARSE_SPGEMM_ALG1,
            SpgemmAlg::Alg2 => cs::cusparseSpGEMMAlg_t::CUSPARSE_SPGEMM_ALG2,
            SpgemmAlg::Alg3 => cs::cusparseSpGEMMAlg_t::CUSPARSE_SPGEMM_ALG3,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            SpgemmAlg::Alg1 => "ALG1",
            SpgemmAlg::Alg2 => "ALG2",
            SpgemmAlg::Alg3 => "ALG3",
        }
    }
}

/// An SpGEMM descriptor.
struct SpgemmDescr {
    raw: cs::cusparseSpGEMMDescr_t,
}

impl SpgemmDescr {
    fn new() -> Result<Self> {
        let mut raw = std::ptr::null_mut();
        // SAFETY: writes one handle.
        check("cusparseSpGEMM_createDescr", unsafe { cs::cusparseSpGEMM_createDescr(&mut raw) })?;
        Ok(SpgemmDescr { raw })
    }
}

impl Drop for SpgemmDescr {
    fn drop(&mut self) {
        // SAFETY: created in new, destroyed once.
        unsafe { cs::cusparseSpGEMM_destroyDescr(self.raw) };
    }
}

/// The output matrix's descriptor, made with C's row pointer and no columns or values yet.
struct CsrOutDescr {
    raw: cs::cusparseSpMatDescr_t,
}

impl Drop for CsrOutDescr {
    fn drop(&mut self) {
        // SAFETY: created in spgemm, destroyed once.
        unsafe { cs::cusparseDestroySpMat(self.raw) };
    }
}

fn alloc_bytes(gpu: &Gpu, bytes: usize, what: &'static str) -> Result<CudaSlice<u8>> {
    // SAFETY: cuSPARSE writes its buffers before reading them.
    unsafe { gpu.stream().alloc::<u8>(bytes.max(1)) }.map_err(Error::driver(what, bytes))
}

/// C = A * B with cuSPARSE's SpGEMM and algorithm `alg`, everything included: descriptors, work estimation,
/// the buffers (allocated through the same stream-ordered pool as ours, so the pool's high-water mark measures
/// cuSPARSE's peak too), compute, C's allocation and the copy into it. Sorted columns, 32-bit indices.
pub fn spgemm(
    gpu: &Gpu,
    lib: &Cusparse,
    a: &DeviceCsr<f32>,
    b: &DeviceCsr<f32>,
    alg: SpgemmAlg,
) -> Result<DeviceCsr<f32>> {
    if a.cols() != b.rows() {
        return Err(Error::ShapeMismatch(format!("A {}x{}, B {}x{}", a.rows(), a.cols(), b.rows(), b.cols())));
    }
    let (m, n) = (a.rows(), b.cols());
    let stream = gpu.stream();
    let a_d = CsrDescr::new(gpu, a)?;
    let b_d = CsrDescr::new(gpu, b)?;
    let mut c_offsets =
        stream.alloc_zeros::<i32>(m + 1).map_err(Error::driver("allocating C's row pointer", 4 * (m + 1)))?;
    let c_d = {
        let (offsets, _g) = c_offsets.device_ptr_mut(stream);
        let mut raw = std::ptr::null_mut();
        // SAFETY: offsets holds m + 1 ints and outlives the descriptor (both live to the end of this call).
        check("cusparseCreateCsr (C)", unsafe {
            cs::cusparseCreateCsr(
                &mut raw,
                m as i64,
                n as i64,
                0,
                offsets as *mut c_void,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                cs::cusparseIndexType_t::CUSPARSE_INDEX_32I,
                cs::cusparseIndexType_t::CUSPARSE_INDEX_32I,
                cs::cusparseIndexBase_t::CUSPARSE_INDEX_BASE_ZERO,
                cs::cudaDataType::CUDA_R_32F,
            )
        })?;
        CsrOutDescr { raw }
    };
    let descr = SpgemmDescr::new()?;
    let (alpha, beta) = (1f32, 0f32);
    let (pa, pb) = (&alpha as *const f32 as *const c_void, &beta as *const f32 as *const c_void);
    let op = cs::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE;
    let ty = cs::cudaDataType::CUDA_R_32F;
    let (ra, rb) = (a_d.raw as cs::cusparseConstSpMatDescr_t, b_d.raw as cs::cusparseConstSpMatDescr_t);
    // The sequence below is the cuSPARSE sample's. Each step is called twice, first without a buffer to learn
    // its size. For every call: the handle, descriptors and buffers are live for the whole sequence, each buffer
    // holds the size cuSPARSE asked for, and alpha/beta point at host f32s (the default pointer mode).
    let work_estimation = |size: &mut usize, buffer: *mut c_void| {
        // SAFETY: as above.
        check("cusparseSpGEMM_workEstimation", unsafe {
            cs::cusparseSpGEMM_workEstimation(
                lib.handle,
                op,
                op,
                pa,
                ra,
                rb,
                pb,
                c_d.raw,
                ty,
                alg.raw(),
                descr.raw,
                size,
                buffer,
            )
        })
    };
    let compute = |size: &mut usize, buffer: *mut c_void| {
        // SAFETY: as above.
        check("cusparseSpGEMM_compute", unsafe {
            cs::cusparseSpGEMM_compute(
                lib.handle,
                op,
                op,
                pa,
                ra,
                rb,
                pb,
                c_d.raw,
                ty,
                alg.raw(),
                descr.raw,
                size,
                buffer,
            )
        })
    };
    // ALG2 and ALG3 size the compute buffer from a memory estimate (chunk_fraction 0.2, the sample's value).
    let estimate_memory = |size3: &mut usize, buffer3: *mut c_void, size2: *mut usize| {
        // SAFETY: as above; size2 is null or points at a live usize.
        check("cusparseSpGEMM_estimateMemory", unsafe {
            cs::cusparseSpGEMM_estimateMemory(
                lib.handle,
                op,
                op,
                pa,
                ra,
                rb,
                pb,
                c_d.raw,
                ty,
                alg.raw(),
                descr.raw,
                0.2,
                size3,
                buffer3,
                size2,
            )
        })
    };
    let null = std::ptr::null_mut();
    let mut size1 = 0usize;
    work_estimation(&mut size1, null)?;
    let mut buffer1 = alloc_bytes(gpu, size1, "allocating cuSPARSE SpGEMM buffer 1")?;
    work_estimation(&mut size1, buffer1.device_ptr_mut(stream).0 as *mut c_void)?;
    let mut size2 = 0usize;
    if alg == SpgemmAlg::Alg1 {
        compute(&mut size2, null)?;
    } else {
        let mut size3 = 0usize;
        estimate_memory(&mut size3, null, std::ptr::null_mut())?;
        let mut buffer3 = alloc_bytes(gpu, size3, "allocating cuSPARSE SpGEMM buffer 3")?;
        estimate_memory(&mut size3, buffer3.device_ptr_mut(stream).0 as *mut c_void, &mut size2)?;
        // buffer3 is released here, as in the cuSPARSE sample.
    }
    let mut buffer2 = alloc_bytes(gpu, size2, "allocating cuSPARSE SpGEMM buffer 2")?;
    compute(&mut size2, buffer2.device_ptr_mut(stream).0 as *mut c_void)?;
    let (mut rows, mut cols, mut nnz) = (0i64, 0i64, 0i64);
    // SAFETY: see the sequence comment above; every pointer is live for this call.
    check("cusparseSpMatGetSize", unsafe { cs::cusparseSpMatGetSize(c_d.raw, &mut rows, &mut cols, &mut nnz) })?;
    let nnz = usize::try_from(nnz).map_err(|_| Error::TooLarge(format!("cuSPARSE reported nnz(C) = {nnz}")))?;
    if nnz > i32::MAX as usize {
        return Err(Error::TooLarge(format!("A * B has {nnz} entries, past 32-bit indices")));
    }
    // SAFETY: cusparseSpGEMM_copy writes all nnz entries of both.
    let mut columns =
        unsafe { stream.alloc::<i32>(nnz.max(1)) }.map_err(Error::driver("allocating C's column indices", 4 * nnz))?;
    // SAFETY: as above.
    let mut values =
        unsafe { stream.alloc::<f32>(nnz.max(1)) }.map_err(Error::driver("allocating C's values", 4 * nnz))?;
    {
        let (offsets, _g1) = c_offsets.device_ptr_mut(stream);
        let (cols_ptr, _g2) = columns.device_ptr_mut(stream);
        let (vals_ptr, _g3) = values.device_ptr_mut(stream);
        // SAFETY: see the sequence comment above; every pointer is live for this call.
        check("cusparseCsrSetPointers", unsafe {
            cs::cusparseCsrSetPointers(
                c_d.raw,
                offsets as *mut c_void,
                cols_ptr as *mut c_void,
                vals_ptr as *mut c_void,
            )
        })?;
        // SAFETY: see the sequence comment above; every pointer is live for this call.
        check("cusparseSpGEMM_copy", unsafe {
            cs::cusparseSpGEMM_copy(lib.handle, op, op, pa, ra, rb, pb, c_d.raw, ty, alg.raw(), descr.raw)
        })?;
    }
    drop((buffer1, buffer2, descr, c_d));
    Ok(DeviceCsr::from_device_parts(m, n, nnz, c_offsets, columns, values))
}
