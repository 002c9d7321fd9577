//! CSR validation: every malformed input gets its typed error (no GPU needed), and row statistics.

use tilesparse::csr::{row_swizzle, swizzled_rows, validate, RowStats};
use tilesparse::CsrError;

#[test]
fn valid_csr_passes() {
    assert_eq!(validate(3, 4, &[0, 2, 2, 3], &[0, 3, 1], 3), Ok(()));
    assert_eq!(validate(0, 0, &[0], &[], 0), Ok(()));
}

#[test]
fn each_malformation_has_its_error() {
    assert_eq!(validate(2, 4, &[0, 1], &[0], 1), Err(CsrError::IndptrLength { got: 2, expected: 3 }));
    assert_eq!(validate(1, 4, &[1, 2], &[0], 1), Err(CsrError::IndptrStart(1)));
    // Decreasing pointers are caught before any row is sliced (this one would slice past the end).
    assert_eq!(validate(2, 4, &[0, 2, 1], &[0], 1), Err(CsrError::IndptrNotMonotone { row: 1, start: 2, end: 1 }));
    assert_eq!(validate(2, 4, &[0, 1, 1], &[0, 1], 2), Err(CsrError::LengthMismatch { end: 1, indices: 2, values: 2 }));
    assert_eq!(
        validate(3, 4, &[0, 2, 1, 3], &[0, 1, 2], 3),
        Err(CsrError::IndptrNotMonotone { row: 1, start: 2, end: 1 })
    );
    assert_eq!(validate(1, 4, &[0, 2], &[0, 1], 3), Err(CsrError::LengthMismatch { end: 2, indices: 2, values: 3 }));
    assert_eq!(validate(1, 4, &[0, 2], &[0, 4], 2), Err(CsrError::ColumnOutOfRange { row: 0, col: 4, cols: 4 }));
    assert_eq!(validate(1, 4, &[0, 2], &[2, 1], 2), Err(CsrError::Unsorted { row: 0, prev: 2, col: 1 }));
    assert_eq!(validate(1, 4, &[0, 2], &[2, 2], 2), Err(CsrError::Duplicate { row: 0, col: 2 }));
    let big = i32::MAX as usize + 1;
    assert_eq!(validate(big, 4, &[0], &[], 0), Err(CsrError::TooLarge { what: "rows", value: big }));
    assert_eq!(validate(1, big, &[0, 0], &[], 0), Err(CsrError::TooLarge { what: "columns", value: big }));
}

#[test]
fn row_stats_and_swizzle() {
    let indptr = [0, 3, 3, 4, 9];
    let s = RowStats::from_indptr(&indptr);
    assert_eq!((s.min, s.max, s.empty_rows), (0, 5, 1));
    assert!((s.mean - 2.25).abs() < 1e-12);
    assert_eq!(row_swizzle(&indptr), vec![3, 0, 2, 1]);
    // The same order, each row with its bounds: first entry, end entry, row, 0.
    assert_eq!(swizzled_rows(&indptr), vec![4, 9, 3, 0, 0, 3, 0, 0, 3, 4, 2, 0, 3, 3, 1, 0]);
    assert!(swizzled_rows(&[0]).is_empty());
}

/// A structure large enough that the checks run on rayon's threads: in pools of 1, 2, 3 and 7 threads, the error
/// is the first in row order (the pointers' before the rows'), as a sequential walk would report it.
#[test]
fn large_structures_report_their_first_error_in_row_order() {
    let (rows, cols) = (100_000, 3_000);
    let indptr: Vec<usize> = (0..=rows).map(|r| 3 * r).collect();
    let indices: Vec<usize> = (0..rows).flat_map(|r| [r % 1000, 1000 + r % 1000, 2000 + r % 1000]).collect();
    let nnz = indices.len();
    let mut bad = indices.clone();
    bad[3 * 99_999 + 2] = 5; // row 99,999 unsorted
    bad[3 * 90_000 + 1] = cols; // row 90,000 out of range
    bad[3 * 60_000 + 1] = bad[3 * 60_000]; // row 60,000 duplicate
    let mut bad_ptr = indptr.clone();
    bad_ptr[80_001] = bad_ptr[80_000] - 1; // row 80,000 ends before it starts
    bad_ptr[70_001] = bad_ptr[70_000] - 1;
    for threads in [1, 2, 3, 7] {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        pool.install(|| {
            assert_eq!(validate(rows, cols, &indptr, &indices, nnz), Ok(()));
            let dup = validate(rows, cols, &indptr, &bad, nnz);
            assert_eq!(dup, Err(CsrError::Duplicate { row: 60_000, col: 60_000 % 1000 }), "{threads} threads");
            bad[3 * 60_000 + 1] = indices[3 * 60_000 + 1];
            let range = validate(rows, cols, &indptr, &bad, nnz);
            assert_eq!(range, Err(CsrError::ColumnOutOfRange { row: 90_000, col: cols, cols }), "{threads} threads");
            bad[3 * 90_000 + 1] = indices[3 * 90_000 + 1];
            let unsorted = validate(rows, cols, &indptr, &bad, nnz);
            assert_eq!(unsorted, Err(CsrError::Unsorted { row: 99_999, prev: 1999, col: 5 }), "{threads} threads");
            bad[3 * 60_000 + 1] = bad[3 * 60_000];
            bad[3 * 90_000 + 1] = cols;
            let (start, end) = (bad_ptr[70_000], bad_ptr[70_001]);
            let ptr = validate(rows, cols, &bad_ptr, &bad, nnz);
            assert_eq!(ptr, Err(CsrError::IndptrNotMonotone { row: 70_000, start, end }), "{threads} threads");
        });
    }
}

/// The longest-first order of many rows (a counting sort; the bounds filled in parallel) is the stable sort's: by
/// length, ties by row.
#[test]
fn large_swizzle_is_the_stable_order() {
    let rows = 200_000;
    let lens: Vec<usize> = (0..rows).map(|r| (r * 7919) % 13).collect();
    let indptr: Vec<usize> = std::iter::once(0)
        .chain(lens.iter().scan(0, |s, &l| {
            *s += l;
            Some(*s)
        }))
        .collect();
    let order = row_swizzle(&indptr);
    assert_eq!(order.len(), rows);
    for w in order.windows(2) {
        let (a, b) = (w[0] as usize, w[1] as usize);
        assert!(lens[a] > lens[b] || (lens[a] == lens[b] && a < b), "rows {a} then {b}");
    }
    let bounds = swizzled_rows(&indptr);
    for (i, &r) in order.iter().enumerate() {
        let r = r as usize;
        assert_eq!(bounds[4 * i..4 * i + 4], [indptr[r] as i32, indptr[r + 1] as i32, r as i32, 0]);
    }
}
