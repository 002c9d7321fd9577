//! Dense row-major matrices on the device.

use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, PushKernelArg};

use crate::csr::upload_slice;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::kernels::Family;
use crate::scalar::Scalar;

/// The `rows * cols` elements of a matrix, or [`Error::TooLarge`] when that overflows.
fn element_count(rows: usize, cols: usize) -> Result<usize> {
    rows.checked_mul(cols).ok_or_else(|| Error::TooLarge(format!("{rows} x {cols} elements")))
}

/// A dense row-major `rows x cols` matrix on the device.
pub struct DeviceDense<T: Scalar> {
    rows: usize,
    cols: usize,
    pub(crate) data: CudaSlice<T>,
}

/// Elements per access of the wide transposition for T (`transpose_dense_wide` in cuda/util/util.cu): 8 bytes of
/// 2- and 4-byte elements, 16 of 8-byte ones.
fn wide_vector<T: Scalar>() -> usize {
    if std::mem::size_of::<T>() == 2 {
        4
    } else {
        2
    }
}

/// Whether [`DeviceDense::transpose_into`] moves a `rows x cols` matrix of T with its wide kernel (vectors of 4
/// f16/bf16 elements or 2 f32/f64 ones, tiles of 128 or 64), given buffers aligned to a vector as cudarc's
/// allocations are: where rows and cols are multiples of the vector's elements and its tiles are at least as many
/// as the device's SMs. Otherwise the narrow kernel (one element per
/// access, tiles of 32) runs, which fills the device with more blocks on a small matrix. On a 128 x 65536 B the
/// wide kernel takes 1.14x (f32) and 1.8x (f16) a plain copy's time, where the narrow one took 1.54x and 3.3x
/// (NOTES.md step 109).
pub fn transposes_in_wide_tiles<T: Scalar>(gpu: &Gpu, rows: usize, cols: usize) -> bool {
    let p = wide_vector::<T>();
    let tiles = rows.div_ceil(32 * p).saturating_mul(cols.div_ceil(32 * p));
    rows % p == 0 && cols % p == 0 && tiles >= gpu.info().sm_count
}

impl<T: Scalar> DeviceDense<T> {
    /// Uploads `data` (row-major, `rows * cols` elements).
    pub fn upload(gpu: &Gpu, rows: usize, cols: usize, data: &[T]) -> Result<Self> {
        let len = element_count(rows, cols)?;
        if data.len() != len {
            return Err(Error::ShapeMismatch(format!(
                "dense {rows} x {cols} needs {len} elements, got {}",
                data.len()
            )));
        }
        Ok(DeviceDense { rows, cols, data: upload_slice(gpu, data, "uploading a dense matrix")? })
    }

    /// Wraps a buffer already on the device (row-major, at least `rows * cols` elements; a longer one is used in
    /// its first `rows * cols`), e.g. one your own kernels filled: no copy. It must come from this `gpu`'s stream
    /// ([`Gpu::stream`]), on which every tilesparse operation is queued after the work you queued there, else
    /// [`Error::WrongGpu`]. [`DeviceDense::into_slice`] gives it back.
    pub fn from_slice(gpu: &Gpu, rows: usize, cols: usize, data: CudaSlice<T>) -> Result<Self> {
        gpu.check_owns("the dense buffer", &data)?;
        let len = element_count(rows, cols)?;
        if data.len() < len {
            return Err(Error::ShapeMismatch(format!(
                "dense {rows} x {cols} needs {len} elements, the buffer holds {}",
                data.len()
            )));
        }
        Ok(DeviceDense { rows, cols, data })
    }

    /// The device buffer (row-major; it may be longer than `rows * cols`), to read or to pass to your own kernels
    /// on [`Gpu::stream`]. Taking it mutably would let it be swapped for a shorter one: take it back with
    /// [`DeviceDense::into_slice`] instead.
    pub fn as_slice(&self) -> &CudaSlice<T> {
        &self.data
    }

    /// The device buffer, giving up the matrix.
    pub fn into_slice(self) -> CudaSlice<T> {
        self.data
    }

    /// A matrix of zeros.
    pub fn zeros(gpu: &Gpu, rows: usize, cols: usize) -> Result<Self> {
        let len = element_count(rows, cols)?;
        // cudarc does not check the byte count: an overflow would allocate a short buffer.
        let too_large = || Error::TooLarge(format!("{rows} x {cols} elements"));
        let bytes = len.max(1).checked_mul(std::mem::size_of::<T>()).ok_or_else(too_large)?;
        gpu.refuse_while_recording("allocating a dense matrix")?;
        let data =
            gpu.stream().alloc_zeros::<T>(len.max(1)).map_err(Error::driver("allocating a dense matrix", bytes))?;
        Ok(DeviceDense { rows, cols, data })
    }

    /// A matrix whose elements are left as the allocation found them, for a result that a kernel then writes in
    /// full before anything reads it (the transposition, and C of a product through a transposed C).
    pub(crate) fn unwritten(gpu: &Gpu, rows: usize, cols: usize, what: &'static str) -> Result<Self> {
        let len = element_count(rows, cols)?;
        let too_large = || Error::TooLarge(format!("{rows} x {cols} elements"));
        let bytes = len.max(1).checked_mul(std::mem::size_of::<T>()).ok_or_else(too_large)?;
        // SAFETY: T is a plain scalar type (any bits are a value), and the callers write every element of the
        // rows x cols before reading any.
        let data = unsafe { gpu.stream().alloc::<T>(len.max(1)) }.map_err(Error::driver(what, bytes))?;
        Ok(DeviceDense { rows, cols, data })
    }

    /// The transpose, a `cols x rows` matrix, made on the device ([`DeviceDense::transpose_into`]).
    pub fn transpose(&self, gpu: &Gpu) -> Result<DeviceDense<T>> {
        gpu.refuse_while_recording("allocating a transposed dense matrix")?;
        self.transpose_temporary(gpu)
    }

    /// [`DeviceDense::transpose`] for a temporary that the operation making it also frees (the copies of
    /// [`crate::spmm_layouts`]), so that it may be recorded ([`Gpu::record`]).
    pub(crate) fn transpose_temporary(&self, gpu: &Gpu) -> Result<DeviceDense<T>> {
        let mut out = DeviceDense::unwritten(gpu, self.cols, self.rows, "allocating a transposed dense matrix")?;
        self.transpose_into(gpu, &mut out)?;
        Ok(out)
    }

    /// Writes the transpose into `out`, a `cols x rows` matrix ([`Error::ShapeMismatch`] otherwise), on the
    /// device: every element of `out`, the bits as they are. A column-major matrix is the row-major one of its
    /// transpose, so this turns either layout into the other. Rows and columns past `i32::MAX` are
    /// [`Error::TooLarge`].
    pub fn transpose_into(&self, gpu: &Gpu, out: &mut DeviceDense<T>) -> Result<()> {
        self.check_gpu(gpu, "the dense matrix")?;
        out.check_gpu(gpu, "the transpose")?;
        if out.rows != self.cols || out.cols != self.rows {
            return Err(Error::ShapeMismatch(format!(
                "the transpose of a {} x {} matrix is {} x {}, not {} x {}",
                self.rows, self.cols, self.cols, self.rows, out.rows, out.cols
            )));
        }
        let fits = |d: usize| i32::try_from(d).map_err(|_| Error::TooLarge(format!("{d} rows or columns")));
        let (rows, cols) = (fits(self.rows)?, fits(self.cols)?);
        if rows == 0 || cols == 0 {
            return Ok(());
        }
        let stream = gpu.stream();
        let (src, _gs) = self.data.device_ptr(stream);
        let (dst, _gd) = out.data.device_ptr_mut(stream);
        // cudarc's allocations are aligned far beyond a vector; the check keeps a buffer that is not (one upgraded
        // from a raw pointer) on the narrow kernel.
        let vector_bytes = (wide_vector::<T>() * std::mem::size_of::<T>()) as u64;
        let aligned = src % vector_bytes == 0 && dst % vector_bytes == 0;
        let wide = aligned && transposes_in_wide_tiles::<T>(gpu, self.rows, self.cols);
        let name = match (std::mem::size_of::<T>(), wide) {
            (2, false) => "ts_transpose_dense_b16",
            (4, false) => "ts_transpose_dense_b32",
            (8, false) => "ts_transpose_dense_b64",
            (2, true) => "ts_transpose_dense_wide_b16",
            (4, true) => "ts_transpose_dense_wide_b32",
            (8, true) => "ts_transpose_dense_wide_b64",
            (size, _) => unreachable!("no scalar type of {size} bytes"),
        };
        let function = gpu.function(Family::Util, name)?;
        let tile = if wide { 32 * wide_vector::<T>() } else { 32 };
        let cfg = cudarc::driver::LaunchConfig {
            grid_dim: (self.cols.div_ceil(tile) as u32, self.rows.div_ceil(tile).min(65_535) as u32, 1),
            block_dim: (32, 8, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: src holds at least rows x cols elements of T and dst at least cols x rows (both checked when the
        // matrices were made), of T's size, the size the kernel's name says; it reads and writes only inside them,
        // and walks any number of row tiles from the grid it gets. The wide kernel's vectors of P elements are
        // aligned: rows and cols are multiples of P there, and both buffers start at a multiple of a vector's
        // bytes (checked above). The two are distinct buffers (one is borrowed mutably).
        unsafe { stream.launch_builder(&function).arg(&src).arg(&dst).arg(&rows).arg(&cols).launch(cfg) }
            .map_err(Error::driver("launching the transposition of a dense matrix", 0))?;
        Ok(())
    }

    /// Overwrites every element with `value` (tests poison outputs this way before each run).
    pub fn fill(&mut self, gpu: &Gpu, value: T) -> Result<()> {
        self.check_gpu(gpu, "the dense matrix")?;
        gpu.refuse_while_recording("filling a dense matrix from the host")?;
        let host = vec![value; self.data.len()];
        gpu.stream().memcpy_htod(&host, &mut self.data).map_err(Error::driver("filling a dense matrix", 0))
    }

    /// Overwrites the matrix's `rows * cols` elements with `data` (row-major, that many elements, else
    /// [`Error::ShapeMismatch`]) in the same device buffer: the next input of a loop over a [`crate::Recording`],
    /// which holds this buffer's address, or of any product that reuses its operands. Queued on the stream after
    /// the work before it; `data` may be dropped when the call returns.
    pub fn overwrite(&mut self, gpu: &Gpu, data: &[T]) -> Result<()> {
        self.check_gpu(gpu, "the dense matrix")?;
        let len = self.host_len("overwriting", "with", data.len())?;
        gpu.refuse_while_recording("copying to a dense matrix from the host")?;
        if len == 0 {
            return Ok(());
        }
        let bytes = std::mem::size_of_val(data);
        let mut dst = self.data.slice_mut(..len);
        gpu.stream().memcpy_htod(data, &mut dst).map_err(Error::driver("overwriting a dense matrix", bytes))
    }

    /// Copies the matrix back (row-major).
    pub fn download(&self, gpu: &Gpu) -> Result<Vec<T>> {
        self.check_gpu(gpu, "the dense matrix")?;
        crate::csr::download_slice(gpu, &self.data.slice(..self.rows * self.cols), "downloading a dense matrix")
    }

    /// Copies the matrix back (row-major) into `out`, of `rows * cols` elements ([`Error::ShapeMismatch`]
    /// otherwise): for a loop that downloads a C of the same shape every step, whose vector's pages are in use
    /// after the first. A download into a new vector first touches its pages (NOTES.md step 105: 14.4 ms for a
    /// 64 MB C where this takes 4.1 ms on the H200).
    pub fn download_into(&self, gpu: &Gpu, out: &mut [T]) -> Result<()> {
        self.check_gpu(gpu, "the dense matrix")?;
        let len = self.host_len("downloading", "into", out.len())?;
        gpu.refuse_while_recording("downloading a dense matrix")?;
        if len == 0 {
            return Ok(());
        }
        let bytes = std::mem::size_of_val(out);
        gpu.stream()
            .memcpy_dtoh(&self.data.slice(..len), out)
            .map_err(Error::driver("downloading a dense matrix", bytes))
    }

    /// The matrix's `rows * cols` elements, or [`Error::ShapeMismatch`] where a host slice of `host` elements does not
    /// hold as many ("`verb` a dense r x c matrix (n elements) `preposition` `host` elements").
    fn host_len(&self, verb: &str, preposition: &str, host: usize) -> Result<usize> {
        let len = self.rows * self.cols;
        if host != len {
            return Err(Error::ShapeMismatch(format!(
                "{verb} a dense {} x {} matrix ({len} elements) {preposition} {host} elements",
                self.rows, self.cols
            )));
        }
        Ok(len)
    }

    /// A copy of the matrix's `rows * cols` elements on the device (at least one element), `what` naming it in
    /// an error ([`Error::OutOfDeviceMemory`] where it does not fit).
    pub(crate) fn copy(&self, gpu: &Gpu, what: &'static str) -> Result<CudaSlice<T>> {
        self.check_gpu(gpu, "the dense matrix")?;
        let len = (self.rows * self.cols).max(1);
        let bytes = len * std::mem::size_of::<T>();
        gpu.stream().clone_dtod(&self.data.slice(..len)).map_err(Error::driver(what, bytes))
    }

    /// Overwrites the matrix's elements with a [`DeviceDense::copy`] of them.
    pub(crate) fn copy_from(&mut self, gpu: &Gpu, copy: &CudaSlice<T>) -> Result<()> {
        self.check_gpu(gpu, "the dense matrix")?;
        let mut dst = self.data.slice_mut(..copy.len());
        gpu.stream().memcpy_dtod(copy, &mut dst).map_err(Error::driver("copying a dense matrix back", 0))
    }

    /// [`Error::WrongGpu`] unless this matrix is `gpu`'s ([`Gpu::check_owns`]).
    pub(crate) fn check_gpu(&self, gpu: &Gpu, what: &str) -> Result<()> {
        gpu.check_owns(what, &self.data)
    }

    pub fn rows(&self) -> usize {
        self.rows
    }
    pub fn cols(&self) -> usize {
        self.cols
    }
}
