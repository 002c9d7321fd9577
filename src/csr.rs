//! CSR matrices on the device, uploaded after validation, with row statistics and a longest-first row order
//! computed once at upload.

use std::sync::OnceLock;

use cudarc::driver::{CudaSlice, DeviceRepr};
use rayon::prelude::*;
use sprs::{CsMat, CsMatView};

use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::scalar::Scalar;

mod transpose;
pub use transpose::CsrTranspose;

/// Ways a CSR matrix can be malformed. Each is reported before a kernel reads the matrix: a host array's lengths and
/// sizes before it reaches the device; a large one's entries while it is copied (the copies are then freed).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CsrError {
    #[error("row pointer has length {got}, expected rows + 1 = {expected}")]
    IndptrLength { got: usize, expected: usize },
    #[error("row pointer must start at 0, starts at {0}")]
    IndptrStart(usize),
    #[error("row pointer decreases at row {row}: {start} > {end}")]
    IndptrNotMonotone { row: usize, start: usize, end: usize },
    #[error("row pointer ends at {end} but there are {indices} column indices and {values} values")]
    LengthMismatch { end: usize, indices: usize, values: usize },
    #[error("row {row}: column index {col} is out of range for {cols} columns")]
    ColumnOutOfRange { row: usize, col: usize, cols: usize },
    #[error("row {row}: column indices are not sorted ({prev} before {col})")]
    Unsorted { row: usize, prev: usize, col: usize },
    #[error("row {row}: duplicate column index {col}")]
    Duplicate { row: usize, col: usize },
    #[error("{what} = {value} exceeds i32::MAX ({}): the kernels use 32-bit indices", i32::MAX)]
    TooLarge { what: &'static str, value: usize },
    #[error("{got} new values for a matrix of {nnz} stored entries")]
    ValuesLength { got: usize, nnz: usize },
    #[error("{what} {index} is negative ({value}) in a device array")]
    Negative { what: &'static str, index: usize, value: i32 },
}

/// Checks that (indptr, indices, values) is a CSR matrix of shape rows x cols with sorted, unique, in-range
/// column indices, and that every size fits the kernels' 32-bit indices.
pub fn validate(
    rows: usize,
    cols: usize,
    indptr: &[usize],
    indices: &[usize],
    values_len: usize,
) -> Result<(), CsrError> {
    validate_sizes(rows, cols, indptr, indices, values_len)?;
    validate_entries(cols, indptr, indices)
}

/// [`validate`]'s checks of the lengths and sizes alone: constant time.
fn validate_sizes(
    rows: usize,
    cols: usize,
    indptr: &[usize],
    indices: &[usize],
    values_len: usize,
) -> Result<(), CsrError> {
    let fits =
        |what, value: usize| if value > i32::MAX as usize { Err(CsrError::TooLarge { what, value }) } else { Ok(()) };
    fits("rows", rows)?;
    fits("columns", cols)?;
    if indptr.len() != rows + 1 {
        return Err(CsrError::IndptrLength { got: indptr.len(), expected: rows + 1 });
    }
    if indptr[0] != 0 {
        return Err(CsrError::IndptrStart(indptr[0]));
    }
    let end = indptr[rows];
    if end != indices.len() || end != values_len {
        return Err(CsrError::LengthMismatch { end, indices: indices.len(), values: values_len });
    }
    fits("nonzeros", end)
}

/// [`validate`]'s walk over the row pointer and the entries, for a structure whose lengths and sizes it checked:
/// pointers that never decrease, then each row's columns sorted, unique and below `cols`.
fn validate_entries(cols: usize, indptr: &[usize], indices: &[usize]) -> Result<(), CsrError> {
    let rows = indptr.len() - 1;
    // Monotone pointers first: with them and indptr[rows] == len, every row slice below is in bounds. Both passes
    // report the first bad row in row order, in parallel or not.
    let parallel = in_parallel(rows + indices.len());
    let decreasing = |r: &usize| indptr[*r] > indptr[*r + 1];
    let first_decrease = if parallel {
        (0..rows).into_par_iter().with_min_len(4096).find_first(decreasing)
    } else {
        (0..rows).find(decreasing)
    };
    if let Some(row) = first_decrease {
        return Err(CsrError::IndptrNotMonotone { row, start: indptr[row], end: indptr[row + 1] });
    }
    let check_row = |row: usize| -> Option<CsrError> {
        let mut prev: Option<usize> = None;
        for &col in &indices[indptr[row]..indptr[row + 1]] {
            if col >= cols {
                return Some(CsrError::ColumnOutOfRange { row, col, cols });
            }
            match prev {
                Some(p) if p == col => return Some(CsrError::Duplicate { row, col }),
                Some(p) if p > col => return Some(CsrError::Unsorted { row, prev: p, col }),
                _ => {}
            }
            prev = Some(col);
        }
        None
    };
    let first_bad_row = if parallel {
        (0..rows).into_par_iter().with_min_len(1024).find_map_first(check_row)
    } else {
        (0..rows).find_map(check_row)
    };
    first_bad_row.map_or(Ok(()), Err)
}

/// Whether host work over `items` (rows plus entries, or elements) is worth rayon's threads: from 64Ki, where a
/// sequential pass takes tens of microseconds or more.
pub(crate) fn in_parallel(items: usize) -> bool {
    items >= 1 << 16
}

/// `v` as usize (no element negative: checked by the caller), in parallel past [`in_parallel`]'s size.
fn to_usize(v: &[i32]) -> Vec<usize> {
    if in_parallel(v.len()) {
        v.par_iter().map(|&x| x as usize).collect()
    } else {
        v.iter().map(|&x| x as usize).collect()
    }
}

/// `v` as i32 (each element fits: checked by [`validate`]), in parallel past [`in_parallel`]'s size.
fn to_i32(v: &[usize]) -> Vec<i32> {
    if in_parallel(v.len()) {
        v.par_iter().map(|&x| x as i32).collect()
    } else {
        v.iter().map(|&x| x as i32).collect()
    }
}

/// Row statistics (the rows' lengths, and how much neighbouring rows share columns), computed once at upload;
/// production kernels choose their work split from them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RowStats {
    pub min: usize,
    pub max: usize,
    pub mean: f64,
    /// Coefficient of variation (standard deviation / mean); 0 for an empty matrix.
    pub cv: f64,
    pub empty_rows: usize,
    /// How much neighbouring rows share columns: over each window of [`LOCALITY_WINDOW`] consecutive rows, the
    /// distinct columns of its entries, summed over the windows and divided by the entries (1 where no two rows
    /// of a window share a column, 1 / 4096 where all rows hold the same ones; 1 for an empty matrix). The rows of
    /// B that a window's rows read are its distinct columns. None where only the row pointer was looked at
    /// ([`RowStats::from_indptr`]); [`RowStats::of_csr`] and the statistics of a [`DeviceCsr`] have it.
    pub columns_per_entry: Option<f64>,
}

/// The window of [`RowStats::columns_per_entry`]: 4096 rows, on the order of the rows the SpMM tiles have in
/// flight on the GPU at once (NOTES.md, "SpMM step 61").
pub const LOCALITY_WINDOW: usize = 4096;

impl RowStats {
    /// Statistics of the row lengths of a CSR row pointer.
    pub fn from_indptr(indptr: &[usize]) -> RowStats {
        let rows = indptr.len().saturating_sub(1);
        if rows == 0 {
            return RowStats::default();
        }
        let lens = indptr.windows(2).map(|w| w[1] - w[0]);
        let (mut min, mut max, mut sum, mut sum_sq, mut empty) = (usize::MAX, 0usize, 0f64, 0f64, 0usize);
        for l in lens {
            min = min.min(l);
            max = max.max(l);
            sum += l as f64;
            sum_sq += (l as f64) * (l as f64);
            empty += usize::from(l == 0);
        }
        let mean = sum / rows as f64;
        let var = (sum_sq / rows as f64 - mean * mean).max(0.0);
        let cv = if mean > 0.0 { var.sqrt() / mean } else { 0.0 };
        RowStats { min, max, mean, cv, empty_rows: empty, columns_per_entry: None }
    }

    /// [`RowStats::from_indptr`] and [`RowStats::columns_per_entry`] of a CSR structure (`indices` holds at
    /// least `indptr`'s last offset; each row's columns distinct, as a validated matrix's are).
    pub fn of_csr(indptr: &[usize], indices: &[usize]) -> RowStats {
        RowStats { columns_per_entry: Some(columns_per_entry(indptr, indices)), ..RowStats::from_indptr(indptr) }
    }
}

/// [`RowStats::columns_per_entry`], the windows in parallel: each window's columns marked in a bitmap up to its
/// largest column where that is at most 64 columns per entry, else sorted and counted.
fn columns_per_entry(indptr: &[usize], indices: &[usize]) -> f64 {
    let rows = indptr.len().saturating_sub(1);
    let nnz = indptr.last().copied().unwrap_or(0);
    if nnz == 0 {
        return 1.0;
    }
    let distinct: usize = (0..rows.div_ceil(LOCALITY_WINDOW))
        .into_par_iter()
        .map(|w| {
            let (r0, r1) = (w * LOCALITY_WINDOW, ((w + 1) * LOCALITY_WINDOW).min(rows));
            let window = &indices[indptr[r0]..indptr[r1]];
            let long = window.len() >= 1 << 17;
            let largest = if long { window.par_iter().max() } else { window.iter().max() };
            let span = largest.map_or(0, |&c| c + 1);
            if span <= 64 * window.len() {
                let words = span.div_ceil(64);
                let mark = |mut seen: Vec<u64>, part: &[usize]| {
                    for &c in part {
                        seen[c / 64] |= 1u64 << (c % 64);
                    }
                    seen
                };
                // A long window (a few rows over many columns) is itself marked in parts, their bitmaps or'ed.
                let seen = if long && span <= 8 * window.len() {
                    window.par_chunks(1 << 16).fold(|| vec![0u64; words], mark).reduce(
                        || vec![0u64; words],
                        |mut x, y| {
                            x.iter_mut().zip(y).for_each(|(x, y)| *x |= y);
                            x
                        },
                    )
                } else {
                    mark(vec![0u64; words], window)
                };
                seen.iter().map(|w| w.count_ones() as usize).sum()
            } else {
                let mut cols = window.to_vec();
                cols.sort_unstable();
                cols.dedup();
                cols.len()
            }
        })
        .sum();
    distinct as f64 / nnz as f64
}

/// Rows ordered by descending length (ties by row index), so that long rows start first and short rows
/// fill the tail of the grid (Sputnik's row swizzle).
pub fn row_swizzle(indptr: &[usize]) -> Vec<i32> {
    // A counting sort by length (stable: each length's rows in row order): O(rows + longest row).
    let rows = indptr.len().saturating_sub(1);
    let len = |r: usize| indptr[r + 1] - indptr[r];
    let longest = (0..rows).map(len).max().unwrap_or(0);
    let mut next = vec![0usize; longest + 1];
    for r in 0..rows {
        next[len(r)] += 1;
    }
    longest_first_slots(&mut next);
    let mut order = vec![0i32; rows];
    for r in 0..rows {
        let slot = &mut next[len(r)];
        order[*slot] = r as i32;
        *slot += 1;
    }
    order
}

/// Turns `counts[l]`, how many items have length l, into where the first of them goes in an order by descending
/// length: a counting sort's slots ([`row_swizzle`], the SpMM row split's pieces).
pub(crate) fn longest_first_slots(counts: &mut [usize]) {
    let mut start = 0;
    for slot in counts.iter_mut().rev() {
        (*slot, start) = (start, start + *slot);
    }
}

/// The SpMM kernel's rows in [`row_swizzle`]'s order, four ints per row: the row's first entry, its end entry, the
/// row and 0 (16 bytes, so the bounds are 8-byte aligned). A subwarp reads its row's bounds and its row together,
/// where the order alone would put a second, dependent load (the row's offsets) on its chain.
pub fn swizzled_rows(indptr: &[usize]) -> Vec<i32> {
    // Entries and rows fit in i32: validated at upload.
    let row = |r: i32| {
        let r = r as usize;
        [indptr[r] as i32, indptr[r + 1] as i32, r as i32, 0]
    };
    let order = row_swizzle(indptr);
    let mut bounds = vec![0i32; 4 * order.len()];
    if in_parallel(order.len()) {
        bounds.par_chunks_mut(4).zip(order).for_each(|(b, r)| b.copy_from_slice(&row(r)));
    } else {
        bounds.chunks_mut(4).zip(order).for_each(|(b, r)| b.copy_from_slice(&row(r)));
    }
    bounds
}

/// Copies a host slice to the device. Empty slices get a one-element allocation so every pointer handed to
/// a kernel is valid; the kernels never read past the logical length.
pub(crate) fn upload_slice<T: DeviceRepr + Default + Copy>(
    gpu: &Gpu,
    data: &[T],
    what: &'static str,
) -> Result<CudaSlice<T>> {
    gpu.refuse_while_recording(what)?;
    let bytes = std::mem::size_of_val(data).max(std::mem::size_of::<T>());
    let padded;
    let src = if data.is_empty() {
        padded = [T::default()];
        &padded[..]
    } else {
        data
    };
    gpu.stream().clone_htod(src).map_err(Error::driver(what, bytes))
}

/// Copies a device buffer (`src`, a slice or a view of one) back to the host. The new vector's pages are touched
/// first, on rayon's threads past [`in_parallel`]'s size: left to the driver's copy, a fresh allocation faulted its
/// pages in one at a time, which took 30 ms of a download of 33 MB that takes 4 ms into touched pages (H200, NOTES.md
/// step 105).
pub(crate) fn download_slice<T, S>(gpu: &Gpu, src: &S, what: &'static str) -> Result<Vec<T>>
where
    T: DeviceRepr + Default + Copy + Send + Sync,
    S: cudarc::driver::DevicePtr<T>,
{
    gpu.refuse_while_recording(what)?;
    let len = src.len();
    if len == 0 {
        return Ok(Vec::new());
    }
    let mut v = Vec::with_capacity(len);
    if in_parallel(len) {
        (0..len).into_par_iter().map(|_| T::default()).collect_into_vec(&mut v);
    } else {
        v.resize(len, T::default());
    }
    // Into pageable memory the copy has ended when the call returns.
    gpu.stream().memcpy_dtoh(src, &mut v).map_err(Error::driver(what, std::mem::size_of_val(&v[..])))?;
    Ok(v)
}

/// What is derived from the row pointer: the statistics, the longest-first row order where SpMM takes the rows
/// in that order ([`crate::spmm::rows_longest_first`]) and, for a skewed matrix, SpMM's row split, on the device.
pub(crate) struct Derived {
    pub(crate) stats: RowStats,
    /// [`swizzled_rows`]; None: the SpMM kernel takes the rows in their own order (a null `swizzled_rows`).
    pub(crate) swizzled_rows: Option<CudaSlice<i32>>,
    pub(crate) split: Option<DeviceSplit>,
}

/// [`crate::spmm::split`]'s pieces on the device.
pub(crate) struct DeviceSplit {
    pub(crate) pieces: CudaSlice<i32>,
    pub(crate) num_pieces: usize,
    pub(crate) split_rows: CudaSlice<i32>,
    pub(crate) num_split_rows: usize,
    pub(crate) num_partials: usize,
}

/// What a validated structure gives on the host, before anything of it is uploaded: the statistics, the row order
/// and the row split ([`Derived`]'s host side), and the tensor-core block counts where asked for.
struct HostDerived {
    stats: RowStats,
    swizzled_rows: Option<Vec<i32>>,
    split: Option<crate::spmm::split::HostSplit>,
    counts: Option<crate::spmm::tensor_core::BlockCounts>,
}

impl HostDerived {
    /// The block counts are counted where `counts` says so (f16, bf16 and f32 uploads); the parts run side by side
    /// on rayon's threads.
    fn of(cols: usize, indptr: &[usize], indices: &[usize], dtype: crate::DType, counts: bool) -> Self {
        let stats = RowStats::of_csr(indptr, indices);
        let rows = indptr.len().saturating_sub(1);
        let swizzle = || crate::spmm::rows_longest_first(&stats, rows, dtype).then(|| swizzled_rows(indptr));
        let count = || counts.then(|| crate::spmm::tensor_core::BlockCounts::of(cols, indptr, indices));
        let (swizzled_rows, (split, counts)) =
            rayon::join(swizzle, || rayon::join(|| crate::spmm::split::plan(indptr, &stats), count));
        HostDerived { stats, swizzled_rows, split, counts }
    }

    /// [`HostDerived::of`] for a matrix of T whose structure was checked on the host (an upload, a wrap of device
    /// buffers, a transposition): the block counts for the types the tensor cores take (f16, bf16, f32).
    fn checked<T: Scalar>(cols: usize, indptr: &[usize], indices: &[usize]) -> Self {
        Self::of(cols, indptr, indices, T::DTYPE, T::DTYPE != crate::DType::F64)
    }
}

impl Derived {
    /// Uploads `host`'s row order and split; gives back its block counts.
    fn upload(gpu: &Gpu, host: HostDerived) -> Result<(Self, Option<crate::spmm::tensor_core::BlockCounts>)> {
        let swizzled_rows = match host.swizzled_rows {
            Some(rows) => Some(upload_slice(gpu, &rows, "uploading the row swizzle")?),
            None => None,
        };
        let split = match host.split {
            None => None,
            Some(split) => Some(DeviceSplit {
                pieces: upload_slice(gpu, &split.pieces, "uploading the SpMM row split")?,
                num_pieces: split.num_pieces(),
                split_rows: upload_slice(gpu, &split.split_rows, "uploading the SpMM row split")?,
                num_split_rows: split.num_split_rows(),
                num_partials: split.num_partials,
            }),
        };
        Ok((Derived { swizzled_rows, stats: host.stats, split }, host.counts))
    }
}

/// Whether any of `values` is Inf or NaN (in parallel past a million values).
fn holds_non_finite<T: Scalar>(values: &[T]) -> bool {
    let bad = |v: &T| !v.to_f64().is_finite();
    if values.len() > 1 << 20 {
        values.par_iter().any(bad)
    } else {
        values.iter().any(bad)
    }
}

/// A CSR matrix on the device with 32-bit indices.
///
/// The row statistics and the row swizzle (where SpMM takes the rows longest first) are computed at upload; for a
/// matrix built on the device (a SpGEMM result) they are computed on first use, so that producing one costs no host
/// round trip.
pub struct DeviceCsr<T: Scalar> {
    rows: usize,
    cols: usize,
    nnz: usize,
    pub(crate) row_offsets: CudaSlice<i32>,
    pub(crate) column_indices: CudaSlice<i32>,
    pub(crate) values: CudaSlice<T>,
    derived: OnceLock<Derived>,
    /// The tensor-core SpMM's blocks (crate::spmm::tensor_core) for 16-row and 64-row windows in mma fragment
    /// order, and for 64-row windows in wgmma core matrices (f32), each built on first use.
    tensor_core: [OnceLock<crate::spmm::tensor_core::DeviceBlocks>; crate::spmm::tensor_core::BLOCK_LAYOUTS],
    /// Their k-block counts ([`crate::spmm::tensor_core::BlockCounts`]), counted at upload for f16, bf16, f32.
    tensor_core_count: Option<crate::spmm::tensor_core::BlockCounts>,
    /// Whether a stored value is Inf or NaN: known where the values were on the host (uploads), else None.
    non_finite: Option<bool>,
    /// Distinct for every upload or device build, renewed when a kernel rewrites the structure: what a plan
    /// made from this matrix (e.g. [`crate::SpmvPlan`]) checks that it is used with.
    id: u64,
    /// [`pattern_hash`] of the row pointer and column indices, computed from one download on first use (by
    /// the SpGEMM plan, which is reused across uploads of new values and so cannot go by `id`).
    pattern: OnceLock<u64>,
    /// A^T, made on first use by [`DeviceCsr::transposed`] and given every later change of the values (boxed: a
    /// matrix holding a matrix).
    transposed: OnceLock<Box<CsrTranspose<T>>>,
}

/// A 64-bit fingerprint of a CSR structure: the shape, the row pointer and the column indices. Chunks are
/// hashed in parallel and combined in order, so it is the same on every run. Not cryptographic: it tells apart
/// patterns that differ by accident (a plan reused for the wrong operand), not by design.
pub(crate) fn pattern_hash(rows: usize, cols: usize, row_offsets: &[i32], column_indices: &[i32]) -> u64 {
    const CHUNK: usize = 1 << 16;
    // A multiply-rotate mix per word (the constants are the 64-bit golden ratio and a splitmix64 multiplier).
    let mix = |h: u64, w: u64| (h ^ w).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29);
    let chunk_hash = |c: &[i32]| c.iter().fold(c.len() as u64, |h, &w| mix(h, w as u32 as u64));
    let fold = |words: &[i32]| -> u64 {
        let parts: Vec<u64> = words.par_chunks(CHUNK).map(chunk_hash).collect();
        parts.into_iter().fold(words.len() as u64, |h, p| mix(h, p).wrapping_mul(0xBF58_476D_1CE4_E5B9))
    };
    let h = mix(mix(0, rows as u64), cols as u64);
    mix(mix(h, fold(row_offsets)), fold(column_indices))
}

/// The next [`DeviceCsr`] identity.
fn next_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl<T: Scalar> DeviceCsr<T> {
    /// Validates and uploads a sprs CSR matrix (a CSC matrix is refused: convert it with `to_csr()`).
    pub fn upload(gpu: &Gpu, a: CsMatView<T>) -> Result<Self> {
        if !a.is_csr() {
            return Err(Error::ShapeMismatch("expected a CSR matrix, got CSC (use .to_csr())".into()));
        }
        // sprs views of row slices keep the parent's offsets: rebase them.
        let indptr = a.indptr();
        let proper = indptr.to_proper();
        let base = indptr.raw_storage().first().copied().unwrap_or(0);
        let end = base + proper.last().copied().unwrap_or(0);
        let (indices, values) = match (a.indices().get(base..end), a.data().get(base..end)) {
            (Some(i), Some(v)) => (i, v),
            _ => {
                return Err(CsrError::LengthMismatch { end, indices: a.indices().len(), values: a.data().len() }.into())
            }
        };
        Self::from_parts(gpu, a.rows(), a.cols(), &proper, indices, values)
    }

    /// Validates and uploads raw CSR arrays.
    pub fn from_parts(
        gpu: &Gpu,
        rows: usize,
        cols: usize,
        indptr: &[usize],
        indices: &[usize],
        values: &[T],
    ) -> Result<Self> {
        validate_sizes(rows, cols, indptr, indices, values.len())?;
        let copies = || -> Result<_> {
            let row_offsets = upload_slice(gpu, &to_i32(indptr), "uploading CSR row offsets")?;
            let column_indices = upload_slice(gpu, &to_i32(indices), "uploading CSR column indices")?;
            Ok((row_offsets, column_indices, upload_slice(gpu, values, "uploading CSR values")?))
        };
        // The entries' checks, then what is derived from them (which trusts them).
        let host = || -> Result<_, CsrError> {
            validate_entries(cols, indptr, indices)?;
            Ok(rayon::join(|| HostDerived::checked::<T>(cols, indptr, indices), || holds_non_finite(values)))
        };
        // A large matrix's host work runs on rayon's threads while this one copies (the driver's calls stay on it).
        // A structure that fails the checks has then been copied, but no kernel reads it: the copies are freed.
        let (copies, host) = if in_parallel(rows + indices.len()) {
            std::thread::scope(|scope| {
                let side = scope.spawn(host);
                let copies = copies();
                (copies, side.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            })
        } else {
            let host = host()?;
            (copies(), Ok(host))
        };
        let (host, non_finite) = host?;
        let mut a = Self::validated(gpu, (rows, cols, indices.len()), copies?, host)?;
        a.non_finite = Some(non_finite);
        Ok(a)
    }

    /// The matrix over device buffers whose structure was validated on the host, where `host` was derived from it.
    fn validated(
        gpu: &Gpu,
        (rows, cols, nnz): (usize, usize, usize),
        (row_offsets, column_indices, values): (CudaSlice<i32>, CudaSlice<i32>, CudaSlice<T>),
        host: HostDerived,
    ) -> Result<Self> {
        let (derived_now, counts) = Derived::upload(gpu, host)?;
        let derived = OnceLock::new();
        let _ = derived.set(derived_now);
        Ok(DeviceCsr {
            rows,
            cols,
            nnz,
            row_offsets,
            column_indices,
            values,
            derived,
            tensor_core: Default::default(),
            tensor_core_count: counts,
            non_finite: None,
            id: next_id(),
            pattern: OnceLock::new(),
            transposed: OnceLock::new(),
        })
    }

    /// Wraps CSR arrays already on the device (e.g. built by your own kernels), with no copy of the values: a row
    /// pointer of at least rows + 1 entries, and column indices and values of at least max(nnz, 1) elements, nnz
    /// being the row pointer's entry `rows`; longer buffers are used in their first part. The structure is checked
    /// as [`DeviceCsr::from_parts`] checks host arrays ([`CsrError`]), which costs one download of the row
    /// pointer and the column indices; the statistics and the tensor-core block counts come from that download.
    /// Every buffer must come from this `gpu`'s stream ([`Gpu::stream`]), else [`Error::WrongGpu`].
    /// [`DeviceCsr::into_parts`] gives them back.
    pub fn from_device(
        gpu: &Gpu,
        rows: usize,
        cols: usize,
        row_offsets: CudaSlice<i32>,
        column_indices: CudaSlice<i32>,
        values: CudaSlice<T>,
    ) -> Result<Self> {
        gpu.check_owns("the row pointer", &row_offsets)?;
        gpu.check_owns("the column indices", &column_indices)?;
        gpu.check_owns("the values", &values)?;
        let expected = rows.checked_add(1).ok_or_else(|| Error::TooLarge(format!("{rows} rows")))?;
        if row_offsets.len() < expected {
            return Err(CsrError::IndptrLength { got: row_offsets.len(), expected }.into());
        }
        let read = |what: &'static str, buffer: &CudaSlice<i32>, len: usize| -> Result<Vec<usize>> {
            let v = download_slice(gpu, &buffer.slice(..len), "reading back a CSR array")?;
            let negative = |x: &i32| *x < 0;
            let first_negative =
                if in_parallel(len) { v.par_iter().position_first(negative) } else { v.iter().position(negative) };
            match first_negative {
                Some(index) => Err(CsrError::Negative { what, index, value: v[index] }.into()),
                None => Ok(to_usize(&v)),
            }
        };
        let indptr = read("row pointer", &row_offsets, expected)?;
        if indptr[0] != 0 {
            return Err(CsrError::IndptrStart(indptr[0]).into());
        }
        let nnz = indptr[rows];
        if column_indices.len() < nnz.max(1) || values.len() < nnz.max(1) {
            let (indices, values) = (column_indices.len(), values.len());
            return Err(CsrError::LengthMismatch { end: nnz, indices, values }.into());
        }
        let indices = if nnz > 0 { read("column index", &column_indices, nnz)? } else { Vec::new() };
        validate(rows, cols, &indptr, &indices, nnz)?;
        let host = HostDerived::checked::<T>(cols, &indptr, &indices);
        Self::validated(gpu, (rows, cols, nnz), (row_offsets, column_indices, values), host)
    }

    /// New values for the same structure: `values`, one per stored entry in CSR order, replace A's. The tensor-core
    /// blocks this matrix has built (they hold a copy of its values) are rewritten in place by a kernel, so a
    /// weight whose values change while its pattern stays (a pruned layer being trained) pays one copy and one
    /// pass over its blocks per update, not a rebuild. Every layout built is rewritten: after trying several
    /// kernels, keep only the one used ([`DeviceCsr::keep_tensor_core_blocks_of`]). What depends on the structure
    /// only stays: the statistics, the row order, the split, the kernel choices, and plans made from this matrix
    /// ([`crate::SpmvPlan`]). [`DeviceCsr::holds_non_finite`] is taken from `values`. `values.len()` must be
    /// [`DeviceCsr::nnz`] ([`CsrError::ValuesLength`]).
    pub fn set_values(&mut self, gpu: &Gpu, values: &[T]) -> Result<()> {
        self.check_gpu(gpu, "the sparse matrix")?;
        if values.len() != self.nnz {
            return Err(CsrError::ValuesLength { got: values.len(), nnz: self.nnz }.into());
        }
        gpu.refuse_while_recording("uploading new CSR values")?;
        if self.nnz > 0 {
            let mut dst = self.values.slice_mut(..self.nnz);
            let bytes = std::mem::size_of_val(values);
            gpu.stream().memcpy_htod(values, &mut dst).map_err(Error::driver("uploading new CSR values", bytes))?;
        }
        self.non_finite = Some(holds_non_finite(values));
        self.rewrite_tensor_core_values(gpu)
    }

    /// [`DeviceCsr::set_values`] from values already on the device: the first [`DeviceCsr::nnz`] elements of
    /// `values` (at least that many, [`CsrError::ValuesLength`]; a buffer of `gpu`'s stream, else
    /// [`Error::WrongGpu`]) are copied into A's values on the device, with no synchronisation: the update and
    /// the products after it queue on the stream. [`DeviceCsr::holds_non_finite`] becomes None, as for
    /// [`DeviceCsr::from_device`], since the values are not looked at on the host.
    pub fn set_values_from_device(&mut self, gpu: &Gpu, values: &CudaSlice<T>) -> Result<()> {
        self.check_gpu(gpu, "the sparse matrix")?;
        gpu.check_owns("the new values", values)?;
        if values.len() < self.nnz {
            return Err(CsrError::ValuesLength { got: values.len(), nnz: self.nnz }.into());
        }
        if self.nnz > 0 {
            let mut dst = self.values.slice_mut(..self.nnz);
            let bytes = self.nnz * std::mem::size_of::<T>();
            gpu.stream()
                .memcpy_dtod(&values.slice(..self.nnz), &mut dst)
                .map_err(Error::driver("copying new CSR values", bytes))?;
        }
        self.non_finite = None;
        self.rewrite_tensor_core_values(gpu)
    }

    /// New values for the same structure, written in place by the caller: `write` gets A's values on the device
    /// (its first [`DeviceCsr::nnz`], in CSR order) and queues its own kernels or copies into them on
    /// [`Gpu::stream`]; the tensor-core blocks this matrix has built are then rewritten from them, as
    /// [`DeviceCsr::set_values`] does, with no copy of the values and no synchronisation. For an optimizer step
    /// that updates a pruned weight where it lies. The blocks are rewritten whether `write` succeeds or fails
    /// (it may have written part of the values), and what it returns is passed back. [`DeviceCsr::holds_non_finite`]
    /// becomes None: the values are not looked at on the host.
    pub fn update_values<R, E: From<Error>>(
        &mut self,
        gpu: &Gpu,
        write: impl FnOnce(&mut cudarc::driver::CudaViewMut<'_, T>) -> std::result::Result<R, E>,
    ) -> std::result::Result<R, E> {
        self.check_gpu(gpu, "the sparse matrix")?;
        self.update_values_with_structure(gpu, |_, _, values| write(values))
    }

    /// [`DeviceCsr::update_values`] for a writer that reads the structure too (the row pointer and the column
    /// indices, as [`DeviceCsr::device_parts`] gives them) while it writes the values: [`crate::sddmm()`].
    pub(crate) fn update_values_with_structure<R, E: From<Error>>(
        &mut self,
        gpu: &Gpu,
        write: impl FnOnce(
            &CudaSlice<i32>,
            &CudaSlice<i32>,
            &mut cudarc::driver::CudaViewMut<'_, T>,
        ) -> std::result::Result<R, E>,
    ) -> std::result::Result<R, E> {
        let written = write(&self.row_offsets, &self.column_indices, &mut self.values.slice_mut(..self.nnz));
        self.non_finite = None;
        let rewritten = self.rewrite_tensor_core_values(gpu);
        let written = written?;
        rewritten?;
        Ok(written)
    }

    /// Writes the values into every tensor-core block layout already built ([`DeviceCsr::set_values`]), and into
    /// A^T where [`DeviceCsr::transposed`] made it. Blocks or a transpose whose write fails are dropped (made again
    /// from the new values on their next use), so none is left stale.
    fn rewrite_tensor_core_values(&mut self, gpu: &Gpu) -> Result<()> {
        let mut result = Ok(());
        for (cache, layout) in self.tensor_core.iter_mut().zip(crate::spmm::tensor_core::BlockLayout::ALL) {
            if let Some(blocks) = cache.get_mut() {
                if let Err(e) = blocks.set_values(gpu, layout, &self.values) {
                    *cache = OnceLock::new();
                    result = result.and(Err(e));
                }
            }
        }
        let failed = match self.transposed.get_mut() {
            Some(t) => t.gather_values(gpu, &self.values, self.non_finite).err(),
            None => None,
        };
        if let Some(e) = failed {
            self.transposed = OnceLock::new();
            result = result.and(Err(e));
        }
        result
    }

    /// Frees the tensor-core blocks `kernel` does not read (all of them for a tile): each layout a product has
    /// built is kept with the matrix and rewritten by every [`DeviceCsr::set_values`], so after
    /// [`crate::spmm_tune`] (which builds every layout it times) a matrix whose values change should keep only its
    /// chosen kernel's. A freed layout is built again if a later product needs it.
    pub fn keep_tensor_core_blocks_of(&mut self, kernel: &crate::SpmmKernel) {
        let kept = match kernel {
            crate::SpmmKernel::TensorCore(config) => crate::spmm::tensor_core::BlockLayout::of(config).ok(),
            crate::SpmmKernel::Tiled(_) => None,
        };
        for (cache, layout) in self.tensor_core.iter_mut().zip(crate::spmm::tensor_core::BlockLayout::ALL) {
            if Some(layout) != kept {
                *cache = OnceLock::new();
            }
        }
    }

    /// Writes A's values into its tensor-core blocks in `layout` again (building them first if they are not), the
    /// bits unchanged: the work an update costs them ([`DeviceCsr::set_values`]), for timing a product as it runs
    /// when the values change before each one ([`crate::spmm::tune::TuneOptions::values_change`]).
    pub(crate) fn rewrite_unchanged_tensor_core_values(
        &self,
        gpu: &Gpu,
        layout: crate::spmm::tensor_core::BlockLayout,
    ) -> Result<()> {
        self.tensor_core_blocks(gpu, layout)?.rewrite_unchanged_values(gpu, layout, &self.values)
    }

    /// The device buffers (row pointer, column indices, values; each may be longer than the matrix needs), to read
    /// or to pass to your own kernels on [`Gpu::stream`]. Not mutably: the matrix keeps what it derived from
    /// them (statistics, the row order, tensor-core blocks built from the values); change them through
    /// [`DeviceCsr::into_parts`] and [`DeviceCsr::from_device`].
    pub fn device_parts(&self) -> (&CudaSlice<i32>, &CudaSlice<i32>, &CudaSlice<T>) {
        (&self.row_offsets, &self.column_indices, &self.values)
    }

    /// The device buffers (row pointer, column indices, values), giving up the matrix.
    pub fn into_parts(self) -> (CudaSlice<i32>, CudaSlice<i32>, CudaSlice<T>) {
        (self.row_offsets, self.column_indices, self.values)
    }

    /// Wraps CSR arrays a kernel built on the device: a row pointer of rows + 1 entries ending at `nnz`,
    /// column indices and values of at least max(nnz, 1) elements, valid CSR (the caller's kernels guarantee
    /// it). Nothing is read back; the statistics and the swizzle come on first use.
    pub(crate) fn from_device_parts(
        rows: usize,
        cols: usize,
        nnz: usize,
        row_offsets: CudaSlice<i32>,
        column_indices: CudaSlice<i32>,
        values: CudaSlice<T>,
    ) -> Self {
        DeviceCsr {
            rows,
            cols,
            nnz,
            row_offsets,
            column_indices,
            values,
            derived: OnceLock::new(),
            tensor_core: Default::default(),
            tensor_core_count: None,
            non_finite: None,
            id: next_id(),
            pattern: OnceLock::new(),
            transposed: OnceLock::new(),
        }
    }

    /// The statistics and the swizzle, computed from one download of the row pointer and the column indices the
    /// first time (the indices for [`RowStats::columns_per_entry`], so that a matrix built on the device gets the
    /// statistics, and the kernel choices, that its upload would). The same download gives [`DeviceCsr::pattern`]
    /// its fingerprint, so that a later plan does not read the structure back again.
    pub(crate) fn derived(&self, gpu: &Gpu) -> Result<&Derived> {
        self.check_gpu(gpu, "the sparse matrix")?;
        if let Some(d) = self.derived.get() {
            return Ok(d);
        }
        let (offsets, columns) = self.read_structure(gpu)?;
        let _ = self.pattern.get_or_init(|| pattern_hash(self.rows, self.cols, &offsets, &columns));
        let (indptr, indices) = (to_usize(&offsets), to_usize(&columns));
        let host = HostDerived::of(self.cols, &indptr, &indices, T::DTYPE, false);
        let _ = self.derived.set(Derived::upload(gpu, host)?.0);
        Ok(self.derived.get().expect("set just above"))
    }

    /// The row pointer (rows + 1 entries) and the column indices (nnz), read back from the device: the used part
    /// only, as both buffers may be longer (an empty one is padded to one element).
    fn read_structure(&self, gpu: &Gpu) -> Result<(Vec<i32>, Vec<i32>)> {
        let offsets = download_slice(gpu, &self.row_offsets.slice(..self.rows + 1), "reading back CSR row offsets")?;
        let columns = download_slice(gpu, &self.column_indices.slice(..self.nnz), "reading back CSR column indices")?;
        Ok((offsets, columns))
    }

    /// Drops the statistics and the swizzle after a kernel rewrote the row pointer; they are recomputed on use.
    /// The matrix gets a new identity: plans made from the old structure no longer match it.
    pub(crate) fn forget_derived(&mut self) {
        self.derived = OnceLock::new();
        self.tensor_core = Default::default();
        self.tensor_core_count = None;
        self.non_finite = None;
        self.id = next_id();
        self.pattern = OnceLock::new();
        self.transposed = OnceLock::new();
    }

    /// The numbers of k-blocks of the tensor-core SpMM (f16/bf16/f32 matrices uploaded from the host; None otherwise).
    pub fn tensor_core_block_count(&self) -> Option<crate::spmm::tensor_core::BlockCounts> {
        self.tensor_core_count
    }

    /// Whether A stores an Inf or a NaN: `Some` for a matrix uploaded from the host ([`DeviceCsr::upload`],
    /// [`DeviceCsr::from_parts`]), whose values were looked at then; None where the values never left the device.
    pub fn holds_non_finite(&self) -> Option<bool> {
        self.non_finite
    }

    /// The tensor-core SpMM's blocks of this matrix in `layout`, built from one download of it the first time.
    pub(crate) fn tensor_core_blocks(
        &self,
        gpu: &Gpu,
        layout: crate::spmm::tensor_core::BlockLayout,
    ) -> Result<&crate::spmm::tensor_core::DeviceBlocks> {
        let cache = &self.tensor_core[layout.slot()];
        self.check_gpu(gpu, "the sparse matrix")?;
        if let Some(b) = cache.get() {
            return Ok(b);
        }
        gpu.refuse_while_recording("building the tensor-core blocks of A (on its first product with their kernels)")?;
        let _ = cache.set(crate::spmm::tensor_core::DeviceBlocks::build(gpu, self, layout)?);
        Ok(cache.get().expect("set just above"))
    }

    /// [`Error::WrongGpu`] unless this matrix is `gpu`'s ([`Gpu::check_owns`]).
    pub(crate) fn check_gpu(&self, gpu: &Gpu, what: &str) -> Result<()> {
        gpu.check_owns(what, &self.row_offsets)
    }

    /// The fingerprint of this matrix's structure ([`pattern_hash`]): one download of the row pointer and the
    /// column indices the first time, unless [`DeviceCsr::derived`] read them back first.
    pub(crate) fn pattern(&self, gpu: &Gpu) -> Result<u64> {
        self.check_gpu(gpu, "the sparse matrix")?;
        if let Some(&h) = self.pattern.get() {
            return Ok(h);
        }
        let (offsets, columns) = self.read_structure(gpu)?;
        Ok(*self.pattern.get_or_init(|| pattern_hash(self.rows, self.cols, &offsets, &columns)))
    }

    /// This matrix's identity (see the field).
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Copies the matrix back into a sprs CSR matrix (validated on the way).
    pub fn download(&self, gpu: &Gpu) -> Result<CsMat<T>> {
        self.check_gpu(gpu, "the sparse matrix")?;
        let (offsets, columns) = self.read_structure(gpu)?;
        let values = download_slice(gpu, &self.values.slice(..self.nnz), "downloading CSR values")?;
        let (indptr, indices) = (to_usize(&offsets), to_usize(&columns));
        validate(self.rows, self.cols, &indptr, &indices, values.len())?;
        Ok(CsMat::new((self.rows, self.cols), indptr, indices, values))
    }

    pub fn rows(&self) -> usize {
        self.rows
    }
    pub fn cols(&self) -> usize {
        self.cols
    }
    pub fn nnz(&self) -> usize {
        self.nnz
    }
    /// Row statistics: computed at upload, or (for a matrix built on the device) from one download of the row
    /// pointer and the column indices on first use.
    pub fn stats(&self, gpu: &Gpu) -> Result<&RowStats> {
        Ok(&self.derived(gpu)?.stats)
    }
}

#[cfg(test)]
mod tests {
    use super::{holds_non_finite, pattern_hash};
    use half::{bf16, f16};

    #[test]
    fn non_finite_values_are_found_in_every_type_and_at_every_length() {
        assert!(!holds_non_finite::<f32>(&[]));
        assert!(!holds_non_finite(&[1.0f32, -3.0e38, 0.0]));
        assert!(holds_non_finite(&[1.0f32, f32::NAN]));
        assert!(holds_non_finite(&[f32::NEG_INFINITY]));
        // A value past f16's range is Inf once rounded to f16 (case_ACTIVSg70k, pores_1); bf16 keeps f32's range.
        assert!(holds_non_finite(&[f16::from_f32(1.0), f16::from_f32(7.0e4)]));
        assert!(!holds_non_finite(&[f16::from_f32(6.5e4), f16::MIN]));
        assert!(!holds_non_finite(&[bf16::from_f32(7.0e4), bf16::from_f32(3.0e38)]));
        assert!(holds_non_finite(&[bf16::NAN]));
        // The parallel path (past 2^20 values), with the one bad value last.
        let mut long = vec![1.0f64; (1 << 20) + 5];
        assert!(!holds_non_finite(&long));
        *long.last_mut().unwrap() = f64::INFINITY;
        assert!(holds_non_finite(&long));
    }

    #[test]
    fn columns_per_entry_counts_distinct_columns_per_window() {
        use super::{RowStats, LOCALITY_WINDOW as W};
        // Every row holds the same three columns: 3 distinct per window of W rows, 3 W entries.
        let rows = 2 * W;
        let indptr: Vec<usize> = (0..=rows).map(|r| 3 * r).collect();
        let same: Vec<usize> = (0..rows).flat_map(|_| [1, 5, 9]).collect();
        let s = RowStats::of_csr(&indptr, &same);
        assert_eq!(s.columns_per_entry, Some(2.0 * 3.0 / (3 * rows) as f64));
        assert_eq!((s.mean, s.max), (3.0, 3), "the row statistics are from_indptr's");
        // Rows with columns of their own: 1. A window boundary counts a column again: W + 1 rows sharing column 0
        // have 2 distinct columns in 2 windows.
        let own: Vec<usize> = (0..3 * rows).collect();
        assert_eq!(RowStats::of_csr(&indptr, &own).columns_per_entry, Some(1.0));
        let indptr: Vec<usize> = (0..=W + 1).collect();
        assert_eq!(RowStats::of_csr(&indptr, &vec![0; W + 1]).columns_per_entry, Some(2.0 / (W + 1) as f64));
        // Empty matrices and rows: 1, and none from the row pointer alone.
        assert_eq!(RowStats::of_csr(&[0, 0, 0], &[]).columns_per_entry, Some(1.0));
        assert_eq!(RowStats::of_csr(&[0], &[]).columns_per_entry, Some(1.0));
        assert_eq!(RowStats::from_indptr(&[0, 2]).columns_per_entry, None);
        // Windows long enough to be marked in parts (2^17 entries or more), the second partial, against a count by
        // a set, in pools of 1-3 threads.
        let rows = W + 100;
        let indptr: Vec<usize> = (0..=rows).map(|r| 40 * r).collect();
        // Each row's 40 columns are consecutive; the first window wraps around 100,000 columns, so 63,840 of them
        // are met twice, in different parts.
        let columns: Vec<usize> = (0..40 * rows).map(|e| e % 100_000).collect();
        let distinct = |part: &[usize]| part.iter().collect::<std::collections::HashSet<_>>().len();
        let want = (distinct(&columns[..40 * W]) + distinct(&columns[40 * W..])) as f64 / columns.len() as f64;
        for threads in [1, 2, 3] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            let got = pool.install(|| RowStats::of_csr(&indptr, &columns).columns_per_entry);
            assert_eq!(got, Some(want), "{threads} threads");
        }
    }

    #[test]
    fn pattern_hash_tells_apart_patterns_of_the_same_shape_and_count() {
        // The audit's case: A 2 x 2 with entries (0,0),(0,1), then (0,0),(1,1): same shape, same nnz.
        let h1 = pattern_hash(2, 2, &[0, 2, 2], &[0, 1]);
        let h2 = pattern_hash(2, 2, &[0, 1, 2], &[0, 1]);
        assert_ne!(h1, h2);
        assert_eq!(h1, pattern_hash(2, 2, &[0, 2, 2], &[0, 1]), "deterministic");
        // Shape alone, columns alone, and a long structure that spans several chunks.
        assert_ne!(pattern_hash(2, 2, &[0, 2, 2], &[0, 1]), pattern_hash(2, 3, &[0, 2, 2], &[0, 1]));
        assert_ne!(pattern_hash(2, 3, &[0, 2, 2], &[0, 1]), pattern_hash(2, 3, &[0, 2, 2], &[0, 2]));
        let n = 300_000;
        let offsets: Vec<i32> = (0..=n as i32).collect();
        let mut columns: Vec<i32> = (0..n as i32).collect();
        let h = pattern_hash(n, n, &offsets, &columns);
        assert_eq!(h, pattern_hash(n, n, &offsets, &columns));
        columns[n - 1] -= 1;
        assert_ne!(h, pattern_hash(n, n, &offsets, &columns), "the last chunk counts");
        // Empty matrices: their shapes still count.
        assert_ne!(pattern_hash(0, 5, &[0], &[]), pattern_hash(0, 6, &[0], &[]));
    }
}
