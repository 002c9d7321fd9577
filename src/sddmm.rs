//! SDDMM, the sampled dense-dense product: C = alpha (A B^T) o spy(C) + beta C, with A (m x k) and B (n x k)
//! dense row-major and C (m x n) a CSR matrix whose stored entries say where the product is wanted: each entry
//! (i, j) of C becomes the dot product of row i of A with row j of B. It is the weight gradient of a sparse
//! layer, dW = (dY X^T) o spy(W) with dY m x n and X k x n both row-major (the products' own C and B), beside the
//! forward product Y = W X ([`crate::spmm_auto`]) and the input gradient dX = W^T dY ([`DeviceCsr::transposed`]).
//! cuSPARSE's `cusparseSDDMM` computes the same ([`crate::baseline::cusparse::CusparseSddmm`]).
//!
//! C's values are written in place on the device, as [`DeviceCsr::update_values`] writes them: the tensor-core
//! blocks C has built and its kept transpose follow, and its structure, statistics and plans stay. For a structure
//! used many times (a weight in training), [`SddmmPlan`] prepares the product once: on large f32 structures whose
//! rows share columns at k = 256-1024 it runs a tiled kernel that reads each row of B once per tile of C's rows.
//!
//! ```no_run
//! use tilesparse::{gen, Gpu, DeviceCsr, DeviceDense};
//! let gpu = Gpu::new(0)?;
//! let w = gen::uniform_random(512, 1024, 0.1, 7);
//! let dy = DeviceDense::upload(&gpu, 512, 64, &gen::dense_matrix(512, 64, 8))?;
//! let x = DeviceDense::upload(&gpu, 1024, 64, &gen::dense_matrix(1024, 64, 9))?;
//! // dW: W's structure, its values overwritten with (dY X^T) at W's entries.
//! let mut dw = DeviceCsr::upload(&gpu, w.view())?;
//! tilesparse::sddmm_auto(&gpu, &dy, &x, &mut dw)?;
//! # Ok::<(), tilesparse::Error>(())
//! ```

use cudarc::driver::{DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg};

use crate::csr::DeviceCsr;
use crate::dense::DeviceDense;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::kernels::{Family, KERNELS_BUILT};
use crate::scalar::{DType, Scalar};

/// The arguments of every SDDMM kernel, mirrored field for field by `SddmmParams` in cuda/common/params.cuh.
#[repr(C)]
#[derive(Clone, Copy)]
struct SddmmParams {
    m: i32,
    n: i32,
    k: i32,
    nnz: i32,
    row_offsets: u64,
    column_indices: u64,
    lhs: u64,
    rhs: u64,
    values: u64,
    alpha: f32,
    beta: f32,
}
const _: () = assert!(std::mem::size_of::<SddmmParams>() == 64, "SddmmParams must match cuda/common/params.cuh");
// SAFETY: plain old data with the C layout the kernel expects.
unsafe impl cudarc::driver::DeviceRepr for SddmmParams {}

/// Entries each group of lanes takes in turn (`TILESPARSE_SDDMM_ENTRIES` in cuda/sddmm/sddmm.cu).
const ENTRIES_PER_GROUP: usize = 4;
/// Warps that fill an H100 or H200 once at 8 per SM (132 SMs): below it [`SddmmConfig::select`] spreads entries
/// over more lanes.
const FILL_WARPS: usize = 132 * 8;
/// Threads per block (`kSddmmThreads`).
const THREADS: usize = 256;

/// One compiled SDDMM kernel (cuda/sddmm/sddmm.cu, `sddmm_kernel<T, kVector, kLanes, kEntries, kRuns>`): a warp
/// takes `runs_per_warp` runs of consecutive entries of C in turn, `lanes_per_entry` lanes per entry, each lane
/// loading `vector_width` elements of A's and B's rows at a time and striding over k; the lanes of an entry then add
/// their partial sums. Every valid config is compiled ([`SddmmConfig::compiled`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SddmmConfig {
    /// The storage type of A, B and C (f32, f16 or bf16; the sums are f32 for all three).
    pub dtype: DType,
    /// Elements per load of a row of A or B: 1, 2 or 4 for f32, also 8 for f16 and bf16 (16 bytes at most). It
    /// must divide k.
    pub vector_width: usize,
    /// Lanes that share one entry's dot product: 1, 2, 4, 8, 16 or 32.
    pub lanes_per_entry: usize,
    /// Runs of 4 x 32 / `lanes_per_entry` consecutive entries each warp takes in turn: 1 or 4 (the rows of a later
    /// run are found from the last one's, so the row pointer's binary search is paid once per warp).
    pub runs_per_warp: usize,
}

impl SddmmConfig {
    /// The lanes per entry every type is compiled with.
    pub const LANES: [usize; 6] = [1, 2, 4, 8, 16, 32];
    /// The runs per warp every type is compiled with.
    pub const RUNS: [usize; 2] = [1, 4];

    /// The kernel's name, e.g. `sddmm_f32_v4_l8_r4`: the only place one is built.
    pub fn kernel_name(&self) -> String {
        format!("sddmm_{}_v{}_l{}_r{}", self.dtype.name(), self.vector_width, self.lanes_per_entry, self.runs_per_warp)
    }

    /// The kernel template's rules (cuda/sddmm/sddmm.cu's `static_assert`s and the types compiled), with their
    /// messages: [`Error::UnsupportedDtype`] for f64, else [`Error::InvalidConfig`].
    pub fn validate(&self) -> Result<()> {
        if self.dtype == DType::F64 {
            return Err(Error::UnsupportedDtype { dtype: self.dtype, op: "SDDMM" });
        }
        let rule = |rule: &str| Err(Error::InvalidConfig { config: self.kernel_name(), rule: rule.to_string() });
        if !Self::LANES.contains(&self.lanes_per_entry) {
            return rule("kLanes must be a power of two <= 32");
        }
        if !Self::RUNS.contains(&self.runs_per_warp) {
            return rule("runs per warp must be 1 or 4 (the compiled TILESPARSE_SDDMM_RUNS)");
        }
        let bytes = self.vector_width * self.dtype.size();
        if !self.vector_width.is_power_of_two() || bytes > 16 {
            return rule("a vector access moves at most 16 bytes (vector_width a power of two)");
        }
        Ok(())
    }

    /// Every config compiled into this build, for each type: the vector widths up to 16 bytes times
    /// [`SddmmConfig::LANES`] times [`SddmmConfig::RUNS`] (empty without kernels).
    pub fn compiled() -> Vec<SddmmConfig> {
        if !KERNELS_BUILT {
            return Vec::new();
        }
        [DType::F32, DType::F16, DType::Bf16]
            .into_iter()
            .flat_map(|dtype| {
                let widths = (0..).map(|p| 1usize << p).take_while(move |w| w * dtype.size() <= 16);
                widths.flat_map(move |vector_width| {
                    Self::LANES.into_iter().flat_map(move |lanes_per_entry| {
                        Self::RUNS.into_iter().map(move |runs_per_warp| SddmmConfig {
                            dtype,
                            vector_width,
                            lanes_per_entry,
                            runs_per_warp,
                        })
                    })
                })
            })
            .collect()
    }

    /// The compiled configs for one type.
    pub fn compiled_for(dtype: DType) -> Vec<SddmmConfig> {
        Self::compiled().into_iter().filter(|c| c.dtype == dtype).collect()
    }

    /// The config [`sddmm_auto`] runs for an inner dimension k and `nnz` entries of C: a pure function, fitted to the
    /// library's sweep of every config over the SDDMM suite in f32, f16 and bf16 (NOTES.md, SDDMM step 3: it keeps
    /// 96% of the fastest config's speed on geometric mean, at worst 83%).
    /// - The widest vector (up to 16 bytes) that divides k.
    /// - Lanes per entry: half the vectors of a row of k, at most 8 for f32 and 4 for f16/bf16 (the 16-bit types
    ///   do twice the products per vector), then doubled while a lane would walk more than 16 steps of k, and while
    ///   the launch would have fewer than 1056 warps, 8 per SM of 132 (matrices of a few thousand entries at the
    ///   launch floor run fastest on 16-32 lanes).
    /// - Four runs per warp from 2^20 entries, where the runs' shared row search pays (uniform 4096^2 at 80-90%:
    ///   1.05x-1.2x); one below, where the lost parallelism costs more (up to 2x on the pruned weights).
    pub fn select(k: usize, nnz: usize, dtype: DType) -> SddmmConfig {
        let max_width = (16 / dtype.size()).max(1);
        let mut vector_width = max_width;
        while vector_width > 1 && k % vector_width != 0 {
            vector_width /= 2;
        }
        let vectors = k.div_ceil(vector_width).max(1);
        let cap = if dtype.size() >= 4 { 8 } else { 4 };
        let mut lanes = 1;
        while lanes * 2 <= cap.min((vectors / 2).max(1)) {
            lanes *= 2;
        }
        while vectors > 16 * lanes && lanes < 32 {
            lanes *= 2;
        }
        while nnz < FILL_WARPS * (32 / lanes * ENTRIES_PER_GROUP) && lanes < 32 {
            lanes *= 2;
        }
        let runs_per_warp = if nnz >= 1 << 20 { 4 } else { 1 };
        SddmmConfig { dtype, vector_width, lanes_per_entry: lanes, runs_per_warp }
    }
}

/// C = (A B^T) o spy(C) with the given config: A (m x k) and B (n x k) row-major, C (m x n) CSR, each stored entry
/// of C overwritten with its dot product. See [`sddmm_with`] for the errors.
pub fn sddmm<T: Scalar>(
    gpu: &Gpu,
    a: &DeviceDense<T>,
    b: &DeviceDense<T>,
    c: &mut DeviceCsr<T>,
    config: &SddmmConfig,
) -> Result<()> {
    sddmm_with(gpu, a, b, c, config, 1.0, 0.0)
}

/// C = (A B^T) o spy(C) with [`SddmmConfig::select`]'s config for A's k, C's entries and T; returns the config.
pub fn sddmm_auto<T: Scalar>(
    gpu: &Gpu,
    a: &DeviceDense<T>,
    b: &DeviceDense<T>,
    c: &mut DeviceCsr<T>,
) -> Result<SddmmConfig> {
    sddmm_auto_with(gpu, a, b, c, 1.0, 0.0)
}

/// [`sddmm_with`] with [`SddmmConfig::select`]'s config; returns the config.
pub fn sddmm_auto_with<T: Scalar>(
    gpu: &Gpu,
    a: &DeviceDense<T>,
    b: &DeviceDense<T>,
    c: &mut DeviceCsr<T>,
    alpha: f32,
    beta: f32,
) -> Result<SddmmConfig> {
    if T::DTYPE == DType::F64 {
        return Err(Error::UnsupportedDtype { dtype: T::DTYPE, op: "SDDMM" });
    }
    let config = SddmmConfig::select(a.cols(), c.nnz(), T::DTYPE);
    sddmm_with(gpu, a, b, c, &config, alpha, beta)?;
    Ok(config)
}

/// C = alpha (A B^T) o spy(C) + beta C with the given config, the sums in f32 and each entry rounded once to T
/// (C's old values are not read where beta is 0, so they may hold anything). Queued on [`Gpu::stream`] with no
/// synchronisation. Everything is checked before anything is written:
/// - [`Error::WrongGpu`] for an operand of another handle;
/// - [`Error::UnsupportedDtype`] for f64, [`Error::InvalidConfig`] for a config that breaks a rule or is for
///   another type;
/// - [`Error::ShapeMismatch`] unless A is m x k, B n x k and C m x n;
/// - [`Error::Unsupported`] where the vector width does not divide k (naming the config [`SddmmConfig::select`]
///   would run), and [`Error::TooLarge`] for an m, nnz or k the kernels' 32-bit indices cannot step over;
/// - [`Error::KernelsNotBuilt`] in a build without kernels.
///
/// C's tensor-core blocks and kept transpose take the new values ([`DeviceCsr::update_values`]), and
/// [`DeviceCsr::holds_non_finite`] becomes None.
pub fn sddmm_with<T: Scalar>(
    gpu: &Gpu,
    a: &DeviceDense<T>,
    b: &DeviceDense<T>,
    c: &mut DeviceCsr<T>,
    config: &SddmmConfig,
    alpha: f32,
    beta: f32,
) -> Result<()> {
    let k = check_operands(gpu, a, b, c)?;
    config.validate()?;
    if config.dtype != T::DTYPE {
        return Err(Error::InvalidConfig {
            config: config.kernel_name(),
            rule: format!("config is for {} but the operands are {}", config.dtype, T::DTYPE),
        });
    }
    if k % config.vector_width != 0 {
        return Err(Error::Unsupported {
            config: config.kernel_name(),
            reason: format!(
                "its vector width {} does not divide k = {k} (a vector would straddle two rows); {} runs it \
                 (sddmm_auto chooses it)",
                config.vector_width,
                SddmmConfig::select(k, c.nnz(), T::DTYPE).kernel_name()
            ),
        });
    }
    let function = gpu.function(Family::Sddmm, &config.kernel_name())?;
    let nnz = c.nnz();
    if nnz == 0 {
        return Ok(());
    }
    let warp_entries = 32 / config.lanes_per_entry * ENTRIES_PER_GROUP * config.runs_per_warp;
    let blocks = nnz.div_ceil(warp_entries).div_ceil(THREADS / 32);
    let launch =
        LaunchConfig { grid_dim: (blocks as u32, 1, 1), block_dim: (THREADS as u32, 1, 1), shared_mem_bytes: 0 };
    let stream = gpu.stream().clone();
    let (m, n) = (c.rows(), c.cols());
    c.update_values_with_structure(gpu, |row_offsets, column_indices, values| {
        let (ro, _g1) = row_offsets.device_ptr(&stream);
        let (ci, _g2) = column_indices.device_ptr(&stream);
        let (lhs, _g3) = a.data.device_ptr(&stream);
        let (rhs, _g4) = b.data.device_ptr(&stream);
        let (out, _g5) = values.device_ptr_mut(&stream);
        let params = SddmmParams {
            m: m as i32,
            n: n as i32,
            k: k as i32,
            nnz: nnz as i32,
            row_offsets: ro,
            column_indices: ci,
            lhs,
            rhs,
            values: out,
            alpha,
            beta,
        };
        // SAFETY: C's structure was validated when it was made (a row pointer of m + 1 nondecreasing offsets ending
        // at nnz, column indices below n), A holds m x k and B n x k elements (checked above), the kernel reads
        // rows of A and B at those indices and writes C's nnz values (the view's length), each by one lane; k is
        // a multiple of the vector width and cudarc's allocations are aligned to 256 bytes, so every vector load
        // is aligned; m, n and nnz fit i32 (a DeviceCsr's), and so does k (checked above).
        unsafe { stream.launch_builder(&function).arg(&params).launch(launch) }
            .map_err(Error::driver("launching the SDDMM kernel", 0))?;
        Ok::<(), Error>(())
    })
}

/// Rows and columns of C per tile of the tensor-core kernels (`kSddmmTcTile` in cuda/sddmm/tc.cuh), and their
/// threads per block (`kSddmmTcThreads`).
pub const SDDMM_TC_TILE: usize = 64;
const TC_THREADS: usize = 128;
const TC_TILE_ELEMENTS: f64 = (SDDMM_TC_TILE * SDDMM_TC_TILE) as f64;
/// [`SddmmPlan::tensor_cores_pay`]'s least tile count and least average fill.
const TC_MIN_TILES: usize = 64;
const TC_MIN_FILL: f64 = 0.08;

/// Whether the tensor-core kernel can run C here: [`Error::Unsupported`] below compute capability 8.0, or for a C of
/// 2^31 - 64 rows or columns or more (its tiles would step past i32).
fn tensor_cores_run<T: Scalar>(gpu: &Gpu, c: &DeviceCsr<T>) -> Result<()> {
    let name = sddmm_tc_kernel_name(T::DTYPE);
    if gpu.info().compute_capability.0 < 8 {
        return Err(Error::Unsupported {
            config: name,
            reason: "the tensor-core SDDMM needs compute capability 8.0 or later; sddmm() runs anywhere".into(),
        });
    }
    if c.rows().max(c.cols()) > i32::MAX as usize - SDDMM_TC_TILE {
        return Err(Error::Unsupported {
            config: name,
            reason: format!("C is {} x {}: the tensor-core kernel's tiles step past i32", c.rows(), c.cols()),
        });
    }
    Ok(())
}

/// The arguments of the tensor-core SDDMM kernels, mirrored field for field by `SddmmTcParams` in
/// cuda/common/params.cuh.
#[repr(C)]
#[derive(Clone, Copy)]
struct SddmmTcParams {
    m: i32,
    n: i32,
    k: i32,
    nnz: i32,
    num_tiles: i32,
    pad: i32,
    row_offsets: u64,
    column_indices: u64,
    tiles: u64,
    starts: u64,
    lhs: u64,
    rhs: u64,
    values: u64,
    alpha: f32,
    beta: f32,
}
const _: () = assert!(std::mem::size_of::<SddmmTcParams>() == 88, "SddmmTcParams must match cuda/common/params.cuh");
// SAFETY: plain old data with the C layout the kernel expects.
unsafe impl cudarc::driver::DeviceRepr for SddmmTcParams {}

/// A tensor-core plan on the host: each tile's (row tile, column tile, the most entries one of its rows has in it), and
/// per tile its 64 rows' first entries at or past its first column (0 for rows past m, which the kernel reads as
/// empty).
struct HostTcPlan {
    tiles: Vec<i32>,
    starts: Vec<i32>,
}

/// Builds a tensor-core plan from C's structure: the tiles that hold an entry, by row tile then column tile.
fn host_tc_plan(row_offsets: &[i32], column_indices: &[i32]) -> HostTcPlan {
    use rayon::prelude::*;
    let m = row_offsets.len().saturating_sub(1);
    let per_row_tile: Vec<(Vec<i32>, Vec<i32>)> = (0..m.div_ceil(SDDMM_TC_TILE))
        .into_par_iter()
        .map(|t| {
            let (r0, r1) = (t * SDDMM_TC_TILE, ((t + 1) * SDDMM_TC_TILE).min(m));
            let columns: Vec<i32> =
                tile_columns(row_offsets, column_indices, t).into_iter().map(|c| c as i32).collect();
            let mut starts = vec![0i32; columns.len() * SDDMM_TC_TILE];
            let mut widest = vec![0i32; columns.len()];
            for r in r0..r1 {
                // A merge of the row's columns with the tiles' first columns.
                let (mut e, end) = (row_offsets[r], row_offsets[r + 1]);
                for (i, &tile) in columns.iter().enumerate() {
                    while e < end && column_indices[e as usize] < tile * SDDMM_TC_TILE as i32 {
                        e += 1;
                    }
                    starts[i * SDDMM_TC_TILE + (r - r0)] = e;
                }
                // The row's entries in each tile: up to the next tile's first, or the row's end.
                for i in 0..columns.len() {
                    let next = starts.get((i + 1) * SDDMM_TC_TILE + (r - r0)).copied().unwrap_or(end);
                    widest[i] = widest[i].max(next - starts[i * SDDMM_TC_TILE + (r - r0)]);
                }
            }
            let tiles = columns.iter().zip(&widest).flat_map(|(&c, &w)| [t as i32, c, w]).collect();
            (tiles, starts)
        })
        .collect();
    let mut plan = HostTcPlan { tiles: Vec::new(), starts: Vec::new() };
    for (tiles, starts) in per_row_tile {
        plan.tiles.extend(tiles);
        plan.starts.extend(starts);
    }
    plan
}

/// The tensor-core kernel for `dtype`, e.g. `sddmm_tc_f16`.
pub fn sddmm_tc_kernel_name(dtype: DType) -> String {
    format!("sddmm_tc_{}", dtype.name())
}

/// The 64 x 64 tiles of C ([`SDDMM_TC_TILE`]) that hold at least one entry, from C's row pointer and column indices:
/// the tiles the tensor-core kernel computes.
pub fn sddmm_tc_tiles<I: Copy + Send + Sync>(row_offsets: &[I], column_indices: &[I]) -> usize
where
    usize: TryFrom<I>,
{
    use rayon::prelude::*;
    let m = row_offsets.len().saturating_sub(1);
    (0..m.div_ceil(SDDMM_TC_TILE)).into_par_iter().map(|t| tile_columns(row_offsets, column_indices, t).len()).sum()
}

/// The column tiles (64 columns each) that row tile `t` (its 64 rows) holds entries in, ascending.
fn tile_columns<I: Copy>(row_offsets: &[I], column_indices: &[I], t: usize) -> Vec<usize>
where
    usize: TryFrom<I>,
{
    let at = |v: I| usize::try_from(v).unwrap_or(0);
    let m = row_offsets.len().saturating_sub(1);
    let (r0, r1) = (t * SDDMM_TC_TILE, ((t + 1) * SDDMM_TC_TILE).min(m));
    let mut tiles: Vec<usize> =
        column_indices[at(row_offsets[r0])..at(row_offsets[r1])].iter().map(|&c| at(c) / SDDMM_TC_TILE).collect();
    tiles.sort_unstable();
    tiles.dedup();
    tiles
}

/// The arguments of the tiled SDDMM kernels, mirrored field for field by `SddmmTiledParams` in
/// cuda/common/params.cuh.
#[repr(C)]
#[derive(Clone, Copy)]
struct SddmmTiledParams {
    m: i32,
    n: i32,
    k: i32,
    nnz: i32,
    tile_rows: i32,
    a_stride: i32,
    num_units: i32,
    pad: i32,
    units: u64,
    segment_columns: u64,
    segment_starts: u64,
    entry_rows: u64,
    entry_index: u64,
    lhs: u64,
    rhs: u64,
    values: u64,
    alpha: f32,
    beta: f32,
}
const _: () =
    assert!(std::mem::size_of::<SddmmTiledParams>() == 104, "SddmmTiledParams must match cuda/common/params.cuh");
// SAFETY: plain old data with the C layout the kernel expects.
unsafe impl cudarc::driver::DeviceRepr for SddmmTiledParams {}

/// Vectors of a row of B each lane of a tiled kernel holds (`kSddmmMaxVectors` in cuda/sddmm/tiled.cuh).
const TILED_MAX_VECTORS: usize = 8;
/// The shared memory a tile of A may take: two blocks per SM on an H100 or H200.
const TILED_SHARED_BYTES: usize = 96 * 1024;
/// The lanes per entry the tiled kernels are compiled with.
const TILED_LANES: [usize; 4] = [4, 8, 16, 32];

/// A prepared SDDMM for one C's structure and one k ([`sddmm_planned`]), like [`crate::SpmvPlan`]: it runs the tiled
/// kernel where that was measured faster than [`sddmm_auto`]'s gather kernel, else that kernel. The tiled kernel
/// takes C's rows in tiles, each tile's entries ordered by column, so that one load of a row of B serves every entry
/// of that column in the tile (9-19 of them in uniform 4096^2 at 80-90% with tiles of 94 rows at k = 256), and the
/// tile's rows of A sit in shared memory. Its arrays are built once on the host from one download of C's structure
/// (C's values may change: a weight being trained keeps its plan).
pub struct SddmmPlan {
    matrix: u64,
    dtype: DType,
    k: usize,
    kernel: PlanKernel,
}

/// What a plan runs: the gather kernel with [`SddmmConfig::select`]'s config (nothing built), the tiled kernel, or
/// the tensor-core kernel.
enum PlanKernel {
    Gather(SddmmConfig),
    Tiled(Box<Tiles>),
    TensorCores(Box<TcTiles>),
}

/// A tensor-core plan's arrays on the device ([`HostTcPlan`]'s).
struct TcTiles {
    num_tiles: usize,
    tiles: cudarc::driver::CudaSlice<i32>,
    starts: cudarc::driver::CudaSlice<i32>,
}

/// A tiled plan's kernel and arrays on the device ([`HostPlan`]'s).
struct Tiles {
    lanes: usize,
    rows: usize,
    num_units: usize,
    units: cudarc::driver::CudaSlice<i32>,
    segment_columns: cudarc::driver::CudaSlice<i32>,
    segment_starts: cudarc::driver::CudaSlice<i32>,
    entry_rows: cudarc::driver::CudaSlice<i32>,
    entry_index: cudarc::driver::CudaSlice<i32>,
}

/// Elements of T in the tiled kernels' 16-byte vectors.
fn tiled_vector(dtype: DType) -> usize {
    16 / dtype.size()
}

/// The host side of a plan: per segment its column and first entry, per entry (in the plan's order) its row in the
/// tile and its index in C, per unit (tile, first segment, end segment).
struct HostPlan {
    units: Vec<i32>,
    segment_columns: Vec<i32>,
    segment_starts: Vec<i32>,
    entry_rows: Vec<i32>,
    entry_index: Vec<i32>,
}

/// Builds the plan's arrays from C's structure: tiles of `tile_rows` rows, each tile's entries by (column, row), each
/// tile's segments cut into units of about `unit_entries` entries (whole segments).
fn host_plan(row_offsets: &[i32], column_indices: &[i32], tile_rows: usize, unit_entries: usize) -> HostPlan {
    use rayon::prelude::*;
    let m = row_offsets.len().saturating_sub(1);
    let tiles = m.div_ceil(tile_rows.max(1));
    // Per tile: (segment columns, segment lengths, entry rows, entry indices).
    type Tile = (Vec<i32>, Vec<i32>, Vec<i32>, Vec<i32>);
    let per_tile: Vec<Tile> = (0..tiles)
        .into_par_iter()
        .map(|t| {
            let (r0, r1) = (t * tile_rows, ((t + 1) * tile_rows).min(m));
            let mut keyed: Vec<(i32, i32, i32)> = Vec::new();
            for r in r0..r1 {
                for e in row_offsets[r]..row_offsets[r + 1] {
                    keyed.push((column_indices[e as usize], (r - r0) as i32, e));
                }
            }
            keyed.sort_unstable();
            let (mut columns, mut lengths) = (Vec::new(), Vec::new());
            for &(c, _, _) in &keyed {
                if columns.last() == Some(&c) {
                    *lengths.last_mut().unwrap() += 1;
                } else {
                    columns.push(c);
                    lengths.push(1);
                }
            }
            (columns, lengths, keyed.iter().map(|x| x.1).collect(), keyed.iter().map(|x| x.2).collect())
        })
        .collect();
    let mut plan = HostPlan {
        units: Vec::new(),
        segment_columns: Vec::new(),
        segment_starts: vec![0],
        entry_rows: Vec::with_capacity(column_indices.len()),
        entry_index: Vec::with_capacity(column_indices.len()),
    };
    for (t, (columns, lengths, rows, index)) in per_tile.into_iter().enumerate() {
        let mut unit_start = plan.segment_columns.len();
        let mut in_unit = 0;
        for (c, l) in columns.into_iter().zip(lengths) {
            plan.segment_columns.push(c);
            plan.segment_starts.push(plan.segment_starts.last().unwrap() + l);
            in_unit += l as usize;
            if in_unit >= unit_entries {
                plan.units.extend([t as i32, unit_start as i32, plan.segment_columns.len() as i32]);
                unit_start = plan.segment_columns.len();
                in_unit = 0;
            }
        }
        if in_unit > 0 {
            plan.units.extend([t as i32, unit_start as i32, plan.segment_columns.len() as i32]);
        }
        plan.entry_rows.extend(rows);
        plan.entry_index.extend(index);
    }
    plan
}

impl SddmmPlan {
    /// The plan for C's structure and inner dimension k (any k): the tensor-core kernel where
    /// [`SddmmPlan::tensor_cores_pay`] (C's structure is downloaded once to count its tiles where C has enough entries
    /// for that to be possible), else the tiled kernel with its largest tiles where [`SddmmPlan::takes_tiled_kernel`],
    /// else [`SddmmConfig::select`]'s config, with nothing built. [`Error::UnsupportedDtype`] for f64,
    /// [`Error::WrongGpu`] for another handle's C, [`Error::TooLarge`] as [`sddmm_with`].
    pub fn new<T: Scalar>(gpu: &Gpu, c: &DeviceCsr<T>, k: usize) -> Result<Self> {
        c.check_gpu(gpu, "C")?;
        if T::DTYPE == DType::F64 {
            return Err(Error::UnsupportedDtype { dtype: T::DTYPE, op: "SDDMM" });
        }
        check_sizes(c.rows(), c.nnz(), k)?;
        if c.nnz() as f64 >= TC_MIN_TILES as f64 * TC_TILE_ELEMENTS * TC_MIN_FILL && tensor_cores_run(gpu, c).is_ok() {
            let (row_offsets, column_indices) = download_structure(gpu, c)?;
            if Self::tensor_cores_pay(T::DTYPE, k, c.nnz(), sddmm_tc_tiles(&row_offsets, &column_indices)) {
                return Self::tensor_cores_from(gpu, c, k, &row_offsets, &column_indices);
            }
        }
        if Self::takes_tiled_kernel(c, k) {
            return Self::tiled(gpu, c, k, None);
        }
        let gather = SddmmConfig::select(k, c.nnz(), T::DTYPE);
        Ok(SddmmPlan { matrix: c.id(), dtype: T::DTYPE, k, kernel: PlanKernel::Gather(gather) })
    }

    /// Where the tensor-core kernel beat the gather and tiled kernels (NOTES.md, "SDDMM step 5"; f32 and f16 on the
    /// SDDMM suite and 20 generated structures at k = 32-256): C's 64 x 64 tiles that hold an entry, `tiles` of them,
    /// at least 15% full on average (`nnz / (tiles 4096)`), or for f16 and bf16 at least 8% full at k >= 128, and at
    /// least 64 of them (fewer run at the launch floor either way: the pruned 384 x 384 weights' 36 tiles ran 0.75x
    /// in f32).
    pub fn tensor_cores_pay(dtype: DType, k: usize, nnz: usize, tiles: usize) -> bool {
        if tiles < TC_MIN_TILES {
            return false;
        }
        let fill = nnz as f64 / (tiles as f64 * TC_TILE_ELEMENTS);
        fill >= 0.15 || (dtype != DType::F32 && k >= 128 && fill >= TC_MIN_FILL)
    }

    /// Whether [`SddmmPlan::new`] takes the tiled kernel for C and k: where it was measured to pay (f32, k of
    /// 256-1024, 2^19 entries or more, 4 or more entries per column in a tile of the largest size on average).
    pub fn takes_tiled_kernel<T: Scalar>(c: &DeviceCsr<T>, k: usize) -> bool {
        let density = c.nnz() as f64 / (c.rows().max(1) as f64 * c.cols().max(1) as f64);
        let per_column = density * Self::largest_tile_rows(T::DTYPE, k) as f64;
        Self::tiled_pays(T::DTYPE, k, c.nnz(), per_column)
    }

    /// The most rows of C per tile at k: as many as fill 96 KB of shared memory with their rows of A (a vector of
    /// padding each), at most 256 (94 at k = 256 in f32).
    pub fn largest_tile_rows(dtype: DType, k: usize) -> usize {
        (TILED_SHARED_BYTES / ((k + tiled_vector(dtype)) * dtype.size())).clamp(1, 256)
    }

    /// Where the tiled kernel beat the gather kernel (NOTES.md, SDDMM step 4, uniform 4096^2 in f32 at k = 256:
    /// 1.65x / 1.57x / 1.20x at 80% / 90% / 95%, 0.95x at 98%): f32, k of 256 to 1024 (8 vectors per lane of 8 to
    /// 32 lanes), 2^19 entries or more (smaller launches ran 2-5x slower: few units, each copying a whole tile of
    /// A), and at least 4 entries per column in a tile on average (`per_column`). f16 and bf16 never paid
    /// (0.5x-0.8x).
    fn tiled_pays(dtype: DType, k: usize, nnz: usize, per_column: f64) -> bool {
        dtype == DType::F32 && (256..=1024).contains(&k) && k % 4 == 0 && nnz >= 1 << 19 && per_column >= 4.0
    }

    /// A plan that runs the tiled kernel whatever it costs, with tiles of `tile_rows` rows (None: the largest,
    /// [`SddmmPlan::largest_tile_rows`]), for tests and measurements. [`Error::Unsupported`] for a k the tiled kernels
    /// cannot take (a multiple of a 16-byte vector, at most 8 vectors per lane of 32: 1024 for f32, 2048 for
    /// f16/bf16; [`sddmm()`] takes any k), a tile of 0 rows or one past the shared memory; the errors of
    /// [`SddmmPlan::new`].
    pub fn tiled<T: Scalar>(gpu: &Gpu, c: &DeviceCsr<T>, k: usize, tile_rows: Option<usize>) -> Result<Self> {
        c.check_gpu(gpu, "C")?;
        if T::DTYPE == DType::F64 {
            return Err(Error::UnsupportedDtype { dtype: T::DTYPE, op: "SDDMM" });
        }
        let vector = tiled_vector(T::DTYPE);
        let Some(&lanes) = TILED_LANES.iter().find(|&&l| k <= TILED_MAX_VECTORS * l * vector) else {
            return Err(Error::Unsupported {
                config: format!("sddmm_tiled_{}", T::DTYPE),
                reason: format!("k = {k} is past {}; sddmm() takes any k", TILED_MAX_VECTORS * 32 * vector),
            });
        };
        if k % vector != 0 {
            return Err(Error::Unsupported {
                config: format!("sddmm_tiled_{}", T::DTYPE),
                reason: format!("k = {k} is not a multiple of {vector} (16 bytes); sddmm() takes any k"),
            });
        }
        check_sizes(c.rows(), c.nnz(), k)?;
        let largest = Self::largest_tile_rows(T::DTYPE, k);
        let rows = tile_rows.unwrap_or(largest);
        if rows == 0 || rows > largest {
            return Err(Error::Unsupported {
                config: format!("sddmm_tiled_{}", T::DTYPE),
                reason: format!("tiles of {rows} rows: 1 to {largest} fit the shared memory at k = {k}"),
            });
        }
        let (row_offsets, column_indices) = download_structure(gpu, c)?;
        // Units of about nnz / (4 x 132) entries: four per SM of an H100 or H200, at least 256 and at most 8192 each.
        let unit_entries = (c.nnz() / (4 * 132)).clamp(256, 8192);
        let host = host_plan(&row_offsets, &column_indices, rows, unit_entries);
        let up = |v: &[i32]| crate::csr::upload_slice(gpu, v, "uploading an SDDMM plan");
        let tiles = Tiles {
            lanes,
            rows,
            num_units: host.units.len() / 3,
            units: up(&host.units)?,
            segment_columns: up(&host.segment_columns)?,
            segment_starts: up(&host.segment_starts)?,
            entry_rows: up(&host.entry_rows)?,
            entry_index: up(&host.entry_index)?,
        };
        Ok(SddmmPlan { matrix: c.id(), dtype: T::DTYPE, k, kernel: PlanKernel::Tiled(Box::new(tiles)) })
    }

    /// A plan that runs the tensor-core kernel (cuda/sddmm/tc.cuh) whatever it costs, for tests and measurements:
    /// each 64 x 64 tile of C that holds an entry is computed densely on the tensor cores, f16 and bf16 by mma with
    /// f32 sums, f32 in 3xTF32 (the SpMM tensor-core kernels' split: within
    /// [`crate::cpu::oracle::spmm_error_bound_tf32x3`] with k products per entry), and its entries are written from
    /// it; a sum that comes out Inf or NaN is computed again with exact f32 FMAs, so Inf and NaN reach C as
    /// [`sddmm_with`] gives them. Any k. Built on the host from one download of C's structure: the tiles (with the most
    /// entries one of their rows has in them) and their rows' first entries (268 bytes a tile).
    /// [`Error::Unsupported`] below compute capability 8.0 or for a C of 2^31 - 64 rows or columns or more; the errors
    /// of [`SddmmPlan::new`].
    pub fn tensor_cores<T: Scalar>(gpu: &Gpu, c: &DeviceCsr<T>, k: usize) -> Result<Self> {
        c.check_gpu(gpu, "C")?;
        if T::DTYPE == DType::F64 {
            return Err(Error::UnsupportedDtype { dtype: T::DTYPE, op: "SDDMM" });
        }
        check_sizes(c.rows(), c.nnz(), k)?;
        tensor_cores_run(gpu, c)?;
        let (row_offsets, column_indices) = download_structure(gpu, c)?;
        Self::tensor_cores_from(gpu, c, k, &row_offsets, &column_indices)
    }

    /// The tensor-core plan from C's structure on the host (checked by the caller).
    fn tensor_cores_from<T: Scalar>(
        gpu: &Gpu,
        c: &DeviceCsr<T>,
        k: usize,
        row_offsets: &[i32],
        column_indices: &[i32],
    ) -> Result<Self> {
        let host = host_tc_plan(row_offsets, column_indices);
        let up = |v: &[i32]| crate::csr::upload_slice(gpu, v, "uploading an SDDMM plan");
        let tiles = TcTiles { num_tiles: host.tiles.len() / 3, tiles: up(&host.tiles)?, starts: up(&host.starts)? };
        Ok(SddmmPlan { matrix: c.id(), dtype: T::DTYPE, k, kernel: PlanKernel::TensorCores(Box::new(tiles)) })
    }

    /// The 64 x 64 tiles of C a tensor-core plan computes (0 where the plan runs another kernel).
    pub fn tensor_core_tiles(&self) -> usize {
        match &self.kernel {
            PlanKernel::TensorCores(tc) => tc.num_tiles,
            _ => 0,
        }
    }

    /// Rows of C per tile of the tiled kernel (0 where the plan runs another).
    pub fn tile_rows(&self) -> usize {
        match &self.kernel {
            PlanKernel::Tiled(tiles) => tiles.rows,
            PlanKernel::Gather(_) | PlanKernel::TensorCores(_) => 0,
        }
    }

    /// Whether the plan runs the tensor-core kernel.
    pub fn uses_tensor_cores(&self) -> bool {
        matches!(self.kernel, PlanKernel::TensorCores(_))
    }

    /// Whether the plan runs the tiled kernel.
    pub fn uses_tiled_kernel(&self) -> bool {
        matches!(self.kernel, PlanKernel::Tiled(_))
    }

    /// The kernel the plan runs: a tiled one, e.g. `sddmm_tiled_f32_v4_l8`, the tensor-core one (`sddmm_tc_f16`), or
    /// the gather kernel's config name.
    pub fn kernel_name(&self) -> String {
        match &self.kernel {
            PlanKernel::TensorCores(_) => sddmm_tc_kernel_name(self.dtype),
            PlanKernel::Tiled(tiles) => {
                format!("sddmm_tiled_{}_v{}_l{}", self.dtype.name(), tiled_vector(self.dtype), tiles.lanes)
            }
            PlanKernel::Gather(config) => config.kernel_name(),
        }
    }
}

/// C = alpha (A B^T) o spy(C) + beta C with a plan made for C's structure and A's k ([`SddmmPlan`]: the tiled kernel
/// where it pays, else the gather kernel's choice): the errors of [`sddmm_with`], and [`Error::PatternMismatch`] for
/// a plan of another matrix (or of C before its structure was rewritten), [`Error::ShapeMismatch`] for one of another
/// k, [`Error::InvalidConfig`] for one of another type.
pub fn sddmm_planned<T: Scalar>(
    gpu: &Gpu,
    a: &DeviceDense<T>,
    b: &DeviceDense<T>,
    c: &mut DeviceCsr<T>,
    plan: &SddmmPlan,
    alpha: f32,
    beta: f32,
) -> Result<()> {
    let k = check_operands(gpu, a, b, c)?;
    if plan.dtype != T::DTYPE {
        return Err(Error::InvalidConfig {
            config: plan.kernel_name(),
            rule: format!("the plan is for {} but the operands are {}", plan.dtype, T::DTYPE),
        });
    }
    if plan.matrix != c.id() {
        return Err(Error::PatternMismatch("the SDDMM plan was made for another matrix's structure".into()));
    }
    if plan.k != k {
        return Err(Error::ShapeMismatch(format!("the SDDMM plan was made for k = {}, A has k = {k}", plan.k)));
    }
    let tiles = match &plan.kernel {
        PlanKernel::Gather(config) => return sddmm_with(gpu, a, b, c, config, alpha, beta),
        PlanKernel::TensorCores(tc) => return launch_tensor_cores(gpu, a, b, c, tc, alpha, beta),
        PlanKernel::Tiled(tiles) => tiles,
    };
    let vector = tiled_vector(T::DTYPE);
    let function = gpu.function_with_shared(Family::Sddmm, &plan.kernel_name(), TILED_SHARED_BYTES as u32)?;
    if tiles.num_units == 0 {
        return Ok(());
    }
    let shared = tiles.rows * (k + vector) * T::DTYPE.size();
    let launch = LaunchConfig {
        grid_dim: (tiles.num_units as u32, 1, 1),
        block_dim: (THREADS as u32, 1, 1),
        shared_mem_bytes: shared as u32,
    };
    let stream = gpu.stream().clone();
    let (m, n, nnz) = (c.rows(), c.cols(), c.nnz());
    c.update_values_with_structure(gpu, |_, _, values| {
        let (units, _g1) = tiles.units.device_ptr(&stream);
        let (segment_columns, _g2) = tiles.segment_columns.device_ptr(&stream);
        let (segment_starts, _g3) = tiles.segment_starts.device_ptr(&stream);
        let (entry_rows, _g4) = tiles.entry_rows.device_ptr(&stream);
        let (entry_index, _g5) = tiles.entry_index.device_ptr(&stream);
        let (lhs, _g6) = a.data.device_ptr(&stream);
        let (rhs, _g7) = b.data.device_ptr(&stream);
        let (out, _g8) = values.device_ptr_mut(&stream);
        let params = SddmmTiledParams {
            m: m as i32,
            n: n as i32,
            k: k as i32,
            nnz: nnz as i32,
            tile_rows: tiles.rows as i32,
            a_stride: (k + vector) as i32,
            num_units: tiles.num_units as i32,
            pad: 0,
            units,
            segment_columns,
            segment_starts,
            entry_rows,
            entry_index,
            lhs,
            rhs,
            values: out,
            alpha,
            beta,
        };
        // SAFETY: the plan was made from this C's structure (its identity checked above): every unit names a tile of
        // C's rows and a range of its segments, every segment a column below n and a range of the plan's entries,
        // every entry a row within its tile and an index below nnz, each index once. A holds m x k and B n x k
        // elements (checked above); the block's shared memory holds the tile's rows of A at a stride of k + one
        // vector, at most TILED_SHARED_BYTES (the limit raised on the function); k is a multiple of the vector, so
        // every vector access is aligned.
        unsafe { stream.launch_builder(&function).arg(&params).launch(launch) }
            .map_err(Error::driver("launching the tiled SDDMM kernel", 0))?;
        Ok::<(), Error>(())
    })
}

/// C's row pointer and column indices on the host, for a plan.
fn download_structure<T: Scalar>(gpu: &Gpu, c: &DeviceCsr<T>) -> Result<(Vec<i32>, Vec<i32>)> {
    let (row_offsets, column_indices, _) = c.device_parts();
    let row_offsets = crate::csr::download_slice(gpu, &row_offsets.slice(..c.rows() + 1), "an SDDMM plan")?;
    let column_indices = if c.nnz() > 0 {
        crate::csr::download_slice(gpu, &column_indices.slice(..c.nnz()), "an SDDMM plan")?
    } else {
        Vec::new()
    };
    Ok((row_offsets, column_indices))
}

/// Launches the tensor-core kernel on a plan's tiles (the operands checked by [`sddmm_planned`]).
fn launch_tensor_cores<T: Scalar>(
    gpu: &Gpu,
    a: &DeviceDense<T>,
    b: &DeviceDense<T>,
    c: &mut DeviceCsr<T>,
    tc: &TcTiles,
    alpha: f32,
    beta: f32,
) -> Result<()> {
    let function = gpu.function(Family::Sddmm, &sddmm_tc_kernel_name(T::DTYPE))?;
    if tc.num_tiles == 0 {
        return Ok(());
    }
    let launch = LaunchConfig {
        grid_dim: (tc.num_tiles as u32, 1, 1),
        block_dim: (TC_THREADS as u32, 1, 1),
        shared_mem_bytes: 0,
    };
    let stream = gpu.stream().clone();
    let (m, n, k, nnz) = (c.rows(), c.cols(), a.cols(), c.nnz());
    c.update_values_with_structure(gpu, |row_offsets, column_indices, values| {
        let (ro, _g1) = row_offsets.device_ptr(&stream);
        let (ci, _g2) = column_indices.device_ptr(&stream);
        let (tiles, _g3) = tc.tiles.device_ptr(&stream);
        let (starts, _g4) = tc.starts.device_ptr(&stream);
        let (lhs, _g5) = a.data.device_ptr(&stream);
        let (rhs, _g6) = b.data.device_ptr(&stream);
        let (out, _g7) = values.device_ptr_mut(&stream);
        let params = SddmmTcParams {
            m: m as i32,
            n: n as i32,
            k: k as i32,
            nnz: nnz as i32,
            num_tiles: tc.num_tiles as i32,
            pad: 0,
            row_offsets: ro,
            column_indices: ci,
            tiles,
            starts,
            lhs,
            rhs,
            values: out,
            alpha,
            beta,
        };
        // SAFETY: the plan was made from this C's structure (its identity checked by the caller): each tile names 64
        // rows and 64 columns of C holding an entry and the most entries one of its rows has there, and each of its
        // rows below m the row's first entry at or past the tile's first column, so the kernel reads column indices
        // only within the rows' ranges and writes each entry once (the tile holding its column). A holds m x k and B
        // n x k elements (checked); the kernel reads rows of them below m and n only, 16 bytes at a time only where k
        // is a multiple of 16 bytes (cudarc's allocations are aligned to 256). m, n (checked when the plan was made)
        // and k, nnz (check_sizes) fit i32 with a tile to spare.
        unsafe { stream.launch_builder(&function).arg(&params).launch(launch) }
            .map_err(Error::driver("launching the tensor-core SDDMM kernel", 0))?;
        Ok::<(), Error>(())
    })
}

/// The checks every SDDMM launch makes of its operands: each of `gpu`'s ([`Error::WrongGpu`]), their shapes
/// ([`check_shapes`]) and sizes ([`check_sizes`]). Returns k.
fn check_operands<T: Scalar>(gpu: &Gpu, a: &DeviceDense<T>, b: &DeviceDense<T>, c: &DeviceCsr<T>) -> Result<usize> {
    a.check_gpu(gpu, "A")?;
    b.check_gpu(gpu, "B")?;
    c.check_gpu(gpu, "C")?;
    check_shapes(a, b, c)?;
    check_sizes(c.rows(), c.nnz(), a.cols())?;
    Ok(a.cols())
}

/// [`Error::ShapeMismatch`] unless A is m x k, B n x k and C m x n: SDDMM's shapes, here and in its cuSPARSE baseline.
pub(crate) fn check_shapes<T: Scalar>(a: &DeviceDense<T>, b: &DeviceDense<T>, c: &DeviceCsr<T>) -> Result<()> {
    if b.cols() != a.cols() || a.rows() != c.rows() || b.rows() != c.cols() {
        return Err(Error::ShapeMismatch(format!(
            "SDDMM takes A m x k, B n x k and C m x n; got A {}x{}, B {}x{}, C {}x{}",
            a.rows(),
            a.cols(),
            b.rows(),
            b.cols(),
            c.rows(),
            c.cols()
        )));
    }
    Ok(())
}

/// The kernels index with i32 and step past their bounds before they stop: a lane's position in k by at most 32
/// lanes of 8 elements, a warp's entries by a run (at most 32 x 4 x 4), its row search by 32 rows. [`Error::TooLarge`]
/// for m, nnz or k within those steps of i32::MAX (a [`DeviceCsr`] already keeps m and nnz within i32).
fn check_sizes(m: usize, nnz: usize, k: usize) -> Result<()> {
    let limit = |what: &str, value: usize, step: usize| {
        if value > i32::MAX as usize - step {
            return Err(Error::TooLarge(format!("{what} = {value}: the SDDMM kernels index it with i32")));
        }
        Ok(())
    };
    limit("k", k, 256)?;
    limit("C's entries", nnz, 32 * ENTRIES_PER_GROUP * 4)?;
    limit("C's rows", m, 32)
}

#[cfg(test)]
mod tests {
    use super::{check_sizes, SddmmConfig};
    use crate::DType;

    #[test]
    fn select_follows_the_measured_rules() {
        let pick = |k, nnz, dtype| {
            let c = SddmmConfig::select(k, nnz, dtype);
            (c.vector_width, c.lanes_per_entry, c.runs_per_warp)
        };
        let (big, mid) = (3_355_437, 335_530);
        // The sweep's fastest on uniform 4096^2 (step 3): f32 4 lanes at k = 32, 8 at k = 128-256.
        assert_eq!(pick(32, big, DType::F32), (4, 4, 4));
        assert_eq!(pick(128, mid, DType::F32), (4, 8, 1));
        assert_eq!(pick(256, big, DType::F32), (4, 8, 4));
        // f16 and bf16: 2 lanes at k = 32, 4 at k = 64-256.
        assert_eq!(pick(32, big, DType::F16), (8, 2, 4));
        assert_eq!(pick(256, mid, DType::Bf16), (8, 4, 1));
        assert_eq!(pick(64, 176_947, DType::F16), (8, 4, 1));
        // A lane walks at most 16 steps of k.
        assert_eq!(pick(1024, big, DType::F32), (4, 16, 4));
        assert_eq!(pick(4096, big, DType::F16), (8, 32, 4));
        // A few thousand entries spread over more lanes.
        assert_eq!(pick(256, 2_949, DType::F32), (4, 32, 1));
        assert_eq!(pick(64, 14_746, DType::F32), (4, 16, 1));
        // Narrow vectors where k has no wider divisor; k = 0 and 1.
        assert_eq!(pick(30, big, DType::F32).0, 2);
        assert_eq!(pick(33, big, DType::F32).0, 1);
        assert_eq!(pick(12, big, DType::Bf16).0, 4);
        assert_eq!(pick(1, 10, DType::F32), (1, 32, 1));
        assert_eq!(pick(0, big, DType::F32), (4, 1, 4));
        for k in 0..300 {
            for nnz in [0, 1, 1000, 100_000, 2_000_000] {
                for dtype in [DType::F32, DType::F16, DType::Bf16] {
                    let c = SddmmConfig::select(k, nnz, dtype);
                    c.validate().unwrap();
                    assert_eq!(k % c.vector_width, 0, "k = {k}");
                }
            }
        }
    }

    #[test]
    #[allow(clippy::needless_range_loop)] // a segment's index reads four arrays
    fn a_plan_holds_every_entry_once_by_column_within_its_tile() {
        // 9 rows (two empty), tiles of 4 rows: entries by (column, row) per tile, segments per column, units of about
        // 3 entries of whole segments.
        let rows: [&[i32]; 9] = [&[0, 3], &[], &[1, 3, 4], &[3], &[0, 4], &[2], &[], &[1, 2, 3], &[4]];
        let mut row_offsets = vec![0];
        let mut column_indices = Vec::new();
        for r in rows {
            column_indices.extend_from_slice(r);
            row_offsets.push(column_indices.len() as i32);
        }
        let plan = super::host_plan(&row_offsets, &column_indices, 4, 3);
        let nnz = column_indices.len();
        let mut seen = vec![0; nnz];
        let row_of = |e: i32| row_offsets.iter().rposition(|&o| o <= e).unwrap();
        let mut covered = vec![false; plan.segment_columns.len()];
        for unit in plan.units.chunks(3) {
            let (tile, first, end) = (unit[0] as usize, unit[1] as usize, unit[2] as usize);
            for s in first..end {
                covered[s] = true;
                let entries = plan.segment_starts[s] as usize..plan.segment_starts[s + 1] as usize;
                assert!(!entries.is_empty(), "segment {s} is empty");
                let mut last_row = -1;
                for p in entries {
                    let e = plan.entry_index[p];
                    seen[e as usize] += 1;
                    assert_eq!(column_indices[e as usize], plan.segment_columns[s], "entry {e} in segment {s}");
                    assert_eq!(row_of(e), tile * 4 + plan.entry_rows[p] as usize, "entry {e}'s row");
                    assert!(plan.entry_rows[p] > last_row, "rows ascend within a segment");
                    last_row = plan.entry_rows[p];
                }
            }
            assert!(first < end, "an empty unit");
        }
        assert!(seen.iter().all(|&n| n == 1), "{seen:?}");
        assert!(covered.iter().all(|&c| c), "segments outside every unit");
        assert_eq!(*plan.segment_starts.last().unwrap() as usize, nnz);
        // Tile 0 (rows 0-3) has columns 0, 1, 3, 4: four segments; the first three (1 + 1 + 3 entries) make a unit.
        assert_eq!(&plan.segment_columns[..4], &[0, 1, 3, 4]);
        assert_eq!(&plan.units[..3], &[0, 0, 3]);
    }

    #[test]
    fn plans_take_the_tiled_kernel_where_it_was_measured_faster() {
        use super::SddmmPlan;
        // Uniform 4096^2 in f32 at k = 256, tiles of 94 rows: 80-95% take it, 98% (1.9 per column) does not, nor do
        // the pruned weights (at most 176,947 entries).
        for (nnz, per_column, tiled) in
            [(3_355_437, 18.8, true), (838_834, 4.7, true), (335_530, 1.9, false), (176_947, 28.2, false)]
        {
            assert_eq!(SddmmPlan::tiled_pays(DType::F32, 256, nnz, per_column), tiled, "{nnz}");
        }
        assert!(!SddmmPlan::tiled_pays(DType::F32, 256, 3_355_437, 1.9));
        assert!(!SddmmPlan::tiled_pays(DType::F32, 128, 3_355_437, 37.2), "k = 128 ran slower");
        assert!(!SddmmPlan::tiled_pays(DType::F16, 256, 3_355_437, 37.2), "f16 never paid");
        assert!(!SddmmPlan::tiled_pays(DType::F32, 2048, 3_355_437, 18.8), "past the tiled kernels' k");
        assert!(!SddmmPlan::tiled_pays(DType::F32, 258, 3_355_437, 18.8), "not a multiple of a vector");
    }

    #[test]
    fn a_tensor_core_plan_lists_each_tile_with_its_rows_first_entries() {
        // 130 rows (three row tiles, the last of 2 rows) over 200 columns (four column tiles): a random structure with
        // empty rows, a full row and columns at tile edges.
        let pattern = crate::gen::with_dense_row(&crate::gen::uniform_random(130, 200, 0.05, 3), 70);
        let mut row_offsets: Vec<i32> = pattern.indptr().raw_storage().iter().map(|&o| o as i32).collect();
        let mut column_indices: Vec<i32> = pattern.indices().iter().map(|&c| c as i32).collect();
        // Row 1 empty, row 2 with columns 63 and 64 (either side of a tile edge).
        let (s1, e1) = (row_offsets[1] as usize, row_offsets[3] as usize);
        column_indices.splice(s1..e1, [63, 64]);
        let shift = (e1 - s1) as i32 - 2;
        row_offsets[2] = s1 as i32;
        for o in &mut row_offsets[3..] {
            *o -= shift;
        }
        let plan = super::host_tc_plan(&row_offsets, &column_indices);
        let tile = super::SDDMM_TC_TILE as i32;
        let mut want_tiles = Vec::new();
        for t in 0..130i32.div_euclid(tile) + 1 {
            let rows = (t * tile) as usize..((t + 1) * tile).min(130) as usize;
            let mut cols: Vec<i32> = rows
                .flat_map(|r| column_indices[row_offsets[r] as usize..row_offsets[r + 1] as usize].to_vec())
                .map(|c| c / tile)
                .collect();
            cols.sort_unstable();
            cols.dedup();
            for c in cols {
                // The most entries a row of the tile has in its columns.
                let rows = (t * tile) as usize..((t + 1) * tile).min(130) as usize;
                let count = |r: usize| {
                    let row = &column_indices[row_offsets[r] as usize..row_offsets[r + 1] as usize];
                    row.iter().filter(|&&j| j / tile == c).count() as i32
                };
                want_tiles.extend([t, c, rows.map(count).max().unwrap()]);
            }
        }
        assert_eq!(plan.tiles, want_tiles);
        assert_eq!(plan.starts.len(), plan.tiles.len() / 3 * 64);
        assert_eq!(super::sddmm_tc_tiles(&row_offsets, &column_indices), plan.tiles.len() / 3);
        // The full row 70 fills its tiles of rows 64-127: 64 entries in each of columns 0-191, 8 in 192-199.
        assert!(plan.tiles.chunks(3).any(|t| t == [1, 0, 64]) && plan.tiles.chunks(3).any(|t| t == [1, 3, 8]));
        for (i, t) in plan.tiles.chunks(3).enumerate() {
            for lr in 0..64 {
                let r = (t[0] * tile + lr) as usize;
                let got = plan.starts[i * 64 + lr as usize];
                if r >= 130 {
                    assert_eq!(got, 0);
                    continue;
                }
                // The first entry of row r at or past the tile's first column (the row's end if none).
                let (s, e) = (row_offsets[r], row_offsets[r + 1]);
                let want = (s..e).find(|&p| column_indices[p as usize] >= t[1] * tile).unwrap_or(e);
                assert_eq!(got, want, "tile {t:?}, row {r}");
            }
        }
        assert!(plan.tiles.chunks(3).any(|t| t[..2] == [0, 0]) && plan.tiles.chunks(3).any(|t| t[..2] == [0, 1]));
    }

    #[test]
    fn plans_take_the_tensor_cores_where_they_were_measured_faster() {
        use super::SddmmPlan;
        let pays = |dtype, k, nnz, tiles| SddmmPlan::tensor_cores_pay(dtype, k, nnz, tiles);
        // Uniform 4096^2 (4096 tiles): 80% (20% full) in both types; 90% (10%) in f16 from k = 128, not in f32; 95%
        // and 98% never.
        assert!(pays(DType::F32, 32, 3_355_437, 4096) && pays(DType::F16, 32, 3_355_437, 4096));
        assert!(!pays(DType::F32, 256, 1_677_702, 4096));
        assert!(pays(DType::F16, 128, 1_677_702, 4096) && pays(DType::Bf16, 256, 1_677_702, 4096));
        assert!(!pays(DType::F16, 64, 1_677_702, 4096));
        assert!(!pays(DType::F16, 256, 838_834, 4096) && !pays(DType::F32, 256, 335_530, 4096));
        // The attention masks (436 tiles 65% full) and the pruned 1536 x 384 at 70% (144 tiles, 30%).
        assert!(pays(DType::F32, 64, 1_162_864, 436) && pays(DType::F16, 64, 176_947, 144));
        // The pruned 384 x 384 (36 tiles) and the graphs (0.2% full) never.
        assert!(!pays(DType::F16, 256, 44_237, 36) && !pays(DType::F32, 32, 367_662, 48_537));
    }

    #[test]
    fn sizes_the_kernels_cannot_step_over_are_too_large() {
        let max = i32::MAX as usize;
        assert!(check_sizes(max - 32, max - 512, max - 256).is_ok());
        for (m, nnz, k) in [(max - 31, 0, 0), (0, max - 511, 0), (0, 0, max - 255)] {
            assert!(matches!(check_sizes(m, nnz, k), Err(crate::Error::TooLarge(_))), "{m} {nnz} {k}");
        }
    }

    #[test]
    fn validate_repeats_the_kernel_rules() {
        let ok = SddmmConfig { dtype: DType::F16, vector_width: 8, lanes_per_entry: 32, runs_per_warp: 4 };
        ok.validate().unwrap();
        let bad = [
            SddmmConfig { dtype: DType::F32, vector_width: 8, ..ok },
            SddmmConfig { vector_width: 3, ..ok },
            SddmmConfig { lanes_per_entry: 64, ..ok },
            SddmmConfig { lanes_per_entry: 3, ..ok },
            SddmmConfig { runs_per_warp: 2, ..ok },
        ];
        for c in bad {
            assert!(matches!(c.validate(), Err(crate::Error::InvalidConfig { .. })), "{c:?}");
        }
        assert!(matches!(
            SddmmConfig { dtype: DType::F64, vector_width: 1, lanes_per_entry: 1, runs_per_warp: 1 }.validate(),
            Err(crate::Error::UnsupportedDtype { .. })
        ));
    }

    #[test]
    fn the_compiled_configs_are_the_kernel_file() {
        // cuda/sddmm/sddmm.cu instantiates every (type, vector width) this lists at every lane count, and no other.
        let source = include_str!("../cuda/sddmm/sddmm.cu");
        let mut instantiated: Vec<(String, usize)> = source
            .lines()
            .filter_map(|l| l.strip_prefix("TILESPARSE_SDDMM_LANES(")?.strip_suffix(')').map(str::to_string))
            .map(|args| {
                let f: Vec<&str> = args.split(", ").collect();
                (f[0].to_string(), f[2].parse().unwrap())
            })
            .collect();
        instantiated.sort();
        assert_eq!(instantiated.len(), 11, "{instantiated:?}");
        let mut listed: Vec<(String, usize)> = SddmmConfig::compiled()
            .iter()
            .filter(|c| c.lanes_per_entry == 1 && c.runs_per_warp == 1)
            .map(|c| (c.dtype.name().to_string(), c.vector_width))
            .collect();
        listed.sort();
        if crate::kernels::KERNELS_BUILT {
            assert_eq!(listed, instantiated);
            assert_eq!(SddmmConfig::compiled().len(), 11 * SddmmConfig::LANES.len() * SddmmConfig::RUNS.len());
        }
        // Each (type, width) at every lane count, each at every run count.
        for lanes in SddmmConfig::LANES {
            assert!(source.contains(&format!("  TILESPARSE_SDDMM_RUNS(DTYPE, T, VECTOR, {lanes})")), "{lanes} lanes");
        }
        for runs in SddmmConfig::RUNS {
            let line = format!("_r{runs}, T, VECTOR, LANES, {runs})");
            assert!(source.contains(&line), "{runs} runs");
        }
        for c in SddmmConfig::compiled() {
            c.validate().unwrap();
        }
    }
}
