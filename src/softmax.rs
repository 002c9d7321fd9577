//! The sparse softmax: each row of a CSR matrix replaced by the softmax of its stored entries (the entries a row
//! does not store count as -inf, as a mask does), and its gradient. With [`crate::sddmm()`] and [`crate::spmm()`] it
//! makes sparse attention, forward and backward, on the device (Sputnik's `CudaSparseSoftmax`):
//! - forward: S = alpha (Q K^T) o spy(S) (an SDDMM), P = softmax(S) ([`softmax()`]), O = P V (an SpMM);
//! - backward: dP = (dO V^T) o spy(P) (an SDDMM), dS = P o (dP - rowsum(P o dP)) ([`softmax_backward`]), then
//!   dQ = alpha dS K and dK = alpha dS^T Q (SpMMs, the second with [`DeviceCsr::transposed`]), dV = P^T dO.
//!
//! Both write in place of their matrix's values, as [`DeviceCsr::update_values`] writes them (its tensor-core
//! blocks and kept transpose follow), and compute in f32 for f32, f16 and bf16, with each result rounded once. Both
//! behave as the dense softmax on special values: a NaN or a +inf in a row makes the row NaN, a row of -inf alone
//! is NaN, and a -inf beside finite entries gives 0. Each row's result is the same bits on every run.
//!
//! ```no_run
//! use tilesparse::{gen, Gpu, DeviceCsr};
//! let gpu = Gpu::new(0)?;
//! let scores = gen::uniform_random(1024, 1024, 0.05, 7);
//! let mut p = DeviceCsr::upload(&gpu, scores.view())?;
//! tilesparse::softmax(&gpu, &mut p)?; // each row of p now sums to 1 over its entries
//! # Ok::<(), tilesparse::Error>(())
//! ```

use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg};

use crate::csr::{DeviceCsr, RowStats};
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::kernels::Family;
use crate::scalar::{DType, Scalar};

/// The arguments of every softmax kernel, mirrored field for field by `SoftmaxParams` in cuda/common/params.cuh.
#[repr(C)]
#[derive(Clone, Copy)]
struct SoftmaxParams {
    m: i32,
    long_threshold: i32,
    row_offsets: u64,
    input: u64,
    grad: u64,
    output: u64,
    chunks: u64,
    chunk_count: u64,
    partials: u64,
    long_capacity: i32,
    nnz: i32,
}
const _: () = assert!(std::mem::size_of::<SoftmaxParams>() == 72, "SoftmaxParams must match cuda/common/params.cuh");
// SAFETY: plain old data with the C layout the kernel expects.
unsafe impl cudarc::driver::DeviceRepr for SoftmaxParams {}

/// Threads per block of the rows kernels (`kSoftmaxThreads` in cuda/softmax/softmax.cu).
const THREADS: usize = 256;
/// Threads per block, one chunk of a long row at a time, of the chunk kernels (`kSoftmaxLongThreads`).
const LONG_THREADS: usize = 512;
/// Entries each thread of a chunk kernel holds in registers (`kSoftmaxCache`).
const CACHED_PER_THREAD: usize = 8;
/// Entries of a long row's chunk (`kSoftmaxChunk`): one per register of a chunk kernel's block.
pub const CHUNK: usize = LONG_THREADS * CACHED_PER_THREAD;
/// Blocks of the chunk kernels: four per SM of an H100 or H200 (132 SMs) at 512 threads, one wave.
const LONG_BLOCKS: usize = 4 * 132;

/// Which softmax kernels run: `lanes_per_row` lanes per row in the rows kernel, and rows longer than
/// `long_rows_from` (if any) in the chunk kernels, which cut them into chunks of [`CHUNK`] entries, a block of 512
/// threads each, and combine the chunks' partial sums (so one row can spread over the whole GPU). Every type is
/// compiled with every valid config ([`SoftmaxConfig::select`] chooses one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SoftmaxConfig {
    /// The storage type (f32, f16 or bf16; the arithmetic is f32 for all three).
    pub dtype: DType,
    /// Lanes that share one row: 1, 2, 4, 8, 16 or 32.
    pub lanes_per_row: usize,
    /// Rows with more entries than this go to the chunk kernels (None: every row to the rows kernel).
    pub long_rows_from: Option<usize>,
}

impl SoftmaxConfig {
    /// The lanes per row every type is compiled with.
    pub const LANES: [usize; 6] = [1, 2, 4, 8, 16, 32];

    /// The rows kernel's name, e.g. `softmax_f32_l8` (`softmax_backward_f32_l8` for the gradient).
    pub fn kernel_name(&self, backward: bool) -> String {
        let direction = if backward { "softmax_backward" } else { "softmax" };
        format!("{direction}_{}_l{}", self.dtype.name(), self.lanes_per_row)
    }

    /// The chunk kernels' names, e.g. `softmax_long_partials_f32` and `softmax_long_write_f32`.
    pub fn long_kernel_names(&self, backward: bool) -> [String; 2] {
        let direction = if backward { "softmax_backward" } else { "softmax" };
        ["partials", "write"].map(|pass| format!("{direction}_long_{pass}_{}", self.dtype.name()))
    }

    /// The rules: [`Error::UnsupportedDtype`] for f64, [`Error::InvalidConfig`] for lanes that are not a power of two
    /// up to 32.
    pub fn validate(&self) -> Result<()> {
        if self.dtype == DType::F64 {
            return Err(Error::UnsupportedDtype { dtype: self.dtype, op: "softmax" });
        }
        if !Self::LANES.contains(&self.lanes_per_row) {
            return Err(Error::InvalidConfig {
                config: self.kernel_name(false),
                rule: "lanes_per_row must be a power of two <= 32".to_string(),
            });
        }
        Ok(())
    }

    /// The config [`softmax()`] and [`softmax_backward`] run for a matrix of `rows` rows with row statistics `stats`:
    /// a pure function, fitted to the sweep of every config in NOTES.md ("Sparse softmax", step 4). A vector is 16
    /// bytes (4 f32, 8 f16 or bf16); a rows kernel's lane takes two vectors a step.
    /// - Lanes per row: the fewest that give a row of the mean length 4 entries a lane (1 to 32), doubled while the
    ///   launch has fewer than 2^17 threads (about a thousand per SM of an H100 or H200): small matrices run fastest
    ///   on many lanes.
    /// - Where the longest row fits 32 lanes of 16 vectors (2048 f32, 4096 f16/bf16 entries): no chunk kernels, and
    ///   lanes enough for the longest row to take at most 16 vectors a lane (email-Enron's rows of up to 1383: 1.4x
    ///   faster on 32 lanes than on 4 lanes with its long rows in chunks, whose three more launches cost ~10 us).
    /// - Longer rows: rows past 256 vectors (1024 f32, 2048 f16/bf16 entries) and past 8 times the mean go to the
    ///   chunk kernels (a power-law graph's hubs, 35x-60x faster than a subwarp walking them; an attention mask's
    ///   global rows, whose f32 backward runs 1.6x faster).
    pub fn select(rows: usize, stats: &RowStats, dtype: DType) -> SoftmaxConfig {
        Self::select_for(rows, stats, dtype, 16 / dtype.size())
    }

    /// The config [`softmax_backward`] runs: [`SoftmaxConfig::select`]'s rule with 8 entries in place of a vector for
    /// every type. The backward's lanes load element by element and hold 8 entries of P and of dP each, so a lane
    /// covers 8 entries where the forward's f32 lane covers a vector of 4 (the sweep, NOTES.md "Sparse softmax" step
    /// 5: attention's global rows of 4096 ran 1.35x faster on the rows kernel than in chunks, email-Enron on 16 lanes
    /// 1.35x faster than on 32).
    pub fn select_backward(rows: usize, stats: &RowStats, dtype: DType) -> SoftmaxConfig {
        Self::select_for(rows, stats, dtype, 8)
    }

    /// The rule of [`SoftmaxConfig::select`] with `vector` entries per unit of a lane's work.
    fn select_for(rows: usize, stats: &RowStats, dtype: DType, vector: usize) -> SoftmaxConfig {
        let mut lanes_per_row = 1;
        while lanes_per_row < 32 && ((4 * lanes_per_row) as f64) < stats.mean {
            lanes_per_row *= 2;
        }
        while lanes_per_row < 32 && rows.saturating_mul(lanes_per_row) < 1 << 17 {
            lanes_per_row *= 2;
        }
        if stats.max <= 32 * 16 * vector {
            while lanes_per_row < 32 && lanes_per_row * 16 * vector < stats.max {
                lanes_per_row *= 2;
            }
            return SoftmaxConfig { dtype, lanes_per_row, long_rows_from: None };
        }
        let from = (256 * vector).max((8.0 * stats.mean).ceil() as usize);
        let long_rows_from = (stats.max > from).then_some(from);
        SoftmaxConfig { dtype, lanes_per_row, long_rows_from }
    }
}

/// Each row of `c` replaced by the softmax of its stored entries, in place, with [`SoftmaxConfig::select`]'s config
/// for c's row statistics (computed once per matrix: from one download of its structure where it was built on the
/// device); returns the config. See [`softmax_with`] for the errors.
pub fn softmax<T: Scalar>(gpu: &Gpu, c: &mut DeviceCsr<T>) -> Result<SoftmaxConfig> {
    c.check_gpu(gpu, "the sparse matrix")?;
    check_dtype::<T>()?;
    let config = SoftmaxConfig::select(c.rows(), c.stats(gpu)?, T::DTYPE);
    softmax_with(gpu, c, &config)?;
    Ok(config)
}

/// [`softmax()`] with the given config, queued on [`Gpu::stream`] with no synchronisation. Everything is checked
/// before anything is written: [`Error::WrongGpu`] for a matrix of another handle, [`Error::UnsupportedDtype`] for f64,
/// [`Error::InvalidConfig`] for a config that breaks a rule or is for another type, [`Error::KernelsNotBuilt`] in a
/// build without kernels, and [`Error::OutOfDeviceMemory`] where the long rows' list does not fit. The matrix's
/// tensor-core blocks and kept transpose take the new values ([`DeviceCsr::update_values`]).
pub fn softmax_with<T: Scalar>(gpu: &Gpu, c: &mut DeviceCsr<T>, config: &SoftmaxConfig) -> Result<()> {
    c.check_gpu(gpu, "the sparse matrix")?;
    let launch = Launch::new::<T>(gpu, c, config, false)?;
    c.update_values_with_structure(gpu, |row_offsets, _, values| {
        let stream = gpu.stream();
        let (output, _g) = values.device_ptr_mut(stream);
        launch.run(gpu, row_offsets, output, 0, output)
    })
}

/// The gradient of a softmax, in place of `grad`: with `prob` the softmax's output P and `grad` the gradient dP
/// (P's structure), each row's dS = P o (dP - sum(P o dP)), with [`SoftmaxConfig::select_backward`]'s config for P's
/// row statistics; returns the config. See [`softmax_backward_with`] for the errors.
pub fn softmax_backward<T: Scalar>(gpu: &Gpu, prob: &DeviceCsr<T>, grad: &mut DeviceCsr<T>) -> Result<SoftmaxConfig> {
    prob.check_gpu(gpu, "P")?;
    check_dtype::<T>()?;
    let config = SoftmaxConfig::select_backward(prob.rows(), prob.stats(gpu)?, T::DTYPE);
    softmax_backward_with(gpu, prob, grad, &config)?;
    Ok(config)
}

/// [`softmax_backward`] with the given config, queued on [`Gpu::stream`]. The errors of [`softmax_with`], and
/// [`Error::ShapeMismatch`] unless P and dP have the same shape and number of entries, [`Error::PatternMismatch`]
/// unless their structures are the same (told apart by a fingerprint of each, computed on first use from one
/// download of the structure and kept with the matrix).
pub fn softmax_backward_with<T: Scalar>(
    gpu: &Gpu,
    prob: &DeviceCsr<T>,
    grad: &mut DeviceCsr<T>,
    config: &SoftmaxConfig,
) -> Result<()> {
    prob.check_gpu(gpu, "P")?;
    grad.check_gpu(gpu, "dP")?;
    if (prob.rows(), prob.cols(), prob.nnz()) != (grad.rows(), grad.cols(), grad.nnz()) {
        return Err(Error::ShapeMismatch(format!(
            "softmax_backward: P is {} x {} with {} entries, dP {} x {} with {}",
            prob.rows(),
            prob.cols(),
            prob.nnz(),
            grad.rows(),
            grad.cols(),
            grad.nnz()
        )));
    }
    if prob.pattern(gpu)? != grad.pattern(gpu)? {
        return Err(Error::PatternMismatch(
            "softmax_backward: dP's structure is not P's (the gradient of each entry of P, in P's order)".to_string(),
        ));
    }
    let launch = Launch::new::<T>(gpu, prob, config, true)?;
    let (row_offsets, _, prob_values) = prob.device_parts();
    grad.update_values(gpu, |values| {
        let stream = gpu.stream();
        let (input, _g1) = prob_values.device_ptr(stream);
        let (output, _g2) = values.device_ptr_mut(stream);
        launch.run(gpu, row_offsets, input, output, output)
    })
}

fn check_dtype<T: Scalar>() -> Result<()> {
    if T::DTYPE == DType::F64 {
        return Err(Error::UnsupportedDtype { dtype: T::DTYPE, op: "softmax" });
    }
    Ok(())
}

/// A checked launch: the kernels loaded, the long rows' threshold and the chunk list's room decided.
struct Launch {
    rows: usize,
    nnz: usize,
    lanes: usize,
    function: cudarc::driver::CudaFunction,
    long: Option<LongRows>,
}

/// The chunk kernels of a launch where some row is long.
struct LongRows {
    find: cudarc::driver::CudaFunction,
    partials: cudarc::driver::CudaFunction,
    write: cudarc::driver::CudaFunction,
    /// Rows with more entries than this are long.
    from: usize,
    /// Room for chunks: at least the long rows' chunks.
    capacity: usize,
}

impl Launch {
    fn new<T: Scalar>(gpu: &Gpu, c: &DeviceCsr<T>, config: &SoftmaxConfig, backward: bool) -> Result<Self> {
        check_dtype::<T>()?;
        config.validate()?;
        if config.dtype != T::DTYPE {
            return Err(Error::InvalidConfig {
                config: config.kernel_name(backward),
                rule: format!("config is for {} but the matrix is {}", config.dtype, T::DTYPE),
            });
        }
        let function = gpu.function(Family::Softmax, &config.kernel_name(backward))?;
        let long = match config.long_rows_from {
            Some(from) if c.nnz() > from && c.stats(gpu)?.max > from => {
                let [partials, write] = config.long_kernel_names(backward);
                // Each long row has at most len / CHUNK + 1 chunks, and there are at most nnz / (from + 1) long rows.
                let capacity = c.nnz() / CHUNK + (c.nnz() / (from + 1)).min(c.rows()) + 1;
                Some(LongRows {
                    find: gpu.function(Family::Softmax, "softmax_find_long_rows")?,
                    partials: gpu.function(Family::Softmax, &partials)?,
                    write: gpu.function(Family::Softmax, &write)?,
                    from: from.min(i32::MAX as usize),
                    capacity,
                })
            }
            _ => None,
        };
        if let Some(long) = &long {
            if 6 * long.capacity + 4 > i32::MAX as usize {
                return Err(Error::TooLarge(format!("{} chunks of long rows", long.capacity)));
            }
        }
        Ok(Launch { rows: c.rows(), nnz: c.nnz(), lanes: config.lanes_per_row, function, long })
    }

    /// Queues the kernels on `row_offsets` (the matrix's), `input` (scores or P), `grad` (dP, 0 forward) and
    /// `output` (input's or grad's own buffer for in place).
    fn run(&self, gpu: &Gpu, row_offsets: &CudaSlice<i32>, input: u64, grad: u64, output: u64) -> Result<()> {
        if self.rows == 0 {
            return Ok(());
        }
        let stream = gpu.stream();
        let (ro, _g) = row_offsets.device_ptr(stream);
        let mut params = SoftmaxParams {
            m: self.rows as i32,
            long_threshold: i32::MAX,
            row_offsets: ro,
            input,
            grad,
            output,
            chunks: 0,
            chunk_count: 0,
            partials: 0,
            long_capacity: 0,
            nnz: self.nnz as i32,
        };
        // The chunk list, its count and the partials in one zeroed buffer: 4 ints per chunk (16-byte aligned, the
        // allocation's start), the count and 3 ints of padding, 2 floats per chunk.
        let scratch: Option<CudaSlice<i32>> = match &self.long {
            Some(long) => Some(
                stream
                    .alloc_zeros::<i32>(6 * long.capacity + 4)
                    .map_err(Error::driver("allocating the softmax's chunk list", 4 * (6 * long.capacity + 4)))?,
            ),
            None => None,
        };
        let _scratch_guard = match (&self.long, &scratch) {
            (Some(long), Some(scratch)) => {
                let (base, guard) = scratch.device_ptr(stream);
                params.long_threshold = long.from as i32;
                params.long_capacity = long.capacity as i32;
                params.chunks = base;
                params.chunk_count = base + 16 * long.capacity as u64;
                params.partials = base + 16 * long.capacity as u64 + 16;
                Some(guard)
            }
            _ => None,
        };
        if let Some(long) = &self.long {
            // SAFETY: the row pointer holds m + 1 offsets (a validated DeviceCsr); the kernel writes the count and the
            // chunks of rows whose chunks fit `long_capacity` (all of them: the room was counted from nnz), each
            // chunk 16 bytes at a 16-byte aligned start, inside the scratch buffer.
            unsafe {
                stream.launch_builder(&long.find).arg(&params).launch(crate::kernels::grid_stride_launch(self.rows))
            }
            .map_err(Error::driver("launching the softmax's long-row search", 0))?;
        }
        let blocks = (self.rows * self.lanes).div_ceil(THREADS);
        let rows_launch =
            LaunchConfig { grid_dim: (blocks as u32, 1, 1), block_dim: (THREADS as u32, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: the row pointer holds m + 1 nondecreasing offsets ending at nnz (a validated DeviceCsr), and input,
        // grad (where given) and output hold nnz elements of the kernel's type (the matrices' values; P and dP have
        // the same structure, checked by the caller); each entry is read and then written by one thread, so output
        // may alias input or grad. The grid covers m x lanes threads, and rows past m or long do nothing.
        unsafe { stream.launch_builder(&self.function).arg(&params).launch(rows_launch) }
            .map_err(Error::driver("launching the softmax kernel", 0))?;
        if let Some(long) = &self.long {
            let long_launch = LaunchConfig {
                grid_dim: (long.capacity.min(LONG_BLOCKS) as u32, 1, 1),
                block_dim: (LONG_THREADS as u32, 1, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: as the rows kernel, over the listed chunks (each inside its row, each row long and so left
            // alone by the rows kernel); the first kernel writes each chunk's partial (2 floats at the chunk's slot,
            // inside the scratch buffer), the second reads its row's partials and then reads and writes the chunk.
            for (kernel, what) in [(&long.partials, "the softmax's chunk sums"), (&long.write, "the softmax's chunks")]
            {
                unsafe { stream.launch_builder(kernel).arg(&params).launch(long_launch) }
                    .map_err(Error::driver(what, 0))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl SoftmaxConfig {
        fn with(self, dtype: DType) -> SoftmaxConfig {
            SoftmaxConfig { dtype, ..self }
        }
    }

    fn stats(mean: f64, max: usize) -> RowStats {
        RowStats { min: 0, max, mean, cv: 0.0, empty_rows: 0, columns_per_entry: None }
    }

    #[test]
    fn select_gives_short_rows_few_lanes_small_launches_and_long_rows_many_and_the_longest_the_chunks() {
        let select =
            |rows: usize, mean: f64, max: usize, dtype: DType| SoftmaxConfig::select(rows, &stats(mean, max), dtype);
        // A million rows of one length: lanes by the mean alone.
        let lanes = |mean: f64| select(1_000_000, mean, mean as usize, DType::F32).lanes_per_row;
        assert_eq!(lanes(0.0), 1);
        assert_eq!(lanes(4.0), 1);
        assert_eq!(lanes(4.5), 2);
        assert_eq!(lanes(32.0), 8);
        assert_eq!(lanes(410.0), 32);
        // Few rows: lanes doubled up to 2^17 threads (1536 rows of 38: 16 by the mean, 32 by the launch).
        assert_eq!(select(1536, 38.4, 186, DType::F32).lanes_per_row, 32);
        let copter2 = select(55_476, 12.7, 44, DType::F32);
        assert_eq!((copter2.lanes_per_row, copter2.long_rows_from), (4, None));
        // email-Enron: rows up to 1383 take 32 lanes in f32 (16 vectors of 4 a lane: 2048), 16 in f16 (of 8).
        assert_eq!(
            select(36_692, 10.0, 1383, DType::F32),
            SoftmaxConfig { dtype: DType::F32, lanes_per_row: 32, long_rows_from: None }
        );
        assert_eq!(select(36_692, 10.0, 1383, DType::F16).lanes_per_row, 16);
        assert_eq!(select(36_692, 10.0, 2048, DType::F32).long_rows_from, None);
        // Past 32 lanes of 16 vectors: the chunks take rows past 256 vectors and 8 means.
        let powerlaw = select(1 << 20, 16.2, 295_168, DType::F32);
        assert_eq!((powerlaw.lanes_per_row, powerlaw.long_rows_from), (8, Some(1024)));
        assert_eq!(select(1 << 20, 16.2, 295_168, DType::Bf16).long_rows_from, Some(2048));
        assert_eq!(select(16_384, 572.0, 16_384, DType::F16).long_rows_from, Some(4576));
        assert_eq!(select(4096, 284.0, 4096, DType::F32).long_rows_from, Some(2272));
        assert_eq!(select(4096, 284.0, 4096, DType::F16).long_rows_from, None);
        // A longest row past 2048 but within 8 means stays with the rows kernel.
        assert_eq!(select(4096, 600.0, 4800, DType::F32).long_rows_from, None);
        // The backward counts 8 entries a unit in every type: f32 as f16's forward.
        let backward = |rows: usize, mean: f64, max: usize, dtype: DType| {
            SoftmaxConfig::select_backward(rows, &stats(mean, max), dtype)
        };
        for dtype in [DType::F32, DType::F16, DType::Bf16] {
            assert_eq!(backward(4096, 284.0, 4096, dtype), select(4096, 284.0, 4096, DType::F16).with(dtype));
            assert_eq!(backward(36_692, 10.0, 1383, dtype).lanes_per_row, 16);
            assert_eq!(backward(1 << 20, 16.2, 295_168, dtype).long_rows_from, Some(2048));
        }
    }

    #[test]
    fn configs_are_checked_and_named() {
        let c = SoftmaxConfig { dtype: DType::F16, lanes_per_row: 8, long_rows_from: None };
        assert_eq!(c.kernel_name(false), "softmax_f16_l8");
        assert_eq!(c.kernel_name(true), "softmax_backward_f16_l8");
        assert_eq!(
            c.long_kernel_names(true),
            ["softmax_backward_long_partials_f16", "softmax_backward_long_write_f16"]
        );
        assert!(c.validate().is_ok());
        assert!(matches!(SoftmaxConfig { lanes_per_row: 12, ..c }.validate(), Err(Error::InvalidConfig { .. })));
        assert!(matches!(SoftmaxConfig { lanes_per_row: 0, ..c }.validate(), Err(Error::InvalidConfig { .. })));
        let f64_config = SoftmaxConfig { dtype: DType::F64, ..c };
        assert!(matches!(f64_config.validate(), Err(Error::UnsupportedDtype { .. })));
    }
}
