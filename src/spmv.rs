//! SpMV: y = alpha * A x + beta * y. The production kernels of issue 6 ([`spmv`] with an [`SpmvPlan`]) and the
//! seed kernel pair of shared/seeds/spmv-csr-shared-prefix-sum.md ([`spmv_seed`]).

use cudarc::driver::{CudaFunction, CudaSlice, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg};
use sprs::CsMatView;

use crate::cpu::oracle;
use crate::csr::{DeviceCsr, RowStats};
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::kernels::{Family, SPMV_SEED_COMBINE, SPMV_SEED_PRODUCTS};
use crate::scalar::{DType, Scalar};

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

/// x must hold A's columns and y A's rows (longer buffers are allowed; only the first elements are used), and
/// all three must be `gpu`'s.
pub(crate) fn check_operands<T: crate::Scalar, X, Y>(
    gpu: &Gpu,
    a: &DeviceCsr<T>,
    x: &CudaSlice<X>,
    y: &CudaSlice<Y>,
) -> Result<()> {
    a.check_gpu(gpu, "A")?;
    gpu.check_owns("x", x)?;
    gpu.check_owns("y", y)?;
    let (x_len, y_len) = (x.len(), y.len());
    if x_len < a.cols() || y_len < a.rows() {
        return Err(Error::ShapeMismatch(format!(
            "A is {} x {}, x has {x_len} and y has {y_len} elements",
            a.rows(),
            a.cols()
        )));
    }
    Ok(())
}

/// Scratch for the seed SpMV: the per-block prefix sums of the nnz products.
pub struct SeedSpmvWorkspace {
    prefix: CudaSlice<f32>,
}

impl SeedSpmvWorkspace {
    /// Allocates the scratch for a matrix with `nnz` stored entries.
    pub fn new(gpu: &Gpu, nnz: usize) -> Result<Self> {
        // The kernels count entries in an int; and a length whose bytes overflow would make a short buffer.
        if nnz > i32::MAX as usize {
            return Err(Error::TooLarge(format!("{nnz} entries: the seed SpMV counts entries in 32 bits")));
        }
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
    check_operands(gpu, a, x, y)?;
    gpu.check_owns("the SpMV workspace", &workspace.prefix)?;
    // The seed's kernels form `block * 32 + lane` and `block * 256 + thread` in an int.
    if a.nnz() > i32::MAX as usize - 256 || a.rows() > i32::MAX as usize - 256 {
        return Err(Error::TooLarge(format!(
            "{} x {} with {} entries: the seed SpMV indexes rows and entries in 32 bits, with 256 to spare",
            a.rows(),
            a.cols(),
            a.nnz()
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

/// The subwarp widths the vector kernel is compiled for (cuda/spmv/spmv_csr.cu, `TILESPARSE_SPMV_DTYPE`).
pub const THREADS_PER_ROW: [u32; 6] = [1, 2, 4, 8, 16, 32];

/// Threads per block of the vector and block kernels (`ts::kSpmvBlock`).
const BLOCK: u32 = 256;
/// Threads per block of the fix-up kernel (`ts::kSpmvFixupBlock`).
const FIXUP_BLOCK: u32 = 128;
/// Entries per chunk of a long row in [`SpmvStrategy::Split`]: 16 per thread of a 256-thread block, so the
/// longest row costs one wave of blocks instead of one block's serial walk.
pub const CHUNK: usize = 4096;
/// Entries per tile of [`SpmvStrategy::Segmented`]: 8 per thread of a 256-thread block (`ts::kSegmentTile`).
pub const SEGMENT_TILE: usize = 2048;
/// Mean row length from which [`SpmvPlan::choose`] gives every row a whole block.
pub const BLOCK_PER_ROW_MEAN: f64 = 512.0;
/// Row-length coefficient of variation above which a matrix with rows past the vector kernel's reach is split.
pub const SKEWED_CV: f64 = 1.0;

/// How the production SpMV splits the rows among threads. Every strategy is deterministic: each row's sum is
/// taken in a fixed order and each element of y is written by exactly one thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpmvStrategy {
    /// A subwarp of `threads_per_row` lanes (one of [`THREADS_PER_ROW`]) per row, xor-shuffle reduction.
    Vector { threads_per_row: u32 },
    /// One 256-thread block per row: rows uniformly long.
    BlockPerRow,
    /// Rows of at most `long_row` entries by the vector kernel; the longer ones, listed when the plan is made, in
    /// chunks of [`CHUNK`] entries, one block each, whose partial sums a fix-up kernel adds in chunk order.
    Split { threads_per_row: u32, long_row: u32 },
    /// Tiles of [`SEGMENT_TILE`] consecutive entries, one block each, whatever rows they hold: the same work per
    /// block however skewed the rows, rows kept in order. A segmented scan sums each row's part of a tile; rows
    /// that run past their tile are finished by a fix-up kernel from the tiles' partial sums, in tile order.
    Segmented,
}

impl std::fmt::Display for SpmvStrategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpmvStrategy::Vector { threads_per_row } => write!(f, "vector_t{threads_per_row}"),
            SpmvStrategy::BlockPerRow => f.write_str("block_per_row"),
            SpmvStrategy::Split { threads_per_row, long_row } => write!(f, "split_t{threads_per_row}_long{long_row}"),
            SpmvStrategy::Segmented => f.write_str("segmented"),
        }
    }
}

/// A production SpMV kernel; [`ProductionKernel::name`] is the only place its `extern "C"` name is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ProductionKernel {
    Vector(u32),
    /// The vector kernel reading the plan's 16-bit column offsets.
    VectorOffsets16(u32),
    Block,
    Fixup,
    Segmented,
    SegmentedFixup,
}

impl ProductionKernel {
    fn name(self, dtype: DType) -> String {
        match self {
            ProductionKernel::Vector(t) => format!("spmv_csr_vector_{dtype}_t{t}"),
            ProductionKernel::VectorOffsets16(t) => format!("spmv_csr_vector_{dtype}_t{t}_i16"),
            ProductionKernel::Block => format!("spmv_csr_block_{dtype}"),
            ProductionKernel::Fixup => format!("spmv_csr_fixup_{dtype}"),
            ProductionKernel::Segmented => format!("spmv_csr_segmented_{dtype}"),
            ProductionKernel::SegmentedFixup => format!("spmv_csr_segmented_fixup_{dtype}"),
        }
    }
}

/// Kernel arguments of the production kernels; mirrors `ts::SpmvCsrParams` in cuda/common/params.cuh.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct SpmvCsrParams {
    m: i32,
    k: i32,
    long_row: i32,
    num_long: i32,
    alpha: f64,
    beta: f64,
    values: u64,
    row_offsets: u64,
    column_indices: u64,
    x: u64,
    y: u64,
    long_rows: u64,
    long_row_chunks: u64,
    chunk_bounds: u64,
    partials: u64,
    column_offsets: u64,
    overflow: u64,
    tile_rows: u64,
}
const _: () = assert!(std::mem::size_of::<SpmvCsrParams>() == 128, "SpmvCsrParams must match cuda/common/params.cuh");
// SAFETY: plain old data with the C layout the kernels expect.
unsafe impl cudarc::driver::DeviceRepr for SpmvCsrParams {}

impl SpmvCsrParams {
    /// A's shape and structure (device pointers), every other argument zero or null (no long rows: long_row is
    /// i32::MAX); each launch sets what its kernel reads.
    fn structure(m: usize, k: usize, row_offsets: u64, column_indices: u64) -> Self {
        SpmvCsrParams {
            m: m as i32,
            k: k as i32,
            long_row: i32::MAX,
            num_long: 0,
            alpha: 0.0,
            beta: 0.0,
            values: 0,
            row_offsets,
            column_indices,
            x: 0,
            y: 0,
            long_rows: 0,
            long_row_chunks: 0,
            chunk_bounds: 0,
            partials: 0,
            column_offsets: 0,
            overflow: 0,
            tile_rows: 0,
        }
    }
}

/// The long rows of a [`SpmvStrategy::Split`] plan, cut into chunks, on the device.
struct LongRows {
    /// (num_long) the rows longer than the strategy's `long_row`, ascending.
    rows: CudaSlice<i32>,
    /// (num_long + 1) index of each row's first chunk.
    row_chunks: CudaSlice<i32>,
    /// (2 * chunks) [start, end) of each chunk in A's entries.
    chunk_bounds: CudaSlice<i32>,
    /// (chunks) the chunks' sums, f64 for f64 matrices and f32 otherwise (allocated as f64: big enough for both).
    partials: CudaSlice<f64>,
    num_long: usize,
    chunks: usize,
}

/// The entry tiles of a [`SpmvStrategy::Segmented`] plan, on the device.
struct EntryTiles {
    /// (count + 1) the first row starting in each tile, then m.
    rows: CudaSlice<i32>,
    /// (2 * count) each tile's head (its first row's part, when that row began before the tile), then each tile's
    /// tail (its last row's part, when that row runs past the tile); f64 for f64 matrices, f32 otherwise.
    partials: CudaSlice<f64>,
    count: usize,
}

/// The host side of a split: long rows, each one's first chunk, and every chunk's entry range.
fn chunk_long_rows(indptr: &[i32], long_row: u32) -> (Vec<i32>, Vec<i32>, Vec<i32>) {
    let (mut rows, mut row_chunks, mut bounds) = (Vec::new(), vec![0i32], Vec::new());
    for (r, w) in indptr.windows(2).enumerate() {
        if (w[1] - w[0]) as i64 > long_row as i64 {
            rows.push(r as i32);
            let mut start = w[0];
            while start < w[1] {
                let end = start.saturating_add(CHUNK as i32).min(w[1]);
                bounds.extend([start, end]);
                start = end;
            }
            row_chunks.push((bounds.len() / 2) as i32);
        }
    }
    (rows, row_chunks, bounds)
}

/// The work split of the production SpMV for one matrix, and the workspace it needs. Made once per matrix
/// ([`SpmvPlan::new`]) and valid only for that matrix: [`spmv`] refuses it with any other (another upload of
/// the same matrix included). The shape it keeps is for that error's message.
///
/// When every entry's column - row fits in 16 bits (banded matrices: stencils, meshes in a bandwidth-reducing
/// order), the plan also keeps those offsets (2 bytes per entry on the device), and the vector kernel reads
/// them instead of the 32-bit column indices: 6 bytes per f32 entry instead of 8 (NOTES.md, "Production SpMV",
/// step 5). Same columns, same order: the same bits as without them.
pub struct SpmvPlan {
    strategy: SpmvStrategy,
    rows: usize,
    cols: usize,
    nnz: usize,
    matrix: u64,
    long: Option<LongRows>,
    tiles: Option<EntryTiles>,
    offsets16: Option<CudaSlice<i16>>,
    /// Held over a call's launches: the split's and the entry tiles' partials are scratch that one call's
    /// kernels write and its fix-up reads, so two threads sharing the plan must not interleave them.
    launching: std::sync::Mutex<()>,
    kernels: PlanKernels,
}

/// The kernels a plan launches, looked up when it is made rather than by a name built on every call (which cost the
/// SpMM tiles 0.4-0.6 us of host time per product; NOTES.md, "SpMM step 112").
struct PlanKernels {
    /// The vector, block-per-row or segmented kernel.
    main: CudaFunction,
    /// A split's long-row chunks (the block kernel), where the matrix has long rows.
    chunks: Option<CudaFunction>,
    /// The segmented kernel's fix-up, or a split's long-row fix-up where the matrix has long rows.
    fixup: Option<CudaFunction>,
}

impl PlanKernels {
    fn of(gpu: &Gpu, dtype: DType, strategy: SpmvStrategy, offsets16: bool, long_rows: bool) -> Result<Self> {
        let f = |kernel: ProductionKernel| gpu.function(Family::Spmv, &kernel.name(dtype));
        Ok(match strategy {
            SpmvStrategy::Segmented => PlanKernels {
                main: f(ProductionKernel::Segmented)?,
                chunks: None,
                fixup: Some(f(ProductionKernel::SegmentedFixup)?),
            },
            SpmvStrategy::BlockPerRow => PlanKernels { main: f(ProductionKernel::Block)?, chunks: None, fixup: None },
            SpmvStrategy::Vector { threads_per_row } | SpmvStrategy::Split { threads_per_row, .. } => PlanKernels {
                main: f(if offsets16 {
                    ProductionKernel::VectorOffsets16(threads_per_row)
                } else {
                    ProductionKernel::Vector(threads_per_row)
                })?,
                chunks: if long_rows { Some(f(ProductionKernel::Block)?) } else { None },
                fixup: if long_rows { Some(f(ProductionKernel::Fixup)?) } else { None },
            },
        })
    }
}

/// Row entries each lane of a vector-kernel subwarp should walk ([`SpmvPlan::choose`]).
const ENTRIES_PER_LANE: f64 = 7.0;
/// Entries up to which a skewed matrix is small enough for one widened vector kernel ([`SpmvPlan::choose`]).
pub const SMALL_NNZ: usize = 1 << 22;

impl SpmvPlan {
    /// The strategy for a matrix with these row statistics (NOTES.md, "Production SpMV", says why):
    /// - rows uniformly long (mean >= [`BLOCK_PER_ROW_MEAN`], cv <= [`SKEWED_CV`]): [`SpmvStrategy::BlockPerRow`];
    /// - otherwise a subwarp of T = the power of two nearest above mean / 7, clamped to 1..=32, per row: each
    ///   lane walks about seven entries. Measured on the H100 (NOTES.md, "Production SpMV", step 2): the
    ///   27-point Laplacian (26.7 per row) runs at 92% of copy bandwidth with T = 4 and at 57% with T = 16
    ///   (the first rule, mean / 2); uniform 16 per row is within 2% for T = 2..16;
    /// - skewed (cv > [`SKEWED_CV`]) with rows longer than `long_row` = max(32 T, 256) (rows a subwarp would
    ///   walk for more than 32 steps): [`SpmvStrategy::Segmented`], the same work per block whatever the rows.
    ///   Measured on the H100 (NOTES.md, "Production SpMV", step 8): the 67 M-entry power law 0.581 ms against
    ///   0.665 ms with the split of step 2 ([`SpmvStrategy::Split`], still available) and cuSPARSE's 0.593 ms;
    ///   not where rows are even, where the matrix stream bounds the time (27-point Laplacian: 0.392 ms vs
    ///   0.261 ms with the vector kernel);
    /// - except a small matrix (nnz <= [`SMALL_NNZ`]) whose longest row a warp walks in at most 64 steps (max <=
    ///   2048): one vector kernel with the subwarp widened to max / 64 lanes (up to 32), since at that size the
    ///   split's two extra launches are the cost. Measured on the H100 (NOTES.md, "Production SpMV", step 3):
    ///   email-Enron (367 662 entries, longest row 1383) 19.0 us split (t2, long rows over 256) vs 9.2 us with
    ///   t32 and 10.4 us with t16; on the 67 M-entry power law a t32 vector kernel is 1.9x slower than the split.
    ///   The entry tiles run the small real matrices in 8-11 us against the vector kernel's 5-10 us (step 8).
    pub fn choose(stats: &RowStats, rows: usize, nnz: usize) -> SpmvStrategy {
        if rows == 0 || nnz == 0 {
            return SpmvStrategy::Vector { threads_per_row: 1 };
        }
        if stats.mean >= BLOCK_PER_ROW_MEAN && stats.cv <= SKEWED_CV {
            return SpmvStrategy::BlockPerRow;
        }
        let lanes = (stats.mean / ENTRIES_PER_LANE).ceil().clamp(1.0, 32.0) as u32;
        let threads_per_row = lanes.next_power_of_two();
        let long_row = (32 * threads_per_row).max(256);
        if stats.cv > SKEWED_CV && stats.max > long_row as usize {
            if nnz <= SMALL_NNZ && stats.max <= 64 * 32 {
                let wide = (stats.max.div_ceil(64).next_power_of_two() as u32).clamp(threads_per_row, 32);
                return SpmvStrategy::Vector { threads_per_row: wide };
            }
            SpmvStrategy::Segmented
        } else {
            SpmvStrategy::Vector { threads_per_row }
        }
    }

    /// The plan [`SpmvPlan::choose`] picks from `a`'s upload statistics.
    pub fn new<T: Scalar>(gpu: &Gpu, a: &DeviceCsr<T>) -> Result<Self> {
        Self::with_strategy(gpu, a, Self::choose(a.stats(gpu)?, a.rows(), a.nnz()))
    }

    /// A plan with a forced strategy (tests, benchmarks), with 16-bit column offsets where they fit.
    pub fn with_strategy<T: Scalar>(gpu: &Gpu, a: &DeviceCsr<T>, strategy: SpmvStrategy) -> Result<Self> {
        Self::with_options(gpu, a, strategy, true)
    }

    /// A plan with a forced strategy; `offsets16`: try the 16-bit column offsets (used only if every entry's
    /// column - row fits in an i16, and only by the vector kernel; one pass over the indices, one flag read
    /// back). A split downloads the row pointer once to list the long rows and uploads their chunks.
    pub fn with_options<T: Scalar>(
        gpu: &Gpu,
        a: &DeviceCsr<T>,
        strategy: SpmvStrategy,
        offsets16: bool,
    ) -> Result<Self> {
        a.check_gpu(gpu, "A")?;
        gpu.refuse_while_recording("making an SpMV plan (it reads back what it derives)")?;
        let invalid = |rule: &str| Error::InvalidConfig { config: strategy.to_string(), rule: rule.to_string() };
        let long = match strategy {
            SpmvStrategy::Vector { threads_per_row } | SpmvStrategy::Split { threads_per_row, .. }
                if !THREADS_PER_ROW.contains(&threads_per_row) =>
            {
                return Err(invalid("threads_per_row must be 1, 2, 4, 8, 16 or 32"));
            }
            SpmvStrategy::Split { long_row, .. } if long_row > i32::MAX as u32 => {
                return Err(invalid("long_row must fit in i32"));
            }
            SpmvStrategy::Split { long_row, .. } => {
                let indptr = gpu
                    .stream()
                    .clone_dtoh(&a.row_offsets)
                    .map_err(Error::driver("downloading the row pointer for the SpMV plan", 0))?;
                let (rows, row_chunks, bounds) = chunk_long_rows(&indptr[..=a.rows()], long_row);
                let (num_long, chunks) = (rows.len(), bounds.len() / 2);
                let up = |v: &[i32], what| crate::csr::upload_slice(gpu, v, what);
                Some(LongRows {
                    rows: up(&rows, "uploading the SpMV long rows")?,
                    row_chunks: up(&row_chunks, "uploading the SpMV long-row chunks")?,
                    chunk_bounds: up(&bounds, "uploading the SpMV chunk bounds")?,
                    partials: gpu
                        .stream()
                        .alloc_zeros::<f64>(chunks.max(1))
                        .map_err(Error::driver("allocating the SpMV chunk partials", chunks.max(1) * 8))?,
                    num_long,
                    chunks,
                })
            }
            _ => None,
        };
        let tiles = match strategy {
            SpmvStrategy::Segmented => Some(entry_tiles(gpu, a)?),
            _ => None,
        };
        let offsets16 = match strategy {
            SpmvStrategy::Vector { .. } | SpmvStrategy::Split { .. } if offsets16 && a.nnz() > 0 => {
                encode_offsets16(gpu, a)?
            }
            _ => None,
        };
        let long_rows = long.as_ref().is_some_and(|l| l.num_long > 0);
        let kernels = PlanKernels::of(gpu, T::DTYPE, strategy, offsets16.is_some(), long_rows)?;
        Ok(SpmvPlan {
            strategy,
            rows: a.rows(),
            cols: a.cols(),
            nnz: a.nnz(),
            matrix: a.id(),
            long,
            tiles,
            offsets16,
            launching: std::sync::Mutex::new(()),
            kernels,
        })
    }

    /// Whether the vector kernel reads 16-bit column offsets (see the type's documentation).
    pub fn offsets16(&self) -> bool {
        self.offsets16.is_some()
    }

    /// The strategy this plan runs.
    pub fn strategy(&self) -> SpmvStrategy {
        self.strategy
    }

    /// Rows handled by the long-row kernels (0 unless the strategy is a split).
    pub fn long_rows(&self) -> usize {
        self.long.as_ref().map_or(0, |l| l.num_long)
    }
}

/// The entry tiles of A: one binary search of the row pointer per tile, on the device (`spmv_tile_rows`). At least
/// one tile, so that a matrix without entries still gets its (empty) rows written.
fn entry_tiles<T: Scalar>(gpu: &Gpu, a: &DeviceCsr<T>) -> Result<EntryTiles> {
    let stream = gpu.stream();
    let count = a.nnz().div_ceil(SEGMENT_TILE).max(1);
    let mut rows = stream
        .alloc_zeros::<i32>(count + 1)
        .map_err(Error::driver("allocating the SpMV tile rows", (count + 1) * 4))?;
    let partials =
        stream.alloc_zeros::<f64>(2 * count).map_err(Error::driver("allocating the SpMV tile partials", 16 * count))?;
    {
        let (row_offsets, _g1) = a.row_offsets.device_ptr(stream);
        let (column_indices, _g2) = a.column_indices.device_ptr(stream);
        let (tile_rows, _g3) = rows.device_ptr_mut(stream);
        let params = SpmvCsrParams {
            num_long: count as i32,
            tile_rows,
            ..SpmvCsrParams::structure(a.rows(), a.cols(), row_offsets, column_indices)
        };
        let f = gpu.function(Family::Spmv, "spmv_tile_rows")?;
        let cfg = LaunchConfig {
            grid_dim: ((count + 1).div_ceil(BLOCK as usize) as u32, 1, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: threads t <= count write tile_rows[t] (count + 1 of them) and read row_offsets[0..m) (validated at
        // upload, m + 1 long).
        unsafe { stream.launch_builder(&f).arg(&params).launch(cfg) }
            .map_err(Error::driver("launching the SpMV tile search", 0))?;
    }
    Ok(EntryTiles { rows, partials, count })
}

/// A's column - row offsets as i16, or None when one does not fit (or there is no memory for them: they are an
/// optimisation, the plan works without).
fn encode_offsets16<T: Scalar>(gpu: &Gpu, a: &DeviceCsr<T>) -> Result<Option<CudaSlice<i16>>> {
    // The encoding kernel's grid-stride loop steps its int row by up to 2^28: past this many rows it could
    // wrap, so such matrices keep their 32-bit indices.
    if a.rows() > i32::MAX as usize - (1 << 28) {
        return Ok(None);
    }
    let stream = gpu.stream();
    let Ok(offsets) = stream.alloc_zeros::<i16>(a.nnz()) else { return Ok(None) };
    let overflow = stream.alloc_zeros::<i32>(1).map_err(Error::driver("allocating the SpMV plan's flag", 4))?;
    {
        let (row_offsets, _g1) = a.row_offsets.device_ptr(stream);
        let (column_indices, _g2) = a.column_indices.device_ptr(stream);
        let (column_offsets, _g3) = offsets.device_ptr(stream);
        let (overflow_ptr, _g4) = overflow.device_ptr(stream);
        let params = SpmvCsrParams {
            column_offsets,
            overflow: overflow_ptr,
            ..SpmvCsrParams::structure(a.rows(), a.cols(), row_offsets, column_indices)
        };
        let f = gpu.function(Family::Spmv, "spmv_encode_offsets16")?;
        let cfg = LaunchConfig {
            grid_dim: (a.rows().div_ceil(BLOCK as usize).clamp(1, 1 << 20) as u32, 1, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: a grid-stride loop over rows < m; A was validated at upload (offsets monotone, <= nnz), and
        // entry i's offset goes to column_offsets[i], i < nnz = its length; the flag is one i32.
        unsafe { stream.launch_builder(&f).arg(&params).launch(cfg) }
            .map_err(Error::driver("launching the SpMV offset encoding", 0))?;
    }
    let flag = stream.clone_dtoh(&overflow).map_err(Error::driver("reading the SpMV plan's flag", 0))?;
    Ok((flag[0] == 0).then_some(offsets))
}

/// y = alpha * A x + beta * y with the production kernels, as `plan` splits the work. Values are f32, f64, f16 or
/// bf16; sums run in f64 for f64 and in f32 otherwise; alpha and beta are rounded to that type. With beta == 0,
/// y is only written (NaN there does not leak). The same inputs give the same bits on every run.
pub fn spmv<T: Scalar>(
    gpu: &Gpu,
    a: &DeviceCsr<T>,
    x: &CudaSlice<T>,
    alpha: f64,
    beta: f64,
    y: &mut CudaSlice<T>,
    plan: &SpmvPlan,
) -> Result<()> {
    check_operands(gpu, a, x, y)?;
    // One identity per upload, device build or structure rewrite: a plan of the same matrix also has its shape.
    if plan.matrix != a.id() {
        return Err(Error::ShapeMismatch(format!(
            "the SpMV plan was made for another matrix ({} x {}, {} entries; A is {} x {} with {}): make one \
             with SpmvPlan::new for each matrix",
            plan.rows,
            plan.cols,
            plan.nnz,
            a.rows(),
            a.cols(),
            a.nnz()
        )));
    }
    if a.rows() == 0 {
        return Ok(());
    }
    let _launching = plan.launching.lock().unwrap_or_else(|e| e.into_inner());
    let main = &plan.kernels.main;
    let stream = gpu.stream();
    let (values, _g1) = a.values.device_ptr(stream);
    let (row_offsets, _g2) = a.row_offsets.device_ptr(stream);
    let (column_indices, _g3) = a.column_indices.device_ptr(stream);
    let (x_ptr, _g4) = x.device_ptr(stream);
    let (y_ptr, _g5) = y.device_ptr_mut(stream);
    let mut params = SpmvCsrParams {
        alpha,
        beta,
        values,
        x: x_ptr,
        y: y_ptr,
        ..SpmvCsrParams::structure(a.rows(), a.cols(), row_offsets, column_indices)
    };
    let offsets16 = plan.offsets16.as_ref().map(|o| o.device_ptr(stream));
    if let Some((ptr, _)) = &offsets16 {
        params.column_offsets = *ptr;
    }
    let grid = |items: usize, block: u32| LaunchConfig {
        grid_dim: (items.div_ceil(block as usize) as u32, 1, 1),
        block_dim: (block, 1, 1),
        shared_mem_bytes: 0,
    };
    let threads_per_row = match plan.strategy {
        SpmvStrategy::Segmented => {
            let tiles = plan.tiles.as_ref().expect("a segmented plan holds its tiles");
            let (rows_ptr, _g6) = tiles.rows.device_ptr(stream);
            let (partials_ptr, _g7) = tiles.partials.device_ptr(stream);
            (params.tile_rows, params.partials, params.num_long) = (rows_ptr, partials_ptr, tiles.count as i32);
            // SAFETY: one block per tile < count; the tiles were cut from this matrix (the identity check above):
            // a block reads entries [b * SEGMENT_TILE, min(nnz, (b + 1) * SEGMENT_TILE)) and rows tile_rows[b]
            // ..< tile_rows[b + 1] <= m with their row pointer entries (< m + 1); columns < k <= x.len(); each
            // row's y is written by one thread (the block its row starts in, or the fix-up); partials holds 2 *
            // count f64 >= the accumulation type.
            unsafe { stream.launch_builder(main).arg(&params).launch(grid(tiles.count * BLOCK as usize, BLOCK)) }
                .map_err(Error::driver("launching the segmented SpMV", 0))?;
            let fixup = plan.kernels.fixup.as_ref().expect("a segmented plan holds its fix-up");
            // SAFETY: one thread per tile < count; it reads tile_rows, the row pointer at tile_rows[t + 1] <= m and
            // the partials of the tiles its row covers (< count, since the row ends at or before nnz).
            unsafe { stream.launch_builder(fixup).arg(&params).launch(grid(tiles.count, FIXUP_BLOCK)) }
                .map_err(Error::driver("launching the segmented SpMV fix-up", 0))?;
            return Ok(());
        }
        SpmvStrategy::BlockPerRow => {
            // SAFETY: one block per row < m; A was validated at upload (offsets monotone and <= nnz, columns
            // < k <= x.len()); each row's block writes only y[row], row < m <= y.len().
            unsafe { stream.launch_builder(main).arg(&params).launch(grid(a.rows() * BLOCK as usize, BLOCK)) }
                .map_err(Error::driver("launching the block-per-row SpMV", 0))?;
            return Ok(());
        }
        SpmvStrategy::Vector { threads_per_row } => threads_per_row,
        SpmvStrategy::Split { threads_per_row, long_row } => {
            let long = plan.long.as_ref().expect("a split plan holds its long rows");
            params.long_row = long_row as i32;
            params.num_long = long.num_long as i32;
            if long.num_long > 0 {
                let (rows_ptr, _g6) = long.rows.device_ptr(stream);
                let (chunks_ptr, _g7) = long.row_chunks.device_ptr(stream);
                let (bounds_ptr, _g8) = long.chunk_bounds.device_ptr(stream);
                let (partials_ptr, _g9) = long.partials.device_ptr(stream);
                (params.long_rows, params.long_row_chunks, params.chunk_bounds, params.partials) =
                    (rows_ptr, chunks_ptr, bounds_ptr, partials_ptr);
                let chunk_kernel =
                    plan.kernels.chunks.as_ref().expect("a split plan with long rows holds their kernel");
                // SAFETY: one block per chunk < chunks; the bounds were cut from this matrix's row pointer (the
                // plan's shape and nnz match A), so they lie in 0..nnz; partials holds `chunks` f64 >= the
                // accumulation type.
                unsafe {
                    stream.launch_builder(chunk_kernel).arg(&params).launch(grid(long.chunks * BLOCK as usize, BLOCK))
                }
                .map_err(Error::driver("launching the SpMV long-row chunks", 0))?;
                let fixup = plan.kernels.fixup.as_ref().expect("a split plan with long rows holds their fix-up");
                // SAFETY: one thread per long row < num_long; its chunk range lies in 0..chunks, its row < m.
                unsafe { stream.launch_builder(fixup).arg(&params).launch(grid(long.num_long, FIXUP_BLOCK)) }
                    .map_err(Error::driver("launching the SpMV long-row fix-up", 0))?;
            }
            threads_per_row
        }
    };
    // SAFETY: threads_per_row lanes per row < m (checked against THREADS_PER_ROW when the plan was made); A was
    // validated at upload; each row's lane 0 writes only y[row], and rows longer than long_row are skipped. The
    // 16-bit offsets (nnz of them) were encoded from this matrix (the plan's identity check above) with no
    // entry out of i16 range, so row + offset is the entry's column index, < k.
    unsafe { stream.launch_builder(main).arg(&params).launch(grid(a.rows() * threads_per_row as usize, BLOCK)) }
        .map_err(Error::driver("launching the vector SpMV", 0))?;
    Ok(())
}

/// One way of gathering x for [`spmv_gather_probe`]: how many gathers each thread keeps in flight, and whether
/// they bypass L1 (`ld.global.nc.L1::no_allocate`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GatherProbe {
    pub in_flight: u32,
    pub l1_no_allocate: bool,
}

impl GatherProbe {
    /// Every compiled probe (`spmv_gather_probe_f32*` in cuda/spmv/spmv_csr.cu).
    pub const ALL: [GatherProbe; 6] = [
        GatherProbe { in_flight: 4, l1_no_allocate: false },
        GatherProbe { in_flight: 8, l1_no_allocate: false },
        GatherProbe { in_flight: 16, l1_no_allocate: false },
        GatherProbe { in_flight: 4, l1_no_allocate: true },
        GatherProbe { in_flight: 8, l1_no_allocate: true },
        GatherProbe { in_flight: 16, l1_no_allocate: true },
    ];

    /// The kernel's name; `None` for a probe that is not compiled.
    pub fn kernel_name(self) -> Option<String> {
        let u = match self.in_flight {
            4 => "",
            8 => "_u8",
            16 => "_u16",
            _ => return None,
        };
        Some(format!("spmv_gather_probe_f32{u}{}", if self.l1_no_allocate { "_na" } else { "" }))
    }
}

impl std::fmt::Display for GatherProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "x_gathers_alone_u{}{}", self.in_flight, if self.l1_no_allocate { "_na" } else { "" })
    }
}

/// Measurement only (`tilesparse bench spmv`): reads A's column indices once in order and gathers x at each,
/// nothing else (`spmv_gather_probe_f32*`, gathering as `probe` says); `sink` (A's rows long) receives one sum per
/// warp. Its time is the cost of the x gathers of a CSR SpMV on their own: the fastest probe is a floor for any
/// kernel that reads x once per entry.
pub fn spmv_gather_probe(
    gpu: &Gpu,
    a: &DeviceCsr<f32>,
    x: &CudaSlice<f32>,
    sink: &mut CudaSlice<f32>,
    probe: GatherProbe,
) -> Result<()> {
    let name = probe.kernel_name().ok_or_else(|| Error::Unsupported {
        config: probe.to_string(),
        reason: "gather probes are compiled for 4, 8 and 16 gathers in flight".into(),
    })?;
    check_operands(gpu, a, x, sink)?;
    if a.rows() == 0 || a.nnz() == 0 {
        return Ok(());
    }
    let stream = gpu.stream();
    let (row_offsets, _g1) = a.row_offsets.device_ptr(stream);
    let (column_indices, _g2) = a.column_indices.device_ptr(stream);
    let (x_ptr, _g3) = x.device_ptr(stream);
    let (y_ptr, _g4) = sink.device_ptr_mut(stream);
    let params = SpmvCsrParams {
        x: x_ptr,
        y: y_ptr,
        ..SpmvCsrParams::structure(a.rows(), a.cols(), row_offsets, column_indices)
    };
    // Enough blocks for every SM at full occupancy, fewer for a small matrix.
    let blocks = a.nnz().div_ceil(BLOCK as usize).min(gpu.info().sm_count.max(1) * 8).max(1);
    let cfg = LaunchConfig { grid_dim: (blocks as u32, 1, 1), block_dim: (BLOCK, 1, 1), shared_mem_bytes: 0 };
    let f = gpu.function(Family::Spmv, &name)?;
    // SAFETY: a grid-stride loop over entries < nnz = row_offsets[m] (validated at upload), each column < k <=
    // x.len(); warp w < m writes sink[w], sink.len() >= m.
    unsafe { stream.launch_builder(&f).arg(&params).launch(cfg) }
        .map_err(Error::driver("launching the SpMV gather probe", 0))?;
    Ok(())
}

/// Element-wise bound on |y - y~| for the production SpMV and the CPU backend's, y~ being the f64 oracle's y
/// ([`oracle::spmv`]) on the same (already rounded) stored inputs. `y` must be given when beta != 0, and is read
/// only then.
///
/// Derivation, for row i of l entries, with S = (|A||x|)_i and the oracle's s~ = (A x)_i, S' = S~ / (1 - g64)
/// and g64 = gamma_f64(l) as in [`oracle::spmm_error_bound`], and u the accumulation's unit roundoff (f32's for
/// f32/f16/bf16, f64's for f64):
/// 1. The kernel's sum s^ of the l products, in whatever order (a subwarp's lanes and shuffles, a long row's chunk
///    partials added in order, a segmented tile's pieces), is within g S of the exact s, g = gamma(l + 1, u)
///    (Higham eq. 3.5, with one rounding to spare), and |s^| <= (1 + g) S'.
/// 2. The epilogue e = alpha' s^ + beta' y_i (alpha and beta rounded to the accumulation type, a product each, an
///    add or an FMA): each term meets at most 3 roundings, so e is within gamma(3, u) (|alpha| (1 + g) S' +
///    |beta y_i|) of alpha s^ + beta y_i (alpha and beta are taken to be 0 or normal in the accumulation type).
/// 3. The oracle: |s~ - s| <= g64 S', and its f64 alpha s~ + beta y_i is within gamma_f64(2) (|alpha s~| +
///    |beta y_i|) of the exact value of that expression.
/// 4. Storing e to the output type (to nearest) costs at most u_out |e| <= u_out (|y~| + E), E the sum of 1-3:
///
/// |y_i - y~_i| <= (1 + u_out) E + u_out |y~_i| + floor, with
/// E = |alpha| (g + g64) S' + gamma(3, u) (|alpha| (1 + g) S' + |beta y_i|) + gamma_f64(2) (|alpha s~| + |beta y_i|).
///
/// Storing is charged to |y~_i|, not to |alpha| S + |beta y_i| as the earlier bound did: on a row whose products
/// cancel, rounding to f16 no longer hides a dropped product. The floor is max(|alpha|, 1) times the
/// output type's ([`oracle::output_floor`]: gradual underflow of the sum and of the stored value) plus 1e-30 for
/// the epilogue's products (2^-150 each in f32).
pub fn spmv_error_bound<T: Scalar>(a: CsMatView<T>, x: &[T], alpha: f64, beta: f64, y: Option<&[T]>) -> Vec<f64> {
    let u_acc = if T::DTYPE == DType::F64 { DType::F64 } else { DType::F32 }.unit_roundoff();
    let (u_out, u64_) = (T::DTYPE.unit_roundoff(), f64::EPSILON / 2.0);
    let abs = oracle::spmm_abs(a, x, 1);
    let s = oracle::spmm(a, x, 1);
    let want = oracle::spmv(a, x, alpha, y, beta);
    let (g_epilogue, g_oracle) = (oracle::gamma(3, u_acc), oracle::gamma(2, u64_));
    let floor = alpha.abs().max(1.0) * oracle::output_floor(u_out) + 1e-30;
    a.outer_iterator()
        .enumerate()
        .map(|(i, row)| {
            let l = row.nnz();
            let by = match y {
                Some(y) if beta != 0.0 => (beta * y[i].to_f64()).abs(),
                _ => 0.0,
            };
            // |alpha| (g + g64) S' and |alpha| (1 + g) S'; zero for an exact zero (alpha = 0 or no nonzero
            // product), also where g is infinite (inf * 0 would be NaN).
            let (accumulation, alpha_s) = if alpha == 0.0 || abs[i] == 0.0 {
                (0.0, 0.0)
            } else {
                let (g, g64) = (oracle::gamma(l + 1, u_acc), oracle::gamma(l, u64_));
                let s_exact = abs[i] / (1.0 - g64);
                (alpha.abs() * (g + g64) * s_exact, alpha.abs() * (1.0 + g) * s_exact)
            };
            let e = accumulation + g_epilogue * (alpha_s + by) + g_oracle * ((alpha * s[i]).abs() + by);
            (1.0 + u_out) * e + u_out * want[i].abs() + floor
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gather_probes_name_distinct_kernels_and_refuse_others() {
        let names: std::collections::HashSet<String> =
            GatherProbe::ALL.iter().map(|p| p.kernel_name().expect("every listed probe is compiled")).collect();
        assert_eq!(names.len(), GatherProbe::ALL.len());
        assert_eq!(GatherProbe::ALL[0].kernel_name().as_deref(), Some("spmv_gather_probe_f32"));
        assert_eq!(GatherProbe { in_flight: 16, l1_no_allocate: true }.to_string(), "x_gathers_alone_u16_na");
        assert_eq!(GatherProbe { in_flight: 2, l1_no_allocate: false }.kernel_name(), None);
    }

    fn stats(lens: &[usize]) -> (RowStats, usize, usize) {
        let mut indptr = vec![0usize];
        for &l in lens {
            indptr.push(indptr.last().unwrap() + l);
        }
        (RowStats::from_indptr(&indptr), lens.len(), *indptr.last().unwrap())
    }

    #[test]
    fn choose_picks_the_subwarp_from_the_mean() {
        for (len, t) in [(1, 1), (2, 1), (7, 1), (8, 2), (16, 4), (27, 4), (64, 16), (400, 32)] {
            let (s, m, nnz) = stats(&vec![len; 1000]);
            assert_eq!(SpmvPlan::choose(&s, m, nnz), SpmvStrategy::Vector { threads_per_row: t }, "row length {len}");
        }
    }

    #[test]
    fn choose_gives_long_uniform_rows_a_block_and_skewed_matrices_entry_tiles() {
        let (s, m, nnz) = stats(&vec![2000; 100]);
        assert_eq!(SpmvPlan::choose(&s, m, nnz), SpmvStrategy::BlockPerRow);
        // Power-law-like: mostly short rows, a few very long ones.
        let mut lens = vec![6usize; 10_000];
        lens[17] = 200_000;
        lens[500] = 3_000;
        let (s, m, nnz) = stats(&lens);
        assert!(s.cv > SKEWED_CV);
        assert_eq!(SpmvPlan::choose(&s, m, nnz), SpmvStrategy::Segmented);
        // A small skewed graph like email-Enron (hubs among short rows, longest row 1383): one kernel, a warp
        // per row.
        let hubs = |rows: usize| -> Vec<usize> {
            (0..rows)
                .map(|r| {
                    if r == 7 {
                        1383
                    } else if r % 100 == 0 {
                        1000
                    } else {
                        3
                    }
                })
                .collect()
        };
        let (s, m, nnz) = stats(&hubs(30_000));
        assert!(s.cv > SKEWED_CV && nnz <= SMALL_NNZ);
        assert_eq!(SpmvPlan::choose(&s, m, nnz), SpmvStrategy::Vector { threads_per_row: 32 });
        // The same rows in a matrix past SMALL_NNZ entries: entry tiles.
        let (s, m, nnz) = stats(&hubs(500_000));
        assert!(s.cv > SKEWED_CV && nnz > SMALL_NNZ);
        assert_eq!(SpmvPlan::choose(&s, m, nnz), SpmvStrategy::Segmented);
        // Skewed but every row within the vector kernel's reach: no split.
        let mut lens = vec![1usize; 10_000];
        lens[3] = 200;
        let (s, m, nnz) = stats(&lens);
        assert_eq!(SpmvPlan::choose(&s, m, nnz), SpmvStrategy::Vector { threads_per_row: 1 });
        // Nothing to do.
        let (s, m, nnz) = stats(&[0, 0, 0]);
        assert_eq!(SpmvPlan::choose(&s, m, nnz), SpmvStrategy::Vector { threads_per_row: 1 });
        assert_eq!(SpmvPlan::choose(&RowStats::default(), 0, 0), SpmvStrategy::Vector { threads_per_row: 1 });
    }

    #[test]
    fn long_rows_are_cut_into_chunks_that_cover_them() {
        let indptr = [0, 3, 3 + 10_000, 3 + 10_000 + 300, 3 + 10_000 + 300 + 4096];
        let (rows, row_chunks, bounds) = chunk_long_rows(&indptr, 256);
        assert_eq!(rows, vec![1, 2, 3]);
        assert_eq!(row_chunks, vec![0, 3, 4, 5]);
        assert_eq!(bounds, vec![3, 4099, 4099, 8195, 8195, 10_003, 10_003, 10_303, 10_303, 14_399]);
    }

    #[test]
    fn kernel_names_match_the_cuda_instantiations() {
        assert_eq!(ProductionKernel::Vector(16).name(DType::Bf16), "spmv_csr_vector_bf16_t16");
        assert_eq!(ProductionKernel::Block.name(DType::F64), "spmv_csr_block_f64");
        assert_eq!(ProductionKernel::Fixup.name(DType::F16), "spmv_csr_fixup_f16");
        assert_eq!(ProductionKernel::Segmented.name(DType::F32), "spmv_csr_segmented_f32");
        assert_eq!(ProductionKernel::SegmentedFixup.name(DType::F64), "spmv_csr_segmented_fixup_f64");
        // The CUDA side pastes the same names from these macros: every dtype and width must be instantiated.
        let cu = include_str!("../cuda/spmv/spmv_csr.cu");
        assert!(cu.contains("spmv_csr_vector_##tag##_t##threads"), "vector kernel name pattern changed");
        assert!(cu.contains("spmv_csr_block_##tag") && cu.contains("spmv_csr_fixup_##tag"), "name pattern changed");
        assert!(cu.contains("spmv_csr_segmented_##tag") && cu.contains("spmv_csr_segmented_fixup_##tag"));
        // SEGMENT_TILE mirrors kSpmvBlock * kSegmentItems.
        assert!(cu.contains("constexpr int kSpmvBlock = 256;") && cu.contains("constexpr int kSegmentItems = 8;"));
        assert_eq!(SEGMENT_TILE, 256 * 8);
        for dtype in [DType::F32, DType::F64, DType::F16, DType::Bf16] {
            assert!(cu.contains(&format!("TILESPARSE_SPMV_DTYPE({dtype}, ")), "{dtype} is not instantiated");
        }
        for t in THREADS_PER_ROW {
            assert!(cu.contains(&format!("TILESPARSE_SPMV_VECTOR(tag, Value, {t})")), "width {t} is not instantiated");
        }
    }

    /// The SpMV bound charges storing to |y~|: on a row of 127 pairs (+v, -v) and an entry 0.125 (f16, x all
    /// ones, y~ = 2 * 0.125 + 0.5 * 0.5), y computed exactly and rounded passes, dropping the 0.125 fails
    /// although it is below 2^-11 of |alpha| |A||x| (about 0.37, what the earlier bound charged storing to); an
    /// alpha of 0 leaves only beta's part, and an empty row only the floor and beta's part.
    #[test]
    fn spmv_bound_charges_storing_to_y() {
        use half::f16;
        use sprs::CsMat;
        let mut values: Vec<f16> =
            (0..127).flat_map(|k| [1.0 + k as f32 / 128.0, -1.0 - k as f32 / 128.0]).map(f16::from_f32).collect();
        values.push(f16::from_f32(0.125));
        let len = values.len();
        let a = CsMat::new((2, len), vec![0, len, len], (0..len).collect(), values);
        let x = vec![f16::from_f32(1.0); len];
        let y = [f16::from_f32(0.5), f16::from_f32(0.5)];
        let (alpha, beta) = (2.0, 0.5);
        let want = oracle::spmv(a.view(), &x, alpha, Some(&y), beta);
        assert_eq!(want, vec![0.5, 0.25]);
        let bound = spmv_error_bound(a.view(), &x, alpha, beta, Some(&y));
        let stored = |v: f64| f16::from_f64(v).to_f64();
        assert_eq!(oracle::compare(&[stored(0.5), stored(0.25)], &want, &bound).mismatches, 0);
        let dropped = [stored(0.5 - alpha * 0.125), stored(0.25)];
        assert_eq!(oracle::compare(&dropped, &want, &bound).mismatches, 1, "{bound:?}");
        let magnitude = alpha * oracle::spmm_abs(a.view(), &x, 1)[0];
        assert!(
            alpha * 0.125 < 2f64.powi(-11) * magnitude && bound[0] < 0.02,
            "{bound:?}, |alpha| |A||x| = {magnitude}"
        );
        // The empty row: beta y rounded (3 roundings in f32) and stored in f16.
        let u = 2f64.powi(-24);
        let g3 = 3.0 * u / (1.0 - 3.0 * u);
        let g2 = 2.0 * f64::EPSILON / 2.0 / (1.0 - f64::EPSILON);
        let floor = 2.0 * 2f64.powi(-25) + 1e-30;
        let empty = (1.0 + 2f64.powi(-11)) * (g3 + g2) * 0.25 + 2f64.powi(-11) * 0.25 + floor;
        assert!((bound[1] - empty).abs() <= 1e-15 * empty, "{} vs {empty}", bound[1]);
        // alpha = 0: the row's products play no part.
        let zero = spmv_error_bound(a.view(), &x, 0.0, beta, Some(&y));
        assert_eq!(zero[0], zero[1]);
    }
}
