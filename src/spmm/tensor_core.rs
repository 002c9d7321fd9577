//! Tensor-core SpMM for f16 and bf16 (fp32 accumulation): A is cut into windows of 16 rows; each window's
//! columns are condensed (the sorted union of the columns its rows store) and cut into k-blocks of 16 slots;
//! each k-block is a dense 16 x 16 block of A (zeros where a row does not store a slot's column) that one
//! `mma.sync.m16n8k16` multiplies by the 16 rows of B the slots name (cuda/spmm/tensor_core.cuh).
//!
//! The blocks are built on the host from one download of A the first time a matrix is multiplied this way, and
//! kept with the matrix. A k-block whose B tile holds an Inf or NaN is computed by exact scalar FMAs over the
//! stored entries (the padding zeros would turn Inf into NaN otherwise).

use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg};

use crate::csr::{upload_slice, DeviceCsr};
use crate::dense::DeviceDense;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::kernels::{Family, KERNELS_BUILT};
use crate::scalar::{DType, Scalar};

/// Rows per window (the mma's M) and slots per k-block (its K).
pub const WINDOW: usize = 16;
/// Warps per block (`ts::kTcWarps`).
const WARPS: usize = 4;

/// A tensor-core SpMM variant: the columns of C each warp owns, in tiles of 8 (4: 32 columns, 8: 64).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TensorCoreConfig {
    pub dtype: DType,
    /// n8 tiles per warp: 4 or 8.
    pub tiles_n: u32,
}

impl TensorCoreConfig {
    /// The compiled variants.
    pub fn all(dtype: DType) -> Vec<TensorCoreConfig> {
        match dtype {
            DType::F16 | DType::Bf16 => [4, 8].into_iter().map(|tiles_n| TensorCoreConfig { dtype, tiles_n }).collect(),
            _ => Vec::new(),
        }
    }

    /// The exported kernel name, e.g. `spmm_tc_f16_n4`.
    pub fn kernel_name(&self) -> String {
        format!("spmm_tc_{}_n{}", self.dtype, self.tiles_n)
    }

    /// Columns of C per warp.
    pub fn columns_per_warp(&self) -> usize {
        8 * self.tiles_n as usize
    }
}

impl std::str::FromStr for TensorCoreConfig {
    type Err = String;
    /// Parses a kernel name, e.g. `spmm_tc_bf16_n8` (or without the `spmm_` prefix).
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let rest = s.strip_prefix("spmm_").unwrap_or(s);
        let rest =
            rest.strip_prefix("tc_").ok_or_else(|| format!("'{s}' is not a tensor-core kernel (tc_<dtype>_n<4|8>)"))?;
        let (dtype, tiles) = rest.rsplit_once("_n").ok_or_else(|| format!("'{s}': expected tc_<dtype>_n<tiles>"))?;
        let dtype: DType = dtype.parse().map_err(|e| format!("'{s}': {e}"))?;
        let tiles_n: u32 = tiles.parse().map_err(|_| format!("'{s}': tiles '{tiles}' is not a number"))?;
        Ok(TensorCoreConfig { dtype, tiles_n })
    }
}

impl std::fmt::Display for TensorCoreConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.kernel_name())
    }
}

/// The number of k-blocks of a CSR matrix of `cols` columns: per window of 16 rows, its distinct columns / 16
/// rounded up (the selection needs it at upload). O(nnz) with a stamp per column when the columns are not
/// many more than the entries, else a sort per window (so a matrix of 2^31 columns does not cost 8 GB here).
pub fn count_blocks(cols: usize, indptr: &[usize], indices: &[usize]) -> usize {
    let rows = indptr.len().saturating_sub(1);
    let windows = rows.div_ceil(WINDOW);
    let window = |w: usize| &indices[indptr[w * WINDOW]..indptr[((w + 1) * WINDOW).min(rows)]];
    if cols > 8 * indices.len() + 4096 {
        let mut union = Vec::new();
        return (0..windows)
            .map(|w| {
                union.clear();
                union.extend_from_slice(window(w));
                union.sort_unstable();
                union.dedup();
                union.len().div_ceil(WINDOW)
            })
            .sum();
    }
    let mut stamp = vec![u32::MAX; cols];
    let mut blocks = 0;
    for w in 0..windows {
        let mut distinct = 0usize;
        for &c in window(w) {
            if stamp[c] != w as u32 {
                stamp[c] = w as u32;
                distinct += 1;
            }
        }
        blocks += distinct.div_ceil(WINDOW);
    }
    blocks
}

/// The tensor-core variant for an f16/bf16 product C (m x n) = A * B whose A has `nnz` entries in `blocks`
/// k-blocks ([`count_blocks`]), or None where the CUDA-core tiles are faster. Pure; each branch from the H100
/// run in NOTES.md ("SpMM step 6: tensor cores", four warps per window):
/// - blocks at least a quarter full (f16; a fifth for bf16, whose CUDA-core tiles are slower): uniform 4096^2 at
///   50% (half full) wins at every n (f16 n = 128: 0.077 vs 0.143 ms; n = 4096: 1.97 vs 3.95 ms); at 80%
///   (20.5% full) bf16 wins (n = 4096: 1.91 vs 2.02 ms) and f16 loses (1.92 vs 1.80 ms); at 90% (12% full)
///   both lose (f16 n = 128: 0.064 vs 0.037 ms);
/// - or a small C (m * n < 2^19, where the tiles leave most of the GPU idle and the tensor cores' four warps
///   per window do not): the pruned 384 x 384 and 384 x 1536 weights at n = 256 and 1024 and 1536 x 384 at
///   n = 256 win at 7-30% full (384 x 1536 at 98%, n = 256: 0.008 vs 0.013 ms), 1536 x 384 at n = 1024 does not
///   (90%: 0.024 vs 0.021 ms);
/// - 64 columns per warp when n > 32 and that still makes at least 128 blocks (one per SM), else 32 (384 x 1536,
///   n = 256, 96 blocks: 0.014 vs 0.016 ms with 32; uniform 50%, n = 128, 512 blocks: 0.077 vs 0.087 ms with 64).
pub fn select_tensor_core(dtype: DType, m: usize, n: usize, nnz: usize, blocks: usize) -> Option<TensorCoreConfig> {
    let min_fill = match dtype {
        DType::F16 => 0.25,
        DType::Bf16 => 0.2,
        _ => return None,
    };
    if n % 8 != 0 || n == 0 || blocks == 0 {
        return None;
    }
    let fill = nnz as f64 / (blocks * 256) as f64;
    let small = m.saturating_mul(n) < 1 << 19;
    if fill < min_fill && !small {
        return None;
    }
    let windows = m.div_ceil(WINDOW);
    let tiles_n = if n > 32 && windows * n.div_ceil(64) >= 128 { 8 } else { 4 };
    Some(TensorCoreConfig { dtype, tiles_n })
}

/// The blocks of A, host side (see the module documentation).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct HostBlocks {
    /// (windows + 1) first k-block of each window.
    pub(crate) window_blocks: Vec<i32>,
    /// (16 per k-block) the column of each slot, -1 for padding.
    pub(crate) block_columns: Vec<i32>,
    /// (256 per k-block) the block's values (element bits) in mma A-fragment order: lane l = 4 g + t holds
    /// rows g and g + 8, slots 2t, 2t + 1, 2t + 8, 2t + 9, as [ (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1),
    /// (g, 2t+8), (g, 2t+9), (g+8, 2t+8), (g+8, 2t+9) ].
    pub(crate) block_values: Vec<u16>,
    /// (16 per k-block) bit j of row r: A stores (r, slot j).
    pub(crate) block_masks: Vec<u16>,
}

/// Where (row r of the window, slot j of the block) sits in a block's 256 values.
pub(crate) fn fragment_index(r: usize, j: usize) -> usize {
    let lane = (r % 8) * 4 + (j % 8) / 2;
    lane * 8 + if j >= 8 { 4 } else { 0 } + if r >= 8 { 2 } else { 0 } + (j & 1)
}

impl HostBlocks {
    /// Builds the blocks of a valid CSR matrix (sorted, in-range, unique columns per row). Every slot holds at
    /// least one stored entry (only a window's last k-block has padding slots), so a k-block (608 bytes: values,
    /// columns, masks) holds at least 16 entries: at most about 38 bytes per entry beside the CSR's 6.
    pub(crate) fn build(indptr: &[usize], indices: &[usize], values: &[u16]) -> HostBlocks {
        let rows = indptr.len() - 1;
        let windows = rows.div_ceil(WINDOW);
        let mut out = HostBlocks {
            window_blocks: Vec::with_capacity(windows + 1),
            block_columns: Vec::new(),
            block_values: Vec::new(),
            block_masks: Vec::new(),
        };
        let mut union: Vec<usize> = Vec::new();
        let mut blocks = 0usize;
        for w in 0..windows {
            out.window_blocks.push(blocks as i32);
            let (r0, r1) = (w * WINDOW, ((w + 1) * WINDOW).min(rows));
            union.clear();
            union.extend_from_slice(&indices[indptr[r0]..indptr[r1]]);
            union.sort_unstable();
            union.dedup();
            let count = union.len().div_ceil(WINDOW);
            let first = blocks;
            blocks += count;
            out.block_columns.extend(union.iter().map(|&c| c as i32));
            out.block_columns.resize(blocks * WINDOW, -1);
            out.block_values.resize(blocks * 256, 0);
            out.block_masks.resize(blocks * WINDOW, 0);
            for r in r0..r1 {
                let lr = r - r0;
                for e in indptr[r]..indptr[r + 1] {
                    let p = union.binary_search(&indices[e]).expect("the window's union holds its columns");
                    let (b, j) = (first + p / WINDOW, p % WINDOW);
                    out.block_values[b * 256 + fragment_index(lr, j)] = values[e];
                    out.block_masks[b * WINDOW + lr] |= 1 << j;
                }
            }
        }
        out.window_blocks.push(blocks as i32);
        out
    }

    pub(crate) fn num_blocks(&self) -> usize {
        self.block_columns.len() / WINDOW
    }
}

/// The blocks on the device, kept with the matrix ([`DeviceCsr`]'s `tensor_core` cache).
pub(crate) struct DeviceBlocks {
    window_blocks: CudaSlice<i32>,
    block_columns: CudaSlice<i32>,
    block_values: CudaSlice<u16>,
    block_masks: CudaSlice<u16>,
    num_windows: usize,
    num_blocks: usize,
}

impl DeviceBlocks {
    /// Downloads A's indices and values once and builds and uploads its blocks.
    pub(crate) fn build<T: Scalar>(gpu: &Gpu, a: &DeviceCsr<T>) -> Result<DeviceBlocks> {
        let host = a.download(gpu)?;
        let indptr = host.proper_indptr();
        let values: &[u16] = bytemuck::cast_slice(host.data());
        let blocks = HostBlocks::build(&indptr, host.indices(), values);
        if blocks.block_columns.len() > i32::MAX as usize {
            return Err(Error::TooLarge(format!(
                "the tensor-core blocks of this matrix need {} k-blocks",
                blocks.num_blocks()
            )));
        }
        Ok(DeviceBlocks {
            window_blocks: upload_slice(gpu, &blocks.window_blocks, "uploading the tensor-core windows")?,
            block_columns: upload_slice(gpu, &blocks.block_columns, "uploading the tensor-core block columns")?,
            block_values: upload_slice(gpu, &blocks.block_values, "uploading the tensor-core block values")?,
            block_masks: upload_slice(gpu, &blocks.block_masks, "uploading the tensor-core block masks")?,
            num_windows: blocks.window_blocks.len() - 1,
            num_blocks: blocks.num_blocks(),
        })
    }

    /// Stored entries / (k-blocks * 256): how full the blocks are.
    pub(crate) fn fill(&self, nnz: usize) -> f64 {
        nnz as f64 / (self.num_blocks.max(1) * 256) as f64
    }
}

/// How full A's tensor-core blocks are: stored entries / (k-blocks * 256); builds the blocks on first use.
pub fn block_fill<T: Scalar>(gpu: &Gpu, a: &DeviceCsr<T>) -> Result<f64> {
    Ok(a.tensor_core_blocks(gpu)?.fill(a.nnz()))
}

/// Kernel arguments; mirrors `ts::SpmmTcParams` in cuda/common/params.cuh.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct SpmmTcParams {
    m: i32,
    n: i32,
    num_windows: i32,
    pad: i32,
    window_blocks: u64,
    block_columns: u64,
    block_values: u64,
    block_masks: u64,
    dense: u64,
    out: u64,
}
const _: () = assert!(std::mem::size_of::<SpmmTcParams>() == 64, "SpmmTcParams must match cuda/common/params.cuh");
// SAFETY: plain old data with the C layout the kernel expects.
unsafe impl cudarc::driver::DeviceRepr for SpmmTcParams {}

/// Checks that `config` can run C (m x n) = A * B for this element type and n. Pure: no device needed.
pub fn check_tensor_core(config: &TensorCoreConfig, dtype: DType, m: usize, n: usize) -> Result<()> {
    let name = config.kernel_name();
    super::check_dtype(&name, config.dtype, dtype)?;
    if !matches!(dtype, DType::F16 | DType::Bf16) {
        return Err(Error::Unsupported { config: name, reason: "tensor-core SpMM is for f16 and bf16".into() });
    }
    if !matches!(config.tiles_n, 4 | 8) {
        return Err(Error::InvalidConfig { config: name, rule: "tiles_n must be 4 or 8".into() });
    }
    if !KERNELS_BUILT {
        return Err(Error::KernelsNotBuilt);
    }
    if n % 8 != 0 {
        return Err(Error::Unsupported {
            config: name,
            reason: format!("n = {n} is not a multiple of 8 (rows of B are gathered in 16-byte pieces)"),
        });
    }
    super::check_i32(m, n)?;
    if n.div_ceil(config.columns_per_warp()) > 65_535 {
        return Err(Error::TooLarge(format!("n = {n} needs more than 65535 column blocks")));
    }
    Ok(())
}

/// C = A * B on the tensor cores (f16 or bf16, fp32 accumulation). The first call on a matrix builds its blocks
/// (one download of A); later calls reuse them. Every element of C is written.
pub fn spmm_tensor_core<T: Scalar>(
    gpu: &Gpu,
    a: &DeviceCsr<T>,
    b: &DeviceDense<T>,
    c: &mut DeviceDense<T>,
    config: &TensorCoreConfig,
) -> Result<()> {
    super::check_shapes(a, b, c)?;
    let (m, n) = (a.rows(), b.cols());
    check_tensor_core(config, T::DTYPE, m, n)?;
    if m == 0 || n == 0 {
        return Ok(());
    }
    let blocks = a.tensor_core_blocks(gpu)?;
    let function = gpu.function(Family::Spmm, &config.kernel_name())?;
    let stream = gpu.stream();
    let (window_blocks, _g1) = blocks.window_blocks.device_ptr(stream);
    let (block_columns, _g2) = blocks.block_columns.device_ptr(stream);
    let (block_values, _g3) = blocks.block_values.device_ptr(stream);
    let (block_masks, _g4) = blocks.block_masks.device_ptr(stream);
    let (dense, _g5) = b.data.device_ptr(stream);
    let (out, _g6) = c.data.device_ptr_mut(stream);
    let params = SpmmTcParams {
        m: m as i32,
        n: n as i32,
        num_windows: blocks.num_windows as i32,
        pad: 0,
        window_blocks,
        block_columns,
        block_values,
        block_masks,
        dense,
        out,
    };
    let cfg = LaunchConfig {
        grid_dim: (blocks.num_windows as u32, n.div_ceil(config.columns_per_warp()) as u32, 1),
        block_dim: ((WARPS * 32) as u32, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: the shapes and the config were checked (B is k x n, C is m x n, n a multiple of 8 so 16-byte
    // pieces of B rows and 4-byte stores of C are aligned); the blocks were built from this matrix (the cache
    // lives in it and is dropped when its structure changes): every slot column is < k or -1 (never read), every
    // window's k-blocks lie in the block arrays, windows cover rows < ceil(m / 16) * 16 and rows >= m are not
    // stored; the grid has ceil(n / columns per warp) column slices, each starting below n.
    unsafe { stream.launch_builder(&function).arg(&params).launch(cfg) }
        .map_err(Error::driver("launching the tensor-core SpMM", 0))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_hold_every_entry_once_in_fragment_order() {
        // 37 rows (three windows, the last partial), 50 columns, uneven rows, an empty row, a row with 20 entries.
        let mut indptr = vec![0usize];
        let mut indices = Vec::new();
        let mut values = Vec::new();
        for r in 0..37usize {
            let len = match r {
                5 => 0,
                9 => 20,
                _ => (r * 7) % 6,
            };
            let mut cols: Vec<usize> = (0..len).map(|j| (r * 13 + j * 17) % 50).collect();
            cols.sort_unstable();
            cols.dedup();
            for c in cols {
                indices.push(c);
                values.push((r * 100 + c) as u16);
            }
            indptr.push(indices.len());
        }
        let b = HostBlocks::build(&indptr, &indices, &values);
        assert_eq!(b.window_blocks.len(), 4);
        // Decode every block back to (row, column, value) and compare with the CSR, entry for entry.
        let mut decoded = Vec::new();
        for w in 0..3 {
            let (first, last) = (b.window_blocks[w] as usize, b.window_blocks[w + 1] as usize);
            let cols = &b.block_columns[first * 16..last * 16];
            // The window's slots are its rows' sorted distinct columns, then -1 padding (fewer than 16).
            let real: Vec<i32> = cols.iter().copied().filter(|&c| c >= 0).collect();
            assert!(real.windows(2).all(|p| p[0] < p[1]));
            assert!(cols[real.len()..].iter().all(|&c| c == -1) && cols.len() - real.len() < 16);
            for blk in first..last {
                for r in 0..16 {
                    for j in 0..16 {
                        let v = b.block_values[blk * 256 + fragment_index(r, j)];
                        let stored = b.block_masks[blk * 16 + r] >> j & 1 == 1;
                        if stored {
                            decoded.push((w * 16 + r, b.block_columns[blk * 16 + j] as usize, v));
                        } else {
                            assert_eq!(v, 0, "an unstored slot must hold zero");
                        }
                    }
                }
            }
        }
        decoded.sort_unstable();
        let mut want: Vec<(usize, usize, u16)> = Vec::new();
        for r in 0..37 {
            for e in indptr[r]..indptr[r + 1] {
                want.push((r, indices[e], values[e]));
            }
        }
        assert_eq!(decoded, want);
        // fragment_index is a permutation of 0..256.
        let mut seen = [false; 256];
        for r in 0..16 {
            for j in 0..16 {
                assert!(!std::mem::replace(&mut seen[fragment_index(r, j)], true));
            }
        }
    }

    #[test]
    fn count_blocks_matches_the_built_blocks() {
        let a = crate::gen::power_law(300, 257, 20.0, 1.5, 3);
        let (indptr, indices) = (a.proper_indptr().to_vec(), a.indices().to_vec());
        let b = HostBlocks::build(&indptr, &indices, &vec![1u16; indices.len()]);
        assert_eq!(count_blocks(257, &indptr, &indices), b.num_blocks());
        assert_eq!(count_blocks(5, &[0], &[]), 0);
        // The sorting path (many more columns than entries) agrees.
        let wide: Vec<usize> = indices.iter().map(|&c| c * 1000).collect();
        assert_eq!(count_blocks(257_000, &indptr, &wide), b.num_blocks());
    }

    #[test]
    fn selection_follows_the_measurements() {
        let sel = |dtype, m: usize, n: usize, nnz: usize, blocks: usize| select_tensor_core(dtype, m, n, nnz, blocks);
        let tiles = |c: Option<TensorCoreConfig>| c.map(|c| c.tiles_n);
        // Uniform 4096^2 at 50%: 256 windows of 256 half-full blocks: 64 columns per warp at every n.
        let (nnz, blocks) = (8_388_608, 65_536);
        for n in [128, 256, 4096] {
            assert_eq!(tiles(sel(DType::F16, 4096, n, nnz, blocks)), Some(8), "n = {n}");
        }
        // Uniform 80% (20.5% full): bf16 yes, f16 no; 90% (12% full): neither.
        assert!(sel(DType::Bf16, 4096, 4096, 3_355_437, 64_000).is_some());
        assert_eq!(sel(DType::F16, 4096, 4096, 3_355_437, 64_000), None);
        assert_eq!(sel(DType::Bf16, 4096, 128, 1_677_702, 53_500), None);
        // Small C: the pruned weights, whatever the fill; 384 x 1536 at n = 256 makes 96 blocks of 64 columns:
        // 32 per warp.
        assert_eq!(tiles(sel(DType::F16, 384, 256, 11_796, 576)), Some(4));
        assert_eq!(tiles(sel(DType::F16, 384, 1024, 11_796, 576)), Some(8));
        assert_eq!(tiles(sel(DType::F16, 1536, 256, 11_796, 576)), Some(8));
        assert_eq!(sel(DType::F16, 1536, 1024, 58_982, 1_850), None);
        // n <= 32: 32 columns per warp.
        assert_eq!(tiles(sel(DType::F16, 4096, 32, nnz, blocks)), Some(4));
        // Not for f32, n not a multiple of 8, nnz = 0.
        assert_eq!(select_tensor_core(DType::F32, 4096, 128, nnz, blocks), None);
        assert_eq!(sel(DType::F16, 4096, 100, nnz, blocks), None);
        assert_eq!(sel(DType::F16, 10, 64, 0, 0), None);
    }

    #[test]
    fn names_round_trip() {
        for dtype in [DType::F16, DType::Bf16] {
            for c in TensorCoreConfig::all(dtype) {
                assert_eq!(c.kernel_name().parse::<TensorCoreConfig>().unwrap(), c);
            }
        }
        assert!("spmm_f16_s1d8_y4k8x64w8_u4_pred".parse::<TensorCoreConfig>().is_err());
    }

    #[test]
    fn configs_are_checked() {
        let c = TensorCoreConfig { dtype: DType::F16, tiles_n: 4 };
        assert!(matches!(check_tensor_core(&c, DType::F32, 10, 64), Err(Error::InvalidConfig { .. })));
        let f32c = TensorCoreConfig { dtype: DType::F32, tiles_n: 4 };
        assert!(matches!(check_tensor_core(&f32c, DType::F32, 10, 64), Err(Error::Unsupported { .. })));
        let bad = TensorCoreConfig { dtype: DType::F16, tiles_n: 3 };
        assert!(matches!(check_tensor_core(&bad, DType::F16, 10, 64), Err(Error::InvalidConfig { .. })));
        if KERNELS_BUILT {
            assert!(matches!(check_tensor_core(&c, DType::F16, 10, 60), Err(Error::Unsupported { .. })));
            assert!(check_tensor_core(&c, DType::F16, 10, 64).is_ok());
        }
    }
}
