//! Matrix Market I/O: coordinate matrices into CSR, dense vectors as `array` files.
//!
//! Files may be gzip-compressed; compression is detected from the gzip magic bytes
//! on read (so a misnamed file still works) and chosen by a `.gz` suffix on write.

use crate::scalar::Scalar;
use flate2::read::MultiGzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;
use sprs::{CsMat, CsMatView};
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::num::IntErrorKind;
use std::path::Path;

/// Why reading or writing a Matrix Market file failed.
#[derive(Debug, thiserror::Error)]
pub enum MtxError {
    /// The file could not be opened, read, decompressed or written.
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The file's content is not a Matrix Market file this module accepts.
    #[error("{path}:{line}: {msg}")]
    Parse { path: String, line: usize, msg: String },
}

/// What the header and comments of a coordinate file said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MtxInfo {
    /// `real`, `integer` or `pattern` (lower-cased).
    pub field: String,
    /// `general`, `symmetric` or `skew-symmetric` (lower-cased).
    pub symmetry: String,
    /// The `%` comment lines after the header, without the leading `%`s and
    /// surrounding whitespace (the shipped matrices keep their provenance here).
    pub comments: Vec<String>,
}

/// Reads a coordinate Matrix Market file (plain or gzip) into CSR.
///
/// `pattern` entries become 1.0; symmetric and skew-symmetric storage is mirrored to
/// both triangles (diagonal once, skew mirror negated); duplicates are summed; column
/// indices come out sorted and unique. Explicit zeros stay stored entries, because
/// real matrices carry them as structure.
///
/// As the Matrix Market spec requires, a symmetric or skew-symmetric file must be
/// square and store only its lower triangle (row >= column; strictly lower for
/// skew-symmetric), and `pattern skew-symmetric` is refused. Rows and columns are
/// limited to `i32::MAX` because the kernels index with 32-bit ints.
pub fn read_matrix_market(path: &Path) -> Result<(CsMat<f64>, MtxInfo), MtxError> {
    let name = path.display().to_string();
    read_matrix_market_from(open(path)?, &name)
}

/// [`read_matrix_market`] from any reader; `name` is only used in error messages.
pub fn read_matrix_market_from<R: BufRead>(reader: R, name: &str) -> Result<(CsMat<f64>, MtxInfo), MtxError> {
    let mut lines = Lines::new(reader, name);
    let header = lines.header()?;
    if header.format != "coordinate" {
        return Err(lines.err_at(1, format!("format '{}' not supported (expected coordinate)", header.format)));
    }
    let field = match header.field.as_str() {
        "real" => Field::Real,
        "integer" => Field::Integer,
        "pattern" => Field::Pattern,
        other => {
            return Err(lines.err_at(1, format!("field '{other}' not supported (expected real, integer or pattern)")))
        }
    };
    let symmetry = match header.symmetry.as_str() {
        "general" => Symmetry::General,
        "symmetric" => Symmetry::Symmetric,
        "skew-symmetric" => Symmetry::SkewSymmetric,
        other => {
            return Err(lines.err_at(
                1,
                format!("symmetry '{other}' not supported (expected general, symmetric or skew-symmetric)"),
            ))
        }
    };
    if matches!((field, symmetry), (Field::Pattern, Symmetry::SkewSymmetric)) {
        // The spec forbids it: a pattern has no values whose mirror could be negated.
        return Err(lines.err_at(1, "'pattern skew-symmetric' is not allowed by the Matrix Market format".into()));
    }

    let Some(size) = lines.next_data()? else {
        return Err(lines.err("missing size line".into()));
    };
    let [rows, cols, nnz] = parse_ints::<3>(size).map_err(|msg| lines.err(msg))?;
    check_dims(rows, cols).map_err(|msg| lines.err(msg))?;
    if symmetry != Symmetry::General && rows != cols {
        // Mirroring (i, j) to (j, i) needs both to be in range.
        return Err(
            lines.err(format!("a {} matrix must be square, the size line declares {rows} x {cols}", header.symmetry))
        );
    }
    let size_line = lines.line_no;
    // A declared nnz is only a hint: a tiny file may claim 10^12 entries.
    let mut triplets = Triplets::new(rows, cols, nnz.min(1 << 24)).map_err(|msg| lines.err(msg))?;
    let mut seen = 0usize;
    while let Some(line) = lines.next_data()? {
        if seen == nnz {
            return Err(lines.err(format!("more entries than the {nnz} the size line declares")));
        }
        let (i, j, v) = parse_entry(line, field, rows, cols).map_err(|msg| lines.err(msg))?;
        if symmetry != Symmetry::General && i < j {
            // Accepting it would silently double an entry that the file also stores below the diagonal.
            return Err(lines.err(format!(
                "entry ({}, {}) is above the diagonal; a {} file stores only the lower triangle",
                i + 1,
                j + 1,
                header.symmetry
            )));
        }
        if symmetry == Symmetry::SkewSymmetric && i == j {
            return Err(lines.err(format!(
                "diagonal entry ({0}, {0}) in a skew-symmetric file, whose diagonal is zero and not stored",
                i + 1
            )));
        }
        triplets.push(i, j, v).map_err(|msg| lines.err(msg))?;
        match symmetry {
            Symmetry::General => {}
            _ if i == j => {}
            Symmetry::Symmetric => triplets.push(j, i, v).map_err(|msg| lines.err(msg))?,
            Symmetry::SkewSymmetric => triplets.push(j, i, -v).map_err(|msg| lines.err(msg))?,
        }
        seen += 1;
    }
    if seen != nnz {
        return Err(lines.err(format!("file ends after {seen} entries, the size line declares {nnz}")));
    }

    let a = triplets.into_csr().map_err(|msg| lines.err_at(size_line, msg))?;
    let info = MtxInfo { field: header.field, symmetry: header.symmetry, comments: lines.comments };
    Ok((a, info))
}

/// Writes `a` as `coordinate real general`, 1-based, in row-major order; a path ending
/// in `.gz` is gzip-compressed. Values use Rust's shortest round-trip `{:e}` form, so
/// reading the file back gives the same f64 values (NaN and infinities included).
pub fn write_matrix_market<T: Scalar>(path: &Path, a: CsMatView<T>) -> Result<(), MtxError> {
    // A CSC view would iterate column by column; the format promises row-major order.
    let csr = if a.is_csr() { None } else { Some(a.to_csr()) };
    let a = csr.as_ref().map_or(a, |c| c.view());
    with_writer(path, |w| {
        writeln!(w, "%%MatrixMarket matrix coordinate real general")?;
        writeln!(w, "% written by tilesparse")?;
        writeln!(w, "{} {} {}", a.rows(), a.cols(), a.nnz())?;
        for (i, row) in a.outer_iterator().enumerate() {
            for (j, v) in row.iter() {
                writeln!(w, "{} {} {:e}", i + 1, j + 1, v.to_f64())?;
            }
        }
        Ok(())
    })
}

/// Writes `v` as a `len x 1` `array real general` file (`.gz` suffix => gzip).
pub fn write_dense_vector<T: Scalar>(path: &Path, v: &[T]) -> Result<(), MtxError> {
    with_writer(path, |w| {
        writeln!(w, "%%MatrixMarket matrix array real general")?;
        writeln!(w, "{} 1", v.len())?;
        for x in v {
            writeln!(w, "{:e}", x.to_f64())?;
        }
        Ok(())
    })
}

/// Reads a dense vector written as an `array real|integer general` file whose shape
/// is `len x 1` or `1 x len`, one value per line (plain or gzip).
pub fn read_dense_vector(path: &Path) -> Result<Vec<f64>, MtxError> {
    let name = path.display().to_string();
    read_dense_vector_from(open(path)?, &name)
}

/// [`read_dense_vector`] from any reader; `name` is only used in error messages.
fn read_dense_vector_from<R: BufRead>(reader: R, name: &str) -> Result<Vec<f64>, MtxError> {
    let mut lines = Lines::new(reader, name);
    let header = lines.header()?;
    let supported =
        header.format == "array" && matches!(header.field.as_str(), "real" | "integer") && header.symmetry == "general";
    if !supported {
        return Err(lines.err_at(
            1,
            format!("expected 'array real general', found '{} {} {}'", header.format, header.field, header.symmetry),
        ));
    }
    let field = if header.field == "integer" { Field::Integer } else { Field::Real };
    let Some(size) = lines.next_data()? else {
        return Err(lines.err("missing size line".into()));
    };
    let [rows, cols] = parse_ints::<2>(size).map_err(|msg| lines.err(msg))?;
    check_dims(rows, cols).map_err(|msg| lines.err(msg))?;
    if rows != 1 && cols != 1 {
        return Err(lines.err(format!("{rows} x {cols} is not a vector")));
    }
    let len = rows * cols;
    let mut v: Vec<f64> = with_capacity(len.min(1 << 24), "the vector").map_err(|msg| lines.err(msg))?;
    while let Some(line) = lines.next_data()? {
        if v.len() == len {
            return Err(lines.err(format!("more than the {len} values the size line declares")));
        }
        let mut tokens = line.split_ascii_whitespace();
        let parsed = match (tokens.next(), tokens.next()) {
            (Some(t), None) => parse_value(t, field),
            _ => Err(format!("expected one value per line: '{line}'")),
        };
        let x = parsed.map_err(|msg| lines.err(msg))?;
        v.try_reserve(1).map_err(|_| lines.err(alloc_msg::<f64>("the vector", v.len() + 1)))?;
        v.push(x);
    }
    if v.len() != len {
        return Err(lines.err(format!("file ends after {} values, the size line declares {len}", v.len())));
    }
    Ok(v)
}

/// How entry values are spelled.
#[derive(Clone, Copy)]
enum Field {
    Real,
    Integer,
    Pattern,
}

/// Which entries a coordinate file stores.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Symmetry {
    General,
    Symmetric,
    SkewSymmetric,
}

/// The four words after `%%MatrixMarket matrix`, lower-cased (the format is
/// case-insensitive).
struct Header {
    format: String,
    field: String,
    symmetry: String,
}

/// Line reader that counts lines (for error messages) and collects comments.
struct Lines<'n, R> {
    reader: R,
    name: &'n str,
    line_no: usize,
    buf: String,
    comments: Vec<String>,
}

impl<'n, R: BufRead> Lines<'n, R> {
    fn new(reader: R, name: &'n str) -> Self {
        Lines { reader, name, line_no: 0, buf: String::new(), comments: Vec::new() }
    }

    fn err_at(&self, line: usize, msg: String) -> MtxError {
        MtxError::Parse { path: self.name.to_string(), line, msg }
    }

    /// A parse error at the line read last (or the line after the end of the file).
    fn err(&self, msg: String) -> MtxError {
        self.err_at(self.line_no.max(1), msg)
    }

    /// The next raw line without its line terminator, or `None` at the end.
    fn next_raw(&mut self) -> Result<Option<&str>, MtxError> {
        self.buf.clear();
        let n = self
            .reader
            .read_line(&mut self.buf)
            .map_err(|source| MtxError::Io { path: self.name.to_string(), source })?;
        if n == 0 {
            // Errors about a missing line point just past the last one.
            self.line_no += 1;
            return Ok(None);
        }
        self.line_no += 1;
        Ok(Some(self.buf.trim_end_matches(['\n', '\r'])))
    }

    /// The next line that is neither blank nor a comment; comments are kept.
    fn next_data(&mut self) -> Result<Option<&str>, MtxError> {
        loop {
            let Some(line) = self.next_raw()? else {
                return Ok(None);
            };
            let t = line.trim();
            if let Some(c) = t.strip_prefix('%') {
                let c = c.trim_start_matches('%').trim().to_string();
                self.comments.push(c);
            } else if !t.is_empty() {
                // Re-borrow so the returned slice is tied to `self.buf` only.
                return Ok(Some(self.buf.trim()));
            }
        }
    }

    /// Parses the `%%MatrixMarket matrix <format> <field> <symmetry>` first line.
    fn header(&mut self) -> Result<Header, MtxError> {
        let Some(line) = self.next_raw()? else {
            return Err(self.err_at(1, "empty file".into()));
        };
        let words: Vec<String> = line.split_ascii_whitespace().map(|w| w.to_ascii_lowercase()).collect();
        match words.as_slice() {
            [banner, object, format, field, symmetry] if banner == "%%matrixmarket" => {
                if object != "matrix" {
                    return Err(self.err_at(1, format!("object '{object}' not supported")));
                }
                Ok(Header { format: format.clone(), field: field.clone(), symmetry: symmetry.clone() })
            }
            _ => Err(self.err_at(1, "expected '%%MatrixMarket matrix <format> <field> <symmetry>'".into())),
        }
    }
}

/// The largest row or column count: the kernels index with 32-bit ints.
const MAX_DIM: usize = i32::MAX as usize;

/// Exactly `N` non-negative integers separated by whitespace.
fn parse_ints<const N: usize>(line: &str) -> Result<[usize; N], String> {
    let mut out = [0usize; N];
    let mut tokens = line.split_ascii_whitespace();
    for slot in out.iter_mut() {
        let t = tokens.next().ok_or_else(|| format!("size line needs {N} integers: '{line}'"))?;
        *slot = t.parse().map_err(|_| {
            if is_integer(t) && !t.starts_with('-') {
                format!("'{t}' exceeds {MAX_DIM}: the library indexes with 32-bit ints")
            } else {
                format!("'{t}' is not a non-negative integer")
            }
        })?;
    }
    if tokens.next().is_some() {
        return Err(format!("size line needs {N} integers: '{line}'"));
    }
    Ok(out)
}

/// Rejects shapes the library cannot index, before anything is allocated for them.
fn check_dims(rows: usize, cols: usize) -> Result<(), String> {
    if rows > MAX_DIM || cols > MAX_DIM {
        return Err(format!(
            "{rows} x {cols} is too large: the library indexes with 32-bit ints, so rows and columns are at most {MAX_DIM}"
        ));
    }
    Ok(())
}

/// An optionally signed run of ASCII digits (what `str::parse` accepts as an integer).
fn is_integer(t: &str) -> bool {
    let digits = t.strip_prefix(['+', '-']).unwrap_or(t);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// One `i j [value]` line, checked against the shape; returns 0-based indices.
fn parse_entry(line: &str, field: Field, rows: usize, cols: usize) -> Result<(usize, usize, f64), String> {
    let tokens: Vec<&str> = line.split_ascii_whitespace().collect();
    let want = if matches!(field, Field::Pattern) { 2 } else { 3 };
    if tokens.len() != want {
        return Err(format!("expected {want} fields per entry, found {}: '{line}'", tokens.len()));
    }
    let index = |t: &str, dim: usize, what: &str| -> Result<usize, String> {
        if !is_integer(t) {
            return Err(format!("{what} index '{t}' is not an integer"));
        }
        match t.parse::<usize>() {
            Ok(v) if (1..=dim).contains(&v) => Ok(v - 1),
            _ => Err(format!("{what} index '{t}' outside 1..={dim}")),
        }
    };
    let i = index(tokens[0], rows, "row")?;
    let j = index(tokens[1], cols, "column")?;
    let v = match field {
        Field::Pattern => 1.0,
        _ => parse_value(tokens[2], field)?,
    };
    Ok((i, j, v))
}

fn parse_value(t: &str, field: Field) -> Result<f64, String> {
    match field {
        // Integers are parsed as such so that a stray '1.5' in an integer file is caught.
        Field::Integer => t.parse::<i64>().map(|v| v as f64).map_err(|e| match e.kind() {
            IntErrorKind::PosOverflow | IntErrorKind::NegOverflow => {
                format!("'{t}' is outside the 64-bit integer range")
            }
            _ => format!("'{t}' is not an integer"),
        }),
        _ => {
            let v = t.parse::<f64>().map_err(|_| format!("'{t}' is not a number"))?;
            // An explicit 'inf' is data; a finite literal such as 1e400 only rounds to
            // infinity, which would silently turn a typo into an inf in every result.
            let word = t.strip_prefix(['+', '-']).unwrap_or(t);
            let explicit_inf = word.eq_ignore_ascii_case("inf") || word.eq_ignore_ascii_case("infinity");
            if v.is_infinite() && !explicit_inf {
                return Err(format!("'{t}' is beyond the f64 range (it would round to {v})"));
            }
            Ok(v)
        }
    }
}

/// `vec![fill; len]`, or an error naming `what` and its size when the allocation
/// cannot be satisfied (the size comes from the file, so it must not abort).
fn filled<T: Clone>(len: usize, fill: T, what: &str) -> Result<Vec<T>, String> {
    let mut v = with_capacity(len, what)?;
    v.resize(len, fill);
    Ok(v)
}

/// `Vec::with_capacity(len)`, or an error naming `what` and its size.
fn with_capacity<T>(len: usize, what: &str) -> Result<Vec<T>, String> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| alloc_msg::<T>(what, len))?;
    Ok(v)
}

fn alloc_msg<T>(what: &str, len: usize) -> String {
    let bytes = len.saturating_mul(std::mem::size_of::<T>());
    format!("cannot allocate {what}: {len} elements ({bytes} bytes)")
}

/// Unordered (row, col, value) triplets plus per-row counts, gathered while reading.
struct Triplets {
    rows: usize,
    cols: usize,
    /// `start[i + 1]` counts the entries of row i until [`Triplets::into_csr`] turns the
    /// counts into row starts.
    start: Vec<usize>,
    entries: Vec<(usize, usize, f64)>,
}

impl Triplets {
    /// Allocates the row pointer for `rows` (from the size line, so that an impossible
    /// size fails there) and room for `capacity` entries.
    fn new(rows: usize, cols: usize, capacity: usize) -> Result<Self, String> {
        let start = filled(rows + 1, 0usize, &format!("the row pointer for {rows} rows"))?;
        let entries = with_capacity(capacity, "the entry buffer")?;
        Ok(Triplets { rows, cols, start, entries })
    }

    fn push(&mut self, i: usize, j: usize, v: f64) -> Result<(), String> {
        let n = self.entries.len();
        self.entries.try_reserve(1).map_err(|_| alloc_msg::<(usize, usize, f64)>("the entry buffer", n + 1))?;
        self.entries.push((i, j, v));
        self.start[i + 1] += 1;
        Ok(())
    }

    /// Builds CSR: counting sort by row, then a stable sort by column in each row so
    /// that duplicates are summed in file order. `start` is reused as the scatter
    /// cursor and then as the final row pointer, so a file declaring 2e9 rows costs
    /// one rows-sized array, not three.
    fn into_csr(self) -> Result<CsMat<f64>, String> {
        let Triplets { rows, cols, mut start, entries } = self;
        for r in 0..rows {
            start[r + 1] += start[r];
        }
        let n = entries.len();
        let mut by_row = filled(n, (0usize, 0.0f64), &format!("the row-sorted copy of {n} entries"))?;
        for (i, j, v) in entries {
            by_row[start[i]] = (j, v);
            start[i] += 1;
        }
        // Now start[r] is where row r ends. Each row is sorted and its summed entries
        // are compacted to the front of by_row; the write cursor w never passes the
        // read position, and start[r] becomes where row r begins in the result.
        let (mut lo, mut w) = (0, 0);
        for bound in &mut start[..rows] {
            let (hi, row_start) = (*bound, w);
            *bound = row_start;
            by_row[lo..hi].sort_by_key(|&(j, _)| j);
            for k in lo..hi {
                let (j, v) = by_row[k];
                if w > row_start && by_row[w - 1].0 == j {
                    by_row[w - 1].1 += v;
                } else {
                    by_row[w] = (j, v);
                    w += 1;
                }
            }
            lo = hi;
        }
        start[rows] = w;
        by_row.truncate(w);
        let mut indices = with_capacity(w, "the CSR column indices")?;
        let mut data = with_capacity(w, "the CSR values")?;
        for (j, v) in by_row {
            indices.push(j);
            data.push(v);
        }
        Ok(CsMat::new((rows, cols), start, indices, data))
    }
}

/// Opens `path` for reading, through a gzip decoder when it starts with the gzip magic.
fn open(path: &Path) -> Result<Box<dyn BufRead>, MtxError> {
    let io_err = |source| MtxError::Io { path: path.display().to_string(), source };
    let mut reader = BufReader::new(File::open(path).map_err(io_err)?);
    let gzip = reader.fill_buf().map_err(io_err)?.starts_with(&[0x1f, 0x8b]);
    Ok(if gzip { Box::new(BufReader::new(MultiGzDecoder::new(reader))) } else { Box::new(reader) })
}

/// Creates `path` (gzip when it ends in `.gz`), runs `body` on it and flushes, so that
/// late write errors (disk full, gzip trailer) are reported rather than dropped.
fn with_writer(path: &Path, body: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<(), MtxError> {
    let run = || -> io::Result<()> {
        let file = File::create(path)?;
        if path.extension().is_some_and(|e| e == "gz") {
            let mut w = BufWriter::new(GzEncoder::new(file, Compression::default()));
            body(&mut w)?;
            w.into_inner().map_err(|e| e.into_error())?.finish()?;
        } else {
            let mut w = BufWriter::new(file);
            body(&mut w)?;
            w.flush()?;
        }
        Ok(())
    };
    run().map_err(|source| MtxError::Io { path: path.display().to_string(), source })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn parse(text: &str) -> Result<(CsMat<f64>, MtxInfo), MtxError> {
        read_matrix_market_from(text.as_bytes(), "snippet")
    }

    fn parse_error_line(text: &str) -> usize {
        match parse(text) {
            Err(MtxError::Parse { line, .. }) => line,
            other => panic!("expected a parse error, got {other:?}"),
        }
    }

    /// The line and message of the parse error `text` must produce.
    fn parse_error(text: &str) -> (usize, String) {
        match parse(text) {
            Err(MtxError::Parse { line, msg, .. }) => (line, msg),
            other => panic!("expected a parse error, got {other:?}"),
        }
    }

    fn vector_error(text: &str) -> (usize, String) {
        match read_dense_vector_from(text.as_bytes(), "snippet") {
            Err(MtxError::Parse { line, msg, .. }) => (line, msg),
            other => panic!("expected a parse error, got {other:?}"),
        }
    }

    fn tmp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tilesparse-mtx-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    fn data(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
    }

    #[test]
    fn symmetric_pattern_is_mirrored() {
        let text = "%%MatrixMarket matrix coordinate pattern symmetric\n\
                    % a comment\n\
                    \n\
                    3 3 4\n\
                    1 1\n\
                    2 1\n\
                    3 1\n\
                    \n\
                    3 2\n";
        let (a, info) = parse(text).unwrap();
        assert_eq!(info.field, "pattern");
        assert_eq!(info.symmetry, "symmetric");
        assert_eq!(info.comments, vec!["a comment".to_string()]);
        assert_eq!(a.shape(), (3, 3));
        assert_eq!(a.nnz(), 7);
        assert_eq!(a.indptr().raw_storage(), &[0, 3, 5, 7]);
        assert_eq!(a.indices(), &[0, 1, 2, 0, 2, 0, 1]);
        assert!(a.data().iter().all(|&v| v == 1.0));
    }

    #[test]
    fn skew_symmetric_duplicates_and_explicit_zeros() {
        let text = "%%MatrixMarket matrix coordinate real skew-symmetric\n\
                    3 3 4\n\
                    2 1 2.5\n\
                    2 1 0.5\n\
                    3 2 0\n\
                    3 1 -1e0\n";
        let (a, _) = parse(text).unwrap();
        let dense = a.to_dense();
        assert_eq!(dense[[1, 0]], 3.0);
        assert_eq!(dense[[0, 1]], -3.0);
        assert_eq!(dense[[2, 0]], -1.0);
        assert_eq!(dense[[0, 2]], 1.0);
        // The explicit zero and its mirror stay stored.
        assert_eq!(a.nnz(), 6);
        assert_eq!(a.get(2, 1), Some(&0.0));
        assert_eq!(a.get(1, 2), Some(&-0.0));
    }

    #[test]
    fn integer_field_and_case_insensitive_header() {
        let (a, info) = parse("%%MatrixMarket MATRIX Coordinate INTEGER General\n2 2 1\n2 2 -7\n").unwrap();
        assert_eq!(info.field, "integer");
        assert_eq!(a.get(1, 1), Some(&-7.0));
        assert_eq!(parse_error_line("%%MatrixMarket matrix coordinate integer general\n2 2 1\n1 1 1.5\n"), 3);
    }

    #[test]
    fn errors_carry_line_numbers() {
        let head = "%%MatrixMarket matrix coordinate real general\n% c\n2 2 2\n";
        assert_eq!(parse_error_line(&format!("{head}1 1 1\n3 1 1\n")), 5);
        assert_eq!(parse_error_line(&format!("{head}1 1 1\n\n1 0 1\n")), 6);
        assert_eq!(parse_error_line(&format!("{head}1 1 1\n1 2 x\n")), 5);
        assert_eq!(parse_error_line(&format!("{head}1 1 1\n1 2\n")), 5);
        // Too many and too few entries.
        assert_eq!(parse_error_line(&format!("{head}1 1 1\n1 2 1\n2 2 1\n")), 6);
        assert_eq!(parse_error_line(&format!("{head}1 1 1\n")), 5);
        assert_eq!(parse_error_line("%%MatrixMarket matrix coordinate real general\n2 2\n"), 2);
        assert_eq!(parse_error_line(""), 1);
        assert_eq!(parse_error_line("2 2 0\n"), 1);
        assert_eq!(parse_error_line("%%MatrixMarket matrix coordinate complex general\n1 1 0\n"), 1);
        assert_eq!(parse_error_line("%%MatrixMarket matrix array real general\n1 1\n1\n"), 1);
    }

    #[test]
    fn symmetric_storage_must_be_square() {
        // 3 x 2 used to panic while mirroring (3, 1) to column 3; 2 x 3 was accepted.
        for symmetry in ["symmetric", "skew-symmetric"] {
            for (shape, entry) in [("3 2", "3 1"), ("2 3", "2 1")] {
                let text = format!("%%MatrixMarket matrix coordinate real {symmetry}\n{shape} 1\n{entry} 1\n");
                let (line, msg) = parse_error(&text);
                assert_eq!(line, 2, "{symmetry} {shape}");
                let dims = shape.replace(' ', " x ");
                assert!(msg.contains("square") && msg.contains(&dims), "{msg}");
            }
        }
        // Hermitian needs complex values, which are not read at all.
        let (line, msg) = parse_error("%%MatrixMarket matrix coordinate real hermitian\n2 2 0\n");
        assert!(line == 1 && msg.contains("'hermitian' not supported"), "{msg}");
    }

    #[test]
    fn skew_symmetric_rejects_diagonal_and_pattern() {
        let (line, msg) = parse_error("%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 2\n2 1 1\n2 2 0\n");
        assert_eq!(line, 4);
        assert!(msg.contains("diagonal entry (2, 2)"), "{msg}");
        let (line, msg) = parse_error("%%MatrixMarket matrix coordinate pattern skew-symmetric\n2 2 1\n2 1\n");
        assert!(line == 1 && msg.contains("pattern skew-symmetric"), "{msg}");
    }

    #[test]
    fn symmetric_storage_rejects_upper_triangle() {
        // Mirroring an upper entry as well as its lower twin would double it silently.
        for (symmetry, value) in [("real symmetric", " 1"), ("pattern symmetric", ""), ("real skew-symmetric", " 1")] {
            let text = format!("%%MatrixMarket matrix coordinate {symmetry}\n3 3 2\n2 1{value}\n1 3{value}\n");
            let (line, msg) = parse_error(&text);
            assert_eq!(line, 4, "{symmetry}");
            assert!(msg.contains("entry (1, 3) is above the diagonal"), "{msg}");
        }
        // The lower triangle and the diagonal stay fine.
        let (a, _) = parse("%%MatrixMarket matrix coordinate real symmetric\n2 2 2\n2 1 5\n2 2 1\n").unwrap();
        assert_eq!((a.get(0, 1), a.get(1, 0), a.get(1, 1)), (Some(&5.0), Some(&5.0), Some(&1.0)));
    }

    #[test]
    fn sizes_beyond_32_bit_indexing_are_errors() {
        let head = "%%MatrixMarket matrix coordinate real general\n";
        // u64::MAX used to wrap `rows + 1` to 0; 2^31 rows would allocate 16 GB.
        for size in ["18446744073709551615 2 1", "2 18446744073709551616 1", "2147483648 1 0", "1 2147483648 0"] {
            let (line, msg) = parse_error(&format!("{head}{size}\n1 1 1\n"));
            assert_eq!(line, 2, "{size}");
            assert!(msg.contains("32-bit ints"), "{size}: {msg}");
        }
        let (line, msg) = vector_error("%%MatrixMarket matrix array real general\n1099511627776 1\n");
        assert!(line == 2 && msg.contains("32-bit ints"), "{msg}");
        // A huge declared nnz is only a hint for the reservation.
        let (line, msg) = parse_error(&format!("{head}2 2 1000000000000\n1 1 1\n"));
        assert!(line == 4 && msg.contains("file ends after 1 entries"), "{msg}");
    }

    #[test]
    fn impossible_allocations_are_errors() {
        // Over isize::MAX bytes, and 2^62 bytes (beyond any address space): neither may abort.
        let msg = filled(usize::MAX / 4, 0u64, "the row pointer").unwrap_err();
        assert!(msg.contains("the row pointer") && msg.contains(&(usize::MAX / 4).to_string()), "{msg}");
        let msg = with_capacity::<u8>(1 << 62, "the entry buffer").unwrap_err();
        assert!(msg.contains(&(1u64 << 62).to_string()), "{msg}");
        assert_eq!(filled(3, 7u8, "x").unwrap(), vec![7, 7, 7]);
    }

    #[test]
    fn values_that_overflow_f64_are_errors() {
        let head = "%%MatrixMarket matrix coordinate real general\n2 2 1\n";
        for v in ["1e400", "-1e400", "17976931348623159e292"] {
            let (line, msg) = parse_error(&format!("{head}1 1 {v}\n"));
            assert!(line == 3 && msg.contains(v) && msg.contains("f64 range"), "{v}: {msg}");
        }
        for (v, want) in [("inf", f64::INFINITY), ("-Infinity", f64::NEG_INFINITY), ("+INF", f64::INFINITY)] {
            assert_eq!(parse(&format!("{head}1 1 {v}\n")).unwrap().0.get(0, 0), Some(&want), "{v}");
        }
        assert!(parse(&format!("{head}1 1 nan\n")).unwrap().0.get(0, 0).unwrap().is_nan());
        assert_eq!(parse(&format!("{head}1 1 1.7976931348623157e308\n")).unwrap().0.get(0, 0), Some(&f64::MAX));

        let vhead = "%%MatrixMarket matrix array real general\n3 1\n";
        let (line, msg) = vector_error(&format!("{vhead}1\n1e400\n2\n"));
        assert!(line == 4 && msg.contains("f64 range"), "{msg}");
        let v = read_dense_vector_from(format!("{vhead}-inf\nnan\n1e308\n").as_bytes(), "v").unwrap();
        assert!(v[0] == f64::NEG_INFINITY && v[1].is_nan() && v[2] == 1e308);

        let (line, msg) =
            parse_error("%%MatrixMarket matrix coordinate integer general\n1 1 1\n1 1 9223372036854775808\n");
        assert!(line == 3 && msg.contains("64-bit integer range"), "{msg}");
    }

    #[test]
    fn non_integer_index_is_named_as_such() {
        let head = "%%MatrixMarket matrix coordinate real general\n2 2 1\n";
        for (entry, want) in [
            ("1.0 1 1", "row index '1.0' is not an integer"),
            ("1 2e0 1", "column index '2e0' is not an integer"),
            ("x 1 1", "row index 'x' is not an integer"),
            ("3 1 1", "row index '3' outside 1..=2"),
            ("-1 1 1", "row index '-1' outside 1..=2"),
            ("1 99999999999999999999 1", "column index '99999999999999999999' outside 1..=2"),
        ] {
            let (line, msg) = parse_error(&format!("{head}{entry}\n"));
            assert_eq!((line, msg.as_str()), (3, want));
        }
    }

    #[test]
    fn duplicates_are_summed_across_empty_rows() {
        // Rows 1 and 3 are empty, row 2 holds unsorted duplicates; the row pointer is
        // rebuilt in place while entries are compacted, so row boundaries must survive.
        let text = "%%MatrixMarket matrix coordinate real general\n5 4 7\n\
                    5 4 1\n3 4 1\n3 1 2\n1 2 3\n3 4 10\n3 1 -2\n5 4 0.5\n";
        let (a, _) = parse(text).unwrap();
        assert_eq!(a.indptr().raw_storage(), &[0, 1, 1, 3, 3, 4]);
        assert_eq!(a.indices(), &[1, 0, 3, 3]);
        assert_eq!(a.data(), &[3.0, 0.0, 11.0, 1.5]);
    }

    #[test]
    fn round_trip_plain_and_gzip() {
        // Values that need all 17 significant digits, an explicit zero and an empty row.
        let a = CsMat::new(
            (3, 4),
            vec![0, 2, 2, 5],
            vec![1, 3, 0, 1, 2],
            vec![0.1f64, -1.0 / 3.0, 0.0, 1e-300, 6.02214076e23],
        );
        for name in ["rt.mtx", "rt.mtx.gz"] {
            let path = tmp(name);
            write_matrix_market(&path, a.view()).unwrap();
            let (b, info) = read_matrix_market(&path).unwrap();
            assert_eq!(b, a, "{name}");
            assert_eq!(info.field, "real");
        }
        let gz = std::fs::read(tmp("rt.mtx.gz")).unwrap();
        assert_eq!(&gz[..2], &[0x1f, 0x8b]);
        // A CSC view is written in row-major order too.
        let path = tmp("csc.mtx");
        write_matrix_market(&path, a.to_csc().view()).unwrap();
        assert_eq!(read_matrix_market(&path).unwrap().0, a);
    }

    #[test]
    fn round_trip_half_values() {
        let a = CsMat::new((1, 2), vec![0, 2], vec![0, 1], vec![half::f16::from_f32(0.1), half::f16::MAX]);
        let path = tmp("half.mtx");
        write_matrix_market(&path, a.view()).unwrap();
        let (b, _) = read_matrix_market(&path).unwrap();
        assert_eq!(b.data(), &[half::f16::from_f32(0.1).to_f64(), 65504.0]);
    }

    #[test]
    fn dense_vector_round_trip() {
        let v = vec![1.5f32, -0.1, f32::MAX, 0.0];
        for name in ["v.mtx", "v.mtx.gz"] {
            let path = tmp(name);
            write_dense_vector(&path, &v).unwrap();
            let back = read_dense_vector(&path).unwrap();
            let want: Vec<f64> = v.iter().map(|&x| x as f64).collect();
            assert_eq!(back, want);
        }
        let path = tmp("short.mtx");
        std::fs::write(&path, "%%MatrixMarket matrix array real general\n3 1\n1\n2\n").unwrap();
        assert!(matches!(read_dense_vector(&path), Err(MtxError::Parse { line: 5, .. })));
        let missing = tmp("does-not-exist.mtx");
        assert!(matches!(read_dense_vector(&missing), Err(MtxError::Io { .. })));
    }

    #[test]
    fn reads_shipped_matrices() {
        let (a, info) = read_matrix_market(&data("pores_1.mtx.gz")).unwrap();
        assert_eq!(a.shape(), (30, 30));
        assert_eq!(a.nnz(), 180);
        assert!(info.comments[0].starts_with("source: r-cran-matrix"));
        let (w, _) = read_matrix_market(&data("well1850.mtx.gz")).unwrap();
        assert_eq!(w.shape(), (1850, 712));
        assert_eq!(w.nnz(), 8758);
        // well1850 keeps 3 explicit zeros as structure.
        assert_eq!(w.data().iter().filter(|&&v| v == 0.0).count(), 3);
        for (name, shape, nnz) in [
            ("lund_a.mtx.gz", (147, 147), 2449),
            ("utm300.mtx.gz", (300, 300), 3155),
            ("west0479.mtx.gz", (479, 479), 1888),
        ] {
            let (m, _) = read_matrix_market(&data(name)).unwrap();
            assert_eq!((m.shape(), m.nnz()), (shape, nnz), "{name}");
        }
    }
}
