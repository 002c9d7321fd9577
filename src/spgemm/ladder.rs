//! The seed's SpGEMM ladder (shared/seeds/spgemm-kernels-0-4-report.md): kernels 0..4 and the prefix-sum
//! alternative, each appending C's entries to an unordered COO output ([`spgemm_ladder`]), and the conversion
//! of that output to a CSR matrix with sorted columns ([`coo_to_csr`]).

use std::fmt;
use std::str::FromStr;

use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg};

use super::{alloc_uninit, alloc_zeroed, check_shapes};
use crate::csr::DeviceCsr;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::kernels::Family;

/// Block size and tile size of kernels 2 and 3, and the default point of kernel 4 and kp. Must match
/// `kSeedBlock` and `kSeedTile` in cuda/spgemm/spgemm.cu.
pub const SEED_BLOCK: u32 = 256;
pub const SEED_TILE: u32 = 2048;

/// Kernels 0 and 1: output columns per tile (the seed's 512) and the most threads (rows in flight) the grid
/// gets; their global scratch is threads x tile floats plus threads x tile / 32 touched words.
pub const THREAD_PER_ROW_TILE: usize = 512;
pub const THREAD_PER_ROW_MAX_THREADS: usize = 65536;
const THREAD_PER_ROW_BLOCK: usize = 256;

/// The (block, tile) points compiled for kernel 4 and kp. The one other copy is the X-macro
/// `TILESPARSE_SPGEMM_K4_GRID` in cuda/spgemm/spgemm.cu: change both together (the test
/// `the_rust_grid_matches_the_cuda_x_macro` in tests/spgemm.rs compares them).
pub const SPGEMM_K4_GRID: &[(u32, u32)] = &[
    (64, 64),
    (64, 128),
    (64, 256),
    (64, 512),
    (64, 1024),
    (64, 2048),
    (64, 4096),
    (128, 64),
    (128, 128),
    (128, 256),
    (128, 512),
    (128, 1024),
    (128, 2048),
    (128, 4096),
    (256, 64),
    (256, 128),
    (256, 256),
    (256, 512),
    (256, 1024),
    (256, 2048),
    (256, 4096),
    (512, 64),
    (512, 128),
    (512, 256),
    (512, 512),
    (512, 1024),
    (512, 2048),
    (512, 4096),
    (1024, 64),
    (1024, 128),
    (1024, 256),
    (1024, 512),
    (1024, 1024),
    (1024, 2048),
    (1024, 4096),
];

/// Threads of the conversion kernels; must match `kScanBlock` and `kSortBlock` in cuda/spgemm/coo_to_csr.cuh.
const SCAN_BLOCK: u32 = 1024;
const SORT_BLOCK: u32 = 256;
/// Threads per block and the grid cap of the grid-stride conversion kernels.
const ELEMENTWISE_BLOCK: usize = 256;
const ELEMENTWISE_MAX_GRID: usize = 65536;

/// One kernel of the seed's ladder; `K4` and `PrefixSum` name a point of [`SPGEMM_K4_GRID`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LadderKernel {
    /// One thread per row, accumulator in global scratch.
    K0,
    /// K0 with invariants hoisted, pointers cached in `__restrict__` locals.
    K1,
    /// One block per row, shared-memory accumulator, one global atomic per output entry.
    K2,
    /// K2 with the tile's entries counted in shared memory and reserved with one global atomic.
    K3,
    /// K3 with the count taken while accumulating, per thread, warp-reduced.
    K4 { block: u32, tile: u32 },
    /// The write-up's alternative: write offsets from an exclusive scan of the tile's touched flags.
    PrefixSum { block: u32, tile: u32 },
}

impl LadderKernel {
    /// The seed's ladder in order, K4 and kp at their default point.
    pub const LADDER: [LadderKernel; 6] = [
        LadderKernel::K0,
        LadderKernel::K1,
        LadderKernel::K2,
        LadderKernel::K3,
        LadderKernel::K4 { block: SEED_BLOCK, tile: SEED_TILE },
        LadderKernel::PrefixSum { block: SEED_BLOCK, tile: SEED_TILE },
    ];

    /// The `extern "C"` name in cuda/spgemm/spgemm.cu; the only place that builds it.
    pub fn kernel_name(self) -> String {
        match self {
            LadderKernel::K0 => "spgemm_k0_f32".into(),
            LadderKernel::K1 => "spgemm_k1_f32".into(),
            LadderKernel::K2 => "spgemm_k2_f32".into(),
            LadderKernel::K3 => "spgemm_k3_f32".into(),
            LadderKernel::K4 { block, tile } => format!("spgemm_k4_b{block}_t{tile}_f32"),
            LadderKernel::PrefixSum { block, tile } => format!("spgemm_kp_b{block}_t{tile}_f32"),
        }
    }

    /// Refuses a K4 / kp point that is not in [`SPGEMM_K4_GRID`].
    pub fn validate(self) -> Result<()> {
        match self {
            LadderKernel::K4 { block, tile } | LadderKernel::PrefixSum { block, tile }
                if !SPGEMM_K4_GRID.contains(&(block, tile)) =>
            {
                Err(Error::NotCompiled {
                    config: self.to_string(),
                    nearest: format!("blocks 64..1024 x tiles 64..4096 in powers of two, e.g. {}", Self::LADDER[4]),
                })
            }
            _ => Ok(()),
        }
    }

    /// Threads per block of the launch.
    fn block(self) -> u32 {
        match self {
            LadderKernel::K0 | LadderKernel::K1 => THREAD_PER_ROW_BLOCK as u32,
            LadderKernel::K2 | LadderKernel::K3 => SEED_BLOCK,
            LadderKernel::K4 { block, .. } | LadderKernel::PrefixSum { block, .. } => block,
        }
    }
}

impl fmt::Display for LadderKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LadderKernel::K0 => write!(f, "k0"),
            LadderKernel::K1 => write!(f, "k1"),
            LadderKernel::K2 => write!(f, "k2"),
            LadderKernel::K3 => write!(f, "k3"),
            LadderKernel::K4 { block, tile } => write!(f, "k4_b{block}_t{tile}"),
            LadderKernel::PrefixSum { block, tile } => write!(f, "kp_b{block}_t{tile}"),
        }
    }
}

impl FromStr for LadderKernel {
    type Err = Error;

    /// `k0`..`k3`, `k4` or `kp` (default point), or `k4_b<block>_t<tile>` / `kp_b<block>_t<tile>`.
    fn from_str(s: &str) -> Result<Self> {
        let usage =
            || Error::Usage(format!("unknown SpGEMM kernel '{s}' (k0, k1, k2, k3, k4, kp, k4_b256_t2048, ...)"));
        let kernel = match s {
            "k0" => LadderKernel::K0,
            "k1" => LadderKernel::K1,
            "k2" => LadderKernel::K2,
            "k3" => LadderKernel::K3,
            "k4" => Self::LADDER[4],
            "kp" => Self::LADDER[5],
            _ => {
                let (family, point) = s.split_once("_b").ok_or_else(usage)?;
                let (block, tile) = point.split_once("_t").ok_or_else(usage)?;
                let (block, tile) = (block.parse().map_err(|_| usage())?, tile.parse().map_err(|_| usage())?);
                match family {
                    "k4" => LadderKernel::K4 { block, tile },
                    "kp" => LadderKernel::PrefixSum { block, tile },
                    _ => return Err(usage()),
                }
            }
        };
        kernel.validate()?;
        Ok(kernel)
    }
}

/// Kernel arguments; mirrors `ts::SpgemmParams` in cuda/spgemm/spgemm_params.cuh.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct SpgemmParams {
    m: i32,
    k: i32,
    n: i32,
    capacity: i32,
    a_row_offsets: u64,
    a_column_indices: u64,
    a_values: u64,
    b_row_offsets: u64,
    b_column_indices: u64,
    b_values: u64,
    out_rows: u64,
    out_columns: u64,
    out_values: u64,
    out_count: u64,
    scratch_acc: u64,
    scratch_touched: u64,
    scratch_threads: i32,
    scratch_tile: i32,
}
const _: () =
    assert!(std::mem::size_of::<SpgemmParams>() == 120, "SpgemmParams must match cuda/spgemm/spgemm_params.cuh");
// SAFETY: plain old data with the C layout the kernel expects.
unsafe impl cudarc::driver::DeviceRepr for SpgemmParams {}

/// Conversion kernel arguments; mirrors `ts::CooToCsrParams` in cuda/spgemm/spgemm_params.cuh.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct CooToCsrParams {
    m: i32,
    nnz: i32,
    coo_rows: u64,
    coo_columns: u64,
    coo_values: u64,
    row_offsets: u64,
    row_cursor: u64,
    unsorted_columns: u64,
    unsorted_values: u64,
    csr_columns: u64,
    csr_values: u64,
}
const _: () =
    assert!(std::mem::size_of::<CooToCsrParams>() == 80, "CooToCsrParams must match cuda/spgemm/spgemm_params.cuh");
// SAFETY: plain old data with the C layout the kernel expects.
unsafe impl cudarc::driver::DeviceRepr for CooToCsrParams {}

/// Upper bound of nnz(A * B) from the structures alone: per row i of A, min(b_cols, sum over the row's
/// columns j of the length of B's row j), summed over rows. `a_indptr` has rows + 1 entries, `b_indptr` has
/// A's columns + 1.
pub fn output_nnz_bound(a_indptr: &[usize], a_indices: &[usize], b_indptr: &[usize], b_cols: usize) -> u64 {
    a_indptr
        .windows(2)
        .map(|w| {
            let products: u64 = a_indices[w[0]..w[1]].iter().map(|&j| (b_indptr[j + 1] - b_indptr[j]) as u64).sum();
            products.min(b_cols as u64)
        })
        .sum()
}

/// The global scratch of kernels 0 and 1: one accumulator and touched bitmap per thread of the grid.
struct ThreadScratch {
    threads: usize,
    acc: CudaSlice<f32>,
    touched: CudaSlice<u32>,
}

/// The unordered COO output of a ladder kernel on the device: `capacity` entries allocated (a bound of
/// nnz(C) computed on the host), the first `nnz` written, each (row, column) at most once.
pub struct DeviceCoo {
    rows: usize,
    cols: usize,
    nnz: usize,
    capacity: usize,
    row_indices: CudaSlice<i32>,
    column_indices: CudaSlice<i32>,
    values: CudaSlice<f32>,
    /// (1) the kernels' global atomic counter.
    count: CudaSlice<i32>,
    /// Kernels 0 and 1 only, allocated on their first launch and reused.
    thread_scratch: Option<ThreadScratch>,
}

impl DeviceCoo {
    /// Allocates the output of A * B: reads A's structure and B's row pointer back, bounds nnz(C) with
    /// [`output_nnz_bound`] and allocates that many entries.
    pub fn for_product(gpu: &Gpu, a: &DeviceCsr<f32>, b: &DeviceCsr<f32>) -> Result<Self> {
        check_shapes(gpu, a, b)?;
        let stream = gpu.stream();
        let read = |s: &CudaSlice<i32>, len: usize, what| -> Result<Vec<usize>> {
            let v = stream.clone_dtoh(s).map_err(Error::driver(what, 0))?;
            Ok(v.into_iter().take(len).map(|x| x as usize).collect())
        };
        let a_indptr = read(&a.row_offsets, a.rows() + 1, "reading back A's row offsets")?;
        let a_indices = read(&a.column_indices, a.nnz(), "reading back A's column indices")?;
        let b_indptr = read(&b.row_offsets, b.rows() + 1, "reading back B's row offsets")?;
        let bound = output_nnz_bound(&a_indptr, &a_indices, &b_indptr, b.cols());
        if bound > i32::MAX as u64 {
            return Err(Error::TooLarge(format!(
                "A * B may have up to {bound} entries, past the kernels' 32-bit positions ({})",
                i32::MAX
            )));
        }
        let capacity = bound as usize;
        Ok(DeviceCoo {
            rows: a.rows(),
            cols: b.cols(),
            nnz: 0,
            capacity,
            row_indices: alloc_uninit(gpu, capacity, "allocating the SpGEMM output rows")?,
            column_indices: alloc_uninit(gpu, capacity, "allocating the SpGEMM output columns")?,
            values: alloc_uninit(gpu, capacity, "allocating the SpGEMM output values")?,
            count: alloc_zeroed(gpu, 1, "allocating the SpGEMM output counter")?,
            thread_scratch: None,
        })
    }

    pub fn rows(&self) -> usize {
        self.rows
    }
    pub fn cols(&self) -> usize {
        self.cols
    }
    /// Entries written by the last kernel.
    pub fn nnz(&self) -> usize {
        self.nnz
    }
    /// Entries allocated (the host bound of nnz(C)).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The thread-per-row scratch for an m-row A, allocated on first use.
    fn thread_scratch(&mut self, gpu: &Gpu) -> Result<&ThreadScratch> {
        if self.thread_scratch.is_none() {
            let threads =
                self.rows.min(THREAD_PER_ROW_MAX_THREADS).div_ceil(THREAD_PER_ROW_BLOCK) * THREAD_PER_ROW_BLOCK;
            self.thread_scratch = Some(ThreadScratch {
                threads,
                acc: alloc_uninit(gpu, threads * THREAD_PER_ROW_TILE, "allocating the k0/k1 accumulators")?,
                touched: alloc_uninit(gpu, threads * THREAD_PER_ROW_TILE / 32, "allocating the k0/k1 touched bits")?,
            });
        }
        Ok(self.thread_scratch.as_ref().expect("allocated above"))
    }
}

/// Runs `kernel` for C = A * B into `out` (made by [`DeviceCoo::for_product`] for the same shapes) and
/// returns nnz(C), read back from the device (so the call waits for the kernel).
pub fn spgemm_ladder_into(
    gpu: &Gpu,
    a: &DeviceCsr<f32>,
    b: &DeviceCsr<f32>,
    kernel: LadderKernel,
    out: &mut DeviceCoo,
) -> Result<usize> {
    check_shapes(gpu, a, b)?;
    gpu.check_owns("the COO output", &out.count)?;
    if out.rows != a.rows() || out.cols != b.cols() {
        return Err(Error::ShapeMismatch(format!(
            "the output is {} x {}, A * B is {} x {}",
            out.rows,
            out.cols,
            a.rows(),
            b.cols()
        )));
    }
    kernel.validate()?;
    let function = gpu.function(Family::Spgemm, &kernel.kernel_name())?;
    let stream = gpu.stream().clone();
    stream.memset_zeros(&mut out.count).map_err(Error::driver("zeroing the SpGEMM output counter", 4))?;
    if a.rows() > 0 && b.cols() > 0 {
        let thread_per_row = matches!(kernel, LadderKernel::K0 | LadderKernel::K1);
        // Event tracking is off (`Gpu::new`), so the guards cudarc hands out with each pointer record nothing:
        // they are dropped at once and the pointers taken as plain addresses.
        let (scratch_threads, scratch_acc, scratch_touched) = if thread_per_row {
            let s = out.thread_scratch(gpu)?;
            (s.threads, s.acc.device_ptr(&stream).0, s.touched.device_ptr(&stream).0)
        } else {
            (0, 0, 0)
        };
        let params = SpgemmParams {
            m: a.rows() as i32,
            k: a.cols() as i32,
            n: b.cols() as i32,
            capacity: out.capacity as i32,
            a_row_offsets: a.row_offsets.device_ptr(&stream).0,
            a_column_indices: a.column_indices.device_ptr(&stream).0,
            a_values: a.values.device_ptr(&stream).0,
            b_row_offsets: b.row_offsets.device_ptr(&stream).0,
            b_column_indices: b.column_indices.device_ptr(&stream).0,
            b_values: b.values.device_ptr(&stream).0,
            out_rows: out.row_indices.device_ptr_mut(&stream).0,
            out_columns: out.column_indices.device_ptr_mut(&stream).0,
            out_values: out.values.device_ptr_mut(&stream).0,
            out_count: out.count.device_ptr_mut(&stream).0,
            scratch_acc,
            scratch_touched,
            scratch_threads: scratch_threads as i32,
            scratch_tile: THREAD_PER_ROW_TILE as i32,
        };
        let block = kernel.block();
        let grid = if thread_per_row { (scratch_threads / THREAD_PER_ROW_BLOCK) as u32 } else { a.rows() as u32 };
        let cfg = LaunchConfig { grid_dim: (grid, 1, 1), block_dim: (block, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: A and B were validated at upload and their shapes checked above, so every index the kernel
        // follows is in bounds; the output holds `capacity` >= nnz(C) entries and the kernels drop (and count)
        // anything past it; k0/k1 get threads x tile accumulators and threads x tile / 32 words, which they
        // zero before use; grid x block matches the scratch's thread count (k0/k1) or m (the rest).
        unsafe { stream.launch_builder(&function).arg(&params).launch(cfg) }
            .map_err(Error::driver("launching a SpGEMM ladder kernel", 0))?;
    }
    let count = stream.clone_dtoh(&out.count).map_err(Error::driver("reading back the SpGEMM output count", 4))?;
    let nnz = count[0].max(0) as usize;
    if nnz > out.capacity {
        // Unreachable while `output_nnz_bound` is an upper bound; the kernels wrote nothing past the capacity.
        return Err(Error::TooLarge(format!("{kernel} produced {nnz} entries, past the bound {}", out.capacity)));
    }
    out.nnz = nnz;
    Ok(nnz)
}

/// C = A * B with one ladder kernel, as an unordered COO matrix on the device.
pub fn spgemm_ladder(gpu: &Gpu, a: &DeviceCsr<f32>, b: &DeviceCsr<f32>, kernel: LadderKernel) -> Result<DeviceCoo> {
    let mut out = DeviceCoo::for_product(gpu, a, b)?;
    spgemm_ladder_into(gpu, a, b, kernel, &mut out)?;
    Ok(out)
}

/// Converts a ladder kernel's COO output to CSR with ascending columns: row histogram, single-block exclusive
/// scan of the row counts, scatter into row segments, per-row sort (bitonic in shared memory up to 2048
/// entries, rank sort beyond).
pub fn coo_to_csr(gpu: &Gpu, coo: &DeviceCoo) -> Result<DeviceCsr<f32>> {
    gpu.check_owns("the COO matrix", &coo.count)?;
    let (m, nnz) = (coo.rows, coo.nnz);
    let stream = gpu.stream().clone();
    let row_offsets = alloc_zeroed::<i32>(gpu, m + 1, "allocating the CSR row offsets")?;
    let row_cursor = alloc_zeroed::<i32>(gpu, m, "allocating the CSR row cursors")?;
    let unsorted_columns = alloc_uninit::<i32>(gpu, nnz, "allocating the CSR scatter columns")?;
    let unsorted_values = alloc_uninit::<f32>(gpu, nnz, "allocating the CSR scatter values")?;
    let csr_columns = alloc_uninit::<i32>(gpu, nnz, "allocating the CSR column indices")?;
    let csr_values = alloc_uninit::<f32>(gpu, nnz, "allocating the CSR values")?;
    if m > 0 {
        let function = |name| gpu.function(Family::Spgemm, name);
        let histogram = function("spgemm_coo_row_histogram")?;
        let scan = function("spgemm_exclusive_scan_single_block")?;
        let scatter = function("spgemm_coo_scatter_rows")?;
        let sort = function("spgemm_sort_rows")?;
        let params = CooToCsrParams {
            m: m as i32,
            nnz: nnz as i32,
            coo_rows: coo.row_indices.device_ptr(&stream).0,
            coo_columns: coo.column_indices.device_ptr(&stream).0,
            coo_values: coo.values.device_ptr(&stream).0,
            row_offsets: row_offsets.device_ptr(&stream).0,
            row_cursor: row_cursor.device_ptr(&stream).0,
            unsorted_columns: unsorted_columns.device_ptr(&stream).0,
            unsorted_values: unsorted_values.device_ptr(&stream).0,
            csr_columns: csr_columns.device_ptr(&stream).0,
            csr_values: csr_values.device_ptr(&stream).0,
        };
        let elementwise = LaunchConfig {
            grid_dim: (nnz.div_ceil(ELEMENTWISE_BLOCK).clamp(1, ELEMENTWISE_MAX_GRID) as u32, 1, 1),
            block_dim: (ELEMENTWISE_BLOCK as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        let single = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (SCAN_BLOCK, 1, 1), shared_mem_bytes: 0 };
        let per_row = LaunchConfig { grid_dim: (m as u32, 1, 1), block_dim: (SORT_BLOCK, 1, 1), shared_mem_bytes: 0 };
        // The COO holds nnz entries with rows < m and unique (row, column) pairs (the ladder's contract);
        // row_offsets has m + 1 zeroed ints, row_cursor m zeroed ints, the other arrays max(nnz, 1) elements.
        // SAFETY: the histogram adds at most nnz counts into row_offsets[0..m].
        unsafe { stream.launch_builder(&histogram).arg(&params).launch(elementwise) }
            .map_err(Error::driver("launching the COO row histogram", 0))?;
        // SAFETY: one block scans row_offsets[0..=m] in place; row_offsets[m] ends as nnz.
        unsafe { stream.launch_builder(&scan).arg(&params).launch(single) }
            .map_err(Error::driver("launching the row-count scan", 0))?;
        // SAFETY: row r's entries land in [row_offsets[r], row_offsets[r + 1]), below nnz.
        unsafe { stream.launch_builder(&scatter).arg(&params).launch(elementwise) }
            .map_err(Error::driver("launching the COO scatter", 0))?;
        // SAFETY: one block per row r < m permutes within the row's segment; ranks are unique because the
        // columns of a row are.
        unsafe { stream.launch_builder(&sort).arg(&params).launch(per_row) }
            .map_err(Error::driver("launching the per-row column sort", 0))?;
    }
    Ok(DeviceCsr::from_device_parts(m, coo.cols, nnz, row_offsets, csr_columns, csr_values))
}
