//! A^T on the device ([`DeviceCsr::transpose`]), for products with the transpose of a sparse matrix: the backward
//! pass of a sparse layer (dX = W^T dY) with every SpMM kernel, the automatic choice and the tuner. The structure is
//! transposed once, on the device (cuda/util/transpose.cuh), or on the host where A is very wide and very sparse;
//! the values follow A's on the device ([`CsrTranspose::refresh`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, PushKernelArg};
use rayon::prelude::*;

use super::{in_parallel, to_i32, to_usize, upload_slice, DeviceCsr, HostDerived};
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::kernels::Family;
use crate::scalar::Scalar;

/// The transpose of a valid CSR structure (rows x cols): A^T's row pointer (cols + 1 entries) and column indices
/// (A's rows, ascending in each row), and for each entry of A^T the index of the same entry among A's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TransposedStructure {
    pub(crate) indptr: Vec<usize>,
    pub(crate) indices: Vec<usize>,
    pub(crate) source: Vec<i32>,
}

/// The columns per task of [`transpose_structure`]'s pass over the per-part counts.
const COLUMN_CHUNK: usize = 1 << 14;

/// A^T's structure by a counting sort of A's entries by column. Large matrices are cut into parts of consecutive
/// rows (about equal entries), one per thread: each counts its columns, the counts become each part's first slot
/// per column, and each places its entries in row order (each entry's row and index as one word, split into the two
/// arrays after), so every row of A^T comes out sorted and the result is the same for any number of threads. The
/// parts' counts take parts x cols words, kept at most about nnz.
pub(crate) fn transpose_structure(
    rows: usize,
    cols: usize,
    indptr: &[usize],
    indices: &[usize],
) -> TransposedStructure {
    let nnz = indices.len();
    debug_assert_eq!(indptr.len(), rows + 1);
    let parts = if in_parallel(rows + nnz) { rayon::current_num_threads().min(nnz / cols.max(1)).max(1) } else { 1 };
    // Part p holds rows starts[p]..starts[p + 1], the first row whose entries begin at or past p nnz / parts.
    let starts: Vec<usize> = (0..=parts)
        .map(|p| if p == parts { rows } else { indptr[..rows].partition_point(|&e| e < p * nnz / parts) })
        .collect();
    let entries = |p: usize| indptr[starts[p]]..indptr[starts[p + 1]];
    // counts[p][c]: the entries of part p in column c; then the slot in A^T of the first of them.
    let mut counts: Vec<Vec<u32>> = (0..parts)
        .into_par_iter()
        .map(|p| {
            let mut count = vec![0u32; cols];
            for &c in &indices[entries(p)] {
                count[c] += 1;
            }
            count
        })
        .collect();
    // Each task takes a chunk of columns across every part: the chunk's column totals, then its slots relative to the
    // chunk's first entry of A^T.
    let mut chunks: Vec<Vec<&mut [u32]>> =
        (0..cols.div_ceil(COLUMN_CHUNK)).map(|_| Vec::with_capacity(parts)).collect();
    for count in counts.iter_mut() {
        for (chunk, piece) in chunks.iter_mut().zip(count.chunks_mut(COLUMN_CHUNK)) {
            chunk.push(piece);
        }
    }
    let mut lengths = vec![0usize; cols];
    let chunk_entries: Vec<usize> = chunks
        .par_iter_mut()
        .zip(lengths.par_chunks_mut(COLUMN_CHUNK))
        .map(|(pieces, lengths)| {
            let mut start = 0usize;
            for (c, length) in lengths.iter_mut().enumerate() {
                let mut slot = start;
                for piece in pieces.iter_mut() {
                    let count = piece[c] as usize;
                    piece[c] = slot as u32;
                    slot += count;
                }
                *length = slot - start;
                start = slot;
            }
            start
        })
        .collect();
    // The chunks' first entries, added to their slots.
    let mut chunk_start = Vec::with_capacity(chunk_entries.len());
    chunk_entries.iter().fold(0usize, |at, &len| {
        chunk_start.push(at);
        at + len
    });
    chunks.par_iter_mut().zip(&chunk_start).for_each(|(pieces, &at)| {
        for piece in pieces.iter_mut() {
            piece.iter_mut().for_each(|slot| *slot += at as u32);
        }
    });
    drop(chunks);
    let mut t_indptr = Vec::with_capacity(cols + 1);
    t_indptr.push(0);
    let mut at = 0;
    for length in lengths {
        at += length;
        t_indptr.push(at);
    }
    // Each part writes its own slots (disjoint across parts), each entry's row and index in one word: relaxed atomic
    // stores, plain stores on the machine.
    let placed: Vec<AtomicU64> = (0..nnz).into_par_iter().with_min_len(1 << 16).map(|_| AtomicU64::new(0)).collect();
    counts.par_iter_mut().enumerate().for_each(|(p, next)| {
        for r in starts[p]..starts[p + 1] {
            for e in indptr[r]..indptr[r + 1] {
                let slot = &mut next[indices[e]];
                placed[*slot as usize].store((r as u64) << 32 | e as u64, Ordering::Relaxed);
                *slot += 1;
            }
        }
    });
    let (mut t_indices, mut source) = (vec![0usize; nnz], vec![0i32; nnz]);
    const CHUNK: usize = 1 << 16;
    t_indices.par_chunks_mut(CHUNK).zip(source.par_chunks_mut(CHUNK)).zip(placed.par_chunks(CHUNK)).for_each(
        |((rows, entries), placed)| {
            for ((r, e), word) in rows.iter_mut().zip(entries.iter_mut()).zip(placed) {
                let word = word.load(Ordering::Relaxed);
                (*r, *e) = ((word >> 32) as usize, word as u32 as i32);
            }
        },
    );
    TransposedStructure { indptr: t_indptr, indices: t_indices, source }
}

/// A^T of a [`DeviceCsr`] A (made by [`DeviceCsr::transpose`]): a [`DeviceCsr`] of its own, which every product
/// takes as it takes A ([`crate::spmm_auto`], [`crate::spmm_kernel`], [`crate::spmm_tune`], ...: C = A^T B), with
/// the map from its entries to A's, so that its values follow A's on the device ([`CsrTranspose::refresh`]).
pub struct CsrTranspose<T: Scalar> {
    matrix: DeviceCsr<T>,
    /// For each entry of A^T in CSR order, the index of the same entry among A's values: nnz entries (one where
    /// nnz is 0), a permutation of 0..nnz.
    source: CudaSlice<i32>,
    /// A's identity, which stays while A's structure does ([`DeviceCsr::set_values`] keeps it).
    of: u64,
}

/// The per-column counters the device transposition may take beyond four per entry: 2^24 ints (64 MB).
const DEVICE_COUNTERS: usize = 1 << 24;

/// The most parts of rows the device transposition takes: more only add counters to clear and walk. On the H200
/// (NOTES.md step 108), 512 parts instead of one per row took the kernels of 4096^2 at 80% from 1.6 to 0.4 ms and
/// of 8192 x 2048 at 90% from 2.3 to 0.25 ms.
const DEVICE_MAX_PARTS: usize = 1024;

/// How many parts of consecutive rows (one warp each) the device transposition cuts A (rows x cols, nnz entries)
/// into, or None where the host transposes it: an empty A, or one whose counters (parts x cols ints, at most
/// 4 nnz + 2^24) leave fewer than min(rows, 256) parts, so that a warp would walk thousands of rows (very wide,
/// very sparse matrices).
pub(crate) fn device_parts(rows: usize, cols: usize, nnz: usize) -> Option<usize> {
    if rows == 0 || cols == 0 || nnz == 0 {
        return None;
    }
    let parts = rows.min((4 * nnz + DEVICE_COUNTERS) / cols).min(DEVICE_MAX_PARTS);
    (parts >= rows.min(256)).then_some(parts)
}

/// A^T's structure on the device (row offsets, column indices, and the map from its entries to A's) with what an
/// upload derives from it.
type Transposition = (HostDerived, (CudaSlice<i32>, CudaSlice<i32>, CudaSlice<i32>));

/// The transposition on the host ([`transpose_structure`]): one download of A's structure, the counting sort, then
/// the uploads beside what an upload derives (on rayon's threads; the driver's calls stay on this thread).
fn host_transposition<T: Scalar>(gpu: &Gpu, a: &DeviceCsr<T>) -> Result<Transposition> {
    let (offsets, columns) = a.read_structure(gpu)?;
    let (indptr, indices) = (to_usize(&offsets), to_usize(&columns));
    drop((offsets, columns));
    let t = transpose_structure(a.rows, a.cols, &indptr, &indices);
    drop((indptr, indices));
    let derive = || HostDerived::checked::<T>(a.rows, &t.indptr, &t.indices);
    let copies = || -> Result<_> {
        let row_offsets = upload_slice(gpu, &to_i32(&t.indptr), "uploading the transpose's row offsets")?;
        let column_indices = upload_slice(gpu, &to_i32(&t.indices), "uploading the transpose's column indices")?;
        let source = upload_slice(gpu, &t.source, "uploading the transpose's entry map")?;
        Ok((row_offsets, column_indices, source))
    };
    if in_parallel(a.cols + a.nnz) {
        std::thread::scope(|scope| {
            let side = scope.spawn(derive);
            let copies = copies();
            Ok((side.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)), copies?))
        })
    } else {
        Ok((derive(), copies()?))
    }
}

/// The transposition on the device (cuda/util/transpose.cuh) in `parts` parts of rows: the counts, their prefixes
/// over the parts, one download of the column totals (scanned here into A^T's row pointer, uploaded), the
/// placement; then one download of A^T's column indices for what an upload derives.
fn device_transposition<T: Scalar>(gpu: &Gpu, a: &DeviceCsr<T>, parts: usize) -> Result<Transposition> {
    let (rows, cols, nnz) = (a.rows, a.cols, a.nnz);
    let stream = gpu.stream();
    let zeros = |len: usize, what| stream.alloc_zeros::<i32>(len.max(1)).map_err(Error::driver(what, 4 * len));
    let mut counters = zeros(parts * cols, "allocating the transposition's counters")?;
    let mut totals = zeros(cols, "allocating the transposition's column totals")?;
    let mut column_indices = zeros(nnz, "allocating the transpose's column indices")?;
    let mut source = zeros(nnz, "allocating the transpose's entry map")?;
    // One warp per part, eight per block.
    let warps = cudarc::driver::LaunchConfig {
        grid_dim: ((parts * 32).div_ceil(256) as u32, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    // Rows, columns and parts fit in i32 (checked at upload; parts <= rows).
    let (rows_i, cols_i, parts_i) = (rows as i32, cols as i32, parts as i32);
    let count = gpu.function(Family::Util, "ts_transpose_count")?;
    // SAFETY: A's row pointer holds rows + 1 offsets and its column indices nnz columns below cols (validated at
    // upload); the counters hold parts x cols ints; the kernel touches nothing else.
    unsafe {
        stream
            .launch_builder(&count)
            .arg(&a.row_offsets)
            .arg(&a.column_indices)
            .arg(&rows_i)
            .arg(&cols_i)
            .arg(&parts_i)
            .arg(&mut counters)
            .launch(warps)
    }
    .map_err(Error::driver("launching the transposition's count", 0))?;
    let offsets = gpu.function(Family::Util, "ts_transpose_offsets")?;
    // SAFETY: the counters hold parts x cols ints and the totals cols; one thread per column in a strided loop.
    unsafe {
        stream
            .launch_builder(&offsets)
            .arg(&mut counters)
            .arg(&parts_i)
            .arg(&cols_i)
            .arg(&mut totals)
            .launch(crate::kernels::grid_stride_launch(cols))
    }
    .map_err(Error::driver("launching the transposition's offsets", 0))?;
    let totals = download_slice_i32(gpu, &totals, cols, "downloading the transpose's row lengths")?;
    let mut t_indptr = Vec::with_capacity(cols + 1);
    t_indptr.push(0usize);
    let mut at = 0usize;
    for &length in &totals {
        at += length as usize;
        t_indptr.push(at);
    }
    debug_assert_eq!(at, nnz);
    let row_offsets = upload_slice(gpu, &to_i32(&t_indptr), "uploading the transpose's row offsets")?;
    let place = gpu.function(Family::Util, "ts_transpose_place")?;
    // SAFETY: as for the count; the row offsets hold cols + 1 offsets ending at nnz, and the column indices and the
    // map nnz ints each: every entry goes to its own slot below nnz (the offsets are the counts' prefixes).
    unsafe {
        stream
            .launch_builder(&place)
            .arg(&a.row_offsets)
            .arg(&a.column_indices)
            .arg(&rows_i)
            .arg(&cols_i)
            .arg(&parts_i)
            .arg(&row_offsets)
            .arg(&mut counters)
            .arg(&mut column_indices)
            .arg(&mut source)
            .launch(warps)
    }
    .map_err(Error::driver("launching the transposition's placement", 0))?;
    drop(counters);
    let t_indices = to_usize(&download_slice_i32(gpu, &column_indices, nnz, "reading back the transpose")?);
    let host = HostDerived::checked::<T>(rows, &t_indptr, &t_indices);
    Ok((host, (row_offsets, column_indices, source)))
}

/// The first `len` ints of a device buffer ([`super::download_slice`]).
fn download_slice_i32(gpu: &Gpu, buffer: &CudaSlice<i32>, len: usize, what: &'static str) -> Result<Vec<i32>> {
    super::download_slice(gpu, &buffer.slice(..len), what)
}

impl<T: Scalar> DeviceCsr<T> {
    /// A^T (cols x rows) on the device, with A's values: for C = A^T B with any SpMM kernel. The structure is
    /// transposed on the device (on the host where A is very wide and very sparse) by a counting sort by column in
    /// row order, so the rows of A^T are sorted and the result is the same on every run. A^T's structure is then
    /// read back once for the statistics and block counts an upload computes, so a transposition costs about what
    /// an upload of A does. The values are gathered from A's on the device. When A's values change and its
    /// structure stays (a weight being trained), [`CsrTranspose::refresh`] brings them over on the device, with no
    /// transposition; [`DeviceCsr::transposed`] keeps a transpose with A that every change of A's values reaches
    /// by itself.
    pub fn transpose(&self, gpu: &Gpu) -> Result<CsrTranspose<T>> {
        self.check_gpu(gpu, "the sparse matrix")?;
        gpu.refuse_while_recording("transposing a sparse matrix")?;
        let (host, (row_offsets, column_indices, source)) = match device_parts(self.rows, self.cols, self.nnz) {
            Some(parts) => device_transposition(gpu, self, parts)?,
            None => host_transposition(gpu, self)?,
        };
        let bytes = self.nnz.max(1) * std::mem::size_of::<T>();
        let mut values = gpu
            .stream()
            .alloc_zeros::<T>(self.nnz.max(1))
            .map_err(Error::driver("allocating the transpose's values", bytes))?;
        gather(gpu, &self.values, &source, &mut values, self.nnz)?;
        let parts = (row_offsets, column_indices, values);
        let mut matrix = DeviceCsr::validated(gpu, (self.cols, self.rows, self.nnz), parts, host)?;
        // The same values, in another order.
        matrix.non_finite = self.non_finite;
        Ok(CsrTranspose { matrix, source, of: self.id })
    }
}

impl<T: Scalar> DeviceCsr<T> {
    /// A^T, made on first use ([`DeviceCsr::transpose`]) and kept with this matrix: every later change of its values
    /// ([`DeviceCsr::set_values`], [`DeviceCsr::set_values_from_device`], [`DeviceCsr::update_values`]) is gathered
    /// into A^T on the device in the same call, so a product with it cannot see stale values. For C = A^T B, e.g. a
    /// layer's backward pass: `spmm_auto(&gpu, a.transposed(&gpu)?, &dy, &mut dx)`. It holds a second copy of A on
    /// the device until A is dropped, its structure is rewritten, or [`DeviceCsr::forget_transposed`].
    pub fn transposed(&self, gpu: &Gpu) -> Result<&DeviceCsr<T>> {
        self.check_gpu(gpu, "the sparse matrix")?;
        if let Some(t) = self.transposed.get() {
            return Ok(&t.matrix);
        }
        let _ = self.transposed.set(Box::new(self.transpose(gpu)?));
        Ok(&self.transposed.get().expect("set just above").matrix)
    }

    /// Frees A^T made by [`DeviceCsr::transposed`]; a later call makes it again.
    pub fn forget_transposed(&mut self) {
        self.transposed = OnceLock::new();
    }

    /// [`DeviceCsr::keep_tensor_core_blocks_of`] for the A^T that [`DeviceCsr::transposed`] made (nothing where it
    /// made none): after tuning a product with A^T, keep only the chosen kernel's blocks, which every change of
    /// A's values rewrites.
    pub fn keep_transposed_tensor_core_blocks_of(&mut self, kernel: &crate::SpmmKernel) {
        if let Some(t) = self.transposed.get_mut() {
            t.keep_tensor_core_blocks_of(kernel);
        }
    }
}

impl<T: Scalar> CsrTranspose<T> {
    /// A^T, to multiply with ([`crate::spmm_auto`] and the other products take it as any [`DeviceCsr`]).
    pub fn matrix(&self) -> &DeviceCsr<T> {
        &self.matrix
    }

    /// Gives up the map to A's entries and keeps A^T alone.
    pub fn into_matrix(self) -> DeviceCsr<T> {
        self.matrix
    }

    /// [`DeviceCsr::keep_tensor_core_blocks_of`] for A^T: after tuning it, keep only the chosen kernel's blocks,
    /// which every [`CsrTranspose::refresh`] rewrites.
    pub fn keep_tensor_core_blocks_of(&mut self, kernel: &crate::SpmmKernel) {
        self.matrix.keep_tensor_core_blocks_of(kernel);
    }

    /// A's values as they are now, into A^T: one gather on the device and the rewrite of A^T's tensor-core blocks
    /// ([`DeviceCsr::update_values`]), queued on the stream with no synchronisation. For after
    /// [`DeviceCsr::set_values`] or [`DeviceCsr::update_values`] on A. `a` must be the matrix this was made from,
    /// or one with the same structure that kept its identity: else [`Error::PatternMismatch`] (transpose the new
    /// structure instead). [`DeviceCsr::holds_non_finite`] becomes A's.
    pub fn refresh(&mut self, gpu: &Gpu, a: &DeviceCsr<T>) -> Result<()> {
        a.check_gpu(gpu, "the sparse matrix")?;
        if a.id != self.of {
            return Err(Error::PatternMismatch(format!(
                "this transpose was made from another matrix than A ({} x {} with {} entries; the transpose is {} x \
                 {}): refresh it from the matrix it was made from, or transpose A with DeviceCsr::transpose",
                a.rows, a.cols, a.nnz, self.matrix.rows, self.matrix.cols
            )));
        }
        self.gather_values(gpu, &a.values, a.non_finite)
    }

    /// A^T's values gathered from `values` (A's, in CSR order), then its tensor-core blocks rewritten; `non_finite`
    /// is A's [`DeviceCsr::holds_non_finite`].
    pub(crate) fn gather_values(&mut self, gpu: &Gpu, values: &CudaSlice<T>, non_finite: Option<bool>) -> Result<()> {
        let source = &self.source;
        let count = self.matrix.nnz;
        self.matrix.update_values(gpu, |dst| gather(gpu, values, source, dst, count))?;
        self.matrix.non_finite = non_finite;
        Ok(())
    }
}

/// dst[i] = src[from[i]] for i < count, on the device (`ts_gather_b16`/`_b32`/`_b64` in cuda/util/util.cu).
/// `from` holds count indices into src, each below its length (a transposition's map), and dst at least count
/// elements.
fn gather<T: Scalar>(
    gpu: &Gpu,
    src: &CudaSlice<T>,
    from: &CudaSlice<i32>,
    dst: &mut impl DevicePtrMut<T>,
    count: usize,
) -> Result<()> {
    assert!(from.len() >= count && dst.len() >= count, "gather: buffers too short");
    if count == 0 {
        return Ok(());
    }
    let name = match std::mem::size_of::<T>() {
        2 => "ts_gather_b16",
        4 => "ts_gather_b32",
        8 => "ts_gather_b64",
        size => unreachable!("no scalar type of {size} bytes"),
    };
    let function = gpu.function(Family::Util, name)?;
    let stream = gpu.stream();
    let cfg = crate::kernels::grid_stride_launch(count);
    let count = i32::try_from(count).expect("nnz fits in i32: checked at upload");
    let (src_ptr, _gs) = src.device_ptr(stream);
    let (from_ptr, _gf) = from.device_ptr(stream);
    let (dst_ptr, _gd) = dst.device_ptr_mut(stream);
    // SAFETY: the kernel reads count indices from `from`, each indexing src (a permutation of A's entries, made
    // with it), and writes count elements of dst (checked above), all of T's size, the size its name says; its
    // loop strides over any grid.
    unsafe { stream.launch_builder(&function).arg(&src_ptr).arg(&from_ptr).arg(&dst_ptr).arg(&count).launch(cfg) }
        .map_err(Error::driver("launching the gather of the transpose's values", 0))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{device_parts, transpose_structure, TransposedStructure};

    #[test]
    fn device_transposition_where_the_counters_leave_enough_parts() {
        // The GPU tests' shapes (tests/spmm.rs), with about their entry counts: every one on the device but the
        // empty one and the very wide one, which the host transposes.
        assert_eq!(device_parts(600, 300, 10_000), Some(600));
        assert_eq!(device_parts(3000, 50, 75_000), Some(1024));
        assert_eq!(device_parts(37, 1000, 1850), Some(37));
        assert_eq!(device_parts(1000, 37, 7400), Some(1000));
        assert_eq!(device_parts(1, 500, 150), Some(1));
        assert_eq!(device_parts(500, 1, 150), Some(500));
        assert_eq!(device_parts(20, 30, 0), None);
        assert_eq!(device_parts(4000, 6000, 80_000), Some(1024));
        assert_eq!(device_parts(300, 400_000, 120_000), None);
        // The benches' shapes: a 1536 x 384 weight, 4096^2 at 80%, and a power law of 2^16 rows of 8 (288 parts, as
        // many as its counters allow); a power law of 2^20 rows of 8 goes to the host (51 parts).
        assert_eq!(device_parts(1536, 384, 176_947), Some(1024));
        assert_eq!(device_parts(4096, 4096, 3_355_437), Some(1024));
        assert_eq!(device_parts(1 << 16, 1 << 16, 1 << 19), Some(288));
        assert_eq!(device_parts(1 << 20, 1 << 20, 8 << 20), None);
        // Counters never past 4 per entry plus 2^24.
        for (rows, cols, nnz) in [(1 << 20, 1 << 10, 1 << 22), (3, 7, 5), (1 << 16, 1 << 16, 1 << 19)] {
            let parts = device_parts(rows, cols, nnz).unwrap();
            assert!(parts * cols <= 4 * nnz + (1 << 24) && parts <= rows.min(1024));
        }
    }

    /// Where `t` is not A^T's structure by sprs (an independent reference) with a map that sends each of its entries
    /// to the entry of A at (its column, its row), each entry of A once.
    fn mismatch(a: &sprs::CsMat<f64>, t: &TransposedStructure) -> Option<String> {
        let indptr = a.indptr().to_proper().to_vec();
        let want = a.transpose_view().to_csr();
        if t.indptr != want.indptr().to_proper().to_vec() || t.indices != want.indices() {
            return Some("the structure differs from sprs's transpose".into());
        }
        let mut seen = vec![false; a.nnz()];
        for c in 0..a.cols() {
            for j in t.indptr[c]..t.indptr[c + 1] {
                let (r, e) = (t.indices[j], t.source[j] as usize);
                if e >= a.nnz() || seen[e] || !(indptr[r]..indptr[r + 1]).contains(&e) || a.indices()[e] != c {
                    return Some(format!("entry {j} of A^T ({c}, {r}) maps to entry {e} of A"));
                }
                seen[e] = true;
            }
        }
        None
    }

    fn transposed(a: &sprs::CsMat<f64>) -> TransposedStructure {
        transpose_structure(a.rows(), a.cols(), a.indptr().to_proper().as_ref(), a.indices())
    }

    #[test]
    fn transpose_structure_matches_sprs_in_any_pool() {
        let f64s = |a: sprs::CsMat<f32>| a.map(|&v| v as f64);
        let mut cases = vec![
            sprs::CsMat::<f64>::zero((0, 0)),
            sprs::CsMat::zero((3, 5)),
            sprs::CsMat::zero((4, 0)),
            // One row, one column, rectangular both ways.
            f64s(crate::gen::uniform_random(1, 700, 0.3, 1)),
            f64s(crate::gen::uniform_random(700, 1, 0.3, 2)),
            f64s(crate::gen::uniform_random(37, 91, 0.2, 3)),
        ];
        // One dense row among empty ones.
        let mut tri = sprs::TriMat::new((50, 20));
        (0..20).for_each(|c| tri.add_triplet(17, c, 1.0));
        cases.push(tri.to_csr());
        // Large enough for several parts (2^16 rows plus entries), with empty rows and columns: a power law, a tall
        // uniform matrix, and a wide one with fewer entries than columns (one part).
        cases.push(f64s(crate::gen::power_law(30_000, 20_000, 6.0, 1.5, 4)));
        cases.push(f64s(crate::gen::uniform_random(40_000, 300, 0.02, 5)));
        cases.push(f64s(crate::gen::uniform_random(300, 400_000, 0.001, 6)));
        for threads in [1, 3, 7] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            for a in &cases {
                let t = pool.install(|| transposed(a));
                assert_eq!(mismatch(a, &t), None, "{} x {}, {threads} threads", a.rows(), a.cols());
            }
        }
    }

    #[test]
    fn transpose_structure_check_sees_a_wrong_map_or_order() {
        // The check above must fail where two entries of a row of A^T swap places in the map, or in the row.
        let a = crate::gen::uniform_random(60, 40, 0.3, 9).map(|&v| v as f64);
        let t = transposed(&a);
        assert_eq!(mismatch(&a, &t), None);
        let row = (0..40).find(|&c| t.indptr[c + 1] - t.indptr[c] >= 2).unwrap();
        let (j0, j1) = (t.indptr[row], t.indptr[row] + 1);
        let mut map_swapped = t.clone();
        map_swapped.source.swap(j0, j1);
        assert!(mismatch(&a, &map_swapped).is_some());
        let mut rows_swapped = t.clone();
        rows_swapped.indices.swap(j0, j1);
        assert!(mismatch(&a, &rows_swapped).is_some());
        let mut last_moved = t;
        *last_moved.indptr.last_mut().unwrap() += 1;
        assert!(mismatch(&a, &last_moved).is_some());
    }
}
