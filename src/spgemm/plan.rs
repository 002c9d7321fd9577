//! The production SpGEMM: C = A * B into a CSR matrix with ascending columns, in two phases.
//!
//! **Symbolic** ([`SpgemmPlan::new`]): products per row of A * B (8 lanes per row, a block for rows of A
//! longer than 256 entries); rows binned by work, min(products, n), into ten hash bins and a dense bin; each
//! bin's kernel counts the distinct columns of its rows (a shared-memory hash table of twice the bin's bound
//! per row: 4 lanes per row for the shortest rows,
//! up to a 1024-thread block for rows of up to 8192 entries; above that, the dense bin walks the row once per
//! tile of 32768 columns, setting bits of a bitmap); a two-pass scan turns the counts into C's row pointer.
//! **Numeric** ([`SpgemmPlan::numeric`]): rows binned again by their exact nnz, each accumulated in a hash
//! table of twice that size (values added with shared atomics), compacted and sorted (rank counting in a
//! group, a bitonic network in a block), or, in the dense bin, accumulated densely per column tile and written
//! in bitmap order. The host waits twice (bin sizes, then nnz(C) before allocating C).
//!
//! Device memory beyond A, B and C (whose row pointer the plan makes): two integers per row of A (its products,
//! the bins' row list), one per (dense row, column tile) and a few hundred bytes; nothing proportional to the
//! number of products. Every allocation failure is [`Error::OutOfDeviceMemory`].
//!
//! Values are summed in fp32 in an order that depends on scheduling (shared-memory atomics), so the last bits
//! of C's values may differ between runs; the structure never does. (cuSPARSE documents its SpGEMM algorithms
//! as deterministic.) Every value is within gamma(p + 1) |A||B| of the exact sum (see [`super::check_product`]).

use std::sync::Arc;

use cudarc::driver::sys::CUfunction_attribute_enum as FuncAttr;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg};

use super::{alloc_uninit, alloc_zeroed, check_shapes};
use crate::csr::DeviceCsr;
use crate::error::{Error, Result};
use crate::gpu::{Gpu, SideStreams};
use crate::kernels::Family;

/// The hash bins as (bound, threads per row, threads per block): bin b takes rows of at most `bound` entries
/// (symbolic: min(products, n); numeric: nnz) into a table of 2 * bound slots. Mirrors the X-macro
/// `TILESPARSE_SPGEMM_BINS` in cuda/spgemm/plan_common.cuh (tests/spgemm.rs compares the two).
pub const PLAN_BINS: [(u32, u32, u32); 10] = [
    (16, 4, 128),
    (32, 8, 128),
    (64, 16, 128),
    (128, 32, 128),
    (256, 32, 128),
    (512, 128, 128),
    (1024, 256, 256),
    (2048, 512, 512),
    (4096, 1024, 1024),
    (8192, 1024, 1024),
];
/// The dense bin's index, after the hash bins.
pub const DENSE_BIN: usize = PLAN_BINS.len();
const BIN_SLOTS: usize = PLAN_BINS.len() + 1;
/// Columns per tile of the dense bin; must match `kDenseTile` in cuda/spgemm/plan_common.cuh.
pub const DENSE_TILE: usize = 32768;
const DENSE_BLOCK: u32 = 1024;
/// Layout of the counters (must match `kCounter*` in cuda/spgemm/plan_common.cuh).
const COUNTER_SYMBOLIC_BINS: usize = 0;
const COUNTER_NUMERIC_BINS: usize = COUNTER_SYMBOLIC_BINS + BIN_SLOTS;
const COUNTER_PRODUCTS: usize = COUNTER_NUMERIC_BINS + BIN_SLOTS;
const COUNTER_NNZ: usize = COUNTER_PRODUCTS + 1;
const COUNTER_FLAGS: usize = COUNTER_NNZ + 1;
const COUNTERS: usize = 32;
/// Threads of the bookkeeping kernels (cuda/spgemm/plan_setup.cuh): count, binning (a row per thread), scan
/// (chunks of SCAN_CHUNK entries).
const COUNT_BLOCK: u32 = 256;
/// Rows of A longer than this are counted by a block (`kLongRow` in cuda/spgemm/plan_setup.cuh); shorter ones
/// by COUNT_GROUP lanes each (`kCountGroup`).
const LONG_ROW: usize = 256;
const COUNT_GROUP: usize = 8;
const BIN_BLOCK: u32 = 256;
const SCAN_BLOCK: u32 = 512;
const SCAN_CHUNK: usize = 4096;

/// The largest row (bound or nnz) the hash bins take: the last bin's bound.
pub const MAX_DENSE_FROM: usize = PLAN_BINS[PLAN_BINS.len() - 1].0 as usize;

/// The bin of a row with at most `bound` >= 1 entries: the dense bin above `dense_from`, else hash bin
/// ceil(log2(bound)) - 4, at least 0 (the host copy of `bin_of` in cuda/spgemm/plan_common.cuh).
pub fn bin_of(bound: usize, dense_from: usize) -> usize {
    if bound > dense_from {
        return DENSE_BIN;
    }
    let ceil_log2 = usize::BITS - bound.saturating_sub(1).leading_zeros();
    (ceil_log2 as usize).saturating_sub(4).min(DENSE_BIN)
}

/// Rows with more entries than this go to the dense bin, for B with `n` columns: n / 16, within 256..=8192.
/// A dense row walks its products once per tile of 32768 columns and scans each tile's bitmap, a cost that
/// grows with n; a hashed row pays probing and a sort that grow with its nnz. Measured on the H100
/// (NOTES.md, production SpGEMM, steps 2 and 3): email-Enron^2 (n = 36 692) 3.90 ms with 8192, 2.74 ms with 2048 or 512;
/// the power law (n = 262 144, 8 tiles) 1.20 ms with 8192, 1.24 ms with 2048, 2.34 ms with 512.
pub fn default_dense_from(n: usize) -> usize {
    (n / 16).clamp(256, MAX_DENSE_FROM)
}

/// Kernel arguments; mirrors `ts::SpgemmPlanParams` in cuda/spgemm/spgemm_params.cuh.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct SpgemmPlanParams {
    m: i32,
    k: i32,
    n: i32,
    dense_from: i32,
    a_row_offsets: u64,
    a_column_indices: u64,
    a_values: u64,
    b_row_offsets: u64,
    b_column_indices: u64,
    b_values: u64,
    row_products: u64,
    c_row_offsets: u64,
    c_column_indices: u64,
    c_values: u64,
    bin_rows: u64,
    bin_cursors: u64,
    counters: u64,
    tile_counts: u64,
    block_sums: u64,
    tiles: i32,
    pad: i32,
}
const _: () = assert!(
    std::mem::size_of::<SpgemmPlanParams>() == 144,
    "SpgemmPlanParams must match cuda/spgemm/spgemm_params.cuh"
);
// SAFETY: plain old data with the C layout the kernels expect.
unsafe impl cudarc::driver::DeviceRepr for SpgemmPlanParams {}

/// The shape, entry count and structure fingerprint of an operand, recorded by a plan to refuse operands of
/// another pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pattern {
    rows: usize,
    cols: usize,
    nnz: usize,
    /// The structure's fingerprint ([`DeviceCsr::pattern`]): two patterns of the same shape and count can still
    /// differ, and the numeric phase would then skip rows the plan found empty without a word. None in the
    /// one-shot [`spgemm`]'s plan, which is never reused (the fingerprint costs a download of the structure).
    hash: Option<u64>,
}

impl Pattern {
    fn of(gpu: &Gpu, a: &DeviceCsr<f32>, fingerprint: bool) -> Result<Self> {
        let hash = if fingerprint { Some(a.pattern(gpu)?) } else { None };
        Ok(Pattern { rows: a.rows(), cols: a.cols(), nnz: a.nnz(), hash })
    }
}

/// The symbolic phase of C = A * B, reusable for new values of A and B on the same patterns: C's row pointer,
/// the rows binned by their nnz, and the dense bin's per-tile counts.
pub struct SpgemmPlan {
    a: Pattern,
    b: Pattern,
    nnz: usize,
    products: u64,
    dense_from: usize,
    symbolic_bins: [usize; BIN_SLOTS],
    numeric_bins: [usize; BIN_SLOTS],
    tiles: usize,
    /// (m + 1) C's row pointer.
    c_row_offsets: CudaSlice<i32>,
    /// (m) products per row; for rows of the dense bin, their slot in `tile_counts`.
    row_products: CudaSlice<i32>,
    /// (m) rows grouped by numeric bin (by symbolic bin during the symbolic phase).
    bin_rows: CudaSlice<i32>,
    bin_cursors: CudaSlice<i32>,
    counters: CudaSlice<u64>,
    /// (dense rows, tiles) nnz of each (row, column tile) of the symbolic dense bin.
    tile_counts: CudaSlice<i32>,
    block_sums: CudaSlice<i64>,
}

impl std::fmt::Debug for SpgemmPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpgemmPlan")
            .field("nnz", &self.nnz)
            .field("products", &self.products)
            .field("symbolic_bins", &self.symbolic_bins)
            .field("numeric_bins", &self.numeric_bins)
            .finish_non_exhaustive()
    }
}

/// C = A * B with the production SpGEMM: [`SpgemmPlan::new`] then the numeric phase, in one call. C's columns
/// ascend within each row; entries whose products cancel to 0 are kept (see the module docs).
pub fn spgemm(gpu: &Gpu, a: &DeviceCsr<f32>, b: &DeviceCsr<f32>) -> Result<DeviceCsr<f32>> {
    spgemm_with_dense_from(gpu, a, b, default_dense_from(b.cols()))
}

/// [`spgemm`] with the dense bin taking rows of more than `dense_from` entries ([`SpgemmPlan::with_dense_from`]).
pub fn spgemm_with_dense_from(
    gpu: &Gpu,
    a: &DeviceCsr<f32>,
    b: &DeviceCsr<f32>,
    dense_from: usize,
) -> Result<DeviceCsr<f32>> {
    let mut plan = SpgemmPlan::make(gpu, a, b, dense_from, false)?;
    let mut columns = alloc_uninit::<i32>(gpu, plan.nnz, "allocating C's column indices")?;
    let mut values = alloc_uninit::<f32>(gpu, plan.nnz, "allocating C's values")?;
    // The plan was made from these very operands, so no pattern check (and no wait for its flags) is needed.
    plan.launch_numeric(gpu, a, b, &mut columns, &mut values)?;
    let (m, n, nnz) = (a.rows(), b.cols(), plan.nnz);
    Ok(DeviceCsr::from_device_parts(m, n, nnz, plan.c_row_offsets, columns, values))
}

impl SpgemmPlan {
    /// The symbolic phase of C = A * B: C's row pointer and the numeric phase's bins, and a fingerprint of A's
    /// and B's structure (read back once per matrix) that the numeric phase checks its operands against. Waits
    /// for the device twice. Errors: [`Error::ShapeMismatch`], [`Error::TooLarge`] when nnz(C) exceeds i32::MAX,
    /// [`Error::OutOfDeviceMemory`].
    pub fn new(gpu: &Gpu, a: &DeviceCsr<f32>, b: &DeviceCsr<f32>) -> Result<Self> {
        Self::with_dense_from(gpu, a, b, default_dense_from(b.cols()))
    }

    /// [`SpgemmPlan::new`] with rows of more than `dense_from` entries (1..=[`MAX_DENSE_FROM`]) in the dense
    /// bin: for measuring where dense column tiles beat hash tables. [`Error::InvalidConfig`] outside that range.
    pub fn with_dense_from(gpu: &Gpu, a: &DeviceCsr<f32>, b: &DeviceCsr<f32>, dense_from: usize) -> Result<Self> {
        Self::make(gpu, a, b, dense_from, true)
    }

    /// The symbolic phase, with the operands' fingerprints for reuse (`fingerprint`) or without (one shot).
    fn make(gpu: &Gpu, a: &DeviceCsr<f32>, b: &DeviceCsr<f32>, dense_from: usize, fingerprint: bool) -> Result<Self> {
        gpu.refuse_while_recording("the SpGEMM's symbolic phase (it waits for the device)")?;
        if !(1..=MAX_DENSE_FROM).contains(&dense_from) {
            return Err(Error::InvalidConfig {
                config: format!("dense_from = {dense_from}"),
                rule: format!("the dense bin takes rows past 1..={MAX_DENSE_FROM} entries"),
            });
        }
        check_shapes(gpu, a, b)?;
        let (m, n) = (a.rows(), b.cols());
        // The setup kernels' grid-stride loops step an int row by up to a grid's worth of row groups.
        if m > i32::MAX as usize - (1 << 20) {
            return Err(Error::TooLarge(format!(
                "{m} rows: the SpGEMM plan counts rows in 32 bits, with 2^20 to spare"
            )));
        }
        let scan_blocks = (m + 1).div_ceil(SCAN_CHUNK);
        let mut plan = SpgemmPlan {
            a: Pattern::of(gpu, a, fingerprint)?,
            b: Pattern::of(gpu, b, fingerprint)?,
            nnz: 0,
            products: 0,
            dense_from,
            symbolic_bins: [0; BIN_SLOTS],
            numeric_bins: [0; BIN_SLOTS],
            tiles: n.div_ceil(DENSE_TILE).max(1),
            c_row_offsets: alloc_zeroed(gpu, m + 1, "allocating C's row pointer")?,
            row_products: alloc_uninit(gpu, m, "allocating the SpGEMM row products")?,
            bin_rows: alloc_uninit(gpu, m, "allocating the SpGEMM bins")?,
            bin_cursors: alloc_zeroed(gpu, BIN_SLOTS, "allocating the SpGEMM bin cursors")?,
            counters: alloc_zeroed(gpu, COUNTERS, "allocating the SpGEMM counters")?,
            tile_counts: alloc_uninit(gpu, 1, "allocating the SpGEMM tile counts")?,
            block_sums: alloc_uninit(gpu, scan_blocks, "allocating the SpGEMM scan scratch")?,
        };
        if m == 0 {
            return Ok(plan);
        }
        let stream = gpu.stream().clone();
        // The bookkeeping kernels run on the main stream, without dynamic shared memory.
        let main = |params: &SpgemmPlanParams, name: &str, grid_dim, block, args| {
            launch(gpu, &stream, params, name, grid_dim, block, 0, args)
        };
        // The kernels' arguments change only when the dense bin's tile counts are allocated (below).
        let mut params = plan.params(gpu, a, b, None);

        // Products per row and the symbolic bins.
        // As many blocks as fit on the device at once (8 of 256 threads per SM), striding over the rows: every
        // block adds its bin histogram to the same dozen counters, and a grid of one block per 32 rows made those
        // atomics the kernel's cost (40 us for the 262 144-row power law on the H100, NOTES.md).
        let rows_per_block = COUNT_BLOCK as usize / COUNT_GROUP;
        let count_grid = m.div_ceil(rows_per_block).min(gpu.info().sm_count.max(1) * 8);
        main(&params, "spgemm_plan_count", grid(count_grid), COUNT_BLOCK, &[])?;
        if a.nnz() > LONG_ROW {
            // The rows the count kernel listed as long (this kernel reads how many from the counters; often none).
            let long_grid = grid(gpu.info().sm_count.max(1) * 2);
            main(&params, "spgemm_plan_count_long", long_grid, COUNT_BLOCK, &[])?;
        }
        let counters = plan.read_counters(gpu)?;
        plan.products = counters[COUNTER_PRODUCTS];
        for (bin, size) in plan.symbolic_bins.iter_mut().enumerate() {
            *size = counters[COUNTER_SYMBOLIC_BINS + bin] as usize;
        }
        if plan.symbolic_bins.iter().any(|&s| s > 0) {
            main(&params, "spgemm_plan_bin_rows", grid(m.div_ceil(BIN_BLOCK as usize)), BIN_BLOCK, &[0])?;
        }
        let dense_rows = plan.symbolic_bins[DENSE_BIN];
        if dense_rows > 0 {
            plan.tile_counts = alloc_uninit(gpu, dense_rows * plan.tiles, "allocating the SpGEMM tile counts")?;
            params = plan.params(gpu, a, b, None);
        }

        // Each row's nnz.
        launch_bins(gpu, &params, Phase::Symbolic, &plan.symbolic_bins, plan.tiles)?;

        // C's row pointer, the numeric bins and nnz(C).
        main(&params, "spgemm_plan_scan_reduce", grid(scan_blocks), SCAN_BLOCK, &[])?;
        main(&params, "spgemm_plan_scan_apply", grid(scan_blocks), SCAN_BLOCK, &[])?;
        let counters = plan.read_counters(gpu)?;
        let nnz = counters[COUNTER_NNZ];
        if nnz > i32::MAX as u64 {
            return Err(Error::TooLarge(format!(
                "A * B has {nnz} entries, past the 32-bit row pointer of C ({})",
                i32::MAX
            )));
        }
        plan.nnz = nnz as usize;
        for (bin, size) in plan.numeric_bins.iter_mut().enumerate() {
            *size = counters[COUNTER_NUMERIC_BINS + bin] as usize;
        }
        stream.memset_zeros(&mut plan.bin_cursors).map_err(Error::driver("zeroing the SpGEMM bin cursors", 0))?;
        if plan.nnz > 0 {
            main(&params, "spgemm_plan_bin_rows", grid(m.div_ceil(BIN_BLOCK as usize)), BIN_BLOCK, &[1])?;
        }
        Ok(plan)
    }

    /// nnz(C).
    pub fn nnz(&self) -> usize {
        self.nnz
    }

    /// Products a_ik * b_kj of A * B (twice this is the multiply-add flop count).
    pub fn products(&self) -> u64 {
        self.products
    }

    /// Rows per bin of the numeric phase: the hash bins of [`PLAN_BINS`], then the dense bin. Rows with no
    /// entry are in none.
    pub fn numeric_bins(&self) -> &[usize] {
        &self.numeric_bins
    }

    /// Rows per bin of the symbolic phase (by min(products, n)); rows with at most one product are in none.
    pub fn symbolic_bins(&self) -> &[usize] {
        &self.symbolic_bins
    }

    /// C = A * B for A and B with the patterns this plan was made for (their values may differ), into a new
    /// matrix. [`Error::PatternMismatch`] for operands of another pattern: the check reads back each operand's
    /// row pointer and column indices once (the first time that matrix meets a plan) and compares fingerprints.
    pub fn numeric(&mut self, gpu: &Gpu, a: &DeviceCsr<f32>, b: &DeviceCsr<f32>) -> Result<DeviceCsr<f32>> {
        self.check_gpu(gpu, a, b)?;
        gpu.refuse_while_recording("the SpGEMM's numeric phase (it checks its flags on the host)")?;
        self.check_pattern(gpu, a, b)?;
        let row_offsets =
            gpu.stream().clone_dtod(&self.c_row_offsets).map_err(Error::driver("copying C's row pointer", 0))?;
        let mut columns = alloc_uninit::<i32>(gpu, self.nnz, "allocating C's column indices")?;
        let mut values = alloc_uninit::<f32>(gpu, self.nnz, "allocating C's values")?;
        self.launch_checked(gpu, a, b, &mut columns, &mut values)?;
        Ok(DeviceCsr::from_device_parts(self.a.rows, self.b.cols, self.nnz, row_offsets, columns, values))
    }

    /// C = A * B into `c`, which must have C's shape and nnz (a matrix this plan produced, say): its row pointer,
    /// column indices and values are overwritten. [`Error::PatternMismatch`] for operands of another pattern.
    pub fn numeric_into(
        &mut self,
        gpu: &Gpu,
        a: &DeviceCsr<f32>,
        b: &DeviceCsr<f32>,
        c: &mut DeviceCsr<f32>,
    ) -> Result<()> {
        self.check_gpu(gpu, a, b)?;
        c.check_gpu(gpu, "C")?;
        gpu.refuse_while_recording("the SpGEMM's numeric phase (it checks its flags on the host)")?;
        self.check_pattern(gpu, a, b)?;
        if (c.rows(), c.cols(), c.nnz()) != (self.a.rows, self.b.cols, self.nnz) {
            return Err(Error::ShapeMismatch(format!(
                "C is {} x {} with {} entries, the plan's product is {} x {} with {}",
                c.rows(),
                c.cols(),
                c.nnz(),
                self.a.rows,
                self.b.cols,
                self.nnz
            )));
        }
        gpu.stream()
            .memcpy_dtod(&self.c_row_offsets, &mut c.row_offsets)
            .map_err(Error::driver("copying C's row pointer", 0))?;
        c.forget_derived();
        self.launch_checked(gpu, a, b, &mut c.column_indices, &mut c.values)
    }

    /// [`Error::WrongGpu`] unless the plan, A and B are all `gpu`'s.
    fn check_gpu(&self, gpu: &Gpu, a: &DeviceCsr<f32>, b: &DeviceCsr<f32>) -> Result<()> {
        gpu.check_owns("the SpGEMM plan", &self.c_row_offsets)?;
        a.check_gpu(gpu, "A")?;
        b.check_gpu(gpu, "B")
    }

    fn check_pattern(&self, gpu: &Gpu, a: &DeviceCsr<f32>, b: &DeviceCsr<f32>) -> Result<()> {
        let (pa, pb) = (Pattern::of(gpu, a, true)?, Pattern::of(gpu, b, true)?);
        let shape = |p: &Pattern| (p.rows, p.cols, p.nnz);
        if shape(&pa) != shape(&self.a) || shape(&pb) != shape(&self.b) {
            return Err(Error::PatternMismatch(format!(
                "the plan is for A {} x {} with {} entries and B {} x {} with {}, got A {} x {} with {} and B {} x {} \
                 with {}",
                self.a.rows,
                self.a.cols,
                self.a.nnz,
                self.b.rows,
                self.b.cols,
                self.b.nnz,
                pa.rows,
                pa.cols,
                pa.nnz,
                pb.rows,
                pb.cols,
                pb.nnz
            )));
        }
        if pa.hash != self.a.hash || pb.hash != self.b.hash {
            let which = if pa.hash != self.a.hash { "A" } else { "B" };
            return Err(Error::PatternMismatch(format!(
                "{which} has the plan's shape and entry count but other rows or columns: make a plan for it"
            )));
        }
        Ok(())
    }

    /// The numeric phase, then one wait for its flags: a row that does not fit its table, or whose nnz differs
    /// from the plan's, was written nowhere and makes this an [`Error::PatternMismatch`].
    fn launch_checked(
        &mut self,
        gpu: &Gpu,
        a: &DeviceCsr<f32>,
        b: &DeviceCsr<f32>,
        columns: &mut CudaSlice<i32>,
        values: &mut CudaSlice<f32>,
    ) -> Result<()> {
        self.launch_numeric(gpu, a, b, columns, values)?;
        let flags = self.read_counters(gpu)?[COUNTER_FLAGS];
        if flags != 0 {
            return Err(Error::PatternMismatch(format!(
                "A or B does not have the pattern the plan was made for (numeric flags {flags:#x}: 1 = a row \
                 overfilled its table, 2 = a row's nnz changed, 4 = a column tile's nnz changed); C is incomplete"
            )));
        }
        Ok(())
    }

    /// Queues the numeric kernels, writing C's columns and values (each at least max(nnz, 1) long).
    fn launch_numeric(
        &mut self,
        gpu: &Gpu,
        a: &DeviceCsr<f32>,
        b: &DeviceCsr<f32>,
        columns: &mut CudaSlice<i32>,
        values: &mut CudaSlice<f32>,
    ) -> Result<()> {
        debug_assert!(columns.len() >= self.nnz && values.len() >= self.nnz);
        gpu.stream()
            .memset_zeros(&mut self.counters.slice_mut(COUNTER_FLAGS..COUNTER_FLAGS + 1))
            .map_err(Error::driver("zeroing the SpGEMM flags", 0))?;
        if self.nnz == 0 {
            return Ok(());
        }
        let params = self.params(gpu, a, b, Some((columns, values)));
        launch_bins(gpu, &params, Phase::Numeric, &self.numeric_bins, self.tiles)
    }

    /// The kernels' arguments; `c` = C's column indices and values for the numeric phase.
    fn params(
        &self,
        gpu: &Gpu,
        a: &DeviceCsr<f32>,
        b: &DeviceCsr<f32>,
        c: Option<(&mut CudaSlice<i32>, &mut CudaSlice<f32>)>,
    ) -> SpgemmPlanParams {
        let s = gpu.stream();
        // Event tracking is off (`Gpu::new`), so the guards cudarc hands out with each pointer record nothing:
        // they are dropped at once and the pointers taken as plain addresses.
        let (c_column_indices, c_values) = match c {
            Some((columns, values)) => (columns.device_ptr_mut(s).0, values.device_ptr_mut(s).0),
            None => (0, 0),
        };
        SpgemmPlanParams {
            m: self.a.rows as i32,
            k: self.a.cols as i32,
            n: self.b.cols as i32,
            dense_from: self.dense_from as i32,
            a_row_offsets: a.row_offsets.device_ptr(s).0,
            a_column_indices: a.column_indices.device_ptr(s).0,
            a_values: a.values.device_ptr(s).0,
            b_row_offsets: b.row_offsets.device_ptr(s).0,
            b_column_indices: b.column_indices.device_ptr(s).0,
            b_values: b.values.device_ptr(s).0,
            row_products: self.row_products.device_ptr(s).0,
            c_row_offsets: self.c_row_offsets.device_ptr(s).0,
            c_column_indices,
            c_values,
            bin_rows: self.bin_rows.device_ptr(s).0,
            bin_cursors: self.bin_cursors.device_ptr(s).0,
            counters: self.counters.device_ptr(s).0,
            tile_counts: self.tile_counts.device_ptr(s).0,
            block_sums: self.block_sums.device_ptr(s).0,
            tiles: self.tiles as i32,
            pad: 0,
        }
    }

    fn read_counters(&self, gpu: &Gpu) -> Result<Vec<u64>> {
        gpu.stream().clone_dtoh(&self.counters).map_err(Error::driver("reading back the SpGEMM counters", 0))
    }
}

/// The two phases' bin kernels.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Symbolic,
    Numeric,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Phase::Symbolic => "symbolic",
            Phase::Numeric => "numeric",
        }
    }
}

/// Queues one phase's kernel for every non-empty bin (`sizes`: rows per bin, their rows in bin order in the
/// bins' row list). The bins are independent, so each runs on its own side stream, the heaviest first. A hash
/// table slot holds a key (symbolic) or a key and a value (numeric); the numeric dense bin keeps a tile of
/// floats and its bitmap in dynamic shared memory, the symbolic one only a static bitmap.
fn launch_bins(
    gpu: &Gpu,
    params: &SpgemmPlanParams,
    phase: Phase,
    sizes: &[usize; BIN_SLOTS],
    tiles: usize,
) -> Result<()> {
    let begins = bin_begins(sizes);
    let mut side = SideStreams::fork(gpu, BIN_SLOTS)?;
    if sizes[DENSE_BIN] > 0 {
        let smem = if phase == Phase::Numeric { DENSE_TILE * std::mem::size_of::<f32>() + DENSE_TILE / 8 } else { 0 };
        let name = format!("spgemm_{}_dense", phase.name());
        let cfg = dense_grid(sizes[DENSE_BIN], tiles);
        launch(gpu, side.get(DENSE_BIN)?, params, &name, cfg, DENSE_BLOCK, smem, &[begins[DENSE_BIN] as i32])?;
    }
    let slot_bytes = match phase {
        Phase::Symbolic => std::mem::size_of::<i32>(),
        Phase::Numeric => std::mem::size_of::<i32>() + std::mem::size_of::<f32>(),
    };
    for (bin, &(bound, threads, block)) in PLAN_BINS.iter().enumerate().rev() {
        let size = sizes[bin];
        if size > 0 {
            let rows_per_block = (block / threads) as usize;
            let smem = rows_per_block * 2 * bound as usize * slot_bytes;
            let name = bin_kernel_name(phase.name(), bin);
            let args = [begins[bin] as i32, size as i32];
            launch(gpu, side.get(bin)?, params, &name, grid(size.div_ceil(rows_per_block)), block, smem, &args)?;
        }
    }
    side.join()
}

/// The kernel of hash bin `bin` of a phase ("symbolic" or "numeric"); the only place that builds these names.
pub fn bin_kernel_name(phase: &str, bin: usize) -> String {
    format!("spgemm_{phase}_bin{bin}")
}

/// Where each bin's rows start in the bins' row list.
fn bin_begins(sizes: &[usize; BIN_SLOTS]) -> [usize; BIN_SLOTS] {
    let mut begins = [0; BIN_SLOTS];
    for bin in 1..BIN_SLOTS {
        begins[bin] = begins[bin - 1] + sizes[bin - 1];
    }
    begins
}

fn grid(blocks: usize) -> (u32, u32, u32) {
    (blocks.max(1) as u32, 1, 1)
}

/// The dense bin's grid: one block per (row, column tile), tiles folded into at most 65535 along y (the
/// kernels stride over the rest).
fn dense_grid(rows: usize, tiles: usize) -> (u32, u32, u32) {
    (rows as u32, tiles.min(65535) as u32, 1)
}

/// Launches one kernel of the family with the plan's arguments, then the ints `args` (none for the count and
/// scan kernels; the phase for the binning kernel; the bin's start in the row list for a dense kernel, and its
/// size for a hash bin kernel), and `smem` bytes of dynamic shared memory (raising the limit past 48 KB).
#[allow(clippy::too_many_arguments)]
fn launch(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    params: &SpgemmPlanParams,
    name: &str,
    grid_dim: (u32, u32, u32),
    block: u32,
    smem: usize,
    args: &[i32],
) -> Result<()> {
    let function = gpu.function(Family::Spgemm, name)?;
    if smem > gpu.info().shared_mem_per_block_optin {
        return Err(Error::Unsupported {
            config: name.to_string(),
            reason: format!(
                "needs {smem} bytes of shared memory per block; this device allows {}",
                gpu.info().shared_mem_per_block_optin
            ),
        });
    }
    if smem > 48 * 1024 {
        function
            .set_attribute(FuncAttr::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem as i32)
            .map_err(Error::driver("raising a kernel's shared-memory limit", 0))?;
    }
    let cfg = LaunchConfig { grid_dim, block_dim: (block, 1, 1), shared_mem_bytes: smem as u32 };
    let mut builder = stream.launch_builder(&function);
    builder.arg(params);
    for arg in args {
        builder.arg(arg);
    }
    // SAFETY: A and B were validated at upload and their shapes checked, so every index the kernels follow is
    // in bounds; the plan's buffers have the sizes the kernels assume (m, m + 1, bins, counters, tiles x dense
    // rows, scan blocks) and C's arrays nnz(C) entries, which the kernels never pass (a row is written only when
    // its count equals its range in the row pointer); each bin's grid covers exactly its rows; the dynamic
    // shared memory matches the kernel's layout. A side stream starts after the main stream's work so far and
    // the main stream waits for it before anything else touches these buffers (`SideStreams`); every buffer
    // outlives the launch.
    unsafe { builder.launch(cfg) }.map_err(Error::driver("launching a SpGEMM kernel", 0))?;
    Ok(())
}
