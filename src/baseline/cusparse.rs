//! A small safe wrapper over the cuSPARSE generic API: SpMM and SpMV on CSR with row-major dense operands (SpMM also
//! with A transposed), SpMM on BSR and Blocked-ELL (the block-sparse baselines), the CSR to CSC conversion, and
//! SDDMM.

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
use crate::spmm::{DenseLayouts, Layout};

const NON_TRANSPOSE: cs::cusparseOperation_t = cs::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE;

fn check(what: &'static str, status: cs::cusparseStatus_t) -> Result<()> {
    if status == cs::cusparseStatus_t::CUSPARSE_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(Error::Cusparse { what, status })
    }
}

/// A cuSPARSE handle bound to the [`Gpu`]'s stream (or to another stream, [`Cusparse::on_stream`]).
pub struct Cusparse {
    handle: cs::cusparseHandle_t,
    /// The stream of [`Cusparse::on_stream`], kept alive as long as the handle.
    _stream: Option<std::sync::Arc<cudarc::driver::CudaStream>>,
}

impl Cusparse {
    /// Loads libcusparse and creates a handle on `gpu`'s stream.
    pub fn new(gpu: &Gpu) -> Result<Self> {
        Self::make(gpu, None)
    }

    /// A handle whose operations run on `stream`, a stream of `gpu`'s context (kept alive with the handle): the
    /// baseline of products run side by side ([`crate::spmm_concurrent`]). Its work is not ordered against `gpu`'s
    /// stream: the caller orders it with events, before and after. [`CusparseSpmm::run_bias_relu`]'s pass runs on
    /// `gpu`'s stream, so use it only on a handle of [`Cusparse::new`].
    pub fn on_stream(gpu: &Gpu, stream: &std::sync::Arc<cudarc::driver::CudaStream>) -> Result<Self> {
        Self::make(gpu, Some(stream.clone()))
    }

    fn make(gpu: &Gpu, stream: Option<std::sync::Arc<cudarc::driver::CudaStream>>) -> Result<Self> {
        // SAFETY: only tries to dlopen the library (cudarc panics on first use when it is missing).
        if !unsafe { cs::is_culib_present() } {
            return Err(Error::LibraryMissing("libcusparse"));
        }
        gpu.context().bind_to_thread().map_err(Error::driver("binding the context", 0))?;
        let mut handle = std::ptr::null_mut();
        // SAFETY: writes a handle; the context is current.
        check("cusparseCreate", unsafe { cs::cusparseCreate(&mut handle) })?;
        let cu_stream = stream.as_ref().unwrap_or(gpu.stream()).cu_stream();
        let lib = Cusparse { handle, _stream: stream };
        // SAFETY: the handle is live; the stream outlives it (the caller's Gpu's, or held by the handle).
        check("cusparseSetStream", unsafe { cs::cusparseSetStream(lib.handle, cu_stream as cs::cudaStream_t) })?;
        Ok(lib)
    }
}

impl Drop for Cusparse {
    fn drop(&mut self) {
        // SAFETY: created in new, destroyed once.
        unsafe { cs::cusparseDestroy(self.handle) };
    }
}

/// cuSPARSE's SpMM algorithms: the three on CSR, the one on BSR ([`CusparseSpmm::new_bsr`]) and the one on
/// Blocked-ELL ([`CusparseSpmm::new_blocked_ell`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpmmAlg {
    CsrAlg1,
    CsrAlg2,
    CsrAlg3,
    BsrAlg1,
    BlockedEllAlg1,
}

impl SpmmAlg {
    /// The CSR algorithms.
    pub const ALL: [SpmmAlg; 3] = [SpmmAlg::CsrAlg1, SpmmAlg::CsrAlg2, SpmmAlg::CsrAlg3];
    fn raw(self) -> cs::cusparseSpMMAlg_t {
        match self {
            SpmmAlg::CsrAlg1 => cs::cusparseSpMMAlg_t::CUSPARSE_SPMM_CSR_ALG1,
            SpmmAlg::CsrAlg2 => cs::cusparseSpMMAlg_t::CUSPARSE_SPMM_CSR_ALG2,
            SpmmAlg::CsrAlg3 => cs::cusparseSpMMAlg_t::CUSPARSE_SPMM_CSR_ALG3,
            SpmmAlg::BsrAlg1 => cs::cusparseSpMMAlg_t::CUSPARSE_SPMM_BSR_ALG1,
            SpmmAlg::BlockedEllAlg1 => cs::cusparseSpMMAlg_t::CUSPARSE_SPMM_BLOCKED_ELL_ALG1,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            SpmmAlg::CsrAlg1 => "CSR_ALG1",
            SpmmAlg::CsrAlg2 => "CSR_ALG2",
            SpmmAlg::CsrAlg3 => "CSR_ALG3",
            SpmmAlg::BsrAlg1 => "BSR_ALG1",
            SpmmAlg::BlockedEllAlg1 => "BLOCKED_ELL_ALG1",
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

/// A dense descriptor over a [`DeviceDense`] in either layout.
struct DnMatDescr<'a> {
    raw: cs::cusparseDnMatDescr_t,
    _b: PhantomData<&'a ()>,
}

impl DnMatDescr<'_> {
    /// `ptr` holds the stored `rows x cols` row-major matrix: the matrix itself where `layout` is row-major, its
    /// transpose (the column-major `cols x rows` matrix) where it is column-major.
    fn new(rows: usize, cols: usize, ptr: u64, dtype: DType, layout: Layout) -> Result<Self> {
        let (order, logical_rows, logical_cols) = match layout {
            Layout::RowMajor => (cs::cusparseOrder_t::CUSPARSE_ORDER_ROW, rows, cols),
            Layout::ColMajor => (cs::cusparseOrder_t::CUSPARSE_ORDER_COL, cols, rows),
        };
        let mut raw = std::ptr::null_mut();
        // SAFETY: ptr addresses rows * cols elements that outlive the descriptor (tied by the caller's borrow); the
        // leading dimension is the stored rows' length in either order.
        check("cusparseCreateDnMat", unsafe {
            cs::cusparseCreateDnMat(
                &mut raw,
                logical_rows as i64,
                logical_cols as i64,
                cols as i64,
                ptr as *mut c_void,
                cuda_data_type(dtype),
                order,
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

/// The sparse operand of [`CusparseSpmm`]: a descriptor over a borrowed [`DeviceCsr`], or a BSR or Blocked-ELL
/// matrix it owns.
enum SparseA<'a> {
    Csr(CsrDescr<'a>),
    Blocked(BlockedDescr),
}

impl SparseA<'_> {
    fn raw(&self) -> cs::cusparseSpMatDescr_t {
        match self {
            SparseA::Csr(d) => d.raw,
            SparseA::Blocked(d) => d.raw,
        }
    }
}

/// A prepared cuSPARSE SpMM C = A * B (descriptors, workspace and, for ALG3, preprocessing done once),
/// so that [`CusparseSpmm::run`] times only the multiplication.
pub struct CusparseSpmm<'a> {
    lib: &'a Cusparse,
    a: SparseA<'a>,
    b: DnMatDescr<'a>,
    c: DnMatDescr<'a>,
    alg: SpmmAlg,
    /// op(A): A, or A^T ([`CusparseSpmm::new_transposed`]).
    op_a: cs::cusparseOperation_t,
    dtype: DType,
    buffer: CudaSlice<u8>,
    /// C's device address, rows and columns, for [`CusparseSpmm::run_bias_relu`]'s pass over it.
    c_out: (u64, usize, usize),
    /// C's layout: the bias + ReLU pass takes a row-major C only.
    c_layout: Layout,
}

/// The form of a [`CusparseSpmm`]'s product: op(A), and B's and C's layouts.
#[derive(Clone, Copy)]
struct Form {
    op_a: cs::cusparseOperation_t,
    layouts: DenseLayouts,
}

impl Form {
    /// C = A * B, B and C row-major.
    const PLAIN: Form = Form { op_a: NON_TRANSPOSE, layouts: DenseLayouts::ROW_MAJOR };
}

/// `ShapeMismatch` unless A (m x k) * B fits C.
fn check_spmm_shapes<T: Scalar>(m: usize, k: usize, b: &DeviceDense<T>, c: &DeviceDense<T>) -> Result<()> {
    if k != b.rows() || c.rows() != m || c.cols() != b.cols() {
        return Err(Error::ShapeMismatch(format!(
            "A {m}x{k}, B {}x{}, C {}x{}",
            b.rows(),
            b.cols(),
            c.rows(),
            c.cols()
        )));
    }
    Ok(())
}

impl<'a> CusparseSpmm<'a> {
    /// Prepares C = A * B with the CSR algorithm `alg`. Fails with [`Error::Cusparse`] where cuSPARSE does not
    /// support the combination (or `alg` is not a CSR algorithm).
    pub fn new<T: Scalar>(
        gpu: &Gpu,
        lib: &'a Cusparse,
        a: &'a DeviceCsr<T>,
        b: &'a DeviceDense<T>,
        c: &'a mut DeviceDense<T>,
        alg: SpmmAlg,
    ) -> Result<Self> {
        Self::new_with_layouts(gpu, lib, a, b, c, alg, DenseLayouts::ROW_MAJOR)
    }

    /// Prepares C = A * B with the CSR algorithm `alg` and B and C in `layouts` (`CUSPARSE_ORDER_COL` for a
    /// column-major one, passed as the [`DeviceDense`] of its transpose, as [`crate::spmm::spmm_layouts`] takes it):
    /// the baseline of that function. Fails as [`CusparseSpmm::new`] does, and with [`Error::ShapeMismatch`] where
    /// the shapes do not fit as their layouts have them.
    pub fn new_with_layouts<T: Scalar>(
        gpu: &Gpu,
        lib: &'a Cusparse,
        a: &'a DeviceCsr<T>,
        b: &'a DeviceDense<T>,
        c: &'a mut DeviceDense<T>,
        alg: SpmmAlg,
        layouts: DenseLayouts,
    ) -> Result<Self> {
        crate::spmm::layout::check_layout_shapes(a, b, c, layouts)?;
        Self::prepare(gpu, lib, SparseA::Csr(CsrDescr::new(gpu, a)?), b, c, alg, Form { op_a: NON_TRANSPOSE, layouts })
    }

    /// Prepares C = A^T * B with the CSR algorithm `alg` and `CUSPARSE_OPERATION_TRANSPOSE` on A (m x k; B is m x n,
    /// C k x n): what a cuSPARSE user writes for a product with the transpose, the baseline of
    /// [`crate::DeviceCsr::transpose`]. cuSPARSE documents that results with A transposed may differ from run to
    /// run. Fails as [`CusparseSpmm::new`] does (ALG3 does not take A transposed).
    pub fn new_transposed<T: Scalar>(
        gpu: &Gpu,
        lib: &'a Cusparse,
        a: &'a DeviceCsr<T>,
        b: &'a DeviceDense<T>,
        c: &'a mut DeviceDense<T>,
        alg: SpmmAlg,
    ) -> Result<Self> {
        check_spmm_shapes(a.cols(), a.rows(), b, c)?;
        let transpose = cs::cusparseOperation_t::CUSPARSE_OPERATION_TRANSPOSE;
        Self::prepare(
            gpu,
            lib,
            SparseA::Csr(CsrDescr::new(gpu, a)?),
            b,
            c,
            alg,
            Form { op_a: transpose, layouts: DenseLayouts::ROW_MAJOR },
        )
    }

    /// Uploads `a` and prepares C = A * B with A in BSR (`CUSPARSE_SPMM_BSR_ALG1`, row-major B and C): the baseline a
    /// user with block-sparse rows would also try. Fails as [`CusparseSpmm::new`] does.
    pub fn new_bsr<T: Scalar>(
        gpu: &Gpu,
        lib: &'a Cusparse,
        a: &HostBsr<T>,
        b: &'a DeviceDense<T>,
        c: &'a mut DeviceDense<T>,
    ) -> Result<Self> {
        check_spmm_shapes(a.block_rows * a.block, a.block_cols * a.block, b, c)?;
        let bsr = SparseA::Blocked(BlockedDescr::bsr(gpu, a)?);
        Self::prepare(gpu, lib, bsr, b, c, SpmmAlg::BsrAlg1, Form::PLAIN)
    }

    /// Uploads `a` and prepares C = A * B with A in Blocked-ELL (`CUSPARSE_SPMM_BLOCKED_ELL_ALG1`, row-major B and
    /// C): cuSPARSE's tensor-core path for block-sparse A. Fails as [`CusparseSpmm::new`] does.
    pub fn new_blocked_ell<T: Scalar>(
        gpu: &Gpu,
        lib: &'a Cusparse,
        a: &HostBlockedEll<T>,
        b: &'a DeviceDense<T>,
        c: &'a mut DeviceDense<T>,
    ) -> Result<Self> {
        check_spmm_shapes(a.rows, a.cols, b, c)?;
        let blocked = SparseA::Blocked(BlockedDescr::blocked_ell(gpu, a)?);
        Self::prepare(gpu, lib, blocked, b, c, SpmmAlg::BlockedEllAlg1, Form::PLAIN)
    }

    /// The dense descriptors, the workspace and (ALG3) the preprocessing, for shapes already checked.
    fn prepare<T: Scalar>(
        gpu: &Gpu,
        lib: &'a Cusparse,
        a_d: SparseA<'a>,
        b: &'a DeviceDense<T>,
        c: &'a mut DeviceDense<T>,
        alg: SpmmAlg,
        form: Form,
    ) -> Result<Self> {
        let Form { op_a, layouts } = form;
        let stream = gpu.stream();
        let b_d = DnMatDescr::new(b.rows(), b.cols(), b.data.device_ptr(stream).0, T::DTYPE, layouts.b)?;
        let c_ptr = c.data.device_ptr_mut(stream).0;
        let c_d = DnMatDescr::new(c.rows(), c.cols(), c_ptr, T::DTYPE, layouts.c)?;
        let (alpha, beta) = (1f64, 0f64);
        let (alpha32, beta32) = (1f32, 0f32);
        let (pa, pb) = scalars(T::DTYPE, &alpha, &beta, &alpha32, &beta32);
        let mut size = 0usize;
        // SAFETY: descriptors and handle are live; alpha/beta point at host scalars of the compute type.
        check("cusparseSpMM_bufferSize", unsafe {
            cs::cusparseSpMM_bufferSize(
                lib.handle,
                op_a,
                NON_TRANSPOSE,
                pa,
                a_d.raw(),
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
                    op_a,
                    NON_TRANSPOSE,
                    pa,
                    a_d.raw(),
                    b_d.raw,
                    pb,
                    c_d.raw,
                    compute_type(T::DTYPE),
                    alg.raw(),
                    buf as *mut c_void,
                )
            })?;
        }
        let c_out = (c_ptr, c.rows(), c.cols());
        let c_layout = layouts.c;
        Ok(CusparseSpmm { lib, a: a_d, b: b_d, c: c_d, alg, op_a, dtype: T::DTYPE, buffer, c_out, c_layout })
    }

    /// Runs C = A * B on the stream.
    pub fn run(&mut self, gpu: &Gpu) -> Result<()> {
        self.run_scaled(gpu, 1.0, 0.0)
    }

    /// Runs C = alpha * A * B + beta * C on the stream (cuSPARSE's own scalars, in its compute type: f32, f64 for
    /// f64), the baseline of the library's fused scalars (`crate::spmm::SpmmEpilogue`).
    pub fn run_scaled(&mut self, gpu: &Gpu, alpha: f32, beta: f32) -> Result<()> {
        let (alpha64, beta64) = (alpha as f64, beta as f64);
        let (pa, pb) = scalars(self.dtype, &alpha64, &beta64, &alpha, &beta);
        let (buf, _g) = self.buffer.device_ptr_mut(gpu.stream());
        // SAFETY: everything was prepared in new and is still borrowed or owned.
        check("cusparseSpMM", unsafe {
            cs::cusparseSpMM(
                self.lib.handle,
                self.op_a,
                NON_TRANSPOSE,
                pa,
                self.a.raw(),
                self.b.raw,
                pb,
                self.c.raw,
                compute_type(self.dtype),
                self.alg.raw(),
                buf as *mut c_void,
            )
        })
    }

    /// Runs C = ReLU(A * B + bias) on the stream as a user of cuSPARSE would: the SpMM, then the bias + ReLU
    /// pass over C ([`super::epilogue::bias_relu_pass`]). A bias that is not one f32 per row of C is
    /// `ShapeMismatch`, f64 `UnsupportedDtype` and a column-major C `Usage`, before the SpMM runs.
    pub fn run_bias_relu(&mut self, gpu: &Gpu, bias: &CudaSlice<f32>) -> Result<()> {
        if self.c_layout != Layout::RowMajor {
            return Err(Error::Usage("the bias + ReLU pass after cuSPARSE's SpMM takes a row-major C".into()));
        }
        let (c, rows, cols) = self.c_out;
        super::epilogue::check_pass(gpu, bias, rows, cols, self.dtype)?;
        self.run(gpu)?;
        // SAFETY: `c` addresses C's rows x cols elements of `self.dtype`, borrowed mutably for this op's lifetime.
        unsafe { super::epilogue::launch_pass(gpu, c, rows, cols, self.dtype, bias) }
    }

    pub fn alg(&self) -> SpmmAlg {
        self.alg
    }
}

/// A matrix in block sparse row form, square blocks of `block` x `block` stored row-major inside (cuSPARSE's
/// `CUSPARSE_ORDER_ROW`), zeros where the CSR stores nothing: the input of the cuSPARSE BSR baseline
/// ([`CusparseSpmm::new_bsr`]). Built on the host from a CSR whose rows and columns are multiples of the block.
#[derive(Clone, Debug, PartialEq)]
pub struct HostBsr<T> {
    /// Rows (and columns) per block.
    pub block: usize,
    /// Rows of blocks: the CSR's rows / `block`.
    pub block_rows: usize,
    /// Columns of blocks: the CSR's columns / `block`.
    pub block_cols: usize,
    /// Per row of blocks, where its blocks start in `columns` (`block_rows` + 1 entries).
    pub offsets: Vec<i32>,
    /// The block column of each stored block, ascending within a row of blocks.
    pub columns: Vec<i32>,
    /// `block` * `block` values per stored block, row-major.
    pub values: Vec<T>,
}

impl<T: Scalar> HostBsr<T> {
    /// The blocks of `a` holding at least one stored entry (a stored zero keeps its block). `InvalidConfig` where
    /// `block` is 0 or does not divide both dimensions, `TooLarge` where the blocks' values would not fit i32 offsets.
    pub fn from_csr(a: sprs::CsMatView<'_, T>, block: usize) -> Result<Self> {
        let (m, k) = (a.rows(), a.cols());
        if block == 0 || m % block != 0 || k % block != 0 {
            return Err(Error::InvalidConfig {
                config: format!("BSR blocks of {block} x {block} for a {m} x {k} matrix"),
                rule: "the block must divide both dimensions".into(),
            });
        }
        let (block_rows, block_cols) = (m / block, k / block);
        let csr;
        let a = if a.is_csr() {
            a
        } else {
            csr = a.to_csr();
            csr.view()
        };
        // Per row of blocks: its block columns (a stamp per block column), then each entry's place.
        let mut slot = vec![usize::MAX; block_cols];
        let mut stamp = vec![usize::MAX; block_cols];
        let (mut offsets, mut columns, mut values) = (vec![0i32], Vec::new(), Vec::new());
        for br in 0..block_rows {
            let first = columns.len();
            for r in br * block..(br + 1) * block {
                let Some(row) = a.outer_view(r) else { continue };
                for &c in row.indices() {
                    if stamp[c / block] != br {
                        stamp[c / block] = br;
                        columns.push((c / block) as i32);
                    }
                }
            }
            columns[first..].sort_unstable();
            for (i, &bc) in columns[first..].iter().enumerate() {
                slot[bc as usize] = first + i;
            }
            values.resize(columns.len() * block * block, T::default());
            for r in br * block..(br + 1) * block {
                if let Some(row) = a.outer_view(r) {
                    for (c, &v) in row.iter() {
                        values[slot[c / block] * block * block + (r % block) * block + c % block] = v;
                    }
                }
            }
            if values.len() > i32::MAX as usize {
                return Err(Error::TooLarge(format!("BSR blocks of {block} x {block}: more than 2^31 values")));
            }
            offsets.push(columns.len() as i32);
        }
        Ok(HostBsr { block, block_rows, block_cols, offsets, columns, values })
    }

    /// The share of the stored blocks' slots that `nnz` entries fill (0 without blocks).
    pub fn fill(&self, nnz: usize) -> f64 {
        if self.columns.is_empty() {
            return 0.0;
        }
        nnz as f64 / (self.columns.len() * self.block * self.block) as f64
    }
}

/// A matrix in Blocked-ELL form (cuSPARSE's `cusparseCreateBlockedEll`): every row of blocks holds the same number
/// of `block` x `block` blocks, padded with block column -1; the values are a rows x `ell_cols` row-major array
/// whose columns j * block .. (j + 1) * block hold the j-th block of each row of blocks. Built on the host from a
/// [`HostBsr`]; the input of [`CusparseSpmm::new_blocked_ell`].
#[derive(Clone, Debug, PartialEq)]
pub struct HostBlockedEll<T> {
    pub block: usize,
    pub rows: usize,
    pub cols: usize,
    /// Columns of `values`: the most blocks any row of blocks holds, times `block`.
    pub ell_cols: usize,
    /// (rows / block) x (ell_cols / block), row-major: each slot's block column, -1 for padding.
    pub columns: Vec<i32>,
    /// rows x ell_cols, row-major; zeros in padding and where A stores nothing.
    pub values: Vec<T>,
}

impl<T: Scalar> HostBlockedEll<T> {
    /// The blocks of `bsr`, each row of blocks padded to the longest. `TooLarge` where the values would not fit i32
    /// offsets.
    pub fn from_bsr(bsr: &HostBsr<T>) -> Result<Self> {
        let b = bsr.block;
        let widest = bsr.offsets.windows(2).map(|w| (w[1] - w[0]) as usize).max().unwrap_or(0);
        let (rows, ell_cols) = (bsr.block_rows * b, widest * b);
        if rows.saturating_mul(ell_cols) > i32::MAX as usize {
            return Err(Error::TooLarge(format!("Blocked-ELL of {rows} x {ell_cols} values: more than 2^31")));
        }
        let mut columns = vec![-1i32; bsr.block_rows * widest];
        let mut values = vec![T::default(); rows * ell_cols];
        for br in 0..bsr.block_rows {
            let first = bsr.offsets[br] as usize;
            for (slot, i) in (first..bsr.offsets[br + 1] as usize).enumerate() {
                columns[br * widest + slot] = bsr.columns[i];
                for r in 0..b {
                    let src = &bsr.values[(i * b + r) * b..(i * b + r + 1) * b];
                    let at = (br * b + r) * ell_cols + slot * b;
                    values[at..at + b].copy_from_slice(src);
                }
            }
        }
        Ok(HostBlockedEll { block: b, rows, cols: bsr.block_cols * b, ell_cols, columns, values })
    }

    /// The share of the stored slots (padding included) that `nnz` entries fill (0 without slots).
    pub fn fill(&self, nnz: usize) -> f64 {
        if self.values.is_empty() {
            return 0.0;
        }
        nnz as f64 / self.values.len() as f64
    }
}

/// A BSR or Blocked-ELL matrix on the device with its cuSPARSE descriptor (which borrows the arrays it owns).
struct BlockedDescr {
    raw: cs::cusparseSpMatDescr_t,
    _offsets: Option<CudaSlice<i32>>,
    _columns: CudaSlice<i32>,
    _values: CudaSlice<u8>,
}

impl BlockedDescr {
    /// The columns and values uploaded (a value array is never empty: cuSPARSE is given a valid pointer).
    fn upload<T: Scalar>(gpu: &Gpu, columns: &[i32], values: &[T]) -> Result<(CudaSlice<i32>, CudaSlice<u8>)> {
        let columns = crate::csr::upload_slice(gpu, columns, "uploading blocked column indices")?;
        let bytes: &[u8] = bytemuck::cast_slice(values);
        let values = crate::csr::upload_slice(gpu, bytes, "uploading blocked values")?;
        Ok((columns, values))
    }

    fn bsr<T: Scalar>(gpu: &Gpu, a: &HostBsr<T>) -> Result<Self> {
        let offsets = crate::csr::upload_slice(gpu, &a.offsets, "uploading BSR offsets")?;
        let (columns, values) = Self::upload(gpu, &a.columns, &a.values)?;
        let stream = gpu.stream();
        let mut raw = std::ptr::null_mut();
        {
            let (o, _g1) = offsets.device_ptr(stream);
            let (c, _g2) = columns.device_ptr(stream);
            let (v, _g3) = values.device_ptr(stream);
            // SAFETY: the arrays live as long as the descriptor (fields of the same struct, dropped after it);
            // cuSPARSE only reads through them. Sizes: block_rows + 1 offsets, one column per block, block^2 values
            // per block of T.
            check("cusparseCreateBsr", unsafe {
                cs::cusparseCreateBsr(
                    &mut raw,
                    a.block_rows as i64,
                    a.block_cols as i64,
                    a.columns.len() as i64,
                    a.block as i64,
                    a.block as i64,
                    o as *mut c_void,
                    c as *mut c_void,
                    v as *mut c_void,
                    cs::cusparseIndexType_t::CUSPARSE_INDEX_32I,
                    cs::cusparseIndexType_t::CUSPARSE_INDEX_32I,
                    cs::cusparseIndexBase_t::CUSPARSE_INDEX_BASE_ZERO,
                    cuda_data_type(T::DTYPE),
                    cs::cusparseOrder_t::CUSPARSE_ORDER_ROW,
                )
            })?;
        }
        Ok(BlockedDescr { raw, _offsets: Some(offsets), _columns: columns, _values: values })
    }

    fn blocked_ell<T: Scalar>(gpu: &Gpu, a: &HostBlockedEll<T>) -> Result<Self> {
        let (columns, values) = Self::upload(gpu, &a.columns, &a.values)?;
        let stream = gpu.stream();
        let mut raw = std::ptr::null_mut();
        {
            let (c, _g1) = columns.device_ptr(stream);
            let (v, _g2) = values.device_ptr(stream);
            // SAFETY: as in `bsr`. Sizes: (rows / block) x (ell_cols / block) block columns (each < cols / block
            // or -1), rows x ell_cols values of T.
            check("cusparseCreateBlockedEll", unsafe {
                cs::cusparseCreateBlockedEll(
                    &mut raw,
                    a.rows as i64,
                    a.cols as i64,
                    a.block as i64,
                    a.ell_cols as i64,
                    c as *mut c_void,
                    v as *mut c_void,
                    cs::cusparseIndexType_t::CUSPARSE_INDEX_32I,
                    cs::cusparseIndexBase_t::CUSPARSE_INDEX_BASE_ZERO,
                    cuda_data_type(T::DTYPE),
                )
            })?;
        }
        Ok(BlockedDescr { raw, _offsets: None, _columns: columns, _values: values })
    }
}

impl Drop for BlockedDescr {
    fn drop(&mut self) {
        // SAFETY: created in new, destroyed once, before the arrays it reads (fields dropped after this).
        unsafe { cs::cusparseDestroySpMat(self.raw) };
    }
}

/// A prepared cuSPARSE CSR to CSC conversion of a [`DeviceCsr`] A (`cusparseCsr2cscEx2`, values included): A's CSC
/// form is A^T's CSR, so this is cuSPARSE's way to transpose A on the device, the baseline of
/// [`crate::DeviceCsr::transpose`]. The output and the workspace are allocated once; [`CusparseCsr2Csc::run`]
/// times only the conversion.
pub struct CusparseCsr2Csc<'a, T: Scalar> {
    lib: &'a Cusparse,
    a: &'a DeviceCsr<T>,
    /// A^T's row pointer (cols + 1), column indices and values (nnz; one element where nnz is 0).
    col_ptr: CudaSlice<i32>,
    row_ind: CudaSlice<i32>,
    values: CudaSlice<T>,
    buffer: CudaSlice<u8>,
}

impl<'a, T: Scalar> CusparseCsr2Csc<'a, T> {
    /// Allocates A^T's arrays and cuSPARSE's workspace for A.
    pub fn new(gpu: &Gpu, lib: &'a Cusparse, a: &'a DeviceCsr<T>) -> Result<Self> {
        let stream = gpu.stream();
        let index = |len: usize, what| stream.alloc_zeros::<i32>(len.max(1)).map_err(Error::driver(what, 4 * len));
        let col_ptr = index(a.cols() + 1, "allocating the CSC column pointer")?;
        let row_ind = index(a.nnz(), "allocating the CSC row indices")?;
        let bytes = a.nnz().max(1) * std::mem::size_of::<T>();
        let values =
            stream.alloc_zeros::<T>(a.nnz().max(1)).map_err(Error::driver("allocating the CSC values", bytes))?;
        let buffer = stream.alloc_zeros::<u8>(1).map_err(Error::driver("allocating the csr2csc buffer", 1))?;
        let mut conversion = CusparseCsr2Csc { lib, a, col_ptr, row_ind, values, buffer };
        let mut size = 0usize;
        conversion.call(gpu, Some(&mut size))?;
        conversion.buffer =
            stream.alloc_zeros::<u8>(size.max(1)).map_err(Error::driver("allocating the csr2csc buffer", size))?;
        Ok(conversion)
    }

    /// Converts A on the stream.
    pub fn run(&mut self, gpu: &Gpu) -> Result<()> {
        self.call(gpu, None)
    }

    /// A^T's row pointer, column indices and values, as the last run left them.
    pub fn download(&self, gpu: &Gpu) -> Result<(Vec<i32>, Vec<i32>, Vec<T>)> {
        let nnz = self.a.nnz();
        let read = |what| Error::driver(what, 0);
        let stream = gpu.stream();
        Ok((
            stream.clone_dtoh(&self.col_ptr).map_err(read("downloading the CSC column pointer"))?,
            stream.clone_dtoh(&self.row_ind.slice(..nnz)).map_err(read("downloading the CSC row indices"))?,
            stream.clone_dtoh(&self.values.slice(..nnz)).map_err(read("downloading the CSC values"))?,
        ))
    }

    /// The workspace's size into `size`, or (None) the conversion.
    fn call(&mut self, gpu: &Gpu, size: Option<&mut usize>) -> Result<()> {
        let (stream, a) = (gpu.stream(), self.a);
        let (offsets, _g1) = a.row_offsets.device_ptr(stream);
        let (columns, _g2) = a.column_indices.device_ptr(stream);
        let (values, _g3) = a.values.device_ptr(stream);
        let (col_ptr, _g4) = self.col_ptr.device_ptr_mut(stream);
        let (row_ind, _g5) = self.row_ind.device_ptr_mut(stream);
        let (csc_values, _g6) = self.values.device_ptr_mut(stream);
        // Sizes fit in i32: checked at upload.
        let (m, n, nnz) = (a.rows() as i32, a.cols() as i32, a.nnz() as i32);
        let numeric = cs::cusparseAction_t::CUSPARSE_ACTION_NUMERIC;
        let base = cs::cusparseIndexBase_t::CUSPARSE_INDEX_BASE_ZERO;
        let alg = cs::cusparseCsr2CscAlg_t::CUSPARSE_CSR2CSC_ALG_DEFAULT;
        let dtype = cuda_data_type(T::DTYPE);
        // Both calls take the same fourteen arguments, then the workspace's size (bufferSize) or the workspace.
        macro_rules! csr2csc {
            ($call:ident, $last:expr) => {{
                let last = $last;
                // SAFETY: A's arrays hold rows + 1 and nnz elements, the CSC arrays cols + 1 and nnz (at least one
                // each), all live while self borrows A and owns them; `last` is `size`, which cuSPARSE only writes,
                // or the workspace of the size cuSPARSE asked for in new.
                check(stringify!($call), unsafe {
                    cs::$call(
                        self.lib.handle,
                        m,
                        n,
                        nnz,
                        values as *const c_void,
                        offsets as *const i32,
                        columns as *const i32,
                        csc_values as *mut c_void,
                        col_ptr as *mut i32,
                        row_ind as *mut i32,
                        dtype,
                        numeric,
                        base,
                        alg,
                        last,
                    )
                })
            }};
        }
        match size {
            Some(size) => csr2csc!(cusparseCsr2cscEx2_bufferSize, size),
            None => {
                let (buffer, _g7) = self.buffer.device_ptr_mut(stream);
                csr2csc!(cusparseCsr2cscEx2, buffer as *mut c_void)
            }
        }
    }
}

/// How [`CusparseSddmm`] gives cuSPARSE SDDMM's B, stored n x k row-major (as [`crate::sddmm()`] takes it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SddmmForm {
    /// As the k x n column-major matrix those bytes are, op(B) = B.
    ColMajor,
    /// As the n x k row-major matrix, op(B) = B^T.
    Transposed,
}

impl SddmmForm {
    pub const ALL: [SddmmForm; 2] = [SddmmForm::ColMajor, SddmmForm::Transposed];

    pub fn name(self) -> &'static str {
        match self {
            SddmmForm::ColMajor => "B col-major",
            SddmmForm::Transposed => "B^T row-major",
        }
    }
}

/// A prepared cuSPARSE SDDMM, C = alpha (A B^T) o spy(C) + beta C with A m x k and B n x k row-major and C CSR
/// (descriptors, workspace and `cusparseSDDMM_preprocess` done once), so that [`CusparseSddmm::run`] times only
/// the product: the baseline of [`crate::sddmm()`]. It writes C's values with no regard for what C keeps beside
/// them (tensor-core blocks, a kept transpose), which a baseline never reads.
pub struct CusparseSddmm<'a> {
    lib: &'a Cusparse,
    a: DnMatDescr<'a>,
    b: DnMatDescr<'a>,
    c: CsrDescr<'a>,
    op_b: cs::cusparseOperation_t,
    dtype: DType,
    buffer: CudaSlice<u8>,
}

impl<'a> CusparseSddmm<'a> {
    /// Prepares the product with B given as `form` says. [`Error::ShapeMismatch`] unless A is m x k, B n x k and C m
    /// x n; [`Error::Cusparse`] where cuSPARSE does not take the combination (a type, or a form).
    pub fn new<T: Scalar>(
        gpu: &Gpu,
        lib: &'a Cusparse,
        a: &'a DeviceDense<T>,
        b: &'a DeviceDense<T>,
        c: &'a mut DeviceCsr<T>,
        form: SddmmForm,
    ) -> Result<Self> {
        crate::sddmm::check_shapes(a, b, c)?;
        let k = a.cols();
        let c: &'a DeviceCsr<T> = c;
        let stream = gpu.stream();
        let a_d = DnMatDescr::new(a.rows(), k, a.data.device_ptr(stream).0, T::DTYPE, Layout::RowMajor)?;
        let b_ptr = b.data.device_ptr(stream).0;
        let (b_d, op_b) = match form {
            SddmmForm::ColMajor => (DnMatDescr::new(b.rows(), k, b_ptr, T::DTYPE, Layout::ColMajor)?, NON_TRANSPOSE),
            SddmmForm::Transposed => (
                DnMatDescr::new(b.rows(), k, b_ptr, T::DTYPE, Layout::RowMajor)?,
                cs::cusparseOperation_t::CUSPARSE_OPERATION_TRANSPOSE,
            ),
        };
        let c_d = CsrDescr::new(gpu, c)?;
        let (alpha, beta) = (1f64, 0f64);
        let (alpha32, beta32) = (1f32, 0f32);
        let (pa, pb) = scalars(T::DTYPE, &alpha, &beta, &alpha32, &beta32);
        let alg = cs::cusparseSDDMMAlg_t::CUSPARSE_SDDMM_ALG_DEFAULT;
        let mut size = 0usize;
        // SAFETY: descriptors and handle are live; alpha/beta point at host scalars of the compute type.
        check("cusparseSDDMM_bufferSize", unsafe {
            cs::cusparseSDDMM_bufferSize(
                lib.handle,
                NON_TRANSPOSE,
                op_b,
                pa,
                a_d.raw,
                b_d.raw,
                pb,
                c_d.raw,
                compute_type(T::DTYPE),
                alg,
                &mut size,
            )
        })?;
        let mut buffer = stream
            .alloc_zeros::<u8>(size.max(1))
            .map_err(Error::driver("allocating the cuSPARSE SDDMM buffer", size))?;
        {
            let (buf, _g) = buffer.device_ptr_mut(stream);
            // SAFETY: as above; buf holds `size` bytes.
            check("cusparseSDDMM_preprocess", unsafe {
                cs::cusparseSDDMM_preprocess(
                    lib.handle,
                    NON_TRANSPOSE,
                    op_b,
                    pa,
                    a_d.raw,
                    b_d.raw,
                    pb,
                    c_d.raw,
                    compute_type(T::DTYPE),
                    alg,
                    buf as *mut c_void,
                )
            })?;
        }
        Ok(CusparseSddmm { lib, a: a_d, b: b_d, c: c_d, op_b, dtype: T::DTYPE, buffer })
    }

    /// Runs C = (A B^T) o spy(C) on the stream.
    pub fn run(&mut self, gpu: &Gpu) -> Result<()> {
        self.run_scaled(gpu, 1.0, 0.0)
    }

    /// Runs C = alpha (A B^T) o spy(C) + beta C on the stream (cuSPARSE's scalars in its compute type).
    pub fn run_scaled(&mut self, gpu: &Gpu, alpha: f32, beta: f32) -> Result<()> {
        let (alpha64, beta64) = (alpha as f64, beta as f64);
        let (pa, pb) = scalars(self.dtype, &alpha64, &beta64, &alpha, &beta);
        let (buf, _g) = self.buffer.device_ptr_mut(gpu.stream());
        // SAFETY: everything was prepared in new and is still borrowed or owned.
        check("cusparseSDDMM", unsafe {
            cs::cusparseSDDMM(
                self.lib.handle,
                NON_TRANSPOSE,
                self.op_b,
                pa,
                self.a.raw,
                self.b.raw,
                pb,
                self.c.raw,
                compute_type(self.dtype),
                cs::cusparseSDDMMAlg_t::CUSPARSE_SDDMM_ALG_DEFAULT,
                buf as *mut c_void,
            )
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The dense m x k matrix a BSR stands for.
    fn bsr_dense(a: &HostBsr<f32>) -> Vec<f32> {
        let (b, k) = (a.block, a.block_cols * a.block);
        let mut dense = vec![0.0; a.block_rows * b * k];
        for br in 0..a.block_rows {
            for i in a.offsets[br] as usize..a.offsets[br + 1] as usize {
                let bc = a.columns[i] as usize;
                for (j, &v) in a.values[i * b * b..(i + 1) * b * b].iter().enumerate() {
                    dense[(br * b + j / b) * k + bc * b + j % b] = v;
                }
            }
        }
        dense
    }

    /// 8 x 8 with two entries, one of them a stored zero.
    fn with_a_stored_zero() -> sprs::CsMat<f32> {
        let mut a = sprs::TriMat::new((8, 8));
        a.add_triplet(5, 6, 0.0f32);
        a.add_triplet(0, 1, 2.0f32);
        a.to_csr()
    }

    /// A as a dense row-major array.
    fn dense_of(a: &sprs::CsMat<f32>) -> Vec<f32> {
        let mut dense = vec![0.0f32; a.rows() * a.cols()];
        for (&v, (r, c)) in a.iter() {
            dense[r * a.cols() + c] = v;
        }
        dense
    }

    #[test]
    fn bsr_holds_every_entry_in_its_block() {
        // 16 x 16 blocks at 20% on 96 x 160, read as blocks of 16, 8 and 32 (3 x 5 of them); uniform rows at 30% as
        // blocks of 4 and 1; a stored zero keeps its block.
        let blocks = crate::gen::block_sparse(96, 160, 16, 16, 0.2, 11);
        let uniform = crate::gen::uniform_random(64, 48, 0.3, 12);
        let with_zero = with_a_stored_zero();
        for (a, block) in [(&blocks, 16), (&blocks, 8), (&blocks, 32), (&uniform, 4), (&uniform, 1), (&with_zero, 2)] {
            let bsr = HostBsr::from_csr(a.view(), block).unwrap();
            let (m, k) = (a.rows(), a.cols());
            assert_eq!((bsr.block_rows * block, bsr.block_cols * block), (m, k));
            assert_eq!(bsr.offsets.len(), bsr.block_rows + 1);
            assert_eq!(*bsr.offsets.last().unwrap() as usize, bsr.columns.len());
            assert_eq!(bsr.values.len(), bsr.columns.len() * block * block);
            for br in 0..bsr.block_rows {
                let row = &bsr.columns[bsr.offsets[br] as usize..bsr.offsets[br + 1] as usize];
                assert!(row.windows(2).all(|w| w[0] < w[1]), "block {block}: block row {br} not ascending");
            }
            assert_eq!(bsr_dense(&bsr), dense_of(a), "block {block}");
            // Every stored block holds a stored entry: as many blocks as distinct (row / block, column / block).
            let distinct: std::collections::BTreeSet<(usize, usize)> =
                a.iter().map(|(_, (r, c))| (r / block, c / block)).collect();
            assert_eq!(bsr.columns.len(), distinct.len(), "block {block}");
            assert!((bsr.fill(a.nnz()) - a.nnz() as f64 / (distinct.len() * block * block) as f64).abs() < 1e-12);
        }
        // 16 x 16 blocks are whole at 16, and a CSC input gives the same blocks.
        let bsr = HostBsr::from_csr(blocks.view(), 16).unwrap();
        assert_eq!(bsr.fill(blocks.nnz()), 1.0);
        assert_eq!(HostBsr::from_csr(blocks.to_csc().view(), 16).unwrap(), bsr);
        // Blocks that do not divide the dimensions, and block 0.
        for block in [0, 3, 64] {
            assert!(matches!(HostBsr::from_csr(blocks.view(), block), Err(Error::InvalidConfig { .. })), "{block}");
        }
        let empty = HostBsr::from_csr(sprs::CsMat::<f32>::zero((8, 4)).view(), 4).unwrap();
        assert_eq!((&empty.offsets[..], empty.columns.len(), empty.fill(0)), (&[0, 0, 0][..], 0, 0.0));
    }

    #[test]
    fn blocked_ell_pads_each_row_of_blocks_to_the_longest() {
        // Blocks of 16 at 20% (rows of blocks of different lengths), uniform rows at 30% in blocks of 4 and 8, one
        // stored zero, and no entries at all.
        let blocks = crate::gen::block_sparse(96, 160, 16, 16, 0.2, 13);
        let uniform = crate::gen::uniform_random(64, 48, 0.3, 14);
        let with_zero = with_a_stored_zero();
        let empty = sprs::CsMat::<f32>::zero((8, 4));
        for (a, block) in [(&blocks, 16), (&blocks, 8), (&uniform, 4), (&uniform, 8), (&with_zero, 2), (&empty, 4)] {
            let bsr = HostBsr::from_csr(a.view(), block).unwrap();
            let ell = HostBlockedEll::from_bsr(&bsr).unwrap();
            let (m, k) = (a.rows(), a.cols());
            let per_row: Vec<usize> = bsr.offsets.windows(2).map(|w| (w[1] - w[0]) as usize).collect();
            let widest = per_row.iter().copied().max().unwrap_or(0);
            assert_eq!((ell.block, ell.rows, ell.cols, ell.ell_cols), (block, m, k, widest * block));
            assert_eq!(ell.columns.len(), m / block * widest);
            assert_eq!(ell.values.len(), m * widest * block);
            // Each row of blocks holds its BSR blocks in order, then -1.
            for (br, &count) in per_row.iter().enumerate() {
                let row = &ell.columns[br * widest..(br + 1) * widest];
                let first = bsr.offsets[br] as usize;
                assert_eq!(&row[..count], &bsr.columns[first..first + count], "block {block}, row of blocks {br}");
                assert!(row[count..].iter().all(|&c| c == -1), "block {block}: padding");
            }
            // The dense matrix it stands for is A; padding slots hold zeros.
            let mut from_ell = vec![0.0f32; m * k];
            for r in 0..m {
                for slot in 0..widest {
                    let bc = ell.columns[r / block * widest + slot];
                    for j in 0..block {
                        let v = ell.values[r * ell.ell_cols + slot * block + j];
                        if bc < 0 {
                            assert_eq!(v, 0.0, "block {block}: a padding value");
                        } else {
                            from_ell[r * k + bc as usize * block + j] = v;
                        }
                    }
                }
            }
            assert_eq!(from_ell, dense_of(a), "block {block}");
            let slots = m * widest * block;
            let expect = if slots == 0 { 0.0 } else { a.nnz() as f64 / slots as f64 };
            assert_eq!(ell.fill(a.nnz()), expect, "block {block}");
        }
    }
}
