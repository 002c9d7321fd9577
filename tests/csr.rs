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
