//! Sputnik-style tiled SpMM: C (m x n) = A (m x k, CSR) * B (k x n, row-major), optionally scaled (C = alpha A B +
//! beta C) and + bias and ReLU ([`SpmmEpilogue`]).

pub mod concurrent;
mod config;
pub mod layout;
mod select;
pub mod split;
pub mod tensor_core;
pub mod tune;

pub use concurrent::{spmm_concurrent, SpmmJob};
pub use config::SpmmConfig;
pub use layout::{spmm_layouts, DenseLayouts, Layout};
pub use tensor_core::{
    skipped_empty_windows, spmm_tensor_core, spmm_tensor_core_bias_relu, spmm_tensor_core_empty_windows,
    spmm_tensor_core_paths, spmm_tensor_core_with, RangeSum, TensorCoreConfig,
};
pub use tune::{spmm_tune, spmm_tune_bias_relu, spmm_tune_with, TuneOptions, TunedSpmm};

use cudarc::driver::{DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg};

use crate::cpu::oracle::Summation;
use crate::csr::DeviceCsr;
use crate::dense::DeviceDense;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::kernels::{compiled_spmm_variants, KERNELS_BUILT};
use crate::scalar::Scalar;

/// Kernel arguments; mirrors `ts::SpmmParams` in cuda/common/params.cuh.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct SpmmParams {
    m: i32,
    k: i32,
    n: i32,
    nnz: i32,
    swizzled_rows: u64,
    values: u64,
    row_offsets: u64,
    column_indices: u64,
    dense: u64,
    bias: u64,
    out: u64,
    pieces: u64,
    partials: u64,
    split_rows: u64,
    num_pieces: i32,
    num_split_rows: i32,
    block_order: i32,
    row_blocks: i32,
    tile_counters: u64,
    alpha: f32,
    beta: f32,
}
const _: () = assert!(std::mem::size_of::<SpmmParams>() == 128, "SpmmParams must match cuda/common/params.cuh");

/// Arguments of `spmm_zero_rows_<dtype>`; mirrors `ts::SpmmZeroRowsParams` in cuda/common/params.cuh.
#[repr(C)]
#[derive(Clone, Copy)]
struct SpmmZeroRowsParams {
    rows: u64,
    stride: i32,
    count: i32,
    n: i32,
    alpha: f32,
    beta: f32,
    pad: i32,
    bias: u64,
    out: u64,
}
const _: () =
    assert!(std::mem::size_of::<SpmmZeroRowsParams>() == 48, "SpmmZeroRowsParams must match cuda/common/params.cuh");
// SAFETY: plain old data with the C layout the kernel expects.
unsafe impl cudarc::driver::DeviceRepr for SpmmZeroRowsParams {}

/// Threads per block of `spmm_zero_rows_<dtype>` (TILESPARSE_SPMM_ZERO_ROWS_THREADS in cuda/spmm/spmm.cu).
const ZERO_ROWS_THREADS: u32 = 256;

/// Threads per block of `spmm_fixup_<dtype>` (TILESPARSE_SPMM_FIXUP_THREADS in cuda/spmm/spmm.cu).
const FIXUP_THREADS: u32 = 256;
// SAFETY: plain old data with the C layout the kernel expects.
unsafe impl cudarc::driver::DeviceRepr for SpmmParams {}

/// The up to three compiled variants of the same dtype that differ least from `config`.
fn nearest_compiled(config: &SpmmConfig) -> String {
    let distance = |c: &SpmmConfig| {
        let d = |a: u32, b: u32| (a as i64 - b as i64).unsigned_abs().min(1) as u32;
        4 * d(c.block_items_x, config.block_items_x)
            + 4 * d(c.block_width, config.block_width)
            + 2 * d(c.block_items_y, config.block_items_y)
            + 2 * d(c.block_items_k, config.block_items_k)
            + d(c.sparse_vector_width, config.sparse_vector_width)
            + d(c.dense_vector_width, config.dense_vector_width)
            + d(c.residue_unroll, config.residue_unroll)
            + u32::from(c.predicate_loads != config.predicate_loads)
            + u32::from(c.launch_bounds != config.launch_bounds)
            + 2 * d(c.row_split, config.row_split)
            + 2 * d(c.column_tiles, config.column_tiles)
    };
    let mut candidates: Vec<&SpmmConfig> =
        compiled_spmm_variants().iter().filter(|c| c.dtype == config.dtype).collect();
    candidates.sort_by_key(|c| distance(c));
    if candidates.is_empty() {
        return format!("none for {}", config.dtype);
    }
    candidates.iter().take(3).map(|c| c.kernel_name()).collect::<Vec<_>>().join(", ")
}

/// The config's element type must be the operands'.
fn check_dtype(name: impl FnOnce() -> String, config: crate::DType, operands: crate::DType) -> Result<()> {
    if config != operands {
        return Err(Error::InvalidConfig {
            config: name(),
            rule: format!("config is for {config} but the operands are {operands}"),
        });
    }
    Ok(())
}

/// The kernels take m and n as i32.
fn check_i32(m: usize, n: usize) -> Result<()> {
    if m > i32::MAX as usize || n > i32::MAX as usize {
        return Err(Error::TooLarge(format!("m = {m}, n = {n} must fit in i32")));
    }
    Ok(())
}

/// Whether this build compiled `config`'s kernel: a set made once, as this runs before every launch.
fn is_compiled(config: &SpmmConfig) -> bool {
    static COMPILED: std::sync::OnceLock<std::collections::HashSet<SpmmConfig>> = std::sync::OnceLock::new();
    COMPILED
        .get_or_init(|| compiled_spmm_variants().iter().map(SpmmConfig::kernel_key).collect())
        .contains(&config.kernel_key())
}

/// Checks that `config` can run C (m x n) = A (m x k) * B on this build: valid, compiled, and able to
/// handle this n. Pure: no device needed.
pub fn check_config(config: &SpmmConfig, dtype: crate::DType, m: usize, k: usize, n: usize) -> Result<()> {
    // This runs before every launch: the name (about 0.5 us to build) only for an error.
    let name = || config.kernel_name();
    check_dtype(name, config.dtype, dtype)?;
    config.validate().map_err(|rule| Error::InvalidConfig { config: name(), rule })?;
    if !KERNELS_BUILT {
        return Err(Error::KernelsNotBuilt);
    }
    if !is_compiled(config) {
        return Err(Error::NotCompiled { config: name(), nearest: nearest_compiled(config) });
    }
    let dv = config.dense_vector_width as usize;
    if n % dv != 0 {
        let narrower = SpmmConfig {
            dense_vector_width: select::widest_dividing(n, &[1, 2, 4, 8]).min(config.dense_vector_width),
            ..*config
        };
        return Err(Error::Unsupported {
            config: name(),
            reason: format!(
                "dense_vector_width {dv} does not divide n = {n} (rows of B would be misaligned); use a narrower width, \
                 e.g. {} (or SpmmConfig::select / spmm_auto)",
                narrower.kernel_name()
            ),
        });
    }
    if !config.predicate_loads && n % config.block_items_x as usize != 0 {
        return Err(Error::Unsupported {
            config: name(),
            reason: format!(
                "n = {n} is not a multiple of block_items_x = {} and the config has no predicates",
                config.block_items_x
            ),
        });
    }
    if k.saturating_mul(n) > i32::MAX as usize {
        return Err(Error::TooLarge(format!(
            "B has k * n = {k} * {n} elements; the kernels index B with 32-bit offsets"
        )));
    }
    let grid_y = n.div_ceil(config.block_items_x as usize);
    if grid_y > 65_535 {
        return Err(Error::TooLarge(format!(
            "n = {n} needs {grid_y} column blocks of {} (at most 65535)",
            config.block_items_x
        )));
    }
    check_i32(m, n)
}

fn check_shapes<T: Scalar>(a: &DeviceCsr<T>, b: &DeviceDense<T>, c: &DeviceDense<T>) -> Result<()> {
    if a.cols() != b.rows() {
        return Err(Error::ShapeMismatch(format!(
            "A is {} x {} but B is {} x {}",
            a.rows(),
            a.cols(),
            b.rows(),
            b.cols()
        )));
    }
    if c.rows() != a.rows() || c.cols() != b.cols() {
        return Err(Error::ShapeMismatch(format!(
            "C is {} x {} but A * B is {} x {}",
            c.rows(),
            c.cols(),
            a.rows(),
            b.cols()
        )));
    }
    Ok(())
}

/// What every SpMM kernel does with each element's f32 sum s of A's products where it stores C, in this order:
/// `alpha * s + beta * C` (C's value before the call), then `ReLU(. + bias[row])` where there is a bias, then one
/// rounding to the storage type. The scalars are cuSPARSE's and BLAS's: with `beta` = 0, C is not read (a NaN
/// left in it does not reach the result), and every other `beta` reads it, a NaN `beta` too. The bias is cuBLASLt's
/// bias epilogue with ReLU: one f32 per row of C, added after the scalars. [`SpmmEpilogue::default`] is the plain
/// product, C = A * B, which every kernel stores with the same bits as without an epilogue.
///
/// Every kernel applies it fused, on the sum it holds before the one rounding: the tiles, the split rows' fix-up,
/// the empty rows' fill, the tensor-core kernels, their fix-up, clusters and empty windows (the tensor cores' B and
/// C padded to a multiple of 8 columns get C's old values copied in first where `beta` is not 0).
#[derive(Clone, Copy, Debug)]
pub struct SpmmEpilogue<'a> {
    /// Scales A * B.
    pub alpha: f32,
    /// Scales C's old value; 0 means C is not read.
    pub beta: f32,
    /// One f32 per row of C, added after the scalars, followed by a ReLU; None for neither.
    pub bias: Option<&'a cudarc::driver::CudaSlice<f32>>,
}

impl Default for SpmmEpilogue<'_> {
    fn default() -> Self {
        SpmmEpilogue { alpha: 1.0, beta: 0.0, bias: None }
    }
}

impl<'a> SpmmEpilogue<'a> {
    /// C = alpha * A * B + beta * C.
    pub fn scaled(alpha: f32, beta: f32) -> Self {
        SpmmEpilogue { alpha, beta, bias: None }
    }

    /// C = ReLU(A * B + bias).
    pub fn bias_relu(bias: &'a cudarc::driver::CudaSlice<f32>) -> Self {
        SpmmEpilogue { bias: Some(bias), ..SpmmEpilogue::default() }
    }

    /// Whether the kernels read C (beta is not 0).
    pub fn reads_c(&self) -> bool {
        self.beta != 0.0
    }

    /// Whether the scalars do anything (alpha is not 1 or beta is not 0): the tensor-core kernels then run their
    /// twins that apply them.
    pub fn has_scalars(&self) -> bool {
        self.alpha != 1.0 || self.beta != 0.0
    }
}

/// A bias + ReLU epilogue's bias, where there is one, for A's product ([`check_bias_rows`] with A's rows).
pub(crate) fn check_bias<T: Scalar>(
    gpu: &Gpu,
    a: &DeviceCsr<T>,
    bias: Option<&cudarc::driver::CudaSlice<f32>>,
) -> Result<()> {
    bias.map_or(Ok(()), |bias| check_bias_rows(gpu, bias, a.rows()))
}

/// A bias + ReLU epilogue's bias for a C of `rows` rows: `gpu`'s, one element per row ([`Error::ShapeMismatch`] for
/// any other length; any length where C has no rows, since the device cannot hold an empty buffer and nothing is
/// read).
pub(crate) fn check_bias_rows(gpu: &Gpu, bias: &cudarc::driver::CudaSlice<f32>, rows: usize) -> Result<()> {
    gpu.check_owns("the bias", bias)?;
    if bias.len() != rows && rows != 0 {
        return Err(Error::ShapeMismatch(format!(
            "the bias has {} elements, C has {rows} rows (one per row)",
            bias.len()
        )));
    }
    Ok(())
}

/// Uploads a bias + ReLU epilogue's bias (one f32 per row of C) on `gpu`'s stream. An empty one (C without rows)
/// becomes one unread element, as the device holds no empty buffer; every function that takes a bias accepts it.
pub fn upload_bias(gpu: &Gpu, bias: &[f32]) -> Result<cudarc::driver::CudaSlice<f32>> {
    crate::csr::upload_slice(gpu, bias, "uploading the bias")
}

/// [`Error::WrongGpu`] unless A, B and C are all `gpu`'s.
pub(crate) fn check_gpu_operands<T: Scalar>(
    gpu: &Gpu,
    a: &DeviceCsr<T>,
    b: &DeviceDense<T>,
    c: &DeviceDense<T>,
) -> Result<()> {
    a.check_gpu(gpu, "A")?;
    b.check_gpu(gpu, "B")?;
    c.check_gpu(gpu, "C")
}

/// C = A * B with the given config. Every element of C is written.
pub fn spmm<T: Scalar>(
    gpu: &Gpu,
    a: &DeviceCsr<T>,
    b: &DeviceDense<T>,
    c: &mut DeviceDense<T>,
    config: &SpmmConfig,
) -> Result<()> {
    launch(gpu, a, b, SpmmEpilogue::default(), c, config, Overrides::default()).map(|_| ())
}

/// C = alpha * A * B + beta * C (+ bias, ReLU) with the given config: [`spmm`] with `epilogue` ([`SpmmEpilogue`]).
pub fn spmm_with<T: Scalar>(
    gpu: &Gpu,
    a: &DeviceCsr<T>,
    b: &DeviceDense<T>,
    c: &mut DeviceDense<T>,
    config: &SpmmConfig,
    epilogue: SpmmEpilogue,
) -> Result<()> {
    launch(gpu, a, b, epilogue, c, config, Overrides::default()).map(|_| ())
}

/// C = A * B with the given config and block order, instead of the order the library would choose
/// ([`block_order`]): for benchmarks of the orders and for tests. Every order computes the same C, bit for bit.
pub fn spmm_in_order<T: Scalar>(
    gpu: &Gpu,
    a: &DeviceCsr<T>,
    b: &DeviceDense<T>,
    c: &mut DeviceDense<T>,
    config: &SpmmConfig,
    order: BlockOrder,
) -> Result<()> {
    let overrides = Overrides { order: Some(order), ..Overrides::default() };
    launch(gpu, a, b, SpmmEpilogue::default(), c, config, overrides).map(|_| ())
}

/// C = A * B with the given config, the rows A leaves empty left out of the tile kernel's grid and written by a
/// second kernel however few they are (where the launch walks the row swizzle or a split, which put them last;
/// otherwise as [`spmm`]), instead of where [`skips_empty_rows`] says: for tests and benchmarks of that path.
/// With an epilogue, as [`spmm_with`] computes it. Returns how many rows it left out. C is the same, bit for bit,
/// either way.
pub fn spmm_leaving_out_empty_rows<T: Scalar>(
    gpu: &Gpu,
    a: &DeviceCsr<T>,
    b: &DeviceDense<T>,
    epilogue: SpmmEpilogue,
    c: &mut DeviceDense<T>,
    config: &SpmmConfig,
) -> Result<usize> {
    launch(gpu, a, b, epilogue, c, config, Overrides { leave_out_empty_rows: Some(true), ..Overrides::default() })
}

/// C = ReLU(A * B + bias), bias broadcast along each row (one value per row of C).
pub fn spmm_bias_relu<T: Scalar>(
    gpu: &Gpu,
    a: &DeviceCsr<T>,
    b: &DeviceDense<T>,
    bias: &cudarc::driver::CudaSlice<f32>,
    c: &mut DeviceDense<T>,
    config: &SpmmConfig,
) -> Result<()> {
    launch(gpu, a, b, SpmmEpilogue::bias_relu(bias), c, config, Overrides::default()).map(|_| ())
}

/// An SpMM kernel: a Sputnik-style tile on the CUDA cores, or the tensor-core kernel (f16, bf16; f32 in 3xTF32).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SpmmKernel {
    Tiled(SpmmConfig),
    TensorCore(TensorCoreConfig),
}

impl std::fmt::Display for SpmmKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpmmKernel::Tiled(c) => c.fmt(f),
            SpmmKernel::TensorCore(c) => c.fmt(f),
        }
    }
}

impl std::str::FromStr for SpmmKernel {
    type Err = String;
    /// A kernel name: `spmm_tc_<dtype>_n<tiles>` or an [`SpmmConfig`] name.
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        if s.strip_prefix("spmm_").unwrap_or(s).starts_with("tc_") {
            s.parse().map(SpmmKernel::TensorCore)
        } else {
            s.parse().map(SpmmKernel::Tiled)
        }
    }
}

impl SpmmKernel {
    /// How this kernel sums, which decides the bound its results meet
    /// ([`crate::cpu::oracle::spmm_error_bound_for`]): the tensor cores' mma truncates (3xTF32 for f32,
    /// [`TensorCoreConfig::is_tf32x3`]; f16/bf16 products otherwise), the tiles use FMAs.
    pub fn summation(&self) -> Summation {
        match self {
            SpmmKernel::TensorCore(c) if c.is_tf32x3() => Summation::Tf32x3,
            SpmmKernel::TensorCore(_) => Summation::TensorCoreHalf,
            SpmmKernel::Tiled(_) => Summation::Fma,
        }
    }

    /// The kernel for C (m x n) = A (m x k, `nnz` entries) * B: for f32 the 16-row windows where
    /// `f32_narrow_windows` (src/spmm/tensor_core.rs) takes them, then for few uneven rows the windows
    /// `uneven_few_rows_windows` takes, then the row-split tiles where `row_split_tile` (in
    /// src/spmm/select.rs) takes them (few rows, small n: they beat the tensor cores there too), else for f16/bf16
    /// rows long for their mean what `long_rows_half` (src/spmm/select.rs) takes, else the tensor cores where
    /// [`tensor_core::select_tensor_core`] says they win (f16/bf16/f32, `tensor_core_blocks` known) unless
    /// `sparse_windows_half` (src/spmm/select.rs) gives a tile for the 16-row windows (or, at n = 32, the 64-row
    /// ones), else [`SpmmConfig::select_with_stats`]'s tile, or for f16/bf16 rows whose longest row that tile
    /// walks on the launch's critical path the windows `longest_row_windows_half` (src/spmm/select.rs) gives; a
    /// choice of the 64-row windows on rows that share their columns in runs of 32 becomes the 32-row windows
    /// ([`tensor_core::mid_windows`]). Pure. This is the choice on a device that runs the warpgroup-mma f32 kernel (an
    /// H100); [`SpmmKernel::select_for`] makes it for a given device.
    pub fn select(
        m: usize,
        k: usize,
        n: usize,
        nnz: usize,
        stats: &crate::csr::RowStats,
        dtype: crate::DType,
        tensor_core_blocks: Option<tensor_core::BlockCounts>,
    ) -> SpmmKernel {
        Self::select_with(true, m, k, n, nnz, stats, dtype, tensor_core_blocks)
    }

    /// [`SpmmKernel::select`] for `info`'s device: where it has no warpgroup mma ([`tensor_core::wgmma_runs_on`]),
    /// f32 takes the mma.sync kernel only where that kernel's own rules say it wins, and the tiles elsewhere
    /// ([`tensor_core::select_tensor_core_with`]). Pure.
    #[allow(clippy::too_many_arguments)]
    pub fn select_for(
        info: &crate::gpu::DeviceInfo,
        m: usize,
        k: usize,
        n: usize,
        nnz: usize,
        stats: &crate::csr::RowStats,
        dtype: crate::DType,
        tensor_core_blocks: Option<tensor_core::BlockCounts>,
    ) -> SpmmKernel {
        Self::select_with(tensor_core::wgmma_runs_on(info), m, k, n, nnz, stats, dtype, tensor_core_blocks)
    }

    /// [`SpmmKernel::select_rows`], then the 32-row windows ([`tensor_core::mid_windows`]), then the empty rows. Where
    /// A leaves enough rows empty that the tile chosen for its other rows ([`select::nonempty_rows`]) would leave them
    /// out of its grid ([`skips_empty_rows`]; the launch walks the row swizzle, [`rows_longest_first`]), and those rows
    /// are even (length variation 0.5 or less), that tile: instead of a tile chosen for all of A's rows, and in
    /// f16/bf16 instead of tensor-core windows that walk the empty rows' windows too, where they are under 40% full at
    /// n = 128-511 or under 60% from n = 512. An f32 tile that takes column tiles in turn replaces a tile chosen for
    /// all rows even where it would not leave the empty rows out: in turn it walks them cheaply (NOTES.md, "SpMM step
    /// 76"; every f32 variant on 9 tall banded matrices of 16475-27189 rows, 75-90% empty, rows of 3, n = 256-1024: on
    /// all 27 problems the two-row tile in turn over all rows ran 1.24x-1.56x faster than the tile chosen on all rows
    /// and 1.19x-1.40x faster than the bounded k = 8 tile with the empty rows left out, the choice before step 76).
    ///
    /// Measured on the H200 (NOTES.md, "SpMM step 75"; tall banded matrices of 80-99.5% empty rows and uniform ones
    /// with 70-90% of their rows emptied, against the choice on all rows, the empty rows left out by their rule
    /// either way): f32 tiles 1.00x-1.30x; f16 windows 11-51% full 1.10x-2.65x at n = 128-1024 (56,880 x 257 at n =
    /// 1024: 99.4 -> 37.4 us), but 0.81x-0.86x at n = 64 and 0.89x-0.99x at 42-51% full and n = 256; windows 72-81%
    /// full kept their lead (0.33x-0.48x), and so did the f32 windows (0.69x-0.82x at 41-51% full). Uneven rows
    /// (power-law, emptied) gave 0.66x-1.61x: left as chosen on all rows. Held out after these bounds were set: on
    /// the problems it moved, f32 1.11x-1.14x, f16 1.23x-1.42x, bf16 1.43x.
    #[allow(clippy::too_many_arguments)]
    fn select_with(
        wgmma: bool,
        m: usize,
        k: usize,
        n: usize,
        nnz: usize,
        stats: &crate::csr::RowStats,
        dtype: crate::DType,
        tensor_core_blocks: Option<tensor_core::BlockCounts>,
    ) -> SpmmKernel {
        let kernel =
            match (Self::select_rows(wgmma, m, k, n, nnz, stats, dtype, tensor_core_blocks), tensor_core_blocks) {
                // The 64-row windows on rows that share columns in runs of 32: the 32-row ones.
                (SpmmKernel::TensorCore(c), Some(counts)) => {
                    SpmmKernel::TensorCore(tensor_core::mid_windows(&c, n, nnz, counts).unwrap_or(c))
                }
                (kernel, _) => kernel,
            };
        if stats.empty_rows == 0 || !rows_longest_first(stats, m, dtype) {
            return kernel;
        }
        let (rows, nonempty) = select::nonempty_rows(m, stats);
        let tile = SpmmConfig::select_with_stats(rows, k, n, &nonempty, dtype);
        let skips = skips_empty_rows(stats, &tile, n);
        // An f32 tile taking column tiles in turn walks the empty rows cheaply where it does not leave them out.
        let in_turn = dtype == crate::DType::F32 && tile.column_tiles > 1;
        if nonempty.cv > 0.5 || !(skips || in_turn) {
            return kernel;
        }
        match kernel {
            SpmmKernel::Tiled(_) => SpmmKernel::Tiled(tile),
            SpmmKernel::TensorCore(_) if !skips => kernel,
            SpmmKernel::TensorCore(c) => {
                let fill = tensor_core_blocks.map_or(1.0, |counts| counts.fill(c.window as usize, nnz));
                let sparse = (n >= 512 && fill < 0.6) || (n >= 128 && fill < 0.4);
                if dtype != crate::DType::F32 && sparse {
                    SpmmKernel::Tiled(tile)
                } else {
                    kernel
                }
            }
        }
    }

    /// The choice for A's rows as they are (empty ones included).
    #[allow(clippy::too_many_arguments)]
    fn select_rows(
        wgmma: bool,
        m: usize,
        k: usize,
        n: usize,
        nnz: usize,
        stats: &crate::csr::RowStats,
        dtype: crate::DType,
        tensor_core_blocks: Option<tensor_core::BlockCounts>,
    ) -> SpmmKernel {
        // f32 rows that share their columns in blocks: the 16-row windows where they are full (before every rule).
        if dtype == crate::DType::F32 {
            if let Some(config) = tensor_core_blocks.and_then(|c| tensor_core::f32_narrow_windows(m, n, nnz, c)) {
                return SpmmKernel::TensorCore(config);
            }
        }
        // Few uneven rows dense enough for the windows (in f16/bf16 at n = 1024-2048 from fewer entries per window):
        // before the row-split tiles and the other rules, whose tiles walk the longest row.
        let few_uneven = tensor_core_blocks.and_then(|counts| {
            tensor_core::uneven_few_rows_windows(dtype, m, k, n, nnz, stats, counts, wgmma)
                .or_else(|| tensor_core::uneven_few_rows_wide_n(dtype, m, n, nnz, stats, counts))
        });
        if let Some(config) = few_uneven {
            return SpmmKernel::TensorCore(config);
        }
        if let Some(config) = select::row_split_tile(m, k, n, stats, dtype) {
            return SpmmKernel::Tiled(config);
        }
        if let Some(kernel) = select::long_rows_half(m, n, stats, dtype, tensor_core_blocks.is_some()) {
            return kernel;
        }
        let tc = tensor_core_blocks.and_then(|counts| {
            let uneven = select::uneven_rows_half(stats, dtype);
            let c = tensor_core::select_tensor_core_rows(dtype, m, n, nnz, counts, wgmma, uneven)?;
            if c.is_wide() {
                return Some((c, counts));
            }
            // The 16-row windows: not on rows too skewed for them, nor on even short rows that fill them little in
            // many rows; fewer columns per warp on rows long for the mean, more over a small B at n = 32.
            if select::too_skewed_for_windows(stats, dtype)
                || select::short_even_rows_leave_windows(m, n, stats, dtype, counts.narrow_fill(nnz))
            {
                return None;
            }
            let tiles_n = select::long_rows_window_tiles_n(m, n, stats, c.tiles_n);
            let tiles_n = select::small_b_window_tiles_n(m, k, n, stats, tiles_n);
            Some((TensorCoreConfig { tiles_n, ..c }, counts))
        });
        match tc {
            // The 64-row windows only at n = 32 (`select::THIN_MANY_ROWS_FILL`).
            Some((c, counts)) if !c.is_wide() || n == 32 => {
                match select::sparse_windows_half(m, n, stats, dtype, counts.narrow_fill(nnz)) {
                    Some(config) => SpmmKernel::Tiled(config),
                    None => SpmmKernel::TensorCore(c),
                }
            }
            Some((c, _)) => SpmmKernel::TensorCore(c),
            None => {
                let config = SpmmConfig::select_with_stats(m, k, n, stats, dtype);
                // f16/bf16 rows whose longest row the tile would walk on the critical path: the windows, where they
                // can run (`select::longest_row_windows_half`).
                let windows = tensor_core_blocks.and_then(|_| select::longest_row_windows_half(&config, m, n, stats));
                windows.map_or(SpmmKernel::Tiled(config), SpmmKernel::TensorCore)
            }
        }
    }
}

/// C = A * B with `kernel`.
pub fn spmm_kernel<T: Scalar>(
    gpu: &Gpu,
    a: &DeviceCsr<T>,
    b: &DeviceDense<T>,
    c: &mut DeviceDense<T>,
    kernel: &SpmmKernel,
) -> Result<()> {
    run_kernel(gpu, a, b, SpmmEpilogue::default(), c, kernel)
}

/// C = alpha * A * B + beta * C (+ bias, ReLU) with `kernel` ([`SpmmEpilogue`], fused into the tiles and the tensor
/// cores alike).
pub fn spmm_kernel_with<T: Scalar>(
    gpu: &Gpu,
    a: &DeviceCsr<T>,
    b: &DeviceDense<T>,
    c: &mut DeviceDense<T>,
    kernel: &SpmmKernel,
    epilogue: SpmmEpilogue,
) -> Result<()> {
    run_kernel(gpu, a, b, epilogue, c, kernel)
}

/// C = ReLU(A * B + bias) with `kernel`, `bias` one f32 per row of C: the bias + ReLU epilogue on the tiles
/// ([`spmm_bias_relu`]) or on the tensor cores ([`spmm_tensor_core_bias_relu`]), applied to each element's f32 sum
/// before it is rounded to `T`.
pub fn spmm_kernel_bias_relu<T: Scalar>(
    gpu: &Gpu,
    a: &DeviceCsr<T>,
    b: &DeviceDense<T>,
    bias: &cudarc::driver::CudaSlice<f32>,
    c: &mut DeviceDense<T>,
    kernel: &SpmmKernel,
) -> Result<()> {
    run_kernel(gpu, a, b, SpmmEpilogue::bias_relu(bias), c, kernel)
}

/// [`spmm_kernel`] with `epilogue`: the tiles' launcher or the tensor cores' one entry ([`spmm_tensor_core_paths`],
/// its range sum and empty windows as it chooses).
pub(crate) fn run_kernel<T: Scalar>(
    gpu: &Gpu,
    a: &DeviceCsr<T>,
    b: &DeviceDense<T>,
    epilogue: SpmmEpilogue,
    c: &mut DeviceDense<T>,
    kernel: &SpmmKernel,
) -> Result<()> {
    match kernel {
        SpmmKernel::Tiled(config) => launch(gpu, a, b, epilogue, c, config, Overrides::default()).map(|_| ()),
        SpmmKernel::TensorCore(config) => {
            spmm_tensor_core_paths(gpu, a, b, epilogue, c, config, RangeSum::Auto, None).map(|_| ())
        }
    }
}

/// C = ReLU(A * B + bias) with [`auto_kernel`]'s choice (the epilogue costs an add and a compare per element of
/// C, so the choice is [`spmm_auto`]'s); returns the kernel used.
pub fn spmm_bias_relu_auto<T: Scalar>(
    gpu: &Gpu,
    a: &DeviceCsr<T>,
    b: &DeviceDense<T>,
    bias: &cudarc::driver::CudaSlice<f32>,
    c: &mut DeviceDense<T>,
) -> Result<SpmmKernel> {
    spmm_auto_with(gpu, a, b, c, SpmmEpilogue::bias_relu(bias))
}

/// The kernel [`spmm_auto`] runs for A times n columns of B on `gpu`'s device: [`SpmmKernel::select_for`]'s choice
/// from A's row statistics and tensor-core block counts, with no tensor cores where A stores an Inf or a NaN
/// ([`DeviceCsr::holds_non_finite`]). Such a value makes every tensor-core warp whose tile it reaches redo that tile
/// exactly (NOTES.md, "SpMM step 9"), 2.4x-3.0x slower than a tile on the real matrices whose values pass f16's range
/// (west0479, pores_1, lund_a; step 53), 1.4x on case_ACTIVSg70k with 4 such values.
pub fn auto_kernel<T: Scalar>(gpu: &Gpu, a: &DeviceCsr<T>, n: usize) -> Result<SpmmKernel> {
    let blocks = a.tensor_core_block_count().filter(|_| a.holds_non_finite() != Some(true));
    Ok(SpmmKernel::select_for(gpu.info(), a.rows(), a.cols(), n, a.nnz(), a.stats(gpu)?, T::DTYPE, blocks))
}

/// C = A * B with [`auto_kernel`]'s choice on this device; returns the kernel used. Where it picks the tensor cores
/// (f16/bf16, f32 in 3xTF32), the first call on a matrix builds its tensor-core blocks (on the device; see
/// [`tensor_core::DEVICE_BUILD_MAX_COLUMNS`]).
pub fn spmm_auto<T: Scalar>(
    gpu: &Gpu,
    a: &DeviceCsr<T>,
    b: &DeviceDense<T>,
    c: &mut DeviceDense<T>,
) -> Result<SpmmKernel> {
    spmm_auto_with(gpu, a, b, c, SpmmEpilogue::default())
}

/// C = alpha * A * B + beta * C (+ bias, ReLU) with [`auto_kernel`]'s choice (the epilogue costs a few operations
/// per element of C, and a read of C where beta is not 0, so the choice is [`spmm_auto`]'s); returns the kernel
/// used.
pub fn spmm_auto_with<T: Scalar>(
    gpu: &Gpu,
    a: &DeviceCsr<T>,
    b: &DeviceDense<T>,
    c: &mut DeviceDense<T>,
    epilogue: SpmmEpilogue,
) -> Result<SpmmKernel> {
    let kernel = auto_kernel(gpu, a, b.cols())?;
    run_kernel(gpu, a, b, epilogue, c, &kernel)?;
    Ok(kernel)
}

/// The row split a launch of `config` on A with n columns uses, if any ([`split::use_split`]).
fn chosen_split<'a, T: Scalar>(
    gpu: &Gpu,
    a: &'a DeviceCsr<T>,
    n: usize,
    config: &SpmmConfig,
) -> Result<Option<&'a crate::csr::DeviceSplit>> {
    let derived = a.derived(gpu)?;
    Ok(derived.split.as_ref().filter(|s| {
        split::use_split(&derived.stats, a.rows(), a.nnz(), n, s.num_partials, config, gpu.info().sm_count)
    }))
}

/// How many rows the tile kernel's grid leaves out for `spmm_zero_rows_<dtype>` to write: A's empty rows, which
/// are the last entries of the swizzle and the last pieces of a split (longest first, one piece each), where
/// `leave_out` says so (None: [`skips_empty_rows`]); 0 without a swizzle or a split.
fn skipped_rows(
    derived: &crate::csr::Derived,
    split: bool,
    n: usize,
    config: &SpmmConfig,
    leave_out: Option<bool>,
) -> usize {
    let walks_an_order = split || derived.swizzled_rows.is_some();
    if walks_an_order && leave_out.unwrap_or_else(|| skips_empty_rows(&derived.stats, config, n)) {
        derived.stats.empty_rows
    } else {
        0
    }
}

/// How many of A's empty rows [`spmm`] with `config` on A with `n` columns leaves out of the tile kernel's grid for
/// a second kernel to write ([`skips_empty_rows`]).
pub fn skipped_empty_rows<T: Scalar>(gpu: &Gpu, a: &DeviceCsr<T>, n: usize, config: &SpmmConfig) -> Result<usize> {
    let split = chosen_split(gpu, a, n, config)?.is_some();
    Ok(skipped_rows(a.derived(gpu)?, split, n, config, None))
}

/// Whether [`spmm`] with `config` on A with `n` columns splits A's long rows into pieces (and runs the fix-up
/// kernel after the SpMM kernel); see [`split`].
pub fn splits_rows<T: Scalar>(gpu: &Gpu, a: &DeviceCsr<T>, n: usize, config: &SpmmConfig) -> Result<bool> {
    Ok(chosen_split(gpu, a, n, config)?.is_some())
}

/// Whether the tile kernel's blocks go column tiles first (a 1-D grid, the column tiles of one row block
/// consecutive) rather than row blocks first (a 2-D grid), for a grid of `row_blocks` x `column_tiles` blocks of
/// a kernel of which an SM holds `blocks_per_sm`, on `sm_count` SMs, over rows of length variation `row_cv`.
///
/// The rule was written thinking that the first wave is handed out one block per SM in turn, so that an SM's
/// blocks are every `sm_count`-th: column tiles first, SM s would get tiles s, s + sm_count, ... modulo
/// `column_tiles`, column_tiles / gcd(sm_count, column_tiles) of them; row blocks first, a wave would span
/// ceil(blocks_per_sm sm_count / row_blocks) tiles. A probe of `%smid` (NOTES.md, "SpMM step 15") showed
/// otherwise: the H100 hands out consecutive blocks in pairs to the two SMs of a TPC, in an order that changes
/// from wave to wave, so those counts are a proxy for how many column tiles the resident blocks span, and the
/// rule stands on its measurements. Past the first wave blocks go wherever one ends, and there row blocks first
/// wins: its resident blocks span a few column tiles of B, column tiles first all of them. Measured on the H100
/// (NOTES.md, "SpMM step 14"; both orders, five tiles, uniform m 256-4096, k 384-3072, n 128-4096, and the
/// suite's real matrices): uniform rows lose up to 1.8x column tiles first from 1.3 waves on (768 x 768 at 10%,
/// n = 1024, one warp per row: 23.6 vs 33.3 us; 1536 x 3072 at n = 512: 67.5 vs 105.5 us); within one wave
/// column tiles first is as fast or up to 12% faster. The pruned weights, whose row lengths vary (cv 0.5-1.7),
/// keep gaining column tiles first up to three waves (384 x 384 at 90%, n = 1024: 11.4 vs 12.9 us; 384 x 1536 at
/// 98%: 11.8 vs 14.0 us).
pub fn column_tiles_first(
    row_blocks: usize,
    column_tiles: usize,
    blocks_per_sm: usize,
    sm_count: usize,
    row_cv: f64,
) -> bool {
    fn gcd(a: usize, b: usize) -> usize {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    let slots = blocks_per_sm.saturating_mul(sm_count);
    if column_tiles < 2 || row_blocks == 0 || slots == 0 {
        return false;
    }
    let fewer_tiles_per_sm = column_tiles / gcd(sm_count, column_tiles) < slots.div_ceil(row_blocks);
    let waves = row_blocks as f64 * column_tiles as f64 / slots as f64;
    fewer_tiles_per_sm && (waves <= 1.0 || (row_cv >= 0.5 && waves <= 3.0))
}

/// Whether the tile kernel takes A's rows longest first (the rows and their bounds of
/// [`crate::csr::swizzled_rows`], two loads per subwarp issued together) rather than in row order (`swizzled_rows`
/// null: the row's two offsets, loaded together), for `rows` rows of `dtype` with row statistics `stats`. Row order
/// for f32 on 4096 rows or more of length variation cv <= 0.4: with many row blocks and even rows, longest first
/// evens out little.
///
/// The measurements below were taken when the swizzle was the row alone, a load before the row's offsets. Since the
/// swizzle carries the bounds (NOTES.md, "SpMM step 38") longest first costs no load of its own; taken for every
/// f32 matrix it was no faster (the f32 suite 1.527x and 1.532x against 1.530x twice; copter2, case_ACTIVSg70k,
/// wrld_1deg and 4elt at n = 32 and 128 0.93x-1.02x of row order), so the rule stays.
///
/// Measured on the H100 (NOTES.md, "SpMM step 26"; the selected tile, both ways, medians of event-timed runs, each
/// way twice): copter2 (55,476 rows, cv 0.33) 1.03x-1.08x faster in row order at n = 32-512, case_ACTIVSg70k
/// (70,000, cv 0.38) 0.99x-1.05x, uniform 4096^2 at 90-98% and 8192 x 2048 0.99x-1.04x, uniform 8192 and 65536 x
/// 4096 at 0.2-5% (n = 64) 1.00x-1.03x, wrld_1deg and 4elt (cv 0.16-0.19) 0.98x-1.02x. Past the bounds it loses:
/// the pruned weights' uneven rows (1536 x 384 at 90%, cv 0.67: 0.76x-0.87x) and even rows of few row blocks (384 x
/// 1536 at 90%, cv 0.21, n = 1024, 32-row blocks: 0.74x; 1536 x 384 at 70%, cv 0.34: 0.97x). Not f16 or bf16: their
/// 64-column tile on copter2 at n = 128 ran 0.91x-0.92x in row order.
pub fn rows_longest_first(stats: &crate::csr::RowStats, rows: usize, dtype: crate::DType) -> bool {
    dtype != crate::DType::F32 || rows < 4096 || stats.cv > 0.4
}

/// The blocks the tile kernel's grid spends on A's empty rows from which it leaves them out for
/// `spmm_zero_rows_<dtype>` to write ([`skips_empty_rows`]).
pub const EMPTY_ROW_BLOCKS: usize = 12_288;

/// Whether the tile kernel's grid leaves out the rows A leaves empty, for `spmm_zero_rows_<dtype>` to write
/// after it: where `config`'s blocks over them, ceil(empty rows / rows per block) x column groups of n, are
/// [`EMPTY_ROW_BLOCKS`] or more. They are the tail of the row swizzle and of the row split's pieces (longest
/// first), so only a launch that walks one of them leaves them out ([`skipped_empty_rows`]).
///
/// Measured on the H200 (NOTES.md, "SpMM step 75"; tall banded matrices, 10-99.5% of their rows empty, the
/// selected tile with the empty rows left out always and never, in turn): the second launch costs about 2 us
/// (5.0 -> 7.2 us on small problems); below 12,288 blocks on empty rows it never gained more than 3% (0.67x-1.03x),
/// and from 12,288 every problem gained, 1.07x-3.8x in f32 (56,880 x 257 with 56,614 empty rows, n = 512: 140.7 ->
/// 37.0 us), 1.44x-4.2x in f16 and bf16. Held out on 16 fresh tall banded matrices with the choice of
/// [`SpmmKernel::select_for`]: f32 2.04x on the 39 of 48 problems that run a tile, f16 1.50x.
pub fn skips_empty_rows(stats: &crate::csr::RowStats, config: &SpmmConfig, n: usize) -> bool {
    let blocks = stats.empty_rows.div_ceil(config.rows_per_block().max(1) as usize) * config.column_groups(n);
    blocks >= EMPTY_ROW_BLOCKS
}

/// The order in which the tile kernel's blocks take their (row block, column tile) pairs of C.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BlockOrder {
    /// A 2-D grid, x over row blocks and y over column tiles: the GPU works along a column tile of B at a time.
    RowBlocksFirst,
    /// A 1-D grid with the column tiles of one row block consecutive ([`column_tiles_first`]).
    ColumnTilesFirst,
    /// Each block claims its pair at run time from per-column-tile counters, starting with the column tile of
    /// its SM (the SM's id modulo the column tiles), so the blocks one SM runs share a column tile of B in its
    /// L1 whatever order the hardware hands blocks out in (cuda/spmm/block_order.cuh). One atomic per block.
    /// Launch-bounded variants only ([`SpmmConfig::claims_blocks`]); the others get `Error::Unsupported`.
    SmAffine,
}

impl BlockOrder {
    pub const ALL: [BlockOrder; 3] = [BlockOrder::RowBlocksFirst, BlockOrder::ColumnTilesFirst, BlockOrder::SmAffine];

    /// The value of `ts::SpmmBlockOrder` in cuda/common/params.cuh.
    fn code(self) -> i32 {
        match self {
            BlockOrder::RowBlocksFirst => 0,
            BlockOrder::ColumnTilesFirst => 1,
            BlockOrder::SmAffine => 2,
        }
    }
}

/// The block order [`spmm`] uses for `config` on `items` rows (or pieces of split rows) with row statistics
/// `stats` and `n` columns, where an SM holds `blocks_per_sm` of the kernel's blocks, on `sm_count` SMs.
///
/// SM-affine for the two-row tile at 16 blocks per SM (the tile [`SpmmConfig::select`] gives most weight-like
/// shapes from 512 rows) on 512-1536 rows of 70 or more entries and n from 1024 to 2048, where the rows vary
/// (cv >= 0.5) or are long (mean >= 200). On the H100 (NOTES.md, "SpMM step 15"): a probe of `%smid` showed the
/// hardware hands out blocks in pairs to the SMs of a TPC, in an order that changes from wave to wave, so no
/// fixed grid order keeps an SM on one column tile; claimed pairs do. Over 30 weight-like problems in that
/// range (magnitude-pruned Gaussian matrices with row scales exp(0.3 N) and exp(0.6 N), cv 0.9 and 1.4, or
/// long uniform rows; m 512-1536, k 768-3072, 10%) the tile ran 1.06x-1.57x faster SM-affine, 1.27x on
/// geometric mean (1536 x 1536, cv 0.9, n = 1024: 1.57x). Not even rows of 77-154 entries (0.87x-1.18x:
/// uniform 1536 x 768 at 10%, n = 2048, 0.87x), short rows (pruned 1536 x 384 at 98%: 0.70-0.83x, the claim's
/// latency on 8-entry rows), nor n = 512 or 4096 (0.58-1.06x). Checked on 72 problems outside the fit (cv
/// 0.3-1.7, m 640 and 1280, k 1024 and 2048, 5-20%, n 1024-2048): where the selection takes this tile, 1.114x
/// faster than in step 14's order on geometric mean, 0.99x at worst.
///
/// SM-affine also for the eight-row tile (two blocks per SM) on 768-1024 uneven rows (cv >= 0.85) of 150 or more
/// entries at n = 1024 (NOTES.md, "SpMM step 16"): on nine such weight-like matrices (m 768 and 1024, k 1536
/// and 3072) 1.12x faster on geometric mean than in the order [`column_tiles_first`] picks (0.97x-1.23x), and
/// 1.06x-1.13x on three fresh ones (m 896); at n = 1536 the two orders tie, and at n = 512, 2048 and 4096 the
/// claim often loses (0.7x at n = 4096).
///
/// SM-affine also for the four-row tile (eight blocks per SM) on 640-4096 rows of 140 or more entries and cv >=
/// 0.5 at n from 1024 to 2048 (NOTES.md, "SpMM step 17"): on 118 weight-like matrices (magnitude-pruned, m
/// 640-4096, k 1536-4096, 5-12%) it ran 1.12x faster on geometric mean than in the order [`column_tiles_first`]
/// picks (0.89x-1.39x; 768 x 3072 at 11%, cv 1.3, n = 1536: 1.39x); at n = 3072 the claim loses (0.92x on 18) and
/// at n = 512 it varies too much (0.73x-1.39x). Elsewhere [`column_tiles_first`] decides.
pub fn block_order(
    config: &SpmmConfig,
    stats: &crate::csr::RowStats,
    items: usize,
    n: usize,
    blocks_per_sm: usize,
    sm_count: usize,
) -> BlockOrder {
    let row_blocks = items.div_ceil(config.rows_per_block() as usize);
    let column_tiles = config.column_groups(n);
    // A predicated twin runs as its tile does in every column tile that n does not cut: the same order.
    let tile = SpmmConfig { predicate_loads: false, ..*config };
    // Both tiles are launch-bounded, so they never walk pieces: items are rows.
    let two_rows = tile.same_kernel(&select::two_row_tile(config.dtype))
        && (512..=1536).contains(&items)
        && (1024..=2048).contains(&n)
        && stats.mean >= 70.0
        && (stats.cv >= 0.5 || stats.mean >= 200.0);
    let eight_rows = tile.same_kernel(&select::eight_row_tile(config.dtype))
        && (768..=1024).contains(&items)
        && n == 1024
        && stats.mean >= 150.0
        && stats.cv >= 0.85;
    let four_rows = tile.same_kernel(&select::four_row_tile(config.dtype))
        && (640..=4096).contains(&items)
        && (1024..=2048).contains(&n)
        && stats.mean >= 140.0
        && stats.cv >= 0.5;
    if two_rows || eight_rows || four_rows {
        BlockOrder::SmAffine
    } else if tile.same_kernel(&select::thirty_two_row_tile(config.dtype)) {
        // One block per SM. On the 1440 problems of its sweep (NOTES.md, "SpMM step 21") column tiles first was
        // 1.13x faster on geometric mean, and up to 1.59x on uneven rows (384 x 2048 at 20%, cv 0.96, n = 2048);
        // even rows (cv < 0.1) went the other way at large n (1024 x 3072 at 5%, n = 3072: 1.48x with rows first).
        if stats.cv < 0.1 {
            BlockOrder::RowBlocksFirst
        } else {
            BlockOrder::ColumnTilesFirst
        }
    } else if column_tiles_first(row_blocks, column_tiles, blocks_per_sm, sm_count, stats.cv) {
        BlockOrder::ColumnTilesFirst
    } else {
        BlockOrder::RowBlocksFirst
    }
}

/// What a launch takes instead of the library's choice, for tests and benchmarks: the block order (None:
/// [`block_order`]), and whether to leave A's empty rows out of the grid (None: [`skips_empty_rows`]).
#[derive(Clone, Copy, Default)]
struct Overrides {
    order: Option<BlockOrder>,
    leave_out_empty_rows: Option<bool>,
}

/// The one launcher: checks, then the unsafe launches (the SpMM kernel, the fix-up when rows are split, and the
/// fill of the empty rows the grid left out). Returns how many rows the grid left out.
fn launch<T: Scalar>(
    gpu: &Gpu,
    a: &DeviceCsr<T>,
    b: &DeviceDense<T>,
    epilogue: SpmmEpilogue,
    c: &mut DeviceDense<T>,
    config: &SpmmConfig,
    overrides: Overrides,
) -> Result<usize> {
    let bias = epilogue.bias;
    check_gpu_operands(gpu, a, b, c)?;
    check_bias(gpu, a, bias)?;
    check_shapes(a, b, c)?;
    let (m, k, n) = (a.rows(), a.cols(), b.cols());
    check_config(config, T::DTYPE, m, k, n)?;
    if m == 0 || n == 0 {
        return Ok(0);
    }
    let kernel = gpu.tile_kernel(config)?;
    let stream = gpu.stream();
    let derived = a.derived(gpu)?;
    let split = chosen_split(gpu, a, n, config)?;
    let partials = match split {
        Some(s) => Some(
            // SAFETY: every element the fix-up reads is written first: each piece of a split row writes its
            // partial row in full (all n columns over the grid's column blocks), before the fix-up runs.
            unsafe { stream.alloc::<f32>(s.num_partials * n) }
                .map_err(Error::driver("allocating SpMM partial rows", 4 * s.num_partials * n))?,
        ),
        None => None,
    };
    let swizzled_rows = derived.swizzled_rows.as_ref().map(|s| s.device_ptr(stream));
    let (values, _g2) = a.values.device_ptr(stream);
    let (row_offsets, _g3) = a.row_offsets.device_ptr(stream);
    let (column_indices, _g4) = a.column_indices.device_ptr(stream);
    let (dense, _g5) = b.data.device_ptr(stream);
    let bias_ptr = bias.map(|s| s.device_ptr(stream));
    let pieces = split.map(|s| s.pieces.device_ptr(stream));
    let split_rows = split.map(|s| s.split_rows.device_ptr(stream));
    let partials_ptr = partials.as_ref().map(|p| p.device_ptr(stream));
    let (out, _g6) = c.data.device_ptr_mut(stream);
    let ptr = |p: &Option<(u64, _)>| p.as_ref().map_or(0, |(p, _)| *p);
    let skipped = skipped_rows(derived, split.is_some(), n, config, overrides.leave_out_empty_rows);
    let items = split.map_or(m, |s| s.num_pieces) - skipped;
    // The kernel counts rows or pieces in an int; pieces (rows plus a share of the split rows' entries) can pass
    // i32::MAX where the rows do not.
    if items > i32::MAX as usize - config.rows_per_block() as usize {
        return Err(Error::TooLarge(format!("{items} rows or row pieces: the SpMM kernel counts them in 32 bits")));
    }
    let (row_blocks, column_tiles) = (items.div_ceil(config.rows_per_block() as usize), config.column_groups(n));
    let order = match overrides.order {
        Some(order) => order,
        None => block_order(config, &derived.stats, items, n, kernel.blocks_per_sm, gpu.info().sm_count),
    };
    if order == BlockOrder::SmAffine && !config.claims_blocks() {
        return Err(Error::Unsupported {
            config: config.kernel_name(),
            reason: "the SM-affine block order needs a launch-bounded variant (SpmmConfig::claims_blocks)".into(),
        });
    }
    if order != BlockOrder::RowBlocksFirst && row_blocks.saturating_mul(column_tiles) > i32::MAX as usize {
        return Err(Error::TooLarge(format!(
            "{row_blocks} row blocks x {column_tiles} column tiles is past the 2^31 - 1 blocks of a 1-D grid \
             ({order:?}); row blocks first has no such limit"
        )));
    }
    // Held over the launch: the counters are this launch's until it has claimed every pair (and reset them).
    let mut counters = match order {
        BlockOrder::SmAffine => Some(gpu.tile_counters(column_tiles + 1)?),
        _ => None,
    };
    let tile_counters = counters.as_mut().and_then(|c| c.current.as_mut()).map(|c| c.device_ptr_mut(stream));
    let params = SpmmParams {
        // Without a split, the entries of swizzled_rows the grid walks (all m rows when none is skipped).
        m: (m - if split.is_none() { skipped } else { 0 }) as i32,
        k: k as i32,
        n: n as i32,
        nnz: a.nnz() as i32,
        swizzled_rows: ptr(&swizzled_rows),
        values,
        row_offsets,
        column_indices,
        dense,
        bias: ptr(&bias_ptr),
        out,
        pieces: ptr(&pieces),
        partials: ptr(&partials_ptr),
        split_rows: ptr(&split_rows),
        num_pieces: split.map_or(0, |s| (s.num_pieces - skipped) as i32),
        num_split_rows: split.map_or(0, |s| s.num_split_rows as i32),
        block_order: order.code(),
        row_blocks: row_blocks as i32,
        tile_counters: ptr(&tile_counters),
        alpha: epilogue.alpha,
        beta: epilogue.beta,
    };
    let cfg = LaunchConfig {
        grid_dim: match order {
            BlockOrder::RowBlocksFirst => (row_blocks as u32, column_tiles as u32, 1),
            BlockOrder::ColumnTilesFirst | BlockOrder::SmAffine => ((row_blocks * column_tiles) as u32, 1, 1),
        },
        block_dim: (config.block_width, config.block_items_y, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: check_shapes/check_config established that the kernel matches T and the problem: A's arrays
    // were validated at upload (sorted in-range columns, monotone offsets, 32-bit sizes), B is k x n and C is
    // m x n with n a multiple of the dense vector width (aligned vector accesses), k * n fits in i32, and the
    // grid covers exactly m rows (or the split's pieces, which cover every row once, each piece within its
    // row) and n columns (each block its group of config.column_tiles column tiles, the last group cut at n's
    // last tile), in every block order (the 1-D ones: row_blocks * column_tiles < 2^31 blocks, checked
    // above, decoded or claimed by the kernel as the same pairs, each once; SM-affine: `tile_counters` holds
    // column_tiles + 1 zero ints, this launch's alone under the guard); partial rows are num_partials x n f32.
    // With beta not 0 each element of C is read where it is stored, by the thread that stores it, once (the
    // fix-up and the fill write rows the grid does not). All buffers outlive the launch on this stream.
    unsafe { stream.launch_builder(&kernel.function).arg(&params).launch(cfg) }
        .map_err(Error::driver("launching SpMM", 0))?;
    if let Some(s) = split {
        let cfg = LaunchConfig {
            grid_dim: (s.num_split_rows as u32, n.div_ceil(FIXUP_THREADS as usize).min(65_535) as u32, 1),
            block_dim: (FIXUP_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: as above; block x reads split row x's partial rows (written by the launch before it on
        // this stream) and writes that row of C; the column loop strides over the grid's y extent.
        unsafe { stream.launch_builder(&kernel.fixup).arg(&params).launch(cfg) }
            .map_err(Error::driver("launching the SpMM fix-up", 0))?;
    }
    if skipped > 0 {
        // The row of each skipped entry: the third int of a swizzle entry, the first of a piece (four ints each).
        let (rows, first) = match split {
            Some(s) => (pieces.as_ref().map_or(0, |(p, _)| *p), 4 * (s.num_pieces - skipped)),
            None => (ptr(&swizzled_rows), 4 * (m - skipped) + 2),
        };
        let zero = SpmmZeroRowsParams {
            rows: rows + 4 * first as u64,
            stride: 4,
            count: skipped as i32,
            n: n as i32,
            alpha: epilogue.alpha,
            beta: epilogue.beta,
            pad: 0,
            bias: ptr(&bias_ptr),
            out,
        };
        let warps = (ZERO_ROWS_THREADS / 32) as usize;
        let cfg = LaunchConfig {
            grid_dim: (skipped.div_ceil(warps).min(65_535) as u32, 1, 1),
            block_dim: (ZERO_ROWS_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: `rows` points into the swizzle or the pieces (alive on this stream past the launch), whose
        // last `skipped` entries are the empty rows of A, each a row < m, once; each warp writes all n elements of
        // its rows of C (m x n, n a multiple of 16 / size_of::<T>() where it stores 16 bytes); the bias, when
        // given, holds m floats (checked at the top of this function). The tile kernel's grid wrote none of these rows.
        unsafe { stream.launch_builder(&kernel.zero_rows).arg(&zero).launch(cfg) }
            .map_err(Error::driver("launching the SpMM empty-row fill", 0))?;
    }
    Ok(skipped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::spmm_table;
    use crate::DType;

    /// A's row statistics and tensor-core block counts, as `spmm_auto` computes them.
    fn stats_and_counts(a: &sprs::CsMat<f32>) -> (crate::csr::RowStats, Option<tensor_core::BlockCounts>) {
        let indptr = a.indptr().to_proper().to_vec();
        let stats = crate::csr::RowStats::of_csr(&indptr, a.indices());
        (stats, Some(tensor_core::BlockCounts::of(a.cols(), &indptr, a.indices())))
    }

    /// The choice for `a` (all its rows, the empty ones after) on a device with the wgmma kernel, by name.
    fn choice(a: &sprs::CsMat<f32>, n: usize, dtype: crate::DType) -> String {
        let (stats, counts) = stats_and_counts(a);
        SpmmKernel::select_with(true, a.rows(), a.cols(), n, a.nnz(), &stats, dtype, counts).to_string()
    }

    /// f16/bf16 16-row windows at n = 32 over a small B (`select::small_b_window_tiles_n`, NOTES.md "SpMM step 77"),
    /// on matrices drawn as step 75's scan drew them.
    #[test]
    fn windows_over_a_small_b_take_64_columns_per_warp_at_n_32() {
        // Power-law rows of 95 over k = 443 (9.2 us on 64 columns per warp, 11.3 on 32).
        let a = crate::gen::by_name("powerlaw", 4991, 443, 0.230248, 1028915420).unwrap();
        for dtype in [DType::F16, DType::Bf16] {
            assert_eq!(choice(&a, 32, dtype), format!("spmm_tc_{dtype}_n8"));
        }
        // Rows of 4 (40730 x 269): 32 columns per warp, as before.
        let short = crate::gen::by_name("powerlaw", 40730, 269, 0.01487, 733378849).unwrap();
        assert_eq!(choice(&short, 32, DType::F16), "spmm_tc_f16_n4");
        // Rows of 47 over k = 17391 (3925 rows): as before.
        let wide_k = crate::gen::by_name("powerlaw", 3925, 17391, 0.002703, 780106393).unwrap();
        assert_eq!(choice(&wide_k, 32, DType::F16), "spmm_tc_f16_n4");
    }

    /// f32 few uneven rows (NOTES.md "SpMM step 78"): the windows from their fill, two warps per row where a warp per
    /// row walked the longest on the critical path; on matrices drawn as step 78's sets drew them.
    #[test]
    fn few_uneven_f32_rows_take_the_windows_or_two_warps_per_row() {
        let pick = |a: &sprs::CsMat<f32>, n: usize| choice(a, n, DType::F32);
        // Power-law 870 x 3042, rows of 410, 13% full (59.9 -> 23.2 us at n = 128, 94.3 -> 50.7 us at n = 512).
        let dense = crate::gen::by_name("powerlaw", 870, 3042, 0.134451, 264990650).unwrap();
        assert_eq!(pick(&dense, 128), "spmm_tc_f32_w64_n8");
        for n in [256, 512, 1024] {
            assert_eq!(pick(&dense, n), "spmm_tc_f32_w64_n16", "n = {n}");
        }
        // Without the wgmma kernel, the mma.sync one from 12% full.
        let (stats, counts) = stats_and_counts(&dense);
        let without = SpmmKernel::select_with(false, 870, 3042, 512, dense.nnz(), &stats, DType::F32, counts);
        assert_eq!(without.to_string(), "spmm_tc_f32_w64_n8");
        // Even rows of the same shape and fill keep their tile.
        let even = crate::gen::by_name("uniform", 870, 3042, 0.134451, 264990650).unwrap();
        for n in [128, 256, 512] {
            assert!(!pick(&even, n).starts_with("spmm_tc_"), "n = {n}");
        }
        // Power-law 461 x 3552, rows of 45 (15.8 -> 11.6 us at n = 512): two warps per row at n = 256-512, not 1024.
        let sparse = crate::gen::by_name("powerlaw", 461, 3552, 0.012504, 535609565).unwrap();
        for n in [256, 512] {
            assert_eq!(pick(&sparse, n), "spmm_f32_s1d4_y2k32x128w32_u4_nopred_r2", "n = {n}");
        }
        assert_eq!(pick(&sparse, 1024), "spmm_f32_s1d4_y1k32x128w32_u4_nopred");
        // Rows of 34 in 997 rows keep the warp per row (1.16x slower split at n = 512).
        let short = crate::gen::by_name("powerlaw", 997, 2390, 0.014226, 954153182).unwrap();
        assert_eq!(pick(&short, 512), "spmm_f32_s1d4_y1k32x128w32_u4_nopred");
    }

    /// f32 long uneven rows in 384-1024 rows at n = 1024-2048 (NOTES.md "SpMM step 79"): power-law rows, their longest
    /// far out, leave the eight-row tile; rows whose scales differ keep it. On matrices of step 79's calibration set.
    #[test]
    fn rare_long_rows_leave_the_eight_row_tile() {
        let pick = |a: &sprs::CsMat<f32>, n: usize| choice(a, n, DType::F32);
        // Power-law 464 x 6134, rows of 232, longest 4597 (13.7 standard deviations out; 104.8 -> 53.9 us at n = 1024).
        let power_law = crate::gen::by_name("powerlaw", 464, 6134, 0.037985, 726042693).unwrap();
        // Rows scaled by exp(0.55 N) before pruning, 664 x 4024, rows of 232, longest 2279 (4.9 out).
        let scaled = crate::gen::by_name("scaled-0.55", 664, 4024, 0.0577, 415904126).unwrap();
        for n in [1024, 1536, 2048] {
            assert_eq!(pick(&power_law, n), "spmm_f32_s1d2_y2k32x32w16_u4_pred", "n = {n}");
            assert_eq!(pick(&scaled, n), "spmm_f32_s1d2_y8k32x64w32_u4_nopred_lb2", "n = {n}");
        }
    }

    /// f32 power-law rows past 1024 rows (NOTES.md "SpMM step 79"): the k = 16 tile where the four-row tile's longest row
    /// sets the launch's time at n = 1024-1536; weight-like rows keep the four-row tile. On step 79's calibration set.
    #[test]
    fn rare_long_rows_on_the_critical_path_leave_the_four_row_tile() {
        let pick = |a: &sprs::CsMat<f32>, n: usize| choice(a, n, DType::F32);
        let (four_rows, k16) = ("spmm_f32_s2d4_y4k16x64w8_u4_nopred_lb8", "spmm_f32_s2d4_y4k16x32w8_u4_nopred");
        // Power-law 2197 x 3629, rows of 146, longest 3629 (0.63x of the four-row tile's time at n = 1024).
        let power_law = crate::gen::by_name("powerlaw", 2197, 3629, 0.038854, 380691810).unwrap();
        assert_eq!(pick(&power_law, 1024), k16);
        assert_eq!(pick(&power_law, 2048), four_rows, "the longest row within the share");
        // Rows scaled by exp(0.48 N), 2352 x 3333 (the k = 16 tile 1.20x slower at n = 1024).
        let scaled = crate::gen::by_name("scaled-0.48", 2352, 3333, 0.1110, 349865334).unwrap();
        assert_eq!(pick(&scaled, 1024), four_rows);
    }

    /// f16/bf16 uneven rows in 384-1023 rows at n = 1024-2048 (NOTES.md "SpMM step 79"): the 64-row windows from 5%
    /// full; even rows as full keep their tile. On matrices of step 79's calibration and held-out sets.
    #[test]
    fn uneven_half_rows_take_the_wide_windows_at_a_wide_n() {
        // Rows scaled by exp(0.55 N), 664 x 4024, cv 1.79, windows 5.7% full (f16 at n = 1536: 61.5 -> 39.8 us).
        let scaled = crate::gen::by_name("scaled-0.55", 664, 4024, 0.0577, 415904126).unwrap();
        // Power-law 620 x 3650, cv 0.94, 5.8% full.
        let power_law = crate::gen::by_name("powerlaw", 620, 3650, 0.058082, 1070278986).unwrap();
        // Uniform 588 x 1809, 6.1% full: the tile stays (0.80x-0.96x on the windows).
        let uniform = crate::gen::by_name("uniform", 588, 1809, 0.0625, 900227630).unwrap();
        for dtype in [DType::F16, DType::Bf16] {
            for n in [1024, 1536, 2048] {
                assert!(choice(&scaled, n, dtype).starts_with(&format!("spmm_tc_{dtype}_w64_")), "{dtype} n = {n}");
                assert!(choice(&power_law, n, dtype).starts_with(&format!("spmm_tc_{dtype}_w64_")), "{dtype} n = {n}");
                assert!(!choice(&uniform, n, dtype).contains("_w64_"), "{dtype} n = {n}");
            }
            // Not at n = 512 (8% full asked there), nor in f32.
            assert!(!choice(&scaled, 512, dtype).contains("_w64_"), "{dtype}");
        }
        assert!(!choice(&scaled, 1536, DType::F32).starts_with("spmm_tc_"));
    }

    /// f16/bf16 few uneven rows at n = 128-256 (NOTES.md "SpMM step 78"): the 64-row windows from 2900 pairs.
    #[test]
    fn few_uneven_half_rows_take_the_wide_windows() {
        // Power-law 757 x 6096, rows of 739 (f16 at n = 256: 41.5 -> 22.8 us from the k = 8 tile).
        let long = crate::gen::by_name("powerlaw", 757, 6096, 0.125, 531212698).unwrap();
        // Power-law 307 x 1052, rows of 309 (1320 pairs at n = 256): the 16-row windows stay.
        let short = crate::gen::by_name("powerlaw", 307, 1052, 0.333333, 294199983).unwrap();
        for dtype in [DType::F16, DType::Bf16] {
            for n in [128, 256] {
                assert_eq!(choice(&long, n, dtype), format!("spmm_tc_{dtype}_w64_n8"), "n = {n}");
                assert!(!choice(&short, n, dtype).contains("_w64_"), "n = {n}");
            }
        }
    }

    /// The choice on the non-empty rows (`SpmmKernel::select_with`, NOTES.md "SpMM step 75") against the choice on
    /// all rows, on matrices drawn here.
    #[test]
    fn mostly_empty_rows_take_the_tile_chosen_for_the_others() {
        use crate::DType::{Bf16, F16, F32};
        let pick = |a: &sprs::CsMat<f32>, n: usize, dtype: crate::DType| {
            let (stats, counts) = stats_and_counts(a);
            let (m, k, nnz) = (a.rows(), a.cols(), a.nnz());
            let all_rows = SpmmKernel::select_rows(true, m, k, n, nnz, &stats, dtype, counts).to_string();
            (all_rows, SpmmKernel::select_with(true, m, k, n, nnz, &stats, dtype, counts).to_string())
        };
        // 22,534 x 1,052, half-bandwidth 9: 21,473 rows empty, the 64-row windows 20% full.
        let banded = crate::gen::banded(22534, 1052, 9, 1);
        assert_eq!(
            pick(&banded, 1024, F32),
            ("spmm_f32_s1d4_y1k32x128w32_u4_nopred".into(), "spmm_f32_s1d4_y2k16x128w16_u4_nopred_lb16".into())
        );
        for dtype in [F16, Bf16] {
            let (all_rows, chosen) = pick(&banded, 1024, dtype);
            assert!(all_rows.starts_with("spmm_tc_") && all_rows.contains("_w64_"), "{all_rows}");
            assert_eq!(chosen, format!("spmm_{}_s1d8_y4k8x64w8_u4_nopred", dtype.name()));
            // At n = 64 the windows stay (0.81x-0.86x with the tile).
            let (all_rows, chosen) = pick(&banded, 64, dtype);
            assert!(chosen.starts_with("spmm_tc_") && chosen == all_rows, "{all_rows} -> {chosen}");
        }
        // f32 keeps its windows even where they are 43% full (half-bandwidth 27 over 2,942 columns).
        let wider = crate::gen::banded(35991, 2942, 27, 1);
        let (all_rows, chosen) = pick(&wider, 1024, F32);
        assert!(all_rows.starts_with("spmm_tc_f32") && chosen == all_rows, "{all_rows} -> {chosen}");
        // f16 windows 81% full stay (half-bandwidth 112 over 1,976 columns).
        let dense_band = crate::gen::banded(10323, 1976, 112, 1);
        let (all_rows, chosen) = pick(&dense_band, 1024, F16);
        assert!(all_rows.starts_with("spmm_tc_f16") && chosen == all_rows, "{all_rows} -> {chosen}");
        // Uneven rows (power-law, 80% of them emptied) keep the choice on all rows.
        let uneven = crate::gen::with_empty_rows(&crate::gen::power_law(30000, 2000, 8.0, 2.0, 3), 0.8, 3);
        for (n, dtype) in [(128, F32), (1024, F32), (128, F16), (1024, Bf16)] {
            let (all_rows, chosen) = pick(&uneven, n, dtype);
            assert_eq!(all_rows, chosen, "n = {n}, {dtype}");
        }
        // Even rows, 90% of them emptied (the rows' own mean 120): the tile chosen for the others.
        let emptied = crate::gen::with_empty_rows(&crate::gen::uniform_random(19267, 12243, 0.0098, 5), 0.9, 5);
        assert_eq!(
            pick(&emptied, 1024, F32),
            ("spmm_f32_s1d4_y1k32x128w32_u4_nopred".into(), "spmm_f32_s1d4_y2k16x128w16_u4_nopred_lb16".into())
        );
        // Step 76: 17,747 x 2,220, half-bandwidth 1 (15,526 rows empty, the others of 3): the two-row tile in turn
        // chosen for the others runs over all rows, though it would not leave the empty rows out; at n = 1024 the
        // same tile in 43,325 rows leaves them out. Not in f16, whose tile for the others is not in turn.
        let tall = crate::gen::banded(17747, 2220, 1, 2);
        for n in [256, 1024] {
            let (all_rows, chosen) = pick(&tall, n, F32);
            assert_eq!(all_rows, "spmm_f32_s1d4_y1k32x128w32_u4_nopred", "n = {n}");
            assert_eq!(chosen, "spmm_f32_s1d4_y2k16x128w16_u4_nopred_c8_lb16", "n = {n}");
        }
        let taller = crate::gen::banded(43325, 3787, 1, 2);
        assert_eq!(pick(&taller, 1024, F32).1, "spmm_f32_s1d4_y2k16x128w16_u4_nopred_c8_lb16");
        let (all_rows, chosen) = pick(&tall, 256, F16);
        assert!(!chosen.contains("_c") || chosen == all_rows, "{all_rows} -> {chosen}");
        // The choice on the non-empty rows runs only where the grid would leave the empty rows out: 1,000 of
        // 3,000 rows empty are under EMPTY_ROW_BLOCKS for every tile.
        let few = crate::gen::with_empty_rows(&crate::gen::uniform_random(3000, 2000, 0.01, 4), 1.0 / 3.0, 4);
        for dtype in [F32, F16] {
            let (all_rows, chosen) = pick(&few, 256, dtype);
            assert_eq!(all_rows, chosen, "{dtype}");
        }
    }

    #[test]
    fn nonempty_rows_keep_the_sums() {
        let stats = |lens: &[usize]| {
            let mut indptr = vec![0];
            for l in lens {
                indptr.push(indptr.last().unwrap() + l);
            }
            crate::csr::RowStats::from_indptr(&indptr)
        };
        // Half the rows empty, the rest of 6: mean 3, cv 1 over all rows; mean 6, cv 0 over the others.
        let all = stats(&[0, 6, 0, 6, 6, 0, 0, 6]);
        assert_eq!((all.mean, all.cv, all.empty_rows), (3.0, 1.0, 4));
        let (rows, nonempty) = select::nonempty_rows(8, &all);
        assert_eq!((rows, nonempty.mean, nonempty.empty_rows, nonempty.max), (4, 6.0, 0, 6));
        assert!(nonempty.cv.abs() < 1e-12, "{}", nonempty.cv);
        // Uneven rows: the non-empty ones' own statistics.
        let lens = [0, 1, 0, 9, 4, 0, 2, 0, 0, 4];
        let (rows, nonempty) = select::nonempty_rows(lens.len(), &stats(&lens));
        let want = stats(&[1, 9, 4, 2, 4]);
        assert_eq!(rows, 5);
        assert!((nonempty.mean - want.mean).abs() < 1e-12 && (nonempty.cv - want.cv).abs() < 1e-12);
        // No empty row: unchanged.
        let even = stats(&[3, 3, 5]);
        assert_eq!(select::nonempty_rows(3, &even), (3, even.clone()));
    }

    #[test]
    fn empty_rows_are_left_out_from_12288_blocks() {
        let stats = |empty_rows| crate::csr::RowStats { empty_rows, ..Default::default() };
        let config = |name: &str| name.parse::<SpmmConfig>().unwrap();
        // A warp per row over 128 columns: a block per empty row and column tile.
        let warp = config("spmm_f32_s1d4_y1k32x128w32_u4_nopred");
        assert!(skips_empty_rows(&stats(12_288), &warp, 128));
        assert!(!skips_empty_rows(&stats(12_287), &warp, 128));
        assert!(skips_empty_rows(&stats(3072), &warp, 512), "3072 rows x 4 column tiles");
        assert!(!skips_empty_rows(&stats(3071), &warp, 512));
        assert!(!skips_empty_rows(&stats(0), &warp, 1 << 20));
        // Four rows a block over 32 columns: 16,384 empty rows at n = 32 are 4,096 blocks, at n = 96 12,288.
        let k8 = config("spmm_f32_s1d4_y4k8x32w8_u4_nopred_lb32");
        assert!(!skips_empty_rows(&stats(16_384), &k8, 32));
        assert!(skips_empty_rows(&stats(16_384), &k8, 96));
        assert!(!skips_empty_rows(&stats(16_384), &k8, 64));
        // Rows per block count the row split's subwarps once per row: (8, 8, 32, 8) in four parts is two rows.
        let split4 = config("spmm_f32_s1d4_y8k8x32w8_u4_nopred_r4");
        assert_eq!(split4.rows_per_block(), 2);
        assert!(skips_empty_rows(&stats(24_576), &split4, 32));
        assert!(!skips_empty_rows(&stats(24_574), &split4, 32));
        // Tiles in turn count a group of column tiles as one block: eight tiles of 32 columns at n = 256.
        let in_turn = config("spmm_f32_s1d4_y4k8x32w8_u4_nopred_c8_lb32");
        assert!(!skips_empty_rows(&stats(40_000), &in_turn, 256), "10,000 blocks");
        assert!(skips_empty_rows(&stats(40_000), &in_turn, 288), "20,000 blocks");
    }

    #[test]
    fn validate_refuses_huge_sizes_without_overflow() {
        // 2^16 * 2^16 overflows u32: the size bound must refuse it before any product is formed (a debug
        // build, as the tests run, would panic on the overflow).
        let base: SpmmConfig = "spmm_f32_s1d1_y4k32x32w8_u4_pred".parse().unwrap();
        let huge = SpmmConfig { block_items_y: 1 << 16, block_width: 1 << 16, block_items_x: 1 << 16, ..base };
        assert_eq!(huge.validate(), Err("every size must be at most 1024".to_string()));
        assert_eq!(huge.threads_per_block(), u32::MAX);
        assert!(base.validate().is_ok());
    }

    #[test]
    fn validate_allows_several_warps_of_narrow_subwarps_up_to_1024_threads() {
        // Sputnik's one-warp rule for 1 < block_width < 32 is not ours: the 32-row tile runs 16 warps of two
        // 16-thread rows. The thread bound is.
        let tile: SpmmConfig = "spmm_f32_s1d4_y32k16x64w16_u4_nopred".parse().unwrap();
        assert!(tile.validate().is_ok());
        assert!(SpmmConfig { block_items_y: 64, ..tile }.validate().is_ok());
        let too_many = SpmmConfig { block_items_y: 128, ..tile };
        assert_eq!(
            too_many.validate(),
            Err("block_items_y * block_width must be at most 1024 (threads per block)".to_string())
        );
        assert_eq!(
            SpmmConfig { block_items_y: 33, ..tile }.validate(),
            Err("block_items_y * block_width must be a multiple of 32".to_string())
        );
    }

    #[test]
    fn row_split_names_parse_and_validate() {
        let split: SpmmConfig = "spmm_f32_s1d4_y2k32x128w32_u4_nopred_r2".parse().unwrap();
        assert_eq!((split.row_split, split.rows_per_block(), split.launch_bounds), (2, 1, false));
        assert_eq!(split.kernel_name(), "spmm_f32_s1d4_y2k32x128w32_u4_nopred_r2");
        assert!(split.validate().is_ok() && !split.walks_pieces());
        let bounded: SpmmConfig = "f32_s1d4_y8k8x32w8_u4_nopred_r4_lb4".parse().unwrap();
        assert_eq!((bounded.row_split, bounded.rows_per_block(), bounded.min_occupancy), (4, 2, 4));
        assert_eq!(bounded.kernel_name(), "spmm_f32_s1d4_y8k8x32w8_u4_nopred_r4_lb4");
        // Sputnik's names are row_split 1 and keep their form; `_r1` is read as the same.
        let plain: SpmmConfig = "spmm_f32_s1d4_y1k32x128w32_u4_nopred".parse().unwrap();
        assert_eq!((plain.row_split, plain.rows_per_block()), (1, 1));
        assert_eq!("spmm_f32_s1d4_y1k32x128w32_u4_nopred_r1".parse::<SpmmConfig>(), Ok(plain));
        for bad in
            ["f32_s1d4_y8k8x32w8_u4_nopred_lb4_r4", "f32_s1d4_y8k8x32w8_u4_nopred_rx", "f32_s1d4_y8k8x32w8_u4_r4"]
        {
            assert!(bad.parse::<SpmmConfig>().is_err(), "{bad}");
        }
        assert_eq!(
            SpmmConfig { row_split: 3, ..split }.validate(),
            Err("block_items_y must be a multiple of row_split".to_string())
        );
        assert_eq!(SpmmConfig { row_split: 0, ..split }.validate(), Err("every size must be positive".to_string()));
    }

    #[test]
    fn column_tile_names_parse_and_validate() {
        let in_turn: SpmmConfig = "spmm_f32_s1d4_y4k8x32w8_u4_nopred_c8_lb32".parse().unwrap();
        assert_eq!((in_turn.column_tiles, in_turn.row_split, in_turn.min_occupancy), (8, 1, 32));
        assert_eq!(in_turn.kernel_name(), "spmm_f32_s1d4_y4k8x32w8_u4_nopred_c8_lb32");
        // The claim of the SM-affine order is one column tile: not for these variants.
        assert!(in_turn.validate().is_ok() && !in_turn.claims_blocks());
        assert!(SpmmConfig { column_tiles: 1, ..in_turn }.claims_blocks());
        let both: SpmmConfig = "f32_s1d4_y8k8x32w8_u4_nopred_r4_c2".parse().unwrap();
        assert_eq!((both.row_split, both.column_tiles, both.launch_bounds), (4, 2, false));
        assert_eq!(both.kernel_name(), "spmm_f32_s1d4_y8k8x32w8_u4_nopred_r4_c2");
        // `_c1` is read as Sputnik's one tile per block; the suffixes keep their order.
        let plain: SpmmConfig = "spmm_f32_s1d4_y4k8x32w8_u4_nopred_lb32".parse().unwrap();
        assert_eq!("spmm_f32_s1d4_y4k8x32w8_u4_nopred_c1_lb32".parse::<SpmmConfig>(), Ok(plain));
        for bad in [
            "f32_s1d4_y4k8x32w8_u4_nopred_lb32_c8",
            "f32_s1d4_y4k8x32w8_u4_nopred_c8_r2",
            "f32_s1d4_y4k8x32w8_u4_nopred_cx",
        ] {
            assert!(bad.parse::<SpmmConfig>().is_err(), "{bad}");
        }
        assert_eq!(
            SpmmConfig { column_tiles: 0, ..in_turn }.validate(),
            Err("every size must be positive".to_string())
        );
    }

    #[test]
    fn few_rows_at_small_n_take_the_row_split_over_the_tensor_cores() {
        // The pruned 384 x 1536 at 70% (176947 entries, 576 64-row k-blocks, 30% full): the tensor cores at n = 256
        // before the row split (18.8 us), the row split's two warps per row now (16.3 us; NOTES.md, "SpMM step 29");
        // the tensor cores still at n = 1024.
        let stats =
            crate::csr::RowStats { min: 342, max: 817, mean: 460.8, cv: 0.14, empty_rows: 0, columns_per_entry: None };
        let counts = Some(tensor_core::BlockCounts { narrow: 2304, wide: 576, mid: 0 });
        let select = |n| SpmmKernel::select(384, 1536, n, 176_947, &stats, DType::F32, counts);
        assert_eq!(select(256), SpmmKernel::Tiled(select::split_row_warp_tile(DType::F32)));
        assert!(matches!(select(1024), SpmmKernel::TensorCore(_)), "{:?}", select(1024));
    }

    #[test]
    fn half_types_on_rows_long_for_their_mean_take_the_windows_or_split_tiles() {
        // Power-law rows (NOTES.md, "SpMM step 50"): longest 890, mean 12 (not skewed; 16x the mean is 192).
        let stats =
            crate::csr::RowStats { min: 1, max: 890, mean: 12.0, cv: 1.4, empty_rows: 0, columns_per_entry: None };
        let counts = Some(tensor_core::BlockCounts { narrow: 100_000, wide: 60_000, mid: 0 });
        let pick = |m: usize, n: usize, dtype| SpmmKernel::select(m, 2048, n, m * 12, &stats, dtype, counts);
        let window = |dtype, tiles_n| {
            SpmmKernel::TensorCore(TensorCoreConfig { dtype, window: tensor_core::WINDOW as u32, tiles_n })
        };
        for dtype in [DType::F16, DType::Bf16] {
            let (k8, two_rows) =
                (select::tile(dtype, 1, 8, 4, 8, 64, 8, false), select::tile(dtype, 1, 8, 2, 16, 256, 16, false));
            assert_eq!(pick(65536, 32, dtype), window(dtype, 4));
            assert_eq!(pick(32768, 64, dtype), window(dtype, 8));
            assert_eq!(pick(16384, 128, dtype), window(dtype, 8));
            assert_eq!(pick(32769, 64, dtype), SpmmKernel::Tiled(k8));
            assert_eq!(pick(16385, 128, dtype), SpmmKernel::Tiled(k8));
            assert_eq!(pick(8192, 256, dtype), SpmmKernel::Tiled(k8));
            assert_eq!(pick(16384, 256, dtype), SpmmKernel::Tiled(two_rows));
            assert_eq!(pick(16384, 320, dtype), SpmmKernel::Tiled(k8), "n = 320: not a multiple of 256");
            assert_eq!(pick(16384, 200, dtype), SpmmKernel::Tiled(SpmmConfig { predicate_loads: true, ..k8 }));
            // Without tensor-core counts the windows' shapes fall through to the usual choice; n = 36 is not a
            // multiple of 8 (the usual choice too).
            let usual = |m, n| SpmmKernel::Tiled(SpmmConfig::select_with_stats(m, 2048, n, &stats, dtype));
            assert_eq!(SpmmKernel::select(4096, 2048, 32, 4096 * 12, &stats, dtype, None), usual(4096, 32));
            assert_eq!(pick(4096, 36, dtype), SpmmKernel::select(4096, 2048, 36, 4096 * 12, &stats, dtype, counts));
        }
        // Every tile it gives is valid, compiled and aligned at its n.
        for (m, n, dtype) in (1..=1100).flat_map(|n| [(8192, n, DType::F16), (16384, n, DType::Bf16)]) {
            if let Some(SpmmKernel::Tiled(c)) = select::long_rows_half(m, n, &stats, dtype, true) {
                c.validate().unwrap_or_else(|e| panic!("n = {n}: {c} invalid: {e}"));
                assert!(crate::kernels::spmm_table().iter().any(|t| t.same_kernel(&c)), "n = {n}: {c} not compiled");
                assert_eq!(n % c.dense_vector_width as usize, 0, "n = {n}: {c}");
                assert!(c.predicate_loads || n % c.block_items_x as usize == 0, "n = {n}: {c} without predicates");
            }
        }
        // Not skewed rows only, and not f32.
        let skewed = crate::csr::RowStats { max: 2000, ..stats };
        assert!(select::long_rows_half(8192, 128, &skewed, DType::F16, true).is_none());
        assert!(select::long_rows_half(8192, 128, &stats, DType::F32, true).is_none());
        assert!(select::long_rows_half(8192, 36, &stats, DType::F16, true).is_none());
        assert!(select::long_rows_half(8192, 24, &stats, DType::F16, true).is_none(), "below n = 32: not measured");
        let short = crate::csr::RowStats { max: 250, ..stats };
        assert!(select::long_rows_half(8192, 128, &short, DType::F16, true).is_none());
    }

    /// The generator's power-law m x k at `mean` entries a row (seed `seed`): its row statistics, and the kernel
    /// [`SpmmKernel::select`] takes for it at width n.
    fn powerlaw_choice(
        m: usize,
        k: usize,
        mean: f64,
        seed: u64,
        n: usize,
        dtype: DType,
    ) -> (crate::csr::RowStats, String) {
        let a = crate::gen::by_name("powerlaw", m, k, mean / k as f64, seed).unwrap();
        let indptr = a.indptr();
        let stats = crate::csr::RowStats::from_indptr(indptr.raw_storage());
        let counts = Some(tensor_core::BlockCounts::of(k, indptr.raw_storage(), a.indices()));
        let used = SpmmKernel::select(m, k, n, a.nnz(), &stats, dtype, counts).to_string();
        (stats, used)
    }

    #[test]
    fn half_types_on_uneven_rows_take_the_windows_where_c_is_small() {
        // Step 55's sweep (power-law rows, the generator's own matrices): the 16-row windows where C has at most 2^20
        // elements (2^19 on rows long for their mean), the 64-row ones from 7% full where it has 2^20 or more.
        let pick = |m, k, mean, seed, n, dtype| powerlaw_choice(m, k, mean, seed, n, dtype).1;
        for (dtype, t) in [(DType::F16, "f16"), (DType::Bf16, "bf16")] {
            let (narrow, wide) = (format!("spmm_tc_{t}_n8"), format!("spmm_tc_{t}_w64_n8"));
            let k8 = format!("spmm_{t}_s1d8_y4k8x64w8_u4_nopred");
            // Uneven rows, neither skewed nor long for their mean (2048 x 8192, rows of 4: 11.7 -> 9.2 us at n = 512).
            assert_eq!(pick(2048, 8192, 4.0, 719, 512, dtype), narrow);
            assert_eq!(pick(4096, 8192, 4.0, 731, 256, dtype), narrow);
            // 2^21 elements of C: a tile; in f16 the warp per row over 256 columns since step 68 (its longest row
            // walked whole by the k = 8 tile is the launch's critical path), in bf16 the k = 8 tile (the rule stops at
            // n = 256 there).
            let tile = if dtype == DType::F16 { format!("spmm_{t}_s1d8_y1k32x256w32_u4_nopred") } else { k8.clone() };
            assert_eq!(pick(4096, 8192, 4.0, 731, 512, dtype), tile, "2^21 elements of C");
            // Long for their mean (1024 x 2048, rows of 12, longest 461): at 2^18-2^19 elements, not 2^20.
            assert_eq!(pick(1024, 2048, 12.0, 705, 256, dtype), narrow);
            assert_eq!(pick(1024, 2048, 12.0, 705, 512, dtype), narrow);
            assert_eq!(pick(1024, 2048, 12.0, 705, 1024, dtype), k8);
            // Rows of 40 over k = 512, the 64-row windows 7.7% full: from 2^20 elements the wide windows.
            assert_eq!(pick(4096, 512, 40.0, 727, 128, dtype), narrow);
            assert_eq!(pick(4096, 512, 40.0, 727, 512, dtype), wide);
            assert_eq!(pick(8192, 512, 40.0, 739, 512, dtype), format!("spmm_tc_{t}_w64_n16"));
        }
        // The bounds, on made-up counts: cv 0.8-2.0, n = 64-1024, C up to 2^20; the wide windows from 7% and 2^20.
        let counts = |fill: f64, m: usize| {
            let wide = m / 64 * 40;
            tensor_core::BlockCounts { narrow: wide * 3, wide: (wide as f64 * 0.075 / fill) as usize, mid: 0 }
        };
        let kind = |m: usize, n: usize, cv: f64, wide_fill: f64| {
            let stats =
                crate::csr::RowStats { min: 1, max: 100, mean: 10.0, cv, empty_rows: 0, columns_per_entry: None };
            let nnz = (counts(wide_fill, m).wide as f64 * 64.0 * 16.0 * wide_fill) as usize;
            match SpmmKernel::select(m, 2048, n, nnz, &stats, DType::F16, Some(counts(wide_fill, m))) {
                SpmmKernel::TensorCore(c) if c.is_wide() => "wide",
                SpmmKernel::TensorCore(_) => "narrow",
                SpmmKernel::Tiled(_) => "tile",
            }
        };
        assert_eq!(kind(4096, 256, 1.0, 0.03), "narrow");
        assert_eq!(kind(8192, 128, 0.8, 0.03), "narrow");
        assert_eq!(kind(1024, 1024, 2.0, 0.03), "narrow");
        assert_eq!(kind(4096, 256, 0.79, 0.03), "tile");
        assert_eq!(kind(4096, 256, 2.01, 0.03), "tile");
        assert_eq!(kind(8192, 256, 1.0, 0.03), "tile");
        assert_eq!(kind(16384, 64, 1.0, 0.03), "narrow", "n = 64 since step 56");
        assert_eq!(kind(32768, 64, 1.0, 0.03), "tile", "2^21 elements");
        assert_eq!(kind(16384, 56, 1.0, 0.03), "tile", "n below 64: not measured");
        assert_eq!(kind(1024, 1032, 1.0, 0.03), "tile", "n past 1024");
        assert_eq!(kind(4096, 256, 1.0, 0.072), "wide");
        assert_eq!(kind(8192, 512, 1.0, 0.072), "wide");
        assert_eq!(kind(8192, 512, 1.0, 0.068), "tile");
        assert_eq!(kind(8192, 512, 0.5, 0.072), "tile");
        assert_eq!(kind(2048, 256, 1.0, 0.072), "narrow", "2^19 elements: the narrow windows");
        assert_eq!(kind(16384, 64, 1.0, 0.072), "narrow", "the wide windows from n = 128 only (step 56)");
        assert_eq!(kind(8192, 128, 1.0, 0.072), "wide");
    }

    #[test]
    fn rows_sharing_columns_in_runs_of_32_take_the_32_row_windows() {
        // Step 85's calibration matrices (`bench spmm --gen blocks-RxC:MxK:D:SEED`): where the choice had been the
        // 64-row windows on 32 x 32 and 32 x 16 blocks, the 32-row ones; 128 columns per block from n = 256 in
        // f16/bf16, f32's one 32-row kernel. The 16-row choice stays; 64 x 64 and 16 x 32 blocks and uniform rows
        // do not share columns in runs of 32 only.
        let gen = |r, c, m, k, density, seed| crate::gen::block_sparse(m, k, r, c, density, seed);
        let mid = |dtype: DType, tiles: u32| match dtype {
            DType::F32 => "spmm_tc_f32_w32_n8".to_string(),
            _ => format!("spmm_tc_{dtype}_w32_n{tiles}"),
        };
        for dtype in [DType::F16, DType::Bf16, DType::F32] {
            let a = gen(32, 32, 4096, 4096, 0.2, 9007);
            assert_eq!(choice(&a, 1024, dtype), mid(dtype, 16), "{dtype}");
            assert_eq!(choice(&a, 128, dtype), mid(dtype, 16), "{dtype}: the 64-row choice's width at n = 128");
            let a = gen(32, 16, 2048, 4096, 0.2, 9005);
            assert_eq!(choice(&a, 1024, dtype), mid(dtype, 16), "{dtype}: 32 x 16 blocks");
            let a = gen(32, 32, 8192, 2048, 0.05, 9026);
            assert_eq!(choice(&a, 128, dtype), mid(dtype, 8), "{dtype}: the 64-row choice's width at n = 128");
            // The 16-row windows stay theirs.
            let a = gen(32, 32, 768, 3072, 0.05, 9016);
            assert!(choice(&a, 128, dtype).ends_with("_n4"), "{dtype}: {}", choice(&a, 128, dtype));
            for (r, c) in [(64, 64), (16, 32), (16, 16)] {
                let a = gen(r, c, 4096, 4096, 0.1, 9008);
                for n in [128, 1024] {
                    assert!(!choice(&a, n, dtype).contains("_w32_"), "{dtype}: {r} x {c} blocks, n = {n}");
                }
            }
            let a = crate::gen::uniform_random(4096, 4096, 0.1, 9033);
            assert!(!choice(&a, 1024, dtype).contains("_w32_"), "{dtype}: uniform rows");
        }
        // The rule on counts: fills of 100%, 100% and 52% take them; 100%, 89% and 52% do not, nor 100%, 100% and
        // 71%; nor a choice that is not the 64-row windows, nor counts without the 32-row windows'.
        let wide = TensorCoreConfig { dtype: DType::F16, window: 64, tiles_n: 8 };
        let counts = |mid| tensor_core::BlockCounts { narrow: 4000, wide: 1923, mid };
        let nnz = 4000 * 256;
        assert_eq!(
            tensor_core::mid_windows(&wide, 128, nnz, counts(2000)).map(|c| (c.window, c.tiles_n)),
            Some((32, 8))
        );
        assert_eq!(
            tensor_core::mid_windows(&wide, 256, nnz, counts(2000)).map(|c| (c.window, c.tiles_n)),
            Some((32, 16))
        );
        assert_eq!(tensor_core::mid_windows(&wide, 256, nnz, counts(2248)), None);
        let fuller = tensor_core::BlockCounts { wide: 1400, ..counts(2000) };
        assert_eq!(tensor_core::mid_windows(&wide, 256, nnz, fuller), None);
        let narrow = TensorCoreConfig { window: 16, tiles_n: 4, ..wide };
        assert_eq!(tensor_core::mid_windows(&narrow, 256, nnz, counts(2000)), None);
        assert_eq!(tensor_core::mid_windows(&wide, 256, nnz, counts(0)), None);
    }

    #[test]
    fn wide_windows_take_128_columns_per_block_only_past_n_64() {
        // Step 56: at n <= 64 a block of 128 columns leaves half its warps without columns.
        let counts = tensor_core::BlockCounts { narrow: 120_000, wide: 32768 / 64 * 32, mid: 0 };
        let nnz = counts.wide * 64 * 16 * 3 / 10; // 30% full
        for (n, tiles_n) in [(8, 8), (32, 8), (64, 8), (128, 16), (256, 16)] {
            let c = tensor_core::select_tensor_core(DType::F16, 32768, n, nnz, counts).unwrap();
            assert!(c.is_wide(), "n = {n}: {c}");
            assert_eq!(c.tiles_n, tiles_n, "n = {n}: {c}");
        }
    }

    #[test]
    fn half_skewed_rows_keep_the_windows_up_to_3072_entries_per_row() {
        // Step 56 on the generator's power-law matrices: skewed rows whose longest passes 3072 entries leave the
        // 16-row windows (4096 x 32768, longest 28544: 113.9 -> 24.2 us at n = 64 in f16); a longest row of 1856
        // keeps them, with 32 columns per warp at n = 64 and 128.
        let pick = |m, k, mean, seed, n, dtype| {
            let (stats, used) = powerlaw_choice(m, k, mean, seed, n, dtype);
            assert!(split::is_skewed(&stats), "{m} x {k}: {stats:?}");
            (stats.max, used)
        };
        for (dtype, t) in [(DType::F16, "f16"), (DType::Bf16, "bf16")] {
            for n in [8, 32, 64, 128] {
                let (max, used) = pick(4096, 32768, 40.0, 736, n, dtype);
                assert!(max > select::SKEWED_WINDOW_MAX && !used.contains("_tc_"), "n = {n}: {used}");
                let (max, used) = pick(2048, 2048, 40.0, 718, n, dtype);
                assert!(max <= select::SKEWED_WINDOW_MAX, "{max}");
                assert_eq!(used, format!("spmm_tc_{t}_n4"), "n = {n}");
            }
        }
    }

    #[test]
    fn half_types_on_sparse_windows_take_tiles() {
        // Uniform rows over a wide k (NOTES.md, "SpMM step 51"): the 16-row windows are about 6-7% full, and a tile
        // replaces them where they were chosen for a small C; they stay where the rows are short.
        for (m, k, mean, seed) in
            [(4096, 32768, 400, 3), (1024, 16384, 120, 4), (512, 4096, 40, 5), (4096, 4096, 12, 6)]
        {
            let a = crate::gen::uniform_random(m, k, mean as f64 / k as f64, seed);
            let counts = tensor_core::BlockCounts::of(k, a.indptr().raw_storage(), a.indices());
            let fill = counts.narrow_fill(a.nnz());
            assert!((0.06..0.08).contains(&fill), "{m} x {k}, mean {mean}: {fill}");
        }
        let pick = |m, k, mean: usize, n, seed| {
            let a = crate::gen::uniform_random(m, k, mean as f64 / k as f64, seed);
            let (indptr, indices) = (a.indptr().raw_storage().to_vec(), a.indices().to_vec());
            let stats = crate::csr::RowStats::from_indptr(&indptr);
            let counts = Some(tensor_core::BlockCounts::of(k, &indptr, &indices));
            SpmmKernel::select(m, k, n, a.nnz(), &stats, DType::F16, counts).to_string()
        };
        // The problems the scan found below cuSPARSE on the windows, and one the rule leaves to them.
        assert_eq!(pick(4096, 32768, 400, 64, 7), "spmm_f16_s1d8_y4k8x64w8_u4_nopred");
        assert_eq!(pick(1024, 16384, 120, 32, 8), "spmm_f16_s1d1_y1k32x32w32_u4_pred");
        assert_eq!(pick(8192, 32768, 400, 32, 9), "spmm_f16_s4d4_y4k32x32w8_u4_nopred");
        assert_eq!(pick(1024, 4096, 40, 256, 10), "spmm_f16_s1d8_y4k8x64w8_u4_nopred");
        assert_eq!(pick(4096, 4096, 6, 32, 11), "spmm_tc_f16_n4", "rows of 6: the windows");
        // Rows of 8-31 in 4096 rows or more at n = 32 (step 77): the tile.
        assert_eq!(pick(4096, 4096, 14, 32, 11), "spmm_f16_s1d4_y4k8x32w8_u4_pred", "rows of 14");
        assert_eq!(pick(16384, 2048, 24, 32, 18), "spmm_f16_s1d4_y4k8x32w8_u4_pred", "rows of 24");
        assert_eq!(pick(2048, 4096, 24, 32, 19), "spmm_tc_f16_n4", "fewer rows: the windows");
        // ... and Bernoulli rows of 10 (cv about 0.32, past step 51's 0.3; step 77).
        let a = crate::gen::by_name("pruned", 8192, 2048, 10.0 / 2048.0, 20).unwrap();
        let (stats, counts) = stats_and_counts(&a);
        assert!((0.3..0.4).contains(&stats.cv), "{stats:?}");
        let used = SpmmKernel::select(8192, 2048, 32, a.nnz(), &stats, DType::F16, counts).to_string();
        assert_eq!(used, "spmm_f16_s1d4_y4k8x32w8_u4_pred");
        // n = 32 in 4096 rows or more (step 52): windows up to 14% full give way, the 64-row ones too.
        assert_eq!(pick(16384, 1024, 40, 32, 12), "spmm_f16_s1d4_y4k8x32w8_u4_pred", "8.2% full, was tc_f16_n4");
        assert_eq!(pick(16384, 1024, 120, 32, 13), "spmm_f16_s4d4_y4k32x32w8_u4_nopred", "was tc_f16_w64_n16");
        assert_eq!(pick(4096, 1024, 40, 32, 14), "spmm_f16_s1d4_y4k8x32w8_u4_pred");
        assert_eq!(pick(2048, 1024, 40, 32, 15), "spmm_tc_f16_n4", "fewer rows: the windows");
        assert!(pick(16384, 1024, 120, 64, 16).starts_with("spmm_tc_f16_w64_"), "n = 64 keeps the 64-row windows");
        assert!(pick(16384, 256, 40, 32, 17).starts_with("spmm_tc_f16_"), "rows sharing columns: fuller windows");
    }

    #[test]
    fn column_tiles_go_first_within_a_wave_or_over_uneven_rows() {
        // 132 SMs (H100), the one-warp tile at 12 blocks per SM: 1584 slots.
        let order = |rows: usize, tiles: usize, cv: f64| column_tiles_first(rows, tiles, 12, 132, cv);
        // Within one wave (384 x 4 = 1536 blocks), column tiles first give an SM 1 tile, row blocks first 5.
        assert!(order(384, 4, 0.1));
        assert!(order(768, 2, 0.1));
        // 768 x 768 uniform at n = 1024: 3.9 waves, even rows: row blocks first (23.6 vs 33.3 us).
        assert!(!order(768, 8, 0.1));
        assert!(!order(384, 8, 0.1), "1.9 waves of even rows");
        // Uneven rows (pruned 384 x 384 at 90%, cv 0.73, n = 1024: 1.9 waves) go column tiles first up to 3 waves.
        assert!(order(384, 8, 0.73));
        assert!(!order(384, 16, 0.73), "3.9 waves");
        // Many row blocks keep a wave inside one or two tiles anyway; 128 tiles would give an SM 32 of them.
        assert!(!order(2048, 2, 0.1));
        assert!(!order(2048, 32, 1.0));
        assert!(!order(100, 128, 1.0));
        // The slots come from the kernel's occupancy: the sixteen-warp block fits once per SM (132 slots), so
        // 24 row blocks x 16 tiles are 2.9 waves.
        assert!(!column_tiles_first(24, 16, 1, 132, 0.2));
        assert!(column_tiles_first(24, 16, 1, 132, 0.53));
        assert!(column_tiles_first(24, 4, 1, 132, 0.2), "96 blocks, one wave");
        // Degenerate grids.
        assert!(!order(384, 1, 1.0));
        assert!(!order(0, 8, 1.0));
        assert!(!column_tiles_first(384, 8, 12, 0, 1.0));
        assert!(!column_tiles_first(384, 8, 0, 132, 1.0));
    }

    #[test]
    fn rows_go_longest_first_unless_many_and_even() {
        let stats = |cv: f64| crate::csr::RowStats { mean: 12.0, cv, ..Default::default() };
        let f32_rows_first = |cv: f64, rows: usize| rows_longest_first(&stats(cv), rows, DType::F32);
        // copter2 (cv 0.33), case_ACTIVSg70k (0.38), uniform 4096^2 (0.1): row order.
        assert!(!f32_rows_first(0.33, 55_476));
        assert!(!f32_rows_first(0.38, 70_000));
        assert!(!f32_rows_first(0.1, 4096));
        assert!(!f32_rows_first(0.4, 4096));
        // Uneven rows (email-Enron, pruned weights) and few rows (1536 x 384 at 70%, cv 0.34) stay longest first.
        assert!(f32_rows_first(0.41, 4096));
        assert!(f32_rows_first(3.6, 36_692));
        assert!(f32_rows_first(0.34, 1536));
        assert!(f32_rows_first(0.1, 4095));
        assert!(f32_rows_first(0.0, 0));
        // f16 and bf16 stay longest first (copter2, n = 128: 0.91x-0.92x in row order).
        assert!(rows_longest_first(&stats(0.33), 55_476, DType::F16));
        assert!(rows_longest_first(&stats(0.33), 55_476, DType::Bf16));
    }

    #[test]
    fn the_two_and_eight_row_tiles_go_sm_affine_on_varied_or_long_rows_of_few_row_blocks() {
        let two_rows: SpmmConfig = "spmm_f32_s1d4_y2k16x128w16_u4_nopred_lb16".parse().unwrap();
        let stats = |mean: f64, cv: f64| crate::csr::RowStats { mean, cv, ..Default::default() };
        let order = |config: &SpmmConfig, m: usize, n: usize, mean: f64, cv: f64| {
            block_order(config, &stats(mean, cv), m, n, 16, 132)
        };
        // Weight-like rows (cv 0.9 and 1.4 at 10%): 1536 x 1536, n = 1024, 1.57x; 512 x 768, n = 2048, 1.51x.
        assert_eq!(order(&two_rows, 1536, 1024, 154.0, 0.89), BlockOrder::SmAffine);
        assert_eq!(order(&two_rows, 512, 2048, 77.0, 1.43), BlockOrder::SmAffine);
        // Long even rows (uniform k = 3072 at 10%, 307 per row): 1.09x-1.22x.
        assert_eq!(order(&two_rows, 1024, 2048, 307.0, 0.05), BlockOrder::SmAffine);
        // Not even rows of medium length (uniform 1536 x 768, n = 2048: 0.87x), short rows (pruned 1536 x 384
        // at 98%, 7.7 per row: 0.70x-0.83x; at 90%, 38 per row: 0.95x), n = 512 or 4096, nor other tiles.
        assert_ne!(order(&two_rows, 1536, 2048, 77.0, 0.11), BlockOrder::SmAffine);
        assert_ne!(order(&two_rows, 1536, 1024, 7.7, 1.31), BlockOrder::SmAffine);
        assert_ne!(order(&two_rows, 1536, 2048, 38.4, 0.67), BlockOrder::SmAffine);
        assert_ne!(order(&two_rows, 1024, 512, 154.0, 0.89), BlockOrder::SmAffine);
        assert_ne!(order(&two_rows, 1024, 4096, 154.0, 0.89), BlockOrder::SmAffine);
        assert_ne!(order(&two_rows, 2048, 1024, 154.0, 0.89), BlockOrder::SmAffine, "past the measured rows");
        assert_ne!(order(&two_rows, 384, 1024, 154.0, 0.89), BlockOrder::SmAffine, "past the measured rows");
        let one_warp: SpmmConfig = "spmm_f32_s1d4_y1k32x128w32_u4_nopred".parse().unwrap();
        assert_ne!(order(&one_warp, 1024, 1024, 154.0, 0.89), BlockOrder::SmAffine);
        let unbounded: SpmmConfig = "spmm_f32_s1d4_y2k16x128w16_u4_nopred".parse().unwrap();
        assert_ne!(order(&unbounded, 1024, 1024, 154.0, 0.89), BlockOrder::SmAffine);
        // The eight-row tile on 768-1024 uneven rows of 150 or more entries at n = 1024 (768 x 3072 at 10%, cv
        // 1.4: 1.23x), not at other n, nor outside the measured rows, means and cvs.
        let eight_rows: SpmmConfig = "spmm_f32_s1d2_y8k32x64w32_u4_nopred_lb2".parse().unwrap();
        let eight = |m: usize, n: usize, mean: f64, cv: f64| block_order(&eight_rows, &stats(mean, cv), m, n, 2, 132);
        assert_eq!(eight(768, 1024, 307.0, 1.41), BlockOrder::SmAffine);
        assert_eq!(eight(1024, 1024, 150.0, 0.85), BlockOrder::SmAffine);
        assert_ne!(eight(1024, 1536, 307.0, 1.22), BlockOrder::SmAffine);
        assert_ne!(eight(1024, 960, 307.0, 1.22), BlockOrder::SmAffine);
        assert_ne!(eight(767, 1024, 307.0, 1.41), BlockOrder::SmAffine);
        assert_ne!(eight(1025, 1024, 307.0, 1.41), BlockOrder::SmAffine);
        assert_ne!(eight(768, 1024, 149.0, 1.41), BlockOrder::SmAffine);
        assert_ne!(eight(768, 1024, 307.0, 0.84), BlockOrder::SmAffine);
        // The four-row tile on 640-4096 rows of 140 or more entries, cv >= 0.5, at n = 1024-2048 (2048 x 4096 at
        // 5%, cv 1.9, n = 1024: 1.26x), not at n = 512 or 3072, nor outside the measured rows, means and cvs.
        let four_rows: SpmmConfig = "spmm_f32_s2d4_y4k16x64w8_u4_nopred_lb8".parse().unwrap();
        let four = |m: usize, n: usize, mean: f64, cv: f64| block_order(&four_rows, &stats(mean, cv), m, n, 8, 132);
        assert_eq!(four(2048, 1024, 205.0, 1.94), BlockOrder::SmAffine);
        assert_eq!(four(640, 2048, 140.0, 0.5), BlockOrder::SmAffine);
        assert_eq!(four(4096, 1536, 410.0, 1.2), BlockOrder::SmAffine);
        assert_ne!(four(2048, 512, 205.0, 1.94), BlockOrder::SmAffine);
        assert_ne!(four(2048, 3072, 205.0, 1.94), BlockOrder::SmAffine);
        assert_ne!(four(639, 1024, 205.0, 1.94), BlockOrder::SmAffine);
        assert_ne!(four(4097, 1024, 205.0, 1.94), BlockOrder::SmAffine);
        assert_ne!(four(2048, 1024, 139.0, 1.94), BlockOrder::SmAffine);
        assert_ne!(four(2048, 1024, 205.0, 0.49), BlockOrder::SmAffine);
        // The thirty-two-row tile: column tiles first, but row blocks first for even rows (cv < 0.1), whatever
        // column_tiles_first would say (384 rows x 16 tiles at one block per SM: row blocks first for it).
        let thirty_two_rows: SpmmConfig = "spmm_f32_s1d4_y32k16x64w16_u4_nopred".parse().unwrap();
        let thirty_two = |m: usize, n: usize, cv: f64| block_order(&thirty_two_rows, &stats(154.0, cv), m, n, 1, 132);
        assert_eq!(thirty_two(384, 1024, 0.21), BlockOrder::ColumnTilesFirst);
        assert!(!column_tiles_first(12, 16, 1, 132, 0.21));
        assert_eq!(thirty_two(1024, 3072, 0.1), BlockOrder::ColumnTilesFirst);
        assert_eq!(thirty_two(512, 3072, 0.09), BlockOrder::RowBlocksFirst);
        assert_eq!(thirty_two(256, 2048, 0.0), BlockOrder::RowBlocksFirst);
        // Elsewhere column_tiles_first decides: 384 one-warp rows x 4 tiles (one wave) go column tiles first.
        assert_eq!(block_order(&one_warp, &stats(100.0, 0.1), 384, 512, 12, 132), BlockOrder::ColumnTilesFirst);
        assert_eq!(block_order(&one_warp, &stats(100.0, 0.1), 768, 1024, 12, 132), BlockOrder::RowBlocksFirst);
    }

    #[test]
    fn every_table_row_is_valid_and_its_name_round_trips() {
        assert!(!spmm_table().is_empty());
        for c in spmm_table() {
            c.validate().unwrap_or_else(|e| panic!("{c}: {e}"));
            let parsed: SpmmConfig = c.kernel_name().parse().unwrap();
            assert_eq!(parsed.kernel_name(), c.kernel_name());
        }
    }

    #[test]
    fn table_names_are_unique() {
        let mut names: Vec<String> = spmm_table().iter().map(|c| c.kernel_name()).collect();
        names.sort();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len());
    }

    /// `is_compiled` (a set, made once) says what a walk of the compiled table by `same_kernel` says: for every
    /// compiled config and for each of them changed in one field, compiled or not.
    #[test]
    fn the_compiled_set_is_the_table() {
        let walk = |c: &SpmmConfig| compiled_spmm_variants().iter().any(|t| t.same_kernel(c));
        let mut compiled = 0;
        for c in compiled_spmm_variants() {
            assert!(is_compiled(c), "{c}");
            let changed = [
                SpmmConfig { min_occupancy: c.min_occupancy + 1, ..*c },
                SpmmConfig { launch_bounds: !c.launch_bounds, min_occupancy: c.min_occupancy.max(1), ..*c },
                SpmmConfig { block_items_x: c.block_items_x * 2, ..*c },
                SpmmConfig { predicate_loads: !c.predicate_loads, ..*c },
                SpmmConfig { column_tiles: c.column_tiles + 1, ..*c },
                SpmmConfig { dtype: DType::F64, ..*c },
            ];
            for d in &changed {
                assert_eq!(is_compiled(d), walk(d), "{d}");
                compiled += usize::from(walk(d));
            }
            // Without launch bounds min_occupancy names no kernel; with them it does.
            assert_eq!(is_compiled(&changed[0]), !c.launch_bounds, "{c}");
        }
        // Some changes land on other compiled kernels and most on none: both sides of the set are walked.
        assert!(compiled_spmm_variants().is_empty() || compiled > 0);
    }

    #[test]
    fn every_automatic_choice_can_run_its_product() {
        // Each rule's bounds are unit-tested at their edges (src/spmm/select.rs); this walks random shapes and
        // statistics across all of them at once and checks that whatever is picked can run the product. m and k
        // go to 2^18, n to 4200 in every residue the rules look at; rows go from none to dense, even to skewed,
        // sharing columns or not, with tensor-core block counts or without, on a device with the warpgroup mma
        // and one without. A tile must be valid, in the variant table, of the element type, with a dense vector
        // width that divides n and predicates where n cuts its column tiles (what `check_config` refuses with an
        // error at launch); a tensor-core kernel must be compiled for the type and run on the device.
        use crate::csr::RowStats;
        use crate::kernels::KERNELS_BUILT;
        let mut rng = crate::gen::Rng::new(0x5e1e_c7ed);
        let mut chosen = std::collections::BTreeSet::new();
        let mut draws = 0;
        while draws < 30_000 {
            let m = rng.log_uniform(1, 1 << 18);
            let k = rng.log_uniform(1, 1 << 18);
            let n = match rng.below(4) {
                0 => 1 + rng.below(64),
                1 => 4 * rng.log_uniform(1, 1050),
                2 => 32 * (1 + rng.below(130)),
                _ => rng.log_uniform(1, 4200),
            };
            if k * n > i32::MAX as usize || m * n > i32::MAX as usize {
                continue;
            }
            draws += 1;
            let longest = k.min(20_000);
            let nnz = if rng.below(20) == 0 {
                0
            } else {
                let mean = rng.range(0.05f64.ln(), (longest as f64).ln()).exp();
                ((mean * m as f64).round() as usize).max(1)
            };
            let mean = nnz as f64 / m as f64;
            let cv = match rng.below(4) {
                0 => 0.0,
                1 => rng.range(0.0, 0.3),
                2 => rng.range(0.0, 2.0),
                _ => rng.range(0.0, 6.0),
            };
            let max = if nnz == 0 {
                0
            } else {
                ((mean * (1.0 + cv * rng.range(0.0, 30.0))).ceil() as usize).clamp(mean.ceil() as usize, longest.max(1))
            };
            let min = if nnz == 0 { 0 } else { rng.below(mean.floor() as usize + 1) };
            let empty_rows = if min == 0 { rng.below(m - (nnz > 0) as usize + 1) } else { 0 };
            let columns_per_entry = (rng.below(3) != 0).then(|| rng.range((1.0f64 / 4096.0).ln(), 0.0).exp());
            let stats = RowStats { min, max, mean, cv, empty_rows, columns_per_entry };
            let counts = (rng.below(3) != 0).then(|| {
                let narrow = if nnz == 0 { 0 } else { (nnz as f64 / rng.range(1.0, 256.0)).ceil() as usize };
                tensor_core::BlockCounts { narrow, wide: narrow.div_ceil(1 + rng.below(4)), mid: 0 }
            });
            for dtype in [DType::F32, DType::F16, DType::Bf16] {
                for wgmma in [true, false] {
                    let kernel = SpmmKernel::select_with(wgmma, m, k, n, nnz, &stats, dtype, counts);
                    let what =
                        format!("{kernel} for {m} x {k} x {n}, {nnz} entries, {stats:?}, {counts:?}, wgmma {wgmma}");
                    match kernel {
                        SpmmKernel::Tiled(c) => {
                            c.validate().unwrap_or_else(|e| panic!("{what}: invalid: {e}"));
                            assert!(spmm_table().iter().any(|t| t.same_kernel(&c)), "{what}: not in variants.txt");
                            assert_eq!(c.dtype, dtype, "{what}");
                            assert_eq!(n % c.dense_vector_width as usize, 0, "{what}: the vector does not divide n");
                            assert!(c.predicate_loads || n % c.block_items_x as usize == 0, "{what}: n cuts a tile");
                            if KERNELS_BUILT {
                                check_config(&c, dtype, m, k, n).unwrap_or_else(|e| panic!("{what}: {e}"));
                            }
                        }
                        SpmmKernel::TensorCore(c) => {
                            assert!(TensorCoreConfig::all(dtype).contains(&c), "{what}: not compiled");
                            assert!(wgmma || !c.is_wgmma(), "{what}: the device has no warpgroup mma");
                            if KERNELS_BUILT {
                                tensor_core::check_tensor_core(&c, dtype, m, n)
                                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                            }
                        }
                    }
                    chosen.insert(kernel.to_string());
                }
            }
        }
        // The walk reaches most rules: the tiles and tensor-core kernels it chose, of every type.
        assert!(chosen.len() >= 70, "only {} kernels chosen: {chosen:?}", chosen.len());
    }
}
